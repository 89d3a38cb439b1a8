"""Traces: load, save, build in Python, and override header values."""

from __future__ import annotations

import json
import numbers
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Union

from . import _core

if TYPE_CHECKING:
    import pandas as pd

TraceError = _core.TraceError


def import_formats() -> List[str]:
    """The formats :meth:`Trace.import_` reads: csv, oracle-general, har, cdp."""
    return list(_core.import_formats())


def import_options(format: str) -> "Any":
    """A DataFrame of a format's import options: name (as a Python keyword), help,
    required, flag, default."""
    import pandas as pd

    if format not in _core.import_formats():
        raise ValueError(f"format must be one of {', '.join(_core.import_formats())}, "
                         f"not {format!r}")
    rows = [(n.replace("-", "_"), h, r, f, d) for n, h, r, f, d in _core.import_options(format)]
    return pd.DataFrame(rows, columns=["name", "help", "required", "flag", "default"])

# Header overrides: keyword -> (section, field) of the trace header.
_PLATFORM_KEYS = ("client_bandwidth_Bps", "client_latency_s", "disk_write_Bps", "hash_Bps",
                  "network_model", "server_congestion_control")
_SCHEDULER_KEYS = ("max_transfers", "max_per_origin", "cache_bytes")
_RETRY_KEYS = {"retry_max_attempts": "max_attempts", "retry_base_s": "base_s",
               "retry_cap_s": "cap_s", "retry_jitter": "jitter"}
OVERRIDE_KEYS = _PLATFORM_KEYS + _SCHEDULER_KEYS + tuple(_RETRY_KEYS)


def _argument_of(field: str) -> str:
    """The override (Python argument) that sets a header field."""
    if field.startswith("scheduler.retry."):
        inner = field[len("scheduler.retry."):]
        return next((k for k, v in _RETRY_KEYS.items() if v == inner), field)
    return field.rpartition(".")[2] or field


