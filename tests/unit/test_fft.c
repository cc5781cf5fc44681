/*
 * wf_fft against a direct O(n^2) DFT written here in double precision:
 *  - 1-d forward and inverse transforms of many lengths (powers of two,
 *    the small primes, mixed radix, Bluestein lengths), batched;
 *  - every axis of a 3-d array, every norm;
 *  - strided, transposed and broadcast inputs;
 *  - real forward / real inverse transforms (odd and even lengths);
 *  - n-d transforms over a subset of axes in any order, with padding and
 *    truncation to requested lengths;
 *  - the vjp of each kind against its adjoint built here (MLX's convention:
 *    J^H for complex cotangents; the real inverse's spectrum entries but
 *    DC / Nyquist count twice);
 *  - the argument errors, and allocation / kernel failures injected at
 *    every fallible step of an n-d real inverse of a Bluestein length.
 * A float32 result passes when its largest error is at most
 * 1e-5 * log2(n) of the reference's largest magnitude.
 */
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "util/fault.h"

typedef double _Complex cd;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

static uint32_t rng_state = 12345u;
static float next_uniform(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

static int64_t product(const int64_t *shape, int ndim)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    return n;
}

/* In place: the DFT (sign -1 forward, +1 inverse, unscaled) along `axis`
 * of a row-major array. */
static void dft_axis(cd *x, const int64_t *shape, int ndim, int axis, int sign)
{
    const int64_t n = shape[axis];
    int64_t inner = 1, outer = 1;
    for (int d = axis + 1; d < ndim; d++)
        inner *= shape[d];
    for (int d = 0; d < axis; d++)
        outer *= shape[d];
    cd *line = malloc((size_t)n * sizeof *line), *res = malloc((size_t)n * sizeof *res);
    cd *roots = malloc((size_t)n * sizeof *roots);
    for (int64_t t = 0; t < n; t++) {
        const double angle = sign * 2.0 * M_PI * (double)t / (double)n;
        roots[t] = cos(angle) + I * sin(angle);
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            cd *base = x + o * n * inner + i;
            for (int64_t j = 0; j < n; j++)
                line[j] = base[j * inner];
            for (int64_t k = 0; k < n; k++) {
                cd acc = 0;
                for (int64_t j = 0; j < n; j++)
                    acc += line[j] * roots[(j * k) % n];
                res[k] = acc;
            }
            for (int64_t k = 0; k < n; k++)
                base[k * inner] = res[k];
        }
    free(line);
    free(res);
    free(roots);
}

/* Largest |got - want| over largest |want|, within 1e-5 * log2(n)? */
static bool close_enough(const float *got, const cd *want, int64_t count, int64_t n,
                         bool complex_values, const char *what)
{
    double err = 0, mag = 1e-30;
    for (int64_t i = 0; i < count; i++) {
        const cd g = complex_values ? got[2 * i] + I * got[2 * i + 1] : got[i];
        const cd w = complex_values ? want[i] : creal(want[i]);
        err = fmax(err, cabs(g - w));
        mag = fmax(mag, cabs(w));
    }
    const double tol = 1e-5 * fmax(1.0, log2((double)n));
    if (err / mag <= tol)
        return true;
    printf("  %s: relative error %.3g > %.3g (n %lld)\n", what, err / mag, tol, (long long)n);
    return CHECK(err / mag <= tol);
}

/* A complex64 array of `shape` with random values; its values in `host`. */
static wf_array *random_complex(const int64_t *shape, int ndim, cd *host)
{
    const int64_t count = product(shape, ndim);
    float *data = malloc((size_t)(2 * count + 1) * sizeof *data);
    for (int64_t i = 0; i < count; i++) {
        data[2 * i] = next_uniform();
        data[2 * i + 1] = next_uniform();
        host[i] = data[2 * i] + I * data[2 * i + 1];
    }
    wf_array *a = wf_array_from_data(data, shape, ndim, WF_DTYPE_C64);
    free(data);
    return a;
}

