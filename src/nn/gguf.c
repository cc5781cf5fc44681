/*
 * GGUF files (weft_nn.h): "GGUF", version (2 or 3), tensor count and
 * metadata count (u64 each), the metadata (key string, u32 value type,
 * value), the tensor infos (name, u32 rank, u64 dims in ggml order
 * (fastest first), u32 ggml type, u64 offset into the data section), then
 * the data section at the next multiple of general.alignment (default 32).
 * Strings are a u64 length and bytes. All little-endian.
 *
 * Reading walks the file with a cursor that refuses to move past its end;
 * counts are checked against the bytes left before anything is allocated.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/loaders.h"
#include "nn/mapped.h"
#include "weft.h"
#include "weft_nn.h"
#include "util/fault.h"
#include "util/name_index.h"

/* Names longer than weft_nn's limit (255 bytes) could not be stored anyway. */
enum { GGUF_DEFAULT_ALIGNMENT = 32, GGUF_MAX_NAME = 255 };

/* Metadata value types. */
enum {
    GV_U8 = 0, GV_I8, GV_U16, GV_I16, GV_U32, GV_I32, GV_F32, GV_BOOL, GV_STRING, GV_ARRAY,
    GV_U64, GV_I64, GV_F64, GV_COUNT
};

/* ggml tensor types read or written. */
enum {
    GT_F32 = 0, GT_F16 = 1, GT_Q4_0 = 2, GT_Q4_1 = 3, GT_Q8_0 = 8, GT_I8 = 24, GT_I16 = 25,
    GT_I32 = 26, GT_I64 = 27, GT_F64 = 28, GT_BF16 = 30
};

static const struct {
    int gv;
    wf_dtype dtype;
} value_dtypes[] = {
    {GV_U8, WF_DTYPE_U8},   {GV_I8, WF_DTYPE_I8},   {GV_U16, WF_DTYPE_U16}, {GV_I16, WF_DTYPE_I16},
    {GV_U32, WF_DTYPE_U32}, {GV_I32, WF_DTYPE_I32}, {GV_F32, WF_DTYPE_F32}, {GV_BOOL, WF_DTYPE_BOOL},
    {GV_U64, WF_DTYPE_U64}, {GV_I64, WF_DTYPE_I64}, {GV_F64, WF_DTYPE_F64},
};

static const struct {
    int gt;
    wf_dtype dtype;
} tensor_dtypes[] = {
    {GT_F32, WF_DTYPE_F32}, {GT_F16, WF_DTYPE_F16}, {GT_BF16, WF_DTYPE_BF16}, {GT_F64, WF_DTYPE_F64},
    {GT_I8, WF_DTYPE_I8},   {GT_I16, WF_DTYPE_I16}, {GT_I32, WF_DTYPE_I32},   {GT_I64, WF_DTYPE_I64},
};

static bool value_dtype(int gv, wf_dtype *d)
{
    for (size_t i = 0; i < sizeof value_dtypes / sizeof value_dtypes[0]; i++)
        if (value_dtypes[i].gv == gv) {
            *d = value_dtypes[i].dtype;
            return true;
        }
    return false;
}

static int value_type_of(wf_dtype d)
{
    for (size_t i = 0; i < sizeof value_dtypes / sizeof value_dtypes[0]; i++)
        if (value_dtypes[i].dtype == d)
            return value_dtypes[i].gv;
    return -1;
}

static int tensor_type_of(wf_dtype d)
{
    for (size_t i = 0; i < sizeof tensor_dtypes / sizeof tensor_dtypes[0]; i++)
        if (tensor_dtypes[i].dtype == d)
            return tensor_dtypes[i].gt;
    return -1;
}

/* ------------------------------------------------------------ metadata list */

typedef struct meta_entry {
    char *key;
    wf_nn_gguf_kind kind;
    wf_array *array;
    char **strings;
    size_t nstrings;
} meta_entry;

/* entries in file order; `index` finds a key in constant time, so that a
 * file's millions of entries cannot make its duplicate checks quadratic. */
