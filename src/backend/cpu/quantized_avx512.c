/* AVX-512 matrix-vector kernel of quantized_matmul (backend/cpu/quantized.h):
 * 16 rows of W at a time, a lane per output. For each step of 8 codes, one
 * gather (two for 8 bits) takes the 32-bit word holding them from each of
 * the 16 rows; the codes are shifted out, converted and dequantized
 * (code * scale, then + bias) and summed into up to 4 rows of x with fma,
 * by the GEMM's K blocks. Compiled with per-function target attributes;
 * called only after a CPU check. */
#include "backend/cpu/quantized.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define ATTR_512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")))
#define INLINE_512 ATTR_512 __attribute__((always_inline)) static inline

INLINE_512 __mmask16 lanes(int64_t n)
{
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}

/* The values of fp4 (e2m1) or fp8 (e4m3) codes (the low 4 or 8 bits of
 * each lane). fp8: (mantissa with its implicit bit) * 2^(max(e, 1) - 10),
 * built from integers so that no operand is subnormal (subnormal operands
 * cost microcode assists). */
INLINE_512 __m512 fp_values(__m512i c, int mode)
{
    if (mode != WF_QUANT_MXFP8) /* the 16 values, indexed by the code's low 4 bits */
        return _mm512_permutexvar_ps(c, _mm512_set_ps(-6, -4, -3, -2, -1.5f, -1, -0.5f, -0.0f, 6,
                                                      4, 3, 2, 1.5f, 1, 0.5f, 0));
    const __m512i e = _mm512_and_si512(_mm512_srli_epi32(c, 3), _mm512_set1_epi32(15));
    const __m512i one = _mm512_set1_epi32(1);
    const __m512i mant = _mm512_or_si512(_mm512_and_si512(c, _mm512_set1_epi32(7)),
                                          _mm512_slli_epi32(_mm512_min_epu32(e, one), 3));
    const __m512i power = _mm512_slli_epi32(_mm512_add_epi32(_mm512_max_epu32(e, one),
                                                             _mm512_set1_epi32(127 - 10)), 23);
    const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(mant), _mm512_castsi512_ps(power));
    const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(c, _mm512_set1_epi32(0x80)), 24);
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(v), sign));
}

/* Codes j .. j + count of the words in `word` (from bit `shift` on, `bits`
 * apart), dequantized and summed into acc[r] with x[r][k + j]. */
INLINE_512 void accumulate(__m512i word, int shift, int count, int bits, int mode, __m512 s, __m512 b,
                           const float *x, int64_t ldx, int rows, int64_t k, int j0,
                           __m512 *acc)
{
    const __m512i mask = _mm512_set1_epi32((1 << bits) - 1);
    for (int j = 0; j < count; j++) {
        const __m512i q = _mm512_and_si512(
            _mm512_srl_epi32(word, _mm_cvtsi32_si128(shift + j * bits)), mask);
        const __m512 w = mode != WF_QUANT_AFFINE
                               ? _mm512_mul_ps(fp_values(q, mode), s)
                               : _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(q), s), b);
        for (int r = 0; r < rows; r++)
            acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(x[r * ldx + k + j0 + j]), w, acc[r]);
    }
}

/* Outputs [nb, nb + 16) (lanes m) over K block [k0, k1), `rows` rows. */
INLINE_512 void block_sums(const wf_qmv_args *a, int64_t nb, __mmask16 m, int64_t k0, int64_t k1,
                           int rows, __m512 *acc)
{
    const int bits = a->bits, gs = a->group_size;
    const int32_t *words = (const int32_t *)(a->codes + nb * a->row_bytes);
    const float *sb = a->scales + nb * a->groups;
    const float *bb = a->biases ? a->biases + nb * a->groups : NULL;
    const __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i word_index = _mm512_mullo_epi32(iota, _mm512_set1_epi32((int)(a->row_bytes / 4)));
    const __m512i group_index = _mm512_mullo_epi32(iota, _mm512_set1_epi32((int)a->groups));
    __m512 s = _mm512_setzero_ps(), b = _mm512_setzero_ps();
    for (int r = 0; r < rows; r++)
        acc[r] = _mm512_setzero_ps();
    for (int64_t k = k0; k < k1; k += 8) {
        if (k == k0 || k % gs == 0) {
            const int64_t g = k / gs;
            s = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, group_index, sb + g, 4);
            if (bb)
                b = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, group_index, bb + g, 4);
        }
        const int64_t bit = k * bits;
        const __m512i w0 =
            _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, word_index, words + bit / 32, 4);
        if (bits == 8) {
            const __m512i w1 = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, word_index,
                                                           words + bit / 32 + 1, 4);
            accumulate(w0, 0, 4, 8, a->mode, s, b, a->x, a->ldx, rows, k, 0, acc);
            accumulate(w1, 0, 4, 8, a->mode, s, b, a->x, a->ldx, rows, k, 4, acc);
        } else {
            accumulate(w0, (int)(bit % 32), 8, bits, a->mode, s, b, a->x, a->ldx, rows, k, 0, acc);
        }
    }
}

