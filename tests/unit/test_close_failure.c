/*
 * Every file writer when closing its file fails after the data went out,
 * as it does on a file system that reports write errors only at close
 * (NFS): WF_ERR_IO with the path in the message, nothing leaked, and the
 * next write succeeds. No local file system fails a close, so this test
 * is linked with -Wl,--wrap=fclose (CMakeLists.txt): __wrap_fclose closes
 * the file for real and then, while armed, reports EIO.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "settle.h"
#include "temp_files.h"
#include "weft_nn.h"

int __real_fclose(FILE *f);
int __wrap_fclose(FILE *f);

static atomic_int failing_closes; /* closes to fail from now on */
static atomic_int failed_closes;  /* closes failed so far */

int __wrap_fclose(FILE *f)
{
    const int rc = __real_fclose(f);
    int armed = atomic_load(&failing_closes);
    while (armed > 0 && !atomic_compare_exchange_weak(&failing_closes, &armed, armed - 1))
        ;
    if (armed <= 0)
        return rc;
    atomic_fetch_add(&failed_closes, 1);
    errno = EIO;
    return EOF;
}

/* The exported function: twice its one input. */
static wf_status twice(void *payload, wf_array *const *in, size_t n, wf_array **out, size_t *nout)
{
    (void)payload, (void)n;
    out[0] = wf_add(in[0], in[0]);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static wf_array *ramp(int64_t n) { return wf_arange(0, (double)n, 1, WF_DTYPE_F32); }

/* One exporter session writing `path`: new, one trace, close. */
static wf_status export_once(const char *path, wf_fn *fn, wf_array *x)
{
    wf_exporter *ex = wf_exporter_new(path, fn, false, NULL);
    if (!ex)
        return wf_last_error();
    wf_status st = wf_exporter_add(ex, NULL, &x, 1);
    const wf_status closed = wf_exporter_close(ex);
    return st != WF_OK ? st : closed;
}

/* Runs `write` (one of the writers below) with its close failing, then
 * not: the error names the path, and the second file is whole. */
static void expect_close_failure(const char *what, wf_status (*write)(const char *path),
                                 bool (*check)(const char *path))
{
    const int64_t live = live_arrays();
    const char *path = tmp_path(what);
    char saved[512];
    snprintf(saved, sizeof saved, "%s", path);
    atomic_store(&failed_closes, 0);
    atomic_store(&failing_closes, 1);
    const wf_status st = write(saved);
    atomic_store(&failing_closes, 0);
    CHECK_EQ_INT(atomic_load(&failed_closes), 1);
    CHECK_ERROR(st, WF_ERR_IO, saved);
    CHECK_OK(write(saved));
    CHECK(check(saved));
    unlink(saved);
    CHECK_EQ_INT(settle_live_arrays(live), live);
}

static wf_status write_export(const char *path)
{
    wf_fn *fn = wf_fn_new(twice, NULL, NULL);
    wf_array *x = ramp(3);
    const wf_status st = export_once(path, fn, x);
    wf_release(x);
    wf_fn_release(fn);
    return st;
}

static bool check_export(const char *path)
{
    wf_imported *imp = wf_import_function(path);
    const bool ok = CHECK_NOT_NULL(imp) && CHECK_EQ_INT(wf_imported_trace_count(imp), 1);
    wf_imported_release(imp);
    return ok;
}

enum { NPZ, SAFETENSORS, GGUF };

/* Writes arrays a (0 .. 4) and b (0 .. 6) to `path` in `format`. */
static wf_status write_two_arrays(const char *path, int format)
{
    wf_nn_params *p = wf_nn_params_new();
    wf_array *a = ramp(5), *b = ramp(7);
    CHECK_OK(wf_nn_params_add(p, "a", a));
    CHECK_OK(wf_nn_params_add(p, "b", b));
    const wf_status st = format == NPZ           ? wf_nn_save_npz(p, path, true)
                         : format == SAFETENSORS ? wf_nn_save_safetensors(p, path)
                                                 : wf_nn_save_gguf(p, NULL, path);
    wf_nn_params_release(p);
    wf_release(a), wf_release(b);
    return st;
}

static wf_status write_npz(const char *path) { return write_two_arrays(path, NPZ); }
static wf_status write_safetensors(const char *path) { return write_two_arrays(path, SAFETENSORS); }
static wf_status write_gguf(const char *path) { return write_two_arrays(path, GGUF); }

static wf_status write_npy(const char *path)
{
    wf_array *a = ramp(5);
    const wf_status st = wf_nn_save_npy(a, path);
    wf_release(a);
    return st;
}

/* The file loads back with both arrays, the second being 0 .. 6. */
static bool check_params(wf_nn_params *p)
{
    bool ok = CHECK_NOT_NULL(p) && CHECK_EQ_SIZE(wf_nn_params_count(p), 2);
    if (ok) {
        float got[7] = {0};
        ok = CHECK_OK(wf_array_copy_to(wf_nn_params_get(p, wf_nn_params_find(p, "b")), got,
                                       sizeof got));
        for (int i = 0; i < 7; i++)
            ok = CHECK_NEAR(got[i], (float)i, 0) && ok;
    }
    wf_nn_params_release(p);
    return ok;
}

static bool check_npz(const char *path) { return check_params(wf_nn_load_npz(path)); }
static bool check_safetensors(const char *path)
{
    return check_params(wf_nn_load_safetensors(path));
}
static bool check_gguf(const char *path)
{
    wf_nn_gguf_meta *meta = NULL;
    const bool ok = check_params(wf_nn_load_gguf(path, &meta));
    wf_nn_gguf_meta_release(meta);
    return ok;
}
static bool check_npy(const char *path)
{
    wf_array *a = wf_nn_load_npy(path);
    const bool ok = CHECK_NOT_NULL(a) && CHECK_EQ_INT(wf_array_size(a), 5);
    wf_release(a);
    return ok;
}

static void test_exporter_close(void) { expect_close_failure("f.wfn", write_export, check_export); }
static void test_save_npz(void) { expect_close_failure("f.npz", write_npz, check_npz); }
static void test_save_npy(void) { expect_close_failure("f.npy", write_npy, check_npy); }
static void test_save_gguf(void) { expect_close_failure("f.gguf", write_gguf, check_gguf); }
static void test_save_safetensors(void)
{
    expect_close_failure("f.safetensors", write_safetensors, check_safetensors);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/weft-close-XXXXXX");
    if (!mkdtemp(dir)) {
        printf("cannot make a temporary folder\n");
        return 1;
    }
    RUN_TEST(test_exporter_close);
    RUN_TEST(test_save_npz);
    RUN_TEST(test_save_npy);
    RUN_TEST(test_save_gguf);
    RUN_TEST(test_save_safetensors);
    rmdir(dir);
    return TEST_SUMMARY();
}
