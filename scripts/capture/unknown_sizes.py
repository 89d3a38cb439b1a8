#!/usr/bin/python3
"""Rewrites a DevTools network log as older Chrome wrote many of theirs: a share
of its `Network.loadingFinished` events says `encodedDataLength: -1`, Chrome's
"unknown" (Chrome 56 did so for 25 of the 325 such events of one news site's
log, 7.7%). Everything else is kept as it is.

    scripts/capture/unknown_sizes.py IN OUT [--share 0.08] [--seed 1]

`demandflight import cdp` then takes those sizes from the response's
Content-Length, else from the bytes its `Network.dataReceived` events counted,
else skips the request, and counts each case in the trace's x-import
(docs/cli.md, "A capture with unknown sizes").
"""
import argparse
import json
import random
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input", help="a DevTools log: a JSON array of {method, params}")
    parser.add_argument("output")
    parser.add_argument("--share", type=float, default=0.08,
                        help="the share of loadingFinished events made unknown (0 to 1)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if not 0 <= args.share <= 1:
        parser.error(f"--share: {args.share} is not from 0 to 1")
    try:
        with open(args.input, encoding="utf-8") as f:
            events = json.load(f)
    except OSError as e:
        sys.exit(f"{args.input}: {e.strerror}")
    except json.JSONDecodeError as e:
        sys.exit(f"{args.input}:{e.lineno}: not JSON: {e.msg}")
    if not isinstance(events, list):
        sys.exit(f"{args.input}: not a JSON array of DevTools events")
    finished = [e for e in events
                if isinstance(e, dict) and e.get("method") == "Network.loadingFinished"]
    chosen = random.Random(args.seed).sample(finished, round(args.share * len(finished)))
    for event in chosen:
        event["params"]["encodedDataLength"] = -1
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(events, f)
    print(f"{len(chosen)} of {len(finished)} loadingFinished events now say -1",
          file=sys.stderr)


if __name__ == "__main__":
    main()
