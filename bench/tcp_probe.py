#!/usr/bin/python3
"""One connection's HTTP timings over fidelity.py's shaped network: what the `tcp` network
model's closed form is checked against.

usage: tcp_probe.py [--latency S] [--server-cc cubic|bbr|system] [--delay-line PATH]

Builds the fidelity network (a network namespace, HTB at 50 MB/s, the round trip in the
delay line; root and TAP devices needed) for one origin whose one-way latency is 15 ms
plus --latency, serves 100 KB to 3 MB bodies, and times with http.client:
  - a request on a new connection (its handshake, then the body);
  - a request right after a 3 MB transfer on the same connection (a warm window);
  - the same after an idle gap of 0.5 s and of 2 s (Linux's restart after idle).
Each case is run three times; the median is printed, in milliseconds and in round trips,
beside size / bandwidth. "first 64 KB" is when the first 64 KB of the body had arrived.
"""
import argparse
import http.client
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fidelity  # noqa: E402

SIZES = [100_000, 300_000, 1_000_000, 3_000_000]
IDLE_S = [None, 0.0, 0.5, 2.0]  # None: a new connection.
CLIENT_BW = 50_000_000


def get(conn, size):
    started = time.perf_counter()
    conn.request("GET", f"/f{size}")
    response = conn.getresponse()
    first = None
    while True:
        block = response.read(1 << 16)
        if not block:
            break
        if first is None:
            first = time.perf_counter() - started
    return first, time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--server-cc", default="cubic")
    parser.add_argument("--delay-line",
                        default=str(Path(__file__).resolve().parents[1] / "build" / "release" /
                                    "bench" / "delay_line"))
    args = parser.parse_args()
    if not fidelity.netns_available():
        raise SystemExit("tcp_probe: needs network namespaces (root)")
    trace = {"client_bandwidth_Bps": CLIENT_BW, "client_latency_s": 0.015,
             "origins": {"o": {"bandwidth_Bps": 80_000_000, "latency_s": args.latency}},
             "artifacts": [{"resource": f"f{s}", "size": s} for s in SIZES]}
    work = Path(tempfile.mkdtemp(prefix="dfl-tcp-probe-"))
    fidelity.serve_files(trace, work / "www")
    net = fidelity.Network("netns", trace, work / "www", 0, args.delay_line, args.server_cc)
    try:
        if not net.rtt_in_network:
            raise SystemExit("tcp_probe: the round trip is not in the network (no delay line)")
        host = net.base.split("//")[1].split(":")[0]
        rtt = 2 * (0.015 + args.latency)
        print(f"{net.how}; round trip {rtt * 1000:.0f} ms")
        for size in SIZES:
            for idle in IDLE_S:
                runs = []
                for _ in range(3):
                    conn = http.client.HTTPConnection(host, net.ports["o"])
                    t0 = time.perf_counter()
                    conn.connect()
                    handshake = time.perf_counter() - t0
                    if idle is not None:
                        get(conn, 3_000_000)  # Opens the window.
                        time.sleep(idle)
                        handshake = 0.0
                    first, total = get(conn, size)
                    runs.append((total, first, handshake))
                    conn.close()
                total, first, handshake = sorted(runs)[1]
                label = "new connection" if idle is None else f"warm, idle {idle:g} s"
                print(f"{size:>9} B  {label:<16} handshake {handshake * 1000:6.1f} ms  "
                      f"first 64 KB {first * 1000:6.1f} ms  body {total * 1000:7.1f} ms "
                      f"= {total / rtt:5.2f} RTT  (size / bandwidth {size / CLIENT_BW * 1000:.1f} ms)")
    finally:
        net.close()


if __name__ == "__main__":
    main()
