/*
 * Linear algebra (wf_matmul, wf_addmm) and the fused ops (wf_layer_norm,
 * wf_rms_norm, wf_rope, wf_scaled_dot_product_attention, wf_silu, wf_gelu,
 * wf_gelu_tanh) against naive references computed here in double loops:
 * every float dtype, batched and broadcast shapes, transposed / sliced /
 * broadcast (stride-0) operands, vectors, empty dims, NaN and infinities;
 * and every op's bad inputs give NULL with the expected status and a
 * message, after which the library keeps working. The matmul, addmm and
 * attention tests run once per GEMM variant the CPU has (gemm.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/gemm.h"
#include "harness.h"
#include "conformance.h"

static const wf_dtype FLOATS[4] = {WF_DTYPE_F32, WF_DTYPE_F64, WF_DTYPE_F16, WF_DTYPE_BF16};

/* Tolerance of a result computed in float32 (float64) and rounded once. */
static double tol_for(wf_dtype d, double f32_tol)
{
    switch (d) {
    case WF_DTYPE_F32: return f32_tol;
    case WF_DTYPE_F64: return 1e-11;
    case WF_DTYPE_F16: return 3e-3;
    case WF_DTYPE_BF16: return 2e-2;
    default: return 0;
    }
}

/* Values in [lo, hi) as stored in `dtype` (caller frees), and the array
 * holding them (contiguous, or a non-contiguous view if `strided`). */
static double *values_in(int64_t n, wf_dtype dtype, uint32_t seed, double lo, double hi)
{
    double *v = conf_values(n, lo, hi, seed);
    for (int64_t i = 0; i < n; i++)
        v[i] = conf_round_to(v[i], dtype);
    return v;
}

static wf_array *make(const double *v, const int64_t *shape, int nd, wf_dtype dtype, bool strided)
{
    return strided ? conf_strided(v, shape, nd, dtype) : conf_array(v, shape, nd, dtype);
}

static void round_all(double *v, int64_t n, wf_dtype dtype)
{
    for (int64_t i = 0; i < n; i++)
        v[i] = conf_round_to(v[i], dtype);
}

/* ---------------------------------------------------------------- matmul reference */

/* NumPy matmul of a (shape sa, na dims) and b; writes the result shape. */
static double *ref_matmul(const double *a, const int64_t *sa, int na, const double *b,
                          const int64_t *sb, int nb, int64_t *so, int *no)
{
    int64_t as[WF_MAX_NDIM], bs[WF_MAX_NDIM];
    int an = na, bn = nb;
    if (na == 1) {
        as[0] = 1;
        as[1] = sa[0];
        an = 2;
    } else {
        memcpy(as, sa, (size_t)na * sizeof *sa);
    }
    if (nb == 1) {
        bs[0] = sb[0];
        bs[1] = 1;
        bn = 2;
    } else {
        memcpy(bs, sb, (size_t)nb * sizeof *sb);
    }
    const int64_t m = as[an - 2], k = as[an - 1], n = bs[bn - 1];
    const int ab = an - 2, bb = bn - 2, ob = ab > bb ? ab : bb;
    int64_t bshape[WF_MAX_NDIM];
    int64_t batches = 1;
    for (int d = 0; d < ob; d++) {
        const int64_t da = d < ob - ab ? 1 : as[d - (ob - ab)];
        const int64_t db = d < ob - bb ? 1 : bs[d - (ob - bb)];
        bshape[d] = da == 1 ? db : da;
        batches *= bshape[d];
    }
    double *out = calloc((size_t)(batches * m * n) + 1, sizeof *out);
    for (int64_t bi = 0; bi < batches; bi++) {
        int64_t offa = 0, offb = 0, stra = m * k, strb = k * n, r = bi;
        for (int d = ob - 1; d >= 0; d--) {
            const int64_t i = r % bshape[d];
            r /= bshape[d];
            const int xa = d - (ob - ab), xb = d - (ob - bb);
            if (xa >= 0) {
                if (as[xa] != 1)
                    offa += i * stra;
                stra *= as[xa];
            }
            if (xb >= 0) {
                if (bs[xb] != 1)
                    offb += i * strb;
                strb *= bs[xb];
            }
        }
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0;
                for (int64_t t = 0; t < k; t++)
                    s += a[offa + i * k + t] * b[offb + t * n + j];
                out[bi * m * n + i * n + j] = s;
            }
    }
    int nd = 0;
    for (int d = 0; d < ob; d++)
        so[nd++] = bshape[d];
    if (na != 1)
        so[nd++] = m;
    if (nb != 1)
        so[nd++] = n;
    *no = nd;
    return out;
}

static int64_t size_of(const int64_t *s, int n) { return conf_size(s, n); }

/* a @ b for one case: both contiguous, then both strided. */
static void check_matmul_case(const int64_t *sa, int na, const int64_t *sb, int nb, wf_dtype dt,
                              uint32_t seed)
{
    const int64_t n_a = size_of(sa, na), n_b = size_of(sb, nb);
    double *va = values_in(n_a, dt, seed, -1, 1), *vb = values_in(n_b, dt, seed + 7, -1, 1);
    int64_t so[WF_MAX_NDIM];
    int no = 0;
    double *want = ref_matmul(va, sa, na, vb, sb, nb, so, &no);
    round_all(want, size_of(so, no), dt);
    const int64_t k = sa[na - 1];
    const double tol = tol_for(dt, 2e-6) * (k > 16 ? sqrt((double)k) : 1);
    for (int strided = 0; strided < 2; strided++) {
        wf_array *a = make(va, sa, na, dt, strided), *b = make(vb, sb, nb, dt, strided);
        if (!conf_check(wf_matmul(a, b), dt, so, no, want, tol))
            printf("      (case dtype %s strided %d, ranks %d @ %d)\n", wf_dtype_name(dt),
                   strided, na, nb);
        wf_release(a);
        wf_release(b);
    }
    free(va);
    free(vb);
    free(want);
}

