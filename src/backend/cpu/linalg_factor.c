/*
 * CPU kernels of the matrix factorizations (prim/linalg_factor.h): every
 * matrix of the batch is loaded into a row-major double workspace,
 * factored there and stored, packed, in the output's dtype. Matrices of
 * the batch run in parallel on the intra-op pool.
 *
 * Algorithms: Cholesky-Banachiewicz; LU with partial pivoting (inverse by
 * LU and two triangular solves per column); Householder QR with Q formed
 * from the reflectors; cyclic Jacobi rotations for eigh; one-sided
 * (Hestenes) Jacobi for the SVD, with U completed to a square orthonormal
 * basis by Gram-Schmidt on the coordinate vectors. complex64 eigh and SVD
 * load into complex doubles and run the same methods with complex
 * rotations (linalg_hermitian.c); eig is linalg_eig.c's.
 */
#include <complex.h>
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "core/error.h"
#include "prim/linalg_factor.h"
#include "runtime/pool.h"
#include "util/fault.h"

enum { MAX_SWEEPS = 64 };

typedef struct factor_job {
    const wf_array *a;
    wf_array *out;
    int kind;
    bool upper;
    int64_t m, n;      /* the input matrices */
    int64_t rows, cols; /* the packed output matrices */
    size_t work;       /* doubles of workspace per matrix */
    atomic_bool out_of_memory; /* set by any chunk */
    atomic_bool singular;      /* an inverse met a zero pivot */
    atomic_bool diverged;      /* eig's QR iteration did not converge */
} factor_job;

/* ---------------------------------------------------------------- load / store */

static int64_t batch_offset(const wf_array *x, int64_t b)
{
    int64_t off = 0;
    for (int d = x->ndim - 3; d >= 0; d--) {
        off += (b % x->shape[d]) * x->strides[d];
        b /= x->shape[d];
    }
    return off;
}

/* Matrix b of the input into w (m x n, row-major), transposed if asked. */
static void load(const factor_job *job, int64_t b, double *w, bool transpose)
{
    const wf_array *a = job->a;
    const int64_t rs = a->strides[a->ndim - 2], cs = a->strides[a->ndim - 1];
    const int64_t base = batch_offset(a, b);
    const int64_t m = job->m, n = job->n;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            const int64_t at = base + i * rs + j * cs;
            const double v = a->dtype == WF_DTYPE_F64 ? ((const double *)wf__array_data_ptr(a))[at]
                                                      : ((const float *)wf__array_data_ptr(a))[at];
            w[transpose ? j * m + i : i * n + j] = v;
        }
}

/* The output's packed matrix b: element (i, j) at out + i * cols + j. */
typedef struct packed {
    char *data;
    int64_t cols;
    bool f64;
} packed;

static packed packed_of(const factor_job *job, int64_t b)
{
    const size_t item = job->out->dtype == WF_DTYPE_F64 ? sizeof(double) : sizeof(float);
    packed p = {(char *)wf__array_data_ptr(job->out) + (size_t)(b * job->rows * job->cols) * item,
                job->cols, job->out->dtype == WF_DTYPE_F64};
    return p;
}

static void put(packed p, int64_t i, int64_t j, double v)
{
    if (p.f64)
        ((double *)p.data)[i * p.cols + j] = v;
    else
        ((float *)p.data)[i * p.cols + j] = (float)v;
}

/* Stores the r x c row-major w at (row0, 0), transposed if asked. */
static void store(packed p, int64_t row0, const double *w, int64_t r, int64_t c, bool transpose)
{
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++)
            put(p, row0 + i, j, transpose ? w[j * r + i] : w[i * c + j]);
}

static void fill_nan(packed p, int64_t r, int64_t c)
{
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++)
            put(p, i, j, NAN);
}

/* ---------------------------------------------------------------- Cholesky */

