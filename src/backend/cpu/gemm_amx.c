/*
 * bfloat16 products on Intel's AMX tiles (AMX-BF16: tdpbf16ps), the GEMM
 * variant WF_GEMM_ISA_AMX_BF16 (gemm.h). One tdpbf16ps multiplies a 16 x 32
 * bfloat16 tile of A by a 32 x 16 tile of B (pairs of k side by side) into
 * a 16 x 16 float32 tile of C: 16 times the work of a 512-bit vdpbf16ps.
 *
 * A block of C is computed K block by K block (gemm.c's k_block, so each
 * element's sum is: every K block summed from zero, then taken into C by
 * gemm.h's epilogue rule, as on the other variants), and within a K block
 * strip by strip of at most STRIP columns:
 *  - B's strip is packed into panels of 16 columns, pair rows of 16 x 2
 *    bfloat16 (64 bytes), zero beyond the strip and beyond the K block up
 *    to a multiple of 32;
 *  - rows are taken 32 at a time, read where they lie when whole tiles
 *    cover them (contiguous k, 16 or 32 rows, a K block a multiple of
 *    32), else copied zero-padded into a 32 x kc32 row-major block;
 *  - each 32 x 32 block of C is four C tiles: two A tiles and two B
 *    tiles per 32 k, four tdpbf16ps; the tiles are stored to a buffer and
 *    the epilogue takes the rows and columns inside the block to C.
 * Every product of this variant goes through here whatever its row count
 * (no matrix-vector path): tdpbf16ps's sums are not those of vdpbf16ps,
 * so that a row's bits do not depend on the rows computed with it. Zero
 * padding adds +0 products, the same for every row count.
 *
 * The tile configuration is loaded at the start of each block and
 * released at its end, so no thread keeps AMX state between products.
 * The kernel may use AMX only after the process asked Linux for it
 * (arch_prctl ARCH_REQ_XCOMP_PERM), which wf__gemm_amx_available does once,
 * at the first bfloat16 product of the variant: programs that multiply no
 * bfloat16 never ask. Where Linux refuses, the variant's products run
 * gemm.c's vdpbf16ps blocks instead, for the rest of the process.
 */
#include "backend/cpu/gemm.h"

#include "backend/cpu/gemm_epilogue_avx512.h"
#include "backend/cpu/transpose_avx512.h"

#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ATTR_AMX                                                                                 \
    __attribute__((target("amx-tile,amx-bf16,avx512f,avx512dq,avx512vl,avx512bw,avx512bf16,fma")))

enum {
    TILE_ROWS = 16,
    TILE_K = 32,        /* k per A tile: 32 bfloat16 = 64 bytes a row */
    BLOCK_ROWS = 32,    /* two A tiles */
    STRIP = 512,        /* columns of B packed at a time (a multiple of 32) */
    ARCH_REQ_XCOMP_PERM = 0x1023,
    XFEATURE_XTILEDATA = 18,
};

bool wf__gemm_amx_cpu(void)
{
    static atomic_int known; /* 0: not read yet, 1: no, 2: yes */
    int state = atomic_load_explicit(&known, memory_order_relaxed);
    if (state == 0) {
        unsigned a, b, c, d; /* CPUID leaf 7: EDX bit 22 AMX-BF16, bit 24 AMX-TILE */
        state = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 22 & 1u) && (d >> 24 & 1u)
                    ? 2
                    : 1;
        atomic_store_explicit(&known, state, memory_order_relaxed);
    }
    return state == 2;
}

bool wf__gemm_amx_available(void)
{
    static atomic_int known; /* 0: not asked yet, 1: no, 2: yes */
    int state = atomic_load_explicit(&known, memory_order_acquire);
    if (state == 0) {
        /* Linux's permission to use the tile data state; threads asking
         * at once all get the same answer (the request is idempotent) */
        const bool os = wf__gemm_amx_cpu() &&
                        syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
        state = os ? 2 : 1;
        atomic_store_explicit(&known, state, memory_order_release);
    }
    return state == 2;
}

static int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

size_t wf__gemm_amx_scratch_bytes(int64_t kcb, int64_t cols)
{
    const int64_t kc32 = round_up(kcb, TILE_K), strip = round_up(min64(cols, STRIP), 32);
    return (size_t)((strip + BLOCK_ROWS) * kc32) * sizeof(uint16_t) +
           4 * TILE_ROWS * TILE_ROWS * sizeof(float) + 128;
}

