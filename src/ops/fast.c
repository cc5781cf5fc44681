/* Fused ("fast") ops: wf_layer_norm, wf_rms_norm, wf_rope,
 * wf_scaled_dot_product_attention, wf_silu, wf_gelu, wf_gelu_tanh. Each
 * builds one primitive node (its kernel does the whole computation in one
 * pass per row); the primitives' infer functions validate shapes, dtypes and
 * parameters. Attention has a training path too (see wf__sdpa_composed). */
#include "ops/fast.h"

#include <math.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "core/graph_mode.h"
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

/* ---------------------------------------------------------------- attention */

static _Thread_local uint64_t training_path_calls;

uint64_t wf__sdpa_training_path_calls(void) { return training_path_calls; }

/* The temporaries of a composition: every builder's result is recorded (and
 * released at the end); a NULL marks the composition failed, and the
 * builders pass NULL inputs on with the first error kept. */
enum { MAX_TEMPS = 48 };

typedef struct temps {
    wf_array *items[MAX_TEMPS];
    int count;
    bool failed;
} temps;

static wf_array *temp(temps *t, wf_array *a)
{
    if (!a || t->count == MAX_TEMPS) {
        if (a) /* cannot happen with the fixed number of steps below */
            wf__array_release(a);
        t->failed = true;
        return NULL;
    }
    return t->items[t->count++] = a;
}

/* The result of the composition (a new reference), the temporaries freed. */
static wf_array *finish_temps(temps *t, wf_array *result)
{
    wf_array *out = !t->failed && result ? wf__array_incref(result) : NULL;
    for (int i = 0; i < t->count; i++)
        wf__array_release(t->items[i]);
    return out;
}

static wf_array *scalar(temps *t, double v, wf_dtype dtype)
{
    return temp(t, wf__op_full(NULL, 0, v, dtype));
}

/* x raised to `rank` by leading size-1 axes (rank >= x's): by expand_dims
 * in a shapeless trace, so that its replay follows each call's shape. */
static wf_array *with_rank(temps *t, wf_array *x, int rank)
{
    if (!x)
        return NULL;
    if (wf__array_is_shapeless(x)) {
        int axes[WF_MAX_NDIM];
        for (int d = 0; d < rank - x->ndim; d++)
            axes[d] = d;
        return x->ndim == rank ? x : temp(t, wf__op_expand_dims(x, axes, rank - x->ndim));
    }
    int64_t shape[WF_MAX_NDIM];
    const int pad = rank - x->ndim;
    for (int d = 0; d < rank; d++)
        shape[d] = d < pad ? 1 : x->shape[d - pad];
    return temp(t, wf__op_reshape(x, shape, rank));
}

/* x with its heads axis split into (groups, heads / groups): the second
 * derived from each call's heads in a shapeless trace. */
static wf_array *split_heads(temps *t, wf_array *x, int heads_axis, int64_t groups)
{
    if (!x)
        return NULL;
    if (wf__array_is_shapeless(x))
        return temp(t, wf__op_unflatten(x, heads_axis, (const int64_t[]){groups, -1}, 2));
    int64_t shape[WF_MAX_NDIM];
    int n = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (d == heads_axis) {
            shape[n++] = groups;
            shape[n++] = x->shape[d] / groups;
        } else {
            shape[n++] = x->shape[d];
        }
    }
    return temp(t, wf__op_reshape(x, shape, n));
}

/* Which keys each query sees under `causal`: key j <= i + (Lk - Lq). */
static wf_array *causal_visible(temps *t, int64_t lq, int64_t lk)
{
    const int64_t col[2] = {lq, 1};
    wf_array *i = temp(t, wf__op_reshape(temp(t, wf__op_arange(0, (double)lq, 1, WF_DTYPE_I64)),
                                         col, 2));
    wf_array *j = temp(t, wf__op_arange(0, (double)lk, 1, WF_DTYPE_I64));
    wf_array *shift = scalar(t, (double)(lk - lq), WF_DTYPE_I64);
    return temp(t, wf__op_less_equal(temp(t, wf__op_subtract(j, i)), shift));
}

/* causal_visible from the shape of the scores s at each call (a shapeless
 * trace): query i sees key j when the queries from i on are no more than
 * the keys from j on (Lq - i <= Lk - j), each counted by a reverse cumsum
 * of integer ones shaped like s. */
static wf_array *causal_visible_like(temps *t, wf_array *s)
{
    wf_array *ones = temp(t, wf__op_astype(temp(t, wf__op_ones_like(s)), WF_DTYPE_I32));
    wf_array *queries_left = temp(t, wf__op_cumsum(ones, s->ndim - 2, true, true));
    wf_array *keys_left = temp(t, wf__op_cumsum(ones, s->ndim - 1, true, true));
    return temp(t, wf__op_less_equal(queries_left, keys_left));
}

/* Scores with -inf where masked -> weights, rows that see nothing giving
 * zeros (as the fused kernel), with no NaN in any gradient: such rows are
 * replaced by zeros before the softmax and their weights zeroed after. */
