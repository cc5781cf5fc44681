/*
 * Importing functions (weft.h, "export and import"). The file is hostile
 * input: every count, size, index, string and primitive name is checked
 * against what is left of the file before it is used, so no count in a
 * file can make the reader allocate more than a small multiple of the
 * file's size (the largest ratio: a tape node, about 300 bytes, for at
 * least 16 bytes of file), each parameter is range-checked (export_params.c), and
 * every node's recorded output is checked against the primitive's own
 * shape inference from its recorded inputs, so a node that loads is one
 * the op constructors could have built. Anything else is WF_ERR_IO with
 * the file's name and what was wrong.
 *
 * An imported function is immutable once read: calls from any number of
 * threads replay its tapes at once.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile/export_format.h"
#include "compile/tape.h"
#include "core/error.h"
#include "core/shape.h"
#include "prim/fused.h"
#include "prim/prims.h"
#include "util/fault.h"

/* A description as read (the full rank's room, for one at a time). */
typedef struct read_description {
    wf_dtype dtype;
    int ndim;
    int64_t shape[WF_MAX_NDIM];
} read_description;

/* An input's description as kept: its shape in an allocation of its own
 * rank, so a file of many inputs costs memory in proportion to its bytes. */
typedef struct imported_input {
    wf_dtype dtype;
    int ndim;
    int64_t *shape; /* ndim entries (NULL for rank 0) */
} imported_input;

typedef struct imported_trace {
    char *tag;
    bool shapeless;
    imported_input *inputs; /* tape.ninputs of them */
    wf_tape tape;
} imported_trace;

struct wf_imported {
    atomic_long refcount;
    char *metadata;
    imported_trace *traces;
    size_t ntraces;
    wf_array **pool; /* owned references */
    size_t npool;
};

/* ------------------------------------------------------------ lifetime */

static void imported_free(wf_imported *imp)
{
    for (size_t i = 0; i < imp->ntraces; i++) {
        free(imp->traces[i].tag);
        for (int k = 0; imp->traces[i].inputs && k < imp->traces[i].tape.ninputs; k++)
            free(imp->traces[i].inputs[k].shape);
        free(imp->traces[i].inputs);
        wf__tape_clear(&imp->traces[i].tape);
    }
    free(imp->traces);
    for (size_t i = 0; i < imp->npool; i++)
        wf__array_release(imp->pool[i]);
    free(imp->pool);
    free(imp->metadata);
    free(imp);
}

void wf_imported_release(wf_imported *imp)
{
    if (imp && atomic_fetch_sub(&imp->refcount, 1) == 1)
        imported_free(imp);
}

wf_imported *wf_imported_retain(wf_imported *imp)
{
    if (imp)
        atomic_fetch_add(&imp->refcount, 1);
    return imp;
}

/* ------------------------------------------------------------ parsing */

typedef struct parser {
    wf_reader r;
    const char *name; /* the file's, for messages */
    wf_imported *imp;
    size_t pool_capacity;
} parser;

/* Records WF_ERR_IO "<name>: <why>" unless an error is recorded already
 * (a parameter's own message, or out of memory). */
static bool corrupt(parser *p, const char *why)
{
    wf__error(WF_ERR_IO, "wf_import_function: '%s' is not a valid weft function file (%s)",
              p->name, why);
    return false;
}

static bool wrap_error(parser *p, const char *what)
{
    if (wf_last_error() == WF_ERR_OUT_OF_MEMORY)
        return false;
    char message[512];
    snprintf(message, sizeof message, "%s: %s", what, wf_last_error_message());
    return corrupt(p, message);
}

/* A count of items of at least `min_bytes` each that fit in what is left. */
static bool read_count(parser *p, size_t min_bytes, uint32_t *out, const char *what)
{
    *out = wf__reader_u32(&p->r);
    if (p->r.failed)
        return corrupt(p, "truncated");
    if ((uint64_t)*out * min_bytes > wf__reader_left(&p->r)) {
        char why[128];
        snprintf(why, sizeof why, "%s count %u is more than the file holds", what, *out);
        return corrupt(p, why);
    }
    return true;
}