/* A panel's pair rows [0, kc / 32 * 16) from `cols` columns whose k lie
 * contiguous (column j's k at col0 + j * csb): each 32 k of the 16
 * columns, as 16 pairs (32-bit elements) a column, transposed. */
ATTR_AMX static int64_t pack_panel_k_contiguous(const uint16_t *col0, int64_t csb, int64_t cols,
                                                int64_t kc, uint16_t *panel)
{
    int64_t k = 0;
    for (; k + TILE_K <= kc; k += TILE_K) {
        __m512i r[16];
        for (int j = 0; j < 16; j++)
            r[j] = j < cols ? _mm512_loadu_si512(col0 + j * csb + k) : _mm512_setzero_si512();
        wf__transpose16_epi32(r);
        for (int t = 0; t < 16; t++)
            _mm512_storeu_si512(panel + (k / 2 + t) * 32, r[t]);
    }
    return k;
}

/* A panel from `cols` columns of B's rows row0 + k * ldb (k < kc), the
 * columns contiguous: each pair row interleaves rows 2t and 2t + 1 (zero
 * for a row kc). */
ATTR_AMX static void pack_panel_rows(const uint16_t *row0, int64_t ldb, int64_t cols, int64_t kc,
                                     uint16_t *panel)
{
    const __mmask16 m = cols >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << cols) - 1);
    for (int64_t k = 0; k < kc; k += 2) {
        const __m256i even = _mm256_maskz_loadu_epi16(m, row0 + k * ldb);
        const __m256i odd = k + 1 < kc ? _mm256_maskz_loadu_epi16(m, row0 + (k + 1) * ldb)
                                       : _mm256_setzero_si256();
        /* per 128-bit lane: pairs of columns 0-3 / 8-11 (low), 4-7 / 12-15 (high) */
        const __m256i low = _mm256_unpacklo_epi16(even, odd);
        const __m256i high = _mm256_unpackhi_epi16(even, odd);
        _mm256_storeu_si256((__m256i *)(panel + k * 16), _mm256_permute2x128_si256(low, high, 0x20));
        _mm256_storeu_si256((__m256i *)(panel + k * 16 + 16),
                            _mm256_permute2x128_si256(low, high, 0x31));
    }
}

/* Columns [js, je) of B's rows [k0, k0 + kc) into panels of 16 columns at
 * bp: panel q's pair row t at bp + (q * kc32 / 2 + t) * 32, holding
 * (B[2t][j], B[2t + 1][j]) for its 16 columns j; zero outside. The panel
 * count is rounded up to even (the kernel takes them two at a time). */
ATTR_AMX static void pack_b(const wf_gemm_args *g, int64_t k0, int64_t kc, int64_t kc32,
                            int64_t js, int64_t je, uint16_t *bp)
{
    const uint16_t *b = g->b;
    const int64_t panels = round_up(je - js, 32) / 16, pairs = kc32 / 2;
    memset(bp, 0, (size_t)(panels * pairs * 32) * sizeof *bp);
    for (int64_t q = 0; q < panels; q++) {
        uint16_t *panel = bp + q * pairs * 32;
        const int64_t cols = min64(16, je - (js + q * 16));
        if (cols <= 0)
            continue;
        if (g->rsb == 1) { /* k contiguous (x @ W.T): 32 k of 16 columns at a time */
            const uint16_t *col0 = b + (js + q * 16) * g->csb + k0;
            const int64_t done = pack_panel_k_contiguous(col0, g->csb, cols, kc, panel);
            for (int64_t j = 0; j < cols; j++)
                for (int64_t k = done; k < kc; k++)
                    panel[(k / 2 * 16 + j) * 2 + k % 2] = col0[j * g->csb + k];
        } else if (g->csb == 1) { /* rows of B contiguous (x @ W): two rows interleaved */
            pack_panel_rows(b + k0 * g->rsb + js + q * 16, g->rsb, cols, kc, panel);
        } else { /* any strides */
            for (int64_t k = 0; k < kc; k++) {
                const uint16_t *row = b + (k0 + k) * g->rsb + (js + q * 16) * g->csb;
                for (int64_t j = 0; j < cols; j++)
                    panel[(k / 2 * 16 + j) * 2 + k % 2] = row[j * g->csb];
            }
        }
    }
}

