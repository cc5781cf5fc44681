/* CPU kernels of the quantization primitives (prim/quantized.h) and the
 * matrix-vector kernels of each ISA variant. Internal.
 *
 * quantized_matmul gives the bits of weft's GEMM (gemm.h) on the
 * dequantized matrix W (dequantize's float32 values: code * scale, then
 * + bias, each rounded), for any batch size and thread count:
 *  - up to WF_QMV_SPLIT_ROWS rows of x against W stored (N, K) (transpose)
 *    with 2, 4 or 8 bits (any mode), on AVX2 or AVX-512
 *    (quantized_kernel.h), WF_QMV_ROWS rows of x a call: the codes of 8
 *    or 16 rows of W are turned into lanes, dequantized in registers (a
 *    lane per output) and summed by the GEMM's rule: per K block
 *    (wf__gemm_k_block) acc = fma(x, w, acc) in k order (two K blocks
 *    side by side), then added to the output in K block order. The packed
 *    matrix is read once from memory.
 *  - otherwise (more rows, 3/5/6 bits, W stored (K, N), the baseline
 *    variant): panels of W are dequantized (into the GEMM's packed layout
 *    where wf_qpack_fn can, else into a float32 buffer) and handed to the
 *    GEMM itself.
 * Activations stay float32 (no int8/bfloat16 rounding of x), unless the
 * process opted in with wf_set_quantized_matvec_int8 (weft.h): then affine
 * 4- and 8-bit products of up to WF_QMV_ROWS rows round x to int8 on the
 * AVX2 and AVX-512 variants (quantized_vnni.c). */
#ifndef WEFT_BACKEND_CPU_QUANTIZED_H
#define WEFT_BACKEND_CPU_QUANTIZED_H

#include <stdbool.h>
#include <stdint.h>

#include "core/array.h"
#include "weft.h"

/* WF_QMV_ROWS: the most rows of x the matrix-vector kernels take a call;
 * WF_QMV_SPLIT_ROWS: the most a product sends through them, WF_QMV_ROWS
 * at a time on each task's rows of W (which the later groups of rows
 * find in L2); more go through the GEMM's panels. WF_QMV_TASK_ROWS:
 * outputs per task of the pool, a multiple of the rows the kernels take
 * per pass (16 or 8 lanes). */
enum { WF_QMV_ROWS = 4, WF_QMV_SPLIT_ROWS = 16, WF_QMV_TASK_ROWS = 96 };

/* Bytes of interleaved copies alive now (tests). */
size_t wf__qmv_interleaved_bytes(void);
/* Turns the making and reading of interleaved copies on or off for the
 * process (default: on unless WEFT_QMM_INTERLEAVE=0; tests, benchmarks). */
void wf__qmv_set_interleave(bool enable);

/* Copies of a product's codes, scales and biases with `lanes` rows
 * interleaved (quantized.c; the kernel's lanes), or codes NULL: the kernel
 * reads them instead, a vector of words at a time, same bits; n0 of a call
 * is then a multiple of 2 lanes. */
typedef struct wf_qmv_interleaved {
    const int32_t *codes;
    const float *scales, *biases; /* biases: NULL if none */
    int lanes;
    /* every scale's magnitude in [2^-100, 2^100] (checked when the copy
     * was made): the AVX-512 kernel takes the interleaved path only then */
    bool scales_in_place_range;
} wf_qmv_interleaved;

/* One matrix-vector product: rows (1 .. WF_QMV_ROWS) rows of x (ldx apart)
 * times W.T, W (n, k) with `row_bytes` bytes of codes per row (a multiple
 * of 4) and `groups` scales and biases per row; out rows ldo apart. */
