/* wf_searchsorted: both inputs promoted to one dtype, then one node. */
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "ops/ops.h"
#include "prim/search.h"
#include "prim/sort.h"

static wf_array *searchsorted_node(wf_array *sorted, wf_array *values, bool right)
{
    const char *op = "wf_searchsorted";
    if (!wf__array_check(sorted, op, "sorted") || !wf__array_check(values, op, "values"))
        return NULL;
    if (sorted->ndim != 1) {
        wf__error(WF_ERR_SHAPE, "%s: the sorted sequence must be 1-d, not %d-d", op,
                  sorted->ndim);
        return NULL;
    }
    const wf_dtype dtype = wf_promote_types(sorted->dtype, values->dtype);
    if (!wf__sort_dtype_ok(dtype)) {
        wf__error(WF_ERR_DTYPE, "%s: cannot order %s", op, wf_dtype_name(dtype));
        return NULL;
    }
    wf_search_params p;
    memset(&p, 0, sizeof p);
    p.right = right;
    wf_array *inputs[2] = {wf__op_astype(sorted, dtype), wf__op_astype(values, dtype)};
    wf_array *out = inputs[0] && inputs[1]
                        ? wf__node_new(&wf__prim_searchsorted, &p, inputs, 2)
                        : NULL;
    wf__array_release(inputs[0]);
    wf__array_release(inputs[1]);
    return out;
}

wf_array *wf_searchsorted(wf_array *sorted, wf_array *values, bool right)
{
    return wf__array_publish(searchsorted_node(sorted, values, right));
}
