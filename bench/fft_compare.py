"""weft.fft beside numpy.fft (and MLX's CPU backend when it imports), in one
run: batched complex64 fft and float32 rfft of lengths 1024, 4096, 65536
(and a Bluestein length), the median of several calls each.

    build/py-venv/bin/python bench/fft_compare.py

Needs the weft wheel installed in that venv (scripts/python-test.sh does).
"""
import statistics
import time

import numpy as np

import weft

try:
    import mlx.core as mlx

    mlx.set_default_device(mlx.cpu)
except ImportError:
    mlx = None

CASES = [(256, 1024), (64, 4096), (4, 65536), (64, 4099)]
REPEATS = 7


def median_ms(run):
    run()  # warm-up (plans, allocations)
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def timings(batch, n, real):
    rng = np.random.RandomState(0)
    x = rng.randn(batch, n).astype(np.float32)
    if not real:
        x = (x + 1j * rng.randn(batch, n)).astype(np.complex64)
    name = "rfft" if real else "fft"
    out = {}
    wx = weft.array(x)
    weft.eval(wx)
    out["weft"] = median_ms(lambda: weft.eval(getattr(weft.fft, name)(wx)))
    out["numpy"] = median_ms(lambda: getattr(np.fft, name)(x))
    if mlx is not None:
        mx_x = mlx.array(x)
        mlx.eval(mx_x)
        out["mlx"] = median_ms(lambda: mlx.eval(getattr(mlx.fft, name)(mx_x)))
    return out


def main():
    peers = ["numpy"] + (["mlx"] if mlx is not None else [])
    header = f"{'op':6} {'batch x n':>12} {'weft ms':>9}" + "".join(
        f" {p + ' ms':>9} {'weft/' + p:>10}" for p in peers)
    print(header)
    for real in (False, True):
        for batch, n in CASES:
            t = timings(batch, n, real)
            row = f"{'rfft' if real else 'fft':6} {f'{batch} x {n}':>12} {t['weft']:9.3f}"
            for p in peers:
                row += f" {t[p]:9.3f} {t['weft'] / t[p]:10.2f}"
            print(row)


if __name__ == "__main__":
    main()
