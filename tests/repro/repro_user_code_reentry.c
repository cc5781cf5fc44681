/*
 * User code that calls back into weft from inside the runtime must never hang
 * or misbehave (issue 7, items 2 and 3; contract C6).
 *
 * Each round, threads build graphs of wf_custom nodes and evaluate them,
 * asynchronously and synchronously, on the shared default stream and on
 * private streams, with scopes open and streams pushed. Their pieces call
 * back into the public API:
 *   - payload destructors (often freed by a task on a stream worker or
 *     inside a wf_eval) evaluate a fresh graph, synchronize the default
 *     stream, open and close scopes, push streams, draw random numbers and
 *     build another custom node (whose destructor does the same, once);
 *   - kernels build arrays and try wf_eval, data access and
 *     wf_stream_synchronize of their own and the default stream: each must
 *     be WF_ERR_MISUSE.
 *
 * Exit 0: every round finished within its deadline, every value and status
 * was right and every payload was freed; 1: a round hung or something was
 * wrong; 2: no destructor ever ran for a node freed inside a task (on a
 * stream worker, or inside a wf_eval), so the scenario was not exercised.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "repro_common.h"
#include "weft.h"

enum { ROUNDS = 12, THREADS = 4, GRAPHS = 30, N = 256, DEADLINE_SECONDS = 30 };

static atomic_int payloads_made, payloads_freed;
static atomic_int destructor_evals_ok, destructors_on_worker, destructors_in_eval;
static atomic_int kernels_run, kernel_misuse_ok;
static atomic_int wrong;

/* Which of the test's own threads this is, and whether it is inside wf_eval
 * (so a destructor run here was deferred out of that evaluation). */
static _Thread_local bool test_thread, inside_eval;

static void report(const char *what)
{
    if (atomic_fetch_add(&wrong, 1) < 5) /* the first few tell the story */
        fprintf(stderr, "repro_user_code_reentry: %s (last error: %s)\n", what,
                wf_last_error_message());
}

struct payload {
    int depth; /* a destructor builds one more custom node while depth < 1 */
    float value;
};

static struct payload *payload_new(int depth, float value)
{
    struct payload *p = malloc(sizeof *p);
    p->depth = depth;
    p->value = value;
    atomic_fetch_add(&payloads_made, 1);
    return p;
}

static bool expect_misuse(wf_status status, const char *what)
{
    if (status == WF_ERR_MISUSE)
        return true;
    report(what);
    return false;
}

/* Fills the output with the payload's value after trying what a kernel may
 * not do. */
static wf_status kernel_with_attempts(void *payload, const wf_custom_call *call)
{
    const struct payload *p = payload;
    atomic_fetch_add(&kernels_run, 1);
    int64_t n = 4;
    wf_array *built = wf_full(&n, 1, 2, WF_DTYPE_F32);
    wf_array *more = wf_exp(built);
    bool ok = expect_misuse(wf_eval(&more, 1), "wf_eval inside a kernel was not MISUSE");
    const void *data;
    ok &= expect_misuse(wf_array_data(more, &data), "data access inside a kernel was not MISUSE");
    wf_stream *own = wf_current_stream(), *def = wf_default_stream();
    ok &= expect_misuse(wf_stream_synchronize(own), "synchronize inside a kernel was not MISUSE");
    ok &= expect_misuse(wf_stream_synchronize(def), "synchronize inside a kernel was not MISUSE");
    wf_stream_release(own);
    wf_stream_release(def);
    wf_release(more);
    wf_release(built);
    if (ok)
        atomic_fetch_add(&kernel_misuse_ok, 1);
    float *out = call->output;
    for (int64_t i = 0; i < call->output_shape[0]; i++)
        out[i] = p->value;
    return WF_OK;
}

static wf_array *custom_node(struct payload *p);

/* A destructor that uses the API as a user would. */
static void destructor_calls_back(void *payload)
{
    struct payload *p = payload;
    if (!test_thread)
        atomic_fetch_add(&destructors_on_worker, 1);
    else if (inside_eval)
        atomic_fetch_add(&destructors_in_eval, 1);
    wf_stream *s = wf_stream_new();
    wf_scope_begin();
    wf_stream_push(s);
    int64_t n = 8;
    wf_array *x = wf_full(&n, 1, p->value, WF_DTYPE_F32);
    wf_array *y = wf_multiply(x, x);
    if (p->depth < 1) /* one more custom node (all zeros), whose destructor runs later */
        y = wf_add(y, wf_sum(custom_node(payload_new(p->depth + 1, 0)), NULL, 0, false));
    wf_array *noise = wf_random_uniform(&n, 1, WF_DTYPE_F32, 0, 1, NULL);
    wf_array *z = wf_add(y, wf_multiply(noise, wf_scalar(0, WF_DTYPE_F32)));
    wf_array *kept = wf_keep(z);
    wf_stream_pop();
    wf_scope_end();
    float got[8];
    if (!kept || wf_eval(&kept, 1) != WF_OK || wf_array_copy_to(kept, got, sizeof got) != WF_OK ||
        got[7] != p->value * p->value)
        report("a destructor's evaluation failed or was wrong");
    else
        atomic_fetch_add(&destructor_evals_ok, 1);
    wf_array *later = wf_exp(kept);
    if (wf_async_eval(&later, 1) != WF_OK)
        report("a destructor's wf_async_eval failed");
    wf_stream *def = wf_default_stream();
    if (wf_stream_synchronize(def) != WF_OK || wf_stream_synchronize(s) != WF_OK)
        report("a destructor's wf_stream_synchronize failed");
    wf_stream_release(def);
    wf_release(later);
    wf_release(kept);
    wf_stream_release(s);
    atomic_fetch_add(&payloads_freed, 1);
    free(p);
}

