/*
 * Primitive parameters in exported files: one table per params struct that
 * lists its fields (kind, position, accepted range), so the writer encodes
 * each field on its own (the file never depends on a struct's layout or
 * padding) and the reader checks each value before a struct is filled.
 * What the ranges cannot say (an axis beyond the input's rank, a
 * permutation with a repeat) the importer checks by running the
 * primitive's shape inference on every node (import.c).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "compile/export_format.h"
#include "core/error.h"
#include "prim/conv.h"
#include "prim/fft.h"
#include "prim/linalg.h"
#include "prim/linalg_factor.h"
#include "prim/matmul_family.h"
#include "prim/prims.h"
#include "prim/quantized.h"
#include "prim/random.h"
#include "prim/reduce.h"
#include "prim/registry.h"
#include "prim/scatter.h"
#include "prim/search.h"
#include "prim/shape.h"
#include "prim/sort.h"
#include "util/fault.h"

/* ------------------------------------------------------------ bytes */

void wf__bytes_put(wf_bytes *b, const void *data, size_t n)
{
    if (b->failed || n == 0)
        return;
    if (b->size + n > b->capacity) {
        size_t grown = b->capacity ? b->capacity : 256;
        while (grown < b->size + n)
            grown *= 2;
        unsigned char *bigger = wf__realloc(b->data, grown);
        if (!bigger) {
            b->failed = true;
            return;
        }
        b->data = bigger;
        b->capacity = grown;
    }
    memcpy(b->data + b->size, data, n);
    b->size += n;
}

static void put_le(wf_bytes *b, uint64_t v, int n)
{
    unsigned char bytes[8];
    for (int i = 0; i < n; i++)
        bytes[i] = (unsigned char)(v >> (8 * i));
    wf__bytes_put(b, bytes, (size_t)n);
}

void wf__bytes_u8(wf_bytes *b, unsigned v) { put_le(b, v, 1); }
void wf__bytes_u16(wf_bytes *b, unsigned v) { put_le(b, v, 2); }
void wf__bytes_u32(wf_bytes *b, uint32_t v) { put_le(b, v, 4); }
void wf__bytes_u64(wf_bytes *b, uint64_t v) { put_le(b, v, 8); }

void wf__bytes_free(wf_bytes *b)
{
    free(b->data);
    *b = (wf_bytes){0};
}

const unsigned char *wf__reader_take(wf_reader *r, size_t n)
{
    if (r->failed || n > r->size - r->pos) {
        r->failed = true;
        return NULL;
    }
    const unsigned char *p = r->data + r->pos;
    r->pos += n;
    return p;
}

