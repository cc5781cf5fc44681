/*
 * Array files of weft_nn.h: .npy, .npz and GGUF.
 *  - round trips of every NumPy dtype (.npy, .npz stored and deflated) and
 *    of GGUF tensors with metadata (numbers, strings, string lists);
 *  - files built byte by byte here: a big-endian and a Fortran-order .npy;
 *    a GGUF with Q4_0, Q4_1 and Q8_0 tensors, whose values (dequantized
 *    by weft) match the ggml formulas evaluated here in double;
 *  - hostile files: every prefix of a small valid file of each format, and
 *    thousands of random byte flips, load or fail with an error, never
 *    crash (the ASan build checks reads), never allocate absurdly.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "temp_files.h"
#include "weft_nn.h"

/* A 2 x 3 array of `dtype` with distinct values. */
static wf_array *sample(wf_dtype dtype)
{
    const int64_t shape[2] = {2, 3};
    const double v[6] = {1, 0, 3, 1, 5, 0};
    wf_array *f = wf_array_from_data(v, shape, 2, WF_DTYPE_F64);
    wf_array *a = wf_astype(f, dtype);
    wf_release(f);
    return a;
}

static const wf_dtype npy_dtypes[] = {WF_DTYPE_BOOL, WF_DTYPE_I8,  WF_DTYPE_I16, WF_DTYPE_I32,
                                      WF_DTYPE_I64,  WF_DTYPE_U8,  WF_DTYPE_U16, WF_DTYPE_U32,
                                      WF_DTYPE_U64,  WF_DTYPE_F16, WF_DTYPE_F32, WF_DTYPE_F64,
                                      WF_DTYPE_C64};

static void test_npy_round_trip_every_dtype(void)
{
    for (size_t i = 0; i < sizeof npy_dtypes / sizeof *npy_dtypes; i++) {
        wf_array *a = sample(npy_dtypes[i]);
        const char *p = tmp_path("a.npy");
        CHECK_OK(wf_nn_save_npy(a, p));
        wf_array *b = wf_nn_load_npy(p);
        if (!CHECK(same_bits(a, b)))
            printf("      %s\n", wf_dtype_name(npy_dtypes[i]));
        wf_release(a), wf_release(b);
    }
    static const int64_t empties[3][3] = {{0, 4, 1}, {4, 0, 1}, {2, 0, 4}};
    for (int i = 0; i < 3; i++) { /* a zero anywhere: no data */
        wf_array *e = wf_zeros(empties[i], 3, WF_DTYPE_F32);
        CHECK_OK(wf_nn_save_npy(e, tmp_path("e.npy")));
        wf_array *e2 = wf_nn_load_npy(tmp_path("e.npy"));
        CHECK(same_bits(e, e2));
        wf_release(e), wf_release(e2);
    }
    wf_array *s = wf_scalar(2.5, WF_DTYPE_F32);
    CHECK_OK(wf_nn_save_npy(s, tmp_path("s.npy")));
    wf_array *s2 = wf_nn_load_npy(tmp_path("s.npy"));
    CHECK(same_bits(s, s2));
    wf_array *bf = sample(WF_DTYPE_BF16);
    CHECK_EQ_INT(wf_nn_save_npy(bf, tmp_path("x.npy")), WF_ERR_DTYPE);
    wf_release(s), wf_release(s2), wf_release(bf);
}

/* A .npy header for `descr`, `fortran`, shape (2, 3): 128 bytes. */
static size_t npy_header(uint8_t *out, const char *descr, bool fortran)
{
    char text[128];
    int n = snprintf(text, sizeof text, "{'descr': '%s', 'fortran_order': %s, 'shape': (2, 3), }",
                     descr, fortran ? "True" : "False");
    const size_t total = 128;
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (uint8_t)(total - 10);
    out[9] = 0;
    memcpy(out + 10, text, (size_t)n);
    memset(out + 10 + n, ' ', total - 10 - (size_t)n - 1);
    out[total - 1] = '\n';
    return total;
}

