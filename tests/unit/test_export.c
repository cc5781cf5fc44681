/*
 * Function export and import (weft.h, "export and import"):
 *  - round trips: a function of every input dtype (its result joins the
 *    input with a captured constant of that dtype), one with several
 *    outputs and captured constants, a shapeless one called at other
 *    shapes, several traces in one file picked by tag and signature, a
 *    default-key random draw (the imported function gives the exporting
 *    call's numbers); each imported result equals the direct call's, bit
 *    for bit;
 *  - constants the function computes are written as their graph: a file of
 *    traces that add a large captured array to 0 .. 2 inputs holds the
 *    array's data once;
 *  - an imported function as a wf_fn: compiled, and differentiated;
 *  - errors: a missing file, a foreign file, a wrong version, every prefix
 *    of a valid file, random byte flips (import or WF_ERR_IO, never a
 *    crash: the ASan build checks the reads), an unsupported primitive
 *    (wf_custom), a call matching no trace;
 *  - one imported function called from 4 threads at once, every result
 *    the single-thread one, bit for bit;
 *  - an exporter used by a call that overlaps another (the traced function
 *    exports again through it) fails with WF_ERR_MISUSE;
 *  - every allocation of an export, an import and a call failing in turn
 *    (util/fault.h): each run succeeds with the right values or fails with
 *    a status, and leaves no array alive;
 *  - every built-in primitive is exportable but those refused on purpose
 *    (a primitive added later without a parameter table is noticed here);
 *  - wf_graph_to_dot on a pending graph and on an evaluated array.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compile/export_format.h"
#include "harness.h"
#include "temp_files.h"
#include "prim/registry.h"
#include "util/fault.h"

/* A rows x 3 array of `dtype` with distinct values (bools mixed). */
static wf_array *sample(wf_dtype dtype, int64_t rows, double offset)
{
    const int64_t shape[2] = {rows, 3};
    double *v = malloc((size_t)(rows * 3) * sizeof *v);
    for (int64_t i = 0; i < rows * 3; i++)
        v[i] = dtype == WF_DTYPE_BOOL ? (double)(i % 2) : offset + (double)(i % 7) - 2.0;
    wf_array *f = wf_array_from_data(v, shape, 2, WF_DTYPE_F64);
    free(v);
    wf_array *a = wf_astype(f, dtype);
    wf_release(f);
    return a;
}

/* ------------------------------------------------------------ functions */

/* Input joined with a constant of its dtype (captured: the payload), then
 * transposed: every dtype's data goes through the file as a constant. */
static wf_status join_constant(void *payload, wf_array *const *in, size_t n, wf_array **out,
                               size_t *nout)
{
    (void)n;
    wf_array *parts[2] = {in[0], payload};
    wf_array *joined = wf_concatenate(parts, 2, 0);
    out[0] = wf_transpose(joined, NULL, 0);
    wf_release(joined);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_every_dtype(void)
{
    const wf_dtype dtypes[] = {WF_DTYPE_BOOL, WF_DTYPE_U8,  WF_DTYPE_I32, WF_DTYPE_I64,
                               WF_DTYPE_F16,  WF_DTYPE_BF16, WF_DTYPE_F32, WF_DTYPE_F64,
                               WF_DTYPE_I8,   WF_DTYPE_I16, WF_DTYPE_U16, WF_DTYPE_U32,
                               WF_DTYPE_U64,  WF_DTYPE_C64};
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        wf_array *constant = sample(dtypes[i], 1, 10.0);
        wf_fn *fn = wf_fn_new(join_constant, constant, NULL);
        wf_array *x = sample(dtypes[i], 2, 0.0);
        const char *path = tmp_path("dtype.wfn");
        if (!CHECK_OK(wf_export_function(path, fn, NULL, &x, 1, false, NULL))) {
            printf("  dtype %s: %s\n", wf_dtype_name(dtypes[i]), wf_last_error_message());
        }
        wf_imported *imp = wf_import_function(path);
        CHECK_NOT_NULL(imp);
        wf_array *got = NULL, *want = NULL;
        size_t n = 1, m = 1;
        if (imp)
            CHECK_OK(wf_imported_call(imp, NULL, &x, 1, &got, &n));
        CHECK_OK(wf_fn_call(fn, &x, 1, &want, &m));
        if (!CHECK(same_bits(got, want)))
            printf("  dtype %s differs\n", wf_dtype_name(dtypes[i]));
        wf_release(got);
        wf_release(want);
        wf_imported_release(imp);
        wf_release(x);
        wf_fn_release(fn);
        wf_release(constant);
    }
}

/* The factorizations' parts: qr's r, eigh's w, svd's s, eig's real part of
 * w, and lu's u (each a packed node sliced). */
static wf_status factor_parts(void *payload, wf_array *const *in, size_t n, wf_array **out,
                              size_t *nout)
{
    (void)payload;
    (void)n;
    wf_array *q = NULL, *r = NULL, *w = NULL, *s = NULL, *e = NULL, *p = NULL, *l = NULL,
             *u = NULL;
    wf_status st = wf_linalg_qr(in[0], &q, &r);
    if (st == WF_OK)
        st = wf_linalg_eigh(in[0], false, &w, NULL);
    if (st == WF_OK)
        st = wf_linalg_svd(in[0], NULL, &s, NULL);
    if (st == WF_OK)
        st = wf_linalg_eig(in[0], &e, NULL);
    if (st == WF_OK)
        st = wf_linalg_lu(in[0], &p, &l, &u);
    out[0] = r, out[1] = w, out[2] = s, out[3] = e ? wf_real(e) : NULL, out[4] = u;
    wf_release(q);
    wf_release(e);
    wf_release(p);
    wf_release(l);
    *nout = 5;
    return st;
}

