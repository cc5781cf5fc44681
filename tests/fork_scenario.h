/*
 * fork_scenario.h - fork() in the middle of concurrent evaluation, as
 * Python's multiprocessing does to an embedding library (issue 8). Shared by
 * tests/unit/test_fork.c and tests/repro/repro_fork_mid_eval.c.
 *
 * The parent starts threads whose work is held at a gate (a flag they poll)
 * so that it is surely in flight when the round thread forks:
 *   - a synchronous wf_eval on the default stream whose custom kernel waits;
 *   - a synchronous wf_eval on a private stream, same;
 *   - a wf_async_eval on the default stream (the worker runs the kernel);
 *   - a wf_async_eval on a private stream;
 *   - a compiled function whose body waits while it is being traced;
 *   - an intra-op pool job whose chunks wait (caller and pool threads);
 * and two threads that keep working without a gate: big reductions (the
 * pool) and slot stores and loads inside an open scope. The round thread
 * holds an open scope too, and a lazy array built on an in-flight one.
 *
 * The child (only the forking thread survives) opens its own copy of the
 * gate and checks: every in-flight array reports the fork error instead of
 * hanging, and so does the array built on one; fresh graphs give exact
 * values on the default stream and a new stream, asynchronously too (the
 * workers come back); the pool works again, with its threads recreated; the
 * compiled function that was mid-trace traces again and is right; the slot,
 * the scope and the lock checker are usable. It ends with _exit (see
 * fork_child_exit). The parent opens the gate, checks every thread's result,
 * waits for the child under a deadline (killing it if it hangs) and keeps
 * computing.
 */
#ifndef WEFT_TESTS_FORK_SCENARIO_H
#define WEFT_TESTS_FORK_SCENARIO_H

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/array.h"
#include "runtime/pool.h"
#include "util/fork.h"
#include "util/lock.h"
#include "weft.h"

/* ThreadSanitizer does not support threads started in the child of a
 * multithreaded process: by default it kills the child (die_after_fork),
 * and with die_after_fork=0 a new thread that reuses a gone thread's stack
 * is a fatal "dup thread" error. (It also stops checking in such a child.)
 * So under TSan the child checks only what needs no new thread: in-flight
 * arrays fail, synchronous evaluation (the pool restarted with one thread,
 * WEFT_NUM_THREADS=1), compile, custom kernels, slots, scopes and the lock
 * checker; TSan's default die_after_fork=1 proves no thread was started.
 * The checks that need new threads (asynchronous work on the default and a
 * new stream, the pool's threads coming back) run in the release and ASan
 * builds. TSan checks the parent side fully: the prepare and parent
 * handlers run while the other threads work. */
#if defined(__SANITIZE_THREAD__)
#define FORK_SCENARIO_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FORK_SCENARIO_TSAN 1
#endif
#endif
#ifdef FORK_SCENARIO_TSAN
enum { FORK_CHILD_MAY_START_THREADS = 0 };
#else
enum { FORK_CHILD_MAY_START_THREADS = 1 };
#endif

/* GCC 12's AddressSanitizer does not lock its allocator around fork(): a
 * parent thread inside malloc at that instant leaves a size class locked
 * forever in the child, and the child's first thread that needs it hangs
 * (a plain C program with four threads churning malloc and a child thread
 * that allocates hangs about once in 200 forks; glibc's malloc, which
 * locks its arenas across fork, never does). weft's own locks are all held
 * across fork (util/fork.h), so under ASan the two free-running threads
 * pause between iterations while the round thread forks: then no thread is
 * inside malloc, and the child checks everything. The gated threads are
 * parked in the gate's sleep loop. The release and TSan builds fork with
 * the free-running threads running. */
#if defined(__SANITIZE_ADDRESS__)
#define FORK_SCENARIO_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FORK_SCENARIO_ASAN 1
#endif
#endif
#ifdef FORK_SCENARIO_ASAN
enum { FORK_PAUSE_FREE_RUNNING = 1 };
#else
enum { FORK_PAUSE_FREE_RUNNING = 0 };
#endif

enum {
    FORK_N = 4096,           /* elements of the gated arrays */
    FORK_BIG = 1 << 21,      /* elements of the reductions (several pool chunks) */
    FORK_GATED = 6,          /* gated pieces of work in flight at fork() */
    FORK_CHILD_SECONDS = 60, /* the child's deadline (the parent kills it after) */
    FORK_REACH_SECONDS = 30  /* for the gated work to reach the gate */
};