static void test_npy_big_endian_and_fortran(void)
{
    uint8_t file[128 + 24];
    const size_t h = npy_header(file, ">i4", false);
    for (int i = 0; i < 6; i++) {
        const uint32_t v = (uint32_t)(i * 1000 + 7);
        file[h + 4 * i] = (uint8_t)(v >> 24), file[h + 4 * i + 1] = (uint8_t)(v >> 16);
        file[h + 4 * i + 2] = (uint8_t)(v >> 8), file[h + 4 * i + 3] = (uint8_t)v;
    }
    write_all(tmp_path("be.npy"), file, h + 24);
    wf_array *a = wf_nn_load_npy(tmp_path("be.npy"));
    int32_t got[6] = {0};
    if (CHECK_NOT_NULL(a) && CHECK_OK(wf_array_copy_to(a, got, sizeof got)))
        for (int i = 0; i < 6; i++)
            CHECK_EQ_INT(got[i], i * 1000 + 7);
    wf_release(a);
    /* Fortran order: element (r, c) at c * 2 + r */
    npy_header(file, "<f4", true);
    const float col_major[6] = {0, 3, 1, 4, 2, 5};
    memcpy(file + 128, col_major, sizeof col_major);
    write_all(tmp_path("f.npy"), file, 128 + 24);
    a = wf_nn_load_npy(tmp_path("f.npy"));
    float v[6] = {0};
    if (CHECK_NOT_NULL(a) && CHECK_OK(wf_array_copy_to(a, v, sizeof v)))
        for (int i = 0; i < 6; i++)
            CHECK(v[i] == (float)i);
    wf_release(a);
}

static wf_nn_params *sample_params(void)
{
    wf_nn_params *p = wf_nn_params_new();
    for (size_t i = 0; i < sizeof npy_dtypes / sizeof *npy_dtypes; i++) {
        char name[32];
        snprintf(name, sizeof name, "arr_%zu", i);
        wf_array *a = sample(npy_dtypes[i]);
        wf_nn_params_add(p, name, a);
        wf_release(a);
    }
    return p;
}

static void test_npz_round_trip(void)
{
    for (int compressed = 0; compressed < 2; compressed++) {
        wf_nn_params *p = sample_params();
        CHECK_OK(wf_nn_save_npz(p, tmp_path("a.npz"), compressed));
        wf_nn_params *q = wf_nn_load_npz(tmp_path("a.npz"));
        if (CHECK_NOT_NULL(q) && CHECK_EQ_INT(wf_nn_params_count(q), wf_nn_params_count(p)))
            for (size_t i = 0; i < wf_nn_params_count(p); i++) {
                CHECK(strcmp(wf_nn_params_name(p, i), wf_nn_params_name(q, i)) == 0);
                CHECK(same_bits(wf_nn_params_get(p, i), wf_nn_params_get(q, i)));
            }
        wf_nn_params_release(p), wf_nn_params_release(q);
    }
}

