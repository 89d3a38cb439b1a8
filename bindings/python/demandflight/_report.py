"""report(): one self-contained HTML page of figures from results and comparisons.

``demandflight report INPUT... -o report.html`` runs :func:`main` with the
interpreter the build found. The page needs no network: every figure is an inline SVG
drawn by matplotlib, and there is no script or external file.

Inputs, recognised by their content:

- a result JSON (``demandflight sim --out``, :meth:`Result.load`): the latency ECDF by
  priority with cache hits drawn apart, the demands' outcomes (service rate), the bytes
  transferred and wasted, and the effective-priority timeline of its busiest tasks (the
  ones with most priority changes);
- a comparison table (``demandflight compare --csv``, :func:`compare`'s DataFrame): the
  paired score difference to the baseline with its 95% interval, per policy and trace,
  and per policy the critical service rate and the wasted GB;
- a long table (``compare --runs-csv``, ``compare(..., runs=True)``'s second table):
  each run's score by policy and trace.
"""

from __future__ import annotations

import argparse
import html
import io
import json
import os
import sys
from pathlib import Path
from typing import Any, List, Sequence, Tuple, Union

from . import _core

# Each demand outcome's bar (the names: _core.DEMAND_OUTCOMES).
_OUTCOME_COLOURS = {"succeeded": "#3a7", "failed": "#c33", "cancelled": "#999",
                    "timed_out": "#d83", "owner_ended": "#bbb"}

#: The busiest tasks whose priority timeline a single run's section draws.
TIMELINE_TASKS = 8


def _svg(fig: Any) -> str:
    import matplotlib.pyplot as plt
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]  # Inline: no XML prolog or DOCTYPE.


def _figure(width: float = 7.0, height: float = 3.2, ncols: int = 1) -> Tuple[Any, Any]:
    import matplotlib
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # Text stays text: smaller, searchable.
    import matplotlib.pyplot as plt
    return plt.subplots(1, ncols, figsize=(width, height), squeeze=False)


def _number(frame: Any, column: str) -> Any:
    import pandas as pd
    return pd.to_numeric(frame[column], errors="coerce") if column in frame else None


