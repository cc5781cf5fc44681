#!/usr/bin/env bash
# Installs what building and testing weft needs, on Debian 12 (or Ubuntu):
# cmake, make, gcc, g++, pkg-config, OpenBLAS (pthread variant) and Open MPI
# (openmpi-bin, libopenmpi-dev: mpirun for the distributed tests and example;
# weft itself loads libmpi.so.40 at run time, never links it). Idempotent:
# does nothing (quietly) when everything is already there. Runs apt-get as
# root, through sudo when not root. Leaves every OPENBLAS_* setting alone.
set -euo pipefail

packages=(cmake make gcc g++ pkg-config libopenblas-pthread-dev zlib1g-dev openmpi-bin libopenmpi-dev)

missing=()
for tool in cmake make gcc g++ pkg-config; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
# OpenBLAS: its pkg-config file, or the library and cblas.h where Debian puts them.
if ! { command -v pkg-config >/dev/null 2>&1 && pkg-config --exists openblas; }; then
    arch=$(gcc -print-multiarch 2>/dev/null || true)
    if ! ls /usr/include/"${arch:-x86_64-linux-gnu}"/openblas*/cblas.h >/dev/null 2>&1 ||
       ! ls /usr/lib/"${arch:-x86_64-linux-gnu}"/libopenblas.so >/dev/null 2>&1; then
        missing+=("openblas")
    fi
fi
# Open MPI: mpirun and the library weft loads (libmpi.so.40).
if ! command -v mpirun >/dev/null 2>&1 ||
   ! ls /usr/lib/"$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)"/libmpi.so.40 \
        >/dev/null 2>&1; then
    missing+=("openmpi")
fi
# cmake must be 3.25 or newer.
[ -f /usr/include/zlib.h ] || missing+=("zlib")
if command -v cmake >/dev/null 2>&1; then
    read -r major minor < <(cmake --version |
        sed -n '1s/[^0-9]*\([0-9]*\)\.\([0-9]*\).*/\1 \2/p') || true
    if [ "${major:-0}" -lt 3 ] || { [ "${major:-0}" -eq 3 ] && [ "${minor:-0}" -lt 25 ]; }; then
        missing+=("cmake>=3.25")
    fi
fi

[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-deps: missing: ${missing[*]}"

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-deps: no apt-get here; install these yourself: ${packages[*]}" >&2
    exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
    as_root=()
elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
else
    echo "install-deps: not root and no sudo; as root run: apt-get install ${packages[*]}" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${packages[@]}"
echo "install-deps: done"
