/* dtype conversions (wf_astype and internal casts). */
#include "backend/cpu/cpu.h"

#include <math.h>

#include "backend/cpu/binary.h"
#include "core/dtype.h"

/* ---- loads into a canonical type: int64 for bool/integers, double for floats */

static inline int64_t load_bool(uint8_t x) { return x != 0; }
static inline int64_t load_u8(uint8_t x) { return x; }
static inline int64_t load_i32(int32_t x) { return x; }
static inline int64_t load_i64(int64_t x) { return x; }
static inline double load_f16(uint16_t x) { return wf__cpu_f16_to_f32(x); }
static inline double load_bf16(uint16_t x) { return wf__cpu_bf16_to_f32(x); }
static inline double load_f32(float x) { return x; }
static inline double load_f64(double x) { return x; }

/* ---- stores from int64: integers wrap (computed in unsigned arithmetic) */

static inline uint8_t store_bool_from_i64(int64_t v) { return v != 0; }
static inline uint8_t store_u8_from_i64(int64_t v) { return (uint8_t)(uint64_t)v; }
static inline int32_t store_i32_from_i64(int64_t v)
{
    return wf__cpu_wrap_i32((uint32_t)(uint64_t)v);
}
static inline int64_t store_i64_from_i64(int64_t v) { return v; }
/* int64 beyond 2^24 could round twice through float32's nearest; below, the
 * value is exact in float32 (and in f16 everything >= 65520 is inf). */
static inline uint16_t store_f16_from_i64(int64_t v)
{
    return v > -65536 && v < 65536 ? wf__f32_to_f16((float)v) : wf__i64_to_f16(v);
}
static inline uint16_t store_bf16_from_i64(int64_t v)
{
    return v > -(1 << 24) && v < (1 << 24) ? wf__f32_to_bf16((float)v) : wf__i64_to_bf16(v);
}
static inline float store_f32_from_i64(int64_t v) { return (float)v; }
static inline double store_f64_from_i64(int64_t v) { return (double)v; }

/* ---- stores from double: to integers saturate and NaN gives 0 */

static inline uint8_t store_bool_from_f64(double v) { return v != 0.0; }
static inline uint8_t store_u8_from_f64(double v)
{
    return v > 0.0 ? (v < 255.0 ? (uint8_t)v : 255) : 0; /* NaN fails v > 0 */
}
static inline int32_t store_i32_from_f64(double v)
{
    if (isnan(v))
        return 0;
    return v <= -2147483648.0 ? INT32_MIN : v >= 2147483647.0 ? INT32_MAX : (int32_t)v;
}
static inline int64_t store_i64_from_f64(double v)
{
    if (isnan(v))
        return 0;
    if (v >= 9223372036854775807.0)
        return INT64_MAX;
    return v <= -9223372036854775808.0 ? INT64_MIN : (int64_t)v;
}
static inline uint16_t store_f16_from_f64(double v) { return wf__f64_to_f16(v); }
static inline uint16_t store_bf16_from_f64(double v) { return wf__f64_to_bf16(v); }
static inline float store_f32_from_f64(double v) { return (float)v; }
/* From a value exact in float32 (a float32, f16 or bf16 loaded as double):
 * converting through float32 rounds once. */
static inline uint16_t store_f16_from_f32(double v) { return wf__cpu_f32_to_f16((float)v); }
static inline uint16_t store_bf16_from_f32(double v) { return wf__cpu_f32_to_bf16((float)v); }
static inline double store_f64_from_f64(double v) { return v; }

/* One conversion loop per (source, destination) pair. */
typedef void (*convert_fn)(int64_t n, const void *src, int64_t ss, void *dst, int64_t ds);

/* Contiguous runs go in blocks of 8 (a fixed-count inner loop GCC
 * vectorizes at -O2), then a scalar tail; other strides use a plain loop.
 * The typed body takes restrict parameters (GCC ignores restrict on locals). */