/* What a round ended with (the repro's exit codes). */
enum fork_outcome { FORK_PASS = 0, FORK_FAIL = 1, FORK_NOT_REACHED = 2 };

/* ------------------------------------------------------------ the gate */

static atomic_int fork_gate_open;
static atomic_int fork_gate_waiting; /* distinct gated pieces of work waiting now */
static atomic_int fork_failures;     /* failed checks, in whichever process */
static int fork_parent_pool_size;    /* wf__pool_size() in the parent, before forking */

static void fork_fail(const char *what)
{
    fprintf(stderr, "fork scenario [pid %d]: %s (last error: %s)\n", (int)getpid(), what,
            wf_last_error_message());
    fflush(stderr);
    atomic_fetch_add(&fork_failures, 1);
}

static void fork_sleep_us(long us)
{
    struct timespec t = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&t, NULL);
}

static double fork_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Waits for the gate; `counted` says whether this wait is one of the
 * FORK_GATED pieces the round waits for (pool chunks count once). */
static void fork_gate_wait(bool counted)
{
    if (counted)
        atomic_fetch_add(&fork_gate_waiting, 1);
    while (!atomic_load(&fork_gate_open))
        fork_sleep_us(200);
}

/* A custom kernel: out = in + 1 (float32), once the gate is open. */
static wf_status fork_gated_plus_one(void *payload, const wf_custom_call *call)
{
    (void)payload;
    fork_gate_wait(true);
    const float *in = call->inputs[0];
    float *out = call->output;
    for (int64_t i = 0; i < call->output_shape[0]; i++)
        out[i] = in[i] + 1.0f;
    return WF_OK;
}

static wf_array *fork_gated(wf_array *x)
{
    int64_t n = FORK_N;
    return wf_custom("gated", fork_gated_plus_one, NULL, NULL, &x, 1, &n, 1, WF_DTYPE_F32);
}

/* x * 3 + 1; while tracing, first waits at the gate (compile's body). */
static atomic_int fork_trace_gated; /* 1: the body waits (the parent's trace) */

static wf_status fork_gated_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                 size_t *nout)
{
    (void)payload;
    (void)n;
    if (atomic_exchange(&fork_trace_gated, 0))
        fork_gate_wait(true);
    wf_scope_begin();
    wf_array *y = wf_keep(wf_add(wf_multiply(in[0], wf_scalar(3, WF_DTYPE_F32)),
                                 wf_scalar(1, WF_DTYPE_F32)));
    wf_scope_end();
    if (!y)
        return wf_last_error();
    out[0] = y;
    *nout = 1;
    return WF_OK;
}

/* Pool chunks that wait at the gate: the caller and the pool threads. */
static atomic_int fork_pool_chunk_entered;

static void fork_gated_chunk(void *ctx, int64_t begin, int64_t end)
{
    atomic_int_fast64_t *sum = ctx;
    fork_gate_wait(atomic_fetch_add(&fork_pool_chunk_entered, 1) == 0);
    atomic_fetch_add(sum, end - begin);
}

/* Chunks slow enough that a pool thread surely takes some. */
static void fork_slow_chunk(void *ctx, int64_t begin, int64_t end)
{
    atomic_int_fast64_t *sum = ctx;
    fork_sleep_us(2000);
    atomic_fetch_add(sum, end - begin);
}

/* ------------------------------------------------------------ checks */

/* Whether `a` evaluates to `value` in every element (exact). */
static bool fork_all_equal(wf_array *a, float value)
{
    const float *data;
    if (!a || wf_array_data(a, (const void **)&data) != WF_OK)
        return false;
    int64_t n = wf_array_size(a);
    for (int64_t i = 0; i < n; i++)
        if (data[i] != value)
            return false;
    return true;
}

static bool fork_item_is(wf_array *a, double value)
{
    double got;
    return a && wf_array_item(a, &got) == WF_OK && got == value;
}

static wf_array *fork_filled(float value)
{
    int64_t n = FORK_N;
    return wf_full(&n, 1, value, WF_DTYPE_F32);
}

/* ------------------------------------------------------------ the parent's threads */

enum fork_job { JOB_SYNC_DEFAULT, JOB_SYNC_STREAM, JOB_ASYNC_DEFAULT, JOB_ASYNC_STREAM, JOB_COUNT };

