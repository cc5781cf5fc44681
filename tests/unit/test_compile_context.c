/*
 * test_compile_context: a compiled function shared by threads gives each
 * call what the calling thread's own context asks for (DESIGN C4, issue 23
 * item 1). Attention records its training path inside a gradient transform
 * and the fused primitive elsewhere; a trace made inside one thread's
 * transform must never serve another thread's plain call, nor the reverse.
 * Every transform around the first call, both orders, bitwise against a
 * solo run, with the gradient call still on the training path.
 */
#include <pthread.h>
#include <stdlib.h>

#include "harness.h"
#include "ops/fast.h"
#include "transform_cases.h"

static case_inputs inputs;

/* Solo results: each case alone, on a compiled function nobody else used. */
static wf_array *solo[CASE_COUNT][CASE_MAX_OUTPUTS];
static size_t solo_count[CASE_COUNT];

typedef struct call_job {
    enum case_kind kind;
    wf_fn *att;
    wf_array *out[CASE_MAX_OUTPUTS];
    size_t nout;
    wf_status status;
    uint64_t training_calls; /* the thread's training-path calls during the call */
} call_job;

static void *call_thread(void *arg)
{
    call_job *job = arg;
    const uint64_t before = wf__sdpa_training_path_calls();
    job->status = case_run(job->kind, job->att, &inputs, job->out, &job->nout);
    job->training_calls = wf__sdpa_training_path_calls() - before;
    return NULL;
}

/* Runs the job on a thread of its own, to its end. */
static void run_on_thread(call_job *job)
{
    pthread_t t;
    if (!CHECK(pthread_create(&t, NULL, call_thread, job) == 0))
        return;
    pthread_join(t, NULL);
}

static wf_fn *compiled_attention(wf_fn **body)
{
    *body = wf_fn_new(case_attention_body, &inputs, NULL);
    return wf_compile(*body, NULL);
}

static uint64_t traces_of(wf_fn *compiled)
{
    wf_compile_stats s = wf_compile_stats_default();
    CHECK_OK(wf_compile_stats_get(compiled, &s));
    return s.traces;
}

static void make_solo_results(void)
{
    for (int kind = 0; kind < CASE_COUNT; kind++) {
        wf_fn *body, *att = compiled_attention(&body);
        call_job job = {.kind = (enum case_kind)kind, .att = att};
        run_on_thread(&job);
        CHECK_OK(job.status);
        memcpy(solo[kind], job.out, sizeof job.out);
        solo_count[kind] = job.nout;
        wf_fn_release(att);
        wf_fn_release(body);
    }
}

static void check_job(const call_job *job, const char *order)
{
    if (!CHECK_OK(job->status))
        return;
    const int64_t differ =
        case_results_differ(job->out, job->nout, solo[job->kind], solo_count[job->kind]);
    if (differ != 0)
        wf_test_fail(__FILE__, __LINE__, "%s (%s): %lld values differ from a solo run",
                     case_names[job->kind], order, (long long)differ);
    /* The gradient call takes the training path (its thread traces it,
     * whatever the other thread traced); no other call ever does. */
    if (case_is_gradient(job->kind))
        CHECK(job->training_calls >= 1);
    else
        CHECK_EQ_INT(job->training_calls, 0);
}

/* One compiled function; one thread calls it under `kind`, then another
 * thread calls it plainly (or the other way round). */
static void check_order(enum case_kind kind, bool transform_first)
{
    const char *order = transform_first ? "transform first" : "plain first";
    wf_fn *body, *att = compiled_attention(&body);
    call_job transformed = {.kind = kind, .att = att}, plain = {.kind = CASE_PLAIN, .att = att};
    run_on_thread(transform_first ? &transformed : &plain);
    run_on_thread(transform_first ? &plain : &transformed);
    check_job(&transformed, order);
    check_job(&plain, order);
    /* One trace per context: the plain one and the transform's (a
     * checkpoint's forward is plain and shares the plain trace). */
    CHECK_EQ_INT(traces_of(att), 2);
    case_results_release(transformed.out, transformed.nout);
    case_results_release(plain.out, plain.nout);
    wf_fn_release(att);
    wf_fn_release(body);
}

static void test_every_transform_both_orders(void)
{
    for (int kind = CASE_PLAIN + 1; kind < CASE_COUNT; kind++) {
        check_order((enum case_kind)kind, true);
        check_order((enum case_kind)kind, false);
    }
}

/* Without this the test above could pass vacuously: attention's two paths
 * really give other bits for these inputs. */
static void test_the_two_paths_differ(void)
{
    CHECK(case_bits_differ(solo[CASE_VJP][0], solo[CASE_PLAIN][0]) > 0);
    CHECK_EQ_INT(case_bits_differ(solo[CASE_JVP][0], solo[CASE_PLAIN][0]), 0);
}

static char last_info[512];

static void capture_log(void *ctx, wf_compile_log_level level, const char *message)
{
    (void)ctx;
    if (level == WF_COMPILE_LOG_INFO)
        snprintf(last_info, sizeof last_info, "%s", message);
}

static void test_retrace_names_the_context(void)
{
    wf_fn *body, *att = compiled_attention(&body);
    call_job grad = {.kind = CASE_GRAD, .att = att}, plain = {.kind = CASE_PLAIN, .att = att};
    run_on_thread(&grad);
    wf_compile_set_log(capture_log, NULL);
    run_on_thread(&plain);
    wf_compile_set_log(NULL, NULL);
    CHECK_STR_CONTAINS(last_info, "called outside any transform (traced inside a gradient "
                                  "transform)");
    case_results_release(grad.out, grad.nout);
    case_results_release(plain.out, plain.nout);
    wf_fn_release(att);
    wf_fn_release(body);
}

/* The context is the only per-thread part of the key besides the device:
 * calls on another stream of the same device, or inside a scope, share a
 * trace. */
static void test_streams_and_scopes_share_the_trace(void)
{
    wf_fn *body, *att = compiled_attention(&body);
    call_job first = {.kind = CASE_PLAIN, .att = att};
    run_on_thread(&first);
    wf_stream *s = wf_stream_new();
    CHECK_OK(wf_stream_push(s));
    wf_scope_begin();
    call_job second = {.kind = CASE_PLAIN, .att = att};
    call_thread(&second);
    check_job(&second, "private stream");
    wf_scope_end(); /* second's results belong to the scope */
    CHECK_OK(wf_stream_pop());
    wf_stream_release(s);
    CHECK_EQ_INT(traces_of(att), 1);
    case_results_release(first.out, first.nout);
    wf_fn_release(att);
    wf_fn_release(body);
}

int main(void)
{
    inputs = case_inputs_make();
    make_solo_results();
    RUN_TEST(test_the_two_paths_differ);
    RUN_TEST(test_every_transform_both_orders);
    RUN_TEST(test_retrace_names_the_context);
    RUN_TEST(test_streams_and_scopes_share_the_trace);
    for (int kind = 0; kind < CASE_COUNT; kind++)
        case_results_release(solo[kind], solo_count[kind]);
    case_inputs_free(&inputs);
    return TEST_SUMMARY();
}
