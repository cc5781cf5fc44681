/*
 * Concurrent evaluation under load (contract C1, C2, C8): shared graphs
 * computed exactly once, many threads on one array, streams running in
 * parallel, asynchronous failures reaching every dependent and waiter.
 * Every test asserts counters and values, not just "did not crash".
 */
#include <pthread.h>
#include <stdlib.h>

#include "core/array.h"
#include "harness.h"

enum { WIDTH = 8, ROOTS = 16 };

/* A graph with long chains, diamonds and fan-out, the same every time it is
 * built from the same seed. Writes ROOTS roots (new references). */
static void build_graph(int seed, wf_array **roots)
{
    int64_t n = WIDTH;
    float base_values[WIDTH];
    for (int i = 0; i < WIDTH; i++)
        base_values[i] = (float)((seed + i) % 5) * 0.25f;
    wf_scope_begin();
    wf_array *x = wf_array_from_data(base_values, &n, 1, WF_DTYPE_F32);
    wf_array *half = wf_scalar(0.5, WF_DTYPE_F32);
    wf_array *chain[24];
    wf_array *cur = x;
    for (int i = 0; i < 24; i++) { /* a long chain of diamonds */
        wf_array *left = wf_multiply(cur, half);
        wf_array *right = wf_exp(wf_multiply(cur, wf_scalar(-0.1 * (i % 3), WF_DTYPE_F32)));
        cur = wf_multiply(wf_add(left, right), half);
        chain[i] = cur;
    }
    for (int r = 0; r < ROOTS; r++) { /* fan-out: every root reads several layers */
        wf_array *acc = wf_add(chain[r % 24], chain[(r * 7 + 3) % 24]);
        acc = wf_add(acc, wf_multiply(chain[(r + 11) % 24], half));
        roots[r] = wf_keep(acc);
    }
    wf_scope_end();
}

static void release_all(wf_array **arrays, int n)
{
    for (int i = 0; i < n; i++)
        wf_release(arrays[i]);
}

struct worker {
    pthread_t thread;
    pthread_barrier_t *start, *done;
    wf_array *const *roots; /* this round's shared roots */
    int index, rounds;
    wf_status status;
};

/* Each thread evaluates four overlapping roots, in its own order. */
static void *shared_graph_worker(void *arg)
{
    struct worker *w = arg;
    for (int round = 0; round < w->rounds; round++) {
        pthread_barrier_wait(w->start);
        wf_array *mine[4];
        for (int k = 0; k < 4; k++)
            mine[k] = w->roots[(w->index + k * 5) % ROOTS];
        wf_status s = wf_eval(mine, 4);
        if (s != WF_OK)
            w->status = s;
        pthread_barrier_wait(w->done);
    }
    return NULL;
}

/* Test 1: 16 threads, overlapping graphs, 500 rounds; every node computed
 * exactly once and the values equal a single-threaded evaluation. */
static void test_shared_graph_computed_once(void)
{
    enum { THREADS = 16, ROUNDS = 500 };
    pthread_barrier_t start, done;
    pthread_barrier_init(&start, NULL, THREADS + 1);
    pthread_barrier_init(&done, NULL, THREADS + 1);
    wf_array *shared[ROOTS];
    struct worker workers[THREADS];
    for (int t = 0; t < THREADS; t++) {
        workers[t] = (struct worker){.start = &start, .done = &done, .roots = shared,
                                     .index = t, .rounds = ROUNDS};
        pthread_create(&workers[t].thread, NULL, shared_graph_worker, &workers[t]);
    }
    int mismatched_counts = 0, mismatched_values = 0;
    for (int round = 0; round < ROUNDS; round++) {
        wf_array *reference[ROOTS];
        build_graph(round, reference);
        uint64_t before = wf__kernels_run();
        wf_eval(reference, ROOTS);
        uint64_t nodes = wf__kernels_run() - before;

        build_graph(round, shared);
        before = wf__kernels_run();
        pthread_barrier_wait(&start);
        pthread_barrier_wait(&done);
        if (wf__kernels_run() - before != nodes)
            mismatched_counts++;
        for (int r = 0; r < ROOTS; r++) {
            float want[WIDTH], got[WIDTH];
            wf_array_copy_to(reference[r], want, sizeof want);
            if (wf_array_copy_to(shared[r], got, sizeof got) != WF_OK ||
                memcmp(want, got, sizeof want) != 0)
                mismatched_values++;
        }
        release_all(reference, ROOTS);
        release_all(shared, ROOTS);
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(workers[t].thread, NULL);
        CHECK_OK(workers[t].status);
    }
    CHECK_EQ_INT(mismatched_counts, 0);
    CHECK_EQ_INT(mismatched_values, 0);
    pthread_barrier_destroy(&start);
    pthread_barrier_destroy(&done);
}

