/*
 * CPU streams: a FIFO of nodes queued by wf_async_eval, a worker thread, and
 * an execution token so that exactly one thread (the worker, or a thread
 * that waits for a queued node and helps) runs the FIFO at a time, in
 * order. Synchronous evaluations run their own nodes without the token and
 * show up here only as batches, for wf_stream_synchronize.
 *
 * Streams are refcounted and listed in a process-wide registry. The default
 * stream lives as long as the process; every other stream, with its worker,
 * goes away with its last reference (nodes hold references to their stream,
 * so a stream with queued work stays alive). Each thread's push stack holds
 * references and is released when the thread exits.
 *
 * fork(): the registry and every listed stream's queue are held across it.
 * In the child the workers are gone: each stream is marked without one and
 * gets a new worker when work is next queued on it (wf__stream_kick). Its
 * queued and running tasks, failed by the node pool's child hook, are
 * dropped, every ticket counts as finished and the open batches (of gone
 * threads) are forgotten, so nothing in the child waits for them.
 */
#include "runtime/stream.h"

#include <stdlib.h>

#include "core/deferred_free.h"
#include "core/error.h"
#include "runtime/device.h"
#include "runtime/eval.h"
#include "runtime/node_wait.h"
#include "runtime/pool.h"
#include "runtime/start.h"
#include "util/fork.h"
#include "util/lock.h"
#include "util/fault.h"

struct wf_stream {
    atomic_int_fast64_t refcount;
    uint64_t id;
    wf_mutex queue_lock; /* level 40: everything below but `done`'s reads */
    pthread_cond_t work_ready; /* the worker waits here */
    pthread_cond_t progress;   /* a task finished or a batch closed */
    int progress_waiters;
    wf_array *head, *tail;
    uint64_t enqueued;          /* tickets handed out */
    atomic_uint_fast64_t done;  /* ticket of the last finished task */
    wf_stream_batch *batches_head, *batches_tail; /* open batches, oldest first */
    uint64_t batches_opened;
    bool busy;     /* the execution token is held */
    bool shutdown; /* last reference gone: the worker exits when idle */
    bool worker_frees; /* the worker dropped the last reference itself */
    bool immortal;     /* the default stream: never freed, so not counted */
    bool has_worker;   /* `worker` runs (false in a fork child until work is queued) */
    bool worker_in_user_code; /* the worker runs deferred destructors, queue unlocked */
    /* Payload destructors and deleters that tasks run by other threads
     * deferred: the worker runs them (see run_head). */
    wf_deferred_list deferred;
    pthread_t worker;
    struct wf_stream *registry_prev, *registry_next;
    wf_device *device; /* where its tasks run; set at creation */
    /* The earliest queued task that failed and that no synchronize has
     * reported yet (ticket 0: none), with a copy of its message. */
    uint64_t failure_ticket;
    wf_status failure;
    char *failure_message;
};

static atomic_uint_fast64_t last_stream_id;

uint64_t wf__stream_id(const wf_stream *s) { return s->id; }

uint64_t wf_stream_id(const wf_stream *s) { return s ? s->id : 0; }

/* ------------------------------------------------------------ registry */

static struct {
    wf_mutex lock; /* level 30 */
    wf_stream *first;
    size_t count;
    wf_stream *default_stream;
} registry = {.lock = {PTHREAD_MUTEX_INITIALIZER, WF_LOCK_STREAM_REGISTRY}};

static void registry_add(wf_stream *s)
{
    wf__mutex_lock(&registry.lock);
    s->registry_next = registry.first;
    if (registry.first)
        registry.first->registry_prev = s;
    registry.first = s;
    registry.count++;
    wf__mutex_unlock(&registry.lock);
}

static void registry_remove(wf_stream *s)
{
    wf__mutex_lock(&registry.lock);
    if (s->registry_prev)
        s->registry_prev->registry_next = s->registry_next;
    else
        registry.first = s->registry_next;
    if (s->registry_next)
        s->registry_next->registry_prev = s->registry_prev;
    registry.count--;
    wf__mutex_unlock(&registry.lock);
}

size_t wf_stream_count(void)
{
    wf__mutex_lock(&registry.lock);
    size_t n = registry.count;
    wf__mutex_unlock(&registry.lock);
    return n;
}

/* ------------------------------------------------------------ tasks */

static wf_array *queue_pop(wf_stream *s)
{
    wf_array *n = s->head;
    s->head = n->queue_next;
    if (!s->head)
        s->tail = NULL;
    n->queue_next = NULL;
    return n;
}

