/* Ternary element-wise kernels: where and clip.
 *
 * Inputs have the output's shape (broadcast views) and the compute dtypes
 * the op constructor chose, any strides. */
#include <math.h>

#include "backend/cpu/binary.h"
#include "backend/cpu/cpu.h"
#include "core/dtype.h"
#include "core/error.h"

/* ---------------------------------------------------------------- where */

/* o = c ? a : b moves bits, so one loop per element size serves every
 * dtype. The selection is a bit mask, not a branch (a random condition
 * would mispredict half the time). The common layouts (everything
 * contiguous, a or b a broadcast scalar) run in blocks of 8 with strides
 * fixed at compile time so that GCC vectorizes them; the rest takes the
 * general strided loop. */
#define SELECT(T, C, X, Y) ((T)(((X) & (T)(0 - (T)((C) != 0))) | ((Y) & (T)((T)((C) != 0) - 1))))
#define WHERE_BLOCK(T, SA, SB)                                                          \
    do {                                                                                \
        for (; i + 8 <= n; i += 8)                                                      \
            for (int j = 0; j < 8; j++)                                                 \
                o[i + j] = SELECT(T, c[i + j], a[(i + j) * (SA)], b[(i + j) * (SB)]);   \
        for (; i < n; i++)                                                              \
            o[i] = SELECT(T, c[i], a[i * (SA)], b[i * (SB)]);                           \
    } while (0)

#define WHERE_LOOP(NAME, T)                                                             \
    static void NAME##_typed(int64_t n, T *restrict o, int64_t so, const uint8_t *restrict c, \
                             int64_t sc, const T *restrict a, int64_t sa,               \
                             const T *restrict b, int64_t sb)                           \
    {                                                                                   \
        int64_t i = 0;                                                                  \
        if (so == 1 && sc == 1 && sa == 1 && sb == 1)                                   \
            WHERE_BLOCK(T, 1, 1);                                                       \
        else if (so == 1 && sc == 1 && sa == 1 && sb == 0)                              \
            WHERE_BLOCK(T, 1, 0);                                                       \
        else if (so == 1 && sc == 1 && sa == 0 && sb == 1)                              \
            WHERE_BLOCK(T, 0, 1);                                                       \
        else if (so == 1 && sc == 1 && sa == 0 && sb == 0)                              \
            WHERE_BLOCK(T, 0, 0);                                                       \
        else                                                                            \
            for (; i < n; i++)                                                          \
                o[i * so] = SELECT(T, c[i * sc], a[i * sa], b[i * sb]);                 \
    }                                                                                   \
    static void NAME(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx) \
    {                                                                                   \
        (void)ctx;                                                                      \
        NAME##_typed(n, (T *)ptrs[0], strides[0], (const uint8_t *)ptrs[1], strides[1], \
                     (const T *)ptrs[2], strides[2], (const T *)ptrs[3], strides[3]);   \
    }

WHERE_LOOP(where_1, uint8_t)
WHERE_LOOP(where_2, uint16_t)
WHERE_LOOP(where_4, uint32_t)
WHERE_LOOP(where_8, uint64_t)

wf_status wf__cpu_where(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)params;
    if (ninputs != 3)
        return wf__error(WF_ERR_INTERNAL, "where: expected 3 inputs, got %d", ninputs);
    const wf_array *c = inputs[0], *a = inputs[1], *b = inputs[2];
    if (c->dtype != WF_DTYPE_BOOL || a->dtype != out->dtype || b->dtype != out->dtype)
        return wf__error(WF_ERR_DTYPE, "where: no CPU kernel for inputs %s, %s, %s",
                         wf_dtype_name(c->dtype), wf_dtype_name(a->dtype),
                         wf_dtype_name(b->dtype));
    const size_t item = wf_dtype_size(out->dtype);
    wf_cpu_inner_fn loop = item == 1   ? where_1
                           : item == 2 ? where_2
                           : item == 4 ? where_4
                                       : where_8;
    wf_status st = wf__cpu_alloc_elementwise_output(out, inputs, 3);
    if (st != WF_OK)
        return st;
    char *data[4] = {wf__array_data_ptr(out), wf__array_data_ptr(c), wf__array_data_ptr(a),
                     wf__array_data_ptr(b)};
    const size_t sizes[4] = {item, 1, item, item};
    const int64_t *strides[4] = {out->strides, c->strides, a->strides, b->strides};
    wf_cpu_iter it;
    wf__cpu_iter_init_output_order(&it, out, 4, data, sizes, strides);
    it.out_write_only = true;
    wf__cpu_iter_run_parallel(&it, loop, NULL, WF_CPU_CHUNK_CHEAP);
    return WF_OK;
}

