/* Quantization primitives: shape and dtype inference (see prim/quantized.h). */
#include "prim/quantized.h"

#include "core/dtype.h"
#include "core/error.h"
#include "prim/prims.h"

const float wf__fp4_values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

uint8_t wf__e4m3_encode(float v)
{
    const uint8_t sign = signbit(v) ? 0x80 : 0;
    const float a = fabsf(v);
    if (!(a < 464.0f)) /* also NaN */
        return sign | 0x7e;
    if (a < 0x1p-6f) /* subnormal codes: multiples of 2^-9 (code 8 is 2^-6) */
        return sign | (uint8_t)rintf(a * 512.0f);
    int ex;
    const float f = frexpf(a, &ex); /* a = f * 2^ex, f in [0.5, 1) */
    /* exponent field ex + 6; a mantissa that rounds up to 8 carries into it */
    return sign | (uint8_t)(((ex + 6) << 3) + (int)rintf(f * 16.0f - 8.0f));
}

static const char *mode_name(int mode)
{
    switch (mode) {
    case WF_QUANT_AFFINE: return "affine";
    case WF_QUANT_MXFP4: return "mxfp4";
    case WF_QUANT_MXFP8: return "mxfp8";
    case WF_QUANT_NVFP4: return "nvfp4";
    default: return NULL;
    }
}

wf_status wf__quant_check_params(const char *op, int mode, int group_size, int bits)
{
    const char *name = mode_name(mode);
    if (!name)
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "%s: unknown quantization mode %d (affine, mxfp4, mxfp8 or nvfp4)", op,
                         mode);
    if (mode != WF_QUANT_AFFINE) {
        const int want_group = mode == WF_QUANT_NVFP4 ? 16 : 32;
        const int want_bits = mode == WF_QUANT_MXFP8 ? 8 : 4;
        if (group_size != want_group || bits != want_bits)
            return wf__error(WF_ERR_INVALID_ARGUMENT,
                             "%s: %s quantization requires group size %d and %d bits, got %d "
                             "and %d",
                             op, name, want_group, want_bits, group_size, bits);
        return WF_OK;
    }
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
    if (wf__quant_check_params(op, p->mode, p->group_size, p->bits) != WF_OK)
        return wf_last_error();
    if (p->mode != WF_QUANT_AFFINE && p->output == WF_QUANTIZE_BIASES)
        return wf__error(WF_ERR_INTERNAL, "%s: no biases in a floating-point mode", op);
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
        out->dtype = p->mode == WF_QUANT_AFFINE ? in->dtype : WF_DTYPE_U8;
    }
    return WF_OK;
}

/* Checks codes against scales and biases (NULL in a floating-point mode);
 * sets *k to the unpacked length of the last axis. */
static wf_status check_quantized(const char *op, const wf_quant_params *p, const wf_desc *codes,
                                 const wf_desc *scales, const wf_desc *biases, int64_t *k)
{
    char a[96], b[96];
    if (wf__quant_check_params(op, p->mode, p->group_size, p->bits) != WF_OK)
        return wf_last_error();
    if (codes->dtype != WF_DTYPE_U32)
        return wf__error(WF_ERR_DTYPE, "%s: the quantized matrix must be uint32, got %s", op,
                         wf_dtype_name(codes->dtype));
    if (p->mode == WF_QUANT_AFFINE &&
        (!quant_float(scales->dtype) || scales->dtype != biases->dtype))
        return wf__error(WF_ERR_DTYPE, "%s: scales (%s) and biases (%s) must share a float dtype",
                         op, wf_dtype_name(scales->dtype), wf_dtype_name(biases->dtype));
    if (p->mode != WF_QUANT_AFFINE && scales->dtype != WF_DTYPE_U8)
        return wf__error(WF_ERR_DTYPE, "%s: the scales of a floating-point mode are uint8, got %s",
                         op, wf_dtype_name(scales->dtype));
    if (codes->ndim < 2 || codes->ndim != scales->ndim ||
        (biases && !wf__shape_equal(scales->shape, scales->ndim, biases->shape, biases->ndim)) ||
        !wf__shape_equal(codes->shape, codes->ndim - 1, scales->shape, scales->ndim - 1))
        return wf__error(WF_ERR_SHAPE,
                         "%s: scales (and biases) %s do not match the quantized matrix %s", op,
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

/* The biases' descriptor among a node's inputs (from `first`, the codes), or NULL. */
static const wf_desc *biases_of(const wf_quant_params *p, const wf_desc *first)
{
    return p->mode == WF_QUANT_AFFINE ? &first[2] : NULL;
}

static wf_status infer_dequantize(const void *params, const wf_desc *in, int ninputs,
                                  wf_out_desc *out)
{
    const wf_quant_params *p = params;
    int64_t k;
    if (ninputs != wf__quant_matrix_inputs(p))
        return wf__error(WF_ERR_INTERNAL, "wf_dequantize: expected %d inputs, got %d",
                         wf__quant_matrix_inputs(p), ninputs);
    if (check_quantized("wf_dequantize", p, &in[0], &in[1], biases_of(p, in), &k) != WF_OK)
        return wf_last_error();
    wf__shape_copy(out->shape, in[0].shape, in[0].ndim);
    out->shape[in[0].ndim - 1] = k;
    out->ndim = in[0].ndim;
    out->dtype = p->mode == WF_QUANT_AFFINE ? in[1].dtype : (wf_dtype)p->dtype;
    return WF_OK;
}

static wf_status infer_quantized_matmul(const void *params, const wf_desc *in, int ninputs,
                                        wf_out_desc *out)
{
    const wf_quant_params *p = params;
    const char *op = "wf_quantized_matmul";
    char a[96], b[96];
    int64_t k;
    if (ninputs != 1 + wf__quant_matrix_inputs(p))
        return wf__error(WF_ERR_INTERNAL, "%s: expected %d inputs, got %d", op,
                         1 + wf__quant_matrix_inputs(p), ninputs);
    const wf_desc *x = &in[0], *w = &in[1];
    if (check_quantized(op, p, w, &in[2], biases_of(p, w), &k) != WF_OK)
        return wf_last_error();
    if (x->dtype != WF_DTYPE_F32 || (p->mode == WF_QUANT_AFFINE && in[2].dtype != WF_DTYPE_F32))
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
    const int nq = wf__quant_matrix_inputs(p);
    if (ninputs != 3 + nq)
        return wf__error(WF_ERR_INTERNAL, "%s: expected %d inputs, got %d", op, 3 + nq, ninputs);
    const wf_desc *x = &in[0], *w = &in[1], *lhs = &in[1 + nq], *rhs = &in[2 + nq];
    if (check_quantized(op, p, w, &in[2], biases_of(p, w), &k) != WF_OK)
        return wf_last_error();
    if (x->ndim != 3 || w->ndim != 3 || lhs->ndim != 1 || rhs->ndim != 1 ||
        lhs->shape[0] != rhs->shape[0] || x->dtype != WF_DTYPE_F32 ||
        (p->mode == WF_QUANT_AFFINE && in[2].dtype != WF_DTYPE_F32) ||
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
