/*
 * suite_elementwise_compiled: issue 14 item 1, compiled. GELU (erf and tanh
 * forms) and the 8-op chain on 16M float32 through wf_compile (the same
 * graphs suite_elementwise.c runs op by op), checked element by element
 * against a double reference before timing. Also prints the traces each
 * compiled function made (1 expected).
 *
 *   build/release/suite_elementwise_compiled [elements = 16777216]
 */
#include "suite_compiled.h"
#include "suite_funcs.h"

typedef struct compiled_case {
    const char *name;
    suite_unary_builder build;
    double (*ref)(double);
    double atol, rtol;
} compiled_case;

/* Tolerances as in suite_elementwise.c (chain8's sqrt sits on a kink). */
static const compiled_case cases[] = {
    {"elementwise/gelu_erf", suite_gelu_erf, suite_gelu_erf_ref, 1e-5, 1e-4},
    {"elementwise/gelu_tanh", suite_gelu_tanh, suite_gelu_tanh_ref, 1e-5, 1e-4},
    {"elementwise/chain8", suite_chain8, suite_chain8_ref, 2e-3, 1e-4},
};

int main(int argc, char **argv)
{
    int64_t n = argc > 1 ? atoll(argv[1]) : 16777216;
    if (n < 1)
        n = 16777216;
    const int reps = suite_reps(7), threads = suite_weft_threads();
    float *xdata = suite_uniform(n, 1, -3.0f, 3.0f);
    wf_array *x = wf_array_from_data(xdata, &n, 1, WF_DTYPE_F32);
    suite_require(x && wf_eval(&x, 1) == WF_OK, "input");

    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const compiled_case *k = &cases[c];
        suite_unary_body body = {k->build, 0};
        wf_fn *fn = suite_unary_fn(&body);
        wf_fn *compiled = wf_compile(fn, NULL);
        suite_require(compiled != NULL, "wf_compile");
        suite_record r = suite_record_new(k->name, "weft-compiled", threads);
        r.bytes = 2.0 * 4.0 * (double)n;
        suite_measure_map(&r, suite_call1, compiled, x, xdata, k->ref, k->atol, k->rtol, reps);
        snprintf(r.note, sizeof r.note, "%llu trace(s), body ran %ld time(s)",
                 (unsigned long long)suite_traces(compiled), atomic_load(&body.runs));
        suite_record_print(&r);
        wf_fn_release(compiled);
        wf_fn_release(fn);
    }
    wf_release(x);
    free(xdata);
    return 0;
}