#define CONVERT_LOOP(NAME, ST, DT, LOAD, STORE)                                         \
    static void NAME##_typed(int64_t n, const ST *restrict s, int64_t ss, DT *restrict d, \
                             int64_t ds)                                                \
    {                                                                                   \
        int64_t i = 0;                                                                  \
        if (ss == 1 && ds == 1) {                                                       \
            for (; i + 8 <= n; i += 8)                                                  \
                for (int j = 0; j < 8; j++)                                             \
                    d[i + j] = STORE(LOAD(s[i + j]));                                   \
            for (; i < n; i++)                                                          \
                d[i] = STORE(LOAD(s[i]));                                               \
        } else {                                                                        \
            for (; i < n; i++)                                                          \
                d[i * ds] = STORE(LOAD(s[i * ss]));                                     \
        }                                                                               \
    }                                                                                   \
    static void NAME(int64_t n, const void *src, int64_t ss, void *dst, int64_t ds)     \
    {                                                                                   \
        NAME##_typed(n, (const ST *)src, ss, (DT *)dst, ds);                            \
    }

/* float32 <-> f16/bf16 with a contiguous float32 side: binary.c's block
 * conversions (F16C / AVX2 where the CPU has them, the same values as the
 * scalar loads and stores); a strided float32 side takes the plain loop. */
#define HALF_TO_F32(NAME, DTYPE)                                                        \
    static void NAME(int64_t n, const void *src, int64_t ss, void *dst, int64_t ds)     \
    {                                                                                   \
        if (ds == 1)                                                                    \
            wf__cpu_halves_to_f32(n, src, ss, DTYPE, dst);                              \
        else                                                                            \
            NAME##_strided(n, src, ss, dst, ds);                                        \
    }
#define F32_TO_HALF(NAME, DTYPE)                                                        \
    static void NAME(int64_t n, const void *src, int64_t ss, void *dst, int64_t ds)     \
    {                                                                                   \
        if (ss == 1)                                                                    \
            wf__cpu_f32_to_halves(n, src, dst, ds, DTYPE);                              \
        else                                                                            \
            NAME##_strided(n, src, ss, dst, ds);                                        \
    }

