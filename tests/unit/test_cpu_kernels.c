/*
 * CPU backend loops on raw memory: the strided iterator (dim dropping and
 * merging, outer walk), strided copies (transposed, 0-stride broadcast,
 * negative strides), every dtype conversion pair against a reference, the
 * float16 / bfloat16 rounding of conversions, and the pairwise sums.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/vmath.h"
#include "core/dtype.h"
#include "harness.h"

/* ---------------------------------------------------------------- iterator */

static void test_iter_merges_contiguous_dims(void)
{
    const int64_t shape[3] = {2, 3, 4};
    const int64_t strides[3] = {12, 4, 1};
    char buf[24 * 4];
    char *data[1] = {buf};
    const size_t sizes[1] = {4};
    const int64_t *st[1] = {strides};
    wf_cpu_iter it;
    wf__cpu_iter_init(&it, 3, shape, 1, data, sizes, st);
    CHECK_EQ_INT(it.ndim, 1);
    CHECK_EQ_INT(it.shape[0], 24);
    CHECK_EQ_INT(it.strides[0][0], 1);
    CHECK(!it.empty);
}

static void test_iter_keeps_transposed_dims(void)
{
    /* A (3, 4) view of a (4, 3) buffer: strides (1, 3). Nothing merges. */
    const int64_t shape[2] = {3, 4};
    const int64_t strides[2] = {1, 3};
    float buf[12];
    char *data[1] = {(char *)buf};
    const size_t sizes[1] = {4};
    const int64_t *st[1] = {strides};
    wf_cpu_iter it;
    wf__cpu_iter_init(&it, 2, shape, 1, data, sizes, st);
    CHECK_EQ_INT(it.ndim, 2);
    CHECK_EQ_INT(it.strides[0][1], 3);
}

static void test_iter_merge_needs_every_operand(void)
{
    /* Operand 0 contiguous, operand 1 broadcast on dim 0 (stride 0): the two
     * dims merge for the first but not the second. */
    const int64_t shape[2] = {5, 6};
    const int64_t s0[2] = {6, 1}, s1[2] = {0, 1};
    float a[30], b[6];
    char *data[2] = {(char *)a, (char *)b};
    const size_t sizes[2] = {4, 4};
    const int64_t *st[2] = {s0, s1};
    wf_cpu_iter it;
    wf__cpu_iter_init(&it, 2, shape, 2, data, sizes, st);
    CHECK_EQ_INT(it.ndim, 2);
    /* Two broadcast dims in a row merge with each other. */
    const int64_t shape3[3] = {2, 5, 6};
    const int64_t t0[3] = {30, 6, 1}, t1[3] = {0, 0, 1};
    const int64_t *st3[2] = {t0, t1};
    wf__cpu_iter_init(&it, 3, shape3, 2, data, sizes, st3);
    CHECK_EQ_INT(it.ndim, 2);
    CHECK_EQ_INT(it.shape[0], 10);
    CHECK_EQ_INT(it.strides[1][0], 0);
}

static void test_iter_drops_unit_dims_and_handles_empty(void)
{
    const int64_t shape[4] = {1, 3, 1, 2};
    const int64_t strides[4] = {99, 2, 77, 1};
    float buf[6];
    char *data[1] = {(char *)buf};
    const size_t sizes[1] = {4};
    const int64_t *st[1] = {strides};
    wf_cpu_iter it;
    wf__cpu_iter_init(&it, 4, shape, 1, data, sizes, st);
    CHECK_EQ_INT(it.ndim, 1);
    CHECK_EQ_INT(it.shape[0], 6);

    const int64_t empty[3] = {4, 0, 2};
    wf__cpu_iter_init(&it, 3, empty, 1, data, sizes, st);
    CHECK(it.empty);

    wf__cpu_iter_init(&it, 0, NULL, 1, data, sizes, st);
    CHECK(!it.empty);
    CHECK_EQ_INT(it.ndim, 0);
}

struct visit_log {
    int calls;
    int64_t total;
    int64_t order[64];
    int count;
};

static void record_rows(int64_t n, char *const *ptrs, const int64_t *strides, const void *ctx)
{
    struct visit_log *log = (struct visit_log *)ctx;
    const int32_t *x = (const int32_t *)ptrs[0];
    log->calls++;
    log->total += n;
    for (int64_t i = 0; i < n; i++)
        log->order[log->count++] = x[i * strides[0]];
}

static void test_iter_visits_in_row_major_order(void)
{
    /* Values equal to their flat index in a (4, 3) buffer, viewed transposed
     * as (3, 4): visiting order must be the transposed row-major order. */
    int32_t buf[12];
    for (int i = 0; i < 12; i++)
        buf[i] = i;
    const int64_t shape[2] = {3, 4};
    const int64_t strides[2] = {1, 3};
    char *data[1] = {(char *)buf};
    const size_t sizes[1] = {4};
    const int64_t *st[1] = {strides};
    wf_cpu_iter it;
    wf__cpu_iter_init(&it, 2, shape, 1, data, sizes, st);
    struct visit_log log = {0};
    wf__cpu_iter_run(&it, record_rows, &log);
    CHECK_EQ_INT(log.calls, 3);
    CHECK_EQ_INT(log.total, 12);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            CHECK_EQ_INT(log.order[i * 4 + j], j * 3 + i);

    /* 0-d: one call of one element. */
    struct visit_log one = {0};
    wf__cpu_iter_init(&it, 0, NULL, 1, data, sizes, st);
    wf__cpu_iter_run(&it, record_rows, &one);
    CHECK_EQ_INT(one.calls, 1);
    CHECK_EQ_INT(one.order[0], 0);

    /* Empty: no call. */
    struct visit_log none = {0};
    const int64_t empty[2] = {0, 4};
    wf__cpu_iter_init(&it, 2, empty, 1, data, sizes, st);
    wf__cpu_iter_run(&it, record_rows, &none);
    CHECK_EQ_INT(none.calls, 0);
}

