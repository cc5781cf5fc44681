/*
 * The dtypes int8, int16, uint16, uint32, uint64 and complex64 through the
 * public API, against references written here: MLX's whole 14 x 14
 * promotion table, sizes and names, conversions at the edges of every type
 * (minimum, maximum, wraparound, saturation, NaN, rounding once), integer
 * arithmetic at the edges (wraparound, Python floor division and remainder,
 * the minimum divided by -1), bitwise ops and shifts (NumPy's rules past the
 * width), reductions and scans (MLX's accumulation dtypes), arg-reductions
 * (uint32), indexing with every integer index dtype, data movement of every
 * dtype (complex64 included, bit-exact), random integers of every integer
 * dtype, and WF_ERR_DTYPE with a message for what is not supported. The
 * kernels run under every instruction-set variant this CPU has (forced).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/vmath.h"
#include "harness.h"

/* ---------------------------------------------------------------- helpers */

/* A READY 1-d array of n elements copied from `data`. */
static wf_array *arr(const void *data, int64_t n, wf_dtype d)
{
    return wf_array_from_data(data, &n, 1, d);
}

/* `a` (a new reference, released here) has dtype d, n elements and the
 * bytes of `want`. */
static bool check_bytes(wf_array *a, wf_dtype d, const void *want, int64_t n, const char *what)
{
    bool ok = CHECK_NOT_NULL(a);
    if (!ok) {
        printf("      (%s: %s)\n", what, wf_last_error_message());
        wf_clear_error();
        return false;
    }
    ok = CHECK_EQ_INT(wf_array_dtype(a), d) && CHECK_EQ_INT(wf_array_size(a), n);
    const void *got = NULL;
    if (ok && n > 0) {
        ok = CHECK_OK(wf_array_data(a, &got));
        if (ok && memcmp(got, want, (size_t)n * wf_dtype_size(d)) != 0) {
            const unsigned char *g = got, *w = want;
            for (size_t i = 0; i < (size_t)n * wf_dtype_size(d); i++)
                if (g[i] != w[i]) {
                    wf_test_fail(__FILE__, __LINE__, "byte %zu: 0x%02x, want 0x%02x", i, g[i],
                                 w[i]);
                    break;
                }
            ok = false;
        }
    }
    if (!ok)
        printf("      (%s)\n", what);
    wf_release(a);
    return ok;
}

/* `result` is NULL with WF_ERR_DTYPE and a message holding `needle`. */
static void check_dtype_error(wf_array *result, const char *needle)
{
    CHECK(result == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_DTYPE);
    CHECK_STR_CONTAINS(wf_last_error_message(), needle);
    wf_clear_error();
}

/* ---------------------------------------------------------------- the table */

/* MLX's promotion table (mlx/dtype.cpp, with float64), in MLX's order. */
enum { B = WF_DTYPE_BOOL, U8 = WF_DTYPE_U8, U16 = WF_DTYPE_U16, U32 = WF_DTYPE_U32,
       U64 = WF_DTYPE_U64, I8 = WF_DTYPE_I8, I16 = WF_DTYPE_I16, I32 = WF_DTYPE_I32,
       I64 = WF_DTYPE_I64, F16 = WF_DTYPE_F16, F32 = WF_DTYPE_F32, F64 = WF_DTYPE_F64,
       BF = WF_DTYPE_BF16, C64 = WF_DTYPE_C64 };
static const int mlx_order[14] = {B, U8, U16, U32, U64, I8, I16, I32, I64,
                                       F16, F32, F64, BF, C64};
static const int mlx_table[14][14] = {
    /*        b    u8   u16  u32  u64  i8   i16  i32  i64  f16  f32  f64  bf16 c64 */
    /* b   */ {B,   U8,  U16, U32, U64, I8,  I16, I32, I64, F16, F32, F64, BF,  C64},
    /* u8  */ {U8,  U8,  U16, U32, U64, I16, I16, I32, I64, F16, F32, F64, BF,  C64},
    /* u16 */ {U16, U16, U16, U32, U64, I32, I32, I32, I64, F16, F32, F64, BF,  C64},
    /* u32 */ {U32, U32, U32, U32, U64, I64, I64, I64, I64, F16, F32, F64, BF,  C64},
    /* u64 */ {U64, U64, U64, U64, U64, F32, F32, F32, F32, F16, F32, F64, BF,  C64},
    /* i8  */ {I8,  I16, I32, I64, F32, I8,  I16, I32, I64, F16, F32, F64, BF,  C64},
    /* i16 */ {I16, I16, I32, I64, F32, I16, I16, I32, I64, F16, F32, F64, BF,  C64},
    /* i32 */ {I32, I32, I32, I64, F32, I32, I32, I32, I64, F16, F32, F64, BF,  C64},
    /* i64 */ {I64, I64, I64, I64, F32, I64, I64, I64, I64, F16, F32, F64, BF,  C64},
    /* f16 */ {F16, F16, F16, F16, F16, F16, F16, F16, F16, F16, F32, F64, F32, C64},
    /* f32 */ {F32, F32, F32, F32, F32, F32, F32, F32, F32, F32, F32, F64, F32, C64},
    /* f64 */ {F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, C64},
    /* bf16*/ {BF,  BF,  BF,  BF,  BF,  BF,  BF,  BF,  BF,  F32, F32, F64, BF,  C64},
    /* c64 */ {C64, C64, C64, C64, C64, C64, C64, C64, C64, C64, C64, C64, C64, C64},
};

static void test_promotion_table(void)
{
    for (int i = 0; i < 14; i++)
        for (int j = 0; j < 14; j++) {
            const wf_dtype a = (wf_dtype)mlx_order[i], b = (wf_dtype)mlx_order[j];
            if (!CHECK_EQ_INT(wf_promote_types(a, b), mlx_table[i][j]))
                printf("      %s with %s gives %s, want %s\n", wf_dtype_name(a),
                       wf_dtype_name(b), wf_dtype_name(wf_promote_types(a, b)),
                       wf_dtype_name((wf_dtype)mlx_table[i][j]));
        }
    CHECK_EQ_INT(wf_promote_types(WF_DTYPE_COUNT, WF_DTYPE_I8), WF_DTYPE_COUNT);
    CHECK_EQ_INT(wf_promote_types(WF_DTYPE_U16, (wf_dtype)-1), WF_DTYPE_COUNT);
    /* The ops promote as the table says (a value-level check of a few). */
    wf_array *u = wf_scalar(4294967295.0, WF_DTYPE_U32), *m = wf_scalar(-1, WF_DTYPE_I32);
    wf_array *s = wf_add(u, m);
    double v = 0;
    CHECK_EQ_INT(wf_array_dtype(s), WF_DTYPE_I64);
    CHECK_OK(wf_array_item(s, &v));
    CHECK_NEAR(v, 4294967294.0, 0);
    wf_array *big = wf_scalar(18446744073709551616.0, WF_DTYPE_U64); /* saturates to max */
    wf_array *i8 = wf_scalar(-1, WF_DTYPE_I8);
    wf_array *f = wf_add(big, i8);
    CHECK_EQ_INT(wf_array_dtype(f), WF_DTYPE_F32);
    CHECK_OK(wf_array_item(f, &v));
    CHECK_NEAR(v, 18446744073709551616.0, 0); /* float32 rounds 2^64 - 2 up */
    wf_release(u);
    wf_release(m);
    wf_release(s);
    wf_release(big);
    wf_release(i8);
    wf_release(f);
}

static void test_sizes_and_names(void)
{
    /* The appended values keep these numbers (the Python binding relies on them). */
    CHECK_EQ_INT(WF_DTYPE_F64, 7);
    CHECK_EQ_INT(WF_DTYPE_I8, 8);
    CHECK_EQ_INT(WF_DTYPE_I16, 9);
    CHECK_EQ_INT(WF_DTYPE_U16, 10);
    CHECK_EQ_INT(WF_DTYPE_U32, 11);
    CHECK_EQ_INT(WF_DTYPE_U64, 12);
    CHECK_EQ_INT(WF_DTYPE_C64, 13);
    CHECK_EQ_INT(WF_DTYPE_COUNT, 14);
    const struct { wf_dtype d; size_t size; const char *name; } want[] = {
        {WF_DTYPE_I8, 1, "int8"},     {WF_DTYPE_I16, 2, "int16"},
        {WF_DTYPE_U16, 2, "uint16"},  {WF_DTYPE_U32, 4, "uint32"},
        {WF_DTYPE_U64, 8, "uint64"},  {WF_DTYPE_C64, 8, "complex64"},
        {WF_DTYPE_U8, 1, "uint8"},    {WF_DTYPE_BF16, 2, "bfloat16"},
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        CHECK_EQ_SIZE(wf_dtype_size(want[k].d), want[k].size);
        CHECK(strcmp(wf_dtype_name(want[k].d), want[k].name) == 0);
    }
    CHECK_EQ_SIZE(wf_dtype_size(WF_DTYPE_COUNT), 0);
    CHECK(strcmp(wf_dtype_name(WF_DTYPE_COUNT), "invalid") == 0);
}