/* ---- the fast path for 4- and 8-bit affine codes: no conversion
 * instruction. The code q at bit offset p (p + bits <= 16) of a word,
 * masked in place under the exponent bits of 2^23, is the float
 * 2^23 + q * 2^p; with sp = s * 2^-p and c = -2^23 * sp (both exact when
 * 2^-100 <= |s| <= 2^100), fma(f, sp, c) is q * s rounded once: the very
 * product dequantize rounds, to which the bias is then added. Codes at
 * offsets >= 16 come from the word shifted right by 16. Two blocks of 16
 * rows run side by side so that two fma chains hide each other's latency. */

enum { FAST_BLOCKS = 2 };

typedef struct fast_group {
    __m512 sp[4], c[4], b; /* per offset i * bits: s * 2^-(i bits), -2^23 of that */
} fast_group;

INLINE_512 void fast_group_set(__m512 s, __m512 b, int bits, fast_group *f)
{
    for (int i = 0; i < 16 / bits; i++) {
        f->sp[i] = _mm512_mul_ps(s, _mm512_set1_ps(1.0f / (float)(1 << (i * bits))));
        f->c[i] = _mm512_mul_ps(f->sp[i], _mm512_set1_ps(-0x1p23f));
    }
    f->b = b;
}

/* The dequantized values (code * s, then + b) of the codes at offset
 * i * bits of each lane's word. */
INLINE_512 __m512 fast_values(__m512i word, int i, int bits, const fast_group *f)
{
    const __m512i field = _mm512_set1_epi32(((1 << bits) - 1) << (i * bits));
    const __m512i exponent = _mm512_set1_epi32(0x4B000000); /* 2^23 */
    /* (word & field) | exponent */
    const __m512 q = _mm512_castsi512_ps(_mm512_ternarylogic_epi32(word, field, exponent, 0xEA));
    return _mm512_add_ps(_mm512_fmadd_ps(q, f->sp[i], f->c[i]), f->b);
}

/* Whether every scale of rows [nb, nb + count) lies in the fast path's range. */
INLINE_512 bool fast_scales_ok(const wf_qmv_args *a, int64_t nb, int64_t count)
{
    const __m512 lo = _mm512_set1_ps(0x1p-100f), hi = _mm512_set1_ps(0x1p100f);
    for (int64_t r = nb; r < nb + count; r++) {
        const float *s = a->scales + r * a->groups;
        for (int64_t g = 0; g < a->groups; g += 16) {
            const __mmask16 m = lanes(a->groups - g);
            const __m512 v = _mm512_abs_ps(_mm512_maskz_loadu_ps(m, s + g));
            const __mmask16 ok = _mm512_mask_cmp_ps_mask(m, v, lo, _CMP_GE_OQ) &
                                 _mm512_mask_cmp_ps_mask(m, v, hi, _CMP_LE_OQ);
            if (ok != m)
                return false;
        }
    }
    return true;
}

/* Copies up to 16 words of each active row (lanes m) of a block, from
 * word `first` on, into buf[row][0 ..): the rows of W lie row_bytes apart,
 * often a multiple of 4 KiB, so gathering from them directly maps every
 * row to the same L1 sets; the copy is read once per line and gathered
 * from contiguous lines. */
INLINE_512 void copy_block_words(const int32_t *words, int64_t row_words, __mmask16 m,
                                 int64_t first, int count, int32_t (*buf)[16])
{
    const __mmask16 take = lanes(count);
    for (int r = 0; r < 16; r++)
        if (m >> r & 1) {
            const int32_t *src = words + r * row_words + first;
            /* the lines of the next chunks: 32 rows are more streams than
             * the hardware prefetchers follow */
            _mm_prefetch((const char *)(src + 2 * 16), _MM_HINT_T0);
            _mm_prefetch((const char *)(src + 4 * 16), _MM_HINT_T0);
            _mm512_storeu_si512(buf[r], _mm512_maskz_loadu_epi32(take, src));
        }
}

