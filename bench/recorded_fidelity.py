#!/usr/bin/env python3
"""The production loop on a shaped network: a trace replayed for real by the client with
its recording on, then the recording alone, as a team would have it from production.

usage: recorded_fidelity.py CLI TRACE... [--mode auto|netns|server] [--policy NAME]
                            [--delay-line auto|none|PATH] [--markdown FILE] [--keep DIR]
                            [--rerun] [--deploy POLICY] [--check]

For each trace, on bench/fidelity.py's network (origin servers in a network namespace,
the client link shaped by HTB, each origin's round trip in bench/delay_line or netem):
  1. `demandflight replay TRACE --record rec.jsonl --record-outcomes` runs it for real;
     the client writes the demand stream, what it measured of the network (the header's
     `x-measured` and the `platform` derived from it) and what happened to each demand
     and task (rec.demands.csv, rec.tasks.csv);
  2. the measured figures beside those the network was shaped to: each origin's round
     trip (2 x (client + origin latency)), the bandwidth the recording's platform took
     for it (the narrower of the origin's and the client's links), and the client
     link's; each origin's lone and busiest-window figures are shown beside;
  3. `demandflight fidelity rec.jsonl`: the recording simulated on its measured
     platform (nothing from the trace's header but the scheduler the client ran with),
     demand by demand beside what happened: outcomes identical, p50/p95 latency, rates;
  4. with --rerun, a second real run: how many outcomes reality shares with itself;
  5. with --deploy POLICY, the loop's second half: the recording simulated under --policy
     and POLICY (compare's score), POLICY run for real and recorded, that recording
     checked as in 3, and the two real runs' scores beside the simulated ones.
Prints a table (and writes it as Markdown). With --check, exits 1 unless every measured
figure is within 15% of the shaped one and at least 99% of the outcomes are identical
(with --rerun, at most a point under the share of reality against itself, if that is less).
Needs root for the namespaces; without them (`server` mode) the round trips are the
servers' and the measured ones say nothing of them (reported, not checked).
"""

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fidelity as F  # noqa: E402  (the same network, built the same way)

PLATFORM_BOUND = 0.15
OUTCOMES_BOUND = 0.99


def shaped_figures(trace, ports):
    """What the network was shaped to, by the recording's origin names (the ports)."""
    client = trace["client_bandwidth_Bps"]
    out = {"client": client}
    for name, origin in trace["origins"].items():
        out[str(ports[name])] = {"rtt_s": F.round_trip_s(trace, name),
                                 "lone_Bps": min(origin["bandwidth_Bps"], client), "name": name}
    return out


def measured_rows(header, shaped, rtt_in_network):
    """(figure, shaped, measured, samples, ratio, checked) for each figure: each origin's
    round trip and the bandwidth the platform took for it (the larger of its lone figure
    and its busiest window, both shown), and the client link's."""
    measured = header.get("x-measured", {})
    platform = header.get("platform", {}).get("origins", {})
    rows = []
    for port, want in shaped.items():
        if port == "client":
            continue
        got = measured.get("origins", {}).get(port, {})
        name = want["name"]
        rows.append((f"{name} rtt_s", want["rtt_s"], got.get("rtt_s"),
                     got.get("rtt_samples", 0), rtt_in_network))
        fit = " (fit)" if got.get("lone_fit") else ""
        rows.append((f"{name} lone_Bps{fit}", want["lone_Bps"], got.get("lone_Bps"),
                     got.get("lone_samples", 0), None))
        rows.append((f"{name} busiest_Bps", want["lone_Bps"], got.get("busiest_Bps"),
                     got.get("windows", 0), None))
        rows.append((f"{name} platform bandwidth_Bps", want["lone_Bps"],
                     platform.get(port, {}).get("bandwidth_Bps"),
                     got.get("lone_samples", 0) + got.get("windows", 0), True))
    client = measured.get("client", {})
    rows.append(("client busiest_Bps", shaped["client"], client.get("busiest_Bps"),
                 client.get("windows", 0), True))
    out = []
    for figure, want, got, samples, checked in rows:
        ratio = got / want if got and samples else None
        out.append((figure, want, got if samples else None, samples, ratio, checked))
    return out


def replay(args, mode, delay_line, index, trace, work, out, record, policy=None):
    """One real run on a network of its own (recorded to `record`, a file name in work,
    if given); the network."""
    net = F.Network(mode, trace, work / "www", index, delay_line, "cubic", None,
                    args.link_sharing)
    shutil.rmtree(work / "cache", ignore_errors=True)
    try:
        F.port_named_trace(trace, net.ports, work / "real-trace.jsonl")
        cmd = [args.cli, "replay", str(work / "real-trace.jsonl"), "--base-url", net.base,
               "--policy", policy or args.policy, "--cache", str(work / "cache"), "--out",
               str(out), "--quiet"]
        if record:
            cmd += ["--record", str(work / record), "--record-outcomes"]
        run = subprocess.run(cmd, capture_output=True, text=True)
    finally:
        net.close()
    if run.returncode != 0:
        raise SystemExit(f"recorded_fidelity: replay of {trace['name']} failed:\n{run.stderr}")
    return net


