/*
 * libFuzzer target: the .npy reader (wf_nn_load_npy without the file) on
 * hostile bytes. The input is a whole file, parsed where it lies (the
 * reader makes arrays over it, as over a mapped file). A result must be
 * whole (every byte read, views evaluated); a failure must carry a status
 * and a message; nothing may be left alive. See fuzz/loader_checks.h.
 */
#define WEFT_FUZZ_NAME "fuzz_npy"
#include "loader_checks.h"
#include "nn/loaders.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const int64_t live = wf__arrays_live();
    wf_clear_error();
    wf_nn_mapping *m = wf__nn_mapping_borrow(data, size);
    if (!m)
        loader_fail("no mapping");
    wf_array *a = wf__nn_npy_parse(m, "fuzz input");
    wf__nn_mapping_release(m);
    if (a) {
        if (wf_array_ndim(a) < 0 || wf_array_ndim(a) > WF_MAX_NDIM)
            loader_fail("rank out of range");
        loader_touch(a);
        wf_release(a);
    } else {
        loader_check_failure();
    }
    loader_check_nothing_left(live);
    return 0;
}
