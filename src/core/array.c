/*
 * Array nodes: creation, references, release and metadata.
 *
 * Node headers come from a type-stable pool (core/node_pool.c): their memory
 * is never returned to the system, and a released node is reused only after
 * WF_NODE_QUARANTINE other nodes of its shard were released, so a handle used
 * after its release is caught (refcount 0) instead of touching freed memory.
 *
 * Stale handles without data races. A thread holding a released handle may
 * load the node's refcount at any moment, even while the node is reused, so
 * the refcount is only ever written atomically: reinitialising a reused node
 * clears every field but the refcount, and a node goes live (refcount
 * 0 -> 1, release) only once it is fully built. Anything else read through a
 * handle the caller may not own (metadata) is read under a temporary
 * reference taken with wf__array_try_retain, which never revives a node.
 */
#include "core/array.h"

#include <assert.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/deferred_free.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/graph_mode.h"
#include "core/node_pool.h"
#include "core/scope.h"
#include "core/stream_hooks.h"
#include "util/fault.h"

/* ------------------------------------------------------------ nodes */

static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

/* Zeroes a node taken from the pool, all but its refcount (see the top of
 * this file). The atomics cleared here are loaded only by threads holding a
 * reference, and a free node has none; they are then set atomically. */
static void node_clear(wf_array *n)
{
    static_assert(offsetof(wf_array, refcount) == 0, "the refcount comes first");
    size_t start = sizeof n->refcount;
    memset((char *)n + start, 0, sizeof *n - start);
    atomic_init(&n->state, WF_NODE_PENDING);
    atomic_init(&n->dense_copy, NULL);
}

/* A node with shape, strides, params, input and result slots, not yet live
 * (refcount 0): node_make_live publishes it once it is built. */
static wf_array *node_alloc(wf_dtype dtype, const int64_t *shape, int ndim, int64_t size,
                            size_t params_size, int ninputs, int nresults)
{
    size_t dims_bytes = 2 * (size_t)ndim * sizeof(int64_t);
    size_t inputs_at = dims_bytes + align8(params_size);
    size_t results_at = inputs_at + (size_t)ninputs * sizeof(wf_array *);
    size_t extra_bytes = results_at + (size_t)nresults * sizeof(wf_array *);
    char *extra = extra_bytes ? wf__malloc(extra_bytes) : NULL;
    if (extra_bytes && !extra) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "out of memory creating an array node");
        return NULL;
    }
    uint64_t id;
    wf_array *n = wf__node_pool_take(&id);
    if (!n) {
        free(extra);
        wf__error(WF_ERR_OUT_OF_MEMORY, "out of memory creating an array node");
        return NULL;
    }
    node_clear(n);
    n->id = id;
    n->extra = extra;
    n->dtype = dtype;
    n->ndim = ndim;
    n->size = size;
    n->shape = ndim ? (int64_t *)extra : NULL;
    n->strides = ndim ? n->shape + ndim : NULL;
    if (ndim)
        memcpy(n->shape, shape, (size_t)ndim * sizeof(int64_t));
    if (params_size)
        n->params = extra + dims_bytes;
    if (ninputs)
        n->inputs = (wf_array **)(extra + inputs_at);
    if (nresults) {
        n->results = (wf_array **)(extra + results_at);
        for (int i = 0; i < nresults; i++)
            n->results[i] = NULL;
    }
    return n;
}

/* Makes a built node live with one reference (release: whoever sees it
 * live sees every field written before). */
static wf_array *node_make_live(wf_array *n)
{
    atomic_store_explicit(&n->refcount, 1, memory_order_release);
    return n;
}

/* Nodes whose refcount reached 0 and still need freeing. */
struct free_list {
    wf_array **items;
    size_t count, capacity;
    wf_array *local[64];
};

static void free_graph_from(wf_array *root);

static void free_list_push(struct free_list *list, wf_array *n)
{
    if (list->count == list->capacity) {
        size_t grown = list->capacity * 2;
        wf_array **bigger = wf__malloc(grown * sizeof *bigger);
        if (!bigger) { /* out of memory: free this branch with a list of its own */
            free_graph_from(n);
            return;
        }
        memcpy(bigger, list->items, list->count * sizeof *bigger);
        if (list->items != list->local)
            free(list->items);
        list->items = bigger;
        list->capacity = grown;
    }
    list->items[list->count++] = n;
}

