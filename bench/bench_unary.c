/*
 * bench_unary: weft's vectorized math (backend/cpu/vmath.c) beside the
 * path each function took before it (libm one element at a time, or for
 * silu/gelu_tanh the old exp-block-then-divide loop, kept here as reference
 * loops), side by side in one run on 16M elements: ms and GB/s (bytes read
 * + written) on one thread, best of `reps` runs. The last column times the
 * whole op (graph, eval, output allocation, intra-op pool) on the same
 * input.
 *
 * Usage: bench_unary [elements] [reps]     (WEFT_ISA=baseline|avx2|avx512
 * picks the variant; the header names the one used. BENCH_CPU=1 times the
 * one-thread columns with the thread's CPU clock instead of the wall clock,
 * for a machine shared with other jobs; the op column stays wall time.)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/vmath.h"
#include "weft.h"

static double clock_seconds(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static clockid_t kernel_clock = CLOCK_MONOTONIC;
static double now(void) { return clock_seconds(kernel_clock); }
static double wall(void) { return clock_seconds(CLOCK_MONOTONIC); }

/* ---------------------------------------------------------------- previous paths */

#define LOOP_F32(NAME, EXPR)                                                                \
    static void NAME(int64_t n, const float *a, const float *b, float *y)                   \
    {                                                                                       \
        (void)b;                                                                            \
        for (int64_t i = 0; i < n; i++) {                                                   \
            const float x = a[i], z = b ? b[i] : 0.0f;                                      \
            (void)z;                                                                        \
            y[i] = (EXPR);                                                                  \
        }                                                                                   \
    }
#define LOOP_F64(NAME, EXPR)                                                                \
    static void NAME(int64_t n, const double *a, const double *b, double *y)                \
    {                                                                                       \
        for (int64_t i = 0; i < n; i++) {                                                   \
            const double x = a[i], z = b ? b[i] : 0.0;                                      \
            (void)z;                                                                        \
            y[i] = (EXPR);                                                                  \
        }                                                                                   \
    }

/* The old gelu kernel: scalar erfcf per element. */
LOOP_F32(old_gelu, x == -INFINITY ? -0.0f : 0.5f * x * erfcf(-x * 0.7071067811865476f))
LOOP_F32(libm_erf, erff(x))
LOOP_F32(libm_sinh, sinhf(x))
LOOP_F32(libm_cosh, coshf(x))
LOOP_F32(libm_asin, asinf(x))
LOOP_F32(libm_acos, acosf(x))
LOOP_F32(libm_atan, atanf(x))
LOOP_F32(libm_pow, powf(x, z))
LOOP_F32(libm_atan2, atan2f(x, z))
LOOP_F32(libm_logaddexp, x == z ? x + 0.6931472f : fmaxf(x, z) + log1pf(expf(-fabsf(x - z))))
/* The old float64 gelu (scalar libm erfc, tail off by ~2 z^2 ulp) and the
 * new one (still scalar: erfc with the rounding of z corrected). */
LOOP_F64(old_gelu64, x == -INFINITY ? -0.0 : 0.5 * x * erfc(-x * 0.7071067811865476))
LOOP_F64(new_gelu64, wf__vm_gelu_f64_scalar(x))
LOOP_F64(libm_exp64, exp(x))
LOOP_F64(libm_expm164, expm1(x))
LOOP_F64(libm_log64, log(x))
LOOP_F64(libm_log1p64, log1p(x))
LOOP_F64(libm_log264, log2(x))
LOOP_F64(libm_tanh64, tanh(x))
LOOP_F64(libm_sigmoid64, (x < 0 ? exp(-fabs(x)) : 1.0) / (1.0 + exp(-fabs(x))))
LOOP_F64(libm_sinh64, sinh(x))
LOOP_F64(libm_cosh64, cosh(x))
LOOP_F64(libm_erf64, erf(x))
LOOP_F64(libm_sin64, sin(x))
LOOP_F64(libm_cos64, cos(x))
LOOP_F64(libm_tan64, tan(x))
LOOP_F64(libm_asin64, asin(x))
LOOP_F64(libm_acos64, acos(x))
LOOP_F64(libm_atan64, atan(x))
LOOP_F64(libm_pow64, pow(x, z))
LOOP_F64(libm_atan264, atan2(x, z))
LOOP_F64(libm_logaddexp64, x == z ? x + 0.6931471805599453 : fmax(x, z) + log1p(exp(-fabs(x - z))))

/* The old silu and gelu_tanh kernels: the argument of e^ for a block, the
 * vectorized exp, then x / (1 + e) (which flushed the negative tail). */
