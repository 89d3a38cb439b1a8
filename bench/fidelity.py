#!/usr/bin/env python3
"""The simulator against reality: one trace replayed over a real, shaped network and
simulated, demand by demand.

usage: fidelity.py CLI TRACE... [--mode auto|netns|server] [--models tcp,calibrated]
                   [--policies always-abort,keep-partial,...] [--repeats N] [--markdown FILE]
                   [--check MAX_MEDIAN_ERROR] [--check-without-delay MODEL:BOUND]
                   [--delay-line auto|none|PATH] [--server-cc cubic|bbr|system]
                   [--link-sharing auto|flows|origins] [--tcp-info DIR] [--keep DIR] [--real-from DIR]

For each trace:
  1. an origin server (tests/backend/loopback_server.py) serves a sparse file per
     artifact. In `netns` mode it runs in a network namespace of its own, joined to
     this one by a veth pair on addresses the script creates (10.213.N.1/.2), and
     the link is shaped by the kernel: HTB at the trace's client bandwidth (the
     bottleneck of every bundled scenario), one FIFO for every flow and the origins
     narrower than it throttled by their servers (or, with --link-sharing origins,
     a class per origin under it), netem for the round-trip latency when
     the kernel has it, otherwise bench/delay_line (two TAP devices instead of the
     veth pair, each origin's round trip held in user space, so that TCP sees it),
     and without that binary the server adds the latency before each response (said
     in the report). In `server` mode (no namespaces: not root, or no
     veth) the server on 127.0.0.1 throttles all bodies together as one link and
     adds the latency itself. `auto` tries netns first.
  2. `demandflight replay` runs the trace in real time against it (the production
     backend: libcurl, verification, atomic installs);
  3. `demandflight sim` runs it with each network model (and the model `rerun`, with
     --repeats 2 or more, is the second real run: reality against itself);
  4. per demand: outcomes compared, and for demands that succeeded in both, the
     relative error of the latency |t_real - t_sim| / t_real (latency = t_end -
     t_subscribe) and |ln(t_sim / t_real)|; per task that ran once in both worlds,
     |ln| of the ratio of its rates (bytes / (t_received - first start)) and of its
     waits for a slot; for demands that ended differently, how far apart their ends
     were; the error split between the waits for a slot, the transfers and the
     finalizes (decompose()), the finalize's median time in both worlds, and the
     transfers' error by how many others were in flight beside them
     (by_flows_in_flight()).
  5. with --policies, each policy is replayed (--repeats times) and simulated, scored
     with compare's score (format/score.h, through the Python package of the CLI's
     build tree), and the verdict table says, per model, whether the simulated
     difference of each policy to the first (and of each pair) has the sign of the
     real one where the real runs resolve it (its 95% interval excludes 0), and lies
     inside the real interval where they do not.
Prints a table (and writes it as Markdown); with --check, exits 1 unless outcomes
are identical and the median error of the first model is at most the value given.
"""

import argparse
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "backend" / "loopback_server.py"
PYTHON = "/usr/bin/python3"
WAITED_S = 0.01  # Below this a demand did not wait for a transfer (a cache hit).
RERUN = "rerun"  # --models: the second real run in the place of a simulation.