static wf_array *masked_softmax(temps *t, wf_array *s)
{
    const int last = -1;
    wf_array *visible = temp(t, wf__op_not_equal(s, scalar(t, -INFINITY, s->dtype)));
    wf_array *row_any = temp(t, wf__op_any(visible, &last, 1, true));
    wf_array *zero = scalar(t, 0, s->dtype);
    wf_array *safe = temp(t, wf__op_where(row_any, s, zero));
    wf_array *p = temp(t, wf__op_softmax(safe, &last, 1));
    return temp(t, wf__op_where(visible, p, zero));
}

wf_array *wf__sdpa_composed(wf_array *q, wf_array *k, wf_array *v, wf_array *mask,
                            int mask_kind, double scale, bool causal)
{
    int64_t lead[WF_MAX_NDIM];
    int n = 0;
    const wf_desc dq = wf__array_desc(q), dk = wf__array_desc(k), dv = wf__array_desc(v);
    if (wf__sdpa_lead_shape("wf_scaled_dot_product_attention", &dq, &dk, &dv, lead, &n) != WF_OK)
        return NULL;
    temps t = {.count = 0};
    const wf_dtype dt = wf_promote_types(wf_promote_types(q->dtype, k->dtype), v->dtype);
    wf_array *qq = with_rank(&t, temp(&t, wf__op_astype(q, dt)), n + 2);
    wf_array *kk = with_rank(&t, temp(&t, wf__op_astype(k, dt)), n + 2);
    wf_array *vv = with_rank(&t, temp(&t, wf__op_astype(v, dt)), n + 2);
    if (t.failed)
        return finish_temps(&t, NULL);
    wf_array *m = mask;
    const int64_t lq = q->shape[q->ndim - 2], lk = k->shape[k->ndim - 2];
    const int64_t hq = n ? qq->shape[n - 1] : 1;
    const int64_t hk = n ? kk->shape[n - 1] : 1, hv = n ? vv->shape[n - 1] : 1;
    const int64_t hkv = hk == 1 ? hv : hk;
    if (n && hq != hkv && hkv != 1 && hq != 1) { /* q head h uses kv head h / (hq / hkv) */
        qq = split_heads(&t, qq, n - 1, hkv);
        kk = split_heads(&t, kk, n - 1, hk);
        vv = split_heads(&t, vv, n - 1, hv);
        m = m ? split_heads(&t, m, n - 1, hkv) : NULL;
    }
    wf_array *kt = temp(&t, wf__op_swapaxes(kk, -1, -2));
    wf_array *s = temp(&t, wf__op_multiply(temp(&t, wf__op_matmul(qq, kt)), scalar(&t, scale, dt)));
    wf_array *neg_inf = scalar(&t, -INFINITY, dt);
    if (m && mask_kind == WF_SDPA_MASK_ADD)
        s = temp(&t, wf__op_add(s, temp(&t, wf__op_astype(m, dt))));
    else if (m)
        s = temp(&t, wf__op_where(m, s, neg_inf));
    if (causal && s && wf__array_is_shapeless(s))
        s = temp(&t, wf__op_where(causal_visible_like(&t, s), s, neg_inf));
    else if (causal)
        s = temp(&t, wf__op_where(causal_visible(&t, lq, lk), s, neg_inf));
    const int last = -1;
    wf_array *p = m || causal ? masked_softmax(&t, s) : temp(&t, wf__op_softmax(s, &last, 1));
    wf_array *o = temp(&t, wf__op_matmul(p, vv));
    if (o && o->ndim != n + 2 && wf__array_is_shapeless(o)) {
        o = temp(&t, wf__op_flatten(o, n - 1, n)); /* grouped heads merged back */
    } else if (o && o->ndim != n + 2) {
        int64_t shape[WF_MAX_NDIM];
        wf__shape_copy(shape, lead, n);
        shape[n] = lq;
        shape[n + 1] = v->shape[v->ndim - 1];
        o = temp(&t, wf__op_reshape(o, shape, n + 2));
    }
    return finish_temps(&t, o);
}

/* Inside a grad trace of this thread: the composition, counted. The
 * primitive's own inference checks the inputs first, so errors are the
 * fused path's. */
static wf_array *sdpa_training_path(const wf_sdpa_params *p, wf_array *const *inputs, int n)
{
    wf_desc desc[4];
    for (int i = 0; i < n; i++)
        desc[i] = wf__array_desc(inputs[i]);
    wf_out_desc out;
    if (wf__prim_sdpa.infer(p, desc, n, &out) != WF_OK)
        return NULL;
    training_path_calls++;
    return wf__sdpa_composed(inputs[0], inputs[1], inputs[2], n == 4 ? inputs[3] : NULL,
                             p->mask_kind, p->scale, p->causal);
}

static wf_array *sdpa_node(const wf_sdpa_params *p, wf_array *const *inputs, int n)
{
    if (wf__graph_grad_depth() > 0)
        return sdpa_training_path(p, inputs, n);
    return wf__node_new(&wf__prim_sdpa, p, inputs, n);
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
        return sdpa_node(&p, inputs, 3);
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
    wf_array *out = sdpa_node(&p, inputs, 4);
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
