#!/usr/bin/env bash
# Fails when a file in src/ calls malloc, calloc, realloc, strdup, strndup,
# aligned_alloc, posix_memalign, pthread_create or mmap directly instead of
# the wrappers of src/util/fault.h (wf__malloc, ..., wf__thread_create,
# wf__mmap), which fault injection needs every fallible call to go through
# (docs/FAULTS.md). Comment lines are skipped. Usage: scripts/check-fallible.sh [SRC_DIR]
set -u
src=${1:-$(dirname "$0")/../src}
hits=$(grep -rnP '(?<![\w.>])(malloc|calloc|realloc|strn?dup|aligned_alloc|posix_memalign|pthread_create|mmap)\s*\(' \
    --include='*.c' --include='*.h' --include='*.inc' "$src" |
    grep -v '/util/fault\.c:' | grep -vP '^[^:]+:\d+:\s*(\*|/\*|//)')
if [ -n "$hits" ]; then
    echo "direct fallible calls (use the wf__ wrappers of src/util/fault.h):"
    echo "$hits"
    exit 1
fi
echo "fallible calls: every one goes through src/util/fault.h"
