/*
 * General gather and scatter (MLX's semantics): several index arrays, each
 * indexing one axis of `a`. Internal.
 *
 * The index arrays reach the primitive already broadcast to one shape I
 * (the op does it, so a kernel never broadcasts). Both primitives see a
 * slice of `a` per position p of I: it starts at indices[k][p] on axes[k]
 * and at 0 on every other axis.
 */
#ifndef WEFT_PRIM_SCATTER_H
#define WEFT_PRIM_SCATTER_H

#include "prim/prims.h"

/* gather: inputs (a, indices[0 .. naxes)); output I + slice_sizes (rank
 * ndim(I) + ndim(a)). axes are normalized and distinct. */
typedef struct wf_gather_params {
    int naxes;
    int axes[WF_MAX_NDIM];
    int64_t slice_sizes[WF_MAX_NDIM]; /* ndim(a) entries */
} wf_gather_params;

/* scatter: inputs (a, updates, indices[0 .. naxes)); updates has a's dtype
 * and shape I + S with S[d] <= a.shape[d] (the slice written at each p);
 * the output has a's shape. `mode` is a wf_scatter_mode. */
typedef struct wf_scatter_params {
    int mode;
    int naxes;
    int axes[WF_MAX_NDIM];
} wf_scatter_params;

/* masked_scatter: inputs (a, mask, src). mask is bool with a's shape; src
 * has a's dtype and shape a.shape[:nbatch] + (K,). Batch row b (over a's
 * first nbatch axes) writes src[b, 0], src[b, 1], ... in row-major order
 * into the elements of a's row b where the mask is true; a row selecting
 * more than K elements fails the evaluation. The output has a's shape.
 * vmap adds batch axes (each example takes its own source from the start). */
typedef struct wf_masked_scatter_params {
    int nbatch;
} wf_masked_scatter_params;

extern const wf_prim_def wf__prim_gather;
extern const wf_prim_def wf__prim_scatter;
extern const wf_prim_def wf__prim_masked_scatter;

#endif