struct fork_world {
    wf_array *in_flight[JOB_COUNT]; /* roots held at the gate (owned by their threads) */
    wf_fn *compiled;                /* its body waits at the gate while traced */
    wf_slot *slot;
    atomic_int roots_published;
    atomic_int stop;             /* the ungated threads stop */
    atomic_int reductions_done;  /* big reductions finished (ungated) */
    atomic_int slot_rounds_done; /* slot store/load rounds (ungated) */
    atomic_int pause;            /* 1: the ungated threads pause (ASan, at fork) */
    atomic_int paused;           /* ungated threads paused now */
};

/* Between iterations of an ungated thread: waits while a pause is asked. */
static void fork_pause_point(struct fork_world *w)
{
    if (!atomic_load(&w->pause))
        return;
    atomic_fetch_add(&w->paused, 1);
    while (atomic_load(&w->pause))
        fork_sleep_us(200);
    atomic_fetch_sub(&w->paused, 1);
}

struct fork_job_arg {
    struct fork_world *w;
    int job;
};

/* One gated evaluation: (gated(x) + 1) * 2 from x = job + 1, published so
 * the child can look at it. Expected: (job + 3) * 2. */
static void *fork_gated_eval_thread(void *p)
{
    struct fork_job_arg *arg = p;
    int job = arg->job;
    wf_stream *s = NULL;
    if (job == JOB_SYNC_STREAM || job == JOB_ASYNC_STREAM) {
        s = wf_stream_new();
        wf_stream_push(s);
    }
    wf_scope_begin();
    wf_array *root = wf_keep(wf_multiply(wf_add(fork_gated(fork_filled((float)job + 1)),
                                                wf_scalar(1, WF_DTYPE_F32)),
                                         wf_scalar(2, WF_DTYPE_F32)));
    wf_scope_end(); /* the root's graph holds what it needs */
    arg->w->in_flight[job] = root; /* released by the round thread */
    atomic_fetch_add(&arg->w->roots_published, 1);
    wf_status st = job == JOB_ASYNC_DEFAULT || job == JOB_ASYNC_STREAM ? wf_async_eval(&root, 1)
                                                                        : wf_eval(&root, 1);
    if (st != WF_OK || !fork_all_equal(root, (float)(job + 3) * 2))
        fork_fail("a gated evaluation gave a wrong result in the parent");
    if (s) {
        wf_stream_pop();
        wf_stream_release(s);
    }
    return NULL;
}

static void *fork_trace_thread(void *p)
{
    struct fork_world *w = p;
    wf_array *x = fork_filled(2), *y = NULL;
    size_t nout = 1;
    if (wf_fn_call(w->compiled, &x, 1, &y, &nout) != WF_OK || !fork_all_equal(y, 7))
        fork_fail("the compiled function traced at fork() gave a wrong result in the parent");
    wf_release(y);
    wf_release(x);
    return NULL;
}

static void *fork_pool_job_thread(void *p)
{
    (void)p;
    atomic_int_fast64_t sum;
    atomic_init(&sum, 0);
    wf__parallel_for(FORK_BIG, 1, fork_gated_chunk, &sum);
    if (atomic_load(&sum) != FORK_BIG)
        fork_fail("the gated pool job missed elements in the parent");
    return NULL;
}

static void *fork_reduce_thread(void *p)
{
    struct fork_world *w = p;
    int64_t n = FORK_BIG;
    while (!atomic_load(&w->stop)) {
        fork_pause_point(w);
        wf_scope_begin();
        wf_array *total = wf_sum(wf_ones(&n, 1, WF_DTYPE_F32), NULL, 0, false);
        if (!fork_item_is(total, FORK_BIG))
            fork_fail("a big reduction was wrong in the parent");
        wf_scope_end();
        atomic_fetch_add(&w->reductions_done, 1);
    }
    return NULL;
}

static void *fork_slot_thread(void *p)
{
    struct fork_world *w = p;
    wf_scope_begin(); /* open across the fork */
    for (int i = 1; !atomic_load(&w->stop); i++) {
        fork_pause_point(w);
        wf_array *v = wf_scalar(i, WF_DTYPE_F32);
        wf_slot_store(w->slot, v);
        wf_array *back = wf_slot_load(w->slot);
        double got;
        if (!back || wf_array_item(back, &got) != WF_OK || got < 1)
            fork_fail("a slot load gave a wrong value in the parent");
        wf_release(back);
        wf_release(v);
        atomic_fetch_add(&w->slot_rounds_done, 1);
    }
    wf_scope_end();
    return NULL;
}

