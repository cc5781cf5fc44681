/*
 * The discrete Fourier transform (prim/fft.h).
 *
 * One complex forward transform does all the work. A length whose prime
 * factors are all among 2, 3, 5, 7, 11, 13 runs an iterative Stockham
 * (self-sorting, no bit reversal) mixed-radix Cooley-Tukey: radix 4 first,
 * then 2, 3 and the small primes with a generic butterfly. Any other length
 * runs Bluestein's chirp-z: the transform as a convolution with a chirp,
 * done by transforms of the least length >= 2n - 1 of the form 2^a,
 * 3 * 2^a or 9 * 2^a. Twiddles and chirps are computed in double and
 * rounded once to float32; the butterflies run in float32.
 *
 * The inverse is conj(F(conj(x))). A real transform of even length n runs
 * a complex one of n / 2 points on the even and odd samples packed as real
 * and imaginary parts, and splits (forward) or merges (inverse) their
 * spectra with the n-th roots of unity. Of odd length, the real forward
 * transform embeds its input in the complex numbers and keeps n / 2 + 1
 * outputs, the real inverse rebuilds the Hermitian spectrum (entry n - k is
 * conj(entry k)) and keeps the real part. Either way the imaginary parts of
 * the DC and Nyquist entries of a real inverse's input are ignored, as
 * NumPy does.
 *
 * An n-d transform is one pass of 1-d transforms per axis. Every pass
 * copies each line (any stride) into a contiguous buffer, transforms it and
 * writes it to the output, so passes after the first run in place in the
 * output; the lines of a pass are split over the intra-op pool, each chunk
 * with its own buffers. Results never depend on the thread count.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "core/dtype.h"
#include "core/error.h"
#include "prim/fft.h"
#include "runtime/pool.h"
#include "util/fault.h"

typedef wf_cpu_c64 cf;

enum { MAX_STAGES = 64, LARGEST_RADIX = 13 };

static inline cf c_add(cf a, cf b) { return (cf){a.re + b.re, a.im + b.im}; }
static inline cf c_sub(cf a, cf b) { return (cf){a.re - b.re, a.im - b.im}; }
static inline cf c_mul(cf a, cf b)
{
    return (cf){a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}
static inline cf c_conj(cf a) { return (cf){a.re, -a.im}; }
static inline cf c_scale(cf a, float s) { return (cf){a.re * s, a.im * s}; }
/* -i * a */
static inline cf c_mul_neg_i(cf a) { return (cf){a.im, -a.re}; }

/* e^(-2 pi i num / den), computed in double. */
static cf unit_root(int64_t num, int64_t den)
{
    const double t = -2.0 * M_PI * (double)(num % den) / (double)den;
    return (cf){(float)cos(t), (float)sin(t)};
}

/* ---------------------------------------------------------------- plans */

typedef struct fft_plan {
    int64_t n;
    /* Stockham: the radices, outermost stage first, and the n roots
     * e^(-2 pi i t / n) every stage's twiddles are read from. */
    int nstages;
    int radix[MAX_STAGES];
    cf *roots;
    /* Bluestein (when n has a larger prime factor): the plan of m >= 2n - 1
     * points (smooth_length), chirp[k] = e^(-pi i k^2 / n) and the transform of the
     * conjugate chirp's circular extension, divided by m. */
    struct fft_plan *inner;
    int64_t m;
    cf *chirp;
    cf *filter;
} fft_plan;

static void plan_free(fft_plan *p)
{
    if (!p)
        return;
    plan_free(p->inner);
    free(p->roots);
    free(p->chirp);
    free(p->filter);
    free(p);
}

/* The radices of n (all of them small primes or 4), or false. */
static bool factorize(int64_t n, fft_plan *p)
{
    static const int primes[] = {2, 3, 5, 7, 11, 13};
    p->nstages = 0;
    while (n % 4 == 0 && p->nstages < MAX_STAGES) {
        p->radix[p->nstages++] = 4;
        n /= 4;
    }
    for (size_t i = 0; i < sizeof primes / sizeof primes[0]; i++)
        while (n % primes[i] == 0 && p->nstages < MAX_STAGES) {
            p->radix[p->nstages++] = primes[i];
            n /= primes[i];
        }
    return n == 1;
}

