/* Per-thread queue of frees whose user code must wait until the thread
 * holds nothing of weft's (see deferred_free.h). */
#include "core/deferred_free.h"

static _Thread_local struct {
    int depth;
    wf_deferred_list queue;
} deferred;

void wf__free_defer_begin(void) { deferred.depth++; }

bool wf__free_defer_end(void)
{
    return --deferred.depth == 0 && !wf__free_deferred_list_empty(&deferred.queue);
}

bool wf__free_deferring(void) { return deferred.depth > 0; }

bool wf__free_deferred_list_empty(const wf_deferred_list *list)
{
    return !list->nodes_head && !list->calls_head;
}

void wf__free_defer_push(wf_array *node)
{
    wf_deferred_list *q = &deferred.queue;
    node->queue_next = NULL;
    if (q->nodes_tail)
        q->nodes_tail->queue_next = node;
    else
        q->nodes_head = node;
    q->nodes_tail = node;
}

void wf__free_defer_call(wf_deferred_call *call)
{
    wf_deferred_list *q = &deferred.queue;
    call->next = NULL;
    if (q->calls_tail)
        q->calls_tail->next = call;
    else
        q->calls_head = call;
    q->calls_tail = call;
}

wf_array *wf__free_deferred_pop(void)
{
    wf_deferred_list *q = &deferred.queue;
    wf_array *node = q->nodes_head;
    if (node) {
        q->nodes_head = node->queue_next;
        if (!q->nodes_head)
            q->nodes_tail = NULL;
        node->queue_next = NULL;
    }
    return node;
}

wf_deferred_call *wf__free_deferred_call_pop(void)
{
    wf_deferred_list *q = &deferred.queue;
    wf_deferred_call *call = q->calls_head;
    if (call) {
        q->calls_head = call->next;
        if (!q->calls_head)
            q->calls_tail = NULL;
        call->next = NULL;
    }
    return call;
}

/* Appends `from` to `to` and empties `from`. */
static void list_move(wf_deferred_list *to, wf_deferred_list *from)
{
    if (from->nodes_head) {
        if (to->nodes_tail)
            to->nodes_tail->queue_next = from->nodes_head;
        else
            to->nodes_head = from->nodes_head;
        to->nodes_tail = from->nodes_tail;
    }
    if (from->calls_head) {
        if (to->calls_tail)
            to->calls_tail->next = from->calls_head;
        else
            to->calls_head = from->calls_head;
        to->calls_tail = from->calls_tail;
    }
    *from = (wf_deferred_list){0};
}

void wf__free_deferred_take(wf_deferred_list *list) { list_move(list, &deferred.queue); }

void wf__free_deferred_give(wf_deferred_list *list) { list_move(&deferred.queue, list); }
