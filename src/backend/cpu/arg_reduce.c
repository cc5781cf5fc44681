/* argmax and argmin along one axis: the first index of the max / min, a
 * NaN counting as the max and the min (its first index wins).
 *
 * Two forms, by where the axis lies in the input's memory: rows (the axis
 * innermost: each row scanned alone, rows in parallel) and vertical (the
 * other dims walked once per axis index, keeping a row of running bests and
 * their indices in cache; chunks of the other dims in parallel). Both are
 * exact, so the split never changes a result. */
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/reduce.h"
#include "core/dtype.h"
#include "prim/reduce.h"

/* Row arg-reduction over a block of the compute dtype: updates *best and
 * *bidx (index base + i) with the first strictly better element; `first`
 * makes the first element the starting best. NaN counts as the best. */
#define NAN_F(v) ((v) != (v))
#define NAN_I(v) ((void)(v), false)

#define ARG_BLOCK(NAME, T, ISNAN)                                                          \
    static void NAME(int64_t n, const T *x, int64_t sx, int64_t base, bool argmin,       \
                     T *best, int64_t *bidx, bool *first)                                \
    {                                                                                    \
        for (int64_t i = 0; i < n; i++) {                                                \
            const T v = x[i * sx];                                                       \
            const T b = *best;                                                           \
            bool take;                                                                   \
            if (*first)                                                                  \
                take = true;                                                             \
            else if (ISNAN(b))                                                           \
                return; /* a NaN already won */                                          \
            else if (ISNAN(v))                                                           \
                take = true;                                                             \
            else                                                                         \
                take = argmin ? v < b : v > b;                                           \
            if (take) {                                                                  \
                *best = v;                                                               \
                *bidx = base + i;                                                        \
                *first = false;                                                          \
            }                                                                            \
        }                                                                                \
    }
ARG_BLOCK(arg_block_u8, uint8_t, NAN_I)
ARG_BLOCK(arg_block_i32, int32_t, NAN_I)
ARG_BLOCK(arg_block_i64, int64_t, NAN_I)
ARG_BLOCK(arg_block_u64, uint64_t, NAN_I)
ARG_BLOCK(arg_block_f32, float, NAN_F)
ARG_BLOCK(arg_block_f64, double, NAN_F)

/* One contiguous row: the max / min through the row reduction, then the
 * first index holding it (or the first NaN). */
#define ARG_ROW_FAST(NAME, T, DTYPE, FIELD, ISNAN)                                         \
    static int64_t NAME(int64_t n, const T *x, bool argmin)                                \
    {                                                                                      \
        const wf_cpu_row r = {argmin ? WF_CPU_KOP_MIN : WF_CPU_KOP_MAX,                    \
                              DTYPE,                                                       \
                              (const char *)x,                                             \
                              1,                                                           \
                              DTYPE,                                                       \
                              WF_CPU_ROW_PLAIN,                                            \
                              0,                                                           \
                              NULL,                                                        \
                              0};                                                          \
        const T m = wf__cpu_row_reduce(&r, n).FIELD;                                       \
        if (ISNAN(m)) {                                                                    \
            for (int64_t i = 0; i < n; i++)                                                \
                if (ISNAN(x[i]))                                                           \
                    return i;                                                              \
        }                                                                                  \
        for (int64_t i = 0; i < n; i++)                                                    \
            if (x[i] == m)                                                                 \
                return i;                                                                  \
        return 0;                                                                          \
    }
ARG_ROW_FAST(arg_row_f32, float, WF_DTYPE_F32, f32, NAN_F)
ARG_ROW_FAST(arg_row_f64, double, WF_DTYPE_F64, f64, NAN_F)
ARG_ROW_FAST(arg_row_i32, int32_t, WF_DTYPE_I32, i32, NAN_I)
ARG_ROW_FAST(arg_row_i64, int64_t, WF_DTYPE_I64, i64, NAN_I)
ARG_ROW_FAST(arg_row_u8, uint8_t, WF_DTYPE_U8, u8, NAN_I)
ARG_ROW_FAST(arg_row_u64, uint64_t, WF_DTYPE_U64, u64, NAN_I)

