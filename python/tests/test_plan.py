"""dynsim.plan returns exactly the plan.json `dynsim plan` writes; errors carry its one-line
message."""

import json
import subprocess

import pytest

import dynsim
from conftest import REPO, cli_error

# Small enough for a plan of a few dozen runs in seconds.
PLANNED = """
seed = 1
[workload]
kind = "synthetic"
requests = 300
groups = 4
rate_per_s = 200.0
[cluster]
workers = 2
[router]
policy = "rr"
"""


@pytest.fixture
def planned(tmp_path):
    path = tmp_path / "planned.toml"
    path.write_text(PLANNED)
    return path


def cli_plan(dynsim_bin, tmp_path, *args):
    """The CLI's plan.json for `dynsim plan ARGS`."""
    out = tmp_path / "cli-plan"
    subprocess.run(
        [dynsim_bin, "plan", *args, "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, check=True,
    )
    return json.loads((out / "plan.json").read_text())


def test_plan_of_workers_equals_the_clis_plan_json(dynsim_bin, tmp_path, planned):
    cli = cli_plan(
        dynsim_bin, tmp_path, str(planned), "--sla", "ttft_p90_ms<=50",
        "--sla", "tpot_p50_ms<=20", "--policy", "rr", "--policy", "least-loaded",
        "--workers", "1..12", "--jobs", "2",
    )
    py = dynsim.plan(
        planned, sla=["ttft_p90_ms<=50", "tpot_p50_ms<=20"], policy=["rr", "least-loaded"],
        workers=(1, 12), jobs=2,
    )
    assert py == cli
    assert py["search"] == "workers"
    answers = [p["workers"] for p in py["policies"]]
    assert all(isinstance(w, int) and 1 <= w <= 12 for w in answers)
    # The range as the CLI spells it, one policy and one SLA as strings, the default jobs.
    assert dynsim.plan(str(planned), sla="ttft_p90_ms<=50", policy="rr", workers="1..12") == \
        dynsim.plan(planned, sla=["ttft_p90_ms<=50"], policy=["rr"], workers=(1, 12), jobs=1)


def test_plan_of_load_with_overrides_equals_the_cli(dynsim_bin, tmp_path, planned):
    cli = cli_plan(
        dynsim_bin, tmp_path, str(planned), "--sla", "ttft_p90_ms<=80", "--load", "0.25..4",
        "--workers", "3", "--set", "router.policy=\"least-loaded\"",
    )
    py = dynsim.plan(
        planned, sla="ttft_p90_ms<=80", load=(0.25, 4.0), workers=3,
        set={"router.policy": "least-loaded"},
    )
    assert py == cli and py["search"] == "load"


@pytest.mark.parametrize(
    "kwargs, args",
    [
        ({"sla": "ttft_p90_ms<=50"}, ["--sla", "ttft_p90_ms<=50"]),
        (
            {"sla": "ttft_p90_ms<=50", "workers": "1..4", "load": "1..2"},
            ["--sla", "ttft_p90_ms<=50", "--workers", "1..4", "--load", "1..2"],
        ),
        (
            {"sla": "nothing_p90<=5", "workers": "1..4"},
            ["--sla", "nothing_p90<=5", "--workers", "1..4"],
        ),
        (
            {"sla": "ttft_p90_ms<=50", "workers": "4..1"},
            ["--sla", "ttft_p90_ms<=50", "--workers", "4..1"],
        ),
    ],
)
def test_bad_plans_raise_the_clis_one_line_message(dynsim_bin, tmp_path, planned, kwargs, args):
    with pytest.raises(dynsim.ScenarioError) as err:
        dynsim.plan(planned, **kwargs)
    out = str(tmp_path / "never-written")
    assert str(err.value) == cli_error(dynsim_bin, "plan", str(planned), *args, "--out", out)


def test_what_clap_checks_in_the_cli_is_refused_in_one_line(dynsim_bin, tmp_path, planned):
    # The CLI's argument parser words the flag its own way; the reason is the same.
    with pytest.raises(dynsim.ScenarioError) as err:
        dynsim.plan(planned, sla="ttft<500", workers="1..4")
    out = str(tmp_path / "never-written")
    cli = cli_error(dynsim_bin, "plan", str(planned), "--sla", "ttft<500", "--out", out)
    assert str(err.value).startswith("--sla: ")
    assert cli.endswith(": " + str(err.value)[len("--sla: "):])
    with pytest.raises(dynsim.ScenarioError, match=r'^--policy: "nope" is not one of .*rr'):
        dynsim.plan(planned, sla="ttft_p90_ms<=50", policy="nope", workers="1..4")
    with pytest.raises(dynsim.ScenarioError, match=r"^--sla: give at least one objective"):
        dynsim.plan(planned, sla=[], workers="1..4")
    with pytest.raises(dynsim.ScenarioError, match=r'^--format: "csv" is not one of'):
        dynsim.plan(planned, sla="ttft_p90_ms<=50", workers="1..4", format="csv")
    with pytest.raises(dynsim.ScenarioError, match=r"^--jobs: must be at least 1"):
        dynsim.plan(planned, sla="ttft_p90_ms<=50", workers="1..4", jobs=0)


def test_arguments_of_the_wrong_shape_name_themselves(planned):
    # Unpacking raised "too many values to unpack (expected 2)", a number as sla "'int' object
    # is not iterable"; a list was written as "[1, 4]" and refused as no whole number.
    with pytest.raises(dynsim.ScenarioError, match=r"^workers \(MIN, MAX\): expected a pair, got \(1, 2, 4\)"):
        dynsim.plan(planned, sla="ttft_p90_ms<=50", workers=(1, 2, 4))
    with pytest.raises(dynsim.ScenarioError, match=r"^sla: expected a string or a list of strings, got 5"):
        dynsim.plan(planned, sla=5, workers="1..4")
    with pytest.raises(dynsim.ScenarioError, match=r"^shard \(i, n\): expected a pair, got '0/2'"):
        dynsim.sweep(planned, shard="0/2")
    assert dynsim.plan(planned, sla="ttft_p90_ms<=50", workers=[1, 4]) == dynsim.plan(
        planned, sla="ttft_p90_ms<=50", workers=(1, 4)
    )


def test_numpy_numbers_are_spelled_as_numbers(planned):
    # repr() wrote "np.int64(1)..np.int64(4)", refused as no whole number.
    np = pytest.importorskip("numpy")
    assert dynsim.plan(planned, sla="ttft_p90_ms<=50", workers=(np.int64(1), np.int32(4))) == \
        dynsim.plan(planned, sla="ttft_p90_ms<=50", workers=(1, 4))
    assert dynsim.plan(planned, sla="ttft_p90_ms<=80", workers=np.uint8(3),
                       load=(np.float64(0.25), np.float32(4.0))) == \
        dynsim.plan(planned, sla="ttft_p90_ms<=80", workers=3, load=(0.25, 4.0))
    # An array of two is a pair (it was spelled "[1, 4]" and refused).
    assert dynsim.plan(planned, sla="ttft_p90_ms<=50", workers=np.array([1, 4])) == \
        dynsim.plan(planned, sla="ttft_p90_ms<=50", workers=(1, 4))
