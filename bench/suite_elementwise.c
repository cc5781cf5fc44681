/*
 * suite_elementwise: issue 14 item 1 without compile. GELU (erf and tanh
 * forms) and the 8-op chain on 16M float32, op by op (each op its own
 * kernel and intermediate array), and weft's built-in fused wf_gelu /
 * wf_gelu_tanh. The compiled variants are in suite_elementwise_compiled.c.
 * Every output element is checked against a double reference first.
 *
 *   build/release/suite_elementwise [elements = 16777216]
 */
#include "suite.h"
#include "suite_funcs.h"

typedef wf_array *(*unary_builder)(wf_array *x);

static wf_array *map_builder(void *ctx, wf_array *x)
{
    const unary_builder *build = ctx;
    return (*build)(x);
}

typedef struct elementwise_case {
    const char *name;
    unary_builder ops;   /* built from primitive ops */
    unary_builder fused; /* weft's own fused op, or NULL */
    double (*ref)(double);
    double atol, rtol;
} elementwise_case;

/* chain8's sqrt sits on a kink: float rounding of its argument near 0 gives
 * errors of sqrt(eps * |terms|) ~ 1e-3, whatever the implementation. */
static const elementwise_case cases[] = {
    {"elementwise/gelu_erf", suite_gelu_erf, wf_gelu, suite_gelu_erf_ref, 1e-5, 1e-4},
    {"elementwise/gelu_tanh", suite_gelu_tanh, wf_gelu_tanh, suite_gelu_tanh_ref, 1e-5, 1e-4},
    {"elementwise/chain8", suite_chain8, NULL, suite_chain8_ref, 2e-3, 1e-4},
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
        const elementwise_case *k = &cases[c];
        suite_record r = suite_record_new(k->name, "weft-ops", threads);
        r.bytes = 2.0 * 4.0 * (double)n;
        suite_measure_map(&r, map_builder, (void *)&k->ops, x, xdata, k->ref, k->atol, k->rtol, reps);
        suite_record_print(&r);
        if (k->fused) {
            r = suite_record_new(k->name, "weft-fused-op", threads);
            r.bytes = 2.0 * 4.0 * (double)n;
            suite_measure_map(&r, map_builder, (void *)&k->fused, x, xdata, k->ref, k->atol,
                              k->rtol, reps);
            suite_record_print(&r);
        }
    }
    wf_release(x);
    free(xdata);
    return 0;
}
