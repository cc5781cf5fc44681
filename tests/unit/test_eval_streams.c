/* Evaluation, streams and events: scheduling, cross-stream dependencies,
 * push/pop, synchronize, lifetimes, asynchronous errors. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "core/array.h"
#include "harness.h"
#include "repro/repro_common.h"
#include "util/fault.h"

enum { DEADLINE_SECONDS = 30 };

/* Runs fn on its own thread; a hang fails the whole test binary at once. */
static void run_with_deadline(const char *name, void *(*fn)(void *))
{
    if (!repro_run_with_deadline(fn, NULL, DEADLINE_SECONDS)) {
        printf("  FAIL %s: hung for %d s\n", name, DEADLINE_SECONDS);
        fflush(stdout);
        _Exit(1);
    }
}

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void sleep_seconds(double seconds)
{
    struct timespec t = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&t, NULL);
}

static wf_status fill_ones(const wf_custom_call *call)
{
    float *out = call->output;
    for (int64_t i = 0; i < (call->output_ndim ? call->output_shape[0] : 1); i++)
        out[i] = 1;
    return WF_OK;
}

/* A one-element custom array computed by `kernel` with `payload`. */
static wf_array *custom_scalar(wf_custom_kernel kernel, void *payload)
{
    return wf_custom("test", kernel, payload, NULL, NULL, 0, NULL, 0, WF_DTYPE_F32);
}

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

/* A thread's default stream: what it runs on when nothing is pushed, its
 * own (other threads keep the process-wide one), released when the thread
 * ends. */
static void *thread_default_worker(void *arg)
{
    wf_stream *s = arg;
    /* The thread's stream state is made at its first set: out of memory
     * there is an error with a message, and nothing is set. */
    wf__fault_arm(1);
    CHECK(wf_stream_set_thread_default(s) == WF_ERR_OUT_OF_MEMORY);
    CHECK(wf__fault_fired());
    wf__fault_arm(0);
    CHECK(wf_last_error_message()[0] != '\0');
    wf_stream *unset = wf_thread_default_stream();
    CHECK(unset != s);
    wf_stream_release(unset);
    CHECK_OK(wf_stream_set_thread_default(s));
    wf_stream *cur = wf_current_stream(), *def = wf_thread_default_stream();
    CHECK(cur == s && def == s);
    wf_stream *other = wf_stream_new();
    CHECK_OK(wf_stream_push(other)); /* a push still wins */
    wf_stream *pushed = wf_current_stream();
    CHECK(pushed == other);
    CHECK_OK(wf_stream_pop());
    int64_t shape[1] = {4};
    float v[4] = {1, 2, 3, 4};
    wf_array *a = wf_array_from_data(v, shape, 1, WF_DTYPE_F32);
    wf_array *b = wf_multiply(a, a);
    const float *out;
    CHECK_OK(wf_eval(&b, 1));
    CHECK_OK(wf_array_data(b, (const void **)&out));
    CHECK(out[3] == 16.0f);
    wf_release(b);
    wf_release(a);
    wf_stream_release(pushed);
    wf_stream_release(other);
    wf_stream_release(def);
    wf_stream_release(cur);
    return NULL; /* exits holding s as its default */
}

static void test_thread_default_stream(void)
{
    wf_stream *process = wf_default_stream();
    const size_t streams_before = wf_stream_count();
    wf_stream *s = wf_stream_new();
    if (!CHECK_NOT_NULL(s))
        return;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, thread_default_worker, s) == 0);
    pthread_join(t, NULL);
    wf_stream *here = wf_thread_default_stream();
    CHECK(here == process); /* this thread never set one */
    CHECK_OK(wf_stream_set_thread_default(s));
    CHECK_OK(wf_stream_set_thread_default(NULL)); /* back to the process-wide one */
    wf_stream *back = wf_current_stream();
    CHECK(back == process);
    CHECK_EQ_SIZE(wf_stream_count(), streams_before + 1);
    wf_stream_release(s); /* the exited thread dropped its reference: s ends here */
    CHECK_EQ_SIZE(wf_stream_count(), streams_before);
    wf_stream_release(back);
    wf_stream_release(here);
    wf_stream_release(process);
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

