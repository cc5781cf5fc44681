/*
 * Rules of the fused ("fast") primitives: layer_norm, rms_norm, rope and
 * scaled_dot_product_attention (silu and gelu are element-wise, with the
 * unary rules).
 *
 * The norms and attention are differentiated through their composition
 * from basic ops: the rule runs the vjp or jvp engine on that composition
 * (for attention, the same one the training path builds), which recomputes
 * what it needs rather than having kept it. rope is a rotation: its vjp is
 * the rotation by the opposite angle. All batch by running the primitive on
 * the batch as leading axes.
 */
#include <string.h>

#include "core/error.h"
#include "ops/fast.h"
#include "prim/linalg.h"
#include "prim/prims.h"
#include "transforms/rules.h"
#include "transforms/transforms.h"

/* ---------------------------------------------------------------- compositions
 *
 * Each computes in the node's dtype (the inputs' promoted dtype), as the
 * kernel does: a float32 x normalized for a float64 weight is normalized in
 * float64, so the gradients and tangents are float64-accurate and rounded
 * once, at the end, to each input's dtype. */

static const wf_norm_params *norm_of(const wf_array *node) { return node->params; }

/* x in `dtype` (a float dtype at least as wide): a new array, or x itself. */
static wf_array *widened(wf_array *x, wf_dtype dtype)
{
    return x && x->dtype != dtype ? wf_astype(x, dtype) : x;
}

/* (x - mean) / sqrt(var + eps) [* weight] [+ bias] over the last axis, in
 * `dtype`. */
static wf_array *layer_norm_composed(const wf_norm_params *p, wf_array *const *in, wf_dtype dtype)
{
    const int last = -1;
    wf_array *x = widened(in[0], dtype);
    wf_array *centered = wf_subtract(x, wf_mean(x, &last, 1, true));
    wf_array *var = wf_mean(wf_square(centered), &last, 1, true);
    wf_array *y = wf_multiply(centered, wf_rsqrt(wf_add(var, wf__rule_scalar(x, p->eps))));
    int i = 1;
    if (p->has_weight)
        y = wf_multiply(y, in[i++]);
    if (p->has_bias)
        y = wf_add(y, in[i]);
    return y;
}

/* x / sqrt(mean(x^2) + eps) [* weight] over the last axis, in `dtype`. */
static wf_array *rms_norm_composed(const wf_norm_params *p, wf_array *const *in, wf_dtype dtype)
{
    const int last = -1;
    wf_array *x = widened(in[0], dtype);
    wf_array *ms = wf_mean(wf_square(x), &last, 1, true);
    wf_array *y = wf_multiply(x, wf_rsqrt(wf_add(ms, wf__rule_scalar(x, p->eps))));
    return p->has_weight ? wf_multiply(y, in[1]) : y;
}

static wf_array *sdpa_composed(const wf_array *node, wf_array *const *in)
{
    const wf_sdpa_params *p = node->params;
    return wf__sdpa_composed(in[0], in[1], in[2], node->ninputs == 4 ? in[3] : NULL,
                             p->mask_kind, p->scale, p->causal);
}

/* The composition of `node`'s primitive on other inputs, as a function body
 * (payload: the node). Temporaries stay in a scope of its own. */
static wf_status composed_call(void *payload, wf_array *const *in, size_t n, wf_array **out,
                               size_t *nout)
{
    (void)n;
    const wf_array *node = payload;
    wf_status st = wf_scope_begin();
    if (st != WF_OK)
        return st;
    wf_array *y;
    if (node->prim == &wf__prim_layer_norm)
        y = layer_norm_composed(norm_of(node), in, node->dtype);
    else if (node->prim == &wf__prim_rms_norm)
        y = rms_norm_composed(norm_of(node), in, node->dtype);
    else /* an internal builder: hand it to the scope like the ops above */
        y = wf__array_publish(sdpa_composed(node, in));
    /* the composition computes in the inputs' promoted dtype, as the node */
    if (y && y->dtype != node->dtype)
        y = wf_astype(y, node->dtype);
    out[0] = y ? wf_keep(y) : NULL;
    *nout = 1;
    wf_scope_end();
    return out[0] ? WF_OK : wf_last_error();
}

/* The composition is differentiated at its inputs widened to the node's
 * dtype, so the cotangents come back unrounded: the engine rounds them to
 * each input's dtype, after summing over broadcast axes (attention's mask
 * is a broadcast, transforms/vjp.c). */
static wf_status vjp_composed(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    wf_array *primals[4];
    for (int i = 0; i < node->ninputs; i++) {
        wf_array *x = node->inputs[i];
        primals[i] = wanted[i] ? widened(x, node->dtype) : x;
        if (!primals[i])
            return wf_last_error();
    }
    wf_fn *fn = wf__fn_make(composed_call, node, NULL);
    if (!fn)
        return wf_last_error();
    size_t room = 0;
    wf_status st = wf__vjp("vjp", fn, primals, (size_t)node->ninputs, wanted, &ct, 1, NULL,
                           &room, cts);
    wf_fn_release(fn);
    for (int i = 0; i < node->ninputs && st == WF_OK; i++)
        if (!wanted[i])
            cts[i] = NULL;
    return st;
}

