/* Quantization kernels: quantize, dequantize and quantized_matmul (see
 * backend/cpu/quantized.h for how the product keeps the GEMM's bits).
 *
 * quantize follows MLX's affine rule step by step in float32, so codes,
 * scales and biases match mx.quantize bit for bit: per group, with
 * min/max of the group, scale = max((max - min) / (2^bits - 1), 1e-7),
 * negated unless |min| > |max|; edge = min if |min| > |max| else max;
 * q0 = rint(edge / scale); if q0 != 0 the scale becomes edge / q0 and the
 * bias edge, else the bias is 0; code = clamp(rint((w - bias) / scale),
 * 0, 2^bits - 1) (NaN codes 0). Scales and biases are rounded once to w's
 * dtype.
 *
 * The floating-point modes (weft.h) follow MLX's composed ops, each step
 * rounded to w's dtype: see fp_group. Their products dequantize the uint8
 * scales into float32 first (exact: powers of two or e4m3 values), then
 * run like affine ones with element value * scale as W. */
#include "backend/cpu/quantized.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/gemm.h"
#include "core/buffer.h"
#include "core/dtype.h"
#include "core/error.h"
#include "prim/quantized.h"
#include "runtime/pool.h"
#include "util/fault.h"

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* ---------------------------------------------------------------- operands */

/* A READY input's elements, row-major: in place, or a copy owned here. */
typedef struct dense_operand {
    const void *data;
    void *owned;
} dense_operand;

static wf_status dense_get(const char *op, const wf_array *a, dense_operand *d)
{
    d->owned = NULL;
    if (a->row_contiguous || a->size == 0) {
        d->data = a->size ? wf__array_data_ptr(a) : NULL;
        return WF_OK;
    }
    d->owned = wf__malloc((size_t)a->size * wf_dtype_size(a->dtype));
    if (!d->owned)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory copying an operand", op);
    wf_status st = wf__cpu_copy_to_contiguous(a, d->owned);
    d->data = d->owned;
    return st;
}

