/* Fused ("fast") ops: wf_layer_norm, wf_rms_norm, wf_rope,
 * wf_scaled_dot_product_attention, wf_silu, wf_gelu, wf_gelu_tanh. Each
 * builds one primitive node (its kernel does the whole computation in one
 * pass per row); the primitives' infer functions validate shapes, dtypes and
 * parameters. */
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "ops/ops.h"
#include "prim/linalg.h"
#include "prim/prims.h"

wf_array *wf__op_layer_norm(wf_array *x, wf_array *weight, wf_array *bias, double eps)
{
    if (!wf__array_check(x, "wf_layer_norm", "x"))
        return NULL;
    if (weight && !wf__array_check(weight, "wf_layer_norm", "weight"))
        return NULL;
    if (bias && !wf__array_check(bias, "wf_layer_norm", "bias"))
        return NULL;
    wf_norm_params p;
    memset(&p, 0, sizeof p);
    p.eps = eps;
    p.has_weight = weight != NULL;
    p.has_bias = bias != NULL;
    wf_array *inputs[3] = {x, NULL, NULL};
    int n = 1;
    if (weight)
        inputs[n++] = weight;
    if (bias)
        inputs[n++] = bias;
    return wf__node_new(&wf__prim_layer_norm, &p, inputs, n);
}

wf_array *wf__op_rms_norm(wf_array *x, wf_array *weight, double eps)
{
    if (!wf__array_check(x, "wf_rms_norm", "x"))
        return NULL;
    if (weight && !wf__array_check(weight, "wf_rms_norm", "weight"))
        return NULL;
    wf_norm_params p;
    memset(&p, 0, sizeof p);
    p.eps = eps;
    p.has_weight = weight != NULL;
    wf_array *inputs[2] = {x, weight};
    return wf__node_new(&wf__prim_rms_norm, &p, inputs, weight ? 2 : 1);
}

wf_array *wf__op_rope(wf_array *x, int dims, bool traditional, double base, double scale,
                      int64_t offset)
{
    if (!wf__array_check(x, "wf_rope", "x"))
        return NULL;
    wf_rope_params p;
    memset(&p, 0, sizeof p);
    p.dims = dims;
    p.traditional = traditional;
    p.base = base;
    p.scale = scale;
    p.offset = offset;
    return wf__node_new(&wf__prim_rope, &p, &x, 1);
}

