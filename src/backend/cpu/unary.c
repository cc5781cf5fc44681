/* Unary element-wise kernels: exp. */
#include <math.h>

#include "backend/cpu/cpu.h"
#include "core/dtype.h"

enum { UNARY_BLOCK = 256 };

/* Contiguous block loops: the place to swap in a vectorized polynomial. */
void wf__cpu_exp_f32(int64_t n, const float *restrict x, float *restrict y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = expf(x[i]);
}

void wf__cpu_exp_f64(int64_t n, const double *restrict x, double *restrict y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = exp(x[i]);
}

/* Contiguous input and output go straight to the block loop. Anything else
 * (strided, broadcast, or a half type) is staged through blocks: convert the
 * input to the compute type, run the block loop, convert back. */
static void exp_inner_f32(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx)
{
    const wf_dtype dtype = *(const wf_dtype *)ctx;
    const size_t item = wf_dtype_size(dtype);
    if (dtype == WF_DTYPE_F32 && strides[0] == 1 && strides[1] == 1) {
        wf__cpu_exp_f32(n, (const float *)ptrs[1], (float *)ptrs[0]);
        return;
    }
    float in[UNARY_BLOCK], res[UNARY_BLOCK];
    for (int64_t i0 = 0; i0 < n; i0 += UNARY_BLOCK) {
        const int64_t m = n - i0 < UNARY_BLOCK ? n - i0 : UNARY_BLOCK;
        const char *src = ptrs[1] + i0 * strides[1] * (int64_t)item;
        char *dst = ptrs[0] + i0 * strides[0] * (int64_t)item;
        wf__cpu_convert_1d(m, src, dtype, strides[1], in, WF_DTYPE_F32, 1);
        wf__cpu_exp_f32(m, in, res);
        wf__cpu_convert_1d(m, res, WF_DTYPE_F32, 1, dst, dtype, strides[0]);
    }
}

static void exp_inner_f64(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx)
{
    (void)ctx;
    if (strides[0] == 1 && strides[1] == 1) {
        wf__cpu_exp_f64(n, (const double *)ptrs[1], (double *)ptrs[0]);
        return;
    }
    double in[UNARY_BLOCK], res[UNARY_BLOCK];
    for (int64_t i0 = 0; i0 < n; i0 += UNARY_BLOCK) {
        const int64_t m = n - i0 < UNARY_BLOCK ? n - i0 : UNARY_BLOCK;
        const double *src = (const double *)ptrs[1] + i0 * strides[1];
        double *dst = (double *)ptrs[0] + i0 * strides[0];
        wf__cpu_convert_1d(m, src, WF_DTYPE_F64, strides[1], in, WF_DTYPE_F64, 1);
        wf__cpu_exp_f64(m, in, res);
        wf__cpu_convert_1d(m, res, WF_DTYPE_F64, 1, dst, WF_DTYPE_F64, strides[0]);
    }
}

wf_status wf__cpu_exp(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)ninputs;
    (void)params;
    const wf_array *a = inputs[0];
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK)
        return st;
    int64_t out_strides[WF_MAX_NDIM];
    wf__cpu_row_strides(out->shape, out->ndim, out_strides);
    const size_t item = wf_dtype_size(out->dtype);
    char *data[2] = {wf__array_data_ptr(out), wf__array_data_ptr(a)};
    const size_t sizes[2] = {item, item};
    const int64_t *strides[2] = {out_strides, a->strides};
    const wf_dtype dtype = out->dtype;
    wf_cpu_iter it;
    wf__cpu_iter_init(&it, out->ndim, out->shape, 2, data, sizes, strides);
    wf__cpu_iter_run_parallel(&it, dtype == WF_DTYPE_F64 ? exp_inner_f64 : exp_inner_f32, &dtype,
                              WF_CPU_CHUNK_COSTLY);
    return WF_OK;
}
