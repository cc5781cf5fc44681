/*
 * Rules of the matrix factorizations (prim/linalg_factor.h).
 *
 * Every kernel treats the leading dims as a batch, so vmap moves the batch
 * to axis 0 and rebuilds the node. Derivatives (Y = inv(A) or tri_inv(A),
 * L = cholesky(A)):
 *   inv       dA = -Y^T G Y^T             dY = -Y dA Y
 *   tri_inv   the same, kept to A's triangle
 *   cholesky  dA = sym(L^-T Phi(L^T G) L^-1),  dL = L Phi(L^-1 dA L^-T)
 * with Phi(X) the lower triangle of X, its diagonal halved, and
 * sym(S) = (S + S^T) / 2: A is taken as symmetric, as JAX does. eigh's
 * packed node (w in row 0, V below) with F_ij = 1 / (w_j - w_i) off the
 * diagonal, 0 on it:
 *   eigh      dA = sym(V (diag(w_bar) + F o (V^T V_bar)) V^T)
 *             dw = diag(V^T dA V),  dV = V (F o (V^T dA V))
 * (repeated eigenvalues make F infinite, as in JAX and MLX). complex64
 * (Hermitian) eigh: the same with conjugate transposes, sym(S) = (S +
 * S^H) / 2, and the derivative of the phase convention (each column of V
 * scaled so that its largest component, row p_k, is real and positive):
 * with dV0 the formula's, dV = dV0 + i V diag(theta), theta_k =
 * -Im(dV0[p_k, k]) / V[p_k, k]; its adjoint adds i Im(s_k) / V[p_k, k] at
 * (p_k, k) to V_bar, s_k = (V_bar^H V)_kk (zero for losses that do not
 * depend on the phases). Those are adjoints in MLX's convention (vjp.c: the
 * engine hands a complex node's rule conj(ct) and conjugates its result,
 * so the rule undoes both). The packed lu, qr, svd and eig nodes have no
 * derivative rules yet (each answers WF_ERR_UNSUPPORTED naming the
 * primitive).
 */
#include "core/error.h"
#include "ops/ops.h"
#include "prim/linalg_factor.h"
#include "transforms/rules.h"

static wf_array *swap_last(wf_array *x) { return x ? wf_swapaxes(x, -1, -2) : NULL; }

static wf_array *triangle(wf_array *x, bool upper)
{
    if (!x)
        return NULL;
    return upper ? wf_triu(x, 0) : wf_tril(x, 0);
}

/* -(x @ y @ z) */
static wf_array *negated_product(wf_array *x, wf_array *y, wf_array *z)
{
    wf_array *xy = x && y ? wf_matmul(x, y) : NULL;
    wf_array *xyz = xy && z ? wf_matmul(xy, z) : NULL;
    return xyz ? wf_negative(xyz) : NULL;
}

static const wf_factor_params *params_of(wf_array *node)
{
    return (const wf_factor_params *)node->params;
}

/* Phi(x): the lower triangle with the diagonal halved. */
static wf_array *phi(wf_array *x)
{
    wf_array *with = wf_tril(x, 0), *without = wf_tril(x, -1);
    wf_array *sum = with && without ? wf_add(with, without) : NULL;
    return sum ? wf_multiply(sum, wf__rule_scalar(x, 0.5)) : NULL;
}

/* Rows [r0, r1) of every matrix of x (in the caller's scope). */
static wf_array *rows(wf_array *x, int64_t r0, int64_t r1)
{
    return x ? wf__array_publish(wf__op_matrix_block(x, r0, r1, 0, x->shape[x->ndim - 1]))
             : NULL;
}

/* F of eigh's rules from the eigenvalues as a (..., 1, n) row. */
static wf_array *eigen_gaps(wf_array *w_row)
{
    const int64_t n = w_row->shape[w_row->ndim - 1];
    wf_array *eye = wf_astype(wf_eye(n, n, 0, WF_DTYPE_F64), w_row->dtype);
    wf_array *diff = wf_subtract(w_row, wf_swapaxes(w_row, -1, -2)); /* w_j - w_i */
    wf_array *off = eye ? wf_subtract(wf__rule_scalar(eye, 1.0), eye) : NULL;
    wf_array *den = diff && eye ? wf_add(diff, eye) : NULL;
    return off && den ? wf_divide(off, den) : NULL;
}

/* x^T for a real x, x^H for a complex one (last two dims). */
static wf_array *adjoint(wf_array *x)
{
    if (!x || x->dtype != WF_DTYPE_C64)
        return swap_last(x);
    return wf_conjugate(swap_last(x));
}

