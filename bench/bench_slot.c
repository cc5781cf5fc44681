/*
 * bench_slot: what reading a published array through a wf_slot costs.
 * Readers on 1, 2 and 4 threads take and drop a reference, either with
 * wf_slot_load (the slot's leaf mutex plus the reference count) or with
 * wf_retain on the same shared array (the reference count alone: the floor
 * any scheme pays), optionally while one writer keeps storing new arrays.
 *
 *   build/release/bench_slot [reads per thread = 1000000]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "weft.h"

static long reads_per_thread = 1000000;
static wf_slot *slot;
static wf_array *shared;
static atomic_bool stop_writer;

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *read_slot(void *arg)
{
    (void)arg;
    for (long i = 0; i < reads_per_thread; i++)
        wf_release(wf_slot_load(slot));
    return NULL;
}

static void *read_retain(void *arg)
{
    (void)arg;
    for (long i = 0; i < reads_per_thread; i++)
        wf_release(wf_retain(shared));
    return NULL;
}

static void *write_slot(void *arg)
{
    long *stores = arg;
    while (!atomic_load(&stop_writer)) {
        wf_array *a = wf_scalar((double)*stores, WF_DTYPE_F32);
        wf_slot_store(slot, a);
        wf_release(a);
        ++*stores;
    }
    return NULL;
}

/* Millions of reads per second, all reader threads together. */
static double throughput(void *(*reader)(void *), int threads, bool with_writer, long *stores)
{
    pthread_t t[4], w;
    atomic_store(&stop_writer, false);
    *stores = 0;
    if (with_writer)
        pthread_create(&w, NULL, write_slot, stores);
    double start = now_seconds();
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, reader, NULL);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    double seconds = now_seconds() - start;
    atomic_store(&stop_writer, true);
    if (with_writer)
        pthread_join(w, NULL);
    return threads * (double)reads_per_thread / seconds / 1e6;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        reads_per_thread = atol(argv[1]) > 0 ? atol(argv[1]) : reads_per_thread;
    shared = wf_scalar(1, WF_DTYPE_F32);
    slot = wf_slot_new(shared);
    long stores = 0;
    throughput(read_slot, 1, false, &stores); /* warm up */
    printf("references taken+dropped per second (millions), %ld per thread\n", reads_per_thread);
    printf("threads   wf_retain   wf_slot_load   (slot/retain)   load with a writer   "
           "(slot/retain)   stores meanwhile\n");
    for (int threads = 1; threads <= 4; threads *= 2) {
        double r = throughput(read_retain, threads, false, &stores);
        double s = throughput(read_slot, threads, false, &stores);
        double sw = throughput(read_slot, threads, true, &stores);
        printf("%7d   %9.2f   %12.2f   %13.2f   %18.2f   %13.2f   %16ld\n", threads, r, s,
               s / r, sw, sw / r, stores);
    }
    wf_slot_release(slot);
    wf_release(shared);
    return 0;
}
