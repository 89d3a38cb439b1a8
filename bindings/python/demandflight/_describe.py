"""describe(): what a trace asks for, without simulating it (``demandflight describe``)."""

from __future__ import annotations

import json
import math
import os
from typing import TYPE_CHECKING, Any, Dict, Optional

from . import _core
from ._trace import Trace, TraceLike

if TYPE_CHECKING:  # pandas is imported when first needed: a simulation's child starts fast.
    import pandas as pd

_QUANTILES = ["count", "p10", "p50", "p90", "p99", "min", "max", "mean"]


def _number(value: Any) -> Any:
    """JSON null (an empty sample's quantile, an undefined fit) as NaN."""
    return math.nan if value is None else value


def _distributions(named: Dict[str, Dict[str, Any]]) -> "pd.DataFrame":
    import pandas as pd
    rows = {name: {q: _number(d[q]) for q in _QUANTILES} for name, d in named.items()}
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=_QUANTILES)
    frame["count"] = frame["count"].astype("int64")
    return frame


class Description:
    """The figures of ``demandflight describe`` (docs/cli.md, "Describing a trace").

    - ``summary``: a Series of the counts and the fitted numbers;
    - ``popularity``: one row per key, most requested first (``rank``, ``key``,
      ``requests``, ``share``, ``cumulative_share``, ``size_bytes``);
    - ``reuse``: quantiles of the reuse time (s) and distance (keys), rows
      ``time_s`` and ``distance``;
    - ``sizes``: quantiles of the sizes, rows ``key_bytes`` (one per key) and
      ``request_bytes`` (one per request);
    - ``priorities``: demands per subscribe priority;
    - ``opportunity``: rows ``single_flight``, ``cancelled_in_flight``,
      ``owner_ended_in_flight`` and ``orphans`` (the two together): ``count``,
      ``share`` of the requests, ``saved_bytes`` (single flight), ``ended`` (the
      demands the trace ends that way, in flight or not), ``came_back`` and
      ``came_back_p50_s`` (orphans);
    - ``raw``: the JSON object, as ``describe --json`` writes it.
    """

    def __init__(self, raw: Dict[str, Any]) -> None:
        import pandas as pd
        self.raw = raw
        counts, pop, reuse = raw["counts"], raw["popularity"], raw["reuse"]
        single, orphans, prio = raw["single_flight"], raw["orphans"], raw["priorities"]
        summary: Dict[str, Any] = {"trace": raw["trace"]}
        summary.update(counts)
        for name in ("zipf_alpha", "zipf_r2", "zipf_ranks", "top_1pct_share", "top_10pct_share",
                     "one_hit_wonders", "one_hit_wonder_share"):
            summary[name] = _number(pop[name])
        summary["cold_requests"] = reuse["cold_requests"]
        summary["reuses"] = reuse["time_s"]["count"]
        summary["overlapping_requests"] = single["overlapping_requests"]
        summary["overlapping_share"] = _number(single["share"])
        summary["single_flight_saved_bytes"] = single["saved_bytes"]
        summary["cancelled_demands"] = orphans["cancelled_demands"]
        summary["owner_ended_demands"] = orphans["owner_ended_demands"]
        summary["cancelled_in_flight"] = orphans["cancelled_in_flight"]
        summary["owner_ended_in_flight"] = orphans["owner_ended_in_flight"]
        summary["orphan_share"] = _number(orphans["share"])
        summary["came_back"] = orphans["came_back"]
        summary["came_back_p50_s"] = _number(orphans["came_back_s"]["p50"])
        summary["demands_reprioritized"] = prio["demands_reprioritized"]
        summary["priority_raises"] = prio["raises"]
        summary["priority_lowers"] = prio["lowers"]
        summary["priority_unchanged"] = prio["unchanged"]
        self.summary = pd.Series(summary, dtype=object, name=raw["trace"])

        self.popularity = pd.DataFrame(
            pop["top"], columns=["rank", "key", "requests", "share", "cumulative_share",
                                 "size_bytes"])
        self.reuse = _distributions({"time_s": reuse["time_s"], "distance": reuse["distance"]})
        self.sizes = _distributions({"key_bytes": raw["sizes"]["key_bytes"],
                                     "request_bytes": raw["sizes"]["request_bytes"]})
        self.priorities = pd.DataFrame(prio["demands"], columns=["priority", "demands", "share"])

        requests = counts["requests"]
        in_flight = orphans["cancelled_in_flight"] + orphans["owner_ended_in_flight"]

        def share(count: int) -> float:
            return count / requests if requests else math.nan

        came_back_p50 = _number(orphans["came_back_s"]["p50"])
        self.opportunity = pd.DataFrame.from_dict({
            "single_flight": {"count": single["overlapping_requests"],
                              "share": _number(single["share"]),
                              "saved_bytes": single["saved_bytes"], "ended": None,
                              "came_back": None, "came_back_p50_s": math.nan},
            "cancelled_in_flight": {"count": orphans["cancelled_in_flight"],
                                    "share": share(orphans["cancelled_in_flight"]),
                                    "saved_bytes": None, "ended": orphans["cancelled_demands"],
                                    "came_back": None,
                                    "came_back_p50_s": math.nan},
            "owner_ended_in_flight": {"count": orphans["owner_ended_in_flight"],
                                      "share": share(orphans["owner_ended_in_flight"]),
                                      "saved_bytes": None,
                                      "ended": orphans["owner_ended_demands"],
                                      "came_back": None,
                                      "came_back_p50_s": math.nan},
            "orphans": {"count": in_flight, "share": _number(orphans["share"]),
                        "saved_bytes": None,
                        "ended": orphans["cancelled_demands"] + orphans["owner_ended_demands"],
                        "came_back": orphans["came_back"],
                        "came_back_p50_s": came_back_p50},
        }, orient="index")
        self.opportunity["count"] = self.opportunity["count"].astype("int64")
        for column in ("saved_bytes", "ended", "came_back"):
            self.opportunity[column] = self.opportunity[column].astype("Int64")

    def __repr__(self) -> str:
        s = self.summary
        return (f"Description({s['trace']!r}, {s['requests']} requests, {s['keys']} keys, "
                f"zipf alpha {s['zipf_alpha']:.3g})")


def describe(trace: TraceLike, top: Optional[int] = None) -> Description:
    """What ``trace`` (a :class:`Trace` or a path) asks for: counts, popularity and a Zipf
    fit, reuse, sizes, the single-flight and orphan opportunities, priorities (the
    figures of ``demandflight describe``). ``popularity`` has every key, or the ``top``
    most requested. A bad trace raises :class:`TraceError`."""
    if top is not None and (isinstance(top, bool) or not isinstance(top, int)):
        raise TypeError(f"top must be an integer >= 1 or None, not {top!r}")
    if top is not None and top < 1:
        raise ValueError(f"top must be an integer >= 1 or None, not {top!r}")
    if isinstance(trace, Trace):
        parsed = trace._parsed
    elif isinstance(trace, (str, os.PathLike)):
        parsed = _core.load_trace(os.fspath(trace))
    else:
        raise TypeError(f"trace must be a dfl.Trace or a path to a trace file, not "
                        f"{type(trace).__name__}")
    return Description(json.loads(_core.describe_json(parsed, top or 0)))
