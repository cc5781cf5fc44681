/*
 * weft's GEMM (src/backend/cpu/gemm.h), on every ISA variant this CPU has:
 *  - float32, float64 and bfloat16 products against a (long) double reference, at
 *    edge sizes (1, 7, 15, 17, 63, 65, 257, K over one K block), with
 *    transposed and generally strided operands, alpha/beta, and C's row
 *    stride; beta = 0 never reads C;
 *  - splitting C into any blocks, or computing rows alone (the
 *    matrix-vector path), gives the same bits (the reproducibility rule),
 *    and so do operands viewed backwards (negative strides);
 *  - batch invariance through the public API: rows of matmul (float32,
 *    bfloat16, float64), addmm and attention give the same bits with 1, 7
 *    or 64 rows in the batch;
 *  - the same bits for WEFT_NUM_THREADS = 1, 2, 3, 5, 8 (this program runs
 *    itself as child processes and compares their hashes; sanitized builds
 *    run 1, 3, 8 on the baseline and the best variant);
 *  - the avx2 and avx512 variants agree bitwise for float32 and float64;
 *  - bad variant numbers give WF_ERR_UNSUPPORTED;
 *  - packed weights (a B packed once and kept with its buffer from its
 *    second product on): the same bits as packing each time, for row-major,
 *    transposed and offset B, float32, float64 and complex64; dropped with the weight, and when a donation
 *    overwrites it; never for caller-owned memory, nor where a memory limit
 *    would come within reach; one copy when threads race to make it.
 *
 *   test_gemm                 the tests
 *   WEFT_GEMM_CHILD_ISA=n test_gemm   (internal) prints hashes of the results
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/gemm.h"
#include "child_process.h"
#include "core/array.h"
#include "core/dtype.h"
#include "conformance.h"
#include "harness.h"
#include "runtime/pool.h"

static const int64_t EDGE_SIZES[] = {1, 7, 15, 17, 63, 65, 257};
enum { EDGE_COUNT = sizeof EDGE_SIZES / sizeof EDGE_SIZES[0] };

/* Deterministic floats in [-1, 1) (caller frees). */
static float *random_floats(int64_t n, uint32_t seed)
{
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    uint32_t s = seed * 2654435761u + 12345u;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        v[i] = (float)(s >> 8) / (float)(1u << 23) - 1.0f;
    }
    return v;
}

/* bfloat16 bits of f, rounded to nearest even (no NaN in these tests). */
static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint64_t fnv1a(const void *data, size_t n, uint64_t h)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211u;
    return h;
}

/* ---------------------------------------------------------------- layouts
 * A logical (rows x cols) matrix stored one of four ways; element (i, j)
 * lives at data[i * rs + j * cs]. */

enum layout { ROW_MAJOR, TRANSPOSED, STRIDED, STRIDED_T, LAYOUT_COUNT };
static const char *const LAYOUT_NAMES[LAYOUT_COUNT] = {"row-major", "transposed", "strided",
                                                       "strided-transposed"};

typedef struct stored {
    void *data;
    int64_t rs, cs;
} stored;

/* Writes v as `dtype` (float32, float64 or bfloat16) at element i of p. */
static void put(void *p, int64_t i, double v, wf_dtype dtype)
{
    if (dtype == WF_DTYPE_F64)
        ((double *)p)[i] = v;
    else if (dtype == WF_DTYPE_BF16)
        ((uint16_t *)p)[i] = to_bf16((float)v);
    else
        ((float *)p)[i] = (float)v;
}

static double get(const void *p, int64_t i, wf_dtype dtype)
{
    return dtype == WF_DTYPE_F64 ? ((const double *)p)[i] : ((const float *)p)[i];
}

/* Stores values[i * cols + j] as `dtype` in layout `l`; the gaps of strided
 * layouts hold NaN. */
static stored store_matrix(const double *values, int64_t rows, int64_t cols, enum layout l,
                           wf_dtype dtype)
{
    stored s = {0};
    int64_t span = 0;
    switch (l) {
    case ROW_MAJOR: s.rs = cols, s.cs = 1, span = rows * cols; break;
    case TRANSPOSED: s.rs = 1, s.cs = rows, span = rows * cols; break;
    case STRIDED: s.rs = 2 * cols + 3, s.cs = 2, span = rows * (2 * cols + 3); break;
    case STRIDED_T: s.rs = 3, s.cs = 3 * rows + 1, span = cols * (3 * rows + 1); break;
    default: break;
    }
    s.data = malloc((size_t)(span + 1) * wf_dtype_size(dtype));
    for (int64_t i = 0; i <= span; i++)
        put(s.data, i, NAN, dtype);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            put(s.data, i * s.rs + j * s.cs, values[i * cols + j], dtype);
    return s;
}

/* ---------------------------------------------------------------- reference */

typedef struct product {
    wf_dtype dtype; /* of A and B: float32, float64 or bfloat16 */
    wf_dtype cdt;   /* of C: float64 for float64, else float32 */
    int64_t m, n, k, ldc;
    double alpha, beta;
    double *a, *b;     /* logical values, row-major, exactly representable in dtype */
    double *c0;        /* C before the product (ldc apart), representable in cdt */
    double *want, *tol; /* the reference result and its tolerance (m x n) */
} product;

static double *values_as(int64_t n, uint32_t seed, wf_dtype dtype)
{
    float *f = random_floats(n, seed);
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    uint32_t s = seed * 7919u + 1;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        /* float64 gets bits below float32's precision too */
        v[i] = dtype == WF_DTYPE_F64 ? f[i] + (double)(s >> 8) * 0x1p-50
               : dtype == WF_DTYPE_BF16 ? from_bf16(to_bf16(f[i]))
                                        : f[i];
    }
    free(f);
    return v;
}

/* The reference in long double, and its tolerance: |error| <= (k + 4) u S,
 * S the sum of |terms| (an FMA chain's bound with room for the epilogue; u
 * of C's type). */
static void reference(product *p)
{
    const double u = p->cdt == WF_DTYPE_F64 ? 0x1p-53 : 0x1p-24;
    p->want = malloc((size_t)(p->m * p->n) * sizeof *p->want);
    p->tol = malloc((size_t)(p->m * p->n) * sizeof *p->tol);
    for (int64_t i = 0; i < p->m; i++)
        for (int64_t j = 0; j < p->n; j++) {
            long double sum = 0;
            double mag = 0;
            for (int64_t t = 0; t < p->k; t++) {
                const long double term = (long double)p->a[i * p->k + t] * p->b[t * p->n + j];
                sum += term;
                mag += fabs((double)term);
            }
            double want = (double)((long double)p->alpha * sum);
            mag *= fabs(p->alpha);
            if (p->beta != 0) {
                want += p->beta * p->c0[i * p->ldc + j];
                mag += fabs(p->beta * p->c0[i * p->ldc + j]);
            }
            p->want[i * p->n + j] = want;
            p->tol[i * p->n + j] = (double)(p->k + 4) * u * mag + 1e-300;
        }
}

static product product_new(int64_t m, int64_t n, int64_t k, double alpha, double beta,
                           wf_dtype dtype, uint32_t seed)
{
    product p = {.dtype = dtype, .cdt = dtype == WF_DTYPE_F64 ? WF_DTYPE_F64 : WF_DTYPE_F32,
                 .m = m, .n = n, .k = k, .ldc = n + 3, .alpha = alpha, .beta = beta};
    p.a = values_as(m * k, seed, dtype);
    p.b = values_as(k * n, seed + 1, dtype);
    p.c0 = values_as(m * p.ldc, seed + 2, p.cdt);
    if (beta == 0)
        for (int64_t i = 0; i < m * p.ldc; i++)
            p.c0[i] = NAN; /* must not be read */
    return p;
}