/* ---------------------------------------------------------------- conversions */

static void test_conversion_edges(void)
{
    wf_scope_begin();
    /* float64 -> each new integer type: truncation toward zero, saturation
     * at both ends, NaN 0. */
    const double f[8] = {-1e30, -129.9, -1.9, -0.5, 0.9, 127.9, 70000.5, NAN};
    const int8_t w8[8] = {INT8_MIN, INT8_MIN, -1, 0, 0, 127, INT8_MAX, 0};
    const int16_t w16[8] = {INT16_MIN, -129, -1, 0, 0, 127, INT16_MAX, 0};
    const uint16_t wu16[8] = {0, 0, 0, 0, 0, 127, UINT16_MAX, 0};
    const uint32_t wu32[8] = {0, 0, 0, 0, 0, 127, 70000, 0};
    const uint64_t wu64[8] = {0, 0, 0, 0, 0, 127, 70000, 0};
    wf_array *x = arr(f, 8, WF_DTYPE_F64);
    check_bytes(wf_astype(x, WF_DTYPE_I8), WF_DTYPE_I8, w8, 8, "f64 -> i8");
    check_bytes(wf_astype(x, WF_DTYPE_I16), WF_DTYPE_I16, w16, 8, "f64 -> i16");
    check_bytes(wf_astype(x, WF_DTYPE_U16), WF_DTYPE_U16, wu16, 8, "f64 -> u16");
    check_bytes(wf_astype(x, WF_DTYPE_U32), WF_DTYPE_U32, wu32, 8, "f64 -> u32");
    check_bytes(wf_astype(x, WF_DTYPE_U64), WF_DTYPE_U64, wu64, 8, "f64 -> u64");
    /* float -> uint64 near and past 2^64, and float32 -> the narrow types */
    const double g[4] = {18446744073709549568.0, 9223372036854775808.0, 1e20, INFINITY};
    const uint64_t wg[4] = {UINT64_C(18446744073709549568), UINT64_C(1) << 63, UINT64_MAX,
                            UINT64_MAX};
    check_bytes(wf_astype(arr(g, 4, WF_DTYPE_F64), WF_DTYPE_U64), WF_DTYPE_U64, wg, 4,
                "f64 -> u64 high");
    const float h[4] = {-40000.0f, 40000.0f, -INFINITY, 255.5f};
    const int16_t wh[4] = {INT16_MIN, INT16_MAX, INT16_MIN, 255};
    check_bytes(wf_astype(arr(h, 4, WF_DTYPE_F32), WF_DTYPE_I16), WF_DTYPE_I16, wh, 4,
                "f32 -> i16");
    /* integer -> integer wraps (the low bits) */
    const int64_t big[6] = {INT64_MIN, INT64_MAX, -1, 128, 65536 + 7, (INT64_C(1) << 32) + 3};
    const int8_t b8[6] = {0, -1, -1, -128, 7, 3};
    const uint16_t b16[6] = {0, UINT16_MAX, UINT16_MAX, 128, 7, 3};
    const uint32_t b32[6] = {0, UINT32_MAX, UINT32_MAX, 128, 65543, 3};
    const uint64_t b64[6] = {UINT64_C(1) << 63, (UINT64_C(1) << 63) - 1, UINT64_MAX, 128,
                             65543, (UINT64_C(1) << 32) + 3};
    wf_array *y = arr(big, 6, WF_DTYPE_I64);
    check_bytes(wf_astype(y, WF_DTYPE_I8), WF_DTYPE_I8, b8, 6, "i64 -> i8");
    check_bytes(wf_astype(y, WF_DTYPE_U16), WF_DTYPE_U16, b16, 6, "i64 -> u16");
    check_bytes(wf_astype(y, WF_DTYPE_U32), WF_DTYPE_U32, b32, 6, "i64 -> u32");
    check_bytes(wf_astype(y, WF_DTYPE_U64), WF_DTYPE_U64, b64, 6, "i64 -> u64");
    const int8_t m8[3] = {INT8_MIN, -1, INT8_MAX};
    const uint64_t m64[3] = {UINT64_MAX - 127, UINT64_MAX, 127}; /* sign-extended */
    check_bytes(wf_astype(arr(m8, 3, WF_DTYPE_I8), WF_DTYPE_U64), WF_DTYPE_U64, m64, 3,
                "i8 -> u64");
    /* uint64 -> floats: unsigned, rounded once */
    const uint64_t u[4] = {UINT64_MAX, (UINT64_C(1) << 63) + 1, (UINT64_C(1) << 53) + 1,
                           UINT64_C(1) << 63 | (UINT64_C(1) << 39)};
    const double wd[4] = {18446744073709551616.0, 9223372036854775808.0, 9007199254740992.0,
                          9223372586610589696.0};
    const float wf[4] = {18446744073709551616.0f, 9223372036854775808.0f, 9007199254740992.0f,
                         9223372036854775808.0f};
    wf_array *z = arr(u, 4, WF_DTYPE_U64);
    check_bytes(wf_astype(z, WF_DTYPE_F64), WF_DTYPE_F64, wd, 4, "u64 -> f64");
    check_bytes(wf_astype(z, WF_DTYPE_F32), WF_DTYPE_F32, wf, 4, "u64 -> f32");
    /* bfloat16 neighbours of 2^63 are 2^56 apart: 2^63 + 2^55 + 1, just
     * above their midpoint, rounds up to 2^63 + 2^56 (0x5f01); rounded to
     * float32's nearest first it would become the midpoint and then round
     * to even, down to 2^63 (0x5f00). */
    const uint64_t hb[2] = {(UINT64_C(1) << 63) + (UINT64_C(1) << 55) + 1, UINT64_MAX};
    const uint16_t wb[2] = {0x5f01, 0x5f80}; /* 2^63 + 2^56; 2^64 */
    check_bytes(wf_astype(arr(hb, 2, WF_DTYPE_U64), WF_DTYPE_BF16), WF_DTYPE_BF16, wb, 2,
                "u64 -> bf16 rounds once");
    const uint16_t wh16[2] = {0x7c00, 0x7c00}; /* float16 overflows to inf */
    check_bytes(wf_astype(arr(hb, 2, WF_DTYPE_U64), WF_DTYPE_F16), WF_DTYPE_F16, wh16, 2,
                "u64 -> f16");
    /* wf_full and wf_scalar store through the same conversions */
    const int64_t three = 3;
    const uint16_t full16[3] = {65535, 65535, 65535};
    check_bytes(wf_full(&three, 1, 1e9, WF_DTYPE_U16), WF_DTYPE_U16, full16, 3, "full u16");
    const int8_t full8[3] = {-128, -128, -128};
    check_bytes(wf_full(&three, 1, -1e9, WF_DTYPE_I8), WF_DTYPE_I8, full8, 3, "full i8");
    /* complex64: real -> (x, 0); to real: the real part; to bool: either
     * part non-zero */
    const float re[3] = {1.5f, -0.0f, 0.0f};
    const float c[6] = {1.5f, 0.0f, -0.0f, 0.0f, 0.0f, 0.0f};
    check_bytes(wf_astype(arr(re, 3, WF_DTYPE_F32), WF_DTYPE_C64), WF_DTYPE_C64, c, 3,
                "f32 -> c64");
    const float zc[6] = {2.5f, -1.0f, 0.0f, 3.0f, 0.0f, 0.0f};
    wf_array *cz = arr(zc, 3, WF_DTYPE_C64);
    const float zr[3] = {2.5f, 0.0f, 0.0f};
    const uint8_t zb[3] = {1, 1, 0};
    const int32_t zi[3] = {2, 0, 0};
    check_bytes(wf_astype(cz, WF_DTYPE_F32), WF_DTYPE_F32, zr, 3, "c64 -> f32");
    check_bytes(wf_astype(cz, WF_DTYPE_BOOL), WF_DTYPE_BOOL, zb, 3, "c64 -> bool");
    check_bytes(wf_astype(cz, WF_DTYPE_I32), WF_DTYPE_I32, zi, 3, "c64 -> i32");
    const float full_c[6] = {-2.0f, 0.0f, -2.0f, 0.0f, -2.0f, 0.0f};
    check_bytes(wf_full(&three, 1, -2, WF_DTYPE_C64), WF_DTYPE_C64, full_c, 3, "full c64");
    wf_scope_end();
}

/* ---------------------------------------------------------------- arithmetic */

typedef wf_array *(*binary_fn)(wf_array *, wf_array *);

/* fn(a, b) over n elements of dtype d gives `want` (bytes). */
static void check_binary(binary_fn fn, const char *name, const void *a, const void *b,
                         int64_t n, wf_dtype d, wf_dtype out, const void *want)
{
    wf_array *x = arr(a, n, d), *y = arr(b, n, d);
    char what[96];
    snprintf(what, sizeof what, "%s %s", name, wf_dtype_name(d));
    check_bytes(fn(x, y), out, want, n, what);
    wf_release(x);
    wf_release(y);
}

