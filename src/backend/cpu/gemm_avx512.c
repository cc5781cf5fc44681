/* AVX-512 micro-kernels of weft's GEMM (see gemm.h): float32 14 x 32 and
 * float64 14 x 16 tiles (28 accumulators, 2 B vectors and a broadcast fill
 * the 32 registers; the float32 tile has a version per row count, so a
 * panel of few rows costs only its rows' FMAs, and prefetches B read where
 * it lies); direct kernels for up to 4 float32 rows and one float64
 * or bfloat16 row (matrix-vector: B read in place, one row swept 4 (float32)
 * or 8 (float64) rows of B at a time into sums kept in L1, so B is read in
 * long runs); bfloat16 14 x 32 tiles with vdpbf16ps (AVX512_BF16); 16 x 16
 * and 8 x 8 register transposes for packing. Compiled with per-function target attributes;
 * called only after a CPU check. */
#include "backend/cpu/gemm.h"

#include "backend/cpu/gemm_epilogue_avx512.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <string.h>

#define ATTR_512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")))
#define ATTR_512_BF16 \
    __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx512bf16,avx2,fma")))
#define INLINE_512 ATTR_512 __attribute__((always_inline)) static inline

enum { MR = 14, NR = 32, NR64 = 16, DIRECT_ROWS = 4 };

