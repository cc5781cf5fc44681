/*
 * Eigenvalues and right eigenvectors of one general square matrix, in
 * complex double precision (the kernel of wf_linalg_eig, called per matrix
 * by linalg_factor.c).
 *
 * The matrix is reduced to upper Hessenberg form by Householder
 * reflections, then to upper triangular (complex Schur) form T = Z^H A Z by
 * shifted QR steps with Givens rotations: Wilkinson shifts, an exceptional
 * shift after 10 steps without deflation, a subdiagonal entry deflated when
 * it is below the unit roundoff times its two diagonal neighbours. The
 * eigenvalues are T's diagonal, in the order the deflation leaves them (as
 * LAPACK's, not sorted). The eigenvector of eigenvalue k solves
 * (T - t_kk) y = 0 with y_k = 1 by back substitution (a zero divisor of a
 * repeated eigenvalue is replaced by the roundoff of T's norm, as LAPACK's
 * ztrevc does), then x = Z y, scaled to unit 2-norm with its largest
 * component real (zgeev's normalization).
 *
 * Range: the matrix is first scaled by a power of two that brings its
 * largest entry near 1 (exact; the eigenvalues are scaled back, the
 * eigenvectors do not change), so sums of squares neither overflow for
 * entries near 1e300 nor underflow for entries near 1e-300. A back
 * substitution whose y grows past 2^400 (nearly defective matrices: y
 * grows like 1/roundoff per step) is rescaled as it goes, as ztrevc does;
 * only y's direction matters.
 */
#include <complex.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu.h"

enum { EXCEPTIONAL_AFTER = 10, STEPS_PER_EIGENVALUE = 30 };
/* A back substitution's y is scaled down by this when an entry exceeds it. */
#define Y_RESCALE_ABOVE 0x1p400

typedef double complex zdouble;

/* Householder reduction of the n x n h to upper Hessenberg form, the
 * reflections accumulated into z (which starts as the identity). */
static void hessenberg(zdouble *h, zdouble *z, int64_t n, zdouble *v)
{
    for (int64_t k = 0; k + 2 < n; k++) {
        double norm2 = 0.0;
        for (int64_t i = k + 1; i < n; i++)
            norm2 += creal(h[i * n + k] * conj(h[i * n + k]));
        const zdouble x0 = h[(k + 1) * n + k];
        const double below = norm2 - creal(x0 * conj(x0));
        if (below == 0.0)
            continue; /* the column is already reduced */
        const double norm = sqrt(norm2), a0 = cabs(x0);
        const zdouble alpha = -(a0 == 0.0 ? 1.0 : x0 / a0) * norm;
        double vnorm2 = 0.0;
        for (int64_t i = k + 1; i < n; i++) {
            v[i] = h[i * n + k] - (i == k + 1 ? alpha : 0.0);
            vnorm2 += creal(v[i] * conj(v[i]));
        }
        const double scale = 1.0 / sqrt(vnorm2);
        for (int64_t i = k + 1; i < n; i++)
            v[i] *= scale;
        for (int64_t j = k; j < n; j++) { /* h = (I - 2 v v^H) h */
            zdouble s = 0.0;
            for (int64_t i = k + 1; i < n; i++)
                s += conj(v[i]) * h[i * n + j];
            for (int64_t i = k + 1; i < n; i++)
                h[i * n + j] -= 2.0 * v[i] * s;
        }
        for (int64_t i = 0; i < n; i++) { /* h = h (I - 2 v v^H), z likewise */
            zdouble sh = 0.0, sz = 0.0;
            for (int64_t j = k + 1; j < n; j++) {
                sh += h[i * n + j] * v[j];
                sz += z[i * n + j] * v[j];
            }
            for (int64_t j = k + 1; j < n; j++) {
                h[i * n + j] -= 2.0 * sh * conj(v[j]);
                z[i * n + j] -= 2.0 * sz * conj(v[j]);
            }
        }
        for (int64_t i = k + 2; i < n; i++)
            h[i * n + k] = 0.0;
    }
}

