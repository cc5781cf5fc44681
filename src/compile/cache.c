/*
 * The shared compile cache: hashed buckets of refcounted entries, one LRU
 * list over all entries and one per function, single-flight tracing.
 *
 * Every list and count below is guarded by the map lock (level 10), which
 * is held only for lookups, inserts, erases and evictions. An entry's state
 * and its waiters are guarded by the entry's own lock (level 20); a waiter
 * holds a reference and no map lock while it waits. Traces are freed after
 * every lock is released (they own arrays, whose destructors are user code).
 *
 * A wait ends at a bound (default 1 s) even if the trace has not: a thread
 * that holds a user lock and waits for a trace whose body takes that lock
 * would otherwise wait forever. The waiter then traces for itself on the
 * same entry; whichever of the two traces is published first settles it.
 * Waits use CLOCK_MONOTONIC, so a change of the wall clock never moves
 * the bound.
 *
 * fork(): the map and every listed entry are held across it. In the child,
 * an entry still TRACING has lost its tracer (only the forking thread
 * survives, and it was not tracing: it called fork()), so it fails with an
 * error and leaves the map; the next call traces again in the child.
 */
#include "compile/cache.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "util/fork.h"
#include "util/lock.h"
#include "util/fault.h"

enum entry_state { ENTRY_TRACING, ENTRY_READY, ENTRY_FAILED };

struct fn_record;

struct wf_cache_entry {
    atomic_int_fast64_t refcount;
    wf_mutex lock; /* level 20: state, error, trace */
    pthread_cond_t settled;
    enum entry_state state;
    wf_status error;
    char *error_message;
    void *trace;
    void (*trace_free)(void *);

    /* Guarded by the map lock. */
    bool listed;
    uint64_t hash;
    struct fn_record *record;
    wf_cache_entry *bucket_next;
    wf_cache_entry *lru_prev, *lru_next; /* all entries, most recent first */
    wf_cache_entry *fn_prev, *fn_next;   /* this function's, most recent first */
    wf_cache_entry *dropped_next;        /* on a list to release after unlocking */
    size_t key_bytes;
    unsigned char key[]; /* key_bytes */
};

/* Per function: its entries and eviction count, until the function is erased. */
struct fn_record {
    uint64_t fn_id;
    struct fn_record *next; /* bucket chain */
    wf_cache_entry *first;
    size_t count;
    uint64_t evictions;
};

enum { INITIAL_BUCKETS = 64, FN_BUCKETS = 256 };

static struct {
    wf_mutex lock; /* level 10 */
    wf_cache_entry **buckets;
    size_t nbuckets, count;
    wf_cache_entry *lru_first, *lru_last;
    struct fn_record *fns[FN_BUCKETS];
    size_t limit_per_function, limit_total;
} map = {.lock = {PTHREAD_MUTEX_INITIALIZER, WF_LOCK_COMPILE_MAP}};

/* Counters are atomics so a hit never takes the map lock a second time. */
static struct {
    atomic_uint_fast64_t hits, misses, traces, waits, evictions, erases, failures,
        timeout_traces;
} counts;

/* The wait bound in nanoseconds; WAIT_FOREVER for none, WAIT_UNSET until
 * the environment has been read. */
enum { WAIT_UNSET = -2, WAIT_FOREVER = -1 };
static atomic_int_fast64_t wait_bound_ns = WAIT_UNSET;

static void count(atomic_uint_fast64_t *counter, uint64_t n)
{
    atomic_fetch_add_explicit(counter, n, memory_order_relaxed);
}

/* ------------------------------------------------------------ the wait bound */

static int64_t seconds_to_bound(double seconds)
{
    if (seconds > WF_CACHE_WAIT_FOREVER_SECONDS)
        return WAIT_FOREVER;
    return (int64_t)(seconds * 1e9);
}

