/* User code run inside the runtime (issue 7, items 2 and 3; contract C6):
 * payload destructors run where their thread holds nothing of weft's and may
 * call any API, wf_eval included; inside a kernel, wf_eval, data access of
 * an unevaluated array and wf_stream_synchronize of any stream are
 * WF_ERR_MISUSE, never a hang; kernels and destructors run with neutral
 * per-thread state (no scope, default stream, the thread's own random key
 * untouched, the thread's last error kept, no tracing). Every scenario
 * that could hang runs under a deadline. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "core/array.h"
#include "core/graph_mode.h"
#include "harness.h"
#include "repro/repro_common.h"
#include "transforms/transforms.h"

enum { DEADLINE_SECONDS = 30 };

/* Runs fn on its own thread; a hang fails the whole test binary at once
 * (the stuck thread cannot be cleaned up). */
static void run_with_deadline(const char *name, void *(*fn)(void *))
{
    if (!repro_run_with_deadline(fn, NULL, DEADLINE_SECONDS)) {
        printf("  FAIL %s: hung for %d s\n", name, DEADLINE_SECONDS);
        fflush(stdout);
        _Exit(1);
    }
}

static wf_status fill_ones(void *payload, const wf_custom_call *call)
{
    (void)payload;
    float *out = call->output;
    int64_t n = 1;
    for (int d = 0; d < call->output_ndim; d++)
        n *= call->output_shape[d];
    for (int64_t i = 0; i < n; i++)
        out[i] = 1;
    return WF_OK;
}

static wf_array *custom_ones(wf_custom_kernel kernel, void *payload, void (*payload_free)(void *))
{
    int64_t n = 8;
    return wf_custom("user_code", kernel, payload, payload_free, NULL, 0, &n, 1, WF_DTYPE_F32);
}

/* ------------------------------------------------ destructors may evaluate */

static pthread_t main_thread;
static atomic_int destructor_runs, destructor_off_main, destructor_failures;

/* Evaluates a fresh graph on the default stream and checks its value. */
static void evaluating_destructor(void *payload)
{
    (void)payload;
    atomic_fetch_add(&destructor_runs, 1);
    if (!pthread_equal(pthread_self(), main_thread))
        atomic_fetch_add(&destructor_off_main, 1);
    wf_array *two = wf_scalar(2, WF_DTYPE_F32);
    wf_array *four = wf_multiply(two, two);
    double v = 0;
    if (wf_eval(&four, 1) != WF_OK || wf_array_item(four, &v) != WF_OK || v != 4)
        atomic_fetch_add(&destructor_failures, 1);
    wf_stream *def = wf_default_stream();
    if (wf_stream_synchronize(def) != WF_OK)
        atomic_fetch_add(&destructor_failures, 1);
    wf_stream_release(def);
    wf_release(four);
    wf_release(two);
}

/* The custom node is freed by its consumer's task, on the default stream's
 * worker (async) or on this thread (sync): either way inside a task. */
static void *destructors_evaluate(void *arg)
{
    (void)arg;
    for (int round = 0; round < 50; round++) {
        wf_array *c = custom_ones(fill_ones, NULL, evaluating_destructor);
        wf_array *d = wf_exp(c);
        wf_release(c); /* d's task drops the last reference */
        if (round % 2) {
            CHECK_OK(wf_async_eval(&d, 1));
            wf_release(d); /* the worker frees everything */
        } else {
            CHECK_OK(wf_eval(&d, 1));
            wf_release(d);
        }
    }
    wf_stream *def = wf_default_stream();
    CHECK_OK(wf_stream_synchronize(def));
    wf_stream_release(def);
    return NULL;
}

static void test_destructor_freed_in_a_task_may_evaluate(void)
{
    int runs = atomic_load(&destructor_runs), off = atomic_load(&destructor_off_main);
    main_thread = pthread_self();
    run_with_deadline("destructors_evaluate", destructors_evaluate);
    /* A destructor a task deferred runs right after the task counts as done
     * (it may synchronize that very stream), so the synchronize above can
     * return while the worker is still about to run the last one. */
    for (int ms = 0; ms < 10000 && atomic_load(&destructor_runs) - runs < 50; ms++)
        usleep(1000);
    CHECK_EQ_INT(atomic_load(&destructor_runs) - runs, 50);
    CHECK(atomic_load(&destructor_off_main) > off); /* some ran on the worker */
    CHECK_EQ_INT(atomic_load(&destructor_failures), 0);
}

/* ------------------------------------------------ kernels may not block */

struct blocking_attempts {
    wf_stream *own, *other;
    wf_array *unevaluated;
    wf_status sync_own, sync_other, sync_default, eval, data;
    atomic_int ran;
};