enum { OLD_BLOCK = 256 };
static void old_exp_divide(int64_t n, const float *x, float *y, int tanh_form)
{
    float t[OLD_BLOCK], e[OLD_BLOCK];
    for (int64_t i0 = 0; i0 < n; i0 += OLD_BLOCK) {
        const int64_t m = n - i0 < OLD_BLOCK ? n - i0 : OLD_BLOCK;
        for (int64_t j = 0; j < m; j++) {
            const float v = x[i0 + j];
            t[j] = tanh_form ? -2.0f * 0.7978845608028654f * (v + 0.044715f * v * v * v) : -v;
        }
        wf__vm_exp_f32(m, t, e);
        for (int64_t j = 0; j < m; j++)
            y[i0 + j] = x[i0 + j] == -INFINITY ? -0.0f : x[i0 + j] / (1.0f + e[j]);
    }
}
static void old_silu(int64_t n, const float *a, const float *b, float *y)
{
    (void)b;
    old_exp_divide(n, a, y, 0);
}
static void old_gelu_tanh(int64_t n, const float *a, const float *b, float *y)
{
    (void)b;
    old_exp_divide(n, a, y, 1);
}

/* ---------------------------------------------------------------- new paths (uniform signature) */

#define NEW1(NAME, T, FN)                                                                   \
    static void NAME(int64_t n, const T *a, const T *b, T *y)                               \
    {                                                                                       \
        (void)b;                                                                            \
        FN(n, a, y);                                                                        \
    }
NEW1(new_gelu, float, wf__vm_gelu_f32)
NEW1(new_gelu_tanh, float, wf__vm_gelu_tanh_f32)
NEW1(new_silu, float, wf__vm_silu_f32)
NEW1(new_erf, float, wf__vm_erf_f32)
NEW1(new_sinh, float, wf__vm_sinh_f32)
NEW1(new_cosh, float, wf__vm_cosh_f32)
NEW1(new_asin, float, wf__vm_arcsin_f32)
NEW1(new_acos, float, wf__vm_arccos_f32)
NEW1(new_atan, float, wf__vm_arctan_f32)
NEW1(new_exp64, double, wf__vm_exp_f64)
NEW1(new_expm164, double, wf__vm_expm1_f64)
NEW1(new_log64, double, wf__vm_log_f64)
NEW1(new_log1p64, double, wf__vm_log1p_f64)
NEW1(new_log264, double, wf__vm_log2_f64)
NEW1(new_tanh64, double, wf__vm_tanh_f64)
NEW1(new_sigmoid64, double, wf__vm_sigmoid_f64)
NEW1(new_sinh64, double, wf__vm_sinh_f64)
NEW1(new_cosh64, double, wf__vm_cosh_f64)
NEW1(new_erf64, double, wf__vm_erf_f64)
NEW1(new_sin64, double, wf__vm_sin_f64)
NEW1(new_cos64, double, wf__vm_cos_f64)
NEW1(new_tan64, double, wf__vm_tan_f64)
NEW1(new_asin64, double, wf__vm_arcsin_f64)
NEW1(new_acos64, double, wf__vm_arccos_f64)
NEW1(new_atan64, double, wf__vm_arctan_f64)

typedef void (*fn32)(int64_t, const float *, const float *, float *);
typedef void (*fn64)(int64_t, const double *, const double *, double *);
typedef wf_array *(*op1)(wf_array *);
typedef wf_array *(*op2)(wf_array *, wf_array *);

enum domain { SYM10, UNIT, POS, SYM3 };

typedef struct row {
    const char *name;
    int f64;
    fn32 new32, old32;
    fn64 new64, old64;
    op1 op;
    op2 op_binary; /* two inputs: b from the POS domain (power) or SYM10 */
    enum domain dom;
    const char *old_name;
} row;

