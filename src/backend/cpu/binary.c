/* Binary element-wise kernels: add, multiply. Inputs have the output's shape
 * and dtype (the op inserted casts and broadcast views), any strides. */
#include "backend/cpu/cpu.h"
#include "core/dtype.h"

/* Scalar operations. Integers wrap (unsigned arithmetic), bool add is
 * logical or and multiply logical and, halves are computed in float32. */
static inline uint8_t add_bool(uint8_t a, uint8_t b) { return (uint8_t)(a | b); }
static inline uint8_t mul_bool(uint8_t a, uint8_t b) { return (uint8_t)(a & b); }
static inline uint8_t add_u8(uint8_t a, uint8_t b) { return (uint8_t)(a + b); }
static inline uint8_t mul_u8(uint8_t a, uint8_t b) { return (uint8_t)(a * b); }
static inline int32_t add_i32(int32_t a, int32_t b)
{
    return wf__cpu_wrap_i32((uint32_t)a + (uint32_t)b);
}
static inline int32_t mul_i32(int32_t a, int32_t b)
{
    return wf__cpu_wrap_i32((uint32_t)a * (uint32_t)b);
}
static inline int64_t add_i64(int64_t a, int64_t b)
{
    return wf__cpu_wrap_i64((uint64_t)a + (uint64_t)b);
}
static inline int64_t mul_i64(int64_t a, int64_t b)
{
    return wf__cpu_wrap_i64((uint64_t)a * (uint64_t)b);
}
static inline uint16_t add_f16(uint16_t a, uint16_t b)
{
    return wf__f32_to_f16(wf__f16_to_f32(a) + wf__f16_to_f32(b));
}
static inline uint16_t mul_f16(uint16_t a, uint16_t b)
{
    return wf__f32_to_f16(wf__f16_to_f32(a) * wf__f16_to_f32(b));
}
static inline uint16_t add_bf16(uint16_t a, uint16_t b)
{
    return wf__f32_to_bf16(wf__bf16_to_f32(a) + wf__bf16_to_f32(b));
}
static inline uint16_t mul_bf16(uint16_t a, uint16_t b)
{
    return wf__f32_to_bf16(wf__bf16_to_f32(a) * wf__bf16_to_f32(b));
}
static inline float add_f32(float a, float b) { return a + b; }
static inline float mul_f32(float a, float b) { return a * b; }
static inline double add_f64(double a, double b) { return a + b; }
static inline double mul_f64(double a, double b) { return a * b; }

/* The inner loop: operand 0 is the output, 1 and 2 the inputs. Specialized
 * for all-contiguous and for either input broadcast (stride 0). The
 * contiguous cases run in blocks of 8 with a fixed-count inner loop, which
 * GCC vectorizes at -O2 (its default cost model skips loops of unknown
 * count), followed by a scalar tail. The typed body takes its pointers as
 * restrict parameters (GCC ignores restrict on local pointers). */
#define BINARY_LOOP(NAME, T, OP)                                                        \
    static void NAME##_typed(int64_t n, T *restrict o, int64_t so, const T *restrict a,  \
                             int64_t sa, const T *restrict b, int64_t sb)               \
    {                                                                                   \
        int64_t i = 0;                                                                  \
        if (so == 1 && sa == 1 && sb == 1) {                                            \
            for (; i + 8 <= n; i += 8)                                                  \
                for (int j = 0; j < 8; j++)                                             \
                    o[i + j] = OP(a[i + j], b[i + j]);                                  \
            for (; i < n; i++)                                                          \
                o[i] = OP(a[i], b[i]);                                                  \
        } else if (so == 1 && sa == 1 && sb == 0) {                                     \
            const T y = *b;                                                             \
            for (; i + 8 <= n; i += 8)                                                  \
                for (int j = 0; j < 8; j++)                                             \
                    o[i + j] = OP(a[i + j], y);                                         \
            for (; i < n; i++)                                                          \
                o[i] = OP(a[i], y);                                                     \
        } else if (so == 1 && sa == 0 && sb == 1) {                                     \
            const T x = *a;                                                             \
            for (; i + 8 <= n; i += 8)                                                  \
                for (int j = 0; j < 8; j++)                                             \
                    o[i + j] = OP(x, b[i + j]);                                         \
            for (; i < n; i++)                                                          \
                o[i] = OP(x, b[i]);                                                     \
        } else {                                                                        \
            for (; i < n; i++)                                                          \
                o[i * so] = OP(a[i * sa], b[i * sb]);                                   \
        }                                                                               \
    }                                                                                   \
    static void NAME(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx) \
    {                                                                                   \
        (void)ctx;                                                                      \
        NAME##_typed(n, (T *)ptrs[0], strides[0], (const T *)ptrs[1], strides[1],       \
                     (const T *)ptrs[2], strides[2]);                                   \
    }