static float load_float(const void *p, wf_dtype dtype, int64_t i)
{
    switch (dtype) {
    case WF_DTYPE_F16: return wf__f16_to_f32(((const uint16_t *)p)[i]);
    case WF_DTYPE_BF16: return wf__bf16_to_f32(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

static void store_float(void *p, wf_dtype dtype, int64_t i, float v)
{
    switch (dtype) {
    case WF_DTYPE_F16: ((uint16_t *)p)[i] = wf__f32_to_f16(v); break;
    case WF_DTYPE_BF16: ((uint16_t *)p)[i] = wf__f32_to_bf16(v); break;
    default: ((float *)p)[i] = v;
    }
}

/* v rounded to `dtype` and back (float32: unchanged). */
static float round_to(wf_dtype dtype, float v)
{
    switch (dtype) {
    case WF_DTYPE_F16: return wf__f16_to_f32(wf__f32_to_f16(v));
    case WF_DTYPE_BF16: return wf__bf16_to_f32(wf__f32_to_bf16(v));
    default: return v;
    }
}

/* ---------------------------------------------------------------- quantize */

typedef struct quantize_job {
    const void *w;
    wf_dtype dtype;
    void *out;
    const wf_quant_params *p;
} quantize_job;

/* MLX's scale and bias of one group (see the file comment). */
static void group_scale_bias(const float *v, int n, int bits, float *scale, float *bias)
{
    const float n_bins = (float)((1 << bits) - 1), eps = 1e-7f;
    float w_min = INFINITY, w_max = -INFINITY;
    for (int j = 0; j < n; j++) {
        w_max = w_max < v[j] ? v[j] : w_max;
        w_min = v[j] < w_min ? v[j] : w_min;
    }
    const bool mask = fabsf(w_min) > fabsf(w_max);
    float s = (w_max - w_min) / n_bins;
    s = s < eps ? eps : s;
    s = mask ? s : -s;
    const float edge = mask ? w_min : w_max;
    const float q0 = rintf(edge / s);
    float b = 0;
    if (q0 != 0) {
        s = edge / q0;
        b = edge;
    }
    *scale = s;
    *bias = b;
}

static uint32_t quantize_one(float w, float scale, float bias, int bits)
{
    const float n_bins = (float)((1 << bits) - 1);
    float q = rintf((w - bias) / scale);
    q = q < 0 ? 0 : q;
    q = n_bins < q ? n_bins : q;
    return q == q ? (uint32_t)q : 0; /* NaN: 0 */
}

/* The fp4 code nearest v (MLX's argmin over the 16 values, |v - value|
 * rounded to `dtype`: the first of equal distances wins, so a tie goes to
 * the smaller magnitude and -0 to +0). */
static uint8_t fp4_code(float v, wf_dtype dtype)
{
    uint8_t best = 0;
    float best_d = fabsf(round_to(dtype, v - wf__fp4_values[0]));
    for (uint8_t c = 1; c < 16; c++) {
        const float d = fabsf(round_to(dtype, v - wf__fp4_values[c]));
        if (d < best_d) {
            best_d = d;
            best = c;
        }
    }
    return best;
}

/* One group in a floating-point mode: its uint8 scale and element codes
 * (one byte each), as MLX's fp_quantize computes them in `dtype`. */
static uint8_t fp_group(const float *v, int n, int mode, wf_dtype dtype, uint8_t *codes)
{
    float amax = 0;
    for (int j = 0; j < n; j++)
        amax = fabsf(v[j]) > amax ? fabsf(v[j]) : amax;
    const float s = round_to(dtype, amax / (mode == WF_QUANT_MXFP8 ? 448.0f : 6.0f));
    uint8_t scale;
    float divisor; /* the decoded scale in `dtype` */
    wf_dtype quotient = dtype; /* nvfp4 multiplies w / scale by a float32 1 */
    if (mode == WF_QUANT_NVFP4) {
        scale = wf__e4m3_encode(s);
        divisor = round_to(dtype, wf__e4m3_value(scale));
        quotient = WF_DTYPE_F32;
    } else {
        int e = 0; /* the smallest power 2^e >= s (MLX 0.32's rule), 0 for s == 0 */
        if (s != 0) {
            const float f = frexpf(s, &e); /* s = f * 2^e, f in [0.5, 1) */
            e -= f == 0.5f;
        }
        scale = (uint8_t)(e + 127);
        divisor = round_to(dtype, ldexpf(1.0f, e));
    }
    for (int j = 0; j < n; j++) {
        const float q = round_to(dtype, v[j] / divisor);
        codes[j] = mode == WF_QUANT_MXFP8 ? wf__e4m3_encode(q) : fp4_code(q, quotient);
    }
    return scale;
}

/* Packs n codes of `bits` bits each as a little-endian bit stream. */
static void pack_codes(const uint8_t *codes, int n, int bits, uint8_t *dst)
{
    uint64_t acc = 0;
    int filled = 0;
    for (int j = 0; j < n; j++) {
        acc |= (uint64_t)codes[j] << filled;
        for (filled += bits; filled >= 8; filled -= 8, acc >>= 8)
            *dst++ = (uint8_t)acc;
    }
}

static void quantize_chunk(void *ctx, int64_t begin, int64_t end)
{
    const quantize_job *job = ctx;
    const int gs = job->p->group_size, bits = job->p->bits, mode = job->p->mode;
    float v[128];
    uint8_t codes[128];
    for (int64_t g = begin; g < end; g++) {
        for (int j = 0; j < gs; j++)
            v[j] = load_float(job->w, job->dtype, g * gs + j);
        if (mode != WF_QUANT_AFFINE) {
            const uint8_t scale = fp_group(v, gs, mode, job->dtype, codes);
            if (job->p->output == WF_QUANTIZE_SCALES)
                ((uint8_t *)job->out)[g] = scale;
            else
                pack_codes(codes, gs, bits, (uint8_t *)job->out + g * gs * bits / 8);
            continue;
        }
        float scale, bias;
        group_scale_bias(v, gs, bits, &scale, &bias);
        if (job->p->output == WF_QUANTIZE_SCALES) {
            store_float(job->out, job->dtype, g, scale);
        } else if (job->p->output == WF_QUANTIZE_BIASES) {
            store_float(job->out, job->dtype, g, bias);
        } else {
            for (int j = 0; j < gs; j++)
                codes[j] = (uint8_t)quantize_one(v[j], scale, bias, bits);
            pack_codes(codes, gs, bits, (uint8_t *)job->out + g * gs * bits / 8);
        }
    }
}

wf_status wf__cpu_quantize(wf_array *out, wf_array *const *inputs, int ninputs,
                           const void *params)
{
    (void)ninputs;
    const wf_quant_params *p = params;
    const wf_array *w = inputs[0];
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK || out->size == 0)
        return st;
    dense_operand dw;
    if ((st = dense_get("wf_quantize", w, &dw)) == WF_OK) {
        quantize_job job = {dw.data, w->dtype, wf__array_data_ptr(out), p};
        wf__parallel_for(w->size / p->group_size, 64, quantize_chunk, &job);
    }
    free(dw.owned);
    return st;
}

/* ---------------------------------------------------------------- dequantize */

typedef struct dequantize_job {
    const uint8_t *codes;
    const void *scales, *biases;
    wf_dtype dtype;
    void *out;
    int64_t groups_per_row, row_bytes;
    int group_size, bits, mode;
} dequantize_job;

/* The float32 value of a floating-point mode's uint8 scale. */
static float fp_scale_value(int mode, uint8_t s)
{
    return mode == WF_QUANT_NVFP4 ? wf__e4m3_value(s) : ldexpf(1.0f, (int)s - 127);
}

/* The value of a floating-point mode's element code. */
static float fp_element_value(int mode, uint32_t code)
{
    return mode == WF_QUANT_MXFP8 ? wf__e4m3_value((uint8_t)code) : wf__fp4_values[code & 15];
}

static void dequantize_chunk(void *ctx, int64_t begin, int64_t end)
{
    const dequantize_job *job = ctx;
    const int gs = job->group_size, bits = job->bits;
    for (int64_t g = begin; g < end; g++) {
        const int64_t row = g / job->groups_per_row, first = (g % job->groups_per_row) * gs;
        const uint8_t *codes = job->codes + row * job->row_bytes;
        if (job->mode != WF_QUANT_AFFINE) { /* as MLX: each factor and the product in dtype */
            const wf_dtype dt = job->dtype;
            const float s = round_to(dt, fp_scale_value(job->mode, ((const uint8_t *)job->scales)[g]));
            for (int j = 0; j < gs; j++) {
                const uint32_t c = wf__quant_code(codes, first + j, bits);
                store_float(job->out, dt, g * gs + j,
                            round_to(dt, fp_element_value(job->mode, c)) * s);
            }
            continue;
        }
        const float s = load_float(job->scales, job->dtype, g);
        const float b = load_float(job->biases, job->dtype, g);
        for (int j = 0; j < gs; j++) {
            const float q = (float)wf__quant_code(codes, first + j, bits);
            /* as MLX: the product, then the sum, each in the scales' dtype */
            store_float(job->out, job->dtype, g * gs + j, round_to(job->dtype, q * s) + b);
        }
    }
}

wf_status wf__cpu_dequantize(wf_array *out, wf_array *const *inputs, int ninputs,
                             const void *params)
{
    const wf_quant_params *p = params;
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK || out->size == 0)
        return st;
    dense_operand d[3] = {{0}};
    for (int i = 0; i < ninputs && st == WF_OK; i++)
        st = dense_get("wf_dequantize", inputs[i], &d[i]);
    if (st == WF_OK) {
        const wf_array *codes = inputs[0];
        dequantize_job job = {
            .codes = d[0].data,
            .scales = d[1].data,
            .biases = d[2].data,
            .dtype = out->dtype,
            .out = wf__array_data_ptr(out),
            .groups_per_row = out->shape[out->ndim - 1] / p->group_size,
            .row_bytes = codes->shape[codes->ndim - 1] * 4,
            .group_size = p->group_size,
            .bits = p->bits,
            .mode = p->mode,
        };
        wf__parallel_for(out->size / p->group_size, 16, dequantize_chunk, &job);
    }
    for (int i = 0; i < 3; i++)
        free(d[i].owned);
    return st;
}

/* ---------------------------------------------------------------- quantized_matmul */

typedef struct qmm_job {
    const float *x;
    const uint8_t *codes;
    const float *scales, *biases;
    float *out;
    int64_t rows;     /* rows of x per batch */
    int64_t k, n;     /* x @ W: (rows, k) @ (k, n) */
    int64_t row_bytes; /* bytes of codes per stored row of W */
    int64_t groups;   /* scales per stored row of W */
    int64_t w_rows;   /* stored rows of W per batch: n (transpose) or k */
    int64_t block;    /* outputs per task */
    int64_t blocks;   /* tasks per batch */
    int bits, group_size, mode;
    bool transpose;
    int isa;
    wf_qmv_fn qmv;
    wf_qmv_int8_x *int8; /* x rounded for the int8 kernel, or NULL */
    wf_qmv_interleaved interleaved; /* set by interleaved_operands */
    wf_qmv_int8_fn qmv_int8; /* that kernel (set with int8) */
    int64_t x_rows;      /* rows of x over all its batches */
    wf_qdeq_fn qdeq; /* NULL: scalar dequantization of panels */
    wf_qpack_fn qpack; /* NULL: panels dequantized, then packed by the GEMM */
    /* gather_qmm: product `batch` takes x's batch lhs[batch] and W's
     * rhs[batch] (checked in range); NULL: both are `batch`. */
    const int32_t *lhs, *rhs;
    atomic_bool failed;
} qmm_job;

static int64_t x_batch(const qmm_job *job, int64_t batch)
{
    return job->lhs ? job->lhs[batch] : batch;
}

static int64_t w_batch(const qmm_job *job, int64_t batch)
{
    return job->rhs ? job->rhs[batch] : batch;
}

/* Dequantizes stored row r of W, elements [j0, j0 + count), into dst. */
static void dequantize_span(const qmm_job *job, int64_t batch, int64_t r, int64_t j0,
                            int64_t count, float *dst)
{
    const int64_t row = w_batch(job, batch) * job->w_rows + r;
    const uint8_t *codes = job->codes + row * job->row_bytes;
    const float *s = job->scales + row * job->groups;
    const float *b = job->biases ? job->biases + row * job->groups : NULL;
    if (job->qdeq && j0 % 16 == 0 && count % 16 == 0) {
        job->qdeq(codes, s, b, job->group_size, job->bits, job->mode, j0, count, dst);
        return;
    }
    if (job->mode != WF_QUANT_AFFINE) {
        for (int64_t j = 0; j < count; j++) {
            const int64_t c = j0 + j;
            dst[j] = fp_element_value(job->mode, wf__quant_code(codes, c, job->bits)) *
                     s[c / job->group_size];
        }
        return;
    }
    for (int64_t j = 0; j < count; j++) {
        const int64_t c = j0 + j, g = c / job->group_size;
        dst[j] = (float)wf__quant_code(codes, c, job->bits) * s[g] + b[g];
    }
}

/* A process switch: 1 on, 0 off, -1 until the environment variable
 * `name` is read (then on if it says the opposite of the default: "1" for
 * a switch off by default, not "0" for one on by default). */
static bool switch_value(atomic_int *sw, const char *name, bool default_on)
{
    int v = atomic_load(sw);
    if (v < 0) {
        const char *env = getenv(name);
        const bool on = env ? (default_on ? strcmp(env, "0") != 0 : strcmp(env, "1") == 0)
                            : default_on;
        int expected = -1;
        atomic_compare_exchange_strong(sw, &expected, on);
        v = atomic_load(sw);
    }
    return v == 1;
}

/* The int8 switch (off unless WEFT_QMM_INT8=1). */
static atomic_int int8_activations = -1;

static bool int8_switch_value(void)
{
    return switch_value(&int8_activations, "WEFT_QMM_INT8", false);
}

bool wf_set_quantized_matvec_int8(bool enable)
{
    atomic_store(&int8_activations, enable ? 1 : 0);
    return wf__qmv_int8_kernel(wf__gemm_isa()) != NULL;
}

bool wf_quantized_matvec_int8(void)
{
    return int8_switch_value();
}

/* Where the matrix-vector kernel asks for the next pass's words (16 rows
 * of W, often a power of two apart, so sharing L1 sets). To L1 where it
 * holds 48 KiB or more: on a 48 KiB 12-way L1 (Intel Xeon, model 167),
 * 4-bit 4096 x 4096 from memory on 2 threads read 12.6 GB/s against 11.6
 * to L2. To L2 on smaller ones: on Zen 4's 32 KiB 8-way L1, L2 read 10.1
 * GB/s against 8.8 to L1 (commit 55b591a). */
static bool direct_prefetch_to_l1(void) { return wf__cpu_l1d_cache_bytes() >= (48 << 10); }

/* The kernels' arguments for product `batch` of the job. */
static wf_qmv_args qmv_args_of(const qmm_job *job, int64_t batch)
{
    const int64_t row0 = w_batch(job, batch) * job->w_rows;
    return (wf_qmv_args){
        .x = job->x + x_batch(job, batch) * job->rows * job->k,
        .ldx = job->k,
        .rows = (int)job->rows,
        .codes = job->codes + row0 * job->row_bytes,
        .row_bytes = job->row_bytes,
        .scales = job->scales + row0 * job->groups,
        .biases = job->biases ? job->biases + row0 * job->groups : NULL,
        .groups = job->groups,
        .k = job->k,
        .kcb = wf__gemm_k_block(job->k),
        .bits = job->bits,
        .group_size = job->group_size,
        .mode = job->mode,
        .out = job->out + batch * job->rows * job->n,
        .ldo = job->n,
        .prefetch_to_l1 = direct_prefetch_to_l1(),
        .interleaved = job->interleaved,
    };
}

/* Floats of a panel task's buffer: its rows of W dequantized, or packed
 * into the GEMM's layout (panels of nr columns, rounded up; qmm_panel
 * packs only where that fits, nr being 16 or 32 today). */
static int64_t panel_floats(const qmm_job *job) { return (job->block + 63) / 64 * 64 * job->k; }

/* Outputs [n0, n1) of product `batch` through weft's GEMM on W's rows
 * [n0, n1) dequantized into `panel`: straight into the GEMM's packed
 * layout where the packer and the GEMM allow it (the GEMM then does not
 * pack B; 4-bit batch 32 on one Zen 4 core: 25% of its time went to that
 * transposing pack), else row by row, packed by the GEMM. */
static bool qmm_panel(const qmm_job *job, int64_t batch, int64_t n0, int64_t n1, float *panel,
                      wf_gemm_scratch *scratch)
{
    const int64_t nb = n1 - n0, k = job->k;
    wf_gemm_args g;
    wf__gemm_args_init(&g, WF_DTYPE_F32, job->rows, nb, k,
                       job->x + x_batch(job, batch) * job->rows * k, k, 1, panel,
                       job->transpose ? 1 : nb, job->transpose ? k : 1,
                       job->out + batch * job->rows * job->n + n0, job->n, 1.0, 0.0);
    g.isa = job->isa;
    int64_t nr;
    if (job->qpack && job->transpose && wf__gemm_reads_packed_b(&g, &nr) &&
        wf__gemm_packed_b_size(&g) <= (size_t)panel_floats(job) * sizeof(float)) {
        const wf_qmv_args a = qmv_args_of(job, batch);
        if (job->qpack(&a, n0, n1, nr, panel)) {
            g.b_packed = panel;
            return wf__gemm_serial(&g, scratch) == WF_OK;
        }
    }
    if (job->transpose) { /* panel[j][kk] = W[n0 + j][kk] */
        for (int64_t j = 0; j < nb; j++)
            dequantize_span(job, batch, n0 + j, 0, k, panel + j * k);
    } else { /* panel[kk][j] = W[kk][n0 + j] */
        for (int64_t kk = 0; kk < k; kk++)
            dequantize_span(job, batch, kk, n0, nb, panel + kk * nb);
    }
    return wf__gemm_serial(&g, scratch) == WF_OK;
}

static void qmm_panel_chunk(void *ctx, int64_t begin, int64_t end)
{
    qmm_job *job = ctx;
    float *panel = wf__malloc((size_t)panel_floats(job) * sizeof(float));
    wf_gemm_scratch scratch = {0};
    bool ok = panel != NULL;
    for (int64_t t = begin; ok && t < end; t++) {
        const int64_t batch = t / job->blocks, n0 = (t % job->blocks) * job->block;
        ok = qmm_panel(job, batch, n0, min64(job->n, n0 + job->block), panel, &scratch);
    }
    if (!ok)
        atomic_store(&job->failed, true);
    free(panel);
    wf__gemm_scratch_free(&scratch);
}

static void qmm_direct_chunk(void *ctx, int64_t begin, int64_t end)
{
    const qmm_job *job = ctx;
    for (int64_t t = begin; t < end; t++) {
        const int64_t batch = t / job->blocks, n0 = (t % job->blocks) * job->block;
        const wf_qmv_args all_rows = qmv_args_of(job, batch);
        for (int64_t r0 = 0; r0 < job->rows; r0 += WF_QMV_ROWS) { /* WF_QMV_ROWS at a time */
            wf_qmv_args a = all_rows;
            a.rows = (int)min64(WF_QMV_ROWS, job->rows - r0);
            a.x += r0 * a.ldx;
            a.out += r0 * a.ldo;
            if (job->int8)
                job->qmv_int8(job->int8, x_batch(job, batch) * job->rows + r0, &a, n0,
                              min64(job->n, n0 + job->block));
            else
                job->qmv(&a, n0, min64(job->n, n0 + job->block));
        }
    }
}

/* The kernels of GEMM variant `isa` and their lanes (AVX-512 and the
 * variants above it, AVX2); NULL and 0 for the others. */
typedef struct variant_kernels {
    wf_qmv_fn qmv;
    wf_qdeq_fn qdeq;
    wf_qpack_fn qpack;
    int lanes;
} variant_kernels;

static variant_kernels kernels_of(int isa)
{
    if (isa >= WF_GEMM_ISA_AVX512 && wf__qmv_avx512)
        return (variant_kernels){wf__qmv_avx512, wf__qdeq_avx512, wf__qpack_avx512, 16};
    if (isa == WF_GEMM_ISA_AVX2 && wf__qmv_avx2)
        return (variant_kernels){wf__qmv_avx2, wf__qdeq_avx2, wf__qpack_avx2, 8};
    return (variant_kernels){0};
}

/* ---------------------------------------------------------------- interleaved copies */

/* The matrix-vector kernels read W from memory fastest with its rows
 * interleaved: 4-bit 4096 x 4096 from memory on the two cores of the KVM
 * Xeon read 14 GB/s of codes, scales and biases in MLX's layout on
 * AVX-512 (16 rows turned into lanes by transposes, 32 row streams a
 * pass) and 19.5-21 interleaved; 10.4-11.0 and 12.5-13.0 on AVX2
 * (bench_qmv_ceiling, quantized_kernel.h). So, as the GEMM keeps packed
 * copies of served weights (backend/cpu/gemm.h), when the same codes,
 * scales and biases are multiplied a second time, each gets a copy with
 * L rows interleaved (L: the kernel's lanes, 16 or 8), copy[(r / L) * row
 * + j][r % L] = v[r][j] (rows padded with zeros to a multiple of L), kept
 * with its buffer (core/buffer.h's derived data) until the buffer's
 * contents end. The copies hold the same values and the kernel sums in
 * the same order, so the bits are unchanged. Products of more rows make
 * and read them too: the panels' packer then transposes nothing (4-bit
 * batch 32 on two Zen 4 cores: 1.65-1.69 -> 1.77 GB/s). Memory: the copies cost
 * what the operands do; at most a quarter of physical memory of them in
 * the process, under a memory limit only while they stay within a
 * quarter of it and active memory within half; WEFT_QMM_INTERLEAVE=0 in
 * the environment turns them off. */
typedef struct interleaved_copy {
    wf_buffer_derived base;
    int64_t offset, rows, row_elements, lanes; /* the key: where, what (4-byte elements), how */
    wf_buffer *storage;
    size_t bytes;
    bool in_place_range; /* a copy of scales: scales_decode_in_place of its rows */
} interleaved_copy;

static atomic_size_t interleaved_bytes;

size_t wf__qmv_interleaved_bytes(void) { return atomic_load(&interleaved_bytes); }

static void interleaved_drop(wf_buffer_derived *d)
{
    interleaved_copy *c = (interleaved_copy *)d;
    wf__derived_copy_free(&interleaved_bytes, c, c->storage, c->bytes);
}

/* The copies' switch (on unless WEFT_QMM_INTERLEAVE=0). */
static atomic_int interleave_switch = -1;

static bool interleave_enabled(void)
{
    return switch_value(&interleave_switch, "WEFT_QMM_INTERLEAVE", true);
}

void wf__qmv_set_interleave(bool enable) { atomic_store(&interleave_switch, enable ? 1 : 0); }

/* At most a quarter of physical memory of copies (see above). */
static size_t interleaved_budget(void)
{
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (size_t)pages * (size_t)page / 4 : (size_t)1 << 30;
}

/* A nonzero fingerprint of a copy's key, for the buffer's hint. */
static uint64_t interleaved_fingerprint(const interleaved_copy *key)
{
    const int64_t fields[] = {0x71e4, key->offset, key->rows, key->row_elements, key->lanes};
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        h = (h ^ (uint64_t)fields[i]) * 0x100000001b3u;
    return h | 1;
}

/* Whether every scale's magnitude is in [2^-100, 2^100] (NaN: no), where
 * the AVX-512 kernel decodes codes in place (quantized_kernel.h,
 * scales_in_range). A copy's scales are checked once, when it is made:
 * checking them at every product read MLX's scales again beside the
 * copy's, 10% more bytes for a 4-bit matvec. */
static bool scales_decode_in_place(const float *s, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!(fabsf(s[i]) >= 0x1p-100f && fabsf(s[i]) <= 0x1p100f))
            return false;
    return true;
}

