/*
 * Deferred user code of frees: payload destructors and external deleters
 * (contract C6). Internal.
 *
 * A payload destructor (prim->params_release, e.g. a wf_custom payload's)
 * and an external buffer's deleter (wf_array_from_external) are user code
 * and may call any public function, wf_eval and wf_stream_synchronize
 * included, or take a lock of the user's that a thread holds while it
 * waits for weft. So they must not run while their thread holds anything
 * of weft's that such a wait could be for: a kernel in progress, a stream's
 * execution token, or nodes it submitted and has not run yet. Code that
 * holds such things brackets them with wf__free_defer_begin/end; a node
 * with a payload freed inside the bracket is queued on this thread (its
 * buffers are released at once; the rest, destructor included, waits), an
 * external buffer's deleter is queued likewise, and the outermost end tells
 * the caller to run the queue (or hand it to a thread that will: a stream's
 * worker, runtime/stream.c).
 */
#ifndef WEFT_CORE_DEFERRED_FREE_H
#define WEFT_CORE_DEFERRED_FREE_H

#include <stdbool.h>

#include "core/array.h"

/* A piece of user code to run later, embedded in what it frees (an
 * external buffer's header): `run` runs it and frees its holder. */
typedef struct wf_deferred_call {
    void (*run)(struct wf_deferred_call *call);
    struct wf_deferred_call *next;
} wf_deferred_call;

/* What a thread deferred, oldest first: nodes (linked through queue_next:
 * a node nobody references is in no stream queue) and calls. Intrusive, so
 * deferring never allocates and cannot fail. */
typedef struct wf_deferred_list {
    wf_array *nodes_head, *nodes_tail;
    wf_deferred_call *calls_head, *calls_tail;
} wf_deferred_list;

/* Enters a region where payload destructors and deleters are deferred
 * (nests). */
void wf__free_defer_begin(void);
/* Leaves it; true when this was the outermost region and work waits: the
 * caller, holding nothing of weft's now, runs it (wf__free_deferred_pop,
 * wf__free_deferred_call_pop, with neutral per-thread state) or moves it
 * to a thread that will (wf__free_deferred_take). */
bool wf__free_defer_end(void);
/* Whether a node or buffer freed now must be deferred. */
bool wf__free_deferring(void);
/* Queues a node whose refcount reached 0. */
void wf__free_defer_push(wf_array *node);
/* Queues a call. */
void wf__free_defer_call(wf_deferred_call *call);
/* The oldest queued node / call of this thread, or NULL. */
wf_array *wf__free_deferred_pop(void);
wf_deferred_call *wf__free_deferred_call_pop(void);

/* Moves this thread's queue to the end of *list (this thread's is empty
 * after). */
void wf__free_deferred_take(wf_deferred_list *list);
/* Moves *list to the end of this thread's queue (*list is empty after). */
void wf__free_deferred_give(wf_deferred_list *list);
bool wf__free_deferred_list_empty(const wf_deferred_list *list);

#endif
