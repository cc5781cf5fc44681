/*
 * libFuzzer target: the .npz reader (wf_nn_load_npz without the file) on
 * hostile bytes: the zip directory, local headers, stored and deflated
 * members (zlib), CRCs and the .npy inside each. A result must be whole; a
 * failure must carry a status and a message; nothing may be left alive.
 * See fuzz/loader_checks.h.
 */
#define WEFT_FUZZ_NAME "fuzz_npz"
#include "loader_checks.h"
#include "nn/loaders.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const int64_t live = wf__arrays_live();
    wf_clear_error();
    wf_nn_mapping *m = wf__nn_mapping_borrow(data, size);
    if (!m)
        loader_fail("no mapping");
    wf_nn_params *params = wf__nn_npz_parse(m, "fuzz input");
    wf__nn_mapping_release(m);
    if (params)
        loader_check_params(params);
    else
        loader_check_failure();
    loader_check_nothing_left(live);
    return 0;
}
