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

/* The first failed input, or NULL. */
static const wf_array *failed_input(wf_array *const *inputs, int ninputs)
{
    for (int i = 0; i < ninputs; i++)
        if (wf__array_state(inputs[i]) == WF_NODE_FAILED)
            return inputs[i];
    return NULL;
}

/* This rank cannot take part (an input failed, or memory ran out): it
 * still joins the header exchange with a header that says so, so the
 * other ranks fail too instead of waiting for it. Returns `status` with
 * this thread's error message kept. */
static wf_status abandon(wf_array *out, const wf_collective_params *p, int kind,
                         const wf_array *x, wf_status status)
{
    wf_error_state saved;
    wf__error_save(&saved);
    if (kind == WF_COLLECTIVE_RECV)
        wf__collective_recv(p->group, out->dtype, out->shape, out->ndim, NULL, out->size,
                            p->peer);
    else if (kind == WF_COLLECTIVE_SEND)
        wf__collective_send(p->group, x->dtype, x->shape, x->ndim, NULL, x->size, p->peer);
    else if (kind == WF_COLLECTIVE_ALL_GATHER)
        wf__collective_gather(p->group, x->dtype, x->shape, x->ndim, NULL, NULL, x->size);
    else
        wf__collective_reduce(p->group, kind, x->dtype, x->shape, x->ndim, NULL, NULL, x->size);
    wf__error_restore(&saved);
    return status;
}

static wf_status collective_kernel(wf_array *out, wf_array *const *inputs, int ninputs,
                                   const void *params)
{
    static char no_elements; /* a non-NULL pointer for empty arrays: NULL means abandon */
    const wf_collective_params *p = params;
    const int kind = wf__collective_kind(out->prim);
    const wf_array *failed = failed_input(inputs, ninputs);
    const wf_array *x = kind == WF_COLLECTIVE_RECV ? out : inputs[0];
    if (failed)
        return abandon(out, p, kind, x,
                       wf__error(failed->error, "%s", wf__node_failure_message(failed)));
    if (kind == WF_COLLECTIVE_RECV) { /* recv_like's input only orders the node */
        wf_status status = wf__array_alloc_output(out);
        if (status != WF_OK)
            return abandon(out, p, kind, x, status);
        return wf__collective_recv(p->group, out->dtype, out->shape, out->ndim,
                                   out->size ? wf__array_data_ptr(out) : &no_elements,
                                   out->size, p->peer);
    }
    void *owned = NULL;
    const void *data = x->size ? contiguous(x, &owned) : &no_elements;
    if (!data)
        return abandon(out, p, kind, x, wf_last_error());
    wf_status status;
    if (kind == WF_COLLECTIVE_SEND) {
        status = wf__collective_send(p->group, x->dtype, x->shape, x->ndim, data, x->size,
                                     p->peer);
        if (status == WF_OK) /* the result is x's value */
            wf__array_set_view(out, x, x->strides, x->offset);
    } else if ((status = wf__array_alloc_output(out)) != WF_OK) {
        status = abandon(out, p, kind, x, status);
    } else {
        void *dst = out->size ? wf__array_data_ptr(out) : &no_elements;
        if (kind == WF_COLLECTIVE_ALL_GATHER)
            status = wf__collective_gather(p->group, x->dtype, x->shape, x->ndim, data, dst,
                                           x->size);
        else
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
