"""simulate(): one simulation, in a fresh process, as pandas DataFrames."""

from __future__ import annotations

import base64
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Sequence,
                    TextIO, Tuple, Union)


from . import _core
from ._policy import OrphanPolicy
from ._trace import OVERRIDE_KEYS, Trace, TraceError, TraceLike, as_trace

if TYPE_CHECKING:  # pandas is imported when first needed: children start fast.
    import pandas as pd

# Overrides that are simulator options rather than header values.
_OPTION_KEYS = ("max_transfers", "max_per_origin", "network_model")

PolicyLike = Union[str, OrphanPolicy]


class SimulationError(RuntimeError):
    """The simulation's process failed for a reason that is not bad input."""


def _dumps(obj: Dict[str, Any]) -> bytes:
    """A job for a child process; its policy, if an object, by cloudpickle where there is
    one (classes defined in a notebook are pickled by value)."""
    if not isinstance(obj.get("policy"), str):
        try:
            import cloudpickle
            return cloudpickle.dumps(obj)
        except ImportError:
            pass
    return pickle.dumps(obj)


def _child_env() -> Dict[str, str]:
    """The child sees the modules this process sees (test files, notebooks' folders)."""
    env = dict(os.environ)
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    package_root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([package_root] + paths)
    # ns-3 reads its defaults as SimGrid is loaded (the ns3 network model).
    env.setdefault("NS_ATTRIBUTE_DEFAULT", _core.NS3_ATTRIBUTE_DEFAULTS)
    return env


def _child_error(stderr: str) -> Dict[str, Any]:
    """The error report the child wrote as its last line of stderr, if any."""
    lines = stderr.strip().splitlines()
    if lines and lines[-1].startswith("{"):
        try:
            return json.loads(lines[-1])
        except ValueError:
            pass
    return {}


def _pass_on_stderr(stderr: str, error: Dict[str, Any]) -> None:
    """What the child printed to stderr (a Python policy's print() among it), without its
    error report ``error``, goes to this process's stderr."""
    lines = stderr.splitlines(keepends=True)
    if error:
        lines = lines[:-1]
    text = "".join(lines).strip("\n")
    if text:
        sys.stderr.write(text + "\n")


def _raise_child_error(error: Dict[str, Any], stderr: str, returncode: int) -> None:
    kind, message = error.get("type"), error.get("message", stderr.strip())
    if error.get("from_policy") and error.get("pickled"):
        # A Python policy raised: the same exception comes back, with where it was raised.
        try:
            exception = pickle.loads(base64.b64decode(error["pickled"]))
        except Exception:  # noqa: BLE001 - an exception that does not unpickle
            exception = None
        if isinstance(exception, Exception):
            exception.add_note("Raised by the policy in the simulation's process:\n" +
                               error.get("traceback", ""))
            raise exception
    if kind == "TraceError":
        e = TraceError(message)
        e.file, e.line, e.field = error.get("file"), error.get("line"), error.get("field")
        raise e
    if kind in ("ValueError", "TypeError", "KeyError", "NotImplementedError"):
        raise {"ValueError": ValueError, "TypeError": TypeError, "KeyError": KeyError,
               "NotImplementedError": NotImplementedError}[kind](message)
    raise SimulationError(f"the simulation's process failed (exit {returncode}): {message}\n"
                          f"{error.get('traceback', '')}")


