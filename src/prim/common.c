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

wf_status wf__check_shape(const char *op, const int64_t *shape, int ndim, wf_dtype dtype)
{
    if (ndim < 0 || ndim > WF_MAX_NDIM)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "%s: ndim %d is out of range [0, %d]", op,
                         ndim, WF_MAX_NDIM);
    if (shape == NULL && ndim > 0)
        return wf__error(WF_ERR_NULL_ARGUMENT, "%s: shape is NULL with ndim %d", op, ndim);
    int64_t size = 0;
    wf_status st = wf__shape_size(op, shape, ndim, &size);
    if (st != WF_OK)
        return st;
    size_t item = wf_dtype_size(dtype);
    if (item != 0 && size > INT64_MAX / (int64_t)item) {
        char buf[256];
        return wf__error(WF_ERR_OVERFLOW, "%s: %s of %s overflows the byte count", op,
                         wf__shape_str(shape, ndim, buf, sizeof buf), wf_dtype_name(dtype));
    }
    return WF_OK;
}