/* ------------------------------------------------------------ the child */

/* In the child: `a` was in flight in the parent; evaluating it must fail
 * with the fork error, quickly. */
static void fork_expect_in_flight_error(wf_array *a, const char *what)
{
    wf_status st = wf_eval(&a, 1);
    if (st != WF_ERR_KERNEL || !strstr(wf_last_error_message(), "fork()")) {
        fprintf(stderr, "  %s: status %s, message \"%s\"\n", what, wf_status_name(st),
                wf_last_error_message());
        fork_fail("an array in flight at fork() did not report the fork error");
    }
    const void *data;
    if (wf_array_data(a, &data) == WF_OK)
        fork_fail("data access of an array in flight at fork() succeeded");
}

/* Polls `a` until READY with no wait of this thread's (so only a stream's
 * worker can compute it). */
static bool fork_ready_without_waiting(wf_array *a)
{
    double deadline = fork_now() + 20;
    while (wf__array_state(a) < WF_NODE_READY && fork_now() < deadline)
        fork_sleep_us(500);
    return wf__array_state(a) == WF_NODE_READY;
}

/* First thing in a child: under TSan, no new threads (see the top). */
static void fork_child_begin(void)
{
    atomic_store(&fork_gate_open, 1); /* this process's copy of the gate */
    if (!FORK_CHILD_MAY_START_THREADS)
        setenv("WEFT_NUM_THREADS", "1", 1); /* read when the pool restarts */
}

static void fork_child_streams(void)
{
    wf_scope_begin();
    wf_array *b = wf_add(wf_multiply(fork_filled(2), wf_scalar(3, WF_DTYPE_F32)),
                         wf_scalar(1, WF_DTYPE_F32));
    if (!fork_all_equal(b, 7))
        fork_fail("child: a fresh graph on the default stream");
    if (!FORK_CHILD_MAY_START_THREADS) {
        wf_scope_end();
        return;
    }
    /* Asynchronous work on the default stream: its worker died with the
     * parent's threads and must come back. */
    wf_array *c = wf_add(fork_filled(5), wf_scalar(1, WF_DTYPE_F32));
    if (wf_async_eval(&c, 1) != WF_OK || !fork_ready_without_waiting(c) || !fork_all_equal(c, 6))
        fork_fail("child: asynchronous work on the default stream never ran (no worker)");
    wf_stream *s = wf_stream_new();
    if (!s || wf_stream_push(s) != WF_OK) {
        fork_fail("child: a new stream");
    } else {
        wf_array *d = wf_multiply(fork_filled(4), fork_filled(4));
        wf_array *e = wf_add(d, wf_scalar(1, WF_DTYPE_F32));
        wf_stream_pop();
        if (wf_async_eval(&d, 1) != WF_OK || !fork_ready_without_waiting(d) ||
            !fork_all_equal(e, 17) || wf_stream_synchronize(s) != WF_OK)
            fork_fail("child: work on a new stream");
    }
    wf_stream_release(s);
    wf_scope_end();
}

/* Call in the parent before forking. */
static void fork_note_parent_pool(void) { fork_parent_pool_size = wf__pool_size(); }

static void fork_child_pool(void)
{
    wf_scope_begin();
    int64_t n = FORK_BIG, mk[2] = {128, 128};
    if (!fork_item_is(wf_sum(wf_ones(&n, 1, WF_DTYPE_F32), NULL, 0, false), FORK_BIG))
        fork_fail("child: a big reduction");
    wf_array *m = wf_matmul(wf_ones(mk, 2, WF_DTYPE_F32), wf_full(mk, 2, 2, WF_DTYPE_F32));
    if (!fork_all_equal(m, 256))
        fork_fail("child: a matmul");
    wf_scope_end();
    /* The pool's threads are recreated (as many as in the parent, which
     * started its pool before forking): with more than one, some chunk of a
     * job whose chunks take a while runs on a pool thread. */
    if (!FORK_CHILD_MAY_START_THREADS) {
        if (wf__pool_size() != 1)
            fork_fail("child: the pool restarted with threads under TSan");
        return;
    }
    if (wf__pool_size() != fork_parent_pool_size)
        fork_fail("child: the pool did not come back at its size");
    if (wf__pool_size() > 1) {
        uint64_t helped = wf__pool_chunks_helped();
        double deadline = fork_now() + 20;
        while (wf__pool_chunks_helped() == helped && fork_now() < deadline) {
            atomic_int_fast64_t sum;
            atomic_init(&sum, 0);
            wf__parallel_for(64, 1, fork_slow_chunk, &sum);
            if (atomic_load(&sum) != 64)
                fork_fail("child: a pool job missed elements");
        }
        if (wf__pool_chunks_helped() == helped)
            fork_fail("child: no pool thread ever ran a chunk");
    }
}

