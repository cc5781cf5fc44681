/*
 * The buffer allocator (DESIGN section 4, lock level 60).
 *
 * Size classes. A request of n bytes (n >= 1) gets a capacity c:
 *   - n <= 256:          c = n rounded up to a multiple of 64 (64, 128, 192, 256);
 *                        waste < 64 bytes.
 *   - 256 < n < 2 MiB:   n lies in (2^k, 2^(k+1)]; c = n rounded up to a multiple
 *                        of 2^(k-2), i.e. four classes per power of two
 *                        (320, 384, 448, 512, 640, ...); waste < n/4 (c < 1.25 n).
 *   - n >= 2 MiB:        as above, but the step is at least 2 MiB, so every large
 *                        capacity is a whole number of huge pages (2, 4, 6, 8, 10,
 *                        12, 14, 16, 20, 24, ... MiB); waste < max(2 MiB, n/4).
 * Capacities below 2 MiB come from posix_memalign(64); capacities of 2 MiB and
 * more are mmap'ed on a 2 MiB boundary with madvise(MADV_HUGEPAGE) (a failing
 * madvise is ignored). Data is always 64-byte aligned.
 *
 * Empty buffers. A 0-byte request gets capacity 0 and points at one shared,
 * static, 64-byte aligned 64-byte block (never written: there is nothing to
 * write). They count nothing in the stats and so succeed under any limit,
 * even 0.
 *
 * Headers. Each buffer's wf_buffer header lives in a small separate malloc
 * (struct block below), kept together with its data while cached. Headers are
 * not counted: every counter is in bytes of data capacity.
 *
 * Counters (all guarded by the allocator lock, so exact under concurrency):
 *   active   capacity held by live buffers;
 *   peak     highest active since start or wf_reset_peak_memory;
 *   cached   capacity of freed buffers kept for reuse;
 *   reserved capacity being fetched from the system right now (not yet active;
 *            counted against the limit so concurrent misses cannot overshoot it).
 *
 * Limit. SIZE_MAX (no limit) by default. An allocation that would make
 * active + reserved + cached + capacity exceed the limit first evicts cached
 * buffers (oldest first) and, if it still does not fit, fails with
 * WF_ERR_OUT_OF_MEMORY (the cache is left alone when even an empty cache would
 * not be enough). A limit of 0 makes every non-empty allocation fail.
 * Lowering the limit trims the cache at once; live buffers are never touched.
 * Requests above 2^62 bytes (on 64-bit) fail with WF_ERR_OUT_OF_MEMORY without
 * any size arithmetic that could overflow.
 *
 * Cache. Per-class LIFO free lists (the most recently freed, hottest block is
 * reused first) plus one global age list (oldest first) for eviction. Cached
 * bytes are capped at min(1 GiB, limit / 2, wf_set_cache_limit's value); a
 * freed buffer that alone is larger
 * than the cap goes straight back to the system. Invariant kept by every path:
 * active + reserved + cached <= limit, or the cache is empty. Reused memory is
 * not cleared.
 *
 * Locking. One wf_mutex at WF_LOCK_ALLOCATOR. Nothing is called while it is
 * held except list and counter updates: malloc/free/mmap/munmap and error
 * reporting all happen after unlocking (evicted blocks are collected on a
 * local list and freed afterwards).
 *
 * At exit, cached blocks stay reachable from the static free lists, so leak
 * checkers do not report them; wf_clear_cache returns them to the system.
 *
 * External buffers (wf_array_from_external) wrap caller-owned memory in a
 * header of their own (struct external_block). They never touch the lock,
 * the counters or the cache: their last release calls the owner's deleter
 * with no lock held and frees the header; inside a stream task or an
 * evaluation the deleter is deferred until its thread holds nothing of
 * weft's, as payload destructors are (core/deferred_free.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "core/buffer.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__)
#define WF_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WF_ASAN 1
#endif
#endif
#ifdef WF_ASAN
#include <sanitizer/asan_interface.h>
#endif

#include "core/deferred_free.h"
#include "core/error.h"
#include "core/node_pool.h"
#include "util/fork.h"
#include "util/lock.h"
#include "util/fault.h"

#define MIN_CLASS ((size_t)64)
#define SMALL_LIMIT ((size_t)256)
#define HUGE_PAGE ((size_t)2 << 20)          /* 2 MiB: mmap threshold and granule */
#define CACHE_CAP_MAX ((size_t)1 << 30)      /* 1 GiB */
#define MAX_REQUEST ((SIZE_MAX >> 2) + 1)    /* 2^62 on 64-bit */
#define DATA_ALIGN ((size_t)64)

