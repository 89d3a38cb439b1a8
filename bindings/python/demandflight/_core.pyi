"""Type hints for the C++ module demandflight._core (pybind11)."""

from typing import Any, Dict, List, Optional, Tuple

class TraceError(ValueError):
    """A trace that is not valid: str(e) is 'FILE:LINE: field: message'."""
    file: str
    line: int
    field: str

class Decision:
    """ABORT, COMPLETE or KEEP_PARTIAL."""
    ABORT: "Decision"
    COMPLETE: "Decision"
    KEEP_PARTIAL: "Decision"
    name: str
    value: int

class ArtifactKey:
    """The identity of an immutable artifact."""
    def __init__(self, resource: str, revision: str, target: str = "pc",
                 generation: int = 0) -> None: ...
    resource: str
    revision: str
    target: str
    generation: int

class DemandHandle:
    """A demand, as the engine names it."""
    slot: int
    generation: int

class OrphanView:
    """What an orphan policy sees when it decides."""
    now_s: float
    key: Optional[ArtifactKey]
    size_bytes: int
    bytes_done: int
    bytes_remaining: int
    elapsed_s: float
    throughput_Bps: float
    queued_tasks: int
    queued_bytes: int
    queued_top_priority: Optional[int]
    free_slots: int
    first_decision: bool
    key_demands: int
    since_last_demand_s: float
    previous_gap_s: Optional[float]
    cache_capacity_bytes: int
    cache_used_bytes: int
    partial_capacity_bytes: int
    partial_used_bytes: int

class ParsedTrace:
    """A validated trace (C++)."""
    name: str
    seed: int
    records: int
    artifacts: int
    demands: int
    def to_dict(self) -> Dict[str, Any]: ...

def parse_trace(text: str, name: str) -> ParsedTrace: ...
def load_trace(path: str) -> ParsedTrace: ...
def describe_json(trace: ParsedTrace, top: int) -> str: ...
def simulate(trace: ParsedTrace, model: str, policy: Any, policy_name: str, seed: Optional[int],
             max_transfers: Optional[int], max_per_origin: Optional[int],
             network_model: Optional[str], out: str, timeline: str, decisions: str = "",
             decision_horizon_s: float = 60.0, oracle_bases: List[str] = ...,
             resample: str = "none", demands_csv: str = "", tasks_csv: str = "",
             head_out: str = "") -> str: ...
def simulate_streamed(path: str, model: str, policy: Any, policy_name: str,
                      seed: Optional[int], max_transfers: Optional[int],
                      max_per_origin: Optional[int], network_model: Optional[str], out: str,
                      demands_csv: str, tasks_csv: str) -> str: ...
def check_policy(spec: str) -> None: ...
def split_policy_list(list: str) -> List[str]: ...
def generate_trace(spec: str, seed: int) -> str: ...
def import_trace(format: str, inputs: List[str], out: str, options: Dict[str, str]) -> None: ...
def import_formats() -> List[str]: ...
def import_options(format: str) -> List[Tuple[str, str, bool, bool, str]]: ...
def policy_names() -> List[Tuple[str, str]]: ...

Commands = List[Dict[str, Any]]

class Engine:
    def __init__(self, model: str = "demand", max_transfers: int = 4, max_per_origin: int = 4,
                 cache_bytes: int = 2000000000, seed: int = 1, policy: Any = None) -> None: ...
    def subscribe(self, now: float, key: ArtifactKey, owner: int, priority: int = 0,
                  deadline_s: Optional[float] = None, owner_generation: int = 0,
                  origin: int = 0, size_bytes: int = 0) -> Tuple[DemandHandle, Commands]: ...
    def cancel(self, now: float, demand: DemandHandle) -> Commands: ...
    def set_priority(self, now: float, demand: DemandHandle, priority: int) -> Commands: ...
    def end_owner(self, now: float, owner: int,
                  owner_generation: Optional[int] = None) -> Commands: ...
    def transfer_progress(self, now: float, transfer: int, bytes: int) -> Commands: ...
    def transfer_finished(self, now: float, transfer: int, status: str, bytes: int,
                          retry_after_s: Optional[float] = None) -> Commands: ...
    def finalize_finished(self, now: float, finalize: int, status: str) -> Commands: ...
    def timer(self, now: float) -> Commands: ...
    next_wakeup_s: Optional[float]
    now_s: float
    def tasks(self) -> List[Dict[str, Any]]: ...
    def stats(self) -> Dict[str, int]: ...

DEFAULT_WEIGHTS: Dict[str, float]
def metrics(result_json: str, weights: Dict[str, float]) -> Dict[str, float]: ...
def check_weights(weights: Dict[str, float]) -> None: ...
def regret(score: float, oracle_score: float) -> Tuple[float, float]: ...
def streamable_policy(spec: str) -> bool: ...
MODELS: List[str]
NETWORK_MODELS: List[str]
MAX_TRANSFERS_LIMIT: int