/* A kernel that fails with the message its payload names. */
static wf_status fail_with(void *payload, const wf_custom_call *call)
{
    (void)call;
    return wf_set_error(WF_ERR_INVALID_ARGUMENT, "%s", (const char *)payload);
}

static wf_status ones_kernel(void *payload, const wf_custom_call *call)
{
    (void)payload;
    return fill_ones(call);
}

/* A task queued by wf_async_eval that fails is reported by the next
 * synchronize of its stream, once, with the first failure's message;
 * work queued with it still runs and the stream stays usable. */
static void test_synchronize_reports_async_failures_once(void)
{
    wf_stream *s = wf_stream_new();
    CHECK_OK(wf_stream_push(s));
    wf_array *first = custom_scalar(fail_with, "first refusal");
    wf_array *ok = custom_scalar(ones_kernel, NULL);
    wf_array *second = custom_scalar(fail_with, "second refusal");
    CHECK_OK(wf_stream_pop());
    wf_array *all[3] = {first, ok, second};
    for (int i = 0; i < 3; i++)
        CHECK_OK(wf_async_eval(&all[i], 1));
    CHECK_STATUS(wf_stream_synchronize(s), WF_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(wf_last_error_message(), "wf_stream_synchronize");
    CHECK_STR_CONTAINS(wf_last_error_message(), "first refusal");
    CHECK_OK(wf_stream_synchronize(s)); /* reported already */
    CHECK(item_of(ok) == 1.0);
    CHECK_STATUS(wf_eval(&second, 1), WF_ERR_INVALID_ARGUMENT); /* the array keeps it */
    CHECK_STR_CONTAINS(wf_last_error_message(), "second refusal");
    /* A later failure is reported again; synchronous evaluation never is. */
    CHECK_OK(wf_stream_push(s));
    wf_array *later = custom_scalar(fail_with, "later refusal");
    wf_array *sync = custom_scalar(fail_with, "synchronous refusal");
    CHECK_OK(wf_stream_pop());
    CHECK_STATUS(wf_eval(&sync, 1), WF_ERR_INVALID_ARGUMENT);
    CHECK_OK(wf_stream_synchronize(s));
    CHECK_OK(wf_async_eval(&later, 1));
    CHECK_STATUS(wf_stream_synchronize(s), WF_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(wf_last_error_message(), "later refusal");
    CHECK_OK(wf_stream_synchronize(s));
    for (int i = 0; i < 3; i++)
        wf_release(all[i]);
    wf_release(later);
    wf_release(sync);
    wf_stream_release(s);
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


/* ------------------------------------------------ synchronize: a ticket */

struct gate {
    atomic_int open;        /* the kernel waits for this (10 s at most) */
    atomic_int saw_open;    /* whether it opened in time */
};

static wf_status wait_at_gate(void *payload, const wf_custom_call *call)
{
    struct gate *g = payload;
    double give_up = now_seconds() + 10;
    while (!atomic_load(&g->open) && now_seconds() < give_up)
        sleep_seconds(0.001);
    atomic_store(&g->saw_open, atomic_load(&g->open));
    return fill_ones(call);
}

static struct gate first_gate, after_sync_gate;
static wf_stream *gated_stream;

/* Queues a task behind the first one while the main thread synchronizes,
 * then lets the first one finish. */
static void *enqueue_late(void *arg)
{
    (void)arg;
    sleep_seconds(0.2); /* the main thread is inside wf_stream_synchronize now */
    CHECK_OK(wf_stream_push(gated_stream));
    wf_array *late = custom_scalar(wait_at_gate, &after_sync_gate);
    CHECK_OK(wf_stream_pop());
    CHECK_OK(wf_async_eval(&late, 1));
    wf_release(late);
    atomic_store(&first_gate.open, 1);
    return NULL;
}

static void *synchronize_ignores_later_work(void *arg)
{
    (void)arg;
    gated_stream = wf_stream_new();
    CHECK_OK(wf_stream_push(gated_stream));
    wf_array *first = custom_scalar(wait_at_gate, &first_gate);
    CHECK_OK(wf_stream_pop());
    CHECK_OK(wf_async_eval(&first, 1));
    pthread_t t;
    pthread_create(&t, NULL, enqueue_late, NULL);
    CHECK_OK(wf_stream_synchronize(gated_stream)); /* covers `first` only */
    CHECK(wf_array_is_evaluated(first));
    atomic_store(&after_sync_gate.open, 1);
    pthread_join(t, NULL);
    CHECK_OK(wf_stream_synchronize(gated_stream));
    CHECK(atomic_load(&first_gate.saw_open));
    CHECK(atomic_load(&after_sync_gate.saw_open)); /* it was not waited for */
    wf_release(first);
    wf_stream_release(gated_stream);
    return NULL;
}

/* wf_stream_synchronize waits for what was enqueued before the call, not
 * for the stream to be idle: a task queued during the call, which finishes
 * only after the call returns, is not waited for. */
static void test_synchronize_waits_for_earlier_work_only(void)
{
    run_with_deadline("synchronize_ignores_later_work", synchronize_ignores_later_work);
}

static atomic_int stop_enqueuing;
static atomic_long enqueued_by_others;

static void *enqueue_continuously(void *arg)
{
    wf_stream *s = arg;
    int64_t n = 1024;
    wf_array *x = wf_ones(&n, 1, WF_DTYPE_F32);
    CHECK_OK(wf_stream_push(s));
    for (long i = 0; !atomic_load(&stop_enqueuing); i++) {
        wf_array *y = wf_exp(x);
        CHECK_OK(wf_async_eval(&y, 1));
        if (i % 64 == 0) /* bound the backlog */
            CHECK_OK(wf_eval(&y, 1));
        wf_release(y);
        atomic_fetch_add(&enqueued_by_others, 1);
    }
    CHECK_OK(wf_stream_pop());
    wf_release(x);
    return NULL;
}

static void *synchronize_under_load(void *arg)
{
    (void)arg;
    enum { ENQUEUERS = 2, CALLS = 100 };
    wf_stream *streams[2] = {wf_default_stream(), wf_stream_new()};
    for (int k = 0; k < 2; k++) {
        wf_stream *s = streams[k];
        atomic_store(&stop_enqueuing, 0);
        pthread_t t[ENQUEUERS];
        long before = atomic_load(&enqueued_by_others);
        for (int i = 0; i < ENQUEUERS; i++)
            pthread_create(&t[i], NULL, enqueue_continuously, s);
        /* On a loaded machine the enqueuers may not have run yet: the calls
         * below must overlap their enqueuing, so wait until they have begun. */
        double give_up = now_seconds() + 10;
        while (atomic_load(&enqueued_by_others) < before + ENQUEUERS && now_seconds() < give_up)
            sleep_seconds(0.001);
        wf_array *one = wf_scalar(1, WF_DTYPE_F32);
        CHECK_OK(wf_stream_push(s));
        for (int call = 0; call < CALLS; call++) {
            wf_array *mine = wf_add(one, one);
            CHECK_OK(wf_async_eval(&mine, 1));
            CHECK_OK(wf_stream_synchronize(s));
            CHECK(wf_array_is_evaluated(mine));
            wf_release(mine);
        }
        CHECK_OK(wf_stream_pop());
        atomic_store(&stop_enqueuing, 1);
        for (int i = 0; i < ENQUEUERS; i++)
            pthread_join(t[i], NULL);
        wf_release(one);
        wf_stream_release(s);
    }
    CHECK(atomic_load(&enqueued_by_others) > 0);
    return NULL;
}

/* With other threads enqueuing all the time, every synchronize returns. */
static void test_synchronize_returns_under_continuous_enqueuing(void)
{
    run_with_deadline("synchronize_under_load", synchronize_under_load);
}

/* ------------------------------------------------ the default stream is no lock */

static atomic_int kernels_inside, kernels_met;

/* Waits (3 s at most) until another such kernel runs at the same time. */
static wf_status wait_for_company(void *payload, const wf_custom_call *call)
{
    (void)payload;
    atomic_fetch_add(&kernels_inside, 1);
    double give_up = now_seconds() + 3;
    while (atomic_load(&kernels_inside) < 2 && now_seconds() < give_up)
        sleep_seconds(0.0005);
    if (atomic_load(&kernels_inside) >= 2)
        atomic_fetch_add(&kernels_met, 1);
    return fill_ones(call);
}

static void *eval_company(void *arg)
{
    pthread_barrier_t *barrier = arg;
    wf_array *k = custom_scalar(wait_for_company, NULL); /* on the default stream */
    pthread_barrier_wait(barrier);
    CHECK_OK(wf_eval(&k, 1));
    wf_release(k);
    return NULL;
}

static void *two_threads_on_default_stream(void *arg)
{
    (void)arg;
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, 2);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, eval_company, &barrier);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&barrier);
    return NULL;
}

