/* Element-wise primitives: astype, exp, and the binary and ternary ops
 * (add, multiply, and those of prim/binary.h). */
#include "core/dtype.h"
#include "core/error.h"
#include "prim/binary.h"
#include "prim/prims.h"

static wf_status expect_inputs(const char *name, int ninputs, int expected)
{
    if (ninputs != expected)
        return wf__error(WF_ERR_INTERNAL, "%s: expected %d inputs, got %d", name, expected,
                         ninputs);
    return WF_OK;
}

static void same_shape(const wf_desc *a, wf_out_desc *out)
{
    out->ndim = a->ndim;
    wf__shape_copy(out->shape, a->shape, a->ndim);
}

static wf_status infer_astype(const void *params, const wf_desc *inputs, int ninputs,
                              wf_out_desc *out)
{
    const wf_astype_params *p = params;
    wf_status st = expect_inputs("astype", ninputs, 1);
    if (st != WF_OK)
        return st;
    if (!wf__dtype_valid(p->dtype))
        return wf__error(WF_ERR_DTYPE, "wf_astype: invalid dtype %d", (int)p->dtype);
    out->dtype = p->dtype;
    same_shape(&inputs[0], out);
    return WF_OK;
}

/* In place between dtypes of one size (the runtime donates only then): an
 * astype node always changes the dtype, so its kernel converts through the
 * iterator, which stages aliased rows. */
const wf_prim_def wf__prim_astype = {
    .name = "astype",
    .flags = WF_PRIM_ELEMENTWISE | WF_PRIM_INPLACE | WF_PRIM_INPLACE_ANY_LAYOUT,
    .params_size = sizeof(wf_astype_params),
    .infer = infer_astype,
    .kernels = &(wf_kernel_slots){{0}},
};

/* Binary and ternary element-wise primitives: the kernels take inputs of
 * one shape and one compute dtype; the op constructors insert the casts and
 * broadcasts. `allowed` is a mask of accepted input dtypes (bit = dtype);
 * `to_bool` gives a bool output (comparisons, logical ops). */
#define DT(d) (1u << (d))
/* Every real dtype; DTYPES_NUMBER adds complex64 (arithmetic, equality). */
#define DTYPES_ALL (((1u << WF_DTYPE_COUNT) - 1u) & ~DT(WF_DTYPE_C64))
#define DTYPES_NUMBER ((1u << WF_DTYPE_COUNT) - 1u)
#define DTYPES_NO_BOOL (DTYPES_ALL & ~DT(WF_DTYPE_BOOL))
#define DTYPES_INT_BOOL (DTYPES_ALL & ~DTYPES_FLOAT)
#define DTYPES_FLOAT                                                                    \
    (DT(WF_DTYPE_F16) | DT(WF_DTYPE_BF16) | DT(WF_DTYPE_F32) | DT(WF_DTYPE_F64))
#define DTYPES_BOOL DT(WF_DTYPE_BOOL)

static wf_status check_same_shapes(const char *op, const wf_desc *inputs, int ninputs)
{
    for (int i = 1; i < ninputs; i++) {
        const wf_desc *a = &inputs[0], *b = &inputs[i];
        if (!wf__shape_equal(a->shape, a->ndim, b->shape, b->ndim)) {
            char sa[256], sb[256];
            return wf__error(WF_ERR_SHAPE, "%s: input shapes differ %s and %s", op,
                             wf__shape_str(a->shape, a->ndim, sa, sizeof sa),
                             wf__shape_str(b->shape, b->ndim, sb, sizeof sb));
        }
    }
    return WF_OK;
}

static wf_status infer_binary(const char *op, const wf_desc *inputs, int ninputs,
                              unsigned allowed, bool to_bool, wf_out_desc *out)
{
    wf_status st = expect_inputs(op, ninputs, 2);
    if (st != WF_OK)
        return st;
    const wf_desc *a = &inputs[0], *b = &inputs[1];
    if (a->dtype != b->dtype)
        return wf__error(WF_ERR_DTYPE, "%s: input dtypes differ (%s, %s)", op,
                         wf_dtype_name(a->dtype), wf_dtype_name(b->dtype));
    if (!wf__dtype_valid(a->dtype) || !(allowed & DT(a->dtype)))
        return wf__error(WF_ERR_DTYPE, "%s: dtype %s is not supported", op,
                         wf_dtype_name(a->dtype));
    st = check_same_shapes(op, inputs, 2);
    if (st != WF_OK)
        return st;
    out->dtype = to_bool ? WF_DTYPE_BOOL : a->dtype;
    same_shape(a, out);
    return WF_OK;
}

