"""Issue 14 item 7 for a peer: the MLP AdamW step and the transformer block's
forward + backward of suite_train.c, same inputs and initial parameters,
compiled (jax.jit, mx.compile of value_and_grad, with AdamW written out as
wf_nn_adamw_step computes it). The first loss is the checksum run_all.py
compares with weft's; the MLP also checks that its loss goes down. NumPy has
no autodiff. MLX's CPU matmul is slow (reference BLAS): its step counts are
capped by the caller through SUITE_REPS.

    python train.py numpy|jax|mlx
"""
import time

import numpy as np

import common
import funcs

fw = common.framework_from_argv()
common.versions(fw)
o = funcs.Ops(fw)
impl = {"numpy": "numpy", "jax": "jax-jit", "mlx": "mlx-compiled"}[fw]

if fw == "numpy":
    for case in ("train/mlp_adamw", "train/transformer_fwd_bwd"):
        common.record(case, "numpy", common.cores(), check="not run: NumPy has no autodiff")
    raise SystemExit(0)

if fw == "jax":
    import jax
    value_and_grad, compile_fn = jax.value_and_grad, jax.jit
else:
    import mlx.core as mx
    value_and_grad, compile_fn = mx.value_and_grad, mx.compile


def mlp():
    params, x, labels = funcs.mlp_train_inputs()
    params = [o.array(p) for p in params]
    x, labels = o.array(x), o.array(labels)
    vg = value_and_grad(lambda ps, a, b: funcs.mlp_loss(ps, a, b, o))

    def step(ps, ms, vs, t, lr, a, b):
        loss, grads = vg(ps, a, b)
        new = [funcs.adamw(p, g, m, v, t, lr, o) for p, g, m, v in zip(ps, grads, ms, vs)]
        return loss, [n[0] for n in new], [n[1] for n in new], [n[2] for n in new]
    step_c = compile_fn(step)
    ms = [o.xp.zeros(p.shape) for p in params]
    vs = [o.xp.zeros(p.shape) for p in params]
    lr = o.array(np.float32(1e-3))
    losses, times = [], []
    for s in range(common.reps(10) + 1):  # call 0 traces: reported, not timed
        start = time.perf_counter()
        loss, params, ms, vs = step_c(params, ms, vs, o.array(np.float32(s + 1)), lr, x, labels)
        o.eval(loss, params, ms, vs)
        elapsed = time.perf_counter() - start
        losses.append(float(np.asarray(loss)))
        if s == 0:
            first = elapsed
        else:
            times.append(elapsed)
    check = "ok" if losses[-1] < losses[0] else f"loss did not go down: {losses[0]} -> {losses[-1]}"
    common.record("train/mlp_adamw", impl, common.cores(), times, checksum=losses[0], check=check,
                  note=f"loss {losses[0]:.5f} -> {losses[-1]:.5f} over {len(times)} steps; "
                       f"first step (traces) {first:.3f} s")


def block():
    params, x = funcs.block_inputs()
    params = [o.array(p) for p in params]
    x = o.array(x)
    vg = compile_fn(value_and_grad(lambda ps, a: funcs.block_loss(ps, a, o)))
    times, loss0 = [], None
    for s in range(common.reps(5) + 1):
        start = time.perf_counter()
        loss, grads = vg(params, x)
        o.eval(loss, grads)
        elapsed = time.perf_counter() - start
        loss0 = float(np.asarray(loss)) if loss0 is None else loss0
        if s == 0:
            first = elapsed
        else:
            times.append(elapsed)
    common.record("train/transformer_fwd_bwd", impl, common.cores(), times, checksum=loss0,
                  note=f"loss {loss0:.5f}; first call (traces) {first:.3f} s")


for run in (mlp, block):
    try:
        run()
    except Exception as e:  # a peer that cannot run the case says why
        case = "train/mlp_adamw" if run is mlp else "train/transformer_fwd_bwd"
        common.record(case, impl, common.cores(), check=f"{type(e).__name__}: {e}"[:300])