/* Two threads that never push a stream evaluate at the same time: their
 * kernels run at once (each runs its own nodes, no stream token). */
static void test_default_stream_runs_threads_in_parallel(void)
{
    atomic_store(&kernels_inside, 0);
    atomic_store(&kernels_met, 0);
    run_with_deadline("two_threads_on_default_stream", two_threads_on_default_stream);
    CHECK_EQ_INT(atomic_load(&kernels_met), 2);
}

/* ------------------------------------------------ memory after release */

/* Sleeps a little, so whoever waits for this kernel sleeps too. */
static wf_status fill_after_nap(void *payload, const wf_custom_call *call)
{
    (void)payload;
    sleep_seconds(20e-6);
    return fill_ones(call);
}

/* wf_eval, then the user's release: the memory is free at once, whoever ran
 * the node (issue 7, item 7). The limit leaves room for one result. */
static void test_memory_free_after_eval_and_release(void)
{
    enum { ITERATIONS = 5000 };
    /* This thread and the private stream's worker (it inherits the mask)
     * share one core, so a worker woken thread may preempt it at any point. */
    cpu_set_t all, one_core;
    sched_getaffinity(0, sizeof all, &all);
    CPU_ZERO(&one_core);
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (CPU_ISSET(cpu, &all)) {
            CPU_SET(cpu, &one_core);
            break;
        }
    }
    sched_setaffinity(0, sizeof one_core, &one_core);
    int64_t n = 4096;
    wf_array *x = wf_ones(&n, 1, WF_DTYPE_F32);
    CHECK_OK(wf_eval(&x, 1));
    wf_stream *mine = wf_stream_new();
    wf_clear_cache();
    wf_memory_stats stats = wf_memory_stats_default();
    CHECK_OK(wf_memory_stats_get(&stats));
    size_t result_bytes = (size_t)n * sizeof(float);
    CHECK_OK(wf_set_memory_limit(stats.active_bytes + result_bytes + result_bytes / 2));
    int failures[3] = {0, 0, 0};
    for (int i = 0; i < ITERATIONS; i++) {
        int mode = i % 3; /* 0: wf_eval; 1: async then wf_eval; 2: async on a private stream */
        if (mode == 2)
            wf_stream_push(mine);
        /* Half the results come from a kernel that naps: its waiter sleeps,
         * and is woken (and may preempt the worker) when it is done. */
        wf_array *y = i % 2 ? wf_exp(x)
                            : wf_custom("napping", fill_after_nap, NULL, NULL, NULL, 0, &n, 1,
                                        WF_DTYPE_F32);
        if (mode == 2)
            wf_stream_pop();
        if (mode > 0)
            wf_async_eval(&y, 1);
        if (wf_eval(&y, 1) != WF_OK)
            failures[mode]++;
        wf_release(y);
    }
    CHECK_OK(wf_set_memory_limit(SIZE_MAX));
    CHECK_EQ_INT(failures[0], 0);
    CHECK_EQ_INT(failures[1], 0);
    CHECK_EQ_INT(failures[2], 0);
    wf_release(x);
    wf_stream_release(mine);
    sched_setaffinity(0, sizeof all, &all);
}

