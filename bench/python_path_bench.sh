#!/usr/bin/env bash
# The README's Python path against the Release command line, on one imported
# workload: a CSV request log of REQUESTS rows (default 100,000; written by
# scripts/capture/cdn_log.py, then cut to REQUESTS), imported with a demand
# model and simulated, each way, REPEAT times back to back (default 3):
#   cli:    `demandflight import csv ... > t.jsonl` then `demandflight sim t.jsonl --out r.json`;
#   python: `dfl.Trace.import_("csv", ...)` then `dfl.simulate(trace)` with the
#           result's demands and tasks as DataFrames, in a fresh
#           `PYTHONPATH=BUILD/python /usr/bin/python3` (the import of the package
#           included), as the README says.
# Prints each pair's wall times and ratio (python / cli), and their median.
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
import demandflight as dfl
trace = dfl.Trace.import_("csv", sys.argv[1], time="timestamp", key="object", size="bytes",
                          owner="client", sessions=60, abandon="p=0.1,dist=exponential,mean_s=3")
result = dfl.simulate(trace)
print(len(result.demands), len(result.tasks), result.summary["outcomes"]["succeeded"])
PY

printf '%-6s %10s %10s %8s   (%s requests)\n' pair cli_s python_s ratio "$rows"
ratios=()
for i in $(seq "$repeat"); do
  t=$(seconds)
  "$dfl" import csv "$work/log.csv" "${options[@]}" > "$work/t.jsonl"
  "$dfl" sim "$work/t.jsonl" --out "$work/r.json" --quiet
  cli=$(elapsed "$t")
  t=$(seconds)
  PYTHONPATH="$build/python" /usr/bin/python3 "$work/path.py" "$work/log.csv" > "$work/py.out"
  python=$(elapsed "$t")
  ratio=$(awk -v a="$python" -v b="$cli" 'BEGIN { printf "%.2f", a / b }')
  ratios+=("$ratio")
  printf '%-6s %10s %10s %8s\n' "$i" "$cli" "$python" "$ratio"
done
printf 'median ratio python / cli: %s\n' "$(printf '%s\n' "${ratios[@]}" | sort -n |
  awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')"
