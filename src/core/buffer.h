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
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weft.h"

enum wf_buffer_flags {
    /* Caller-owned memory (wf_array_from_external): never written, reused,
     * cached or donated by weft; only aligned for its dtype. */
    WF_BUFFER_EXTERNAL = 1u << 0
};

/* Something a kernel derives from a buffer's contents and keeps with the
 * buffer for its later reads (backend/cpu/gemm.c's packed copy of a
 * weight). The deriving code embeds it first in its own struct. `drop`
 * frees it, once, with no weft lock held, when the contents end: at the
 * buffer's last release, or before a donation overwrites them. It must not
 * touch the buffer it was derived from. */
typedef struct wf_buffer_derived {
    void (*drop)(struct wf_buffer_derived *self);
} wf_buffer_derived;

typedef struct wf_buffer {
    atomic_size_t refcount;
    void *data;      /* 64-byte aligned (external: dtype aligned); never NULL */
    size_t bytes;    /* what was asked for */
    size_t capacity; /* what was reserved (counted in the stats; 0 if external) */
    unsigned flags;  /* enum wf_buffer_flags */
    /* NULL, or set once by wf__buffer_attach_derived until the contents end. */
    _Atomic(wf_buffer_derived *) derived;
    /* The deriving code's own note, e.g. a fingerprint of the last use that
     * could have derived something (0 for fresh contents). */
    atomic_uint_fast64_t derived_hint;
} wf_buffer;

/* A new buffer of at least `bytes` (refcount 1). On failure returns NULL and
 * records WF_ERR_OUT_OF_MEMORY (limit reached or system out of memory). */
wf_buffer *wf__buffer_alloc(size_t bytes);
wf_buffer *wf__buffer_retain(wf_buffer *b);
/* Drops a reference; the last one returns the memory to the cache (an
 * external buffer calls its deleter instead, with no lock held). */
void wf__buffer_release(wf_buffer *b);

/* A buffer (refcount 1) over caller-owned memory: `bytes` from `data` (NULL
 * only when bytes is 0). The last release calls deleter(owner_data, ctx) if
 * the deleter is not NULL. Counts nothing in the stats. NULL with
 * WF_ERR_OUT_OF_MEMORY if the header cannot be allocated (the deleter is not
 * called). */
wf_buffer *wf__buffer_wrap_external(void *data, size_t bytes, void (*deleter)(void *, void *),
                                    void *owner_data, void *ctx);
/* Frees an external buffer that was never shared (refcount 1) without
 * calling its deleter: for constructors that fail after wrapping. */
void wf__buffer_discard_external(wf_buffer *b);
/* True for caller-owned memory. Any code that writes into an input's buffer
 * (in-place ops, donation) must check this first and never do it then. */
bool wf__buffer_is_external(const wf_buffer *b);

/* Derived data (see wf_buffer_derived). Readers hold a reference to `b`,
 * and weft writes a buffer only when nobody else holds it (donation), so
 * what they read stays valid and current while they hold it. */
/* Attaches `d` to b's current contents; false if something is attached
 * already or b is external (caller memory may change behind weft's back):
 * the caller still owns `d` then. */
bool wf__buffer_attach_derived(wf_buffer *b, wf_buffer_derived *d);
/* What is attached to b's contents, or NULL. */
wf_buffer_derived *wf__buffer_derived(wf_buffer *b);
/* Drops what was derived from b's contents and clears the hint; for a
 * buffer nobody else holds, before its contents are overwritten. */
void wf__buffer_forget_derived(wf_buffer *b);
/* The protocol of derived copies kept for later reads (the GEMM's packed
 * weights, the quantized matvec's interleaved copies): what is attached to
 * b's contents (the caller checks it is its own kind and key), or, with
 * nothing attached, make(ctx) at the second call with the same nonzero
 * `fingerprint` (naming what and how it derives; one use is not worth a
 * copy), attached (another thread's, if it came first, is kept and the
 * new one dropped); NULL otherwise. A fingerprint whose make returned
 * NULL is not asked again for these contents. make runs with no weft lock
 * held; external buffers never get one. */
wf_buffer_derived *wf__buffer_derive_at_second_use(wf_buffer *b, uint64_t fingerprint,
                                                   wf_buffer_derived *(*make)(void *ctx),
                                                   void *ctx);
/* A derived copy's header (`header_size` bytes, uninitialized) and, in
 * *storage, a buffer of `bytes` for its data, the bytes counted in *held
 * (what its kind keeps). NULL, with nothing counted and no error left
 * recorded, when the copy may not be kept or memory runs out: *held would
 * pass `budget`, or under a memory limit its kind would pass a quarter of
 * it or active memory half (a speed-up must not make the program's own
 * allocations fail). */
void *wf__derived_copy_alloc(atomic_size_t *held, size_t budget, size_t header_size,
                             size_t bytes, wf_buffer **storage);
/* Frees what wf__derived_copy_alloc gave (for a drop function), uncounting `bytes`. */
void wf__derived_copy_free(atomic_size_t *held, void *header, wf_buffer *storage, size_t bytes);

#endif
