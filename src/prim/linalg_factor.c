/* Matrix factorizations: input checks and the packed output shapes (see
 * prim/linalg_factor.h). */
#include "prim/linalg_factor.h"

#include "core/dtype.h"
#include "core/error.h"

const char *wf__factor_op_name(int kind)
{
    static const char *const names[] = {"wf_linalg_cholesky", "wf_linalg_inv",
                                        "wf_linalg_tri_inv",  "wf_linalg_lu",
                                        "wf_linalg_qr",       "wf_linalg_eigh",
                                        "wf_linalg_svd",      "wf_linalg_eig"};
    return kind >= 0 && kind < WF_FACTOR_KIND_COUNT ? names[kind] : "linalg";
}

static bool needs_square(int kind)
{
    return kind == WF_FACTOR_CHOLESKY || kind == WF_FACTOR_INV || kind == WF_FACTOR_TRI_INV ||
           kind == WF_FACTOR_EIGH || kind == WF_FACTOR_EIG;
}

wf_status wf__factor_check(const char *op, int kind, wf_dtype dtype, int ndim,
                           const int64_t *shape)
{
    if (ndim < 2)
        return wf__error(WF_ERR_SHAPE, "%s: a must have at least 2 dims (got rank %d)", op,
                         ndim);
    const bool takes_complex =
        kind == WF_FACTOR_EIG || kind == WF_FACTOR_EIGH || kind == WF_FACTOR_SVD;
    if (dtype != WF_DTYPE_F32 && dtype != WF_DTYPE_F64 &&
        !(takes_complex && dtype == WF_DTYPE_C64))
        return wf__error(WF_ERR_DTYPE, "%s: a must be %s (got %s)", op,
                         takes_complex ? "float32, float64 or complex64" : "float32 or float64",
                         wf_dtype_name(dtype));
    const int64_t m = shape[ndim - 2], n = shape[ndim - 1];
    if (needs_square(kind) && m != n)
        return wf__error(WF_ERR_SHAPE, "%s: a must hold square matrices (got %lld x %lld)", op,
                         (long long)m, (long long)n);
    /* The kernels index a matrix with int64 and keep a few n x n doubles. */
    if (m > (1 << 20) || n > (1 << 20))
        return wf__error(WF_ERR_SHAPE, "%s: matrices of %lld x %lld are too large", op,
                         (long long)m, (long long)n);
    return WF_OK;
}

static wf_status infer_factor(const void *params, const wf_desc *inputs, int ninputs,
                              wf_out_desc *out)
{
    const wf_factor_params *p = params;
    const char *op = wf__factor_op_name(p->kind);
    if (ninputs != 1 || p->kind < 0 || p->kind >= WF_FACTOR_KIND_COUNT)
        return wf__error(WF_ERR_INTERNAL, "%s: expected 1 input, got %d", op, ninputs);
    const wf_desc *a = &inputs[0];
    wf_status st = wf__factor_check(op, p->kind, a->dtype, a->ndim, a->shape);
    if (st != WF_OK)
        return st;
    const int64_t m = a->shape[a->ndim - 2], n = a->shape[a->ndim - 1];
    const int64_t k = m < n ? m : n, wide = m > n ? m : n;
    wf__shape_copy(out->shape, a->shape, a->ndim);
    int64_t *rows = &out->shape[a->ndim - 2], *cols = &out->shape[a->ndim - 1];
    switch (p->kind) {
    case WF_FACTOR_LU: *rows = m + 2, *cols = wide; break;
    case WF_FACTOR_QR: *rows = m + k; break;
    case WF_FACTOR_EIGH: *rows = n + 1; break;
    case WF_FACTOR_SVD: *rows = m + 1 + n, *cols = wide; break;
    case WF_FACTOR_EIG: *rows = n + 1; break;
    default: break;
    }
    out->ndim = a->ndim;
    out->dtype = p->kind == WF_FACTOR_EIG ? WF_DTYPE_C64 : a->dtype;
    return WF_OK;
}

#define FACTOR_PRIM(NAME)                                                                   \
    const wf_prim_def wf__prim_linalg_##NAME = {                                            \
        .name = "linalg_" #NAME,                                                            \
        .params_size = sizeof(wf_factor_params),                                            \
        .infer = infer_factor,                                                              \
        .kernels = &(wf_kernel_slots){{0}},                                                 \
    };
FACTOR_PRIM(cholesky)
FACTOR_PRIM(inv)
FACTOR_PRIM(tri_inv)
FACTOR_PRIM(lu)
FACTOR_PRIM(qr)
FACTOR_PRIM(eigh)
FACTOR_PRIM(svd)
FACTOR_PRIM(eig)
#undef FACTOR_PRIM

const wf_prim_def *wf__factor_prim(int kind)
{
    static const wf_prim_def *const prims[] = {
        &wf__prim_linalg_cholesky, &wf__prim_linalg_inv, &wf__prim_linalg_tri_inv,
        &wf__prim_linalg_lu,       &wf__prim_linalg_qr,  &wf__prim_linalg_eigh,
        &wf__prim_linalg_svd,      &wf__prim_linalg_eig};
    return kind >= 0 && kind < WF_FACTOR_KIND_COUNT ? prims[kind] : NULL;
}