static void test_integer_arithmetic_edges(void)
{
    wf_scope_begin();
    /* int8: wraparound, Python floor division and remainder. */
    const int8_t a8[8] = {INT8_MAX, INT8_MIN, -7, 7, -7, INT8_MIN, 5, -100};
    const int8_t b8[8] = {1, 1, 2, -2, -2, -1, 0, 3};
    const int8_t add8[8] = {INT8_MIN, -127, -5, 5, -9, 127, 5, -97};
    const int8_t sub8[8] = {126, INT8_MAX, -9, 9, -5, -127, 5, -103};
    const int8_t mul8[8] = {INT8_MAX, INT8_MIN, -14, -14, 14, INT8_MIN, 0, -44};
    const int8_t fdiv8[8] = {INT8_MAX, INT8_MIN, -4, -4, 3, INT8_MIN, 0, -34};
    const int8_t rem8[8] = {0, 0, 1, -1, -1, 0, 0, 2};
    check_binary(wf_add, "add", a8, b8, 8, WF_DTYPE_I8, WF_DTYPE_I8, add8);
    check_binary(wf_subtract, "subtract", a8, b8, 8, WF_DTYPE_I8, WF_DTYPE_I8, sub8);
    check_binary(wf_multiply, "multiply", a8, b8, 8, WF_DTYPE_I8, WF_DTYPE_I8, mul8);
    check_binary(wf_floor_divide, "floor_divide", a8, b8, 8, WF_DTYPE_I8, WF_DTYPE_I8, fdiv8);
    check_binary(wf_remainder, "remainder", a8, b8, 8, WF_DTYPE_I8, WF_DTYPE_I8, rem8);
    /* int16: the minimum over -1, power wrapping */
    const int16_t a16[4] = {INT16_MIN, 3, -2, 2};
    const int16_t b16[4] = {-1, 11, 15, -1};
    const int16_t fdiv16[4] = {INT16_MIN, 0, -1, -2};
    const int16_t pow16[4] = {0, (int16_t)(177147 - 3 * 65536), INT16_MIN, 0};
    check_binary(wf_floor_divide, "floor_divide", a16, b16, 4, WF_DTYPE_I16, WF_DTYPE_I16,
                 fdiv16);
    check_binary(wf_power, "power", a16, b16, 4, WF_DTYPE_I16, WF_DTYPE_I16, pow16);
    /* uint16 / uint32 / uint64: wraparound below 0 and past the maximum */
    const uint16_t a16u[3] = {0, UINT16_MAX, 300};
    const uint16_t b16u[3] = {1, 1, 300};
    const uint16_t sub16u[3] = {UINT16_MAX, UINT16_MAX - 1, 0};
    const uint16_t mul16u[3] = {0, UINT16_MAX, (uint16_t)(90000 - 65536)};
    check_binary(wf_subtract, "subtract", a16u, b16u, 3, WF_DTYPE_U16, WF_DTYPE_U16, sub16u);
    check_binary(wf_multiply, "multiply", a16u, b16u, 3, WF_DTYPE_U16, WF_DTYPE_U16, mul16u);
    const uint32_t a32[3] = {UINT32_MAX, 7, 0};
    const uint32_t b32[3] = {1, 0, 5};
    const uint32_t add32[3] = {0, 7, 5}, fdiv32[3] = {UINT32_MAX, 0, 0}, rem32[3] = {0, 0, 0};
    check_binary(wf_add, "add", a32, b32, 3, WF_DTYPE_U32, WF_DTYPE_U32, add32);
    check_binary(wf_floor_divide, "floor_divide", a32, b32, 3, WF_DTYPE_U32, WF_DTYPE_U32,
                 fdiv32);
    check_binary(wf_remainder, "remainder", a32, b32, 3, WF_DTYPE_U32, WF_DTYPE_U32, rem32);
    const uint64_t a64[4] = {UINT64_MAX, UINT64_C(1) << 63, 3, (UINT64_C(1) << 63) + 1};
    const uint64_t b64[4] = {1, 2, 41, UINT64_C(1) << 63};
    const uint64_t add64[4] = {0, (UINT64_C(1) << 63) + 2, 44, 1};
    const uint64_t mul64[4] = {UINT64_MAX, 0, 123, UINT64_C(1) << 63};
    const uint64_t max64[4] = {UINT64_MAX, UINT64_C(1) << 63, 41, (UINT64_C(1) << 63) + 1};
    check_binary(wf_add, "add", a64, b64, 4, WF_DTYPE_U64, WF_DTYPE_U64, add64);
    check_binary(wf_multiply, "multiply", a64, b64, 4, WF_DTYPE_U64, WF_DTYPE_U64, mul64);
    check_binary(wf_maximum, "maximum", a64, b64, 4, WF_DTYPE_U64, WF_DTYPE_U64, max64);
    const uint64_t p64a[4] = {UINT64_MAX, 2, 3, 0};
    const uint64_t p64b[4] = {1, 64, 41, 0};
    const uint64_t p64w[4] = {UINT64_MAX, 0, UINT64_C(18026252303461234787), 1}; /* 3^41 wraps */
    check_binary(wf_power, "power", p64a, p64b, 4, WF_DTYPE_U64, WF_DTYPE_U64, p64w);
    /* comparisons of uint64 beyond 2^53 and of mixed signs (promoted) */
    const uint8_t gt64[4] = {1, 1, 0, 1}, eq64[4] = {0, 0, 0, 0};
    check_binary(wf_greater, "greater", a64, b64, 4, WF_DTYPE_U64, WF_DTYPE_BOOL, gt64);
    check_binary(wf_equal, "equal", a64, b64, 4, WF_DTYPE_U64, WF_DTYPE_BOOL, eq64);
    const int8_t neg = -1;
    const uint8_t u255 = 255;
    wf_array *x = arr(&neg, 1, WF_DTYPE_I8), *y = arr(&u255, 1, WF_DTYPE_U8);
    const uint8_t yes = 1;
    check_bytes(wf_less(x, y), WF_DTYPE_BOOL, &yes, 1, "int8 -1 < uint8 255");
    const int16_t sum16 = 254;
    check_bytes(wf_add(x, y), WF_DTYPE_I16, &sum16, 1, "int8 + uint8 is int16");
    wf_release(x);
    wf_release(y);
    /* true division of the new integers gives float32 */
    const uint32_t d1 = 7, d2 = 2;
    const float half = 3.5f;
    check_binary(wf_divide, "divide", &d1, &d2, 1, WF_DTYPE_U32, WF_DTYPE_F32, &half);
    /* clip and where keep the dtype */
    const uint64_t c64v[3] = {0, UINT64_MAX, 50}, lo = 10, hi = UINT64_MAX - 1;
    const uint64_t clipped[3] = {10, UINT64_MAX - 1, 50};
    wf_array *cv = arr(c64v, 3, WF_DTYPE_U64), *cl = arr(&lo, 1, WF_DTYPE_U64),
             *ch = arr(&hi, 1, WF_DTYPE_U64);
    check_bytes(wf_clip(cv, cl, ch), WF_DTYPE_U64, clipped, 3, "clip u64");
    wf_scope_end();
}

/* ---------------------------------------------------------------- bitwise */

