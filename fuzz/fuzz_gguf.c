/*
 * libFuzzer target: the GGUF reader (wf_nn_load_gguf without the file) on
 * hostile bytes: header counts, metadata of every value type (strings,
 * arrays, general.alignment), tensor infos, offsets, and the Q4_0 / Q4_1 /
 * Q8_0 conversions. The tensors and every metadata value must be whole; a
 * failure must carry a status and a message (and leave *metadata NULL);
 * nothing may be left alive. See fuzz/loader_checks.h.
 */
#include <string.h>

#define WEFT_FUZZ_NAME "fuzz_gguf"
#include "loader_checks.h"
#include "nn/loaders.h"

static void check_metadata(wf_nn_gguf_meta *meta)
{
    for (size_t i = 0; i < wf_nn_gguf_meta_count(meta); i++) {
        const char *key = wf_nn_gguf_meta_key(meta, i);
        if (!key)
            loader_fail("a metadata entry without a key");
        const char *const *strings = NULL;
        const size_t n = wf_nn_gguf_meta_strings(meta, i, &strings);
        switch (wf_nn_gguf_meta_kind(meta, i)) {
        case WF_GGUF_NUMBERS:
            if (n != 0 || !wf_nn_gguf_meta_array(meta, i))
                loader_fail("a number entry without its array");
            if (wf_array_ndim(wf_nn_gguf_meta_array(meta, i)) > 1)
                loader_fail("a metadata array of rank > 1");
            loader_touch(wf_nn_gguf_meta_array(meta, i));
            break;
        case WF_GGUF_STRING:
        case WF_GGUF_STRINGS:
            if (wf_nn_gguf_meta_kind(meta, i) == WF_GGUF_STRING && n != 1)
                loader_fail("a string entry without exactly one string");
            for (size_t j = 0; j < n; j++) {
                if (!strings[j])
                    loader_fail("a NULL string");
                (void)strlen(strings[j]); /* ASan: terminated inside its block */
            }
            break;
        default:
            loader_fail("an unknown metadata kind");
        }
    }
    wf_nn_gguf_meta_release(meta);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const int64_t live = wf__arrays_live();
    wf_clear_error();
    wf_nn_mapping *m = wf__nn_mapping_borrow(data, size);
    if (!m)
        loader_fail("no mapping");
    wf_nn_gguf_meta *meta = (wf_nn_gguf_meta *)&meta; /* must be overwritten */
    wf_nn_params *params = wf__nn_gguf_parse(m, "fuzz input", &meta);
    wf__nn_mapping_release(m);
    if (params) {
        loader_check_params(params);
        check_metadata(meta);
    } else {
        loader_check_failure();
        if (meta)
            loader_fail("metadata left on failure");
    }
    loader_check_nothing_left(live);
    return 0;
}
