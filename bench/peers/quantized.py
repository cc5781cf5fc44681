"""MLX's CPU quantized_matmul on bench_quantized's shapes (affine, group 64),
printed in the same form as build/release/bench_quantized so the two sit side
by side: matrix-vector products over a rotation set of weight matrices (GB/s
of codes + scales + biases), and batch 32 / 512 GFLOP/s beside MLX's float32
matmul. Random codes and scales, as bench_quantized.

    python bench/peers/quantized.py [rotation_MiB = 4x the LLC]
"""
import os
import sys
import time

import numpy as np
import mlx.core as mx

GROUP = 64
REPEATS = 3


def llc_bytes():
    """The kernel's figure first, as bench_quantized (sysconf reads CPUID,
    which under a hypervisor can report the host's cache)."""
    try:
        with open("/sys/devices/system/cpu/cpu0/cache/index3/size") as f:
            text = f.read().strip()
        if text.endswith("K") and int(text[:-1]) > 0:
            return int(text[:-1]) * 1024
    except (OSError, ValueError):
        pass
    try:
        return os.sysconf("SC_LEVEL3_CACHE_SIZE") or 32 << 20
    except (ValueError, OSError):
        return 32 << 20


def random_weight(rng, out, inner, bits):
    codes = mx.array(rng.integers(0, 2**32, size=(out, inner * bits // 32), dtype=np.uint32))
    s = rng.integers(0, 100, size=(out, inner // GROUP)).astype(np.float32) * 1e-4 + 0.01
    return codes, mx.array(s), mx.array(-s * (1 << bits) / 2)


SHAPES = ((4096, 4096), (14336, 4096), (4096, 14336))


def matvec_figure(rng, bits, out, inner, rotation):
    """MLX's best GB/s (codes + scales + biases) over a rotation set of at
    least `rotation` bytes of out x inner weights, and the set's size."""
    one = out * inner * bits // 8 + out * inner // GROUP * 8
    count = max(2, -(-rotation // one))
    ws = [random_weight(rng, out, inner, bits) for _ in range(count)]
    mx.eval(ws)
    x = mx.array(rng.standard_normal((1, inner)).astype(np.float32))
    best = 0.0
    for _ in range(REPEATS):
        total = 0.0
        for w in ws:
            t0 = time.perf_counter()
            mx.eval(mx.quantized_matmul(x, *w, transpose=True, group_size=GROUP, bits=bits))
            total += time.perf_counter() - t0
        best = max(best, one * count / total / 1e9)
    return best, one, count


def main():
    mx.set_default_device(mx.cpu)
    rotation = int(sys.argv[1]) << 20 if len(sys.argv) > 1 else 4 * llc_bytes()
    print(f"# mlx {mx.__version__} CPU, rotation set {rotation >> 20} MiB, group {GROUP}")
    print("# load average:", " ".join(open("/proc/loadavg").read().split()[:3]))
    rng = np.random.default_rng(0)
    for bits in (4, 8):
        for out, inner in SHAPES:
            best, one, count = matvec_figure(rng, bits, out, inner, rotation)
            print(f"matvec {bits:2d}-bit {out:5d} x {inner:5d}  ({count:3d} matrices, "
                  f"{one * count / 1048576:6.0f} MiB)  {best:7.2f} GB/s  {one / best / 1e3:8.1f} us/product")
    for bits in (4, 8):
        for rows in (32, 512):
            w = random_weight(rng, 4096, 4096, bits)
            wd = mx.dequantize(*w, group_size=GROUP, bits=bits)
            x = mx.array(rng.standard_normal((rows, 4096)).astype(np.float32))
            mx.eval(w, wd, x)
            tq = tf = 1e30
            for _ in range(REPEATS):
                t0 = time.perf_counter()
                mx.eval(mx.quantized_matmul(x, *w, transpose=True, group_size=GROUP, bits=bits))
                tq = min(tq, time.perf_counter() - t0)
                t0 = time.perf_counter()
                mx.eval(x @ wd.T)
                tf = min(tf, time.perf_counter() - t0)
            flop = 2.0 * rows * 4096 * 4096
            print(f"batch {rows:3d} {bits}-bit 4096 x 4096  quantized {flop / tq / 1e9:7.1f} GFLOP/s   "
                  f"float32 matmul {flop / tf / 1e9:7.1f} GFLOP/s")
    print("# load average:", " ".join(open("/proc/loadavg").read().split()[:3]))


if __name__ == "__main__":
    main()
