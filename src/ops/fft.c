/* wf_fft: argument checks, MLX's input conversions, the truncation or zero
 * padding to the transform lengths, then one fft node (prim/fft.h). */
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"
#include "ops/ops.h"
#include "prim/fft.h"

/* New internal references (a itself when nothing changes: the fft node
 * that follows is the op's own result). */

/* a as the kernel's input dtype: float32 for a real forward transform (a
 * complex input keeps its real part), else complex64. */
static wf_array *convert_input(wf_array *a, wf_fft_kind kind)
{
    if (kind != WF_FFT_REAL_FORWARD)
        return a->dtype == WF_DTYPE_C64 ? wf__array_incref(a) : wf__op_astype(a, WF_DTYPE_C64);
    if (a->dtype == WF_DTYPE_F32)
        return wf__array_incref(a);
    if (a->dtype != WF_DTYPE_C64)
        return wf__op_astype(a, WF_DTYPE_F32);
    return wf__op_real(a); /* complex64's real part is float32 */
}

/* x truncated (a view) or padded with zeros to `len` along each axis. */
static wf_array *fit_lengths(wf_array *x, const int *axes, const int64_t *len, int n_axes)
{
    int64_t starts[WF_MAX_NDIM], stops[WF_MAX_NDIM], steps[WF_MAX_NDIM];
    int64_t low[WF_MAX_NDIM], high[WF_MAX_NDIM];
    bool cut = false, grow = false;
    for (int d = 0; d < x->ndim; d++) {
        starts[d] = low[d] = high[d] = 0;
        stops[d] = x->shape[d];
        steps[d] = 1;
    }
    for (int i = 0; i < n_axes; i++) {
        const int ax = axes[i];
        if (len[i] < x->shape[ax]) {
            stops[ax] = len[i];
            cut = true;
        } else if (len[i] > x->shape[ax]) {
            high[ax] = len[i] - x->shape[ax];
            grow = true;
        }
    }
    wf_array *sliced = cut ? wf__op_slice(x, starts, stops, steps) : wf__array_incref(x);
    if (!grow || !sliced)
        return sliced;
    wf_array *padded = wf__op_pad(sliced, low, high, 0.0);
    wf__array_release(sliced);
    return padded;
}

/* Fills p (kind, norm, normalized axes, real_size) and the lengths the
 * input must have along the axes; records the error otherwise. */
static wf_status check_args(const wf_array *a, const int *axes, int n_axes,
                            const int64_t *sizes, wf_fft_kind kind, wf_fft_norm norm,
                            wf_fft_params *p, int64_t *in_len)
{
    if (kind < WF_FFT_FORWARD || kind > WF_FFT_REAL_INVERSE)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "wf_fft: unknown kind %d", (int)kind);
    if (norm < WF_FFT_NORM_BACKWARD || norm > WF_FFT_NORM_FORWARD)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "wf_fft: unknown norm %d", (int)norm);
    if (a->ndim == 0)
        return wf__error(WF_ERR_SHAPE, "wf_fft: a 0-d array has no axis to transform");
    if (n_axes < 1 || n_axes > a->ndim)
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "wf_fft: %d axes requested for an array of rank %d (1 to %d allowed)",
                         n_axes, a->ndim, a->ndim);
    if (!axes)
        return wf__error(WF_ERR_NULL_ARGUMENT, "wf_fft: axes is NULL");
    p->kind = kind;
    p->norm = norm;
    p->n_axes = n_axes;
    uint64_t seen = 0;
    for (int i = 0; i < n_axes; i++) {
        if (wf__normalize_axis("wf_fft", axes[i], a->ndim, &p->axes[i]) != WF_OK)
            return WF_ERR_AXIS;
        if (seen >> p->axes[i] & 1u)
            return wf__error(WF_ERR_AXIS, "wf_fft: axis %d is repeated", axes[i]);
        seen |= 1ull << p->axes[i];
    }
    for (int i = 0; i < n_axes; i++) {
        const int64_t have = a->shape[p->axes[i]];
        const bool real_axis = kind == WF_FFT_REAL_INVERSE && i == n_axes - 1;
        const int64_t n = sizes ? sizes[i] : real_axis ? 2 * (have - 1) : have;
        if (n < 1)
            return wf__error(WF_ERR_INVALID_ARGUMENT,
                             "wf_fft: invalid transform length %lld along axis %d (must be "
                             "positive)",
                             (long long)n, axes[i]);
        in_len[i] = real_axis ? n / 2 + 1 : n;
        if (real_axis)
            p->real_size = n;
    }
    return WF_OK;
}

wf_array *wf__op_fft(wf_array *a, const int *axes, int n_axes, const int64_t *sizes,
                     wf_fft_kind kind, wf_fft_norm norm)
{
    if (!wf__array_check(a, "wf_fft", "a"))
        return NULL;
    wf_fft_params p;
    memset(&p, 0, sizeof p);
    int64_t in_len[WF_MAX_NDIM];
    if (check_args(a, axes, n_axes, sizes, kind, norm, &p, in_len) != WF_OK)
        return NULL;
    wf_array *x = convert_input(a, kind);
    wf_array *fitted = x ? fit_lengths(x, p.axes, in_len, n_axes) : NULL;
    wf__array_release(x);
    wf_array *out = fitted ? wf__node_new(&wf__prim_fft, &p, &fitted, 1) : NULL;
    wf__array_release(fitted);
    return out;
}

wf_array *wf_fft(wf_array *a, const int *axes, int n_axes, const int64_t *sizes,
                 wf_fft_kind kind, wf_fft_norm norm)
{
    return wf__array_publish(wf__op_fft(a, axes, n_axes, sizes, kind, norm));
}
