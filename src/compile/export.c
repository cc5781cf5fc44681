/*
 * Exporting functions (weft.h, "export and import"): trace a function once
 * per signature with the compile tracer, simplify the tape (no fusion: a
 * fused node's program is not a plain value), and append it to a file in
 * the format of compile/export_format.h.
 *
 * The function runs with this thread's graph kept (as under a transform),
 * so the arrays it builds keep their inputs even once evaluated: a
 * constant it computed (zeros, a sum of captured arrays) is written as the
 * graph that computes it, down to arrays made from data or built before
 * the export, which are written as data.
 *
 * Random draws from the thread's default key become constants: the key
 * each draw took while tracing is written as data, so the imported
 * function gives the numbers the exporting call drew, every call (as
 * MLX's export does). Constants are evaluated and written as data; one
 * captured by several traces of an exporter is written once.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile/export_format.h"
#include "compile/tape.h"
#include "core/error.h"
#include "core/graph_mode.h"
#include "ops/ops.h"
#include "prim/prims.h"
#include "util/fault.h"
#include "util/ptr_map.h"

struct wf_exporter {
    FILE *file;
    char *path;
    wf_fn *fn; /* owned reference */
    bool shapeless;
    atomic_bool busy; /* a call in progress: exporters are not shared by concurrent calls */
    /* The constants written so far (owned references), by node id. */
    wf_array **pool;
    uint64_t *pool_ids;
    size_t npool, pool_capacity;
};

/* ------------------------------------------------------------ tracing */

/* The tape's inputs from `first` on (the draws' key placeholders) become
 * constants holding the keys the draws took. */
static wf_status draws_to_constants(wf_tape *t, int first, const wf_random_draws *draws)
{
    const int ndraws = t->ninputs - first;
    if (ndraws == 0)
        return WF_OK;
    wf_array **consts = wf__realloc(t->consts, (size_t)(t->nconsts + ndraws) * sizeof *consts);
    if (!consts)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "wf_export_function: out of memory");
    t->consts = consts;
    const int base = t->nconsts;
    for (int i = 0, k = 0; i < draws->nevents && k < ndraws; i++) {
        if (draws->events[i].seed)
            continue;
        wf_array *key = wf__random_key_array(draws->events[i].key);
        if (!key)
            return wf_last_error();
        t->consts[t->nconsts++] = key;
        k++;
    }
    if (t->nconsts != base + ndraws)
        return wf__error(WF_ERR_INTERNAL, "wf_export_function: %d draws, %d keys", ndraws,
                         t->nconsts - base);
    for (int n = 0; n < t->nnodes; n++)
        for (int k = 0; k < t->nodes[n].ninputs; k++) {
            wf_tape_ref *ref = &t->nodes[n].inputs[k];
            if (ref->kind == WF_TAPE_INPUT && ref->index >= first)
                *ref = (wf_tape_ref){WF_TAPE_CONST, base + ref->index - first};
        }
    for (int o = 0; o < t->noutputs; o++) {
        wf_tape_ref *ref = &t->outputs[o];
        if (ref->kind == WF_TAPE_INPUT && ref->index >= first)
            *ref = (wf_tape_ref){WF_TAPE_CONST, base + ref->index - first};
    }
    t->ninputs = first;
    return WF_OK;
}

/* ------------------------------------------------------------ constants as graphs */

/* Whether constant `a` is written as the node that computes it: its graph
 * was kept (built while exporting, or under a transform), so its inputs
 * are still there whoever evaluated it, and its primitive can be written. */
static bool expandable(const wf_array *a)
{
    return a->keep_graph && a->prim && wf__export_prim_supported(a->prim) &&
           wf__array_state(a) != WF_NODE_FAILED;
}

/* The nodes that compute a tape's expandable constants, in dependency
 * order, and the constants they read. */
typedef struct expansion {
    wf_tape_node *nodes;
    int nnodes, nodes_capacity;
    wf_array **consts; /* owned references */
    int nconsts, consts_capacity;
    wf_ptr_map refs; /* array -> ref encoded as kind * 2^28 + index */
} expansion;

enum { EXPANSION_REF_SHIFT = 28 };

/* `items` (capacity entries of `size` bytes) reallocated to twice as many
 * (16 at first), *capacity updated; NULL (nothing changed) when out of
 * memory. */
