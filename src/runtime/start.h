/* The runtime's start-up. Internal. */
#ifndef WEFT_RUNTIME_START_H
#define WEFT_RUNTIME_START_H

/* Runs once, before the first stream is created (stream creation calls it):
 * installs core's stream hooks (core/stream_hooks.h) and has every backend
 * register its kernels (wf__backend_register, prim/kernel.h). Nodes run
 * only on streams, so every kernel is registered before any node runs. */
void wf__runtime_start(void);

#endif