def sh(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


def read_trace(path):
    lines = [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]
    header = lines[0]
    platform = header.get("platform", {})
    declared = platform.get("origins", {})
    artifacts = [r for r in lines[1:] if r.get("op") == "artifact"]
    names = list(declared) + sorted({a["origin"] for a in artifacts} - set(declared))
    # The simulator's defaults for what the header leaves out (sim/.../defaults.h).
    origins = {n: {"bandwidth_Bps": declared.get(n, {}).get("bandwidth_Bps", 50_000_000),
                   "latency_s": declared.get(n, {}).get("latency_s", 0.03)} for n in names}
    return {"name": header.get("name", Path(path).stem), "lines": lines, "artifacts": artifacts,
            "client_bandwidth_Bps": platform.get("client_bandwidth_Bps", 12_500_000),
            "client_latency_s": platform.get("client_latency_s", 0.01), "origins": origins,
            "faults": sum(1 for r in lines[1:] if r.get("op") == "fault")}


def round_trip_s(trace, origin):
    """The round trip of an origin's path: the client's latency and the origin's, both ways."""
    return 2 * (trace["client_latency_s"] + trace["origins"][origin]["latency_s"])


def serve_files(trace, root):
    for a in trace["artifacts"]:
        path = root / a["resource"]
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            f.truncate(a["size"])  # Sparse: reading it costs no disk.


def port_named_trace(trace, ports, path):
    """The same trace with each origin renamed to its server's port, so that the
    URL template http://ADDR:{origin}/{resource} reaches that origin's server."""
    out = []
    for r in trace["lines"]:
        r = json.loads(json.dumps(r))
        if "format" in r:
            origins = r.get("platform", {}).get("origins")
            if origins:
                r["platform"]["origins"] = {str(ports[n]): v for n, v in origins.items()}
        elif r.get("op") == "artifact":
            r["origin"] = str(ports[r["origin"]])
        elif r.get("op") == "fault":
            continue  # A client cannot make a server fail: both worlds run without faults.
        out.append(json.dumps(r))
    Path(path).write_text("\n".join(out) + "\n")


class Network:
    """One origin server per origin of the trace, in a network namespace of its own
    behind a veth pair with the platform's links in the kernel (HTB: the client link,
    and under it one class per origin, capped at that origin's bandwidth), or, without
    namespaces, on 127.0.0.1 throttling in the server."""

    def __init__(self, mode, trace, www, index, delay_line=None, server_cc="cubic",
                 tcp_info=None, sharing="origins"):
        self.mode, self.ns, self.procs, self.ports = mode, None, [], {}
        self.delay = None
        client_bw = trace["client_bandwidth_Bps"]
        tag = f"{os.getpid() % 10000}{index}"
        bind = "127.0.0.1"
        prefix = []
        if mode == "netns":
            self.ns, self.host = f"dflfid{tag}", f"dfh{tag}"
            peer = f"dfp{tag}"
            subnet = f"10.213.{(os.getpid() + index) % 200 + 20}"
            sh("ip", "netns", "add", self.ns)
            if delay_line:
                # Two TAP devices joined by the delay line: each origin's round trip
                # is in the network (the servers are on ports 18000 + i).
                rtts = [f"{18000 + i}:{round_trip_s(trace, name)}"
                        for i, name in enumerate(trace["origins"])]
                self.delay = subprocess.Popen([delay_line, self.host, peer] + rtts,
                                              stdout=subprocess.PIPE, text=True)
                if self.delay.stdout.readline().strip() != "ready":  # No TAP here: veth.
                    print("fidelity: the delay line did not start; the servers add the round "
                          "trips", file=sys.stderr)
                    self.delay.wait()
                    self.delay = None
            if not self.delay:
                sh("ip", "link", "add", self.host, "type", "veth", "peer", "name", peer)
            sh("ip", "link", "set", peer, "netns", self.ns)
            sh("ip", "addr", "add", f"{subnet}.1/24", "dev", self.host)
            sh("ip", "link", "set", self.host, "up")
            prefix = ["ip", "netns", "exec", self.ns]
            sh(*prefix, "ip", "addr", "add", f"{subnet}.2/24", "dev", peer)
            sh(*prefix, "ip", "link", "set", peer, "up")
            sh(*prefix, "ip", "link", "set", "lo", "up")
            bind = f"{subnet}.2"
        netem = False
        for i, (name, origin) in enumerate(trace["origins"].items()):
            port = 18000 + i
            self.ports[name] = port
            cmd = prefix + [PYTHON, str(SERVER), "--root", str(www), "--bind", bind, "--port",
                            str(port)] if mode == "netns" else [PYTHON, str(SERVER), "--root", str(www)]
            if server_cc != "system":
                # Each server's connections: what the simulator's tcp model and ns-3
                # assume (slow start, its restart after idle).
                cmd += ["--congestion-control", server_cc]
            if tcp_info:
                # Each server connection's TCP state per request (window, RTO, idle).
                cmd += ["--tcp-info-log", f"{tcp_info}-{name}.jsonl"]
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
            self.procs.append(proc)
            self.ports[name] = int(proc.stdout.readline().split()[1])
        self.cc = server_cc if server_cc != "system" else sh(
            *prefix, "sysctl", "-n", "net.ipv4.tcp_congestion_control").stdout.strip()
        if mode == "netns":
            # The client link, shared, and under it each origin's link: what the
            # simulator's platform says, in the kernel's HTB.
            total = f"{int(client_bw * 8)}bit"
            sh(*prefix, "tc", "qdisc", "add", "dev", peer, "root", "handle", "1:", "htb",
               "default", "1", "r2q", "100")
            sh(*prefix, "tc", "class", "add", "dev", peer, "parent", "1:", "classid", "1:1",
               "htb", "rate", total, "ceil", total)
            n = len(trace["origins"])
            # With --link-sharing flows, one FIFO for every flow (a client's access
            # link): no class per origin; each origin's own link, where it is
            # narrower, is its server's throttle (below).
            if sharing == "flows" and netem_available():
                raise SystemExit("fidelity: --link-sharing flows needs the delay line for the "
                                 "round trips (netem sits on per-origin classes)")
            classes = trace["origins"].items() if sharing == "origins" else []
            for i, (name, origin) in enumerate(classes):
                cap = min(origin["bandwidth_Bps"], client_bw)
                share = f"{int(8 * client_bw / n)}bit"
                sh(*prefix, "tc", "class", "add", "dev", peer, "parent", "1:1", "classid",
                   f"1:{10 + i}", "htb", "rate", share if cap * n > client_bw else f"{int(cap * 8)}bit",
                   "ceil", f"{int(cap * 8)}bit")
                sh(*prefix, "tc", "filter", "add", "dev", peer, "parent", "1:", "protocol", "ip",
                   "prio", "1", "u32", "match", "ip", "sport", str(self.ports[name]), "0xffff",
                   "flowid", f"1:{10 + i}")
                rtt = round_trip_s(trace, name)
                netem |= sh(*prefix, "tc", "qdisc", "add", "dev", peer, "parent", f"1:{10 + i}",
                            "handle", f"{20 + i}:", "netem", "delay", f"{rtt * 1000:.1f}ms",
                            check=False).returncode == 0
        import urllib.request
        for name, origin in trace["origins"].items():
            rtt = round_trip_s(trace, name)
            control = {"latency_s": 0.0 if netem or self.delay else rtt}
            if mode != "netns" or (sharing == "flows" and origin["bandwidth_Bps"] < client_bw):
                control["shared_rate_Bps"] = int(min(origin["bandwidth_Bps"], client_bw))
            req = urllib.request.Request(f"http://{bind}:{self.ports[name]}/_control/rate",
                                         data=json.dumps(control).encode(), method="POST")
            urllib.request.urlopen(req, timeout=10).read()
        self.base = f"http://{bind}:{{origin}}/{{resource}}"
        self.rtt_in_network = bool(netem or self.delay)  # Else the servers add them.
        links = ", ".join(f"{n} {min(o['bandwidth_Bps'], client_bw) / 1e6:g} MB/s"
                          for n, o in trace["origins"].items())
        if mode == "netns":
            self.how = (("netns + TAP delay line" if self.delay else "netns + veth") +
                        f"; servers' TCP {self.cc}" +
                        (f"; HTB: client link {client_bw / 1e6:g} MB/s shared by {links}; "
                         if sharing == "origins" else
                         f"; HTB: client link {client_bw / 1e6:g} MB/s, one FIFO for every flow; "
                         f"origins {links}, the narrower throttled by their servers; ") +
                        ("netem for the round trips" if netem else
                         "round trips in the delay line (no netem in this kernel)" if self.delay
                         else "no netem in this kernel: each server adds its round trip"))
        else:
            self.how = (f"server-side (no network namespace): each origin's server throttles to "
                        f"{links} and adds its round trip; the client link is not shared")

    def close(self):
        for proc in self.procs:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        if self.delay:
            self.delay.terminate()
            self.delay.wait()
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


def netem_available():
    name = f"dfn{os.getpid() % 10000}"
    if sh("ip", "link", "add", name, "type", "dummy", check=False).returncode != 0:
        return False
    ok = sh("tc", "qdisc", "add", "dev", name, "root", "netem", "delay", "1ms",
            check=False).returncode == 0
    sh("ip", "link", "del", name, check=False)
    return ok


def latencies(result):
    return [(d["demand"], d["outcome"], d["t_end"] - d["t_subscribe"]) for d in result["demands"]]


def compare(real, sim):
    r, s = latencies(real), latencies(sim)
    same = sum(1 for a, b in zip(r, s) if a[1] == b[1])
    # Latency is compared where both worlds waited for a transfer: a cache hit
    # takes 0 s in the simulator and a millisecond for real, which says
    # nothing about the network model.
    both = [(a, b) for a, b in zip(r, s)
            if a[1] == b[1] == "succeeded" and a[2] >= WAITED_S and b[2] >= WAITED_S]
    signed = [(b[2] - a[2]) / a[2] for a, b in both]
    # The error measure of the flow-model validation literature: |ln(t_sim / t_real)|.
    logs = [abs(math.log(b[2] / a[2])) for a, b in both]
    differ = [(a[0], a[1], b[1]) for a, b in zip(r, s) if a[1] != b[1]]
    # For a demand that ended differently, the time between its ends in the two
    # worlds: how close the race (a cancel against a completion) was.
    ends_r = {d["demand"]: d["t_end"] for d in real["demands"]}
    ends_s = {d["demand"]: d["t_end"] for d in sim["demands"]}
    gaps = [abs(ends_r[d] - ends_s[d]) for d, _, _ in differ]
    return same, len(r), [abs(e) for e in signed], signed, differ, logs, gaps


def transfer_time(task):
    """A task's transfers, first start to the last byte (t_received; a result from before
    2026-12-03 has none, and its finalize counts too)."""
    return (task.get("t_received") or task["t_end"]) - task["t_first_start"]


def installed_once(real, sim):
    """The tasks of an artifact paired in order between the two worlds, where both were
    installed after one attempt: (real task, simulated task)."""
    def by_artifact(result):
        rows = {}
        for t in result["tasks"]:
            rows.setdefault(t["artifact"], []).append(t)
        return rows
    r, s = by_artifact(real), by_artifact(sim)
    for artifact, tasks in r.items():
        for a, b in zip(tasks, s.get(artifact, [])):
            if a["outcome"] == b["outcome"] == "installed" and a["attempts"] == b["attempts"] == 1:
                yield a, b


def transfer_rates(real, sim):
    """Per task that moved its bytes in one attempt in both worlds: |ln| of the ratio of
    their rates (bytes / (t_received - first start)), which leaves out the wait for a slot, and
    |ln| of the ratio of their waits for a slot (first start - start). The first is the
    link model's error, the second the queueing's."""
    rate_errors, wait_errors = [], []
    for a, b in installed_once(real, sim):
        if (a.get("t_first_start") is not None and b.get("t_first_start") is not None
                and a["bytes_transferred"] > 0 and b["bytes_transferred"] > 0):
            da, db = transfer_time(a), transfer_time(b)
            if da > 0 and db > 0:
                rate_errors.append(abs(math.log((b["bytes_transferred"] / db) /
                                                (a["bytes_transferred"] / da))))
            wa, wb = a["t_first_start"] - a["t_start"], b["t_first_start"] - b["t_start"]
            if wa >= WAITED_S and wb >= WAITED_S:
                wait_errors.append(abs(math.log(wb / wa)))
    return rate_errors, wait_errors


OVERLAP_BINS = ((0, 0.05, "alone"), (0.05, 1, "0.05-1 others"), (1, 3, "1-3 others"),
                (3, math.inf, "3 or more"))


def by_flows_in_flight(real, sim):
    """Per task that moved its bytes in one attempt in both worlds, ln(simulated / real) of
    its transfer time (first start to t_received), binned by how many other transfers
    were in flight during it in the real run (their mean number): a transfer alone
    tests the connection model, one among others the sharing of the link too. Returns
    per bin (label, n, median |ln|, median ln)."""
    spans = [(t["t_first_start"], t["t_received"]) for t in real["tasks"]
             if t.get("t_first_start") is not None and t.get("t_received") is not None]
    logs = []
    for a, b in installed_once(real, sim):
        if None in (a.get("t_first_start"), b.get("t_first_start"), a.get("t_received"),
                    b.get("t_received")):
            continue
        da, db = transfer_time(a), transfer_time(b)
        if da <= 0 or db <= 0:
            continue
        others = sum(max(0.0, min(a["t_received"], e) - max(a["t_first_start"], s))
                     for s, e in spans) / da - 1
        logs.append((others, math.log(db / da)))
    out = []
    for lo, hi, label in OVERLAP_BINS:
        x = [v for o, v in logs if lo <= o < hi]
        if x:
            out.append((label, len(x), statistics.median(abs(v) for v in x),
                        statistics.median(x)))
    return out


def decompose(real, sim, trace):
    """The latency error split where it arises. Per demand that succeeded after waiting in
    both worlds, its latency in three parts: the wait for its task's first transfer start
    (a slot: queueing), the transfers until the bytes were all in (`t_received`: the link
    model, with any retries) and the finalize (verification and install). Returns the
    relative errors of the demands that waited for no slot in either world, those of
    the others, each part's share of the summed absolute error (|d part| summed over the
    demands, over the sum for the three parts), and, of the demands that waited for no
    slot, the relative errors of those whose latencies differ by less than two round
    trips of their origin's path (what is left when a connection that one world opens
    or restarts and the other finds warm is set aside). A result without `t_received`
    (before 2026-12-03) counts its finalize in the transfers."""
    rtt = {a["id"]: round_trip_s(trace, a["origin"]) for a in trace["artifacts"]}
    artifact_of = {d["demand"]: d["artifact"] for d in real["demands"]}

    def parts(result):
        tasks = result["tasks"]
        out = {}
        for d in result["demands"]:
            if d["outcome"] != "succeeded" or d["task"] is None:
                continue
            task = tasks[d["task"]]
            a, e = d["t_subscribe"], d["t_end"]
            first = task.get("t_first_start")
            s = min(e, a if first is None else max(a, first))
            received = task.get("t_received")
            r = e if received is None else min(e, max(s, received))
            out[d["demand"]] = (e - a, s - a, r - s, e - r)
        return out
    r, s = parts(real), parts(sim)
    link, queued, close = [], [], []
    summed = [0.0, 0.0, 0.0]
    for demand, (lat_r, *part_r) in r.items():
        if demand not in s:
            continue
        lat_s, *part_s = s[demand]
        if lat_r < WAITED_S or lat_s < WAITED_S:
            continue
        error = abs(lat_s - lat_r) / lat_r
        if part_r[0] < WAITED_S and part_s[0] < WAITED_S:
            link.append(error)
            if abs(lat_s - lat_r) < 2 * rtt[artifact_of[demand]]:
                close.append(error)
        else:
            queued.append(error)
        for i in range(3):
            summed[i] += abs(part_s[i] - part_r[i])
    total = sum(summed)
    shares = [x / total if total > 0 else float("nan") for x in summed]
    return link, queued, shares, close


def served_states(trace, tcp_info):
    """Per resource path, each real request's (time, connection state) as the servers
    logged it (--tcp-info: TCP_INFO as the request arrives), or None without the logs. A
    request's state is `new` (the connection's first request), `restarted` (a kept
    connection idle for longer than its retransmission timeout: Linux restarts slow
    start) or `warm`."""
    paths = {}
    for origin in trace["origins"]:
        log = Path(f"{tcp_info}-{origin}.jsonl")
        if not log.exists():
            return None
        seen = set()
        for line in log.read_text().splitlines():
            r = json.loads(line)
            if r["when"] != "request":
                continue
            state = ("new" if r["peer"] not in seen else
                     "restarted" if r["idle_ms"] * 1000 > r["rto_us"] else "warm")
            seen.add(r["peer"])
            paths.setdefault(r["path"], []).append((r["t"], state))
    return paths


def modelled_states(trace, transfer_log):
    """Per resource path, each transfer's (time, connection state) as the `tcp` model
    chose it (the simulator's --transfer-log, its C lines)."""
    resource = {a["id"]: "/" + a["resource"] for a in trace["artifacts"]}
    origin_of = {a["id"]: a["origin"] for a in trace["artifacts"]}
    paths = {}
    for line in Path(transfer_log).read_text().splitlines():
        if not line.startswith("C "):
            continue
        # C t id origin connection new|kept idle_s window_bytes delay_s artifact
        f = line.split(" ", 9)
        artifact = f[9]
        # The model's timeout: the round trip plus Linux's floor of 200 ms (TcpSettings).
        rto = round_trip_s(trace, origin_of[artifact]) + 0.2
        state = "new" if f[5] == "new" else "restarted" if float(f[6]) > rto else "warm"
        paths.setdefault(resource[artifact], []).append((float(f[1]), state))
    return paths


def connection_states(trace, paths, simulated, real, sim):
    """Each transfer's TCP connection in both worlds: the servers' states (served_states)
    against the other world's (modelled_states, or another real run's served_states).
    The transfers of a resource are paired in order. Returns None without the states,
    else the counts per (real state, simulated state), and per task installed once in
    both worlds ln(simulated / real transfer time) (first start to t_received), with its
    states and origin: where the states agree the difference is the share the flow
    model gives the transfer, where they differ it is the connection's too."""
    if paths is None or simulated is None:
        return None
    resource = {a["id"]: "/" + a["resource"] for a in trace["artifacts"]}
    origin_of = {a["id"]: a["origin"] for a in trace["artifacts"]}

    def tasks_by_path(result):
        out = {}
        for t in result["tasks"]:
            if t.get("t_first_start") is not None:
                out.setdefault(resource[t["artifact"]], []).append(t)
        return {p: sorted(v, key=lambda t: t["t_first_start"]) for p, v in out.items()}
    real_tasks, sim_tasks = tasks_by_path(real), tasks_by_path(sim)
    counts, times = {}, []
    for path, rows in paths.items():
        rows.sort()
        mine = sorted(simulated.get(path, []))
        pairs = list(zip((s for _, s in rows), (s for _, s in mine)))
        for pair in pairs:
            counts[pair] = counts.get(pair, 0) + 1
        # The tasks of a resource, in order, took its transfers in order where each
        # task made one transfer in both worlds.
        ra, sa = real_tasks.get(path, []), sim_tasks.get(path, [])
        if not len(ra) == len(sa) == len(rows) == len(mine):
            continue
        for a, b, states in zip(ra, sa, pairs):
            if not (a["outcome"] == b["outcome"] == "installed" and
                    a["attempts"] == b["attempts"] == 1):
                continue
            da, db = transfer_time(a), transfer_time(b)
            if da > 0 and db > 0:
                times.append((math.log(db / da), states, origin_of[a["artifact"]]))
    return counts, times


def connection_report(counts, times):
    """One line of the report from connection_states()."""
    med = lambda v: statistics.median(v) if v else float("nan")  # noqa: E731
    total = sum(counts.values())
    same = sum(n for (a, b), n in counts.items() if a == b)
    agree = [abs(x) for x, (a, b), _ in times if a == b]
    differ = [abs(x) for x, (a, b), _ in times if a != b]
    summed = sum(agree) + sum(differ)
    matrix = ", ".join(f"{a}/{b} {counts.get((a, b), 0)}"
                       for a in ("new", "warm", "restarted") for b in ("new", "warm", "restarted"))
    origins = sorted({o for _, _, o in times})
    bias = ", ".join(
        f"{o} {med([x for x, (a, b), oo in times if oo == o and a == b]):+.3f}" for o in origins)
    return (f"connections: {same}/{total} transfers in the same state (real/sim: {matrix}); "
            f"per task |ln transfer time| median {med(agree):.3f} where the states agree "
            f"({len(agree)}), {med(differ):.3f} where they differ ({len(differ)}, "
            f"{100 * sum(differ) / summed if summed else float('nan'):.0f}% of the summed "
            f"|ln|); where they agree, ln(sim / real) median by origin: {bias}")


def finalize_times(real, sim):
    """Per task installed in both worlds (one attempt each, `t_received` known in both):
    the finalize's time (t_end - t_received), real and simulated."""
    return [(a["t_end"] - a["t_received"], b["t_end"] - b["t_received"])
            for a, b in installed_once(real, sim)
            if a.get("t_received") is not None and b.get("t_received") is not None]


def pct(values, q):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, max(0, int(round(q * len(values) + 0.5)) - 1))]


