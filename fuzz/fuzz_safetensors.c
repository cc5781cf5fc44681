/*
 * libFuzzer target: the safetensors reader on hostile bytes. The input is a
 * whole file. The reader must return a list whose arrays match the header
 * (and "__metadata__"'s strings as one-string entries with unique keys),
 * or NULL with a valid status and a message; it must not read outside the
 * input (ASan sees the exact buffer), leak (the live-array count returns to
 * its start; LeakSanitizer at exit) or trip UBSan. See docs/FAULTS.md.
 */
#define WEFT_FUZZ_NAME "fuzz_safetensors"
#include "loader_checks.h"
#include "nn/safetensors.h"

#include <string.h>

/* Every entry one string, keys unique. */
static void check_metadata(const wf_nn_gguf_meta *meta)
{
    const size_t n = wf_nn_gguf_meta_count(meta);
    for (size_t i = 0; i < n; i++) {
        const char *const *value;
        if (wf_nn_gguf_meta_kind(meta, i) != WF_GGUF_STRING ||
            wf_nn_gguf_meta_strings(meta, i, &value) != 1 || !value[0])
            loader_fail("a metadata entry is not one string");
        for (size_t j = 0; j < i; j++)
            if (strcmp(wf_nn_gguf_meta_key(meta, i), wf_nn_gguf_meta_key(meta, j)) == 0)
                loader_fail("a metadata key appears twice");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const int64_t live = wf__arrays_live();
    wf_clear_error();
    wf_nn_gguf_meta *meta = wf_nn_gguf_meta_new();
    if (!meta)
        loader_fail("no metadata list");
    wf_nn_params *params = wf__nn_safetensors_parse(data, size, "fuzz input", meta);
    if (params) {
        check_metadata(meta);
        loader_check_params(params);
    } else {
        loader_check_failure();
    }
    wf_nn_gguf_meta_release(meta);
    loader_check_nothing_left(live);
    return 0;
}
