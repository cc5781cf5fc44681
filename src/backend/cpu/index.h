/* CPU kernels of the shape, indexing and creation primitives declared in
 * prim/shape.h. Internal. */
#ifndef WEFT_BACKEND_CPU_INDEX_H
#define WEFT_BACKEND_CPU_INDEX_H

#include "core/array.h"

wf_status wf__cpu_slice_update(wf_array *out, wf_array *const *inputs, int ninputs,
                               const void *params);
wf_status wf__cpu_concatenate(wf_array *out, wf_array *const *inputs, int ninputs,
                              const void *params);
wf_status wf__cpu_pad(wf_array *out, wf_array *const *inputs, int ninputs, const void *params);
/* The shape-following blocks of prim/shape_like.c. */
wf_status wf__cpu_crop_like(wf_array *out, wf_array *const *inputs, int ninputs,
                            const void *params);
wf_status wf__cpu_pad_like(wf_array *out, wf_array *const *inputs, int ninputs,
                           const void *params);
wf_status wf__cpu_tri(wf_array *out, wf_array *const *inputs, int ninputs, const void *params);
wf_status wf__cpu_take(wf_array *out, wf_array *const *inputs, int ninputs,
                       const void *params);
wf_status wf__cpu_take_along_axis(wf_array *out, wf_array *const *inputs, int ninputs,
                                  const void *params);
wf_status wf__cpu_scatter_add(wf_array *out, wf_array *const *inputs, int ninputs,
                              const void *params);
wf_status wf__cpu_linspace(wf_array *out, wf_array *const *inputs, int ninputs,
                           const void *params);
wf_status wf__cpu_eye(wf_array *out, wf_array *const *inputs, int ninputs, const void *params);

/* Strides for viewing `in` (shape, strides) as `nshape` without copying, as
 * NumPy's attempt_nocopy_reshape; false when a copy is needed. Sizes must
 * match and be non-zero. */
bool wf__cpu_reshape_strides(const int64_t *shape, const int64_t *strides, int ndim,
                             const int64_t *nshape, int nndim, int64_t *nstrides);

#endif
