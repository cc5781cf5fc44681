/* Scan kernels: cumsum, cumprod (inclusive or exclusive, forward or
 * reverse).
 *
 * Two forms, chosen by where the axis lies in the input's memory:
 *  - rows: the axis is the input's innermost dim; the rows engine
 *    (reduce_rows.c) hands each row over contiguous in the accumulator
 *    dtype and scans it with a running carry (backwards for reverse);
 *  - vertical: otherwise; the other dims are walked once per axis index,
 *    adding that slice into a row of running accumulators (kept in cache by
 *    splitting the other dims into chunks, in parallel, and tiling strided
 *    layouts). A reverse scan walks the axis backwards (base pointers moved
 *    to the last element, the axis strides negated).
 * Each output depends on its own row alone, in order, so the split never
 * changes a result. Integers wrap (unsigned arithmetic); bool/u8 scan in
 * int32; half types accumulate in float32 and round each output once;
 * complex64 scans in complex64 (products as NumPy's: float32 parts). */
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/reduce.h"
#include "core/dtype.h"
#include "prim/reduce.h"

enum { SCAN_CHUNK = 1 << 15 };

union scan_scalar {
    int32_t i32;
    int64_t i64;
    float f32;
    double f64;
    wf_cpu_c64 c64;
};

#define ADD_I32(a, b) wf__cpu_wrap_i32((uint32_t)(a) + (uint32_t)(b))
#define MUL_I32(a, b) wf__cpu_wrap_i32((uint32_t)(a) * (uint32_t)(b))
#define ADD_I64(a, b) wf__cpu_wrap_i64((uint64_t)(a) + (uint64_t)(b))
#define MUL_I64(a, b) wf__cpu_wrap_i64((uint64_t)(a) * (uint64_t)(b))
#define ADD_F(a, b) ((a) + (b))
#define MUL_F(a, b) ((a) * (b))
#define ADD_C(a, b) ((wf_cpu_c64){(a).re + (b).re, (a).im + (b).im})
#define MUL_C(a, b) ((wf_cpu_c64){(a).re * (b).re - (a).im * (b).im, (a).re * (b).im + (a).im * (b).re})

/* Row scan of n elements (x and o may be the same block); *carry is the
 * running value before the first element and after the last. */
#define SCAN_ROW(NAME, T, OP)                                                            \
    static void NAME(int64_t n, const T *x, int64_t sx, T *o, int64_t so, T *carry,     \
                     bool inclusive)                                                     \
    {                                                                                    \
        T c = *carry;                                                                    \
        if (inclusive) {                                                                 \
            for (int64_t i = 0; i < n; i++) {                                            \
                c = OP(c, x[i * sx]);                                                    \
                o[i * so] = c;                                                           \
            }                                                                            \
        } else {                                                                         \
            for (int64_t i = 0; i < n; i++) {                                            \
                const T v = x[i * sx];                                                   \
                o[i * so] = c;                                                           \
                c = OP(c, v);                                                            \
            }                                                                            \
        }                                                                                \
        *carry = c;                                                                      \
    }

/* Vertical step over n positions: acc = acc (op) x, o = the new (inclusive)
 * or old (exclusive) accumulator. */
#define SCAN_VERT(NAME, T, OP)                                                           \
    static void NAME(int64_t n, T *acc, int64_t sa, const T *x, int64_t sx, T *o,       \
                     int64_t so, bool inclusive)                                         \
    {                                                                                    \
        if (inclusive) {                                                                 \
            for (int64_t i = 0; i < n; i++) {                                            \
                const T a = OP(acc[i * sa], x[i * sx]);                                  \
                acc[i * sa] = a;                                                         \
                o[i * so] = a;                                                           \
            }                                                                            \
        } else {                                                                         \
            for (int64_t i = 0; i < n; i++) {                                            \
                const T a = acc[i * sa], v = x[i * sx];                                  \
                o[i * so] = a;                                                           \
                acc[i * sa] = OP(a, v);                                                  \
            }                                                                            \
        }                                                                                \
    }

SCAN_ROW(row_add_i32, int32_t, ADD_I32)
SCAN_ROW(row_mul_i32, int32_t, MUL_I32)
SCAN_ROW(row_add_i64, int64_t, ADD_I64)
SCAN_ROW(row_mul_i64, int64_t, MUL_I64)
SCAN_ROW(row_add_f32, float, ADD_F)
SCAN_ROW(row_mul_f32, float, MUL_F)
SCAN_ROW(row_add_f64, double, ADD_F)
SCAN_ROW(row_mul_f64, double, MUL_F)
SCAN_ROW(row_add_c64, wf_cpu_c64, ADD_C)
SCAN_ROW(row_mul_c64, wf_cpu_c64, MUL_C)
SCAN_VERT(vert_add_i32, int32_t, ADD_I32)
SCAN_VERT(vert_mul_i32, int32_t, MUL_I32)
SCAN_VERT(vert_add_i64, int64_t, ADD_I64)
SCAN_VERT(vert_mul_i64, int64_t, MUL_I64)
SCAN_VERT(vert_add_f32, float, ADD_F)
SCAN_VERT(vert_mul_f32, float, MUL_F)
SCAN_VERT(vert_add_f64, double, ADD_F)
SCAN_VERT(vert_mul_f64, double, MUL_F)
SCAN_VERT(vert_add_c64, wf_cpu_c64, ADD_C)
SCAN_VERT(vert_mul_c64, wf_cpu_c64, MUL_C)

