/* complex64 products in weft's float32 GEMM (gemm.h, "complex64 B"): the
 * packing of B' straight from complex B, and the few-row (matrix-vector)
 * kernels that read B where it lies.
 *
 * B' (2k x 2n float32) is never stored: rows 2t and 2t + 1 of a packed
 * panel are made from row t of B, the first a copy of its (re, im) pairs,
 * the second each pair turned into (-im, re). The few-row kernels make the
 * second row in registers from the same load (a pair swap and a sign flip;
 * AVX-512 puts the sign on A's broadcast imaginary part instead, which
 * gives the same products exactly).
 * Both sum every element of C in the order of gemm.h's rule over B''s rows
 * (the re term of k = t, then the im term), so a row's bits are the same on
 * either path. */
#include "backend/cpu/gemm.h"

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/gemm_epilogue_avx512.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define COMPLEX_HAVE_X86 1
#else
#define COMPLEX_HAVE_X86 0
#endif

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* (re, im) pairs -> (-im, re), exactly (a sign flip, no rounding). */
static void rotate_pairs(const float *src, float *dst, int64_t pairs)
{
    for (int64_t j = 0; j < pairs; j++) {
        uint32_t im;
        memcpy(&im, src + 2 * j + 1, 4);
        im ^= 0x80000000u;
        memcpy(dst + 2 * j, &im, 4);
        dst[2 * j + 1] = src[2 * j];
    }
}

#if COMPLEX_HAVE_X86
#define ATTR_512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")))

/* Rows 2t and 2t + 1 of every panel (nr = 32) from row t of B at bt
 * (`pairs` complex columns), 16 pairs a step, zero-padded. */
ATTR_512 static void pack_rows_512(int64_t pairs, const float *bt, float *even, int64_t kc)
{
    const __m512 sign = _mm512_castsi512_ps(_mm512_set1_epi64((int64_t)0x80000000));
    for (int64_t p = 0; p < pairs; p += 16, bt += 32, even += 32 * kc) {
        const __mmask16 m0 = (__mmask16)(pairs - p >= 8 ? 0xffff : (1u << (2 * (pairs - p))) - 1);
        const __mmask16 m1 = (__mmask16)(pairs - p >= 16  ? 0xffff
                                         : pairs - p <= 8 ? 0
                                                          : (1u << (2 * (pairs - p - 8))) - 1);
        const __m512 v0 = _mm512_maskz_loadu_ps(m0, bt), v1 = _mm512_maskz_loadu_ps(m1, bt + 16);
        _mm512_storeu_ps(even, v0);
        _mm512_storeu_ps(even + 16, v1);
        _mm512_storeu_ps(even + 32, _mm512_maskz_xor_ps(m0, _mm512_permute_ps(v0, 0xB1), sign));
        _mm512_storeu_ps(even + 48, _mm512_maskz_xor_ps(m1, _mm512_permute_ps(v1, 0xB1), sign));
    }
}

#define ATTR_AVX2 __attribute__((target("avx2,fma")))

/* Lanes [0, n) of 8 as a maskload/maskstore mask (n may be <= 0 or >= 8). */
ATTR_AVX2 static __m256i tail_mask8(int64_t n)
{
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 0 ? 0 : n < 8 ? n : 8)), idx);
}

/* Rows 2t and 2t + 1 of every panel (nr = 16) from row t of B at bt
 * (`pairs` complex columns), 8 pairs a step, zero-padded. */
ATTR_AVX2 static void pack_rows_avx2(int64_t pairs, const float *bt, float *even, int64_t kc)
{
    const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi64x((int64_t)0x80000000));
    for (int64_t p = 0; p < pairs; p += 8, bt += 16, even += 16 * kc) {
        const int64_t floats = 2 * (pairs - p);
        __m256 v0, v1;
        if (floats >= 16) {
            v0 = _mm256_loadu_ps(bt);
            v1 = _mm256_loadu_ps(bt + 8);
        } else {
            v0 = _mm256_maskload_ps(bt, tail_mask8(floats));
            v1 = _mm256_maskload_ps(bt + 8, tail_mask8(floats - 8));
        }
        _mm256_storeu_ps(even, v0);
        _mm256_storeu_ps(even + 8, v1);
        _mm256_storeu_ps(even + 16, _mm256_xor_ps(_mm256_permute_ps(v0, 0xB1), sign));
        _mm256_storeu_ps(even + 24, _mm256_xor_ps(_mm256_permute_ps(v1, 0xB1), sign));
    }
}
#endif

