/* Quantization primitives: shape and dtype inference (see prim/quantized.h). */
#include "prim/quantized.h"

#include "core/dtype.h"
#include "core/error.h"
#include "prim/prims.h"

wf_status wf__quant_check_params(const char *op, int group_size, int bits)
{
    if (group_size != 32 && group_size != 64 && group_size != 128)
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "%s: group size %d is not supported (32, 64 or 128)", op, group_size);
    if (bits < 2 || bits > 8 || bits == 7)
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "%s: %d bits are not supported (2, 3, 4, 5, 6 or 8)", op, bits);
    return WF_OK;
}

static bool quant_float(wf_dtype d)
{
    return d == WF_DTYPE_F16 || d == WF_DTYPE_BF16 || d == WF_DTYPE_F32;
}

static wf_status infer_quantize(const void *params, const wf_desc *in, int ninputs,
                                wf_out_desc *out)
{
    const wf_quant_params *p = params;
    const char *op = "wf_quantize";
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "%s: expected 1 input, got %d", op, ninputs);
    if (wf__quant_check_params(op, p->group_size, p->bits) != WF_OK)
        return wf_last_error();
    if (!quant_float(in->dtype))
        return wf__error(WF_ERR_DTYPE, "%s: cannot quantize %s (float16, bfloat16, float32)", op,
                         wf_dtype_name(in->dtype));
    if (in->ndim < 2)
        return wf__error(WF_ERR_SHAPE, "%s: the matrix must have at least 2 dimensions, got %d",
                         op, in->ndim);
    const int64_t k = in->shape[in->ndim - 1];
    if (k % p->group_size != 0)
        return wf__error(WF_ERR_SHAPE,
                         "%s: the last dimension (%lld) is not a multiple of the group size %d",
                         op, (long long)k, p->group_size);
    wf__shape_copy(out->shape, in->shape, in->ndim);
    out->ndim = in->ndim;
    if (p->output == WF_QUANTIZE_CODES) {
        out->shape[in->ndim - 1] = k * p->bits / 32;
        out->dtype = WF_DTYPE_U32;
    } else {
        out->shape[in->ndim - 1] = k / p->group_size;
        out->dtype = in->dtype;
    }
    return WF_OK;
}

/* Checks codes against scales and biases; sets *k to the unpacked length
 * of the last axis. */
static wf_status check_quantized(const char *op, const wf_quant_params *p, const wf_desc *codes,
                                 const wf_desc *scales, const wf_desc *biases, int64_t *k)
{
    char a[96], b[96];
    if (wf__quant_check_params(op, p->group_size, p->bits) != WF_OK)
        return wf_last_error();
    if (codes->dtype != WF_DTYPE_U32)
        return wf__error(WF_ERR_DTYPE, "%s: the quantized matrix must be uint32, got %s", op,
                         wf_dtype_name(codes->dtype));
    if (!quant_float(scales->dtype) || scales->dtype != biases->dtype)
        return wf__error(WF_ERR_DTYPE, "%s: scales (%s) and biases (%s) must share a float dtype",
                         op, wf_dtype_name(scales->dtype), wf_dtype_name(biases->dtype));
    if (codes->ndim < 2 || codes->ndim != scales->ndim ||
        !wf__shape_equal(scales->shape, scales->ndim, biases->shape, biases->ndim) ||
        !wf__shape_equal(codes->shape, codes->ndim - 1, scales->shape, scales->ndim - 1))
        return wf__error(WF_ERR_SHAPE,
                         "%s: scales and biases %s do not match the quantized matrix %s", op,
                         wf__shape_str(scales->shape, scales->ndim, a, sizeof a),
                         wf__shape_str(codes->shape, codes->ndim, b, sizeof b));
    *k = codes->shape[codes->ndim - 1] * 32 / p->bits;
    if (*k != scales->shape[scales->ndim - 1] * p->group_size)
        return wf__error(WF_ERR_SHAPE,
                         "%s: scales %s do not fit the quantized matrix %s with group_size=%d "
                         "and bits=%d",
                         op, wf__shape_str(scales->shape, scales->ndim, a, sizeof a),
                         wf__shape_str(codes->shape, codes->ndim, b, sizeof b), p->group_size,
                         p->bits);
    return WF_OK;
}

static wf_status infer_dequantize(const void *params, const wf_desc *in, int ninputs,
                                  wf_out_desc *out)
{
    const wf_quant_params *p = params;
    int64_t k;
    if (ninputs != 3)
        return wf__error(WF_ERR_INTERNAL, "wf_dequantize: expected 3 inputs, got %d", ninputs);
    if (check_quantized("wf_dequantize", p, &in[0], &in[1], &in[2], &k) != WF_OK)
        return wf_last_error();
    wf__shape_copy(out->shape, in[0].shape, in[0].ndim);
    out->shape[in[0].ndim - 1] = k;
    out->ndim = in[0].ndim;
    out->dtype = in[1].dtype;
    return WF_OK;
}

