/* The matrix-vector kernel of quantized_matmul (backend/cpu/quantized.h),
 * written once over a small vector layer that each ISA file
 * (quantized_avx2.c, quantized_avx512.c) defines before including this
 * header. Internal; include only from those files.
 *
 * The layer: vf / vi (LANES float32 / int32 lanes), vmask (a lane mask),
 * KINLINE (always-inline with the ISA's target attribute) and
 *   lanes(n)                      lanes [0, n) of LANES
 *   vf_zero, vf_set1, vf_add, vf_mul, vf_fma(a, b, c) = a * b + c
 *   vf_fma_x(x, w, acc)           *x * w + acc (x: one float, broadcast)
 *   vf_own_x(x)                   x, as a pointer the compiler cannot tell
 *                                 equal to x (see quantized_avx512.c)
 *   vf_load(p, m), vf_store(p, m, v), vf_gather(base, index, m)
 *   vi_gather(base, index, m), vi_iota_times(stride), vi_srli(v, n), vi_srl(v, n)
 *   vi_to_float(v), vi_low_bits(v, bits)
 *   QMV_CODES_CONVERTED           1: codes shifted down and converted, 0:
 *                                 half_word_float(word, high), a 16-bit
 *                                 half of word as the float 2^23 + half,
 *                                 and code_float(half, p, bits), the float
 *                                 2^23 + code * 2^p, the code being half's
 *                                 `bits` bits at bit p (p + bits <= 16)
 *   fp_values(c, mode)            fp4 / fp8 element values of the low bits
 *   vf_load_all(p), vi_load_all(p) an aligned vector
 *   vf_store_all(p, v)            a vector, p unaligned
 *   rows_to_lanes(src, stride, active, count, dst)
 *                                 dst[j][r] = src[r * stride + j] (4-byte
 *                                 elements), j < count, rows r < active (0
 *                                 for the rest); dst has room for count
 *                                 rounded up to 8
 *   scales_in_range(s, n)         every |s[i]| in [2^-100, 2^100] (codes
 *                                 in place only)
 *
 * Fast path (2, 4 or 8 bits, every mode): LANES rows of W at a time, a
 * lane per output. The GEMM sums each K block from zero and then adds it
 * to the output, so a pass sums PASS_K_BLOCKS K blocks of the same rows
 * side by side: independent fma chains that hide each other's latency
 * without reading more rows at once (rows are page streams; more row
 * blocks per pass measured no faster). Each 16-word chunk of the rows,
 * and the pass's scales and biases, are first turned into lanes (a word
 * per row: rows_to_lanes), so that no gather is needed. The code q is
 * dequantized as dequantize rounds it, q * s rounded once and then + b:
 *  - QMV_CODES_CONVERTED (AVX2, 16 registers): q shifted down, masked and
 *    converted, then multiplied by s and added to b, both memory operands;
 *  - otherwise (AVX-512): each half of a word is put under the exponent
 *    of 2^23 once; q at bit p of the half, masked in place (one AND), is
 *    the float f = 2^23 + q 2^p, and with s' = 2^-p s and c = -2^23 s'
 *    (both exact while |s| is in [2^-100, 2^100]), fma(f, s', c) is
 *    q * s rounded once, and an add gives + b rounded. Per code: an AND,
 *    an fma, an add and the sum's fma. The add runs beside the fmas on
 *    Zen 4 (its two FADD pipes); the stop-55 form, fma(y, 2^-p, b) on
 *    y = q 2^p s, took a third fma: 4-bit 4096 x 4096 from L3 on one
 *    Zen 4 core read 12.1 GB/s with it, 12.9 now. An AND runs on any of
 *    Zen 4's four vector pipes; the ternary-logic instruction it replaced
 *    ran only on the two that the fmas need (3.1 against 2.4 cycles per
 *    16 codes, measured alone).
 * Each dequantized value is summed with fma by the GEMM's K blocks in k
 * order, so the bits are the GEMM's on the dequantized matrix.
 *
 * General path (codes in place: scales outside that range; a 2-bit word
 * split by a K block): one gather per word straight from W, codes shifted
 * out and converted.
 *
 * Interleaved path (where quantized.c has made interleaved copies of a
 * served weight): the fast path's arithmetic on vectors that hold a word
 * of each of LANES rows; see "interleaved copies" below. */

/* PASS_K_BLOCKS: K blocks a pass sums side by side (2: two fma chains
 * per row of x measured fastest for 1 .. 4 rows; four spill).
 * PASS_GROUPS: table rows of a pass's groups (K blocks of up to 256
 * codes, groups of 16 or more, plus a group split at each end), a
 * multiple of 8: rows_to_lanes may fill count rounded up to 8. */