def split_policies(text):
    """NAME[:k=v,...] specs, comma-separated, as `compare --policies` reads them: an item
    k=v is a parameter of the policy before it."""
    specs = []
    for item in text.split(","):
        if "=" in item and specs and ":" not in item.split("=")[0]:
            specs[-1] += "," + item
        else:
            specs.append(item)
    return specs


def load_scorer(cli, weights):
    """demandflight.metrics from the CLI's build tree (format/score.h, compare's score),
    with `weights` (k=v,... as compare --weights takes them)."""
    sys.path.insert(0, str(Path(cli).resolve().parents[1] / "python"))
    try:
        import demandflight
        from demandflight import _core  # Not among the names the package loads lazily.
    except ImportError as error:
        raise SystemExit(f"fidelity: --policies scores results with the Python package of the "
                         f"CLI's build tree (dfl_python_core): {error}")
    w = {}
    for item in filter(None, (weights or "").split(",")):
        key, _, value = item.partition("=")
        w[key] = float(value)
    _core.check_weights(w)  # ValueError naming a bad weight, before any run.
    return lambda result: demandflight.metrics(result, w)["score"]


def order(a, b, tie):
    """-1, 0 or 1: a below b, within `tie` of it, or above it."""
    return 0 if abs(a - b) <= tie else (-1 if a < b else 1)