def fidelity(args, recording, out):
    run = subprocess.run([args.cli, "fidelity", str(recording), "--out", str(out)],
                         capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"recorded_fidelity: fidelity of {recording} failed:\n{run.stderr}")


def deploy(args, mode, delay_line, index, trace, work):
    """The loop's second half: each policy simulated on the first recording (its score,
    compare's), the chosen one (--deploy) run for real and recorded, and that recording
    checked in turn; the real scores beside the simulated ones."""
    score = F.load_scorer(args.cli, "")
    simulated = {}
    for policy in (args.policy, args.deploy):
        out = work / f"sim-{policy.replace(':', '_')}.json"
        subprocess.run([args.cli, "sim", str(work / "rec.jsonl"), "--policy", policy, "--out",
                        str(out), "--quiet"], check=True, capture_output=True, text=True)
        simulated[policy] = score(json.loads(out.read_text()))
    replay(args, mode, delay_line, index, trace, work, work / "real-deployed.json",
           "deployed.jsonl", args.deploy)
    fidelity(args, work / "deployed.jsonl", work / "fidelity-deployed.json")
    real = {args.policy: score(json.loads((work / "real.json").read_text())),
            args.deploy: score(json.loads((work / "real-deployed.json").read_text()))}
    return {"policy": args.deploy, "simulated": simulated, "real": real,
            "fidelity": json.loads((work / "fidelity-deployed.json").read_text())}


def same_outcomes(a, b):
    """Demands of two real runs (by the trace's ids) that ended alike, and how many."""
    first = {d["demand"]: d["outcome"] for d in a["demands"]}
    second = {d["demand"]: d["outcome"] for d in b["demands"]}
    return sum(1 for k, v in first.items() if second.get(k) == v), len(first)


def run_trace(args, mode, delay_line, index, trace_path, work):
    trace = F.read_trace(trace_path)
    F.serve_files(trace, work / "www")
    net = replay(args, mode, delay_line, index, trace, work, work / "real.json", "rec.jsonl")
    rerun = None
    if args.rerun:
        replay(args, mode, delay_line, index, trace, work, work / "real-again.json", None)
        rerun = same_outcomes(json.loads((work / "real.json").read_text()),
                              json.loads((work / "real-again.json").read_text()))
    header = json.loads((work / "rec.jsonl").read_text().split("\n", 1)[0])
    figures = measured_rows(header, shaped_figures(trace, net.ports), net.rtt_in_network)
    fidelity(args, work / "rec.jsonl", work / "fidelity.json")
    deployed = None
    if args.deploy:
        deployed = deploy(args, mode, delay_line, index, trace, work)
    if args.keep:
        keep = Path(args.keep) / Path(trace_path).stem
        keep.mkdir(parents=True, exist_ok=True)
        for name in ("rec.jsonl", "rec.demands.csv", "rec.tasks.csv", "real.json",
                     "fidelity.json") + (("real-again.json",) if args.rerun else ()) + (
                        ("deployed.jsonl", "deployed.demands.csv", "deployed.tasks.csv",
                         "real-deployed.json", "fidelity-deployed.json") if args.deploy else ()):
            shutil.copy(work / name, keep / name)
    return {"trace": Path(trace_path).stem, "how": net.how, "figures": figures,
            "platform": header.get("platform"), "rerun": rerun, "deployed": deployed,
            "fidelity": json.loads((work / "fidelity.json").read_text())}


