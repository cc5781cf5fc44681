/* Evaluation, streams and events: scheduling, cross-stream dependencies,
 * push/pop, synchronize, lifetimes, asynchronous errors. */
#include <pthread.h>
#include <stdlib.h>

#include "core/array.h"
#include "harness.h"

static double item_of(wf_array *a)
{
    double v = NAN;
    CHECK_OK(wf_array_item(a, &v));
    return v;
}

static void test_lazy_until_eval(void)
{
    uint64_t before = wf__kernels_run();
    wf_array *a = wf_scalar(2, WF_DTYPE_F32);
    wf_array *b = wf_multiply(a, a);
    wf_array *c = wf_add(b, a);
    CHECK(!wf_array_is_evaluated(c));
    CHECK_EQ_INT(wf__kernels_run(), before); /* nothing computed yet */
    CHECK_OK(wf_eval(&c, 1));
    CHECK(wf_array_is_evaluated(c));
    CHECK_EQ_INT(wf__kernels_run() - before, 2);
    CHECK_NEAR(item_of(c), 6, 0);
    CHECK_OK(wf_eval(&c, 1)); /* evaluating again computes nothing */
    CHECK_EQ_INT(wf__kernels_run() - before, 2);
    wf_release(a);
    wf_release(b);
    wf_release(c);
}

static void test_shared_node_computed_once(void)
{
    uint64_t before = wf__kernels_run();
    wf_array *x = wf_scalar(1, WF_DTYPE_F64);
    wf_array *shared = wf_add(x, x);
    wf_array *left = wf_multiply(shared, shared);
    wf_array *right = wf_add(shared, x);
    wf_array *roots[2] = {left, right};
    CHECK_OK(wf_eval(roots, 2));
    CHECK_EQ_INT(wf__kernels_run() - before, 3); /* shared ran once */
    CHECK_NEAR(item_of(left), 4, 0);
    CHECK_NEAR(item_of(right), 3, 0);
    wf_release(x);
    wf_release(shared);
    wf_release(left);
    wf_release(right);
}

static void test_async_eval_then_read(void)
{
    int64_t n = 100000;
    wf_array *a = wf_arange(0, (double)n, 1, WF_DTYPE_F64);
    wf_array *b = wf_multiply(a, a);
    CHECK_OK(wf_async_eval(&b, 1));
    const double *data;
    CHECK_OK(wf_array_data(b, (const void **)&data));
    CHECK_NEAR(data[n - 1], (double)(n - 1) * (double)(n - 1), 0);
    wf_release(a);
    wf_release(b);
}

static void test_push_pop_and_current(void)
{
    wf_stream *def = wf_default_stream();
    wf_stream *cur = wf_current_stream();
    CHECK(def == cur);
    wf_stream *s = wf_stream_new();
    if (!CHECK_NOT_NULL(s))
        return;
    CHECK_OK(wf_stream_push(s));
    wf_stream *now = wf_current_stream();
    CHECK(now == s);
    CHECK_OK(wf_stream_pop());
    wf_stream *back = wf_current_stream();
    CHECK(back == def);
    CHECK_STATUS(wf_stream_pop(), WF_ERR_MISUSE);
    CHECK_STR_CONTAINS(wf_last_error_message(), "no stream was pushed");
    CHECK_STATUS(wf_stream_push(NULL), WF_ERR_NULL_ARGUMENT);
    CHECK_STATUS(wf_stream_synchronize(NULL), WF_ERR_NULL_ARGUMENT);
    wf_stream_release(NULL);
    CHECK(wf_stream_retain(NULL) == NULL);
    wf_stream_release(now);
    wf_stream_release(back);
    wf_stream_release(s);
    wf_stream_release(cur);
    wf_stream_release(def);
}

