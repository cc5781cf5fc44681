/* The fork-handler registry (see fork.h). Registration happens only from
 * constructors, which run one at a time before any weft thread exists, so
 * the table needs no lock; the handlers read it after every registration. */
#include "util/fork.h"

#include <assert.h>
#include <pthread.h>
#include <stddef.h>

enum { MAX_MODULES = 16 };

static const wf_fork_hooks *modules[MAX_MODULES]; /* ascending level */
static int module_count;
static int children;

static void run_prepare(void)
{
    for (int i = 0; i < module_count; i++)
        modules[i]->prepare();
}

static void run_parent(void)
{
    for (int i = module_count - 1; i >= 0; i--)
        modules[i]->parent();
}

static void run_child(void)
{
    children++;
    for (int i = module_count - 1; i >= 0; i--)
        modules[i]->child();
}

void wf__fork_hooks_register(const wf_fork_hooks *hooks)
{
    assert(module_count < MAX_MODULES && "raise MAX_MODULES");
    if (module_count == MAX_MODULES)
        return;
    /* Fails only without memory, at load time; fork() then works as before
     * this registry existed (the child cannot use weft), nothing else. */
    if (module_count == 0)
        pthread_atfork(run_prepare, run_parent, run_child);
    int i = module_count++;
    while (i > 0 && modules[i - 1]->level > hooks->level) { /* stable: equal levels keep order */
        modules[i] = modules[i - 1];
        i--;
    }
    modules[i] = hooks;
}

int wf__fork_children(void) { return children; }