static void test_dims_by_stride(void)
{
    const int64_t strides[4] = {1, 12, -4, 0};
    int perm[4];
    wf__cpu_dims_by_stride(4, strides, perm);
    CHECK_EQ_INT(perm[0], 1);
    CHECK_EQ_INT(perm[1], 2);
    CHECK_EQ_INT(perm[2], 0);
    CHECK_EQ_INT(perm[3], 3);
}

/* ---------------------------------------------------------------- copies */

/* Reference: element at multi-index of a strided block, by index math. */
static int64_t ref_offset(int ndim, const int64_t *shape, const int64_t *strides, int64_t flat)
{
    int64_t off = 0;
    for (int d = ndim - 1; d >= 0; d--) {
        off += (flat % shape[d]) * strides[d];
        flat /= shape[d];
    }
    return off;
}

static void check_copy(int ndim, const int64_t *shape, const int64_t *strides, const double *src)
{
    int64_t size = 1;
    for (int d = 0; d < ndim; d++)
        size *= shape[d];
    double *dst = calloc((size_t)size + 1, sizeof *dst);
    wf__cpu_copy_strided(ndim, shape, sizeof(double), src, strides, dst);
    for (int64_t i = 0; i < size; i++)
        CHECK_EQ_INT((int64_t)dst[i], (int64_t)src[ref_offset(ndim, shape, strides, i)]);
    free(dst);
}

static void test_copy_strided_layouts(void)
{
    double buf[120];
    for (int i = 0; i < 120; i++)
        buf[i] = i;
    /* Transposed (4, 5) of a (5, 4) buffer. */
    check_copy(2, (int64_t[]){4, 5}, (int64_t[]){1, 4}, buf);
    /* 0-stride broadcast rows and a fully broadcast scalar. */
    check_copy(2, (int64_t[]){3, 7}, (int64_t[]){0, 1}, buf);
    check_copy(3, (int64_t[]){2, 3, 4}, (int64_t[]){0, 0, 0}, buf + 9);
    /* Step-2 slice of a (4, 5, 6) block. */
    check_copy(3, (int64_t[]){2, 3, 3}, (int64_t[]){60, 6, 2}, buf + 1);
    /* Negative strides, as from x[::-1, ::-2]: start at the last element. */
    check_copy(2, (int64_t[]){5, 2}, (int64_t[]){-4, -2}, buf + 19);
    /* 0-d and a contiguous block. */
    check_copy(0, NULL, NULL, buf + 7);
    check_copy(2, (int64_t[]){6, 20}, (int64_t[]){20, 1}, buf);
}

/* Both dims >= 32 take the tiled transposing path, with partial tiles at
 * the edges. */
static void test_copy_transposed_tiles(void)
{
    const int64_t n = 3 * 70 * 45;
    double *buf = malloc((size_t)n * sizeof *buf);
    for (int64_t i = 0; i < n; i++)
        buf[i] = (double)i;
    check_copy(2, (int64_t[]){70, 45}, (int64_t[]){1, 70}, buf);               /* transpose */
    check_copy(3, (int64_t[]){3, 45, 70}, (int64_t[]){3150, 1, 45}, buf);      /* batched */
    check_copy(2, (int64_t[]){70, 45}, (int64_t[]){-1, 70}, buf + 69);         /* reversed */
    check_copy(2, (int64_t[]){64, 33}, (int64_t[]){1, 140}, buf);              /* stepped */
    free(buf);
}

static void test_copy_item_sizes(void)
{
    uint8_t b8[16];
    uint16_t b16[16];
    float b32[16];
    for (int i = 0; i < 16; i++) {
        b8[i] = (uint8_t)i;
        b16[i] = (uint16_t)(1000 + i);
        b32[i] = (float)i * 0.5f;
    }
    const int64_t shape[1] = {8}, stride[1] = {-2};
    uint8_t o8[8];
    uint16_t o16[8];
    float o32[8];
    wf__cpu_copy_strided(1, shape, 1, b8 + 15, stride, o8);
    wf__cpu_copy_strided(1, shape, 2, b16 + 15, stride, o16);
    wf__cpu_copy_strided(1, shape, 4, b32 + 15, stride, o32);
    for (int i = 0; i < 8; i++) {
        CHECK_EQ_INT(o8[i], 15 - 2 * i);
        CHECK_EQ_INT(o16[i], 1015 - 2 * i);
        CHECK_NEAR(o32[i], (15 - 2 * i) * 0.5, 0);
    }
    /* A 0-stride fill longer than one vector block. */
    const int64_t long_shape[1] = {37}, zero[1] = {0};
    uint16_t fill[37];
    wf__cpu_copy_strided(1, long_shape, 2, b16 + 3, zero, fill);
    for (int i = 0; i < 37; i++)
        CHECK_EQ_INT(fill[i], 1003);
}