def _run(trace: Optional[Trace], model: str, policy: PolicyLike, seed: Optional[int],
         options: Dict[str, Any], out: str, timeline: str = "", decisions: str = "",
         decision_horizon_s: float = 60.0, stream: Optional[Dict[str, str]] = None,
         rows: Optional[Dict[str, str]] = None,
         while_running: Optional[Callable[[], None]] = None) -> str:
    """Runs one simulation in a fresh Python process; returns the printed summary.

    ``rows`` ({"head": path, "rows": path}) has the result written as the JSON without its
    rows and the rows by column (see _frames) instead of as one JSON document;
    ``while_running`` is called in this process while the simulation runs."""
    if isinstance(policy, str):
        _core.check_policy(policy)  # Bad input is refused here, before any process.
        policy_name, policy_obj = policy, policy
    elif isinstance(policy, OrphanPolicy) or hasattr(policy, "decide"):
        policy_name, policy_obj = str(getattr(policy, "name", type(policy).__name__)), policy
    else:
        raise TypeError("policy must be a policy name or an OrphanPolicy instance")
    if stream is not None:  # {"path", "demands_csv", "tasks_csv"}: a streamed run.
        job = {"stream": True, **stream}
    else:
        job = {"path": trace._file, "text": None if trace._file else trace.text,
               "name": None if trace._file else trace.name}
        if rows is not None:
            job.update({"head_out": rows["head"], "rows_out": rows["rows"]})
    job.update({
           "model": model, "policy": policy_obj, "policy_name": policy_name, "seed": seed,
           "max_transfers": options.get("max_transfers"),
           "max_per_origin": options.get("max_per_origin"),
           "network_model": options.get("network_model"), "out": out, "timeline": timeline,
           "decisions": decisions, "decision_horizon_s": decision_horizon_s,
           "oracle_bases": list(options.get("oracle_bases", [])),
           "resample": options.get("resample", "none")})
    # The job goes in a file, so that the child starts on it at once while this process
    # does `while_running`.
    job_path = out + ".job"
    with open(job_path, "wb") as f:
        f.write(_dumps(job))
    with subprocess.Popen([sys.executable, "-m", "demandflight._child", job_path],
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=_child_env()) as proc:
        try:
            if while_running is not None:
                while_running()
            stdout, stderr_bytes = proc.communicate()
        except BaseException:  # Interrupted (or while_running failed): no child is left.
            proc.kill()
            raise
    stderr = stderr_bytes.decode(errors="replace")
    error = _child_error(stderr)
    _pass_on_stderr(stderr, error)
    if proc.returncode != 0:
        _raise_child_error(error, stderr, proc.returncode)
    return stdout.decode()


def _read_decisions(path: Union[str, os.PathLike]) -> "pd.DataFrame":
    """A decision log (JSON lines) as a DataFrame, one row per answer of the policy."""
    import pandas as pd

    rows = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except ValueError as e:
                raise ValueError(f"{os.fspath(path)}:{number}: not a decision log line: {e}") \
                    from None
    return pd.DataFrame(rows)


