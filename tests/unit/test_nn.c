/* weft_nn: parameter lists, safetensors, layers against references,
 * optimizer steps against hand-computed updates, bad input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "settle.h"
#include "util/fault.h"
#include "weft.h"
#include "weft_nn.h"

static wf_array *f32_array(const float *v, const int64_t *shape, int ndim)
{
    return wf_array_from_data(v, shape, ndim, WF_DTYPE_F32);
}

static bool read_floats(wf_array *a, float *out, size_t n)
{
    return a && wf_array_copy_to(a, out, n * sizeof *out) == WF_OK;
}

static char *temp_path(const char *name)
{
    static char path[256];
    snprintf(path, sizeof path, "/tmp/weft-test-nn-%d-%s", (int)getpid(), name);
    return path;
}

/* ------------------------------------------------------------ params + safetensors */

static void test_params_list(void)
{
    wf_nn_params *p = wf_nn_params_new();
    wf_array *a = wf_ones((int64_t[]){2, 3}, 2, WF_DTYPE_F32);
    wf_array *b = wf_zeros((int64_t[]){4}, 1, WF_DTYPE_I32);
    CHECK_OK(wf_nn_params_add(p, "layer.w", a));
    CHECK_OK(wf_nn_params_add(p, "layer.b", b));
    CHECK_EQ_SIZE(wf_nn_params_count(p), 2);
    CHECK(strcmp(wf_nn_params_name(p, 1), "layer.b") == 0);
    CHECK_EQ_INT(wf_nn_params_find(p, "layer.w"), 0);
    CHECK_EQ_INT(wf_nn_params_find(p, "nope"), -1);
    CHECK_STATUS(wf_nn_params_add(p, "layer.w", a), WF_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(wf_nn_params_add(p, "", a), WF_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(wf_nn_params_add(p, NULL, a), WF_ERR_NULL_ARGUMENT);
    CHECK_STATUS(wf_nn_params_add(NULL, "x", a), WF_ERR_NULL_ARGUMENT);
    CHECK_NULL_WITH(wf_nn_params_get(p, 2), WF_ERR_INVALID_ARGUMENT);
    wf_array *wrong_shape = wf_ones((int64_t[]){3, 2}, 2, WF_DTYPE_F32);
    wf_array *wrong_dtype = wf_ones((int64_t[]){2, 3}, 2, WF_DTYPE_F64);
    CHECK_STATUS(wf_nn_params_set(p, 0, wrong_shape), WF_ERR_SHAPE);
    CHECK_STATUS(wf_nn_params_set(p, 0, wrong_dtype), WF_ERR_DTYPE);
    wf_array *twos = wf_full((int64_t[]){2, 3}, 2, 2.0, WF_DTYPE_F32);
    CHECK_OK(wf_nn_params_set(p, 0, twos));
    /* The list keeps its own references, whatever scopes the caller opens. */
    wf_scope_begin();
    wf_nn_params *q = wf_nn_params_new();
    wf_array *scoped = wf_ones((int64_t[]){5}, 1, WF_DTYPE_F32);
    CHECK_OK(wf_nn_params_add(q, "scoped", scoped));
    wf_scope_end();
    double v = 0;
    CHECK_OK(wf_array_item(wf_sum(wf_nn_params_get(q, 0), NULL, 0, false), &v));
    CHECK_NEAR(v, 5.0, 0);
    wf_nn_params_release(q);
    wf_release(a);
    wf_release(b);
    wf_release(wrong_shape);
    wf_release(wrong_dtype);
    wf_release(twos);
    wf_nn_params_release(p);
    wf_nn_params_release(NULL);
}

static void test_safetensors_round_trip_every_dtype(void)
{
    wf_dtype dtypes[] = {WF_DTYPE_F32, WF_DTYPE_F64, WF_DTYPE_F16, WF_DTYPE_BF16,
                         WF_DTYPE_I32, WF_DTYPE_I64, WF_DTYPE_U8, WF_DTYPE_BOOL,
                         WF_DTYPE_I8,  WF_DTYPE_I16, WF_DTYPE_U16, WF_DTYPE_U32,
                         WF_DTYPE_U64};
    wf_nn_params *p = wf_nn_params_new();
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%zu.\"quoted\"", i);
        wf_array *a = wf_astype(wf_arange(0, 12, 1, WF_DTYPE_F64), dtypes[i]);
        wf_array *r = wf_reshape(a, (int64_t[]){3, 4}, 2);
        CHECK_OK(wf_nn_params_add(p, name, r));
        wf_release(a);
        wf_release(r);
    }
    wf_array *scalar = wf_scalar(7.5, WF_DTYPE_F32);
    wf_array *transposed = wf_transpose(wf_nn_params_get(p, 0), NULL, 0); /* a strided view */
    CHECK_OK(wf_nn_params_add(p, "scalar", scalar));
    CHECK_OK(wf_nn_params_add(p, "transposed", transposed));
    const char *path = temp_path("round.safetensors");
    CHECK_OK(wf_nn_save_safetensors(p, path));
    wf_nn_params *q = wf_nn_load_safetensors(path);
    CHECK_NOT_NULL(q);
    CHECK_EQ_SIZE(wf_nn_params_count(q), wf_nn_params_count(p));
    for (size_t i = 0; q && i < wf_nn_params_count(p); i++) {
        wf_array *a = wf_nn_params_get(p, i), *b = wf_nn_params_get(q, i);
        CHECK(strcmp(wf_nn_params_name(p, i), wf_nn_params_name(q, i)) == 0);
        CHECK_EQ_INT(wf_array_dtype(a), wf_array_dtype(b));
        CHECK_EQ_INT(wf_array_ndim(a), wf_array_ndim(b));
        for (int d = 0; d < wf_array_ndim(a); d++)
            CHECK_EQ_INT(wf_array_dim(a, d), wf_array_dim(b, d));
        double same = 0;
        wf_array *eq = wf_all(wf_equal(a, b), NULL, 0, false);
        CHECK_OK(wf_array_item(eq, &same));
        CHECK(same == 1.0);
        wf_release(eq);
    }
    wf_release(scalar);
    wf_release(transposed);
    wf_nn_params_release(p);
    wf_nn_params_release(q);
    unlink(path);
}