enum {
    CHUNK_WORDS = 16,
    PASS_K_BLOCKS = 2,
    PASS_GROUPS = PASS_K_BLOCKS * 16 + 8
};

/* ---------------------------------------------------------------- general path */

/* Codes j0 .. j0 + count of `word` (from bit `shift` on, `bits` apart),
 * dequantized and summed into acc[r] with x[r][k + j0 + j]. */
KINLINE void general_accumulate(vi word, int shift, int count, int bits, int mode, vf s, vf b,
                                const float *x, int64_t ldx, int rows, int64_t k, int j0,
                                vf *acc)
{
    for (int j = 0; j < count; j++) {
        const vi q = vi_low_bits(vi_srl(word, shift + j * bits), bits);
        const vf w = mode != WF_QUANT_AFFINE ? vf_mul(fp_values(q, mode), s)
                                             : vf_add(vf_mul(vi_to_float(q), s), b);
        for (int r = 0; r < rows; r++)
            acc[r] = vf_fma_x(&x[r * ldx + k + j0 + j], w, acc[r]);
    }
}

/* Outputs [nb, nb + LANES) (lanes m) over K block [k0, k1), `rows` rows. */
KINLINE void general_sums(const wf_qmv_args *a, int64_t nb, vmask m, int64_t k0, int64_t k1,
                          int rows, vf *acc)
{
    const int bits = a->bits, gs = a->group_size;
    const int32_t *words = (const int32_t *)(a->codes + nb * a->row_bytes);
    const float *sb = a->scales + nb * a->groups;
    const float *bb = a->biases ? a->biases + nb * a->groups : NULL;
    const vi word_index = vi_iota_times((int32_t)(a->row_bytes / 4));
    const vi group_index = vi_iota_times((int32_t)a->groups);
    vf s = vf_zero(), b = vf_zero();
    for (int r = 0; r < rows; r++)
        acc[r] = vf_zero();
    for (int64_t k = k0; k < k1; k += 8) {
        if (k == k0 || k % gs == 0) {
            const int64_t g = k / gs;
            s = vf_gather(sb + g, group_index, m);
            if (bb)
                b = vf_gather(bb + g, group_index, m);
        }
        const int64_t bit = k * bits;
        const vi w0 = vi_gather(words + bit / 32, word_index, m);
        if (bits == 8) {
            const vi w1 = vi_gather(words + bit / 32 + 1, word_index, m);
            general_accumulate(w0, 0, 4, 8, a->mode, s, b, a->x, a->ldx, rows, k, 0, acc);
            general_accumulate(w1, 0, 4, 8, a->mode, s, b, a->x, a->ldx, rows, k, 4, acc);
        } else {
            general_accumulate(w0, (int)(bit % 32), 8, bits, a->mode, s, b, a->x, a->ldx, rows,
                               k, 0, acc);
        }
    }
}

/* Adds (or, for the first K block, stores) a block's sums to the outputs. */
KINLINE void store_sums(const wf_qmv_args *a, int64_t nb, vmask m, int rows, bool first,
                        const vf *acc)
{
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) {
        float *c = a->out + r * a->ldo + nb;
        vf_store(c, m, first ? acc[r] : vf_add(vf_load(c, m), acc[r]));
    }
}

/* Outputs [nb, nb + LANES) through the general path. */
KINLINE void general_outputs(const wf_qmv_args *a, int64_t nb, vmask m, int rows)
{
    for (int64_t k0 = 0; k0 < a->k; k0 += a->kcb) {
        const int64_t k1 = k0 + a->kcb < a->k ? k0 + a->kcb : a->k;
        vf acc[WF_QMV_ROWS];
        general_sums(a, nb, m, k0, k1, rows, acc);
        store_sums(a, nb, m, rows, k0 == 0, acc);
    }
}

/* ---------------------------------------------------------------- fast path */

/* A K block's factors for its current group. QMV_CODES_CONVERTED: where
 * the lanes of its scales s and biases b lie in the pass's table, read
 * from there as memory operands (registers are kept for the fma chains).
 * Otherwise s, b and c = -2^23 s in registers. */
typedef struct group_factors {
#if QMV_CODES_CONVERTED
    const float *s, *b;
#else
    /* s[i] = 2^-p s and c[i] = -2^23 s[i] for the code at bit p = i bits
     * of a half word (exact while |s| is in [2^-100, 2^100]), and b */
    vf s[8], c[8], b;
#endif
} group_factors;

