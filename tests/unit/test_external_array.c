/*
 * Zero-copy arrays over caller memory (wf_array_from_external): no copy, the
 * deleter called exactly once with no lock held when the last array reading
 * the memory goes (views and lazy results included), never on failure, the
 * memory never written (it is read-only here) and never counted or cached.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/array.h"
#include "harness.h"
#include "settle.h"
#include "util/lock.h"

/* What a deleter saw. */
struct deleter_log {
    atomic_int calls;
    atomic_int locks_held_max; /* wf__locks_held() inside the deleter */
    void *data;                /* the last call's arguments */
    void *ctx;
    pthread_t thread;
};

static void log_deleter(void *data, void *ctx)
{
    struct deleter_log *log = ctx;
    int held = wf__locks_held();
    if (held > atomic_load(&log->locks_held_max))
        atomic_store(&log->locks_held_max, held);
    log->data = data;
    log->ctx = ctx;
    log->thread = pthread_self();
    atomic_fetch_add(&log->calls, 1);
}

static void reset_log(struct deleter_log *log)
{
    memset(log, 0, sizeof *log);
}

static int calls(struct deleter_log *log)
{
    return atomic_load(&log->calls);
}

static void test_zero_copy_and_deleter_once(void)
{
    int64_t live = live_arrays();
    float values[6] = {1, 2, 3, 4, 5, 6};
    struct deleter_log log;
    reset_log(&log);
    wf_array *a = wf_array_from_external(values, (int64_t[]){2, 3}, 2, WF_DTYPE_F32, NULL,
                                         log_deleter, &log);
    if (!CHECK_NOT_NULL(a))
        return;
    CHECK(wf_array_is_evaluated(a)); /* READY at once */
    CHECK(wf_array_device(a) == wf_device_cpu());
    CHECK_EQ_INT(wf_array_dim(a, 1), 3);
    const void *data = NULL;
    CHECK_OK(wf_array_data(a, &data));
    CHECK(data == (const void *)values); /* no copy */

    wf_array *s = wf_sum(a, NULL, 0, false);
    double total = 0;
    CHECK_OK(wf_array_item(s, &total));
    CHECK_NEAR(total, 21.0, 0);
    wf_release(s);
    CHECK_EQ_INT(calls(&log), 0);
    wf_release(a);
    CHECK_EQ_INT(calls(&log), 1);
    CHECK(log.data == values && log.ctx == &log);
    CHECK_EQ_INT(atomic_load(&log.locks_held_max), 0);
    CHECK_EQ_INT(live_arrays(), live);
}

static void test_views_keep_the_memory(void)
{
    float values[12];
    for (int i = 0; i < 12; i++)
        values[i] = (float)i;
    struct deleter_log log;
    reset_log(&log);
    wf_array *a = wf_array_from_external(values, (int64_t[]){3, 4}, 2, WF_DTYPE_F32, NULL,
                                         log_deleter, &log);
    if (!CHECK_NOT_NULL(a))
        return;
    wf_array *t = wf_transpose(a, NULL, 0);
    wf_array *row = wf_slice(a, (int64_t[]){1, 0}, (int64_t[]){2, 4}, (int64_t[]){1, 1});
    wf_release(a);
    CHECK_EQ_INT(calls(&log), 0);

    float tv[12];
    CHECK_OK(wf_array_copy_to(t, tv, sizeof tv));
    CHECK_NEAR(tv[1], 4.0, 0); /* t[0][1] = a[1][0] */
    const float *dense = NULL;
    CHECK_OK(wf_array_data(t, (const void **)&dense)); /* a copy of its own */
    CHECK(dense && dense != values && dense[11] == 11.0f);
    wf_release(t);
    CHECK_EQ_INT(calls(&log), 0);

    const float *r = NULL;
    CHECK_OK(wf_array_data(row, (const void **)&r));
    CHECK(r == values + 4); /* a contiguous view: still the caller's memory */
    wf_release(row);
    CHECK_EQ_INT(calls(&log), 1);
}

