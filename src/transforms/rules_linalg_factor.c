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
 * sym(S) = (S + S^T) / 2: A is taken as symmetric, as JAX does. The packed
 * lu, qr, eigh and svd nodes have no derivative rules yet (every one
 * answers WF_ERR_UNSUPPORTED naming the primitive).
 */
#include "core/error.h"
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
    {&wf__prim_linalg_cholesky, WF_RULES_DIFFERENTIABLE, vjp_factor, jvp_factor, vmap_factor},
    {&wf__prim_linalg_inv, WF_RULES_DIFFERENTIABLE, vjp_factor, jvp_factor, vmap_factor},
    {&wf__prim_linalg_tri_inv, WF_RULES_DIFFERENTIABLE, vjp_factor, jvp_factor, vmap_factor},
    {&wf__prim_linalg_lu, WF_RULES_DIFFERENTIABLE, vjp_factor, jvp_factor, vmap_factor},
    {&wf__prim_linalg_qr, WF_RULES_DIFFERENTIABLE, vjp_factor, jvp_factor, vmap_factor},
    {&wf__prim_linalg_eigh, WF_RULES_DIFFERENTIABLE, vjp_factor, jvp_factor, vmap_factor},
    {&wf__prim_linalg_svd, WF_RULES_DIFFERENTIABLE, vjp_factor, jvp_factor, vmap_factor},
};
const size_t wf__rules_linalg_factor_count =
    sizeof wf__rules_linalg_factor / sizeof wf__rules_linalg_factor[0];
