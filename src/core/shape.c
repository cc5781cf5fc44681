/* Shape helpers: strides, sizes, axes and broadcasting (core/shape.h). */
#include "core/shape.h"

#include "core/error.h"

void wf__contiguous_strides(const int64_t *shape, int ndim, int64_t *strides)
{
    int64_t stride = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = stride;
        stride *= shape[i] > 0 ? shape[i] : 1;
    }
}

bool wf__is_row_contiguous(const int64_t *shape, const int64_t *strides, int ndim)
{
    int64_t expected = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        if (shape[i] == 0)
            return true;
        if (shape[i] != 1 && strides[i] != expected)
            return false;
        expected *= shape[i];
    }
    return true;
}

bool wf__is_dense(const int64_t *shape, const int64_t *strides, int ndim)
{
    /* Walk the dims from the smallest stride up: each must start where the
     * block of the dims below it ends. */
    bool used[WF_MAX_NDIM] = {false};
    int64_t expected = 1;
    for (int k = 0; k < ndim; k++) {
        if (shape[k] == 0)
            return true;
        int next = -1;
        for (int d = 0; d < ndim; d++)
            if (!used[d] && shape[d] != 1 && (next < 0 || strides[d] < strides[next]))
                next = d;
        if (next < 0)
            return true; /* only size-1 dims left */
        if (strides[next] != expected)
            return false;
        used[next] = true;
        expected *= shape[next];
    }
    return true;
}

wf_status wf__shape_size(const char *op, const int64_t *shape, int ndim, int64_t *size)
{
    if (ndim < 0 || ndim > WF_MAX_NDIM)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "%s: rank %d is outside 0..%d", op, ndim,
                         WF_MAX_NDIM);
    if (ndim > 0 && !shape)
        return wf__error(WF_ERR_NULL_ARGUMENT, "%s: shape is NULL with rank %d", op, ndim);
    int64_t total = 1;
    bool empty = false;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return wf__error(WF_ERR_INVALID_ARGUMENT, "%s: dimension %d is negative (%lld)", op, i,
                             (long long)shape[i]);
        if (shape[i] == 0)
            empty = true;
    }
    for (int i = 0; i < ndim; i++) {
        /* Keep size * 8 bytes representable so byte counts never overflow.
         * Zero dims are skipped, not short-circuited (as NumPy does): an
         * empty array's other dims still multiply into strides and loops. */
        if (shape[i] != 0 && total > (INT64_MAX / 8) / shape[i])
            return wf__error(WF_ERR_OVERFLOW, "%s: shape has more than 2^60 elements", op);
        total *= shape[i] != 0 ? shape[i] : 1;
    }
    *size = empty ? 0 : total;
    return WF_OK;
}

wf_status wf__normalize_axis(const char *op, int axis, int ndim, int *out)
{
    if (axis < -ndim || axis >= ndim)
        return wf__error(WF_ERR_AXIS, "%s: axis %d is out of range for rank %d", op, axis, ndim);
    *out = axis < 0 ? axis + ndim : axis;
    return WF_OK;
}

wf_status wf__broadcast_shapes(const char *op, const int64_t *a, int na, const int64_t *b,
                               int nb, int64_t *out, int *nout)
{
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int64_t da = i < n - na ? 1 : a[i - (n - na)];
        int64_t db = i < n - nb ? 1 : b[i - (n - nb)];
        if (da != db && da != 1 && db != 1)
            return wf__error(WF_ERR_SHAPE,
                             "%s: shapes cannot broadcast (dimension %d: %lld vs %lld)", op, i,
                             (long long)da, (long long)db);
        out[i] = da == 1 ? db : da;
    }
    *nout = n;
    return WF_OK;
}
