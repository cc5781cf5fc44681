#!/usr/bin/env bash
# Usage: scripts/coverage.sh BUILD_DIR   (`make coverage`; docs/FAULTS.md)
#
# Builds weft and its C tests with gcov instrumentation (GCC --coverage, -O0;
# WEFT_COVERAGE shrinks heavy test cases as the sanitizers do, tests/harness.h)
# in BUILD_DIR, runs the tests (tests/run_tests.sh, a failing test does not
# stop the report), then prints line and branch coverage of src/ per folder
# and the public functions (weft.h, weft_nn.h) with error returns that no
# test reached, and, on a CPU without AVX-512, the figures without the code
# only AVX-512 runs (scripts/coverage_report.py). gcovr comes from Debian
# (scripts/install-deps.sh --coverage).
set -u
build=${1:-build/coverage}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
scripts/install-deps.sh --coverage || exit 1
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DWEFT_SANITIZE= -DWEFT_BUILD_BENCH=OFF \
    -DCMAKE_C_FLAGS="--coverage -O0 -DWEFT_COVERAGE=1" -DCMAKE_EXE_LINKER_FLAGS=--coverage \
    -DCMAKE_SHARED_LINKER_FLAGS=--coverage ${CMAKE_ARGS:-} >/dev/null || exit 1
env -u MAKEFLAGS cmake --build "$build" -j "${JOBS:-2}" || exit 1
find "$build" -name '*.gcda' -delete
WEFT_TEST_TIMEOUT=${WEFT_TEST_TIMEOUT:-900} tests/run_tests.sh "$build" coverage | tail -n 5
gcovr --root . --filter 'src/' --gcov-ignore-parse-errors --object-directory "$build" --json "$build/coverage.json" \
    >/dev/null 2>"$build/gcovr.log" || { cat "$build/gcovr.log"; exit 1; }
# gcov's own JSON for the library's objects: it names each line's function,
# which tells ISA variants apart (the report's "runnable here" figures).
find "$build/CMakeFiles/weft_objects.dir/src" -name '*.gcda' | while read -r gcda; do
    gcov --json-format --branch-probabilities --stdout -o "$(dirname "$gcda")" "$gcda" 2>/dev/null
done >"$build/gcov-functions.jsonl"
python3 scripts/coverage_report.py "$build/coverage.json" include/weft.h include/weft_nn.h \
    --functions "$build/gcov-functions.jsonl"
