/* Per-thread graph-building mode (see core/graph_mode.h). */
#include "core/graph_mode.h"

static _Thread_local wf_graph_mode thread_mode;

int wf__graph_keep_depth(void) { return thread_mode.keep_depth; }
int wf__graph_grad_depth(void) { return thread_mode.grad_depth; }
int wf__graph_compile_depth(void) { return thread_mode.compile_depth; }
void wf__graph_compile_enter(void) { thread_mode.compile_depth++; }
void wf__graph_compile_leave(void) { thread_mode.compile_depth--; }
int wf__graph_traced_shape_depth(void) { return thread_mode.traced_shape_depth; }
void wf__graph_traced_shape_enter(void) { thread_mode.traced_shape_depth++; }
void wf__graph_traced_shape_leave(void) { thread_mode.traced_shape_depth--; }

void wf__graph_mode_push(bool grad)
{
    thread_mode.keep_depth++;
    if (grad)
        thread_mode.grad_depth++;
}

void wf__graph_mode_pop(bool grad)
{
    thread_mode.keep_depth--;
    if (grad)
        thread_mode.grad_depth--;
}

void wf__graph_mode_suspend(wf_graph_mode *saved)
{
    *saved = thread_mode;
    thread_mode.keep_depth = 0;
    thread_mode.grad_depth = 0;
    thread_mode.compile_depth = 0;
    thread_mode.traced_shape_depth = 0;
}

void wf__graph_mode_restore(const wf_graph_mode *saved) { thread_mode = *saved; }