/* K block [k0, k1) of `nblk` (1 or 2) blocks of 16 rows from nb on, lanes
 * m[blk], `rows` rows of x: acc[blk][r], in k order. */
INLINE_512 void fast_sums(const wf_qmv_args *a, int64_t nb, int nblk, const __mmask16 *m,
                          int64_t k0, int64_t k1, int rows, int bits, int mode, __m512 acc[][WF_QMV_ROWS])
{
    const int gs = a->group_size, per_word = 32 / bits, half = per_word / 2;
    const int64_t row_words = a->row_bytes / 4;
    const __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i buf_index = _mm512_slli_epi32(iota, 4);
    const __m512i group_index = _mm512_mullo_epi32(iota, _mm512_set1_epi32((int)a->groups));
    const int32_t *words[FAST_BLOCKS];
    const float *sb[FAST_BLOCKS], *bb[FAST_BLOCKS];
    int32_t buf[FAST_BLOCKS][16][16];
    fast_group f[FAST_BLOCKS];
    __builtin_memset(f, 0, sizeof f); /* set at k0; zeroed for the compiler's sake */
    for (int blk = 0; blk < nblk; blk++) {
        words[blk] = (const int32_t *)(a->codes + (nb + 16 * blk) * a->row_bytes);
        sb[blk] = a->scales + (nb + 16 * blk) * a->groups;
        bb[blk] = a->biases ? a->biases + (nb + 16 * blk) * a->groups : NULL;
        for (int r = 0; r < rows; r++)
            acc[blk][r] = _mm512_setzero_ps();
    }
    for (int64_t kc = k0; kc < k1; kc += 16 * per_word) {
        const int64_t left = (k1 - kc) / per_word;
        const int chunk = left < 16 ? (int)left : 16;
        for (int blk = 0; blk < nblk; blk++)
            copy_block_words(words[blk], row_words, m[blk], kc / per_word, chunk, buf[blk]);
        for (int wi = 0; wi < chunk; wi++) {
            const int64_t k = kc + (int64_t)wi * per_word;
            if (k == k0 || k % gs == 0) {
                const int64_t g = k / gs;
                for (int blk = 0; blk < nblk; blk++) {
                    const __m512 s = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m[blk],
                                                              group_index, sb[blk] + g, 4);
                    const __m512 b = bb[blk] ? _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m[blk],
                                                              group_index, bb[blk] + g, 4)
                                        : _mm512_setzero_ps();
                    fast_group_set(s, b, bits, &f[blk]);
                }
            }
            __m512i low[FAST_BLOCKS], high[FAST_BLOCKS];
            for (int blk = 0; blk < nblk; blk++) {
                low[blk] = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m[blk], buf_index,
                                                       &buf[blk][0][wi], 4);
                high[blk] = _mm512_srli_epi32(low[blk], 16);
            }
#pragma GCC unroll 8
            for (int j = 0; j < per_word; j++)
#pragma GCC unroll 2
                for (int blk = 0; blk < nblk; blk++) {
                    const __m512i word = j < half ? low[blk] : high[blk];
                    /* floating-point codes: value * scale (f.sp[0], the decoded
                     * scale); fp_values reads only the code's own bits */
                    const __m512 w = mode == WF_QUANT_AFFINE
                                        ? fast_values(word, j % half, bits, &f[blk])
                                        : _mm512_mul_ps(fp_values(_mm512_srli_epi32(word, (j % half) * bits),
                                                                mode),
                                                      f[blk].sp[0]);
                    for (int r = 0; r < rows; r++)
                        acc[blk][r] = _mm512_fmadd_ps(_mm512_set1_ps(a->x[r * a->ldx + k + j]),
                                                      w, acc[blk][r]);
                }
        }
    }
}

/* Outputs [nb, nb + count) (count <= 32) through the fast path. */
INLINE_512 void fast_outputs(const wf_qmv_args *a, int64_t nb, int64_t count, int rows, int bits, int mode)
{
    const __mmask16 m[FAST_BLOCKS] = {lanes(count), lanes(count > 16 ? count - 16 : 0)};
    const int nblk = count > 16 ? 2 : 1;
    for (int64_t k0 = 0; k0 < a->k; k0 += a->kcb) {
        const int64_t k1 = k0 + a->kcb < a->k ? k0 + a->kcb : a->k;
        __m512 acc[FAST_BLOCKS][WF_QMV_ROWS];
        if (nblk == 2)
            fast_sums(a, nb, 2, m, k0, k1, rows, bits, mode, acc);
        else
            fast_sums(a, nb, 1, m, k0, k1, rows, bits, mode, acc);
        for (int blk = 0; blk < nblk; blk++)
            for (int r = 0; r < rows; r++) {
                float *c = a->out + r * a->ldo + nb + 16 * blk;
                const __m512 v = k0 == 0 ? acc[blk][r]
                                         : _mm512_add_ps(_mm512_maskz_loadu_ps(m[blk], c),
                                                         acc[blk][r]);
                _mm512_mask_storeu_ps(c, m[blk], v);
            }
    }
}

