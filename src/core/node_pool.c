/*
 * The node pool (core/node_pool.h).
 *
 * Memory. Nodes come in chunks of POOL_CHUNK that are never returned to the
 * system, so a released handle always points at a node header (refcount 0
 * while free) and checking it is never undefined behavior.
 *
 * Shards. A thread takes and gives back nodes through its own shard (picked
 * round-robin at first use; a plain int, so thread exit leaves nothing
 * behind), so threads building graphs at once share no lock and no cache
 * line. A shard holds
 *   quarantine  a FIFO of the last WF_NODE_QUARANTINE nodes released through it;
 *   ready       free nodes to hand out (a LIFO of at most READY_MAX: warm first);
 *   spill       a batch being filled with what overflows `ready`.
 * A released node enters the quarantine; the node it pushes out (released
 * WF_NODE_QUARANTINE releases earlier) becomes ready, or joins the spill when
 * `ready` is full. A spill of BATCH nodes goes to the process-wide spare list.
 * A shard with nothing ready takes a batch from the spare list, and only when
 * that is empty too is a chunk allocated (split into batches; the rest go to
 * the spare list).
 *
 * Bound. Whichever threads build and whichever free, free nodes flow back to
 * builders through the spare list, so memory stays within the peak of live
 * nodes plus, per shard in use, WF_NODE_QUARANTINE + READY_MAX + BATCH nodes,
 * plus one chunk: a chunk is allocated only when its taker has nothing ready
 * and the spare list is empty.
 *
 * Use-after-release. A released node is handed out again only after
 * WF_NODE_QUARANTINE more nodes were released through its shard (by this
 * thread or by threads sharing the shard), however many nodes are taken in
 * between: fresh nodes never pass through the quarantine.
 *
 * Locks. The shard locks and the spare-list lock are leaves (WF_LOCK_LEAF),
 * never nested with each other; nothing is called while one is held
 * (chunks are allocated with no lock held).
 *
 * fork(). Every node lives in a chunk listed on the spare list, so the
 * child can find the nodes other threads were computing (CLAIMED or
 * SUBMITTED: on a walk's path, on a run list, queued on a stream or running)
 * and fail them: their threads do not exist in the child, and a waiter
 * there must get an error, not hang (util/fork.h).
 */
#include "core/node_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "util/fork.h"
#include "util/lock.h"
#include "util/fault.h"

enum {
    POOL_CHUNK = 256, /* nodes per chunk */
    BATCH = 32,       /* nodes moved to or from the spare list at once */
    READY_MAX = 4 * BATCH,
    POOL_SHARDS = 16,
    ID_BLOCK = 1024 /* ids a shard reserves at once (one shared counter update) */
};

struct pool_chunk {
    struct pool_chunk *next;
    wf_array nodes[POOL_CHUNK];
};

struct pool_shard {
    _Alignas(64) wf_mutex lock; /* a cache line of its own per shard */
    wf_array *quarantine_head, *quarantine_tail; /* oldest release at the head */
    int64_t quarantine_count;
    wf_array *ready; /* LIFO through pool_next */
    int64_t ready_count;
    wf_array *spill; /* LIFO through pool_next */
    int64_t spill_count;
    int64_t live;              /* taken minus given back through this shard (may be < 0) */
    uint64_t next_id, id_end;  /* ids reserved and not yet handed out */
};

static struct pool_shard shards[POOL_SHARDS];
static pthread_once_t shards_once = PTHREAD_ONCE_INIT;
static atomic_uint next_shard;
static _Thread_local int thread_shard = -1;

/* Full batches (chains of BATCH through pool_next) linked by the first
 * node's pool_batch_next, and every chunk (so leak checkers see them). */
static struct {
    wf_mutex lock;
    wf_array *batches;
    struct pool_chunk *chunks;
} spare = {.lock = {PTHREAD_MUTEX_INITIALIZER, WF_LOCK_LEAF}};

static atomic_size_t pool_bytes;
static atomic_uint_fast64_t next_id_block = 1; /* 0 is never an id */

static void init_shards(void)
{
    for (int i = 0; i < POOL_SHARDS; i++)
        wf__mutex_init(&shards[i].lock, WF_LOCK_LEAF);
}

