/*
 * weft's own matrix multiply (GEMM): float32, float64, and bfloat16 inputs
 * with float32 accumulation. Internal.
 *
 * Technique (GotoBLAS/BLIS): C = alpha * A B + beta * C is computed block by
 * block. K is cut into blocks of at most 512; for each K block a strip of B
 * (K block x up to 512 columns) is packed into micro-panels NR columns wide,
 * and for each MR rows of A a micro-panel (MR x K block) is packed (the
 * AVX2 and AVX-512 float32 tiles read A's rows where they lie instead); a
 * register-blocked micro-kernel then computes MR x NR tiles of
 * C, each B micro-panel of the strip in turn with every tile of the block's
 * rows (the panel stays in L1; a block's rows are shared evenly between its
 * tiles, but for a first AVX-512 float32 tile of at least 12 rows, which
 * meets each panel while it streams in; the AVX2 and AVX-512 tiles compute
 * only the rows given, and prefetch a packed panel ahead). Edges
 * are computed on zero-padded panels and stored with masks, so no scalar
 * tail loops.
 * Operands may have any element strides (transposed operands are packed
 * like any other). When few rows share a strip and B's rows are contiguous,
 * the AVX kernels read B where it lies instead (all but a last, narrower
 * panel); a few rows (matrix-vector products: up to 4 float32 rows, one
 * float64 or bfloat16 row) have kernels of their own that read both operands
 * in place, float32 ones also B stored transposed (x @ W.T: columns of B
 * contiguous), through register transposes of 16 x 16 (AVX-512) or 8 x 8
 * (AVX2) blocks.
 *
 * Reproducibility (the bits of a result). Every element of C is computed
 * the same way whatever the shape of the call around it, its row, the
 * thread count or the code path (packed, in place, matrix-vector):
 *   for each K block (a function of K alone, k_block in gemm.c):
 *     acc = 0; for k in the block, in order: acc = fma(a[i][k], b[k][j], acc)
 *     block 0: c = alpha * acc            (beta == 0; C is not read)
 *              c = fma(alpha, acc, beta * c)
 *     later:   c = fma(alpha, acc, c)
 * (the baseline SSE2 variant has no FMA and rounds the product and the sum
 * separately; bfloat16 with AVX512_BF16 adds products pairwise, k = 2t and
 * 2t + 1, with vdpbf16ps). So row i of A B has the same bits whether A has 1
 * or 1000 rows, and splitting C over threads by blocks of rows and columns
 * (never K) cannot change any bit. Results do differ between ISA variants
 * (avx2 and avx512 agree for float32 and float64: same sums, same order).
 *
 * ISA variants: baseline (SSE2), avx2 (AVX2 + FMA), avx512 (F/BW/DQ/VL),
 * avx512bf16 (avx512 + AVX512_BF16 for bfloat16 inputs). The best one the
 * CPU supports is used, capped by the environment variable WEFT_ISA
 * ("baseline", "avx2", "avx512", "avx512bf16") read once; tests force each
 * variant with wf__gemm_isa_set.
 */
#ifndef WEFT_BACKEND_CPU_GEMM_H
#define WEFT_BACKEND_CPU_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buffer.h"
#include "weft.h"

enum wf_gemm_isa {
    WF_GEMM_ISA_BASELINE = 0,
    WF_GEMM_ISA_AVX2,
    WF_GEMM_ISA_AVX512,
    WF_GEMM_ISA_AVX512_BF16,
    WF_GEMM_ISA_AMX_BF16, /* avx512bf16, with bfloat16 products on AMX tiles (gemm_amx.c) */
    WF_GEMM_ISA_COUNT
};

/* Can this CPU run variant `isa`? */
bool wf__gemm_isa_supported(int isa);
/* "baseline", "avx2", "avx512", "avx512bf16", "amxbf16" (NULL for an
 * unknown value). */
const char *wf__gemm_isa_name(int isa);
/* The variant new products use: the one forced by wf__gemm_isa_set, else
 * the best supported one not above WEFT_ISA. */
int wf__gemm_isa(void);
/* Forces variant `isa` for products started from now on (tests), or -1 to
 * return to the default. WF_ERR_UNSUPPORTED (recorded) if the CPU lacks it.
 * Process-wide; a product in flight keeps the variant it started with. */
