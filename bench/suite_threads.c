/*
 * suite_threads: issue 14 item 5. 1, 2, 4 and 8 threads calling the same
 * compiled function on private inputs, three ways: all on the default
 * stream, each on its own stream, and every call serialized behind one
 * mutex in this program (how bindings protect MLX today). Workloads:
 *   call10_1024     the 10-op function on 1024 floats (small enough that
 *                   the intra-op pool stays out);
 *   serve_mlp_b1    relu(x @ w1 + b1) @ w2 + b2, 784-1024-10, batch 1,
 *   serve_mlp_b32   the same with batch 32 (weights shared by all threads).
 * Each thread checks every output it gets against the value computed for
 * its input beforehand (itself checked against a double reference), so a
 * wrong answer under concurrency fails the record. A raw 2-thread
 * calibration is printed first, to read the scaling against.
 *
 *   build/release/suite_threads [seconds per single-thread run = 0.1]
 *
 * Calls per thread are capped at 5000: resident memory grows with the calls
 * made under concurrency (each record notes it).
 */
#include "suite_compiled.h"
#include "suite_funcs.h"

enum { MAX_THREADS = 8, MAX_INPUTS = 5 };

typedef enum run_mode { MODE_DEFAULT_STREAM, MODE_OWN_STREAM, MODE_SERIALIZED, MODE_COUNT } run_mode;
static const char *const mode_names[MODE_COUNT] = {"default_stream", "own_stream", "serialized"};

/* What every thread calls: compiled(x, shared...) with a private x. */
typedef struct workload {
    const char *name;
    wf_fn *compiled;
    int nshared;
    wf_array *shared[MAX_INPUTS - 1];
    int64_t x_shape[2];
    int x_ndim;
    wf_array *x[MAX_THREADS];        /* per-thread input, evaluated */
    float *expected[MAX_THREADS];    /* its output, computed beforehand */
    int64_t out_size;
} workload;

static pthread_mutex_t one_lock = PTHREAD_MUTEX_INITIALIZER;

/* One call with thread input i; a new, evaluated array or NULL. */
static wf_array *call_workload(const workload *w, int i)
{
    wf_array *in[MAX_INPUTS] = {w->x[i]};
    for (int s = 0; s < w->nshared; s++)
        in[1 + s] = w->shared[s];
    wf_array *y = NULL;
    size_t n = 1;
    if (wf_fn_call(w->compiled, in, (size_t)(1 + w->nshared), &y, &n) != WF_OK || n != 1)
        return NULL;
    if (wf_eval(&y, 1) != WF_OK) {
        wf_release(y);
        return NULL;
    }
    return y;
}

/* Whether y matches thread i's expected output (float rounding aside: a
 * BLAS may split work differently under concurrency). */
static int matches(const workload *w, int i, wf_array *y)
{
    const void *data = NULL;
    if (wf_array_data(y, &data) != WF_OK || wf_array_size(y) != w->out_size)
        return 0;
    const float *got = data;
    for (int64_t k = 0; k < w->out_size; k++) {
        double want = w->expected[i][k];
        if (!(fabs((double)got[k] - want) <= 1e-5 + 1e-4 * fabs(want)))
            return 0;
    }
    return 1;
}

typedef struct thread_job {
    const workload *w;
    run_mode mode;
    int index;
    long calls;
    pthread_barrier_t *start;
    long wrong, failed;   /* results */
    double began, ended; /* this thread's own clock readings */
} thread_job;

static void *thread_main(void *arg)
{
    thread_job *job = arg;
    wf_stream *own = NULL;
    if (job->mode == MODE_OWN_STREAM) {
        own = wf_stream_new();
        if (!own || wf_stream_push(own) != WF_OK)
            job->failed++;
    }
    pthread_barrier_wait(job->start);
    job->began = suite_now();
    for (long c = 0; c < job->calls; c++) {
        if (job->mode == MODE_SERIALIZED)
            pthread_mutex_lock(&one_lock);
        wf_array *y = call_workload(job->w, job->index);
        if (!y)
            job->failed++;
        else if (!matches(job->w, job->index, y))
            job->wrong++;
        wf_release(y);
        if (job->mode == MODE_SERIALIZED)
            pthread_mutex_unlock(&one_lock);
    }
    job->ended = suite_now();
    if (own) {
        wf_stream_pop();
        wf_stream_release(own);
    }
    return NULL;
}

