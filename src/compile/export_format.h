/*
 * The file format of exported functions (wf_export_function,
 * wf_import_function). Internal; shared by export.c (writer), import.c
 * (reader) and export_params.c (primitive parameters).
 *
 * Every number is little-endian. A file is
 *
 *   magic "WEFTFN\r\n" (8 bytes), u32 version (WF_EXPORT_VERSION),
 *   u32 metadata length, metadata bytes (no NUL),
 *   records, each u32 tag then u64 body length then the body:
 *     WF_EXPORT_RECORD_TRACE: one traced signature (below),
 *   and u32 WF_EXPORT_RECORD_END, after which nothing may follow.
 *
 * A trace body is
 *
 *   u32 count of new constants, each a description then u64 byte count
 *     then the bytes, appended to the file's constant pool (so a constant
 *     several traces share is written once);
 *   u8 shapeless; u32 tag length, tag bytes (the caller's signature tag);
 *   u32 ninputs, each a description;
 *   u32 nconsts, each u32 index into the pool;
 *   u32 nnodes, each: u16 name length, the primitive's name, u32 params
 *     length, the params (export_params.c), u32 ninputs, each a ref
 *     (u8 kind: 0 input, 1 constant, 2 earlier node; u32 index), and the
 *     traced output's description;
 *   u32 noutputs, each a ref.
 *
 * A description is u8 dtype, u8 ndim, ndim i64 dimensions.
 */
#ifndef WEFT_COMPILE_EXPORT_FORMAT_H
#define WEFT_COMPILE_EXPORT_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "core/array.h"

#define WF_EXPORT_MAGIC "WEFTFN\r\n"
#define WF_EXPORT_MAGIC_BYTES 8
#define WF_EXPORT_VERSION 1u
#define WF_EXPORT_RECORD_TRACE 0x45435254u /* "TRCE" */
#define WF_EXPORT_RECORD_END 0x21444e45u   /* "END!" */
/* Longest primitive name a file may hold. */
#define WF_EXPORT_MAX_NAME 64

/* A growable byte string the writer fills. */
typedef struct wf_bytes {
    unsigned char *data;
    size_t size, capacity;
    bool failed; /* an allocation failed: everything after is dropped */
} wf_bytes;

void wf__bytes_put(wf_bytes *b, const void *data, size_t n);
void wf__bytes_u8(wf_bytes *b, unsigned v);
void wf__bytes_u16(wf_bytes *b, unsigned v);
void wf__bytes_u32(wf_bytes *b, uint32_t v);
void wf__bytes_u64(wf_bytes *b, uint64_t v);
void wf__bytes_free(wf_bytes *b);

/* A bounded reader over untrusted bytes: every read checks what is left
 * and, past the end, sets `failed` and yields zeros. */
typedef struct wf_reader {
    const unsigned char *data;
    size_t size, pos;
    bool failed;
} wf_reader;

const unsigned char *wf__reader_take(wf_reader *r, size_t n); /* NULL past the end */
unsigned wf__reader_u8(wf_reader *r);
unsigned wf__reader_u16(wf_reader *r);
uint32_t wf__reader_u32(wf_reader *r);
uint64_t wf__reader_u64(wf_reader *r);
static inline size_t wf__reader_left(const wf_reader *r) { return r->size - r->pos; }

/* Whether `prim`'s nodes can be exported: its parameters are plain values
 * this format describes (export_params.c lists them) and it has one
 * output. Refused: user kernels and custom functions (they hold
 * callbacks), fused nodes (exports record the unfused tape), collectives
 * (they hold a group), multi-output primitives and their siblings. */
bool wf__export_prim_supported(const wf_prim_def *prim);
/* The supported primitive called `name` (n bytes, not NUL-terminated), or
 * NULL. */
const wf_prim_def *wf__export_prim_find(const char *name, size_t n);
/* Appends the encoding of `params` (prim supported). */
void wf__export_params_write(wf_bytes *b, const wf_prim_def *prim, const void *params);
/* Decodes `n` bytes into a zeroed params struct of prim->params_size bytes
 * at *out (malloc'd; NULL for primitives without params). False (error
 * recorded, WF_ERR_IO naming the primitive and field) for a wrong length
 * or a value out of range. */
bool wf__export_params_read(const wf_prim_def *prim, const unsigned char *bytes, size_t n,
                            void **out);

#endif
