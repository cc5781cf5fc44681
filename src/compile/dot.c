/*
 * wf_graph_to_dot (weft.h): the graph that computes some arrays, as a
 * Graphviz DOT text.
 *
 * A node still to run (PENDING) is a box labelled with its primitive, with
 * an edge from each input; an array that has run (or was made from data)
 * is an ellipse labelled with its dtype and shape, and is not looked
 * behind: evaluation drops a node's inputs once it has run. Every node
 * walked is held by a reference until the text is written. A PENDING
 * node's inputs are read as compile's tracer reads them, so the graph must
 * not be evaluated by another thread while it is being walked (evaluating
 * it on this thread afterwards is fine).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile/export_format.h"
#include "core/error.h"
#include "prim/prims.h"
#include "util/fault.h"
#include "util/ptr_map.h"

typedef struct dot_walk {
    wf_bytes text;
    wf_ptr_map seen; /* node -> 1 */
    wf_array **held; /* references taken while walking */
    size_t nheld, held_capacity;
    wf_array **stack;
    size_t depth, stack_capacity;
    bool failed;
} dot_walk;

static void emit(dot_walk *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(dot_walk *w, const char *fmt, ...)
{
    char line[512];
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(line, sizeof line, fmt, args);
    va_end(args);
    if (n > 0)
        wf__bytes_put(&w->text, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

/* `s` with quotes and backslashes escaped, truncated to fit `cap`. */
static const char *escaped(const char *s, char *buf, size_t cap)
{
    size_t used = 0;
    for (; *s && used + 3 < cap; s++) {
        if (*s == '"' || *s == '\\')
            buf[used++] = '\\';
        buf[used++] = *s == '\n' ? ' ' : *s;
    }
    buf[used] = '\0';
    return buf;
}

/* `items` (capacity pointers) reallocated to twice as many (64 at first),
 * *capacity updated; NULL (nothing changed) when out of memory. */
static wf_array **grow(wf_array **items, size_t *capacity)
{
    size_t grown = *capacity ? *capacity * 2 : 64;
    wf_array **bigger = wf__realloc(items, grown * sizeof *bigger);
    if (bigger)
        *capacity = grown;
    return bigger;
}

/* Room for one more entry in both lists. */
static bool reserve(dot_walk *w)
{
    if (w->nheld == w->held_capacity) {
        wf_array **held = grow(w->held, &w->held_capacity);
        if (!held)
            return false;
        w->held = held;
    }
    if (w->depth == w->stack_capacity) {
        wf_array **stack = grow(w->stack, &w->stack_capacity);
        if (!stack)
            return false;
        w->stack = stack;
    }
    return true;
}

/* Takes a reference to `a` and pushes it, unless it was seen already. */
static void visit(dot_walk *w, wf_array *a)
{
    int seen;
    if (w->failed || wf__ptr_map_get(&w->seen, a, &seen))
        return;
    if (!reserve(w) || !wf__ptr_map_put(&w->seen, a, 1)) {
        w->failed = true;
        return;
    }
    w->held[w->nheld++] = wf__array_incref(a);
    w->stack[w->depth++] = a;
}

static void describe(dot_walk *w, wf_array *a, const char *name)
{
    char shape[256], label[192];
    wf__shape_str(a->shape, a->ndim, shape, sizeof shape);
    const bool pending = a->prim && wf__array_state(a) == WF_NODE_PENDING;
    if (pending) {
        emit(w, "  n%llu [label=\"%s%s%s\", shape=box];\n", (unsigned long long)wf__array_id(a),
             a->prim->name, name ? ": " : "", name ? escaped(name, label, sizeof label) : "");
        for (int k = 0; k < a->ninputs; k++) {
            emit(w, "  n%llu -> n%llu;\n", (unsigned long long)wf__array_id(a->inputs[k]),
                 (unsigned long long)wf__array_id(a));
            visit(w, a->inputs[k]);
        }
    } else {
        emit(w, "  n%llu [label=\"%s%s%s %s\"];\n", (unsigned long long)wf__array_id(a),
             name ? escaped(name, label, sizeof label) : "", name ? ": " : "",
             wf_dtype_name(a->dtype), shape);
    }
}

static const char *name_of(wf_array *a, wf_array *const *arrays, const char *const *names,
                           size_t n)
{
    for (size_t i = 0; names && i < n; i++)
        if (arrays[i] == a && names[i])
            return names[i];
    return NULL;
}

wf_status wf_graph_to_dot(wf_array *const *arrays, const char *const *names, size_t n,
                          char *buf, size_t capacity, size_t *length)
{
    if ((!arrays && n) || (!buf && capacity) || !length)
        return wf__error(WF_ERR_NULL_ARGUMENT, "wf_graph_to_dot: a required argument is NULL");
    for (size_t i = 0; i < n; i++)
        if (!wf__array_check(arrays[i], "wf_graph_to_dot", "an array"))
            return wf_last_error();
    dot_walk w = {0};
    wf__ptr_map_init(&w.seen);
    emit(&w, "digraph {\n");
    for (size_t i = 0; i < n; i++)
        visit(&w, arrays[i]);
    while (w.depth && !w.failed) {
        wf_array *a = w.stack[--w.depth];
        describe(&w, a, name_of(a, arrays, names, n));
    }
    emit(&w, "}\n");
    wf_status status = WF_OK;
    if (w.failed || w.text.failed)
        status = wf__error(WF_ERR_OUT_OF_MEMORY, "wf_graph_to_dot: out of memory");
    if (status == WF_OK) {
        *length = w.text.size;
        if (capacity) {
            size_t copied = w.text.size < capacity - 1 ? w.text.size : capacity - 1;
            memcpy(buf, w.text.data, copied);
            buf[copied] = '\0';
        }
    }
    for (size_t i = 0; i < w.nheld; i++)
        wf__array_release(w.held[i]);
    free(w.held);
    free(w.stack);
    wf__ptr_map_free(&w.seen);
    wf__bytes_free(&w.text);
    return status;
}
