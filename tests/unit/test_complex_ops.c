/*
 * complex64 through the ops issue 25 added after the first pass, against
 * references written here in double precision (the textbook formulas in C's
 * double complex arithmetic): the transcendental functions MLX defines on
 * complex (tan, sinh, cosh, arcsin, arccos, arctan, log1p, log2, rsqrt,
 * reciprocal), square, sign (z / |z|), power (with MLX's 0^2 = 0 and
 * 0^NaN = NaN), maximum / minimum and max / min reductions in NumPy's order
 * (real part, then imaginary part; NaN propagates), prod, cumsum and
 * cumprod over every axis (forward, reverse, exclusive), matmul (plain,
 * batched with broadcasting, transposed views, vectors, complex with real)
 * under every GEMM variant this CPU runs, its gradient (MLX's convention, the
 * adjoint: ct @ conj(B)^T), round / var / std / logaddexp (MLX's complex
 * definitions), and data movement ops weft's other tests do
 * not cover for complex (pad, scatter replace, flip through a negative
 * slice of a 2-d array).
 */
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/gemm.h"
#include "harness.h"

typedef double _Complex cd;

/* A READY array of complex64 from n (re, im) pairs. */
static wf_array *carr(const float *pairs, const int64_t *shape, int ndim)
{
    return wf_array_from_data(pairs, shape, ndim, WF_DTYPE_C64);
}

/* Reads n complex64 values of `a` into out (2n floats). */
static bool read_c64(wf_array *a, float *out, int64_t n)
{
    bool ok = CHECK_NOT_NULL(a) && CHECK_EQ_INT(wf_array_dtype(a), WF_DTYPE_C64) &&
              CHECK_EQ_INT(wf_array_size(a), n) &&
              CHECK_OK(wf_array_copy_to(a, out, (size_t)n * 8));
    if (!ok) {
        printf("      (%s)\n", wf_last_error_message());
        wf_clear_error();
    }
    return ok;
}

/* got (re, im) is want within a relative tolerance of |want|. */
static bool near_c(const float *got, cd want, double rel, const char *what, int i)
{
    const double tol = rel * (cabs(want) + 1e-30);
    const bool ok = fabs(got[0] - creal(want)) <= tol && fabs(got[1] - cimag(want)) <= tol;
    if (!ok)
        wf_test_fail(__FILE__, __LINE__, "%s[%d]: (%.9g, %.9g), want (%.9g, %.9g)", what, i,
                     got[0], got[1], creal(want), cimag(want));
    return ok;
}

static cd at(const float *pairs, int64_t i) { return pairs[2 * i] + I * pairs[2 * i + 1]; }

/* ---------------------------------------------------------------- functions */

/* The references: principal branches, from log and sqrt of double complex
 * (the formulas NumPy documents). */
static cd ref_fn(int f, cd z)
{
    switch (f) {
    case 0: return csin(z) / ccos(z);                              /* tan */
    case 1: return (cexp(z) - cexp(-z)) / 2;                       /* sinh */
    case 2: return (cexp(z) + cexp(-z)) / 2;                       /* cosh */
    case 3: return -I * clog(I * z + csqrt(1 - z * z));            /* arcsin */
    case 4: return M_PI / 2 + I * clog(I * z + csqrt(1 - z * z));  /* arccos = pi/2 - arcsin */
    case 5: return I / 2 * (clog(1 - I * z) - clog(1 + I * z));    /* arctan */
    case 6: return clog(1 + z);                                    /* log1p */
    case 7: return clog(z) / M_LN2;                                /* log2 */
    case 8: return 1 / csqrt(z);                                   /* rsqrt */
    case 9: return 1 / z;                                          /* reciprocal */
    case 10: return z * z;                                         /* square */
    default: return z == 0 ? 0 : z / cabs(z);                      /* sign */
    }
}

static wf_array *apply_fn(int f, wf_array *x)
{
    switch (f) {
    case 0: return wf_tan(x);
    case 1: return wf_sinh(x);
    case 2: return wf_cosh(x);
    case 3: return wf_arcsin(x);
    case 4: return wf_arccos(x);
    case 5: return wf_arctan(x);
    case 6: return wf_log1p(x);
    case 7: return wf_log2(x);
    case 8: return wf_rsqrt(x);
    case 9: return wf_reciprocal(x);
    case 10: return wf_square(x);
    default: return wf_sign(x);
    }
}

