/* weft's GEMM: variant selection, blocking, packing and the driver (see
 * gemm.h for the technique and the reproducibility rule). The baseline
 * micro-kernel is here; the AVX2 and AVX-512 ones are in gemm_avx2.c and
 * gemm_avx512.c. */
#include "backend/cpu/gemm.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_features.h"
#include "core/error.h"
#include "runtime/pool.h"
#include "util/fault.h"

/* K block: at most this many k per pass over C (it is part of every
 * result's bits, so it depends on K alone and never changes per CPU).
 * Each pass costs a tile's epilogue (C read, added to and written) and a B
 * strip packed again, so blocks are long: one thread, Zen 3, weft / NumPy
 * in one process, 256 -> 512: float32 512x384x1536 0.91 -> 0.98-1.01,
 * 1024x2048x2048 0.97 -> 0.99-1.02, complex64 256^3 0.95 -> 0.99, 1024^3
 * 0.97 -> 0.98-0.99 (768 measured the same). B's micro-panel (16 or 32 x
 * 512 floats) then comes from L2 rather than L1, which the tiles' 6 or 14
 * FMAs per B vector easily absorb. A float32 block's rounding error grows
 * with its length (about 2x at 512 over 256, still one sum per block). */
enum { GEMM_KC = 512 };
/* Columns of B packed at once (a strip: up to 512 x 512 floats = 1 MB, in
 * L2 and L3; 256 columns measured no faster on Zen 3 with K blocks of 512).
 * Complex B' strips are twice as wide (2 MB at K blocks of 512): A,
 * packed anew for each strip when its rows share an L1 set, is packed half
 * as often; complex64 2048^3 +1-2.5% on 1 and 2 threads (CPU time, old and
 * new alternated in one process), 256^3 ... 1024^3 unchanged. On Zen 3
 * (512 KB L2) 512 and 256 columns measured no faster than 1024 (1024^3 and
 * 2048^3, one thread, A packed once for all strips). */
enum { GEMM_NC = 512, GEMM_NC_COMPLEX = 1024 };
/* Blocks per pool thread aimed at when splitting a product (enough to
 * balance; every block packs its own panels, so more cost more), and the
 * least work (flops) worth a block of its own. */
enum { BLOCKS_PER_THREAD = 4 };
#define GEMM_MIN_BLOCK_FLOPS ((int64_t)1 << 20)
/* Complex B: each block also expands its B' panels from B, so fewer, larger
 * blocks. Zen 3, two threads, wall time alternated in one process under
 * load 10 (noisy, two runs): 256^3 18-38 / 48-57 / 44-59 GFLOP/s with 4 /
 * 2 / 1 blocks a thread, 512^3 16-22 / 15-21 / 23-29, 1024^3 21 / 25 / 25;
 * 2 rather than 1 keeps some balance when a thread is held up. */
enum { COMPLEX_BLOCKS_PER_THREAD = 2 };

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

/* The strip width (columns of B) for a product. */
static int64_t strip_columns(const wf_gemm_args *g)
{
    return g->b_stored == WF_DTYPE_C64 ? GEMM_NC_COMPLEX : GEMM_NC;
}

/* ---------------------------------------------------------------- variants */

#if defined(__x86_64__) && defined(__GNUC__)
#define GEMM_HAVE_X86 1
#else
#define GEMM_HAVE_X86 0
#endif

bool wf__gemm_isa_supported(int isa)
{
    if (isa == WF_GEMM_ISA_BASELINE)
        return true;
#if GEMM_HAVE_X86
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                        __builtin_cpu_supports("avx512bw");
    if (isa == WF_GEMM_ISA_AVX2)
        return avx2;
    if (isa == WF_GEMM_ISA_AVX512)
        return avx512;
    if (isa == WF_GEMM_ISA_AVX512_BF16)
        return avx512 && __builtin_cpu_supports("avx512bf16");
    if (isa == WF_GEMM_ISA_AMX_BF16)
        return avx512 && __builtin_cpu_supports("avx512bf16") && wf__gemm_amx_cpu();
#endif
    return false;
}

const char *wf__gemm_isa_name(int isa)
{
    static const char *const names[WF_GEMM_ISA_COUNT] = {"baseline", "avx2", "avx512",
                                                         "avx512bf16", "amxbf16"};
    return isa >= 0 && isa < WF_GEMM_ISA_COUNT ? names[isa] : NULL;
}

bool wf__gemm_isa_has_bf16(int isa)
{
    return isa == WF_GEMM_ISA_AVX512_BF16 || isa == WF_GEMM_ISA_AMX_BF16;
}

/* Does g run on AMX tiles? A bfloat16 product of the AMX variant, once
 * Linux granted the tiles (asked here, at the first such product). */
static bool on_amx(const wf_gemm_args *g)
{
    return g->isa == WF_GEMM_ISA_AMX_BF16 && g->dtype == WF_DTYPE_BF16 &&
           wf__gemm_amx_available();
}

/* The best supported variant not above WEFT_ISA (unknown names are
 * ignored). Detection is idempotent: a race only repeats it. */
static int default_isa(void)
{
    static atomic_int cached = -1;
    int isa = atomic_load_explicit(&cached, memory_order_relaxed);
    if (isa >= 0)
        return isa;
    int cap = WF_GEMM_ISA_COUNT - 1;
    const char *env = getenv("WEFT_ISA");
    for (int i = 0; env != NULL && i < WF_GEMM_ISA_COUNT; i++)
        if (strcmp(env, wf__gemm_isa_name(i)) == 0)
            cap = i;
    for (isa = cap; isa > WF_GEMM_ISA_BASELINE && !wf__gemm_isa_supported(isa); isa--)
        ;
    atomic_store_explicit(&cached, isa, memory_order_relaxed);
    return isa;
}

static atomic_int forced_isa = -1;

int wf__gemm_isa(void)
{
    const int f = atomic_load_explicit(&forced_isa, memory_order_relaxed);
    return f >= 0 ? f : default_isa();
}

wf_status wf__gemm_isa_set(int isa)
{
    if (isa != -1 && (isa < 0 || isa >= WF_GEMM_ISA_COUNT || !wf__gemm_isa_supported(isa)))
        return wf__error(WF_ERR_UNSUPPORTED, "gemm: ISA variant %d (%s) is not supported here",
                         isa, wf__gemm_isa_name(isa) ? wf__gemm_isa_name(isa) : "unknown");
    atomic_store_explicit(&forced_isa, isa, memory_order_relaxed);
    return WF_OK;
}

