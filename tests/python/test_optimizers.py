"""weft.optimizers: each optimizer's steps against its update rule written in
NumPy here, schedules, clip_grad_norm, and state used through mx.compile."""
import math

import numpy as np
import pytest

import weft as mx
import weft.nn as nn
import weft.optimizers as optim
from weft.utils import tree_flatten, tree_map

rng = np.random.default_rng(3)
STEPS = 4


def _np_sgd(lr, momentum=0.0, weight_decay=0.0, dampening=0.0, nesterov=False):
    def step(p, g, s, t):
        g = g + weight_decay * p
        if momentum <= 0:
            return p - lr * g
        v = momentum * s.get("v", np.zeros_like(p)) + (1 - dampening) * g
        s["v"] = v
        return p - lr * (g + momentum * v if nesterov else v)
    return step


def _np_rmsprop(lr, alpha=0.99, eps=1e-8):
    def step(p, g, s, t):
        s["v"] = alpha * s.get("v", 0) + (1 - alpha) * g * g
        return p - lr * g / (np.sqrt(s["v"]) + eps)
    return step


def _np_adagrad(lr, eps=1e-8):
    def step(p, g, s, t):
        s["v"] = s.get("v", 0) + g * g
        return p - lr * g / (np.sqrt(s["v"]) + eps)
    return step


def _np_adadelta(lr, rho=0.9, eps=1e-6):
    def step(p, g, s, t):
        v = rho * s.get("v", 0) + (1 - rho) * g * g
        d = np.sqrt(s.get("u", 0) + eps) / np.sqrt(v + eps) * g
        s["v"], s["u"] = v, rho * s.get("u", 0) + (1 - rho) * d * d
        return p - lr * d
    return step


def _np_adam(lr, b1=0.9, b2=0.999, eps=1e-8, bias_correction=False, weight_decay=0.0):
    def step(p, g, s, t):
        p = p * (1 - lr * weight_decay)
        m = b1 * s.get("m", 0) + (1 - b1) * g
        v = b2 * s.get("v", 0) + (1 - b2) * g * g
        s["m"], s["v"] = m, v
        if bias_correction:
            return p - lr / (1 - b1 ** t) * m / (np.sqrt(v) / np.sqrt(1 - b2 ** t) + eps)
        return p - lr * m / (np.sqrt(v) + eps)
    return step


def _np_adamax(lr, b1=0.9, b2=0.999, eps=1e-8):
    def step(p, g, s, t):
        s["m"] = b1 * s.get("m", 0) + (1 - b1) * g
        s["v"] = np.maximum(b2 * s.get("v", 0), np.abs(g))
        return p - lr * s["m"] / (s["v"] + eps)
    return step


def _np_lion(lr, b1=0.9, b2=0.99, weight_decay=0.0):
    def step(p, g, s, t):
        m = s.get("m", 0)
        c = b1 * m + (1 - b1) * g
        s["m"] = b2 * m + (1 - b2) * g
        return p * (1 - lr * weight_decay) - lr * np.sign(c)
    return step


def _np_adafactor_vector(p, g, s, t):
    """Adafactor's defaults (relative step, parameter scaling) on a vector."""
    eps1, eps2, decay, clip = 1e-30, 1e-3, -0.8, 1.0
    rms = lambda x: np.sqrt(np.mean(x * x))  # noqa: E731
    lr = max(eps2, rms(p)) * min(1e-2, 1 / np.sqrt(t))
    beta2 = 1 - t ** decay
    s["v"] = beta2 * s.get("v", 0) + (1 - beta2) * (g * g + eps1)
    u = g / np.sqrt(s["v"])
    u = u / max(1.0, rms(u) / clip)
    return p - lr * u


def _np_adafactor_matrix(p, g, s, t):
    eps1, eps2, decay, clip = 1e-30, 1e-3, -0.8, 1.0
    rms = lambda x: np.sqrt(np.mean(x * x))  # noqa: E731
    lr = max(eps2, rms(p)) * min(1e-2, 1 / np.sqrt(t))
    beta2 = 1 - t ** decay
    sq = g * g + eps1
    s["r"] = beta2 * s.get("r", 0) + (1 - beta2) * sq.mean(1)
    s["c"] = beta2 * s.get("c", 0) + (1 - beta2) * sq.mean(0)
    estimate = np.outer(1 / np.sqrt(s["r"] / s["r"].mean()), 1 / np.sqrt(s["c"]))
    u = estimate * g
    u = u / max(1.0, rms(u) / clip)
    return p - lr * u


