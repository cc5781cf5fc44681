/* AVX2 + FMA micro-kernels of weft's GEMM (see gemm.h): float32 6 x 16 and
 * float64 6 x 8 tiles (12 accumulators, 2 B vectors and a broadcast in the
 * 16 registers; float32 tiles compute only the rows given, from a packed A
 * panel or A's rows where they lie, and fetch ahead a B read in place) and
 * direct kernels for up to 3 rows with B read in place
 * (matrix-vector: B swept in long runs into sums kept in L1).
 * Sums are formed exactly as in the AVX-512 kernels (one fma per k, the same
 * epilogue), so the two variants give the same bits. Compiled with
 * per-function target attributes; called only after a CPU check (F16C is in
 * the attributes for direct_half's float16 loads, which gemm.c allows only
 * where the CPU has it). */
#include "backend/cpu/gemm.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <stdbool.h>
#include <string.h>

#define ATTR_AVX2 __attribute__((target("avx2,fma,f16c")))
#define INLINE_AVX2 ATTR_AVX2 __attribute__((always_inline)) static inline

enum { MR = 6, NR = 16, NR64 = 8, DIRECT_ROWS = 3 };
/* A tile reading B where it lies fetches B's row this many k ahead. */
enum { B_AHEAD = 16 };
/* ... and a tile reading a packed panel this many k ahead (2 KB): the
 * hardware prefetchers alone leave a panel streaming in from L3 (a served
 * weight) waiting. 384 x 1536 weights from L3, one Intel core: 12 rows
 * 91 -> 106 GFLOP/s, 32 rows 109 -> 113; 1024^3 unchanged. */
enum { PACKED_B_AHEAD = 32 };

/* Lanes [0, n) of 8 as a maskload/maskstore mask (n may be <= 0 or >= 8). */
INLINE_AVX2 __m256i lanes(int64_t n)
{
    const int c = n <= 0 ? 0 : n >= 8 ? 8 : (int)n;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Loads/stores the first n (1..8) lanes: plain when all 8 are valid. */
INLINE_AVX2 __m256 load_n(const float *p, int64_t n, __m256i m)
{
    return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
}
INLINE_AVX2 void store_n(float *p, __m256 v, int64_t n, __m256i m)
{
    if (n >= 8)
        _mm256_storeu_ps(p, v);
    else
        _mm256_maskstore_ps(p, m, v);
}

/* Stores sums `acc` over the first n (1..8) lanes at c (gemm.h's rule). */
INLINE_AVX2 void finish_store(float *c, __m256 acc, int64_t n, __m256i m,
                              const wf_gemm_epilogue *e)
{
    const __m256 alpha = _mm256_set1_ps((float)e->alpha);
    if (e->mode == WF_GEMM_STORE_SET) {
        store_n(c, _mm256_mul_ps(alpha, acc), n, m);
        return;
    }
    __m256 old = load_n(c, n, m);
    if (e->mode == WF_GEMM_STORE_BETA)
        old = _mm256_mul_ps(_mm256_set1_ps((float)e->beta), old);
    store_n(c, _mm256_fmadd_ps(alpha, acc, old), n, m);
}

/* Lanes [0, n) of 4 doubles as a mask (n may be <= 0 or >= 4). */
INLINE_AVX2 __m256i lanes64(int64_t n)
{
    const long long c = n <= 0 ? 0 : n >= 4 ? 4 : n;
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(c), _mm256_setr_epi64x(0, 1, 2, 3));
}

/* The same for the first n (1..4) float64 lanes. */
INLINE_AVX2 void finish_store64(double *c, __m256d acc, int64_t n, const wf_gemm_epilogue *e)
{
    const __m256i m = lanes64(n);
    const __m256d alpha = _mm256_set1_pd(e->alpha);
    __m256d v;
    if (e->mode == WF_GEMM_STORE_SET) {
        v = _mm256_mul_pd(alpha, acc);
    } else {
        __m256d old = n >= 4 ? _mm256_loadu_pd(c) : _mm256_maskload_pd(c, m);
        if (e->mode == WF_GEMM_STORE_BETA)
            old = _mm256_mul_pd(_mm256_set1_pd(e->beta), old);
        v = _mm256_fmadd_pd(alpha, acc, old);
    }
    if (n >= 4)
        _mm256_storeu_pd(c, v);
    else
        _mm256_maskstore_pd(c, m, v);
}

