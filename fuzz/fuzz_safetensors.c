/*
 * libFuzzer target: the safetensors reader on hostile bytes. The input is a
 * whole file. The reader must return a list whose arrays match the header,
 * or NULL with a valid status and a message; it must not read outside the
 * input (ASan sees the exact buffer), leak (the live-array count returns to
 * its start; LeakSanitizer at exit) or trip UBSan. See docs/FAULTS.md.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/array.h"
#include "nn/safetensors.h"
#include "weft.h"
#include "weft_nn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *why)
{
    printf("fuzz_safetensors: %s (status %s, message \"%s\")\n", why,
           wf_status_name(wf_last_error()), wf_last_error_message());
    fflush(stdout);
    abort();
}

/* Reads every byte of an array (ASan checks its buffer is whole). */
static void touch(wf_array *a)
{
    const void *p = NULL;
    if (wf_array_data(a, &p) != WF_OK)
        fail("a loaded array cannot be read");
    size_t n = wf_array_nbytes(a);
    unsigned char acc = 0;
    for (size_t i = 0; i < n; i++)
        acc ^= ((const unsigned char *)p)[i];
    (void)acc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const int64_t live = wf__arrays_live();
    wf_clear_error();
    wf_nn_params *params = wf__nn_safetensors_parse(data, size, "fuzz input");
    if (!params) {
        wf_status s = wf_last_error();
        if (s >= WF_OK || s <= WF_ERR_INTERNAL || !wf_last_error_message()[0])
            fail("NULL without a valid status and message");
    } else {
        for (size_t i = 0; i < wf_nn_params_count(params); i++) {
            const char *name = wf_nn_params_name(params, i);
            wf_array *a = wf_nn_params_get(params, i);
            if (!name || !name[0] || !a)
                fail("an entry without a name or an array");
            if (wf_nn_params_find(params, name) != (long)i)
                fail("a duplicate name");
            touch(a);
        }
        wf_nn_params_release(params);
    }
    wf_clear_error();
    if (wf__arrays_live() != live)
        fail("arrays left alive");
    return 0;
}