static void test_lazy_result_keeps_the_memory(void)
{
    float values[4] = {0, 1, 2, 3};
    struct deleter_log log;
    reset_log(&log);
    wf_array *a = wf_array_from_external(values, (int64_t[]){4}, 1, WF_DTYPE_F32, NULL,
                                         log_deleter, &log);
    wf_array *y = wf_multiply(a, a);
    wf_release(a);
    CHECK_EQ_INT(calls(&log), 0); /* y is lazy and still reads it */
    float out[4];
    CHECK_OK(wf_array_copy_to(y, out, sizeof out));
    CHECK_NEAR(out[3], 9.0, 0);
    wf_release(y);
    CHECK_EQ_INT(calls(&log), 1);
}

static void test_strides(void)
{
    float values[12];
    for (int i = 0; i < 12; i++)
        values[i] = (float)i;
    float out[20];

    /* Column-major 3 x 4. */
    wf_array *cm = wf_array_from_external(values, (int64_t[]){3, 4}, 2, WF_DTYPE_F32,
                                          (int64_t[]){1, 3}, NULL, NULL);
    if (CHECK_NOT_NULL(cm)) {
        CHECK_OK(wf_array_copy_to(cm, out, sizeof out));
        CHECK_NEAR(out[1], 3.0, 0);  /* [0][1] */
        CHECK_NEAR(out[4], 1.0, 0);  /* [1][0] */
        CHECK_NEAR(out[11], 11.0, 0);
    }
    wf_release(cm);

    /* Negative strides: data points at element 0, the last of the memory. */
    wf_array *rev = wf_array_from_external(values + 11, (int64_t[]){3, 4}, 2, WF_DTYPE_F32,
                                           (int64_t[]){-4, -1}, NULL, NULL);
    if (CHECK_NOT_NULL(rev)) {
        CHECK_OK(wf_array_copy_to(rev, out, sizeof out));
        for (int i = 0; i < 12; i++)
            CHECK_NEAR(out[i], 11.0 - i, 0);
        wf_array *s = wf_sum(rev, (int[]){1}, 1, false);
        CHECK_OK(wf_array_copy_to(s, out, sizeof out));
        CHECK_NEAR(out[0], 11 + 10 + 9 + 8, 0);
        wf_release(s);
    }
    wf_release(rev);

    /* A zero stride broadcasts one row to five. */
    wf_array *bc = wf_array_from_external(values, (int64_t[]){5, 4}, 2, WF_DTYPE_F32,
                                          (int64_t[]){0, 1}, NULL, NULL);
    if (CHECK_NOT_NULL(bc)) {
        CHECK_OK(wf_array_copy_to(bc, out, sizeof out));
        CHECK_NEAR(out[17], 1.0, 0);
    }
    wf_release(bc);

    /* Explicit row-major strides are the zero-copy case again. */
    wf_array *rm = wf_array_from_external(values, (int64_t[]){3, 4}, 2, WF_DTYPE_F32,
                                          (int64_t[]){4, 1}, NULL, NULL);
    const void *p = NULL;
    CHECK_OK(wf_array_data(rm, &p));
    CHECK(p == (const void *)values);
    wf_release(rm);
    for (int i = 0; i < 12; i++)
        CHECK_NEAR(values[i], i, 0); /* untouched */
}

/* Read-only pages: any write by weft would crash the test. The deleter
 * unmaps them, so it must be called exactly once and after the last use. */
static void unmap_deleter(void *data, void *ctx)
{
    struct deleter_log *log = ctx;
    munmap(data, (size_t)sysconf(_SC_PAGESIZE) * 4);
    atomic_fetch_add(&log->calls, 1);
}

