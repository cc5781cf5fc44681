/*
 * Simplifying a tape (DESIGN section 5, step 4): equal scalar constants
 * become one, no-op shape ops and casts disappear, equal nodes (same
 * primitive, parameters and operands) are computed once, and nodes no
 * output needs are dropped. Operands always point to earlier nodes, so one
 * forward pass with a remap table does it.
 */
#include <stdlib.h>
#include <string.h>

#include "compile/tape.h"
#include "core/dtype.h"
#include "core/error.h"
#include "prim/prims.h"

static wf_status out_of_memory(void)
{
    return wf__error(WF_ERR_OUT_OF_MEMORY, "compile: out of memory simplifying a trace");
}

/* ------------------------------------------------------------ constants */

static bool is_scalar_value(const wf_array *a)
{
    return a->ndim == 0 && wf__array_state(a) == WF_NODE_READY;
}

static bool same_scalar(const wf_array *a, const wf_array *b)
{
    return a->dtype == b->dtype &&
           memcmp(wf__array_data_ptr(a), wf__array_data_ptr(b), wf_dtype_size(a->dtype)) == 0;
}

/* const_map[c]: the constant that replaces c (the first equal scalar). */
static void merge_scalar_constants(const wf_tape *t, int *const_map)
{
    for (int c = 0; c < t->nconsts; c++) {
        const_map[c] = c;
        if (!is_scalar_value(t->consts[c]))
            continue;
        for (int d = 0; d < c; d++) {
            if (const_map[d] == d && is_scalar_value(t->consts[d]) &&
                same_scalar(t->consts[c], t->consts[d])) {
                const_map[c] = d;
                break;
            }
        }
    }
}

/* ------------------------------------------------------------ no-ops */

static bool ref_desc(const wf_tape *t, const wf_tape_node *nodes, wf_tape_ref r, wf_dtype *dtype,
                     int *ndim, const int64_t **shape)
{
    if (r.kind == WF_TAPE_CONST) {
        const wf_array *a = t->consts[r.index];
        *dtype = a->dtype;
        *ndim = a->ndim;
        *shape = a->shape;
        return true;
    }
    if (r.kind == WF_TAPE_NODE) {
        *dtype = nodes[r.index].dtype;
        *ndim = nodes[r.index].ndim;
        *shape = nodes[r.index].shape;
        return true;
    }
    return false; /* an input: its description is the call's */
}

/* A reshape, broadcast or cast to what the operand already is, or an
 * identity transpose. */
static bool is_noop(const wf_tape *t, const wf_tape_node *nodes, const wf_tape_node *n)
{
    if (n->prim == &wf__prim_transpose) {
        const wf_transpose_params *p = n->params;
        for (int d = 0; d < p->ndim; d++)
            if (p->perm[d] != d)
                return false;
        return true;
    }
    if (n->prim != &wf__prim_reshape && n->prim != &wf__prim_broadcast_to &&
        n->prim != &wf__prim_astype)
        return false;
    wf_dtype dtype;
    int ndim;
    const int64_t *shape;
    if (!ref_desc(t, nodes, n->inputs[0], &dtype, &ndim, &shape))
        return false;
    return dtype == n->dtype && wf__shape_equal(shape, ndim, n->shape, n->ndim);
}

/* ------------------------------------------------------------ equal nodes */

static uint64_t node_hash(const wf_tape_node *n)
{
    uint64_t h = (uint64_t)(uintptr_t)n->prim * 0x9e3779b97f4a7c15u;
    h ^= n->prim->params_size ? wf__prim_params_hash(n->prim, n->params) : 0;
    for (int i = 0; i < n->ninputs; i++)
        h = (h ^ (uint64_t)(n->inputs[i].kind * 1000003 + n->inputs[i].index)) * 0x100000001b3u;
    return h ^ (h >> 31);
}

static bool node_equal(const wf_tape_node *a, const wf_tape_node *b)
{
    if (a->prim != b->prim || a->ninputs != b->ninputs || (a->prim->flags & WF_PRIM_COLLECTIVE))
        return false;
    for (int i = 0; i < a->ninputs; i++)
        if (a->inputs[i].kind != b->inputs[i].kind || a->inputs[i].index != b->inputs[i].index)
            return false;
    return !a->prim->params_size || wf__prim_params_equal(a->prim, a->params, b->params);
}

/* ------------------------------------------------------------ the pass */

struct remap {
    int *consts;    /* old const -> kept const */
    wf_tape_ref *nodes; /* old node -> new ref */
};

static wf_tape_ref remap_ref(const struct remap *m, wf_tape_ref r)
{
    if (r.kind == WF_TAPE_CONST)
        return (wf_tape_ref){WF_TAPE_CONST, m->consts[r.index]};
    if (r.kind == WF_TAPE_NODE)
        return m->nodes[r.index];
    return r;
}