struct same_array_job {
    wf_array *root;
    pthread_barrier_t *barrier;
    float first;
    wf_status status;
};

static void *eval_same_array(void *arg)
{
    struct same_array_job *job = arg;
    pthread_barrier_wait(job->barrier);
    job->status = wf_eval(&job->root, 1);
    const float *data;
    if (job->status == WF_OK)
        job->status = wf_array_data(job->root, (const void **)&data);
    if (job->status == WF_OK)
        job->first = data[0];
    return NULL;
}

/* Test 2: one array evaluated by 32 threads released by a barrier. */
static void test_same_array_32_threads(void)
{
    enum { THREADS = 32, ROUNDS = 20 };
    for (int round = 0; round < ROUNDS; round++) {
        wf_array *roots[ROOTS];
        build_graph(round, roots);
        wf_array *reference[ROOTS];
        build_graph(round, reference);
        uint64_t before = wf__kernels_run();
        wf_eval(&reference[3], 1);
        uint64_t nodes = wf__kernels_run() - before;
        float want[WIDTH];
        CHECK_OK(wf_array_copy_to(reference[3], want, sizeof want));

        pthread_barrier_t barrier;
        pthread_barrier_init(&barrier, NULL, THREADS);
        pthread_t threads[THREADS];
        struct same_array_job jobs[THREADS];
        before = wf__kernels_run();
        for (int t = 0; t < THREADS; t++) {
            jobs[t] = (struct same_array_job){roots[3], &barrier, 0, WF_OK};
            pthread_create(&threads[t], NULL, eval_same_array, &jobs[t]);
        }
        for (int t = 0; t < THREADS; t++)
            pthread_join(threads[t], NULL);
        pthread_barrier_destroy(&barrier);
        CHECK_EQ_INT(wf__kernels_run() - before, nodes);
        int wrong = 0;
        for (int t = 0; t < THREADS; t++)
            wrong += jobs[t].status != WF_OK || jobs[t].first != want[0];
        CHECK_EQ_INT(wrong, 0);
        release_all(roots, ROOTS);
        release_all(reference, ROOTS);
    }
}

struct stream_job {
    pthread_barrier_t *barrier;
    wf_status status;
    double value;
};

static void *independent_workload(void *arg)
{
    struct stream_job *job = arg;
    wf_stream *s = wf_stream_new();
    wf_stream_push(s);
    int64_t n = 1 << 20;
    wf_scope_begin();
    wf_array *a = wf_full(&n, 1, 0.001, WF_DTYPE_F32);
    for (int i = 0; i < 4; i++)
        a = wf_exp(wf_multiply(a, wf_scalar(0.5, WF_DTYPE_F32)));
    wf_array *total = wf_sum(a, NULL, 0, false);
    pthread_barrier_wait(job->barrier);
    job->status = wf_array_item(total, &job->value);
    wf_scope_end();
    wf_stream_pop();
    wf_stream_release(s);
    return NULL;
}

/* Test 5: N threads on N streams run independent work; kernels overlap in
 * time, so no hidden global lock serializes evaluation. */
static void test_streams_overlap(void)
{
    enum { THREADS = 2, ATTEMPTS = 20 };
    int overlapped = 0;
    for (int attempt = 0; attempt < ATTEMPTS && !overlapped; attempt++) {
        wf__kernels_running_max_reset();
        pthread_barrier_t barrier;
        pthread_barrier_init(&barrier, NULL, THREADS);
        pthread_t threads[THREADS];
        struct stream_job jobs[THREADS];
        for (int t = 0; t < THREADS; t++) {
            jobs[t] = (struct stream_job){&barrier, WF_OK, 0};
            pthread_create(&threads[t], NULL, independent_workload, &jobs[t]);
        }
        for (int t = 0; t < THREADS; t++)
            pthread_join(threads[t], NULL);
        pthread_barrier_destroy(&barrier);
        for (int t = 0; t < THREADS; t++) {
            CHECK_OK(jobs[t].status);
            CHECK_NEAR(jobs[t].value, jobs[0].value, 0);
        }
        overlapped = wf__kernels_running_max() >= THREADS;
    }
    CHECK(overlapped);
}

