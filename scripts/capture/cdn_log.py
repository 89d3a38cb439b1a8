#!/usr/bin/python3
"""Writes a synthetic CDN request log in two formats of caching research: a CSV
log (time, object, size, client, content type) and the same requests as
libCacheSim's oracleGeneral binary trace, zstd-compressed (whole seconds, no
client or type: the binary format has neither).

    scripts/capture/cdn_log.py OUT_DIR [--clients N] [--minutes M] [--seed S]

Clients come back in visits (exponential gaps, 3 min mean); a visit asks for
5 to 40 objects, 0.1 to 2 s apart; objects are drawn from a Zipf law (alpha
0.9) over 3,000 objects whose sizes are lognormal (median 1.5 MB, sigma 1.2,
at most 200 MB). Content types follow size: json under 50 kB, texture under
5 MB, pak above. The log has no abandon times, as such logs have none: the
demand model of `demandflight import` adds them (docs/cli.md).
"""
import argparse
import bisect
import math
import os
import random
import struct
import subprocess


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--clients", type=int, default=120)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    objects = 3000
    weights = [1 / (rank + 1) ** 0.9 for rank in range(objects)]
    cumulative, total = [], 0.0
    for w in weights:
        total += w
        cumulative.append(total)
    sizes = [min(200_000_000, max(1_000, int(rng.lognormvariate(math.log(1_500_000), 1.2))))
             for _ in range(objects)]
    ids = [rng.getrandbits(63) for _ in range(objects)]
    end = args.minutes * 60
    requests = []
    for client in range(args.clients):
        t = rng.expovariate(1 / 60)
        while t < end:
            for _ in range(rng.randint(5, 40)):

                o = bisect.bisect_left(cumulative, rng.random() * total)
                requests.append((t, o, client))
                t += rng.uniform(0.1, 2.0)
            t += rng.expovariate(1 / 180)
    requests.sort()
    os.makedirs(args.out, exist_ok=True)
    start = 1_700_000_000
    with open(os.path.join(args.out, "cdn_log.csv"), "w") as f:
        f.write("timestamp,object,bytes,client,content_type\n")
        for t, o, client in requests:
            size = sizes[o]
            kind = "json" if size < 50_000 else "texture" if size < 5_000_000 else "pak"
            f.write(f"{start + t:.3f},obj-{ids[o]:x},{size},c{client},{kind}\n")
    binary = os.path.join(args.out, "cdn_log.oracleGeneral")
    next_access, seen = [-1] * len(requests), {}
    for i in range(len(requests) - 1, -1, -1):
        o = requests[i][1]
        next_access[i] = seen.get(o, -1)
        seen[o] = i
    with open(binary, "wb") as f:
        for (t, o, _), later in zip(requests, next_access):
            f.write(struct.pack("<IQIq", int(start + t), ids[o], sizes[o], later))
    subprocess.run(["zstd", "-q", "-f", "-19", "--rm", binary], check=True)
    print(f"cdn_log.py: {len(requests)} requests in {args.out}/cdn_log.csv and "
          f"{args.out}/cdn_log.oracleGeneral.zst")


if __name__ == "__main__":
    main()