/* K block b's packed strip of a whole packed B (wf__gemm_amx_pack_b):
 * every full K block holds round_up(n, 32) x kc32 elements. */
static int64_t packed_block_offset(const wf_gemm_args *g, int64_t kcb, int64_t k0)
{
    return k0 / kcb * round_up(g->n, 32) * round_up(kcb, TILE_K);
}

size_t wf__gemm_amx_packed_b_bytes(const wf_gemm_args *g, int64_t kcb)
{
    const int64_t last = g->k - (g->k - 1) / kcb * kcb;
    return (size_t)(packed_block_offset(g, kcb, g->k - last) +
                    round_up(g->n, 32) * round_up(last, TILE_K)) *
           sizeof(uint16_t);
}

void wf__gemm_amx_pack_b(const wf_gemm_args *g, int64_t kcb, void *dst)
{
    for (int64_t k0 = 0; k0 < g->k; k0 += kcb) {
        const int64_t kc = min64(kcb, g->k - k0);
        pack_b(g, k0, kc, round_up(kc, TILE_K), 0, g->n,
               (uint16_t *)dst + packed_block_offset(g, kcb, k0));
    }
}

/* Rows [i, i + rows) of A's columns [k0, k0 + kc) into a 32 x kc32
 * row-major block at ap, zero outside. */
static void pack_a(const wf_gemm_args *g, int64_t i, int rows, int64_t k0, int64_t kc,
                   int64_t kc32, uint16_t *ap)
{
    const uint16_t *a = g->a;
    memset(ap, 0, (size_t)(BLOCK_ROWS * kc32) * sizeof *ap);
    for (int r = 0; r < rows; r++) {
        const uint16_t *src = a + (i + r) * g->rsa + k0 * g->csa;
        uint16_t *dst = ap + r * kc32;
        if (g->csa == 1)
            memcpy(dst, src, (size_t)kc * sizeof *dst);
        else
            for (int64_t k = 0; k < kc; k++)
                dst[k] = src[k * g->csa];
    }
}

typedef struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t bytes_per_row[16];
    uint8_t rows[16];
} tile_config;

/* The four 16 x 16 sums in sums (row tile r, column tile t at (2r + t) *
 * 256) into C's rows [i, i + rows) and columns [j, j + cols). */
ATTR_AMX static void store_block(const wf_gemm_args *g, const float *sums, int64_t i, int rows,
                                 int64_t j, int64_t cols, const wf_gemm_epilogue *e)
{
    float *c = g->c;
    for (int r = 0; r < rows; r++)
        for (int t = 0; t < 2 && t * 16 < cols; t++) {
            const int64_t left = cols - t * 16;
            const __mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
            float *cr = c + (i + r) * g->ldc + j + t * 16;
            const __m512 acc = _mm512_loadu_ps(sums + ((r / 16 * 2 + t) * 256 + r % 16 * 16));
            _mm512_mask_storeu_ps(cr, m, wf__gemm_finish_f32x16(acc, cr, m, e));
        }
}

/* C's rows [i, i + rows) (rows <= 32) and the strip's columns from the
 * A block (row r's k at ap + r * lda + k) and the B panels, 32 columns at
 * a time. */
ATTR_AMX static void block_times_strip(const wf_gemm_args *g, const uint16_t *ap, int64_t lda,
                                       const uint16_t *bp, int64_t kc32, int64_t i, int rows,
                                       int64_t js, int64_t je, float *sums,
                                       const wf_gemm_epilogue *e)
{
    const int64_t astride = lda * (int64_t)sizeof *ap, panel = kc32 * 16;
    for (int64_t q = 0; q * 16 < je - js; q += 2) {
        const uint16_t *b0 = bp + q * panel, *b1 = b0 + panel;
        _tile_zero(0);
        _tile_zero(1);
        if (rows > TILE_ROWS) {
            _tile_zero(2);
            _tile_zero(3);
            for (int64_t k = 0; k < kc32; k += TILE_K) {
                _tile_loadd(4, ap + k, astride);
                _tile_loadd(5, ap + TILE_ROWS * lda + k, astride);
                _tile_loadd(6, b0 + k * 16, 64);
                _tile_loadd(7, b1 + k * 16, 64);
                _tile_dpbf16ps(0, 4, 6);
                _tile_dpbf16ps(1, 4, 7);
                _tile_dpbf16ps(2, 5, 6);
                _tile_dpbf16ps(3, 5, 7);
            }
            _tile_stored(2, sums + 512, 64);
            _tile_stored(3, sums + 768, 64);
        } else {
            for (int64_t k = 0; k < kc32; k += TILE_K) {
                _tile_loadd(4, ap + k, astride);
                _tile_loadd(6, b0 + k * 16, 64);
                _tile_loadd(7, b1 + k * 16, 64);
                _tile_dpbf16ps(0, 4, 6);
                _tile_dpbf16ps(1, 4, 7);
            }
        }
        _tile_stored(0, sums, 64);
        _tile_stored(1, sums + 256, 64);
        const int64_t j = js + q * 16;
        store_block(g, sums, i, rows, j, min64(32, je - j), e);
    }
}