static wf_array *random_real(const int64_t *shape, int ndim, cd *host)
{
    const int64_t count = product(shape, ndim);
    float *data = malloc((size_t)(count + 1) * sizeof *data);
    for (int64_t i = 0; i < count; i++) {
        data[i] = next_uniform();
        host[i] = data[i];
    }
    wf_array *a = wf_array_from_data(data, shape, ndim, WF_DTYPE_F32);
    free(data);
    return a;
}

/* y's values compared with want (row-major, y's size). */
static void check_result(wf_array *y, const cd *want, int64_t n, const char *what)
{
    if (!CHECK_NOT_NULL(y))
        return;
    const bool cplx = wf_array_dtype(y) == WF_DTYPE_C64;
    const int64_t count = wf_array_size(y);
    float *got = malloc((size_t)(2 * count + 1) * sizeof *got);
    if (CHECK_OK(wf_array_copy_to(y, got, wf_array_nbytes(y))))
        close_enough(got, want, count, n, cplx, what);
    free(got);
}

static void scale_all(cd *x, int64_t count, double s)
{
    for (int64_t i = 0; i < count; i++)
        x[i] *= s;
}

/* ---------------------------------------------------------------- 1-d */

static void test_lengths_batched(void)
{
    static const int64_t lengths[] = {1, 2, 3, 5, 7, 8, 16, 17, 64, 100, 127, 1024, 4096};
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        const int64_t n = lengths[li];
        const int64_t batch = n >= 1024 ? (SANITIZED ? 1 : 2) : 3;
        const int64_t shape[2] = {batch, n};
        cd *host = malloc((size_t)(batch * n) * sizeof *host);
        cd *want = malloc((size_t)(batch * n) * sizeof *want);
        CHECK_OK(wf_scope_begin());
        wf_array *a = random_complex(shape, 2, host);
        const int axis = -1;
        for (int inverse = 0; inverse <= 1; inverse++) {
            memcpy(want, host, (size_t)(batch * n) * sizeof *want);
            dft_axis(want, shape, 2, 1, inverse ? 1 : -1);
            if (inverse)
                scale_all(want, batch * n, 1.0 / (double)n);
            wf_array *y = wf_fft(a, &axis, 1, NULL, inverse ? WF_FFT_INVERSE : WF_FFT_FORWARD,
                                 WF_FFT_NORM_BACKWARD);
            check_result(y, want, n, inverse ? "ifft" : "fft");
        }
        CHECK_OK(wf_scope_end());
        free(host);
        free(want);
    }
}

static void test_every_axis_and_norm(void)
{
    const int64_t shape[3] = {6, 10, 7};
    const int64_t count = product(shape, 3);
    cd *host = malloc((size_t)count * sizeof *host), *want = malloc((size_t)count * sizeof *want);
    CHECK_OK(wf_scope_begin());
    wf_array *a = random_complex(shape, 3, host);
    for (int axis = 0; axis < 3; axis++)
        for (int norm = WF_FFT_NORM_BACKWARD; norm <= WF_FFT_NORM_FORWARD; norm++)
            for (int inverse = 0; inverse <= 1; inverse++) {
                const double n = (double)shape[axis];
                memcpy(want, host, (size_t)count * sizeof *want);
                dft_axis(want, shape, 3, axis, inverse ? 1 : -1);
                const double s = norm == WF_FFT_NORM_ORTHO ? 1.0 / sqrt(n)
                                 : (norm == WF_FFT_NORM_BACKWARD) == (inverse == 1) ? 1.0 / n
                                                                                    : 1.0;
                scale_all(want, count, s);
                const int ax = axis - 3; /* negative axes count from the end */
                wf_array *y = wf_fft(a, &ax, 1, NULL, inverse ? WF_FFT_INVERSE : WF_FFT_FORWARD,
                                     (wf_fft_norm)norm);
                check_result(y, want, shape[axis], "axis/norm");
            }
    CHECK_OK(wf_scope_end());
    free(host);
    free(want);
}