static void test_functions(void)
{
    static const char *const names[12] = {"tan",   "sinh",  "cosh",  "arcsin",
                                          "arccos", "arctan", "log1p", "log2",
                                          "rsqrt", "reciprocal", "square", "sign"};
    enum { N = 8 };
    const float z[2 * N] = {0.5f,  1.0f,  -1.5f, 0.25f, 2.0f,  -3.0f, 0.3f,  -0.2f,
                            -0.8f, 0.0f,  3.0f,  4.0f,  -5.0f, 12.0f, 1e-4f, -2e-4f};
    wf_scope_begin();
    wf_array *x = carr(z, (int64_t[]){N}, 1);
    /* a strided view too: every other element, reversed */
    wf_array *xs = wf_slice(x, (int64_t[]){-1}, (int64_t[]){INT64_MIN}, (int64_t[]){-2});
    float got[2 * N];
    for (int f = 0; f < 12; f++) {
        if (read_c64(apply_fn(f, x), got, N))
            for (int i = 0; i < N; i++)
                near_c(got + 2 * i, ref_fn(f, at(z, i)), 2e-6, names[f], i);
        if (read_c64(apply_fn(f, xs), got, N / 2))
            for (int i = 0; i < N / 2; i++)
                near_c(got + 2 * i, ref_fn(f, at(z, N - 1 - 2 * i)), 2e-6, names[f], i);
    }
    /* sign(0) = 0; log1p keeps a tiny argument's digits (clog(1 + z) in
     * float32 would lose them all) */
    const float zero[2] = {0, 0}, tiny[2] = {1e-7f, 1e-7f};
    if (read_c64(wf_sign(carr(zero, NULL, 0)), got, 1))
        CHECK(got[0] == 0 && got[1] == 0);
    if (read_c64(wf_log1p(carr(tiny, NULL, 0)), got, 1))
        {
        const cd t = (double)tiny[0] + I * (double)tiny[1];
        near_c(got, t - t * t / 2, 1e-6, "log1p tiny", 0); /* the series */
    }
    wf_scope_end();
}

/* ---------------------------------------------------------------- power */

static void test_power(void)
{
    wf_scope_begin();
    enum { N = 5 };
    const float a[2 * N] = {0, 0, 0, 0, 1.5f, -0.5f, -2, 1, 0, 0};
    const float b[2 * N] = {2, 0, NAN, 0, 0.5f, 0.25f, 3, 0, 0, 0};
    float got[2 * N];
    if (read_c64(wf_power(carr(a, (int64_t[]){N}, 1), carr(b, (int64_t[]){N}, 1)), got, N)) {
        CHECK(got[0] == 0 && got[1] == 0);             /* 0^2 = 0 (MLX) */
        CHECK(isnan(got[2]) || isnan(got[3]));         /* 0^NaN = NaN */
        near_c(got + 4, cexp(at(b, 2) * clog(at(a, 2))), 4e-6, "power", 2);
        near_c(got + 6, at(a, 3) * at(a, 3) * at(a, 3), 4e-6, "power", 3);
        CHECK(got[8] == 1 && got[9] == 0);             /* 0^0 = 1 */
    }
    /* a real exponent promotes (weak scalar) */
    wf_array *sq = wf_power(carr(a + 4, (int64_t[]){1}, 1), wf_scalar(2, WF_DTYPE_F32));
    if (read_c64(sq, got, 1))
        near_c(got, at(a, 2) * at(a, 2), 4e-6, "power 2", 0);
    wf_scope_end();
}

/* ---------------------------------------------------------------- order */

/* NumPy's order of complex numbers: real part, then imaginary part. */
static bool less_c(cd a, cd b)
{
    return creal(a) < creal(b) || (creal(a) == creal(b) && cimag(a) < cimag(b));
}
static bool has_nan(cd a) { return isnan(creal(a)) || isnan(cimag(a)); }