static void release_buffers(wf_array *n)
{
    wf_buffer *dense = atomic_load(&n->dense_copy);
    if (dense)
        wf__buffer_release(dense);
    atomic_store(&n->dense_copy, NULL);
    if (n->buffer)
        wf__buffer_release(n->buffer);
    n->buffer = NULL;
}

/* Frees one node whose refcount reached 0; queues inputs that reach 0. A
 * node with a payload destructor freed where user code may not run keeps
 * the rest for later (core/deferred_free.h); its bytes go at once. */
static void node_free(wf_array *n, struct free_list *list)
{
    release_buffers(n);
    if (n->prim && n->prim->params_release && wf__free_deferring()) {
        wf__free_defer_push(n);
        return;
    }
    for (int i = 0; i < n->ninputs; i++) {
        wf_array *in = n->inputs[i];
        if (atomic_fetch_sub_explicit(&in->refcount, 1, memory_order_acq_rel) == 1)
            free_list_push(list, in);
    }
    for (int i = 0; n->results && i < wf__prim_noutputs(n->prim) - 1; i++) {
        wf_array *r = n->results[i];
        if (r && atomic_fetch_sub_explicit(&r->refcount, 1, memory_order_acq_rel) == 1)
            free_list_push(list, r);
    }
    wf__node_stream_drop(n->stream);
    if (n->prim && n->prim->params_release)
        n->prim->params_release(n->params);
    free(n->error_message);
    free(n->extra);
    n->extra = NULL;
    wf__node_pool_give_back(n);
}

/* Frees a graph without recursion: a chain of a million nodes must not
 * overflow the stack. */
static void free_graph_from(wf_array *root)
{
    struct free_list list = {.count = 0, .capacity = 64};
    list.items = list.local;
    list.items[list.count++] = root;
    while (list.count)
        node_free(list.items[--list.count], &list);
    if (list.items != list.local)
        free(list.items);
}

void wf__array_decref(wf_array *a)
{
    if (atomic_fetch_sub_explicit(&a->refcount, 1, memory_order_acq_rel) == 1)
        free_graph_from(a);
}

void wf__array_free_deferred(wf_array *a) { free_graph_from(a); }

bool wf__array_retire(wf_array *a, int_fast64_t refs)
{
    int_fast64_t expected = refs;
    /* acq_rel: every earlier holder's reads of the node and its storage
     * (released by its decref) happen before the caller writes into it. */
    return atomic_compare_exchange_strong_explicit(&a->refcount, &expected, 0,
                                                   memory_order_acq_rel, memory_order_relaxed);
}

void wf__array_free_retired(wf_array *a) { free_graph_from(a); }

const char *wf__node_failure_message(const wf_array *n)
{
    return n->error_message ? n->error_message
                            : "the evaluation failed; its message was lost (out of memory)";
}

wf_array *wf__array_check(const wf_array *a, const char *op, const char *what)
{
    if (!a) {
        wf__null_input(op, what);
        return NULL;
    }
    if (atomic_load_explicit(&((wf_array *)a)->refcount, memory_order_acquire) <= 0) {
        wf__error(WF_ERR_MISUSE, "%s: %s was already released", op, what);
        return NULL;
    }
    return (wf_array *)a;
}

wf_array *wf__array_try_retain(const wf_array *a)
{
    atomic_int_fast64_t *refcount = &((wf_array *)a)->refcount;
    int_fast64_t count = atomic_load_explicit(refcount, memory_order_relaxed);
    while (count > 0)
        if (atomic_compare_exchange_weak_explicit(refcount, &count, count + 1,
                                                  memory_order_acquire, memory_order_relaxed))
            return (wf_array *)a;
    return NULL;
}

wf_array *wf__array_publish(wf_array *a)
{
    if (a && wf__scope_adopt(a) != WF_OK) {
        wf__array_decref(a);
        return NULL;
    }
    return a;
}

