# Convenience front end over CMake. Builds live in build/<config>:
#   release  -O2 -g, NDEBUG
#   asan     AddressSanitizer + UndefinedBehaviorSanitizer, -O1, lock-order checker
#   tsan     ThreadSanitizer, -O1, lock-order checker
#
#   make            release build
#   make test       build and test all three, then check `make install` through
#                   pkg-config (scripts/check-install.sh); final line "N passed, N failed"
#   make py-venv    $(BUILD)/py-venv (or $WEFT_PY_VENV): numpy, safetensors, pytest from PyPI
#                   for test_safetensors_python and the Python tests (test targets make it first)
#   make py-test    build the weft Python wheel against the release library, install it
#                   into the venv and run tests/python (make test also runs them under ASan)
#   make demo       build and run the demo (or the examples)
#   make distributed-example  data-parallel training with mpirun on 1, 2 and 4 processes
#                   (loss curves checked against one process), then its step-time bench
#   make distributed-example-python  the same with weft.nn, 2 and 4 processes
#   make distributed-large    collectives of more than 2 GiB per call on 2 ranks (~5 GB each)
#   make faults     every injection point of tests/unit/test_fault_injection.c (release and
#                   ASan; `make test` runs a sample) and scripts/check-fallible.sh
#   make fuzz       the libFuzzer targets of fuzz/ (clang, ASan+UBSan, build/fuzz), each for
#                   FUZZ_SECONDS (default 60), one at a time, niced; new corpus entries go to
#                   build/fuzz/corpus-<target>, crashes to build/fuzz/crashes (`make test`
#                   runs the same targets briefly with a plain mutator: fuzz/standalone.c)
#   make coverage   gcov build in build/coverage, runs the C tests, prints line and branch
#                   coverage of src/ per folder and public functions with unreached error
#                   returns (scripts/coverage.sh; gcovr from Debian; not part of `make test`)
#   make test-release | test-asan | test-tsan | bench | bench-programs | install | deps | clean
#
# CI=true (or any value but 0/false) adds -DWEFT_WERROR=ON.

SHELL := /bin/bash
.DEFAULT_GOAL := all

BUILD   ?= build
PREFIX  ?= /usr/local
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
CONFIGS := release asan tsan

WERROR := $(if $(filter-out 0 false FALSE no,$(CI)),ON,OFF)
CMAKE_ARGS ?=

cmake_flags_release := -DCMAKE_BUILD_TYPE=Release -DWEFT_SANITIZE=
cmake_flags_asan    := -DCMAKE_BUILD_TYPE=Debug -DWEFT_SANITIZE=address -DWEFT_BUILD_BENCH=OFF
cmake_flags_tsan    := -DCMAKE_BUILD_TYPE=Debug -DWEFT_SANITIZE=thread -DWEFT_BUILD_BENCH=OFF

# The make run by `cmake --build` must not inherit this make's flags/jobserver.
CMAKE_BUILD := env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL cmake --build

.PHONY: all deps py-venv py-test build-release build-asan build-tsan test test-release test-asan \
        test-tsan demo distributed-example distributed-example-python distributed-large bench bench-programs install clean faults fuzz \
        coverage

all: build-release

# Installs missing tools/packages (a no-op when everything is present).
deps:
	@scripts/install-deps.sh

$(addprefix build-,$(CONFIGS)): build-%: deps
	cmake -S . -B $(BUILD)/$* $(cmake_flags_$*) -DWEFT_WERROR=$(WERROR) $(CMAKE_ARGS) >/dev/null
	$(CMAKE_BUILD) $(BUILD)/$* -j $(JOBS)

# The Python environment test_safetensors_python needs. A failure (no network)
# does not stop the tests: that test then fails and says why.
WEFT_PY_VENV ?= $(abspath $(BUILD))/py-venv
export WEFT_PY_VENV
py-venv:
	@scripts/python-venv.sh $(WEFT_PY_VENV) || true

$(addprefix test-,$(CONFIGS)): test-%: build-% py-venv
	tests/run_tests.sh $(BUILD)/$* $*

py-test: build-release py-venv
	scripts/python-test.sh $(BUILD)/release release

