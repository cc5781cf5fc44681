/*
 * Tapes: what a trace of a compiled function records (DESIGN section 5).
 * Internal.
 *
 * A tape is a list of primitive applications in dependency order. Each
 * operand refers to a call input, a captured constant (an array the traced
 * function closed over or built from constants only, held by the tape), or
 * an earlier tape node. Replay builds one ordinary lazy node per tape node
 * from the call's real inputs. A tape holds no address of anything it does
 * not own, and never a key: the cache keys are built elsewhere.
 */
#ifndef WEFT_COMPILE_TAPE_H
#define WEFT_COMPILE_TAPE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/array.h"

enum wf_tape_ref_kind { WF_TAPE_INPUT, WF_TAPE_CONST, WF_TAPE_NODE };

typedef struct wf_tape_ref {
    int kind; /* enum wf_tape_ref_kind */
    int index;
} wf_tape_ref;

typedef struct wf_tape_node {
    const wf_prim_def *prim;
    void *params; /* prim->params_size bytes, owned (what they own is retained) */
    int ninputs;
    wf_tape_ref *inputs;
    /* The traced output (a shapeless replay may give another shape). */
    wf_dtype dtype;
    int ndim;
    int64_t shape[WF_MAX_NDIM];
} wf_tape_node;

typedef struct wf_tape {
    int ninputs;
    int nconsts;
    wf_array **consts; /* owned references */
    int nnodes;
    wf_tape_node *nodes;
    int noutputs;
    wf_tape_ref *outputs;
} wf_tape;

/* Frees everything the tape owns (constants are released: call with no lock
 * held). The struct itself is the caller's. */
void wf__tape_clear(wf_tape *t);

/* Records the graph between `placeholders` (the traced function's inputs)
 * and `outputs`: nodes that depend on a placeholder become tape nodes, the
 * rest constants. Fails (error recorded) on a node that cannot be replayed:
 * a failed or evaluated node that depends on a placeholder (the function
 * evaluated a traced value), a primitive whose parameters own data it cannot
 * share, or, when `shapeless`, a primitive whose parameters fix a shape. */
wf_status wf__tape_record(wf_tape *t, wf_array *const *placeholders, int nplaceholders,
                          wf_array *const *outputs, int noutputs, bool shapeless);

/* A copy of a tape sharing nothing mutable (constants retained, params
 * copied and retained). */
wf_status wf__tape_copy(wf_tape *dst, const wf_tape *src);

/* Common-subexpression elimination (bucketed by primitive, parameters and
 * operands), merging of equal scalar constants, removal of no-op reshapes,
 * broadcasts, transposes and casts, and dead nodes. */
wf_status wf__tape_simplify(wf_tape *t);

/* Replaces chains of float32 element-wise nodes (with the broadcasts of
 * their leaves) by fused nodes, with several outputs where intermediates
 * are read outside the chain; *fused_nodes says how many were made.
 * input_shapes / input_ndims describe the traced call's inputs; a
 * `shapeless` tape only exposes intermediates whose shape is the fused
 * node's at every call. */
wf_status wf__tape_fuse(wf_tape *t, const int64_t *const *input_shapes, const int *input_ndims,
                        bool shapeless, int *fused_nodes);

/* Builds the tape's nodes from `inputs` (ninputs arrays) and writes
 * noutputs new references (not adopted by any scope) to `outputs`. */
wf_status wf__tape_replay(const wf_tape *t, wf_array *const *inputs, wf_array **outputs);

/* The parameters of a node copied for a tape or a replay: what they own is
 * shared (prim->params_retain: fused programs, custom functions' rules);
 * primitives whose parameters own data that cannot be shared (a wf_custom
 * kernel's payload) give false. */
bool wf__tape_params_copyable(const wf_prim_def *prim);
void *wf__tape_params_copy(const wf_prim_def *prim, const void *params);
void wf__tape_params_free(const wf_prim_def *prim, void *params);

#endif
