/* Random primitives: uniform, normal, randint (no inputs), bernoulli (p),
 * categorical (logits), and random_keyed (any of them with its key as an
 * input). The op constructors check the user's arguments; infer re-checks
 * what the kernels rely on. */
#include "prim/random.h"

#include <math.h>

#include "core/dtype.h"
#include "core/error.h"
#include "prim/prims.h"

static wf_status expect(const wf_random_params *p, int kind, const char *op, int ninputs,
                        int want_inputs)
{
    if (p->kind != kind)
        return wf__error(WF_ERR_INTERNAL, "%s: params of kind %d", op, p->kind);
    if (ninputs != want_inputs)
        return wf__error(WF_ERR_INTERNAL, "%s: expected %d inputs, got %d", op, want_inputs,
                         ninputs);
    return WF_OK;
}

/* The output of a generator: params' dtype and shape. */
static wf_status infer_generated(const wf_random_params *p, const char *op, wf_out_desc *out)
{
    wf_status st = wf__check_shape(op, p->shape, p->ndim);
    if (st != WF_OK)
        return st;
    out->dtype = p->dtype;
    out->ndim = p->ndim;
    wf__shape_copy(out->shape, p->shape, p->ndim);
    return WF_OK;
}

static wf_status infer_uniform(const void *params, const wf_desc *inputs, int ninputs,
                               wf_out_desc *out)
{
    (void)inputs;
    const wf_random_params *p = params;
    const char *op = "wf_random_uniform";
    wf_status st = expect(p, WF_RANDOM_UNIFORM, op, ninputs, 0);
    if (st != WF_OK)
        return st;
    if (!wf__dtype_is_float(p->dtype))
        return wf__error(WF_ERR_DTYPE, "%s: dtype %s is not a float type", op,
                         wf_dtype_name(p->dtype));
    if (!(isfinite(p->a) && isfinite(p->b) && p->a < p->b && p->lo <= p->hi))
        return wf__error(WF_ERR_INVALID_ARGUMENT, "%s: bad bounds [%g, %g)", op, p->a, p->b);
    return infer_generated(p, op, out);
}

static wf_status infer_normal(const void *params, const wf_desc *inputs, int ninputs,
                              wf_out_desc *out)
{
    (void)inputs;
    const wf_random_params *p = params;
    const char *op = "wf_random_normal";
    wf_status st = expect(p, WF_RANDOM_NORMAL, op, ninputs, 0);
    if (st != WF_OK)
        return st;
    if (!wf__dtype_is_float(p->dtype))
        return wf__error(WF_ERR_DTYPE, "%s: dtype %s is not a float type", op,
                         wf_dtype_name(p->dtype));
    if (!(isfinite(p->a) && isfinite(p->b) && p->b >= 0))
        return wf__error(WF_ERR_INVALID_ARGUMENT, "%s: bad loc %g or scale %g", op, p->a, p->b);
    return infer_generated(p, op, out);
}

static wf_status infer_randint(const void *params, const wf_desc *inputs, int ninputs,
                               wf_out_desc *out)
{
    (void)inputs;
    const wf_random_params *p = params;
    const char *op = "wf_random_randint";
    wf_status st = expect(p, WF_RANDOM_RANDINT, op, ninputs, 0);
    if (st != WF_OK)
        return st;
    if (!wf__dtype_is_integer(p->dtype))
        return wf__error(WF_ERR_DTYPE, "%s: dtype %s is not an integer type", op,
                         wf_dtype_name(p->dtype));
    if (p->ihigh <= p->ilow)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "%s: high %lld <= low %lld", op,
                         (long long)p->ihigh, (long long)p->ilow);
    return infer_generated(p, op, out);
}

static wf_status infer_bernoulli(const void *params, const wf_desc *inputs, int ninputs,
                                 wf_out_desc *out)
{
    const wf_random_params *p = params;
    const char *op = "wf_random_bernoulli";
    wf_status st = expect(p, WF_RANDOM_BERNOULLI, op, ninputs, 1);
    if (st != WF_OK)
        return st;
    const wf_desc *prob = &inputs[0];
    if (prob->dtype != WF_DTYPE_F32 && prob->dtype != WF_DTYPE_F64)
        return wf__error(WF_ERR_DTYPE, "%s: p has dtype %s (kernel takes float32/float64)",
                         op, wf_dtype_name(prob->dtype));
    out->dtype = WF_DTYPE_BOOL;
    out->ndim = prob->ndim;
    wf__shape_copy(out->shape, prob->shape, prob->ndim);
    return WF_OK;
}

