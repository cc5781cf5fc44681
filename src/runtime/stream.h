/*
 * Streams (DESIGN section 3). Internal.
 *
 * A stream is a FIFO of nodes queued by wf_async_eval, served in order by
 * its worker thread or by a thread that waits for one of them and helps
 * (the execution token: one thread at a time runs a stream's FIFO). A
 * synchronous wf_eval runs the nodes it claimed itself, without the token;
 * it registers a batch on their streams so wf_stream_synchronize covers
 * them too. Each FIFO task has a ticket (queue_seq, from 1); `done` is the
 * ticket of the last finished task (tasks finish in ticket order).
 * Locks: the registry is level 30, each queue level 40.
 */
#ifndef WEFT_RUNTIME_STREAM_H
#define WEFT_RUNTIME_STREAM_H

#include <stdbool.h>

#include "core/array.h"

/* This thread's current stream (borrowed; lives while pushed or forever for
 * the default stream). NULL with the error recorded if the default stream
 * could not be created. */
wf_stream *wf__stream_current(void);
wf_stream *wf__stream_incref(wf_stream *s);
/* The stream node `n` runs on: its own, or the default stream when it has
 * none (built before the runtime started, see core/stream_hooks.h; NULL
 * for arrays made from data). Borrowed. */
wf_stream *wf__stream_of(const wf_array *n);
/* The default stream, created on first use (borrowed); NULL with the error
 * recorded if it could not be created. */
wf_stream *wf__stream_default(void);
/* The device the stream runs on (static). */
wf_device *wf__stream_device(const wf_stream *s);
void wf__stream_decref(wf_stream *s);
/* The stream's id: from a 64-bit counter, never reused, never 0. */
uint64_t wf__stream_id(const wf_stream *s);

/* Appends CLAIMED `node` to the FIFO with the next ticket and publishes
 * SUBMITTED while the queue is locked (so nothing waits on it before it is
 * queued). The queue takes a node reference. The worker is not woken: call
 * wf__stream_kick. */
void wf__stream_enqueue(wf_stream *s, wf_array *node);
/* Wakes the worker if there is queued work and nobody runs the stream. */
void wf__stream_kick(wf_stream *s);
/* Returns once the FIFO task with ticket `ticket` has finished: kernel run,
 * READY or FAILED published and the queue's reference dropped. Meanwhile
 * runs queued tasks up to that ticket on this thread whenever nobody holds
 * the token. */
void wf__stream_wait_task(wf_stream *s, uint64_t ticket);

/* A synchronous evaluation running nodes of a stream on its own thread,
 * from before it publishes the first of them SUBMITTED until the last has
 * run. Lives on the evaluating thread's stack. */
typedef struct wf_stream_batch {
    struct wf_stream_batch *prev, *next;
    uint64_t seq;
} wf_stream_batch;
void wf__stream_batch_open(wf_stream *s, wf_stream_batch *batch);
void wf__stream_batch_close(wf_stream *s, wf_stream_batch *batch);

/* Hides this thread's pushed streams from code run on behalf of another
 * thread (kernels, payload destructors): until the matching resume its
 * current stream is the default stream. Returns what resume needs. */
void *wf__stream_push_suspend(void);
/* Releases streams the hidden code left pushed, then shows the saved ones. */
void wf__stream_push_resume(void *saved);

#endif
