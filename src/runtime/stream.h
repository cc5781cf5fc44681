/*
 * Streams (DESIGN section 3). Internal.
 *
 * A stream is a FIFO of nodes to compute, served by its worker thread or by
 * a thread waiting in wf_eval that holds the stream's execution token (at
 * most one thread runs a stream's tasks at a time, in FIFO order).
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

/* Appends CLAIMED `node` to the FIFO and publishes SUBMITTED while the queue
 * is locked (so nothing waits on it before it is queued). The queue takes a
 * node reference. The worker is not woken: call wf__stream_kick. */
void wf__stream_enqueue(wf_stream *s, wf_array *node);
/* Wakes the worker if there is queued work and nobody runs the stream. */
void wf__stream_kick(wf_stream *s);
/* Runs queued tasks of `s` on this thread, in FIFO order, while nobody else
 * holds the execution token, until `node` is READY or FAILED; then waits for
 * it. */
void wf__stream_help_until_done(wf_stream *s, wf_array *node);

#endif