static void put16(uint8_t *p, uint32_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { put16(p, v), put16(p + 2, v >> 16); }
static void put64(uint8_t *p, uint64_t v) { put32(p, (uint32_t)v), put32(p + 4, (uint32_t)(v >> 32)); }
static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The one-member archive `good` (stored, no extras) rewritten with its
 * central entry's sizes and offset as 0xFFFFFFFF, `extra` (xl bytes) after
 * its name, as zip64 writers do; loaded, or NULL with the error. */
static wf_nn_params *load_with_extra(const uint8_t *good, size_t size, const uint8_t *extra,
                                     size_t xl)
{
    const uint8_t *eocd = good + size - 22;
    const uint32_t cd_off = get32(eocd + 16), cd_size = get32(eocd + 12);
    uint8_t *z = malloc(size + xl);
    memcpy(z, good, cd_off + cd_size);
    uint8_t *ce = z + cd_off;
    put32(ce + 20, 0xffffffffu);
    put32(ce + 24, 0xffffffffu);
    put32(ce + 42, 0xffffffffu);
    put16(ce + 30, (uint32_t)xl);
    memcpy(z + cd_off + cd_size, extra, xl);
    memcpy(z + cd_off + cd_size + xl, eocd, 22);
    put32(z + cd_off + cd_size + xl + 12, cd_size + (uint32_t)xl);
    write_all(tmp_path("zip64.npz"), z, size + xl);
    free(z);
    return wf_nn_load_npz(tmp_path("zip64.npz"));
}

/* Zip64 extra fields (NumPy writes them for large arrays): the 64-bit
 * sizes and offset replace the 0xFFFFFFFF ones, after any other extra
 * field; a missing or short zip64 field is a corrupt archive. */
static void test_npz_zip64_fields(void)
{
    wf_nn_params *p = wf_nn_params_new();
    wf_array *a = sample(WF_DTYPE_F32);
    CHECK_OK(wf_nn_params_add(p, "z", a));
    CHECK_OK(wf_nn_save_npz(p, tmp_path("z.npz"), false));
    size_t size = 0;
    uint8_t *good = read_all(tmp_path("z.npz"), &size);
    if (!CHECK_NOT_NULL(good))
        return;
    const uint8_t *eocd = good + size - 22;
    const uint8_t *ce = good + get32(eocd + 16);
    const uint64_t csize = get32(ce + 20), usize = get32(ce + 24), offset = get32(ce + 42);
    /* an unrelated field (extended timestamp), then the zip64 one */
    uint8_t extra[4 + 5 + 4 + 24];
    put16(extra, 0x5455), put16(extra + 2, 5);
    memset(extra + 4, 7, 5);
    uint8_t *z64 = extra + 9;
    put16(z64, 1), put16(z64 + 2, 24);
    put64(z64 + 4, usize), put64(z64 + 12, csize), put64(z64 + 20, offset);
    wf_nn_params *q = load_with_extra(good, size, extra, sizeof extra);
    if (CHECK_NOT_NULL(q) && CHECK_EQ_INT(wf_nn_params_count(q), 1)) {
        CHECK(strcmp(wf_nn_params_name(q, 0), "z") == 0);
        CHECK(same_bits(wf_nn_params_get(q, 0), a));
    }
    wf_nn_params_release(q);
    const struct {
        const uint8_t *x;
        size_t n;
    } bad[3] = {
        {extra, 9},              /* no zip64 field at all */
        {z64, 4 + 16},           /* 16 bytes: the offset is missing */
        {extra, sizeof extra - 1}, /* the zip64 field runs past the extras */
    };
    for (int k = 0; k < 3; k++) {
        uint8_t copy[sizeof extra];
        memcpy(copy, bad[k].x, bad[k].n);
        if (k == 1)
            put16(copy + 2, 16);
        CHECK(load_with_extra(good, size, copy, bad[k].n) == NULL);
        CHECK_STATUS(wf_last_error(), WF_ERR_IO);
        CHECK_STR_CONTAINS(wf_last_error_message(), "corrupt zip central directory");
        wf_clear_error();
    }
    free(good);
    wf_release(a);
    wf_nn_params_release(p);
}

/* ---------------------------------------------------------------- GGUF */

static void test_gguf_round_trip_with_metadata(void)
{
    wf_nn_params *p = wf_nn_params_new();
    static const wf_dtype types[] = {WF_DTYPE_F32, WF_DTYPE_F16, WF_DTYPE_BF16, WF_DTYPE_I32,
                                     WF_DTYPE_I8, WF_DTYPE_F64};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        char name[32];
        snprintf(name, sizeof name, "blk.%zu.weight", i);
        wf_array *a = sample(types[i]);
        wf_nn_params_add(p, name, a);
        wf_release(a);
    }
    wf_nn_gguf_meta *m = wf_nn_gguf_meta_new();
    const char *tokens[3] = {"<s>", "hello", ""};
    const char *arch = "llama";
    wf_array *n = wf_scalar(4096, WF_DTYPE_U32), *v = sample(WF_DTYPE_F32);
    wf_array *v1 = wf_reshape(v, (int64_t[]){6}, 1);
    CHECK_OK(wf_nn_gguf_meta_add_strings(m, "general.architecture", &arch, 1, false));
    CHECK_OK(wf_nn_gguf_meta_add_strings(m, "tokenizer.ggml.tokens", tokens, 3, true));
    CHECK_OK(wf_nn_gguf_meta_add_array(m, "llama.embedding_length", n));
    CHECK_OK(wf_nn_gguf_meta_add_array(m, "scores", v1));
    CHECK_EQ_INT(wf_nn_gguf_meta_add_array(m, "scores", v1), WF_ERR_INVALID_ARGUMENT);
    CHECK_OK(wf_nn_save_gguf(p, m, tmp_path("a.gguf")));
    wf_nn_gguf_meta *m2 = NULL;
    wf_nn_params *q = wf_nn_load_gguf(tmp_path("a.gguf"), &m2);
    if (CHECK_NOT_NULL(q) && CHECK_EQ_INT(wf_nn_params_count(q), wf_nn_params_count(p)))
        for (size_t i = 0; i < wf_nn_params_count(p); i++)
            CHECK(same_bits(wf_nn_params_get(p, i), wf_nn_params_get(q, i)));
    if (CHECK_NOT_NULL(m2) && CHECK_EQ_INT(wf_nn_gguf_meta_count(m2), 4)) {
        const char *const *s;
        CHECK_EQ_INT(wf_nn_gguf_meta_kind(m2, 0), WF_GGUF_STRING);
        CHECK(wf_nn_gguf_meta_strings(m2, 0, &s) == 1 && strcmp(s[0], "llama") == 0);
        CHECK_EQ_INT(wf_nn_gguf_meta_kind(m2, 1), WF_GGUF_STRINGS);
        CHECK(wf_nn_gguf_meta_strings(m2, 1, &s) == 3 && strcmp(s[1], "hello") == 0 && s[2][0] == 0);
        CHECK(same_bits(wf_nn_gguf_meta_array(m2, 2), n));
        CHECK(same_bits(wf_nn_gguf_meta_array(m2, 3), v1));
    }
    wf_nn_params_release(p), wf_nn_params_release(q);
    wf_nn_gguf_meta_release(m), wf_nn_gguf_meta_release(m2);
    wf_release(n), wf_release(v), wf_release(v1);
}