static void test_factorizations(void)
{
    const double v[9] = {4, 1, 2, 1, 3, 0, 2, 0, 5};
    const int64_t shape[2] = {3, 3};
    wf_array *x = wf_array_from_data(v, shape, 2, WF_DTYPE_F64);
    wf_fn *fn = wf_fn_new(factor_parts, NULL, NULL);
    const char *path = tmp_path("factor.wfn");
    CHECK_OK(wf_export_function(path, fn, NULL, &x, 1, false, NULL));
    wf_imported *imp = wf_import_function(path);
    wf_array *got[5] = {NULL}, *want[5] = {NULL};
    size_t n = 5, m = 5;
    if (CHECK_NOT_NULL(imp))
        CHECK_OK(wf_imported_call(imp, NULL, &x, 1, got, &n));
    CHECK_OK(wf_fn_call(fn, &x, 1, want, &m));
    for (size_t i = 0; i < 5; i++) {
        if (!CHECK(same_bits(got[i], want[i])))
            printf("  factorization output %zu differs\n", i);
        wf_release(got[i]);
        wf_release(want[i]);
    }
    wf_imported_release(imp);
    wf_fn_release(fn);
    wf_release(x);
}

typedef struct affine {
    wf_array *w, *b;
} affine;

/* (x @ w + b, sum(x * y, axis 1), exp(x)). */
static wf_status three_outputs(void *payload, wf_array *const *in, size_t n, wf_array **out,
                               size_t *nout)
{
    (void)n;
    const affine *p = payload;
    if (wf_scope_begin() != WF_OK)
        return wf_last_error();
    wf_array *lin = wf_add(wf_matmul(in[0], p->w), p->b);
    const int axis = 1;
    wf_array *dot = wf_sum(wf_multiply(in[0], in[1]), &axis, 1, false);
    wf_array *e = wf_exp(in[0]);
    const wf_status status = lin && dot && e ? WF_OK : wf_last_error();
    if (status == WF_OK) {
        wf_keep(lin);
        wf_keep(dot);
        wf_keep(e);
    }
    wf_scope_end(); /* on failure releases what was made */
    out[0] = lin;
    out[1] = dot;
    out[2] = e;
    *nout = 3;
    return status;
}

static void test_several_outputs_and_constants(void)
{
    affine p = {sample(WF_DTYPE_F32, 3, 0.5), sample(WF_DTYPE_F32, 1, 0.25)};
    wf_fn *fn = wf_fn_new(three_outputs, &p, NULL);
    wf_array *in[2] = {sample(WF_DTYPE_F32, 4, 0.0), sample(WF_DTYPE_F32, 4, 1.0)};
    const char *path = tmp_path("three.wfn");
    CHECK_OK(wf_export_function(path, fn, "xy", in, 2, false, "{\"model\": \"affine\"}"));
    wf_imported *imp = wf_import_function(path);
    if (CHECK_NOT_NULL(imp)) {
        CHECK_EQ_SIZE(wf_imported_trace_count(imp), 1);
        CHECK(strcmp(wf_imported_trace_tag(imp, 0), "xy") == 0);
        CHECK_EQ_SIZE(wf_imported_trace_inputs(imp, 0), 2);
        wf_dtype dtype;
        int ndim;
        const int64_t *shape;
        CHECK_OK(wf_imported_trace_input(imp, 0, 1, &dtype, &ndim, &shape));
        CHECK(dtype == WF_DTYPE_F32 && ndim == 2 && shape[0] == 4 && shape[1] == 3);
        CHECK_STATUS(wf_imported_trace_input(imp, 0, 2, &dtype, &ndim, &shape),
                     WF_ERR_INVALID_ARGUMENT);
        CHECK(!wf_imported_trace_shapeless(imp, 0));
        CHECK(strcmp(wf_imported_metadata(imp), "{\"model\": \"affine\"}") == 0);
        wf_array *got[3] = {NULL}, *want[3] = {NULL};
        size_t n = 3, m = 3;
        CHECK_OK(wf_imported_call(imp, "xy", in, 2, got, &n));
        CHECK_OK(wf_fn_call(fn, in, 2, want, &m));
        CHECK_EQ_SIZE(n, 3);
        for (int i = 0; i < 3; i++)
            CHECK(same_bits(got[i], want[i]));
        for (int i = 0; i < 3; i++) {
            wf_release(got[i]);
            wf_release(want[i]);
        }
        /* Another tag, another shape: no trace. */
        n = 3;
        CHECK_STATUS(wf_imported_call(imp, "other", in, 2, got, &n), WF_ERR_INVALID_ARGUMENT);
        CHECK_STR_CONTAINS(wf_last_error_message(), "no trace");
        wf_array *wide[2] = {sample(WF_DTYPE_F32, 5, 0.0), in[1]};
        CHECK_STATUS(wf_imported_call(imp, "xy", wide, 2, got, &n), WF_ERR_INVALID_ARGUMENT);
        wf_release(wide[0]);
        /* Room for fewer outputs than the function returns. */
        n = 2;
        CHECK_STATUS(wf_imported_call(imp, "xy", in, 2, got, &n), WF_ERR_INVALID_ARGUMENT);
    }
    wf_imported_release(imp);
    wf_release(in[0]);
    wf_release(in[1]);
    wf_fn_release(fn);
    wf_release(p.w);
    wf_release(p.b);
}