/* ---------------------------------------------------------------- baseline kernels
 * float32 4 x 8 and float64 4 x 4 tiles in SSE-width vectors (GCC vector
 * extensions: SSE2 on x86-64, whatever the target offers elsewhere). No
 * FMA: products and sums round separately. */

enum { BASE_MR = 4, BASE_NR = 8, BASE_NR64 = 4 };
typedef float base_v4 __attribute__((vector_size(16)));
typedef double base_v2 __attribute__((vector_size(16)));

static void base_tile_f32(int64_t kc, const void *apv, int64_t astep, const void *bpv,
                          int64_t ldb, void *cv, int64_t ldc, int rows, int cols,
                          const wf_gemm_epilogue *e)
{
    const float *ap = apv, *bp = bpv;
    base_v4 acc[BASE_MR][2];
    memset(acc, 0, sizeof acc);
    for (int64_t k = 0; k < kc; k++) {
        base_v4 b[2];
        memcpy(b, bp, sizeof b);
        for (int r = 0; r < BASE_MR; r++) {
            const base_v4 av = {ap[r], ap[r], ap[r], ap[r]};
            acc[r][0] += av * b[0];
            acc[r][1] += av * b[1];
        }
        ap += astep;
        bp += ldb;
    }
    const float alpha = (float)e->alpha, beta = (float)e->beta;
    for (int r = 0; r < rows; r++) {
        float v[BASE_NR], *c = (float *)cv + r * ldc;
        memcpy(v, acc[r], sizeof v);
        for (int j = 0; j < cols; j++)
            c[j] = e->mode == WF_GEMM_STORE_SET    ? alpha * v[j]
                   : e->mode == WF_GEMM_STORE_BETA ? alpha * v[j] + beta * c[j]
                                                   : alpha * v[j] + c[j];
    }
}

static void base_tile_f64(int64_t kc, const void *apv, int64_t astep, const void *bpv,
                          int64_t ldb, void *cv, int64_t ldc, int rows, int cols,
                          const wf_gemm_epilogue *e)
{
    const double *ap = apv, *bp = bpv;
    base_v2 acc[BASE_MR][2];
    memset(acc, 0, sizeof acc);
    for (int64_t k = 0; k < kc; k++) {
        base_v2 b[2];
        memcpy(b, bp, sizeof b);
        for (int r = 0; r < BASE_MR; r++) {
            const base_v2 av = {ap[r], ap[r]};
            acc[r][0] += av * b[0];
            acc[r][1] += av * b[1];
        }
        ap += astep;
        bp += ldb;
    }
    for (int r = 0; r < rows; r++) {
        double v[BASE_NR64], *c = (double *)cv + r * ldc;
        memcpy(v, acc[r], sizeof v);
        for (int j = 0; j < cols; j++)
            c[j] = e->mode == WF_GEMM_STORE_SET    ? e->alpha * v[j]
                   : e->mode == WF_GEMM_STORE_BETA ? e->alpha * v[j] + e->beta * c[j]
                                                   : e->alpha * v[j] + c[j];
    }
}

static const wf_gemm_kernels base_kernels = {
    .f32 = {.mr = BASE_MR, .nr = BASE_NR, .tile = base_tile_f32},
    .f64 = {.mr = BASE_MR, .nr = BASE_NR64, .tile = base_tile_f64}};

static const wf_gemm_kernels *kernels(int isa)
{
#if GEMM_HAVE_X86
    if (isa == WF_GEMM_ISA_AVX2)
        return &wf__gemm_kernels_avx2;
    if (isa == WF_GEMM_ISA_AVX512)
        return &wf__gemm_kernels_avx512;
    if (isa == WF_GEMM_ISA_AVX512_BF16 || isa == WF_GEMM_ISA_AMX_BF16)
        return &wf__gemm_kernels_avx512_bf16; /* AMX: bfloat16 blocks in gemm_amx.c */
#else
    (void)isa;
#endif
    return &base_kernels;
}

/* ---------------------------------------------------------------- packing
 * Plain loops for any layout; the variants' transposing copies take the
 * common ones (gemm.h). Element size `es` is 4 (float32) or 8 (float64). */

static void copy_element(char *dst, const char *src, size_t es)
{
    if (es == 8)
        memcpy(dst, src, 8);
    else
        memcpy(dst, src, 4);
}

/* A micro-panel of `width` lanes: dst[k * width + i] = src[i * lane_step +
 * k * k_step] for i < n, zero lanes after (n <= width). A's panels walk its
 * rows (lane_step = rs, k_step = cs), B's its columns (cs, rs). */
static void pack_panel(size_t es, int n, int width, int64_t kc, const char *src,
                       int64_t lane_step, int64_t k_step, char *dst)
{
    for (int64_t k = 0; k < kc; k++, dst += width * (int64_t)es) {
        const char *sk = src + k * k_step * (int64_t)es;
        if (lane_step == 1) {
            memcpy(dst, sk, (size_t)n * es);
        } else {
            for (int i = 0; i < n; i++)
                copy_element(dst + i * (int64_t)es, sk + i * lane_step * (int64_t)es, es);
        }
        memset(dst + (size_t)n * es, 0, (size_t)(width - n) * es);
    }
}

/* A micro-panel: dst[k * mr + i] = A[i][k] (rows <= mr; zero rows below). */
static void pack_a_loops(size_t es, int rows, int mr, int64_t kc, const char *a, int64_t rs,
                         int64_t cs, char *dst)
{
    pack_panel(es, rows, mr, kc, a, rs, cs, dst);
}

/* B micro-panel: dst[k * nr + j] = B[k][j] (cols <= nr; zero columns right). */
static void pack_b_loops(size_t es, int cols, int nr, int64_t kc, const char *b, int64_t rs,
                         int64_t cs, char *dst)
{
    pack_panel(es, cols, nr, kc, b, cs, rs, dst);
}

/* One row of a B micro-panel, `bytes` long: a full panel's row is 32, 64
 * or 128 bytes in every variant, copied by fixed-size copies the compiler
 * turns into a few vector moves (a call of memcpy and memset for every row
 * of every panel was 8% of the embedding server's CPU time); a last narrow
 * panel's row is zero-padded. */
static void copy_panel_row(char *dst, const char *src, size_t bytes, size_t full)
{
    if (bytes == full && full == 32)
        memcpy(dst, src, 32);
    else if (bytes == full && full == 64)
        memcpy(dst, src, 64);
    else if (bytes == full && full == 128)
        memcpy(dst, src, 128);
    else {
        memcpy(dst, src, bytes);
        memset(dst + bytes, 0, full - bytes);
    }
}

/* A strip of B micro-panels from B rows with contiguous columns (`cols` in
 * all), row by row: each row of the strip is one contiguous run, fetched a
 * few rows ahead (rows far apart defeat the hardware prefetcher). */
