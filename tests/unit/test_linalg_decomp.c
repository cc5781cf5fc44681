/*
 * The matrix factorizations (weft.h's wf_linalg_* section) against
 * references written here: each factorization is checked by rebuilding a
 * from its factors with direct loops (L L^T, Q R, L[p] U, V diag(w) V^T,
 * U diag(S) Vt), by the factors' structure (triangles, orthonormal columns,
 * ordered values) and inverses by a @ inv(a) = I. Batches, float32 and
 * float64, strided inputs, 1 x 1, empty batches and empty matrices,
 * ill-conditioned and singular matrices, errors; vjp / jvp of inv, tri_inv,
 * cholesky and eigh against finite differences; vmap against per-example
 * results. complex64 eigh and SVD: Q diag(w) Q^H with random unitary Q
 * (known, repeated spectra), H V = V diag(w), V^H V = I, the phase
 * convention, the triangle read (UPLO; NaN in the other one), U diag(S) Vt
 * with unitary U, Vt (tall, wide, square, rank-deficient), vmap, eigh's
 * vjp / jvp against float32 central differences (phase-free and
 * phase-dependent losses), batch-invariant bits, errors.
 */
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "fault_sweep.h"
#include "harness.h"
#include "transforms_util.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
enum { BIG = 24 };
#else
enum { BIG = 80 };
#endif

/* ---------------------------------------------------------------- reference helpers */

/* A deterministic value in [-1, 1). */
static double noise(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (double)(*s >> 8) / (double)(1u << 24) * 2.0 - 1.0;
}

static double *random_matrices(int64_t count, uint32_t seed)
{
    double *v = malloc((size_t)(count > 0 ? count : 1) * sizeof *v);
    for (int64_t i = 0; i < count; i++)
        v[i] = noise(&seed);
    return v;
}

/* batch symmetric positive-definite n x n matrices: B B^T + n I. */
static double *spd_matrices(int64_t batch, int64_t n, uint32_t seed)
{
    double *b = random_matrices(batch * n * n, seed);
    double *a = malloc((size_t)(batch * n * n > 0 ? batch * n * n : 1) * sizeof *a);
    for (int64_t t = 0; t < batch; t++)
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = i == j ? (double)n : 0.0;
                for (int64_t k = 0; k < n; k++)
                    s += b[t * n * n + i * n + k] * b[t * n * n + j * n + k];
                a[t * n * n + i * n + j] = s;
            }
    free(b);
    return a;
}

static wf_array *make(const double *v, const int64_t *shape, int ndim, wf_dtype dtype)
{
    return conf_array(v, shape, ndim, dtype);
}

typedef double _Complex zdouble;

/* A complex64 array of the complex doubles v. */
static wf_array *make_complex(const zdouble *v, const int64_t *shape, int ndim)
{
    const int64_t count = conf_size(shape, ndim);
    float *host = malloc((size_t)(2 * count + 2) * sizeof *host);
    for (int64_t i = 0; i < count; i++) {
        host[2 * i] = (float)creal(v[i]);
        host[2 * i + 1] = (float)cimag(v[i]);
    }
    wf_array *x = wf_array_from_data(host, shape, ndim, WF_DTYPE_C64);
    free(host);
    return x;
}

static double tol_of(wf_dtype d) { return d == WF_DTYPE_F64 ? 1e-9 : 2e-4; }

/* max |x - y| / (1 + max |y|) over n elements. */
static double rel_err(const double *x, const double *y, int64_t n)
{
    double e = 0.0, scale = 1.0;
    for (int64_t i = 0; i < n; i++) {
        e = fmax(e, fabs(x[i] - y[i]));
        scale = fmax(scale, fabs(y[i]));
    }
    return e / scale;
}

/* c = a (m x k) @ b (k x n), with a or b taken transposed if asked. */
static void matmul_ref(const double *a, const double *b, double *c, int64_t m, int64_t k,
                       int64_t n, bool at, bool bt)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0.0;
            for (int64_t l = 0; l < k; l++)
                s += (at ? a[l * m + i] : a[i * k + l]) * (bt ? b[j * k + l] : b[l * n + j]);
            c[i * n + j] = s;
        }
}

static bool is_identity(const double *x, int64_t n, double tol)
{
    double e = 0.0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++)
            e = fmax(e, fabs(x[i * n + j] - (i == j ? 1.0 : 0.0)));
    return e <= tol;
}

static bool is_triangular(const double *x, int64_t r, int64_t c, bool upper)
{
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++)
            if ((upper ? j < i : j > i) && x[i * c + j] != 0.0)
                return false;
    return true;
}

/* ---------------------------------------------------------------- inv, tri_inv, cholesky */

static void check_inverse(int64_t batch, int64_t n, wf_dtype dtype)
{
    wf_scope_begin();
    double *v = random_matrices(batch * n * n, (uint32_t)(n * 7 + batch));
    for (int64_t t = 0; t < batch; t++) /* keep them well conditioned */
        for (int64_t i = 0; i < n; i++)
            v[t * n * n + i * n + i] += 2.0;
    const int64_t shape[3] = {batch, n, n};
    wf_array *x = wf_linalg_inv(make(v, shape, 3, dtype));
    double *got = x ? conf_read(x) : NULL;
    double *prod = malloc((size_t)(n * n) * sizeof *prod);
    if (CHECK_NOT_NULL(got) && CHECK(wf_array_dtype(x) == dtype))
        for (int64_t t = 0; t < batch; t++) {
            matmul_ref(v + t * n * n, got + t * n * n, prod, n, n, n, false, false);
            if (!CHECK(is_identity(prod, n, tol_of(dtype) * 10 * (double)n)))
                printf("    inv n=%lld batch %lld dtype %d\n", (long long)n, (long long)t,
                       (int)dtype);
        }
    free(prod);
    free(got);
    free(v);
    wf_scope_end();
}

static void check_tri_inverse(int64_t n, bool upper)
{
    wf_scope_begin();
    double *v = random_matrices(n * n, (uint32_t)(n + upper));
    for (int64_t i = 0; i < n; i++)
        v[i * n + i] = 2.0 + fabs(v[i * n + i]);
    double *tri = malloc((size_t)(n * n) * sizeof *tri), *prod = malloc((size_t)(n * n) * sizeof *prod);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++)
            tri[i * n + j] = (upper ? j >= i : j <= i) ? v[i * n + j] : 0.0;
    const int64_t shape[2] = {n, n};
    /* the other triangle holds garbage the kernel must not read */
    wf_array *y = wf_linalg_tri_inv(make(v, shape, 2, WF_DTYPE_F64), upper);
    double *got = y ? conf_read(y) : NULL;
    if (CHECK_NOT_NULL(got)) {
        CHECK(is_triangular(got, n, n, upper));
        matmul_ref(tri, got, prod, n, n, n, false, false);
        CHECK(is_identity(prod, n, 1e-10));
    }
    free(got);
    free(prod);
    free(tri);
    free(v);
    wf_scope_end();
}

static void check_cholesky(int64_t batch, int64_t n, bool upper, wf_dtype dtype)
{
    wf_scope_begin();
    double *a = spd_matrices(batch, n, (uint32_t)(n * 3 + upper));
    const int64_t shape[3] = {batch, n, n};
    wf_array *f = wf_linalg_cholesky(make(a, shape, 3, dtype), upper);
    double *got = f ? conf_read(f) : NULL;
    double *rebuilt = malloc((size_t)(n * n > 0 ? n * n : 1) * sizeof *rebuilt);
    if (CHECK_NOT_NULL(got))
        for (int64_t t = 0; t < batch; t++) {
            const double *l = got + t * n * n;
            CHECK(is_triangular(l, n, n, upper));
            for (int64_t i = 0; i < n; i++)
                CHECK(l[i * n + i] > 0);
            /* lower: L L^T; upper: U^T U */
            matmul_ref(l, l, rebuilt, n, n, n, upper, !upper);
            if (!CHECK(rel_err(rebuilt, a + t * n * n, n * n) <= tol_of(dtype)))
                printf("    cholesky n=%lld upper=%d\n", (long long)n, upper);
        }
    /* cholesky_inv: a @ inv(a) = I */
    wf_array *ainv = f ? wf_linalg_cholesky_inv(f, upper) : NULL;
    double *inv = ainv ? conf_read(ainv) : NULL;
    if (CHECK_NOT_NULL(inv) && batch > 0) {
        matmul_ref(a, inv, rebuilt, n, n, n, false, false);
        CHECK(is_identity(rebuilt, n, tol_of(dtype) * 10));
    }
    free(inv);
    free(rebuilt);
    free(got);
    free(a);
    wf_scope_end();
}

static void test_inverses(void)
{
    for (int64_t n = 1; n <= 6; n++) {
        check_inverse(3, n, WF_DTYPE_F64);
        check_inverse(2, n, WF_DTYPE_F32);
        check_tri_inverse(n, false);
        check_tri_inverse(n, true);
    }
    check_inverse(2, BIG, WF_DTYPE_F64);
    for (int upper = 0; upper < 2; upper++) {
        for (int64_t n = 1; n <= 5; n++) {
            check_cholesky(3, n, upper, WF_DTYPE_F64);
            check_cholesky(2, n, upper, WF_DTYPE_F32);
        }
        check_cholesky(1, BIG, upper, WF_DTYPE_F64);
        check_cholesky(0, 3, upper, WF_DTYPE_F64); /* an empty batch */
    }
}

/* Evaluates x, which must fail with WF_ERR_KERNEL naming `op` and the
 * singular matrix; then a fresh inverse still works. */
static void check_singular_failure(wf_array *x, const char *op)
{
    CHECK_STATUS(wf_eval(&x, 1), WF_ERR_KERNEL);
    CHECK_STR_CONTAINS(wf_last_error_message(), op);
    CHECK_STR_CONTAINS(wf_last_error_message(), "singular");
    const double two[4] = {2, 0, 0, 4};
    const int64_t s2[2] = {2, 2};
    double *inv = conf_read(wf_linalg_inv(make(two, s2, 2, WF_DTYPE_F32)));
    if (CHECK_NOT_NULL(inv))
        CHECK(inv[0] == 0.5 && inv[1] == 0.0 && inv[2] == 0.0 && inv[3] == 0.25);
    free(inv);
}

/* A zero pivot fails the inverses and solves (as LAPACK / MLX); cholesky of
 * a semi-definite or indefinite matrix and LU of a singular one are values. */
