/*
 * repro_shared_trace_context: a compiled function shared by two threads
 * replayed the trace of whichever thread traced it first, with that
 * thread's transform context baked in (issue 23, item 1; DESIGN C4). The
 * function calls attention, which records its training path inside a
 * gradient transform and the fused primitive elsewhere, so thread B's plain
 * call got thread A's gradient-path bits (and the other way round).
 *
 * Each round makes a fresh compiled function; the first thread calls it
 * (under a transform, or plainly) and, inside its trace, waits until the
 * second thread's call (plainly, or under the transform) has started and
 * its own trace is running beside it, at most WAIT_MS. Fixed, the two
 * calls have different keys and trace side by side; broken, the second
 * call waits for the first's trace and replays it. Both results are
 * compared bitwise with solo runs. Exit 0 pass, 1 a wrong result or a
 * hang past the deadline, 2 the second call started only after the
 * first's trace was stored (the race never happened).
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "repro/repro_common.h"
#include "transform_cases.h"

enum { WAIT_MS = 1000, DEADLINE_S = 60 };

/* The transforms whose first compiled call happens under the transform (a
 * checkpoint's first call is its plain forward: test_compile_context). */
static const enum case_kind transforms[] = {CASE_VJP, CASE_JVP, CASE_VMAP, CASE_GRAD,
                                            CASE_VALUE_AND_GRAD};
enum { NTRANSFORMS = sizeof transforms / sizeof transforms[0] };

static case_inputs inputs;
static wf_array *solo[CASE_COUNT][CASE_MAX_OUTPUTS];
static size_t solo_count[CASE_COUNT];

/* Which call of the round this thread makes (0: a solo run). */
static _Thread_local int role;
enum { ROLE_SOLO, ROLE_FIRST, ROLE_SECOND };

static atomic_int first_in_trace, second_started, second_in_trace;
static atomic_int overlapped; /* the second call started while the first traced */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Runs inside every trace of the round's function. */
static void rendezvous(void)
{
    if (role == ROLE_SECOND) {
        atomic_store(&second_in_trace, 1);
    } else if (role == ROLE_FIRST) {
        atomic_store(&first_in_trace, 1);
        const double until = now_ms() + WAIT_MS;
        while (!atomic_load(&second_in_trace) && now_ms() < until)
            sched_yield();
        if (atomic_load(&second_started))
            atomic_store(&overlapped, 1);
    }
}

typedef struct call_job {
    enum case_kind kind;
    int role;
    wf_fn *att;
    wf_array *out[CASE_MAX_OUTPUTS];
    size_t nout;
    wf_status status;
} call_job;

static void *call_thread(void *arg)
{
    call_job *job = arg;
    role = job->role;
    if (role == ROLE_SECOND) {
        while (!atomic_load(&first_in_trace))
            sched_yield();
        atomic_store(&second_started, 1);
    }
    job->status = case_run(job->kind, job->att, &inputs, job->out, &job->nout);
    return NULL;
}

typedef struct round_spec {
    enum case_kind kind;
    bool transform_first;
    int64_t differ; /* values unlike the solo runs (-1: a call failed) */
} round_spec;

static int64_t job_differ(const call_job *job)
{
    if (job->status != WF_OK)
        return -1;
    return case_results_differ(job->out, job->nout, solo[job->kind], solo_count[job->kind]);
}

static void *round_main(void *arg)
{
    round_spec *r = arg;
    atomic_store(&first_in_trace, 0);
    atomic_store(&second_started, 0);
    atomic_store(&second_in_trace, 0);
    atomic_store(&overlapped, 0);
    wf_fn *body = wf_fn_new(case_attention_body, &inputs, NULL), *att = wf_compile(body, NULL);
    call_job transformed = {.kind = r->kind, .att = att},
             plain = {.kind = CASE_PLAIN, .att = att};
    call_job *first = r->transform_first ? &transformed : &plain;
    call_job *second = r->transform_first ? &plain : &transformed;
    first->role = ROLE_FIRST;
    second->role = ROLE_SECOND;
    pthread_t a, b;
    pthread_create(&a, NULL, call_thread, first);
    pthread_create(&b, NULL, call_thread, second);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    const int64_t d1 = job_differ(&transformed), d2 = job_differ(&plain);
    r->differ = d1 < 0 || d2 < 0 ? -1 : d1 + d2;
    case_results_release(transformed.out, transformed.nout);
    case_results_release(plain.out, plain.nout);
    wf_fn_release(att);
    wf_fn_release(body);
    return NULL;
}

static bool make_solo_results(void)
{
    for (int kind = 0; kind < CASE_COUNT; kind++) {
        wf_fn *body = wf_fn_new(case_attention_body, &inputs, NULL), *att = wf_compile(body, NULL);
        wf_status st = case_run((enum case_kind)kind, att, &inputs, solo[kind], &solo_count[kind]);
        wf_fn_release(att);
        wf_fn_release(body);
        if (st != WF_OK)
            return false;
    }
    return true;
}

int main(void)
{
    inputs = case_inputs_make();
    case_body_hook = rendezvous;
    if (!make_solo_results()) {
        printf("repro_shared_trace_context: FAILED (a solo run failed: %s)\n",
               wf_last_error_message());
        return REPRO_FAIL;
    }
    /* The scenario needs the two attention paths to give other bits. */
    const bool paths_differ = case_bits_differ(solo[CASE_VJP][0], solo[CASE_PLAIN][0]) > 0;
    int failed = 0, missed = 0;
    for (int t = 0; t < NTRANSFORMS; t++) {
        for (int order = 0; order < 2; order++) {
            round_spec r = {.kind = transforms[t], .transform_first = order == 0};
            if (!repro_run_with_deadline(round_main, &r, DEADLINE_S)) {
                printf("repro_shared_trace_context: FAILED (%s round hung past %d s)\n",
                       case_names[r.kind], DEADLINE_S);
                return REPRO_FAIL;
            }
            const bool overlap = atomic_load(&overlapped) != 0;
            printf("  %-15s %-16s overlap %s, %lld values unlike the solo runs\n",
                   case_names[r.kind], r.transform_first ? "transform first" : "plain first",
                   overlap ? "yes" : "no", (long long)r.differ);
            failed += r.differ != 0;
            missed += !overlap;
        }
    }
    printf("repro_shared_trace_context: %d of %d rounds wrong, %d without overlap\n", failed,
           2 * NTRANSFORMS, missed);
    for (int kind = 0; kind < CASE_COUNT; kind++)
        case_results_release(solo[kind], solo_count[kind]);
    case_inputs_free(&inputs);
    if (failed)
        return REPRO_FAIL;
    if (missed || !paths_differ)
        return REPRO_NOT_REACHED;
    return REPRO_PASS;
}