/* Lanes [0, n) of 16 (n may be <= 0 or >= 16). */
INLINE_512 __mmask16 lanes(int64_t n)
{
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* gemm_epilogue_avx512.h's rule for float64 lanes. */
INLINE_512 __m512d finish64(__m512d acc, const double *c, __mmask8 m, const wf_gemm_epilogue *e)
{
    const __m512d alpha = _mm512_set1_pd(e->alpha);
    if (e->mode == WF_GEMM_STORE_SET)
        return _mm512_mul_pd(alpha, acc);
    __m512d old = _mm512_maskz_loadu_pd(m, c);
    if (e->mode == WF_GEMM_STORE_BETA)
        old = _mm512_mul_pd(_mm512_set1_pd(e->beta), old);
    return _mm512_fmadd_pd(alpha, acc, old);
}

INLINE_512 void store_row(float *c, __m512 acc0, __m512 acc1, __mmask16 m0, __mmask16 m1,
                          const wf_gemm_epilogue *e)
{
    _mm512_mask_storeu_ps(c, m0, wf__gemm_finish_f32x16(acc0, c, m0, e));
    if (m1)
        _mm512_mask_storeu_ps(c + 16, m1, wf__gemm_finish_f32x16(acc1, c + 16, m1, e));
}

/* B rows ahead that a tile reading B where it lies prefetches: B's rows
 * lie far apart (a row of a weight matrix), so the hardware prefetchers,
 * which follow runs within a page, do not fetch them. */
enum { B_PREFETCH_ROWS = 64 };
/* Packed B rows ahead that a tile prefetches into L1. A packed panel read
 * the first time comes from L3 or memory (a served weight, packed once),
 * and the hardware prefetchers alone leave the tile waiting: 8 rows times
 * 384 x 1536 weights from L3 on one Intel core ran at 94 GFLOP/s without,
 * 113 with (16 rows: 134 -> 148; 8, 16 or 32 rows ahead alike; neutral for
 * 1024^3). */
enum { PACKED_B_PREFETCH_ROWS = 16 };
/* Up to how many rows the float32 tiles read B where it lies: with the
 * prefetches, a B strip read in place by up to 5 panels of A (B coming
 * from outside L2 first, then from L2) is faster than packing it, measured
 * with bench_matmul --small-m (64 rows: 106 -> 126 GFLOP/s; at 128 rows
 * neither wins clearly, so packing stays). */
enum { F32_IN_PLACE_ROWS = 5 * MR };
/* The least rows of a block's first float32 tile (gemm.c's split_rows). */
enum { F32_LEAD_ROWS = 12 };

/* R rows (<= MR) of a float32 tile; only R x V accumulators, so a panel
 * of few rows costs few FMAs, and a last panel of at most 16 columns (V =
 * 1) half the FMAs of a full one (N = 80: 88 -> 104 GFLOP/s, as N = 64 or
 * 96; each element's sum is the same either way). `prefetch`: B read where
 * it lies. `a_rows`: A's rows read where they lie (A[r][k] at ap[r * astep
 * + k]), else a panel (A[r][k] at ap[k * astep + r]). */
INLINE_512 void tile_f32_rows(const int R, const int V, const bool prefetch, const bool a_rows,
                              int64_t kc, const float *ap, int64_t astep, const float *bp,
                              int64_t ldb, float *c, int64_t ldc, int cols,
                              const wf_gemm_epilogue *e)
{
    const __mmask16 m0 = lanes(cols), m1 = lanes(cols - 16);
    __m512 acc[MR][2];
#pragma GCC unroll 14
    for (int r = 0; r < R; r++) {
        acc[r][0] = acc[r][1] = _mm512_setzero_ps();
        /* C's rows (far apart: no hardware prefetch) reach L2 while the
         * tile computes, rather than stall its stores (complex64 2048^3 on
         * 2 threads: +5%) */
        _mm_prefetch((const char *)(c + r * ldc), _MM_HINT_T1);
        _mm_prefetch((const char *)(c + r * ldc + 16), _MM_HINT_T1);
    }
    for (int64_t k = 0; k < kc; k++) {
        if (prefetch) {
            _mm_prefetch((const char *)(bp + B_PREFETCH_ROWS * ldb), _MM_HINT_T0);
            _mm_prefetch((const char *)(bp + NR), _MM_HINT_T1);
            if (V == 2) {
                _mm_prefetch((const char *)(bp + B_PREFETCH_ROWS * ldb + 16), _MM_HINT_T0);
                _mm_prefetch((const char *)(bp + NR + 16), _MM_HINT_T1);
            }
        } else {
            _mm_prefetch((const char *)(bp + PACKED_B_PREFETCH_ROWS * NR), _MM_HINT_T0);
            _mm_prefetch((const char *)(bp + PACKED_B_PREFETCH_ROWS * NR + 16), _MM_HINT_T0);
        }
        const __m512 b0 = _mm512_loadu_ps(bp);
        const __m512 b1 = V == 2 ? _mm512_loadu_ps(bp + 16) : b0;
#pragma GCC unroll 14
        for (int r = 0; r < R; r++) {
            const __m512 av = _mm512_set1_ps(a_rows ? ap[r * astep] : ap[r]);
            acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
            if (V == 2)
                acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
        }
        ap += a_rows ? 1 : astep;
        bp += ldb;
    }
#pragma GCC unroll 14
    for (int r = 0; r < R; r++)
        store_row(c + r * ldc, acc[r][0], acc[r][1], m0, m1, e);
}

/* The R-row tile, B packed (ldb == NR) or read where it lies. */
#define TILE_F32_CASE(R, A_ROWS)                                                                \
    case R:                                                                                     \
        if (cols <= 16 && ldb == NR)                                                            \
            tile_f32_rows(R, 1, false, A_ROWS, kc, ap, astep, bp, ldb, c, ldc, cols, e);        \
        else if (cols <= 16)                                                                    \
            tile_f32_rows(R, 1, true, A_ROWS, kc, ap, astep, bp, ldb, c, ldc, cols, e);         \
        else if (ldb == NR)                                                                     \
            tile_f32_rows(R, 2, false, A_ROWS, kc, ap, astep, bp, ldb, c, ldc, cols, e);        \
        else                                                                                    \
            tile_f32_rows(R, 2, true, A_ROWS, kc, ap, astep, bp, ldb, c, ldc, cols, e);         \
        break;

#define TILE_F32_SWITCH(A_ROWS)                                                                 \
    switch (rows) {                                                                             \
        TILE_F32_CASE(1, A_ROWS)                                                                \
        TILE_F32_CASE(2, A_ROWS)                                                                \
        TILE_F32_CASE(3, A_ROWS)                                                                \
        TILE_F32_CASE(4, A_ROWS)                                                                \
        TILE_F32_CASE(5, A_ROWS)                                                                \
        TILE_F32_CASE(6, A_ROWS)                                                                \
        TILE_F32_CASE(7, A_ROWS)                                                                \
        TILE_F32_CASE(8, A_ROWS)                                                                \
        TILE_F32_CASE(9, A_ROWS)                                                                \
        TILE_F32_CASE(10, A_ROWS)                                                               \
        TILE_F32_CASE(11, A_ROWS)                                                               \
        TILE_F32_CASE(12, A_ROWS)                                                               \
        TILE_F32_CASE(13, A_ROWS)                                                               \
    default: TILE_F32_CASE(14, A_ROWS)                                                          \
    }

ATTR_512 static void tile_f32(int64_t kc, const void *apv, int64_t astep, const void *bv,
                              int64_t ldb, void *cv, int64_t ldc, int rows, int cols,
                              const wf_gemm_epilogue *e)
{
    const float *ap = apv, *bp = bv;
    float *c = cv;
    TILE_F32_SWITCH(false)
}

/* gemm.h's tile_a_rows: A's rows read where they lie, astep apart. */
ATTR_512 static void tile_f32_a_rows(int64_t kc, const void *apv, int64_t astep, const void *bv,
                                     int64_t ldb, void *cv, int64_t ldc, int rows, int cols,
                                     const wf_gemm_epilogue *e)
{
    const float *ap = apv, *bp = bv;
    float *c = cv;
    TILE_F32_SWITCH(true)
}
#undef TILE_F32_SWITCH
#undef TILE_F32_CASE

ATTR_512 static void tile_f64(int64_t kc, const void *apv, int64_t astep, const void *bv,
                              int64_t ldb, void *cv, int64_t ldc, int rows, int cols,
                              const wf_gemm_epilogue *e)
{
    const double *ap = apv, *bp = bv;
    double *c = cv;
    const __mmask8 m0 = (__mmask8)lanes(cols < 8 ? cols : 8), m1 = (__mmask8)lanes(cols - 8);
    __m512d acc[MR][2];
#pragma GCC unroll 14
    for (int r = 0; r < MR; r++)
        acc[r][0] = acc[r][1] = _mm512_setzero_pd();
    for (int64_t k = 0; k < kc; k++) {
        const __m512d b0 = _mm512_loadu_pd(bp), b1 = _mm512_loadu_pd(bp + 8);
#pragma GCC unroll 14
        for (int r = 0; r < MR; r++) {
            const __m512d av = _mm512_set1_pd(ap[r]);
            acc[r][0] = _mm512_fmadd_pd(av, b0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_pd(av, b1, acc[r][1]);
        }
        ap += astep;
        bp += ldb;
    }
#pragma GCC unroll 14
    for (int r = 0; r < MR; r++)
        if (r < rows) {
            double *cr = c + r * ldc;
            _mm512_mask_storeu_pd(cr, m0, finish64(acc[r][0], cr, m0, e));
            if (m1)
                _mm512_mask_storeu_pd(cr + 8, m1, finish64(acc[r][1], cr + 8, m1, e));
        }
}

/* How the direct kernels find B's elements: float32, or float16 /
 * bfloat16 converted (exactly) to float32 as they are loaded. */
enum { B_F32, B_F16, B_BF16 };

/* Element i of B stored as `kind`. */
INLINE_512 const void *b_at(const void *b, int64_t i, const int kind)
{
    return (const char *)b + i * (kind == B_F32 ? 4 : 2);
}

/* 16 elements of B from p (stored as `kind`) as float32; lanes outside m
 * read as zero and are not touched in memory. */
INLINE_512 __m512 load_b16(const void *p, __mmask16 m, const int kind)
{
    if (kind == B_F32)
        return m == 0xffff ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(m, p);
    const __m256i h = _mm256_maskz_loadu_epi16(m, p);
    if (kind == B_F16)
        return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* R rows x V vectors of columns, over kc, B rows read in place; `masked`
 * for the last, partial group of columns (lanes beyond `cols` untouched). */
INLINE_512 void direct_group(const int R, const int V, const bool masked, const int kind,
                             int64_t kc, const float *a, int64_t rsa, int64_t csa, const void *b,
                             int64_t ldb, float *c, int64_t ldc, int64_t cols,
                             const wf_gemm_epilogue *e)
{
    __mmask16 m[16];
    __m512 acc[DIRECT_ROWS][16];
#pragma GCC unroll 16
    for (int q = 0; q < V; q++) {
        m[q] = masked ? lanes(cols - 16 * q) : (__mmask16)0xffff;
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            acc[r][q] = _mm512_setzero_ps();
    }
    for (int64_t k = 0; k < kc; k++, b = b_at(b, ldb, kind), a += csa) {
        __m512 av[DIRECT_ROWS];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            av[r] = _mm512_set1_ps(a[r * rsa]);
#pragma GCC unroll 16
        for (int q = 0; q < V; q++) {
            const __m512 bv = load_b16(b_at(b, 16 * q, kind), masked ? m[q] : 0xffff, kind);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++)
                acc[r][q] = _mm512_fmadd_ps(av[r], bv, acc[r][q]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 16
        for (int q = 0; q < V; q++) {
            float *cq = c + r * ldc + 16 * q;
            if (m[q])
                _mm512_mask_storeu_ps(cq, m[q], wf__gemm_finish_f32x16(acc[r][q], cq, m[q], e));
        }
}

/* R rows: groups of V vectors (16 columns each), the last one masked. */
INLINE_512 void direct_rows(const int R, const int V, const int kind, int64_t kc, const float *a,
                            int64_t rsa, int64_t csa, const void *b, int64_t ldb, float *c,
                            int64_t ldc, int64_t cols, const wf_gemm_epilogue *e)
{
    int64_t j = 0;
    for (; j + 16 * V <= cols; j += 16 * V)
        direct_group(R, V, false, kind, kc, a, rsa, csa, b_at(b, j, kind), ldb, c + j, ldc,
                     16 * V, e);
    if (j < cols)
        direct_group(R, V, true, kind, kc, a, rsa, csa, b_at(b, j, kind), ldb, c + j, ldc,
                     cols - j, e);
}

/* acc[0..w) = fma(x_t, B row t, acc) for the rows t of one pass, in order. */
INLINE_512 void sweep_rows(const int T, const int kind, int64_t w, const float *x, int64_t csx,
                           const void *b, int64_t ldb, float *acc)
{
    __m512 xv[8];
#pragma GCC unroll 8
    for (int t = 0; t < T; t++)
        xv[t] = _mm512_set1_ps(x[t * csx]);
    int64_t j = 0;
    for (; j + 32 <= w; j += 32) {
        __m512 s0 = _mm512_loadu_ps(acc + j), s1 = _mm512_loadu_ps(acc + j + 16);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            s0 = _mm512_fmadd_ps(xv[t], load_b16(b_at(b, t * ldb + j, kind), 0xffff, kind), s0);
            s1 = _mm512_fmadd_ps(xv[t], load_b16(b_at(b, t * ldb + j + 16, kind), 0xffff, kind),
                                 s1);
        }
        _mm512_storeu_ps(acc + j, s0);
        _mm512_storeu_ps(acc + j + 16, s1);
    }
    for (; j + 16 <= w; j += 16) {
        __m512 s = _mm512_loadu_ps(acc + j);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++)
            s = _mm512_fmadd_ps(xv[t], load_b16(b_at(b, t * ldb + j, kind), 0xffff, kind), s);
        _mm512_storeu_ps(acc + j, s);
    }
    if (j < w) {
        const __mmask16 m = lanes(w - j);
        __m512 s = _mm512_maskz_loadu_ps(m, acc + j);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++)
            s = _mm512_fmadd_ps(xv[t], load_b16(b_at(b, t * ldb + j, kind), m, kind), s);
        _mm512_mask_storeu_ps(acc + j, m, s);
    }
}

/* One row: B swept 4 rows at a time over up to 1024 columns into sums kept
 * in L1 (as OpenBLAS's gemv does), so B is read in long sequential runs;
 * each sum still takes one fma per k in order, as in the tiles. */
INLINE_512 void one_row(const int kind, int64_t kc, const float *x, int64_t csx, const void *b,
                        int64_t ldb, float *c, int64_t cols, const wf_gemm_epilogue *e)
{
    float acc[1024] __attribute__((aligned(64)));
    for (int64_t j0 = 0; j0 < cols; j0 += 1024) {
        const int64_t w = cols - j0 < 1024 ? cols - j0 : 1024;
        for (int64_t j = 0; j < w; j += 16)
            _mm512_storeu_ps(acc + j, _mm512_setzero_ps());
        int64_t k = 0;
        for (; k + 4 <= kc; k += 4)
            sweep_rows(4, kind, w, x + k * csx, csx, b_at(b, k * ldb + j0, kind), ldb, acc);
        for (; k < kc; k++)
            sweep_rows(1, kind, w, x + k * csx, csx, b_at(b, k * ldb + j0, kind), ldb, acc);
        for (int64_t j = 0; j < w; j += 16) {
            const __mmask16 m = lanes(w - j);
            float *cj = c + j0 + j;
            const __m512 sums = _mm512_loadu_ps(acc + j);
            _mm512_mask_storeu_ps(cj, m, wf__gemm_finish_f32x16(sums, cj, m, e));
        }
    }
}

/* One row swept; wider groups for fewer rows: 16 to 24 accumulators, B
 * read once per group. */
INLINE_512 void direct_any(const int kind, int64_t kc, const float *a, int64_t rsa, int64_t csa,
                           const void *b, int64_t ldb, float *c, int64_t ldc, int rows,
                           int64_t cols, const wf_gemm_epilogue *e)
{
    switch (rows) {
    case 1: one_row(kind, kc, a, csa, b, ldb, c, cols, e); break;
    case 2: direct_rows(2, 8, kind, kc, a, rsa, csa, b, ldb, c, ldc, cols, e); break;
    case 3: direct_rows(3, 8, kind, kc, a, rsa, csa, b, ldb, c, ldc, cols, e); break;
    default: direct_rows(4, 4, kind, kc, a, rsa, csa, b, ldb, c, ldc, cols, e); break;
    }
}

ATTR_512 static void direct_f32(int64_t kc, const void *a, int64_t rsa, int64_t csa,
                                const void *b, int64_t ldb, void *c, int64_t ldc, int rows,
                                int64_t cols, const wf_gemm_epilogue *e)
{
    direct_any(B_F32, kc, a, rsa, csa, b, ldb, c, ldc, rows, cols, e);
}

/* gemm.h's direct_half: direct_f32 with B's halves converted as loaded. */
ATTR_512 static void direct_half(int64_t kc, const float *a, int64_t rsa, int64_t csa,
                                 const uint16_t *b, int64_t ldb, wf_dtype half, float *c,
                                 int64_t ldc, int rows, int64_t cols, const wf_gemm_epilogue *e)
{
    if (half == WF_DTYPE_BF16)
        direct_any(B_BF16, kc, a, rsa, csa, b, ldb, c, ldc, rows, cols, e);
    else
        direct_any(B_F16, kc, a, rsa, csa, b, ldb, c, ldc, rows, cols, e);
}

/* float64 acc[0..w) = fma(x_t, B row t, acc) for the T rows of one pass. */
INLINE_512 void sweep_rows64(const int T, int64_t w, const double *x, int64_t csx,
                             const double *b, int64_t ldb, double *acc)
{
    __m512d xv[8];
#pragma GCC unroll 8
    for (int t = 0; t < T; t++)
        xv[t] = _mm512_set1_pd(x[t * csx]);
    for (int64_t j = 0; j < w; j += 8) {
        const __mmask8 m = (__mmask8)lanes(w - j < 8 ? w - j : 8);
        __m512d s = _mm512_maskz_loadu_pd(m, acc + j);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++)
            s = _mm512_fmadd_pd(xv[t], _mm512_maskz_loadu_pd(m, b + t * ldb + j), s);
        _mm512_mask_storeu_pd(acc + j, m, s);
    }
}

/* One float64 row, as one_row but 8 rows of B at a time, into sums
 * kept in L1, one fma per k in order. */
ATTR_512 static void direct_f64(int64_t kc, const void *av, int64_t rsa, int64_t csa,
                                const void *bv, int64_t ldb, void *cv, int64_t ldc, int rows,
                                int64_t cols, const wf_gemm_epilogue *e)
{
    (void)rsa, (void)ldc, (void)rows; /* one row */
    const double *x = av, *b = bv;
    double *c = cv, acc[512] __attribute__((aligned(64)));
    for (int64_t j0 = 0; j0 < cols; j0 += 512) {
        const int64_t w = cols - j0 < 512 ? cols - j0 : 512;
        for (int64_t j = 0; j < w; j += 8)
            _mm512_storeu_pd(acc + j, _mm512_setzero_pd());
        int64_t k = 0;
        for (; k + 8 <= kc; k += 8)
            sweep_rows64(8, w, x + k * csa, csa, b + k * ldb + j0, ldb, acc);
        for (; k < kc; k++)
            sweep_rows64(1, w, x + k * csa, csa, b + k * ldb + j0, ldb, acc);
        for (int64_t j = 0; j < w; j += 8) {
            const __mmask8 m = (__mmask8)lanes(w - j < 8 ? w - j : 8);
            double *cj = c + j0 + j;
            _mm512_mask_storeu_pd(cj, m, finish64(_mm512_loadu_pd(acc + j), cj, m, e));
        }
    }
}

/* Transposes the 16 x 16 block r in place (r[c] becomes column c). */
INLINE_512 void transpose16(__m512 r[16])
{
    __m512 t[16], u[16];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) { /* pairs of rows interleaved per 128-bit lane */
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) { /* u[4g + c], lane L: column 4L + c of rows 4g..4g+3 */
        u[4 * g] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) { /* gather lane L of the four groups */
        const __m512 x0 = _mm512_shuffle_f32x4(u[c], u[4 + c], _MM_SHUFFLE(2, 0, 2, 0));
        const __m512 y0 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], _MM_SHUFFLE(2, 0, 2, 0));
        const __m512 x1 = _mm512_shuffle_f32x4(u[c], u[4 + c], _MM_SHUFFLE(3, 1, 3, 1));
        const __m512 y1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], _MM_SHUFFLE(3, 1, 3, 1));
        r[c] = _mm512_shuffle_f32x4(x0, y0, _MM_SHUFFLE(2, 0, 2, 0));
        r[8 + c] = _mm512_shuffle_f32x4(x0, y0, _MM_SHUFFLE(3, 1, 3, 1));
        r[4 + c] = _mm512_shuffle_f32x4(x1, y1, _MM_SHUFFLE(2, 0, 2, 0));
        r[12 + c] = _mm512_shuffle_f32x4(x1, y1, _MM_SHUFFLE(3, 1, 3, 1));
    }
}

