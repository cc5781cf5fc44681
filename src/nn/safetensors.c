/*
 * The safetensors format: an 8-byte little-endian header length, a JSON
 * header {"name": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]},
 * "__metadata__": {..}}, then the raw little-endian tensor bytes.
 */
#include <ctype.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft.h"
#include "weft_nn.h"
#include "nn/safetensors.h"
#include "util/fault.h"

static const struct {
    wf_dtype dtype;
    const char *name;
} dtype_names[] = {
    {WF_DTYPE_F32, "F32"}, {WF_DTYPE_F64, "F64"}, {WF_DTYPE_F16, "F16"},
    {WF_DTYPE_BF16, "BF16"}, {WF_DTYPE_I32, "I32"}, {WF_DTYPE_I64, "I64"},
    {WF_DTYPE_U8, "U8"}, {WF_DTYPE_BOOL, "BOOL"}, {WF_DTYPE_I8, "I8"},
    {WF_DTYPE_I16, "I16"}, {WF_DTYPE_U16, "U16"}, {WF_DTYPE_U32, "U32"},
    {WF_DTYPE_U64, "U64"}, {WF_DTYPE_C64, "C64"},
};
/* Every dtype has a name (one entry each), so every array can be written. */
_Static_assert(sizeof dtype_names / sizeof dtype_names[0] == WF_DTYPE_COUNT,
               "a safetensors name for each wf_dtype");

static const char *dtype_to_name(wf_dtype d)
{
    for (size_t i = 0; i < sizeof dtype_names / sizeof dtype_names[0]; i++)
        if (dtype_names[i].dtype == d)
            return dtype_names[i].name;
    return NULL;
}

static bool name_to_dtype(const char *name, wf_dtype *d)
{
    for (size_t i = 0; i < sizeof dtype_names / sizeof dtype_names[0]; i++)
        if (strcmp(dtype_names[i].name, name) == 0) {
            *d = dtype_names[i].dtype;
            return true;
        }
    if (strcmp(name, "F8_E4M3") == 0) { /* fp8 bytes load as uint8, as MLX's (wf_from_fp8) */
        *d = WF_DTYPE_U8;
        return true;
    }
    return false;
}

/* ------------------------------------------------------------ writing */

struct text {
    char *data;
    size_t len, cap;
    bool failed;
};

static void append(struct text *t, const char *s, size_t n)
{
    if (t->failed)
        return;
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->len + n + 1)
            cap *= 2;
        char *data = wf__realloc(t->data, cap);
        if (!data) {
            t->failed = true;
            return;
        }
        t->data = data;
        t->cap = cap;
    }
    memcpy(t->data + t->len, s, n);
    t->len += n;
    t->data[t->len] = 0;
}

static void append_str(struct text *t, const char *s) { append(t, s, strlen(s)); }

static void append_json_string(struct text *t, const char *s)
{
    append_str(t, "\"");
    for (; *s; s++) {
        char esc[8];
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            append(t, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            append_str(t, esc);
        } else {
            append(t, (const char *)s, 1);
        }
    }
    append_str(t, "\"");
}

/* The "__metadata__" object: metadata's string entries, or
 * {"format":"weft"} without metadata. */
static wf_status append_metadata(struct text *h, const wf_nn_gguf_meta *metadata)
{
    append_str(h, "\"__metadata__\":{");
    if (!metadata) {
        append_str(h, "\"format\":\"weft\"}");
        return WF_OK;
    }
    for (size_t i = 0; i < wf_nn_gguf_meta_count(metadata); i++) {
        const char *const *value;
        if (wf_nn_gguf_meta_kind(metadata, i) != WF_GGUF_STRING ||
            wf_nn_gguf_meta_strings(metadata, i, &value) != 1)
            return wf_set_error(WF_ERR_INVALID_ARGUMENT,
                                "wf_nn_save_safetensors_with_metadata: metadata '%s' is not one "
                                "string (safetensors metadata maps strings to strings)",
                                wf_nn_gguf_meta_key(metadata, i));
        append_str(h, i ? "," : "");
        append_json_string(h, wf_nn_gguf_meta_key(metadata, i));
        append_str(h, ":");
        append_json_string(h, value[0]);
    }
    append_str(h, "}");
    return WF_OK;
}