/* ------------------------------------------------ graphs after evaluation */

/* Evaluation detaches an ordinary graph: of a 10,000-node chain held only
 * through its result, only the result's bytes stay active. */
static void test_evaluated_chain_keeps_only_its_result(void)
{
    wf_memory_stats before = wf_memory_stats_default(), after = wf_memory_stats_default();
    CHECK_OK(wf_memory_stats_get(&before));
    int64_t live = wf__arrays_live();
    int64_t n = 256;
    wf_array *one = wf_scalar(1, WF_DTYPE_F32);
    wf_array *y = wf_ones(&n, 1, WF_DTYPE_F32);
    for (int i = 0; i < 10000; i++) {
        wf_array *next = wf_add(y, one);
        wf_release(y);
        y = next;
    }
    wf_release(one);
    CHECK_OK(wf_eval(&y, 1));
    CHECK_OK(wf_memory_stats_get(&after));
    CHECK_EQ_SIZE(after.active_bytes, before.active_bytes + wf_array_nbytes(y));
    CHECK_EQ_INT(wf__arrays_live(), live + 1);
    const float *data = NULL;
    if (CHECK_OK(wf_array_data(y, (const void **)&data)))
        CHECK_NEAR(data[n - 1], 10001, 0);
    wf_release(y);
    CHECK_EQ_INT(wf__arrays_live(), live);
}