static void product_free(product *p)
{
    free(p->a);
    free(p->b);
    free(p->c0);
    free(p->want);
    free(p->tol);
}

/* Checks c against the reference (computed on first use). */
static bool check_against_reference(product *p, const void *c, const char *what)
{
    if (p->want == NULL)
        reference(p);
    int bad = 0;
    for (int64_t i = 0; i < p->m && bad < 3; i++)
        for (int64_t j = 0; j < p->n && bad < 3; j++) {
            const double want = p->want[i * p->n + j], tol = p->tol[i * p->n + j];
            const double got = get(c, i * p->ldc + j, p->cdt);
            if (!(fabs(got - want) <= tol)) {
                wf_test_fail(__FILE__, __LINE__,
                             "%s: m %lld n %lld k %lld: C[%lld][%lld] = %.17g, want %.17g "
                             "(tol %.3g)",
                             what, (long long)p->m, (long long)p->n, (long long)p->k,
                             (long long)i, (long long)j, got, want, tol);
                bad++;
            }
        }
    return bad == 0;
}

/* Runs the product with A and B in layouts la, lb, by blocks of C split at
 * the given rows and columns (NULL: one call of wf__gemm_serial). Returns
 * C (ldc apart, cdt; caller frees). */
static void *run_product(const product *p, int isa, enum layout la, enum layout lb,
                         const int64_t *row_cuts, const int64_t *col_cuts)
{
    stored a = store_matrix(p->a, p->m, p->k, la, p->dtype);
    stored b = store_matrix(p->b, p->k, p->n, lb, p->dtype);
    void *c = malloc((size_t)(p->m * p->ldc) * wf_dtype_size(p->cdt));
    for (int64_t i = 0; i < p->m * p->ldc; i++)
        put(c, i, p->c0[i], p->cdt);
    wf_gemm_args g;
    wf__gemm_args_init(&g, p->dtype, p->m, p->n, p->k, a.data, a.rs, a.cs, b.data, b.rs, b.cs, c,
                       p->ldc, p->alpha, p->beta);
    g.isa = isa;
    wf_gemm_scratch s = {0};
    if (row_cuts == NULL) {
        CHECK_OK(wf__gemm_serial(&g, &s));
    } else {
        for (int ri = 0; row_cuts[ri] < p->m; ri++)
            for (int ci = 0; col_cuts[ci] < p->n; ci++) {
                const int64_t i1 = row_cuts[ri + 1] < p->m ? row_cuts[ri + 1] : p->m;
                const int64_t j1 = col_cuts[ci + 1] < p->n ? col_cuts[ci + 1] : p->n;
                CHECK_OK(wf__gemm_block(&g, row_cuts[ri], i1, col_cuts[ci], j1, &s));
            }
    }
    wf__gemm_scratch_free(&s);
    free(a.data);
    free(b.data);
    return c;
}

/* Rows [0, rows) of x and y (p's C layout) hold the same bytes. */
static bool same_bits(const void *x, const void *y, const product *p, int64_t rows)
{
    const size_t es = wf_dtype_size(p->cdt), row = (size_t)p->ldc * es;
    for (int64_t i = 0; i < rows; i++)
        if (memcmp((const char *)x + i * row, (const char *)y + i * row, (size_t)p->n * es) != 0)
            return false;
    return true;
}

/* ---------------------------------------------------------------- accuracy */

static const char *type_name(wf_dtype d)
{
    return d == WF_DTYPE_F64 ? "f64" : d == WF_DTYPE_BF16 ? "bf16" : "f32";
}

/* One product in every layout pair: checked against the reference, and
 * blocks of C computed separately give the same bits. */
static void check_all_layouts(int isa, int64_t m, int64_t n, int64_t k, double alpha, double beta,
                              wf_dtype dtype, uint32_t seed)
{
    product p = product_new(m, n, k, alpha, beta, dtype, seed);
    const int64_t row_cuts[] = {0, 5, 33, INT64_MAX}, col_cuts[] = {0, 17, 50, INT64_MAX};
    char what[128];
    for (int la = 0; la < LAYOUT_COUNT; la++)
        for (int lb = 0; lb < LAYOUT_COUNT; lb++) {
            snprintf(what, sizeof what, "%s %s A %s, B %s", wf__gemm_isa_name(isa),
                     type_name(dtype), LAYOUT_NAMES[la], LAYOUT_NAMES[lb]);
            void *whole = run_product(&p, isa, la, lb, NULL, NULL);
            check_against_reference(&p, whole, what);
            if (la == lb) { /* blocks: one layout pair per case is enough */
                void *blocks = run_product(&p, isa, la, lb, row_cuts, col_cuts);
                if (!CHECK(same_bits(whole, blocks, &p, p.m)))
                    printf("      (%s: blocks differ)\n", what);
                free(blocks);
            }
            free(whole);
        }
    product_free(&p);
}

/* Shapes: each edge size as m, n and k in turn, K over one K block, and a
 * few alpha/beta pairs (beta 0: C is NaN and must not be read). */
static void check_shapes(int isa, wf_dtype dtype)
{
    static const double ab[3][2] = {{1, 0}, {0.5, 2}, {-1, 1}};
    for (int e = 0; e < EDGE_COUNT; e++) {
        const int64_t s = EDGE_SIZES[e];
        const double *c = ab[e % 3];
        check_all_layouts(isa, s, 17, 65, c[0], c[1], dtype, (uint32_t)(10 * e + 1));
        check_all_layouts(isa, 15, s, 63, c[0], c[1], dtype, (uint32_t)(10 * e + 2));
        check_all_layouts(isa, 7, 65, s, c[0], c[1], dtype, (uint32_t)(10 * e + 3));
    }
    check_all_layouts(isa, 65, 70, 600, 1, 1, dtype, 91); /* three K blocks, beta */
    check_all_layouts(isa, 3, 100, 531, 2, 0, dtype, 92); /* odd K over blocks, few rows */
    check_all_layouts(isa, 1, 257, 257, 1, 0, dtype, 93); /* a vector */
    /* A's rows 4 or 8 KB apart: packed, not read where they lie */
    check_all_layouts(isa, 15, 17, 1024, 1, 0, dtype, 94);
}

static void test_float32_every_variant(void)
{
    const int best_isa = wf__gemm_isa();
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++)
        if (wf__gemm_isa_supported(isa) && wf_test_runs_isa(isa, best_isa))
            check_shapes(isa, WF_DTYPE_F32);
}

static void test_float64_every_variant(void)
{
    const int best_isa = wf__gemm_isa();
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++)
        if (wf__gemm_isa_supported(isa) && wf_test_runs_isa(isa, best_isa))
            check_shapes(isa, WF_DTYPE_F64);
}

static void test_bfloat16_where_supported(void)
{
    int tested = 0;
    const int best_isa = wf__gemm_isa();
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++)
        if (wf__gemm_isa_supported(isa) && wf__gemm_isa_has_bf16(isa) &&
            wf_test_runs_isa(isa, best_isa)) {
            check_shapes(isa, WF_DTYPE_BF16);
            tested++;
        }
    if (tested == 0)
        printf("    (no variant with AVX512_BF16 here: bfloat16 goes through float32)\n");
}

/* Rows computed alone (1 row: the matrix-vector path; 7 rows; 16 and 30
 * rows, shared evenly between two tiles) give the bits they get inside 64
 * rows (five tiles), for B read in place and packed; K 300 and 1024 (A's
 * rows 4 or 8 KB apart: packed, not read where they lie). */
/* Rows [firsts[r], firsts[r] + counts[r]) of product p computed alone give
 * the bits they have in `full` (p computed whole). */
