/*
 * The discrete Fourier transform primitive (wf_fft). Internal.
 */
#ifndef WEFT_PRIM_FFT_H
#define WEFT_PRIM_FFT_H

#include "prim/prims.h"

/* axes normalized and distinct, in the caller's order (the last is the
 * real axis of the real kinds). The input is already truncated or padded:
 * its lengths along `axes` are the transform lengths, except the last axis
 * of WF_FFT_REAL_INVERSE, which holds real_size / 2 + 1 entries. */
typedef struct wf_fft_params {
    int kind; /* wf_fft_kind */
    int norm; /* wf_fft_norm */
    int n_axes;
    int axes[WF_MAX_NDIM];
    int64_t real_size; /* WF_FFT_REAL_INVERSE: output length on the last axis; else 0 */
} wf_fft_params;

/* Input: complex64 (float32 for WF_FFT_REAL_FORWARD). Output: complex64
 * (float32 for WF_FFT_REAL_INVERSE), the input's shape but for the last
 * axis of the real kinds (n -> n / 2 + 1 forward, -> real_size inverse). */
extern const wf_prim_def wf__prim_fft;

/* The transform length along params' axis i (the logical n). */
int64_t wf__fft_length(const wf_fft_params *p, const int64_t *in_shape, int i);

#endif