# Runs every configuration even when one fails, then adds the counts up.
test: deps py-venv
	@passed=0; failed=0; \
	for c in $(CONFIGS); do \
	  rm -f $(BUILD)/$$c/test-logs/summary; \
	  echo "== $$c: build (started $$(date -u +%T))"; \
	  if $(MAKE) --no-print-directory build-$$c; then \
	    echo "== $$c: C tests (started $$(date -u +%T))"; \
	    tests/run_tests.sh $(BUILD)/$$c $$c; \
	  else \
	    echo "$$c: BUILD FAILED"; \
	  fi; \
	  if [ -f $(BUILD)/$$c/test-logs/summary ]; then \
	    read p f < $(BUILD)/$$c/test-logs/summary; \
	    passed=$$((passed + p)); failed=$$((failed + f)); \
	  else \
	    failed=$$((failed + 1)); \
	  fi; \
	  if [ $$c != tsan ]; then \
	    echo "== $$c: Python tests (started $$(date -u +%T))"; \
	    if scripts/python-test.sh $(BUILD)/$$c $$c; then \
	      echo "$$c: python tests passed"; passed=$$((passed + 1)); \
	    else \
	      echo "$$c: python tests FAILED"; failed=$$((failed + 1)); \
	    fi; \
	  fi; \
	done; \
	echo "== install check (started $$(date -u +%T))"; \
	if [ -f $(BUILD)/release/CMakeCache.txt ] && scripts/check-install.sh $(BUILD)/release; then \
	  passed=$$((passed + 1)); \
	else \
	  echo "install check: FAILED"; failed=$$((failed + 1)); \
	fi; \
	if scripts/check-fallible.sh >/dev/null; then \
	  passed=$$((passed + 1)); \
	else \
	  scripts/check-fallible.sh; failed=$$((failed + 1)); \
	fi; \
	echo "== done $$(date -u +%T)"; \
	echo "$$passed passed, $$failed failed"; \
	[ $$failed -eq 0 ] && [ $$passed -gt 0 ]

# The full fault-injection loop (docs/FAULTS.md): every N of every scenario.
faults: build-release build-asan
	scripts/check-fallible.sh
	WEFT_FAULTS_FULL=1 $(BUILD)/release/test_fault_injection
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 WEFT_FAULTS_FULL=1 WEFT_FAULTS_LEAK_EACH=1 \
	  setarch $$(uname -m) -R $(BUILD)/asan/test_fault_injection