/* A new copy of `rows` rows of `row_elements` 4-byte elements from src
 * (NULL when it cannot be afforded or allocated; no error recorded);
 * `scales`: src holds scales, whose range it notes. */
static interleaved_copy *interleaved_make(const interleaved_copy *key, const uint32_t *src,
                                          bool scales)
{
    const int64_t lanes = key->lanes, blocks = (key->rows + lanes - 1) / lanes;
    const size_t bytes = (size_t)(blocks * key->row_elements * lanes) * 4;
    wf_buffer *storage;
    interleaved_copy *c = wf__derived_copy_alloc(&interleaved_bytes, interleaved_budget(),
                                                 sizeof *c, bytes, &storage);
    if (c == NULL)
        return NULL;
    *c = *key;
    c->base.drop = interleaved_drop;
    c->storage = storage;
    c->bytes = bytes;
    uint32_t *dst = storage->data;
    const size_t block_bytes = (size_t)(key->row_elements * lanes) * 4;
    if (key->rows % lanes) /* the last block's missing rows read as zeros */
        memset((char *)dst + bytes - block_bytes, 0, block_bytes);
    for (int64_t r = 0; r < key->rows; r++) {
        uint32_t *line = dst + (r / lanes) * key->row_elements * lanes + r % lanes;
        const uint32_t *row = src + r * key->row_elements;
        for (int64_t j = 0; j < key->row_elements; j++)
            line[j * lanes] = row[j];
    }
    c->in_place_range =
        scales && scales_decode_in_place((const float *)src, key->rows * key->row_elements);
    return c;
}