static void check_rows_alone(const product *p, int isa, enum layout la, enum layout lb,
                             const void *full, const int64_t *firsts, const int64_t *counts,
                             int n)
{
    const size_t row = (size_t)p->ldc * wf_dtype_size(p->cdt);
    for (int r = 0; r < n; r++) {
        product q = *p;
        q.m = counts[r];
        q.a = p->a + firsts[r] * p->k;
        q.c0 = p->c0 + firsts[r] * p->ldc;
        void *part = run_product(&q, isa, la, lb, NULL, NULL);
        if (!CHECK(same_bits(part, (const char *)full + firsts[r] * row, &q, q.m)))
            printf("      (%s %s, A %s, B %s, k %lld: rows %lld..+%lld differ)\n",
                   wf__gemm_isa_name(isa), type_name(p->dtype), LAYOUT_NAMES[la],
                   LAYOUT_NAMES[lb], (long long)p->k, (long long)firsts[r], (long long)counts[r]);
        free(part);
    }
}

static void test_rows_alone_same_bits(void)
{
    static const wf_dtype types[3] = {WF_DTYPE_F32, WF_DTYPE_F64, WF_DTYPE_BF16};
    /* K 1024 in release only (the sanitizers see A packed in check_shapes) */
    static const int64_t ks[2] = {300, 1024};
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    const int ks_count = 1;
#else
    const int ks_count = 2;
#endif
    const int best_isa = wf__gemm_isa();
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
        if (!wf__gemm_isa_supported(isa) || !wf_test_runs_isa(isa, best_isa))
            continue;
        for (int t = 0; t < 3; t++) {
            if (types[t] == WF_DTYPE_BF16 && !wf__gemm_isa_has_bf16(isa))
                continue;
            for (int lb = 0; lb < ks_count * LAYOUT_COUNT; lb++) {
                product p = product_new(64, 200, ks[lb / LAYOUT_COUNT], 1, 0, types[t],
                                        (uint32_t)(500 + lb));
                const enum layout layout_b = (enum layout)(lb % LAYOUT_COUNT);
                void *full = run_product(&p, isa, ROW_MAJOR, layout_b, NULL, NULL);
                static const int64_t firsts[] = {0, 13, 63, 5, 20}, counts[] = {1, 7, 1, 16, 30};
                check_rows_alone(&p, isa, ROW_MAJOR, layout_b, full, firsts, counts, 5);
                free(full);
                product_free(&p);
            }
        }
    }
}

/* A product of more rows than the GEMM keeps A panels for (2048: two
 * passes over K), of several row groups and of two B strips (n > 512) gives
 * each row the bits of that row computed alone: rows at the group, pass and
 * strip edges. K 16: A's rows read in place (float64) or, strided, packed
 * (float32); K 1024 (float32 rows 4 KB apart, so packed; release only). */
static void test_row_passes_and_strips_same_bits(void)
{
    static const wf_dtype types[2] = {WF_DTYPE_F32, WF_DTYPE_F64};
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    static const int64_t ks[1] = {16};
#else
    static const int64_t ks[2] = {16, 1024};
#endif
    const int best_isa = wf__gemm_isa();
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
        if (!wf__gemm_isa_supported(isa) || !wf_test_runs_isa(isa, best_isa))
            continue;
        for (size_t kk = 0; kk < sizeof ks / sizeof ks[0]; kk++)
            for (int t = 0; t < 2; t++) {
                if (ks[kk] > 16 && (types[t] != WF_DTYPE_F32 || isa != best_isa))
                    continue; /* the long K on the dispatched variant only: its time */
                product p = product_new(2100, 600, ks[kk], 1, 0, types[t], (uint32_t)(900 + t));
                /* K 16: A strided as well, so its panels are packed */
                const enum layout la = ks[kk] == 16 && t == 0 ? STRIDED : ROW_MAJOR;
                void *full = run_product(&p, isa, la, ROW_MAJOR, NULL, NULL);
                static const int64_t firsts[] = {0, 250, 2040, 2095}, counts[] = {7, 20, 14, 5};
                check_rows_alone(&p, isa, la, ROW_MAJOR, full, firsts, counts, 4);
                free(full);
                product_free(&p);
            }
    }
}

/* A float32 product of a few rows (1 to the direct kernels' count) whose B
 * is stored as float16 or bfloat16 and read where it lies (b_stored:
 * serving small batches with half weights) gives the bits of the float32
 * product of B converted first: B row-major and transposed (W.T), K over
 * several K blocks, widths with partial vectors and over 1024, alpha and
 * beta, A's rows strided. Where a variant cannot (wf__gemm_reads_half_b),
 * nothing runs. */
static int check_half_b(int isa, wf_dtype half, int64_t m, int64_t k, int64_t n, int64_t csx,
                        double alpha, double beta, bool transposed)
{
    /* B[kk][j] at kk * rsb + j * csb: rows contiguous when transposed (W.T). */
    const int64_t rsb = transposed ? 1 : n, csb = transposed ? k : 1;
    float *x = random_floats(m * k * csx, (uint32_t)(k + n)), *bf = random_floats(k * n, 77);
    float *c0 = random_floats(m * n, 78), *c1 = malloc((size_t)(m * n) * sizeof *c1);
    float *c2 = malloc((size_t)(m * n) * sizeof *c2);
    uint16_t *bh = malloc((size_t)(k * n) * sizeof *bh);
    for (int64_t i = 0; i < k * n; i++) { /* bf: the halves' exact float32 values */
        bh[i] = half == WF_DTYPE_BF16 ? to_bf16(bf[i]) : wf__f32_to_f16(bf[i]);
        bf[i] = half == WF_DTYPE_BF16 ? from_bf16(bh[i]) : wf__f16_to_f32(bh[i]);
    }
    memcpy(c1, c0, (size_t)(m * n) * sizeof *c1);
    memcpy(c2, c0, (size_t)(m * n) * sizeof *c2);
    wf_gemm_args g, h;
    wf_gemm_scratch s = {0};
    wf__gemm_args_init(&g, WF_DTYPE_F32, m, n, k, x, k * csx, csx, bf, rsb, csb, c1, n, alpha,
                       beta);
    wf__gemm_args_init(&h, WF_DTYPE_F32, m, n, k, x, k * csx, csx, bh, rsb, csb, c2, n, alpha,
                       beta);
    g.isa = h.isa = isa;
    h.b_stored = half;
    CHECK_OK(wf__gemm_serial(&g, &s));
    CHECK_OK(wf__gemm_serial(&h, &s));
    const int bad = memcmp(c1, c2, (size_t)(m * n) * sizeof *c1) != 0;
    if (bad)
        printf("      (%s, B %s%s, m %lld, k %lld, n %lld, csx %lld: bits differ)\n",
               wf__gemm_isa_name(isa), wf_dtype_name(half), transposed ? " transposed" : "",
               (long long)m, (long long)k, (long long)n, (long long)csx);
    wf__gemm_scratch_free(&s);
    free(x), free(bf), free(c0), free(c1), free(c2), free(bh);
    return bad;
}

/* The same through wf_matmul under variant `isa` (the column blocks split
 * over the pool, the half-B path chosen by matmul.c where allowed), x of m
 * rows: x @ W
 * for W float16 or bfloat16 and x float32 (a float32 result) or the same
 * half type (a half result, rounded once), against the product of the
 * float32 conversions (rounded to the half type alike). Not bfloat16 @
 * bfloat16 where the variant multiplies bfloat16 itself (other sums). */
