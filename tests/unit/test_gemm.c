/*
 * weft's GEMM (src/backend/cpu/gemm.h), on every ISA variant this CPU has:
 *  - float32 and bfloat16 products against a double-precision reference, at
 *    edge sizes (1, 7, 15, 17, 63, 65, 257, K over one K block), with
 *    transposed and generally strided operands, alpha/beta, and C's row
 *    stride; beta = 0 never reads C;
 *  - splitting C into any blocks, or computing rows alone (the
 *    matrix-vector path), gives the same bits (the reproducibility rule);
 *  - batch invariance through the public API: rows of matmul, addmm and
 *    attention give the same bits with 1, 7 or 64 rows in the batch;
 *  - the same bits for WEFT_NUM_THREADS = 1, 2, 3, 5, 8 (this program runs
 *    itself as child processes and compares their hashes);
 *  - the avx2 and avx512 variants agree bitwise (same sums, same order);
 *  - bad variant numbers give WF_ERR_UNSUPPORTED.
 *
 *   test_gemm                 the tests
 *   test_gemm --child ISA     (internal) prints hashes of the results
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/gemm.h"
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

/* Stores values[i * cols + j] (float32, or bfloat16 bits when bf16) in
 * layout `l`; the gaps of strided layouts hold junk (NaN for float32). */
static stored store_matrix(const float *values, int64_t rows, int64_t cols, enum layout l,
                           bool bf16)
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
    const size_t item = bf16 ? 2 : 4;
    s.data = malloc((size_t)(span + 1) * item);
    if (bf16)
        for (int64_t i = 0; i <= span; i++)
            ((uint16_t *)s.data)[i] = 0x7fc1; /* NaN */
    else
        for (int64_t i = 0; i <= span; i++)
            ((float *)s.data)[i] = NAN;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            const int64_t at = i * s.rs + j * s.cs;
            if (bf16)
                ((uint16_t *)s.data)[at] = to_bf16(values[i * cols + j]);
            else
                ((float *)s.data)[at] = values[i * cols + j];
        }
    return s;
}

/* ---------------------------------------------------------------- reference */

typedef struct product {
    int64_t m, n, k, ldc;
    float alpha, beta;
    bool bf16;
    float *a, *b; /* logical values, row-major (bfloat16-rounded when bf16) */
    float *c0;    /* C before the product (ldc apart) */
} product;

static product product_new(int64_t m, int64_t n, int64_t k, float alpha, float beta, bool bf16,
                           uint32_t seed)
{
    product p = {.m = m, .n = n, .k = k, .ldc = n + 3, .alpha = alpha, .beta = beta,
                 .bf16 = bf16};
    p.a = random_floats(m * k, seed);
    p.b = random_floats(k * n, seed + 1);
    p.c0 = random_floats(m * p.ldc, seed + 2);
    if (bf16) {
        for (int64_t i = 0; i < m * k; i++)
            p.a[i] = from_bf16(to_bf16(p.a[i]));
        for (int64_t i = 0; i < k * n; i++)
            p.b[i] = from_bf16(to_bf16(p.b[i]));
    }
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
}

/* Checks c against the double reference: |error| <= (k + 4) u S, S the sum of
 * |terms| (an FMA chain's bound with room for the epilogue). */
static bool check_against_reference(const product *p, const float *c, const char *what)
{
    int bad = 0;
    for (int64_t i = 0; i < p->m && bad < 3; i++)
        for (int64_t j = 0; j < p->n && bad < 3; j++) {
            double sum = 0, mag = 0;
            for (int64_t t = 0; t < p->k; t++) {
                const double term = (double)p->a[i * p->k + t] * p->b[t * p->n + j];
                sum += term;
                mag += fabs(term);
            }
            double want = p->alpha * sum;
            mag *= fabs(p->alpha);
            if (p->beta != 0) {
                want += (double)p->beta * p->c0[i * p->ldc + j];
                mag += fabs((double)p->beta * p->c0[i * p->ldc + j]);
            }
            const double tol = (double)(p->k + 4) * 0x1p-24 * mag + 1e-30;
            const double got = c[i * p->ldc + j];
            if (!(fabs(got - want) <= tol)) {
                wf_test_fail(__FILE__, __LINE__,
                             "%s: m %lld n %lld k %lld: C[%lld][%lld] = %.9g, want %.9g (tol %.3g)",
                             what, (long long)p->m, (long long)p->n, (long long)p->k,
                             (long long)i, (long long)j, got, want, tol);
                bad++;
            }
        }
    return bad == 0;
}

/* Runs the product with A and B in layouts la, lb, by blocks of C split at
 * the given rows and columns (NULL: one call of wf__gemm_serial). Returns
 * C (ldc apart; caller frees). */
