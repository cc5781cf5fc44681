/*
 * libFuzzer target: the reader of exported functions (wf_import_function)
 * on hostile bytes. The input is a whole file. The reader must return an
 * imported function whose traces all have a tag, or NULL with a valid
 * status and a message; it must not read outside the input (ASan sees the
 * exact buffer), leak (the live-array count returns to its start;
 * LeakSanitizer at exit) or trip UBSan. Every trace that loads is then
 * called on zeros of its recorded input shapes (when they are small) and
 * evaluated under a memory limit, so parameters that pass the reader's
 * checks but would crash a kernel are found too; the call and its
 * evaluation may fail, with a valid status. See docs/FAULTS.md.
 */
#define WEFT_FUZZ_NAME "fuzz_export"
#include "loader_checks.h"

enum { MAX_INPUT_ELEMENTS = 4096, MEMORY_LIMIT = 64 << 20 };

/* Zeros shaped like input k of trace i, or NULL when it is large. */
static wf_array *zeros_for(const wf_imported *imp, size_t i, size_t k)
{
    wf_dtype dtype;
    int ndim;
    const int64_t *shape;
    if (wf_imported_trace_input(imp, i, k, &dtype, &ndim, &shape) != WF_OK)
        loader_fail("a listed input cannot be described");
    int64_t size = 1;
    for (int d = 0; d < ndim; d++)
        size = shape[d] > MAX_INPUT_ELEMENTS ? MAX_INPUT_ELEMENTS + 1 : size * shape[d];
    return size <= MAX_INPUT_ELEMENTS ? wf_zeros(shape, ndim, dtype) : NULL;
}

static void run_trace(wf_imported *imp, size_t i)
{
    const size_t n = wf_imported_trace_inputs(imp, i);
    wf_array **inputs = calloc(n + 1, sizeof *inputs);
    bool all = inputs != NULL;
    for (size_t k = 0; all && k < n; k++)
        all = (inputs[k] = zeros_for(imp, i, k)) != NULL;
    wf_array *outputs[WF_FN_MAX_OUTPUTS];
    size_t noutputs = WF_FN_MAX_OUTPUTS;
    if (all && wf_imported_call(imp, wf_imported_trace_tag(imp, i), inputs, n, outputs,
                                &noutputs) == WF_OK) {
        if (wf_eval(outputs, noutputs) != WF_OK)
            loader_check_failure();
        for (size_t o = 0; o < noutputs; o++)
            wf_release(outputs[o]);
    }
    for (size_t k = 0; inputs && k < n; k++)
        wf_release(inputs[k]);
    free(inputs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool limited;
    if (!limited) {
        wf_set_memory_limit(MEMORY_LIMIT);
        limited = true;
    }
    const int64_t live = wf__arrays_live();
    wf_clear_error();
    wf_imported *imp = wf_import_function_from_memory(data, size);
    if (imp) {
        for (size_t i = 0; i < wf_imported_trace_count(imp); i++)
            if (!wf_imported_trace_tag(imp, i))
                loader_fail("a trace without a tag");
        for (size_t i = 0; i < wf_imported_trace_count(imp); i++)
            run_trace(imp, i);
        if (!wf_imported_metadata(imp))
            loader_fail("no metadata string");
        wf_imported_release(imp);
    } else {
        loader_check_failure();
    }
    loader_check_nothing_left(live);
    return 0;
}
