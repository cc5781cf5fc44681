/* AVX2 matrix-vector kernel of quantized_matmul (backend/cpu/quantized.h):
 * the AVX-512 kernel's schemes with 8 lanes (8 rows of W at a time).
 * Compiled with per-function target attributes; called only after a CPU
 * check. */
#include "backend/cpu/quantized.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define ATTR_AVX2 __attribute__((target("avx2,fma")))
#define INLINE_AVX2 ATTR_AVX2 __attribute__((always_inline)) static inline

/* Lanes [0, n) of 8 as a vector mask. */
INLINE_AVX2 __m256i lanes(int64_t n)
{
    const __m256i iota = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 8 ? n : 8)), iota);
}

/* The values of fp4 (e2m1) or fp8 (e4m3) codes (the low 4 or 8 bits of
 * each lane). fp8: (mantissa with its implicit bit) * 2^(max(e, 1) - 10),
 * built from integers so that no operand is subnormal (subnormal operands
 * cost microcode assists). */
INLINE_AVX2 __m256 fp_values(__m256i c, int mode)
{
    if (mode != WF_QUANT_MXFP8) { /* magnitude by the low 3 bits, then the sign */
        const __m256 mag = _mm256_permutevar8x32_ps(_mm256_set_ps(6, 4, 3, 2, 1.5f, 1, 0.5f, 0), c);
        const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(8)), 28);
        return _mm256_castsi256_ps(_mm256_or_si256(_mm256_castps_si256(mag), sign));
    }
    const __m256i e = _mm256_and_si256(_mm256_srli_epi32(c, 3), _mm256_set1_epi32(15));
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i mant = _mm256_or_si256(_mm256_and_si256(c, _mm256_set1_epi32(7)),
                                          _mm256_slli_epi32(_mm256_min_epu32(e, one), 3));
    const __m256i power = _mm256_slli_epi32(_mm256_add_epi32(_mm256_max_epu32(e, one),
                                                             _mm256_set1_epi32(127 - 10)), 23);
    const __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(mant), _mm256_castsi256_ps(power));
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(0x80)), 24);
    return _mm256_castsi256_ps(_mm256_or_si256(_mm256_castps_si256(v), sign));
}

INLINE_AVX2 void accumulate(__m256i word, int shift, int count, int bits, int mode, __m256 s, __m256 b,
                            const float *x, int64_t ldx, int rows, int64_t k, int j0,
                            __m256 *acc)
{
    const __m256i mask = _mm256_set1_epi32((1 << bits) - 1);
    for (int j = 0; j < count; j++) {
        const __m256i q = _mm256_and_si256(
            _mm256_srl_epi32(word, _mm_cvtsi32_si128(shift + j * bits)), mask);
        const __m256 w = mode != WF_QUANT_AFFINE
                               ? _mm256_mul_ps(fp_values(q, mode), s)
                               : _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(q), s), b);
        for (int r = 0; r < rows; r++)
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(x[r * ldx + k + j0 + j]), w, acc[r]);
    }
}

INLINE_AVX2 void block_sums(const wf_qmv_args *a, int64_t nb, __m256i m, int64_t k0, int64_t k1,
                            int rows, __m256 *acc)
{
    const int bits = a->bits, gs = a->group_size;
    const int *words = (const int *)(a->codes + nb * a->row_bytes);
    const float *sb = a->scales + nb * a->groups;
    const float *bb = a->biases ? a->biases + nb * a->groups : NULL;
    const __m256i iota = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
    const __m256i word_index = _mm256_mullo_epi32(iota, _mm256_set1_epi32((int)(a->row_bytes / 4)));
    const __m256i group_index = _mm256_mullo_epi32(iota, _mm256_set1_epi32((int)a->groups));
    const __m256 mf = _mm256_castsi256_ps(m);
    __m256 s = _mm256_setzero_ps(), b = _mm256_setzero_ps();
    for (int r = 0; r < rows; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t k = k0; k < k1; k += 8) {
        if (k == k0 || k % gs == 0) {
            const int64_t g = k / gs;
            s = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), sb + g, group_index, mf, 4);
            if (bb)
                b = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), bb + g, group_index, mf, 4);
        }
        const int64_t bit = k * bits;
        const __m256i w0 =
            _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), words + bit / 32, word_index, m, 4);
        if (bits == 8) {
            const __m256i w1 = _mm256_mask_i32gather_epi32(_mm256_setzero_si256(),
                                                           words + bit / 32 + 1, word_index, m, 4);
            accumulate(w0, 0, 4, 8, a->mode, s, b, a->x, a->ldx, rows, k, 0, acc);
            accumulate(w1, 0, 4, 8, a->mode, s, b, a->x, a->ldx, rows, k, 4, acc);
        } else {
            accumulate(w0, (int)(bit % 32), 8, bits, a->mode, s, b, a->x, a->ldx, rows, k, 0, acc);
        }
    }
}

