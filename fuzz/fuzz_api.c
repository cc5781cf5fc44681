/*
 * libFuzzer target: the input is a small program of weft calls. It drives
 * tests/unit/test_fuzz_api.c with every decision read from the input bytes
 * (two bytes a decision): which entry point, the shapes, dtypes, axes,
 * views and wild arguments, eval / async eval, streams, scopes, custom
 * kernels, grad / vjp / jvp / vmap / checkpoint, compile and replay, and the
 * releases. Every call must succeed or fail with a valid status and a
 * message; at the end of each input nothing may be left alive (arrays,
 * streams, payloads) and weft must still compute. A failed check aborts, so
 * the fuzzer keeps the input. See docs/FAULTS.md.
 */
#define WEFT_FUZZ_TARGET 1
#include "unit/test_fuzz_api.c"

enum { MAX_STEPS = 256 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fuzz_program_from_bytes(data, size, MAX_STEPS)) {
        fflush(stdout);
        abort();
    }
    return 0;
}
