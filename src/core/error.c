#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { MESSAGE_CAPACITY = sizeof(((wf_error_state *)0)->message) };

static _Thread_local wf_status last_status = WF_OK;
static _Thread_local char last_message[MESSAGE_CAPACITY];

wf_status wf__error(wf_status status, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    vsnprintf(last_message, sizeof last_message, fmt, args);
    va_end(args);
    last_status = status;
    return status;
}

wf_status wf_set_error(wf_status status, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    if (fmt)
        vsnprintf(last_message, sizeof last_message, fmt, args);
    else
        snprintf(last_message, sizeof last_message, "%s", wf_status_name(status));
    va_end(args);
    last_status = status;
    return status;
}

wf_status wf__null_input(const char *op, const char *what)
{
    if (last_status != WF_OK)
        return last_status;
    return wf__error(WF_ERR_NULL_ARGUMENT, "%s: %s is NULL", op, what);
}

void wf__error_save(wf_error_state *state)
{
    state->status = last_status;
    if (last_status != WF_OK) /* copy only when there is something to keep */
        memcpy(state->message, last_message, sizeof state->message);
}

void wf__error_restore(const wf_error_state *state)
{
    last_status = state->status;
    if (state->status != WF_OK)
        memcpy(last_message, state->message, sizeof last_message);
}

wf_status wf_last_error(void) { return last_status; }

const char *wf_last_error_message(void) { return last_status == WF_OK ? "" : last_message; }

void wf_clear_error(void)
{
    last_status = WF_OK;
    last_message[0] = '\0';
}

const char *wf_status_name(wf_status status)
{
    switch (status) {
    case WF_OK: return "WF_OK";
    case WF_ERR_INVALID_ARGUMENT: return "WF_ERR_INVALID_ARGUMENT";
    case WF_ERR_NULL_ARGUMENT: return "WF_ERR_NULL_ARGUMENT";
    case WF_ERR_SHAPE: return "WF_ERR_SHAPE";
    case WF_ERR_DTYPE: return "WF_ERR_DTYPE";
    case WF_ERR_AXIS: return "WF_ERR_AXIS";
    case WF_ERR_OUT_OF_MEMORY: return "WF_ERR_OUT_OF_MEMORY";
    case WF_ERR_OVERFLOW: return "WF_ERR_OVERFLOW";
    case WF_ERR_MISUSE: return "WF_ERR_MISUSE";
    case WF_ERR_KERNEL: return "WF_ERR_KERNEL";
    case WF_ERR_UNSUPPORTED: return "WF_ERR_UNSUPPORTED";
    case WF_ERR_INTERNAL: return "WF_ERR_INTERNAL";
    case WF_ERR_IO: return "WF_ERR_IO";
    case WF_ERR_DISTRIBUTED: return "WF_ERR_DISTRIBUTED";
    }
    return "WF_ERR_UNKNOWN";
}