/* ---- the fast path for 4- and 8-bit affine codes (the AVX-512 kernel's:
 * codes masked under 2^23's exponent, fma(f, s * 2^-p, -2^23 * s * 2^-p)
 * = code * s rounded once, exact for 2^-100 <= |s| <= 2^100), two blocks
 * of 8 rows per pass, rows copied per 64-byte line and gathered from the
 * copy. */

enum { FAST_BLOCKS = 2 };

typedef struct fast_group {
    __m256 sp[4], c[4], b;
} fast_group;

INLINE_AVX2 void fast_group_set(__m256 s, __m256 b, int bits, fast_group *f)
{
    for (int i = 0; i < 16 / bits; i++) {
        f->sp[i] = _mm256_mul_ps(s, _mm256_set1_ps(1.0f / (float)(1 << (i * bits))));
        f->c[i] = _mm256_mul_ps(f->sp[i], _mm256_set1_ps(-0x1p23f));
    }
    f->b = b;
}

INLINE_AVX2 __m256 fast_values(__m256i word, int i, int bits, const fast_group *f)
{
    const __m256i field = _mm256_set1_epi32(((1 << bits) - 1) << (i * bits));
    const __m256i exponent = _mm256_set1_epi32(0x4B000000); /* 2^23 */
    const __m256 q = _mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(word, field), exponent));
    return _mm256_add_ps(_mm256_fmadd_ps(q, f->sp[i], f->c[i]), f->b);
}

INLINE_AVX2 bool fast_scales_ok(const wf_qmv_args *a, int64_t nb, int64_t count)
{
    const __m256 lo = _mm256_set1_ps(0x1p-100f), hi = _mm256_set1_ps(0x1p100f);
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t r = nb; r < nb + count; r++) {
        const float *s = a->scales + r * a->groups;
        for (int64_t g = 0; g < a->groups; g += 8) {
            const __m256i m = lanes(a->groups - g);
            const __m256 v = _mm256_and_ps(_mm256_maskload_ps(s + g, m), abs_mask);
            const __m256 ok = _mm256_and_ps(_mm256_cmp_ps(v, lo, _CMP_GE_OQ),
                                            _mm256_cmp_ps(v, hi, _CMP_LE_OQ));
            if (_mm256_movemask_ps(_mm256_andnot_ps(ok, _mm256_castsi256_ps(m))) != 0)
                return false;
        }
    }
    return true;
}

/* Up to 16 words from word `first` of each of the block's rows (8, `active` of them). */
INLINE_AVX2 void copy_block_words(const int32_t *words, int64_t row_words, int active,
                                  int64_t first, int count, int32_t (*buf)[16])
{
    const __m256i m0 = lanes(count), m1 = lanes(count > 8 ? count - 8 : 0);
    for (int r = 0; r < active; r++) {
        const int32_t *src = words + r * row_words + first;
        _mm_prefetch((const char *)(src + 2 * 16), _MM_HINT_T0);
        _mm_prefetch((const char *)(src + 4 * 16), _MM_HINT_T0);
        _mm256_storeu_si256((__m256i *)buf[r], _mm256_maskload_epi32(src, m0));
        _mm256_storeu_si256((__m256i *)(buf[r] + 8), _mm256_maskload_epi32(src + 8, m1));
    }
}