/* The new integer types at their extremes and complex64, bit for bit. */
static void test_safetensors_new_dtypes_bits(void)
{
    const int8_t i8[2] = {INT8_MIN, INT8_MAX};
    const int16_t i16[2] = {INT16_MIN, INT16_MAX};
    const uint16_t u16[2] = {0, UINT16_MAX};
    const uint32_t u32[2] = {0, UINT32_MAX};
    const uint64_t u64[2] = {UINT64_C(1) << 63, UINT64_MAX};
    const float c64[4] = {1.5f, -2.0f, 0.0f, 3.25f};
    const struct { const char *name; wf_dtype d; const void *v; size_t bytes; } t[] = {
        {"i8", WF_DTYPE_I8, i8, sizeof i8},      {"i16", WF_DTYPE_I16, i16, sizeof i16},
        {"u16", WF_DTYPE_U16, u16, sizeof u16},  {"u32", WF_DTYPE_U32, u32, sizeof u32},
        {"u64", WF_DTYPE_U64, u64, sizeof u64},  {"c64", WF_DTYPE_C64, c64, sizeof c64},
    };
    enum { N = sizeof t / sizeof t[0] };
    wf_nn_params *p = wf_nn_params_new();
    const int64_t two = 2;
    for (size_t i = 0; i < N; i++) {
        wf_array *a = wf_array_from_data(t[i].v, &two, 1, t[i].d);
        CHECK_OK(wf_nn_params_add(p, t[i].name, a));
        wf_release(a);
    }
    const char *path = temp_path("newdtypes.safetensors");
    CHECK_OK(wf_nn_save_safetensors(p, path));
    /* the header names the safetensors dtypes */
    FILE *f = fopen(path, "rb");
    char head[1024] = {0};
    CHECK(f != NULL && fread(head, 1, sizeof head - 1, f) > 8);
    if (f)
        fclose(f);
    const char *names[N] = {"\"I8\"", "\"I16\"", "\"U16\"", "\"U32\"", "\"U64\"", "\"C64\""};
    for (size_t i = 0; i < N; i++)
        CHECK_STR_CONTAINS(head + 8, names[i]);
    wf_nn_params *q = wf_nn_load_safetensors(path);
    CHECK_NOT_NULL(q);
    for (size_t i = 0; q && i < N; i++) {
        wf_array *b = wf_nn_params_get(q, i);
        CHECK(strcmp(wf_nn_params_name(q, i), t[i].name) == 0);
        CHECK_EQ_INT(wf_array_dtype(b), t[i].d);
        unsigned char got[16];
        CHECK_OK(wf_array_copy_to(b, got, sizeof got));
        CHECK(memcmp(got, t[i].v, t[i].bytes) == 0);
    }
    wf_nn_params_release(p);
    wf_nn_params_release(q);
    unlink(path);
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, n, f);
    fclose(f);
}