/* ---------------------------------------------------------------- clip */

/* o = min(max(a, lo), hi) with NumPy's maximum/minimum: a NaN in any operand
 * gives NaN. Bool: (a or lo) and hi. */
static inline uint8_t clip_bool(uint8_t a, uint8_t lo, uint8_t hi)
{
    return (uint8_t)(((a != 0) | (lo != 0)) & (hi != 0));
}
#define CLIP_INT(T, SFX)                                                                \
    static inline T clip_##SFX(T a, T lo, T hi)                                         \
    {                                                                                   \
        const T x = a > lo ? a : lo;                                                    \
        return x < hi ? x : hi;                                                         \
    }
CLIP_INT(uint8_t, u8)
CLIP_INT(uint16_t, u16)
CLIP_INT(uint32_t, u32)
CLIP_INT(uint64_t, u64)
CLIP_INT(int8_t, i8)
CLIP_INT(int16_t, i16)
CLIP_INT(int32_t, i32)
CLIP_INT(int64_t, i64)
#define CLIP_FLOAT(T, SFX)                                                              \
    static inline T clip_##SFX(T a, T lo, T hi)                                         \
    {                                                                                   \
        const T x = (a >= lo || a != a) ? a : lo;                                       \
        return (x <= hi || x != x) ? x : hi;                                            \
    }
CLIP_FLOAT(float, f32)
CLIP_FLOAT(double, f64)

/* Specialized for all contiguous and for scalar bounds (the common
 * clip(x, lo, hi) with 0-d bounds), in blocks of 8. */
#define CLIP_BLOCK(OPF, SL, SH)                                                         \
    do {                                                                                \
        for (; i + 8 <= n; i += 8)                                                      \
            for (int j = 0; j < 8; j++)                                                 \
                o[i + j] = OPF(a[i + j], lo[(i + j) * (SL)], hi[(i + j) * (SH)]);       \
        for (; i < n; i++)                                                              \
            o[i] = OPF(a[i], lo[i * (SL)], hi[i * (SH)]);                               \
    } while (0)

#define CLIP_LOOP(NAME, T, OPF)                                                         \
    static void NAME##_typed(int64_t n, T *restrict o, int64_t so, const T *restrict a, \
                             int64_t sa, const T *restrict lo, int64_t sl,              \
                             const T *restrict hi, int64_t sh)                          \
    {                                                                                   \
        int64_t i = 0;                                                                  \
        if (so == 1 && sa == 1 && sl == 1 && sh == 1)                                   \
            CLIP_BLOCK(OPF, 1, 1);                                                      \
        else if (so == 1 && sa == 1 && sl == 0 && sh == 0)                              \
            CLIP_BLOCK(OPF, 0, 0);                                                      \
        else                                                                            \
            for (; i < n; i++)                                                          \
                o[i * so] = OPF(a[i * sa], lo[i * sl], hi[i * sh]);                     \
    }                                                                                   \
    static void NAME(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx) \
    {                                                                                   \
        (void)ctx;                                                                      \
        NAME##_typed(n, (T *)ptrs[0], strides[0], (const T *)ptrs[1], strides[1],       \
                     (const T *)ptrs[2], strides[2], (const T *)ptrs[3], strides[3]);   \
    }

CLIP_LOOP(clip_loop_bool, uint8_t, clip_bool)
CLIP_LOOP(clip_loop_u8, uint8_t, clip_u8)
CLIP_LOOP(clip_loop_i32, int32_t, clip_i32)
CLIP_LOOP(clip_loop_i64, int64_t, clip_i64)
CLIP_LOOP(clip_loop_u16, uint16_t, clip_u16)
CLIP_LOOP(clip_loop_u32, uint32_t, clip_u32)
CLIP_LOOP(clip_loop_u64, uint64_t, clip_u64)
CLIP_LOOP(clip_loop_i8, int8_t, clip_i8)
CLIP_LOOP(clip_loop_i16, int16_t, clip_i16)
CLIP_LOOP(clip_loop_f32, float, clip_f32)
CLIP_LOOP(clip_loop_f64, double, clip_f64)

