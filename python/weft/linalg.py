"""weft.linalg: linear algebra under mlx.core.linalg's names.

norm and cross are composed from weft's ops (so they differentiate like
any composition). The factorizations run weft's own CPU kernels
(weft.h's wf_linalg_* section): float32 and float64 inputs (eig, eigh,
eigvalsh and svd take complex64 too, as MLX), batched over the leading
dims. An exactly singular matrix makes inv, tri_inv and the
solves raise RuntimeError when evaluated (as MLX); cholesky of a
non-positive-definite matrix gives NaN (see docs/PYTHON.md).
"""
import math as _math

import weft as _mx  # bound now, attributes looked up at call time

from . import _core

_VECTOR_ORD_ERROR = "[linalg::norm] Invalid ord {!r} for vector norm."
_MATRIX_ORD_ERROR = "[linalg::norm] Invalid ord {!r} for matrix norm."


def _axes(axis, ndim):
    """axis (None, an int or a sequence) as a tuple of non-negative ints."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out = []
    for ax in axes:
        if not isinstance(ax, int):
            raise ValueError("[linalg::norm] axes must be integers")
        if ax < -ndim or ax >= ndim:
            raise ValueError(f"[linalg::norm] axis {ax} is out of bounds for rank {ndim}")
        out.append(ax % ndim)
    if len(set(out)) != len(out):
        raise ValueError("[linalg::norm] repeated axes")
    return tuple(out)


def _float_abs(x):
    """|x| in a floating type (complex gives its float magnitude)."""
    x = _mx.abs(x)
    if not _mx.issubdtype(x.dtype, _mx.floating):
        x = x.astype(_mx.float32)
    return x


def _as_float(x):
    """x itself when floating or complex, else x as float32."""
    if _mx.issubdtype(x.dtype, _mx.inexact):
        return x
    return x.astype(_mx.float32)


def _vector_norm(x, ord, axis, keepdims):
    if ord is None or ord == 2:
        a = _float_abs(x)
        return _mx.sqrt(_mx.sum(a * a, axis=axis, keepdims=keepdims))
    if isinstance(ord, str):
        raise ValueError(_VECTOR_ORD_ERROR.format(ord))
    a = _float_abs(x)
    if ord == _math.inf:
        return _mx.max(a, axis=axis, keepdims=keepdims)
    if ord == -_math.inf:
        return _mx.min(a, axis=axis, keepdims=keepdims)
    if ord == 0:
        return _mx.sum((a != 0).astype(a.dtype), axis=axis, keepdims=keepdims)
    if ord == 1:
        return _mx.sum(a, axis=axis, keepdims=keepdims)
    p = float(ord)
    return _mx.power(_mx.sum(_mx.power(a, p), axis=axis, keepdims=keepdims), 1.0 / p)


def _singular_values(x, row, col):
    """Singular values of x's (row, col) matrices, batch axes first."""
    lead = [d for d in range(x.ndim) if d not in (row, col)]
    return svd(_mx.transpose(x, lead + [row, col]), compute_uv=False)


def _restore_reduced(y, x_ndim, axes, keepdims):
    """y (x reduced over `axes`, dropped) with the axes kept as size 1."""
    if not keepdims:
        return y
    for ax in sorted(axes):
        y = _mx.expand_dims(y, ax)
    return y


def _matrix_norm(x, ord, axes, keepdims):
    row, col = axes
    if ord is None or ord == "fro":
        a = _float_abs(x)
        return _mx.sqrt(_mx.sum(a * a, axis=list(axes), keepdims=keepdims))
    if ord in ("nuc", 2, -2):
        s = _singular_values(_as_float(x), row, col)
        if ord == "nuc":
            r = _mx.sum(s, axis=-1)
        elif ord == 2:
            r = _mx.max(s, axis=-1)
        else:
            r = _mx.min(s, axis=-1)
        return _restore_reduced(r, x.ndim, axes, keepdims)
    if isinstance(ord, str) or ord not in (1, -1, _math.inf, -_math.inf):
        raise ValueError(_MATRIX_ORD_ERROR.format(ord))
    a = _float_abs(x)
    # 1-norms sum down the columns (over the row axis), inf-norms along the rows.
    sum_axis, pick_axis = (row, col) if ord in (1, -1) else (col, row)
    sums = _mx.sum(a, axis=sum_axis, keepdims=True)
    pick = _mx.max if ord > 0 else _mx.min
    r = pick(sums, axis=pick_axis, keepdims=True)
    if keepdims:
        return r
    return _mx.squeeze(r, axis=list(axes))


