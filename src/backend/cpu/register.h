/* The CPU backend's kernel registration (src/backend/cpu/register.c).
 * Internal. */
#ifndef WEFT_BACKEND_CPU_REGISTER_H
#define WEFT_BACKEND_CPU_REGISTER_H

/* Attaches every CPU kernel to its primitive for WF_DEVICE_KIND_CPU. Run
 * once, by the runtime's start-up (through wf__backend_register). */
void wf__cpu_register_kernels(void);
/* The collectives' kernels (backend/cpu/distributed.c). */
void wf__cpu_register_collectives(void);

#endif