CONVERT_LOOP(bool_to_u8, uint8_t, uint8_t, load_bool, store_u8_from_i64)
CONVERT_LOOP(bool_to_i32, uint8_t, int32_t, load_bool, store_i32_from_i64)
CONVERT_LOOP(bool_to_i64, uint8_t, int64_t, load_bool, store_i64_from_i64)
CONVERT_LOOP(bool_to_f16, uint8_t, uint16_t, load_bool, store_f16_from_i64)
CONVERT_LOOP(bool_to_bf16, uint8_t, uint16_t, load_bool, store_bf16_from_i64)
CONVERT_LOOP(bool_to_f32, uint8_t, float, load_bool, store_f32_from_i64)
CONVERT_LOOP(bool_to_f64, uint8_t, double, load_bool, store_f64_from_i64)
CONVERT_LOOP(u8_to_bool, uint8_t, uint8_t, load_u8, store_bool_from_i64)
CONVERT_LOOP(u8_to_i32, uint8_t, int32_t, load_u8, store_i32_from_i64)
CONVERT_LOOP(u8_to_i64, uint8_t, int64_t, load_u8, store_i64_from_i64)
CONVERT_LOOP(u8_to_f16, uint8_t, uint16_t, load_u8, store_f16_from_i64)
CONVERT_LOOP(u8_to_bf16, uint8_t, uint16_t, load_u8, store_bf16_from_i64)
CONVERT_LOOP(u8_to_f32, uint8_t, float, load_u8, store_f32_from_i64)
CONVERT_LOOP(u8_to_f64, uint8_t, double, load_u8, store_f64_from_i64)
CONVERT_LOOP(i32_to_bool, int32_t, uint8_t, load_i32, store_bool_from_i64)
CONVERT_LOOP(i32_to_u8, int32_t, uint8_t, load_i32, store_u8_from_i64)
CONVERT_LOOP(i32_to_i64, int32_t, int64_t, load_i32, store_i64_from_i64)
CONVERT_LOOP(i32_to_f16, int32_t, uint16_t, load_i32, store_f16_from_i64)
CONVERT_LOOP(i32_to_bf16, int32_t, uint16_t, load_i32, store_bf16_from_i64)
CONVERT_LOOP(i32_to_f32, int32_t, float, load_i32, store_f32_from_i64)
CONVERT_LOOP(i32_to_f64, int32_t, double, load_i32, store_f64_from_i64)
CONVERT_LOOP(i64_to_bool, int64_t, uint8_t, load_i64, store_bool_from_i64)
CONVERT_LOOP(i64_to_u8, int64_t, uint8_t, load_i64, store_u8_from_i64)
CONVERT_LOOP(i64_to_i32, int64_t, int32_t, load_i64, store_i32_from_i64)
CONVERT_LOOP(i64_to_f16, int64_t, uint16_t, load_i64, store_f16_from_i64)
CONVERT_LOOP(i64_to_bf16, int64_t, uint16_t, load_i64, store_bf16_from_i64)
CONVERT_LOOP(i64_to_f32, int64_t, float, load_i64, store_f32_from_i64)
CONVERT_LOOP(i64_to_f64, int64_t, double, load_i64, store_f64_from_i64)
CONVERT_LOOP(f16_to_bool, uint16_t, uint8_t, load_f16, store_bool_from_f64)
CONVERT_LOOP(f16_to_u8, uint16_t, uint8_t, load_f16, store_u8_from_f64)
CONVERT_LOOP(f16_to_i32, uint16_t, int32_t, load_f16, store_i32_from_f64)
CONVERT_LOOP(f16_to_i64, uint16_t, int64_t, load_f16, store_i64_from_f64)
CONVERT_LOOP(f16_to_bf16, uint16_t, uint16_t, load_f16, store_bf16_from_f32)
CONVERT_LOOP(f16_to_f32_strided, uint16_t, float, load_f16, store_f32_from_f64)
HALF_TO_F32(f16_to_f32, WF_DTYPE_F16)
CONVERT_LOOP(f16_to_f64, uint16_t, double, load_f16, store_f64_from_f64)
CONVERT_LOOP(bf16_to_bool, uint16_t, uint8_t, load_bf16, store_bool_from_f64)
CONVERT_LOOP(bf16_to_u8, uint16_t, uint8_t, load_bf16, store_u8_from_f64)
CONVERT_LOOP(bf16_to_i32, uint16_t, int32_t, load_bf16, store_i32_from_f64)
CONVERT_LOOP(bf16_to_i64, uint16_t, int64_t, load_bf16, store_i64_from_f64)
CONVERT_LOOP(bf16_to_f16, uint16_t, uint16_t, load_bf16, store_f16_from_f32)
CONVERT_LOOP(bf16_to_f32_strided, uint16_t, float, load_bf16, store_f32_from_f64)
HALF_TO_F32(bf16_to_f32, WF_DTYPE_BF16)
CONVERT_LOOP(bf16_to_f64, uint16_t, double, load_bf16, store_f64_from_f64)
CONVERT_LOOP(f32_to_bool, float, uint8_t, load_f32, store_bool_from_f64)
CONVERT_LOOP(f32_to_u8, float, uint8_t, load_f32, store_u8_from_f64)
CONVERT_LOOP(f32_to_i32, float, int32_t, load_f32, store_i32_from_f64)
CONVERT_LOOP(f32_to_i64, float, int64_t, load_f32, store_i64_from_f64)
CONVERT_LOOP(f32_to_f16_strided, float, uint16_t, load_f32, store_f16_from_f32)
F32_TO_HALF(f32_to_f16, WF_DTYPE_F16)
CONVERT_LOOP(f32_to_bf16_strided, float, uint16_t, load_f32, store_bf16_from_f32)
F32_TO_HALF(f32_to_bf16, WF_DTYPE_BF16)
CONVERT_LOOP(f32_to_f64, float, double, load_f32, store_f64_from_f64)
CONVERT_LOOP(f64_to_bool, double, uint8_t, load_f64, store_bool_from_f64)
CONVERT_LOOP(f64_to_u8, double, uint8_t, load_f64, store_u8_from_f64)
CONVERT_LOOP(f64_to_i32, double, int32_t, load_f64, store_i32_from_f64)
CONVERT_LOOP(f64_to_i64, double, int64_t, load_f64, store_i64_from_f64)
CONVERT_LOOP(f64_to_f16, double, uint16_t, load_f64, store_f16_from_f64)
CONVERT_LOOP(f64_to_bf16, double, uint16_t, load_f64, store_bf16_from_f64)
CONVERT_LOOP(f64_to_f32, double, float, load_f64, store_f32_from_f64)