static int check_half_weights_matmul(int isa, int64_t m)
{
    const int64_t k = 784, n = 1030, sx[2] = {m, k}, sw[2] = {k, n};
    float *xv = random_floats(m * k, 5), *wv = random_floats(k * n, 6);
    int bad = 0;
    wf_scope_begin();
    wf_array *x32 = wf_array_from_data(xv, sx, 2, WF_DTYPE_F32);
    wf_array *w32 = wf_array_from_data(wv, sw, 2, WF_DTYPE_F32);
    static const wf_dtype halves[2] = {WF_DTYPE_F16, WF_DTYPE_BF16};
    const int64_t swt[2] = {n, k};
    wf_array *w32t = wf_transpose(wf_array_from_data(wv, swt, 2, WF_DTYPE_F32), NULL, 0);
    for (int h = 0; h < 2; h++)
        for (int xh = 0; xh < 4; xh++) {
            if (xh % 2 && halves[h] == WF_DTYPE_BF16 && wf__gemm_isa_has_bf16(isa))
                continue;
            /* xh: x half (odd), W stored n x k and read transposed (2, 3) */
            wf_array *w = xh >= 2 ? wf_transpose(wf_astype(wf_transpose(w32t, NULL, 0),
                                                           halves[h]),
                                                 NULL, 0)
                                  : wf_astype(w32, halves[h]);
            wf_array *x = xh % 2 ? wf_astype(x32, halves[h]) : x32;
            wf_array *got = wf_matmul(x, w);
            wf_array *want = wf_astype(
                wf_matmul(wf_astype(x, WF_DTYPE_F32), wf_astype(w, WF_DTYPE_F32)), wf_array_dtype(got));
            wf_array *both[2] = {got, want};
            const void *pg = NULL, *pw = NULL;
            CHECK_OK(wf_eval(both, 2));
            CHECK_OK(wf_array_data(got, &pg));
            CHECK_OK(wf_array_data(want, &pw));
            if (!pg || !pw ||
                memcmp(pg, pw, (size_t)(m * n) * wf_dtype_size(wf_array_dtype(got))) != 0)
                bad++;
        }
    wf_scope_end();
    free(xv);
    free(wv);
    return bad;
}

static void test_half_b_read_in_place(void)
{
    static const int64_t shapes[][3] = {{784, 1024, 1}, {600, 1500, 1}, {17, 65, 2}, {1, 7, 1},
                                        {300, 33, 3}};
    static const double ab[][2] = {{1, 0}, {0.5, 2}};
    int ran = 0;
    const int best_isa = wf__gemm_isa();
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
        if (!wf__gemm_isa_supported(isa) || !wf_test_runs_isa(isa, best_isa))
            continue;
        for (int t = 0; t < 2; t++) {
            const wf_dtype half = t ? WF_DTYPE_BF16 : WF_DTYPE_F16;
            CHECK(!wf__gemm_reads_half_b(isa, half, 5, 9, 1)); /* a few rows only */
            CHECK(!wf__gemm_reads_half_b(isa, half, 1, 9, 3)); /* contiguous rows or columns */
            CHECK(!wf__gemm_reads_half_b(isa, WF_DTYPE_F32, 1, 9, 1));
            for (int64_t m = 1; m <= 4; m++) {
                CHECK_EQ_INT(wf__gemm_reads_half_b(isa, half, m, 9, 1),
                             wf__gemm_reads_half_b(isa, half, m, 1, 9));
                if (!wf__gemm_reads_half_b(isa, half, m, 9, 1))
                    continue;
                ran++;
                for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                    for (int e = 0; e < 4; e++)
                        CHECK_EQ_INT(check_half_b(isa, half, m, shapes[s][0], shapes[s][1],
                                                  shapes[s][2], ab[e % 2][0], ab[e % 2][1],
                                                  e >= 2),
                                     0);
            }
        }
        CHECK_OK(wf__gemm_isa_set(isa));
        CHECK_EQ_INT(check_half_weights_matmul(isa, 1), 0);
        CHECK_EQ_INT(check_half_weights_matmul(isa, 3), 0);
    }
    CHECK_OK(wf__gemm_isa_set(-1));
    printf("    %d variant, half type and row count triples read half B in place\n", ran);
    CHECK(ran > 0 || !wf__gemm_isa_supported(WF_GEMM_ISA_AVX2));
}

/* AVX2 and AVX-512 form the same sums in the same order. */
static void test_avx2_and_avx512_agree(void)
{
    if (!wf__gemm_isa_supported(WF_GEMM_ISA_AVX512)) {
        printf("    (no AVX-512 here: nothing to compare)\n");
        return;
    }
    static const int64_t shapes[][3] = {{64, 200, 300}, {1, 1024, 784}, {17, 65, 257}};
    for (int s = 0; s < 3; s++)
        for (int t = 0; t < 2; t++) {
            product p = product_new(shapes[s][0], shapes[s][1], shapes[s][2], 0.5, 2,
                                    t ? WF_DTYPE_F64 : WF_DTYPE_F32, (uint32_t)(700 + s));
            for (int lb = 0; lb < LAYOUT_COUNT; lb++) {
                void *x = run_product(&p, WF_GEMM_ISA_AVX2, ROW_MAJOR, (enum layout)lb, NULL,
                                      NULL);
                void *y = run_product(&p, WF_GEMM_ISA_AVX512, ROW_MAJOR, (enum layout)lb, NULL,
                                      NULL);
                if (!CHECK(same_bits(x, y, &p, p.m)))
                    printf("      (shape %d %s, B %s)\n", s, type_name(p.dtype),
                           LAYOUT_NAMES[lb]);
                free(x);
                free(y);
            }
            product_free(&p);
        }
}

static void test_variant_errors(void)
{
    CHECK_EQ_INT(wf__gemm_isa_set(WF_GEMM_ISA_COUNT), WF_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(wf_last_error_message(), "gemm");
    wf_clear_error();
    CHECK_EQ_INT(wf__gemm_isa_set(-7), WF_ERR_UNSUPPORTED);
    wf_clear_error();
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
        CHECK(wf__gemm_isa_name(isa) != NULL);
        if (!wf__gemm_isa_supported(isa)) {
            CHECK_EQ_INT(wf__gemm_isa_set(isa), WF_ERR_UNSUPPORTED);
            wf_clear_error();
        }
    }
    CHECK(wf__gemm_isa_name(WF_GEMM_ISA_COUNT) == NULL);
    CHECK(wf__gemm_isa_supported(WF_GEMM_ISA_BASELINE));
    CHECK_OK(wf__gemm_isa_set(WF_GEMM_ISA_BASELINE));
    CHECK_EQ_INT(wf__gemm_isa(), WF_GEMM_ISA_BASELINE);
    CHECK_OK(wf__gemm_isa_set(-1));
}

/* ---------------------------------------------------------------- public API cases
 * Shared by the batch-invariance test and the thread-count children. */

static wf_array *f32_array(const float *v, const int64_t *shape, int nd)
{
    return wf_array_from_data(v, shape, nd, WF_DTYPE_F32);
}

/* The bytes of `a` (evaluated, contiguous), valid while `a` lives. */
static const char *bytes_of(wf_array *a)
{
    const void *p = NULL;
    if (!CHECK_OK(wf_array_data(a, &p)))
        return NULL;
    return p;
}

enum { INV_K = 300, INV_N = 100, ATT_LK = 200, ATT_D = 64, ATT_HEADS = 2 };

/* matmul (B plain or transposed), addmm, bfloat16 and float64 matmul of
 * `rows` rows of A starting at row `first` of the 64-row A; results in
 * out[0..4]. */