/* Outputs [nb, nb + 16) through the general path (any of 2, 4, 8 bits). */
INLINE_512 void general_outputs(const wf_qmv_args *a, int64_t nb, __mmask16 m, int rows)
{
    for (int64_t k0 = 0; k0 < a->k; k0 += a->kcb) {
        const int64_t k1 = k0 + a->kcb < a->k ? k0 + a->kcb : a->k;
        __m512 acc[WF_QMV_ROWS];
        block_sums(a, nb, m, k0, k1, rows, acc);
        for (int r = 0; r < rows; r++) {
            float *c = a->out + r * a->ldo + nb;
            const __m512 v =
                k0 == 0 ? acc[r] : _mm512_add_ps(_mm512_maskz_loadu_ps(m, c), acc[r]);
            _mm512_mask_storeu_ps(c, m, v);
        }
    }
}

INLINE_512 void qmv_rows(const wf_qmv_args *a, int64_t n0, int64_t n1, int rows)
{
    const bool fast_bits = a->bits == 4 || a->bits == 8;
    for (int64_t nb = n0; nb < n1; nb += 16 * FAST_BLOCKS) {
        const int64_t count = n1 - nb < 16 * FAST_BLOCKS ? n1 - nb : 16 * FAST_BLOCKS;
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
        for (int64_t b = nb; b < nb + count; b += 16)
            general_outputs(a, b, lanes(nb + count - b), rows);
    }
}

ATTR_512 static void qmv_avx512(const wf_qmv_args *a, int64_t n0, int64_t n1)
{
    switch (a->rows) {
    case 1: qmv_rows(a, n0, n1, 1); break;
    case 2: qmv_rows(a, n0, n1, 2); break;
    case 3: qmv_rows(a, n0, n1, 3); break;
    default: qmv_rows(a, n0, n1, 4); break;
    }
}

/* 16 codes from `row` at code j (a multiple of 16) as int32 lanes. */
INLINE_512 __m512i codes16(const uint8_t *row, int64_t j, int bits)
{
    const uint8_t *p = row + j * bits / 8;
    if (bits == 8)
        return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
    if (bits == 4) {
        const __m128i x = _mm_loadl_epi64((const __m128i *)p), low = _mm_set1_epi8(0x0f);
        const __m128i lo = _mm_and_si128(x, low), hi = _mm_and_si128(_mm_srli_epi16(x, 4), low);
        return _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi));
    }
    int32_t word;
    __builtin_memcpy(&word, p, 4);
    const __m512i shifts =
        _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    return _mm512_and_si512(_mm512_srlv_epi32(_mm512_set1_epi32(word), shifts),
                            _mm512_set1_epi32(3));
}



ATTR_512 static void qdeq_avx512(const uint8_t *row, const float *scales, const float *biases,
                                 int group_size, int bits, int mode, int64_t j0, int64_t count,
                                 float *dst)
{
    for (int64_t j = 0; j < count; j += 16) {
        const int64_t g = (j0 + j) / group_size;
        if (mode != WF_QUANT_AFFINE) {
            const __m512 v = fp_values(codes16(row, j0 + j, bits), mode);
            _mm512_storeu_ps(dst + j, _mm512_mul_ps(v, _mm512_set1_ps(scales[g])));
            continue;
        }
        const __m512 q = _mm512_cvtepi32_ps(codes16(row, j0 + j, bits));
        _mm512_storeu_ps(dst + j, _mm512_add_ps(_mm512_mul_ps(q, _mm512_set1_ps(scales[g])),
                                                _mm512_set1_ps(biases[g])));
    }
}

const wf_qmv_fn wf__qmv_avx512 = qmv_avx512;
const wf_qdeq_fn wf__qdeq_avx512 = qdeq_avx512;
#else
const wf_qmv_fn wf__qmv_avx512 = 0;
const wf_qdeq_fn wf__qdeq_avx512 = 0;
#endif
