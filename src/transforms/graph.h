/*
 * The traced graph a transform walks. Internal.
 *
 * Built from a trace's outputs back to its tracers, depth first without
 * recursion (a chain of a million nodes must not overflow the stack). Only
 * nodes built under a transform (keep_graph) are looked into: their inputs
 * never change after creation, so reading them is safe while other threads
 * evaluate the same nodes. Every other node is a constant of the trace.
 */
#ifndef WEFT_TRANSFORMS_GRAPH_H
#define WEFT_TRANSFORMS_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/array.h"

typedef struct wf_graph_entry {
    wf_array *node;
    int tracer; /* index of the tracer this node is, or -1 */
    bool active; /* a tracer, or computed from one */
    bool needed; /* forward engines: an output depends on its value */
    /* The engine's value for the node (a cotangent, a tangent, a batched
     * value), borrowed from the engine's scope; NULL is "zero" / "not
     * batched". */
    wf_array *value;
    int axis; /* vmap: the batch axis of `value` */
} wf_graph_entry;

typedef struct wf_graph {
    wf_graph_entry *entries;
    size_t count, capacity;
    int *slots; /* open addressing: entry index + 1, 0 for empty */
    size_t nslots;
    int *order; /* active non-tracer entries, inputs before users */
    size_t norder;
} wf_graph;

/* Builds the graph of `outputs` with `tracers` as its leaves. */
wf_status wf__graph_build(wf_graph *g, wf_array *const *outputs, size_t noutputs,
                          wf_array *const *tracers, size_t ntracers);
/* Marks the active entries a forward engine must compute for `outputs`:
 * their inputs, except those uses(node, i) says the node's rule ignores. */
void wf__graph_mark_needed(wf_graph *g, wf_array *const *outputs, size_t noutputs,
                           bool (*uses)(const wf_array *node, int input, void *ctx), void *ctx);
/* The entry of `node`, or NULL if the walk never reached it. */
wf_graph_entry *wf__graph_find(const wf_graph *g, const wf_array *node);
void wf__graph_free(wf_graph *g);

#endif