class Trace:
    """A validated trace (``docs/trace-format.md``).

    Make one with :meth:`Trace.load`, :class:`TraceBuilder` or ``Trace(text)``; a bad
    trace raises :class:`TraceError` with the file, line and field, as the CLI says.
    """

    def __init__(self, text: str, name: str = "<trace>", *, _path: Optional[str] = None,
                 _parsed: Any = None) -> None:
        self._text_value: Optional[str] = text
        self._path = _path
        #: A file that holds exactly this trace's text: what a simulation's process reads
        #: (the loaded file, or an imported trace's own temporary file), else None.
        self._file = _path
        self._keep: Any = None  # The temporary directory that holds _file, if any.
        self._parsed_value = _parsed if _parsed is not None else _core.parse_trace(text, name)

    @classmethod
    def _of_own_file(cls, path: str, keep: Any) -> "Trace":
        """A trace in a file that an importer just wrote in ``keep`` (a temporary directory
        that lives as long as the trace; valid by construction, and no one else writes it):
        read and parsed when first needed."""
        trace = cls.__new__(cls)
        trace._text_value, trace._parsed_value = None, None
        trace._path, trace._file, trace._keep = None, path, keep
        return trace

    @property
    def _text(self) -> str:
        if self._text_value is None:
            self._text_value = Path(self._file).read_text()
        return self._text_value

    @property
    def _parsed(self) -> Any:
        if self._parsed_value is None:
            self._parsed_value = _core.load_trace(self._file)
        return self._parsed_value

    def __reduce__(self) -> Any:  # A copy in another process is a trace in memory.
        return (Trace, (self.text, self.name))

    @classmethod
    def load(cls, path: Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]]) -> "Trace":
        """Reads and validates a ``.jsonl`` trace file, or the parts of a rotated recording
        (a list, in order: ``rec.jsonl``, ``rec.1.jsonl``, ...) as one trace: the first
        part's header, every part's records, each artifact declared once."""
        if not isinstance(path, (str, os.PathLike)):
            parts = [os.fspath(p) for p in path]
            if not parts:
                raise ValueError("path: an empty list of parts")
            if len(parts) > 1:
                return cls(_merge_parts(parts), parts[0])
            path = parts[0]
        path = os.fspath(path)
        parsed = _core.load_trace(path)
        return cls(Path(path).read_text(), path, _path=path, _parsed=parsed)

    @classmethod
    def load_recording(cls, path: Union[str, os.PathLike]) -> "Trace":
        """A client's recording (``fetch --record``, ``ClientOptions::record``) from its
        first file, with every part that follows it (``rec.1.jsonl``, ``rec.2.jsonl``,
        ...; docs/backend.md, *Recording*)."""
        return cls.load(recording_parts(path))

    @property
    def measured(self) -> "pd.DataFrame":
        """What a client's recording measured of its network and disk (its header's
        ``x-measured``): one row per figure, ``figure``, ``origin`` (for an origin's
        figures, else None), ``value`` and ``samples``. Empty for a trace that is not a
        recording, or one whose client was killed before it measured."""
        import pandas as pd
        x = self.header().get("x-measured") or {}
        rows = []
        for origin, o in sorted((x.get("origins") or {}).items()):
            rows.append(("rtt_s", origin, o.get("rtt_s"), o.get("rtt_samples")))
            rows.append(("lone_Bps", origin, o.get("lone_Bps"), o.get("lone_samples")))
            rows.append(("busiest_Bps", origin, o.get("busiest_Bps"), o.get("windows")))
        if "client" in x:
            rows.append(("client_busiest_Bps", None, x["client"].get("busiest_Bps"),
                         x["client"].get("windows")))
        if "finalize" in x:
            rows.append(("finalize_Bps", None, x["finalize"].get("Bps"), x["finalize"].get("count")))
        return pd.DataFrame(rows, columns=["figure", "origin", "value", "samples"])

    @classmethod
    def import_(cls, format: str,
                inputs: Union[str, os.PathLike, List[Union[str, os.PathLike]]], *,
                out: Optional[Union[str, os.PathLike]] = None, **options: Any) -> "Trace":
        """A request log or a browser capture as a trace (``demandflight import FORMAT``).

        ``format`` is ``"csv"``, ``"oracle-general"``, ``"har"`` or ``"cdp"``; ``options``
        are the command's, with underscores for dashes (``time_unit="ms"``,
        ``priority_by="type"``, ``abandon="p=0.2,dist=exponential,mean_s=2"``); a flag is
        ``True``. ``import_formats()`` lists the formats and ``import_options(format)``
        each format's options. The header's ``x-import`` says what was read, made and
        skipped. ``out`` keeps the trace file. Bad input raises :class:`TraceError` with
        the file, line (or record) and field; a bad option a ``ValueError`` naming it; an
        unknown one a ``TypeError``."""
        import re
        import tempfile

        if format not in _core.import_formats():
            raise ValueError(f"format must be one of {', '.join(_core.import_formats())}, "
                             f"not {format!r}")
        paths = [os.fspath(p) for p in ([inputs] if isinstance(inputs, (str, os.PathLike))
                                        else inputs)]
        if not paths:
            raise ValueError("inputs: no input file")
        known = {name: flag for name, _, _, flag, _ in _core.import_options(format)}
        given: Dict[str, str] = {}
        for key, value in options.items():
            name = key.replace("_", "-")
            if name not in known:
                raise TypeError(f"import_({format!r}) got an unexpected keyword argument "
                                f"{key!r}; it takes "
                                f"{', '.join(n.replace('-', '_') for n in known)}")
            if value is None or (known[name] and value is False):
                continue
            if known[name] and value is not True:
                raise ValueError(f"{key} is a flag: True or False, not {value!r}")
            given[name] = "true" if value is True else str(value)
        # Without `out`, the trace's file lives in a temporary directory as long as the
        # trace: a simulation's process reads it there, and nothing reads it twice.
        keep = tempfile.TemporaryDirectory(prefix="dfl-import-") if out is None else None
        target = os.fspath(out) if out is not None else os.path.join(keep.name, "trace.jsonl")
        try:
            _core.import_trace(format, paths, target, given)
        except TraceError:
            raise
        except ValueError as e:  # The option by its Python name.
            raise ValueError(re.sub(r"--([a-z][a-z-]*)",
                                    lambda m: m.group(1).replace("-", "_"), str(e))) from None
        if out is not None:  # The caller's file: read now, as load() does.
            return cls.load(target)
        return cls._of_own_file(target, keep)

    @classmethod
    def import_csv(cls, inputs: Union[str, os.PathLike, List[Union[str, os.PathLike]]], *,
                   time: str, key: str, size: str, header: bool = True,
                   out: Optional[Union[str, os.PathLike]] = None, **options: Any) -> "Trace":
        """A CSV request log as a trace: ``import_("csv", ...)`` with the three required
        columns named (by the header row, or numbered from 1 with ``header=False``)."""
        return cls.import_("csv", inputs, out=out, time=time, key=key, size=size,
                           no_header=not header, **options)

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Writes the trace as JSON Lines."""
        Path(path).write_text(self._text)

    @property
    def text(self) -> str:
        """The trace's JSON Lines text."""
        return self._text

    @property
    def path(self) -> Optional[str]:
        """The file it was loaded from, if any."""
        return self._path

    @property
    def name(self) -> str:
        """The header's ``name``."""
        return self._parsed.name

    @property
    def demands(self) -> int:
        """The number of subscribe records."""
        return self._parsed.demands

    def to_dict(self) -> Dict[str, Any]:
        """The parsed content: effective header values (defaults applied), artifacts and
        records with their names. Two traces are equal when these are."""
        return self._parsed.to_dict()

    def header(self) -> Dict[str, Any]:
        """The header line as written (not the defaults)."""
        return json.loads(self._text.split("\n", 1)[0])

    def with_overrides(self, **overrides: Any) -> "Trace":
        """A copy whose header has these values: ``client_bandwidth_Bps``,
        ``client_latency_s``, ``disk_write_Bps``, ``hash_Bps``, ``network_model``,
        ``server_congestion_control``, ``max_transfers``, ``max_per_origin``, ``cache_bytes``,
        ``retry_max_attempts``, ``retry_base_s``, ``retry_cap_s``, ``retry_jitter``."""
        if not overrides:
            return self
        unknown = sorted(set(overrides) - set(OVERRIDE_KEYS))
        if unknown:
            raise TypeError(f"unknown override {unknown[0]!r} (known: {', '.join(OVERRIDE_KEYS)})")
        first, _, rest = self._text.partition("\n")
        header = json.loads(first)
        for key, value in overrides.items():
            if key in _PLATFORM_KEYS:
                header.setdefault("platform", {})[key] = value
            elif key in _SCHEDULER_KEYS:
                header.setdefault("scheduler", {})[key] = value
            else:
                header.setdefault("scheduler", {}).setdefault("retry", {})[_RETRY_KEYS[key]] = value
        writer = _core.TraceWriter()
        try:
            writer.header(header.get("name", ""), header.get("seed", 0), header.get("platform", {}),
                          header.get("scheduler", {}),
                          [(k, json.dumps(v)) for k, v in header.items() if k.startswith("x-")])
        except ValueError as e:  # The writer's rule, named by the argument that broke it.
            field, _, reason = str(e).partition(": ")
            if field.split(".")[0] in ("retry", "breaker", "throttle"):
                field = "scheduler." + field
            raise ValueError(f"{_argument_of(field)}: {reason}") from None
        try:
            return Trace(writer.text() + rest, self._path or self.name)
        except TraceError as e:  # The reader's rule, named by the argument that broke it.
            reason = str(e).partition(f"{e.field}: ")[2] or str(e)
            raise ValueError(f"{_argument_of(e.field)}: {reason}") from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Trace) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return (f"Trace({self.name!r}, {self._parsed.artifacts} artifacts, "
                f"{self._parsed.records} records, {self._parsed.demands} demands)")


