/*
 * Thread churn must leave nothing behind (contract C3): 2,000 short-lived
 * threads each build, evaluate and release arrays on the default stream
 * (some also push a stream of their own, open scopes and leave them open).
 * Afterwards the number of streams, of OS threads in the process, of live
 * arrays and of active bytes equal the baseline.
 *
 * Exit 0 pass; 1 a count differs, a value was wrong or a round hung;
 * 2 the threads did not actually evaluate anything.
 */
#include <dirent.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/array.h"
#include "repro_common.h"
#include "settle.h"
#include "weft.h"

enum { THREADS = 2000, BATCH = 8, DEADLINE_SECONDS = 60 };

static atomic_int wrong_values;
static atomic_int evaluated;

static int os_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* A stream whose last reference is dropped by its own worker (a task freed
 * the last node on it) lets that worker exit by itself, detached, just after:
 * give such exits a bounded moment to finish. */
static int os_threads_settled(int baseline)
{
    int n = os_threads();
    for (int i = 0; i < 200 && n != baseline; i++) {
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
        n = os_threads();
    }
    return n;
}

static void *short_lived(void *arg)
{
    long index = (long)arg;
    int64_t n = 64 + index % 7;
    wf_stream *own = NULL;
    if (index % 5 == 0) { /* some threads use a stream of their own */
        own = wf_stream_new();
        wf_stream_push(own);
    }
    wf_array *a = wf_arange(0, (double)n, 1, WF_DTYPE_F32);
    wf_array *b = wf_multiply(a, a);
    wf_array *c = wf_sum(b, NULL, 0, false);
    double v = -1, expected = (double)(n - 1) * n * (2 * n - 1) / 6;
    if (wf_array_item(c, &v) != WF_OK || v != expected)
        atomic_fetch_add(&wrong_values, 1);
    else
        atomic_fetch_add(&evaluated, 1);
    wf_release(a);
    wf_release(b);
    wf_release(c);
    if (index % 3 == 0) { /* leave a scope open: the thread-exit hook closes it */
        wf_scope_begin();
        wf_array *left = wf_exp(wf_scalar(1, WF_DTYPE_F32));
        (void)left;
    }
    if (own) {
        wf_stream_release(own); /* still pushed: released when the thread exits */
    }
    return NULL;
}

static void *churn(void *arg)
{
    (void)arg;
    for (long i = 0; i < THREADS; i += BATCH) {
        pthread_t t[BATCH];
        for (int k = 0; k < BATCH; k++)
            pthread_create(&t[k], NULL, short_lived, (void *)(i + k));
        for (int k = 0; k < BATCH; k++)
            pthread_join(t[k], NULL);
    }
    return NULL;
}

int main(void)
{
    /* Warm up: the default stream and its worker exist from here on. */
    wf_array *zero = wf_scalar(0, WF_DTYPE_F32);
    wf_array *warm = wf_exp(zero);
    double v;
    wf_array_item(warm, &v);
    wf_release(warm);
    wf_release(zero);
    wf_clear_cache();

    size_t streams = wf_stream_count();
    int threads = os_threads();
    int64_t arrays = live_arrays();
    wf_memory_stats before = wf_memory_stats_default();
    wf_memory_stats_get(&before);

    if (!repro_run_with_deadline(churn, NULL, DEADLINE_SECONDS)) {
        fprintf(stderr, "repro_thread_churn: churn did not finish in %d s\n", DEADLINE_SECONDS);
        return REPRO_FAIL;
    }
    int threads_after = os_threads_settled(threads);
    wf_memory_stats after = wf_memory_stats_default();
    wf_memory_stats_get(&after);
    printf("repro_thread_churn: %d threads evaluated; streams %zu -> %zu, OS threads %d -> %d, "
           "arrays %lld -> %lld, active bytes %zu -> %zu\n",
           atomic_load(&evaluated), streams, wf_stream_count(), threads, threads_after,
           (long long)arrays, (long long)live_arrays(), before.active_bytes,
           after.active_bytes);
    if (atomic_load(&evaluated) + atomic_load(&wrong_values) < THREADS)
        return REPRO_NOT_REACHED;
    int status = REPRO_PASS;
    if (atomic_load(&wrong_values) != 0) {
        fprintf(stderr, "wrong values in %d threads\n", atomic_load(&wrong_values));
        status = REPRO_FAIL;
    }
    if (wf_stream_count() != streams || threads_after != threads ||
        live_arrays() != arrays || after.active_bytes != before.active_bytes) {
        fprintf(stderr, "repro_thread_churn: something was left behind\n");
        status = REPRO_FAIL;
    }
    return status;
}