/* Complex scratch a plan's transform needs beside its n points. */
static int64_t plan_work(const fft_plan *p) { return p->inner ? 2 * p->m : p->n; }

static void transform(const fft_plan *p, cf *x, cf *work);

static fft_plan *plan_new(int64_t n);

/* The least length >= n of the form 2^a, 3 * 2^a or 9 * 2^a: at most a
 * third past n, and mostly radix-4 stages (measured faster than the
 * closer lengths with more factors 3 and 5). */
static int64_t smooth_length(int64_t n)
{
    int64_t best = 1;
    while (best < n)
        best *= 2;
    for (int64_t odd = 3; odd <= 9; odd *= 3) {
        int64_t m = odd;
        while (m < n)
            m *= 2;
        if (m < best)
            best = m;
    }
    return best;
}

static bool bluestein_init(fft_plan *p)
{
    const int64_t n = p->n, m = smooth_length(2 * n - 1);
    p->m = m;
    p->inner = plan_new(m);
    p->chirp = wf__malloc((size_t)n * sizeof(cf));
    p->filter = wf__calloc((size_t)m, sizeof(cf));
    cf *work = wf__malloc((size_t)m * sizeof(cf));
    const bool ok = p->inner && p->chirp && p->filter && work;
    if (ok) {
        /* k^2 mod 2n, stepped as (k + 1)^2 = k^2 + 2k + 1, keeps the angle
         * exact for any n */
        for (int64_t k = 0, k2 = 0; k < n; k++) {
            const double t = -M_PI * (double)k2 / (double)n;
            p->chirp[k] = (cf){(float)cos(t), (float)sin(t)};
            k2 = (k2 + 2 * k + 1) % (2 * n);
        }
        const float inv_m = 1.0f / (float)m;
        p->filter[0] = c_scale(c_conj(p->chirp[0]), inv_m);
        for (int64_t k = 1; k < n; k++)
            p->filter[k] = p->filter[m - k] = c_scale(c_conj(p->chirp[k]), inv_m);
        transform(p->inner, p->filter, work);
    }
    free(work);
    return ok;
}

/* A plan for n points, or NULL (out of memory). */
static fft_plan *plan_new(int64_t n)
{
    fft_plan *p = wf__calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->n = n;
    if (!factorize(n, p)) {
        if (!bluestein_init(p)) {
            plan_free(p);
            return NULL;
        }
        return p;
    }
    p->roots = wf__malloc((size_t)n * sizeof(cf));
    if (!p->roots) {
        plan_free(p);
        return NULL;
    }
    for (int64_t t = 0; t < n; t++)
        p->roots[t] = unit_root(t, n);
    return p;
}

/* ---------------------------------------------------------------- Stockham */

/* One stage: `len` points in `s` interleaved sequences (x[q + s * j]) of
 * radix r -> y[q + s * (r * j' + k)], twiddled. The roots of the whole
 * transform have n / len times the resolution this stage needs. */
static void stage_radix2(const cf *x, cf *y, int64_t len, int64_t s, const cf *roots,
                         int64_t step)
{
    const int64_t m = len / 2;
    for (int64_t p = 0; p < m; p++) {
        const cf w = roots[p * step];
        const cf *x0 = x + s * p, *x1 = x + s * (p + m);
        cf *y0 = y + s * 2 * p, *y1 = y0 + s;
        for (int64_t q = 0; q < s; q++) {
            const cf a = x0[q], b = x1[q];
            y0[q] = c_add(a, b);
            y1[q] = c_mul(c_sub(a, b), w);
        }
    }
}