/* Every block transpose (each element size, each ISA variant this CPU
 * runs) against element-by-element indexing, with whole blocks and edges,
 * leading dims wider than the block, and the padding left alone. */
static void check_transpose(size_t item, int64_t rows, int64_t cols, int isa)
{
    const int64_t ls = cols + 3, ld = rows + 5;
    unsigned char *src = malloc((size_t)(rows * ls) * item);
    unsigned char *dst = malloc((size_t)(cols * ld) * item);
    for (int64_t i = 0; i < rows * ls * (int64_t)item; i++)
        src[i] = (unsigned char)(i * 131 + i / 251);
    memset(dst, 0xA5, (size_t)(cols * ld) * item);
    wf__cpu_transpose_block(rows, cols, item, src, ls, dst, ld);
    int bad = 0;
    for (int64_t j = 0; j < cols; j++)
        for (int64_t i = 0; i < ld; i++) {
            const unsigned char *got = dst + (j * ld + i) * (int64_t)item;
            for (size_t b = 0; b < item; b++) {
                const int want = i < rows ? src[(i * ls + j) * (int64_t)item + (int64_t)b] : 0xA5;
                bad += got[b] != want;
            }
        }
    if (bad)
        printf("    transpose item %zu, %lld x %lld, isa %s: %d bytes wrong\n", item,
               (long long)rows, (long long)cols, wf__vm_isa_name(isa), bad);
    CHECK_EQ_INT(bad, 0);
    free(src);
    free(dst);
}

static void test_transpose_block_every_isa(void)
{
    static const int64_t dims[][2] = {{16, 16}, {64, 64}, {37, 53}, {8, 24}, {3, 70}, {33, 17}};
    static const size_t items[4] = {1, 2, 4, 8};
    const int active = wf__vm_isa_active();
    for (int isa = 0; isa < WF_VM_ISA_COUNT; isa++) {
        if (!wf_test_runs_isa(isa, wf__vm_isa_best()) || wf__vm_isa_force(isa) != WF_OK)
            continue;
        for (int k = 0; k < 4; k++)
            for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
                check_transpose(items[k], dims[d][0], dims[d][1], isa);
    }
    CHECK_OK(wf__vm_isa_force(-1));
    CHECK_EQ_INT(wf__vm_isa_active(), active);
}

/* Streaming copies: every alignment of the destination and lengths around
 * whole lines. */
static void test_stream_copy(void)
{
    unsigned char src[400], dst[480];
    for (int i = 0; i < 400; i++)
        src[i] = (unsigned char)(i * 7 + 1);
    static const size_t lengths[] = {0, 1, 63, 64, 65, 127, 128, 200, 333, 400};
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++)
        for (int offset = 0; offset < 70; offset += 3) {
            memset(dst, 0, sizeof dst);
            wf__cpu_stream_copy(dst + offset, src, lengths[l]);
            wf__cpu_stream_fence();
            CHECK(memcmp(dst + offset, src, lengths[l]) == 0);
            CHECK_EQ_INT(dst[offset + (int)lengths[l]], 0);
            for (int i = 0; i < offset; i++)
                CHECK_EQ_INT(dst[i], 0);
        }
}

/* A transposed copy large enough that the tiled walk streams its output
 * (over 16 MB), with partial tiles at the edges. */
static void test_copy_transposed_streamed(void)
{
    const int64_t rows = 2050, cols = 2100;
    float *src = malloc((size_t)(rows * cols) * sizeof *src);
    float *dst = malloc((size_t)(rows * cols) * sizeof *dst);
    for (int64_t i = 0; i < rows * cols; i++)
        src[i] = (float)i;
    const int64_t shape[2] = {cols, rows}, strides[2] = {1, cols};
    wf__cpu_copy_strided(2, shape, sizeof(float), src, strides, dst);
    int64_t bad = 0;
    for (int64_t j = 0; j < cols; j++)
        for (int64_t i = 0; i < rows; i++)
            bad += dst[j * rows + i] != src[i * cols + j];
    CHECK_EQ_INT(bad, 0);
    free(src);
    free(dst);
}

/* ---------------------------------------------------------------- conversions */

static bool dtype_is_int(wf_dtype d)
{
    return d == WF_DTYPE_U8 || d == WF_DTYPE_I32 || d == WF_DTYPE_I64 || d == WF_DTYPE_I8 ||
           d == WF_DTYPE_I16 || d == WF_DTYPE_U16 || d == WF_DTYPE_U32 || d == WF_DTYPE_U64;
}

/* Reads element i of a typed buffer: integers exactly (uint64 as its bits),
 * floats as double. */
static int64_t load_int(const void *p, wf_dtype d, int64_t i)
{
    switch (d) {
    case WF_DTYPE_BOOL:
    case WF_DTYPE_U8: return ((const uint8_t *)p)[i];
    case WF_DTYPE_I8: return ((const int8_t *)p)[i];
    case WF_DTYPE_I16: return ((const int16_t *)p)[i];
    case WF_DTYPE_U16: return ((const uint16_t *)p)[i];
    case WF_DTYPE_I32: return ((const int32_t *)p)[i];
    case WF_DTYPE_U32: return ((const uint32_t *)p)[i];
    default: return ((const int64_t *)p)[i];
    }
}