static void fork_child_compile(struct fork_world *w)
{
    /* The parent's trace of this very signature was in flight: the entry
     * must not make this call wait; it traces again here. */
    wf_array *x = fork_filled(2), *y = NULL;
    size_t nout = 1;
    if (wf_fn_call(w->compiled, &x, 1, &y, &nout) != WF_OK || !fork_all_equal(y, 7))
        fork_fail("child: the compiled function that was mid-trace at fork()");
    wf_release(y);
    wf_release(x);
    wf_fn *fresh_fn = wf_fn_new(fork_gated_body, NULL, NULL);
    wf_fn *fresh = wf_compile(fresh_fn, NULL);
    wf_fn_release(fresh_fn);
    x = fork_filled(1);
    y = NULL;
    nout = 1;
    if (wf_fn_call(fresh, &x, 1, &y, &nout) != WF_OK || !fork_all_equal(y, 4))
        fork_fail("child: a new compiled function");
    wf_release(y);
    wf_release(x);
    wf_fn_release(fresh);
}

/* Everything the child checks; returns its exit status. */
static int fork_child_run(struct fork_world *w, wf_array *on_in_flight, wf_array *scoped_ready)
{
    fork_child_begin();
    if (wf__fork_children() != 1)
        fork_fail("child: the fork hooks did not run once");
    if (wf__locks_held() != 0)
        fork_fail("child: the lock checker thinks this thread holds locks");
    for (int j = 0; j < JOB_COUNT; j++)
        fork_expect_in_flight_error(w->in_flight[j], "an in-flight root");
    fork_expect_in_flight_error(on_in_flight, "an array built on an in-flight root");
    /* The default stream had a synchronous batch open and tasks queued and
     * running at the fork, all of gone threads: synchronizing returns. */
    wf_stream *def = wf_default_stream();
    if (wf_stream_synchronize(def) != WF_OK || wf_stream_count() < 1)
        fork_fail("child: synchronizing the default stream");
    wf_stream_release(def);
    fork_child_streams();
    fork_child_pool();
    fork_child_compile(w);
    /* A gated kernel computed in the child (its gate is open here). */
    wf_scope_begin();
    if (!fork_all_equal(fork_gated(fork_filled(9)), 10))
        fork_fail("child: a custom kernel");
    wf_scope_end();
    wf_array *v = wf_slot_load(w->slot);
    double got;
    if (!v || wf_array_item(v, &got) != WF_OK || got < 1)
        fork_fail("child: the slot stored to at fork()");
    wf_release(v);
    if (!fork_all_equal(scoped_ready, 3))
        fork_fail("child: an array of the scope open across fork()");
    if (wf_scope_end() != WF_OK) /* the round thread's scope, open across the fork */
        fork_fail("child: ending the scope open across fork()");
    if (wf__locks_held() != 0)
        fork_fail("child: a lock left held");
    return atomic_load(&fork_failures) ? FORK_FAIL : FORK_PASS;
}

/* The child ends with _exit: the references the parent's gone threads held
 * (their roots, scopes, queued tasks) can never be dropped, so a leak
 * checker at exit would report them; the parent checks leaks instead. */
static void fork_child_exit(int status)
{
    fflush(stdout);
    fflush(stderr);
    _exit(status);
}

/* Waits for the child; kills it past the deadline. Returns its exit status,
 * or FORK_FAIL when it hung or died. */
static int fork_wait_child(pid_t pid)
{
    double deadline = fork_now() + FORK_CHILD_SECONDS;
    int status = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR) {
            fork_fail("waitpid failed");
            return FORK_FAIL;
        }
        if (fork_now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            fork_fail("the child hung past its deadline and was killed");
            return FORK_FAIL;
        }
        fork_sleep_us(2000);
    }
    if (!WIFEXITED(status)) {
        fprintf(stderr, "fork scenario: the child died (signal %d)\n",
                WIFSIGNALED(status) ? WTERMSIG(status) : -1);
        return FORK_FAIL;
    }
    return WEXITSTATUS(status);
}

