/*
 * Evaluation: claim/submit walks over shared graphs (DESIGN section 3).
 *
 * A thread walks the graph depth first and claims each PENDING node when it
 * visits it (CAS to CLAIMED). It submits a node once every input is at least
 * SUBMITTED. A node claimed by another thread is waited for until SUBMITTED,
 * on this thread, without looking at its inputs. The nodes a thread holds
 * CLAIMED are exactly its current path, so walks cannot wait in a cycle, and
 * no walk ever waits for a kernel.
 *
 * wf_async_eval queues what it submits on the nodes' streams (FIFO, run by
 * the stream's token holder). wf_eval keeps what it submits in a run list of
 * its own and runs it on the calling thread, in submission order, without
 * any stream's token: nodes are pure, so a shared stream is never a lock.
 *
 * Why nothing waits forever: every node is submitted after its inputs. A
 * thread running a run list, and a token holder running a FIFO, run nodes
 * in submission order and wait only for inputs, which were submitted
 * earlier; helping a FIFO runs only tasks queued no later than the one
 * waited for. A cycle of waits would need submission times that decrease
 * all the way round.
 */
#include "runtime/eval.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "core/deferred_free.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/graph_mode.h"
#include "core/scope.h"
#include "core/thread_state.h"
#include "prim/kernel.h"
#include "runtime/node_wait.h"
#include "runtime/pool.h"
#include "runtime/stream.h"
#include "util/lock.h"
#include "util/fault.h"

static atomic_uint_fast64_t kernels_run;
static atomic_uint_fast64_t cross_stream_waits;

static atomic_int kernels_running, kernels_running_max;
static atomic_int_fast64_t fail_countdown; /* 0: no fault injected */

uint64_t wf__kernels_run(void) { return atomic_load(&kernels_run); }
uint64_t wf__cross_stream_waits(void) { return atomic_load(&cross_stream_waits); }
int wf__kernels_running_max(void) { return atomic_load(&kernels_running_max); }
void wf__kernels_running_max_reset(void) { atomic_store(&kernels_running_max, 0); }
void wf__inject_kernel_failure(int64_t nth) { atomic_store(&fail_countdown, nth); }

static _Thread_local int kernel_depth;

bool wf__eval_in_user_code(void) { return kernel_depth > 0; }
void wf__eval_user_code_begin(void) { kernel_depth++; }
void wf__eval_user_code_end(void) { kernel_depth--; }

/* A fault injected by a test: the nth kernel from the injection fails. */
static bool injected_failure(void)
{
    int_fast64_t left = atomic_load_explicit(&fail_countdown, memory_order_relaxed);
    while (left > 0) {
        if (atomic_compare_exchange_weak(&fail_countdown, &left, left - 1))
            return left == 1;
    }
    return false;
}

static wf_status run_kernel(wf_array *n)
{
    wf__assert_no_locks_held("a kernel");
    if (injected_failure() || wf__fault_hit())
        return wf__error(WF_ERR_KERNEL, "%s: injected kernel failure", n->prim->name);
    int running = atomic_fetch_add(&kernels_running, 1) + 1;
    int seen = atomic_load(&kernels_running_max);
    while (running > seen && !atomic_compare_exchange_weak(&kernels_running_max, &seen, running))
        ;
    /* Streams are CPU streams until devices land. */
    wf_kernel_fn kernel = wf__kernel_lookup(n->prim, WF_DEVICE_KIND_CPU);
    kernel_depth++;
    wf_status status = kernel ? kernel(n, n->inputs, n->ninputs, n->params)
                              : wf__kernel_missing(n->prim, WF_DEVICE_KIND_CPU);
    kernel_depth--;
    atomic_fetch_sub(&kernels_running, 1);
    return status;
}

/* ------------------------------------------------------------ neutral state */

/* What a kernel or a payload destructor must not see or change of the
 * thread that happens to run it (issue 7, item 3): its last error, open
 * scopes, pushed streams, graph-building mode (traces, compile) and the
 * per-thread state of upper layers. */
struct thread_context {
    wf_error_state error;
    void *scopes;
    void *pushes;
    wf_graph_mode graph; /* transforms' and compile's graph-building mode */
    wf_thread_state upper;
};

static void context_neutralize(struct thread_context *saved)
{
    wf__error_save(&saved->error);
    saved->scopes = wf__scope_suspend();
    saved->pushes = wf__stream_push_suspend();
    wf__graph_mode_suspend(&saved->graph);
    wf__thread_state_suspend(&saved->upper);
}