static void test_bitwise_and_shifts(void)
{
    wf_scope_begin();
    const int8_t a8[6] = {INT8_MIN, INT8_MAX, -1, 1, 1, -128};
    const int8_t s8[6] = {1, 1, 100, 7, 8, -1};
    const int8_t shl8[6] = {0, -2, 0, INT8_MIN, 0, 0};
    const int8_t shr8[6] = {-64, 63, -1, 0, 0, -1};
    const int8_t and8[6] = {0, 1, 100, 1, 0, -128};
    const int8_t or8[6] = {-127, INT8_MAX, -1, 7, 9, -1};
    const int8_t xor8[6] = {-127, 126, -101, 6, 9, 127};
    check_binary(wf_left_shift, "left_shift", a8, s8, 6, WF_DTYPE_I8, WF_DTYPE_I8, shl8);
    check_binary(wf_right_shift, "right_shift", a8, s8, 6, WF_DTYPE_I8, WF_DTYPE_I8, shr8);
    check_binary(wf_bitwise_and, "bitwise_and", a8, s8, 6, WF_DTYPE_I8, WF_DTYPE_I8, and8);
    check_binary(wf_bitwise_or, "bitwise_or", a8, s8, 6, WF_DTYPE_I8, WF_DTYPE_I8, or8);
    check_binary(wf_bitwise_xor, "bitwise_xor", a8, s8, 6, WF_DTYPE_I8, WF_DTYPE_I8, xor8);
    const uint64_t a64[4] = {UINT64_MAX, 1, UINT64_C(1) << 63, 5};
    const uint64_t s64[4] = {63, 63, 64, 0};
    const uint64_t shl64[4] = {UINT64_C(1) << 63, UINT64_C(1) << 63, 0, 5};
    const uint64_t shr64[4] = {1, 0, 0, 5};
    check_binary(wf_left_shift, "left_shift", a64, s64, 4, WF_DTYPE_U64, WF_DTYPE_U64, shl64);
    check_binary(wf_right_shift, "right_shift", a64, s64, 4, WF_DTYPE_U64, WF_DTYPE_U64, shr64);
    const int16_t a16[3] = {INT16_MIN, -3, 0x1234};
    const int16_t s16[3] = {15, 1, 4};
    const int16_t shr16[3] = {-1, -2, 0x123};
    check_binary(wf_right_shift, "right_shift", a16, s16, 3, WF_DTYPE_I16, WF_DTYPE_I16, shr16);
    const uint32_t a32[2] = {0xF0F0F0F0u, 1}, s32[2] = {4, 31};
    const uint32_t shl32[2] = {0x0F0F0F00u, 0x80000000u};
    check_binary(wf_left_shift, "left_shift", a32, s32, 2, WF_DTYPE_U32, WF_DTYPE_U32, shl32);
    /* invert: all ones for unsigned maximum, -1 - x for signed, not for bool */
    const uint16_t u16[3] = {0, UINT16_MAX, 0x00FF}, inv16[3] = {UINT16_MAX, 0, 0xFF00};
    check_bytes(wf_bitwise_invert(arr(u16, 3, WF_DTYPE_U16)), WF_DTYPE_U16, inv16, 3,
                "invert u16");
    const uint64_t u64[2] = {0, 0x0123456789ABCDEFull};
    const uint64_t inv64[2] = {UINT64_MAX, ~0x0123456789ABCDEFull};
    check_bytes(wf_bitwise_invert(arr(u64, 2, WF_DTYPE_U64)), WF_DTYPE_U64, inv64, 2,
                "invert u64");
    const int8_t inv8[6] = {INT8_MAX, INT8_MIN, 0, -2, -2, 127};
    check_bytes(wf_bitwise_invert(arr(a8, 6, WF_DTYPE_I8)), WF_DTYPE_I8, inv8, 6, "invert i8");
    const uint8_t bools[2] = {0, 1}, nbools[2] = {1, 0};
    check_bytes(wf_bitwise_invert(arr(bools, 2, WF_DTYPE_BOOL)), WF_DTYPE_BOOL, nbools, 2,
                "invert bool");
    /* mixed: uint8 & int8 promote to int16 */
    const uint8_t x = 0xF0;
    const int8_t y = -1;
    const int16_t xy = 0xF0;
    check_bytes(wf_bitwise_and(arr(&x, 1, WF_DTYPE_U8), arr(&y, 1, WF_DTYPE_I8)), WF_DTYPE_I16,
                &xy, 1, "u8 & i8");
    /* errors: floats and promotions to a float */
    const float fv = 1;
    check_dtype_error(wf_bitwise_or(arr(&fv, 1, WF_DTYPE_F32), arr(&x, 1, WF_DTYPE_U8)),
                      "float32");
    check_dtype_error(wf_left_shift(arr(u64, 1, WF_DTYPE_U64), arr(&y, 1, WF_DTYPE_I8)),
                      "float32");
    check_dtype_error(wf_bitwise_invert(arr(&fv, 1, WF_DTYPE_F32)), "float32");
    wf_scope_end();
}

/* ---------------------------------------------------------------- reductions */

static void test_reductions(void)
{
    wf_scope_begin();
    enum { N = 5000 };
    const int64_t n = N;
    /* sum of int8 into int32 (no wrap at 127) and prod of int8 into int32 */
    int8_t *i8 = malloc(N);
    for (int i = 0; i < N; i++)
        i8[i] = i % 2 ? INT8_MAX : INT8_MIN;
    const int32_t s8 = (N / 2) * (INT8_MAX + INT8_MIN);
    check_bytes(wf_sum(arr(i8, n, WF_DTYPE_I8), NULL, 0, false), WF_DTYPE_I32, &s8, 1,
                "sum i8");
    const int8_t mx8 = INT8_MAX, mn8 = INT8_MIN;
    check_bytes(wf_max(arr(i8, n, WF_DTYPE_I8), NULL, 0, false), WF_DTYPE_I8, &mx8, 1, "max i8");
    check_bytes(wf_min(arr(i8, n, WF_DTYPE_I8), NULL, 0, false), WF_DTYPE_I8, &mn8, 1, "min i8");
    /* sum of uint16 into uint32, past 65535 */
    uint16_t *u16 = malloc(N * sizeof *u16);
    for (int i = 0; i < N; i++)
        u16[i] = UINT16_MAX;
    const uint32_t s16 = (uint32_t)((uint64_t)N * UINT16_MAX);
    check_bytes(wf_sum(arr(u16, n, WF_DTYPE_U16), NULL, 0, false), WF_DTYPE_U32, &s16, 1,
                "sum u16");
    uint32_t *u32 = malloc(N * sizeof *u32);
    for (int i = 0; i < N; i++)
        u32[i] = UINT32_MAX - (uint32_t)i;
    const uint32_t s32 = (uint32_t)(0u - (uint32_t)((uint64_t)N * (N + 1) / 2 % 4294967296u));
    const uint32_t mx32 = UINT32_MAX, mn32 = UINT32_MAX - (N - 1);
    check_bytes(wf_sum(arr(u32, n, WF_DTYPE_U32), NULL, 0, false), WF_DTYPE_U32, &s32, 1,
                "sum u32 (wraps)");
    check_bytes(wf_max(arr(u32, n, WF_DTYPE_U32), NULL, 0, false), WF_DTYPE_U32, &mx32, 1,
                "max u32");
    check_bytes(wf_min(arr(u32, n, WF_DTYPE_U32), NULL, 0, false), WF_DTYPE_U32, &mn32, 1,
                "min u32");
    /* uint64 above 2^63: max / min in unsigned order, sums wrap */
    uint64_t *u64 = malloc(N * sizeof *u64);
    for (int i = 0; i < N; i++)
        u64[i] = i == 1234 ? UINT64_MAX : i == 77 ? 3 : (UINT64_C(1) << 63) + (uint64_t)i;
    const uint64_t mx64 = UINT64_MAX, mn64 = 3;
    check_bytes(wf_max(arr(u64, n, WF_DTYPE_U64), NULL, 0, false), WF_DTYPE_U64, &mx64, 1,
                "max u64");
    check_bytes(wf_min(arr(u64, n, WF_DTYPE_U64), NULL, 0, false), WF_DTYPE_U64, &mn64, 1,
                "min u64");
    uint64_t s64 = 0;
    for (int i = 0; i < N; i++)
        s64 += u64[i];
    check_bytes(wf_sum(arr(u64, n, WF_DTYPE_U64), NULL, 0, false), WF_DTYPE_U64, &s64, 1,
                "sum u64");
    /* argmax / argmin give uint32, also readable as int32 */
    const uint32_t am = 1234, an = 77;
    check_bytes(wf_argmax(arr(u64, n, WF_DTYPE_U64), 0, false), WF_DTYPE_U32, &am, 1,
                "argmax u64");
    check_bytes(wf_argmin(arr(u64, n, WF_DTYPE_U64), 0, false), WF_DTYPE_U32, &an, 1,
                "argmin u64");
    const uint32_t a32 = 0, b32 = N - 1;
    check_bytes(wf_argmax(arr(u32, n, WF_DTYPE_U32), 0, false), WF_DTYPE_U32, &a32, 1,
                "argmax u32");
    check_bytes(wf_argmin(arr(u32, n, WF_DTYPE_U32), 0, false), WF_DTYPE_U32, &b32, 1,
                "argmin u32");
    /* 2-d: both axes (the rows and the vertical forms) of int16 */
    const int64_t s2[2] = {50, 100};
    int16_t *m = malloc(5000 * sizeof *m);
    for (int i = 0; i < 5000; i++)
        m[i] = (int16_t)((i * 37) % 1001 - 500) * 60;
    wf_array *m2 = wf_array_from_data(m, s2, 2, WF_DTYPE_I16);
    int32_t cols[100], rows[50];
    int16_t cmax[100];
    uint32_t rarg[50];
    for (int j = 0; j < 100; j++) {
        cols[j] = 0;
        cmax[j] = INT16_MIN;
        for (int i = 0; i < 50; i++) {
            cols[j] += m[i * 100 + j];
            cmax[j] = m[i * 100 + j] > cmax[j] ? m[i * 100 + j] : cmax[j];
        }
    }
    for (int i = 0; i < 50; i++) {
        rows[i] = 0;
        rarg[i] = 0;
        for (int j = 0; j < 100; j++) {
            rows[i] += m[i * 100 + j];
            if (m[i * 100 + j] < m[i * 100 + (int)rarg[i]])
                rarg[i] = (uint32_t)j;
        }
    }
    check_bytes(wf_sum(m2, (int[]){0}, 1, false), WF_DTYPE_I32, cols, 100, "sum i16 axis 0");
    check_bytes(wf_sum(m2, (int[]){1}, 1, false), WF_DTYPE_I32, rows, 50, "sum i16 axis 1");
    check_bytes(wf_max(m2, (int[]){0}, 1, false), WF_DTYPE_I16, cmax, 100, "max i16 axis 0");
    check_bytes(wf_argmin(m2, 1, false), WF_DTYPE_U32, rarg, 50, "argmin i16 axis 1");
    check_bytes(wf_argmin(wf_transpose(m2, NULL, 0), 0, false), WF_DTYPE_U32, rarg, 50,
                "argmin i16 transposed");
    /* mean of uint32 in float32; prod of uint8 into uint32; any / all */
    double v = 0;
    CHECK_OK(wf_array_item(wf_mean(arr(u32, 2, WF_DTYPE_U32), NULL, 0, false), &v));
    CHECK_NEAR(v, 4294967294.5, 512); /* float32 */
    const uint8_t pu8[4] = {255, 255, 255, 2};
    const uint32_t pw = 255u * 255u * 255u * 2u;
    check_bytes(wf_prod(arr(pu8, 4, WF_DTYPE_U8), NULL, 0, false), WF_DTYPE_U32, &pw, 1,
                "prod u8");
    const uint8_t t = 1;
    check_bytes(wf_any(arr(u64, n, WF_DTYPE_U64), NULL, 0, false), WF_DTYPE_BOOL, &t, 1,
                "any u64");
    /* scans keep the dtype and wrap (bool: int32) */
    const int8_t c8[4] = {100, 100, -128, 1}, cs8[4] = {100, -56, 72, 73};
    check_bytes(wf_cumsum(arr(c8, 4, WF_DTYPE_I8), 0, false, true), WF_DTYPE_I8, cs8, 4,
                "cumsum i8");
    const int8_t cp8[4] = {100, 16, 0, 0}; /* 10000 mod 256 = 16, then * -128 = -2048 = 0 */
    check_bytes(wf_cumprod(arr(c8, 4, WF_DTYPE_I8), 0, false, true), WF_DTYPE_I8, cp8, 4,
                "cumprod i8");
    const uint64_t cu[3] = {UINT64_MAX, 2, 5}, csu[3] = {UINT64_MAX, 1, 6};
    check_bytes(wf_cumsum(arr(cu, 3, WF_DTYPE_U64), 0, false, true), WF_DTYPE_U64, csu, 3,
                "cumsum u64");
    const uint16_t cr[3] = {1, 2, 65535}, crs[3] = {1, 65535, 0}; /* reverse, exclusive */
    check_bytes(wf_cumsum(arr(cr, 3, WF_DTYPE_U16), 0, true, false), WF_DTYPE_U16, crs, 3,
                "cumsum u16 reverse exclusive");
    free(i8);
    free(u16);
    free(u32);
    free(u64);
    free(m);
    wf_scope_end();
}

