"""weft.linalg against np.linalg: norm (every ord, axis, keepdims),
cross, and the factorizations (inv, tri_inv, cholesky, cholesky_inv,
solve, solve_triangular, lu, lu_factor, qr, eigh, eigvalsh, svd, pinv) in
float32 and float64, batched; complex64 eigh, eigvalsh and svd against
NumPy (values; vectors through reconstruction) and MLX where installed;
errors (ValueError); gradients of norm, inv, solve, solve_triangular,
cholesky and eigh (complex64 too) against finite differences."""
import itertools
import math

import numpy as np
import pytest

import weft as mx

RNG = np.random.default_rng(0)
TOL = {np.float32: 2e-4, np.float64: 1e-10}


def arr(x):
    """x as a weft array of the same dtype (float64 stays float64)."""
    x = np.asarray(x)
    return mx.array(x, dtype=mx.float64) if x.dtype == np.float64 else mx.array(x)


def spd(batch, n, dtype):
    b = RNG.standard_normal(batch + (n, n))
    return (b @ np.swapaxes(b, -1, -2) + n * np.eye(n)).astype(dtype)


def well_conditioned(shape, dtype):
    a = RNG.standard_normal(shape)
    return (a + 3 * np.eye(shape[-1])).astype(dtype)


# ------------------------------------------------------------------ norm


VECTOR_ORDS = [None, 0.5, 0, 1, 2, 3, -1, math.inf, -math.inf]
MATRIX_ORDS = [None, "fro", "nuc", -1, 1, -2, 2, math.inf, -math.inf]