static void test_singular(void)
{
    wf_scope_begin();
    const double singular[4] = {1, 2, 2, 4};
    const int64_t s2[2] = {2, 2};
    wf_array *a = make(singular, s2, 2, WF_DTYPE_F64);
    check_singular_failure(wf_linalg_inv(a), "wf_linalg_inv");
    /* one singular matrix in a batch of invertible ones fails the batch */
    const double batch[12] = {1, 0, 0, 1, 1, 2, 2, 4, 3, 0, 0, 3};
    const int64_t s3[3] = {3, 2, 2};
    check_singular_failure(wf_linalg_inv(make(batch, s3, 3, WF_DTYPE_F32)), "wf_linalg_inv");
    const double ones[2] = {1, 1};
    const int64_t s1[1] = {2};
    check_singular_failure(wf_linalg_solve(a, make(ones, s1, 1, WF_DTYPE_F64)), "wf_linalg_inv");
    const double zero_diagonal[4] = {0, 0, 1, 1};
    check_singular_failure(wf_linalg_tri_inv(make(zero_diagonal, s2, 2, WF_DTYPE_F64), false),
                           "wf_linalg_tri_inv");
    /* semi-definite (a pivot of exactly 0): finite, L L^T = a */
    double *chol = conf_read(wf_linalg_cholesky(a, false));
    if (CHECK_NOT_NULL(chol)) {
        double r[4];
        matmul_ref(chol, chol, r, 2, 2, 2, false, true);
        CHECK(rel_err(r, singular, 4) <= 1e-7);
    }
    const double indefinite2[4] = {1, 2, 2, 1}; /* eigenvalues 3 and -1 */
    double *chol3 = conf_read(wf_linalg_cholesky(make(indefinite2, s2, 2, WF_DTYPE_F64), false));
    if (CHECK_NOT_NULL(chol3))
        for (int i = 0; i < 4; i++)
            CHECK(isnan(chol3[i]));
    free(chol3);
    const double indefinite[4] = {1, 0, 0, -1};
    double *chol2 = conf_read(wf_linalg_cholesky(make(indefinite, s2, 2, WF_DTYPE_F32), true));
    if (CHECK_NOT_NULL(chol2))
        CHECK(isnan(chol2[0]) && isnan(chol2[3]));
    /* LU of a singular matrix still rebuilds it (the zero pivot kept) */
    wf_array *p = NULL, *l = NULL, *u = NULL;
    const double sing4[16] = {1, 2, 3, 4, 2, 4, 6, 8, 0, 1, 1, 0, 1, 0, 0, 1};
    const int64_t s4[2] = {4, 4};
    if (CHECK_OK(wf_linalg_lu(make(sing4, s4, 2, WF_DTYPE_F64), &p, &l, &u))) {
        double *pv = conf_read(p), *lv = conf_read(l), *uv = conf_read(u), r[16];
        matmul_ref(lv, uv, r, 4, 4, 4, false, false);
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                CHECK_NEAR(r[(int)pv[i] * 4 + j], sing4[i * 4 + j], 1e-12);
        free(pv);
        free(lv);
        free(uv);
    }
    free(chol2);
    free(chol);
    wf_scope_end();
}

/* Hilbert matrices: ill-conditioned (cond ~ 1e10 at n = 8); inverse in
 * float64 still gives a @ inv(a) = I to ~cond * eps. */
static void test_ill_conditioned(void)
{
    wf_scope_begin();
    const int64_t n = 8, shape[2] = {n, n};
    double h[64], prod[64];
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++)
            h[i * n + j] = 1.0 / (double)(i + j + 1);
    double *inv = conf_read(wf_linalg_inv(make(h, shape, 2, WF_DTYPE_F64)));
    if (CHECK_NOT_NULL(inv)) {
        matmul_ref(h, inv, prod, n, n, n, false, false);
        CHECK(is_identity(prod, n, 1e-5));
    }
    double *w = NULL;
    wf_array *wa = NULL;
    if (CHECK_OK(wf_linalg_eigh(make(h, shape, 2, WF_DTYPE_F64), false, &wa, NULL))) {
        w = conf_read(wa);
        double sum = 0.0; /* trace = sum of eigenvalues; all positive */
        for (int64_t i = 0; i < n; i++) {
            sum += w[i] - h[i * n + i];
            CHECK(w[i] > 0);
        }
        CHECK_NEAR(sum, 0.0, 1e-12);
    }
    free(w);
    free(inv);
    wf_scope_end();
}

/* ---------------------------------------------------------------- lu, qr */

static void check_lu(int64_t batch, int64_t m, int64_t n, wf_dtype dtype, bool strided)
{
    wf_scope_begin();
    const int64_t k = m < n ? m : n, shape[3] = {batch, m, n};
    double *v = random_matrices(batch * m * n, (uint32_t)(m * 31 + n));
    wf_array *a = strided ? conf_strided(v, shape, 3, dtype) : make(v, shape, 3, dtype);
    wf_array *p = NULL, *l = NULL, *u = NULL, *lu = NULL, *piv = NULL;
    if (CHECK_OK(wf_linalg_lu(a, &p, &l, &u)) && CHECK_OK(wf_linalg_lu_factor(a, &lu, &piv))) {
        CHECK(wf_array_dtype(p) == WF_DTYPE_U32 && wf_array_dtype(piv) == WF_DTYPE_U32);
        CHECK(wf_array_dim(l, -1) == k && wf_array_dim(u, -2) == k);
        double *pv = conf_read(p), *lv = conf_read(l), *uv = conf_read(u);
        double *luv = conf_read(lu), *pivv = conf_read(piv);
        double *r = malloc((size_t)(m * n > 0 ? m * n : 1) * sizeof *r);
        for (int64_t t = 0; t < batch; t++) {
            const double *lt = lv + t * m * k, *ut = uv + t * k * n;
            matmul_ref(lt, ut, r, m, k, n, false, false);
            double e = 0.0;
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++)
                    e = fmax(e, fabs(r[(int64_t)pv[t * m + i] * n + j] - v[t * m * n + i * n + j]));
            if (!CHECK(e <= tol_of(dtype) * 10))
                printf("    lu %lldx%lld err %g\n", (long long)m, (long long)n, e);
            for (int64_t i = 0; i < m; i++) /* partial pivoting: |L| <= 1, unit diagonal */
                for (int64_t j = 0; j < k; j++)
                    CHECK(j > i ? lt[i * k + j] == 0 : j == i ? lt[i * k + j] == 1
                                                             : fabs(lt[i * k + j]) <= 1 + 1e-12);
            CHECK(is_triangular(ut, k, n, true));
            /* lu_factor: the same factors packed, swaps giving the same rows */
            int64_t perm[64];
            for (int64_t i = 0; i < m; i++)
                perm[i] = i;
            for (int64_t j = 0; j < k; j++) {
                const int64_t s = (int64_t)pivv[t * k + j], tmp = perm[j];
                perm[j] = perm[s];
                perm[s] = tmp;
            }
            for (int64_t i = 0; i < m; i++) {
                CHECK((int64_t)pv[t * m + perm[i]] == i);
                for (int64_t j = 0; j < n; j++)
                    CHECK(luv[t * m * n + i * n + j] ==
                          (j < i ? lt[i * k + j] : ut[i * n + j]));
            }
        }
        free(r);
        free(pv);
        free(lv);
        free(uv);
        free(luv);
        free(pivv);
    }
    free(v);
    wf_scope_end();
}

static void check_qr(int64_t batch, int64_t m, int64_t n, wf_dtype dtype)
{
    wf_scope_begin();
    const int64_t k = m < n ? m : n, shape[3] = {batch, m, n};
    double *v = random_matrices(batch * m * n, (uint32_t)(m * 17 + n));
    wf_array *q = NULL, *r = NULL;
    if (CHECK_OK(wf_linalg_qr(make(v, shape, 3, dtype), &q, &r))) {
        CHECK(wf_array_dim(q, -1) == k && wf_array_dim(r, -2) == k);
        double *qv = conf_read(q), *rv = conf_read(r);
        double *a = malloc((size_t)(m * n + k * k + 1) * sizeof *a), *qtq = a + m * n;
        for (int64_t t = 0; t < batch; t++) {
            matmul_ref(qv + t * m * k, rv + t * k * n, a, m, k, n, false, false);
            if (!CHECK(rel_err(a, v + t * m * n, m * n) <= tol_of(dtype) * 10))
                printf("    qr %lldx%lld\n", (long long)m, (long long)n);
            matmul_ref(qv + t * m * k, qv + t * m * k, qtq, k, m, k, true, false);
            CHECK(is_identity(qtq, k, tol_of(dtype) * 10));
            CHECK(is_triangular(rv + t * k * n, k, n, true));
        }
        free(a);
        free(qv);
        free(rv);
    }
    free(v);
    wf_scope_end();
}

static void test_lu_qr(void)
{
    const int64_t sizes[][2] = {{1, 1}, {3, 3}, {5, 5}, {4, 6}, {6, 4}, {1, 5}, {5, 1}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        check_lu(3, sizes[s][0], sizes[s][1], WF_DTYPE_F64, s % 2 == 0);
        check_lu(2, sizes[s][0], sizes[s][1], WF_DTYPE_F32, false);
        check_qr(3, sizes[s][0], sizes[s][1], WF_DTYPE_F64);
        check_qr(2, sizes[s][0], sizes[s][1], WF_DTYPE_F32);
    }
    check_lu(1, 40, 40, WF_DTYPE_F64, false);
    check_qr(1, BIG, BIG / 2, WF_DTYPE_F64);
    check_lu(0, 3, 3, WF_DTYPE_F64, false);
    check_qr(0, 3, 2, WF_DTYPE_F64);
}

/* ---------------------------------------------------------------- eigh, svd */

static void check_eigh(int64_t batch, int64_t n, bool upper, wf_dtype dtype)
{
    wf_scope_begin();
    double *v = random_matrices(batch * n * n, (uint32_t)(n * 5 + upper));
    double *sym = malloc((size_t)(batch * n * n + 1) * sizeof *sym);
    for (int64_t t = 0; t < batch; t++) /* the triangle read, mirrored */
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) {
                const bool in_lower = j <= i;
                const int64_t src = (in_lower != upper || i == j) ? i * n + j : j * n + i;
                sym[t * n * n + i * n + j] = v[t * n * n + src];
            }
    const int64_t shape[3] = {batch, n, n};
    wf_array *w = NULL, *vec = NULL;
    if (CHECK_OK(wf_linalg_eigh(make(v, shape, 3, dtype), upper, &w, &vec))) {
        double *wv = conf_read(w), *vv = conf_read(vec);
        double *r = malloc((size_t)(n * n + 1) * sizeof *r);
        for (int64_t t = 0; t < batch; t++) {
            const double *x = vv + t * n * n, *e = wv + t * n;
            for (int64_t i = 1; i < n; i++)
                CHECK(e[i - 1] <= e[i]);
            for (int64_t i = 0; i < n; i++) /* V diag(w) V^T */
                for (int64_t j = 0; j < n; j++) {
                    double s = 0.0;
                    for (int64_t c = 0; c < n; c++)
                        s += x[i * n + c] * e[c] * x[j * n + c];
                    r[i * n + j] = s;
                }
            if (!CHECK(rel_err(r, sym + t * n * n, n * n) <= tol_of(dtype) * 10))
                printf("    eigh n=%lld upper=%d\n", (long long)n, upper);
            matmul_ref(x, x, r, n, n, n, true, false);
            CHECK(is_identity(r, n, tol_of(dtype) * 10));
        }
        free(r);
        free(wv);
        free(vv);
    }
    free(sym);
    free(v);
    wf_scope_end();
}