#define BINARY_PRIM(NAME, ALLOWED, TO_BOOL)                                             \
    static wf_status infer_##NAME(const void *params, const wf_desc *inputs,          \
                                  int ninputs, wf_out_desc *out)                        \
    {                                                                                   \
        (void)params;                                                                   \
        return infer_binary(#NAME, inputs, ninputs, ALLOWED, TO_BOOL, out);             \
    }                                                                                   \
    const wf_prim_def wf__prim_##NAME = {                                               \
        .name = #NAME,                                                                  \
        .flags = WF_PRIM_ELEMENTWISE | WF_PRIM_INPLACE | WF_PRIM_INPLACE_ANY_LAYOUT,    \
        .params_size = 0,                                                               \
        .infer = infer_##NAME,                                                          \
        .kernels = &(wf_kernel_slots){{0}},                                             \
    };

BINARY_PRIM(add, DTYPES_NUMBER, false)
BINARY_PRIM(multiply, DTYPES_NUMBER, false)
BINARY_PRIM(subtract, DTYPES_NUMBER & ~DT(WF_DTYPE_BOOL), false)
BINARY_PRIM(divide, DTYPES_FLOAT | DT(WF_DTYPE_C64), false)
BINARY_PRIM(power, DTYPES_NUMBER, false)
BINARY_PRIM(maximum, DTYPES_NUMBER, false)
BINARY_PRIM(minimum, DTYPES_NUMBER, false)
BINARY_PRIM(floor_divide, DTYPES_ALL, false)
BINARY_PRIM(remainder, DTYPES_ALL, false)
BINARY_PRIM(equal, DTYPES_NUMBER, true)
BINARY_PRIM(not_equal, DTYPES_NUMBER, true)
BINARY_PRIM(less, DTYPES_ALL, true)
BINARY_PRIM(less_equal, DTYPES_ALL, true)
BINARY_PRIM(greater, DTYPES_ALL, true)
BINARY_PRIM(greater_equal, DTYPES_ALL, true)
BINARY_PRIM(logical_and, DTYPES_BOOL, true)
BINARY_PRIM(logical_or, DTYPES_BOOL, true)
BINARY_PRIM(logaddexp, DTYPES_FLOAT, false)
BINARY_PRIM(arctan2, DTYPES_FLOAT, false)
BINARY_PRIM(bitwise_and, DTYPES_INT_BOOL, false)
BINARY_PRIM(bitwise_or, DTYPES_INT_BOOL, false)
BINARY_PRIM(bitwise_xor, DTYPES_INT_BOOL, false)
BINARY_PRIM(left_shift, DTYPES_INT_BOOL, false)
BINARY_PRIM(right_shift, DTYPES_INT_BOOL, false)

/* where(cond, a, b): cond bool, a and b of one dtype, one shape. */
static wf_status infer_where(const void *params, const wf_desc *inputs, int ninputs,
                             wf_out_desc *out)
{
    (void)params;
    wf_status st = expect_inputs("where", ninputs, 3);
    if (st != WF_OK)
        return st;
    const wf_desc *c = &inputs[0], *a = &inputs[1], *b = &inputs[2];
    if (c->dtype != WF_DTYPE_BOOL)
        return wf__error(WF_ERR_DTYPE, "where: condition dtype %s is not bool",
                         wf_dtype_name(c->dtype));
    if (a->dtype != b->dtype)
        return wf__error(WF_ERR_DTYPE, "where: input dtypes differ (%s, %s)",
                         wf_dtype_name(a->dtype), wf_dtype_name(b->dtype));
    st = check_same_shapes("where", inputs, 3);
    if (st != WF_OK)
        return st;
    out->dtype = a->dtype;
    same_shape(a, out);
    return WF_OK;
}

const wf_prim_def wf__prim_where = {
    .name = "where",
    .flags = WF_PRIM_ELEMENTWISE | WF_PRIM_INPLACE | WF_PRIM_INPLACE_ANY_LAYOUT,
    .params_size = 0,
    .infer = infer_where,
    .kernels = &(wf_kernel_slots){{0}},
};

