"""Issue 14 item 2 for a peer: float32 square products 256..4096, a batched
8 x 512 x 512 product and bfloat16 products, on the inputs suite_matmul.c
uses. 256 entries of every output are checked against a float64 reference
first. MLX's Linux CPU wheel multiplies through a reference BLAS (a few
GFLOP/s), so its sizes stop at `mlx_largest` (1024 by default) and the
results say so. NumPy has no bfloat16 matmul.

    python matmul.py numpy|jax|mlx [largest = 4096] [mlx_largest = 1024]
"""
import ctypes
import glob
import os
import sys

import numpy as np

import common

fw = common.framework_from_argv()
largest = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
mlx_largest = int(sys.argv[3]) if len(sys.argv) > 3 else 1024
common.versions(fw)


def numpy_openblas_info():
    """The core NumPy's bundled OpenBLAS chose, through its exported symbols."""
    libdir = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for path in glob.glob(os.path.join(libdir, "*openblas*.so*")):
        lib = ctypes.CDLL(path)
        for prefix in ("scipy_openblas_", "openblas_"):
            for suffix in ("64_", ""):
                corename = getattr(lib, f"{prefix}get_corename{suffix}", None)
                config = getattr(lib, f"{prefix}get_config{suffix}", None)
                threads = getattr(lib, f"{prefix}get_num_threads{suffix}", None)
                if corename and config:
                    corename.restype = config.restype = ctypes.c_char_p
                    common.info("openblas_numpy_corename", corename().decode())
                    common.info("openblas_numpy_config", config().decode())
                    if threads:
                        common.info("openblas_numpy_threads", str(threads()))
                    return
    common.info("openblas_numpy_corename", "not found in numpy.libs")


def reps_for(n):
    base = 3 if n >= 4096 else 5 if n >= 2048 else 10
    return min(base, common.reps(base))


def check(c, a, b, tol):
    """256 entries of c against float64 dot products (bound: tol sum |a b|)."""
    c = np.asarray(c, dtype=np.float64)
    a3, b3, c3 = (x.reshape((-1,) + x.shape[-2:]) for x in (a, b, c))
    batch, n = a3.shape[0], a3.shape[-1]
    for e in range(256):
        h = (e * 7919 + 17) * 2654435761 % (1 << 32)
        bi, i, j = h % batch, (h >> 4) % n, (h * 40503) % n
        prod = a3[bi, i, :].astype(np.float64) * b3[bi, :, j].astype(np.float64)
        want, scale = prod.sum(), np.abs(prod).sum()
        if not abs(c3[bi, i, j] - want) <= tol * scale + 1e-6:
            return f"entry ({bi}, {i}, {j}): got {c3[bi, i, j]:.9g}, want {want:.9g}"
    return None


def setup():
    """(to_device(array, dtype name), matmul_and_wait, to_host, bf16 ok)."""
    if fw == "numpy":
        numpy_openblas_info()
        return (lambda a, dt: a, np.matmul, lambda c: c, False)
    if fw == "jax":
        import jax
        import jax.numpy as jnp
        mm = jax.jit(jnp.matmul)
        dtypes = {"f32": jnp.float32, "bf16": jnp.bfloat16}
        return (lambda a, dt: jnp.asarray(a, dtype=dtypes[dt]),
                lambda a, b: mm(a, b).block_until_ready(),
                lambda c: np.asarray(c.astype(jnp.float32)), True)
    import mlx.core as mx
    dtypes = {"f32": mx.float32, "bf16": mx.bfloat16}

    def mm(a, b):
        c = a @ b
        mx.eval(c)
        return c
    return (lambda a, dt: mx.array(a).astype(dtypes[dt]), mm,
            lambda c: np.array(c.astype(mx.float32)), True)


to_device, matmul, to_host, has_bf16 = setup()


def run_case(case, batch, n, dtype):
    threads = common.cores()
    if fw == "numpy" and dtype == "bf16":
        common.record(case, f"{fw}", threads, check="not run: NumPy has no bfloat16 matmul")
        return
    impl = fw if fw != "numpy" else "numpy-openblas"
    if fw == "mlx" and n > mlx_largest:
        common.record(case, impl, threads, check=f"not run: capped at {mlx_largest} (MLX's "
                      "CPU wheel multiplies through a reference BLAS)")
        return
    seed = 4 if batch > 1 else 2
    shape = (batch, n, n) if batch > 1 else (n, n)
    a_host, b_host = common.uniform(shape, seed, -1, 1), common.uniform(shape, seed + 1, -1, 1)
    a, b = to_device(a_host, dtype), to_device(b_host, dtype)
    tol = 1e-5
    if dtype == "bf16":  # the reference multiplies the rounded inputs
        a_host, b_host, tol = to_host(a), to_host(b), 1.0 / 128
    c = to_host(matmul(a, b))
    bad = check(c, a_host, b_host, tol)
    if bad:
        common.record(case, impl, threads, check=bad)
        return
    times = common.time_reps(lambda: matmul(a, b), reps_for(n))
    note = "capped sizes: see the table" if fw == "mlx" else ""
    common.record(case, impl, threads, times, flops=2.0 * batch * n ** 3,
                  checksum=common.l1(c), note=note)


n = 256
while n <= largest:
    run_case(f"matmul/f32_{n}", 1, n, "f32")
    n *= 2
run_case("matmul/f32_batched_8x512", 8, 512, "f32")
run_case("matmul/bf16_1024", 1, 1024, "bf16")
if largest >= 2048:
    run_case("matmul/bf16_2048", 1, 2048, "bf16")