static void stage_radix3(const cf *x, cf *y, int64_t len, int64_t s, const cf *roots,
                         int64_t step)
{
    const int64_t m = len / 3;
    const float h = 0.86602540378443864676f; /* sin(2 pi / 3) */
    for (int64_t p = 0; p < m; p++) {
        const cf w1 = roots[p * step], w2 = roots[2 * p * step];
        const cf *x0 = x + s * p, *x1 = x + s * (p + m), *x2 = x + s * (p + 2 * m);
        cf *y0 = y + s * 3 * p, *y1 = y0 + s, *y2 = y1 + s;
        for (int64_t q = 0; q < s; q++) {
            const cf a0 = x0[q], t = c_add(x1[q], x2[q]), d = c_sub(x1[q], x2[q]);
            const cf mid = {a0.re - 0.5f * t.re, a0.im - 0.5f * t.im};
            const cf rot = c_scale(c_mul_neg_i(d), h); /* -i sin(2 pi / 3) d */
            y0[q] = c_add(a0, t);
            y1[q] = c_mul(c_add(mid, rot), w1);
            y2[q] = c_mul(c_sub(mid, rot), w2);
        }
    }
}

static void stage_radix4(const cf *x, cf *y, int64_t len, int64_t s, const cf *roots,
                         int64_t step)
{
    const int64_t m = len / 4;
    for (int64_t p = 0; p < m; p++) {
        const cf w1 = roots[p * step], w2 = roots[2 * p * step], w3 = roots[3 * p * step];
        const cf *x0 = x + s * p, *x1 = x0 + s * m, *x2 = x1 + s * m, *x3 = x2 + s * m;
        cf *y0 = y + s * 4 * p, *y1 = y0 + s, *y2 = y1 + s, *y3 = y2 + s;
        for (int64_t q = 0; q < s; q++) {
            const cf t0 = c_add(x0[q], x2[q]), t1 = c_sub(x0[q], x2[q]);
            const cf t2 = c_add(x1[q], x3[q]), t3 = c_mul_neg_i(c_sub(x1[q], x3[q]));
            y0[q] = c_add(t0, t2);
            y1[q] = c_mul(c_add(t1, t3), w1);
            y2[q] = c_mul(c_sub(t0, t2), w2);
            y3[q] = c_mul(c_sub(t1, t3), w3);
        }
    }
}

/* Any small radix r: the r-point DFT directly. The r-th roots of unity are
 * the transform's roots at multiples of n / r. */
static void stage_generic(const cf *x, cf *y, int64_t len, int64_t s, int r, const cf *roots,
                          int64_t n)
{
    const int64_t m = len / r, step = n / len;
    cf omega[LARGEST_RADIX], a[LARGEST_RADIX];
    for (int j = 0; j < r; j++)
        omega[j] = roots[j * (n / r)];
    for (int64_t p = 0; p < m; p++)
        for (int64_t q = 0; q < s; q++) {
            for (int j = 0; j < r; j++)
                a[j] = x[q + s * (p + j * m)];
            for (int k = 0; k < r; k++) {
                cf acc = a[0];
                for (int j = 1; j < r; j++)
                    acc = c_add(acc, c_mul(a[j], omega[j * k % r]));
                y[q + s * (r * p + k)] = k == 0 ? acc : c_mul(acc, roots[p * k * step]);
            }
        }
}

static void stockham(const fft_plan *p, cf *x, cf *work)
{
    cf *src = x, *dst = work;
    int64_t len = p->n, s = 1;
    for (int i = 0; i < p->nstages; i++) {
        const int r = p->radix[i];
        const int64_t step = p->n / len;
        switch (r) {
        case 2: stage_radix2(src, dst, len, s, p->roots, step); break;
        case 3: stage_radix3(src, dst, len, s, p->roots, step); break;
        case 4: stage_radix4(src, dst, len, s, p->roots, step); break;
        default: stage_generic(src, dst, len, s, r, p->roots, p->n); break;
        }
        cf *t = src;
        src = dst;
        dst = t;
        len /= r;
        s *= r;
    }
    if (src != x)
        memcpy(x, src, (size_t)p->n * sizeof(cf));
}

/* ---------------------------------------------------------------- Bluestein */

/* X[k] = chirp[k] sum_j (x[j] chirp[j]) conj(chirp[k - j]): a circular
 * convolution of m points, done as inverse(F(a) F(b)) with
 * inverse(z) = conj(F(conj(z))) and the 1 / m folded into the filter. */
