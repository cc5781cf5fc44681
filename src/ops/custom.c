/* wf_custom: a lazy array computed by a user kernel. */
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "ops/ops.h"
#include "prim/custom.h"

enum { MAX_CUSTOM_INPUTS = 64 };

/* wf_custom owns the payload from the call on: every early failure frees it. */
static wf_array *fail(void *payload, void (*payload_free)(void *))
{
    if (payload_free)
        payload_free(payload);
    return NULL;
}

wf_array *wf__op_custom(const char *name, wf_custom_kernel kernel, void *payload,
                        void (*payload_free)(void *payload), wf_array *const *inputs, int count,
                        const int64_t *shape, int ndim, wf_dtype dtype)
{
    wf_custom_params p;
    memset(&p, 0, sizeof p);
    strncpy(p.name, name ? name : "custom", sizeof p.name - 1);
    if (!kernel) {
        wf__error(WF_ERR_NULL_ARGUMENT, "wf_custom '%s': kernel is NULL", p.name);
        return fail(payload, payload_free);
    }
    if (count < 0 || count > MAX_CUSTOM_INPUTS) {
        wf__error(WF_ERR_INVALID_ARGUMENT, "wf_custom '%s': %d inputs (0..%d allowed)", p.name,
                  count, MAX_CUSTOM_INPUTS);
        return fail(payload, payload_free);
    }
    if (count > 0 && !inputs) {
        wf__error(WF_ERR_NULL_ARGUMENT, "wf_custom '%s': inputs is NULL", p.name);
        return fail(payload, payload_free);
    }
    int64_t size;
    if (wf__shape_size("wf_custom", shape, ndim, &size) != WF_OK)
        return fail(payload, payload_free);
    p.kernel = kernel;
    p.payload = payload;
    p.payload_free = payload_free;
    p.dtype = dtype;
    p.ndim = ndim;
    if (ndim)
        memcpy(p.shape, shape, (size_t)ndim * sizeof *shape);
    return wf__node_new(&wf__prim_custom, &p, inputs, count);
}

wf_array *wf_custom(const char *name, wf_custom_kernel kernel, void *payload,
                    void (*payload_free)(void *payload), wf_array *const *inputs, int count,
                    const int64_t *shape, int ndim, wf_dtype dtype)
{
    return wf__array_publish(wf__op_custom(name, kernel, payload, payload_free, inputs, count,
                                           shape, ndim, dtype));
}