wf_status wf__gemm_isa_set(int isa);
/* Does variant `isa` multiply bfloat16 directly (else through float32)? */
bool wf__gemm_isa_has_bf16(int isa);
/* Can variant `isa` run a float32 product of m rows whose B is stored as
 * `half` (float16 or bfloat16) with rows rsb and columns csb apart, reading
 * B where it lies (b_stored = half)? The few rows of the direct kernels
 * (matrix-vector products, as in serving small batches with half weights)
 * with contiguous rows or columns (x @ W or x @ W.T), on AVX2 (float16: and
 * F16C) and AVX-512. */
bool wf__gemm_reads_half_b(int isa, wf_dtype half, int64_t m, int64_t rsb, int64_t csb);

/* One product C (m x n) = alpha * A (m x k) B (k x n) + beta * C.
 * `dtype`: WF_DTYPE_F32 (a, b, c float32), WF_DTYPE_F64 (all float64) or
 * WF_DTYPE_BF16 (a, b bfloat16, c float32; the variant must have
 * wf__gemm_isa_has_bf16, else convert to float32 first). Element (i, j) of
 * A is at a[i * rsa + j * csa] (any strides, in elements), likewise B; C has
 * rows ldc apart and contiguous columns, and is only read when beta != 0.
 * m, n, k > 0. `b_stored` is dtype, except for a float32 product that
 * wf__gemm_reads_half_b allows: B's float16 or bfloat16 elements are then
 * converted (exactly) as they are read, so C has the bits of a float32
 * product of B converted first, without the conversion's pass over B. */
typedef struct wf_gemm_args {
    wf_dtype dtype;
    wf_dtype b_stored;
    int64_t m, n, k;
    const void *a;
    int64_t rsa, csa;
    const void *b;
    int64_t rsb, csb;
    void *c;
    int64_t ldc;
    double alpha, beta;
    int isa; /* the variant, fixed when the product is set up */
    /* B already packed for this variant (wf__gemm_use_packed_b), or NULL:
     * blocks pack B themselves. */
    const void *b_packed;
} wf_gemm_args;

/* complex64 B (b_stored = WF_DTYPE_C64, dtype float32): a complex product
 * run as one float32 product C' = A' B'. A' (m x 2k) is the complex A read
 * as floats (re, im side by side: csa = 1); C' (m x 2n) is the complex C
 * likewise; B' (2k x 2n) is never stored: rows 2t and 2t + 1 hold, for
 * each column j of complex B, (re, im) and (-im, re) of B[t][j]. Then each
 * element of C is gemm.h's rule over 2k terms, the same bits on every path.
 * g->b points at complex B, rsb is its row stride in complex elements and
 * csb must be 1; k and n are B''s (even). Products of at most
 * WF_GEMM_COMPLEX_DIRECT_ROWS rows read B where it lies (gemm_complex.c),
 * larger ones pack B' panels straight from B. */
enum { WF_GEMM_COMPLEX_DIRECT_ROWS = 4 };

/* Fills the fields above isa's and isa itself (wf__gemm_isa()); b_stored
 * is dtype. */
void wf__gemm_args_init(wf_gemm_args *g, wf_dtype dtype, int64_t m, int64_t n, int64_t k,
                        const void *a, int64_t rsa, int64_t csa, const void *b, int64_t rsb,
                        int64_t csb, void *c, int64_t ldc, double alpha, double beta);

/* The K block of a product with inner dimension k (> 0): blocks
 * [0, kb), [kb, 2 kb), ..., the last one shorter; a multiple of 8. Kernels
 * outside the GEMM that must give its bits (quantized.c) sum by these. */
int64_t wf__gemm_k_block(int64_t k);

/* Packing space for one thread, grown on demand; zero-initialize it and
 * call wf__gemm_scratch_free when done. It comes from weft's buffer cache
 * (core/buffer.h), so a product's scratch is memory an earlier one left,
 * already mapped: from malloc, each 256^3-sized product's half-megabyte
 * strip was mapped afresh and faulted in (129 page faults, +20% time). */
