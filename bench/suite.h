/*
 * suite.h - helpers shared by the `make bench` suite programs (bench/suite_*.c).
 *
 * Every suite program prints one JSON object per line for each measurement
 * (bench/run_all.py reads them; the peers in bench/peers/ print the same
 * fields):
 *   {"case": "...", "impl": "...", "threads": N, "reps": R, "median_s": ...,
 *    "min_s": ..., "max_s": ..., "bytes": ..., "flops": ..., "items": ...,
 *    "checksum": ..., "check": "ok" | "what went wrong", "note": "..."}
 * `bytes` / `flops` / `items` are the work of one repetition (0 when not
 * meaningful); `checksum` is the sum of |output| in double, compared across
 * implementations by run_all.py. A case whose output check fails is printed
 * with its check message and no timing: a wrong answer is never timed.
 *
 * Inputs are made by suite_fill_uniform, a counter-based hash that
 * bench/peers/common.py reproduces bit for bit, so every implementation
 * sees the same numbers.
 */
#ifndef WEFT_BENCH_SUITE_H
#define WEFT_BENCH_SUITE_H

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "weft.h"

#define SUITE_MAX_REPS 64

static inline double suite_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* murmur3's 32-bit finalizer: a well-mixed hash of a counter. */
static inline uint32_t suite_hash32(uint32_t h)
{
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

/* Element i of stream `seed`, uniform in [0, 1) with 24 random bits. */
static inline float suite_unit(uint32_t seed, int64_t i)
{
    uint32_t h = suite_hash32((uint32_t)i ^ (seed * 0x9e3779b9u));
    return (float)(h >> 8) * (1.0f / 16777216.0f);
}

/* n floats uniform in [lo, hi) (computed in float, as common.py does). */
static inline void suite_fill_uniform(float *dst, int64_t n, uint32_t seed, float lo, float hi)
{
    const float span = hi - lo;
    for (int64_t i = 0; i < n; i++)
        dst[i] = lo + span * suite_unit(seed, i);
}

/* A malloc'd array of n such floats; exits on allocation failure (a bench
 * program has nothing to recover). */
static inline float *suite_uniform(int64_t n, uint32_t seed, float lo, float hi)
{
    float *v = malloc((size_t)n * sizeof *v);
    if (!v) {
        fprintf(stderr, "suite: out of memory for %lld floats\n", (long long)n);
        exit(1);
    }
    suite_fill_uniform(v, n, seed, lo, hi);
    return v;
}

/* A weft float32 array of `shape` filled by suite_fill_uniform, evaluated. */
static inline wf_array *suite_array(const int64_t *shape, int ndim, uint32_t seed, float lo,
                                    float hi)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    float *v = suite_uniform(n, seed, lo, hi);
    wf_array *a = wf_array_from_data(v, shape, ndim, WF_DTYPE_F32);
    free(v);
    return a;
}

/* Exits with weft's error message when `ok` is false. */
static inline void suite_require(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "suite: %s failed: %s (%s)\n", what, wf_last_error_message(),
                wf_status_name(wf_last_error()));
        exit(1);
    }
}

/* Sum of |v| in double: the cross-implementation checksum. */
static inline double suite_l1(const float *v, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += fabs((double)v[i]);
    return s;
}

/* Sum of |a| for a weft float32 array (evaluates it). */
static inline double suite_array_l1(wf_array *a)
{
    const void *data = NULL;
    suite_require(wf_array_data(a, &data) == WF_OK, "wf_array_data");
    return suite_l1(data, wf_array_size(a));
}

/* One measurement; fill with suite_record_new, then suite_record_print. */
typedef struct suite_record {
    const char *kase;
    const char *impl;
    int threads;
    int reps;
    double times[SUITE_MAX_REPS];
    double bytes, flops, items;
    double checksum;
    char check[256]; /* "ok" or what went wrong */
    char note[256];
} suite_record;

static inline suite_record suite_record_new(const char *kase, const char *impl, int threads)
{
    suite_record r;
    memset(&r, 0, sizeof r);
    r.kase = kase;
    r.impl = impl;
    r.threads = threads;
    strcpy(r.check, "ok");
    return r;
}

/* Marks the record failed with a printf-style message. */
static inline void suite_record_fail(suite_record *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->check, sizeof r->check, fmt, ap);
    va_end(ap);
}

/* Adds one repetition's time (ignored beyond SUITE_MAX_REPS). */
static inline void suite_record_time(suite_record *r, double seconds)
{
    if (r->reps < SUITE_MAX_REPS)
        r->times[r->reps++] = seconds;
}