static void context_restore(const struct thread_context *saved)
{
    wf__thread_state_resume(&saved->upper);
    wf__graph_mode_restore(&saved->graph);
    wf__stream_push_resume(saved->pushes);
    wf__scope_resume(saved->scopes);
    wf__error_restore(&saved->error);
}

void wf__eval_run_deferred_frees(void)
{
    wf__assert_no_locks_held("a payload destructor");
    struct thread_context saved;
    context_neutralize(&saved);
    for (;;) { /* a freed node may release more external buffers: now, not deferred */
        wf_array *n = wf__free_deferred_pop();
        wf_deferred_call *call = n ? NULL : wf__free_deferred_call_pop();
        if (n)
            wf__array_free_deferred(n);
        else if (call)
            call->run(call);
        else
            break;
    }
    context_restore(&saved);
}

/* ------------------------------------------------------------ buffer donation
 *
 * A kernel's output may take over the buffer of an input that nobody can
 * read any more (issue 11, item 4): an 8-op element-wise chain then
 * touches one intermediate buffer instead of one per op. The input must be
 * dead, and provably so, before anything is written into it:
 *
 * 1. Who can reach a node. Every path to a node holds a reference: user
 *    handles (and the scopes and slots holding them), consumer nodes' input
 *    lists, a FIFO's queued task, compiled tapes' constants, a transform's
 *    saved values. The only reads without a reference are wf_retain and the
 *    metadata calls on a handle the caller may not own, and both go through
 *    wf__array_try_retain, which never raises a refcount of 0.
 * 2. The check. Node `n` runs on this thread, claimed by it; it does not
 *    keep its graph, so no other thread may read n->inputs (core/array.h).
 *    If input `in` appears k times there and its refcount is exactly k, n's
 *    input list holds every reference. wf__array_retire swaps k for 0 in
 *    one compare-and-swap: from then on no thread can retain the node (a
 *    count of 0 is never revived) and none holds it, so none can retain it
 *    after the check either. The swap fails harmlessly if any reference
 *    was added or dropped meanwhile.
 * 3. The storage. A live view of `in` (a slice, a transpose, a broadcast, a
 *    sibling) holds a reference to the buffer, not the node; so the buffer
 *    must have refcount 1, read after the swap (nothing can add one then:
 *    only a holder of `in` could make a view). External (caller-owned)
 *    buffers are never written.
 * 4. What is never donated: inputs of nodes that keep their graph (built
 *    under a transform or a trace: the backward pass reads them), nodes
 *    that keep their own graph, multi-output primaries, inputs whose shape,
 *    element size or byte count differ from the output's or whose layout
 *    does not fill the buffer from offset 0 (row-major, or dense in another
 *    dim order for WF_PRIM_INPLACE_ANY_LAYOUT: the output then takes that
 *    layout, so only where every input shares that order and a fresh output
 *    would take it too), and any primitive not declaring WF_PRIM_INPLACE
 *    (or WF_PRIM_INPLACE_FIRST: then only input 0, when it is not also
 *    another input, e.g. a scatter's table).
 *
 * A retired input is freed by the detach below instead of being released;
 * if its buffer was shared after all, it is simply not donated. */

static atomic_uint_fast64_t buffers_donated;
static atomic_int donation_on = 1;
static pthread_once_t donation_env_once = PTHREAD_ONCE_INIT;

static void read_donation_env(void)
{
    const char *v = getenv("WEFT_DONATE");
    if (v && strcmp(v, "0") == 0)
        atomic_store(&donation_on, 0);
}

static bool donation_enabled(void)
{
    pthread_once(&donation_env_once, read_donation_env);
    return atomic_load_explicit(&donation_on, memory_order_relaxed) != 0;
}

uint64_t wf__buffers_donated(void) { return atomic_load(&buffers_donated); }

void wf__donation_enable(bool on)
{
    pthread_once(&donation_env_once, read_donation_env);
    atomic_store(&donation_on, on ? 1 : 0);
}

static bool same_shape(const wf_array *a, const wf_array *b)
{
    if (a->ndim != b->ndim)
        return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return false;
    return true;
}