static wf_status infer_quantized_matmul(const void *params, const wf_desc *in, int ninputs,
                                        wf_out_desc *out)
{
    const wf_quant_params *p = params;
    const char *op = "wf_quantized_matmul";
    char a[96], b[96];
    int64_t k;
    if (ninputs != 4)
        return wf__error(WF_ERR_INTERNAL, "%s: expected 4 inputs, got %d", op, ninputs);
    const wf_desc *x = &in[0], *w = &in[1];
    if (check_quantized(op, p, w, &in[2], &in[3], &k) != WF_OK)
        return wf_last_error();
    if (x->dtype != WF_DTYPE_F32 || in[2].dtype != WF_DTYPE_F32)
        return wf__error(WF_ERR_INTERNAL, "%s: operands must be float32", op);
    const int64_t rows = w->shape[w->ndim - 2];
    const int64_t inner = p->transpose ? k : rows, outer = p->transpose ? rows : k;
    if (x->ndim < 1 || x->shape[x->ndim - 1] != inner)
        return wf__error(WF_ERR_SHAPE,
                         "%s: last dimension of x %s does not match the dequantized matrix "
                         "(%lld, %lld) of %s with group_size=%d, bits=%d and transpose=%s",
                         op, wf__shape_str(x->shape, x->ndim, a, sizeof a), (long long)inner,
                         (long long)outer, wf__shape_str(w->shape, w->ndim, b, sizeof b),
                         p->group_size, p->bits, p->transpose ? "true" : "false");
    if (w->ndim > 2 && (x->ndim != w->ndim ||
                        !wf__shape_equal(x->shape, x->ndim - 2, w->shape, w->ndim - 2)))
        return wf__error(WF_ERR_INTERNAL, "%s: batch shapes %s and %s differ", op,
                         wf__shape_str(x->shape, x->ndim, a, sizeof a),
                         wf__shape_str(w->shape, w->ndim, b, sizeof b));
    wf__shape_copy(out->shape, x->shape, x->ndim);
    out->shape[x->ndim - 1] = outer;
    out->ndim = x->ndim;
    out->dtype = WF_DTYPE_F32;
    return WF_OK;
}

static wf_status infer_gather_qmm(const void *params, const wf_desc *in, int ninputs,
                                  wf_out_desc *out)
{
    const wf_quant_params *p = params;
    const char *op = "wf_gather_qmm";
    int64_t k;
    if (ninputs != 6)
        return wf__error(WF_ERR_INTERNAL, "%s: expected 6 inputs, got %d", op, ninputs);
    const wf_desc *x = &in[0], *w = &in[1], *lhs = &in[4], *rhs = &in[5];
    if (check_quantized(op, p, w, &in[2], &in[3], &k) != WF_OK)
        return wf_last_error();
    if (x->ndim != 3 || w->ndim != 3 || lhs->ndim != 1 || rhs->ndim != 1 ||
        lhs->shape[0] != rhs->shape[0] || x->dtype != WF_DTYPE_F32 || in[2].dtype != WF_DTYPE_F32 ||
        lhs->dtype != WF_DTYPE_I32 || rhs->dtype != WF_DTYPE_I32)
        return wf__error(WF_ERR_INTERNAL, "%s: operands not in the primitive's form", op);
    const int64_t rows = w->shape[1];
    const int64_t inner = p->transpose ? k : rows, outer = p->transpose ? rows : k;
    if (x->shape[2] != inner)
        return wf__error(WF_ERR_SHAPE,
                         "%s: last dimension of x (%lld) does not match the dequantized matrix "
                         "(%lld, %lld) with group_size=%d, bits=%d and transpose=%s",
                         op, (long long)x->shape[2], (long long)inner, (long long)outer,
                         p->group_size, p->bits, p->transpose ? "true" : "false");
    out->shape[0] = lhs->shape[0];
    out->shape[1] = x->shape[1];
    out->shape[2] = outer;
    out->ndim = 3;
    out->dtype = WF_DTYPE_F32;
    return WF_OK;
}

const wf_prim_def wf__prim_gather_qmm = {
    .name = "gather_qmm",
    .params_size = sizeof(wf_quant_params),
    .infer = infer_gather_qmm,
    .kernels = &(wf_kernel_slots){{0}},
};

const wf_prim_def wf__prim_quantize = {
    .name = "quantize",
    .params_size = sizeof(wf_quant_params),
    .infer = infer_quantize,
    .kernels = &(wf_kernel_slots){{0}},
};

const wf_prim_def wf__prim_dequantize = {
    .name = "dequantize",
    .params_size = sizeof(wf_quant_params),
    .infer = infer_dequantize,
    .kernels = &(wf_kernel_slots){{0}},
};

const wf_prim_def wf__prim_quantized_matmul = {
    .name = "quantized_matmul",
    .params_size = sizeof(wf_quant_params),
    .infer = infer_quantized_matmul,
    .kernels = &(wf_kernel_slots){{0}},
};