/* WEFT_COMPILE_WAIT_TIMEOUT=<seconds>; unset or not a number >= 0: the default. */
static int64_t bound_from_environment(void)
{
    const char *env = getenv("WEFT_COMPILE_WAIT_TIMEOUT");
    char *end = NULL;
    double seconds = env ? strtod(env, &end) : NAN;
    if (!env || end == env || *end != '\0' || !(seconds >= 0))
        seconds = WF_CACHE_DEFAULT_WAIT_SECONDS;
    return seconds_to_bound(seconds);
}

static int64_t wait_bound(void)
{
    int64_t bound = atomic_load(&wait_bound_ns);
    if (bound != WAIT_UNSET)
        return bound;
    int64_t expected = WAIT_UNSET;
    atomic_compare_exchange_strong(&wait_bound_ns, &expected, bound_from_environment());
    return atomic_load(&wait_bound_ns);
}

void wf__cache_set_wait_timeout(double seconds)
{
    atomic_store(&wait_bound_ns, seconds_to_bound(seconds));
}

double wf__cache_get_wait_timeout(void)
{
    int64_t bound = wait_bound();
    return bound == WAIT_FOREVER ? INFINITY : (double)bound / 1e9;
}

static struct timespec deadline_after(int64_t ns)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    int64_t nsec = t.tv_nsec + ns % 1000000000;
    t.tv_sec += (time_t)(ns / 1000000000 + nsec / 1000000000);
    t.tv_nsec = (long)(nsec % 1000000000);
    return t;
}

/* ------------------------------------------------------------ entries */

/* Entries' condition variables time their waits on the monotonic clock. */
static void settled_init(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
}

static uint64_t key_hash(uint64_t fn_id, const void *key, size_t n)
{
    uint64_t h = 0xcbf29ce484222325u ^ fn_id; /* FNV-1a, seeded by the id */
    const unsigned char *bytes = key;
    for (size_t i = 0; i < n; i++)
        h = (h ^ bytes[i]) * 0x100000001b3u;
    return h ^ (h >> 29);
}

static wf_cache_entry *entry_new(const void *key, size_t key_bytes, uint64_t hash)
{
    wf_cache_entry *e = wf__calloc(1, sizeof *e + key_bytes);
    if (!e)
        return NULL;
    atomic_init(&e->refcount, 1);
    wf__mutex_init(&e->lock, WF_LOCK_CACHE_ENTRY);
    settled_init(&e->settled);
    e->state = ENTRY_TRACING;
    e->hash = hash;
    e->key_bytes = key_bytes;
    memcpy(e->key, key, key_bytes);
    return e;
}

static void entry_free(wf_cache_entry *e)
{
    if (e->trace && e->trace_free)
        e->trace_free(e->trace);
    free(e->error_message);
    pthread_cond_destroy(&e->settled);
    wf__mutex_destroy(&e->lock);
    free(e);
}

void wf__cache_release(wf_cache_entry *e)
{
    if (e && atomic_fetch_sub_explicit(&e->refcount, 1, memory_order_acq_rel) == 1)
        entry_free(e);
}

static wf_cache_entry *entry_retain(wf_cache_entry *e)
{
    atomic_fetch_add_explicit(&e->refcount, 1, memory_order_relaxed);
    return e;
}

void *wf__cache_trace(const wf_cache_entry *e) { return e->trace; }

/* ------------------------------------------------------------ map internals (map lock held) */

static struct fn_record **fn_slot(uint64_t fn_id)
{
    struct fn_record **slot = &map.fns[(fn_id * 0x9e3779b97f4a7c15u) >> 56];
    while (*slot && (*slot)->fn_id != fn_id)
        slot = &(*slot)->next;
    return slot;
}

static struct fn_record *fn_record_get(uint64_t fn_id, bool create)
{
    struct fn_record **slot = fn_slot(fn_id);
    if (*slot || !create)
        return *slot;
    struct fn_record *r = wf__calloc(1, sizeof *r);
    if (r) {
        r->fn_id = fn_id;
        *slot = r;
    }
    return r;
}