struct wf_nn_gguf_meta {
    meta_entry *entries;
    size_t count, cap;
    wf_name_index index;
};

wf_nn_gguf_meta *wf_nn_gguf_meta_new(void)
{
    wf_nn_gguf_meta *m = wf__calloc(1, sizeof *m);
    if (!m)
        wf_set_error(WF_ERR_OUT_OF_MEMORY, "wf_nn_gguf_meta_new: out of memory");
    return m;
}

static void entry_free(meta_entry *e)
{
    free(e->key);
    wf_release(e->array);
    for (size_t j = 0; j < e->nstrings; j++)
        free(e->strings[j]);
    free(e->strings);
}

void wf_nn_gguf_meta_release(wf_nn_gguf_meta *meta)
{
    if (!meta)
        return;
    for (size_t i = 0; i < meta->count; i++)
        entry_free(&meta->entries[i]);
    free(meta->entries);
    wf__name_index_free(&meta->index);
    free(meta);
}

size_t wf_nn_gguf_meta_count(const wf_nn_gguf_meta *meta) { return meta ? meta->count : 0; }

const char *wf_nn_gguf_meta_key(const wf_nn_gguf_meta *meta, size_t i)
{
    return meta && i < meta->count ? meta->entries[i].key : NULL;
}

wf_nn_gguf_kind wf_nn_gguf_meta_kind(const wf_nn_gguf_meta *meta, size_t i)
{
    return meta && i < meta->count ? meta->entries[i].kind : WF_GGUF_NUMBERS;
}

wf_array *wf_nn_gguf_meta_array(const wf_nn_gguf_meta *meta, size_t i)
{
    return meta && i < meta->count ? meta->entries[i].array : NULL;
}

size_t wf_nn_gguf_meta_strings(const wf_nn_gguf_meta *meta, size_t i, const char *const **out)
{
    if (!meta || i >= meta->count) {
        *out = NULL;
        return 0;
    }
    *out = (const char *const *)meta->entries[i].strings;
    return meta->entries[i].nstrings;
}

static const char *key_of(const void *owner, size_t i)
{
    return ((const wf_nn_gguf_meta *)owner)->entries[i].key;
}

/* Appends a zeroed entry for `key` (copied); NULL + error. */
static meta_entry *meta_append(wf_nn_gguf_meta *meta, const char *op, const char *key)
{
    if (!meta || !key) {
        wf_set_error(WF_ERR_NULL_ARGUMENT, "%s: metadata or key is NULL", op);
        return NULL;
    }
    if (wf__name_index_find(&meta->index, key, key_of, meta) >= 0) {
        wf_set_error(WF_ERR_INVALID_ARGUMENT, "%s: duplicate key '%s'", op, key);
        return NULL;
    }
    if (meta->count == meta->cap) {
        const size_t cap = meta->cap ? meta->cap * 2 : 16;
        meta_entry *e = wf__realloc(meta->entries, cap * sizeof *e);
        if (!e) {
            wf_set_error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
            return NULL;
        }
        meta->entries = e;
        meta->cap = cap;
    }
    char *copy = wf__strdup(key);
    if (!copy || !wf__name_index_reserve(&meta->index, meta->count, key_of, meta)) {
        free(copy);
        wf_set_error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
        return NULL;
    }
    meta_entry *e = &meta->entries[meta->count];
    memset(e, 0, sizeof *e);
    e->key = copy;
    wf__name_index_insert(&meta->index, meta->count++, key_of, meta);
    return e;
}

wf_status wf_nn_gguf_meta_add_array(wf_nn_gguf_meta *meta, const char *key, wf_array *value)
{
    const char *op = "wf_nn_gguf_meta_add_array";
    if (!value)
        return wf_set_error(WF_ERR_NULL_ARGUMENT, "%s: value is NULL", op);
    if (wf_array_ndim(value) > 1 || value_type_of(wf_array_dtype(value)) < 0)
        return wf_set_error(WF_ERR_INVALID_ARGUMENT,
                            "%s: '%s' must be a 0-d or 1-d array of bool, integers or float32/64",
                            op, key ? key : "");
    meta_entry *e = meta_append(meta, op, key);
    if (!e)
        return wf_last_error();
    e->kind = WF_GGUF_NUMBERS;
    e->array = wf_retain(value);
    return WF_OK;
}

