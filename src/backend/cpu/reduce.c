/* Reduction kernels: sum.
 *
 * The output (or a float32 accumulator for half types) is zeroed and seen as
 * an operand with the input's shape and stride 0 on the reduced axes. The
 * walk visits the input in memory order (dims sorted by stride), so the inner
 * loop either reduces a row to one value (accumulator stride 0) or adds a
 * row into a row of accumulators; neither does index arithmetic. */
#include <string.h>

#include "backend/cpu/cpu.h"
#include "core/dtype.h"
#include "prim/prims.h"

enum { PAIRWISE_BLOCK = 128, HALF_BLOCK = 256 };

/* Pairwise summation (as NumPy): 8 partial sums over blocks of up to 128,
 * blocks combined in a balanced tree. */
float wf__cpu_sum_f32(int64_t n, const float *x, int64_t stride)
{
    if (n > PAIRWISE_BLOCK) {
        int64_t half = n / 2;
        half -= half % 8;
        return wf__cpu_sum_f32(half, x, stride) +
               wf__cpu_sum_f32(n - half, x + half * stride, stride);
    }
    float r[8] = {0};
    int64_t i = 0;
    if (stride == 1) { /* a separate loop so that it vectorizes */
        for (; i + 8 <= n; i += 8) {
            for (int j = 0; j < 8; j++)
                r[j] += x[i + j];
        }
    } else {
        for (; i + 8 <= n; i += 8) {
            for (int j = 0; j < 8; j++)
                r[j] += x[(i + j) * stride];
        }
    }
    float s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; i++)
        s += x[i * stride];
    return s;
}

double wf__cpu_sum_f64(int64_t n, const double *x, int64_t stride)
{
    if (n > PAIRWISE_BLOCK) {
        int64_t half = n / 2;
        half -= half % 8;
        return wf__cpu_sum_f64(half, x, stride) +
               wf__cpu_sum_f64(n - half, x + half * stride, stride);
    }
    double r[8] = {0};
    int64_t i = 0;
    if (stride == 1) { /* a separate loop so that it vectorizes */
        for (; i + 8 <= n; i += 8) {
            for (int j = 0; j < 8; j++)
                r[j] += x[i + j];
        }
    } else {
        for (; i + 8 <= n; i += 8) {
            for (int j = 0; j < 8; j++)
                r[j] += x[(i + j) * stride];
        }
    }
    double s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; i++)
        s += x[i * stride];
    return s;
}

/* Integers: operand 0 the accumulator (AT), 1 the input (IT); sums in the
 * unsigned type UT so overflow wraps. Contiguous runs go in blocks of 8 (a
 * fixed-count inner loop GCC vectorizes at -O2); the typed bodies take
 * restrict parameters (GCC ignores restrict on local pointers). */
#define SUM_INT_LOOP(NAME, IT, AT, UT, WRAP)                                            \
    static void NAME##_typed(int64_t n, AT *restrict acc, int64_t sa, const IT *restrict x, \
                             int64_t sx)                                                \
    {                                                                                   \
        int64_t i = 0;                                                                  \
        if (sa == 0) {                                                                  \
            UT r[8] = {0};                                                              \
            if (sx == 1) {                                                              \
                for (; i + 8 <= n; i += 8)                                              \
                    for (int j = 0; j < 8; j++)                                         \
                        r[j] += (UT)x[i + j];                                           \
            }                                                                           \
            UT s = r[0] + r[1] + r[2] + r[3] + r[4] + r[5] + r[6] + r[7];               \
            for (; i < n; i++)                                                          \
                s += (UT)x[i * sx];                                                     \
            *acc = WRAP((UT)*acc + s);                                                  \
        } else if (sa == 1 && sx == 1) {                                                \
            for (; i + 8 <= n; i += 8)                                                  \
                for (int j = 0; j < 8; j++)                                             \
                    acc[i + j] = WRAP((UT)acc[i + j] + (UT)x[i + j]);                   \
            for (; i < n; i++)                                                          \
                acc[i] = WRAP((UT)acc[i] + (UT)x[i]);                                   \
        } else {                                                                        \
            for (; i < n; i++)                                                          \
                acc[i * sa] = WRAP((UT)acc[i * sa] + (UT)x[i * sx]);                    \
        }                                                                               \
    }                                                                                   \
    static void NAME(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx) \
    {                                                                                   \
        (void)ctx;                                                                      \
        NAME##_typed(n, (AT *)ptrs[0], strides[0], (const IT *)ptrs[1], strides[1]);    \
    }

SUM_INT_LOOP(sum_bool, uint8_t, int32_t, uint32_t, wf__cpu_wrap_i32)
SUM_INT_LOOP(sum_u8, uint8_t, int32_t, uint32_t, wf__cpu_wrap_i32)
SUM_INT_LOOP(sum_i32, int32_t, int32_t, uint32_t, wf__cpu_wrap_i32)
SUM_INT_LOOP(sum_i64, int64_t, int64_t, uint64_t, wf__cpu_wrap_i64)