static void pack_b_rows(size_t es, int64_t cols, int nr, int64_t kc, const char *b, int64_t rs,
                        char *dst)
{
    const int64_t panels = ceil_div(cols, nr);
    const size_t row_bytes = (size_t)cols * es;
    for (int64_t k = 0; k < kc; k++) {
        const char *bk = b + k * rs * (int64_t)es;
        if (k + 4 < kc)
            for (size_t off = 0; off < row_bytes; off += 64)
                __builtin_prefetch(bk + 4 * rs * (int64_t)es + off);
        for (int64_t p = 0; p < panels; p++) {
            char *d = dst + (size_t)((p * kc + k) * nr) * es;
            const int64_t n = min64(nr, cols - p * nr);
            copy_panel_row(d, bk + (size_t)(p * nr) * es, (size_t)n * es, (size_t)nr * es);
        }
    }
}

/* bfloat16 pairs: dst[(t * width + i) * 2 + h] = X[i][2t + h] for A (X[i][k]
 * = A[i][k]) and for B (X[j][k] = B[k][j]); X's element (i, k) is at
 * x[i * si + k * sk]. Zero beyond `count` or kc. */
static void pack_pairs_loops(int count, int width, int64_t kc, const uint16_t *x, int64_t si,
                             int64_t sk, uint16_t *dst)
{
    for (int64_t t = 0; t < (kc + 1) / 2; t++, dst += 2 * width) {
        const int64_t k = 2 * t;
        const bool second = k + 1 < kc;
        int i = 0;
        for (; i < count; i++) {
            const uint16_t *xi = x + i * si + k * sk;
            dst[2 * i] = xi[0];
            dst[2 * i + 1] = second ? xi[sk] : 0;
        }
        for (; i < width; i++)
            dst[2 * i] = dst[2 * i + 1] = 0;
    }
}

/* When k is contiguous and rows are an even number of elements apart, each
 * pair is one 32-bit element and the transposing copy moves them (an odd
 * last k is padded by the loops). */
static void pack_pairs(const wf_gemm_type_kernels *tk, int count, int width, int64_t kc,
                       const uint16_t *x, int64_t si, int64_t sk, uint16_t *dst)
{
    if (sk == 1 && si % 2 == 0 && tk->transpose != NULL) {
        tk->transpose(count, width, kc / 2, x, si / 2, dst);
        if (kc % 2)
            pack_pairs_loops(count, width, 1, x + kc - 1, si, sk, dst + kc / 2 * 2 * width);
    } else {
        pack_pairs_loops(count, width, kc, x, si, sk, dst);
    }
}

/* ---------------------------------------------------------------- driver */

void wf__gemm_args_init(wf_gemm_args *g, wf_dtype dtype, int64_t m, int64_t n, int64_t k,
                        const void *a, int64_t rsa, int64_t csa, const void *b, int64_t rsb,
                        int64_t csb, void *c, int64_t ldc, double alpha, double beta)
{
    *g = (wf_gemm_args){.dtype = dtype, .b_stored = dtype, .m = m, .n = n, .k = k, .a = a,
                        .rsa = rsa, .csa = csa, .b = b, .rsb = rsb, .csb = csb, .c = c,
                        .ldc = ldc, .alpha = alpha, .beta = beta, .isa = wf__gemm_isa()};
}

void wf__gemm_scratch_free(wf_gemm_scratch *s)
{
    if (s->buffer != NULL)
        wf__buffer_release(s->buffer);
    *s = (wf_gemm_scratch){0};
}

static bool scratch_reserve(wf_gemm_scratch *s, size_t bytes)
{
    if (s->bytes >= bytes)
        return true;
    wf_buffer *grown = wf__buffer_alloc(bytes);
    if (grown == NULL)
        return false;
    wf__gemm_scratch_free(s);
    *s = (wf_gemm_scratch){.buffer = grown, .data = grown->data, .bytes = bytes};
    return true;
}

/* K blocks: as equal as possible, a multiple of 8 (even, for bfloat16
 * pairs), at most GEMM_KC; the last block takes the rest. */
static int64_t k_block(int64_t k)
{
    const int64_t blocks = ceil_div(k, GEMM_KC);
    return min64(GEMM_KC, round_up(ceil_div(k, blocks), 8));
}

int64_t wf__gemm_k_block(int64_t k) { return k_block(k); }

static const wf_gemm_type_kernels *type_kernels(const wf_gemm_args *g)
{
    const wf_gemm_kernels *kern = kernels(g->isa);
    return g->dtype == WF_DTYPE_F64 ? &kern->f64 : g->dtype == WF_DTYPE_BF16 ? &kern->bf16
                                                                              : &kern->f32;
}

bool wf__gemm_reads_half_b(int isa, wf_dtype half, int64_t m, int64_t rsb, int64_t csb)
{
    const wf_gemm_type_kernels *tk = &kernels(isa)->f32;
    if ((half != WF_DTYPE_F16 && half != WF_DTYPE_BF16) || m < 1 || m > tk->direct_rows ||
        !(csb == 1 ? tk->direct_half != NULL : rsb == 1 && tk->direct_t_half != NULL))
        return false;
#if GEMM_HAVE_X86
    if (half == WF_DTYPE_F16 && isa == WF_GEMM_ISA_AVX2)
        return wf__cpu_has_f16c(); /* AVX-512F converts halves itself */
#endif
    return true;
}

/* Use the direct (matrix-vector) path for a block of `rows` rows? */
static bool use_direct(const wf_gemm_args *g, const wf_gemm_type_kernels *tk, int64_t rows)
{
    return g->b_stored == g->dtype && tk->direct != NULL && rows <= tk->direct_rows &&
           g->csb == 1;
}

/* Use the direct path through B's transpose (its columns contiguous)? */
static bool use_direct_t(const wf_gemm_args *g, const wf_gemm_type_kernels *tk, int64_t rows)
{
    return g->b_stored == g->dtype && tk->direct_t != NULL && rows <= tk->direct_rows &&
           g->rsb == 1 && !use_direct(g, tk, rows);
}

/* A complex product (gemm.h's complex64 B) of a few rows, read in place? */
static bool use_complex_direct(const wf_gemm_args *g, int64_t rows)
{
    return g->b_stored == WF_DTYPE_C64 && rows <= WF_GEMM_COMPLEX_DIRECT_ROWS;
}