/* int64 to float16 (11 significant bits) or bfloat16 (8) rounded once to
 * nearest even, in integer arithmetic: independent of the library's way
 * (float32 rounded to odd) and exact where a double is not (|v| > 2^53). */
static uint16_t reference_mag_to_half(uint64_t mag, bool negative, wf_dtype half);
static uint16_t reference_i64_to_half(int64_t v, wf_dtype half)
{
    return reference_mag_to_half(v < 0 ? 0u - (uint64_t)v : (uint64_t)v, v < 0, half);
}
/* The magnitude `mag` with a sign, rounded once to a half type. */
static uint16_t reference_mag_to_half(uint64_t mag, bool negative, wf_dtype half)
{
    const int bits = half == WF_DTYPE_F16 ? 11 : 8;
    int top = 63;
    while (top > 0 && !(mag >> top))
        top--;
    if (top >= bits) { /* drop the bits below the kept ones, rounding */
        const int shift = top - bits + 1;
        const uint64_t rest = mag & ((UINT64_C(1) << shift) - 1), half_ulp = UINT64_C(1) << (shift - 1);
        mag >>= shift;
        mag += rest > half_ulp || (rest == half_ulp && (mag & 1));
        const float rounded = ldexpf((float)mag, shift); /* at most 2^64: exact */
        return half == WF_DTYPE_F16 ? wf__f32_to_f16(negative ? -rounded : rounded)
                                    : wf__f32_to_bf16(negative ? -rounded : rounded);
    }
    const float exact = negative ? -(float)mag : (float)mag;
    return half == WF_DTYPE_F16 ? wf__f32_to_f16(exact) : wf__f32_to_bf16(exact);
}

/* The expected conversion of element i of src into dtype dst, written by
 * wf__store_from_double except for integer -> integer, which wraps, and
 * int64 -> half (reference_i64_to_half). */
static void expected_convert(const void *src, wf_dtype sd, int64_t i, void *out, wf_dtype dd)
{
    if (sd == dd) { /* a copy */
        memcpy(out, (const char *)src + (size_t)i * wf_dtype_size(sd), wf_dtype_size(sd));
        return;
    }
    if ((dtype_is_int(sd) || sd == WF_DTYPE_BOOL) && dtype_is_int(dd)) {
        const uint64_t v = (uint64_t)load_int(src, sd, i); /* wraps: the low bytes */
        memcpy(out, &v, wf_dtype_size(dd));                 /* (little-endian) */
        return;
    }
    if (sd == WF_DTYPE_I64 && (dd == WF_DTYPE_F16 || dd == WF_DTYPE_BF16)) {
        *(uint16_t *)out = reference_i64_to_half(load_int(src, sd, i), dd);
        return;
    }
    if (sd == WF_DTYPE_U64) { /* unsigned, each rounded once by C */
        const uint64_t v = ((const uint64_t *)src)[i];
        if (dd == WF_DTYPE_F16 || dd == WF_DTYPE_BF16)
            *(uint16_t *)out = reference_mag_to_half(v, false, dd);
        else if (dd == WF_DTYPE_F32)
            *(float *)out = (float)v;
        else if (dd == WF_DTYPE_F64)
            *(double *)out = (double)v;
        else if (dd == WF_DTYPE_C64)
            ((float *)out)[0] = (float)v, ((float *)out)[1] = 0.0f;
        else
            *(uint8_t *)out = v != 0; /* bool */
        return;
    }
    if (sd == WF_DTYPE_C64 && dd == WF_DTYPE_BOOL) { /* either part non-zero */
        const float *z = (const float *)src + 2 * i;
        *(uint8_t *)out = z[0] != 0.0f || z[1] != 0.0f;
        return;
    }
    if (dtype_is_int(sd) || sd == WF_DTYPE_BOOL) {
        wf__store_from_double(out, dd, 0, (double)load_int(src, sd, i));
        return;
    }
    wf__store_from_double(out, dd, 0, wf__load_as_double(src, sd, i));
}

static bool same_element(const void *a, const void *b, wf_dtype d)
{
    if (d == WF_DTYPE_F32) {
        float x, y;
        memcpy(&x, a, 4);
        memcpy(&y, b, 4);
        return (isnan(x) && isnan(y)) || memcmp(&x, &y, 4) == 0;
    }
    if (d == WF_DTYPE_C64) /* two float32, each NaN matching any NaN */
        return same_element(a, b, WF_DTYPE_F32) &&
               same_element((const char *)a + 4, (const char *)b + 4, WF_DTYPE_F32);
    if (d == WF_DTYPE_F64) {
        double x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        return (isnan(x) && isnan(y)) || memcmp(&x, &y, 8) == 0;
    }
    if (d == WF_DTYPE_F16 || d == WF_DTYPE_BF16) {
        uint16_t x, y;
        memcpy(&x, a, 2);
        memcpy(&y, b, 2);
        float fx = d == WF_DTYPE_F16 ? wf__f16_to_f32(x) : wf__bf16_to_f32(x);
        float fy = d == WF_DTYPE_F16 ? wf__f16_to_f32(y) : wf__bf16_to_f32(y);
        return (isnan(fx) && isnan(fy)) || x == y;
    }
    return memcmp(a, b, wf_dtype_size(d)) == 0;
}

