/*
 * repro_tracing_leak: tracing state must be per thread (DESIGN C4).
 *
 * The failure shape (MLX 0.31): a process-global "is training" counter let
 * one thread's gradient computation switch other threads' attention calls
 * onto the training path. Here one thread computes gradients of a function
 * using scaled_dot_product_attention in a loop, while another calls
 * scaled_dot_product_attention 1,000 times outside any transform. The
 * second thread must never take the training path: its thread-local
 * counter stays 0 and every node it builds is the fused primitive.
 *
 * The two threads take turns so the overlap is certain: the grad thread's
 * function, once inside the trace, waits until the attention thread has
 * made a batch of calls. Exit 0 pass, 1 a leak (or a hang past the
 * deadline), 2 the scenario never happened (the first thread was never
 * inside a grad trace while the second was calling).
 */
#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/array.h"
#include "ops/fast.h"
#include "prim/linalg.h"
#include "repro/repro_common.h"
#include "weft.h"

enum { CALLS = 1000, BATCH = 10, DEADLINE_S = 120 };

/* Odd while the grad thread's body runs (inside its trace), even outside;
 * the attention thread releases an odd epoch once it made a batch in it. */
static atomic_int epoch, released_epoch;
static atomic_int attention_done;
static atomic_int overlapped;    /* attention calls made while it was */
static atomic_int leaked;        /* attention calls that took the training path */
static atomic_int grad_rounds, grad_failures;
static atomic_uint_fast64_t grad_thread_training_calls;

static wf_array *q, *k, *v;

/* loss(q) = sum(attention(q, k, v)^2) */
static wf_status attention_loss(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                size_t *nout)
{
    (void)payload;
    (void)n;
    wf_scope_begin();
    wf_array *a = wf_scaled_dot_product_attention(in[0], k, v, 0.5, NULL, true);
    wf_array *loss = wf_sum(wf_square(a), NULL, 0, false);
    double unused; /* data-dependent code is allowed inside the trace */
    if (loss)
        wf_array_item(loss, &unused);
    const int mine = atomic_load(&epoch) + 1;
    atomic_store(&epoch, mine);
    while (atomic_load(&released_epoch) != mine && !atomic_load(&attention_done))
        sched_yield();
    atomic_store(&epoch, mine + 1);
    out[0] = loss ? wf_keep(loss) : NULL;
    wf_scope_end();
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void *grad_thread(void *arg)
{
    (void)arg;
    wf_fn *f = wf_fn_new(attention_loss, NULL, NULL), *g = wf_grad(f, NULL, 0);
    while (!atomic_load(&attention_done)) {
        wf_array *dq = NULL;
        size_t n = 1;
        if (wf_fn_call(g, &q, 1, &dq, &n) == WF_OK && wf_eval(&dq, 1) == WF_OK)
            atomic_fetch_add(&grad_rounds, 1);
        else
            atomic_fetch_add(&grad_failures, 1);
        wf_release(dq);
    }
    atomic_store(&grad_thread_training_calls, wf__sdpa_training_path_calls());
    wf_fn_release(g);
    wf_fn_release(f);
    return NULL;
}

static void *attention_thread(void *arg)
{
    (void)arg;
    int seen = 0;
    for (int i = 0; i < CALLS; i++) {
        if (i % BATCH == 0) { /* wait for the other thread to enter a new trace */
            while ((seen = atomic_load(&epoch)) % 2 == 0 || seen == atomic_load(&released_epoch))
                sched_yield();
        }
        const bool inside_before = atomic_load(&epoch) == seen;
        wf_array *a = wf_scaled_dot_product_attention(q, k, v, 0.5, NULL, true);
        if (inside_before && atomic_load(&epoch) == seen)
            atomic_fetch_add(&overlapped, 1);
        if (!a || a->prim != &wf__prim_sdpa || a->keep_graph)
            atomic_fetch_add(&leaked, 1);
        if (a && i % 100 == 0)
            wf_eval(&a, 1);
        wf_release(a);
        if (i % BATCH == BATCH - 1) /* let that trace end */
            atomic_store(&released_epoch, seen);
    }
    if (wf__sdpa_training_path_calls() != 0)
        atomic_fetch_add(&leaked, 1);
    atomic_store(&attention_done, 1);
    return NULL;
}

static void *round_main(void *arg)
{
    (void)arg;
    pthread_t a, b;
    pthread_create(&a, NULL, grad_thread, NULL);
    pthread_create(&b, NULL, attention_thread, NULL);
    pthread_join(b, NULL);
    pthread_join(a, NULL);
    return NULL;
}

static wf_array *input(int64_t rows, int64_t cols, double phase)
{
    double vals[64];
    for (int64_t i = 0; i < rows * cols; i++)
        vals[i] = sin(phase + 0.7 * (double)i);
    const int64_t shape[2] = {rows, cols};
    return wf_array_from_data(vals, shape, 2, WF_DTYPE_F32);
}

int main(void)
{
    q = input(4, 8, 0.1);
    k = input(6, 8, 0.2);
    v = input(6, 8, 0.3);
    if (!repro_run_with_deadline(round_main, NULL, DEADLINE_S)) {
        printf("repro_tracing_leak: FAILED (no progress within %d s)\n", DEADLINE_S);
        return REPRO_FAIL;
    }
    printf("repro_tracing_leak: %d attention calls, %d made while the other thread was "
           "tracing; %d grad rounds (%llu training-path calls there), %d took the training "
           "path\n",
           CALLS, atomic_load(&overlapped), atomic_load(&grad_rounds),
           (unsigned long long)atomic_load(&grad_thread_training_calls), atomic_load(&leaked));
    wf_release(q);
    wf_release(k);
    wf_release(v);
    if (atomic_load(&leaked) || atomic_load(&grad_failures))
        return REPRO_FAIL;
    if (atomic_load(&overlapped) == 0 || atomic_load(&grad_thread_training_calls) == 0)
        return REPRO_NOT_REACHED;
    return REPRO_PASS;
}
