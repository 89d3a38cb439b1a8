#!/usr/bin/env python3
"""Turns engine_bench's JSON output into the table of docs/benchmarks.md.

Every figure is a ratio against numbers from the same run: each operation's
cost relative to the bare single-flight map at the same size, and its growth
from 1e3 to 1e6 live tasks. Absolute nanoseconds are shown for reference only;
this machine is shared and noisy.

Usage: ratios.py BENCH.json
"""
import json
import sys

IMPLS = {0: "demand", 1: "callbacks", 2: "singleflight"}
SIZES = [1000, 10000, 100000, 1000000]


def main(path):
    with open(path) as f:
        data = json.load(f)
    ns = {}
    same_key = {}  # IndependentSameKey: tasks queued for the one key -> ns.
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        scale = {"ns": 1, "us": 1e3, "ms": 1e6}[b["time_unit"]]
        parts = (b["run_name"] if "run_name" in b else b["name"]).split("/")
        if parts[0] == "IndependentSameKey":
            same_key[int(parts[1].split(":")[1])] = b["cpu_time"] * scale
            continue
        name, impl, live = parts
        impl = IMPLS[int(impl.split(":")[1])]
        live = int(live.split(":")[1])
        ns[(name, impl, live)] = b["cpu_time"] * scale

    cases = []
    for key in ns:
        if key[0] not in cases:
            cases.append(key[0])
    print("| operation | model | " + " | ".join(f"{n:.0e} live" for n in SIZES)
          + " | growth 1e3→1e6 |")
    print("|---|---|" + "---|" * (len(SIZES) + 1))
    for case in cases:
        for impl in IMPLS.values():
            if (case, impl, SIZES[0]) not in ns:
                continue
            cells = []
            for n in SIZES:
                t = ns[(case, impl, n)]
                base = ns.get((case, "singleflight", n))
                ratio = f" ({t / base:.2f}×)" if base and impl != "singleflight" else ""
                cells.append(f"{t:.0f} ns{ratio}")
            growth = ns[(case, impl, SIZES[-1])] / ns[(case, impl, SIZES[0])]
            print(f"| {case} | {impl} | " + " | ".join(cells) + f" | {growth:.2f}× |")
    print()
    print("(×): cost relative to the bare single-flight map at the same size, same run.")

    # The acceptance figures, spelled out.
    sc = lambda impl, n: ns[("SubscribeCancel", impl, n)]
    if ("SubscribeCancel", "demand", 100000) in ns:
        print()
        print(f"demand subscribe+cancel at 1e5 live: "
              f"{sc('demand', 100000) / sc('singleflight', 100000):.2f}× single flight (limit 2.5×)")
        print(f"demand subscribe+cancel growth 1e3→1e6: "
              f"{sc('demand', 1000000) / sc('demand', 1000):.2f}× (limit 2×)")

    if same_key:
        print()
        first = min(same_key)
        print("independent model, subscribe + cancel the oldest, by tasks queued for one key: "
              + ", ".join(f"{k}: {t:.0f} ns ({t / same_key[first]:.2f}×)"
                          for k, t in sorted(same_key.items())))


if __name__ == "__main__":
    main(sys.argv[1])