/* The eigenvalue of [[a, b], [c, d]] nearer to d. */
static zdouble wilkinson_shift(zdouble a, zdouble b, zdouble c, zdouble d)
{
    const zdouble half = 0.5 * (a - d);
    const zdouble root = csqrt(half * half + b * c);
    const zdouble plus = half + root, minus = half - root;
    const zdouble denominator = cabs(plus) >= cabs(minus) ? plus : minus;
    return denominator == 0.0 ? d : d - b * c / denominator;
}

/* A rotation g = [[conj(p), conj(q)], [-q, p]] / r that maps (x, y) to
 * (r, 0); returned as p / r and q / r. */
static void givens(zdouble x, zdouble y, zdouble *p, zdouble *q)
{
    const double r = hypot(cabs(x), cabs(y));
    if (r == 0.0) {
        *p = 1.0;
        *q = 0.0;
        return;
    }
    *p = x / r;
    *q = y / r;
}

/* One explicitly shifted QR step on the active window [lo, hi] of the
 * Hessenberg h: h = G (h - mu) G^H + mu there, with the rotations also
 * applied to the rows right of and the columns above the window (so h stays
 * similar to the input) and to z's columns. rot holds 2 * n entries. */
static void qr_step(zdouble *h, zdouble *z, int64_t n, int64_t lo, int64_t hi, zdouble mu,
                    zdouble *rot)
{
    for (int64_t k = lo; k <= hi; k++)
        h[k * n + k] -= mu;
    for (int64_t k = lo; k < hi; k++) { /* left: rows k, k + 1 */
        zdouble p, q;
        givens(h[k * n + k], h[(k + 1) * n + k], &p, &q);
        rot[2 * k] = p;
        rot[2 * k + 1] = q;
        for (int64_t j = k; j < n; j++) {
            const zdouble top = h[k * n + j], bottom = h[(k + 1) * n + j];
            h[k * n + j] = conj(p) * top + conj(q) * bottom;
            h[(k + 1) * n + j] = -q * top + p * bottom;
        }
    }
    for (int64_t k = lo; k < hi; k++) { /* right, by G^H: columns k, k + 1 */
        const zdouble p = rot[2 * k], q = rot[2 * k + 1];
        for (int64_t i = 0; i <= k + 1; i++) { /* R is triangular: rows below k + 1 are 0 */
            const zdouble left = h[i * n + k], right = h[i * n + k + 1];
            h[i * n + k] = p * left + q * right;
            h[i * n + k + 1] = -conj(q) * left + conj(p) * right;
        }
        for (int64_t i = 0; i < n; i++) {
            const zdouble left = z[i * n + k], right = z[i * n + k + 1];
            z[i * n + k] = p * left + q * right;
            z[i * n + k + 1] = -conj(q) * left + conj(p) * right;
        }
    }
    for (int64_t k = lo; k <= hi; k++)
        h[k * n + k] += mu;
}

/* Whether h's subdiagonal entry (k, k - 1) is negligible; zeroes it if so. */
static bool deflate(zdouble *h, int64_t n, int64_t k)
{
    const double neighbours = cabs(h[k * n + k]) + cabs(h[(k - 1) * n + k - 1]);
    const double entry = cabs(h[k * n + k - 1]);
    if (entry > DBL_EPSILON * neighbours && entry > DBL_MIN)
        return false;
    h[k * n + k - 1] = 0.0;
    return true;
}

/* Reduces the Hessenberg h to upper triangular form, z accumulating. False
 * when some eigenvalue needed more than its share of steps. */