static wf_status tries_to_block(void *payload, const wf_custom_call *call)
{
    struct blocking_attempts *a = payload;
    wf_stream *def = wf_default_stream();
    a->sync_own = wf_stream_synchronize(a->own);
    a->sync_other = wf_stream_synchronize(a->other);
    a->sync_default = wf_stream_synchronize(def);
    wf_stream_release(def);
    wf_array *built = wf_exp(a->unevaluated); /* building is fine */
    a->eval = wf_eval(&built, 1);
    const void *data;
    a->data = wf_array_data(a->unevaluated, &data);
    wf_release(built);
    atomic_fetch_add(&a->ran, 1);
    return fill_ones(NULL, call);
}

/* Two kernels on two streams, each synchronizing the other's stream and its
 * own, queued asynchronously and then evaluated from two threads. */
static void *kernels_synchronize_each_other(void *arg)
{
    (void)arg;
    wf_stream *s1 = wf_stream_new(), *s2 = wf_stream_new();
    wf_array *one = wf_scalar(1, WF_DTYPE_F32);
    wf_array *pending = wf_exp(one); /* never evaluated */
    struct blocking_attempts a1 = {.own = s1, .other = s2, .unevaluated = pending};
    struct blocking_attempts a2 = {.own = s2, .other = s1, .unevaluated = pending};
    wf_stream_push(s1);
    wf_array *k1 = custom_ones(tries_to_block, &a1, NULL);
    wf_stream_pop();
    wf_stream_push(s2);
    wf_array *k2 = custom_ones(tries_to_block, &a2, NULL);
    wf_stream_pop();
    wf_array *both[2] = {k1, k2};
    CHECK_OK(wf_async_eval(both, 2));
    CHECK_OK(wf_eval(both, 2));
    struct blocking_attempts *attempts[2] = {&a1, &a2};
    for (int i = 0; i < 2; i++) {
        struct blocking_attempts *a = attempts[i];
        CHECK_EQ_INT(atomic_load(&a->ran), 1);
        CHECK_STATUS(a->sync_own, WF_ERR_MISUSE);
        CHECK_STATUS(a->sync_other, WF_ERR_MISUSE);
        CHECK_STATUS(a->sync_default, WF_ERR_MISUSE);
        CHECK_STATUS(a->eval, WF_ERR_MISUSE);
        CHECK_STATUS(a->data, WF_ERR_MISUSE);
    }
    CHECK(!wf_array_is_evaluated(pending));
    wf_release(k1);
    wf_release(k2);
    wf_release(pending);
    wf_release(one);
    wf_stream_release(s1);
    wf_stream_release(s2);
    return NULL;
}

static void test_kernel_blocking_calls_are_misuse(void)
{
    run_with_deadline("kernels_synchronize_each_other", kernels_synchronize_each_other);
}

/* ------------------------------------------------ neutral per-thread state */

struct observed {
    wf_array *captured; /* evaluated before the kernel runs */
    wf_array *built;    /* built by the kernel (or destructor), owned by the test */
    uint64_t current_stream_id;
    wf_status status;
    wf_status pop_status; /* wf_stream_pop inside: nothing is pushed there */
};

/* Builds an array, notes the current stream and draws from the default key. */
static void observe(struct observed *o)
{
    o->built = wf_exp(o->captured);
    wf_stream *cur = wf_current_stream();
    o->current_stream_id = wf_stream_id(cur);
    wf_stream_release(cur);
    wf_array *u = wf_random_uniform(NULL, 0, WF_DTYPE_F32, 0, 1, NULL);
    o->status = u ? WF_OK : wf_last_error();
    wf_release(u);
    o->pop_status = wf_stream_pop(); /* also leaves an error behind */
}

static wf_status observing_kernel(void *payload, const wf_custom_call *call)
{
    observe(payload);
    return fill_ones(NULL, call);
}

static void observing_destructor(void *payload) { observe(payload); }

/* This thread's first NULL-key draw after wf_random_seed(seed), measured on
 * a fresh thread. */
static double first_draw_after_seed;

static void *draw_after_seed(void *arg)
{
    (void)arg;
    wf_random_seed(7);
    wf_array *u = wf_random_uniform(NULL, 0, WF_DTYPE_F32, 0, 1, NULL);
    CHECK_OK(wf_array_item(u, &first_draw_after_seed));
    wf_release(u);
    return NULL;
}

static void check_neutral(struct observed *o, uint64_t default_id, const char *who)
{
    printf("    checking %s\n", who);
    CHECK_OK(o->status);
    CHECK_EQ_INT(o->current_stream_id, default_id); /* not the pushed stream */
    CHECK_STATUS(o->pop_status, WF_ERR_MISUSE);
    /* Not adopted by the scope that was open: still alive after it closed. */
    if (CHECK_NOT_NULL(o->built) && CHECK(wf__array_check(o->built, "test", "built")))
        wf_release(o->built);
    o->built = NULL;
}

/* A kernel run by this thread's wf_eval and a payload destructor run at
 * its end, both while this thread has a scope open, a stream pushed and a
 * seeded key: they see none of it and leave the key's sequence alone. */
