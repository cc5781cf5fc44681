/*
 * How core reaches a node's stream without depending on the runtime
 * (DESIGN section 2: callbacks that go up are function pointers installed
 * at start-up). Internal.
 *
 * A node holds an opaque stream reference. The runtime owns streams and
 * installs these hooks at its start-up (wf__runtime_start, src/runtime/
 * start.c), which runs before the first stream exists. Until then every
 * node gets NULL, which means the default stream: no other stream can be
 * current before one was created.
 */
#ifndef WEFT_CORE_STREAM_HOOKS_H
#define WEFT_CORE_STREAM_HOOKS_H

#include "weft.h"

typedef struct wf_stream_hooks {
    /* This thread's current stream, borrowed; NULL with the error recorded
     * when it cannot be had. */
    wf_stream *(*current)(void);
    wf_stream *(*retain)(wf_stream *s);
    void (*release)(wf_stream *s);
} wf_stream_hooks;

/* Installs the hooks (`hooks` must live forever). Called once, by the
 * runtime's start-up. */
void wf__stream_hooks_install(const wf_stream_hooks *hooks);

/* A new reference to this thread's current stream for a node into *out:
 * NULL (the default stream) before the runtime started. Fails only when the
 * runtime cannot provide one (error recorded). */
wf_status wf__node_stream_take(wf_stream **out);
/* Drops a reference taken by wf__node_stream_take (NULL does nothing). */
void wf__node_stream_drop(wf_stream *s);

#endif
