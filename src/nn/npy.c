/*
 * NumPy's .npy and .npz files (weft_nn.h).
 *
 * .npy: "\x93NUMPY", version (1.0: 2-byte header length; 2.0 / 3.0:
 * 4-byte), a Python dict literal {'descr': '<f4', 'fortran_order': False,
 * 'shape': (2, 3), } padded with spaces to a multiple of 64 bytes, then the
 * elements. Little-endian data is mapped in place when aligned; big-endian
 * data is byte-swapped into a copy; Fortran order is read as the reversed
 * shape and transposed (a view).
 * .npz: a zip archive of NAME.npy members, stored (method 0) or deflated
 * (method 8, through zlib, which is hardened against hostile streams). A
 * deflated member's declared size must be within deflate's 1032:1 ratio of
 * its compressed size, so no header can ask for a huge allocation. Zip64
 * sizes and offsets are read; archives of more than 65535 members are not.
 * Every size, offset and count is checked against the file before use.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "nn/loaders.h"
#include "nn/mapped.h"
#include "weft.h"
#include "weft_nn.h"
#include "util/fault.h"

/* ------------------------------------------------------------ dtypes */

static const struct {
    char kind;
    int size;
    wf_dtype dtype;
} npy_types[] = {
    {'b', 1, WF_DTYPE_BOOL}, {'i', 1, WF_DTYPE_I8},  {'i', 2, WF_DTYPE_I16}, {'i', 4, WF_DTYPE_I32},
    {'i', 8, WF_DTYPE_I64},  {'u', 1, WF_DTYPE_U8},  {'u', 2, WF_DTYPE_U16}, {'u', 4, WF_DTYPE_U32},
    {'u', 8, WF_DTYPE_U64},  {'f', 2, WF_DTYPE_F16}, {'f', 4, WF_DTYPE_F32}, {'f', 8, WF_DTYPE_F64},
    {'c', 8, WF_DTYPE_C64},
};

static bool npy_dtype(char kind, int size, wf_dtype *out)
{
    for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
        if (npy_types[i].kind == kind && npy_types[i].size == size) {
            *out = npy_types[i].dtype;
            return true;
        }
    return false;
}

static bool npy_descr(wf_dtype dtype, char *out)
{
    for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
        if (npy_types[i].dtype == dtype) {
            snprintf(out, 8, "%c%c%d", npy_types[i].size == 1 ? '|' : '<', npy_types[i].kind,
                     npy_types[i].size);
            return true;
        }
    return false;
}

/* ------------------------------------------------------------ header */

typedef struct npy_header {
    wf_dtype dtype;
    bool big_endian, fortran;
    int ndim;
    int64_t shape[WF_MAX_NDIM];
    size_t data_offset, data_bytes;
} npy_header;

static const char *skip_spaces(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n'))
        p++;
    return p;
}

/* The value text after 'key': in the dict [p, end), or NULL. */
static const char *find_key(const char *p, const char *end, const char *key)
{
    const size_t n = strlen(key);
    for (; p + n + 2 < end; p++)
        if ((*p == '\'' || *p == '"') && memcmp(p + 1, key, n) == 0 && p[n + 1] == *p) {
            const char *q = skip_spaces(p + n + 2, end);
            return q < end && *q == ':' ? skip_spaces(q + 1, end) : NULL;
        }
    return NULL;
}

static bool parse_descr(const char *p, const char *end, npy_header *h)
{
    if (!p || p >= end || (*p != '\'' && *p != '"'))
        return false;
    const char quote = *p++;
    const char *close = memchr(p, quote, (size_t)(end - p));
    if (!close || close - p < 3 || close - p > 4)
        return false;
    const char order = p[0], kind = p[1];
    if (order != '<' && order != '>' && order != '|' && order != '=')
        return false;
    int size = 0;
    for (const char *q = p + 2; q < close; q++) {
        if (*q < '0' || *q > '9')
            return false;
        size = size * 10 + (*q - '0');
    }
    h->big_endian = order == '>' && size > 1;
    return npy_dtype(kind, size, &h->dtype);
}