KINLINE void group_factors_set(const float *s, const float *b, int bits, group_factors *f)
{
#if QMV_CODES_CONVERTED
    (void)bits;
    f->s = s;
    f->b = b;
#else
    const vf scale = vf_load_all(s);
    /* bound 8, not 16 / bits: unoptimized builds warn that they ignore the
     * pragma on a loop bounded by a parameter */
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        if (i < 16 / bits) {
            f->s[i] = vf_mul(scale, vf_set1(1.0f / (float)(1 << (i * bits))));
            f->c[i] = vf_mul(f->s[i], vf_set1(-0x1p23f));
        }
    f->b = b ? vf_load_all(b) : vf_zero();
#endif
}

/* The dequantized value of the code at bit p of each lane's word: q * s
 * rounded once, then + b rounded (dequantize's bits); floating-point
 * codes: fp_values(code) * s (exact). */
KINLINE vf fast_value(vi word, int p, int bits, int mode, const group_factors *f)
{
#if QMV_CODES_CONVERTED
    const vi shifted = vi_srli(word, p); /* the top code needs no mask */
    if (mode != WF_QUANT_AFFINE) /* fp_values reads only the code's own bits */
        return vf_mul(fp_values(shifted, mode), vf_load_all(f->s));
    const vi q = p + bits == 32 ? shifted : vi_low_bits(shifted, bits);
    return vf_add(vf_mul(vi_to_float(q), vf_load_all(f->s)), vf_load_all(f->b));
#else
    const vi half = half_word_float(word, p >= 16);
    const int at = p % 16; /* the code's bit in its half */
    if (mode != WF_QUANT_AFFINE)
        return vf_mul(fp_values(vi_srli(half, at), mode), f->s[0]);
    const int i = at / bits;
    return vf_add(vf_fma(code_float(half, at, bits), f->s[i], f->c[i]), f->b); /* q * s, + b */
#endif
}

/* Whether the fast path can take rows [nb, nb + count): converted codes
 * are multiplied as dequantize multiplies them, any scale; codes in place
 * need every affine scale in code_float's range. */
KINLINE bool fast_scales_ok(const wf_qmv_args *a, int64_t nb, int64_t count)
{
#if !QMV_CODES_CONVERTED
    if (a->mode == WF_QUANT_AFFINE)
        for (int64_t r = nb; r < nb + count; r++)
            if (!scales_in_range(a->scales + r * a->groups, a->groups))
                return false;
#else
    (void)a, (void)nb, (void)count;
#endif
    return true;
}

/* The pass's rows of W: the first's words, scales and biases, how many. */
typedef struct pass_rows {
    const int32_t *words;
    const float *scales, *biases;
    vmask m;
    int active;
} pass_rows;

/* Rows [nb, nb + count) of W (count <= LANES) as a pass's rows. */
KINLINE pass_rows pass_rows_at(const wf_qmv_args *a, int64_t nb, int count)
{
    return (pass_rows){
        .words = (const int32_t *)(a->codes + nb * a->row_bytes),
        .scales = a->scales + nb * a->groups,
        .biases = a->biases ? a->biases + nb * a->groups : NULL,
        .m = lanes(count),
        .active = count,
    };
}

/* The scales and biases of a pass's groups as lanes (a row per lane),
 * turned at once for all its K blocks (one transpose, not one a K block
 * for its few groups): table[g] holds the pass's group g,
 * counted from its first; K block kb's first is kb * (kcb / group size)
 * (side by side, K blocks hold whole groups). */
typedef struct pass_factors {
    float scales[PASS_GROUPS][LANES];
    float biases[PASS_GROUPS][LANES];
} pass_factors;

KINLINE void pass_factors_fill(const wf_qmv_args *a, const pass_rows *p, int nkb, int64_t k0,
                               int64_t len, pass_factors *t)
{
    const int64_t gs = a->group_size, g = k0 / gs;
    const int count = (int)((k0 + (nkb - 1) * a->kcb + len - 1) / gs - g + 1);
    rows_to_lanes(p->scales + g, a->groups, p->active, count, t->scales);
    if (p->biases)
        rows_to_lanes(p->biases + g, a->groups, p->active, count, t->biases);
}

/* The sums of `nkb` K blocks of `len` codes, from k0 on, kcb apart, for
 * the pass's rows, then added to the outputs in K block order. The K
 * blocks' sums start from zero and are independent fma chains, so
 * summing them side by side hides the fma latency without reading more
 * rows at once (rows being page streams); nkb > 1 only where kcb is a
 * multiple of the group size, so that all change group at the same k.
 * Each 16-word chunk of the rows is turned into lanes (a word per row)
 * first, and the chunk `ahead` words further on (where the next pass
 * reads it) is asked for. */