/* Drops nodes and constants no output reaches; renumbers what is left. */
static wf_status drop_dead(wf_tape *t)
{
    char *live_node = calloc((size_t)t->nnodes + 1, 1);
    char *live_const = calloc((size_t)t->nconsts + 1, 1);
    int *node_index = malloc(((size_t)t->nnodes + 1) * sizeof *node_index);
    int *const_index = malloc(((size_t)t->nconsts + 1) * sizeof *const_index);
    if (!live_node || !live_const || !node_index || !const_index) {
        free(live_node);
        free(live_const);
        free(node_index);
        free(const_index);
        return out_of_memory();
    }
    for (int i = 0; i < t->noutputs; i++) {
        if (t->outputs[i].kind == WF_TAPE_NODE)
            live_node[t->outputs[i].index] = 1;
        else if (t->outputs[i].kind == WF_TAPE_CONST)
            live_const[t->outputs[i].index] = 1;
    }
    for (int i = t->nnodes - 1; i >= 0; i--) {
        if (!live_node[i])
            continue;
        for (int k = 0; k < t->nodes[i].ninputs; k++) {
            wf_tape_ref r = t->nodes[i].inputs[k];
            if (r.kind == WF_TAPE_NODE)
                live_node[r.index] = 1;
            else if (r.kind == WF_TAPE_CONST)
                live_const[r.index] = 1;
        }
    }
    int kept = 0;
    for (int c = 0; c < t->nconsts; c++) {
        if (live_const[c]) {
            const_index[c] = kept;
            t->consts[kept++] = t->consts[c];
        } else {
            wf__array_decref(t->consts[c]);
        }
    }
    t->nconsts = kept;
    kept = 0;
    for (int i = 0; i < t->nnodes; i++) {
        wf_tape_node *n = &t->nodes[i];
        if (!live_node[i]) {
            wf__tape_params_free(n->prim, n->params);
            free(n->inputs);
            continue;
        }
        for (int k = 0; k < n->ninputs; k++) {
            if (n->inputs[k].kind == WF_TAPE_NODE)
                n->inputs[k].index = node_index[n->inputs[k].index];
            else if (n->inputs[k].kind == WF_TAPE_CONST)
                n->inputs[k].index = const_index[n->inputs[k].index];
        }
        node_index[i] = kept;
        t->nodes[kept++] = *n;
    }
    t->nnodes = kept;
    for (int i = 0; i < t->noutputs; i++) {
        if (t->outputs[i].kind == WF_TAPE_NODE)
            t->outputs[i].index = node_index[t->outputs[i].index];
        else if (t->outputs[i].kind == WF_TAPE_CONST)
            t->outputs[i].index = const_index[t->outputs[i].index];
    }
    free(live_node);
    free(live_const);
    free(node_index);
    free(const_index);
    return WF_OK;
}

wf_status wf__tape_simplify(wf_tape *t)
{
    size_t nbuckets = 16;
    while (nbuckets < (size_t)t->nnodes * 2)
        nbuckets *= 2;
    struct remap m = {malloc(((size_t)t->nconsts + 1) * sizeof(int)),
                      malloc(((size_t)t->nnodes + 1) * sizeof(wf_tape_ref))};
    int *buckets = malloc(nbuckets * sizeof *buckets); /* kept node index, -1 empty */
    if (!m.consts || !m.nodes || !buckets) {
        free(m.consts);
        free(m.nodes);
        free(buckets);
        return out_of_memory();
    }
    for (size_t b = 0; b < nbuckets; b++)
        buckets[b] = -1;
    merge_scalar_constants(t, m.consts);
    int kept = 0;
    for (int i = 0; i < t->nnodes; i++) {
        wf_tape_node n = t->nodes[i];
        for (int k = 0; k < n.ninputs; k++)
            n.inputs[k] = remap_ref(&m, n.inputs[k]);
        if (is_noop(t, t->nodes, &n)) {
            m.nodes[i] = n.inputs[0];
            wf__tape_params_free(n.prim, n.params);
            free(n.inputs);
            continue;
        }
        /* Linear probing over kept nodes (the table has room for all). */
        size_t b = (size_t)node_hash(&n) & (nbuckets - 1);
        while (buckets[b] >= 0 && !node_equal(&t->nodes[buckets[b]], &n))
            b = (b + 1) & (nbuckets - 1);
        if (buckets[b] >= 0) {
            m.nodes[i] = (wf_tape_ref){WF_TAPE_NODE, buckets[b]};
            wf__tape_params_free(n.prim, n.params);
            free(n.inputs);
            continue;
        }
        buckets[b] = kept;
        m.nodes[i] = (wf_tape_ref){WF_TAPE_NODE, kept};
        t->nodes[kept++] = n;
    }
    t->nnodes = kept;
    for (int i = 0; i < t->noutputs; i++)
        t->outputs[i] = remap_ref(&m, t->outputs[i]);
    free(m.consts);
    free(m.nodes);
    free(buckets);
    return drop_dead(t);
}
