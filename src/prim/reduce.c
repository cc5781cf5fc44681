/* Reduction primitives: sum, prod, max, min, all, any, mean, var, std,
 * logsumexp; argmax, argmin; softmax; cumsum, cumprod. */
#include "prim/reduce.h"

#include "core/dtype.h"
#include "core/error.h"
#include "prim/prims.h"

/* MLX's: integers of up to 4 bytes sum into 32 bits of their signedness,
 * 8-byte ones keep their type, bool sums into int32. */
wf_dtype wf__sum_dtype(wf_dtype in)
{
    if (in == WF_DTYPE_BOOL)
        return WF_DTYPE_I32;
    if (wf__dtype_is_signed_int(in))
        return in == WF_DTYPE_I64 ? WF_DTYPE_I64 : WF_DTYPE_I32;
    if (wf__dtype_is_unsigned_int(in))
        return in == WF_DTYPE_U64 ? WF_DTYPE_U64 : WF_DTYPE_U32;
    return in;
}

/* cumsum / cumprod keep the dtype (MLX), except that bool gives int32. */
static wf_dtype scan_dtype(wf_dtype in) { return in == WF_DTYPE_BOOL ? WF_DTYPE_I32 : in; }

static wf_status infer_sum(const void *params, const wf_desc *inputs, int ninputs,
                           wf_out_desc *out)
{
    const wf_sum_params *p = params;
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "sum: expected 1 input, got %d", ninputs);
    const wf_desc *a = &inputs[0];
    if (wf__reject_complex("wf_sum", a->dtype) != WF_OK)
        return wf_last_error();
    if (a->ndim < 64 && (p->axes >> a->ndim) != 0)
        return wf__error(WF_ERR_AXIS, "wf_sum: axis mask 0x%llx out of range for ndim %d",
                         (unsigned long long)p->axes, a->ndim);
    int n = 0;
    for (int d = 0; d < a->ndim; d++) {
        if ((p->axes >> d) & 1u) {
            if (p->keepdims)
                out->shape[n++] = 1;
        } else {
            out->shape[n++] = a->shape[d];
        }
    }
    out->ndim = n;
    out->dtype = wf__sum_dtype(a->dtype);
    return WF_OK;
}

const wf_prim_def wf__prim_sum = {
    .name = "sum",
    .flags = 0,
    .params_size = sizeof(wf_sum_params),
    .infer = infer_sum,
    .kernels = &(wf_kernel_slots){{0}},
};

/* ---------------------------------------------------------------- other reductions */

wf_dtype wf__reduce_out_dtype(wf_reduce_op op, wf_dtype in)
{
    switch (op) {
    case WF_REDUCE_SUM:
    case WF_REDUCE_PROD: return wf__sum_dtype(in);
    case WF_REDUCE_MAX:
    case WF_REDUCE_MIN: return in;
    case WF_REDUCE_ALL:
    case WF_REDUCE_ANY: return WF_DTYPE_BOOL;
    default: return wf__dtype_is_float(in) ? in : WF_DTYPE_F32;
    }
}

static const char *const reduce_op_names[WF_REDUCE_OP_COUNT] = {
    "wf_sum", "wf_prod", "wf_max", "wf_min", "wf_all",
    "wf_any", "wf_mean", "wf_var", "wf_std", "wf_logsumexp",
};

/* Output shape of a reduction over the axes in `mask` (checked). */
static wf_status reduced_shape(const char *op, uint64_t mask, bool keepdims, const wf_desc *a,
                               wf_out_desc *out)
{
    if (a->ndim < 64 && (mask >> a->ndim) != 0)
        return wf__error(WF_ERR_AXIS, "%s: axis mask 0x%llx out of range for ndim %d", op,
                         (unsigned long long)mask, a->ndim);
    int n = 0;
    for (int d = 0; d < a->ndim; d++) {
        if ((mask >> d) & 1u) {
            if (keepdims)
                out->shape[n++] = 1;
        } else {
            out->shape[n++] = a->shape[d];
        }
    }
    out->ndim = n;
    return WF_OK;
}

