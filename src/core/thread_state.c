/* The registry of per-thread state hooks (see thread_state.h). Hooks are
 * only added: a slot is written before the count that publishes it. */
#include "core/thread_state.h"

#include <assert.h>
#include <stdatomic.h>

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
