/*
 * Evaluation: claim/submit walks over shared graphs (DESIGN section 3).
 *
 * A thread walks the graph depth first and claims each PENDING node when it
 * visits it (CAS to CLAIMED). It enqueues a node once every input is at least
 * SUBMITTED. A node claimed by another thread is waited for until SUBMITTED,
 * on this thread, without looking at its inputs. The nodes a thread holds
 * CLAIMED are exactly its current path, so waits cannot form a cycle, and no
 * walk ever waits for a kernel. A node is queued only after its inputs are
 * queued, so a stream never waits for work that is not ahead of it somewhere.
 */
#include "runtime/eval.h"

#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/scope.h"
#include "prim/kernel.h"
#include "runtime/node_wait.h"
#include "runtime/stream.h"
#include "util/lock.h"

static atomic_uint_fast64_t kernels_run;
static atomic_uint_fast64_t cross_stream_waits;

static atomic_int kernels_running, kernels_running_max;
static atomic_int_fast64_t fail_countdown; /* 0: no fault injected */

uint64_t wf__kernels_run(void) { return atomic_load(&kernels_run); }
uint64_t wf__cross_stream_waits(void) { return atomic_load(&cross_stream_waits); }
int wf__kernels_running_max(void) { return atomic_load(&kernels_running_max); }
void wf__kernels_running_max_reset(void) { atomic_store(&kernels_running_max, 0); }
void wf__inject_kernel_failure(int64_t nth) { atomic_store(&fail_countdown, nth); }

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
    if (injected_failure())
        return wf__error(WF_ERR_KERNEL, "%s: injected kernel failure", n->prim->name);
    int running = atomic_fetch_add(&kernels_running, 1) + 1;
    int seen = atomic_load(&kernels_running_max);
    while (running > seen && !atomic_compare_exchange_weak(&kernels_running_max, &seen, running))
        ;
    /* Streams are CPU streams until devices land. */
    wf_kernel_fn kernel = wf__kernel_lookup(n->prim, WF_DEVICE_KIND_CPU);
    wf_status status = kernel ? kernel(n, n->inputs, n->ninputs, n->params)
                              : wf__kernel_missing(n->prim, WF_DEVICE_KIND_CPU);
    atomic_fetch_sub(&kernels_running, 1);
    return status;
}

/* ------------------------------------------------------------ running a node */

static void store_failure(wf_array *n, wf_status status, const char *message)
{
    n->error = status;
    n->error_message = strdup(message ? message : "");
}