static float *run_product(const product *p, int isa, enum layout la, enum layout lb,
                          const int64_t *row_cuts, const int64_t *col_cuts)
{
    stored a = store_matrix(p->a, p->m, p->k, la, p->bf16);
    stored b = store_matrix(p->b, p->k, p->n, lb, p->bf16);
    float *c = malloc((size_t)(p->m * p->ldc) * sizeof *c);
    memcpy(c, p->c0, (size_t)(p->m * p->ldc) * sizeof *c);
    wf_gemm_args g;
    wf__gemm_args_init(&g, p->m, p->n, p->k, a.data, a.rs, a.cs, b.data, b.rs, b.cs, c, p->ldc,
                       p->alpha, p->beta, p->bf16);
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

static bool same_bits(const float *x, const float *y, const product *p)
{
    for (int64_t i = 0; i < p->m; i++)
        if (memcmp(x + i * p->ldc, y + i * p->ldc, (size_t)p->n * sizeof *x) != 0)
            return false;
    return true;
}

/* ---------------------------------------------------------------- accuracy */

/* One product in every layout pair: checked against the reference, and
 * blocks of C computed separately give the same bits. */
static void check_all_layouts(int isa, int64_t m, int64_t n, int64_t k, float alpha, float beta,
                              bool bf16, uint32_t seed)
{
    product p = product_new(m, n, k, alpha, beta, bf16, seed);
    const int64_t row_cuts[] = {0, 5, 33, INT64_MAX}, col_cuts[] = {0, 17, 50, INT64_MAX};
    char what[128];
    for (int la = 0; la < LAYOUT_COUNT; la++)
        for (int lb = 0; lb < LAYOUT_COUNT; lb++) {
            snprintf(what, sizeof what, "%s %s A %s, B %s", wf__gemm_isa_name(isa),
                     bf16 ? "bf16" : "f32", LAYOUT_NAMES[la], LAYOUT_NAMES[lb]);
            float *whole = run_product(&p, isa, la, lb, NULL, NULL);
            check_against_reference(&p, whole, what);
            if (la == lb) { /* blocks: one layout pair per case is enough */
                float *blocks = run_product(&p, isa, la, lb, row_cuts, col_cuts);
                if (!CHECK(same_bits(whole, blocks, &p)))
                    printf("      (%s: blocks differ)\n", what);
                free(blocks);
            }
            free(whole);
        }
    product_free(&p);
}

/* Shapes: each edge size as m, n and k in turn, K over one K block, and a
 * few alpha/beta pairs (beta 0: C is NaN and must not be read). */
static void check_shapes(int isa, bool bf16)
{
    static const float ab[3][2] = {{1, 0}, {0.5f, 2}, {-1, 1}};
    for (int e = 0; e < EDGE_COUNT; e++) {
        const int64_t s = EDGE_SIZES[e];
        const float *c = ab[e % 3];
        check_all_layouts(isa, s, 17, 65, c[0], c[1], bf16, (uint32_t)(10 * e + 1));
        check_all_layouts(isa, 15, s, 63, c[0], c[1], bf16, (uint32_t)(10 * e + 2));
        check_all_layouts(isa, 7, 65, s, c[0], c[1], bf16, (uint32_t)(10 * e + 3));
    }
    check_all_layouts(isa, 65, 70, 600, 1, 1, bf16, 91);  /* three K blocks, beta */
    check_all_layouts(isa, 3, 100, 531, 2, 0, bf16, 92);   /* odd K over blocks, few rows */
    check_all_layouts(isa, 1, 257, 257, 1, 0, bf16, 93);   /* a vector */
}

static void test_float32_every_variant(void)
{
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++)
        if (wf__gemm_isa_supported(isa))
            check_shapes(isa, false);
}

static void test_bfloat16_where_supported(void)
{
    int tested = 0;
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++)
        if (wf__gemm_isa_supported(isa) && wf__gemm_isa_has_bf16(isa)) {
            check_shapes(isa, true);
            tested++;
        }
    if (tested == 0)
        printf("    (no variant with AVX512_BF16 here: bfloat16 goes through float32)\n");
}

/* Rows computed alone (1 row: the matrix-vector path; 7 rows) give the
 * bits they get inside 64 rows, for B read in place and packed. */
