/*
 * repro_closure_release: a compiled closure capturing array `c` is called
 * once on a second thread that stays alive (no per-thread cache may keep the
 * trace). Releasing the compiled function on the first thread frees every
 * trace, so `c` is uniquely referenced again (by this test). 20 rounds.
 */
#include <stdatomic.h>
#include <stdio.h>

#include "core/array.h"
#include "repro_common.h"
#include "repro_compile_common.h"

enum { ROUNDS = 20 };

struct shared {
    wf_fn *compiled;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int called, quit;
    bool ok;
};

/* The second thread: calls once, then stays alive until told to quit. */
static void *second(void *arg)
{
    struct shared *s = arg;
    bool ok = call_and_check(s->compiled, 33, 4.0f, 10.0f);
    pthread_mutex_lock(&s->lock);
    s->ok = ok;
    s->called = 1;
    pthread_cond_broadcast(&s->changed);
    while (!s->quit)
        pthread_cond_wait(&s->changed, &s->lock);
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static int64_t refcount(wf_array *a) { return atomic_load(&a->refcount); }

static void *one_round(void *arg)
{
    int *result = arg;
    wf_array *c = wf_scalar(10.0, WF_DTYPE_F32);
    struct shared s = {.compiled = compiled_scaled(4.0f, c)};
    pthread_mutex_init(&s.lock, NULL);
    pthread_cond_init(&s.changed, NULL);
    pthread_t t;
    pthread_create(&t, NULL, second, &s);
    pthread_mutex_lock(&s.lock);
    while (!s.called)
        pthread_cond_wait(&s.changed, &s.lock);
    pthread_mutex_unlock(&s.lock);
    wf_compile_stats st = wf_compile_stats_default();
    wf_compile_stats_get(s.compiled, &st);
    bool traced = st.traces == 1 && refcount(c) > 1; /* the closure and its trace hold c */
    wf_fn_release(s.compiled); /* on this thread, while the caller thread lives */
    int64_t left = refcount(c);
    pthread_mutex_lock(&s.lock);
    s.quit = 1;
    pthread_cond_broadcast(&s.changed);
    pthread_mutex_unlock(&s.lock);
    pthread_join(t, NULL);
    *result = !traced ? REPRO_NOT_REACHED : (!s.ok || left != 1) ? REPRO_FAIL : REPRO_PASS;
    if (*result == REPRO_FAIL)
        fprintf(stderr, "c has %lld references after release (want 1), result ok: %d\n",
                (long long)left, s.ok);
    wf_release(c);
    pthread_mutex_destroy(&s.lock);
    pthread_cond_destroy(&s.changed);
    return NULL;
}

int main(void)
{
    for (int round = 0; round < ROUNDS; round++) {
        int result = REPRO_FAIL;
        if (!repro_run_with_deadline(one_round, &result, 10)) {
            fprintf(stderr, "round %d: hung\n", round);
            return REPRO_FAIL;
        }
        if (result != REPRO_PASS)
            return result;
    }
    printf("repro_closure_release: %d rounds, the captured array freed with the function\n",
           ROUNDS);
    return REPRO_PASS;
}