/* Do rows `row_bytes` apart fall in the same L1 set? They do when 4 KB (an
 * L1 way: 32 or 48 KB, 8 or 12 ways) divides the stride; a tile reading 14
 * such rows where they lie then has them evict each other, so A is packed
 * instead: measured on one thread, complex64 2048^3 +4% and float32 2048^3
 * +7% (rows 16 and 8 KB apart), 1024^3 +1-3%; 256^3 (rows 2 KB apart, two
 * sets) keeps reading rows in place, 4% faster than packing. */
static bool rows_share_l1_set(int64_t row_bytes)
{
    return row_bytes % 4096 == 0;
}

/* Read B where it lies rather than pack it? When its rows are contiguous
 * and at most a few A panels (the kernels' b_in_place_rows) would reuse a
 * packed copy; only two when B's rows share L1 sets, since a tile reads
 * 16 or 32 floats of each of kc rows, which then evict each other before
 * the next tile reads them. One thread, Zen 3, float32, weft / NumPy:
 * 20 x 1024 @ 1024^2 0.65 in place, 0.87 packed (1.14 in place at 1000
 * columns); 12 x 4096 @ 4096^2 0.83 in place, 0.74 packed. */
static bool b_in_place(const wf_gemm_args *g, const wf_gemm_type_kernels *tk, int64_t rows)
{
    if (g->b_stored != g->dtype || g->csb != 1)
        return false;
    const bool share = rows_share_l1_set(g->rsb * (int64_t)wf_dtype_size(g->dtype));
    return rows <= (share ? min64(tk->b_in_place_rows, 2 * tk->mr) : tk->b_in_place_rows);
}

/* Blocks of `size` in `splits` parts, rounded up to `align`. */
static int64_t split_block(int64_t size, int64_t splits, int64_t align)
{
    return min64(size, round_up(ceil_div(size, splits), align));
}

/* A product on a one-thread pool: nothing to balance, so one block of all
 * of C (blocks each pack their own A and B panels; block_plain packs A's
 * panels once per K block for all its strips of B; the matrix-vector
 * kernels read whole rows of B in one run). Complex, CPU time, old and new
 * alternated in one process: 512^3 +3.5%, 1024^3 +1.5%, 1 x 1024 @ 1024^2
 * +1.8%, 256^3 within noise (-0.6%); then (Zen 3) A packed once for all
 * strips rather than once a strip, 2048^3 +1.6-2.4%, 1024^3 -2.4..+2%.
 * float32 (Zen 3, load 6, one block against four): 256^3 +7%, 512^3 +10%,
 * 1024^3 +6%, 2048^3 +11%. */
static bool single_block(void) { return wf__pool_size() == 1; }

void wf__gemm_blocks(const wf_gemm_args *g, int64_t batches, int64_t *mblock, int64_t *nblock)
{
    const wf_gemm_type_kernels *tk = type_kernels(g);
    const int64_t mr = tk->mr, nr = tk->nr;
    const int64_t per_thread =
        g->b_stored == WF_DTYPE_C64 ? COMPLEX_BLOCKS_PER_THREAD : BLOCKS_PER_THREAD;
    const int64_t blocks = single_block() ? 1 : per_thread * (int64_t)wf__pool_size();
    const int64_t target = max64(1, ceil_div(blocks, max64(batches, 1)));
    if (use_direct(g, tk, g->m) || use_direct_t(g, tk, g->m) || use_complex_direct(g, g->m)) {
        /* Matrix-vector (memory-bound): columns only, 256 at least (long
         * runs of B rows; 1024 for complex B, whose kernel sweeps several
         * rows of B at once), and enough work each. Complex B: one block a
         * thread, each reading its rows of B in one long run (Zen 3, two
         * threads, wall time alternated in one process under load:
         * 1 x 2048 @ 2048^2 +20-50% over four blocks a thread, 1 x 4096 @
         * 4096^2 within the noise, +0-40%). */
        *mblock = g->m;
        const int64_t by_work = ceil_div(GEMM_MIN_BLOCK_FLOPS / 8, 2 * g->m * g->k);
        const bool complex = g->b_stored == WF_DTYPE_C64;
        const int64_t least = complex ? 1024 : 256;
        const int64_t parts =
            complex ? max64(1, ceil_div(wf__pool_size(), max64(batches, 1))) : target;
        *nblock = min64(g->n, round_up(max64(max64(least, by_work), ceil_div(g->n, parts)), 64));
        return;
    }
    if (single_block()) {
        *mblock = g->m;
        *nblock = g->n;
        return;
    }
    /* Split rows and columns (doubling the split of whichever blocks are
     * larger for their floor) until there are `target` blocks. Rows stay
     * at 252 or more, so a packed B strip serves many rows; failing that,
     * rows go down to b_in_place_rows, where B is read in place rather
     * than packed, and on to 2 tiles. Columns: strips of at most
     * strip_columns, at least 64. Never below GEMM_MIN_BLOCK_FLOPS of work a block. */
    int64_t rs = 1, cs = ceil_div(g->n, strip_columns(g));
    const int64_t row_floor[2] = {252, 2 * mr};
    for (int phase = 0; phase < 2; phase++) {
        const int64_t max_rs = max64(1, g->m / row_floor[phase]), max_cs = max64(1, g->n / 64);
        if (phase == 1 && rs * cs < target && g->m > tk->b_in_place_rows &&
            tk->b_in_place_rows > 0 && g->csb == 1)
            rs = max64(rs, ceil_div(g->m, tk->b_in_place_rows)); /* jump to B in place */
        while (rs * cs < target) {
            const int64_t mb = split_block(g->m, rs, mr), nb = split_block(g->n, cs, nr);
            const bool rows = rs < max_rs && (cs >= max_cs || mb * 128 >= nb * row_floor[phase]);
            const int64_t rs2 = rows ? min64(2 * rs, max_rs) : rs;
            const int64_t cs2 = rows ? cs : min64(2 * cs, max_cs);
            if ((rs2 == rs && cs2 == cs) ||
                2 * split_block(g->m, rs2, mr) * split_block(g->n, cs2, nr) * g->k <
                    GEMM_MIN_BLOCK_FLOPS)
                break;
            rs = rs2;
            cs = cs2;
        }
    }
    *mblock = split_block(g->m, rs, mr);
    *nblock = split_block(g->n, cs, nr);
}

static wf_gemm_epilogue first_epilogue(const wf_gemm_args *g, int64_t k0)
{
    return (wf_gemm_epilogue){.mode = k0 > 0        ? WF_GEMM_STORE_ADD
                                      : g->beta == 0 ? WF_GEMM_STORE_SET
                                                     : WF_GEMM_STORE_BETA,
                              .alpha = g->alpha,
                              .beta = g->beta};
}

/* Element `i` (may be negative) of an array of `es`-byte elements. */
static char *at(const void *base, int64_t i, size_t es)
{
    return (char *)base + i * (int64_t)es;
}