/* R rows x 16 columns (ncols of them valid) of C over all of k, B read
 * through its transpose (B[k][j] at b[j * ldb + k]): each 16 x 16 block of
 * B's transpose becomes 16 rows of B in registers, and each sum takes one
 * fma per k in order, K block by K block, as in the tiles. */
INLINE_512 void direct_t_group(const int R, const int kind, int64_t k, int64_t kcb,
                               const float *a, int64_t rsa, int64_t csa, const void *b,
                               int64_t ldb, float *c, int64_t ldc, int ncols,
                               const wf_gemm_epilogue *first)
{
    const __mmask16 out = lanes(ncols);
    for (int64_t k0 = 0; k0 < k; k0 += kcb) {
        const int64_t kc = k - k0 < kcb ? k - k0 : kcb;
        __m512 acc[DIRECT_ROWS];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            acc[r] = _mm512_setzero_ps();
        for (int64_t kk = 0; kk < kc; kk += 16) {
            const int64_t steps = kc - kk;
            const __mmask16 in = lanes(steps);
            const void *bk = b_at(b, k0 + kk, kind);
            __m512 v[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++)
                v[i] = i < ncols ? load_b16(b_at(bk, i * ldb, kind), in, kind)
                                 : _mm512_setzero_ps();
            transpose16(v); /* v[t]: B row k0 + kk + t, 16 columns */
            const float *ak = a + (k0 + kk) * csa;
#pragma GCC unroll 16
            for (int t = 0; t < 16; t++)
                if (t < steps)
#pragma GCC unroll 4
                    for (int r = 0; r < R; r++)
                        acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(ak[r * rsa + t * csa]), v[t], acc[r]);
        }
        const wf_gemm_epilogue e = {k0 == 0 ? first->mode : WF_GEMM_STORE_ADD, first->alpha,
                                    first->beta};
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            float *cr = c + r * ldc;
            _mm512_mask_storeu_ps(cr, out, wf__gemm_finish_f32x16(acc[r], cr, out, &e));
        }
    }
}