/* The dims of `a` that are not of size 1, by decreasing stride; their count. */
static int dims_by_stride(const wf_array *a, int *order)
{
    int count = 0;
    for (int d = 0; d < a->ndim; d++) {
        if (a->shape[d] == 1)
            continue;
        int j = count++;
        while (j > 0 && a->strides[order[j - 1]] < a->strides[d]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = d;
    }
    return count;
}

/* Whether input `in`, broadcast to n's shape, has strides that decrease
 * along `order` (n's dims); its broadcast dims fit any order. */
static bool follows_order(const wf_array *n, const wf_array *in, const int *order, int count)
{
    int64_t previous = INT64_MAX;
    for (int k = 0; k < count; k++) {
        const int d = order[k] - (n->ndim - in->ndim);
        if (d < 0 || in->shape[d] == 1 || in->strides[d] == 0)
            continue;
        if (in->strides[d] < 0 || in->strides[d] >= previous)
            return false;
        previous = in->strides[d];
    }
    return true;
}

/* A dense donor in another dim order than row-major gives n its layout.
 * n's own output takes that layout only when every input shares the order
 * (backend/cpu/layout.c), so donate it only then: otherwise whether the
 * donation happened - which depends on who else still holds the donor,
 * another thread's timing included - would decide n's layout, and with it
 * the bits of every sum that reads n in memory order. */
static bool donor_keeps_layout(const wf_array *n, const wf_array *donor)
{
    if (donor->row_contiguous)
        return true;
    int order[WF_MAX_NDIM];
    const int count = dims_by_stride(donor, order);
    for (int i = 0; i < n->ninputs; i++)
        if (!follows_order(n, n->inputs[i], order, count))
            return false;
    return true;
}

/* Whether `in`'s storage could serve as `n`'s output (fields fixed once READY). */
static bool donor_layout_fits(const wf_array *n, const wf_array *in, size_t bytes)
{
    const bool layout_fits =
        in->row_contiguous || ((n->prim->flags & WF_PRIM_INPLACE_ANY_LAYOUT) &&
                               wf__is_dense(in->shape, in->strides, in->ndim) &&
                               donor_keeps_layout(n, in));
    return !in->keep_graph && !in->results && same_shape(n, in) &&
           wf_dtype_size(in->dtype) == wf_dtype_size(n->dtype) && layout_fits &&
           in->offset == 0 && in->buffer && !wf__buffer_is_external(in->buffer) &&
           in->buffer->bytes == bytes;
}

static bool buffer_unshared(const wf_buffer *b)
{
    return atomic_load_explicit(&((wf_buffer *)b)->refcount, memory_order_acquire) == 1;
}

static int_fast64_t occurrences(const wf_array *n, const wf_array *in)
{
    int_fast64_t k = 0;
    for (int i = 0; i < n->ninputs; i++)
        k += n->inputs[i] == in;
    return k;
}

/* Before n's kernel: retires at most one input that only n holds (see
 * above) and gives its buffer to n when nobody else shares it. Returns the
 * retired input (freed by the detach), or NULL. */
static wf_array *donate_input(wf_array *n)
{
    const bool first_only = (n->prim->flags & WF_PRIM_INPLACE_FIRST) != 0;
    const unsigned inplace = WF_PRIM_INPLACE | WF_PRIM_INPLACE_FIRST;
    if (n->keep_graph || n->results || !(n->prim->flags & inplace) || n->size == 0 ||
        !donation_enabled())
        return NULL;
    const size_t bytes = (size_t)n->size * wf_dtype_size(n->dtype);
    const int candidates = first_only ? 1 : n->ninputs;
    for (int i = 0; i < candidates; i++) {
        wf_array *in = n->inputs[i];
        if (!donor_layout_fits(n, in, bytes) || !buffer_unshared(in->buffer) ||
            (first_only && occurrences(n, in) != 1))
            continue;
        if (!wf__array_retire(in, occurrences(n, in)))
            continue;
        if (buffer_unshared(in->buffer)) { /* again: no view can appear from now on */
            wf__buffer_forget_derived(in->buffer); /* n overwrites what it was derived from */
            n->buffer = wf__buffer_retain(in->buffer);
            if (n->ndim) /* the kernel writes the output in the donor's layout */
                memcpy(n->strides, in->strides, (size_t)n->ndim * sizeof(int64_t));
            n->row_contiguous = in->row_contiguous;
            atomic_fetch_add_explicit(&buffers_donated, 1, memory_order_relaxed);
        }
        return in;
    }
    return NULL;
}

/* ------------------------------------------------------------ running a node */

/* Records a failed node's status and a copy of its message. When the copy
 * cannot be made (out of memory), or an input's message was lost that way,
 * the message stays NULL and wf__node_failure_message reports the loss. */
static void store_failure(wf_array *n, wf_status status, const char *message)
{
    n->error = status;
    n->error_message = message ? wf__strdup(message) : NULL;
}

/* Waits until input `in` (at least SUBMITTED) is computed. One queued on a
 * FIFO is waited for until its task has finished, so the queue's reference
 * is gone too; this thread helps run that FIFO meanwhile. */
static void wait_input(wf_array *in)
{
    const bool waits = wf__array_state(in) < WF_NODE_READY;
    int evaluation = 0;
    if (waits) { /* a waiting thread leaves its core to others' kernels */
        atomic_fetch_add_explicit(&cross_stream_waits, 1, memory_order_relaxed);
        evaluation = wf__pool_evaluation_pause();
    }
    if (in->queue_seq)
        wf__stream_wait_task(wf__stream_of(in), in->queue_seq);
    else
        wf__node_wait_at_least(in, WF_NODE_READY);
    if (waits)
        wf__pool_evaluation_resume(evaluation);
}

/* Runs a SUBMITTED node whose inputs are SUBMITTED, publishes READY or
 * FAILED, and detaches its inputs unless it keeps its graph. */
static void run_node(wf_array *n)
{
    struct thread_context saved;
    context_neutralize(&saved);
    wf_status status = WF_OK;
    wf_array *retired = NULL;
    /* A collective runs even when an input failed: its kernel tells the
     * other ranks, which would otherwise wait for this one forever. */
    const bool collective = (n->prim->flags & WF_PRIM_COLLECTIVE) != 0;
    for (int i = 0; i < n->ninputs && status == WF_OK; i++) {
        wf_array *in = n->inputs[i];
        wait_input(in);
        if (wf__array_state(in) == WF_NODE_FAILED && !collective) {
            status = in->error;
            store_failure(n, in->error, in->error_message);
        }
    }
    if (status == WF_OK) {
        wf_clear_error(); /* so a kernel's failure message is its own */
        retired = donate_input(n);
        status = run_kernel(n);
        atomic_fetch_add_explicit(&kernels_run, 1, memory_order_relaxed);
        if (status != WF_OK) {
            if (wf_last_error() == WF_OK) /* the kernel gave no message */
                wf__error(status, "%s: the kernel failed (%s)", n->prim->name,
                          wf_status_name(status));
            store_failure(n, status, wf_last_error_message());
            if (n->buffer) {
                wf__buffer_release(n->buffer);
                n->buffer = NULL;
            }
        }
    }
    /* Detach the graph: only this thread touches the inputs now. A node built
     * under a transform keeps them: the transform walks them later. */
    if (!n->keep_graph) {
        for (int i = 0; i < n->ninputs; i++)
            if (n->inputs[i] != retired)
                wf__array_decref(n->inputs[i]);
        if (retired) /* n's references to it were its last */
            wf__array_free_retired(retired);
        n->ninputs = 0;
    }
    wf__node_publish(n, status == WF_OK ? WF_NODE_READY : WF_NODE_FAILED);
    context_restore(&saved);
}

wf_status wf__eval_run_task(wf_array *n, char **message)
{
    wf__pool_evaluation_begin();
    run_node(n);
    wf__pool_evaluation_end();
    wf_status status = WF_OK;
    *message = NULL;
    if (wf__array_state(n) == WF_NODE_FAILED) {
        status = n->error;
        *message = wf__strdup(wf__node_failure_message(n));
    }
    wf__array_decref(n); /* the queue's reference; waiters wait for the ticket too */
    return status;
}

/* ------------------------------------------------------------ the walk */

enum { LOCAL_FRAMES = 32, MAX_STREAMS = 8 };

struct frame {
    wf_array *node;
    int next_input;
};

/* A stream the walk submitted nodes of. */
struct touched {
    wf_stream *stream;     /* held until the evaluation ends */
    wf_stream_batch batch; /* open while this thread runs nodes of the stream */
    bool batch_open;
    bool queued; /* FIFO work was queued: wake the worker at the end */
};

struct walk {
    struct frame *frames;
    size_t count, capacity;
    struct frame local[LOCAL_FRAMES];
    bool run_here;               /* wf_eval: run claimed nodes on this thread */
    wf_array *run_head, *run_tail; /* submitted, not yet run, in order */
    struct touched streams[MAX_STREAMS];
    int nstreams;
    wf_stream *comm[MAX_STREAMS]; /* collectives' streams not woken yet (held) */
    int ncomm;
    bool local_after_comm; /* a node to run here was submitted after a collective */
};

static bool try_claim(wf_array *n)
{
    int expected = WF_NODE_PENDING;
    return atomic_compare_exchange_strong(&n->state, &expected, WF_NODE_CLAIMED);
}

static bool push_frame(struct walk *w, wf_array *n)
{
    if (w->count == w->capacity) {
        size_t grown = w->capacity * 2;
        struct frame *bigger = wf__malloc(grown * sizeof *bigger);
        if (!bigger)
            return false;
        memcpy(bigger, w->frames, w->count * sizeof *bigger);
        if (w->frames != w->local)
            free(w->frames);
        w->frames = bigger;
        w->capacity = grown;
    }
    w->frames[w->count++] = (struct frame){n, 0};
    return true;
}

/* The walk's record of stream `s`, made on first use (with a batch when
 * nodes run here); NULL when the walk tracks as many streams as it can. */
static struct touched *touch(struct walk *w, wf_stream *s)
{
    for (int i = 0; i < w->nstreams; i++)
        if (w->streams[i].stream == s)
            return &w->streams[i];
    if (w->nstreams == MAX_STREAMS)
        return NULL;
    struct touched *t = &w->streams[w->nstreams++];
    *t = (struct touched){.stream = wf__stream_incref(s)};
    if (w->run_here) {
        wf__stream_batch_open(s, &t->batch);
        t->batch_open = true;
    }
    return t;
}

/* A collective goes on its group's stream FIFO, always: that stream's order
 * is the order ranks match collectives in. Under wf_async_eval its worker is
 * woken now. Under wf_eval it is woken once the walk is done, and only if
 * nodes submitted after the collective run here meanwhile (they overlap the
 * communication); otherwise this thread, waiting for the result, runs the
 * collective itself and no thread hand-off delays it. */
static void submit_collective(struct walk *w, wf_array *n, wf_stream *s)
{
    wf__stream_enqueue(s, n);
    for (int i = 0; i < w->ncomm; i++)
        if (w->comm[i] == s)
            return;
    if (w->run_here && w->ncomm < MAX_STREAMS) {
        w->comm[w->ncomm++] = wf__stream_incref(s);
        return;
    }
    wf__stream_incref(s); /* once queued, n may run and free its stream's last reference */
    wf__stream_kick(s);
    wf__stream_decref(s);
}

/* Wakes the workers of the communication streams the walk queued on. */
static void kick_collectives(struct walk *w)
{
    for (int i = 0; i < w->ncomm; i++) {
        wf__stream_kick(w->comm[i]);
        wf__stream_decref(w->comm[i]);
    }
    w->ncomm = 0;
}

/* Submits claimed `n`: onto this walk's run list, or its stream's FIFO. */
static void submit(struct walk *w, wf_array *n)
{
    wf_stream *s = wf__stream_of(n);
    if (n->prim && (n->prim->flags & WF_PRIM_COLLECTIVE)) {
        submit_collective(w, n, s);
        return;
    }
    if (w->ncomm)
        w->local_after_comm = true;
    struct touched *t = touch(w, s);
    if (t && w->run_here) {
        n->queue_next = NULL;
        if (w->run_tail)
            w->run_tail->queue_next = n;
        else
            w->run_head = n;
        w->run_tail = n;
        wf__node_publish(n, WF_NODE_SUBMITTED);
        return;
    }
    if (t) {
        wf__stream_enqueue(s, n);
        t->queued = true;
        return;
    }
    /* Untracked: once queued, `n` may run and free its stream's last reference. */
    wf__stream_incref(s);
    wf__stream_enqueue(s, n);
    wf__stream_kick(s);
    wf__stream_decref(s);
}

/* Out of memory mid-walk: the claimed path must not stay CLAIMED. */
static wf_status fail_path(struct walk *w, wf_array *claimed)
{
    wf_status status = wf__error(WF_ERR_OUT_OF_MEMORY, "wf_eval: out of memory walking the graph");
    store_failure(claimed, status, wf_last_error_message());
    wf__node_publish(claimed, WF_NODE_FAILED);
    while (w->count) {
        wf_array *n = w->frames[--w->count].node;
        store_failure(n, status, wf_last_error_message());
        wf__node_publish(n, WF_NODE_FAILED);
    }
    return status;
}

/* Visits `n`: claims it and pushes it, or waits until its claimer submitted it. */
static wf_status visit(struct walk *w, wf_array *n)
{
    if (try_claim(n))
        return push_frame(w, n) ? WF_OK : fail_path(w, n);
    wf__node_wait_at_least(n, WF_NODE_SUBMITTED);
    return WF_OK;
}

static wf_status walk_from(struct walk *w, wf_array *root)
{
    wf_status status = visit(w, root);
    while (status == WF_OK && w->count) {
        struct frame *f = &w->frames[w->count - 1];
        if (f->next_input < f->node->ninputs) {
            status = visit(w, f->node->inputs[f->next_input++]);
        } else {
            w->count--;
            submit(w, f->node);
        }
    }
    return status;
}

static wf_status walk_roots(struct walk *w, wf_array *const *arrays, size_t count)
{
    w->frames = w->local;
    w->capacity = LOCAL_FRAMES;
    wf_status status = WF_OK;
    for (size_t i = 0; i < count && status == WF_OK; i++)
        status = walk_from(w, arrays[i]);
    if (w->frames != w->local)
        free(w->frames);
    return status;
}

/* Runs the run list in order. A node is held by the not yet run consumer
 * that led the walk to it (or is a root the caller holds). */
static void run_claimed(struct walk *w)
{
    wf_array *n;
    wf__pool_evaluation_begin();
    while ((n = w->run_head)) {
        w->run_head = n->queue_next;
        n->queue_next = NULL;
        run_node(n);
    }
    wf__pool_evaluation_end();
    w->run_tail = NULL;
}

/* Closes batches, wakes workers with queued work, drops the stream references. */
static void finish(struct walk *w)
{
    for (int i = 0; i < w->nstreams; i++) {
        struct touched *t = &w->streams[i];
        if (t->batch_open)
            wf__stream_batch_close(t->stream, &t->batch);
        if (t->queued)
            wf__stream_kick(t->stream);
        wf__stream_decref(t->stream);
    }
}

static wf_status check_roots(const char *op, wf_array *const *arrays, size_t count)
{
    if (kernel_depth > 0)
        return wf__error(WF_ERR_MISUSE, "%s: cannot evaluate inside a kernel", op);
    if (!arrays && count)
        return wf__error(WF_ERR_NULL_ARGUMENT, "%s: arrays is NULL", op);
    if (!wf__stream_default()) /* nodes without a stream of their own run there */
        return wf_last_error();
    for (size_t i = 0; i < count; i++)
        if (!wf__array_check(arrays[i], op, "an array"))
            return wf_last_error();
    for (size_t i = 0; i < count; i++)
        if (wf__array_is_placeholder(arrays[i]))
            return wf__error(WF_ERR_MISUSE,
                             "%s: an array is a placeholder (a tracer) or built from one: "
                             "it has no value to compute", op);
    return WF_OK;
}

/* Waits until root `a` (at least SUBMITTED) is computed, and if a FIFO task
 * computed it, until that task let go of it: then the caller's release is
 * the last and frees its memory (issue 7, item 7). */
static void wait_root(wf_array *a)
{
    if (a->queue_seq)
        wf__stream_wait_task(wf__stream_of(a), a->queue_seq);
    else
        wf__node_wait_at_least(a, WF_NODE_READY);
}

static wf_status root_status(wf_array *a)
{
    if (wf__array_state(a) == WF_NODE_FAILED)
        return wf__error(a->error, "%s", wf__node_failure_message(a));
    return WF_OK;
}

wf_status wf_eval(wf_array *const *arrays, size_t count)
{
    wf_status status = check_roots("wf_eval", arrays, count);
    if (status != WF_OK)
        return status;
    struct walk w = {.run_here = true};
    wf__free_defer_begin(); /* until the run list is empty and the batches closed */
    status = walk_roots(&w, arrays, count);
    if (w.local_after_comm || status != WF_OK)
        kick_collectives(&w);
    run_claimed(&w); /* even after a failed walk: other threads may wait for these */
    finish(&w);
    if (wf__free_defer_end())
        wf__eval_run_deferred_frees();
    if (status != WF_OK) /* some roots were never submitted: do not wait */
        return status;
    for (size_t i = 0; i < count; i++)
        wait_root(arrays[i]);
    kick_collectives(&w); /* this thread ran them while waiting; drops the references */
    for (size_t i = 0; i < count; i++)
        if (root_status(arrays[i]) != WF_OK)
            return wf_last_error();
    return WF_OK;
}

wf_status wf_async_eval(wf_array *const *arrays, size_t count)
{
    wf_status status = check_roots("wf_async_eval", arrays, count);
    if (status != WF_OK)
        return status;
    struct walk w = {.run_here = false};
    status = walk_roots(&w, arrays, count);
    finish(&w);
    return status;
}

/* ------------------------------------------------------------ data access */

wf_status wf__eval_one(wf_array *a, const char *op)
{
    if (!wf__array_check(a, op, "the array"))
        return wf_last_error();
    if (kernel_depth > 0 && wf__array_state(a) < WF_NODE_READY)
        return wf__error(WF_ERR_MISUSE, "%s: cannot evaluate inside a kernel", op);
    if (wf__array_state(a) < WF_NODE_READY) {
        wf_status status = wf_eval(&a, 1);
        if (status != WF_OK)
            return status;
    }
    return root_status(a);
}

wf_status wf_array_data(wf_array *a, const void **out)
{
    if (!out)
        return wf__error(WF_ERR_NULL_ARGUMENT, "wf_array_data: out is NULL");
    *out = NULL;
    wf_status status = wf__eval_one(a, "wf_array_data");
    if (status != WF_OK)
        return status;
    if (a->row_contiguous) {
        *out = wf__array_data_ptr(a);
        return WF_OK;
    }
    wf_buffer *dense = atomic_load(&a->dense_copy);
    if (!dense) {
        wf_buffer *fresh = wf__buffer_alloc((size_t)a->size * wf_dtype_size(a->dtype));
        if (!fresh)
            return wf_last_error();
        status = wf__cpu_copy_to_contiguous(a, fresh->data);
        if (status != WF_OK) {
            wf__buffer_release(fresh);
            return status;
        }
        wf_buffer *expected = NULL;
        if (atomic_compare_exchange_strong(&a->dense_copy, &expected, fresh)) {
            dense = fresh;
        } else { /* another thread made it first */
            wf__buffer_release(fresh);
            dense = expected;
        }
    }
    *out = dense->data;
    return WF_OK;
}

wf_status wf_array_data_strided(wf_array *a, const void **out, int64_t *strides)
{
    if (!out || !strides)
        return wf__error(WF_ERR_NULL_ARGUMENT, "wf_array_data_strided: out or strides is NULL");
    *out = NULL;
    wf_status status = wf__eval_one(a, "wf_array_data_strided");
    if (status != WF_OK)
        return status;
    for (int d = 0; d < a->ndim; d++)
        strides[d] = a->strides[d];
    *out = wf__array_data_ptr(a);
    return WF_OK;
}

wf_status wf_array_copy_to(wf_array *a, void *dst, size_t dst_bytes)
{
    wf_status status = wf__eval_one(a, "wf_array_copy_to");
    if (status != WF_OK)
        return status;
    size_t need = (size_t)a->size * wf_dtype_size(a->dtype);
    if (!dst && need)
        return wf__error(WF_ERR_NULL_ARGUMENT, "wf_array_copy_to: dst is NULL");
    if (dst_bytes < need)
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "wf_array_copy_to: dst has %zu bytes, the array needs %zu", dst_bytes,
                         need);
    if (!need)
        return WF_OK;
    if (a->row_contiguous) {
        memcpy(dst, wf__array_data_ptr(a), need);
        return WF_OK;
    }
    return wf__cpu_copy_to_contiguous(a, dst);
}

wf_status wf_array_item(wf_array *a, double *out)
{
    if (!out)
        return wf__error(WF_ERR_NULL_ARGUMENT, "wf_array_item: out is NULL");
    if (!wf__array_check(a, "wf_array_item", "the array"))
        return wf_last_error();
    if (a->size != 1)
        return wf__error(WF_ERR_SHAPE, "wf_array_item: the array has %lld elements, not 1",
                         (long long)a->size);
    wf_status status = wf__eval_one(a, "wf_array_item");
    if (status != WF_OK)
        return status;
    *out = wf__load_as_double(wf__array_data_ptr(a), a->dtype, 0);
    return WF_OK;
}