static wf_array *custom_node(struct payload *p)
{
    int64_t n = N;
    return wf_custom("reentry", kernel_with_attempts, p, destructor_calls_back, NULL, 0, &n, 1,
                     WF_DTYPE_F32);
}

/* One graph: two custom leaves whose nodes only the graph holds, so they
 * are freed when the task that reads them runs. */
static wf_array *graph(int i)
{
    wf_array *a = custom_node(payload_new(0, (float)(i % 5)));
    wf_array *b = custom_node(payload_new(0, 1));
    wf_array *sum = wf_add(a, b);
    wf_array *root = wf_exp(sum);
    wf_release(a);
    wf_release(b);
    wf_release(sum);
    return root;
}

static bool root_is(wf_array *root, int i)
{
    float got[N];
    if (wf_array_copy_to(root, got, sizeof got) != WF_OK)
        return false;
    float want = expf((float)(i % 5) + 1);
    return fabsf(got[0] - want) <= 1e-6f * want && got[N - 1] == got[0];
}

static wf_status eval_marked(wf_array *root)
{
    inside_eval = true;
    wf_status status = wf_eval(&root, 1);
    inside_eval = false;
    return status;
}

/* Thread t: even threads queue asynchronously and release at once (workers
 * free the graphs); odd threads evaluate synchronously with a scope open and
 * a stream pushed. Threads 0 and 1 use the default stream, 2 and 3 private. */
static void *evaluator(void *arg)
{
    int t = (int)(intptr_t)arg;
    test_thread = true;
    wf_stream *s = t >= 2 ? wf_stream_new() : NULL;
    if (s)
        wf_stream_push(s);
    for (int i = 0; i < GRAPHS; i++) {
        wf_array *root = graph(i);
        if (t % 2 == 0) {
            if (wf_async_eval(&root, 1) != WF_OK)
                report("wf_async_eval failed");
            if (i % 3 == 0 && (eval_marked(root) != WF_OK || !root_is(root, i)))
                report("an asynchronous graph gave a wrong result");
            wf_release(root);
            continue;
        }
        wf_scope_begin();
        wf_array *extra = wf_add(root, wf_scalar(0, WF_DTYPE_F32)); /* owned by the scope */
        if (eval_marked(extra) != WF_OK || !root_is(extra, i))
            report("a synchronous graph gave a wrong result");
        wf_release(root);
        wf_scope_end();
    }
    if (s) {
        if (wf_stream_synchronize(s) != WF_OK)
            report("synchronize failed");
        wf_stream_pop();
        wf_stream_release(s);
    }
    return NULL;
}

static void *round_body(void *arg)
{
    (void)arg;
    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++)
        pthread_create(&threads[t], NULL, evaluator, (void *)(intptr_t)t);
    for (int t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    wf_stream *def = wf_default_stream();
    if (wf_stream_synchronize(def) != WF_OK)
        report("synchronize of the default stream failed");
    wf_stream_release(def);
    return NULL;
}

/* Destructors of the last asynchronous graphs run on stream workers right
 * after their tasks; waits (bounded) until every payload made was freed. */
static void wait_for_payloads(void)
{
    for (int i = 0; i < 10000 && atomic_load(&payloads_freed) != atomic_load(&payloads_made); i++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
}

int main(void)
{
    for (int round = 0; round < ROUNDS && !atomic_load(&wrong); round++) {
        if (!repro_run_with_deadline(round_body, NULL, DEADLINE_SECONDS)) {
            fprintf(stderr, "repro_user_code_reentry: round %d hung for %d s\n", round,
                    DEADLINE_SECONDS);
            return REPRO_FAIL;
        }
    }
    wait_for_payloads();
    int made = atomic_load(&payloads_made), freed = atomic_load(&payloads_freed);
    int kernels = atomic_load(&kernels_run), misuse_ok = atomic_load(&kernel_misuse_ok);
    int evals_ok = atomic_load(&destructor_evals_ok);
    int on_worker = atomic_load(&destructors_on_worker);
    int in_eval = atomic_load(&destructors_in_eval);
    printf("repro_user_code_reentry: %d payloads made, %d freed, %d destructor evaluations "
           "right; %d kernels, %d refused every blocking call; destructors deferred out of "
           "tasks: %d on workers, %d inside wf_eval\n",
           made, freed, evals_ok, kernels, misuse_ok, on_worker, in_eval);
    if (atomic_load(&wrong))
        return REPRO_FAIL;
    if (freed != made || evals_ok != freed || misuse_ok != kernels || kernels == 0) {
        fprintf(stderr, "repro_user_code_reentry: counters disagree\n");
        return REPRO_FAIL;
    }
    if (on_worker == 0 && in_eval == 0) {
        fprintf(stderr, "repro_user_code_reentry: no destructor ran for a node freed in a task\n");
        return REPRO_NOT_REACHED;
    }
    return REPRO_PASS;
}
