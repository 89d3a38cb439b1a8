#!/usr/bin/python3
"""Writes a large synthetic request log (CSV: t, object, bytes, client), the
shape of the CDN logs of caching research, for bench/sim_stream_scale.sh.

    bench/request_log.py ROWS OUT.csv [--objects N] [--rate R] [--seed S]

Requests arrive as a Poisson process at R per second (default 400); objects
follow a Zipf law (alpha 0.9) over N objects (default 200,000) whose sizes
are lognormal (median 20 kB, sigma 1, at most 50 MB); each request comes from
one of 50,000 clients. Written in chunks of a million rows: memory stays
small at any size. numpy's generator with the seed: the same file each time.
"""
import argparse

import numpy as np
import pandas as pd


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rows", type=int)
    parser.add_argument("out")
    parser.add_argument("--objects", type=int, default=200_000)
    parser.add_argument("--rate", type=float, default=400.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    weights = 1.0 / np.arange(1, args.objects + 1) ** 0.9
    cdf = np.cumsum(weights / weights.sum())
    sizes = np.minimum(50_000_000, np.maximum(100, rng.lognormal(np.log(20_000), 1.0,
                                                                  args.objects))).astype(np.int64)
    t = 0.0
    written = 0
    chunk = 1_000_000
    with open(args.out, "w") as out:
        out.write("t,object,bytes,client\n")
        while written < args.rows:
            n = min(chunk, args.rows - written)
            times = t + np.cumsum(rng.exponential(1.0 / args.rate, n))
            t = float(times[-1])
            objects = np.minimum(np.searchsorted(cdf, rng.random(n)), args.objects - 1)
            frame = pd.DataFrame({
                "t": np.round(times, 6),
                "object": objects,
                "bytes": sizes[objects],
                "client": rng.integers(0, 50_000, n),
            })
            frame["object"] = "o" + frame["object"].astype(str)
            frame["client"] = "c" + frame["client"].astype(str)
            frame.to_csv(out, header=False, index=False, float_format="%.6f")
            written += n


if __name__ == "__main__":
    main()