static void test_matmul_batched(void)
{
    static const struct {
        int na, nb;
        int64_t sa[4], sb[4];
    } cases[] = {
        {4, 3, {2, 1, 3, 4}, {5, 4, 2}},
        {2, 3, {3, 4}, {2, 4, 5}},
        {3, 2, {2, 3, 4}, {4, 5}},
        {3, 1, {2, 3, 4}, {4}},
        {1, 3, {4}, {2, 4, 5}},
        {3, 3, {2, 3, 4}, {2, 4, 5}},
        {3, 3, {1, 3, 4}, {3, 4, 1}},
        {4, 4, {2, 3, 2, 5}, {1, 3, 5, 3}},
        {1, 1, {6}, {6}},
        {2, 2, {5, 7}, {7, 3}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int t = 0; t < 4; t++)
            check_matmul_case(cases[c].sa, cases[c].na, cases[c].sb, cases[c].nb, FLOATS[t],
                              (uint32_t)(c * 10 + t + 1));
}

/* Sizes that take the pool-split paths (batches; row blocks of one
 * product; one merged gemm for a shared b) and the OpenBLAS-threaded one. */
static void test_matmul_large(void)
{
    static const struct {
        int na, nb;
        int64_t sa[3], sb[3];
    } cases[] = {
        {3, 3, {64, 16, 32}, {64, 32, 24}}, /* many small products */
        {2, 2, {300, 200}, {200, 100}},     /* row blocks of one product */
        {3, 2, {6, 40, 50}, {50, 30}},      /* merged batch */
        {2, 2, {70, 600}, {600, 500}},      /* above the single-thread size */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        check_matmul_case(cases[c].sa, cases[c].na, cases[c].sb, cases[c].nb, WF_DTYPE_F32,
                          (uint32_t)(100 + c));
        check_matmul_case(cases[c].sa, cases[c].na, cases[c].sb, cases[c].nb, WF_DTYPE_F64,
                          (uint32_t)(200 + c));
    }
    check_matmul_case(cases[0].sa, 3, cases[0].sb, 3, WF_DTYPE_BF16, 300);
}

static void test_matmul_layouts(void)
{
    wf_scope_begin();
    /* Transposed batched operand: stored (2, 4, 3), viewed as (2, 3, 4). */
    const int64_t s243[3] = {2, 4, 3}, s234[3] = {2, 3, 4}, s245[3] = {2, 4, 5};
    double *vt = values_in(24, WF_DTYPE_F32, 1, -1, 1), *vb = values_in(40, WF_DTYPE_F32, 2, -1, 1);
    double va[24];
    for (int p = 0; p < 2; p++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++)
                va[p * 12 + i * 4 + j] = vt[p * 12 + j * 3 + i];
    wf_array *stored = conf_array(vt, s243, 3, WF_DTYPE_F32);
    const int perm[3] = {0, 2, 1};
    wf_array *at = wf_transpose(stored, perm, 3);
    wf_array *b = conf_array(vb, s245, 3, WF_DTYPE_F32);
    int64_t so[WF_MAX_NDIM];
    int no;
    double *want = ref_matmul(va, s234, 3, vb, s245, 3, so, &no);
    conf_check(wf_matmul(at, b), WF_DTYPE_F32, so, no, want, 2e-6);
    free(want);
    /* A row slice with a step (not BLAS-readable: copied) and a column
     * slice (leading dimension larger than the width: read in place). */
    const int64_t s84[2] = {8, 4}, s46[2] = {4, 6};
    double *vbig = values_in(32, WF_DTYPE_F32, 3, -1, 1), *vw = values_in(24, WF_DTYPE_F32, 4, -1, 1);
    wf_array *big = conf_array(vbig, s84, 2, WF_DTYPE_F32);
    wf_array *rows = wf_slice(big, (int64_t[]){1, 0}, (int64_t[]){8, 4}, (int64_t[]){2, 1});
    wf_array *w = conf_array(vw, s46, 2, WF_DTYPE_F32);
    wf_array *cols = wf_slice(w, (int64_t[]){0, 1}, (int64_t[]){4, 6}, (int64_t[]){1, 2});
    double vr[16], vc[12];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            vr[i * 4 + j] = vbig[(1 + 2 * i) * 4 + j];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            vc[i * 3 + j] = vw[i * 6 + 1 + 2 * j];
    const int64_t s44[2] = {4, 4}, s43[2] = {4, 3};
    want = ref_matmul(vr, s44, 2, vc, s43, 2, so, &no);
    conf_check(wf_matmul(rows, cols), WF_DTYPE_F32, so, no, want, 2e-6);
    free(want);
    /* A broadcast (stride-0) batch operand and a mixed-dtype product. */
    const int64_t s3_45[3] = {3, 4, 5}, s45[2] = {4, 5};
    wf_array *w2 = conf_array(vb, s45, 2, WF_DTYPE_F32);
    wf_array *wb = wf_broadcast_to(w2, s3_45, 3);
    wf_array *x1 = conf_array(vbig, (int64_t[]){1, 4, 4}, 3, WF_DTYPE_F16);
    double vx[16];
    for (int i = 0; i < 16; i++)
        vx[i] = conf_round_to(vbig[i], WF_DTYPE_F16);
    /* wb's 3 batches all hold vb's first 20 values */
    double vbb[60];
    for (int p = 0; p < 3; p++)
        for (int i = 0; i < 20; i++)
            vbb[p * 20 + i] = vb[i];
    want = ref_matmul(vx, (int64_t[]){1, 4, 4}, 3, vbb, s3_45, 3, so, &no);
    conf_check(wf_matmul(x1, wb), WF_DTYPE_F32, so, no, want, 2e-6);
    free(want);
    /* int32 @ float32 promotes to float32. */
    double iv[6] = {1, 2, 3, -1, 0, 2};
    wf_array *xi = conf_array(iv, (int64_t[]){2, 3}, 2, WF_DTYPE_I32);
    wf_array *yf = conf_array(iv, (int64_t[]){3, 2}, 2, WF_DTYPE_F32);
    double wi[4] = {1 * 1 + 2 * 3 + 3 * 0, 1 * 2 + 2 * -1 + 3 * 2, -1 * 1 + 0 + 2 * 0,
                    -1 * 2 + 0 + 2 * 2};
    conf_check(wf_matmul(xi, yf), WF_DTYPE_F32, (int64_t[]){2, 2}, 2, wi, 0);
    free(vt);
    free(vb);
    free(vbig);
    free(vw);
    wf_scope_end();
}

static void test_matmul_empty(void)
{
    wf_scope_begin();
    for (int t = 0; t < 4; t++) {
        const wf_dtype dt = FLOATS[t];
        /* k == 0: zeros. */
        double z[2 * 3 * 5] = {0};
        conf_check(wf_matmul(wf_ones((int64_t[]){2, 3, 0}, 3, dt), wf_ones((int64_t[]){0, 5}, 2, dt)),
                   dt, (int64_t[]){2, 3, 5}, 3, z, 0);
        /* m == 0, batch 0, n == 0. */
        conf_check(wf_matmul(wf_ones((int64_t[]){0, 4}, 2, dt), wf_ones((int64_t[]){2, 4, 3}, 3, dt)),
                   dt, (int64_t[]){2, 0, 3}, 3, NULL, 0);
        conf_check(wf_matmul(wf_ones((int64_t[]){0, 3, 4}, 3, dt), wf_ones((int64_t[]){4, 3}, 2, dt)),
                   dt, (int64_t[]){0, 3, 3}, 3, NULL, 0);
        conf_check(wf_matmul(wf_ones((int64_t[]){3, 4}, 2, dt), wf_ones((int64_t[]){4, 0}, 2, dt)),
                   dt, (int64_t[]){3, 0}, 2, NULL, 0);
        /* Empty vectors: a dot product of nothing is 0. */
        double zero = 0;
        conf_check(wf_matmul(wf_ones((int64_t[]){0}, 1, dt), wf_ones((int64_t[]){0}, 1, dt)), dt,
                   NULL, 0, &zero, 0);
    }
    /* NaN and inf propagate through BLAS. */
    double va[4] = {NAN, 1, 2, 3}, vb[4] = {1, 1, 1, 1};
    double want[4] = {NAN, NAN, 5, 5};
    conf_check(wf_matmul(conf_array(va, (int64_t[]){2, 2}, 2, WF_DTYPE_F32),
                         conf_array(vb, (int64_t[]){2, 2}, 2, WF_DTYPE_F32)),
               WF_DTYPE_F32, (int64_t[]){2, 2}, 2, want, 0);
    wf_scope_end();
}

static void test_matmul_errors(void)
{
    wf_scope_begin();
    wf_array *a = wf_ones((int64_t[]){3, 4}, 2, WF_DTYPE_F32);
    conf_check_error(wf_matmul(NULL, a), WF_ERR_NULL_ARGUMENT, "wf_matmul");
    conf_check_error(wf_matmul(a, NULL), WF_ERR_NULL_ARGUMENT, "wf_matmul");
    conf_check_error(wf_matmul(wf_scalar(1, WF_DTYPE_F32), a), WF_ERR_SHAPE, "wf_matmul");
    conf_check_error(wf_matmul(a, wf_scalar(1, WF_DTYPE_F32)), WF_ERR_SHAPE, "wf_matmul");
    conf_check_error(wf_matmul(a, wf_ones((int64_t[]){5, 2}, 2, WF_DTYPE_F32)), WF_ERR_SHAPE,
                     "wf_matmul");
    conf_check_error(wf_matmul(a, wf_ones((int64_t[]){3}, 1, WF_DTYPE_F32)), WF_ERR_SHAPE,
                     "wf_matmul");
    conf_check_error(wf_matmul(wf_ones((int64_t[]){2, 3, 4}, 3, WF_DTYPE_F32),
                               wf_ones((int64_t[]){3, 4, 5}, 3, WF_DTYPE_F32)),
                     WF_ERR_SHAPE, "wf_matmul");
    conf_check_error(wf_matmul(wf_ones((int64_t[]){3, 4}, 2, WF_DTYPE_I32),
                               wf_ones((int64_t[]){4}, 1, WF_DTYPE_I32)),
                     WF_ERR_DTYPE, "wf_matmul");
    conf_check_error(wf_matmul(wf_ones((int64_t[]){3, 4}, 2, WF_DTYPE_BOOL),
                               wf_ones((int64_t[]){4}, 1, WF_DTYPE_U8)),
                     WF_ERR_DTYPE, "wf_matmul");
    /* A NULL from a failed op keeps the first error through a chain. */
    wf_array *bad = wf_matmul(a, wf_ones((int64_t[]){5, 2}, 2, WF_DTYPE_F32));
    CHECK(bad == NULL);
    conf_check_error(wf_matmul(bad, a), WF_ERR_SHAPE, "wf_matmul");
    wf_scope_end();
}

/* ---------------------------------------------------------------- addmm */

static void test_addmm(void)
{
    static const struct {
        int na, nb, nc;
        int64_t sa[3], sb[3], sc[3];
        double alpha, beta;
    } cases[] = {
        {2, 2, 2, {3, 4}, {4, 5}, {3, 5}, 1.0, 1.0},
        {2, 2, 1, {3, 4}, {4, 5}, {5}, 2.0, 0.5},
        {2, 2, 2, {3, 4}, {4, 5}, {3, 1}, -1.0, 3.0},
        {2, 2, 0, {3, 4}, {4, 5}, {0}, 0.5, -2.0},
        {3, 2, 3, {2, 3, 4}, {4, 5}, {2, 1, 5}, 1.5, 1.0},
        {3, 3, 2, {2, 3, 4}, {1, 4, 5}, {3, 5}, 1.0, 0.0},
        {2, 1, 1, {3, 4}, {4}, {3}, 1.0, 1.0},
        {1, 2, 1, {4}, {4, 5}, {1}, 1.0, 2.0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int t = 0; t < 4; t++) {
            const wf_dtype dt = FLOATS[t];
            wf_scope_begin();
            const int64_t n_a = size_of(cases[c].sa, cases[c].na),
                          n_b = size_of(cases[c].sb, cases[c].nb),
                          n_c = size_of(cases[c].sc, cases[c].nc);
            double *va = values_in(n_a, dt, (uint32_t)c + 1, -1, 1),
                   *vb = values_in(n_b, dt, (uint32_t)c + 50, -1, 1),
                   *vc = values_in(n_c, dt, (uint32_t)c + 99, -1, 1);
            int64_t so[WF_MAX_NDIM];
            int no;
            double *want = ref_matmul(va, cases[c].sa, cases[c].na, vb, cases[c].sb, cases[c].nb,
                                      so, &no);
            const int64_t n_o = size_of(so, no);
            for (int64_t i = 0; i < n_o; i++) {
                /* c broadcast to the result (right-aligned). */
                int64_t ci = 0, r = i, cstr = 1;
                for (int d = no - 1, e = cases[c].nc - 1; d >= 0; d--, e--) {
                    const int64_t idx = r % so[d];
                    r /= so[d];
                    if (e >= 0) {
                        if (cases[c].sc[e] != 1)
                            ci += idx * cstr;
                        cstr *= cases[c].sc[e];
                    }
                }
                want[i] = cases[c].alpha * want[i] + cases[c].beta * vc[ci];
            }
            round_all(want, n_o, dt);
            wf_array *a = make(va, cases[c].sa, cases[c].na, dt, t % 2 == 1);
            wf_array *b = make(vb, cases[c].sb, cases[c].nb, dt, false);
            wf_array *cc = make(vc, cases[c].sc, cases[c].nc, dt, t == 2);
            if (!conf_check(wf_addmm(cc, a, b, cases[c].alpha, cases[c].beta), dt, so, no, want,
                            tol_for(dt, 4e-6)))
                printf("      (addmm case %zu dtype %s)\n", c, wf_dtype_name(dt));
            free(va);
            free(vb);
            free(vc);
            free(want);
            wf_scope_end();
        }
    }
    wf_scope_begin();
    /* k == 0: beta * c. */
    double cv[6] = {1, 2, 3, 4, 5, 6}, want[6];
    for (int i = 0; i < 6; i++)
        want[i] = 3 * cv[i];
    conf_check(wf_addmm(conf_array(cv, (int64_t[]){2, 3}, 2, WF_DTYPE_F32),
                        wf_ones((int64_t[]){2, 0}, 2, WF_DTYPE_F32),
                        wf_ones((int64_t[]){0, 3}, 2, WF_DTYPE_F32), 2.0, 3.0),
               WF_DTYPE_F32, (int64_t[]){2, 3}, 2, want, 0);
    /* Errors. */
    wf_array *a = wf_ones((int64_t[]){3, 4}, 2, WF_DTYPE_F32), *b = wf_ones((int64_t[]){4, 5}, 2, WF_DTYPE_F32);
    conf_check_error(wf_addmm(NULL, a, b, 1, 1), WF_ERR_NULL_ARGUMENT, "wf_addmm");
    conf_check_error(wf_addmm(a, NULL, b, 1, 1), WF_ERR_NULL_ARGUMENT, "wf_addmm");
    conf_check_error(wf_addmm(wf_ones((int64_t[]){4, 5}, 2, WF_DTYPE_F32), a, b, 1, 1),
                     WF_ERR_SHAPE, "wf_addmm");
    conf_check_error(wf_addmm(wf_ones((int64_t[]){2, 3, 5}, 3, WF_DTYPE_F32), a, b, 1, 1),
                     WF_ERR_SHAPE, "wf_addmm");
    conf_check_error(wf_addmm(wf_ones((int64_t[]){3, 5}, 2, WF_DTYPE_F32), a, a, 1, 1),
                     WF_ERR_SHAPE, "wf_addmm");
    conf_check_error(wf_addmm(wf_ones((int64_t[]){3, 5}, 2, WF_DTYPE_I32),
                              wf_ones((int64_t[]){3, 4}, 2, WF_DTYPE_I32),
                              wf_ones((int64_t[]){4, 5}, 2, WF_DTYPE_I32), 1, 1),
                     WF_ERR_DTYPE, "wf_addmm");
    wf_scope_end();
}

/* ---------------------------------------------------------------- norms */

static void ref_norm(const double *x, int64_t rows, int64_t d, const double *w, const double *b,
                     double eps, bool rms, double *y)
{
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * d;
        double mean = 0, var = 0;
        if (!rms) {
            for (int64_t i = 0; i < d; i++)
                mean += xr[i];
            mean /= (double)d;
        }
        for (int64_t i = 0; i < d; i++)
            var += (xr[i] - mean) * (xr[i] - mean);
        var /= (double)d;
        for (int64_t i = 0; i < d; i++) {
            double v = (xr[i] - mean) / sqrt(var + eps);
            if (w)
                v *= w[i];
            if (b)
                v += b[i];
            y[r * d + i] = v;
        }
    }
}

