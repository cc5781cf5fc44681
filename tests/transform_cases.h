/*
 * transform_cases.h - a compiled attention function called under each
 * transform, for the tests that check a shared trace never carries one
 * thread's transform context into another's call (issue 23, item 1):
 * tests/unit/test_compile_context.c and tests/repro/repro_shared_trace_context.c.
 *
 * The compiled function is att(q) = attention(q, k, v): its trace records
 * the fused primitive outside a gradient transform and the training path
 * (a composition of matmul and softmax, other bits) inside one. Each case
 * runs the function under one transform and returns every array it gives.
 */
#ifndef WEFT_TESTS_TRANSFORM_CASES_H
#define WEFT_TESTS_TRANSFORM_CASES_H

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "weft.h"

enum case_kind {
    CASE_PLAIN,
    CASE_VJP,
    CASE_JVP,
    CASE_VMAP,
    CASE_GRAD,
    CASE_VALUE_AND_GRAD,
    CASE_CHECKPOINT, /* grad of a loss calling wf_checkpoint(att) */
    CASE_COUNT
};

static const char *const case_names[CASE_COUNT] = {"plain", "vjp", "jvp", "vmap",
                                                   "grad", "value_and_grad", "checkpoint"};

/* Whether the case differentiates (attention then takes its training path). */
static inline bool case_is_gradient(enum case_kind kind)
{
    return kind == CASE_VJP || kind == CASE_GRAD || kind == CASE_VALUE_AND_GRAD ||
           kind == CASE_CHECKPOINT;
}

enum { CASE_MAX_OUTPUTS = 2, CASE_BATCH = 3 };
enum { HEADS = 2, QUERIES = 8, KEYS = 16, DIM = 16 };

typedef struct case_inputs {
    wf_array *q, *k, *v;
    wf_array *q_batch;  /* CASE_BATCH copies of q, perturbed, on axis 0 (vmap) */
    wf_array *cotangent; /* att's output shape (vjp), also the loss weights */
    wf_array *tangent;   /* q's shape (jvp) */
} case_inputs;

static inline wf_array *case_wave(const int64_t *shape, int ndim, double phase)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    float vals[CASE_BATCH * HEADS * KEYS * DIM];
    for (int64_t i = 0; i < n; i++)
        vals[i] = (float)(sin(phase + 0.37 * (double)i) * 1.7 + 0.3 * cos(1.3 * (double)i));
    return wf_array_from_data(vals, shape, ndim, WF_DTYPE_F32);
}

static inline case_inputs case_inputs_make(void)
{
    const int64_t qs[3] = {HEADS, QUERIES, DIM}, ks[3] = {HEADS, KEYS, DIM};
    const int64_t bs[4] = {CASE_BATCH, HEADS, QUERIES, DIM};
    return (case_inputs){.q = case_wave(qs, 3, 0.1),
                         .k = case_wave(ks, 3, 0.7),
                         .v = case_wave(ks, 3, 1.9),
                         .q_batch = case_wave(bs, 4, 0.4),
                         .cotangent = case_wave(qs, 3, 2.3),
                         .tangent = case_wave(qs, 3, 3.1)};
}

static inline void case_inputs_free(case_inputs *in)
{
    wf_array *all[] = {in->q, in->k, in->v, in->q_batch, in->cotangent, in->tangent};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        wf_release(all[i]);
}

/* att(q) = attention(q, k, v); the payload is the case_inputs. A test may set
 * case_body_hook to run code inside every trace of it (on the tracing
 * thread). */
static void (*case_body_hook)(void);

