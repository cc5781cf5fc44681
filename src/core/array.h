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
#include "core/device_kind.h"
#include "core/shape.h" /* so every user of array.h keeps the shape helpers */
#include "weft.h"

enum wf_node_state {
    WF_NODE_PENDING = 0,
    WF_NODE_CLAIMED,
    WF_NODE_SUBMITTED,
    WF_NODE_READY,
    WF_NODE_FAILED
};

/* Node flags (wf_array.node_flags), set before the node goes live and
 * fixed afterwards. Bits 4 and up are free for later flags. */
enum wf_node_flags {
    WF_NODE_FLAG_PLACEHOLDER = 1u << 0,    /* a tracer: shape and dtype, never a value */
    WF_NODE_FLAG_ON_PLACEHOLDER = 1u << 1, /* built (transitively) from a placeholder */
    /* A broadcast_to an op inserted to bring an operand to the broadcast
     * shape of its operands (NumPy broadcasting), not one the caller asked
     * for: a shapeless compiled replay re-derives it from the call's shapes. */
    WF_NODE_FLAG_IMPLICIT_BROADCAST = 1u << 2,
    /* A reshape, broadcast_to, slice, slice_update or gather the caller
     * asked for through the public API: a shapeless compiled replay keeps
     * its shape, as MLX's does. The same ops built inside weft (by gradient
     * rules, say) name a traced shape no replay may reuse: refused. */
    WF_NODE_FLAG_USER_SHAPE = 1u << 3,
    /* Built (transitively) from a placeholder of a shapeless trace: the
     * gradient rules build shape-following nodes for it (unbroadcast_like,
     * broadcast_like, reshape_like), so its replay follows each call. */
    WF_NODE_FLAG_SHAPELESS = 1u << 4,
    /* A shapeless node built while a transform rule that reads the traced
     * shapes ran (core/graph_mode.h), or from such a node: a shapeless
     * compiled trace refuses it. */
    WF_NODE_FLAG_TRACED_SHAPE = 1u << 5
};

struct wf_prim_def;

struct wf_array {
    /* Handles and dependent nodes. Must stay the first field: a stale handle
     * may load it while the node is reused, so reuse clears every field after
     * it and writes it only atomically (core/array.c). 0 while in the pool. */
    atomic_int_fast64_t refcount;
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

    /* Graph: only the claimer (and the task it enqueues) writes these.
     * After running, a node drops its inputs (ninputs becomes 0) unless
     * keep_graph is set. So another thread may read `inputs` only while it
     * holds a reference to the node and either the node is keep_graph or it
     * is not yet claimed (PENDING) and nobody can claim it meanwhile. */
    const struct wf_prim_def *prim; /* NULL for arrays created with data */
    void *params;                   /* prim->params_size bytes, owned */
    struct wf_array **inputs;       /* owned references */
    int ninputs;
    /* Built under a transform (core/graph_mode.h): evaluation keeps the
     * inputs so the transform can walk the graph; set once, at creation. */
    bool keep_graph;
    /* Owned reference (through core's stream hooks, core/stream_hooks.h);
     * where the kernel runs. NULL: the default stream (a node built before
     * the runtime started). */
    struct wf_stream *stream;
    struct wf_array *queue_next; /* link in a FIFO, a run list or a free queue */
    uint64_t queue_seq; /* ticket in its stream's FIFO; 0 if never queued there */
    void *extra; /* one allocation holding shape, strides, params, inputs, results */
    /* A primary node of a multi-output primitive: its outputs 1.. (output 0
     * is the node itself), hidden nodes its kernel fills (owned; never
     * evaluated themselves). NULL otherwise. See wf__node_output. */
    struct wf_array **results;

    /* Set before FAILED is published. */
    wf_status error;
    char *error_message; /* malloc'd, may be NULL */

    /* Identity (core/array.c): set before the node is published, then fixed. */
    uint64_t id;         /* unique in the process, never reused (from 1) */
    unsigned node_flags; /* enum wf_node_flags */
    /* Free-node links, used only while the node is in the pool (node_pool.c). */
    struct wf_array *pool_next;
    struct wf_array *pool_batch_next;
};

