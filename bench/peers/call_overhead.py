"""Issue 14 item 4 for a peer: the 10-op function of bench/suite_funcs.h on 16
floats, called again and again: compiled (jax.jit, mx.compile) and op by op
(NumPy; JAX and MLX eager too). A repetition is `calls` calls; items counts
them, so run_all.py reports microseconds per call. Checked first.

    python call_overhead.py numpy|jax|mlx [calls = 2000]
"""
import sys

import common
import funcs

fw = common.framework_from_argv()
calls = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
common.versions(fw)
o = funcs.Ops(fw)
x_host = common.uniform((16,), 7, -3.0, 3.0)
x = o.array(x_host)
want = funcs.call10_ref(x_host)

impls = [(f"{fw}-ops" if fw != "numpy" else "numpy-ops", lambda a: funcs.call10(a, o))]
if fw == "jax":
    import jax
    impls.append(("jax-jit", jax.jit(lambda a: funcs.call10(a, o))))
elif fw == "mlx":
    import mlx.core as mx
    impls.append(("mlx-compiled", mx.compile(lambda a: funcs.call10(a, o))))


def run(f):
    y = f(x)
    o.eval(y)
    return y


for impl, f in impls:
    y = common.np.asarray(run(f))
    bad = common.mismatch(y, want, 3e-3, 1e-4)  # 3e-3: the chain's kink
    if bad:
        common.record("call_overhead/call10_16", impl, 1, check=bad)
        continue

    def many():
        for _ in range(calls):
            run(f)
    common.record("call_overhead/call10_16", impl, 1, common.time_reps(many, common.reps(7)),
                  items=calls, checksum=common.l1(y))