/* A file written the way the reference implementation lays it out: header
 * keys in any order, metadata first, padding spaces. */
static void test_load_foreign_file_and_bad_files(void)
{
    /* a copy: temp_path's buffer is reused by the "missing" check below */
    char path[256];
    snprintf(path, sizeof path, "%s", temp_path("foreign.safetensors"));
    const char header[] = "{\"__metadata__\":{\"k\":\"v\"},\"b\":{\"data_offsets\":[8,20],"
                          "\"shape\":[3],\"dtype\":\"I32\"},\"a\":{\"dtype\":\"F32\",\"shape\":"
                          "[2],\"data_offsets\":[0,8]}}   ";
    size_t hl = strlen(header);
    unsigned char file[512] = {0};
    for (int i = 0; i < 8; i++)
        file[i] = (unsigned char)(hl >> (8 * i));
    memcpy(file + 8, header, hl);
    float av[2] = {1.5f, -2.0f};
    int32_t bv[3] = {7, 8, 9};
    memcpy(file + 8 + hl, av, 8);
    memcpy(file + 8 + hl + 8, bv, 12);
    write_bytes(path, file, 8 + hl + 20);
    wf_nn_params *q = wf_nn_load_safetensors(path);
    CHECK_NOT_NULL(q);
    if (q) {
        CHECK(strcmp(wf_nn_params_name(q, 0), "a") == 0); /* by data offset */
        float got[2];
        CHECK(read_floats(wf_nn_params_get(q, 0), got, 2));
        CHECK(got[0] == 1.5f && got[1] == -2.0f);
        int32_t gi[3];
        CHECK_OK(wf_array_copy_to(wf_nn_params_get(q, 1), gi, sizeof gi));
        CHECK(gi[2] == 9);
    }
    wf_nn_params_release(q);

    /* Bad files: missing, short, huge header length, bad JSON, bad dtype,
     * offsets outside the data. */
    CHECK_NULL_WITH(wf_nn_load_safetensors(temp_path("missing")), WF_ERR_IO);
    CHECK_NULL_WITH(wf_nn_load_safetensors(NULL), WF_ERR_NULL_ARGUMENT);
    write_bytes(path, "abc", 3);
    CHECK_NULL_WITH(wf_nn_load_safetensors(path), WF_ERR_INVALID_ARGUMENT);
    unsigned char huge[16] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
    write_bytes(path, huge, sizeof huge);
    CHECK_NULL_WITH(wf_nn_load_safetensors(path), WF_ERR_INVALID_ARGUMENT);
    const char *bad_headers[] = {"{\"a\":{\"dtype\":\"F32\"", "{\"a\":{\"dtype\":\"Q8\",\"shape\":[1],"
                                                            "\"data_offsets\":[0,4]}}",
                                 "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,4]}}"};
    wf_status want[] = {WF_ERR_INVALID_ARGUMENT, WF_ERR_DTYPE, WF_ERR_INVALID_ARGUMENT};
    for (int k = 0; k < 3; k++) {
        size_t n = strlen(bad_headers[k]);
        memset(file, 0, sizeof file);
        for (int i = 0; i < 8; i++)
            file[i] = (unsigned char)(n >> (8 * i));
        memcpy(file + 8, bad_headers[k], n);
        write_bytes(path, file, 8 + n + 4);
        CHECK_NULL_WITH(wf_nn_load_safetensors(path), want[k]);
    }
    CHECK_STATUS(wf_nn_save_safetensors(NULL, path), WF_ERR_NULL_ARGUMENT);
    wf_nn_params *empty = wf_nn_params_new();
    CHECK_STATUS(wf_nn_save_safetensors(empty, "/nonexistent-dir/x.safetensors"), WF_ERR_IO);
    wf_nn_params_release(empty);
    unlink(path);
}

