/*
 * suite_first_call: issue 14 item 6. A freshly compiled function (the served
 * MLP of suite_threads.c, batch 32) is called for the first time by 8
 * threads at once, each on its own input: the wall time until all have
 * their (checked) result, and how many traces were made (weft's contract:
 * one; the others wait for it). The same with 1 thread for comparison.
 * Each repetition compiles a new function.
 *
 *   build/release/suite_first_call
 */
#include "suite_compiled.h"
#include "suite_funcs.h"

enum { THREADS = 8, BATCH = 32 };

typedef struct mlp_body {
    atomic_long runs; /* how often the body ran (one per trace) */
} mlp_body;

static wf_status mlp_callback(void *payload, wf_array *const *in, size_t nin, wf_array **out,
                              size_t *nout)
{
    mlp_body *body = payload;
    atomic_fetch_add(&body->runs, 1);
    if (nin != 5 || *nout < 1)
        return WF_ERR_INVALID_ARGUMENT;
    out[0] = suite_mlp_serve(in[0], in[1], in[2], in[3], in[4]);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

typedef struct call_job {
    wf_fn *compiled;
    wf_array *in[5];
    const float *expected;
    int64_t size;
    pthread_barrier_t *start;
    int ok;
    double began, ended; /* this thread's own clock readings */
} call_job;

static void *first_call(void *arg)
{
    call_job *job = arg;
    pthread_barrier_wait(job->start);
    job->began = suite_now();
    wf_array *y = NULL;
    size_t n = 1;
    const void *data = NULL;
    job->ok = wf_fn_call(job->compiled, job->in, 5, &y, &n) == WF_OK && n == 1 &&
              wf_array_data(y, &data) == WF_OK && wf_array_size(y) == job->size;
    for (int64_t k = 0; job->ok && k < job->size; k++) {
        double got = ((const float *)data)[k], want = job->expected[k];
        job->ok = fabs(got - want) <= 1e-5 + 1e-4 * fabs(want);
    }
    wf_release(y);
    job->ended = suite_now();
    return NULL;
}

/* One repetition: a new compiled function, `threads` first calls at once.
 * Returns the wall seconds; *traces and *runs get the counts. */
static double one_round(int threads, wf_array *const *x, wf_array *const *weights,
                        float *const *expected, int64_t size, uint64_t *traces, long *runs,
                        int *all_ok)
{
    mlp_body body = {0};
    wf_fn *fn = wf_fn_new(mlp_callback, &body, NULL);
    wf_fn *compiled = fn ? wf_compile(fn, NULL) : NULL;
    suite_require(compiled != NULL, "wf_compile");
    pthread_t t[THREADS];
    call_job jobs[THREADS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    for (int i = 0; i < threads; i++) {
        jobs[i] = (call_job){compiled, {x[i], weights[0], weights[1], weights[2], weights[3]},
                             expected[i], size, &start, 0, 0, 0};
        pthread_create(&t[i], NULL, first_call, &jobs[i]);
    }
    pthread_barrier_wait(&start);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start);
    /* From the first thread's start to the last one's end, read by the
     * threads (the main thread may be scheduled late on a busy machine). */
    double began = jobs[0].began, ended = jobs[0].ended;
    for (int i = 1; i < threads; i++) {
        began = jobs[i].began < began ? jobs[i].began : began;
        ended = jobs[i].ended > ended ? jobs[i].ended : ended;
    }
    double elapsed = ended - began;
    *traces = suite_traces(compiled);
    *runs = atomic_load(&body.runs);
    for (int i = 0; i < threads; i++)
        *all_ok = *all_ok && jobs[i].ok;
    wf_fn_release(compiled);
    wf_fn_release(fn);
    return elapsed;
}

int main(void)
{
    const int reps = suite_reps(5);
    /* Inputs and weights as suite_threads.c's serve_mlp_b32. */
    const int64_t wshape[4][2] = {{784, 1024}, {1024, 0}, {1024, 10}, {10, 0}};
    const float scale[4] = {0.0357f, 0.0357f, 0.03125f, 0.03125f};
    wf_array *weights[4];
    for (int k = 0; k < 4; k++)
        weights[k] = suite_array(wshape[k], wshape[k][1] ? 2 : 1, 11u + (uint32_t)k, -scale[k],
                                 scale[k]);
    suite_require(wf_eval(weights, 4) == WF_OK, "weights");
    wf_array *x[THREADS];
    float *expected[THREADS];
    int64_t size = 0;
    for (int i = 0; i < THREADS; i++) { /* expected: the graph run without compile */
        x[i] = suite_array((int64_t[]){BATCH, 784}, 2, 100u + (uint32_t)i, -3.0f, 3.0f);
        wf_array *y = suite_mlp_serve(x[i], weights[0], weights[1], weights[2], weights[3]);
        suite_require(y && wf_eval(&y, 1) == WF_OK, "uncompiled MLP");
        size = wf_array_size(y);
        expected[i] = malloc((size_t)size * sizeof(float));
        suite_require(expected[i] && wf_array_copy_to(y, expected[i], (size_t)size * 4) == WF_OK,
                      "expected output");
        wf_release(y);
    }
    for (int threads = 1; threads <= THREADS; threads *= THREADS) {
        suite_record r = suite_record_new(threads == 1 ? "first_call/mlp_b32_1t"
                                                       : "first_call/mlp_b32_8t",
                                          "weft", threads);
        uint64_t most_traces = 0;
        long most_runs = 0;
        int ok = 1;
        for (int i = 0; i < reps; i++) {
            uint64_t traces = 0;
            long runs = 0;
            suite_record_time(&r, one_round(threads, x, weights, expected, size, &traces,
                                            &runs, &ok));
            most_traces = traces > most_traces ? traces : most_traces;
            most_runs = runs > most_runs ? runs : most_runs;
        }
        if (!ok)
            suite_record_fail(&r, "a thread's first call failed or gave a wrong answer");
        snprintf(r.note, sizeof r.note, "at most %llu trace(s) and %ld body run(s) per function",
                 (unsigned long long)most_traces, most_runs);
        suite_record_print(&r);
        suite_print_value(r.kase, "weft", "traces", (double)most_traces);
        suite_print_value(r.kase, "weft", "body_runs", (double)most_runs);
    }
    for (int i = 0; i < THREADS; i++) {
        wf_release(x[i]);
        free(expected[i]);
    }
    for (int k = 0; k < 4; k++)
        wf_release(weights[k]);
    return 0;
}
