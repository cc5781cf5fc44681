/* Read-only file mappings shared by the arrays made over them (mapped.h). */
#include "nn/mapped.h"
#include "util/fault.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static _Atomic int *refs_of(wf_nn_mapping *m) { return (_Atomic int *)&m->refs; }

wf_nn_mapping *wf__nn_map(const char *op, const char *path)
{
    if (!path) {
        wf_set_error(WF_ERR_NULL_ARGUMENT, "%s: path is NULL", op);
        return NULL;
    }
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        wf_set_error(WF_ERR_IO, "%s: cannot open '%s' (not a readable file)", op, path);
        return NULL;
    }
    wf_nn_mapping *m = wf__calloc(1, sizeof *m);
    void *p = NULL;
    if (m && st.st_size > 0) {
        p = wf__mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            free(m);
            m = NULL;
        }
    }
    close(fd);
    if (!m) {
        wf_set_error(WF_ERR_IO, "%s: cannot map '%s'", op, path);
        return NULL;
    }
    m->data = p;
    m->size = (size_t)st.st_size;
    m->mapped = p != NULL;
    atomic_init(refs_of(m), 1);
    return m;
}

wf_nn_mapping *wf__nn_mapping_borrow(const uint8_t *data, size_t size)
{
    wf_nn_mapping *m = wf__calloc(1, sizeof *m);
    if (!m) {
        wf_set_error(WF_ERR_OUT_OF_MEMORY, "load: out of memory");
        return NULL;
    }
    m->data = size ? data : NULL;
    m->size = size;
    atomic_init(refs_of(m), 1);
    return m;
}

void wf__nn_mapping_release(wf_nn_mapping *m)
{
    if (!m || atomic_fetch_sub(refs_of(m), 1) != 1)
        return;
    if (m->mapped)
        munmap((void *)m->data, m->size);
    free(m);
}

static void release_mapping(void *data, void *ctx)
{
    (void)data;
    wf__nn_mapping_release(ctx);
}

bool wf__nn_shape_bytes(const int64_t *shape, int ndim, size_t itemsize, size_t limit,
                        size_t *bytes)
{
    bool empty = false;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return false;
        empty = empty || shape[d] == 0;
    }
    if (empty) { /* no data, whatever the other dims say */
        *bytes = 0;
        return true;
    }
    size_t n = itemsize;
    for (int d = 0; d < ndim; d++) {
        if ((size_t)shape[d] > limit / n)
            return false;
        n *= (size_t)shape[d];
    }
    if (n > limit)
        return false;
    *bytes = n;
    return true;
}

wf_array *wf__nn_mapped_array(wf_nn_mapping *m, const uint8_t *p, const int64_t *shape, int ndim,
                              wf_dtype dtype)
{
    const size_t item = wf_dtype_size(dtype);
    if (dtype != WF_DTYPE_BOOL && ((uintptr_t)p % item) == 0 && p) {
        atomic_fetch_add(refs_of(m), 1);
        wf_array *a = wf_array_from_external((void *)p, shape, ndim, dtype, NULL, release_mapping, m);
        if (a)
            return a;
        atomic_fetch_sub(refs_of(m), 1); /* the deleter is not called on failure */
        return NULL;
    }
    return wf_array_from_data(p, shape, ndim, dtype);
}
