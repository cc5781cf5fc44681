/*
 * Rules of the quantization primitives (prim/quantized.h). Codes are
 * integers and quantize rounds, so neither quantize nor dequantize is
 * differentiated (as in MLX): their vjp and jvp answer WF_ERR_UNSUPPORTED.
 * quantized_matmul is linear in x, and W = dequantize(codes, s, b) is
 * linear in (s, b): the cotangent of x is a quantized_matmul with the
 * other transpose flag; the dense cotangent dW of W (ct^T x or x^T ct)
 * gives the biases' as its per-group sums and the scales' as the per-group
 * sums of dW * codes. vmap moves batches to axis 0 and calls the ops.
 * In the floating-point modes (no biases, uint8 scales) only x has a
 * derivative.
 */
#include "core/error.h"
#include "prim/quantized.h"
#include "transforms/rules.h"

static const wf_quant_params *qparams(const wf_array *node) { return node->params; }

static wf_status not_differentiable(wf_array *node)
{
    return wf__error(WF_ERR_UNSUPPORTED, "%s: no derivative (the quantized values are rounded)",
                     node->prim->name);
}

static wf_status vjp_none(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    (void)ct;
    (void)wanted;
    (void)cts;
    return not_differentiable(node);
}

static wf_status jvp_none(wf_array *node, wf_array *const *t, wf_array **out)
{
    (void)t;
    (void)out;
    return not_differentiable(node);
}

