"""dynsim from Python: run a scenario, or step one with a planner written in Python.

``run`` returns exactly the report ``dynsim run --json`` prints, ``plan`` the ``plan.json``
``dynsim plan`` writes; ``Simulation`` is a run
stepped from Python (``advance_to``, ``observe``, ``scale``), deterministic for a seed like
every run. Bad input raises ``ScenarioError`` (a ``ValueError``) carrying the CLI's one-line
message. Ctrl-C stops a long call (``run``, ``plan``, ``sweep``, ``Simulation.advance_to``,
...) and raises ``KeyboardInterrupt``; a ``Simulation`` stays where it stopped.

A scenario is a path to a TOML file (its relative paths start from its folder), TOML text
(anything with a newline, or one line with ``=`` that is neither a file nor ends with
``.toml``; relative paths start from the current folder) or a dict
shaped like the TOML. ``set`` overrides keys as the CLI's ``--set`` does: a list of
``"KEY=VALUE"`` strings (the value parsed as TOML) or a dict ``{"router.policy": "rr"}``.
"""

import json
import math
import numbers
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union, cast

from dynsim._native import (
    NativeSimulation,
    ScenarioError,
    bench_json,
    check_out,
    merge_files,
    plan_json,
    run_json,
    sweep_files,
    write_files,
)
from dynsim._native import sweep_points as _sweep_points

__all__ = [
    "run",
    "bench",
    "plan",
    "sweep",
    "sweep_points",
    "merge",
    "Simulation",
    "ScenarioError",
]

Path = Union[str, "os.PathLike[str]"]

Scenario = Union[str, "os.PathLike[str]", Mapping[str, Any]]
Sets = Union[None, Sequence[str], Mapping[str, Any]]


def _source(scenario: Scenario) -> Tuple[str, str]:
    """The native module's (kind, text) for a scenario."""
    if isinstance(scenario, Mapping):
        return "json", json.dumps(_plain("<dict>: ", "", scenario))
    if isinstance(scenario, os.PathLike):
        return "path", os.fspath(scenario)
    if isinstance(scenario, str):
        # A path may hold "=" ("seed=3.toml", missing or not); one line of TOML that ends
        # with ".toml" has a space or a quote in it ('base = "a.toml"', "seed = 3 # b.toml").
        one_line = "\n" not in scenario
        bare = one_line and not any(c.isspace() or c in "\"'" for c in scenario)
        if one_line and (os.path.exists(scenario) or (bare and scenario.endswith(".toml"))):
            return "path", scenario
        if not one_line or "=" in scenario:
            return "toml", scenario
        return "path", scenario
    raise TypeError(
        "scenario must be a path, TOML text or a dict, not %s" % type(scenario).__name__
    )


def _whole(name: str, value: Any) -> int:
    """``value`` as a count: an int, or a float with no fraction; anything else (a bool, 2.7, a
    negative or one past 2**64 - 1) raises a ``ScenarioError`` naming ``name`` (``int()``
    truncated 2.7 to 2 in silence, and a negative overflowed without a name)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    # numbers.Integral takes numpy's integers too; a bool is one, and no count.
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ScenarioError("%s: expected a whole number >= 0, got %r" % (name, value))
    count = int(value)
    if not 0 <= count < 2**64:
        raise ScenarioError("%s: expected a whole number >= 0, got %r" % (name, value))
    return count


def _object(text: str) -> Dict[str, Any]:
    """The JSON object the native module returns as text (a report, a plan, an observation)."""
    return cast(Dict[str, Any], json.loads(text))


def _seconds(name: str, value: Any) -> float:
    """``value`` as seconds: a real number (numpy's too), not a string or a bool (``float()``
    took ``"1"`` as 1 s, and raised a bare ``ValueError`` naming nothing for ``"x"``)."""
    value = _scalar(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ScenarioError("%s: expected a number of seconds, got %r" % (name, value))
    return float(value)


def _plain(where: str, path: str, value: Any) -> Any:
    """``value`` as the plain values JSON and TOML both hold (str, bool, int, finite float, list,
    dict with str keys): numpy's scalars and arrays become Python's (``json.dumps`` refused an
    ``np.int64``), and a value neither holds raises a ``ScenarioError`` naming ``where`` and the
    key ``path`` (``json.dumps`` raised a bare ``TypeError``, a NaN gave "is not JSON" at a
    column, and an integer past TOML's range a message naming None)."""
    value = _scalar(value)
    name = "%s%s: " % (where, path) if path else where
    if isinstance(value, (str, bool)):
        return value
    if isinstance(value, numbers.Integral):
        whole = int(value)
        if not -(2**63) <= whole < 2**63:
            raise ScenarioError(
                "%s%d is past TOML's integers (-2**63 to 2**63 - 1)" % (name, whole)
            )
        return whole
    if isinstance(value, numbers.Real):
        if not math.isfinite(value):
            raise ScenarioError(
                "%s%r is not a value a scenario holds (its numbers are finite)" % (name, value)
            )
        return float(value)
    if isinstance(value, Mapping):
        plain = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ScenarioError("%s%r is not a key (keys are strings)" % (name, k))
            plain[k] = _plain(where, "%s.%s" % (path, k) if path else k, v)
        return plain
    if isinstance(value, (list, tuple)):
        return [_plain(where, "%s[%d]" % (path, i), v) for i, v in enumerate(value)]
    why = "TOML has no null" if value is None else "not a str, number, bool, list or dict"
    raise ScenarioError("%s%r is not a value a scenario holds (%s)" % (name, value, why))


def _scalar(value: Any) -> Any:
    """A numpy scalar or array as Python's value (``np.int64`` is no int, ``np.bool_`` no bool)."""
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return value.tolist()
    return value


def _sets(set: Sets) -> Tuple[List[str], List[Tuple[str, str]]]:
    """The native module's overrides: `KEY=VALUE` strings and (key, JSON value) pairs."""
    if set is None:
        return [], []
    if isinstance(set, Mapping):
        strings, pairs = [], []
        for k, v in set.items():
            v = _scalar(v)
            if isinstance(v, float) and not math.isfinite(v):
                # JSON has no NaN or infinity and TOML has: the scenario's check names the key.
                strings.append("%s=%s" % (k, "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")))
            else:
                pairs.append((str(k), json.dumps(_plain("set ", str(k), v))))
        return strings, pairs
    if isinstance(set, str):
        return [set], []
    return [str(s) for s in set], []