/* Packs columns [j0, j1) of B's K block bk (kc rows) into micro-panels;
 * `in_place`: only a last narrower panel, at slot 0. */
static void pack_b_strip(const wf_gemm_args *g, const wf_gemm_type_kernels *tk, size_t es,
                         bool in_place, int64_t kc, const char *bk, int64_t j0, int64_t j1,
                         char *bpack)
{
    const int64_t nr = tk->nr;
    if (g->csb == 1 && !in_place) {
        pack_b_rows(es, j1 - j0, (int)nr, kc, at(bk, j0, es), g->rsb, bpack);
        return;
    }
    for (int64_t p = 0; p < ceil_div(j1 - j0, nr); p++) {
        const int64_t j = j0 + p * nr, cols = min64(nr, j1 - j);
        const char *src = at(bk, j * g->csb, es);
        char *dst = at(bpack, in_place ? 0 : p * nr * kc, es);
        if (in_place && cols == nr)
            continue; /* read where it lies */
        if (g->csb != 1 && g->rsb == 1 && tk->transpose != NULL)
            tk->transpose((int)cols, (int)nr, kc, src, g->csb, dst);
        else if (g->csb == 1 && tk->copy_lanes != NULL)
            tk->copy_lanes((int)cols, (int)nr, kc, src, g->rsb, dst);
        else
            pack_b_loops(es, (int)cols, (int)nr, kc, src, g->rsb, g->csb, dst);
    }
}

/* A micro-panel of `rows` rows from A at ai (kc columns). */
static void pack_a_panel(const wf_gemm_args *g, const wf_gemm_type_kernels *tk, size_t es,
                         int rows, int64_t kc, const char *ai, char *apack)
{
    if (g->csa == 1 && tk->transpose != NULL)
        tk->transpose(rows, tk->mr, kc, ai, g->rsa, apack);
    else if (g->rsa == 1 && tk->copy_lanes != NULL)
        tk->copy_lanes(rows, tk->mr, kc, ai, g->csa, apack);
    else
        pack_a_loops(es, rows, tk->mr, kc, ai, g->rsa, g->csa, apack);
}

/* Rows i0..i1 of a float32 product whose B is stored as halves (b_stored;
 * a few rows, see wf__gemm_reads_half_b): through direct_t_half, or K block
 * by K block through direct_half, as block_plain's direct paths. */
static void block_half_b(const wf_gemm_args *g, const wf_gemm_type_kernels *tk, int64_t i0,
                         int64_t i1, int64_t j0, int64_t j1)
{
    const float *a = (const float *)g->a + i0 * g->rsa;
    const uint16_t *b = g->b;
    float *c = (float *)g->c + i0 * g->ldc + j0;
    const int64_t kcb = k_block(g->k);
    const int rows = (int)(i1 - i0);
    if (g->csb != 1) { /* rows contiguous: B's transpose */
        const wf_gemm_epilogue first = first_epilogue(g, 0);
        tk->direct_t_half(g->k, kcb, a, g->rsa, g->csa, b + j0 * g->csb, g->csb, g->b_stored, c,
                          g->ldc, rows, j1 - j0, &first);
        return;
    }
    for (int64_t k0 = 0; k0 < g->k; k0 += kcb) {
        const wf_gemm_epilogue e = first_epilogue(g, k0);
        tk->direct_half(min64(kcb, g->k - k0), a + k0 * g->csa, g->rsa, g->csa,
                        b + k0 * g->rsb + j0, g->rsb, g->b_stored, c, g->ldc, rows, j1 - j0, &e);
    }
}

/* A block's rows in tiles: as few tiles as mr allows, rows shared evenly
 * (16 rows: 8 + 8, not 14 + 2; 32 rows in tiles of 6: 6 + 6 + 5 + 5 + 5 +
 * 5, not five 6s and a 2), so no tile is left with a few rows that cannot
 * keep the FMA units busy (the tiles compute only the rows they are given;
 * each element's sums are the same in any tile, so the split never changes
 * bits). Except the first tile, with the kernel's lead_rows: it meets each
 * B panel first, while the panel streams in from L3 or memory (a served
 * weight), and a few more rows there give the FMA units work while they
 * wait. AVX-512, 16 rows times 384 x 1536 weights coming from L3, one Intel
 * core: 12 + 4 runs at 157 GFLOP/s, 8 + 8 at 148 (4 + 12 at 124). Tile t
 * starts at tile_start(t); tile `count` is the end. */
typedef struct row_tiles {
    int64_t i0, lead, base, extra, count; /* tiles after the first: base (+ 1 for `extra`) rows */
} row_tiles;

static row_tiles split_rows(int64_t i0, int64_t i1, int64_t mr, int64_t lead_rows)
{
    const int64_t rows = i1 - i0, count = ceil_div(rows, mr);
    if (count <= 0)
        return (row_tiles){.i0 = i0};
    const int64_t lead = min64(rows, max64(ceil_div(rows, count), lead_rows));
    if (count == 1)
        return (row_tiles){.i0 = i0, .lead = lead, .count = 1};
    const int64_t rest = rows - lead;
    return (row_tiles){.i0 = i0, .lead = lead, .base = rest / (count - 1),
                       .extra = rest % (count - 1), .count = count};
}

static int64_t tile_start(const row_tiles *rt, int64_t t)
{
    if (t == 0)
        return rt->i0;
    return rt->i0 + rt->lead + (t - 1) * rt->base + min64(t - 1, rt->extra);
}

/* Rows of A whose panels are packed together (a group): every B micro-panel
 * meets each panel of the group in turn, so the group's panels must stay in
 * L2: at most this many rows ... */
enum { GEMM_A_ROWS = 1024 };
/* ... and at most this many bytes of them, half of a 512 KB L2 (Zen 3's). */
enum { GEMM_A_GROUP_BYTES = 256 * 1024 };
/* Rows whose A panels are kept for a whole K block (every group of them), so
 * that a packed B strip serves all of them: B is packed once per K block
 * and strip, not once per group (float32 2048^3 on one thread spent 9% of
 * its time packing B, 8 times over, before). Larger blocks take their rows
 * this many at a time, which bounds the scratch (2 MB of float32 panels). */
enum { GEMM_A_KEEP_ROWS = 2048 };

/* How a tile reads its A panel: the kernel, where the panel starts and the
 * step between its k. */
typedef struct a_source {
    wf_gemm_tile_fn tile;
    const void *ap;
    int64_t astep;
} a_source;

