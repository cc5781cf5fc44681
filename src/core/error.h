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

#endif