/* The tile of R rows (the rest of MR are not computed): A from a packed
 * panel (ap[k * astep + r]) or, `a_rows`, from A's rows where they lie
 * (ap[r * astep + k]); the same fma per k either way, so the same bits. */
INLINE_AVX2 void tile_f32_rows(const int R, const int V, const bool a_rows, const bool b_here,
                               int64_t kc, const float *ap, int64_t astep, const float *bp,
                               int64_t ldb, float *c, int64_t ldc, int cols,
                               const wf_gemm_epilogue *e)
{
    __m256 acc[MR][2];
#pragma GCC unroll 6
    for (int r = 0; r < R; r++)
        acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    /* Four k a pass: one loop branch and pointer step per 48 fmas, not 12
     * (Zen 3, one 6 x 16 tile in L1: 73 -> 81 GFLOP/s, peak 89). */
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; k++) {
        if (b_here) /* rows far apart defeat the hardware prefetcher */
            _mm_prefetch((const char *)(bp + B_AHEAD * ldb), _MM_HINT_T0);
        else /* a packed panel read the first time (a weight from L3) */
            _mm_prefetch((const char *)(bp + PACKED_B_AHEAD * NR), _MM_HINT_T0);
        const __m256 b0 = _mm256_loadu_ps(bp);
        const __m256 b1 = V == 2 ? _mm256_loadu_ps(bp + 8) : b0;
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            const __m256 av = _mm256_broadcast_ss(a_rows ? ap + r * astep : ap + r);
            acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
            if (V == 2)
                acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
        }
        ap += a_rows ? 1 : astep;
        bp += ldb;
    }
    const __m256i m0 = lanes(cols), m1 = lanes(cols - 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
        finish_store(c + r * ldc, acc[r][0], cols, m0, e);
        if (cols > 8)
            finish_store(c + r * ldc + 8, acc[r][1], cols - 8, m1, e);
    }
}

/* tile_f32_rows for `rows` (1..MR) rows, A packed or (a_rows) in place, B
 * packed (ldb == NR) or in place. A packed panel's step is passed as the
 * constant it is, so the unrolled loop addresses A with fixed offsets. A
 * last panel of at most 8 columns takes one vector a row (V = 1): half the
 * FMAs, each element's sum unchanged. */
#define TILE_F32_CASE(R, A_ROWS)                                                              \
    case R:                                                                                   \
        if (cols <= 8)                                                                        \
            tile_f32_rows(R, 1, A_ROWS, ldb != NR, kc, ap, astep, bp, ldb, c, ldc, cols, e);  \
        else if (ldb == NR && !A_ROWS && astep == MR)                                         \
            tile_f32_rows(R, 2, A_ROWS, false, kc, ap, MR, bp, NR, c, ldc, cols, e);          \
        else if (ldb == NR)                                                                   \
            tile_f32_rows(R, 2, A_ROWS, false, kc, ap, astep, bp, ldb, c, ldc, cols, e);      \
        else                                                                                  \
            tile_f32_rows(R, 2, A_ROWS, true, kc, ap, astep, bp, ldb, c, ldc, cols, e);       \
        break;
INLINE_AVX2 void tile_f32_any(const bool a_rows, int64_t kc, const float *ap, int64_t astep,
                              const float *bp, int64_t ldb, float *c, int64_t ldc, int rows,
                              int cols, const wf_gemm_epilogue *e)
{
    if (a_rows) {
        switch (rows) {
            TILE_F32_CASE(1, true)
            TILE_F32_CASE(2, true)
            TILE_F32_CASE(3, true)
            TILE_F32_CASE(4, true)
            TILE_F32_CASE(5, true)
        default: TILE_F32_CASE(MR, true)
        }
    } else {
        switch (rows) {
            TILE_F32_CASE(1, false)
            TILE_F32_CASE(2, false)
            TILE_F32_CASE(3, false)
            TILE_F32_CASE(4, false)
            TILE_F32_CASE(5, false)
        default: TILE_F32_CASE(MR, false)
        }
    }
}
#undef TILE_F32_CASE