wf_status wf__array_publish_all(wf_array **results, wf_array ***outs, int n)
{
    bool ok = true;
    for (int i = 0; i < n; i++)
        ok = ok && (results[i] || !outs[i]);
    int handed = 0; /* results[0, handed) are published or dropped */
    for (; ok && handed < n; handed++) {
        wf_array *r = results[handed];
        results[handed] = NULL;
        if (!outs[handed]) {
            wf__array_release(r);
            continue;
        }
        *outs[handed] = wf__array_publish(r); /* drops r if it fails */
        ok = *outs[handed] != NULL;
    }
    if (ok)
        return WF_OK;
    const wf_status st = wf_last_error();
    for (int i = 0; i < n; i++) {
        if (i >= handed)
            wf__array_release(results[i]);
        if (!outs[i])
            continue;
        if (i < handed && *outs[i])
            wf_release(*outs[i]);
        *outs[i] = NULL;
    }
    return st;
}

bool wf__prim_params_equal(const wf_prim_def *prim, const void *a, const void *b)
{
    if (prim->params_equal)
        return prim->params_equal(a, b);
    return prim->params_size == 0 || memcmp(a, b, prim->params_size) == 0;
}

uint64_t wf__prim_params_hash(const wf_prim_def *prim, const void *params)
{
    if (prim->params_hash)
        return prim->params_hash(params);
    uint64_t h = 0xcbf29ce484222325u; /* FNV-1a over the bytes */
    const unsigned char *bytes = params;
    for (size_t i = 0; i < prim->params_size; i++)
        h = (h ^ bytes[i]) * 0x100000001b3u;
    return h;
}

/* A node built from a placeholder cannot be evaluated either; one built
 * from a shapeless trace's placeholder is shapeless too, and marked (as
 * everything built from it) when a rule that reads the traced shapes
 * builds it. */
static unsigned flags_from_inputs(wf_array *const *inputs, int ninputs)
{
    unsigned flags = 0;
    for (int i = 0; i < ninputs; i++) {
        if (wf__array_is_placeholder(inputs[i]))
            flags |= WF_NODE_FLAG_ON_PLACEHOLDER;
        flags |= inputs[i]->node_flags & (WF_NODE_FLAG_SHAPELESS | WF_NODE_FLAG_TRACED_SHAPE);
    }
    if ((flags & WF_NODE_FLAG_SHAPELESS) && wf__graph_traced_shape_depth() > 0)
        flags |= WF_NODE_FLAG_TRACED_SHAPE;
    return flags;
}

/* The node owns what its params own from the start: every failure before
 * the node exists releases them here, and after that node_free does. The
 * release runs on a copy: `params` may be the caller's own struct (a compiled
 * tape's node, replayed), and a release clears the fields it drops (the
 * fused program), which would leave the tape without them. */
static wf_array *fail_before_node(const wf_prim_def *prim, const void *params)
{
    if (prim->params_release) {
        max_align_t copy[(prim->params_size + sizeof(max_align_t) - 1) / sizeof(max_align_t) + 1];
        memcpy(copy, params, prim->params_size);
        prim->params_release(copy);
    }
    return NULL;
}

enum { LOCAL_DESCS = 8 };

/* Runs prim->infer on the inputs' descriptions into outputs. */
static wf_status infer_outputs(const wf_prim_def *prim, const void *params,
                               wf_array *const *inputs, int ninputs, wf_out_desc *outputs)
{
    wf_desc local[LOCAL_DESCS];
    wf_desc *descs = ninputs ? local : NULL; /* no inputs: nothing to describe */
    if (ninputs > LOCAL_DESCS) {
        descs = wf__malloc((size_t)ninputs * sizeof *descs);
        if (!descs)
            return wf__error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory", prim->name);
    }
    for (int i = 0; i < ninputs; i++)
        descs[i] = wf__array_desc(inputs[i]);
    wf_status st = prim->infer(params, descs, ninputs, outputs);
    if (descs != local)
        free(descs);
    return st;
}

