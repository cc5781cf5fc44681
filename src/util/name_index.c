/* util/name_index.h: open addressing over an owner's names. */
#include "util/name_index.h"

#include <stdlib.h>
#include <string.h>

#include "util/fault.h"
#include "util/hash.h"

/* The slot holding `name`, or the empty one where it would go. */
static size_t slot_of(const wf_name_index *ix, const char *name, wf_name_of name_of,
                      const void *owner)
{
    const size_t mask = ix->slot_count - 1;
    size_t s = (size_t)wf__hash_bytes(name, strlen(name)) & mask;
    while (ix->slots[s] && strcmp(name_of(owner, ix->slots[s] - 1), name) != 0)
        s = (s + 1) & mask;
    return s;
}

long wf__name_index_find(const wf_name_index *ix, const char *name, wf_name_of name_of,
                         const void *owner)
{
    if (ix->slot_count == 0)
        return -1;
    const size_t item = ix->slots[slot_of(ix, name, name_of, owner)];
    return item ? (long)(item - 1) : -1;
}

bool wf__name_index_reserve(wf_name_index *ix, size_t indexed, wf_name_of name_of,
                            const void *owner)
{
    if (2 * (indexed + 1) <= ix->slot_count)
        return true;
    const size_t count = ix->slot_count ? 2 * ix->slot_count : 32;
    size_t *fresh = wf__calloc(count, sizeof *fresh);
    if (!fresh)
        return false;
    free(ix->slots);
    ix->slots = fresh;
    ix->slot_count = count;
    for (size_t i = 0; i < indexed; i++)
        wf__name_index_insert(ix, i, name_of, owner);
    return true;
}

void wf__name_index_insert(wf_name_index *ix, size_t item, wf_name_of name_of, const void *owner)
{
    ix->slots[slot_of(ix, name_of(owner, item), name_of, owner)] = item + 1;
}

void wf__name_index_free(wf_name_index *ix)
{
    free(ix->slots);
    ix->slots = NULL;
    ix->slot_count = 0;
}