CASES = [
    (lambda: optim.SGD(0.1), _np_sgd(0.1)),
    (lambda: optim.SGD(0.1, momentum=0.9, weight_decay=0.01), _np_sgd(0.1, 0.9, 0.01)),
    (lambda: optim.SGD(0.1, momentum=0.9, dampening=0.2), _np_sgd(0.1, 0.9, dampening=0.2)),
    (lambda: optim.SGD(0.1, momentum=0.9, nesterov=True), _np_sgd(0.1, 0.9, nesterov=True)),
    (lambda: optim.RMSprop(0.01, alpha=0.9), _np_rmsprop(0.01, 0.9)),
    (lambda: optim.Adagrad(0.1), _np_adagrad(0.1)),
    (lambda: optim.AdaDelta(1.0, rho=0.8), _np_adadelta(1.0, 0.8)),
    (lambda: optim.Adam(0.01), _np_adam(0.01)),
    (lambda: optim.Adam(0.01, betas=[0.8, 0.9], bias_correction=True),
     _np_adam(0.01, 0.8, 0.9, bias_correction=True)),
    (lambda: optim.AdamW(0.01, weight_decay=0.1), _np_adam(0.01, weight_decay=0.1)),
    (lambda: optim.Adamax(0.01), _np_adamax(0.01)),
    (lambda: optim.Lion(0.01, weight_decay=0.1), _np_lion(0.01, weight_decay=0.1)),
]


@pytest.mark.parametrize("index", range(len(CASES)))
def test_optimizer_steps_match_numpy(index):
    make, reference = CASES[index]
    params_np = {"w": rng.normal(size=(3, 4)).astype(np.float32),
                 "layers": [rng.normal(size=5).astype(np.float32)]}
    grads_np = [tree_map(lambda x: rng.normal(size=x.shape).astype(np.float32), params_np)
                for _ in range(STEPS)]
    opt = make()
    params = tree_map(mx.array, params_np)
    expected = tree_map(lambda x: x.astype(np.float64), params_np)
    states = {"w": {}, "l": {}}
    for t, grads in enumerate(grads_np, start=1):
        params = opt.apply_gradients(tree_map(mx.array, grads), params)
        expected = {"w": reference(expected["w"], grads["w"], states["w"], t),
                    "layers": [reference(expected["layers"][0], grads["layers"][0], states["l"], t)]}
    assert opt.step.item() == STEPS
    for (k, got), (_, want) in zip(tree_flatten(params), tree_flatten(expected)):
        np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-5, err_msg=k)


def test_adafactor_matches_numpy():
    p_vec = rng.normal(size=6).astype(np.float32)
    p_mat = rng.normal(size=(4, 3)).astype(np.float32)
    params = {"v": mx.array(p_vec), "m": mx.array(p_mat)}
    opt = optim.Adafactor()
    ev, em = p_vec.astype(np.float64), p_mat.astype(np.float64)
    sv, sm = {}, {}
    for t in range(1, STEPS + 1):
        gv = rng.normal(size=6).astype(np.float32)
        gm = rng.normal(size=(4, 3)).astype(np.float32)
        params = opt.apply_gradients({"v": mx.array(gv), "m": mx.array(gm)}, params)
        ev = _np_adafactor_vector(ev, gv, sv, t)
        em = _np_adafactor_matrix(em, gm, sm, t)
    np.testing.assert_allclose(np.array(params["v"]), ev, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np.array(params["m"]), em, rtol=1e-4, atol=1e-6)


def test_muon_orthogonalizes_matrix_updates():
    opt = optim.Muon(0.1, momentum=0.0, weight_decay=0.0, nesterov=False, ns_steps=5)
    g = rng.normal(size=(8, 4)).astype(np.float32)
    p = np.zeros((8, 4), np.float32)
    new = opt.apply_gradients({"w": mx.array(g), "b": mx.array(g[0])}, {"w": mx.array(p), "b": mx.array(p[0])})
    update = -np.array(new["w"]) / 0.1 / math.sqrt(8 / 4)
    # Newton-Schulz drives the singular values toward 1 (roughly 0.7..1.2 after
    # 5 steps of the quintic) and keeps the singular vectors of g
    s = np.linalg.svd(update, compute_uv=False)
    assert s.min() > 0.5 and s.max() < 1.3, s
    u_g, _, vt_g = np.linalg.svd(g, full_matrices=False)
    core = u_g.T @ update @ vt_g.T  # diagonal when the singular vectors are g's
    assert np.abs(core - np.diag(np.diag(core))).max() < 1e-3
    # vectors get plain momentum SGD
    np.testing.assert_allclose(np.array(new["b"]), -0.1 * g[0], rtol=1e-6)