/* The hidden result nodes 1.. of a multi-output primary (see wf_array). */
static wf_status make_results(wf_array *primary, const wf_out_desc *outputs, int noutputs)
{
    for (int i = 1; i < noutputs; i++) {
        int64_t size;
        if (wf__shape_size(primary->prim->name, outputs[i].shape, outputs[i].ndim, &size) !=
            WF_OK)
            return wf_last_error();
        wf_array *result =
            node_alloc(outputs[i].dtype, outputs[i].shape, outputs[i].ndim, size, 0, 0, 0);
        if (!result)
            return wf_last_error();
        result->node_flags = primary->node_flags;
        primary->results[i - 1] = node_make_live(result);
    }
    return WF_OK;
}

wf_array *wf__node_new(const wf_prim_def *prim, const void *params, wf_array *const *inputs,
                       int ninputs)
{
    for (int i = 0; i < ninputs; i++)
        if (!wf__array_check(inputs[i], prim->name, "an input"))
            return fail_before_node(prim, params);
    const int noutputs = wf__prim_noutputs(prim);
    wf_out_desc one, *outputs = &one;
    if (noutputs > 1 && !(outputs = wf__malloc((size_t)noutputs * sizeof *outputs))) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory", prim->name);
        return fail_before_node(prim, params);
    }
    wf_array *n = NULL;
    wf_stream *stream = NULL;
    int64_t size;
    if (infer_outputs(prim, params, inputs, ninputs, outputs) == WF_OK &&
        wf__shape_size(prim->name, outputs[0].shape, outputs[0].ndim, &size) == WF_OK &&
        wf__node_stream_take(&stream) == WF_OK)
        n = node_alloc(outputs[0].dtype, outputs[0].shape, outputs[0].ndim, size,
                       prim->params_size, ninputs, noutputs - 1);
    if (!n) {
        wf__node_stream_drop(stream);
        if (outputs != &one)
            free(outputs);
        return fail_before_node(prim, params);
    }
    n->node_flags = flags_from_inputs(inputs, ninputs);
    n->prim = prim;
    if (prim->params_size)
        memcpy(n->params, params, prim->params_size);
    for (int i = 0; i < ninputs; i++)
        n->inputs[i] = wf__array_incref(inputs[i]);
    n->ninputs = ninputs;
    n->keep_graph = wf__graph_keep_depth() > 0;
    n->stream = stream;
    wf_status st = make_results(n, outputs, noutputs);
    if (outputs != &one)
        free(outputs);
    if (st != WF_OK) {
        free_graph_from(n); /* never live: frees the results made so far and the params */
        return NULL;
    }
    return node_make_live(n);
}

wf_array *wf__array_new_ready(wf_dtype dtype, const int64_t *shape, int ndim, wf_buffer *buffer)
{
    int64_t size;
    if (wf__shape_size("array", shape, ndim, &size) != WF_OK)
        return NULL;
    wf_array *n = node_alloc(dtype, shape, ndim, size, 0, 0, 0);
    if (!n)
        return NULL;
    wf__contiguous_strides(n->shape, ndim, n->strides);
    n->row_contiguous = true;
    n->buffer = wf__buffer_retain(buffer);
    atomic_store_explicit(&n->state, WF_NODE_READY, memory_order_release);
    return node_make_live(n);
}

wf_status wf__array_alloc_output(wf_array *out)
{
    int order[WF_MAX_NDIM];
    for (int d = 0; d < out->ndim; d++)
        order[d] = d;
    return wf__array_alloc_output_ordered(out, order);
}

wf_status wf__array_alloc_output_ordered(wf_array *out, const int *order)
{
    out->offset = 0;
    if (out->buffer) /* donated by the runtime with the donor's strides (runtime/eval.c) */
        return WF_OK;
    size_t bytes = (size_t)out->size * wf_dtype_size(out->dtype);
    wf_buffer *b = wf__buffer_alloc(bytes);
    if (!b)
        return wf_last_error();
    out->buffer = b;
    int64_t stride = 1;
    for (int k = out->ndim - 1; k >= 0; k--) {
        out->strides[order[k]] = stride;
        stride *= out->shape[order[k]] > 0 ? out->shape[order[k]] : 1;
    }
    out->row_contiguous = wf__is_row_contiguous(out->shape, out->strides, out->ndim);
    return WF_OK;
}