ATTR_AMX void wf__gemm_block_bf16_amx(const wf_gemm_args *g, int64_t kcb, int64_t i0, int64_t i1,
                                      int64_t j0, int64_t j1, void *scratch)
{
    const int64_t kc32_max = round_up(kcb, TILE_K);
    /* 64-byte aligned pieces: the B panels, the A block, the sums */
    uint16_t *bp = (uint16_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    uint16_t *ap = bp + round_up(min64(j1 - j0, STRIP), 32) * kc32_max;
    float *sums = (float *)(ap + BLOCK_ROWS * kc32_max);
    tile_config config = {.palette = 1};
    for (int t = 0; t < 8; t++) {
        config.rows[t] = TILE_ROWS;
        config.bytes_per_row[t] = 64;
    }
    _tile_loadconfig(&config);
    for (int64_t k0 = 0; k0 < g->k; k0 += kcb) {
        const int64_t kc = min64(kcb, g->k - k0), kc32 = round_up(kc, TILE_K);
        const wf_gemm_epilogue e = {.mode = k0 > 0        ? WF_GEMM_STORE_ADD
                                            : g->beta == 0 ? WF_GEMM_STORE_SET
                                                           : WF_GEMM_STORE_BETA,
                                    .alpha = g->alpha,
                                    .beta = g->beta};
        for (int64_t js = j0; js < j1; js += STRIP) {
            const int64_t je = min64(j1, js + STRIP);
            const uint16_t *panels = bp;
            if (g->b_packed) /* js is a multiple of 32: its panels start there */
                panels = (const uint16_t *)g->b_packed + packed_block_offset(g, kcb, k0) +
                         js * kc32;
            else
                pack_b(g, k0, kc, kc32, js, je, bp);
            for (int64_t i = i0; i < i1; i += BLOCK_ROWS) {
                const int rows = (int)min64(BLOCK_ROWS, i1 - i);
                /* A's rows read where they lie when the tiles cover them
                 * exactly: contiguous k, whole tiles of rows and of k */
                if (g->csa == 1 && kc == kc32 && (rows == BLOCK_ROWS || rows == TILE_ROWS)) {
                    block_times_strip(g, (const uint16_t *)g->a + i * g->rsa + k0, g->rsa,
                                      panels, kc32, i, rows, js, je, sums, &e);
                    continue;
                }
                pack_a(g, i, rows, k0, kc, kc32, ap);
                block_times_strip(g, ap, kc32, panels, kc32, i, rows, js, je, sums, &e);
            }
        }
    }
    _tile_release();
}

#else /* no AMX: never available, never called */

bool wf__gemm_amx_cpu(void) { return false; }

size_t wf__gemm_amx_packed_b_bytes(const wf_gemm_args *g, int64_t kcb)
{
    (void)g;
    (void)kcb;
    return 0;
}
void wf__gemm_amx_pack_b(const wf_gemm_args *g, int64_t kcb, void *dst)
{
    (void)g, (void)kcb, (void)dst;
}

bool wf__gemm_amx_available(void) { return false; }
size_t wf__gemm_amx_scratch_bytes(int64_t kcb, int64_t cols)
{
    (void)kcb;
    (void)cols;
    return 0;
}
void wf__gemm_block_bf16_amx(const wf_gemm_args *g, int64_t kcb, int64_t i0, int64_t i1,
                             int64_t j0, int64_t j1, void *scratch)
{
    (void)g, (void)kcb, (void)i0, (void)i1, (void)j0, (void)j1, (void)scratch;
}

#endif