static void *grow_array(void *items, int *capacity, size_t size)
{
    const int grown = *capacity ? *capacity * 2 : 16;
    void *bigger = wf__realloc(items, (size_t)grown * size);
    if (bigger)
        *capacity = grown;
    return bigger;
}

static wf_status expansion_add(expansion *e, wf_array *a, wf_tape_ref *out)
{
    if (!expandable(a)) {
        if (e->nconsts == e->consts_capacity) {
            wf_array **consts = grow_array(e->consts, &e->consts_capacity, sizeof *consts);
            if (!consts)
                return wf__error(WF_ERR_OUT_OF_MEMORY, "wf_export_function: out of memory");
            e->consts = consts;
        }
        e->consts[e->nconsts] = wf__array_incref(a);
        *out = (wf_tape_ref){WF_TAPE_CONST, e->nconsts++};
    } else {
        if (e->nnodes == e->nodes_capacity) {
            wf_tape_node *nodes = grow_array(e->nodes, &e->nodes_capacity, sizeof *nodes);
            if (!nodes)
                return wf__error(WF_ERR_OUT_OF_MEMORY, "wf_export_function: out of memory");
            e->nodes = nodes;
        }
        wf_tape_node *n = &e->nodes[e->nnodes];
        *n = (wf_tape_node){.prim = a->prim, .ninputs = a->ninputs, .dtype = a->dtype,
                            .ndim = a->ndim};
        wf__shape_copy(n->shape, a->shape, a->ndim);
        n->inputs = wf__malloc((size_t)(a->ninputs + 1) * sizeof *n->inputs);
        n->params = a->prim->params_size ? wf__tape_params_copy(a->prim, a->params) : NULL;
        if (!n->inputs || (a->prim->params_size && !n->params)) {
            free(n->inputs);
            wf__tape_params_free(a->prim, n->params);
            return wf__error(WF_ERR_OUT_OF_MEMORY, "wf_export_function: out of memory");
        }
        for (int k = 0; k < a->ninputs; k++) {
            int v = 0;
            wf__ptr_map_get(&e->refs, a->inputs[k], &v); /* visited before a */
            n->inputs[k] = (wf_tape_ref){v >> EXPANSION_REF_SHIFT,
                                         v & ((1 << EXPANSION_REF_SHIFT) - 1)};
        }
        *out = (wf_tape_ref){WF_TAPE_NODE, e->nnodes++};
    }
    if (!wf__ptr_map_put(&e->refs, a, (out->kind << EXPANSION_REF_SHIFT) | out->index))
        return wf__error(WF_ERR_OUT_OF_MEMORY, "wf_export_function: out of memory");
    return WF_OK;
}

/* Post-order walk from constant `root` through expandable arrays. */
static wf_status expansion_visit(expansion *e, wf_array *root, wf_tape_ref *out)
{
    struct frame {
        wf_array *node;
        int next;
    };
    int capacity = 64, depth = 0;
    struct frame *stack = wf__malloc((size_t)capacity * sizeof *stack);
    if (!stack)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "wf_export_function: out of memory");
    stack[depth++] = (struct frame){root, 0};
    wf_status status = WF_OK;
    while (depth && status == WF_OK) {
        struct frame *f = &stack[depth - 1];
        int seen;
        if (f->next == 0 && wf__ptr_map_get(&e->refs, f->node, &seen)) {
            depth--;
            continue;
        }
        if (expandable(f->node) && f->next < f->node->ninputs) {
            wf_array *in = f->node->inputs[f->next++];
            if (depth == capacity) {
                struct frame *bigger = grow_array(stack, &capacity, sizeof *bigger);
                if (!bigger) {
                    status = wf__error(WF_ERR_OUT_OF_MEMORY, "wf_export_function: out of memory");
                    break;
                }
                stack = bigger;
            }
            stack[depth++] = (struct frame){in, 0};
            continue;
        }
        wf_tape_ref ref;
        status = expansion_add(e, f->node, &ref);
        depth--;
    }
    free(stack);
    if (status == WF_OK) {
        int v = 0;
        wf__ptr_map_get(&e->refs, root, &v);
        *out = (wf_tape_ref){v >> EXPANSION_REF_SHIFT, v & ((1 << EXPANSION_REF_SHIFT) - 1)};
    }
    return status;
}