/* (x + x^H) / 2 (x^T for a real x). */
static wf_array *hermitian_part(wf_array *x)
{
    wf_array *sum = x ? wf_add(x, adjoint(x)) : NULL;
    return sum ? wf_multiply(sum, wf__rule_scalar(sum, 0.5)) : NULL;
}

/* Complex eigh's phase convention: a (..., n, n) 0 / 1 mask of row p_k in
 * column k (the largest component, the first on ties, as the kernel), and
 * V[p_k, k] (real, positive) as a float32 (..., 1, n) row. */
static wf_array *largest_rows(wf_array *v, wf_array **vp)
{
    const int64_t n = v->shape[v->ndim - 1];
    wf_array *idx = wf_argmax(wf_abs(v), -2, true);
    const int64_t column[2] = {n, 1};
    wf_array *rows_n = wf_reshape(wf_arange(0, (double)n, 1, WF_DTYPE_U32), column, 2);
    wf_array *mask = idx && rows_n ? wf_astype(wf_equal(rows_n, wf_astype(idx, WF_DTYPE_U32)),
                                               WF_DTYPE_F32)
                                   : NULL;
    const int axis = -2;
    *vp = mask ? wf_real(wf_sum(wf_multiply(mask, v), &axis, 1, true)) : NULL;
    return mask;
}

/* i x for a float32 x, as complex64. */
static wf_array *times_i(wf_array *x) { return x ? wf_complex(wf_zeros_like(x), x) : NULL; }

static wf_array *eigh_vjp(wf_array *node, wf_array *ct)
{
    const int64_t n = node->shape[node->ndim - 1];
    const bool complex = node->dtype == WF_DTYPE_C64;
    if (complex)
        ct = wf_conjugate(ct); /* the engine's conj(ct), undone */
    wf_array *w_row = rows(node, 0, 1), *v = rows(node, 1, n + 1);
    wf_array *wbar = ct ? rows(ct, 0, 1) : NULL, *vbar = ct ? rows(ct, 1, n + 1) : NULL;
    if (complex && v && vbar) { /* the phase convention's adjoint */
        const int axis = -2;
        wf_array *vp = NULL, *mask = largest_rows(v, &vp);
        wf_array *s = wf_imag(wf_sum(wf_multiply(wf_conjugate(vbar), v), &axis, 1, true));
        wf_array *shift = mask && vp && s ? wf_multiply(mask, times_i(wf_divide(s, vp))) : NULL;
        vbar = shift ? wf_add(vbar, shift) : NULL;
    }
    wf_array *f = w_row ? eigen_gaps(w_row) : NULL;
    wf_array *eye = wf_astype(wf_eye(n, n, 0, WF_DTYPE_F64), node->dtype);
    wf_array *inner = v && vbar && f ? wf_multiply(f, wf_matmul(adjoint(v), vbar)) : NULL;
    wf_array *mid = inner && wbar && eye ? wf_add(inner, wf_multiply(eye, wbar)) : NULL;
    wf_array *g = mid ? hermitian_part(wf_matmul(wf_matmul(v, mid), adjoint(v))) : NULL;
    return complex && g ? wf_conjugate(g) : g; /* conjugated back by the engine */
}

static wf_array *eigh_jvp(wf_array *node, wf_array *t)
{
    const int64_t n = node->shape[node->ndim - 1];
    wf_array *w_row = rows(node, 0, 1), *v = rows(node, 1, n + 1);
    wf_array *f = w_row ? eigen_gaps(w_row) : NULL;
    wf_array *eye = wf_astype(wf_eye(n, n, 0, WF_DTYPE_F64), node->dtype);
    wf_array *vdv = v ? wf_matmul(wf_matmul(adjoint(v), t), v) : NULL;
    /* diag(vdv) as a (..., 1, n) row: sum over rows of eye o vdv */
    const int axis = -2;
    wf_array *dw = vdv && eye ? wf_sum(wf_multiply(eye, vdv), &axis, 1, true) : NULL;
    wf_array *dv = vdv && f ? wf_matmul(v, wf_multiply(f, vdv)) : NULL;
    if (node->dtype == WF_DTYPE_C64 && dv) { /* the phase convention's derivative */
        wf_array *vp = NULL, *mask = largest_rows(v, &vp);
        wf_array *dvp = mask ? wf_sum(wf_multiply(mask, dv), &axis, 1, true) : NULL;
        wf_array *theta = dvp && vp ? wf_negative(wf_divide(wf_imag(dvp), vp)) : NULL;
        dv = theta ? wf_add(dv, wf_multiply(v, times_i(theta))) : NULL;
    }
    wf_array *parts[2] = {dw, dv};
    return dw && dv ? wf_concatenate(parts, 2, -2) : NULL;
}