static void test_maximum_minimum(void)
{
    wf_scope_begin();
    enum { N = 6 };
    const float a[2 * N] = {1, 2, 1, 5, -3, 0, 2, NAN, 0, -1, 7, 7};
    const float b[2 * N] = {1, 3, 1, -5, -3, 0, 9, 9, NAN, 0, 7, 6};
    float hi[2 * N], lo[2 * N];
    wf_array *x = carr(a, (int64_t[]){N}, 1), *y = carr(b, (int64_t[]){N}, 1);
    if (read_c64(wf_maximum(x, y), hi, N) && read_c64(wf_minimum(x, y), lo, N))
        for (int i = 0; i < N; i++) {
            const cd p = at(a, i), q = at(b, i);
            if (has_nan(p) || has_nan(q)) {
                CHECK(isnan(hi[2 * i]) || isnan(hi[2 * i + 1]));
                CHECK(isnan(lo[2 * i]) || isnan(lo[2 * i + 1]));
                continue;
            }
            near_c(hi + 2 * i, less_c(p, q) ? q : p, 0, "maximum", i);
            near_c(lo + 2 * i, less_c(q, p) ? q : p, 0, "minimum", i);
        }
    wf_scope_end();
}

/* ---------------------------------------------------------------- reductions */

enum { D0 = 3, D1 = 4, D2 = 5, TOTAL = D0 * D1 * D2 };

/* Values with ties in the real parts (so the imaginary part decides). */
static void fill_values(float *v)
{
    for (int i = 0; i < TOTAL; i++) {
        v[2 * i] = (float)((i * 7) % 5) * 0.25f - 0.5f;
        v[2 * i + 1] = (float)((i * 11) % 13) * 0.1f - 0.6f;
    }
}

/* The reference of reduction `op` (0 prod, 1 max, 2 min) of v (D0 x D1 x D2)
 * over the axes in mask, kept dims of size 1, row-major. */
static void reduce_ref(const float *v, int op, unsigned mask, cd *out)
{
    const int64_t dims[3] = {D0, D1, D2};
    int64_t od[3];
    for (int d = 0; d < 3; d++)
        od[d] = (mask >> d) & 1u ? 1 : dims[d];
    const int64_t count = od[0] * od[1] * od[2];
    bool *seen = calloc((size_t)count, 1);
    for (int64_t i = 0; i < count; i++)
        out[i] = op == 0 ? 1 : 0;
    for (int i0 = 0; i0 < D0; i0++)
        for (int i1 = 0; i1 < D1; i1++)
            for (int i2 = 0; i2 < D2; i2++) {
                const int64_t o0 = od[0] == 1 ? 0 : i0, o1 = od[1] == 1 ? 0 : i1,
                              o2 = od[2] == 1 ? 0 : i2;
                const int64_t o = (o0 * od[1] + o1) * od[2] + o2;
                const cd x = at(v, (i0 * D1 + i1) * D2 + i2);
                if (op == 0)
                    out[o] *= x;
                else if (!seen[o] || (op == 1 ? less_c(out[o], x) : less_c(x, out[o])))
                    out[o] = x;
                seen[o] = true;
            }
    free(seen);
}

static void test_reductions(void)
{
    static const char *const names[3] = {"prod", "max", "min"};
    float v[2 * TOTAL], got[2 * TOTAL];
    cd want[TOTAL];
    fill_values(v);
    wf_scope_begin();
    wf_array *x = carr(v, (int64_t[]){D0, D1, D2}, 3);
    for (unsigned mask = 1; mask < 8; mask++) {
        int axes[3], n = 0;
        for (int d = 0; d < 3; d++)
            if ((mask >> d) & 1u)
                axes[n++] = d;
        for (int op = 0; op < 3; op++) {
            wf_array *r = op == 0 ? wf_prod(x, axes, n, true)
                          : op == 1 ? wf_max(x, axes, n, true)
                                    : wf_min(x, axes, n, true);
            reduce_ref(v, op, mask, want);
            const int64_t count = wf_array_size(r);
            if (!read_c64(r, got, count))
                continue;
            for (int64_t i = 0; i < count; i++)
                if (!near_c(got + 2 * i, want[i], op == 0 ? 1e-5 : 0, names[op], (int)i))
                    printf("      axes mask %u\n", mask);
        }
    }
    /* keepdims false drops the axes; an empty product is 1 */
    wf_array *p = wf_prod(x, (int[]){0, 2}, 2, false);
    CHECK(p && wf_array_ndim(p) == 1 && wf_array_shape(p)[0] == D1);
    wf_array *empty = wf_zeros((int64_t[]){2, 0}, 2, WF_DTYPE_C64);
    if (read_c64(wf_prod(empty, (int[]){1}, 1, false), got, 2))
        CHECK(got[0] == 1 && got[1] == 0 && got[2] == 1 && got[3] == 0);
    /* a NaN in either part makes the slice's max and min NaN (NumPy) */
    const float nan_rows[8] = {1, 1, 2, NAN, 5, 5, 4, 4};
    wf_array *nr = carr(nan_rows, (int64_t[]){2, 2}, 2);
    if (read_c64(wf_max(nr, (int[]){1}, 1, false), got, 2)) {
        CHECK(isnan(got[0]) || isnan(got[1]));
        CHECK(got[2] == 5 && got[3] == 5);
    }
    wf_scope_end();
}

