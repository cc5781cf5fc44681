/*
 * Per-thread tracing state (DESIGN C4): how many traces this thread is
 * inside. The graph-building counters that core and ops read live in
 * core/graph_mode.c; this file keeps them in step with the trace depth.
 * Nothing here is shared between threads.
 */
#include "transforms/transforms.h"

static _Thread_local int trace_depth;

void wf__trace_enter(wf_trace_kind kind)
{
    trace_depth++;
    wf__graph_mode_push(kind == WF_TRACE_VJP);
}

void wf__trace_leave(wf_trace_kind kind)
{
    trace_depth--;
    wf__graph_mode_pop(kind == WF_TRACE_VJP);
}

int wf__trace_depth(void) { return trace_depth; }

void wf__trace_suspend(wf_trace_saved *saved)
{
    saved->depth = trace_depth;
    trace_depth = 0;
    wf__graph_mode_suspend(&saved->mode);
}

void wf__trace_resume(const wf_trace_saved *saved)
{
    trace_depth = saved->depth;
    wf__graph_mode_restore(&saved->mode);
}
