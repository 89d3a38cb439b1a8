#!/usr/bin/env python3
"""Writes the Markdown table of docs/cli.md, "The orphan policies compared", from the
--csv (and --runs-csv) of `demandflight compare`:

    scripts/policy_table.py TITLE compare.csv [runs.csv]

One row per policy, one column per trace: the score's mean difference to the baseline
with its 95% t interval (`*` where it excludes 0) and wins, then vs_oracle and the
critical service rate. With runs.csv it also prints the smallest regret over all runs
(the oracle is beaten nowhere when it is not below 0).
"""

import sys

import pandas as pd


def signed(x: float) -> str:
    return f"{x:+.3f}".replace("-", "−")


def main(argv) -> int:
    if len(argv) not in (2, 3):
        sys.stderr.write(__doc__)
        return 2
    title, table = argv[0], pd.read_csv(argv[1], na_values=["-"])
    traces = list(dict.fromkeys(table["trace"]))
    policies = list(dict.fromkeys(table["policy"]))
    short = {t: t.removeprefix("gen:").split(":")[0] for t in traces}
    print(f"**{title}**: score difference to always-abort, mean [95% t interval] (`*`: "
          "excludes 0), wins out of the seeds; `vs_oracle` below it; `sr` the critical "
          "service rate.\n")
    print("| policy | " + " | ".join(short[t] for t in traces) + " |")
    print("|---|" + "---:|" * len(traces))
    for p in policies:
        cells = []
        for t in traces:
            row = table[(table.trace == t) & (table.policy == p)].iloc[0]
            sr = "-" if pd.isna(row["critical_service_rate"]) else f"{row['critical_service_rate']:.3f}"
            tail = f"<br>×{row['vs_oracle']:.3f}, sr {sr}"
            if pd.isna(row["score_diff_lo"]) or (row["score_diff"] == 0 and p == "always-abort"):
                cells.append(f"score {row['score']:.3f}{tail}")
                continue
            star = "*" if row["significant"] else ""
            cells.append(f"{signed(row['score_diff'])} [{signed(row['score_diff_lo'])}, "
                         f"{signed(row['score_diff_hi'])}]{star} {int(row['wins'])}/"
                         f"{int(row['seeds'])}{tail}")
        print(f"| {p} | " + " | ".join(cells) + " |")
    if len(argv) == 3:
        runs = pd.read_csv(argv[2], na_values=["-"])
        worst = runs.loc[runs["regret"].idxmin()]
        print(f"\nsmallest regret over {len(runs)} runs: {worst['regret']:.6f} "
              f"({worst['policy']} on {worst['trace']}, seed {worst['seed']}); "
              f"smallest vs_oracle {runs['vs_oracle'].min():.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