INLINE_AVX2 void fast_sums(const wf_qmv_args *a, int64_t nb, int nblk, const int *active,
                           const __m256i *m, int64_t k0, int64_t k1, int rows, int bits, int mode,
                           __m256 acc[][WF_QMV_ROWS])
{
    const int gs = a->group_size, per_word = 32 / bits, half = per_word / 2;
    const int64_t row_words = a->row_bytes / 4;
    const __m256i iota = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
    const __m256i buf_index = _mm256_slli_epi32(iota, 4);
    const __m256i group_index = _mm256_mullo_epi32(iota, _mm256_set1_epi32((int)a->groups));
    const int32_t *words[FAST_BLOCKS];
    const float *sb[FAST_BLOCKS], *bb[FAST_BLOCKS];
    int32_t buf[FAST_BLOCKS][8][16];
    fast_group f[FAST_BLOCKS];
    __builtin_memset(f, 0, sizeof f); /* set at k0; zeroed for the compiler's sake */
    for (int blk = 0; blk < nblk; blk++) {
        words[blk] = (const int32_t *)(a->codes + (nb + 8 * blk) * a->row_bytes);
        sb[blk] = a->scales + (nb + 8 * blk) * a->groups;
        bb[blk] = a->biases ? a->biases + (nb + 8 * blk) * a->groups : NULL;
        for (int r = 0; r < rows; r++)
            acc[blk][r] = _mm256_setzero_ps();
    }
    for (int64_t kc = k0; kc < k1; kc += 16 * per_word) {
        const int64_t left = (k1 - kc) / per_word;
        const int chunk = left < 16 ? (int)left : 16;
        for (int blk = 0; blk < nblk; blk++)
            copy_block_words(words[blk], row_words, active[blk], kc / per_word, chunk, buf[blk]);
        for (int wi = 0; wi < chunk; wi++) {
            const int64_t k = kc + (int64_t)wi * per_word;
            if (k == k0 || k % gs == 0) {
                const int64_t g = k / gs;
                for (int blk = 0; blk < nblk; blk++) {
                    const __m256 mf = _mm256_castsi256_ps(m[blk]);
                    const __m256 s = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), sb[blk] + g,
                                                              group_index, mf, 4);
                    const __m256 b = bb[blk] ? _mm256_mask_i32gather_ps(_mm256_setzero_ps(), bb[blk] + g,
                                                              group_index, mf, 4)
                                        : _mm256_setzero_ps();
                    fast_group_set(s, b, bits, &f[blk]);
                }
            }
            __m256i low[FAST_BLOCKS], high[FAST_BLOCKS];
            for (int blk = 0; blk < nblk; blk++) {
                low[blk] = _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), &buf[blk][0][wi],
                                                       buf_index, m[blk], 4);
                high[blk] = _mm256_srli_epi32(low[blk], 16);
            }
#pragma GCC unroll 8
            for (int j = 0; j < per_word; j++)
#pragma GCC unroll 2
                for (int blk = 0; blk < nblk; blk++) {
                    const __m256i word = j < half ? low[blk] : high[blk];
                    /* floating-point codes: value * scale (f.sp[0], the decoded
                     * scale); fp_values reads only the code's own bits */
                    const __m256 w = mode == WF_QUANT_AFFINE
                                        ? fast_values(word, j % half, bits, &f[blk])
                                        : _mm256_mul_ps(fp_values(_mm256_srli_epi32(word, (j % half) * bits),
                                                                mode),
                                                      f[blk].sp[0]);
                    for (int r = 0; r < rows; r++)
                        acc[blk][r] = _mm256_fmadd_ps(_mm256_set1_ps(a->x[r * a->ldx + k + j]),
                                                      w, acc[blk][r]);
                }
        }
    }
}

INLINE_AVX2 void fast_outputs(const wf_qmv_args *a, int64_t nb, int64_t count, int rows,
                              int bits, int mode)
{
    const int active[FAST_BLOCKS] = {count < 8 ? (int)count : 8, count > 8 ? (int)count - 8 : 0};
    const __m256i m[FAST_BLOCKS] = {lanes(active[0]), lanes(active[1])};
    const int nblk = count > 8 ? 2 : 1;
    for (int64_t k0 = 0; k0 < a->k; k0 += a->kcb) {
        const int64_t k1 = k0 + a->kcb < a->k ? k0 + a->kcb : a->k;
        __m256 acc[FAST_BLOCKS][WF_QMV_ROWS];
        if (nblk == 2)
            fast_sums(a, nb, 2, active, m, k0, k1, rows, bits, mode, acc);
        else
            fast_sums(a, nb, 1, active, m, k0, k1, rows, bits, mode, acc);
        for (int blk = 0; blk < nblk; blk++)
            for (int r = 0; r < rows; r++) {
                float *c = a->out + r * a->ldo + nb + 8 * blk;
                const __m256 v = k0 == 0 ? acc[blk][r]
                                         : _mm256_add_ps(_mm256_maskload_ps(c, m[blk]),
                                                         acc[blk][r]);
                _mm256_maskstore_ps(c, m[blk], v);
            }
    }
}