void wf__array_set_view(wf_array *out, const wf_array *base, const int64_t *strides, int64_t offset)
{
    out->buffer = wf__buffer_retain(base->buffer);
    out->offset = offset;
    if (out->ndim)
        memcpy(out->strides, strides, (size_t)out->ndim * sizeof(int64_t));
    out->row_contiguous = wf__is_row_contiguous(out->shape, out->strides, out->ndim);
}

/* ------------------------------------------------------------ public API */

wf_array *wf_retain(wf_array *a)
{
    if (!a) {
        wf__null_input("wf_retain", "the array");
        return NULL;
    }
    /* One atomic step refuses a handle released before this call or by
     * another thread during it (a separate check first would leave a gap). */
    if (!wf__array_try_retain(a)) {
        wf__error(WF_ERR_MISUSE, "wf_retain: the array was already released");
        return NULL;
    }
    return wf__array_publish(a);
}

wf_array *wf_retain_unscoped(wf_array *a)
{
    if (!wf__array_check(a, "wf_retain_unscoped", "the array"))
        return NULL;
    return wf__array_incref(a);
}

void wf_release(wf_array *a)
{
    if (!a)
        return;
    if (!wf__array_check(a, "wf_release", "the array"))
        return;
    wf__scope_forget(a);
    wf__array_decref(a);
}

static wf_status check_new_shape(const char *op, const int64_t *shape, int ndim, wf_dtype dtype,
                                 int64_t *size)
{
    if (!wf__dtype_valid(dtype))
        return wf__error(WF_ERR_DTYPE, "%s: invalid dtype %d", op, (int)dtype);
    return wf__shape_size(op, shape, ndim, size);
}

wf_array *wf__array_new_placeholder(wf_dtype dtype, const int64_t *shape, int ndim,
                                    bool shapeless)
{
    int64_t size;
    if (check_new_shape("placeholder", shape, ndim, dtype, &size) != WF_OK)
        return NULL;
    wf_array *n = node_alloc(dtype, shape, ndim, size, 0, 0, 0);
    if (!n)
        return NULL;
    wf__contiguous_strides(n->shape, ndim, n->strides);
    n->node_flags = WF_NODE_FLAG_PLACEHOLDER | (shapeless ? WF_NODE_FLAG_SHAPELESS : 0u);
    return node_make_live(n);
}

wf_array *wf__array_from_data(const void *data, const int64_t *shape, int ndim, wf_dtype dtype)
{
    int64_t size;
    if (wf__shape_size("wf_array_from_data", shape, ndim, &size) != WF_OK)
        return NULL;
    size_t bytes = (size_t)size * wf_dtype_size(dtype);
    wf_buffer *b = wf__buffer_alloc(bytes);
    if (!b)
        return NULL;
    if (dtype == WF_DTYPE_BOOL) { /* keep bools canonical 0/1 */
        for (int64_t i = 0; i < size; i++)
            ((uint8_t *)b->data)[i] = ((const uint8_t *)data)[i] != 0;
    } else if (bytes) {
        memcpy(b->data, data, bytes);
    }
    wf_array *a = wf__array_new_ready(dtype, shape, ndim, b);
    wf__buffer_release(b);
    return a;
}

wf_array *wf_array_from_data(const void *data, const int64_t *shape, int ndim, wf_dtype dtype)
{
    int64_t size;
    if (check_new_shape("wf_array_from_data", shape, ndim, dtype, &size) != WF_OK)
        return NULL;
    if (!data && size > 0) {
        wf__error(WF_ERR_NULL_ARGUMENT, "wf_array_from_data: data is NULL for %lld elements",
                  (long long)size);
        return NULL;
    }
    return wf__array_publish(wf__array_from_data(data, shape, ndim, dtype));
}