/* Whether a may get a copy: row-major in place in weft's own buffer
 * (caller memory may change behind weft's back). */
static bool interleavable(const wf_array *a)
{
    return a->buffer && !wf__buffer_is_external(a->buffer) && a->row_contiguous;
}

/* interleaved_make as wf__buffer_derive_at_second_use's make. */
struct interleave_request {
    const interleaved_copy *key;
    const uint32_t *src;
    bool scales;
};

static wf_buffer_derived *interleave_requested(void *ctx)
{
    const struct interleave_request *r = ctx;
    interleaved_copy *made = interleaved_make(r->key, r->src, r->scales);
    return made ? &made->base : NULL;
}

/* The interleaved copy of interleavable a's `rows` x `row_elements`
 * (4-byte) elements (`scales`: a's are scales): kept from before, made now
 * if this is the second use, or NULL. */
static const interleaved_copy *interleaved_copy_of(const wf_array *a, int64_t rows,
                                                   int64_t row_elements, int64_t lanes,
                                                   bool scales)
{
    wf_buffer *buffer = a->buffer;
    const char *data = wf__array_data_ptr(a);
    const interleaved_copy key = {.offset = data - (const char *)buffer->data,
                                  .rows = rows,
                                  .row_elements = row_elements,
                                  .lanes = lanes};
    struct interleave_request request = {&key, (const uint32_t *)data, scales};
    const interleaved_copy *have = (const interleaved_copy *)wf__buffer_derive_at_second_use(
        buffer, interleaved_fingerprint(&key), interleave_requested, &request);
    if (have == NULL || have->base.drop != interleaved_drop || have->offset != key.offset ||
        have->rows != rows || have->row_elements != row_elements || have->lanes != lanes)
        return NULL;
    return have;
}