static void test_memory_is_never_written(void)
{
    size_t bytes = (size_t)sysconf(_SC_PAGESIZE) * 4;
    float *pages = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!CHECK(pages != MAP_FAILED))
        return;
    int64_t n = (int64_t)(bytes / sizeof(float));
    for (int64_t i = 0; i < n; i++)
        pages[i] = (float)(i % 7);
    CHECK(mprotect(pages, bytes, PROT_READ) == 0);
    struct deleter_log log;
    reset_log(&log);
    wf_array *a = wf_array_from_external(pages, &n, 1, WF_DTYPE_F32, NULL, unmap_deleter, &log);
    if (!CHECK_NOT_NULL(a))
        return;
    /* Results that an in-place or donating kernel would be tempted to write
     * into a's buffer: a is released first, so only the ops hold it. */
    wf_scope_begin();
    wf_array *r1 = wf_keep(wf_add(a, wf_scalar(1, WF_DTYPE_F32)));
    wf_array *r2 = wf_keep(wf_exp(wf_negative(a)));
    wf_array *r3 = wf_keep(wf_slice_update(a, wf_zeros((int64_t[]){4}, 1, WF_DTYPE_F32),
                                           (int64_t[]){0}, (int64_t[]){4}, (int64_t[]){1}));
    wf_array *r4 = wf_keep(wf_cumsum(a, 0, false, true));
    wf_array *m = wf_reshape(a, (int64_t[]){n / 64, 64}, 2);
    wf_array *r5 = wf_keep(wf_matmul(wf_transpose(m, NULL, 0), m));
    wf_scope_end();
    wf_release(a);
    wf_array *all[] = {r1, r2, r3, r4, r5};
    CHECK_OK(wf_eval(all, 5));
    double v = 0;
    wf_array *e = wf_slice(r1, (int64_t[]){6}, (int64_t[]){7}, (int64_t[]){1});
    CHECK_OK(wf_array_item(e, &v));
    CHECK_NEAR(v, 7.0, 0);
    wf_release(e);
    e = wf_slice(r3, (int64_t[]){5}, (int64_t[]){6}, (int64_t[]){1});
    CHECK_OK(wf_array_item(e, &v));
    CHECK_NEAR(v, 5.0, 0);
    wf_release(e);
    /* Every result owns its buffer: once all are computed nothing reads the
     * pages, and the deleter has unmapped them. */
    CHECK_EQ_INT(calls(&log), 1);
    for (int i = 0; i < 5; i++)
        wf_release(all[i]);
    CHECK_EQ_INT(calls(&log), 1);
}

static void test_not_counted_not_cached(void)
{
    wf_clear_cache();
    wf_memory_stats before = wf_memory_stats_default();
    CHECK_OK(wf_memory_stats_get(&before));
    size_t bytes = (size_t)4 << 20;
    void *block = malloc(bytes);
    if (!CHECK_NOT_NULL(block))
        return;
    memset(block, 0, bytes);
    int64_t n = (int64_t)(bytes / 8);
    struct deleter_log log;
    reset_log(&log);
    wf_array *a = wf_array_from_external(block, &n, 1, WF_DTYPE_F64, NULL, log_deleter, &log);
    wf_memory_stats during = wf_memory_stats_default();
    CHECK_OK(wf_memory_stats_get(&during));
    CHECK_EQ_SIZE(during.active_bytes, before.active_bytes);
    wf_release(a);
    CHECK_EQ_INT(calls(&log), 1);
    wf_memory_stats after = wf_memory_stats_default();
    CHECK_OK(wf_memory_stats_get(&after));
    CHECK_EQ_SIZE(after.active_bytes, before.active_bytes);
    CHECK_EQ_SIZE(after.cached_bytes, before.cached_bytes); /* not kept for reuse */
    free(block);

    /* Under a memory limit of 0 it still works: it allocates nothing. */
    double d[2] = {1, 2};
    CHECK_OK(wf_set_memory_limit(0));
    wf_array *z = wf_array_from_external(d, (int64_t[]){2}, 1, WF_DTYPE_F64, NULL, NULL, NULL);
    CHECK_NOT_NULL(z);
    wf_release(z);
    CHECK_OK(wf_set_memory_limit(SIZE_MAX));
}

