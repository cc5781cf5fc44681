/* Unary element-wise kernels: exp and the ops of src/ops/unary.c.
 *
 * Float kernels run a contiguous block function (float32 or float64) on
 * each row of the strided walk: contiguous float32/float64 rows go straight
 * to it; strided rows, broadcast rows and f16/bf16 are staged through
 * blocks (convert to the compute type, run, convert back). Transcendental
 * functions come from vmath.c (vectorized polynomials), except float64
 * trigonometry and erf/erfinv (libm, scalar). Integer kernels (negative,
 * abs, sign, square) wrap around like the binary ops; predicates give
 * bool. */
#include <complex.h>
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/vmath.h"
#include "core/dtype.h"
#include "core/error.h"

enum { UNARY_BLOCK = 512 };

typedef void (*block_f32)(int64_t n, const float *restrict x, float *restrict y);
typedef void (*block_f64)(int64_t n, const double *restrict x, double *restrict y);

/* ---------------------------------------------------------------- block loops */

/* Contiguous loops in blocks of 8 with a fixed-count inner loop (vectorized
 * at -O2, see binary.c), then a scalar tail. */
#define MAP_LOOP(NAME, T, EXPR)                                                             \
    static void NAME(int64_t n, const T *restrict x, T *restrict y)                         \
    {                                                                                       \
        int64_t i = 0;                                                                      \
        for (; i + 8 <= n; i += 8)                                                          \
            for (int j = 0; j < 8; j++) {                                                   \
                const T v = x[i + j];                                                       \
                y[i + j] = (EXPR);                                                          \
            }                                                                               \
        for (; i < n; i++) {                                                                \
            const T v = x[i];                                                               \
            y[i] = (EXPR);                                                                  \
        }                                                                                   \
    }

/* libm, one element at a time (erfinv). */
#define LIBM_LOOP(NAME, T, FN)                                                              \
    static void NAME(int64_t n, const T *restrict x, T *restrict y)                         \
    {                                                                                       \
        for (int64_t i = 0; i < n; i++)                                                     \
            y[i] = FN(x[i]);                                                                \
    }

static inline float sign_f32(float v) { return v > 0 ? 1.0f : v < 0 ? -1.0f : v; }
static inline double sign_f64(double v) { return v > 0 ? 1.0 : v < 0 ? -1.0 : v; }
/* Round half to even for |v| < 2^23 (2^52): adding and subtracting 2^23
 * rounds in the current (nearest-even) mode; larger values, inf and NaN are
 * already integral. */
static inline float rint_f32(float v)
{
    const float a = fabsf(v);
    const float r = copysignf((a + 0x1p23f) - 0x1p23f, v);
    return a < 0x1p23f ? r : v;
}
static inline double rint_f64(double v)
{
    const double a = fabs(v);
    const double r = copysign((a + 0x1p52) - 0x1p52, v);
    return a < 0x1p52 ? r : v;
}
static inline float floor_f32(float v)
{
    const float r = rint_f32(v);
    return r > v ? r - 1.0f : r;
}
static inline double floor_f64(double v)
{
    const double r = rint_f64(v);
    return r > v ? r - 1.0 : r;
}
/* ceil keeps the sign of v: (-1, -0.5] rounds to -1 and steps up to -0. */
static inline float ceil_f32(float v)
{
    const float r = rint_f32(v);
    return copysignf(r < v ? r + 1.0f : r, v);
}
static inline double ceil_f64(double v)
{
    const double r = rint_f64(v);
    return copysign(r < v ? r + 1.0 : r, v);
}

