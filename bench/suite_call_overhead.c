/*
 * suite_call_overhead: issue 14 item 4. The 10-op function of suite_funcs.h
 * on 16 floats, called and evaluated again and again: compiled (wf_compile
 * replaying its cached trace) and op by op (building the 10 nodes each
 * time). A repetition is `calls` calls; the record's items are the calls,
 * so run_all.py reports microseconds per call. The output is checked
 * against a double reference first.
 *
 *   build/release/suite_call_overhead [calls per repetition = 2000]
 */
#include "suite_compiled.h"
#include "suite_funcs.h"

static wf_array *build_ops(void *ctx, wf_array *x)
{
    (void)ctx;
    return suite_call10(x);
}

/* Checks the 16 outputs, then times `reps` runs of `calls` calls. */
static void measure(const char *impl, suite_map_fn map, void *ctx, wf_array *x,
                    const float *xdata, long calls, int reps)
{
    suite_record r = suite_record_new("call_overhead/call10_16", impl, 1);
    r.items = (double)calls;
    suite_measure_map(&r, map, ctx, x, xdata, suite_call10_ref, 3e-3, 1e-4, 0);
    for (int i = 0; i < reps && strcmp(r.check, "ok") == 0; i++) {
        double start = suite_now();
        for (long c = 0; c < calls; c++) {
            wf_array *y = suite_map_eval(map, ctx, x);
            if (!y) {
                suite_record_fail(&r, "weft error: %s", wf_last_error_message());
                break;
            }
            wf_release(y);
        }
        suite_record_time(&r, suite_now() - start);
    }
    suite_record_print(&r);
}

int main(int argc, char **argv)
{
    long calls = argc > 1 ? atol(argv[1]) : 2000;
    if (calls < 1)
        calls = 2000;
    const int reps = suite_reps(7);
    const int64_t n = 16;
    float *xdata = suite_uniform(n, 7, -3.0f, 3.0f);
    wf_array *x = wf_array_from_data(xdata, &n, 1, WF_DTYPE_F32);
    suite_require(x && wf_eval(&x, 1) == WF_OK, "input");

    suite_unary_body body = {suite_call10, 0};
    wf_fn *fn = suite_unary_fn(&body);
    wf_fn *compiled = wf_compile(fn, NULL);
    suite_require(compiled != NULL, "wf_compile");
    measure("weft-compiled", suite_call1, compiled, x, xdata, calls, reps);
    suite_print_value("call_overhead/call10_16", "weft-compiled", "traces",
                      (double)suite_traces(compiled));
    measure("weft-ops", build_ops, NULL, x, xdata, calls, reps);

    wf_fn_release(compiled);
    wf_fn_release(fn);
    wf_release(x);
    free(xdata);
    return 0;
}