typedef struct wf_gemm_scratch {
    wf_buffer *buffer;
    void *data;
    size_t bytes;
} wf_gemm_scratch;
void wf__gemm_scratch_free(wf_gemm_scratch *s);

/* Packed weights. A product packs B's panels anew at every call, which for
 * a few rows against a served weight costs as much as the product itself
 * (a 32-row float32 product with a 384 x 1536 weight spent a third of its
 * time packing). So when the same B (same buffer, offset, strides, shape,
 * variant) is packed a second time, the whole of B is packed once, in the
 * layout the blocks read, and kept with its buffer (core/buffer.h's derived
 * data) until the buffer's contents end; later products read it instead of
 * packing. Only float32, float64 and complex64 products (B' packed) whose
 * blocks of `mblock` rows would pack B (not the matrix-vector paths), and
 * bfloat16 products on AMX (every row count); at most
 * WF_GEMM_PACKED_B_BUDGET bytes of such copies in the process (counted as
 * active memory), and under a memory limit only while they stay within a
 * quarter of it and active memory within half; a copy that cannot be
 * allocated is simply not made. The
 * panels hold B's values, so the results' bits are unchanged.
 * Sets g->b_packed when B has (or now gets) its packed copy. `buffer` holds
 * B (g->b points into it); the caller keeps a reference for the product. */
#define WF_GEMM_PACKED_B_BUDGET ((size_t)512 << 20)
/* Whether g's B can be packed whole (float32, float64 and complex64
 * products; bfloat16 on AMX). */
bool wf__gemm_can_pack_b(const wf_gemm_args *g);
/* The bytes of g's B packed whole, and the packing into dst (64-byte
 * aligned): what b_packed points at. A caller that runs many blocks of rows
 * against one B (convolutions) packs it once this way. The size is not
 * linear in k for every variant (AMX pads K blocks to 32). */
size_t wf__gemm_packed_b_size(const wf_gemm_args *g);
/* Whether a product with g's shapes and variant reads B from b_packed
 * when it is set (float32 or float64, not AMX, not one of the few-row
 * direct paths that read B where it lies), and then its panels' width
 * nr: the layout wf__gemm_pack_b writes, which a caller may write itself
 * (quantized.c dequantizes weights straight into it). */
bool wf__gemm_reads_packed_b(const wf_gemm_args *g, int64_t *nr);
void wf__gemm_pack_b(const wf_gemm_args *g, void *dst);
void wf__gemm_use_packed_b(wf_gemm_args *g, wf_buffer *buffer, int64_t mblock);
/* Bytes of packed weights alive now (tests). */
size_t wf__gemm_packed_b_bytes(void);

/* How a product is split into independent blocks of C for threads: rows
 * and columns per block (a function of m, n, k, the variant, `batches`, the
 * number of products run side by side, and the pool's size; the result's
 * bits never depend on the blocks, since K is not split). */
void wf__gemm_blocks(const wf_gemm_args *g, int64_t batches, int64_t *mblock, int64_t *nblock);

/* Computes C[i0:i1, j0:j1] of product g on the calling thread.
 * WF_ERR_OUT_OF_MEMORY (not recorded: the caller reports it) if the
 * scratch could not grow. */
wf_status wf__gemm_block(const wf_gemm_args *g, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                         wf_gemm_scratch *s);

/* The whole product on the calling thread. */
wf_status wf__gemm_serial(const wf_gemm_args *g, wf_gemm_scratch *s);

/* ---------------------------------------------------------------- kernels
 * What each variant provides, per element type (gemm_avx2.c, gemm_avx512.c;
 * the baseline in gemm.c). Packed panels: A micro-panel ap[k * mr + i] (mr
 * rows), B micro-panel bp[k * nr + j]; bfloat16 panels hold pairs:
 * ap[(t * mr + i) * 2 + {0, 1}] = A[i][2t + {0, 1}], bp[(t * nr + j) * 2 +
 * {0, 1}] likewise. */

enum wf_gemm_store { WF_GEMM_STORE_SET, WF_GEMM_STORE_BETA, WF_GEMM_STORE_ADD };

/* How a tile's sums go to C: SET c = alpha * acc, BETA c = fma(alpha, acc,
 * beta * c), ADD c = fma(alpha, acc, c); in C's type (alpha and beta
 * rounded to float32 for float32 C). */
