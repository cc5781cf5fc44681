/* The primitive layer: one registry of every primitive, kernels attached
 * per device (a primitive without one fails with WF_ERR_UNSUPPORTED), shape
 * inference on descriptions (no nodes), the stream a node gets through
 * core's hooks, and the include rules of DESIGN section 2 for core, prim
 * and ops. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "core/array.h"
#include "core/error.h"
#include "core/stream_hooks.h"
#include "harness.h"
#include "prim/kernel.h"
#include "prim/linalg.h"
#include "prim/prims.h"
#include "prim/registry.h"
#include "settle.h"

/* Runs first, in a fresh process: before anything started the runtime a
 * node has no stream (the default); once a stream exists it gets the
 * current one, a pushed stream included. */
static void test_node_stream_through_core_hooks(void)
{
    const float v[2] = {0.0f, 1.0f};
    const int64_t shape[1] = {2};
    wf_array *x = wf_array_from_data(v, shape, 1, WF_DTYPE_F32);
    wf_array *early = wf_exp(x);
    if (!CHECK_NOT_NULL(early))
        return;
    CHECK(early->stream == NULL);
    CHECK_OK(wf_eval(&early, 1)); /* runs on the default stream */
    float out[2];
    CHECK_OK(wf_array_copy_to(early, out, sizeof out));
    CHECK_NEAR(out[1], 2.718281828, 1e-6);

    wf_stream *def = wf_default_stream();
    wf_array *later = wf_exp(x);
    CHECK(later && later->stream == def);
    wf_stream *mine = wf_stream_new();
    CHECK_OK(wf_stream_push(mine));
    wf_array *pushed = wf_exp(x);
    CHECK_OK(wf_stream_pop());
    CHECK(pushed && pushed->stream == mine);
    CHECK_OK(wf_eval(&pushed, 1));
    wf_release(early);
    wf_release(later);
    wf_release(pushed);
    wf_release(x);
    wf_stream_release(mine);
    wf_stream_release(def);
}

static void test_registry_names_are_unique_and_every_prim_has_a_cpu_kernel(void)
{
    wf_stream *def = wf_default_stream(); /* the runtime has started */
    size_t count = 0;
    const wf_prim_def *const *prims = wf__prim_registry(&count);
    CHECK(count >= 100);
    for (size_t i = 0; i < count; i++) {
        const wf_prim_def *p = prims[i];
        if (!CHECK_NOT_NULL(p) || !CHECK(p->name && p->name[0]))
            continue;
        if (!CHECK(p->infer != NULL))
            printf("    primitive '%s' has no infer\n", p->name);
        if (!CHECK(wf__kernel_lookup(p, WF_DEVICE_KIND_CPU) != NULL))
            printf("    primitive '%s' has no CPU kernel\n", p->name);
        CHECK(wf__prim_noutputs(p) >= 1);
        for (size_t j = 0; j < i; j++) {
            if (!CHECK(prims[j] != p && strcmp(prims[j]->name, p->name) != 0))
                printf("    primitive name '%s' appears twice\n", p->name);
        }
    }
    wf_stream_release(def);
}

/* A primitive of the test's own: identity on float32, no kernel unless
 * registered. */
static wf_status infer_copy(const void *params, const wf_desc *inputs, int ninputs,
                            wf_out_desc *out)
{
    (void)params;
    if (ninputs != 1)
        return wf__error(WF_ERR_INTERNAL, "test: expected 1 input, got %d", ninputs);
    out->dtype = inputs[0].dtype;
    out->ndim = inputs[0].ndim;
    for (int d = 0; d < out->ndim; d++)
        out->shape[d] = inputs[0].shape[d];
    return WF_OK;
}

static const wf_prim_def prim_without_kernel = {
    .name = "test_without_kernel",
    .infer = infer_copy,
    .kernels = &(wf_kernel_slots){{0}},
};

static const wf_prim_def prim_without_slots = {
    .name = "test_without_slots",
    .infer = infer_copy,
};

static wf_status kernel_copy(wf_array *out, wf_array *const *inputs, int ninputs,
                             const void *params)
{
    (void)ninputs;
    (void)params;
    wf__array_set_view(out, inputs[0], inputs[0]->strides, inputs[0]->offset);
    return WF_OK;
}