wf_status wf_nn_save_safetensors(const wf_nn_params *params, const char *path)
{
    if (!params || !path)
        return wf_set_error(WF_ERR_NULL_ARGUMENT, "wf_nn_save_safetensors: %s is NULL",
                            !params ? "params" : "path");
    return wf_nn_save_safetensors_with_metadata(params, NULL, path);
}

wf_status wf_nn_save_safetensors_with_metadata(const wf_nn_params *params,
                                               const wf_nn_gguf_meta *metadata, const char *path)
{
    if (!params || !path)
        return wf_set_error(WF_ERR_NULL_ARGUMENT,
                            "wf_nn_save_safetensors_with_metadata: %s is NULL",
                            !params ? "params" : "path");
    size_t n = wf_nn_params_count(params);
    for (size_t i = 0; i < n; i++) {
        wf_array *a = wf_nn_params_get(params, i);
        wf_status st = wf_eval(&a, 1);
        if (st != WF_OK)
            return st;
    }
    struct text h = {0};
    append_str(&h, "{");
    if (append_metadata(&h, metadata) != WF_OK) {
        free(h.data);
        return wf_last_error();
    }
    size_t offset = 0;
    for (size_t i = 0; i < n; i++) {
        wf_array *a = wf_nn_params_get(params, i);
        char buf[64];
        append_str(&h, ",");
        append_json_string(&h, wf_nn_params_name(params, i));
        append_str(&h, ":{\"dtype\":\"");
        append_str(&h, dtype_to_name(wf_array_dtype(a)));
        append_str(&h, "\",\"shape\":[");
        for (int d = 0; d < wf_array_ndim(a); d++) {
            snprintf(buf, sizeof buf, "%s%lld", d ? "," : "", (long long)wf_array_dim(a, d));
            append_str(&h, buf);
        }
        size_t bytes = wf_array_nbytes(a);
        snprintf(buf, sizeof buf, "],\"data_offsets\":[%zu,%zu]}", offset, offset + bytes);
        append_str(&h, buf);
        offset += bytes;
    }
    append_str(&h, "}");
    while (!h.failed && h.len % 8)
        append_str(&h, " ");
    if (h.failed) {
        free(h.data);
        return wf_set_error(WF_ERR_OUT_OF_MEMORY, "wf_nn_save_safetensors: out of memory");
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(h.data);
        return wf_set_error(WF_ERR_IO, "wf_nn_save_safetensors: cannot open '%s' for writing",
                            path);
    }
    unsigned char len_bytes[8];
    for (int b = 0; b < 8; b++)
        len_bytes[b] = (unsigned char)((uint64_t)h.len >> (8 * b));
    bool ok = fwrite(len_bytes, 1, 8, f) == 8 && fwrite(h.data, 1, h.len, f) == h.len;
    free(h.data);
    wf_status status = WF_OK;
    for (size_t i = 0; i < n && ok; i++) {
        wf_array *a = wf_nn_params_get(params, i);
        const void *data;
        status = wf_array_data(a, &data);
        if (status != WF_OK)
            break;
        size_t bytes = wf_array_nbytes(a);
        ok = fwrite(data, 1, bytes, f) == bytes;
    }
    if (fclose(f) != 0)
        ok = false;
    if (status != WF_OK)
        return status;
    return ok ? WF_OK
              : wf_set_error(WF_ERR_IO, "wf_nn_save_safetensors: writing '%s' failed", path);
}

/* ------------------------------------------------------------ reading */

struct parser {
    const char *p, *end;
    bool failed;
    bool reported; /* the failure's error is already recorded */
};

static void skip_ws(struct parser *ps)
{
    while (ps->p < ps->end && isspace((unsigned char)*ps->p))
        ps->p++;
}

static bool expect(struct parser *ps, char c)
{
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == c) {
        ps->p++;
        return true;
    }
    ps->failed = true;
    return false;
}

static bool peek(struct parser *ps, char c)
{
    skip_ws(ps);
    return ps->p < ps->end && *ps->p == c;
}