# libFuzzer runs (docs/FAULTS.md). The seed corpus fuzz/corpus/<name> is read,
# never written: what the fuzzer learns goes to build/fuzz/corpus-<name>.
FUZZ_SECONDS ?= 60
FUZZ_CC ?= clang-14
fuzz:
	@scripts/install-deps.sh --fuzz
	cmake -S . -B $(BUILD)/fuzz -DCMAKE_C_COMPILER=$(FUZZ_CC) -DCMAKE_BUILD_TYPE=Debug \
	  -DWEFT_SANITIZE=fuzz $(CMAKE_ARGS) >/dev/null
	$(CMAKE_BUILD) $(BUILD)/fuzz -j $(JOBS)
	@mkdir -p $(BUILD)/fuzz/crashes; status=0; \
	for src in fuzz/fuzz_*.c; do \
	  name=$$(basename $$src .c); corpus=$${name#fuzz_}; \
	  mkdir -p $(BUILD)/fuzz/corpus-$$corpus; \
	  echo "== $$name ($(FUZZ_SECONDS) s)"; \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  nice -n 19 $(BUILD)/fuzz/$$name -max_total_time=$(FUZZ_SECONDS) -timeout=30 \
	    -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix=$(BUILD)/fuzz/crashes/$$name- \
	    $(BUILD)/fuzz/corpus-$$corpus fuzz/corpus/$$corpus 2>&1 | \
	    grep -E "^(stat::|==|INFO: Running|Done|#[0-9]+ +DONE)|ERROR|SUMMARY|crash-" ; \
	  [ $${PIPESTATUS[0]} -eq 0 ] || status=1; \
	done; exit $$status

coverage: deps
	JOBS=$(JOBS) CMAKE_ARGS="$(CMAKE_ARGS)" scripts/coverage.sh $(BUILD)/coverage

# The demo program if there is one, else every example. py-venv installs the
# pretrained model the demo's second part runs (it says so when it cannot).
demo: build-release py-venv
	@if [ -x $(BUILD)/release/demo ]; then \
	  $(BUILD)/release/demo; \
	else \
	  status=0; \
	  for e in $$(cat $(BUILD)/release/examples.list 2>/dev/null); do \
	    echo "== $$e"; $(BUILD)/release/$$e || status=1; \
	  done; \
	  exit $$status; \
	fi

# Data-parallel training over local processes (examples/distributed_train.c):
# each run checks its loss curve against one process; --bench times a step
# with the gradients' all_sum overlapped with the backward pass or after it.
MPIRUN := mpirun --allow-run-as-root --oversubscribe --bind-to none --mca mpi_yield_when_idle 1
distributed-example: build-release
	$(BUILD)/release/distributed_train
	$(MPIRUN) -np 2 $(BUILD)/release/distributed_train
	$(MPIRUN) -np 4 $(BUILD)/release/distributed_train
	$(MPIRUN) -np 2 $(BUILD)/release/distributed_train --bench
	$(MPIRUN) -np 4 $(BUILD)/release/distributed_train --bench

# The same with weft.nn (examples/distributed_train.py, scikit-learn's digits):
# the wheel is built and installed into the venv first; each run replays
# itself in one process and fails unless its losses have the same bits.
PY_WHEEL := $(abspath $(BUILD))/release/python-wheel
distributed-example-python: build-release py-venv
	rm -rf $(PY_WHEEL)
	WEFT_BUILD_DIR=$(abspath $(BUILD))/release WEFT_PY_BUILD_BASE=$(abspath $(BUILD))/release/python-build \
	  $(WEFT_PY_VENV)/bin/python -m pip wheel --quiet --no-deps --no-build-isolation -w $(PY_WHEEL) ./python
	$(WEFT_PY_VENV)/bin/python -m pip install --quiet --force-reinstall --no-deps $(PY_WHEEL)/weft-*.whl
	$(MPIRUN) -np 2 $(WEFT_PY_VENV)/bin/python examples/distributed_train.py
	$(MPIRUN) -np 4 $(WEFT_PY_VENV)/bin/python examples/distributed_train.py

# Collectives of more than 2 GiB (INT_MAX bytes) per call on 2 ranks: about
# 5 GB of memory per rank, a minute or more; not part of make test.
distributed-large: build-release
	/usr/bin/time -v $(BUILD)/release/test_distributed --over-2-gib

# The side-by-side suite of issue 14: builds, installs the peers (NumPy, JAX,
# MLX) into build/bench-venv, runs bench/run_all.py, which writes
# bench/results.md and bench/results.json.
bench: deps
	cmake -S . -B $(BUILD)/release $(cmake_flags_release) -DWEFT_BUILD_BENCH=ON \
	  -DWEFT_WERROR=$(WERROR) $(CMAKE_ARGS) >/dev/null
	$(CMAKE_BUILD) $(BUILD)/release -j $(JOBS)
	scripts/bench-setup.sh $(BUILD)/bench-venv
	python3 bench/run_all.py --build $(BUILD)/release --venv $(BUILD)/bench-venv

# Every program in bench/ on its own, printing its figures (no peers).
bench-programs: deps
	cmake -S . -B $(BUILD)/release $(cmake_flags_release) -DWEFT_BUILD_BENCH=ON \
	  -DWEFT_WERROR=$(WERROR) $(CMAKE_ARGS) >/dev/null
	$(CMAKE_BUILD) $(BUILD)/release -j $(JOBS)
	@status=0; \
	for b in $$(cat $(BUILD)/release/benches.list 2>/dev/null); do \
	  echo "== $$b"; $(BUILD)/release/$$b || status=1; \
	done; \
	exit $$status

install: build-release
	cmake --install $(BUILD)/release --prefix $(PREFIX)
	@# Refresh the loader cache so programs find libweft.so right away.
	@case "$(PREFIX)" in /usr|/usr/|/usr/local|/usr/local/) \
	  if [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then ldconfig; fi;; esac

clean:
	rm -rf $(BUILD)
