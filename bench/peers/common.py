"""Shared helpers of the peer benchmarks (run by bench/run_all.py in the
bench virtual environment). Each peer script takes the framework as its first
argument (numpy, jax or mlx) and prints one JSON object per line per
measurement, with the fields bench/suite.h documents for the weft programs.

Inputs come from the same counter-based hash as bench/suite.h, bit for bit,
so every implementation computes on the same numbers.
"""
import json
import math
import os
import sys
import time

import numpy as np

FRAMEWORKS = ("numpy", "jax", "mlx")


def framework_from_argv():
    if len(sys.argv) < 2 or sys.argv[1] not in FRAMEWORKS:
        sys.exit(f"usage: {sys.argv[0]} {'|'.join(FRAMEWORKS)} [args]")
    return sys.argv[1]


def unit(seed, n):
    """n float32 values uniform in [0, 1): murmur3's finalizer of i ^ seed*phi."""
    with np.errstate(over="ignore"):
        h = np.arange(n, dtype=np.uint32) ^ np.uint32((seed * 0x9E3779B9) & 0xFFFFFFFF)
        h ^= h >> np.uint32(16)
        h *= np.uint32(0x85EBCA6B)
        h ^= h >> np.uint32(13)
        h *= np.uint32(0xC2B2AE35)
        h ^= h >> np.uint32(16)
    return (h >> np.uint32(8)).astype(np.float32) * np.float32(1.0 / 16777216.0)


def uniform(shape, seed, lo, hi):
    """float32 array of `shape` uniform in [lo, hi), as suite_fill_uniform."""
    n = int(np.prod(shape)) if len(shape) else 1
    lo32, hi32 = np.float32(lo), np.float32(hi)
    return (lo32 + (hi32 - lo32) * unit(seed, n)).reshape(shape)


def reps(fallback):
    """Repetitions: SUITE_REPS from the environment, else `fallback`."""
    try:
        n = int(os.environ.get("SUITE_REPS", ""))
    except ValueError:
        n = 0
    return n if n > 0 else fallback


def cores():
    return os.cpu_count() or 1


def time_reps(fn, count):
    """Times `count` calls of fn (which must wait for its result)."""
    times = []
    for _ in range(count):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def l1(a):
    """Sum of |a| in double: the cross-implementation checksum."""
    return float(np.sum(np.abs(np.asarray(a, dtype=np.float64))))


def mismatch(got, want, atol, rtol):
    """None when every |got - want| <= atol + rtol |want|, else a message."""
    got = np.asarray(got, dtype=np.float64).ravel()
    want = np.asarray(want, dtype=np.float64).ravel()
    if got.shape != want.shape:
        return f"shape {got.shape} != {want.shape}"
    bad = ~(np.abs(got - want) <= atol + rtol * np.abs(want))
    if not bad.any():
        return None
    i = int(np.argmax(bad))
    return f"element {i}: got {got[i]:.9g}, want {want[i]:.9g} ({int(bad.sum())} bad)"


def record(case, impl, threads, times=(), bytes=0, flops=0, items=0, checksum=0.0,
           check="ok", note=""):
    """Prints one measurement; times are dropped when the check failed."""
    times = sorted(times) if check == "ok" else []
    median = None
    if times:
        mid = len(times) // 2
        median = times[mid] if len(times) % 2 else 0.5 * (times[mid - 1] + times[mid])
    print(json.dumps({
        "case": case, "impl": impl, "threads": threads, "reps": len(times),
        "median_s": median, "min_s": times[0] if times else None,
        "max_s": times[-1] if times else None, "bytes": bytes, "flops": flops,
        "items": items, "checksum": checksum if math.isfinite(checksum) else None,
        "check": check, "note": note}), flush=True)


def value(case, impl, key, val):
    """Prints a named figure that is not a timing (a count)."""
    print(json.dumps({"case": case, "impl": impl, "value_of": key, "value": val}), flush=True)


def info(key, val):
    print(json.dumps({"info": key, "value": val}), flush=True)


def versions(fw):
    """The framework's version as an info line."""
    if fw == "jax":
        import jax
        import jaxlib
        info("jax_version", f"jax {jax.__version__}, jaxlib {jaxlib.__version__}, "
             f"devices {[str(d) for d in jax.devices()]}")
    elif fw == "mlx":
        import mlx.core as mx
        info("mlx_version", f"mlx {mx.__version__}, device {mx.default_device()}")
    else:
        info("numpy_version", f"numpy {np.__version__}")