/* Sets the job's interleaved copies where the matrix-vector kernel takes
 * the product (exact, affine, one W, its operands in place). */
static void interleaved_operands(qmm_job *job, wf_array *const *inputs, const dense_operand *d,
                                 int64_t products)
{
    const wf_array *w = inputs[1];
    /* the kernels' lanes (the matrix-vector kernel's and the packer's, of one
     * variant); what their interleaved paths take (quantized_kernel.h,
     * interleaved_fits): no copy that they would not read */
    const int lanes = job->transpose ? kernels_of(job->isa).lanes : 0;
    const bool fits = wf__gemm_k_block(job->k) % job->group_size == 0 &&
                      job->group_size * job->bits % 32 == 0 &&
                      (job->bits == 2 || job->bits == 4 || job->bits == 8);
    if (lanes == 0 || job->int8 || job->mode != WF_QUANT_AFFINE || !fits ||
        products != 1 || w->ndim != 2 || d[1].owned || d[2].owned || d[3].owned ||
        !interleavable(inputs[1]) || !interleavable(inputs[2]) ||
        (job->biases && !interleavable(inputs[3])) || !interleave_enabled())
        return;
    const interleaved_copy *codes =
        interleaved_copy_of(inputs[1], job->n, job->row_bytes / 4, lanes, false);
    const interleaved_copy *scales =
        interleaved_copy_of(inputs[2], job->n, job->groups, lanes, true);
    const interleaved_copy *biases =
        job->biases ? interleaved_copy_of(inputs[3], job->n, job->groups, lanes, false) : NULL;
    if (codes && scales && (biases || !job->biases)) {
        job->interleaved = (wf_qmv_interleaved){
            .codes = codes->storage->data,
            .scales = scales->storage->data,
            .biases = biases ? biases->storage->data : NULL,
            .lanes = lanes,
            .scales_in_place_range = scales->in_place_range,
        };
    }
}