INLINE_512 void direct_t_rows(const int R, const int kind, int64_t k, int64_t kcb,
                              const float *a, int64_t rsa, int64_t csa, const void *b,
                              int64_t ldb, float *c, int64_t ldc, int64_t cols,
                              const wf_gemm_epilogue *first)
{
    for (int64_t j = 0; j < cols; j += 16)
        direct_t_group(R, kind, k, kcb, a, rsa, csa, b_at(b, j * ldb, kind), ldb, c + j, ldc,
                       cols - j < 16 ? (int)(cols - j) : 16, first);
}

INLINE_512 void direct_t_any(const int kind, int64_t k, int64_t kcb, const float *a, int64_t rsa,
                             int64_t csa, const void *b, int64_t ldb, float *c, int64_t ldc,
                             int rows, int64_t cols, const wf_gemm_epilogue *first)
{
    switch (rows) {
    case 1: direct_t_rows(1, kind, k, kcb, a, rsa, csa, b, ldb, c, ldc, cols, first); break;
    case 2: direct_t_rows(2, kind, k, kcb, a, rsa, csa, b, ldb, c, ldc, cols, first); break;
    case 3: direct_t_rows(3, kind, k, kcb, a, rsa, csa, b, ldb, c, ldc, cols, first); break;
    default: direct_t_rows(4, kind, k, kcb, a, rsa, csa, b, ldb, c, ldc, cols, first); break;
    }
}

