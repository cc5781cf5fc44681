/* dtype conversions (wf_astype and internal casts). The loops are compiled
 * for the x86-64 baseline, AVX2 and AVX-512 (convert_isa.inc) and chosen by
 * wf__vm_isa_active(); every variant gives the same bits. */
#include "backend/cpu/cpu.h"

#include "backend/cpu/binary.h"
#include "backend/cpu/vmath.h"
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
static inline int64_t load_i8(int8_t x) { return x; }
static inline int64_t load_i16(int16_t x) { return x; }
static inline int64_t load_u16(uint16_t x) { return x; }
static inline int64_t load_u32(uint32_t x) { return x; }
/* uint64 keeps its bits in the int64 (integer stores wrap, so they see the
 * same value); the float stores from uint64 read them back as unsigned. */
static inline int64_t load_u64(uint64_t x) { return wf__cpu_wrap_i64(x); }
/* complex64 to a real type takes the real part (NumPy, MLX); to bool it is
 * "either part non-zero". */
static inline double load_c64(wf_cpu_c64 x) { return x.re; }
static inline double load_c64_nonzero(wf_cpu_c64 x) { return (x.re != 0.0f) | (x.im != 0.0f); }

/* ---- stores from int64: integers wrap (computed in unsigned arithmetic) */

static inline uint8_t store_bool_from_i64(int64_t v) { return v != 0; }
static inline uint8_t store_u8_from_i64(int64_t v) { return (uint8_t)(uint64_t)v; }
static inline int32_t store_i32_from_i64(int64_t v)
{
    return wf__cpu_wrap_i32((uint32_t)(uint64_t)v);
}
static inline int64_t store_i64_from_i64(int64_t v) { return v; }
static inline int8_t store_i8_from_i64(int64_t v) { return wf__cpu_wrap_i8((uint8_t)(uint64_t)v); }
static inline int16_t store_i16_from_i64(int64_t v)
{
    return wf__cpu_wrap_i16((uint16_t)(uint64_t)v);
}
static inline uint16_t store_u16_from_i64(int64_t v) { return (uint16_t)(uint64_t)v; }
static inline uint32_t store_u32_from_i64(int64_t v) { return (uint32_t)(uint64_t)v; }
static inline uint64_t store_u64_from_i64(int64_t v) { return (uint64_t)v; }
/* int64 to a half type rounds once, through float32 rounded to odd: the
 * vector variants always so (branch-free, it vectorizes); the SSE2 variant,
 * which stays scalar (no 64-bit vector compares), converts the values that
 * float32 holds exactly directly and calls out for the others, a branch
 * that most data predicts (float16 is inf from 65520 on). */
static inline uint16_t store_f16_from_i64_avx2(int64_t v)
{
    return wf__cpu_f32_to_f16(wf__i64_to_f32_round_odd(v));
}
static inline uint16_t store_bf16_from_i64_avx2(int64_t v)
{
    return wf__cpu_f32_to_bf16(wf__i64_to_f32_round_odd(v));
}
static inline uint16_t store_f16_from_i64_avx512(int64_t v) { return store_f16_from_i64_avx2(v); }
static inline uint16_t store_bf16_from_i64_avx512(int64_t v) { return store_bf16_from_i64_avx2(v); }
static inline uint16_t store_f16_from_i64_baseline(int64_t v)
{
    return v > -65536 && v < 65536 ? wf__cpu_f32_to_f16((float)v) : wf__i64_to_f16(v);
}
static inline uint16_t store_bf16_from_i64_baseline(int64_t v)
{
    return v > -(1 << 24) && v < (1 << 24) ? wf__cpu_f32_to_bf16((float)v) : wf__i64_to_bf16(v);
}
/* int32 values are exact in double: round once through float32 to odd. */
static inline uint16_t store_f16_from_i32(int64_t v)
{
    return wf__cpu_f32_to_f16(wf__f64_to_f32_round_odd((double)v));
}
static inline uint16_t store_bf16_from_i32(int64_t v)
{
    return wf__cpu_f32_to_bf16(wf__f64_to_f32_round_odd((double)v));
}
/* bool and uint8 values are always exact in float32. */
static inline uint16_t store_f16_from_small(int64_t v) { return wf__cpu_f32_to_f16((float)v); }
static inline uint16_t store_bf16_from_small(int64_t v) { return wf__cpu_f32_to_bf16((float)v); }
static inline float store_f32_from_i64(int64_t v) { return (float)v; }
static inline double store_f64_from_i64(int64_t v) { return (double)v; }
static inline wf_cpu_c64 store_c64_from_i64(int64_t v) { return (wf_cpu_c64){(float)v, 0.0f}; }
/* uint64 (its bits in an int64) to floats: read as unsigned, rounded once;
 * the halves through float32 rounded to odd (wf__u64_to_f32_round_odd). */