/* A string of u32 length without NUL bytes, copied with a terminator. */
static bool read_string(parser *p, char **out, const char *what)
{
    *out = NULL;
    uint32_t n = wf__reader_u32(&p->r);
    const unsigned char *bytes = wf__reader_take(&p->r, n);
    if (!bytes) {
        char why[128];
        snprintf(why, sizeof why, "%s runs past the end", what);
        return corrupt(p, why);
    }
    if (memchr(bytes, 0, n)) {
        char why[128];
        snprintf(why, sizeof why, "%s holds a NUL byte", what);
        return corrupt(p, why);
    }
    char *s = wf__malloc((size_t)n + 1);
    if (!s) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "wf_import_function: out of memory");
        return false;
    }
    memcpy(s, bytes, n);
    s[n] = '\0';
    *out = s;
    return true;
}

static bool read_desc(parser *p, read_description *d)
{
    unsigned dtype = wf__reader_u8(&p->r), ndim = wf__reader_u8(&p->r);
    if (p->r.failed)
        return corrupt(p, "truncated description");
    if (dtype >= WF_DTYPE_COUNT || ndim > WF_MAX_NDIM)
        return corrupt(p, "a description has a bad dtype or rank");
    d->dtype = (wf_dtype)dtype;
    d->ndim = (int)ndim;
    for (unsigned k = 0; k < ndim; k++)
        d->shape[k] = (int64_t)wf__reader_u64(&p->r);
    if (p->r.failed)
        return corrupt(p, "truncated shape");
    if (wf__check_shape("wf_import_function", d->shape, d->ndim) != WF_OK)
        return wrap_error(p, "a shape");
    return true;
}

static bool pool_add(parser *p, wf_array *a)
{
    wf_imported *imp = p->imp;
    if (imp->npool == p->pool_capacity) {
        size_t grown = p->pool_capacity ? p->pool_capacity * 2 : 16;
        wf_array **pool = wf__realloc(imp->pool, grown * sizeof *pool);
        if (!pool) {
            wf__array_release(a);
            wf__error(WF_ERR_OUT_OF_MEMORY, "wf_import_function: out of memory");
            return false;
        }
        imp->pool = pool;
        p->pool_capacity = grown;
    }
    imp->pool[imp->npool++] = a;
    return true;
}

static bool read_constant(parser *p)
{
    read_description d;
    if (!read_desc(p, &d))
        return false;
    const uint64_t nbytes = wf__reader_u64(&p->r);
    int64_t size = 1;
    for (int k = 0; k < d.ndim; k++)
        size *= d.shape[k]; /* at most 2^60 (wf__check_shape) */
    if (p->r.failed || nbytes != (uint64_t)size * wf_dtype_size(d.dtype))
        return corrupt(p, "a constant's byte count does not match its shape");
    const unsigned char *data = wf__reader_take(&p->r, (size_t)nbytes);
    if (!data)
        return corrupt(p, "a constant's data runs past the end");
    wf_array *a = wf__array_from_data(data, d.shape, d.ndim, d.dtype);
    if (!a)
        return wrap_error(p, "a constant");
    return pool_add(p, a);
}

static bool read_ref(parser *p, const wf_tape *t, int nnodes_before, wf_tape_ref *ref)
{
    unsigned kind = wf__reader_u8(&p->r);
    uint32_t index = wf__reader_u32(&p->r);
    if (p->r.failed)
        return corrupt(p, "truncated operand");
    const uint32_t limit = kind == WF_TAPE_INPUT   ? (uint32_t)t->ninputs
                           : kind == WF_TAPE_CONST ? (uint32_t)t->nconsts
                           : kind == WF_TAPE_NODE  ? (uint32_t)nnodes_before
                                                   : 0;
    if (index >= limit)
        return corrupt(p, "an operand refers to nothing (bad kind or index)");
    *ref = (wf_tape_ref){(int)kind, (int)index};
    return true;
}

/* The description of what `ref` refers to. */
static wf_desc desc_of(const imported_trace *tr, wf_tape_ref ref)
{
    switch (ref.kind) {
    case WF_TAPE_INPUT: {
        const imported_input *in = &tr->inputs[ref.index];
        return (wf_desc){in->dtype, in->ndim, in->shape};
    }
    case WF_TAPE_CONST: return wf__array_desc(tr->tape.consts[ref.index]);
    default: {
        const wf_tape_node *n = &tr->tape.nodes[ref.index];
        return (wf_desc){n->dtype, n->ndim, n->shape};
    }
    }
}

/* Runs node `n`'s shape inference on the descriptions of its operands
 * (broadcast to their joint shape for an element-wise node, as replay
 * does) and compares the result with what the file recorded. */
