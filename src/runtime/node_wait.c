/*
 * Node waits: a striped table of mutex + condition pairs (lock level 50).
 *
 * A state change is a sequentially consistent store followed by a load of
 * the stripe's waiter count; a waiter increments that count before loading
 * the state. One of the two always sees the other, so a change is never
 * missed, and a change with no waiter costs no lock.
 *
 * fork(): the stripes are not held across it (they guard no data); the
 * child, where every waiter is gone, reinitialises them.
 */
#include "runtime/node_wait.h"

#include <stdint.h>

#include "util/fork.h"
#include "util/lock.h"

enum { STRIPES = 64 };

struct stripe {
    wf_mutex lock;
    pthread_cond_t changed;
    atomic_int waiters;
    char pad[64];
};

static struct stripe stripes[STRIPES];
static pthread_once_t stripes_once = PTHREAD_ONCE_INIT;

static void init_stripes(void)
{
    for (int i = 0; i < STRIPES; i++) {
        wf__mutex_init(&stripes[i].lock, WF_LOCK_NODE_WAIT);
        pthread_cond_init(&stripes[i].changed, NULL);
    }
}

static struct stripe *stripe_of(const wf_array *node)
{
    pthread_once(&stripes_once, init_stripes);
    uintptr_t h = (uintptr_t)node;
    h ^= h >> 17;
    h *= 0x9e3779b97f4a7c15u;
    return &stripes[(h >> 40) % STRIPES];
}

void wf__node_wait_at_least(wf_array *node, int state)
{
    if (atomic_load(&node->state) >= state)
        return;
    struct stripe *s = stripe_of(node);
    wf__mutex_lock(&s->lock);
    atomic_fetch_add(&s->waiters, 1);
    while (atomic_load(&node->state) < state)
        wf__cond_wait(&s->changed, &s->lock);
    atomic_fetch_sub(&s->waiters, 1);
    wf__mutex_unlock(&s->lock);
}

void wf__node_publish(wf_array *node, int state)
{
    atomic_store(&node->state, state);
    struct stripe *s = stripe_of(node);
    if (atomic_load(&s->waiters) == 0)
        return;
    wf__mutex_lock(&s->lock);
    pthread_cond_broadcast(&s->changed);
    wf__mutex_unlock(&s->lock);
}

/* ------------------------------------------------------------ fork */

/* The stripes guard no data (node states are atomics, the waiter counts
 * too), only the wait protocol, so fork() does not hold them (the prepare
 * handlers hold every lock at once and ThreadSanitizer tracks at most 64
 * per thread). In the child every waiter is gone: a stripe a gone thread
 * held, its condition and its count start afresh. */
static void fork_nothing(void) {}

static void fork_child(void)
{
    for (int i = 0; i < STRIPES; i++) {
        atomic_store_explicit(&stripes[i].waiters, 0, memory_order_relaxed);
        wf__mutex_init(&stripes[i].lock, WF_LOCK_NODE_WAIT);
        pthread_cond_init(&stripes[i].changed, NULL);
    }
}

static const wf_fork_hooks fork_hooks = {
    .level = WF_LOCK_NODE_WAIT, .prepare = fork_nothing, .parent = fork_nothing, .child = fork_child};

static void register_fork_hooks(void) __attribute__((constructor));
static void register_fork_hooks(void) { wf__fork_hooks_register(&fork_hooks); }
