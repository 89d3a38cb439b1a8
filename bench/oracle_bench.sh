#!/usr/bin/env bash
# The hindsight oracle's cost (sim/oracle.h) against the runs it bounds, on
# generated session_churn traces of DEMANDS demands (default "2000 20000
# 200000"), on this machine, in one run:
#   plain:   one always-abort run (`sim`), wall time;
#   others:  every policy `compare` runs by default, each its own `sim`, JOBS
#            at a time (default 2, as compare on two cores): wall time;
#   oracle:  the oracle's own run (`sim --policy oracle`): wall time, and its
#            report (decisions, runs to the end, probes);
#   compare: `compare TRACE` (the same policies and the oracle), wall time.
# Ratios: oracle / plain, and compare / others (what the oracle adds to a
# comparison).
# Usage: bench/oracle_bench.sh [BUILD_DIR]   (default build/release)
set -euo pipefail
build=${1:-build/release}
dfl="$build/cli/demandflight"
jobs=${JOBS:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

seconds() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(seconds)" 'BEGIN { printf "%.2f", b - a }'; }

# compare's default policies, as its long table names them.
"$dfl" compare gen:session_churn:demands=50 --runs-csv "$work/runs.csv" > /dev/null 2>&1
policies=$(/usr/bin/python3 -c "
import csv, sys
print(' '.join(sorted({r['policy'] for r in csv.DictReader(open(sys.argv[1]))} - {'oracle'})))
" "$work/runs.csv")

printf '%-8s %8s %8s %8s %8s %8s %8s %10s %8s %8s\n' demands plain_s others_s oracle_s \
  compare_s oracle/x cmp/oth decisions runs probes
for n in ${DEMANDS:-2000 20000 200000}; do
  "$dfl" gen session_churn --seed 1 --demands "$n" > "$work/trace.jsonl"
  t=$(seconds)
  "$dfl" sim "$work/trace.jsonl" --policy always-abort --out "$work/plain.json" --quiet
  plain=$(elapsed "$t")
  t=$(seconds)
  printf '%s\n' $policies |
    xargs -P "$jobs" -I{} "$dfl" sim "$work/trace.jsonl" --policy {} --out "$work/{}.json" --quiet
  others=$(elapsed "$t")
  t=$(seconds)
  "$dfl" sim "$work/trace.jsonl" --policy oracle --out "$work/oracle.json" --quiet
  oracle=$(elapsed "$t")
  t=$(seconds)
  "$dfl" compare "$work/trace.jsonl" --jobs "$jobs" > /dev/null 2>&1
  compare=$(elapsed "$t")
  report=$(/usr/bin/python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))['policy_report']
print(r['decisions'], r['runs'], r['probes'])" "$work/oracle.json")
  read -r decisions runs probes <<< "$report"
  printf '%-8s %8s %8s %8s %8s %8.1f %8.1f %10s %8s %8s\n' "$n" "$plain" "$others" "$oracle" \
    "$compare" "$(awk -v a="$oracle" -v b="$plain" 'BEGIN { print a / b }')" \
    "$(awk -v a="$compare" -v b="$others" 'BEGIN { print a / b }')" "$decisions" "$runs" "$probes"
done