wf_status wf_nn_gguf_meta_add_strings(wf_nn_gguf_meta *meta, const char *key,
                                      const char *const *strings, size_t count, bool as_list)
{
    const char *op = "wf_nn_gguf_meta_add_strings";
    if ((!strings && count) || (!as_list && count != 1))
        return wf_set_error(WF_ERR_INVALID_ARGUMENT, "%s: one string, or a list", op);
    for (size_t j = 0; j < count; j++)
        if (!strings[j])
            return wf_set_error(WF_ERR_NULL_ARGUMENT, "%s: string %zu is NULL", op, j);
    /* The copies first: an entry, once indexed, stays. */
    meta_entry copies = {.kind = as_list ? WF_GGUF_STRINGS : WF_GGUF_STRING};
    copies.strings = wf__calloc(count ? count : 1, sizeof *copies.strings);
    for (size_t j = 0; copies.strings && j < count; j++, copies.nstrings++)
        if (!(copies.strings[j] = wf__strdup(strings[j])))
            break;
    if (!copies.strings || copies.nstrings != count) {
        entry_free(&copies);
        return wf_set_error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    }
    meta_entry *e = meta_append(meta, op, key);
    if (!e) {
        entry_free(&copies);
        return wf_last_error();
    }
    copies.key = e->key;
    *e = copies;
    return WF_OK;
}

/* ------------------------------------------------------------ reading */

typedef struct cursor {
    const uint8_t *p;
    size_t left;
    const char *why; /* first problem, NULL while fine */
} cursor;

/* The `why` of an allocation failure: reported as WF_ERR_OUT_OF_MEMORY, not
 * as a problem of the file (WF_ERR_IO). */
static const char out_of_memory[] = "out of memory";

static bool take(cursor *c, size_t n, const uint8_t **out)
{
    if (c->why)
        return false;
    if (n > c->left) {
        c->why = "truncated";
        return false;
    }
    *out = c->p;
    c->p += n;
    c->left -= n;
    return true;
}