/* Lower Cholesky factor of the n x n a (its lower triangle read) into l
 * (upper triangle zero). A pivot at or below zero but within `eps` (the
 * result dtype's, times n) of the largest diagonal entry is rounding of a
 * semi-definite matrix: it is raised to that rounding level, so the factor
 * stays finite and L L^T = a to the dtype's precision (what LAPACK gets
 * when it factors in that precision). False, when a pivot is clearly
 * negative or not finite: a is not positive (semi-)definite. */
static bool cholesky(const double *a, double *l, int64_t n, double eps)
{
    double scale = 0.0;
    for (int64_t j = 0; j < n; j++)
        scale = fmax(scale, fabs(a[j * n + j]));
    const double rounding = (double)n * eps * scale;
    memset(l, 0, (size_t)(n * n) * sizeof *l);
    for (int64_t j = 0; j < n; j++) {
        double d = a[j * n + j];
        for (int64_t k = 0; k < j; k++)
            d -= l[j * n + k] * l[j * n + k];
        if (!isfinite(d) || d < -rounding || (d <= 0.0 && rounding == 0.0))
            return false;
        const double ljj = sqrt(d > rounding ? d : rounding);
        l[j * n + j] = ljj;
        for (int64_t i = j + 1; i < n; i++) {
            double s = a[i * n + j];
            for (int64_t k = 0; k < j; k++)
                s -= l[i * n + k] * l[j * n + k];
            l[i * n + j] = s / ljj;
        }
    }
    return true;
}

/* ---------------------------------------------------------------- triangular inverse */

/* Inverse of the lower triangle of the n x n l into x (upper zero).
 * False, x unset, when a diagonal entry is zero (singular). */
static bool lower_inverse(const double *l, double *x, int64_t n)
{
    for (int64_t j = 0; j < n; j++)
        if (l[j * n + j] == 0.0)
            return false;
    memset(x, 0, (size_t)(n * n) * sizeof *x);
    for (int64_t j = 0; j < n; j++) {
        x[j * n + j] = 1.0 / l[j * n + j];
        for (int64_t i = j + 1; i < n; i++) {
            double s = 0.0;
            for (int64_t k = j; k < i; k++)
                s += l[i * n + k] * x[k * n + j];
            x[i * n + j] = -s / l[i * n + i];
        }
    }
    return true;
}

/* ---------------------------------------------------------------- LU */

/* In-place LU with partial pivoting of the m x n a: L below the diagonal
 * (unit diagonal implied), U on and above; piv[j] the row swapped with row
 * j at step j (k = min(m, n) steps). A zero pivot column is left as is. */
static void lu_factor(double *a, int64_t m, int64_t n, int64_t *piv)
{
    const int64_t k = m < n ? m : n;
    for (int64_t j = 0; j < k; j++) {
        int64_t p = j;
        for (int64_t i = j + 1; i < m; i++)
            if (fabs(a[i * n + j]) > fabs(a[p * n + j]))
                p = i;
        piv[j] = p;
        if (p != j)
            for (int64_t c = 0; c < n; c++) {
                const double t = a[j * n + c];
                a[j * n + c] = a[p * n + c];
                a[p * n + c] = t;
            }
        const double d = a[j * n + j];
        if (d == 0.0)
            continue;
        for (int64_t i = j + 1; i < m; i++) {
            const double f = a[i * n + j] /= d;
            if (f != 0.0)
                for (int64_t c = j + 1; c < n; c++)
                    a[i * n + c] -= f * a[j * n + c];
        }
    }
}

/* Inverse of the n x n a (overwritten by its LU) into x; piv has n
 * entries. False, x unset, when U has a zero pivot (a is singular, as
 * LAPACK's getrf reports it: an exact zero, not a small one). */