static void test_missing_kernel_is_unsupported_naming_prim_and_device(void)
{
    const int64_t live0 = live_arrays();
    const float v[3] = {1, 2, 3};
    const int64_t shape[1] = {3};
    wf_array *x = wf_array_from_data(v, shape, 1, WF_DTYPE_F32);
    wf_array *n = wf__array_publish(wf__node_new(&prim_without_kernel, NULL, &x, 1));
    wf_array *dependent = wf_add(n, x);
    if (!CHECK_NOT_NULL(n) || !CHECK_NOT_NULL(dependent))
        return;
    CHECK_STATUS(wf_eval(&dependent, 1), WF_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(wf_last_error_message(), "test_without_kernel");
    CHECK_STR_CONTAINS(wf_last_error_message(), "cpu");
    CHECK_STATUS(wf_eval(&n, 1), WF_ERR_UNSUPPORTED);
    /* The library stays usable. */
    wf_array *ok = wf_add(x, x);
    CHECK_OK(wf_eval(&ok, 1));
    wf_release(ok);
    wf_release(dependent);
    wf_release(n);
    wf_release(x);
    CHECK_EQ_INT(live_arrays(), live0);
}

static void test_kernel_register_rejects_bad_arguments(void)
{
    CHECK_STATUS(wf__kernel_register(NULL, WF_DEVICE_KIND_CPU, kernel_copy),
                 WF_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(wf__kernel_register(&prim_without_kernel, WF_DEVICE_KIND_CPU, NULL),
                 WF_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(wf__kernel_register(&prim_without_kernel, WF_DEVICE_KIND_COUNT, kernel_copy),
                 WF_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(wf__kernel_register(&prim_without_kernel, (enum wf_device_kind)-1, kernel_copy),
                 WF_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(wf__kernel_register(&prim_without_slots, WF_DEVICE_KIND_CPU, kernel_copy),
                 WF_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(wf_last_error_message(), "test_without_slots");
    CHECK(wf__kernel_lookup(&prim_without_slots, WF_DEVICE_KIND_CPU) == NULL);
    CHECK(wf__kernel_lookup(&wf__prim_add, WF_DEVICE_KIND_COUNT) == NULL);
    CHECK(wf__kernel_lookup(&prim_without_kernel, WF_DEVICE_KIND_CPU) == NULL);
}

static const wf_prim_def prim_copy = {
    .name = "test_copy",
    .infer = infer_copy,
    .kernels = &(wf_kernel_slots){{0}},
};

static void test_registered_kernel_runs(void)
{
    CHECK_OK(wf__kernel_register(&prim_copy, WF_DEVICE_KIND_CPU, kernel_copy));
    CHECK(wf__kernel_lookup(&prim_copy, WF_DEVICE_KIND_CPU) == kernel_copy);
    const float v[3] = {4, 5, 6};
    const int64_t shape[1] = {3};
    wf_array *x = wf_array_from_data(v, shape, 1, WF_DTYPE_F32);
    wf_array *y = wf__array_publish(wf__node_new(&prim_copy, NULL, &x, 1));
    float out[3] = {0};
    CHECK_OK(wf_array_copy_to(y, out, sizeof out));
    CHECK(out[0] == 4 && out[2] == 6);
    wf_release(y);
    wf_release(x);
}

/* Inference runs on descriptions alone: no node is built. */
static void test_infer_on_descriptions(void)
{
    const int64_t live0 = live_arrays();
    const int64_t sa[3] = {5, 2, 3}, sb[2] = {3, 4};
    const wf_desc mm[2] = {{WF_DTYPE_F32, 3, sa}, {WF_DTYPE_F16, 2, sb}};
    wf_out_desc out;
    CHECK_OK(wf__prim_matmul.infer(NULL, mm, 2, &out));
    CHECK_EQ_INT(out.dtype, WF_DTYPE_F32);
    CHECK_EQ_INT(out.ndim, 3);
    CHECK(out.shape[0] == 5 && out.shape[1] == 2 && out.shape[2] == 4);

    const wf_desc bad[2] = {{WF_DTYPE_F32, 2, sb}, {WF_DTYPE_F32, 2, sb}};
    CHECK_STATUS(wf__prim_matmul.infer(NULL, bad, 2, &out), WF_ERR_SHAPE);
    wf_clear_error();

    wf_reshape_params rp;
    memset(&rp, 0, sizeof rp);
    rp.ndim = 2;
    rp.shape[0] = -1;
    rp.shape[1] = 10;
    CHECK_OK(wf__prim_reshape.infer(&rp, mm, 1, &out));
    CHECK(out.ndim == 2 && out.shape[0] == 3 && out.shape[1] == 10);

    wf_sum_params sp;
    memset(&sp, 0, sizeof sp);
    sp.axes = 1u << 1;
    const wf_desc b8 = {WF_DTYPE_BOOL, 3, sa};
    CHECK_OK(wf__prim_sum.infer(&sp, &b8, 1, &out));
    CHECK_EQ_INT(out.dtype, WF_DTYPE_I32);
    CHECK(out.ndim == 2 && out.shape[0] == 5 && out.shape[1] == 3);

    const wf_desc scalar = {WF_DTYPE_I32, 0, NULL};
    CHECK_STATUS(wf__prim_exp.infer(NULL, &scalar, 1, &out), WF_ERR_DTYPE);
    wf_clear_error();
    CHECK_EQ_INT(live_arrays(), live0);
}

/* Every primitive's shape inference refuses a node with the wrong number
 * of inputs (a bug in the op that built it) with WF_ERR_INTERNAL naming the
 * count, instead of reading inputs that are not there. The variadic ones
 * (concatenate, custom, crop_like, pad_like) and the fused ones (whose
 * parameters point to their program, never zero) are left out. */
static void test_infer_refuses_a_wrong_input_count(void)
{
    wf_stream *def = wf_default_stream();
    size_t count = 0;
    const wf_prim_def *const *prims = wf__prim_registry(&count);
    const int64_t shape[2] = {2, 3};
    wf_desc inputs[17];
    for (int i = 0; i < 17; i++)
        inputs[i] = (wf_desc){WF_DTYPE_F32, 2, shape};
    int checked = 0;
    for (size_t i = 0; i < count; i++) {
        const wf_prim_def *p = prims[i];
        if (!strcmp(p->name, "concatenate") || !strcmp(p->name, "custom") ||
            !strcmp(p->name, "crop_like") || !strcmp(p->name, "pad_like") ||
            !strncmp(p->name, "fused", 5))
            continue;
        void *params = calloc(1, p->params_size + 1);
        wf_out_desc out[8];
        wf_status st = p->infer(params, inputs, 17, out);
        char msg[256];
        snprintf(msg, sizeof msg, "%s", wf_last_error_message());
        wf_clear_error();
        free(params);
        checked++;
        /* random primitives check their parameters' kind first */
        const bool counted = strstr(msg, "got 17") || strstr(msg, "params of kind 0");
        if (!CHECK_STATUS(st, WF_ERR_INTERNAL) || !CHECK(counted))
            printf("    primitive '%s': \"%s\"\n", p->name, msg);
    }
    CHECK(checked >= 100);
    wf_stream_release(def);
}

/* ------------------------------------------------------------ layering */

/* Source root from this file's path (tests/unit/test_prim_layer.c). */
static bool source_root(char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%s/", WEFT_SOURCE_DIR);
    return n > 0 && (size_t)n < cap;
}

/* Checks every .c/.h in src/<folder>: no #include "<bad>/...". Returns the
 * number of files checked. */
static int check_folder(const char *root, const char *folder, const char *const *bad, int nbad)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%ssrc/%s", root, folder);
    DIR *d = opendir(dir);
    if (!CHECK(d != NULL))
        return 0;
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 3 || (strcmp(e->d_name + len - 2, ".c") && strcmp(e->d_name + len - 2, ".h")))
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (!CHECK(f != NULL))
            continue;
        files++;
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "#include \"", 10) != 0)
                continue;
            for (int i = 0; i < nbad; i++) {
                if (strncmp(line + 10, bad[i], strlen(bad[i])) == 0) {
                    CHECK(!"a layer includes a header it must not");
                    printf("    src/%s/%s: %s", folder, e->d_name, line);
                }
            }
        }
        fclose(f);
    }
    closedir(d);
    return files;
}

static void test_layers_include_only_what_design_allows(void)
{
    char root[1024];
    if (!CHECK(source_root(root, sizeof root)))
        return;
    const char *core_never[] = {"runtime/", "prim/", "backend/", "ops/"};
    const char *prim_never[] = {"runtime/", "backend/", "ops/"};
    const char *ops_never[] = {"runtime/", "backend/"};
    CHECK(check_folder(root, "core", core_never, 4) >= 10);
    CHECK(check_folder(root, "prim", prim_never, 3) >= 10);
    CHECK(check_folder(root, "ops", ops_never, 2) >= 10);
}

int main(void)
{
    RUN_TEST(test_node_stream_through_core_hooks);
    RUN_TEST(test_registry_names_are_unique_and_every_prim_has_a_cpu_kernel);
    RUN_TEST(test_missing_kernel_is_unsupported_naming_prim_and_device);
    RUN_TEST(test_kernel_register_rejects_bad_arguments);
    RUN_TEST(test_registered_kernel_runs);
    RUN_TEST(test_infer_on_descriptions);
    RUN_TEST(test_infer_refuses_a_wrong_input_count);
    RUN_TEST(test_layers_include_only_what_design_allows);
    return TEST_SUMMARY();
}