static void remap(wf_tape_ref *ref, const wf_tape_ref *const_refs, int shift)
{
    if (ref->kind == WF_TAPE_CONST)
        *ref = const_refs[ref->index];
    else if (ref->kind == WF_TAPE_NODE)
        ref->index += shift;
}

/* Replaces the tape's expandable constants by the nodes that compute them,
 * placed before the tape's own nodes. */
static wf_status expand_constants(wf_tape *t)
{
    expansion e = {0};
    wf__ptr_map_init(&e.refs);
    wf_tape_ref *const_refs = wf__calloc((size_t)t->nconsts + 1, sizeof *const_refs);
    wf_status status = const_refs ? WF_OK
                                  : wf__error(WF_ERR_OUT_OF_MEMORY, "wf_export_function: out of memory");
    for (int i = 0; i < t->nconsts && status == WF_OK; i++)
        status = expansion_visit(&e, t->consts[i], &const_refs[i]);
    wf_tape_node *nodes = NULL;
    if (status == WF_OK) {
        nodes = wf__realloc(e.nodes, (size_t)(e.nnodes + t->nnodes + 1) * sizeof *nodes);
        if (!nodes)
            status = wf__error(WF_ERR_OUT_OF_MEMORY, "wf_export_function: out of memory");
        else
            e.nodes = nodes;
    }
    if (status == WF_OK) {
        for (int i = 0; i < t->nnodes; i++) {
            wf_tape_node *n = &t->nodes[i];
            for (int k = 0; k < n->ninputs; k++)
                remap(&n->inputs[k], const_refs, e.nnodes);
            nodes[e.nnodes + i] = *n;
        }
        for (int o = 0; o < t->noutputs; o++)
            remap(&t->outputs[o], const_refs, e.nnodes);
        for (int i = 0; i < t->nconsts; i++)
            wf__array_decref(t->consts[i]);
        free(t->consts);
        free(t->nodes);
        t->nodes = nodes;
        t->nnodes += e.nnodes;
        t->consts = e.consts;
        t->nconsts = e.nconsts;
        e = (expansion){.refs = e.refs};
    }
    for (int i = 0; i < e.nnodes; i++) {
        wf__tape_params_free(e.nodes[i].prim, e.nodes[i].params);
        free(e.nodes[i].inputs);
    }
    free(e.nodes);
    for (int i = 0; i < e.nconsts; i++)
        wf__array_decref(e.consts[i]);
    free(e.consts);
    wf__ptr_map_free(&e.refs);
    free(const_refs);
    return status;
}

/* Every node of the tape can be written. */
static wf_status check_exportable(const wf_tape *t)
{
    for (int i = 0; i < t->nnodes; i++)
        if (!wf__export_prim_supported(t->nodes[i].prim))
            return wf__error(WF_ERR_UNSUPPORTED,
                             "wf_export_function: primitive '%s' cannot be exported (its "
                             "parameters hold callbacks, a group or several outputs, which a "
                             "file cannot describe)",
                             t->nodes[i].prim->name);
    return WF_OK;
}

static wf_status record(wf_tape *t, wf_array *const *placeholders, size_t ninputs,
                        const wf_random_draws *draws, wf_array *const *outputs, size_t noutputs,
                        bool shapeless)
{
    const size_t total = ninputs + (size_t)draws->ndraws;
    wf_array **all = wf__calloc(total + 1, sizeof *all);
    if (!all)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "wf_export_function: out of memory");
    for (size_t i = 0; i < total; i++)
        all[i] = i < ninputs ? placeholders[i] : draws->placeholders[i - ninputs];
    wf_status status = wf__tape_record(t, all, (int)total, outputs, (int)noutputs, shapeless);
    free(all);
    if (status == WF_ERR_UNSUPPORTED) { /* the tracer's refusal, said for export */
        char message[400];
        snprintf(message, sizeof message, "%s", wf_last_error_message());
        wf__error(status, "wf_export_function: %s", message);
    }
    if (status == WF_OK)
        status = draws_to_constants(t, (int)ninputs, draws);
    if (status == WF_OK)
        status = expand_constants(t);
    if (status == WF_OK)
        status = wf__tape_simplify(t);
    if (status == WF_OK)
        status = check_exportable(t);
    return status;
}

