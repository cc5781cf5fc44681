/*
 * Rules of the discrete Fourier transform (prim/fft.h).
 *
 * For a complex output the vjp engine wants the plain transpose J^T and
 * conjugates around it (transforms/vjp.c), which gives MLX's J^H. A DFT
 * matrix is symmetric, so the transpose of a transform with scale s is the
 * same transform:
 *  - forward / inverse: the node itself on the cotangent;
 *  - real forward: the kept n / 2 + 1 outputs are a projection, so the
 *    cotangent is zero-padded back to n along the real axis, sent through
 *    the complex transform of the same scale, and its real part kept (the
 *    input is real).
 * The real inverse has a real output: its rule is written in MLX's
 * convention directly. Each spectrum entry but DC and Nyquist reaches the
 * output twice (itself and its conjugate mirror), so the cotangent is the
 * real forward transform of the output's with the inverse's scale (the
 * mirrored norm: backward <-> forward), doubled there.
 * All kinds are linear over the reals: the jvp is the node on the
 * tangents. vmap moves the batch to axis 0 and shifts the axes.
 */
#include "core/error.h"
#include "prim/fft.h"
#include "transforms/rules.h"

static const wf_fft_params *fft_params(const wf_array *node) { return node->params; }

static int mirrored_norm(int norm)
{
    return norm == WF_FFT_NORM_BACKWARD  ? WF_FFT_NORM_FORWARD
           : norm == WF_FFT_NORM_FORWARD ? WF_FFT_NORM_BACKWARD
                                         : WF_FFT_NORM_ORTHO;
}

/* A node of kind `kind` with p's axes on x, under p's norm or its mirror. */
static wf_array *related_node(const wf_fft_params *p, int kind, bool mirror, wf_array *x)
{
    wf_fft_params q = *p;
    q.kind = kind;
    q.norm = mirror ? mirrored_norm(p->norm) : p->norm;
    q.real_size = 0;
    return wf__rule_node(&wf__prim_fft, &q, &x, 1);
}

/* ct zero-padded from n / 2 + 1 to n entries along `axis`. */
static wf_array *pad_half_spectrum(wf_array *ct, int axis, int64_t n)
{
    int64_t low[WF_MAX_NDIM] = {0}, high[WF_MAX_NDIM] = {0};
    high[axis] = n - ct->shape[axis];
    return high[axis] > 0 ? wf_pad(ct, low, high, 0.0) : ct;
}

/* 1 at DC (and Nyquist for an even n), 2 elsewhere: n / 2 + 1 float32
 * weights along `axis` of a rank-`ndim` array, size 1 elsewhere. */
static wf_array *hermitian_weights(int64_t n, int axis, int ndim)
{
    const int64_t m = n / 2 + 1;
    wf_array *idx = wf_arange(0, (double)m, 1, WF_DTYPE_F32);
    wf_array *once = wf_equal(idx, wf_scalar(0, WF_DTYPE_F32));
    if (n % 2 == 0)
        once = wf_logical_or(once, wf_equal(idx, wf_scalar((double)(m - 1), WF_DTYPE_F32)));
    wf_array *w = wf_where(once, wf_scalar(1, WF_DTYPE_F32), wf_scalar(2, WF_DTYPE_F32));
    int64_t shape[WF_MAX_NDIM];
    for (int d = 0; d < ndim; d++)
        shape[d] = d == axis ? m : 1;
    return wf_reshape(w, shape, ndim);
}

static wf_status vjp_fft(wf_array *node, wf_array *ct, const bool *wanted, wf_array **cts)
{
    if (!wanted[0])
        return WF_OK;
    const wf_fft_params *p = fft_params(node);
    const int last = p->axes[p->n_axes - 1];
    switch (p->kind) {
    case WF_FFT_FORWARD:
    case WF_FFT_INVERSE: cts[0] = related_node(p, p->kind, false, ct); break;
    case WF_FFT_REAL_FORWARD: {
        wf_array *full = pad_half_spectrum(ct, last, node->inputs[0]->shape[last]);
        cts[0] = wf_real(related_node(p, WF_FFT_FORWARD, false, full));
        break;
    }
    default: {
        wf_array *half = related_node(p, WF_FFT_REAL_FORWARD, true, ct);
        cts[0] = wf_multiply(half, hermitian_weights(p->real_size, last, node->ndim));
        break;
    }
    }
    return wf__rule_result(cts[0]);
}

static wf_status vmap_fft(wf_array *node, wf_array *const *in, const int *axes, int64_t batch,
                          wf_array **out, int *out_axis)
{
    (void)batch;
    wf_fft_params p = *fft_params(node);
    for (int i = 0; i < p.n_axes; i++)
        p.axes[i] += 1;
    wf_array *x = wf__vmap_to_front(in[0], axes[0]);
    *out = wf__rule_node(&wf__prim_fft, &p, &x, 1);
    *out_axis = 0;
    return wf__rule_result(*out);
}

const wf_prim_rules wf__rules_fft[] = {
    {&wf__prim_fft, WF_RULES_DIFFERENTIABLE, vjp_fft, wf__rule_jvp_linear, vmap_fft, false},
};
const size_t wf__rules_fft_count = sizeof wf__rules_fft / sizeof wf__rules_fft[0];
