"""compare() and sweep(): many simulations, as one DataFrame."""

from __future__ import annotations

import itertools
import json
import os
import shlex
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from . import _core
from ._simulate import (PolicyLike, _child_env, _child_error, _dumps, _raise_child_error,
                        simulate)
from ._trace import Trace, TraceLike, as_trace

if TYPE_CHECKING:  # pandas is imported when first needed: children start fast.
    import pandas as pd

CLI = Path(__file__).resolve().parent / "_bin" / "demandflight"

# The cost score's default weights (format/score.h, the same as `demandflight compare`'s).
DEFAULT_WEIGHTS: Dict[str, float] = dict(_core.DEFAULT_WEIGHTS)


def _cli() -> str:
    cli = os.environ.get("DEMANDFLIGHT_CLI", str(CLI))
    if not os.access(cli, os.X_OK):
        raise FileNotFoundError(f"the demandflight command is not at {cli} (set DEMANDFLIGHT_CLI)")
    return cli


def _policy_label(policy: Any) -> str:
    """A Python policy's name in tables: its ``name``, else (the base class's "python")
    its class's."""
    from ._policy import OrphanPolicy
    name = getattr(policy, "name", None)
    return str(type(policy).__name__ if not name or name == OrphanPolicy.name else name)


def compare(traces: Union[TraceLike, Sequence[TraceLike]],
            policies: Union[str, Sequence[PolicyLike]] = "all",
            models: Union[str, Sequence[str]] = ("demand",), seeds: int = 1, *,
            first_seed: int = 1, weights: Optional[Mapping[str, float]] = None,
            jobs: Optional[int] = None, baseline: str = "always-abort",
            runs: bool = False, critical_priority: Optional[int] = None) -> Union[pd.DataFrame, "tuple[pd.DataFrame, pd.DataFrame]"]:
    """Runs ``demandflight compare`` and returns its table: one row per trace × model ×
    policy with the mean over seeds and ``*_sd`` columns (the CLI's ``--csv``).

    ``traces`` are :class:`Trace` objects, paths, or ``"gen:KIND[:demands=N]"`` (generated
    afresh per seed). ``policies`` is ``"all"`` or a list of built-in specs
    (``"squid:pct=80,min_bytes=0"``) and :class:`OrphanPolicy` instances, named by their
    ``name`` (else their class); the oracle always runs, and ``regret`` is each row's
    score minus the oracle's, ``vs_oracle`` its ratio. A Python policy runs in processes
    of its own, as ``simulate`` runs it, and is tabulated by the same code as the
    built-in ones; it is not one of the oracle's bases (the built-in policies are). An
    exception it raises is raised again here. Every figure is also paired with ``baseline``'s run of the same trace, model and
    seed: ``<figure>_diff`` (mean difference), ``_diff_lo``/``_diff_hi`` (95% t interval),
    ``_p_t``, ``_p_wilcoxon``; ``wins``/``losses``/``ties`` and ``significant`` are the
    score's. ``runs=True`` returns ``(table, runs)``, where ``runs`` has one row per trace
    × model × policy × seed (the CLI's ``--runs-csv``). ``critical_priority`` sets the
    critical class (default: the highest priority in each trace).
    """
    if isinstance(traces, (str, os.PathLike, Trace)):
        traces = [traces]
    models = [models] if isinstance(models, str) else list(models)
    # Bad arguments are refused here, named, before any process starts.
    for name, value, least in (("seeds", seeds, 1), ("first_seed", first_seed, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, not {value!r}")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise ValueError(f"jobs must be an integer >= 1, not {jobs!r}")
    for model in models:
        if model not in _core.MODELS:
            raise ValueError(f"models: each must be {', '.join(_core.MODELS)}, not {model!r}")
    specs: List[str] = []
    python_policies: Dict[str, Any] = {}
    if isinstance(policies, str):
        listed = [] if policies == "all" else _core.split_policy_list(policies)
        specs = ["all"] if policies == "all" else listed
    else:
        listed = list(policies)
    for p in listed:
        if isinstance(p, str):
            try:
                _core.check_policy(p.replace(";", ","))
            except ValueError as e:
                raise ValueError(f"policies: {e}") from None
            if p not in specs:
                specs.append(p.replace(";", ","))
        elif hasattr(p, "decide"):
            name = _policy_label(p)
            if not name or any(c in name for c in ",=:;\"") or name in python_policies or \
                    name in specs or name == "oracle":
                raise ValueError(f"policies: {name!r} is not a name a Python policy can have "
                                 "in a comparison: each must be unique, not a built-in one's, "
                                 "without , = : ; or \"")
            python_policies[name] = p
        else:
            raise TypeError(f"policies: each must be a policy spec or an OrphanPolicy, "
                            f"not {p!r}")
    if not specs and not python_policies:
        raise ValueError("policies: no policy given")
    if weights:
        _core.check_weights(dict(weights))  # ValueError "weights: ..." (format/score.h's rule)
    if critical_priority is not None and (isinstance(critical_priority, bool)
                                          or not isinstance(critical_priority, int)):
        raise ValueError(f"critical_priority must be an integer, not {critical_priority!r}")
    if not isinstance(baseline, str):
        raise TypeError(f"baseline: a policy spec, not {baseline!r}")
    if baseline not in python_policies:
        try:
            _core.check_policy(baseline.replace(";", ","))
        except ValueError as e:
            raise ValueError(f"baseline: {e}") from None
    with tempfile.TemporaryDirectory(prefix="dfl-compare-py-") as work:
        args: List[str] = [_cli(), "compare"]
        for i, t in enumerate(traces):
            if isinstance(t, Trace):
                path = os.path.join(work, f"{t.name or 'trace'}.jsonl")
                if os.path.exists(path):
                    path = os.path.join(work, f"{t.name or 'trace'}-{i}.jsonl")
                t.save(path)
                args.append(path)
            else:
                args.append(os.fspath(t))
        csv = os.path.join(work, "compare.csv")
        # Built-in policies that are not the baseline only: with none, the baseline alone.
        spec = ",".join(specs) if specs else \
            baseline if baseline not in python_policies else "always-abort"
        args += ["--models", ",".join(models), "--policies", spec, "--seeds", str(seeds),
                 "--first-seed", str(first_seed), "--csv", csv, "--baseline", baseline]
        for i, (name, policy) in enumerate(python_policies.items()):
            job = os.path.join(work, f"policy-{i}.pkl")
            with open(job, "wb") as f:
                f.write(_dumps({"policy": policy}))
            runner = os.path.join(work, f"policy-{i}")
            with open(runner, "w", encoding="utf-8") as f:
                f.write(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m demandflight._external "
                        f"{shlex.quote(job)} \"$@\"\n")
            os.chmod(runner, 0o755)
            args += ["--external", f"{name}={runner}"]
        if critical_priority is not None:
            args += ["--critical-priority", str(critical_priority)]
        runs_csv = os.path.join(work, "runs.csv")
        if runs:
            args += ["--runs-csv", runs_csv]
        if weights:
            args += ["--weights", ",".join(f"{k}={v}" for k, v in weights.items())]
        if jobs:
            args += ["--jobs", str(jobs)]
        import pandas as pd

        proc = subprocess.run(args, capture_output=True, text=True, check=False,
                              env=_child_env())
        if proc.returncode == 2:
            raise ValueError(proc.stderr.strip())
        if proc.returncode != 0:
            for line in proc.stderr.splitlines():  # A Python policy's exception, raised again.
                error = _child_error(line) if line.startswith("{") else {}
                if error.get("from_policy"):
                    _raise_child_error(error, proc.stderr, proc.returncode)
            raise RuntimeError(f"demandflight compare failed: {proc.stderr.strip()}")
        table = pd.read_csv(csv, na_values=["-"])
        if runs:
            return table, pd.read_csv(runs_csv, na_values=["-"])
        return table


def metrics(raw: Mapping[str, Any], weights: Optional[Mapping[str, float]] = None) -> Dict[str, float]:
    """The figures ``compare`` reports for one result JSON, scored by the same C++ code
    (``format/score.h``): the same definitions and the same score."""
    return dict(_core.metrics(json.dumps(raw), dict(weights or {})))


def _sweep_point(point: Dict[str, Any]) -> Dict[str, Any]:
    """Runs one grid point (in a fresh process, wherever this function runs)."""
    params = dict(point["params"])
    trace = Trace(point["trace_text"], point["trace_name"])
    model = params.pop("model", "demand")
    policy = params.pop("policy", "always-abort")
    seed = params.pop("seed", None)  # None: the trace header's, as simulate() takes it.
    result = simulate(trace, model=model, policy=policy, seed=seed, **params)
    row = {"trace": point["trace_name"], **point["labels"]}
    row.update(metrics(result.raw, point["weights"]))
    return row


def sweep(grid: Mapping[str, Iterable[Any]], client: Any = None, *,
          weights: Optional[Mapping[str, float]] = None,
          jobs: Optional[int] = None) -> pd.DataFrame:
    """Runs every combination of ``grid`` and returns one row per combination.

    ``grid`` maps names to the values to try: ``trace`` (required: traces or paths),
    ``model``, ``policy`` (names or OrphanPolicy instances), ``seed``, and any override of
    :func:`simulate` (``client_bandwidth_Bps``, ``cache_bytes``, ``max_transfers``, ...).
    Each row has the grid's values and the figures of :func:`compare` (``gb``,
    ``wasted_gb``, latency percentiles, ``score``, ...).

    Without ``client`` the points run as parallel local processes (``jobs`` at a time,
    default: the CPUs); with a ``dask.distributed.Client`` they run on its cluster (each
    point still in a fresh process on its worker). Both give the same numbers.
    """
    grid = {k: list(v) for k, v in grid.items()}
    if "trace" not in grid:
        raise ValueError("sweep: the grid needs a 'trace' entry")
    traces = [as_trace(t) for t in grid.pop("trace")]
    keys = list(grid)
    points = []
    for trace in traces:
        for values in itertools.product(*(grid[k] for k in keys)):
            params = dict(zip(keys, values))
            labels = {k: (v if isinstance(v, (str, int, float)) else
                          getattr(v, "name", type(v).__name__)) for k, v in params.items()}
            points.append({"trace_text": trace.text, "trace_name": trace.name,
                           "params": params, "labels": labels, "weights": dict(weights or {})})
    import pandas as pd

    if client is not None:
        futures = client.map(_sweep_point, points, pure=False)
        rows = client.gather(futures)
    else:
        with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
            rows = list(pool.map(_sweep_point, points))
    return pd.DataFrame(rows)
