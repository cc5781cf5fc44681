/* Evaluation (DESIGN section 3). Internal. */
#ifndef WEFT_RUNTIME_EVAL_H
#define WEFT_RUNTIME_EVAL_H

#include "core/array.h"

/* Runs one queued node: waits for inputs computed on other streams, runs the
 * kernel (no lock held), publishes READY or FAILED, detaches the inputs and
 * drops the queue's reference. Called by the thread holding the stream's
 * execution token. */
void wf__eval_run_task(wf_array *node);

/* Makes sure `a` is computed; records and returns its error if it failed. */
wf_status wf__eval_one(wf_array *a, const char *op);

/* Brackets user code run inside an evaluation (custom kernels): while this
 * thread is inside, wf_eval, wf_async_eval and data access are
 * WF_ERR_MISUSE (they would wait on the evaluation that runs them). */
void wf__eval_user_code_begin(void);
void wf__eval_user_code_end(void);
/* True while this thread runs user code inside an evaluation (a kernel):
 * anything that would wait on other work must fail with WF_ERR_MISUSE. */
bool wf__eval_in_user_code(void);

#endif