static bool type_check(parser *p, const imported_trace *tr, const wf_tape_node *n)
{
    wf_desc stack_descs[16];
    wf_desc *descs = n->ninputs <= 16 ? stack_descs : wf__malloc((size_t)n->ninputs * sizeof *descs);
    if (!descs) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "wf_import_function: out of memory");
        return false;
    }
    int64_t joined[WF_MAX_NDIM];
    int njoined = 0;
    bool ok = true;
    for (int k = 0; k < n->ninputs; k++) {
        descs[k] = desc_of(tr, n->inputs[k]);
        if ((n->prim->flags & WF_PRIM_ELEMENTWISE) && n->ninputs >= 2 && ok) {
            int64_t next[WF_MAX_NDIM];
            int nnext;
            ok = wf__broadcast_shapes(n->prim->name, joined, njoined, descs[k].shape,
                                      descs[k].ndim, next, &nnext) == WF_OK;
            wf__shape_copy(joined, next, ok ? nnext : 0);
            njoined = ok ? nnext : 0;
        }
    }
    if (ok && (n->prim->flags & WF_PRIM_ELEMENTWISE) && n->ninputs >= 2)
        for (int k = 0; k < n->ninputs; k++) {
            descs[k].ndim = njoined;
            descs[k].shape = joined;
        }
    wf_out_desc out;
    memset(&out, 0, sizeof out);
    if (ok)
        ok = n->prim->infer(n->params, descs, n->ninputs, &out) == WF_OK;
    if (descs != stack_descs)
        free(descs);
    if (!ok) {
        char what[96];
        snprintf(what, sizeof what, "node '%s' does not fit its operands", n->prim->name);
        return wrap_error(p, what);
    }
    if (out.dtype != n->dtype || !wf__shape_equal(out.shape, out.ndim, n->shape, n->ndim)) {
        char why[160];
        snprintf(why, sizeof why, "node '%s' records an output its operands do not give",
                 n->prim->name);
        return corrupt(p, why);
    }
    return true;
}

static bool read_node(parser *p, imported_trace *tr, int index)
{
    wf_tape *t = &tr->tape;
    wf_tape_node *n = &t->nodes[index];
    unsigned name_len = wf__reader_u16(&p->r);
    const unsigned char *name = wf__reader_take(&p->r, name_len);
    if (!name || name_len > WF_EXPORT_MAX_NAME)
        return corrupt(p, "a primitive name is truncated or too long");
    const wf_prim_def *prim = wf__export_prim_find((const char *)name, name_len);
    if (!prim) {
        char why[128];
        snprintf(why, sizeof why, "unknown or unsupported primitive '%.*s'", (int)name_len,
                 (const char *)name);
        return corrupt(p, why);
    }
    uint32_t params_len = wf__reader_u32(&p->r);
    const unsigned char *params = wf__reader_take(&p->r, params_len);
    if (!params)
        return corrupt(p, "parameters run past the end");
    if (!wf__export_params_read(prim, params, params_len, &n->params))
        return wrap_error(p, "parameters");
    n->prim = prim; /* owns params from here: freed by wf__tape_clear */
    uint32_t ninputs;
    if (!read_count(p, 5, &ninputs, "operand"))
        return false;
    n->inputs = wf__malloc(((size_t)ninputs + 1) * sizeof *n->inputs);
    if (!n->inputs) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "wf_import_function: out of memory");
        return false;
    }
    for (uint32_t k = 0; k < ninputs; k++) {
        if (!read_ref(p, t, index, &n->inputs[k]))
            return false;
        n->ninputs = (int)k + 1;
    }
    read_description out;
    if (!read_desc(p, &out))
        return false;
    n->dtype = out.dtype;
    n->ndim = out.ndim;
    wf__shape_copy(n->shape, out.shape, out.ndim);
    return type_check(p, tr, n);
}