def test_schedules():
    for step in (0, 3, 10):
        np.testing.assert_allclose(optim.exponential_decay(0.1, 0.9)(step).item(), 0.1 * 0.9 ** step,
                                   rtol=1e-6)
        np.testing.assert_allclose(optim.step_decay(0.1, 0.5, 4)(step).item(),
                                   0.1 * 0.5 ** (step // 4), rtol=1e-6)
    cos = optim.cosine_decay(1.0, 10, end=0.1)
    for step in (0, 5, 10, 20):
        s = min(step, 10)
        np.testing.assert_allclose(cos(step).item(), 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * s / 10)),
                                   rtol=1e-6)
    warm = optim.linear_schedule(0.0, 1.0, 4)
    assert [round(warm(s).item(), 6) for s in (0, 1, 4, 9)] == [0.0, 0.25, 1.0, 1.0]
    joined = optim.join_schedules([warm, optim.exponential_decay(1.0, 0.5)], [4])
    np.testing.assert_allclose([joined(s).item() for s in (0, 2, 4, 6)], [0, 0.5, 1.0, 0.25], rtol=1e-6)
    with pytest.raises(ValueError):
        optim.join_schedules([warm], [4])
    with pytest.raises(ValueError):
        optim.linear_schedule(0, 1, 0)


def test_scheduled_learning_rate_follows_steps():
    opt = optim.SGD(optim.exponential_decay(1.0, 0.5))
    params = {"w": mx.ones((2,))}
    lrs = []
    for _ in range(3):
        params = opt.apply_gradients({"w": mx.ones((2,))}, params)
        lrs.append(opt.learning_rate.item())
    assert lrs == [1.0, 0.5, 0.25]
    np.testing.assert_allclose(np.array(params["w"]), 1 - 1.75)


def test_clip_grad_norm():
    grads = {"a": mx.array([3.0, 0.0]), "b": [mx.array([4.0])]}
    clipped, norm = optim.clip_grad_norm(grads, 1.0)
    assert abs(norm.item() - 5.0) < 1e-6
    np.testing.assert_allclose(np.array(clipped["a"]), [0.6, 0.0], rtol=1e-5)
    np.testing.assert_allclose(np.array(clipped["b"][0]), [0.8], rtol=1e-5)
    unchanged, _ = optim.clip_grad_norm(grads, 10.0)
    np.testing.assert_array_equal(np.array(unchanged["a"]), [3.0, 0.0])
    with pytest.raises(ValueError):
        optim.clip_grad_norm(grads, -1.0)


def test_errors_and_state_round_trip():
    with pytest.raises(ValueError):
        optim.SGD(0.1, nesterov=True)
    for cls in (optim.RMSprop, optim.Adagrad, optim.AdaDelta):
        with pytest.raises(ValueError):
            cls(0.1, eps=0.0)
    opt = optim.Adam(0.1)
    params = {"w": mx.ones((2, 2))}
    opt.init(params)
    flat = tree_flatten(opt.state)
    assert sorted(k for k, _ in flat) == ["learning_rate", "step", "w.m", "w.v"]


def test_multi_optimizer_splits_parameters():
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 2))
    opt = optim.MultiOptimizer([optim.SGD(1.0), optim.SGD(0.0)], [lambda path, p: p.ndim == 2])
    before = tree_map(lambda x: np.array(x), model.parameters())
    grads = tree_map(mx.ones_like, model.trainable_parameters())
    opt.update(model, grads)
    after = model.parameters()
    np.testing.assert_allclose(np.array(after["layers"][0]["weight"]), before["layers"][0]["weight"] - 1)
    np.testing.assert_allclose(np.array(after["layers"][2]["bias"]), before["layers"][2]["bias"])
    with pytest.raises(ValueError):
        optim.MultiOptimizer([optim.SGD(1.0)], [lambda *_: True])


def _training_run(compiled):
    mx.random.seed(11)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = optim.Adam(0.05)
    x = mx.array(np.random.default_rng(5).normal(size=(32, 4)).astype(np.float32))
    y = mx.sum(x, axis=1, keepdims=True)

    def loss_fn(m):
        return nn.losses.mse_loss(m(x), y)

    def step():
        loss, grads = nn.value_and_grad(model, loss_fn)(model)
        opt.update(model, grads)
        return loss

    if compiled:
        state = [model.state, opt.state]
        step = mx.compile(step, inputs=state, outputs=state)
    losses = []
    for _ in range(15):
        losses.append(step().item())
        mx.eval(model.state, opt.state)
    return losses, model


def test_compiled_training_step_equals_eager():
    eager, _ = _training_run(False)
    compiled, model = _training_run(True)
    np.testing.assert_allclose(compiled, eager, rtol=1e-4, atol=1e-6)
    assert compiled[-1] < 0.25 * compiled[0]
