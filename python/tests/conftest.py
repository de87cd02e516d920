"""Shared fixtures: the repository's CLI binary (built with cargo if needed) and scenarios."""

import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]

# A small aggregated cluster under a synthetic load, with an SLA so the report's scaling keys
# are filled; cluster.max_workers leaves room to scale up to 6.
SCENARIO = """
name = "py-small"
seed = 7
[workload]
kind = "synthetic"
requests = 300
rate_per_s = 20.0
input = { dist = "uniform", min = 100, max = 900 }
output = { dist = "uniform", min = 5, max = 60 }
[cluster]
workers = 2
max_workers = 6
block_size = 16
kv_capacity_blocks = 4000
startup_s = 2.0
[router]
policy = "dynamo"
[sla]
ttft_p90_ms = 400.0
"""


@pytest.fixture(scope="session")
def dynsim_bin():
    """The CLI: $DYNSIM_BIN, or the repository's debug build (cargo build if missing)."""
    given = os.environ.get("DYNSIM_BIN")
    if given:
        return given
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    subprocess.run(
        ["cargo", "build", "--quiet", "--bin", "dynsim"], cwd=REPO, check=True
    )
    return str(target / "debug" / "dynsim")


@pytest.fixture
def small(tmp_path):
    """SCENARIO written to a file."""
    path = tmp_path / "py-small.toml"
    path.write_text(SCENARIO)
    return path


def cli_error(dynsim_bin, *args):
    """The one line (after `dynsim: `) the CLI prints for `dynsim ARGS`, checked to exit with 2."""
    out = subprocess.run([dynsim_bin, *args], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 2
    line = out.stderr.strip()
    assert line.startswith("dynsim: ") and "\n" not in line
    return line[len("dynsim: "):]
