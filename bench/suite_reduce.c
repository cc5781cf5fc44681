/*
 * suite_reduce: issue 14 item 3, weft's side. sum, max and logsumexp of a
 * 4096 x 4096 float32 array over each axis, and over each axis of its
 * transposed view (no copy is made by the benchmark: the view is reduced).
 * Every output is checked against a double reference before timing.
 *
 *   build/release/suite_reduce [rows = cols = 4096]
 */
#include "suite.h"

typedef wf_array *(*reduce_fn)(wf_array *a, const int *axes, int naxes, bool keepdims);

typedef struct reduce_op {
    const char *name;
    reduce_fn fn;
} reduce_op;

static const reduce_op ops[] = {{"sum", wf_sum}, {"max", wf_max}, {"logsumexp", wf_logsumexp}};

/* Reference of `op` over `axis` of the n x n row-major matrix x, with the
 * bound each result may be off by (sum: 1e-5 of the sum of |x|). */
static void reference(const char *op, const float *x, int64_t n, int axis, double *want,
                      double *bound)
{
    for (int64_t o = 0; o < n; o++) {
        double sum = 0, abs_sum = 0, top = -INFINITY;
        for (int64_t i = 0; i < n; i++) {
            double v = axis == 0 ? x[i * n + o] : x[o * n + i];
            sum += v;
            abs_sum += fabs(v);
            top = v > top ? v : top;
        }
        if (strcmp(op, "sum") == 0) {
            want[o] = sum;
            bound[o] = 1e-5 * abs_sum + 1e-6;
        } else if (strcmp(op, "max") == 0) {
            want[o] = top;
            bound[o] = 0;
        } else {
            double e = 0;
            for (int64_t i = 0; i < n; i++)
                e += exp((axis == 0 ? x[i * n + o] : x[o * n + i]) - top);
            want[o] = top + log(e);
            bound[o] = 1e-5 * (1 + fabs(want[o]));
        }
    }
}

/* The reduction as a user writes it: of x, or of x's transposed view. */
static wf_array *build(const reduce_op *op, wf_array *x, int transposed, int axis)
{
    if (!transposed)
        return op->fn(x, &axis, 1, false);
    wf_array *t = wf_transpose(x, NULL, 0);
    wf_array *y = op->fn(t, &axis, 1, false);
    wf_release(t);
    return y;
}

static void measure(const reduce_op *op, wf_array *x, const float *xdata, int64_t n,
                    int transposed, int axis, double *want, double *bound, int reps)
{
    char kase[64];
    snprintf(kase, sizeof kase, "reduce/%s_%saxis%d", op->name, transposed ? "T_" : "", axis);
    suite_record r = suite_record_new(kase, "weft", suite_weft_threads());
    r.bytes = 4.0 * (double)n * (double)n;
    /* Axis `axis` of the transposed view is axis 1 - axis of x. */
    reference(op->name, xdata, n, transposed ? 1 - axis : axis, want, bound);
    wf_array *y = build(op, x, transposed, axis);
    const void *data = NULL;
    if (!y || wf_array_data(y, &data) != WF_OK) {
        suite_record_fail(&r, "weft error: %s", wf_last_error_message());
    } else {
        const float *got = data;
        for (int64_t o = 0; o < n; o++)
            if (!(fabs((double)got[o] - want[o]) <= bound[o])) {
                suite_record_fail(&r, "output %lld: got %.9g, want %.9g", (long long)o,
                                  (double)got[o], want[o]);
                break;
            }
        r.checksum = suite_l1(got, n);
    }
    wf_release(y);
    for (int i = 0; i < reps && strcmp(r.check, "ok") == 0; i++) {
        double start = suite_now();
        y = build(op, x, transposed, axis);
        wf_status st = y ? wf_eval(&y, 1) : wf_last_error();
        double elapsed = suite_now() - start;
        wf_release(y);
        if (st != WF_OK)
            suite_record_fail(&r, "weft error while timing: %s", wf_last_error_message());
        suite_record_time(&r, elapsed);
    }
    suite_record_print(&r);
}

int main(int argc, char **argv)
{
    int64_t n = argc > 1 ? atoll(argv[1]) : 4096;
    if (n < 1)
        n = 4096;
    const int64_t shape[2] = {n, n};
    float *xdata = suite_uniform(n * n, 6, -3, 3);
    wf_array *x = wf_array_from_data(xdata, shape, 2, WF_DTYPE_F32);
    suite_require(x && wf_eval(&x, 1) == WF_OK, "input");
    double *want = malloc((size_t)n * sizeof *want), *bound = malloc((size_t)n * sizeof *bound);
    suite_require(want && bound, "allocation");
    const int reps = suite_reps(7);
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (int transposed = 0; transposed <= 1; transposed++)
            for (int axis = 0; axis <= 1; axis++)
                measure(&ops[o], x, xdata, n, transposed, axis, want, bound, reps);
    free(want);
    free(bound);
    wf_release(x);
    free(xdata);
    return 0;
}