static inline wf_status case_attention_body(void *payload, wf_array *const *in, size_t n,
                                            wf_array **out, size_t *nout)
{
    (void)n;
    const case_inputs *c = payload;
    if (case_body_hook)
        case_body_hook();
    out[0] = wf_scaled_dot_product_attention(in[0], c->k, c->v, 0.25, NULL, false);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* loss(q) = sum(inner(q) * cotangent); the payload is a case_loss. */
typedef struct case_loss {
    wf_fn *inner;
    const case_inputs *inputs;
} case_loss;

static inline wf_status case_loss_body(void *payload, wf_array *const *in, size_t n,
                                       wf_array **out, size_t *nout)
{
    (void)n;
    const case_loss *l = payload;
    wf_array *a = NULL;
    size_t na = 1;
    wf_status st = wf_fn_call(l->inner, in, 1, &a, &na);
    if (st != WF_OK)
        return st;
    wf_array *weighted = wf_multiply(a, l->inputs->cotangent);
    out[0] = wf_sum(weighted, NULL, 0, false);
    wf_release(weighted);
    wf_release(a);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* grad or value_and_grad of loss(inner). */
static inline wf_status case_run_loss(wf_fn *inner, const case_inputs *c, bool with_value,
                                      wf_array **out, size_t *nout)
{
    case_loss l = {.inner = inner, .inputs = c};
    wf_fn *loss = wf_fn_new(case_loss_body, &l, NULL);
    wf_fn *g = with_value ? wf_value_and_grad(loss, NULL, 0) : wf_grad(loss, NULL, 0);
    *nout = CASE_MAX_OUTPUTS;
    wf_status st = g ? wf_fn_call(g, &c->q, 1, out, nout) : wf_last_error();
    wf_fn_release(g);
    wf_fn_release(loss);
    return st;
}

/* Runs the compiled att under `kind` on this thread; the results (new
 * references, evaluated) go to out[0 .. *nout). */
static inline wf_status case_run(enum case_kind kind, wf_fn *att, const case_inputs *c,
                                 wf_array **out, size_t *nout)
{
    wf_status st = WF_OK;
    *nout = 1;
    switch (kind) {
    case CASE_PLAIN:
        st = wf_fn_call(att, &c->q, 1, out, nout);
        break;
    case CASE_VJP:
        st = wf_vjp(att, &c->q, 1, &c->cotangent, 1, &out[0], &out[1]);
        *nout = 2;
        break;
    case CASE_JVP:
        *nout = 1;
        st = wf_jvp(att, &c->q, 1, &c->tangent, &out[0], &out[1], nout);
        *nout = 2;
        break;
    case CASE_VMAP: {
        wf_fn *mapped = wf_vmap(att, NULL, 0, NULL, 0);
        st = mapped ? wf_fn_call(mapped, &c->q_batch, 1, out, nout) : wf_last_error();
        wf_fn_release(mapped);
        break;
    }
    case CASE_GRAD:
        st = case_run_loss(att, c, false, out, nout);
        break;
    case CASE_VALUE_AND_GRAD:
        st = case_run_loss(att, c, true, out, nout);
        break;
    case CASE_CHECKPOINT: {
        wf_fn *saved = wf_checkpoint(att);
        st = saved ? case_run_loss(saved, c, false, out, nout) : wf_last_error();
        wf_fn_release(saved);
        break;
    }
    case CASE_COUNT:
        break;
    }
    if (st != WF_OK) {
        *nout = 0;
        return st;
    }
    st = wf_eval(out, *nout);
    if (st != WF_OK) {
        for (size_t i = 0; i < *nout; i++)
            wf_release(out[i]);
        *nout = 0;
    }
    return st;
}

/* Number of float32 elements of a and b that differ in their bits (-1 if the
 * shapes differ or a value cannot be read). */
static inline int64_t case_bits_differ(wf_array *a, wf_array *b)
{
    const int64_t n = wf_array_size(a);
    if (n != wf_array_size(b) || wf_array_ndim(a) != wf_array_ndim(b))
        return -1;
    const void *px = NULL, *py = NULL;
    if (wf_array_data(a, &px) != WF_OK || wf_array_data(b, &py) != WF_OK)
        return -1;
    const float *x = px, *y = py;
    int64_t differ = 0;
    for (int64_t i = 0; i < n; i++)
        differ += memcmp(&x[i], &y[i], sizeof x[i]) != 0;
    return differ;
}

/* Sum of case_bits_differ over every result (-1 on a mismatch of count). */
static inline int64_t case_results_differ(wf_array *const *a, size_t na, wf_array *const *b,
                                          size_t nb)
{
    if (na != nb || na == 0)
        return -1;
    int64_t total = 0;
    for (size_t i = 0; i < na; i++) {
        int64_t d = case_bits_differ(a[i], b[i]);
        if (d < 0)
            return -1;
        total += d;
    }
    return total;
}

static inline void case_results_release(wf_array **a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        wf_release(a[i]);
}

#endif
