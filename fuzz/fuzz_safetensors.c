/*
 * libFuzzer target: the safetensors reader on hostile bytes. The input is a
 * whole file. The reader must return a list whose arrays match the header,
 * or NULL with a valid status and a message; it must not read outside the
 * input (ASan sees the exact buffer), leak (the live-array count returns to
 * its start; LeakSanitizer at exit) or trip UBSan. See docs/FAULTS.md.
 */
#define WEFT_FUZZ_NAME "fuzz_safetensors"
#include "loader_checks.h"
#include "nn/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const int64_t live = wf__arrays_live();
    wf_clear_error();
    wf_nn_params *params = wf__nn_safetensors_parse(data, size, "fuzz input");
    if (params)
        loader_check_params(params);
    else
        loader_check_failure();
    loader_check_nothing_left(live);
    return 0;
}