ATTR_AVX2 static void tile_f32(int64_t kc, const void *ap, int64_t astep, const void *b,
                               int64_t ldb, void *c, int64_t ldc, int rows, int cols,
                               const wf_gemm_epilogue *e)
{
    tile_f32_any(false, kc, ap, astep, b, ldb, c, ldc, rows, cols, e);
}

/* gemm.h's tile_a_rows: A's rows read where they lie, astep apart. */
ATTR_AVX2 static void tile_f32_a_rows(int64_t kc, const void *ap, int64_t astep, const void *b,
                                      int64_t ldb, void *c, int64_t ldc, int rows, int cols,
                                      const wf_gemm_epilogue *e)
{
    tile_f32_any(true, kc, ap, astep, b, ldb, c, ldc, rows, cols, e);
}

ATTR_AVX2 static void tile_f64(int64_t kc, const void *apv, int64_t astep, const void *bv,
                               int64_t ldb, void *cv, int64_t ldc, int rows, int cols,
                               const wf_gemm_epilogue *e)
{
    const double *ap = apv, *bp = bv;
    double *c = cv;
    __m256d acc[MR][2];
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++)
        acc[r][0] = acc[r][1] = _mm256_setzero_pd();
#pragma GCC unroll 4 /* as tile_f32_rows's: 34 -> 39 GFLOP/s in L1 */
    for (int64_t k = 0; k < kc; k++) {
        const __m256d b0 = _mm256_loadu_pd(bp), b1 = _mm256_loadu_pd(bp + 4);
#pragma GCC unroll 6
        for (int r = 0; r < MR; r++) {
            const __m256d av = _mm256_broadcast_sd(ap + r);
            acc[r][0] = _mm256_fmadd_pd(av, b0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_pd(av, b1, acc[r][1]);
        }
        ap += astep;
        bp += ldb;
    }
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++)
        if (r < rows) {
            finish_store64(c + r * ldc, acc[r][0], cols, e);
            if (cols > 4)
                finish_store64(c + r * ldc + 4, acc[r][1], cols - 4, e);
        }
}