/* Halves: blocks of each operand converted to float32 (a stride-0 operand
 * once), the float32 loop, the result converted back. */
enum { CLIP_HALF_BLOCK = 512 };

static void clip_half(int64_t n, char *const *ptrs, const int64_t *strides, wf_dtype dt)
{
    float x[3][CLIP_HALF_BLOCK], r[CLIP_HALF_BLOCK];
    for (int k = 0; k < 3; k++) {
        x[k][0] = 0;
        if (strides[k + 1] == 0)
            wf__cpu_halves_to_f32(1, (const uint16_t *)ptrs[k + 1], 1, dt, x[k]);
    }
    for (int64_t i0 = 0; i0 < n; i0 += CLIP_HALF_BLOCK) {
        const int64_t m = n - i0 < CLIP_HALF_BLOCK ? n - i0 : CLIP_HALF_BLOCK;
        for (int k = 0; k < 3; k++) {
            const int64_t s = strides[k + 1];
            if (s != 0)
                wf__cpu_halves_to_f32(m, (const uint16_t *)ptrs[k + 1] + i0 * s, s, dt, x[k]);
        }
        clip_loop_f32_typed(m, r, 1, x[0], strides[1] != 0, x[1], strides[2] != 0, x[2],
                            strides[3] != 0);
        wf__cpu_f32_to_halves(m, r, (uint16_t *)ptrs[0] + i0 * strides[0], strides[0], dt);
    }
}

static void clip_loop_f16(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx)
{
    (void)ctx;
    clip_half(n, ptrs, strides, WF_DTYPE_F16);
}

static void clip_loop_bf16(int64_t n, char *const *ptrs, const int64_t *strides,
                           const void *ctx)
{
    (void)ctx;
    clip_half(n, ptrs, strides, WF_DTYPE_BF16);
}

/* Every real dtype; complex64 has no order (the prim rejects it). */
static const wf_cpu_inner_fn clip_loops[WF_DTYPE_COUNT] = {
    [WF_DTYPE_BOOL] = clip_loop_bool, [WF_DTYPE_U8] = clip_loop_u8,
    [WF_DTYPE_U16] = clip_loop_u16,   [WF_DTYPE_U32] = clip_loop_u32,
    [WF_DTYPE_U64] = clip_loop_u64,   [WF_DTYPE_I8] = clip_loop_i8,
    [WF_DTYPE_I16] = clip_loop_i16,   [WF_DTYPE_I32] = clip_loop_i32,
    [WF_DTYPE_I64] = clip_loop_i64,   [WF_DTYPE_F16] = clip_loop_f16,
    [WF_DTYPE_BF16] = clip_loop_bf16, [WF_DTYPE_F32] = clip_loop_f32,
    [WF_DTYPE_F64] = clip_loop_f64,
};

wf_status wf__cpu_clip(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)params;
    if (ninputs != 3)
        return wf__error(WF_ERR_INTERNAL, "clip: expected 3 inputs, got %d", ninputs);
    const wf_array *a = inputs[0], *lo = inputs[1], *hi = inputs[2];
    const wf_dtype dtype = out->dtype;
    if (!wf__dtype_valid(dtype) || !clip_loops[dtype] || a->dtype != dtype ||
        lo->dtype != dtype || hi->dtype != dtype)
        return wf__error(WF_ERR_DTYPE, "clip: no CPU kernel for inputs %s, %s, %s",
                         wf_dtype_name(a->dtype), wf_dtype_name(lo->dtype),
                         wf_dtype_name(hi->dtype));
    wf_status st = wf__cpu_alloc_elementwise_output(out, inputs, 3);
    if (st != WF_OK)
        return st;
    const size_t item = wf_dtype_size(dtype);
    char *data[4] = {wf__array_data_ptr(out), wf__array_data_ptr(a), wf__array_data_ptr(lo),
                     wf__array_data_ptr(hi)};
    const size_t sizes[4] = {item, item, item, item};
    const int64_t *strides[4] = {out->strides, a->strides, lo->strides, hi->strides};
    wf_cpu_iter it;
    wf__cpu_iter_init_output_order(&it, out, 4, data, sizes, strides);
    it.out_write_only = true;
    wf__cpu_iter_run_parallel(&it, clip_loops[dtype], NULL, WF_CPU_CHUNK_CHEAP);
    return WF_OK;
}