static struct pool_shard *this_threads_shard(void)
{
    if (thread_shard < 0) {
        pthread_once(&shards_once, init_shards);
        thread_shard = (int)(atomic_fetch_add(&next_shard, 1) % POOL_SHARDS);
    }
    return &shards[thread_shard];
}

int64_t wf__arrays_live(void)
{
    pthread_once(&shards_once, init_shards);
    int64_t live = 0;
    for (int i = 0; i < POOL_SHARDS; i++) {
        wf__mutex_lock(&shards[i].lock);
        live += shards[i].live;
        wf__mutex_unlock(&shards[i].lock);
    }
    return live;
}

size_t wf__node_pool_bytes(void) { return atomic_load_explicit(&pool_bytes, memory_order_relaxed); }

size_t wf__node_pool_chunk_bytes(void) { return sizeof(struct pool_chunk); }

/* ------------------------------------------------------------ spare list */

static void spare_put(wf_array *batch)
{
    wf__mutex_lock(&spare.lock);
    batch->pool_batch_next = spare.batches;
    spare.batches = batch;
    wf__mutex_unlock(&spare.lock);
}

/* A new chunk cut into batches: returns one, the others go to the spare list. */
static wf_array *chunk_new(void)
{
    struct pool_chunk *chunk = wf__calloc(1, sizeof *chunk);
    if (!chunk)
        return NULL;
    wf_array *batches = NULL;
    for (int b = 0; b < POOL_CHUNK; b += BATCH) {
        for (int i = b; i < b + BATCH; i++) {
            atomic_init(&chunk->nodes[i].refcount, 0);
            chunk->nodes[i].pool_next = i + 1 < b + BATCH ? &chunk->nodes[i + 1] : NULL;
        }
        chunk->nodes[b].pool_batch_next = batches;
        batches = &chunk->nodes[b];
    }
    wf_array *mine = batches;
    wf__mutex_lock(&spare.lock);
    chunk->next = spare.chunks;
    spare.chunks = chunk;
    for (wf_array *b = mine->pool_batch_next, *next; b; b = next) {
        next = b->pool_batch_next;
        b->pool_batch_next = spare.batches;
        spare.batches = b;
    }
    wf__mutex_unlock(&spare.lock);
    atomic_fetch_add_explicit(&pool_bytes, sizeof *chunk, memory_order_relaxed);
    return mine;
}

/* One batch of BATCH free nodes, from the spare list or a new chunk. */
static wf_array *spare_take(void)
{
    wf__mutex_lock(&spare.lock);
    wf_array *batch = spare.batches;
    if (batch)
        spare.batches = batch->pool_batch_next;
    wf__mutex_unlock(&spare.lock);
    return batch ? batch : chunk_new();
}

/* ------------------------------------------------------------ shard lists */

static void ready_push(struct pool_shard *p, wf_array *n)
{
    n->pool_next = p->ready;
    p->ready = n;
    p->ready_count++;
}

static wf_array *ready_pop(struct pool_shard *p)
{
    wf_array *n = p->ready;
    if (n) {
        p->ready = n->pool_next;
        p->ready_count--;
    }
    return n;
}

static void quarantine_push(struct pool_shard *p, wf_array *n)
{
    n->pool_next = NULL;
    if (p->quarantine_tail)
        p->quarantine_tail->pool_next = n;
    else
        p->quarantine_head = n;
    p->quarantine_tail = n;
    p->quarantine_count++;
}

static wf_array *quarantine_pop(struct pool_shard *p)
{
    wf_array *n = p->quarantine_head;
    if (n) {
        p->quarantine_head = n->pool_next;
        if (!p->quarantine_head)
            p->quarantine_tail = NULL;
        p->quarantine_count--;
    }
    return n;
}

/* Moves the node released WF_NODE_QUARANTINE releases ago to `ready` or to
 * the spill; returns the spill when it became a full batch (to hand over
 * once the shard is unlocked). */
static wf_array *quarantine_expire(struct pool_shard *p)
{
    wf_array *n = quarantine_pop(p);
    if (p->ready_count < READY_MAX) {
        ready_push(p, n);
        return NULL;
    }
    n->pool_next = p->spill;
    p->spill = n;
    if (++p->spill_count < BATCH)
        return NULL;
    wf_array *full = p->spill;
    p->spill = NULL;
    p->spill_count = 0;
    return full;
}

