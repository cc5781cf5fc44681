/*
 * repro_id_reuse: thousands of closures are compiled, called and released
 * one after another; their payloads land at reused addresses (same size,
 * freed just before) and every call has the same input signature. A cache
 * keyed by an address would run another closure's trace; ids never repeat,
 * so each call returns its own constant's result.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "repro_common.h"
#include "repro_compile_common.h"

enum { CLOSURES = 3000 };

#ifdef __SANITIZE_ADDRESS__
/* ASan's quarantine would keep freed payloads from being reused: turn it off
 * here, since address reuse is the scenario. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "quarantine_size_mb=0"; }
#endif

static int reused, wrong;
static uintptr_t addresses[CLOSURES];

static int by_address(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

static void *run(void *arg)
{
    (void)arg;
    for (int i = 0; i < CLOSURES; i++) {
        float k = (float)(i % 101) + 0.5f;
        wf_fn *f = compiled_scaled(k, NULL);
        addresses[i] = (uintptr_t)f;
        if (!call_and_check(f, 8, k, 0.0f))
            wrong++;
        wf_fn_release(f);
    }
    return NULL;
}

int main(void)
{
    if (!repro_run_with_deadline(run, NULL, 120)) {
        fprintf(stderr, "hung\n");
        return REPRO_FAIL;
    }
    qsort(addresses, CLOSURES, sizeof addresses[0], by_address);
    for (int i = 1; i < CLOSURES; i++)
        reused += addresses[i] == addresses[i - 1]; /* a handle at an earlier one's address */
    if (wrong) {
        fprintf(stderr, "%d of %d calls ran another closure's trace\n", wrong, CLOSURES);
        return REPRO_FAIL;
    }
    printf("repro_id_reuse: %d closures, %d at a reused address, all right\n", CLOSURES, reused);
    return reused > 0 ? REPRO_PASS : REPRO_NOT_REACHED;
}
