/*
 * Layers and optimizers of weft_nn.h, written with the public ops only.
 * Each function builds its temporaries in a scope of its own and keeps just
 * its result, so callers see one new array per call.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>

#include "weft.h"
#include "weft_nn.h"
#include "nn/heads.h"

/* Ends the function's scope, keeping `result` (NULL keeps the error). */
static wf_array *finish(wf_array *result)
{
    wf_array *kept = result ? wf_keep(result) : NULL;
    wf_status error = wf_last_error();
    char message[512];
    snprintf(message, sizeof message, "%s", wf_last_error_message());
    wf_scope_end();
    if (!kept)
        wf_set_error(error, "%s", message);
    return kept;
}

static wf_array *f32(double v) { return wf_scalar(v, WF_DTYPE_F32); }

wf_array *wf_nn_linear(wf_array *x, wf_array *w, wf_array *b)
{
    if (wf_scope_begin() != WF_OK)
        return NULL;
    /* The bias goes into the GEMM's output before the product is added
     * to it (addmm): one pass over the result fewer than matmul + add. */
    return finish(b ? wf_addmm(b, x, w, 1.0, 1.0) : wf_matmul(x, w));
}

wf_array *wf_nn_embedding(wf_array *table, wf_array *ids)
{
    return wf_take(table, ids, 0);
}

wf_array *wf_nn_causal_self_attention(wf_array *x, wf_array *wqkv, wf_array *wo, int heads)
{
    if (!x || !wqkv || !wo) {
        wf_set_error(WF_ERR_NULL_ARGUMENT, "wf_nn_causal_self_attention: %s is NULL",
                     !x ? "x" : !wqkv ? "wqkv" : "wo");
        return NULL;
    }
    if (wf_array_ndim(x) != 3 || heads <= 0 || wf_array_dim(x, 2) % heads != 0) {
        wf_set_error(WF_ERR_SHAPE,
                     "wf_nn_causal_self_attention: x must be (batch, seq, dim) with dim a "
                     "multiple of heads (%d)",
                     heads);
        return NULL;
    }
    if (wf_scope_begin() != WF_OK)
        return NULL;
    wf_array *qkv = wf_matmul(x, wqkv); /* (B, T, 3D) */
    wf_array *merged = wf__nn_attend_heads(qkv, heads, NULL, true);
    return finish(wf_matmul(merged, wo));
}

wf_array *wf_nn_mlp(wf_array *x, wf_array *w1, wf_array *b1, wf_array *w2, wf_array *b2)
{
    if (wf_scope_begin() != WF_OK)
        return NULL;
    return finish(wf_nn_linear(wf_gelu(wf_nn_linear(x, w1, b1)), w2, b2));
}

wf_array *wf_nn_cross_entropy(wf_array *logits, wf_array *targets, wf_array *weights)
{
    if (!logits || !targets) {
        wf_set_error(WF_ERR_NULL_ARGUMENT, "wf_nn_cross_entropy: %s is NULL",
                     !logits ? "logits" : "targets");
        return NULL;
    }
    if (wf_array_ndim(logits) != 2 || wf_array_ndim(targets) != 1 ||
        wf_array_dim(targets, 0) != wf_array_dim(logits, 0)) {
        wf_set_error(WF_ERR_SHAPE, "wf_nn_cross_entropy: logits must be (n, classes) and "
                                   "targets (n)");
        return NULL;
    }
    if (wf_scope_begin() != WF_OK)
        return NULL;
    wf_array *lse = wf_logsumexp(logits, (int[]){1}, 1, false);
    wf_array *picked = wf_squeeze(
        wf_take_along_axis(logits, wf_expand_dims(wf_astype(targets, WF_DTYPE_I32), (int[]){1}, 1), 1),
        (int[]){1}, 1);
    wf_array *nll = wf_subtract(lse, picked);
    wf_array *loss;
    if (weights) {
        wf_array *w = wf_astype(weights, WF_DTYPE_F32);
        wf_array *total = wf_sum(wf_multiply(nll, w), NULL, 0, false);
        wf_array *count = wf_maximum(wf_sum(w, NULL, 0, false), f32(1.0));
        loss = wf_divide(total, count);
    } else {
        loss = wf_mean(nll, NULL, 0, false);
    }
    return finish(loss);
}

/* ------------------------------------------------------------ optimizers */

wf_nn_adamw_options wf_nn_adamw_options_default(void)
{
    return (wf_nn_adamw_options){.struct_size = sizeof(wf_nn_adamw_options),
                                 .beta1 = 0.9,
                                 .beta2 = 0.999,
                                 .eps = 1e-8,
                                 .weight_decay = 0.01};
}

static wf_status check_step_args(const char *op, size_t n, wf_array *const *a,
                                 wf_array *const *b, wf_array *lr, wf_array **out)
{
    if ((n && (!a || !b || !out)) || !lr)
        return wf_set_error(WF_ERR_NULL_ARGUMENT, "%s: an argument array is NULL", op);
    return WF_OK;
}

