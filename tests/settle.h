/*
 * settle.h - counts that tests compare against a baseline, read once the
 * default stream is idle. A stream worker drops its reference to a node just
 * after publishing the node's result, so a count read right after wf_eval
 * returns can be one high for a moment (the node is freed a moment later).
 * Tests that release their own streams need nothing more: releasing the last
 * reference to a stream joins its worker.
 */
#ifndef WEFT_TESTS_SETTLE_H
#define WEFT_TESTS_SETTLE_H

#include "core/array.h"
#include "weft.h"

/* Waits until the default stream has finished every task it started. */
static inline void settle_default_stream(void)
{
    wf_stream *s = wf_default_stream();
    wf_stream_synchronize(s);
    wf_stream_release(s);
}

/* Live array nodes once the default stream is idle. */
static inline int64_t live_arrays(void)
{
    settle_default_stream();
    return wf__arrays_live();
}

#endif