static void stream_free_memory(wf_stream *s)
{
    free(s->failure_message);
    wf__mutex_destroy(&s->queue_lock);
    pthread_cond_destroy(&s->work_ready);
    pthread_cond_destroy(&s->progress);
    free(s);
}

static void announce_progress(wf_stream *s)
{
    if (s->progress_waiters)
        pthread_cond_broadcast(&s->progress);
}

/* With the queue locked: whether user code that a task run by this thread
 * deferred goes to the worker. A thread that helps run the queue is waiting
 * for it (wf_stream_synchronize, wf_eval) and may hold a lock of its own
 * that a deleter takes (a binding's interpreter lock): the worker holds
 * nothing. Without a worker (a fork child that could not start one) the
 * helper runs it. */
static bool deferred_to_worker(const wf_stream *s)
{
    return s->has_worker && !pthread_equal(pthread_self(), s->worker);
}

/* With the queue locked: runs the user code queued for the worker, with the
 * queue unlocked. */
static void run_worker_deferred(wf_stream *s)
{
    wf_deferred_list list = s->deferred;
    s->deferred = (wf_deferred_list){0};
    s->worker_in_user_code = true;
    wf__mutex_unlock(&s->queue_lock);
    wf__free_deferred_give(&list);
    wf__eval_run_deferred_frees();
    wf__mutex_lock(&s->queue_lock);
    s->worker_in_user_code = false;
}

/* With the queue locked, the token free and a task queued: runs the head
 * task as the token holder (queue unlocked meanwhile), gives the token back,
 * hands remaining work to the worker and wakes waiters. Payload destructors
 * and deleters the task deferred run after the token is given back,
 * unlocked: here on the worker, else handed to it. */
static void run_head(wf_stream *s)
{
    s->busy = true;
    wf_array *task = queue_pop(s);
    uint64_t ticket = task->queue_seq;
    wf__mutex_unlock(&s->queue_lock);
    wf__free_defer_begin();
    char *message;
    const wf_status failure = wf__eval_run_task(task, &message);
    wf__mutex_lock(&s->queue_lock);
    if (failure != WF_OK && s->failure_ticket == 0) {
        s->failure_ticket = ticket;
        s->failure = failure;
        s->failure_message = message;
        message = NULL;
    }
    free(message);
    s->busy = false;
    atomic_store_explicit(&s->done, ticket, memory_order_release);
    if (s->head)
        pthread_cond_signal(&s->work_ready);
    announce_progress(s);
    if (wf__free_defer_end()) {
        if (deferred_to_worker(s)) {
            wf__free_deferred_take(&s->deferred);
            pthread_cond_signal(&s->work_ready);
        } else {
            bool on_worker = s->has_worker && pthread_equal(pthread_self(), s->worker);
            s->worker_in_user_code = on_worker;
            wf__mutex_unlock(&s->queue_lock);
            wf__eval_run_deferred_frees();
            wf__mutex_lock(&s->queue_lock);
            s->worker_in_user_code = false;
        }
    }
}

static void *worker_main(void *arg)
{
    wf_stream *s = arg;
    wf__mutex_lock(&s->queue_lock);
    for (;;) {
        if (!s->busy && s->head) {
            run_head(s);
            continue;
        }
        if (!wf__free_deferred_list_empty(&s->deferred)) {
            run_worker_deferred(s);
            continue;
        }
        if (s->shutdown && !s->head && !s->busy)
            break;
        wf__cond_wait(&s->work_ready, &s->queue_lock);
    }
    bool frees = s->worker_frees;
    wf__mutex_unlock(&s->queue_lock);
    if (frees)
        stream_free_memory(s);
    return NULL;
}

void wf__stream_enqueue(wf_stream *s, wf_array *node)
{
    wf__array_incref(node); /* the queue's reference, dropped after the run */
    wf__mutex_lock(&s->queue_lock);
    node->queue_next = NULL;
    node->queue_seq = ++s->enqueued;
    if (s->tail)
        s->tail->queue_next = node;
    else
        s->head = node;
    s->tail = node;
    wf__node_publish(node, WF_NODE_SUBMITTED);
    wf__mutex_unlock(&s->queue_lock);
}

/* With the queue locked: starts the worker if it is gone (after fork()).
 * If the thread cannot be created the work stays queued: whoever waits for
 * it runs it (help_until), and the next kick tries again. */
static void ensure_worker(wf_stream *s)
{
    if (!s->has_worker && wf__thread_create(&s->worker, NULL, worker_main, s) == 0)
        s->has_worker = true;
}