static bool parse_shape(const char *p, const char *end, npy_header *h)
{
    if (!p || p >= end || *p != '(')
        return false;
    p++;
    h->ndim = 0;
    for (;;) {
        p = skip_spaces(p, end);
        if (p < end && *p == ')')
            return true;
        if (p >= end || *p < '0' || *p > '9' || h->ndim == WF_MAX_NDIM)
            return false;
        int64_t v = 0;
        for (; p < end && *p >= '0' && *p <= '9'; p++) {
            if (v > (INT64_MAX - 9) / 10)
                return false;
            v = v * 10 + (*p - '0');
        }
        h->shape[h->ndim++] = v;
        p = skip_spaces(p, end);
        if (p < end && *p == ',')
            p++;
        else if (p >= end || *p != ')')
            return false;
    }
}

/* Parses a .npy image of `size` bytes; the data must fit in it. */
static bool parse_npy(const uint8_t *data, size_t size, npy_header *h, const char **why)
{
    memset(h, 0, sizeof *h);
    *why = "not a .npy file (bad magic)";
    if (size < 10 || memcmp(data, "\x93NUMPY", 6) != 0)
        return false;
    const int major = data[6];
    size_t header_len, start;
    if (major == 1) {
        header_len = (size_t)data[8] | (size_t)data[9] << 8;
        start = 10;
    } else if (major == 2 || major == 3) {
        if (size < 12)
            return false;
        header_len = (size_t)data[8] | (size_t)data[9] << 8 | (size_t)data[10] << 16 |
                     (size_t)data[11] << 24;
        start = 12;
    } else {
        *why = "unsupported .npy version";
        return false;
    }
    *why = "truncated .npy header";
    if (header_len > size - start)
        return false;
    const char *text = (const char *)data + start, *end = text + header_len;
    *why = "malformed .npy header";
    if (!parse_descr(find_key(text, end, "descr"), end, h))
        return false;
    const char *fo = find_key(text, end, "fortran_order");
    if (!fo || end - fo < 4)
        return false;
    h->fortran = memcmp(fo, "True", 4) == 0;
    if (!h->fortran && (end - fo < 5 || memcmp(fo, "False", 5) != 0))
        return false;
    if (!parse_shape(find_key(text, end, "shape"), end, h))
        return false;
    h->data_offset = start + header_len;
    *why = "the data is shorter than the header's shape";
    return wf__nn_shape_bytes(h->shape, h->ndim, wf_dtype_size(h->dtype), size - h->data_offset,
                              &h->data_bytes);
}

/* The array of a parsed .npy image at `data`: over mapping m when data lies
 * in it, else (m NULL: a buffer the caller frees) a copy. */
static wf_array *npy_array(wf_nn_mapping *m, const uint8_t *data, const npy_header *h)
{
    int64_t shape[WF_MAX_NDIM];
    for (int d = 0; d < h->ndim; d++) /* Fortran order: the transpose is row-major */
        shape[d] = h->fortran ? h->shape[h->ndim - 1 - d] : h->shape[d];
    const uint8_t *p = data + h->data_offset;
    wf_array *a;
    if (h->data_bytes == 0) {
        a = wf_zeros(shape, h->ndim, h->dtype);
    } else if (h->big_endian) {
        const size_t item = wf_dtype_size(h->dtype), part = h->dtype == WF_DTYPE_C64 ? 4 : item;
        uint8_t *swapped = wf__malloc(h->data_bytes);
        if (!swapped) {
            wf_set_error(WF_ERR_OUT_OF_MEMORY, "load: out of memory");
            return NULL;
        }
        for (size_t i = 0; i < h->data_bytes; i += part)
            for (size_t b = 0; b < part; b++)
                swapped[i + b] = p[i + part - 1 - b];
        a = wf_array_from_data(swapped, shape, h->ndim, h->dtype);
        free(swapped);
    } else if (m) {
        a = wf__nn_mapped_array(m, p, shape, h->ndim, h->dtype);
    } else {
        a = wf_array_from_data(p, shape, h->ndim, h->dtype);
    }
    if (!a || !h->fortran || h->ndim < 2)
        return a;
    int perm[WF_MAX_NDIM];
    for (int d = 0; d < h->ndim; d++)
        perm[d] = h->ndim - 1 - d;
    wf_array *t = wf_transpose(a, perm, h->ndim);
    wf_release(a);
    return t;
}

wf_array *wf__nn_npy_parse(wf_nn_mapping *m, const char *path)
{
    npy_header h;
    const char *why;
    if (!parse_npy(m->data, m->size, &h, &why)) {
        wf_set_error(WF_ERR_IO, "wf_nn_load_npy: '%s': %s", path, why);
        return NULL;
    }
    return npy_array(m, m->data, &h);
}

