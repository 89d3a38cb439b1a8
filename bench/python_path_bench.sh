#!/usr/bin/env bash
# The README's Python path against the Release command line, on one imported
# workload: a CSV request log of REQUESTS rows (default 100,000; written by
# scripts/capture/cdn_log.py, then cut to REQUESTS), imported with a demand
# model and simulated, each way, REPEAT times back to back (default 3):
#   cli:    `demandflight import csv ... > t.jsonl` then `demandflight sim t.jsonl --out r.json`;
#   cold:   `dfl.Trace.import_("csv", ...)` then `dfl.simulate(trace)` with the
#           result's demands and tasks as DataFrames, in a fresh
#           `PYTHONPATH=BUILD/python /usr/bin/python3` (the interpreter's start and
#           exit and the imports of the package and of pandas included), as the
#           README's script runs;
#   warm:   the same two calls and DataFrames timed inside an interpreter that has
#           imported the package and pandas already, as a notebook's second cell
#           or a script's second workload runs them.
# Prints each pair's wall times and ratios (python / cli), and their medians.
# Usage: bench/python_path_bench.sh [BUILD_DIR]   (default build/release)
set -euo pipefail
build=${1:-build/release}
requests=${REQUESTS:-100000}
repeat=${REPEAT:-3}
dfl="$build/cli/demandflight"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
here=$(cd "$(dirname "$0")/.." && pwd)

seconds() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(seconds)" 'BEGIN { printf "%.3f", b - a }'; }

mkdir -p "$work/log"
/usr/bin/python3 "$here/scripts/capture/cdn_log.py" "$work/log" --clients 1400 --minutes 10 \
  --seed 1 > /dev/null
head -n $((requests + 1)) "$work/log/cdn_log.csv" > "$work/log.csv"
rows=$(($(wc -l < "$work/log.csv") - 1))
options=(--time timestamp --key object --size bytes --owner client --sessions 60
         --abandon p=0.1,dist=exponential,mean_s=3)

cat > "$work/path.py" <<PY
import sys
import time
warm = sys.argv[2] == "warm"
if warm:  # The imports first, untimed: an interpreter that has them already.
    import demandflight as dfl
    import pandas
    dfl.Trace, dfl.simulate
start = time.perf_counter()
import demandflight as dfl
trace = dfl.Trace.import_("csv", sys.argv[1], time="timestamp", key="object", size="bytes",
                          owner="client", sessions=60, abandon="p=0.1,dist=exponential,mean_s=3")
result = dfl.simulate(trace)
print(len(result.demands), len(result.tasks), result.summary["outcomes"]["succeeded"])
if warm:
    print(f"{time.perf_counter() - start:.3f}", file=sys.stderr)
PY

printf '%-6s %8s %8s %8s %10s %10s   (%s requests)\n' pair cli_s cold_s warm_s cold/cli \
  warm/cli "$rows"
cold_ratios=()
warm_ratios=()
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
for i in $(seq "$repeat"); do
  t=$(seconds)
  "$dfl" import csv "$work/log.csv" "${options[@]}" > "$work/t.jsonl"
  "$dfl" sim "$work/t.jsonl" --out "$work/r.json" --quiet
  cli=$(elapsed "$t")
  t=$(seconds)
  PYTHONPATH="$build/python" /usr/bin/python3 "$work/path.py" "$work/log.csv" cold > "$work/py.out"
  cold=$(elapsed "$t")
  warm=$(PYTHONPATH="$build/python" /usr/bin/python3 "$work/path.py" "$work/log.csv" warm \
         2>&1 > "$work/py-warm.out")
  cmp -s "$work/py.out" "$work/py-warm.out" || { echo "the two Python runs differ" >&2; exit 1; }
  cold_ratio=$(awk -v a="$cold" -v b="$cli" 'BEGIN { printf "%.2f", a / b }')
  warm_ratio=$(awk -v a="$warm" -v b="$cli" 'BEGIN { printf "%.2f", a / b }')
  cold_ratios+=("$cold_ratio")
  warm_ratios+=("$warm_ratio")
  printf '%-6s %8s %8s %8s %10s %10s\n' "$i" "$cli" "$cold" "$warm" "$cold_ratio" "$warm_ratio"
done
printf 'median ratio python / cli: cold %s, warm %s\n' "$(median "${cold_ratios[@]}")" \
  "$(median "${warm_ratios[@]}")"