ATTR_512 static void direct_t_f32(int64_t k, int64_t kcb, const void *a, int64_t rsa,
                                  int64_t csa, const void *b, int64_t ldb, void *c, int64_t ldc,
                                  int rows, int64_t cols, const wf_gemm_epilogue *first)
{
    direct_t_any(B_F32, k, kcb, a, rsa, csa, b, ldb, c, ldc, rows, cols, first);
}

/* gemm.h's direct_t_half: direct_t_f32 with B's halves converted as
 * loaded. */
ATTR_512 static void direct_t_half(int64_t k, int64_t kcb, const float *a, int64_t rsa,
                                   int64_t csa, const uint16_t *b, int64_t ldb, wf_dtype half,
                                   float *c, int64_t ldc, int rows, int64_t cols,
                                   const wf_gemm_epilogue *first)
{
    if (half == WF_DTYPE_BF16)
        direct_t_any(B_BF16, k, kcb, a, rsa, csa, b, ldb, c, ldc, rows, cols, first);
    else
        direct_t_any(B_F16, k, kcb, a, rsa, csa, b, ldb, c, ldc, rows, cols, first);
}

/* gemm.h's copy_lanes for float32, width <= 32: masked loads and stores
 * (lanes past n read as zero and are never touched in memory). */
ATTR_512 static void copy_lanes32(int n, int width, int64_t kc, const void *srcv, int64_t ld,
                                  void *dstv)
{
    const float *src = srcv;
    float *dst = dstv;
    const __mmask16 in0 = lanes(n), in1 = lanes(n - 16);
    const __mmask16 out0 = lanes(width), out1 = lanes(width - 16);
    for (int64_t k = 0; k < kc; k++, src += ld, dst += width) {
        _mm512_mask_storeu_ps(dst, out0, _mm512_maskz_loadu_ps(in0, src));
        if (width > 16)
            _mm512_mask_storeu_ps(dst + 16, out1, _mm512_maskz_loadu_ps(in1, src + 16));
    }
}