/* The A panel of the tile of `rows` rows at row i over K block k0 (kc
 * columns): A stored transposed is already a panel (mr values per k, row
 * stride apart), read where it lies when full; so are A's rows (contiguous)
 * by kernels with tile_a_rows, unless they share an L1 set; else the panel
 * is at `slot`, packed there when `pack`. */
static a_source a_panel(const wf_gemm_args *g, const wf_gemm_type_kernels *tk, size_t es,
                        int rows, int64_t i, int64_t k0, int64_t kc, char *slot, bool pack)
{
    const char *ai = at(g->a, i * g->rsa + k0 * g->csa, es);
    if (g->rsa == 1 && rows == tk->mr)
        return (a_source){tk->tile, ai, g->csa};
    if (g->csa == 1 && tk->tile_a_rows != NULL && !rows_share_l1_set(g->rsa * (int64_t)es))
        return (a_source){tk->tile_a_rows, ai, g->rsa};
    if (pack)
        pack_a_panel(g, tk, es, rows, kc, ai, slot);
    return (a_source){tk->tile, slot, tk->mr};
}

/* One K block (k0, kc rows of B) of the product's steps that share a B strip. */
typedef struct k_block_pass {
    const wf_gemm_args *g;
    const wf_gemm_type_kernels *tk;
    size_t es;
    bool in_place;  /* B read where it lies (only a last narrower panel packed) */
    bool tiles_outer; /* each tile times the whole strip (see group_times_strip) */
    int64_t k0, kc;
    row_tiles tiles;
    char *bpack, *apack;
} k_block_pass;

/* Columns [js, je) of B's K block packed into micro-panels at bpack (in
 * place: only a last narrower panel, at slot 0). */
static void pack_strip(const k_block_pass *kp, int64_t js, int64_t je)
{
    const wf_gemm_args *g = kp->g;
    if (g->b_stored == WF_DTYPE_C64)
        wf__gemm_pack_b_complex(g, kp->k0, kp->kc, js, je, (int)kp->tk->nr, (float *)kp->bpack);
    else
        pack_b_strip(g, kp->tk, kp->es, kp->in_place, kp->kc, at(g->b, kp->k0 * g->rsb, kp->es),
                     js, je, kp->bpack);
}

/* Tiles [t0, t1) (a group, their A panels in the slots from `slot` on,
 * packed first when `pack_a`) times the packed strip of columns [js, je).
 * Each B micro-panel is read by every tile in turn, so it stays in L1
 * while A's panels come from L2; or, with kp->tiles_outer, each tile's A
 * panel stays in L1 while it meets every B micro-panel of the strip, which
 * then comes from L2 (see block_plain). */
static void group_times_strip(const k_block_pass *kp, int64_t t0, int64_t t1, char *slot,
                              bool pack_a, int64_t js, int64_t je)
{
    const wf_gemm_args *g = kp->g;
    const wf_gemm_type_kernels *tk = kp->tk;
    const size_t es = kp->es;
    const int64_t mr = tk->mr, nr = tk->nr, kc = kp->kc;
    const char *bk = at(g->b, kp->k0 * g->rsb, es);
    const wf_gemm_epilogue e = first_epilogue(g, kp->k0);
    if (pack_a)
        for (int64_t t = t0; t < t1; t++) {
            const int64_t i = tile_start(&kp->tiles, t);
            a_panel(g, tk, es, (int)(tile_start(&kp->tiles, t + 1) - i), i, kp->k0, kc,
                    at(slot, (t - t0) * mr * kc, es), true);
        }
    const int64_t panels = ceil_div(je - js, nr);
    const int64_t outer = kp->tiles_outer ? t1 - t0 : panels;
    const int64_t inner = kp->tiles_outer ? panels : t1 - t0;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            const int64_t p = kp->tiles_outer ? in : o, t = t0 + (kp->tiles_outer ? o : in);
            const int64_t j = js + p * nr, cols = min64(nr, je - j);
            const bool here = kp->in_place && cols == nr;
            const char *bp =
                here ? at(bk, j, es) : at(kp->bpack, kp->in_place ? 0 : p * nr * kc, es);
            const int64_t i = tile_start(&kp->tiles, t);
            const int rows = (int)(tile_start(&kp->tiles, t + 1) - i);
            const a_source a = a_panel(g, tk, es, rows, i, kp->k0, kc,
                                       at(slot, (t - t0) * mr * kc, es), false);
            a.tile(kc, a.ap, a.astep, bp, here ? g->rsb : nr, at(g->c, i * g->ldc + j, es),
                   g->ldc, rows, (int)cols, &e);
        }
}

/* ---------------------------------------------------------------- packed weights */

/* B's packed copy: every K block (k0 = b * kcb, all full but the last) in
 * turn, each as pack_b_strip packs columns [0, n): panel p of block b at
 * element (k0 * panels + p * kc) * nr. What it was packed from is kept to
 * check each later product against. */
typedef struct packed_b {
    wf_buffer_derived base; /* first member */
    wf_buffer *storage;
    size_t bytes;
    int isa;
    wf_dtype dtype, b_stored;
    int64_t offset, rsb, csb, k, n;
} packed_b;

static atomic_size_t packed_b_bytes;

size_t wf__gemm_packed_b_bytes(void) { return atomic_load(&packed_b_bytes); }

static void packed_b_drop(wf_buffer_derived *d)
{
    packed_b *pb = (packed_b *)d;
    wf__derived_copy_free(&packed_b_bytes, pb, pb->storage, pb->bytes);
}

static packed_b packed_b_key(const wf_gemm_args *g, const wf_buffer *buffer)
{
    return (packed_b){.isa = g->isa, .dtype = g->dtype, .b_stored = g->b_stored,
                      .offset = (const char *)g->b - (const char *)buffer->data, .rsb = g->rsb,
                      .csb = g->csb, .k = g->k, .n = g->n};
}

static bool packed_b_matches(const packed_b *x, const packed_b *y)
{
    return x->isa == y->isa && x->dtype == y->dtype && x->b_stored == y->b_stored &&
           x->offset == y->offset && x->rsb == y->rsb && x->csb == y->csb && x->k == y->k &&
           x->n == y->n;
}

/* A nonzero fingerprint of the key, for the buffer's hint. */
static uint64_t packed_b_fingerprint(const packed_b *key)
{
    const int64_t fields[] = {key->isa, key->dtype, key->b_stored, key->offset,
                              key->rsb, key->csb, key->k, key->n};
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        h = (h ^ (uint64_t)fields[i]) * 0x100000001b3u;
    return h | 1;
}

/* Packs all of g's B into a new packed_b (NULL when it cannot be
 * allocated or afforded; no error is left recorded). */