wf_array *wf_nn_load_npy(const char *path)
{
    wf_nn_mapping *m = wf__nn_map("wf_nn_load_npy", path);
    if (!m)
        return NULL;
    wf_array *a = wf__nn_npy_parse(m, path);
    wf__nn_mapping_release(m);
    return a;
}

/* ------------------------------------------------------------ writing .npy */

/* The .npy header of `a` (padded so the data starts on 64 bytes). */
static size_t npy_header_text(const wf_array *a, char *out, size_t cap)
{
    char descr[8], shape[WF_MAX_NDIM * 24 + 8];
    npy_descr(wf_array_dtype(a), descr);
    size_t n = 0;
    const int ndim = wf_array_ndim(a);
    const int64_t *dims = wf_array_shape(a);
    n += (size_t)snprintf(shape + n, sizeof shape - n, "(");
    for (int d = 0; d < ndim; d++) /* NumPy's spelling: (3,) and (3, 4) */
        n += (size_t)snprintf(shape + n, sizeof shape - n, "%lld%s", (long long)dims[d],
                              ndim == 1 ? "," : d + 1 < ndim ? ", " : "");
    snprintf(shape + n, sizeof shape - n, ")");
    int len = snprintf(out + 10, cap - 10, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                       descr, shape);
    size_t total = 10 + (size_t)len + 1;
    const size_t padded = (total + 63) / 64 * 64;
    memset(out + 10 + len, ' ', padded - total);
    out[padded - 1] = '\n';
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (char)((padded - 10) & 0xff);
    out[9] = (char)((padded - 10) >> 8);
    return padded;
}

/* The .npy image of `a` (evaluated): header + row-major data; caller frees. */
static uint8_t *npy_image(const char *op, wf_array *a, size_t *size)
{
    char descr[8];
    if (!a) {
        wf_set_error(WF_ERR_NULL_ARGUMENT, "%s: array is NULL", op);
        return NULL;
    }
    if (!npy_descr(wf_array_dtype(a), descr)) {
        wf_set_error(WF_ERR_DTYPE, "%s: NumPy files have no %s", op, wf_dtype_name(wf_array_dtype(a)));
        return NULL;
    }
    char header[1024];
    const size_t hlen = npy_header_text(a, header, sizeof header);
    const size_t bytes = (size_t)wf_array_size(a) * wf_dtype_size(wf_array_dtype(a));
    uint8_t *img = wf__malloc(hlen + bytes);
    if (!img) {
        wf_set_error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
        return NULL;
    }
    memcpy(img, header, hlen);
    if (bytes && wf_array_copy_to(a, img + hlen, bytes) != WF_OK) {
        free(img);
        return NULL;
    }
    *size = hlen + bytes;
    return img;
}

static wf_status write_file(const char *op, const char *path, const void *data, size_t size)
{
    FILE *f = path ? fopen(path, "wb") : NULL;
    if (!f)
        return wf_set_error(WF_ERR_IO, "%s: cannot open '%s' for writing", op,
                            path ? path : "(NULL)");
    const bool ok = fwrite(data, 1, size, f) == size;
    return fclose(f) == 0 && ok ? WF_OK : wf_set_error(WF_ERR_IO, "%s: writing '%s' failed", op, path);
}

wf_status wf_nn_save_npy(wf_array *a, const char *path)
{
    size_t size;
    uint8_t *img = npy_image("wf_nn_save_npy", a, &size);
    if (!img)
        return wf_last_error();
    const wf_status st = write_file("wf_nn_save_npy", path, img, size);
    free(img);
    return st;
}

/* ------------------------------------------------------------ zip */