static void test_bad_inputs_never_call_the_deleter(void)
{
    struct deleter_log log;
    reset_log(&log);
    float values[8] = {0};
    int64_t shape[] = {2, 4};

    CHECK_NULL_WITH(wf_array_from_external(NULL, shape, 2, WF_DTYPE_F32, NULL, log_deleter, &log),
                    WF_ERR_NULL_ARGUMENT);
    wf_array_from_external((char *)values + 2, shape, 2, WF_DTYPE_F32, NULL, log_deleter, &log);
    CHECK_STR_CONTAINS(wf_last_error_message(), "not aligned");
    CHECK_NULL_WITH(wf_array_from_external((char *)values + 2, shape, 2, WF_DTYPE_F32, NULL,
                                           log_deleter, &log),
                    WF_ERR_INVALID_ARGUMENT);
    CHECK_NULL_WITH(wf_array_from_external(values, shape, 2, WF_DTYPE_COUNT, NULL, log_deleter,
                                           &log),
                    WF_ERR_DTYPE);
    CHECK_NULL_WITH(wf_array_from_external(values, (int64_t[]){-1}, 1, WF_DTYPE_F32, NULL,
                                           log_deleter, &log),
                    WF_ERR_INVALID_ARGUMENT);
    CHECK_NULL_WITH(wf_array_from_external(values, NULL, 2, WF_DTYPE_F32, NULL, log_deleter,
                                           &log),
                    WF_ERR_NULL_ARGUMENT);
    CHECK_NULL_WITH(wf_array_from_external(values, shape, WF_MAX_NDIM + 1, WF_DTYPE_F32, NULL,
                                           log_deleter, &log),
                    WF_ERR_INVALID_ARGUMENT);
    /* A context with no deleter could never be given back. */
    wf_array_from_external(values, shape, 2, WF_DTYPE_F32, NULL, NULL, &log);
    CHECK_STR_CONTAINS(wf_last_error_message(), "deleter is NULL");
    CHECK_NULL_WITH(wf_array_from_external(values, shape, 2, WF_DTYPE_F32, NULL, NULL, &log),
                    WF_ERR_INVALID_ARGUMENT);
    /* Strides whose span overflows, and strides reaching below address 0
     * (a fake, aligned pointer: it is never read). */
    CHECK_NULL_WITH(wf_array_from_external(values, shape, 2, WF_DTYPE_F32,
                                           (int64_t[]){INT64_MAX, 1}, log_deleter, &log),
                    WF_ERR_OVERFLOW);
    CHECK_NULL_WITH(wf_array_from_external(values, (int64_t[]){1 << 20, 1 << 20}, 2,
                                           WF_DTYPE_F32, (int64_t[]){(int64_t)1 << 41, 1},
                                           log_deleter, &log),
                    WF_ERR_OVERFLOW);
    wf_array_from_external((void *)(uintptr_t)64, (int64_t[]){100}, 1, WF_DTYPE_F32,
                           (int64_t[]){-1}, log_deleter, &log);
    CHECK_STR_CONTAINS(wf_last_error_message(), "address space");
    CHECK_NULL_WITH(wf_array_from_external((void *)(uintptr_t)64, (int64_t[]){100}, 1,
                                           WF_DTYPE_F32, (int64_t[]){-1}, log_deleter, &log),
                    WF_ERR_INVALID_ARGUMENT);
    /* Bools must be 0 or 1 (kernels rely on it; weft cannot fix them up). */
    uint8_t bools[4] = {0, 1, 2, 1};
    CHECK_NULL_WITH(wf_array_from_external(bools, (int64_t[]){4}, 1, WF_DTYPE_BOOL, NULL,
                                           log_deleter, &log),
                    WF_ERR_INVALID_ARGUMENT);
    /* ... also through strides that skip the good ones. */
    CHECK_NULL_WITH(wf_array_from_external(bools, (int64_t[]){2}, 1, WF_DTYPE_BOOL,
                                           (int64_t[]){2}, log_deleter, &log),
                    WF_ERR_INVALID_ARGUMENT);
    CHECK_EQ_INT(calls(&log), 0);

    /* The library is still usable, and strides avoiding the bad byte pass. */
    wf_array *ok = wf_array_from_external(bools, (int64_t[]){2}, 1, WF_DTYPE_BOOL,
                                          (int64_t[]){3}, log_deleter, &log);
    if (CHECK_NOT_NULL(ok)) {
        wf_array *s = wf_sum(ok, NULL, 0, false);
        double v = 0;
        CHECK_OK(wf_array_item(s, &v));
        CHECK_NEAR(v, 1.0, 0); /* bools[0] + bools[3] */
        wf_release(s);
    }
    wf_release(ok);
    CHECK_EQ_INT(calls(&log), 1);
}

