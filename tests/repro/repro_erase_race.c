/*
 * repro_erase_race: thread A calls one compiled function with 500 new shapes
 * while thread B compiles, calls and releases 500 closures. A's results stay
 * right, B's closures leave no entry behind, and A's entries are all there.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "repro_common.h"
#include "repro_compile_common.h"

enum { COUNT = 500 };

static atomic_int a_wrong, b_wrong, b_done;
static atomic_int a_running, overlaps; /* B releases while A is between calls' start and end */
static wf_fn *a_fn;

static void *thread_a(void *arg)
{
    (void)arg;
    atomic_store(&a_running, 1);
    for (int64_t n = 1; n <= COUNT; n++) {
        if (!call_and_check(a_fn, n, 5.0f, 0.0f))
            atomic_fetch_add(&a_wrong, 1);
        /* Halfway, wait for some of B's releases, so that they happen
         * between A's calls even when the scheduler ran A alone (a loaded
         * machine once let A finish before B began). */
        for (int waited = 0; n == COUNT / 2 && atomic_load(&b_done) < COUNT / 4 && waited < 30000;
             waited++)
            usleep(1000);
    }
    atomic_store(&a_running, 0);
    return NULL;
}

static void *thread_b(void *arg)
{
    (void)arg;
    /* Start once A runs: on a loaded machine B once did all its releases
     * before A's thread was scheduled at all (the scenario then never
     * happens). A waits for B halfway, so B's releases overlap A's calls. */
    for (int waited = 0; !atomic_load(&a_running) && waited < 30000; waited++)
        usleep(1000);
    for (int i = 0; i < COUNT; i++) {
        float k = (float)(i % 13) - 6.0f;
        wf_fn *f = compiled_scaled(k, NULL);
        if (!f || !call_and_check(f, 1 + i % 7, k, 0.0f))
            atomic_fetch_add(&b_wrong, 1);
        wf_fn_release(f); /* erases f's entries */
        atomic_fetch_add(&overlaps, atomic_load(&a_running));
        atomic_fetch_add(&b_done, 1);
    }
    return NULL;
}

static void *run(void *arg)
{
    (void)arg;
    pthread_t a, b;
    pthread_create(&a, NULL, thread_a, NULL);
    pthread_create(&b, NULL, thread_b, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    return NULL;
}

int main(void)
{
    a_fn = compiled_scaled(5.0f, NULL);
    if (!repro_run_with_deadline(run, NULL, 120)) {
        fprintf(stderr, "hung\n");
        return REPRO_FAIL;
    }
    wf_compile_stats a = wf_compile_stats_default(), g = wf_compile_stats_default();
    wf_compile_stats_get(a_fn, &a);
    wf_compile_stats_get(NULL, &g);
    int status = REPRO_PASS;
    if (atomic_load(&a_wrong) || atomic_load(&b_wrong) || a.entries != COUNT ||
        g.entries != COUNT || g.erases < COUNT) {
        fprintf(stderr, "wrong A %d B %d, A entries %llu, all entries %llu, erases %llu\n",
                atomic_load(&a_wrong), atomic_load(&b_wrong), (unsigned long long)a.entries,
                (unsigned long long)g.entries, (unsigned long long)g.erases);
        status = REPRO_FAIL;
    }
    wf_fn_release(a_fn);
    if (status == REPRO_PASS && atomic_load(&overlaps) == 0) {
        printf("repro_erase_race: no release happened while A was calling\n");
        return REPRO_NOT_REACHED;
    }
    if (status == REPRO_PASS)
        printf("repro_erase_race: %d shapes beside %d closures erased\n", COUNT, COUNT);
    return status;
}