/* Transposes the 4 x 4 block r of doubles in place (r[c] becomes column c). */
INLINE_AVX2 void transpose4x4(__m256d r[4])
{
    const __m256d t0 = _mm256_unpacklo_pd(r[0], r[1]), t1 = _mm256_unpackhi_pd(r[0], r[1]);
    const __m256d t2 = _mm256_unpacklo_pd(r[2], r[3]), t3 = _mm256_unpackhi_pd(r[2], r[3]);
    r[0] = _mm256_permute2f128_pd(t0, t2, 0x20);
    r[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
    r[2] = _mm256_permute2f128_pd(t0, t2, 0x31);
    r[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
}

/* gemm.h's transpose for 64-bit elements, 4 x 4 blocks at a time. */
ATTR_AVX2 static void transpose64(int rows, int width, int64_t cols, const void *srcv, int64_t ld,
                                  void *dstv)
{
    const double *src = srcv;
    double *dst = dstv;
    for (int r0 = 0; r0 < width; r0 += 4) {
        const int nrow = rows - r0;
        const int64_t nout = width - r0;
        const __m256i out = lanes64(nout);
        for (int64_t c0 = 0; c0 < cols; c0 += 4) {
            const int64_t nc = cols - c0;
            const __m256i in = lanes64(nc);
            __m256d r[4];
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {
                const double *p = src + (r0 + i) * ld + c0;
                r[i] = i >= nrow ? _mm256_setzero_pd()
                       : nc >= 4 ? _mm256_loadu_pd(p)
                                 : _mm256_maskload_pd(p, in);
            }
            transpose4x4(r);
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                double *d = dst + (c0 + c) * width + r0;
                if (c < nc && nout >= 4)
                    _mm256_storeu_pd(d, r[c]);
                else if (c < nc)
                    _mm256_maskstore_pd(d, out, r[c]);
            }
        }
    }
}

/* Transposes the 8 x 8 block r in place (r[c] becomes column c). */
INLINE_AVX2 void transpose8(__m256 r[8])
{
    __m256 t[8], u[8];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) { /* pairs of rows interleaved per 128-bit lane */
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 2
    for (int g = 0; g < 2; g++) { /* u[4g + c], lane L: column 4L + c of rows 4g..4g+3 */
        u[4 * g] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
        r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
}

/* gemm.h's copy_lanes for float32, width <= 16: masked loads and stores
 * (lanes past n read as zero and are never touched in memory). */
ATTR_AVX2 static void copy_lanes32(int n, int width, int64_t kc, const void *srcv, int64_t ld,
                                   void *dstv)
{
    const float *src = srcv;
    float *dst = dstv;
    const __m256i in0 = lanes(n), in1 = lanes(n - 8), out0 = lanes(width), out1 = lanes(width - 8);
    for (int64_t k = 0; k < kc; k++, src += ld, dst += width) {
        _mm256_maskstore_ps(dst, out0, _mm256_maskload_ps(src, in0));
        if (width > 8)
            _mm256_maskstore_ps(dst + 8, out1, _mm256_maskload_ps(src + 8, in1));
    }
}

/* gemm.h's transpose32, 8 x 8 blocks at a time (moves only: bits kept). */
ATTR_AVX2 static void transpose32(int rows, int width, int64_t cols, const void *srcv, int64_t ld,
                                  void *dstv)
{
    const float *src = srcv;
    float *dst = dstv;
    for (int r0 = 0; r0 < width; r0 += 8) {
        const int nrow = rows - r0;
        const int64_t nout = width - r0;
        const __m256i out = lanes(nout);
        for (int64_t c0 = 0; c0 < cols; c0 += 8) {
            const int64_t nc = cols - c0;
            const __m256i in = lanes(nc);
            __m256 r[8];
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++)
                r[i] = i < nrow ? load_n(src + (r0 + i) * ld + c0, nc, in) : _mm256_setzero_ps();
            transpose8(r);
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++)
                if (c < nc)
                    store_n(dst + (c0 + c) * width + r0, r[c], nout, out);
        }
    }
}

/* How the direct kernel finds B's elements: float32, or float16 / bfloat16
 * converted (exactly) to float32 as they are loaded. */
enum { B_F32, B_F16, B_BF16 };

/* Element i of B stored as `kind`. */
INLINE_AVX2 const void *b_at(const void *b, int64_t i, const int kind)
{
    return (const char *)b + i * (kind == B_F32 ? 4 : 2);
}

/* The first n (1..8) elements of B from p (stored as `kind`) as float32,
 * the rest zero; memory past them is not read. */
