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
from concurrent.futures import as_completed as as_completed_local
from pathlib import Path
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, Optional,
                    Sequence, Union)

from . import _core
from ._simulate import (PolicyLike, _child_env, _child_error, _dumps, _raise_child_error,
                        simulate)
from ._trace import OVERRIDE_KEYS, Trace, TraceLike, as_trace

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
            runs: bool = False, critical_priority: Optional[int] = None,
            resample: str = "none") -> Union[pd.DataFrame, "tuple[pd.DataFrame, pd.DataFrame]"]:
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
    ``_p_t``, ``_p_wilcoxon``; ``wins``/``losses``/``ties``, ``significant`` and
    ``constant`` (every seed gave the same difference: no interval, never significant)
    are the score's. ``runs=True`` returns ``(table, runs)``, where ``runs`` has one row per trace
    × model × policy × seed (the CLI's ``--runs-csv``). ``critical_priority`` sets the
    critical class (default: the highest priority in each trace). ``resample="owners"``
    makes each seed of a trace file a bootstrap of its owners (``--resample owners``), so
    that its replications vary the workload, not only the retry jitter.
    """
    if resample not in ("none", "owners"):
        raise ValueError(f"resample must be 'none' or 'owners', not {resample!r}")
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
                 "--first-seed", str(first_seed), "--csv", csv, "--baseline", baseline,
                 "--resample", resample]
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
    params.pop("seed", None)
    resample = params.pop("resample", "none")
    result = simulate(trace, model=model, policy=policy, seed=point["seed"],
                      oracle_bases=point.get("oracle_bases", ()), resample=resample, **params)
    row = {"trace": point["label"], **point["labels"], "seed": result.raw["seed"]}
    row.update(metrics(result.raw, point["weights"]))
    return row


def _trace_labels(entries: Sequence[Any]) -> List[str]:
    """Unique names for a sweep's traces, as compare names them: a file by its stem, a
    generated trace by its spec, a Trace by its name; a repeated name gets ``#2``, ..."""
    labels: List[str] = []
    for entry in entries:
        if isinstance(entry, Trace):
            name = entry.name or "trace"
        elif isinstance(entry, str) and entry.startswith("gen:"):
            name = entry
        else:
            name = Path(os.fspath(entry)).stem
        label, n = name, 1
        while label in labels:
            n += 1
            label = f"{name}#{n}"
        labels.append(label)
    return labels


def _oracle_spec(weights: Mapping[str, float]) -> str:
    return "oracle:" + ",".join(f"{k}={float(v)!r}" for k, v in
                                {**DEFAULT_WEIGHTS, **weights}.items())


def sweep(grid: Mapping[str, Iterable[Any]], client: Any = None, *,
          weights: Optional[Mapping[str, float]] = None, jobs: Optional[int] = None,
          regret: bool = False, progress: Union[bool, Callable[[int, int], None]] = False
          ) -> pd.DataFrame:
    """Runs every combination of ``grid`` and returns one row per combination.

    ``grid`` maps names to the values to try: ``trace`` (required: traces, paths, or
    ``"gen:KIND[:demands=N]"``, generated afresh for each seed), ``model``, ``policy``
    (built-in specs or OrphanPolicy instances), ``seed``, ``resample`` (``"none"`` or
    ``"owners"``: each seed a bootstrap of a trace file's owners, as in :func:`compare`),
    and any override of
    :func:`simulate` (``client_bandwidth_Bps``, ``cache_bytes``, ``max_transfers``, ...).
    Each row has the trace's unique name, the grid's values, the ``seed`` that ran (a
    trace file's header seed when the grid has none; 1 for a generated trace) and the
    figures of :func:`compare` (``gb``, ``wasted_gb``, latency percentiles, service rates,
    ``score``, ...).

    ``regret=True`` also runs the oracle (as compare always does) once per trace and
    combination of everything but the policy, with the built-in policies of the grid among
    its bases, and adds ``regret`` (score minus the oracle's) and ``vs_oracle`` (score over
    the oracle's), with the oracle's own rows (policy ``"oracle"``). ``progress=True``
    prints ``sweep: k/n points done`` on stderr; a callable gets ``(done, total)``.

    Every point is checked before any process starts (a ``ValueError`` or ``TypeError``
    naming the argument). Without ``client`` the points run as parallel local processes
    (``jobs`` at a time, default: the CPUs); with a ``dask.distributed.Client`` they run
    on its cluster (each point still in a fresh process on its worker). Both give the
    same numbers.

    Where several seeds of one point (trace and every value but the seed) gave identical
    scores, a ``UserWarning`` says that they are no replications.
    """
    if not isinstance(grid, Mapping):
        raise TypeError(f"grid must be a mapping of names to values, not {grid!r}")
    grid = {k: list(v) if not isinstance(v, (str, bytes)) else [v] for k, v in grid.items()}
    if "trace" not in grid or not grid["trace"]:
        raise ValueError("grid: needs a 'trace' entry with at least one trace")
    if weights:
        _core.check_weights(dict(weights))
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise ValueError(f"jobs must be an integer >= 1, not {jobs!r}")
    entries = grid.pop("trace")
    labels = _trace_labels(entries)
    for m in grid.get("model", []):
        if m not in _core.MODELS:
            raise ValueError(f"grid: model must be {', '.join(_core.MODELS)}, not {m!r}")
    for seed in grid.get("seed", []):
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"grid: seed must be an integer >= 0, not {seed!r}")
    for value in grid.get("resample", []):
        if value not in ("none", "owners"):
            raise ValueError(f"grid: resample must be 'none' or 'owners', not {value!r}")
    builtin: List[str] = []
    for p in grid.get("policy", []):
        if isinstance(p, str):
            try:
                _core.check_policy(p)
            except ValueError as e:
                raise ValueError(f"grid: policy: {e}") from None
            if p not in builtin and not p.startswith("oracle"):
                builtin.append(p)
        elif not hasattr(p, "decide"):
            raise TypeError(f"grid: policy must be a policy spec or an OrphanPolicy, not {p!r}")
    unknown = sorted(set(grid) - {"model", "policy", "seed", "resample"} - set(OVERRIDE_KEYS))
    if unknown:
        raise TypeError(f"grid: unknown name {unknown[0]!r} (known: trace, model, policy, seed, "
                        "resample, "
                        f"{', '.join(OVERRIDE_KEYS)})")
    keys = [k for k in grid if k != "policy"]
    policies_ = grid.get("policy", ["always-abort"])
    weights = dict(weights or {})
    points: List[Dict[str, Any]] = []
    groups: List[List[int]] = []  # Points that share an oracle: everything but the policy.
    for entry, label in zip(entries, labels):
        for values in itertools.product(*(grid[k] for k in keys)):
            params = dict(zip(keys, values))
            seed = params.get("seed")
            if isinstance(entry, str) and entry.startswith("gen:"):
                try:
                    text = _core.generate_trace(entry, 1 if seed is None else seed)
                except ValueError as e:
                    raise ValueError(f"grid: trace: {e}") from None
                trace = Trace(text, label)
            else:
                trace = as_trace(entry)
            overrides = {k: v for k, v in params.items()
                         if k not in ("model", "seed", "resample")}
            trace.with_overrides(**overrides)  # ValueError naming a bad override, now.
            group = []
            for p in policies_ + (["oracle"] if regret and "oracle" not in policies_ else []):
                run = dict(params, policy=_oracle_spec(weights) if p == "oracle" else p)
                shown = {k: (v if isinstance(v, (str, int, float)) else _policy_label(v))
                         for k, v in dict(params, policy=p).items() if k != "seed"}
                group.append(len(points))
                points.append({"trace_text": trace.text, "trace_name": trace.name,
                               "label": label, "params": run, "labels": shown, "seed": seed,
                               "weights": weights,
                               "oracle_bases": builtin if p == "oracle" else []})
            groups.append(group)
    import pandas as pd

    total, done = len(points), 0
    report = progress if callable(progress) else None

    def tick() -> None:
        nonlocal done
        done += 1
        if report is not None:
            report(done, total)
        elif progress and (done == total or 10 * done // total != 10 * (done - 1) // total):
            sys.stderr.write(f"sweep: {done}/{total} points done\n")

    rows: List[Dict[str, Any]] = [{} for _ in points]
    if client is not None:
        from distributed import as_completed
        futures = client.map(_sweep_point, points, pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        for future in as_completed(futures):
            rows[index[future.key]] = future.result()
            tick()
    else:
        with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
            futures = {pool.submit(_sweep_point, point): i for i, point in enumerate(points)}
            for future in as_completed_local(futures):
                rows[futures[future]] = future.result()
                tick()
    if regret:
        for group in groups:
            oracle = next(rows[i] for i in group if rows[i]["policy"] == "oracle")
            for i in group:
                rows[i]["regret"], rows[i]["vs_oracle"] = _core.regret(rows[i]["score"],
                                                                       oracle["score"])
    _warn_identical_seeds(points, rows)
    return pd.DataFrame(rows)


def _warn_identical_seeds(points: List[Dict[str, Any]], rows: List[Dict[str, Any]]) -> None:
    """A warning for each point (trace and every value but the seed) whose seeds all gave
    the same score."""
    import warnings
    scores: Dict[tuple, List[float]] = {}
    for point, row in zip(points, rows):
        key = (point["label"],) + tuple(sorted((k, str(v)) for k, v in point["labels"].items()))
        scores.setdefault(key, []).append(row["score"])
    for key, values in scores.items():
        if len(values) < 2 or any(v != values[0] for v in values):
            continue
        values_text = ", ".join(f"{k}={v}" for k, v in key[1:])
        resampled = dict(key[1:]).get("resample", "none") != "none"
        why = (" even with resample='owners' (nothing in this workload varies from seed to "
               "seed)" if resampled else
               " (a trace file's seed varies only the retry jitter; resample='owners' varies "
               "its workload)")
        warnings.warn(f"sweep: {key[0]} ({values_text}): its {len(values)} seeds gave identical "
                      f"scores{why}: they are no replications", UserWarning, stacklevel=3)