def spread(diffs):
    """Mean of paired real differences and its 95% confidence interval (Student's t;
    (mean, mean) from a single run)."""
    mean = statistics.fmean(diffs)
    if len(diffs) < 2:
        return mean, mean, mean
    from scipy import stats  # python3-scipy
    half = stats.t.ppf(0.975, len(diffs) - 1) * statistics.stdev(diffs) / math.sqrt(len(diffs))
    return mean, mean - half, mean + half


def judge(real_diffs, d_sim, tie):
    """How a simulated difference stands to the real ones (paired by run): `agree` (same
    sign as a real difference whose interval excludes 0), `OPPOSITE`, `tie` (within
    `tie` in one world); with repeated runs whose interval holds 0, `within` (the
    simulated difference lies inside the real interval: neither world tells them
    apart) or `OUTSIDE` (the simulation sees a difference that reality does not)."""
    mean, lo, hi = spread(real_diffs)
    ss = order(d_sim, 0, tie)
    if len(real_diffs) >= 2 and lo <= 0 <= hi:
        return "within" if lo - tie <= d_sim <= hi + tie else "OUTSIDE"
    sr = order(mean, 0, tie)
    return "agree" if sr == ss else "tie" if 0 in (sr, ss) else "OPPOSITE"


def verdict(scores, models, policies, tie):
    """Per trace and model: each policy's score in both worlds (the real one over every
    repeated run), its difference to the first policy's (paired by run, with its 95%
    interval), and whether the two worlds agree on the sign of that difference and on
    the order of every pair of policies (see judge)."""
    rows = []
    for (trace, model), by_policy in scores.items():
        runs = min(len(by_policy[p][0]) for p in policies)
        real_of = {p: by_policy[p][0][:runs] for p in policies}
        mean_of = {p: statistics.fmean(real_of[p]) for p in policies}

        def diffs(p, q):
            return [a - b for a, b in zip(real_of[p], real_of[q])]

        pairs = {}
        for i, p in enumerate(policies):
            for q in policies[i + 1:]:
                kind = judge(diffs(p, q), by_policy[p][1] - by_policy[q][1], tie)
                pairs[kind] = pairs.get(kind, 0) + 1
        base = policies[0]
        for p in policies:
            sim = by_policy[p][1]
            d_sim = sim - by_policy[base][1]
            d_real, lo, hi = spread(diffs(p, base))
            rows.append({"trace": trace, "model": model, "policy": p, "real": mean_of[p],
                         "real_runs": real_of[p], "runs": runs, "sim": sim,
                         "rank_real": 1 + sum(mean_of[q] < mean_of[p] for q in policies),
                         "rank_sim": 1 + sum(by_policy[q][1] < sim for q in policies),
                         "d_real": d_real, "d_real_lo": lo, "d_real_hi": hi, "d_sim": d_sim,
                         "sign": "-" if p == base else judge(diffs(p, base), d_sim, tie),
                         "pairs": pairs})
    return rows


