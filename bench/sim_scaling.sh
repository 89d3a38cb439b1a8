#!/usr/bin/env bash
# Growth of the simulate phase from N to 10N demands, for every scalable
# scenario kind, model, a set of orphan policies, and the trace's slots or 2
# (a backlog). Linear code grows ~10x (a little more from cache misses); a
# quadratic path shows as ~100x. It found two: the independent model's key map
# and the oracle's owner-end lookup (docs/benchmarks.md, "Simulator").
# Usage: bench/sim_scaling.sh [BUILD_DIR]   (default build/release; N from DEMANDS)
set -euo pipefail
build=${1:-build/release}
n=${DEMANDS:-20000}
big=$((n * 10))
flag=${FLAG:-25}  # Growth above this is marked.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bin="$build/cli/demandflight"

simulate_s() {  # TRACE ARGS... -> the simulate phase in seconds
  local trace=$1; shift
  "$bin" sim "$trace" "$@" --quiet --profile --out /dev/null 2>&1 >/dev/null |
    sed -n 's/.*simulate \([0-9.]*\) s.*/\1/p'
}

echo "| kind | model | policy | slots | $n demands, s | $big demands, s | growth |"
echo "|---|---|---|---|---|---|---|"
marked=0
for kind in open_world_streaming session_churn flaky_network cache_pressure; do
  "$bin" gen "$kind" --seed 5 --demands "$n" > "$work/small.jsonl"
  "$bin" gen "$kind" --seed 5 --demands "$big" > "$work/big.jsonl"
  for model in demand callbacks independent; do
    for policy in always-abort keep-partial expected-value oracle; do
      for slots in trace 2; do
        args=(--model "$model" --policy "$policy")
        [ "$slots" = 2 ] && args+=(--max-transfers 2)
        a=$(simulate_s "$work/small.jsonl" "${args[@]}")
        b=$(simulate_s "$work/big.jsonl" "${args[@]}")
        growth=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", b / (a > 0.001 ? a : 0.001) }')
        mark=$(awk -v g="$growth" -v f="$flag" 'BEGIN { print (g > f) ? " **!**" : "" }')
        [ -n "$mark" ] && marked=$((marked + 1))
        echo "| $kind | $model | $policy | $slots | $a | $b | ${growth}x$mark |"
      done
    done
  done
done
echo
echo "$marked of the cases grew more than ${flag}x for 10x the demands"
