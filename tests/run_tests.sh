#!/usr/bin/env bash
# Usage: tests/run_tests.sh BUILD_DIR [LABEL]
#
# Runs every test_* and repro_* executable and every example in BUILD_DIR, each
# in its own process under `timeout` (WEFT_TEST_TIMEOUT seconds, default 300).
# A test's output goes to BUILD_DIR/test-logs/NAME.log and is printed only when
# the test fails. Exit codes: 0 pass; a repro_* exiting 2 means "scenario not
# reached" and is a failure too. The last line is "[LABEL: ]N passed, N failed";
# the script exits non-zero if anything failed or nothing ran. The counts are
# also written to BUILD_DIR/test-logs/summary as "PASSED FAILED".
set -u

if [ $# -lt 1 ] || [ ! -d "$1" ]; then
    echo "usage: $0 BUILD_DIR [LABEL]" >&2
    exit 2
fi
build_dir=$(cd "$1" && pwd)
label=${2:-}
prefix=${label:+$label: }
limit=${WEFT_TEST_TIMEOUT:-300}
log_dir="$build_dir/test-logs"
mkdir -p "$log_dir"
rm -f "$log_dir"/*.log "$log_dir/summary"

# Sanitizer settings; a user's own settings win.
export ASAN_OPTIONS=${ASAN_OPTIONS-detect_leaks=1:abort_on_error=1:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS-halt_on_error=1:second_deadlock_stack=1}

# Which sanitizer this build uses (from the CMake cache).
sanitize=$(sed -n 's/^WEFT_SANITIZE:[A-Z]*=//p' "$build_dir/CMakeCache.txt" 2>/dev/null)

# Sanitized binaries run with address-space randomization off. The sanitizer
# runtimes of GCC 12 (libtsan2/libasan8) assume the kernel's mmap base lies in
# the range ASLR used when they were written; kernels with vm.mmap_rnd_bits
# above 28 (the default on Ubuntu 23.10+ and some recent kernels) put it
# elsewhere, and TSan then dies at start with "FATAL: ThreadSanitizer: unexpected
# memory mapping" (ASan can loop on DEADLYSIGNAL). `setarch -R` turns ASLR off
# for that process only. Where personality(2) is not allowed, run unchanged.
runner=()
if [ -n "$sanitize" ] && setarch "$(uname -m)" -R true >/dev/null 2>&1; then
    runner=(setarch "$(uname -m)" -R)
fi

# The programs: from the lists CMake writes (so stale binaries of deleted
# sources are skipped), else every test_*/repro_* executable found.
programs=()
if [ -f "$build_dir/tests.list" ] || [ -f "$build_dir/examples.list" ]; then
    for list in tests.list examples.list; do
        [ -f "$build_dir/$list" ] || continue
        while IFS= read -r name; do
            [ -n "$name" ] && programs+=("$name")
        done <"$build_dir/$list"
    done
else
    for exe in "$build_dir"/test_* "$build_dir"/repro_*; do
        [ -f "$exe" ] && [ -x "$exe" ] && programs+=("$(basename "$exe")")
    done
fi

passed=0
failed=0
failures=()
print_log() { # the first 60 and last 140 lines of a long log
    local log=$1 n
    n=$(wc -l <"$log")
    if [ "$n" -le 200 ]; then
        sed 's/^/    | /' "$log"
    else
        head -n 60 "$log" | sed 's/^/    | /'
        echo "    | ... ($((n - 200)) lines skipped; full log: $log)"
        tail -n 140 "$log" | sed 's/^/    | /'
    fi
}

for name in "${programs[@]}"; do
    exe="$build_dir/$name"
    log="$log_dir/$name.log"
    if [ ! -x "$exe" ]; then
        echo "FAIL    $name (not built: $exe missing)"
        failed=$((failed + 1)); failures+=("$name")
        continue
    fi
    start=$(date +%s.%N)
    (cd "$build_dir" && exec timeout -k 10 "$limit" "${runner[@]}" "$exe") >"$log" 2>&1 </dev/null
    rc=$?
    secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
    if [ "$rc" -eq 0 ]; then
        echo "ok      $name (${secs}s)"
        passed=$((passed + 1))
        continue
    fi
    if [ "$rc" -eq 124 ] || { [ "$rc" -eq 137 ] && [ "${secs%.*}" -ge "$limit" ]; }; then
        why="TIMEOUT after ${limit}s"
    elif [ "$rc" -eq 2 ] && [[ "$name" == repro_* ]]; then
        why="scenario not reached (exit 2)"
    elif [ "$rc" -gt 128 ]; then
        why="killed by SIG$(kill -l $((rc - 128)) 2>/dev/null || echo $((rc - 128)))"
    else
        why="exit $rc"
    fi
    echo "FAIL    $name: $why (${secs}s, log: $log)"
    print_log "$log"
    failed=$((failed + 1)); failures+=("$name")
done

echo "$passed $failed" >"$log_dir/summary"
if [ "$failed" -gt 0 ]; then
    echo "${prefix}failed: ${failures[*]}"
fi
if [ $((passed + failed)) -eq 0 ]; then
    echo "${prefix}no tests found in $build_dir"
fi
echo "${prefix}${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ] && [ $((passed + failed)) -gt 0 ]