/* Rebuilds a from the full SVD; rank_one makes a rank-deficient a. */
static void check_svd(int64_t batch, int64_t m, int64_t n, wf_dtype dtype, bool rank_one)
{
    wf_scope_begin();
    const int64_t k = m < n ? m : n, shape[3] = {batch, m, n};
    double *v = random_matrices(batch * m * n, (uint32_t)(m * 13 + n + rank_one));
    if (rank_one)
        for (int64_t t = 0; t < batch; t++)
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++)
                    v[t * m * n + i * n + j] = (double)(i + 1) * (double)(j % 3 - 1);
    wf_array *u = NULL, *s = NULL, *vt = NULL, *s_only = NULL;
    wf_array *a = make(v, shape, 3, dtype);
    if (CHECK_OK(wf_linalg_svd(a, &u, &s, &vt)) &&
        CHECK_OK(wf_linalg_svd(a, NULL, &s_only, NULL))) {
        double *uv = conf_read(u), *sv = conf_read(s), *vtv = conf_read(vt);
        double *so = conf_read(s_only);
        double *r = malloc((size_t)(m * m + n * n + m * n + 1) * sizeof *r);
        for (int64_t t = 0; t < batch; t++) {
            const double *ut = uv + t * m * m, *st = sv + t * k, *vtt = vtv + t * n * n;
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    double acc = 0.0;
                    for (int64_t c = 0; c < k; c++)
                        acc += ut[i * m + c] * st[c] * vtt[c * n + j];
                    r[i * n + j] = acc;
                }
            if (!CHECK(rel_err(r, v + t * m * n, m * n) <= tol_of(dtype) * 10))
                printf("    svd %lldx%lld rank_one=%d\n", (long long)m, (long long)n, rank_one);
            for (int64_t c = 0; c < k; c++) {
                CHECK(st[c] >= 0 && (c == 0 || st[c - 1] >= st[c]));
                CHECK_NEAR(so[t * k + c], st[c], 1e-6);
            }
            matmul_ref(ut, ut, r, m, m, m, true, false);
            CHECK(is_identity(r, m, tol_of(dtype) * 10));
            matmul_ref(vtt, vtt, r, n, n, n, false, true);
            CHECK(is_identity(r, n, tol_of(dtype) * 10));
        }
        free(r);
        free(uv);
        free(sv);
        free(vtv);
        free(so);
    }
    free(v);
    wf_scope_end();
}

static void test_eigh_svd(void)
{
    for (int64_t n = 1; n <= 6; n++)
        for (int upper = 0; upper < 2; upper++) {
            check_eigh(3, n, upper, WF_DTYPE_F64);
            check_eigh(2, n, upper, WF_DTYPE_F32);
        }
    check_eigh(1, BIG / 2, false, WF_DTYPE_F64);
    check_eigh(0, 3, false, WF_DTYPE_F64);
    const int64_t sizes[][2] = {{1, 1}, {3, 3}, {4, 3}, {3, 4}, {6, 2}, {2, 6}, {1, 4}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        check_svd(3, sizes[i][0], sizes[i][1], WF_DTYPE_F64, false);
        check_svd(2, sizes[i][0], sizes[i][1], WF_DTYPE_F32, false);
        check_svd(2, sizes[i][0], sizes[i][1], WF_DTYPE_F64, true);
    }
    check_svd(1, BIG / 2, BIG / 3, WF_DTYPE_F64, false);
    check_svd(0, 3, 2, WF_DTYPE_F64, false);
}

/* ---------------------------------------------------------------- solves, empty, errors */

static void test_solves(void)
{
    wf_scope_begin();
    const int64_t n = 4, nrhs = 3, as[3] = {2, n, n}, bs[3] = {2, n, nrhs};
    double *a = random_matrices(2 * n * n, 11), *b = random_matrices(2 * n * nrhs, 12);
    for (int64_t t = 0; t < 2; t++)
        for (int64_t i = 0; i < n; i++)
            a[t * n * n + i * n + i] += 3.0;
    wf_array *x = wf_linalg_solve(make(a, as, 3, WF_DTYPE_F64), make(b, bs, 3, WF_DTYPE_F64));
    double *xv = x ? conf_read(x) : NULL, r[16];
    if (CHECK_NOT_NULL(xv))
        for (int64_t t = 0; t < 2; t++) {
            matmul_ref(a + t * n * n, xv + t * n * nrhs, r, n, n, nrhs, false, false);
            CHECK(rel_err(r, b + t * n * nrhs, n * nrhs) <= 1e-12);
        }
    for (int upper = 0; upper < 2; upper++) {
        wf_array *y = wf_linalg_solve_triangular(make(a, as, 3, WF_DTYPE_F64),
                                                 make(b, bs, 3, WF_DTYPE_F64), upper);
        double *yv = y ? conf_read(y) : NULL;
        if (CHECK_NOT_NULL(yv))
            for (int64_t t = 0; t < 2; t++) {
                double tri[16];
                for (int64_t i = 0; i < n; i++)
                    for (int64_t j = 0; j < n; j++)
                        tri[i * n + j] = (upper ? j >= i : j <= i) ? a[t * n * n + i * n + j] : 0;
                matmul_ref(tri, yv + t * n * nrhs, r, n, n, nrhs, false, false);
                CHECK(rel_err(r, b + t * n * nrhs, n * nrhs) <= 1e-12);
            }
        free(yv);
    }
    /* a vector right-hand side */
    const int64_t vs[1] = {n};
    wf_array *xv1 = wf_linalg_solve(make(a, as + 1, 2, WF_DTYPE_F64), make(b, vs, 1, WF_DTYPE_F64));
    CHECK(xv1 && wf_array_ndim(xv1) == 1 && wf_array_dim(xv1, 0) == n);
    free(xv);
    free(a);
    free(b);
    wf_scope_end();
}

/* ---------------------------------------------------------------- eig */

/* Reads the complex64 x (evaluated) as count complex doubles (caller frees). */
static double _Complex *read_complex(wf_array *x, int64_t count)
{
    float *raw = malloc((size_t)(2 * count + 2) * sizeof *raw);
    double _Complex *out = malloc((size_t)(count + 1) * sizeof *out);
    if (!CHECK_EQ_INT(wf_array_dtype(x), WF_DTYPE_C64) ||
        !CHECK_OK(wf_array_copy_to(x, raw, (size_t)(2 * count) * sizeof *raw))) {
        free(raw);
        free(out);
        return NULL;
    }
    for (int64_t i = 0; i < count; i++)
        out[i] = raw[2 * i] + raw[2 * i + 1] * _Complex_I;
    free(raw);
    return out;
}

/* Checks eig of the batch of n x n matrices a (given as complex doubles):
 * A V = V diag(w) to the input dtype's precision, columns of unit norm with
 * the largest component real, the eigenvalues summing to the trace, and
 * eigvals (v NULL) giving the same w. */
static void check_eig(const double _Complex *a, int64_t batch, int64_t n, wf_dtype dtype)
{
    const int64_t count = batch * n * n;
    float *host32 = malloc((size_t)(2 * count + 2) * sizeof *host32);
    double *host64 = malloc((size_t)(count + 1) * sizeof *host64);
    for (int64_t i = 0; i < count; i++) {
        host32[2 * i] = (float)creal(a[i]);
        host32[2 * i + 1] = (float)cimag(a[i]);
        host64[i] = creal(a[i]);
    }
    const int64_t shape[3] = {batch, n, n};
    wf_array *x = dtype == WF_DTYPE_C64 ? wf_array_from_data(host32, shape, 3, WF_DTYPE_C64)
                                        : make(host64, shape, 3, dtype);
    wf_array *w = NULL, *v = NULL, *w_only = NULL;
    CHECK_OK(wf_linalg_eig(x, &w, &v));
    CHECK_OK(wf_linalg_eig(x, &w_only, NULL));
    double _Complex *wv = w ? read_complex(w, batch * n) : NULL;
    double _Complex *vv = v ? read_complex(v, count) : NULL;
    double _Complex *wo = w_only ? read_complex(w_only, batch * n) : NULL;
    const double tol = dtype == WF_DTYPE_F64 ? 1e-5 : 1e-4; /* results are complex64 */
    if (CHECK_NOT_NULL(wv) && CHECK_NOT_NULL(vv) && CHECK_NOT_NULL(wo)) {
        double worst = 0.0, norm_error = 0.0, phase_error = 0.0, trace_error = 0.0;
        for (int64_t t = 0; t < batch; t++) {
            const double _Complex *at = a + t * n * n, *vt = vv + t * n * n, *wt = wv + t * n;
            double scale = 1.0;
            double _Complex trace = 0.0, sum = 0.0;
            for (int64_t i = 0; i < n; i++) {
                trace += at[i * n + i];
                sum += wt[i];
                for (int64_t j = 0; j < n; j++)
                    scale = fmax(scale, cabs(at[i * n + j]));
            }
            trace_error = fmax(trace_error, cabs(trace - sum) / (scale * (double)n));
            for (int64_t k = 0; k < n; k++) {
                double norm2 = 0.0, largest = -1.0;
                double _Complex biggest = 0.0;
                for (int64_t i = 0; i < n; i++) {
                    double _Complex av = 0.0;
                    for (int64_t j = 0; j < n; j++)
                        av += at[i * n + j] * vt[j * n + k];
                    worst = fmax(worst, cabs(av - wt[k] * vt[i * n + k]) / scale);
                    norm2 += cabs(vt[i * n + k]) * cabs(vt[i * n + k]);
                    if (cabs(vt[i * n + k]) > largest + 1e-6) {
                        largest = cabs(vt[i * n + k]);
                        biggest = vt[i * n + k];
                    }
                }
                norm_error = fmax(norm_error, fabs(norm2 - 1.0));
                phase_error = fmax(phase_error, fabs(cimag(biggest)));
            }
            for (int64_t i = 0; i < n; i++)
                CHECK(wo[t * n + i] == wt[i]);
        }
        if (!CHECK(worst <= tol && norm_error <= tol && phase_error <= tol && trace_error <= tol))
            printf("    eig n=%lld %s: |AV - VW| %.3g, norm %.3g, phase %.3g, trace %.3g\n",
                   (long long)n, wf_dtype_name(dtype), worst, norm_error, phase_error,
                   trace_error);
    }
    free(wv);
    free(vv);
    free(wo);
    free(host32);
    free(host64);
}

