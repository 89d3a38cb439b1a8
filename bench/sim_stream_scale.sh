#!/usr/bin/env bash
# Memory and wall time of `demandflight sim --stream` as the trace grows: a
# generated trace (open_world_streaming) and an imported CSV request log
# (bench/request_log.py, imported with the demand model: sessions and
# abandonment), each at every size in SIZES, simulated end to end (read,
# simulate, the result JSON written to /dev/null and the demand rows to a
# gzip CSV). Peak RSS is the whole process's (/usr/bin/time). For a ratio in
# the same run, the in-memory `sim` runs the sizes up to INMEM_MAX too.
# Usage: bench/sim_stream_scale.sh [BUILD_DIR]   (default build/release)
#   SIZES="1000000 10000000 100000000"  WORK=/var/tmp/dfl-scale  INMEM_MAX=10000000
#   KINDS="gen csv"
# Disk: about 190 bytes per request for each trace, 30 for each CSV log.
set -euo pipefail
build=${1:-build/release}
sizes=${SIZES:-"1000000 10000000 100000000"}
inmem_max=${INMEM_MAX:-10000000}
kinds=${KINDS:-"gen csv"}
work=${WORK:-/var/tmp/dfl-scale}
here=$(cd "$(dirname "$0")" && pwd)
bin="$build/cli/demandflight"
mkdir -p "$work"
trap 'rm -f "$work"/trace.jsonl "$work"/log.csv "$work"/demands.csv.gz' EXIT

measure() {  # LABEL CMD... -> "seconds peak_MB" of the command
  /usr/bin/time -f "%e %M" -o "$work/time" "$@" > /dev/null
  awk '{ printf "%.1f %.0f\n", $1, $2 / 1024 }' "$work/time"
}

echo "| input | requests | trace lines | prepare, s | prepare peak, MB | sim --stream, s | peak, MB | in memory, s | peak, MB |"
echo "|---|---|---|---|---|---|---|---|---|"
for kind in $kinds; do
  for n in $sizes; do
    if [ "$kind" = gen ]; then
      read -r prep_s prep_mb < <(measure sh -c "'$bin' gen open_world_streaming --seed 5 --demands $n > '$work/trace.jsonl'")
    else
      /usr/bin/python3 "$here/request_log.py" "$n" "$work/log.csv" --seed 5
      read -r prep_s prep_mb < <(measure sh -c "'$bin' import csv '$work/log.csv' --time t --key object --size bytes --owner client --sessions 60 --abandon p=0.1,dist=exponential,mean_s=3 > '$work/trace.jsonl'")
      rm -f "$work/log.csv"
    fi
    lines=$(wc -l < "$work/trace.jsonl")
    read -r sim_s sim_mb < <(measure "$bin" sim "$work/trace.jsonl" --stream --quiet --out /dev/null \
      --demands-csv "$work/demands.csv.gz")
    mem_s=-; mem_mb=-
    if [ "$n" -le "$inmem_max" ]; then
      read -r mem_s mem_mb < <(measure "$bin" sim "$work/trace.jsonl" --quiet --out /dev/null)
    fi
    echo "| $kind | $n | $lines | $prep_s | $prep_mb | $sim_s | $sim_mb | $mem_s | $mem_mb |"
  done
done