KINLINE void fast_pass(const wf_qmv_args *a, const pass_rows *p, int64_t nb, int nkb,
                       int64_t k0, int64_t len, int64_t ahead, int rows, int bits, int mode)
{
    const int per_word = 32 / bits;
    const int64_t row_words = a->row_bytes / 4, words = len / per_word, gs = a->group_size;
    __attribute__((aligned(64))) int32_t lane_words[PASS_K_BLOCKS][CHUNK_WORDS][LANES];
    __attribute__((aligned(64))) pass_factors t;
    group_factors f[PASS_K_BLOCKS];
    vf acc[PASS_K_BLOCKS][WF_QMV_ROWS];
    pass_factors_fill(a, p, nkb, k0, len, &t);
#pragma GCC unroll 8
    for (int kb = 0; kb < nkb; kb++)
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++)
            acc[kb][r] = vf_zero();
    const int kb_groups = (int)(a->kcb / gs); /* used where nkb > 1 */
    int group = 0; /* the table row of K block 0's current group */
    int64_t next_group = (k0 / gs + 1) * gs - k0; /* where the next begins (from k0) */
#pragma GCC unroll 8
    for (int kb = 0; kb < nkb; kb++)
        group_factors_set(t.scales[kb * kb_groups], p->biases ? t.biases[kb * kb_groups] : NULL,
                          bits, &f[kb]);
    for (int64_t first = 0; first < words; first += CHUNK_WORDS) {
        const int count = words - first < CHUNK_WORDS ? (int)(words - first) : CHUNK_WORDS;
#pragma GCC unroll 8
        for (int kb = 0; kb < nkb; kb++) {
            const int32_t *src = p->words + (k0 + kb * a->kcb) / per_word + first;
            /* to L1 or to L2: quantized.c, direct_prefetch_to_l1 */
            if (a->prefetch_to_l1)
                for (int r = 0; r < p->active; r++)
                    _mm_prefetch((const char *)(src + r * row_words + ahead), _MM_HINT_T0);
            else
                for (int r = 0; r < p->active; r++)
                    _mm_prefetch((const char *)(src + r * row_words + ahead), _MM_HINT_T1);
            rows_to_lanes(src, row_words, p->active, count, lane_words[kb]);
        }
        for (int wi = 0; wi < count; wi++) {
            const int64_t k = (first + wi) * per_word;
            if (k == next_group) { /* a word's codes lie in one group */
                group++;
                next_group += gs;
#pragma GCC unroll 8
                for (int kb = 0; kb < nkb; kb++)
                    group_factors_set(t.scales[kb * kb_groups + group],
                                      p->biases ? t.biases[kb * kb_groups + group] : NULL, bits,
                                      &f[kb]);
            }
#pragma GCC unroll 16
            for (int i = 0; i < per_word; i++) {
                const float *xk = a->x + k0 + k + i;
#pragma GCC unroll 8
                for (int kb = 0; kb < nkb; kb++) {
                    const vf w = fast_value(vi_load_all(lane_words[kb][wi]), i * bits, bits, mode,
                                            &f[kb]);
#pragma GCC unroll 4
                    for (int r = 0; r < rows; r++)
                        acc[kb][r] = vf_fma_x(&xk[kb * a->kcb + r * a->ldx], w, acc[kb][r]);
                }
            }
        }
    }
#pragma GCC unroll 8
    for (int kb = 0; kb < nkb; kb++)
        store_sums(a, nb, p->m, rows, k0 + kb * a->kcb == 0, acc[kb]);
}

/* Outputs [nb, nb + count) (count <= LANES) through the fast path: K
 * blocks PASS_K_BLOCKS at a time, then one at a time (the rest, a last
 * shorter block, or a kcb not a multiple of the group size). */