/* A JSON string into out (cap bytes, truncated names fail). */
static bool parse_string(struct parser *ps, char *out, size_t cap)
{
    if (!expect(ps, '"'))
        return false;
    size_t n = 0;
    while (ps->p < ps->end && *ps->p != '"') {
        char c = *ps->p++;
        if (c == '\\') {
            if (ps->p >= ps->end)
                break;
            char e = *ps->p++;
            if (e == 'u') {
                if (ps->end - ps->p < 4)
                    break;
                char hex[5] = {ps->p[0], ps->p[1], ps->p[2], ps->p[3], 0};
                ps->p += 4;
                long code = strtol(hex, NULL, 16);
                c = code < 0x80 ? (char)code : '?';
            } else {
                c = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == 'b' ? '\b'
                  : e == 'f' ? '\f' : e;
            }
        }
        if (n + 1 >= cap) {
            ps->failed = true;
            return false;
        }
        out[n++] = c;
    }
    out[n] = 0;
    return expect(ps, '"');
}

/* A decimal integer that fits a long long, read only within the header
 * (not strtoll: the header is not NUL-terminated and may end the file). */
static bool parse_int(struct parser *ps, long long *v)
{
    skip_ws(ps);
    const char *p = ps->p;
    bool negative = p < ps->end && *p == '-';
    p += negative;
    const char *digits = p;
    unsigned long long magnitude = 0;
    const unsigned long long limit = negative ? (unsigned long long)LLONG_MAX + 1 : LLONG_MAX;
    for (; p < ps->end && *p >= '0' && *p <= '9'; p++) {
        unsigned digit = (unsigned)(*p - '0');
        if (magnitude > (limit - digit) / 10) {
            ps->failed = true;
            return false;
        }
        magnitude = magnitude * 10 + digit;
    }
    if (p == digits) {
        ps->failed = true;
        return false;
    }
    *v = negative ? (long long)(0 - magnitude) : (long long)magnitude;
    ps->p = p;
    return true;
}

/* A JSON string of any length (the header bounds it) into a new
 * NUL-terminated buffer: *out, NULL when only skipped (out NULL). Escapes
 * as parse_string decodes them. */
static bool parse_long_string(struct parser *ps, char **out)
{
    if (!expect(ps, '"'))
        return false;
    const char *start = ps->p;
    while (ps->p < ps->end && *ps->p != '"')
        ps->p += *ps->p == '\\' && ps->end - ps->p > 1 ? 2 : 1;
    if (ps->p >= ps->end) {
        ps->failed = true;
        return false;
    }
    if (out) {
        const size_t cap = (size_t)(ps->p - start) + 1;
        struct parser again = {start - 1, ps->p + 1, false, false};
        *out = wf__malloc(cap);
        if (!*out) {
            wf_set_error(WF_ERR_OUT_OF_MEMORY, "wf_nn_load_safetensors: out of memory");
            ps->failed = ps->reported = true;
            return false;
        }
        if (!parse_string(&again, *out, cap)) {
            free(*out);
            *out = NULL;
            ps->failed = true;
            return false;
        }
    }
    ps->p++;
    return true;
}

/* Skips any JSON value (for unknown keys and metadata values other than
 * strings). */
static void skip_value(struct parser *ps)
{
    skip_ws(ps);
    if (ps->p >= ps->end) {
        ps->failed = true;
        return;
    }
    char c = *ps->p;
    if (c == '"') {
        parse_long_string(ps, NULL);
    } else if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        ps->p++;
        if (peek(ps, close)) {
            ps->p++;
            return;
        }
        do {
            if (c == '{') {
                parse_long_string(ps, NULL);
                expect(ps, ':');
            }
            skip_value(ps);
        } while (!ps->failed && peek(ps, ',') && ps->p++);
        expect(ps, close);
    } else {
        while (ps->p < ps->end && *ps->p != ',' && *ps->p != '}' && *ps->p != ']')
            ps->p++;
    }
}

struct entry {
    char name[256];
    wf_dtype dtype;
    int ndim;
    int64_t shape[WF_MAX_NDIM];
    long long begin, end;
};

static bool parse_int_list(struct parser *ps, long long *out, int cap, int *count)
{
    *count = 0;
    if (!expect(ps, '['))
        return false;
    if (peek(ps, ']'))
        return expect(ps, ']');
    do {
        if (*count >= cap) {
            ps->failed = true;
            return false;
        }
        if (!parse_int(ps, &out[(*count)++]))
            return false;
    } while (peek(ps, ',') && ps->p++);
    return expect(ps, ']');
}