/* cumsum / cumprod along each axis, forward / reverse, inclusive /
 * exclusive, against loops in double. */
static void test_scans(void)
{
    float v[2 * TOTAL], got[2 * TOTAL];
    fill_values(v);
    const int64_t dims[3] = {D0, D1, D2}, strides[3] = {D1 * D2, D2, 1};
    wf_scope_begin();
    wf_array *x = carr(v, dims, 3);
    for (int prod = 0; prod < 2; prod++)
        for (int axis = 0; axis < 3; axis++)
            for (int variant = 0; variant < 4; variant++) {
                const bool reverse = variant & 1, inclusive = !(variant & 2);
                wf_array *r = prod ? wf_cumprod(x, axis, reverse, inclusive)
                                   : wf_cumsum(x, axis, reverse, inclusive);
                if (!read_c64(r, got, TOTAL))
                    continue;
                for (int64_t i = 0; i < TOTAL; i++) {
                    const int64_t pos = i / strides[axis] % dims[axis];
                    const int64_t base = i - pos * strides[axis];
                    cd acc = prod ? 1 : 0;
                    for (int64_t t = 0; t < dims[axis]; t++) {
                        const bool take = reverse ? (inclusive ? t >= pos : t > pos)
                                                  : (inclusive ? t <= pos : t < pos);
                        if (take) {
                            const cd e = at(v, base + t * strides[axis]);
                            acc = prod ? acc * e : acc + e;
                        }
                    }
                    if (!near_c(got + 2 * i, acc, 1e-5, prod ? "cumprod" : "cumsum", (int)i)) {
                        printf("      axis %d reverse %d inclusive %d\n", axis, reverse,
                               inclusive);
                        break;
                    }
                }
            }
    wf_scope_end();
}

/* ---------------------------------------------------------------- matmul */

static float *random_pairs(int64_t n, unsigned seed)
{
    float *v = malloc((size_t)(2 * n) * sizeof *v);
    for (int64_t i = 0; i < 2 * n; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
    }
    return v;
}

/* got (batch x m x n) against sum_t A[t-th] B in double; a_of / b_of give
 * the element of A (m x k) and B (k x n) of a batch. */
typedef cd (*elem_fn)(const float *data, int64_t batch, int64_t r, int64_t c, int64_t rows,
                      int64_t cols);

static cd row_major(const float *d, int64_t batch, int64_t r, int64_t c, int64_t rows,
                    int64_t cols)
{
    return at(d, (batch * rows + r) * cols + c);
}

static void check_product(const float *got, const float *a, const float *b, int64_t batches,
                          int64_t m, int64_t n, int64_t k, elem_fn a_of, elem_fn b_of,
                          const char *what)
{
    for (int64_t bi = 0; bi < batches; bi++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                cd s = 0;
                double mag = 0;
                for (int64_t t = 0; t < k; t++) {
                    const cd p = a_of(a, bi, i, t, m, k) * b_of(b, bi, t, j, k, n);
                    s += p;
                    mag += cabs(p);
                }
                const float *g = got + 2 * ((bi * m + i) * n + j);
                const double tol = 1e-5 * (mag + 1);
                if (fabs(g[0] - creal(s)) > tol || fabs(g[1] - cimag(s)) > tol) {
                    wf_test_fail(__FILE__, __LINE__, "%s: (%lld, %lld, %lld) (%g, %g), want (%g, %g)",
                                 what, (long long)bi, (long long)i, (long long)j, g[0], g[1],
                                 creal(s), cimag(s));
                    return;
                }
            }
}

