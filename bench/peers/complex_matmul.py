"""complex64 matmul, weft beside NumPy (its bundled OpenBLAS's cgemm), in one
process on the same arrays:

    build/py-venv/bin/python bench/peers/complex_matmul.py [--one-thread] [--fresh-b] [reps=7]

Cases: square products 256, 512, 1024 and 2048; a batch of 16 products of
256 x 256; matrix-vector products 1 x 1024 @ 1024 x 1024 and 1 x 4096 @
4096 x 4096 (a few rows: weft reads B in place). Each figure is the best of
`reps` runs (wall clock), weft and NumPy in alternating blocks each after a
pause (so neither shares a core with the other's spinning threads); GFLOP/s
count 8 m n k
per product; the ratio is weft / NumPy throughput (> 1: weft faster). Each
result is first checked against the other library's within a float32 dot
product's bound. --one-thread runs both on one thread (WEFT_NUM_THREADS=1,
OPENBLAS_NUM_THREADS=1, set before either is imported) and times CPU time,
which compares the kernels even on a machine shared with other work.
weft is the installed wheel (scripts/python-test.sh installs it into
build/py-venv).

By default every product multiplies the same B, as a served weight is: weft
then packs B' once, from the second product on, and keeps it with B (API.md,
Matrix products), while NumPy's cgemm packs it at every call. --fresh-b
gives each of weft's products a B of its own (equal values, a new array
made beforehand), so that it packs B' every time: the cost of a product of
fresh operands.
"""
import os
import sys

ONE_THREAD = "--one-thread" in sys.argv
FRESH_B = "--fresh-b" in sys.argv
if ONE_THREAD:
    os.environ["WEFT_NUM_THREADS"] = "1"
    os.environ["OPENBLAS_NUM_THREADS"] = "1"

import time  # noqa: E402

import numpy as np  # noqa: E402

import weft as mx  # noqa: E402

args = [a for a in sys.argv[1:] if not a.startswith("--")]
REPS = int(args[0]) if args else 7
clock = time.process_time if ONE_THREAD else time.perf_counter


def operands(shape_a, shape_b, seed):
    rng = np.random.default_rng(seed)

    def make(shape):
        re = rng.uniform(-1, 1, shape).astype(np.float32)
        im = rng.uniform(-1, 1, shape).astype(np.float32)
        return (re + 1j * im).astype(np.complex64)

    return make(shape_a), make(shape_b)


# OpenBLAS's threads spin for ~100 ms after each call (and weft's pool
# threads for 200 us), so each block of timed runs starts after a pause, as
# bench_matmul.c's: neither library shares a core with the other's spinning.
SETTLE_S = 0.3


def best_of(run, reps):
    time.sleep(SETTLE_S)
    best = float("inf")
    for _ in range(reps):
        start = clock()
        run()
        best = min(best, clock() - start)
    return best


def best_pair(run_weft, run_numpy, reps):
    """Best times of the two, in two alternating blocks of runs each."""
    half = max(1, (reps + 1) // 2)
    tw = tn = float("inf")
    for _ in range(2):
        tw = min(tw, best_of(run_weft, half))
        tn = min(tn, best_of(run_numpy, half))
    return tw, tn


def check(got, want, a, b):
    """got near want: each is a float32 product whose re and im parts are
    dot products of 2k terms, off by at most (2k + 1) u sum (|a_re| +
    |a_im|)(|b_re| + |b_im|) <= (2k + 1) u 2 sum |a||b| each; so |got -
    want| <= sqrt(2) 2 (2k + 1) u 2 sum |a||b| < 6 (2k + 1) u sum |a||b|."""
    k = a.shape[-1]
    mag = np.matmul(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    bound = 6 * (2 * k + 1) * 2.0 ** -24 * mag
    err = np.abs(got.astype(np.complex128) - want.astype(np.complex128))
    if not np.all(err <= bound):
        sys.exit(f"weft and NumPy disagree beyond the bound (max error {err.max():.3g})")


def case(label, shape_a, shape_b, reps):
    a, b = operands(shape_a, shape_b, hash(label) & 0xFFFF)
    wa, wb = mx.array(a), mx.array(b)
    mx.eval(wa, wb)
    out = mx.matmul(wa, wb)
    mx.eval(out)
    check(np.array(out), np.matmul(a, b), a, b)

    # one B per timed product in --fresh-b (best_pair runs 2 blocks of half)
    fresh = [mx.array(b) for _ in range(2 * max(1, (reps + 1) // 2))] if FRESH_B else []
    mx.eval(*fresh)
    fresh_b = iter(fresh)

    def run_weft():
        mx.eval(mx.matmul(wa, next(fresh_b) if FRESH_B else wb))

    def run_numpy():
        np.matmul(a, b)

    tw, tn = best_pair(run_weft, run_numpy, reps)
    m, k = shape_a[-2], shape_a[-1]
    n = shape_b[-1]
    batch = int(np.prod(shape_a[:-2])) if len(shape_a) > 2 else 1
    flops = 8.0 * batch * m * n * k
    print(f"{label:<22} weft {flops / tw * 1e-9:8.1f} GFLOP/s   NumPy {flops / tn * 1e-9:8.1f} "
          f"GFLOP/s   ratio {tn / tw:5.2f}", flush=True)


def main():
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"complex64 matmul: weft {mx.__file__}, NumPy {np.__version__}; "
          f"{'one thread, CPU' if ONE_THREAD else 'default threads, wall'} time; "
          f"{'a new B per product' if FRESH_B else 'the same B in every product'}; "
          f"load average {load}; {os.cpu_count()} CPUs")
    for n in (256, 512, 1024, 2048):
        case(f"c64 {n}^3", (n, n), (n, n), REPS if n < 2048 else max(2, REPS // 2))
    case("c64 batched 16x256^3", (16, 256, 256), (16, 256, 256), REPS)
    case("c64 1x1024 @ 1024^2", (1, 1024), (1024, 1024), 10 * REPS)
    case("c64 1x4096 @ 4096^2", (1, 4096), (4096, 4096), 3 * REPS)


main()