/* gemm.h's transpose32, 16 x 16 blocks at a time (moves only: bits kept). */
ATTR_512 static void transpose32(int rows, int width, int64_t cols, const void *srcv, int64_t ld,
                                 void *dstv)
{
    const float *src = srcv;
    float *dst = dstv;
    for (int r0 = 0; r0 < width; r0 += 16) {
        const int nrow = rows - r0;
        const __mmask16 out = lanes(width - r0);
        for (int64_t c0 = 0; c0 < cols; c0 += 16) {
            const int64_t nc = cols - c0;
            const __mmask16 in = lanes(nc);
            __m512 r[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++)
                r[i] = i < nrow ? _mm512_maskz_loadu_ps(in, src + (r0 + i) * ld + c0)
                                : _mm512_setzero_ps();
            transpose16(r);
#pragma GCC unroll 16
            for (int c = 0; c < 16; c++)
                if (c < nc)
                    _mm512_mask_storeu_ps(dst + (c0 + c) * width + r0, out, r[c]);
        }
    }
}

/* Transposes the 8 x 8 block r of doubles in place (r[c] becomes column c). */
INLINE_512 void transpose8x8(__m512d r[8])
{
    __m512d t[8], u[8];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) { /* per 128-bit lane L: (r[2i][2L], r[2i+1][2L]) and [2L+1] */
        t[2 * i] = _mm512_unpacklo_pd(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_pd(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) { /* lanes {0, 2} / {1, 3} of row pairs (0,1)+(2,3), (4,5)+(6,7) */
        u[4 * h] = _mm512_shuffle_f64x2(t[4 * h], t[4 * h + 2], _MM_SHUFFLE(2, 0, 2, 0));
        u[4 * h + 1] = _mm512_shuffle_f64x2(t[4 * h + 1], t[4 * h + 3], _MM_SHUFFLE(2, 0, 2, 0));
        u[4 * h + 2] = _mm512_shuffle_f64x2(t[4 * h], t[4 * h + 2], _MM_SHUFFLE(3, 1, 3, 1));
        u[4 * h + 3] = _mm512_shuffle_f64x2(t[4 * h + 1], t[4 * h + 3], _MM_SHUFFLE(3, 1, 3, 1));
    }
#pragma GCC unroll 2
    for (int q = 0; q < 2; q++) {
        r[q] = _mm512_shuffle_f64x2(u[q], u[4 + q], _MM_SHUFFLE(2, 0, 2, 0));
        r[4 + q] = _mm512_shuffle_f64x2(u[q], u[4 + q], _MM_SHUFFLE(3, 1, 3, 1));
        r[2 + q] = _mm512_shuffle_f64x2(u[2 + q], u[6 + q], _MM_SHUFFLE(2, 0, 2, 0));
        r[6 + q] = _mm512_shuffle_f64x2(u[2 + q], u[6 + q], _MM_SHUFFLE(3, 1, 3, 1));
    }
}

/* gemm.h's transpose for 64-bit elements, 8 x 8 blocks at a time. */
ATTR_512 static void transpose64(int rows, int width, int64_t cols, const void *srcv, int64_t ld,
                                 void *dstv)
{
    const double *src = srcv;
    double *dst = dstv;
    for (int r0 = 0; r0 < width; r0 += 8) {
        const int nrow = rows - r0;
        const int64_t nout = width - r0;
        const __mmask8 out = (__mmask8)lanes(nout < 8 ? nout : 8);
        for (int64_t c0 = 0; c0 < cols; c0 += 8) {
            const int64_t nc = cols - c0;
            const __mmask8 in = (__mmask8)lanes(nc < 8 ? nc : 8);
            __m512d r[8];
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++)
                r[i] = i < nrow ? _mm512_maskz_loadu_pd(in, src + (r0 + i) * ld + c0)
                                : _mm512_setzero_pd();
            transpose8x8(r);
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++)
                if (c < nc)
                    _mm512_mask_storeu_pd(dst + (c0 + c) * width + r0, out, r[c]);
        }
    }
}