/* ---------------------------------------------------------------- data movement */

/* Every dtype, complex64 included, moves bits exactly through the shape
 * and indexing ops. */
static void test_data_movement_every_dtype(void)
{
    for (int di = 0; di < WF_DTYPE_COUNT; di++) {
        const wf_dtype d = (wf_dtype)di;
        const size_t item = wf_dtype_size(d);
        wf_scope_begin();
        /* 2 x 3 elements of distinct bytes (bool: 0 and 1) */
        unsigned char src[6 * 8], want[12 * 8];
        for (size_t i = 0; i < sizeof src; i++)
            src[i] = d == WF_DTYPE_BOOL ? (unsigned char)(i % 2) : (unsigned char)(i * 29 + 3);
        const int64_t s23[2] = {2, 3};
        wf_array *a = wf_array_from_data(src, s23, 2, d);
        char what[64];
        /* transpose: element (j, i) = a(i, j) */
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                memcpy(want + (size_t)(j * 2 + i) * item, src + (size_t)(i * 3 + j) * item, item);
        snprintf(what, sizeof what, "transpose %s", wf_dtype_name(d));
        check_bytes(wf_reshape(wf_transpose(a, NULL, 0), (int64_t[]){6}, 1), d, want, 6, what);
        /* reversed slice of the flattened array */
        for (int i = 0; i < 6; i++)
            memcpy(want + (size_t)i * item, src + (size_t)(5 - i) * item, item);
        wf_array *flat = wf_reshape(a, (int64_t[]){6}, 1);
        snprintf(what, sizeof what, "slice %s", wf_dtype_name(d));
        check_bytes(wf_slice(flat, (int64_t[]){-1}, (int64_t[]){INT64_MIN}, (int64_t[]){-1}), d,
                    want, 6, what);
        /* concatenate with itself */
        memcpy(want, src, 6 * item);
        memcpy(want + 6 * item, src, 6 * item);
        wf_array *two[2] = {flat, flat};
        snprintf(what, sizeof what, "concatenate %s", wf_dtype_name(d));
        check_bytes(wf_concatenate(two, 2, 0), d, want, 12, what);
        /* take with int8 (negative), uint16 and uint64 indices */
        const int8_t i8[3] = {-1, 0, 2};
        const uint16_t i16[3] = {5, 0, 2};
        const uint64_t i64[3] = {5, 0, 2};
        memcpy(want, src + 5 * item, item);
        memcpy(want + item, src, item);
        memcpy(want + 2 * item, src + 2 * item, item);
        snprintf(what, sizeof what, "take %s", wf_dtype_name(d));
        check_bytes(wf_take(flat, arr(i8, 3, WF_DTYPE_I8), 0), d, want, 3, what);
        check_bytes(wf_take(flat, arr(i16, 3, WF_DTYPE_U16), 0), d, want, 3, what);
        check_bytes(wf_take(flat, arr(i64, 3, WF_DTYPE_U64), 0), d, want, 3, what);
        check_bytes(wf_take_along_axis(flat, arr(i16, 3, WF_DTYPE_U16), 0), d, want, 3, what);
        /* where picks bits; broadcast_to repeats them */
        const uint8_t cond[6] = {1, 0, 1, 0, 1, 0};
        wf_array *other = wf_slice(flat, (int64_t[]){-1}, (int64_t[]){INT64_MIN}, (int64_t[]){-1});
        for (int i = 0; i < 6; i++)
            memcpy(want + (size_t)i * item, src + (size_t)(cond[i] ? i : 5 - i) * item, item);
        snprintf(what, sizeof what, "where %s", wf_dtype_name(d));
        check_bytes(wf_where(arr(cond, 6, WF_DTYPE_BOOL), flat, other), d, want, 6, what);
        for (int i = 0; i < 12; i++)
            memcpy(want + (size_t)i * item, src + (size_t)(i % 6) * item, item);
        snprintf(what, sizeof what, "broadcast_to %s", wf_dtype_name(d));
        check_bytes(wf_reshape(wf_broadcast_to(flat, (int64_t[]){2, 6}, 2), (int64_t[]){12}, 1),
                    d, want, 12, what);
        wf_scope_end();
    }
    /* An index out of range fails the evaluation (uint64 from 2^63 on too). */
    wf_scope_begin();
    const float x[3] = {1, 2, 3};
    const uint64_t bad[1] = {UINT64_MAX};
    wf_array *t = wf_take(arr(x, 3, WF_DTYPE_F32), arr(bad, 1, WF_DTYPE_U64), 0);
    CHECK_NOT_NULL(t);
    CHECK_STATUS(wf_eval(&t, 1), WF_ERR_INVALID_ARGUMENT);
    wf_clear_error();
    /* scatter_add of int8 wraps; of complex64 adds the parts */
    const int8_t base[2] = {120, -120}, upd[3] = {10, 10, -10};
    const uint32_t where[3] = {0, 0, 1};
    const int8_t sc[2] = {-116, 126};
    check_bytes(wf_scatter_add(arr(base, 2, WF_DTYPE_I8), arr(where, 3, WF_DTYPE_U32),
                               arr(upd, 3, WF_DTYPE_I8), 0),
                WF_DTYPE_I8, sc, 2, "scatter_add i8");
    const float cbase[4] = {1, 2, -3, 4}, cupd[6] = {0.5f, -1, 2, 8, 10, 0.25f};
    const float csum[4] = {3.5f, 9, 7, 4.25f};
    check_bytes(wf_scatter_add(arr(cbase, 2, WF_DTYPE_C64), arr(where, 3, WF_DTYPE_U32),
                               arr(cupd, 3, WF_DTYPE_C64), 0),
                WF_DTYPE_C64, csum, 2, "scatter_add c64");
    wf_scope_end();
}

/* ---------------------------------------------------------------- view */