void wf__gemm_pack_b_complex(const wf_gemm_args *g, int64_t k0, int64_t kc, int64_t j0,
                             int64_t j1, int nr, float *dst)
{
    const float *b = (const float *)g->b + 2 * ((k0 / 2) * g->rsb) + j0;
    const int64_t cols = j1 - j0, panels = (cols + nr - 1) / nr;
#if COMPLEX_HAVE_X86
    if (g->isa >= WF_GEMM_ISA_AVX512 && nr == 32) {
        for (int64_t t = 0; t < kc / 2; t++)
            pack_rows_512(cols / 2, b + 2 * t * g->rsb, dst + 2 * t * nr, kc);
        return;
    }
    if (g->isa == WF_GEMM_ISA_AVX2 && nr == 16) {
        for (int64_t t = 0; t < kc / 2; t++)
            pack_rows_avx2(cols / 2, b + 2 * t * g->rsb, dst + 2 * t * nr, kc);
        return;
    }
#endif
    for (int64_t t = 0; t < kc / 2; t++) {
        const float *bt = b + 2 * t * g->rsb;
        for (int64_t p = 0; p < panels; p++) {
            float *even = dst + (p * kc + 2 * t) * nr, *odd = even + nr;
            const int64_t n = min64(nr, cols - p * nr);
            memcpy(even, bt + p * nr, (size_t)n * sizeof(float));
            rotate_pairs(bt + p * nr, odd, n / 2);
            memset(even + n, 0, (size_t)(nr - n) * sizeof(float));
            memset(odd + n, 0, (size_t)(nr - n) * sizeof(float));
        }
    }
}

/* ---------------------------------------------------------------- few rows
 * Columns are swept a chunk at a time into sums kept in L1 (up to
 * COMPLEX_ROWS rows; CHUNK floats for the baseline, as many as SUMS
 * floats hold for AVX2 and AVX-512), several rows of B per pass, so B is
 * read in long runs and the sums are loaded and stored once a pass. */

enum { CHUNK = 1024, SUMS = 4096, COMPLEX_ROWS = WF_GEMM_COMPLEX_DIRECT_ROWS };

/* The store of gemm.h's rule for one value (the baseline: no FMA). */
static float finish_scalar(float acc, float old, const wf_gemm_epilogue *e)
{
    const float alpha = (float)e->alpha, beta = (float)e->beta;
    return e->mode == WF_GEMM_STORE_SET    ? alpha * acc
           : e->mode == WF_GEMM_STORE_BETA ? alpha * acc + beta * old
                                           : alpha * acc + old;
}

/* The baseline: products and sums rounded separately, as base_tile_f32. */
typedef float base_v4 __attribute__((vector_size(16)));

static base_v4 rotate_v4(base_v4 v)
{
    const base_v4 sign = {-1.0f, 1.0f, -1.0f, 1.0f};
    return (base_v4){v[1], v[0], v[3], v[2]} * sign;
}

static void direct_baseline(int64_t kc, const float *a, int64_t rsa, const float *b, int64_t rsb,
                            float *c, int64_t ldc, int rows, int64_t cols,
                            const wf_gemm_epilogue *e)
{
    base_v4 acc[COMPLEX_ROWS][CHUNK / 4];
    for (int64_t j0 = 0; j0 < cols; j0 += CHUNK) {
        const int64_t w = min64(CHUNK, cols - j0), vecs = (w + 3) / 4;
        memset(acc, 0, sizeof acc);
        for (int64_t t = 0; t < kc / 2; t++) {
            const float *bt = b + 2 * t * rsb + j0;
            for (int64_t q = 0; q < vecs; q++) {
                base_v4 bv = {0, 0, 0, 0};
                memcpy(&bv, bt + 4 * q, (size_t)min64(4, w - 4 * q) * sizeof(float));
                const base_v4 br = rotate_v4(bv);
                for (int r = 0; r < rows; r++) {
                    const float re = a[r * rsa + 2 * t], im = a[r * rsa + 2 * t + 1];
                    acc[r][q] += (base_v4){re, re, re, re} * bv;
                    acc[r][q] += (base_v4){im, im, im, im} * br;
                }
            }
        }
        for (int r = 0; r < rows; r++)
            for (int64_t j = 0; j < w; j++) {
                float *cj = c + r * ldc + j0 + j;
                *cj = finish_scalar(acc[r][j / 4][j % 4], *cj, e);
            }
    }
}

