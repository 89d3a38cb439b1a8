# Entry points for people and CI. Every target first installs what is missing.
# make demo   the main job: the three-caller scenario under the three models
#             side by side, then every bundled scenario (SimGrid simulator);
#             the optimised build (build/release), the Python package included
# make demo-engine  the three-caller story step by step on the bare core
# make test   every test (Debug build with invariant checks)
# make bench  the engine, simulator, Python path and fetch benchmarks (Release build)
# make bench-fetch  only demandflight fetch against curl and aria2c on nginx
# make bench-scaling  the simulator from N to 10N demands per kind, model and policy
# make asan   the engine tests under AddressSanitizer + UBSan
# make tsan   the backend's tests (its threads) under ThreadSanitizer
# make fuzz   the libFuzzer targets (trace reader, engine sequences, importers), FUZZ_SECONDS each
# make soak   the backend fault soak for SOAK_SECONDS (default 300)
# make test-engine-only  the engine built and tested alone (C++ standard library only)
# make test-portable  the backend's tests in the portable build (POSIX fallbacks, no io_uring)
# make check-exhaustive  the core's exhaustive bounded check at its large scope, and
#             the mutants it must catch (docs/testing.md)
# make fidelity  bundled scenarios replayed twice over a shaped real network vs simulated (~50 min)

JOBS ?= 2
.PHONY: wheel deps demo demo-engine test test-engine-only test-portable bench bench-fetch bench-scaling asan tsan fuzz soak check-exhaustive fidelity format clean
FUZZ_SECONDS ?= 60
SOAK_SECONDS ?= 300
FIDELITY_TRACES ?= scenarios/three_callers.jsonl scenarios/flaky_network.jsonl scenarios/open_world_streaming.jsonl \
                   scenarios/session_churn.jsonl scenarios/cache_pressure.jsonl

deps:
	@bash scripts/install-deps

# The user's build: optimised (Release), with the Python package in
# build/release/python. The tests' build (make test) is build/default: Debug,
# with the engine's invariant check after every call.
demo: deps
	cmake --preset release >/dev/null
	cmake --build --preset release -j$(JOBS) --target demandflight dfl_python_core
	/usr/bin/python3 scripts/demo.py build/release/cli/demandflight scenarios

demo-engine: deps
	cmake --preset default >/dev/null
	cmake --build --preset default -j$(JOBS) --target three_callers_demo
	./build/default/engine/three_callers_demo

test: deps
	cmake --preset default >/dev/null
	cmake --build --preset default -j$(JOBS)
	ctest --preset default -j$(JOBS)

# The engine alone: no policies, simulator, backend or Python; the installed
# engine component consumed by a project of its own. The long searches ran in
# the full build already.
test-engine-only: deps
	cmake --preset engine-only >/dev/null
	cmake --build --preset engine-only -j$(JOBS)
	ctest --preset engine-only -j$(JOBS) -E "engine_model_based|engine_exhaustive_check|engine_mutation_check"

# The portable build (DFL_PORTABLE: backend/src/platform.h's POSIX fallbacks,
# no io_uring), optimised, with the backend's tests.
test-portable: deps
	cmake --preset portable >/dev/null
	cmake --build --preset portable -j$(JOBS) --target backend_tests install_crash_helper \
	  client_core_tests client_core_check c_api_test
	ctest --preset portable -j$(JOBS) -L backend

bench:
	@bash scripts/install-deps --bench
	cmake --preset release >/dev/null
	cmake --build --preset release -j$(JOBS) --target engine_bench demandflight sim_bare_replay
	./build/release/bench/engine_bench --benchmark_min_time=0.05 \
	  --benchmark_out=build/release/engine_bench.json --benchmark_out_format=json $(BENCH_ARGS)
	/usr/bin/python3 bench/ratios.py build/release/engine_bench.json
	bash bench/sim_bench.sh build/release
	cmake --build --preset release -j$(JOBS) --target dfl_python_core
	bash bench/python_path_bench.sh build/release
	/usr/bin/python3 bench/fetch_bench.py build/release/cli/demandflight --drop-caches

# Only the fetch benchmark (nginx on loopback; demandflight fetch, curl, aria2c).
bench-fetch:
	@bash scripts/install-deps --bench
	cmake --preset release >/dev/null
	cmake --build --preset release -j$(JOBS) --target demandflight delay_line
	/usr/bin/python3 bench/fetch_bench.py build/release/cli/demandflight --drop-caches $(BENCH_ARGS)

# The simulator's growth from N to 10N demands (a quadratic path shows as ~100x).
bench-scaling: deps
	cmake --preset release >/dev/null
	cmake --build --preset release -j$(JOBS) --target demandflight delay_line
	bash bench/sim_scaling.sh build/release

asan: deps
	cmake --preset asan >/dev/null
	cmake --build --preset asan -j$(JOBS)
	ctest --preset asan -j$(JOBS) -L "engine|format|sim|backend|cli"

tsan: deps
	cmake --preset tsan >/dev/null
	cmake --build --preset tsan -j$(JOBS) --target backend_tests install_crash_helper \
	  client_core_tests client_core_check c_api_test
	ctest --preset tsan -j$(JOBS) -L backend -E backend_loopback_server

fuzz: deps
	cmake --preset fuzz >/dev/null
	cmake --build build/fuzz -j$(JOBS) --target trace_fuzz engine_fuzz import_fuzz
	/usr/bin/python3 tests/fuzz/run.py build/fuzz $(FUZZ_SECONDS)

soak: deps
	cmake --preset default >/dev/null
	cmake --build --preset default -j$(JOBS) --target backend_tests
	DFL_SOAK_SECONDS=$(SOAK_SECONDS) ./build/default/tests/backend/backend_tests --gtest_filter='BackendSoak.*'

EXHAUSTIVE_DEPTH ?= 10
check-exhaustive: deps
	cmake --preset default >/dev/null
	cmake --build --preset default -j$(JOBS) --target engine_exhaustive_check
	./build/default/tests/engine/engine_exhaustive_check --scope small --depth 20
	./build/default/tests/engine/engine_exhaustive_check --scope large --depth $(EXHAUSTIVE_DEPTH)
	bash tests/engine/mutation_check.sh build/default/tests/engine/mutants --depth 10

fidelity: deps
	cmake --preset release >/dev/null
	# dfl_python_core: the verdict (fidelity.py --policies) scores with the Python package.
	cmake --build --preset release -j$(JOBS) --target demandflight delay_line dfl_python_core
	/usr/bin/python3 bench/fidelity.py build/release/cli/demandflight $(FIDELITY_TRACES) \
	  --models tcp,calibrated,rerun --repeats 2 --markdown build/release/fidelity.md

# The Python package as a wheel (pyproject.toml: setuptools driving CMake in build/wheel).
wheel: deps
	/usr/bin/python3 -m pip wheel --no-build-isolation --no-deps -w build/dist .

format:
	git ls-files '*.h' '*.cpp' | xargs clang-format -i

clean:
	rm -rf build