/* ---------------------------------------------------------------- layouts */

static void test_strided_and_transposed(void)
{
    const int64_t shape[2] = {12, 16};
    cd host[12 * 16], view[12 * 16], want[12 * 16];
    CHECK_OK(wf_scope_begin());
    wf_array *a = random_complex(shape, 2, host);

    /* the transpose (16, 12), transformed along its last axis */
    const int perm[2] = {1, 0};
    wf_array *t = wf_transpose(a, perm, 2);
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 12; j++)
            view[i * 12 + j] = host[j * 16 + i];
    const int64_t tshape[2] = {16, 12};
    for (int axis = 0; axis < 2; axis++) {
        memcpy(want, view, sizeof want);
        dft_axis(want, tshape, 2, axis, -1);
        check_result(wf_fft(t, &axis, 1, NULL, WF_FFT_FORWARD, WF_FFT_NORM_BACKWARD), want,
                     tshape[axis], "transposed");
    }

    /* every other column, reversed rows: a[::-1, ::2] of shape (12, 8) */
    const int64_t starts[2] = {11, 0}, stops[2] = {-13, 16}, steps[2] = {-1, 2};
    wf_array *s = wf_slice(a, starts, stops, steps);
    for (int i = 0; i < 12; i++)
        for (int j = 0; j < 8; j++)
            view[i * 8 + j] = host[(11 - i) * 16 + 2 * j];
    const int64_t sshape[2] = {12, 8};
    const int axes[2] = {1, 0};
    memcpy(want, view, 12 * 8 * sizeof *want);
    dft_axis(want, sshape, 2, 1, 1);
    dft_axis(want, sshape, 2, 0, 1);
    scale_all(want, 12 * 8, 1.0 / 96.0);
    check_result(wf_fft(s, axes, 2, NULL, WF_FFT_INVERSE, WF_FFT_NORM_BACKWARD), want, 96,
                 "sliced");

    /* a row broadcast to (5, 16): stride 0 between the lines */
    const int64_t bshape[2] = {5, 16};
    const int64_t r0[2] = {3, 0}, r1[2] = {4, 16}, r_step[2] = {1, 1};
    wf_array *row = wf_slice(a, r0, r1, r_step);
    wf_array *b = wf_broadcast_to(row, bshape, 2);
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 16; j++)
            want[i * 16 + j] = host[3 * 16 + j];
    dft_axis(want, bshape, 2, 1, -1);
    const int last = 1;
    check_result(wf_fft(b, &last, 1, NULL, WF_FFT_FORWARD, WF_FFT_NORM_BACKWARD), want, 16,
                 "broadcast");
    CHECK_OK(wf_scope_end());
}

/* ---------------------------------------------------------------- real transforms */

/* want (rows, n / 2 + 1) from rows of n real values in host. */
static void reference_rfft(const cd *host, int64_t rows, int64_t n, cd *want)
{
    cd *full = malloc((size_t)(rows * n) * sizeof *full);
    memcpy(full, host, (size_t)(rows * n) * sizeof *full);
    const int64_t shape[2] = {rows, n};
    dft_axis(full, shape, 2, 1, -1);
    const int64_t m = n / 2 + 1;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < m; k++)
            want[r * m + k] = full[r * n + k];
    free(full);
}

/* want (rows, n) real: the inverse of the Hermitian extension of rows of
 * m = n / 2 + 1 spectrum entries (imaginary parts of the DC and Nyquist
 * entries dropped, as NumPy). */
static void reference_irfft(const cd *spec, int64_t rows, int64_t n, cd *want)
{
    const int64_t m = n / 2 + 1;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < n; k++)
            want[r * n + k] = k < m ? spec[r * m + k] : conj(spec[r * m + n - k]);
    const int64_t shape[2] = {rows, n};
    dft_axis(want, shape, 2, 1, 1);
    for (int64_t i = 0; i < rows * n; i++)
        want[i] = creal(want[i]) / (double)n;
}