enum { NSAMPLES = 24 };

/* Fills `buf` with NSAMPLES test values of dtype d: edge values for
 * saturation, wraparound, rounding, NaN and infinities. */
static void fill_samples(void *buf, wf_dtype d)
{
    static const double floats[NSAMPLES] = {
        0.0,     -0.0,  0.5,  -0.5,    1.5,     -1.5,      2.5,    255.9,
        256.0,   -300,  1e10, -1e10,   65504,   65520,     1e-8,   NAN,
        INFINITY, -INFINITY, 3.0e38, -2147483649.0, 2147483647.5, 1.0009765625, 7, 1e300};
    static const int64_t ints[NSAMPLES] = {
        0, 1, -1, 2, 127, 128, 255, 256, 300, -129, 65535, 65536,
        2147483647, 2147483648LL, -2147483648LL, -2147483649LL,
        (1LL << 40) + 5, -(1LL << 40), 16777217, 123456789, INT64_MAX, INT64_MIN, 42, -7};
    for (int i = 0; i < NSAMPLES; i++) {
        switch (d) {
        case WF_DTYPE_BOOL: ((uint8_t *)buf)[i] = (uint8_t)(i % 3 == 0); break;
        case WF_DTYPE_U8: ((uint8_t *)buf)[i] = (uint8_t)(ints[i] & 0xff); break;
        case WF_DTYPE_I32: ((int32_t *)buf)[i] = (int32_t)(uint32_t)(uint64_t)ints[i]; break;
        case WF_DTYPE_I64: ((int64_t *)buf)[i] = ints[i]; break;
        case WF_DTYPE_I8:
        case WF_DTYPE_I16:
        case WF_DTYPE_U16:
        case WF_DTYPE_U32:
        case WF_DTYPE_U64: /* the low bytes: wrapped */
            memcpy((char *)buf + (size_t)i * wf_dtype_size(d), &ints[i], wf_dtype_size(d));
            break;
        default: wf__store_from_double(buf, d, i, floats[i]); break;
        }
    }
}

static void check_convert_all_pairs(void)
{
    int failures = 0;
    for (int s = 0; s < WF_DTYPE_COUNT; s++) {
        for (int t = 0; t < WF_DTYPE_COUNT; t++) {
            const wf_dtype sd = (wf_dtype)s, dd = (wf_dtype)t;
            uint64_t src[NSAMPLES], dst[NSAMPLES], want;
            fill_samples(src, sd);
            memset(dst, 0xAB, sizeof dst);
            wf__cpu_convert_1d(NSAMPLES, src, sd, 1, dst, dd, 1);
            const size_t item = wf_dtype_size(dd);
            for (int i = 0; i < NSAMPLES; i++) {
                want = 0;
                expected_convert(src, sd, i, &want, dd);
                if (same_element((char *)dst + (size_t)i * item, &want, dd))
                    continue;
                if (failures++ < 10)
                    printf("    %s -> %s differs from the reference on sample %d\n",
                           wf_dtype_name(sd), wf_dtype_name(dd), i);
            }
        }
    }
    CHECK_EQ_INT(failures, 0);
}

/* Every pair over 4099 values (random bit patterns, and random values in
 * +-300 with fractions), against the element-by-element reference: the
 * vector loops and their tails give the reference's bits. */
static void check_convert_random(void)
{
    enum { N = 4099 };
    uint64_t *src = malloc(N * sizeof *src), *dst = malloc(N * sizeof *dst);
    uint64_t state = 0x9e3779b97f4a7c15u;
    int failures = 0;
    for (int s = 0; s < WF_DTYPE_COUNT; s++) {
        const wf_dtype sd = (wf_dtype)s;
        const size_t sitem = wf_dtype_size(sd);
        for (int i = 0; i < N; i++) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            if (i % 2 == 0 || !wf__dtype_is_float(sd))
                memcpy((char *)src + (size_t)i * sitem, &state, sitem);
            else
                wf__store_from_double(src, sd, i, (double)(int64_t)(state % 600001) / 1000.0 - 300);
        }
        if (sd == WF_DTYPE_BOOL) /* bool bytes are 0 or 1 */
            for (int i = 0; i < N; i++)
                ((uint8_t *)src)[i] &= 1;
        for (int t = 0; t < WF_DTYPE_COUNT; t++) {
            const wf_dtype dd = (wf_dtype)t;
            const size_t item = wf_dtype_size(dd);
            wf__cpu_convert_1d(N, src, sd, 1, dst, dd, 1);
            for (int i = 0; i < N; i++) {
                uint64_t want = 0;
                expected_convert(src, sd, i, &want, dd);
                if (same_element((char *)dst + (size_t)i * item, &want, dd))
                    continue;
                if (failures++ < 10)
                    printf("    %s -> %s differs from the reference at %d\n", wf_dtype_name(sd),
                           wf_dtype_name(dd), i);
            }
        }
    }
    CHECK_EQ_INT(failures, 0);
    free(src);
    free(dst);
}