static void test_norms(void)
{
    static const struct {
        int nd;
        int64_t shape[3];
    } cases[] = {{2, {3, 5}}, {3, {2, 3, 17}}, {1, {9}}, {2, {4, 1}}, {2, {2, 64}}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int nd = cases[c].nd;
        const int64_t *shape = cases[c].shape, d = shape[nd - 1], n = size_of(shape, nd);
        for (int t = 0; t < 4; t++) {
            const wf_dtype dt = FLOATS[t];
            wf_scope_begin();
            double *vx = values_in(n, dt, (uint32_t)(c * 4 + t + 1), -2, 3);
            double *vw = values_in(d, dt, (uint32_t)c + 40, 0.5, 1.5);
            double *vb = values_in(d, dt, (uint32_t)c + 80, -1, 1);
            double *want = malloc((size_t)n * sizeof *want);
            for (int variant = 0; variant < 4; variant++) {
                const bool rms = variant == 3;
                const bool use_w = variant >= 1, use_b = variant == 2;
                ref_norm(vx, n / d, d, use_w ? vw : NULL, use_b ? vb : NULL, 1e-5, rms, want);
                round_all(want, n, dt);
                wf_array *x = make(vx, shape, nd, dt, (variant + t) % 2 == 1);
                wf_array *w = use_w ? conf_strided(vw, &d, 1, dt) : NULL;
                wf_array *b = use_b ? conf_array(vb, &d, 1, dt) : NULL;
                wf_array *y = rms ? wf_rms_norm(x, w, 1e-5) : wf_layer_norm(x, w, b, 1e-5);
                if (!conf_check(y, dt, shape, nd, want, tol_for(dt, 1e-5)))
                    printf("      (norm case %zu dtype %s variant %d)\n", c, wf_dtype_name(dt),
                           variant);
            }
            free(vx);
            free(vw);
            free(vb);
            free(want);
            wf_scope_end();
        }
    }
    wf_scope_begin();
    /* A constant row normalizes to 0 (+ bias); mixed dtypes promote; empty. */
    double ones[4] = {2, 2, 2, 2}, bias[4] = {1, 2, 3, 4};
    conf_check(wf_layer_norm(conf_array(ones, (int64_t[]){1, 4}, 2, WF_DTYPE_F16), NULL,
                             conf_array(bias, (int64_t[]){4}, 1, WF_DTYPE_F32), 1e-5),
               WF_DTYPE_F32, (int64_t[]){1, 4}, 2, bias, 0);
    conf_check(wf_layer_norm(wf_ones((int64_t[]){0, 4}, 2, WF_DTYPE_F32), NULL, NULL, 1e-5),
               WF_DTYPE_F32, (int64_t[]){0, 4}, 2, NULL, 0);
    conf_check(wf_rms_norm(wf_ones((int64_t[]){3, 0}, 2, WF_DTYPE_F16), NULL, 1e-5),
               WF_DTYPE_F16, (int64_t[]){3, 0}, 2, NULL, 0);
    /* NaN in a row makes that row NaN only. */
    double vn[6] = {1, NAN, 2, 1, 2, 3}, wn[6];
    ref_norm(vn + 3, 1, 3, NULL, NULL, 0, true, wn + 3);
    wn[0] = wn[1] = wn[2] = NAN;
    conf_check(wf_rms_norm(conf_array(vn, (int64_t[]){2, 3}, 2, WF_DTYPE_F32), NULL, 0),
               WF_DTYPE_F32, (int64_t[]){2, 3}, 2, wn, 1e-6);

    wf_array *x = wf_ones((int64_t[]){2, 4}, 2, WF_DTYPE_F32);
    wf_array *w4 = wf_ones((int64_t[]){4}, 1, WF_DTYPE_F32);
    conf_check_error(wf_layer_norm(NULL, NULL, NULL, 1e-5), WF_ERR_NULL_ARGUMENT, "wf_layer_norm");
    conf_check_error(wf_layer_norm(wf_scalar(1, WF_DTYPE_F32), NULL, NULL, 1e-5), WF_ERR_SHAPE,
                     "wf_layer_norm");
    conf_check_error(wf_layer_norm(x, wf_ones((int64_t[]){3}, 1, WF_DTYPE_F32), NULL, 1e-5),
                     WF_ERR_SHAPE, "wf_layer_norm");
    conf_check_error(wf_layer_norm(x, w4, wf_ones((int64_t[]){1, 4}, 2, WF_DTYPE_F32), 1e-5),
                     WF_ERR_SHAPE, "wf_layer_norm");
    conf_check_error(wf_layer_norm(wf_ones((int64_t[]){2, 4}, 2, WF_DTYPE_I32), NULL, NULL, 1e-5),
                     WF_ERR_DTYPE, "wf_layer_norm");
    conf_check_error(wf_layer_norm(x, NULL, NULL, -1), WF_ERR_INVALID_ARGUMENT, "wf_layer_norm");
    conf_check_error(wf_layer_norm(x, NULL, NULL, NAN), WF_ERR_INVALID_ARGUMENT, "wf_layer_norm");
    conf_check_error(wf_rms_norm(NULL, w4, 1e-5), WF_ERR_NULL_ARGUMENT, "wf_rms_norm");
    conf_check_error(wf_rms_norm(x, wf_ones((int64_t[]){5}, 1, WF_DTYPE_F32), 1e-5), WF_ERR_SHAPE,
                     "wf_rms_norm");
    conf_check_error(wf_rms_norm(wf_ones((int64_t[]){4}, 1, WF_DTYPE_BOOL), NULL, 1e-5),
                     WF_ERR_DTYPE, "wf_rms_norm");
    conf_check_error(wf_rms_norm(x, w4, INFINITY), WF_ERR_INVALID_ARGUMENT, "wf_rms_norm");
    wf_scope_end();
}