/* A stored transposed (k x m row-major), read as m x k. */
static cd transposed(const float *d, int64_t batch, int64_t r, int64_t c, int64_t rows,
                     int64_t cols)
{
    return at(d, (batch * cols + c) * rows + r);
}
/* The same matrix for every batch (broadcast). */
static cd shared(const float *d, int64_t batch, int64_t r, int64_t c, int64_t rows, int64_t cols)
{
    (void)batch;
    (void)rows;
    return at(d, r * cols + c);
}
/* Real parts only (a float32 operand stored as floats). */
static cd real_only(const float *d, int64_t batch, int64_t r, int64_t c, int64_t rows,
                    int64_t cols)
{
    return d[(batch * rows + r) * cols + c];
}

static void run_matmuls(void)
{
    wf_scope_begin();
#ifdef WF_TEST_SLOW_BUILD /* sanitizers, coverage */
    /* the reference loops dominate under the sanitizers: small shapes only */
    static const int64_t shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {17, 33, 9}};
#else
    static const int64_t shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {17, 33, 9}, {64, 48, 80},
                                        {130, 70, 300}};
#endif
    float *out = malloc(2 * 4 * 130 * 300 * sizeof *out);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        float *a = random_pairs(4 * m * k, 11 + (unsigned)s), *b = random_pairs(4 * k * n, 7);
        char what[64];
        snprintf(what, sizeof what, "%lldx%lldx%lld", (long long)m, (long long)n, (long long)k);
        /* plain */
        wf_array *x = carr(a, (int64_t[]){m, k}, 2), *y = carr(b, (int64_t[]){k, n}, 2);
        if (read_c64(wf_matmul(x, y), out, m * n))
            check_product(out, a, b, 1, m, n, k, row_major, row_major, what);
        /* batched (4) times one shared B (broadcast) */
        wf_array *xb = carr(a, (int64_t[]){4, m, k}, 3);
        if (read_c64(wf_matmul(xb, y), out, 4 * m * n))
            check_product(out, a, b, 4, m, n, k, row_major, shared, what);
        /* batched times batched, A a transposed view (columns not contiguous) */
        wf_array *xt = wf_swapaxes(carr(a, (int64_t[]){4, k, m}, 3), 1, 2);
        wf_array *yb = carr(b, (int64_t[]){4, k, n}, 3);
        if (read_c64(wf_matmul(xt, yb), out, 4 * m * n))
            check_product(out, a, b, 4, m, n, k, transposed, row_major, what);
        /* B transposed view */
        wf_array *yt = wf_transpose(carr(b, (int64_t[]){n, k}, 2), NULL, 0);
        if (read_c64(wf_matmul(x, yt), out, m * n))
            check_product(out, a, b, 1, m, n, k, row_major, transposed, what);
        /* complex @ real and real @ complex (the real operand float32) */
        float *ra = malloc((size_t)(m * k) * sizeof *ra), *rb = malloc((size_t)(k * n) * sizeof *rb);
        memcpy(ra, a, (size_t)(m * k) * sizeof *ra);
        memcpy(rb, b, (size_t)(k * n) * sizeof *rb);
        wf_array *xr = wf_array_from_data(ra, (int64_t[]){m, k}, 2, WF_DTYPE_F32);
        wf_array *yr = wf_array_from_data(rb, (int64_t[]){k, n}, 2, WF_DTYPE_F32);
        if (read_c64(wf_matmul(x, yr), out, m * n))
            check_product(out, a, rb, 1, m, n, k, row_major, real_only, what);
        if (read_c64(wf_matmul(xr, y), out, m * n))
            check_product(out, ra, b, 1, m, n, k, real_only, row_major, what);
        free(ra);
        free(rb);
        free(a);
        free(b);
    }
    /* vectors: (k) @ (k, n) and (m, k) @ (k) */
    const float v[6] = {1, 2, 3, -1, 0.5f, 0.5f}, mtx[12] = {1, 0, 0, 1, 2, 2,
                                                            -1, 1, 3, 0, 0, -2};
    wf_array *vec = carr(v, (int64_t[]){3}, 1), *mat = carr(mtx, (int64_t[]){3, 2}, 2);
    if (read_c64(wf_matmul(vec, mat), out, 2))
        for (int j = 0; j < 2; j++) {
            cd s = 0;
            for (int t = 0; t < 3; t++)
                s += at(v, t) * at(mtx, t * 2 + j);
            near_c(out + 2 * j, s, 1e-6, "vector @ matrix", j);
        }
    /* k = 0 gives zeros */
    wf_array *e1 = wf_zeros((int64_t[]){2, 0}, 2, WF_DTYPE_C64);
    wf_array *e2 = wf_zeros((int64_t[]){0, 3}, 2, WF_DTYPE_C64);
    if (read_c64(wf_matmul(e1, e2), out, 6))
        for (int i = 0; i < 12; i++)
            CHECK(out[i] == 0);
    free(out);
    wf_scope_end();
}