INLINE_AVX2 __m256 load_b8(const void *p, int64_t n, __m256i m, const int kind)
{
    if (kind == B_F32)
        return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
    __m128i h;
    if (n >= 8) {
        h = _mm_loadu_si128(p);
    } else {
        uint16_t part[8] = {0};
        memcpy(part, p, (size_t)n * sizeof *part);
        h = _mm_loadu_si128((const __m128i *)(const void *)part);
    }
    if (kind == B_F16)
        return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* R rows x 8 columns (ncols of them valid) of C over all of k, B read
 * through its transpose (B[k][j] at b[j * ldb + k]): each 8 x 8 block of
 * B's transpose becomes 8 rows of B in registers; one fma per k in order,
 * K block by K block, as in the tiles. */
INLINE_AVX2 void direct_t_group(const int R, const int kind, int64_t k, int64_t kcb,
                                const float *a, int64_t rsa, int64_t csa, const void *b,
                                int64_t ldb, float *c, int64_t ldc, int ncols,
                                const wf_gemm_epilogue *first)
{
    const __m256i out = lanes(ncols);
    for (int64_t k0 = 0; k0 < k; k0 += kcb) {
        const int64_t kc = k - k0 < kcb ? k - k0 : kcb;
        __m256 acc[DIRECT_ROWS];
#pragma GCC unroll 3
        for (int r = 0; r < R; r++)
            acc[r] = _mm256_setzero_ps();
        for (int64_t kk = 0; kk < kc; kk += 8) {
            const int64_t steps = kc - kk;
            const __m256i in = lanes(steps);
            const void *bk = b_at(b, k0 + kk, kind);
            __m256 v[8];
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++)
                v[i] = i < ncols ? load_b8(b_at(bk, i * ldb, kind), steps, in, kind)
                                 : _mm256_setzero_ps();
            transpose8(v); /* v[t]: B row k0 + kk + t, 8 columns */
            const float *ak = a + (k0 + kk) * csa;
#pragma GCC unroll 8
            for (int t = 0; t < 8; t++)
                if (t < steps)
#pragma GCC unroll 3
                    for (int r = 0; r < R; r++)
                        acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(ak + r * rsa + t * csa), v[t],
                                                 acc[r]);
        }
        const wf_gemm_epilogue e = {k0 == 0 ? first->mode : WF_GEMM_STORE_ADD, first->alpha,
                                    first->beta};
#pragma GCC unroll 3
        for (int r = 0; r < R; r++)
            finish_store(c + r * ldc, acc[r], ncols, out, &e);
    }
}

INLINE_AVX2 void direct_t_rows(const int R, const int kind, int64_t k, int64_t kcb,
                               const float *a, int64_t rsa, int64_t csa, const void *b,
                               int64_t ldb, float *c, int64_t ldc, int64_t cols,
                               const wf_gemm_epilogue *first)
{
    for (int64_t j = 0; j < cols; j += 8)
        direct_t_group(R, kind, k, kcb, a, rsa, csa, b_at(b, j * ldb, kind), ldb, c + j, ldc,
                       cols - j < 8 ? (int)(cols - j) : 8, first);
}

INLINE_AVX2 void direct_t_any(const int kind, int64_t k, int64_t kcb, const float *a,
                              int64_t rsa, int64_t csa, const void *b, int64_t ldb, float *c,
                              int64_t ldc, int rows, int64_t cols,
                              const wf_gemm_epilogue *first)
{
    switch (rows) {
    case 1: direct_t_rows(1, kind, k, kcb, a, rsa, csa, b, ldb, c, ldc, cols, first); break;
    case 2: direct_t_rows(2, kind, k, kcb, a, rsa, csa, b, ldb, c, ldc, cols, first); break;
    default: direct_t_rows(3, kind, k, kcb, a, rsa, csa, b, ldb, c, ldc, cols, first); break;
    }
}

ATTR_AVX2 static void direct_t_f32(int64_t k, int64_t kcb, const void *a, int64_t rsa,
                                   int64_t csa, const void *b, int64_t ldb, void *c,
                                   int64_t ldc, int rows, int64_t cols,
                                   const wf_gemm_epilogue *first)
{
    direct_t_any(B_F32, k, kcb, a, rsa, csa, b, ldb, c, ldc, rows, cols, first);
}

/* gemm.h's direct_t_half: direct_t_f32 with B's halves converted as
 * loaded (float16 through F16C). */
ATTR_AVX2 static void direct_t_half(int64_t k, int64_t kcb, const float *a, int64_t rsa,
                                    int64_t csa, const uint16_t *b, int64_t ldb, wf_dtype half,
                                    float *c, int64_t ldc, int rows, int64_t cols,
                                    const wf_gemm_epilogue *first)
{
    if (half == WF_DTYPE_BF16)
        direct_t_any(B_BF16, k, kcb, a, rsa, csa, b, ldb, c, ldc, rows, cols, first);
    else
        direct_t_any(B_F16, k, kcb, a, rsa, csa, b, ldb, c, ldc, rows, cols, first);
}

/* For each of the R rows r of x (rsx apart): acc[r * ACC_COLS + 0..w) =
 * fma(x[r][t], B row t, acc) for the T rows t of B in one pass, in order. */
