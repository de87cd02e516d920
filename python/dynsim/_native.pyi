"""Type stubs of dynsim's native module (python/src/lib.rs); use the `dynsim` package."""

from typing import List, Optional, Tuple, final

__all__ = [
    "ScenarioError",
    "run_json",
    "bench_json",
    "plan_json",
    "sweep_points",
    "sweep_files",
    "merge_files",
    "check_out",
    "write_files",
    "NativeSimulation",
]

class ScenarioError(ValueError):
    """Bad input or a run that cannot go on: the message is the CLI's one line."""

def run_json(kind: str, text: str, sets: List[str], json_sets: List[Tuple[str, str]]) -> str:
    """Runs a scenario to its end and returns the report's JSON text."""

def bench_json(
    model: Optional[str],
    gpu: str,
    isl: int,
    osl: int,
    concurrency: int,
    tp: int,
    precision: str,
    kv_dtype: str,
    engine: str,
    requests: Optional[int],
    profile: Optional[str],
    sets: List[str],
    json_sets: List[Tuple[str, str]],
    model_file: Optional[str],
    protocol: str,
    prompt_pool: Optional[int],
    concurrency_ramp_duration: Optional[float],
) -> str:
    """One deployment under a closed-loop benchmark; returns `bench --json`'s text."""

def plan_json(
    input: str,
    sla: List[str],
    policy: List[str],
    workers: Optional[str],
    load: Optional[str],
    sets: List[str],
    json_sets: List[Tuple[str, str]],
    scenario: Optional[str],
    format: Optional[str],
    jobs: Optional[int],
    allow_fixed_timing: bool,
) -> str:
    """`dynsim plan`: returns the text of the plan.json the CLI writes."""

def sweep_points(path: str, sets: List[str], json_sets: List[Tuple[str, str]]) -> int:
    """The number of points of a sweep file."""

def sweep_files(
    path: str, sets: List[str], json_sets: List[Tuple[str, str]], shard: str, jobs: int
) -> List[Tuple[str, bytes]]:
    """`dynsim sweep --shard I/N`: the files the CLI writes, by name."""

def merge_files(shards: List[Tuple[str, str]]) -> List[Tuple[str, bytes]]:
    """`dynsim merge`: the whole sweep's files from (label, results.json text) pairs."""

def check_out(out: str) -> None:
    """Checks that an output folder can be written, as the CLI checks --out first."""

def write_files(out: str, files: List[Tuple[str, bytes]]) -> None:
    """Writes files into an output folder as the CLI does."""

@final
class NativeSimulation:
    """A run stepped from Python."""

    def __new__(
        cls, kind: str, text: str, sets: List[str], json_sets: List[Tuple[str, str]]
    ) -> "NativeSimulation": ...
    def advance_to(self, t_s: float) -> None: ...
    def now_s(self) -> float: ...
    def observe_json(self) -> str: ...
    def scale(self, pool: str, workers: int) -> None: ...
    def done(self) -> bool: ...
    def report_json(self) -> str: ...