MAP_LOOP(negative_f32, float, -v)
MAP_LOOP(negative_f64, double, -v)
MAP_LOOP(abs_f32, float, fabsf(v))
MAP_LOOP(abs_f64, double, fabs(v))
MAP_LOOP(sign_f32_loop, float, sign_f32(v))
MAP_LOOP(sign_f64_loop, double, sign_f64(v))
MAP_LOOP(square_f32, float, v *v)
MAP_LOOP(square_f64, double, v *v)
MAP_LOOP(sqrt_f32, float, sqrtf(v))
MAP_LOOP(sqrt_f64, double, sqrt(v))
MAP_LOOP(rsqrt_f32, float, 1.0f / sqrtf(v))
MAP_LOOP(rsqrt_f64, double, 1.0 / sqrt(v))
MAP_LOOP(reciprocal_f32, float, 1.0f / v)
MAP_LOOP(reciprocal_f64, double, 1.0 / v)
MAP_LOOP(floor_f32_loop, float, floor_f32(v))
MAP_LOOP(floor_f64_loop, double, floor_f64(v))
MAP_LOOP(ceil_f32_loop, float, ceil_f32(v))
MAP_LOOP(ceil_f64_loop, double, ceil_f64(v))
MAP_LOOP(round_f32_loop, float, rint_f32(v))
MAP_LOOP(round_f64_loop, double, rint_f64(v))

/* float64: iterate Newton to convergence (at most 8 steps). */
static double erfinv_f64_scalar(double v) { return wf__vm_erfinv(v, 8); }
static float erfinv_f32_scalar(float v) { return (float)wf__vm_erfinv(v, 1); }

LIBM_LOOP(erfinv_f64, double, erfinv_f64_scalar)
LIBM_LOOP(erfinv_f32, float, erfinv_f32_scalar)

/* ---------------------------------------------------------------- exp (cpu.h) */

void wf__cpu_exp_f32(int64_t n, const float *restrict x, float *restrict y)
{
    wf__vm_exp_f32(n, x, y);
}

void wf__cpu_exp_f64(int64_t n, const double *restrict x, double *restrict y)
{
    wf__vm_exp_f64(n, x, y);
}

/* ---------------------------------------------------------------- float walk */

typedef struct float_op {
    block_f32 f32;
    block_f64 f64;
    int64_t chunk; /* parallel grain: WF_CPU_CHUNK_CHEAP or _COSTLY */
} float_op;

typedef struct float_ctx {
    const float_op *op;
    wf_dtype dtype;
} float_ctx;

/* Operand 0 the output, 1 the input, both of ctx->dtype (a float type). */
static void float_inner(int64_t n, char *const *ptrs, const int64_t *strides, const void *arg)
{
    const float_ctx *c = arg;
    const wf_dtype dtype = c->dtype;
    if (dtype == WF_DTYPE_F64) {
        if (strides[0] == 1 && strides[1] == 1) {
            c->op->f64(n, (const double *)ptrs[1], (double *)ptrs[0]);
            return;
        }
        double in[UNARY_BLOCK], res[UNARY_BLOCK];
        for (int64_t i0 = 0; i0 < n; i0 += UNARY_BLOCK) {
            const int64_t m = n - i0 < UNARY_BLOCK ? n - i0 : UNARY_BLOCK;
            wf__cpu_convert_1d(m, (const double *)ptrs[1] + i0 * strides[1], dtype, strides[1],
                               in, WF_DTYPE_F64, 1);
            c->op->f64(m, in, res);
            wf__cpu_convert_1d(m, res, WF_DTYPE_F64, 1, (double *)ptrs[0] + i0 * strides[0],
                               dtype, strides[0]);
        }
        return;
    }
    if (dtype == WF_DTYPE_F32 && strides[0] == 1 && strides[1] == 1) {
        c->op->f32(n, (const float *)ptrs[1], (float *)ptrs[0]);
        return;
    }
    const int64_t item = (int64_t)wf_dtype_size(dtype);
    float in[UNARY_BLOCK], res[UNARY_BLOCK];
    for (int64_t i0 = 0; i0 < n; i0 += UNARY_BLOCK) {
        const int64_t m = n - i0 < UNARY_BLOCK ? n - i0 : UNARY_BLOCK;
        wf__cpu_convert_1d(m, ptrs[1] + i0 * strides[1] * item, dtype, strides[1], in,
                           WF_DTYPE_F32, 1);
        c->op->f32(m, in, res);
        wf__cpu_convert_1d(m, res, WF_DTYPE_F32, 1, ptrs[0] + i0 * strides[0] * item, dtype,
                           strides[0]);
    }
}

