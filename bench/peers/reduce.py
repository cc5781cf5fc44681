"""Issue 14 item 3 for a peer: sum, max and logsumexp of a 4096 x 4096 float32
array over each axis and over each axis of its transposed view, on the input
suite_reduce.c uses; every output is checked against float64 first. jax.jit
and mx.compile wrap each reduction (one call each; NumPy runs it directly,
and has no logsumexp: it is written as max + log(sum(exp(x - max)))).

    python reduce.py numpy|jax|mlx [n = 4096]
"""
import sys

import numpy as np

import common

fw = common.framework_from_argv()
n = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
common.versions(fw)


def np_logsumexp(x, axis):
    top = np.max(x, axis=axis, keepdims=True)
    return np.squeeze(top, axis) + np.log(np.sum(np.exp(x - top), axis=axis))


def setup():
    """(to_device, {op: fn(x, axis)}, transpose, wrap, run_and_wait, impl)."""
    if fw == "numpy":
        ops = {"sum": lambda x, a: np.sum(x, axis=a), "max": lambda x, a: np.max(x, axis=a),
               "logsumexp": np_logsumexp}
        return lambda a: a, ops, np.transpose, lambda f: f, lambda f, x: f(x), "numpy"
    if fw == "jax":
        import jax
        import jax.numpy as jnp
        from jax.scipy.special import logsumexp
        ops = {"sum": lambda x, a: jnp.sum(x, axis=a), "max": lambda x, a: jnp.max(x, axis=a),
               "logsumexp": lambda x, a: logsumexp(x, axis=a)}
        return (jnp.asarray, ops, jnp.transpose, jax.jit,
                lambda f, x: f(x).block_until_ready(), "jax-jit")
    import mlx.core as mx
    ops = {"sum": lambda x, a: mx.sum(x, axis=a), "max": lambda x, a: mx.max(x, axis=a),
           "logsumexp": lambda x, a: mx.logsumexp(x, axis=a)}

    def run(f, x):
        y = f(x)
        mx.eval(y)
        return y
    return mx.array, ops, mx.transpose, mx.compile, run, "mlx-compiled"


def reference(op, x, axis):
    """float64 result and the bound each output may be off by."""
    x = x.astype(np.float64)
    if op == "sum":
        return np.sum(x, axis=axis), 1e-5 * np.sum(np.abs(x), axis=axis) + 1e-6
    if op == "max":
        return np.max(x, axis=axis), 0.0
    want = np_logsumexp(x, axis)
    return want, 1e-5 * (1 + np.abs(want))


to_device, ops, transpose, wrap, run, impl = setup()
x_host = common.uniform((n, n), 6, -3.0, 3.0)
x = to_device(x_host)
for op, fn in ops.items():
    for transposed in (False, True):
        for axis in (0, 1):
            case = f"reduce/{op}_{'T_' if transposed else ''}axis{axis}"
            if transposed:
                f = wrap(lambda a, fn=fn, axis=axis: fn(transpose(a), axis))
            else:
                f = wrap(lambda a, fn=fn, axis=axis: fn(a, axis))
            want, bound = reference(op, x_host, 1 - axis if transposed else axis)
            got = np.asarray(run(f, x), dtype=np.float64)
            bad = np.flatnonzero(~(np.abs(got - want) <= bound))
            if bad.size:
                o = int(bad[0])
                common.record(case, impl, common.cores(),
                              check=f"output {o}: got {got[o]:.9g}, want {want[o]:.9g}")
                continue
            times = common.time_reps(lambda: run(f, x), common.reps(7))
            common.record(case, impl, common.cores(), times, bytes=4.0 * n * n,
                          checksum=common.l1(got))
