/*
 * Complex (complex64 in, complex double inside) eigh and SVD: the kernels
 * of wf_linalg_eigh and wf_linalg_svd for complex64, called per matrix by
 * linalg_factor.c.
 *
 * Both are the real kernels' Jacobi methods with complex rotations, chosen
 * over Householder tridiagonalisation so that complex and real inputs go
 * through the same method (same accuracy, same convergence test, real
 * input in complex64 gives the real path's values): a Hermitian 2 x 2
 * block [[a, r e^{i phi}], [r e^{-i phi}, b]] (r >= 0) is E B E^H with
 * E = diag(1, e^{i phi}) and B = [[a, r], [r, b]] real symmetric, so the
 * rotation G = E R E^H, R the real Jacobi rotation of B, diagonalises it:
 *   G = [[c, s e^{i phi}], [-s e^{-i phi}, c]].
 * eigh applies G on both sides of the Hermitian matrix (two-sided cyclic
 * Jacobi); the SVD applies it to pairs of columns, with the block their
 * Gram matrix (one-sided, Hestenes), as the real SVD does.
 *
 * Phase convention: an eigenvector is defined up to a unit complex
 * factor; each one is scaled so that its component of largest magnitude
 * (the first such on ties) is real and positive. The SVD's pairs
 * (u_j, v_j) are left as the rotations produce them (deterministic, not
 * normalised): only u_j v_j^H is defined.
 */
#include <complex.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu.h"

enum { MAX_SWEEPS = 64 };

typedef double complex zdouble;

static double abs2(zdouble z) { return creal(z) * creal(z) + cimag(z) * cimag(z); }

static void set_identity(zdouble *v, int64_t n)
{
    memset(v, 0, (size_t)(n * n) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i * n + i] = 1.0;
}

/* The complex Jacobi rotation zeroing the Hermitian block [[a, g], [conj(g),
 * b]] (g != 0): c and s e^{i phi} (phi = arg g), in the real kernels' sign
 * convention. */
static void rotation(double a, double b, zdouble g, double *c, zdouble *sp)
{
    const double r = cabs(g);
    const double theta = (b - a) / (2.0 * r);
    const double t = (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1.0));
    *c = 1.0 / sqrt(t * t + 1.0);
    *sp = t * *c * (g / r);
}

/* Columns p, q of the rows x cols x: x = x G. */
static void rotate_columns(zdouble *x, int64_t rows, int64_t cols, int64_t p, int64_t q, double c,
                           zdouble sp)
{
    const zdouble spc = conj(sp);
    for (int64_t k = 0; k < rows; k++) {
        const zdouble xp = x[k * cols + p], xq = x[k * cols + q];
        x[k * cols + p] = c * xp - spc * xq;
        x[k * cols + q] = sp * xp + c * xq;
    }
}

/* Rows p, q of the n x n x: x = G^H x. */
static void rotate_rows(zdouble *x, int64_t n, int64_t p, int64_t q, double c, zdouble sp)
{
    const zdouble spc = conj(sp);
    for (int64_t k = 0; k < n; k++) {
        const zdouble xp = x[p * n + k], xq = x[q * n + k];
        x[p * n + k] = c * xp - sp * xq;
        x[q * n + k] = spc * xp + c * xq;
    }
}

/* Cyclic Jacobi on the Hermitian n x n a (both triangles, overwritten; the
 * eigenvalues end on its diagonal, real); v gets the eigenvectors as
 * columns. The negligible-entry test is the real jacobi_eigh's (an entry
 * below eps * sqrt(|a_pp a_qq|) or eps times a's norm is zeroed, not
 * rotated). */
static void jacobi_hermitian(zdouble *a, zdouble *v, int64_t n)
{
    set_identity(v, n);
    double norm2 = 0.0;
    for (int64_t i = 0; i < n * n; i++)
        norm2 += abs2(a[i]);
    const double negligible = sqrt(norm2) * DBL_EPSILON;
    for (int sweep = 0; sweep < MAX_SWEEPS; sweep++) {
        bool rotated = false;
        for (int64_t p = 0; p < n - 1; p++)
            for (int64_t q = p + 1; q < n; q++) {
                const zdouble apq = a[p * n + q];
                if (apq == 0.0)
                    continue;
                const double app = creal(a[p * n + p]), aqq = creal(a[q * n + q]);
                const double r = cabs(apq);
                if (r <= negligible || r <= DBL_EPSILON * sqrt(fabs(app * aqq))) {
                    a[p * n + q] = a[q * n + p] = 0.0;
                    continue;
                }
                rotated = true;
                double c;
                zdouble sp;
                rotation(app, aqq, apq, &c, &sp);
                rotate_columns(a, n, n, p, q, c, sp);
                rotate_rows(a, n, p, q, c, sp);
                a[p * n + q] = a[q * n + p] = 0.0;
                a[p * n + p] = creal(a[p * n + p]); /* real in exact arithmetic */
                a[q * n + q] = creal(a[q * n + q]);
                rotate_columns(v, n, n, p, q, c, sp);
            }
        if (!rotated)
            break;
    }
}

/* Scales column j of the n x n v by a unit factor making its largest
 * component (the first on ties) real and positive. */