/* The context of both forms; `stage` first, so that the shared staging
 * (wf__cpu_staged) can hand it to the typed vertical loop. */
typedef struct scan_ctx {
    wf_cpu_stage_ctx stage;
    bool prod, inclusive, reverse;
    wf_dtype at;
    size_t xi, oi;
    int64_t len;      /* axis length */
    int64_t sxa, soa; /* vertical: axis strides (elements; negated for reverse) */
} scan_ctx;

static void row_typed(const scan_ctx *c, int64_t n, const void *x, int64_t sx, void *o,
                      int64_t so, union scan_scalar *carry)
{
    switch (c->at) {
    case WF_DTYPE_I32:
        (c->prod ? row_mul_i32 : row_add_i32)(n, x, sx, o, so, &carry->i32, c->inclusive);
        break;
    case WF_DTYPE_I64:
        (c->prod ? row_mul_i64 : row_add_i64)(n, x, sx, o, so, &carry->i64, c->inclusive);
        break;
    case WF_DTYPE_F32:
        (c->prod ? row_mul_f32 : row_add_f32)(n, x, sx, o, so, &carry->f32, c->inclusive);
        break;
    case WF_DTYPE_C64:
        (c->prod ? row_mul_c64 : row_add_c64)(n, x, sx, o, so, &carry->c64, c->inclusive);
        break;
    default:
        (c->prod ? row_mul_f64 : row_add_f64)(n, x, sx, o, so, &carry->f64, c->inclusive);
        break;
    }
}

static void vert_typed(const scan_ctx *c, int64_t n, void *acc, int64_t sa, const void *x,
                       int64_t sx, void *o, int64_t so)
{
    switch (c->at) {
    case WF_DTYPE_I32:
        (c->prod ? vert_mul_i32 : vert_add_i32)(n, acc, sa, x, sx, o, so, c->inclusive);
        break;
    case WF_DTYPE_I64:
        (c->prod ? vert_mul_i64 : vert_add_i64)(n, acc, sa, x, sx, o, so, c->inclusive);
        break;
    case WF_DTYPE_F32:
        (c->prod ? vert_mul_f32 : vert_add_f32)(n, acc, sa, x, sx, o, so, c->inclusive);
        break;
    case WF_DTYPE_C64:
        (c->prod ? vert_mul_c64 : vert_add_c64)(n, acc, sa, x, sx, o, so, c->inclusive);
        break;
    default:
        (c->prod ? vert_mul_f64 : vert_add_f64)(n, acc, sa, x, sx, o, so, c->inclusive);
        break;
    }
}

static void identity(const scan_ctx *c, union scan_scalar *v)
{
    memset(v, 0, sizeof *v);
    switch (c->at) {
    case WF_DTYPE_I32: v->i32 = c->prod ? 1 : 0; break;
    case WF_DTYPE_I64: v->i64 = c->prod ? 1 : 0; break;
    case WF_DTYPE_F32: v->f32 = c->prod ? 1.0f : 0.0f; break;
    case WF_DTYPE_C64: v->c64 = (wf_cpu_c64){c->prod ? 1.0f : 0.0f, 0.0f}; break;
    default: v->f64 = c->prod ? 1.0 : 0.0; break;
    }
}

/* One row (rows engine): x and y contiguous, of the accumulator dtype. */
static void scan_row(const wf_cpu_rows *rows, int64_t len, const void *x, void *y, char *res)
{
    (void)res;
    const scan_ctx *c = rows->arg;
    const int64_t last = (len - 1) * (int64_t)wf_dtype_size(c->at);
    union scan_scalar carry;
    identity(c, &carry);
    if (c->reverse)
        row_typed(c, len, (const char *)x + last, -1, (char *)y + last, -1, &carry);
    else
        row_typed(c, len, x, 1, y, 1, &carry);
}

/* Vertical step (staged to the accumulator dtype): operands [out, acc, x]. */
static void scan_vert(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx)
{
    vert_typed(ctx, n, ptrs[1], strides[1], ptrs[2], strides[2], ptrs[0], strides[0]);
}