/* Classes: 4 for 64..256, then 4 per power of two up to MAX_REQUEST. */
#define SIZE_BITS ((unsigned)(sizeof(size_t) * 8))
#define NUM_CLASSES (4u + (SIZE_BITS - 2u - 8u) * 4u)

typedef struct block {
    wf_buffer buf; /* first member: a wf_buffer * is a block * */
    struct block *class_next, *class_prev; /* per-class LIFO, newest at head */
    struct block *age_next, *age_prev;     /* global, oldest at age_head */
    unsigned cls;
} block;

/* An external buffer: caller memory plus how to give it back. */
typedef struct external_block {
    wf_buffer buf; /* first member: a wf_buffer * is an external_block * */
    void (*deleter)(void *data, void *ctx);
    void *owner_data; /* what the owner passed, given back to the deleter */
    void *ctx;
    wf_deferred_call deferred; /* queued here when released inside a task */
} external_block;

static wf_mutex g_lock = {.mutex = PTHREAD_MUTEX_INITIALIZER, .level = WF_LOCK_ALLOCATOR};

/* Guarded by g_lock. */
static block *g_class_head[NUM_CLASSES];
static block *g_age_head, *g_age_tail;
static size_t g_active, g_peak, g_cached, g_reserved;
static size_t g_limit = SIZE_MAX;
static size_t g_cache_cap = CACHE_CAP_MAX;   /* min(the default for g_limit, g_cache_asked) */
static size_t g_cache_asked = SIZE_MAX;      /* wf_set_cache_limit's value; SIZE_MAX: none */

/* Never written: an empty buffer has no bytes to write. */
static _Alignas(64) unsigned char g_empty_block[64];

/* ------------------------------------------------------------ fork */

/* The lock is held across fork() so no list or counter is half-updated
 * (util/fork.h). In the child, bytes reserved by threads that were
 * fetching memory from the system are given back: those threads are gone
 * and would otherwise count against the limit forever. Buffers they held
 * stay counted as active (leaked in the child). */
static void fork_prepare(void) { wf__mutex_lock_for_fork(&g_lock); }
static void fork_parent(void) { wf__mutex_unlock_for_fork(&g_lock); }

static void fork_child(void)
{
    g_reserved = 0;
    wf__mutex_unlock_for_fork(&g_lock);
}

static const wf_fork_hooks fork_hooks = {
    .level = WF_LOCK_ALLOCATOR, .prepare = fork_prepare, .parent = fork_parent, .child = fork_child};

static void register_fork_hooks(void) __attribute__((constructor));
static void register_fork_hooks(void) { wf__fork_hooks_register(&fork_hooks); }

/* ------------------------------------------------------------ size classes */

static unsigned floor_log2(size_t x) /* x > 0 */
{
    return (unsigned)(sizeof(unsigned long long) * 8 - 1) - (unsigned)__builtin_clzll((unsigned long long)x);
}

/* 1 <= n <= MAX_REQUEST; the result is <= MAX_REQUEST (no overflow). */
static size_t class_capacity(size_t n)
{
    if (n <= SMALL_LIMIT)
        return (n + MIN_CLASS - 1) & ~(MIN_CLASS - 1);
    unsigned k = floor_log2(n - 1); /* n in (2^k, 2^(k+1)], k >= 8 */
    size_t step = (size_t)1 << (k - 2);
    if (n >= HUGE_PAGE && step < HUGE_PAGE)
        step = HUGE_PAGE;
    return (n + step - 1) & ~(step - 1);
}

/* c is a capacity returned by class_capacity. */
static unsigned class_index(size_t c)
{
    if (c <= SMALL_LIMIT)
        return (unsigned)(c / MIN_CLASS) - 1u;
    unsigned k = floor_log2(c - 1);
    size_t sub = (c - ((size_t)1 << k)) >> (k - 2); /* 1..4 */
    return 4u + (k - 8u) * 4u + (unsigned)sub - 1u;
}

/* ------------------------------------------------------------ system memory */

