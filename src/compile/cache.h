/*
 * The shared compile cache (DESIGN section 5, contract C5 and C9). Internal.
 *
 * One process-wide map from a key to an entry. A key is an opaque byte
 * string built by compile (function id, device id, mode, per-input dtype,
 * rank and shape, constants); it never holds an address. Entries are
 * refcounted: the map holds one reference while the entry is listed, each
 * call in flight holds one. An entry is TRACING (its first caller traces
 * with no lock held; later callers wait on the entry), READY (replayed) or
 * FAILED (removed from the map at once, so a later call may retry).
 *
 * A wait is bounded (wf__cache_set_wait_timeout): a waiter still waiting
 * at the bound traces for itself, so a waiter holding a user lock that the
 * trace needs cannot hang it. The first trace published settles the entry
 * (and wakes the other waiters); a later one serves only its own call.
 *
 * Locks: the map is level 10 (lookup, insert, erase, eviction only), an
 * entry is level 20 (its state and waiters). Nothing here calls user code;
 * a trace's destructor runs after every lock is released.
 */
#ifndef WEFT_COMPILE_CACHE_H
#define WEFT_COMPILE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weft.h"

typedef struct wf_cache_entry wf_cache_entry;

/* How a lookup ended, for the caller's per-function statistics. */
enum wf_cache_outcome {
    WF_CACHE_HIT,    /* a READY entry */
    WF_CACHE_WAITED, /* another thread was tracing it; it is READY now */
    WF_CACHE_TRACE,  /* a new TRACING entry: the caller must trace and publish */
    WF_CACHE_TIMED_OUT, /* waited the bound for another thread's trace: the caller
                           traces for itself and publishes (or just releases) */
    WF_CACHE_FAILED  /* the awaited trace failed (error recorded) or misuse */
};

/* Finds or creates the entry for `key` (`key_bytes` bytes) of function
 * `fn_id`. On WF_CACHE_HIT / WF_CACHE_WAITED *entry is a READY entry held
 * for the caller; on WF_CACHE_TRACE a TRACING entry the caller must pass to
 * wf__cache_publish or wf__cache_fail; on WF_CACHE_TIMED_OUT the entry
 * another thread is still tracing, which the caller passes to
 * wf__cache_publish once its own trace is made, or (its trace failed) to
 * wf__cache_release: the other trace may yet succeed, so a timed-out
 * caller never fails the entry; on WF_CACHE_FAILED nothing is held
 * and this thread's last error says why. If the entry is being traced by
 * another thread and `may_wait` is false (inside a kernel or a payload
 * destructor) the call fails with WF_ERR_MISUSE instead of waiting.
 * A miss on a function that has other entries copies the most recently used
 * one's key into *previous_key (malloc'd, caller frees; NULL otherwise) so
 * compile can say why it retraced. */
enum wf_cache_outcome wf__cache_acquire(uint64_t fn_id, const void *key, size_t key_bytes,
                                        bool may_wait, wf_cache_entry **entry,
                                        void **previous_key, size_t *previous_key_bytes);
/* TRACING -> READY with `trace` (owned by the entry from now on, freed by
 * `trace_free` when the entry's last reference goes); wakes the waiters;
 * returns true. If another tracer settled the entry first (a timed-out
 * waiter, or the tracer it gave up on), the entry keeps that outcome and
 * this returns false: `trace` stays the caller's, to replay and free.
 * The caller still holds its reference either way. */
bool wf__cache_publish(wf_cache_entry *entry, void *trace, void (*trace_free)(void *trace));
/* TRACING -> FAILED: removes the entry from the map, wakes the waiters (they
 * get `status` and `message`), and drops the caller's reference. For the
 * entry's first tracer only (WF_CACHE_TRACE). An entry a timed-out waiter
 * has published meanwhile stays READY; only the reference is dropped. */
void wf__cache_fail(wf_cache_entry *entry, wf_status status, const char *message);
/* The trace of a READY entry (borrowed while the entry is held). */
void *wf__cache_trace(const wf_cache_entry *entry);
/* Drops a reference; the last one frees the entry and its trace. */
void wf__cache_release(wf_cache_entry *entry);

/* Removes every entry of `fn_id` from the map (entries held by calls in
 * flight live on until those calls end). Returns how many were removed. */
size_t wf__cache_erase_function(uint64_t fn_id);

/* Limits: at most `per_function` entries per function and `total` in all
 * (0 = unlimited); the least recently used READY entries beyond a limit are
 * evicted. Applies to later inserts and evicts at once. */
void wf__cache_set_limits(size_t per_function, size_t total);
void wf__cache_get_limits(size_t *per_function, size_t *total);

/* The bound on a wait for another thread's trace, process-wide: `seconds`
 * >= 0, or INFINITY (anything above WF_CACHE_WAIT_FOREVER_SECONDS) for no
 * bound. The caller checks the value. Applies to waits that start later.
 * Until set, WEFT_COMPILE_WAIT_TIMEOUT (seconds) from the environment, or
 * WF_CACHE_DEFAULT_WAIT_SECONDS. */
#define WF_CACHE_DEFAULT_WAIT_SECONDS 1.0
#define WF_CACHE_WAIT_FOREVER_SECONDS 1e9
void wf__cache_set_wait_timeout(double seconds);
double wf__cache_get_wait_timeout(void); /* INFINITY when unbounded */

/* Global counters since start (or the last reset). timeout_traces: traces
 * made by waiters that reached the wait bound (also counted in traces). */
typedef struct wf_cache_counters {
    uint64_t hits, misses, traces, waits, evictions, erases, failures, timeout_traces;
    uint64_t entries; /* listed now */
} wf_cache_counters;
void wf__cache_counters(wf_cache_counters *out);
/* Evictions of `fn_id`'s entries since its first entry (for its statistics). */
uint64_t wf__cache_function_evictions(uint64_t fn_id);
/* Number of entries of `fn_id` listed now. */
size_t wf__cache_function_entries(uint64_t fn_id);

#endif
