#!/usr/bin/env bash
# Usage: scripts/check-install.sh RELEASE_BUILD_DIR
# Installs the release build into a temporary prefix and builds and runs
# examples/quickstart.c against it through pkg-config, with the shared and
# with the static library: what a user of `make install` does.
set -euo pipefail
build=$1
top=$(cd "$(dirname "$0")/.." && pwd)
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
pc_dir=$(dirname "$(find "$prefix" -name weft.pc | head -n 1)")
export PKG_CONFIG_PATH="$pc_dir"
cc -std=c11 "$top/examples/quickstart.c" $(pkg-config --cflags --libs weft) \
   -Wl,-rpath,"$(pkg-config --variable=libdir weft)" -o "$prefix/quickstart_shared"
cc -std=c11 "$top/examples/quickstart.c" $(pkg-config --cflags weft) \
   "$(pkg-config --variable=libdir weft)/libweft.a" $(pkg-config --libs --static weft | sed 's/-lweft//') \
   -o "$prefix/quickstart_static"
"$prefix/quickstart_shared" >/dev/null
"$prefix/quickstart_static" >/dev/null
echo "install check: header, libraries and pkg-config work from $prefix"