static void lru_unlink(wf_cache_entry *e)
{
    if (e->lru_prev)
        e->lru_prev->lru_next = e->lru_next;
    else
        map.lru_first = e->lru_next;
    if (e->lru_next)
        e->lru_next->lru_prev = e->lru_prev;
    else
        map.lru_last = e->lru_prev;
    e->lru_prev = e->lru_next = NULL;
    struct fn_record *r = e->record;
    if (e->fn_prev)
        e->fn_prev->fn_next = e->fn_next;
    else
        r->first = e->fn_next;
    if (e->fn_next)
        e->fn_next->fn_prev = e->fn_prev;
    e->fn_prev = e->fn_next = NULL;
}

static void lru_push_front(wf_cache_entry *e)
{
    e->lru_next = map.lru_first;
    if (map.lru_first)
        map.lru_first->lru_prev = e;
    map.lru_first = e;
    if (!map.lru_last)
        map.lru_last = e;
    struct fn_record *r = e->record;
    e->fn_next = r->first;
    if (r->first)
        r->first->fn_prev = e;
    r->first = e;
}

static wf_cache_entry **bucket_of(uint64_t hash) { return &map.buckets[hash & (map.nbuckets - 1)]; }

static wf_cache_entry *bucket_find(uint64_t hash, const void *key, size_t key_bytes)
{
    for (wf_cache_entry *e = *bucket_of(hash); e; e = e->bucket_next)
        if (e->hash == hash && e->key_bytes == key_bytes && memcmp(e->key, key, key_bytes) == 0)
            return e;
    return NULL;
}

/* Doubles the bucket array when the load passes 1 (no-op if memory is short). */
static void maybe_grow(void)
{
    if (map.count < map.nbuckets)
        return;
    size_t grown = map.nbuckets * 2;
    wf_cache_entry **buckets = wf__calloc(grown, sizeof *buckets);
    if (!buckets)
        return;
    for (size_t i = 0; i < map.nbuckets; i++) {
        wf_cache_entry *e = map.buckets[i];
        while (e) {
            wf_cache_entry *next = e->bucket_next;
            e->bucket_next = buckets[e->hash & (grown - 1)];
            buckets[e->hash & (grown - 1)] = e;
            e = next;
        }
    }
    free(map.buckets);
    map.buckets = buckets;
    map.nbuckets = grown;
}

/* Takes `e` out of the map; returns the map's reference for the caller to
 * drop once the map lock is released. */
static wf_cache_entry *unlist(wf_cache_entry *e)
{
    wf_cache_entry **link = bucket_of(e->hash);
    while (*link != e)
        link = &(*link)->bucket_next;
    *link = e->bucket_next;
    e->bucket_next = NULL;
    lru_unlink(e);
    e->record->count--;
    e->listed = false;
    map.count--;
    return e;
}

/* Entries taken out of the map, released once the map lock is dropped (a
 * release may free a trace, and with it arrays whose destructors are user
 * code). Linked through the entries: adding never allocates. */
struct dropped {
    wf_cache_entry *first;
};

static void dropped_add(struct dropped *d, wf_cache_entry *e)
{
    e->dropped_next = d->first;
    d->first = e;
}

static void dropped_release(struct dropped *d)
{
    while (d->first) {
        wf_cache_entry *e = d->first;
        d->first = e->dropped_next;
        wf__cache_release(e);
    }
}

/* The least recently used entry of a list that is not being traced. */
static wf_cache_entry *oldest_settled(wf_cache_entry *last, bool per_function)
{
    for (wf_cache_entry *e = last; e; e = per_function ? e->fn_prev : e->lru_prev) {
        wf__mutex_lock(&e->lock);
        bool tracing = e->state == ENTRY_TRACING;
        wf__mutex_unlock(&e->lock);
        if (!tracing)
            return e;
    }
    return NULL;
}