static void test_rows_alone_same_bits(void)
{
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
        if (!wf__gemm_isa_supported(isa))
            continue;
        for (int bf16 = 0; bf16 < 2; bf16++) {
            if (bf16 && !wf__gemm_isa_has_bf16(isa))
                continue;
            for (int lb = 0; lb < LAYOUT_COUNT; lb++) {
                product p = product_new(64, 300, 700, 1, 0, bf16, (uint32_t)(500 + lb));
                float *full = run_product(&p, isa, ROW_MAJOR, (enum layout)lb, NULL, NULL);
                static const int64_t firsts[] = {0, 13, 63}, counts[] = {1, 7, 1};
                for (int t = 0; t < 3; t++) {
                    product q = p;
                    q.m = counts[t];
                    q.a = p.a + firsts[t] * p.k;
                    q.c0 = p.c0 + firsts[t] * p.ldc;
                    float *part = run_product(&q, isa, ROW_MAJOR, (enum layout)lb, NULL, NULL);
                    if (!CHECK(same_bits(part, full + firsts[t] * p.ldc, &q)))
                        printf("      (%s %s, B %s: rows %lld..+%lld differ)\n",
                               wf__gemm_isa_name(isa), bf16 ? "bf16" : "f32",
                               LAYOUT_NAMES[lb], (long long)firsts[t], (long long)counts[t]);
                    free(part);
                }
                free(full);
                product_free(&p);
            }
        }
    }
}

/* AVX2 and AVX-512 form the same sums in the same order. */
static void test_avx2_and_avx512_agree(void)
{
    if (!wf__gemm_isa_supported(WF_GEMM_ISA_AVX512)) {
        printf("    (no AVX-512 here: nothing to compare)\n");
        return;
    }
    static const int64_t shapes[][3] = {{64, 300, 700}, {1, 1024, 784}, {17, 65, 257}};
    for (int s = 0; s < 3; s++) {
        product p = product_new(shapes[s][0], shapes[s][1], shapes[s][2], 0.5f, 2, false,
                                (uint32_t)(700 + s));
        for (int lb = 0; lb < LAYOUT_COUNT; lb++) {
            float *x = run_product(&p, WF_GEMM_ISA_AVX2, ROW_MAJOR, (enum layout)lb, NULL, NULL);
            float *y = run_product(&p, WF_GEMM_ISA_AVX512, ROW_MAJOR, (enum layout)lb, NULL, NULL);
            if (!CHECK(same_bits(x, y, &p)))
                printf("      (shape %d, B %s)\n", s, LAYOUT_NAMES[lb]);
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

/* matmul (B plain or transposed), addmm and bfloat16 matmul of `rows` rows
 * of A starting at row `first` of the 64-row A; results in out[0..3]. */
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
    wf_release(ah);
    wf_release(bh);
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
    static const char *const names[5] = {"matmul", "matmul B^T", "addmm", "matmul bf16",
                                         "attention"};
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
        if (!wf__gemm_isa_supported(isa))
            continue;
        CHECK_OK(wf__gemm_isa_set(isa));
        wf_array *full[5];
        row_products(a64, b, bias, 0, 64, full);
        full[4] = attention_rows(q64, k, v, mask64, 0, 64);
        static const int64_t firsts[] = {0, 40, 20, 57}, counts[] = {1, 1, 7, 7};
        for (int t = 0; t < 4; t++) {
            wf_array *part[5];
            row_products(a64, b, bias, firsts[t], counts[t], part);
            part[4] = attention_rows(q64, k, v, mask64, firsts[t], counts[t]);
            for (int c = 0; c < 5; c++) {
                const bool att = c == 4;
                if (!CHECK(rows_equal(part[c], full[c], att ? ATT_HEADS : 1, firsts[t], counts[t],
                                      att ? ATT_D : INV_N)))
                    printf("      (%s, %s: rows %lld..+%lld)\n", wf__gemm_isa_name(isa),
                           names[c], (long long)firsts[t], (long long)counts[t]);
                wf_release(part[c]);
            }
        }
        for (int c = 0; c < 5; c++)
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

/* ---------------------------------------------------------------- thread counts */

/* Products that split into many GEMM blocks; their hashes, one per line. */
static void child_print_hashes(void)
{
    enum { M = 300, N = 260, K = 520, B = 6 };
    float *a = random_floats(B * M * K, 21), *b = random_floats(B * K * N, 22);
    float *q = random_floats(ATT_HEADS * 64 * ATT_D, 14), *mask = random_floats(64 * ATT_LK, 17);
    float *k = random_floats(ATT_HEADS * ATT_LK * ATT_D, 15);
    float *v = random_floats(ATT_HEADS * ATT_LK * ATT_D, 16);
    const int64_t sa[2] = {M, K}, sb[2] = {K, N}, sba[3] = {B, M / 3, K}, sbb[3] = {B, K, N};
    const int64_t sv[2] = {1, 784}, sw[2] = {784, 1024};
    wf_array *am = f32_array(a, sa, 2), *bm = f32_array(b, sb, 2);
    wf_array *ab = f32_array(a, sba, 3), *bb = f32_array(b, sbb, 3);
    wf_array *x = f32_array(a, sv, 2), *w = f32_array(b, sw, 2);
    wf_array *bt = wf_transpose(bm, NULL, 0), *c = wf_ones((int64_t[]){N}, 1, WF_DTYPE_F32);
    wf_array *ah = wf_astype(am, WF_DTYPE_BF16), *bh = wf_astype(bm, WF_DTYPE_BF16);
    wf_array *results[8] = {
        wf_matmul(am, bm),
        wf_matmul(bm, bt),
        wf_matmul(ab, bb),
        wf_addmm(c, am, bm, 0.5, 0.25),
        wf_matmul(ah, bh),
        wf_matmul(x, w),
        attention_rows(q, k, v, mask, 0, 64),
        NULL,
    };
    const int64_t sq[4] = {1, ATT_HEADS, 64, ATT_D}, skv[4] = {1, ATT_HEADS, ATT_LK, ATT_D};
    wf_array *qa = f32_array(q, sq, 4), *ka = f32_array(k, skv, 4), *va = f32_array(v, skv, 4);
    results[7] = wf_scaled_dot_product_attention(qa, ka, va, 0.125, NULL, true);
    for (int i = 0; i < 8; i++) {
        const char *bytes = bytes_of(results[i]);
        const uint64_t h = bytes ? fnv1a(bytes, wf_array_nbytes(results[i]), 1469598103934665603u)
                                 : 0;
        printf("case %d hash %016llx\n", i, (unsigned long long)h);
        wf_release(results[i]);
    }
    wf_array *inputs[] = {am, bm, ab, bb, x, w, bt, c, ah, bh, qa, ka, va};
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++)
        wf_release(inputs[i]);
    free(a);
    free(b);
    free(q);
    free(mask);
    free(k);
    free(v);
}

/* Runs this program as a child with WEFT_NUM_THREADS = threads; its output
 * (the hashes) goes to out (NUL-terminated). */
static bool run_child(const char *self, int threads, int isa, char *out, size_t cap)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "WEFT_NUM_THREADS=%d '%s' --child %d", threads, self, isa);
    FILE *f = popen(cmd, "r");
    if (!CHECK(f != NULL))
        return false;
    const size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    return CHECK_EQ_INT(pclose(f), 0);
}

