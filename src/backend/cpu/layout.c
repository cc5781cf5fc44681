/* The layout of an element-wise result (see cpu.h).
 *
 * An element-wise op over a transposed or permuted view gives a result laid
 * out like that view (as MLX and PyTorch do): the walk then reads and writes
 * in memory order, at the speed of the contiguous op, instead of
 * transposing every element on the way. The transpose is paid only where
 * row-major data is needed (wf_array_data, a reshape, a custom kernel),
 * once. When the inputs disagree (x.T + y) the result is row-major and the
 * walk tiles the transposed operand (iter.c). */
#include "backend/cpu/cpu.h"

/* The non-size-1 dims of `shape` by decreasing stride of operand `strides`
 * (stable), then the size-1 dims; false if the operand cannot order them:
 * a stride that is 0 or negative, or two that are equal. */
static bool order_by_strides(int ndim, const int64_t *shape, const int64_t *strides, int *order)
{
    int n = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 1)
            continue;
        if (strides[d] <= 0)
            return false;
        int j = n++;
        while (j > 0 && strides[order[j - 1]] < strides[d]) {
            order[j] = order[j - 1];
            j--;
        }
        if (j > 0 && strides[order[j - 1]] == strides[d])
            return false;
        order[j] = d;
    }
    for (int d = 0; d < ndim; d++)
        if (shape[d] == 1)
            order[n++] = d;
    return true;
}

/* Whether an operand's non-zero strides decrease along `order` (its
 * broadcast dims, stride 0, fit any order). */
static bool follows_order(int ndim, const int64_t *shape, const int64_t *strides,
                          const int *order)
{
    int64_t previous = INT64_MAX;
    for (int k = 0; k < ndim; k++) {
        const int d = order[k];
        if (shape[d] == 1 || strides[d] == 0)
            continue;
        if (strides[d] < 0 || strides[d] >= previous)
            return false;
        previous = strides[d];
    }
    return true;
}

void wf__cpu_broadcast_strides(const wf_array *out, const wf_array *in, int64_t *strides)
{
    for (int d = 0; d < out->ndim; d++) {
        const int din = d - (out->ndim - in->ndim);
        strides[d] = din >= 0 && in->shape[din] != 1 ? in->strides[din] : 0;
    }
}

/* The dim order the inputs share, outermost first, in `order`; false when
 * it is row-major or they do not share one. The first input without
 * broadcast dims decides; every other must agree. */
static bool shared_order(const wf_array *out, wf_array *const *inputs, int ninputs, int *order)
{
    int64_t strides[WF_MAX_NDIM];
    int decider = -1;
    for (int i = 0; i < ninputs && decider < 0; i++) {
        wf__cpu_broadcast_strides(out, inputs[i], strides);
        if (order_by_strides(out->ndim, out->shape, strides, order))
            decider = i;
    }
    if (decider < 0)
        return false;
    bool row_major = true;
    for (int k = 0; k + 1 < out->ndim; k++)
        row_major = row_major && (out->shape[order[k + 1]] == 1 || order[k] < order[k + 1]);
    if (row_major)
        return false;
    for (int i = 0; i < ninputs; i++) {
        wf__cpu_broadcast_strides(out, inputs[i], strides);
        if (!follows_order(out->ndim, out->shape, strides, order))
            return false;
    }
    return true;
}

wf_status wf__cpu_alloc_elementwise_output(wf_array *out, wf_array *const *inputs, int ninputs)
{
    int order[WF_MAX_NDIM];
    if (out->buffer == NULL && shared_order(out, inputs, ninputs, order))
        return wf__array_alloc_output_ordered(out, order);
    return wf__array_alloc_output(out);
}

wf_status wf__cpu_alloc_output_like(wf_array *out, const wf_array *in)
{
    int order[WF_MAX_NDIM];
    if (out->buffer == NULL && !in->row_contiguous &&
        wf__is_dense(in->shape, in->strides, in->ndim)) {
        wf__cpu_dims_by_stride(in->ndim, in->strides, order);
        return wf__array_alloc_output_ordered(out, order);
    }
    return wf__array_alloc_output(out);
}

void wf__cpu_in_output_order(const wf_array *out, int nops, const int64_t *const *strides,
                             int64_t *shape, int64_t (*ordered)[WF_MAX_NDIM])
{
    int order[WF_MAX_NDIM];
    wf__cpu_dims_by_stride(out->ndim, out->strides, order);
    for (int k = 0; k < out->ndim; k++) {
        shape[k] = out->shape[order[k]];
        for (int op = 0; op < nops; op++)
            ordered[op][k] = strides[op][order[k]];
    }
}

void wf__cpu_iter_init_output_order(wf_cpu_iter *it, const wf_array *out, int nops,
                                    char *const *data, const size_t *itemsize,
                                    const int64_t *const *strides)
{
    int64_t shape[WF_MAX_NDIM], ordered[WF_CPU_MAX_OPERANDS][WF_MAX_NDIM];
    wf__cpu_in_output_order(out, nops, strides, shape, ordered);
    const int64_t *ordered_ptrs[WF_CPU_MAX_OPERANDS];
    for (int op = 0; op < nops; op++)
        ordered_ptrs[op] = ordered[op];
    wf__cpu_iter_init(it, out->ndim, shape, nops, data, itemsize, ordered_ptrs);
}