def tcp_info_prefix(args, trace, policy, run):
    """Where the servers of a real run log their TCP state (--tcp-info): DIR/TRACE-POLICY
    (-runR after the first run), one file per origin after it."""
    tag = f"{trace['name']}-{policy.replace(':', '_')}{'' if run == 0 else f'-run{run}'}"
    return str(Path(args.tcp_info).resolve() / tag)


def replay_for_real(args, mode, trace, work, index, delay_line, policy, run=0):
    """The trace replayed for real under `policy`, on a network of its own (nothing, a kept
    connection or a server's state, carries over from another run): (network, wall
    seconds, results), or results None if the replay failed."""
    tcp_info = None
    if args.tcp_info:
        Path(args.tcp_info).mkdir(parents=True, exist_ok=True)
        tcp_info = tcp_info_prefix(args, trace, policy, run)
        for origin in trace["origins"]:  # The servers append: a run starts afresh.
            Path(f"{tcp_info}-{origin}.jsonl").unlink(missing_ok=True)
    net = Network(mode, trace, work / "www", index, delay_line, args.server_cc, tcp_info,
                  args.link_sharing)
    shutil.rmtree(work / "cache", ignore_errors=True)
    try:
        started = time.monotonic()
        port_named_trace(trace, net.ports, work / "real-trace.jsonl")
        replay = subprocess.run([args.cli, "replay", str(work / "real-trace.jsonl"),
                                 "--base-url", net.base, "--policy", policy,
                                 "--cache", str(work / "cache"), "--out",
                                 str(work / "real.json")], capture_output=True, text=True)
        wall = time.monotonic() - started
    finally:
        net.close()
    if replay.returncode != 0:
        print(replay.stderr, file=sys.stderr)
        return net, wall, None
    return net, wall, json.loads((work / "real.json").read_text())


