/* CPU kernels of the collectives: contiguous bytes in, the group's
 * collective (distributed/collective.c), contiguous bytes out. They run on
 * the group's communication stream and block on the network there. */
#include <stdlib.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/register.h"
#include "core/error.h"
#include "distributed/group.h"
#include "prim/distributed.h"
#include "prim/kernel.h"

/* x's elements in row-major order: its own storage when contiguous, else
 * a copy in *owned (freed by the caller). */
static const void *contiguous(const wf_array *x, void **owned)
{
    *owned = NULL;
    if (x->row_contiguous || x->size == 0)
        return x->size ? wf__array_data_ptr(x) : NULL;
    *owned = malloc((size_t)x->size * wf_dtype_size(x->dtype));
    if (!*owned) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "collective: out of memory copying an input");
        return NULL;
    }
    if (wf__cpu_copy_to_contiguous(x, *owned) != WF_OK) {
        free(*owned);
        *owned = NULL;
    }
    return *owned;
}

static wf_status collective_kernel(wf_array *out, wf_array *const *inputs, int ninputs,
                                   const void *params)
{
    const wf_collective_params *p = params;
    const int kind = wf__collective_kind(out->prim);
    if (kind == WF_COLLECTIVE_RECV) {
        (void)ninputs; /* recv_like's input only orders the node */
        wf_status status = wf__array_alloc_output(out);
        return status == WF_OK ? wf__collective_recv(p->group, out->dtype, out->shape,
                                                     out->ndim, out->size ? wf__array_data_ptr(out) : NULL,
                                                     out->size, p->peer)
                               : status;
    }
    const wf_array *x = inputs[0];
    void *owned = NULL;
    const void *data = contiguous(x, &owned);
    if (!data && x->size)
        return wf_last_error();
    wf_status status = WF_OK;
    if (kind == WF_COLLECTIVE_SEND) {
        status = wf__collective_send(p->group, x->dtype, x->shape, x->ndim, data, x->size,
                                     p->peer);
        if (status == WF_OK) /* the result is x's value */
            wf__array_set_view(out, x, x->strides, x->offset);
    } else {
        status = wf__array_alloc_output(out);
        void *dst = out->size ? wf__array_data_ptr(out) : NULL;
        if (status == WF_OK && kind == WF_COLLECTIVE_ALL_GATHER)
            status = wf__collective_gather(p->group, x->dtype, x->shape, x->ndim, data, dst,
                                           x->size);
        else if (status == WF_OK)
            status = wf__collective_reduce(p->group, kind, x->dtype, x->shape, x->ndim, data,
                                           dst, x->size);
    }
    free(owned);
    return status;
}

void wf__cpu_register_collectives(void)
{
    const wf_prim_def *const prims[] = {&wf__prim_all_sum,    &wf__prim_all_max,
                                        &wf__prim_all_min,    &wf__prim_all_gather,
                                        &wf__prim_sum_scatter, &wf__prim_send,
                                        &wf__prim_recv};
    for (size_t i = 0; i < sizeof prims / sizeof prims[0]; i++)
        wf__kernel_register(prims[i], WF_DEVICE_KIND_CPU, collective_kernel);
}