static void test_empty_and_scalar(void)
{
    struct deleter_log log;
    reset_log(&log);
    /* NULL data is fine for zero elements; the deleter still gets its call. */
    wf_array *empty = wf_array_from_external(NULL, (int64_t[]){0, 3}, 2, WF_DTYPE_F32,
                                             (int64_t[]){INT64_MAX, -5}, log_deleter, &log);
    if (CHECK_NOT_NULL(empty)) {
        CHECK_EQ_INT(wf_array_size(empty), 0);
        wf_array *s = wf_sum(empty, NULL, 0, false);
        double v = -1;
        CHECK_OK(wf_array_item(s, &v));
        CHECK_NEAR(v, 0.0, 0);
        wf_release(s);
    }
    wf_release(empty);
    CHECK_EQ_INT(calls(&log), 1);
    CHECK(log.data == NULL && log.ctx == &log);

    int64_t scalar = 42;
    wf_array *s0 = wf_array_from_external(&scalar, NULL, 0, WF_DTYPE_I64, NULL, NULL, NULL);
    double v = 0;
    CHECK_OK(wf_array_item(s0, &v));
    CHECK_NEAR(v, 42.0, 0);
    wf_release(s0);
}

static void test_scope_releases_it(void)
{
    struct deleter_log log;
    reset_log(&log);
    double values[3] = {1, 2, 3};
    CHECK_OK(wf_scope_begin());
    wf_array *a = wf_array_from_external(values, (int64_t[]){3}, 1, WF_DTYPE_F64, NULL,
                                         log_deleter, &log);
    CHECK_NOT_NULL(wf_add(a, a));
    CHECK_OK(wf_scope_end());
    CHECK_EQ_INT(calls(&log), 1);
}

/* A deleter may call weft (it runs with no lock held). */
static void deleter_calling_weft(void *data, void *ctx)
{
    (void)data;
    struct deleter_log *log = ctx;
    wf_memory_stats s = wf_memory_stats_default();
    wf_array *x = wf_scalar(3, WF_DTYPE_F32);
    if (wf_memory_stats_get(&s) == WF_OK && x)
        atomic_fetch_add(&log->calls, 1);
    wf_release(x);
}

static void test_deleter_may_call_weft(void)
{
    struct deleter_log log;
    reset_log(&log);
    float v[2] = {1, 2};
    wf_array *a = wf_array_from_external(v, (int64_t[]){2}, 1, WF_DTYPE_F32, NULL,
                                         deleter_calling_weft, &log);
    wf_release(a);
    CHECK_EQ_INT(calls(&log), 1);
}

/* ------------------------------------------------------------ threads */

enum { THREADS = 8, PER_THREAD = 200 };

static void *use_and_release(void *arg)
{
    wf_array *a = arg;
    wf_array *y = wf_sum(wf_exp(a), NULL, 0, false);
    double v = 0;
    wf_status status = wf_array_item(y, &v);
    wf_release(y);
    wf_release(a);
    return (void *)(intptr_t)(status == WF_OK && v > 0);
}

static void test_last_reference_on_another_thread(void)
{
    struct deleter_log log;
    reset_log(&log);
    float v[16] = {0};
    wf_array *a = wf_array_from_external(v, (int64_t[]){16}, 1, WF_DTYPE_F32, NULL, log_deleter,
                                         &log);
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&threads[i], NULL, use_and_release, wf_retain(a));
    wf_release(a);
    int good = 0;
    for (int i = 0; i < THREADS; i++) {
        void *ok = NULL;
        pthread_join(threads[i], &ok);
        good += ok != NULL;
    }
    CHECK_EQ_INT(good, THREADS);
    CHECK_EQ_INT(calls(&log), 1);
    CHECK_EQ_INT(atomic_load(&log.locks_held_max), 0);
}

static atomic_int created_total;

static void free_deleter(void *data, void *ctx)
{
    free(data);
    atomic_fetch_add((atomic_int *)ctx, 1);
}

static void *create_many(void *arg)
{
    atomic_int *freed = arg;
    for (int i = 0; i < PER_THREAD; i++) {
        int64_t n = 1 + i % 17;
        float *mem = malloc((size_t)n * sizeof *mem);
        for (int64_t k = 0; k < n; k++)
            mem[k] = (float)k;
        wf_array *a = wf_array_from_external(mem, &n, 1, WF_DTYPE_F32, NULL, free_deleter, freed);
        if (!a) {
            free(mem);
            continue;
        }
        atomic_fetch_add(&created_total, 1);
        wf_array *s = wf_sum(a, NULL, 0, false);
        wf_release(a);
        double v = 0;
        if (wf_array_item(s, &v) != WF_OK || v != (double)(n * (n - 1) / 2))
            wf_test_fail(__FILE__, __LINE__, "wrong sum %g for n=%lld", v, (long long)n);
        wf_release(s);
    }
    return NULL;
}

