/*
 * repro_compile_user_lock: single flight against a user lock. Thread B
 * holds a user lock L and calls a cold compiled f whose trace is running on
 * thread A, and f's body takes L. Strict single flight hangs: B waits for
 * A's trace, A's trace waits for L. With the bounded wait B gives up after
 * the wait timeout and traces for itself (L is recursive, as a lock a
 * function takes inside and outside such calls must be), stores its trace,
 * releases L; A's trace then finishes and serves A's call only.
 *
 * Per round: both results right, traces == 2, timeout_traces == 1,
 * waits == 1, entries == 1, and a later call replays the kept trace
 * without tracing. Exit 2 if B's trace did not run while A's was blocked
 * on L (the scenario did not happen). 5 rounds, 10 s deadline each.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "repro_common.h"
#include "repro_compile_common.h"

enum { ROUNDS = 5 };
static const double WAIT_SECONDS = 0.2; /* shorter than the default: faster rounds */

struct round {
    wf_fn *compiled;
    pthread_mutex_t user_lock; /* L, recursive */
    atomic_int bodies;         /* trace bodies started */
    atomic_int a_waiting_for_lock, a_has_lock;
    atomic_int b_traced_while_a_blocked;
    atomic_int wrong;
};

static _Thread_local bool is_thread_a;

/* The payload: the round, and the scaled closure's constant. */
struct locking {
    struct scaled scaled; /* first: scaled_body reads it */
    struct round *round;
};

/* f: takes L around y = x * 3 + 1. A notes that it waits for L; B (the
 * thread that holds L) notes whether A is still blocked while it traces. */
static wf_status body(void *payload, wf_array *const *in, size_t n, wf_array **out, size_t *nout)
{
    struct locking *l = payload;
    struct round *r = l->round;
    atomic_fetch_add(&r->bodies, 1);
    bool on_a = is_thread_a;
    if (on_a)
        atomic_store(&r->a_waiting_for_lock, 1);
    else if (atomic_load(&r->a_waiting_for_lock) && !atomic_load(&r->a_has_lock))
        atomic_store(&r->b_traced_while_a_blocked, 1);
    pthread_mutex_lock(&r->user_lock);
    if (on_a)
        atomic_store(&r->a_has_lock, 1);
    wf_status status = scaled_body(&l->scaled, in, n, out, nout);
    pthread_mutex_unlock(&r->user_lock);
    return status;
}

static void *thread_a(void *arg)
{
    struct round *r = arg;
    is_thread_a = true;
    if (!call_and_check(r->compiled, 100, 3.0f, 0.0f))
        atomic_fetch_add(&r->wrong, 1);
    return NULL;
}

/* B: holds L, lets A's trace block on it, then calls f itself. */
static void *one_round(void *arg)
{
    struct round *r = arg;
    pthread_mutex_lock(&r->user_lock);
    pthread_t a;
    pthread_create(&a, NULL, thread_a, r);
    while (!atomic_load(&r->a_waiting_for_lock))
        usleep(100);
    usleep(10 * 1000); /* let A reach pthread_mutex_lock */
    if (!call_and_check(r->compiled, 100, 3.0f, 0.0f))
        atomic_fetch_add(&r->wrong, 1);
    pthread_mutex_unlock(&r->user_lock);
    pthread_join(a, NULL);
    return NULL;
}

static void free_locking(void *p) { free(p); }

static bool check_round(int round, struct round *r)
{
    wf_compile_stats st = wf_compile_stats_default();
    wf_compile_stats_get(r->compiled, &st);
    if (atomic_load(&r->wrong) || st.traces != 2 || st.timeout_traces != 1 || st.waits != 1 ||
        st.entries != 1 || atomic_load(&r->bodies) != 2) {
        fprintf(stderr,
                "round %d: wrong %d, traces %llu, timeout_traces %llu, waits %llu, entries %llu, "
                "bodies %d\n",
                round, atomic_load(&r->wrong), (unsigned long long)st.traces,
                (unsigned long long)st.timeout_traces, (unsigned long long)st.waits,
                (unsigned long long)st.entries, atomic_load(&r->bodies));
        return false;
    }
    /* The kept trace serves later calls: no third trace. */
    if (!call_and_check(r->compiled, 100, 3.0f, 0.0f)) {
        fprintf(stderr, "round %d: the call after both traces is wrong\n", round);
        return false;
    }
    wf_compile_stats_get(r->compiled, &st);
    if (st.traces != 2 || st.hits != 1 || atomic_load(&r->bodies) != 2) {
        fprintf(stderr, "round %d: after both traces: traces %llu, hits %llu, bodies %d\n", round,
                (unsigned long long)st.traces, (unsigned long long)st.hits,
                atomic_load(&r->bodies));
        return false;
    }
    return true;
}

int main(void)
{
    if (!getenv("WEFT_COMPILE_WAIT_TIMEOUT") && wf_compile_get_wait_timeout() != 1.0) {
        fprintf(stderr, "the default wait timeout is %g s, documented as 1 s\n",
                wf_compile_get_wait_timeout());
        return REPRO_FAIL;
    }
    if (wf_compile_set_wait_timeout(WAIT_SECONDS) != WF_OK)
        return REPRO_FAIL;
    int reached = 0;
    for (int round = 0; round < ROUNDS; round++) {
        struct round *r = calloc(1, sizeof *r);
        pthread_mutexattr_t attr;
        pthread_mutexattr_init(&attr);
        pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
        pthread_mutex_init(&r->user_lock, &attr);
        pthread_mutexattr_destroy(&attr);
        struct locking *l = calloc(1, sizeof *l);
        l->scaled.k = 3.0f;
        l->round = r;
        wf_fn *f = wf_fn_new(body, l, free_locking);
        r->compiled = wf_compile(f, NULL);
        wf_fn_release(f);
        if (!repro_run_with_deadline(one_round, r, 10)) {
            fprintf(stderr, "round %d: hung (B waits for A's trace, A waits for L)\n", round);
            return REPRO_FAIL;
        }
        if (!check_round(round, r))
            return REPRO_FAIL;
        reached += atomic_load(&r->b_traced_while_a_blocked);
        wf_fn_release(r->compiled);
        pthread_mutex_destroy(&r->user_lock);
        free(r);
    }
    printf("repro_compile_user_lock: %d rounds, %d with B tracing while A's trace waited for L; "
           "2 traces, 1 after a %.1f s wait, 1 entry each\n",
           ROUNDS, reached, WAIT_SECONDS);
    return reached == ROUNDS ? REPRO_PASS : REPRO_NOT_REACHED;
}