/* ------------------------------------------------------------ take / give back */

/* With p locked and nothing ready: fetches a batch with p unlocked. Returns
 * the batch if a thread sharing the shard refilled it meanwhile (the caller
 * hands it back once p is unlocked). */
static wf_array *refill_ready(struct pool_shard *p)
{
    wf__mutex_unlock(&p->lock);
    wf_array *batch = spare_take();
    wf__mutex_lock(&p->lock);
    if (!batch || p->ready)
        return batch;
    p->ready = batch;
    p->ready_count = BATCH;
    return NULL;
}

wf_array *wf__node_pool_take(uint64_t *id)
{
    if (wf__fault_hit()) /* an injection point even when a node is ready (util/fault.h) */
        return NULL;
    struct pool_shard *p = this_threads_shard();
    wf__mutex_lock(&p->lock);
    wf_array *surplus = p->ready ? NULL : refill_ready(p);
    wf_array *n = ready_pop(p);
    if (!n) /* out of memory: a quarantined node is better than failing */
        n = quarantine_pop(p);
    if (n) {
        p->live++;
        if (p->next_id == p->id_end) {
            p->next_id = atomic_fetch_add_explicit(&next_id_block, ID_BLOCK, memory_order_relaxed);
            p->id_end = p->next_id + ID_BLOCK;
        }
        *id = p->next_id++;
    }
    wf__mutex_unlock(&p->lock);
    if (surplus)
        spare_put(surplus);
    return n;
}

void wf__node_pool_give_back(wf_array *n)
{
    struct pool_shard *p = this_threads_shard();
    wf__mutex_lock(&p->lock);
    p->live--;
    quarantine_push(p, n);
    wf_array *full_spill = p->quarantine_count > WF_NODE_QUARANTINE ? quarantine_expire(p) : NULL;
    wf__mutex_unlock(&p->lock);
    if (full_spill)
        spare_put(full_spill);
}

/* ------------------------------------------------------------ fork */

static const char in_flight_message[] =
    "the computation was in flight in the parent at fork(); only the forking thread "
    "survives in the child, so it never finished there";

static void fork_prepare(void)
{
    pthread_once(&shards_once, init_shards);
    wf__mutex_lock_for_fork(&spare.lock);
    for (int i = 0; i < POOL_SHARDS; i++)
        wf__mutex_lock_for_fork(&shards[i].lock);
}

static void fork_parent(void)
{
    for (int i = POOL_SHARDS - 1; i >= 0; i--)
        wf__mutex_unlock_for_fork(&shards[i].lock);
    wf__mutex_unlock_for_fork(&spare.lock);
}

/* In the child, alone: a node CLAIMED or SUBMITTED belongs to a thread that
 * is gone (the forking thread was not evaluating: it called fork()). Such a
 * node becomes FAILED, so waiting for it, or for anything built on it,
 * reports the error. No thread waits in the child, so a plain store
 * publishes it; the references the gone threads held are leaked. */
static void fail_in_flight(wf_array *n)
{
    int state = atomic_load_explicit(&n->state, memory_order_relaxed);
    if (atomic_load_explicit(&n->refcount, memory_order_relaxed) <= 0 ||
        (state != WF_NODE_CLAIMED && state != WF_NODE_SUBMITTED))
        return;
    free(n->error_message);
    n->error = WF_ERR_KERNEL;
    n->error_message = wf__strdup(in_flight_message);
    atomic_store_explicit(&n->state, WF_NODE_FAILED, memory_order_release);
}

static void fork_child(void)
{
    for (struct pool_chunk *chunk = spare.chunks; chunk; chunk = chunk->next)
        for (int i = 0; i < POOL_CHUNK; i++)
            fail_in_flight(&chunk->nodes[i]);
    fork_parent();
}

static const wf_fork_hooks fork_hooks = {
    .level = WF_LOCK_LEAF, .prepare = fork_prepare, .parent = fork_parent, .child = fork_child};

static void register_fork_hooks(void) __attribute__((constructor));
static void register_fork_hooks(void) { wf__fork_hooks_register(&fork_hooks); }
