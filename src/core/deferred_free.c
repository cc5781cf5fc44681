/* Per-thread queue of nodes whose payload destructor must wait until the
 * thread holds nothing of weft's (see deferred_free.h). Intrusive, so
 * deferring never allocates and cannot fail. */
#include "core/deferred_free.h"

static _Thread_local struct {
    int depth;
    wf_array *head, *tail;
} deferred;

void wf__free_defer_begin(void) { deferred.depth++; }

bool wf__free_defer_end(void)
{
    return --deferred.depth == 0 && deferred.head != NULL;
}

bool wf__free_deferring(void) { return deferred.depth > 0; }

void wf__free_defer_push(wf_array *node)
{
    node->queue_next = NULL;
    if (deferred.tail)
        deferred.tail->queue_next = node;
    else
        deferred.head = node;
    deferred.tail = node;
}

wf_array *wf__free_deferred_pop(void)
{
    wf_array *node = deferred.head;
    if (node) {
        deferred.head = node->queue_next;
        if (!deferred.head)
            deferred.tail = NULL;
        node->queue_next = NULL;
    }
    return node;
}