wf_status wf_nn_adamw_step(const wf_nn_adamw_options *o, size_t n, wf_array *const *params,
                           wf_array *const *grads, wf_array *const *m, wf_array *const *v,
                           wf_array *step, wf_array *lr, wf_array **new_params,
                           wf_array **new_m, wf_array **new_v)
{
    wf_nn_adamw_options opt = wf_nn_adamw_options_default();
    if (o) {
        if (o->struct_size != sizeof opt)
            return wf_set_error(WF_ERR_INVALID_ARGUMENT,
                                "wf_nn_adamw_step: options->struct_size %zu is not %zu "
                                "(use wf_nn_adamw_options_default())",
                                o->struct_size, sizeof opt);
        opt = *o;
    }
    wf_status st = check_step_args("wf_nn_adamw_step", n, params, grads, lr, new_params);
    if (st != WF_OK)
        return st;
    if ((n && (!m || !v || !new_m || !new_v)) || !step)
        return wf_set_error(WF_ERR_NULL_ARGUMENT, "wf_nn_adamw_step: an argument array is NULL");
    for (size_t i = 0; i < n; i++)
        new_params[i] = new_m[i] = new_v[i] = NULL;
    if ((st = wf_scope_begin()) != WF_OK)
        return st;
    /* Bias corrections 1 - beta^t, computed on arrays so t may change per call. */
    wf_array *t = wf_astype(step, WF_DTYPE_F32);
    wf_array *c1 = wf_subtract(f32(1.0), wf_power(f32(opt.beta1), t));
    wf_array *c2 = wf_subtract(f32(1.0), wf_power(f32(opt.beta2), t));
    for (size_t i = 0; i < n && st == WF_OK; i++) {
        wf_array *g = grads[i];
        wf_array *mi = wf_add(wf_multiply(f32(opt.beta1), m[i]),
                              wf_multiply(f32(1.0 - opt.beta1), g));
        wf_array *vi = wf_add(wf_multiply(f32(opt.beta2), v[i]),
                              wf_multiply(f32(1.0 - opt.beta2), wf_square(g)));
        wf_array *update = wf_divide(wf_divide(mi, c1),
                                     wf_add(wf_sqrt(wf_divide(vi, c2)), f32(opt.eps)));
        if (opt.weight_decay != 0.0)
            update = wf_add(update, wf_multiply(f32(opt.weight_decay), params[i]));
        wf_array *pi = wf_subtract(params[i], wf_multiply(lr, update));
        new_params[i] = pi ? wf_keep(pi) : NULL;
        new_m[i] = mi ? wf_keep(mi) : NULL;
        new_v[i] = vi ? wf_keep(vi) : NULL;
        if (!new_params[i] || !new_m[i] || !new_v[i])
            st = wf_last_error();
    }
    char message[512];
    snprintf(message, sizeof message, "%s", wf_last_error_message());
    wf_scope_end();
    if (st != WF_OK) {
        for (size_t i = 0; i < n; i++) {
            wf_release(new_params[i]);
            wf_release(new_m[i]);
            wf_release(new_v[i]);
            new_params[i] = new_m[i] = new_v[i] = NULL;
        }
        wf_set_error(st, "%s", message);
    }
    return st;
}

wf_status wf_nn_sgd_step(double momentum, double weight_decay, size_t n, wf_array *const *params,
                         wf_array *const *grads, wf_array *const *buffers, wf_array *lr,
                         wf_array **new_params, wf_array **new_buffers)
{
    wf_status st = check_step_args("wf_nn_sgd_step", n, params, grads, lr, new_params);
    if (st != WF_OK)
        return st;
    if (momentum != 0.0 && n && (!buffers || !new_buffers))
        return wf_set_error(WF_ERR_NULL_ARGUMENT,
                            "wf_nn_sgd_step: momentum needs buffers and new_buffers");
    for (size_t i = 0; i < n; i++) {
        new_params[i] = NULL;
        if (momentum != 0.0)
            new_buffers[i] = NULL;
    }
    if ((st = wf_scope_begin()) != WF_OK)
        return st;
    for (size_t i = 0; i < n && st == WF_OK; i++) {
        wf_array *d = grads[i];
        if (weight_decay != 0.0)
            d = wf_add(d, wf_multiply(f32(weight_decay), params[i]));
        if (momentum != 0.0) {
            d = wf_add(wf_multiply(f32(momentum), buffers[i]), d);
            new_buffers[i] = d ? wf_keep(d) : NULL;
        }
        wf_array *p = wf_subtract(params[i], wf_multiply(lr, d));
        new_params[i] = p ? wf_keep(p) : NULL;
        if (!new_params[i] || (momentum != 0.0 && !new_buffers[i]))
            st = wf_last_error();
    }
    char message[512];
    snprintf(message, sizeof message, "%s", wf_last_error_message());
    wf_scope_end();
    if (st != WF_OK) {
        for (size_t i = 0; i < n; i++) {
            wf_release(new_params[i]);
            new_params[i] = NULL;
            if (momentum != 0.0) {
                wf_release(new_buffers[i]);
                new_buffers[i] = NULL;
            }
        }
        wf_set_error(st, "%s", message);
    }
    return st;
}

double wf_nn_lr_cosine(long step, long total, long warmup, double peak, double floor)
{
    if (warmup > 0 && step < warmup)
        return peak * (double)(step + 1) / (double)warmup;
    if (total <= warmup)
        return peak;
    double progress = (double)(step - warmup) / (double)(total - warmup);
    if (progress > 1.0)
        progress = 1.0;
    return floor + 0.5 * (peak - floor) * (1.0 + cos(3.14159265358979323846 * progress));
}
