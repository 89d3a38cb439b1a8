#!/usr/bin/env bash
# Simulator benchmark. Figures from one run on this machine:
#   1. `demandflight gen open_world_streaming --demands N` simulated end to end
#      (read the trace, simulate, write the result JSON): wall time;
#   2. the simulator's overhead over a bare SimGrid replay: the simulate phase
#      of `demandflight sim --profile` (engine + runtime + SimGrid, after the
#      trace is read, before the result is written) against `sim_bare_replay`
#      running the same transfers (every comm the simulator started, with its
#      size, start time and origin, cancelled when the simulator cancelled it,
#      hence the same concurrency) on the same platform, with no engine.
# Each comparison runs back to back, REPEAT times (default 3); medians, the
# ratio of the minimums, and the median of each pair's ratio (a simulator run
# and the bare replay right after it see about the same machine).
# Usage: bench/sim_bench.sh [BUILD_DIR]   (default build/release; N from DEMANDS;
# MODEL=calibrated|tcp|... simulates with that network model instead of the trace's, tcp)
set -euo pipefail
build=${1:-build/release}
model=()
if [[ -n "${MODEL:-}" ]]; then model=(--network-model "$MODEL"); fi
demands=${DEMANDS:-1000000}
seed=${SEED:-1}
repeat=${REPEAT:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

seconds() { date +%s.%N; }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

t0=$(seconds)
"$build/cli/demandflight" gen open_world_streaming --seed "$seed" --demands "$demands" > "$work/trace.jsonl"
gen_s=$(awk -v a="$t0" -v b="$(seconds)" 'BEGIN { printf "%.2f", b - a }')

# The transfer log (comms started and cancelled) feeds the bare replay; writing
# it costs the simulator time, so a run of its own writes it.
"$build/cli/demandflight" sim "$work/trace.jsonl" "${model[@]}" --quiet --transfer-log "$work/transfers.log"

: > "$work/e2e"; : > "$work/sim"; : > "$work/bare"
for _ in $(seq "$repeat"); do
  t1=$(seconds)
  "$build/cli/demandflight" sim "$work/trace.jsonl" "${model[@]}" --out "$work/result.json" --profile \
    > "$work/summary.txt" 2> "$work/profile.txt"
  awk -v a="$t1" -v b="$(seconds)" 'BEGIN { printf "%.3f\n", b - a }' >> "$work/e2e"
  sed -n 's/.*simulate \([0-9.]*\) s.*/\1/p' "$work/profile.txt" >> "$work/sim"
  "$build/bench/sim_bare_replay" "$work/trace.jsonl" "$work/transfers.log" > "$work/bare.txt"
  sed -n 's/.*replay wall \([0-9.]*\) s.*/\1/p' "$work/bare.txt" >> "$work/bare"
done
e2e=$(median < "$work/e2e"); sim=$(median < "$work/sim")
bare=$(median < "$work/bare")
# Minimums too: on a shared machine the noise only ever adds time.
sim_min=$(sort -n "$work/sim" | head -1); bare_min=$(sort -n "$work/bare" | head -1)
pair=$(paste -d' ' "$work/sim" "$work/bare" | awk '{ printf "%.4f\n", $1 / $2 }' | median)

echo "network model: ${MODEL:-as the trace says (tcp)}"
echo "trace: open_world_streaming, $demands demands, seed $seed ($(du -h "$work/trace.jsonl" | cut -f1)), generated in $gen_s s"
sed 's/^/  /' "$work/summary.txt"
echo "  last run's phases: $(cat "$work/profile.txt")"
echo "  bare replay: $(cat "$work/bare.txt")"
echo
echo "| measurement (median of $repeat) | wall s |"
echo "|---|---|"
echo "| demandflight sim, end to end (read + simulate + write) | $e2e |"
echo "| demandflight sim, simulate phase | $sim |"
echo "| bare SimGrid replay of the same transfers | $bare |"
awk -v e="$e2e" -v s="$sim" -v b="$bare" -v sm="$sim_min" -v bm="$bare_min" -v p="$pair" -v n="$repeat" 'BEGIN {
  printf "\nend to end: %.1f s (limit 60 s)\n", e
  printf "simulator / bare replay of the same transfers: %.2fx (limit 1.5x)\n", s / b
  printf "  the same from the fastest run of each: %.2fx (%.3f s / %.3f s)\n", sm / bm, sm, bm
  printf "  the median of the %d back-to-back pairs\047 ratios: %.2fx\n", n, p }'