static bool read_trace_body(parser *p, imported_trace *tr)
{
    uint32_t nnew;
    if (!read_count(p, 10, &nnew, "constant"))
        return false;
    for (uint32_t i = 0; i < nnew; i++)
        if (!read_constant(p))
            return false;
    unsigned shapeless = wf__reader_u8(&p->r);
    if (p->r.failed || shapeless > 1)
        return corrupt(p, "bad shapeless flag");
    tr->shapeless = shapeless != 0;
    if (!read_string(p, &tr->tag, "a trace's tag"))
        return false;
    wf_tape *t = &tr->tape;
    uint32_t ninputs, nconsts, nnodes, noutputs;
    if (!read_count(p, 2, &ninputs, "input"))
        return false;
    tr->inputs = wf__calloc((size_t)ninputs + 1, sizeof *tr->inputs);
    if (!tr->inputs) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "wf_import_function: out of memory");
        return false;
    }
    for (uint32_t i = 0; i < ninputs; i++) {
        read_description d;
        if (!read_desc(p, &d))
            return false;
        imported_input *in = &tr->inputs[i];
        *in = (imported_input){d.dtype, d.ndim, NULL};
        t->ninputs = (int)i + 1; /* freed from here on */
        if (d.ndim && !(in->shape = wf__malloc((size_t)d.ndim * sizeof *in->shape))) {
            wf__error(WF_ERR_OUT_OF_MEMORY, "wf_import_function: out of memory");
            return false;
        }
        wf__shape_copy(in->shape, d.shape, d.ndim);
    }
    if (!read_count(p, 4, &nconsts, "constant reference"))
        return false;
    t->consts = wf__calloc((size_t)nconsts + 1, sizeof *t->consts);
    if (!t->consts) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "wf_import_function: out of memory");
        return false;
    }
    for (uint32_t i = 0; i < nconsts; i++) {
        uint32_t index = wf__reader_u32(&p->r);
        if (p->r.failed || index >= p->imp->npool)
            return corrupt(p, "a constant reference is out of range");
        t->consts[t->nconsts++] = wf__array_incref(p->imp->pool[index]);
    }
    if (!read_count(p, 16, &nnodes, "node"))
        return false;
    t->nodes = wf__calloc((size_t)nnodes + 1, sizeof *t->nodes);
    if (!t->nodes) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "wf_import_function: out of memory");
        return false;
    }
    for (uint32_t i = 0; i < nnodes; i++) {
        t->nnodes = (int)i + 1; /* cleared by wf__tape_clear even if half read */
        if (!read_node(p, tr, (int)i))
            return false;
    }
    if (!read_count(p, 5, &noutputs, "output"))
        return false;
    t->outputs = wf__calloc((size_t)noutputs + 1, sizeof *t->outputs);
    if (!t->outputs) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "wf_import_function: out of memory");
        return false;
    }
    for (uint32_t i = 0; i < noutputs; i++) {
        if (!read_ref(p, t, t->nnodes, &t->outputs[i]))
            return false;
        t->noutputs = (int)i + 1;
    }
    if (noutputs > WF_FN_MAX_OUTPUTS)
        return corrupt(p, "more outputs than a function may return");
    return true;
}

static bool read_trace(parser *p, size_t *traces_capacity)
{
    wf_imported *imp = p->imp;
    uint64_t length = wf__reader_u64(&p->r);
    if (p->r.failed || length > wf__reader_left(&p->r))
        return corrupt(p, "a record runs past the end");
    if (imp->ntraces == *traces_capacity) {
        size_t grown = *traces_capacity ? *traces_capacity * 2 : 4;
        imported_trace *traces = wf__realloc(imp->traces, grown * sizeof *traces);
        if (!traces) {
            wf__error(WF_ERR_OUT_OF_MEMORY, "wf_import_function: out of memory");
            return false;
        }
        imp->traces = traces;
        *traces_capacity = grown;
    }
    imported_trace *tr = &imp->traces[imp->ntraces++];
    memset(tr, 0, sizeof *tr);
    /* The body is read on its own bounds: it must use exactly its length. */
    parser body = {{p->r.data + p->r.pos, (size_t)length, 0, false}, p->name, imp,
                   p->pool_capacity};
    bool ok = read_trace_body(&body, tr);
    p->pool_capacity = body.pool_capacity;
    if (ok && body.r.pos != body.r.size)
        ok = corrupt(p, "a record has bytes left over");
    p->r.pos += (size_t)length;
    return ok;
}

static bool parse(parser *p)
{
    const unsigned char *magic = wf__reader_take(&p->r, WF_EXPORT_MAGIC_BYTES);
    if (!magic || memcmp(magic, WF_EXPORT_MAGIC, WF_EXPORT_MAGIC_BYTES) != 0)
        return corrupt(p, "no weft function header");
    uint32_t version = wf__reader_u32(&p->r);
    if (p->r.failed)
        return corrupt(p, "truncated header");
    if (version != WF_EXPORT_VERSION) {
        char why[96];
        snprintf(why, sizeof why, "format version %u, this weft reads version %u", version,
                 WF_EXPORT_VERSION);
        return corrupt(p, why);
    }
    if (!read_string(p, &p->imp->metadata, "the metadata"))
        return false;
    size_t traces_capacity = 0;
    for (;;) {
        uint32_t tag = wf__reader_u32(&p->r);
        if (p->r.failed)
            return corrupt(p, "truncated: no end record");
        if (tag == WF_EXPORT_RECORD_END)
            break;
        if (tag != WF_EXPORT_RECORD_TRACE)
            return corrupt(p, "unknown record");
        if (!read_trace(p, &traces_capacity))
            return false;
    }
    if (wf__reader_left(&p->r) != 0)
        return corrupt(p, "bytes after the end record");
    return true;
}