static void normalise_phase(zdouble *v, int64_t n, int64_t j)
{
    int64_t at = 0;
    double largest = -1.0;
    for (int64_t i = 0; i < n; i++) {
        const double m = abs2(v[i * n + j]);
        if (m > largest) {
            largest = m;
            at = i;
        }
    }
    const double size = sqrt(largest);
    if (size == 0.0)
        return;
    const zdouble phase = conj(v[at * n + j]) / size;
    for (int64_t i = 0; i < n; i++)
        v[i * n + j] *= phase;
    v[at * n + j] = size;
}

void wf__cpu_eigh_hermitian(double _Complex *a, int64_t n, double *w, double _Complex *v,
                            int64_t *order)
{
    jacobi_hermitian(a, v, n);
    for (int64_t i = 0; i < n; i++)
        w[i] = creal(a[i * n + i]);
    wf__cpu_order_by(w, order, n, false);
    for (int64_t j = 0; j < n; j++)
        normalise_phase(v, n, j);
}

/* ---------------------------------------------------------------- SVD */

/* One-sided Jacobi on the m x n w (m >= n): orthogonalises w's columns,
 * accumulating the rotations in v (n x n). Afterwards column j of w is
 * s_j u_j. */
static void one_sided_jacobi_complex(zdouble *w, zdouble *v, int64_t m, int64_t n)
{
    set_identity(v, n);
    for (int sweep = 0; sweep < MAX_SWEEPS; sweep++) {
        bool rotated = false;
        for (int64_t p = 0; p < n - 1; p++)
            for (int64_t q = p + 1; q < n; q++) {
                double alpha = 0.0, beta = 0.0;
                zdouble gamma = 0.0; /* w_p^H w_q */
                for (int64_t i = 0; i < m; i++) {
                    const zdouble wp = w[i * n + p], wq = w[i * n + q];
                    alpha += abs2(wp);
                    beta += abs2(wq);
                    gamma += conj(wp) * wq;
                }
                if (gamma == 0.0 || cabs(gamma) <= DBL_EPSILON * sqrt(alpha * beta))
                    continue;
                rotated = true;
                double c;
                zdouble sp;
                rotation(alpha, beta, gamma, &c, &sp);
                rotate_columns(w, m, n, p, q, c, sp);
                rotate_columns(v, n, n, p, q, c, sp);
            }
        if (!rotated)
            break;
    }
}

/* Subtracts from column j of the m x m u its projections on columns
 * [0, j); returns its squared norm afterwards. */
static double orthogonalise(zdouble *u, int64_t m, int64_t j)
{
    for (int64_t c = 0; c < j; c++) {
        zdouble dot = 0.0;
        for (int64_t i = 0; i < m; i++)
            dot += conj(u[i * m + c]) * u[i * m + j];
        for (int64_t i = 0; i < m; i++)
            u[i * m + j] -= dot * u[i * m + c];
    }
    double r = 0.0;
    for (int64_t i = 0; i < m; i++)
        r += abs2(u[i * m + j]);
    return r;
}

/* Makes column j of the m x m u a unit vector orthogonal to columns
 * [0, j): the coordinate vector with the largest residual, orthogonalised
 * twice (the real complete_column's choice). */
static void complete_column_complex(zdouble *u, int64_t m, int64_t j)
{
    int64_t best_e = 0;
    double best = -1.0;
    for (int64_t e = 0; e < m; e++) { /* residual of e_e: 1 - sum_c |u[e, c]|^2 */
        double r = 1.0;
        for (int64_t c = 0; c < j; c++)
            r -= abs2(u[e * m + c]);
        if (r > best) {
            best = r;
            best_e = e;
        }
    }
    for (int64_t i = 0; i < m; i++)
        u[i * m + j] = i == best_e ? 1.0 : 0.0;
    for (int pass = 0; pass < 2; pass++) {
        const double inv = 1.0 / sqrt(orthogonalise(u, m, j));
        for (int64_t i = 0; i < m; i++)
            u[i * m + j] *= inv;
    }
}

void wf__cpu_svd_complex(double _Complex *w, int64_t m, int64_t n, double _Complex *u,
                         double *s, double _Complex *v, int64_t *order)
{
    one_sided_jacobi_complex(w, v, m, n);
    double *norms = s + n; /* the unsorted column norms */
    for (int64_t j = 0; j < n; j++) {
        double r = 0.0;
        for (int64_t i = 0; i < m; i++)
            r += abs2(w[i * n + j]);
        norms[j] = sqrt(r);
    }
    wf__cpu_order_by(norms, order, n, true);
    const double smax = n > 0 ? norms[order[0]] : 0.0;
    const double tiny = smax * (double)(m > n ? m : n) * DBL_EPSILON;
    memset(u, 0, (size_t)(m * m) * sizeof *u);
    for (int64_t j = 0; j < n; j++) {
        const int64_t o = order[j];
        s[j] = norms[o];
        if (s[j] > tiny && s[j] > 0.0)
            for (int64_t i = 0; i < m; i++)
                u[i * m + j] = w[i * n + o] / s[j];
        else
            complete_column_complex(u, m, j);
    }
    for (int64_t j = n; j < m; j++)
        complete_column_complex(u, m, j);
    /* v's columns in the same order, through w as scratch (n x n <= m x n) */
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++)
            w[i * n + j] = v[i * n + order[j]];
    memcpy(v, w, (size_t)(n * n) * sizeof *v);
}