static bool lu_inverse(double *a, double *x, int64_t n, int64_t *piv)
{
    lu_factor(a, n, n, piv);
    for (int64_t j = 0; j < n; j++)
        if (a[j * n + j] == 0.0)
            return false;
    memset(x, 0, (size_t)(n * n) * sizeof *x);
    for (int64_t i = 0; i < n; i++)
        x[i * n + i] = 1.0;
    for (int64_t j = 0; j < n; j++) /* the same row swaps on the identity */
        if (piv[j] != j)
            for (int64_t c = 0; c < n; c++) {
                const double t = x[j * n + c];
                x[j * n + c] = x[piv[j] * n + c];
                x[piv[j] * n + c] = t;
            }
    for (int64_t i = 0; i < n; i++) /* forward: L y = P e, row-wise over all columns */
        for (int64_t k = 0; k < i; k++) {
            const double f = a[i * n + k];
            if (f != 0.0)
                for (int64_t c = 0; c < n; c++)
                    x[i * n + c] -= f * x[k * n + c];
        }
    for (int64_t i = n - 1; i >= 0; i--) { /* backward: U x = y */
        for (int64_t k = i + 1; k < n; k++) {
            const double f = a[i * n + k];
            if (f != 0.0)
                for (int64_t c = 0; c < n; c++)
                    x[i * n + c] -= f * x[k * n + c];
        }
        const double d = a[i * n + i];
        for (int64_t c = 0; c < n; c++)
            x[i * n + c] /= d;
    }
    return true;
}

/* ---------------------------------------------------------------- QR */

/* Householder QR of the m x n a (overwritten: R on and above the
 * diagonal). Writes Q (m x k) to q; v is m doubles of scratch per step
 * kept in vs (k x m). */
static void householder_qr(double *a, int64_t m, int64_t n, double *q, double *vs)
{
    const int64_t k = m < n ? m : n;
    for (int64_t j = 0; j < k; j++) {
        double *v = vs + j * m;
        double norm2 = 0.0;
        for (int64_t i = j; i < m; i++)
            norm2 += a[i * n + j] * a[i * n + j];
        const double norm = sqrt(norm2);
        memset(v, 0, (size_t)m * sizeof *v);
        if (norm == 0.0)
            continue; /* v = 0: the identity reflector */
        const double alpha = a[j * n + j] > 0 ? -norm : norm;
        for (int64_t i = j; i < m; i++)
            v[i] = a[i * n + j];
        v[j] -= alpha;
        double vnorm2 = 0.0;
        for (int64_t i = j; i < m; i++)
            vnorm2 += v[i] * v[i];
        const double scale = 1.0 / sqrt(vnorm2);
        for (int64_t i = j; i < m; i++)
            v[i] *= scale;
        for (int64_t c = j; c < n; c++) { /* a -= 2 v (v^T a) */
            double dot = 0.0;
            for (int64_t i = j; i < m; i++)
                dot += v[i] * a[i * n + c];
            for (int64_t i = j; i < m; i++)
                a[i * n + c] -= 2.0 * dot * v[i];
        }
        for (int64_t i = j + 1; i < m; i++)
            a[i * n + j] = 0.0;
    }
    memset(q, 0, (size_t)(m * k) * sizeof *q);
    for (int64_t i = 0; i < k; i++)
        q[i * k + i] = 1.0;
    for (int64_t j = k - 1; j >= 0; j--) { /* Q = H_0 ... H_{k-1} I[:, :k] */
        const double *v = vs + j * m;
        for (int64_t c = 0; c < k; c++) {
            double dot = 0.0;
            for (int64_t i = j; i < m; i++)
                dot += v[i] * q[i * k + c];
            for (int64_t i = j; i < m; i++)
                q[i * k + c] -= 2.0 * dot * v[i];
        }
    }
}

/* ---------------------------------------------------------------- eigh */

/* Cyclic Jacobi on the symmetric n x n a (overwritten; the eigenvalues end
 * on its diagonal); v gets the eigenvectors as columns. The rotated pair
 * (p, q) is set to exactly 0 (its value in exact arithmetic). An entry
 * below eps * sqrt(|a_pp a_qq|), or below eps times a's norm (moving the
 * eigenvalues by no more than that, Weyl), is rounding: it is zeroed
 * instead of rotated, and the sweeps stop once one rotates nothing. */
