/* wf_compile shapeless: arrays made "like" an input (wf_zeros_like,
 * wf_ones_like, wf_full_like) and reshapes derived from the input's shape
 * (expand_dims, squeeze, flatten, unflatten) follow the shape of each call,
 * bit for bit as the uncompiled function; a literal reshape keeps its shape
 * (its -1 re-inferred) and fails with a shape error where it cannot; a
 * default-key draw of a fixed shape is refused. Compiled gradients follow
 * each call's shapes (broadcasting, reductions, matmul, concatenate, pad,
 * slice_update), and so do per-example gradients (vmap of grad); one whose
 * rules read the traced shapes (prod) is refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "weft.h"

enum { LIKE_ZEROS, LIKE_ONES, LIKE_FULL, LIKE_MIXED };

/* LIKE_MIXED: x * zeros_like(x) + ones_like(x) * full_like(x, 2.5) - x. */
static wf_array *like_of(int kind, wf_array *x)
{
    switch (kind) {
    case LIKE_ZEROS: return wf_zeros_like(x);
    case LIKE_ONES: return wf_ones_like(x);
    case LIKE_FULL: return wf_full_like(x, -3.25);
    default: break;
    }
    wf_scope_begin();
    wf_array *a = wf_multiply(x, wf_zeros_like(x));
    wf_array *b = wf_multiply(wf_ones_like(x), wf_full_like(x, 2.5));
    wf_array *y = wf_keep(wf_subtract(wf_add(a, b), x));
    wf_scope_end();
    return y;
}

static wf_status like_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                           size_t *nout)
{
    (void)n;
    wf_array *y = like_of(*(const int *)payload, in[0]);
    if (!y)
        return wf_last_error();
    out[0] = y;
    *nout = 1;
    return WF_OK;
}

static wf_array *ramp2(int64_t rows, int64_t cols, wf_dtype dtype)
{
    int64_t n = rows * cols;
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(i % 13) * 0.75f - 4.0f;
    wf_array *flat = wf_array_from_data(v, &n, 1, WF_DTYPE_F32);
    free(v);
    wf_array *shaped = wf_reshape(flat, (int64_t[]){rows, cols}, 2);
    wf_array *x = wf_astype(shaped, dtype);
    wf_release(flat);
    wf_release(shaped);
    return x;
}

/* Same dtype, shape and bytes. */
static void check_same_bits(wf_array *want, wf_array *got)
{
    CHECK_NOT_NULL(got);
    if (!got)
        return;
    CHECK_EQ_INT(wf_array_dtype(got), wf_array_dtype(want));
    CHECK_EQ_INT(wf_array_ndim(got), wf_array_ndim(want));
    for (int d = 0; d < wf_array_ndim(want) && d < wf_array_ndim(got); d++)
        CHECK_EQ_INT(wf_array_dim(got, d), wf_array_dim(want, d));
    size_t bytes = wf_array_nbytes(want);
    CHECK_EQ_SIZE(wf_array_nbytes(got), bytes);
    if (wf_array_nbytes(got) != bytes)
        return;
    void *a = malloc(bytes + 1), *b = malloc(bytes + 1);
    CHECK_OK(wf_array_copy_to(want, a, bytes));
    CHECK_OK(wf_array_copy_to(got, b, bytes));
    CHECK(memcmp(a, b, bytes) == 0);
    free(a);
    free(b);
}

static void test_like_ops_follow_each_call_shape(void)
{
    const wf_compile_mode modes[] = {WF_COMPILE_ENABLED, WF_COMPILE_NO_FUSE,
                                     WF_COMPILE_NO_SIMPLIFY};
    const wf_dtype dtypes[] = {WF_DTYPE_F32, WF_DTYPE_I32};
    const int64_t rows[] = {1, 3, 1, 17, 3}, cols[] = {2, 4, 1, 5, 4};
    wf_compile_options o = wf_compile_options_default();
    o.shapeless = true;
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        CHECK_OK(wf_set_compile_mode(modes[m]));
        for (int kind = LIKE_ZEROS; kind <= LIKE_MIXED; kind++) {
            for (size_t t = 0; t < sizeof dtypes / sizeof dtypes[0]; t++) {
                wf_fn *f = wf_fn_new(like_body, &kind, NULL);
                wf_fn *cf = wf_compile(f, &o);
                for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
                    wf_array *x = ramp2(rows[k], cols[k], dtypes[t]);
                    wf_array *out[1] = {NULL};
                    size_t nout = 1;
                    CHECK_OK(wf_fn_call(cf, &x, 1, out, &nout));
                    wf_array *want = like_of(kind, x);
                    check_same_bits(want, out[0]);
                    wf_release(want);
                    wf_release(out[0]);
                    wf_release(x);
                }
                wf_compile_stats s = wf_compile_stats_default();
                CHECK_OK(wf_compile_stats_get(cf, &s));
                CHECK_EQ_INT(s.traces, 1);
                wf_fn_release(cf);
                wf_fn_release(f);
            }
        }
    }
    CHECK_OK(wf_set_compile_mode(WF_COMPILE_ENABLED));
}

