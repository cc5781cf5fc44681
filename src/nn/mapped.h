/* Files mapped into memory for the loaders of src/nn (npy, npz, gguf).
 * Internal to src/nn (built on weft.h only). A mapping is refcounted:
 * arrays made over it (wf_array_from_external) hold a reference each, so a
 * model's weights stay in the page cache, read once, never copied. A file
 * truncated by another process while mapped can still raise SIGBUS: the
 * loaders check sizes against the file as it was when mapped. */
#ifndef WEFT_NN_MAPPED_H
#define WEFT_NN_MAPPED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weft.h"

typedef struct wf_nn_mapping {
    const uint8_t *data; /* NULL for an empty file */
    size_t size;
    int refs;    /* atomic, see mapped.c */
    bool mapped; /* data is an mmap of a file (unmapped at the last release) */
} wf_nn_mapping;

/* Maps `path` read-only (one reference). NULL + WF_ERR_IO naming `op`. */
wf_nn_mapping *wf__nn_map(const char *op, const char *path);
void wf__nn_mapping_release(wf_nn_mapping *m);

/* A mapping over `size` bytes the caller owns and keeps alive while any
 * array made over it lives (the fuzz targets and tests parse memory with
 * it). NULL + WF_ERR_OUT_OF_MEMORY. */
wf_nn_mapping *wf__nn_mapping_borrow(const uint8_t *data, size_t size);

/* A row-major array of the `bytes` at p (inside m): over the mapping when p
 * is aligned for dtype (and dtype is not bool), else a copy. NULL + error. */
wf_array *wf__nn_mapped_array(wf_nn_mapping *m, const uint8_t *p, const int64_t *shape, int ndim,
                              wf_dtype dtype);

/* Element count of shape with overflow and size checks: false if any dim
 * is negative or the byte count of `itemsize` elements exceeds `limit`. */
bool wf__nn_shape_bytes(const int64_t *shape, int ndim, size_t itemsize, size_t limit,
                        size_t *bytes);

#endif