@pytest.mark.parametrize("shape", [(4,), (3, 4), (2, 3, 4)])
def test_norm_every_ord_and_axis(shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    for naxes in (1, 2):
        if naxes > len(shape):
            continue
        ords = VECTOR_ORDS if naxes == 1 else MATRIX_ORDS
        for axis in itertools.permutations(range(-len(shape), 0), naxes):
            for o, keepdims in itertools.product(ords, (False, True)):
                want = np.linalg.norm(x, ord=o, axis=axis, keepdims=keepdims)
                got = mx.linalg.norm(arr(x), ord=o, axis=axis if naxes == 2 else axis[0],
                                     keepdims=keepdims)
                assert got.shape == want.shape, (o, axis, keepdims)
                np.testing.assert_allclose(np.array(got), want, rtol=1e-5, atol=1e-5)


def test_norm_without_axis_and_dtypes():
    for shape in [(5,), (3, 4), (2, 3, 4)]:
        x = np.arange(1, math.prod(shape) + 1).reshape(shape)
        for keepdims in (False, True):
            want = np.linalg.norm(x, keepdims=keepdims)
            got = mx.linalg.norm(arr(x), keepdims=keepdims)
            assert got.shape == want.shape and got.dtype == mx.float32
            np.testing.assert_allclose(np.array(got), want, rtol=1e-6)
    m = RNG.standard_normal((3, 4))
    for o in [None, "fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf]:
        np.testing.assert_allclose(np.array(mx.linalg.norm(arr(m), ord=o)),
                                   np.linalg.norm(m, ord=o), rtol=1e-10)
    z = (RNG.standard_normal((3, 3)) + 1j * RNG.standard_normal((3, 3))).astype(np.complex64)
    np.testing.assert_allclose(np.array(mx.linalg.norm(arr(z))), np.linalg.norm(z),
                               rtol=1e-5)
    np.testing.assert_allclose(np.array(mx.linalg.norm(arr(z), axis=1)),
                               np.linalg.norm(z, axis=1), rtol=1e-5)


def test_norm_errors():
    x = mx.zeros((2, 3, 4))
    with pytest.raises(ValueError):
        mx.linalg.norm(x, ord=2)  # an ord needs 1-d or 2-d without axis
    with pytest.raises(ValueError):
        mx.linalg.norm(mx.zeros((3,)), ord="fro")
    with pytest.raises(ValueError):
        mx.linalg.norm(mx.zeros((3, 3)), ord=3, axis=(0, 1))
    with pytest.raises(ValueError):
        mx.linalg.norm(x, axis=(0, 1, 2))
    with pytest.raises(ValueError):
        mx.linalg.norm(x, axis=3)


def numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


def check_grad(fn, x, tol=1e-6):
    """mx.grad of sum(w * fn(x)) against central differences, in float64."""
    w = RNG.standard_normal(np.asarray(fn(arr(x))).shape)

    def loss(a):
        return mx.sum(arr(w) * fn(a))

    got = np.array(mx.grad(loss)(arr(x)))
    want = numeric_grad(lambda v: float(np.array(loss(arr(v)))), x)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("o", [None, 1, 2, 3, math.inf])
def test_norm_gradient(o):
    x = RNG.standard_normal((3, 4))
    check_grad(lambda a: mx.linalg.norm(a, ord=o, axis=1), x)
    if o in (None, 1, math.inf):
        check_grad(lambda a: mx.linalg.norm(a, ord="fro" if o is None else o), x)


# ------------------------------------------------------------------ cross


def test_cross():
    for shape, axis in [((3,), -1), ((4, 3), -1), ((3, 5), 0), ((2, 3, 3), 1)]:
        a = RNG.standard_normal(shape).astype(np.float32)
        b = RNG.standard_normal(shape).astype(np.float32)
        got = mx.linalg.cross(arr(a), arr(b), axis=axis)
        np.testing.assert_allclose(np.array(got), np.cross(a, b, axis=axis), rtol=1e-5,
                                   atol=1e-6)
    a2, b3 = RNG.standard_normal((4, 2)), RNG.standard_normal((4, 3))
    want = np.cross(np.pad(a2, ((0, 0), (0, 1))), b3)
    np.testing.assert_allclose(np.array(mx.linalg.cross(arr(a2), arr(b3))), want)
    with pytest.raises(ValueError):
        mx.linalg.cross(mx.zeros((4,)), mx.zeros((4,)))
    with pytest.raises(ValueError):
        mx.linalg.cross(mx.zeros((3,)), mx.zeros((2, 3)))
    check_grad(lambda a: mx.linalg.cross(a, arr(b3)), RNG.standard_normal((4, 3)))


# ------------------------------------------------------------------ factorizations


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_inv_solve(dtype):
    a = well_conditioned((2, 3, 5, 5), dtype)
    b = RNG.standard_normal((2, 1, 5, 3)).astype(dtype)
    inv = mx.linalg.inv(arr(a))
    assert inv.dtype == arr(a).dtype
    np.testing.assert_allclose(np.array(inv), np.linalg.inv(a), rtol=TOL[dtype] * 10,
                               atol=TOL[dtype])
    np.testing.assert_allclose(np.array(mx.linalg.solve(arr(a), arr(b))),
                               np.linalg.solve(a, b), rtol=TOL[dtype] * 10, atol=TOL[dtype])
    v = RNG.standard_normal(5).astype(dtype)
    np.testing.assert_allclose(np.array(mx.linalg.solve(arr(a[0, 0]), arr(v))),
                               np.linalg.solve(a[0, 0], v), rtol=TOL[dtype] * 10,
                               atol=TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
def test_eig_against_numpy(dtype):
    a = RNG.standard_normal((4, 7, 7))
    if dtype == np.complex64:
        a = a + 1j * RNG.standard_normal((4, 7, 7))
    a = a.astype(dtype)
    w, v = mx.linalg.eig(arr(a))
    assert w.dtype == mx.complex64 and v.dtype == mx.complex64
    assert w.shape == (4, 7) and v.shape == (4, 7, 7)
    w, v = np.array(w), np.array(v)
    np.testing.assert_allclose(a @ v, w[..., None, :] * v, atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(v, axis=-2), 1.0, rtol=1e-5)
    key = lambda x: np.lexsort((np.round(x.imag, 4), np.round(x.real, 4)))
    want = np.linalg.eigvals(a.astype(np.complex128))
    for got_row, want_row in zip(w, want):
        np.testing.assert_allclose(got_row[key(got_row)], want_row[key(want_row)], atol=1e-4)
    np.testing.assert_array_equal(np.array(mx.linalg.eigvals(arr(a))), w)


def test_eig_errors_and_no_gradient():
    with pytest.raises(ValueError):
        mx.linalg.eig(mx.zeros((2, 3)))
    with pytest.raises(ValueError):
        mx.linalg.eigvals(mx.zeros((2, 2), dtype=mx.int32))
    with pytest.raises(NotImplementedError, match="linalg_eig"):
        mx.grad(lambda x: mx.real(mx.linalg.eigvals(x)).sum())(mx.eye(3))
    w, v = mx.linalg.eig(mx.zeros((0, 0)))
    assert w.shape == (0,) and v.shape == (0, 0)
    batched = mx.vmap(mx.linalg.eigvals)(mx.array(np.diag([2.0, 3.0])[None].repeat(2, 0)))
    assert sorted(np.array(batched)[1].real.tolist()) == [2.0, 3.0]


def test_singular_inverse_and_solve_raise():
    """An exactly singular matrix fails inv, tri_inv and solve at evaluation
    with RuntimeError, as MLX (LAPACK's zero pivot); weft stays usable."""
    singular = arr(np.array([[1.0, 2.0], [2.0, 4.0]], np.float32))
    with pytest.raises(RuntimeError, match="singular"):
        mx.eval(mx.linalg.inv(singular))
    with pytest.raises(RuntimeError, match="singular"):
        mx.eval(mx.linalg.solve(singular, mx.array([1.0, 1.0])))
    with pytest.raises(RuntimeError, match="singular"):
        mx.eval(mx.linalg.tri_inv(mx.array([[0.0, 0.0], [1.0, 1.0]]), upper=False))
    np.testing.assert_array_equal(np.array(mx.linalg.inv(mx.array([[2.0, 0.0], [0.0, 4.0]]))),
                                  [[0.5, 0.0], [0.0, 0.25]])


@pytest.mark.parametrize("upper", [False, True])
def test_triangular(upper):
    a = well_conditioned((3, 4, 4), np.float64)
    tri = np.triu(a) if upper else np.tril(a)
    got = mx.linalg.tri_inv(arr(a), upper=upper)
    np.testing.assert_allclose(np.array(got), np.linalg.inv(tri), rtol=1e-10, atol=1e-12)
    b = RNG.standard_normal((3, 4, 2))
    x = mx.linalg.solve_triangular(arr(a), arr(b), upper=upper)
    np.testing.assert_allclose(np.array(x), np.linalg.solve(tri, b), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(dtype, upper):
    a = spd((3,), 5, dtype)
    f = np.array(mx.linalg.cholesky(arr(a), upper=upper))
    want = np.linalg.cholesky(a)
    np.testing.assert_allclose(f, np.swapaxes(want, -1, -2) if upper else want,
                               rtol=TOL[dtype] * 10, atol=TOL[dtype])
    inv = mx.linalg.cholesky_inv(arr(f), upper=upper)
    np.testing.assert_allclose(np.array(inv), np.linalg.inv(a), rtol=TOL[dtype] * 10,
                               atol=TOL[dtype])
    bad = np.array([[1.0, 2.0], [2.0, 1.0]], dtype)  # indefinite: NaN, as documented
    assert np.isnan(np.array(mx.linalg.cholesky(arr(bad)))).all()


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3), (2, 3, 3)])
def test_lu(shape):
    a = RNG.standard_normal(shape)
    P, L, U = mx.linalg.lu(arr(a))
    P, L, U = np.array(P), np.array(L), np.array(U)
    assert P.dtype == np.uint32
    rebuilt = np.take_along_axis(L, P[..., None].astype(np.int64), axis=-2) @ U
    np.testing.assert_allclose(rebuilt, a, rtol=1e-12, atol=1e-12)
    LU, piv = mx.linalg.lu_factor(arr(a))
    LU = np.array(LU)
    k = min(shape[-2:])
    np.testing.assert_allclose(np.triu(LU)[..., :k, :], U)
    assert np.array(piv).shape == shape[:-2] + (k,)


@pytest.mark.parametrize("shape", [(4, 4), (6, 3), (3, 6), (2, 5, 4), (0, 3), (3, 0)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_qr(shape, dtype):
    a = RNG.standard_normal(shape).astype(dtype)
    Q, R = mx.linalg.qr(arr(a))
    Qn, Rn = np.linalg.qr(a)
    assert Q.shape == Qn.shape and R.shape == Rn.shape
    Q, R = np.array(Q), np.array(R)
    np.testing.assert_allclose(Q @ R, a, rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)
    np.testing.assert_allclose(np.swapaxes(Q, -1, -2) @ Q, np.broadcast_to(
        np.eye(Q.shape[-1]), Q.shape[:-2] + (Q.shape[-1],) * 2), atol=TOL[dtype] * 10)
    np.testing.assert_array_equal(np.tril(R, -1), 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(dtype, uplo):
    a = RNG.standard_normal((3, 5, 5)).astype(dtype)  # not symmetric: one triangle read
    w, v = mx.linalg.eigh(arr(a), UPLO=uplo)
    wn = np.linalg.eigvalsh(a, UPLO=uplo)
    np.testing.assert_allclose(np.array(w), wn, rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)
    np.testing.assert_allclose(np.array(mx.linalg.eigvalsh(arr(a), UPLO=uplo)), wn,
                               rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)
    sym = np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2) if uplo == "L" else \
        np.triu(a) + np.swapaxes(np.triu(a, 1), -1, -2)
    v = np.array(v)
    np.testing.assert_allclose(sym @ v, v * np.array(w)[..., None, :],
                               atol=TOL[dtype] * 20)
    with pytest.raises(ValueError):
        mx.linalg.eigh(arr(a), UPLO="X")


@pytest.mark.parametrize("shape", [(4, 4), (6, 3), (3, 6), (2, 4, 3), (0, 3), (3, 0)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_svd_pinv(shape, dtype):
    a = RNG.standard_normal(shape).astype(dtype)
    U, S, Vt = mx.linalg.svd(arr(a))
    Un, Sn, Vtn = np.linalg.svd(a)
    assert U.shape == Un.shape and S.shape == Sn.shape and Vt.shape == Vtn.shape
    np.testing.assert_allclose(np.array(S), Sn, rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)
    np.testing.assert_allclose(np.array(mx.linalg.svd(arr(a), compute_uv=False)), Sn,
                               rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)
    k = min(shape[-2:])
    U, S, Vt = np.array(U), np.array(S), np.array(Vt)
    np.testing.assert_allclose((U[..., :k] * S[..., None, :]) @ Vt[..., :k, :], a,
                               atol=TOL[dtype] * 10)
    np.testing.assert_allclose(np.array(mx.linalg.pinv(arr(a))), np.linalg.pinv(a),
                               rtol=TOL[dtype] * 100, atol=TOL[dtype] * 100)


def test_rank_deficient_pinv():
    a = np.outer(np.arange(1.0, 5.0), np.array([1.0, -2.0, 0.5]))
    np.testing.assert_allclose(np.array(mx.linalg.pinv(arr(a))), np.linalg.pinv(a),
                               rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("fn", ["inv", "cholesky", "qr", "lu", "eigh", "svd", "tri_inv"])
def test_errors(fn):
    f = getattr(mx.linalg, fn)
    with pytest.raises(ValueError):
        f(arr(1.0))  # 0-d
    with pytest.raises(ValueError):
        f(arr([1.0, 2.0]))  # 1-d
    with pytest.raises(ValueError, match="float32(,| or) float64"):
        f(arr([[1, 0], [0, 1]]))  # integer
    if fn not in ("qr", "lu", "svd"):
        with pytest.raises(ValueError, match="square"):
            f(mx.zeros((2, 3)))


def test_gradients():
    a = well_conditioned((3, 3), np.float64)
    b = RNG.standard_normal((3, 2))
    check_grad(mx.linalg.inv, a)
    check_grad(lambda x: mx.linalg.solve(x, arr(b)), a)
    check_grad(lambda x: mx.linalg.solve(arr(a), x), b)
    for upper in (False, True):
        check_grad(lambda x: mx.linalg.solve_triangular(x, arr(b), upper=upper), a)
        check_grad(lambda x: mx.linalg.tri_inv(x, upper=upper), a)
        # cholesky of a symmetrised input: the gradient flows through x + x^T
        s = spd((), 3, np.float64)
        check_grad(lambda x: mx.linalg.cholesky((x + x.T) / 2, upper=upper), s)
    sym = RNG.standard_normal((4, 4))
    check_grad(lambda x: mx.linalg.eigvalsh((x + x.T) / 2), sym)
    for uplo in ("L", "U"):  # the vectors through V diag(w) V^T, free of their signs
        def rebuilt(x, uplo=uplo):
            w, v = mx.linalg.eigh((x + x.T) / 2, UPLO=uplo)
            return (v * w[None, :]) @ v.T
        check_grad(rebuilt, sym)


def test_vmap_and_no_gradient_for_qr():
    x = well_conditioned((4, 3, 3), np.float64)
    got = mx.vmap(mx.linalg.inv, in_axes=1)(arr(np.swapaxes(x, 0, 1)))
    np.testing.assert_allclose(np.array(got), np.linalg.inv(x), rtol=1e-10, atol=1e-12)
    with pytest.raises(Exception, match="linalg_qr"):
        mx.grad(lambda a: mx.sum(mx.linalg.qr(a)[1]))(arr(x))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_det_slogdet(dtype):
    a = RNG.standard_normal((2, 3, 4, 4)).astype(dtype)
    np.testing.assert_allclose(np.array(mx.linalg.det(arr(a))), np.linalg.det(a),
                               rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)
    sign, logabs = mx.linalg.slogdet(arr(a))
    sn, ln = np.linalg.slogdet(a)
    np.testing.assert_array_equal(np.array(sign), sn)
    np.testing.assert_allclose(np.array(logabs), ln, rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)
    singular = np.array([[1.0, 2.0], [2.0, 4.0]], dtype)
    assert float(np.array(mx.linalg.det(arr(singular)))) == 0.0
    s, l = mx.linalg.slogdet(arr(singular))
    assert float(np.array(s)) == 0.0 and float(np.array(l)) == -math.inf
    assert np.array(mx.linalg.det(mx.zeros((3, 0, 0)))).tolist() == [1.0, 1.0, 1.0]
    assert float(np.array(mx.linalg.det(mx.array([[1, 2], [3, 4]])))) == pytest.approx(-2.0)
    with pytest.raises(ValueError):
        mx.linalg.det(mx.zeros((2, 3)))


def test_semidefinite_cholesky():
    """A singular positive semi-definite matrix: a finite factor with
    L L^T = a to float32 rounding (as LAPACK's float32 factorization)."""
    r = np.arange(1.0, 10.0, dtype=np.float32).reshape(3, 3)
    a = r.T @ r / 81 + np.float32(1 / 9)
    L = np.array(mx.linalg.cholesky(arr(a)))
    assert np.isfinite(L).all()
    np.testing.assert_allclose(L @ L.T, a, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ complex64 eigh, svd


def complex_normal(shape):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(np.complex64)


def hermitian_of(a, uplo):
    """The Hermitian matrix eigh reads from a's UPLO triangle."""
    tri = np.tril(a, -1) if uplo == "L" else np.triu(a, 1)
    diag = np.real(np.diagonal(a, axis1=-2, axis2=-1))
    return tri + np.conj(np.swapaxes(tri, -1, -2)) + diag[..., None] * np.eye(a.shape[-1])


def assert_unitary_columns(x, atol=1e-5):
    eye = np.broadcast_to(np.eye(x.shape[-1]), x.shape[:-2] + (x.shape[-1],) * 2)
    np.testing.assert_allclose(np.conj(np.swapaxes(x, -1, -2)) @ x, eye, atol=atol)


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_complex_eigh_against_numpy(uplo):
    a = complex_normal((3, 6, 6))  # not Hermitian: one triangle read, the diagonal's real part
    w, v = mx.linalg.eigh(arr(a), UPLO=uplo)
    assert w.dtype == mx.float32 and v.dtype == mx.complex64
    assert w.shape == (3, 6) and v.shape == (3, 6, 6)
    w, v = np.array(w), np.array(v)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a, UPLO=uplo), atol=1e-4)
    np.testing.assert_array_equal(np.array(mx.linalg.eigvalsh(arr(a), UPLO=uplo)), w)
    np.testing.assert_allclose(hermitian_of(a, uplo) @ v, v * w[..., None, :], atol=1e-4)
    assert_unitary_columns(v)
    # the phase convention: a component of largest magnitude (to float32
    # rounding, which may reorder near ties) is real and positive
    mags = np.abs(v)
    top = mags >= mags.max(axis=-2, keepdims=True) - 1e-6
    assert (top & (v.imag == 0) & (v.real > 0)).any(axis=-2).all()


def test_complex_eigh_known_and_repeated_spectrum():
    q, _ = np.linalg.qr(complex_normal((5, 5)).astype(np.complex128))
    for spectrum in ([-3.0, -1.0, 0.5, 2.0, 4.0], [1.0, 1.0, 1.0, -2.0, -2.0]):
        a = ((q * np.array(spectrum)) @ q.conj().T).astype(np.complex64)
        w, v = mx.linalg.eigh(arr(a))
        np.testing.assert_allclose(np.array(w), np.sort(spectrum), atol=1e-5)
        v = np.array(v)
        np.testing.assert_allclose(a @ v, v * np.array(w)[None, :], atol=1e-5)
        assert_unitary_columns(v)
    w, v = mx.linalg.eigh(mx.array(np.array([[2 + 5j]], np.complex64)))
    assert np.array(w).tolist() == [2.0] and np.array(v).tolist() == [[1 + 0j]]
    w, v = mx.linalg.eigh(mx.zeros((0, 3, 3), dtype=mx.complex64))
    assert w.shape == (0, 3) and w.dtype == mx.float32 and v.shape == (0, 3, 3)


@pytest.mark.parametrize("shape", [(4, 4), (6, 3), (3, 6), (2, 4, 3), (1, 5), (0, 3), (3, 0),
                                   (0, 2, 2)])
def test_complex_svd_against_numpy(shape):
    a = complex_normal(shape)
    U, S, Vt = mx.linalg.svd(arr(a))
    Un, Sn, Vtn = np.linalg.svd(a)
    assert U.shape == Un.shape and S.shape == Sn.shape and Vt.shape == Vtn.shape
    assert U.dtype == mx.complex64 and S.dtype == mx.float32 and Vt.dtype == mx.complex64
    S_only = mx.linalg.svd(arr(a), compute_uv=False)
    assert S_only.dtype == mx.float32
    U, S, Vt = np.array(U), np.array(S), np.array(Vt)
    np.testing.assert_allclose(S, Sn, atol=1e-4)
    np.testing.assert_array_equal(np.array(S_only), S)
    k = min(shape[-2:])
    np.testing.assert_allclose((U[..., :k] * S[..., None, :]) @ Vt[..., :k, :], a, atol=1e-4)
    assert_unitary_columns(U)
    assert_unitary_columns(np.conj(np.swapaxes(Vt, -1, -2)))


def test_complex_svd_rank_deficient():
    x, y = complex_normal((5, 2)), complex_normal((4, 2))
    a = (x @ y.conj().T).astype(np.complex64)  # rank 2
    U, S, Vt = (np.array(t) for t in mx.linalg.svd(arr(a)))
    np.testing.assert_allclose(S, np.linalg.svd(a, compute_uv=False), atol=1e-4)
    assert S[2:].max() < 1e-4 * S[0]
    np.testing.assert_allclose((U[:, :4] * S) @ Vt, a, atol=1e-4)
    assert_unitary_columns(U)
    assert_unitary_columns(Vt.conj().T)


def test_complex_vmap_norm_pinv():
    a = complex_normal((4, 3, 3))
    got = mx.vmap(mx.linalg.eigvalsh, in_axes=1)(arr(np.swapaxes(a, 0, 1)))
    np.testing.assert_array_equal(np.array(got), np.array(mx.linalg.eigvalsh(arr(a))))
    got = mx.vmap(lambda x: mx.linalg.svd(x, compute_uv=False))(arr(a))
    np.testing.assert_allclose(np.array(got), np.linalg.svd(a, compute_uv=False), atol=1e-4)
    for o in (2, -2, "nuc"):  # NumPy's (float) values from the complex SVD
        np.testing.assert_allclose(np.array(mx.linalg.norm(arr(a[0]), ord=o)),
                                   np.linalg.norm(a[0], ord=o), rtol=1e-5)
    with pytest.raises(ValueError, match="pinv"):
        mx.linalg.pinv(arr(a))  # MLX rejects complex pinv


def test_complex_eigh_gradient():
    """grad (MLX's convention: dL = Re sum(conj(g) da)) and jvp of real losses
    of complex64 eigh against float32 central differences; the vectors'
    loss depends on their phases, so the phase convention's derivative counts."""
    a0 = complex_normal((3, 3))
    u = mx.array(RNG.standard_normal((3, 3)).astype(np.float32))

    def herm(a):
        return (a + mx.conjugate(mx.swapaxes(a, -1, -2))) * 0.5

    losses = [lambda a: mx.sum(mx.linalg.eigvalsh(herm(a)) * u[0]),
              lambda a: mx.sum(mx.real(mx.linalg.eigh(herm(a), UPLO="U")[1]) * u
                               + mx.imag(mx.linalg.eigh(herm(a), UPLO="U")[1]))]
    h = 2e-3
    for loss in losses:
        value = lambda a: float(np.array(loss(mx.array(a.astype(np.complex64)))))
        g = np.array(mx.grad(loss)(arr(a0)))
        fd = np.zeros(a0.shape, np.complex128)
        for idx in np.ndindex(a0.shape):
            for part in (1, 1j):
                e = np.zeros(a0.shape, np.complex128)
                e[idx] = part * h
                fd[idx] += part * (value(a0 + e) - value(a0 - e)) / (2 * h)
        np.testing.assert_allclose(g, fd, atol=2e-3 * max(1.0, np.abs(fd).max()))
        t = complex_normal((3, 3))
        _, (tangent,) = mx.jvp(loss, [arr(a0)], [arr(t)])
        want = (value(a0 + h * t) - value(a0 - h * t)) / (2 * h)
        assert float(np.array(tangent)) == pytest.approx(want, abs=2e-3 * max(1.0, abs(want)))


def _dtype_name(d):
    return str(d).rsplit(".", 1)[-1]


def test_complex_eigh_svd_match_mlx():
    mlx = pytest.importorskip("mlx.core")
    a = complex_normal((2, 5, 5))
    for uplo in ("L", "U"):
        got = mx.linalg.eigh(arr(a), UPLO=uplo)
        want = mlx.linalg.eigh(mlx.array(a), UPLO=uplo, stream=mlx.cpu)
        for g, m in zip(got, want):
            assert _dtype_name(g.dtype) == _dtype_name(m.dtype) and g.shape == tuple(m.shape)
        np.testing.assert_allclose(np.array(got[0]), np.array(want[0]), atol=1e-4)
    for shape in ((5, 3), (3, 5)):
        b = complex_normal(shape)
        got = mx.linalg.svd(arr(b))
        want = mlx.linalg.svd(mlx.array(b), stream=mlx.cpu)
        for g, m in zip(got, want):
            assert _dtype_name(g.dtype) == _dtype_name(m.dtype) and g.shape == tuple(m.shape)
        np.testing.assert_allclose(np.array(got[1]), np.array(want[1]), atol=1e-4)
        s_only = mlx.linalg.svd(mlx.array(b), compute_uv=False, stream=mlx.cpu)
        assert _dtype_name(mx.linalg.svd(arr(b), compute_uv=False).dtype) == \
            _dtype_name(s_only.dtype)
