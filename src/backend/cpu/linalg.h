/*
 * CPU kernels of linear algebra and fused ops, and the BLAS glue they share.
 * Internal.
 */
#ifndef WEFT_BACKEND_CPU_LINALG_H
#define WEFT_BACKEND_CPU_LINALG_H

#include <cblas.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/array.h"
#include "weft.h"

/* OpenBLAS runs a gemm with m * n * k at most this on the calling thread
 * (interface/gemm.c: SMP_THRESHOLD_MIN (65536) * GEMM_MULTITHREAD_THRESHOLD
 * (4)); larger ones go to its own thread pool. float64 work split over
 * weft's intra-op pool only makes dgemm calls at or below this size, so
 * OpenBLAS's threads and weft's pool threads never compete for the cores at
 * once (see matmul.c). */
#define WF_CPU_BLAS_SINGLE_THREAD_MNK ((int64_t)1 << 18)

/* A matrix operand with batch dims, ready in the compute dtype (float32,
 * bfloat16 for weft's GEMM, float64 for BLAS): matrix (r, c) at data + batch
 * offset, element (i, j) at i * rs + j * cs. float64 operands also carry
 * their BLAS reading (`trans`, leading dimension `ld`). The batch offset of
 * output batch index (i_0, ..., i_{nb-1}) is sum (i_d / div[d]) * bstrides[d]
 * elements (bstrides 0 for a broadcast dim; div > 1 for grouped heads). */
typedef struct wf_cpu_mm_operand {
    const char *data;
    int64_t rs, cs;
    enum CBLAS_TRANSPOSE trans;
    int64_t ld;
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
 * divisor). Uses x in place when its dtype is `compute` (any strides; for
 * float64 only layouts BLAS reads: row-contiguous or transposed); otherwise
 * makes one contiguous copy in `compute` (broadcast dims not expanded). */
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
/* float64 C (m x n, ldc) = alpha * op(A) op(B) + beta * C through BLAS
 * dgemm; all sizes > 0 and within int range. */
void wf__cpu_dgemm(enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int64_t m, int64_t n,
                   int64_t k, double alpha, const double *a, int64_t lda, const double *b,
                   int64_t ldb, double beta, double *c, int64_t ldc);

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
