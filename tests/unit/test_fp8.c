/*
 * wf_to_fp8 / wf_from_fp8 (e4m3, MLX's semantics) against references
 * written here: the value of each of the 256 codes from its fields, and
 * the encoder as a search for the nearest code (ties to the even code,
 * saturation at 464 and for inf / NaN to +-448) over random values of
 * every magnitude, every code's value, every midpoint between neighbours,
 * and the edges (+-0, denormals of float32, 448, 464, 480, inf, NaN), from
 * float32, float64, float16 and bfloat16 inputs and a strided view; dtype
 * errors.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_ref.h"
#include "harness.h"

static void test_from_fp8_every_code(void)
{
    wf_scope_begin();
    uint8_t codes[256];
    for (int i = 0; i < 256; i++)
        codes[i] = (uint8_t)i;
    wf_array *c = wf_array_from_data(codes, (int64_t[]){16, 16}, 2, WF_DTYPE_U8);
    float f32[256];
    double f64[256];
    wf_array *a32 = wf_from_fp8(c, WF_DTYPE_F32), *a64 = wf_from_fp8(c, WF_DTYPE_F64);
    if (CHECK_NOT_NULL(a32) && CHECK_NOT_NULL(a64) && CHECK_OK(wf_array_copy_to(a32, f32, sizeof f32)) &&
        CHECK_OK(wf_array_copy_to(a64, f64, sizeof f64)))
        for (int i = 0; i < 256; i++) {
            const double want = fp8_e4m3_value((unsigned)i);
            if (!CHECK(f32[i] == (float)want && f64[i] == want &&
                       signbit(f64[i]) == signbit(want)))
                printf("      code 0x%02x: %g, want %g\n", i, f64[i], want);
        }
    CHECK(f64[0x7F] == 480.0 && f64[0xFF] == -480.0); /* no NaN code (MLX) */
    /* half types: the value rounded once (bfloat16 has 8 mantissa bits, so
     * every e4m3 value is exact in it too) */
    wf_array *bf = wf_from_fp8(c, WF_DTYPE_BF16);
    wf_array *back = bf ? wf_astype(bf, WF_DTYPE_F64) : NULL;
    if (CHECK_NOT_NULL(back) && CHECK_EQ_INT(wf_array_dtype(bf), WF_DTYPE_BF16) &&
        CHECK_OK(wf_array_copy_to(back, f64, sizeof f64)))
        for (int i = 0; i < 256; i++)
            CHECK(f64[i] == fp8_e4m3_value((unsigned)i));
    wf_scope_end();
}

enum { NRANDOM = 20000 };

static void check_encoding(wf_array *x, const float *as_f32, int64_t n, const char *what)
{
    uint8_t *got = malloc((size_t)n);
    wf_array *codes = wf_to_fp8(x);
    if (CHECK_NOT_NULL(codes) && CHECK_EQ_INT(wf_array_dtype(codes), WF_DTYPE_U8) &&
        CHECK_OK(wf_array_copy_to(codes, got, (size_t)n))) {
        int bad = 0;
        for (int64_t i = 0; i < n && bad < 5; i++) {
            const uint8_t want = fp8_e4m3_nearest(as_f32[i]);
            if (got[i] != want) {
                wf_test_fail(__FILE__, __LINE__, "%s: to_fp8(%.9g) = 0x%02x, want 0x%02x", what,
                             as_f32[i], got[i], want);
                bad++;
            }
        }
    }
    free(got);
}