static wf_cache_entry *fn_last(struct fn_record *r)
{
    wf_cache_entry *e = r->first;
    while (e && e->fn_next)
        e = e->fn_next;
    return e;
}

static void evict(wf_cache_entry *e, struct dropped *d)
{
    e->record->evictions++;
    count(&counts.evictions, 1);
    dropped_add(d, unlist(e));
}

/* Evicts beyond the limits, oldest first, never an entry being traced. */
static void enforce_limits(struct fn_record *r, struct dropped *d)
{
    while (r && map.limit_per_function && r->count > map.limit_per_function) {
        wf_cache_entry *victim = oldest_settled(fn_last(r), true);
        if (!victim)
            break;
        evict(victim, d);
    }
    while (map.limit_total && map.count > map.limit_total) {
        wf_cache_entry *victim = oldest_settled(map.lru_last, false);
        if (!victim)
            break;
        evict(victim, d);
    }
}

static bool map_ready(void)
{
    if (map.buckets)
        return true;
    map.buckets = wf__calloc(INITIAL_BUCKETS, sizeof *map.buckets);
    map.nbuckets = map.buckets ? INITIAL_BUCKETS : 0;
    return map.buckets != NULL;
}

/* ------------------------------------------------------------ lookups */

static void copy_previous_key(struct fn_record *r, void **out, size_t *out_bytes)
{
    if (!r || !r->first)
        return;
    void *copy = wf__malloc(r->first->key_bytes ? r->first->key_bytes : 1);
    if (!copy)
        return;
    memcpy(copy, r->first->key, r->first->key_bytes);
    *out = copy;
    *out_bytes = r->first->key_bytes;
}

/* Waits for a TRACING entry to settle, at most the wait bound; returns its
 * outcome, WF_CACHE_TIMED_OUT if it is still TRACING (entry held). */
static enum wf_cache_outcome wait_settled(wf_cache_entry *e)
{
    int64_t bound = wait_bound();
    struct timespec deadline = bound == WAIT_FOREVER ? (struct timespec){0} : deadline_after(bound);
    bool timed_out = false;
    wf__mutex_lock(&e->lock);
    while (e->state == ENTRY_TRACING && !timed_out) {
        if (bound == WAIT_FOREVER)
            wf__cond_wait(&e->settled, &e->lock);
        else
            timed_out = wf__cond_timedwait(&e->settled, &e->lock, &deadline) == ETIMEDOUT;
    }
    enum entry_state state = e->state;
    if (state == ENTRY_FAILED)
        wf__error(e->error, "%s", e->error_message ? e->error_message : "the trace failed");
    wf__mutex_unlock(&e->lock);
    if (state == ENTRY_TRACING)
        return WF_CACHE_TIMED_OUT;
    return state == ENTRY_READY ? WF_CACHE_WAITED : WF_CACHE_FAILED;
}