KINLINE void fast_outputs(const wf_qmv_args *a, int64_t nb, int count, int rows, int bits,
                          int mode)
{
    const pass_rows p = pass_rows_at(a, nb, count);
    const int64_t full = a->k / a->kcb, per_word = 32 / bits;
    const bool side_by_side = a->kcb % a->group_size == 0 &&
                              PASS_K_BLOCKS * (a->kcb / a->group_size) <= PASS_GROUPS;
    for (int64_t kb = 0; kb * a->kcb < a->k;) {
        const int nkb = side_by_side && kb + PASS_K_BLOCKS <= full ? PASS_K_BLOCKS : 1;
        const int64_t k0 = kb * a->kcb, len = a->k - k0 < a->kcb ? a->k - k0 : a->kcb;
        kb += nkb;
        /* the next pass reads nkb K blocks on; after the last one, the
         * next LANES rows from their first word (asked for from here, or
         * each block of rows would begin with a cache miss in every row) */
        const int64_t ahead = kb * a->kcb < a->k ? nkb * a->kcb / per_word
                                                 : LANES * a->row_bytes / 4 - k0 / per_word;
        if (nkb == PASS_K_BLOCKS) /* nkb a constant in each: its loops unrolled */
            fast_pass(a, &p, nb, PASS_K_BLOCKS, k0, len, ahead, rows, bits, mode);
        else
            fast_pass(a, &p, nb, 1, k0, len, ahead, rows, bits, mode);
    }
}

/* Whether the fast path can take codes of `bits` bits with this K blocking. */
KINLINE bool fast_bits(const wf_qmv_args *a)
{
    /* a K block's groups fit the pass's table; a 2-bit word (16 codes)
     * must not straddle a K block (kcb: a multiple of 8) */
    return a->kcb / a->group_size + 2 <= PASS_GROUPS &&
           (a->bits == 4 || a->bits == 8 ||
            (a->bits == 2 && (a->kcb % 16 == 0 || a->kcb >= a->k)));
}

/* The fast path with the bit width and mode as constants. */
KINLINE void fast_outputs_of(const wf_qmv_args *a, int64_t nb, int count, int rows)
{
    const bool affine = a->mode == WF_QUANT_AFFINE;
    if (a->bits == 2)
        fast_outputs(a, nb, count, rows, 2, WF_QUANT_AFFINE); /* 2 bits: affine only */
    else if (a->bits == 8)
        fast_outputs(a, nb, count, rows, 8, affine ? WF_QUANT_AFFINE : WF_QUANT_MXFP8);
    else if (affine)
        fast_outputs(a, nb, count, rows, 4, WF_QUANT_AFFINE);
    else
        fast_outputs(a, nb, count, rows, 4, a->mode);
}

/* ---------------------------------------------------------------- interleaved copies */

/* Interleaved path (wf_qmv_args.interleaved): a vector of the copy
 * holds one word of each of LANES rows, so the words come into lanes with
 * one load, and the scales and biases of a group likewise.
 * Two blocks of rows are summed side by side (two streams of lines, two
 * fma chains a row of x; two halves of K of one block read slower from
 * memory: bench_qmv_ceiling), group by group. Each group asks for the
 * codes interleaved_ahead(bits) vectors ahead (AVX-512, 4-bit 4096 x 4096
 * from memory on the KVM Xeon: 19.3-19.7 GB/s at 64, 16.2-18.8 at 32; on
 * Zen 4 the same at 32 and 64; 8-bit on the Xeon 22.7 at 64, 20.1 at 128,
 * on Zen 4 27.8-29.7 at 64, 33.4-35.4 at 32) and for the scales and
 * biases FACTORS_AHEAD words of codes ahead (their own streams, which
 * without it began each pair of blocks with misses: AVX-512 4-bit 4096 x
 * 4096 from memory on Zen 4, one thread 12.8 -> 13.3 GB/s, two 24.8 ->
 * 25.6; AVX2 15.6 -> 17.0; at 64 words about the same, at 128 no better
 * than none). The codes are dequantized and summed by the GEMM's K
 * blocks exactly as on the fast path, so the bits are the same. Needs kcb
 * a multiple of the group size (a group never straddles a K block) and
 * groups of whole words. */
enum { INTERLEAVED_AHEAD = 64, FACTORS_AHEAD = 32 }; /* words (vectors); a group has <= 32 */

KINLINE int64_t interleaved_ahead(int bits)
{
    return bits == 8 ? INTERLEAVED_AHEAD / 2 : INTERLEAVED_AHEAD;
}

KINLINE bool interleaved_fits(const wf_qmv_args *a)
{
    return a->interleaved.codes && a->interleaved.lanes == LANES &&
           (QMV_CODES_CONVERTED || a->interleaved.scales_in_place_range) &&
           a->mode == WF_QUANT_AFFINE && a->kcb % a->group_size == 0 &&
           a->group_size * a->bits % 32 == 0 && (a->bits == 2 || a->bits == 4 || a->bits == 8);
}

/* Outputs of the nu (1 or 2) blocks of rows from nb (a multiple of
 * LANES; the last block's first `last` rows). */
