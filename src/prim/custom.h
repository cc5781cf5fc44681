/* The custom-kernel primitive (wf_custom). Internal. */
#ifndef WEFT_PRIM_CUSTOM_H
#define WEFT_PRIM_CUSTOM_H

#include "core/array.h"

/* The user's kernel and payload travel in the params; the node owns the
 * payload (released by the prim's params_release). */
typedef struct wf_custom_params {
    wf_custom_kernel kernel;
    void *payload;
    void (*payload_free)(void *payload);
    char name[32];
    wf_dtype dtype;
    int ndim;
    int64_t shape[WF_MAX_NDIM];
} wf_custom_params;

extern const wf_prim_def wf__prim_custom;

#endif