static void row_products(const float *a64, const float *b, const float *bias, int64_t first,
                         int64_t rows, wf_array **out)
{
    const int64_t sa[2] = {rows, INV_K}, sb[2] = {INV_K, INV_N}, sbt[2] = {INV_N, INV_K};
    const int64_t sbias[1] = {INV_N};
    wf_array *a = f32_array(a64 + first * INV_K, sa, 2);
    wf_array *bm = f32_array(b, sb, 2);
    wf_array *stored_t = f32_array(b, sbt, 2); /* B^T's values, viewed transposed */
    wf_array *bt = wf_transpose(stored_t, NULL, 0);
    wf_array *c = f32_array(bias, sbias, 1);
    out[0] = wf_matmul(a, bm);
    out[1] = wf_matmul(a, bt);
    out[2] = wf_addmm(c, a, bm, 0.5, 2.0);
    wf_array *ah = wf_astype(a, WF_DTYPE_BF16), *bh = wf_astype(bm, WF_DTYPE_BF16);
    out[3] = wf_matmul(ah, bh);
    wf_array *ad = wf_astype(a, WF_DTYPE_F64), *bd = wf_astype(bm, WF_DTYPE_F64);
    out[4] = wf_matmul(ad, bd);
    wf_release(ah);
    wf_release(bh);
    wf_release(ad);
    wf_release(bd);
    wf_release(a);
    wf_release(bm);
    wf_release(stored_t);
    wf_release(bt);
    wf_release(c);
}

/* Attention of `rows` query rows (each head's rows first..first+rows of
 * the 64-row q) over 200 keys, with an additive mask; causal off. */
static wf_array *attention_rows(const float *q64, const float *k, const float *v,
                                const float *mask64, int64_t first, int64_t rows)
{
    float *q = malloc((size_t)(ATT_HEADS * rows * ATT_D) * sizeof *q);
    for (int h = 0; h < ATT_HEADS; h++)
        memcpy(q + h * rows * ATT_D, q64 + (h * 64 + first) * ATT_D,
               (size_t)(rows * ATT_D) * sizeof *q);
    const int64_t sq[4] = {1, ATT_HEADS, rows, ATT_D}, skv[4] = {1, ATT_HEADS, ATT_LK, ATT_D};
    const int64_t sm[2] = {rows, ATT_LK};
    wf_array *qa = f32_array(q, sq, 4), *ka = f32_array(k, skv, 4), *va = f32_array(v, skv, 4);
    wf_array *ma = f32_array(mask64 + first * ATT_LK, sm, 2);
    wf_array *o = wf_scaled_dot_product_attention(qa, ka, va, 0.125, ma, false);
    wf_release(qa);
    wf_release(ka);
    wf_release(va);
    wf_release(ma);
    free(q);
    return o;
}

/* Row block `first..first+rows` of `part` (rows x cols, or heads x rows x
 * cols for attention) equals the same rows of `full` (64 rows) bytewise. */
static bool rows_equal(wf_array *part, wf_array *full, int64_t heads, int64_t first,
                       int64_t rows, int64_t cols)
{
    const char *p = bytes_of(part), *f = bytes_of(full);
    if (p == NULL || f == NULL)
        return false;
    const size_t item = wf_dtype_size(wf_array_dtype(part));
    const size_t row = (size_t)cols * item;
    for (int64_t h = 0; h < heads; h++)
        if (memcmp(p + (size_t)(h * rows) * row, f + (size_t)(h * 64 + first) * row,
                   (size_t)rows * row) != 0)
            return false;
    return true;
}

static void test_batch_invariance(void)
{
    float *a64 = random_floats(64 * INV_K, 11), *b = random_floats(INV_K * INV_N, 12);
    float *bias = random_floats(INV_N, 13);
    float *q64 = random_floats(ATT_HEADS * 64 * ATT_D, 14);
    float *k = random_floats(ATT_HEADS * ATT_LK * ATT_D, 15);
    float *v = random_floats(ATT_HEADS * ATT_LK * ATT_D, 16);
    float *mask64 = random_floats(64 * ATT_LK, 17);
    static const char *const names[6] = {"matmul", "matmul B^T", "addmm", "matmul bf16",
                                         "matmul f64", "attention"};
    const int best_isa = wf__gemm_isa();
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
        if (!wf__gemm_isa_supported(isa) || !wf_test_runs_isa(isa, best_isa))
            continue;
        CHECK_OK(wf__gemm_isa_set(isa));
        wf_array *full[6];
        row_products(a64, b, bias, 0, 64, full);
        full[5] = attention_rows(q64, k, v, mask64, 0, 64);
        /* 1 to 4 rows: the matrix-vector kernels (B in place and through its
         * transpose); 7: the packed path. */
        static const int64_t firsts[] = {0, 40, 9, 33, 45, 20, 57};
        static const int64_t counts[] = {1, 1, 2, 3, 4, 7, 7};
        for (int t = 0; t < 7; t++) {
            wf_array *part[6];
            row_products(a64, b, bias, firsts[t], counts[t], part);
            part[5] = attention_rows(q64, k, v, mask64, firsts[t], counts[t]);
            for (int c = 0; c < 6; c++) {
                const bool att = c == 5;
                if (!CHECK(rows_equal(part[c], full[c], att ? ATT_HEADS : 1, firsts[t], counts[t],
                                      att ? ATT_D : INV_N)))
                    printf("      (%s, %s: rows %lld..+%lld)\n", wf__gemm_isa_name(isa),
                           names[c], (long long)firsts[t], (long long)counts[t]);
                wf_release(part[c]);
            }
        }
        for (int c = 0; c < 6; c++)
            wf_release(full[c]);
    }
    CHECK_OK(wf__gemm_isa_set(-1));
    free(a64);
    free(b);
    free(bias);
    free(q64);
    free(k);
    free(v);
    free(mask64);
}

/* Operands viewed backwards (negative strides: slices with step -1) give
 * the bits of their contiguous copies. */
static void test_negative_strides(void)
{
    static const wf_dtype types[3] = {WF_DTYPE_F32, WF_DTYPE_F64, WF_DTYPE_BF16};
    static const int64_t shapes[][3] = {{1, 65, 40}, {7, 65, 33}, {70, 300, 90}};
    const int best_isa = wf__gemm_isa();
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
        if (!wf__gemm_isa_supported(isa) || !wf_test_runs_isa(isa, best_isa))
            continue;
        CHECK_OK(wf__gemm_isa_set(isa));
        for (int t = 0; t < 3; t++)
            for (int sh = 0; sh < 3; sh++) {
                const int64_t m = shapes[sh][0], k = shapes[sh][1], n = shapes[sh][2];
                float *va = random_floats(m * k, 31), *vb = random_floats(k * n, 32);
                const int64_t sa[2] = {m, k}, sb[2] = {k, n};
                wf_array *a32 = f32_array(va, sa, 2), *b32 = f32_array(vb, sb, 2);
                wf_array *a = wf_astype(a32, types[t]), *b = wf_astype(b32, types[t]);
                /* A backwards in both axes, B backwards in its rows, then in both. */
                const int64_t a_start[2] = {m - 1, k - 1}, a_stop[2] = {-m - 1, -k - 1};
                const int64_t b_start[2] = {k - 1, 0}, b_stop[2] = {-k - 1, n};
                const int64_t b2_start[2] = {k - 1, n - 1}, b2_stop[2] = {-k - 1, -n - 1};
                const int64_t back[2] = {-1, -1}, rows_back[2] = {-1, 1};
                wf_array *af = wf_slice(a, a_start, a_stop, back);
                wf_array *bfs[2] = {wf_slice(b, b_start, b_stop, rows_back),
                                    wf_slice(b, b2_start, b2_stop, back)};
                wf_array *zero = wf_scalar(0, types[t]); /* x + 0: a contiguous copy */
                for (int v = 0; v < 2; v++) {
                    wf_array *got = wf_matmul(af, bfs[v]);
                    wf_array *ac = wf_add(af, zero), *bc = wf_add(bfs[v], zero);
                    wf_array *want = wf_matmul(ac, bc);
                    const char *g = bytes_of(got), *w = bytes_of(want);
                    if (!CHECK(g && w && memcmp(g, w, wf_array_nbytes(want)) == 0))
                        printf("      (%s %s, %lldx%lldx%lld, B view %d)\n",
                               wf__gemm_isa_name(isa), type_name(types[t]), (long long)m,
                               (long long)k, (long long)n, v);
                    wf_release(got);
                    wf_release(ac);
                    wf_release(bc);
                    wf_release(want);
                }
                wf_array *arrays[] = {a32, b32, a, b, af, bfs[0], bfs[1], zero};
                for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
                    wf_release(arrays[i]);
                free(va);
                free(vb);
            }
    }
    CHECK_OK(wf__gemm_isa_set(-1));
}

