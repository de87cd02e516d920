"""dynsim.run returns exactly the CLI's `run --json` report; errors carry its one-line message."""

import json
import subprocess

import pytest

import dynsim
from conftest import REPO, SCENARIO, cli_error


def cli_json(dynsim_bin, *args):
    out = subprocess.run(
        [dynsim_bin, *args, "--json"], cwd=REPO, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)



@pytest.mark.parametrize("name", ["kv.toml", "rr.toml", "disagg-one-gpu.toml"])
def test_run_of_a_path_equals_the_cli_json(dynsim_bin, name):
    path = REPO / "scenarios" / name
    assert dynsim.run(path) == cli_json(dynsim_bin, "run", str(path))
    assert dynsim.run(str(path)) == cli_json(dynsim_bin, "run", str(path))


def test_run_with_overrides_equals_the_cli_with_set(dynsim_bin):
    path = REPO / "scenarios" / "kv.toml"
    cli = cli_json(dynsim_bin, "run", str(path), "--set", "router.policy=rr", "--set", "seed=3")
    assert dynsim.run(path, set=["router.policy=rr", "seed=3"]) == cli
    assert dynsim.run(path, set={"router.policy": "rr", "seed": 3}) == cli
    assert cli != cli_json(dynsim_bin, "run", str(path))


def test_run_of_toml_text_and_of_a_dict_equal_the_file(dynsim_bin, small):
    cli = cli_json(dynsim_bin, "run", str(small))
    assert cli["gpu_seconds"] > 0 and cli["sla_attainment"] is not None
    assert dynsim.run(small) == cli
    assert dynsim.run(SCENARIO) == cli
    as_dict = {
        "name": "py-small",
        "seed": 7,
        "workload": {
            "kind": "synthetic",
            "requests": 300,
            "rate_per_s": 20.0,
            "input": {"dist": "uniform", "min": 100, "max": 900},
            "output": {"dist": "uniform", "min": 5, "max": 60},
        },
        "cluster": {
            "workers": 2,
            "max_workers": 6,
            "block_size": 16,
            "kv_capacity_blocks": 4000,
            "startup_s": 2.0,
        },
        "router": {"policy": "dynamo"},
        "sla": {"ttft_p90_ms": 400.0},
    }
    assert dynsim.run(as_dict) == cli


def test_a_run_is_deterministic_for_a_seed(small):
    assert dynsim.run(small) == dynsim.run(small)
    assert dynsim.run(small, set={"seed": 8}) != dynsim.run(small)


def test_scheduled_scaling_acts_as_in_the_cli(dynsim_bin, small):
    step = '\n[[scale]]\nat_s = 3.0\npool = "workers"\nworkers = 4\n'
    path = small.with_name("stepped.toml")
    path.write_text(small.read_text() + step)
    report = dynsim.run(path)
    assert report == cli_json(dynsim_bin, "run", str(path))
    assert [e["started"] for e in report["scale_events"]] == [["worker2", "worker3"]]


def test_a_bad_setting_raises_the_clis_one_line_message(dynsim_bin, small):
    bad = small.with_name("bad.toml")
    bad.write_text(small.read_text().replace("workers = 2", "workers = 0"))
    with pytest.raises(dynsim.ScenarioError) as err:
        dynsim.run(bad)
    assert str(err.value) == cli_error(dynsim_bin, "run", str(bad))
    assert isinstance(err.value, ValueError)


def test_a_bad_override_and_a_missing_file_raise_the_clis_message(dynsim_bin, small):
    with pytest.raises(dynsim.ScenarioError) as err:
        dynsim.run(small, set=["bus.drop_rate=2"])
    assert str(err.value) == cli_error(dynsim_bin, "run", str(small), "--set", "bus.drop_rate=2")
    missing = str(small.with_name("missing.toml"))
    with pytest.raises(dynsim.ScenarioError) as err:
        dynsim.run(missing)
    assert str(err.value) == cli_error(dynsim_bin, "run", missing)


def test_bad_toml_text_names_its_line():
    with pytest.raises(dynsim.ScenarioError, match=r"^<string>:3: "):
        dynsim.run('name = "x"\n[cluster]\nworkers = "two"\n')


def test_a_path_with_an_equals_sign_is_a_path(small, tmp_path):
    # It was read as TOML text.
    odd = tmp_path / "seed=3.toml"
    odd.write_text(small.read_text())
    assert dynsim.run(str(odd)) == dynsim.run(small)
    with pytest.raises(dynsim.ScenarioError, match=r"^.*missing=1\.toml: "):
        dynsim.run(str(tmp_path / "missing=1.toml"))