static void bluestein(const fft_plan *p, cf *x, cf *work)
{
    const int64_t n = p->n, m = p->m;
    cf *a = work, *inner_work = work + m;
    for (int64_t k = 0; k < n; k++)
        a[k] = c_mul(x[k], p->chirp[k]);
    memset(a + n, 0, (size_t)(m - n) * sizeof(cf));
    transform(p->inner, a, inner_work);
    for (int64_t k = 0; k < m; k++)
        a[k] = c_conj(c_mul(a[k], p->filter[k]));
    transform(p->inner, a, inner_work);
    for (int64_t k = 0; k < n; k++)
        x[k] = c_mul(c_conj(a[k]), p->chirp[k]);
}

/* The forward transform of x in place (plan_work(p) points of work). */
static void transform(const fft_plan *p, cf *x, cf *work)
{
    if (p->inner)
        bluestein(p, x, work);
    else
        stockham(p, x, work);
}

/* ---------------------------------------------------------------- passes */

enum pass_mode { PASS_C2C, PASS_R2C, PASS_C2R };

/* 1-d transforms along one axis for every line of the other dims. src and
 * dst share the other dims' shape (the iteration shape, with the axis's
 * length set to 1). */
typedef struct fft_pass {
    int mode; /* enum pass_mode */
    bool inverse;
    float scale;
    const fft_plan *plan; /* n points, or n / 2 for a real pass of even n */
    const cf *half_roots; /* that case: e^(-2 pi i k / n) for k <= n / 2; else NULL */
    int64_t n;            /* the transform's length */
    int ndim, axis;
    const int64_t *shape; /* dst's shape; the axis is skipped */
    const char *src;
    const int64_t *src_strides; /* elements */
    char *dst;
    const int64_t *dst_strides;
    int64_t src_len, dst_len; /* along the axis */
    _Atomic bool failed;
} fft_pass;

static void load_line(const fft_pass *job, const char *src, cf *buf)
{
    const int64_t st = job->src_strides[job->axis], n = job->n;
    if (job->mode == PASS_R2C) {
        const float *x = (const float *)src;
        for (int64_t i = 0; i < n; i++)
            buf[i] = (cf){x[i * st], 0.0f};
        return;
    }
    const cf *z = (const cf *)src;
    if (job->mode == PASS_C2R) { /* conj of the Hermitian extension (inverse by conjugation) */
        for (int64_t k = 0; k < job->src_len; k++)
            buf[k] = c_conj(z[k * st]);
        for (int64_t k = job->src_len; k < n; k++)
            buf[k] = z[(n - k) * st];
        return;
    }
    for (int64_t i = 0; i < n; i++)
        buf[i] = job->inverse ? c_conj(z[i * st]) : z[i * st];
}

static void store_line(const fft_pass *job, const cf *buf, char *dst)
{
    const int64_t st = job->dst_strides[job->axis];
    const float s = job->scale;
    if (job->mode == PASS_C2R) {
        float *y = (float *)dst;
        for (int64_t i = 0; i < job->dst_len; i++)
            y[i * st] = buf[i].re * s;
        return;
    }
    cf *y = (cf *)dst;
    for (int64_t i = 0; i < job->dst_len; i++) {
        const cf v = c_scale(buf[i], s);
        y[i * st] = job->inverse ? c_conj(v) : v;
    }
}

/* Real forward of even n from the transform Z of z[j] = x[2j] + i x[2j + 1]
 * (h = n / 2 points): X[k] = E[k] + w^k O[k] for k <= h, where the spectra
 * of the even and odd samples are E[k] = (Z[k] + conj(Z[h - k])) / 2 and
 * O[k] = (Z[k] - conj(Z[h - k])) / 2i, indices mod h. */
static void real_forward_half(const fft_pass *job, const char *src, cf *buf, char *dst)
{
    const int64_t h = job->plan->n, ss = job->src_strides[job->axis];
    const int64_t sd = job->dst_strides[job->axis];
    const float *x = (const float *)src;
    for (int64_t j = 0; j < h; j++)
        buf[j] = (cf){x[2 * j * ss], x[(2 * j + 1) * ss]};
    transform(job->plan, buf, buf + h);
    cf *y = (cf *)dst;
    for (int64_t k = 0; k <= h; k++) {
        const cf a = buf[k % h], b = c_conj(buf[(h - k) % h]);
        const cf e = {0.5f * (a.re + b.re), 0.5f * (a.im + b.im)};
        const cf o = {0.5f * (a.im - b.im), -0.5f * (a.re - b.re)};
        y[k * sd] = c_scale(c_add(e, c_mul(job->half_roots[k], o)), job->scale);
    }
}