static void test_many_threads_many_externals(void)
{
    int64_t live = live_arrays();
    atomic_int freed = 0;
    atomic_store(&created_total, 0);
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&threads[i], NULL, create_many, &freed);
    for (int i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    CHECK_EQ_INT(atomic_load(&created_total), THREADS * PER_THREAD);
    CHECK_EQ_INT(atomic_load(&freed), THREADS * PER_THREAD);
    CHECK_EQ_INT(live_arrays(), live);
}


/* ------------------------------------------------------------ deleters and waits
 *
 * A deleter that takes a lock of the user's, held by a thread that
 * synchronizes the stream the array's last reader ran on (a binding's
 * interpreter lock is this case). The deleter is deferred until its thread
 * holds nothing of weft's: past the stream task, handed to the stream's
 * worker if another thread ran the task, or past the evaluation that freed
 * the memory. It may call anything, waits included. */

enum { DEADLOCK_ROUNDS = 20, GATE_TIMEOUT_MS = 5000, HANG_S = 20 };

struct wait_scenario {
    pthread_mutex_t user_lock;
    wf_stream *stream;
    wf_array *result; /* gate(external) on `stream` */
    atomic_int kernel_started, syncing;
    pthread_t kernel_thread, sync_thread, eval_thread;
    atomic_int deleter_calls, deleter_waits_ok;
    pthread_t deleter_thread;
};

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Copies its input once the synchronizing thread holds the user lock. */
static wf_status gate_kernel(void *payload, const wf_custom_call *call)
{
    struct wait_scenario *w = payload;
    w->kernel_thread = pthread_self();
    atomic_store(&w->kernel_started, 1);
    for (int waited = 0; !atomic_load(&w->syncing) && waited < GATE_TIMEOUT_MS; waited++)
        sleep_ms(1);
    memcpy(call->output, call->inputs[0], 4 * sizeof(float));
    return WF_OK;
}

/* Takes the user lock, then waits for weft work: the stream, and a value. */
static void waiting_deleter(void *data, void *ctx)
{
    (void)data;
    struct wait_scenario *w = ctx;
    pthread_mutex_lock(&w->user_lock);
    w->deleter_thread = pthread_self();
    wf_array *x = wf_add(wf_scalar(1, WF_DTYPE_F32), wf_scalar(2, WF_DTYPE_F32));
    double v = 0;
    if (wf_stream_synchronize(w->stream) == WF_OK && wf_array_item(x, &v) == WF_OK && v == 3)
        atomic_fetch_add(&w->deleter_waits_ok, 1);
    wf_release(x);
    atomic_fetch_add(&w->deleter_calls, 1);
    pthread_mutex_unlock(&w->user_lock);
}

static float gate_input[4] = {1, 2, 3, 4};

/* The scenario's arrays: result = gate(external), built on a new stream;
 * only the result holds the external array. */
static bool scenario_start(struct wait_scenario *w)
{
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->user_lock, NULL);
    w->stream = wf_stream_new();
    if (!CHECK_NOT_NULL(w->stream) || !CHECK_OK(wf_stream_push(w->stream)))
        return false;
    const int64_t shape[1] = {4};
    wf_array *x = wf_array_from_external(gate_input, shape, 1, WF_DTYPE_F32, NULL,
                                         waiting_deleter, w);
    w->result = wf_custom("gate", gate_kernel, w, NULL, &x, 1, shape, 1, WF_DTYPE_F32);
    wf_release(x);
    CHECK_OK(wf_stream_pop());
    return CHECK_NOT_NULL(w->result);
}

/* Waits (bounded) for the deleter, checks what it saw, frees the rest. */
static void scenario_finish(struct wait_scenario *w)
{
    for (int waited = 0; atomic_load(&w->deleter_calls) == 0 && waited < GATE_TIMEOUT_MS;
         waited++)
        sleep_ms(1);
    CHECK_EQ_INT(atomic_load(&w->deleter_calls), 1);
    CHECK_EQ_INT(atomic_load(&w->deleter_waits_ok), 1);
    float out[4] = {0};
    CHECK_OK(wf_array_copy_to(w->result, out, sizeof out));
    CHECK(memcmp(out, gate_input, sizeof out) == 0);
    wf_release(w->result);
    wf_stream_release(w->stream);
    pthread_mutex_destroy(&w->user_lock);
}