static uint32_t rd16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t rd32(const uint8_t *p) { return rd16(p) | rd16(p + 2) << 16; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* The `why` of an allocation failure: reported as WF_ERR_OUT_OF_MEMORY, not
 * as a problem of the file (WF_ERR_IO). */
static const char out_of_memory[] = "out of memory";

typedef struct zip_member {
    const uint8_t *name;
    size_t name_len;
    uint32_t method, crc;
    uint64_t csize, usize, local_offset;
} zip_member;

/* Zip64 extra field of a central entry: replaces the 0xFFFFFFFF fields. */
static bool zip64_extra(const uint8_t *x, size_t n, zip_member *e, bool need_u, bool need_c,
                        bool need_o)
{
    while (n >= 4) {
        const uint32_t id = rd16(x), len = rd16(x + 2);
        if (len > n - 4)
            return false;
        if (id == 1) {
            const uint8_t *v = x + 4;
            size_t left = len;
            uint64_t *fields[3] = {need_u ? &e->usize : NULL, need_c ? &e->csize : NULL,
                                   need_o ? &e->local_offset : NULL};
            for (int i = 0; i < 3; i++) {
                if (!fields[i])
                    continue;
                if (left < 8)
                    return false;
                *fields[i] = rd64(v);
                v += 8;
                left -= 8;
            }
            return true;
        }
        x += 4 + len;
        n -= 4 + len;
    }
    return !need_u && !need_c && !need_o;
}

/* Finds the central directory; fills *count members (allocated). */
static bool zip_members(const uint8_t *d, size_t size, zip_member **out, size_t *count,
                        const char **why)
{
    *why = "not a zip archive (no end of central directory)";
    if (size < 22)
        return false;
    size_t eocd = size - 22;
    const size_t lowest = size > 22 + 65535 ? size - 22 - 65535 : 0;
    while (rd32(d + eocd) != 0x06054b50) {
        if (eocd == lowest)
            return false;
        eocd--;
    }
    const uint32_t n = rd16(d + eocd + 10);
    uint64_t cd_size = rd32(d + eocd + 12), cd_off = rd32(d + eocd + 16);
    *why = "corrupt zip central directory";
    if (cd_off > size || cd_size > size - cd_off || n == 0xffff)
        return false;
    zip_member *m = wf__calloc(n ? n : 1, sizeof *m);
    if (!m) {
        *why = out_of_memory;
        return false;
    }
    const uint8_t *p = d + cd_off, *end = p + cd_size;
    for (uint32_t i = 0; i < n; i++) {
        if (end - p < 46 || rd32(p) != 0x02014b50) {
            free(m);
            return false;
        }
        zip_member *e = &m[i];
        e->method = rd16(p + 10);
        e->crc = rd32(p + 16);
        e->csize = rd32(p + 20);
        e->usize = rd32(p + 24);
        const size_t nl = rd16(p + 28), xl = rd16(p + 30), cl = rd16(p + 32);
        e->local_offset = rd32(p + 42);
        if ((size_t)(end - p) - 46 < nl + xl + cl ||
            !zip64_extra(p + 46 + nl, xl, e, e->usize == 0xffffffffu, e->csize == 0xffffffffu,
                         e->local_offset == 0xffffffffu)) {
            free(m);
            return false;
        }
        e->name = p + 46;
        e->name_len = nl;
        p += 46 + nl + xl + cl;
    }
    *out = m;
    *count = n;
    return true;
}

/* The member's bytes: in the file (stored) or inflated into *owned. */
static const uint8_t *member_data(const uint8_t *d, size_t size, const zip_member *e,
                                  uint8_t **owned, const char **why)
{
    *owned = NULL;
    *why = "corrupt zip member";
    if (e->local_offset > size || size - e->local_offset < 30 ||
        rd32(d + e->local_offset) != 0x04034b50)
        return NULL;
    const uint8_t *lh = d + e->local_offset;
    const uint64_t start = e->local_offset + 30 + rd16(lh + 26) + rd16(lh + 28);
    if (start > size || e->csize > size - start)
        return NULL;
    const uint8_t *src = d + start;
    if (e->method == 0) {
        if (e->usize != e->csize)
            return NULL;
        return crc32_z(0, src, (z_size_t)e->csize) == e->crc ? src : NULL;
    }
    if (e->method != 8) {
        *why = "unsupported zip compression method";
        return NULL;
    }
    if (e->usize / 1032 > e->csize + 1) {
        *why = "zip member larger than its compressed data can hold";
        return NULL;
    }
    uint8_t *buf = wf__malloc(e->usize ? e->usize : 1);
    if (!buf) {
        *why = out_of_memory;
        return NULL;
    }
    z_stream z;
    memset(&z, 0, sizeof z);
    bool ok = inflateInit2(&z, -15) == Z_OK;
    uint64_t in_left = e->csize, out_left = e->usize;
    const uint8_t *in = src;
    uint8_t *out = buf;
    int ret = Z_OK;
    while (ok && ret == Z_OK) {
        const uInt ci = in_left > 1u << 30 ? 1u << 30 : (uInt)in_left;
        const uInt co = out_left > 1u << 30 ? 1u << 30 : (uInt)out_left;
        z.next_in = (Bytef *)in;
        z.avail_in = ci;
        z.next_out = out;
        z.avail_out = co;
        ret = inflate(&z, Z_NO_FLUSH);
        in += ci - z.avail_in;
        in_left -= ci - z.avail_in;
        out += co - z.avail_out;
        out_left -= co - z.avail_out;
        if (ret == Z_OK && z.avail_in == ci && z.avail_out == co)
            ret = Z_DATA_ERROR; /* no progress: truncated or overlong */
    }
    if (ok)
        inflateEnd(&z);
    if (ret != Z_STREAM_END || out_left != 0 || crc32_z(0, buf, (z_size_t)e->usize) != e->crc) {
        free(buf);
        return NULL;
    }
    *owned = buf;
    return buf;
}

wf_nn_params *wf__nn_npz_parse(wf_nn_mapping *m, const char *path)
{
    const char *op = "wf_nn_load_npz";
    zip_member *members = NULL;
    size_t count = 0;
    const char *why = NULL;
    wf_nn_params *params = NULL;
    if (zip_members(m->data, m->size, &members, &count, &why))
        params = wf_nn_params_new();
    for (size_t i = 0; params && i < count; i++) {
        const zip_member *e = &members[i];
        uint8_t *owned;
        const uint8_t *data = member_data(m->data, m->size, e, &owned, &why);
        npy_header h;
        char name[256];
        size_t nl = e->name_len;
        if (nl >= 4 && memcmp(e->name + nl - 4, ".npy", 4) == 0)
            nl -= 4;
        wf_array *a = NULL;
        bool parsed = false; /* then a failure to make the array is recorded */
        if (data && nl < sizeof name && memchr(e->name, 0, nl) == NULL) {
            memcpy(name, e->name, nl);
            name[nl] = 0;
            parsed = parse_npy(data, (size_t)e->usize, &h, &why);
            if (parsed)
                a = npy_array(owned ? NULL : m, data, &h);
            else
                why = why ? why : "bad member";
        } else if (data) {
            why = "member name too long";
        }
        free(owned);
        const wf_status st = a ? wf_nn_params_add(params, name, a)
                               : parsed ? wf_last_error() : WF_ERR_IO;
        wf_release(a);
        if (st != WF_OK) {
            if (!a && !parsed)
                wf_set_error(why == out_of_memory ? WF_ERR_OUT_OF_MEMORY : WF_ERR_IO,
                             "%s: '%s': %s", op, path, why);
            wf_nn_params_release(params);
            params = NULL;
        }
    }
    if (!params && !members)
        wf_set_error(why == out_of_memory ? WF_ERR_OUT_OF_MEMORY : WF_ERR_IO, "%s: '%s': %s", op,
                     path, why ? why : "unreadable");
    free(members);
    return params;
}

wf_nn_params *wf_nn_load_npz(const char *path)
{
    wf_nn_mapping *m = wf__nn_map("wf_nn_load_npz", path);
    if (!m)
        return NULL;
    wf_nn_params *params = wf__nn_npz_parse(m, path);
    wf__nn_mapping_release(m);
    return params;
}

/* ------------------------------------------------------------ writing .npz */

static void wr16(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void wr32(uint8_t *p, uint32_t v)
{
    wr16(p, v & 0xffff);
    wr16(p + 2, v >> 16);
}

typedef struct out_buf {
    uint8_t *data;
    size_t len, cap;
    bool failed;
} out_buf;

static uint8_t *reserve(out_buf *b, size_t n)
{
    if (b->failed)
        return NULL;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *d = wf__realloc(b->data, cap);
        if (!d) {
            b->failed = true;
            return NULL;
        }
        b->data = d;
        b->cap = cap;
    }
    uint8_t *p = b->data + b->len;
    b->len += n;
    return p;
}

/* Deflates (raw) src into a new buffer; NULL when memory is short. */
static uint8_t *deflate_all(const uint8_t *src, size_t n, size_t *out_len)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return NULL;
    const uLong bound = deflateBound(&z, (uLong)n);
    uint8_t *out = wf__malloc(bound);
    z.next_in = (Bytef *)src;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)bound;
    const int ret = out ? deflate(&z, Z_FINISH) : Z_MEM_ERROR;
    *out_len = z.total_out;
    deflateEnd(&z);
    if (ret != Z_STREAM_END) {
        free(out);
        return NULL;
    }
    return out;
}

