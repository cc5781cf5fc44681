/*
 * wf_custom_function and wf_checkpoint: user rules are used by each
 * transform, missing rules fall back to the function's own graph, a
 * wf_custom kernel becomes differentiable, bad rule results are errors;
 * a checkpointed 32-layer MLP has a lower peak memory than the plain one,
 * runs each layer's forward exactly once more in the backward pass, and
 * gives the same gradients.
 */
#include <stdatomic.h>

#include "core/array.h"
#include "transforms_util.h"

static wf_array *call1(wf_fn *fn, wf_array *x)
{
    wf_array *out = NULL;
    size_t n = 1;
    if (wf_fn_call(fn, &x, 1, &out, &n) != WF_OK)
        return NULL;
    return out;
}

static wf_array *vec(const double *v, int64_t n)
{
    return wf_array_from_data(v, &n, 1, WF_DTYPE_F64);
}

/* ---------------------------------------------------------------- a custom exp */

static atomic_int body_calls, vjp_calls, jvp_calls, vmap_calls;

/* The forward: a wf_custom kernel computing exp (opaque to weft). */
static wf_status exp_kernel(void *payload, const wf_custom_call *call)
{
    (void)payload;
    int64_t n = 1;
    for (int d = 0; d < call->input_ndims[0]; d++)
        n *= call->input_shapes[0][d];
    const double *x = call->inputs[0];
    double *y = call->output;
    for (int64_t i = 0; i < n; i++)
        y[i] = exp(x[i]);
    return WF_OK;
}