def parse_args():
    """The command line, checked: (args, mode, models, policies)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("cli")
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--mode", choices=["auto", "netns", "server"], default="auto")
    parser.add_argument("--models", default="tcp,calibrated,cm02,lv08",
                        help="network models, each NAME[+KEY:VALUE...] (SimGrid settings, and "
                             "sharing:rtt|equal, the tcp model's --tcp-sharing); rerun (with "
                             "--repeats 2 or more): the second real run compared with the first "
                             "as if it were a model, the floor no model can go under")
    parser.add_argument("--policies", default="always-abort",
                        help="orphan policies NAME[:k=v,...], comma-separated: each is replayed "
                             "for real and simulated; with more than one, the verdict table "
                             "(each policy's score in both worlds and its difference to the "
                             "first's)")
    parser.add_argument("--weights", default="",
                        help="the score's weights for the verdict, k=v,... as compare --weights "
                             "takes them (default: compare's defaults)")
    parser.add_argument("--tie", type=float, default=0.005,
                        help="score differences at most this are ties in the verdict table")
    parser.add_argument("--markdown")
    parser.add_argument("--check", type=float,
                        help="exit 1 unless outcomes are identical and the first model's median "
                             "latency error (of the first policy) is at most this")
    parser.add_argument("--check-without-delay", metavar="MODEL:BOUND",
                        help="where the round trips cannot be put in the network (no netem, no "
                             "TAP devices: the servers add them), check this model at this bound "
                             "instead")
    parser.add_argument("--repeats", type=int, default=1,
                        help="real runs of each policy (the verdict's spread: each policy's "
                             "difference to the first, paired by run, with its 95%% interval)")
    parser.add_argument("--tcp-info", metavar="DIR",
                        help="the servers log each connection's TCP state (window, RTO, idle "
                             "time) per request into DIR/TRACE-POLICY[-runR]-ORIGIN.jsonl, and "
                             "the report compares each transfer's connection (new, warm, "
                             "restarted after idle) with the tcp model's; with --real-from, "
                             "the logs already in DIR")
    parser.add_argument("--link-sharing", choices=["auto", "origins", "flows"], default="auto",
                        help="how the shaped client link is shared: flows (one FIFO for every "
                             "flow, as a client's access link; origins narrower than it "
                             "throttled by their servers) or origins (an HTB class per origin "
                             "under it, each guaranteed an equal part; where netem puts the "
                             "round trips on those classes, the only choice); auto: flows "
                             "unless netem is used")
    parser.add_argument("--keep", help="copy the real and simulated results into this directory")
    parser.add_argument("--server-cc", default="cubic",
                        help="the servers' TCP congestion control (cubic: what the "
                             "tcp model assumes; bbr; system: the machine's default)")
    parser.add_argument("--real-from", metavar="DIR",
                        help="take each real run from DIR (the files --keep wrote) instead of "
                             "replaying it: to simulate a new model against the same real runs")
    parser.add_argument("--delay-line", default="auto",
                        help="bench/delay_line, to put round trips in the network when the kernel "
                             "has no netem (auto: next to the CLI's build; none: servers add them)")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats: at least 1, not {args.repeats}")
    mode = args.mode
    if mode == "auto":
        mode = "netns" if netns_available() else "server"
    models = args.models.split(",")
    if RERUN in models and args.repeats < 2:
        parser.error(f"--models {RERUN}: compares the second real run with the first, so it "
                     f"needs --repeats 2 or more")
    if args.check is not None and models[0] == RERUN:
        parser.error(f"--check: the first model is the one checked, not {RERUN}")
    if args.link_sharing == "auto":
        args.link_sharing = "origins" if mode == "netns" and netem_available() else "flows"
    return args, mode, models, split_policies(args.policies)


def find_delay_line(args, mode):
    """bench/delay_line's path where the round trips go into the network through it."""
    if mode != "netns" or args.delay_line == "none":
        return None
    path = (Path(args.cli).resolve().parents[1] / "bench" / "delay_line"
            if args.delay_line == "auto" else Path(args.delay_line))
    return str(path) if path.exists() and not netem_available() else None


def fault_free(trace, trace_path, work):
    """The trace the simulator runs: the same one without its faults (a client cannot
    make a server fail, so the real runs have none either)."""
    if not trace["faults"]:
        return trace_path
    Path(work / "sim-trace.jsonl").write_text("".join(
        line for line in Path(trace_path).read_text().splitlines(keepends=True)
        if '"op": "fault"' not in line.replace('"op":"fault"', '"op": "fault"')))
    return str(work / "sim-trace.jsonl")


def result_name(stem, policies, policy, kind):
    tag = "" if len(policies) == 1 else f"-{policy.replace(':', '_')}"
    return f"{stem}{tag}-{kind}"


def real_runs(args, mode, trace, stem, work, index, delay_line, policies, score, server_cc):
    """Every policy replayed `--repeats` times for real (or read from --real-from); run r
    replays them in an order turned by r, so that a drift of the machine falls on each
    alike. Returns (first, real_scores, runs): each policy's first run as (net, wall,
    result), which the demand-by-demand comparison uses, its scores, and all its results;
    None when a replay failed."""
    first, real_scores, runs = {}, {}, {}
    for run in range(args.repeats):
        turn = run % len(policies)
        for policy in policies[turn:] + policies[:turn]:
            name = result_name(stem, policies, policy,
                               f"real{'' if run == 0 else f'-run{run}'}.json")
            if args.real_from:
                kept = Path(args.real_from) / name
                if not kept.exists():
                    raise SystemExit(f"fidelity: --real-from {args.real_from}: no {name} "
                                     f"(real run {run + 1} of {policy} on {stem})")
                real = json.loads(kept.read_text())
                net = SimpleNamespace(rtt_in_network=True,
                                      how=f"real run from {args.real_from}; "
                                          f"servers' TCP {server_cc}")
                wall = float("nan")
            else:
                net, wall, real = replay_for_real(args, mode, trace, work, index,
                                                  delay_line, policy, run)
                if real is None:
                    return None
                if args.keep:
                    Path(args.keep).mkdir(parents=True, exist_ok=True)
                    shutil.copy(work / "real.json", Path(args.keep) / name)
            runs.setdefault(policy, []).append(real)
            if score:
                real_scores.setdefault(policy, []).append(score(real))
                if args.repeats > 1:
                    print(f"real run {run + 1}/{args.repeats} {stem} {policy}: score "
                          f"{real_scores[policy][-1]:.4f} ({wall:.0f} s)", flush=True)
            if run == 0:
                first[policy] = (net, wall, real)
    return first, real_scores, runs