/* ---------------------------------------------------------------- rope */

static void ref_rope(const double *x, const int64_t *shape, int nd, int dims, bool traditional,
                     double base, double scale, int64_t offset, double *y)
{
    const int64_t f = shape[nd - 1], seq = shape[nd - 2], rows = size_of(shape, nd) / f;
    const int half = dims / 2;
    for (int64_t r = 0; r < rows; r++) {
        const double pos = (double)(offset + r % seq) * scale;
        const double *xr = x + r * f;
        double *yr = y + r * f;
        for (int64_t i = 0; i < f; i++)
            yr[i] = xr[i];
        for (int i = 0; i < half; i++) {
            const double th = pos * pow(base, -2.0 * i / dims);
            const int i1 = traditional ? 2 * i : i, i2 = traditional ? 2 * i + 1 : i + half;
            yr[i1] = xr[i1] * cos(th) - xr[i2] * sin(th);
            yr[i2] = xr[i1] * sin(th) + xr[i2] * cos(th);
        }
    }
}

static void test_rope(void)
{
    const int64_t shape[4] = {2, 3, 5, 8};
    const int64_t n = size_of(shape, 4);
    static const struct {
        int dims;
        bool traditional;
        double base, scale;
        int64_t offset;
    } cases[] = {
        {8, false, 10000, 1, 0}, {8, true, 10000, 1, 3}, {4, false, 100, 0.5, 7},
        {4, true, 10, 2, 0},     {2, false, 10000, 1, -2},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int t = 0; t < 4; t++) {
            const wf_dtype dt = FLOATS[t];
            wf_scope_begin();
            double *vx = values_in(n, dt, (uint32_t)(c * 4 + t + 3), -1, 1);
            double *want = malloc((size_t)n * sizeof *want);
            ref_rope(vx, shape, 4, cases[c].dims, cases[c].traditional, cases[c].base,
                     cases[c].scale, cases[c].offset, want);
            round_all(want, n, dt);
            wf_array *x = make(vx, shape, 4, dt, (c + (size_t)t) % 2 == 1);
            if (!conf_check(wf_rope(x, cases[c].dims, cases[c].traditional, cases[c].base,
                                    cases[c].scale, cases[c].offset),
                            dt, shape, 4, want, tol_for(dt, 1e-5)))
                printf("      (rope case %zu dtype %s)\n", c, wf_dtype_name(dt));
            free(vx);
            free(want);
            wf_scope_end();
        }
    }
    wf_scope_begin();
    /* 2-d input (seq, features); empty. */
    double v2[12] = {1, 0, 0, 1, 0.5, 0.5, -1, 2, 3, 4, 5, 6}, w2[12];
    const int64_t s34[2] = {3, 4};
    ref_rope(v2, s34, 2, 4, false, 10000, 1, 1, w2);
    conf_check(wf_rope(conf_array(v2, s34, 2, WF_DTYPE_F64), 4, false, 10000, 1, 1), WF_DTYPE_F64,
               s34, 2, w2, 1e-12);
    conf_check(wf_rope(wf_ones((int64_t[]){2, 0, 4}, 3, WF_DTYPE_F32), 4, false, 10000, 1, 0),
               WF_DTYPE_F32, (int64_t[]){2, 0, 4}, 3, NULL, 0);
    wf_array *x = wf_ones((int64_t[]){2, 3, 8}, 3, WF_DTYPE_F32);
    conf_check_error(wf_rope(NULL, 8, false, 10000, 1, 0), WF_ERR_NULL_ARGUMENT, "wf_rope");
    conf_check_error(wf_rope(wf_ones((int64_t[]){8}, 1, WF_DTYPE_F32), 8, false, 10000, 1, 0),
                     WF_ERR_SHAPE, "wf_rope");
    conf_check_error(wf_rope(x, 3, false, 10000, 1, 0), WF_ERR_INVALID_ARGUMENT, "wf_rope");
    conf_check_error(wf_rope(x, 10, false, 10000, 1, 0), WF_ERR_INVALID_ARGUMENT, "wf_rope");
    conf_check_error(wf_rope(x, 0, false, 10000, 1, 0), WF_ERR_INVALID_ARGUMENT, "wf_rope");
    conf_check_error(wf_rope(x, 8, false, 0, 1, 0), WF_ERR_INVALID_ARGUMENT, "wf_rope");
    conf_check_error(wf_rope(x, 8, false, 10000, NAN, 0), WF_ERR_INVALID_ARGUMENT, "wf_rope");
    conf_check_error(wf_rope(wf_ones((int64_t[]){2, 8}, 2, WF_DTYPE_I32), 8, false, 10000, 1, 0),
                     WF_ERR_DTYPE, "wf_rope");
    wf_scope_end();
}

