/* Kernel registration per device (see prim/kernel.h). */
#include "prim/kernel.h"

#include "core/error.h"

wf_status wf__kernel_register(const wf_prim_def *prim, enum wf_device_kind device,
                              wf_kernel_fn kernel)
{
    if (!prim || !kernel)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "wf__kernel_register: %s is NULL",
                         prim ? "the kernel" : "the primitive");
    if ((unsigned)device >= WF_DEVICE_KIND_COUNT)
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "wf__kernel_register: device kind %d is out of range for '%s'",
                         (int)device, prim->name);
    if (!prim->kernels)
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "wf__kernel_register: primitive '%s' has no kernel slots", prim->name);
    prim->kernels->fn[device] = kernel;
    return WF_OK;
}

wf_status wf__kernel_missing(const wf_prim_def *prim, enum wf_device_kind device)
{
    return wf__error(WF_ERR_UNSUPPORTED, "%s: the primitive has no kernel for the %s device",
                     prim->name, wf__device_kind_name(device));
}
