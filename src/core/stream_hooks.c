/* Core's hooks into the runtime's streams (see core/stream_hooks.h). */
#include "core/stream_hooks.h"

#include <stdatomic.h>
#include <stddef.h>

/* Set once by the runtime's start-up; read by every node construction. */
static _Atomic(const wf_stream_hooks *) installed;

void wf__stream_hooks_install(const wf_stream_hooks *hooks)
{
    atomic_store_explicit(&installed, hooks, memory_order_release);
}

wf_status wf__node_stream_take(wf_stream **out)
{
    const wf_stream_hooks *hooks = atomic_load_explicit(&installed, memory_order_acquire);
    *out = NULL;
    if (!hooks)
        return WF_OK;
    wf_stream *s = hooks->current();
    if (!s)
        return wf_last_error();
    *out = hooks->retain(s);
    return WF_OK;
}

void wf__node_stream_drop(wf_stream *s)
{
    if (!s)
        return;
    /* A stream exists, so the runtime started and installed the hooks. */
    atomic_load_explicit(&installed, memory_order_acquire)->release(s);
}