wf_array *wf__op_scaled_dot_product_attention(wf_array *q, wf_array *k, wf_array *v, double scale,
                                              wf_array *mask, bool causal)
{
    const char *op = "wf_scaled_dot_product_attention";
    if (!wf__array_check(q, op, "q") || !wf__array_check(k, op, "k") ||
        !wf__array_check(v, op, "v"))
        return NULL;
    if (mask && !wf__array_check(mask, op, "mask"))
        return NULL;
    wf_sdpa_params p;
    memset(&p, 0, sizeof p);
    p.scale = scale;
    p.causal = causal;
    if (!mask) {
        wf_array *inputs[3] = {q, k, v};
        return wf__node_new(&wf__prim_sdpa, &p, inputs, 3);
    }
    if (mask->dtype == WF_DTYPE_BOOL) {
        p.mask_kind = WF_SDPA_MASK_BOOL;
    } else if (wf__dtype_is_float(mask->dtype)) {
        p.mask_kind = WF_SDPA_MASK_ADD;
    } else {
        wf__error(WF_ERR_DTYPE, "%s: mask dtype %s (needs bool or a float type)", op,
                  wf_dtype_name(mask->dtype));
        return NULL;
    }
    if (q->ndim < 2 || k->ndim < 2 || v->ndim < 2) {
        wf__error(WF_ERR_SHAPE, "%s: q, k, v need rank >= 2 (got %d, %d, %d)", op, q->ndim,
                  k->ndim, v->ndim);
        return NULL;
    }
    /* The mask is broadcast (a view) to (lead..., Lq, Lk). */
    int64_t shape[WF_MAX_NDIM];
    int n = 0;
    const wf_desc dq = wf__array_desc(q), dk = wf__array_desc(k), dv = wf__array_desc(v);
    if (wf__sdpa_lead_shape(op, &dq, &dk, &dv, shape, &n) != WF_OK)
        return NULL;
    if (n + 2 > WF_MAX_NDIM) {
        wf__error(WF_ERR_SHAPE, "%s: rank too large", op);
        return NULL;
    }
    shape[n] = q->shape[q->ndim - 2];
    shape[n + 1] = k->shape[k->ndim - 2];
    bool fits = mask->ndim <= n + 2;
    for (int d = 0; fits && d < mask->ndim; d++) {
        const int64_t md = mask->shape[mask->ndim - 1 - d], sd = shape[n + 1 - d];
        fits = md == 1 || md == sd;
    }
    if (!fits) {
        char sm[256], ss[256];
        wf__error(WF_ERR_SHAPE, "%s: mask of shape %s does not broadcast to %s", op,
                  wf__shape_str(mask->shape, mask->ndim, sm, sizeof sm),
                  wf__shape_str(shape, n + 2, ss, sizeof ss));
        return NULL;
    }
    wf_array *mb = wf__op_broadcast_to(mask, shape, n + 2);
    if (!mb)
        return NULL;
    wf_array *inputs[4] = {q, k, v, mb};
    wf_array *out = wf__node_new(&wf__prim_sdpa, &p, inputs, 4);
    wf__array_release(mb);
    return out;
}

/* Integer and bool inputs compute in float32 (as the unary ops do). */
static wf_array *activation(const char *op, const wf_prim_def *prim, wf_array *x)
{
    if (!wf__array_check(x, op, "x"))
        return NULL;
    if (wf__dtype_is_float(x->dtype))
        return wf__node_new(prim, NULL, &x, 1);
    wf_array *f = wf__op_astype(x, WF_DTYPE_F32);
    if (!f)
        return NULL;
    wf_array *out = wf__node_new(prim, NULL, &f, 1);
    wf__array_release(f);
    return out;
}

wf_array *wf__op_silu(wf_array *x) { return activation("wf_silu", &wf__prim_silu, x); }
wf_array *wf__op_gelu(wf_array *x) { return activation("wf_gelu", &wf__prim_gelu, x); }
wf_array *wf__op_gelu_tanh(wf_array *x)
{
    return activation("wf_gelu_tanh", &wf__prim_gelu_tanh, x);
}

/* ---------------------------------------------------------------- public entry points
 * The internal builders above, each result handed to the caller's scope. */

wf_array *wf_layer_norm(wf_array *x, wf_array *weight, wf_array *bias, double eps)
{
    return wf__array_publish(wf__op_layer_norm(x, weight, bias, eps));
}

wf_array *wf_rms_norm(wf_array *x, wf_array *weight, double eps)
{
    return wf__array_publish(wf__op_rms_norm(x, weight, eps));
}

wf_array *wf_rope(wf_array *x, int dims, bool traditional, double base, double scale,
                  int64_t offset)
{
    return wf__array_publish(wf__op_rope(x, dims, traditional, base, scale, offset));
}

wf_array *wf_scaled_dot_product_attention(wf_array *q, wf_array *k, wf_array *v, double scale,
                                          wf_array *mask, bool causal)
{
    return wf__array_publish(wf__op_scaled_dot_product_attention(q, k, v, scale, mask, causal));
}

wf_array *wf_silu(wf_array *x) { return wf__array_publish(wf__op_silu(x)); }
wf_array *wf_gelu(wf_array *x) { return wf__array_publish(wf__op_gelu(x)); }
wf_array *wf_gelu_tanh(wf_array *x) { return wf__array_publish(wf__op_gelu_tanh(x)); }
