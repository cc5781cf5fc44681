"""Issue 14 item 1 for a peer: GELU (erf and tanh forms) and the 8-op chain on
16M float32, op by op and compiled (jax.jit, mx.compile; NumPy has no
compiler). The output is checked on 65536 evenly spaced elements against a
float64 reference before timing.

    python elementwise.py numpy|jax|mlx [elements]
"""
import math
import sys

import numpy as np

import common
import funcs

fw = common.framework_from_argv()
n = int(sys.argv[2]) if len(sys.argv) > 2 else 16777216
common.versions(fw)


def reference(name, x):
    x = x.astype(np.float64)
    if name == "gelu_erf":
        erf = np.vectorize(math.erf)
        return 0.5 * x * (1 + erf(x * 0.70710678118654752))
    if name == "gelu_tanh":
        return 0.5 * x * (1 + np.tanh(0.79788456080286536 * (x + 0.044715 * x ** 3)))
    return (np.sqrt(np.maximum((x * 1.5 + 0.25) * x - 0.5, 0)) + x) * 0.5


# (name, function, atol, rtol): chain8's sqrt sits on a kink (see suite_elementwise.c).
CASES = [("gelu_erf", funcs.gelu_erf, 1e-5, 1e-4), ("gelu_tanh", funcs.gelu_tanh, 1e-5, 1e-4),
         ("chain8", funcs.chain8, 2e-3, 1e-4)]


def setup():
    """(ops, to_device, run_and_wait, [(impl, wrap)])."""
    ops = funcs.Ops(fw)
    if fw == "numpy":
        return ops, ops.array, lambda f, x: f(x), [("numpy-ops", lambda f: f)]
    if fw == "jax":
        import jax
        return (ops, ops.array, lambda f, x: f(x).block_until_ready(),
                [("jax-ops", lambda f: f), ("jax-jit", jax.jit)])
    import mlx.core as mx

    def run(f, x):
        y = f(x)
        mx.eval(y)
        return y
    return ops, ops.array, run, [("mlx-ops", lambda f: f), ("mlx-compiled", mx.compile)]


ops, to_device, run, impls = setup()
x_host = common.uniform((n,), 1, -3.0, 3.0)
x = to_device(x_host)
sample = np.linspace(0, n - 1, min(n, 65536)).astype(np.int64)
for name, formula, atol, rtol in CASES:
    want = reference(name, x_host[sample])
    for impl, wrap in impls:
        case = f"elementwise/{name}"
        if name == "gelu_erf" and ops.erf is None:
            common.record(case, impl, common.cores(), check="not run: NumPy has no erf "
                          "(it is in SciPy, which the bench environment does not install)")
            continue
        f = wrap(lambda a, formula=formula: formula(a, ops))
        y = np.asarray(run(f, x))  # also the warm-up (and the trace)
        bad = common.mismatch(y[sample], want, atol, rtol)
        if bad:
            common.record(case, impl, common.cores(), check=bad)
            continue
        times = common.time_reps(lambda: run(f, x), common.reps(7))
        common.record(case, impl, common.cores(), times, bytes=8.0 * n, checksum=common.l1(y))
