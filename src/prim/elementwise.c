/* Element-wise primitives: astype, add, multiply, exp. */
#include "backend/cpu/cpu.h"
#include "core/dtype.h"
#include "core/error.h"
#include "prim/prims.h"

static wf_status expect_inputs(const char *name, int ninputs, int expected)
{
    if (ninputs != expected)
        return wf__error(WF_ERR_INTERNAL, "%s: expected %d inputs, got %d", name, expected,
                         ninputs);
    return WF_OK;
}

static void same_shape(const wf_array *a, int *ndim, int64_t *shape)
{
    *ndim = a->ndim;
    wf__shape_copy(shape, a->shape, a->ndim);
}

static wf_status infer_astype(const void *params, wf_array *const *inputs, int ninputs,
                              wf_dtype *dtype, int *ndim, int64_t *shape)
{
    const wf_astype_params *p = params;
    wf_status st = expect_inputs("astype", ninputs, 1);
    if (st != WF_OK)
        return st;
    if (!wf__dtype_valid(p->dtype))
        return wf__error(WF_ERR_DTYPE, "wf_astype: invalid dtype %d", (int)p->dtype);
    *dtype = p->dtype;
    same_shape(inputs[0], ndim, shape);
    return WF_OK;
}

const wf_prim_def wf__prim_astype = {
    .name = "astype",
    .flags = WF_PRIM_ELEMENTWISE,
    .params_size = sizeof(wf_astype_params),
    .infer = infer_astype,
    .cpu_kernel = wf__cpu_astype,
};

/* The kernels of add and multiply take inputs of one shape and dtype; the
 * op constructors insert the casts and broadcasts. */
static wf_status infer_binary(const char *op, wf_array *const *inputs, int ninputs,
                              wf_dtype *dtype, int *ndim, int64_t *shape)
{
    wf_status st = expect_inputs(op, ninputs, 2);
    if (st != WF_OK)
        return st;
    const wf_array *a = inputs[0], *b = inputs[1];
    if (a->dtype != b->dtype)
        return wf__error(WF_ERR_DTYPE, "%s: input dtypes differ (%s, %s)", op,
                         wf_dtype_name(a->dtype), wf_dtype_name(b->dtype));
    if (!wf__shape_equal(a->shape, a->ndim, b->shape, b->ndim)) {
        char sa[256], sb[256];
        return wf__error(WF_ERR_SHAPE, "%s: input shapes differ %s and %s", op,
                         wf__shape_str(a->shape, a->ndim, sa, sizeof sa),
                         wf__shape_str(b->shape, b->ndim, sb, sizeof sb));
    }
    *dtype = a->dtype;
    same_shape(a, ndim, shape);
    return WF_OK;
}

static wf_status infer_add(const void *params, wf_array *const *inputs, int ninputs,
                           wf_dtype *dtype, int *ndim, int64_t *shape)
{
    (void)params;
    return infer_binary("add", inputs, ninputs, dtype, ndim, shape);
}

static wf_status infer_multiply(const void *params, wf_array *const *inputs, int ninputs,
                                wf_dtype *dtype, int *ndim, int64_t *shape)
{
    (void)params;
    return infer_binary("multiply", inputs, ninputs, dtype, ndim, shape);
}

const wf_prim_def wf__prim_add = {
    .name = "add",
    .flags = WF_PRIM_ELEMENTWISE,
    .params_size = 0,
    .infer = infer_add,
    .cpu_kernel = wf__cpu_add,
};

const wf_prim_def wf__prim_multiply = {
    .name = "multiply",
    .flags = WF_PRIM_ELEMENTWISE,
    .params_size = 0,
    .infer = infer_multiply,
    .cpu_kernel = wf__cpu_multiply,
};

static wf_status infer_exp(const void *params, wf_array *const *inputs, int ninputs,
                           wf_dtype *dtype, int *ndim, int64_t *shape)
{
    (void)params;
    wf_status st = expect_inputs("exp", ninputs, 1);
    if (st != WF_OK)
        return st;
    if (!wf__dtype_is_float(inputs[0]->dtype))
        return wf__error(WF_ERR_DTYPE, "exp: input dtype %s is not a float type",
                         wf_dtype_name(inputs[0]->dtype));
    *dtype = inputs[0]->dtype;
    same_shape(inputs[0], ndim, shape);
    return WF_OK;
}

const wf_prim_def wf__prim_exp = {
    .name = "exp",
    .flags = WF_PRIM_ELEMENTWISE,
    .params_size = 0,
    .infer = infer_exp,
    .cpu_kernel = wf__cpu_exp,
};