def simulate(args, model, sim_trace, sim_cc, policy, work, transfer_log):
    """The trace simulated under `model` (NAME[+KEY:VALUE...]; sharing:rtt|equal is the
    tcp model's --tcp-sharing, the rest SimGrid settings): its result."""
    name, *settings = model.split("+")
    extra = [x for setting in settings for x in (
        ("--tcp-sharing", setting.split(":", 1)[1])
        if setting.startswith("sharing:") else ("--cfg", setting))]
    log = ["--transfer-log", str(transfer_log)] if transfer_log else []
    subprocess.run([args.cli, "sim", sim_trace, "--network-model", name, *extra, *sim_cc,
                    "--policy", policy, "--out", str(work / "sim.json"), *log, "--quiet"],
                   check=True)
    return json.loads((work / "sim.json").read_text())


def fidelity_row(real, sim, trace, stem, model, policy, net, wall):
    """What differs between a real run and its simulation (or a second real run)."""
    same, total, errors, signed, differ, logs, gaps = compare(real, sim)
    rates, waits = transfer_rates(real, sim)
    link, queued, shares, close = decompose(real, sim, trace)
    fin = finalize_times(real, sim)
    med = lambda v: statistics.median(v) if v else float("nan")  # noqa: E731
    return {"trace": stem, "model": model, "policy": policy, "same": same,
            "total": total, "median": med(errors), "p95": pct(errors, 0.95),
            "n": len(errors), "how": net.how, "bias": med(signed),
            "ln_median": med(logs), "ln_p95": pct(logs, 0.95),
            "ln_max": max(logs) if logs else float("nan"),
            "rate_ln_median": med(rates), "rate_ln_p95": pct(rates, 0.95),
            "rates": len(rates), "wait_ln_median": med(waits), "waits": len(waits),
            "gap_median": med(gaps),
            "link_n": len(link), "link_median": med(link),
            "link_p95": pct(link, 0.95), "queued_n": len(queued),
            "queued_median": med(queued), "queued_p95": pct(queued, 0.95),
            "shares": shares, "close_n": len(close),
            "finalize_n": len(fin),
            "finalize_real": med([x for x, _ in fin]),
            "finalize_sim": med([y for _, y in fin]),
            "close_median": med(close), "close_p95": pct(close, 0.95),
            "in_flight": by_flows_in_flight(real, sim),
            "wall_s": wall, "faults": trace["faults"], "differ": differ[:5]}


def print_row(row, shown):
    print(f"{row['trace']:<22} {shown:<8} outcomes {row['same']}/{row['total']} identical, "
          f"latency error median {100 * row['median']:.1f}% p95 "
          f"{100 * row['p95']:.1f}% (sim - real median {100 * row['bias']:+.1f}%); "
          f"|ln| median {row['ln_median']:.3f} p95 {row['ln_p95']:.3f} max "
          f"{row['ln_max']:.3f}; per transfer |ln rate| median "
          f"{row['rate_ln_median']:.3f} p95 {row['rate_ln_p95']:.3f} "
          f"({row['rates']} tasks), |ln wait| median {row['wait_ln_median']:.3f} "
          f"({row['waits']}); differing outcomes' gap median "
          f"{row['gap_median']:.3f} s; no slot wait in either world "
          f"{row['link_n']} demands, error median {100 * row['link_median']:.1f}% "
          f"p95 {100 * row['link_p95']:.1f}% ({row['close_n']} within 2 round "
          f"trips: {100 * row['close_median']:.1f}% / "
          f"{100 * row['close_p95']:.1f}%), the others {row['queued_n']}: "
          f"{100 * row['queued_median']:.1f}% / {100 * row['queued_p95']:.1f}%, "
          f"the error's share in waits / transfers / finalizes "
          f"{' / '.join(f'{100 * x:.0f}%' for x in row['shares'])}; finalize median "
          f"real {1000 * row['finalize_real']:.1f} ms sim "
          f"{1000 * row['finalize_sim']:.1f} ms ({row['finalize_n']} tasks) "
          f"({row['n']} demands; real run "
          f"{row['wall_s']:.0f} s; {row['how']})", flush=True)
    if row["differ"]:
        print(f"  differing outcomes (demand, real, sim): {row['differ']}")
    print("  per transfer |ln time| median (ln sim / real median) by the "
          "transfers in flight beside it in the real run: " + ", ".join(
              f"{label} {n}: {abs_med:.3f} ({signed:+.3f})"
              for label, n, abs_med, signed in row["in_flight"]), flush=True)


def checked(args, models, policies, row, net):
    """Whether the row passes --check (or --check-without-delay); True when unchecked."""
    check_model, bound = models[0], args.check
    if args.check_without_delay and not net.rtt_in_network:
        check_model, bound = args.check_without_delay.rsplit(":", 1)
        bound = float(bound)
    if bound is None or row["model"] != check_model or row["policy"] != policies[0]:
        return True
    ok = row["same"] == row["total"] and row["median"] <= bound
    print(f"check: {row['model']}: outcomes identical and median error at most "
          f"{100 * bound:g}%: {'yes' if ok else 'NO'}")
    return ok


def compare_models(args, models, policies, trace, stem, work, sim_trace, sim_cc, real_run,
                   score, scores):
    """Each policy's first real run against each model (or the second real run, for
    `rerun`): the rows, printed as they come; False when a check failed."""
    first, real_scores, runs = real_run
    rows, passed = [], True
    for policy in policies:
        net, wall, real = first[policy]
        for model in models:
            name = model.split("+")[0]
            # The tcp model's connections against the servers' TCP state.
            tcp_info = (tcp_info_prefix(args, trace, policy, 0)
                        if args.tcp_info and name in ("tcp", RERUN) else None)
            if name == RERUN:
                # Reality against itself: the second real run in the place of a
                # simulation, the floor under any model's error.
                sim = runs[policy][1]
            else:
                sim = simulate(args, model, sim_trace, sim_cc, policy, work,
                               work / "transfers.log" if tcp_info and name == "tcp" else None)
                if score:
                    scores.setdefault((stem, model), {})[policy] = (real_scores[policy],
                                                                    score(sim))
                if args.keep:
                    Path(args.keep).mkdir(parents=True, exist_ok=True)
                    shutil.copy(work / "sim.json", Path(args.keep) / result_name(
                        stem, policies, policy, f"sim-{model}.json"))
            row = fidelity_row(real, sim, trace, stem, model, policy, net, wall)
            rows.append(row)
            print_row(row, model if len(policies) == 1 else f"{model} {policy}")
            if tcp_info:
                # Against the model's choices, or (rerun) the second real run's.
                states = connection_states(
                    trace, served_states(trace, tcp_info),
                    served_states(trace, tcp_info_prefix(args, trace, policy, 1))
                    if name == RERUN else modelled_states(trace, work / "transfers.log"),
                    real, sim)
                if states is not None:
                    row["connections"] = connection_report(*states)
                    print(f"  {row['connections']}", flush=True)
            passed = checked(args, models, policies, row, net) and passed
    return rows, passed