#if COMPLEX_HAVE_X86
/* AVX2: 8 floats (4 complex) a vector. */

/* (re, im) pairs -> (im, re). */
ATTR_AVX2 static __m256 swap_v8(__m256 v) { return _mm256_permute_ps(v, 0xB1); }

/* x in odd lanes, -x in even ones: times swap_v8(b) it gives B''s odd row
 * times x, with the same bits (the sign moves exactly from one factor to
 * the other), one sign flip per row of A rather than per vector of B. */
ATTR_AVX2 static __m256 signed_set1_v8(float x)
{
    const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi64x((int64_t)0x80000000));
    return _mm256_xor_ps(_mm256_set1_ps(x), sign);
}

ATTR_AVX2 static __m256 finish_v8(__m256 acc, const float *c, __m256i m,
                                  const wf_gemm_epilogue *e)
{
    const __m256 alpha = _mm256_set1_ps((float)e->alpha);
    if (e->mode == WF_GEMM_STORE_SET)
        return _mm256_mul_ps(alpha, acc);
    __m256 old = _mm256_maskload_ps(c, m);
    if (e->mode == WF_GEMM_STORE_BETA)
        old = _mm256_mul_ps(_mm256_set1_ps((float)e->beta), old);
    return _mm256_fmadd_ps(alpha, acc, old);
}

/* sums[r][0..w) += row r of A times T rows of B (from bt), one pass over
 * the chunk: fma by the re of each k, then by its im, k in order. Two
 * vectors a step (independent sums, so the fma latency is hidden); a last
 * odd vector and a narrower tail alone. */
__attribute__((always_inline)) ATTR_AVX2 static inline void
sweep_avx2(const int R, const int T, const float *a, int64_t rsa, const float *bt, int64_t rsb,
           int64_t w, float *sums, int64_t ws)
{
    __m256 re[COMPLEX_ROWS][4], im[COMPLEX_ROWS][4];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int u = 0; u < T; u++) {
            re[r][u] = _mm256_set1_ps(a[r * rsa + 2 * u]);
            im[r][u] = signed_set1_v8(a[r * rsa + 2 * u + 1]);
        }
    int64_t j = 0;
    for (; j + 16 <= w; j += 16) {
        __m256 s0[COMPLEX_ROWS], s1[COMPLEX_ROWS];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            s0[r] = _mm256_load_ps(sums + r * ws + j);
            s1[r] = _mm256_load_ps(sums + r * ws + j + 8);
        }
#pragma GCC unroll 4
        for (int u = 0; u < T; u++) {
            const float *bu = bt + 2 * u * rsb + j;
            const __m256 b0 = _mm256_loadu_ps(bu), b1 = _mm256_loadu_ps(bu + 8);
            const __m256 r0 = swap_v8(b0), r1 = swap_v8(b1);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                s0[r] = _mm256_fmadd_ps(re[r][u], b0, s0[r]);
                s1[r] = _mm256_fmadd_ps(re[r][u], b1, s1[r]);
                s0[r] = _mm256_fmadd_ps(im[r][u], r0, s0[r]);
                s1[r] = _mm256_fmadd_ps(im[r][u], r1, s1[r]);
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            _mm256_store_ps(sums + r * ws + j, s0[r]);
            _mm256_store_ps(sums + r * ws + j + 8, s1[r]);
        }
    }
    for (; j < w; j += 8) {
        const __m256i m = tail_mask8(w - j);
        __m256 s[COMPLEX_ROWS];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            s[r] = _mm256_load_ps(sums + r * ws + j);
#pragma GCC unroll 4
        for (int u = 0; u < T; u++) {
            const __m256 bv = _mm256_maskload_ps(bt + 2 * u * rsb + j, m), br = swap_v8(bv);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                s[r] = _mm256_fmadd_ps(re[r][u], bv, s[r]);
                s[r] = _mm256_fmadd_ps(im[r][u], br, s[r]);
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            _mm256_store_ps(sums + r * ws + j, s[r]);
    }
}