/* bfloat16 pairs: each 32-bit lane of a B vector holds (B[2t][j], B[2t+1][j]);
 * vdpbf16ps adds both products to the float32 lane. R rows (<= MR): only
 * R x 2 accumulators, as tile_f32_rows. */
__attribute__((always_inline)) ATTR_512_BF16 static inline void
tile_bf16_rows(const int R, int64_t kc, const char *ap, int64_t astep, const char *bp,
               int64_t ldb, float *c, int64_t ldc, int cols, const wf_gemm_epilogue *e)
{
    __m512 acc[MR][2];
#pragma GCC unroll 14
    for (int r = 0; r < R; r++)
        acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t t = 0; t < (kc + 1) / 2; t++) {
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp);
        const __m512bh b1 = (__m512bh)_mm512_loadu_si512(bp + 64);
#pragma GCC unroll 14
        for (int r = 0; r < R; r++) {
            int pair; /* A[r][2t], A[r][2t + 1] */
            memcpy(&pair, ap + 4 * r, sizeof pair);
            const __m512bh av = (__m512bh)_mm512_set1_epi32(pair);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
        }
        ap += 2 * astep * (int64_t)sizeof(uint16_t);
        bp += ldb * (int64_t)sizeof(uint16_t);
    }
    const __mmask16 m0 = lanes(cols), m1 = lanes(cols - 16);
#pragma GCC unroll 14
    for (int r = 0; r < R; r++)
        store_row(c + r * ldc, acc[r][0], acc[r][1], m0, m1, e);
}

#define TILE_BF16_CASE(R)                                                                       \
    case R: tile_bf16_rows(R, kc, apv, astep, bpv, ldb, cv, ldc, cols, e); break;

ATTR_512_BF16 static void tile_bf16(int64_t kc, const void *apv, int64_t astep,
                                    const void *bpv, int64_t ldb, void *cv, int64_t ldc, int rows,
                                    int cols, const wf_gemm_epilogue *e)
{
    switch (rows) {
        TILE_BF16_CASE(1)
        TILE_BF16_CASE(2)
        TILE_BF16_CASE(3)
        TILE_BF16_CASE(4)
        TILE_BF16_CASE(5)
        TILE_BF16_CASE(6)
        TILE_BF16_CASE(7)
        TILE_BF16_CASE(8)
        TILE_BF16_CASE(9)
        TILE_BF16_CASE(10)
        TILE_BF16_CASE(11)
        TILE_BF16_CASE(12)
        TILE_BF16_CASE(13)
    default: TILE_BF16_CASE(14)
    }
}
#undef TILE_BF16_CASE

/* 16-bit lanes [0, n) of 32. */
INLINE_512 __mmask32 lanes32(int64_t n)
{
    return n >= 32 ? (__mmask32)0xffffffffu : n <= 0 ? (__mmask32)0 : (__mmask32)((1u << n) - 1);
}

/* vpermt2w indices interleaving two rows of 32 bfloat16 into pairs: word 2j
 * of the result is row 0's column j, word 2j + 1 row 1's; *lo for columns
 * 0..15, *hi for 16..31. */
INLINE_512 void pair_indices(__m512i *lo, __m512i *hi)
{
    uint16_t l[32], h[32];
    for (int j = 0; j < 16; j++) {
        l[2 * j] = (uint16_t)j;
        l[2 * j + 1] = (uint16_t)(32 + j);
        h[2 * j] = (uint16_t)(16 + j);
        h[2 * j + 1] = (uint16_t)(48 + j);
    }
    *lo = _mm512_loadu_si512(l);
    *hi = _mm512_loadu_si512(h);
}

/* gemm.h's bf16_pack_b for width 32: rows 2t and 2t + 1 interleaved. */
ATTR_512 static void pack_pairs(int cols, int width, int64_t kc, const uint16_t *b, int64_t ld,
                                uint16_t *dst)
{
    (void)width; /* always NR */
    const __mmask32 m = lanes32(cols);
    __m512i ilo, ihi;
    pair_indices(&ilo, &ihi);
    for (int64_t k = 0; k < kc; k += 2, dst += 2 * NR) {
        const __m512i r0 = _mm512_maskz_loadu_epi16(m, b + k * ld);
        const __m512i r1 = k + 1 < kc ? _mm512_maskz_loadu_epi16(m, b + (k + 1) * ld)
                                      : _mm512_setzero_si512();
        _mm512_storeu_si512(dst, _mm512_permutex2var_epi16(r0, ilo, r1));
        _mm512_storeu_si512(dst + NR, _mm512_permutex2var_epi16(r0, ihi, r1));
    }
}

