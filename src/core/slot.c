/*
 * Atomic slots: a cell holding at most one array reference, shared by
 * threads with no user lock.
 *
 * Why a lock: a load must add a reference to the array it read before a
 * concurrent store can drop the slot's reference to it (or the array could
 * be freed between the read and the increment). Each slot has a leaf mutex
 * (level 70) held only to copy or swap the pointer and, for a load, to add
 * the reference; nothing else runs under it. The reference a store replaces
 * is dropped after unlocking, since dropping it may free a graph and run
 * user code (an external buffer's deleter, a custom payload's destructor).
 *
 * Slot memory is type-stable, like array nodes: slots come from chunks that
 * are never freed, and a released slot is reused only after SLOT_QUARANTINE
 * other releases, so a handle used after its release finds refcount 0 and is
 * reported as WF_ERR_MISUSE instead of touching freed memory.
 */
#include "core/slot.h"

#include <stdlib.h>

#include "core/array.h"
#include "core/error.h"
#include "util/fork.h"
#include "util/lock.h"
#include "util/fault.h"

enum { SLOT_CHUNK = 64, SLOT_QUARANTINE = 256 };

struct wf_slot {
    atomic_int_fast64_t refcount; /* 0 once released */
    wf_mutex lock;                /* level 70 (leaf): guards value */
    wf_array *value;              /* an owned reference, or NULL (empty) */
    struct wf_slot *free_next;    /* the pool's FIFO while released */
};

struct slot_chunk {
    struct slot_chunk *next;
    wf_slot slots[SLOT_CHUNK];
};

static struct {
    wf_mutex lock; /* level 70 (leaf): the lists and counters below */
    struct slot_chunk *chunks;
    wf_slot *free_head, *free_tail; /* oldest release first */
    int64_t free_count;
    int64_t live;
} pool = {.lock = {PTHREAD_MUTEX_INITIALIZER, WF_LOCK_LEAF}};

/* ------------------------------------------------------------ pool */

int64_t wf__slots_live(void)
{
    wf__mutex_lock(&pool.lock);
    int64_t live = pool.live;
    wf__mutex_unlock(&pool.lock);
    return live;
}

/* Lock held. */
static void pool_push_free(wf_slot *s)
{
    s->free_next = NULL;
    if (pool.free_tail)
        pool.free_tail->free_next = s;
    else
        pool.free_head = s;
    pool.free_tail = s;
    pool.free_count++;
}

/* Lock held. Takes the oldest released slot, if more than `keep` wait. */
static wf_slot *pool_pop_free(int64_t keep)
{
    if (pool.free_count <= keep)
        return NULL;
    wf_slot *s = pool.free_head;
    pool.free_head = s->free_next;
    if (!pool.free_head)
        pool.free_tail = NULL;
    pool.free_count--;
    pool.live++;
    return s;
}

/* A slot past its quarantine, else one from a new chunk (allocated with no
 * lock held), else, out of memory, any released slot. */
static wf_slot *pool_take(void)
{
    wf__mutex_lock(&pool.lock);
    wf_slot *s = pool_pop_free(SLOT_QUARANTINE);
    wf__mutex_unlock(&pool.lock);
    if (s)
        return s;
    struct slot_chunk *chunk = wf__calloc(1, sizeof *chunk);
    if (chunk) {
        for (int i = 0; i < SLOT_CHUNK; i++)
            wf__mutex_init(&chunk->slots[i].lock, WF_LOCK_LEAF);
    }
    wf__mutex_lock(&pool.lock);
    if (chunk) {
        chunk->next = pool.chunks;
        pool.chunks = chunk;
        for (int i = 0; i < SLOT_CHUNK; i++)
            pool_push_free(&chunk->slots[i]);
    }
    s = pool_pop_free(0);
    wf__mutex_unlock(&pool.lock);
    if (!s)
        wf__error(WF_ERR_OUT_OF_MEMORY, "wf_slot_new: out of memory");
    return s;
}

static void pool_give_back(wf_slot *s)
{
    wf__mutex_lock(&pool.lock);
    pool_push_free(s);
    pool.live--;
    wf__mutex_unlock(&pool.lock);
}

/* ------------------------------------------------------------ fork */

/* The pool lock is held across fork() (util/fork.h); the slots' own locks
 * are not (there may be thousands, and ThreadSanitizer tracks at most 64
 * held per thread). A slot's lock guards one pointer, which a gone thread
 * left either old or new, and references it took or was about to drop only
 * leak; so the child reinitialises every slot lock, found through the chunk
 * list the pool lock keeps still. */
static void fork_prepare(void) { wf__mutex_lock_for_fork(&pool.lock); }
static void fork_parent(void) { wf__mutex_unlock_for_fork(&pool.lock); }

static void fork_child(void)
{
    for (struct slot_chunk *c = pool.chunks; c; c = c->next)
        for (int i = 0; i < SLOT_CHUNK; i++)
            wf__mutex_init(&c->slots[i].lock, WF_LOCK_LEAF);
    wf__mutex_unlock_for_fork(&pool.lock);
}