/* ---------------------------------------------------------------- thread counts */

/* Products that split into many GEMM blocks; their hashes, one per line. */
static void child_print_hashes(void)
{
    enum { M = 210, N = 200, K = 300, B = 6 };
    float *a = random_floats(B * M * K, 21), *b = random_floats(B * K * N, 22);
    float *q = random_floats(ATT_HEADS * 64 * ATT_D, 14), *mask = random_floats(64 * ATT_LK, 17);
    float *k = random_floats(ATT_HEADS * ATT_LK * ATT_D, 15);
    float *v = random_floats(ATT_HEADS * ATT_LK * ATT_D, 16);
    float *wv = random_floats(784 * 1024, 23);
    const int64_t sa[2] = {M, K}, sb[2] = {K, N}, sba[3] = {B, M / 3, K}, sbb[3] = {B, K, N};
    const int64_t sv[2] = {1, 784}, sw[2] = {784, 1024};
    wf_array *am = f32_array(a, sa, 2), *bm = f32_array(b, sb, 2);
    wf_array *ab = f32_array(a, sba, 3), *bb = f32_array(b, sbb, 3);
    wf_array *x = f32_array(a, sv, 2), *w = f32_array(wv, sw, 2);
    wf_array *bt = wf_transpose(bm, NULL, 0), *c = wf_ones((int64_t[]){N}, 1, WF_DTYPE_F32);
    wf_array *ah = wf_astype(am, WF_DTYPE_BF16), *bh = wf_astype(bm, WF_DTYPE_BF16);
    wf_array *ad = wf_astype(am, WF_DTYPE_F64), *bd = wf_astype(bm, WF_DTYPE_F64);
    wf_array *results[10] = {
        wf_matmul(am, bm),
        wf_matmul(bm, bt),
        wf_matmul(ab, bb),
        wf_addmm(c, am, bm, 0.5, 0.25),
        wf_matmul(ah, bh),
        wf_matmul(x, w),
        attention_rows(q, k, v, mask, 0, 64),
        wf_matmul(ad, bd),
        NULL,
        NULL,
    };
    const int64_t sq[4] = {1, ATT_HEADS, 64, ATT_D}, skv[4] = {1, ATT_HEADS, ATT_LK, ATT_D};
    wf_array *qa = f32_array(q, sq, 4), *ka = f32_array(k, skv, 4), *va = f32_array(v, skv, 4);
    results[8] = wf_scaled_dot_product_attention(qa, ka, va, 0.125, NULL, true);
    wf_array *qd = wf_astype(qa, WF_DTYPE_F64), *kd = wf_astype(ka, WF_DTYPE_F64);
    wf_array *vd = wf_astype(va, WF_DTYPE_F64);
    results[9] = wf_scaled_dot_product_attention(qd, kd, vd, 0.125, NULL, true);
    for (int i = 0; i < 10; i++) {
        const char *bytes = bytes_of(results[i]);
        const uint64_t h = bytes ? fnv1a(bytes, wf_array_nbytes(results[i]), 1469598103934665603u)
                                 : 0;
        printf("case %d hash %016llx\n", i, (unsigned long long)h);
        wf_release(results[i]);
    }
    wf_array *inputs[] = {am, bm, ab, bb, x, w, bt, c, ah, bh, ad, bd, qa, ka, va, qd, kd, vd};
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++)
        wf_release(inputs[i]);
    free(a);
    free(b);
    free(q);
    free(mask);
    free(k);
    free(v);
    free(wv);
}

static void test_same_bits_for_any_thread_count(void)
{
    char self[4096];
    if (!CHECK(wf_test_self_path(self, sizeof self)))
        return;
    /* The cases really split: several GEMM blocks each on a pool of
     * several threads (this process's; a one-thread pool makes one block
     * of all of C). */
    wf_gemm_args g;
    wf__gemm_args_init(&g, WF_DTYPE_F32, 210, 200, 300, NULL, 300, 1, NULL, 200, 1, NULL, 200, 1,
                       0);
    int64_t mb, nb;
    wf__gemm_blocks(&g, 1, &mb, &nb);
    const bool one_thread = wf__pool_size() == 1;
    const int64_t blocks = (210 + mb - 1) / mb * ((200 + nb - 1) / nb);
    CHECK(one_thread ? blocks == 1 : blocks >= 4);
    wf__gemm_args_init(&g, WF_DTYPE_F32, 1, 1024, 784, NULL, 784, 1, NULL, 1024, 1, NULL, 1024, 1,
                       0);
    wf__gemm_blocks(&g, 1, &mb, &nb);
    CHECK(mb == 1 && (1024 + nb - 1) / nb >= (one_thread ? 1 : 2));

#ifdef WF_TEST_SLOW_BUILD /* sanitizers, coverage */
    /* Sanitized children start slowly: 1, 3 and 8 threads, baseline and
     * the best variant (release builds run them all). */
    static const int threads[] = {1, 3, 8};
    const int best = wf__gemm_isa();
#else
    static const int threads[] = {1, 2, 3, 5, 8};
    const int best = -1;
#endif
    const int counts = (int)(sizeof threads / sizeof threads[0]);
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
        if (!wf__gemm_isa_supported(isa) || (best >= 0 && isa != 0 && isa != best) ||
            !wf_test_runs_isa(isa, wf__gemm_isa()))
            continue;
        static char first[2048], other[2048];
        char flag[64];
        snprintf(flag, sizeof flag, "WEFT_GEMM_CHILD_ISA=%d", isa);
        wf_test_check_thread_counts(__FILE__, __LINE__, wf__gemm_isa_name(isa), self, flag,
                                    threads, (size_t)counts, first, other, sizeof other);
        CHECK(strstr(first, "case 9 hash") != NULL);
    }
}

/* ---------------------------------------------------------------- packed weights */

/* A (rows x cols) matrix of `dtype` (float32 or float64) from v. */
static wf_array *matrix_of(const float *v, int64_t rows, int64_t cols, wf_dtype dtype)
{
    const int64_t shape[2] = {rows, cols};
    if (dtype == WF_DTYPE_BF16) { /* float32 rounded, evaluated: a buffer of its own */
        wf_array *f = matrix_of(v, rows, cols, WF_DTYPE_F32);
        wf_array *h = wf_astype(f, WF_DTYPE_BF16);
        wf_release(f);
        CHECK_OK(wf_eval(&h, 1));
        return h;
    }
    if (dtype == WF_DTYPE_F32)
        return wf_array_from_data(v, shape, 2, WF_DTYPE_F32);
    double *d = malloc((size_t)(rows * cols) * sizeof *d);
    for (int64_t i = 0; i < rows * cols; i++)
        d[i] = v[i];
    wf_array *a = wf_array_from_data(d, shape, 2, WF_DTYPE_F64);
    free(d);
    return a;
}