static void test_real_transforms(void)
{
    static const int64_t lengths[] = {1, 2, 5, 8, 17, 100, 127, 1024};
    const int64_t rows = 3;
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        const int64_t n = lengths[li], m = n / 2 + 1;
        cd *host = malloc((size_t)(rows * n) * sizeof *host);
        cd *want = malloc((size_t)(rows * n) * sizeof *want);
        CHECK_OK(wf_scope_begin());
        const int64_t shape[2] = {rows, n}, half[2] = {rows, m};
        wf_array *x = random_real(shape, 2, host);
        const int axis = 1;
        reference_rfft(host, rows, n, want);
        wf_array *y = wf_fft(x, &axis, 1, NULL, WF_FFT_REAL_FORWARD, WF_FFT_NORM_BACKWARD);
        CHECK(y && wf_array_dim(y, 1) == m && wf_array_dtype(y) == WF_DTYPE_C64);
        check_result(y, want, n, "rfft");

        /* a random half spectrum (DC and Nyquist with imaginary parts too) */
        cd *spec = malloc((size_t)(rows * m) * sizeof *spec);
        wf_array *z = random_complex(half, 2, spec);
        const int64_t size = n;
        reference_irfft(spec, rows, n, want);
        wf_array *back = wf_fft(z, &axis, 1, &size, WF_FFT_REAL_INVERSE, WF_FFT_NORM_BACKWARD);
        CHECK(back && wf_array_dim(back, 1) == n && wf_array_dtype(back) == WF_DTYPE_F32);
        check_result(back, want, n, "irfft");
        CHECK_OK(wf_scope_end());
        free(spec);
        free(host);
        free(want);
    }
}

/* ---------------------------------------------------------------- n-d, sizes */