/* Writes a safetensors file of `header` (JSON) and `data`. */
static void write_safetensors(const char *path, const char *header, const void *data,
                              size_t data_bytes)
{
    const size_t hl = strlen(header);
    unsigned char *file = calloc(1, 8 + hl + data_bytes + 1);
    for (int i = 0; i < 8; i++)
        file[i] = (unsigned char)(hl >> (8 * i));
    memcpy(file + 8, header, hl);
    memcpy(file + 8 + hl, data, data_bytes);
    write_bytes(path, file, 8 + hl + data_bytes);
    free(file);
}

/* "__metadata__" written and read back as strings; values of any length
 * (they were cut at 4095 bytes and the file refused); values that are not
 * strings skipped; F8_E4M3 tensors as their bytes. */
static void test_safetensors_metadata_and_fp8(void)
{
    const char *path = temp_path("meta.safetensors");
    wf_nn_params *p = wf_nn_params_new();
    wf_array *a = wf_array_from_data((float[]){1, 2}, (int64_t[]){2}, 1, WF_DTYPE_F32);
    CHECK_OK(wf_nn_params_add(p, "a", a));
    wf_release(a);
    char *long_value = malloc(10001);
    memset(long_value, 'x', 10000);
    long_value[10000] = 0;
    long_value[5] = '"'; /* escaped on the way out */
    wf_nn_gguf_meta *meta = wf_nn_gguf_meta_new();
    CHECK_OK(wf_nn_gguf_meta_add_strings(meta, "format", (const char *[]){"mlx"}, 1, false));
    CHECK_OK(wf_nn_gguf_meta_add_strings(meta, "long", (const char *const *)&long_value, 1,
                                         false));
    CHECK_OK(wf_nn_save_safetensors_with_metadata(p, meta, path));
    wf_nn_gguf_meta *got = NULL;
    wf_nn_params *q = wf_nn_load_safetensors_with_metadata(path, &got);
    CHECK_NOT_NULL(q);
    if (q && got) {
        CHECK_EQ_INT((long long)wf_nn_gguf_meta_count(got), 2);
        const char *const *v;
        CHECK(strcmp(wf_nn_gguf_meta_key(got, 0), "format") == 0);
        CHECK(wf_nn_gguf_meta_strings(got, 0, &v) == 1 && strcmp(v[0], "mlx") == 0);
        CHECK(wf_nn_gguf_meta_strings(got, 1, &v) == 1 && strcmp(v[0], long_value) == 0);
        CHECK_EQ_INT((long long)wf_nn_params_count(q), 1);
    }
    wf_nn_params_release(q);
    wf_nn_gguf_meta_release(got);
    /* without metadata: {"format": "weft"}; a list only of strings */
    CHECK_OK(wf_nn_save_safetensors(p, path));
    got = NULL;
    q = wf_nn_load_safetensors_with_metadata(path, &got);
    const char *const *v = NULL;
    CHECK(q && got && wf_nn_gguf_meta_count(got) == 1 &&
          wf_nn_gguf_meta_strings(got, 0, &v) == 1 && strcmp(v[0], "weft") == 0);
    wf_nn_params_release(q);
    wf_nn_gguf_meta_release(got);
    /* no memory for the metadata list (the first allocation): NULL, a message */
    got = NULL;
    wf__fault_arm(1);
    q = wf_nn_load_safetensors_with_metadata(path, &got);
    CHECK(q == NULL && got == NULL && wf__fault_fired());
    wf__fault_arm(0);
    CHECK(wf_last_error() == WF_ERR_OUT_OF_MEMORY && strstr(wf_last_error_message(), "memory"));
    wf_array *n = wf_array_from_data((float[]){3}, NULL, 0, WF_DTYPE_F32);
    CHECK_OK(wf_nn_gguf_meta_add_array(meta, "number", n));
    wf_release(n);
    CHECK_STATUS(wf_nn_save_safetensors_with_metadata(p, meta, path), WF_ERR_INVALID_ARGUMENT);
    CHECK(strstr(wf_last_error_message(), "number") != NULL);
    wf_nn_gguf_meta_release(meta);
    wf_nn_params_release(p);
    free(long_value);

    /* a foreign file: a number and an object in the metadata are skipped;
     * F8_E4M3 bytes load as uint8 */
    const unsigned char fp8[4] = {0x38, 0xb8, 0x7e, 0x00}; /* 1, -1, 448, 0 */
    write_safetensors(path,
                      "{\"__metadata__\":{\"n\":3,\"o\":{\"x\":[1]},\"s\":\"t\"},"
                      "\"f\":{\"dtype\":\"F8_E4M3\",\"shape\":[4],\"data_offsets\":[0,4]}}",
                      fp8, sizeof fp8);
    got = NULL;
    q = wf_nn_load_safetensors_with_metadata(path, &got);
    CHECK_NOT_NULL(q);
    if (q && got) {
        CHECK_EQ_INT((long long)wf_nn_gguf_meta_count(got), 1);
        CHECK(strcmp(wf_nn_gguf_meta_key(got, 0), "s") == 0);
        wf_array *f = wf_nn_params_get(q, 0);
        CHECK_EQ_INT(wf_array_dtype(f), WF_DTYPE_U8);
        wf_array *values = wf_from_fp8(f, WF_DTYPE_F32);
        float fv[4] = {0};
        CHECK(values && wf_array_copy_to(values, fv, sizeof fv) == WF_OK);
        CHECK(fv[0] == 1.0f && fv[1] == -1.0f && fv[2] == 448.0f && fv[3] == 0.0f);
        wf_release(values);
    }
    wf_nn_params_release(q);
    wf_nn_gguf_meta_release(got);
    /* a repeated metadata key is a malformed file; metadata NULL: ignored */
    write_safetensors(path, "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", "", 0);
    got = NULL;
    CHECK_NULL_WITH(wf_nn_load_safetensors_with_metadata(path, &got), WF_ERR_INVALID_ARGUMENT);
    CHECK(got == NULL);
    q = wf_nn_load_safetensors(path);
    CHECK_NOT_NULL(q);
    wf_nn_params_release(q);
    CHECK_NULL_WITH(wf_nn_load_safetensors_with_metadata(NULL, &got), WF_ERR_NULL_ARGUMENT);
    CHECK_STATUS(wf_nn_save_safetensors_with_metadata(NULL, NULL, path), WF_ERR_NULL_ARGUMENT);
    unlink(path);
}

