/*
 * bench_graph_build: the cost of building and releasing one node (wf_add of
 * a scalar with itself) from 1, 2 and 4 threads at once, with one input
 * shared by every thread and with a private input per thread. Shows whether
 * graph building serializes on shared state (node pool, stream and counter
 * cache lines). Sharing one input is inherently contended: every node
 * references it.
 *
 *   build/release/bench_graph_build [nodes per thread = 1000000]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "weft.h"

static long nodes_per_thread = 1000000;
static wf_array *shared_input;

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *build_nodes(void *use_shared)
{
    wf_array *x = use_shared ? shared_input : wf_scalar(1, WF_DTYPE_F32);
    for (long i = 0; i < nodes_per_thread; i++)
        wf_release(wf_add(x, x));
    if (!use_shared)
        wf_release(x);
    return NULL;
}

/* Millions of nodes built and released per second, all threads together. */
static double throughput(int threads, bool shared)
{
    pthread_t t[4];
    double start = now_seconds();
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, build_nodes, shared ? (void *)1 : NULL);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    return threads * (double)nodes_per_thread / (now_seconds() - start) / 1e6;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        nodes_per_thread = atol(argv[1]) > 0 ? atol(argv[1]) : nodes_per_thread;
    shared_input = wf_scalar(1, WF_DTYPE_F32);
    throughput(1, false); /* warm the node pool */
    printf("nodes built+released per second (millions), %ld per thread\n", nodes_per_thread);
    printf("threads   private input   (x 1 thread)   shared input   (x 1 thread)\n");
    double private1 = 0, shared1 = 0;
    for (int threads = 1; threads <= 4; threads *= 2) {
        double p = throughput(threads, false), s = throughput(threads, true);
        if (threads == 1) {
            private1 = p;
            shared1 = s;
        }
        printf("%7d   %13.2f   %12.2f   %12.2f   %12.2f\n", threads, p, p / private1, s,
               s / shared1);
    }
    wf_release(shared_input);
    return 0;
}
