/*
 * libFuzzer target: the reader of exported functions (wf_import_function)
 * on hostile bytes. The input is a whole file. The reader must return an
 * imported function whose traces all have a tag, or NULL with a valid
 * status and a message; it must not read outside the input (ASan sees the
 * exact buffer), leak (the live-array count returns to its start;
 * LeakSanitizer at exit) or trip UBSan. Imported traces are not run here
 * (a valid file may ask for any amount of memory); tests/unit/test_export.c
 * runs the ones its byte flips leave loadable. See docs/FAULTS.md.
 */
#define WEFT_FUZZ_NAME "fuzz_export"
#include "loader_checks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const int64_t live = wf__arrays_live();
    wf_clear_error();
    wf_imported *imp = wf_import_function_from_memory(data, size);
    if (imp) {
        for (size_t i = 0; i < wf_imported_trace_count(imp); i++)
            if (!wf_imported_trace_tag(imp, i))
                loader_fail("a trace without a tag");
        if (!wf_imported_metadata(imp))
            loader_fail("no metadata string");
        wf_imported_release(imp);
    } else {
        loader_check_failure();
    }
    loader_check_nothing_left(live);
    return 0;
}