/* Whether a's .npy image (header and data) would be 4 GiB or more, more
 * than a zip entry without zip64 holds; told from the metadata, so that
 * such an array is refused before a copy of it is made. */
static bool npy_image_too_large_for_zip(const wf_array *a)
{
    char descr[8], header[1024];
    if (!a || !npy_descr(wf_array_dtype(a), descr))
        return false; /* npy_image reports it */
    const uint64_t room = 0xffffffffu - npy_header_text(a, header, sizeof header);
    const uint64_t item = wf_dtype_size(wf_array_dtype(a));
    return (uint64_t)wf_array_size(a) > (room - 1) / item;
}

static wf_status zip64_refused(const char *op)
{
    return wf_set_error(WF_ERR_UNSUPPORTED,
                        "%s: arrays of 4 GiB or more (zip64) are not written", op);
}

wf_status wf_nn_save_npz(const wf_nn_params *params, const char *path, bool compressed)
{
    const char *op = "wf_nn_save_npz";
    if (!params)
        return wf_set_error(WF_ERR_NULL_ARGUMENT, "%s: params is NULL", op);
    out_buf file = {0}, dir = {0};
    wf_status st = WF_OK;
    const size_t n = wf_nn_params_count(params);
    if (n >= 0xffff)
        return wf_set_error(WF_ERR_UNSUPPORTED, "%s: more than 65534 arrays", op);
    for (size_t i = 0; i < n && st == WF_OK; i++) {
        size_t size = 0, csize = 0;
        if (npy_image_too_large_for_zip(wf_nn_params_get(params, i)) || file.len >= 0xffffffffu) {
            st = zip64_refused(op);
            break;
        }
        uint8_t *img = npy_image(op, wf_nn_params_get(params, i), &size);
        if (!img) {
            st = wf_last_error();
            break;
        }
        uint8_t *packed = compressed ? deflate_all(img, size, &csize) : img;
        if (!compressed)
            csize = size;
        char name[272];
        const int nl = snprintf(name, sizeof name, "%s.npy", wf_nn_params_name(params, i));
        if (csize >= 0xffffffffu) { /* deflate made it larger */
            st = zip64_refused(op);
        } else if (!packed) {
            st = wf_set_error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
        } else {
            const uint32_t crc = (uint32_t)crc32_z(0, img, size), off = (uint32_t)file.len;
            uint8_t *lh = reserve(&file, 30 + (size_t)nl + csize);
            uint8_t *ch = reserve(&dir, 46 + (size_t)nl);
            if (lh && ch) {
                memset(lh, 0, 30);
                wr32(lh, 0x04034b50);
                wr16(lh + 4, 20);
                wr16(lh + 8, compressed ? 8 : 0);
                wr32(lh + 14, crc);
                wr32(lh + 18, (uint32_t)csize);
                wr32(lh + 22, (uint32_t)size);
                wr16(lh + 26, (uint32_t)nl);
                memcpy(lh + 30, name, (size_t)nl);
                memcpy(lh + 30 + nl, packed, csize);
                memset(ch, 0, 46);
                wr32(ch, 0x02014b50);
                wr16(ch + 4, 20);
                wr16(ch + 6, 20);
                wr16(ch + 10, compressed ? 8 : 0);
                wr32(ch + 16, crc);
                wr32(ch + 20, (uint32_t)csize);
                wr32(ch + 24, (uint32_t)size);
                wr16(ch + 28, (uint32_t)nl);
                wr32(ch + 42, off);
                memcpy(ch + 46, name, (size_t)nl);
            } else {
                st = wf_set_error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
            }
        }
        if (packed != img)
            free(packed);
        free(img);
    }
    if (st == WF_OK) {
        const size_t dir_off = file.len;
        uint8_t *d = reserve(&file, dir.len), *end = reserve(&file, 22);
        if (dir_off >= 0xffffffffu) {
            st = zip64_refused(op); /* the directory's offset needs zip64 */
        } else if (d && end) {
            if (dir.len)
                memcpy(d, dir.data, dir.len);
            memset(end, 0, 22);
            wr32(end, 0x06054b50);
            wr16(end + 8, (uint32_t)n);
            wr16(end + 10, (uint32_t)n);
            wr32(end + 12, (uint32_t)dir.len);
            wr32(end + 16, (uint32_t)dir_off);
            st = write_file(op, path, file.data, file.len);
        } else {
            st = wf_set_error(WF_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
        }
    }
    free(file.data);
    free(dir.data);
    return st;
}
