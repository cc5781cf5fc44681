/*
 * suite_funcs.h - the functions the suite measures, written once with weft
 * ops (so the op-by-op and the compiled programs run the same graph) and
 * once in double as the reference the outputs are checked against. The peers
 * (the scripts in bench/peers/) write the same formulas.
 *
 * Builders return a new reference (NULL + last error on failure) and release
 * their intermediates through a scope.
 */
#ifndef WEFT_BENCH_SUITE_FUNCS_H
#define WEFT_BENCH_SUITE_FUNCS_H

#include <math.h>

#include "weft.h"

static inline wf_array *suite_f32(double v) { return wf_scalar(v, WF_DTYPE_F32); }

/* Ends the scope opened by the builder, keeping `result`. */
static inline wf_array *suite_scope_return(wf_array *result)
{
    wf_array *kept = result ? wf_keep(result) : NULL;
    wf_scope_end();
    return kept;
}

/* GELU, erf form: 0.5 x (1 + erf(x / sqrt 2)). */
static inline wf_array *suite_gelu_erf(wf_array *x)
{
    wf_scope_begin();
    wf_array *inner = wf_erf(wf_multiply(x, suite_f32(0.70710678118654752)));
    wf_array *y = wf_multiply(wf_multiply(x, suite_f32(0.5)), wf_add(inner, suite_f32(1)));
    return suite_scope_return(y);
}

static inline double suite_gelu_erf_ref(double x) { return 0.5 * x * (1 + erf(x * 0.70710678118654752)); }

/* GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
static inline wf_array *suite_gelu_tanh(wf_array *x)
{
    wf_scope_begin();
    wf_array *cube = wf_multiply(wf_multiply(x, x), x);
    wf_array *arg = wf_multiply(wf_add(x, wf_multiply(cube, suite_f32(0.044715))),
                                suite_f32(0.79788456080286536));
    wf_array *y = wf_multiply(wf_multiply(x, suite_f32(0.5)), wf_add(wf_tanh(arg), suite_f32(1)));
    return suite_scope_return(y);
}

static inline double suite_gelu_tanh_ref(double x)
{
    return 0.5 * x * (1 + tanh(0.79788456080286536 * (x + 0.044715 * x * x * x)));
}

/* The 8-op chain y = (sqrt(max((x * 1.5 + 0.25) * x - 0.5, 0)) + x) * 0.5. */
static inline wf_array *suite_chain8(wf_array *x)
{
    wf_scope_begin();
    wf_array *t = wf_multiply(wf_add(wf_multiply(x, suite_f32(1.5)), suite_f32(0.25)), x);
    t = wf_maximum(wf_subtract(t, suite_f32(0.5)), suite_f32(0));
    wf_array *y = wf_multiply(wf_add(wf_sqrt(t), x), suite_f32(0.5));
    return suite_scope_return(y);
}

static inline double suite_chain8_ref(double x)
{
    return (sqrt(fmax((x * 1.5 + 0.25) * x - 0.5, 0)) + x) * 0.5;
}

/* The 10-op function of the call-overhead benchmark:
 * exp(tanh((sqrt(max((x * 1.5 + 0.25) * x - 0.5, 0)) + x) * 0.5)). */
static inline wf_array *suite_call10(wf_array *x)
{
    wf_scope_begin();
    wf_array *y = wf_exp(wf_tanh(suite_chain8(x)));
    return suite_scope_return(y);
}

static inline double suite_call10_ref(double x) { return exp(tanh(suite_chain8_ref(x))); }

/* The served MLP: relu(x @ w1 + b1) @ w2 + b2. */
static inline wf_array *suite_mlp_serve(wf_array *x, wf_array *w1, wf_array *b1, wf_array *w2,
                                        wf_array *b2)
{
    wf_scope_begin();
    wf_array *h = wf_maximum(wf_add(wf_matmul(x, w1), b1), suite_f32(0));
    wf_array *y = wf_add(wf_matmul(h, w2), b2);
    return suite_scope_return(y);
}

#endif /* WEFT_BENCH_SUITE_FUNCS_H */
