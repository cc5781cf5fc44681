/* Matrix factorizations and solves (weft.h's wf_linalg_* section): one
 * packed primitive per factorization (prim/linalg_factor.h) whose parts
 * are sliced out here; the solves are products with the inverses. */
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "ops/ops.h"
#include "prim/linalg_factor.h"

/* The packed node of `kind` on a, or NULL with the error recorded. */
static wf_array *factor_node(int kind, wf_array *a, bool upper)
{
    const char *op = wf__factor_op_name(kind);
    if (!wf__array_check(a, op, "a"))
        return NULL;
    if (wf__factor_check(op, kind, a->dtype, a->ndim, a->shape) != WF_OK)
        return NULL;
    wf_factor_params p;
    memset(&p, 0, sizeof p);
    p.kind = kind;
    p.upper = upper;
    return wf__node_new(wf__factor_prim(kind), &p, &a, 1);
}

wf_array *wf__op_matrix_block(wf_array *a, int64_t r0, int64_t r1, int64_t c0, int64_t c1)
{
    if (!a)
        return NULL;
    int64_t starts[WF_MAX_NDIM], stops[WF_MAX_NDIM], steps[WF_MAX_NDIM];
    for (int d = 0; d < a->ndim; d++) {
        starts[d] = 0;
        stops[d] = a->shape[d];
        steps[d] = 1;
    }
    starts[a->ndim - 2] = r0, stops[a->ndim - 2] = r1;
    starts[a->ndim - 1] = c0, stops[a->ndim - 1] = c1;
    return wf__op_slice(a, starts, stops, steps);
}

/* wf__op_matrix_block; with `row`, the one row r0 as a vector (the row dim
 * dropped). */
static wf_array *part(wf_array *x, int64_t r0, int64_t r1, int64_t c0, int64_t c1, bool row)
{
    wf_array *s = wf__op_matrix_block(x, r0, r1, c0, c1);
    if (!s || !row)
        return s;
    const int axis = x->ndim - 2;
    wf_array *v = wf__op_squeeze(s, &axis, 1);
    wf__array_release(s);
    return v;
}

/* x as uint32 (row indices stored as floats by the kernel; exact below 2^24). */
static wf_array *as_indices(wf_array *x)
{
    if (!x)
        return NULL;
    wf_array *i = wf__op_astype(x, WF_DTYPE_U32);
    wf__array_release(x);
    return i;
}

static int64_t rows_of(const wf_array *a) { return a->shape[a->ndim - 2]; }
static int64_t cols_of(const wf_array *a) { return a->shape[a->ndim - 1]; }

wf_array *wf_linalg_inv(wf_array *a)
{
    return wf__array_publish(factor_node(WF_FACTOR_INV, a, false));
}

wf_array *wf_linalg_tri_inv(wf_array *a, bool upper)
{
    return wf__array_publish(factor_node(WF_FACTOR_TRI_INV, a, upper));
}

wf_array *wf_linalg_cholesky(wf_array *a, bool upper)
{
    return wf__array_publish(factor_node(WF_FACTOR_CHOLESKY, a, upper));
}

/* x^T for the last two dims. */
static wf_array *swap_last(wf_array *x)
{
    return x ? wf__op_swapaxes(x, x->ndim - 2, x->ndim - 1) : NULL;
}

wf_array *wf_linalg_cholesky_inv(wf_array *factor, bool upper)
{
    /* a^-1 = L^-T L^-1, or U^-1 U^-T */
    wf_array *t = factor_node(WF_FACTOR_TRI_INV, factor, upper);
    wf_array *tt = swap_last(t);
    wf_array *out = NULL;
    if (t && tt)
        out = upper ? wf__op_matmul(t, tt) : wf__op_matmul(tt, t);
    wf__array_release(tt);
    wf__array_release(t);
    return wf__array_publish(out);
}

static wf_array *solve_with(const char *op, wf_array *inverse, wf_array *b)
{
    if (!inverse)
        return NULL;
    if (!wf__array_check(b, op, "b")) {
        wf__array_release(inverse);
        return NULL;
    }
    wf_array *x = NULL;
    if (b->ndim == 0) {
        wf__error(WF_ERR_SHAPE, "%s: b must have at least 1 dim", op);
    } else if (b->shape[b->ndim > 1 ? b->ndim - 2 : 0] != rows_of(inverse)) {
        wf__error(WF_ERR_SHAPE, "%s: b has %lld rows, a is %lld x %lld", op,
                  (long long)b->shape[b->ndim > 1 ? b->ndim - 2 : 0],
                  (long long)rows_of(inverse), (long long)rows_of(inverse));
    } else {
        x = wf__op_matmul(inverse, b);
    }
    wf__array_release(inverse);
    return x;
}

wf_array *wf_linalg_solve(wf_array *a, wf_array *b)
{
    return wf__array_publish(
        solve_with("wf_linalg_solve", factor_node(WF_FACTOR_INV, a, false), b));
}

wf_array *wf_linalg_solve_triangular(wf_array *a, wf_array *b, bool upper)
{
    return wf__array_publish(solve_with("wf_linalg_solve_triangular",
                                        factor_node(WF_FACTOR_TRI_INV, a, upper), b));
}

