/* The discrete Fourier transform: shape and dtype inference (prim/fft.h). */
#include "prim/fft.h"

#include "core/error.h"

int64_t wf__fft_length(const wf_fft_params *p, const int64_t *in_shape, int i)
{
    if (p->kind == WF_FFT_REAL_INVERSE && i == p->n_axes - 1)
        return p->real_size;
    return in_shape[p->axes[i]];
}

static wf_status infer_fft(const void *params, const wf_desc *inputs, int ninputs,
                           wf_out_desc *out)
{
    const wf_fft_params *p = params;
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "wf_fft: expected 1 input, got %d", ninputs);
    const wf_desc *a = &inputs[0];
    if (p->kind < WF_FFT_FORWARD || p->kind > WF_FFT_REAL_INVERSE || p->norm < 0 ||
        p->norm > WF_FFT_NORM_FORWARD)
        return wf__error(WF_ERR_INVALID_ARGUMENT, "wf_fft: bad kind %d or norm %d", p->kind,
                         p->norm);
    const wf_dtype want = p->kind == WF_FFT_REAL_FORWARD ? WF_DTYPE_F32 : WF_DTYPE_C64;
    if (a->dtype != want)
        return wf__error(WF_ERR_DTYPE, "wf_fft: expected %s input, got %s", wf_dtype_name(want),
                         wf_dtype_name(a->dtype));
    if (p->n_axes < 1 || p->n_axes > a->ndim)
        return wf__error(WF_ERR_AXIS, "wf_fft: %d axes for an array of rank %d", p->n_axes,
                         a->ndim);
    uint64_t seen = 0;
    for (int i = 0; i < p->n_axes; i++) {
        const int ax = p->axes[i];
        if (ax < 0 || ax >= a->ndim || (seen >> ax & 1u))
            return wf__error(WF_ERR_AXIS, "wf_fft: axis %d is out of range or repeated", ax);
        seen |= 1ull << ax;
        if (wf__fft_length(p, a->shape, i) < 1)
            return wf__error(WF_ERR_INVALID_ARGUMENT,
                             "wf_fft: transform length %lld along axis %d is not positive",
                             (long long)wf__fft_length(p, a->shape, i), ax);
    }
    const int last = p->axes[p->n_axes - 1];
    if (p->kind == WF_FFT_REAL_INVERSE && a->shape[last] != p->real_size / 2 + 1)
        return wf__error(WF_ERR_SHAPE,
                         "wf_fft: a real inverse of length %lld needs %lld entries on axis %d, "
                         "got %lld",
                         (long long)p->real_size, (long long)(p->real_size / 2 + 1), last,
                         (long long)a->shape[last]);
    wf__shape_copy(out->shape, a->shape, a->ndim);
    out->ndim = a->ndim;
    out->dtype = p->kind == WF_FFT_REAL_INVERSE ? WF_DTYPE_F32 : WF_DTYPE_C64;
    if (p->kind == WF_FFT_REAL_FORWARD)
        out->shape[last] = a->shape[last] / 2 + 1;
    else if (p->kind == WF_FFT_REAL_INVERSE)
        out->shape[last] = p->real_size;
    return WF_OK;
}

const wf_prim_def wf__prim_fft = {
    .name = "fft",
    .params_size = sizeof(wf_fft_params),
    .infer = infer_fft,
    .kernels = &(wf_kernel_slots){{0}},
};