static void vert_block(const wf_cpu_iter *sub, const scan_ctx *c)
{
    wf_cpu_iter s = *sub;
    for (int64_t k = 0; k < c->len; k++) {
        s.data[0] = sub->data[0] + k * c->soa * (int64_t)c->oi;
        s.data[2] = sub->data[2] + k * c->sxa * (int64_t)c->xi;
        wf__cpu_iter_run(&s, wf__cpu_staged, c);
    }
}

static void vert_tile(const wf_cpu_iter *tile, void *arg)
{
    vert_block(tile, arg);
}

/* The axis loop over a chunk of the other dims, tiled along the innermost
 * one when the input or output is strided there (a transposed layout). */
static void vert_body(const wf_cpu_iter *sub, void *arg)
{
    wf__cpu_tiles_run(sub, true, vert_tile, arg);
}

static void fill_identity(const scan_ctx *c, void *acc, int64_t n)
{
    union scan_scalar v;
    identity(c, &v);
    const size_t ai = wf_dtype_size(c->at);
    for (int64_t i = 0; i < n; i++)
        memcpy((char *)acc + (size_t)i * ai, &v, ai);
}

/* Halves run in float32; integers of up to 4 bytes in int32, 8-byte ones in
 * int64: wrapping sums and products in the wider type, cut to the narrow
 * one, give the narrow type's wrapping results (and uint32 / uint64 the
 * bits of their signed twins). */
static wf_dtype scan_compute_dtype(wf_dtype out)
{
    if (out == WF_DTYPE_F16 || out == WF_DTYPE_BF16)
        return WF_DTYPE_F32;
    if (wf__dtype_is_integer(out))
        return wf_dtype_size(out) <= 4 ? WF_DTYPE_I32 : WF_DTYPE_I64;
    return out;
}

wf_status wf__cpu_scan(wf_array *out, wf_array *const *inputs, int ninputs, const void *params)
{
    (void)ninputs;
    const wf_array *in = inputs[0];
    const wf_scan_params *p = params;
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK)
        return st;
    if (out->size == 0)
        return WF_OK;
    scan_ctx c;
    memset(&c, 0, sizeof c);
    c.prod = p->op == 1;
    c.inclusive = p->inclusive;
    c.reverse = p->reverse;
    c.at = scan_compute_dtype(out->dtype);
    c.xi = wf_dtype_size(in->dtype);
    c.oi = wf_dtype_size(out->dtype);
    c.len = in->shape[p->axis];
    wf_cpu_iter it;
    char *data2[2] = {wf__array_data_ptr(out), wf__array_data_ptr(in)};
    const size_t items2[2] = {c.oi, c.xi};
    const enum wf_cpu_layout lay2[2] = {WF_CPU_LAYOUT_FULL, WF_CPU_LAYOUT_IN};
    if (wf__cpu_axis_walk(&it, in, p->axis, 2, data2, items2, lay2)) {
        const wf_cpu_rows rows = {.x = in,
                                  .axes = (uint64_t)1 << p->axis,
                                  .at = c.at,
                                  .y = out,
                                  .row = scan_row,
                                  .arg = &c,
                                  .row_cost = 1};
        return wf__cpu_rows_run(&rows);
    }
    int64_t out_st[WF_MAX_NDIM];
    wf__contiguous_strides(out->shape, out->ndim, out_st);
    c.sxa = in->strides[p->axis];
    c.soa = out_st[p->axis];
    char *xbase = wf__array_data_ptr(in);
    char *obase = wf__array_data_ptr(out);
    if (p->reverse) {
        xbase += (c.len - 1) * c.sxa * (int64_t)c.xi;
        obase += (c.len - 1) * c.soa * (int64_t)c.oi;
        c.sxa = -c.sxa;
        c.soa = -c.soa;
    }
    const int64_t others = out->size / c.len;
    wf_buffer *accb = wf__cpu_scratch(others, c.at);
    if (accb == NULL)
        return WF_ERR_OUT_OF_MEMORY;
    fill_identity(&c, accb->data, others);
    wf__cpu_stage_init(&c.stage, scan_vert, c.at);
    c.stage.item[0] = c.oi;
    c.stage.item[1] = wf_dtype_size(c.at);
    c.stage.item[2] = c.xi;
    if (in->dtype != c.at) {
        c.stage.xop = 2;
        c.stage.xdt = in->dtype;
    }
    if (out->dtype != c.at) {
        c.stage.oop = 0;
        c.stage.odt = out->dtype;
    }
    char *data3[3] = {obase, accb->data, xbase};
    const enum wf_cpu_layout lay3[3] = {WF_CPU_LAYOUT_FULL, WF_CPU_LAYOUT_ACC,
                                        WF_CPU_LAYOUT_IN};
    wf__cpu_axis_walk(&it, in, p->axis, 3, data3, c.stage.item, lay3);
    wf__cpu_vertical_run(&it, 0, c.len, SCAN_CHUNK, vert_body, &c);
    wf__buffer_release(accb);
    return WF_OK;
}