static void *system_alloc(size_t cap)
{
    if (cap < HUGE_PAGE) {
        void *p = NULL;
        if (wf__posix_memalign(&p, DATA_ALIGN, cap) != 0)
            return NULL;
        return p;
    }
    /* Map one extra huge page so the region can start on a 2 MiB boundary. */
    if (cap > SIZE_MAX - HUGE_PAGE)
        return NULL;
    size_t span = cap + HUGE_PAGE;
    void *raw = wf__mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    uintptr_t start = (uintptr_t)raw;
    uintptr_t aligned = (start + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    size_t head = (size_t)(aligned - start);
    size_t tail = span - head - cap;
    if (head)
        munmap(raw, head);
    if (tail)
        munmap((void *)(aligned + cap), tail);
#ifdef MADV_HUGEPAGE
    (void)madvise((void *)aligned, cap, MADV_HUGEPAGE);
#endif
#ifdef WF_ASAN
    /* Fresh pages are addressable, but AddressSanitizer may still hold
     * poison for the range from a mapping it never saw go: in a fork()
     * child the C library unmaps the stacks of the parent's other threads,
     * which never exited, so the redzones of their frames stay in the
     * shadow, and mmap may hand the range out again. */
    __asan_unpoison_memory_region((void *)aligned, cap);
#endif
    return (void *)aligned;
}

static void system_free(void *data, size_t cap)
{
    if (cap < HUGE_PAGE)
        free(data);
    else
        munmap(data, cap);
}

static void block_destroy(block *b)
{
    if (b->buf.capacity > 0)
        system_free(b->buf.data, b->buf.capacity);
    free(b);
}

/* Frees a chain linked through age_next (evicted blocks). Lock not held. */
static void destroy_chain(block *b)
{
    while (b) {
        block *next = b->age_next;
        block_destroy(b);
        b = next;
    }
}

/* ------------------------------------------------------------ cache lists (lock held) */

static void cache_push(block *b)
{
    unsigned c = b->cls;
    b->class_prev = NULL;
    b->class_next = g_class_head[c];
    if (b->class_next)
        b->class_next->class_prev = b;
    g_class_head[c] = b;

    b->age_next = NULL;
    b->age_prev = g_age_tail;
    if (g_age_tail)
        g_age_tail->age_next = b;
    else
        g_age_head = b;
    g_age_tail = b;

    g_cached += b->buf.capacity;
}

static void cache_unlink(block *b)
{
    if (b->class_prev)
        b->class_prev->class_next = b->class_next;
    else
        g_class_head[b->cls] = b->class_next;
    if (b->class_next)
        b->class_next->class_prev = b->class_prev;

    if (b->age_prev)
        b->age_prev->age_next = b->age_next;
    else
        g_age_head = b->age_next;
    if (b->age_next)
        b->age_next->age_prev = b->age_prev;
    else
        g_age_tail = b->age_prev;

    b->class_next = b->class_prev = b->age_next = b->age_prev = NULL;
    g_cached -= b->buf.capacity;
}

/* Unlinks the oldest cached block and pushes it on *evicted (via age_next). */
static void evict_oldest(block **evicted)
{
    block *b = g_age_head;
    cache_unlink(b);
    b->age_next = *evicted;
    *evicted = b;
}

/* Whether `extra` more bytes fit under the limit next to what is counted now. */
static int fits_limit(size_t extra)
{
    size_t used = g_active + g_reserved + g_cached;
    return extra <= g_limit && used <= g_limit - extra;
}

/* Evicts until the cache respects its cap and the limit (or is empty). */
static void trim_cache(block **evicted)
{
    while (g_age_head && (g_cached > g_cache_cap || !fits_limit(0)))
        evict_oldest(evicted);
}

static void note_active_add(size_t cap)
{
    g_active += cap;
    if (g_active > g_peak)
        g_peak = g_active;
}

/* ------------------------------------------------------------ buffers */

static wf_buffer *init_buffer(block *b, size_t bytes)
{
    atomic_init(&b->buf.refcount, 1);
    b->buf.bytes = bytes;
    b->buf.flags = 0;
    atomic_init(&b->buf.derived, NULL);
    atomic_init(&b->buf.derived_hint, 0);
    return &b->buf;
}

wf_buffer *wf__buffer_alloc(size_t bytes)
{
    if (bytes == 0) {
        block *b = wf__malloc(sizeof *b);
        if (!b) {
            wf__error(WF_ERR_OUT_OF_MEMORY, "out of memory: cannot allocate a buffer header");
            return NULL;
        }
        b->buf.data = g_empty_block;
        b->buf.capacity = 0;
        b->class_next = b->class_prev = b->age_next = b->age_prev = NULL;
        b->cls = 0;
        return init_buffer(b, 0);
    }
    if (bytes > MAX_REQUEST) {
        wf__error(WF_ERR_OUT_OF_MEMORY,
                  "out of memory: requested %zu bytes, more than the largest possible allocation (%zu)",
                  bytes, (size_t)MAX_REQUEST);
        return NULL;
    }

    /* Every request is an injection point, served from the cache or not
     * (util/fault.h): a warm cache would otherwise hide these failures. */
    if (wf__fault_hit()) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "out of memory: cannot allocate %zu bytes (injected)",
                  bytes);
        return NULL;
    }
    size_t cap = class_capacity(bytes);
    unsigned cls = class_index(cap);
    block *evicted = NULL;

    wf__mutex_lock(&g_lock);
    block *hit = g_class_head[cls];
    if (hit) {
        /* Moving bytes from cached to active leaves the total unchanged. */
        cache_unlink(hit);
        note_active_add(cap);
        wf__mutex_unlock(&g_lock);
        return init_buffer(hit, bytes);
    }
    size_t committed = g_active + g_reserved;
    if (cap > g_limit || committed > g_limit - cap) {
        /* Even an empty cache would not make room: fail, keep the cache. */
        size_t active = g_active, limit = g_limit;
        wf__mutex_unlock(&g_lock);
        wf__error(WF_ERR_OUT_OF_MEMORY,
                  "memory limit reached: requested %zu bytes (capacity %zu), active %zu, limit %zu",
                  bytes, cap, active, limit);
        return NULL;
    }
    while (!fits_limit(cap))
        evict_oldest(&evicted); /* the cache cannot run dry here, see above */
    g_reserved += cap;
    wf__mutex_unlock(&g_lock);

    destroy_chain(evicted);

    block *b = wf__malloc(sizeof *b);
    void *data = b ? system_alloc(cap) : NULL;

    wf__mutex_lock(&g_lock);
    g_reserved -= cap;
    if (data)
        note_active_add(cap);
    size_t active = g_active, limit = g_limit;
    wf__mutex_unlock(&g_lock);

    if (!data) {
        free(b);
        wf__error(WF_ERR_OUT_OF_MEMORY,
                  "out of memory: the system could not provide %zu bytes (requested %zu), active %zu, limit %zu",
                  cap, bytes, active, limit);
        return NULL;
    }
    b->buf.data = data;
    b->buf.capacity = cap;
    b->class_next = b->class_prev = b->age_next = b->age_prev = NULL;
    b->cls = cls;
    return init_buffer(b, bytes);
}

