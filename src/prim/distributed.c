/* Collective primitives: shape and dtype inference, the group reference in
 * their params, and the stream they run on (see prim/distributed.h). */
#include "prim/distributed.h"

#include "core/dtype.h"
#include "core/error.h"
#include "distributed/group.h"
#include "prim/prims.h"

static wf_status infer_same(const void *params, const wf_desc *in, int ninputs,
                            wf_out_desc *out)
{
    (void)params;
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "collective: expected 1 input, got %d", ninputs);
    out->dtype = in[0].dtype;
    out->ndim = in[0].ndim;
    wf__shape_copy(out->shape, in[0].shape, in[0].ndim);
    return WF_OK;
}

/* Gather along axis 0 (a 0-d input counts as shape (1,)). */
static wf_status infer_gather(const void *params, const wf_desc *in, int ninputs,
                              wf_out_desc *out)
{
    const wf_collective_params *p = params;
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "all_gather: expected 1 input, got %d", ninputs);
    out->dtype = in[0].dtype;
    out->ndim = in[0].ndim ? in[0].ndim : 1;
    out->shape[0] = 1;
    wf__shape_copy(out->shape, in[0].shape, in[0].ndim);
    out->shape[0] *= p->group->size;
    return WF_OK;
}

static wf_status infer_scatter(const void *params, const wf_desc *in, int ninputs,
                               wf_out_desc *out)
{
    const wf_collective_params *p = params;
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "sum_scatter: expected 1 input, got %d", ninputs);
    if (in[0].ndim == 0 || in[0].shape[0] % p->group->size != 0)
        return wf__error(WF_ERR_SHAPE,
                         "sum_scatter: the first axis (%lld) must be a multiple of the group "
                         "size %d",
                         in[0].ndim ? (long long)in[0].shape[0] : 0LL, p->group->size);
    out->dtype = in[0].dtype;
    out->ndim = in[0].ndim;
    wf__shape_copy(out->shape, in[0].shape, in[0].ndim);
    out->shape[0] /= p->group->size;
    return WF_OK;
}

static wf_status infer_recv(const void *params, const wf_desc *in, int ninputs,
                            wf_out_desc *out)
{
    (void)in;
    const wf_collective_params *p = params;
    if (ninputs > 1)
        return wf__error(WF_ERR_INTERNAL, "recv: expected at most 1 input, got %d", ninputs);
    out->dtype = p->dtype;
    out->ndim = p->ndim;
    wf__shape_copy(out->shape, p->shape, p->ndim);
    return WF_OK;
}

static void params_retain(void *params) { wf_group_retain(((wf_collective_params *)params)->group); }
static void params_release(void *params) { wf_group_release(((wf_collective_params *)params)->group); }

static struct wf_stream *group_stream(const void *params)
{
    return ((const wf_collective_params *)params)->group->stream;
}

#define COLLECTIVE_PRIM(NAME, INFER)                                                        \
    const wf_prim_def wf__prim_##NAME = {                                                   \
        .name = #NAME,                                                                      \
        .flags = WF_PRIM_COLLECTIVE,                                                        \
        .params_size = sizeof(wf_collective_params),                                        \
        .infer = INFER,                                                                     \
        .params_retain = params_retain,                                                     \
        .params_release = params_release,                                                   \
        .stream = group_stream,                                                             \
        .kernels = &(wf_kernel_slots){{0}},                                                 \
    };
COLLECTIVE_PRIM(all_sum, infer_same)
COLLECTIVE_PRIM(all_max, infer_same)
COLLECTIVE_PRIM(all_min, infer_same)
COLLECTIVE_PRIM(all_gather, infer_gather)
COLLECTIVE_PRIM(sum_scatter, infer_scatter)
COLLECTIVE_PRIM(send, infer_same)
COLLECTIVE_PRIM(recv, infer_recv)
#undef COLLECTIVE_PRIM

int wf__collective_kind(const wf_prim_def *prim)
{
    static const wf_prim_def *const prims[] = {&wf__prim_all_sum,    &wf__prim_all_max,
                                               &wf__prim_all_min,    &wf__prim_all_gather,
                                               &wf__prim_sum_scatter, &wf__prim_send,
                                               &wf__prim_recv};
    for (int k = 0; k < (int)(sizeof prims / sizeof prims[0]); k++)
        if (prims[k] == prim)
            return k;
    return -1;
}