static void test_eig(void)
{
    wf_scope_begin();
    const int sizes[] = {1, 2, 3, 5, 8, 13, BIG / 2};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const int64_t n = sizes[s], batch = 3, count = batch * n * n;
        double *re = random_matrices(count, (uint32_t)(7 + n)), *im = random_matrices(count, 99);
        double _Complex *real = malloc((size_t)count * sizeof *real);
        double _Complex *cplx = malloc((size_t)count * sizeof *cplx);
        for (int64_t i = 0; i < count; i++) {
            real[i] = re[i];
            cplx[i] = (float)re[i] + (float)im[i] * _Complex_I;
            real[i] = (float)re[i];
        }
        check_eig(real, batch, n, WF_DTYPE_F32);
        check_eig(real, batch, n, WF_DTYPE_F64);
        check_eig(cplx, batch, n, WF_DTYPE_C64);
        free(re);
        free(im);
        free(real);
        free(cplx);
    }
    /* a rotation's eigenvalues are 1 +- i; a triangular matrix's its diagonal;
     * a defective (Jordan) block and the identity still give A V = V W */
    const double _Complex rotation[4] = {1, -1, 1, 1};
    check_eig(rotation, 1, 2, WF_DTYPE_F32);
    wf_array *w = NULL;
    const double rot[4] = {1, -1, 1, 1};
    const int64_t s2[2] = {2, 2};
    CHECK_OK(wf_linalg_eig(make(rot, s2, 2, WF_DTYPE_F32), &w, NULL));
    double _Complex *wr = w ? read_complex(w, 2) : NULL;
    if (CHECK_NOT_NULL(wr)) {
        CHECK(cabs(wr[0] - conj(wr[1])) < 1e-6 && fabs(creal(wr[0]) - 1) < 1e-6 &&
              fabs(fabs(cimag(wr[0])) - 1) < 1e-6);
        free(wr);
    }
    const double _Complex jordan[9] = {2, 1, 0, 0, 2, 1, 0, 0, 2};
    const double _Complex identity[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    const double _Complex upper[9] = {1, 5, -3, 0, -2, 7, 0, 0, 4};
    check_eig(jordan, 1, 3, WF_DTYPE_F64);
    check_eig(identity, 1, 3, WF_DTYPE_F32);
    check_eig(upper, 1, 3, WF_DTYPE_F64);
    w = NULL;
    const double up[9] = {1, 5, -3, 0, -2, 7, 0, 0, 4};
    const int64_t s3[2] = {3, 3};
    CHECK_OK(wf_linalg_eig(make(up, s3, 2, WF_DTYPE_F64), &w, NULL));
    double _Complex *wu = w ? read_complex(w, 3) : NULL;
    if (CHECK_NOT_NULL(wu)) {
        for (int i = 0; i < 3; i++) { /* the diagonal, in some order */
            bool found = false;
            for (int j = 0; j < 3; j++)
                found = found || cabs(wu[j] - up[i * 4]) < 1e-6;
            CHECK(found);
        }
        free(wu);
    }
    /* empty matrices and batches; errors; no derivative */
    const int64_t e0[3] = {3, 0, 0}, e1[3] = {0, 4, 4};
    wf_array *v = NULL;
    CHECK_OK(wf_linalg_eig(wf_zeros(e0, 3, WF_DTYPE_F32), &w, &v));
    CHECK(wf_array_ndim(w) == 2 && wf_array_dim(w, 0) == 3 && wf_array_dim(w, 1) == 0 &&
          wf_array_ndim(v) == 3 && wf_array_size(v) == 0 && wf_eval(&v, 1) == WF_OK);
    CHECK_OK(wf_linalg_eig(wf_zeros(e1, 3, WF_DTYPE_F64), &w, &v));
    CHECK(wf_array_dim(w, 0) == 0 && wf_array_dim(w, 1) == 4 && wf_array_dim(v, 2) == 4);
    const int64_t s23[2] = {2, 3};
    w = (wf_array *)1;
    CHECK_STATUS(wf_linalg_eig(wf_zeros(s23, 2, WF_DTYPE_F32), &w, NULL), WF_ERR_SHAPE);
    CHECK(w == NULL);
    CHECK_STATUS(wf_linalg_eig(wf_zeros(s2, 2, WF_DTYPE_I32), &w, &v), WF_ERR_DTYPE);
    CHECK_STR_CONTAINS(wf_last_error_message(), "complex64");
    CHECK(w == NULL && v == NULL);
    wf_scope_end();
}

/* eig at the ends of float64's range: the eigenvectors of s * a are a's for
 * s = 2^-830 ... 2^830 (the sums of squares would leave the range unscaled),
 * and a 30 x 30 Jordan block, whose back substitution grows y past 1e300,
 * still gives finite unit vectors along e_0. */
static void test_eig_extreme_range(void)
{
    wf_scope_begin();
    const double a[9] = {4, 1, -2, 0.5, 3, 1, -1, 2, 5};
    const int64_t s3[2] = {3, 3};
    wf_array *w = NULL, *v = NULL;
    CHECK_OK(wf_linalg_eig(make(a, s3, 2, WF_DTYPE_F64), &w, &v));
    double _Complex *want = read_complex(v, 9);
    const double scales[2] = {0x1p830, 0x1p-830};
    for (int t = 0; t < 2 && want; t++) {
        double scaled[9];
        for (int i = 0; i < 9; i++)
            scaled[i] = a[i] * scales[t];
        CHECK_OK(wf_linalg_eig(make(scaled, s3, 2, WF_DTYPE_F64), &w, &v));
        double _Complex *got = read_complex(v, 9);
        for (int i = 0; got && i < 9; i++)
            if (!CHECK(cabs(got[i] - want[i]) < 1e-6))
                printf("    scale 2^%d: v[%d] %g%+gi, unscaled %g%+gi\n", t ? -830 : 830, i,
                       creal(got[i]), cimag(got[i]), creal(want[i]), cimag(want[i]));
        free(got);
    }
    free(want);
    enum { N = 30 };
    double *jordan = calloc(N * N, sizeof *jordan);
    for (int i = 0; i < N; i++) {
        jordan[i * N + i] = 2.0;
        if (i + 1 < N)
            jordan[i * N + i + 1] = 1.0;
    }
    const int64_t sn[2] = {N, N};
    CHECK_OK(wf_linalg_eig(make(jordan, sn, 2, WF_DTYPE_F64), &w, &v));
    double _Complex *jv = read_complex(v, N * N);
    for (int k = 0; jv && k < N; k++) {
        double norm2 = 0.0;
        for (int i = 0; i < N; i++)
            norm2 += creal(jv[i * N + k] * conj(jv[i * N + k]));
        if (!CHECK(fabs(norm2 - 1.0) < 1e-5 && fabs(cabs(jv[k]) - 1.0) < 1e-5))
            printf("    jordan column %d: norm^2 %g, |v[0]| %g\n", k, norm2, cabs(jv[k]));
    }
    free(jv);
    free(jordan);
    wf_scope_end();
}

static void test_empty_and_errors(void)
{
    wf_scope_begin();
    /* 0 x 0 matrices */
    const int64_t e0[3] = {2, 0, 0};
    wf_array *z = wf_zeros(e0, 3, WF_DTYPE_F32);
    wf_array *zi = wf_linalg_inv(z);
    CHECK(zi && wf_array_size(zi) == 0 && wf_eval(&zi, 1) == WF_OK);
    wf_array *q = NULL, *r = NULL;
    const int64_t e1[2] = {0, 5};
    CHECK_OK(wf_linalg_qr(wf_zeros(e1, 2, WF_DTYPE_F32), &q, &r));
    CHECK(wf_array_dim(q, 0) == 0 && wf_array_dim(q, 1) == 0 && wf_array_dim(r, 0) == 0 &&
          wf_array_dim(r, 1) == 5);
    /* one side zero: U and Vt are identities, as NumPy */
    wf_array *u = NULL, *s = NULL, *vt = NULL;
    if (CHECK_OK(wf_linalg_svd(wf_zeros(e1, 2, WF_DTYPE_F64), &u, &s, &vt))) {
        double *vv = conf_read(vt);
        CHECK(wf_array_size(s) == 0 && wf_array_dim(vt, 0) == 5);
        CHECK(is_identity(vv, 5, 0));
        free(vv);
    }
    /* errors */
    const int64_t s23[2] = {2, 3}, s3[1] = {3}, s22[2] = {2, 2};
    wf_array *nonsquare = wf_zeros(s23, 2, WF_DTYPE_F32);
    CHECK(wf_linalg_inv(nonsquare) == NULL);
    CHECK_STR_CONTAINS(wf_last_error_message(), "square");
    CHECK_NULL_WITH(wf_linalg_inv(nonsquare), WF_ERR_SHAPE);
    CHECK_NULL_WITH(wf_linalg_cholesky(wf_zeros(s3, 1, WF_DTYPE_F32), false), WF_ERR_SHAPE);
    wf_array *integers = wf_zeros(s22, 2, WF_DTYPE_I32);
    CHECK(wf_linalg_inv(integers) == NULL);
    CHECK_STR_CONTAINS(wf_last_error_message(), "float32 or float64");
    CHECK_NULL_WITH(wf_linalg_inv(integers), WF_ERR_DTYPE);
    CHECK_NULL_WITH(wf_linalg_tri_inv(wf_zeros(s22, 2, WF_DTYPE_C64), false), WF_ERR_DTYPE);
    wf_array *w = (wf_array *)1;
    CHECK_STATUS(wf_linalg_eigh(wf_zeros(s23, 2, WF_DTYPE_F32), false, &w, NULL), WF_ERR_SHAPE);
    CHECK(w == NULL);
    wf_array *p = (wf_array *)1, *l = (wf_array *)1, *uu = (wf_array *)1;
    CHECK_STATUS(wf_linalg_lu(wf_zeros(s3, 1, WF_DTYPE_F32), &p, &l, &uu), WF_ERR_SHAPE);
    CHECK(!p && !l && !uu);
    CHECK_NULL_WITH(wf_linalg_solve(wf_zeros(s22, 2, WF_DTYPE_F32), wf_zeros(s3, 1, WF_DTYPE_F32)),
                    WF_ERR_SHAPE);
    CHECK_NULL_WITH(wf_linalg_inv(NULL), WF_ERR_NULL_ARGUMENT);
    wf_scope_end();
}

/* ---------------------------------------------------------------- transforms */

static wf_array *shifted(wf_array *x, double by)
{
    wf_array *eye = wf_eye(wf_array_dim(x, -1), wf_array_dim(x, -1), 0, WF_DTYPE_F64);
    wf_array *s = wf_scalar(by, WF_DTYPE_F64);
    wf_array *r = wf_add(x, wf_multiply(eye, s));
    return r;
}

