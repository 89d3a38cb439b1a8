"""demandflight: many callers sharing one download.

The download scheduler's core, simulated on SimGrid, from Python::

    import demandflight as dfl
    trace = dfl.Trace.load("scenarios/three_callers.jsonl")
    result = dfl.simulate(trace, model="demand", policy="keep-partial")
    result.demands          # a pandas DataFrame, one row per subscribe
    dfl.compare([trace], policies=["always-abort", "always-complete"])

Every simulation runs in a fresh process (SimGrid allows one per process).
"""

import importlib
from typing import TYPE_CHECKING, Any, List

# Each name's module is imported when the name is first used: `import demandflight`,
# and every simulation's own process, load only what they use.
_MODULE_OF = {
    "DEFAULT_WEIGHTS": "_compare", "compare": "_compare", "metrics": "_compare",
    "sweep": "_compare",
    "Description": "_describe", "describe": "_describe",
    "report": "_report",
    "DemandHandle": "_engine", "Engine": "_engine",
    "ArtifactKey": "_policy", "Decision": "_policy", "OrphanPolicy": "_policy",
    "OrphanView": "_policy", "policies": "_policy",
    "Result": "_simulate", "SimulationError": "_simulate", "read_rows": "_simulate",
    "simulate": "_simulate",
    "Trace": "_trace", "TraceBuilder": "_trace", "TraceError": "_trace",
    "import_formats": "_trace", "import_options": "_trace",
}

__all__ = sorted(_MODULE_OF, key=str.lower)


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'demandflight' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from ._compare import DEFAULT_WEIGHTS, compare, metrics, sweep
    from ._describe import Description, describe
    from ._engine import DemandHandle, Engine
    from ._policy import ArtifactKey, Decision, OrphanPolicy, OrphanView, policies
    from ._report import report
    from ._simulate import Result, SimulationError, read_rows, simulate
    from ._trace import Trace, TraceBuilder, TraceError, import_formats, import_options