/* flatten(expand_dims(x)) -> squeeze -> unflatten(-1, 1), times 2 plus 1:
 * every reshape derived from x's shape. */
static wf_status derived_reshapes_body(void *payload, wf_array *const *in, size_t n,
                                       wf_array **out, size_t *nout)
{
    (void)payload;
    (void)n;
    wf_scope_begin();
    wf_array *e = wf_expand_dims(in[0], (int[]){0}, 1);
    wf_array *f = wf_flatten(e, 1, 2);
    wf_array *s = wf_squeeze(f, (int[]){0}, 1);
    wf_array *u = wf_unflatten(s, 0, (int64_t[]){-1, 1}, 2);
    wf_array *y = wf_keep(wf_add(wf_multiply(u, wf_scalar(2, WF_DTYPE_F32)),
                                 wf_scalar(1, WF_DTYPE_F32)));
    wf_scope_end();
    if (!y)
        return wf_last_error();
    out[0] = y;
    *nout = 1;
    return WF_OK;
}

static void test_derived_reshapes_follow_each_call_shape(void)
{
    wf_compile_options o = wf_compile_options_default();
    o.shapeless = true;
    wf_fn *f = wf_fn_new(derived_reshapes_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, &o);
    const int64_t shapes[][2] = {{2, 3}, {4, 5}, {1, 7}, {3, 1}, {6, 6}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        wf_array *x = ramp2(shapes[i][0], shapes[i][1], WF_DTYPE_F32);
        wf_array *want[1] = {NULL}, *got[1] = {NULL};
        size_t nwant = 1, ngot = 1;
        CHECK_OK(wf_fn_call(f, &x, 1, want, &nwant));
        CHECK_OK(wf_fn_call(cf, &x, 1, got, &ngot));
        if (CHECK_NOT_NULL(got[0])) {
            CHECK_EQ_INT(wf_array_ndim(got[0]), 2);
            CHECK_EQ_INT(wf_array_dim(got[0], 0), shapes[i][0] * shapes[i][1]);
            CHECK_EQ_INT(wf_array_dim(got[0], 1), 1);
        }
        check_same_bits(want[0], got[0]);
        wf_release(want[0]);
        wf_release(got[0]);
        wf_release(x);
    }
    wf_compile_stats st = wf_compile_stats_default();
    CHECK_OK(wf_compile_stats_get(cf, &st));
    CHECK_EQ_INT(st.traces, 1);
    wf_fn_release(cf);
    wf_fn_release(f);
}