def test_set_values_json_or_toml_cannot_hold_name_their_key(small):
    # NaN reaches the scenario's check as TOML's nan (it was "is not JSON"), an object raised a
    # bare TypeError, 2**64 - 1 a message naming None.
    with pytest.raises(dynsim.ScenarioError, match=r"workload.rate_per_s"):
        dynsim.run(small, set={"workload.rate_per_s": float("nan")})
    with pytest.raises(dynsim.ScenarioError, match=r"^set seed: <object object .*> is not a value"):
        dynsim.run(small, set={"seed": object()})
    with pytest.raises(dynsim.ScenarioError, match=r"^set seed: 18446744073709551615 is past TOML's integers"):
        dynsim.run(small, set={"seed": 2**64 - 1})


def test_merge_of_a_dict_without_results_names_the_shard():
    with pytest.raises(dynsim.ScenarioError, match=r"^merge: shard 0 has no results.json"):
        dynsim.merge([{}])


def test_bench_without_a_model_asks_for_one():
    with pytest.raises(dynsim.ScenarioError, match=r"^--model: give a model \(a Hugging Face id or alias\) or a model_file$"):
        dynsim.bench(None, gpu="h100_sxm", isl=128, osl=16, concurrency=1)


def test_a_ramp_that_is_no_number_names_itself():
    # float() raised a bare ValueError naming nothing, and took "3" as 3 s.
    for ramp in ("x", "3"):
        with pytest.raises(dynsim.ScenarioError, match=r"^concurrency_ramp_duration: expected a number of seconds"):
            dynsim.bench("Qwen/Qwen3-8B", gpu="h100_sxm", isl=128, osl=16, concurrency=1,
                         concurrency_ramp_duration=ramp)


def test_a_dict_with_none_is_refused():
    with pytest.raises(dynsim.ScenarioError, match=r"^<dict>: "):
        dynsim.run({"name": None})


def test_bench_equals_the_clis_bench_json(dynsim_bin):
    args = ["--model", "Qwen/Qwen3-32B", "--gpu", "h100_sxm", "--precision", "fp8"]
    args += ["--isl", "1000", "--osl", "50", "--concurrency", "4", "--requests", "24"]
    cli = cli_json(dynsim_bin, "bench", *args)
    py = dynsim.bench(
        "Qwen/Qwen3-32B", gpu="h100_sxm", precision="fp8", isl=1000, osl=50,
        concurrency=4, requests=24,
    )
    assert py == cli
    cli = cli_json(dynsim_bin, "bench", *args, "--protocol", "inferencemax")
    py = dynsim.bench(
        "Qwen/Qwen3-32B", gpu="h100_sxm", precision="fp8", isl=1000, osl=50,
        concurrency=4, requests=24, protocol="inferencemax",
    )
    assert py == cli
    cli = cli_json(dynsim_bin, "bench", *args, "--prompt-pool", "3")
    py = dynsim.bench(
        "Qwen/Qwen3-32B", gpu="h100_sxm", precision="fp8", isl=1000, osl=50,
        concurrency=4, requests=24, prompt_pool=3,
    )
    assert py == cli
    assert py["prefix_reuse"] > 0, "repeated prompts hit the prefix cache"
    cli = cli_json(dynsim_bin, "bench", *args, "--protocol", "aiperf")
    py = dynsim.bench(
        "Qwen/Qwen3-32B", gpu="h100_sxm", precision="fp8", isl=1000, osl=50,
        concurrency=4, requests=24, protocol="aiperf",
    )
    assert py == cli
    assert py["prefix_reuse"] > 0, "aiperf's prompts repeat from its dataset of 100"
    cli = cli_json(dynsim_bin, "bench", *args, "--concurrency-ramp-duration", "1.5")
    py = dynsim.bench(
        "Qwen/Qwen3-32B", gpu="h100_sxm", precision="fp8", isl=1000, osl=50,
        concurrency=4, requests=24, concurrency_ramp_duration=1.5,
    )
    assert py == cli
    assert py["bench"]["concurrency_ramp_s"] == 1.5
    for ramp in (-1, float("nan")):  # NaN was written into bench's scenario as bad TOML
        with pytest.raises(dynsim.ScenarioError, match=r"^--concurrency-ramp-duration: must be in 0..=1e9 seconds"):
            dynsim.bench("Qwen/Qwen3-32B", gpu="h100_sxm", isl=1, osl=1, concurrency=1,
                         concurrency_ramp_duration=ramp)
    with pytest.raises(dynsim.ScenarioError, match=r"^--prompt-pool: must be at least 1"):
        dynsim.bench("Qwen/Qwen3-32B", gpu="h100_sxm", isl=1, osl=1, concurrency=1,
                     prompt_pool=0)
    with pytest.raises(dynsim.ScenarioError, match=r'^--protocol: "aic" is not one of'):
        dynsim.bench("Qwen/Qwen3-32B", gpu="h100_sxm", isl=1, osl=1, concurrency=1,
                     protocol="aic")
    with pytest.raises(dynsim.ScenarioError, match=r'^--precision: "fp6" is not one of'):
        dynsim.bench("Qwen/Qwen3-32B", gpu="h100_sxm", precision="fp6", isl=1, osl=1,
                     concurrency=1)
    with pytest.raises(dynsim.ScenarioError) as err:
        dynsim.bench("Qwen/Qwen3-32B", gpu="z100", isl=1000, osl=50, concurrency=4)
    assert str(err.value) == cli_error(
        dynsim_bin, "bench", "--model", "Qwen/Qwen3-32B", "--gpu", "z100",
        "--isl", "1000", "--osl", "50", "--concurrency", "4",
    )