static inline int suite_compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Writes s as a JSON string body (quotes and backslashes escaped, control
 * characters dropped). */
static inline void suite_print_json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            putchar('\\');
        if ((unsigned char)*s >= 0x20)
            putchar(*s);
    }
    putchar('"');
}

/* Prints the record as one JSON line: median, min and max of its times
 * (null when the check failed or nothing was timed). */
static inline void suite_record_print(suite_record *r)
{
    printf("{\"case\": ");
    suite_print_json_string(r->kase);
    printf(", \"impl\": ");
    suite_print_json_string(r->impl);
    printf(", \"threads\": %d, \"reps\": %d", r->threads, r->reps);
    if (r->reps > 0 && strcmp(r->check, "ok") == 0) {
        qsort(r->times, (size_t)r->reps, sizeof r->times[0], suite_compare_doubles);
        double median = r->reps % 2 ? r->times[r->reps / 2]
                                    : 0.5 * (r->times[r->reps / 2 - 1] + r->times[r->reps / 2]);
        printf(", \"median_s\": %.9g, \"min_s\": %.9g, \"max_s\": %.9g", median, r->times[0],
               r->times[r->reps - 1]);
    } else {
        printf(", \"median_s\": null, \"min_s\": null, \"max_s\": null");
    }
    printf(", \"bytes\": %.17g, \"flops\": %.17g, \"items\": %.17g, \"checksum\": %.17g",
           r->bytes, r->flops, r->items, r->checksum);
    printf(", \"check\": ");
    suite_print_json_string(r->check);
    printf(", \"note\": ");
    suite_print_json_string(r->note);
    printf("}\n");
    fflush(stdout);
}

/* Prints a named figure that is not a timing (a count, a ratio). */
static inline void suite_print_value(const char *kase, const char *impl, const char *key,
                                     double value)
{
    printf("{\"case\": ");
    suite_print_json_string(kase);
    printf(", \"impl\": ");
    suite_print_json_string(impl);
    printf(", \"value_of\": ");
    suite_print_json_string(key);
    printf(", \"value\": %.17g}\n", value);
    fflush(stdout);
}

/* Prints a named string fact (a library's configuration, a version). */
static inline void suite_print_info(const char *key, const char *value)
{
    printf("{\"info\": ");
    suite_print_json_string(key);
    printf(", \"value\": ");
    suite_print_json_string(value ? value : "");
    printf("}\n");
    fflush(stdout);
}

/* Largest |got - want| / (atol + rtol |want|) over n pairs: <= 1 passes. */
static inline double suite_error_ratio(const float *got, const double *want, int64_t n,
                                       double atol, double rtol)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]) / (atol + rtol * fabs(want[i]));
        if (!(e <= worst)) /* NaN counts as the worst */
            worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}

/* The repetitions a case gets: SUITE_REPS from the environment (run_all.py
 * sets it), else `fallback`, clamped to [1, SUITE_MAX_REPS]. */
static inline int suite_reps(int fallback)
{
    const char *env = getenv("SUITE_REPS");
    int n = env ? atoi(env) : fallback;
    if (n < 1)
        n = fallback;
    return n > SUITE_MAX_REPS ? SUITE_MAX_REPS : n;
}

/* ---- element-wise maps: check once, then time */

/* Produces y = f(x) as a new reference (NULL + last error on failure). */
typedef wf_array *(*suite_map_fn)(void *ctx, wf_array *x);

/* Evaluates map(ctx, x) into a new evaluated array; NULL on failure. */
static inline wf_array *suite_map_eval(suite_map_fn map, void *ctx, wf_array *x)
{
    wf_array *y = map(ctx, x);
    if (y && wf_eval(&y, 1) != WF_OK) {
        wf_release(y);
        return NULL;
    }
    return y;
}

/* Checks every element of map(ctx, x) against ref(xdata[i]) within
 * atol + rtol |ref|, sets the checksum, then times `reps` calls (each one
 * building, evaluating and releasing the output). A failed check leaves
 * the record untimed with the reason. */