wf_buffer *wf__buffer_retain(wf_buffer *b)
{
    if (b)
        atomic_fetch_add_explicit(&b->refcount, 1, memory_order_relaxed);
    return b;
}

/* ------------------------------------------------------------ external buffers */

wf_buffer *wf__buffer_wrap_external(void *data, size_t bytes, void (*deleter)(void *, void *),
                                    void *owner_data, void *ctx)
{
    external_block *e = wf__malloc(sizeof *e);
    if (!e) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "out of memory: cannot allocate a buffer header");
        return NULL;
    }
    atomic_init(&e->buf.refcount, 1);
    /* Nothing is ever read from an empty buffer, but data is never NULL. */
    e->buf.data = data ? data : (void *)g_empty_block;
    e->buf.bytes = bytes;
    e->buf.capacity = 0;
    e->buf.flags = WF_BUFFER_EXTERNAL;
    atomic_init(&e->buf.derived, NULL);
    atomic_init(&e->buf.derived_hint, 0);
    e->deleter = deleter;
    e->owner_data = owner_data;
    e->ctx = ctx;
    return &e->buf;
}

/* The owner's code runs here: no lock may be held (debug builds check). */
static void release_external(external_block *e)
{
    if (e->deleter) {
        wf__assert_no_locks_held("an external buffer's deleter");
        e->deleter(e->owner_data, e->ctx);
    }
    free(e);
}

