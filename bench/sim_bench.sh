#!/usr/bin/env bash
# Simulator benchmark, two figures from one run on this machine:
#   1. `demandflight gen open_world_streaming --demands N` simulated end to end
#      (reading the trace, the engine, SimGrid, the result JSON), wall time;
#   2. the simulator's overhead over a bare SimGrid replay of the same transfers
#      (same sizes, start times and origins; no engine, no trace records, no
#      finalize, no results), as a ratio of wall times measured back to back.
# Usage: bench/sim_bench.sh [BUILD_DIR]   (default build/release; N from DEMANDS)
set -euo pipefail
build=${1:-build/release}
demands=${DEMANDS:-1000000}
seed=${SEED:-1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

seconds() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

t0=$(seconds)
"$build/sim/demandflight" gen open_world_streaming --seed "$seed" --demands "$demands" > "$work/trace.jsonl"
t1=$(seconds)
"$build/sim/demandflight" sim "$work/trace.jsonl" --out "$work/result.json" \
  --transfer-log "$work/transfers.log" > "$work/summary.txt"
t2=$(seconds)
"$build/bench/sim_bare_replay" "$work/trace.jsonl" "$work/transfers.log" > "$work/bare.txt"
t3=$(seconds)

gen_s=$(elapsed "$t0" "$t1")
sim_s=$(elapsed "$t1" "$t2")
bare_s=$(elapsed "$t2" "$t3")
transfers=$(wc -l < "$work/transfers.log")
echo "trace: open_world_streaming, $demands demands, seed $seed ($(du -h "$work/trace.jsonl" | cut -f1))"
sed 's/^/  /' "$work/summary.txt"
echo "bare replay: $(cat "$work/bare.txt")"
echo
echo "| step | wall s |"
echo "|---|---|"
echo "| gen $demands demands | $gen_s |"
echo "| demandflight sim, end to end | $sim_s |"
echo "| bare SimGrid replay of the same $transfers transfers | $bare_s |"
awk -v s="$sim_s" -v b="$bare_s" 'BEGIN { printf "\nsimulator / bare replay: %.2fx (limit 1.5x); end to end %.1f s (limit 60 s)\n", s / b, s }'