static void jacobi_eigh(double *a, double *v, int64_t n)
{
    memset(v, 0, (size_t)(n * n) * sizeof *v);
    double norm2 = 0.0;
    for (int64_t i = 0; i < n; i++) {
        v[i * n + i] = 1.0;
        for (int64_t j = 0; j < n; j++)
            norm2 += a[i * n + j] * a[i * n + j];
    }
    const double negligible = sqrt(norm2) * DBL_EPSILON;
    for (int sweep = 0; sweep < MAX_SWEEPS; sweep++) {
        bool rotated = false;
        for (int64_t p = 0; p < n - 1; p++)
            for (int64_t q = p + 1; q < n; q++) {
                const double apq = a[p * n + q];
                if (apq == 0.0)
                    continue;
                if (fabs(apq) <= negligible ||
                    fabs(apq) <= DBL_EPSILON * sqrt(fabs(a[p * n + p] * a[q * n + q]))) {
                    a[p * n + q] = a[q * n + p] = 0.0;
                    continue;
                }
                rotated = true;
                const double theta = (a[q * n + q] - a[p * n + p]) / (2.0 * apq);
                const double t = (theta >= 0 ? 1.0 : -1.0) /
                                 (fabs(theta) + sqrt(theta * theta + 1.0));
                const double c = 1.0 / sqrt(t * t + 1.0), s = t * c;
                for (int64_t k = 0; k < n; k++) { /* columns p, q */
                    const double akp = a[k * n + p], akq = a[k * n + q];
                    a[k * n + p] = c * akp - s * akq;
                    a[k * n + q] = s * akp + c * akq;
                }
                for (int64_t k = 0; k < n; k++) { /* rows p, q */
                    const double apk = a[p * n + k], aqk = a[q * n + k];
                    a[p * n + k] = c * apk - s * aqk;
                    a[q * n + k] = s * apk + c * aqk;
                }
                a[p * n + q] = a[q * n + p] = 0.0;
                for (int64_t k = 0; k < n; k++) {
                    const double vkp = v[k * n + p], vkq = v[k * n + q];
                    v[k * n + p] = c * vkp - s * vkq;
                    v[k * n + q] = s * vkp + c * vkq;
                }
            }
        if (!rotated)
            break;
    }
}

/* Insertion sort: n is a matrix side and the keys nearly sorted after
 * Jacobi. */
void wf__cpu_order_by(const double *key, int64_t *idx, int64_t n, bool descending)
{
    for (int64_t i = 0; i < n; i++)
        idx[i] = i;
    for (int64_t i = 1; i < n; i++) {
        const int64_t t = idx[i];
        int64_t j = i;
        while (j > 0 && (descending ? key[idx[j - 1]] < key[t] : key[idx[j - 1]] > key[t])) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = t;
    }
}

/* ---------------------------------------------------------------- SVD */

/* One-sided Jacobi on the m x n w (m >= n): orthogonalizes w's columns,
 * accumulating the rotations in v (n x n). Afterwards column j of w is
 * s_j u_j. */
static void one_sided_jacobi(double *w, double *v, int64_t m, int64_t n)
{
    memset(v, 0, (size_t)(n * n) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i * n + i] = 1.0;
    for (int sweep = 0; sweep < MAX_SWEEPS; sweep++) {
        bool rotated = false;
        for (int64_t p = 0; p < n - 1; p++)
            for (int64_t q = p + 1; q < n; q++) {
                double alpha = 0.0, beta = 0.0, gamma = 0.0;
                for (int64_t i = 0; i < m; i++) {
                    const double wp = w[i * n + p], wq = w[i * n + q];
                    alpha += wp * wp;
                    beta += wq * wq;
                    gamma += wp * wq;
                }
                if (gamma == 0.0 || fabs(gamma) <= DBL_EPSILON * sqrt(alpha * beta))
                    continue;
                rotated = true;
                const double zeta = (beta - alpha) / (2.0 * gamma);
                const double t = (zeta >= 0 ? 1.0 : -1.0) /
                                 (fabs(zeta) + sqrt(1.0 + zeta * zeta));
                const double c = 1.0 / sqrt(1.0 + t * t), s = c * t;
                for (int64_t i = 0; i < m; i++) {
                    const double wp = w[i * n + p], wq = w[i * n + q];
                    w[i * n + p] = c * wp - s * wq;
                    w[i * n + q] = s * wp + c * wq;
                }
                for (int64_t i = 0; i < n; i++) {
                    const double vp = v[i * n + p], vq = v[i * n + q];
                    v[i * n + p] = c * vp - s * vq;
                    v[i * n + q] = s * vp + c * vq;
                }
            }
        if (!rotated)
            break;
    }
}

