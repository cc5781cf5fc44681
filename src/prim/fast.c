/* Primitives of the fused ("fast") ops: layer_norm, rms_norm, rope,
 * scaled_dot_product_attention (sdpa), silu, gelu, gelu_tanh. Each is one
 * primitive with its own kernel (backend/cpu/fast.c). */
#include <math.h>

#include "core/dtype.h"
#include "core/error.h"
#include "prim/linalg.h"
#include "prim/prims.h"

static void same_shape(const wf_desc *a, wf_out_desc *out)
{
    out->ndim = a->ndim;
    wf__shape_copy(out->shape, a->shape, a->ndim);
}

/* ---------------------------------------------------------------- norms */

static wf_status infer_norm(const char *op, const wf_norm_params *p, const wf_desc *inputs,
                            int ninputs, wf_out_desc *out)
{
    const int want = 1 + (p->has_weight ? 1 : 0) + (p->has_bias ? 1 : 0);
    if (ninputs != want)
        return wf__error(WF_ERR_INTERNAL, "%s: expected %d inputs, got %d", op, want, ninputs);
    const wf_desc *x = &inputs[0];
    if (x->ndim < 1)
        return wf__error(WF_ERR_SHAPE, "%s: x must have at least 1 dim (got a 0-d array)", op);
    if (!(p->eps >= 0) || !isfinite(p->eps))
        return wf__error(WF_ERR_INVALID_ARGUMENT, "%s: eps %g must be finite and >= 0", op,
                         p->eps);
    const int64_t d = x->shape[x->ndim - 1];
    wf_dtype dt = x->dtype;
    for (int i = 1; i < ninputs; i++) {
        const wf_desc *w = &inputs[i];
        const char *what = (i == 1 && p->has_weight) ? "weight" : "bias";
        if (w->ndim != 1 || w->shape[0] != d) {
            char sw[256];
            return wf__error(WF_ERR_SHAPE, "%s: %s has shape %s, expected (%lld,) (x's last dim)",
                             op, what, wf__shape_str(w->shape, w->ndim, sw, sizeof sw),
                             (long long)d);
        }
        dt = wf_promote_types(dt, w->dtype);
    }
    if (!wf__dtype_is_float(dt))
        return wf__error(WF_ERR_DTYPE, "%s: dtype %s (needs a float type)", op,
                         wf_dtype_name(dt));
    out->dtype = dt;
    same_shape(x, out);
    return WF_OK;
}

static wf_status infer_layer_norm(const void *params, const wf_desc *inputs, int ninputs,
                                  wf_out_desc *out)
{
    return infer_norm("wf_layer_norm", params, inputs, ninputs, out);
}

static wf_status infer_rms_norm(const void *params, const wf_desc *inputs, int ninputs,
                                wf_out_desc *out)
{
    const wf_norm_params *p = params;
    if (p->has_bias)
        return wf__error(WF_ERR_INTERNAL, "wf_rms_norm: takes no bias");
    return infer_norm("wf_rms_norm", params, inputs, ninputs, out);
}

const wf_prim_def wf__prim_layer_norm = {
    .name = "layer_norm",
    .flags = 0,
    .params_size = sizeof(wf_norm_params),
    .infer = infer_layer_norm,
    .kernels = &(wf_kernel_slots){{0}},
};

const wf_prim_def wf__prim_rms_norm = {
    .name = "rms_norm",
    .flags = 0,
    .params_size = sizeof(wf_norm_params),
    .infer = infer_rms_norm,
    .kernels = &(wf_kernel_slots){{0}},
};

/* ---------------------------------------------------------------- rope */

