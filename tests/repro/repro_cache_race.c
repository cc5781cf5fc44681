/*
 * repro_cache_race: two threads, two compiled functions, 128 new input
 * shapes each, interleaved on the shared cache. Every result is right, each
 * function traced exactly once per shape, and every entry is accounted for.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "repro_common.h"
#include "repro_compile_common.h"

enum { SHAPES = 128 };

/* Calls in flight now, and the most seen at once (the scenario: 2). */
static atomic_int in_flight, most_in_flight;

/* x * k + 1, tracing slowly (1 ms) so that the two threads' traces overlap. */
static wf_status slow_scaled_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                  size_t *nout)
{
    usleep(1000);
    return scaled_body(payload, in, n, out, nout);
}

static wf_fn *compiled_slow(float k)
{
    struct scaled *s = calloc(1, sizeof *s);
    s->k = k;
    wf_fn *f = wf_fn_new(slow_scaled_body, s, scaled_free);
    wf_fn *cf = wf_compile(f, NULL);
    wf_fn_release(f);
    return cf;
}

static bool tracked_call(wf_fn *f, int64_t n, float k)
{
    int now = atomic_fetch_add(&in_flight, 1) + 1;
    int seen = atomic_load(&most_in_flight);
    while (now > seen && !atomic_compare_exchange_weak(&most_in_flight, &seen, now))
        ;
    bool ok = call_and_check(f, n, k, 0.0f);
    atomic_fetch_sub(&in_flight, 1);
    return ok;
}

struct worker {
    wf_fn *f;
    float k;
    pthread_barrier_t *start;
    int wrong;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    pthread_barrier_wait(w->start);
    for (int64_t n = 1; n <= SHAPES; n++)
        if (!tracked_call(w->f, n, w->k))
            w->wrong++;
    return NULL;
}

static void *run(void *arg)
{
    struct worker *w = arg;
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, work, &w[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    return NULL;
}

int main(void)
{
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 2);
    struct worker w[2] = {{compiled_slow(2.0f), 2.0f, &start, 0},
                          {compiled_slow(-3.0f), -3.0f, &start, 0}};
    if (!repro_run_with_deadline(run, w, 60)) {
        fprintf(stderr, "hung\n");
        return REPRO_FAIL;
    }
    int status = REPRO_PASS;
    for (int i = 0; i < 2; i++) {
        wf_compile_stats st = wf_compile_stats_default();
        wf_compile_stats_get(w[i].f, &st);
        if (w[i].wrong || st.traces != SHAPES || st.entries != SHAPES) {
            fprintf(stderr, "function %d: %d wrong, %llu traces, %llu entries\n", i, w[i].wrong,
                    (unsigned long long)st.traces, (unsigned long long)st.entries);
            status = REPRO_FAIL;
        }
        wf_fn_release(w[i].f);
    }
    wf_compile_stats g = wf_compile_stats_default();
    wf_compile_stats_get(NULL, &g);
    if (g.entries != 0) {
        fprintf(stderr, "%llu entries left after release\n", (unsigned long long)g.entries);
        status = REPRO_FAIL;
    }
    pthread_barrier_destroy(&start);
    if (status == REPRO_PASS && atomic_load(&most_in_flight) < 2) {
        printf("repro_cache_race: the two threads' calls never overlapped\n");
        return REPRO_NOT_REACHED;
    }
    if (status == REPRO_PASS)
        printf("repro_cache_race: 2 x %d shapes, all right, all erased\n", SHAPES);
    return status;
}
