/*
 * Per-thread tracing state (DESIGN C4): how many traces this thread is
 * inside. The graph-building counters that core and ops read live in
 * core/graph_mode.c; this file keeps them in step with the trace depth.
 * Nothing here is shared between threads.
 */
#include "transforms/transforms.h"

#include <pthread.h>

#include "core/thread_state.h"

static _Thread_local int trace_depth;

/* Kernels and payload destructors run untraced on whichever thread runs
 * them (core/thread_state.h): the runtime suspends this state around them. */
static void trace_state_suspend(void *saved) { wf__trace_suspend(saved); }
static void trace_state_resume(const void *saved) { wf__trace_resume(saved); }
static const wf_thread_state_hook trace_state_hook = {trace_state_suspend, trace_state_resume};
static pthread_once_t trace_state_once = PTHREAD_ONCE_INIT;

static void register_trace_state(void)
{
    _Static_assert(sizeof(wf_trace_saved) <= WF_THREAD_STATE_BYTES, "saved trace too big");
    wf__thread_state_register(&trace_state_hook);
}

void wf__trace_enter(wf_trace_kind kind)
{
    pthread_once(&trace_state_once, register_trace_state);
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