static const row rows[] = {
    {"gelu", 0, new_gelu, old_gelu, NULL, NULL, wf_gelu, NULL, SYM10, "scalar erfcf"},
    {"gelu_tanh", 0, new_gelu_tanh, old_gelu_tanh, NULL, NULL, wf_gelu_tanh, NULL, SYM10,
     "exp block + divide"},
    {"silu", 0, new_silu, old_silu, NULL, NULL, wf_silu, NULL, SYM10, "exp block + divide"},
    {"erf", 0, new_erf, libm_erf, NULL, NULL, wf_erf, NULL, SYM3, "libm (unchanged op)"},
    {"sinh", 0, new_sinh, libm_sinh, NULL, NULL, wf_sinh, NULL, SYM10, "libm"},
    {"cosh", 0, new_cosh, libm_cosh, NULL, NULL, wf_cosh, NULL, SYM10, "libm"},
    {"arcsin", 0, new_asin, libm_asin, NULL, NULL, wf_arcsin, NULL, UNIT, "libm"},
    {"arccos", 0, new_acos, libm_acos, NULL, NULL, wf_arccos, NULL, UNIT, "libm"},
    {"arctan", 0, new_atan, libm_atan, NULL, NULL, wf_arctan, NULL, SYM10, "libm"},
    {"power", 0, wf__vm_power_f32, libm_pow, NULL, NULL, NULL, wf_power, POS, "libm"},
    {"arctan2", 0, wf__vm_arctan2_f32, libm_atan2, NULL, NULL, NULL, wf_arctan2, SYM10, "libm"},
    {"logaddexp", 0, wf__vm_logaddexp_f32, libm_logaddexp, NULL, NULL, NULL, wf_logaddexp,
     SYM10, "libm"},
    {"gelu", 1, NULL, NULL, new_gelu64, old_gelu64, wf_gelu, NULL, SYM10, "scalar erfc (new: scalar too)"},
    {"exp", 1, NULL, NULL, new_exp64, libm_exp64, wf_exp, NULL, SYM10, "libm"},
    {"expm1", 1, NULL, NULL, new_expm164, libm_expm164, wf_expm1, NULL, SYM3, "libm"},
    {"log", 1, NULL, NULL, new_log64, libm_log64, wf_log, NULL, POS, "libm"},
    {"log1p", 1, NULL, NULL, new_log1p64, libm_log1p64, wf_log1p, NULL, POS, "libm"},
    {"log2", 1, NULL, NULL, new_log264, libm_log264, wf_log2, NULL, POS, "libm"},
    {"tanh", 1, NULL, NULL, new_tanh64, libm_tanh64, wf_tanh, NULL, SYM3, "libm"},
    {"sigmoid", 1, NULL, NULL, new_sigmoid64, libm_sigmoid64, wf_sigmoid, NULL, SYM10, "libm"},
    {"sinh", 1, NULL, NULL, new_sinh64, libm_sinh64, wf_sinh, NULL, SYM10, "libm"},
    {"cosh", 1, NULL, NULL, new_cosh64, libm_cosh64, wf_cosh, NULL, SYM10, "libm"},
    {"logaddexp", 1, NULL, NULL, wf__vm_logaddexp_f64, libm_logaddexp64, NULL, wf_logaddexp,
     SYM10, "libm"},
    {"erf", 1, NULL, NULL, new_erf64, libm_erf64, wf_erf, NULL, SYM3, "libm"},
    {"sin", 1, NULL, NULL, new_sin64, libm_sin64, wf_sin, NULL, SYM10, "libm"},
    {"cos", 1, NULL, NULL, new_cos64, libm_cos64, wf_cos, NULL, SYM10, "libm"},
    {"tan", 1, NULL, NULL, new_tan64, libm_tan64, wf_tan, NULL, SYM10, "libm"},
    {"arcsin", 1, NULL, NULL, new_asin64, libm_asin64, wf_arcsin, NULL, UNIT, "libm"},
    {"arccos", 1, NULL, NULL, new_acos64, libm_acos64, wf_arccos, NULL, UNIT, "libm"},
    {"arctan", 1, NULL, NULL, new_atan64, libm_atan64, wf_arctan, NULL, SYM10, "libm"},
    {"power", 1, NULL, NULL, wf__vm_power_f64, libm_pow64, NULL, wf_power, POS, "libm"},
    {"arctan2", 1, NULL, NULL, wf__vm_arctan2_f64, libm_atan264, NULL, wf_arctan2, SYM10,
     "libm"},
};

static double domain_value(enum domain d, int64_t i)
{
    const double u = (double)(i % 100003) / 100003.0; /* [0, 1) */
    switch (d) {
    case UNIT: return 2.0 * u - 1.0;
    case POS: return 100.0 * u + 1e-3;
    case SYM3: return 6.0 * u - 3.0;
    default: return 20.0 * u - 10.0;
    }
}

typedef struct bufs {
    float *a32[4], *b32, *y32;
    double *a64[4], *b64, *y64;
    wf_array *arr32[4], *arr64[4], *barr32, *barr64;
} bufs;

static double best_of(int reps, const row *r, int64_t n, const bufs *B, int old)
{
    double best = 1e30;
    for (int k = 0; k < reps; k++) {
        const double t0 = now();
        if (r->f64) {
            const double *b = r->op_binary ? B->b64 : NULL;
            (old ? r->old64 : r->new64)(n, B->a64[r->dom], b, B->y64);
        } else {
            const float *b = r->op_binary ? B->b32 : NULL;
            (old ? r->old32 : r->new32)(n, B->a32[r->dom], b, B->y32);
        }
        const double t = now() - t0;
        best = t < best ? t : best;
    }
    return best;
}

