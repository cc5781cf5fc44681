/*
 * Shared pieces of the compile reproductions: a compiled "x * k + 1"
 * closure and a checker. Include after repro_common.h.
 */
#ifndef WEFT_TESTS_REPRO_COMPILE_COMMON_H
#define WEFT_TESTS_REPRO_COMPILE_COMMON_H

#include <math.h>
#include <stdlib.h>

#include "weft.h"

/* The payload of a closure: its constant and an optional captured array. */
struct scaled {
    float k;
    wf_array *captured; /* added to the result when not NULL (owned) */
};

static inline void scaled_free(void *p)
{
    struct scaled *s = p;
    wf_release(s->captured);
    free(s);
}

/* y = x * k + 1 (+ captured) */
static inline wf_status scaled_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                             size_t *nout)
{
    (void)n;
    struct scaled *s = payload;
    wf_scope_begin();
    wf_array *y = wf_add(wf_multiply(in[0], wf_scalar(s->k, WF_DTYPE_F32)),
                         wf_scalar(1.0, WF_DTYPE_F32));
    if (s->captured)
        y = wf_add(y, s->captured);
    y = wf_keep(y);
    wf_scope_end();
    if (!y)
        return wf_last_error();
    out[0] = y;
    *nout = 1;
    return WF_OK;
}

/* A compiled closure for k (and `captured`, retained). */
static inline wf_fn *compiled_scaled(float k, wf_array *captured)
{
    struct scaled *s = malloc(sizeof *s);
    if (!s)
        return NULL;
    s->k = k;
    s->captured = captured ? wf_retain(captured) : NULL;
    wf_fn *f = wf_fn_new(scaled_body, s, scaled_free);
    wf_fn *cf = f ? wf_compile(f, NULL) : NULL;
    wf_fn_release(f);
    return cf;
}

/* x = 0, 1, 2, ... (n floats) */
static inline wf_array *iota(int64_t n)
{
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)i;
    wf_array *a = wf_array_from_data(v, &n, 1, WF_DTYPE_F32);
    free(v);
    return a;
}

/* Calls f on iota(n) and checks y[i] == i * k + 1 + extra. */
static inline bool call_and_check(wf_fn *f, int64_t n, float k, float extra)
{
    wf_array *x = iota(n), *y = NULL;
    size_t nout = 1;
    bool ok = x && wf_fn_call(f, &x, 1, &y, &nout) == WF_OK && nout == 1 &&
              wf_array_size(y) == n;
    const float *data = NULL;
    if (ok && wf_array_data(y, (const void **)&data) != WF_OK)
        ok = false;
    for (int64_t i = 0; ok && i < n; i++)
        if (fabsf(data[i] - ((float)i * k + 1.0f + extra)) > 1e-3f * (1.0f + fabsf(data[i])))
            ok = false;
    wf_release(x);
    wf_release(y);
    return ok;
}

#endif
