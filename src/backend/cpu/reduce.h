/*
 * CPU reductions, arg-reductions, softmax and scans: kernels and the shared
 * parallel walk helpers. Internal.
 */
#ifndef WEFT_BACKEND_CPU_REDUCE_H
#define WEFT_BACKEND_CPU_REDUCE_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/cpu/cpu.h"
#include "core/array.h"

/* Runs body(sub, arg) over sub-walks of `it` that split dim `dim` (an index
 * into it->shape, it->ndim > 0) into chunks of at least `min_chunk`
 * indices, in parallel on the intra-op pool. Every operand a body writes must
 * have a non-zero stride on `dim`, so that chunks write disjoint elements. */
typedef void (*wf_cpu_walk_body)(const wf_cpu_iter *sub, void *arg);
void wf__cpu_split_run(const wf_cpu_iter *it, int dim, int64_t min_chunk, wf_cpu_walk_body body,
                       void *arg);
/* The dim of `it` to split for parallel work: among dims where operand
 * `written` (or every operand, if -1) has a non-zero stride, the outermost
 * with at least `want` indices, else the largest; -1 if none. */
int wf__cpu_pick_split_dim(const wf_cpu_iter *it, int written, int64_t want);
/* Tiling: a walk whose innermost dim is strided by at least
 * WF_CPU_TILE_STRIDE elements for some operand that is less strided on an
 * outer dim (an output written in another order than the input is read, as
 * for a transposed input) runs in tiles of WF_CPU_TILE along the innermost
 * dim, each tile walking the outer dims: the strided operand then touches
 * WF_CPU_TILE cache lines at a time and fills them before they are evicted. */
enum { WF_CPU_TILE = 16, WF_CPU_TILE_STRIDE = 16 };
bool wf__cpu_wants_tiling(const wf_cpu_iter *it);
/* wf__cpu_iter_run, tiled when wf__cpu_wants_tiling. */
void wf__cpu_iter_run_tiled(const wf_cpu_iter *it, wf_cpu_inner_fn fn, const void *ctx);
/* Elements in the walk (1 for 0 dims, 0 if empty). */
int64_t wf__cpu_iter_count(const wf_cpu_iter *it);

/* Operand layouts over an input's shape: ACC row-major over the kept
 * axes (stride 0 on reduced ones; for an axis walk: row-major over every
 * axis but the axis), FULL row-major over the whole shape, IN the input's own
 * strides. */
enum wf_cpu_layout { WF_CPU_LAYOUT_ACC, WF_CPU_LAYOUT_FULL, WF_CPU_LAYOUT_IN };

/* A walk over every dim of `in` except `axis`, in the input's memory order,
 * for `nops` operands of the given layouts. Returns whether `axis` is the
 * innermost dim of `in` in memory (then a row along the axis is the
 * natural inner loop; otherwise the walk is repeated per axis index). */
bool wf__cpu_axis_walk(wf_cpu_iter *it, const wf_array *in, int axis, int nops,
                       char *const *data, const size_t *items,
                       const enum wf_cpu_layout *layout);

/* Kernels (params: prim/reduce.h). */
wf_status wf__cpu_reduce(wf_array *out, wf_array *const *inputs, int ninputs, const void *params);
wf_status wf__cpu_arg_reduce(wf_array *out, wf_array *const *inputs, int ninputs,
                             const void *params);
wf_status wf__cpu_softmax(wf_array *out, wf_array *const *inputs, int ninputs,
                          const void *params);
wf_status wf__cpu_scan(wf_array *out, wf_array *const *inputs, int ninputs, const void *params);

#endif