static wf_array *build_inv(wf_array *const *in) { return wf_linalg_inv(shifted(in[0], 3.0)); }
static wf_array *build_tri_inv_lower(wf_array *const *in)
{
    return wf_linalg_tri_inv(shifted(in[0], 3.0), false);
}
static wf_array *build_tri_inv_upper(wf_array *const *in)
{
    return wf_linalg_tri_inv(shifted(in[0], 3.0), true);
}
/* cholesky of x x^T + 3 I (symmetric positive definite for any x) */
static wf_array *spd_of(wf_array *x)
{
    return shifted(wf_matmul(x, wf_swapaxes(x, -1, -2)), 3.0);
}
static wf_array *build_cholesky_lower(wf_array *const *in)
{
    return wf_linalg_cholesky(spd_of(in[0]), false);
}
static wf_array *build_cholesky_upper(wf_array *const *in)
{
    return wf_linalg_cholesky(spd_of(in[0]), true);
}
/* (x + x^T) / 2: eigh's derivatives take the input as symmetric */
static wf_array *symmetric_of(wf_array *x)
{
    wf_array *s = wf_add(x, wf_swapaxes(x, -1, -2));
    return wf_multiply(s, wf_scalar(0.5, WF_DTYPE_F64));
}
static wf_array *build_eigvalsh(wf_array *const *in)
{
    wf_array *w = NULL;
    return wf_linalg_eigh(symmetric_of(in[0]), false, &w, NULL) == WF_OK ? w : NULL;
}
/* V diag(w^2) V^T: uses the vectors, free of their signs */
static wf_array *build_eigh_vectors(wf_array *const *in)
{
    wf_array *w = NULL, *v = NULL;
    if (wf_linalg_eigh(symmetric_of(in[0]), true, &w, &v) != WF_OK)
        return NULL;
    const int axis = -2;
    wf_array *scaled = wf_multiply(v, wf_expand_dims(wf_square(w), &axis, 1));
    return wf_matmul(scaled, wf_swapaxes(v, -1, -2));
}
static wf_array *build_solve(wf_array *const *in)
{
    return wf_linalg_solve(shifted(in[0], 3.0), in[1]);
}
static wf_array *build_qr_r(wf_array *const *in)
{
    wf_array *q = NULL, *r = NULL;
    return wf_linalg_qr(in[0], &q, &r) == WF_OK ? r : NULL;
}
static wf_array *build_svd_s(wf_array *const *in)
{
    wf_array *s = NULL;
    return wf_linalg_svd(in[0], NULL, &s, NULL) == WF_OK ? s : NULL;
}

/* inv, cholesky or eigh (kind 0, 1, 2: both outputs) of in[0]; releases
 * what it makes, so a run leaves nothing behind. */
static wf_status factor_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                             size_t *nout)
{
    (void)n;
    const int kind = *(const int *)payload;
    wf_status st = WF_OK;
    if (kind == 2)
        st = wf_linalg_eigh(in[0], false, &out[0], &out[1]);
    else
        out[0] = kind == 0 ? wf_linalg_inv(in[0]) : wf_linalg_cholesky(in[0], false);
    *nout = kind == 2 ? 2 : 1;
    return st == WF_OK && out[0] ? WF_OK : wf_last_error();
}

/* The vjp (cotangents u) or jvp (tangent t) of factor_body, for fault_sweep. */
typedef struct derivative_run {
    int kind;
    bool forward;
    wf_array *x, *t, *u[2];
} derivative_run;

static wf_status run_derivative(void *ctx, wf_array **outs)
{
    const derivative_run *r = ctx;
    wf_fn *fn = wf_fn_new(factor_body, (void *)&r->kind, NULL);
    size_t n = 2;
    wf_status st = !fn        ? wf_last_error()
                   : r->forward ? wf_jvp(fn, &r->x, 1, &r->t, NULL, outs, &n)
                                : wf_vjp(fn, &r->x, 1, r->u, r->kind == 2 ? 2 : 1, NULL, outs);
    wf_fn_release(fn);
    return st;
}

/* Every fallible operation of the vjp and jvp of inv, cholesky and eigh
 * (real and complex64) failed in turn: an error with its message or the unfailed derivatives,
 * and nothing left alive. */
static void test_derivatives_out_of_memory(void)
{
    const int64_t shape[2] = {3, 3};
    const double spd[9] = {4, 1, 0.5, 1, 3, 0.25, 0.5, 0.25, 2};
    const double sym[9] = {0.5, -1, 0.25, -1, 1, 0.75, 0.25, 0.75, -0.5};
    derivative_run r = {0, false, make(spd, shape, 2, WF_DTYPE_F64),
                        make(sym, shape, 2, WF_DTYPE_F64),
                        {make(sym, shape, 2, WF_DTYPE_F64), wf_ones(shape, 2, WF_DTYPE_F64)}};
    wf_array *all[4] = {r.x, r.t, r.u[0], r.u[1]};
    CHECK_OK(wf_eval(all, 4));
    const int64_t eigenvalues = 3;
    wf_array *u_w = wf_ones(&eigenvalues, 1, WF_DTYPE_F64);
    CHECK_OK(wf_eval(&u_w, 1));
    static const char *const names[3] = {"inv", "cholesky", "eigh"};
    for (r.kind = 0; r.kind < 3; r.kind++)
        for (int forward = 0; forward < 2; forward++) {
            r.forward = forward == 1;
            wf_array *u0 = r.u[0];
            if (r.kind == 2)
                r.u[0] = u_w;
            wf_array *want[FS_MAX_OUT] = {NULL};
            if (CHECK_OK(run_derivative(&r, want)))
                CHECK(fault_sweep(names[r.kind], run_derivative, &r, want, forward ? 2 : 1) > 0);
            for (int k = 0; k < FS_MAX_OUT; k++)
                wf_release(want[k]);
            r.u[0] = u0;
        }
    /* complex64 eigh: the Hermitian rules and the phase convention's */
    const zdouble herm[9] = {2, 1 - 0.5 * _Complex_I, 0.25 * _Complex_I, 1 + 0.5 * _Complex_I, 3,
                             0.5, -0.25 * _Complex_I, 0.5, 1};
    const zdouble dir[9] = {0.5, -1, 0.25 * _Complex_I, 1, _Complex_I, 0.75, 0.25, -0.5, 1};
    derivative_run c = {2, false, make_complex(herm, shape, 2), make_complex(dir, shape, 2),
                        {wf_astype(u_w, WF_DTYPE_F32), make_complex(dir, shape, 2)}};
    wf_array *call[4] = {c.x, c.t, c.u[0], c.u[1]};
    CHECK_OK(wf_eval(call, 4));
    for (int forward = 0; forward < 2; forward++) {
        c.forward = forward == 1;
        wf_array *want[FS_MAX_OUT] = {NULL};
        if (CHECK_OK(run_derivative(&c, want)))
            CHECK(fault_sweep("complex eigh", run_derivative, &c, want, forward ? 2 : 1) > 0);
        for (int k = 0; k < FS_MAX_OUT; k++)
            wf_release(want[k]);
    }
    for (int k = 0; k < 4; k++) {
        wf_release(all[k]);
        wf_release(call[k]);
    }
    wf_release(u_w);
}

static void check_transforms(const tu_case *c, bool grads)
{
    wf_scope_begin();
    wf_array *in[2];
    wf_array *t[2];
    for (int i = 0; i < c->nin; i++) {
        in[i] = tu_input(c->shapes[i], c->ndims[i], c->lo, c->hi, 40 + (uint32_t)i, i == 0);
        t[i] = tu_input(c->shapes[i], c->ndims[i], -1, 1, 50 + (uint32_t)i, false);
    }
    wf_array *y = c->build(in);
    if (CHECK_NOT_NULL(y)) {
        wf_array *u = tu_input(wf_array_shape(y), wf_array_ndim(y), -1, 1, 60, false);
        if (grads && (!tu_check_vjp(c, in, u, 1e-6, NULL) || !tu_check_jvp(c, in, t, 1e-6, NULL)))
            printf("      (%s)\n", c->name);
        int axes[2] = {0, 0};
        tu_check_vmap(c, axes, 3, 70);
        axes[0] = 1;
        axes[1] = WF_VMAP_NOT_MAPPED;
        tu_check_vmap(c, axes, 2, 71);
    }
    wf_scope_end();
}

static void test_transforms(void)
{
    const tu_case grads[] = {
        {"inv", build_inv, 1, {2}, {{4, 4}}, -1, 1},
        {"inv batched", build_inv, 1, {3}, {{2, 3, 3}}, -1, 1},
        {"tri_inv lower", build_tri_inv_lower, 1, {2}, {{4, 4}}, -1, 1},
        {"tri_inv upper", build_tri_inv_upper, 1, {2}, {{4, 4}}, -1, 1},
        {"cholesky lower", build_cholesky_lower, 1, {2}, {{4, 4}}, -1, 1},
        {"cholesky upper", build_cholesky_upper, 1, {3}, {{2, 3, 3}}, -1, 1},
        {"solve", build_solve, 2, {2, 2}, {{3, 3}, {3, 2}}, -1, 1},
        {"eigvalsh", build_eigvalsh, 1, {3}, {{2, 4, 4}}, -1, 1},
        {"eigh vectors", build_eigh_vectors, 1, {2}, {{3, 3}}, -1, 1},
    };
    for (size_t i = 0; i < sizeof grads / sizeof grads[0]; i++)
        check_transforms(&grads[i], true);
    /* no derivative rules, but vmap */
    const tu_case vmaps[] = {
        {"qr", build_qr_r, 1, {2}, {{4, 3}}, -1, 1},
        {"svd", build_svd_s, 1, {2}, {{3, 4}}, -1, 1},
    };
    for (size_t i = 0; i < sizeof vmaps / sizeof vmaps[0]; i++)
        check_transforms(&vmaps[i], false);
    /* and their derivatives are refused by name */
    wf_scope_begin();
    const int64_t s[2] = {3, 3};
    wf_array *x = tu_input(s, 2, -1, 1, 1, false);
    wf_fn *fn = tu_case_fn(&vmaps[0]);
    wf_array *ct = wf_ones(s, 2, WF_DTYPE_F64), *grad[1] = {NULL};
    CHECK_STATUS(wf_vjp(fn, &x, 1, &ct, 1, NULL, grad), WF_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(wf_last_error_message(), "linalg_qr");
    wf_fn_release(fn);
    wf_scope_end();
}

/* ---------------------------------------------------------------- complex eigh, svd */

/* count complex values, each part in [-1, 1), rounded to float32 (what
 * the complex64 input holds, so references use the same values). */
static zdouble *random_complex(int64_t count, uint32_t seed)
{
    zdouble *v = malloc((size_t)(count + 1) * sizeof *v);
    for (int64_t i = 0; i < count; i++) {
        const double re = noise(&seed);
        v[i] = (float)re + (float)noise(&seed) * _Complex_I;
    }
    return v;
}

/* A random n x n unitary q: Gram-Schmidt on a random matrix's columns. */
static void random_unitary(zdouble *q, int64_t n, uint32_t seed)
{
    zdouble *g = random_complex(n * n, seed);
    for (int64_t j = 0; j < n; j++) {
        for (int64_t i = 0; i < n; i++)
            q[i * n + j] = g[i * n + j];
        for (int pass = 0; pass < 2; pass++)
            for (int64_t c = 0; c < j; c++) {
                zdouble dot = 0.0;
                for (int64_t i = 0; i < n; i++)
                    dot += conj(q[i * n + c]) * q[i * n + j];
                for (int64_t i = 0; i < n; i++)
                    q[i * n + j] -= dot * q[i * n + c];
            }
        double norm2 = 0.0;
        for (int64_t i = 0; i < n; i++)
            norm2 += cabs(q[i * n + j]) * cabs(q[i * n + j]);
        for (int64_t i = 0; i < n; i++)
            q[i * n + j] /= sqrt(norm2);
    }
    free(g);
}

/* a = q diag(w) q^H (n x n). */
static void with_spectrum(const zdouble *q, const double *w, int64_t n, zdouble *a)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            zdouble s = 0.0;
            for (int64_t c = 0; c < n; c++)
                s += q[i * n + c] * w[c] * conj(q[j * n + c]);
            a[i * n + j] = s;
        }
}