static wf_status unsupported(wf_array *node, const char *what)
{
    return wf__error(WF_ERR_UNSUPPORTED, "%s: '%s' has no %s rule yet (weft.h's wf_linalg_*)",
                     wf__factor_op_name(params_of(node)->kind), node->prim->name, what);
}

static wf_status vjp_factor(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    if (!wanted[0])
        return WF_OK;
    const wf_factor_params *p = params_of(node);
    wf_array *g = NULL;
    switch (p->kind) {
    case WF_FACTOR_INV:
    case WF_FACTOR_TRI_INV: {
        wf_array *yt = swap_last(node);
        g = negated_product(yt, ct, yt);
        if (p->kind == WF_FACTOR_TRI_INV)
            g = triangle(g, p->upper);
        break;
    }
    case WF_FACTOR_CHOLESKY: {
        wf_array *l = p->upper ? swap_last(node) : node;
        wf_array *lbar = p->upper ? swap_last(ct) : ct;
        wf_array *linv = l ? wf_linalg_tri_inv(l, false) : NULL;
        wf_array *inner = l && lbar ? phi(wf_matmul(swap_last(l), lbar)) : NULL;
        wf_array *s = linv && inner ? wf_matmul(wf_matmul(swap_last(linv), inner), linv) : NULL;
        wf_array *sum = s ? wf_add(s, swap_last(s)) : NULL;
        g = sum ? wf_multiply(sum, wf__rule_scalar(sum, 0.5)) : NULL;
        break;
    }
    case WF_FACTOR_EIGH: g = eigh_vjp(node, ct); break;
    default: return unsupported(node, "vjp");
    }
    cts[0] = g;
    return wf__rule_result(g);
}

static wf_status jvp_factor(wf_array *node, wf_array *const *t, wf_array **out)
{
    const wf_factor_params *p = params_of(node);
    wf_array *d = NULL;
    switch (p->kind) {
    case WF_FACTOR_INV: d = negated_product(node, t[0], node); break;
    case WF_FACTOR_TRI_INV: d = negated_product(node, triangle(t[0], p->upper), node); break;
    case WF_FACTOR_CHOLESKY: {
        wf_array *l = p->upper ? swap_last(node) : node;
        wf_array *linv = l ? wf_linalg_tri_inv(l, false) : NULL;
        wf_array *inner =
            linv ? wf_matmul(wf_matmul(linv, t[0]), swap_last(linv)) : NULL;
        wf_array *dl = inner && l ? wf_matmul(l, phi(inner)) : NULL;
        d = p->upper ? swap_last(dl) : dl;
        break;
    }
    case WF_FACTOR_EIGH: {
        wf_array *half = hermitian_part(t[0]); /* the triangle read, mirrored */
        d = half ? eigh_jvp(node, half) : NULL;
        break;
    }
    default: return unsupported(node, "jvp");
    }
    *out = d;
    return wf__rule_result(d);
}

static wf_status vmap_factor(wf_array *node, wf_array *const *in, const int *axes,
                             int64_t batch, wf_array **out, int *out_axis)
{
    (void)batch;
    wf_array *x = wf__vmap_to_front(in[0], axes[0]);
    *out = x ? wf__rule_rebuild(node, &x) : NULL;
    *out_axis = 0;
    return wf__rule_result(*out);
}

const wf_prim_rules wf__rules_linalg_factor[] = {
    {&wf__prim_linalg_cholesky, WF_RULES_DIFFERENTIABLE, vjp_factor, jvp_factor, vmap_factor,
     false},
    {&wf__prim_linalg_inv, WF_RULES_DIFFERENTIABLE, vjp_factor, jvp_factor, vmap_factor, false},
    {&wf__prim_linalg_tri_inv, WF_RULES_DIFFERENTIABLE, vjp_factor, jvp_factor, vmap_factor, false},
    {&wf__prim_linalg_lu, WF_RULES_DIFFERENTIABLE, vjp_factor, jvp_factor, vmap_factor, false},
    {&wf__prim_linalg_qr, WF_RULES_DIFFERENTIABLE, vjp_factor, jvp_factor, vmap_factor, false},
    {&wf__prim_linalg_eigh, WF_RULES_DIFFERENTIABLE, vjp_factor, jvp_factor, vmap_factor, false},
    {&wf__prim_linalg_svd, WF_RULES_DIFFERENTIABLE, vjp_factor, jvp_factor, vmap_factor, false},
    {&wf__prim_linalg_eig, WF_RULES_DIFFERENTIABLE, vjp_factor, jvp_factor, vmap_factor, false},
};
const size_t wf__rules_linalg_factor_count =
    sizeof wf__rules_linalg_factor / sizeof wf__rules_linalg_factor[0];