/* ---------------------------------------------------------------- attention */

/* The naive reference: leading dims of q/k/v/mask right-aligned against
 * `lead` (k/v heads may divide q's on the last leading axis). mask (if any)
 * has shape (lead..., lq, lk) fully expanded; mask_bool says how to apply. */
static void ref_sdpa(const double *q, const int64_t *sq, int nq, const double *k,
                     const int64_t *sk, int nk, const double *v, const int64_t *sv, int nv,
                     const double *mask, bool mask_bool, bool causal, double scale,
                     const int64_t *lead, int nl, double *out)
{
    const int64_t lq = sq[nq - 2], d = sq[nq - 1], lk = sk[nk - 2], dv = sv[nv - 1];
    const int64_t batches = size_of(lead, nl);
    double *s = malloc((size_t)(lk + 1) * sizeof *s);
    for (int64_t bi = 0; bi < batches; bi++) {
        int64_t off[3] = {0, 0, 0};
        const int64_t *shp[3] = {sq, sk, sv};
        const int nds[3] = {nq - 2, nk - 2, nv - 2};
        int64_t str[3] = {lq * d, lk * d, lk * dv};
        int64_t r = bi;
        for (int dd = nl - 1; dd >= 0; dd--) {
            const int64_t idx = r % lead[dd];
            r /= lead[dd];
            for (int o = 0; o < 3; o++) {
                const int xd = dd - (nl - nds[o]);
                if (xd < 0)
                    continue;
                const int64_t ext = shp[o][xd];
                if (ext != 1)
                    off[o] += (idx / (lead[dd] / ext)) * str[o];
                str[o] *= ext;
            }
        }
        for (int64_t i = 0; i < lq; i++) {
            double mx = -INFINITY;
            for (int64_t j = 0; j < lk; j++) {
                double acc = 0;
                for (int64_t t = 0; t < d; t++)
                    acc += q[off[0] + i * d + t] * k[off[1] + j * d + t];
                acc *= scale;
                if (mask) {
                    const double m = mask[(bi * lq + i) * lk + j];
                    acc = mask_bool ? (m != 0 ? acc : -INFINITY) : acc + m;
                }
                if (causal && j > i + lk - lq)
                    acc = -INFINITY;
                s[j] = acc;
                mx = acc > mx ? acc : mx;
            }
            double sum = 0;
            for (int64_t j = 0; j < lk; j++) {
                s[j] = mx == -INFINITY ? 0 : exp(s[j] - mx);
                sum += s[j];
            }
            for (int64_t t = 0; t < dv; t++) {
                double acc = 0;
                for (int64_t j = 0; j < lk; j++)
                    acc += s[j] * v[off[2] + j * dv + t];
                out[(bi * lq + i) * dv + t] = sum > 0 ? acc / sum : 0;
            }
        }
    }
    free(s);
}