static wf_status infer_rope(const void *params, const wf_desc *inputs, int ninputs,
                            wf_out_desc *out)
{
    const wf_rope_params *p = params;
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "rope: expected 1 input, got %d", ninputs);
    const wf_desc *x = &inputs[0];
    if (x->ndim < 2)
        return wf__error(WF_ERR_SHAPE, "wf_rope: x must be (..., seq, features) (got rank %d)",
                         x->ndim);
    if (!wf__dtype_is_float(x->dtype))
        return wf__error(WF_ERR_DTYPE, "wf_rope: dtype %s (needs a float type)",
                         wf_dtype_name(x->dtype));
    const int64_t f = x->shape[x->ndim - 1];
    if (p->dims <= 0 || p->dims % 2 != 0 || p->dims > f)
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "wf_rope: dims %d must be even, > 0 and <= features (%lld)", p->dims,
                         (long long)f);
    if (!(p->base > 0) || !isfinite(p->base) || !isfinite(p->scale))
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "wf_rope: base %g must be finite and > 0, scale %g finite", p->base,
                         p->scale);
    out->dtype = x->dtype;
    same_shape(x, out);
    return WF_OK;
}

const wf_prim_def wf__prim_rope = {
    .name = "rope",
    .flags = 0,
    .params_size = sizeof(wf_rope_params),
    .infer = infer_rope,
    .kernels = &(wf_kernel_slots){{0}},
};

/* ---------------------------------------------------------------- attention */

wf_status wf__sdpa_lead_shape(const char *op, const wf_desc *q, const wf_desc *k,
                              const wf_desc *v, int64_t *out, int *nout)
{
    const int nq = q->ndim - 2, nk = k->ndim - 2, nv = v->ndim - 2;
    int n = nq > nk ? nq : nk;
    n = n > nv ? n : nv;
    for (int i = 0; i < n; i++) {
        const int64_t dq = i < n - nq ? 1 : q->shape[i - (n - nq)];
        const int64_t dk = i < n - nk ? 1 : k->shape[i - (n - nk)];
        const int64_t dv = i < n - nv ? 1 : v->shape[i - (n - nv)];
        bool ok = dk == dv || dk == 1 || dv == 1;
        const int64_t dkv = dk == 1 ? dv : dk;
        if (ok && dq == 1)
            out[i] = dkv;
        else if (ok && (dkv == 1 || dkv == dq))
            out[i] = dq;
        else if (ok && i == n - 1 && dkv > 0 && dq % dkv == 0)
            out[i] = dq; /* grouped-query heads */
        else
            ok = false;
        if (!ok)
            return wf__error(WF_ERR_SHAPE,
                             "%s: leading axes of q, k, v do not broadcast (axis %d: %lld, %lld, "
                             "%lld; k/v heads must divide q's on the heads axis)",
                             op, i - n, (long long)dq, (long long)dk, (long long)dv);
    }
    *nout = n;
    return WF_OK;
}

static wf_status infer_sdpa(const void *params, const wf_desc *inputs, int ninputs,
                            wf_out_desc *out)
{
    const wf_sdpa_params *p = params;
    const char *op = "wf_scaled_dot_product_attention";
    const int want = p->mask_kind == WF_SDPA_MASK_NONE ? 3 : 4;
    if (ninputs != want)
        return wf__error(WF_ERR_INTERNAL, "sdpa: expected %d inputs, got %d", want, ninputs);
    const wf_desc *q = &inputs[0], *k = &inputs[1], *v = &inputs[2];
    if (q->ndim < 2 || k->ndim < 2 || v->ndim < 2)
        return wf__error(WF_ERR_SHAPE, "%s: q, k, v need rank >= 2 (got %d, %d, %d)", op,
                         q->ndim, k->ndim, v->ndim);
    const wf_dtype dt = wf_promote_types(wf_promote_types(q->dtype, k->dtype), v->dtype);
    if (!wf__dtype_is_float(q->dtype) || !wf__dtype_is_float(k->dtype) ||
        !wf__dtype_is_float(v->dtype))
        return wf__error(WF_ERR_DTYPE, "%s: dtypes %s, %s, %s (need float types)", op,
                         wf_dtype_name(q->dtype), wf_dtype_name(k->dtype),
                         wf_dtype_name(v->dtype));
    const int64_t lq = q->shape[q->ndim - 2], d = q->shape[q->ndim - 1];
    const int64_t lk = k->shape[k->ndim - 2], dk = k->shape[k->ndim - 1];
    const int64_t lv = v->shape[v->ndim - 2], dv = v->shape[v->ndim - 1];
    if (d != dk || lk != lv) {
        char sq[256], sk[256], sv[256];
        return wf__error(WF_ERR_SHAPE,
                         "%s: q %s, k %s, v %s (need q and k of one feature size, k and v of one "
                         "length)",
                         op, wf__shape_str(q->shape, q->ndim, sq, sizeof sq),
                         wf__shape_str(k->shape, k->ndim, sk, sizeof sk),
                         wf__shape_str(v->shape, v->ndim, sv, sizeof sv));
    }
    if (!isfinite(p->scale))
        return wf__error(WF_ERR_INVALID_ARGUMENT, "%s: scale %g must be finite", op, p->scale);
    int n = 0;
    wf_status st = wf__sdpa_lead_shape(op, q, k, v, out->shape, &n);
    if (st != WF_OK)
        return st;
    if (want == 4) {
        const wf_desc *m = &inputs[3];
        const int64_t ms[2] = {lq, lk};
        if (m->ndim != n + 2 || !wf__shape_equal(m->shape, n, out->shape, n) ||
            !wf__shape_equal(m->shape + n, 2, ms, 2))
            return wf__error(WF_ERR_SHAPE, "%s: mask not broadcast to (..., Lq, Lk)", op);
        if (p->mask_kind == WF_SDPA_MASK_BOOL ? m->dtype != WF_DTYPE_BOOL
                                              : !wf__dtype_is_float(m->dtype))
            return wf__error(WF_ERR_DTYPE, "%s: mask dtype %s (needs bool or a float type)", op,
                             wf_dtype_name(m->dtype));
    }
    out->shape[n] = lq;
    out->shape[n + 1] = dv;
    out->ndim = n + 2;
    out->dtype = dt;
    return WF_OK;
}

