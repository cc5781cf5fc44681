/* weft's safetensors files against the `safetensors` package from PyPI:
 * weft writes tensors of every dtype numpy has (known values, odd names, a
 * 0-d and an empty tensor); tests/python/check_safetensors.py reads them with
 * safetensors.numpy.load_file and checks names, shapes, dtypes and values,
 * then writes a file with safetensors.numpy.save_file that weft loads here
 * and checks the same way.
 *
 * The script runs in the virtual environment scripts/python-venv.sh makes
 * (`make test` runs it first): $WEFT_PY_VENV, else build/py-venv in the
 * source tree. Without it the test fails and says how to make it. */
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "weft.h"
#include "weft_nn.h"

extern char **environ;

static char source_root[PATH_MAX];

/* The source tree (set by CMake). */
static void find_source_root(void)
{
    snprintf(source_root, sizeof source_root, "%s", WEFT_SOURCE_DIR);
}

/* One expected tensor: its name, dtype, shape and raw little-endian bytes. */
struct tensor {
    const char *name;
    wf_dtype dtype;
    int ndim;
    int64_t shape[2];
    const void *data;
    size_t bytes;
};

/* ------------------------------------------------------------ what weft writes
 * (keep in step with EXPECTED_FROM_WEFT in check_safetensors.py) */

static const float weight[] = {-1.5f, 0.0f, 0.25f, 1.0f, 2.5f, 1024.0f};
static const double bias[] = {0.1, -2.0, 3.5, 1e300};
static const int32_t ids[] = {-7, 0, 42, 2147483647};
static const int64_t counts[] = {-1, 0, (int64_t)1 << 40};
static const uint8_t byte_values[] = {0, 1, 127, 128, 255};
static const bool mask[] = {true, false, true};
static const uint16_t half_bits[] = {0x3E00, 0xB400}; /* 1.5, -0.25 */
static const float scalar_value[] = {3.25f};
static const float seven[] = {7.0f};
static const float minus_half[] = {-0.5f};

static const struct tensor weft_tensors[] = {
    {"layer.weight", WF_DTYPE_F32, 2, {2, 3}, weight, sizeof weight},
    {"layer.bias", WF_DTYPE_F64, 1, {4}, bias, sizeof bias},
    {"ids", WF_DTYPE_I32, 2, {2, 2}, ids, sizeof ids},
    {"counts", WF_DTYPE_I64, 1, {3}, counts, sizeof counts},
    {"bytes", WF_DTYPE_U8, 1, {5}, byte_values, sizeof byte_values},
    {"mask", WF_DTYPE_BOOL, 1, {3}, mask, sizeof mask},
    {"half", WF_DTYPE_F16, 1, {2}, half_bits, sizeof half_bits},
    {"scalar", WF_DTYPE_F32, 0, {0}, scalar_value, sizeof scalar_value},
    {"empty", WF_DTYPE_F32, 2, {0, 3}, NULL, 0},
    {"na\xc3\xafve.\xc3\xbcnicode", WF_DTYPE_F32, 1, {1}, seven, sizeof seven},
    {"quote\"and\\backslash", WF_DTYPE_F32, 1, {1}, minus_half, sizeof minus_half},
};

/* ------------------------------------------------------------ what Python writes
 * (keep in step with WRITTEN_BY_PYTHON in check_safetensors.py) */

static const float py_f32[] = {-1.0f, -0.75f, -0.5f, -0.25f, 0.0f, 0.25f,
                               0.5f,  0.75f,  1.0f,  1.25f,  1.5f, 1.75f};
static const double py_f64[] = {-0.125, 6.5e-300};
static const int64_t py_i64[] = {-((int64_t)1 << 50), 3, 5, (int64_t)1 << 62};
static const int32_t py_i32[] = {INT32_MIN, 17};
static const uint8_t py_u8[] = {200, 7};
static const bool py_bool[] = {false, true};
static const uint16_t py_f16_bits[] = {0x3800, 0xFBFF, 0x4000}; /* 0.5, -65504, 2 */
static const double py_scalar[] = {-4.0};
static const float py_ete[] = {1.0f, 2.0f};

static const struct tensor python_tensors[] = {
    {"py.f32", WF_DTYPE_F32, 2, {3, 4}, py_f32, sizeof py_f32},
    {"py.f64", WF_DTYPE_F64, 1, {2}, py_f64, sizeof py_f64},
    {"py.i64", WF_DTYPE_I64, 2, {2, 2}, py_i64, sizeof py_i64},
    {"py.i32", WF_DTYPE_I32, 1, {2}, py_i32, sizeof py_i32},
    {"py.u8", WF_DTYPE_U8, 2, {2, 1}, py_u8, sizeof py_u8},
    {"py.bool", WF_DTYPE_BOOL, 1, {2}, py_bool, sizeof py_bool},
    {"py.f16", WF_DTYPE_F16, 1, {3}, py_f16_bits, sizeof py_f16_bits},
    {"py.scalar", WF_DTYPE_F64, 0, {0}, py_scalar, sizeof py_scalar},
    {"py.empty", WF_DTYPE_I32, 2, {2, 0}, NULL, 0},
    {"py.\xc3\xa9t\xc3\xa9", WF_DTYPE_F32, 1, {2}, py_ete, sizeof py_ete},
};

