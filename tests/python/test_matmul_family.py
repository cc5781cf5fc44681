"""gather_mm, segmented_mm and block_masked_mm (C ops) against NumPy:
shapes, broadcasting, dtypes, errors, gradients and vmap."""
import numpy as np
import pytest

import weft as mx


def rand(*shape, seed=0):
    return np.random.RandomState(seed).randn(*shape).astype(np.float32)


def test_gather_mm_broadcast_indices_and_sorted_hint():
    a, b = rand(4, 3, 5), rand(6, 5, 2, seed=1)
    lhs, rhs = np.array([[1], [3]]), np.array([5, 0, 2, 2])
    for sorted_indices in (False, True):
        got = mx.gather_mm(mx.array(a), mx.array(b), mx.array(lhs), mx.array(rhs),
                           sorted_indices=sorted_indices)
        np.testing.assert_allclose(np.array(got), a[lhs] @ b[rhs], rtol=1e-5, atol=1e-5)
    neg = mx.gather_mm(mx.array(a), mx.array(b), mx.array([-1]), mx.array([-6]))
    np.testing.assert_allclose(np.array(neg), a[[3]] @ b[[0]], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="out of range"):
        mx.eval(mx.gather_mm(mx.array(a), mx.array(b), mx.array([4]), mx.array([0])))


def test_gather_mm_gradients_sum_duplicates():
    a, b = rand(3, 2, 4), rand(2, 4, 3, seed=2)
    lhs, rhs = np.array([0, 2, 0]), np.array([1, 1, 0])
    w = rand(3, 2, 3, seed=3)

    def loss(x, y):
        return (mx.gather_mm(x, y, mx.array(lhs), mx.array(rhs)) * mx.array(w)).sum()

    ga, gb = mx.grad(loss, argnums=(0, 1))(mx.array(a), mx.array(b))
    want_a, want_b = np.zeros_like(a), np.zeros_like(b)
    for p in range(3):
        want_a[lhs[p]] += w[p] @ b[rhs[p]].T
        want_b[rhs[p]] += a[lhs[p]].T @ w[p]
    np.testing.assert_allclose(np.array(ga), want_a, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.array(gb), want_b, rtol=1e-5, atol=1e-5)


def test_gather_mm_vmap_over_experts():
    a, b = rand(2, 2, 4), rand(2, 5, 4, 3, seed=4)
    rhs = np.array([[4, 1], [0, 0]])
    got = mx.vmap(lambda x, y, r: mx.gather_mm(x, y, None, r), in_axes=(0, 0, 0))(
        mx.array(a), mx.array(b), mx.array(rhs))
    want = np.stack([np.matmul(a[e], b[e][rhs[e]]) for e in range(2)])
    np.testing.assert_allclose(np.array(got), want, rtol=1e-5, atol=1e-5)


def test_segmented_mm_matches_numpy():
    a, b = rand(3, 8), rand(8, 4, seed=5)
    segments = np.array([[0, 2], [2, 8], [5, 5], [0, 8]])
    got = mx.segmented_mm(mx.array(a), mx.array(b), mx.array(segments))
    want = np.stack([a[:, s:e] @ b[s:e] for s, e in segments])
    np.testing.assert_allclose(np.array(got), want, rtol=1e-5, atol=1e-5)
    g = mx.grad(lambda x: mx.segmented_mm(x, mx.array(b), mx.array(segments)).sum())(mx.array(a))
    want_g = sum(np.pad(np.ones((3, 4)) @ b[s:e].T, ((0, 0), (s, 8 - e))) for s, e in segments)
    np.testing.assert_allclose(np.array(g), want_g, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError):
        mx.segmented_mm(mx.array(a), mx.array(b), mx.array([0, 1, 2]))
    with pytest.raises(ValueError):
        mx.segmented_mm(mx.array(a), mx.array(b), mx.array([[0.0, 1.0]]))


def test_block_masked_mm_float_and_bool_masks():
    a, b = rand(2, 5, 6), rand(6, 3, seed=6)
    mask_lhs = np.array([[1, 0, 1], [1, 1, 0], [0, 1, 1]], dtype=bool)
    mask_out = np.array([[0.5], [2.0], [1.0]], dtype=np.float32)
    got = mx.block_masked_mm(mx.array(a), mx.array(b), 2, mask_out=mx.array(mask_out),
                             mask_lhs=mx.array(mask_lhs))
    lhs = np.repeat(np.repeat(mask_lhs, 2, 0), 2, 1)[:5, :6]
    out = np.repeat(np.repeat(np.broadcast_to(mask_out, (3, 2)), 2, 0), 2, 1)[:5, :3]
    np.testing.assert_allclose(np.array(got), ((a * lhs) @ b) * out, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError):
        mx.block_masked_mm(mx.array(a), mx.array(b), 0, mx.array(mask_out))