/* Whether x and y (evaluated here) hold the same bytes; releases both. */
static bool same_bytes_then_release(wf_array *x, wf_array *y)
{
    const void *xv = NULL, *yv = NULL;
    const bool same = x && y && wf_array_data(x, &xv) == WF_OK && wf_array_data(y, &yv) == WF_OK &&
                      wf_array_nbytes(x) == wf_array_nbytes(y) &&
                      memcmp(xv, yv, wf_array_nbytes(x)) == 0;
    wf_release(x);
    wf_release(y);
    return same;
}

/* The weight of case `c` as the product reads it: (k x n), row-major,
 * the transpose of an (n x k) matrix, or rows 3.. of a taller matrix (an
 * offset into its buffer); built from v ((k + 3) * n values) on a fresh
 * buffer each call. */
static wf_array *weight_case(int c, const float *v, int64_t k, int64_t n, wf_dtype dtype)
{
    if (c == 0)
        return matrix_of(v, k, n, dtype);
    if (c == 1) {
        wf_array *t = matrix_of(v, n, k, dtype);
        wf_array *w = wf_transpose(t, (const int[]){1, 0}, 2);
        wf_release(t);
        return w;
    }
    wf_array *tall = matrix_of(v, k + 3, n, dtype);
    wf_array *w = wf_slice(tall, (const int64_t[]){3, 0}, (const int64_t[]){k + 3, n},
                           (const int64_t[]){1, 1});
    wf_release(tall);
    return w;
}

static void test_packed_weights_same_bits(void)
{
    static const int64_t shapes[][2] = {{300, 200}, {1100, 520}, {97, 33}};
    static const int64_t rows[] = {4, 7, 30, 70};
    const int best_isa = wf__gemm_isa();
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
        if (!wf__gemm_isa_supported(isa) || !wf_test_runs_isa(isa, best_isa))
            continue;
        CHECK_OK(wf__gemm_isa_set(isa));
        for (int t = 0; t < 3; t++) {
            /* bfloat16 weights are packed once by the AMX variant only */
            const wf_dtype dtype = t == 2 ? WF_DTYPE_BF16 : t ? WF_DTYPE_F64 : WF_DTYPE_F32;
            if (dtype == WF_DTYPE_BF16 && isa != WF_GEMM_ISA_AMX_BF16)
                continue;
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                const int64_t k = shapes[s][0], n = shapes[s][1];
                float *v = random_floats((k + 3) * n, (uint32_t)(40 + s));
                float *xv = random_floats(70 * k, (uint32_t)(50 + s));
                for (int c = 0; c < 3; c++) {
                    const size_t before = wf__gemm_packed_b_bytes();
                    wf_array *w = weight_case(c, v, k, n, dtype);
                    for (int round = 0; round < 2; round++)
                        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
                            wf_array *x = matrix_of(xv, rows[r], k, dtype);
                            wf_array *fresh = weight_case(c, v, k, n, dtype); /* packs anew */
                            if (!CHECK(same_bytes_then_release(wf_matmul(x, w),
                                                               wf_matmul(x, fresh))))
                                printf("      (%s, %s, %lld x %lld @ %lld x %lld, case %d, round "
                                       "%d)\n",
                                       wf__gemm_isa_name(isa), wf_dtype_name(dtype),
                                       (long long)rows[r], (long long)k, (long long)k,
                                       (long long)n, c, round);
                            wf_release(fresh);
                            wf_release(x);
                        }
                    /* the second product made the copy (B's bytes at least) */
                    CHECK(wf__gemm_packed_b_bytes() >=
                          before + (size_t)(k * n) * wf_dtype_size(dtype));
                    wf_release(w);
                    CHECK(wf__gemm_packed_b_bytes() == before);
                }
                free(v);
                free(xv);
            }
        }
    }
    CHECK_OK(wf__gemm_isa_set(-1));
}

/* A complex64 (k x n) weight from v on a fresh buffer: row-major (c = 0)
 * or rows 3.. of a (k + 3) x n matrix (an offset into its buffer). */
static wf_array *complex_weight(int c, const float *v, int64_t k, int64_t n)
{
    const int64_t shape[2] = {c ? k + 3 : k, n};
    wf_array *base = wf_array_from_data(v, shape, 2, WF_DTYPE_C64);
    if (c == 0)
        return base;
    wf_array *w = wf_slice(base, (const int64_t[]){3, 0}, shape, (const int64_t[]){1, 1});
    wf_release(base);
    return w;
}

/* complex64 (B' packed whole), as test_packed_weights_same_bits. */
static void test_packed_weights_complex(void)
{
    static const int64_t shapes[][2] = {{130, 70}, {600, 300}};
    static const int64_t rows[] = {5, 9, 40};
    const int best_isa = wf__gemm_isa();
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
        if (!wf__gemm_isa_supported(isa) || !wf_test_runs_isa(isa, best_isa))
            continue;
        CHECK_OK(wf__gemm_isa_set(isa));
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const int64_t k = shapes[s][0], n = shapes[s][1];
            float *v = random_floats(2 * (k + 3) * n, (uint32_t)(70 + s));
            float *xv = random_floats(2 * 40 * k, (uint32_t)(80 + s));
            for (int c = 0; c < 2; c++) {
                const size_t before = wf__gemm_packed_b_bytes();
                wf_array *w = complex_weight(c, v, k, n);
                for (int round = 0; round < 2; round++)
                    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
                        wf_array *x = wf_array_from_data(xv, (const int64_t[]){rows[r], k}, 2,
                                                         WF_DTYPE_C64);
                        wf_array *fresh = complex_weight(c, v, k, n); /* packs anew */
                        if (!CHECK(same_bytes_then_release(wf_matmul(x, w),
                                                           wf_matmul(x, fresh))))
                            printf("      (%s, complex64 %lld x %lld @ %lld x %lld, case %d)\n",
                                   wf__gemm_isa_name(isa), (long long)rows[r], (long long)k,
                                   (long long)k, (long long)n, c);
                        wf_release(fresh);
                        wf_release(x);
                    }
                /* w's B' (four floats per complex element) */
                CHECK(wf__gemm_packed_b_bytes() >= before + (size_t)(k * n) * 16);
                wf_release(w);
                CHECK(wf__gemm_packed_b_bytes() == before);
            }
            free(v);
            free(xv);
        }
    }
    CHECK_OK(wf__gemm_isa_set(-1));
}

enum { DONOR_K = 300, DONOR_N = 256, DONOR_M = 30 };

/* The donated buffer's copy is dropped before the new contents are
 * written: products with the new array give its own bits. */
static void test_packed_weights_follow_donation(void)
{
    float *v = random_floats(DONOR_K * DONOR_N, 61), *xv = random_floats(DONOR_M * DONOR_K, 62);
    float *v1 = malloc(DONOR_K * DONOR_N * sizeof *v1);
    for (int64_t i = 0; i < DONOR_K * DONOR_N; i++)
        v1[i] = v[i] + 1.0f;
    const size_t before = wf__gemm_packed_b_bytes();
    wf_array *x = matrix_of(xv, DONOR_M, DONOR_K, WF_DTYPE_F32);
    wf_array *w = matrix_of(v, DONOR_K, DONOR_N, WF_DTYPE_F32);
    for (int i = 0; i < 2; i++) {
        wf_array *r = wf_matmul(x, w);
        CHECK_OK(wf_eval(&r, 1));
        wf_release(r);
    }
    CHECK(wf__gemm_packed_b_bytes() == before + (size_t)DONOR_K * DONOR_N * sizeof(float));
    wf_array *one = wf_scalar(1.0, WF_DTYPE_F32);
    wf_array *w1 = wf_add(w, one);
    wf_release(one);
    wf_release(w); /* only w1's node holds w now: its buffer is donated */
    const uint64_t donated = wf__buffers_donated();
    CHECK_OK(wf_eval(&w1, 1));
    CHECK(wf__buffers_donated() == donated + 1);
    CHECK(wf__gemm_packed_b_bytes() == before);
    wf_array *fresh = matrix_of(v1, DONOR_K, DONOR_N, WF_DTYPE_F32);
    for (int i = 0; i < 3; i++)
        CHECK(same_bytes_then_release(wf_matmul(x, w1), wf_matmul(x, fresh)));
    /* w1's copy and fresh's */
    CHECK(wf__gemm_packed_b_bytes() == before + 2 * (size_t)DONOR_K * DONOR_N * sizeof(float));
    wf_release(fresh);
    wf_release(w1);
    wf_release(x);
    CHECK(wf__gemm_packed_b_bytes() == before);
    free(v);
    free(v1);
    free(xv);
}

