#include "util/ptr_map.h"
#include "util/fault.h"

#include <stdint.h>
#include <stdlib.h>

void wf__ptr_map_init(wf_ptr_map *m) { *m = (wf_ptr_map){0}; }

void wf__ptr_map_free(wf_ptr_map *m)
{
    free(m->keys);
    free(m->values);
    *m = (wf_ptr_map){0};
}

static size_t slot_of(const wf_ptr_map *m, const void *key)
{
    uint64_t h = (uint64_t)(uintptr_t)key * 0x9e3779b97f4a7c15u;
    size_t i = (size_t)(h >> 17) & (m->capacity - 1);
    while (m->keys[i] && m->keys[i] != key)
        i = (i + 1) & (m->capacity - 1);
    return i;
}

bool wf__ptr_map_get(const wf_ptr_map *m, const void *key, int *value)
{
    if (!m->capacity)
        return false;
    size_t i = slot_of(m, key);
    if (!m->keys[i])
        return false;
    *value = m->values[i];
    return true;
}

static bool grow(wf_ptr_map *m)
{
    size_t capacity = m->capacity ? m->capacity * 2 : 64;
    wf_ptr_map bigger = {wf__calloc(capacity, sizeof(void *)), wf__malloc(capacity * sizeof(int)),
                         capacity, 0};
    if (!bigger.keys || !bigger.values) {
        free(bigger.keys);
        free(bigger.values);
        return false;
    }
    for (size_t i = 0; i < m->capacity; i++) {
        if (m->keys[i]) {
            size_t j = slot_of(&bigger, m->keys[i]);
            bigger.keys[j] = m->keys[i];
            bigger.values[j] = m->values[i];
            bigger.count++;
        }
    }
    wf__ptr_map_free(m);
    *m = bigger;
    return true;
}

bool wf__ptr_map_put(wf_ptr_map *m, const void *key, int value)
{
    if ((m->count + 1) * 2 > m->capacity && !grow(m))
        return false;
    size_t i = slot_of(m, key);
    if (!m->keys[i]) {
        m->keys[i] = key;
        m->count++;
    }
    m->values[i] = value;
    return true;
}