def recording_parts(path: Union[str, os.PathLike]) -> List[str]:
    """The files of a recording whose first file is ``path``: it, then its stem + ``.1``,
    ``.2``, ... + its extension, as long as they exist."""
    first = Path(os.fspath(path))
    if not first.exists():
        raise FileNotFoundError(f"path: no such recording: {first}")
    parts = [str(first)]
    while True:
        part = first.with_name(f"{first.stem}.{len(parts)}{first.suffix}")
        if not part.exists():
            return parts
        parts.append(str(part))


def _merge_parts(parts: List[str]) -> str:
    """One trace's text from a rotated recording's parts (format/trace.h,
    merge_recording_parts): the first header, the records in order, an artifact declared
    again by a later part (same id) left out."""
    try:
        return _core.merge_recording_parts(parts)
    except TraceError as e:  # A part that cannot be read, or an empty one.
        raise ValueError(f"path: {e}") from None


class TraceBuilder:
    """Builds a trace record by record; :meth:`build` validates it into a :class:`Trace`.

    Every method returns the builder, so calls chain::

        trace = (TraceBuilder("demo", seed=7, max_transfers=2)
                 .artifact("rock", "props/rock.mesh", "r3", 25_000_000)
                 .subscribe(0.0, "d1", "streaming", "rock", priority=0)
                 .cancel(1.0, "d1")
                 .build())
    """

    def __init__(self, name: str = "trace", seed: int = 0, *,
                 client_bandwidth_Bps: Optional[float] = None,
                 client_latency_s: Optional[float] = None,
                 origins: Optional[Dict[str, Dict[str, float]]] = None,
                 disk_write_Bps: Optional[float] = None, hash_Bps: Optional[float] = None,
                 network_model: Optional[str] = None,
                 server_congestion_control: Optional[str] = None,
                 max_transfers: Optional[int] = None,
                 max_per_origin: Optional[int] = None, cache_bytes: Optional[int] = None,
                 retry: Optional[Dict[str, float]] = None,
                 breaker: Optional[Dict[str, float]] = None,
                 throttle: Optional[Dict[str, float]] = None) -> None:
        platform: Dict[str, Any] = {}
        for key, value in (("client_bandwidth_Bps", client_bandwidth_Bps),
                           ("client_latency_s", client_latency_s), ("origins", origins),
                           ("disk_write_Bps", disk_write_Bps), ("hash_Bps", hash_Bps),
                           ("network_model", network_model),
                           ("server_congestion_control", server_congestion_control)):
            if value is not None:
                platform[key] = value
        scheduler: Dict[str, Any] = {}
        for key, value in (("max_transfers", max_transfers), ("max_per_origin", max_per_origin),
                           ("cache_bytes", cache_bytes), ("retry", retry),
                           ("breaker", breaker), ("throttle", throttle)):
            if value is not None:
                scheduler[key] = value
        self._name = name
        # The trace format's one writer (format/trace_writer.h), as the importers and
        # the generators write: a bad value is a ValueError naming its field.
        self._writer = _core.TraceWriter()
        self._writer.header(name, _whole("seed", seed), platform, scheduler)

    def artifact(self, id: str, resource: str, revision: str, size: int, *, target: str = "pc",
                 generation: int = 0, origin: str = "cdn",
                 origins: Optional[List[str]] = None,
                 sha256: Optional[str] = None) -> "TraceBuilder":
        """Declares an artifact (``id`` is the trace-local alias of its key).

        ``origins`` (instead of ``origin``): its origins in order of preference, the
        first asked first, the others mirrors a failed attempt moves to.
        """
        self._writer.artifact(id, resource, revision, target, _whole("generation", generation),
                              _whole("size", size),
                              list(origins) if origins is not None else [origin], sha256)
        return self

    def subscribe(self, t: float, demand: str, owner: str, artifact: str, priority: int = 1, *,
                  owner_generation: Optional[int] = None,
                  timeout_s: Optional[float] = None) -> "TraceBuilder":
        """A caller asks for an artifact at time ``t``."""
        self._writer.subscribe(t, demand, owner, artifact, _whole("priority", priority),
                               _whole("owner_generation", owner_generation), timeout_s)
        return self

    def cancel(self, t: float, demand: str) -> "TraceBuilder":
        """That caller withdraws its own demand."""
        self._writer.cancel(t, demand)
        return self

    def set_priority(self, t: float, demand: str, priority: int) -> "TraceBuilder":
        """That caller raises or lowers its demand."""
        self._writer.set_priority(t, demand, _whole("priority", priority))
        return self

    def end_owner(self, t: float, owner: str,
                  owner_generation: Optional[int] = None) -> "TraceBuilder":
        """The owner is destroyed (all generations, or those up to ``owner_generation``)."""
        self._writer.end_owner(t, owner, _whole("owner_generation", owner_generation))
        return self

    def throttle(self, t: float, *, background_at_or_below: Optional[int] = None,
                 background_Bps: Optional[float] = None,
                 overall_Bps: Optional[float] = None) -> "TraceBuilder":
        """From ``t`` on, these caps (an absent one: none): tasks at or below
        ``background_at_or_below`` share ``background_Bps`` while a demand above waits;
        every transfer shares ``overall_Bps``."""
        caps = {"background_at_or_below": background_at_or_below,
                "background_Bps": background_Bps, "overall_Bps": overall_Bps}
        self._writer.throttle(t, {k: v for k, v in caps.items() if v is not None})
        return self

    def fault(self, t: float, kind: str, **fields: Any) -> "TraceBuilder":
        """Injects a fault: ``transfer_error`` (artifact, count, after_fraction,
        retryable), ``corrupt`` (artifact, count) or ``origin_down`` (origin, duration_s)."""
        self._writer.fault(t, kind, fields)
        return self

    def text(self) -> str:
        """The JSON Lines written so far."""
        return self._writer.text()

    def build(self) -> Trace:
        """Validates the records into a :class:`Trace` (raises :class:`TraceError`)."""
        return Trace(self.text(), f"<TraceBuilder {self._name}>")


def _whole(argument: str, value: Any) -> Any:
    """An integer argument as an int (an integral float too), None as None; a TypeError
    naming the argument otherwise."""
    if value is None:
        return None
    if not isinstance(value, bool) and (isinstance(value, numbers.Integral) or
                                        (isinstance(value, float) and value.is_integer())):
        return int(value)
    raise TypeError(f"{argument} must be an integer, not {value!r}")


TraceLike = Union[Trace, str, os.PathLike]


def as_trace(trace: TraceLike) -> Trace:
    """A :class:`Trace`, or a path to load one from."""
    if isinstance(trace, Trace):
        return trace
    return Trace.load(trace)