static bool schur(zdouble *h, zdouble *z, int64_t n, zdouble *rot)
{
    int64_t hi = n - 1, steps_left = STEPS_PER_EIGENVALUE * (n > 0 ? n : 1), stalled = 0;
    while (hi > 0) {
        int64_t lo = hi;
        while (lo > 0 && !deflate(h, n, lo))
            lo--;
        if (lo == hi) { /* h[hi][hi] is an eigenvalue */
            hi--;
            stalled = 0;
            continue;
        }
        if (steps_left-- == 0)
            return false;
        zdouble mu;
        if (++stalled % EXCEPTIONAL_AFTER == 0) /* break a cycle */
            mu = h[hi * n + hi] + 0.75 * cabs(h[hi * n + hi - 1]);
        else
            mu = wilkinson_shift(h[(hi - 1) * n + hi - 1], h[(hi - 1) * n + hi],
                                 h[hi * n + hi - 1], h[hi * n + hi]);
        qr_step(h, z, n, lo, hi, mu, rot);
    }
    return true;
}

/* Eigenvectors of the triangular t (as columns of x, z applied, unit norm,
 * largest component real); y is n entries of scratch. */
static void eigenvectors(const zdouble *t, const zdouble *z, int64_t n, zdouble *x, zdouble *y)
{
    double norm = 0.0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = i; j < n; j++)
            norm = fmax(norm, cabs(t[i * n + j]));
    const double smallest = fmax(DBL_EPSILON * norm, DBL_MIN);
    for (int64_t k = 0; k < n; k++) {
        const zdouble lambda = t[k * n + k];
        y[k] = 1.0;
        for (int64_t i = k - 1; i >= 0; i--) {
            zdouble s = 0.0;
            for (int64_t j = i + 1; j <= k; j++)
                s += t[i * n + j] * y[j];
            zdouble d = t[i * n + i] - lambda;
            if (cabs(d) < smallest)
                d = smallest;
            y[i] = -s / d;
            if (cabs(y[i]) > Y_RESCALE_ABOVE)
                for (int64_t j = i; j <= k; j++)
                    y[j] *= 1.0 / Y_RESCALE_ABOVE;
        }
        double largest = -1.0;
        zdouble phase = 1.0;
        for (int64_t i = 0; i < n; i++) {
            zdouble s = 0.0;
            for (int64_t j = 0; j <= k; j++)
                s += z[i * n + j] * y[j];
            x[i * n + k] = s;
            const double a = cabs(s);
            if (a > largest) {
                largest = a;
                phase = a == 0.0 ? 1.0 : conj(s) / a;
            }
        }
        /* the norm of x / largest: its squares cannot overflow */
        double norm2 = 0.0;
        for (int64_t i = 0; i < n; i++) {
            const double a = cabs(x[i * n + k]) / largest;
            norm2 += a * a;
        }
        const zdouble scale = phase / (largest * sqrt(norm2));
        for (int64_t i = 0; i < n; i++)
            x[i * n + k] *= scale;
    }
}

/* The power of two nearest the reciprocal of a's largest entry (1 for a
 * zero or non-finite matrix: nothing to gain, NaN and inf stay as they are). */
static double range_scale(const zdouble *a, int64_t n)
{
    double largest = 0.0;
    for (int64_t i = 0; i < n * n; i++)
        largest = fmax(largest, fmax(fabs(creal(a[i])), fabs(cimag(a[i]))));
    if (largest == 0.0 || !isfinite(largest))
        return 1.0;
    int exponent;
    frexp(largest, &exponent);
    return ldexp(1.0, -exponent);
}

bool wf__cpu_eig(zdouble *a, int64_t n, zdouble *values, zdouble *vectors, zdouble *work)
{
    zdouble *z = work, *scratch = work + n * n; /* scratch: 2 * n entries */
    memset(z, 0, (size_t)(n * n) * sizeof *z);
    for (int64_t i = 0; i < n; i++)
        z[i * n + i] = 1.0;
    const double scale = range_scale(a, n);
    for (int64_t i = 0; i < n * n; i++)
        a[i] *= scale;
    hessenberg(a, z, n, scratch);
    if (!schur(a, z, n, scratch))
        return false;
    for (int64_t i = 0; i < n; i++)
        values[i] = a[i * n + i] / scale;
    if (vectors)
        eigenvectors(a, z, n, vectors, scratch);
    return true;
}
