/*
 * wf_searchsorted's primitive. Internal.
 */
#ifndef WEFT_PRIM_SEARCH_H
#define WEFT_PRIM_SEARCH_H

#include "prim/prims.h"

typedef struct wf_search_params {
    bool right; /* NumPy's side='right' */
} wf_search_params;

/* Inputs: sorted (1-d), values (any shape), of one orderable dtype.
 * Output: uint32 of values' shape. */
extern const wf_prim_def wf__prim_searchsorted;

#endif