enum wf_cache_outcome wf__cache_acquire(uint64_t fn_id, const void *key, size_t key_bytes,
                                        bool may_wait, wf_cache_entry **entry,
                                        void **previous_key, size_t *previous_key_bytes)
{
    *entry = NULL;
    if (previous_key) {
        *previous_key = NULL;
        *previous_key_bytes = 0;
    }
    uint64_t hash = key_hash(fn_id, key, key_bytes);
    struct dropped dropped = {0};

    wf__mutex_lock(&map.lock);
    wf_cache_entry *e = map_ready() ? bucket_find(hash, key, key_bytes) : NULL;
    if (e) {
        lru_unlink(e);
        lru_push_front(e);
        entry_retain(e);
        wf__mutex_unlock(&map.lock);
        wf__mutex_lock(&e->lock);
        enum entry_state state = e->state;
        wf__mutex_unlock(&e->lock);
        if (state == ENTRY_READY) {
            count(&counts.hits, 1);
            *entry = e;
            return WF_CACHE_HIT;
        }
        if (!may_wait) {
            wf__cache_release(e);
            wf__error(WF_ERR_MISUSE, "a compiled function cannot wait for another thread's "
                                     "trace inside a kernel or a payload destructor");
            return WF_CACHE_FAILED;
        }
        count(&counts.waits, 1);
        enum wf_cache_outcome outcome = wait_settled(e);
        if (outcome == WF_CACHE_TIMED_OUT) {
            count(&counts.misses, 1);
            count(&counts.traces, 1);
            count(&counts.timeout_traces, 1);
        } else if (outcome != WF_CACHE_WAITED) {
            wf__cache_release(e);
            return outcome;
        }
        *entry = e;
        return outcome;
    }

    struct fn_record *r = map.buckets ? fn_record_get(fn_id, true) : NULL;
    e = r ? entry_new(key, key_bytes, hash) : NULL;
    if (!e) {
        wf__mutex_unlock(&map.lock);
        wf__error(WF_ERR_OUT_OF_MEMORY, "compile: out of memory adding a cache entry");
        return WF_CACHE_FAILED;
    }
    if (previous_key)
        copy_previous_key(r, previous_key, previous_key_bytes);
    e->record = r;
    e->listed = true;
    wf_cache_entry **bucket = bucket_of(hash);
    e->bucket_next = *bucket;
    *bucket = e;
    lru_push_front(e);
    r->count++;
    map.count++;
    count(&counts.misses, 1);
    count(&counts.traces, 1);
    maybe_grow();
    enforce_limits(r, &dropped);
    *entry = entry_retain(e); /* the map's reference plus the caller's */
    wf__mutex_unlock(&map.lock);
    dropped_release(&dropped);
    return WF_CACHE_TRACE;
}

bool wf__cache_publish(wf_cache_entry *e, void *trace, void (*trace_free)(void *))
{
    wf__mutex_lock(&e->lock);
    bool first = e->state == ENTRY_TRACING;
    if (first) {
        e->trace = trace;
        e->trace_free = trace_free;
        e->state = ENTRY_READY;
        pthread_cond_broadcast(&e->settled);
    }
    wf__mutex_unlock(&e->lock);
    if (!first)
        return false;
    /* An eviction may have been held back while this entry was tracing. */
    struct dropped dropped = {0};
    wf__mutex_lock(&map.lock);
    if (e->listed)
        enforce_limits(e->record, &dropped);
    wf__mutex_unlock(&map.lock);
    dropped_release(&dropped);
    return true;
}

/* The map lock is held around the state change so that no caller finds a
 * FAILED entry listed, nor a timed-out waiter's READY entry unlisted. */
void wf__cache_fail(wf_cache_entry *e, wf_status status, const char *message)
{
    wf_cache_entry *map_reference = NULL;
    char *message_copy = message ? wf__strdup(message) : NULL;
    count(&counts.failures, 1);
    wf__mutex_lock(&map.lock);
    wf__mutex_lock(&e->lock);
    bool failed_here = e->state == ENTRY_TRACING;
    if (failed_here) {
        e->error = status;
        e->error_message = message_copy;
        e->state = ENTRY_FAILED;
        pthread_cond_broadcast(&e->settled);
        if (e->listed)
            map_reference = unlist(e);
    }
    wf__mutex_unlock(&e->lock);
    wf__mutex_unlock(&map.lock);
    if (!failed_here)
        free(message_copy);
    wf__cache_release(map_reference);
    wf__cache_release(e);
}

/* ------------------------------------------------------------ erase, limits, counters */

size_t wf__cache_erase_function(uint64_t fn_id)
{
    struct dropped dropped = {0};
    size_t removed = 0;
    wf__mutex_lock(&map.lock);
    struct fn_record **slot = fn_slot(fn_id);
    struct fn_record *r = *slot;
    if (r) {
        while (r->first) {
            dropped_add(&dropped, unlist(r->first));
            removed++;
        }
        *slot = r->next;
        count(&counts.erases, removed);
    }
    wf__mutex_unlock(&map.lock);
    free(r);
    dropped_release(&dropped);
    return removed;
}