static wf_imported *import_parse(const void *data, size_t size, const char *name)
{
    wf_imported *imp = wf__calloc(1, sizeof *imp);
    if (!imp) {
        wf__error(WF_ERR_OUT_OF_MEMORY, "wf_import_function: out of memory");
        return NULL;
    }
    atomic_init(&imp->refcount, 1);
    parser p = {{data, size, 0, false}, name, imp, 0};
    if (!parse(&p)) {
        wf_error_state saved;
        wf__error_save(&saved);
        imported_free(imp);
        wf__error_restore(&saved);
        return NULL;
    }
    return imp;
}

/* ------------------------------------------------------------ public API */

wf_imported *wf_import_function_from_memory(const void *data, size_t size)
{
    if (!data && size) {
        wf__error(WF_ERR_NULL_ARGUMENT, "wf_import_function_from_memory: data is NULL");
        return NULL;
    }
    return import_parse(data ? data : "", size, "memory");
}

static unsigned char *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        wf__error(WF_ERR_IO, "wf_import_function: cannot open '%s'", path);
        return NULL;
    }
    unsigned char *data = NULL;
    size_t len = 0, cap = 0;
    bool failed = false;
    for (;;) {
        if (len == cap) {
            size_t grown = cap ? cap * 2 : 1 << 16;
            unsigned char *bigger = wf__realloc(data, grown);
            if (!bigger) {
                failed = true;
                wf__error(WF_ERR_OUT_OF_MEMORY, "wf_import_function: out of memory");
                break;
            }
            data = bigger;
            cap = grown;
        }
        size_t got = fread(data + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    if (!failed && ferror(f)) {
        failed = true;
        wf__error(WF_ERR_IO, "wf_import_function: reading '%s' failed", path);
    }
    fclose(f);
    if (failed) {
        free(data);
        return NULL;
    }
    *size = len;
    return data;
}

wf_imported *wf_import_function(const char *path)
{
    if (!path) {
        wf__error(WF_ERR_NULL_ARGUMENT, "wf_import_function: path is NULL");
        return NULL;
    }
    size_t size = 0;
    unsigned char *data = read_file(path, &size);
    if (!data)
        return NULL;
    wf_imported *imp = import_parse(data, size, path);
    free(data);
    return imp;
}

size_t wf_imported_trace_count(const wf_imported *imp) { return imp ? imp->ntraces : 0; }

const char *wf_imported_trace_tag(const wf_imported *imp, size_t i)
{
    return imp && i < imp->ntraces ? imp->traces[i].tag : NULL;
}

size_t wf_imported_trace_inputs(const wf_imported *imp, size_t i)
{
    return imp && i < imp->ntraces ? (size_t)imp->traces[i].tape.ninputs : 0;
}

wf_status wf_imported_trace_input(const wf_imported *imp, size_t i, size_t k, wf_dtype *dtype,
                                  int *ndim, const int64_t **shape)
{
    if (!imp || !dtype || !ndim || !shape)
        return wf__error(WF_ERR_NULL_ARGUMENT, "wf_imported_trace_input: an argument is NULL");
    if (i >= imp->ntraces || k >= (size_t)imp->traces[i].tape.ninputs)
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "wf_imported_trace_input: no input %zu of trace %zu", k, i);
    const imported_input *in = &imp->traces[i].inputs[k];
    *dtype = in->dtype;
    *ndim = in->ndim;
    *shape = in->shape;
    return WF_OK;
}

bool wf_imported_trace_shapeless(const wf_imported *imp, size_t i)
{
    return imp && i < imp->ntraces && imp->traces[i].shapeless;
}

const char *wf_imported_metadata(const wf_imported *imp) { return imp ? imp->metadata : NULL; }