def real_diff(v):
    if v["runs"] < 2:
        return f"{v['d_real']:+.4f}"
    return f"{v['d_real']:+.4f} [{v['d_real_lo']:+.4f}, {v['d_real_hi']:+.4f}]"


def print_verdicts(verdicts, policies, tie):
    for v in verdicts:
        runs = "" if v["runs"] < 2 else f" (mean of {v['runs']} runs: " + ", ".join(
            f"{x:.4f}" for x in v["real_runs"]) + ")"
        print(f"verdict {v['trace']:<22} {v['model']:<8} {v['policy']:<18} score real "
              f"{v['real']:.4f}{runs} sim {v['sim']:.4f}; rank {v['rank_real']} / "
              f"{v['rank_sim']}; vs {policies[0]} real {real_diff(v)} sim {v['d_sim']:+.4f}: "
              f"{v['sign']}")
    for key in dict.fromkeys((v["trace"], v["model"]) for v in verdicts):
        pairs = next(v["pairs"] for v in verdicts if (v["trace"], v["model"]) == key)
        print(f"verdict {key[0]} {key[1]}: pairs of policies: " + ", ".join(
            f"{kind} {count}" for kind, count in sorted(pairs.items())) +
            f" (tie: within {tie} in one world; within: reality's 95% interval holds 0 "
            f"and the simulated difference)")


def write_markdown(path, rows, verdicts, policies):
    """The table of rows (and of verdicts) as markdown."""
    with open(path, "w") as f:
        f.write("| trace | sim network model | policy | outcomes identical | median error "
                "| p95 error | sim − real (median) | \\|ln\\| median / p95 / max | per "
                "transfer \\|ln rate\\| median / p95 | \\|ln wait\\| median | differing: "
                "gap median | no slot wait: n, median / p95 | of those, within 2 round "
                "trips: n, median / p95 | waited: n, median / p95 | "
                "error's share: waits / transfers / finalizes | finalize median real / "
                "sim | demands compared |\n")
        f.write("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
                "---:|\n")
        for r in rows:
            f.write(f"| {r['trace']} | {r['model']} | {r['policy']} | {r['same']}/{r['total']} | "
                    f"{100 * r['median']:.1f}% | {100 * r['p95']:.1f}% | "
                    f"{100 * r['bias']:+.1f}% | {r['ln_median']:.3f} / {r['ln_p95']:.3f} / "
                    f"{r['ln_max']:.3f} | {r['rate_ln_median']:.3f} / {r['rate_ln_p95']:.3f} "
                    f"({r['rates']}) | {r['wait_ln_median']:.3f} ({r['waits']}) | "
                    f"{r['gap_median']:.3f} s | {r['link_n']}, {100 * r['link_median']:.1f}% / "
                    f"{100 * r['link_p95']:.1f}% | {r['close_n']}, "
                    f"{100 * r['close_median']:.1f}% / {100 * r['close_p95']:.1f}% | "
                    f"{r['queued_n']}, "
                    f"{100 * r['queued_median']:.1f}% / {100 * r['queued_p95']:.1f}% | "
                    f"{' / '.join(f'{100 * x:.0f}%' for x in r['shares'])} | "
                    f"{1000 * r['finalize_real']:.1f} / {1000 * r['finalize_sim']:.1f} ms | "
                    f"{r['n']} |\n")
        f.write(f"\nShaping: {rows[0]['how'] if rows else '-'}.\n")
        for r in rows:
            if "connections" in r:
                f.write(f"\n{r['trace']}, {r['model']}, {r['policy']}: {r['connections']}.\n")
            f.write(f"\n{r['trace']}, {r['model']}, {r['policy']}: per transfer \\|ln time\\| "
                    f"median (ln sim / real median) by the transfers in flight beside it: " +
                    ", ".join(f"{label} {n}: {a:.3f} ({b:+.3f})"
                              for label, n, a, b in r["in_flight"]) + ".\n")
        if verdicts:
            f.write(f"\n| trace | sim network model | policy | score real | score sim | rank "
                    f"real / sim | vs {policies[0]} real | vs {policies[0]} sim | sign |\n")
            f.write("|---|---|---|---:|---:|---:|---:|---:|---|\n")
            for v in verdicts:
                f.write(f"| {v['trace']} | {v['model']} | {v['policy']} | {v['real']:.4f} | "
                        f"{v['sim']:.4f} | {v['rank_real']} / {v['rank_sim']} | "
                        f"{real_diff(v)} | {v['d_sim']:+.4f} | {v['sign']} |\n")


def main():
    args, mode, models, policies = parse_args()
    score = load_scorer(args.cli, args.weights) if len(policies) > 1 else None
    delay_line = find_delay_line(args, mode)
    # The tcp model's idle rule follows the servers' congestion control: a
    # loss-based one (CUBIC, Reno) restarts slow start after idle, BBR does not.
    server_cc = args.server_cc if args.server_cc != "system" else Path(
        "/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()
    sim_cc = ["--server-cc", "bbr" if server_cc == "bbr" else "cubic"]
    rows, failed = [], False
    scores = {}  # (trace, model) -> policy -> (real scores, simulated score)
    for index, trace_path in enumerate(args.traces):
        trace = read_trace(trace_path)
        stem = Path(trace_path).stem
        with tempfile.TemporaryDirectory(prefix="dfl-fidelity-") as work:
            work = Path(work)
            serve_files(trace, work / "www")
            sim_trace = fault_free(trace, trace_path, work)
            real_run = real_runs(args, mode, trace, stem, work, index, delay_line, policies,
                                 score, server_cc)
            if real_run is None:
                return 1
            trace_rows, passed = compare_models(args, models, policies, trace, stem, work,
                                                sim_trace, sim_cc, real_run, score, scores)
            rows += trace_rows
            failed = failed or not passed
    verdicts = verdict(scores, models, policies, args.tie) if score else []
    print_verdicts(verdicts, policies, args.tie)
    if args.markdown:
        write_markdown(args.markdown, rows, verdicts, policies)
    return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main())
