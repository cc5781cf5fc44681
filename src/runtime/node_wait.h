/*
 * Waiting for a node's state (lock level 50). Internal.
 * A striped table of mutex + condition pairs keeps nodes small; a waiter
 * counter per stripe lets state changes skip the lock when nobody waits.
 */
#ifndef WEFT_RUNTIME_NODE_WAIT_H
#define WEFT_RUNTIME_NODE_WAIT_H

#include "core/array.h"

/* Blocks until `node`'s state is at least `state` (FAILED counts as done). */
void wf__node_wait_at_least(wf_array *node, int state);
/* Publishes `state` on `node` and wakes its waiters. */
void wf__node_publish(wf_array *node, int state);

#endif