static uint64_t read_le(cursor *c, size_t n)
{
    const uint8_t *p;
    uint64_t v = 0;
    if (take(c, n, &p))
        for (size_t i = 0; i < n; i++)
            v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* A string (u64 length, bytes) as a new NUL-terminated copy; no NULs inside. */
static char *read_string(cursor *c)
{
    const uint64_t n = read_le(c, 8);
    const uint8_t *p;
    if (c->why || n > c->left) {
        c->why = c->why ? c->why : "string longer than the file";
        return NULL;
    }
    if (!take(c, (size_t)n, &p))
        return NULL;
    if (memchr(p, 0, (size_t)n)) {
        c->why = "string with a NUL byte";
        return NULL;
    }
    char *s = wf__malloc((size_t)n + 1);
    if (!s) {
        c->why = out_of_memory;
        return NULL;
    }
    memcpy(s, p, (size_t)n);
    s[n] = 0;
    return s;
}

static size_t value_size(int gv)
{
    static const size_t sizes[GV_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return gv >= 0 && gv < GV_COUNT ? sizes[gv] : 0;
}

/* One metadata value of type gv into e (numbers or strings). */
static void read_value(cursor *c, int gv, meta_entry *e)
{
    wf_dtype dtype;
    if (gv == GV_STRING) {
        e->kind = WF_GGUF_STRING;
        e->strings = wf__calloc(1, sizeof *e->strings);
        if (!e->strings || !(e->strings[0] = read_string(c)))
            c->why = c->why ? c->why : out_of_memory;
        else
            e->nstrings = 1;
        return;
    }
    if (gv == GV_ARRAY) {
        const int et = (int)read_le(c, 4);
        const uint64_t n = read_le(c, 8);
        if (c->why)
            return;
        if (et == GV_STRING) {
            e->kind = WF_GGUF_STRINGS;
            if (n > c->left / 8) { /* each string takes at least its length */
                c->why = "string array longer than the file";
                return;
            }
            e->strings = wf__calloc(n ? (size_t)n : 1, sizeof *e->strings);
            if (!e->strings) {
                c->why = out_of_memory;
                return;
            }
            for (uint64_t j = 0; j < n && !c->why; j++)
                if ((e->strings[j] = read_string(c)))
                    e->nstrings++;
            return;
        }
        if (!value_dtype(et, &dtype)) {
            c->why = "unsupported metadata array type (nested arrays are not read)";
            return;
        }
        const uint8_t *p;
        if (n > c->left / value_size(et) || !take(c, (size_t)n * value_size(et), &p)) {
            c->why = "metadata array longer than the file";
            return;
        }
        const int64_t shape = (int64_t)n;
        e->kind = WF_GGUF_NUMBERS;
        e->array = n ? wf_array_from_data(p, &shape, 1, dtype) : wf_zeros(&shape, 1, dtype);
        if (!e->array)
            c->why = out_of_memory;
        return;
    }
    const uint8_t *p;
    if (!value_dtype(gv, &dtype)) {
        c->why = "unknown metadata value type";
        return;
    }
    if (!take(c, value_size(gv), &p))
        return;
    e->kind = WF_GGUF_NUMBERS;
    e->array = wf_array_from_data(p, NULL, 0, dtype);
    if (!e->array)
        c->why = out_of_memory;
}

typedef struct tensor_info {
    char *name;
    int ndim;
    int64_t shape[WF_MAX_NDIM]; /* NumPy order */
    int type;
    uint64_t offset;
} tensor_info;

/* Bytes of a tensor of `type` with `count` elements; 0 when unsupported. */
static size_t tensor_bytes(int type, uint64_t count, int64_t last_dim, const char **why)
{
    for (size_t i = 0; i < sizeof tensor_dtypes / sizeof tensor_dtypes[0]; i++)
        if (tensor_dtypes[i].gt == type)
            return (size_t)count * wf_dtype_size(tensor_dtypes[i].dtype);
    const size_t block = type == GT_Q4_0 ? 18 : type == GT_Q4_1 ? 20 : type == GT_Q8_0 ? 34 : 0;
    if (!block) {
        *why = "a tensor of an unsupported ggml type";
        return 0;
    }
    if (last_dim % 32 != 0) {
        *why = "a quantized tensor whose rows are not whole blocks of 32";
        return 0;
    }
    return (size_t)(count / 32) * block;
}

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static float half_to_float(uint16_t h)
{
    const int e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY)
                                                        : ldexpf((float)(m | 1024), e - 25);
    return h & 0x8000 ? -v : v;
}

/* Round to nearest even; overflow gives infinity. */
static uint16_t float_to_half(float f)
{
    const uint16_t sign = signbit(f) ? 0x8000 : 0;
    f = fabsf(f);
    if (isnan(f))
        return sign | 0x7e00;
    if (f >= 65520.0f)
        return sign | 0x7c00;
    if (f < ldexpf(1, -14)) /* subnormal: units of 2^-24 */
        return sign | (uint16_t)lrintf(ldexpf(f, 24));
    int e;
    const float m = frexpf(f, &e); /* f = m 2^e, m in [0.5, 1) */
    long mant = lrintf(ldexpf(m, 11)); /* 1024 .. 2048 */
    if (mant == 2048) {
        mant = 1024;
        e++;
    }
    return sign | (uint16_t)((e + 14) << 10 | (mant - 1024));
}

/* PREFIX.suffix where PREFIX is name without ".weight". */
static bool side_name(const char *name, const char *suffix, char *out, size_t cap)
{
    size_t n = strlen(name);
    if (n >= 7 && strcmp(name + n - 7, ".weight") == 0)
        n -= 7;
    return (size_t)snprintf(out, cap, "%.*s%s", (int)n, name, suffix) < cap;
}

/* Codes / scales / biases of a Q4_0, Q4_1 or Q8_0 tensor, added to params. */
static wf_status add_quantized(wf_nn_params *params, const tensor_info *t, const uint8_t *data,
                               size_t count)
{
    const char *op = "wf_nn_load_gguf";
    const int64_t blocks = (int64_t)(count / 32);
    const bool eight = t->type == GT_Q8_0;
    const size_t block = t->type == GT_Q4_0 ? 18 : t->type == GT_Q4_1 ? 20 : 34;
    uint8_t *codes = wf__malloc((size_t)(blocks * (eight ? 32 : 16)) + 1);
    uint16_t *scales = wf__malloc((size_t)blocks * 2 + 1), *biases = wf__malloc((size_t)blocks * 2 + 1);
    wf_status st = WF_OK;
    if (!codes || !scales || !biases) {
        st = wf_set_error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    } else {
        for (int64_t b = 0; b < blocks; b++) {
            const uint8_t *p = data + (size_t)b * block;
            const uint16_t d = rd16(p);
            const float df = half_to_float(d);
            scales[b] = d;
            if (t->type == GT_Q4_1)
                biases[b] = rd16(p + 2);
            else
                biases[b] = float_to_half(-(eight ? 128.0f : 8.0f) * df);
            const uint8_t *q = p + (t->type == GT_Q4_1 ? 4 : 2);
            if (eight) {
                for (int j = 0; j < 32; j++)
                    codes[b * 32 + j] = (uint8_t)(q[j] ^ 0x80); /* int8 + 128 */
            } else { /* ggml: byte j holds elements j (low) and j + 16 (high) */
                uint8_t *out = codes + b * 16;
                for (int j = 0; j < 16; j++) {
                    const int lo = 2 * j < 16 ? q[2 * j] & 15 : q[2 * j - 16] >> 4;
                    const int hi = 2 * j + 1 < 16 ? q[2 * j + 1] & 15 : q[2 * j + 1 - 16] >> 4;
                    out[j] = (uint8_t)(lo | hi << 4);
                }
            }
        }
    }
    int64_t cshape[WF_MAX_NDIM], sshape[WF_MAX_NDIM];
    for (int d = 0; d < t->ndim; d++)
        cshape[d] = sshape[d] = t->shape[d];
    cshape[t->ndim - 1] = t->shape[t->ndim - 1] / 32 * (eight ? 8 : 4); /* rows of 32 */
    sshape[t->ndim - 1] = t->shape[t->ndim - 1] / 32;
    char sname[GGUF_MAX_NAME + 16], bname[GGUF_MAX_NAME + 16];
    wf_array *arrays[3] = {NULL, NULL, NULL};
    if (st == WF_OK) {
        arrays[0] = wf_array_from_data(codes, cshape, t->ndim, WF_DTYPE_U32);
        arrays[1] = wf_array_from_data(scales, sshape, t->ndim, WF_DTYPE_F16);
        arrays[2] = wf_array_from_data(biases, sshape, t->ndim, WF_DTYPE_F16);
        side_name(t->name, ".scales", sname, sizeof sname);
        side_name(t->name, ".biases", bname, sizeof bname);
        const char *names[3] = {t->name, sname, bname};
        for (int i = 0; i < 3 && st == WF_OK; i++)
            st = arrays[i] ? wf_nn_params_add(params, names[i], arrays[i]) : wf_last_error();
    }
    for (int i = 0; i < 3; i++)
        wf_release(arrays[i]);
    free(codes), free(scales), free(biases);
    return st;
}

static void infos_free(tensor_info *infos, uint64_t n)
{
    for (uint64_t i = 0; infos && i < n; i++)
        free(infos[i].name);
    free(infos);
}

/* Reads the metadata; sets *alignment from general.alignment. */
static void read_metadata(cursor *c, uint64_t count, wf_nn_gguf_meta *meta, uint64_t *alignment)
{
    for (uint64_t i = 0; i < count && !c->why; i++) {
        char *key = read_string(c);
        const int gv = (int)read_le(c, 4);
        meta_entry *e = NULL;
        if (key && !c->why) {
            e = meta_append(meta, "wf_nn_load_gguf", key);
            if (!e)
                c->why = wf_last_error() == WF_ERR_OUT_OF_MEMORY ? out_of_memory
                                                                 : "duplicate metadata key";
        }
        free(key);
        if (!e)
            break;
        read_value(c, gv, e);
        if (!c->why && strcmp(e->key, "general.alignment") == 0) {
            const void *v = NULL;
            uint32_t value = 0;
            if (gv != GV_U32 || wf_array_data(e->array, &v) != WF_OK)
                c->why = "general.alignment is not a uint32";
            else
                value = *(const uint32_t *)v;
            if (!c->why && (value == 0 || (value & (value - 1)) != 0))
                c->why = "general.alignment is not a power of two";
            else if (!c->why)
                *alignment = value; /* only a valid one: the caller divides by it */
        }
    }
}

static void read_tensor_info(cursor *c, tensor_info *t)
{
    t->name = read_string(c);
    const uint32_t ndim = (uint32_t)read_le(c, 4);
    if (c->why)
        return;
    if (ndim == 0 || ndim > WF_MAX_NDIM) {
        c->why = "tensor rank out of range";
        return;
    }
    t->ndim = (int)ndim;
    for (uint32_t d = 0; d < ndim; d++) {
        const uint64_t v = read_le(c, 8);
        if (v > (uint64_t)INT64_MAX)
            c->why = "tensor dimension out of range";
        t->shape[ndim - 1 - d] = (int64_t)v; /* ggml lists the fastest dim first */
    }
    t->type = (int)read_le(c, 4);
    t->offset = read_le(c, 8);
    if (!c->why && strlen(t->name) > GGUF_MAX_NAME)
        c->why = "tensor name too long";
}

/* One tensor's array(s) added to params: dense types over the mapping,
 * quantized ones converted. */
static wf_status add_tensor(wf_nn_mapping *m, const tensor_info *t, const uint8_t *p, size_t count,
                            size_t bytes, wf_nn_params *params)
{
    if (t->type == GT_Q4_0 || t->type == GT_Q4_1 || t->type == GT_Q8_0)
        return add_quantized(params, t, p, count);
    wf_dtype dtype = WF_DTYPE_F32;
    for (size_t k = 0; k < sizeof tensor_dtypes / sizeof tensor_dtypes[0]; k++)
        if (tensor_dtypes[k].gt == t->type)
            dtype = tensor_dtypes[k].dtype;
    wf_array *a = bytes ? wf__nn_mapped_array(m, p, t->shape, t->ndim, dtype)
                        : wf_zeros(t->shape, t->ndim, dtype);
    const wf_status st = a ? wf_nn_params_add(params, t->name, a) : wf_last_error();
    wf_release(a);
    return st;
}

/* Every tensor of the data section (from data_start) into params; a file
 * problem goes to c->why, a weft error is returned. */
static wf_status add_tensors(cursor *c, wf_nn_mapping *m, size_t data_start, uint64_t alignment,
                             const tensor_info *infos, uint64_t n, wf_nn_params *params)
{
    const size_t data_size = m->size - data_start;
    for (uint64_t i = 0; i < n && !c->why; i++) {
        const tensor_info *t = &infos[i];
        size_t count;
        if (!wf__nn_shape_bytes(t->shape, t->ndim, 1, SIZE_MAX / 64, &count)) {
            c->why = "tensor too large";
            break;
        }
        const size_t bytes = tensor_bytes(t->type, count, t->shape[t->ndim - 1], &c->why);
        if (c->why)
            break;
        if (t->offset % alignment != 0 || t->offset > data_size || bytes > data_size - t->offset) {
            c->why = "tensor data outside the file";
            break;
        }
        const wf_status st = add_tensor(m, t, m->data + data_start + t->offset, count, bytes,
                                          params);
        if (st != WF_OK)
            return st;
    }
    return WF_OK;
}

wf_nn_params *wf__nn_gguf_parse(wf_nn_mapping *m, const char *path, wf_nn_gguf_meta **metadata)
{
    if (metadata)
        *metadata = NULL;
    cursor c = {m->data, m->size, NULL};
    const uint8_t *magic;
    if (!take(&c, 4, &magic) || memcmp(magic, "GGUF", 4) != 0)
        c.why = "not a GGUF file (bad magic)";
    const uint32_t version = (uint32_t)read_le(&c, 4);
    if (!c.why && version != 2 && version != 3)
        c.why = "unsupported GGUF version (2 and 3 are read)";
    const uint64_t ntensors = read_le(&c, 8), nmeta = read_le(&c, 8);
    /* every tensor info and metadata entry takes at least 16 bytes */
    if (!c.why && (ntensors > c.left / 16 || nmeta > c.left / 16))
        c.why = "counts larger than the file";
    wf_nn_gguf_meta *meta = c.why ? NULL : wf_nn_gguf_meta_new();
    if (!c.why && !meta) /* not skipped: the tensor infos come after the metadata */
        c.why = out_of_memory;
    uint64_t alignment = GGUF_DEFAULT_ALIGNMENT;
    if (meta)
        read_metadata(&c, nmeta, meta, &alignment);
    tensor_info *infos = c.why ? NULL : wf__calloc(ntensors ? (size_t)ntensors : 1, sizeof *infos);
    if (!c.why && !infos)
        c.why = out_of_memory;
    for (uint64_t i = 0; i < ntensors && !c.why; i++)
        read_tensor_info(&c, &infos[i]);
    const size_t consumed = m->size - c.left;
    const size_t data_start = (consumed + alignment - 1) / alignment * alignment;
    if (!c.why && data_start > m->size)
        c.why = "truncated before the data section";
    wf_nn_params *params = c.why ? NULL : wf_nn_params_new();
    wf_status st = params ? WF_OK : WF_ERR_OUT_OF_MEMORY;
    if (params)
        st = add_tensors(&c, m, data_start, alignment, infos, ntensors, params);
    infos_free(infos, ntensors);
    if (c.why)
        wf_set_error(c.why == out_of_memory ? WF_ERR_OUT_OF_MEMORY : WF_ERR_IO,
                     "wf_nn_load_gguf: '%s': %s", path, c.why);
    if (c.why || st != WF_OK) {
        wf_nn_params_release(params);
        wf_nn_gguf_meta_release(meta);
        return NULL;
    }
    if (metadata)
        *metadata = meta;
    else
        wf_nn_gguf_meta_release(meta);
    return params;
}

wf_nn_params *wf_nn_load_gguf(const char *path, wf_nn_gguf_meta **metadata)
{
    if (metadata)
        *metadata = NULL;
    wf_nn_mapping *m = wf__nn_map("wf_nn_load_gguf", path);
    if (!m)
        return NULL;
    wf_nn_params *params = wf__nn_gguf_parse(m, path, metadata);
    wf__nn_mapping_release(m);
    return params;
}

/* ------------------------------------------------------------ writing */

typedef struct writer {
    FILE *f;
    uint64_t pos;
    bool failed;
} writer;

static void put(writer *w, const void *p, size_t n)
{
    if (!w->failed && n && fwrite(p, 1, n, w->f) != n)
        w->failed = true;
    w->pos += n;
}

static void put_le(writer *w, uint64_t v, size_t n)
{
    uint8_t b[8];
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    put(w, b, n);
}

static void put_string(writer *w, const char *s)
{
    const size_t n = strlen(s);
    put_le(w, n, 8);
    put(w, s, n);
}

static void put_padding(writer *w)
{
    static const uint8_t zeros[GGUF_DEFAULT_ALIGNMENT];
    put(w, zeros, (GGUF_DEFAULT_ALIGNMENT - w->pos % GGUF_DEFAULT_ALIGNMENT) % GGUF_DEFAULT_ALIGNMENT);
}

static wf_status put_meta(writer *w, const meta_entry *e)
{
    put_string(w, e->key);
    if (e->kind != WF_GGUF_NUMBERS) {
        if (e->kind == WF_GGUF_STRINGS) {
            put_le(w, GV_ARRAY, 4);
            put_le(w, GV_STRING, 4);
            put_le(w, e->nstrings, 8);
        } else {
            put_le(w, GV_STRING, 4);
        }
        for (size_t j = 0; j < e->nstrings; j++)
            put_string(w, e->strings[j]);
        return WF_OK;
    }
    const void *data;
    const wf_status st = wf_array_data(e->array, &data);
    if (st != WF_OK)
        return st;
    const int gv = value_type_of(wf_array_dtype(e->array));
    if (wf_array_ndim(e->array) == 1) {
        put_le(w, GV_ARRAY, 4);
        put_le(w, (uint64_t)gv, 4);
        put_le(w, (uint64_t)wf_array_size(e->array), 8);
    } else {
        put_le(w, (uint64_t)gv, 4);
    }
    put(w, data, (size_t)wf_array_size(e->array) * value_size(gv));
    return WF_OK;
}

wf_status wf_nn_save_gguf(const wf_nn_params *params, const wf_nn_gguf_meta *metadata,
                          const char *path)
{
    const char *op = "wf_nn_save_gguf";
    if (!params || !path)
        return wf_set_error(WF_ERR_NULL_ARGUMENT, "%s: params or path is NULL", op);
    const size_t n = wf_nn_params_count(params);
    for (size_t i = 0; i < n; i++) {
        wf_array *a = wf_nn_params_get(params, i);
        if (tensor_type_of(wf_array_dtype(a)) < 0)
            return wf_set_error(WF_ERR_DTYPE, "%s: '%s' has dtype %s (GGUF: float32/16/64, "
                                              "bfloat16, int8..int64)",
                                op, wf_nn_params_name(params, i), wf_dtype_name(wf_array_dtype(a)));
        wf_status st = wf_eval(&a, 1);
        if (st != WF_OK)
            return st;
    }
    writer w = {fopen(path, "wb"), 0, false};
    if (!w.f)
        return wf_set_error(WF_ERR_IO, "%s: cannot open '%s' for writing", op, path);
    put(&w, "GGUF", 4);
    put_le(&w, 3, 4);
    put_le(&w, n, 8);
    put_le(&w, wf_nn_gguf_meta_count(metadata), 8);
    wf_status st = WF_OK;
    for (size_t i = 0; i < wf_nn_gguf_meta_count(metadata) && st == WF_OK; i++)
        st = put_meta(&w, &metadata->entries[i]);
    uint64_t offset = 0;
    for (size_t i = 0; i < n; i++) {
        wf_array *a = wf_nn_params_get(params, i);
        const int nd = wf_array_ndim(a);
        put_string(&w, wf_nn_params_name(params, i));
        put_le(&w, nd ? (uint64_t)nd : 1, 4);
        for (int d = nd - 1; d >= 0; d--)
            put_le(&w, (uint64_t)wf_array_shape(a)[d], 8);
        if (nd == 0)
            put_le(&w, 1, 8);
        put_le(&w, (uint64_t)tensor_type_of(wf_array_dtype(a)), 4);
        put_le(&w, offset, 8);
        const uint64_t bytes = (uint64_t)wf_array_size(a) * wf_dtype_size(wf_array_dtype(a));
        offset += (bytes + GGUF_DEFAULT_ALIGNMENT - 1) / GGUF_DEFAULT_ALIGNMENT * GGUF_DEFAULT_ALIGNMENT;
    }
    put_padding(&w);
    for (size_t i = 0; i < n && st == WF_OK; i++) {
        wf_array *a = wf_nn_params_get(params, i);
        const void *data;
        st = wf_array_data(a, &data);
        if (st == WF_OK) {
            put(&w, data, (size_t)wf_array_size(a) * wf_dtype_size(wf_array_dtype(a)));
            put_padding(&w);
        }
    }
    const bool closed = fclose(w.f) == 0;
    if (st != WF_OK)
        return st;
    return closed && !w.failed ? WF_OK : wf_set_error(WF_ERR_IO, "%s: writing '%s' failed", op, path);
}