static inline float store_f32_from_u64(int64_t v) { return (float)(uint64_t)v; }
static inline double store_f64_from_u64(int64_t v) { return (double)(uint64_t)v; }
static inline wf_cpu_c64 store_c64_from_u64(int64_t v)
{
    return (wf_cpu_c64){(float)(uint64_t)v, 0.0f};
}
static inline uint16_t store_f16_from_u64(int64_t v)
{
    return wf__cpu_f32_to_f16(wf__u64_to_f32_round_odd((uint64_t)v));
}
static inline uint16_t store_bf16_from_u64(int64_t v)
{
    return wf__cpu_f32_to_bf16(wf__u64_to_f32_round_odd((uint64_t)v));
}

/* ---- stores from double: to integers saturate and NaN gives 0. Clamped
 * first, then converted, with selects only: GCC vectorizes the loops (a
 * branch per element costs ~5 ns on mixed-sign data). */

static inline uint8_t store_bool_from_f64(double v) { return v != 0.0; }
static inline uint8_t store_u8_from_f64(double v)
{
    const double low = v > 0.0 ? v : 0.0; /* NaN fails v > 0 */
    return (uint8_t)(int32_t)(low < 255.0 ? low : 255.0);
}
static inline int32_t store_i32_from_f64(double v)
{
    const double low = v > -2147483648.0 ? v : -2147483648.0;
    const int32_t clamped = (int32_t)(low < 2147483647.0 ? low : 2147483647.0);
    return v == v ? clamped : 0;
}
static inline int64_t store_i64_from_f64(double v)
{
    const double low = v > -9223372036854775808.0 ? v : -9223372036854775808.0;
    const double below_max = 9223372036854774784.0; /* the largest double < 2^63 */
    const int64_t clamped = (int64_t)(low < below_max ? low : below_max);
    const int64_t saturated = v >= 9223372036854775808.0 ? INT64_MAX : clamped;
    return v == v ? saturated : 0;
}
static inline uint16_t store_f16_from_f64(double v)
{
    return wf__cpu_f32_to_f16(wf__f64_to_f32_round_odd(v));
}
static inline uint16_t store_bf16_from_f64(double v)
{
    return wf__cpu_f32_to_bf16(wf__f64_to_f32_round_odd(v));
}
static inline float store_f32_from_f64(double v) { return (float)v; }
static inline wf_cpu_c64 store_c64_from_f64(double v) { return (wf_cpu_c64){(float)v, 0.0f}; }
/* The narrow integers clamp in double, then go through int32 (exact). */
static inline int8_t store_i8_from_f64(double v)
{
    const double low = v > -128.0 ? v : -128.0;
    const int32_t clamped = (int32_t)(low < 127.0 ? low : 127.0);
    return (int8_t)(v == v ? clamped : 0);
}
static inline int16_t store_i16_from_f64(double v)
{
    const double low = v > -32768.0 ? v : -32768.0;
    const int32_t clamped = (int32_t)(low < 32767.0 ? low : 32767.0);
    return (int16_t)(v == v ? clamped : 0);
}
static inline uint16_t store_u16_from_f64(double v)
{
    const double low = v > 0.0 ? v : 0.0; /* NaN fails v > 0 */
    return (uint16_t)(int32_t)(low < 65535.0 ? low : 65535.0);
}
static inline uint32_t store_u32_from_f64(double v)
{
    const double low = v > 0.0 ? v : 0.0;
    return (uint32_t)(int64_t)(low < 4294967295.0 ? low : 4294967295.0);
}
/* [2^63, 2^64) converts as (v - 2^63) + 2^63 in integers. */
static inline uint64_t store_u64_from_f64(double v)
{
    const double low = v > 0.0 ? v : 0.0;
    const double below_max = 18446744073709549568.0; /* the largest double < 2^64 */
    const double clamped = low < below_max ? low : below_max;
    const bool high = clamped >= 9223372036854775808.0;
    const double part = high ? clamped - 9223372036854775808.0 : clamped;
    const uint64_t bits = (uint64_t)(int64_t)part + (high ? UINT64_C(1) << 63 : 0);
    return v >= 18446744073709551616.0 ? UINT64_MAX : bits;
}
/* From a value exact in float32 (a float32, f16 or bf16 loaded as double):
 * converting through float32 rounds once. */
static inline uint16_t store_f16_from_f32(double v) { return wf__cpu_f32_to_f16((float)v); }
static inline uint16_t store_bf16_from_f32(double v) { return wf__cpu_f32_to_bf16((float)v); }
static inline double store_f64_from_f64(double v) { return v; }

/* One conversion loop per (source, destination) pair. */
typedef void (*convert_fn)(int64_t n, const void *src, int64_t ss, void *dst, int64_t ds);

