#!/usr/bin/env bash
# Are two builds' simulator results byte-identical? A refactor of the engine,
# the simulator or the trace format must not change one byte of what
# `demandflight sim` writes. This runs both CLIs on
#   - every bundled scenario (scenarios/*.jsonl) under the three models and
#     every built-in orphan policy (learned with a model trained by REF),
#     comparing the result JSON and the printed summary;
#   - a generated open_world_streaming trace of DEMANDS demands (default one
#     million; both builds generate it, and the traces must match too) under
#     the three models with always-abort and keep-partial, and its timeline
#     and transfer log under the default model (the two traces must hold the
#     same records, read as JSON: a number may be spelled differently).
# Usage: bench/sim_identical.sh REF_CLI NEW_CLI   (each a demandflight binary)
# Prints one line per comparison and "identical: N of N"; exits 1 on any
# difference (and keeps both outputs in a directory it names).
set -euo pipefail
ref=$1
new=$2
demands=${DEMANDS:-1000000}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
same=0
total=0
differ=0

compare() {  # NAME ARGS...: runs `sim ARGS` with both and compares the outputs.
  local name=$1
  shift
  local r="$work/ref" n="$work/new"
  mkdir -p "$r" "$n"
  "$ref" sim "$@" --out "$r/result.json" > "$r/summary.txt" 2>&1 || echo "exit $?" >> "$r/summary.txt"
  "$new" sim "$@" --out "$n/result.json" > "$n/summary.txt" 2>&1 || echo "exit $?" >> "$n/summary.txt"
  total=$((total + 1))
  if cmp -s "$r/result.json" "$n/result.json" && cmp -s "$r/summary.txt" "$n/summary.txt"; then
    same=$((same + 1))
    echo "same   $name ($(sha256sum < "$n/result.json" | cut -c1-12))"
  else
    differ=1
    mkdir -p "$work/differ/$name"
    cp -r "$r" "$n" "$work/differ/$name/"
    echo "DIFFER $name"
  fi
}

"$ref" train "$here"/scenarios/*.jsonl --out "$work/model.json" > /dev/null
policies=(always-abort always-complete squid low-priority keep-partial expected-value
          "learned:model=$work/model.json" oracle)
for trace in "$here"/scenarios/*.jsonl; do
  for model in demand callbacks independent; do
    for policy in "${policies[@]}"; do
      compare "$(basename "$trace" .jsonl)/$model/${policy%%:*}" "$trace" --model "$model" \
        --policy "$policy"
    done
  done
done

"$ref" gen open_world_streaming --seed 1 --demands "$demands" > "$work/big-ref.jsonl"
"$new" gen open_world_streaming --seed 1 --demands "$demands" > "$work/big.jsonl"
total=$((total + 1))
# The same records: the same lines once read as JSON (a number's spelling,
# 1.500000 or 1.5, may differ between writers; its value may not).
same_records() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import itertools, json, sys
with open(sys.argv[1]) as a, open(sys.argv[2]) as b:
    for x, y in itertools.zip_longest(a, b):
        if x is None or y is None or json.loads(x) != json.loads(y):
            sys.exit(1)
PY
}
if cmp -s "$work/big-ref.jsonl" "$work/big.jsonl" ||
   same_records "$work/big-ref.jsonl" "$work/big.jsonl"; then
  same=$((same + 1))
  echo "same   gen open_world_streaming --demands $demands (records)"
else
  differ=1
  echo "DIFFER gen open_world_streaming --demands $demands"
fi
rm -f "$work/big-ref.jsonl"
for model in demand callbacks independent; do
  for policy in always-abort keep-partial; do
    compare "generated-$demands/$model/$policy" "$work/big.jsonl" --model "$model" --policy "$policy"
  done
done
for side in ref new; do
  cli=$ref
  [ "$side" = new ] && cli=$new
  "$cli" sim "$work/big.jsonl" --quiet --timeline "$work/timeline-$side.json" \
    --transfer-log "$work/transfers-$side.log"
done
total=$((total + 1))
if cmp -s "$work/timeline-ref.json" "$work/timeline-new.json" &&
   cmp -s "$work/transfers-ref.log" "$work/transfers-new.log"; then
  same=$((same + 1))
  echo "same   generated-$demands timeline and transfer log"
else
  differ=1
  echo "DIFFER generated-$demands timeline and transfer log"
fi

echo "identical: $same of $total"
if [ "$differ" = 1 ]; then
  echo "outputs kept in $work/differ"
  exit 1
fi
rm -rf "$work"
