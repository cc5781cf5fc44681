/*
 * settle.h - the count of live array nodes that leak checks compare against
 * a baseline. Nothing needs to settle first: wf_eval returns only once every
 * node it waited for has dropped its inputs and, if a stream's worker ran
 * it, the worker's reference too (issue 7, item 7). Work queued by
 * wf_async_eval is covered the same way by wf_stream_synchronize — except a
 * node with a payload destructor (wf_custom) that a stream task freed: its
 * destructor runs on the stream's worker after the task counts as done
 * (docs/THREADING.md), so the node (and what it holds) may still be alive
 * when wf_stream_synchronize returns. settle_live_arrays waits for those.
 */
#include <unistd.h>

#ifndef WEFT_TESTS_SETTLE_H
#define WEFT_TESTS_SETTLE_H

#include "core/array.h"
#include "weft.h"

/* Live array nodes in the process. */
static inline int64_t live_arrays(void) { return wf__arrays_live(); }

/* Waits for the work queued on the default stream so far: needed only after
 * wf_async_eval, before counting. */
static inline void settle_default_stream(void)
{
    wf_stream *s = wf_default_stream();
    wf_stream_synchronize(s);
    wf_stream_release(s);
}

/* Waits (up to 10 s) until at most `baseline` array nodes are alive, for
 * destructors deferred to a stream's worker; returns the live count. */
static inline int64_t settle_live_arrays(int64_t baseline)
{
    int64_t live = live_arrays();
    for (int ms = 0; ms < 10000 && live > baseline; ms++) {
        usleep(1000);
        live = live_arrays();
    }
    return live;
}

#endif