BINARY_LOOP(add_loop_bool, uint8_t, add_bool)
BINARY_LOOP(add_loop_u8, uint8_t, add_u8)
BINARY_LOOP(add_loop_i32, int32_t, add_i32)
BINARY_LOOP(add_loop_i64, int64_t, add_i64)
BINARY_LOOP(add_loop_f16, uint16_t, add_f16)
BINARY_LOOP(add_loop_bf16, uint16_t, add_bf16)
BINARY_LOOP(add_loop_f32, float, add_f32)
BINARY_LOOP(add_loop_f64, double, add_f64)

BINARY_LOOP(mul_loop_bool, uint8_t, mul_bool)
BINARY_LOOP(mul_loop_u8, uint8_t, mul_u8)
BINARY_LOOP(mul_loop_i32, int32_t, mul_i32)
BINARY_LOOP(mul_loop_i64, int64_t, mul_i64)
BINARY_LOOP(mul_loop_f16, uint16_t, mul_f16)
BINARY_LOOP(mul_loop_bf16, uint16_t, mul_bf16)
BINARY_LOOP(mul_loop_f32, float, mul_f32)
BINARY_LOOP(mul_loop_f64, double, mul_f64)

/* Indexed by wf_dtype. */
static const wf_cpu_inner_fn add_loops[WF_DTYPE_COUNT] = {
    add_loop_bool, add_loop_u8,   add_loop_i32, add_loop_i64,
    add_loop_f16,  add_loop_bf16, add_loop_f32, add_loop_f64,
};
static const wf_cpu_inner_fn mul_loops[WF_DTYPE_COUNT] = {
    mul_loop_bool, mul_loop_u8,   mul_loop_i32, mul_loop_i64,
    mul_loop_f16,  mul_loop_bf16, mul_loop_f32, mul_loop_f64,
};

static wf_status run_binary(wf_array *out, wf_array *const *inputs, wf_cpu_inner_fn loop)
{
    const wf_array *a = inputs[0], *b = inputs[1];
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK)
        return st;
    int64_t out_strides[WF_MAX_NDIM];
    wf__cpu_row_strides(out->shape, out->ndim, out_strides);
    const size_t item = wf_dtype_size(out->dtype);
    char *data[3] = {wf__array_data_ptr(out), wf__array_data_ptr(a), wf__array_data_ptr(b)};
    const size_t sizes[3] = {item, item, item};
    const int64_t *strides[3] = {out_strides, a->strides, b->strides};
    wf_cpu_iter it;
    wf__cpu_iter_init(&it, out->ndim, out->shape, 3, data, sizes, strides);
    wf__cpu_iter_run_parallel(&it, loop, NULL, WF_CPU_CHUNK_CHEAP);
    return WF_OK;
}

wf_status wf__cpu_add(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)ninputs;
    (void)params;
    return run_binary(out, inputs, add_loops[out->dtype]);
}

wf_status wf__cpu_multiply(wf_array *out, wf_array *const *inputs, int ninputs,
                           const void *params)
{
    (void)ninputs;
    (void)params;
    return run_binary(out, inputs, mul_loops[out->dtype]);
}