/* Real inverse of even n (the inverse of real_forward_half): from the
 * n / 2 + 1 entries X, Z[k] = E[k] + i O[k] with 2E[k] = X[k] + conj(X[h - k])
 * and 2O[k] = (X[k] - conj(X[h - k])) conj(w^k); its inverse transform
 * holds the even samples in its real parts and the odd in its imaginary
 * parts (the factors 2 cancel the 1/2 of n = 2h). */
static void real_inverse_half(const fft_pass *job, const char *src, cf *buf, char *dst)
{
    const int64_t h = job->plan->n, ss = job->src_strides[job->axis];
    const int64_t sd = job->dst_strides[job->axis];
    const cf *z = (const cf *)src;
    for (int64_t k = 0; k < h; k++) {
        cf a = z[k * ss], b = c_conj(z[(h - k) * ss]);
        if (k == 0) { /* DC and Nyquist: real parts only */
            a.im = 0.0f;
            b.im = 0.0f;
        }
        const cf e = c_add(a, b), o = c_mul(c_sub(a, b), c_conj(job->half_roots[k]));
        buf[k] = c_conj((cf){e.re - o.im, e.im + o.re}); /* inverse by conjugation */
    }
    transform(job->plan, buf, buf + h);
    float *y = (float *)dst;
    for (int64_t j = 0; j < h; j++) {
        y[2 * j * sd] = buf[j].re * job->scale;
        y[(2 * j + 1) * sd] = -buf[j].im * job->scale;
    }
}

static void pass_chunk(void *arg, int64_t begin, int64_t end)
{
    fft_pass *job = arg;
    const int64_t n = job->n;
    cf *buf = wf__malloc((size_t)(n + plan_work(job->plan)) * sizeof(cf));
    if (!buf) {
        job->failed = true;
        return;
    }
    const size_t src_item = job->mode == PASS_R2C ? sizeof(float) : sizeof(cf);
    const size_t dst_item = job->mode == PASS_C2R ? sizeof(float) : sizeof(cf);
    for (int64_t line = begin; line < end; line++) {
        int64_t rest = line, is = 0, id = 0;
        for (int d = job->ndim - 1; d >= 0; d--) {
            if (d == job->axis)
                continue;
            const int64_t c = rest % job->shape[d];
            rest /= job->shape[d];
            is += c * job->src_strides[d];
            id += c * job->dst_strides[d];
        }
        const char *src = job->src + is * (int64_t)src_item;
        char *dst = job->dst + id * (int64_t)dst_item;
        if (job->half_roots && job->mode == PASS_R2C) {
            real_forward_half(job, src, buf, dst);
            continue;
        }
        if (job->half_roots) {
            real_inverse_half(job, src, buf, dst);
            continue;
        }
        load_line(job, src, buf);
        transform(job->plan, buf, buf + n);
        store_line(job, buf, dst);
    }
    free(buf);
}

/* The scale of one axis of length n under `norm`. */
static double axis_scale(int norm, bool inverse, int64_t n)
{
    if (norm == WF_FFT_NORM_ORTHO)
        return 1.0 / sqrt((double)n);
    const bool divides = inverse ? norm == WF_FFT_NORM_BACKWARD : norm == WF_FFT_NORM_FORWARD;
    return divides ? 1.0 / (double)n : 1.0;
}

/* e^(-2 pi i k / n) for k <= n / 2, or NULL (out of memory). */
static cf *half_roots_new(int64_t n)
{
    cf *w = wf__malloc((size_t)(n / 2 + 1) * sizeof(cf));
    for (int64_t k = 0; w && k <= n / 2; k++)
        w[k] = unit_root(k, n);
    return w;
}

