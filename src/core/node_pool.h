/*
 * The node pool: type-stable memory for array nodes (DESIGN section 3).
 * Internal to core: array.c takes and gives back nodes; the allocator reads
 * its size for wf_memory_stats_get.
 */
#ifndef WEFT_CORE_NODE_POOL_H
#define WEFT_CORE_NODE_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "core/array.h"

/* Nodes released through one shard before a released node may be handed out
 * again (the use-after-release window docs/THREADING.md promises). */
enum { WF_NODE_QUARANTINE = 1024 };

/* A free node (refcount 0, other fields stale) and a fresh, never reused id
 * for it (ids start at 1). NULL if no memory could be had (nothing recorded). */
wf_array *wf__node_pool_take(uint64_t *id);
/* Returns a node whose refcount reached 0 and whose resources were freed. */
void wf__node_pool_give_back(wf_array *n);
/* Bytes of node memory the pool holds (live, quarantined and free nodes). */
size_t wf__node_pool_bytes(void);
/* Bytes of one chunk, the unit in which the pool grows (for tests). */
size_t wf__node_pool_chunk_bytes(void);

#endif