/* A kernel for one device. `inputs` are READY. The kernel gives `out` its
 * storage, either a fresh contiguous buffer (wf__array_alloc_output) or a
 * view of an input (wf__array_set_view); a primitive with several outputs
 * gives each of wf__node_output(out, 0..noutputs-1) its storage. On failure
 * it records the error (wf__error) and returns its status. Runs with no
 * internal lock held. */
typedef wf_status (*wf_kernel_fn)(wf_array *out, wf_array *const *inputs, int ninputs,
                                  const void *params);

/* What shape inference sees of an input: no node, no data, so transforms
 * and shapeless replay can infer without building nodes. `shape` is
 * borrowed (ndim entries; may be NULL when ndim is 0). */
typedef struct wf_desc {
    wf_dtype dtype;
    int ndim;
    const int64_t *shape;
} wf_desc;

/* An inferred output: dtype, rank and shape (held inline). */
typedef struct wf_out_desc {
    wf_dtype dtype;
    int ndim;
    int64_t shape[WF_MAX_NDIM];
} wf_out_desc;

/* Shape and dtype inference: fills outputs[0 .. wf__prim_noutputs(prim)).
 * Records an error on bad input. */
typedef wf_status (*wf_infer_fn)(const void *params, const wf_desc *inputs, int ninputs,
                                 wf_out_desc *outputs);

enum wf_prim_flags {
    WF_PRIM_ELEMENTWISE = 1u << 0, /* out[i] depends on in[i] only */
    WF_PRIM_VIEW = 1u << 1,         /* the kernel only makes a view */
    /* Buffer donation (runtime/eval.c): every kernel of the primitive gives
     * its single output wf__array_alloc_output's storage and stays correct
     * when that storage is an input's (same shape, dtype size, contiguous):
     * element i of each input is read before element i of the output is
     * written, and no restrict-qualified loop sees the two pointers (the
     * CPU iterator stages aliased rows, backend/cpu/iter.c). */
    WF_PRIM_INPLACE = 1u << 2,
    /* With WF_PRIM_INPLACE: the storage of an input that is dense in another
     * order of its dims (a transposed element-wise result) may be donated
     * too. The runtime then gives the output that input's strides before
     * the kernel runs, and every kernel of the primitive writes the output
     * through out->strides as wf__array_alloc_output leaves them. */
    WF_PRIM_INPLACE_ANY_LAYOUT = 1u << 3,
    /* A collective (prim/distributed.h): it talks to other processes, so it
     * runs on the stream prim->stream names (queued on its FIFO even under
     * wf_eval, so it overlaps the caller's work), and compile never merges
     * two of its nodes. Its kernel runs even when an input failed (it must
     * tell the other processes) and then fails itself. */
    WF_PRIM_COLLECTIVE = 1u << 4,
    /* Instead of WF_PRIM_INPLACE: only input 0, and only when it is no other
     * input too, may give its storage, and every kernel starts the output
     * as a copy of input 0 that it skips when the output is input 0's
     * storage (scatter, slice_update: the table is updated where it lies;
     * its updates and indices are read as they are, never written). */
    WF_PRIM_INPLACE_FIRST = 1u << 5
};

/* A primitive's kernel per device kind. Written by wf__kernel_register (the
 * backends register at the runtime's start-up, src/prim/kernel.h), read when
 * a node runs. Each primitive points at its own slots: a file-scope compound
 * literal `&(wf_kernel_slots){{0}}`, so the table itself stays const. */
typedef struct wf_kernel_slots {
    wf_kernel_fn fn[WF_DEVICE_KIND_COUNT];
} wf_kernel_slots;

/* A primitive: the table every node points to (DESIGN section 2). Transform
 * rules (vjp, jvp, vmap) join later. Params are plain structs, zeroed before
 * being filled, so byte equality and hashing are correct by default.
 * Semantics only: kernels live in the backends (see `kernels`). */