static void test_streams_freed_with_last_reference(void)
{
    size_t base = wf_stream_count();
    wf_stream *s = wf_stream_new();
    CHECK_EQ_SIZE(wf_stream_count(), base + 1);
    CHECK_OK(wf_stream_push(s));
    wf_array *a = wf_scalar(3, WF_DTYPE_F32);
    wf_array *b = wf_multiply(a, a); /* b's node holds a reference to s */
    CHECK_OK(wf_stream_pop());
    wf_stream_release(s);
    CHECK_EQ_SIZE(wf_stream_count(), base + 1);
    CHECK_NEAR(item_of(b), 9, 0);
    wf_release(b);
    wf_release(a);
    CHECK_EQ_SIZE(wf_stream_count(), base);
}

/* A long chain on stream A; stream B adds to its result and is evaluated
 * from B. The wait on A's result is queued after A's work. */
static void test_cross_stream_dependency(void)
{
    wf_stream *sa = wf_stream_new();
    wf_stream *sb = wf_stream_new();
    CHECK_OK(wf_stream_push(sa));
    wf_array *x = wf_scalar(0, WF_DTYPE_F64);
    wf_array *one = wf_scalar(1, WF_DTYPE_F64);
    for (int i = 0; i < 500; i++) {
        wf_array *next = wf_add(x, one);
        wf_release(x);
        x = next;
    }
    CHECK_OK(wf_stream_pop());
    CHECK_OK(wf_stream_push(sb));
    wf_array *y = wf_add(x, one);
    CHECK_OK(wf_stream_pop());
    CHECK_OK(wf_eval(&y, 1));
    CHECK_NEAR(item_of(y), 501, 0);
    CHECK_OK(wf_stream_synchronize(sa));
    CHECK_OK(wf_stream_synchronize(sb));
    wf_release(x);
    wf_release(y);
    wf_release(one);
    wf_stream_release(sa);
    wf_stream_release(sb);
}

/* wf_eval leaves the first root's stream for this thread to run; when that
 * root is already computed, work queued there for a later root must still
 * run (this hung: B's task waited for A's, and A's worker was never woken). */
static void test_eval_first_root_already_computed(void)
{
    wf_stream *sa = wf_stream_new();
    wf_stream *sb = wf_stream_new();
    CHECK_OK(wf_stream_push(sa));
    wf_array *one = wf_scalar(1, WF_DTYPE_F32);
    wf_array *done = wf_add(one, one);
    CHECK_OK(wf_async_eval(&done, 1)); /* run by A's worker, which then sleeps */
    CHECK_OK(wf_stream_synchronize(sa));
    wf_array *x = wf_add(done, one); /* pending on A */
    CHECK_OK(wf_stream_pop());
    CHECK_OK(wf_stream_push(sb));
    wf_array *y = wf_multiply(x, x); /* on B, waits for x */
    CHECK_OK(wf_stream_pop());
    wf_array *roots[2] = {done, y};
    CHECK_OK(wf_eval(roots, 2));
    CHECK_NEAR(item_of(y), 9, 0);
    wf_release(y);
    wf_release(x);
    wf_release(done);
    wf_release(one);
    wf_stream_release(sa);
    wf_stream_release(sb);
}

static void test_synchronize_waits_for_async_work(void)
{
    wf_stream *s = wf_stream_new();
    CHECK_OK(wf_stream_push(s));
    int64_t n = 1 << 16;
    wf_array *a = wf_ones(&n, 1, WF_DTYPE_F32);
    wf_array *b = wf_exp(a);
    CHECK_OK(wf_stream_pop());
    CHECK_OK(wf_async_eval(&b, 1));
    CHECK_OK(wf_stream_synchronize(s));
    CHECK(wf_array_is_evaluated(b));
    wf_release(a);
    wf_release(b);
    wf_stream_release(s);
}