def test_run_of_a_replay_equals_the_clis_replay(dynsim_bin):
    trace = REPO / "data" / "traces" / "mooncake_conversation_trace.jsonl"
    cli = cli_json(
        dynsim_bin, "replay", str(trace), "--scenario", "scenarios/dynamo-mocker.toml",
        "--workers", "3", "--policy", "dynamo", "--set", "workload.speedup=4",
        "--set", "workload.limit=1500",
    )
    sets = {"workload.path": str(trace), "cluster.workers": 3, "router.policy": "dynamo",
            "workload.speedup": 4, "workload.limit": 1500}
    assert dynsim.run(REPO / "scenarios" / "dynamo-mocker.toml", set=sets) == cli
    assert cli["requests"] == 1500


def test_values_of_a_dict_json_cannot_hold_name_their_key(small):
    # A NaN gave "<dict>: is not JSON: expected value at line 1 column 23", an object a bare
    # TypeError from json.dumps, a NaN inside a set's table "is not JSON" too.
    with pytest.raises(dynsim.ScenarioError, match=r"^<dict>: workload.rate_per_s: nan is not a value"):
        dynsim.run({"workload": {"kind": "synthetic", "rate_per_s": float("nan")}})
    with pytest.raises(dynsim.ScenarioError, match=r"^<dict>: scale\[1\].at_s: inf is not a value"):
        dynsim.run({"scale": [{"at_s": 1.0}, {"at_s": float("inf")}]})
    with pytest.raises(dynsim.ScenarioError, match=r"^<dict>: name: <object object .*> is not a value"):
        dynsim.run({"name": object()})
    with pytest.raises(dynsim.ScenarioError, match=r"^<dict>: cluster: 1 is not a key"):
        dynsim.run({"cluster": {1: 2}})
    with pytest.raises(dynsim.ScenarioError, match=r"^set cluster.startup_s: nan is not a value"):
        dynsim.run(small, set={"cluster": {"startup_s": float("nan")}})


def test_numpy_values_are_numbers(small):
    # json.dumps refused np.int64 (a ScenarioError for a set, a bare TypeError in a dict).
    np = pytest.importorskip("numpy")
    plain = dynsim.run(small, set={"cluster.workers": 3, "cluster.startup_s": 1.5})
    assert dynsim.run(
        small, set={"cluster.workers": np.int64(3), "cluster.startup_s": np.float32(1.5)}
    ) == plain
    assert dynsim.run({"seed": np.int32(3), "cluster": {"workers": np.uint8(2)}}) == dynsim.run(
        {"seed": 3, "cluster": {"workers": 2}}
    )
    with pytest.raises(dynsim.ScenarioError, match=r"^--set: cluster.startup_s = NaN must be"):
        dynsim.run(small, set={"cluster.startup_s": np.float32("nan")})


def test_merge_of_bad_shards_names_them():
    # Bytes that are no UTF-8 raised a bare UnicodeDecodeError; one shard's dict given bare
    # was iterated, its names taken as results.json texts ("shard 0:1: ... expected value").
    with pytest.raises(dynsim.ScenarioError, match=r"^shard 1: results.json is not UTF-8 text"):
        dynsim.merge([b"{}", b"\xff"])
    with pytest.raises(dynsim.ScenarioError, match=r"^merge: shards is a list of shards .* not one dict"):
        dynsim.merge({"results.json": b"{}"})
    with pytest.raises(dynsim.ScenarioError, match=r"not one str"):
        dynsim.merge('{"points": []}')
