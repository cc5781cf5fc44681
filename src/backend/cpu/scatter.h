/* CPU kernels of the general gather / scatter (prim/scatter.h) and of the
 * sort family and extra scans (prim/sort.h). Internal. */
#ifndef WEFT_BACKEND_CPU_SCATTER_H
#define WEFT_BACKEND_CPU_SCATTER_H

#include "core/array.h"

wf_status wf__cpu_gather(wf_array *out, wf_array *const *inputs, int ninputs,
                         const void *params);
wf_status wf__cpu_scatter(wf_array *out, wf_array *const *inputs, int ninputs,
                          const void *params);
wf_status wf__cpu_masked_scatter(wf_array *out, wf_array *const *inputs, int ninputs,
                                 const void *params);
wf_status wf__cpu_sort(wf_array *out, wf_array *const *inputs, int ninputs, const void *params);
wf_status wf__cpu_scan_extra(wf_array *out, wf_array *const *inputs, int ninputs,
                             const void *params);

#endif