static void test_kernel_failure_reaches_dependents(void)
{
    int64_t n = 1 << 20;
    wf_array *a = wf_ones(&n, 1, WF_DTYPE_F32); /* needs 4 MiB when computed */
    wf_array *b = wf_exp(a);
    wf_array *c = wf_add(b, b);
    wf_clear_cache();
    CHECK_OK(wf_set_memory_limit(1024));
    CHECK_STATUS(wf_eval(&c, 1), WF_ERR_OUT_OF_MEMORY);
    CHECK_STR_CONTAINS(wf_last_error_message(), "limit");
    CHECK_OK(wf_set_memory_limit(SIZE_MAX));
    /* The failure is stored: b and c report it too, and stay failed. */
    CHECK(wf_array_is_evaluated(b));
    CHECK_STATUS(wf_eval(&b, 1), WF_ERR_OUT_OF_MEMORY);
    double v;
    CHECK_STATUS(wf_array_item(c, &v), WF_ERR_SHAPE); /* not one element */
    const void *p;
    CHECK_STATUS(wf_array_data(c, &p), WF_ERR_OUT_OF_MEMORY);
    /* Work built on a failed array fails the same way; new work runs fine. */
    wf_array *on_failed = wf_exp(a);
    CHECK_STATUS(wf_eval(&on_failed, 1), WF_ERR_OUT_OF_MEMORY);
    wf_release(on_failed);
    wf_array *fresh = wf_ones(&n, 1, WF_DTYPE_F32);
    wf_array *d = wf_exp(fresh);
    CHECK_OK(wf_eval(&d, 1));
    wf_release(fresh);
    wf_release(a);
    wf_release(b);
    wf_release(c);
    wf_release(d);
}

struct shared_job {
    wf_array *root;
    pthread_barrier_t *barrier;
    double value;
    wf_status status;
};

static void *eval_shared(void *arg)
{
    struct shared_job *job = arg;
    pthread_barrier_wait(job->barrier);
    job->status = wf_eval(&job->root, 1);
    if (job->status == WF_OK)
        job->status = wf_array_item(job->root, &job->value);
    return NULL;
}

/* Eight threads released together evaluate one diamond-shaped graph: each
 * node runs exactly once and every thread sees the same value. */
static void test_threads_share_one_graph(void)
{
    enum { THREADS = 8, ROUNDS = 50 };
    for (int round = 0; round < ROUNDS; round++) {
        wf_array *x = wf_scalar(round, WF_DTYPE_F64);
        wf_array *layer = wf_retain(x);
        int nodes = 0;
        for (int depth = 0; depth < 20; depth++) {
            wf_array *l = wf_add(layer, x);
            wf_array *r = wf_multiply(layer, layer);
            wf_array *j = wf_add(l, r);
            wf_release(l);
            wf_release(r);
            wf_release(layer);
            layer = j;
            nodes += 3;
        }
        uint64_t before = wf__kernels_run();
        pthread_barrier_t barrier;
        pthread_barrier_init(&barrier, NULL, THREADS);
        pthread_t threads[THREADS];
        struct shared_job jobs[THREADS];
        for (int t = 0; t < THREADS; t++) {
            jobs[t] = (struct shared_job){layer, &barrier, 0, WF_OK};
            pthread_create(&threads[t], NULL, eval_shared, &jobs[t]);
        }
        for (int t = 0; t < THREADS; t++)
            pthread_join(threads[t], NULL);
        pthread_barrier_destroy(&barrier);
        CHECK_EQ_INT(wf__kernels_run() - before, nodes);
        for (int t = 1; t < THREADS; t++) {
            CHECK_OK(jobs[t].status);
            CHECK_NEAR(jobs[t].value, jobs[0].value, 0);
        }
        wf_release(layer);
        wf_release(x);
    }
}

int main(void)
{
    RUN_TEST(test_lazy_until_eval);
    RUN_TEST(test_shared_node_computed_once);
    RUN_TEST(test_async_eval_then_read);
    RUN_TEST(test_push_pop_and_current);
    RUN_TEST(test_streams_freed_with_last_reference);
    RUN_TEST(test_cross_stream_dependency);
    RUN_TEST(test_eval_first_root_already_computed);
    RUN_TEST(test_synchronize_waits_for_async_work);
    RUN_TEST(test_kernel_failure_reaches_dependents);
    RUN_TEST(test_threads_share_one_graph);
    return TEST_SUMMARY();
}