/* Allocates the output and walks (out, in) with `fn`. */
static wf_status run_walk(wf_array *out, wf_array *in, wf_cpu_inner_fn fn, const void *ctx,
                          int64_t chunk)
{
    wf_status st = wf__cpu_alloc_elementwise_output(out, &in, 1);
    if (st != WF_OK)
        return st;
    char *data[2] = {wf__array_data_ptr(out), wf__array_data_ptr(in)};
    const size_t sizes[2] = {wf_dtype_size(out->dtype), wf_dtype_size(in->dtype)};
    const int64_t *strides[2] = {out->strides, in->strides};
    wf_cpu_iter it;
    wf__cpu_iter_init_output_order(&it, out, 2, data, sizes, strides);
    it.out_write_only = true;
    wf__cpu_iter_run_parallel(&it, fn, ctx, chunk);
    return WF_OK;
}

static wf_status run_float(wf_array *out, wf_array *const *inputs, const float_op *op)
{
    const float_ctx ctx = {op, out->dtype};
    return run_walk(out, inputs[0], float_inner, &ctx, op->chunk);
}

/* complex64 through C99's complex functions, element by element (their
 * branch cuts and special values are C's, as NumPy's). */
typedef float _Complex (*complex_fn)(float _Complex);

static void complex_inner(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx)
{
    const complex_fn f = *(const complex_fn *)ctx;
    for (int64_t i = 0; i < n; i++) {
        float _Complex z, w;
        memcpy(&z, ptrs[1] + i * strides[1] * 8, sizeof z); /* the same layout: re, im */
        w = f(z);
        memcpy(ptrs[0] + i * strides[0] * 8, &w, sizeof w);
    }
}

static wf_status run_complex(wf_array *out, wf_array *const *inputs, const complex_fn *fn)
{
    return run_walk(out, inputs[0], complex_inner, fn, WF_CPU_CHUNK_COSTLY);
}

/* complex64 functions C99 lacks, or lacks in the form NumPy computes. */
static float _Complex c_log1p(float _Complex z)
{
    /* |1 + z| = sqrt(1 + 2x + x^2 + y^2): log1p keeps small arguments exact */
    const float x = crealf(z), y = cimagf(z);
    if (fabsf(x) < 0.5f && fabsf(y) < 0.5f)
        return wf__cpu_c64_make(0.5f * log1pf(x * (2.0f + x) + y * y), atan2f(y, 1.0f + x));
    return clogf(1.0f + z);
}
static float _Complex c_log2(float _Complex z) { return clogf(z) / (float)M_LN2; }
static float _Complex c_rsqrt(float _Complex z) { return 1.0f / csqrtf(z); }
static float _Complex c_reciprocal(float _Complex z) { return 1.0f / z; }
static float _Complex c_square(float _Complex z)
{
    const float x = crealf(z), y = cimagf(z);
    return wf__cpu_c64_make(x * x - y * y, 2.0f * x * y);
}
/* z / |z| (MLX), 0 for 0 */
static float _Complex c_sign(float _Complex z)
{
    const float m = cabsf(z);
    return m == 0.0f ? z : wf__cpu_c64_make(crealf(z) / m, cimagf(z) / m);
}

static void exp_f32_block(int64_t n, const float *restrict x, float *restrict y)
{
    wf__vm_exp_f32(n, x, y);
}

wf_status wf__cpu_exp(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)ninputs;
    (void)params;
    static const float_op op = {exp_f32_block, wf__cpu_exp_f64, WF_CPU_CHUNK_COSTLY};
    static const complex_fn cexp_fn = cexpf;
    if (inputs[0]->dtype == WF_DTYPE_C64)
        return run_complex(out, inputs, &cexp_fn);
    return run_float(out, inputs, &op);
}