const wf_prim_def wf__prim_sdpa = {
    .name = "scaled_dot_product_attention",
    .flags = 0,
    .params_size = sizeof(wf_sdpa_params),
    .infer = infer_sdpa,
    .kernels = &(wf_kernel_slots){{0}},
};

/* ---------------------------------------------------------------- activations */

static wf_status infer_activation(const char *op, const wf_desc *inputs, int ninputs,
                                  wf_out_desc *out)
{
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "%s: expected 1 input, got %d", op, ninputs);
    if (!wf__dtype_is_float(inputs[0].dtype))
        return wf__error(WF_ERR_DTYPE, "%s: input dtype %s is not a float type", op,
                         wf_dtype_name(inputs[0].dtype));
    out->dtype = inputs[0].dtype;
    same_shape(&inputs[0], out);
    return WF_OK;
}

static wf_status infer_silu(const void *params, const wf_desc *inputs, int ninputs,
                            wf_out_desc *out)
{
    (void)params;
    return infer_activation("wf_silu", inputs, ninputs, out);
}

static wf_status infer_gelu(const void *params, const wf_desc *inputs, int ninputs,
                            wf_out_desc *out)
{
    (void)params;
    return infer_activation("wf_gelu", inputs, ninputs, out);
}

static wf_status infer_gelu_tanh(const void *params, const wf_desc *inputs, int ninputs,
                                 wf_out_desc *out)
{
    (void)params;
    return infer_activation("wf_gelu_tanh", inputs, ninputs, out);
}

const wf_prim_def wf__prim_silu = {
    .name = "silu",
    .flags = WF_PRIM_ELEMENTWISE | WF_PRIM_INPLACE | WF_PRIM_INPLACE_ANY_LAYOUT,
    .params_size = 0,
    .infer = infer_silu,
    .kernels = &(wf_kernel_slots){{0}},
};

const wf_prim_def wf__prim_gelu = {
    .name = "gelu",
    .flags = WF_PRIM_ELEMENTWISE | WF_PRIM_INPLACE | WF_PRIM_INPLACE_ANY_LAYOUT,
    .params_size = 0,
    .infer = infer_gelu,
    .kernels = &(wf_kernel_slots){{0}},
};

const wf_prim_def wf__prim_gelu_tanh = {
    .name = "gelu_tanh",
    .flags = WF_PRIM_ELEMENTWISE | WF_PRIM_INPLACE | WF_PRIM_INPLACE_ANY_LAYOUT,
    .params_size = 0,
    .infer = infer_gelu_tanh,
    .kernels = &(wf_kernel_slots){{0}},
};