static wf_status infer_reduce(const void *params, const wf_desc *inputs, int ninputs,
                              wf_out_desc *out)
{
    const wf_reduce_params *p = params;
    if (p->op < 0 || p->op >= WF_REDUCE_OP_COUNT)
        return wf__error(WF_ERR_INTERNAL, "reduce: bad op %d", p->op);
    const char *op = reduce_op_names[p->op];
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "%s: expected 1 input, got %d", op, ninputs);
    const wf_desc *a = &inputs[0];
    if (wf__reject_complex(op, a->dtype) != WF_OK)
        return wf_last_error();
    wf_status st = reduced_shape(op, p->axes, p->keepdims, a, out);
    if (st != WF_OK)
        return st;
    if (p->op == WF_REDUCE_MAX || p->op == WF_REDUCE_MIN) {
        int64_t out_size = 1, n = 1;
        for (int d = 0; d < a->ndim; d++) {
            if ((p->axes >> d) & 1u)
                n *= a->shape[d];
            else
                out_size *= a->shape[d];
        }
        if (n == 0 && out_size > 0) {
            char buf[256];
            return wf__error(WF_ERR_SHAPE,
                             "%s: zero-size reduction of shape %s (no identity for %s)", op,
                             wf__shape_str(a->shape, a->ndim, buf, sizeof buf), op + 3);
        }
    }
    out->dtype = wf__reduce_out_dtype((wf_reduce_op)p->op, a->dtype);
    return WF_OK;
}

#define REDUCE_PRIM(VAR, NAME)                                                           \
    const wf_prim_def VAR = {                                                            \
        .name = NAME,                                                                    \
        .flags = 0,                                                                      \
        .params_size = sizeof(wf_reduce_params),                                         \
        .infer = infer_reduce,                                                           \
        .kernels = &(wf_kernel_slots){{0}},                                              \
    };
REDUCE_PRIM(wf__prim_prod, "prod")
REDUCE_PRIM(wf__prim_max, "max")
REDUCE_PRIM(wf__prim_min, "min")
REDUCE_PRIM(wf__prim_all, "all")
REDUCE_PRIM(wf__prim_any, "any")
REDUCE_PRIM(wf__prim_mean, "mean")
REDUCE_PRIM(wf__prim_var, "var")
REDUCE_PRIM(wf__prim_std, "std")
REDUCE_PRIM(wf__prim_logsumexp, "logsumexp")

const wf_prim_def *wf__reduce_prim(wf_reduce_op op)
{
    switch (op) {
    case WF_REDUCE_PROD: return &wf__prim_prod;
    case WF_REDUCE_MAX: return &wf__prim_max;
    case WF_REDUCE_MIN: return &wf__prim_min;
    case WF_REDUCE_ALL: return &wf__prim_all;
    case WF_REDUCE_ANY: return &wf__prim_any;
    case WF_REDUCE_MEAN: return &wf__prim_mean;
    case WF_REDUCE_VAR: return &wf__prim_var;
    case WF_REDUCE_STD: return &wf__prim_std;
    case WF_REDUCE_LOGSUMEXP: return &wf__prim_logsumexp;
    default: return NULL;
    }
}

/* ---------------------------------------------------------------- argmax / argmin */

