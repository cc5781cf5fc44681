/* Unary element-wise primitives (see prim/unary.h). */
#include "prim/unary.h"

#include "core/dtype.h"
#include "core/error.h"
#include "prim/prims.h"

static wf_status infer_unary(const char *name, enum wf_unary_kind kind, const wf_desc *inputs,
                             int ninputs, wf_out_desc *out)
{
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "%s: expected 1 input, got %d", name, ninputs);
    const wf_desc *a = &inputs[0];
    const bool complex_ok = kind == WF_UNARY_ANY || kind == WF_UNARY_NUMBER ||
                            kind == WF_UNARY_MAGNITUDE || kind == WF_UNARY_FLOAT_COMPLEX;
    if (!complex_ok && wf__reject_complex(name, a->dtype) != WF_OK)
        return wf_last_error();
    switch (kind) {
    case WF_UNARY_FLOAT:
        if (!wf__dtype_is_float(a->dtype))
            return wf__error(WF_ERR_DTYPE, "%s: input dtype %s is not a float type", name,
                             wf_dtype_name(a->dtype));
        out->dtype = a->dtype;
        break;
    case WF_UNARY_FLOAT_COMPLEX:
        if (!wf__dtype_is_inexact(a->dtype))
            return wf__error(WF_ERR_DTYPE, "%s: input dtype %s is not a float or complex type",
                             name, wf_dtype_name(a->dtype));
        out->dtype = a->dtype;
        break;
    case WF_UNARY_NUMBER:
        if (a->dtype == WF_DTYPE_BOOL)
            return wf__error(WF_ERR_DTYPE, "%s: input dtype bool is not supported", name);
        out->dtype = a->dtype;
        break;
    case WF_UNARY_ANY: out->dtype = a->dtype; break;
    case WF_UNARY_MAGNITUDE: out->dtype = a->dtype == WF_DTYPE_C64 ? WF_DTYPE_F32 : a->dtype; break;
    case WF_UNARY_BOOL: out->dtype = WF_DTYPE_BOOL; break;
    }
    out->ndim = a->ndim;
    wf__shape_copy(out->shape, a->shape, a->ndim);
    return WF_OK;
}

#define WF_UNARY_DEFINE_PRIM(pname, kind, extra_flags)                                     \
    static wf_status infer_##pname(const void *params, const wf_desc *inputs, int ninputs, \
                                   wf_out_desc *out)                                      \
    {                                                                                      \
        (void)params;                                                                      \
        return infer_unary(#pname, kind, inputs, ninputs, out);                            \
    }                                                                                      \
    const wf_prim_def wf__prim_##pname = {                                                 \
        .name = #pname,                                                                    \
        .flags = WF_PRIM_ELEMENTWISE | (extra_flags),                                      \
        .params_size = 0,                                                                  \
        .infer = infer_##pname,                                                            \
        .kernels = &(wf_kernel_slots){{0}},                                                \
    };
WF_UNARY_PRIMS(WF_UNARY_DEFINE_PRIM)