def run(scenario: Scenario, set: Sets = None) -> Dict[str, Any]:
    """Runs ``scenario`` to its end and returns its report: what ``dynsim run --json`` prints.

    Its ``[[scale]]`` steps and ``[planner]`` act as in the CLI. Raises ``ScenarioError``
    with the CLI's one-line message on bad input.
    """
    kind, text = _source(scenario)
    sets, json_sets = _sets(set)
    return _object(run_json(kind, text, sets, json_sets))


def bench(
    model: Optional[str] = None,
    *,
    gpu: str,
    isl: int,
    osl: int,
    concurrency: int,
    tp: int = 1,
    precision: str = "bf16",
    kv_dtype: str = "auto",
    engine: str = "vllm",
    requests: Optional[int] = None,
    profile: Union[None, str, "os.PathLike[str]"] = None,
    set: Sets = None,
    model_file: Union[None, str, "os.PathLike[str]"] = None,
    protocol: str = "aiconfigurator",
    prompt_pool: Optional[int] = None,
    concurrency_ramp_duration: Optional[float] = None,
) -> Dict[str, Any]:
    """One deployment under a closed-loop benchmark: what ``dynsim bench --json`` prints.

    The arguments are the CLI's options (``kv_dtype`` is ``--kv-dtype``, ``model_file``
    replaces ``model`` as ``--model-file`` does): ``model`` a bundled Hugging Face id or
    alias, ``gpu`` one of a100_sxm, h100_sxm, h200_sxm, b200_sxm, gb200, b300_sxm, gb300,
    l40s; ``protocol`` aiconfigurator, aiperf or inferencemax; ``requests`` defaults to the
    protocol's (20, 20 or 10) x ``concurrency``; ``prompt_pool`` (``--prompt-pool``) draws every
    prompt from that many distinct ones (default: every prompt its own; under aiperf, 100 on
    vLLM and SGLang); ``concurrency_ramp_duration`` (seconds) has the clients join one at a time
    at even steps, as aiperf's ``--concurrency-ramp-duration``.
    """
    sets, json_sets = _sets(set)
    return _object(
        bench_json(
            model,
            gpu,
            _whole("isl", isl),
            _whole("osl", osl),
            _whole("concurrency", concurrency),
            _whole("tp", tp),
            precision,
            kv_dtype,
            engine,
            None if requests is None else _whole("requests", requests),
            None if profile is None else os.fspath(profile),
            sets,
            json_sets,
            None if model_file is None else os.fspath(model_file),
            protocol,
            None if prompt_pool is None else _whole("prompt_pool", prompt_pool),
            None
            if concurrency_ramp_duration is None
            else _seconds("concurrency_ramp_duration", concurrency_ramp_duration),
        )
    )


Range = Union[None, str, int, float, Tuple[Union[int, float], Union[int, float]]]


