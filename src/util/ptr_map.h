/*
 * A map from pointers to ints with open addressing (linear probing). Used
 * only while one thread holds the pointed-to objects (e.g. node sets during
 * a trace); never a cache key. Internal.
 */
#ifndef WEFT_UTIL_PTR_MAP_H
#define WEFT_UTIL_PTR_MAP_H

#include <stdbool.h>
#include <stddef.h>

typedef struct wf_ptr_map {
    const void **keys;
    int *values;
    size_t capacity, count; /* capacity is a power of two */
} wf_ptr_map;

/* An empty map (no allocation until the first insert). */
void wf__ptr_map_init(wf_ptr_map *m);
void wf__ptr_map_free(wf_ptr_map *m);
/* The value of `key`, or false when absent. */
bool wf__ptr_map_get(const wf_ptr_map *m, const void *key, int *value);
/* Inserts or overwrites; false when memory is short. */
bool wf__ptr_map_put(wf_ptr_map *m, const void *key, int value);

#endif
