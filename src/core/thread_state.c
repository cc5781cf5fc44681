/* The registry of per-thread state hooks (see thread_state.h). Hooks are
 * only added: a slot is written before the count that publishes it. */
#include "core/thread_state.h"

#include <assert.h>
#include <stdatomic.h>

#include "util/fork.h"
#include "util/lock.h"

static const wf_thread_state_hook *hooks[WF_THREAD_STATE_HOOKS];
static atomic_int hook_count;
static wf_mutex register_lock = {PTHREAD_MUTEX_INITIALIZER, WF_LOCK_LEAF};

void wf__thread_state_register(const wf_thread_state_hook *hook)
{
    wf__mutex_lock(&register_lock);
    int slot = atomic_load_explicit(&hook_count, memory_order_relaxed);
    assert(slot < WF_THREAD_STATE_HOOKS && "raise WF_THREAD_STATE_HOOKS");
    if (slot < WF_THREAD_STATE_HOOKS) {
        hooks[slot] = hook;
        atomic_store_explicit(&hook_count, slot + 1, memory_order_release);
    }
    wf__mutex_unlock(&register_lock);
}

void wf__thread_state_suspend(wf_thread_state *saved)
{
    saved->count = atomic_load_explicit(&hook_count, memory_order_acquire);
    for (int i = 0; i < saved->count; i++)
        hooks[i]->suspend(saved->saved[i]);
}

void wf__thread_state_resume(const wf_thread_state *saved)
{
    int now = atomic_load_explicit(&hook_count, memory_order_acquire);
    for (int i = 0; i < saved->count; i++)
        hooks[i]->resume(saved->saved[i]);
    for (int i = saved->count; i < now; i++) {
        unsigned char discard[WF_THREAD_STATE_BYTES];
        hooks[i]->suspend(discard);
    }
}

/* fork(): the registration lock is held across it so no hook is half-added
 * (util/fork.h); the hooks themselves are process-wide and stay valid. */
static void fork_prepare(void) { wf__mutex_lock_for_fork(&register_lock); }
static void fork_release(void) { wf__mutex_unlock_for_fork(&register_lock); }

static const wf_fork_hooks fork_hooks = {
    .level = WF_LOCK_LEAF, .prepare = fork_prepare, .parent = fork_release, .child = fork_release};

static void register_fork_hooks(void) __attribute__((constructor));
static void register_fork_hooks(void) { wf__fork_hooks_register(&fork_hooks); }