static void test_view(void)
{
    wf_scope_begin();
    const float f[4] = {1.0f, -2.5f, 0.0f, INFINITY};
    wf_array *a = wf_array_from_data(f, (int64_t[]){2, 2}, 2, WF_DTYPE_F32);
    /* same size: the same shape and bits */
    uint32_t bits[4];
    memcpy(bits, f, sizeof f);
    wf_array *u = wf_view(a, WF_DTYPE_U32);
    CHECK_EQ_INT(wf_array_dim(u, 1), 2);
    check_bytes(wf_reshape(u, (int64_t[]){4}, 1), WF_DTYPE_U32, bits, 4, "view f32 as u32");
    /* narrower: the last axis grows; wider: it shrinks */
    wf_array *b = wf_view(a, WF_DTYPE_U8);
    CHECK_EQ_INT(wf_array_ndim(b), 2);
    CHECK_EQ_INT(wf_array_dim(b, 1), 8);
    check_bytes(wf_reshape(b, (int64_t[]){16}, 1), WF_DTYPE_U8, f, 16, "view f32 as u8");
    wf_array *c = wf_view(a, WF_DTYPE_C64); /* (2, 2) float32 -> (2, 1) complex64 */
    CHECK_EQ_INT(wf_array_dim(c, 1), 1);
    check_bytes(wf_reshape(c, (int64_t[]){2}, 1), WF_DTYPE_C64, f, 2, "view f32 as c64");
    check_bytes(wf_reshape(wf_view(c, WF_DTYPE_F32), (int64_t[]){4}, 1), WF_DTYPE_F32, f, 4,
                "view c64 back as f32");
    /* a transposed input is copied first: its logical order's bytes */
    const float ft[4] = {f[0], f[2], f[1], f[3]};
    check_bytes(wf_reshape(wf_view(wf_transpose(a, NULL, 0), WF_DTYPE_I16), (int64_t[]){8}, 1),
                WF_DTYPE_I16, ft, 8, "view of a transposed f32 as i16");
    /* a slice at an offset: rows 1.. of a (3, 2) int16, viewed as int32 */
    const int16_t s16[6] = {1, 2, 3, 4, -1, 7};
    wf_array *s = wf_slice(wf_array_from_data(s16, (int64_t[]){3, 2}, 2, WF_DTYPE_I16),
                           (int64_t[]){1, 0}, (int64_t[]){3, 2}, (int64_t[]){1, 1});
    int32_t w32[2];
    memcpy(w32, s16 + 2, sizeof w32);
    check_bytes(wf_reshape(wf_view(s, WF_DTYPE_I32), (int64_t[]){2}, 1), WF_DTYPE_I32, w32, 2,
                "view of a slice");
    /* the same dtype is the array itself */
    wf_array *same = wf_view(a, WF_DTYPE_F32);
    CHECK(same != NULL && wf_array_dtype(same) == WF_DTYPE_F32);
    /* errors: the last axis's bytes not a multiple; 0-d to another size */
    const uint8_t three[3] = {1, 2, 3};
    CHECK(wf_view(arr(three, 3, WF_DTYPE_U8), WF_DTYPE_U16) == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_SHAPE);
    CHECK_STR_CONTAINS(wf_last_error_message(), "wf_view");
    wf_clear_error();
    CHECK(wf_view(wf_scalar(1, WF_DTYPE_F32), WF_DTYPE_F64) == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_SHAPE);
    wf_clear_error();
    const int32_t one = 1;
    check_bytes(wf_view(wf_array_from_data(&one, NULL, 0, WF_DTYPE_I32), WF_DTYPE_F32),
                WF_DTYPE_F32, &one, 1, "0-d view of the same size");
    CHECK(wf_view(a, WF_DTYPE_COUNT) == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_DTYPE);
    wf_clear_error();
    CHECK(wf_view(NULL, WF_DTYPE_U8) == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_NULL_ARGUMENT);
    wf_clear_error();
    wf_scope_end();
}

/* ---------------------------------------------------------------- transforms, compile */

static wf_status view_body(void *payload, wf_array *const *in, size_t nin, wf_array **out,
                           size_t *nout)
{
    (void)payload;
    (void)nin;
    out[0] = wf_view(in[0], WF_DTYPE_U16);
    *nout = out[0] ? 1 : 0;
    return out[0] ? WF_OK : wf_last_error();
}

/* Integer ops of the new dtypes: (x + y) ^ (x << 1), its sum and argmax. */
static wf_status int_body(void *payload, wf_array *const *in, size_t nin, wf_array **out,
                          size_t *nout)
{
    (void)payload;
    (void)nin;
    wf_scope_begin();
    wf_array *one = wf_scalar(1, WF_DTYPE_I8);
    wf_array *r = wf_bitwise_xor(wf_add(in[0], in[1]), wf_left_shift(in[0], one));
    wf_array *s = wf_sum(r, NULL, 0, false);
    wf_array *m = wf_argmax(wf_astype(r, WF_DTYPE_U16), 0, false);
    out[0] = wf_keep(r);
    out[1] = wf_keep(s);
    out[2] = wf_keep(m);
    wf_scope_end();
    *nout = 3;
    return out[0] && out[1] && out[2] ? WF_OK : wf_last_error();
}

static void test_vmap_and_compile(void)
{
    wf_scope_begin();
    /* vmap of a view over axis 1: each example a column of float32 */
    const float x[6] = {1.0f, 2.0f, -3.0f, 4.5f, 0.0f, 1e30f};
    wf_array *xa = wf_array_from_data(x, (int64_t[]){3, 2}, 2, WF_DTYPE_F32);
    wf_fn *view = wf_fn_new(view_body, NULL, NULL);
    const int in_axes[1] = {1};
    wf_fn *vm = wf_vmap(view, in_axes, 1, NULL, 0);
    wf_array *out[3] = {NULL, NULL, NULL};
    size_t nout = 1;
    CHECK_OK(wf_fn_call(vm, &xa, 1, out, &nout));
    float cols[6] = {x[0], x[2], x[4], x[1], x[3], x[5]};
    if (CHECK_EQ_INT(nout, 1)) {
        CHECK_EQ_INT(wf_array_dim(out[0], 0), 2);
        CHECK_EQ_INT(wf_array_dim(out[0], 1), 6);
        check_bytes(wf_reshape(out[0], (int64_t[]){12}, 1), WF_DTYPE_U16, cols, 12,
                    "vmap of view");
        wf_release(out[0]);
    }
    /* compiled integer ops give the uncompiled bits */
    int8_t a8[64], b8[64];
    for (int i = 0; i < 64; i++) {
        a8[i] = (int8_t)(i * 37 - 100);
        b8[i] = (int8_t)(INT8_MAX - i * 5);
    }
    wf_array *in[2] = {arr(a8, 64, WF_DTYPE_I8), arr(b8, 64, WF_DTYPE_I8)};
    wf_fn *f = wf_fn_new(int_body, NULL, NULL);
    wf_fn *cf = wf_compile(f, NULL);
    wf_array *plain[3], *compiled[3];
    size_t np = 3, nc = 3;
    CHECK_OK(wf_fn_call(f, in, 2, plain, &np));
    for (int call = 0; call < 2; call++) { /* the trace, then a replay */
        nc = 3;
        CHECK_OK(wf_fn_call(cf, in, 2, compiled, &nc));
        if (!CHECK_EQ_INT(nc, 3) || !CHECK_EQ_INT(np, 3))
            break;
        for (int k = 0; k < 3; k++) {
            const void *p = NULL;
            CHECK_OK(wf_array_data(plain[k], &p));
            check_bytes(compiled[k], wf_array_dtype(plain[k]), p, wf_array_size(plain[k]),
                        "compiled integer ops");
        }
    }
    CHECK_EQ_INT(wf_array_dtype(plain[0]), WF_DTYPE_I8);
    CHECK_EQ_INT(wf_array_dtype(plain[1]), WF_DTYPE_I32);
    CHECK_EQ_INT(wf_array_dtype(plain[2]), WF_DTYPE_U32);
    for (int k = 0; k < 3 && np == 3; k++)
        wf_release(plain[k]);
    wf_fn_release(cf);
    wf_fn_release(f);
    wf_fn_release(vm);
    wf_fn_release(view);
    wf_release(in[0]);
    wf_release(in[1]);
    wf_scope_end();
}

/* ---------------------------------------------------------------- random */