/* Whether the matrix-vector kernels can take this product (else: panels). */
static bool direct_path(const qmm_job *job)
{
    return job->transpose && job->rows <= WF_QMV_SPLIT_ROWS &&
           (job->bits == 2 || job->bits == 4 || job->bits == 8) &&
           job->row_bytes * 16 < INT32_MAX; /* gather offsets are 32-bit */
}

/* x rounded for the int8 kernel (set in job->qmv_int8) where the switch
 * is on and it can take this product (direct kernel, up to WF_QMV_ROWS
 * rows, affine 4 or 8 bits, AVX2 or AVX-512), or NULL: the exact kernels. */
static wf_qmv_int8_x *int8_activations_of(qmm_job *job)
{
    job->qmv_int8 = wf__qmv_int8_kernel(job->isa);
    if (!job->qmv || job->rows > WF_QMV_ROWS || job->mode != WF_QUANT_AFFINE ||
        (job->bits != 4 && job->bits != 8) ||
        job->group_size % 32 != 0 || !job->biases || !int8_switch_value() || !job->qmv_int8)
        return NULL;
    return wf__qmv_int8_prepare(job->x, job->x_rows, job->k, job->bits, job->group_size);
}

/* Outputs per panel task: up to 256 (the GEMM packs x again for each
 * panel, so panels are wide) and at most ~4 MiB of float32 panel, a
 * multiple of 16, narrower when that leaves threads of the pool idle. */
