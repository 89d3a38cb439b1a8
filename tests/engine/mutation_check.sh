#!/usr/bin/env bash
# The exhaustive check against deliberately broken engines: each mutant is a
# copy of engine/src with one defect put in by sed, built with the check
# (invariant checks off, so that the check's own reference is what must see
# the defect), and must be caught: the check exits 1 and names the
# violation. The unmutated copy, built the same way, must pass.
#
#   tests/engine/mutation_check.sh [WORK_DIR] [--depth N]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=""
depth=8
while [ $# -gt 0 ]; do
  case "$1" in
    --depth) depth=$2; shift 2 ;;
    *) work=$1; shift ;;
  esac
done
[ -n "$work" ] || work=$(mktemp -d)
mkdir -p "$work"

# name | file of engine/src | sed expression on it | text the check must print
mutants=(
  "priority-never-falls|scheduler_impl.h|s/if (rules_.priority_never_falls) return task.max_ever;/return task.max_ever;  \/\/ MUTANT/|runs at another priority than the max of its active demands"
  "handles-never-go-stale|scheduler_impl.h|s/^\(    \)++demand.generation;/\1\/\/ MUTANT: ++demand.generation;/|got a second terminal"
)

build() {  # NAME FILE SED: a copy of engine/src (FILE mutated by SED), built with the check.
  local dir="$work/$1"
  rm -rf "$dir" && mkdir -p "$dir"
  cp -r "$root/engine/src" "$dir/src"
  if [ -n "$3" ]; then
    sed -i "$3" "$dir/src/$2"
    if cmp -s "$root/engine/src/$2" "$dir/src/$2"; then
      echo "mutation $1: the sed expression changed nothing (the code moved?)" >&2
      return 1
    fi
  fi
  g++ -std=c++20 -O1 -I"$root/engine/include" -I"$dir/src" "$dir"/src/*.cpp \
    "$root/tests/engine/exhaustive_check.cpp" -o "$dir/check"
}

failures=0
build original "" ""
if "$work/original/check" --depth "$depth" > "$work/original/out.txt"; then
  echo "original: passes ($(tail -1 "$work/original/out.txt"))"
else
  echo "original: FAILS the check"; cat "$work/original/out.txt"; failures=$((failures + 1))
fi
for mutant in "${mutants[@]}"; do
  IFS='|' read -r name file expression expected <<< "$mutant"
  build "$name" "$file" "$expression"
  set +e
  "$work/$name/check" --depth "$depth" > "$work/$name/out.txt" 2>&1
  code=$?
  set -e
  if [ "$code" -eq 1 ] && grep -q "$expected" "$work/$name/out.txt"; then
    echo "mutant $name: caught: $(grep violated "$work/$name/out.txt")"
  else
    echo "mutant $name: NOT caught (exit $code)"; cat "$work/$name/out.txt"
    failures=$((failures + 1))
  fi
done
echo "$(( ${#mutants[@]} + 1 - failures )) passed, $failures failed"
[ "$failures" -eq 0 ]