/* exp(x) * 2 + sum(x, keepdims) + x (broadcasts of a traced shape). */
static wf_status shapeless_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                                size_t *nout)
{
    (void)payload;
    (void)n;
    if (wf_scope_begin() != WF_OK)
        return wf_last_error();
    const int axis = 1;
    wf_array *y = wf_add(wf_add(wf_multiply(wf_exp(in[0]), wf_scalar(2.0, WF_DTYPE_F32)),
                                wf_sum(in[0], &axis, 1, true)),
                         in[0]);
    if (y)
        wf_keep(y);
    wf_scope_end();
    out[0] = y;
    *nout = 1;
    return y ? WF_OK : wf_last_error();
}

static void test_shapeless(void)
{
    wf_fn *fn = wf_fn_new(shapeless_body, NULL, NULL);
    wf_array *x = sample(WF_DTYPE_F32, 2, 0.0);
    const char *path = tmp_path("shapeless.wfn");
    CHECK_OK(wf_export_function(path, fn, NULL, &x, 1, true, NULL));
    wf_imported *imp = wf_import_function(path);
    CHECK_NOT_NULL(imp);
    for (int64_t rows = 1; imp && rows <= 6; rows += 5) {
        wf_array *other = sample(WF_DTYPE_F32, rows, 0.5);
        wf_array *got = NULL, *want = NULL;
        size_t n = 1, m = 1;
        CHECK_OK(wf_imported_call(imp, NULL, &other, 1, &got, &n));
        CHECK_OK(wf_fn_call(fn, &other, 1, &want, &m));
        CHECK(same_bits(got, want));
        wf_release(got);
        wf_release(want);
        wf_release(other);
    }
    /* Another rank: no trace. */
    wf_array *flat = wf_reshape(x, (int64_t[]){6}, 1);
    wf_array *got = NULL;
    size_t n = 1;
    if (imp)
        CHECK_STATUS(wf_imported_call(imp, NULL, &flat, 1, &got, &n), WF_ERR_INVALID_ARGUMENT);
    wf_release(flat);
    wf_imported_release(imp);
    wf_release(x);
    wf_fn_release(fn);
}

/* The sum of its inputs (any number), plus one. */
static wf_status sum_all(void *payload, wf_array *const *in, size_t n, wf_array **out,
                         size_t *nout)
{
    (void)payload;
    wf_array *acc = wf_scalar(1.0, WF_DTYPE_F32);
    for (size_t i = 0; i < n && acc; i++) {
        wf_array *next = wf_add(acc, in[i]);
        wf_release(acc);
        acc = next;
    }
    out[0] = acc;
    *nout = 1;
    return acc ? WF_OK : wf_last_error();
}

static void test_several_traces(void)
{
    wf_fn *fn = wf_fn_new(sum_all, NULL, NULL);
    const char *path = tmp_path("traces.wfn");
    wf_exporter *ex = wf_exporter_new(path, fn, false, NULL);
    wf_array *xs[3] = {sample(WF_DTYPE_F32, 2, 0.0), sample(WF_DTYPE_F32, 2, 1.0),
                       sample(WF_DTYPE_F32, 2, 2.0)};
    if (CHECK_NOT_NULL(ex)) {
        for (size_t k = 1; k <= 3; k++)
            CHECK_OK(wf_exporter_add(ex, k == 3 ? "three" : NULL, xs, k));
        CHECK_OK(wf_exporter_close(ex));
    }
    wf_imported *imp = wf_import_function(path);
    if (CHECK_NOT_NULL(imp)) {
        CHECK_EQ_SIZE(wf_imported_trace_count(imp), 3);
        for (size_t k = 1; k <= 3; k++) {
            wf_array *got = NULL, *want = NULL;
            size_t n = 1, m = 1;
            CHECK_OK(wf_imported_call(imp, k == 3 ? "three" : "", xs, k, &got, &n));
            CHECK_OK(wf_fn_call(fn, xs, k, &want, &m));
            CHECK(same_bits(got, want));
            wf_release(got);
            wf_release(want);
        }
        wf_array *got = NULL;
        size_t n = 1;
        CHECK_STATUS(wf_imported_call(imp, NULL, xs, 3, &got, &n), WF_ERR_INVALID_ARGUMENT);
    }
    wf_imported_release(imp);
    for (int i = 0; i < 3; i++)
        wf_release(xs[i]);
    wf_fn_release(fn);
}