/* Runs fn on placeholders shaped like `inputs` and records its tape. */
static wf_status trace_tape(wf_fn *fn, wf_array *const *inputs, size_t ninputs, bool shapeless,
                            wf_tape *t)
{
    *t = (wf_tape){0};
    wf_array **placeholders = wf__calloc(ninputs + 1, sizeof *placeholders);
    wf_array *outputs[WF_FN_MAX_OUTPUTS];
    size_t noutputs = WF_FN_MAX_OUTPUTS;
    wf_random_draws draws = {0};
    wf_status status = WF_OK;
    if (!placeholders)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "wf_export_function: out of memory");
    for (size_t i = 0; i < ninputs && status == WF_OK; i++) {
        placeholders[i] = wf__array_new_placeholder(inputs[i]->dtype, inputs[i]->shape,
                                                    inputs[i]->ndim, shapeless);
        if (!placeholders[i])
            status = wf_last_error();
    }
    if (status == WF_OK) {
        wf_random_draws *previous = wf__random_draws_begin(&draws);
        wf__graph_compile_enter();
        wf__graph_mode_push(false); /* keep the graphs of the constants it builds */
        status = wf_fn_call(fn, placeholders, ninputs, outputs, &noutputs);
        wf__graph_mode_pop(false);
        wf__graph_compile_leave();
        wf__random_draws_end(previous);
        if (status == WF_OK) {
            if (draws.out_of_memory)
                status = wf__error(WF_ERR_OUT_OF_MEMORY,
                                   "wf_export_function: out of memory recording random draws");
            else
                status = record(t, placeholders, ninputs, &draws, outputs, noutputs, shapeless);
            for (size_t i = 0; i < noutputs; i++)
                wf_release(outputs[i]);
        }
    }
    wf__random_draws_free(&draws);
    for (size_t i = 0; i < ninputs; i++)
        wf__array_release(placeholders[i]);
    free(placeholders);
    if (status != WF_OK)
        wf__tape_clear(t);
    return status;
}

/* ------------------------------------------------------------ writing */

static void put_desc(wf_bytes *b, wf_dtype dtype, int ndim, const int64_t *shape)
{
    wf__bytes_u8(b, (unsigned)dtype);
    wf__bytes_u8(b, (unsigned)ndim);
    for (int d = 0; d < ndim; d++)
        wf__bytes_u64(b, (uint64_t)shape[d]);
}

static void put_ref(wf_bytes *b, wf_tape_ref ref)
{
    wf__bytes_u8(b, (unsigned)ref.kind);
    wf__bytes_u32(b, (uint32_t)ref.index);
}

static void put_string(wf_bytes *b, const char *s)
{
    const size_t n = s ? strlen(s) : 0;
    wf__bytes_u32(b, (uint32_t)n);
    wf__bytes_put(b, s, n);
}

/* Appends constant `a` (evaluated here) to `b`. */
static wf_status put_constant(wf_bytes *b, wf_array *a)
{
    const void *data = NULL;
    wf_status status = wf_array_data(a, &data);
    if (status != WF_OK)
        return status;
    put_desc(b, a->dtype, a->ndim, a->shape);
    const size_t nbytes = wf_array_nbytes(a);
    wf__bytes_u64(b, nbytes);
    wf__bytes_put(b, data, nbytes);
    return WF_OK;
}

/* The pool index of constant `a`, adding it to the pool (and to `b`, the
 * record's new constants, counted in *nnew) when not there yet. */
static wf_status pool_index(wf_exporter *ex, wf_array *a, wf_bytes *b, uint32_t *nnew,
                            uint32_t *index)
{
    const uint64_t id = wf__array_id(a);
    for (size_t i = 0; i < ex->npool; i++)
        if (ex->pool_ids[i] == id) {
            *index = (uint32_t)i;
            return WF_OK;
        }
    if (ex->npool == ex->pool_capacity) {
        size_t grown = ex->pool_capacity ? ex->pool_capacity * 2 : 16;
        wf_array **pool = wf__realloc(ex->pool, grown * sizeof *pool);
        if (pool)
            ex->pool = pool;
        uint64_t *ids = pool ? wf__realloc(ex->pool_ids, grown * sizeof *ids) : NULL;
        if (!ids)
            return wf__error(WF_ERR_OUT_OF_MEMORY, "wf_exporter_add: out of memory");
        ex->pool_ids = ids;
        ex->pool_capacity = grown;
    }
    wf_status status = put_constant(b, a);
    if (status != WF_OK)
        return status;
    ex->pool[ex->npool] = wf__array_incref(a);
    ex->pool_ids[ex->npool] = id;
    *index = (uint32_t)ex->npool++;
    (*nnew)++;
    return WF_OK;
}

