/*
 * Primitives with several outputs ("siblings"). Internal.
 *
 * A node of a primitive with noutputs > 1 is a hidden primary: it holds the
 * inputs, runs the kernel once and owns one hidden result node per output
 * (wf__node_output). The arrays users get are siblings: nodes of the
 * `sibling` primitive whose one input is the primary and whose kernel makes
 * a view of result `index`. Evaluating any sibling claims and runs the
 * primary like any input (exactly once, whoever asks first) and then the
 * sibling's view; the other siblings become READY when they are evaluated,
 * at the cost of a view. Evaluation needs nothing special for siblings.
 * Transforms and compile treat the primary and its siblings as one step:
 * they rebuild them with wf__node_new_multi, never a sibling alone.
 */
#ifndef WEFT_PRIM_SIBLING_H
#define WEFT_PRIM_SIBLING_H

#include "core/array.h"

/* Output `index` of the primary (the sibling's only input): its description
 * is kept here so the sibling infers without looking into the primary. */
typedef struct wf_sibling_params {
    int index;
    wf_dtype dtype;
    int ndim;
    int64_t shape[WF_MAX_NDIM];
} wf_sibling_params;

extern const wf_prim_def wf__prim_sibling;

/* Builds one node of `prim` on `inputs` and writes its noutputs siblings
 * (new references, not registered with any scope: an internal builder) to
 * outputs[0 .. noutputs). noutputs must equal wf__prim_noutputs(prim).
 * On failure every entry is NULL and the error is recorded; what the params
 * own is released as wf__node_new does. */
wf_status wf__node_new_multi(const wf_prim_def *prim, const void *params,
                             wf_array *const *inputs, int ninputs, wf_array **outputs,
                             int noutputs);

#endif