static void test_nd_with_sizes(void)
{
    const int64_t shape[3] = {4, 9, 6};
    cd host[4 * 9 * 6];
    CHECK_OK(wf_scope_begin());
    wf_array *a = random_complex(shape, 3, host);

    /* axes (2, 0) with lengths (8, 3): axis 2 padded 6 -> 8, axis 0 cut 4 -> 3 */
    const int axes[2] = {2, 0};
    const int64_t sizes[2] = {8, 3};
    const int64_t fshape[3] = {3, 9, 8};
    cd want[3 * 9 * 8];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 9; j++)
            for (int k = 0; k < 8; k++)
                want[(i * 9 + j) * 8 + k] = k < 6 ? host[(i * 9 + j) * 6 + k] : 0;
    dft_axis(want, fshape, 3, 2, -1);
    dft_axis(want, fshape, 3, 0, -1);
    scale_all(want, 3 * 9 * 8, 1.0 / sqrt(24.0));
    wf_array *y = wf_fft(a, axes, 2, sizes, WF_FFT_FORWARD, WF_FFT_NORM_ORTHO);
    CHECK(y && wf_array_dim(y, 0) == 3 && wf_array_dim(y, 2) == 8);
    check_result(y, want, 24, "fftn sizes");

    /* rfftn over (0, 1) of a real (4, 9, 6): the real axis is 1 (9 -> 5) */
    cd real_host[4 * 9 * 6], full[4 * 9 * 6], rwant[4 * 5 * 6];
    wf_array *x = random_real(shape, 3, real_host);
    memcpy(full, real_host, sizeof full);
    dft_axis(full, shape, 3, 1, -1);
    dft_axis(full, shape, 3, 0, -1);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 5; j++)
            for (int k = 0; k < 6; k++)
                rwant[(i * 5 + j) * 6 + k] = full[(i * 9 + j) * 6 + k];
    const int raxes[2] = {0, 1};
    wf_array *r = wf_fft(x, raxes, 2, NULL, WF_FFT_REAL_FORWARD, WF_FFT_NORM_FORWARD);
    scale_all(rwant, 4 * 5 * 6, 1.0 / 36.0);
    check_result(r, rwant, 36, "rfftn");

    /* irfftn back with the odd length 9 given: the round trip */
    const int64_t rsizes[2] = {4, 9};
    wf_array *back = wf_fft(r, raxes, 2, rsizes, WF_FFT_REAL_INVERSE, WF_FFT_NORM_FORWARD);
    CHECK(back && wf_array_dim(back, 1) == 9 && wf_array_dtype(back) == WF_DTYPE_F32);
    check_result(back, real_host, 36, "irfftn round trip");

    /* irfftn with the default (even) length 2 (5 - 1) = 8, over (2, 1) */
    const int64_t hshape[3] = {4, 5, 6};
    cd spec[4 * 5 * 6], ext[4 * 8 * 6];
    wf_array *z = random_complex(hshape, 3, spec);
    /* inverse along axis 2 (complex), then the Hermitian real axis 1 */
    cd tmp[4 * 5 * 6];
    memcpy(tmp, spec, sizeof tmp);
    dft_axis(tmp, hshape, 3, 2, 1);
    const int64_t eshape[3] = {4, 8, 6};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++)
            for (int k = 0; k < 6; k++)
                ext[(i * 8 + j) * 6 + k] =
                    j < 5 ? tmp[(i * 5 + j) * 6 + k] : conj(tmp[(i * 5 + 8 - j) * 6 + k]);
    dft_axis(ext, eshape, 3, 1, 1);
    for (int i = 0; i < 4 * 8 * 6; i++)
        ext[i] = creal(ext[i]) / 48.0;
    const int iaxes[2] = {2, 1};
    wf_array *ir = wf_fft(z, iaxes, 2, NULL, WF_FFT_REAL_INVERSE, WF_FFT_NORM_BACKWARD);
    CHECK(ir && wf_array_dim(ir, 1) == 8 && wf_array_dim(ir, 2) == 6);
    check_result(ir, ext, 48, "irfftn");
    CHECK_OK(wf_scope_end());
}

/* Integer inputs convert to complex64 (real forward: float32). */
static void test_integer_input(void)
{
    CHECK_OK(wf_scope_begin());
    const int32_t v[5] = {3, -1, 4, 1, -5};
    const int64_t shape[1] = {5};
    cd want[5];
    for (int i = 0; i < 5; i++)
        want[i] = v[i];
    dft_axis(want, shape, 1, 0, -1);
    wf_array *a = wf_array_from_data(v, shape, 1, WF_DTYPE_I32);
    const int axis = 0;
    wf_array *y = wf_fft(a, &axis, 1, NULL, WF_FFT_FORWARD, WF_FFT_NORM_BACKWARD);
    check_result(y, want, 5, "int fft");
    wf_array *r = wf_fft(a, &axis, 1, NULL, WF_FFT_REAL_FORWARD, WF_FFT_NORM_BACKWARD);
    check_result(r, want, 5, "int rfft");
    CHECK_OK(wf_scope_end());
}

/* ---------------------------------------------------------------- vjp */

typedef struct fft_call {
    wf_fft_kind kind;
    wf_fft_norm norm;
    int64_t n;
} fft_call;

static wf_status call_fft(void *payload, wf_array *const *inputs, size_t ninputs,
                          wf_array **outputs, size_t *noutputs)
{
    (void)ninputs;
    const fft_call *c = payload;
    const int axis = 1;
    outputs[0] = wf_fft(inputs[0], &axis, 1, &c->n, c->kind, c->norm);
    *noutputs = 1;
    return outputs[0] ? WF_OK : wf_last_error();
}