static const wf_fork_hooks fork_hooks = {
    .level = WF_LOCK_LEAF, .prepare = fork_prepare, .parent = fork_parent, .child = fork_child};

static void register_fork_hooks(void) __attribute__((constructor));
static void register_fork_hooks(void) { wf__fork_hooks_register(&fork_hooks); }

/* ------------------------------------------------------------ helpers */

/* Resolves a slot handle passed to a public function; NULL (recorded) for
 * NULL or a released slot. */
static wf_slot *slot_check(wf_slot *s, const char *op)
{
    if (!s) {
        wf__error(WF_ERR_NULL_ARGUMENT, "%s: slot is NULL", op);
        return NULL;
    }
    if (atomic_load_explicit(&s->refcount, memory_order_acquire) <= 0) {
        wf__error(WF_ERR_MISUSE, "%s: the slot was already released", op);
        return NULL;
    }
    return s;
}

/* A value to store: not NULL (an error already recorded by a failed op is
 * kept) and not released. */
static wf_array *value_check(wf_array *value, const char *op)
{
    if (!value) {
        wf__null_input(op, "the value");
        return NULL;
    }
    return wf__array_check(value, op, "the value");
}

/* Puts `value` (a reference the slot now owns, or NULL) in the slot and
 * returns the reference it held. */
static wf_array *swap_value(wf_slot *s, wf_array *value)
{
    wf__mutex_lock(&s->lock);
    wf_array *old = s->value;
    s->value = value;
    wf__mutex_unlock(&s->lock);
    return old;
}

/* ------------------------------------------------------------ public API */

wf_slot *wf_slot_new(wf_array *initial)
{
    if (initial && !wf__array_check(initial, "wf_slot_new", "the initial value"))
        return NULL;
    wf_slot *s = pool_take();
    if (!s)
        return NULL;
    s->value = initial ? wf__array_incref(initial) : NULL;
    atomic_store_explicit(&s->refcount, 1, memory_order_release);
    return s;
}

wf_slot *wf_slot_retain(wf_slot *slot)
{
    if (!slot)
        return NULL;
    int_fast64_t count = atomic_load(&slot->refcount);
    do {
        if (count <= 0) {
            wf__error(WF_ERR_MISUSE, "wf_slot_retain: the slot was already released");
            return NULL;
        }
    } while (!atomic_compare_exchange_weak(&slot->refcount, &count, count + 1));
    return slot;
}

void wf_slot_release(wf_slot *slot)
{
    if (!slot)
        return;
    /* A compare-and-swap loop, so releasing twice is caught, not counted. */
    int_fast64_t count = atomic_load(&slot->refcount);
    do {
        if (count <= 0) {
            wf__error(WF_ERR_MISUSE, "wf_slot_release: the slot was already released");
            return;
        }
    } while (!atomic_compare_exchange_weak(&slot->refcount, &count, count - 1));
    if (count != 1)
        return;
    wf_array *value = swap_value(slot, NULL);
    pool_give_back(slot);
    if (value)
        wf__array_decref(value);
}

wf_array *wf_slot_load(wf_slot *slot)
{
    if (!slot_check(slot, "wf_slot_load"))
        return NULL;
    wf__mutex_lock(&slot->lock);
    wf_array *value = slot->value;
    if (value) /* before a concurrent store can drop the slot's reference */
        wf__array_incref(value);
    wf__mutex_unlock(&slot->lock);
    return wf__array_publish(value);
}

wf_status wf_slot_store(wf_slot *slot, wf_array *value)
{
    if (!slot_check(slot, "wf_slot_store") || !value_check(value, "wf_slot_store"))
        return wf_last_error();
    wf_array *old = swap_value(slot, wf__array_incref(value));
    if (old)
        wf__array_decref(old);
    return WF_OK;
}

wf_array *wf_slot_exchange(wf_slot *slot, wf_array *value)
{
    if (!slot_check(slot, "wf_slot_exchange") || !value_check(value, "wf_slot_exchange"))
        return NULL;
    return wf__array_publish(swap_value(slot, wf__array_incref(value)));
}

wf_array *wf_slot_take(wf_slot *slot)
{
    if (!slot_check(slot, "wf_slot_take"))
        return NULL;
    return wf__array_publish(swap_value(slot, NULL));
}

wf_status wf_slot_compare_exchange(wf_slot *slot, wf_array *expected, wf_array *desired,
                                   bool *swapped)
{
    const char *op = "wf_slot_compare_exchange";
    if (!swapped)
        return wf__error(WF_ERR_NULL_ARGUMENT, "%s: swapped is NULL", op);
    *swapped = false;
    if (!slot_check(slot, op) || !value_check(desired, op))
        return wf_last_error();
    if (expected && !wf__array_check(expected, op, "the expected value"))
        return wf_last_error();
    wf__mutex_lock(&slot->lock);
    wf_array *old = slot->value;
    bool match = old == expected; /* identity: the same handle */
    if (match)
        slot->value = wf__array_incref(desired);
    wf__mutex_unlock(&slot->lock);
    if (match && old)
        wf__array_decref(old);
    *swapped = match;
    return WF_OK;
}