/* reshape(x, (-1, 2)): a literal shape, kept by replay with -1 re-inferred. */
static wf_status literal_reshape_body(void *payload, wf_array *const *in, size_t n,
                                      wf_array **out, size_t *nout)
{
    (void)payload;
    (void)n;
    out[0] = wf_reshape(in[0], (int64_t[]){-1, 2}, 2);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_literal_reshape_keeps_its_shape(void)
{
    wf_compile_options o = wf_compile_options_default();
    o.shapeless = true;
    wf_fn *f = wf_fn_new(literal_reshape_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, &o);
    const int64_t shapes[][2] = {{2, 3}, {4, 5}, {1, 3}, {3, 4}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        wf_array *x = ramp2(shapes[i][0], shapes[i][1], WF_DTYPE_F32);
        wf_array *got[1] = {NULL};
        size_t ngot = 1;
        int64_t size = shapes[i][0] * shapes[i][1];
        if (size % 2 != 0) { /* (1, 3): 3 elements cannot be pairs */
            CHECK_STATUS(wf_fn_call(cf, &x, 1, got, &ngot), WF_ERR_SHAPE);
            CHECK_STR_CONTAINS(wf_last_error_message(), "reshape");
        } else {
            wf_array *want[1] = {NULL};
            size_t nwant = 1;
            CHECK_OK(wf_fn_call(f, &x, 1, want, &nwant));
            CHECK_OK(wf_fn_call(cf, &x, 1, got, &ngot));
            if (CHECK_NOT_NULL(got[0]))
                CHECK_EQ_INT(wf_array_dim(got[0], 0), size / 2);
            check_same_bits(want[0], got[0]);
            wf_release(want[0]);
            wf_release(got[0]);
        }
        wf_release(x);
    }
    wf_fn_release(cf);
    wf_fn_release(f);
}

/* sum((x + b)^2) + mean(x / 2) + sum(max(x, 1)) + sum(logsumexp(x, 1))
 * + var(x): broadcasting, reductions and their gradients. */
static wf_status broadcast_loss_body(void *payload, wf_array *const *in, size_t n,
                                     wf_array **out, size_t *nout)
{
    (void)payload;
    (void)n;
    const int one = 1;
    wf_scope_begin();
    wf_array *y = wf_add(in[0], in[1]);
    wf_array *terms[5] = {
        wf_sum(wf_multiply(y, y), NULL, 0, false),
        wf_mean(wf_multiply(in[0], wf_scalar(0.5, WF_DTYPE_F32)), NULL, 0, false),
        wf_sum(wf_max(in[0], &one, 1, false), NULL, 0, false),
        wf_sum(wf_logsumexp(in[0], &one, 1, true), NULL, 0, false),
        wf_var(in[0], NULL, 0, false, 1),
    };
    wf_array *loss = terms[0];
    for (int i = 1; i < 5; i++)
        loss = wf_add(loss, terms[i]);
    out[0] = wf_keep(loss);
    wf_scope_end();
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* mean(a @ w) */
static wf_status matmul_loss_body(void *payload, wf_array *const *in, size_t n,
                                  wf_array **out, size_t *nout)
{
    (void)payload;
    (void)n;
    wf_scope_begin();
    out[0] = wf_keep(wf_mean(wf_matmul(in[0], in[1]), NULL, 0, false));
    wf_scope_end();
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static wf_array *ramp_shaped(const int64_t *shape, int ndim)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    wf_array *flat = ramp2(1, n, WF_DTYPE_F32);
    wf_array *x = wf_reshape(flat, shape, ndim);
    wf_release(flat);
    return x;
}

/* Same shape, values within a relative 1e-5 (the compiled trace may fuse
 * and order element-wise work differently from the uncompiled graph). */
static void check_close(wf_array *want, wf_array *got)
{
    if (!CHECK_NOT_NULL(got) || !want)
        return;
    CHECK_EQ_INT(wf_array_ndim(got), wf_array_ndim(want));
    for (int d = 0; d < wf_array_ndim(want) && d < wf_array_ndim(got); d++)
        CHECK_EQ_INT(wf_array_dim(got, d), wf_array_dim(want, d));
    const size_t bytes = wf_array_nbytes(want);
    if (!CHECK_EQ_SIZE(wf_array_nbytes(got), bytes))
        return;
    float *a = malloc(bytes + 4), *b = malloc(bytes + 4);
    CHECK_OK(wf_array_copy_to(want, a, bytes));
    CHECK_OK(wf_array_copy_to(got, b, bytes));
    for (size_t i = 0; i < bytes / sizeof *a; i++)
        CHECK_NEAR(b[i], a[i], 1e-5 * (1.0 + fabs(a[i])));
    free(a);
    free(b);
}

enum { MAX_OPERANDS = 3 };

/* The gradients of compile(grad(f), shapeless) with respect to f's `nin`
 * inputs at each call's shapes equal grad(f)'s, with one trace per rank,
 * whichever operand broadcasts. */
static void check_shapeless_gradient_of(wf_fn *loss, const int64_t (*shapes)[MAX_OPERANDS][4],
                                        size_t ncalls, int ndim, int nin)
{
    const int argnums[MAX_OPERANDS] = {0, 1, 2};
    wf_fn *g = wf_grad(loss, argnums, (size_t)nin);
    wf_compile_options o = wf_compile_options_default();
    o.shapeless = true;
    wf_fn *cg = wf_compile(g, &o);
    for (size_t c = 0; c < ncalls; c++) {
        wf_array *in[MAX_OPERANDS] = {NULL}, *want[MAX_OPERANDS] = {NULL},
                 *got[MAX_OPERANDS] = {NULL};
        for (int i = 0; i < nin; i++)
            in[i] = ramp_shaped(shapes[c][i], ndim);
        size_t nwant = (size_t)nin, ngot = (size_t)nin;
        CHECK_OK(wf_fn_call(g, in, (size_t)nin, want, &nwant));
        CHECK_OK(wf_fn_call(cg, in, (size_t)nin, got, &ngot));
        for (int i = 0; i < nin; i++) {
            check_close(want[i], got[i]);
            wf_release(want[i]);
            wf_release(got[i]);
            wf_release(in[i]);
        }
    }
    wf_compile_stats st = wf_compile_stats_default();
    CHECK_OK(wf_compile_stats_get(cg, &st));
    CHECK_EQ_INT(st.traces, 1);
    wf_fn_release(cg);
    wf_fn_release(g);
}

static void check_shapeless_gradient(wf_fn *loss, const int64_t (*shapes)[MAX_OPERANDS][4],
                                     size_t ncalls, int ndim)
{
    check_shapeless_gradient_of(loss, shapes, ncalls, ndim, 2);
}

static void test_shapeless_gradient_follows_each_call(void)
{
    /* traced with b broadcast along rows; then x broadcast instead, both,
     * neither, and a column broadcast */
    static const int64_t broadcast[][MAX_OPERANDS][4] = {
        {{2, 3}, {1, 3}}, {{4, 5}, {1, 5}}, {{1, 4}, {3, 4}},
        {{3, 1}, {1, 6}}, {{5, 2}, {5, 2}}, {{3, 4}, {3, 1}},
    };
    wf_fn *f = wf_fn_new(broadcast_loss_body, NULL, NULL);
    check_shapeless_gradient(f, broadcast, sizeof broadcast / sizeof broadcast[0], 2);
    wf_fn_release(f);
    /* batched products whose batch axes broadcast either way */
    static const int64_t products[][MAX_OPERANDS][4] = {
        {{2, 1, 4, 2}, {1, 3, 2, 5}}, {{3, 1, 4, 2}, {1, 2, 2, 5}}, {{1, 2, 3, 4}, {5, 1, 4, 2}},
    };
    wf_fn *m = wf_fn_new(matmul_loss_body, NULL, NULL);
    check_shapeless_gradient(m, products, sizeof products / sizeof products[0], 4);
    wf_fn_release(m);
}

/* mean(tanh(x @ w + b)): b broadcast along x's rows. */
static wf_status affine_loss_body(void *payload, wf_array *const *in, size_t n,
                                  wf_array **out, size_t *nout)
{
    (void)payload;
    (void)n;
    wf_scope_begin();
    out[0] = wf_keep(wf_mean(wf_tanh(wf_add(wf_matmul(in[0], in[1]), in[2])), NULL, 0, false));
    wf_scope_end();
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* sum(cumsum(y, axis 0) ^ 2): a loss whose gradient differs at every
 * position of y, so a cotangent cut or placed at a wrong offset shows. */
static wf_array *position_loss(wf_array *y)
{
    wf_array *c = wf_cumsum(y, 0, false, true);
    return wf_sum(wf_multiply(c, c), NULL, 0, false);
}

/* position_loss(concatenate(inputs, axis)), axis in the payload. */
static wf_status concat_loss_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                  size_t *nout)
{
    wf_scope_begin();
    wf_array *y = wf_concatenate(in, (int)n, *(const int *)payload);
    out[0] = wf_keep(position_loss(y));
    wf_scope_end();
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* Per-example gradients: vmap(grad(f)) over x with w and b shared, compiled
 * shapeless, at batches and row counts other than the traced ones: w's and
 * b's cotangents are summed per example (b's over its broadcast rows) at
 * each call's batch, as the uncompiled vmap gives them; one trace. */
static void test_shapeless_per_example_gradients_follow_the_batch(void)
{
    static const int64_t calls[][2] = {{2, 3}, {3, 5}, {1, 2}}; /* batch, rows */
    const int argnums[3] = {0, 1, 2};
    const int in_axes[3] = {0, WF_VMAP_NOT_MAPPED, WF_VMAP_NOT_MAPPED};
    wf_fn *f = wf_fn_new(affine_loss_body, NULL, NULL);
    wf_fn *g = wf_grad(f, argnums, 3);
    wf_fn *per_example = wf_vmap(g, in_axes, 3, NULL, 0);
    wf_compile_options o = wf_compile_options_default();
    o.shapeless = true;
    wf_fn *compiled = wf_compile(per_example, &o);
    wf_array *w = ramp_shaped((const int64_t[]){4, 3}, 2);
    wf_array *b = ramp_shaped((const int64_t[]){3}, 1);
    for (size_t c = 0; c < sizeof calls / sizeof calls[0]; c++) {
        wf_array *x = ramp_shaped((const int64_t[]){calls[c][0], calls[c][1], 4}, 3);
        wf_array *in[3] = {x, w, b}, *want[3] = {NULL}, *got[3] = {NULL};
        size_t nwant = 3, ngot = 3;
        CHECK_OK(wf_fn_call(per_example, in, 3, want, &nwant));
        CHECK_OK(wf_fn_call(compiled, in, 3, got, &ngot));
        CHECK_EQ_SIZE(ngot, 3);
        for (int i = 0; i < 3; i++) {
            check_close(want[i], got[i]);
            if (got[i])
                CHECK_EQ_INT(wf_array_dim(got[i], 0), calls[c][0]);
            wf_release(want[i]);
            wf_release(got[i]);
        }
        wf_release(x);
    }
    wf_compile_stats st = wf_compile_stats_default();
    CHECK_OK(wf_compile_stats_get(compiled, &st));
    CHECK_EQ_INT(st.traces, 1);
    wf_release(w);
    wf_release(b);
    wf_fn_release(compiled);
    wf_fn_release(per_example);
    wf_fn_release(g);
    wf_fn_release(f);
}

static void test_shapeless_concatenate_gradient_follows_each_call(void)
{
    /* two operands on axis 0, their lengths changing apart */
    static const int64_t rows[][MAX_OPERANDS][4] = {
        {{2, 3}, {4, 3}}, {{5, 2}, {1, 2}}, {{1, 4}, {3, 4}}, {{3, 1}, {3, 1}},
    };
    int axis = 0;
    wf_fn *f = wf_fn_new(concat_loss_body, &axis, NULL);
    check_shapeless_gradient_of(f, rows, sizeof rows / sizeof rows[0], 2, 2);
    wf_fn_release(f);
    /* three operands on axis -1 */
    static const int64_t cols[][MAX_OPERANDS][4] = {
        {{2, 1}, {2, 3}, {2, 2}}, {{3, 4}, {3, 1}, {3, 2}}, {{1, 2}, {1, 5}, {1, 3}},
    };
    int last = -1;
    wf_fn *h = wf_fn_new(concat_loss_body, &last, NULL);
    check_shapeless_gradient_of(h, cols, sizeof cols / sizeof cols[0], 2, 3);
    wf_fn_release(h);
}

/* position_loss(pad(x, low (1, 0), high (2, 3), 0.5)) */
static wf_status pad_loss_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                               size_t *nout)
{
    (void)payload;
    (void)n;
    wf_scope_begin();
    wf_array *y = wf_pad(in[0], (int64_t[]){1, 0}, (int64_t[]){2, 3}, 0.5);
    out[0] = wf_keep(position_loss(y));
    wf_scope_end();
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_shapeless_pad_gradient_follows_each_call(void)
{
    static const int64_t shapes[][MAX_OPERANDS][4] = {{{2, 3}}, {{5, 1}}, {{1, 4}}, {{3, 3}}};
    wf_fn *f = wf_fn_new(pad_loss_body, NULL, NULL);
    check_shapeless_gradient_of(f, shapes, sizeof shapes / sizeof shapes[0], 2, 1);
    wf_fn_release(f);
}

/* position_loss(slice_update(x, u, rows 1:3, every second column)): the
 * caller's bounds, kept at each call, re-resolved against its shape. */
static wf_status slice_update_loss_body(void *payload, wf_array *const *in, size_t n,
                                        wf_array **out, size_t *nout)
{
    (void)payload;
    (void)n;
    wf_scope_begin();
    wf_array *y = wf_slice_update(in[0], in[1], (int64_t[]){1, 0}, (int64_t[]){3, INT64_MAX},
                                  (int64_t[]){1, 2});
    out[0] = wf_keep(position_loss(wf_multiply(y, y)));
    wf_scope_end();
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_shapeless_slice_update_gradient_follows_each_call(void)
{
    /* x's columns 3, 5, 2, 6 take 2, 3, 1, 3 of u's */
    static const int64_t shapes[][MAX_OPERANDS][4] = {
        {{4, 3}, {2, 2}}, {{3, 5}, {2, 3}}, {{6, 2}, {2, 1}}, {{5, 6}, {2, 3}},
    };
    wf_fn *f = wf_fn_new(slice_update_loss_body, NULL, NULL);
    check_shapeless_gradient_of(f, shapes, sizeof shapes / sizeof shapes[0], 2, 2);
    wf_fn_release(f);
}

/* prod(x): its gradient moves and merges axes by the traced sizes. */
static wf_status prod_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                           size_t *nout)
{
    (void)payload;
    (void)n;
    out[0] = wf_prod(in[0], NULL, 0, false);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* A gradient whose rule reads the traced shapes is refused at trace time,
 * never replayed at the traced shape. */
static void test_shapeless_gradient_reading_traced_shapes_is_refused(void)
{
    wf_compile_options o = wf_compile_options_default();
    o.shapeless = true;
    wf_fn *f = wf_fn_new(prod_body, NULL, NULL);
    wf_fn *g = wf_grad(f, NULL, 0);
    wf_fn *cg = wf_compile(g, &o);
    wf_array *x = ramp2(2, 3, WF_DTYPE_F32);
    wf_array *out[1] = {NULL};
    size_t nout = 1;
    CHECK_STATUS(wf_fn_call(cg, &x, 1, out, &nout), WF_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(wf_last_error_message(), "shapeless");
    /* the same gradient compiled for fixed shapes works */
    wf_fn *fixed = wf_compile(g, NULL);
    nout = 1;
    CHECK_OK(wf_fn_call(fixed, &x, 1, out, &nout));
    wf_release(out[0]);
    wf_release(x);
    wf_fn_release(fixed);
    wf_fn_release(cg);
    wf_fn_release(g);
    wf_fn_release(f);
}

/* A draw shaped like the input names the traced shape in its parameters. */
static wf_status uniform_like_body(void *payload, wf_array *const *in, size_t n,
                                   wf_array **out, size_t *nout)
{
    (void)payload;
    (void)n;
    int64_t shape[WF_MAX_NDIM];
    int ndim = wf_array_ndim(in[0]);
    for (int d = 0; d < ndim; d++)
        shape[d] = wf_array_dim(in[0], d);
    wf_scope_begin();
    wf_array *y = wf_keep(wf_add(in[0], wf_random_uniform(shape, ndim, WF_DTYPE_F32, 0, 1, NULL)));
    wf_scope_end();
    if (!y)
        return wf_last_error();
    out[0] = y;
    *nout = 1;
    return WF_OK;
}

static void test_shape_naming_op_is_refused(void)
{
    wf_compile_options o = wf_compile_options_default();
    o.shapeless = true;
    wf_fn *f = wf_fn_new(uniform_like_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, &o);
    wf_array *x = ramp2(1, 2, WF_DTYPE_F32);
    wf_array *out[1] = {NULL};
    size_t nout = 1;
    CHECK_STATUS(wf_fn_call(cf, &x, 1, out, &nout), WF_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(wf_last_error_message(), "shapeless");
    wf_release(x);
    wf_fn_release(cf);
    wf_fn_release(f);
}

int main(void)
{
    RUN_TEST(test_like_ops_follow_each_call_shape);
    RUN_TEST(test_derived_reshapes_follow_each_call_shape);
    RUN_TEST(test_literal_reshape_keeps_its_shape);
    RUN_TEST(test_shapeless_gradient_follows_each_call);
    RUN_TEST(test_shapeless_per_example_gradients_follow_the_batch);
    RUN_TEST(test_shapeless_concatenate_gradient_follows_each_call);
    RUN_TEST(test_shapeless_pad_gradient_follows_each_call);
    RUN_TEST(test_shapeless_slice_update_gradient_follows_each_call);
    RUN_TEST(test_shapeless_gradient_reading_traced_shapes_is_refused);
    RUN_TEST(test_shape_naming_op_is_refused);
    return TEST_SUMMARY();
}