/* The cotangent of inputs (3, in_len) from ct, against want. */
static void check_vjp(fft_call call, wf_array *x, wf_array *ct, const cd *want, const char *what)
{
    wf_fn *fn = wf_fn_new(call_fft, &call, NULL);
    wf_array *grad = NULL;
    if (CHECK_OK(wf_vjp(fn, &x, 1, &ct, 1, NULL, &grad)))
        check_result(grad, want, call.n, what);
    wf_release(grad);
    wf_fn_release(fn);
}

static void test_vjp(void)
{
    CHECK_OK(wf_scope_begin());
    const int64_t rows = 3;

    /* forward, ortho, n 6: ct -> G(ct) / sqrt(6) (G the unscaled inverse) */
    const int64_t cshape[2] = {rows, 6};
    cd x[3 * 6], c[3 * 6];
    wf_array *xa = random_complex(cshape, 2, x);
    wf_array *ca = random_complex(cshape, 2, c);
    dft_axis(c, cshape, 2, 1, 1);
    scale_all(c, rows * 6, 1.0 / sqrt(6.0));
    check_vjp((fft_call){WF_FFT_FORWARD, WF_FFT_NORM_ORTHO, 6}, xa, ca, c, "vjp fft");

    /* real forward, n 7: ct (3, 4) -> real(G(ct zero-padded to 7)) */
    const int64_t rshape[2] = {rows, 7}, hshape[2] = {rows, 4};
    cd r[3 * 7], h[3 * 4], want[3 * 7];
    wf_array *ra = random_real(rshape, 2, r);
    wf_array *ha = random_complex(hshape, 2, h);
    for (int i = 0; i < rows; i++)
        for (int k = 0; k < 7; k++)
            want[i * 7 + k] = k < 4 ? h[i * 4 + k] : 0;
    dft_axis(want, rshape, 2, 1, 1);
    for (int i = 0; i < rows * 7; i++)
        want[i] = creal(want[i]);
    check_vjp((fft_call){WF_FFT_REAL_FORWARD, WF_FFT_NORM_BACKWARD, 7}, ra, ha, want,
              "vjp rfft");

    /* real inverse, n 6, norm forward (unscaled): ct (3, 6) real -> F(ct)[:4]
     * weighted 1, 2, 2, 1 */
    const int64_t sshape[2] = {rows, 6};
    cd z[3 * 4], t[3 * 6], wz[3 * 4];
    wf_array *za = random_complex(hshape, 2, z);
    wf_array *ta = random_real(sshape, 2, t);
    dft_axis(t, sshape, 2, 1, -1);
    for (int i = 0; i < rows; i++)
        for (int k = 0; k < 4; k++)
            wz[i * 4 + k] = t[i * 6 + k] * (k == 0 || k == 3 ? 1.0 : 2.0);
    check_vjp((fft_call){WF_FFT_REAL_INVERSE, WF_FFT_NORM_FORWARD, 6}, za, ta, wz, "vjp irfft");
    CHECK_OK(wf_scope_end());
}

/* Each fallible operation of building and running an irfftn (a complex
 * pass into a buffer, then a real Bluestein pass) fails in turn: the call
 * or its evaluation reports it, and the same transform works afterwards. */
static void test_injected_failures(void)
{
    const int64_t shape[2] = {5, 9};
    cd host[5 * 9];
    CHECK_OK(wf_scope_begin());
    wf_array *z = random_complex(shape, 2, host);
    CHECK_OK(wf_eval(&z, 1));
    const int axes[2] = {0, 1};
    const int64_t sizes[2] = {5, 17};
    int injected = 0;
    for (int64_t nth = 1; nth < 400; nth++) {
        CHECK_OK(wf_scope_begin());
        wf__fault_arm(nth);
        wf_array *y = wf_fft(z, axes, 2, sizes, WF_FFT_REAL_INVERSE, WF_FFT_NORM_BACKWARD);
        const wf_status st = y ? wf_eval(&y, 1) : wf_last_error();
        const bool fired = wf__fault_fired();
        wf__fault_arm(0);
        wf_clear_error();
        CHECK_OK(wf_scope_end());
        if (!fired)
            break;
        injected++;
        CHECK(st != WF_OK);
    }
    CHECK(injected > 3);
    wf_array *y = wf_fft(z, axes, 2, sizes, WF_FFT_REAL_INVERSE, WF_FFT_NORM_BACKWARD);
    CHECK_OK(y ? wf_eval(&y, 1) : wf_last_error());
    CHECK_OK(wf_scope_end());
}

