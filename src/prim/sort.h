/*
 * The sort family (sort, argsort, partition, argpartition, topk, argtopk)
 * and the scans cummax, cummin, logcumsumexp. Internal.
 */
#ifndef WEFT_PRIM_SORT_H
#define WEFT_PRIM_SORT_H

#include "prim/prims.h"

/* What a sort-family node computes (one kernel serves them all). */
enum wf_sort_op {
    WF_SORT_VALUES = 0,
    WF_SORT_INDICES,
    WF_PARTITION_VALUES,
    WF_PARTITION_INDICES,
    WF_TOPK_VALUES,
    WF_TOPK_INDICES
};

/* axis normalized; k: kth for partition (normalized, in [0, n)), the
 * count for topk, 0 for sort. */
typedef struct wf_sort_params {
    int op; /* enum wf_sort_op */
    int axis;
    int64_t k;
} wf_sort_params;

/* Input: a. Values have a's dtype, indices int32; topk replaces the axis
 * by k. */
extern const wf_prim_def wf__prim_sort;
extern const wf_prim_def wf__prim_argsort;
extern const wf_prim_def wf__prim_partition;
extern const wf_prim_def wf__prim_argpartition;
extern const wf_prim_def wf__prim_topk;
extern const wf_prim_def wf__prim_argtopk;

/* The sort-family primitive of `op`. */
const wf_prim_def *wf__sort_prim(int op);
/* Whether the sort family orders `dtype`. */
bool wf__sort_dtype_ok(wf_dtype dtype);

/* Scans beside wf_cumsum's: cummax, cummin, logcumsumexp. */
enum wf_scan_extra_op { WF_SCAN_MAX = 0, WF_SCAN_MIN, WF_SCAN_LOGSUMEXP };

typedef struct wf_scan_extra_params {
    int op; /* enum wf_scan_extra_op */
    int axis;
    bool reverse;
    bool inclusive;
} wf_scan_extra_params;

/* Input: a (a float dtype for logcumsumexp). Output: a's shape and dtype. */
extern const wf_prim_def wf__prim_cummax;
extern const wf_prim_def wf__prim_cummin;
extern const wf_prim_def wf__prim_logcumsumexp;

#endif