/* Makes column j of the m x m u a unit vector orthogonal to columns
 * [0, j): the coordinate vector with the largest residual, orthogonalized
 * twice. */
static void complete_column(double *u, int64_t m, int64_t j, double *tmp)
{
    double best = -1.0;
    for (int64_t e = 0; e < m; e++) {
        for (int64_t i = 0; i < m; i++)
            tmp[i] = i == e ? 1.0 : 0.0;
        for (int64_t c = 0; c < j; c++) {
            const double dot = u[e * m + c];
            for (int64_t i = 0; i < m; i++)
                tmp[i] -= dot * u[i * m + c];
        }
        double r = 0.0;
        for (int64_t i = 0; i < m; i++)
            r += tmp[i] * tmp[i];
        if (r > best) {
            best = r;
            for (int64_t i = 0; i < m; i++)
                u[i * m + j] = tmp[i];
        }
    }
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t c = 0; c < j; c++) {
            double dot = 0.0;
            for (int64_t i = 0; i < m; i++)
                dot += u[i * m + c] * u[i * m + j];
            for (int64_t i = 0; i < m; i++)
                u[i * m + j] -= dot * u[i * m + c];
        }
        double r = 0.0;
        for (int64_t i = 0; i < m; i++)
            r += u[i * m + j] * u[i * m + j];
        const double inv = 1.0 / sqrt(r);
        for (int64_t i = 0; i < m; i++)
            u[i * m + j] *= inv;
    }
}

/* SVD of the m x n w (m >= n, overwritten): u (m x m), s (n, descending),
 * v (n x n, the right singular vectors as columns). scratch: n + m doubles
 * and n indices. */
static void svd_tall(double *w, int64_t m, int64_t n, double *u, double *s, double *v,
                     double *scratch, int64_t *order)
{
    double *vj = scratch, *tmp = scratch + n;
    one_sided_jacobi(w, v, m, n);
    for (int64_t j = 0; j < n; j++) {
        double r = 0.0;
        for (int64_t i = 0; i < m; i++)
            r += w[i * n + j] * w[i * n + j];
        vj[j] = sqrt(r);
    }
    wf__cpu_order_by(vj, order, n, true);
    const double smax = n > 0 ? vj[order[0]] : 0.0;
    const double tiny = smax * (double)(m > n ? m : n) * DBL_EPSILON;
    memset(u, 0, (size_t)(m * m) * sizeof *u);
    for (int64_t j = 0; j < n; j++) {
        const int64_t o = order[j];
        s[j] = vj[o];
        if (s[j] > tiny && s[j] > 0.0)
            for (int64_t i = 0; i < m; i++)
                u[i * m + j] = w[i * n + o] / s[j];
        else
            complete_column(u, m, j, tmp);
    }
    for (int64_t j = n; j < m; j++)
        complete_column(u, m, j, tmp);
    /* v's columns in the same order, through w as scratch (n x n <= m x n) */
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++)
            w[i * n + j] = v[i * n + order[j]];
    memcpy(v, w, (size_t)(n * n) * sizeof *v);
}

/* ---------------------------------------------------------------- eig */