/* R rows over one chunk of w <= ws columns: sums kept in L1 (rows ws
 * apart), B swept 4 (one row of A), 2 (two) or 1 rows at a time, so the
 * broadcast parts of A and the sums fit the 16 registers. */
__attribute__((always_inline)) ATTR_AVX2 static inline void
chunk_avx2(const int R, int64_t kc, const float *a, int64_t rsa, const float *b, int64_t rsb,
           float *c, int64_t ldc, int64_t w, int64_t ws, float *sums, const wf_gemm_epilogue *e)
{
    const int T = R == 1 ? 4 : R == 2 ? 2 : 1;
    for (int r = 0; r < R; r++)
        for (int64_t j = 0; j < w; j += 8)
            _mm256_store_ps(sums + r * ws + j, _mm256_setzero_ps());
    int64_t t = 0;
    for (; t + T <= kc / 2; t += T)
        sweep_avx2(R, T, a + 2 * t, rsa, b + 2 * t * rsb, rsb, w, sums, ws);
    for (; t < kc / 2; t++)
        sweep_avx2(R, 1, a + 2 * t, rsa, b + 2 * t * rsb, rsb, w, sums, ws);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        for (int64_t j = 0; j < w; j += 8) {
            float *cj = c + r * ldc + j;
            const __m256i m = tail_mask8(w - j);
            _mm256_maskstore_ps(cj, m, finish_v8(_mm256_load_ps(sums + r * ws + j), cj, m, e));
        }
}

/* R rows, columns in chunks as wide as SUMS floats of sums allow (one row:
 * 2048 complex columns, whole rows of B for most matrix-vector products). */
__attribute__((always_inline)) ATTR_AVX2 static inline void
rows_avx2(const int R, int64_t kc, const float *a, int64_t rsa, const float *b, int64_t rsb,
          float *c, int64_t ldc, int64_t cols, const wf_gemm_epilogue *e)
{
    float sums[SUMS] __attribute__((aligned(32)));
    const int64_t ws = SUMS / R / 16 * 16;
    for (int64_t j0 = 0; j0 < cols; j0 += ws)
        chunk_avx2(R, kc, a, rsa, b + j0, rsb, c + j0, ldc, min64(ws, cols - j0), ws, sums, e);
}

ATTR_AVX2 static void direct_avx2(int64_t kc, const float *a, int64_t rsa, const float *b,
                                  int64_t rsb, float *c, int64_t ldc, int rows, int64_t cols,
                                  const wf_gemm_epilogue *e)
{
    switch (rows) {
    case 1: rows_avx2(1, kc, a, rsa, b, rsb, c, ldc, cols, e); break;
    case 2: rows_avx2(2, kc, a, rsa, b, rsb, c, ldc, cols, e); break;
    case 3: rows_avx2(3, kc, a, rsa, b, rsb, c, ldc, cols, e); break;
    default: rows_avx2(4, kc, a, rsa, b, rsb, c, ldc, cols, e); break;
    }
}

/* AVX-512: 16 floats (8 complex) a vector. */
ATTR_512 static __mmask16 lanes16(int64_t n)
{
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}

/* (re, im) pairs -> (im, re). */
ATTR_512 static __m512 swap_v16(__m512 v) { return _mm512_permute_ps(v, 0xB1); }

/* x in odd lanes, -x in even ones: times swap_v16(b) it gives B''s odd row
 * times x, with the same bits (the sign moves exactly from one factor to
 * the other). */
ATTR_512 static __m512 signed_set1(float x)
{
    const __m512 sign = _mm512_castsi512_ps(_mm512_set1_epi64((int64_t)0x80000000));
    return _mm512_xor_ps(_mm512_set1_ps(x), sign);
}