static void test_to_fp8(void)
{
    wf_scope_begin();
    enum { EDGES = 16, N = NRANDOM + 2 * 256 + EDGES };
    float *v = malloc(N * sizeof *v);
    int64_t n = 0;
    unsigned seed = 12345;
    for (int i = 0; i < NRANDOM; i++) { /* random mantissas over 2^-14 .. 2^10 */
        seed = seed * 1664525u + 1013904223u;
        const float m = (float)(seed >> 8) / (float)(1u << 24);
        seed = seed * 1664525u + 1013904223u;
        const int e = (int)(seed >> 27) - 14 + (int)((seed >> 20) & 7u);
        v[n++] = ldexpf((seed & 1u) ? -m : m, e);
    }
    for (unsigned c = 0; c < 256; c++) {
        v[n++] = (float)fp8_e4m3_value(c);                                   /* exact codes */
        if ((c & 0x7Fu) < 126u)
            v[n++] = (float)((fp8_e4m3_value(c) + fp8_e4m3_value(c + 1)) / 2);   /* ties */
    }
    const float edges[EDGES] = {0.0f, -0.0f, 1e-40f, -1e-45f, 448, 463.99f, 464, -464,
                                479, 480, 1e6f, INFINITY, -INFINITY, NAN, -NAN, 0x1p-10f};
    for (int i = 0; i < EDGES; i++)
        v[n++] = edges[i];
    wf_array *x = wf_array_from_data(v, &n, 1, WF_DTYPE_F32);
    check_encoding(x, v, n, "float32");
    /* float64 and the half types: rounded to float32 first (exact for the
     * halves), as MLX */
    for (int k = 0; k < 3; k++) {
        const wf_dtype d = k == 0 ? WF_DTYPE_F64 : k == 1 ? WF_DTYPE_F16 : WF_DTYPE_BF16;
        wf_array *xd = wf_astype(x, d);
        wf_array *xf = wf_astype(xd, WF_DTYPE_F32);
        float *as_f32 = malloc((size_t)n * sizeof *as_f32);
        if (CHECK_OK(wf_array_copy_to(xf, as_f32, (size_t)n * sizeof *as_f32)))
            check_encoding(xd, as_f32, n, wf_dtype_name(d));
        free(as_f32);
    }
    /* a strided view (every third element, reversed) */
    wf_array *view = wf_slice(x, (int64_t[]){-1}, (int64_t[]){INT64_MIN}, (int64_t[]){-3});
    const int64_t nv = (n + 2) / 3;
    float *picked = malloc((size_t)nv * sizeof *picked);
    for (int64_t i = 0; i < nv; i++)
        picked[i] = v[n - 1 - 3 * i];
    check_encoding(view, picked, nv, "strided view");
    free(picked);
    /* the round trip of every code but the two 480s is the identity */
    uint8_t codes[256], back[256];
    for (int i = 0; i < 256; i++)
        codes[i] = (uint8_t)i;
    wf_array *rt = wf_to_fp8(wf_from_fp8(wf_array_from_data(codes, (int64_t[]){256}, 1,
                                                             WF_DTYPE_U8),
                                         WF_DTYPE_F32));
    if (CHECK_NOT_NULL(rt) && CHECK_OK(wf_array_copy_to(rt, back, sizeof back)))
        for (int i = 0; i < 256; i++)
            CHECK(back[i] == ((i & 0x7F) == 0x7F ? (i & 0x80) | 0x7E : i));
    free(v);
    wf_scope_end();
}

static void check_dtype_error(wf_array *result, const char *needle)
{
    CHECK(result == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_DTYPE);
    CHECK_STR_CONTAINS(wf_last_error_message(), needle);
    wf_clear_error();
}

static void test_errors(void)
{
    wf_scope_begin();
    wf_array *i = wf_zeros((int64_t[]){2}, 1, WF_DTYPE_I32);
    wf_array *u8 = wf_zeros((int64_t[]){2}, 1, WF_DTYPE_U8);
    wf_array *f = wf_zeros((int64_t[]){2}, 1, WF_DTYPE_F32);
    check_dtype_error(wf_to_fp8(i), "int32");
    check_dtype_error(wf_to_fp8(u8), "uint8");
    check_dtype_error(wf_to_fp8(wf_zeros((int64_t[]){2}, 1, WF_DTYPE_C64)), "complex64");
    check_dtype_error(wf_from_fp8(f, WF_DTYPE_F32), "float32");
    check_dtype_error(wf_from_fp8(u8, WF_DTYPE_I32), "int32");
    CHECK(wf_to_fp8(NULL) == NULL && wf_last_error() == WF_ERR_NULL_ARGUMENT);
    wf_clear_error();
    wf_scope_end();
}

int main(void)
{
    RUN_TEST(test_from_fp8_every_code);
    RUN_TEST(test_to_fp8);
    RUN_TEST(test_errors);
    return TEST_SUMMARY();
}