enum { NWEFT = sizeof weft_tensors / sizeof weft_tensors[0] };
enum { NPYTHON = sizeof python_tensors / sizeof python_tensors[0] };

/* ------------------------------------------------------------ helpers */

static wf_status save_weft_tensors(const char *path)
{
    wf_nn_params *params = wf_nn_params_new();
    wf_status st = params ? WF_OK : wf_last_error();
    for (size_t i = 0; i < NWEFT && st == WF_OK; i++) {
        const struct tensor *t = &weft_tensors[i];
        wf_array *a = wf_array_from_data(t->data, t->shape, t->ndim, t->dtype);
        st = a ? wf_nn_params_add(params, t->name, a) : wf_last_error();
        wf_release(a);
    }
    if (st == WF_OK)
        st = wf_nn_save_safetensors(params, path);
    wf_nn_params_release(params);
    return st;
}

/* Runs `python script weft_file python_file`; its exit status, or -1. */
static int run_checker(const char *python, const char *script, const char *weft_file,
                       const char *python_file)
{
    char *args[] = {(char *)python, (char *)script, (char *)weft_file, (char *)python_file, NULL};
    pid_t pid;
    if (posix_spawn(&pid, python, NULL, NULL, args, environ) != 0)
        return -1;
    int status;
    if (waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Checks that `params` holds exactly the tensors `want` (in any order). */
static void check_tensors(const wf_nn_params *params, const struct tensor *want, size_t n)
{
    CHECK_EQ_SIZE(wf_nn_params_count(params), n);
    for (size_t i = 0; i < n; i++) {
        const struct tensor *t = &want[i];
        long at = wf_nn_params_find(params, t->name);
        if (at < 0) {
            wf_test_fail(WF_TEST_AT_, "tensor '%s' is missing", t->name);
            continue;
        }
        wf_array *a = wf_nn_params_get(params, (size_t)at);
        CHECK_EQ_INT(wf_array_dtype(a), t->dtype);
        CHECK_EQ_INT(wf_array_ndim(a), t->ndim);
        for (int d = 0; d < t->ndim && d < wf_array_ndim(a); d++)
            CHECK_EQ_INT(wf_array_dim(a, d), t->shape[d]);
        CHECK_EQ_SIZE(wf_array_nbytes(a), t->bytes);
        if (t->bytes && wf_array_nbytes(a) == t->bytes) {
            unsigned char got[256];
            CHECK_OK(wf_array_copy_to(a, got, sizeof got));
            if (memcmp(got, t->data, t->bytes) != 0)
                wf_test_fail(WF_TEST_AT_, "tensor '%s' has other values", t->name);
        }
    }
}

/* ------------------------------------------------------------ tests */

static void test_round_trip_through_python(void)
{
    const char *venv = getenv("WEFT_PY_VENV");
    char python[PATH_MAX + 32], script[PATH_MAX + 64];
    if (venv && *venv)
        snprintf(python, sizeof python, "%s/bin/python", venv);
    else
        snprintf(python, sizeof python, "%s/build/py-venv/bin/python", source_root);
    snprintf(script, sizeof script, "%s/tests/python/check_safetensors.py", source_root);
    if (access(python, X_OK) != 0) {
        wf_test_fail(WF_TEST_AT_,
                     "%s is missing: run scripts/python-venv.sh (`make test` runs it) to make "
                     "a virtual environment with numpy and safetensors from PyPI",
                     python);
        return;
    }
    CHECK(access(script, R_OK) == 0);

    char dir[] = "/tmp/weft-safetensors-XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(false);
        return;
    }
    char weft_file[64], python_file[64];
    snprintf(weft_file, sizeof weft_file, "%s/from-weft.safetensors", dir);
    snprintf(python_file, sizeof python_file, "%s/from-python.safetensors", dir);

    CHECK_OK(save_weft_tensors(weft_file));
    CHECK_EQ_INT(run_checker(python, script, weft_file, python_file), 0);
    wf_nn_params *loaded = wf_nn_load_safetensors(python_file);
    CHECK_NOT_NULL(loaded);
    if (loaded)
        check_tensors(loaded, python_tensors, NPYTHON);
    wf_nn_params_release(loaded);

    unlink(weft_file);
    unlink(python_file);
    rmdir(dir);
}

/* A header whose shape multiplies past 2^63 is malformed, not undefined
 * behaviour. */
static void test_shape_overflow_is_malformed(void)
{
    char path[] = "/tmp/weft-safetensors-overflow-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    const char header[] = "{\"x\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,"
                          "4294967296],\"data_offsets\":[0,4]}}    ";
    unsigned char len[8] = {0};
    uint64_t n = sizeof header - 1;
    for (int b = 0; b < 8; b++)
        len[b] = (unsigned char)(n >> (8 * b));
    const float zero = 0;
    CHECK(write(fd, len, 8) == 8);
    CHECK(write(fd, header, (size_t)n) == (ssize_t)n);
    CHECK(write(fd, &zero, 4) == 4);
    close(fd);
    CHECK_NULL_WITH(wf_nn_load_safetensors(path), WF_ERR_INVALID_ARGUMENT);
    unlink(path);
}

int main(void)
{
    find_source_root();
    RUN_TEST(test_round_trip_through_python);
    RUN_TEST(test_shape_overflow_is_malformed);
    return TEST_SUMMARY();
}