/* ------------------------------------------------------------ layers */

static void test_linear_and_mlp(void)
{
    float x[6] = {1, 2, 3, 4, 5, 6}, w[6] = {1, 0, 0, 1, 1, 1}, b[2] = {0.5f, -0.5f};
    wf_array *xa = f32_array(x, (int64_t[]){2, 3}, 2), *wa = f32_array(w, (int64_t[]){3, 2}, 2);
    wf_array *ba = f32_array(b, (int64_t[]){2}, 1);
    wf_array *y = wf_nn_linear(xa, wa, ba);
    float got[4];
    CHECK(read_floats(y, got, 4));
    CHECK(got[0] == 4.5f && got[1] == 4.5f && got[2] == 10.5f && got[3] == 10.5f);
    wf_array *m = wf_nn_mlp(xa, wa, ba, wf_transpose(wa, NULL, 0), NULL);
    CHECK_NOT_NULL(m);
    CHECK_EQ_INT(wf_array_dim(m, 1), 3);
    CHECK_NULL_WITH(wf_nn_linear(xa, ba, NULL), WF_ERR_SHAPE);
    wf_release(xa);
    wf_release(wa);
    wf_release(ba);
    wf_release(y);
    wf_release(m);
}

static void test_cross_entropy_against_reference(void)
{
    float logits[6] = {1.0f, 2.0f, 0.5f, -1.0f, 0.0f, 3.0f};
    int32_t targets[2] = {1, 0};
    float weights[2] = {1.0f, 3.0f};
    wf_array *l = f32_array(logits, (int64_t[]){2, 3}, 2);
    wf_array *t = wf_array_from_data(targets, (int64_t[]){2}, 1, WF_DTYPE_I32);
    wf_array *w = f32_array(weights, (int64_t[]){2}, 1);
    double nll[2];
    for (int r = 0; r < 2; r++) {
        double s = 0;
        for (int c = 0; c < 3; c++)
            s += exp(logits[r * 3 + c]);
        nll[r] = log(s) - logits[r * 3 + targets[r]];
    }
    double v = 0;
    CHECK_OK(wf_array_item(wf_nn_cross_entropy(l, t, NULL), &v));
    CHECK_NEAR(v, (nll[0] + nll[1]) / 2, 1e-5);
    CHECK_OK(wf_array_item(wf_nn_cross_entropy(l, t, w), &v));
    CHECK_NEAR(v, (nll[0] + 3 * nll[1]) / 4, 1e-5);
    CHECK_NULL_WITH(wf_nn_cross_entropy(NULL, t, NULL), WF_ERR_NULL_ARGUMENT);
    CHECK_NULL_WITH(wf_nn_cross_entropy(t, t, NULL), WF_ERR_SHAPE);
    wf_release(l);
    wf_release(t);
    wf_release(w);
}