static packed_b *pack_whole_b(const wf_gemm_args *g, const packed_b *key)
{
    const size_t bytes = wf__gemm_packed_b_size(g);
    wf_buffer *storage;
    packed_b *pb = wf__derived_copy_alloc(&packed_b_bytes, WF_GEMM_PACKED_B_BUDGET, sizeof *pb,
                                          bytes, &storage);
    if (pb == NULL)
        return NULL;
    *pb = *key;
    pb->base.drop = packed_b_drop;
    pb->storage = storage;
    pb->bytes = bytes;
    wf__gemm_pack_b(g, storage->data);
    return pb;
}

/* pack_whole_b as wf__buffer_derive_at_second_use's make. */
struct pack_request {
    const wf_gemm_args *g;
    const packed_b *key;
};

static wf_buffer_derived *pack_requested(void *ctx)
{
    const struct pack_request *r = ctx;
    packed_b *made = pack_whole_b(r->g, r->key);
    return made ? &made->base : NULL;
}

bool wf__gemm_can_pack_b(const wf_gemm_args *g)
{
    const bool plain = (g->dtype == WF_DTYPE_F32 || g->dtype == WF_DTYPE_F64) &&
                       g->b_stored == g->dtype;
    const bool complex = g->dtype == WF_DTYPE_F32 && g->b_stored == WF_DTYPE_C64;
    const bool amx = g->b_stored == WF_DTYPE_BF16 && on_amx(g);
    return ((plain || complex) && type_kernels(g)->mr > 0) || amx;
}

size_t wf__gemm_packed_b_size(const wf_gemm_args *g)
{
    if (on_amx(g))
        return wf__gemm_amx_packed_b_bytes(g, k_block(g->k));
    const int64_t nr = type_kernels(g)->nr;
    return (size_t)(ceil_div(g->n, nr) * nr * g->k) * wf_dtype_size(g->dtype);
}

bool wf__gemm_reads_packed_b(const wf_gemm_args *g, int64_t *nr)
{
    /* packable, plain (float32 / float64: AMX and complex products pack
     * otherwise), and not on a direct path */
    const wf_gemm_type_kernels *tk = type_kernels(g);
    if (!wf__gemm_can_pack_b(g) || g->b_stored != g->dtype || on_amx(g) ||
        use_direct(g, tk, g->m) || use_direct_t(g, tk, g->m))
        return false;
    *nr = tk->nr;
    return true;
}

void wf__gemm_pack_b(const wf_gemm_args *g, void *dst)
{
    if (on_amx(g)) {
        wf__gemm_amx_pack_b(g, k_block(g->k), dst);
        return;
    }
    const wf_gemm_type_kernels *tk = type_kernels(g);
    const size_t es = wf_dtype_size(g->dtype);
    const int64_t nr = tk->nr, panels = ceil_div(g->n, nr), kcb = k_block(g->k);
    for (int64_t k0 = 0; k0 < g->k; k0 += kcb) {
        const int64_t kc = min64(kcb, g->k - k0);
        char *block = at(dst, k0 * panels * nr, es);
        if (g->b_stored == WF_DTYPE_C64)
            wf__gemm_pack_b_complex(g, k0, kc, 0, g->n, (int)nr, (float *)block);
        else
            pack_b_strip(g, tk, es, false, kc, at(g->b, k0 * g->rsb, es), 0, g->n, block);
    }
}

void wf__gemm_use_packed_b(wf_gemm_args *g, wf_buffer *buffer, int64_t mblock)
{
    g->b_packed = NULL;
    if (!wf__gemm_can_pack_b(g) || wf__buffer_is_external(buffer))
        return;
    const wf_gemm_type_kernels *tk = type_kernels(g);
    const bool amx = g->dtype == WF_DTYPE_BF16; /* AMX reads packed panels at any row count */
    if (!amx && (use_direct(g, tk, mblock) || use_direct_t(g, tk, mblock) ||
                 use_complex_direct(g, mblock)))
        return;
    /* Packed once before with this key? Then it is worth keeping, unless
     * it was refused before (budget, memory limit, allocation): that is
     * not tried again for this buffer and key, so that such products do
     * not take the allocator's lock to ask each time. */
    const packed_b key = packed_b_key(g, buffer);
    struct pack_request request = {g, &key};
    const packed_b *have = (const packed_b *)wf__buffer_derive_at_second_use(
        buffer, packed_b_fingerprint(&key), pack_requested, &request);
    if (have != NULL && have->base.drop == packed_b_drop && packed_b_matches(have, &key))
        g->b_packed = have->storage->data;
}