static bool trace_matches(const imported_trace *tr, const char *tag, wf_array *const *inputs,
                          size_t ninputs)
{
    if (strcmp(tr->tag, tag ? tag : "") != 0 || (size_t)tr->tape.ninputs != ninputs)
        return false;
    for (size_t i = 0; i < ninputs; i++) {
        const imported_input *want = &tr->inputs[i];
        if (inputs[i]->dtype != want->dtype || inputs[i]->ndim != want->ndim)
            return false;
        if (!tr->shapeless &&
            !wf__shape_equal(inputs[i]->shape, inputs[i]->ndim, want->shape, want->ndim))
            return false;
    }
    return true;
}

static wf_status no_trace_error(const wf_imported *imp, const char *tag, wf_array *const *inputs,
                                size_t ninputs)
{
    char given[512];
    size_t used = 0;
    given[0] = '\0';
    for (size_t i = 0; i < ninputs && used < sizeof given - 64; i++) {
        char shape[128];
        used += (size_t)snprintf(given + used, sizeof given - used, "%s%s %s", i ? ", " : "",
                                 wf_dtype_name(inputs[i]->dtype),
                                 wf__shape_str(inputs[i]->shape, inputs[i]->ndim, shape,
                                               sizeof shape));
    }
    return wf__error(WF_ERR_INVALID_ARGUMENT,
                     "imported function: no trace for tag '%s' and inputs (%s) among its %zu "
                     "traces",
                     tag ? tag : "", given, imp->ntraces);
}

wf_status wf_imported_call(wf_imported *imp, const char *tag, wf_array *const *inputs,
                           size_t ninputs, wf_array **outputs, size_t *noutputs)
{
    if (!imp || !outputs || !noutputs || (!inputs && ninputs))
        return wf__error(WF_ERR_NULL_ARGUMENT, "wf_imported_call: a required argument is NULL");
    for (size_t i = 0; i < ninputs; i++)
        if (!wf__array_check(inputs[i], "wf_imported_call", "an input"))
            return wf_last_error();
    const imported_trace *tr = NULL;
    for (size_t i = 0; i < imp->ntraces && !tr; i++)
        if (trace_matches(&imp->traces[i], tag, inputs, ninputs))
            tr = &imp->traces[i];
    if (!tr)
        return no_trace_error(imp, tag, inputs, ninputs);
    if ((size_t)tr->tape.noutputs > *noutputs)
        return wf__error(WF_ERR_INVALID_ARGUMENT,
                         "wf_imported_call: the function returns %d outputs, room for %zu",
                         tr->tape.noutputs, *noutputs);
    wf_status status = wf__tape_replay(&tr->tape, inputs, outputs);
    if (status != WF_OK)
        return status;
    for (int i = 0; i < tr->tape.noutputs; i++) {
        if (!wf__array_publish(outputs[i])) {
            status = wf_last_error();
            for (int j = i + 1; j < tr->tape.noutputs; j++)
                wf__array_release(outputs[j]);
            for (int j = 0; j < i; j++)
                wf_release(outputs[j]);
            return status;
        }
    }
    *noutputs = (size_t)tr->tape.noutputs;
    return WF_OK;
}

/* ------------------------------------------------------------ as a wf_fn */

typedef struct imported_fn {
    wf_imported *imp; /* owned reference */
    char *tag;
} imported_fn;

static wf_status imported_fn_call(void *payload, wf_array *const *inputs, size_t ninputs,
                                  wf_array **outputs, size_t *noutputs)
{
    imported_fn *f = payload;
    return wf_imported_call(f->imp, f->tag, inputs, ninputs, outputs, noutputs);
}

static void imported_fn_free(void *payload)
{
    imported_fn *f = payload;
    wf_imported_release(f->imp);
    free(f->tag);
    free(f);
}

wf_fn *wf_imported_fn(wf_imported *imp, const char *tag)
{
    if (!imp) {
        wf__error(WF_ERR_NULL_ARGUMENT, "wf_imported_fn: imported is NULL");
        return NULL;
    }
    imported_fn *f = wf__calloc(1, sizeof *f);
    char *tag_copy = wf__strdup(tag ? tag : "");
    if (!f || !tag_copy) {
        free(f);
        free(tag_copy);
        wf__error(WF_ERR_OUT_OF_MEMORY, "wf_imported_fn: out of memory");
        return NULL;
    }
    f->imp = wf_imported_retain(imp);
    f->tag = tag_copy;
    return wf_fn_new(imported_fn_call, f, imported_fn_free);
}