/* Wall seconds for `threads` threads making `calls` calls each: from the
 * first thread's start to the last one's end, read by the threads
 * themselves (the main thread may be scheduled late on a busy machine).
 * Counts wrong and failed calls into *bad. */
static double run_threads(const workload *w, run_mode mode, int threads, long calls, long *bad)
{
    pthread_t t[MAX_THREADS];
    thread_job jobs[MAX_THREADS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    for (int i = 0; i < threads; i++) {
        jobs[i] = (thread_job){w, mode, i, calls, &start, 0, 0, 0, 0};
        pthread_create(&t[i], NULL, thread_main, &jobs[i]);
    }
    pthread_barrier_wait(&start);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start);
    double began = jobs[0].began, ended = jobs[0].ended;
    for (int i = 0; i < threads; i++) {
        *bad += jobs[i].wrong + jobs[i].failed;
        began = jobs[i].began < began ? jobs[i].began : began;
        ended = jobs[i].ended > ended ? jobs[i].ended : ended;
    }
    return ended - began;
}

/* ---- workloads */

static wf_status mlp_body(void *payload, wf_array *const *in, size_t nin, wf_array **out,
                          size_t *nout)
{
    (void)payload;
    if (nin != 5 || *nout < 1)
        return WF_ERR_INVALID_ARGUMENT;
    out[0] = suite_mlp_serve(in[0], in[1], in[2], in[3], in[4]);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* Double reference of the MLP for one input row. */
static void mlp_reference(const float *x, const float *w1, const float *b1, const float *w2,
                          const float *b2, double *out)
{
    static double h[1024];
    for (int j = 0; j < 1024; j++) {
        double s = b1[j];
        for (int k = 0; k < 784; k++)
            s += (double)x[k] * w1[k * 1024 + j];
        h[j] = s > 0 ? s : 0;
    }
    for (int j = 0; j < 10; j++) {
        double s = b2[j];
        for (int k = 0; k < 1024; k++)
            s += h[k] * w2[k * 10 + j];
        out[j] = s;
    }
}

/* Makes the per-thread inputs and expected outputs; checks each expected
 * output against the reference. Returns 0 (with a message in why) when
 * weft's own answer is wrong. */
static int prepare(workload *w, const float *const *shared_data, char *why, size_t why_size)
{
    int64_t xn = w->x_shape[0] * (w->x_ndim > 1 ? w->x_shape[1] : 1);
    for (int i = 0; i < MAX_THREADS; i++) {
        float *xd = suite_uniform(xn, 100u + (uint32_t)i, -3.0f, 3.0f);
        w->x[i] = wf_array_from_data(xd, w->x_shape, w->x_ndim, WF_DTYPE_F32);
        suite_require(w->x[i] && wf_eval(&w->x[i], 1) == WF_OK, "thread input");
        wf_array *y = call_workload(w, i);
        suite_require(y != NULL, w->name);
        w->out_size = wf_array_size(y);
        w->expected[i] = malloc((size_t)w->out_size * sizeof(float));
        suite_require(w->expected[i] &&
                          wf_array_copy_to(y, w->expected[i], (size_t)w->out_size * 4) == WF_OK,
                      "expected output");
        wf_release(y);
        int64_t rows = w->out_size / (shared_data ? 10 : w->out_size);
        for (int64_t r = 0; r < rows; r++) {
            double want[1024];
            int64_t width = shared_data ? 10 : w->out_size;
            if (shared_data)
                mlp_reference(xd + r * 784, shared_data[0], shared_data[1], shared_data[2],
                              shared_data[3], want);
            else
                for (int64_t k = 0; k < width; k++)
                    want[k] = suite_call10_ref(xd[k]);
            double atol = shared_data ? 1e-3 : 3e-3; /* call10: the chain's kink */
            for (int64_t k = 0; k < width; k++) {
                double got = w->expected[i][r * width + k];
                if (!(fabs(got - want[k]) <= atol + 1e-4 * fabs(want[k]))) {
                    snprintf(why, why_size, "thread input %d, output %lld: got %.9g, want %.9g",
                             i, (long long)(r * width + k), got, want[k]);
                    free(xd);
                    return 0;
                }
            }
        }
        free(xd);
    }
    return 1;
}

static void release_workload(workload *w)
{
    for (int i = 0; i < MAX_THREADS; i++) {
        wf_release(w->x[i]);
        free(w->expected[i]);
    }
    for (int s = 0; s < w->nshared; s++)
        wf_release(w->shared[s]);
    wf_fn_release(w->compiled);
}

/* Runs every mode and thread count of one workload. */
static void measure(workload *w, const float *const *shared_data, double seconds, int reps)
{
    char why[256] = "";
    int ok = prepare(w, shared_data, why, sizeof why);
    long calls = 0;
    if (ok) { /* size the runs: a single thread takes about `seconds` */
        long probe = 50, bad = 0;
        double t = run_threads(w, MODE_DEFAULT_STREAM, 1, probe, &bad);
        calls = (long)(seconds / (t / (double)probe));
        calls = calls < 5 ? 5 : calls > 5000 ? 5000 : calls;
    }
    for (int m = 0; m < MODE_COUNT; m++) {
        for (int threads = 1; threads <= MAX_THREADS; threads *= 2) {
            char kase[96];
            snprintf(kase, sizeof kase, "threads/%s_%s", w->name, mode_names[m]);
            suite_record r = suite_record_new(kase, "weft", threads);
            r.items = (double)threads * (double)calls;
            double rss_before = suite_rss_mib();
            if (!ok)
                suite_record_fail(&r, "%s", why);
            for (int i = 0; i < reps && ok; i++) {
                long bad = 0;
                double t = run_threads(w, (run_mode)m, threads, calls, &bad);
                if (bad) {
                    suite_record_fail(&r, "%ld of %ld calls failed or gave a wrong answer", bad,
                                      threads * calls);
                    break;
                }
                suite_record_time(&r, t);
            }
            snprintf(r.note, sizeof r.note, "resident memory %.0f -> %.0f MiB", rss_before,
                     suite_rss_mib());
            suite_record_print(&r);
        }
    }
    release_workload(w);
}

static wf_fn *compile_fn(wf_fn_callback body, void *payload)
{
    wf_fn *fn = wf_fn_new(body, payload, NULL);
    suite_require(fn != NULL, "wf_fn_new");
    wf_fn *compiled = wf_compile(fn, NULL);
    suite_require(compiled != NULL, "wf_compile");
    wf_fn_release(fn); /* the compiled function holds it */
    return compiled;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 0.1;
    if (!(seconds > 0))
        seconds = 0.1;
    const int reps = suite_reps(3) < 3 ? suite_reps(3) : 3;
    suite_calibration("spin-loop", 5);

    suite_unary_body call10 = {suite_call10, 0};
    workload small = {.name = "call10_1024", .x_shape = {1024}, .x_ndim = 1};
    small.compiled = compile_fn(suite_unary_callback, &call10);
    measure(&small, NULL, seconds, reps);

    /* Weights as in bench/peers/threads.py: uniform(+-1/sqrt(fan_in)). */
    float *w1 = suite_uniform(784 * 1024, 11, -0.0357f, 0.0357f);
    float *b1 = suite_uniform(1024, 12, -0.0357f, 0.0357f);
    float *w2 = suite_uniform(1024 * 10, 13, -0.03125f, 0.03125f);
    float *b2 = suite_uniform(10, 14, -0.03125f, 0.03125f);
    const float *const shared_data[4] = {w1, b1, w2, b2};
    for (int batch = 1; batch <= 32; batch += 31) {
        workload mlp = {.name = batch == 1 ? "serve_mlp_b1" : "serve_mlp_b32",
                        .nshared = 4, .x_shape = {batch, 784}, .x_ndim = 2};
        mlp.compiled = compile_fn(mlp_body, NULL);
        mlp.shared[0] = wf_array_from_data(w1, (int64_t[]){784, 1024}, 2, WF_DTYPE_F32);
        mlp.shared[1] = wf_array_from_data(b1, (int64_t[]){1024}, 1, WF_DTYPE_F32);
        mlp.shared[2] = wf_array_from_data(w2, (int64_t[]){1024, 10}, 2, WF_DTYPE_F32);
        mlp.shared[3] = wf_array_from_data(b2, (int64_t[]){10}, 1, WF_DTYPE_F32);
        suite_require(wf_eval(mlp.shared, 4) == WF_OK, "weights");
        measure(&mlp, shared_data, seconds, reps);
    }
    free(w1);
    free(b1);
    free(w2);
    free(b2);
    return 0;
}