/* float32 and float64: es is the element size. */
static wf_status block_plain(const wf_gemm_args *g, const wf_gemm_type_kernels *tk, size_t es,
                             int64_t i0, int64_t i1, int64_t j0, int64_t j1, wf_gemm_scratch *s)
{
    const char *a = g->a, *b = g->b;
    char *c = g->c;
    const int64_t kcb = k_block(g->k), mr = tk->mr, nr = tk->nr;
    if (use_direct_t(g, tk, i1 - i0)) {
        const wf_gemm_epilogue first = first_epilogue(g, 0);
        tk->direct_t(g->k, kcb, at(a, i0 * g->rsa, es), g->rsa, g->csa, at(b, j0 * g->csb, es),
                     g->csb, at(c, i0 * g->ldc + j0, es), g->ldc, (int)(i1 - i0), j1 - j0, &first);
        return WF_OK;
    }
    if (use_direct(g, tk, i1 - i0)) {
        for (int64_t k0 = 0; k0 < g->k; k0 += kcb) {
            const wf_gemm_epilogue e = first_epilogue(g, k0);
            tk->direct(min64(kcb, g->k - k0), at(a, i0 * g->rsa + k0 * g->csa, es), g->rsa,
                       g->csa, at(b, k0 * g->rsb + j0, es), g->rsb, at(c, i0 * g->ldc + j0, es),
                       g->ldc, (int)(i1 - i0), j1 - j0, &e);
        }
        return WF_OK;
    }
    const bool packed = g->b_packed != NULL; /* j0 is a multiple of nr, as every block's */
    const bool in_place = !packed && b_in_place(g, tk, i1 - i0);
    const row_tiles tiles = split_rows(i0, i1, mr, tk->lead_rows);
    const int64_t fit = min64(GEMM_A_ROWS, GEMM_A_GROUP_BYTES / (kcb * (int64_t)es));
    const int64_t group = max64(1, fit / mr); /* tiles */
    const int64_t keep = group * max64(1, GEMM_A_KEEP_ROWS / (group * mr));
    const int64_t a_slots = min64(keep, tiles.count);
    const int64_t strip = in_place ? j1 - j0 : strip_columns(g);
    /* In place, only a last narrower panel is packed (at the panel's slot 0). */
    const int64_t belems =
        packed ? 0 : (in_place ? 1 : ceil_div(min64(j1 - j0, strip), nr)) * nr * kcb;
    if (!scratch_reserve(s, (size_t)(belems + a_slots * mr * kcb) * es + 64))
        return WF_ERR_OUT_OF_MEMORY;
    /* Tiles outer where the strip's B (a K block of it) fits in a quarter
     * of L2: B then stays there for every tile, and each A panel stays in
     * L1. conv1d's implicit GEMM (12000 x 240 x 384) on one Intel core:
     * 128-133 -> 134-142 GFLOP/s, alternated runs. Larger strips (K blocks
     * of 512 x 512 columns) keep the panel-outer order. */
    const int64_t strip_bytes = round_up(min64(j1 - j0, strip), nr) * kcb * (int64_t)es;
    const bool tiles_outer = strip_bytes <= wf__cpu_l2_cache_bytes() / 4;
    k_block_pass kp = {.g = g, .tk = tk, .es = es, .in_place = in_place,
                       .tiles_outer = tiles_outer, .tiles = tiles};
    kp.apack = at(s->data, belems, es);
    for (int64_t tk0 = 0; tk0 < tiles.count; tk0 += keep) {
        const int64_t tk1 = min64(tiles.count, tk0 + keep);
        for (kp.k0 = 0; kp.k0 < g->k; kp.k0 += kcb) {
            kp.kc = min64(kcb, g->k - kp.k0);
            for (int64_t js = j0; js < j1; js += strip) {
                const int64_t je = min64(j1, js + strip);
                if (packed) { /* pack_whole_b's layout */
                    kp.bpack = at(g->b_packed,
                                  kp.k0 * ceil_div(g->n, nr) * nr + js / nr * nr * kp.kc, es);
                } else {
                    kp.bpack = s->data;
                    pack_strip(&kp, js, je);
                }
                for (int64_t tg = tk0; tg < tk1; tg += group)
                    group_times_strip(&kp, tg, min64(tk1, tg + group),
                                      at(kp.apack, (tg - tk0) * mr * kp.kc, es), js == j0, js,
                                      je);
            }
        }
    }
    return WF_OK;
}

static wf_status block_bf16(const wf_gemm_args *g, const wf_gemm_type_kernels *tk, int64_t i0,
                            int64_t i1, int64_t j0, int64_t j1, wf_gemm_scratch *s)
{
    const uint16_t *a = g->a, *b = g->b;
    float *c = g->c;
    const int64_t kcb = k_block(g->k), mr = tk->mr, nr = tk->nr;
    if (on_amx(g)) { /* every row count: the same bits */
        if (!scratch_reserve(s, wf__gemm_amx_scratch_bytes(kcb, j1 - j0)))
            return WF_ERR_OUT_OF_MEMORY;
        wf__gemm_block_bf16_amx(g, kcb, i0, i1, j0, j1, s->data);
        return WF_OK;
    }
    const int64_t panels = ceil_div(j1 - j0, nr);
    const row_tiles tiles = split_rows(i0, i1, mr, tk->lead_rows);
    const bool direct = use_direct(g, tk, i1 - i0);
    if (!direct &&
        !scratch_reserve(s, (size_t)((panels * nr + mr) * kcb) * sizeof(uint16_t) + 64))
        return WF_ERR_OUT_OF_MEMORY;
    uint16_t *bpack = s->data, *apack = direct ? NULL : bpack + panels * nr * kcb;
    for (int64_t k0 = 0; k0 < g->k; k0 += kcb) {
        const int64_t kc = min64(kcb, g->k - k0), kc2 = round_up(kc, 2);
        const wf_gemm_epilogue e = first_epilogue(g, k0);
        if (direct) {
            tk->direct(kc, a + i0 * g->rsa + k0 * g->csa, g->rsa, g->csa, b + k0 * g->rsb + j0,
                       g->rsb, c + i0 * g->ldc + j0, g->ldc, (int)(i1 - i0), j1 - j0, &e);
            continue;
        }
        for (int64_t p = 0; p < panels; p++) {
            const int64_t j = j0 + p * nr;
            const uint16_t *bj = b + k0 * g->rsb + j * g->csb;
            const int cols = (int)min64(nr, j1 - j);
            if (g->csb == 1 && tk->pack_b_pairs != NULL)
                tk->pack_b_pairs(cols, (int)nr, kc, bj, g->rsb, bpack + p * nr * kc2);
            else
                pack_pairs(tk, cols, (int)nr, kc, bj, g->csb, g->rsb, bpack + p * nr * kc2);
        }
        for (int64_t t = 0; t < tiles.count; t++) {
            const int64_t i = tile_start(&tiles, t);
            const int rows = (int)(tile_start(&tiles, t + 1) - i);
            pack_pairs(tk, rows, (int)mr, kc, a + i * g->rsa + k0 * g->csa, g->rsa, g->csa,
                       apack);
            for (int64_t p = 0; p < panels; p++) {
                const int64_t j = j0 + p * nr;
                tk->tile(kc, apack, mr, bpack + p * nr * kc2, 2 * nr, c + i * g->ldc + j,
                         g->ldc, rows, (int)min64(nr, j1 - j), &e);
            }
        }
    }
    return WF_OK;
}

wf_status wf__gemm_block(const wf_gemm_args *g, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                         wf_gemm_scratch *s)
{
    const wf_gemm_type_kernels *tk = type_kernels(g);
    if (g->dtype == WF_DTYPE_BF16)
        return block_bf16(g, tk, i0, i1, j0, j1, s);
    if (use_complex_direct(g, i1 - i0)) {
        wf__gemm_complex_direct(g, i0, i1, j0, j1);
        return WF_OK;
    }
    if (g->b_stored != g->dtype && g->b_stored != WF_DTYPE_C64) {
        /* wf__gemm_reads_half_b allowed it: a few rows */
        block_half_b(g, tk, i0, i1, j0, j1);
        return WF_OK;
    }
    return block_plain(g, tk, g->dtype == WF_DTYPE_F64 ? 8 : 4, i0, i1, j0, j1, s);
}

wf_status wf__gemm_serial(const wf_gemm_args *g, wf_gemm_scratch *s)
{
    const int64_t nc = strip_columns(g);
    for (int64_t j0 = 0; j0 < g->n; j0 += nc) {
        const wf_status st = wf__gemm_block(g, 0, g->m, j0, min64(g->n, j0 + nc), s);
        if (st != WF_OK)
            return st;
    }
    return WF_OK;
}
