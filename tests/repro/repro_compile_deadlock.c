/*
 * repro_compile_deadlock: thread H calls compiled `outer`, whose body (being
 * traced, cold cache) calls compiled `shared`; thread W calls `shared` at
 * that moment - released by a semaphore posted from inside H's trace, which
 * holds the window open until W is inside `shared`. With a cache lock held
 * across traces (or a wait on `shared` while tracing `outer`) this
 * deadlocks; here H inlines `shared` and W traces it. 20 rounds, fresh
 * functions each, 10 s per round.
 */
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "repro_common.h"
#include "repro_compile_common.h"

enum { ROUNDS = 20 };

struct round {
    wf_fn *shared, *outer;
    sem_t w_may_call;        /* posted by H inside outer's trace */
    atomic_int w_in_shared;  /* W's shared body is running (it traces it) */
    atomic_int overlapped;   /* W was in shared while H traced outer */
    atomic_int h_tracing;
    atomic_int wrong;
};

static _Thread_local struct round *current;
static _Thread_local int is_w; /* this thread is W */

static wf_status shared_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                             size_t *nout)
{
    struct round *r = current;
    if (r && is_w) { /* W, tracing shared */
        atomic_store(&r->w_in_shared, 1);
        usleep(20 * 1000); /* keep W inside while H also calls shared */
    }
    return scaled_body(payload, in, n, out, nout);
}

static wf_status outer_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                            size_t *nout)
{
    (void)payload;
    (void)n;
    struct round *r = current;
    atomic_store(&r->h_tracing, 1);
    sem_post(&r->w_may_call);
    for (int i = 0; i < 2000 && !atomic_load(&r->w_in_shared); i++)
        usleep(1000); /* hold the window open until W is inside shared */
    if (atomic_load(&r->w_in_shared))
        atomic_store(&r->overlapped, 1);
    wf_array *y = NULL;
    size_t one = 1;
    wf_status st = wf_fn_call(r->shared, in, 1, &y, &one);
    atomic_store(&r->h_tracing, 0);
    if (st != WF_OK)
        return st;
    out[0] = y;
    *nout = 1;
    return WF_OK;
}

static void *thread_h(void *arg)
{
    current = arg;
    if (!call_and_check(current->outer, 257, 2.0f, 0.0f))
        atomic_fetch_add(&current->wrong, 1);
    return NULL;
}

static void *thread_w(void *arg)
{
    current = arg;
    is_w = 1;
    sem_wait(&current->w_may_call);
    if (!call_and_check(current->shared, 257, 2.0f, 0.0f))
        atomic_fetch_add(&current->wrong, 1);
    return NULL;
}

static void *one_round(void *arg)
{
    pthread_t h, w;
    pthread_create(&w, NULL, thread_w, arg);
    pthread_create(&h, NULL, thread_h, arg);
    pthread_join(h, NULL);
    pthread_join(w, NULL);
    return NULL;
}

int main(void)
{
    int overlaps = 0;
    for (int round = 0; round < ROUNDS; round++) {
        struct round *r = calloc(1, sizeof *r);
        sem_init(&r->w_may_call, 0, 0);
        struct scaled *s = calloc(1, sizeof *s);
        s->k = 2.0f;
        wf_fn *shared = wf_fn_new(shared_body, s, scaled_free);
        wf_fn *outer = wf_fn_new(outer_body, NULL, NULL);
        r->shared = wf_compile(shared, NULL);
        r->outer = wf_compile(outer, NULL);
        wf_fn_release(shared);
        wf_fn_release(outer);
        if (!repro_run_with_deadline(one_round, r, 10)) {
            fprintf(stderr, "round %d: hung (deadlock)\n", round);
            return REPRO_FAIL;
        }
        if (atomic_load(&r->wrong)) {
            fprintf(stderr, "round %d: wrong result\n", round);
            return REPRO_FAIL;
        }
        overlaps += atomic_load(&r->overlapped);
        wf_fn_release(r->shared);
        wf_fn_release(r->outer);
        sem_destroy(&r->w_may_call);
        free(r);
    }
    printf("repro_compile_deadlock: %d rounds, %d with W inside shared during H's trace\n",
           ROUNDS, overlaps);
    return overlaps > 0 ? REPRO_PASS : REPRO_NOT_REACHED;
}
