/*
 * Kernels per device (DESIGN section 2: a backend adds kernels, not
 * semantics). Internal.
 *
 * A primitive's table holds its semantics; each backend registers its
 * kernels for its device kind once, at the runtime's start-up (the CPU
 * backend: wf__cpu_register_kernels, src/backend/cpu/register.c). The
 * runtime looks a node's kernel up when it runs the node.
 */
#ifndef WEFT_PRIM_KERNEL_H
#define WEFT_PRIM_KERNEL_H

#include "core/array.h"
#include "core/device_kind.h"

/* Attaches `kernel` to `prim` for `device`, replacing any earlier one.
 * WF_ERR_INVALID_ARGUMENT (recorded) for a NULL argument, a device kind out
 * of range or a primitive without kernel slots. Not meant to race with
 * lookups of the same slot: backends register before any node runs. */
wf_status wf__kernel_register(const wf_prim_def *prim, enum wf_device_kind device,
                              wf_kernel_fn kernel);

/* The kernel of `prim` for `device`, or NULL when none is registered. O(1). */
static inline wf_kernel_fn wf__kernel_lookup(const wf_prim_def *prim,
                                             enum wf_device_kind device)
{
    if (!prim->kernels || (unsigned)device >= WF_DEVICE_KIND_COUNT)
        return NULL;
    return prim->kernels->fn[device];
}

/* Each device kind's kernel registration, NULL where no backend is built
 * in. Defined by the backend layer (src/backend/backends.c, the one file
 * that names every backend) and run once by the runtime's start-up: the
 * upward callback of DESIGN section 2, set at link time. */
typedef void (*wf_backend_register_fn)(void);
extern const wf_backend_register_fn wf__backend_register[WF_DEVICE_KIND_COUNT];

/* Records and returns WF_ERR_UNSUPPORTED: "<prim> has no kernel for the
 * <device> device". What evaluating a node without a kernel gives. */
wf_status wf__kernel_missing(const wf_prim_def *prim, enum wf_device_kind device);

#endif