typedef struct arg_ctx {
    int64_t len;       /* axis length */
    int64_t sxa;       /* input stride along the axis (elements) */
    wf_dtype xdt, at;  /* input dtype, compute dtype */
    bool argmin;
    } arg_ctx;

/* Row form: operands [idx (uint32), x]; each element is one row. */
static void arg_rows(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx)
{
    const arg_ctx *c = ctx;
    const size_t xi = wf_dtype_size(c->xdt);
    uint32_t *idx = (uint32_t *)ptrs[0];
    for (int64_t r = 0; r < n; r++) {
        const char *x = ptrs[1] + r * strides[1] * (int64_t)xi;
        int64_t found = 0;
        if (c->xdt == c->at && c->sxa == 1) {
            switch (c->at) {
            case WF_DTYPE_F32: found = arg_row_f32(c->len, (const float *)x, c->argmin); break;
            case WF_DTYPE_F64: found = arg_row_f64(c->len, (const double *)x, c->argmin); break;
            case WF_DTYPE_I32: found = arg_row_i32(c->len, (const int32_t *)x, c->argmin); break;
            case WF_DTYPE_I64: found = arg_row_i64(c->len, (const int64_t *)x, c->argmin); break;
            case WF_DTYPE_U64: found = arg_row_u64(c->len, (const uint64_t *)x, c->argmin); break;
            default: found = arg_row_u8(c->len, (const uint8_t *)x, c->argmin); break;
            }
        } else {
            double blk[WF_CPU_STAGE];
            wf_cpu_scalar best;
            bool first = true;
            for (int64_t i0 = 0; i0 < c->len; i0 += WF_CPU_STAGE) {
                const int64_t m = c->len - i0 < WF_CPU_STAGE ? c->len - i0 : WF_CPU_STAGE;
                const char *src = x + i0 * c->sxa * (int64_t)xi;
                const void *b = src;
                int64_t bs = c->sxa;
                if (c->xdt != c->at) {
                    wf__cpu_convert_1d(m, src, c->xdt, c->sxa, blk, c->at, 1);
                    b = blk;
                    bs = 1;
                }
                switch (c->at) {
                case WF_DTYPE_F32:
                    arg_block_f32(m, b, bs, i0, c->argmin, &best.f32, &found, &first);
                    break;
                case WF_DTYPE_F64:
                    arg_block_f64(m, b, bs, i0, c->argmin, &best.f64, &found, &first);
                    break;
                case WF_DTYPE_I32:
                    arg_block_i32(m, b, bs, i0, c->argmin, &best.i32, &found,
                                  &first);
                    break;
                case WF_DTYPE_I64:
                    arg_block_i64(m, b, bs, i0, c->argmin, &best.i64, &found,
                                  &first);
                    break;
                case WF_DTYPE_U64:
                    arg_block_u64(m, b, bs, i0, c->argmin, &best.u64, &found, &first);
                    break;
                default:
                    arg_block_u8(m, b, bs, i0, c->argmin, &best.u8, &found,
                                 &first);
                    break;
                }
            }
        }
        idx[r * strides[0]] = (uint32_t)found;
    }
}

/* Vertical form: operands [idx (uint32), best (at), x (at, staged)]; merges
 * axis index k into the running bests. */
