/*
 * bench_donation: buffer donation (issue 11, item 4) on 8-op element-wise
 * chains over 16M floats, op by op (no compile): the best wall time and the
 * best process CPU time (all threads; steadier on a loaded machine) of
 * `repeats` evaluations (building the graph included) and the peak memory
 * above the input, with donation on and off side by side in one run.
 *
 *   build/release/bench_donation [repeats=5]
 *
 * Donation is switched here with an internal hook; for any other program
 * WEFT_DONATE=0 in the environment turns it off.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/array.h"
#include "bench_args.h"
#include "weft.h"

enum { N = 1 << 24 };

static double clock_seconds(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void step(wf_array **t, wf_array *x, wf_array *next)
{
    if (*t != x)
        wf_release(*t);
    *t = next;
}

/* Cheap ops: memory bound, where fewer fresh buffers matter most. */
static wf_array *cheap_chain(wf_array *x, wf_array *c)
{
    wf_array *t = x;
    step(&t, x, wf_multiply(t, c));
    step(&t, x, wf_add(t, c));
    step(&t, x, wf_negative(t));
    step(&t, x, wf_abs(t));
    step(&t, x, wf_subtract(t, c));
    step(&t, x, wf_maximum(t, c));
    step(&t, x, wf_multiply(t, t));
    step(&t, x, wf_sqrt(t));
    return t;
}

/* Transcendental ops: compute bound. */
static wf_array *costly_chain(wf_array *x, wf_array *c)
{
    wf_array *t = x;
    step(&t, x, wf_multiply(t, c));
    step(&t, x, wf_tanh(t));
    step(&t, x, wf_exp(t));
    step(&t, x, wf_sigmoid(t));
    step(&t, x, wf_add(t, c));
    step(&t, x, wf_sqrt(t));
    step(&t, x, wf_exp(t));
    step(&t, x, wf_negative(t));
    return t;
}

typedef wf_array *(*chain_fn)(wf_array *, wf_array *);

struct figure {
    double ms, cpu_ms;
    double peak_mb;
};

static struct figure measure(chain_fn chain, wf_array *x, wf_array *c, int repeats, bool donate)
{
    wf__donation_enable(donate);
    struct figure f = {1e30, 1e30, 0};
    for (int r = 0; r < repeats; r++) {
        wf_memory_stats before = wf_memory_stats_default(), after = wf_memory_stats_default();
        wf_reset_peak_memory();
        wf_memory_stats_get(&before);
        double start = clock_seconds(CLOCK_MONOTONIC);
        double cpu_start = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
        wf_array *y = chain(x, c);
        if (!y || wf_eval(&y, 1) != WF_OK) {
            fprintf(stderr, "bench_donation: %s\n", wf_last_error_message());
            exit(1);
        }
        double ms = 1e3 * (clock_seconds(CLOCK_MONOTONIC) - start);
        double cpu_ms = 1e3 * (clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu_start);
        wf_memory_stats_get(&after);
        wf_release(y);
        if (ms < f.ms)
            f.ms = ms;
        if (cpu_ms < f.cpu_ms)
            f.cpu_ms = cpu_ms;
        f.peak_mb = (double)(after.peak_bytes - before.active_bytes) / (1 << 20);
    }
    wf__donation_enable(true);
    return f;
}

int main(int argc, char **argv)
{
    int repeats = (int)bench_int_arg(argc, argv, 1, 5, 1, 1000000, "repeats");
    if (repeats < 1)
        repeats = 1;
    const int64_t shape[1] = {N};
    wf_array *x = wf_full(shape, 1, 0.25, WF_DTYPE_F32);
    wf_array *c = wf_scalar(0.5, WF_DTYPE_F32);
    if (!x || !c || wf_eval(&x, 1) != WF_OK) {
        fprintf(stderr, "bench_donation: %s\n", wf_last_error_message());
        return 1;
    }
    printf("8-op chains on %d float32 (%d MB per buffer), best of %d\n", N,
           (int)((size_t)N * 4 >> 20), repeats);
    printf("%-7s %10s %10s %6s %11s %11s %6s %9s %9s\n", "chain", "ms donate", "ms fresh",
           "ratio", "cpu donate", "cpu fresh", "ratio", "MB donate", "MB fresh");
    const chain_fn chains[2] = {cheap_chain, costly_chain};
    const char *const names[2] = {"cheap", "costly"};
    for (int i = 0; i < 2; i++) {
        /* Alternate so neither side always runs on a warm cache. */
        struct figure off = measure(chains[i], x, c, repeats, false);
        struct figure on = measure(chains[i], x, c, repeats, true);
        printf("%-7s %10.2f %10.2f %6.2f %11.2f %11.2f %6.2f %9.0f %9.0f\n", names[i], on.ms,
               off.ms, off.ms / on.ms, on.cpu_ms, off.cpu_ms, off.cpu_ms / on.cpu_ms,
               on.peak_mb, off.peak_mb);
    }
    wf_release(c);
    wf_release(x);
    return 0;
}