struct failing_job {
    wf_array *root;
    pthread_barrier_t *barrier;
    wf_status status;
    char message[128];
};

static void *eval_expect_failure(void *arg)
{
    struct failing_job *job = arg;
    pthread_barrier_wait(job->barrier);
    job->status = wf_eval(&job->root, 1);
    snprintf(job->message, sizeof job->message, "%s", wf_last_error_message());
    return NULL;
}

/* Test 6: a failing kernel at the bottom of a shared graph: every dependent
 * and every waiting thread gets its status and message; nothing stays
 * CLAIMED; later evaluations work. */
static void test_async_failure_reaches_everyone(void)
{
    enum { THREADS = 8 };
    int64_t n = 1024;
    wf_array *bottom = wf_ones(&n, 1, WF_DTYPE_F32);
    wf_array *roots[THREADS], *middle = wf_exp(bottom);
    /* Factors of the full shape, computed before the fault is armed: every
     * node left to run then depends on bottom, so bottom's kernel is the
     * first to run whichever thread claims what (a scalar factor would add a
     * broadcast kernel that another thread may run first). */
    wf_array *factors[THREADS];
    for (int t = 0; t < THREADS; t++)
        factors[t] = wf_full(&n, 1, t, WF_DTYPE_F32);
    CHECK_OK(wf_eval(factors, THREADS));
    for (int t = 0; t < THREADS; t++) {
        wf_array *c = wf_multiply(middle, factors[t]);
        roots[t] = wf_add(c, middle);
        wf_release(c);
        wf_release(factors[t]);
    }
    wf__inject_kernel_failure(1); /* the first kernel to run (bottom's) fails */
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, THREADS);
    pthread_t threads[THREADS];
    struct failing_job jobs[THREADS];
    for (int t = 0; t < THREADS; t++) {
        jobs[t] = (struct failing_job){.root = roots[t], .barrier = &barrier};
        pthread_create(&threads[t], NULL, eval_expect_failure, &jobs[t]);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    pthread_barrier_destroy(&barrier);
    for (int t = 0; t < THREADS; t++) {
        CHECK_STATUS(jobs[t].status, WF_ERR_KERNEL);
        CHECK_STR_CONTAINS(jobs[t].message, "injected kernel failure");
        CHECK(wf_array_is_evaluated(roots[t])); /* FAILED, not stuck CLAIMED */
    }
    CHECK(wf_array_is_evaluated(middle));
    const void *data;
    CHECK_STATUS(wf_array_data(middle, &data), WF_ERR_KERNEL);
    /* Asynchronous form: the error surfaces at data access. */
    wf__inject_kernel_failure(1);
    wf_array *pair = wf_array_from_data((float[]){1, 2}, (int64_t[]){2}, 1, WF_DTYPE_F32);
    wf_array *later = wf_exp(pair);
    CHECK_OK(wf_async_eval(&later, 1));
    CHECK_STATUS(wf_array_data(later, &data), WF_ERR_KERNEL);
    /* Recovery: fresh work evaluates. */
    wf_array *fresh = wf_exp(bottom);
    double total;
    wf_array *s = wf_sum(fresh, NULL, 0, false);
    CHECK_STATUS(wf_array_item(s, &total), WF_ERR_KERNEL); /* bottom itself failed */
    wf_array *again = wf_ones(&n, 1, WF_DTYPE_F32);
    wf_array *s2 = wf_sum(again, NULL, 0, false);
    CHECK_OK(wf_array_item(s2, &total));
    CHECK_NEAR(total, 1024, 0);
    wf__inject_kernel_failure(0);
    release_all(roots, THREADS);
    wf_release(middle);
    wf_release(bottom);
    wf_release(fresh);
    wf_release(s);
    wf_release(again);
    wf_release(s2);
    wf_release(later);
    wf_release(pair);
}

int main(void)
{
    RUN_TEST(test_shared_graph_computed_once);
    RUN_TEST(test_same_array_32_threads);
    RUN_TEST(test_streams_overlap);
    RUN_TEST(test_async_failure_reaches_everyone);
    return TEST_SUMMARY();
}