/* Causal: changing the last position's input leaves earlier outputs alone. */
static void test_causal_attention(void)
{
    enum { B = 2, T = 5, D = 8 };
    wf_key k = wf_random_key(3);
    wf_key keys[3];
    wf_random_split(k, 3, keys);
    wf_array *x = wf_random_normal((int64_t[]){B, T, D}, 3, WF_DTYPE_F32, 0, 1, &keys[0]);
    wf_array *wqkv = wf_random_normal((int64_t[]){D, 3 * D}, 2, WF_DTYPE_F32, 0, 0.3, &keys[1]);
    wf_array *wo = wf_random_normal((int64_t[]){D, D}, 2, WF_DTYPE_F32, 0, 0.3, &keys[2]);
    wf_array *y1 = wf_nn_causal_self_attention(x, wqkv, wo, 2);
    CHECK_NOT_NULL(y1);
    float xs[B * T * D];
    CHECK(read_floats(x, xs, B * T * D));
    for (int b = 0; b < B; b++)
        for (int d = 0; d < D; d++)
            xs[(b * T + T - 1) * D + d] += 1.0f;
    wf_array *x2 = f32_array(xs, (int64_t[]){B, T, D}, 3);
    wf_array *y2 = wf_nn_causal_self_attention(x2, wqkv, wo, 2);
    float a[B * T * D], c[B * T * D];
    CHECK(read_floats(y1, a, B * T * D) && read_floats(y2, c, B * T * D));
    bool early_same = true, last_differs = false;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int d = 0; d < D; d++) {
                int i = (b * T + t) * D + d;
                if (t < T - 1 && a[i] != c[i])
                    early_same = false;
                if (t == T - 1 && a[i] != c[i])
                    last_differs = true;
            }
    CHECK(early_same);
    CHECK(last_differs);
    CHECK_NULL_WITH(wf_nn_causal_self_attention(x, wqkv, wo, 3), WF_ERR_SHAPE);
    CHECK_NULL_WITH(wf_nn_causal_self_attention(x, NULL, wo, 2), WF_ERR_NULL_ARGUMENT);
    wf_release(x);
    wf_release(x2);
    wf_release(wqkv);
    wf_release(wo);
    wf_release(y1);
    wf_release(y2);
}

/* ------------------------------------------------------------ optimizers */