/* clip(a, low, high): three inputs of one dtype and shape. */
static wf_status infer_clip(const void *params, const wf_desc *inputs, int ninputs,
                            wf_out_desc *out)
{
    (void)params;
    wf_status st = expect_inputs("clip", ninputs, 3);
    if (st != WF_OK)
        return st;
    if (wf__reject_complex("clip", inputs[0].dtype) != WF_OK)
        return wf_last_error();
    for (int i = 1; i < 3; i++)
        if (inputs[i].dtype != inputs[0].dtype)
            return wf__error(WF_ERR_DTYPE, "clip: input dtypes differ (%s, %s)",
                             wf_dtype_name(inputs[0].dtype), wf_dtype_name(inputs[i].dtype));
    st = check_same_shapes("clip", inputs, 3);
    if (st != WF_OK)
        return st;
    out->dtype = inputs[0].dtype;
    same_shape(&inputs[0], out);
    return WF_OK;
}

const wf_prim_def wf__prim_clip = {
    .name = "clip",
    .flags = WF_PRIM_ELEMENTWISE | WF_PRIM_INPLACE | WF_PRIM_INPLACE_ANY_LAYOUT,
    .params_size = 0,
    .infer = infer_clip,
    .kernels = &(wf_kernel_slots){{0}},
};

static wf_status infer_exp(const void *params, const wf_desc *inputs, int ninputs, wf_out_desc *out)
{
    (void)params;
    wf_status st = expect_inputs("exp", ninputs, 1);
    if (st != WF_OK)
        return st;
    if (!wf__dtype_is_inexact(inputs[0].dtype))
        return wf__error(WF_ERR_DTYPE, "exp: input dtype %s is not a float or complex type",
                         wf_dtype_name(inputs[0].dtype));
    out->dtype = inputs[0].dtype;
    same_shape(&inputs[0], out);
    return WF_OK;
}

const wf_prim_def wf__prim_exp = {
    .name = "exp",
    .flags = WF_PRIM_ELEMENTWISE | WF_PRIM_INPLACE | WF_PRIM_INPLACE_ANY_LAYOUT,
    .params_size = 0,
    .infer = infer_exp,
    .kernels = &(wf_kernel_slots){{0}},
};

/* ---------------------------------------------------------------- complex64 parts */

/* complex(re, im): two float32 inputs of one shape, complex64 out. */
static wf_status infer_complex(const void *params, const wf_desc *inputs, int ninputs,
                               wf_out_desc *out)
{
    (void)params;
    wf_status st = expect_inputs("complex", ninputs, 2);
    if (st != WF_OK)
        return st;
    if (inputs[0].dtype != WF_DTYPE_F32 || inputs[1].dtype != WF_DTYPE_F32)
        return wf__error(WF_ERR_DTYPE, "complex: inputs %s, %s are not float32",
                         wf_dtype_name(inputs[0].dtype), wf_dtype_name(inputs[1].dtype));
    st = check_same_shapes("complex", inputs, 2);
    if (st != WF_OK)
        return st;
    out->dtype = WF_DTYPE_C64;
    same_shape(&inputs[0], out);
    return WF_OK;
}

const wf_prim_def wf__prim_complex = {
    .name = "complex",
    .flags = WF_PRIM_ELEMENTWISE,
    .params_size = 0,
    .infer = infer_complex,
    .kernels = &(wf_kernel_slots){{0}},
};

/* real, imag (complex64 -> float32) and conjugate (complex64 -> complex64). */
static wf_status infer_part(const char *name, const wf_desc *inputs, int ninputs, wf_dtype dt,
                            wf_out_desc *out)
{
    wf_status st = expect_inputs(name, ninputs, 1);
    if (st != WF_OK)
        return st;
    if (inputs[0].dtype != WF_DTYPE_C64)
        return wf__error(WF_ERR_DTYPE, "%s: input dtype %s is not complex64", name,
                         wf_dtype_name(inputs[0].dtype));
    out->dtype = dt;
    same_shape(&inputs[0], out);
    return WF_OK;
}

#define PART_PRIM(NAME, DT)                                                             \
    static wf_status infer_##NAME(const void *params, const wf_desc *inputs, int ninputs,\
                                  wf_out_desc *out)                                     \
    {                                                                                   \
        (void)params;                                                                   \
        return infer_part(#NAME, inputs, ninputs, DT, out);                             \
    }                                                                                   \
    const wf_prim_def wf__prim_##NAME = {                                               \
        .name = #NAME,                                                                  \
        .flags = WF_PRIM_ELEMENTWISE,                                                   \
        .params_size = 0,                                                               \
        .infer = infer_##NAME,                                                          \
        .kernels = &(wf_kernel_slots){{0}},                                             \
    };
PART_PRIM(real, WF_DTYPE_F32)
PART_PRIM(imag, WF_DTYPE_F32)
PART_PRIM(conjugate, WF_DTYPE_C64)