static int64_t panel_block(int64_t n, int64_t k, int64_t batches)
{
    int64_t block = ((int64_t)1 << 20) / (k > 0 ? k : 1);
    block = block < 256 ? block : 256;
    const int64_t spread = (n * batches) / (2 * (int64_t)wf__pool_size());
    block = spread < block ? spread : block;
    block = block / 16 * 16;
    block = block < 16 ? 16 : block;
    return block < n ? block : n;
}

/* Runs job (its operands, shapes and indices set, from inputs as d) over
 * `batches` products. */
static wf_status qmm_run(const char *op, qmm_job *job, int64_t batches, wf_array *const *inputs,
                         const dense_operand *d)
{
    job->isa = wf__gemm_isa();
    atomic_init(&job->failed, false);
    const variant_kernels kernels = kernels_of(job->isa);
    job->qmv = direct_path(job) ? kernels.qmv : NULL;
    job->qdeq = job->bits == 2 || job->bits == 4 || job->bits == 8 ? kernels.qdeq : NULL;
    job->qpack = kernels.qpack;
    if (job->qmv) {
        job->int8 = int8_activations_of(job);
        interleaved_operands(job, inputs, d, batches);
        job->block = WF_QMV_TASK_ROWS;
        job->blocks = (job->n + WF_QMV_TASK_ROWS - 1) / WF_QMV_TASK_ROWS;
        wf__parallel_for(batches * job->blocks, 2, qmm_direct_chunk, job);
        wf__qmv_int8_free(job->int8);
        return WF_OK;
    }
    if (job->qpack)
        interleaved_operands(job, inputs, d, batches);
    job->block = panel_block(job->n, job->k, batches);
    job->blocks = (job->n + job->block - 1) / job->block;
    wf__parallel_for(batches * job->blocks, 1, qmm_panel_chunk, job);
    if (atomic_load(&job->failed))
        return wf__error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory for a weight panel", op);
    return WF_OK;
}

