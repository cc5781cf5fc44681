/*
 * bench_streams: independent workloads on N streams from N threads, against
 * the same workloads run one after another on one thread; and the latency of
 * a small synchronous wf_eval. Prints figures and ratios side by side.
 *
 *   build/release/bench_streams [workloads=2] [repeats=5]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_args.h"
#include "weft.h"

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The workload of test 5 in tests/unit/test_concurrency.c. */
static void *workload(void *arg)
{
    bool own_stream = arg != NULL;
    wf_stream *s = own_stream ? wf_stream_new() : NULL;
    if (s)
        wf_stream_push(s);
    int64_t n = 1 << 20;
    wf_scope_begin();
    wf_array *a = wf_full(&n, 1, 0.001, WF_DTYPE_F32);
    for (int i = 0; i < 4; i++)
        a = wf_exp(wf_multiply(a, wf_scalar(0.5, WF_DTYPE_F32)));
    double v;
    if (wf_array_item(wf_sum(a, NULL, 0, false), &v) != WF_OK)
        fprintf(stderr, "bench_streams: %s\n", wf_last_error_message());
    wf_scope_end();
    if (s) {
        wf_stream_pop();
        wf_stream_release(s);
    }
    return NULL;
}

static double run_threads(int workloads)
{
    pthread_t threads[64];
    double start = now_seconds();
    for (int t = 0; t < workloads; t++)
        pthread_create(&threads[t], NULL, workload, (void *)1);
    for (int t = 0; t < workloads; t++)
        pthread_join(threads[t], NULL);
    return now_seconds() - start;
}

static double run_serial(int workloads)
{
    double start = now_seconds();
    for (int t = 0; t < workloads; t++)
        workload(NULL);
    return now_seconds() - start;
}

static double small_eval_latency_us(int iterations)
{
    wf_array *x = wf_scalar(1, WF_DTYPE_F32);
    double start = now_seconds();
    for (int i = 0; i < iterations; i++) {
        wf_array *y = wf_add(x, x);
        wf_eval(&y, 1);
        wf_release(y);
    }
    double elapsed = now_seconds() - start;
    wf_release(x);
    return 1e6 * elapsed / iterations;
}

static double best_of(double (*fn)(int), int arg, int repeats)
{
    double best = 1e30;
    for (int r = 0; r < repeats; r++) {
        double t = fn(arg);
        if (t < best)
            best = t;
    }
    return best;
}

int main(int argc, char **argv)
{
    int workloads = (int)bench_int_arg(argc, argv, 1, 2, 1, 64, "workloads"); /* threads[64] */
    int repeats = (int)bench_int_arg(argc, argv, 2, 5, 1, 1000000, "repeats");
    if (workloads < 1 || workloads > 64)
        workloads = 2;
    workload(NULL); /* warm up the allocator cache and the pool */
    double serial = best_of(run_serial, workloads, repeats);
    double parallel = best_of(run_threads, workloads, repeats);
    const char *pool = getenv("WEFT_NUM_THREADS");
    printf("%d independent workloads (1M floats, 4x multiply+exp, sum), best of %d, "
           "WEFT_NUM_THREADS=%s:\n",
           workloads, repeats, pool ? pool : "(cores)");
    printf("  1 thread, default stream:       %8.2f ms\n", 1e3 * serial);
    printf("  %d threads, %d streams:           %8.2f ms\n", workloads, workloads,
           1e3 * parallel);
    printf("  speed-up:                        %8.2fx\n", serial / parallel);
    printf("small synchronous eval (scalar add), mean of 20000: %.2f us\n",
           small_eval_latency_us(20000));
    return 0;
}