/* ---------------------------------------------------------------- integer walk */

/* Integer and bool versions of negative, abs, sign, square (strided). Signed
 * results wrap around (negative and abs of the minimum give the minimum). */
static inline int32_t neg_i32(int32_t v) { return wf__cpu_wrap_i32(0u - (uint32_t)v); }
static inline int64_t neg_i64(int64_t v) { return wf__cpu_wrap_i64(0u - (uint64_t)v); }
static inline int32_t abs_i32(int32_t v) { return v < 0 ? neg_i32(v) : v; }
static inline int64_t abs_i64(int64_t v) { return v < 0 ? neg_i64(v) : v; }
static inline int32_t sq_i32(int32_t v) { return wf__cpu_wrap_i32((uint32_t)v * (uint32_t)v); }
static inline int64_t sq_i64(int64_t v) { return wf__cpu_wrap_i64((uint64_t)v * (uint64_t)v); }

#define INT_LOOP(NAME, T, EXPR)                                                             \
    static void NAME##_typed(int64_t n, T *restrict y, int64_t sy, const T *restrict x,      \
                             int64_t sx)                                                    \
    {                                                                                       \
        int64_t i = 0;                                                                      \
        if (sy == 1 && sx == 1) {                                                           \
            for (; i + 8 <= n; i += 8)                                                      \
                for (int j = 0; j < 8; j++) {                                               \
                    const T v = x[i + j];                                                   \
                    y[i + j] = (T)(EXPR);                                                   \
                }                                                                           \
        }                                                                                   \
        for (; i < n; i++) {                                                                \
            const T v = x[i * sx];                                                          \
            y[i * sy] = (T)(EXPR);                                                          \
        }                                                                                   \
    }                                                                                       \
    static void NAME(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx) \
    {                                                                                       \
        (void)ctx;                                                                          \
        NAME##_typed(n, (T *)ptrs[0], strides[0], (const T *)ptrs[1], strides[1]);          \
    }

INT_LOOP(copy_u8, uint8_t, v) /* bool abs/sign/square and u8 abs */
INT_LOOP(neg_u8, uint8_t, 0u - (unsigned)v)
INT_LOOP(sign_u8, uint8_t, v != 0)
INT_LOOP(sq_u8, uint8_t, (unsigned)v * (unsigned)v)
INT_LOOP(neg_i32_loop, int32_t, neg_i32(v))
INT_LOOP(abs_i32_loop, int32_t, abs_i32(v))
INT_LOOP(sign_i32, int32_t, (v > 0) - (v < 0))
INT_LOOP(sq_i32_loop, int32_t, sq_i32(v))
INT_LOOP(neg_i64_loop, int64_t, neg_i64(v))
INT_LOOP(abs_i64_loop, int64_t, abs_i64(v))
INT_LOOP(sign_i64, int64_t, (v > 0) - (v < 0))
INT_LOOP(sq_i64_loop, int64_t, sq_i64(v))
/* The other unsigned types: negative wraps, abs is the identity. Computed
 * in unsigned int or wider, so no product overflows int. */