class Result:
    """What one simulation produced (the result JSON of the trace format).

    ``demands`` and ``tasks`` are DataFrames (one row per subscribe, per physical task);
    ``summary`` is the summary dict; ``raw`` is the whole JSON document; ``decisions``
    is the decision log as a DataFrame (one row per answer of the orphan policy) when the
    run was asked for it (``simulate(..., decisions=True)``), else None.
    """

    def __init__(self, raw: Dict[str, Any], summary_text: str, rerun: Any,
                 policy_report: Any = None, decisions: Optional["pd.DataFrame"] = None,
                 rows: Optional[Dict[str, Any]] = None,
                 frames: Optional[Tuple["pd.DataFrame", "pd.DataFrame"]] = None,
                 raw_from: Optional[Callable[[], Dict[str, Any]]] = None,
                 keep: Any = None) -> None:
        """``raw`` is the result JSON; or, with ``raw_from`` (which makes the result JSON
        when :attr:`raw` is first asked for), the same without its rows, which ``frames``
        (demands, tasks) then hold. ``keep`` (a temporary directory) lives as long as the
        Result."""
        #: What a Python policy's ``report()`` returned at the end of the run (its own
        #: counters, say); for the oracle, its search (decisions, runs, changed, base,
        #: score); else None.
        self.policy_report = policy_report if policy_report is not None \
            else raw.get("policy_report")
        self._head = raw
        self._raw = None if raw_from is not None else raw
        self._raw_from = raw_from
        self._keep = keep
        self.summary: Dict[str, Any] = raw["summary"]
        #: A streamed run's row files ({"demands": path, "tasks": path, "dir": the
        #: temporary directory that holds them, if any}); None for a run in memory.
        self._rows = rows
        self._demands: Optional[pd.DataFrame] = None
        self._tasks: Optional[pd.DataFrame] = None
        if frames is not None:
            self._demands, self._tasks = frames
        elif rows is None:
            import pandas as pd

            self._demands = pd.DataFrame(raw["demands"])
            self._tasks = pd.DataFrame(raw["tasks"])
        self.summary_text = summary_text
        self.decisions = decisions
        self._rerun = rerun

    @property
    def raw(self) -> Dict[str, Any]:
        """The whole result JSON document, as a dict."""
        if self._raw is None:
            self._raw = self._raw_from()
        return self._raw

    @classmethod
    def load(cls, path: Union[str, os.PathLike],
             decisions: Optional[Union[str, os.PathLike]] = None) -> "Result":
        """Reads a result JSON that ``demandflight sim --out`` (or ``compare``) wrote, and
        optionally its ``--decisions`` log. Raises ``ValueError`` naming the file when it is
        not a demandflight result."""
        name = os.fspath(path)
        try:
            with open(name, encoding="utf-8") as f:
                raw = json.load(f)
        except ValueError as e:
            raise ValueError(f"{name}: not a demandflight result: {e}") from None
        if not isinstance(raw, dict) or raw.get("format") != "demandflight-result":
            found = raw.get("format") if isinstance(raw, dict) else type(raw).__name__
            raise ValueError(f"{name}: format: expected \"demandflight-result\", found "
                             f"{found!r}")
        for field in ("demands", "tasks", "summary"):
            if field not in raw:
                raise ValueError(f"{name}: {field}: missing")

        def no_rerun(_: str) -> None:
            raise ValueError(f"timeline: a result loaded from {name} cannot be run again; "
                             "run `demandflight sim --timeline FILE` instead")

        return cls(raw, "", no_rerun,
                   decisions=None if decisions is None else _read_decisions(decisions))

    @property
    def demands(self) -> "pd.DataFrame":
        """One row per subscribe, in subscribe order (a streamed run's are read from its
        CSV file on first use: see :meth:`demand_chunks` for runs too large for memory)."""
        if self._demands is None:
            self._demands = _concat(self.demand_chunks())
        return self._demands

    @property
    def tasks(self) -> "pd.DataFrame":
        """One row per physical task, in start order (see :attr:`demands`)."""
        if self._tasks is None:
            self._tasks = _concat(self.task_chunks())
        return self._tasks

    @property
    def streamed(self) -> bool:
        """Whether the run was streamed (``simulate(..., stream=True)``)."""
        return self._rows is not None

    def demand_chunks(self, chunksize: int = 1_000_000) -> Iterator["pd.DataFrame"]:
        """The demand rows in DataFrames of at most ``chunksize`` rows, read lazily from a
        streamed run's CSV file (one chunk of everything for a run in memory)."""
        return self._chunks("demands", chunksize)

    def task_chunks(self, chunksize: int = 1_000_000) -> Iterator["pd.DataFrame"]:
        """The task rows in chunks, as :meth:`demand_chunks`."""
        return self._chunks("tasks", chunksize)

    def _chunks(self, which: str, chunksize: int) -> Iterator["pd.DataFrame"]:
        if self._rows is None:
            frame = self._demands if which == "demands" else self._tasks
            return iter([frame])
        return read_rows(self._rows[which], chunksize=chunksize)

    @property
    def warnings(self) -> list:
        """Settings of the run that could not take effect, in words (also on stderr)."""
        return list(self._head.get("warnings", []))

    @property
    def model(self) -> str:
        """The model that ran."""
        return self._head["model"]

    @property
    def policy(self) -> str:
        """The orphan policy's name."""
        return self._head["policy"]

    def timeline(self, path: Union[str, os.PathLike]) -> None:
        """Writes the Chrome/Perfetto trace-event JSON of this run to ``path`` (the run is
        repeated in a fresh process with the timeline on: simulations are deterministic)."""
        self._rerun(os.fspath(path))

    def __repr__(self) -> str:
        s = self.summary
        demands = sum(s["outcomes"].values()) if self.streamed else len(self.demands)
        return (f"Result({self._head['trace']!r}, model={self.model!r}, policy={self.policy!r}, "
                f"{demands} demands, {s['bytes_transferred']} bytes, "
                f"{s['bytes_wasted']} wasted)")


