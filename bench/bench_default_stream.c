/*
 * bench_default_stream: requests per second from 1, 2 and 4 threads that
 * all evaluate on the shared default stream, side by side with the same
 * threads each on a private stream. The shared default stream must not act
 * as a process-wide lock: both columns should scale alike.
 *
 * Two workloads, each request a synchronous wf_eval:
 *   mlp    batch-1 MLP 784-1024-10 through wf_matmul (+ bias, relu)
 *   chain  a private 8-op elementwise chain on 16K floats
 *
 * The intra-op pool is off (WEFT_NUM_THREADS=1) unless WEFT_NUM_THREADS is
 * set, so the scaling measured is that of the threads' own evaluations.
 *
 *   build/release/bench_default_stream [seconds per cell = 1.0]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_args.h"
#include "weft.h"

enum { MAX_THREADS = 4, IN = 784, HIDDEN = 1024, OUT = 10, CHAIN_N = 16384 };

static double seconds_per_cell = 1.0;
static wf_array *w1, *b1, *w2, *b2; /* shared weights, evaluated once */

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static bool check(wf_status status)
{
    if (status != WF_OK)
        fprintf(stderr, "bench_default_stream: %s\n", wf_last_error_message());
    return status == WF_OK;
}

static bool mlp_request(wf_array *x)
{
    wf_scope_begin();
    wf_array *h = wf_add(wf_matmul(x, w1), b1);
    h = wf_maximum(h, wf_scalar(0, WF_DTYPE_F32));
    wf_array *y = wf_add(wf_matmul(h, w2), b2);
    bool ok = check(wf_eval(&y, 1));
    wf_scope_end();
    return ok;
}

static bool chain_request(wf_array *x)
{
    wf_scope_begin();
    wf_array *half = wf_scalar(0.5, WF_DTYPE_F32), *one = wf_scalar(1, WF_DTYPE_F32);
    wf_array *y = wf_multiply(x, half);
    y = wf_add(y, one);
    y = wf_exp(y);
    y = wf_multiply(y, half);
    y = wf_subtract(y, one);
    y = wf_tanh(y);
    y = wf_add(y, x);
    y = wf_square(y);
    bool ok = check(wf_eval(&y, 1));
    wf_scope_end();
    return ok;
}

struct job {
    bool (*request)(wf_array *x);
    bool private_stream;
    pthread_barrier_t *start;
    double deadline;
    long requests;
};

static wf_array *request_input(bool (*request)(wf_array *))
{
    if (request == mlp_request) {
        int64_t shape[2] = {1, IN};
        return wf_full(shape, 2, 0.01, WF_DTYPE_F32);
    }
    int64_t n = CHAIN_N;
    return wf_full(&n, 1, 0.25, WF_DTYPE_F32);
}

static void *serve(void *arg)
{
    struct job *job = arg;
    wf_stream *s = job->private_stream ? wf_stream_new() : NULL;
    if (s)
        wf_stream_push(s);
    wf_array *x = request_input(job->request);
    check(wf_eval(&x, 1));
    job->request(x); /* warm-up, not counted */
    pthread_barrier_wait(job->start);
    while (now_seconds() < job->deadline && job->request(x))
        job->requests++;
    wf_release(x);
    if (s) {
        wf_stream_pop();
        wf_stream_release(s);
    }
    return NULL;
}

/* Requests per second of `threads` threads serving together. */
static double requests_per_second(bool (*request)(wf_array *), int threads, bool private_stream)
{
    pthread_t t[MAX_THREADS];
    struct job jobs[MAX_THREADS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    for (int i = 0; i < threads; i++) {
        jobs[i] = (struct job){request, private_stream, &start, 0, 0};
        pthread_create(&t[i], NULL, serve, &jobs[i]);
    }
    double deadline = now_seconds() + 0.2 + seconds_per_cell; /* 0.2 s to warm up */
    for (int i = 0; i < threads; i++)
        jobs[i].deadline = deadline;
    pthread_barrier_wait(&start);
    double begin = now_seconds();
    long total = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        total += jobs[i].requests;
    }
    double elapsed = now_seconds() - begin;
    pthread_barrier_destroy(&start);
    return (double)total / elapsed;
}

static void compare(const char *name, bool (*request)(wf_array *))
{
    printf("%s: requests/s\n", name);
    printf("threads   default stream   (x 1 thread)   private streams   (x 1 thread)   "
           "default/private\n");
    double default1 = 0, private1 = 0;
    for (int threads = 1; threads <= MAX_THREADS; threads *= 2) {
        double d = requests_per_second(request, threads, false);
        double p = requests_per_second(request, threads, true);
        if (threads == 1) {
            default1 = d;
            private1 = p;
        }
        printf("%7d   %14.0f   %12.2f   %15.0f   %12.2f   %15.2f\n", threads, d, d / default1,
               p, p / private1, d / p);
    }
}

static wf_array *weights(int64_t rows, int64_t cols)
{
    int64_t shape[2] = {rows, cols};
    wf_key key = wf_random_key((uint64_t)(rows * 31 + cols));
    wf_array *w = wf_random_normal(shape, 2, WF_DTYPE_F32, 0, 0.05, &key);
    check(wf_eval(&w, 1));
    return w;
}

int main(int argc, char **argv)
{
    seconds_per_cell = bench_double_arg(argc, argv, 1, seconds_per_cell, 1e-3, 3600, "seconds per cell");
    setenv("WEFT_NUM_THREADS", "1", 0); /* before the first weft call starts the pool */
    printf("WEFT_NUM_THREADS=%s, %.1f s per cell\n", getenv("WEFT_NUM_THREADS"),
           seconds_per_cell);
    w1 = weights(IN, HIDDEN);
    b1 = weights(1, HIDDEN);
    w2 = weights(HIDDEN, OUT);
    b2 = weights(1, OUT);
    compare("mlp 784-1024-10, batch 1", mlp_request);
    compare("chain of 8 elementwise ops, 16K floats", chain_request);
    wf_release(w1);
    wf_release(b1);
    wf_release(w2);
    wf_release(b2);
    return 0;
}