wf_array *wf_scalar(double value, wf_dtype dtype)
{
    if (!wf__dtype_valid(dtype)) {
        wf__error(WF_ERR_DTYPE, "wf_scalar: invalid dtype %d", (int)dtype);
        return NULL;
    }
    wf_buffer *b = wf__buffer_alloc(wf_dtype_size(dtype));
    if (!b)
        return NULL;
    wf__store_from_double(b->data, dtype, 0, value);
    wf_array *a = wf__array_new_ready(dtype, NULL, 0, b);
    wf__buffer_release(b);
    return wf__array_publish(a);
}

/* Metadata calls read through a temporary reference (see the top of this
 * file): NULL for NULL or a released array. */
static wf_array *borrow(const wf_array *a) { return a ? wf__array_try_retain(a) : NULL; }

static void unborrow(wf_array *a)
{
    if (a)
        wf__array_decref(a);
}

int wf_array_ndim(const wf_array *a)
{
    wf_array *h = borrow(a);
    int ndim = h ? h->ndim : 0;
    unborrow(h);
    return ndim;
}

const int64_t *wf_array_shape(const wf_array *a)
{
    wf_array *h = borrow(a);
    const int64_t *shape = h && h->ndim ? h->shape : NULL;
    unborrow(h);
    return shape;
}

int64_t wf_array_dim(const wf_array *a, int axis)
{
    wf_array *h = borrow(a);
    int64_t dim = -1;
    if (h && axis >= -h->ndim && axis < h->ndim)
        dim = h->shape[axis < 0 ? axis + h->ndim : axis];
    unborrow(h);
    return dim;
}

int64_t wf_array_size(const wf_array *a)
{
    wf_array *h = borrow(a);
    int64_t size = h ? h->size : 0;
    unborrow(h);
    return size;
}

wf_dtype wf_array_dtype(const wf_array *a)
{
    wf_array *h = borrow(a);
    wf_dtype dtype = h ? h->dtype : WF_DTYPE_COUNT;
    unborrow(h);
    return dtype;
}

size_t wf_array_nbytes(const wf_array *a)
{
    wf_array *h = borrow(a);
    size_t bytes = h ? (size_t)h->size * wf_dtype_size(h->dtype) : 0;
    unborrow(h);
    return bytes;
}

bool wf_array_is_evaluated(const wf_array *a)
{
    wf_array *h = borrow(a);
    bool evaluated = h && wf__array_state(h) >= WF_NODE_READY;
    unborrow(h);
    return evaluated;
}

uint64_t wf_array_id(const wf_array *a)
{
    wf_array *h = borrow(a);
    uint64_t id = h ? wf__array_id(h) : 0;
    unborrow(h);
    return id;
}

/* ------------------------------------------------------------ external memory */

/* Element offsets (from element 0) of the lowest and highest elements that
 * `strides` reach, kept within 2^60 (as wf__shape_size keeps sizes) so that
 * byte offsets never overflow. Only called for non-empty arrays. */
static wf_status external_extent(const int64_t *shape, const int64_t *strides, int ndim,
                                 int64_t *lowest, int64_t *highest)
{
    const int64_t limit = INT64_MAX / 8;
    int64_t lo = 0, hi = 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 1)
            continue; /* a stride over one element reaches nothing */
        int64_t stride = strides[i];
        if (stride < -limit || stride > limit)
            return wf__error(WF_ERR_OVERFLOW,
                             "wf_array_from_external: stride %d (%lld) is out of range", i,
                             (long long)stride);
        int64_t magnitude = stride < 0 ? -stride : stride;
        if (magnitude && shape[i] - 1 > (limit - (hi - lo)) / magnitude)
            return wf__error(WF_ERR_OVERFLOW,
                             "wf_array_from_external: strides span more than 2^60 elements");
        if (stride < 0)
            lo -= magnitude * (shape[i] - 1);
        else
            hi += magnitude * (shape[i] - 1);
    }
    *lowest = lo;
    *highest = hi;
    return WF_OK;
}

