"""Ctrl-C (SIGINT) stops a long dynsim call and raises KeyboardInterrupt; the process goes
on. Each case runs in a child Python that starts a `kill -INT` of itself a second before a call
that would take minutes (a day of scenarios/planner-day.toml); where the run stopped, not how
long anything took, is what is checked (the timeout only guards against a hang: a one-shot run
that ignored Ctrl-C would end, minutes later, by raising it after its return)."""

import subprocess
import sys

from conftest import REPO

PRELUDE = """
import subprocess, sys
import dynsim

def interrupt_soon():
    subprocess.Popen(["sh", "-c", "sleep 1; kill -INT %d" % __import__("os").getpid()])
"""

STEPPED = PRELUDE + """
sim = dynsim.Simulation("scenarios/planner-day.toml")
interrupt_soon()
try:
    sim.advance_to(86400.0)
    print("not interrupted")
except KeyboardInterrupt:
    stopped = sim.now
    sim.advance_to(stopped + 1.0)  # the simulation stays where it stopped and goes on
    print("stopped", stopped, sim.now)
"""

# Six days of the planner day: about 20 minutes uninterrupted, far beyond the hang guard.
ONE_SHOT = PRELUDE + """
interrupt_soon()
try:
    dynsim.run("scenarios/planner-day.toml", set={"workload.duration_s": 518400.0})
    print("not interrupted")
except KeyboardInterrupt:
    # The library's interrupt is cleared: the next call runs to its end.
    report = dynsim.run("scenarios/kv.toml")
    print("stopped", report["requests"])
"""


def child(code):
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_ctrl_c_stops_a_stepped_run_where_it_is():
    words = child(STEPPED)
    assert words[0] == "stopped", words
    stopped, now = float(words[1]), float(words[2])
    assert 0.0 < stopped < 86400.0
    assert abs(now - (stopped + 1.0)) < 1e-6


def test_ctrl_c_stops_a_one_shot_run_and_the_next_run_is_whole():
    words = child(ONE_SHOT)
    assert words[0] == "stopped", words
    assert int(words[1]) > 0


def test_a_python_signal_handler_sees_its_own_exception():
    # A handler that raises something else: that exception comes out of the call.
    code = PRELUDE + """
import signal
class Stop(Exception):
    pass
def handler(signum, frame):
    raise Stop()
signal.signal(signal.SIGINT, handler)
sim = dynsim.Simulation("scenarios/planner-day.toml")
interrupt_soon()
try:
    sim.advance_to(86400.0)
    print("not interrupted")
except Stop:
    print("stopped", sim.now)
"""
    words = child(code)
    assert words[0] == "stopped" and 0.0 < float(words[1]) < 86400.0


def test_ctrl_c_stops_only_the_call_it_came_in():
    # Another thread's Simulation, advancing when the signal comes, runs to its time: the stop
    # was the process-wide flag, and the other thread got KeyboardInterrupt too.
    code = PRELUDE + """
import threading
other = {}
def advance_other():
    sim = dynsim.Simulation("scenarios/planner-day.toml")
    try:
        sim.advance_to(7200.0)  # a few seconds: under way when the signal comes
        other["now"] = sim.now
    except BaseException as e:
        other["error"] = repr(e)
thread = threading.Thread(target=advance_other)
thread.start()
sim = dynsim.Simulation("scenarios/planner-day.toml")
interrupt_soon()
try:
    sim.advance_to(86400.0)
    print("not interrupted")
except KeyboardInterrupt:
    thread.join()
    print("stopped", other.get("now"), other.get("error"))
"""
    words = child(code)
    assert words[:3] == ["stopped", "7200.0", "None"], words


def test_ctrl_c_of_a_one_shot_call_leaves_another_threads_run_alone():
    # A one-shot call's stop was the process-wide flag, set until the call had stopped: another
    # thread's run checking it meanwhile raised KeyboardInterrupt. The interrupted call here
    # draws 10^7 requests (about a second without a check, then refused for its memory),
    # interrupted 0.2 s in, so the other run checks many times while the stop is asked.
    code = PRELUDE + """
import threading
other = {}
def run_other():
    try:
        other["requests"] = dynsim.run("scenarios/planner-day.toml",
                                       set={"workload.duration_s": 7200.0})["requests"]
    except BaseException as e:
        other["error"] = repr(e)
thread = threading.Thread(target=run_other)
thread.start()
subprocess.Popen(["sh", "-c", "sleep 0.2; kill -INT %d" % __import__("os").getpid()])
try:
    dynsim.run({"workload": {"kind": "synthetic", "requests": 10000000, "rate_per_s": 1000.0}})
    print("not interrupted")
except KeyboardInterrupt:
    thread.join()
    print("stopped", other.get("requests", 0) > 0, other.get("error"))
"""
    words = child(code)
    assert words[:3] == ["stopped", "True", "None"], words
