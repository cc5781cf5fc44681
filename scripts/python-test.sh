#!/usr/bin/env bash
# Usage: scripts/python-test.sh BUILD_DIR CONFIG [PYTEST_ARGS...]
#
# Builds the weft Python extension against BUILD_DIR/libweft.a and runs the
# pytest suite in tests/python with it.
#   release: builds a wheel (BUILD_DIR/python-wheel) and installs it into the
#            venv ($WEFT_PY_VENV, made by scripts/python-venv.sh), then runs
#            the tests there, as a user would.
#   asan:    builds the extension with ASan+UBSan into BUILD_DIR/python-site
#            and runs the tests with the sanitizer runtime preloaded (leak
#            checking of CPython itself is off: the suite checks instead that
#            weft's own counters - bytes, streams - return to their baseline).
# Exits 0 when every test passed.
set -euo pipefail

build_dir=$(cd "$1" && pwd)
config=$2
shift 2 # the rest goes to pytest (e.g. -k hadamard)
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${WEFT_PY_VENV:-$root/build/py-venv}
python="$venv/bin/python"
log_dir="$build_dir/test-logs"
mkdir -p "$log_dir"

if ! "$python" -c 'import pytest, numpy, setuptools' >/dev/null 2>&1; then
    echo "python-test: $venv lacks pytest/numpy/setuptools (run make py-venv)" >&2
    exit 1
fi

export WEFT_BUILD_DIR="$build_dir"
export WEFT_PY_BUILD_BASE="$build_dir/python-build"
cd "$root"
case "$config" in
release)
    rm -rf "$build_dir/python-wheel"
    "$python" -m pip wheel --quiet --no-deps --no-build-isolation -w "$build_dir/python-wheel" ./python \
        >"$log_dir/python-build.log" 2>&1 || { cat "$log_dir/python-build.log"; exit 1; }
    "$python" -m pip install --quiet --force-reinstall --no-deps "$build_dir"/python-wheel/weft-*.whl \
        >>"$log_dir/python-build.log" 2>&1 || { cat "$log_dir/python-build.log"; exit 1; }
    # Run from outside the source tree so the installed wheel is what is tested.
    cd "$build_dir"
    exec "$python" -m pytest -q -p no:cacheprovider "$root/tests/python" "$@"
    ;;
asan)
    export WEFT_PY_SANITIZE=address
    rm -rf "$build_dir/python-site"
    "$python" -m pip install --quiet --no-deps --no-build-isolation --target "$build_dir/python-site" ./python \
        >"$log_dir/python-build.log" 2>&1 || { cat "$log_dir/python-build.log"; exit 1; }
    runtime=$(gcc -print-file-name=libasan.so)
    ubsan=$(gcc -print-file-name=libubsan.so)
    cd "$build_dir"
    PYTHONPATH="$build_dir/python-site" LD_PRELOAD="$runtime $ubsan" \
        ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        WEFT_PY_SANITIZED=1 \
        setarch "$(uname -m)" -R "$python" -m pytest -q -p no:cacheprovider "$root/tests/python" "$@"
    ;;
*)
    echo "python-test: unknown config $config" >&2
    exit 2
    ;;
esac
