/*
 * Shape, indexing and creation primitives beyond the starter set in
 * prims.h: their parameter structs and tables. Internal.
 *
 * Params structs are zeroed (memset) before being filled so that byte
 * equality and hashing are correct; they hold no pointers.
 */
#ifndef WEFT_PRIM_SHAPE_H
#define WEFT_PRIM_SHAPE_H

#include <stdbool.h>
#include <stdint.h>

#include "prim/prims.h"

/* concatenate, take, take_along_axis, scatter_add: one normalized axis. */
typedef struct wf_axis_params {
    int axis;
} wf_axis_params;

/* pad: low[d] / high[d] elements before / after axis d, filled with value. */
typedef struct wf_pad_params {
    double value;
    int ndim;
    int64_t low[WF_MAX_NDIM];
    int64_t high[WF_MAX_NDIM];
} wf_pad_params;

/* tril (upper false) keeps j <= i + k; triu (upper true) keeps j >= i + k. */
typedef struct wf_tri_params {
    int64_t k;
    int upper;
} wf_tri_params;

/* num values from start to stop inclusive (the last one is stop exactly). */
typedef struct wf_linspace_params {
    double start;
    double stop;
    int64_t num;
    wf_dtype dtype;
} wf_linspace_params;

/* n x m with ones on diagonal k. */
typedef struct wf_eye_params {
    int64_t n;
    int64_t m;
    int64_t k;
    wf_dtype dtype;
} wf_eye_params;

/* Inputs: (a, update) with update of a's dtype and of the slice's shape;
 * params: wf_slice_params. */
extern const wf_prim_def wf__prim_slice_update;
/* Inputs: arrays of one dtype and rank, equal shapes except on the axis. */
extern const wf_prim_def wf__prim_concatenate;
extern const wf_prim_def wf__prim_pad;
extern const wf_prim_def wf__prim_tri;
/* The input's bits read as another dtype (params: wf_astype_params): a
 * narrower one multiplies the last axis by the size ratio, a wider one
 * divides it (wf_view). */
extern const wf_prim_def wf__prim_view;
/* Inputs: (a, indices). */
extern const wf_prim_def wf__prim_take;
/* Inputs: (a, indices) broadcast to one shape except on the axis. */
extern const wf_prim_def wf__prim_take_along_axis;
/* Inputs: (a, indices 1-d, updates of a's dtype and shape with the axis
 * replaced by the number of indices). */
extern const wf_prim_def wf__prim_scatter_add;
extern const wf_prim_def wf__prim_linspace;
extern const wf_prim_def wf__prim_eye;
/* Shape-following primitives (prim/shape_like.c), no params. Inputs
 * (x, like); like's data is never read, only its shape:
 *  - broadcast_like: x broadcast with like's shape (the joint shape);
 *  - unbroadcast_like: x summed to like's shape (like broadcasts to x's);
 *  - reshape_like: x reshaped to like's shape (equal sizes);
 *  - size_ratio: 0-d, like's dtype: x's size / like's size (0 if empty). */
extern const wf_prim_def wf__prim_broadcast_like;
extern const wf_prim_def wf__prim_unbroadcast_like;
extern const wf_prim_def wf__prim_reshape_like;
extern const wf_prim_def wf__prim_size_ratio;
/* crop_like and pad_like (prim/shape_like.c): the block of a larger array
 * that a smaller one fills starts at low[d] on each axis d and, on `axis`,
 * a further sum of sizes read from inputs at each call. */
typedef struct wf_block_params {
    int axis;
    int ndim;
    int64_t low[WF_MAX_NDIM];
} wf_block_params;
/* Inputs (x, like, before...), one rank; the block has the smaller one's
 * shape and starts at low plus, on axis, the sizes of the `before` inputs
 * along it (their data is never read):
 *  - crop_like: the block of x that has like's shape (a view of x);
 *  - pad_like: zeros of like's shape, x's dtype, with x as the block.
 * Each is the other's adjoint: a concatenation's or a pad's cotangent is
 * cropped to an operand's shape, and that crop's cotangent padded back. */
extern const wf_prim_def wf__prim_crop_like;
extern const wf_prim_def wf__prim_pad_like;
/* The block's first index on axis d, given the summed size along p->axis
 * of the `before` inputs. */
static inline int64_t wf__block_start(const wf_block_params *p, int d, int64_t before)
{
    return p->low[d] + (d == p->axis ? before : 0);
}
/* The axes (bit d: axis d) unbroadcast_like sums: x's leading axes beyond
 * like's rank and those where like has 1 and x does not. */
uint64_t wf__unbroadcast_axes(const int64_t *x_shape, int x_ndim, const int64_t *like_shape,
                              int like_ndim);

/* True for the integer dtypes the index kernels read (u8, i32, i64; the
 * ops convert indices of the other integer types). */
static inline bool wf__is_index_dtype(wf_dtype d)
{
    return d == WF_DTYPE_U8 || d == WF_DTYPE_I32 || d == WF_DTYPE_I64;
}

#endif
