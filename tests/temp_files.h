/*
 * Files in a per-test temporary folder, shared by the tests that write and
 * read files (test_files, test_export): the folder's path (`dir`, set by
 * the test's main), whole-file reads and writes, and a bitwise comparison
 * of two arrays (dtype, shape and bytes).
 */
#ifndef WEFT_TESTS_TEMP_FILES_H
#define WEFT_TESTS_TEMP_FILES_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft.h"

static char dir[256];

/* dir/name, in a static buffer (one path at a time). */
static inline const char *tmp_path(const char *name)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

/* The whole file (caller frees), its size in *size; NULL if unreadable. */
static inline uint8_t *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    *size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *d = malloc(*size + 1);
    if (d && fread(d, 1, *size, f) != *size) {
        free(d);
        d = NULL;
    }
    fclose(f);
    return d;
}

static inline void write_all(const char *path, const void *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(d, 1, n, f);
        fclose(f);
    }
}

/* Same dtype, shape and bytes. */
static inline bool same_bits(wf_array *a, wf_array *b)
{
    if (!a || !b || wf_array_dtype(a) != wf_array_dtype(b) || wf_array_ndim(a) != wf_array_ndim(b))
        return false;
    for (int d = 0; d < wf_array_ndim(a); d++)
        if (wf_array_shape(a)[d] != wf_array_shape(b)[d])
            return false;
    const size_t bytes = (size_t)wf_array_size(a) * wf_dtype_size(wf_array_dtype(a));
    uint8_t *x = malloc(bytes + 1), *y = malloc(bytes + 1);
    const bool same = wf_array_copy_to(a, x, bytes) == WF_OK &&
                      wf_array_copy_to(b, y, bytes) == WF_OK && memcmp(x, y, bytes) == 0;
    free(x);
    free(y);
    return same;
}

#endif
