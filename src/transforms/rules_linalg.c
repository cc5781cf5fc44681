/*
 * Rules of matmul and addmm (operands of rank >= 2 whose leading axes
 * broadcast). The cotangent of an operand is the product with the other
 * operand transposed, summed over the leading axes it was broadcast along;
 * a right operand shared by a whole batch (a weight) gets one product with
 * the batch folded into the contracted axis instead.
 * Batching raises both operands to one rank with the batch (or a size-1
 * stand-in) in front, so the primitive's own broadcasting batches them.
 */
#include "core/error.h"
#include "prim/linalg.h"
#include "prim/prims.h"
#include "transforms/rules.h"

static wf_array *swap_last(wf_array *x) { return x ? wf_swapaxes(x, -1, -2) : NULL; }

/* True when b is one matrix shared by a batch of a's (a weight applied to
 * (batch, seq, in) activations): b has no batch axes of size > 1 and a has
 * the product's batch axes, unbroadcast. */
static bool right_shared_by_batch(const wf_array *ct, const wf_array *a, const wf_array *b)
{
    if (ct->ndim <= 2 || a->ndim != ct->ndim)
        return false;
    for (int d = 0; d < b->ndim - 2; d++)
        if (b->shape[d] != 1)
            return false;
    for (int d = 0; d < ct->ndim - 2; d++)
        if (a->shape[d] != ct->shape[d])
            return false;
    return true;
}

/* d(a @ b) for such a b: a^T @ ct with the batch folded into the contracted
 * axis, (K, B*M) @ (B*M, N), rather than B products (a (B, K, N)
 * temporary) summed afterwards. */
static wf_array *right_shared_ct(wf_array *ct, wf_array *a, const wf_array *b)
{
    int64_t rows = 1;
    for (int d = 0; d < ct->ndim - 1; d++)
        rows *= ct->shape[d];
    const int64_t k = a->shape[a->ndim - 1], n = ct->shape[ct->ndim - 1];
    wf_array *a2 = wf_reshape(a, (int64_t[]){rows, k}, 2);
    wf_array *ct2 = wf_reshape(ct, (int64_t[]){rows, n}, 2);
    wf_array *g = a2 && ct2 ? wf_matmul(swap_last(a2), ct2) : NULL;
    return g ? wf_reshape(g, b->shape, b->ndim) : NULL;
}

/* d(a @ b): ct @ b^T for a, a^T @ ct for b, each summed to its shape. */
static wf_array *product_ct(wf_array *ct, wf_array *a, wf_array *b, int which)
{
    /* folded by the traced sizes: not for a shapeless trace */
    if (which == 1 && !wf__rule_shapeless(ct, a) && !wf__rule_shapeless(b, NULL) &&
        right_shared_by_batch(ct, a, b))
        return right_shared_ct(ct, a, b);
    wf_array *g = which == 0 ? wf_matmul(ct, swap_last(b)) : wf_matmul(swap_last(a), ct);
    return wf__rule_unbroadcast(g, which == 0 ? a : b);
}

static wf_status vjp_matmul(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    wf_array *a = node->inputs[0], *b = node->inputs[1];
    for (int i = 0; i < 2; i++)
        if (wanted[i] && !(cts[i] = product_ct(ct, a, b, i)))
            return wf_last_error();
    return WF_OK;
}

/* ta @ b + a @ tb, either term absent when its tangent is zero. */
static wf_array *product_tangent(wf_array *a, wf_array *b, wf_array *ta, wf_array *tb)
{
    wf_array *left = ta ? wf_matmul(ta, b) : NULL, *right = tb ? wf_matmul(a, tb) : NULL;
    return ta && tb ? wf_add(left, right) : ta ? left : right;
}

static wf_status jvp_matmul(wf_array *node, wf_array *const *t, wf_array **out)
{
    *out = product_tangent(node->inputs[0], node->inputs[1], t[0], t[1]);
    return wf__rule_result(*out);
}

/* Both operands at one rank, batch (or a size-1 stand-in) first. */
static void align_operands(wf_array *const *in, const int *axes, const wf_array *node,
                           wf_array **a, wf_array **b)
{
    const wf_array *pa = node->inputs[0], *pb = node->inputs[1];
    const int rank = 1 + (pa->ndim > pb->ndim ? pa->ndim : pb->ndim);
    *a = wf__vmap_pad_rank(wf__vmap_front_or_one(in[0], axes[0]), rank);
    *b = wf__vmap_pad_rank(wf__vmap_front_or_one(in[1], axes[1]), rank);
}

static wf_status vmap_matmul(wf_array *node, wf_array *const *in, const int *axes,
                             int64_t batch, wf_array **out, int *out_axis)
{
    (void)batch;
    wf_array *a, *b;
    align_operands(in, axes, node, &a, &b);
    *out = a && b ? wf_matmul(a, b) : NULL;
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- addmm */

static const wf_addmm_params *addmm_of(const wf_array *node) { return node->params; }

static wf_status vjp_addmm(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    const wf_addmm_params *p = addmm_of(node);
    wf_array *a = node->inputs[0], *b = node->inputs[1];
    wf_array *alpha_ct = wf_multiply(ct, wf__rule_scalar(ct, p->alpha));
    for (int i = 0; i < 2; i++)
        if (wanted[i] && !(cts[i] = product_ct(alpha_ct, a, b, i)))
            return wf_last_error();
    if (wanted[2] && !(cts[2] = wf_multiply(ct, wf__rule_scalar(ct, p->beta))))
        return wf_last_error();
    return WF_OK;
}

static wf_status jvp_addmm(wf_array *node, wf_array *const *t, wf_array **out)
{
    const wf_addmm_params *p = addmm_of(node);
    wf_array *prod = t[0] || t[1] ? product_tangent(node->inputs[0], node->inputs[1], t[0], t[1])
                                  : NULL;
    wf_array *left = prod ? wf_multiply(prod, wf__rule_scalar(node, p->alpha)) : NULL;
    wf_array *right = t[2] ? wf_multiply(t[2], wf__rule_scalar(node, p->beta)) : NULL;
    *out = left && right ? wf_add(left, right) : left ? left : right;
    return wf__rule_result(*out);
}

static wf_status vmap_addmm(wf_array *node, wf_array *const *in, const int *axes,
                            int64_t batch, wf_array **out, int *out_axis)
{
    (void)batch;
    const wf_addmm_params *p = addmm_of(node);
    wf_array *a, *b;
    align_operands(in, axes, node, &a, &b);
    wf_array *c = wf__vmap_pad_rank(wf__vmap_front_or_one(in[2], axes[2]), node->ndim + 1);
    *out = a && b && c ? wf_addmm(c, a, b, p->alpha, p->beta) : NULL;
    *out_axis = 0;
    return wf__rule_result(*out);
}

const wf_prim_rules wf__rules_linalg[] = {
    {&wf__prim_matmul, WF_RULES_DIFFERENTIABLE, vjp_matmul, jvp_matmul, vmap_matmul,
     .follows_shapes = true},
    {&wf__prim_addmm, WF_RULES_DIFFERENTIABLE, vjp_addmm, jvp_addmm, vmap_addmm,
     .follows_shapes = true},
};

const size_t wf__rules_linalg_count = sizeof wf__rules_linalg / sizeof wf__rules_linalg[0];