/* Holds the user lock while synchronizing the stream. */
static void hold_lock_and_synchronize(struct wait_scenario *w)
{
    pthread_mutex_lock(&w->user_lock);
    w->sync_thread = pthread_self();
    atomic_store(&w->syncing, 1);
    CHECK_OK(wf_stream_synchronize(w->stream));
    pthread_mutex_unlock(&w->user_lock);
}

static void *async_then_synchronize(void *arg)
{
    struct wait_scenario *w = arg;
    CHECK_OK(wf_async_eval(&w->result, 1));
    hold_lock_and_synchronize(w);
    return NULL;
}

static void *synchronize_during_eval(void *arg)
{
    struct wait_scenario *w = arg;
    while (!atomic_load(&w->kernel_started)) /* the other thread's batch is open */
        sleep_ms(1);
    hold_lock_and_synchronize(w);
    return NULL;
}

static void *evaluate(void *arg)
{
    struct wait_scenario *w = arg;
    w->eval_thread = pthread_self();
    CHECK_OK(wf_eval(&w->result, 1));
    return NULL;
}

/* Joins t within HANG_S; a hang is reported and ends the test program
 * (its threads cannot be freed). */
static void join_or_die(pthread_t t, const char *what)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += HANG_S;
    if (pthread_timedjoin_np(t, NULL, &deadline) != 0) {
        wf_test_fail(__FILE__, __LINE__, "%s: deadlock (no progress within %d s)", what, HANG_S);
        _exit(1);
    }
}

static void test_deleter_waits_while_a_worker_task_freed_it(void)
{
    int helped = 0;
    for (int round = 0; round < DEADLOCK_ROUNDS; round++) {
        struct wait_scenario w;
        if (!scenario_start(&w))
            return;
        pthread_t t;
        pthread_create(&t, NULL, async_then_synchronize, &w);
        join_or_die(t, "synchronize while the worker frees an external array");
        scenario_finish(&w);
        /* Whoever ran the task, the deleter never runs on the thread that
         * synchronized (it holds the lock the deleter takes). */
        CHECK(!pthread_equal(w.deleter_thread, w.sync_thread));
        helped += pthread_equal(w.kernel_thread, w.sync_thread);
    }
    printf("    %d of %d tasks run by the synchronizing thread itself\n", helped,
           DEADLOCK_ROUNDS);
}

static void test_deleter_waits_while_an_eval_freed_it(void)
{
    for (int round = 0; round < DEADLOCK_ROUNDS; round++) {
        struct wait_scenario w;
        if (!scenario_start(&w))
            return;
        pthread_t e, t;
        pthread_create(&e, NULL, evaluate, &w);
        pthread_create(&t, NULL, synchronize_during_eval, &w);
        join_or_die(t, "synchronize while another thread's eval frees an external array");
        join_or_die(e, "the eval that freed an external array");
        scenario_finish(&w);
        /* After its evaluation, on the thread that dropped the reference. */
        CHECK(pthread_equal(w.kernel_thread, w.eval_thread));
        CHECK(pthread_equal(w.deleter_thread, w.eval_thread));
    }
}

int main(void)
{
    RUN_TEST(test_zero_copy_and_deleter_once);
    RUN_TEST(test_views_keep_the_memory);
    RUN_TEST(test_lazy_result_keeps_the_memory);
    RUN_TEST(test_strides);
    RUN_TEST(test_memory_is_never_written);
    RUN_TEST(test_not_counted_not_cached);
    RUN_TEST(test_bad_inputs_never_call_the_deleter);
    RUN_TEST(test_empty_and_scalar);
    RUN_TEST(test_scope_releases_it);
    RUN_TEST(test_deleter_may_call_weft);
    RUN_TEST(test_last_reference_on_another_thread);
    RUN_TEST(test_many_threads_many_externals);
    RUN_TEST(test_deleter_waits_while_a_worker_task_freed_it);
    RUN_TEST(test_deleter_waits_while_an_eval_freed_it);
    return TEST_SUMMARY();
}