/* Outputs [nb, nb + 8) through the general path (any of 2, 4, 8 bits). */
INLINE_AVX2 void general_outputs(const wf_qmv_args *a, int64_t nb, __m256i m, int rows)
{
    for (int64_t k0 = 0; k0 < a->k; k0 += a->kcb) {
        const int64_t k1 = k0 + a->kcb < a->k ? k0 + a->kcb : a->k;
        __m256 acc[WF_QMV_ROWS];
        block_sums(a, nb, m, k0, k1, rows, acc);
        for (int r = 0; r < rows; r++) {
            float *c = a->out + r * a->ldo + nb;
            const __m256 v =
                k0 == 0 ? acc[r] : _mm256_add_ps(_mm256_maskload_ps(c, m), acc[r]);
            _mm256_maskstore_ps(c, m, v);
        }
    }
}

INLINE_AVX2 void qmv_rows(const wf_qmv_args *a, int64_t n0, int64_t n1, int rows)
{
    const bool fast_bits = a->bits == 4 || a->bits == 8;
    for (int64_t nb = n0; nb < n1; nb += 8 * FAST_BLOCKS) {
        const int64_t count = n1 - nb < 8 * FAST_BLOCKS ? n1 - nb : 8 * FAST_BLOCKS;
        if (fast_bits && a->mode != WF_QUANT_AFFINE) {
            if (a->bits == 4)
                fast_outputs(a, nb, count, rows, 4, a->mode);
            else
                fast_outputs(a, nb, count, rows, 8, WF_QUANT_MXFP8);
            continue;
        }
        if (fast_bits && fast_scales_ok(a, nb, count)) {
            if (a->bits == 4)
                fast_outputs(a, nb, count, rows, 4, WF_QUANT_AFFINE);
            else
                fast_outputs(a, nb, count, rows, 8, WF_QUANT_AFFINE);
            continue;
        }
        for (int64_t b = nb; b < nb + count; b += 8)
            general_outputs(a, b, lanes(nb + count - b), rows);
    }
}

ATTR_AVX2 static void qmv_avx2(const wf_qmv_args *a, int64_t n0, int64_t n1)
{
    switch (a->rows) {
    case 1: qmv_rows(a, n0, n1, 1); break;
    case 2: qmv_rows(a, n0, n1, 2); break;
    case 3: qmv_rows(a, n0, n1, 3); break;
    default: qmv_rows(a, n0, n1, 4); break;
    }
}

/* 8 codes from `row` at code j (a multiple of 8) as int32 lanes. */
INLINE_AVX2 __m256i codes8(const uint8_t *row, int64_t j, int bits)
{
    const uint8_t *p = row + j * bits / 8;
    if (bits == 8)
        return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    int32_t word = 0;
    __builtin_memcpy(&word, p, (size_t)bits); /* 8 codes: `bits` bytes */
    const __m256i shifts = bits == 4 ? _mm256_set_epi32(28, 24, 20, 16, 12, 8, 4, 0)
                                     : _mm256_set_epi32(14, 12, 10, 8, 6, 4, 2, 0);
    return _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(word), shifts),
                            _mm256_set1_epi32((1 << bits) - 1));
}



ATTR_AVX2 static void qdeq_avx2(const uint8_t *row, const float *scales, const float *biases,
                                int group_size, int bits, int mode, int64_t j0, int64_t count,
                                float *dst)
{
    for (int64_t j = 0; j < count; j += 8) {
        const int64_t g = (j0 + j) / group_size;
        if (mode != WF_QUANT_AFFINE) {
            const __m256 v = fp_values(codes8(row, j0 + j, bits), mode);
            _mm256_storeu_ps(dst + j, _mm256_mul_ps(v, _mm256_set1_ps(scales[g])));
            continue;
        }
        const __m256 q = _mm256_cvtepi32_ps(codes8(row, j0 + j, bits));
        _mm256_storeu_ps(dst + j, _mm256_add_ps(_mm256_mul_ps(q, _mm256_set1_ps(scales[g])),
                                                _mm256_set1_ps(biases[g])));
    }
}

const wf_qmv_fn wf__qmv_avx2 = qmv_avx2;
const wf_qdeq_fn wf__qdeq_avx2 = qdeq_avx2;
#else
const wf_qmv_fn wf__qmv_avx2 = 0;
const wf_qdeq_fn wf__qdeq_avx2 = 0;
#endif