static bool parse_entry(struct parser *ps, struct entry *e)
{
    bool have_dtype = false, have_shape = false, have_offsets = false;
    if (!expect(ps, '{'))
        return false;
    do {
        char key[64];
        if (!parse_string(ps, key, sizeof key) || !expect(ps, ':'))
            return false;
        if (strcmp(key, "dtype") == 0) {
            char name[16];
            if (!parse_string(ps, name, sizeof name))
                return false;
            if (!name_to_dtype(name, &e->dtype)) {
                wf_set_error(WF_ERR_DTYPE, "wf_nn_load_safetensors: '%s' has dtype %s", e->name,
                             name);
                ps->failed = ps->reported = true;
                return false;
            }
            have_dtype = true;
        } else if (strcmp(key, "shape") == 0) {
            long long dims[WF_MAX_NDIM];
            if (!parse_int_list(ps, dims, WF_MAX_NDIM, &e->ndim))
                return false;
            for (int d = 0; d < e->ndim; d++) {
                if (dims[d] < 0) {
                    ps->failed = true;
                    return false;
                }
                e->shape[d] = dims[d];
            }
            have_shape = true;
        } else if (strcmp(key, "data_offsets") == 0) {
            long long offs[2];
            int count;
            if (!parse_int_list(ps, offs, 2, &count) || count != 2)
                return false;
            e->begin = offs[0];
            e->end = offs[1];
            have_offsets = true;
        } else {
            skip_value(ps);
        }
    } while (!ps->failed && peek(ps, ',') && ps->p++);
    if (!have_dtype || !have_shape || !have_offsets)
        ps->failed = true;
    return expect(ps, '}') && !ps->failed;
}

static int by_offset(const void *a, const void *b)
{
    long long x = ((const struct entry *)a)->begin, y = ((const struct entry *)b)->begin;
    return x < y ? -1 : x > y;
}

static unsigned char *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        wf_set_error(WF_ERR_IO, "wf_nn_load_safetensors: cannot open '%s'", path);
        return NULL;
    }
    unsigned char *data = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 1 << 16;
            unsigned char *grown = wf__realloc(data, cap);
            if (!grown) {
                free(data);
                fclose(f);
                wf_set_error(WF_ERR_OUT_OF_MEMORY, "wf_nn_load_safetensors: out of memory");
                return NULL;
            }
            data = grown;
        }
        size_t got = fread(data + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    bool error = ferror(f);
    fclose(f);
    if (error) {
        free(data);
        wf_set_error(WF_ERR_IO, "wf_nn_load_safetensors: reading '%s' failed", path);
        return NULL;
    }
    *size = len;
    return data;
}

static wf_nn_params *malformed(const char *path, const char *why)
{
    wf_set_error(WF_ERR_INVALID_ARGUMENT, "wf_nn_load_safetensors: '%s' is not a safetensors "
                                          "file (%s)",
                 path, why);
    return NULL;
}

/* The bytes of e's data, or -1 when that is more than `limit` (so no shape
 * in a header can overflow the count). */
static long long tensor_bytes(const struct entry *e, size_t limit)
{
    for (int d = 0; d < e->ndim; d++)
        if (e->shape[d] == 0)
            return 0;
    long long bytes = (long long)wf_dtype_size(e->dtype);
    for (int d = 0; d < e->ndim; d++) {
        if (e->shape[d] > (long long)limit / bytes)
            return -1;
        bytes *= e->shape[d];
    }
    return bytes;
}

static wf_nn_params *build(const char *path, const unsigned char *data, size_t data_len,
                           struct entry *entries, int count)
{
    if (count > 1) /* entries is NULL for a header without tensors */
        qsort(entries, (size_t)count, sizeof *entries, by_offset);
    wf_nn_params *params = wf_nn_params_new();
    if (!params)
        return NULL;
    for (int i = 0; i < count; i++) {
        struct entry *e = &entries[i];
        long long bytes = tensor_bytes(e, data_len);
        if (e->begin < 0 || e->end < e->begin || (size_t)e->end > data_len || bytes < 0 ||
            e->end - e->begin != bytes) {
            wf_nn_params_release(params);
            return malformed(path, "a tensor's data_offsets do not match its shape or the file");
        }
        wf_array *a = wf_array_from_data(data + e->begin, e->shape, e->ndim, e->dtype);
        wf_status st = a ? wf_nn_params_add(params, e->name, a) : wf_last_error();
        wf_release(a);
        if (st != WF_OK) {
            wf_nn_params_release(params);
            return NULL;
        }
    }
    return params;
}