static wf_status draw(void *payload, wf_array *const *in, size_t n, wf_array **out, size_t *nout)
{
    (void)payload;
    (void)in;
    (void)n;
    out[0] = wf_random_uniform((int64_t[]){5}, 1, WF_DTYPE_F32, 0.0, 1.0, NULL);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_random_draw(void)
{
    wf_fn *fn = wf_fn_new(draw, NULL, NULL);
    const char *path = tmp_path("random.wfn");
    wf_random_seed(5);
    CHECK_OK(wf_export_function(path, fn, NULL, NULL, 0, false, NULL));
    wf_random_seed(5);
    wf_array *want = NULL;
    size_t m = 1;
    CHECK_OK(wf_fn_call(fn, NULL, 0, &want, &m));
    wf_imported *imp = wf_import_function(path);
    for (int call = 0; imp && call < 2; call++) {
        wf_array *got = NULL;
        size_t n = 1;
        CHECK_OK(wf_imported_call(imp, NULL, NULL, 0, &got, &n));
        CHECK(same_bits(got, want)); /* the exporting call's numbers, every call */
        wf_release(got);
    }
    wf_imported_release(imp);
    wf_release(want);
    wf_fn_release(fn);
}

/* big + the inputs (any number); with none, big + 0: a constant the
 * function computes. */
static wf_status add_to_big(void *payload, wf_array *const *in, size_t n, wf_array **out,
                            size_t *nout)
{
    wf_array *acc = wf_add(payload, wf_scalar(0.0, WF_DTYPE_F32));
    for (size_t i = 0; i < n && acc; i++) {
        wf_array *next = wf_add(acc, in[i]);
        wf_release(acc);
        acc = next;
    }
    out[0] = acc;
    *nout = 1;
    return acc ? WF_OK : wf_last_error();
}

static void test_constant_graphs(void)
{
    wf_array *big = wf_full((int64_t[]){16, 2048}, 2, 1.5, WF_DTYPE_F32);
    CHECK_OK(wf_eval(&big, 1)); /* data: written once */
    wf_fn *fn = wf_fn_new(add_to_big, big, NULL);
    const char *path = tmp_path("big.wfn");
    wf_exporter *ex = wf_exporter_new(path, fn, false, NULL);
    wf_array *xs[2] = {wf_scalar(1.0, WF_DTYPE_F32), wf_scalar(2.0, WF_DTYPE_F32)};
    for (size_t k = 0; ex && k <= 2; k++)
        CHECK_OK(wf_exporter_add(ex, NULL, xs, k));
    CHECK_OK(wf_exporter_close(ex));
    size_t size = 0;
    uint8_t *data = read_all(path, &size);
    CHECK(size > wf_array_nbytes(big) && size < wf_array_nbytes(big) + 4096);
    free(data);
    wf_imported *imp = wf_import_function(path);
    for (size_t k = 0; imp && k <= 2; k++) {
        wf_array *got = NULL, *want = NULL;
        size_t n = 1, m = 1;
        CHECK_OK(wf_imported_call(imp, NULL, xs, k, &got, &n));
        CHECK_OK(wf_fn_call(fn, xs, k, &want, &m));
        CHECK(same_bits(got, want));
        wf_release(got);
        wf_release(want);
    }
    wf_imported_release(imp);
    wf_release(xs[0]);
    wf_release(xs[1]);
    wf_fn_release(fn);
    wf_release(big);
}

static wf_status square_sum(void *payload, wf_array *const *in, size_t n, wf_array **out,
                            size_t *nout)
{
    (void)payload;
    (void)n;
    wf_array *sq = wf_multiply(in[0], in[0]);
    out[0] = wf_sum(sq, NULL, 0, false);
    wf_release(sq);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_as_function(void)
{
    wf_fn *fn = wf_fn_new(square_sum, NULL, NULL);
    wf_array *x = sample(WF_DTYPE_F32, 2, 0.0);
    const char *path = tmp_path("square.wfn");
    CHECK_OK(wf_export_function(path, fn, NULL, &x, 1, false, NULL));
    wf_imported *imp = wf_import_function(path);
    wf_fn *imported = wf_imported_fn(imp, NULL);
    wf_imported_release(imp); /* the function keeps it */
    wf_fn *compiled = wf_compile(imported, NULL);
    wf_fn *grad = wf_grad(imported, NULL, 0);
    wf_array *got = NULL, *want = NULL, *g = NULL;
    size_t n = 1, m = 1, k = 1;
    CHECK_OK(wf_fn_call(compiled, &x, 1, &got, &n));
    CHECK_OK(wf_fn_call(fn, &x, 1, &want, &m));
    CHECK(same_bits(got, want));
    CHECK_OK(wf_fn_call(grad, &x, 1, &g, &k));
    wf_array *twice = wf_multiply(x, wf_scalar(2.0, WF_DTYPE_F32));
    CHECK(same_bits(g, twice));
    wf_release(twice);
    wf_release(got);
    wf_release(want);
    wf_release(g);
    wf_fn_release(grad);
    wf_fn_release(compiled);
    wf_fn_release(imported);
    wf_release(x);
    wf_fn_release(fn);
}

/* ------------------------------------------------------------ errors */

static wf_status fill_kernel(void *payload, const wf_custom_call *call)
{
    (void)payload;
    (void)call;
    return WF_OK;
}

static wf_status custom_body(void *payload, wf_array *const *in, size_t n, wf_array **out,
                             size_t *nout)
{
    (void)payload;
    (void)n;
    out[0] = wf_custom("mine", fill_kernel, NULL, NULL, in, 1, (int64_t[]){2, 3}, 2,
                       WF_DTYPE_F32);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_refusals(void)
{
    wf_fn *fn = wf_fn_new(custom_body, NULL, NULL);
    wf_array *x = sample(WF_DTYPE_F32, 2, 0.0);
    const char *path = tmp_path("custom.wfn");
    CHECK_STATUS(wf_export_function(path, fn, NULL, &x, 1, false, NULL), WF_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(wf_last_error_message(), "'custom'");
    CHECK(access(path, F_OK) != 0); /* the partial file is removed */

    CHECK_NULL_WITH(wf_import_function(tmp_path("missing.wfn")), WF_ERR_IO);
    CHECK_STATUS(wf_export_function("/nonexistent-dir/f.wfn", fn, NULL, NULL, 0, false, NULL),
                 WF_ERR_IO);
    const char foreign[] = "PK\003\004 not a weft file";
    write_all(tmp_path("foreign.wfn"), foreign, sizeof foreign - 1);
    CHECK(wf_import_function(tmp_path("foreign.wfn")) == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_IO);
    CHECK_STR_CONTAINS(wf_last_error_message(), "not a valid weft function file");
    wf_release(x);
    wf_fn_release(fn);
}

/* Every prefix and thousands of byte flips of a valid file: each imports
 * (and then runs) or fails with WF_ERR_IO. */
static void test_hostile_files(void)
{
    affine p = {sample(WF_DTYPE_F32, 3, 0.5), sample(WF_DTYPE_F32, 1, 0.25)};
    wf_fn *fn = wf_fn_new(three_outputs, &p, NULL);
    wf_array *in[2] = {sample(WF_DTYPE_F32, 4, 0.0), sample(WF_DTYPE_F32, 4, 1.0)};
    const char *path = tmp_path("hostile.wfn");
    CHECK_OK(wf_export_function(path, fn, "xy", in, 2, false, "meta"));
    size_t size = 0;
    uint8_t *data = read_all(path, &size);
    if (!CHECK_NOT_NULL(data))
        return;
    int failures = 0;
    for (size_t len = 0; len < size; len++) {
        uint8_t *copy = malloc(len ? len : 1); /* exact size: ASan sees reads past it */
        memcpy(copy, data, len);
        wf_imported *imp = wf_import_function_from_memory(copy, len);
        failures += imp != NULL || wf_last_error() != WF_ERR_IO;
        wf_imported_release(imp);
        free(copy);
    }
    CHECK_EQ_INT(failures, 0);
    /* Version 2 is refused by name. */
    uint8_t *copy = malloc(size);
    memcpy(copy, data, size);
    copy[8] = 2;
    CHECK(wf_import_function_from_memory(copy, size) == NULL);
    CHECK_EQ_INT(wf_last_error(), WF_ERR_IO);
    CHECK_STR_CONTAINS(wf_last_error_message(), "version 2");
    uint64_t rng = 12345;
    int imported = 0, bad_status = 0;
#ifdef WF_TEST_SLOW_BUILD
    const int rounds = 1500;
#else
    const int rounds = 6000;
#endif
    for (int round = 0; round < rounds; round++) {
        memcpy(copy, data, size);
        for (int flips = 0; flips < 1 + round % 4; flips++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            copy[(rng >> 33) % size] ^= (uint8_t)(1u << ((rng >> 20) % 8));
        }
        wf_imported *imp = wf_import_function_from_memory(copy, size);
        if (imp) {
            imported++;
            wf_array *out[3] = {NULL};
            size_t n = 3;
            if (wf_imported_call(imp, wf_imported_trace_tag(imp, 0), in, 2, out, &n) == WF_OK) {
                wf_eval(out, n);
                for (size_t i = 0; i < n; i++)
                    wf_release(out[i]);
            }
        } else if (wf_last_error() != WF_ERR_IO) {
            bad_status++;
            printf("  flip round %d: %s: %s\n", round, wf_status_name(wf_last_error()),
                   wf_last_error_message());
        }
        wf_imported_release(imp);
    }
    CHECK_EQ_INT(bad_status, 0);
    CHECK(imported > 0); /* flips in constant data or floats still load */
    free(copy);
    free(data);
    wf_release(in[0]);
    wf_release(in[1]);
    wf_fn_release(fn);
    wf_release(p.w);
    wf_release(p.b);
}

/* ------------------------------------------------------------ threads */

typedef struct caller {
    wf_imported *imp;
    wf_array *in[2];
    wf_array *want[3];
    int mismatches;
} caller;

static void *call_many(void *arg)
{
    caller *c = arg;
    for (int round = 0; round < 50; round++) {
        wf_array *got[3] = {NULL};
        size_t n = 3;
        if (wf_imported_call(c->imp, "xy", c->in, 2, got, &n) != WF_OK || n != 3) {
            c->mismatches++;
            continue;
        }
        for (int i = 0; i < 3; i++) {
            c->mismatches += !same_bits(got[i], c->want[i]);
            wf_release(got[i]);
        }
    }
    return NULL;
}

static void test_threads(void)
{
    affine p = {sample(WF_DTYPE_F32, 3, 0.5), sample(WF_DTYPE_F32, 1, 0.25)};
    wf_fn *fn = wf_fn_new(three_outputs, &p, NULL);
    caller c = {.in = {sample(WF_DTYPE_F32, 4, 0.0), sample(WF_DTYPE_F32, 4, 1.0)}};
    const char *path = tmp_path("threads.wfn");
    CHECK_OK(wf_export_function(path, fn, "xy", c.in, 2, false, NULL));
    c.imp = wf_import_function(path);
    size_t m = 3;
    CHECK_OK(wf_fn_call(fn, c.in, 2, c.want, &m));
    CHECK_OK(wf_eval(c.want, 3));
    caller each[4];
    pthread_t threads[4];
    for (int t = 0; c.imp && t < 4; t++) {
        each[t] = c;
        CHECK(pthread_create(&threads[t], NULL, call_many, &each[t]) == 0);
    }
    for (int t = 0; c.imp && t < 4; t++) {
        pthread_join(threads[t], NULL);
        CHECK_EQ_INT(each[t].mismatches, 0);
    }
    wf_imported_release(c.imp);
    for (int i = 0; i < 3; i++)
        wf_release(c.want[i]);
    wf_release(c.in[0]);
    wf_release(c.in[1]);
    wf_fn_release(fn);
    wf_release(p.w);
    wf_release(p.b);
}

/* Exports again through the exporter that is tracing it. */
static wf_status reenter(void *payload, wf_array *const *in, size_t n, wf_array **out,
                         size_t *nout)
{
    wf_exporter **ex = payload;
    wf_status inner = wf_exporter_add(*ex, NULL, in, n);
    if (inner != WF_ERR_MISUSE || !strstr(wf_last_error_message(), "another call"))
        return wf_set_error(WF_ERR_INTERNAL, "the overlapping call gave %s",
                            wf_status_name(inner));
    out[0] = wf_exp(in[0]);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static void test_overlapping_calls(void)
{
    wf_exporter *ex = NULL;
    wf_fn *fn = wf_fn_new(reenter, &ex, NULL);
    wf_array *x = sample(WF_DTYPE_F32, 2, 0.0);
    ex = wf_exporter_new(tmp_path("reenter.wfn"), fn, false, NULL);
    if (CHECK_NOT_NULL(ex)) {
        CHECK_OK(wf_exporter_add(ex, NULL, &x, 1));
        CHECK_OK(wf_exporter_close(ex));
    }
    wf_imported *imp = wf_import_function(tmp_path("reenter.wfn"));
    CHECK(imp && wf_imported_trace_count(imp) == 1);
    wf_imported_release(imp);
    wf_release(x);
    wf_fn_release(fn);
}

/* Export, import, call, evaluate: OK with the direct call's values, or a
 * failure status. */
static wf_status export_import_call(wf_fn *fn, wf_array *const *in, wf_array *const *want)
{
    const char *path = tmp_path("faults.wfn");
    wf_status status = wf_export_function(path, fn, "xy", in, 2, false, NULL);
    wf_imported *imp = status == WF_OK ? wf_import_function(path) : NULL;
    if (status == WF_OK && !imp)
        status = wf_last_error();
    wf_array *got[3] = {NULL};
    size_t n = 3;
    if (status == WF_OK)
        status = wf_imported_call(imp, "xy", in, 2, got, &n);
    if (status == WF_OK)
        status = wf_eval(got, 3);
    for (int i = 0; status == WF_OK && i < 3; i++)
        if (!same_bits(got[i], want[i]))
            status = wf_set_error(WF_ERR_INTERNAL, "output %d differs", i);
    for (int i = 0; i < 3; i++)
        wf_release(got[i]);
    wf_imported_release(imp);
    return status;
}

static void test_out_of_memory(void)
{
    affine p = {sample(WF_DTYPE_F32, 3, 0.5), sample(WF_DTYPE_F32, 1, 0.25)};
    wf_fn *fn = wf_fn_new(three_outputs, &p, NULL);
    wf_array *in[2] = {sample(WF_DTYPE_F32, 4, 0.0), sample(WF_DTYPE_F32, 4, 1.0)};
    wf_array *want[3] = {NULL};
    size_t m = 3;
    CHECK_OK(wf_fn_call(fn, in, 2, want, &m));
    CHECK_OK(wf_eval(want, 3));
    CHECK_OK(wf_eval(in, 2));
    CHECK_OK(wf_eval(&p.w, 1));
    CHECK_OK(wf_eval(&p.b, 1));
    CHECK_OK(export_import_call(fn, in, want)); /* warm up */
    wf__fault_arm(INT64_MAX);
    CHECK_OK(export_import_call(fn, in, want));
    const int64_t total = wf__fault_ops_seen();
    wf__fault_arm(0);
    int wrong = 0, failures = 0;
    for (int64_t nth = 1; nth <= total; nth++) {
        const int64_t live = wf__arrays_live();
        wf__fault_arm(nth);
        wf_status status = export_import_call(fn, in, want);
        wf__fault_arm(0);
        failures += status != WF_OK;
        wrong += status == WF_ERR_INTERNAL || status > WF_OK;
        if (!CHECK_EQ_INT(wf__arrays_live(), live)) {
            printf("  fault %lld of %lld left arrays alive\n", (long long)nth, (long long)total);
            break;
        }
    }
    CHECK_EQ_INT(wrong, 0);
    CHECK(failures > 0);
    for (int i = 0; i < 3; i++)
        wf_release(want[i]);
    wf_release(in[0]);
    wf_release(in[1]);
    wf_fn_release(fn);
    wf_release(p.w);
    wf_release(p.b);
}

static void test_supported_primitives(void)
{
    static const char *const refused[] = {
        "custom", "sibling", "fused", "fused2", "fused3", "fused4", "all_sum", "all_max",
        "all_min", "all_gather", "sum_scatter", "send", "recv"};
    size_t count;
    const wf_prim_def *const *all = wf__prim_registry(&count);
    for (size_t i = 0; i < count; i++) {
        bool expected = true;
        for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++)
            expected &= strcmp(all[i]->name, refused[k]) != 0;
        if (!CHECK(wf__export_prim_supported(all[i]) == expected))
            printf("  primitive %s\n", all[i]->name);
        const size_t n = strlen(all[i]->name);
        CHECK(wf__export_prim_find(all[i]->name, n) == (expected ? all[i] : NULL));
    }
}

/* ------------------------------------------------------------ DOT */

static char *dot_of(wf_array *const *arrays, const char *const *names, size_t n)
{
    size_t length = 0;
    if (wf_graph_to_dot(arrays, names, n, NULL, 0, &length) != WF_OK)
        return NULL;
    char *text = malloc(length + 1);
    size_t again = 0;
    if (wf_graph_to_dot(arrays, names, n, text, length + 1, &again) != WF_OK || again != length) {
        free(text);
        return NULL;
    }
    return text;
}

static void test_dot(void)
{
    wf_array *x = sample(WF_DTYPE_F32, 2, 0.0);
    CHECK_OK(wf_eval(&x, 1)); /* a leaf: its astype has run */
    wf_array *y = wf_exp(wf_add(x, x));
    const char *names[1] = {"result"};
    char *text = dot_of(&y, names, 1);
    if (CHECK_NOT_NULL(text)) {
        CHECK_STR_CONTAINS(text, "digraph {");
        CHECK_STR_CONTAINS(text, "label=\"exp: result\", shape=box");
        CHECK_STR_CONTAINS(text, "label=\"add\", shape=box");
        CHECK_STR_CONTAINS(text, "float32 (2, 3)");
        CHECK_STR_CONTAINS(text, "->");
    }
    free(text);
    CHECK_OK(wf_eval(&y, 1));
    text = dot_of(&y, NULL, 1); /* evaluated: one ellipse, no edges */
    if (CHECK_NOT_NULL(text)) {
        CHECK(strstr(text, "shape=box") == NULL);
        CHECK(strstr(text, "->") == NULL);
    }
    free(text);
    char small[8];
    size_t length = 0;
    CHECK_OK(wf_graph_to_dot(&y, NULL, 1, small, sizeof small, &length));
    CHECK(length > sizeof small && strlen(small) == sizeof small - 1);
    wf_release(y);
    wf_release(x);
}

static wf_status reenter_close(void *payload, wf_array *const *in, size_t n, wf_array **out,
                               size_t *nout)
{
    (void)n;
    wf_exporter **ex = payload;
    wf_status inner = wf_exporter_close(*ex);
    if (inner != WF_ERR_MISUSE || !strstr(wf_last_error_message(), "wf_exporter_close"))
        return wf_set_error(WF_ERR_INTERNAL, "the overlapping close gave %s",
                            wf_status_name(inner));
    out[0] = wf_exp(in[0]);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* NULL and released arguments, allocation failures and a full device:
 * each call returns its error with a message naming it, and the exporter,
 * the imported function and the graph printer work afterwards. */
static void test_bad_arguments_and_out_of_memory(void)
{
    wf_exporter *ex = NULL;
    wf_fn *fn = wf_fn_new(reenter_close, &ex, NULL);
    wf_array *x = sample(WF_DTYPE_F32, 2, 0.0);
    CHECK(wf_exporter_new(NULL, fn, false, NULL) == NULL);
    CHECK_ERROR(wf_last_error(), WF_ERR_NULL_ARGUMENT, "wf_exporter_new: path is NULL");
    CHECK(wf_exporter_new(tmp_path("x.wfn"), NULL, false, NULL) == NULL);
    CHECK_ERROR(wf_last_error(), WF_ERR_NULL_ARGUMENT, "wf_exporter_new: fn is NULL");
    for (int nth = 1; nth <= 2; nth++) {
        wf__fault_arm(nth);
        CHECK(wf_exporter_new(tmp_path("x.wfn"), fn, false, NULL) == NULL);
        CHECK(wf__fault_fired());
        wf__fault_arm(0);
        CHECK_ERROR(wf_last_error(), WF_ERR_OUT_OF_MEMORY, "wf_exporter_new: out of memory");
    }
    CHECK_ERROR(wf_exporter_add(NULL, NULL, &x, 1), WF_ERR_NULL_ARGUMENT, "wf_exporter_add");
    CHECK_OK(wf_exporter_close(NULL));
    /* A close from inside the traced function is refused; the real one works. */
    ex = wf_exporter_new(tmp_path("close.wfn"), fn, false, NULL);
    if (CHECK_NOT_NULL(ex)) {
        CHECK_OK(wf_exporter_add(ex, "t", &x, 1));
        CHECK_OK(wf_exporter_close(ex));
    }
    /* The header is flushed at once: a full device fails the creation. */
    CHECK(wf_exporter_new("/dev/full", fn, false, NULL) == NULL);
    CHECK_ERROR(wf_last_error(), WF_ERR_IO, "writing '/dev/full' failed");

    CHECK(wf_import_function(NULL) == NULL);
    CHECK_ERROR(wf_last_error(), WF_ERR_NULL_ARGUMENT, "wf_import_function: path is NULL");
    CHECK(wf_import_function_from_memory(NULL, 4) == NULL);
    CHECK_ERROR(wf_last_error(), WF_ERR_NULL_ARGUMENT, "wf_import_function_from_memory");
    wf_imported *imp = wf_import_function(tmp_path("close.wfn"));
    if (!CHECK_NOT_NULL(imp)) {
        wf_release(x);
        wf_fn_release(fn);
        return;
    }
    wf_dtype dt;
    int ndim;
    const int64_t *shape;
    CHECK_ERROR(wf_imported_trace_input(NULL, 0, 0, &dt, &ndim, &shape), WF_ERR_NULL_ARGUMENT,
                 "wf_imported_trace_input");
    CHECK_ERROR(wf_imported_trace_input(imp, 0, 1, &dt, &ndim, &shape), WF_ERR_INVALID_ARGUMENT,
                 "no input 1 of trace 0");
    CHECK_OK(wf_imported_trace_input(imp, 0, 0, &dt, &ndim, &shape));
    CHECK(dt == WF_DTYPE_F32 && ndim == 2 && shape[0] == 2 && shape[1] == 3);
    wf_array *out[1] = {NULL};
    size_t nout = 1;
    CHECK_ERROR(wf_imported_call(NULL, "t", &x, 1, out, &nout), WF_ERR_NULL_ARGUMENT,
                 "wf_imported_call");
    wf_array *gone = sample(WF_DTYPE_F32, 2, 0.0);
    wf_release(gone);
    CHECK_ERROR(wf_imported_call(imp, "t", &gone, 1, out, &nout), WF_ERR_MISUSE,
                 "wf_imported_call");
    nout = 0;
    CHECK_ERROR(wf_imported_call(imp, "t", &x, 1, out, &nout), WF_ERR_INVALID_ARGUMENT,
                 "returns 1 outputs, room for 0");
    CHECK(out[0] == NULL);
    CHECK(wf_imported_fn(NULL, "t") == NULL);
    CHECK_ERROR(wf_last_error(), WF_ERR_NULL_ARGUMENT, "wf_imported_fn");
    for (int nth = 1; nth <= 3; nth++) { /* its payload, the tag, the wf_fn */
        wf__fault_arm(nth);
        CHECK(wf_imported_fn(imp, "t") == NULL);
        CHECK(wf__fault_fired());
        wf__fault_arm(0);
        CHECK_ERROR(wf_last_error(), WF_ERR_OUT_OF_MEMORY, "out of memory");
    }
    wf_fn *as_fn = wf_imported_fn(imp, "t");
    wf_imported_release(imp); /* the wf_fn holds its own reference */
    nout = 1;
    if (CHECK_NOT_NULL(as_fn) && CHECK_OK(wf_fn_call(as_fn, &x, 1, out, &nout))) {
        double v[6];
        CHECK_OK(wf_array_copy_to(wf_astype(out[0], WF_DTYPE_F64), v, sizeof v));
        CHECK_NEAR(v[0], exp(-2.0), 1e-6);
        wf_release(out[0]);
    }
    wf_fn_release(as_fn);

    char buf[64];
    size_t length = 0;
    CHECK_ERROR(wf_graph_to_dot(NULL, NULL, 1, buf, sizeof buf, &length), WF_ERR_NULL_ARGUMENT,
                 "wf_graph_to_dot");
    CHECK_ERROR(wf_graph_to_dot(&x, NULL, 1, NULL, 4, &length), WF_ERR_NULL_ARGUMENT,
                 "wf_graph_to_dot");
    CHECK_ERROR(wf_graph_to_dot(&x, NULL, 1, buf, sizeof buf, NULL), WF_ERR_NULL_ARGUMENT,
                 "wf_graph_to_dot");
    CHECK_ERROR(wf_graph_to_dot(&gone, NULL, 1, buf, sizeof buf, &length), WF_ERR_MISUSE,
                 "wf_graph_to_dot");
    wf_array *y = wf_exp(wf_add(x, x));
    bool fired = true;
    for (int nth = 1; fired; nth++) {
        wf__fault_arm(nth);
        wf_status st = wf_graph_to_dot(&y, NULL, 1, buf, sizeof buf, &length);
        fired = wf__fault_fired();
        wf__fault_arm(0);
        if (fired)
            CHECK_ERROR(st, WF_ERR_OUT_OF_MEMORY, "wf_graph_to_dot: out of memory");
        else
            CHECK_OK(st);
    }
    char *text = dot_of(&y, NULL, 1);
    CHECK(text && strstr(text, "label=\"exp\""));
    free(text);
    wf_release(y);
    wf_release(x);
    wf_fn_release(fn);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/weft-test-export-%d", (int)getpid());
    if (mkdir(dir, 0700) != 0)
        return 1;
    RUN_SCOPED(test_every_dtype);
    RUN_SCOPED(test_factorizations);
    RUN_SCOPED(test_several_outputs_and_constants);
    RUN_SCOPED(test_shapeless);
    RUN_SCOPED(test_several_traces);
    RUN_SCOPED(test_random_draw);
    RUN_SCOPED(test_constant_graphs);
    RUN_SCOPED(test_as_function);
    RUN_SCOPED(test_threads);
    RUN_SCOPED(test_overlapping_calls);
    RUN_SCOPED(test_refusals);
    RUN_SCOPED(test_hostile_files);
    RUN_SCOPED(test_out_of_memory);
    RUN_SCOPED(test_supported_primitives);
    RUN_SCOPED(test_dot);
    RUN_SCOPED(test_bad_arguments_and_out_of_memory);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return 1;
    return TEST_SUMMARY();
}