void wf__stream_kick(wf_stream *s)
{
    wf__mutex_lock(&s->queue_lock);
    if (!s->busy && s->head) {
        ensure_worker(s);
        pthread_cond_signal(&s->work_ready);
    }
    wf__mutex_unlock(&s->queue_lock);
}

/* With the queue locked: whether every task up to `ticket` has finished and
 * every batch opened up to `batch` has closed. */
static bool reached(wf_stream *s, uint64_t ticket, uint64_t batch)
{
    if (atomic_load_explicit(&s->done, memory_order_relaxed) < ticket)
        return false;
    return !s->batches_head || s->batches_head->seq > batch;
}

/* With the queue locked: runs tasks up to `ticket` while the token is free,
 * else waits for progress, until reached(ticket, batch). Tasks run here
 * only depend on work queued before them, so this never waits on itself. */
static void help_until(wf_stream *s, uint64_t ticket, uint64_t batch)
{
    while (!reached(s, ticket, batch)) {
        if (!s->busy && s->head && s->head->queue_seq <= ticket) {
            run_head(s);
            continue;
        }
        s->progress_waiters++;
        wf__cond_wait(&s->progress, &s->queue_lock);
        s->progress_waiters--;
    }
}

void wf__stream_wait_task(wf_stream *s, uint64_t ticket)
{
    if (atomic_load_explicit(&s->done, memory_order_acquire) >= ticket)
        return;
    wf__stream_incref(s); /* a task run here may drop the stream's last other reference */
    wf__mutex_lock(&s->queue_lock);
    help_until(s, ticket, 0);
    wf__mutex_unlock(&s->queue_lock);
    wf__stream_decref(s);
}

void wf__stream_batch_open(wf_stream *s, wf_stream_batch *batch)
{
    wf__mutex_lock(&s->queue_lock);
    batch->seq = ++s->batches_opened;
    batch->next = NULL;
    batch->prev = s->batches_tail;
    if (s->batches_tail)
        s->batches_tail->next = batch;
    else
        s->batches_head = batch;
    s->batches_tail = batch;
    wf__mutex_unlock(&s->queue_lock);
}

void wf__stream_batch_close(wf_stream *s, wf_stream_batch *batch)
{
    wf__mutex_lock(&s->queue_lock);
    if (batch->prev)
        batch->prev->next = batch->next;
    else
        s->batches_head = batch->next;
    if (batch->next)
        batch->next->prev = batch->prev;
    else
        s->batches_tail = batch->prev;
    announce_progress(s);
    wf__mutex_unlock(&s->queue_lock);
}

/* ------------------------------------------------------------ lifetime */

static wf_stream *stream_create(void)
{
    wf__runtime_start();
    wf_stream *s = wf__calloc(1, sizeof *s);
    if (!s) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "wf_stream_new: out of memory");
        return NULL;
    }
    atomic_init(&s->refcount, 1);
    s->device = wf__device_cpu();
    atomic_init(&s->done, 0);
    s->id = atomic_fetch_add(&last_stream_id, 1) + 1;
    wf__mutex_init(&s->queue_lock, WF_LOCK_STREAM_QUEUE);
    pthread_cond_init(&s->work_ready, NULL);
    pthread_cond_init(&s->progress, NULL);
    if (wf__thread_create(&s->worker, NULL, worker_main, s) != 0) {
        stream_free_memory(s);
        wf__error(WF_ERR_OUT_OF_MEMORY, "wf_stream_new: cannot start a worker thread");
        return NULL;
    }
    s->has_worker = true;
    registry_add(s);
    return s;
}

/* Every node holds its stream; the default stream's count is skipped so
 * threads building on it do not all hit one cache line. */
wf_stream *wf__stream_incref(wf_stream *s)
{
    if (!s->immortal)
        atomic_fetch_add_explicit(&s->refcount, 1, memory_order_relaxed);
    return s;
}

/* The last reference: stop the worker once it is idle and free the stream.
 * The releasing thread joins the worker only when the worker has nothing
 * left to run but its exit: a worker inside user code (a deferred destructor
 * or deleter), or with such code still queued, may wait for a lock the
 * releasing thread holds (a binding's interpreter lock), so it is detached
 * and frees the stream on its way out. So does a worker that dropped the
 * last reference itself (it cannot join itself). */