#define ARG_VERT(NAME, T, ISNAN)                                                           \
    static void NAME(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx) \
    {                                                                                    \
        const wf_cpu_stage_ctx *c = ctx;                                                             \
        uint32_t *restrict idx = (uint32_t *)ptrs[0];                                    \
        T *restrict best = (T *)ptrs[1];                                                 \
        const T *restrict x = (const T *)ptrs[2];                                        \
        const int64_t si = strides[0], sb = strides[1], sx = strides[2];                 \
        const uint32_t k = (uint32_t)c->index;                                           \
        if (k > 0 && si == 1 && sb == 1 && sx == 1) {                                    \
            int64_t i = 0;                                                               \
            if (c->flag) {                                                               \
                for (; i + 8 <= n; i += 8)                                               \
                    for (int j = 0; j < 8; j++) {                                        \
                        const T v = x[i + j], b = best[i + j];                           \
                        const bool take = !ISNAN(b) && (v < b || ISNAN(v));              \
                        best[i + j] = take ? v : b;                                      \
                        idx[i + j] = take ? k : idx[i + j];                              \
                    }                                                                    \
            } else {                                                                     \
                for (; i + 8 <= n; i += 8)                                               \
                    for (int j = 0; j < 8; j++) {                                        \
                        const T v = x[i + j], b = best[i + j];                           \
                        const bool take = !ISNAN(b) && (v > b || ISNAN(v));              \
                        best[i + j] = take ? v : b;                                      \
                        idx[i + j] = take ? k : idx[i + j];                              \
                    }                                                                    \
            }                                                                            \
            idx += i;                                                                    \
            best += i;                                                                   \
            x += i;                                                                      \
            n -= i;                                                                      \
        }                                                                                \
        if (k == 0) {                                                                    \
            for (int64_t i = 0; i < n; i++) {                                            \
                best[i * sb] = x[i * sx];                                                \
                idx[i * si] = 0;                                                         \
            }                                                                            \
            return;                                                                      \
        }                                                                                \
        if (c->flag) {                                                                   \
            for (int64_t i = 0; i < n; i++) {                                            \
                const T v = x[i * sx], b = best[i * sb];                                 \
                const bool take = !ISNAN(b) && (v < b || ISNAN(v));                      \
                best[i * sb] = take ? v : b;                                             \
                idx[i * si] = take ? k : idx[i * si];                                    \
            }                                                                            \
        } else {                                                                         \
            for (int64_t i = 0; i < n; i++) {                                            \
                const T v = x[i * sx], b = best[i * sb];                                 \
                const bool take = !ISNAN(b) && (v > b || ISNAN(v));                      \
                best[i * sb] = take ? v : b;                                             \
                idx[i * si] = take ? k : idx[i * si];                                    \
            }                                                                            \
        }                                                                                \
    }
ARG_VERT(arg_vert_u8, uint8_t, NAN_I)
ARG_VERT(arg_vert_i32, int32_t, NAN_I)
ARG_VERT(arg_vert_i64, int64_t, NAN_I)
ARG_VERT(arg_vert_u64, uint64_t, NAN_I)
ARG_VERT(arg_vert_f32, float, NAN_F)
ARG_VERT(arg_vert_f64, double, NAN_F)

struct vert_arg {
    const wf_cpu_stage_ctx *c;
    int64_t len;
    int64_t axis_stride_bytes; /* of operand 2 */
};

static void arg_vert_block(const wf_cpu_iter *sub, const struct vert_arg *a)
{
    wf_cpu_stage_ctx c = *a->c;
    wf_cpu_iter s = *sub;
    for (int64_t k = 0; k < a->len; k++) {
        c.index = k;
        s.data[2] = sub->data[2] + k * a->axis_stride_bytes;
        wf__cpu_iter_run(&s, wf__cpu_staged, &c);
    }
}

/* The axis loop over a chunk of the other dims; tiled along the innermost
 * when an operand is strided there, so a tile's bests stay in cache. */
static void arg_vert_tile(const wf_cpu_iter *tile, void *arg)
{
    arg_vert_block(tile, arg);
}

static void arg_vert_body(const wf_cpu_iter *sub, void *arg)
{
    wf__cpu_tiles_run(sub, true, arg_vert_tile, arg);
}

