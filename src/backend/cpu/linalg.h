/*
 * CPU kernels of linear algebra and fused ops, and the operand preparation
 * they share (the products themselves are weft's GEMM, gemm.h).
 * Internal.
 */
#ifndef WEFT_BACKEND_CPU_LINALG_H
#define WEFT_BACKEND_CPU_LINALG_H

#include <stdbool.h>
#include <stdint.h>

#include "core/array.h"
#include "weft.h"

/* A matrix operand with batch dims, ready in the compute dtype of weft's
 * GEMM (float32, float64 or bfloat16): matrix (r, c) at data + batch
 * offset, element (i, j) at i * rs + j * cs. The batch offset of
 * output batch index (i_0, ..., i_{nb-1}) is sum (i_d / div[d]) * bstrides[d]
 * elements (bstrides 0 for a broadcast dim; div > 1 for grouped heads). */
typedef struct wf_cpu_mm_operand {
    const char *data;
    int64_t rs, cs;
    int nb;
    int64_t bstrides[WF_MAX_NDIM];
    int64_t div[WF_MAX_NDIM];
    void *owned; /* wf_buffer * of a staging copy, or NULL */
} wf_cpu_mm_operand;

/* The dtype operands of a product are prepared in: bfloat16 when both are
 * bfloat16 and the GEMM variant `isa` multiplies bfloat16 directly,
 * float64 for a float64 output, else float32. */
wf_dtype wf__cpu_mm_compute_dtype(wf_dtype a, wf_dtype b, wf_dtype out, int isa);
/* Prepares `x` (ndim >= 2; its last two dims the matrix) for output batch
 * shape bshape (nb dims; x's batch dims right-aligned, each 1, equal, or a
 * divisor). Uses x in place when its dtype is `compute` (any strides);
 * otherwise makes one contiguous copy in `compute` (broadcast dims not
 * expanded). */
wf_status wf__cpu_mm_prepare(const wf_array *x, int nb, const int64_t *bshape, wf_dtype compute,
                             wf_cpu_mm_operand *op);
void wf__cpu_mm_release(wf_cpu_mm_operand *op);
/* Element offset of output batch `index` (flat over bshape) in op. */
int64_t wf__cpu_mm_batch_offset(const wf_cpu_mm_operand *op, const int64_t *bshape,
                                int64_t index);
/* Element offset of row r of the operand's matrix. */
static inline int64_t wf__cpu_mm_row_offset(const wf_cpu_mm_operand *op, int64_t r)
{
    return r * op->rs;
}
wf_status wf__cpu_addmm(wf_array *out, wf_array *const *inputs, int ninputs, const void *params);
wf_status wf__cpu_layer_norm(wf_array *out, wf_array *const *inputs, int ninputs,
                             const void *params);
wf_status wf__cpu_rms_norm(wf_array *out, wf_array *const *inputs, int ninputs,
                           const void *params);
wf_status wf__cpu_rope(wf_array *out, wf_array *const *inputs, int ninputs, const void *params);
wf_status wf__cpu_sdpa(wf_array *out, wf_array *const *inputs, int ninputs, const void *params);
wf_status wf__cpu_silu(wf_array *out, wf_array *const *inputs, int ninputs, const void *params);
wf_status wf__cpu_gelu(wf_array *out, wf_array *const *inputs, int ninputs, const void *params);
wf_status wf__cpu_gelu_tanh(wf_array *out, wf_array *const *inputs, int ninputs,
                            const void *params);

#endif