/* Caller-owned memory may change behind weft's back: never packed for keeps. */
static void test_packed_weights_not_for_external_memory(void)
{
    float *v = random_floats(DONOR_K * DONOR_N, 63), *xv = random_floats(DONOR_M * DONOR_K, 64);
    const size_t before = wf__gemm_packed_b_bytes();
    wf_array *x = matrix_of(xv, DONOR_M, DONOR_K, WF_DTYPE_F32);
    wf_array *w = wf_array_from_external(v, (const int64_t[]){DONOR_K, DONOR_N}, 2, WF_DTYPE_F32,
                                         NULL, NULL, NULL);
    wf_array *fresh = matrix_of(v, DONOR_K, DONOR_N, WF_DTYPE_F32);
    for (int i = 0; i < 3; i++)
        CHECK(same_bytes_then_release(wf_matmul(x, w), wf_matmul(x, fresh)));
    CHECK(wf__gemm_packed_b_bytes() == before + (size_t)DONOR_K * DONOR_N * sizeof(float));
    wf_release(fresh); /* the only copy was fresh's */
    CHECK(wf__gemm_packed_b_bytes() == before);
    wf_release(w);
    wf_release(x);
    free(v);
    free(xv);
}

/* Under a memory limit that the copy would bring within reach, no copy is
 * made and no error is left: the products are as before, also after the
 * limit is lifted (a refusal is kept with the buffer). */
static void test_packed_weights_under_a_memory_limit(void)
{
    float *v = random_floats(DONOR_K * DONOR_N, 67), *xv = random_floats(DONOR_M * DONOR_K, 68);
    const size_t before = wf__gemm_packed_b_bytes();
    wf_array *x = matrix_of(xv, DONOR_M, DONOR_K, WF_DTYPE_F32);
    wf_array *w = matrix_of(v, DONOR_K, DONOR_N, WF_DTYPE_F32);
    wf_array *fresh = matrix_of(v, DONOR_K, DONOR_N, WF_DTYPE_F32);
    CHECK_OK(wf_eval((wf_array *[]){x, w, fresh}, 3));
    wf_memory_stats stats = wf_memory_stats_default();
    CHECK_OK(wf_memory_stats_get(&stats));
    /* active + the copy > half the limit */
    CHECK_OK(wf_set_memory_limit(2 * stats.active_bytes + DONOR_K * DONOR_N * sizeof(float)));
    wf_clear_error();
    for (int i = 0; i < 3; i++)
        CHECK(same_bytes_then_release(wf_matmul(x, w), wf_matmul(x, fresh)));
    CHECK(wf_last_error() == WF_OK);
    CHECK(wf__gemm_packed_b_bytes() == before);
    CHECK_OK(wf_set_memory_limit(SIZE_MAX));
    /* A refused copy is not asked for again for this buffer. */
    for (int i = 0; i < 2; i++)
        CHECK(same_bytes_then_release(wf_matmul(x, w), wf_matmul(x, fresh)));
    CHECK(wf__gemm_packed_b_bytes() == before);
    wf_release(fresh);
    wf_release(w);
    wf_release(x);
    free(v);
    free(xv);
}

enum { RACE_THREADS = 4, RACE_PRODUCTS = 6 };

typedef struct race {
    wf_array *x, *w;
    const void *expected;
    size_t bytes;
    int matches;
} race;

static void *race_products(void *arg)
{
    race *r = arg;
    for (int i = 0; i < RACE_PRODUCTS; i++) {
        wf_array *p = wf_matmul(r->x, r->w);
        const void *pv = NULL;
        if (wf_array_data(p, &pv) == WF_OK && memcmp(pv, r->expected, r->bytes) == 0)
            r->matches++;
        wf_release(p);
    }
    return NULL;
}

/* Threads making the copy at once leave exactly one, and every product
 * has the bits of one packed anew. */
static void test_packed_weights_race(void)
{
    float *v = random_floats(DONOR_K * DONOR_N, 65), *xv = random_floats(DONOR_M * DONOR_K, 66);
    const size_t before = wf__gemm_packed_b_bytes();
    wf_array *x = matrix_of(xv, DONOR_M, DONOR_K, WF_DTYPE_F32);
    wf_array *w = matrix_of(v, DONOR_K, DONOR_N, WF_DTYPE_F32);
    wf_array *fresh = matrix_of(v, DONOR_K, DONOR_N, WF_DTYPE_F32);
    wf_array *expected = wf_matmul(x, fresh);
    const void *ev = NULL;
    CHECK_OK(wf_array_data(expected, &ev));
    race runs[RACE_THREADS];
    pthread_t threads[RACE_THREADS];
    for (int t = 0; t < RACE_THREADS; t++) {
        runs[t] = (race){.x = x, .w = w, .expected = ev, .bytes = wf_array_nbytes(expected)};
        CHECK(pthread_create(&threads[t], NULL, race_products, &runs[t]) == 0);
    }
    for (int t = 0; t < RACE_THREADS; t++) {
        pthread_join(threads[t], NULL);
        CHECK(runs[t].matches == RACE_PRODUCTS);
    }
    /* w's copy (fresh was used once: none) */
    CHECK(wf__gemm_packed_b_bytes() == before + (size_t)DONOR_K * DONOR_N * sizeof(float));
    wf_release(expected);
    wf_release(fresh);
    wf_release(w);
    wf_release(x);
    CHECK(wf__gemm_packed_b_bytes() == before);
    free(v);
    free(xv);
}

int main(void)
{
    const char *child_isa = getenv("WEFT_GEMM_CHILD_ISA");
    if (child_isa) {
        if (wf__gemm_isa_set(atoi(child_isa)) != WF_OK)
            return 1;
        child_print_hashes();
        return 0;
    }
    RUN_TEST(test_variant_errors);
    RUN_TEST(test_float32_every_variant);
    RUN_TEST(test_float64_every_variant);
    RUN_TEST(test_bfloat16_where_supported);
    RUN_TEST(test_rows_alone_same_bits);
    RUN_TEST(test_row_passes_and_strips_same_bits);
    RUN_TEST(test_avx2_and_avx512_agree);
    RUN_TEST(test_half_b_read_in_place);
    RUN_TEST(test_batch_invariance);
    RUN_TEST(test_negative_strides);
    RUN_TEST(test_same_bits_for_any_thread_count);
    RUN_TEST(test_packed_weights_same_bits);
    RUN_TEST(test_packed_weights_complex);
    RUN_TEST(test_packed_weights_follow_donation);
    RUN_TEST(test_packed_weights_not_for_external_memory);
    RUN_TEST(test_packed_weights_under_a_memory_limit);
    RUN_TEST(test_packed_weights_race);
    return TEST_SUMMARY();
}
