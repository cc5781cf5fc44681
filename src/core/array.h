/*
 * The array node (DESIGN sections 2 and 3). Internal.
 *
 * An array is a node of the lazy graph: a primitive, its parameters and its
 * inputs, plus the state machine PENDING -> CLAIMED -> SUBMITTED -> READY or
 * FAILED. Shape and dtype are fixed at construction. Buffer, strides and
 * offset are written once by the kernel, before READY is published
 * (release/acquire on `state`), and never change afterwards.
 */
#ifndef WEFT_CORE_ARRAY_H
#define WEFT_CORE_ARRAY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/buffer.h"
#include "weft.h"

enum wf_node_state {
    WF_NODE_PENDING = 0,
    WF_NODE_CLAIMED,
    WF_NODE_SUBMITTED,
    WF_NODE_READY,
    WF_NODE_FAILED
};

struct wf_prim_def;

struct wf_array {
    atomic_int_fast64_t refcount; /* handles and dependent nodes */
    atomic_int state;             /* enum wf_node_state */
    wf_dtype dtype;
    int ndim;
    int64_t size;     /* product of shape */
    int64_t *shape;   /* ndim entries (in `extra`, owned) */
    int64_t *strides; /* ndim entries, in elements; valid once READY */
    int64_t offset;   /* in elements into buffer; valid once READY */
    bool row_contiguous; /* valid once READY */
    wf_buffer *buffer;   /* valid once READY (NULL if FAILED) */
    _Atomic(wf_buffer *) dense_copy; /* contiguous copy made by wf_array_data */

    /* Graph: only the claimer (and the task it enqueues) touches these. */
    const struct wf_prim_def *prim; /* NULL for arrays created with data */
    void *params;                   /* prim->params_size bytes, owned */
    struct wf_array **inputs;       /* owned references */
    int ninputs;
    struct wf_stream *stream; /* owned reference; where the kernel runs */
    struct wf_array *queue_next; /* link in the stream's FIFO while queued */
    void *extra; /* one allocation holding shape, strides, params, inputs */

    /* Set before FAILED is published. */
    wf_status error;
    char *error_message; /* malloc'd, may be NULL */
};

/* A CPU kernel. `inputs` are READY. The kernel gives `out` its storage, either
 * a fresh contiguous buffer (wf__array_alloc_output) or a view of an input
 * (wf__array_set_view). On failure it records the error (wf__error) and
 * returns its status. Runs with no internal lock held. */
typedef wf_status (*wf_cpu_kernel)(wf_array *out, wf_array *const *inputs, int ninputs,
                                   const void *params);

/* Shape and dtype inference: writes the output dtype, rank and shape
 * (shape has room for WF_MAX_NDIM entries). Records an error on bad input. */
typedef wf_status (*wf_infer_fn)(const void *params, wf_array *const *inputs, int ninputs,
                                 wf_dtype *dtype, int *ndim, int64_t *shape);

enum wf_prim_flags {
    WF_PRIM_ELEMENTWISE = 1u << 0, /* out[i] depends on in[i] only */
    WF_PRIM_VIEW = 1u << 1          /* the kernel only makes a view */
};

/* A primitive: the table every node points to (DESIGN section 2). Transform
 * rules (vjp, jvp, vmap) join later. Params are plain structs, zeroed before
 * being filled, so byte equality and hashing are correct by default. */
typedef struct wf_prim_def {
    const char *name;
    unsigned flags;
    size_t params_size;
    wf_infer_fn infer;
    bool (*params_equal)(const void *a, const void *b); /* NULL: memcmp */
    uint64_t (*params_hash)(const void *params);        /* NULL: hash of bytes */
    wf_cpu_kernel cpu_kernel;
    /* Releases what params own (user payloads); NULL for plain params.
     * Called once when the node is freed, with no lock held. */
    void (*params_release)(void *params);
} wf_prim_def;

/* Whether two nodes of `prim` have equal parameters, and a hash consistent
 * with it: prim->params_equal / params_hash, or the params' bytes (params
 * are zeroed before being filled, so padding compares equal). Compile's
 * common-subexpression elimination and cache keys are built on these. */
