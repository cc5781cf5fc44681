/*
 * The rest of MLX's matmul family on weft's GEMM: gather_mm (products of
 * matrices picked by index arrays, for mixture-of-experts) and segmented_mm
 * (products over segments of the inner dimension). Internal.
 */
#ifndef WEFT_PRIM_MATMUL_FAMILY_H
#define WEFT_PRIM_MATMUL_FAMILY_H

#include "prim/prims.h"

/* gather_mm: inputs a (BA, M, K), b (BB, K, N) of one real float dtype, lhs
 * and rhs (index dtypes, one shape I). out[p] = a[lhs[p]] @ b[rhs[p]]
 * (negative indices count from the end; out of range fails the
 * evaluation); output I + (M, N), a's dtype. sorted_indices is MLX's hint
 * (the result does not depend on it). */
typedef struct wf_gather_mm_params {
    bool sorted_indices;
} wf_gather_mm_params;

/* segmented_mm: inputs a (M, K), b (K, N) of one real float dtype,
 * segments (S..., 2) of an index dtype. out[s] = a[:, s0:s1] @ b[s0:s1, :]
 * for segment s = (s0, s1) (0 <= s0, s1 <= K, else the evaluation fails;
 * s1 <= s0 is an empty sum: zeros); output S + (M, N), a's dtype. */
extern const wf_prim_def wf__prim_gather_mm;
extern const wf_prim_def wf__prim_segmented_mm;

#endif