static void test_kernels_and_destructors_see_neutral_state(void)
{
    pthread_t t;
    pthread_create(&t, NULL, draw_after_seed, NULL);
    pthread_join(t, NULL);
    wf_stream *def = wf_default_stream(), *mine = wf_stream_new();
    uint64_t default_id = wf_stream_id(def);
    struct observed in_kernel = {.captured = wf_scalar(0, WF_DTYPE_F32)};
    struct observed in_destructor = {.captured = in_kernel.captured};
    wf_random_seed(7);
    CHECK_OK(wf_scope_begin());
    CHECK_OK(wf_stream_push(mine));
    wf_array *k = custom_ones(observing_kernel, &in_kernel, NULL);
    wf_array *d = custom_ones(fill_ones, &in_destructor, observing_destructor);
    wf_array *sum = wf_add(k, d);
    wf_release(d); /* freed when sum's task detaches it, inside wf_eval */
    CHECK_STATUS(wf_stream_push(NULL), WF_ERR_NULL_ARGUMENT); /* this thread's last error */
    CHECK_OK(wf_eval(&sum, 1));
    CHECK_EQ_INT(wf_last_error(), WF_ERR_NULL_ARGUMENT); /* theirs did not replace it */
    CHECK(in_destructor.built != NULL); /* the destructor ran before wf_eval returned */
    wf_array *u = wf_random_uniform(NULL, 0, WF_DTYPE_F32, 0, 1, NULL);
    double mine_drawn = -1;
    CHECK_OK(wf_array_item(u, &mine_drawn));
    CHECK_OK(wf_stream_pop());
    CHECK_OK(wf_scope_end()); /* releases k, sum, u: not the kernel's array */
    CHECK_NEAR(mine_drawn, first_draw_after_seed, 0); /* the kernel did not advance our key */
    check_neutral(&in_kernel, default_id, "the kernel");
    check_neutral(&in_destructor, default_id, "the destructor");
    wf_release(in_kernel.captured);
    wf_stream_release(mine);
    wf_stream_release(def);
}

/* A kernel that leaves a scope open and a stream pushed does not leak them
 * into the thread that ran it. */
static wf_status leaves_state_behind(void *payload, const wf_custom_call *call)
{
    wf_stream *s = payload;
    wf_scope_begin();
    wf_array *leaked_into_scope = wf_scalar(3, WF_DTYPE_F32);
    (void)leaked_into_scope; /* closed with the scope the kernel left open */
    wf_stream_push(s);
    return fill_ones(NULL, call);
}

static void test_kernel_state_does_not_leak_out(void)
{
    int64_t live = wf__arrays_live();
    wf_stream *s = wf_stream_new(), *def = wf_default_stream();
    wf_array *k = custom_ones(leaves_state_behind, s, NULL);
    CHECK_OK(wf_eval(&k, 1));
    wf_stream *cur = wf_current_stream();
    CHECK_EQ_INT(wf_stream_id(cur), wf_stream_id(def));
    CHECK_STATUS(wf_scope_end(), WF_ERR_MISUSE); /* no scope open here */
    wf_stream_release(cur);
    wf_release(k);
    wf_stream_release(s);
    wf_stream_release(def);
    CHECK_EQ_INT(wf__arrays_live(), live);
}

/* A kernel run by a thread that is inside a trace is not traced: it sees no
 * trace depth and builds plain nodes (no keep_graph). */
struct trace_seen {
    int trace_depth, keep_depth, grad_depth;
    bool built_keeps_graph;
};

static wf_status sees_trace_state(void *payload, const wf_custom_call *call)
{
    struct trace_seen *seen = payload;
    seen->trace_depth = wf__trace_depth();
    seen->keep_depth = wf__graph_keep_depth();
    seen->grad_depth = wf__graph_grad_depth();
    wf_array *built = wf_scalar(1, WF_DTYPE_F32);
    wf_array *more = wf_exp(built);
    seen->built_keeps_graph = more && more->keep_graph;
    wf_release(more);
    wf_release(built);
    return fill_ones(NULL, call);
}

static void test_kernels_run_untraced(void)
{
    struct trace_seen seen = {-1, -1, -1, true};
    wf_array *k = custom_ones(sees_trace_state, &seen, NULL);
    wf__trace_enter(WF_TRACE_VJP);
    CHECK_OK(wf_eval(&k, 1));
    CHECK_EQ_INT(wf__trace_depth(), 1); /* this thread's own state is back */
    CHECK_EQ_INT(wf__graph_keep_depth(), 1);
    wf__trace_leave(WF_TRACE_VJP);
    CHECK_EQ_INT(seen.trace_depth, 0);
    CHECK_EQ_INT(seen.keep_depth, 0);
    CHECK_EQ_INT(seen.grad_depth, 0);
    CHECK(!seen.built_keeps_graph);
    wf_release(k);
}

int main(void)
{
    RUN_TEST(test_destructor_freed_in_a_task_may_evaluate);
    RUN_TEST(test_kernel_blocking_calls_are_misuse);
    RUN_TEST(test_kernels_and_destructors_see_neutral_state);
    RUN_TEST(test_kernel_state_does_not_leak_out);
    RUN_TEST(test_kernels_run_untraced);
    return TEST_SUMMARY();
}