static double best_op(int reps, const row *r, const bufs *B)
{
    double best = 1e30;
    wf_array *a = r->f64 ? B->arr64[r->dom] : B->arr32[r->dom];
    wf_array *b = r->f64 ? B->barr64 : B->barr32;
    for (int k = 0; k < reps; k++) {
        const double t0 = wall();
        wf_array *out = r->op ? r->op(a) : r->op_binary(a, b);
        if (!out || wf_eval(&out, 1) != WF_OK) {
            fprintf(stderr, "%s failed: %s\n", r->name, wf_last_error_message());
            wf_release(out);
            return NAN;
        }
        const double t = wall() - t0;
        wf_release(out);
        best = t < best ? t : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    int64_t n = argc > 1 ? atoll(argv[1]) : (int64_t)1 << 24;
    const int reps = argc > 2 && atoi(argv[2]) > 0 ? atoi(argv[2]) : 3;
    if (n <= 0)
        n = (int64_t)1 << 24;
    if (getenv("BENCH_CPU"))
        kernel_clock = CLOCK_THREAD_CPUTIME_ID;
    bufs B;
    memset(&B, 0, sizeof B);
    for (int d = 0; d < 4; d++) {
        B.a32[d] = malloc((size_t)n * sizeof(float));
        B.a64[d] = malloc((size_t)n * sizeof(double));
        if (!B.a32[d] || !B.a64[d])
            return 1;
        for (int64_t i = 0; i < n; i++) {
            B.a64[d][i] = domain_value((enum domain)d, i);
            B.a32[d][i] = (float)B.a64[d][i];
        }
    }
    B.b32 = malloc((size_t)n * sizeof(float));
    B.b64 = malloc((size_t)n * sizeof(double));
    B.y32 = calloc((size_t)n, sizeof(float));
    B.y64 = calloc((size_t)n, sizeof(double));
    if (!B.b32 || !B.b64 || !B.y32 || !B.y64)
        return 1;
    for (int64_t i = 0; i < n; i++) {
        B.b64[i] = domain_value(SYM10, (i * 7919) % n); /* a different order than a */
        B.b32[i] = (float)B.b64[i];
    }
    for (int d = 0; d < 4; d++) {
        B.arr32[d] = wf_array_from_data(B.a32[d], &n, 1, WF_DTYPE_F32);
        B.arr64[d] = wf_array_from_data(B.a64[d], &n, 1, WF_DTYPE_F64);
    }
    B.barr32 = wf_array_from_data(B.b32, &n, 1, WF_DTYPE_F32);
    B.barr64 = wf_array_from_data(B.b64, &n, 1, WF_DTYPE_F64);

    printf("bench_unary: %lld elements, variant %s, kernels on 1 thread (best of %d, %s "
           "time); op: whole op, wall time, pool of %s\n",
           (long long)n, wf__vm_isa_name(wf__vm_isa_active()), reps,
           kernel_clock == CLOCK_MONOTONIC ? "wall" : "thread CPU",
           getenv("WEFT_NUM_THREADS") ? getenv("WEFT_NUM_THREADS") : "all cores");
    printf("%-10s %-5s %9s %8s   %9s %8s %8s  %9s  %s\n", "fn", "dtype", "new ms", "GB/s",
           "prev ms", "GB/s", "speedup", "op ms", "previous path");
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        const row *r = &rows[k];
        const double bytes =
            (double)n * (r->f64 ? 8.0 : 4.0) * (r->op_binary ? 3.0 : 2.0); /* read + write */
        const double t_new = best_of(reps, r, n, &B, 0);
        const double t_old = best_of(reps, r, n, &B, 1);
        const double t_op = best_op(reps, r, &B);
        printf("%-10s %-5s %9.2f %8.2f   %9.2f %8.2f %7.1fx  %9.2f  %s\n", r->name,
               r->f64 ? "f64" : "f32", t_new * 1e3, bytes / t_new * 1e-9, t_old * 1e3,
               bytes / t_old * 1e-9, t_old / t_new, t_op * 1e3, r->old_name);
    }
    for (int d = 0; d < 4; d++) {
        wf_release(B.arr32[d]);
        wf_release(B.arr64[d]);
        free(B.a32[d]);
        free(B.a64[d]);
    }
    wf_release(B.barr32);
    wf_release(B.barr64);
    free(B.b32);
    free(B.b64);
    free(B.y32);
    free(B.y64);
    return 0;
}
