/*
 * Scopes: per-thread stacks of owned array references, released together by
 * wf_scope_end. A thread that exits with scopes open has them closed by a
 * thread-exit destructor, so nothing leaks.
 *
 * A frame is a hash multiset (array -> references the frame owns; open
 * addressing with linear probing), so wf_release or wf_keep of one array
 * among a scope's hundred thousand costs O(1) expected; frames are searched
 * innermost first. wf_scope_end detaches the frame (pops it and takes its
 * table) before releasing anything: the releases may run payload destructors
 * that open and close scopes of their own on this thread.
 */
#include "core/scope.h"

#include <pthread.h>
#include <stdlib.h>

#include "core/error.h"
#include "util/fault.h"

struct owned {
    wf_array *array; /* NULL: empty slot */
    size_t count;    /* references to `array` the frame owns (> 0) */
};

struct scope_frame {
    struct owned *slots;
    size_t capacity; /* 0 or a power of two */
    size_t used;     /* slots holding an array; at most capacity / 2 */
};

struct scope_stack {
    struct scope_frame *frames;
    int depth, capacity;
};

static _Thread_local struct scope_stack *thread_scopes;
static _Thread_local uint64_t scope_work;
static _Thread_local uint64_t thread_adoptions;
static pthread_key_t scope_key;
static pthread_once_t scope_key_once = PTHREAD_ONCE_INIT;

uint64_t wf__scope_work(void) { return scope_work; }

uint64_t wf__scope_adoptions(void) { return thread_adoptions; }

/* ------------------------------------------------------------ frame table */

static size_t slot_home(const wf_array *a, size_t mask)
{
    uint64_t x = (uint64_t)(uintptr_t)a;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdu; /* a 64-bit mixer: node addresses differ in few bits */
    x ^= x >> 33;
    return (size_t)x & mask;
}

/* The slot holding `a`, or the empty slot where it would go. */
static size_t slot_find(const struct scope_frame *f, const wf_array *a)
{
    size_t mask = f->capacity - 1;
    size_t i = slot_home(a, mask);
    for (;;) {
        scope_work++;
        if (!f->slots[i].array || f->slots[i].array == a)
            return i;
        i = (i + 1) & mask;
    }
}

static wf_status frame_grow(struct scope_frame *f)
{
    size_t capacity = f->capacity ? f->capacity * 2 : 16;
    struct owned *slots = wf__calloc(capacity, sizeof *slots);
    if (!slots)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "out of memory recording an array in a scope");
    struct scope_frame grown = {.slots = slots, .capacity = capacity, .used = f->used};
    for (size_t i = 0; i < f->capacity; i++)
        if (f->slots[i].array)
            slots[slot_find(&grown, f->slots[i].array)] = f->slots[i];
    free(f->slots);
    *f = grown;
    return WF_OK;
}

/* Records one more reference to `a` owned by `f`. */
static wf_status frame_add(struct scope_frame *f, wf_array *a)
{
    if ((f->used + 1) * 2 > f->capacity && frame_grow(f) != WF_OK)
        return wf_last_error();
    struct owned *slot = &f->slots[slot_find(f, a)];
    if (!slot->array) {
        slot->array = a;
        f->used++;
    }
    slot->count++;
    return WF_OK;
}

/* Empties slot `hole`, moving later entries of its probe run back so that
 * every entry stays reachable from its home slot (no tombstones). */
static void slot_clear(struct scope_frame *f, size_t hole)
{
    size_t mask = f->capacity - 1;
    for (size_t j = (hole + 1) & mask; f->slots[j].array; j = (j + 1) & mask) {
        scope_work++;
        size_t home = slot_home(f->slots[j].array, mask);
        if (((j - home) & mask) >= ((j - hole) & mask)) { /* hole lies in [home, j) */
            f->slots[hole] = f->slots[j];
            hole = j;
        }
    }
    f->slots[hole] = (struct owned){0};
    f->used--;
}

/* Takes one reference to `a` out of `f`; false if `f` owns none. */
static bool frame_take(struct scope_frame *f, const wf_array *a)
{
    if (!f->used)
        return false;
    size_t i = slot_find(f, a);
    if (!f->slots[i].array)
        return false;
    if (--f->slots[i].count == 0)
        slot_clear(f, i);
    return true;
}

/* Releases what a detached frame owns and frees it. */
static void frame_release(struct scope_frame *f)
{
    for (size_t i = 0; i < f->capacity; i++) {
        for (size_t k = 0; k < f->slots[i].count; k++) {
            scope_work++;
            wf__array_decref(f->slots[i].array);
        }
    }
    free(f->slots);
}

/* ------------------------------------------------------------ the stack */

static void destroy_stack(void *p)
{
    struct scope_stack *stack = p;
    while (stack->depth > 0) {
        struct scope_frame frame = stack->frames[--stack->depth];
        frame_release(&frame);
    }
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
    struct scope_stack *stack = wf__calloc(1, sizeof *stack);
    if (!stack)
        return NULL;
    pthread_setspecific(scope_key, stack);
    thread_scopes = stack;
    return stack;
}

wf_status wf__scope_adopt(wf_array *a)
{
    struct scope_stack *stack = thread_scopes;
    if (!stack || stack->depth == 0)
        return WF_OK;
    thread_adoptions++;
    return frame_add(&stack->frames[stack->depth - 1], a);
}

void wf__scope_forget(wf_array *a)
{
    struct scope_stack *stack = thread_scopes;
    if (!stack)
        return;
    for (int d = stack->depth - 1; d >= 0; d--)
        if (frame_take(&stack->frames[d], a))
            return;
}

void *wf__scope_suspend(void)
{
    struct scope_stack *saved = thread_scopes;
    thread_scopes = NULL;
    return saved;
}

void wf__scope_resume(void *saved)
{
    if (thread_scopes == saved)
        return;
    if (thread_scopes) /* made by the hidden code: close what it left open */
        destroy_stack(thread_scopes);
    thread_scopes = saved;
    pthread_setspecific(scope_key, saved);
}

wf_status wf_scope_begin(void)
{
    struct scope_stack *stack = stack_get(true);
    if (!stack)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "wf_scope_begin: out of memory");
    if (stack->depth == stack->capacity) {
        int grown = stack->capacity ? stack->capacity * 2 : 4;
        struct scope_frame *frames = wf__realloc(stack->frames, (size_t)grown * sizeof *frames);
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
    /* Detached first: the releases may open and close scopes on this thread. */
    struct scope_frame frame = stack->frames[--stack->depth];
    frame_release(&frame);
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
    if (!frame_take(inner, a)) {
        wf__error(WF_ERR_MISUSE, "wf_keep: the array is not owned by the innermost scope");
        return NULL;
    }
    if (stack->depth > 1 && frame_add(&stack->frames[stack->depth - 2], a) != WF_OK) {
        frame_add(inner, a); /* cannot fail: the table has room for what it just held */
        return NULL;
    }
    return a;
}