static wf_status infer_arg_reduce(const void *params, const wf_desc *inputs, int ninputs,
                                  wf_out_desc *out)
{
    const wf_arg_reduce_params *p = params;
    const char *op = p->op == 1 ? "wf_argmin" : "wf_argmax";
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "%s: expected 1 input, got %d", op, ninputs);
    const wf_desc *a = &inputs[0];
    if (wf__reject_complex(op, a->dtype) != WF_OK)
        return wf_last_error();
    if (p->axis < 0 || p->axis >= a->ndim)
        return wf__error(WF_ERR_AXIS, "%s: axis %d out of range for ndim %d", op, p->axis,
                         a->ndim);
    const int64_t len = a->shape[p->axis];
    int64_t out_size = 1;
    int n = 0;
    for (int d = 0; d < a->ndim; d++) {
        if (d == p->axis) {
            if (p->keepdims)
                out->shape[n++] = 1;
        } else {
            out->shape[n++] = a->shape[d];
            out_size *= a->shape[d];
        }
    }
    char buf[256];
    if (len == 0 && out_size > 0)
        return wf__error(WF_ERR_SHAPE, "%s: zero-size reduction along axis %d of shape %s", op,
                         p->axis, wf__shape_str(a->shape, a->ndim, buf, sizeof buf));
    /* The result is uint32 (MLX), kept below 2^31 so that its bits are also
     * the int32 a caller written before the change reads. */
    if (len > (int64_t)INT32_MAX + 1)
        return wf__error(WF_ERR_SHAPE,
                         "%s: axis %d has %lld elements, more than an int32 index holds", op,
                         p->axis, (long long)len);
    out->ndim = n;
    out->dtype = WF_DTYPE_U32;
    return WF_OK;
}

const wf_prim_def wf__prim_argmax = {
    .name = "argmax",
    .flags = 0,
    .params_size = sizeof(wf_arg_reduce_params),
    .infer = infer_arg_reduce,
    .kernels = &(wf_kernel_slots){{0}},
};

const wf_prim_def wf__prim_argmin = {
    .name = "argmin",
    .flags = 0,
    .params_size = sizeof(wf_arg_reduce_params),
    .infer = infer_arg_reduce,
    .kernels = &(wf_kernel_slots){{0}},
};

/* ---------------------------------------------------------------- softmax */

static wf_status infer_softmax(const void *params, const wf_desc *inputs, int ninputs,
                               wf_out_desc *out)
{
    const wf_softmax_params *p = params;
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "wf_softmax: expected 1 input, got %d", ninputs);
    const wf_desc *a = &inputs[0];
    if (wf__reject_complex("wf_softmax", a->dtype) != WF_OK)
        return wf_last_error();
    if (a->ndim < 64 && (p->axes >> a->ndim) != 0)
        return wf__error(WF_ERR_AXIS, "wf_softmax: axis mask 0x%llx out of range for ndim %d",
                         (unsigned long long)p->axes, a->ndim);
    out->ndim = a->ndim;
    wf__shape_copy(out->shape, a->shape, a->ndim);
    out->dtype = wf__reduce_out_dtype(WF_REDUCE_LOGSUMEXP, a->dtype);
    return WF_OK;
}

const wf_prim_def wf__prim_softmax = {
    .name = "softmax",
    .flags = 0,
    .params_size = sizeof(wf_softmax_params),
    .infer = infer_softmax,
    .kernels = &(wf_kernel_slots){{0}},
};

/* ---------------------------------------------------------------- cumsum / cumprod */

static wf_status infer_scan(const void *params, const wf_desc *inputs, int ninputs,
                            wf_out_desc *out)
{
    const wf_scan_params *p = params;
    const char *op = p->op == 1 ? "wf_cumprod" : "wf_cumsum";
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "%s: expected 1 input, got %d", op, ninputs);
    const wf_desc *a = &inputs[0]; /* every dtype, complex64 included */
    if (p->axis < 0 || p->axis >= a->ndim)
        return wf__error(WF_ERR_AXIS, "%s: axis %d out of range for ndim %d", op, p->axis,
                         a->ndim);
    out->ndim = a->ndim;
    wf__shape_copy(out->shape, a->shape, a->ndim);
    out->dtype = scan_dtype(a->dtype);
    return WF_OK;
}

const wf_prim_def wf__prim_cumsum = {
    .name = "cumsum",
    .flags = 0,
    .params_size = sizeof(wf_scan_params),
    .infer = infer_scan,
    .kernels = &(wf_kernel_slots){{0}},
};

const wf_prim_def wf__prim_cumprod = {
    .name = "cumprod",
    .flags = 0,
    .params_size = sizeof(wf_scan_params),
    .infer = infer_scan,
    .kernels = &(wf_kernel_slots){{0}},
};