static void test_adamw_step_matches_hand_computation(void)
{
    float p[2] = {1.0f, -2.0f}, g[2] = {0.5f, 0.25f}, m0[2] = {0.1f, 0.0f}, v0[2] = {0.01f, 0.0f};
    wf_array *pa = f32_array(p, (int64_t[]){2}, 1), *ga = f32_array(g, (int64_t[]){2}, 1);
    wf_array *ma = f32_array(m0, (int64_t[]){2}, 1), *va = f32_array(v0, (int64_t[]){2}, 1);
    wf_array *step = wf_scalar(3.0, WF_DTYPE_F32), *lr = wf_scalar(0.01, WF_DTYPE_F32);
    wf_nn_adamw_options o = wf_nn_adamw_options_default();
    o.weight_decay = 0.1;
    wf_array *np, *nm, *nv;
    CHECK_OK(wf_nn_adamw_step(&o, 1, &pa, &ga, &ma, &va, step, lr, &np, &nm, &nv));
    float gp[2], gm[2], gv[2];
    CHECK(read_floats(np, gp, 2) && read_floats(nm, gm, 2) && read_floats(nv, gv, 2));
    for (int i = 0; i < 2; i++) {
        double m = 0.9 * m0[i] + 0.1 * g[i], v = 0.999 * v0[i] + 0.001 * g[i] * g[i];
        double mh = m / (1 - pow(0.9, 3)), vh = v / (1 - pow(0.999, 3));
        double want = p[i] - 0.01 * (mh / (sqrt(vh) + 1e-8) + 0.1 * p[i]);
        CHECK_NEAR(gm[i], m, 1e-6);
        CHECK_NEAR(gv[i], v, 1e-7);
        CHECK_NEAR(gp[i], want, 1e-5);
    }
    wf_release(np);
    wf_release(nm);
    wf_release(nv);
    o.struct_size = 1;
    CHECK_STATUS(wf_nn_adamw_step(&o, 1, &pa, &ga, &ma, &va, step, lr, &np, &nm, &nv),
                 WF_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(wf_nn_adamw_step(NULL, 1, &pa, &ga, &ma, &va, NULL, lr, &np, &nm, &nv),
                 WF_ERR_NULL_ARGUMENT);
    /* A shape mismatch fails and hands out nothing. */
    wf_array *bad = wf_ones((int64_t[]){3}, 1, WF_DTYPE_F32);
    CHECK(wf_nn_adamw_step(NULL, 1, &pa, &bad, &ma, &va, step, lr, &np, &nm, &nv) != WF_OK);
    CHECK(np == NULL && nm == NULL && nv == NULL);
    wf_release(bad);

    wf_array *buf = wf_zeros((int64_t[]){2}, 1, WF_DTYPE_F32), *nb;
    CHECK_OK(wf_nn_sgd_step(0.9, 0.0, 1, &pa, &ga, &buf, lr, &np, &nb));
    CHECK(read_floats(np, gp, 2));
    CHECK_NEAR(gp[0], 1.0 - 0.01 * 0.5, 1e-6);
    CHECK_STATUS(wf_nn_sgd_step(0.9, 0.0, 1, &pa, &ga, NULL, lr, &np, NULL), WF_ERR_NULL_ARGUMENT);
    wf_release(np);
    wf_release(nb);
    wf_release(buf);
    CHECK_NEAR(wf_nn_lr_cosine(0, 100, 10, 1.0, 0.0), 0.1, 1e-12);
    CHECK_NEAR(wf_nn_lr_cosine(10, 100, 10, 1.0, 0.0), 1.0, 1e-12);
    CHECK_NEAR(wf_nn_lr_cosine(100, 100, 10, 1.0, 0.1), 0.1, 1e-12);
    wf_release(pa);
    wf_release(ga);
    wf_release(ma);
    wf_release(va);
    wf_release(step);
    wf_release(lr);
}

/* SGD with weight decay, with and without momentum, against the update
 * written out here; a failing step (a shape mismatch, then every fallible
 * operation failed in turn) hands out nothing, leaves no array alive and
 * keeps its message; the cosine schedule's clamps. */
static void test_sgd_weight_decay_failures_and_schedule_edges(void)
{
    const float p[2] = {1.0f, -2.0f}, g[2] = {0.5f, 0.25f}, b0[2] = {0.2f, -0.1f};
    wf_array *pa = f32_array(p, (int64_t[]){2}, 1), *ga = f32_array(g, (int64_t[]){2}, 1);
    wf_array *buf = f32_array(b0, (int64_t[]){2}, 1), *lr = wf_scalar(0.01, WF_DTYPE_F32);
    const int64_t live = live_arrays();
    for (int with_momentum = 0; with_momentum < 2; with_momentum++) {
        const double momentum = with_momentum ? 0.9 : 0.0;
        wf_array *np = NULL, *nb = NULL;
        if (!CHECK_OK(wf_nn_sgd_step(momentum, 0.1, 1, &pa, &ga, with_momentum ? &buf : NULL, lr,
                                     &np, with_momentum ? &nb : NULL)))
            continue;
        float gp[2], gb[2];
        CHECK(read_floats(np, gp, 2));
        CHECK(!with_momentum || read_floats(nb, gb, 2));
        for (int i = 0; i < 2; i++) {
            const double d = g[i] + 0.1 * p[i], b = momentum * b0[i] + d;
            CHECK_NEAR(gp[i], p[i] - 0.01 * (with_momentum ? b : d), 1e-6);
            if (with_momentum)
                CHECK_NEAR(gb[i], b, 1e-6);
        }
        wf_release(np);
        wf_release(nb);
    }
    wf_array *wrong = wf_ones((int64_t[]){3}, 1, WF_DTYPE_F32), *np = NULL, *nb = NULL;
    CHECK(wf_nn_sgd_step(0.9, 0.1, 1, &pa, &ga, &wrong, lr, &np, &nb) == WF_ERR_SHAPE);
    CHECK_STR_CONTAINS(wf_last_error_message(), "shapes cannot broadcast");
    CHECK(np == NULL && nb == NULL);
    wf_release(wrong);
    bool fired = true;
    for (int nth = 1; fired; nth++) {
        wf__fault_arm(nth);
        const wf_status st = wf_nn_sgd_step(0.9, 0.1, 1, &pa, &ga, &buf, lr, &np, &nb);
        fired = wf__fault_fired();
        wf__fault_arm(0);
        if (fired) {
            CHECK(st != WF_OK && np == NULL && nb == NULL);
            CHECK(wf_last_error_message()[0] != '\0');
        } else if (CHECK_OK(st)) {
            wf_release(np);
            wf_release(nb);
        }
        CHECK_OK(wf_eval(&buf, 1));
        CHECK_EQ_INT(live_arrays(), live);
    }
    wf_array *ma = wf_zeros((int64_t[]){2}, 1, WF_DTYPE_F32), *step = wf_scalar(1, WF_DTYPE_F32);
    wf_array *nm = NULL, *nv = NULL;
    CHECK_STATUS(wf_nn_adamw_step(NULL, 1, &pa, &ga, &ma, NULL, step, lr, &np, &nm, &nv),
                 WF_ERR_NULL_ARGUMENT);
    CHECK_STATUS(wf_nn_adamw_step(NULL, 1, &pa, &ga, &ma, &ma, step, NULL, &np, &nm, &nv),
                 WF_ERR_NULL_ARGUMENT);
    CHECK_STATUS(wf_nn_sgd_step(0, 0, 1, &pa, NULL, NULL, lr, &np, NULL), WF_ERR_NULL_ARGUMENT);
    wf_release(ma);
    wf_release(step);
    CHECK_NEAR(wf_nn_lr_cosine(12, 10, 10, 2.0, 0.5), 2.0, 0); /* no decay phase: the peak */
    CHECK_NEAR(wf_nn_lr_cosine(500, 100, 10, 1.0, 0.1), 0.1, 1e-12); /* past the end: floor */
    CHECK_NEAR(wf_nn_lr_cosine(55, 100, 10, 1.0, 0.0), 0.5, 1e-12);  /* halfway */
    wf_release(pa);
    wf_release(ga);
    wf_release(buf);
    wf_release(lr);
}

/* Regression (issue 30, found by the fault loop): releasing or replacing a
 * list entry while an open scope still held the same array took the
 * scope's reference instead of the list's, and the array leaked. */
static void test_params_released_inside_a_scope_that_holds_them(void)
{
    const int64_t base = live_arrays();
    CHECK_OK(wf_scope_begin());
    const float v[2] = {1, 2};
    const int64_t shape[] = {2};
    wf_array *a = wf_array_from_data(v, shape, 1, WF_DTYPE_F32);
    wf_array *b = wf_array_from_data(v, shape, 1, WF_DTYPE_F32);
    wf_nn_params *p = wf_nn_params_new();
    CHECK_OK(wf_nn_params_add(p, "a", a));
    CHECK_OK(wf_nn_params_add(p, "b", b));
    CHECK_OK(wf_nn_params_set(p, 1, a)); /* replaces b while the scope holds b */
    wf_nn_params_release(p);             /* drops a while the scope holds a */
    CHECK_OK(wf_scope_end());
    CHECK_EQ_INT(live_arrays(), base);
}

int main(void)
{
    wf_scope_begin(); /* temporaries of the checks above */
    RUN_TEST(test_params_list);
    RUN_TEST(test_safetensors_round_trip_every_dtype);
    RUN_TEST(test_safetensors_new_dtypes_bits);
    RUN_TEST(test_load_foreign_file_and_bad_files);
    RUN_TEST(test_safetensors_metadata_and_fp8);
    RUN_TEST(test_linear_and_mlp);
    RUN_TEST(test_cross_entropy_against_reference);
    RUN_TEST(test_causal_attention);
    RUN_TEST(test_adamw_step_matches_hand_computation);
    RUN_TEST(test_sgd_weight_decay_failures_and_schedule_edges);
    RUN_TEST(test_params_released_inside_a_scope_that_holds_them);
    wf_scope_end();
    return TEST_SUMMARY();
}