/* The Hermitian matrix eigh reads from a's `upper` (else lower) triangle:
 * the other triangle the conjugate mirror, the diagonal's real part. */
static void hermitian_of(const zdouble *a, int64_t n, bool upper, zdouble *h)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            const bool read = i == j || (upper ? j > i : j < i);
            h[i * n + j] = i == j ? creal(a[i * n + i]) : read ? a[i * n + j] : conj(a[j * n + i]);
        }
}

/* max |x^H x - I| over the c columns of the r x c x (row stride `stride`). */
static double unitary_error(const zdouble *x, int64_t r, int64_t c, int64_t stride)
{
    double e = 0.0;
    for (int64_t p = 0; p < c; p++)
        for (int64_t q = 0; q < c; q++) {
            zdouble s = 0.0;
            for (int64_t i = 0; i < r; i++)
                s += conj(x[i * stride + p]) * x[i * stride + q];
            e = fmax(e, cabs(s - (p == q ? 1.0 : 0.0)));
        }
    return e;
}

/* Checks complex64 eigh of the batch of n x n a (Hermitian or not; the
 * `upper` / lower triangle is what counts): float32 ascending w, complex64
 * v with H v = v diag(w), v^H v = I, each column's largest component real
 * and positive, eigvalsh the same w; with `spectrum` (batch x n,
 * ascending) the eigenvalues against it. */
static void check_eigh_complex(const zdouble *a, int64_t batch, int64_t n, bool upper,
                               const double *spectrum)
{
    wf_scope_begin();
    const int64_t shape[3] = {batch, n, n};
    wf_array *x = make_complex(a, shape, 3);
    wf_array *w = NULL, *v = NULL, *w_only = NULL;
    CHECK_OK(wf_linalg_eigh(x, upper, &w, &v));
    CHECK_OK(wf_linalg_eigh(x, upper, &w_only, NULL));
    if (!CHECK_NOT_NULL(w) || !CHECK_NOT_NULL(v) || !CHECK_NOT_NULL(w_only)) {
        wf_scope_end();
        return;
    }
    CHECK(wf_array_dtype(w) == WF_DTYPE_F32 && wf_array_ndim(w) == 2 &&
          wf_array_dim(w, 0) == batch && wf_array_dim(w, 1) == n);
    CHECK(wf_array_ndim(v) == 3 && wf_array_dim(v, 1) == n && wf_array_dim(v, 2) == n);
    double *wv = conf_read(w), *wo = conf_read(w_only);
    zdouble *vv = read_complex(v, batch * n * n);
    zdouble *h = malloc((size_t)(n * n + 1) * sizeof *h);
    double residual = 0.0, unitary = 0.0, phase = 0.0, values = 0.0;
    for (int64_t t = 0; CHECK_NOT_NULL(vv) && t < batch; t++) {
        const zdouble *vt = vv + t * n * n;
        const double *wt = wv + t * n;
        hermitian_of(a + t * n * n, n, upper, h);
        double scale = 1.0;
        for (int64_t i = 0; i < n * n; i++)
            scale = fmax(scale, cabs(h[i]));
        for (int64_t k = 0; k < n; k++) {
            CHECK(k == 0 || wt[k - 1] <= wt[k]);
            CHECK(wo[t * n + k] == wt[k]);
            if (spectrum)
                values = fmax(values, fabs(wt[k] - spectrum[t * n + k]) / scale);
            double largest = 0.0;
            for (int64_t i = 0; i < n; i++) {
                zdouble hv = 0.0;
                for (int64_t j = 0; j < n; j++)
                    hv += h[i * n + j] * vt[j * n + k];
                residual = fmax(residual, cabs(hv - wt[k] * vt[i * n + k]) / scale);
                largest = fmax(largest, cabs(vt[i * n + k]));
            }
            /* a component of largest magnitude (to float32 rounding, which
             * may reorder near ties) is real and positive */
            double best = INFINITY;
            for (int64_t i = 0; i < n; i++)
                if (cabs(vt[i * n + k]) >= largest - 1e-6)
                    best = fmin(best, fabs(cimag(vt[i * n + k])) +
                                          (creal(vt[i * n + k]) > 0 ? 0.0 : 1.0));
            phase = fmax(phase, best);
        }
        unitary = fmax(unitary, unitary_error(vt, n, n, n));
    }
    const double tol = 1e-5 * (double)(n > 4 ? n : 4);
    if (!CHECK(residual <= tol && unitary <= tol && phase <= 1e-6 && values <= tol))
        printf("    complex eigh n=%lld upper=%d: |HV - VW| %.3g, |V^H V - I| %.3g, phase %.3g, "
               "spectrum %.3g\n",
               (long long)n, upper, residual, unitary, phase, values);
    free(h);
    free(vv);
    free(wv);
    free(wo);
    wf_scope_end();
}

/* batch matrices q diag(w) q^H with random unitary q and the ascending w
 * given (or random when w is NULL), checked against w. */
static void check_eigh_spectrum(int64_t batch, int64_t n, const double *given, bool upper)
{
    zdouble *a = malloc((size_t)(batch * n * n + 1) * sizeof *a);
    zdouble *q = malloc((size_t)(n * n + 1) * sizeof *q);
    double *w = malloc((size_t)(batch * n + 1) * sizeof *w);
    uint32_t seed = (uint32_t)(n * 3 + upper);
    for (int64_t t = 0; t < batch; t++) {
        for (int64_t k = 0; k < n; k++)
            w[t * n + k] = given ? given[k] : 4.0 * noise(&seed);
        for (int64_t k = 1; k < n; k++) /* insertion sort: n is small */
            for (int64_t j = k; j > 0 && w[t * n + j - 1] > w[t * n + j]; j--) {
                const double tmp = w[t * n + j];
                w[t * n + j] = w[t * n + j - 1];
                w[t * n + j - 1] = tmp;
            }
        random_unitary(q, n, seed + (uint32_t)t);
        with_spectrum(q, w + t * n, n, a + t * n * n);
        for (int64_t i = 0; i < n * n; i++) /* the values the complex64 input holds */
            a[t * n * n + i] = (float)creal(a[t * n * n + i]) +
                               (float)cimag(a[t * n * n + i]) * _Complex_I;
    }
    check_eigh_complex(a, batch, n, upper, w);
    free(w);
    free(q);
    free(a);
}

static void test_eigh_complex(void)
{
    const int64_t sizes[] = {1, 2, 3, 5, 8, BIG / 4};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int upper = 0; upper < 2; upper++)
            check_eigh_spectrum(3, sizes[s], NULL, upper);
    const double repeated[6] = {-2, -2, 1, 1, 1, 3}, all_equal[4] = {0.5, 0.5, 0.5, 0.5};
    check_eigh_spectrum(2, 6, repeated, false);
    check_eigh_spectrum(1, 4, all_equal, true);
    /* a non-Hermitian input (the diagonal with an imaginary part too): only
     * the chosen triangle counts; NaN in the other one changes nothing */
    for (int upper = 0; upper < 2; upper++) {
        const int64_t n = 5;
        zdouble *a = random_complex(2 * n * n, (uint32_t)(31 + upper));
        check_eigh_complex(a, 2, n, upper, NULL);
        for (int64_t t = 0; t < 2; t++)
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < n; j++)
                    if (upper ? j < i : j > i)
                        a[t * n * n + i * n + j] = NAN;
        check_eigh_complex(a, 2, n, upper, NULL);
        free(a);
    }
    wf_scope_begin();
    /* a strided (transposed) view: x^T's upper triangle is x's lower one,
     * transposed, so the Hermitian matrix read is the conjugate of x's and
     * the eigenvalues the same */
    const int64_t n5 = 5, s255[3] = {2, 5, 5};
    zdouble *g = random_complex(2 * n5 * n5, 41);
    wf_array *gx = make_complex(g, s255, 3), *w_lower = NULL, *w_view = NULL;
    CHECK_OK(wf_linalg_eigh(gx, false, &w_lower, NULL));
    CHECK_OK(wf_linalg_eigh(wf_swapaxes(gx, -1, -2), true, &w_view, NULL));
    double *wl = w_lower ? conf_read(w_lower) : NULL, *wt = w_view ? conf_read(w_view) : NULL;
    if (CHECK_NOT_NULL(wl) && CHECK_NOT_NULL(wt))
        CHECK(rel_err(wt, wl, 2 * n5) <= 1e-6);
    free(wl);
    free(wt);
    free(g);
    /* 1 x 1: the real part and the vector 1 */
    const zdouble one[1] = {2.5 + 7.0 * _Complex_I};
    const int64_t s11[2] = {1, 1};
    wf_array *w = NULL, *v = NULL;
    if (CHECK_OK(wf_linalg_eigh(make_complex(one, s11, 2), false, &w, &v))) {
        double *wv = conf_read(w);
        zdouble *vv = read_complex(v, 1);
        CHECK(wv && vv && wv[0] == 2.5 && vv[0] == 1.0);
        free(wv);
        free(vv);
    }
    /* a real matrix held as complex64: the float64 path's eigenvalues */
    const double sym[9] = {2, -1, 0.5, -1, 3, 0.25, 0.5, 0.25, -1};
    const zdouble sym_c[9] = {2, -1, 0.5, -1, 3, 0.25, 0.5, 0.25, -1};
    const int64_t s33[2] = {3, 3};
    wf_array *wr = NULL, *wc = NULL;
    CHECK_OK(wf_linalg_eigh(make(sym, s33, 2, WF_DTYPE_F64), false, &wr, NULL));
    CHECK_OK(wf_linalg_eigh(make_complex(sym_c, s33, 2), false, &wc, NULL));
    double *r = wr ? conf_read(wr) : NULL, *c = wc ? conf_read(wc) : NULL;
    if (CHECK_NOT_NULL(r) && CHECK_NOT_NULL(c))
        for (int i = 0; i < 3; i++)
            CHECK_NEAR(c[i], r[i], 1e-6);
    free(r);
    free(c);
    /* empty batches and empty matrices */
    const int64_t e0[3] = {0, 3, 3}, e1[3] = {2, 0, 0};
    CHECK_OK(wf_linalg_eigh(wf_zeros(e0, 3, WF_DTYPE_C64), true, &w, &v));
    CHECK(wf_array_dtype(w) == WF_DTYPE_F32 && wf_array_dim(w, 0) == 0 &&
          wf_array_dim(w, 1) == 3 && wf_array_dtype(v) == WF_DTYPE_C64 &&
          wf_array_dim(v, 2) == 3 && wf_eval(&v, 1) == WF_OK);
    CHECK_OK(wf_linalg_eigh(wf_zeros(e1, 3, WF_DTYPE_C64), false, &w, &v));
    CHECK(wf_array_dim(w, 0) == 2 && wf_array_dim(w, 1) == 0 && wf_eval(&w, 1) == WF_OK);
    wf_scope_end();
}