/* [source][destination]; NULL on the diagonal (a plain copy). */
static const convert_fn convert_table[WF_DTYPE_COUNT][WF_DTYPE_COUNT] = {
    {NULL, bool_to_u8, bool_to_i32, bool_to_i64,
     bool_to_f16, bool_to_bf16, bool_to_f32, bool_to_f64},
    {u8_to_bool, NULL, u8_to_i32, u8_to_i64,
     u8_to_f16, u8_to_bf16, u8_to_f32, u8_to_f64},
    {i32_to_bool, i32_to_u8, NULL, i32_to_i64,
     i32_to_f16, i32_to_bf16, i32_to_f32, i32_to_f64},
    {i64_to_bool, i64_to_u8, i64_to_i32, NULL,
     i64_to_f16, i64_to_bf16, i64_to_f32, i64_to_f64},
    {f16_to_bool, f16_to_u8, f16_to_i32, f16_to_i64,
     NULL, f16_to_bf16, f16_to_f32, f16_to_f64},
    {bf16_to_bool, bf16_to_u8, bf16_to_i32, bf16_to_i64,
     bf16_to_f16, NULL, bf16_to_f32, bf16_to_f64},
    {f32_to_bool, f32_to_u8, f32_to_i32, f32_to_i64,
     f32_to_f16, f32_to_bf16, NULL, f32_to_f64},
    {f64_to_bool, f64_to_u8, f64_to_i32, f64_to_i64,
     f64_to_f16, f64_to_bf16, f64_to_f32, NULL},
};

static void convert_inner(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx)
{
    const convert_fn *fn = ctx;
    (*fn)(n, ptrs[1], strides[1], ptrs[0], strides[0]);
}

void wf__cpu_convert_1d(int64_t n, const void *src, wf_dtype src_dtype, int64_t src_stride,
                        void *dst, wf_dtype dst_dtype, int64_t dst_stride)
{
    const int64_t shape[1] = {n};
    wf__cpu_convert_strided(1, shape, src, src_dtype, &src_stride, dst, dst_dtype, &dst_stride);
}

void wf__cpu_convert_strided(int ndim, const int64_t *shape, const void *src,
                             wf_dtype src_dtype, const int64_t *src_strides, void *dst,
                             wf_dtype dst_dtype, const int64_t *dst_strides)
{
    char *data[2] = {(char *)dst, (char *)src};
    const size_t sizes[2] = {wf_dtype_size(dst_dtype), wf_dtype_size(src_dtype)};
    const int64_t *strides[2] = {dst_strides, src_strides};
    convert_fn fn = convert_table[src_dtype][dst_dtype];
    wf_cpu_iter it;
    wf__cpu_iter_init(&it, ndim, shape, 2, data, sizes, strides);
    it.out_write_only = true;
    if (fn == NULL) {
        wf__cpu_copy_iter(&it); /* same dtype */
        return;
    }
    wf__cpu_iter_run_parallel(&it, convert_inner, &fn, WF_CPU_CHUNK_CHEAP);
}

wf_status wf__cpu_astype(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)ninputs;
    (void)params;
    const wf_array *in = inputs[0];
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK)
        return st;
    int64_t out_strides[WF_MAX_NDIM];
    wf__contiguous_strides(out->shape, out->ndim, out_strides);
    wf__cpu_convert_strided(in->ndim, in->shape, wf__array_data_ptr(in), in->dtype, in->strides,
                            wf__array_data_ptr(out), out->dtype, out_strides);
    return WF_OK;
}