/* Little-endian writers for hand-built GGUF files. */
typedef struct buf {
    uint8_t d[8192];
    size_t n;
} buf;
static void put(buf *b, const void *p, size_t n)
{
    memcpy(b->d + b->n, p, n);
    b->n += n;
}
static void put_u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(buf *b, const char *s)
{
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

static double half_value(uint16_t h)
{
    const int e = (h >> 10) & 31, m = h & 1023;
    const double v = e ? ldexp(m | 1024, e - 25) : ldexp(m, -24);
    return h & 0x8000 ? -v : v;
}

/* A GGUF with one (2, 64) tensor of each of Q4_0, Q4_1, Q8_0 (random
 * blocks); *ref gets their values by ggml's formulas, tensor after tensor,
 * and *mag the size of the terms (weft's float16 dequantization rounds
 * code * scale, then the sum). */
static size_t quantized_gguf(buf *b, double *ref, double *mag)
{
    static const int types[3] = {2, 3, 8};
    static const size_t block[3] = {18, 20, 34};
    uint8_t data[3][4 * 34];
    unsigned seed = 12345;
    b->n = 0;
    put(b, "GGUF", 4);
    put_u32(b, 3);
    put_u64(b, 3);
    put_u64(b, 0);
    uint64_t offset = 0;
    for (int t = 0; t < 3; t++) {
        char name[32]; /* room for any int: GCC checks the worst case */
        snprintf(name, sizeof name, "q%d.weight", t);
        put_str(b, name);
        put_u32(b, 2);
        put_u64(b, 64);
        put_u64(b, 2);
        put_u32(b, (uint32_t)types[t]);
        put_u64(b, offset);
        offset += (4 * block[t] + 31) / 32 * 32;
    }
    while (b->n % 32)
        b->d[b->n++] = 0;
    for (int t = 0; t < 3; t++) {
        for (size_t i = 0; i < 4 * block[t]; i++)
            data[t][i] = (uint8_t)((seed = seed * 1103515245u + 12345u) >> 16);
        for (int k = 0; k < 4; k++) { /* scales of moderate size, positive or negative */
            data[t][k * block[t]] = (uint8_t)(seed >> 8);
            data[t][k * block[t] + 1] = (uint8_t)(0x2c + (k & 1) * 0x80);
            if (types[t] == 3)
                data[t][k * block[t] + 3] = 0x3a;
        }
        for (int k = 0; k < 4; k++) {
            const uint8_t *p = data[t] + k * block[t];
            const double d = half_value((uint16_t)(p[0] | p[1] << 8));
            for (int j = 0; j < 32; j++) {
                double v, m;
                if (types[t] == 8) {
                    v = d * (int8_t)p[2 + j];
                    m = fabs(d) * 256;
                } else {
                    const int q = j < 16 ? p[(types[t] == 3 ? 4 : 2) + j] & 15
                                         : p[(types[t] == 3 ? 4 : 2) + j - 16] >> 4;
                    const double min = half_value((uint16_t)(p[2] | p[3] << 8));
                    v = types[t] == 2 ? d * (q - 8) : d * q + min;
                    m = fabs(d) * 16 + (types[t] == 3 ? fabs(min) : 0);
                }
                ref[t * 128 + k * 32 + j] = v;
                mag[t * 128 + k * 32 + j] = m;
            }
        }
        put(b, data[t], 4 * block[t]);
        while (b->n % 32)
            b->d[b->n++] = 0;
    }
    return b->n;
}

static void test_gguf_quantized_tensors(void)
{
    static buf b;
    double ref[3 * 128], mag[3 * 128];
    quantized_gguf(&b, ref, mag);
    write_all(tmp_path("q.gguf"), b.d, b.n);
    wf_nn_params *p = wf_nn_load_gguf(tmp_path("q.gguf"), NULL);
    if (!CHECK_NOT_NULL(p) || !CHECK_EQ_INT(wf_nn_params_count(p), 9))
        return;
    static const int bits[3] = {4, 4, 8};
    for (int t = 0; t < 3; t++) {
        char name[32];
        snprintf(name, sizeof name, "q%d.scales", t);
        CHECK(strcmp(wf_nn_params_name(p, (size_t)t * 3 + 1), name) == 0);
        wf_array *d = wf_dequantize(wf_nn_params_get(p, (size_t)t * 3), wf_nn_params_get(p, (size_t)t * 3 + 1),
                                    wf_nn_params_get(p, (size_t)t * 3 + 2), 32, bits[t], WF_QUANT_AFFINE);
        wf_array *f = wf_astype(d, WF_DTYPE_F64);
        double v[128];
        int bad = 0;
        if (CHECK_NOT_NULL(f) && CHECK_OK(wf_array_copy_to(f, v, sizeof v)))
            for (int i = 0; i < 128; i++) /* two float16 roundings */
                bad += fabs(v[i] - ref[t * 128 + i]) > mag[t * 128 + i] * 1e-3;
        if (!CHECK_EQ_INT(bad, 0))
            printf("      tensor type %d\n", t);
        wf_release(d), wf_release(f);
    }
    wf_nn_params_release(p);
}

/* ---------------------------------------------------------------- hostile files */

typedef enum { NPY, NPZ, GGUF } format;

/* Loads `path` as `fmt`; true if it loaded (checks the error otherwise). */
static bool try_load(format fmt, const char *path)
{
    wf_clear_error();
    void *r;
    if (fmt == NPY) {
        wf_array *a = wf_nn_load_npy(path);
        r = a;
        wf_release(a);
    } else {
        wf_nn_gguf_meta *m = NULL;
        wf_nn_params *p = fmt == NPZ ? wf_nn_load_npz(path) : wf_nn_load_gguf(path, &m);
        r = p;
        wf_nn_params_release(p);
        wf_nn_gguf_meta_release(m);
    }
    if (!r)
        CHECK(wf_last_error() != WF_OK && wf_last_error_message()[0] != 0);
    return r != NULL;
}

static void hostile(format fmt, const char *name, int flips)
{
    size_t size = 0;
    uint8_t *good = read_all(tmp_path(name), &size);
    if (!CHECK_NOT_NULL(good))
        return;
    const char *p = tmp_path("hostile.bin");
    int loaded_prefixes = 0;
    for (size_t n = 0; n < size; n++) {
        write_all(p, good, n);
        loaded_prefixes += try_load(fmt, p);
    }
    /* a prefix may only load when what it drops is padding */
    CHECK(loaded_prefixes <= 64);
    uint8_t *bad = malloc(size);
    unsigned seed = 777;
    int loaded = 0;
    for (int i = 0; i < flips; i++) {
        memcpy(bad, good, size);
        for (int k = 0; k < 1 + i % 3; k++) {
            seed = seed * 1103515245u + 12345u;
            bad[(seed >> 8) % size] ^= (uint8_t)(1u << ((seed >> 4) % 8));
        }
        write_all(p, bad, size);
        loaded += try_load(fmt, p);
    }
    printf("    %s: %zu prefixes (%d loaded), %d flipped files (%d loaded)\n", name, size,
           loaded_prefixes, flips, loaded);
    free(bad);
    free(good);
}

static void test_hostile_files(void)
{
#ifdef WF_TEST_SLOW_BUILD /* sanitizers, coverage */
    const int flips = 100;
#else
    const int flips = 400;
#endif
    wf_array *a = sample(WF_DTYPE_F32);
    wf_nn_save_npy(a, tmp_path("h.npy"));
    wf_nn_params *p = wf_nn_params_new();
    wf_nn_params_add(p, "x", a);
    wf_nn_params_add(p, "y", a);
    wf_nn_save_npz(p, tmp_path("h.npz"), false);
    wf_nn_save_npz(p, tmp_path("hc.npz"), true);
    wf_nn_gguf_meta *m = wf_nn_gguf_meta_new();
    const char *toks[2] = {"a", "bc"};
    wf_nn_gguf_meta_add_strings(m, "t", toks, 2, true);
    wf_nn_save_gguf(p, m, tmp_path("h.gguf"));
    hostile(NPY, "h.npy", flips);
    hostile(NPZ, "h.npz", flips);
    hostile(NPZ, "hc.npz", flips);
    hostile(GGUF, "h.gguf", flips);
    static buf b;
    double ref[384], mag[384];
    quantized_gguf(&b, ref, mag);
    write_all(tmp_path("hq.gguf"), b.d, b.n);
    hostile(GGUF, "hq.gguf", flips);
    CHECK_NULL_WITH(wf_nn_load_npy(tmp_path("missing.npy")), WF_ERR_IO);
    wf_release(a);
    wf_nn_params_release(p);
    wf_nn_gguf_meta_release(m);
}

int main(void)
{
    /* memory-backed when there is one: the hostile cases write many files */
    snprintf(dir, sizeof dir, "%s/weft_test_files_%d", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp",
             (int)getpid());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    if (system(cmd) != 0)
        return 1;
    RUN_TEST(test_npy_round_trip_every_dtype);
    RUN_TEST(test_npy_big_endian_and_fortran);
    RUN_TEST(test_npz_round_trip);
    RUN_TEST(test_npz_zip64_fields);
    RUN_TEST(test_gguf_round_trip_with_metadata);
    RUN_TEST(test_gguf_quantized_tensors);
    RUN_TEST(test_hostile_files);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return 1;
    return TEST_SUMMARY();
}
