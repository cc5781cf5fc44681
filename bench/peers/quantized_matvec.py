"""One table: weft's quantized matrix-vector products (bench_quantized's
matvec lines, run with 1 and 2 threads) beside MLX's CPU quantized_matmul
on the same shapes and rotation set, as GB/s of codes + scales + biases
and as a share of the read bandwidth bench_quantized measures with the
same thread count. The int8 lines (4 and 8 bits) rerun bench_quantized
with WEFT_QMM_INT8=1: x rounded to int8 per 32 elements (vpdpbusd on CPUs
with AVX512_VNNI, vpmaddubsw + vpmaddwd on AVX2). MLX runs
with its own threading (it has no thread-count setting for the CPU).

    python bench/peers/quantized_matvec.py [rotation_MiB = 128] [build_dir = build/release]
"""
import os
import re
import subprocess
import sys

import numpy as np
import mlx.core as mx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from quantized import GROUP, SHAPES, matvec_figure  # noqa: E402

LINE = re.compile(r"matvec\s+(\d+)-bit\s+(\d+) x\s+(\d+).*?([\d.]+) GB/s\s+([\d.]+)% of")


def weft_figures(build_dir, rotation_mib, threads, int8=False):
    env = dict(os.environ, WEFT_NUM_THREADS=str(threads), WEFT_QMM_INT8="1" if int8 else "0")
    out = subprocess.run([os.path.join(build_dir, "bench_quantized"), str(rotation_mib), "matvec"],
                         env=env, check=True, capture_output=True, text=True).stdout
    bandwidth = float(re.search(r"read bandwidth .*: ([\d.]+) GB/s", out).group(1))
    figures = {}
    for m in LINE.finditer(out):
        figures[(int(m.group(1)), int(m.group(2)), int(m.group(3)))] = float(m.group(4))
    return bandwidth, figures


def main():
    rotation_mib = int(sys.argv[1]) if len(sys.argv) > 1 else 128
    build_dir = sys.argv[2] if len(sys.argv) > 2 else "build/release"
    mx.set_default_device(mx.cpu)
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    print(f"# quantized matvec, affine group {GROUP}, rotation {rotation_mib} MiB; "
          f"mlx {mx.__version__} CPU; load average {load} on {os.cpu_count()} CPUs")
    runs = {t: weft_figures(build_dir, rotation_mib, t) for t in (1, 2)}
    int8_runs = {t: weft_figures(build_dir, rotation_mib, t, int8=True) for t in (1, 2)}
    rng = np.random.default_rng(0)
    print(f"{'bits':>4} {'x':>5} {'out x in':>13} {'thr':>3} {'read GB/s':>9} {'weft GB/s':>9} "
          f"{'% of read':>9} {'mlx GB/s':>8} {'weft/mlx':>8}")
    for bits in (2, 4, 8):
        for out, inner in SHAPES:
            theirs = matvec_figure(rng, bits, out, inner, rotation_mib << 20)[0]
            for label, table in (("f32", runs), ("int8", int8_runs)):
                if label == "int8" and bits == 2:
                    continue
                for t, (bandwidth, figures) in table.items():
                    ours = figures[(bits, out, inner)]
                    print(f"{bits:4d} {label:>5} {out:6d} x {inner:5d} {t:3d} {bandwidth:9.2f} "
                          f"{ours:9.2f} {100 * ours / bandwidth:8.1f}% {theirs:8.2f} "
                          f"{ours / theirs:8.2f}")
    print("# load average at the end:", " ".join(open("/proc/loadavg").read().split()[:3]))


if __name__ == "__main__":
    main()
