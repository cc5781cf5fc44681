/*
 * suite_compiled.h - helpers of the suite programs that use wf_fn and
 * wf_compile (bench/suite_*_compiled.c, suite_call_overhead.c,
 * suite_threads.c, suite_first_call.c, suite_train.c). Only those include
 * it: CMake leaves them out while include/weft.h lacks these APIs.
 */
#ifndef WEFT_BENCH_SUITE_COMPILED_H
#define WEFT_BENCH_SUITE_COMPILED_H

#include <stdatomic.h>

#include "suite.h"

/* A one-input, one-output function body from an array builder. */
typedef wf_array *(*suite_unary_builder)(wf_array *x);

typedef struct suite_unary_body {
    suite_unary_builder build;
    atomic_long runs; /* how often the body ran: traces, or plain calls */
} suite_unary_body;

static inline wf_status suite_unary_callback(void *payload, wf_array *const *inputs,
                                             size_t ninputs, wf_array **outputs,
                                             size_t *noutputs)
{
    suite_unary_body *body = payload;
    atomic_fetch_add(&body->runs, 1);
    if (ninputs != 1 || *noutputs < 1)
        return WF_ERR_INVALID_ARGUMENT;
    outputs[0] = body->build(inputs[0]);
    if (!outputs[0])
        return wf_last_error();
    *noutputs = 1;
    return WF_OK;
}

/* A wf_fn running body->build (body is borrowed: it must outlive the fn). */
static inline wf_fn *suite_unary_fn(suite_unary_body *body)
{
    wf_fn *fn = wf_fn_new(suite_unary_callback, body, NULL);
    suite_require(fn != NULL, "wf_fn_new");
    return fn;
}

/* Calls a one-input, one-output fn; a new reference, NULL on failure.
 * Matches suite_map_fn, with the wf_fn as ctx. */
static inline wf_array *suite_call1(void *fn, wf_array *x)
{
    wf_array *y = NULL;
    size_t n = 1;
    if (wf_fn_call(fn, &x, 1, &y, &n) != WF_OK || n != 1)
        return NULL;
    return y;
}

/* Traces made so far for one compiled function. */
static inline uint64_t suite_traces(wf_fn *compiled)
{
    wf_compile_stats stats = wf_compile_stats_default();
    if (wf_compile_stats_get(compiled, &stats) != WF_OK)
        return UINT64_MAX;
    return stats.traces;
}

#endif /* WEFT_BENCH_SUITE_COMPILED_H */
