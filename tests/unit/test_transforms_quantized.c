/*
 * The transformation rules of the quantization primitives
 * (src/transforms/rules_quantized.c) that test_quantized.c does not reach:
 *  - quantize and dequantize have no derivative: vjp and jvp through them
 *    fail with WF_ERR_UNSUPPORTED and a message, and the library computes
 *    afterwards;
 *  - vmap of quantize / dequantize (affine and a floating-point mode)
 *    against the examples quantized one by one (same bits);
 *  - jvp of quantized_matmul in x, scales and biases (each alone and all
 *    together) against the jvp of the same product through a dense W built
 *    from differentiable ops;
 *  - floating-point modes: the derivative in x; the uint8 scales get zero
 *    cotangents and their tangents are ignored;
 *  - vmap of quantized_matmul with one vector per example and batched
 *    weights, against per-example products;
 *  - vjp of gather_qmm in x, scales and biases and its jvp in x, against
 *    take and matmul of a dense W; its jvp in the scales is refused.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "quant_ref.h"

static uint64_t rng_state = 0x6A09E667F3BCC909u;

static wf_array *random_f32(const int64_t *shape, int ndim)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = quant_rnd(&rng_state) * (1.0f + (float)(i % 5));
    wf_array *a = wf_array_from_data(v, shape, ndim, WF_DTYPE_F32);
    free(v);
    return a;
}

/* max |a - b| / max |b| */
static double max_rel_diff(wf_array *a, wf_array *b)
{
    wf_array *d = wf_max(wf_abs(wf_subtract(a, b)), NULL, 0, false);
    wf_array *m = wf_max(wf_abs(b), NULL, 0, false);
    double dv = 1, mv = 1;
    CHECK_OK(wf_array_item(d, &dv));
    CHECK_OK(wf_array_item(m, &mv));
    wf_release(d), wf_release(m);
    return dv / (mv > 0 ? mv : 1);
}

typedef struct qcfg {
    int gs, bits;
    wf_quant_mode mode;
    bool transpose;
} qcfg;

/* ---------------------------------------------------------------- quantize, dequantize */

