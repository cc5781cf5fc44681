/*
 * An index of names that an owner keeps in its own list (items 0, 1, ...
 * in insertion order): open addressing with linear probing under the keyed
 * hash of util/hash.h, at most half full, so that finding a name, and the
 * duplicate check of each add, take constant time whatever names a file
 * holds. Used by the parameter list and GGUF metadata. Internal; not
 * thread-safe (its owner's own rules apply).
 */
#ifndef WEFT_UTIL_NAME_INDEX_H
#define WEFT_UTIL_NAME_INDEX_H

#include <stdbool.h>
#include <stddef.h>

typedef struct wf_name_index {
    size_t *slots;     /* item + 1, 0 for an empty slot */
    size_t slot_count; /* a power of two, or 0 before the first reserve */
} wf_name_index;

/* The name of the owner's item i. */
typedef const char *(*wf_name_of)(const void *owner, size_t item);

/* The item called `name`, or -1. */
long wf__name_index_find(const wf_name_index *ix, const char *name, wf_name_of name_of,
                         const void *owner);
/* Room for one more item beside the `indexed` ones (items 0 .. indexed - 1),
 * rebuilding a larger index from them when needed; false, nothing changed,
 * when memory is short. */
bool wf__name_index_reserve(wf_name_index *ix, size_t indexed, wf_name_of name_of,
                            const void *owner);
/* Indexes item `item` (after a reserve; its name must not be indexed yet). */
void wf__name_index_insert(wf_name_index *ix, size_t item, wf_name_of name_of, const void *owner);
void wf__name_index_free(wf_name_index *ix);

#endif