/* One bfloat16 row: B's rows 2t and 2t + 1 interleaved on the fly (as
 * pack_pairs does) and added by vdpbf16ps into float32 sums kept in L1, 4
 * pairs per pass: the tiles' dot products in the tiles' order. */
ATTR_512_BF16 static void direct_bf16(int64_t kc, const void *av, int64_t rsa, int64_t csa,
                                      const void *bv, int64_t ldb, void *cv, int64_t ldc,
                                      int rows, int64_t cols, const wf_gemm_epilogue *e)
{
    (void)rsa, (void)ldc, (void)rows; /* one row */
    const uint16_t *x = av, *b = bv;
    float *c = cv, acc[1024] __attribute__((aligned(64)));
    __m512i ilo, ihi;
    pair_indices(&ilo, &ihi);
    const int64_t pairs = (kc + 1) / 2;
    for (int64_t j0 = 0; j0 < cols; j0 += 1024) {
        const int64_t w = cols - j0 < 1024 ? cols - j0 : 1024;
        for (int64_t j = 0; j < w; j += 16)
            _mm512_storeu_ps(acc + j, _mm512_setzero_ps());
        for (int64_t t0 = 0; t0 < pairs; t0 += 4) {
            const int np = pairs - t0 < 4 ? (int)(pairs - t0) : 4;
            __m512bh xp[4];
            for (int t = 0; t < np; t++) {
                const int64_t k = 2 * (t0 + t);
                const uint32_t second = k + 1 < kc ? x[(k + 1) * csa] : 0;
                xp[t] = (__m512bh)_mm512_set1_epi32((int)(x[k * csa] | second << 16));
            }
            for (int64_t j = 0; j < w; j += 32) {
                const __mmask32 m = lanes32(w - j);
                __m512 s0 = _mm512_loadu_ps(acc + j), s1 = _mm512_loadu_ps(acc + j + 16);
                for (int t = 0; t < np; t++) {
                    const int64_t k = 2 * (t0 + t);
                    const uint16_t *r = b + k * ldb + j0 + j;
                    const __m512i r0 = _mm512_maskz_loadu_epi16(m, r);
                    const __m512i r1 = k + 1 < kc ? _mm512_maskz_loadu_epi16(m, r + ldb)
                                                  : _mm512_setzero_si512();
                    const __m512i lo = _mm512_permutex2var_epi16(r0, ilo, r1);
                    const __m512i hi = _mm512_permutex2var_epi16(r0, ihi, r1);
                    s0 = _mm512_dpbf16_ps(s0, xp[t], (__m512bh)lo);
                    s1 = _mm512_dpbf16_ps(s1, xp[t], (__m512bh)hi);
                }
                _mm512_storeu_ps(acc + j, s0);
                _mm512_storeu_ps(acc + j + 16, s1);
            }
        }
        for (int64_t j = 0; j < w; j += 16) {
            const __mmask16 m = lanes(w - j);
            float *cj = c + j0 + j;
            const __m512 sums = _mm512_loadu_ps(acc + j);
            _mm512_mask_storeu_ps(cj, m, wf__gemm_finish_f32x16(sums, cj, m, e));
        }
    }
}

const wf_gemm_kernels wf__gemm_kernels_avx512 = {
    .f32 = {.mr = MR, .nr = NR, .tile = tile_f32, .tile_a_rows = tile_f32_a_rows, .b_in_place_rows = F32_IN_PLACE_ROWS, .lead_rows = F32_LEAD_ROWS, .transpose = transpose32,
            .copy_lanes = copy_lanes32, .direct_rows = DIRECT_ROWS, .direct = direct_f32, .direct_t = direct_t_f32,
            .direct_half = direct_half, .direct_t_half = direct_t_half},
    .f64 = {.mr = MR, .nr = NR64, .tile = tile_f64, .b_in_place_rows = 4 * MR, .transpose = transpose64,
            .direct_rows = 1, .direct = direct_f64}};

const wf_gemm_kernels wf__gemm_kernels_avx512_bf16 = {
    .f32 = {.mr = MR, .nr = NR, .tile = tile_f32, .tile_a_rows = tile_f32_a_rows, .b_in_place_rows = F32_IN_PLACE_ROWS, .lead_rows = F32_LEAD_ROWS, .transpose = transpose32,
            .copy_lanes = copy_lanes32, .direct_rows = DIRECT_ROWS, .direct = direct_f32, .direct_t = direct_t_f32,
            .direct_half = direct_half, .direct_t_half = direct_t_half},
    .f64 = {.mr = MR, .nr = NR64, .tile = tile_f64, .b_in_place_rows = 4 * MR, .transpose = transpose64,
            .direct_rows = 1, .direct = direct_f64},
    .bf16 = {.mr = MR, .nr = NR, .tile = tile_bf16, .transpose = transpose32,
             .direct_rows = 1, .direct = direct_bf16, .pack_b_pairs = pack_pairs}};

#else
typedef int wf__gemm_avx512_unused; /* not x86-64: nothing here */
#endif