/* Checks the complex64 SVD of the batch of m x n a: complex64 U (m, m)
 * and Vt (n, n) unitary, float32 S (k) descending and non-negative, a =
 * U[:, :k] diag(S) Vt[:k, :], svdvals the same S; with `singular` (k per
 * matrix, descending) S against it. */
static void check_svd_complex(const zdouble *a, int64_t batch, int64_t m, int64_t n,
                              const double *singular)
{
    wf_scope_begin();
    const int64_t k = m < n ? m : n, shape[3] = {batch, m, n};
    wf_array *x = make_complex(a, shape, 3);
    wf_array *u = NULL, *s = NULL, *vt = NULL, *s_only = NULL;
    if (!CHECK_OK(wf_linalg_svd(x, &u, &s, &vt)) ||
        !CHECK_OK(wf_linalg_svd(x, NULL, &s_only, NULL))) {
        wf_scope_end();
        return;
    }
    CHECK(wf_array_dtype(u) == WF_DTYPE_C64 && wf_array_dim(u, 1) == m &&
          wf_array_dim(u, 2) == m);
    CHECK(wf_array_dtype(s) == WF_DTYPE_F32 && wf_array_ndim(s) == 2 && wf_array_dim(s, 1) == k);
    CHECK(wf_array_dtype(vt) == WF_DTYPE_C64 && wf_array_dim(vt, 1) == n &&
          wf_array_dim(vt, 2) == n);
    CHECK(wf_array_dtype(s_only) == WF_DTYPE_F32);
    zdouble *uv = read_complex(u, batch * m * m), *vv = read_complex(vt, batch * n * n);
    double *sv = conf_read(s), *so = conf_read(s_only);
    double rebuild = 0.0, unitary = 0.0, values = 0.0;
    for (int64_t t = 0; CHECK_NOT_NULL(uv) && CHECK_NOT_NULL(vv) && t < batch; t++) {
        const zdouble *ut = uv + t * m * m, *vtt = vv + t * n * n, *at = a + t * m * n;
        const double *st = sv + t * k;
        double scale = 1.0;
        for (int64_t i = 0; i < m * n; i++)
            scale = fmax(scale, cabs(at[i]));
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                zdouble acc = 0.0;
                for (int64_t c = 0; c < k; c++)
                    acc += ut[i * m + c] * st[c] * vtt[c * n + j];
                rebuild = fmax(rebuild, cabs(acc - at[i * n + j]) / scale);
            }
        for (int64_t c = 0; c < k; c++) {
            CHECK(st[c] >= 0 && (c == 0 || st[c - 1] >= st[c]));
            CHECK(so[t * k + c] == st[c]);
            if (singular)
                values = fmax(values, fabs(st[c] - singular[t * k + c]) / scale);
        }
        unitary = fmax(unitary, unitary_error(ut, m, m, m));
        zdouble *v = malloc((size_t)(n * n + 1) * sizeof *v); /* Vt^H: V's columns */
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++)
                v[i * n + j] = conj(vtt[j * n + i]);
        unitary = fmax(unitary, unitary_error(v, n, n, n));
        free(v);
    }
    const double wide = (double)(m > n ? m : n), tol = 1e-5 * (wide > 4 ? wide : 4);
    if (!CHECK(rebuild <= tol && unitary <= tol && values <= tol))
        printf("    complex svd %lldx%lld: |USVt - a| %.3g, unitary %.3g, values %.3g\n",
               (long long)m, (long long)n, rebuild, unitary, values);
    free(uv);
    free(vv);
    free(sv);
    free(so);
    wf_scope_end();
}

/* a = p[:, :r] diag(sigma) q[:, :r]^H with random unitary p (m x m), q
 * (n x n) and sigma (r = rank of them, descending), the rest of the k
 * singular values zero. */
static void check_svd_known(int64_t batch, int64_t m, int64_t n, int64_t rank)
{
    const int64_t k = m < n ? m : n;
    zdouble *a = malloc((size_t)(batch * m * n + 1) * sizeof *a);
    zdouble *p = malloc((size_t)(m * m + 1) * sizeof *p), *q = malloc((size_t)(n * n + 1) * sizeof *q);
    double *sigma = malloc((size_t)(batch * k + 1) * sizeof *sigma);
    for (int64_t t = 0; t < batch; t++) {
        random_unitary(p, m, (uint32_t)(m * 7 + t));
        random_unitary(q, n, (uint32_t)(n * 11 + t + 5));
        for (int64_t c = 0; c < k; c++)
            sigma[t * k + c] = c < rank ? 3.0 - (double)c * 2.5 / (double)(rank > 1 ? rank : 1) : 0.0;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                zdouble s = 0.0;
                for (int64_t c = 0; c < rank; c++)
                    s += p[i * m + c] * sigma[t * k + c] * conj(q[j * n + c]);
                a[t * m * n + i * n + j] = (float)creal(s) + (float)cimag(s) * _Complex_I;
            }
    }
    check_svd_complex(a, batch, m, n, sigma);
    free(sigma);
    free(q);
    free(p);
    free(a);
}

static void test_svd_complex(void)
{
    const int64_t sizes[][2] = {{1, 1}, {3, 3}, {4, 3}, {3, 4}, {6, 2}, {2, 6}, {1, 4}, {5, 1}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const int64_t m = sizes[i][0], n = sizes[i][1], k = m < n ? m : n;
        zdouble *a = random_complex(3 * m * n, (uint32_t)(m * 17 + n));
        check_svd_complex(a, 3, m, n, NULL);
        free(a);
        check_svd_known(2, m, n, k);
        if (k > 1)
            check_svd_known(2, m, n, k - 1); /* rank-deficient */
    }
    check_svd_known(1, 6, 6, 1);
    check_svd_known(1, BIG / 2, BIG / 3, BIG / 3);
    check_svd_known(1, BIG / 3, BIG / 2, 2);
    zdouble zero[6] = {0};
    check_svd_complex(zero, 1, 2, 3, NULL);
    /* empty batches; U and Vt identities with one side zero */
    wf_scope_begin();
    const int64_t e0[3] = {0, 3, 2}, e1[2] = {0, 4};
    wf_array *u = NULL, *s = NULL, *vt = NULL;
    CHECK_OK(wf_linalg_svd(wf_zeros(e0, 3, WF_DTYPE_C64), &u, &s, &vt));
    CHECK(wf_array_dtype(s) == WF_DTYPE_F32 && wf_array_dim(s, 0) == 0 &&
          wf_array_dim(s, 1) == 2 && wf_array_dim(u, 2) == 3 && wf_array_dim(vt, 2) == 2 &&
          wf_eval(&u, 1) == WF_OK);
    if (CHECK_OK(wf_linalg_svd(wf_zeros(e1, 2, WF_DTYPE_C64), &u, &s, &vt))) {
        zdouble *vv = read_complex(vt, 16);
        for (int64_t i = 0; vv && i < 16; i++)
            CHECK(vv[i] == (i % 5 == 0 ? 1.0 : 0.0));
        free(vv);
    }
    wf_scope_end();
}

/* eigvalsh, eigh's vectors and the SVD of complex64 inputs made from a
 * float64 x (x + i x^T: not Hermitian, the triangle read decides), for
 * vmap; complex64 eigh refuses derivatives. */
static wf_array *complex_of(wf_array *x) { return wf_complex(x, wf_swapaxes(x, -1, -2)); }
static wf_array *build_complex_eigvalsh(wf_array *const *in)
{
    wf_array *w = NULL;
    return wf_linalg_eigh(complex_of(in[0]), true, &w, NULL) == WF_OK ? w : NULL;
}
/* V's parts side by side (the phase convention makes V itself defined) */
static wf_array *build_complex_eigh_vectors(wf_array *const *in)
{
    wf_array *w = NULL, *v = NULL;
    if (wf_linalg_eigh(complex_of(in[0]), false, &w, &v) != WF_OK)
        return NULL;
    wf_array *parts[2] = {wf_real(v), wf_imag(v)};
    return wf_concatenate(parts, 2, -1);
}
static wf_array *build_complex_svd(wf_array *const *in)
{
    wf_array *u = NULL, *s = NULL, *vt = NULL;
    if (wf_linalg_svd(complex_of(in[0]), &u, &s, &vt) != WF_OK)
        return NULL;
    wf_array *parts[3] = {wf_real(vt), wf_imag(vt), wf_expand_dims(s, (int[]){-2}, 1)};
    return wf_concatenate(parts, 3, -2);
}