enum { ACC_COLS = 1024 };
INLINE_AVX2 void sweep_rows(const int R, const int T, const int kind, int64_t w, const float *x,
                            int64_t rsx, int64_t csx, const void *b, int64_t ldb, float *acc)
{
    const __m256i all = lanes(8);
    int64_t j = 0;
    for (; j + 16 <= w; j += 16) {
        __m256 s[DIRECT_ROWS][2];
#pragma GCC unroll 3
        for (int r = 0; r < R; r++) {
            s[r][0] = _mm256_loadu_ps(acc + r * ACC_COLS + j);
            s[r][1] = _mm256_loadu_ps(acc + r * ACC_COLS + j + 8);
        }
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            const __m256 b0 = load_b8(b_at(b, t * ldb + j, kind), 8, all, kind);
            const __m256 b1 = load_b8(b_at(b, t * ldb + j + 8, kind), 8, all, kind);
#pragma GCC unroll 3
            for (int r = 0; r < R; r++) {
                const __m256 xv = _mm256_broadcast_ss(x + r * rsx + t * csx);
                s[r][0] = _mm256_fmadd_ps(xv, b0, s[r][0]);
                s[r][1] = _mm256_fmadd_ps(xv, b1, s[r][1]);
            }
        }
#pragma GCC unroll 3
        for (int r = 0; r < R; r++) {
            _mm256_storeu_ps(acc + r * ACC_COLS + j, s[r][0]);
            _mm256_storeu_ps(acc + r * ACC_COLS + j + 8, s[r][1]);
        }
    }
    for (; j < w; j += 8) {
        const int64_t n = w - j;
        const __m256i m = lanes(n);
#pragma GCC unroll 3
        for (int r = 0; r < R; r++) {
            __m256 sr = load_n(acc + r * ACC_COLS + j, n, m);
#pragma GCC unroll 4
            for (int t = 0; t < T; t++)
                sr = _mm256_fmadd_ps(_mm256_broadcast_ss(x + r * rsx + t * csx),
                                     load_b8(b_at(b, t * ldb + j, kind), n, m, kind), sr);
            store_n(acc + r * ACC_COLS + j, sr, n, m);
        }
    }
}

/* R rows (1 to 3): B swept 4 rows at a time over up to 1024 columns into
 * sums kept in L1 (as OpenBLAS's gemv does), so B is read once in long
 * sequential runs for all the rows; each sum still takes one fma per k in
 * order, as in the tiles. */
INLINE_AVX2 void few_rows(const int R, const int kind, int64_t kc, const float *x, int64_t rsx,
                          int64_t csx, const void *b, int64_t ldb, float *c, int64_t ldc,
                          int64_t cols, const wf_gemm_epilogue *e)
{
    float acc[DIRECT_ROWS * ACC_COLS] __attribute__((aligned(32)));
    for (int64_t j0 = 0; j0 < cols; j0 += ACC_COLS) {
        const int64_t w = cols - j0 < ACC_COLS ? cols - j0 : ACC_COLS;
        for (int r = 0; r < R; r++)
            memset(acc + r * ACC_COLS, 0, (size_t)w * sizeof *acc);
        int64_t k = 0;
        for (; k + 4 <= kc; k += 4)
            sweep_rows(R, 4, kind, w, x + k * csx, rsx, csx, b_at(b, k * ldb + j0, kind), ldb,
                       acc);
        for (; k < kc; k++)
            sweep_rows(R, 1, kind, w, x + k * csx, rsx, csx, b_at(b, k * ldb + j0, kind), ldb,
                       acc);
        for (int r = 0; r < R; r++)
            for (int64_t j = 0; j < w; j += 8)
                finish_store(c + r * ldc + j0 + j, _mm256_loadu_ps(acc + r * ACC_COLS + j), w - j,
                             lanes(w - j), e);
    }
}