/* One step of sweep_512: V vectors of columns from j (mask m on the last),
 * each a chain of 2T fmas per row; the V chains are independent, so that
 * their latencies can overlap. */
__attribute__((always_inline)) ATTR_512 static inline void
sweep_step_512(const int R, const int T, const int V, const __m512 (*re)[8],
               const __m512 (*im)[8], const float *bt, int64_t rsb, bool prefetch, int64_t j,
               __mmask16 m, float *sums, int64_t ws)
{
    __m512 s[COMPLEX_ROWS][4];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int v = 0; v < V; v++)
            s[r][v] = _mm512_load_ps(sums + r * ws + j + 16 * v);
#pragma GCC unroll 8
    for (int u = 0; u < T; u++) {
        const float *bu = bt + 2 * u * rsb + j;
#pragma GCC unroll 4
        for (int v = 0; v < V; v++) {
            if (prefetch) /* 8 rows ahead, to L2 (the rows' L1 sets may coincide) */
                __builtin_prefetch(bu + 16 * v + 16 * rsb, 0, 2);
            const __m512 bv = v == V - 1 ? _mm512_maskz_loadu_ps(m, bu + 16 * v)
                                         : _mm512_loadu_ps(bu + 16 * v);
            const __m512 br = swap_v16(bv);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                s[r][v] = _mm512_fmadd_ps(re[r][u], bv, s[r][v]);
                s[r][v] = _mm512_fmadd_ps(im[r][u], br, s[r][v]);
            }
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int v = 0; v < V; v++)
            _mm512_store_ps(sums + r * ws + j + 16 * v, s[r][v]);
}

/* sums[r][0..w) += row r of A times T rows of B (from bt), one pass over
 * the chunk: fma by the re of each k, then by its im, k in order. Four
 * vectors a step for one row of A, two for more (registers), then single
 * vectors, the last one masked. */
__attribute__((always_inline)) ATTR_512 static inline void
sweep_512(const int R, const int T, const float *a, int64_t rsa, const float *bt, int64_t rsb,
          bool prefetch, int64_t w, float *sums, int64_t ws)
{
    __m512 re[COMPLEX_ROWS][8], im[COMPLEX_ROWS][8];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int u = 0; u < T; u++) {
            re[r][u] = _mm512_set1_ps(a[r * rsa + 2 * u]);
            im[r][u] = signed_set1(a[r * rsa + 2 * u + 1]);
        }
    const int V = R == 1 ? 4 : 2;
    int64_t j = 0;
    for (; j + 16 * V <= w; j += 16 * V)
        sweep_step_512(R, T, V, (const __m512(*)[8])re, (const __m512(*)[8])im, bt, rsb, prefetch,
                       j, (__mmask16)0xffff, sums, ws);
    for (; j < w; j += 16)
        sweep_step_512(R, T, 1, (const __m512(*)[8])re, (const __m512(*)[8])im, bt, rsb, prefetch,
                       j, lanes16(w - j), sums, ws);
}

/* R rows over one chunk of w <= ws columns: sums kept in L1 (rows ws
 * apart), B swept 8 (one row) or 2 rows at a time. */
__attribute__((always_inline)) ATTR_512 static inline void
chunk_512(const int R, int64_t kc, const float *a, int64_t rsa, const float *b, int64_t rsb,
          bool prefetch, float *c, int64_t ldc, int64_t w, int64_t ws, float *sums,
          const wf_gemm_epilogue *e)
{
    const int T = R == 1 ? 8 : 2;
    for (int r = 0; r < R; r++)
        for (int64_t j = 0; j < w; j += 16)
            _mm512_store_ps(sums + r * ws + j, _mm512_setzero_ps());
    int64_t t = 0;
    for (; t + T <= kc / 2; t += T)
        sweep_512(R, T, a + 2 * t, rsa, b + 2 * t * rsb, rsb, prefetch, w, sums, ws);
    for (; t < kc / 2; t++)
        sweep_512(R, 1, a + 2 * t, rsa, b + 2 * t * rsb, rsb, prefetch, w, sums, ws);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        for (int64_t j = 0; j < w; j += 16) {
            float *cj = c + r * ldc + j;
            const __mmask16 m = lanes16(w - j);
            const __m512 acc = _mm512_load_ps(sums + r * ws + j);
            _mm512_mask_storeu_ps(cj, m, wf__gemm_finish_f32x16(acc, cj, m, e));
        }
}