/* The trace record of tape `t`: new constants, then the trace. */
static wf_status build_record(wf_exporter *ex, const wf_tape *t, const char *tag,
                              wf_array *const *inputs, wf_bytes *body)
{
    wf_bytes consts = {0};
    uint32_t nnew = 0;
    uint32_t *indices = wf__calloc((size_t)t->nconsts + 1, sizeof *indices);
    wf_status status = indices ? WF_OK
                               : wf__error(WF_ERR_OUT_OF_MEMORY, "wf_exporter_add: out of memory");
    for (int i = 0; i < t->nconsts && status == WF_OK; i++)
        status = pool_index(ex, t->consts[i], &consts, &nnew, &indices[i]);
    if (status == WF_OK) {
        wf__bytes_u32(body, nnew);
        wf__bytes_put(body, consts.data, consts.size);
        wf__bytes_u8(body, ex->shapeless);
        put_string(body, tag);
        wf__bytes_u32(body, (uint32_t)t->ninputs);
        for (int i = 0; i < t->ninputs; i++)
            put_desc(body, inputs[i]->dtype, inputs[i]->ndim, inputs[i]->shape);
        wf__bytes_u32(body, (uint32_t)t->nconsts);
        for (int i = 0; i < t->nconsts; i++)
            wf__bytes_u32(body, indices[i]);
        wf__bytes_u32(body, (uint32_t)t->nnodes);
        for (int i = 0; i < t->nnodes; i++) {
            const wf_tape_node *n = &t->nodes[i];
            wf__bytes_u16(body, (unsigned)strlen(n->prim->name));
            wf__bytes_put(body, n->prim->name, strlen(n->prim->name));
            wf_bytes params = {0};
            wf__export_params_write(&params, n->prim, n->params);
            wf__bytes_u32(body, (uint32_t)params.size);
            wf__bytes_put(body, params.data, params.size);
            body->failed |= params.failed;
            wf__bytes_free(&params);
            wf__bytes_u32(body, (uint32_t)n->ninputs);
            for (int k = 0; k < n->ninputs; k++)
                put_ref(body, n->inputs[k]);
            put_desc(body, n->dtype, n->ndim, n->shape);
        }
        wf__bytes_u32(body, (uint32_t)t->noutputs);
        for (int i = 0; i < t->noutputs; i++)
            put_ref(body, t->outputs[i]);
        if (consts.failed || body->failed)
            status = wf__error(WF_ERR_OUT_OF_MEMORY, "wf_exporter_add: out of memory");
    }
    wf__bytes_free(&consts);
    free(indices);
    return status;
}

static wf_status write_bytes(wf_exporter *ex, const wf_bytes *b)
{
    if (b->failed)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "wf_exporter: out of memory");
    if (fwrite(b->data, 1, b->size, ex->file) != b->size || fflush(ex->file) != 0)
        return wf__error(WF_ERR_IO, "wf_exporter: writing '%s' failed", ex->path);
    return WF_OK;
}

/* ------------------------------------------------------------ public API */

static void exporter_free(wf_exporter *ex)
{
    if (ex->file)
        fclose(ex->file);
    for (size_t i = 0; i < ex->npool; i++)
        wf__array_release(ex->pool[i]);
    free(ex->pool);
    free(ex->pool_ids);
    wf_fn_release(ex->fn);
    free(ex->path);
    free(ex);
}