typedef struct sdpa_case {
    int nq, nk, nv, nm; /* nm 0: no mask */
    int64_t sq[4], sk[4], sv[4], sm[4];
    bool mask_bool, causal;
} sdpa_case;

static void check_sdpa_case(const sdpa_case *c, wf_dtype dt, uint32_t seed, bool strided)
{
    wf_scope_begin();
    const int64_t nq = size_of(c->sq, c->nq), nk = size_of(c->sk, c->nk), nv = size_of(c->sv, c->nv);
    double *vq = values_in(nq, dt, seed, -1, 1), *vk = values_in(nk, dt, seed + 1, -1, 1),
           *vv = values_in(nv, dt, seed + 2, -1, 1);
    /* The output's leading shape. */
    int64_t lead[WF_MAX_NDIM];
    int nl = c->nq - 2;
    if (c->nk - 2 > nl)
        nl = c->nk - 2;
    if (c->nv - 2 > nl)
        nl = c->nv - 2;
    for (int d = 0; d < nl; d++) {
        int64_t m = 1;
        const int64_t *sh[3] = {c->sq, c->sk, c->sv};
        const int nd[3] = {c->nq - 2, c->nk - 2, c->nv - 2};
        for (int o = 0; o < 3; o++) {
            const int xd = d - (nl - nd[o]);
            if (xd >= 0 && sh[o][xd] > m)
                m = sh[o][xd];
        }
        lead[d] = m;
    }
    const int64_t lq = c->sq[c->nq - 2], lk = c->sk[c->nk - 2], dv = c->sv[c->nv - 1];
    int64_t so[WF_MAX_NDIM];
    memcpy(so, lead, (size_t)nl * sizeof *lead);
    so[nl] = lq;
    so[nl + 1] = dv;
    const int64_t n_out = size_of(so, nl + 2);
    /* The mask values and their full expansion. */
    double *vm = NULL, *full = NULL;
    wf_array *mask = NULL;
    if (c->nm > 0) {
        const int64_t nm = size_of(c->sm, c->nm);
        vm = values_in(nm, WF_DTYPE_F32, seed + 3, -2, 2);
        if (c->mask_bool)
            for (int64_t i = 0; i < nm; i++)
                vm[i] = vm[i] > -1.2; /* mostly true */
        else
            round_all(vm, nm, dt);
        int64_t sfull[WF_MAX_NDIM];
        memcpy(sfull, lead, (size_t)nl * sizeof *lead);
        sfull[nl] = lq;
        sfull[nl + 1] = lk;
        const int64_t nf = size_of(sfull, nl + 2);
        full = malloc((size_t)(nf + 1) * sizeof *full);
        for (int64_t i = 0; i < nf; i++) {
            int64_t r = i, mi = 0, mstr = 1;
            for (int d = nl + 1, e = c->nm - 1; d >= 0; d--, e--) {
                const int64_t idx = r % sfull[d];
                r /= sfull[d];
                if (e >= 0) {
                    if (c->sm[e] != 1)
                        mi += idx * mstr;
                    mstr *= c->sm[e];
                }
            }
            full[i] = vm[mi];
        }
        mask = conf_array(vm, c->sm, c->nm, c->mask_bool ? WF_DTYPE_BOOL : dt);
    }
    const double scale = 0.7;
    double *want = malloc((size_t)(n_out + 1) * sizeof *want);
    ref_sdpa(vq, c->sq, c->nq, vk, c->sk, c->nk, vv, c->sv, c->nv, full, c->mask_bool, c->causal,
             scale, lead, nl, want);
    round_all(want, n_out, dt);
    wf_array *q = make(vq, c->sq, c->nq, dt, strided), *k = make(vk, c->sk, c->nk, dt, strided),
             *v = make(vv, c->sv, c->nv, dt, false);
    if (!conf_check(wf_scaled_dot_product_attention(q, k, v, scale, mask, c->causal), dt, so,
                    nl + 2, want, tol_for(dt, 1e-5)))
        printf("      (sdpa dtype %s strided %d mask %d bool %d causal %d)\n", wf_dtype_name(dt),
               strided, c->nm, c->mask_bool, c->causal);
    free(vq);
    free(vk);
    free(vv);
    free(vm);
    free(full);
    free(want);
    wf_scope_end();
}