void wf__cache_set_limits(size_t per_function, size_t total)
{
    struct dropped dropped = {0};
    wf__mutex_lock(&map.lock);
    map.limit_per_function = per_function;
    map.limit_total = total;
    for (size_t i = 0; i < FN_BUCKETS; i++)
        for (struct fn_record *r = map.fns[i]; r; r = r->next)
            enforce_limits(r, &dropped);
    wf__mutex_unlock(&map.lock);
    dropped_release(&dropped);
}

void wf__cache_get_limits(size_t *per_function, size_t *total)
{
    wf__mutex_lock(&map.lock);
    *per_function = map.limit_per_function;
    *total = map.limit_total;
    wf__mutex_unlock(&map.lock);
}

void wf__cache_counters(wf_cache_counters *out)
{
    out->hits = atomic_load(&counts.hits);
    out->misses = atomic_load(&counts.misses);
    out->traces = atomic_load(&counts.traces);
    out->waits = atomic_load(&counts.waits);
    out->evictions = atomic_load(&counts.evictions);
    out->erases = atomic_load(&counts.erases);
    out->failures = atomic_load(&counts.failures);
    out->timeout_traces = atomic_load(&counts.timeout_traces);
    wf__mutex_lock(&map.lock);
    out->entries = map.count;
    wf__mutex_unlock(&map.lock);
}

uint64_t wf__cache_function_evictions(uint64_t fn_id)
{
    wf__mutex_lock(&map.lock);
    struct fn_record *r = fn_record_get(fn_id, false);
    uint64_t n = r ? r->evictions : 0;
    wf__mutex_unlock(&map.lock);
    return n;
}

size_t wf__cache_function_entries(uint64_t fn_id)
{
    wf__mutex_lock(&map.lock);
    struct fn_record *r = fn_record_get(fn_id, false);
    size_t n = r ? r->count : 0;
    wf__mutex_unlock(&map.lock);
    return n;
}

/* ------------------------------------------------------------ fork */

static void fork_prepare(void)
{
    wf__mutex_lock_for_fork(&map.lock);
    for (wf_cache_entry *e = map.lru_first; e; e = e->lru_next)
        wf__mutex_lock_for_fork(&e->lock);
}

static void fork_parent(void)
{
    for (wf_cache_entry *e = map.lru_first; e; e = e->lru_next)
        wf__mutex_unlock_for_fork(&e->lock);
    wf__mutex_unlock_for_fork(&map.lock);
}

static const char orphaned_trace_message[] =
    "compile: the trace was in flight in the parent at fork(); its thread does not exist "
    "in the child";

/* Alone in the child: wakes nobody (no waiter survived), fails and unlists
 * entries whose tracer is gone. The map's references are dropped after
 * unlocking; the tracer's own reference is leaked, so none of them frees. */
static void fork_child(void)
{
    struct dropped dropped = {0};
    for (wf_cache_entry *e = map.lru_first, *next; e; e = next) {
        next = e->lru_next;
        settled_init(&e->settled);
        if (e->state == ENTRY_TRACING) {
            e->state = ENTRY_FAILED;
            e->error = WF_ERR_KERNEL;
            e->error_message = wf__strdup(orphaned_trace_message);
            count(&counts.failures, 1);
            dropped_add(&dropped, unlist(e));
        }
        wf__mutex_unlock_for_fork(&e->lock);
    }
    wf__mutex_unlock_for_fork(&map.lock);
    dropped_release(&dropped);
}

static const wf_fork_hooks fork_hooks = {
    .level = WF_LOCK_COMPILE_MAP, .prepare = fork_prepare, .parent = fork_parent, .child = fork_child};

static void register_fork_hooks(void) __attribute__((constructor));
static void register_fork_hooks(void) { wf__fork_hooks_register(&fork_hooks); }
