/* The backends built into weft, per device kind (see prim/kernel.h): the
 * runtime's start-up runs each one's kernel registration once. A new
 * backend (CUDA) adds its entry here and its kernels under
 * src/backend/<device>/. */
#include "backend/cpu/register.h"
#include "prim/kernel.h"

const wf_backend_register_fn wf__backend_register[WF_DEVICE_KIND_COUNT] = {
    [WF_DEVICE_KIND_CPU] = wf__cpu_register_kernels,
};
