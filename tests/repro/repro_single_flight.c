/*
 * repro_single_flight: 8 threads released by a barrier call one cold
 * compiled function whose trace holds the window open. Exactly one trace,
 * seven waits, every result right. 20 rounds, fresh functions, 10 s each.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "repro_common.h"
#include "repro_compile_common.h"

enum { THREADS = 8, ROUNDS = 20 };

static atomic_int traces_seen;

/* y = x * 3 + 1, slowly traced so that the others arrive while it traces. */
static wf_status slow_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                           size_t *nout)
{
    atomic_fetch_add(&traces_seen, 1);
    usleep(30 * 1000);
    return scaled_body(payload, in, n, out, nout);
}

struct round {
    wf_fn *compiled;
    pthread_barrier_t start;
    atomic_int wrong;
};

static void *caller(void *arg)
{
    struct round *r = arg;
    pthread_barrier_wait(&r->start);
    if (!call_and_check(r->compiled, 1000, 3.0f, 0.0f))
        atomic_fetch_add(&r->wrong, 1);
    return NULL;
}

static void *one_round(void *arg)
{
    struct round *r = arg;
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, caller, r);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    return NULL;
}

int main(void)
{
    int total_waits = 0;
    for (int round = 0; round < ROUNDS; round++) {
        struct scaled *s = calloc(1, sizeof *s);
        s->k = 3.0f;
        wf_fn *f = wf_fn_new(slow_body, s, scaled_free);
        struct round r = {.compiled = wf_compile(f, NULL)};
        wf_fn_release(f);
        pthread_barrier_init(&r.start, NULL, THREADS);
        atomic_store(&traces_seen, 0);
        if (!repro_run_with_deadline(one_round, &r, 10)) {
            fprintf(stderr, "round %d: hung\n", round);
            return REPRO_FAIL;
        }
        wf_compile_stats st = wf_compile_stats_default();
        wf_compile_stats_get(r.compiled, &st);
        /* Every call but the tracer's replays: after waiting, or as a plain hit
         * when it arrived after the trace (hits count both). */
        if (atomic_load(&r.wrong) || st.traces != 1 || atomic_load(&traces_seen) != 1 ||
            st.hits != THREADS - 1) {
            fprintf(stderr, "round %d: traces %llu (bodies %d), waits %llu, wrong %d\n", round,
                    (unsigned long long)st.traces, atomic_load(&traces_seen),
                    (unsigned long long)st.waits, atomic_load(&r.wrong));
            return REPRO_FAIL;
        }
        if (st.calls != THREADS || st.misses != 1) {
            fprintf(stderr, "round %d: calls %llu misses %llu\n", round,
                    (unsigned long long)st.calls, (unsigned long long)st.misses);
            return REPRO_FAIL;
        }
        total_waits += (int)st.waits;
        pthread_barrier_destroy(&r.start);
        wf_fn_release(r.compiled);
    }
    printf("repro_single_flight: %d rounds, 1 trace each, %d waits in all\n", ROUNDS,
           total_waits);
    return total_waits > 0 ? REPRO_PASS : REPRO_NOT_REACHED;
}
