/* CPU kernel of wf_searchsorted (prim/search.h). Internal. */
#ifndef WEFT_BACKEND_CPU_SEARCH_H
#define WEFT_BACKEND_CPU_SEARCH_H

#include "core/array.h"

wf_status wf__cpu_searchsorted(wf_array *out, wf_array *const *inputs, int ninputs,
                               const void *params);

#endif