typedef struct wf_qmv_args {
    const float *x;
    int64_t ldx;
    int rows;
    const uint8_t *codes;
    int64_t row_bytes;
    const float *scales, *biases;
    int64_t groups;
    int64_t k, kcb; /* kcb: wf__gemm_k_block(k) */
    int bits, group_size;
    int mode; /* wf_quant_mode; floating-point: biases NULL, scales decoded to float32 */
    float *out;
    int64_t ldo;
    bool prefetch_to_l1; /* the next pass's words asked for to L1, not L2 */
    wf_qmv_interleaved interleaved;
} wf_qmv_args;

/* Outputs [n0, n1) of a product (bits 2, 4 or 8). */
typedef void (*wf_qmv_fn)(const wf_qmv_args *a, int64_t n0, int64_t n1);

/* Dequantizes `count` codes (a multiple of 16) of a row of 2-, 4- or 8-bit
 * codes from code j0 (a multiple of 16) on: dst[j] = code * s + b (float32
 * product, then sum: dequantize's bits), s and b those of code j0 + j's
 * group (`scales`, `biases`: the row's, from its group 0). In a
 * floating-point mode (biases unused, scales decoded to float32):
 * dst[j] = element value * s (exact). */
typedef void (*wf_qdeq_fn)(const uint8_t *row, const float *scales, const float *biases,
                           int group_size, int bits, int mode, int64_t j0, int64_t count,
                           float *dst);

/* Dequantizes rows [n0, n1) of W (a's codes, scales, biases, k, kcb,
 * bits, group size and mode; x and out unused) straight into the packed
 * B of a float32 GEMM with n = n1 - n0 whose panels are nr wide
 * (wf__gemm_reads_packed_b): the values dequantize gives, laid out as
 * wf__gemm_pack_b lays out B = W[n0:n1].T, columns past n1 zero. Returns
 * false, having written nothing, where it cannot (then dequantize and
 * let the GEMM pack). */
typedef bool (*wf_qpack_fn)(const wf_qmv_args *a, int64_t n0, int64_t n1, int64_t nr,
                            float *dst);

/* The opt-in int8-activation kernels (quantized_vnni.c: AVX512_VNNI, or
 * AVX2 without it): affine, 4 or 8 bits, W stored (N, K). x is rounded
 * once per product by wf__qmv_int8_prepare (rows rows of k; NULL: out of
 * memory or x not finite, the exact kernels then take the product); a
 * wf_qmv_int8_fn computes outputs [n0, n1) of a's rows of x, prepared rows
 * x_row on. */
typedef struct wf_qmv_int8_x wf_qmv_int8_x;
typedef void (*wf_qmv_int8_fn)(const wf_qmv_int8_x *px, int64_t x_row, const wf_qmv_args *a,
                               int64_t n0, int64_t n1);
/* The int8 kernel of GEMM variant `isa` (WF_GEMM_ISA_*) on this CPU, or NULL. */
wf_qmv_int8_fn wf__qmv_int8_kernel(int isa);
wf_qmv_int8_x *wf__qmv_int8_prepare(const float *x, int64_t rows, int64_t k, int bits,
                                    int group_size);
void wf__qmv_int8_free(wf_qmv_int8_x *px);

/* The variants' kernels (x86-64 with GCC or Clang only; NULL elsewhere). */
extern const wf_qmv_fn wf__qmv_avx2;
extern const wf_qmv_fn wf__qmv_avx512;
extern const wf_qdeq_fn wf__qdeq_avx2;
extern const wf_qdeq_fn wf__qdeq_avx512;
extern const wf_qpack_fn wf__qpack_avx2;
extern const wf_qpack_fn wf__qpack_avx512;

wf_status wf__cpu_quantize(wf_array *out, wf_array *const *inputs, int ninputs,
                           const void *params);
wf_status wf__cpu_dequantize(wf_array *out, wf_array *const *inputs, int ninputs,
                             const void *params);
wf_status wf__cpu_quantized_matmul(wf_array *out, wf_array *const *inputs, int ninputs,
                                   const void *params);
wf_status wf__cpu_gather_qmm(wf_array *out, wf_array *const *inputs, int ninputs,
                             const void *params);

#endif