/* int64 -> float16/bfloat16 where rounding twice goes wrong: at every
 * exponent, values just above, at and just below the halfway point between
 * two halves, the part that decides it as far down as bit 0 (lost by a
 * double, by float32's nearest). Vector loops, their tails and the scalar
 * helpers against the integer reference. */
static void check_i64_to_half_rounds_once(void)
{
    enum { MAX = 64 * 2 * 3 * 8 };
    int64_t *src = malloc(MAX * sizeof *src);
    uint16_t *got = malloc(MAX * sizeof *got);
    int n = 0;
    for (int top = 8; top < 63; top++) {
        for (int bits = 8; bits <= 11 && bits <= top; bits += 3) {
            const uint64_t base = UINT64_C(1) << top, half = UINT64_C(1) << (top - bits);
            const uint64_t odd = base + (half << 1); /* a half with its last bit set */
            const int64_t nudges[4] = {0, 1, -1, top > 30 ? (int64_t)1 << (top - 30) : 2};
            for (int k = 0; k < 4; k++) {
                src[n++] = (int64_t)(base + half + (uint64_t)nudges[k]);
                src[n++] = -(int64_t)(odd + half + (uint64_t)nudges[k]);
            }
        }
    }
    int failures = 0;
    for (int t = 0; t < 2; t++) {
        const wf_dtype half = t ? WF_DTYPE_BF16 : WF_DTYPE_F16;
        wf__cpu_convert_1d(n, src, WF_DTYPE_I64, 1, got, half, 1);
        for (int i = 0; i < n; i++) {
            const uint16_t want = reference_i64_to_half(src[i], half);
            const uint16_t scalar = t ? wf__i64_to_bf16(src[i]) : wf__i64_to_f16(src[i]);
            if (got[i] == want && scalar == want)
                continue;
            if (failures++ < 10)
                printf("    %lld -> %s: got %04x, scalar %04x, want %04x\n", (long long)src[i],
                       wf_dtype_name(half), got[i], scalar, want);
        }
    }
    CHECK_EQ_INT(failures, 0);
    free(src);
    free(got);
}

static void check_convert_defined_edges(void)
{
    const float f[6] = {NAN, 1e20f, -1e20f, -0.7f, 255.5f, 2.9f};
    int32_t i32[6];
    uint8_t u8[6], b[6];
    int64_t i64[6];
    wf__cpu_convert_1d(6, f, WF_DTYPE_F32, 1, i32, WF_DTYPE_I32, 1);
    wf__cpu_convert_1d(6, f, WF_DTYPE_F32, 1, u8, WF_DTYPE_U8, 1);
    wf__cpu_convert_1d(6, f, WF_DTYPE_F32, 1, b, WF_DTYPE_BOOL, 1);
    wf__cpu_convert_1d(6, f, WF_DTYPE_F32, 1, i64, WF_DTYPE_I64, 1);
    const int32_t want32[6] = {0, INT32_MAX, INT32_MIN, 0, 255, 2};
    const uint8_t want8[6] = {0, 255, 0, 0, 255, 2};
    const uint8_t wantb[6] = {1, 1, 1, 1, 1, 1};
    const int64_t want64[6] = {0, INT64_MAX, INT64_MIN, 0, 255, 2};
    for (int i = 0; i < 6; i++) {
        CHECK_EQ_INT(i32[i], want32[i]);
        CHECK_EQ_INT(u8[i], want8[i]);
        CHECK_EQ_INT(b[i], wantb[i]);
        CHECK_EQ_INT(i64[i], want64[i]);
    }
    /* float64 at the ends of int64, int32 and uint8, 16 values at a time so
     * the vector loops see them. */
    const double d[16] = {0x1p63, -0x1p63, 9223372036854774784.0, -9223372036854774784.0,
                          0x1p64, -0x1p64, INFINITY, -INFINITY, NAN, 2147483647.0, 2147483648.0,
                          -2147483648.0, -2147483649.0, 254.99, 255.0, -0.99};
    const int64_t want_d64[16] = {INT64_MAX, INT64_MIN, 9223372036854774784LL,
                                  -9223372036854774784LL, INT64_MAX, INT64_MIN, INT64_MAX,
                                  INT64_MIN, 0, 2147483647, 2147483648LL, -2147483648LL,
                                  -2147483649LL, 254, 255, 0};
    const int32_t want_d32[16] = {INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN, INT32_MAX,
                                  INT32_MIN, INT32_MAX, INT32_MIN, 0, INT32_MAX, INT32_MAX,
                                  INT32_MIN, INT32_MIN, 254, 255, 0};
    const uint8_t want_d8[16] = {255, 0, 255, 0, 255, 0, 255, 0, 0, 255, 255, 0, 0, 254, 255, 0};
    int64_t got64[16];
    int32_t got32[16];
    uint8_t got8[16];
    wf__cpu_convert_1d(16, d, WF_DTYPE_F64, 1, got64, WF_DTYPE_I64, 1);
    wf__cpu_convert_1d(16, d, WF_DTYPE_F64, 1, got32, WF_DTYPE_I32, 1);
    wf__cpu_convert_1d(16, d, WF_DTYPE_F64, 1, got8, WF_DTYPE_U8, 1);
    for (int i = 0; i < 16; i++) {
        CHECK(got64[i] == want_d64[i]);
        CHECK_EQ_INT(got32[i], want_d32[i]);
        CHECK_EQ_INT(got8[i], want_d8[i]);
    }

    /* Integer narrowing wraps. */
    const int64_t wide[4] = {256 + 7, -1, 4294967296LL + 5, 2147483648LL};
    int32_t narrow[4];
    uint8_t bytes[4];
    wf__cpu_convert_1d(4, wide, WF_DTYPE_I64, 1, narrow, WF_DTYPE_I32, 1);
    wf__cpu_convert_1d(4, wide, WF_DTYPE_I64, 1, bytes, WF_DTYPE_U8, 1);
    CHECK_EQ_INT(narrow[0], 263);
    CHECK_EQ_INT(narrow[1], -1);
    CHECK_EQ_INT(narrow[2], 5);
    CHECK_EQ_INT(narrow[3], INT32_MIN);
    CHECK_EQ_INT(bytes[0], 7);
    CHECK_EQ_INT(bytes[1], 255);
}

