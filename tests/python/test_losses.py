"""weft.nn.losses against NumPy formulas written here."""
import numpy as np
import pytest

import weft as mx
import weft.nn as nn

rng = np.random.default_rng(7)


def close(got, expected, atol=1e-5, rtol=1e-5):
    np.testing.assert_allclose(np.array(got), expected, atol=atol, rtol=rtol)


def np_logsumexp(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return (m + np.log(np.exp(x - m).sum(axis=axis, keepdims=True))).squeeze(axis)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_cross_entropy_indices_probabilities_smoothing_weights(reduction):
    logits = rng.normal(size=(6, 5)).astype(np.float32)
    labels = rng.integers(0, 5, size=6)
    weights = rng.uniform(size=6).astype(np.float32)
    lse = np_logsumexp(logits, 1)
    reduce = {"none": lambda v: v, "mean": np.mean, "sum": np.sum}[reduction]

    expected = lse - logits[np.arange(6), labels]
    close(nn.losses.cross_entropy(mx.array(logits), mx.array(labels), reduction=reduction),
          reduce(expected))
    close(nn.losses.cross_entropy(mx.array(logits), mx.array(labels), weights=mx.array(weights),
                                  reduction=reduction), reduce(expected * weights))

    probs = rng.dirichlet(np.ones(5), size=6).astype(np.float32)
    close(nn.losses.cross_entropy(mx.array(logits), mx.array(probs), reduction=reduction),
          reduce(lse - (logits * probs).sum(1)))

    s = 0.1
    smoothed = lse - ((1 - s) * logits[np.arange(6), labels] + s * logits.mean(1))
    close(nn.losses.cross_entropy(mx.array(logits), mx.array(labels), label_smoothing=s,
                                  reduction=reduction), reduce(smoothed))


def test_cross_entropy_other_axis_and_errors():
    logits = rng.normal(size=(3, 4, 2)).astype(np.float32)
    labels = rng.integers(0, 4, size=(3, 2))
    lse = np_logsumexp(logits, 1)
    picked = np.take_along_axis(logits, labels[:, None, :], 1)[:, 0]
    close(nn.losses.cross_entropy(mx.array(logits), mx.array(labels), axis=1), lse - picked)
    with pytest.raises(ValueError):
        nn.losses.cross_entropy(mx.array(logits), mx.array(labels), label_smoothing=1.0)
    with pytest.raises(ValueError):
        nn.losses.cross_entropy(mx.array(logits), mx.array([0, 1]))
    with pytest.raises(ValueError):
        nn.losses.cross_entropy(mx.array(logits[:, :, 0]), mx.array(labels[:, 0]), reduction="avg")


def test_binary_cross_entropy_logits_and_probabilities():
    x = rng.normal(size=8).astype(np.float32)
    y = rng.integers(0, 2, size=8).astype(np.float32)
    w = rng.uniform(size=8).astype(np.float32)
    expected = np.logaddexp(0, x) - x * y
    close(nn.losses.binary_cross_entropy(mx.array(x), mx.array(y)), expected.mean())
    close(nn.losses.binary_cross_entropy(mx.array(x), mx.array(y), weights=mx.array(w),
                                         reduction="none"), expected * w)
    p = np.array([0.0, 0.2, 0.9, 1.0], np.float32)
    t = np.array([1.0, 0.0, 1.0, 0.0], np.float32)
    with np.errstate(divide="ignore"):
        expected = -(t * np.maximum(np.log(p), -100) + (1 - t) * np.maximum(np.log(1 - p), -100))
    close(nn.losses.binary_cross_entropy(mx.array(p), mx.array(t), with_logits=False,
                                         reduction="none"), expected)


def test_regression_losses():
    a = rng.normal(size=(4, 3)).astype(np.float32)
    b = rng.normal(size=(4, 3)).astype(np.float32)
    A, B = mx.array(a), mx.array(b)
    d = a - b
    close(nn.losses.l1_loss(A, B), np.abs(d).mean())
    close(nn.losses.mse_loss(A, B, reduction="sum"), (d ** 2).sum())
    beta = 0.5
    smooth = np.where(np.abs(d) < beta, 0.5 * d ** 2 / beta, np.abs(d) - 0.5 * beta)
    close(nn.losses.smooth_l1_loss(A, B, beta=beta, reduction="none"), smooth)
    delta = 0.7
    quad = np.minimum(np.abs(d), delta)
    close(nn.losses.huber_loss(A, B, delta=delta), 0.5 * quad ** 2 + delta * (np.abs(d) - quad))
    close(nn.losses.log_cosh_loss(A, B), np.log(np.cosh(d)))
    with pytest.raises(ValueError):
        nn.losses.mse_loss(A, B[:2])


def test_nll_kl_gaussian_hinge_margin():
    logp = np.log(rng.dirichlet(np.ones(4), size=5)).astype(np.float32)
    labels = rng.integers(0, 4, size=5)
    close(nn.losses.nll_loss(mx.array(logp), mx.array(labels)), -logp[np.arange(5), labels])
    logq = np.log(rng.dirichlet(np.ones(4), size=5)).astype(np.float32)
    close(nn.losses.kl_div_loss(mx.array(logq), mx.array(logp)),
          (np.exp(logp) * (logp - logq)).sum(1))

    mu = rng.normal(size=6).astype(np.float32)
    t = rng.normal(size=6).astype(np.float32)
    var = rng.uniform(0.1, 2.0, size=6).astype(np.float32)
    expected = 0.5 * (np.log(var) + (t - mu) ** 2 / var)
    close(nn.losses.gaussian_nll_loss(mx.array(mu), mx.array(t), mx.array(var)), expected.mean())
    close(nn.losses.gaussian_nll_loss(mx.array(mu), mx.array(t), mx.array(var), full=True,
                                      reduction="none"), expected + 0.5 * np.log(2 * np.pi))

    x = rng.normal(size=6).astype(np.float32)
    y = np.sign(rng.normal(size=6)).astype(np.float32)
    close(nn.losses.hinge_loss(mx.array(x), mx.array(y)), np.maximum(1 - x * y, 0))
    x2 = rng.normal(size=6).astype(np.float32)
    close(nn.losses.margin_ranking_loss(mx.array(x), mx.array(x2), mx.array(y), margin=0.3),
          np.maximum(0, -y * (x - x2) + 0.3))
    with pytest.raises(ValueError):
        nn.losses.margin_ranking_loss(mx.array(x), mx.array(x2[:3]), mx.array(y))


def test_triplet_and_cosine_similarity():
    a, p, n = (rng.normal(size=(4, 3)).astype(np.float32) for _ in range(3))
    for norm in (1, 2, 3):
        def dist(u, v):
            return ((np.abs(u - v) ** norm).sum(-1) + 1e-6) ** (1 / norm)
        close(nn.losses.triplet_loss(mx.array(a), mx.array(p), mx.array(n), p=norm, margin=0.5),
              np.maximum(dist(a, p) - dist(a, n) + 0.5, 0), atol=1e-4)
    x1 = rng.normal(size=(3, 5)).astype(np.float32)
    x2 = rng.normal(size=(3, 5)).astype(np.float32)
    expected = (x1 * x2).sum(1) / (np.linalg.norm(x1, axis=1) * np.linalg.norm(x2, axis=1))
    close(nn.losses.cosine_similarity_loss(mx.array(x1), mx.array(x2)), expected)


def test_losses_have_gradients():
    logits = rng.normal(size=(4, 3)).astype(np.float32)
    labels = rng.integers(0, 3, size=4)
    g = mx.grad(lambda z: nn.losses.cross_entropy(z, mx.array(labels), reduction="mean"))(
        mx.array(logits))
    soft = np.exp(logits - np_logsumexp(logits, 1)[:, None])
    soft[np.arange(4), labels] -= 1
    close(g, soft / 4)