/* Matrix b (m x n) of the (real or complex64) input, as complex doubles. */
static void load_complex(const factor_job *job, int64_t b, double _Complex *w)
{
    const wf_array *a = job->a;
    const int64_t rs = a->strides[a->ndim - 2], cs = a->strides[a->ndim - 1];
    const int64_t base = batch_offset(a, b), m = job->m, n = job->n;
    const void *data = wf__array_data_ptr(a);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            const int64_t at = base + i * rs + j * cs;
            double re, im = 0.0;
            if (a->dtype == WF_DTYPE_C64) {
                re = ((const float *)data)[2 * at];
                im = ((const float *)data)[2 * at + 1];
            } else {
                re = a->dtype == WF_DTYPE_F64 ? ((const double *)data)[at]
                                              : ((const float *)data)[at];
            }
            w[i * n + j] = re + im * I;
        }
}

/* Matrix b of eig's packed complex64 output: the eigenvalues in row 0, the
 * eigenvectors below. False (the matrix left NaN) when QR did not converge. */
static bool eig_one(const factor_job *job, int64_t b, double *work)
{
    const int64_t n = job->n;
    double _Complex *a = (double _Complex *)work, *values = a + n * n, *vectors = values + n,
                    *scratch = vectors + n * n;
    float *out = (float *)wf__array_data_ptr(job->out) + 2 * b * (n + 1) * n;
    load_complex(job, b, a);
    const bool converged = wf__cpu_eig(a, n, values, vectors, scratch);
    for (int64_t i = 0; i < (n + 1) * n; i++) {
        const double _Complex v = i < n ? values[i] : vectors[i - n];
        out[2 * i] = converged ? (float)creal(v) : NAN;
        out[2 * i + 1] = converged ? (float)cimag(v) : NAN;
    }
    return converged;
}

/* ---------------------------------------------------------------- complex eigh, SVD */

/* Element (i, j) of the complex64 output's packed matrix b. */
static void put_complex(const factor_job *job, int64_t b, int64_t i, int64_t j,
                        double _Complex v)
{
    float *out = (float *)wf__array_data_ptr(job->out) + 2 * b * job->rows * job->cols;
    out[2 * (i * job->cols + j)] = (float)creal(v);
    out[2 * (i * job->cols + j) + 1] = (float)cimag(v);
}

/* The Hermitian matrix a's `upper` (else lower) triangle stands for: the
 * other triangle its conjugate mirror, the diagonal's imaginary part
 * dropped (as LAPACK's heevd reads it). */
static void hermitian_from_triangle(double _Complex *a, int64_t n, bool upper)
{
    for (int64_t i = 0; i < n; i++) {
        a[i * n + i] = creal(a[i * n + i]);
        for (int64_t j = i + 1; j < n; j++) {
            if (upper)
                a[j * n + i] = conj(a[i * n + j]);
            else
                a[i * n + j] = conj(a[j * n + i]);
        }
    }
}

/* eigh of complex64 matrix b: the eigenvalues (real, ascending) in row 0,
 * the eigenvectors below. */
static void eigh_complex_one(const factor_job *job, int64_t b, double *work)
{
    const int64_t n = job->n;
    double _Complex *a = (double _Complex *)work, *v = a + n * n;
    double *w = (double *)(v + n * n);
    int64_t *order = (int64_t *)(w + n);
    load_complex(job, b, a);
    hermitian_from_triangle(a, n, job->upper);
    wf__cpu_eigh_hermitian(a, n, w, v, order);
    for (int64_t j = 0; j < n; j++) {
        put_complex(job, b, 0, j, w[order[j]]);
        for (int64_t i = 0; i < n; i++)
            put_complex(job, b, 1 + i, j, v[i * n + order[j]]);
    }
}

/* SVD of complex64 matrix b, packed as the real one's. A wide matrix is
 * factored as a^H = V S U^H. */
