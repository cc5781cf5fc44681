/* wf_nn_params: a flat list of named arrays (weft.h API, plus the internal
 * decref for the list's own references: see drop_held). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/array.h"
#include "util/fault.h"
#include "util/name_index.h"
#include "weft.h"
#include "weft_nn.h"

enum { NAME_MAX_BYTES = 255 };

/* names[i] and arrays[i] in insertion order; `index` finds a name in
 * constant time (util/name_index.h): a model's list of many thousand
 * arrays was quadratic to build. */
struct wf_nn_params {
    char **names;
    wf_array **arrays;
    size_t count, capacity;
    wf_name_index index;
};

wf_nn_params *wf_nn_params_new(void)
{
    wf_nn_params *p = wf__calloc(1, sizeof *p);
    if (!p)
        wf_set_error(WF_ERR_OUT_OF_MEMORY, "wf_nn_params_new: out of memory");
    return p;
}

/* Drops a reference the list took with wf_retain_unscoped. Not wf_release:
 * while a caller's scope that also holds the array is open, wf_release
 * takes the scope's reference instead, and the list's would leak. */
static void drop_held(wf_array *held) { wf__array_decref(held); }

void wf_nn_params_release(wf_nn_params *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->count; i++) {
        free(p->names[i]);
        drop_held(p->arrays[i]);
    }
    free(p->names);
    free(p->arrays);
    wf__name_index_free(&p->index);
    free(p);
}

static const char *name_of(const void *owner, size_t i)
{
    return ((const wf_nn_params *)owner)->names[i];
}

long wf_nn_params_find(const wf_nn_params *p, const char *name)
{
    return p && name ? wf__name_index_find(&p->index, name, name_of, p) : -1;
}

wf_status wf_nn_params_add(wf_nn_params *p, const char *name, wf_array *value)
{
    if (!p || !name || !value)
        return wf_set_error(WF_ERR_NULL_ARGUMENT, "wf_nn_params_add: %s is NULL",
                            !p ? "params" : !name ? "name" : "value");
    size_t len = strlen(name);
    if (len == 0 || len > NAME_MAX_BYTES)
        return wf_set_error(WF_ERR_INVALID_ARGUMENT,
                            "wf_nn_params_add: name must have 1 to %d bytes (got %zu)",
                            NAME_MAX_BYTES, len);
    if (wf_nn_params_find(p, name) >= 0)
        return wf_set_error(WF_ERR_INVALID_ARGUMENT, "wf_nn_params_add: '%s' is already there",
                            name);
    if (p->count == p->capacity) {
        size_t grown = p->capacity ? p->capacity * 2 : 16;
        char **names = wf__realloc(p->names, grown * sizeof *names);
        if (names)
            p->names = names;
        wf_array **arrays = wf__realloc(p->arrays, grown * sizeof *arrays);
        if (arrays)
            p->arrays = arrays;
        if (!names || !arrays)
            return wf_set_error(WF_ERR_OUT_OF_MEMORY, "wf_nn_params_add: out of memory");
        p->capacity = grown;
    }
    if (!wf__name_index_reserve(&p->index, p->count, name_of, p))
        return wf_set_error(WF_ERR_OUT_OF_MEMORY, "wf_nn_params_add: out of memory");
    char *copy = wf__malloc(len + 1);
    if (!copy)
        return wf_set_error(WF_ERR_OUT_OF_MEMORY, "wf_nn_params_add: out of memory");
    memcpy(copy, name, len + 1);
    wf_array *held = wf_retain_unscoped(value);
    if (!held) {
        free(copy);
        return wf_last_error();
    }
    p->names[p->count] = copy;
    p->arrays[p->count] = held;
    wf__name_index_insert(&p->index, p->count++, name_of, p);
    return WF_OK;
}

size_t wf_nn_params_count(const wf_nn_params *p) { return p ? p->count : 0; }

static bool in_range(const wf_nn_params *p, size_t i, const char *op)
{
    if (p && i < p->count)
        return true;
    wf_set_error(WF_ERR_INVALID_ARGUMENT, "%s: index %zu is out of range (%zu entries)", op, i,
                 p ? p->count : 0);
    return false;
}

const char *wf_nn_params_name(const wf_nn_params *p, size_t i)
{
    return in_range(p, i, "wf_nn_params_name") ? p->names[i] : NULL;
}

wf_array *wf_nn_params_get(const wf_nn_params *p, size_t i)
{
    return in_range(p, i, "wf_nn_params_get") ? p->arrays[i] : NULL;
}

/* WF_OK when value has old's dtype and shape, else the error naming the entry. */
static wf_status check_same_kind(const char *name, const wf_array *old, const wf_array *value)
{
    if (wf_array_dtype(value) != wf_array_dtype(old))
        return wf_set_error(WF_ERR_DTYPE, "wf_nn_params_set: '%s' is %s, the new value %s", name,
                            wf_dtype_name(wf_array_dtype(old)), wf_dtype_name(wf_array_dtype(value)));
    int ndim = wf_array_ndim(old);
    bool same = ndim == wf_array_ndim(value);
    for (int d = 0; same && d < ndim; d++)
        same = wf_array_dim(old, d) == wf_array_dim(value, d);
    if (!same)
        return wf_set_error(WF_ERR_SHAPE, "wf_nn_params_set: '%s' changes shape", name);
    return WF_OK;
}

wf_status wf_nn_params_set(wf_nn_params *p, size_t i, wf_array *value)
{
    if (!in_range(p, i, "wf_nn_params_set"))
        return wf_last_error();
    if (!value)
        return wf_set_error(WF_ERR_NULL_ARGUMENT, "wf_nn_params_set: value is NULL");
    /* Held before it is compared: a released value is refused as such (not
     * as a dtype mismatch), and it cannot go away during the checks. */
    wf_array *held = wf_retain_unscoped(value);
    if (!held)
        return wf_last_error();
    wf_status st = check_same_kind(p->names[i], p->arrays[i], held);
    if (st != WF_OK) {
        drop_held(held);
        return st;
    }
    drop_held(p->arrays[i]);
    p->arrays[i] = held;
    return WF_OK;
}