static void test_sdpa(void)
{
    static const sdpa_case cases[] = {
        /* plain, Dv != D, Lq != Lk */
        {4, 4, 4, 0, {2, 3, 4, 8}, {2, 3, 6, 8}, {2, 3, 6, 5}, {0}, false, false},
        /* float mask broadcast over batch and heads */
        {4, 4, 4, 2, {2, 3, 4, 8}, {2, 3, 6, 8}, {2, 3, 6, 5}, {4, 6}, false, false},
        /* bool mask per batch */
        {4, 4, 4, 4, {2, 3, 4, 8}, {2, 3, 6, 8}, {2, 3, 6, 5}, {2, 1, 4, 6}, true, false},
        /* bool padding mask: one row for every query (BERT's) */
        {4, 4, 4, 4, {2, 3, 4, 8}, {2, 3, 6, 8}, {2, 3, 6, 5}, {2, 1, 1, 6}, true, false},
        /* causal with Lq < Lk and Lq > Lk (the first rows see nothing: zeros) */
        {4, 4, 4, 0, {1, 2, 4, 8}, {1, 2, 6, 8}, {1, 2, 6, 8}, {0}, false, true},
        {4, 4, 4, 0, {1, 2, 6, 8}, {1, 2, 4, 8}, {1, 2, 4, 3}, {0}, false, true},
        /* causal + bool mask */
        {3, 3, 3, 2, {2, 5, 4}, {2, 5, 4}, {2, 5, 4}, {5, 5}, true, true},
        /* k/v with one head broadcast over q's heads; grouped heads (4 over 2) */
        {4, 4, 4, 0, {2, 4, 3, 8}, {2, 1, 5, 8}, {2, 1, 5, 8}, {0}, false, false},
        {4, 4, 4, 0, {2, 4, 3, 8}, {2, 2, 5, 8}, {2, 2, 5, 6}, {0}, false, false},
        /* rank 2 and mixed ranks */
        {2, 2, 2, 0, {3, 4}, {5, 4}, {5, 2}, {0}, false, false},
        {4, 2, 2, 1, {2, 2, 3, 4}, {5, 4}, {5, 2}, {5}, false, false},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int t = 0; t < 4; t++)
            check_sdpa_case(&cases[c], FLOATS[t], (uint32_t)(c * 8 + t + 1), (c + (size_t)t) % 2);
    /* Several key and query blocks (online softmax across blocks). */
    static const sdpa_case big[] = {
        {3, 3, 3, 0, {2, 300, 16}, {2, 300, 16}, {2, 300, 8}, {0}, false, true},
        {3, 3, 3, 2, {1, 200, 8}, {1, 333, 8}, {1, 333, 8}, {200, 333}, false, false},
        {3, 3, 3, 3, {2, 200, 8}, {2, 333, 8}, {2, 333, 8}, {2, 1, 333}, true, false},
    };
    check_sdpa_case(&big[0], WF_DTYPE_F32, 77, false);
    check_sdpa_case(&big[0], WF_DTYPE_F64, 78, true);
    check_sdpa_case(&big[2], WF_DTYPE_F32, 80, false);
    check_sdpa_case(&big[1], WF_DTYPE_F32, 79, false);

    wf_scope_begin();
    /* A fully masked row gives zeros; Lk == 0 gives zeros; empty queries. */
    double mk[6] = {0, 0, 0, 1, 1, 0};
    wf_array *q = wf_ones((int64_t[]){2, 4}, 2, WF_DTYPE_F32);
    wf_array *k = wf_ones((int64_t[]){3, 4}, 2, WF_DTYPE_F32);
    double vv[6] = {1, 2, 3, 4, 5, 6};
    wf_array *v = conf_array(vv, (int64_t[]){3, 2}, 2, WF_DTYPE_F32);
    double want[4] = {0, 0, 2, 3};
    conf_check(wf_scaled_dot_product_attention(
                   q, k, v, 1, conf_array(mk, (int64_t[]){2, 3}, 2, WF_DTYPE_BOOL), false),
               WF_DTYPE_F32, (int64_t[]){2, 2}, 2, want, 1e-6);
    double z[4] = {0};
    conf_check(wf_scaled_dot_product_attention(q, wf_ones((int64_t[]){0, 4}, 2, WF_DTYPE_F32),
                                               wf_ones((int64_t[]){0, 2}, 2, WF_DTYPE_F32), 1,
                                               NULL, false),
               WF_DTYPE_F32, (int64_t[]){2, 2}, 2, z, 0);
    conf_check(wf_scaled_dot_product_attention(wf_ones((int64_t[]){0, 4}, 2, WF_DTYPE_F32), k, v,
                                               1, NULL, true),
               WF_DTYPE_F32, (int64_t[]){0, 2}, 2, NULL, 0);
    /* Errors. */
    const char *op = "wf_scaled_dot_product_attention";
    conf_check_error(wf_scaled_dot_product_attention(NULL, k, v, 1, NULL, false),
                     WF_ERR_NULL_ARGUMENT, op);
    conf_check_error(wf_scaled_dot_product_attention(q, k, NULL, 1, NULL, false),
                     WF_ERR_NULL_ARGUMENT, op);
    conf_check_error(wf_scaled_dot_product_attention(
                         q, wf_ones((int64_t[]){3, 5}, 2, WF_DTYPE_F32), v, 1, NULL, false),
                     WF_ERR_SHAPE, op);
    conf_check_error(wf_scaled_dot_product_attention(
                         q, k, wf_ones((int64_t[]){4, 2}, 2, WF_DTYPE_F32), 1, NULL, false),
                     WF_ERR_SHAPE, op);
    conf_check_error(wf_scaled_dot_product_attention(wf_ones((int64_t[]){4}, 1, WF_DTYPE_F32), k,
                                                     v, 1, NULL, false),
                     WF_ERR_SHAPE, op);
    conf_check_error(wf_scaled_dot_product_attention(
                         wf_ones((int64_t[]){2, 4}, 2, WF_DTYPE_I32), k, v, 1, NULL, false),
                     WF_ERR_DTYPE, op);
    conf_check_error(wf_scaled_dot_product_attention(
                         q, k, v, 1, wf_ones((int64_t[]){2, 3}, 2, WF_DTYPE_I32), false),
                     WF_ERR_DTYPE, op);
    conf_check_error(wf_scaled_dot_product_attention(
                         q, k, v, 1, wf_ones((int64_t[]){2, 4}, 2, WF_DTYPE_F32), false),
                     WF_ERR_SHAPE, op);
    conf_check_error(wf_scaled_dot_product_attention(
                         wf_ones((int64_t[]){3, 2, 4}, 3, WF_DTYPE_F32),
                         wf_ones((int64_t[]){2, 3, 4}, 3, WF_DTYPE_F32),
                         wf_ones((int64_t[]){2, 3, 2}, 3, WF_DTYPE_F32), 1, NULL, false),
                     WF_ERR_SHAPE, op);
    conf_check_error(wf_scaled_dot_product_attention(q, k, v, NAN, NULL, false),
                     WF_ERR_INVALID_ARGUMENT, op);
    wf_scope_end();
}

