/*
 * The convolution primitive (MLX's Convolution, XLA's conv_general_dilated
 * restricted to channels-last layouts) and its parameters. Internal.
 *
 * Inputs: x (N, spatial..., C_in) and w (C_out, kernel spatial...,
 * C_in / groups), one float dtype. Output (N, out spatial..., C_out) where,
 * per spatial axis d, the input is dilated (input_dilation - 1 zeros between
 * elements: L' = (L - 1) * idil + 1), padded (padding_lo / padding_hi zeros,
 * negative values crop), and the kernel, dilated likewise (K' = (K - 1) *
 * kdil + 1), slides over it by `strides`:
 *   out = (L' + lo + hi - K') / stride + 1   (>= 0)
 *   y[n, o..., co] = sum over k..., ci of
 *       xp[n, o * stride + k * kdil, ..., g * Cg + ci] * w[co, k..., ci]
 * with g = co / (C_out / groups) and xp the dilated, padded input. `flip`
 * reverses the kernel's spatial axes (a true convolution rather than a
 * correlation, as conv_transpose needs).
 */
#ifndef WEFT_PRIM_CONV_H
#define WEFT_PRIM_CONV_H

#include <stdbool.h>
#include <stdint.h>

#include "core/array.h"
#include "weft.h"

enum { WF_CONV_MAX_SPATIAL = 3 };

typedef struct wf_conv_params {
    int spatial; /* 1..WF_CONV_MAX_SPATIAL; entries past it are zero */
    int64_t strides[WF_CONV_MAX_SPATIAL];
    int64_t padding_lo[WF_CONV_MAX_SPATIAL];
    int64_t padding_hi[WF_CONV_MAX_SPATIAL];
    int64_t kernel_dilation[WF_CONV_MAX_SPATIAL];
    int64_t input_dilation[WF_CONV_MAX_SPATIAL];
    int64_t groups;
    bool flip;
} wf_conv_params;

extern const wf_prim_def wf__prim_conv_general;

/* Output size of one spatial axis (may be negative: an error for callers). */
int64_t wf__conv_out_size(int64_t in, int64_t kernel, int64_t stride, int64_t lo, int64_t hi,
                          int64_t kdil, int64_t idil);

/* Checks x and w against p and fills the output's shape and dtype; errors
 * (WF_ERR_SHAPE, WF_ERR_DTYPE, WF_ERR_INVALID_ARGUMENT) name `op`. */
wf_status wf__conv_infer(const char *op, const wf_conv_params *p, const wf_desc *x,
                         const wf_desc *w, wf_out_desc *out);

#endif
