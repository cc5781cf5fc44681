/*
 * Buffers and the allocator (DESIGN section 4, lock level 60).
 *
 * A buffer is a refcounted block of memory shared by an array and its views.
 * Freed buffers go to a size-class cache for reuse (fresh pages are slow);
 * large ones use transparent huge pages. Counters and the memory limit are
 * process-wide. Thread-safe.
 */
#ifndef WEFT_CORE_BUFFER_H
#define WEFT_CORE_BUFFER_H

#include <stdatomic.h>
#include <stddef.h>

#include "weft.h"

typedef struct wf_buffer {
    atomic_size_t refcount;
    void *data;      /* 64-byte aligned; never NULL, even for 0 bytes */
    size_t bytes;    /* what was asked for */
    size_t capacity; /* what was reserved (counted in the stats) */
} wf_buffer;

/* A new buffer of at least `bytes` (refcount 1). On failure returns NULL and
 * records WF_ERR_OUT_OF_MEMORY (limit reached or system out of memory). */
wf_buffer *wf__buffer_alloc(size_t bytes);
wf_buffer *wf__buffer_retain(wf_buffer *b);
/* Drops a reference; the last one returns the memory to the cache. */
void wf__buffer_release(wf_buffer *b);

#endif