def norm(a, ord=None, axis=None, keepdims=False, *, stream=None):
    """Vector or matrix norm (mlx.core.linalg.norm; NumPy's ord rules).

    With axis None: ord None flattens a (any rank) and takes the 2-norm;
    otherwise a must be 1-d (vector norm) or 2-d (matrix norm). An int axis
    gives vector norms, a pair of axes matrix norms."""
    a = a if isinstance(a, _mx.array) else _mx.array(a)
    with _mx.stream(stream) if stream is not None else _nullcontext():
        if axis is None:
            if ord is None:
                r = _vector_norm(_mx.reshape(a, (-1,)), None, 0, False)
                if keepdims:
                    r = _mx.reshape(r, (1,) * a.ndim)
                return r
            if a.ndim == 1:
                return _vector_norm(a, ord, 0, keepdims)
            if a.ndim == 2:
                return _matrix_norm(a, ord, (0, 1), keepdims)
            raise ValueError("[linalg::norm] Improper number of dimensions to compute norm "
                             "(an ord needs a 1-d or 2-d array when axis is None).")
        axes = _axes(axis, a.ndim)
        if len(axes) == 1:
            return _vector_norm(a, ord, axes[0], keepdims)
        if len(axes) == 2:
            return _matrix_norm(a, ord, axes, keepdims)
        raise ValueError("[linalg::norm] Improper number of dimensions to compute norm "
                         f"(got {len(axes)} axes).")


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def cross(a, b, axis=-1, *, stream=None):
    """Cross product of 3-vectors (or 2-vectors, taken with a zero third
    component) along `axis`; the other dims broadcast."""
    a = a if isinstance(a, _mx.array) else _mx.array(a)
    b = b if isinstance(b, _mx.array) else _mx.array(b)
    with _mx.stream(stream) if stream is not None else _nullcontext():
        if a.ndim != b.ndim:
            raise ValueError("[linalg::cross] The input arrays must have the same number of "
                             f"dimensions (got {a.ndim} and {b.ndim}).")
        if a.ndim == 0 or axis < -a.ndim or axis >= a.ndim:
            raise ValueError(f"[linalg::cross] axis {axis} is out of range for rank {a.ndim}")
        axis %= a.ndim
        if a.shape[axis] not in (2, 3) or b.shape[axis] not in (2, 3):
            raise ValueError("[linalg::cross] The specified axis must have size 2 or 3 "
                             f"(got {a.shape[axis]} and {b.shape[axis]}).")
        a = _as_3_vectors(a, axis)
        b = _as_3_vectors(b, axis)
        ax = [_mx.take(a, i, axis=axis) for i in range(3)]
        bx = [_mx.take(b, i, axis=axis) for i in range(3)]
        parts = [ax[1] * bx[2] - ax[2] * bx[1],
                 ax[2] * bx[0] - ax[0] * bx[2],
                 ax[0] * bx[1] - ax[1] * bx[0]]
        return _mx.stack(parts, axis=axis)


def _as_3_vectors(x, axis):
    if x.shape[axis] == 3:
        return x
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, 1)
    return _mx.pad(x, widths)


# ---------------------------------------------------------------- factorizations
# weft's kernels (python/src/linalg.c, weft.h's wf_linalg_*): float32 or
# float64 matrices (eig, eigh and svd: complex64 too), the leading dims a
# batch.


def inv(a, *, stream=None):
    """Inverse of square matrices (LU with partial pivoting)."""
    return _core._linalg_inv(a, False, stream)


def tri_inv(a, upper=False, *, stream=None):
    """Inverse of triangular matrices; only the upper (else lower) triangle is read."""
    return _core._linalg_tri_inv(a, upper, stream)


def cholesky(a, upper=False, *, stream=None):
    """Cholesky factor L (a = L L^T) or, with upper, U (a = U^T U).
    A matrix that is not positive definite gives an all-NaN factor."""
    return _core._linalg_cholesky(a, upper, stream)


def cholesky_inv(L, upper=False, *, stream=None):
    """Inverse of a from its Cholesky factor (lower, or upper with upper=True)."""
    return _core._linalg_cholesky_inv(L, upper, stream)


def solve(a, b, *, stream=None):
    """x with a @ x = b (b a vector or matrices; leading dims broadcast)."""
    return _core._linalg_solve(a, b, False, stream)


def solve_triangular(a, b, *, upper=False, stream=None):
    """x with a @ x = b for triangular a (its upper, else lower, triangle)."""
    return _core._linalg_solve_triangular(a, b, upper, stream)


def lu(a, *, stream=None):
    """(P, L, U) with a = L[P] @ U (P uint32 row indices)."""
    return _core._linalg_lu(a, False, stream)


def lu_factor(a, *, stream=None):
    """(LU, pivots): L below the diagonal (unit diagonal implied), U on and
    above; pivots (uint32) the row swapped with row i at step i."""
    return _core._linalg_lu_factor(a, False, stream)