bool wf__prim_params_equal(const wf_prim_def *prim, const void *a, const void *b);
uint64_t wf__prim_params_hash(const wf_prim_def *prim, const void *params);

/* Builds a PENDING node: checks inputs (NULL input -> wf__null_input), runs
 * prim->infer, copies params, retains inputs, takes this thread's current
 * stream, and registers the new reference with this thread's scope.
 * Returns NULL with the error recorded. What the params own belongs to the
 * node from the call on: released by prim->params_release on failure too. */
wf_array *wf__node_new(const wf_prim_def *prim, const void *params, wf_array *const *inputs,
                       int ninputs);

/* A READY array over `buffer` (retained) with contiguous strides; registered
 * with this thread's scope. */
wf_array *wf__array_new_ready(wf_dtype dtype, const int64_t *shape, int ndim, wf_buffer *buffer);

/* For kernels: gives `out` a fresh contiguous buffer of out->size elements. */
wf_status wf__array_alloc_output(wf_array *out);
/* For kernels: makes `out` a view of `base`'s buffer with the given strides
 * (ndim of out entries, elements) and offset (elements). */
void wf__array_set_view(wf_array *out, const wf_array *base, const int64_t *strides,
                        int64_t offset);

/* Row-major contiguous strides for a shape. */
void wf__contiguous_strides(const int64_t *shape, int ndim, int64_t *strides);
/* True if strides describe a row-major contiguous layout of shape (size-1
 * dims ignored). */
bool wf__is_row_contiguous(const int64_t *shape, const int64_t *strides, int ndim);
/* Product of shape into *size; WF_ERR_OVERFLOW / WF_ERR_INVALID_ARGUMENT
 * (negative dim) recorded with `op` in the message. */
wf_status wf__shape_size(const char *op, const int64_t *shape, int ndim, int64_t *size);
/* Normalizes `axis` for rank `ndim` into *out; WF_ERR_AXIS on out of range. */
wf_status wf__normalize_axis(const char *op, int axis, int ndim, int *out);
/* Broadcast shape of two shapes (NumPy rules) into out (WF_MAX_NDIM room). */
wf_status wf__broadcast_shapes(const char *op, const int64_t *a, int na, const int64_t *b,
                               int nb, int64_t *out, int *nout);

/* Pointer to element 0 of a READY array (buffer data + offset). */
static inline void *wf__array_data_ptr(const wf_array *a)
{
    return (char *)a->buffer->data + a->offset * (int64_t)wf_dtype_size(a->dtype);
}

/* Number of kernels run since start (a test counter: each node runs once). */
uint64_t wf__kernels_run(void);
/* Times a task found an input from another stream not yet computed and
 * waited for it (a test counter: proves a cross-stream wait happened). */
uint64_t wf__cross_stream_waits(void);
/* Most kernels seen running at the same time since the last reset (a test
 * counter: proves streams run in parallel, with no hidden global lock). */
int wf__kernels_running_max(void);
void wf__kernels_running_max_reset(void);
/* Test hook: the nth kernel run from now fails with WF_ERR_KERNEL (0 turns
 * the injection off). */
void wf__inject_kernel_failure(int64_t nth);

/* Resolves an array handle passed to a public function: NULL records
 * wf__null_input(op, what); a released array records WF_ERR_MISUSE. Returns
 * `a` or NULL. Node memory is type-stable and reused only after a long
 * quarantine, so checking a released handle is never undefined behavior. */
wf_array *wf__array_check(const wf_array *a, const char *op, const char *what);
/* Drops a reference without touching this thread's scope bookkeeping. */
void wf__array_decref(wf_array *a);
/* Adds a reference (internal; no scope bookkeeping). */
static inline wf_array *wf__array_incref(wf_array *a)
{
    atomic_fetch_add_explicit(&a->refcount, 1, memory_order_relaxed);
    return a;
}
/* Live array nodes in the process (a leak check for tests). */
int64_t wf__arrays_live(void);

/* State helpers (acquire loads). */
static inline int wf__array_state(const wf_array *a)
{
    return atomic_load_explicit(&((wf_array *)a)->state, memory_order_acquire);
}

#endif