static void svd_complex_one(const factor_job *job, int64_t b, double *work)
{
    const int64_t m = job->m, n = job->n, k = m < n ? m : n, wide = m > n ? m : n;
    const bool tall = m >= n;
    const int64_t r = tall ? m : n, c = tall ? n : m; /* the factored r x c, r >= c */
    double _Complex *a = (double _Complex *)work, *u = a + r * c, *v = u + r * r;
    double *s = (double *)(v + c * c);
    int64_t *order = (int64_t *)(s + 2 * c);
    load_complex(job, b, a);
    if (!tall) { /* a^H into a, through u as scratch */
        memcpy(u, a, (size_t)(m * n) * sizeof *a);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++)
                a[j * m + i] = conj(u[i * n + j]);
    }
    wf__cpu_svd_complex(a, r, c, u, s, v, order);
    for (int64_t i = 0; i < m + 1 + n; i++)
        for (int64_t j = 0; j < wide; j++)
            put_complex(job, b, i, j, 0.0);
    const double _Complex *left = tall ? u : v, *right = tall ? v : u; /* a = left S right^H */
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < m; j++)
            put_complex(job, b, i, j, left[i * m + j]);
    for (int64_t j = 0; j < k; j++)
        put_complex(job, b, m, j, s[j]);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++)
            put_complex(job, b, m + 1 + i, j, conj(right[j * n + i]));
}

/* ---------------------------------------------------------------- one matrix */

/* Not const: a matrix that fails sets the job's flags. */
static void factor_one(factor_job *job, int64_t b, double *work)
{
    const int64_t m = job->m, n = job->n, k = m < n ? m : n, wide = m > n ? m : n;
    if (job->a->dtype == WF_DTYPE_C64 && job->kind != WF_FACTOR_EIG) {
        if (job->kind == WF_FACTOR_EIGH)
            eigh_complex_one(job, b, work);
        else
            svd_complex_one(job, b, work);
        return;
    }
    packed out = packed_of(job, b);
    double *a = work, *x = a + wide * wide;
    int64_t *idx = (int64_t *)(x + 2 * wide * wide + 4 * wide); /* 2 * wide of them */
    switch (job->kind) {
    case WF_FACTOR_CHOLESKY:
        load(job, b, a, job->upper); /* the upper triangle, as the lower of a^T */
        if (cholesky(a, x, n, job->out->dtype == WF_DTYPE_F64 ? DBL_EPSILON : FLT_EPSILON))
            store(out, 0, x, n, n, job->upper);
        else
            fill_nan(out, n, n);
        break;
    case WF_FACTOR_TRI_INV:
        load(job, b, a, job->upper);
        if (lower_inverse(a, x, n))
            store(out, 0, x, n, n, job->upper);
        else
            atomic_store(&job->singular, true);
        break;
    case WF_FACTOR_INV:
        load(job, b, a, false);
        if (lu_inverse(a, x, n, idx))
            store(out, 0, x, n, n, false);
        else
            atomic_store(&job->singular, true);
        break;
    case WF_FACTOR_LU: {
        load(job, b, a, false);
        lu_factor(a, m, n, idx);
        for (int64_t i = 0; i < m + 2; i++)
            for (int64_t j = 0; j < wide; j++)
                put(out, i, j, 0.0);
        store(out, 0, a, m, n, false);
        int64_t *perm = idx + wide; /* perm[i]: the input row at row i of L U */
        for (int64_t i = 0; i < m; i++)
            perm[i] = i;
        for (int64_t j = 0; j < k; j++) {
            put(out, m, j, (double)idx[j]);
            const int64_t t = perm[j];
            perm[j] = perm[idx[j]];
            perm[idx[j]] = t;
        }
        for (int64_t i = 0; i < m; i++) /* the inverse: a row i is (L U) row p[i] */
            put(out, m + 1, perm[i], (double)i);
        break;
    }
    case WF_FACTOR_QR:
        load(job, b, a, false);
        householder_qr(a, m, n, x, x + m * k);
        store(out, 0, x, m, k, false);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = k; j < n; j++)
                put(out, i, j, 0.0);
        store(out, m, a, k, n, false);
        break;
    case WF_FACTOR_EIGH:
        load(job, b, a, job->upper);
        for (int64_t i = 0; i < n; i++) /* symmetric from the lower triangle */
            for (int64_t j = i + 1; j < n; j++)
                a[i * n + j] = a[j * n + i];
        jacobi_eigh(a, x, n);
        {
            double *w = x + n * n;
            for (int64_t i = 0; i < n; i++)
                w[i] = a[i * n + i];
            wf__cpu_order_by(w, idx, n, false);
            for (int64_t j = 0; j < n; j++) {
                put(out, 0, j, w[idx[j]]);
                for (int64_t i = 0; i < n; i++)
                    put(out, 1 + i, j, x[i * n + idx[j]]);
            }
        }
        break;
    case WF_FACTOR_EIG:
        if (!eig_one(job, b, work))
            atomic_store(&job->diverged, true);
        break;
    case WF_FACTOR_SVD: {
        const bool tall = m >= n; /* else factor a^T = V S U^T */
        load(job, b, a, !tall);
        const int64_t r = tall ? m : n, c = tall ? n : m; /* the factored r x c, r >= c */
        double *u = x, *v = u + r * r, *s = v + c * c, *scratch = s + c;
        svd_tall(a, r, c, u, s, v, scratch, idx);
        for (int64_t i = 0; i < m + 1 + n; i++)
            for (int64_t j = 0; j < wide; j++)
                put(out, i, j, 0.0);
        /* U_out (m x m) and Vt_out (n x n) */
        store(out, 0, tall ? u : v, m, m, false);
        for (int64_t j = 0; j < k; j++)
            put(out, m, j, s[j]);
        store(out, m + 1, tall ? v : u, n, n, true);
        break;
    }
    default: break;
    }
}