def qr(a, *, stream=None):
    """Reduced QR: Q (..., m, k) orthonormal columns, R (..., k, n), k = min(m, n)."""
    return _core._linalg_qr(a, False, stream)


def _uplo(UPLO):
    if UPLO not in ("L", "U"):
        raise ValueError(f"[linalg::eigh] UPLO must be 'L' or 'U' (got {UPLO!r})")
    return UPLO == "U"


def eigh(a, UPLO="L", *, stream=None):
    """(w, V) of symmetric (complex64: Hermitian) matrices, reading the UPLO
    triangle: ascending eigenvalues (float32 for complex64), eigenvectors as
    columns (complex64 ones with their largest component real and
    positive)."""
    return _core._linalg_eigh(a, _uplo(UPLO), stream)


def eigvalsh(a, UPLO="L", *, stream=None):
    """Ascending eigenvalues of symmetric (complex64: Hermitian) matrices."""
    return _core._linalg_eigvalsh(a, _uplo(UPLO), stream)


def eig(a, *, stream=None):
    """(w, V) of general square matrices (real or complex64), complex64:
    eigenvalues in no particular order, right eigenvectors as columns of
    unit norm (a @ V = w[..., None, :] * V)."""
    return _core._linalg_eig(a, False, stream)


def eigvals(a, *, stream=None):
    """Eigenvalues of general square matrices, complex64 (as eig's w)."""
    return _core._linalg_eigvals(a, False, stream)


def svd(a, compute_uv=True, *, stream=None):
    """Full SVD (U, S, Vt) with a = U[..., :k] diag(S) Vt[..., :k, :]; with
    compute_uv=False the singular values S only (descending). complex64 a
    gives complex64 U and Vt (Vt = V^H) and float32 S."""
    if compute_uv:
        return _core._linalg_svd(a, False, stream)
    return _core._linalg_svdvals(a, False, stream)


def pinv(a, *, stream=None):
    """Moore-Penrose pseudo-inverse from the SVD; singular values below
    max(m, n) * eps * the largest count as zero."""
    a = a if isinstance(a, _mx.array) else _mx.array(a)
    if _mx.issubdtype(a.dtype, _mx.complexfloating):  # as MLX, though svd takes them
        raise ValueError("[linalg::pinv] Arrays must have type float32 or float64. "
                         f"Received array with type {a.dtype}.")
    with _mx.stream(stream) if stream is not None else _nullcontext():
        U, S, Vt = svd(a)
        m, n = a.shape[-2], a.shape[-1]
        k = min(m, n)
        if k == 0:
            return _mx.zeros(a.shape[:-2] + (n, m), dtype=a.dtype)
        eps = _mx.finfo(a.dtype).eps
        cutoff = _mx.max(S, axis=-1, keepdims=True) * (max(m, n) * eps)
        safe = _mx.where(S > cutoff, S, _mx.ones_like(S))
        s_inv = _mx.where(S > cutoff, 1.0 / safe, _mx.zeros_like(S))
        uk = _mx.swapaxes(U[..., :, :k], -1, -2)
        vk = _mx.swapaxes(Vt[..., :k, :], -1, -2)
        return vk @ (_mx.expand_dims(s_inv, -1) * uk)


def _lu_diagonal_and_parity(a, op):
    """The diagonal of U and (-1)^(row swaps) of a's LU factorization;
    integer a is taken as float32."""
    a = a if isinstance(a, _mx.array) else _mx.array(a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"[linalg::{op}] a must hold square matrices (got shape {a.shape})")
    if _mx.issubdtype(a.dtype, _mx.complexfloating):
        raise ValueError(f"[linalg::{op}] complex matrices are not supported")
    LU, pivots = lu_factor(_as_float(a))
    diag = _mx.diagonal(LU, axis1=-2, axis2=-1)
    steps = _mx.arange(a.shape[-1], dtype=_mx.uint32)
    swaps = _mx.sum((pivots != steps).astype(_mx.int32), axis=-1)
    parity = (1 - 2 * (swaps % 2)).astype(diag.dtype)
    return diag, parity


def det(a, *, stream=None):
    """Determinant of square matrices, from the LU factorization (no gradient)."""
    with _mx.stream(stream) if stream is not None else _nullcontext():
        diag, parity = _lu_diagonal_and_parity(a, "det")
        return _mx.prod(diag, axis=-1) * parity


def slogdet(a, *, stream=None):
    """(sign, log|det|) of square matrices; a singular one gives (0, -inf)."""
    with _mx.stream(stream) if stream is not None else _nullcontext():
        diag, parity = _lu_diagonal_and_parity(a, "slogdet")
        sign = _mx.prod(_mx.sign(diag), axis=-1) * parity
        return sign, _mx.sum(_mx.log(_mx.abs(diag)), axis=-1)