/* The "__metadata__" object: its string values into metadata when it is
 * not NULL. Other values (and a __metadata__ that is no object) are skipped,
 * as all of it is without metadata: the format has only strings there. */
static void parse_metadata(struct parser *ps, wf_nn_gguf_meta *metadata)
{
    if (!metadata || !peek(ps, '{')) {
        skip_value(ps);
        return;
    }
    ps->p++;
    if (peek(ps, '}')) {
        ps->p++;
        return;
    }
    do {
        char *key = NULL, *value = NULL;
        if (!parse_long_string(ps, &key) || !expect(ps, ':')) {
            free(key);
            return;
        }
        if (peek(ps, '"')) {
            if (parse_long_string(ps, &value) &&
                wf_nn_gguf_meta_add_strings(metadata, key, (const char *const *)&value, 1,
                                            false) != WF_OK)
                ps->failed = ps->reported = true;
        } else {
            skip_value(ps);
        }
        free(key);
        free(value);
    } while (!ps->failed && peek(ps, ',') && ps->p++);
    expect(ps, '}');
}

wf_nn_params *wf__nn_safetensors_parse(const unsigned char *file, size_t size, const char *path,
                                       wf_nn_gguf_meta *metadata)
{
    uint64_t header_len = 0;
    for (int b = 0; size >= 8 && b < 8; b++)
        header_len |= (uint64_t)file[b] << (8 * b);
    wf_nn_params *result = NULL;
    if (size < 8 || header_len > size - 8)
        return malformed(path, "the header length is larger than the file");
    struct parser ps = {(const char *)file + 8, (const char *)file + 8 + header_len, false, false};
    struct entry *entries = NULL;
    int count = 0, cap = 0;
    if (expect(&ps, '{') && !peek(&ps, '}')) {
        do {
            char name[256];
            if (!parse_string(&ps, name, sizeof name) || !expect(&ps, ':'))
                break;
            if (strcmp(name, "__metadata__") == 0) {
                parse_metadata(&ps, metadata);
                continue;
            }
            if (count == cap) {
                cap = cap ? cap * 2 : 16;
                struct entry *grown = wf__realloc(entries, (size_t)cap * sizeof *entries);
                if (!grown) {
                    wf_set_error(WF_ERR_OUT_OF_MEMORY, "wf_nn_load_safetensors: out of memory");
                    ps.failed = ps.reported = true;
                    break;
                }
                entries = grown;
            }
            memset(&entries[count], 0, sizeof entries[count]);
            snprintf(entries[count].name, sizeof entries[count].name, "%s", name);
            if (!parse_entry(&ps, &entries[count]))
                break;
            count++;
        } while (!ps.failed && peek(&ps, ',') && ps.p++);
    }
    if (!ps.failed)
        expect(&ps, '}');
    if (ps.failed) {
        if (!ps.reported)
            malformed(path, "the JSON header could not be read");
    } else {
        result = build(path, file + 8 + header_len, size - 8 - header_len, entries, count);
    }
    free(entries);
    return result;
}

wf_nn_params *wf_nn_load_safetensors(const char *path)
{
    if (!path) {
        wf_set_error(WF_ERR_NULL_ARGUMENT, "wf_nn_load_safetensors: path is NULL");
        return NULL;
    }
    return wf_nn_load_safetensors_with_metadata(path, NULL);
}

wf_nn_params *wf_nn_load_safetensors_with_metadata(const char *path, wf_nn_gguf_meta **metadata)
{
    if (!path) {
        wf_set_error(WF_ERR_NULL_ARGUMENT, "wf_nn_load_safetensors_with_metadata: path is NULL");
        return NULL;
    }
    wf_nn_gguf_meta *meta = metadata ? wf_nn_gguf_meta_new() : NULL;
    if (metadata && !meta)
        return NULL;
    size_t size;
    unsigned char *file = read_file(path, &size);
    wf_nn_params *result = file ? wf__nn_safetensors_parse(file, size, path, meta) : NULL;
    free(file);
    if (!result)
        wf_nn_gguf_meta_release(meta);
    else if (metadata)
        *metadata = meta;
    return result;
}