/* Fills the job's operands and shapes from x, codes, scales, biases. */
static void qmm_setup(qmm_job *job, const wf_quant_params *p, wf_array *const *inputs,
                      const dense_operand *d, wf_array *out, int64_t x_batches)
{
    const wf_array *x = inputs[0], *w = inputs[1];
    const int64_t k = x->shape[x->ndim - 1];
    job->x = d[0].data;
    job->codes = d[1].data;
    job->scales = d[2].data;
    job->biases = d[3].data;
    job->out = wf__array_data_ptr(out);
    job->rows = x->size / k / x_batches;
    job->x_rows = x->size / k;
    job->k = k;
    job->n = out->shape[out->ndim - 1];
    job->row_bytes = w->shape[w->ndim - 1] * 4;
    job->groups = inputs[2]->shape[inputs[2]->ndim - 1];
    job->w_rows = w->shape[w->ndim - 2];
    job->bits = p->bits;
    job->group_size = p->group_size;
    job->mode = p->mode;
    job->transpose = p->transpose;
}

/* A floating-point mode's uint8 scales as float32 values (into *owned). */
static wf_status decode_scales(const char *op, const wf_array *scales, int mode,
                               dense_operand *d)
{
    float *f = wf__malloc((size_t)(scales->size ? scales->size : 1) * sizeof(float));
    if (!f)
        return wf__error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory decoding scales", op);
    float table[256]; /* every byte's value: one lookup per scale */
    for (int v = 0; v < 256; v++)
        table[v] = fp_scale_value(mode, (uint8_t)v);
    const uint8_t *u = d->data;
    for (int64_t i = 0; i < scales->size; i++)
        f[i] = table[u[i]];
    free(d->owned);
    d->owned = f;
    d->data = f;
    return WF_OK;
}

/* Shared by quantized_matmul and gather_qmm: dense operands, K == 0, run. */
static wf_status qmm_kernel(const char *op, wf_array *out, wf_array *const *inputs,
                            const wf_quant_params *p, int64_t x_batches, int64_t products,
                            const int32_t *lhs, const int32_t *rhs)
{
    const int ndense = 1 + wf__quant_matrix_inputs(p);
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK || out->size == 0)
        return st;
    const wf_array *x = inputs[0];
    if (x->shape[x->ndim - 1] == 0) {
        memset(wf__array_data_ptr(out), 0, (size_t)out->size * sizeof(float));
        return WF_OK;
    }
    dense_operand d[4] = {{0}};
    for (int i = 0; i < ndense && st == WF_OK; i++)
        st = dense_get(op, inputs[i], &d[i]);
    if (st == WF_OK && p->mode != WF_QUANT_AFFINE)
        st = decode_scales(op, inputs[2], p->mode, &d[2]);
    if (st == WF_OK) {
        qmm_job job;
        memset(&job, 0, sizeof job);
        qmm_setup(&job, p, inputs, d, out, x_batches);
        job.lhs = lhs;
        job.rhs = rhs;
        st = qmm_run(op, &job, products, inputs, d);
    }
    for (int i = 0; i < ndense; i++)
        free(d[i].owned);
    return st;
}

wf_status wf__cpu_quantized_matmul(wf_array *out, wf_array *const *inputs, int ninputs,
                                   const void *params)
{
    (void)ninputs;
    const wf_array *w = inputs[1];
    int64_t batches = 1;
    for (int d = 0; d < w->ndim - 2; d++)
        batches *= w->shape[d];
    return qmm_kernel("wf_quantized_matmul", out, inputs, params, batches, batches, NULL, NULL);
}

/* Checks every index against its bound (indices are user data). */
static wf_status check_indices(const char *what, const int32_t *idx, int64_t n, int64_t bound)
{
    for (int64_t i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= bound)
            return wf__error(WF_ERR_INVALID_ARGUMENT,
                             "wf_gather_qmm: %s index %d at %lld is out of range for %lld batches",
                             what, (int)idx[i], (long long)i, (long long)bound);
    return WF_OK;
}

wf_status wf__cpu_gather_qmm(wf_array *out, wf_array *const *inputs, int ninputs,
                             const void *params)
{
    const char *op = "wf_gather_qmm";
    const int first = ninputs - 2; /* lhs, then rhs, after the matrix's inputs */
    dense_operand idx[2] = {{0}};
    wf_status st = WF_OK;
    for (int i = 0; i < 2 && st == WF_OK; i++)
        st = dense_get(op, inputs[first + i], &idx[i]);
    const int64_t n = inputs[first]->shape[0];
    if (st == WF_OK)
        st = check_indices("lhs", idx[0].data, n, inputs[0]->shape[0]);
    if (st == WF_OK)
        st = check_indices("rhs", idx[1].data, n, inputs[1]->shape[0]);
    if (st == WF_OK)
        st = qmm_kernel(op, out, inputs, params, inputs[0]->shape[0], n, idx[0].data,
                        idx[1].data);
    for (int i = 0; i < 2; i++)
        free(idx[i].owned);
    return st;
}
