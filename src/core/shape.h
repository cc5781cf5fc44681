/* Shape helpers shared by ops, primitives and kernels. Internal. Each helper
 * that can fail records the error with `op` in the message. */
#ifndef WEFT_CORE_SHAPE_H
#define WEFT_CORE_SHAPE_H

#include <stdbool.h>
#include <stdint.h>

#include "weft.h"

/* Row-major contiguous strides for a shape. */
void wf__contiguous_strides(const int64_t *shape, int ndim, int64_t *strides);
/* True if strides describe a row-major contiguous layout of shape (size-1
 * dims ignored). */
bool wf__is_row_contiguous(const int64_t *shape, const int64_t *strides, int ndim);
/* Whether the elements fill one block of `size` elements, each once, in
 * some order of the dims (a row-major array or a transpose of one; size-1
 * dims may have any stride). */
bool wf__is_dense(const int64_t *shape, const int64_t *strides, int ndim);
/* Product of shape into *size; WF_ERR_OVERFLOW / WF_ERR_INVALID_ARGUMENT
 * (negative dim) recorded with `op` in the message. */
wf_status wf__shape_size(const char *op, const int64_t *shape, int ndim, int64_t *size);
/* Normalizes `axis` for rank `ndim` into *out; WF_ERR_AXIS on out of range. */
wf_status wf__normalize_axis(const char *op, int axis, int ndim, int *out);
/* Broadcast shape of two shapes (NumPy rules) into out (WF_MAX_NDIM room). */
wf_status wf__broadcast_shapes(const char *op, const int64_t *a, int na, const int64_t *b,
                               int nb, int64_t *out, int *nout);

#endif