def _strings(name: str, value: Union[None, str, Sequence[str]]) -> List[str]:
    """One string or several, as a list (a number raised "'int' object is not iterable")."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, (list, tuple)):
        raise ScenarioError("%s: expected a string or a list of strings, got %r" % (name, value))
    return [str(v) for v in value]


def _number(value: Any) -> str:
    """One number as the CLI's options spell it (``repr`` gave ``np.int64(2)`` for numpy's)."""
    value = _scalar(value)
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(int(value))
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return repr(float(value))
    return repr(value)  # which the CLI's parser refuses, naming it


def _pair(name: str, value: Any) -> Tuple[Any, Any]:
    """``value`` as a pair; anything else raises a ``ScenarioError`` naming ``name`` (unpacking
    raised "too many values to unpack (expected 2)")."""
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return value[0], value[1]
    raise ScenarioError("%s: expected a pair, got %r" % (name, value))


def _range(name: str, value: Range) -> Optional[str]:
    """``MIN..MAX`` or one value, as the CLI's ``--workers`` and ``--load`` take them (a numpy
    array of two is a pair, as a list is)."""
    value = _scalar(value)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (tuple, list)):
        low, high = _pair("%s (MIN, MAX)" % name, value)
        return "%s..%s" % (_number(low), _number(high))
    return _number(value)


def plan(
    input: Union[str, "os.PathLike[str]"],
    *,
    sla: Union[str, Sequence[str]],
    policy: Union[None, str, Sequence[str]] = None,
    workers: Range = None,
    load: Range = None,
    set: Sets = None,
    scenario: Union[None, str, "os.PathLike[str]"] = None,
    format: Optional[str] = None,
    jobs: Optional[int] = None,
    allow_fixed_timing: bool = False,
) -> Dict[str, Any]:
    """The fewest workers, or the highest load, that meets every SLA, per policy: the
    ``plan.json`` that ``dynsim plan`` writes, as a dict (nothing is written).

    ``input`` is a scenario file (.toml) or a trace (then ``scenario`` gives the other
    settings and ``format`` the trace's, as ``--scenario`` and ``--format`` do). ``sla`` is one
    objective or several, ``"ttft_p90_ms<=500"``; ``policy`` one routing policy or several
    (default: the scenario's). Give one range: ``workers`` (``"2..8"`` or ``(2, 8)``: the
    fewest workers) or ``load`` (``"0.5..4"`` or ``(0.5, 4.0)``: the highest multiple of the
    arrival rate), the other one value or nothing. ``jobs`` runs at once (default: the CPUs).
    Raises ``ScenarioError`` with the CLI's one-line message on bad input.
    """
    sets, json_sets = _sets(set)
    return _object(
        plan_json(
            os.fspath(input),
            _strings("sla", sla),
            _strings("policy", policy),
            _range("workers", workers),
            _range("load", load),
            sets,
            json_sets,
            None if scenario is None else os.fspath(scenario),
            format,
            None if jobs is None else _whole("jobs", jobs),
            bool(allow_fixed_timing),
        )
    )


def sweep_points(sweep: Path, set: Sets = None) -> int:
    """The number of points of the sweep file ``sweep`` (the product of its axes' lengths)."""
    sets, json_sets = _sets(set)
    return _sweep_points(os.fspath(sweep), sets, json_sets)


def sweep(
    sweep: Path,
    *,
    shard: Optional[Tuple[int, int]] = None,
    jobs: Optional[int] = None,
    set: Sets = None,
    out: Optional[Path] = None,
) -> Dict[str, bytes]:
    """Runs a sweep file's points: the files ``dynsim sweep`` writes into ``--out``, by name
    (``results.json``, ``results.csv`` and, for the whole sweep, one SVG per metric).

    ``shard=(i, n)`` runs only the points whose index is ``i`` modulo ``n``, as ``--shard
    I/N`` does; give the shards' files to ``merge``. ``jobs`` points run at once (default: the
    CPUs); ``set`` overrides the base scenario's keys before every point's axes; with ``out``
    the files are also written there, as the CLI writes them. The relative paths of the sweep
    file start from its folder.
    """
    sets, json_sets = _sets(set)
    index, count = (0, 1) if shard is None else _pair("shard (i, n)", shard)
    if out is not None:
        check_out(os.fspath(out))  # a bad folder fails now, not after every point has run
    files = dict(
        sweep_files(
            os.fspath(sweep),
            sets,
            json_sets,
            "%d/%d" % (_whole("shard", index), _whole("shard", count)),
            _whole("jobs", jobs) if jobs is not None else (os.cpu_count() or 1),
        )
    )
    if out is not None:
        write_files(os.fspath(out), list(files.items()))
    return files


def merge(
    shards: Sequence[Union[Mapping[str, bytes], bytes, str]], out: Optional[Path] = None
) -> Dict[str, bytes]:
    """The files of the whole sweep from its shards, as ``dynsim merge`` writes them (equal
    to an unsharded ``sweep``'s, byte for byte).

    Each shard is what ``sweep(..., shard=(i, n))`` returned, or its ``results.json`` (bytes
    or text); together they must hold every point once. With ``out`` the files are also
    written there.
    """
    if isinstance(shards, (Mapping, str, bytes)):
        # One shard given bare was taken as a list: its names, or its characters, as shards.
        raise ScenarioError(
            "merge: shards is a list of shards (each what sweep(..., shard=...) returned, or its "
            "results.json), not one %s" % type(shards).__name__
        )
    texts = []
    for i, shard in enumerate(shards):
        if isinstance(shard, Mapping):
            if "results.json" not in shard:
                raise ScenarioError(
                    "merge: shard %d has no results.json (give what sweep(..., shard=...) "
                    "returned, or its results.json)" % i
                )
            shard = shard["results.json"]
        if isinstance(shard, bytes):
            try:
                shard = shard.decode("utf-8")
            except UnicodeDecodeError as e:  # raised without naming the shard
                raise ScenarioError("shard %d: results.json is not UTF-8 text (%s)" % (i, e))
        texts.append(("shard %d" % i, shard))
    files = dict(merge_files(texts))
    if out is not None:
        write_files(os.fspath(out), list(files.items()))
    return files


class Simulation:
    """A run stepped from Python: the planner is your code.

    ``advance_to(t_s)`` delivers everything up to ``t_s`` seconds of virtual time,
    ``observe()`` returns what a planner sees, ``scale(pool, workers)`` sets a pool's target
    (a joining worker serves after ``cluster.startup_s`` with an empty cache; leaving ones
    drain), ``done()`` says whether every request is served and ``report()`` finishes the run
    and returns its report. The scenario's own ``[[scale]]`` steps and ``[planner]`` do not
    act here. Stepping never changes what is delivered: a simulation stepped at any times
    without scaling reports exactly what ``run`` reports.

    The run lives on a thread of its own: any Python thread may step it (calls from several
    run one at a time, in the order they come), and other Python threads run while it
    advances (the GIL is released). GPU-seconds are paid up to the run's last completion,
    whatever the pools do after it. A simulation stays in the process that built it (a
    forked child builds its own), and a call still running in a daemon thread when the
    interpreter exits aborts the process, as any call that releases the GIL may.
    """

    def __init__(self, scenario: Scenario, set: Sets = None) -> None:
        kind, text = _source(scenario)
        sets, json_sets = _sets(set)
        self._native = NativeSimulation(kind, text, sets, json_sets)

    @property
    def now(self) -> float:
        """The run's virtual time, s: where it was last advanced to (after ``report()``, where
        the run ended)."""
        return self._native.now_s()

    def advance_to(self, t_s: float) -> None:
        """Delivers everything at or before ``t_s`` seconds of virtual time: not before
        ``now`` (a run only goes forward) nor past the clock's limit of 1e9 s.

        Ctrl-C stops it within a few thousand deliveries and raises ``KeyboardInterrupt``;
        the simulation stays where it stopped (``now``) and may be advanced again.
        """
        t = _seconds("advance_to", t_s)
        if t > 1e9:  # the clock's limit; past it the clock stayed at the last delivery
            raise ScenarioError(
                "advance_to: %r s is past the clock's limit of 1e9 s (about 31.7 years)" % t
            )
        self._native.advance_to(t)  # which refuses a time before now

    def observe(self) -> Dict[str, Any]:
        """What a planner sees now; observing starts the next interval.

        ``t_s``, ``interval_s`` (since the previous observation), ``traffic`` (the interval's
        requests, ``request_rate``, ``isl``, ``osl``, ``ttft_p90_ms``, ``itl_p90_ms``, ...)
        and ``pools``: for each pool its ``pool`` name, ``serving``, ``starting``,
        ``draining``, ``target``, ``gpus_per_worker`` and each serving worker's ``queue``,
        ``running``, ``active_prefill_tokens``, ``active_kv_blocks``, ``kv_usage``,
        ``ttft_ms``, ``isl`` and ``itl_ms``.
        """
        return _object(self._native.observe_json())

    def scale(self, pool: str, workers: int) -> None:
        """Sets ``pool``'s target (``workers``, or ``prefill``/``decode`` when disaggregated)."""
        self._native.scale(pool, _whole("workers", workers))

    def done(self) -> bool:
        """Whether every request is completed and nothing is pending."""
        return self._native.done()

    def report(self) -> Dict[str, Any]:
        """Delivers what is left (no more scaling), ends the run and returns its report (later
        calls return it again).

        Requests that wait for a pool scaled to 0 raise ``ScenarioError`` and the run stays:
        scale the pool back up and call ``report()`` again. An error that leaves nothing to go
        on with ends the run; later calls, ``done()`` too, raise it.
        """
        return _object(self._native.report_json())