static wf_status infer_categorical(const void *params, const wf_desc *inputs, int ninputs,
                                   wf_out_desc *out)
{
    const wf_random_params *p = params;
    const char *op = "wf_random_categorical";
    wf_status st = expect(p, WF_RANDOM_CATEGORICAL, op, ninputs, 1);
    if (st != WF_OK)
        return st;
    const wf_desc *logits = &inputs[0];
    if (logits->dtype != WF_DTYPE_F32 && logits->dtype != WF_DTYPE_F64)
        return wf__error(WF_ERR_DTYPE,
                         "%s: logits have dtype %s (kernel takes float32/float64)", op,
                         wf_dtype_name(logits->dtype));
    if (p->axis < 0 || p->axis >= logits->ndim)
        return wf__error(WF_ERR_AXIS, "%s: axis %d out of range for %d dims", op, p->axis,
                         logits->ndim);
    if (logits->shape[p->axis] == 0)
        return wf__error(WF_ERR_SHAPE, "%s: axis %d has size 0 (nothing to sample)", op,
                         p->axis);
    if (logits->shape[p->axis] > INT32_MAX)
        return wf__error(WF_ERR_SHAPE, "%s: axis %d has %lld classes (int32 indices)", op,
                         p->axis, (long long)logits->shape[p->axis]);
    out->dtype = WF_DTYPE_I32;
    out->ndim = logits->ndim - 1;
    for (int d = 0, e = 0; d < logits->ndim; d++)
        if (d != p->axis)
            out->shape[e++] = logits->shape[d];
    return WF_OK;
}

const wf_prim_def wf__prim_random_uniform = {
    .name = "random_uniform",
    .flags = 0,
    .params_size = sizeof(wf_random_params),
    .infer = infer_uniform,
    .kernels = &(wf_kernel_slots){{0}},
};

const wf_prim_def wf__prim_random_normal = {
    .name = "random_normal",
    .flags = 0,
    .params_size = sizeof(wf_random_params),
    .infer = infer_normal,
    .kernels = &(wf_kernel_slots){{0}},
};

const wf_prim_def wf__prim_random_randint = {
    .name = "random_randint",
    .flags = 0,
    .params_size = sizeof(wf_random_params),
    .infer = infer_randint,
    .kernels = &(wf_kernel_slots){{0}},
};

const wf_prim_def wf__prim_random_bernoulli = {
    .name = "random_bernoulli",
    .flags = 0, /* element i also depends on i (its counter): not fusable */
    .params_size = sizeof(wf_random_params),
    .infer = infer_bernoulli,
    .kernels = &(wf_kernel_slots){{0}},
};

const wf_prim_def wf__prim_random_categorical = {
    .name = "random_categorical",
    .flags = 0,
    .params_size = sizeof(wf_random_params),
    .infer = infer_categorical,
    .kernels = &(wf_kernel_slots){{0}},
};

const wf_prim_def *wf__random_prim_of_kind(int kind)
{
    switch (kind) {
    case WF_RANDOM_UNIFORM: return &wf__prim_random_uniform;
    case WF_RANDOM_NORMAL: return &wf__prim_random_normal;
    case WF_RANDOM_RANDINT: return &wf__prim_random_randint;
    case WF_RANDOM_BERNOULLI: return &wf__prim_random_bernoulli;
    case WF_RANDOM_CATEGORICAL: return &wf__prim_random_categorical;
    default: return NULL;
    }
}

/* The key (an int64 scalar), then what the primitive of p->kind takes. */
static wf_status infer_keyed(const void *params, const wf_desc *inputs, int ninputs,
                             wf_out_desc *out)
{
    const wf_random_params *p = params;
    const wf_prim_def *base = wf__random_prim_of_kind(p->kind);
    if (!base)
        return wf__error(WF_ERR_INTERNAL, "random_keyed: params of kind %d", p->kind);
    if (ninputs < 1 || inputs[0].dtype != WF_DTYPE_I64 || inputs[0].ndim != 0)
        return wf__error(WF_ERR_INTERNAL, "random_keyed: the first input must be an int64 key");
    return base->infer(params, inputs + 1, ninputs - 1, out);
}

const wf_prim_def wf__prim_random_keyed = {
    .name = "random_keyed",
    .flags = 0,
    .params_size = sizeof(wf_random_params),
    .infer = infer_keyed,
    .kernels = &(wf_kernel_slots){{0}},
};
