/*
 * Deferred payload destructors (contract C6). Internal.
 *
 * A payload destructor (prim->params_release, e.g. a wf_custom payload's) is
 * user code and may call any public function, wf_eval and
 * wf_stream_synchronize included. So it must not run while its thread holds
 * anything of weft's that such a call could wait for: a kernel in progress,
 * a stream's execution token, or nodes it submitted and has not run yet.
 * Code that holds such things brackets them with wf__free_defer_begin/end;
 * a node with a payload freed inside the bracket is queued on this thread
 * (its buffers are released at once; the rest, destructor included, waits),
 * and the outermost end tells the caller to run the queue.
 */
#ifndef WEFT_CORE_DEFERRED_FREE_H
#define WEFT_CORE_DEFERRED_FREE_H

#include <stdbool.h>

#include "core/array.h"

/* Enters a region where payload destructors are deferred (nests). */
void wf__free_defer_begin(void);
/* Leaves it; true when this was the outermost region and nodes wait: the
 * caller, holding nothing of weft's now, runs them (wf__free_deferred_pop +
 * wf__array_free_deferred, with neutral per-thread state). */
bool wf__free_defer_end(void);
/* Whether a node freed now must be deferred. */
bool wf__free_deferring(void);
/* Queues a node whose refcount reached 0 (linked through queue_next: a
 * node nobody references is in no stream queue). */
void wf__free_defer_push(wf_array *node);
/* The oldest queued node, or NULL. */
wf_array *wf__free_deferred_pop(void);

#endif
