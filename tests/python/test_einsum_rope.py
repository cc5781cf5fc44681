"""einsum's greedy contraction path against NumPy's einsum_path, einsum's
values along it (float, complex, integer, broadcasting letters, diagonals,
gradients), and fast.rope with custom freqs against a direct formula."""
import numpy as np
import pytest

import weft as mx

LETTER_SIZES = dict(zip("abcdefghijklmopqABC", [2, 3, 4, 5, 4, 3, 2, 6, 5, 4, 3, 2, 5, 7, 4, 3, 2, 3, 4]))
CASES = ["eb,cb,fb->cef", "dd,fb,be,cdb->cef", "bca,cdb,dbf,afc->", "dcc,fce,ea,dbf->ab",
         "ab,bc,cd,de->ae", "ij,jk,kl", "abc,bcd,cde,def->af", "a,b,c->abc", "ab,ab,ab->ab",
         "ea,fb,abcd,gc,hd->efgh", "ij,jk,kl,lm,mf->if", "ii", "ij->i", "ii->i", "ij,jk->ijk"]


def operands(case, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    terms = case.split("->")[0].split(",")
    return [rng.standard_normal([LETTER_SIZES[c] for c in t]).astype(dtype) for t in terms]


@pytest.mark.parametrize("case", CASES)
def test_path_and_values_match_numpy(case):
    ops = operands(case)
    want_path = np.einsum_path(case, *ops, optimize="greedy")[0][1:]
    path, report = mx.einsum_path(case, *[mx.array(x) for x in ops])
    assert path == want_path
    assert isinstance(report, str) and "cost" in report
    got = mx.einsum(case, *[mx.array(x) for x in ops])
    np.testing.assert_allclose(np.array(got), np.einsum(case, *ops), rtol=2e-4, atol=2e-4)


def test_dtypes_broadcasting_and_gradient():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    b = np.arange(8, dtype=np.int32).reshape(4, 2)
    got = mx.einsum("ij,jk->ik", mx.array(a), mx.array(b))
    assert got.dtype == mx.int32 and got.tolist() == (a @ b).tolist()
    z = (np.ones((2, 3)) + 1j * np.arange(6).reshape(2, 3)).astype(np.complex64)
    np.testing.assert_allclose(np.array(mx.einsum("ij,kj->ik", mx.array(z), mx.array(z))),
                               np.einsum("ij,kj->ik", z, z), rtol=1e-5)
    x = np.random.default_rng(1).standard_normal((1, 4, 5)).astype(np.float32)
    y = np.random.default_rng(2).standard_normal((3, 5, 2)).astype(np.float32)
    np.testing.assert_allclose(np.array(mx.einsum("bij,bjk->bik", mx.array(x), mx.array(y))),
                               np.einsum("bij,bjk->bik", x, y), rtol=1e-5, atol=1e-5)
    w = mx.array(np.random.default_rng(3).standard_normal((4, 5)).astype(np.float32))
    grad = mx.grad(lambda m: mx.sum(mx.einsum("ij,jk,kl->il", m, mx.array(y[0]), mx.ones((2, 3)))))(w)
    want = np.ones((4, 3)) @ np.ones((2, 3)).T @ y[0].T
    np.testing.assert_allclose(np.array(grad), want, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError):
        mx.einsum("ij,jk", mx.zeros((2, 3)), mx.zeros((4, 2)))


def rope_reference(x, dims, traditional, scale, offset, freqs):
    n = x.shape[-2]
    theta = ((np.arange(n) + offset) * scale)[:, None] / freqs[None, :].astype(np.float64)
    cos, sin = np.cos(theta), np.sin(theta)
    x = x.astype(np.float64)
    if traditional:
        x1, x2 = x[..., 0:dims:2], x[..., 1:dims:2]
    else:
        x1, x2 = x[..., :dims // 2], x[..., dims // 2:dims]
    r1, r2 = x1 * cos - x2 * sin, x1 * sin + x2 * cos
    out = x.copy()
    if traditional:
        out[..., 0:dims:2], out[..., 1:dims:2] = r1, r2
    else:
        out[..., :dims // 2], out[..., dims // 2:dims] = r1, r2
    return out


@pytest.mark.parametrize("traditional", [False, True])
@pytest.mark.parametrize("dims", [8, 6])
def test_rope_with_freqs(traditional, dims):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 5, 8)).astype(np.float32)
    freqs = rng.uniform(0.5, 4.0, dims // 2).astype(np.float32)
    got = mx.fast.rope(mx.array(x), dims, traditional=traditional, base=None, scale=0.5,
                       offset=3, freqs=mx.array(freqs))
    want = rope_reference(x, dims, traditional, 0.5, 3, freqs)
    np.testing.assert_allclose(np.array(got), want, rtol=1e-5, atol=1e-5)
    half = mx.fast.rope(mx.array(x).astype(mx.float16), dims, traditional=traditional,
                        base=None, scale=0.5, offset=3, freqs=mx.array(freqs))
    assert half.dtype == mx.float16
    np.testing.assert_allclose(np.array(half.astype(mx.float32)), want, rtol=1e-2, atol=1e-2)
    for bad in [freqs[:-1], freqs.reshape(1, -1)]:
        with pytest.raises(ValueError):
            mx.fast.rope(mx.array(x), dims, traditional=traditional, base=None, scale=1.0,
                         offset=0, freqs=mx.array(bad))
