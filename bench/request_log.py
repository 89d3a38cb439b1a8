#!/usr/bin/python3
"""Writes a large synthetic request log (CSV: t, object, bytes, client), the
shape of the CDN logs of caching research, for bench/sim_stream_scale.sh.

    bench/request_log.py ROWS OUT.csv [--objects N] [--rate R] [--seed S]

Requests arrive as a Poisson process at R per second (default 400); objects
follow a Zipf law (alpha 0.9) over N objects (default 200,000) whose sizes
are lognormal (median 20 kB, sigma 1, at most 50 MB). Clients come in visits:
a request goes to one of 200 visits in progress, and after each request a
visit ends with probability 1/20 and a new one begins there, from one of
50,000 clients (so a visit asks for 20 objects on average, over about ten
seconds). Written in chunks of a million rows: memory stays small at any
size. numpy's generator with the seed: the same file each time.
"""
import argparse

import numpy as np
import pandas as pd


def clients(rng, n, slots, visits):
    """The client of each of n requests (see the module's text); `visits` counts the
    visits begun in each slot and carries them over to the next chunk."""
    slot = rng.integers(0, slots, n)
    ended = rng.random(n) < 1 / 20
    # The visit of a request: its slot's visits begun before it (a visit ends after
    # the request that ends it).
    begun = pd.Series(ended.astype(np.int64)).groupby(slot).cumsum().to_numpy() - ended
    visit = visits[slot] + begun
    np.add.at(visits, slot, ended.astype(np.int64))
    # A visit's client: a hash of (slot, visit) onto 50,000 clients.
    return (slot * 1_000_003 + visit * 2_654_435_761) % 50_000


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
    slots = 200
    visits = np.zeros(slots, dtype=np.int64)  # Visits begun so far in each slot.
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
                "client": clients(rng, n, slots, visits),
            })
            frame["object"] = "o" + frame["object"].astype(str)
            frame["client"] = "c" + frame["client"].astype(str)
            frame.to_csv(out, header=False, index=False, float_format="%.6f")
            written += n


if __name__ == "__main__":
    main()
