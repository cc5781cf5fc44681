/* Quantization primitives (weft.h's quantization section): affine quantize
 * (one node per output), dequantize and quantized_matmul. Internal.
 *
 * Codes of a row are one little-endian bit stream: element j of the row
 * occupies bits [j * bits, (j + 1) * bits) of the row's bytes, which are
 * stored as uint32 words (MLX's layout for every bit width). */
#ifndef WEFT_PRIM_QUANTIZED_H
#define WEFT_PRIM_QUANTIZED_H

#include <stdbool.h>
#include <math.h>
#include <stdint.h>

#include "core/array.h"

/* Which output of quantize a node computes. */
enum wf_quantize_output { WF_QUANTIZE_CODES = 0, WF_QUANTIZE_SCALES, WF_QUANTIZE_BIASES };

typedef struct wf_quant_params {
    int group_size;
    int bits;
    int output;     /* quantize: enum wf_quantize_output; others 0 */
    bool transpose; /* quantized_matmul only */
    int mode;       /* wf_quant_mode */
    int dtype;      /* dequantize in a floating-point mode: the result's wf_dtype */
} wf_quant_params;

/* Inputs that describe the quantized matrix: codes, scales and, in the
 * affine mode only, biases. They follow x in quantized_matmul and
 * gather_qmm, whose lhs and rhs indices come after them. */
static inline int wf__quant_matrix_inputs(const wf_quant_params *p)
{
    return p->mode == WF_QUANT_AFFINE ? 3 : 2;
}

/* quantize: w (f16/bf16/f32, rank >= 2) -> codes (uint32) / scales / biases
 * (floating-point modes: uint8 scales, no biases output). */
extern const wf_prim_def wf__prim_quantize;
/* dequantize: codes, scales, biases (one float dtype) -> that dtype;
 * floating-point modes: codes, uint8 scales -> params.dtype. */
extern const wf_prim_def wf__prim_dequantize;
/* quantized_matmul: x, codes, scales, biases, all float32 but the codes
 * (floating-point modes: x, codes, uint8 scales); x (..., K) with W 2-d,
 * or x and W of one rank with equal leading axes. */
extern const wf_prim_def wf__prim_quantized_matmul;

/* gather_qmm: x (Bx, M, K) float32, codes (E, R, C), scales and biases
 * (E, R, G) float32, lhs and rhs (L) int32 -> (L, M, N): row l is
 * x[lhs[l]] @ W[rhs[l]] (.T), each with quantized_matmul's bits. An index
 * out of range fails the evaluation with WF_ERR_INVALID_ARGUMENT. */
extern const wf_prim_def wf__prim_gather_qmm;

/* Checks mode, group size and bits (MLX's sets for the mode), recording
 * WF_ERR_INVALID_ARGUMENT. */
wf_status wf__quant_check_params(const char *op, int mode, int group_size, int bits);

/* fp4 e2m1 values by code (bit 3 the sign). */
extern const float wf__fp4_values[16];

/* The value of an e4m3 code (all 256 finite; 0x7f is 480). */
static inline float wf__e4m3_value(uint8_t code)
{
    const int e = (code >> 3) & 15, m = code & 7;
    const float mag = e ? ldexpf((float)(8 + m), e - 10) : ldexpf((float)m, -9);
    return code & 0x80 ? -mag : mag;
}

/* The e4m3 code of v (wf_to_fp8's rule: nearest, ties to even; |v| >= 464,
 * infinities and NaN saturate to +-448). */
uint8_t wf__e4m3_encode(float v);

/* Code j of a row's bit stream (bits <= 8, so it spans at most 2 bytes). */
static inline uint32_t wf__quant_code(const uint8_t *row, int64_t j, int bits)
{
    const int64_t bit = j * bits;
    const uint32_t lo = row[bit >> 3];
    const uint32_t hi = (bit & 7) + bits > 8 ? row[(bit >> 3) + 1] : 0;
    return ((lo | hi << 8) >> (bit & 7)) & ((1u << bits) - 1);
}

#endif