/* quantize works on the last axis: a batch in front changes nothing. */
static wf_status vmap_quantize(wf_array *node, wf_array *const *in, const int *axes,
                               int64_t batch, wf_array **out, int *out_axis)
{
    (void)batch;
    wf_array *w = wf__vmap_to_front(in[0], axes[0]);
    *out = wf__rule_node(node->prim, node->params, &w, 1);
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- quantized_matmul */

/* The dequantized matrix of tangents or cotangents (s, b) of the node's
 * codes: codes * s + b. */
static wf_array *dequantized(wf_array *node, wf_array *s, wf_array *b)
{
    const wf_quant_params *p = qparams(node);
    return wf_dequantize(node->inputs[1], s, b, p->group_size, p->bits, WF_QUANT_AFFINE);
}

/* x @ M.T (transpose) or x @ M for a dense M laid out like W. */
static wf_array *dense_product(wf_array *x, wf_array *m, bool transpose)
{
    return wf_matmul(x, transpose ? wf_swapaxes(m, -1, -2) : m);
}

/* Scales of a floating-point mode have no derivative. */
static wf_status fp_scales_fixed(wf_array *node)
{
    return wf__error(WF_ERR_UNSUPPORTED, "%s: no derivative for the scales of a floating-point "
                                         "quantization mode",
                     node->prim->name);
}

static wf_status vjp_quantized_matmul(wf_array *node, wf_array *ct, const bool *wanted,
                                      wf_array **cts)
{
    const wf_quant_params *p = qparams(node);
    wf_array *const *in = node->inputs;
    const int n = 1 + wf__quant_matrix_inputs(p);
    if (wanted[0]) {
        wf_quant_params flipped = *p;
        flipped.transpose = !p->transpose;
        wf_array *args[4] = {ct, in[1], in[2], n > 3 ? in[3] : NULL};
        cts[0] = wf__rule_node(node->prim, &flipped, args, n);
        if (!cts[0])
            return wf_last_error();
    }
    if (p->mode != WF_QUANT_AFFINE)
        return wanted[2] ? fp_scales_fixed(node) : WF_OK;
    if (!wanted[2] && !wanted[3])
        return WF_OK;
    /* dW per batch of W; against a 2-d W, x's rows are all of x's axes but
     * the last (flattened). */
    wf_array *x = in[0], *c = ct;
    if (in[1]->ndim == 2) {
        x = wf_reshape(x, (int64_t[]){-1, x->shape[x->ndim - 1]}, 2);
        c = wf_reshape(c, (int64_t[]){-1, ct->shape[ct->ndim - 1]}, 2);
    }
    wf_array *dw = p->transpose ? wf_matmul(wf_swapaxes(c, -1, -2), x)
                                : wf_matmul(wf_swapaxes(x, -1, -2), c);
    if (!dw)
        return wf_last_error();
    const wf_array *s = in[2];
    int64_t gshape[WF_MAX_NDIM];
    for (int d = 0; d < s->ndim; d++)
        gshape[d] = s->shape[d];
    gshape[s->ndim] = p->group_size;
    wf_array *dwg = wf_reshape(dw, gshape, s->ndim + 1);
    const int last = -1;
    if (wanted[3]) {
        cts[3] = wf_sum(dwg, &last, 1, false);
        if (!cts[3])
            return wf_last_error();
    }
    if (wanted[2]) {
        wf_array *codes = dequantized(node, wf_ones_like(in[2]), wf_zeros_like(in[3]));
        cts[2] = wf_sum(wf_multiply(dwg, wf_reshape(codes, gshape, s->ndim + 1)), &last, 1, false);
        if (!cts[2])
            return wf_last_error();
    }
    return WF_OK;
}

static wf_status jvp_quantized_matmul(wf_array *node, wf_array *const *t, wf_array **out)
{
    const wf_quant_params *p = qparams(node);
    wf_array *const *in = node->inputs;
    const int n = 1 + wf__quant_matrix_inputs(p);
    if (p->mode != WF_QUANT_AFFINE && t[2])
        return fp_scales_fixed(node);
    wf_array *sum = NULL;
    if (t[0]) {
        wf_array *args[4] = {t[0], in[1], in[2], n > 3 ? in[3] : NULL};
        sum = wf__rule_node(node->prim, p, args, n);
    }
    if (p->mode == WF_QUANT_AFFINE && (t[2] || t[3])) {
        wf_array *ts = t[2] ? t[2] : wf_zeros_like(in[2]);
        wf_array *tb = t[3] ? t[3] : wf_zeros_like(in[3]);
        wf_array *part = dense_product(in[0], dequantized(node, ts, tb), p->transpose);
        sum = sum ? wf_add(sum, part) : part;
    }
    *out = sum;
    return wf__rule_result(*out);
}

static wf_status vmap_quantized_matmul(wf_array *node, wf_array *const *in, const int *axes,
                                       int64_t batch, wf_array **out, int *out_axis)
{
    const wf_quant_params *p = qparams(node);
    const int n = 1 + wf__quant_matrix_inputs(p);
    bool w_batched = false;
    for (int i = 1; i < n; i++)
        w_batched = w_batched || axes[i] != WF_VMAP_NOT_MAPPED;
    *out_axis = 0;
    if (!w_batched) {
        *out = wf_quantized_matmul_mode(wf__vmap_to_front(in[0], axes[0]), in[1], in[2],
                                        n > 3 ? in[3] : NULL, p->transpose, p->group_size,
                                        p->bits, (wf_quant_mode)p->mode);
        return wf__rule_result(*out);
    }
    wf_array *m[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < n; i++)
        m[i] = wf__vmap_materialize(in[i], axes[i], batch);
    /* x of one axis (a vector per example): a row of one, dropped after. */
    const bool vector = node->inputs[0]->ndim == 1;
    const int row_axis = 1;
    if (vector)
        m[0] = wf_expand_dims(m[0], &row_axis, 1);
    const int rank = m[0] && m[1] && m[0]->ndim > m[1]->ndim ? m[0]->ndim : m[1] ? m[1]->ndim : 0;
    for (int i = 0; i < n; i++)
        m[i] = wf__vmap_pad_rank(m[i], rank);
    wf_array *y = wf_quantized_matmul_mode(m[0], m[1], m[2], m[3], p->transpose, p->group_size,
                                           p->bits, (wf_quant_mode)p->mode);
    const int squeeze_axis = y ? y->ndim - 2 : 0;
    *out = vector ? wf_squeeze(y, &squeeze_axis, 1) : y;
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- gather_qmm
 * Inputs x (Bx, M, K), codes, scales, biases (E, ...), lhs, rhs (L). */

/* vjp: x's cotangent is product l's (ct_l through W[rhs[l]] with the other
 * transpose flag) added at batch lhs[l]; the scales' and biases' come from
 * each product's dense dW = ct_l^T x_l (or x_l^T ct_l), reduced per group
 * and added at expert rhs[l]. */
static wf_status vjp_gather_qmm(wf_array *node, wf_array *ct, const bool *wanted,
                                wf_array **cts)
{
    const wf_quant_params *p = qparams(node);
    wf_array *const *in = node->inputs;
    const int nq = wf__quant_matrix_inputs(p);
    wf_array *lhs = in[1 + nq], *rhs = in[2 + nq];
    if (wanted[0]) {
        wf_quant_params flipped = *p;
        flipped.transpose = !p->transpose;
        const int64_t l = lhs->shape[0];
        wf_array *each = wf_arange(0, (double)l, 1, WF_DTYPE_I32);
        wf_array *args[6] = {ct, in[1], in[2], in[3], NULL, NULL};
        args[1 + nq] = each;
        args[2 + nq] = rhs;
        wf_array *g = wf__rule_node(node->prim, &flipped, args, 3 + nq);
        cts[0] = wf_scatter_add(wf_zeros_like(in[0]), lhs, g, 0);
        if (!cts[0])
            return wf_last_error();
    }
    if (p->mode != WF_QUANT_AFFINE)
        return wanted[2] ? fp_scales_fixed(node) : WF_OK;
    if (!wanted[2] && !wanted[3])
        return WF_OK;
    wf_array *x = wf_take(in[0], lhs, 0); /* (L, M, K) */
    wf_array *dw = p->transpose ? wf_matmul(wf_swapaxes(ct, -1, -2), x)
                                : wf_matmul(wf_swapaxes(x, -1, -2), ct);
    const wf_array *s = in[2];
    const int64_t gshape[4] = {lhs->shape[0], s->shape[1], s->shape[2], p->group_size};
    wf_array *dwg = wf_reshape(dw, gshape, 4);
    const int last = -1;
    if (wanted[3]) {
        cts[3] = wf_scatter_add(wf_zeros_like(in[3]), rhs, wf_sum(dwg, &last, 1, false), 0);
        if (!cts[3])
            return wf_last_error();
    }
    if (wanted[2]) {
        const int64_t cshape[4] = {s->shape[0], s->shape[1], s->shape[2], p->group_size};
        wf_array *codes = wf_reshape(dequantized(node, wf_ones_like(in[2]), wf_zeros_like(in[3])),
                                     cshape, 4);
        wf_array *picked = wf_take(codes, rhs, 0);
        cts[2] = wf_scatter_add(wf_zeros_like(in[2]), rhs,
                                wf_sum(wf_multiply(dwg, picked), &last, 1, false), 0);
        if (!cts[2])
            return wf_last_error();
    }
    return WF_OK;
}

/* jvp: linear in x (tangents of the scales and biases: unsupported, as MLX). */
static wf_status jvp_gather_qmm(wf_array *node, wf_array *const *t, wf_array **out)
{
    const int n = 3 + wf__quant_matrix_inputs(qparams(node));
    if (t[2] || (n == 6 && t[3]))
        return wf__error(WF_ERR_UNSUPPORTED, "gather_qmm: no jvp for the scales and biases");
    wf_array *const *in = node->inputs;
    wf_array *args[6] = {t[0], in[1], in[2], in[3], in[4], n == 6 ? in[5] : NULL};
    *out = wf__rule_node(node->prim, node->params, args, n);
    return wf__rule_result(*out);
}

static wf_status vmap_gather_qmm(wf_array *node, wf_array *const *in, const int *axes,
                                 int64_t batch, wf_array **out, int *out_axis)
{
    (void)in, (void)axes, (void)batch, (void)out, (void)out_axis;
    return wf__error(WF_ERR_UNSUPPORTED, "%s: vmap is not supported (as in MLX); map "
                                         "quantized_matmul over the gathered operands",
                     node->prim->name);
}

/* ---------------------------------------------------------------- table */

const wf_prim_rules wf__rules_quantized[] = {
    {&wf__prim_quantize, WF_RULES_DIFFERENTIABLE, vjp_none, jvp_none, vmap_quantize, false},
    {&wf__prim_dequantize, WF_RULES_DIFFERENTIABLE, vjp_none, jvp_none,
     wf__rule_vmap_elementwise, false},
    {&wf__prim_quantized_matmul, WF_RULES_DIFFERENTIABLE, vjp_quantized_matmul,
     jvp_quantized_matmul, vmap_quantized_matmul, false},
    {&wf__prim_gather_qmm, WF_RULES_DIFFERENTIABLE, vjp_gather_qmm, jvp_gather_qmm,
     vmap_gather_qmm, false},
};

const size_t wf__rules_quantized_count = sizeof wf__rules_quantized / sizeof wf__rules_quantized[0];
