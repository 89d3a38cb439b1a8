#!/usr/bin/env python3
"""The simulator against reality: one trace replayed over a real, shaped network and
simulated, demand by demand.

usage: fidelity.py CLI TRACE... [--mode auto|netns|server] [--models default,cm02]
                   [--markdown FILE] [--check MAX_MEDIAN_ERROR]

For each trace:
  1. an origin server (tests/backend/loopback_server.py) serves a sparse file per
     artifact. In `netns` mode it runs in a network namespace of its own, joined to
     this one by a veth pair on addresses the script creates (10.213.N.1/.2), and
     the link is shaped by the kernel: HTB at the trace's client bandwidth (the
     bottleneck of every bundled scenario), netem for the round-trip latency when
     the kernel has it, otherwise that latency is added by the server before each
     response (said in the report). In `server` mode (no namespaces: not root, or no
     veth) the server on 127.0.0.1 throttles all bodies together as one link and
     adds the latency itself. `auto` tries netns first.
  2. `demandflight replay` runs the trace in real time against it (the production
     backend: libcurl, verification, atomic installs);
  3. `demandflight sim` runs it with each network model;
  4. per demand: outcomes compared, and for demands that succeeded in both, the
     relative error of the latency |t_real - t_sim| / t_real (latency = t_end -
     t_subscribe).
Prints a table (and writes it as Markdown); with --check, exits 1 unless outcomes
are identical and the median error of the first model is at most the value given.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "backend" / "loopback_server.py"
PYTHON = "/usr/bin/python3"


def sh(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


def read_trace(path):
    lines = [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]
    header = lines[0]
    platform = header.get("platform", {})
    origins = platform.get("origins", {})
    artifacts = [r for r in lines[1:] if r.get("op") == "artifact"]
    bandwidth = platform.get("client_bandwidth_Bps", 12_500_000)
    client_latency = platform.get("client_latency_s", 0.01)
    used = {a["origin"] for a in artifacts}
    origin_bw = [origins.get(o, {}).get("bandwidth_Bps", 50_000_000) for o in used] or [bandwidth]
    origin_lat = [origins.get(o, {}).get("latency_s", 0.03) for o in used] or [0.03]
    return {"name": header.get("name", Path(path).stem), "artifacts": artifacts,
            # The path's bottleneck and its round trip (the slowest origin's).
            "bandwidth_Bps": min([bandwidth] + origin_bw),
            "rtt_s": 2 * (client_latency + max(origin_lat)),
            "faults": sum(1 for r in lines[1:] if r.get("op") == "fault")}


def serve_files(trace, root):
    for a in trace["artifacts"]:
        path = root / a["resource"]
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            f.truncate(a["size"])  # Sparse: reading it costs no disk.


class Network:
    """A namespace + veth pair with the origin server inside, or the server alone."""

    def __init__(self, mode, trace, www, index):
        self.mode, self.ns, self.proc = mode, None, None
        self.how = ""
        bw, rtt = trace["bandwidth_Bps"], trace["rtt_s"]
        server_latency = 0.0
        bind = "127.0.0.1"
        if mode == "netns":
            self.ns = f"dflfid{os.getpid() % 10000}x{index}"
            host, peer = f"dfh{os.getpid() % 10000}{index}", f"dfp{os.getpid() % 10000}{index}"
            self.host = host
            subnet = f"10.213.{(os.getpid() + index) % 200 + 20}"
            sh("ip", "netns", "add", self.ns)
            sh("ip", "link", "add", host, "type", "veth", "peer", "name", peer)
            sh("ip", "link", "set", peer, "netns", self.ns)
            sh("ip", "addr", "add", f"{subnet}.1/24", "dev", host)
            sh("ip", "link", "set", host, "up")
            ns = ["ip", "netns", "exec", self.ns]
            sh(*ns, "ip", "addr", "add", f"{subnet}.2/24", "dev", peer)
            sh(*ns, "ip", "link", "set", peer, "up")
            sh(*ns, "ip", "link", "set", "lo", "up")
            rate = f"{int(bw * 8)}bit"
            # Shape what the origin sends (the downlink) with HTB in the kernel.
            sh(*ns, "tc", "qdisc", "add", "dev", peer, "root", "handle", "1:", "htb", "default", "10")
            sh(*ns, "tc", "class", "add", "dev", peer, "parent", "1:", "classid", "1:10", "htb",
               "rate", rate, "ceil", rate)
            netem = sh(*ns, "tc", "qdisc", "add", "dev", peer, "parent", "1:10", "handle", "10:",
                       "netem", "delay", f"{rtt * 1000:.1f}ms", check=False)
            if netem.returncode == 0:
                self.how = f"netns + veth, HTB {bw / 1e6:g} MB/s, netem {rtt * 1000:g} ms RTT"
            else:
                server_latency = rtt
                self.how = (f"netns + veth, HTB {bw / 1e6:g} MB/s in the kernel; no netem in this "
                            f"kernel: the server adds the {rtt * 1000:g} ms round trip")
            bind = f"{subnet}.2"
            cmd = ns + [PYTHON, str(SERVER), "--root", str(www), "--bind", bind]
        else:
            server_latency = rtt
            self.how = (f"server-side: one shared {bw / 1e6:g} MB/s link and {rtt * 1000:g} ms "
                        f"per response, in the server (no network namespace)")
            cmd = [PYTHON, str(SERVER), "--root", str(www)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        port = int(self.proc.stdout.readline().split()[1])
        self.base = f"http://{bind}:{port}"
        control = {"latency_s": server_latency}
        if mode != "netns":
            control["shared_rate_Bps"] = int(bw)
        import urllib.request
        req = urllib.request.Request(self.base + "/_control/rate", data=json.dumps(control).encode(),
                                     method="POST")
        urllib.request.urlopen(req, timeout=10).read()

    def close(self):
        if self.proc:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        if self.ns:
            sh("ip", "link", "del", self.host, check=False)
            sh("ip", "netns", "del", self.ns, check=False)


def netns_available():
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("tc"):
        return False
    name = f"dflprobe{os.getpid()}"
    ok = sh("ip", "netns", "add", name, check=False).returncode == 0
    if ok:
        sh("ip", "netns", "del", name, check=False)
        link = sh("ip", "link", "add", f"dfq{os.getpid() % 10000}", "type", "veth", "peer", "name",
                  f"dfr{os.getpid() % 10000}", check=False)
        ok = link.returncode == 0
        if ok:
            ok = sh("tc", "qdisc", "add", "dev", f"dfq{os.getpid() % 10000}", "root", "handle",
                    "1:", "htb", check=False).returncode == 0
            sh("ip", "link", "del", f"dfq{os.getpid() % 10000}", check=False)
    return ok


def latencies(result):
    return [(d["demand"], d["outcome"], d["t_end"] - d["t_subscribe"]) for d in result["demands"]]


def compare(real, sim):
    r, s = latencies(real), latencies(sim)
    same = sum(1 for a, b in zip(r, s) if a[1] == b[1])
    signed = [(b[2] - a[2]) / a[2] for a, b in zip(r, s)
              if a[1] == b[1] == "succeeded" and a[2] > 0]
    differ = [(a[0], a[1], b[1]) for a, b in zip(r, s) if a[1] != b[1]]
    return same, len(r), [abs(e) for e in signed], signed, differ


def pct(values, q):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, max(0, int(round(q * len(values) + 0.5)) - 1))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("cli")
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--mode", choices=["auto", "netns", "server"], default="auto")
    parser.add_argument("--models", default="default,cm02")
    parser.add_argument("--markdown")
    parser.add_argument("--check", type=float)
    parser.add_argument("--keep", help="copy the real and simulated results into this directory")
    args = parser.parse_args()
    mode = args.mode
    if mode == "auto":
        mode = "netns" if netns_available() else "server"
    models = args.models.split(",")
    rows, failed = [], False
    for index, trace_path in enumerate(args.traces):
        trace = read_trace(trace_path)
        with tempfile.TemporaryDirectory(prefix="dfl-fidelity-") as work:
            work = Path(work)
            serve_files(trace, work / "www")
            net = Network(mode, trace, work / "www", index)
            try:
                started = time.monotonic()
                replay = subprocess.run([args.cli, "replay", trace_path, "--base-url", net.base,
                                         "--cache", str(work / "cache"), "--out",
                                         str(work / "real.json")], capture_output=True, text=True)
                wall = time.monotonic() - started
            finally:
                net.close()
            if replay.returncode != 0:
                print(replay.stderr, file=sys.stderr)
                return 1
            real = json.loads((work / "real.json").read_text())
            for model in models:
                subprocess.run([args.cli, "sim", trace_path, "--network-model", model, "--out",
                                str(work / "sim.json"), "--quiet"], check=True)
                sim = json.loads((work / "sim.json").read_text())
                if args.keep:
                    Path(args.keep).mkdir(parents=True, exist_ok=True)
                    shutil.copy(work / "real.json", Path(args.keep) / f"{Path(trace_path).stem}-real.json")
                    shutil.copy(work / "sim.json",
                                Path(args.keep) / f"{Path(trace_path).stem}-sim-{model}.json")
                same, total, errors, signed, differ = compare(real, sim)
                row = {"trace": Path(trace_path).stem, "model": model, "same": same, "total": total,
                       "median": statistics.median(errors) if errors else float("nan"),
                       "p95": pct(errors, 0.95), "n": len(errors), "how": net.how,
                       "bias": statistics.median(signed) if signed else float("nan"),
                       "wall_s": wall, "faults": trace["faults"], "differ": differ[:5]}
                rows.append(row)
                print(f"{row['trace']:<22} {model:<8} outcomes {same}/{total} identical, "
                      f"latency error median {100 * row['median']:.1f}% p95 {100 * row['p95']:.1f}% "
                      f"(sim - real median {100 * row['bias']:+.1f}%) "
                      f"({len(errors)} demands; real run {wall:.0f} s; {net.how})", flush=True)
                if differ:
                    print(f"  differing outcomes (demand, real, sim): {differ[:5]}")
                if args.check is not None and model == models[0]:
                    if same != total or not (row["median"] <= args.check):
                        failed = True
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("| trace | sim network model | outcomes identical | median error | p95 error "
                    "| sim − real (median) | demands compared |\n")
            f.write("|---|---|---:|---:|---:|---:|---:|\n")
            for r in rows:
                f.write(f"| {r['trace']} | {r['model']} | {r['same']}/{r['total']} | "
                        f"{100 * r['median']:.1f}% | {100 * r['p95']:.1f}% | "
                        f"{100 * r['bias']:+.1f}% | {r['n']} |\n")
            f.write(f"\nShaping: {rows[0]['how'] if rows else '-'}.\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