/* Contiguous runs get their own loop, which GCC vectorizes (this file is
 * built with the dynamic vectorizer cost model, see CMakeLists.txt); other
 * strides use a plain loop. The typed body takes restrict parameters (GCC
 * ignores restrict on locals). */
#define CONVERT_LOOP(NAME, ST, DT, LOAD, STORE)                                         \
    static void ISA(NAME##_typed)(int64_t n, const ST *restrict s, int64_t ss,         \
                                  DT *restrict d, int64_t ds)                           \
    {                                                                                   \
        int64_t i = 0;                                                                  \
        if (ss == 1 && ds == 1) {                                                       \
            for (; i < n; i++)                                                          \
                d[i] = STORE(LOAD(s[i]));                                               \
        } else {                                                                        \
            for (; i < n; i++)                                                          \
                d[i * ds] = STORE(LOAD(s[i * ss]));                                     \
        }                                                                               \
    }                                                                                   \
    static void ISA(NAME)(int64_t n, const void *src, int64_t ss, void *dst, int64_t ds) \
    {                                                                                   \
        ISA(NAME##_typed)(n, (const ST *)src, ss, (DT *)dst, ds);                       \
    }

/* float32 <-> f16/bf16 with a contiguous float32 side: binary.c's block
 * conversions (F16C, AVX2, AVX-512 where the CPU has them; the same values
 * as the scalar loads and stores); a strided float32 side takes the plain
 * loop. */
#define HALF_TO_F32(NAME, DTYPE)                                                        \
    static void ISA(NAME)(int64_t n, const void *src, int64_t ss, void *dst, int64_t ds) \
    {                                                                                   \
        if (ds == 1)                                                                    \
            wf__cpu_halves_to_f32(n, src, ss, DTYPE, dst);                              \
        else                                                                            \
            ISA(NAME##_strided)(n, src, ss, dst, ds);                                   \
    }
#define F32_TO_HALF(NAME, DTYPE)                                                        \
    static void ISA(NAME)(int64_t n, const void *src, int64_t ss, void *dst, int64_t ds) \
    {                                                                                   \
        if (ss == 1)                                                                    \
            wf__cpu_f32_to_halves(n, src, dst, ds, DTYPE);                              \
        else                                                                            \
            ISA(NAME##_strided)(n, src, ss, dst, ds);                                   \
    }

#define ISA(name) name##_baseline
#include "backend/cpu/convert_isa.inc"
#undef ISA

#if defined(__x86_64__) && defined(__GNUC__)
#define CONVERT_HAVE_X86 1
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
#define ISA(name) name##_avx2
#include "backend/cpu/convert_isa.inc"
#undef ISA
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")
#endif
#define ISA(name) name##_avx512
#include "backend/cpu/convert_isa.inc"
#undef ISA
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#else
#define CONVERT_HAVE_X86 0
#endif

/* The loop converting src to dst in the active variant (NULL: same dtype). */
static convert_fn convert_loop(wf_dtype src, wf_dtype dst)
{
#if CONVERT_HAVE_X86
    switch (wf__vm_isa_active()) {
    case WF_VM_ISA_AVX2: return convert_table_avx2[src][dst];
    case WF_VM_ISA_AVX512: return convert_table_avx512[src][dst];
    default: break;
    }
#endif
    return convert_table_baseline[src][dst];
}

static void convert_inner(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx)
{
    const convert_fn *fn = ctx;
    (*fn)(n, ptrs[1], strides[1], ptrs[0], strides[0]);
}

void wf__cpu_convert_1d(int64_t n, const void *src, wf_dtype src_dtype, int64_t src_stride,
                        void *dst, wf_dtype dst_dtype, int64_t dst_stride)
{
    /* Short runs (attention's mask rows, a GEMM tile's output row) skip the
     * iterator's set-up: they would not be split anyway. */
    if (n < WF_CPU_CHUNK_CHEAP) {
        const convert_fn fn = convert_loop(src_dtype, dst_dtype);
        if (fn != NULL) {
            fn(n, src, src_stride, dst, dst_stride);
            return;
        }
        if (src_stride == 1 && dst_stride == 1) {
            memcpy(dst, src, (size_t)n * wf_dtype_size(src_dtype));
            return;
        }
    }
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
    convert_fn fn = convert_loop(src_dtype, dst_dtype);
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
    wf_status st = wf__cpu_alloc_elementwise_output(out, inputs, 1);
    if (st != WF_OK)
        return st;
    const int64_t *strides[2] = {out->strides, in->strides};
    int64_t shape[WF_MAX_NDIM], ordered[2][WF_MAX_NDIM];
    wf__cpu_in_output_order(out, 2, strides, shape, ordered);
    wf__cpu_convert_strided(out->ndim, shape, wf__array_data_ptr(in), in->dtype, ordered[1],
                            wf__array_data_ptr(out), out->dtype, ordered[0]);
    return WF_OK;
}
