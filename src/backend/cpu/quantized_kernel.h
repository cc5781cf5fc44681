/* The matrix-vector kernel of quantized_matmul (backend/cpu/quantized.h),
 * written once over a small vector layer that each ISA file
 * (quantized_avx2.c, quantized_avx512.c) defines before including this
 * header. Internal; include only from those files.
 *
 * The layer: vf / vi (LANES float32 / int32 lanes), vmask (a lane mask),
 * KINLINE (always-inline with the ISA's target attribute) and
 *   lanes(n)                      lanes [0, n) of LANES
 *   vf_zero, vf_set1, vf_add, vf_mul, vf_fma(a, b, c) = a * b + c
 *   vf_load(p, m), vf_store(p, m, v), vf_gather(base, index, m)
 *   vi_gather(base, index, m), vi_iota_times(stride), vi_srli(v, n), vi_srl(v, n)
 *   vi_to_float(v), vi_low_bits(v, bits)
 *   code_float(word, p, bits)     the float 2^(23 - p) + code (CODES_IN_PLACE)
 *                                 or 2^23 + code, the code being word's `bits`
 *                                 bits at bit p (p + bits <= 16)
 *   fp_values(c, mode)            fp4 / fp8 element values of the low bits
 *   copy_row_words(dst, src, n)   n (<= 16) words, the rest of dst's 16 zeroed
 *   scales_in_range(s, n)         every |s[i]| in [2^-100, 2^100]
 *
 * Fast path (2, 4 or 8 bits, every mode): LANES rows of W at a time, a
 * lane per output, PASS_BLOCKS such blocks side by side so that as many
 * fma chains hide each other's latency (more blocks measured no faster:
 * more rows are more page streams). A row's words are copied per 16-word
 * chunk into a small buffer (W's rows lie row_bytes apart, often a
 * multiple of 4 KiB, so gathering from them directly maps every row to the
 * same L1 sets), the next chunk a row per word step while this one is
 * read, and gathered from there a word per row. Affine codes need
 * no conversion: the code q at bit p of the word, masked in place under
 * the exponent of 2^(23 - p), is the float f = 2^(23 - p) + q, and with
 * c = -2^(23 - p) * s (exact while |s| <= 2^100), fma(f, s, c) is q * s
 * rounded once, the very product dequantize rounds, to which the bias is
 * then added. With 16 registers (AVX2) a c per offset crowds out the
 * accumulators: there the code is shifted down first (CODES_IN_PLACE 0,
 * one c = -2^23 s); each dequantized value is summed with fma by the GEMM's K
 * blocks in k order, so the bits are the GEMM's on the dequantized matrix.
 * Floating-point codes: fp_values(code) * scale (exact).
 *
 * General path (scales outside that range, a 2-bit word split by a K
 * block): one gather per word straight from W, codes shifted out and
 * converted. */

enum { PASS_BLOCKS = 2, CHUNK_WORDS = 16, PREFETCH_CHUNKS = 4, MAX_OFFSETS = 8 };

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
            acc[r] = vf_fma(vf_set1(x[r * ldx + k + j0 + j]), w, acc[r]);
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

/* A block's factors for its current group: the scale s, the bias b and,
 * per bit offset i * bits of a 16-bit half word, c[i] = -2^(23 - i bits) s. */
typedef struct group_factors {
    vf s, b, c[MAX_OFFSETS];
} group_factors;

KINLINE void group_factors_set(vf s, vf b, int bits, group_factors *f)
{
    f->s = s;
    f->b = b;
    const int offsets = CODES_IN_PLACE ? 16 / bits : 1;
#pragma GCC unroll 8
    for (int i = 0; i < offsets; i++)
        f->c[i] = vf_mul(s, vf_set1(-(float)(1 << (23 - i * bits))));
}

/* The dequantized value of the code at bit i * bits of each lane's half word. */
KINLINE vf fast_value(vi half_word, int i, int bits, int mode, const group_factors *f)
{
    if (mode != WF_QUANT_AFFINE) /* fp_values reads only the code's own bits */
        return vf_mul(fp_values(vi_srli(half_word, i * bits), mode), f->s);
    return vf_add(vf_fma(code_float(half_word, i * bits, bits), f->s, f->c[CODES_IN_PLACE ? i : 0]),
                  f->b);
}

/* Whether every scale of rows [nb, nb + count) lies in the fast path's range. */
KINLINE bool fast_scales_ok(const wf_qmv_args *a, int64_t nb, int64_t count)
{
    for (int64_t r = nb; r < nb + count; r++)
        if (!scales_in_range(a->scales + r * a->groups, a->groups))
            return false;
    return true;
}