/* ------------------------------------------------------------ a round */

static bool fork_wait_until(atomic_int *counter, int at_least)
{
    double deadline = fork_now() + FORK_REACH_SECONDS;
    while (atomic_load(counter) < at_least && fork_now() < deadline)
        fork_sleep_us(500);
    return atomic_load(counter) >= at_least;
}

/* One round: threads, fork in the middle, checks on both sides. Returns a
 * fork_outcome. Runs on any thread of the parent (that thread forks). */
static int fork_round(void)
{
    struct fork_world w = {0};
    atomic_store(&fork_gate_open, 0);
    atomic_store(&fork_gate_waiting, 0);
    atomic_store(&fork_pool_chunk_entered, 0);
    atomic_store(&fork_trace_gated, 1);
    w.slot = wf_slot_new(NULL);
    wf_fn *body = wf_fn_new(fork_gated_body, NULL, NULL);
    w.compiled = wf_compile(body, NULL);
    wf_fn_release(body);

    struct fork_job_arg args[JOB_COUNT];
    pthread_t gated[JOB_COUNT + 2], free_running[2];
    for (int j = 0; j < JOB_COUNT; j++) {
        args[j] = (struct fork_job_arg){&w, j};
        pthread_create(&gated[j], NULL, fork_gated_eval_thread, &args[j]);
    }
    pthread_create(&gated[JOB_COUNT], NULL, fork_trace_thread, &w);
    pthread_create(&gated[JOB_COUNT + 1], NULL, fork_pool_job_thread, NULL);
    pthread_create(&free_running[0], NULL, fork_reduce_thread, &w);
    pthread_create(&free_running[1], NULL, fork_slot_thread, &w);

    /* The round thread's own scope, open across the fork. */
    wf_scope_begin();
    wf_array *scoped_ready = fork_filled(3);
    wf_eval(&scoped_ready, 1);

    int outcome = FORK_PASS;
    bool reached = fork_wait_until(&w.roots_published, JOB_COUNT) &&
                   fork_wait_until(&fork_gate_waiting, FORK_GATED) &&
                   fork_wait_until(&w.reductions_done, 1) &&
                   fork_wait_until(&w.slot_rounds_done, 1);
    if (reached && FORK_PAUSE_FREE_RUNNING) {
        atomic_store(&w.pause, 1);
        reached = fork_wait_until(&w.paused, 2);
    }
    wf_array *on_in_flight = reached ? wf_add(w.in_flight[JOB_SYNC_DEFAULT], scoped_ready) : NULL;
    /* The gate is closed, so all FORK_GATED pieces are still in flight. */
    if (reached && atomic_load(&fork_gate_waiting) == FORK_GATED && !atomic_load(&fork_gate_open)) {
        fork_note_parent_pool();
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0)
            fork_child_exit(fork_child_run(&w, on_in_flight, scoped_ready));
        atomic_store(&w.pause, 0);
        atomic_store(&fork_gate_open, 1);
        if (pid < 0) {
            fork_fail("fork failed");
            outcome = FORK_FAIL;
        } else {
            outcome = fork_wait_child(pid);
        }
    } else {
        outcome = FORK_NOT_REACHED;
    }
    atomic_store(&fork_gate_open, 1);
    atomic_store(&w.pause, 0);
    atomic_store(&w.stop, 1);
    for (int i = 0; i < JOB_COUNT + 2; i++)
        pthread_join(gated[i], NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(free_running[i], NULL);

    /* The parent goes on: what was in flight at fork() finished here. */
    if (on_in_flight && !fork_all_equal(on_in_flight, 6 + 3))
        fork_fail("parent: an array built on an in-flight root");
    wf_scope_end();
    for (int j = 0; j < JOB_COUNT; j++)
        wf_release(w.in_flight[j]);
    wf_slot_release(w.slot);
    wf_fn_release(w.compiled);
    wf_stream *s = wf_default_stream();
    wf_stream_synchronize(s);
    wf_stream_release(s);
    if (outcome == FORK_PASS && atomic_load(&fork_failures))
        outcome = FORK_FAIL;
    return outcome;
}

#endif