INT_LOOP(neg_u16, uint16_t, 0u - (unsigned)v)
INT_LOOP(copy_u16, uint16_t, v)
INT_LOOP(sign_u16, uint16_t, v != 0)
INT_LOOP(sq_u16, uint16_t, (unsigned)v * (unsigned)v)
INT_LOOP(neg_u32, uint32_t, 0u - v)
INT_LOOP(copy_u32, uint32_t, v)
INT_LOOP(sign_u32, uint32_t, v != 0)
INT_LOOP(sq_u32, uint32_t, v * v)
INT_LOOP(neg_u64, uint64_t, 0u - v)
INT_LOOP(copy_u64, uint64_t, v)
INT_LOOP(sign_u64, uint64_t, v != 0)
INT_LOOP(sq_u64, uint64_t, v * v)
/* int8 and int16 wrap like int32 (the minimum negates to itself). */
INT_LOOP(neg_i8, int8_t, wf__cpu_wrap_i8((uint8_t)(0u - (unsigned)v)))
INT_LOOP(abs_i8, int8_t, v < 0 ? wf__cpu_wrap_i8((uint8_t)(0u - (unsigned)v)) : v)
INT_LOOP(sign_i8, int8_t, (v > 0) - (v < 0))
INT_LOOP(sq_i8, int8_t, wf__cpu_wrap_i8((uint8_t)((unsigned)v * (unsigned)v)))
INT_LOOP(neg_i16, int16_t, wf__cpu_wrap_i16((uint16_t)(0u - (unsigned)v)))
INT_LOOP(abs_i16, int16_t, v < 0 ? wf__cpu_wrap_i16((uint16_t)(0u - (unsigned)v)) : v)
INT_LOOP(sign_i16, int16_t, (v > 0) - (v < 0))
INT_LOOP(sq_i16, int16_t, wf__cpu_wrap_i16((uint16_t)((unsigned)v * (unsigned)v)))

enum int_op { INT_NEG, INT_ABS, INT_SIGN, INT_SQUARE, INT_OP_COUNT };
/* [op][dtype]: bool and every integer type (negative of bool is rejected
 * by the op). */
static const wf_cpu_inner_fn int_loops[INT_OP_COUNT][WF_DTYPE_COUNT] = {
    [INT_NEG] = {[WF_DTYPE_U8] = neg_u8, [WF_DTYPE_U16] = neg_u16, [WF_DTYPE_U32] = neg_u32,
                 [WF_DTYPE_U64] = neg_u64, [WF_DTYPE_I8] = neg_i8, [WF_DTYPE_I16] = neg_i16,
                 [WF_DTYPE_I32] = neg_i32_loop, [WF_DTYPE_I64] = neg_i64_loop},
    [INT_ABS] = {[WF_DTYPE_BOOL] = copy_u8, [WF_DTYPE_U8] = copy_u8, [WF_DTYPE_U16] = copy_u16,
                 [WF_DTYPE_U32] = copy_u32, [WF_DTYPE_U64] = copy_u64, [WF_DTYPE_I8] = abs_i8,
                 [WF_DTYPE_I16] = abs_i16, [WF_DTYPE_I32] = abs_i32_loop,
                 [WF_DTYPE_I64] = abs_i64_loop},
    [INT_SIGN] = {[WF_DTYPE_BOOL] = copy_u8, [WF_DTYPE_U8] = sign_u8,
                  [WF_DTYPE_U16] = sign_u16, [WF_DTYPE_U32] = sign_u32,
                  [WF_DTYPE_U64] = sign_u64, [WF_DTYPE_I8] = sign_i8,
                  [WF_DTYPE_I16] = sign_i16, [WF_DTYPE_I32] = sign_i32,
                  [WF_DTYPE_I64] = sign_i64},
    [INT_SQUARE] = {[WF_DTYPE_BOOL] = copy_u8, [WF_DTYPE_U8] = sq_u8, [WF_DTYPE_U16] = sq_u16,
                    [WF_DTYPE_U32] = sq_u32, [WF_DTYPE_U64] = sq_u64, [WF_DTYPE_I8] = sq_i8,
                    [WF_DTYPE_I16] = sq_i16, [WF_DTYPE_I32] = sq_i32_loop,
                    [WF_DTYPE_I64] = sq_i64_loop},
};