/* The pass's blocks: where their rows start, their active lanes. */
typedef struct pass_blocks {
    const int32_t *words[PASS_BLOCKS];
    const float *scales[PASS_BLOCKS], *biases[PASS_BLOCKS];
    vmask m[PASS_BLOCKS];
    int active[PASS_BLOCKS];
} pass_blocks;

/* Copies words [first, first + count) of row r of each of the pass's
 * blocks into buf[blk][r], and asks for the line PREFETCH_CHUNKS chunks
 * further on (a pass reads more rows at once than the hardware
 * prefetchers follow) with the line of that chunk's `group` of scales
 * and biases. */
KINLINE void copy_row_chunk(const wf_qmv_args *a, const pass_blocks *p, int nblk, int r,
                            int64_t first, int count, int64_t group,
                            int32_t (*buf)[LANES][CHUNK_WORDS])
{
    for (int blk = 0; blk < nblk; blk++)
        if (r < p->active[blk]) {
            const int32_t *src = p->words[blk] + r * (a->row_bytes / 4) + first;
            _mm_prefetch((const char *)(src + PREFETCH_CHUNKS * CHUNK_WORDS), _MM_HINT_T0);
            if (group < a->groups) { /* the scales and biases of that chunk */
                _mm_prefetch((const char *)(p->scales[blk] + r * a->groups + group), _MM_HINT_T0);
                if (p->biases[blk])
                    _mm_prefetch((const char *)(p->biases[blk] + r * a->groups + group),
                                 _MM_HINT_T0);
            }
            copy_row_words(buf[blk][r], src, count);
        }
}

/* The group of the chunk PREFETCH_CHUNKS on from the one at word `first`. */
KINLINE int64_t prefetch_group(const wf_qmv_args *a, int64_t first, int per_word)
{
    return (first + PREFETCH_CHUNKS * CHUNK_WORDS) * per_word / a->group_size;
}

/* The outputs of `nblk` blocks over all of K: acc[blk][r] summed in k
 * order per K block, each K block's sums then added to the outputs. The
 * rows' words stream through two chunk buffers: while one is read, the
 * next chunk is copied into the other a row per word step, so that the
 * loads and prefetches spread over the chunk rather than come in a burst. */
KINLINE void fast_pass(const wf_qmv_args *a, const pass_blocks *p, int nblk, int64_t nb,
                       int rows, int bits, int mode)
{
    const int per_word = 32 / bits, per_half = per_word / 2;
    const int64_t words = a->k / per_word;
    const int64_t chunks = (words + CHUNK_WORDS - 1) / CHUNK_WORDS;
    const vi buf_index = vi_iota_times(CHUNK_WORDS);
    const vi group_index = vi_iota_times((int32_t)a->groups);
    int32_t buf[2][PASS_BLOCKS][LANES][CHUNK_WORDS];
    group_factors f[PASS_BLOCKS];
    vf acc[PASS_BLOCKS][WF_QMV_ROWS];
    __builtin_memset(f, 0, sizeof f); /* set at k = 0; zeroed for the compiler's sake */
#pragma GCC unroll 4
    for (int blk = 0; blk < nblk; blk++)
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++)
            acc[blk][r] = vf_zero();
    for (int r = 0; r < LANES; r++)
        copy_row_chunk(a, p, nblk, r, 0, words < CHUNK_WORDS ? (int)words : CHUNK_WORDS,
                       prefetch_group(a, 0, per_word), buf[0]);
    int64_t next_group = 0;    /* the first k of a group not yet set */
    int64_t block_end = a->kcb; /* the end of the current K block */
    for (int64_t c = 0; c < chunks; c++) {
        int32_t (*cur)[LANES][CHUNK_WORDS] = buf[c & 1], (*next)[LANES][CHUNK_WORDS] = buf[~c & 1];
        const int64_t first = c * CHUNK_WORDS, left = words - first - CHUNK_WORDS;
        const int count = words - first < CHUNK_WORDS ? (int)(words - first) : CHUNK_WORDS;
        const int next_count = left <= 0 ? 0 : left < CHUNK_WORDS ? (int)left : CHUNK_WORDS;
        const int64_t next_group_ahead = prefetch_group(a, first + CHUNK_WORDS, per_word);
        for (int wi = 0; wi < count; wi++) {
            /* a next chunk follows a full one: every row's turn comes */
            if (next_count > 0 && wi < LANES)
                copy_row_chunk(a, p, nblk, wi, first + CHUNK_WORDS, next_count,
                               next_group_ahead, next);
            const int64_t k = (first + wi) * per_word;
            if (k == block_end) {
#pragma GCC unroll 4
                for (int blk = 0; blk < nblk; blk++) {
                    store_sums(a, nb + (int64_t)LANES * blk, p->m[blk], rows, k == a->kcb,
                               acc[blk]);
#pragma GCC unroll 4
                    for (int r = 0; r < rows; r++)
                        acc[blk][r] = vf_zero();
                }
                block_end += a->kcb;
            }
            if (k >= next_group) {
                const int64_t g = k / a->group_size;
                next_group = (g + 1) * a->group_size;
#pragma GCC unroll 4
                for (int blk = 0; blk < nblk; blk++) {
                    const vf s = vf_gather(p->scales[blk] + g, group_index, p->m[blk]);
                    const vf b = p->biases[blk]
                                     ? vf_gather(p->biases[blk] + g, group_index, p->m[blk])
                                     : vf_zero();
                    group_factors_set(s, b, bits, &f[blk]);
                }
            }
            vi word[PASS_BLOCKS];
#pragma GCC unroll 4
            for (int blk = 0; blk < nblk; blk++)
                word[blk] = vi_gather(&cur[blk][0][wi], buf_index, p->m[blk]);
#pragma GCC unroll 2
            for (int half = 0; half < 2; half++) {
                vi hw[PASS_BLOCKS];
#pragma GCC unroll 4
                for (int blk = 0; blk < nblk; blk++)
                    hw[blk] = half ? vi_srli(word[blk], 16) : word[blk];
#pragma GCC unroll 8
                for (int i = 0; i < per_half; i++) {
                    const float *xk = a->x + k + half * per_half + i;
#pragma GCC unroll 4
                    for (int blk = 0; blk < nblk; blk++) {
                        const vf w = fast_value(hw[blk], i, bits, mode, &f[blk]);
#pragma GCC unroll 4
                        for (int r = 0; r < rows; r++)
                            acc[blk][r] = vf_fma(vf_set1(xk[r * a->ldx]), w, acc[blk][r]);
                    }
                }
            }
        }
    }
