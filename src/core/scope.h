/* Per-thread scopes (DESIGN section 6). Internal. */
#ifndef WEFT_CORE_SCOPE_H
#define WEFT_CORE_SCOPE_H

#include "core/array.h"

/* Hands a new reference to `a` to this thread's innermost scope, if one is
 * open. WF_ERR_OUT_OF_MEMORY (recorded) if it cannot be recorded. */
wf_status wf__scope_adopt(wf_array *a);
/* Forgets one reference to `a` owned by an open scope of this thread (the
 * caller is releasing it by hand). */
void wf__scope_forget(wf_array *a);
/* References this thread has handed to its scopes so far (a test counter:
 * proves an op records its result and none of its temporaries). */
uint64_t wf__scope_adoptions(void);
/* Table probes and releases this thread's scopes have done (a test counter:
 * proves that releasing inside a large scope is not a linear search). */
uint64_t wf__scope_work(void);

/* Hides this thread's open scopes from code run on behalf of another
 * thread (kernels, deferred payload destructors): until the matching
 * resume, the thread has no open scope. Returns what resume needs. */
void *wf__scope_suspend(void);
/* Closes scopes the hidden code left open, then shows the saved ones again. */
void wf__scope_resume(void *saved);

#endif