/* ---------------------------------------------------------------- activations */

static double ref_act(int kind, double x)
{
    if (isnan(x))
        return x;
    if (x == -INFINITY)
        return -0.0;
    if (x == INFINITY)
        return x;
    switch (kind) {
    case 0: return x / (1 + exp(-x));
    case 1: return 0.5 * x * erfc(-x / sqrt(2.0));
    default: {
        const double u = sqrt(2 / M_PI) * (x + 0.044715 * x * x * x);
        return 0.5 * x * (1 + tanh(u));
    }
    }
}

static wf_array *act_apply(int kind, wf_array *x)
{
    return kind == 0 ? wf_silu(x) : kind == 1 ? wf_gelu(x) : wf_gelu_tanh(x);
}

static void test_activations(void)
{
    const char *names[3] = {"wf_silu", "wf_gelu", "wf_gelu_tanh"};
    for (int kind = 0; kind < 3; kind++) {
        for (int t = 0; t < 4; t++) {
            const wf_dtype dt = FLOATS[t];
            wf_scope_begin();
            const int64_t shape[2] = {7, 45};
            const int64_t n = size_of(shape, 2);
            double *vx = values_in(n, dt, (uint32_t)(kind * 4 + t + 1), -8, 8);
            vx[0] = 0;
            vx[1] = NAN;
            vx[2] = INFINITY;
            vx[3] = -INFINITY;
            vx[4] = conf_round_to(-30, dt);
            vx[5] = conf_round_to(30, dt);
            vx[6] = conf_round_to(1e-3, dt);
            double *want = malloc((size_t)n * sizeof *want);
            for (int64_t i = 0; i < n; i++)
                want[i] = conf_round_to(ref_act(kind, vx[i]), dt);
            for (int strided = 0; strided < 2; strided++) {
                wf_array *x = make(vx, shape, 2, dt, strided);
                if (!conf_check(act_apply(kind, x), dt, shape, 2, want, tol_for(dt, 1e-5)))
                    printf("      (%s dtype %s strided %d)\n", names[kind], wf_dtype_name(dt),
                           strided);
            }
            /* A large contiguous input runs on the pool. */
            const int64_t nbig = 100003;
            double *vb = values_in(nbig, dt, 5, -6, 6), *wb = malloc((size_t)nbig * sizeof *wb);
            for (int64_t i = 0; i < nbig; i++)
                wb[i] = conf_round_to(ref_act(kind, vb[i]), dt);
            conf_check(act_apply(kind, conf_array(vb, &nbig, 1, dt)), dt, &nbig, 1, wb,
                       tol_for(dt, 1e-5));
            free(vb);
            free(wb);
            free(vx);
            free(want);
            wf_scope_end();
        }
        wf_scope_begin();
        /* 0-d, empty, integer input (computes in float32). */
        double x0 = 1.5, w0 = ref_act(kind, 1.5);
        conf_check(act_apply(kind, conf_array(&x0, NULL, 0, WF_DTYPE_F64)), WF_DTYPE_F64, NULL, 0,
                   &w0, 1e-12);
        conf_check(act_apply(kind, wf_ones((int64_t[]){0, 3}, 2, WF_DTYPE_F16)), WF_DTYPE_F16,
                   (int64_t[]){0, 3}, 2, NULL, 0);
        double iv[4] = {-2, -1, 0, 3}, iw[4];
        for (int i = 0; i < 4; i++)
            iw[i] = conf_round_to(ref_act(kind, iv[i]), WF_DTYPE_F32);
        conf_check(act_apply(kind, conf_array(iv, (int64_t[]){4}, 1, WF_DTYPE_I32)), WF_DTYPE_F32,
                   (int64_t[]){4}, 1, iw, 1e-5);
        conf_check_error(act_apply(kind, NULL), WF_ERR_NULL_ARGUMENT, names[kind]);
        wf_scope_end();
    }
}

int main(void)
{
    /* The products run on every GEMM variant this CPU has (forced). */
    const int best_isa = wf__gemm_isa();
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
        if (!wf__gemm_isa_supported(isa) || !wf_test_runs_isa(isa, best_isa))
            continue;
        printf("GEMM variant %s\n", wf__gemm_isa_name(isa));
        if (wf__gemm_isa_set(isa) != WF_OK)
            return 1;
        RUN_TEST(test_matmul_batched);
        RUN_TEST(test_matmul_large);
        RUN_TEST(test_matmul_layouts);
        RUN_TEST(test_addmm);
        RUN_TEST(test_sdpa);
    }
    if (wf__gemm_isa_set(-1) != WF_OK)
        return 1;
    RUN_TEST(test_matmul_empty);
    RUN_TEST(test_matmul_errors);
    RUN_TEST(test_norms);
    RUN_TEST(test_rope);
    RUN_TEST(test_activations);
    return TEST_SUMMARY();
}
