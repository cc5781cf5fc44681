/* Collective primitives (DESIGN section 9): semantics only; the kernels
 * (backend/cpu/distributed.c) call the group's collectives. Internal. */
#ifndef WEFT_PRIM_DISTRIBUTED_H
#define WEFT_PRIM_DISTRIBUTED_H

#include "core/array.h"

/* One struct for every collective. `group` is an owned reference
 * (params_retain / params_release); `peer` is the rank sent to or received
 * from; recv's output is `dtype` and `shape` (its one optional input, from
 * recv_like, only orders it after that input). Two nodes never compare
 * equal (`instance`), so compile never merges two collectives. */
typedef struct wf_collective_params {
    struct wf_group *group;
    uint64_t instance;
    int peer;
    wf_dtype dtype;
    int ndim;
    int64_t shape[WF_MAX_NDIM];
} wf_collective_params;

extern const wf_prim_def wf__prim_all_sum;
extern const wf_prim_def wf__prim_all_max;
extern const wf_prim_def wf__prim_all_min;
extern const wf_prim_def wf__prim_all_gather;
extern const wf_prim_def wf__prim_sum_scatter;
extern const wf_prim_def wf__prim_send;
extern const wf_prim_def wf__prim_recv;

/* The enum wf_collective_kind of a collective primitive, -1 for others. */
int wf__collective_kind(const wf_prim_def *prim);

#endif
