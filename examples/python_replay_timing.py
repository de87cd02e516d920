"""Times one replay through the Python package against the CLI (docs/BENCHMARKS.md).

    cargo build --release && pip install . && python examples/python_replay_timing.py

Runs the Mooncake conversation trace on scenarios/dynamo-mocker.toml (8 workers, Dynamo's
router, 4x speedup) three times each way, alternating, checks the reports are equal and prints
the median wall times: the CLI's as a whole process, Python's as the `dynsim.run` call.
"""

import json
import pathlib
import subprocess
import sys
import time

import dynsim

REPO = pathlib.Path(__file__).resolve().parents[1]
TRACE = REPO / "data" / "traces" / "mooncake_conversation_trace.jsonl"
BIN = sys.argv[1] if len(sys.argv) > 1 else str(REPO / "target" / "release" / "dynsim")
CLI = [BIN, "replay", str(TRACE), "--scenario", "scenarios/dynamo-mocker.toml", "--workers", "8",
       "--policy", "dynamo", "--set", "workload.speedup=4", "--json"]
SETS = {"workload.path": str(TRACE), "cluster.workers": 8, "router.policy": "dynamo",
        "workload.speedup": 4}

cli_s, py_s = [], []
for _ in range(3):
    t = time.perf_counter()
    out = subprocess.run(CLI, cwd=REPO, capture_output=True, text=True, check=True).stdout
    cli_s.append(time.perf_counter() - t)
    t = time.perf_counter()
    report = dynsim.run(REPO / "scenarios" / "dynamo-mocker.toml", set=SETS)
    py_s.append(time.perf_counter() - t)
    assert json.loads(out) == report, "the Python report differs from the CLI's"
cli, py = sorted(cli_s)[1], sorted(py_s)[1]
print("median: CLI %.2f s, Python %.2f s, Python / CLI %.2f" % (cli, py, py / cli))