/* complex64: |z| as hypotf (no overflow of the squares), -z part by part. */
static void abs_c64(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx)
{
    (void)ctx;
    float *y = (float *)ptrs[0];
    const wf_cpu_c64 *x = (const wf_cpu_c64 *)ptrs[1];
    for (int64_t i = 0; i < n; i++)
        y[i * strides[0]] = hypotf(x[i * strides[1]].re, x[i * strides[1]].im);
}
static void neg_c64(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx)
{
    (void)ctx;
    wf_cpu_c64 *y = (wf_cpu_c64 *)ptrs[0];
    const wf_cpu_c64 *x = (const wf_cpu_c64 *)ptrs[1];
    for (int64_t i = 0; i < n; i++)
        y[i * strides[0]] = (wf_cpu_c64){-x[i * strides[1]].re, -x[i * strides[1]].im};
}

static wf_status run_numeric(wf_array *out, wf_array *const *inputs, enum int_op iop,
                             const float_op *fop)
{
    static const complex_fn square_fn = c_square, sign_fn = c_sign;
    if (inputs[0]->dtype == WF_DTYPE_C64 && (iop == INT_ABS || iop == INT_NEG))
        return run_walk(out, inputs[0], iop == INT_ABS ? abs_c64 : neg_c64, NULL,
                        WF_CPU_CHUNK_CHEAP);
    if (inputs[0]->dtype == WF_DTYPE_C64)
        return run_complex(out, inputs, iop == INT_SQUARE ? &square_fn : &sign_fn);
    const wf_dtype dtype = out->dtype;
    if (wf__dtype_is_float(dtype))
        return run_float(out, inputs, fop);
    wf_cpu_inner_fn fn = wf__dtype_valid(dtype) ? int_loops[iop][dtype] : NULL;
    if (!fn) /* the prim's inference rejects these */
        return wf__error(WF_ERR_INTERNAL, "unary kernel: no integer loop for dtype %s",
                         wf_dtype_name(dtype));
    return run_walk(out, inputs[0], fn, NULL, WF_CPU_CHUNK_CHEAP);
}

/* ---------------------------------------------------------------- predicates */

enum pred_op { PRED_NOT, PRED_ISNAN, PRED_ISINF, PRED_ISFINITE };

typedef struct pred_ctx {
    enum pred_op op;
    wf_dtype in_dtype;
} pred_ctx;

#define PRED_LOOP(NAME, T, EXPR)                                                            \
    static void NAME(int64_t n, const T *restrict x, uint8_t *restrict y)                   \
    {                                                                                       \
        int64_t i = 0;                                                                      \
        for (; i + 8 <= n; i += 8)                                                          \
            for (int j = 0; j < 8; j++) {                                                   \
                const T v = x[i + j];                                                       \
                y[i + j] = (uint8_t)(EXPR);                                                 \
            }                                                                               \
        for (; i < n; i++) {                                                                \
            const T v = x[i];                                                               \
            y[i] = (uint8_t)(EXPR);                                                         \
        }                                                                                   \
    }
/* NaN is nonzero, so logical_not(NaN) is false. */
PRED_LOOP(not_f64, double, !(v != 0))
PRED_LOOP(isnan_f64, double, v != v)
PRED_LOOP(isinf_f64, double, fabs(v) == INFINITY)
PRED_LOOP(isfinite_f64, double, fabs(v) < INFINITY)
PRED_LOOP(not_f32, float, !(v != 0))
PRED_LOOP(isnan_f32, float, v != v)
PRED_LOOP(isinf_f32, float, fabsf(v) == INFINITY)
PRED_LOOP(isfinite_f32, float, fabsf(v) < INFINITY)

typedef void (*pred_f64_fn)(int64_t n, const double *restrict x, uint8_t *restrict y);
typedef void (*pred_f32_fn)(int64_t n, const float *restrict x, uint8_t *restrict y);
static const pred_f64_fn pred_f64[4] = {not_f64, isnan_f64, isinf_f64, isfinite_f64};
static const pred_f32_fn pred_f32[4] = {not_f32, isnan_f32, isinf_f32, isfinite_f32};