static void stream_destroy(wf_stream *s)
{
    registry_remove(s);
    wf__mutex_lock(&s->queue_lock);
    bool has_worker = s->has_worker; /* false: a fork child never queued work on it */
    bool self = has_worker && pthread_equal(pthread_self(), s->worker);
    bool worker_busy = s->worker_in_user_code || !wf__free_deferred_list_empty(&s->deferred);
    pthread_t worker = s->worker;
    s->shutdown = true;
    s->worker_frees = has_worker && (self || worker_busy);
    bool join = has_worker && !s->worker_frees;
    pthread_cond_signal(&s->work_ready);
    wf__mutex_unlock(&s->queue_lock);
    if (!has_worker) {
        stream_free_memory(s);
        return;
    }
    if (!join) {
        pthread_detach(worker); /* `s` may be freed already: only the copied id is used */
        return;
    }
    pthread_join(worker, NULL);
    stream_free_memory(s);
}

void wf__stream_decref(wf_stream *s)
{
    if (s->immortal)
        return;
    if (atomic_fetch_sub_explicit(&s->refcount, 1, memory_order_acq_rel) == 1)
        stream_destroy(s);
}

static pthread_once_t default_once = PTHREAD_ONCE_INIT;

/* The intra-op pool starts with the default stream: both live as long as the
 * process, so thread counts are stable from the first evaluation on. */
static void create_default_stream(void)
{
    wf__pool_start();
    registry.default_stream = stream_create();
    if (registry.default_stream)
        registry.default_stream->immortal = true;
}

wf_stream *wf__stream_default(void)
{
    pthread_once(&default_once, create_default_stream);
    if (!registry.default_stream)
        wf__error(WF_ERR_OUT_OF_MEMORY, "cannot create the default stream");
    return registry.default_stream;
}

/* ------------------------------------------------------------ per-thread stack */

struct push_stack {
    wf_stream **items;
    int count, capacity;
    wf_stream *base; /* wf_stream_set_thread_default's (a reference), or NULL */
};

static _Thread_local struct push_stack *thread_pushes;
static pthread_key_t push_key;
static pthread_once_t push_key_once = PTHREAD_ONCE_INIT;

static void release_pushes(void *p)
{
    struct push_stack *stack = p;
    while (stack->count > 0)
        wf__stream_decref(stack->items[--stack->count]);
    if (stack->base)
        wf__stream_decref(stack->base);
    free(stack->items);
    free(stack);
    thread_pushes = NULL;
}

static void make_push_key(void) { pthread_key_create(&push_key, release_pushes); }

void *wf__stream_push_suspend(void)
{
    struct push_stack *saved = thread_pushes;
    thread_pushes = NULL;
    return saved;
}

void wf__stream_push_resume(void *saved)
{
    if (thread_pushes == saved)
        return;
    if (thread_pushes) /* made by the hidden code: release what it left pushed */
        release_pushes(thread_pushes);
    thread_pushes = saved;
    pthread_setspecific(push_key, saved);
}

wf_stream *wf__stream_current(void)
{
    struct push_stack *stack = thread_pushes;
    if (stack && stack->count > 0)
        return stack->items[stack->count - 1];
    if (stack && stack->base)
        return stack->base;
    return wf__stream_default();
}

wf_stream *wf__stream_of(const wf_array *n)
{
    if (n->prim && n->prim->stream)
        return n->prim->stream(n->params);
    if (n->stream || !n->prim)
        return n->stream;
    return wf__stream_default();
}

/* This thread's stack, made on first use (NULL, with the error recorded
 * for `fname`, when it cannot be allocated). */
static struct push_stack *thread_stack(const char *fname)
{
    struct push_stack *stack = thread_pushes;
    if (!stack) {
        pthread_once(&push_key_once, make_push_key);
        stack = wf__calloc(1, sizeof *stack);
        if (!stack) {
            wf__error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory", fname);
            return NULL;
        }
        pthread_setspecific(push_key, stack);
        thread_pushes = stack;
    }
    return stack;
}

wf_status wf_stream_push(wf_stream *s)
{
    if (!s)
        return wf__error(WF_ERR_NULL_ARGUMENT, "wf_stream_push: stream is NULL");
    struct push_stack *stack = thread_stack("wf_stream_push");
    if (!stack)
        return WF_ERR_OUT_OF_MEMORY;
    if (stack->count == stack->capacity) {
        int grown = stack->capacity ? stack->capacity * 2 : 4;
        wf_stream **items = wf__realloc(stack->items, (size_t)grown * sizeof *items);
        if (!items)
            return wf__error(WF_ERR_OUT_OF_MEMORY, "wf_stream_push: out of memory");
        stack->items = items;
        stack->capacity = grown;
    }
    stack->items[stack->count++] = wf__stream_incref(s);
    return WF_OK;
}