typedef struct wf_prim_def {
    const char *name;
    unsigned flags;
    /* Outputs per node; 0 means 1. A node of a primitive with several is a
     * hidden primary; the user holds its siblings (wf__node_new_multi). */
    int noutputs;
    size_t params_size;
    wf_infer_fn infer;
    bool (*params_equal)(const void *a, const void *b); /* NULL: memcmp */
    uint64_t (*params_hash)(const void *params);        /* NULL: hash of bytes */
    /* Releases what params own (user payloads); NULL for plain params.
     * Called once when the node is freed, with no lock held. */
    void (*params_release)(void *params);
    /* Adds a reference to what params own, for a byte copy of them that is
     * released on its own (a compiled tape's copy, a node replayed from
     * it). NULL: what they own cannot be shared, and a compiled trace
     * refuses the primitive. */
    void (*params_retain)(void *params);
    /* The stream every node of the primitive runs on, whatever the stream
     * it was built on (a group's communication stream); NULL: the node's. */
    struct wf_stream *(*stream)(const void *params);
    wf_kernel_slots *kernels;
} wf_prim_def;

/* Outputs of one node of `prim` (1 unless it declares more). */
static inline int wf__prim_noutputs(const wf_prim_def *prim)
{
    return prim->noutputs > 1 ? prim->noutputs : 1;
}

/* Whether two nodes of `prim` have equal parameters, and a hash consistent
 * with it: prim->params_equal / params_hash, or the params' bytes (params
 * are zeroed before being filled, so padding compares equal). Compile's
 * common-subexpression elimination and cache keys are built on these. */
bool wf__prim_params_equal(const wf_prim_def *prim, const void *a, const void *b);
uint64_t wf__prim_params_hash(const wf_prim_def *prim, const void *params);

/* Builds a PENDING node: checks inputs (NULL input -> wf__null_input), runs
 * prim->infer on the inputs' descriptions, copies params, retains inputs and
 * takes this thread's current stream. An internal builder: the new
 * reference is not registered with any scope and the last error is touched
 * only on failure (public ops hand results out through wf__array_publish).
 * For a primitive with several outputs the node is the hidden primary that
 * holds them all (wf__node_output); users get its siblings, built by
 * wf__node_new_multi (prim/sibling.h). Returns NULL with the error
 * recorded. What the params own belongs to the node from the call on:
 * released by prim->params_release on failure too. */
wf_array *wf__node_new(const wf_prim_def *prim, const void *params, wf_array *const *inputs,
                       int ninputs);

/* Output i of a node: the node itself for i == 0, else a hidden result of a
 * multi-output primary (i < wf__prim_noutputs(n->prim)). */
static inline wf_array *wf__node_output(const wf_array *n, int i)
{
    return i == 0 ? (wf_array *)n : n->results[i - 1];
}

/* The description shape inference sees of an array. */
static inline wf_desc wf__array_desc(const wf_array *a)
{
    wf_desc d = {a->dtype, a->ndim, a->shape};
    return d;
}

/* Hands a new internal reference to the user: registers it with this
 * thread's innermost open scope. Passes NULL through; if the scope cannot
 * record it, releases it and returns NULL with the error recorded. */
wf_array *wf__array_publish(wf_array *a);
/* Hands several results out at once, all or nothing: takes the n internal
 * references in `results` (NULL when its op failed) and publishes
 * results[i] to *outs[i], or drops it where outs[i] is NULL (an output
 * the caller did not ask for). If a wanted result is NULL or cannot be
 * published, releases everything, sets every given out to NULL and
 * returns the recorded error. */
wf_status wf__array_publish_all(wf_array **results, wf_array ***outs, int n);

/* A READY array over `buffer` (retained) with contiguous strides; not
 * registered with any scope (an internal builder). */
wf_array *wf__array_new_ready(wf_dtype dtype, const int64_t *shape, int ndim, wf_buffer *buffer);
/* A READY array holding a copy of `data` (bools made 0/1); internal builder
 * behind wf_array_from_data, which checks the arguments. */
wf_array *wf__array_from_data(const void *data, const int64_t *shape, int ndim, wf_dtype dtype);

/* For kernels: gives `out` a fresh contiguous buffer of out->size elements,
 * or the buffer the runtime donated to it (already in out->buffer, exactly
 * the bytes needed; only for WF_PRIM_INPLACE or WF_PRIM_INPLACE_FIRST
 * primitives), laid out as the donor was (row-major unless
 * WF_PRIM_INPLACE_ANY_LAYOUT). */