/* Every GEMM variant this CPU runs: the complex product is a float32 GEMM. */
static void test_matmul(void)
{
    const int best_isa = wf__gemm_isa();
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
        if (!wf__gemm_isa_supported(isa) || !wf_test_runs_isa(isa, best_isa))
            continue;
        CHECK_OK(wf__gemm_isa_set(isa));
        printf("  GEMM variant %s\n", wf__gemm_isa_name(isa));
        run_matmuls();
    }
    CHECK_OK(wf__gemm_isa_set(-1));
}

/* d/dA of real(sum(A @ B)) with MLX's convention (the adjoint: cotangent
 * 1 + 0i, then ct @ B^H): ones(m, n) @ conj(B)^T, that is each row of B
 * summed and conjugated. */
static wf_status product_body(void *payload, wf_array *const *in, size_t nin, wf_array **out,
                              size_t *nout)
{
    (void)payload;
    (void)nin;
    wf_scope_begin();
    out[0] = wf_keep(wf_sum(wf_real(wf_matmul(in[0], in[1])), NULL, 0, false));
    wf_scope_end();
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_matmul_gradient(void)
{
    wf_scope_begin();
    const float a[12] = {1, 2, 3, 4, 5, 6, -1, 0, 0, 1, 2, -2};
    const float b[12] = {0.5f, 1, -1, 2, 3, 0, 1, 1, 2, -1, 0, 4};
    wf_array *in[2] = {carr(a, (int64_t[]){2, 3}, 2), carr(b, (int64_t[]){3, 2}, 2)};
    wf_fn *f = wf_fn_new(product_body, NULL, NULL);
    wf_fn *g = wf_grad(f, (int[]){0}, 1);
    wf_array *grad[1] = {NULL};
    size_t n = 1;
    float got[12];
    if (CHECK_OK(wf_fn_call(g, in, 2, grad, &n)) && read_c64(grad[0], got, 6))
        for (int i = 0; i < 2; i++)
            for (int t = 0; t < 3; t++)
                near_c(got + 2 * (i * 3 + t), conj(at(b, t * 2) + at(b, t * 2 + 1)), 1e-6, "dA",
                       i * 3 + t);
    wf_fn_release(g);
    wf_fn_release(f);
    wf_scope_end();
}

/* ---------------------------------------------------------------- composed */

/* round (each part, half to even), var / std (mean squared magnitude of the
 * deviations, float32), logaddexp (log(e^a + e^b)), as MLX defines them. */
static void test_round_var_logaddexp(void)
{
    wf_scope_begin();
    enum { N = 4 };
    const float z[2 * N] = {22.2f, 3.6f, 18.5f, 98.2f, -0.5f, 2.5f, 1, -1.5f};
    const float w[2 * N] = {1, 1, 0, 1, 4, 1, 2.5f, -3};
    wf_array *x = carr(z, (int64_t[]){N}, 1), *y = carr(w, (int64_t[]){N}, 1);
    float got[2 * N];
    if (read_c64(wf_round(x), got, N))
        for (int i = 0; i < 2 * N; i++)
            CHECK(got[i] == nearbyintf(z[i]));
    for (int ddof = 0; ddof < 2; ddof++) {
        cd mean = 0;
        for (int i = 0; i < N; i++)
            mean += at(z, i);
        mean /= N;
        double ss = 0;
        for (int i = 0; i < N; i++)
            ss += cabs(at(z, i) - mean) * cabs(at(z, i) - mean);
        const double var = ss / (N - ddof);
        float v = 0, sd = 0;
        wf_array *vv = wf_var(x, NULL, 0, false, ddof), *ss_ = wf_std(x, NULL, 0, false, ddof);
        if (CHECK_NOT_NULL(vv) && CHECK_EQ_INT(wf_array_dtype(vv), WF_DTYPE_F32) &&
            CHECK_OK(wf_array_copy_to(vv, &v, 4)) && CHECK_OK(wf_array_copy_to(ss_, &sd, 4))) {
            CHECK_NEAR(v, var, 1e-5 * var);
            CHECK_NEAR(sd, sqrt(var), 1e-5 * sqrt(var));
        }
    }
    /* a logarithm is defined up to 2 pi i: compare e^result with e^a + e^b
     * (MLX's hi + log1p(e^(lo - hi)) keeps hi's branch, not the principal
     * one) */
    if (read_c64(wf_logaddexp(x, y), got, N))
        for (int i = 0; i < N; i++) {
            const cd r = cexp(got[2 * i] + I * got[2 * i + 1]);
            const cd want = cexp(at(z, i)) + cexp(at(w, i));
            const float pair[2] = {(float)creal(r), (float)cimag(r)};
            near_c(pair, want, 1e-4, "exp(logaddexp)", i);
        }
    wf_scope_end();
}

/* ---------------------------------------------------------------- data movement */

static void test_data_movement(void)
{
    wf_scope_begin();
    const float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    wf_array *x = carr(v, (int64_t[]){2, 2}, 2);
    float got[32];
    /* pad with zeros: (2, 2) -> (3, 4), one row after, one column each side */
    if (read_c64(wf_pad(x, (int64_t[]){0, 1}, (int64_t[]){1, 1}, 0), got, 12))
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 4; c++) {
                const bool inside = r < 2 && c >= 1 && c < 3;
                const float *g = got + 2 * (r * 4 + c);
                CHECK(inside ? g[0] == v[2 * (r * 2 + c - 1)] && g[1] == v[2 * (r * 2 + c - 1) + 1]
                             : g[0] == 0 && g[1] == 0);
            }
    /* scatter replace: rows of x into a 3 x 2 zero array at rows 2 and 0 */
    const int32_t rows[2] = {2, 0};
    wf_array *idx = wf_array_from_data(rows, (int64_t[]){2}, 1, WF_DTYPE_I32);
    wf_array *base = wf_zeros((int64_t[]){3, 2}, 2, WF_DTYPE_C64);
    wf_array *upd = wf_reshape(x, (int64_t[]){2, 1, 2}, 3);
    if (read_c64(wf_scatter(base, &idx, 1, upd, (int[]){0}, WF_SCATTER_REPLACE), got, 6)) {
        const float want[12] = {5, 6, 7, 8, 0, 0, 0, 0, 1, 2, 3, 4};
        CHECK(memcmp(got, want, sizeof want) == 0);
    }
    /* a 2-d reversal (both axes) and concatenation along axis 1 */
    wf_array *flip = wf_slice(x, (int64_t[]){-1, -1}, (int64_t[]){INT64_MIN, INT64_MIN},
                              (int64_t[]){-1, -1});
    if (read_c64(flip, got, 4)) {
        const float want[8] = {7, 8, 5, 6, 3, 4, 1, 2};
        CHECK(memcmp(got, want, sizeof want) == 0);
    }
    wf_array *pair[2] = {x, flip};
    if (read_c64(wf_concatenate(pair, 2, 1), got, 8)) {
        const float want[16] = {1, 2, 3, 4, 7, 8, 5, 6, 5, 6, 7, 8, 3, 4, 1, 2};
        CHECK(memcmp(got, want, sizeof want) == 0);
    }
    wf_scope_end();
}

int main(void)
{
    RUN_TEST(test_functions);
    RUN_TEST(test_power);
    RUN_TEST(test_maximum_minimum);
    RUN_TEST(test_reductions);
    RUN_TEST(test_scans);
    RUN_TEST(test_matmul);
    RUN_TEST(test_matmul_gradient);
    RUN_TEST(test_round_var_logaddexp);
    RUN_TEST(test_data_movement);
    return TEST_SUMMARY();
}
