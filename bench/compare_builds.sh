#!/usr/bin/env bash
# Builds against each other, in one run: is a mechanism worth what it costs?
# Each CLI (a demandflight binary; NAME=PATH to label it) simulates the same
# generated open_world_streaming trace of DEMANDS demands (default one million),
# round robin, REPEAT times (default 7), so that every build sees about the
# same machine; then each runs `validate` on the three-caller trace STARTS
# times (default 100), round robin too: the start-up cost of a short command.
# Prints per build the medians of the end-to-end wall time and of the read,
# simulate and write phases (`sim --profile`), the fastest simulate phase (on a
# shared machine noise only adds time), and the start-up time, each also as a
# ratio to the first build's.
# Usage: bench/compare_builds.sh before=build-a/sim/demandflight after=build-b/sim/demandflight
set -euo pipefail
demands=${DEMANDS:-1000000}
repeat=${REPEAT:-7}
starts=${STARTS:-100}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

names=() clis=()
for arg in "$@"; do
  names+=("${arg%%=*}") clis+=("${arg#*=}")
done
seconds() { date +%s.%N; }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
run() { local i=$1; shift; "${clis[$i]}" "$@"; }

"${clis[0]}" gen open_world_streaming --seed 1 --demands "$demands" > "$work/trace.jsonl"
for _ in $(seq "$repeat"); do
  for i in "${!clis[@]}"; do
    t0=$(seconds)
    run "$i" sim "$work/trace.jsonl" --out "$work/result.json" --profile > /dev/null 2> "$work/profile"
    awk -v a="$t0" -v b="$(seconds)" 'BEGIN { printf "%.3f\n", b - a }' >> "$work/e2e.$i"
    sed -n 's/.*read \([0-9.]*\) s.*/\1/p' "$work/profile" >> "$work/read.$i"
    sed -n 's/.*simulate \([0-9.]*\) s.*/\1/p' "$work/profile" >> "$work/sim.$i"
    sed -n 's/.*write \([0-9.]*\) s.*/\1/p' "$work/profile" >> "$work/write.$i"
  done
done
small="$here/scenarios/three_callers.jsonl"
for _ in $(seq "$starts"); do
  for i in "${!clis[@]}"; do
    t0=$(seconds)
    run "$i" validate "$small" > /dev/null
    awk -v a="$t0" -v b="$(seconds)" 'BEGIN { printf "%.2f\n", (b - a) * 1000 }' >> "$work/start.$i"
  done
done

echo "open_world_streaming, $demands demands; medians of $repeat runs (s), start-up of $starts (ms);"
echo "in brackets the ratio to ${names[0]}"
echo
echo "| build | end to end | read | simulate | simulate, fastest | write | validate start-up ms |"
echo "|---|---|---|---|---|---|---|"
for i in "${!clis[@]}"; do
  row="| ${names[$i]}"
  for m in e2e read sim sim-min write start; do
    if [ "$m" = sim-min ]; then
      v=$(sort -n "$work/sim.$i" | head -1)
      b=$(sort -n "$work/sim.0" | head -1)
    else
      v=$(median < "$work/$m.$i")
      b=$(median < "$work/$m.0")
    fi
    row+=" | $v ($(awk -v v="$v" -v b="$b" 'BEGIN { printf "%.3f", v / b }'))"
  done
  echo "$row |"
done