static void run_deferred_deleter(wf_deferred_call *call)
{
    external_block *e = (external_block *)((char *)call - offsetof(external_block, deferred));
    release_external(e);
}

/* The last release: the deleter runs now, or once this thread leaves the
 * task or evaluation it is in (the header lives until then). */
static void external_released(external_block *e)
{
    if (e->deleter && wf__free_deferring()) {
        e->deferred.run = run_deferred_deleter;
        wf__free_defer_call(&e->deferred);
        return;
    }
    release_external(e);
}

void wf__buffer_discard_external(wf_buffer *b)
{
    free((external_block *)b);
}

bool wf__buffer_is_external(const wf_buffer *b)
{
    return (b->flags & WF_BUFFER_EXTERNAL) != 0;
}

/* ------------------------------------------------------------ derived data */

bool wf__buffer_attach_derived(wf_buffer *b, wf_buffer_derived *d)
{
    wf_buffer_derived *none = NULL;
    return !wf__buffer_is_external(b) &&
           atomic_compare_exchange_strong_explicit(&b->derived, &none, d, memory_order_acq_rel,
                                                   memory_order_acquire);
}

wf_buffer_derived *wf__buffer_derived(wf_buffer *b)
{
    return atomic_load_explicit(&b->derived, memory_order_acquire);
}

wf_buffer_derived *wf__buffer_derive_at_second_use(wf_buffer *b, uint64_t fingerprint,
                                                   wf_buffer_derived *(*make)(void *ctx),
                                                   void *ctx)
{
    wf_buffer_derived *have = wf__buffer_derived(b);
    if (have != NULL || wf__buffer_is_external(b))
        return have;
    const uint64_t refused = ~fingerprint;
    if (atomic_load_explicit(&b->derived_hint, memory_order_relaxed) == refused ||
        atomic_exchange(&b->derived_hint, fingerprint) != fingerprint)
        return NULL;
    wf_buffer_derived *made = make(ctx);
    if (made == NULL) {
        atomic_store(&b->derived_hint, refused);
        return NULL;
    }
    if (!wf__buffer_attach_derived(b, made))
        made->drop(made); /* another thread's came first */
    return wf__buffer_derived(b);
}

static bool derived_copy_affordable(size_t held, size_t bytes)
{
    wf_memory_stats stats = wf_memory_stats_default();
    if (wf_memory_stats_get(&stats) != WF_OK)
        return false;
    return stats.limit_bytes == SIZE_MAX || (held + bytes <= stats.limit_bytes / 4 &&
                                             stats.active_bytes + bytes <= stats.limit_bytes / 2);
}

void *wf__derived_copy_alloc(atomic_size_t *held, size_t budget, size_t header_size,
                             size_t bytes, wf_buffer **storage)
{
    *storage = NULL;
    if (!derived_copy_affordable(atomic_load(held), bytes))
        return NULL;
    if (atomic_fetch_add(held, bytes) + bytes > budget) {
        atomic_fetch_sub(held, bytes);
        return NULL;
    }
    wf_error_state saved;
    wf__error_save(&saved);
    void *header = wf__malloc(header_size);
    *storage = header ? wf__buffer_alloc(bytes) : NULL;
    wf__error_restore(&saved);
    if (*storage == NULL) {
        free(header);
        atomic_fetch_sub(held, bytes);
        return NULL;
    }
    return header;
}

void wf__derived_copy_free(atomic_size_t *held, void *header, wf_buffer *storage, size_t bytes)
{
    atomic_fetch_sub(held, bytes);
    wf__buffer_release(storage);
    free(header);
}

void wf__buffer_forget_derived(wf_buffer *b)
{
    atomic_store_explicit(&b->derived_hint, 0, memory_order_relaxed);
    wf_buffer_derived *d = atomic_exchange_explicit(&b->derived, NULL, memory_order_acq_rel);
    if (d != NULL)
        d->drop(d);
}

/* ------------------------------------------------------------ release */

