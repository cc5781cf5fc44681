/*
 * Scopes: per-thread stacks of owned array references, released together by
 * wf_scope_end. A thread that exits with scopes open has them closed by a
 * thread-exit destructor, so nothing leaks.
 */
#include "core/scope.h"

#include <pthread.h>
#include <stdlib.h>

#include "core/error.h"

struct scope_frame {
    wf_array **items;
    size_t count, capacity;
};

struct scope_stack {
    struct scope_frame *frames;
    int depth, capacity;
};

static _Thread_local struct scope_stack *thread_scopes;
static pthread_key_t scope_key;
static pthread_once_t scope_key_once = PTHREAD_ONCE_INIT;

static void release_frame(struct scope_frame *f)
{
    for (size_t i = 0; i < f->count; i++)
        wf__array_decref(f->items[i]);
    free(f->items);
    f->items = NULL;
    f->count = f->capacity = 0;
}

static void destroy_stack(void *p)
{
    struct scope_stack *stack = p;
    while (stack->depth > 0)
        release_frame(&stack->frames[--stack->depth]);
    free(stack->frames);
    free(stack);
    thread_scopes = NULL;
}

static void make_key(void) { pthread_key_create(&scope_key, destroy_stack); }

static struct scope_stack *stack_get(bool create)
{
    if (thread_scopes || !create)
        return thread_scopes;
    pthread_once(&scope_key_once, make_key);
    struct scope_stack *stack = calloc(1, sizeof *stack);
    if (!stack)
        return NULL;
    pthread_setspecific(scope_key, stack);
    thread_scopes = stack;
    return stack;
}

static wf_status frame_push(struct scope_frame *f, wf_array *a)
{
    if (f->count == f->capacity) {
        size_t grown = f->capacity ? f->capacity * 2 : 16;
        wf_array **items = realloc(f->items, grown * sizeof *items);
        if (!items)
            return wf__error(WF_ERR_OUT_OF_MEMORY, "out of memory recording an array in a scope");
        f->items = items;
        f->capacity = grown;
    }
    f->items[f->count++] = a;
    return WF_OK;
}

/* Removes one record of `a` from `f`, searching newest first. */
static bool frame_remove(struct scope_frame *f, const wf_array *a)
{
    for (size_t i = f->count; i-- > 0;) {
        if (f->items[i] == a) {
            f->items[i] = f->items[--f->count];
            return true;
        }
    }
    return false;
}

static _Thread_local uint64_t thread_adoptions;

uint64_t wf__scope_adoptions(void) { return thread_adoptions; }

wf_status wf__scope_adopt(wf_array *a)
{
    struct scope_stack *stack = thread_scopes;
    if (!stack || stack->depth == 0)
        return WF_OK;
    thread_adoptions++;
    return frame_push(&stack->frames[stack->depth - 1], a);
}

void wf__scope_forget(wf_array *a)
{
    struct scope_stack *stack = thread_scopes;
    if (!stack)
        return;
    for (int d = stack->depth - 1; d >= 0; d--)
        if (frame_remove(&stack->frames[d], a))
            return;
}

wf_status wf_scope_begin(void)
{
    struct scope_stack *stack = stack_get(true);
    if (!stack)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "wf_scope_begin: out of memory");
    if (stack->depth == stack->capacity) {
        int grown = stack->capacity ? stack->capacity * 2 : 4;
        struct scope_frame *frames = realloc(stack->frames, (size_t)grown * sizeof *frames);
        if (!frames)
            return wf__error(WF_ERR_OUT_OF_MEMORY, "wf_scope_begin: out of memory");
        stack->frames = frames;
        stack->capacity = grown;
    }
    stack->frames[stack->depth++] = (struct scope_frame){0};
    return WF_OK;
}

wf_status wf_scope_end(void)
{
    struct scope_stack *stack = stack_get(false);
    if (!stack || stack->depth == 0)
        return wf__error(WF_ERR_MISUSE, "wf_scope_end: no scope is open on this thread");
    release_frame(&stack->frames[--stack->depth]);
    return WF_OK;
}

wf_array *wf_keep(wf_array *a)
{
    if (!wf__array_check(a, "wf_keep", "the array"))
        return NULL;
    struct scope_stack *stack = stack_get(false);
    if (!stack || stack->depth == 0) {
        wf__error(WF_ERR_MISUSE, "wf_keep: no scope is open on this thread");
        return NULL;
    }
    struct scope_frame *inner = &stack->frames[stack->depth - 1];
    if (!frame_remove(inner, a)) {
        wf__error(WF_ERR_MISUSE, "wf_keep: the array is not owned by the innermost scope");
        return NULL;
    }
    if (stack->depth > 1 && frame_push(&stack->frames[stack->depth - 2], a) != WF_OK) {
        frame_push(inner, a); /* cannot fail: the slot was just freed */
        return NULL;
    }
    return a;
}