KINLINE void interleaved_units(const wf_qmv_args *a, int64_t nb, int nu, int last, int rows,
                               int bits)
{
    const int per_word = 32 / bits;
    const int64_t row_words = a->row_bytes / 4, gs = a->group_size, group_words = gs / per_word;
    const int64_t factor_groups_ahead = FACTORS_AHEAD / group_words;
    const int32_t *words[2];
    const float *scales[2], *biases[2];
    const float *x[2] = {a->x, vf_own_x(a->x)}; /* each unit's fmas broadcast x themselves */
#pragma GCC unroll 2
    for (int u = 0; u < nu; u++) {
        const int64_t block = nb / LANES + u;
        words[u] = a->interleaved.codes + block * row_words * LANES;
        scales[u] = a->interleaved.scales + block * a->groups * LANES;
        biases[u] = a->interleaved.biases ? a->interleaved.biases + block * a->groups * LANES
                                         : NULL;
    }
    for (int64_t k0 = 0; k0 < a->k; k0 += a->kcb) {
        const int64_t k1 = a->k - k0 < a->kcb ? a->k : k0 + a->kcb;
        vf acc[2][WF_QMV_ROWS];
#pragma GCC unroll 2
        for (int u = 0; u < nu; u++)
#pragma GCC unroll 4
            for (int r = 0; r < rows; r++)
                acc[u][r] = vf_zero();
        for (int64_t g = k0 / gs; g < k1 / gs; g++) {
            group_factors f[2];
#pragma GCC unroll 2
            for (int u = 0; u < nu; u++) {
                group_factors_set(scales[u] + g * LANES, biases[u] ? biases[u] + g * LANES : NULL,
                                  bits, &f[u]);
                /* past the block's end: the same unit of the next pair */
                int64_t word = g * group_words + interleaved_ahead(bits);
                word += word >= row_words ? (nu - 1) * row_words : 0;
                const char *ahead = (const char *)(words[u] + word * LANES);
                for (int64_t at = 0; at < group_words * LANES * 4; at += 64)
                    _mm_prefetch(ahead + at, _MM_HINT_T0);
                int64_t group = g + factor_groups_ahead;
                group += group >= a->groups ? (nu - 1) * a->groups : 0;
                _mm_prefetch((const char *)(scales[u] + group * LANES), _MM_HINT_T0);
                if (biases[u])
                    _mm_prefetch((const char *)(biases[u] + group * LANES), _MM_HINT_T0);
            }
            for (int64_t j = 0; j < group_words; j++) {
                const int64_t word = g * group_words + j;
                vi w[2];
#pragma GCC unroll 2
                for (int u = 0; u < nu; u++)
                    w[u] = vi_load_all(words[u] + word * LANES);
#pragma GCC unroll 16
                for (int i = 0; i < per_word; i++) {
#pragma GCC unroll 2
                    for (int u = 0; u < nu; u++) {
                        const float *xk = x[u] + word * per_word + i;
                        const vf v = fast_value(w[u], i * bits, bits, WF_QUANT_AFFINE, &f[u]);
#pragma GCC unroll 4
                        for (int r = 0; r < rows; r++)
                            acc[u][r] = vf_fma_x(&xk[r * a->ldx], v, acc[u][r]);
                    }
                }
            }
        }
#pragma GCC unroll 2
        for (int u = 0; u < nu; u++)
            store_sums(a, nb + u * LANES, lanes(u == nu - 1 ? last : LANES), rows, k0 == 0,
                       acc[u]);
    }
}

/* The interleaved path (affine only) with the block count and bit width
 * as constants. */
KINLINE void interleaved_of(const wf_qmv_args *a, int64_t nb, int nu, int last, int rows)
{
    if (nu == 2)
        switch (a->bits) {
        case 2: interleaved_units(a, nb, 2, last, rows, 2); break;
        case 4: interleaved_units(a, nb, 2, last, rows, 4); break;
        default: interleaved_units(a, nb, 2, last, rows, 8); break;
        }
    else
        switch (a->bits) {
        case 2: interleaved_units(a, nb, 1, last, rows, 2); break;
        case 4: interleaved_units(a, nb, 1, last, rows, 4); break;
        default: interleaved_units(a, nb, 1, last, rows, 8); break;
        }
}

/* Outputs [n0, n1) through the interleaved path, two blocks at a time. */
KINLINE void interleaved_rows(const wf_qmv_args *a, int64_t n0, int64_t n1, int rows)
{
    for (int64_t nb = n0; nb < n1; nb += 2 * LANES) {
        const int64_t left = n1 - nb;
        const int nu = left > LANES ? 2 : 1;
        const int64_t in_last = left - (nu - 1) * LANES;
        interleaved_of(a, nb, nu, in_last < LANES ? (int)in_last : LANES, rows);
    }
}