void wf__buffer_release(wf_buffer *b)
{
    if (!b)
        return;
    if (atomic_fetch_sub_explicit(&b->refcount, 1, memory_order_acq_rel) != 1)
        return;
    /* the last holder: nothing can attach meanwhile (the hint is reset on reuse) */
    if (atomic_load_explicit(&b->derived, memory_order_acquire) != NULL)
        wf__buffer_forget_derived(b);
    if (b->flags & WF_BUFFER_EXTERNAL) {
        external_released((external_block *)b);
        return;
    }
    block *k = (block *)b;
    size_t cap = b->capacity;
    if (cap == 0) {
        free(k);
        return;
    }

    block *evicted = NULL;
    int kept = 0;
    wf__mutex_lock(&g_lock);
    g_active -= cap;
    /* Keep it only if it could fit beside the live memory at all (otherwise
     * the limit was lowered below what is live: free it, keep the cache). */
    if (cap <= g_cache_cap && cap <= g_limit && g_active + g_reserved <= g_limit - cap) {
        /* Make room, oldest first, under the cache cap and the limit. */
        while (g_cached > g_cache_cap - cap || !fits_limit(cap))
            evict_oldest(&evicted); /* cannot run dry: an empty cache fits */
        cache_push(k);
        kept = 1;
    }
    wf__mutex_unlock(&g_lock);

    destroy_chain(evicted);
    if (!kept)
        block_destroy(k);
}

/* ------------------------------------------------------------ public API */

/* Lock held: the cache cap for the current limit and the caller's cap. */
static void update_cache_cap(void)
{
    size_t half = g_limit / 2;
    size_t cap = half < CACHE_CAP_MAX ? half : CACHE_CAP_MAX;
    g_cache_cap = g_cache_asked < cap ? g_cache_asked : cap;
}

wf_status wf_set_memory_limit(size_t bytes)
{
    block *evicted = NULL;
    wf__mutex_lock(&g_lock);
    g_limit = bytes;
    update_cache_cap();
    trim_cache(&evicted);
    wf__mutex_unlock(&g_lock);
    destroy_chain(evicted);
    return WF_OK;
}

size_t wf_set_cache_limit(size_t bytes)
{
    block *evicted = NULL;
    wf__mutex_lock(&g_lock);
    size_t previous = g_cache_cap;
    g_cache_asked = bytes;
    update_cache_cap();
    trim_cache(&evicted);
    wf__mutex_unlock(&g_lock);
    destroy_chain(evicted);
    return previous;
}

/* The first published layout: struct_size and four counters. Callers built
 * against it pass this size; later versions only append fields. */
#define MEMORY_STATS_FIRST_SIZE (offsetof(wf_memory_stats, limit_bytes) + sizeof(size_t))

wf_status wf_memory_stats_get(wf_memory_stats *out)
{
    if (!out)
        return wf__error(WF_ERR_NULL_ARGUMENT, "wf_memory_stats_get: out is NULL");
    size_t caller_size = out->struct_size;
    if (caller_size < MEMORY_STATS_FIRST_SIZE)
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "wf_memory_stats_get: struct_size is %zu, at least %zu expected "
                         "(initialize the struct with wf_memory_stats_default())",
                         caller_size, (size_t)MEMORY_STATS_FIRST_SIZE);
    wf_memory_stats now = {0};
    wf__mutex_lock(&g_lock);
    now.active_bytes = g_active;
    now.peak_bytes = g_peak;
    now.cached_bytes = g_cached;
    now.limit_bytes = g_limit;
    now.cache_limit_bytes = g_cache_cap;
    wf__mutex_unlock(&g_lock);
    now.node_pool_bytes = wf__node_pool_bytes();
    /* Only what the caller's struct has room for; its struct_size stays. */
    size_t known = caller_size < sizeof now ? caller_size : sizeof now;
    size_t skip = sizeof now.struct_size;
    memcpy((char *)out + skip, (const char *)&now + skip, known - skip);
    return WF_OK;
}

void wf_reset_peak_memory(void)
{
    wf__mutex_lock(&g_lock);
    g_peak = g_active;
    wf__mutex_unlock(&g_lock);
}

void wf_clear_cache(void)
{
    wf__mutex_lock(&g_lock);
    block *all = g_age_head;
    for (unsigned i = 0; i < NUM_CLASSES; i++)
        g_class_head[i] = NULL;
    g_age_head = g_age_tail = NULL;
    g_cached = 0;
    wf__mutex_unlock(&g_lock);
    destroy_chain(all); /* still linked oldest to newest through age_next */
}