def report(results):
    lines = []
    for r in results:
        f = r["fidelity"]
        lines.append(f"### {r['trace']}\n\n{r['how']}\n")
        lines.append("| figure | shaped | measured | samples | measured / shaped |")
        lines.append("|---|---:|---:|---:|---:|")
        for figure, want, got, samples, ratio, checked in r["figures"]:
            shown = "-" if got is None else f"{got:.4g}"
            note = {None: " (shown)", False: " (not in the network)"}.get(checked, "")
            verdict = "-" if ratio is None else f"{ratio:.3f}{note}"
            lines.append(f"| {figure} | {want:.4g} | {shown} | {samples} | {verdict} |")
        share = f["outcomes_identical"] / f["demands"] if f["demands"] else 1.0
        lines.append("")
        lines.append(f"Simulated on the measured platform (`--policy {f['policy']}`): outcomes "
                     f"identical {f['outcomes_identical']} of {f['demands']} ({100 * share:.1f}%)"
                     + (f", differ: {', '.join(f['outcomes_differ'])}" if f["outcomes_differ"]
                        else "") +
                     f"; latency of {f['latency_demands']} demands p50 real "
                     f"{f['real_p50_s']:.3f} s, sim {f['sim_p50_s']:.3f} s "
                     f"({100 * (f['sim_p50_s'] / f['real_p50_s'] - 1):+.1f}%), p95 real "
                     f"{f['real_p95_s']:.3f} s, sim {f['sim_p95_s']:.3f} s "
                     f"({100 * (f['sim_p95_s'] / f['real_p95_s'] - 1):+.1f}%), median "
                     f"|ln(sim/real)| {f['latency_median_abs_ln']:.3f}; transfer rate of "
                     f"{f['rate_tasks']} tasks median |ln| {f['rate_median_abs_ln']:.3f}")
        if r["deployed"]:
            d, first = r["deployed"], f["policy"]
            g = d["fidelity"]
            p = d["policy"]
            lines.append(
                f"Deployed `{p}` (chosen on the recording): score, compare's, lower is better: "
                f"simulated on the first recording {d['simulated'][first]:.4f} under `{first}`, "
                f"{d['simulated'][p]:.4f} under `{p}` (difference "
                f"{d['simulated'][p] - d['simulated'][first]:+.4f}); the real runs "
                f"{d['real'][first]:.4f} and {d['real'][p]:.4f} (difference "
                f"{d['real'][p] - d['real'][first]:+.4f}). The deployed run's recording "
                f"simulated: outcomes identical {g['outcomes_identical']} of {g['demands']}, "
                f"latency p50 {100 * (g['sim_p50_s'] / g['real_p50_s'] - 1):+.1f}%, p95 "
                f"{100 * (g['sim_p95_s'] / g['real_p95_s'] - 1):+.1f}%.")
        if r["rerun"]:
            same, n = r["rerun"]
            lines.append(f"Reality against itself (a second real run): outcomes identical "
                         f"{same} of {n} ({100 * same / n:.1f}%).")
        lines.append("")
    return "\n".join(lines)


def failures(results):
    out = []
    for r in results:
        for figure, want, got, samples, ratio, checked in r["figures"]:
            if checked is not True:
                continue
            if ratio is None:
                out.append(f"{r['trace']}: {figure}: no sample")
            elif abs(ratio - 1) > PLATFORM_BOUND:
                out.append(f"{r['trace']}: {figure}: measured {got:.4g}, shaped {want:.4g}")
        f = r["fidelity"]
        # Reality against itself, where measured, is the floor no simulation can beat:
        # the bound is a point under it when it is under 99%.
        bound = OUTCOMES_BOUND
        if r["rerun"]:
            bound = min(bound, r["rerun"][0] / r["rerun"][1] - 0.01)
        if f["demands"] and f["outcomes_identical"] < bound * f["demands"]:
            out.append(f"{r['trace']}: outcomes identical {f['outcomes_identical']} of "
                       f"{f['demands']}")
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("cli")
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--mode", choices=["auto", "netns", "server"], default="auto")
    parser.add_argument("--policy", default="always-abort")
    parser.add_argument("--delay-line", default="auto",
                        help="bench/delay_line for the round trips where the kernel has no "
                             "netem (auto: next to the CLI's build; none: the servers add them)")
    parser.add_argument("--markdown")
    parser.add_argument("--keep", help="copy each recording, its rows and the figures here")
    parser.add_argument("--deploy", metavar="POLICY",
                        help="the loop's second half: simulate the recording under --policy and "
                             "POLICY, run POLICY for real with its own recording, check that "
                             "one too, and set the real scores beside the simulated")
    parser.add_argument("--rerun", action="store_true",
                        help="replay each trace a second time and say how many outcomes two "
                             "real runs share (the floor of any simulation's)")
    parser.add_argument("--check", action="store_true",
                        help=f"exit 1 unless every measured figure is within "
                             f"{PLATFORM_BOUND:.0%} of the shaped one and at least "
                             f"{OUTCOMES_BOUND:.0%} of the outcomes are identical")
    args = parser.parse_args()
    mode = args.mode
    if mode == "auto":
        mode = "netns" if F.netns_available() else "server"
    delay_line = None
    if mode == "netns" and args.delay_line != "none":
        path = (Path(args.cli).resolve().parents[1] / "bench" / "delay_line"
                if args.delay_line == "auto" else Path(args.delay_line))
        if path.exists() and not F.netem_available():
            delay_line = str(path)
    args.link_sharing = "origins" if mode == "netns" and F.netem_available() else "flows"
    results = []
    for index, trace_path in enumerate(args.traces):
        with tempfile.TemporaryDirectory(prefix="dfl-recorded-") as work:
            results.append(run_trace(args, mode, delay_line, index, trace_path, Path(work)))
            print(report(results[-1:]), flush=True)
    if args.markdown:
        Path(args.markdown).write_text("# The recorded run beside the shaped network\n\n" +
                                       report(results))
    bad = failures(results)
    for line in bad:
        print(f"recorded_fidelity: {line}", file=sys.stderr)
    return 1 if args.check and bad else 0


if __name__ == "__main__":
    sys.exit(main())