/* Kernels rely on bools being 0 or 1; external memory cannot be fixed up. */
static bool external_bools_canonical(const uint8_t *first, const int64_t *shape,
                                     const int64_t *strides, int ndim, int64_t size)
{
    int64_t index[WF_MAX_NDIM] = {0};
    int64_t offset = 0;
    for (int64_t n = 0; n < size; n++) {
        if (first[offset] > 1)
            return false;
        for (int i = ndim - 1; i >= 0; i--) { /* next index, last axis fastest */
            offset += strides[i];
            if (++index[i] < shape[i])
                break;
            offset -= strides[i] * shape[i];
            index[i] = 0;
        }
    }
    return true;
}

/* Checks the memory an external array would read; fills its layout. */
static wf_status check_external_memory(void *data, const int64_t *shape, int ndim,
                                       wf_dtype dtype, const int64_t *strides, int64_t size,
                                       int64_t *layout_strides, int64_t *lowest, int64_t *highest)
{
    const char *op = "wf_array_from_external";
    size_t item = wf_dtype_size(dtype);
    if (!data && size > 0)
        return wf__error(WF_ERR_NULL_ARGUMENT, "%s: data is NULL for %lld elements", op,
                         (long long)size);
    if ((uintptr_t)data % item != 0)
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "%s: data %p is not aligned for %s (%zu bytes)", op, data,
                         wf_dtype_name(dtype), item);
    *lowest = *highest = 0;
    if (size == 0 || !strides) { /* an empty array reads nothing: strides unused */
        wf__contiguous_strides(shape, ndim, layout_strides);
        *highest = size > 0 ? size - 1 : 0;
    } else {
        if (external_extent(shape, strides, ndim, lowest, highest) != WF_OK)
            return wf_last_error();
        memcpy(layout_strides, strides, (size_t)ndim * sizeof(int64_t));
    }
    if (size == 0)
        return WF_OK;
    uintptr_t below = (uintptr_t)(-*lowest) * item, above = (uintptr_t)(*highest + 1) * item;
    if ((uintptr_t)data < below || UINTPTR_MAX - (uintptr_t)data < above)
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "%s: the strides reach outside the address space from data %p", op,
                         data);
    if (dtype == WF_DTYPE_BOOL &&
        !external_bools_canonical(data, shape, layout_strides, ndim, size))
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "%s: bool data holds a byte other than 0 or 1", op);
    return WF_OK;
}

wf_array *wf_array_from_external(void *data, const int64_t *shape, int ndim, wf_dtype dtype,
                                 const int64_t *strides, wf_external_deleter deleter, void *ctx)
{
    const char *op = "wf_array_from_external";
    int64_t size;
    if (check_new_shape(op, shape, ndim, dtype, &size) != WF_OK)
        return NULL;
    if (!deleter && ctx) {
        wf__error(WF_ERR_INVALID_ARGUMENT,
                  "%s: ctx is set but deleter is NULL (ctx would never be given back)", op);
        return NULL;
    }
    int64_t layout[WF_MAX_NDIM], lowest = 0, highest = 0;
    if (check_external_memory(data, shape, ndim, dtype, strides, size, layout, &lowest,
                              &highest) != WF_OK)
        return NULL;

    size_t item = wf_dtype_size(dtype);
    char *first_byte = size ? (char *)data + lowest * (int64_t)item : data;
    size_t bytes = size ? (size_t)(highest - lowest + 1) * item : 0;
    wf_buffer *b = wf__buffer_wrap_external(first_byte, bytes, deleter, data, ctx);
    if (!b)
        return NULL;
    /* Until the buffer is attached, a failure frees it without the deleter. */
    wf_array *n = node_alloc(dtype, shape, ndim, size, 0, 0, 0);
    if (n) /* live before the buffer: like a kernel's output, it is read once READY */
        n = wf__array_publish(node_make_live(n));
    if (!n) {
        wf__buffer_discard_external(b);
        return NULL;
    }
    if (ndim)
        memcpy(n->strides, layout, (size_t)ndim * sizeof(int64_t));
    n->offset = -lowest;
    n->row_contiguous = wf__is_row_contiguous(n->shape, n->strides, ndim);
    n->buffer = b;
    atomic_store_explicit(&n->state, WF_NODE_READY, memory_order_release);
    return n;
}