wf_status wf__array_alloc_output(wf_array *out);
/* The same, but a fresh buffer is laid out with out's dims in `order`
 * (a permutation of 0 .. ndim - 1, outermost first): an element-wise
 * result that keeps its inputs' layout (backend/cpu/layout.c). */
wf_status wf__array_alloc_output_ordered(wf_array *out, const int *order);
/* For kernels: makes `out` a view of `base`'s buffer with the given strides
 * (ndim of out entries, elements) and offset (elements). */
void wf__array_set_view(wf_array *out, const wf_array *base, const int64_t *strides,
                        int64_t offset);

/* Pointer to element 0 of a READY array (buffer data + offset). */
static inline void *wf__array_data_ptr(const wf_array *a)
{
    return (char *)a->buffer->data + a->offset * (int64_t)wf_dtype_size(a->dtype);
}

/* Buffers donated from an input to an output since start (a test counter),
 * and a test hook turning donation off or on (the default is on unless the
 * environment sets WEFT_DONATE=0). */
uint64_t wf__buffers_donated(void);
void wf__donation_enable(bool on);
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
/* A FAILED node's message: its own, or, when keeping a copy ran out of
 * memory (error_message NULL), a fixed text saying it was lost; never
 * empty. */
const char *wf__node_failure_message(const wf_array *n);
/* A new temporary reference to `a` if it is still live, else NULL: never
 * revives a released node (a compare-and-swap from a count > 0). Drop it
 * with wf__array_decref. For reading a handle the caller may not own. */
wf_array *wf__array_try_retain(const wf_array *a);
/* Drops a reference without touching this thread's scope bookkeeping. */
void wf__array_decref(wf_array *a);
/* Buffer donation (runtime/eval.c). Takes over a node whose only
 * references are `refs` held by the caller: a compare-and-swap of the
 * refcount from exactly `refs` to 0. On success nobody can reach the node
 * any more (wf__array_try_retain never revives a count of 0, and every
 * other path to a node holds a reference), so the caller may write into its
 * storage; it frees the node with wf__array_free_retired instead of
 * dropping its references. False (nothing changed) otherwise. */
bool wf__array_retire(wf_array *a, int_fast64_t refs);
void wf__array_free_retired(wf_array *a);
/* Finishes freeing a node whose destructor was deferred (core/deferred_free.h). */
void wf__array_free_deferred(wf_array *a);
/* Adds a reference (internal; no scope bookkeeping). */
static inline wf_array *wf__array_incref(wf_array *a)
{
    atomic_fetch_add_explicit(&a->refcount, 1, memory_order_relaxed);
    return a;
}
/* Drops an internal reference (a builder's temporary); NULL does nothing.
 * No scope bookkeeping. */
static inline void wf__array_release(wf_array *a)
{
    if (a)
        wf__array_decref(a);
}
/* Live array nodes in the process (a leak check for tests). */
int64_t wf__arrays_live(void);

/* The node's id: unique in the process and never reused, so caches and
 * tapes may key on it (never on an address). */
static inline uint64_t wf__array_id(const wf_array *a) { return a->id; }
/* True for a placeholder (tracer) node and every node built from one:
 * evaluation refuses them (WF_ERR_MISUSE). */
static inline bool wf__array_is_placeholder(const wf_array *a)
{
    return (a->node_flags & (WF_NODE_FLAG_PLACEHOLDER | WF_NODE_FLAG_ON_PLACEHOLDER)) != 0;
}
/* A placeholder node of `dtype` and `shape` (no data, no stream): ops build
 * on it (their results are marked too), evaluation refuses it. `shapeless`:
 * it stands for inputs of any shape (WF_NODE_FLAG_SHAPELESS). An internal
 * builder (not registered with any scope); NULL with the error recorded on
 * bad input. */
wf_array *wf__array_new_placeholder(wf_dtype dtype, const int64_t *shape, int ndim,
                                    bool shapeless);
/* Whether `a` was built from a placeholder of a shapeless trace. */
static inline bool wf__array_is_shapeless(const wf_array *a)
{
    return (a->node_flags & WF_NODE_FLAG_SHAPELESS) != 0;
}

/* State helpers (acquire loads). */
static inline int wf__array_state(const wf_array *a)
{
    return atomic_load_explicit(&((wf_array *)a)->state, memory_order_acquire);
}

#endif