/* L (unit lower, m x k) and U (upper, k x n) from the packed LU rows. */
static void split_lu(wf_array *packed, int64_t m, int64_t n, wf_array **l, wf_array **u)
{
    const int64_t k = m < n ? m : n;
    wf_array *lu_l = part(packed, 0, m, 0, k, false);
    wf_array *lu_u = part(packed, 0, k, 0, n, false);
    wf_array *strict = lu_l ? wf__op_tril(lu_l, -1) : NULL;
    wf_array *eye = wf__op_eye(m, k, 0, packed->dtype);
    *l = strict && eye ? wf__op_add(strict, eye) : NULL;
    *u = lu_u ? wf__op_triu(lu_u, 0) : NULL;
    wf__array_release(eye);
    wf__array_release(strict);
    wf__array_release(lu_u);
    wf__array_release(lu_l);
}

wf_status wf_linalg_lu_factor(wf_array *a, wf_array **lu, wf_array **pivots)
{
    wf_array *packed = factor_node(WF_FACTOR_LU, a, false);
    wf_array *results[2] = {NULL, NULL};
    if (packed) {
        const int64_t m = rows_of(a), n = cols_of(a), k = m < n ? m : n;
        results[0] = part(packed, 0, m, 0, n, false);
        results[1] = as_indices(part(packed, m, m + 1, 0, k, true));
    }
    wf__array_release(packed);
    wf_array **outs[2] = {lu, pivots};
    return wf__array_publish_all(results, outs, 2);
}

wf_status wf_linalg_lu(wf_array *a, wf_array **p, wf_array **l, wf_array **u)
{
    wf_array *packed = factor_node(WF_FACTOR_LU, a, false);
    wf_array *results[3] = {NULL, NULL, NULL};
    if (packed) {
        const int64_t m = rows_of(a), n = cols_of(a);
        results[0] = as_indices(part(packed, m + 1, m + 2, 0, m, true));
        split_lu(packed, m, n, &results[1], &results[2]);
    }
    wf__array_release(packed);
    wf_array **outs[3] = {p, l, u};
    return wf__array_publish_all(results, outs, 3);
}

wf_status wf_linalg_qr(wf_array *a, wf_array **q, wf_array **r)
{
    wf_array *packed = factor_node(WF_FACTOR_QR, a, false);
    wf_array *results[2] = {NULL, NULL};
    if (packed) {
        const int64_t m = rows_of(a), n = cols_of(a), k = m < n ? m : n;
        results[0] = part(packed, 0, m, 0, k, false);
        results[1] = part(packed, m, m + k, 0, n, false);
    }
    wf__array_release(packed);
    wf_array **outs[2] = {q, r};
    return wf__array_publish_all(results, outs, 2);
}

/* x's real part when `complex_real` (complex64 eigh's eigenvalues, svd's
 * S: stored complex in the packed node, real by construction). */
static wf_array *real_if(wf_array *x, bool complex_real)
{
    if (!x || !complex_real)
        return x;
    wf_array *r = wf__op_real(x);
    wf__array_release(x);
    return r;
}

/* eigh's and eig's parts: the eigenvalues in row 0 of the packed node,
 * the eigenvectors (when v is given) below. */
static wf_status eigen_parts(int kind, wf_array *a, bool upper, wf_array **w, wf_array **v)
{
    wf_array *packed = factor_node(kind, a, upper);
    wf_array *results[2] = {NULL, NULL};
    if (packed) {
        const int64_t n = cols_of(a);
        const bool hermitian = kind == WF_FACTOR_EIGH && a->dtype == WF_DTYPE_C64;
        results[0] = real_if(part(packed, 0, 1, 0, n, true), hermitian);
        results[1] = v ? part(packed, 1, n + 1, 0, n, false) : NULL;
    }
    wf__array_release(packed);
    wf_array **outs[2] = {w, v};
    return wf__array_publish_all(results, outs, 2);
}

wf_status wf_linalg_eigh(wf_array *a, bool upper, wf_array **w, wf_array **v)
{
    return eigen_parts(WF_FACTOR_EIGH, a, upper, w, v);
}

wf_status wf_linalg_eig(wf_array *a, wf_array **w, wf_array **v)
{
    return eigen_parts(WF_FACTOR_EIG, a, false, w, v);
}

wf_status wf_linalg_svd(wf_array *a, wf_array **u, wf_array **s, wf_array **vt)
{
    if ((u == NULL) != (vt == NULL)) {
        wf_array **outs[3] = {u, s, vt};
        for (int i = 0; i < 3; i++)
            if (outs[i])
                *outs[i] = NULL;
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "wf_linalg_svd: u and vt are both given or both NULL");
    }
    wf_array *packed = factor_node(WF_FACTOR_SVD, a, false);
    wf_array *results[3] = {NULL, NULL, NULL};
    if (packed) {
        const int64_t m = rows_of(a), n = cols_of(a), k = m < n ? m : n;
        results[0] = u ? part(packed, 0, m, 0, m, false) : NULL;
        results[1] = real_if(part(packed, m, m + 1, 0, k, true), a->dtype == WF_DTYPE_C64);
        results[2] = vt ? part(packed, m + 1, m + 1 + n, 0, n, false) : NULL;
    }
    wf__array_release(packed);
    wf_array **outs[3] = {u, s, vt};
    return wf__array_publish_all(results, outs, 3);
}
