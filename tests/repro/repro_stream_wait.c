/*
 * Cross-stream waits must never hang (DESIGN section 3: a wait is enqueued
 * only after what it waits for has been enqueued).
 *
 * Round shape 1: a long chain is queued on stream A (wf_async_eval); an array
 * on stream B adds to its result and is evaluated from B's side. B's node
 * must wait for A's last node (this thread helps A's queue meanwhile).
 * Round shape 2: two threads on two streams build graphs that depend on each
 * other's nodes and evaluate them at the same time.
 *
 * Exit 0: every round finished in time with the right values; 1: a round hung
 * or was wrong; 2: no task ever had to wait for another stream (the scenario
 * was never exercised).
 */
#include <stdlib.h>

#include "core/array.h"
#include "repro_common.h"
#include "weft.h"

enum { ROUNDS = 40, CHAIN = 300, DEADLINE_SECONDS = 20, N = 4096 };

static bool failed;

static void fail(const char *what)
{
    fprintf(stderr, "repro_stream_wait: %s (%s)\n", what, wf_last_error_message());
    failed = true;
}

static bool first_equals(wf_array *a, double expected)
{
    const float *data;
    if (wf_array_data(a, (const void **)&data) != WF_OK)
        return false;
    return data[0] == (float)expected && data[N - 1] == (float)expected;
}

static void *chain_then_other_stream(void *arg)
{
    (void)arg;
    wf_stream *sa = wf_stream_new(), *sb = wf_stream_new();
    int64_t n = N;
    wf_scope_begin();
    wf_stream_push(sa);
    wf_array *one = wf_ones(&n, 1, WF_DTYPE_F32);
    wf_array *x = one;
    for (int i = 0; i < CHAIN; i++)
        x = wf_add(x, one);
    wf_stream_pop();
    if (wf_async_eval(&x, 1) != WF_OK)
        fail("queueing the chain failed");
    wf_stream_push(sb);
    wf_array *y = wf_add(x, one);
    wf_stream_pop();
    if (wf_eval(&y, 1) != WF_OK || !first_equals(y, CHAIN + 2))
        fail("cross-stream chain gave a wrong result");
    wf_scope_end();
    wf_stream_release(sa);
    wf_stream_release(sb);
    return NULL;
}

struct crossed {
    wf_stream *stream;
    wf_array *mine, *theirs; /* built before the threads start */
    wf_array *result;
    pthread_barrier_t *barrier;
};

static void *eval_crossed(void *arg)
{
    struct crossed *c = arg;
    wf_stream_push(c->stream);
    c->result = wf_add(c->mine, c->theirs);
    wf_stream_pop();
    pthread_barrier_wait(c->barrier);
    if (wf_eval(&c->result, 1) != WF_OK)
        fail("crossed evaluation failed");
    return NULL;
}

static void *two_threads_crossed(void *arg)
{
    (void)arg;
    wf_stream *sa = wf_stream_new(), *sb = wf_stream_new();
    int64_t n = N;
    wf_array *base = wf_ones(&n, 1, WF_DTYPE_F32);
    wf_array *on_a = NULL, *on_b = NULL;
    wf_stream_push(sa);
    on_a = wf_retain(base);
    for (int i = 0; i < CHAIN / 2; i++) {
        wf_array *next = wf_add(on_a, base);
        wf_release(on_a);
        on_a = next;
    }
    wf_stream_pop();
    wf_stream_push(sb);
    on_b = wf_multiply(base, base);
    for (int i = 0; i < CHAIN / 2; i++) {
        wf_array *next = wf_add(on_b, base);
        wf_release(on_b);
        on_b = next;
    }
    wf_stream_pop();
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, 2);
    struct crossed ca = {sa, on_a, on_b, NULL, &barrier};
    struct crossed cb = {sb, on_b, on_a, NULL, &barrier};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, eval_crossed, &ca);
    pthread_create(&tb, NULL, eval_crossed, &cb);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_barrier_destroy(&barrier);
    double expected = (1 + CHAIN / 2) + (1 + CHAIN / 2);
    if (!first_equals(ca.result, expected) || !first_equals(cb.result, expected))
        fail("crossed graphs gave a wrong result");
    wf_release(ca.result);
    wf_release(cb.result);
    wf_release(on_a);
    wf_release(on_b);
    wf_release(base);
    wf_stream_release(sa);
    wf_stream_release(sb);
    return NULL;
}

int main(void)
{
    uint64_t waits_before = wf__cross_stream_waits();
    for (int round = 0; round < ROUNDS && !failed; round++) {
        void *(*shape)(void *) = round % 2 ? two_threads_crossed : chain_then_other_stream;
        if (!repro_run_with_deadline(shape, NULL, DEADLINE_SECONDS)) {
            fprintf(stderr, "repro_stream_wait: round %d hung for %d s\n", round,
                    DEADLINE_SECONDS);
            return REPRO_FAIL;
        }
    }
    if (failed)
        return REPRO_FAIL;
    uint64_t waits = wf__cross_stream_waits() - waits_before;
    printf("repro_stream_wait: %d rounds, %llu cross-stream waits\n", ROUNDS,
           (unsigned long long)waits);
    if (waits == 0) {
        fprintf(stderr, "repro_stream_wait: no task ever waited on another stream\n");
        return REPRO_NOT_REACHED;
    }
    return REPRO_PASS;
}