wf_exporter *wf_exporter_new(const char *path, wf_fn *fn, bool shapeless, const char *metadata)
{
    if (!path || !fn) {
        wf__error(WF_ERR_NULL_ARGUMENT, "wf_exporter_new: %s is NULL", path ? "fn" : "path");
        return NULL;
    }
    wf_exporter *ex = wf__calloc(1, sizeof *ex);
    char *path_copy = wf__strdup(path);
    if (!ex || !path_copy) {
        free(ex);
        free(path_copy);
        wf__error(WF_ERR_OUT_OF_MEMORY, "wf_exporter_new: out of memory");
        return NULL;
    }
    ex->path = path_copy;
    ex->fn = wf_fn_retain(fn);
    ex->shapeless = shapeless;
    atomic_init(&ex->busy, false);
    ex->file = fopen(path, "wb");
    if (!ex->file) {
        wf__error(WF_ERR_IO, "wf_exporter_new: cannot open '%s' for writing", path);
        exporter_free(ex);
        return NULL;
    }
    wf_bytes header = {0};
    wf__bytes_put(&header, WF_EXPORT_MAGIC, WF_EXPORT_MAGIC_BYTES);
    wf__bytes_u32(&header, WF_EXPORT_VERSION);
    put_string(&header, metadata);
    wf_status status = write_bytes(ex, &header);
    wf__bytes_free(&header);
    if (status != WF_OK) {
        exporter_free(ex);
        return NULL;
    }
    return ex;
}

static wf_status check_inputs(wf_array *const *inputs, size_t ninputs)
{
    if (!inputs && ninputs)
        return wf__error(WF_ERR_NULL_ARGUMENT, "wf_exporter_add: inputs is NULL");
    if (ninputs > (size_t)1 << 20)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "wf_exporter_add: %zu inputs", ninputs);
    for (size_t i = 0; i < ninputs; i++)
        if (!wf__array_check(inputs[i], "wf_exporter_add", "an input"))
            return wf_last_error();
    return WF_OK;
}

static wf_status exporter_add(wf_exporter *ex, const char *tag, wf_array *const *inputs,
                              size_t ninputs)
{
    wf_status status = check_inputs(inputs, ninputs);
    if (status != WF_OK)
        return status;
    if (!ex->file)
        return wf__error(WF_ERR_MISUSE, "wf_exporter_add: the exporter is closed");
    wf_tape t;
    status = trace_tape(ex->fn, inputs, ninputs, ex->shapeless, &t);
    if (status != WF_OK)
        return status;
    wf_bytes body = {0}, record = {0};
    status = build_record(ex, &t, tag, inputs, &body);
    if (status == WF_OK) {
        wf__bytes_u32(&record, WF_EXPORT_RECORD_TRACE);
        wf__bytes_u64(&record, body.size);
        wf__bytes_put(&record, body.data, body.size);
        status = write_bytes(ex, &record);
    }
    wf__bytes_free(&body);
    wf__bytes_free(&record);
    wf__tape_clear(&t);
    return status;
}

wf_status wf_exporter_add(wf_exporter *ex, const char *tag, wf_array *const *inputs,
                          size_t ninputs)
{
    if (!ex)
        return wf__error(WF_ERR_NULL_ARGUMENT, "wf_exporter_add: exporter is NULL");
    if (atomic_exchange(&ex->busy, true))
        return wf__error(WF_ERR_MISUSE,
                         "wf_exporter_add: another call is using this exporter");
    wf_status status = exporter_add(ex, tag, inputs, ninputs);
    atomic_store(&ex->busy, false);
    return status;
}

wf_status wf_exporter_close(wf_exporter *ex)
{
    if (!ex)
        return WF_OK;
    if (atomic_exchange(&ex->busy, true))
        return wf__error(WF_ERR_MISUSE, "wf_exporter_close: another call is using this exporter");
    wf_status status = WF_OK;
    wf_bytes end = {0};
    wf__bytes_u32(&end, WF_EXPORT_RECORD_END);
    status = write_bytes(ex, &end);
    wf__bytes_free(&end);
    if (fclose(ex->file) != 0 && status == WF_OK)
        status = wf__error(WF_ERR_IO, "wf_exporter_close: closing '%s' failed", ex->path);
    ex->file = NULL;
    exporter_free(ex);
    return status;
}

wf_status wf_export_function(const char *path, wf_fn *fn, const char *tag,
                             wf_array *const *inputs, size_t ninputs, bool shapeless,
                             const char *metadata)
{
    wf_exporter *ex = wf_exporter_new(path, fn, shapeless, metadata);
    if (!ex)
        return wf_last_error();
    wf_status status = wf_exporter_add(ex, tag, inputs, ninputs);
    if (status != WF_OK) {
        wf_error_state saved;
        wf__error_save(&saved);
        exporter_free(ex);
        remove(path);
        wf__error_restore(&saved);
        return status;
    }
    return wf_exporter_close(ex);
}
