/* Thread-local last error (DESIGN section 6). Internal. */
#ifndef WEFT_CORE_ERROR_H
#define WEFT_CORE_ERROR_H

#include "weft.h"

/* Records `status` and a printf-style message as this thread's last error;
 * returns `status` so callers can `return wf__error(...)`. */
wf_status wf__error(wf_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* For an op given a NULL input: keeps an error already recorded, otherwise
 * records WF_ERR_NULL_ARGUMENT naming `what`. Returns the recorded status. */
wf_status wf__null_input(const char *op, const char *what);

/* A copy of this thread's last error, so work run on behalf of another
 * thread (a stream task run by a helping wf_eval) does not change it. */
typedef struct wf_error_state {
    wf_status status;
    char message[512];
} wf_error_state;
void wf__error_save(wf_error_state *state);
void wf__error_restore(const wf_error_state *state);

#endif
