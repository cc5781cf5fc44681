/* CPU kernels of gather_mm and segmented_mm (prim/matmul_family.h). Internal. */
#ifndef WEFT_BACKEND_CPU_MATMUL_FAMILY_H
#define WEFT_BACKEND_CPU_MATMUL_FAMILY_H

#include "core/array.h"

wf_status wf__cpu_gather_mm(wf_array *out, wf_array *const *inputs, int ninputs,
                            const void *params);
wf_status wf__cpu_segmented_mm(wf_array *out, wf_array *const *inputs, int ninputs,
                               const void *params);

#endif