/* Operand 0 the bool output, 1 the input (any dtype). Contiguous float32
 * runs directly; anything else is staged through float64 (exact for every
 * dtype's zero test and NaN/inf classification). */
static void pred_inner(int64_t n, char *const *ptrs, const int64_t *strides, const void *arg)
{
    const pred_ctx *c = arg;
    if (c->in_dtype == WF_DTYPE_F32 && strides[0] == 1 && strides[1] == 1) {
        pred_f32[c->op](n, (const float *)ptrs[1], (uint8_t *)ptrs[0]);
        return;
    }
    const int64_t item = (int64_t)wf_dtype_size(c->in_dtype);
    double in[UNARY_BLOCK];
    uint8_t res[UNARY_BLOCK];
    for (int64_t i0 = 0; i0 < n; i0 += UNARY_BLOCK) {
        const int64_t m = n - i0 < UNARY_BLOCK ? n - i0 : UNARY_BLOCK;
        wf__cpu_convert_1d(m, ptrs[1] + i0 * strides[1] * item, c->in_dtype, strides[1], in,
                           WF_DTYPE_F64, 1);
        pred_f64[c->op](m, in, res);
        wf__cpu_convert_1d(m, res, WF_DTYPE_BOOL, 1, ptrs[0] + i0 * strides[0], WF_DTYPE_BOOL,
                           strides[0]);
    }
}

static wf_status run_pred(wf_array *out, wf_array *const *inputs, enum pred_op op)
{
    const pred_ctx ctx = {op, inputs[0]->dtype};
    return run_walk(out, inputs[0], pred_inner, &ctx, WF_CPU_CHUNK_CHEAP);
}

/* ---------------------------------------------------------------- kernels */

#define FLOAT_KERNEL(NAME, F32, F64, CHUNK)                                                 \
    wf_status wf__cpu_##NAME(wf_array *out, wf_array *const *inputs, int ninputs,           \
                             const void *params)                                            \
    {                                                                                       \
        (void)ninputs;                                                                      \
        (void)params;                                                                       \
        static const float_op op = {F32, F64, CHUNK};                                       \
        return run_float(out, inputs, &op);                                                 \
    }

/* A float function with a complex64 kernel CFN too. */
#define FLOAT_COMPLEX_KERNEL(NAME, F32, F64, CHUNK, CFN)                                    \
    wf_status wf__cpu_##NAME(wf_array *out, wf_array *const *inputs, int ninputs,           \
                             const void *params)                                            \
    {                                                                                       \
        (void)ninputs;                                                                      \
        (void)params;                                                                       \
        static const float_op op = {F32, F64, CHUNK};                                       \
        static const complex_fn cfn = CFN;                                                  \
        if (inputs[0]->dtype == WF_DTYPE_C64)                                               \
            return run_complex(out, inputs, &cfn);                                          \
        return run_float(out, inputs, &op);                                                 \
    }

#define NUMERIC_KERNEL(NAME, IOP, F32, F64)                                                 \
    wf_status wf__cpu_##NAME(wf_array *out, wf_array *const *inputs, int ninputs,           \
                             const void *params)                                            \
    {                                                                                       \
        (void)ninputs;                                                                      \
        (void)params;                                                                       \
        static const float_op op = {F32, F64, WF_CPU_CHUNK_CHEAP};                          \
        return run_numeric(out, inputs, IOP, &op);                                          \
    }

#define PRED_KERNEL(NAME, POP)                                                              \
    wf_status wf__cpu_##NAME(wf_array *out, wf_array *const *inputs, int ninputs,           \
                             const void *params)                                            \
    {                                                                                       \
        (void)ninputs;                                                                      \
        (void)params;                                                                       \
        return run_pred(out, inputs, POP);                                                  \
    }

enum { CHEAP = WF_CPU_CHUNK_CHEAP, COSTLY = WF_CPU_CHUNK_COSTLY };