#pragma GCC unroll 4
    for (int blk = 0; blk < nblk; blk++)
        store_sums(a, nb + (int64_t)LANES * blk, p->m[blk], rows, a->k <= a->kcb, acc[blk]);
}

/* Outputs [nb, nb + count) (count <= PASS_BLOCKS * LANES) through the fast path. */
KINLINE void fast_outputs(const wf_qmv_args *a, int64_t nb, int64_t count, int rows, int bits,
                          int mode)
{
    pass_blocks p;
    int nblk = 0;
    for (int blk = 0; blk < PASS_BLOCKS; blk++) {
        const int64_t first = nb + (int64_t)LANES * blk, left = nb + count - first;
        p.active[blk] = left <= 0 ? 0 : left < LANES ? (int)left : LANES;
        p.m[blk] = lanes(p.active[blk]);
        p.words[blk] = (const int32_t *)(a->codes + first * a->row_bytes);
        p.scales[blk] = a->scales + first * a->groups;
        p.biases[blk] = a->biases ? a->biases + first * a->groups : NULL;
        nblk += p.active[blk] > 0;
    }
    if (nblk == PASS_BLOCKS) { /* the steady state: a constant block count */
        fast_pass(a, &p, PASS_BLOCKS, nb, rows, bits, mode);
        return;
    }
    for (int blk = 0; blk < nblk; blk++) {
        pass_blocks one = p;
        one.words[0] = p.words[blk], one.scales[0] = p.scales[blk];
        one.biases[0] = p.biases[blk], one.m[0] = p.m[blk];
        one.active[0] = p.active[blk];
        fast_pass(a, &one, 1, nb + (int64_t)LANES * blk, rows, bits, mode);
    }
}

/* Whether the fast path can take codes of `bits` bits with this K blocking. */
KINLINE bool fast_bits(const wf_qmv_args *a)
{
    /* a 2-bit word (16 codes) must not straddle a K block (kcb: a multiple of 8) */
    return a->bits == 4 || a->bits == 8 || (a->bits == 2 && (a->kcb % 16 == 0 || a->kcb >= a->k));
}

/* The fast path with the bit width and mode as constants. */
KINLINE void fast_outputs_of(const wf_qmv_args *a, int64_t nb, int64_t count, int rows)
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

KINLINE void qmv_rows(const wf_qmv_args *a, int64_t n0, int64_t n1, int rows)
{
    const bool fast = fast_bits(a);
    for (int64_t nb = n0; nb < n1; nb += PASS_BLOCKS * LANES) {
        const int64_t count = n1 - nb < PASS_BLOCKS * LANES ? n1 - nb : PASS_BLOCKS * LANES;
        if (fast && (a->mode != WF_QUANT_AFFINE || fast_scales_ok(a, nb, count))) {
            fast_outputs_of(a, nb, count, rows);
            continue;
        }
        for (int64_t b = nb; b < nb + count; b += LANES)
            general_outputs(a, b, lanes(nb + count - b), rows);
    }
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
