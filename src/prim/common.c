/* Helpers shared by the primitive tables and op constructors. */
#include <stdio.h>

#include "core/error.h"
#include "prim/prims.h"

const char *wf__shape_str(const int64_t *shape, int ndim, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    used += (size_t)snprintf(buf, cap, "(");
    for (int d = 0; d < ndim && used < cap; d++) {
        used += (size_t)snprintf(buf + used, cap - used, d == 0 ? "%lld" : ", %lld",
                                 (long long)shape[d]);
    }
    if (used < cap)
        snprintf(buf + used, cap - used, ndim == 1 ? ",)" : ")");
    return buf;
}

wf_status wf__check_shape(const char *op, const int64_t *shape, int ndim)
{
    int64_t size;
    return wf__shape_size(op, shape, ndim, &size);
}
