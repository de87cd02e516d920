"""dynsim.Simulation: stepped without scaling it equals the one-shot run; scale() acts; a
planner written in Python runs in the loop."""

import concurrent.futures
import os
import signal
import threading
import time

import pytest

import dynsim
from conftest import REPO


def test_stepped_without_scaling_equals_the_one_shot_run(small):
    once = dynsim.run(small)
    sim = dynsim.Simulation(small)
    t = 0.0
    while not sim.done():
        t += 0.37  # odd steps, observed at each
        sim.advance_to(t)
        sim.observe()
    assert sim.now == pytest.approx(t)
    assert sim.report() == once


def test_a_bundled_scenario_stepped_equals_its_run():
    path = REPO / "scenarios" / "kv.toml"
    sim = dynsim.Simulation(path)
    sim.advance_to(0.05)
    assert sim.report() == dynsim.run(path)


def test_scale_changes_the_replicas(small):
    sim = dynsim.Simulation(small)
    sim.advance_to(3.0)
    first = sim.observe()
    assert [p["serving"] for p in first["pools"]] == [2]
    assert first["traffic"]["requests"] > 0
    sim.scale("workers", 4)
    after = sim.observe()
    assert (after["pools"][0]["starting"], after["pools"][0]["target"]) == (2, 4)
    sim.advance_to(5.5)  # past startup_s = 2
    assert sim.observe()["pools"][0]["serving"] == 4
    report = sim.report()
    assert report != dynsim.run(small)
    assert report["replicas"][-1] == {
        "t_s": 5.0, "pool": "workers", "workers": 4, "starting": 0, "draining": 0
    }
    assert report["scale_events"][0]["started"] == ["worker2", "worker3"]
    assert report["requests"] == 300


def test_the_simulation_is_deterministic(small):
    def stepped():
        sim = dynsim.Simulation(small)
        sim.advance_to(2.0)
        sim.scale("workers", 3)
        sim.advance_to(6.0)
        sim.scale("workers", 1)
        return sim.report()

    assert stepped() == stepped()


def test_bad_steps_raise_one_line_messages(small):
    sim = dynsim.Simulation(small)
    with pytest.raises(dynsim.ScenarioError, match="is not a pool"):
        sim.scale("decode", 2)
    with pytest.raises(dynsim.ScenarioError, match=r"^scale: 13 workers for pool \"workers\": it has 12 slots"):
        sim.scale("workers", 13)
    with pytest.raises(dynsim.ScenarioError, match="is not a time"):
        sim.advance_to(float("nan"))
    # Going back was a silent no-op; past the clock's limit, the clock stayed at the last
    # delivery while a large time moved it.
    sim.advance_to(2.0)
    with pytest.raises(dynsim.ScenarioError, match=r"^advance_to: 1.0 s is before now \(2.0 s\)"):
        sim.advance_to(1.0)
    with pytest.raises(dynsim.ScenarioError, match=r"^advance_to: 1e\+30 s is past the clock's limit"):
        sim.advance_to(1e30)
    assert sim.now == 2.0
    # Times are numbers: "3" was taken as 3 s, "x" raised a ValueError naming nothing.
    for t in ("3", "x", True):
        with pytest.raises(dynsim.ScenarioError, match=r"^advance_to: expected a number of seconds"):
            sim.advance_to(t)
    assert sim.now == 2.0
    # Counts are whole numbers: a float was truncated, a negative overflowed unnamed.
    for workers in (2.7, -1, True):
        with pytest.raises(dynsim.ScenarioError, match=r"^workers: expected a whole number"):
            sim.scale("workers", workers)
    report = sim.report()
    with pytest.raises(dynsim.ScenarioError, match="has ended"):
        sim.advance_to(1.0)
    # Once reported, now is where the run ended, at or after its last completion (it raised
    # "has ended").
    assert sim.now >= report["duration_ms"] / 1e3 - 1e-9 and sim.now > 2.0


def test_a_pool_left_at_zero_raises_at_report_and_can_be_scaled_back(small):
    sim = dynsim.Simulation(small)
    sim.advance_to(1.0)
    sim.scale("workers", 0)
    with pytest.raises(dynsim.ScenarioError, match="none is coming.*scale that pool back up"):
        sim.report()
    # The run stays (it said done() and ended it before): scaled back, it reports.
    assert not sim.done()
    sim.scale("workers", 2)
    report = sim.report()
    assert report["requests"] == 300
    assert sim.done() and sim.report() == report


def test_scaling_after_the_last_completion_pays_every_worker_to_the_end(small):
    # Retired workers were paid up to their leaving, kept ones up to the last completion:
    # scaling to 1 at 100 s charged about 100 GPU-s more, to 3 nothing.
    plain = dynsim.run(small)["gpu_seconds"]
    for workers in (1, 3):
        sim = dynsim.Simulation(small)
        sim.advance_to(100.0)
        assert sim.done()
        sim.scale("workers", workers)
        sim.advance_to(200.0)
        assert sim.report()["gpu_seconds"] == plain


def test_a_forked_child_is_refused_not_left_waiting(small):
    # The run's thread stays in the parent: a child's call waited forever for it.
    sim = dynsim.Simulation(small)
    pid = os.fork()
    if pid == 0:
        try:
            sim.now
            os._exit(1)
        except RuntimeError as e:
            os._exit(0 if "does not cross a fork" in str(e) else 2)
        except BaseException:
            os._exit(3)
    for _ in range(200):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the child's call did not return")
    assert os.WEXITSTATUS(status) == 0
    assert sim.now == 0.0  # the parent's goes on


def test_a_simulation_steps_from_another_thread_and_frees_the_gil(small):
    # It was pyo3-unsendable: another thread got a PanicException with a Rust backtrace.
    once = dynsim.run(small)
    sim = dynsim.Simulation(small)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(sim.advance_to, 3.0).result()
        assert pool.submit(sim.report).result() == once
    # While a long advance runs (about a second), another thread runs Python: it held the GIL,
    # and a thread ticking every 10 ms ticked at most once or twice during the call.
    day = dynsim.Simulation(REPO / "scenarios" / "planner-day.toml")
    ticks, stop = [0], threading.Event()

    def tick():
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.01)

    ticker = threading.Thread(target=tick)
    ticker.start()
    before = ticks[0]
    day.advance_to(3600.0)
    during = ticks[0] - before
    stop.set()
    ticker.join()
    assert during >= 10, during


def queue_planner(scenario, interval_s, lo=1, hi=6):
    """A planner as a user writes one: one more worker when the queue per worker passes 4, one fewer
    when the interval's requests fit in half the workers."""
    sim = dynsim.Simulation(scenario)
    t = 0.0
    while not sim.done():
        t += interval_s
        sim.advance_to(t)
        pool = sim.observe()["pools"][0]
        workers = pool["workers"]
        queued = sum(w["queue"] for w in workers) / max(len(workers), 1)
        if queued > 4 and pool["target"] < hi:
            sim.scale("workers", pool["target"] + 1)
        elif queued == 0 and pool["starting"] == 0 and pool["target"] > lo:
            sim.scale("workers", pool["target"] - 1)
    return sim.report()


def test_a_planner_in_python_runs_and_is_deterministic(small):
    busy = small.with_name("busy.toml")
    busy.write_text(small.read_text().replace("rate_per_s = 20.0", "rate_per_s = 60.0"))
    report = queue_planner(busy, interval_s=0.25)
    assert report == queue_planner(busy, interval_s=0.25)
    assert report["requests"] == 300
    assert len(report["scale_events"]) > 0
    assert max(r["workers"] for r in report["replicas"]) > 2
