/*
 * bench_unary: float32 transcendental functions, weft's vectorized
 * approximations (backend/cpu/vmath.c) against a plain libm loop, side by
 * side in one run, on 16M elements (one thread each; best of 3 runs).
 * A last column times the whole op (wf_exp etc.: graph, eval, output
 * allocation, intra-op pool) for the same input.
 *
 * Usage: bench_unary [elements]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend/cpu/vmath.h"
#include "weft.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float libm_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

#define LIBM_LOOP(NAME, FN)                                                                 \
    static void NAME(int64_t n, const float *restrict x, float *restrict y)                 \
    {                                                                                       \
        for (int64_t i = 0; i < n; i++)                                                     \
            y[i] = FN(x[i]);                                                                \
    }
LIBM_LOOP(libm_exp, expf)
LIBM_LOOP(libm_log, logf)
LIBM_LOOP(libm_tanh, tanhf)
LIBM_LOOP(libm_erf, erff)
LIBM_LOOP(libm_sig, libm_sigmoid)
LIBM_LOOP(libm_sin, sinf)

typedef void (*fn_t)(int64_t, const float *restrict, float *restrict);

static double time_fn(fn_t f, int64_t n, const float *x, float *y)
{
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        double t0 = now();
        f(n, x, y);
        double t = now() - t0;
        if (t < best)
            best = t;
    }
    return best / (double)n * 1e9;
}

static double time_op(wf_array *(*op)(wf_array *), wf_array *a, int64_t n)
{
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        double t0 = now();
        wf_array *out = op(a);
        if (!out || wf_eval(&out, 1) != WF_OK) {
            fprintf(stderr, "op failed: %s\n", wf_last_error_message());
            wf_release(out);
            return NAN;
        }
        double t = now() - t0;
        wf_release(out);
        if (t < best)
            best = t;
    }
    return best / (double)n * 1e9;
}

int main(int argc, char **argv)
{
    int64_t n = argc > 1 ? atoll(argv[1]) : (int64_t)1 << 24;
    if (n <= 0)
        n = (int64_t)1 << 24;
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    float *xp = malloc((size_t)n * sizeof *xp);
    if (!x || !y || !xp)
        return 1;
    for (int64_t i = 0; i < n; i++) {
        x[i] = (float)((double)(i % 100003) * 2e-4 - 10.0); /* [-10, 10) */
        xp[i] = (float)((double)(i % 100003) * 1e-3 + 1e-3); /* (0, 100] for log */
        y[i] = 0;
    }
    wf_array *ax = wf_array_from_data(x, &n, 1, WF_DTYPE_F32);
    wf_array *axp = wf_array_from_data(xp, &n, 1, WF_DTYPE_F32);
    struct {
        const char *name;
        fn_t mine, libm;
        wf_array *(*op)(wf_array *);
        int positive;
    } rows[] = {
        {"exp", wf__vm_exp_f32, libm_exp, wf_exp, 0},
        {"log", wf__vm_log_f32, libm_log, wf_log, 1},
        {"tanh", wf__vm_tanh_f32, libm_tanh, wf_tanh, 0},
        {"erf", wf__vm_erf_f32, libm_erf, wf_erf, 0},
        {"sigmoid", wf__vm_sigmoid_f32, libm_sig, wf_sigmoid, 0},
        {"sin", wf__vm_sin_f32, libm_sin, wf_sin, 0},
    };
    printf("bench_unary: %lld float32 elements, variant %s, 1 thread (op: pool of %s)\n",
           (long long)n, wf__vm_isa_name(wf__vm_isa_best()),
           getenv("WEFT_NUM_THREADS") ? getenv("WEFT_NUM_THREADS") : "all cores");
    printf("%-8s %12s %12s %8s %14s\n", "fn", "weft ns/el", "libm ns/el", "speedup",
           "op ns/el");
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        const float *in = rows[k].positive ? xp : x;
        double mine = time_fn(rows[k].mine, n, in, y);
        double libm = time_fn(rows[k].libm, n, in, y);
        double op = time_op(rows[k].op, rows[k].positive ? axp : ax, n);
        printf("%-8s %12.3f %12.3f %7.1fx %14.3f\n", rows[k].name, mine, libm, libm / mine, op);
    }
    wf_release(ax);
    wf_release(axp);
    free(x);
    free(xp);
    free(y);
    return 0;
}