static void test_errors(void)
{
    CHECK_OK(wf_scope_begin());
    const int64_t shape[2] = {3, 4};
    wf_array *a = wf_zeros(shape, 2, WF_DTYPE_C64);
    const int bad_axis = 2, neg_bad = -3, rep[2] = {1, -1}, ok_axis = 1;
    const int64_t zero = 0;
    CHECK_NULL_WITH(wf_fft(a, &bad_axis, 1, NULL, WF_FFT_FORWARD, WF_FFT_NORM_BACKWARD),
                    WF_ERR_AXIS);
    CHECK_NULL_WITH(wf_fft(a, &neg_bad, 1, NULL, WF_FFT_FORWARD, WF_FFT_NORM_BACKWARD),
                    WF_ERR_AXIS);
    CHECK_NULL_WITH(wf_fft(a, rep, 2, NULL, WF_FFT_FORWARD, WF_FFT_NORM_BACKWARD), WF_ERR_AXIS);
    CHECK_NULL_WITH(wf_fft(a, &ok_axis, 1, &zero, WF_FFT_FORWARD, WF_FFT_NORM_BACKWARD),
                    WF_ERR_INVALID_ARGUMENT);
    CHECK_NULL_WITH(wf_fft(a, &ok_axis, 0, NULL, WF_FFT_FORWARD, WF_FFT_NORM_BACKWARD),
                    WF_ERR_INVALID_ARGUMENT);
    CHECK_NULL_WITH(wf_fft(a, &ok_axis, 1, NULL, WF_FFT_FORWARD, (wf_fft_norm)7),
                    WF_ERR_INVALID_ARGUMENT);
    CHECK_NULL_WITH(wf_fft(a, &ok_axis, 1, NULL, (wf_fft_kind)9, WF_FFT_NORM_BACKWARD),
                    WF_ERR_INVALID_ARGUMENT);
    wf_array *s = wf_scalar(1.0, WF_DTYPE_F32);
    const int axis0 = 0;
    CHECK_NULL_WITH(wf_fft(s, &axis0, 1, NULL, WF_FFT_FORWARD, WF_FFT_NORM_BACKWARD),
                    WF_ERR_SHAPE);
    /* a real inverse of a length-1 axis has a default length of 0 */
    const int64_t one[2] = {3, 1};
    wf_array *b = wf_zeros(one, 2, WF_DTYPE_C64);
    CHECK_NULL_WITH(wf_fft(b, &ok_axis, 1, NULL, WF_FFT_REAL_INVERSE, WF_FFT_NORM_BACKWARD),
                    WF_ERR_INVALID_ARGUMENT);
    CHECK_NULL_WITH(wf_fft(NULL, &ok_axis, 1, NULL, WF_FFT_FORWARD, WF_FFT_NORM_BACKWARD),
                    WF_ERR_NULL_ARGUMENT);
    CHECK_OK(wf_scope_end());
}

int main(void)
{
    RUN_TEST(test_lengths_batched);
    RUN_TEST(test_every_axis_and_norm);
    RUN_TEST(test_strided_and_transposed);
    RUN_TEST(test_real_transforms);
    RUN_TEST(test_nd_with_sizes);
    RUN_TEST(test_integer_input);
    RUN_TEST(test_vjp);
    RUN_TEST(test_errors);
    RUN_TEST(test_injected_failures);
    return TEST_SUMMARY();
}