NUMERIC_KERNEL(negative, INT_NEG, negative_f32, negative_f64)
NUMERIC_KERNEL(abs, INT_ABS, abs_f32, abs_f64)
NUMERIC_KERNEL(sign, INT_SIGN, sign_f32_loop, sign_f64_loop)
NUMERIC_KERNEL(square, INT_SQUARE, square_f32, square_f64)
FLOAT_KERNEL(expm1, wf__vm_expm1_f32, wf__vm_expm1_f64, COSTLY)
FLOAT_COMPLEX_KERNEL(log, wf__vm_log_f32, wf__vm_log_f64, COSTLY, clogf)
FLOAT_COMPLEX_KERNEL(log1p, wf__vm_log1p_f32, wf__vm_log1p_f64, COSTLY, c_log1p)
FLOAT_COMPLEX_KERNEL(log2, wf__vm_log2_f32, wf__vm_log2_f64, COSTLY, c_log2)
FLOAT_COMPLEX_KERNEL(sqrt, sqrt_f32, sqrt_f64, CHEAP, csqrtf)
FLOAT_COMPLEX_KERNEL(rsqrt, rsqrt_f32, rsqrt_f64, CHEAP, c_rsqrt)
FLOAT_COMPLEX_KERNEL(reciprocal, reciprocal_f32, reciprocal_f64, CHEAP, c_reciprocal)
FLOAT_COMPLEX_KERNEL(sin, wf__vm_sin_f32, wf__vm_sin_f64, COSTLY, csinf)
FLOAT_COMPLEX_KERNEL(cos, wf__vm_cos_f32, wf__vm_cos_f64, COSTLY, ccosf)
FLOAT_COMPLEX_KERNEL(tan, wf__vm_tan_f32, wf__vm_tan_f64, COSTLY, ctanf)
FLOAT_COMPLEX_KERNEL(tanh, wf__vm_tanh_f32, wf__vm_tanh_f64, COSTLY, ctanhf)
FLOAT_COMPLEX_KERNEL(sinh, wf__vm_sinh_f32, wf__vm_sinh_f64, COSTLY, csinhf)
FLOAT_COMPLEX_KERNEL(cosh, wf__vm_cosh_f32, wf__vm_cosh_f64, COSTLY, ccoshf)
FLOAT_COMPLEX_KERNEL(arcsin, wf__vm_arcsin_f32, wf__vm_arcsin_f64, COSTLY, casinf)
FLOAT_COMPLEX_KERNEL(arccos, wf__vm_arccos_f32, wf__vm_arccos_f64, COSTLY, cacosf)
FLOAT_COMPLEX_KERNEL(arctan, wf__vm_arctan_f32, wf__vm_arctan_f64, COSTLY, catanf)
FLOAT_KERNEL(sigmoid, wf__vm_sigmoid_f32, wf__vm_sigmoid_f64, COSTLY)
FLOAT_KERNEL(erf, wf__vm_erf_f32, wf__vm_erf_f64, COSTLY)
FLOAT_KERNEL(erfinv, erfinv_f32, erfinv_f64, COSTLY)
FLOAT_KERNEL(floor, floor_f32_loop, floor_f64_loop, CHEAP)
FLOAT_KERNEL(ceil, ceil_f32_loop, ceil_f64_loop, CHEAP)
FLOAT_KERNEL(round, round_f32_loop, round_f64_loop, CHEAP)
PRED_KERNEL(logical_not, PRED_NOT)
PRED_KERNEL(isnan, PRED_ISNAN)
PRED_KERNEL(isinf, PRED_ISINF)
PRED_KERNEL(isfinite, PRED_ISFINITE)

/* The identity: a view of the input (no copy). */
wf_status wf__cpu_stop_gradient(wf_array *out, wf_array *const *inputs, int ninputs,
                                const void *params)
{
    (void)ninputs;
    (void)params;
    wf__array_set_view(out, inputs[0], inputs[0]->strides, inputs[0]->offset);
    return WF_OK;
}