static uint64_t get_le(wf_reader *r, int n)
{
    const unsigned char *p = wf__reader_take(r, (size_t)n);
    uint64_t v = 0;
    for (int i = 0; p && i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

unsigned wf__reader_u8(wf_reader *r) { return (unsigned)get_le(r, 1); }
unsigned wf__reader_u16(wf_reader *r) { return (unsigned)get_le(r, 2); }
uint32_t wf__reader_u32(wf_reader *r) { return (uint32_t)get_le(r, 4); }
uint64_t wf__reader_u64(wf_reader *r) { return get_le(r, 8); }

/* ------------------------------------------------------------ field tables */

enum field_kind {
    FIELD_INT,   /* int, 4 bytes, range checked */
    FIELD_I8,    /* int8_t, 1 byte, range checked */
    FIELD_I64,   /* int64_t, 8 bytes, range checked */
    FIELD_U64,   /* uint64_t, 8 bytes (bit masks) */
    FIELD_U32,   /* uint32_t, 4 bytes */
    FIELD_F64,   /* double, 8 bytes (its bits) */
    FIELD_BOOL,  /* bool, 1 byte: 0 or 1 */
    FIELD_DTYPE, /* wf_dtype, 1 byte below WF_DTYPE_COUNT */
};

typedef struct param_field {
    const char *name;
    int kind;      /* enum field_kind */
    int count;     /* 1, or the entries of an array field */
    size_t offset; /* in the params struct */
    int64_t lo, hi; /* accepted range of each entry (integer kinds) */
} param_field;

#define FIELD(type, member, kind, lo, hi) {#member, kind, 1, offsetof(type, member), lo, hi}
#define FIELDS(type, member, kind, count, lo, hi) \
    {#member, kind, count, offsetof(type, member), lo, hi}

/* The largest dimension (wf__check_shape's bound on a shape's elements). */
#define MAX_DIM ((int64_t)1 << 60)

static const param_field full_fields[] = {
    FIELD(wf_full_params, value, FIELD_F64, 0, 0),
    FIELD(wf_full_params, dtype, FIELD_DTYPE, 0, 0),
    FIELD(wf_full_params, ndim, FIELD_INT, 0, WF_MAX_NDIM),
    FIELDS(wf_full_params, shape, FIELD_I64, WF_MAX_NDIM, 0, MAX_DIM),
};
static const param_field full_like_fields[] = {
    FIELD(wf_full_like_params, value, FIELD_F64, 0, 0),
    FIELD(wf_full_like_params, dtype, FIELD_DTYPE, 0, 0),
};
static const param_field arange_fields[] = {
    FIELD(wf_arange_params, start, FIELD_F64, 0, 0),
    FIELD(wf_arange_params, step, FIELD_F64, 0, 0),
    FIELD(wf_arange_params, count, FIELD_I64, 0, MAX_DIM),
    FIELD(wf_arange_params, dtype, FIELD_DTYPE, 0, 0),
};
static const param_field linspace_fields[] = {
    FIELD(wf_linspace_params, start, FIELD_F64, 0, 0),
    FIELD(wf_linspace_params, stop, FIELD_F64, 0, 0),
    FIELD(wf_linspace_params, num, FIELD_I64, 0, MAX_DIM),
    FIELD(wf_linspace_params, dtype, FIELD_DTYPE, 0, 0),
};
static const param_field eye_fields[] = {
    FIELD(wf_eye_params, n, FIELD_I64, 0, INT_MAX),
    FIELD(wf_eye_params, m, FIELD_I64, 0, INT_MAX),
    FIELD(wf_eye_params, k, FIELD_I64, -(int64_t)INT_MAX, INT_MAX),
    FIELD(wf_eye_params, dtype, FIELD_DTYPE, 0, 0),
};
static const param_field astype_fields[] = {
    FIELD(wf_astype_params, dtype, FIELD_DTYPE, 0, 0),
};
static const param_field sum_fields[] = {
    FIELD(wf_sum_params, axes, FIELD_U64, 0, 0),
    FIELD(wf_sum_params, keepdims, FIELD_BOOL, 0, 1),
};
static const param_field reduce_fields[] = {
    FIELD(wf_reduce_params, op, FIELD_INT, 0, WF_REDUCE_OP_COUNT - 1),
    FIELD(wf_reduce_params, ddof, FIELD_INT, INT_MIN, INT_MAX),
    FIELD(wf_reduce_params, axes, FIELD_U64, 0, 0),
    FIELD(wf_reduce_params, keepdims, FIELD_BOOL, 0, 1),
};
static const param_field arg_reduce_fields[] = {
    FIELD(wf_arg_reduce_params, op, FIELD_INT, 0, 1),
    FIELD(wf_arg_reduce_params, axis, FIELD_INT, 0, WF_MAX_NDIM - 1),
    FIELD(wf_arg_reduce_params, keepdims, FIELD_BOOL, 0, 1),
};
static const param_field softmax_fields[] = {
    FIELD(wf_softmax_params, axes, FIELD_U64, 0, 0),
};
static const param_field scan_fields[] = {
    FIELD(wf_scan_params, op, FIELD_INT, 0, 1),
    FIELD(wf_scan_params, axis, FIELD_INT, 0, WF_MAX_NDIM - 1),
    FIELD(wf_scan_params, reverse, FIELD_BOOL, 0, 1),
    FIELD(wf_scan_params, inclusive, FIELD_BOOL, 0, 1),
};
static const param_field scan_extra_fields[] = {
    FIELD(wf_scan_extra_params, op, FIELD_INT, WF_SCAN_MAX, WF_SCAN_LOGSUMEXP),
    FIELD(wf_scan_extra_params, axis, FIELD_INT, 0, WF_MAX_NDIM - 1),
    FIELD(wf_scan_extra_params, reverse, FIELD_BOOL, 0, 1),
    FIELD(wf_scan_extra_params, inclusive, FIELD_BOOL, 0, 1),
};
static const param_field sort_fields[] = {
    FIELD(wf_sort_params, op, FIELD_INT, WF_SORT_VALUES, WF_TOPK_INDICES),
    FIELD(wf_sort_params, axis, FIELD_INT, 0, WF_MAX_NDIM - 1),
    FIELD(wf_sort_params, k, FIELD_I64, 0, MAX_DIM),
};
static const param_field reshape_fields[] = {
    FIELD(wf_reshape_params, ndim, FIELD_INT, 0, WF_MAX_NDIM),
    FIELDS(wf_reshape_params, shape, FIELD_I64, WF_MAX_NDIM, -1, MAX_DIM),
    FIELDS(wf_reshape_params, in_begin, FIELD_I8, WF_MAX_NDIM, 0, WF_MAX_NDIM),
    FIELDS(wf_reshape_params, in_end, FIELD_I8, WF_MAX_NDIM, 0, WF_MAX_NDIM),
    FIELD(wf_reshape_params, follows_input, FIELD_BOOL, 0, 1),
};
static const param_field transpose_fields[] = {
    FIELD(wf_transpose_params, ndim, FIELD_INT, 0, WF_MAX_NDIM),
    FIELDS(wf_transpose_params, perm, FIELD_INT, WF_MAX_NDIM, 0, WF_MAX_NDIM - 1),
};
static const param_field broadcast_to_fields[] = {
    FIELD(wf_broadcast_to_params, ndim, FIELD_INT, 0, WF_MAX_NDIM),
    FIELDS(wf_broadcast_to_params, shape, FIELD_I64, WF_MAX_NDIM, 0, MAX_DIM),
};
static const param_field slice_fields[] = {
    FIELD(wf_slice_params, ndim, FIELD_INT, 0, WF_MAX_NDIM),
    FIELDS(wf_slice_params, starts, FIELD_I64, WF_MAX_NDIM, INT64_MIN, INT64_MAX),
    FIELDS(wf_slice_params, stops, FIELD_I64, WF_MAX_NDIM, INT64_MIN, INT64_MAX),
    FIELDS(wf_slice_params, steps, FIELD_I64, WF_MAX_NDIM, INT64_MIN, INT64_MAX),
};
static const param_field axis_fields[] = {
    FIELD(wf_axis_params, axis, FIELD_INT, 0, WF_MAX_NDIM - 1),
};
static const param_field pad_fields[] = {
    FIELD(wf_pad_params, value, FIELD_F64, 0, 0),
    FIELD(wf_pad_params, ndim, FIELD_INT, 0, WF_MAX_NDIM),
    FIELDS(wf_pad_params, low, FIELD_I64, WF_MAX_NDIM, 0, MAX_DIM),
    FIELDS(wf_pad_params, high, FIELD_I64, WF_MAX_NDIM, 0, MAX_DIM),
};
static const param_field block_fields[] = {
    FIELD(wf_block_params, axis, FIELD_INT, 0, WF_MAX_NDIM - 1),
    FIELD(wf_block_params, ndim, FIELD_INT, 0, WF_MAX_NDIM),
    FIELDS(wf_block_params, low, FIELD_I64, WF_MAX_NDIM, 0, MAX_DIM),
};
static const param_field tri_fields[] = {
    FIELD(wf_tri_params, k, FIELD_I64, -MAX_DIM, MAX_DIM),
    FIELD(wf_tri_params, upper, FIELD_INT, 0, 1),
};
static const param_field addmm_fields[] = {
    FIELD(wf_addmm_params, alpha, FIELD_F64, 0, 0),
    FIELD(wf_addmm_params, beta, FIELD_F64, 0, 0),
};
static const param_field norm_fields[] = {
    FIELD(wf_norm_params, eps, FIELD_F64, 0, 0),
    FIELD(wf_norm_params, has_weight, FIELD_BOOL, 0, 1),
    FIELD(wf_norm_params, has_bias, FIELD_BOOL, 0, 1),
};
static const param_field rope_fields[] = {
    FIELD(wf_rope_params, base, FIELD_F64, 0, 0),
    FIELD(wf_rope_params, scale, FIELD_F64, 0, 0),
    FIELD(wf_rope_params, offset, FIELD_I64, -MAX_DIM, MAX_DIM),
    FIELD(wf_rope_params, dims, FIELD_INT, 0, INT_MAX),
    FIELD(wf_rope_params, traditional, FIELD_BOOL, 0, 1),
};
static const param_field sdpa_fields[] = {
    FIELD(wf_sdpa_params, scale, FIELD_F64, 0, 0),
    FIELD(wf_sdpa_params, mask_kind, FIELD_INT, WF_SDPA_MASK_NONE, WF_SDPA_MASK_BOOL),
    FIELD(wf_sdpa_params, causal, FIELD_BOOL, 0, 1),
};
static const param_field search_fields[] = {
    FIELD(wf_search_params, right, FIELD_BOOL, 0, 1),
};
static const param_field gather_fields[] = {
    FIELD(wf_gather_params, naxes, FIELD_INT, 0, WF_MAX_NDIM),
    FIELDS(wf_gather_params, axes, FIELD_INT, WF_MAX_NDIM, 0, WF_MAX_NDIM - 1),
    FIELDS(wf_gather_params, slice_sizes, FIELD_I64, WF_MAX_NDIM, 0, MAX_DIM),
};
static const param_field scatter_fields[] = {
    FIELD(wf_scatter_params, mode, FIELD_INT, WF_SCATTER_REPLACE, WF_SCATTER_MIN),
    FIELD(wf_scatter_params, naxes, FIELD_INT, 0, WF_MAX_NDIM),
    FIELDS(wf_scatter_params, axes, FIELD_INT, WF_MAX_NDIM, 0, WF_MAX_NDIM - 1),
};
static const param_field masked_scatter_fields[] = {
    FIELD(wf_masked_scatter_params, nbatch, FIELD_INT, 0, WF_MAX_NDIM),
};
static const param_field conv_fields[] = {
    FIELD(wf_conv_params, spatial, FIELD_INT, 1, WF_CONV_MAX_SPATIAL),
    FIELDS(wf_conv_params, strides, FIELD_I64, WF_CONV_MAX_SPATIAL, 0, INT_MAX),
    FIELDS(wf_conv_params, padding_lo, FIELD_I64, WF_CONV_MAX_SPATIAL, -(int64_t)INT_MAX, INT_MAX),
    FIELDS(wf_conv_params, padding_hi, FIELD_I64, WF_CONV_MAX_SPATIAL, -(int64_t)INT_MAX, INT_MAX),
    FIELDS(wf_conv_params, kernel_dilation, FIELD_I64, WF_CONV_MAX_SPATIAL, 0, INT_MAX),
    FIELDS(wf_conv_params, input_dilation, FIELD_I64, WF_CONV_MAX_SPATIAL, 0, INT_MAX),
    FIELD(wf_conv_params, groups, FIELD_I64, 1, INT_MAX),
    FIELD(wf_conv_params, flip, FIELD_BOOL, 0, 1),
};
static const param_field fft_fields[] = {
    FIELD(wf_fft_params, kind, FIELD_INT, WF_FFT_FORWARD, WF_FFT_REAL_INVERSE),
    FIELD(wf_fft_params, norm, FIELD_INT, WF_FFT_NORM_BACKWARD, WF_FFT_NORM_FORWARD),
    FIELD(wf_fft_params, n_axes, FIELD_INT, 0, WF_MAX_NDIM),
    FIELDS(wf_fft_params, axes, FIELD_INT, WF_MAX_NDIM, 0, WF_MAX_NDIM - 1),
    FIELD(wf_fft_params, real_size, FIELD_I64, 0, MAX_DIM),
};
static const param_field quant_fields[] = {
    FIELD(wf_quant_params, group_size, FIELD_INT, 1, 1 << 20),
    FIELD(wf_quant_params, bits, FIELD_INT, 1, 8),
    FIELD(wf_quant_params, output, FIELD_INT, WF_QUANTIZE_CODES, WF_QUANTIZE_BIASES),
    FIELD(wf_quant_params, transpose, FIELD_BOOL, 0, 1),
    FIELD(wf_quant_params, mode, FIELD_INT, WF_QUANT_AFFINE, WF_QUANT_NVFP4),
    FIELD(wf_quant_params, dtype, FIELD_INT, 0, WF_DTYPE_COUNT - 1),
};
static const param_field factor_fields[] = {
    FIELD(wf_factor_params, kind, FIELD_INT, 0, WF_FACTOR_KIND_COUNT - 1),
    FIELD(wf_factor_params, upper, FIELD_BOOL, 0, 1),
};
static const param_field gather_mm_fields[] = {
    FIELD(wf_gather_mm_params, sorted_indices, FIELD_BOOL, 0, 1),
};
static const param_field random_fields[] = {
    FIELDS(wf_random_params, key, FIELD_U32, 2, 0, 0),
    FIELD(wf_random_params, kind, FIELD_INT, WF_RANDOM_UNIFORM, WF_RANDOM_CATEGORICAL),
    FIELD(wf_random_params, dtype, FIELD_DTYPE, 0, 0),
    FIELD(wf_random_params, ndim, FIELD_INT, 0, WF_MAX_NDIM),
    FIELDS(wf_random_params, shape, FIELD_I64, WF_MAX_NDIM, 0, MAX_DIM),
    FIELD(wf_random_params, a, FIELD_F64, 0, 0),
    FIELD(wf_random_params, b, FIELD_F64, 0, 0),
    FIELD(wf_random_params, lo, FIELD_F64, 0, 0),
    FIELD(wf_random_params, hi, FIELD_F64, 0, 0),
    FIELD(wf_random_params, ilow, FIELD_I64, INT64_MIN, INT64_MAX),
    FIELD(wf_random_params, ihigh, FIELD_I64, INT64_MIN, INT64_MAX),
    FIELD(wf_random_params, axis, FIELD_INT, 0, WF_MAX_NDIM - 1),
};

#define TABLE(fields) fields, sizeof fields / sizeof fields[0]

/* Primitives with parameters that can be exported. Every other primitive
 * with parameters is refused; those without parameters are accepted. */
static const struct {
    const wf_prim_def *prim;
    const param_field *fields;
    size_t nfields;
} schemas[] = {
    {&wf__prim_full, TABLE(full_fields)},
    {&wf__prim_full_like, TABLE(full_like_fields)},
    {&wf__prim_arange, TABLE(arange_fields)},
    {&wf__prim_linspace, TABLE(linspace_fields)},
    {&wf__prim_eye, TABLE(eye_fields)},
    {&wf__prim_astype, TABLE(astype_fields)},
    {&wf__prim_view, TABLE(astype_fields)},
    {&wf__prim_sum, TABLE(sum_fields)},
    {&wf__prim_prod, TABLE(reduce_fields)},
    {&wf__prim_max, TABLE(reduce_fields)},
    {&wf__prim_min, TABLE(reduce_fields)},
    {&wf__prim_all, TABLE(reduce_fields)},
    {&wf__prim_any, TABLE(reduce_fields)},
    {&wf__prim_mean, TABLE(reduce_fields)},
    {&wf__prim_var, TABLE(reduce_fields)},
    {&wf__prim_std, TABLE(reduce_fields)},
    {&wf__prim_logsumexp, TABLE(reduce_fields)},
    {&wf__prim_argmax, TABLE(arg_reduce_fields)},
    {&wf__prim_argmin, TABLE(arg_reduce_fields)},
    {&wf__prim_softmax, TABLE(softmax_fields)},
    {&wf__prim_cumsum, TABLE(scan_fields)},
    {&wf__prim_cumprod, TABLE(scan_fields)},
    {&wf__prim_cummax, TABLE(scan_extra_fields)},
    {&wf__prim_cummin, TABLE(scan_extra_fields)},
    {&wf__prim_logcumsumexp, TABLE(scan_extra_fields)},
    {&wf__prim_sort, TABLE(sort_fields)},
    {&wf__prim_argsort, TABLE(sort_fields)},
    {&wf__prim_partition, TABLE(sort_fields)},
    {&wf__prim_argpartition, TABLE(sort_fields)},
    {&wf__prim_topk, TABLE(sort_fields)},
    {&wf__prim_argtopk, TABLE(sort_fields)},
    {&wf__prim_reshape, TABLE(reshape_fields)},
    {&wf__prim_transpose, TABLE(transpose_fields)},
    {&wf__prim_broadcast_to, TABLE(broadcast_to_fields)},
    {&wf__prim_slice, TABLE(slice_fields)},
    {&wf__prim_slice_update, TABLE(slice_fields)},
    {&wf__prim_take, TABLE(axis_fields)},
    {&wf__prim_take_along_axis, TABLE(axis_fields)},
    {&wf__prim_scatter_add, TABLE(axis_fields)},
    {&wf__prim_concatenate, TABLE(axis_fields)},
    {&wf__prim_pad, TABLE(pad_fields)},
    {&wf__prim_crop_like, TABLE(block_fields)},
    {&wf__prim_pad_like, TABLE(block_fields)},
    {&wf__prim_tri, TABLE(tri_fields)},
    {&wf__prim_addmm, TABLE(addmm_fields)},
    {&wf__prim_layer_norm, TABLE(norm_fields)},
    {&wf__prim_rms_norm, TABLE(norm_fields)},
    {&wf__prim_rope, TABLE(rope_fields)},
    {&wf__prim_sdpa, TABLE(sdpa_fields)},
    {&wf__prim_searchsorted, TABLE(search_fields)},
    {&wf__prim_gather, TABLE(gather_fields)},
    {&wf__prim_scatter, TABLE(scatter_fields)},
    {&wf__prim_masked_scatter, TABLE(masked_scatter_fields)},
    {&wf__prim_conv_general, TABLE(conv_fields)},
    {&wf__prim_fft, TABLE(fft_fields)},
    {&wf__prim_quantize, TABLE(quant_fields)},
    {&wf__prim_dequantize, TABLE(quant_fields)},
    {&wf__prim_quantized_matmul, TABLE(quant_fields)},
    {&wf__prim_gather_qmm, TABLE(quant_fields)},
    {&wf__prim_linalg_cholesky, TABLE(factor_fields)},
    {&wf__prim_linalg_inv, TABLE(factor_fields)},
    {&wf__prim_linalg_tri_inv, TABLE(factor_fields)},
    {&wf__prim_linalg_lu, TABLE(factor_fields)}, /* one packed output each */
    {&wf__prim_linalg_qr, TABLE(factor_fields)},
    {&wf__prim_linalg_eigh, TABLE(factor_fields)},
    {&wf__prim_linalg_svd, TABLE(factor_fields)},
    {&wf__prim_linalg_eig, TABLE(factor_fields)},
    {&wf__prim_gather_mm, TABLE(gather_mm_fields)},
    {&wf__prim_random_uniform, TABLE(random_fields)},
    {&wf__prim_random_normal, TABLE(random_fields)},
    {&wf__prim_random_randint, TABLE(random_fields)},
    {&wf__prim_random_bernoulli, TABLE(random_fields)},
    {&wf__prim_random_categorical, TABLE(random_fields)},
    {&wf__prim_random_keyed, TABLE(random_fields)},
};

static int schema_of(const wf_prim_def *prim)
{
    for (size_t i = 0; i < sizeof schemas / sizeof schemas[0]; i++)
        if (schemas[i].prim == prim)
            return (int)i;
    return -1;
}

static bool in_registry(const wf_prim_def *prim)
{
    size_t count;
    const wf_prim_def *const *all = wf__prim_registry(&count);
    for (size_t i = 0; i < count; i++)
        if (all[i] == prim)
            return true;
    return false;
}

bool wf__export_prim_supported(const wf_prim_def *prim)
{
    if (wf__prim_noutputs(prim) != 1 || !prim->infer)
        return false;
    if (prim->params_size == 0)
        return !prim->params_release && in_registry(prim);
    return schema_of(prim) >= 0;
}

const wf_prim_def *wf__export_prim_find(const char *name, size_t n)
{
    size_t count;
    const wf_prim_def *const *all = wf__prim_registry(&count);
    for (size_t i = 0; i < count; i++)
        if (strlen(all[i]->name) == n && memcmp(all[i]->name, name, n) == 0)
            return wf__export_prim_supported(all[i]) ? all[i] : NULL;
    return NULL;
}

/* ------------------------------------------------------------ encoding */

static size_t field_bytes(int kind)
{
    switch (kind) {
    case FIELD_I8: case FIELD_BOOL: case FIELD_DTYPE: return 1;
    case FIELD_INT: case FIELD_U32: return 4;
    default: return 8;
    }
}

static uint64_t field_get(const unsigned char *p, int kind)
{
    switch (kind) {
    case FIELD_INT: { int v; memcpy(&v, p, sizeof v); return (uint64_t)(int64_t)v; }
    case FIELD_I8: { int8_t v; memcpy(&v, p, sizeof v); return (uint64_t)(int64_t)v; }
    case FIELD_I64: { int64_t v; memcpy(&v, p, sizeof v); return (uint64_t)v; }
    case FIELD_U32: { uint32_t v; memcpy(&v, p, sizeof v); return v; }
    case FIELD_BOOL: { bool v; memcpy(&v, p, sizeof v); return v ? 1u : 0u; }
    case FIELD_DTYPE: { wf_dtype v; memcpy(&v, p, sizeof v); return (uint64_t)v; }
    default: { uint64_t v; memcpy(&v, p, sizeof v); return v; } /* U64, F64 bits */
    }
}

static void field_set(unsigned char *p, int kind, uint64_t raw)
{
    switch (kind) {
    case FIELD_INT: { int v = (int)(int64_t)raw; memcpy(p, &v, sizeof v); break; }
    case FIELD_I8: { int8_t v = (int8_t)(int64_t)raw; memcpy(p, &v, sizeof v); break; }
    case FIELD_I64: { int64_t v = (int64_t)raw; memcpy(p, &v, sizeof v); break; }
    case FIELD_U32: { uint32_t v = (uint32_t)raw; memcpy(p, &v, sizeof v); break; }
    case FIELD_BOOL: { bool v = raw != 0; memcpy(p, &v, sizeof v); break; }
    case FIELD_DTYPE: { wf_dtype v = (wf_dtype)raw; memcpy(p, &v, sizeof v); break; }
    default: memcpy(p, &raw, sizeof raw); break;
    }
}

/* The size of the struct's entry for one element of the field. */
static size_t field_stride(int kind)
{
    switch (kind) {
    case FIELD_INT: return sizeof(int);
    case FIELD_I8: return sizeof(int8_t);
    case FIELD_I64: return sizeof(int64_t);
    case FIELD_U32: return sizeof(uint32_t);
    case FIELD_BOOL: return sizeof(bool);
    case FIELD_DTYPE: return sizeof(wf_dtype);
    default: return sizeof(uint64_t);
    }
}

void wf__export_params_write(wf_bytes *b, const wf_prim_def *prim, const void *params)
{
    const int s = schema_of(prim);
    for (size_t f = 0; s >= 0 && f < schemas[s].nfields; f++) {
        const param_field *field = &schemas[s].fields[f];
        for (int i = 0; i < field->count; i++) {
            const unsigned char *p = (const unsigned char *)params + field->offset +
                                     (size_t)i * field_stride(field->kind);
            put_le(b, field_get(p, field->kind), (int)field_bytes(field->kind));
        }
    }
}

static bool field_value_ok(const param_field *field, uint64_t raw)
{
    switch (field->kind) {
    case FIELD_BOOL: return raw <= 1;
    case FIELD_DTYPE: return raw < WF_DTYPE_COUNT;
    case FIELD_INT: case FIELD_I8: case FIELD_I64: {
        int64_t v = (int64_t)raw;
        return v >= field->lo && v <= field->hi;
    }
    default: return true;
    }
}

/* The encoded value sign-extended to 64 bits (for the range check). */
static uint64_t sign_extend(uint64_t raw, size_t bytes, int kind)
{
    if ((kind != FIELD_INT && kind != FIELD_I8) || bytes == 8)
        return raw;
    const uint64_t sign = (uint64_t)1 << (8 * bytes - 1);
    return (raw ^ sign) - sign;
}

bool wf__export_params_read(const wf_prim_def *prim, const unsigned char *bytes, size_t n,
                            void **out)
{
    *out = NULL;
    const int s = schema_of(prim);
    size_t expected = 0;
    for (size_t f = 0; s >= 0 && f < schemas[s].nfields; f++)
        expected += field_bytes(schemas[s].fields[f].kind) * (size_t)schemas[s].fields[f].count;
    if (n != expected) {
        wf__error(WF_ERR_IO, "parameters of '%s' are %zu bytes, expected %zu", prim->name, n,
                  expected);
        return false;
    }
    if (!prim->params_size)
        return true;
    unsigned char *params = wf__calloc(1, prim->params_size);
    if (!params) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "out of memory reading parameters of '%s'", prim->name);
        return false;
    }
    wf_reader r = {bytes, n, 0, false};
    for (size_t f = 0; f < schemas[s].nfields; f++) {
        const param_field *field = &schemas[s].fields[f];
        const size_t width = field_bytes(field->kind);
        for (int i = 0; i < field->count; i++) {
            uint64_t raw = sign_extend(get_le(&r, (int)width), width, field->kind);
            if (!field_value_ok(field, raw)) {
                wf__error(WF_ERR_IO, "parameter '%s' of '%s' is out of range", field->name,
                          prim->name);
                free(params);
                return false;
            }
            field_set(params + field->offset + (size_t)i * field_stride(field->kind),
                      field->kind, raw);
        }
    }
    *out = params;
    return true;
}