void wf__eval_run_task(wf_array *n)
{
    /* The task may belong to another thread: keep this thread's last error. */
    wf_error_state caller_error;
    wf__error_save(&caller_error);
    wf_status status = WF_OK;
    for (int i = 0; i < n->ninputs && status == WF_OK; i++) {
        wf_array *in = n->inputs[i];
        /* Inputs on this stream ran before; others were queued before us. */
        if (wf__array_state(in) < WF_NODE_READY) {
            atomic_fetch_add_explicit(&cross_stream_waits, 1, memory_order_relaxed);
            wf__node_wait_at_least(in, WF_NODE_READY);
        }
        if (wf__array_state(in) == WF_NODE_FAILED) {
            status = in->error;
            store_failure(n, in->error, in->error_message);
        }
    }
    if (status == WF_OK) {
        wf_clear_error(); /* so a kernel's failure message is its own */
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
    /* Detach the graph: only this task touches the inputs now. A node built
     * under a transform keeps them: the transform walks them later. */
    if (!n->keep_graph) {
        for (int i = 0; i < n->ninputs; i++)
            wf__array_decref(n->inputs[i]);
        n->ninputs = 0;
    }
    wf__node_publish(n, status == WF_OK ? WF_NODE_READY : WF_NODE_FAILED);
    wf__array_decref(n); /* the queue's reference */
    wf__error_restore(&caller_error);
}

/* ------------------------------------------------------------ the walk */

enum { LOCAL_FRAMES = 32, MAX_TOUCHED = 8 };

struct frame {
    wf_array *node;
    int next_input;
};

struct walk {
    struct frame *frames;
    size_t count, capacity;
    struct frame local[LOCAL_FRAMES];
    wf_stream *touched[MAX_TOUCHED]; /* streams to wake when the walk ends (held) */
    int ntouched;
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
        struct frame *bigger = malloc(grown * sizeof *bigger);
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

/* Queues `n`. The walk holds a reference to each stream it will kick: once
 * queued, `n` may run and be freed, and with it its stream's last reference. */
static void submit(struct walk *w, wf_array *n)
{
    wf_stream *s = wf__stream_of(n);
    for (int i = 0; i < w->ntouched; i++) {
        if (w->touched[i] == s) {
            wf__stream_enqueue(s, n);
            return;
        }
    }
    wf__stream_incref(s);
    wf__stream_enqueue(s, n);
    if (w->ntouched < MAX_TOUCHED) {
        w->touched[w->ntouched++] = s;
    } else {
        wf__stream_kick(s);
        wf__stream_decref(s);
    }
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

/* Visits `n`: claims it and pushes it, or waits until its claimer queued it. */
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

static _Thread_local int user_code_depth;

void wf__eval_user_code_begin(void) { user_code_depth++; }
void wf__eval_user_code_end(void) { user_code_depth--; }
bool wf__eval_in_user_code(void) { return user_code_depth > 0; }

static wf_status check_roots(const char *op, wf_array *const *arrays, size_t count)
{
    if (user_code_depth > 0)
        return wf__error(WF_ERR_MISUSE, "%s: cannot evaluate inside a custom kernel", op);
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

/* Walks every root; kicks every stream touched except `keep_for_self`. */
static wf_status schedule(wf_array *const *arrays, size_t count, wf_stream *keep_for_self)
{
    struct walk w = {.capacity = LOCAL_FRAMES};
    w.frames = w.local;
    wf_status status = WF_OK;
    for (size_t i = 0; i < count && status == WF_OK; i++)
        status = walk_from(&w, arrays[i]);
    for (int i = 0; i < w.ntouched; i++) {
        if (w.touched[i] != keep_for_self)
            wf__stream_kick(w.touched[i]);
        wf__stream_decref(w.touched[i]);
    }
    if (w.frames != w.local)
        free(w.frames);
    return status;
}

static wf_status root_status(wf_array *a)
{
    if (wf__array_state(a) == WF_NODE_FAILED)
        return wf__error(a->error, "%s", a->error_message ? a->error_message : "");
    return WF_OK;
}

wf_status wf_eval(wf_array *const *arrays, size_t count)
{
    wf_status status = check_roots("wf_eval", arrays, count);
    if (status != WF_OK)
        return status;
    /* This thread runs the first root's stream itself when it is idle: a
     * cross-thread wake-up costs more than a small kernel. */
    wf_stream *own = count ? wf__stream_of(arrays[0]) : NULL;
    status = schedule(arrays, count, own);
    if (status != WF_OK) { /* some roots were never queued: do not wait */
        if (own)
            wf__stream_kick(own);
        return status;
    }
    for (size_t i = 0; i < count; i++) {
        wf_array *a = arrays[i];
        if (wf__array_state(a) < WF_NODE_READY)
            wf__stream_help_until_done(wf__stream_of(a), a);
        else if (i == 0 && own) /* not kicked by schedule: work there for later roots */
            wf__stream_kick(own);
    }
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
    return schedule(arrays, count, NULL);
}

/* ------------------------------------------------------------ data access */

wf_status wf__eval_one(wf_array *a, const char *op)
{
    if (!wf__array_check(a, op, "the array"))
        return wf_last_error();
    if (user_code_depth > 0 && wf__array_state(a) < WF_NODE_READY)
        return wf__error(WF_ERR_MISUSE, "%s: cannot evaluate inside a custom kernel", op);
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