typedef struct wf_gemm_epilogue {
    int mode; /* enum wf_gemm_store */
    double alpha, beta;
} wf_gemm_epilogue;

/* C tile (rows x cols, at most mr x nr) over kc from an A panel whose mr
 * values of each k lie contiguous, astep elements after those of k - 1 (a
 * packed panel: astep = mr; A stored transposed, read in place: its row
 * stride; bfloat16: astep counts pairs, per k pair, and is always mr), and
 * nr columns of B rows ldb elements apart: a packed panel (ldb = nr;
 * bfloat16: 2 nr per k pair) or, for kernels with b_in_place_rows, nr columns of
 * B itself. */
typedef void (*wf_gemm_tile_fn)(int64_t kc, const void *ap, int64_t astep, const void *b,
                                int64_t ldb, void *c, int64_t ldc, int rows, int cols,
                                const wf_gemm_epilogue *e);
/* C (rows x cols; rows <= direct_rows) from A rows read in place (strides
 * rsa/csa) and B rows read in place (contiguous columns, rows ldb apart),
 * over kc; of the element type of the table it is in (C float32 for
 * bfloat16). */
typedef void (*wf_gemm_direct_fn)(int64_t kc, const void *a, int64_t rsa, int64_t csa,
                                  const void *b, int64_t ldb, void *c, int64_t ldc, int rows,
                                  int64_t cols, const wf_gemm_epilogue *e);
/* C (rows x cols; rows <= direct_rows) over all of k from A rows read in
 * place and B read in place through its transpose: B[k][j] at b[j * ldb +
 * k] (a weight stored n x k, as in x @ W.T). K is walked in blocks of kcb
 * (the last one shorter), each finished into C by gemm.h's rule: `first`
 * for block 0, then STORE_ADD with the same alpha. */
typedef void (*wf_gemm_direct_t_fn)(int64_t k, int64_t kcb, const void *a, int64_t rsa,
                                    int64_t csa, const void *b, int64_t ldb, void *c, int64_t ldc,
                                    int rows, int64_t cols, const wf_gemm_epilogue *first);
/* direct and direct_t for float32 with B's elements stored as float16 or
 * bfloat16 (`half`), each converted exactly as it is loaded: the bits of
 * direct / direct_t on B converted to float32 first. */
typedef void (*wf_gemm_direct_half_fn)(int64_t kc, const float *a, int64_t rsa, int64_t csa,
                                       const uint16_t *b, int64_t ldb, wf_dtype half, float *c,
                                       int64_t ldc, int rows, int64_t cols,
                                       const wf_gemm_epilogue *e);
typedef void (*wf_gemm_direct_t_half_fn)(int64_t k, int64_t kcb, const float *a, int64_t rsa,
                                         int64_t csa, const uint16_t *b, int64_t ldb,
                                         wf_dtype half, float *c, int64_t ldc, int rows,
                                         int64_t cols, const wf_gemm_epilogue *first);
/* Transposing copy of elements of the kernel's size (packs A with
 * contiguous rows, B with contiguous columns, and bfloat16 pairs as 32-bit
 * elements): dst[c * width + r] = src[r * ld + c] for r < rows, c < cols;
 * zero for rows <= r < width. Moves only: bits are kept. */
typedef void (*wf_gemm_transpose_fn)(int rows, int width, int64_t cols, const void *src,
                                     int64_t ld, void *dst);
/* Plain copy of a micro-panel whose lanes lie contiguous (A stored
 * transposed, or B's last narrow panel): dst[k * width + i] = src[k * ld +
 * i] for i < n, zero for n <= i < width, k < kc; width <= 2 vectors of the
 * variant. Moves only: bits are kept. */
typedef void (*wf_gemm_copy_lanes_fn)(int n, int width, int64_t kc, const void *src, int64_t ld,
                                      void *dst);
/* bfloat16 B micro-panel from B rows (contiguous columns, rows ld apart):
 * dst[(t * width + j) * 2 + h] = B[2t + h][j] for j < cols, 2t + h < kc;
 * zero elsewhere. */