/* A node built with keep_graph (as transforms will) keeps its inputs after
 * it ran, and frees them with itself. */
static void test_keep_graph_node_keeps_its_inputs(void)
{
    int64_t live = wf__arrays_live();
    int64_t n = 16;
    wf_array *a = wf_ones(&n, 1, WF_DTYPE_F32);
    wf_array *b = wf_exp(a);
    wf_array *c = wf_add(b, b);
    c->keep_graph = true;
    wf_release(a);
    wf_release(b);
    CHECK_OK(wf_eval(&c, 1));
    CHECK_EQ_INT(c->ninputs, 2);
    CHECK(c->inputs[0] == c->inputs[1]);
    CHECK(wf__array_check(c->inputs[0], "test", "an input") != NULL);
    CHECK(wf_array_is_evaluated(c->inputs[0]));
    CHECK_EQ_INT(c->inputs[0]->ninputs, 0); /* b is ordinary: it dropped `a` */
    CHECK_EQ_INT(wf__arrays_live(), live + 2); /* c and b; a is gone */
    wf_release(c);
    CHECK_EQ_INT(wf__arrays_live(), live);
}

/* ------------------------------------------------ stream ids */

static void test_stream_ids_are_never_reused(void)
{
    enum { STREAMS = 20 };
    CHECK_EQ_INT(wf_stream_id(NULL), 0);
    wf_stream *def = wf_default_stream(), *again = wf_default_stream();
    CHECK(wf_stream_id(def) != 0);
    CHECK_EQ_INT(wf_stream_id(again), wf_stream_id(def));
    uint64_t ids[STREAMS];
    for (int i = 0; i < STREAMS; i++) {
        wf_stream *s = wf_stream_new(); /* released at once: its memory may be reused */
        ids[i] = wf_stream_id(s);
        wf_stream_release(s);
        CHECK(ids[i] != 0 && ids[i] != wf_stream_id(def));
        for (int j = 0; j < i; j++)
            CHECK(ids[i] != ids[j]);
        if (i > 0)
            CHECK(ids[i] > ids[i - 1]);
    }
    wf_stream_release(again);
    wf_stream_release(def);
}

int main(void)
{
    RUN_TEST(test_lazy_until_eval);
    RUN_TEST(test_shared_node_computed_once);
    RUN_TEST(test_async_eval_then_read);
    RUN_TEST(test_push_pop_and_current);
    RUN_TEST(test_thread_default_stream);
    RUN_TEST(test_streams_freed_with_last_reference);
    RUN_TEST(test_cross_stream_dependency);
    RUN_TEST(test_eval_first_root_already_computed);
    RUN_TEST(test_synchronize_waits_for_async_work);
    RUN_TEST(test_kernel_failure_reaches_dependents);
    RUN_TEST(test_synchronize_reports_async_failures_once);
    RUN_TEST(test_threads_share_one_graph);
    RUN_TEST(test_synchronize_waits_for_earlier_work_only);
    RUN_TEST(test_synchronize_returns_under_continuous_enqueuing);
    RUN_TEST(test_default_stream_runs_threads_in_parallel);
    RUN_TEST(test_memory_free_after_eval_and_release);
    RUN_TEST(test_evaluated_chain_keeps_only_its_result);
    RUN_TEST(test_keep_graph_node_keeps_its_inputs);
    RUN_TEST(test_stream_ids_are_never_reused);
    return TEST_SUMMARY();
}
