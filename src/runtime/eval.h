/* Evaluation (DESIGN section 3). Internal. */
#ifndef WEFT_RUNTIME_EVAL_H
#define WEFT_RUNTIME_EVAL_H

#include <stdbool.h>

#include "core/array.h"

/* Runs one node taken from a stream's FIFO: waits for its inputs, runs the
 * kernel (no lock held, neutral per-thread state), publishes READY or
 * FAILED, detaches the inputs unless keep_graph, and drops the queue's
 * reference. Called by the holder of the stream's execution token, inside
 * a wf__free_defer_begin/end region. Returns WF_OK, or the node's error with
 * a copy of its message in *message (the caller frees it; NULL when that
 * copy could not be made). */
wf_status wf__eval_run_task(wf_array *node, char **message);

/* Runs the payload destructors and external deleters this thread deferred
 * (core/deferred_free.h), with neutral per-thread state. Call only where the thread holds nothing
 * of weft's: no lock, no token, no unrun nodes. */
void wf__eval_run_deferred_frees(void);

/* Makes sure `a` is computed; records and returns its error if it failed. */
wf_status wf__eval_one(wf_array *a, const char *op);

/* True while this thread is inside a kernel (user code or not): there
 * wf_eval, wf_async_eval, data access of an unevaluated array,
 * wf_stream_synchronize and anything else that would wait on other work
 * must fail with WF_ERR_MISUSE (it could wait on the evaluation that runs
 * the kernel). */
bool wf__eval_in_user_code(void);
/* Brackets user code run inside a kernel (custom kernels). Every kernel is
 * bracketed already by the runtime; nesting is allowed. */
void wf__eval_user_code_begin(void);
void wf__eval_user_code_end(void);

#endif