static void factor_chunk(void *arg, int64_t begin, int64_t end)
{
    factor_job *job = arg;
    double *work = wf__malloc(job->work * sizeof(double));
    if (!work) {
        atomic_store(&job->out_of_memory, true);
        return;
    }
    for (int64_t b = begin; b < end; b++)
        factor_one(job, b, work);
    free(work);
}

wf_status wf__cpu_linalg_factor(wf_array *out, wf_array *const *inputs, int ninputs,
                                const void *params)
{
    (void)ninputs;
    const wf_factor_params *p = params;
    const wf_array *a = inputs[0];
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK || out->size == 0)
        return st;
    factor_job job = {
        .a = a,
        .out = out,
        .kind = p->kind,
        .upper = p->upper,
        .m = a->shape[a->ndim - 2],
        .n = a->shape[a->ndim - 1],
        .rows = out->shape[out->ndim - 2],
        .cols = out->shape[out->ndim - 1],
    };
    const int64_t wide = job.m > job.n ? job.m : job.n;
    /* a, two more wide x wide matrices and 4 vectors, then 2 * wide indices;
     * complex (eig, complex64 eigh and svd): three complex wide x wide
     * matrices (2 doubles an entry) and 4 complex vectors */
    const bool complex_work = p->kind == WF_FACTOR_EIG || a->dtype == WF_DTYPE_C64;
    job.work = complex_work ? (size_t)(6 * wide * wide + 8 * wide + 1)
                            : (size_t)(3 * wide * wide + 6 * wide + 1);
    const int64_t batch = out->size / (job.rows * job.cols);
    const int64_t cost = wide * wide * wide + 1;
    const int64_t min_chunk = cost >= WF_CPU_CHUNK_COSTLY ? 1 : WF_CPU_CHUNK_COSTLY / cost;
    wf__parallel_for(batch, min_chunk, factor_chunk, &job);
    if (atomic_load(&job.out_of_memory))
        return wf__error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory for a %lld x %lld workspace",
                         wf__factor_op_name(p->kind), (long long)job.m, (long long)job.n);
    if (atomic_load(&job.diverged))
        return wf__error(WF_ERR_KERNEL, "%s: the QR iteration did not converge for a %lld x %lld "
                                        "matrix", wf__factor_op_name(p->kind), (long long)job.m,
                         (long long)job.n);
    if (atomic_load(&job.singular))
        return wf__error(WF_ERR_KERNEL, "%s: a %lld x %lld matrix is singular (a zero pivot)",
                         wf__factor_op_name(p->kind), (long long)job.m, (long long)job.n);
    return WF_OK;
}