static inline void suite_measure_map(suite_record *r, suite_map_fn map, void *ctx, wf_array *x,
                                     const float *xdata, double (*ref)(double), double atol,
                                     double rtol, int reps)
{
    int64_t n = wf_array_size(x);
    wf_array *y = suite_map_eval(map, ctx, x);
    const void *data = NULL;
    if (!y || wf_array_data(y, &data) != WF_OK) {
        suite_record_fail(r, "weft error: %s", wf_last_error_message());
        wf_release(y);
        return;
    }
    const float *out = data;
    for (int64_t i = 0; i < n; i++) {
        double want = ref((double)xdata[i]);
        if (!(fabs((double)out[i] - want) <= atol + rtol * fabs(want))) {
            suite_record_fail(r, "element %lld: got %.9g, want %.9g (x = %.9g)", (long long)i,
                              (double)out[i], want, (double)xdata[i]);
            wf_release(y);
            return;
        }
    }
    r->checksum = suite_l1(out, n);
    wf_release(y);
    for (int i = 0; i < reps; i++) {
        double start = suite_now();
        y = suite_map_eval(map, ctx, x);
        double elapsed = suite_now() - start;
        wf_release(y);
        if (!y) {
            suite_record_fail(r, "weft error while timing: %s", wf_last_error_message());
            return;
        }
        suite_record_time(r, elapsed);
    }
}

/* The intra-op thread count weft uses (WEFT_NUM_THREADS, else the cores). */
static inline int suite_weft_threads(void)
{
    const char *env = getenv("WEFT_NUM_THREADS");
    long n = env ? strtol(env, NULL, 10) : 0;
    return n > 0 ? (int)n : (int)sysconf(_SC_NPROCESSORS_ONLN);
}

/* The process's resident memory now, in MiB (from /proc/self/statm; 0 if
 * unreadable): the thread benchmarks note it, since growth under
 * concurrent callers is part of what they show. */
static inline double suite_rss_mib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (!f)
        return 0;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = 0;
    fclose(f);
    return (double)resident * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0);
}

/* ---- raw 2-thread calibration: a compute loop with no memory traffic */

/* `iters` steps of 8 independent multiply-add chains; returns a value the
 * caller stores so the loop is not optimized away. */
static inline double suite_spin(long iters)
{
    double x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    for (long i = 0; i < iters; i++)
        for (int c = 0; c < 8; c++)
            x[c] = x[c] * 0.999999 + 1e-6;
    return x[0] + x[1] + x[2] + x[3] + x[4] + x[5] + x[6] + x[7];
}

typedef struct suite_spin_job {
    long iters;
    double result; /* read by the caller, so the loop is kept */
} suite_spin_job;

static inline void *suite_spin_thread(void *arg)
{
    suite_spin_job *job = arg;
    job->result = suite_spin(job->iters);
    return NULL;
}

/* Seconds for `threads` threads (1 or 2) to run `iters` steps each. */
static inline double suite_spin_time(int threads, long iters)
{
    pthread_t t[2];
    suite_spin_job jobs[2] = {{iters, 0}, {iters, 0}};
    double start = suite_now();
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, suite_spin_thread, &jobs[i]);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    double elapsed = suite_now() - start;
    if (jobs[0].result != jobs[0].result) /* never: the chains stay finite */
        fprintf(stderr, "suite: spin loop gave NaN\n");
    return elapsed;
}

/* Median over `reps` of (2-thread throughput / 1-thread throughput) of the
 * compute loop, the two measured back to back; printed as a record with
 * case "calibration/compute_2t" (items: the scaling of each repetition). */
static inline double suite_calibration(const char *impl, int reps)
{
    const long iters = 20000000; /* about 0.1 s per run */
    suite_record r = suite_record_new("calibration/compute_2t", impl, 2);
    double scaling[SUITE_MAX_REPS];
    reps = reps > SUITE_MAX_REPS ? SUITE_MAX_REPS : reps;
    for (int i = 0; i < reps; i++) {
        double t1 = suite_spin_time(1, iters), t2 = suite_spin_time(2, iters);
        scaling[i] = 2.0 * t1 / t2;
        suite_record_time(&r, t2);
    }
    qsort(scaling, (size_t)reps, sizeof scaling[0], suite_compare_doubles);
    double median = reps % 2 ? scaling[reps / 2] : 0.5 * (scaling[reps / 2 - 1] + scaling[reps / 2]);
    snprintf(r.note, sizeof r.note, "scaling median %.3f min %.3f max %.3f", median, scaling[0],
             scaling[reps - 1]);
    r.items = 2.0 * (double)iters;
    suite_record_print(&r);
    suite_print_value("calibration/compute_2t", impl, "scaling", median);
    return median;
}

#endif /* WEFT_BENCH_SUITE_H */