/* Asks for the scales and biases of rows [r0, r1) to L2: the passes
 * read them in K block order, each pass from a new line in every row,
 * and without this each pass began with a cache miss in each (AVX-512,
 * 4-bit matvec from memory on one thread: about 7% faster with it). */
KINLINE void prefetch_factors(const wf_qmv_args *a, int64_t r0, int64_t r1)
{
    for (int64_t r = r0; r < r1; r++)
        for (int64_t g = 0; g < a->groups; g += 16) {
            _mm_prefetch((const char *)(a->scales + r * a->groups + g), _MM_HINT_T1);
            if (a->biases)
                _mm_prefetch((const char *)(a->biases + r * a->groups + g), _MM_HINT_T1);
        }
}

KINLINE void qmv_rows(const wf_qmv_args *a, int64_t n0, int64_t n1, int rows)
{
    const bool fast = fast_bits(a);
    if (interleaved_fits(a)) {
        interleaved_rows(a, n0, n1, rows);
        return;
    }
    for (int64_t nb = n0; nb < n1; nb += LANES) {
        const int count = n1 - nb < LANES ? (int)(n1 - nb) : LANES;
        if (nb + LANES < n1) /* the next block's */
            prefetch_factors(a, nb + LANES, n1 - nb < 2 * LANES ? n1 : nb + 2 * LANES);
        if (fast && fast_scales_ok(a, nb, count))
            fast_outputs_of(a, nb, count, rows);
        else
            general_outputs(a, nb, lanes(count), rows);
    }
}

/* ---------------------------------------------------------------- GEMM panels */

/* The pass's rows (LANES at most) of W over K block [k0, k0 + len),
 * dequantized into a panel of the GEMM's packed B (backend/cpu/gemm.h):
 * dst[k * nr + lane], k counted from k0, a vector store per code of the
 * values fast_value gives (dequantize's bits). Lanes past the active rows
 * come out zero: rows_to_lanes gives them zero scales and biases. */
KINLINE void pack_pass(const wf_qmv_args *a, const pass_rows *p, int64_t k0, int64_t len,
                       int64_t nr, float *dst, int bits, int mode)
{
    const int per_word = 32 / bits;
    const int64_t row_words = a->row_bytes / 4, words = len / per_word, gs = a->group_size;
    __attribute__((aligned(64))) int32_t lane_words[CHUNK_WORDS][LANES];
    __attribute__((aligned(64))) pass_factors t;
    group_factors f;
    pass_factors_fill(a, p, 1, k0, len, &t);
    int group = 0; /* the table row of the current group */
    int64_t next_group = (k0 / gs + 1) * gs - k0;
    group_factors_set(t.scales[0], p->biases ? t.biases[0] : NULL, bits, &f);
    for (int64_t first = 0; first < words; first += CHUNK_WORDS) {
        const int count = words - first < CHUNK_WORDS ? (int)(words - first) : CHUNK_WORDS;
        rows_to_lanes(p->words + k0 / per_word + first, row_words, p->active, count, lane_words);
        for (int wi = 0; wi < count; wi++) {
            const int64_t k = (first + wi) * per_word;
            if (k == next_group) { /* a word's codes lie in one group */
                group++;
                next_group += gs;
                group_factors_set(t.scales[group], p->biases ? t.biases[group] : NULL, bits, &f);
            }
            const vi word = vi_load_all(lane_words[wi]);
#pragma GCC unroll 16
            for (int i = 0; i < per_word; i++)
                vf_store_all(dst + (k + i) * nr, fast_value(word, i * bits, bits, mode, &f));
        }
    }
}

/* pack_pass with the bit width and mode as constants. */
KINLINE void pack_pass_of(const wf_qmv_args *a, const pass_rows *p, int64_t k0, int64_t len,
                          int64_t nr, float *dst)
{
    const bool affine = a->mode == WF_QUANT_AFFINE;
    if (a->bits == 2)
        pack_pass(a, p, k0, len, nr, dst, 2, WF_QUANT_AFFINE);
    else if (a->bits == 8)
        pack_pass(a, p, k0, len, nr, dst, 8, affine ? WF_QUANT_AFFINE : WF_QUANT_MXFP8);
    else if (affine)
        pack_pass(a, p, k0, len, nr, dst, 4, WF_QUANT_AFFINE);
    else
        pack_pass(a, p, k0, len, nr, dst, 4, a->mode);
}

/* pack_pass from the interleaved copies (interleaved_fits): a vector of
 * the copy holds a word of each of block's LANES rows, and a group's
 * scales and biases likewise, so nothing is transposed. */
