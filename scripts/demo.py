#!/usr/bin/env python3
"""`make demo`: the three-caller scenario (docs/design.md §1) under the three
models side by side, then every bundled scenario under the demand model.

Runs the `demandflight` binary; each simulation in its own process (SimGrid
allows one per process). Standard library only.

Usage: demo.py DEMANDFLIGHT_BINARY SCENARIOS_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

MODELS = ["demand", "callbacks", "independent"]


def simulate(binary, trace, model, out):
    subprocess.run([binary, "sim", trace, "--model", model, "--out", out, "--quiet"], check=True)
    with open(out) as f:
        return json.load(f)


def cell(demand):
    if demand["outcome"] is None:
        return "(no terminal)"
    return f'{demand["outcome"]} at {demand["t_end"]:.2f}'


def side_by_side(binary, scenarios, work):
    trace = os.path.join(scenarios, "three_callers.jsonl")
    results = {m: simulate(binary, trace, m, os.path.join(work, m + ".json")) for m in MODELS}
    print("The three-caller story (docs/design.md §1): scenarios/three_callers.jsonl")
    print("One transfer slot; terrain holds it while rock and grass wait. Streaming prefetches")
    print("the rock (p0), the camera needs it now (p3), a session preloads it (p2); the camera")
    print("lowers to p1 at 1.4 s, the session is destroyed at 1.5 s, the camera leaves at 1.8 s.\n")
    width = 24
    print(f'{"caller":<16}' + "".join(f"{m:<{width}}" for m in MODELS))
    demands = results["demand"]["demands"]
    for i, d in enumerate(demands):
        row = f'{d["demand"]:<16}'
        for m in MODELS:
            row += f"{cell(results[m]['demands'][i]):<{width}}"
        print(row)
    print()

    def rock(result, field):
        return sum(t[field] for t in result["tasks"] if t["artifact"] == "rock")

    rows = [
        ("rock transfers", lambda r: sum(t["attempts"] for t in r["tasks"] if t["artifact"] == "rock")),
        ("rock installs", lambda r: rock(r, "installs")),
        ("succeeded", lambda r: r["summary"]["outcomes"]["succeeded"]),
        ("cancelled", lambda r: r["summary"]["outcomes"]["cancelled"]),
        ("bytes wasted", lambda r: r["summary"]["bytes_wasted"]),
        ("pollution s", lambda r: round(r["summary"]["priority_pollution_s"], 3)),
    ]
    for name, f in rows:
        print(f"{name:<16}" + "".join(f"{str(f(results[m])):<{width}}" for m in MODELS))
    print()
    for m in MODELS:
        timeline = [t["priority_timeline"] for t in results[m]["tasks"] if t["artifact"] == "rock"]
        print(f"rock priority timeline ({m}): {timeline}")
    print("\ndemand: one transfer and one install; each caller ends only its own wait; the rock")
    print("falls back 3 -> 2 -> 1 -> 0 as callers leave, so grass (p1) goes first.")
    print("callbacks: the session's teardown cancels everyone's rock; its priority stayed 3 after")
    print("the camera lowered to 1 (pollution); the rock is never installed.\n")


def bundled(binary, scenarios):
    for name in sorted(os.listdir(scenarios)):
        if not name.endswith(".jsonl") or name == "three_callers.jsonl":
            continue
        print(f"== scenarios/{name}")
        subprocess.run([binary, "sim", os.path.join(scenarios, name)], check=True)
        print()


def policies(binary, scenarios):
    print("== orphan policies on the bundled scenarios (demandflight compare; lower score is better)")
    traces = [os.path.join(scenarios, n) for n in sorted(os.listdir(scenarios))
              if n.endswith(".jsonl") and n != "three_callers.jsonl"]
    subprocess.run([binary, "compare", *traces], check=True)
    print()


def main():
    binary, scenarios = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as work:
        side_by_side(binary, scenarios, work)
    bundled(binary, scenarios)
    policies(binary, scenarios)


if __name__ == "__main__":
    main()