static void test_convert_strided(void)
{
    /* Transposed (3, 2) int32 view -> contiguous float64, and a reversed
     * float32 row into every other slot of an int64 buffer. */
    const int32_t src[6] = {0, 1, 2, 3, 4, 5}; /* a (2, 3) buffer */
    double dst[6];
    const int64_t shape[2] = {3, 2}, sst[2] = {1, 3}, dstst[2] = {2, 1};
    wf__cpu_convert_strided(2, shape, src, WF_DTYPE_I32, sst, dst, WF_DTYPE_F64, dstst);
    const double want[6] = {0, 3, 1, 4, 2, 5};
    for (int i = 0; i < 6; i++)
        CHECK_NEAR(dst[i], want[i], 0);

    const float row[5] = {1.5f, 2.5f, 3.5f, 4.5f, 5.5f};
    int64_t out[10] = {0};
    wf__cpu_convert_1d(5, row + 4, WF_DTYPE_F32, -1, out, WF_DTYPE_I64, 2);
    for (int i = 0; i < 5; i++) {
        CHECK_EQ_INT(out[2 * i], 5 - i);
        CHECK_EQ_INT(out[2 * i + 1], 0);
    }
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void check_half_rounding(void)
{
    const float in[10] = {
        1.0f + 0x1p-11f,       /* halfway 1 and 1+2^-10: even -> 1.0 */
        1.0f + 3 * 0x1p-11f,   /* halfway 1+2^-10 and 1+2^-9: even -> 1+2^-9 */
        1.0f + 0x1p-11f + 0x1p-20f, /* just above halfway: up */
        65519.0f,              /* rounds to 65504 */
        65520.0f,              /* rounds to inf */
        0x1p-25f,              /* half the smallest subnormal: even -> 0 */
        3 * 0x1p-25f,          /* 1.5 subnormal ulps: even -> 2 ulps */
        -0.0f,
        NAN,
        -INFINITY,
    };
    const uint16_t want_f16[10] = {0x3C00, 0x3C02, 0x3C01, 0x7BFF, 0x7C00,
                                   0x0000, 0x0002, 0x8000, 0x7E00, 0xFC00};
    uint16_t h[10];
    wf__cpu_convert_1d(10, in, WF_DTYPE_F32, 1, h, WF_DTYPE_F16, 1);
    for (int i = 0; i < 10; i++)
        CHECK_EQ_INT(h[i], want_f16[i]);

    /* NaNs with payloads (quiet and signaling, both signs) inside whole
     * blocks of 8: every variant gives the quiet NaN with the sign kept, and
     * the block's other values are still converted. */
    float nans[16];
    uint16_t want_nans[16], got_nans[16];
    for (int i = 0; i < 16; i++) {
        nans[i] = (float)i + 0.5f;
        want_nans[i] = wf__f32_to_f16(nans[i]);
    }
    nans[3] = bits_f32(0x7FF12345u);
    nans[12] = bits_f32(0xFFA00000u);
    want_nans[3] = 0x7E00;
    want_nans[12] = 0xFE00;
    wf__cpu_convert_1d(16, nans, WF_DTYPE_F32, 1, got_nans, WF_DTYPE_F16, 1);
    for (int i = 0; i < 16; i++)
        CHECK_EQ_INT(got_nans[i], want_nans[i]);
    /* bfloat16 keeps the payload's top bits (quieted) in every variant. */
    wf__cpu_convert_1d(16, nans, WF_DTYPE_F32, 1, got_nans, WF_DTYPE_BF16, 1);
    for (int i = 0; i < 16; i++)
        CHECK_EQ_INT(got_nans[i], wf__f32_to_bf16(nans[i]));
    CHECK_EQ_INT(got_nans[3], 0x7FF1);
    CHECK_EQ_INT(got_nans[12], 0xFFE0);

    const float bin[6] = {
        1.0f + 0x1p-8f,        /* halfway: even -> 1.0 */
        1.0f + 3 * 0x1p-8f,    /* halfway: even -> 1 + 2^-6 */
        bits_f32(0x3F808001u), /* above halfway: up */
        bits_f32(0x7F7FFFFFu), /* FLT_MAX rounds to inf */
        NAN,
        -2.0f,
    };
    const uint16_t want_bf16[6] = {0x3F80, 0x3F82, 0x3F81, 0x7F80, 0x7FC0, 0xC000};
    uint16_t b[6];
    wf__cpu_convert_1d(6, bin, WF_DTYPE_F32, 1, b, WF_DTYPE_BF16, 1);
    for (int i = 0; i < 6; i++)
        CHECK_EQ_INT(b[i], want_bf16[i]);

    /* Back to float32 exactly, and f16 -> bf16 through float32. */
    float back[2];
    wf__cpu_convert_1d(2, h, WF_DTYPE_F16, 1, back, WF_DTYPE_F32, 1);
    CHECK_EQ_INT(f32_bits(back[0]), f32_bits(1.0f));
    CHECK_EQ_INT(f32_bits(back[1]), f32_bits(1.0f + 0x1p-9f));
    uint16_t hb[1];
    wf__cpu_convert_1d(1, h + 1, WF_DTYPE_F16, 1, hb, WF_DTYPE_BF16, 1);
    CHECK_EQ_INT(hb[0], 0x3F80); /* 1 + 2^-9 rounds to 1.0 in bfloat16 */
}

/* Runs `check` under every instruction-set variant this CPU runs (the
 * float32 <-> half conversions have hardware paths), then restores the
 * default. */
static void for_each_isa(void (*check)(void))
{
    const int active = wf__vm_isa_active();
    for (int isa = 0; isa < WF_VM_ISA_COUNT; isa++) {
        if (!wf_test_runs_isa(isa, wf__vm_isa_best()) || wf__vm_isa_force(isa) != WF_OK)
            continue;
        check();
    }
    CHECK_OK(wf__vm_isa_force(-1));
    CHECK_EQ_INT(wf__vm_isa_active(), active);
}

static void test_convert_all_pairs(void) { for_each_isa(check_convert_all_pairs); }
static void test_convert_defined_edges(void) { for_each_isa(check_convert_defined_edges); }
static void test_convert_random(void) { for_each_isa(check_convert_random); }
static void test_half_rounding(void) { for_each_isa(check_half_rounding); }
static void test_i64_to_half_rounds_once(void) { for_each_isa(check_i64_to_half_rounds_once); }

/* ---------------------------------------------------------------- math loops */

static void test_pairwise_sum(void)
{
    enum { N = 1000003 };
    float *x = malloc(N * sizeof *x);
    for (int i = 0; i < N; i++)
        x[i] = 0.1f;
    double want = (double)N * (double)0.1f;
    float got = wf__cpu_sum_f32(N, x, 1);
    CHECK_NEAR(got, want, want * 1e-6); /* a naive float loop is off by ~1% */
    /* Stride 2 and a negative stride over the same values. */
    for (int i = 0; i < N; i++)
        x[i] = (float)(i % 7);
    double ref2 = 0, refn = 0;
    for (int i = 0; i < N; i += 2)
        ref2 += x[i];
    for (int i = 0; i < 1000; i++)
        refn += x[999 - i];
    CHECK_NEAR(wf__cpu_sum_f32((N + 1) / 2, x, 2), ref2, ref2 * 1e-6);
    CHECK_NEAR(wf__cpu_sum_f32(1000, x + 999, -1), refn, 0);
    CHECK_NEAR(wf__cpu_sum_f32(0, x, 1), 0, 0);
    free(x);

    double d[300];
    for (int i = 0; i < 300; i++)
        d[i] = i;
    CHECK_NEAR(wf__cpu_sum_f64(300, d, 1), 299 * 300 / 2, 0);
    CHECK_NEAR(wf__cpu_sum_f64(7, d, 1), 21, 0);
}

static void test_exp_blocks(void)
{
    float x[37], y[37];
    double xd[5], yd[5];
    for (int i = 0; i < 37; i++)
        x[i] = (float)(i - 18) * 0.5f;
    wf__cpu_exp_f32(37, x, y);
    for (int i = 0; i < 37; i++)
        CHECK_NEAR(y[i], exp((double)x[i]), 1e-6 * exp((double)x[i]));
    for (int i = 0; i < 5; i++)
        xd[i] = i - 2.0;
    wf__cpu_exp_f64(5, xd, yd);
    for (int i = 0; i < 5; i++)
        CHECK_NEAR(yd[i], exp(xd[i]), 0);
}

int main(void)
{
    RUN_TEST(test_iter_merges_contiguous_dims);
    RUN_TEST(test_iter_keeps_transposed_dims);
    RUN_TEST(test_iter_merge_needs_every_operand);
    RUN_TEST(test_iter_drops_unit_dims_and_handles_empty);
    RUN_TEST(test_iter_visits_in_row_major_order);
    RUN_TEST(test_dims_by_stride);
    RUN_TEST(test_copy_strided_layouts);
    RUN_TEST(test_copy_transposed_tiles);
    RUN_TEST(test_copy_item_sizes);
    RUN_TEST(test_transpose_block_every_isa);
    RUN_TEST(test_stream_copy);
    RUN_TEST(test_copy_transposed_streamed);
    RUN_TEST(test_convert_all_pairs);
    RUN_TEST(test_convert_defined_edges);
    RUN_TEST(test_convert_random);
    RUN_TEST(test_convert_strided);
    RUN_TEST(test_half_rounding);
    RUN_TEST(test_i64_to_half_rounds_once);
    RUN_TEST(test_pairwise_sum);
    RUN_TEST(test_exp_blocks);
    return TEST_SUMMARY();
}
