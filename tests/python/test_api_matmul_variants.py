"""gather_mm, block_masked_mm, einsum with ellipses and fast.rope with one
offset per batch entry, against NumPy (or weft's own unfused ops)."""
import numpy as np
import pytest

import weft as mx


def still_works():
    assert (mx.array([1.0]) * 3).tolist() == [3.0]


def rand(*shape, seed=0):
    return np.random.RandomState(seed).randn(*shape).astype(np.float32)


def test_gather_mm_picks_batch_matrices():
    a, b = rand(3, 2, 4), rand(5, 4, 6, seed=1)
    lhs, rhs = np.array([[0], [2]]), np.array([4, 0, 1])
    got = mx.gather_mm(mx.array(a), mx.array(b), mx.array(lhs), mx.array(rhs))
    want = np.matmul(a[lhs], b[rhs])
    assert got.shape == want.shape == (2, 3, 2, 6)
    np.testing.assert_allclose(np.array(got), want, rtol=1e-5, atol=1e-5)
    only_rhs = mx.gather_mm(mx.array(a[0]), mx.array(b), None, mx.array([3, 3]))
    np.testing.assert_allclose(np.array(only_rhs), a[0] @ b[[3, 3]], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError):
        mx.gather_mm(mx.array(a), mx.array(b), mx.array([0.5]), None)
    with pytest.raises(ValueError):
        mx.gather_mm(mx.array([1.0]), mx.array(b))
    still_works()


def test_block_masked_mm_masks_tiles():
    a, b = rand(4, 6), rand(6, 5, seed=2)
    lhs = np.array([[True, False, True], [False, True, True]])  # 2x2 tiles of a
    rhs = np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 2.0], [1.0, 1.0, 1.0]], np.float32)
    out = np.array([[True, False, True], [True, True, False]])

    def expand(mask, rows, cols):
        return np.repeat(np.repeat(mask, 2, 0), 2, 1)[:rows, :cols].astype(np.float32)

    want = ((a * expand(lhs, 4, 6)) @ (b * expand(rhs, 6, 5))) * expand(out, 4, 5)
    got = mx.block_masked_mm(mx.array(a), mx.array(b), 2, mx.array(out), mx.array(lhs),
                             mx.array(rhs))
    np.testing.assert_allclose(np.array(got), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.array(mx.block_masked_mm(mx.array(a), mx.array(b), 2)), a @ b,
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError):
        mx.block_masked_mm(mx.array([1.0]), mx.array(b), 2)
    still_works()


@pytest.mark.parametrize("spec, shapes", [
    ("...ij,...jk->...ik", [(1, 3, 4), (2, 4, 5)]),
    ("...ij,...jk->...ik", [(5, 1, 3, 4), (2, 4, 5)]),
    ("...i,...i->...", [(1, 4), (5, 4)]),
    ("ab...,b->ab...", [(2, 3, 4), (3,)]),
    ("...cd,c...->d...", [(2, 3, 4), (3,)]),
    ("a...d->...", [(2, 3, 4, 5)]),
])
def test_einsum_ellipsis_broadcasts(spec, shapes):
    ops = [rand(*s, seed=i) for i, s in enumerate(shapes)]
    got = mx.einsum(spec, *[mx.array(x) for x in ops])
    want = np.einsum(spec, *ops)
    assert got.shape == want.shape
    np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-4)


def test_einsum_ellipsis_errors():
    with pytest.raises(ValueError):
        mx.einsum("...ijk,jk", mx.zeros((2, 3)), mx.zeros((2, 3)))
    still_works()


def test_rope_offset_per_batch_entry():
    x = mx.array(rand(3, 2, 4, 8))
    offsets = mx.array([0, 5, 2])
    got = mx.fast.rope(x, 8, traditional=False, base=10000.0, scale=1.0, offset=offsets)
    for i, o in enumerate([0, 5, 2]):
        one = mx.fast.rope(x[i:i + 1], 8, traditional=False, base=10000.0, scale=1.0, offset=o)
        assert mx.array_equal(got[i:i + 1], one).item()
    with pytest.raises(ValueError):
        mx.fast.rope(x, 8, traditional=False, base=10000.0, scale=1.0, offset=mx.array([1, 2]))
    still_works()


def test_attention_sinks_against_numpy():
    q, k, v = rand(2, 4, 3, 8), rand(2, 2, 5, 8, seed=1), rand(2, 2, 5, 8, seed=2)
    sinks = rand(4, seed=3)
    scale = 8 ** -0.5
    kk, vv = np.repeat(k, 2, 1), np.repeat(v, 2, 1)
    scores = (q * scale) @ np.swapaxes(kk, -1, -2)
    causal = np.arange(5)[None, :] <= np.arange(3)[:, None] + 2
    for mask in (None, "causal"):
        s = scores if mask is None else np.where(causal, scores, -np.inf)
        full = np.concatenate([np.broadcast_to(sinks.reshape(1, 4, 1, 1), s.shape[:-1] + (1,)), s], -1)
        w = np.exp(full - full.max(-1, keepdims=True))
        w = (w / w.sum(-1, keepdims=True))[..., 1:]
        got = mx.fast.scaled_dot_product_attention(mx.array(q), mx.array(k), mx.array(v),
                                                   scale=scale, mask=mask, sinks=mx.array(sinks))
        np.testing.assert_allclose(np.array(got), w @ vv, rtol=1e-4, atol=1e-5)
    for bad in (mx.zeros((5,)), mx.zeros(()), mx.zeros((4,), mx.float16)):
        with pytest.raises(ValueError):
            mx.fast.scaled_dot_product_attention(mx.array(q), mx.array(k), mx.array(v), scale=scale,
                                                 sinks=bad)
    still_works()