typedef void (*wf_gemm_pack_pairs_fn)(int cols, int width, int64_t kc, const uint16_t *b,
                                      int64_t ld, uint16_t *dst);

/* One element type's kernels (mr == 0: none). */
typedef struct wf_gemm_type_kernels {
    int mr, nr;
    wf_gemm_tile_fn tile;
    wf_gemm_tile_fn tile_a_rows; /* tile reading A's rows where they lie: A[r][k] at
                                    ap[r * astep + k] (NULL: A is packed) */
    int b_in_place_rows; /* up to this many rows, tile reads full-width B panels where they
                            lie (0: never) */
    int lead_rows; /* a block's first tile takes at least this many rows (0: tiles even;
                      see split_rows in gemm.c) */
    wf_gemm_transpose_fn transpose;   /* NULL: plain loops */
    wf_gemm_copy_lanes_fn copy_lanes; /* NULL: plain loops */
    int direct_rows;                  /* 0: no direct path */
    wf_gemm_direct_fn direct;
    wf_gemm_direct_t_fn direct_t;       /* NULL: B's transpose is packed */
    wf_gemm_direct_half_fn direct_half;     /* float32; NULL: half B is converted first */
    wf_gemm_direct_t_half_fn direct_t_half; /* likewise, B read through its transpose */
    wf_gemm_pack_pairs_fn pack_b_pairs; /* bfloat16; NULL: plain loops */
} wf_gemm_type_kernels;

typedef struct wf_gemm_kernels {
    wf_gemm_type_kernels f32, f64, bf16;
} wf_gemm_kernels;

/* complex64 B (gemm_complex.c): B' rows [k0, k0 + kc) and columns
 * [j0, j1) packed into micro-panels nr columns wide, as pack_b_strip packs
 * a float32 B (k0, kc, j0, j1 even); and C[i0:i1, j0:j1] of a product of at
 * most WF_GEMM_COMPLEX_DIRECT_ROWS rows from A and B where they lie. */
void wf__gemm_pack_b_complex(const wf_gemm_args *g, int64_t k0, int64_t kc, int64_t j0,
                             int64_t j1, int nr, float *dst);
void wf__gemm_complex_direct(const wf_gemm_args *g, int64_t i0, int64_t i1, int64_t j0,
                             int64_t j1);

/* AMX (gemm_amx.c). Whether the CPU has AMX-BF16 and AMX-TILE (CPUID
 * only: the variant WF_GEMM_ISA_AMX_BF16 exists), and whether Linux also
 * lets this process use the tiles (asked at the first call, process-wide;
 * the answer is kept). */
bool wf__gemm_amx_cpu(void);
bool wf__gemm_amx_available(void);
/* Scratch bytes wf__gemm_block_bf16_amx needs for K blocks of kcb and
 * `cols` columns. */
size_t wf__gemm_amx_scratch_bytes(int64_t kcb, int64_t cols);
/* The bytes of, and the packing of, B's whole packed copy for AMX
 * products (wf__gemm_pack_b's, for this variant): per K block of kcb,
 * panels of 16 columns as the blocks pack them. */
size_t wf__gemm_amx_packed_b_bytes(const wf_gemm_args *g, int64_t kcb);
void wf__gemm_amx_pack_b(const wf_gemm_args *g, int64_t kcb, void *dst);
/* C[i0:i1, j0:j1] of a bfloat16 product (g->dtype WF_DTYPE_BF16, C float32)
 * on AMX tiles, K blocks of kcb (gemm.c's), with gemm.h's epilogue rule;
 * B from g->b_packed where set (j0 a multiple of 32); scratch holds wf__gemm_amx_scratch_bytes(kcb, j1 - j0). The same bits for
 * a row whatever rows and columns the block has. */
void wf__gemm_block_bf16_amx(const wf_gemm_args *g, int64_t kcb, int64_t i0, int64_t i1,
                             int64_t j0, int64_t j1, void *scratch);

/* x86-64 only. */
extern const wf_gemm_kernels wf__gemm_kernels_avx2;
extern const wf_gemm_kernels wf__gemm_kernels_avx512;
extern const wf_gemm_kernels wf__gemm_kernels_avx512_bf16; /* avx512 + bfloat16 tiles */

#endif