KINLINE void pack_interleaved(const wf_qmv_args *a, int64_t block, int64_t k0, int64_t len,
                              int64_t nr, float *dst, int bits)
{
    const int per_word = 32 / bits;
    const int64_t row_words = a->row_bytes / 4, gs = a->group_size, group_words = gs / per_word;
    const int32_t *words = a->interleaved.codes + block * row_words * LANES;
    const float *scales = a->interleaved.scales + block * a->groups * LANES;
    const float *biases =
        a->interleaved.biases ? a->interleaved.biases + block * a->groups * LANES : NULL;
    for (int64_t g = k0 / gs; g < (k0 + len) / gs; g++) {
        group_factors f;
        group_factors_set(scales + g * LANES, biases ? biases + g * LANES : NULL, bits, &f);
        for (int64_t word = g * group_words; word < (g + 1) * group_words; word++) {
            const vi w = vi_load_all(words + word * LANES);
            float *row = dst + (word * per_word - k0) * nr;
#pragma GCC unroll 16
            for (int i = 0; i < per_word; i++)
                vf_store_all(row + i * nr, fast_value(w, i * bits, bits, WF_QUANT_AFFINE, &f));
        }
    }
}

/* pack_interleaved with the bit width as a constant. */
KINLINE void pack_interleaved_of(const wf_qmv_args *a, int64_t block, int64_t k0, int64_t len,
                                 int64_t nr, float *dst)
{
    if (a->bits == 2)
        pack_interleaved(a, block, k0, len, nr, dst, 2);
    else if (a->bits == 4)
        pack_interleaved(a, block, k0, len, nr, dst, 4);
    else
        pack_interleaved(a, block, k0, len, nr, dst, 8);
}

/* The packer's entry (wf_qpack_fn): rows [n0, n1) of W into the packed B
 * of a GEMM with n = n1 - n0, panels nr wide (K block b, from k0 = b *
 * kcb, at k0 * panels * nr; its panel q at q * nr * kc), columns past n1
 * zero; from the interleaved copies where the product has them. False,
 * with nothing written, where neither path can take the rows (bit width,
 * K blocking, scales out of the in-place range). */
KINLINE bool qpack_rows(const wf_qmv_args *a, int64_t n0, int64_t n1, int64_t nr, float *dst)
{
    const bool interleaved = interleaved_fits(a) && n0 % LANES == 0;
    if (nr % LANES != 0 ||
        (!interleaved && (!fast_bits(a) || !fast_scales_ok(a, n0, n1 - n0))))
        return false;
    const int64_t panels = (n1 - n0 + nr - 1) / nr;
    for (int64_t k0 = 0; k0 < a->k; k0 += a->kcb) {
        const int64_t kc = a->k - k0 < a->kcb ? a->k - k0 : a->kcb;
        float *block = dst + k0 * panels * nr;
        for (int64_t r = n0; r < n0 + panels * nr; r += LANES) {
            float *at = block + (r - n0) / nr * nr * kc + (r - n0) % nr;
            if (r >= n1) {
                for (int64_t k = 0; k < kc; k++)
                    vf_store_all(at + k * nr, vf_zero());
                continue;
            }
            if (interleaved) { /* a block partly past n1 is W's last: zeros in the copy */
                pack_interleaved_of(a, r / LANES, k0, kc, nr, at);
                continue;
            }
            const pass_rows p = pass_rows_at(a, r, n1 - r < LANES ? (int)(n1 - r) : LANES);
            pack_pass_of(a, &p, k0, kc, nr, at);
        }
    }
    return true;
}

#define DEFINE_QPACK(name)                                                                        \
    KERNEL static bool name(const wf_qmv_args *a, int64_t n0, int64_t n1, int64_t nr, float *dst) \
    {                                                                                              \
        return qpack_rows(a, n0, n1, nr, dst);                                                     \
    }

/* The kernel's entry (wf_qmv_fn): the row count of x as a constant. */
#define DEFINE_QMV(name)                                                                          \
    KERNEL static void name(const wf_qmv_args *a, int64_t n0, int64_t n1)                          \
    {                                                                                              \
        switch (a->rows) {                                                                         \
        case 1: qmv_rows(a, n0, n1, 1); break;                                                     \
        case 2: qmv_rows(a, n0, n1, 2); break;                                                     \
        case 3: qmv_rows(a, n0, n1, 3); break;                                                     \
        default: qmv_rows(a, n0, n1, 4); break;                                                    \
        }                                                                                          \
    }
