#!/usr/bin/env bash
# client_core_check against deliberately broken cores: each mutant is a copy
# of backend/src/client_core.cpp with one defect put in by sed, built with
# the check, and must be caught: the check exits 1 naming the violation.
# The unmutated copy, built the same way, must pass.
#
#   tests/backend/client_core_mutation_check.sh BUILD_DIR [WORK_DIR]
# (BUILD_DIR: a build of this tree, for the engine's and policies' libraries)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build_dir=$(cd "$1" && pwd)
work=${2:-$(mktemp -d)}
mkdir -p "$work"

# name @ sed expression on client_core.cpp @ text the check must print
mutants=(
  "contradicted-digest-succeeds@s/if (auto why = contradiction(demand.expect, facts->size, facts->sha256)) {/if (auto why = std::optional<std::string>()) {  \/\/ MUTANT/@succeeded on bytes its own expectation contradicts"
  "pin-released-twice@s/^    h = std::move(hold);/    if (hold) hold->release();  \/\/ MUTANT/@released twice"
  "owner-end-ignores-generation@s/if (!state || !generation || state->generation <= \*generation) {/if (!state || !generation || true) {  \/\/ MUTANT/@an owner's end released a pin it does not cover"
  "hit-hold-kept@s/^    if (demand.hit_hold) demand.hit_hold->release();  \/\/ Not taken by a pin./    \/\/ MUTANT/@dropped while held"
)

# The check, metrics.cpp and platform_meter.cpp do not change between mutants (the header is the
# original's): compiled once; each mutant compiles only its client_core.cpp.
flags=(-std=c++20 -O1 -I"$root/engine/include" -I"$root/policies/include" -I"$root/backend/include"
       -I"$root/format/include")
g++ "${flags[@]}" -c "$root/tests/backend/client_core_check.cpp" -o "$work/check.o"
g++ "${flags[@]}" -c "$root/backend/src/metrics.cpp" -o "$work/metrics.o"
g++ "${flags[@]}" -c "$root/backend/src/platform_meter.cpp" -o "$work/platform_meter.o"

build() {  # NAME SED: client_core.cpp (mutated by SED), linked with the check.
  local dir="$work/$1"
  rm -rf "$dir" && mkdir -p "$dir"
  cp "$root/backend/src/client_core.cpp" "$dir/"
  if [ -n "$2" ]; then
    sed -i "$2" "$dir/client_core.cpp"
    if cmp -s "$root/backend/src/client_core.cpp" "$dir/client_core.cpp"; then
      echo "mutation $1: the sed expression changed nothing (the code moved?)" >&2
      return 1
    fi
  fi
  # client_core.cpp includes "client_core.h" from its own directory: the original's.
  g++ "${flags[@]}" -I"$root/backend/src" -c "$dir/client_core.cpp" -o "$dir/client_core.o"
  g++ "$work/check.o" "$dir/client_core.o" "$work/metrics.o" "$work/platform_meter.o" \
    "$build_dir/policies/libdemandflight_policies.a" "$build_dir/engine/libdemandflight_engine.a" \
    -o "$dir/check"
}

failures=0
args=(--depth 5 --random 3000 --seed 1)
build original ""
if "$work/original/check" "${args[@]}" > "$work/original/out.txt"; then
  echo "original: passes ($(tail -1 "$work/original/out.txt"))"
else
  echo "original: FAILS the check"; cat "$work/original/out.txt"; failures=$((failures + 1))
fi
for mutant in "${mutants[@]}"; do
  IFS='@' read -r name expression expected <<< "$mutant"
  build "$name" "$expression"
  set +e
  "$work/$name/check" "${args[@]}" > "$work/$name/out.txt" 2>&1
  code=$?
  set -e
  if [ "$code" -eq 1 ] && grep -q "$expected" "$work/$name/out.txt"; then
    echo "mutant $name: caught: $(grep violated "$work/$name/out.txt" | head -1)"
  else
    echo "mutant $name: NOT caught (exit $code)"; cat "$work/$name/out.txt"
    failures=$((failures + 1))
  fi
done
exit "$failures"
