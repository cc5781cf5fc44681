/* The runtime's start-up (see runtime/start.h): where the upward callbacks
 * of DESIGN section 2 are installed. */
#include "runtime/start.h"

#include <pthread.h>

#include "core/stream_hooks.h"
#include "prim/kernel.h"
#include "runtime/stream.h"

/* Core calls these to give each node its stream (core/stream_hooks.h). */
static const wf_stream_hooks stream_hooks = {
    .current = wf__stream_current,
    .retain = wf__stream_incref,
    .release = wf__stream_decref,
};

static pthread_once_t start_once = PTHREAD_ONCE_INIT;

static void start(void)
{
    wf__stream_hooks_install(&stream_hooks);
    for (int kind = 0; kind < WF_DEVICE_KIND_COUNT; kind++)
        if (wf__backend_register[kind])
            wf__backend_register[kind]();
}

void wf__runtime_start(void) { pthread_once(&start_once, start); }