def _result_section(name: str, raw: dict) -> List[Tuple[str, str]]:
    """A result JSON's figures: (caption, svg)."""
    import numpy as np
    import pandas as pd
    figures: List[Tuple[str, str]] = []
    demands = pd.DataFrame(raw.get("demands", []))
    tasks = pd.DataFrame(raw.get("tasks", []))
    summary = raw.get("summary", {})
    if demands.empty:
        return [("no demand rows (a streamed run keeps its rows in CSV files)", "")]

    ok = demands[demands["outcome"] == "succeeded"]
    fig, axes = _figure(7.5, 3.4)
    ax = axes[0][0]
    for priority in sorted(ok["priority"].unique(), reverse=True):
        mine = ok[ok["priority"] == priority]
        for hit, style in ((False, "-"), (True, ":")):
            part = mine[(mine["served_by"] == "cache") == hit]["latency_s"].to_numpy()
            if part.size == 0:
                continue
            x = np.sort(part)
            y = np.arange(1, x.size + 1) / x.size
            label = f"priority {priority}" + (" (cache hits)" if hit else "") + f", n={x.size}"
            ax.step(x, y, style, where="post", label=label)
    ax.set_xscale("symlog", linthresh=0.01)
    ax.set_xlabel("latency (s), succeeded demands")
    ax.set_ylabel("fraction of demands")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    figures.append(("Latency ECDF by subscribe priority; cache hits dotted, apart from "
                    "the demands a transfer served.", _svg(fig)))

    outcomes = demands["outcome"].value_counts()
    order = list(_core.DEMAND_OUTCOMES)
    fig, axes = _figure(7.5, 2.6, ncols=2)
    ax = axes[0][0]
    counts = [int(outcomes.get(o, 0)) for o in order]
    ax.barh(order, counts, color=[_OUTCOME_COLOURS.get(o, "#777") for o in order])
    for i, c in enumerate(counts):
        ax.text(c, i, f" {c}", va="center", fontsize=8)
    served, lost = counts[0], counts[3] + counts[4]
    rate = served / (served + lost) if served + lost else float("nan")
    ax.set_title(f"outcomes (service rate {rate:.3f})", fontsize=9)
    ax.invert_yaxis()
    ax = axes[0][1]
    moved = float(summary.get("bytes_transferred", 0)) / 1e6
    wasted = float(summary.get("bytes_wasted", 0)) / 1e6
    ax.barh(["transferred", "wasted"], [moved, wasted], color=["#48c", "#c84"])
    for i, v in enumerate((moved, wasted)):
        ax.text(v, i, f" {v:,.1f} MB", va="center", fontsize=8)
    ax.set_title("bytes", fontsize=9)
    ax.invert_yaxis()
    figures.append(("Demands by outcome; the service rate is the succeeded over the "
                    "succeeded, failed and timed out. Bytes transferred and wasted.",
                    _svg(fig)))

    if not tasks.empty and "priority_timeline" in tasks:
        changes = tasks["priority_timeline"].map(len)
        busiest = changes.sort_values(ascending=False, kind="stable").index[:TIMELINE_TASKS]
        if len(busiest) and changes[busiest[0]] > 1:
            fig, axes = _figure(7.5, 3.4)
            ax = axes[0][0]
            for rank, i in enumerate(busiest):
                timeline = tasks.at[i, "priority_timeline"]
                t = [p[0] for p in timeline] + [tasks.at[i, "t_end"]]
                level = [(-1 if p[1] is None else p[1]) for p in timeline]
                level.append(level[-1])
                ax.step(t, [v + 0.06 * rank for v in level], where="post",
                        label=f"{tasks.at[i, 'artifact']} ({tasks.at[i, 'outcome']})")
            ax.set_xlabel("time (s)")
            ax.set_ylabel("effective priority (-1: orphan)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc="best")
            figures.append((f"The effective priority of the {len(busiest)} tasks with most "
                            "priority changes, over their lives (offset a little each, so "
                            "that equal levels stay apart).", _svg(fig)))
    return figures


def _compare_section(name: str, table: Any) -> List[Tuple[str, str]]:
    """A compare --csv table's figures."""
    figures: List[Tuple[str, str]] = []
    table = table.copy()
    for column in ("score_diff", "score_diff_lo", "score_diff_hi", "critical_service_rate",
                   "service_rate", "wasted_gb"):
        if column in table:
            table[column] = _number(table, column)
    groups = list(table.groupby(["trace", "model"], sort=False))
    fig, axes = _figure(7.5, 0.5 + 0.32 * len(table) + 0.4 * len(groups))
    ax = axes[0][0]
    y, ticks, labels = 0.0, [], []
    for (trace, model), rows in groups:
        for _, row in rows.iterrows():
            d, lo, hi = row["score_diff"], row.get("score_diff_lo"), row.get("score_diff_hi")
            colour = "#c33" if row.get("significant") in (1, "1", True) else "#357"
            if lo == lo and hi == hi:  # Not NaN: an interval.
                ax.plot([lo, hi], [y, y], color=colour, lw=2)
            ax.plot([d], [y], "o", color=colour, ms=4)
            ticks.append(y)
            labels.append(f"{row['policy']}  [{trace}, {model}]")
            y -= 1
        y -= 0.6
    ax.axvline(0, color="#888", lw=1)
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_xlabel("score difference to the baseline (lower is better)")
    ax.grid(axis="x", alpha=0.3)
    figures.append(("The paired score difference to the baseline, mean and 95% t interval "
                    "over the seeds, per policy and trace; red where the interval excludes "
                    "0. A point without a line had no interval (one seed, or every seed "
                    "the same).", _svg(fig)))

    rate = "critical_service_rate" if "critical_service_rate" in table else "service_rate"
    means = table.groupby("policy", sort=False)[[c for c in (rate, "wasted_gb") if c in table]].mean()
    fig, axes = _figure(7.5, 0.6 + 0.3 * len(means), ncols=2)
    for ax, column, label in ((axes[0][0], rate, rate.replace("_", " ")),
                              (axes[0][1], "wasted_gb", "wasted GB")):
        if column not in means:
            ax.set_visible(False)
            continue
        values = means[column].fillna(0)
        ax.barh(list(means.index), list(values), color="#48c")
        for i, v in enumerate(values):
            ax.text(v, i, f" {v:.3g}", va="center", fontsize=7)
        ax.set_title(f"{label}, mean over traces", fontsize=9)
        ax.invert_yaxis()
        ax.tick_params(axis="y", labelsize=7)
    figures.append(("Per policy, averaged over the traces and models: the critical class's "
                    "service rate and the wasted GB.", _svg(fig)))
    return figures


def _runs_section(name: str, table: Any) -> List[Tuple[str, str]]:
    """A compare --runs-csv long table: each run's score, by policy and trace."""
    table = table.copy()
    table["score"] = _number(table, "score")
    traces = list(table["trace"].unique())
    fig, axes = _figure(7.5, 0.6 + 0.3 * table["policy"].nunique() * len(traces))
    ax = axes[0][0]
    y, ticks, labels = 0.0, [], []
    for trace in traces:
        for policy, rows in table[table["trace"] == trace].groupby("policy", sort=False):
            ax.plot(rows["score"], [y] * len(rows), "o", ms=3, alpha=0.7, color="#357")
            ticks.append(y)
            labels.append(f"{policy}  [{trace}]")
            y -= 1
        y -= 0.6
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_xlabel("score of each run (lower is better)")
    ax.grid(axis="x", alpha=0.3)
    return [("Every run's score, one point per seed (and model).", _svg(fig))]


def _read(item: Any) -> Tuple[str, str, Any]:
    """(name, kind, data): kind is result, compare or runs."""
    import pandas as pd
    from ._simulate import Result
    if isinstance(item, Result):
        return (f"result: {item.raw.get('trace', '')} / {item.policy}", "result", item.raw)
    if isinstance(item, pd.DataFrame):
        kind = "compare" if "score_diff" in item else "runs" if "seed" in item else ""
        if not kind:
            raise ValueError("inputs: a DataFrame that is not compare()'s table")
        return ("compare()", kind, item)
    if not isinstance(item, (str, os.PathLike)):
        raise TypeError(f"inputs: {type(item).__name__} is not a path, a Result or a DataFrame")
    path = os.fspath(item)
    try:
        with open(path, encoding="utf-8") as f:
            start = f.read(1)
            f.seek(0)
            if start == "{":
                raw = json.load(f)
                if raw.get("format") != "demandflight-result":
                    raise ValueError(f"{path}: format: expected \"demandflight-result\"")
                return (path, "result", raw)
            table = pd.read_csv(f)
    except OSError as e:
        raise ValueError(f"{path}: cannot read: {e.strerror}") from None
    except (ValueError, pd.errors.ParserError) as e:
        if str(e).startswith(path):
            raise
        raise ValueError(f"{path}: not a result JSON or a compare CSV: {e}") from None
    if "score_diff" in table and "policy" in table:
        return (path, "compare", table)
    if {"policy", "seed", "score", "trace"} <= set(table.columns):
        return (path, "runs", table)
    raise ValueError(f"{path}: a CSV without compare's columns (policy, score_diff; or "
                     "policy, seed, score): not compare --csv or --runs-csv")


def report(inputs: Union[Any, Sequence[Any]], out: Union[str, os.PathLike],
           title: str = "demandflight report") -> Path:
    """Writes one self-contained HTML page of figures to ``out`` and returns its path.

    ``inputs``: result JSON paths or :class:`Result` objects (a single run's figures),
    ``compare --csv`` paths or :func:`compare`'s DataFrame (the paired differences), and
    ``compare --runs-csv`` paths or long tables (each run's score). Raises ``ValueError``
    naming a file that is none of these, ``TypeError`` for another kind of object."""
    import pandas as pd
    if isinstance(inputs, (str, os.PathLike, pd.DataFrame)) or not isinstance(inputs, Sequence):
        inputs = [inputs]
    if len(inputs) == 0:
        raise ValueError("inputs: nothing to report")
    sections = []
    for item in inputs:
        name, kind, data = _read(item)
        if kind == "result":
            figures = _result_section(name, data)
            heading = (f"Run: {data.get('trace', '?')}, model {data.get('model', '?')}, "
                       f"policy {data.get('policy', '?')}, seed {data.get('seed', '?')}")
        elif kind == "compare":
            figures = _compare_section(name, data)
            heading = f"Comparison: {data['policy'].nunique()} policies on {data['trace'].nunique()} trace(s)"
        else:
            figures = _runs_section(name, data)
            heading = f"Runs: {len(data)} runs"
        sections.append((heading, name, figures))
    parts = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
             f"<title>{html.escape(title)}</title>",
             "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto;color:#222}"
             "figure{margin:1.5em 0}figcaption{font-size:0.9em;color:#444}"
             "svg{max-width:100%;height:auto}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>"]
    for heading, name, figures in sections:
        parts.append(f"<section><h2>{html.escape(heading)}</h2>"
                     f"<p class=\"source\">from <code>{html.escape(name)}</code></p>")
        for caption, svg in figures:
            parts.append(f"<figure>{svg}<figcaption>{html.escape(caption)}</figcaption></figure>")
        parts.append("</section>")
    parts.append("</body></html>\n")
    path = Path(out)
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(prog="demandflight report", description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="+", help="result JSON, compare --csv or --runs-csv files")
    parser.add_argument("-o", "--out", required=True, help="the HTML page to write")
    parser.add_argument("--title", default="demandflight report")
    args = parser.parse_args(list(argv) or None)
    try:
        path = report(args.inputs, args.out, title=args.title)
    except (ValueError, TypeError) as e:
        print(f"demandflight report: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"demandflight report: {args.out}: {e.strerror}", file=sys.stderr)
        return 1
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