/* float32 and float64: pairwise when reducing a row to one value. */
#define SUM_FLOAT_LOOP(NAME, T, ROW_SUM)                                                \
    static void NAME##_typed(int64_t n, T *restrict acc, int64_t sa, const T *restrict x, \
                             int64_t sx)                                                \
    {                                                                                   \
        int64_t i = 0;                                                                  \
        if (sa == 0) {                                                                  \
            *acc += ROW_SUM(n, x, sx);                                                  \
        } else if (sa == 1 && sx == 1) {                                                \
            for (; i + 8 <= n; i += 8)                                                  \
                for (int j = 0; j < 8; j++)                                             \
                    acc[i + j] += x[i + j];                                             \
            for (; i < n; i++)                                                          \
                acc[i] += x[i];                                                         \
        } else {                                                                        \
            for (; i < n; i++)                                                          \
                acc[i * sa] += x[i * sx];                                               \
        }                                                                               \
    }                                                                                   \
    static void NAME(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx) \
    {                                                                                   \
        (void)ctx;                                                                      \
        NAME##_typed(n, (T *)ptrs[0], strides[0], (const T *)ptrs[1], strides[1]);      \
    }

SUM_FLOAT_LOOP(sum_f32, float, wf__cpu_sum_f32)
SUM_FLOAT_LOOP(sum_f64, double, wf__cpu_sum_f64)

/* float16 / bfloat16 into a float32 accumulator; ctx points at the dtype. */
static void sum_half(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx)
{
    const wf_dtype dtype = *(const wf_dtype *)ctx;
    float *acc = (float *)ptrs[0];
    const uint16_t *x = (const uint16_t *)ptrs[1];
    const int64_t sa = strides[0], sx = strides[1];
    float block[HALF_BLOCK];
    for (int64_t i0 = 0; i0 < n; i0 += HALF_BLOCK) {
        const int64_t m = n - i0 < HALF_BLOCK ? n - i0 : HALF_BLOCK;
        wf__cpu_convert_1d(m, x + i0 * sx, dtype, sx, block, WF_DTYPE_F32, 1);
        if (sa == 0) {
            *acc += wf__cpu_sum_f32(m, block, 1);
        } else {
            float *a = acc + i0 * sa;
            for (int64_t i = 0; i < m; i++)
                a[i * sa] += block[i];
        }
    }
}

static wf_cpu_inner_fn sum_loop(wf_dtype dtype)
{
    switch (dtype) {
    case WF_DTYPE_BOOL: return sum_bool;
    case WF_DTYPE_U8: return sum_u8;
    case WF_DTYPE_I32: return sum_i32;
    case WF_DTYPE_I64: return sum_i64;
    case WF_DTYPE_F32: return sum_f32;
    case WF_DTYPE_F64: return sum_f64;
    default: return sum_half;
    }
}

/* Accumulates `in` into the zeroed accumulator `acc` (laid out row-major
 * over the kept axes). */
static void sum_into(const wf_array *in, uint64_t axes, void *acc, size_t acc_item)
{
    int64_t acc_strides[WF_MAX_NDIM];
    int64_t s = 1;
    for (int d = in->ndim - 1; d >= 0; d--) {
        const bool reduced = (axes >> d) & 1u;
        acc_strides[d] = reduced ? 0 : s;
        if (!reduced)
            s *= in->shape[d];
    }
    /* Walk the input in its memory order. */
    int perm[WF_MAX_NDIM];
    int64_t shape[WF_MAX_NDIM], in_strides[WF_MAX_NDIM], out_strides[WF_MAX_NDIM];
    wf__cpu_dims_by_stride(in->ndim, in->strides, perm);
    for (int d = 0; d < in->ndim; d++) {
        shape[d] = in->shape[perm[d]];
        in_strides[d] = in->strides[perm[d]];
        out_strides[d] = acc_strides[perm[d]];
    }
    char *data[2] = {acc, wf__array_data_ptr(in)};
    const size_t sizes[2] = {acc_item, wf_dtype_size(in->dtype)};
    const int64_t *strides[2] = {out_strides, in_strides};
    const wf_dtype dtype = in->dtype;
    wf_cpu_iter it;
    wf__cpu_iter_init(&it, in->ndim, shape, 2, data, sizes, strides);
    wf__cpu_iter_run(&it, sum_loop(dtype), &dtype);
}

wf_status wf__cpu_sum(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)ninputs;
    const wf_array *in = inputs[0];
    const wf_sum_params *p = params;
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK)
        return st;
    const bool half = in->dtype == WF_DTYPE_F16 || in->dtype == WF_DTYPE_BF16;
    if (!half) {
        const size_t item = wf_dtype_size(out->dtype);
        memset(wf__array_data_ptr(out), 0, (size_t)out->size * item);
        sum_into(in, p->axes, wf__array_data_ptr(out), item);
        return WF_OK;
    }
    wf_buffer *acc = wf__buffer_alloc((size_t)out->size * sizeof(float));
    if (acc == NULL)
        return WF_ERR_OUT_OF_MEMORY; /* recorded by the allocator */
    memset(acc->data, 0, (size_t)out->size * sizeof(float));
    sum_into(in, p->axes, acc->data, sizeof(float));
    wf__cpu_convert_1d(out->size, acc->data, WF_DTYPE_F32, 1, wf__array_data_ptr(out),
                       out->dtype, 1);
    wf__buffer_release(acc);
    return WF_OK;
}
