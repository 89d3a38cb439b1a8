#!/usr/bin/env bash
# The Python package builds from pyproject.toml (setuptools driving CMake,
# setup.py) as a wheel, installs into an empty directory, and runs from there:
# it imports, simulates a trace and compares two policies with the CLI it
# carries. The wheel is made from this build tree (DFL_CMAKE_BUILD_DIR), so
# that the test does not build the project a second time.
# Usage: tests/python/wheel_check.sh PYTHON SOURCE_DIR BUILD_DIR
set -euo pipefail
python=$1
source_dir=$2
build_dir=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

DFL_CMAKE_BUILD_DIR=$build_dir "$python" -m pip wheel --no-build-isolation --no-deps \
  --disable-pip-version-check -q -w "$work/dist" "$source_dir"
wheel=$(ls "$work"/dist/demandflight-*.whl)
echo "built $(basename "$wheel")"
PIP_ROOT_USER_ACTION=ignore "$python" -m pip install --no-deps --no-index \
  --disable-pip-version-check -q --target "$work/site" "$wheel"
cd "$work"  # Nowhere near the source or build tree.
env -u DEMANDFLIGHT_CLI PYTHONPATH="$work/site" "$python" - "$source_dir/scenarios/three_callers.jsonl" \
  "$work/site" <<'PY'
import sys
import demandflight as dfl

trace, site = sys.argv[1], sys.argv[2]
assert dfl.__file__.startswith(site), dfl.__file__
result = dfl.simulate(trace)
assert result.summary["outcomes"]["succeeded"] == 3, result.summary["outcomes"]
table = dfl.compare(trace, policies=["keep-partial"])
assert set(table["policy"]) == {"always-abort", "keep-partial", "oracle"}, table  # The baseline too.
print("installed wheel: imports, simulates, compares")
PY