def simulate(trace: TraceLike, model: str = "demand", policy: PolicyLike = "always-abort",
             seed: Optional[int] = None, decisions: bool = False,
             decision_horizon_s: float = 60.0, oracle_bases: Sequence[str] = (),
             resample: str = "none", stream: bool = False,
             rows_dir: Optional[Union[str, os.PathLike]] = None, **overrides: Any) -> Result:
    """Simulates ``trace`` on SimGrid and returns its :class:`Result`.

    ``policy`` is a built-in name (``"squid:pct=80"``, see :func:`policies`) or an
    :class:`OrphanPolicy` instance. ``overrides`` change the trace's header or the
    simulator: ``max_transfers``, ``max_per_origin``, ``network_model`` ("default" =
    "tcp": CM02 calibrated on the real backend plus TCP state per kept-alive connection,
    "calibrated": the flow model alone, "cm02": exact, "lv08": SimGrid's own, "ns3":
    packet-level TCP, slow), ``server_congestion_control`` ("cubic" or "bbr", what the
    tcp model follows after idle), ``cache_bytes``, ``client_bandwidth_Bps``,
    ``client_latency_s``, ``disk_write_Bps``, ``hash_Bps``, ``retry_max_attempts``, ``retry_base_s``, ``retry_cap_s``,
    ``retry_jitter``.

    ``seed`` drives the retry jitter; None (the default) takes the trace header's seed, as
    ``demandflight sim`` does without ``--seed``.

    ``oracle_bases``: with ``policy="oracle"``, built-in policy specs the oracle also
    starts from (``demandflight sim --oracle-base``; every built-in policy with its
    defaults always is one).

    ``resample="owners"`` runs a bootstrap of the trace's owners drawn with the run's seed
    (``demandflight sim --resample owners``), so that seeds vary a trace file's workload.

    ``decisions=True`` keeps the decision log (``demandflight sim --decisions``) as
    ``Result.decisions``: every answer of the orphan policy with the view it answered and
    whether the key came back within ``decision_horizon_s`` seconds.

    ``stream=True`` runs a trace too large for memory as ``demandflight sim --stream``
    does: ``trace`` is a path (not read here), the child reads it as the simulation goes
    and writes each row as it ends to ``demands.csv.gz`` and ``tasks.csv.gz`` in
    ``rows_dir`` (default: a temporary directory that lives as long as the Result).
    The summary is exact and the same as a run in memory; read the rows with
    :meth:`Result.demand_chunks` or :func:`read_rows`. Only the simulator's overrides
    (``max_transfers``, ``max_per_origin``, ``network_model``) apply, and not
    ``decisions``, ``resample``, lookahead or the oracle (they need the whole trace).

    Each call runs in a fresh process (SimGrid allows one simulation per process), so a
    notebook may call it any number of times. Raises :class:`TraceError` for a bad trace
    and ``ValueError`` for a bad model or policy.
    """
    if not isinstance(stream, bool):
        raise TypeError(f"stream must be True or False, not {stream!r}")
    if rows_dir is not None and not stream:
        raise ValueError("rows_dir: only a streamed run (stream=True) writes row files")
    if stream:
        return _simulate_streamed(trace, model, policy, seed, decisions, resample, rows_dir,
                                  overrides)
    trace = as_trace(trace)
    unknown = sorted(set(overrides) - set(OVERRIDE_KEYS))
    if unknown:
        raise TypeError(f"unknown override {unknown[0]!r} (known: {', '.join(OVERRIDE_KEYS)})")
    if model not in _core.MODELS:
        raise ValueError(f"model must be {', '.join(_core.MODELS)}, not {model!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ValueError(f"seed must be an integer >= 0 or None, not {seed!r}")
    if not isinstance(decisions, bool):
        raise TypeError(f"decisions must be True or False, not {decisions!r}")
    if isinstance(decision_horizon_s, bool) or not isinstance(decision_horizon_s, (int, float)) \
            or not 0 < decision_horizon_s < float("inf"):
        raise ValueError(f"decision_horizon_s must be a positive number of seconds, not "
                         f"{decision_horizon_s!r}")
    if resample not in ("none", "owners"):
        raise ValueError(f"resample must be 'none' or 'owners', not {resample!r}")
    if isinstance(oracle_bases, str):
        raise TypeError("oracle_bases must be a list of policy specs, not a string")
    for base in oracle_bases:
        try:
            _core.check_policy(base)
        except (ValueError, TypeError) as e:
            raise ValueError(f"oracle_bases: {e}") from None
    options = {k: v for k, v in overrides.items() if k in _OPTION_KEYS}
    header = {k: v for k, v in overrides.items() if k not in _OPTION_KEYS}
    # The simulator's options obey the trace header's rules (ValueError naming the
    # argument), checked here, before any process starts.
    trace.with_overrides(**options)
    trace = trace.with_overrides(**header)
    # The child writes the result without its rows (JSON) and the rows by column (pickled
    # arrays): pandas builds DataFrames from those at once, and imports while the
    # simulation runs. The whole JSON document (.raw) is made from them when asked for.
    keep = tempfile.TemporaryDirectory(prefix="dfl-sim-")
    try:
        work = keep.name
        out = os.path.join(work, "result.json")
        rows = {"head": os.path.join(work, "head.json"), "rows": os.path.join(work, "rows.pickle")}
        log = os.path.join(work, "decisions.jsonl") if decisions else ""
        text = _run(trace, model, policy, seed,
                    {**options, "oracle_bases": list(oracle_bases), "resample": resample},
                    out, decisions=log, decision_horizon_s=float(decision_horizon_s),
                    rows=rows, while_running=_import_pandas)
        with open(rows["head"], encoding="utf-8") as f:
            head = json.load(f)
        frames = _frames(_load_columns(rows["rows"]))
        decision_frame = _read_decisions(log) if decisions else None
        report = None
        if os.path.exists(out + ".report"):
            with open(out + ".report", "rb") as f:
                report = pickle.load(f)
    except BaseException:
        keep.cleanup()
        raise

    def rerun(path: str) -> None:
        with tempfile.TemporaryDirectory(prefix="dfl-sim-") as again:
            _run(trace, model, policy, seed,
                 {**options, "oracle_bases": list(oracle_bases), "resample": resample},
                 os.path.join(again, "result.json"), path)

    return Result(head, text, rerun, report, decision_frame, frames=frames,
                  raw_from=lambda: _document(head, _load_columns(rows["rows"])), keep=keep)


def _import_pandas() -> None:
    import pandas  # noqa: F401 - imported while the simulation runs, to be ready after it


def _load_columns(path: str) -> Dict[str, Dict[str, Any]]:
    with open(path, "rb") as f:
        return pickle.load(f)


# The columns of the rows (bindings/src/module.cpp, write_row_columns): numbers come as
# the bytes of float64 arrays (NaN: null) or int64 arrays; the others are lists.
_FLOAT_COLUMNS = {"t_subscribe", "t_end", "latency_s", "task", "t_start", "t_first_start",
                  "t_received"}
_INT_COLUMNS = {"priority", "attempts", "bytes_transferred", "installs"}
_NULLABLE_INT_COLUMNS = {"task"}


def _frames(columns: Dict[str, Dict[str, Any]]) -> Tuple["pd.DataFrame", "pd.DataFrame"]:
    """The demand and task DataFrames of a run's columns, as pandas makes them from the
    result JSON's rows (``pd.DataFrame(raw["demands"])``): a number column with nulls is
    float64 with NaN, one of nulls only holds None; an integer column without nulls is
    int64."""
    import numpy as np
    import pandas as pd

    def frame(section: Dict[str, Any]) -> "pd.DataFrame":
        data: Dict[str, Any] = {}
        for name, values in section.items():
            if name in _FLOAT_COLUMNS:
                array = np.frombuffer(values, dtype=np.float64)
                nulls = np.isnan(array)
                if len(array) and nulls.all():
                    data[name] = np.full(len(array), None, dtype=object)
                elif name in _NULLABLE_INT_COLUMNS and not nulls.any():
                    data[name] = array.astype(np.int64)
                else:
                    data[name] = array.copy()  # Writable, as a frame's column is.
            elif name in _INT_COLUMNS:
                data[name] = np.frombuffer(values, dtype=np.int64).copy()
            else:
                column = np.empty(len(values), dtype=object)
                column[:] = values
                data[name] = column
        return pd.DataFrame(data)

    return frame(columns["demands"]), frame(columns["tasks"])


def _document(head: Dict[str, Any], columns: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    """The result JSON document (as json.load gives it) of a run's head and columns."""
    import numpy as np

    def rows(section: Dict[str, Any]) -> List[Dict[str, Any]]:
        lists = {}
        for name, values in section.items():
            if name in _FLOAT_COLUMNS:
                array = np.frombuffer(values, dtype=np.float64)
                as_list = array.astype(object)
                as_list[np.isnan(array)] = None
                if name in _NULLABLE_INT_COLUMNS:
                    as_list = [None if v is None else int(v) for v in as_list]
                lists[name] = list(as_list)
            elif name in _INT_COLUMNS:
                lists[name] = np.frombuffer(values, dtype=np.int64).tolist()
            else:
                lists[name] = values
        names = list(lists)
        return [dict(zip(names, values)) for values in zip(*lists.values())]

    document = dict(head)
    document["demands"] = rows(columns["demands"])
    document["tasks"] = rows(columns["tasks"])
    return document


def _simulate_streamed(trace: TraceLike, model: str, policy: PolicyLike, seed: Optional[int],
                       decisions: bool, resample: str,
                       rows_dir: Optional[Union[str, os.PathLike]],
                       overrides: Dict[str, Any]) -> Result:
    """simulate(..., stream=True)."""
    if decisions:
        raise ValueError("decisions: a streamed run writes no decision log (it needs the "
                         "whole trace); run without stream=True")
    if resample != "none":
        raise ValueError("resample: a streamed run cannot resample (it needs the whole "
                         "trace); run without stream=True")
    for key in overrides:
        if key not in OVERRIDE_KEYS:
            raise TypeError(f"unknown override {key!r} (known: {', '.join(OVERRIDE_KEYS)})")
        if key not in _OPTION_KEYS:
            raise ValueError(f"{key}: a streamed run does not rewrite the trace header; "
                             f"set it in the file, or run without stream=True")
    if model not in _core.MODELS:
        raise ValueError(f"model must be {', '.join(_core.MODELS)}, not {model!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ValueError(f"seed must be an integer >= 0 or None, not {seed!r}")
    if isinstance(policy, str) and not _core.streamable_policy(policy):
        raise ValueError(f"policy: {policy.split(':', 1)[0]} reads the whole trace in advance; "
                         "run without stream=True")
    limit = _core.MAX_TRANSFERS_LIMIT
    for key in ("max_transfers", "max_per_origin"):
        value = overrides.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or
                                  not 1 <= value <= limit):
            raise ValueError(f"{key} must be an integer from 1 to {limit}, not {value!r}")
    network = overrides.get("network_model")
    if network is not None and network not in _core.NETWORK_MODELS:
        raise ValueError(f"network_model must be one of {', '.join(_core.NETWORK_MODELS)}, "
                         f"not {network!r}")
    keep: Any = None
    if rows_dir is None:
        keep = tempfile.TemporaryDirectory(prefix="dfl-rows-")
        directory = keep.name
    else:
        directory = os.fspath(rows_dir)
        os.makedirs(directory, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dfl-sim-") as work:
        path: Optional[str]
        if isinstance(trace, Trace):
            path = trace.path
            if path is None:  # A trace in memory: a file for the child to stream.
                path = os.path.join(work, "trace.jsonl")
                Path(path).write_text(trace.text)
        else:
            path = os.fspath(trace)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"trace: no such file: {path}")
        rows = {"demands": os.path.join(directory, "demands.csv.gz"),
                "tasks": os.path.join(directory, "tasks.csv.gz")}
        out = os.path.join(work, "result.json")
        text = _run(None, model, policy, seed, dict(overrides), out,
                    stream={"path": path, "demands_csv": rows["demands"],
                            "tasks_csv": rows["tasks"]})
        raw = json.loads(Path(out).read_text())
        report = None
        if os.path.exists(out + ".report"):
            with open(out + ".report", "rb") as f:
                report = pickle.load(f)

    def no_rerun(_: str) -> None:
        raise ValueError("timeline: a streamed run writes no timeline; run without "
                         "stream=True")

    return Result(raw, text, no_rerun, report, rows={**rows, "dir": keep})


def _concat(chunks: Iterator["pd.DataFrame"]) -> "pd.DataFrame":
    import pandas as pd

    frames = list(chunks)
    if not frames:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def read_rows(path: Union[str, os.PathLike], chunksize: int = 1_000_000,
              section: str = "demands") -> Iterator["pd.DataFrame"]:
    """A run's rows in DataFrames of at most ``chunksize`` rows, read lazily: from a CSV
    file of ``demandflight sim --demands-csv`` or ``--tasks-csv`` (plain or ``.gz``), or
    from the ``section`` ("demands" or "tasks") of a result JSON (read incrementally by
    a JSON parser, whatever its line breaks, up to the section's end). Nulls are NaN
    (numbers) or None. A task's ``priority_timeline`` and ``orphan_decisions`` are lists
    in a JSON result and JSON text in a CSV file. Raises ``ValueError`` naming the file
    and line for what is not such a file."""
    import pandas as pd

    if isinstance(chunksize, bool) or not isinstance(chunksize, int) or chunksize < 1:
        raise ValueError(f"chunksize must be a positive integer, not {chunksize!r}")
    if section not in ("demands", "tasks"):
        raise ValueError(f"section must be 'demands' or 'tasks', not {section!r}")
    name = os.fspath(path)
    if name.endswith(".csv") or name.endswith(".csv.gz"):
        def csv_chunks() -> Iterator["pd.DataFrame"]:
            try:
                reader = pd.read_csv(name, chunksize=chunksize, keep_default_na=False,
                                     na_values=[""], dtype={"demand": str, "owner": str,
                                                            "artifact": str})
                with reader:
                    yield from reader
            except (pd.errors.ParserError, UnicodeDecodeError, OSError) as e:
                raise ValueError(f"{name}: not a demandflight row file: {e}") from None
        return csv_chunks()
    return _section_rows(name, section, chunksize)


# A result JSON is read in blocks of this many characters: what is held at once is
# about a block and the value being parsed, whatever the file's size.
_JSON_BLOCK_CHARS = 1 << 20

_JSON_SPACE = re.compile(r"[ \t\n\r]*")


class _JsonBlocks:
    """A JSON text read block by block and parsed a value at a time (the json module's
    raw_decode), the text already parsed dropped: line breaks and white space mean
    nothing to it. Errors are ValueErrors naming the file and the line."""

    def __init__(self, name: str, f: TextIO) -> None:
        self.name = name
        self._file = f
        self._decoder = json.JSONDecoder()
        self._text = ""
        self._pos = 0  # What is parsed next, in _text.
        self._line = 1  # The line of _text[0].
        self._value_start = 0  # Where in _text the value value() last gave starts.
        self._end = False  # The whole file is in _text.

    def error(self, message: str, pos: Optional[int] = None) -> ValueError:
        """A ValueError for ``message`` about the text at ``pos`` (default: the next)."""
        line = self._line + self._text.count("\n", 0, self._pos if pos is None else pos)
        return ValueError(f"{self.name}:{line}: {message}")

    def value_error(self, message: str) -> ValueError:
        """A ValueError for ``message`` about the value value() last gave."""
        return self.error(message, self._value_start)

    def _read(self) -> bool:
        """Appends the next block, dropping the text before _pos; False at the end of
        the file."""
        if self._end:
            return False
        try:
            block = self._file.read(_JSON_BLOCK_CHARS)
        except UnicodeDecodeError as e:
            raise ValueError(f"{self.name}: not UTF-8 text: {e}") from None
        if not block:
            self._end = True
            return False
        self._line += self._text.count("\n", 0, self._pos)
        self._text = self._text[self._pos:] + block
        self._pos = 0
        return True

    def peek(self) -> str:
        """The next character that is not white space, not taken; "" at the end."""
        while True:
            match = _JSON_SPACE.match(self._text, self._pos)
            assert match is not None  # The pattern matches the empty string.
            self._pos = match.end()
            if self._pos < len(self._text):
                return self._text[self._pos]
            if not self._read():
                return ""

    def take(self, char: str, expected: str) -> None:
        """Takes ``char``, the next character that is not white space."""
        if self.peek() != char:
            raise self.unexpected(expected)
        self._pos += 1

    def unexpected(self, expected: str) -> ValueError:
        """The error for what is next where ``expected`` should be."""
        found = self.peek()
        shown = repr(found) if found else "the end of the file"
        return self.error(f"not valid JSON: expected {expected}, found {shown}")

    def value(self) -> Any:
        """The next value, taken."""
        if not self.peek():
            raise self.unexpected("a value")
        while True:
            try:
                value, end = self._decoder.raw_decode(self._text, self._pos)
            except json.JSONDecodeError as e:
                # Text cut by the end of the block fails within a few characters of
                # it (a block is far longer than any token), or as a string that does
                # not end: the next block may go on.
                cut = (e.pos > len(self._text) - _JSON_BLOCK_CHARS or
                       e.msg.startswith("Unterminated string"))
                if cut and self._read():
                    continue
                raise self.error(f"not valid JSON: {e.msg}", e.pos) from None
            if end == len(self._text) and self._read():
                continue  # A number may go on in the next block.
            self._value_start = self._pos
            self._pos = end
            return value

    def members(self) -> Iterator[str]:
        """The keys of the object that is next, taken one by one; after each key, the
        caller takes its value (value(), elements() or skip())."""
        self.take("{", "'{'")
        first = True
        while self.peek() != "}":
            if not first:
                self.take(",", "',' or '}'")
            if self.peek() != '"':
                raise self.unexpected("a key")
            key = self.value()
            self.take(":", "':'")
            yield key
            first = False
        self._pos += 1

    def elements(self) -> Iterator[Any]:
        """The elements of the array that is next, taken one by one."""
        self.take("[", "'['")
        first = True
        while self.peek() != "]":
            if not first:
                self.take(",", "',' or ']'")
            yield self.value()
            first = False
        self._pos += 1

    def skip(self) -> None:
        """Takes the next value; an array element by element, so a large one is not
        held whole."""
        if self.peek() == "[":
            for _ in self.elements():
                pass
        else:
            self.value()


def _section_rows(name: str, section: str, chunksize: int) -> Iterator["pd.DataFrame"]:
    """The rows of a result JSON's ``section``, in DataFrames of at most ``chunksize``
    rows; the document is parsed as it is read, up to the section's end."""
    import pandas as pd

    with open(name, encoding="utf-8") as f:
        text = _JsonBlocks(name, f)
        if text.peek() != "{":
            raise text.error("format: not a demandflight result (not a JSON object)")
        known = False  # "format" was met, and says a demandflight result.
        for key in text.members():
            if key == "format":
                if text.value() != "demandflight-result":
                    raise text.value_error("format: not a demandflight result")
                known = True
            elif key == section:
                break
            else:
                text.skip()
        else:
            if not known:
                raise text.error("format: not a demandflight result (no \"format\")")
            raise ValueError(f"{name}: {section}: missing")
        if not known:
            raise text.error(f"format: not a demandflight result (no \"format\" before "
                             f"\"{section}\")")
        if text.peek() != "[":
            raise text.error(f"{section}: not an array")
        rows = []
        yielded = False
        for row in text.elements():
            if not isinstance(row, dict):
                raise text.value_error(f"{section}: a row is not a JSON object")
            rows.append(row)
            if len(rows) == chunksize:
                yield pd.DataFrame(rows)
                yielded = True
                rows = []
        if rows or not yielded:
            yield pd.DataFrame(rows)