static wf_status custom_exp_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                 size_t *nout)
{
    (void)payload;
    (void)n;
    atomic_fetch_add(&body_calls, 1);
    out[0] = wf_custom("exp_kernel", exp_kernel, NULL, NULL, in, 1, wf_array_shape(in[0]),
                       wf_array_ndim(in[0]), WF_DTYPE_F64);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* vjp: (x, ct, y) -> ct * y */
static wf_status custom_exp_vjp(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                size_t *nout)
{
    (void)payload;
    atomic_fetch_add(&vjp_calls, 1);
    if (n != 3)
        return WF_ERR_INVALID_ARGUMENT;
    out[0] = wf_multiply(in[1], in[2]);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* jvp: (x, t) -> t * exp(x) */
static wf_status custom_exp_jvp(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                size_t *nout)
{
    (void)payload;
    atomic_fetch_add(&jvp_calls, 1);
    if (n != 2)
        return WF_ERR_INVALID_ARGUMENT;
    wf_array *e = wf_exp(in[0]);
    out[0] = wf_multiply(in[1], e);
    wf_release(e);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* vmap: x batched on axis 0 -> the kernel over the whole batch */
static wf_status custom_exp_vmap(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                 size_t *nout)
{
    atomic_fetch_add(&vmap_calls, 1);
    return custom_exp_body(payload, in, n, out, nout);
}

static wf_fn *custom_exp(bool with_rules)
{
    wf_fn *body = wf_fn_new(custom_exp_body, NULL, NULL);
    wf_fn *vjp = with_rules ? wf_fn_new(custom_exp_vjp, NULL, NULL) : NULL;
    wf_fn *jvp = with_rules ? wf_fn_new(custom_exp_jvp, NULL, NULL) : NULL;
    wf_fn *vmap = with_rules ? wf_fn_new(custom_exp_vmap, NULL, NULL) : NULL;
    wf_fn *f = wf_custom_function(body, vjp, jvp, vmap);
    wf_fn_release(body);
    wf_fn_release(vjp);
    wf_fn_release(jvp);
    wf_fn_release(vmap);
    return f;
}

static void reset_counts(void)
{
    atomic_store(&body_calls, 0);
    atomic_store(&vjp_calls, 0);
    atomic_store(&jvp_calls, 0);
    atomic_store(&vmap_calls, 0);
}

static void test_custom_rules_used(void)
{
    wf_fn *f = custom_exp(true);
    const double v[3] = {0.5, -1, 2};
    wf_array *x = vec(v, 3);
    reset_counts();
    /* plain call: just the body */
    wf_array *y = call1(f, x);
    double *yv = tu_read(y);
    CHECK(yv && fabs(yv[0] - exp(0.5)) < 1e-15);
    CHECK_EQ_INT(atomic_load(&body_calls), 1);
    free(yv);
    /* vjp through the user rule */
    const double c[3] = {1, 2, 3};
    wf_array *ct = vec(c, 3), *dx = NULL, *out = NULL;
    CHECK_OK(wf_vjp(f, &x, 1, &ct, 1, &out, &dx));
    double *d = tu_read(dx);
    for (int i = 0; CHECK(d != NULL) && i < 3; i++)
        CHECK_NEAR(d[i], c[i] * exp(v[i]), 1e-14);
    CHECK_EQ_INT(atomic_load(&vjp_calls), 1);
    free(d);
    /* jvp */
    wf_array *tout = NULL;
    size_t n = 1;
    CHECK_OK(wf_jvp(f, &x, 1, &ct, NULL, &tout, &n));
    d = tu_read(tout);
    for (int i = 0; CHECK(d != NULL) && i < 3; i++)
        CHECK_NEAR(d[i], c[i] * exp(v[i]), 1e-14);
    CHECK_EQ_INT(atomic_load(&jvp_calls), 1);
    free(d);
    /* vmap over a (2, 3) batch */
    const double bv[6] = {0, 1, 2, 3, -1, -2};
    const int64_t bs[2] = {2, 3};
    wf_array *xb = wf_array_from_data(bv, bs, 2, WF_DTYPE_F64);
    wf_fn *vf = wf_vmap(f, NULL, 0, NULL, 0);
    wf_array *yb = call1(vf, xb);
    d = tu_read(yb);
    for (int i = 0; CHECK(d != NULL) && i < 6; i++)
        CHECK_NEAR(d[i], exp(bv[i]), 1e-14);
    CHECK_EQ_INT(atomic_load(&vmap_calls), 1);
    free(d);
    wf_release(yb);
    wf_release(xb);
    wf_fn_release(vf);
    wf_release(tout);
    wf_release(out);
    wf_release(dx);
    wf_release(ct);
    wf_release(y);
    wf_release(x);
    wf_fn_release(f);
}

/* Without rules the kernel is opaque: every transform says so. */
static void test_custom_kernel_needs_rules(void)
{
    wf_fn *f = custom_exp(false);
    const double v[2] = {1, 2};
    wf_array *x = vec(v, 2), *ct = vec(v, 2), *dx = NULL, *t = NULL;
    CHECK_STATUS(wf_vjp(f, &x, 1, &ct, 1, NULL, &dx), WF_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(wf_last_error_message(), "exp_kernel");
    size_t n = 1;
    CHECK_STATUS(wf_jvp(f, &x, 1, &ct, NULL, &t, &n), WF_ERR_UNSUPPORTED);
    wf_fn *vf = wf_vmap(f, NULL, 0, NULL, 0);
    const int64_t bs[2] = {1, 2};
    wf_array *xb = wf_reshape(x, bs, 2);
    CHECK_NULL_WITH(call1(vf, xb), WF_ERR_UNSUPPORTED);
    wf_release(xb);
    wf_fn_release(vf);
    wf_clear_error();
    wf_release(x);
    wf_release(ct);
    wf_fn_release(f);
}

/* A differentiable body with a custom vjp only: jvp and vmap go through the
 * body's graph. f(x) = sin(x); the vjp rule deliberately says 2 * ct so we
 * can see it is used. */
static wf_status sin_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                          size_t *nout)
{
    (void)payload;
    (void)n;
    out[0] = wf_sin(in[0]);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static wf_status double_ct_vjp(void *payload, wf_array *const *in, size_t n, wf_array **out,
                               size_t *nout)
{
    (void)payload;
    (void)n;
    wf_array *two = wf_scalar(2, WF_DTYPE_F64);
    out[0] = wf_multiply(in[1], two);
    wf_release(two);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static wf_status wrong_shape_vjp(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                 size_t *nout)
{
    (void)payload;
    (void)in;
    (void)n;
    out[0] = wf_scalar(1, WF_DTYPE_F64);
    *nout = 1;
    return WF_OK;
}

static void test_custom_partial_rules(void)
{
    wf_fn *body = wf_fn_new(sin_body, NULL, NULL), *vjp = wf_fn_new(double_ct_vjp, NULL, NULL);
    wf_fn *f = wf_custom_function(body, vjp, NULL, NULL);
    const double v[2] = {0.3, 1.2}, one[2] = {1, 1};
    wf_array *x = vec(v, 2), *ct = vec(one, 2), *dx = NULL, *t = NULL;
    CHECK_OK(wf_vjp(f, &x, 1, &ct, 1, NULL, &dx));
    double *d = tu_read(dx);
    CHECK(d && d[0] == 2 && d[1] == 2);
    free(d);
    size_t n = 1;
    CHECK_OK(wf_jvp(f, &x, 1, &ct, NULL, &t, &n));
    d = tu_read(t);
    CHECK(d != NULL);
    CHECK_NEAR(d[0], cos(0.3), 1e-15);
    free(d);
    /* grad of grad goes through the custom vjp's own graph (ct * 2: zero) */
    wf_release(dx);
    wf_release(t);
    /* a rule returning the wrong shape */
    wf_fn *bad = wf_fn_new(wrong_shape_vjp, NULL, NULL);
    wf_fn *g = wf_custom_function(body, bad, NULL, NULL);
    dx = NULL;
    CHECK_STATUS(wf_vjp(g, &x, 1, &ct, 1, NULL, &dx), WF_ERR_SHAPE);
    CHECK_STR_CONTAINS(wf_last_error_message(), "vjp rule");
    wf_clear_error();
    CHECK_NULL_WITH(wf_custom_function(NULL, vjp, NULL, NULL), WF_ERR_NULL_ARGUMENT);
    CHECK_NULL_WITH(wf_checkpoint(NULL), WF_ERR_NULL_ARGUMENT);
    wf_fn_release(g);
    wf_fn_release(bad);
    wf_release(x);
    wf_release(ct);
    wf_fn_release(f);
    wf_fn_release(vjp);
    wf_fn_release(body);
}

/* ---------------------------------------------------------------- checkpoint */

enum { LAYERS = 32, WIDTH = 64, ROWS = 256 };

static atomic_int layer_calls[LAYERS];

typedef struct layer {
    int index;
} layer;

/* One layer: (x, w, b) -> tanh(x @ w + b) * 0.5 + x, several intermediates
 * of the activations' size. */
static wf_status layer_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                            size_t *nout)
{
    (void)n;
    const layer *l = payload;
    atomic_fetch_add(&layer_calls[l->index], 1);
    wf_scope_begin();
    wf_array *half = wf_scalar(0.5, WF_DTYPE_F32);
    wf_array *h = wf_tanh(wf_add(wf_matmul(in[0], in[1]), in[2]));
    wf_array *y = wf_add(wf_multiply(h, half), in[0]);
    out[0] = y ? wf_keep(y) : NULL;
    wf_scope_end();
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

typedef struct network {
    wf_fn *layers[LAYERS];
    layer info[LAYERS];
} network;

static void network_init(network *net, bool checkpointed)
{
    for (int i = 0; i < LAYERS; i++) {
        net->info[i].index = i;
        wf_fn *f = wf_fn_new(layer_body, &net->info[i], NULL);
        net->layers[i] = checkpointed ? wf_checkpoint(f) : wf_fn_retain(f);
        wf_fn_release(f);
    }
}

static void network_free(network *net)
{
    for (int i = 0; i < LAYERS; i++)
        wf_fn_release(net->layers[i]);
}

/* loss(x, w_0, b_0, ..., w_31, b_31) = mean(net(x)^2). */
static wf_status network_loss(void *payload, wf_array *const *in, size_t n, wf_array **out,
                              size_t *nout)
{
    (void)n;
    const network *net = payload;
    wf_array *x = wf_retain(in[0]);
    wf_status st = WF_OK;
    for (int i = 0; i < LAYERS && st == WF_OK; i++) {
        wf_array *args[3] = {x, in[1 + 2 * i], in[2 + 2 * i]}, *y = NULL;
        size_t ny = 1;
        st = wf_fn_call(net->layers[i], args, 3, &y, &ny);
        wf_release(x);
        x = y;
    }
    if (st != WF_OK)
        return st;
    wf_array *sq = wf_square(x);
    out[0] = wf_mean(sq, NULL, 0, false);
    *nout = 1;
    wf_release(sq);
    wf_release(x);
    return out[0] ? WF_OK : wf_last_error();
}

typedef struct run_result {
    size_t peak;
    double *grads; /* all weight gradients, concatenated */
} run_result;

static run_result run_network(bool checkpointed, wf_array *const *params)
{
    network net;
    network_init(&net, checkpointed);
    for (int i = 0; i < LAYERS; i++)
        atomic_store(&layer_calls[i], 0);
    wf_fn *loss = wf_fn_new(network_loss, &net, NULL);
    int argnums[2 * LAYERS];
    for (int i = 0; i < 2 * LAYERS; i++)
        argnums[i] = 1 + i;
    wf_fn *g = wf_grad(loss, argnums, 2 * LAYERS);
    wf_array *grads[2 * LAYERS] = {NULL};
    size_t n = 2 * LAYERS;
    run_result r = {0, NULL};
    wf_clear_cache();
    wf_reset_peak_memory();
    if (CHECK_OK(wf_fn_call(g, params, 1 + 2 * LAYERS, grads, &n)) &&
        CHECK_OK(wf_eval(grads, n))) {
        wf_memory_stats stats = wf_memory_stats_default();
        CHECK_OK(wf_memory_stats_get(&stats));
        r.peak = stats.peak_bytes;
        r.grads = malloc((size_t)LAYERS * (WIDTH * WIDTH + WIDTH) * sizeof(double));
        size_t at = 0;
        for (size_t k = 0; k < n; k++) {
            double *v = tu_read(grads[k]);
            memcpy(r.grads + at, v, (size_t)wf_array_size(grads[k]) * sizeof(double));
            at += (size_t)wf_array_size(grads[k]);
            free(v);
        }
    }
    for (size_t k = 0; k < 2 * LAYERS; k++)
        wf_release(grads[k]);
    wf_fn_release(g);
    wf_fn_release(loss);
    network_free(&net);
    return r;
}

static void test_checkpoint_memory(void)
{
    wf_array *params[1 + 2 * LAYERS];
    const int64_t xs[2] = {ROWS, WIDTH}, ws[2] = {WIDTH, WIDTH}, bs[1] = {WIDTH};
    params[0] = wf_astype(tu_input(xs, 2, -1, 1, 1, false), WF_DTYPE_F32);
    for (int i = 0; i < LAYERS; i++) {
        wf_array *w = tu_input(ws, 2, -0.15, 0.15, 10 + (uint32_t)i, false);
        wf_array *b = tu_input(bs, 1, -0.1, 0.1, 100 + (uint32_t)i, false);
        params[1 + 2 * i] = wf_astype(w, WF_DTYPE_F32);
        params[2 + 2 * i] = wf_astype(b, WF_DTYPE_F32);
        wf_release(w);
        wf_release(b);
    }
    CHECK_OK(wf_eval(params, 1 + 2 * LAYERS));
    run_result plain = run_network(false, params);
    for (int i = 0; i < LAYERS; i++)
        CHECK_EQ_INT(atomic_load(&layer_calls[i]), 1);
    run_result ckpt = run_network(true, params);
    /* each layer: its forward, then once more in the backward pass */
    for (int i = 0; i < LAYERS; i++)
        CHECK_EQ_INT(atomic_load(&layer_calls[i]), 2);
    printf("    peak bytes: %zu without checkpoints, %zu with (%.2fx)\n", plain.peak, ckpt.peak,
           ckpt.peak ? (double)plain.peak / (double)ckpt.peak : 0.0);
    CHECK(ckpt.peak > 0 && ckpt.peak < plain.peak);
    if (CHECK(plain.grads && ckpt.grads))
        tu_check_values("checkpoint", "grads", ckpt.grads, plain.grads,
                        (int64_t)LAYERS * (WIDTH * WIDTH + WIDTH), 1e-5);
    free(plain.grads);
    free(ckpt.grads);
    for (int i = 0; i < 1 + 2 * LAYERS; i++)
        wf_release(params[i]);
}

/* jvp and vmap of a checkpointed function run it again under them. */
static void test_checkpoint_jvp_vmap(void)
{
    wf_fn *body = wf_fn_new(sin_body, NULL, NULL), *f = wf_checkpoint(body);
    const double v[2] = {0.3, 1.2}, one[2] = {1, -2};
    wf_array *x = vec(v, 2), *t = vec(one, 2), *tout = NULL;
    size_t n = 1;
    CHECK_OK(wf_jvp(f, &x, 1, &t, NULL, &tout, &n));
    double *d = tu_read(tout);
    CHECK(d != NULL);
    CHECK_NEAR(d[1], -2 * cos(1.2), 1e-15);
    free(d);
    wf_fn *vf = wf_vmap(f, NULL, 0, NULL, 0);
    wf_array *y = call1(vf, x);
    d = tu_read(y);
    CHECK(d != NULL);
    CHECK_NEAR(d[0], sin(0.3), 1e-15);
    free(d);
    /* grad of grad through a checkpoint */
    wf_fn *wf = tu_weighted_fn(f, t), *g = wf_grad(wf, NULL, 0);
    wf_fn_release(wf);
    wf_array *dx = call1(g, x);
    d = tu_read(dx);
    CHECK(d != NULL);
    CHECK_NEAR(d[1], -2 * cos(1.2), 1e-15);
    free(d);
    wf_release(dx);
    wf_fn_release(g);
    wf_release(y);
    wf_fn_release(vf);
    wf_release(tout);
    wf_release(x);
    wf_release(t);
    wf_fn_release(f);
    wf_fn_release(body);
}

/* (x + 1, x * 2): two outputs. The vmap rule's kind is its payload: 0
 * right, 1 one array too few, 2 not batched (the unbatched shape). */
static wf_status two_outputs_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                  size_t *nout)
{
    (void)payload, (void)n;
    wf_array *one = wf_scalar(1, WF_DTYPE_F64), *two = wf_scalar(2, WF_DTYPE_F64);
    out[0] = wf_add(in[0], one);
    out[1] = wf_multiply(in[0], two);
    wf_release(one);
    wf_release(two);
    *nout = 2;
    return out[0] && out[1] ? WF_OK : wf_last_error();
}

static wf_status two_outputs_vmap(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                  size_t *nout)
{
    const int kind = *(const int *)payload;
    atomic_fetch_add(&vmap_calls, 1);
    if (kind == 2) {
        wf_array *zero = wf_scalar(0, WF_DTYPE_I32), *first = wf_take(in[0], zero, 0);
        wf_release(zero);
        wf_status st = two_outputs_body(NULL, &first, 1, out, nout);
        wf_release(first);
        return st;
    }
    wf_status st = two_outputs_body(NULL, in, n, out, nout);
    if (st == WF_OK && kind == 1) {
        wf_release(out[1]);
        *nout = 1;
    }
    return st;
}

/* vmap of a two-output custom function: with a right rule both outputs are
 * batched (the rule runs once per output used); a rule returning too few
 * arrays or unbatched ones fails with its message; without a rule the body
 * is mapped. Nothing is left alive in any case. */
static void test_custom_vmap_two_outputs(void)
{
    const double bv[6] = {0, 1, 2, 3, -1, -2};
    const int64_t bs[2] = {2, 3};
    static const int kinds[3] = {0, 1, 2};
    const char *const why[3] = {NULL, "the vmap rule returned 1 arrays, expected 2",
                                "is not batched on axis 0"};
    const int64_t live = wf__arrays_live();
    for (int kind = -1; kind < 3; kind++) { /* -1: no vmap rule */
        wf_fn *body = wf_fn_new(two_outputs_body, NULL, NULL);
        wf_fn *rule = kind < 0 ? NULL : wf_fn_new(two_outputs_vmap, (void *)&kinds[kind], NULL);
        wf_fn *f = wf_custom_function(body, NULL, NULL, rule);
        wf_fn *vf = wf_vmap(f, NULL, 0, NULL, 0);
        wf_array *xb = wf_array_from_data(bv, bs, 2, WF_DTYPE_F64);
        wf_array *y[2] = {NULL, NULL};
        size_t n = 2;
        reset_counts();
        wf_status st = wf_fn_call(vf, &xb, 1, y, &n);
        if (kind <= 0) {
            if (CHECK_OK(st) && CHECK_EQ_INT(n, 2)) {
                double *a = tu_read(y[0]), *b = tu_read(y[1]);
                for (int i = 0; a && b && i < 6; i++) {
                    CHECK_NEAR(a[i], bv[i] + 1, 0);
                    CHECK_NEAR(b[i], bv[i] * 2, 0);
                }
                CHECK(a && b);
                free(a);
                free(b);
            }
            CHECK_EQ_INT(atomic_load(&vmap_calls), kind < 0 ? 0 : 2);
        } else {
            CHECK(st != WF_OK && y[0] == NULL && y[1] == NULL);
            CHECK_STR_CONTAINS(wf_last_error_message(), why[kind]);
            wf_clear_error();
        }
        wf_release(y[0]);
        wf_release(y[1]);
        wf_release(xb);
        wf_fn_release(vf);
        wf_fn_release(f);
        wf_fn_release(rule);
        wf_fn_release(body);
        if (!CHECK_EQ_INT(wf__arrays_live(), live))
            printf("    arrays left alive with vmap rule kind %d\n", kind);
    }
}

int main(void)
{
    RUN_TEST(test_custom_rules_used);
    RUN_TEST(test_custom_kernel_needs_rules);
    RUN_TEST(test_custom_partial_rules);
    RUN_TEST(test_checkpoint_memory);
    RUN_TEST(test_checkpoint_jvp_vmap);
    RUN_TEST(test_custom_vmap_two_outputs);
    return TEST_SUMMARY();
}
