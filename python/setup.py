"""Builds the weft extension against a static libweft.

libweft.a comes from WEFT_BUILD_DIR when set (the Makefile passes build/release
or build/asan), else CMake builds it into python/build/libweft. The extension
links it statically, so the wheel needs nothing of weft at run time; OpenBLAS
(Debian's libopenblas) is linked dynamically, as libweft.so links it.
WEFT_PY_SANITIZE=address builds the extension itself with ASan+UBSan.
"""
import os
import shlex
import subprocess
from pathlib import Path

from setuptools import Extension, setup

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def weft_build_dir():
    given = os.environ.get("WEFT_BUILD_DIR")
    if given:
        return Path(given).resolve()
    build = HERE / "build" / "libweft"
    if not (build / "libweft.a").exists():
        subprocess.check_call(
            ["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
             "-DWEFT_BUILD_TESTS=OFF", "-DWEFT_BUILD_BENCH=OFF", "-DWEFT_BUILD_EXAMPLES=OFF"])
        subprocess.check_call(["cmake", "--build", str(build), "--target", "weft", "-j",
                               str(os.cpu_count() or 2)])
    return build


def blas_link_args():
    try:
        out = subprocess.check_output(["pkg-config", "--libs", "openblas"], text=True)
        return shlex.split(out)
    except (OSError, subprocess.CalledProcessError):
        return ["-lopenblas"]


build = weft_build_dir()
sanitize = os.environ.get("WEFT_PY_SANITIZE", "")
compile_args = ["-std=c11", "-Wall", "-Wextra", "-Wno-missing-field-initializers",
                "-Wno-cast-function-type", "-fno-strict-aliasing"]
link_args = []
if sanitize == "address":
    compile_args += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-O1", "-g"]
    link_args += ["-fsanitize=address,undefined"]

sources = sorted(str(p.relative_to(HERE)) for p in (HERE / "src").glob("*.c"))
extension = Extension(
    "weft._core",
    sources=sources,
    include_dirs=[str(ROOT / "include"), str(HERE / "src")],
    extra_objects=[str(build / "libweft.a")],
    extra_compile_args=compile_args,
    extra_link_args=link_args + blas_link_args() + ["-lz", "-lpthread", "-lm"],
    # libweft.a among the dependencies: a rebuilt library relinks the extension.
    depends=[str(build / "libweft.a"), str(ROOT / "include" / "weft.h")] + sorted(str(p) for p in (HERE / "src").glob("*.h")),
)
# Each build of libweft (release, asan) gets its own object directory.
build_base = os.environ.get("WEFT_PY_BUILD_BASE", "build")
setup(ext_modules=[extension], options={"build": {"build_base": build_base}})
