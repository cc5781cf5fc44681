/*
 * Function transforms (DESIGN section 2: src/transforms/). Internal.
 *
 * Every transform traces the user's function on this thread: it raises the
 * thread's trace depth (so nodes built meanwhile keep their graph, see
 * core/graph_mode.h), calls the function on fresh "tracer" nodes standing
 * for its inputs, and walks the graph from the outputs back to the tracers
 * applying per-primitive rules (transforms/rules.h). Rules run after the
 * trace is left, at the enclosing depth, so what they build is itself
 * traced by an enclosing transform: that is how transforms compose.
 *
 * Engines run inside a scope of their own: every array a rule builds lands
 * there and goes with wf_scope_end; results leave it through wf_keep.
 */
#ifndef WEFT_TRANSFORMS_TRANSFORMS_H
#define WEFT_TRANSFORMS_TRANSFORMS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/array.h"
#include "core/graph_mode.h"
#include "weft.h"

/* ---------------------------------------------------------------- trace state */

typedef enum wf_trace_kind { WF_TRACE_VJP, WF_TRACE_JVP, WF_TRACE_VMAP } wf_trace_kind;

/* Enter / leave a trace of `kind` on this thread (vjp traces also raise the
 * grad depth that ops with a training path read). */
void wf__trace_enter(wf_trace_kind kind);
void wf__trace_leave(wf_trace_kind kind);
/* Number of traces this thread is inside. */
int wf__trace_depth(void);

/* This thread's whole tracing state, cleared while a checkpointed forward
 * builds a plain graph. */
typedef struct wf_trace_saved {
    int depth;
    wf_graph_mode mode;
} wf_trace_saved;
void wf__trace_suspend(wf_trace_saved *saved);
void wf__trace_resume(const wf_trace_saved *saved);

/* ---------------------------------------------------------------- functions */

/* A wf_fn made by weft itself (grad, vmap, custom function wrappers). */
wf_fn *wf__fn_make(wf_fn_callback callback, void *payload, void (*payload_free)(void *payload));

/* fn's payload if fn was made with `callback` (how compile recognises its
 * own functions), else NULL. */
void *wf__fn_payload_of(const wf_fn *fn, wf_fn_callback callback);
/* Calls fn with capacity WF_FN_MAX_OUTPUTS and takes the outputs out of
 * the scope wf_fn_call handed them to: the caller owns them
 * (wf__array_decref). */
wf_status wf__fn_call_owned(wf_fn *fn, wf_array *const *inputs, size_t ninputs,
                            wf_array **outputs, size_t *noutputs);
/* Releases n owned arrays (NULL entries skipped). */
void wf__release_owned(wf_array **arrays, size_t n);
/* Hands `n` arrays (owned by the innermost scope or not) to the caller as
 * new references: into the enclosing scope if one is open. On failure
 * nothing is handed out. */
wf_status wf__export(wf_array *const *arrays, size_t n, wf_array **out);

/* The primitive of a custom function's outputs under a transform
 * (transforms/custom.c). */
extern const wf_prim_def wf__prim_custom_function;
/* Whether a transform of `kind` applying `node`'s rule reads input `input`
 * (false only for the function outputs of a custom function node whose
 * rule for that transform is its own). ctx: a wf_trace_kind *. */
bool wf__rule_uses_input(const wf_array *node, int input, void *ctx);

/* ---------------------------------------------------------------- engines */

/* Reverse mode. Traces fn on primals (tracers for those with traced[i];
 * traced NULL: all). Seeds: `cotangents` (ncotangents must equal the
 * number of outputs), or with cotangents NULL, ones for output 0, which must
 * be a float scalar (grad). `outputs` (capacity *noutputs, may be NULL) and
 * `grads` (nprimals entries, NULL where not traced) receive new references.
 * `op` names the public entry point in messages. */
wf_status wf__vjp(const char *op, wf_fn *fn, wf_array *const *primals, size_t nprimals,
                  const bool *traced, wf_array *const *cotangents, size_t ncotangents,
                  wf_array **outputs, size_t *noutputs, wf_array **grads);

/* Forward mode: tangents (nprimals entries, NULL = zero). `outputs` (may be
 * NULL) and `tangents_out` have room for *noutputs (in). */
wf_status wf__jvp(const char *op, wf_fn *fn, wf_array *const *primals, size_t nprimals,
                  wf_array *const *tangents, wf_array **outputs, wf_array **tangents_out,
                  size_t *noutputs);

/* Batching: inputs with their batch axes (normalized, or WF_VMAP_NOT_MAPPED);
 * outputs moved to out_axes (NULL: all 0). New references in `outputs`
 * (capacity *noutputs). */
wf_status wf__vmap(const char *op, wf_fn *fn, wf_array *const *inputs, const int *in_axes,
                   size_t ninputs, const int *out_axes, size_t nout_axes, wf_array **outputs,
                   size_t *noutputs);

#endif
