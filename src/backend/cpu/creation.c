/* Kernels with no inputs: full, arange. */
#include "backend/cpu/cpu.h"
#include "core/dtype.h"
#include "prim/prims.h"

enum { ARANGE_BLOCK = 256 };

wf_status wf__cpu_full(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)inputs;
    (void)ninputs;
    const wf_full_params *p = params;
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK)
        return st;
    uint64_t value = 0; /* one element of out->dtype, broadcast with stride 0 */
    wf__store_from_double(&value, out->dtype, 0, p->value);
    const int64_t size = out->size, zero = 0;
    wf__cpu_copy_strided(1, &size, wf_dtype_size(out->dtype), &value, &zero,
                         wf__array_data_ptr(out));
    return WF_OK;
}

/* start + i * step is computed in double for a block, then converted. */
wf_status wf__cpu_arange(wf_array *out, wf_array *const *inputs, int ninputs,
                         const void *params)
{
    (void)inputs;
    (void)ninputs;
    const wf_arange_params *p = params;
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK)
        return st;
    char *dst = wf__array_data_ptr(out);
    const size_t item = wf_dtype_size(out->dtype);
    double block[ARANGE_BLOCK];
    for (int64_t i0 = 0; i0 < out->size; i0 += ARANGE_BLOCK) {
        const int64_t m = out->size - i0 < ARANGE_BLOCK ? out->size - i0 : ARANGE_BLOCK;
        for (int64_t i = 0; i < m; i++)
            block[i] = p->start + (double)(i0 + i) * p->step;
        wf__cpu_convert_1d(m, block, WF_DTYPE_F64, 1, dst + i0 * (int64_t)item, out->dtype, 1);
    }
    return WF_OK;
}