INLINE_AVX2 void direct_any(const int kind, int64_t kc, const float *a, int64_t rsa,
                            int64_t csa, const void *b, int64_t ldb, float *c, int64_t ldc,
                            int rows, int64_t cols, const wf_gemm_epilogue *e)
{
    switch (rows) {
    case 1: few_rows(1, kind, kc, a, rsa, csa, b, ldb, c, ldc, cols, e); break;
    case 2: few_rows(2, kind, kc, a, rsa, csa, b, ldb, c, ldc, cols, e); break;
    default: few_rows(3, kind, kc, a, rsa, csa, b, ldb, c, ldc, cols, e); break;
    }
}

ATTR_AVX2 static void direct_f32(int64_t kc, const void *a, int64_t rsa, int64_t csa,
                                 const void *b, int64_t ldb, void *c, int64_t ldc, int rows,
                                 int64_t cols, const wf_gemm_epilogue *e)
{
    direct_any(B_F32, kc, a, rsa, csa, b, ldb, c, ldc, rows, cols, e);
}

/* gemm.h's direct_half: direct_f32 with B's halves converted as loaded
 * (float16 through F16C). */
ATTR_AVX2 static void direct_half(int64_t kc, const float *a, int64_t rsa, int64_t csa,
                                  const uint16_t *b, int64_t ldb, wf_dtype half, float *c,
                                  int64_t ldc, int rows, int64_t cols, const wf_gemm_epilogue *e)
{
    if (half == WF_DTYPE_BF16)
        direct_any(B_BF16, kc, a, rsa, csa, b, ldb, c, ldc, rows, cols, e);
    else
        direct_any(B_F16, kc, a, rsa, csa, b, ldb, c, ldc, rows, cols, e);
}

ATTR_AVX2 static void direct_f64(int64_t kc, const void *av, int64_t rsa, int64_t csa,
                                 const void *bv, int64_t ldb, void *cv, int64_t ldc, int rows,
                                 int64_t cols, const wf_gemm_epilogue *e)
{
    (void)rsa, (void)ldc, (void)rows; /* one row */
    const double *x = av, *b = bv;
    double *c = cv, acc[512] __attribute__((aligned(32)));
    for (int64_t j0 = 0; j0 < cols; j0 += 512) {
        const int64_t w = cols - j0 < 512 ? cols - j0 : 512;
        for (int64_t j = 0; j < w; j += 4)
            _mm256_storeu_pd(acc + j, _mm256_setzero_pd());
        for (int64_t k = 0; k < kc; k += 4) {
            const int rows_now = kc - k < 4 ? (int)(kc - k) : 4;
            __m256d xv[4];
            for (int t = 0; t < rows_now; t++)
                xv[t] = _mm256_set1_pd(x[(k + t) * csa]);
            const double *bk = b + k * ldb + j0;
            for (int64_t j = 0; j < w; j += 4) {
                const int64_t n = w - j;
                const __m256i m = lanes64(n);
                __m256d s = _mm256_loadu_pd(acc + j);
                for (int t = 0; t < rows_now; t++) {
                    const double *p = bk + t * ldb + j;
                    const __m256d bk4 = n >= 4 ? _mm256_loadu_pd(p) : _mm256_maskload_pd(p, m);
                    s = _mm256_fmadd_pd(xv[t], bk4, s);
                }
                _mm256_storeu_pd(acc + j, s);
            }
        }
        for (int64_t j = 0; j < w; j += 4)
            finish_store64(c + j0 + j, _mm256_loadu_pd(acc + j), w - j, e);
    }
}

const wf_gemm_kernels wf__gemm_kernels_avx2 = {
    .f32 = {.mr = MR, .nr = NR, .tile = tile_f32, .tile_a_rows = tile_f32_a_rows, .b_in_place_rows = 4 * MR, .transpose = transpose32,
            .copy_lanes = copy_lanes32, .direct_rows = DIRECT_ROWS, .direct = direct_f32, .direct_t = direct_t_f32,
            .direct_half = direct_half, .direct_t_half = direct_t_half},
    .f64 = {.mr = MR, .nr = NR64, .tile = tile_f64, .b_in_place_rows = 4 * MR, .transpose = transpose64,
            .direct_rows = 1, .direct = direct_f64}};

#else
typedef int wf__gemm_avx2_unused; /* not x86-64: nothing here */
#endif
