/* Quantization primitives (weft.h's quantization section): affine quantize
 * (one node per output), dequantize and quantized_matmul. Internal.
 *
 * Codes of a row are one little-endian bit stream: element j of the row
 * occupies bits [j * bits, (j + 1) * bits) of the row's bytes, which are
 * stored as uint32 words (MLX's layout for every bit width). */
#ifndef WEFT_PRIM_QUANTIZED_H
#define WEFT_PRIM_QUANTIZED_H

#include <stdbool.h>
#include <stdint.h>

#include "core/array.h"

/* Which output of quantize a node computes. */
enum wf_quantize_output { WF_QUANTIZE_CODES = 0, WF_QUANTIZE_SCALES, WF_QUANTIZE_BIASES };

typedef struct wf_quant_params {
    int group_size;
    int bits;
    int output;     /* quantize: enum wf_quantize_output; others 0 */
    bool transpose; /* quantized_matmul only */
} wf_quant_params;

/* quantize: w (f16/bf16/f32, rank >= 2) -> codes (uint32) / scales / biases. */
extern const wf_prim_def wf__prim_quantize;
/* dequantize: codes, scales, biases (one float dtype) -> that dtype. */
extern const wf_prim_def wf__prim_dequantize;
/* quantized_matmul: x, codes, scales, biases, all float32 but the codes; x
 * (..., K) with W 2-d, or x and W of one rank with equal leading axes. */
extern const wf_prim_def wf__prim_quantized_matmul;

/* gather_qmm: x (Bx, M, K) float32, codes (E, R, C), scales and biases
 * (E, R, G) float32, lhs and rhs (L) int32 -> (L, M, N): row l is
 * x[lhs[l]] @ W[rhs[l]] (.T), each with quantized_matmul's bits. An index
 * out of range fails the evaluation with WF_ERR_INVALID_ARGUMENT. */
extern const wf_prim_def wf__prim_gather_qmm;

/* Checks group size and bits (MLX's sets), recording WF_ERR_INVALID_ARGUMENT. */
wf_status wf__quant_check_params(const char *op, int group_size, int bits);

/* Code j of a row's bit stream (bits <= 8, so it spans at most 2 bytes). */
static inline uint32_t wf__quant_code(const uint8_t *row, int64_t j, int bits)
{
    const int64_t bit = j * bits;
    const uint32_t lo = row[bit >> 3];
    const uint32_t hi = (bit & 7) + bits > 8 ? row[(bit >> 3) + 1] : 0;
    return ((lo | hi << 8) >> (bit & 7)) & ((1u << bits) - 1);
}

#endif
