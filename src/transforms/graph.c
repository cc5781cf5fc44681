/* The traced graph a transform walks (see transforms/graph.h). */
#include "transforms/graph.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "util/fault.h"

static size_t slot_of(const wf_array *node, size_t nslots)
{
    uint64_t h = (uint64_t)(uintptr_t)node;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdu;
    h ^= h >> 33;
    return (size_t)h & (nslots - 1);
}

wf_graph_entry *wf__graph_find(const wf_graph *g, const wf_array *node)
{
    if (!g->nslots)
        return NULL;
    for (size_t s = slot_of(node, g->nslots);; s = (s + 1) & (g->nslots - 1)) {
        int at = g->slots[s];
        if (at == 0)
            return NULL;
        if (g->entries[at - 1].node == node)
            return &g->entries[at - 1];
    }
}

static void slots_put(int *slots, size_t nslots, const wf_array *node, int index)
{
    size_t s = slot_of(node, nslots);
    while (slots[s] != 0)
        s = (s + 1) & (nslots - 1);
    slots[s] = index + 1;
}

static wf_status out_of_memory(void)
{
    return wf__error(WF_ERR_OUT_OF_MEMORY, "out of memory walking a traced graph");
}

/* Keeps the table at most half full. */
static wf_status grow_slots(wf_graph *g)
{
    if (2 * (g->count + 1) <= g->nslots)
        return WF_OK;
    size_t n = g->nslots ? 2 * g->nslots : 64;
    int *slots = wf__calloc(n, sizeof *slots);
    if (!slots)
        return out_of_memory();
    for (size_t i = 0; i < g->count; i++)
        slots_put(slots, n, g->entries[i].node, (int)i);
    free(g->slots);
    g->slots = slots;
    g->nslots = n;
    return WF_OK;
}

/* Adds `node` (not yet in the graph); *index receives its entry. */
static wf_status add_entry(wf_graph *g, wf_array *node, int *index)
{
    if (grow_slots(g) != WF_OK)
        return wf_last_error();
    if (g->count == g->capacity) {
        size_t n = g->capacity ? 2 * g->capacity : 64;
        wf_graph_entry *e = wf__realloc(g->entries, n * sizeof *e);
        int *order = wf__realloc(g->order, n * sizeof *order);
        if (e)
            g->entries = e;
        if (order)
            g->order = order;
        if (!e || !order)
            return out_of_memory();
        g->capacity = n;
    }
    *index = (int)g->count;
    g->entries[g->count++] = (wf_graph_entry){.node = node, .tracer = -1};
    slots_put(g->slots, g->nslots, node, *index);
    return WF_OK;
}

/* Inputs are looked into only for nodes built under a transform: theirs are
 * fixed for life (evaluation keeps them). */
static bool expandable(const wf_array *n)
{
    return n->keep_graph && n->prim != NULL && n->ninputs > 0;
}

struct frame {
    int entry;
    int next_input;
};

struct stack {
    struct frame *frames;
    size_t count, capacity;
};

static wf_status push(struct stack *s, int entry)
{
    if (s->count == s->capacity) {
        size_t n = s->capacity ? 2 * s->capacity : 64;
        struct frame *f = wf__realloc(s->frames, n * sizeof *f);
        if (!f)
            return out_of_memory();
        s->frames = f;
        s->capacity = n;
    }
    s->frames[s->count++] = (struct frame){entry, 0};
    return WF_OK;
}

/* A node is done once its inputs are: active if any input is. */
static void finish(wf_graph *g, int index)
{
    wf_graph_entry *e = &g->entries[index];
    const wf_array *n = e->node;
    bool active = false;
    for (int i = 0; i < n->ninputs && !active; i++) {
        const wf_graph_entry *in = wf__graph_find(g, n->inputs[i]);
        active = in && in->active;
    }
    e->active = active;
    if (active)
        g->order[g->norder++] = index;
}

static wf_status walk_from(wf_graph *g, struct stack *s, wf_array *root)
{
    if (wf__graph_find(g, root))
        return WF_OK;
    int index;
    wf_status st = add_entry(g, root, &index);
    if (st != WF_OK)
        return st;
    if (!expandable(root))
        return WF_OK;
    st = push(s, index);
    while (st == WF_OK && s->count) {
        struct frame *f = &s->frames[s->count - 1];
        const wf_array *n = g->entries[f->entry].node;
        if (f->next_input == n->ninputs) {
            s->count--;
            finish(g, f->entry);
            continue;
        }
        wf_array *in = n->inputs[f->next_input++];
        if (wf__graph_find(g, in))
            continue;
        st = add_entry(g, in, &index);
        if (st == WF_OK && expandable(in))
            st = push(s, index);
    }
    return st;
}

wf_status wf__graph_build(wf_graph *g, wf_array *const *outputs, size_t noutputs,
                          wf_array *const *tracers, size_t ntracers)
{
    memset(g, 0, sizeof *g);
    wf_status st = WF_OK;
    for (size_t i = 0; i < ntracers && st == WF_OK; i++) {
        if (!tracers[i] || wf__graph_find(g, tracers[i]))
            continue;
        int index;
        st = add_entry(g, tracers[i], &index);
        if (st == WF_OK) {
            g->entries[index].tracer = (int)i;
            g->entries[index].active = true;
        }
    }
    struct stack s = {0};
    for (size_t i = 0; i < noutputs && st == WF_OK; i++)
        st = walk_from(g, &s, outputs[i]);
    free(s.frames);
    if (st != WF_OK)
        wf__graph_free(g);
    return st;
}

void wf__graph_mark_needed(wf_graph *g, wf_array *const *outputs, size_t noutputs,
                           bool (*uses)(const wf_array *node, int input, void *ctx), void *ctx)
{
    for (size_t j = 0; j < noutputs; j++) {
        wf_graph_entry *e = wf__graph_find(g, outputs[j]);
        if (e)
            e->needed = true;
    }
    for (size_t k = g->norder; k-- > 0;) {
        const wf_graph_entry *e = &g->entries[g->order[k]];
        if (!e->needed)
            continue;
        for (int i = 0; i < e->node->ninputs; i++) {
            wf_graph_entry *in = wf__graph_find(g, e->node->inputs[i]);
            if (in && in->active && uses(e->node, i, ctx))
                in->needed = true;
        }
    }
}

void wf__graph_free(wf_graph *g)
{
    free(g->entries);
    free(g->slots);
    free(g->order);
    memset(g, 0, sizeof *g);
}
