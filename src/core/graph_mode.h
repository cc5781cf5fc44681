/*
 * Per-thread graph-building mode (DESIGN section 1, C4). Internal.
 *
 * Transforms (src/transforms/) raise these counters while they trace a
 * user's function on this thread; core and ops only read them, so the
 * arrows keep pointing down:
 *  - keep depth > 0: nodes built now get keep_graph (their inputs stay after
 *    evaluation, so a transform can walk the graph afterwards);
 *  - grad depth > 0: this thread is inside a vjp/jvp trace, so ops with a
 *    training path (scaled_dot_product_attention) keep what a backward pass
 *    needs. Another thread's transforms never change what this thread sees.
 */
#ifndef WEFT_CORE_GRAPH_MODE_H
#define WEFT_CORE_GRAPH_MODE_H

#include <stdbool.h>

typedef struct wf_graph_mode {
    int keep_depth;
    int grad_depth;
    int compile_depth; /* > 0 while this thread traces a compiled function */
    int traced_shape_depth; /* > 0 while a rule that reads traced shapes runs */
} wf_graph_mode;

int wf__graph_keep_depth(void);
int wf__graph_grad_depth(void);
/* Compile (src/compile/) raises this while it traces a function on this
 * thread: compiled calls made meanwhile run inline. (The default random key
 * is recorded separately: ops/ops.h, wf_random_draws.) */
int wf__graph_compile_depth(void);
void wf__graph_compile_enter(void);
void wf__graph_compile_leave(void);
/* Transforms raise this around a rule that builds nodes from the traced
 * shapes (sizes, axes, counts read off the node): the shapeless nodes it
 * builds are marked WF_NODE_FLAG_TRACED_SHAPE, which a shapeless compiled
 * trace refuses. Rules that only combine ops follow any shape. */
int wf__graph_traced_shape_depth(void);
void wf__graph_traced_shape_enter(void);
void wf__graph_traced_shape_leave(void);
/* Enter / leave a trace: keep depth +-1, and grad depth +-1 if `grad`. */
void wf__graph_mode_push(bool grad);
void wf__graph_mode_pop(bool grad);
/* Saves this thread's mode into *saved and clears it (code that must build
 * plain, detachable graphs: checkpointed forwards, and kernels or
 * destructors run on behalf of another thread); restore puts it back. */
void wf__graph_mode_suspend(wf_graph_mode *saved);
void wf__graph_mode_restore(const wf_graph_mode *saved);

#endif