/* in[0] -> dequantize(quantize(in[0])) */
static wf_status round_trip_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                 size_t *nout)
{
    (void)n;
    const qcfg *c = payload;
    wf_array *q = NULL, *s = NULL, *b = NULL;
    wf_status st = wf_quantize(in[0], c->gs, c->bits, c->mode, &q, &s, &b);
    out[0] = st == WF_OK ? wf_dequantize(q, s, b, c->gs, c->bits, c->mode) : NULL;
    wf_release(q), wf_release(s), wf_release(b);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_quantize_not_differentiable(void)
{
    qcfg c = {32, 4, WF_QUANT_AFFINE, true};
    const int64_t shape[2] = {2, 64};
    wf_array *w = random_f32(shape, 2), *ct = wf_ones(shape, 2, WF_DTYPE_F32);
    wf_fn *f = wf_fn_new(round_trip_body, &c, NULL);
    wf_array *grad = NULL, *tangent = NULL;
    CHECK_STATUS(wf_vjp(f, &w, 1, &ct, 1, NULL, &grad), WF_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(wf_last_error_message(), "no derivative (the quantized values are rounded)");
    CHECK(grad == NULL);
    wf_clear_error();
    size_t nout = 1;
    CHECK_STATUS(wf_jvp(f, &w, 1, &ct, NULL, &tangent, &nout), WF_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(wf_last_error_message(), "no derivative (the quantized values are rounded)");
    CHECK(tangent == NULL);
    wf_clear_error();
    /* and the function itself still runs: a constant row is exact */
    wf_array *ones = wf_ones(shape, 2, WF_DTYPE_F32), *y = NULL;
    nout = 1;
    if (CHECK_OK(wf_fn_call(f, &ones, 1, &y, &nout)))
        CHECK(quant_same_bits(y, ones));
    wf_release(y), wf_release(ones);
    wf_fn_release(f);
    wf_release(w), wf_release(ct);
}

/* vmap over axis 1 of (4, 3, 64): each example a (4, 64) matrix. */
static void check_round_trip_vmap(qcfg c)
{
    const int64_t shape[3] = {4, 3, 64};
    wf_array *w = random_f32(shape, 3);
    wf_fn *f = wf_fn_new(round_trip_body, &c, NULL);
    const int axis = 1;
    wf_fn *v = wf_vmap(f, &axis, 1, NULL, 0);
    wf_array *got = NULL, *each[3] = {NULL, NULL, NULL};
    size_t nout = 1;
    if (CHECK_OK(wf_fn_call(v, &w, 1, &got, &nout))) {
        for (int64_t b = 0; b < 3; b++) {
            const int64_t start[3] = {0, b, 0}, stop[3] = {4, b + 1, 64}, step[3] = {1, 1, 1};
            wf_array *x = wf_squeeze(wf_slice(w, start, stop, step), &axis, 1);
            nout = 1;
            CHECK_OK(wf_fn_call(f, &x, 1, &each[b], &nout));
            wf_release(x);
        }
        wf_array *want = wf_stack(each, 3, 0);
        /* exact (the floating-point modes dequantize to bfloat16) */
        CHECK_EQ_INT(wf_array_dtype(got), wf_array_dtype(want));
        if (!CHECK(max_rel_diff(got, want) == 0))
            printf("      (mode %d)\n", (int)c.mode);
        wf_release(want);
    }
    for (int b = 0; b < 3; b++)
        wf_release(each[b]);
    wf_release(got);
    wf_fn_release(v), wf_fn_release(f);
    wf_release(w);
}

static void test_quantize_vmap(void)
{
    check_round_trip_vmap((qcfg){32, 4, WF_QUANT_AFFINE, true});
    check_round_trip_vmap((qcfg){64, 8, WF_QUANT_AFFINE, true});
    check_round_trip_vmap((qcfg){32, 4, WF_QUANT_MXFP4, true});
    check_round_trip_vmap((qcfg){16, 4, WF_QUANT_NVFP4, true});
}

/* ---------------------------------------------------------------- quantized_matmul */

typedef struct qmat {
    wf_array *q, *s, *b;
} qmat;

static bool qmat_make(qmat *m, const int64_t *shape, int ndim, const qcfg *c)
{
    wf_array *w = random_f32(shape, ndim);
    m->b = NULL;
    const bool ok = CHECK_OK(wf_quantize(w, c->gs, c->bits, c->mode, &m->q, &m->s, &m->b));
    wf_release(w);
    return ok;
}

static void qmat_free(qmat *m) { wf_release(m->q), wf_release(m->s), wf_release(m->b); }

/* (x, codes, scales, biases) -> quantized_matmul */
static wf_status qmm_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                          size_t *nout)
{
    const qcfg *c = payload;
    out[0] = wf_quantized_matmul_mode(in[0], in[1], in[2], n > 3 ? in[3] : NULL, c->transpose,
                                      c->gs, c->bits, c->mode);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* qmm_body with stop_gradient on the codes (in[1]) or, `integers`, on
 * the codes and the scales. */
static wf_status qmm_stopped(const qcfg *c, wf_array *const *in, size_t n, bool integers,
                             wf_array **out, size_t *nout)
{
    wf_scope_begin();
    wf_array *stopped[4] = {in[0], wf_stop_gradient(in[1]),
                            integers ? wf_stop_gradient(in[2]) : in[2], n > 3 ? in[3] : NULL};
    const wf_status st = qmm_body((void *)c, stopped, n, out, nout);
    if (st == WF_OK)
        wf_keep(out[0]);
    wf_scope_end();
    return st;
}

static wf_status qmm_codes_stopped_body(void *payload, wf_array *const *in, size_t n,
                                        wf_array **out, size_t *nout)
{
    return qmm_stopped(payload, in, n, false, out, nout);
}

static wf_status qmm_integers_stopped_body(void *payload, wf_array *const *in, size_t n,
                                           wf_array **out, size_t *nout)
{
    return qmm_stopped(payload, in, n, true, out, nout);
}

/* The same product through W = codes * s + b from differentiable ops
 * (affine; in[1] 2-d codes). */
static wf_status dense_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                            size_t *nout)
{
    (void)n;
    const qcfg *c = payload;
    wf_scope_begin();
    wf_array *codes = wf_dequantize(in[1], wf_ones_like(in[2]), wf_zeros_like(in[3]), c->gs,
                                    c->bits, WF_QUANT_AFFINE);
    const int64_t *ss = wf_array_shape(in[2]);
    const int64_t g3[3] = {ss[0], ss[1], c->gs};
    const int two = 2;
    wf_array *w = wf_add(wf_multiply(wf_reshape(codes, g3, 3), wf_expand_dims(in[2], &two, 1)),
                         wf_expand_dims(in[3], &two, 1));
    w = wf_reshape(w, wf_array_shape(codes), 2);
    out[0] = wf_matmul(in[0], c->transpose ? wf_swapaxes(w, 0, 1) : w);
    wf_keep(out[0]);
    wf_scope_end();
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* jvp of the quantized product against the dense one, for the tangents
 * of the inputs whose bit is set in `which` (x 1, scales 4, biases 8). */
static void check_qmm_jvp(const qcfg *c, unsigned which)
{
    /* W (24, 64) used transposed, or (64, 32): x's rows have 64 entries */
    const int64_t ws[2] = {24, 64}, wt[2] = {64, 32}, xs[3] = {2, 3, 64};
    qmat m;
    if (!qmat_make(&m, c->transpose ? ws : wt, 2, c))
        return;
    wf_array *x = random_f32(xs, 3);
    wf_array *in[4] = {x, m.q, m.s, m.b}, *t[4] = {NULL, NULL, NULL, NULL};
    if (which & 1)
        t[0] = random_f32(xs, 3);
    if (which & 4)
        t[2] = random_f32(wf_array_shape(m.s), 2);
    if (which & 8)
        t[3] = random_f32(wf_array_shape(m.b), 2);
    wf_fn *f = wf_fn_new(qmm_body, (void *)c, NULL), *fd = wf_fn_new(dense_body, (void *)c, NULL);
    wf_array *got = NULL, *want = NULL, *y = NULL, *yd = NULL;
    size_t n1 = 1, n2 = 1;
    if (CHECK_OK(wf_jvp(f, in, 4, t, &y, &got, &n1)) &&
        CHECK_OK(wf_jvp(fd, in, 4, t, &yd, &want, &n2))) {
        if (!CHECK(max_rel_diff(got, want) < 1e-5) || !CHECK(max_rel_diff(y, yd) < 1e-5))
            printf("      (tangents %u, transpose %d)\n", which, c->transpose);
    }
    wf_release(got), wf_release(want), wf_release(y), wf_release(yd);
    for (int i = 0; i < 4; i++)
        wf_release(t[i]);
    wf_fn_release(f), wf_fn_release(fd);
    wf_release(x);
    qmat_free(&m);
}

static void test_qmm_jvp(void)
{
    static const unsigned sets[] = {1, 4, 8, 12, 13};
    for (int tr = 0; tr < 2; tr++)
        for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
            const qcfg c = {32, 4, WF_QUANT_AFFINE, tr == 1};
            check_qmm_jvp(&c, sets[i]);
        }
}

/* Floating-point modes: x has a derivative; the uint8 scales, integers,
 * get zero cotangents (the rule's own refusal is not reached through the
 * public API), and their tangents are ignored. */
static void test_fp_mode_derivatives(void)
{
    const qcfg c = {32, 4, WF_QUANT_MXFP4, true};
    const int64_t ws[2] = {8, 64}, xs[2] = {3, 64}, ys[2] = {3, 8};
    qmat m;
    if (!qmat_make(&m, ws, 2, &c))
        return;
    CHECK(m.b == NULL);
    wf_array *x = random_f32(xs, 2), *ct = random_f32(ys, 2);
    wf_array *in[3] = {x, m.q, m.s};
    wf_fn *f = wf_fn_new(qmm_body, (void *)&c, NULL);
    wf_fn *codes_stopped = wf_fn_new(qmm_codes_stopped_body, (void *)&c, NULL);
    wf_fn *integers_stopped = wf_fn_new(qmm_integers_stopped_body, (void *)&c, NULL);
    wf_array *grads[3] = {NULL, NULL, NULL};
    /* as MLX: no vjp with respect to the codes, nor to a floating-point
     * mode's scales; the library stays usable */
    CHECK_STATUS(wf_vjp(f, in, 3, &ct, 1, NULL, grads), WF_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(wf_last_error_message(), "with respect to the quantized weights (codes)");
    CHECK(grads[0] == NULL && grads[2] == NULL);
    CHECK_STATUS(wf_vjp(codes_stopped, in, 3, &ct, 1, NULL, grads), WF_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(wf_last_error_message(),
                       "with respect to the scales of a floating-point quantization mode");
    CHECK(grads[0] == NULL && grads[2] == NULL);
    wf_clear_error();
    if (CHECK_OK(wf_vjp(integers_stopped, in, 3, &ct, 1, NULL, grads))) {
        /* ct @ W: the product with the other transpose flag */
        wf_array *want = wf_quantized_matmul_mode(ct, m.q, m.s, NULL, false, 32, 4, c.mode);
        CHECK(max_rel_diff(grads[0], want) < 1e-6);
        wf_array *zero = wf_zeros_like(m.s);
        CHECK(max_rel_diff(grads[2], zero) == 0);
        wf_release(zero), wf_release(want);
    }
    for (int i = 0; i < 3; i++)
        wf_release(grads[i]);
    /* x alone, and with a tangent for the scales (ignored): the product of
     * x's tangent */
    wf_array *tx = random_f32(xs, 2), *ts = wf_ones_like(m.s);
    wf_array *t[3] = {tx, NULL, NULL}, *tan = NULL;
    wf_array *want = wf_quantized_matmul_mode(tx, m.q, m.s, NULL, true, 32, 4, c.mode);
    for (int with_scales = 0; with_scales < 2; with_scales++) {
        t[2] = with_scales ? ts : NULL;
        size_t n = 1;
        if (CHECK_OK(wf_jvp(f, in, 3, t, NULL, &tan, &n)))
            CHECK(max_rel_diff(tan, want) < 1e-6);
        wf_release(tan);
        tan = NULL;
    }
    wf_release(want), wf_release(tx), wf_release(ts), wf_release(ct);
    wf_fn_release(f), wf_fn_release(codes_stopped), wf_fn_release(integers_stopped);
    wf_release(x);
    qmat_free(&m);
}

/* ---------------------------------------------------------------- gather_qmm */

static const double gq_lhs[4] = {1, 0, 1, 1}, gq_rhs[4] = {2, 0, 2, 1};

static wf_array *index_array(const double *v, int64_t n)
{
    int32_t iv[8];
    for (int64_t i = 0; i < n; i++)
        iv[i] = (int32_t)v[i];
    return wf_array_from_data(iv, &n, 1, WF_DTYPE_I32);
}

/* (x, codes, scales, biases) -> gather_qmm with the indices above */
/* payload non-NULL: the codes under stop_gradient (a vjp with respect to
 * them is refused, as in MLX). */
static wf_status gqmm_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                           size_t *nout)
{
    (void)n;
    wf_array *lhs = index_array(gq_lhs, 4), *rhs = index_array(gq_rhs, 4);
    wf_array *codes = payload ? wf_stop_gradient(in[1]) : wf_retain(in[1]);
    out[0] = wf_gather_qmm(in[0], codes, in[2], in[3], lhs, rhs, true, 32, 4);
    wf_release(lhs), wf_release(rhs), wf_release(codes);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* The same through take and matmul of W = codes * s + b (differentiable
 * ops; stacked (E, N, K) weights). */
static wf_status gqmm_dense_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                 size_t *nout)
{
    (void)payload, (void)n;
    wf_scope_begin();
    wf_array *codes = wf_dequantize(in[1], wf_ones_like(in[2]), wf_zeros_like(in[3]), 32, 4,
                                    WF_QUANT_AFFINE);
    const int64_t *ss = wf_array_shape(in[2]);
    const int64_t g4[4] = {ss[0], ss[1], ss[2], 32};
    const int three = 3;
    wf_array *w = wf_add(wf_multiply(wf_reshape(codes, g4, 4), wf_expand_dims(in[2], &three, 1)),
                         wf_expand_dims(in[3], &three, 1));
    w = wf_reshape(w, wf_array_shape(codes), 3);
    wf_array *xs = wf_take(in[0], index_array(gq_lhs, 4), 0);
    wf_array *ws = wf_take(w, index_array(gq_rhs, 4), 0);
    out[0] = wf_matmul(xs, wf_swapaxes(ws, -1, -2));
    wf_keep(out[0]);
    wf_scope_end();
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* vjp of gather_qmm in x, scales and biases, and jvp in x, against the
 * dense product; a jvp with a tangent for the scales is refused. */
static void test_gather_qmm_derivatives(void)
{
    const qcfg c = {32, 4, WF_QUANT_AFFINE, true};
    const int64_t ws[3] = {3, 8, 64}, xs[3] = {2, 3, 64}, ys[3] = {4, 3, 8};
    qmat m;
    if (!qmat_make(&m, ws, 3, &c))
        return;
    wf_array *x = random_f32(xs, 3), *ct = random_f32(ys, 3);
    wf_array *in[4] = {x, m.q, m.s, m.b};
    static bool stop_codes = true;
    wf_fn *f = wf_fn_new(gqmm_body, &stop_codes, NULL);
    wf_fn *fd = wf_fn_new(gqmm_dense_body, NULL, NULL), *plain = wf_fn_new(gqmm_body, NULL, NULL);
    wf_array *got[4] = {NULL}, *want[4] = {NULL};
    CHECK_STATUS(wf_vjp(plain, in, 4, &ct, 1, NULL, got), WF_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(wf_last_error_message(),
                       "'gather_qmm' has no derivative with respect to the quantized weights");
    wf_clear_error();
    if (CHECK_OK(wf_vjp(f, in, 4, &ct, 1, NULL, got)) &&
        CHECK_OK(wf_vjp(fd, in, 4, &ct, 1, NULL, want))) {
        const int checked[3] = {0, 2, 3}; /* x, scales, biases */
        for (int k = 0; k < 3; k++)
            if (!CHECK(max_rel_diff(got[checked[k]], want[checked[k]]) < 1e-5))
                printf("      (cotangent of input %d)\n", checked[k]);
    }
    for (int i = 0; i < 4; i++)
        wf_release(got[i]), wf_release(want[i]);
    wf_array *tx = random_f32(xs, 3), *t[4] = {tx, NULL, NULL, NULL}, *tan = NULL, *tand = NULL;
    size_t n1 = 1, n2 = 1;
    if (CHECK_OK(wf_jvp(f, in, 4, t, NULL, &tan, &n1)) &&
        CHECK_OK(wf_jvp(fd, in, 4, t, NULL, &tand, &n2)))
        CHECK(max_rel_diff(tan, tand) < 1e-5);
    wf_release(tan), wf_release(tand);
    t[2] = wf_ones_like(m.s);
    tan = NULL;
    CHECK_STATUS(wf_jvp(f, in, 4, t, NULL, &tan, &n1), WF_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(wf_last_error_message(), "gather_qmm: no jvp for the scales and biases");
    wf_clear_error();
    CHECK(tan == NULL);
    wf_release(t[2]), wf_release(tx), wf_release(ct), wf_release(x);
    wf_fn_release(f), wf_fn_release(fd), wf_fn_release(plain);
    qmat_free(&m);
}

/* One vector x per example and a weight matrix per example. */
static void test_qmm_vmap_vectors_and_batched_weights(void)
{
    for (int tr = 0; tr < 2; tr++) {
        const qcfg c = {32, 4, WF_QUANT_AFFINE, tr == 1};
        const int64_t ws[3] = {3, tr ? 16 : 64, tr ? 64 : 32}, xs[2] = {3, 64};
        qmat m;
        if (!qmat_make(&m, ws, 3, &c))
            return;
        wf_array *x = random_f32(xs, 2);
        wf_fn *f = wf_fn_new(qmm_body, (void *)&c, NULL);
        wf_fn *v = wf_vmap(f, NULL, 0, NULL, 0); /* every input on axis 0 */
        wf_array *in[4] = {x, m.q, m.s, m.b}, *got = NULL, *each[3] = {NULL, NULL, NULL};
        size_t n = 1;
        if (CHECK_OK(wf_fn_call(v, in, 4, &got, &n))) {
            for (int64_t b = 0; b < 3; b++) {
                wf_array *ex[4];
                for (int i = 0; i < 4; i++)
                    ex[i] = wf_take(in[i], wf_scalar((double)b, WF_DTYPE_I32), 0);
                n = 1;
                CHECK_OK(wf_fn_call(f, ex, 4, &each[b], &n));
                for (int i = 0; i < 4; i++)
                    wf_release(ex[i]);
            }
            wf_array *want = wf_stack(each, 3, 0);
            CHECK_EQ_INT(wf_array_ndim(got), 2);
            if (!CHECK(max_rel_diff(got, want) < 1e-6))
                printf("      (transpose %d)\n", tr);
            wf_release(want);
        }
        for (int b = 0; b < 3; b++)
            wf_release(each[b]);
        wf_release(got);
        wf_fn_release(v), wf_fn_release(f);
        wf_release(x);
        qmat_free(&m);
    }
}

int main(void)
{
    wf_scope_begin(); /* the scalars and temporaries of the checks */
    RUN_TEST(test_quantize_not_differentiable);
    RUN_TEST(test_quantize_vmap);
    RUN_TEST(test_qmm_jvp);
    RUN_TEST(test_fp_mode_derivatives);
    RUN_TEST(test_gather_qmm_derivatives);
    RUN_TEST(test_qmm_vmap_vectors_and_batched_weights);
    wf_scope_end();
    return TEST_SUMMARY();
}