static void test_randint_every_integer_dtype(void)
{
    const wf_dtype ints[8] = {WF_DTYPE_U8,  WF_DTYPE_I8,  WF_DTYPE_I16, WF_DTYPE_U16,
                              WF_DTYPE_I32, WF_DTYPE_U32, WF_DTYPE_I64, WF_DTYPE_U64};
    /* each type's whole range (uint64: the int64 bounds allow [0, 2^63 - 1)) */
    const int64_t lows[8] = {0, INT8_MIN, INT16_MIN, 0, INT32_MIN, 0, INT64_MIN, 0};
    const int64_t highs[8] = {256, 128, 32768, 65536, INT32_MAX, 4294967296LL, INT64_MAX,
                              INT64_MAX};
    const int64_t n = 20000;
    const wf_key key = wf_random_key(7);
    for (int k = 0; k < 8; k++) {
        wf_scope_begin();
        wf_array *r = wf_random_randint(lows[k], highs[k], &n, 1, ints[k], &key);
        if (!CHECK_NOT_NULL(r) || !CHECK_EQ_INT(wf_array_dtype(r), ints[k])) {
            wf_scope_end();
            continue;
        }
        /* through int64 / uint64 to compare against the bounds */
        wf_array *w = wf_astype(r, ints[k] == WF_DTYPE_U64 ? WF_DTYPE_U64 : WF_DTYPE_I64);
        const void *p = NULL;
        CHECK_OK(wf_array_data(w, &p));
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        for (int64_t i = 0; p && i < n; i++) {
            const int64_t v = ((const int64_t *)p)[i]; /* uint64 draws are below 2^63 */
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        if (!CHECK(lo >= lows[k] && hi <= highs[k] - 1))
            printf("      %s: drawn [%lld, %lld]\n", wf_dtype_name(ints[k]), (long long)lo,
                   (long long)hi);
        if (wf_dtype_size(ints[k]) == 1) /* 20000 draws reach both ends of 256 values */
            CHECK(lo == lows[k] && hi == highs[k] - 1);
        /* the same key gives the same bits */
        wf_array *again = wf_random_randint(lows[k], highs[k], &n, 1, ints[k], &key);
        const void *q = NULL, *p2 = NULL;
        CHECK_OK(wf_array_data(again, &q));
        CHECK_OK(wf_array_data(r, &p2));
        CHECK(q && p2 && memcmp(q, p2, (size_t)n * wf_dtype_size(ints[k])) == 0);
        wf_scope_end();
    }
    CHECK(wf_random_randint(0, 129, &n, 1, WF_DTYPE_I8, &key) == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_INVALID_ARGUMENT);
    wf_clear_error();
    CHECK(wf_random_randint(-1, 5, &n, 1, WF_DTYPE_U16, &key) == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_INVALID_ARGUMENT);
    wf_clear_error();
    check_dtype_error(wf_random_randint(0, 5, &n, 1, WF_DTYPE_C64, &key), "complex64");
}

/* ---------------------------------------------------------------- complex64 errors */

static void test_complex_rejected(void)
{
    wf_scope_begin();
    wf_array *z = wf_zeros((int64_t[]){2, 2}, 2, WF_DTYPE_C64);
    /* what MLX rejects for complex: ordering, floor / ceil, expm1, sigmoid,
     * erf, remainder, arg reductions, softmax, clip (tests/unit/test_complex_ops.c
     * has what it takes) */
    check_dtype_error(wf_less(z, z), "complex64");
    check_dtype_error(wf_greater_equal(z, z), "complex64");
    check_dtype_error(wf_expm1(z), "complex64");
    check_dtype_error(wf_sigmoid(z), "complex64");
    check_dtype_error(wf_erf(z), "complex64");
    check_dtype_error(wf_floor(z), "complex64");
    check_dtype_error(wf_remainder(z, z), "complex64");
    check_dtype_error(wf_floor_divide(z, z), "complex64");
    check_dtype_error(wf_complex(z, z), "complex64");
    check_dtype_error(wf_argmax(z, 0, false), "complex64");
    check_dtype_error(wf_softmax(z, NULL, 0), "complex64");
    check_dtype_error(wf_clip(z, z, z), "complex64");
    check_dtype_error(wf_arctan2(z, z), "complex64");
    /* what it does take: shape ops, where, astype, stop_gradient */
    CHECK_NOT_NULL(wf_transpose(z, NULL, 0));
    CHECK_NOT_NULL(wf_stop_gradient(z));
    CHECK_NOT_NULL(wf_astype(z, WF_DTYPE_F64));
    wf_scope_end();
}

/* ---------------------------------------------------------------- complex64 */

/* A 1-d complex64 array of n (re, im) pairs. */
static wf_array *carr(const float *pairs, int64_t n) { return arr(pairs, n, WF_DTYPE_C64); }

/* Reads n complex64 values of `a` (released) into out (2n floats). */
static bool read_c64(wf_array *a, float *out, int64_t n)
{
    bool ok = CHECK_NOT_NULL(a) && CHECK_EQ_INT(wf_array_dtype(a), WF_DTYPE_C64) &&
              CHECK_EQ_INT(wf_array_size(a), n) &&
              CHECK_OK(wf_array_copy_to(a, out, (size_t)n * 8));
    if (!ok)
        wf_clear_error();
    wf_release(a);
    return ok;
}

static void test_complex_arithmetic(void)
{
    wf_scope_begin();
    const float a[8] = {1, 2, -3, 0.5f, 0, 0, 1e30f, 1e30f};
    const float b[8] = {3, -4, 2, 2, 1, 0, 1e30f, -1e30f};
    wf_array *x = carr(a, 4), *y = carr(b, 4);
    float got[8];
    /* references: the textbook formulas in double, rounded to float32 */
    double want[8];
    if (read_c64(wf_add(x, y), got, 4))
        for (int i = 0; i < 8; i++)
            CHECK_NEAR(got[i], (double)a[i] + b[i], 0);
    if (read_c64(wf_subtract(x, y), got, 4))
        for (int i = 0; i < 8; i++)
            CHECK_NEAR(got[i], (double)a[i] - b[i], 0);
    if (read_c64(wf_multiply(x, y), got, 4)) {
        for (int i = 0; i < 3; i++) {
            want[2 * i] = (double)a[2 * i] * b[2 * i] - (double)a[2 * i + 1] * b[2 * i + 1];
            want[2 * i + 1] = (double)a[2 * i] * b[2 * i + 1] + (double)a[2 * i + 1] * b[2 * i];
            CHECK_NEAR(got[2 * i], want[2 * i], 1e-6 * fabs(want[2 * i]));
            CHECK_NEAR(got[2 * i + 1], want[2 * i + 1], 1e-6 * fabs(want[2 * i + 1]));
        }
    }
    /* division: Smith's method keeps (1e30 + 1e30i) / (1e30 - 1e30i) = i
     * finite where the textbook |b|^2 overflows float32; by zero: IEEE */
    if (read_c64(wf_divide(x, y), got, 4)) {
        CHECK_NEAR(got[0], (1.0 * 3 + 2.0 * -4) / 25, 1e-7); /* (1+2i)/(3-4i) = -0.2+0.4i */
        CHECK_NEAR(got[1], (2.0 * 3 - 1.0 * -4) / 25, 1e-7);
        CHECK_NEAR(got[2], (-3.0 * 2 + 0.5 * 2) / 8, 1e-7);
        CHECK_NEAR(got[3], (0.5 * 2 - -3.0 * 2) / 8, 1e-7);
        CHECK(got[4] == 0 && got[5] == 0); /* 0 / 1 */
        CHECK_NEAR(got[6], 0, 1e-6);
        CHECK_NEAR(got[7], 1, 1e-6);
    }
    const float one_zero[2] = {1, 0}, zero[2] = {0, 0};
    if (read_c64(wf_divide(carr(one_zero, 1), carr(zero, 1)), got, 1))
        CHECK(isinf(got[0]) && isnan(got[1]));
    /* promotion: a real operand becomes (x, 0); integers too */
    const int32_t k = 2;
    if (read_c64(wf_multiply(x, wf_array_from_data(&k, NULL, 0, WF_DTYPE_I32)), got, 4))
        for (int i = 0; i < 8; i++)
            CHECK_NEAR(got[i], 2.0 * a[i], 0);
    /* negative, conjugate, real, imag, abs (float32, hypot: no overflow) */
    if (read_c64(wf_negative(x), got, 4))
        for (int i = 0; i < 8; i++)
            CHECK(got[i] == -a[i]);
    if (read_c64(wf_conjugate(x), got, 4))
        for (int i = 0; i < 4; i++)
            CHECK(got[2 * i] == a[2 * i] && got[2 * i + 1] == -a[2 * i + 1]);
    const float re[4] = {1, -3, 0, 1e30f}, im[4] = {2, 0.5f, 0, 1e30f};
    check_bytes(wf_real(x), WF_DTYPE_F32, re, 4, "real");
    check_bytes(wf_imag(x), WF_DTYPE_F32, im, 4, "imag");
    float mag[4];
    wf_array *m = wf_abs(x);
    CHECK_EQ_INT(wf_array_dtype(m), WF_DTYPE_F32);
    CHECK_OK(wf_array_copy_to(m, mag, sizeof mag));
    CHECK_NEAR(mag[0], sqrt(5.0), 1e-6);
    CHECK_NEAR(mag[1], sqrt(9.25), 1e-6);
    CHECK(mag[2] == 0);
    CHECK_NEAR(mag[3], 1e30 * sqrt(2.0), 1e24);
    /* construction from parts (broadcast, converted to float32) */
    const double r2[2] = {1.5, -2};
    wf_array *c = wf_complex(wf_array_from_data(r2, (int64_t[]){2}, 1, WF_DTYPE_F64),
                             wf_scalar(3, WF_DTYPE_I32));
    const float cw[4] = {1.5f, 3, -2, 3};
    check_bytes(c, WF_DTYPE_C64, cw, 2, "complex(re, im)");
    /* equality of both parts; NaN / inf tests of either part */
    const float e1[6] = {1, 2, 1, 2, NAN, 0}, e2[6] = {1, 2, 1, -2, NAN, 0};
    const uint8_t eq[3] = {1, 0, 0}, ne[3] = {0, 1, 1};
    check_bytes(wf_equal(carr(e1, 3), carr(e2, 3)), WF_DTYPE_BOOL, eq, 3, "equal c64");
    check_bytes(wf_not_equal(carr(e1, 3), carr(e2, 3)), WF_DTYPE_BOOL, ne, 3, "not_equal c64");
    const float s[6] = {0, NAN, INFINITY, 0, 1, 2};
    const uint8_t nan_w[3] = {1, 0, 0}, inf_w[3] = {0, 1, 0}, fin_w[3] = {0, 0, 1};
    check_bytes(wf_isnan(carr(s, 3)), WF_DTYPE_BOOL, nan_w, 3, "isnan c64");
    check_bytes(wf_isinf(carr(s, 3)), WF_DTYPE_BOOL, inf_w, 3, "isinf c64");
    check_bytes(wf_isfinite(carr(s, 3)), WF_DTYPE_BOOL, fin_w, 3, "isfinite c64");
    /* sum and mean: each part reduced in the fixed order of a float32 row */
    enum { N = 10000 };
    float *v = malloc(2 * N * sizeof *v), *vr = malloc(N * sizeof *vr), *vi = malloc(N * sizeof *vi);
    for (int i = 0; i < N; i++) {
        vr[i] = v[2 * i] = (float)((i * 7) % 13) * 0.25f - 1;
        vi[i] = v[2 * i + 1] = (float)((i * 5) % 11) * -0.5f;
    }
    wf_array *big = carr(v, N);
    float sum[2], sr = 0, si = 0;
    CHECK_OK(wf_array_copy_to(wf_sum(big, NULL, 0, false), sum, sizeof sum));
    CHECK_OK(wf_array_copy_to(wf_sum(arr(vr, N, WF_DTYPE_F32), NULL, 0, false), &sr, 4));
    CHECK_OK(wf_array_copy_to(wf_sum(arr(vi, N, WF_DTYPE_F32), NULL, 0, false), &si, 4));
    CHECK(sum[0] == sr && sum[1] == si); /* the bits of the float32 sums of the parts */
    float mean[2];
    wf_array *mn = wf_mean(wf_reshape(big, (int64_t[]){100, 100}, 2), (int[]){0}, 1, false);
    CHECK_EQ_INT(wf_array_dtype(mn), WF_DTYPE_C64);
    CHECK_EQ_INT(wf_array_size(mn), 100);
    CHECK_OK(wf_array_copy_to(wf_take(mn, wf_scalar(7, WF_DTYPE_I32), 0), mean, sizeof mean));
    double mr = 0, mi = 0;
    for (int i = 0; i < 100; i++) {
        mr += vr[i * 100 + 7];
        mi += vi[i * 100 + 7];
    }
    CHECK_NEAR(mean[0], mr / 100, 1e-6);
    CHECK_NEAR(mean[1], mi / 100, 1e-6);
    free(v);
    free(vr);
    free(vi);
    wf_scope_end();
}

/* exp, log, sqrt, sin, cos, tanh of complex64 against the formulas in
 * double (exp(x + iy) = e^x (cos y + i sin y), ...), principal branches. */
static void test_complex_functions(void)
{
    wf_scope_begin();
    enum { N = 6 };
    const float z[2 * N] = {0.5f, 1.0f, -1.5f, 0.25f, 2.0f, -3.0f, 0.0f, 0.0f, -4.0f, 0.0f,
                            1e-3f, 2.5f};
    wf_array *x = carr(z, N);
    float got[2 * N];
    for (int f = 0; f < 6; f++) {
        wf_array *r = f == 0 ? wf_exp(x) : f == 1 ? wf_log(x) : f == 2 ? wf_sqrt(x)
                      : f == 3 ? wf_sin(x) : f == 4 ? wf_cos(x) : wf_tanh(x);
        if (!read_c64(r, got, N))
            continue;
        for (int i = 0; i < N; i++) {
            const double a = z[2 * i], b = z[2 * i + 1];
            double wr = 0, wi = 0;
            if (f == 0) {
                wr = exp(a) * cos(b);
                wi = exp(a) * sin(b);
            } else if (f == 1) {
                wr = log(hypot(a, b));
                wi = atan2(b, a);
            } else if (f == 2) { /* principal root: re >= 0, im with b's sign */
                const double m = hypot(a, b);
                wr = sqrt((m + a) / 2);
                wi = copysign(sqrt((m - a) / 2), b);
            } else if (f == 3) {
                wr = sin(a) * cosh(b);
                wi = cos(a) * sinh(b);
            } else if (f == 4) {
                wr = cos(a) * cosh(b);
                wi = -sin(a) * sinh(b);
            } else {
                const double d = cosh(2 * a) + cos(2 * b);
                wr = sinh(2 * a) / d;
                wi = sin(2 * b) / d;
            }
            if (f == 1 && a == 0 && b == 0) { /* log 0 = -inf */
                CHECK(isinf(got[2 * i]) && got[2 * i] < 0);
                continue;
            }
            const double tol = 4e-6 * (fabs(wr) + fabs(wi) + 1e-30);
            if (!CHECK_NEAR(got[2 * i], wr, tol) || !CHECK_NEAR(got[2 * i + 1], wi, tol))
                printf("      function %d of (%g, %g)\n", f, a, b);
        }
    }
    wf_scope_end();
}

/* d/dz of real(z * conj(z)) = |z|^2 with MLX's convention (the adjoint,
 * as PyTorch): 2 z. And of real(w * z) with respect to the real and
 * imaginary parts building z = complex(re, im). */
static wf_status abs2_body(void *payload, wf_array *const *in, size_t nin, wf_array **out,
                           size_t *nout)
{
    (void)payload;
    (void)nin;
    wf_scope_begin();
    wf_array *r = wf_sum(wf_real(wf_multiply(in[0], wf_conjugate(in[0]))), NULL, 0, false);
    out[0] = wf_keep(r);
    wf_scope_end();
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static wf_status parts_body(void *payload, wf_array *const *in, size_t nin, wf_array **out,
                            size_t *nout)
{
    (void)payload;
    (void)nin;
    wf_scope_begin();
    const float w[2] = {2, 3}; /* w = 2 + 3i: real(w z) = 2 re - 3 im */
    wf_array *z = wf_complex(in[0], in[1]);
    wf_array *r = wf_sum(wf_real(wf_multiply(arr(w, 1, WF_DTYPE_C64), z)), NULL, 0, false);
    out[0] = wf_keep(r);
    wf_scope_end();
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_complex_gradients(void)
{
    wf_scope_begin();
    const float z[4] = {1, 2, -3, 0.5f};
    wf_array *zz = carr(z, 2);
    wf_fn *f = wf_fn_new(abs2_body, NULL, NULL);
    wf_fn *g = wf_grad(f, NULL, 0);
    wf_array *out[1] = {NULL};
    size_t n = 1;
    CHECK_OK(wf_fn_call(g, &zz, 1, out, &n));
    float got[4];
    if (n == 1 && read_c64(out[0], got, 2))
        for (int i = 0; i < 2; i++) {
            CHECK_NEAR(got[2 * i], 2 * z[2 * i], 1e-6);
            CHECK_NEAR(got[2 * i + 1], 2 * z[2 * i + 1], 1e-6);
        }
    wf_fn *h = wf_fn_new(parts_body, NULL, NULL);
    wf_fn *gh = wf_grad(h, (int[]){0, 1}, 2);
    const float re[3] = {1, 2, 3}, im[3] = {-1, 0, 4};
    wf_array *in[2] = {arr(re, 3, WF_DTYPE_F32), arr(im, 3, WF_DTYPE_F32)};
    wf_array *grads[2] = {NULL, NULL};
    n = 2;
    CHECK_OK(wf_fn_call(gh, in, 2, grads, &n));
    const float g_re[3] = {2, 2, 2}, g_im[3] = {-3, -3, -3};
    if (CHECK_EQ_INT(n, 2)) {
        check_bytes(grads[0], WF_DTYPE_F32, g_re, 3, "d/d re");
        check_bytes(grads[1], WF_DTYPE_F32, g_im, 3, "d/d im");
    }
    wf_fn_release(g);
    wf_fn_release(f);
    wf_fn_release(gh);
    wf_fn_release(h);
    wf_scope_end();
}

/* ---------------------------------------------------------------- every ISA */

static void run_everything(void)
{
    RUN_TEST(test_conversion_edges);
    RUN_TEST(test_integer_arithmetic_edges);
    RUN_TEST(test_bitwise_and_shifts);
    RUN_TEST(test_reductions);
    RUN_TEST(test_data_movement_every_dtype);
    RUN_TEST(test_randint_every_integer_dtype);
}

int main(void)
{
    RUN_TEST(test_promotion_table);
    RUN_TEST(test_sizes_and_names);
    RUN_TEST(test_complex_rejected);
    RUN_TEST(test_view);
    RUN_TEST(test_vmap_and_compile);
    RUN_TEST(test_complex_arithmetic);
    RUN_TEST(test_complex_functions);
    RUN_TEST(test_complex_gradients);
    /* The kernels (conversions and reductions have one copy per variant)
     * under every instruction-set variant this CPU runs, then the default. */
    for (int isa = 0; isa < WF_VM_ISA_COUNT; isa++) {
        if (!wf_test_runs_isa(isa, wf__vm_isa_best()) || wf__vm_isa_force(isa) != WF_OK)
            continue;
        printf("  on the %s variant:\n", wf__vm_isa_name(isa));
        run_everything();
    }
    CHECK_OK(wf__vm_isa_force(-1));
    return TEST_SUMMARY();
}
