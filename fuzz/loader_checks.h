/*
 * What every file-loader fuzz target checks (fuzz_safetensors, fuzz_npy,
 * fuzz_npz, fuzz_gguf): a loaded array is whole (every byte of it is read,
 * so ASan sees a buffer too short or outside the input) and its byte count
 * matches its shape; a failure carries a valid status and a message; after
 * the input nothing the loader made is alive. A failed check aborts, so the
 * fuzzer keeps the input. See docs/FAULTS.md.
 */
#ifndef WEFT_FUZZ_LOADER_CHECKS_H
#define WEFT_FUZZ_LOADER_CHECKS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/array.h"
#include "weft.h"
#include "weft_nn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static inline void loader_fail(const char *why)
{
    printf("%s: %s (status %s, message \"%s\")\n", WEFT_FUZZ_NAME, why,
           wf_status_name(wf_last_error()), wf_last_error_message());
    fflush(stdout);
    abort();
}

/* Reads every byte of an array (evaluating a view first). */
static inline void loader_touch(wf_array *a)
{
    const void *p = NULL;
    if (wf_array_data(a, &p) != WF_OK)
        loader_fail("a loaded array cannot be read");
    const size_t n = wf_array_nbytes(a);
    if (n != (size_t)wf_array_size(a) * wf_dtype_size(wf_array_dtype(a)))
        loader_fail("an array's byte count does not match its shape");
    unsigned char acc = 0;
    for (size_t i = 0; i < n; i++)
        acc ^= ((const unsigned char *)p)[i];
    (void)acc;
}

/* A NULL result must come with an error status and a message
 * (WF_ERR_INTERNAL would be a broken invariant: a bug). */
static inline void loader_check_failure(void)
{
    const wf_status s = wf_last_error();
    if (s >= WF_OK || s < WF_ERR_DISTRIBUTED || s == WF_ERR_INTERNAL || !wf_last_error_message()[0])
        loader_fail("NULL without a valid status and message");
}

/* Every entry named, unique and whole; then released. */
static inline void loader_check_params(wf_nn_params *params)
{
    for (size_t i = 0; i < wf_nn_params_count(params); i++) {
        const char *name = wf_nn_params_name(params, i);
        wf_array *a = wf_nn_params_get(params, i);
        if (!name || !name[0] || !a)
            loader_fail("an entry without a name or an array");
        if (wf_nn_params_find(params, name) != (long)i)
            loader_fail("a duplicate name");
        loader_touch(a);
    }
    wf_nn_params_release(params);
}

static inline void loader_check_nothing_left(int64_t live_before)
{
    wf_clear_error();
    if (wf__arrays_live() != live_before)
        loader_fail("arrays left alive");
}

#endif