static wf_cpu_inner_fn arg_vert_loop(wf_dtype at)
{
    switch (at) {
    case WF_DTYPE_F32: return arg_vert_f32;
    case WF_DTYPE_F64: return arg_vert_f64;
    case WF_DTYPE_I32: return arg_vert_i32;
    case WF_DTYPE_I64: return arg_vert_i64;
    case WF_DTYPE_U64: return arg_vert_u64;
    default: return arg_vert_u8;
    }
}

/* The dtype the comparisons run in: halves in float32, the narrow integers
 * in int32, uint32 in int64 (each holds every value, in order). */
static wf_dtype arg_compute_dtype(wf_dtype in)
{
    switch (in) {
    case WF_DTYPE_F16:
    case WF_DTYPE_BF16: return WF_DTYPE_F32;
    case WF_DTYPE_I8:
    case WF_DTYPE_I16:
    case WF_DTYPE_U16: return WF_DTYPE_I32;
    case WF_DTYPE_U32: return WF_DTYPE_I64;
    default: return in;
    }
}

wf_status wf__cpu_arg_reduce(wf_array *out, wf_array *const *inputs, int ninputs,
                             const void *params)
{
    (void)ninputs;
    const wf_array *in = inputs[0];
    const wf_arg_reduce_params *p = params;
    wf_status st = wf__array_alloc_output(out);
    if (st != WF_OK)
        return st;
    if (out->size == 0)
        return WF_OK;
    const int64_t len = in->shape[p->axis];
    const wf_dtype at = arg_compute_dtype(in->dtype);
    if (len <= 1) {
        memset(wf__array_data_ptr(out), 0, (size_t)out->size * sizeof(uint32_t));
        return WF_OK;
    }
    const size_t xi = wf_dtype_size(in->dtype);
    char *data2[2] = {wf__array_data_ptr(out), wf__array_data_ptr(in)};
    const size_t items2[2] = {sizeof(uint32_t), xi};
    const enum wf_cpu_layout lay2[2] = {WF_CPU_LAYOUT_ACC, WF_CPU_LAYOUT_IN};
    wf_cpu_iter it;
    if (wf__cpu_axis_walk(&it, in, p->axis, 2, data2, items2, lay2)) {
        arg_ctx c = {len, in->strides[p->axis], in->dtype, at, p->op == 1};
        int64_t per = WF_CPU_RED_CHEAP / len;
        wf__cpu_iter_run_parallel(&it, arg_rows, &c, per > 0 ? per : 1);
        return WF_OK;
    }
    /* Vertical: walk the other dims once per axis index, keeping the bests
     * of a chunk of outputs in cache. */
    wf_buffer *bb = wf__cpu_scratch(out->size, at);
    if (bb == NULL)
        return WF_ERR_OUT_OF_MEMORY;
    wf_cpu_stage_ctx c;
    wf__cpu_stage_init(&c, arg_vert_loop(at), at);
    c.flag = p->op == 1;
    c.item[0] = sizeof(uint32_t);
    c.item[1] = wf_dtype_size(at);
    c.item[2] = xi;
    if (in->dtype != at) {
        c.xop = 2;
        c.xdt = in->dtype;
    }
    char *data3[3] = {wf__array_data_ptr(out), bb->data, wf__array_data_ptr(in)};
    const enum wf_cpu_layout lay3[3] = {WF_CPU_LAYOUT_ACC, WF_CPU_LAYOUT_ACC, WF_CPU_LAYOUT_IN};
    wf__cpu_axis_walk(&it, in, p->axis, 3, data3, c.item, lay3);
    struct vert_arg va = {&c, len, in->strides[p->axis] * (int64_t)xi};
    wf__cpu_vertical_run(&it, -1, len, WF_CPU_RED_CHEAP, arg_vert_body, &va);
    wf__buffer_release(bb);
    return WF_OK;
}
