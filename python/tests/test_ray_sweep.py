"""examples/ray_sweep.py (a sweep's points as Ray tasks on a local Ray with 2 CPUs) writes
exactly what `dynsim sweep` writes, byte for byte; dynsim.sweep and dynsim.merge too."""

import subprocess
import sys

import pytest

import dynsim
from conftest import REPO

BASE = """
seed = 3
[workload]
kind = "synthetic"
requests = 200
groups = 4
rate_per_s = 100.0
[cluster]
workers = 2
[router]
policy = "rr"
"""

SWEEP = """
base = "base.toml"
metrics = ["ttft_ms.p90", "block_hit_rate"]
facet = "seed"
[axes]
"cluster.workers" = [1, 2, 3]
"router.policy" = ["rr", "kv"]
seed = [3, 4]
"""


@pytest.fixture
def sweep_file(tmp_path):
    (tmp_path / "base.toml").write_text(BASE)
    path = tmp_path / "sweep.toml"
    path.write_text(SWEEP)
    return path


def folder(path):
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())}


def cli_sweep(dynsim_bin, sweep_file, out, *args):
    subprocess.run(
        [dynsim_bin, "sweep", str(sweep_file), "--out", str(out), *args],
        cwd=REPO, capture_output=True, check=True,
    )
    return folder(out)


def test_the_ray_example_writes_what_the_cli_writes(dynsim_bin, tmp_path, sweep_file):
    cli = cli_sweep(dynsim_bin, sweep_file, tmp_path / "cli", "--set", "workload.requests=150")
    assert {"results.json", "results.csv"} <= set(cli)
    assert any(name.endswith(".svg") for name in cli)
    out = tmp_path / "ray"
    run = subprocess.run(
        [sys.executable, str(REPO / "examples" / "ray_sweep.py"), str(sweep_file),
         "--out", str(out), "--num-cpus", "2", "--set", "workload.requests=150"],
        cwd=tmp_path, capture_output=True, text=True,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("12 of 12 points -> ")
    assert folder(out) == cli


def test_shards_merged_in_python_equal_the_cli(dynsim_bin, tmp_path, sweep_file):
    cli = cli_sweep(dynsim_bin, sweep_file, tmp_path / "cli")
    assert dynsim.sweep_points(sweep_file) == 12
    whole = dynsim.sweep(sweep_file, jobs=2, out=tmp_path / "py")
    assert whole == cli and folder(tmp_path / "py") == cli
    shards = [dynsim.sweep(sweep_file, shard=(i, 5), jobs=1) for i in (3, 0, 4, 1, 2)]
    assert all(not any(n.endswith(".svg") for n in s) for s in shards)
    assert dynsim.merge(shards) == cli
    assert dynsim.merge([s["results.json"].decode() for s in shards]) == cli


def test_sweep_errors_are_the_clis_one_line_messages(dynsim_bin, tmp_path, sweep_file):
    with pytest.raises(dynsim.ScenarioError, match=r'^--shard: "5/5": I must be in 0..N'):
        dynsim.sweep(sweep_file, shard=(5, 5))
    shards = [dynsim.sweep(sweep_file, shard=(i, 3), jobs=1) for i in (0, 1)]
    with pytest.raises(dynsim.ScenarioError, match=r"^merge: 4 of 12 points missing"):
        dynsim.merge(shards)
    bad = tmp_path / "bad.toml"
    bad.write_text(SWEEP.replace('"cluster.workers" = [1, 2, 3]', '"cluster.workers" = [0]'))
    with pytest.raises(dynsim.ScenarioError) as err:
        dynsim.sweep(bad)
    cli = subprocess.run(
        [dynsim_bin, "sweep", str(bad), "--out", str(tmp_path / "x")],
        capture_output=True, text=True,
    )
    assert cli.returncode == 2 and cli.stderr.strip() == "dynsim: " + str(err.value)


def test_a_sweep_into_a_file_fails_before_any_point_runs(tmp_path, sweep_file):
    # Checked first, as the CLI checks --out: it used to be checked only after every point had
    # run (here the points' own error, workload.requests = 0, would come first).
    taken = tmp_path / "taken"
    taken.write_text("not a folder")
    with pytest.raises(dynsim.ScenarioError, match=r"is a file, not a folder \(out takes a folder\)"):
        dynsim.sweep(sweep_file, out=taken, set={"workload.requests": 0})
    assert taken.read_text() == "not a folder"
