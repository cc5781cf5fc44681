/* Reduction, arg-reduction, softmax and scan primitives: params and tables.
 * Internal. (wf_sum's table and params live in prim/prims.h.) */
#ifndef WEFT_PRIM_REDUCE_H
#define WEFT_PRIM_REDUCE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/array.h"
#include "weft.h"

/* What a wf__prim_reduce node computes. */
typedef enum wf_reduce_op {
    WF_REDUCE_SUM = 0,
    WF_REDUCE_PROD,
    WF_REDUCE_MAX,
    WF_REDUCE_MIN,
    WF_REDUCE_ALL,
    WF_REDUCE_ANY,
    WF_REDUCE_MEAN,
    WF_REDUCE_VAR,
    WF_REDUCE_STD,
    WF_REDUCE_LOGSUMEXP,
    WF_REDUCE_OP_COUNT
} wf_reduce_op;

/* Bit d of `axes` set: axis d is reduced. ddof is used by VAR and STD only. */
typedef struct wf_reduce_params {
    int op; /* wf_reduce_op */
    int ddof;
    uint64_t axes;
    bool keepdims;
} wf_reduce_params;

/* argmax (op 0) / argmin (op 1) along one normalized axis. */
typedef struct wf_arg_reduce_params {
    int op;
    int axis;
    bool keepdims;
} wf_arg_reduce_params;

/* Softmax over the axes in the mask. */
typedef struct wf_softmax_params {
    uint64_t axes;
} wf_softmax_params;

/* cumsum (op 0) / cumprod (op 1) along one normalized axis. */
typedef struct wf_scan_params {
    int op;
    int axis;
    bool reverse;
    bool inclusive;
} wf_scan_params;

extern const wf_prim_def wf__prim_prod;
extern const wf_prim_def wf__prim_max;
extern const wf_prim_def wf__prim_min;
extern const wf_prim_def wf__prim_all;
extern const wf_prim_def wf__prim_any;
extern const wf_prim_def wf__prim_mean;
extern const wf_prim_def wf__prim_var;
extern const wf_prim_def wf__prim_std;
extern const wf_prim_def wf__prim_logsumexp;
extern const wf_prim_def wf__prim_argmax;
extern const wf_prim_def wf__prim_argmin;
extern const wf_prim_def wf__prim_softmax;
extern const wf_prim_def wf__prim_cumsum;
extern const wf_prim_def wf__prim_cumprod;

/* The table for a wf_reduce_op other than SUM (wf_sum uses wf__prim_sum);
 * NULL for SUM or an invalid op. */
const wf_prim_def *wf__reduce_prim(wf_reduce_op op);
/* Output dtype of a reduction: SUM/PROD bool/u8 -> int32; MAX/MIN keep;
 * ALL/ANY bool; MEAN/VAR/STD/LOGSUMEXP integers and bool -> float32, floats
 * keep. Also the output dtype of softmax (as LOGSUMEXP) and scans (as SUM /
 * PROD). */
wf_dtype wf__reduce_out_dtype(wf_reduce_op op, wf_dtype in);

#endif