/* R rows, columns in chunks as wide as SUMS floats of sums allow (one
 * row: 2048 complex columns, whole rows of B for most matrix-vector
 * products, read in one sequential run). */
__attribute__((always_inline)) ATTR_512 static inline void
rows_512(const int R, int64_t kc, const float *a, int64_t rsa, const float *b, int64_t rsb,
         bool prefetch, float *c, int64_t ldc, int64_t cols, const wf_gemm_epilogue *e)
{
    float sums[SUMS] __attribute__((aligned(64)));
    const int64_t ws = SUMS / R / 16 * 16;
    for (int64_t j0 = 0; j0 < cols; j0 += ws)
        chunk_512(R, kc, a, rsa, b + j0, rsb, prefetch, c + j0, ldc, min64(ws, cols - j0), ws,
                  sums, e);
}

ATTR_512 static void direct_avx512(int64_t kc, const float *a, int64_t rsa, const float *b,
                                   int64_t rsb, bool prefetch, float *c, int64_t ldc, int rows,
                                   int64_t cols, const wf_gemm_epilogue *e)
{
    switch (rows) {
    case 1: rows_512(1, kc, a, rsa, b, rsb, prefetch, c, ldc, cols, e); break;
    case 2: rows_512(2, kc, a, rsa, b, rsb, prefetch, c, ldc, cols, e); break;
    case 3: rows_512(3, kc, a, rsa, b, rsb, prefetch, c, ldc, cols, e); break;
    default: rows_512(4, kc, a, rsa, b, rsb, prefetch, c, ldc, cols, e); break;
    }
}
#endif

void wf__gemm_complex_direct(const wf_gemm_args *g, int64_t i0, int64_t i1, int64_t j0,
                             int64_t j1)
{
    const int64_t kcb = wf__gemm_k_block(g->k);
    const float *a = (const float *)g->a + i0 * g->rsa;
    float *c = (float *)g->c + i0 * g->ldc + j0;
    const int rows = (int)(i1 - i0);
#if COMPLEX_HAVE_X86
    /* The AVX-512 kernel asks for B's rows ahead where B (2k n floats
     * read, whichever threads read them) is more than half the last-level
     * cache: it then comes from memory, and 1x2048 @ 2048^2 is 1.2x and
     * 1x4096 @ 4096^2 1.1x faster with the prefetches on Zen 4. Where B
     * stays in that cache between products, the hardware's own prefetch
     * does better without them (1x1024 @ 1024^2: 1.2x; the crossing lies
     * between 13 and 16 MiB of B on a 32 MiB L3). */
    const int64_t b_bytes = g->k * g->n * (int64_t)sizeof(float);
    const bool prefetch = b_bytes > wf__cpu_last_level_cache_bytes() / 2;
#endif
    for (int64_t k0 = 0; k0 < g->k; k0 += kcb) {
        const int64_t kc = min64(kcb, g->k - k0);
        const wf_gemm_epilogue e = {
            .mode = k0 > 0 ? WF_GEMM_STORE_ADD : g->beta == 0 ? WF_GEMM_STORE_SET
                                                               : WF_GEMM_STORE_BETA,
            .alpha = g->alpha,
            .beta = g->beta};
        const float *ak = a + k0, *bk = (const float *)g->b + 2 * ((k0 / 2) * g->rsb) + j0;
#if COMPLEX_HAVE_X86
        if (g->isa >= WF_GEMM_ISA_AVX512) {
            direct_avx512(kc, ak, g->rsa, bk, g->rsb, prefetch, c, g->ldc, rows, j1 - j0, &e);
            continue;
        }
        if (g->isa == WF_GEMM_ISA_AVX2) {
            direct_avx2(kc, ak, g->rsa, bk, g->rsb, c, g->ldc, rows, j1 - j0, &e);
            continue;
        }
#endif
        direct_baseline(kc, ak, g->rsa, bk, g->rsb, c, g->ldc, rows, j1 - j0, &e);
    }
}