static void test_same_bits_for_any_thread_count(void)
{
    char self[4096];
    const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (!CHECK(len > 0))
        return;
    self[len] = '\0';
    /* The cases really split: several GEMM blocks each. */
    wf_gemm_args g;
    wf__gemm_args_init(&g, 300, 260, 520, NULL, 520, 1, NULL, 260, 1, NULL, 260, 1, 0, false);
    int64_t mb, nb;
    wf__gemm_blocks(&g, 1, &mb, &nb);
    CHECK((300 + mb - 1) / mb * ((260 + nb - 1) / nb) >= 4);
    wf__gemm_args_init(&g, 1, 1024, 784, NULL, 784, 1, NULL, 1024, 1, NULL, 1024, 1, 0, false);
    wf__gemm_blocks(&g, 1, &mb, &nb);
    CHECK(mb == 1 && (1024 + nb - 1) / nb >= 2);

    static const int threads[] = {1, 2, 3, 5, 8};
    for (int isa = 0; isa < WF_GEMM_ISA_COUNT; isa++) {
        if (!wf__gemm_isa_supported(isa))
            continue;
        char first[2048], other[2048];
        if (!run_child(self, threads[0], isa, first, sizeof first))
            return;
        CHECK(strstr(first, "case 7 hash") != NULL);
        for (int t = 1; t < 5; t++) {
            if (!run_child(self, threads[t], isa, other, sizeof other))
                return;
            if (!CHECK(strcmp(first, other) == 0))
                printf("      (%s: 1 thread:\n%s      %d threads:\n%s)\n", wf__gemm_isa_name(isa),
                       first, threads[t], other);
        }
    }
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--child") == 0) {
        if (wf__gemm_isa_set(atoi(argv[2])) != WF_OK)
            return 1;
        child_print_hashes();
        return 0;
    }
    RUN_TEST(test_variant_errors);
    RUN_TEST(test_float32_every_variant);
    RUN_TEST(test_bfloat16_where_supported);
    RUN_TEST(test_rows_alone_same_bits);
    RUN_TEST(test_avx2_and_avx512_agree);
    RUN_TEST(test_batch_invariance);
    RUN_TEST(test_same_bits_for_any_thread_count);
    return TEST_SUMMARY();
}