static void test_complex_transforms(void)
{
    const tu_case cases[] = {
        {"complex eigvalsh", build_complex_eigvalsh, 1, {2}, {{4, 4}}, -1, 1},
        {"complex eigh vectors", build_complex_eigh_vectors, 1, {3}, {{2, 3, 3}}, -1, 1},
        {"complex svd", build_complex_svd, 1, {2}, {{3, 3}}, -1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_transforms(&cases[i], false);
}

/* Real losses of complex64 eigh, for its derivatives: of (a + a^H) / 2
 * (so a perturbation anywhere in a moves the Hermitian matrix read),
 * kind 0 sum(u o w), 1 sum(u1 o Re V + u2 o Im V) (depends on the
 * eigenvectors' phases: the phase convention's derivative counts), 2 the
 * same of V diag(w^2) V^H (phase-free); `upper` picks the triangle read. */
typedef struct eigh_loss {
    int kind;
    bool upper;
    wf_array *u, *u1, *u2;
} eigh_loss;

static wf_status eigh_loss_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                size_t *nout)
{
    (void)n;
    const eigh_loss *l = payload;
    wf_array *h = wf_multiply(wf_add(in[0], wf_conjugate(wf_swapaxes(in[0], -1, -2))),
                              wf_scalar(0.5, WF_DTYPE_F32));
    wf_array *w = NULL, *v = NULL;
    *nout = 1;
    if (wf_linalg_eigh(h, l->upper, &w, l->kind == 0 ? NULL : &v) != WF_OK)
        return wf_last_error();
    if (l->kind == 0) {
        out[0] = wf_sum(wf_multiply(w, l->u), NULL, 0, false);
    } else {
        const int axis = -2;
        wf_array *m = l->kind == 1 ? v
                                   : wf_matmul(wf_multiply(v, wf_expand_dims(wf_square(w), &axis, 1)),
                                               wf_conjugate(wf_swapaxes(v, -1, -2)));
        out[0] = wf_sum(wf_add(wf_multiply(wf_real(m), l->u1), wf_multiply(wf_imag(m), l->u2)),
                        NULL, 0, false);
    }
    return out[0] ? WF_OK : wf_last_error();
}

static double eigh_loss_at(wf_fn *fn, const zdouble *a, int64_t n)
{
    wf_scope_begin();
    const int64_t shape[2] = {n, n};
    wf_array *x = make_complex(a, shape, 2), *y = NULL;
    size_t nout = 1;
    double value = NAN;
    if (CHECK_OK(wf_fn_call(fn, &x, 1, &y, &nout))) {
        double *v = conf_read(y);
        value = v ? v[0] : NAN;
        free(v);
        wf_release(y);
    }
    wf_scope_end();
    return value;
}

/* vjp and jvp of complex64 eigh (MLX's convention: a real loss's gradient
 * g has dL = Re sum(conj(g) o da)) against central differences of the
 * loss, in float32 (the step is large enough for float32 rounding). */
static void check_eigh_complex_derivatives(int kind, bool upper)
{
    wf_scope_begin();
    enum { N = 4 };
    const double step = 2e-3;
    const int64_t shape[2] = {N, N}, vec[1] = {N};
    double *r = random_matrices(3 * N * N + N, (uint32_t)(91 + kind * 2 + upper));
    eigh_loss loss = {kind, upper, conf_array(r + 3 * N * N, vec, 1, WF_DTYPE_F32),
                      conf_array(r, shape, 2, WF_DTYPE_F32),
                      conf_array(r + N * N, shape, 2, WF_DTYPE_F32)};
    zdouble *a = random_complex(N * N, (uint32_t)(17 + kind)), *t = random_complex(N * N, 5);
    wf_fn *fn = wf_fn_new(eigh_loss_body, &loss, NULL);
    wf_array *x = make_complex(a, shape, 2), *tx = make_complex(t, shape, 2);
    wf_array *one = wf_scalar(1.0, WF_DTYPE_F32), *grad = NULL, *tangent = NULL, *y = NULL;
    size_t nout = 1;
    CHECK_OK(wf_vjp(fn, &x, 1, &one, 1, NULL, &grad));
    CHECK_OK(wf_jvp(fn, &x, 1, &tx, &y, &tangent, &nout));
    zdouble *g = grad ? read_complex(grad, N * N) : NULL;
    double *jv = tangent ? conf_read(tangent) : NULL;
    if (CHECK_NOT_NULL(g) && CHECK_NOT_NULL(jv)) {
        double worst = 0.0, scale = 1.0;
        zdouble *moved = malloc(N * N * sizeof *moved);
        for (int64_t k = 0; k < N * N; k++)
            for (int part = 0; part < 2; part++) { /* d/d Re a_k = Re g_k, d/d Im a_k = Im g_k */
                const zdouble dir = part ? step * _Complex_I : step;
                double l[2];
                for (int sgn = 0; sgn < 2; sgn++) {
                    memcpy(moved, a, N * N * sizeof *moved);
                    moved[k] += sgn ? -dir : dir;
                    l[sgn] = eigh_loss_at(fn, moved, N);
                }
                const double fd = (l[0] - l[1]) / (2 * step), want = part ? cimag(g[k]) : creal(g[k]);
                worst = fmax(worst, fabs(fd - want));
                scale = fmax(scale, fabs(want));
            }
        double l[2];
        for (int sgn = 0; sgn < 2; sgn++) {
            for (int64_t k = 0; k < N * N; k++)
                moved[k] = a[k] + (sgn ? -step : step) * t[k];
            l[sgn] = eigh_loss_at(fn, moved, N);
        }
        const double fd = (l[0] - l[1]) / (2 * step);
        if (!CHECK(worst <= 2e-3 * scale && fabs(fd - jv[0]) <= 2e-3 * fmax(1.0, fabs(fd))))
            printf("    complex eigh loss %d upper=%d: |vjp - fd| %.3g (scale %.3g), jvp %.6g vs "
                   "fd %.6g\n",
                   kind, upper, worst, scale, jv[0], fd);
        free(moved);
    }
    free(g);
    free(jv);
    free(a);
    free(t);
    free(r);
    wf_fn_release(fn);
    wf_scope_end();
}

static void test_eigh_complex_derivatives(void)
{
    for (int kind = 0; kind < 3; kind++)
        for (int upper = 0; upper < 2; upper++)
            check_eigh_complex_derivatives(kind, upper);
}

/* Every matrix of a batch is computed by one thread on its own, so the
 * bits cannot depend on the thread count or the split: a batch of 6 (split
 * over the pool) gives, twice, the bits of each matrix computed alone. */
static void test_complex_deterministic(void)
{
    wf_scope_begin();
    enum { BATCH = 6, N = 7, M = 5 };
    zdouble *a = random_complex(BATCH * N * N, 77);
    const int64_t shape[3] = {BATCH, N, N}, one[3] = {1, N, N}, steps[3] = {1, 1, 1};
    /* per matrix: w (N floats), v (N x N complex), S of its N x M top (M floats) */
    enum { PER = N + 2 * N * N + M };
    float *batched[2] = {malloc(BATCH * PER * sizeof(float)), malloc(BATCH * PER * sizeof(float))};
    float *alone = malloc(BATCH * PER * sizeof(float));
    for (int pass = 0; pass < 3; pass++)
        for (int64_t t = 0; t < (pass < 2 ? 1 : BATCH); t++) {
            const bool single = pass == 2;
            wf_array *x = make_complex(a + (single ? t * N * N : 0), single ? one : shape, 3);
            const int64_t starts[3] = {0, 0, 0}, stops[3] = {single ? 1 : BATCH, N, M};
            wf_array *top = wf_slice(x, starts, stops, steps); /* strided: N x M of each */
            wf_array *w = NULL, *v = NULL, *s = NULL;
            CHECK_OK(wf_linalg_eigh(x, true, &w, &v));
            CHECK_OK(wf_linalg_svd(top, NULL, &s, NULL));
            const int64_t count = single ? 1 : BATCH;
            float *buf = malloc((size_t)(count * PER) * sizeof(float));
            CHECK_OK(wf_array_copy_to(w, buf, (size_t)(count * N) * sizeof(float)));
            CHECK_OK(wf_array_copy_to(v, buf + count * N, (size_t)(count * 2 * N * N) * sizeof(float)));
            CHECK_OK(wf_array_copy_to(s, buf + count * (N + 2 * N * N),
                                      (size_t)(count * M) * sizeof(float)));
            float *dst = single ? alone : batched[pass];
            for (int64_t b = 0; b < count; b++) { /* regroup per matrix */
                const int64_t to = (single ? t : b) * PER;
                memcpy(dst + to, buf + b * N, N * sizeof(float));
                memcpy(dst + to + N, buf + count * N + b * 2 * N * N, 2 * N * N * sizeof(float));
                memcpy(dst + to + N + 2 * N * N, buf + count * (N + 2 * N * N) + b * M,
                       M * sizeof(float));
            }
            free(buf);
        }
    CHECK(memcmp(batched[0], batched[1], BATCH * PER * sizeof(float)) == 0);
    CHECK(memcmp(batched[0], alone, BATCH * PER * sizeof(float)) == 0);
    free(batched[0]);
    free(batched[1]);
    free(alone);
    free(a);
    wf_scope_end();
}

static void test_complex_errors(void)
{
    wf_scope_begin();
    const int64_t s3[1] = {3}, s23[2] = {2, 3}, s22[2] = {2, 2};
    wf_array *w = (wf_array *)1, *v = (wf_array *)1;
    CHECK_STATUS(wf_linalg_eigh(wf_zeros(s3, 1, WF_DTYPE_C64), false, &w, &v), WF_ERR_SHAPE);
    CHECK(w == NULL && v == NULL);
    CHECK_STATUS(wf_linalg_eigh(wf_zeros(s23, 2, WF_DTYPE_C64), false, &w, NULL), WF_ERR_SHAPE);
    CHECK_STR_CONTAINS(wf_last_error_message(), "square");
    wf_array *u = (wf_array *)1, *s = (wf_array *)1, *vt = (wf_array *)1;
    CHECK_STATUS(wf_linalg_svd(wf_zeros(s3, 1, WF_DTYPE_C64), &u, &s, &vt), WF_ERR_SHAPE);
    CHECK(u == NULL && s == NULL && vt == NULL);
    CHECK_STATUS(wf_linalg_eigh(wf_zeros(s22, 2, WF_DTYPE_I32), false, &w, &v), WF_ERR_DTYPE);
    CHECK_STR_CONTAINS(wf_last_error_message(), "float32, float64 or complex64");
    CHECK_STATUS(wf_linalg_svd(wf_zeros(s22, 2, WF_DTYPE_F16), NULL, &s, NULL), WF_ERR_DTYPE);
    CHECK_STR_CONTAINS(wf_last_error_message(), "complex64");
    /* the factorizations MLX keeps real stay real */
    CHECK_NULL_WITH(wf_linalg_cholesky(wf_zeros(s22, 2, WF_DTYPE_C64), false), WF_ERR_DTYPE);
    wf_array *q = (wf_array *)1, *r = (wf_array *)1;
    CHECK_STATUS(wf_linalg_qr(wf_zeros(s22, 2, WF_DTYPE_C64), &q, &r), WF_ERR_DTYPE);
    wf_scope_end();
}

int main(void)
{
    RUN_TEST(test_inverses);
    RUN_TEST(test_derivatives_out_of_memory);
    RUN_TEST(test_singular);
    RUN_TEST(test_eig);
    RUN_TEST(test_eig_extreme_range);
    RUN_TEST(test_ill_conditioned);
    RUN_TEST(test_lu_qr);
    RUN_TEST(test_eigh_svd);
    RUN_TEST(test_solves);
    RUN_TEST(test_empty_and_errors);
    RUN_TEST(test_transforms);
    RUN_TEST(test_eigh_complex);
    RUN_TEST(test_svd_complex);
    RUN_TEST(test_complex_transforms);
    RUN_TEST(test_eigh_complex_derivatives);
    RUN_TEST(test_complex_deterministic);
    RUN_TEST(test_complex_errors);
    return TEST_SUMMARY();
}
