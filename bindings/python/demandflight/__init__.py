"""demandflight: many callers sharing one download.

The download scheduler's core, simulated on SimGrid, from Python::

    import demandflight as dfl
    trace = dfl.Trace.load("scenarios/three_callers.jsonl")
    result = dfl.simulate(trace, model="demand", policy="keep-partial")
    result.demands          # a pandas DataFrame, one row per subscribe
    dfl.compare([trace], policies=["always-abort", "always-complete"])

Every simulation runs in a fresh process (SimGrid allows one per process).
"""

from ._compare import DEFAULT_WEIGHTS, compare, metrics, sweep
from ._describe import Description, describe
from ._report import report
from ._engine import DemandHandle, Engine
from ._policy import ArtifactKey, Decision, OrphanPolicy, OrphanView, policies
from ._simulate import Result, SimulationError, read_rows, simulate
from ._trace import Trace, TraceBuilder, TraceError, import_formats, import_options

__all__ = [
    "ArtifactKey", "DEFAULT_WEIGHTS", "Decision", "DemandHandle", "Description", "Engine",
    "OrphanPolicy", "OrphanView", "Result", "SimulationError", "Trace", "TraceBuilder",
    "TraceError", "compare", "describe", "import_formats", "import_options", "metrics", "policies",
    "read_rows", "report", "simulate", "sweep",
]