wf_status wf_stream_pop(void)
{
    struct push_stack *stack = thread_pushes;
    if (!stack || stack->count == 0)
        return wf__error(WF_ERR_MISUSE, "wf_stream_pop: no stream was pushed on this thread");
    wf__stream_decref(stack->items[--stack->count]);
    return WF_OK;
}

wf_status wf_stream_set_thread_default(wf_stream *s)
{
    if (!s && !thread_pushes)
        return WF_OK; /* nothing was set: nothing to undo */
    struct push_stack *stack = thread_stack("wf_stream_set_thread_default");
    if (!stack)
        return WF_ERR_OUT_OF_MEMORY;
    wf_stream *old = stack->base;
    stack->base = s ? wf__stream_incref(s) : NULL;
    if (old)
        wf__stream_decref(old);
    return WF_OK;
}

wf_stream *wf_thread_default_stream(void)
{
    struct push_stack *stack = thread_pushes;
    if (stack && stack->base)
        return wf__stream_incref(stack->base);
    return wf_default_stream();
}

wf_stream *wf_default_stream(void)
{
    wf_stream *s = wf__stream_default();
    return s ? wf__stream_incref(s) : NULL;
}

wf_stream *wf_current_stream(void)
{
    wf_stream *s = wf__stream_current();
    return s ? wf__stream_incref(s) : NULL;
}

wf_stream *wf_stream_new(void) { return stream_create(); }

wf_stream *wf_stream_retain(wf_stream *s) { return s ? wf__stream_incref(s) : NULL; }

void wf_stream_release(wf_stream *s)
{
    if (s)
        wf__stream_decref(s);
}

wf_status wf_stream_synchronize(wf_stream *s)
{
    if (!s)
        return wf__error(WF_ERR_NULL_ARGUMENT, "wf_stream_synchronize: stream is NULL");
    if (wf__eval_in_user_code())
        return wf__error(WF_ERR_MISUSE,
                         "wf_stream_synchronize: cannot wait for a stream inside a kernel");
    wf__mutex_lock(&s->queue_lock);
    const uint64_t ticket = s->enqueued;
    help_until(s, ticket, s->batches_opened);
    wf_status failure = WF_OK;
    char *message = NULL;
    if (s->failure_ticket != 0 && s->failure_ticket <= ticket) {
        failure = s->failure;
        message = s->failure_message;
        s->failure_ticket = 0;
        s->failure_message = NULL;
    }
    wf__mutex_unlock(&s->queue_lock);
    if (failure == WF_OK)
        return WF_OK;
    wf_status st = wf__error(failure, "wf_stream_synchronize: a task queued on the stream failed: %s",
                             message ? message : "(no message)");
    free(message);
    return st;
}

wf_device *wf__stream_device(const wf_stream *s) { return s->device; }

/* ------------------------------------------------------------ fork */

static void fork_prepare(void)
{
    wf__mutex_lock_for_fork(&registry.lock);
    for (wf_stream *s = registry.first; s; s = s->registry_next)
        wf__mutex_lock_for_fork(&s->queue_lock);
}

static void fork_parent(void)
{
    for (wf_stream *s = registry.first; s; s = s->registry_next)
        wf__mutex_unlock_for_fork(&s->queue_lock);
    wf__mutex_unlock_for_fork(&registry.lock);
}

/* Alone in the child, after the node pool failed every task that was
 * queued or running: the queue's references to them are leaked (dropping
 * them could run user destructors inside fork()). */
static void stream_forget_threads(wf_stream *s)
{
    s->head = s->tail = NULL;
    atomic_store_explicit(&s->done, s->enqueued, memory_order_relaxed);
    s->batches_head = s->batches_tail = NULL;
    s->busy = false;
    s->progress_waiters = 0;
    s->deferred = (wf_deferred_list){0}; /* the parent's worker runs them: leaked here */
    s->has_worker = false;
    pthread_cond_init(&s->work_ready, NULL);
    pthread_cond_init(&s->progress, NULL);
}

static void fork_child(void)
{
    for (wf_stream *s = registry.first; s; s = s->registry_next)
        stream_forget_threads(s);
    fork_parent();
}

static const wf_fork_hooks fork_hooks = {.level = WF_LOCK_STREAM_REGISTRY,
                                         .prepare = fork_prepare,
                                         .parent = fork_parent,
                                         .child = fork_child};

static void register_fork_hooks(void) __attribute__((constructor));
static void register_fork_hooks(void) { wf__fork_hooks_register(&fork_hooks); }
