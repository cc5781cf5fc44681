/*
 * Primitive tables (DESIGN section 2) and their parameter structs. Internal.
 *
 * Params structs are zeroed (memset) before being filled so that byte
 * equality and hashing are correct; they hold no pointers.
 */
#ifndef WEFT_PRIM_PRIMS_H
#define WEFT_PRIM_PRIMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/array.h"
#include "weft.h"

/* ---------------------------------------------------------------- params */

typedef struct wf_full_params {
    double value;
    wf_dtype dtype;
    int ndim;
    int64_t shape[WF_MAX_NDIM];
} wf_full_params;

/* full_like: one value of `dtype` in the shape of its one input, whose
 * data it never reads. Built for a traced input so that a shapeless
 * replay takes the shape of the call (wf_full_params would fix it). */
typedef struct wf_full_like_params {
    double value;
    wf_dtype dtype;
} wf_full_like_params;

typedef struct wf_arange_params {
    double start;
    double step;
    int64_t count;
    wf_dtype dtype;
} wf_arange_params;

typedef struct wf_astype_params {
    wf_dtype dtype;
} wf_astype_params;

/* Bit d of `axes` set: axis d is reduced. */
typedef struct wf_sum_params {
    uint64_t axes;
    bool keepdims;
} wf_sum_params;

/* The requested shape as given (one entry may be -1). Output dimension d
 * with in_end[d] > in_begin[d] is instead the product of the input's
 * dimensions [in_begin[d], in_end[d]): expand_dims, squeeze, flatten and
 * unflatten derive their shape from the input's, so a shapeless compiled
 * call follows the call's shapes where a literal reshape keeps its own. */
typedef struct wf_reshape_params {
    int ndim;
    int64_t shape[WF_MAX_NDIM];
    int8_t in_begin[WF_MAX_NDIM], in_end[WF_MAX_NDIM];
    bool follows_input; /* built by expand_dims, squeeze, flatten or unflatten */
} wf_reshape_params;

/* perm[i] is the input axis that becomes output axis i (normalized, >= 0). */
typedef struct wf_transpose_params {
    int ndim;
    int perm[WF_MAX_NDIM];
} wf_transpose_params;

typedef struct wf_broadcast_to_params {
    int ndim;
    int64_t shape[WF_MAX_NDIM];
} wf_broadcast_to_params;

/* Raw NumPy-style start/stop/step per axis (resolved against the shape). */
typedef struct wf_slice_params {
    int ndim;
    int64_t starts[WF_MAX_NDIM];
    int64_t stops[WF_MAX_NDIM];
    int64_t steps[WF_MAX_NDIM];
} wf_slice_params;

/* ---------------------------------------------------------------- tables */

extern const wf_prim_def wf__prim_full;
extern const wf_prim_def wf__prim_full_like;
extern const wf_prim_def wf__prim_arange;
extern const wf_prim_def wf__prim_astype;
extern const wf_prim_def wf__prim_add;
extern const wf_prim_def wf__prim_multiply;
extern const wf_prim_def wf__prim_exp;
extern const wf_prim_def wf__prim_sum;
extern const wf_prim_def wf__prim_reshape;
extern const wf_prim_def wf__prim_transpose;
extern const wf_prim_def wf__prim_broadcast_to;
extern const wf_prim_def wf__prim_slice;
extern const wf_prim_def wf__prim_matmul;

/* ---------------------------------------------------------------- shared helpers */

/* Shape copy and comparison that accept NULL for rank 0 (memcpy/memcmp
 * do not). */
static inline void wf__shape_copy(int64_t *dst, const int64_t *src, int ndim)
{
    for (int d = 0; d < ndim; d++)
        dst[d] = src[d];
}
static inline bool wf__shape_equal(const int64_t *a, int na, const int64_t *b, int nb)
{
    if (na != nb)
        return false;
    for (int d = 0; d < na; d++)
        if (a[d] != b[d])
            return false;
    return true;
}

/* Formats "(2, 3)" into buf and returns buf (truncated to cap). */
const char *wf__shape_str(const int64_t *shape, int ndim, char *buf, size_t cap);
/* Checks a shape for an op: 0 <= ndim <= WF_MAX_NDIM, shape non-NULL when
 * ndim > 0, no negative dims, at most 2^60 elements (so byte counts of any
 * dtype fit int64). */
wf_status wf__check_shape(const char *op, const int64_t *shape, int ndim);

/* NumPy slice resolution for one axis of size `dim` (step != 0): the first
 * index taken and the number of elements. */
void wf__slice_resolve(int64_t dim, int64_t start, int64_t stop, int64_t step, int64_t *first,
                       int64_t *count);
/* Resolves a reshape target (one -1 allowed) for an array of `size`
 * elements into out; WF_ERR_SHAPE / WF_ERR_INVALID_ARGUMENT recorded. */
wf_status wf__reshape_resolve(const char *op, int64_t size, const int64_t *shape, int ndim,
                              int64_t *out);
/* Output dtype of wf_sum: bool/u8 -> int32, others unchanged. */
wf_dtype wf__sum_dtype(wf_dtype in);

#endif
