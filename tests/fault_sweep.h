/*
 * fault_sweep.h - fails every fallible operation of a computation in turn
 * (util/fault.h): N = 1, 2, ... until a run no longer reaches the fault.
 * Each run must either fail with a status and a message, or give the
 * values of the run without a fault; either way no array is left alive
 * once the scope each run has is closed. For the error paths of transforms and
 * ops that plain bad arguments cannot reach. Header-only; tests include
 * src/ for the fault hook.
 */
#ifndef WEFT_TESTS_FAULT_SWEEP_H
#define WEFT_TESTS_FAULT_SWEEP_H

#include <math.h>
#include <stdlib.h>

#include "harness.h"
#include "settle.h"
#include "util/fault.h"

enum { FS_MAX_OUT = 4 };

/* Builds up to FS_MAX_OUT outputs (new references, inside the run's scope;
 * NULL entries allowed on success only where `want` has NULL too). */
typedef wf_status (*fs_compute)(void *ctx, wf_array **outs);

/* Whether a and b (both evaluated) hold the same values within rel. */
static inline bool fs_same(wf_array *a, wf_array *b, double rel)
{
    wf_array *fa = wf_astype(a, WF_DTYPE_F64), *fb = wf_astype(b, WF_DTYPE_F64);
    const int64_t n = wf_array_size(a);
    bool same = wf_array_size(b) == n;
    double *va = malloc(((size_t)n + 1) * sizeof *va), *vb = malloc(((size_t)n + 1) * sizeof *vb);
    same = same && wf_array_copy_to(fa, va, (size_t)n * 8) == WF_OK &&
           wf_array_copy_to(fb, vb, (size_t)n * 8) == WF_OK;
    for (int64_t i = 0; same && i < n; i++)
        same = fabs(va[i] - vb[i]) <= rel * (1.0 + fabs(vb[i]));
    free(va);
    free(vb);
    wf_release(fa);
    wf_release(fb);
    return same;
}

/* Sweeps `compute` against its fault-free outputs `want` (nout of them,
 * evaluated here first); returns the number of injected failures. The
 * computation's own inputs must be evaluated: a failed kernel stays the
 * failure of its node. */
static inline int fault_sweep(const char *name, fs_compute compute, void *ctx,
                              wf_array *const *want, int nout)
{
    for (int k = 0; k < nout; k++)
        if (want[k] && !CHECK_OK(wf_eval((wf_array **)&want[k], 1)))
            return 0;
    const int64_t live = live_arrays();
    int failures = 0;
    for (int64_t nth = 1;; nth++) {
        wf_array *outs[FS_MAX_OUT] = {NULL};
        wf_scope_begin(); /* the computation's temporaries, and its outputs */
        wf__fault_arm(nth);
        wf_status st = compute(ctx, outs);
        for (int k = 0; st == WF_OK && k < nout; k++)
            if (outs[k])
                st = wf_eval(&outs[k], 1);
        const bool fired = wf__fault_fired();
        wf__fault_arm(0);
        if (st != WF_OK) {
            failures++;
            if (!CHECK(fired && wf_last_error_message()[0] != 0))
                printf("    %s, operation %lld: %s (injected: %d) message \"%s\"\n", name,
                       (long long)nth, wf_status_name(st), fired, wf_last_error_message());
            wf_clear_error();
        } else {
            for (int k = 0; k < nout; k++)
                if (!CHECK((outs[k] == NULL) == (want[k] == NULL) &&
                           (!outs[k] || fs_same(outs[k], want[k], 1e-12))))
                    printf("    %s, operation %lld: output %d differs\n", name, (long long)nth,
                           k);
        }
        wf_scope_end();
        if (!CHECK_EQ_INT(live_arrays(), live))
            printf("    %s, operation %lld: %lld arrays alive, %lld before\n", name,
                   (long long)nth, (long long)live_arrays(), (long long)live);
        if (!fired)
            break;
    }
    return failures;
}

#endif