static wf_status jvp_composed(wf_array *node, wf_array *const *t, wf_array **out)
{
    wf_fn *fn = wf__fn_make(composed_call, node, NULL);
    if (!fn)
        return wf_last_error();
    size_t room = 1;
    wf_status st = wf__jvp("jvp", fn, node->inputs, (size_t)node->ninputs, t, NULL, out, &room);
    wf_fn_release(fn);
    return st;
}

/* ---------------------------------------------------------------- vmap */

/* A 1-d (D) weight or bias, batched as (B, D) or shared: as something that
 * broadcasts over x (B, ..., D). */
static wf_array *batched_affine(wf_array *w, int axis, int xrank)
{
    if (axis == WF_VMAP_NOT_MAPPED)
        return w;
    wf_array *f = wf__vmap_to_front(w, axis);
    if (!f)
        return NULL;
    int64_t shape[WF_MAX_NDIM];
    for (int d = 0; d < xrank; d++)
        shape[d] = 1;
    shape[0] = f->shape[0];
    shape[xrank - 1] = f->shape[1];
    return wf_reshape(f, shape, xrank);
}

static wf_status vmap_norm(wf_array *node, wf_array *const *in, const int *axes, int64_t batch,
                           wf_array **out, int *out_axis)
{
    const wf_norm_params *p = norm_of(node);
    wf_array *x = wf__vmap_materialize(in[0], axes[0], batch);
    bool affine_batched = false;
    for (int i = 1; i < node->ninputs; i++)
        affine_batched = affine_batched || axes[i] != WF_VMAP_NOT_MAPPED;
    *out_axis = 0;
    if (!affine_batched) { /* shared weight and bias: the primitive as is */
        wf_array *args[3] = {x, node->ninputs > 1 ? in[1] : NULL, node->ninputs > 2 ? in[2] : NULL};
        *out = x ? wf__rule_rebuild(node, args) : NULL;
        return wf__rule_result(*out);
    }
    /* per-example weight or bias: normalize, then scale and shift */
    wf_norm_params plain = *p;
    plain.has_weight = plain.has_bias = false;
    wf_array *y = x ? wf__rule_node(node->prim, &plain, &x, 1) : NULL;
    int i = 1;
    if (y && p->has_weight) {
        y = wf_multiply(y, batched_affine(in[i], axes[i], x->ndim));
        i++;
    }
    if (y && p->has_bias)
        y = wf_add(y, batched_affine(in[i], axes[i], x->ndim));
    *out = y;
    return wf__rule_result(y);
}

static wf_status vmap_rope(wf_array *node, wf_array *const *in, const int *axes, int64_t batch,
                           wf_array **out, int *out_axis)
{
    (void)batch;
    wf_array *x = wf__vmap_to_front(in[0], axes[0]);
    *out = wf__rule_rebuild(node, &x); /* it acts on the last two axes */
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* q, k, v (and the mask) with the batch (or a size-1 stand-in) in front at
 * one rank: the primitive's leading axes broadcast them. */
static wf_status vmap_sdpa(wf_array *node, wf_array *const *in, const int *axes, int64_t batch,
                           wf_array **out, int *out_axis)
{
    (void)batch;
    const wf_sdpa_params *p = node->params;
    int rank = 0;
    for (int i = 0; i < 3; i++)
        rank = node->inputs[i]->ndim > rank ? node->inputs[i]->ndim : rank;
    wf_array *a[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < 3; i++)
        a[i] = wf__vmap_pad_rank(wf__vmap_front_or_one(in[i], axes[i]), rank + 1);
    if (node->ninputs == 4)
        a[3] = wf__vmap_front_or_one(in[3], axes[3]);
    *out = a[0] && a[1] && a[2] && (node->ninputs < 4 || a[3])
               ? wf_scaled_dot_product_attention(a[0], a[1], a[2], p->scale, a[3], p->causal)
               : NULL;
    *out_axis = 0;
    return wf__rule_result(*out);
}

/* ---------------------------------------------------------------- rope */

/* The rotation by the opposite angle: positions times -scale. */
static wf_status vjp_rope(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    (void)wanted;
    wf_rope_params p = *(const wf_rope_params *)node->params;
    p.scale = -p.scale;
    cts[0] = wf__rule_node(node->prim, &p, &ct, 1);
    return wf__rule_result(cts[0]);
}

/* ---------------------------------------------------------------- table */

const wf_prim_rules wf__rules_fast[] = {
    /* The compositions follow any shape (their own rules are checked one
     * by one as the nested engine runs them); attention's, built on the
     * nodes of a shapeless trace, derives its reshapes and causal mask from
     * each call's shapes (ops/fast.c). */
    {&wf__prim_layer_norm, WF_RULES_DIFFERENTIABLE, vjp_composed, jvp_composed, vmap_norm,
     true},
    {&wf__prim_rms_norm, WF_RULES_DIFFERENTIABLE, vjp_composed, jvp_composed, vmap_norm, true},
    {&wf__prim_sdpa, WF_RULES_DIFFERENTIABLE, vjp_composed, jvp_composed, vmap_sdpa, true},
    {&wf__prim_rope, WF_RULES_DIFFERENTIABLE, vjp_rope, wf__rule_jvp_linear, vmap_rope, true},
};

const size_t wf__rules_fast_count = sizeof wf__rules_fast / sizeof wf__rules_fast[0];