static wf_status run_pass(fft_pass *job, int64_t n)
{
    const bool half = job->mode != PASS_C2C && n % 2 == 0;
    fft_plan *plan = plan_new(half ? n / 2 : n);
    cf *half_roots = half ? half_roots_new(n) : NULL;
    job->n = n;
    job->plan = plan;
    job->half_roots = half_roots;
    if (!plan || (half && !half_roots)) {
        plan_free(plan);
        free(half_roots);
        return wf__error(WF_ERR_OUT_OF_MEMORY, "wf_fft: no memory for a plan of %lld points",
                         (long long)n);
    }
    int64_t lines = 1;
    for (int d = 0; d < job->ndim; d++)
        if (d != job->axis)
            lines *= job->shape[d];
    const double cost = (double)n * (log2((double)n) + 1.0) * 8.0;
    const int64_t min_chunk =
        cost >= WF_CPU_CHUNK_COSTLY ? 1 : (int64_t)(WF_CPU_CHUNK_COSTLY / cost) + 1;
    job->failed = false;
    if (lines > 0)
        wf__parallel_for(lines, min_chunk, pass_chunk, job);
    plan_free(plan);
    free(half_roots);
    job->plan = NULL;
    job->half_roots = NULL;
    if (job->failed)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "wf_fft: no memory for a line of %lld points",
                         (long long)n);
    return WF_OK;
}

/* Row-major strides of shape in elements. */
static void row_major(const int64_t *shape, int ndim, int64_t *strides)
{
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = s;
        s *= shape[d];
    }
}

wf_status wf__cpu_fft(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)ninputs;
    const wf_fft_params *p = params;
    const wf_array *in = inputs[0];
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK || out->size == 0)
        return st;
    const bool inverse = p->kind == WF_FFT_INVERSE || p->kind == WF_FFT_REAL_INVERSE;
    const int last = p->n_axes - 1;
    fft_pass job;
    memset(&job, 0, sizeof job);
    job.ndim = in->ndim;
    job.inverse = inverse;

    /* The real inverse transforms the complex axes first, in a complex
     * buffer of the input's shape, then the real axis into the output. */
    const char *src = wf__array_data_ptr(in);
    const int64_t *src_strides = in->strides;
    cf *tmp = NULL;
    int64_t tmp_strides[WF_MAX_NDIM];
    if (p->kind == WF_FFT_REAL_INVERSE && p->n_axes > 1) {
        tmp = wf__malloc((size_t)in->size * sizeof(cf));
        if (!tmp)
            return wf__error(WF_ERR_OUT_OF_MEMORY, "wf_fft: no memory for %lld points",
                             (long long)in->size);
        row_major(in->shape, in->ndim, tmp_strides);
    }

    char *const out_data = wf__array_data_ptr(out);
    for (int i = 0; i < p->n_axes && st == WF_OK; i++) {
        /* the order of the passes: the real axis first forward, last inverse */
        const int which = p->kind == WF_FFT_REAL_FORWARD ? (i == 0 ? last : i - 1) : i;
        const int axis = p->axes[which];
        const int64_t n = wf__fft_length(p, in->shape, which);
        job.axis = axis;
        job.scale = (float)axis_scale(p->norm, inverse, n);
        job.mode = PASS_C2C;
        if (p->kind == WF_FFT_REAL_FORWARD && which == last)
            job.mode = PASS_R2C;
        else if (p->kind == WF_FFT_REAL_INVERSE && which == last)
            job.mode = PASS_C2R;
        job.src = src;
        job.src_strides = src_strides;
        if (tmp && which != last) {
            job.dst = (char *)tmp;
            job.dst_strides = tmp_strides;
            job.shape = in->shape;
        } else {
            job.dst = out_data;
            job.dst_strides = out->strides;
            job.shape = out->shape;
        }
        job.src_len = job.mode == PASS_C2R ? n / 2 + 1 : n;
        job.dst_len = job.mode == PASS_R2C ? n / 2 + 1 : n;
        st = run_pass(&job, n);
        src = job.dst;
        src_strides = job.dst_strides;
    }
    free(tmp);
    return st;
}
