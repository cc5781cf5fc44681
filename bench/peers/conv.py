"""Issue 26's convolution layers for a peer (jax.jit with XLA's CPU
convolutions, or MLX's CPU backend), the figures bench/bench_conv.c prints
for weft: float32, channels last (NHWC / NLC), forward and backward (the
input's and the weight's cotangents; the forward is timed apart and
subtracted from a vjp). Each output is checked against a float64 NumPy
reference on a few entries first.

    python conv.py jax|mlx [repeats = 5] [--cpu-time]

--cpu-time times with the process's CPU time (all its threads): run it
with the peer on one thread (jax: XLA_FLAGS="--xla_cpu_multi_thread_eigen=false
intra_op_parallelism_threads=1") beside `WEFT_NUM_THREADS=1 bench_conv
--cpu-time` to compare one core's rates on a machine shared with other work.

GFLOP/s count 2 x multiply-adds (the backward does twice the forward's).
"""
import sys
import time

import numpy as np

import common

fw = common.framework_from_argv()
if fw == "numpy":
    sys.exit("conv.py: numpy has no convolution of these shapes")
cpu_time = "--cpu-time" in sys.argv
args = [a for a in sys.argv[2:] if a != "--cpu-time"]
repeats = int(args[0]) if args else 5
clock = time.process_time if cpu_time else time.perf_counter
common.versions(fw)

# name, input shape, weight shape (C_out, kernel..., C_in / groups), stride, padding, groups
LAYERS = [
    ("conv2d 8x56x56x64->64 3x3 s1", (8, 56, 56, 64), (64, 3, 3, 64), 1, 1, 1),
    ("conv2d 8x28x28x128->256 3x3 s2", (8, 28, 28, 128), (256, 3, 3, 128), 2, 1, 1),
    ("conv2d 8x56x56x64->256 1x1", (8, 56, 56, 64), (256, 1, 1, 64), 1, 0, 1),
    ("depthwise 8x112x112x32 3x3", (8, 112, 112, 32), (32, 3, 3, 1), 1, 1, 32),
    ("conv1d 4x3000x80->384 k3", (4, 3000, 80), (384, 3, 80), 1, 1, 1),
]


def reference_entries(x, w, stride, pad, groups, y):
    """A few entries of y against float64 dot products."""
    s = x.ndim - 2
    cout, cin_g = w.shape[0], w.shape[-1]
    cout_g = cout // groups
    rng = np.random.default_rng(0)
    for _ in range(16):
        idx = tuple(int(rng.integers(0, d)) for d in y.shape)
        n, o, co = idx[0], idx[1:-1], idx[-1]
        g = co // cout_g
        acc = 0.0
        for k in np.ndindex(*w.shape[1:-1]):
            pos = tuple(o[d] * stride + k[d] - pad for d in range(s))
            if any(p < 0 or p >= x.shape[1 + d] for d, p in enumerate(pos)):
                continue
            xs = x[(n,) + pos][g * cin_g:(g + 1) * cin_g].astype(np.float64)
            acc += float(xs @ w[(co,) + k].astype(np.float64))
        if abs(y[idx] - acc) > 1e-4 * (1 + abs(acc)):
            return f"entry {idx}: got {y[idx]:.7g}, want {acc:.7g}"
    return None


def best(fn):
    fn()  # warm up (compiles under jax.jit)
    times = []
    for _ in range(repeats):
        start = clock()
        fn()
        times.append(clock() - start)
    return min(times)


def setup_jax(x, w, stride, pad, groups):
    import jax
    import jax.numpy as jnp
    s = x.ndim - 2
    spatial = "HW"[:s] if s == 2 else "W"
    dims = ("N" + spatial + "C", "O" + spatial + "I", "N" + spatial + "C")

    def conv(a, b):
        return jax.lax.conv_general_dilated(a, b, (stride,) * s, [(pad, pad)] * s,
                                            dimension_numbers=dims, feature_group_count=groups)

    xj, wj = jnp.asarray(x), jnp.asarray(w)
    fwd = jax.jit(conv)
    y = np.asarray(fwd(xj, wj))
    u = jnp.ones(y.shape, jnp.float32)

    def vjp(a, b, ct):
        out, pull = jax.vjp(conv, a, b)
        return out, pull(ct)

    vjp_jit = jax.jit(vjp)
    run_fwd = lambda: fwd(xj, wj).block_until_ready()
    run_vjp = lambda: jax.block_until_ready(vjp_jit(xj, wj, u))
    return y, run_fwd, run_vjp


def setup_mlx(x, w, stride, pad, groups):
    import mlx.core as mx
    mx.set_default_device(mx.cpu)
    xm, wm = mx.array(x), mx.array(w)
    conv = (lambda a, b: mx.conv2d(a, b, stride=stride, padding=pad, groups=groups)) \
        if x.ndim == 4 else (lambda a, b: mx.conv1d(a, b, stride=stride, padding=pad,
                                                       groups=groups))
    y = conv(xm, wm)
    mx.eval(y)
    u = mx.ones(y.shape)

    def run_fwd():
        mx.eval(conv(xm, wm))

    def run_vjp():
        out, cts = mx.vjp(conv, [xm, wm], [u])
        mx.eval(out, cts)

    return np.array(y), run_fwd, run_vjp


print(f"# {fw}: float32, best of {repeats}, {'process CPU time' if cpu_time else 'wall clock'}; "
      "GFLOP/s (2 x multiply-adds)")
print(f"{'layer':32s} {'fwd ms':>9s} {'fwd GF/s':>9s} {'bwd ms':>9s} {'bwd GF/s':>9s}")
for name, xs, ws, stride, pad, groups in LAYERS:
    x = common.uniform(xs, 1, -0.5, 0.5)
    w = common.uniform(ws, 2, -0.5, 0.5)
    y, run_fwd, run_vjp = (setup_jax if fw == "jax" else setup_mlx)(x, w, stride, pad, groups)
    problem = reference_entries(x, w, stride, pad, groups, y)
    if problem:
        print(f"{name:32s} wrong result: {problem}")
        continue
    rows = int(np.prod(y.shape[:-1]))
    flops = 2.0 * rows * int(np.prod(ws[1:])) * ws[0]
    tf = best(run_fwd)
    tv = best(run_vjp)
    tb = tv - tf if tv > tf else tv
    print(f"{name:32s} {1e3 * tf:9.2f} {flops / tf / 1e9:9.1f} {1e3 * tb:9.2f} "
          f"{2 * flops / tb / 1e9:9.1f}", flush=True)
