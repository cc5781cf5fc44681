/*
 * Distributed weft (issue 29). One program, two roles:
 *
 * - run plainly (the test runner): the single-process fallback (a group of
 *   one), then it launches itself under `mpirun -np N` as workers for each
 *   scenario and checks their exit codes and how long they took;
 * - run with `--worker SCENARIO` under mpirun: every rank runs the scenario
 *   and checks its own results against references computed here in loops
 *   (each rank can compute every rank's input: they are functions of the
 *   rank and the index).
 *
 * ThreadSanitizer builds skip the mpirun part: Open MPI is not built with
 * TSan, so its threads' accesses would be reported as races in MPI itself.
 */
#include <math.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/dtype.h"
#include "distributed/group.h"
#include "harness.h"
#include "settle.h"
#include "util/fault.h"
#include "weft.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif
#if defined(__SANITIZE_THREAD__)
#define THREAD_SANITIZED 1
#else
#define THREAD_SANITIZED 0
#endif

static const wf_dtype all_dtypes[] = {WF_DTYPE_BOOL, WF_DTYPE_U8,  WF_DTYPE_I8,  WF_DTYPE_I16,
                                      WF_DTYPE_U16,  WF_DTYPE_I32, WF_DTYPE_U32, WF_DTYPE_I64,
                                      WF_DTYPE_U64,  WF_DTYPE_F16, WF_DTYPE_BF16, WF_DTYPE_F32,
                                      WF_DTYPE_F64,  WF_DTYPE_C64};
enum { NDTYPES = sizeof all_dtypes / sizeof all_dtypes[0] };

/* Rank r's element i: small integers, exact in every dtype and in sums of
 * four ranks (signed types get negatives too). */
static double input_value(wf_dtype dtype, int rank, int64_t i)
{
    const int64_t v = (rank * 7 + i * 3 + (int64_t)dtype) % 11;
    if (dtype == WF_DTYPE_BOOL)
        return v % 3 == 0;
    if (wf__dtype_is_unsigned_int(dtype) || dtype == WF_DTYPE_U8)
        return (double)v;
    return (double)(v - 5);
}

static wf_array *input_array(wf_dtype dtype, int rank, const int64_t *shape, int ndim)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    const size_t es = wf_dtype_size(dtype);
    unsigned char *data = calloc((size_t)(n ? n : 1), es);
    for (int64_t i = 0; i < n; i++) {
        const double v = input_value(dtype, rank, i);
        if (dtype == WF_DTYPE_C64) { /* real v, imaginary -v */
            ((float *)data)[2 * i] = (float)v;
            ((float *)data)[2 * i + 1] = (float)-v;
        } else {
            wf__store_from_double(data, dtype, i, v);
        }
    }
    wf_array *a = wf_array_from_data(data, shape, ndim, dtype);
    free(data);
    return a;
}

/* Element i of a (complex: its real part) as a double. */
static double element(wf_array *a, int64_t i)
{
    const void *data = NULL;
    if (wf_array_data(a, &data) != WF_OK)
        return NAN;
    if (wf_array_dtype(a) == WF_DTYPE_C64)
        return ((const float *)data)[2 * i];
    return wf__load_as_double(data, wf_array_dtype(a), i);
}

static double combine_ref(int kind, wf_dtype dtype, double a, double b)
{
    if (dtype == WF_DTYPE_BOOL)
        return kind == 2 ? (a && b) : (a || b);
    return kind == 0 ? a + b : kind == 1 ? fmax(a, b) : fmin(a, b);
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------ worker scenarios */

static wf_group *world;
static int rank_, size_;

static void check_reduce(int kind, wf_dtype dtype, const int64_t *shape, int ndim)
{
    wf_scope_begin();
    wf_array *x = input_array(dtype, rank_, shape, ndim);
    wf_array *y = kind == 0 ? wf_all_sum(x, world)
                  : kind == 1 ? wf_all_max(x, world)
                              : wf_all_min(x, world);
    if (dtype == WF_DTYPE_C64 && kind != 0) {
        CHECK(y == NULL && wf_last_error() == WF_ERR_DTYPE);
        wf_clear_error();
        wf_scope_end();
        return;
    }
    if (CHECK_NOT_NULL(y) && CHECK_OK(wf_eval(&y, 1))) {
        const int64_t n = wf_array_size(x);
        int bad = 0;
        for (int64_t i = 0; i < n; i++) {
            double want = input_value(dtype, 0, i);
            for (int r = 1; r < size_; r++)
                want = combine_ref(kind, dtype, want, input_value(dtype, r, i));
            bad += element(y, i) != want;
        }
        if (!CHECK_EQ_INT(bad, 0))
            printf("    rank %d: %s kind %d: %d wrong\n", rank_, wf_dtype_name(dtype), kind, bad);
    }
    wf_scope_end();
}

static void check_gather_and_scatter(wf_dtype dtype, int64_t rows)
{
    wf_scope_begin();
    const int64_t shape[2] = {rows * size_, 3};
    wf_array *x = input_array(dtype, rank_, shape, 2);
    wf_array *g = wf_all_gather(x, world);
    wf_array *s = wf_sum_scatter(x, world);
    wf_array *both[2] = {g, s};
    if (CHECK_NOT_NULL(g) && CHECK_NOT_NULL(s) && CHECK_OK(wf_eval(both, 2))) {
        const int64_t n = shape[0] * shape[1];
        CHECK_EQ_INT(wf_array_shape(g)[0], shape[0] * size_);
        CHECK_EQ_INT(wf_array_shape(s)[0], rows);
        int bad = 0;
        for (int r = 0; r < size_; r++)
            for (int64_t i = 0; i < n; i++)
                bad += element(g, r * n + i) != input_value(dtype, r, i);
        const int64_t mine = rows * 3, first = rank_ * mine;
        for (int64_t i = 0; i < mine; i++) {
            double want = input_value(dtype, 0, first + i);
            for (int r = 1; r < size_; r++)
                want = combine_ref(0, dtype, want, input_value(dtype, r, first + i));
            bad += element(s, i) != want;
        }
        if (!CHECK_EQ_INT(bad, 0))
            printf("    rank %d: gather/scatter %s: %d wrong\n", rank_, wf_dtype_name(dtype), bad);
    }
    wf_scope_end();
}

static void test_every_collective_every_dtype(void)
{
    const int64_t odd[2] = {5, 7}; /* 35 elements: blocks of unequal size */
    const int64_t big[2] = {300, 37}; /* past the 3952 bytes sent with the headers */
    const int64_t empty[2] = {0, 3};
    for (int t = 0; t < NDTYPES; t++) {
        for (int kind = 0; kind < 3; kind++) {
            check_reduce(kind, all_dtypes[t], odd, 2);
            check_reduce(kind, all_dtypes[t], big, 2);
            check_reduce(kind, all_dtypes[t], empty, 2);
            check_reduce(kind, all_dtypes[t], NULL, 0);
        }
        check_gather_and_scatter(all_dtypes[t], 2);
        check_gather_and_scatter(all_dtypes[t], 700); /* 2100 x size elements */
        check_gather_and_scatter(all_dtypes[t], 0);
        /* Each rank's block rides with the headers when every block fits in
         * 3952 bytes (on 2 ranks, edge's blocks exactly; past_edge's not). */
        const int64_t es = (int64_t)wf_dtype_size(all_dtypes[t]);
        const int64_t edge[1] = {2 * 3952 / es}, past_edge[1] = {2 * 3952 / es + 1};
        for (int kind = 0; kind < 3; kind++) {
            check_reduce(kind, all_dtypes[t], edge, 1);
            check_reduce(kind, all_dtypes[t], past_edge, 1);
        }
        check_gather_and_scatter(all_dtypes[t], 3952 / (3 * es)); /* sum_scatter in one go */
    }
}

/* Rank r's element i for the NaN test: NaN where i % (size + 1) == r
 * (some elements NaN on one rank, some on none). */
static double nan_input(int rank, int64_t i)
{
    return i % (size_ + 1) == rank ? NAN : (double)((rank * 5 + i * 3) % 7) - 3;
}

/* all_max / all_min propagate a NaN of any rank, at the first combining
 * step (ranks 0 and 1) and the later ones; both sizes of arrays (with the
 * headers and in pieces), float32 and float16. */
static void test_max_min_propagate_nan(void)
{
    const wf_dtype dtypes[2] = {WF_DTYPE_F32, WF_DTYPE_F16};
    const int64_t sizes[2] = {10, 5000};
    for (int t = 0; t < 2; t++)
        for (int z = 0; z < 2; z++)
            for (int kind = 1; kind <= 2; kind++) {
                wf_scope_begin();
                const int64_t n = sizes[z];
                unsigned char *data = calloc((size_t)n, wf_dtype_size(dtypes[t]));
                for (int64_t i = 0; i < n; i++)
                    wf__store_from_double(data, dtypes[t], i, nan_input(rank_, i));
                wf_array *x = wf_array_from_data(data, &n, 1, dtypes[t]);
                free(data);
                wf_array *y = kind == 1 ? wf_all_max(x, world) : wf_all_min(x, world);
                if (CHECK_OK(wf_eval(&y, 1))) {
                    int bad = 0;
                    for (int64_t i = 0; i < n; i++) {
                        double want = nan_input(0, i);
                        for (int r = 1; r < size_; r++) {
                            const double v = nan_input(r, i);
                            want = isnan(want) || isnan(v) ? NAN : combine_ref(kind, dtypes[t],
                                                                               want, v);
                        }
                        const double got = element(y, i);
                        bad += isnan(want) ? !isnan(got) : got != want;
                    }
                    if (!CHECK_EQ_INT(bad, 0))
                        printf("    rank %d: %s kind %d n %d: %d wrong\n", rank_,
                               wf_dtype_name(dtypes[t]), kind, (int)n, bad);
                }
                wf_scope_end();
            }
}

/* A transposed (non-contiguous) input and a 0-d gather. */
static void test_layouts(void)
{
    wf_scope_begin();
    const int64_t shape[2] = {3, 4};
    wf_array *x = input_array(WF_DTYPE_F32, rank_, shape, 2);
    wf_array *t = wf_swapaxes(x, 0, 1);
    wf_array *y = wf_all_sum(t, world);
    wf_array *scalar = wf_all_gather(wf_sum(x, NULL, 0, false), world);
    wf_array *both[2] = {y, scalar};
    if (CHECK_OK(wf_eval(both, 2))) {
        int bad = 0;
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 3; j++) {
                double want = 0;
                for (int r = 0; r < size_; r++)
                    want += input_value(WF_DTYPE_F32, r, j * 4 + i);
                bad += element(y, i * 3 + j) != want;
            }
        CHECK_EQ_INT(bad, 0);
        CHECK_EQ_INT(wf_array_ndim(scalar), 1);
        CHECK_EQ_INT(wf_array_shape(scalar)[0], size_);
    }
    wf_scope_end();
}

/* Same bits on every rank and on every repetition for float sums. */
static void test_all_sum_is_deterministic(void)
{
    wf_scope_begin();
    enum { N = 4099 };
    float *data = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++)
        data[i] = sinf((float)(i * 0.37 + rank_ * 1.91)) * (float)(1 + i % 1000);
    const int64_t shape[1] = {N};
    wf_array *x = wf_array_from_data(data, shape, 1, WF_DTYPE_F32);
    wf_array *first = wf_all_sum(x, world);
    wf_array *second = wf_all_sum(x, world);
    wf_array *everyone = wf_all_gather(first, world);
    wf_array *all[3] = {first, second, everyone};
    if (CHECK_OK(wf_eval(all, 3))) {
        const float *a = NULL, *b = NULL, *g = NULL;
        wf_array_data(first, (const void **)&a);
        wf_array_data(second, (const void **)&b);
        wf_array_data(everyone, (const void **)&g);
        CHECK(memcmp(a, b, N * sizeof(float)) == 0);
        for (int r = 0; r < size_; r++)
            CHECK(memcmp(a, g + (size_t)r * N, N * sizeof(float)) == 0);
        int bad = 0; /* the reference: float additions in rank order */
        for (int i = 0; i < N; i++) {
            float want = 0;
            for (int r = 0; r < size_; r++) {
                const float v = sinf((float)(i * 0.37 + r * 1.91)) * (float)(1 + i % 1000);
                want = r == 0 ? v : want + v;
            }
            bad += memcmp(&want, &a[i], sizeof want) != 0;
        }
        CHECK_EQ_INT(bad, 0);
    }
    free(data);
    wf_scope_end();
}

/* Pairs (2k, 2k+1) exchange both ways: send blocks until the recv starts,
 * so the even rank sends first and the odd one receives first. */
static void test_send_recv(void)
{
    if (size_ % 2)
        return; /* the last rank of an odd group has no partner: covered with 2 and 4 */
    wf_scope_begin();
    const int peer = rank_ ^ 1;
    const int64_t shape[2] = {40, 50}; /* 8 KB: 8 messages with the "pieces" limit */
    wf_array *mine = input_array(WF_DTYPE_F32, rank_, shape, 2);
    wf_array *sent = NULL, *got = NULL;
    if (rank_ % 2 == 0) {
        sent = wf_send(mine, peer, world);
        got = wf_recv_like(sent, peer, world); /* ordered after the send */
    } else {
        got = wf_recv(shape, 2, WF_DTYPE_F32, peer, world);
        wf_array *after = wf_add(got, wf_zeros_like(mine)); /* send after the recv */
        sent = wf_send(wf_add(mine, wf_multiply(after, wf_zeros_like(after))), peer, world);
    }
    wf_array *both[2] = {sent, got};
    if (CHECK_NOT_NULL(sent) && CHECK_NOT_NULL(got) && CHECK_OK(wf_eval(both, 2))) {
        int bad = 0;
        for (int i = 0; i < 2000; i++)
            bad += element(got, i) != input_value(WF_DTYPE_F32, peer, i) ||
                   element(sent, i) != input_value(WF_DTYPE_F32, rank_, i);
        CHECK_EQ_INT(bad, 0);
    }
    /* Bad peers are refused when the op is built. */
    CHECK_NULL_WITH(wf_send(mine, rank_, world), WF_ERR_INVALID_ARGUMENT);
    CHECK_NULL_WITH(wf_recv(shape, 2, WF_DTYPE_F32, size_, world), WF_ERR_INVALID_ARGUMENT);
    wf_scope_end();
}

/* ---- threads */

enum { THREADS = 4, ROUNDS = 6 };

struct thread_job {
    wf_group *group;
    int index;
    int bad;
    wf_status status;
};

/* Every thread of every rank sums arrays of one shape whose values depend
 * on the rank only: however the ranks' threads pair up, the sum is known. */
static void *sum_rank_values(void *arg)
{
    struct thread_job *job = arg;
    for (int round = 0; round < ROUNDS; round++) {
        wf_scope_begin();
        const int64_t shape[1] = {257};
        wf_array *y = wf_all_sum(input_array(WF_DTYPE_I32, rank_, shape, 1), job->group);
        wf_status st = wf_eval(&y, 1);
        if (st != WF_OK)
            job->status = st;
        for (int64_t i = 0; st == WF_OK && i < 257; i++) {
            double want = 0;
            for (int r = 0; r < size_; r++)
                want += input_value(WF_DTYPE_I32, r, i);
            job->bad += element(y, i) != want;
        }
        wf_scope_end();
    }
    return NULL;
}

static void test_threads_on_one_group(void)
{
    pthread_t threads[THREADS];
    struct thread_job jobs[THREADS];
    for (int t = 0; t < THREADS; t++) {
        jobs[t] = (struct thread_job){world, t, 0, WF_OK};
        pthread_create(&threads[t], NULL, sum_rank_values, &jobs[t]);
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(threads[t], NULL);
        CHECK_OK(jobs[t].status);
        CHECK_EQ_INT(jobs[t].bad, 0);
    }
}

/* One split group per thread; each thread's values depend on the thread:
 * the groups run at the same time, matched within each group only. */
static void *sum_thread_values(void *arg)
{
    struct thread_job *job = arg;
    for (int round = 0; round < ROUNDS; round++) {
        wf_scope_begin();
        const int64_t shape[1] = {1000 + job->index}; /* sizes differ per group */
        wf_array *x = input_array(WF_DTYPE_F64, rank_ * 10 + job->index, shape, 1);
        wf_array *y = wf_all_sum(wf_multiply(x, x), job->group);
        wf_status st = wf_eval(&y, 1);
        if (st != WF_OK)
            job->status = st;
        for (int64_t i = 0; st == WF_OK && i < shape[0]; i++) {
            double want = 0;
            for (int r = 0; r < size_; r++) {
                const double v = input_value(WF_DTYPE_F64, r * 10 + job->index, i);
                want += v * v;
            }
            job->bad += element(y, i) != want;
        }
        wf_scope_end();
    }
    return NULL;
}

static void test_threads_on_split_groups(void)
{
    pthread_t threads[THREADS];
    struct thread_job jobs[THREADS];
    for (int t = 0; t < THREADS; t++) { /* splits are collective: made in order */
        jobs[t] = (struct thread_job){wf_group_split(world, 0, -1), t, 0, WF_OK};
        CHECK_NOT_NULL(jobs[t].group);
        CHECK_EQ_INT(wf_group_size(jobs[t].group), size_);
        CHECK_EQ_INT(wf_group_rank(jobs[t].group), rank_);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_create(&threads[t], NULL, sum_thread_values, &jobs[t]);
    for (int t = 0; t < THREADS; t++) {
        pthread_join(threads[t], NULL);
        CHECK_OK(jobs[t].status);
        CHECK_EQ_INT(jobs[t].bad, 0);
        wf_group_release(jobs[t].group);
    }
    /* A split by parity: ranks 0, 2 and 1, 3 (key reverses the order). */
    wf_group *half = wf_group_split(world, rank_ % 2, size_ - rank_);
    if (CHECK_NOT_NULL(half)) {
        const int members = (size_ + 1 - rank_ % 2) / 2;
        CHECK_EQ_INT(wf_group_size(half), members);
        CHECK_EQ_INT(wf_group_rank(half), members - 1 - rank_ / 2);
        wf_scope_begin();
        const int64_t one[1] = {1};
        const double v = rank_;
        wf_array *y = wf_all_sum(wf_array_from_data(&v, one, 1, WF_DTYPE_F64), half);
        double want = 0;
        for (int r = rank_ % 2; r < size_; r += 2)
            want += r;
        if (CHECK_OK(wf_eval(&y, 1)))
            CHECK(element(y, 0) == want);
        wf_scope_end();
        wf_group_release(half);
    }
}

/* A split that fails, at each of its fallible operations in turn: MPI's
 * split itself (util/fault.h makes it fail before MPI is called), then the
 * group, its stream and the stream's thread (the new communicator is freed,
 * collectively). Every rank runs the same operations, so every rank fails
 * the same one; the world stays usable and nothing is left behind. */
static void test_split_failures(void)
{
    static const char *const why[4] = {"distributed: MPI_Comm_split failed: MPI_ERR_OTHER",
                                       "distributed: out of memory making a group",
                                       "wf_stream_new: out of memory",
                                       "wf_stream_new: cannot start a worker thread"};
    const int64_t groups = wf__groups_live();
    for (int nth = 1; nth <= 4; nth++) {
        wf_set_error(WF_ERR_SHAPE, "an earlier, unrelated error");
        wf__fault_arm(nth);
        wf_group *split = wf_group_split(world, rank_ % 2, -1);
        CHECK(wf__fault_fired());
        wf__fault_arm(0);
        if (!CHECK(split == NULL)) {
            wf_group_release(split);
            continue;
        }
        CHECK_STATUS(wf_last_error(), nth == 1 ? WF_ERR_DISTRIBUTED : WF_ERR_OUT_OF_MEMORY);
        if (!CHECK_STR_CONTAINS(wf_last_error_message(), why[nth - 1]))
            printf("    fault %d on rank %d: %s\n", nth, rank_, wf_last_error_message());
        wf_clear_error();
    }
    CHECK_EQ_INT(wf__groups_live(), groups);
    wf_group *half = wf_group_split(world, rank_ % 2, -1);
    if (CHECK_NOT_NULL(half)) {
        CHECK_EQ_INT(wf_group_size(half), (size_ + 1 - rank_ % 2) / 2);
        wf_group_release(half);
    }
    check_reduce(0, WF_DTYPE_F32, (const int64_t[1]){1000}, 1);
}

/* ---- compile and transforms */

static wf_status sum_of_squares_body(void *payload, wf_array *const *in, size_t nin,
                                     wf_array **out, size_t *nout)
{
    (void)nin;
    wf_group *g = payload;
    wf_array *y = wf_all_sum(in[0], g);
    wf_array *sq = wf_multiply(y, y);
    out[0] = wf_sum(sq, NULL, 0, false);
    wf_release(y);
    wf_release(sq);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

static wf_status gather_dot_body(void *payload, wf_array *const *in, size_t nin,
                                 wf_array **out, size_t *nout)
{
    (void)nin;
    wf_group *g = payload;
    wf_array *y = wf_all_gather(in[0], g);
    wf_array *w = wf_arange(0, (double)wf_array_size(y), 1, WF_DTYPE_F32);
    wf_array *prod = wf_multiply(y, w);
    out[0] = wf_sum(prod, NULL, 0, false);
    wf_release(y);
    wf_release(w);
    wf_release(prod);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* The loss is every rank's loss summed: d/dx_r of n * sum((sum_r x_r)^2)
 * is 2 n y; of sum_r' sum(all_gather(x) * w) it is n * w's block r. */
static void test_grad_and_compile(void)
{
    wf_scope_begin();
    const int64_t shape[1] = {6};
    wf_array *x = input_array(WF_DTYPE_F32, rank_, shape, 1);
    wf_fn *body = wf_fn_new(sum_of_squares_body, world, NULL);
    wf_fn *grad = wf_grad(body, NULL, 0);
    wf_compile_options options = wf_compile_options_default();
    wf_fn *compiled = wf_compile(grad, &options);
    wf_fn *gather_body = wf_fn_new(gather_dot_body, world, NULL);
    wf_fn *gather_grad = wf_grad(gather_body, NULL, 0);
    for (int call = 0; call < 3; call++) {
        wf_array *xs = wf_multiply(x, wf_full(NULL, 0, call + 1.0, WF_DTYPE_F32));
        wf_array *g1 = NULL, *g2 = NULL, *g3 = NULL;
        size_t n1 = 1, n2 = 1, n3 = 1;
        CHECK_OK(wf_fn_call(grad, &xs, 1, &g1, &n1));
        CHECK_OK(wf_fn_call(compiled, &xs, 1, &g2, &n2));
        CHECK_OK(wf_fn_call(gather_grad, &xs, 1, &g3, &n3));
        wf_array *all[3] = {g1, g2, g3};
        if (!CHECK_OK(wf_eval(all, 3)))
            continue;
        int bad = 0;
        for (int i = 0; i < 6; i++) {
            double y = 0;
            for (int r = 0; r < size_; r++)
                y += input_value(WF_DTYPE_F32, r, i) * (call + 1);
            bad += element(g1, i) != 2.0 * size_ * y || element(g2, i) != 2.0 * size_ * y;
            bad += element(g3, i) != (double)size_ * (rank_ * 6 + i);
        }
        CHECK_EQ_INT(bad, 0);
        wf_release(g1);
        wf_release(g2);
        wf_release(g3);
    }
    wf_fn_release(compiled);
    wf_fn_release(grad);
    wf_fn_release(body);
    wf_fn_release(gather_grad);
    wf_fn_release(gather_body);
    wf_scope_end();
}

static wf_status gather_and_sum_body(void *payload, wf_array *const *in, size_t nin,
                                     wf_array **out, size_t *nout)
{
    (void)nin;
    wf_group *g = payload;
    out[0] = wf_all_gather(in[0], g);
    out[1] = wf_all_sum(in[0], g);
    *nout = 2;
    return out[0] && out[1] ? WF_OK : wf_last_error();
}

/* vmap batches a collective into one collective; jvp pushes a tangent
 * through all_sum (all_sum of the tangents). */
static void test_vmap_and_jvp(void)
{
    wf_scope_begin();
    const int64_t shape[2] = {3, 4};
    wf_array *x = input_array(WF_DTYPE_F32, rank_, shape, 2);
    wf_fn *body = wf_fn_new(gather_and_sum_body, world, NULL);
    wf_fn *mapped = wf_vmap(body, NULL, 0, NULL, 0);
    wf_array *outs[2] = {NULL, NULL};
    size_t nout = 2;
    if (CHECK_OK(wf_fn_call(mapped, &x, 1, outs, &nout)) && CHECK_OK(wf_eval(outs, 2))) {
        CHECK_EQ_INT(wf_array_shape(outs[0])[0], 3);
        CHECK_EQ_INT(wf_array_shape(outs[0])[1], 4 * size_);
        int bad = 0;
        for (int b = 0; b < 3; b++)
            for (int r = 0; r < size_; r++)
                for (int i = 0; i < 4; i++) {
                    bad += element(outs[0], (b * size_ + r) * 4 + i) !=
                           input_value(WF_DTYPE_F32, r, b * 4 + i);
                    double want = 0;
                    for (int k = 0; k < size_; k++)
                        want += input_value(WF_DTYPE_F32, k, b * 4 + i);
                    bad += r == 0 && element(outs[1], b * 4 + i) != want;
                }
        CHECK_EQ_INT(bad, 0);
    }
    wf_array *tangent = wf_full(shape, 2, 1.0 + rank_, WF_DTYPE_F32);
    wf_array *primal_out[2] = {NULL, NULL}, *tangent_out[2] = {NULL, NULL};
    nout = 2;
    if (CHECK_OK(wf_jvp(body, &x, 1, &tangent, primal_out, tangent_out, &nout)) &&
        CHECK_OK(wf_eval(tangent_out, 2))) {
        const double want = size_ * (size_ + 1) / 2.0; /* sum over ranks of 1 + rank */
        CHECK(element(tangent_out[1], 5) == want);
        CHECK(element(tangent_out[0], 12 * (size_ - 1)) == size_); /* rank size-1 sent 1 + rank */
    }
    wf_fn_release(mapped);
    wf_fn_release(body);
    wf_scope_end();
}

/* One collective of x (0 all_max, 1 all_min, 2 sum_scatter, 3 all_gather),
 * summed to a scalar when `reduce`. */
typedef struct {
    int kind;
    bool reduce;
} collective_case;

static wf_status collective_body(void *payload, wf_array *const *in, size_t nin, wf_array **out,
                                 size_t *nout)
{
    (void)nin;
    const collective_case *c = payload;
    wf_array *y = c->kind == 0   ? wf_all_max(in[0], world)
                  : c->kind == 1 ? wf_all_min(in[0], world)
                  : c->kind == 2 ? wf_sum_scatter(in[0], world)
                                 : wf_all_gather(in[0], world);
    out[0] = c->reduce ? wf_sum(y, NULL, 0, false) : y;
    if (c->reduce)
        wf_release(y);
    *nout = 1;
    return out[0] ? WF_OK : wf_last_error();
}

/* The rank holding the largest (kind 0) or smallest (1) element i: the
 * ranks' float32 inputs differ at every i. */
static int extremum_rank(int kind, int64_t i)
{
    int best = 0;
    for (int r = 1; r < size_; r++) {
        const double v = input_value(WF_DTYPE_F32, r, i), b = input_value(WF_DTYPE_F32, best, i);
        if (kind == 0 ? v > b : v < b)
            best = r;
    }
    return best;
}

/* grad, jvp and vmap of all_max, all_min, sum_scatter and all_gather (of a
 * 0-d x): the loss is every rank's loss summed, so d/dx of sum(all_max(x))
 * is the rank count where this rank holds the maximum and 0 elsewhere, of
 * sum(sum_scatter(x)) 1, of sum(all_gather(x)) the rank count; the tangent
 * of all_max is the tangent of the rank holding the maximum; vmap runs one
 * collective over the batch. */
static void test_transforms_of_every_collective(void)
{
    wf_scope_begin();
    const int64_t shape[1] = {12}, batch_shape[2] = {3, 12};
    wf_array *x = input_array(WF_DTYPE_F32, rank_, shape, 1);
    wf_array *x0 = input_array(WF_DTYPE_F32, rank_, NULL, 0);
    for (int kind = 0; kind < 4; kind++) {
        collective_case reduced = {kind, true}, plain = {kind, false};
        wf_fn *body = wf_fn_new(collective_body, &reduced, NULL);
        wf_fn *grad = wf_grad(body, NULL, 0);
        wf_array *in = kind == 3 ? x0 : x, *g = NULL;
        size_t n = 1;
        if (CHECK_OK(wf_fn_call(grad, &in, 1, &g, &n)) && CHECK_OK(wf_eval(&g, 1))) {
            int bad = 0;
            for (int64_t i = 0; i < (kind == 3 ? 1 : 12); i++) {
                const double want = kind >= 2 ? (kind == 2 ? 1.0 : size_)
                                    : extremum_rank(kind, i) == rank_ ? size_ : 0.0;
                bad += element(g, i) != want;
            }
            if (!CHECK_EQ_INT(bad, 0))
                printf("    grad of collective %d on rank %d of %d\n", kind, rank_, size_);
        }
        if (kind < 2) {
            wf_array *tangent = wf_full(shape, 1, 1.0 + rank_, WF_DTYPE_F32);
            wf_array *primal_out = NULL, *tangent_out = NULL;
            n = 1;
            if (CHECK_OK(wf_jvp(body, &x, 1, &tangent, &primal_out, &tangent_out, &n)) &&
                CHECK_OK(wf_eval(&tangent_out, 1))) {
                double want = 0;
                for (int64_t i = 0; i < 12; i++)
                    want += 1.0 + extremum_rank(kind, i);
                CHECK(element(tangent_out, 0) == want);
            }
        }
        wf_fn *one = wf_fn_new(collective_body, &plain, NULL);
        wf_fn *mapped = wf_vmap(one, NULL, 0, NULL, 0);
        wf_array *batch = kind == 3 ? input_array(WF_DTYPE_F32, rank_, batch_shape, 1)
                                    : input_array(WF_DTYPE_F32, rank_, batch_shape, 2);
        wf_array *y = NULL;
        n = 1;
        if (CHECK_OK(wf_fn_call(mapped, &batch, 1, &y, &n)) && CHECK_OK(wf_eval(&y, 1))) {
            const int64_t *ys = wf_array_shape(y), block = 12 / size_;
            CHECK_EQ_INT(ys[0], 3);
            CHECK_EQ_INT(ys[1], kind == 2 ? block : kind == 3 ? size_ : 12);
            int bad = 0;
            for (int64_t b = 0; b < 3; b++)
                for (int64_t j = 0; j < ys[1]; j++) {
                    double want = 0;
                    if (kind < 2) {
                        want = input_value(WF_DTYPE_F32, extremum_rank(kind, b * 12 + j), b * 12 + j);
                    } else if (kind == 2) {
                        for (int r = 0; r < size_; r++)
                            want += input_value(WF_DTYPE_F32, r, b * 12 + rank_ * block + j);
                    } else {
                        want = input_value(WF_DTYPE_F32, (int)j, b);
                    }
                    bad += element(y, b * ys[1] + j) != want;
                }
            if (!CHECK_EQ_INT(bad, 0))
                printf("    vmap of collective %d on rank %d of %d\n", kind, rank_, size_);
        }
        wf_fn_release(mapped);
        wf_fn_release(one);
        wf_fn_release(grad);
        wf_fn_release(body);
    }
    wf_scope_end();
}

/* ---- large */

static void test_large_all_sum(void)
{
    if (SANITIZED)
        return; /* 64 MB per rank: release builds only */
    wf_scope_begin();
    const int64_t n = 16 * 1024 * 1024; /* 64 MB of float32 */
    wf_array *x = wf_add(wf_arange(0, (double)n, 1, WF_DTYPE_F32),
                         wf_full(NULL, 0, (double)rank_, WF_DTYPE_F32));
    wf_array *y = wf_all_sum(wf_remainder(x, wf_full(NULL, 0, 1024.0, WF_DTYPE_F32)), world);
    if (CHECK_OK(wf_eval(&y, 1))) {
        const float *d = NULL;
        wf_array_data(y, (const void **)&d);
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++) {
            float want = 0;
            for (int r = 0; r < size_; r++)
                want += (float)((i + r) % 1024);
            bad += d[i] != want;
        }
        CHECK_EQ_INT(bad, 0);
    }
    wf_scope_end();
}

/* ---- over 2 GiB (not in make test: `make distributed-large`) */

enum { HUGE_EXTRA = 77 };

static void free_external(void *data, void *ctx)
{
    (void)ctx;
    free(data);
}

/* n bytes, byte i = (i + rank) % 13 (NULL if memory is short). */
static wf_array *huge_bytes(int64_t n, int rank)
{
    unsigned char *data = malloc((size_t)n);
    if (!data)
        return NULL;
    for (int64_t i = 0; i < n; i++)
        data[i] = (unsigned char)((i + rank) % 13);
    const int64_t shape[1] = {n};
    return wf_array_from_external(data, shape, 1, WF_DTYPE_U8, NULL, free_external, NULL);
}

static void huge_report(const char *what, double start)
{
    if (rank_ == 0)
        printf("    %s: %.1f s\n", what, now_seconds() - start);
    fflush(stdout);
}

/* all_sum, all_gather and send/recv of more than INT_MAX bytes (and, for
 * the uint8 sum, elements) in one call. */
static void test_over_2_gib(void)
{
    const int64_t n = (int64_t)INT32_MAX + HUGE_EXTRA;
    wf_scope_begin();
    wf_array *x = huge_bytes(n, rank_);
    if (!CHECK_NOT_NULL(x)) {
        wf_scope_end();
        return;
    }
    double start = now_seconds();
    wf_array *y = wf_all_sum(x, world);
    if (CHECK_OK(wf_eval(&y, 1))) {
        huge_report("all_sum of 2 GiB + 77 uint8", start);
        const unsigned char *d = NULL;
        wf_array_data(y, (const void **)&d);
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++) {
            unsigned want = 0;
            for (int r = 0; r < size_; r++)
                want += (unsigned)((i + r) % 13);
            bad += d[i] != (unsigned char)want;
        }
        CHECK_EQ_INT(bad, 0);
    }
    wf_release(y);
    start = now_seconds();
    const int peer = rank_ ^ 1;
    wf_array *moved = rank_ % 2 == 0 ? wf_send(x, peer, world)
                                     : wf_recv(wf_array_shape(x), 1, WF_DTYPE_U8, peer, world);
    const bool moved_ok = CHECK_OK(wf_eval(&moved, 1));
    if (moved_ok)
        huge_report("send/recv of 2 GiB + 77 bytes (the sender's time)", start);
    if (moved_ok && rank_ % 2) {
        const unsigned char *d = NULL;
        wf_array_data(moved, (const void **)&d);
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++)
            bad += d[i] != (unsigned char)((i + peer) % 13);
        CHECK_EQ_INT(bad, 0);
    }
    wf_release(moved);
    wf_release(x);
    /* Each rank's part fits int, the gathered whole does not. */
    const int64_t part = (int64_t)INT32_MAX / size_ + HUGE_EXTRA;
    wf_array *p = huge_bytes(part, rank_);
    start = now_seconds();
    wf_array *g = p ? wf_all_gather(p, world) : NULL;
    if (CHECK_NOT_NULL(g) && CHECK_OK(wf_eval(&g, 1))) {
        huge_report("all_gather to 2 GiB + 77 x ranks bytes", start);
        const unsigned char *d = NULL;
        wf_array_data(g, (const void **)&d);
        int64_t bad = 0;
        for (int r = 0; r < size_; r++)
            for (int64_t i = 0; i < part; i++)
                bad += d[r * part + i] != (unsigned char)((i + r) % 13);
        CHECK_EQ_INT(bad, 0);
    }
    wf_scope_end();
}

/* ---- mismatch: every rank must see the error, and the group stays usable */

static void expect_mismatch(wf_array *y, const char *what)
{
    wf_status st = y ? wf_eval(&y, 1) : wf_last_error();
    if (!CHECK_STATUS(st, WF_ERR_DISTRIBUTED))
        printf("    rank %d: %s did not fail\n", rank_, what);
    else
        CHECK_STR_CONTAINS(wf_last_error_message(), "do not match");
    wf_clear_error();
}

static void test_mismatch_fails_on_every_rank(void)
{
    wf_scope_begin();
    const int64_t n10[1] = {10}, n11[1] = {11};
    /* Size: rank 0 sums 11 elements, the others 10. */
    expect_mismatch(wf_all_sum(input_array(WF_DTYPE_F32, rank_, rank_ == 0 ? n11 : n10, 1),
                               world),
                    "a size mismatch");
    /* Dtype: the last rank sends int32. */
    expect_mismatch(wf_all_sum(input_array(rank_ == size_ - 1 ? WF_DTYPE_I32 : WF_DTYPE_F32,
                                           rank_, n10, 1),
                               world),
                    "a dtype mismatch");
    /* Shape: the same 12 elements as (3, 4) on rank 0, (4, 3) elsewhere. */
    const int64_t s34[2] = {3, 4}, s43[2] = {4, 3};
    expect_mismatch(wf_all_gather(input_array(WF_DTYPE_F32, rank_, rank_ == 0 ? s34 : s43, 2),
                                  world),
                    "a shape mismatch");
    /* Op: rank 1 runs all_max where the others run all_sum. */
    wf_array *x = input_array(WF_DTYPE_F32, rank_, n10, 1);
    expect_mismatch(rank_ == 1 ? wf_all_max(x, world) : wf_all_sum(x, world), "an op mismatch");
    /* Rank 0's input fails when evaluated (an index out of range): rank 0
     * reports that error, every other rank a distributed error, none waits. */
    {
        const int64_t one[1] = {1};
        const int32_t index = rank_ == 0 ? 1000 : 3;
        wf_array *taken = wf_take(x, wf_array_from_data(&index, one, 1, WF_DTYPE_I32), 0);
        wf_array *y = wf_all_sum(taken, world);
        const wf_status st = wf_eval(&y, 1);
        CHECK_STATUS(st, rank_ == 0 ? WF_ERR_INVALID_ARGUMENT : WF_ERR_DISTRIBUTED);
        if (rank_ != 0)
            CHECK_STR_CONTAINS(wf_last_error_message(), "input of rank 0 failed");
        wf_clear_error();
        /* The same through a send whose input fails: the receiver fails too. */
        if (rank_ < 2) {
            wf_array *z = rank_ == 0 ? wf_send(taken, 1, world)
                                     : wf_recv(one, 1, WF_DTYPE_F32, 0, world);
            CHECK_STATUS(wf_eval(&z, 1), rank_ == 0 ? WF_ERR_INVALID_ARGUMENT
                                                    : WF_ERR_DISTRIBUTED);
            wf_clear_error();
        }
    }
    /* After the errors the group still matches. */
    wf_array *y = wf_all_sum(x, world);
    if (CHECK_OK(wf_eval(&y, 1))) {
        double want = 0;
        for (int r = 0; r < size_; r++)
            want += input_value(WF_DTYPE_F32, r, 3);
        CHECK(element(y, 3) == want);
    }
    /* send / recv: the receiver asks for another shape; both sides fail. */
    if (size_ >= 2 && rank_ < 2) {
        const int64_t other[1] = {9};
        wf_array *z = rank_ == 0 ? wf_send(x, 1, world)
                                 : wf_recv(other, 1, WF_DTYPE_F32, 0, world);
        expect_mismatch(z, "a send/recv mismatch");
    }
    wf_scope_end();
}

/* ---- a rank that dies: the others block in a collective that never
 * completes; mpirun sees the dead rank and ends the job non-zero. */
static int scenario_early_exit(void)
{
    if (rank_ == size_ - 1) {
        fprintf(stderr, "rank %d: exiting early on purpose\n", rank_);
        _exit(3);
    }
    const int64_t n[1] = {1000};
    wf_array *y = wf_all_sum(input_array(WF_DTYPE_F32, rank_, n, 1), world);
    wf_status st = wf_eval(&y, 1); /* should never return: the job is killed */
    fprintf(stderr, "rank %d: all_sum returned %s\n", rank_, wf_status_name(st));
    return st == WF_OK ? 4 : 5;
}

/* ---- over a network: two all_sums of 4 MB and an all_gather of 1 MB */

enum { NET_FLOATS = 1 << 20, NET_GATHER_FLOATS = 1 << 18 };

static void test_network_payload(void)
{
    wf_scope_begin();
    const int64_t shape[1] = {NET_FLOATS}, small[1] = {NET_GATHER_FLOATS};
    wf_array *x = input_array(WF_DTYPE_F32, rank_, shape, 1);
    wf_array *outs[3] = {wf_all_sum(x, world), wf_all_sum(wf_negative(x), world),
                         wf_all_gather(input_array(WF_DTYPE_F32, rank_, small, 1), world)};
    if (CHECK_OK(wf_eval(outs, 3))) {
        int bad = 0;
        for (int64_t i = 0; i < NET_FLOATS; i += 997) {
            double want = 0;
            for (int r = 0; r < size_; r++)
                want += input_value(WF_DTYPE_F32, r, i);
            bad += element(outs[0], i) != want || element(outs[1], i) != -want;
        }
        for (int r = 0; r < size_; r++)
            bad += element(outs[2], (int64_t)r * NET_GATHER_FLOATS + 5) !=
                   input_value(WF_DTYPE_F32, r, 5);
        CHECK_EQ_INT(bad, 0);
    }
    wf_scope_end();
}

static int64_t arrays0, groups0;

/* Every array the scenario made is gone, and every group but the world. */
static void test_nothing_left_alive(void)
{
    /* The communication stream's worker may free a task's inputs just after
     * the evaluation waiting for the task woke up: allow it a moment. */
    for (int i = 0; i < 100 && live_arrays() != arrays0; i++)
        usleep(20000);
    if (!CHECK_EQ_INT(live_arrays(), arrays0) | !CHECK_EQ_INT(wf__groups_live(), groups0))
        printf("    on rank %d of %d\n", rank_, size_);
}

/* Mismatches at the edge of and past the arrays that ride with the headers
 * (3952 bytes): the headers still go first, so every rank fails before any
 * piece moves, and the group's next collectives get the right data (nothing
 * of the failed ones is left in flight). */
static void test_mismatch_past_the_frame(void)
{
    wf_scope_begin();
    /* 988 float32 fill the frame exactly, 989 do not: rank 0's would ride
     * with the headers, the others' would take the piece path. */
    const int64_t fits[1] = {988}, past[1] = {989};
    expect_mismatch(wf_all_sum(input_array(WF_DTYPE_F32, rank_, rank_ == 0 ? fits : past, 1),
                               world),
                    "a size mismatch at the frame's edge");
    /* 1.2 MB of float32: several pieces per block on 2, 3 and 4 ranks. */
    const int64_t big[1] = {300000}, bigger[1] = {300007};
    expect_mismatch(wf_all_sum(input_array(WF_DTYPE_F32, rank_, rank_ == size_ - 1 ? bigger : big,
                                           1),
                               world),
                    "a size mismatch past the frame");
    expect_mismatch(wf_all_sum(input_array(rank_ == 0 ? WF_DTYPE_I32 : WF_DTYPE_F32, rank_, big,
                                           1),
                               world),
                    "a dtype mismatch of as many bytes");
    wf_array *x = input_array(WF_DTYPE_F32, rank_, big, 1);
    expect_mismatch(rank_ == 1 ? wf_sum_scatter(x, world) : wf_all_sum(x, world),
                    "an op mismatch past the frame");
    check_reduce(0, WF_DTYPE_F32, big, 1);
    check_reduce(0, WF_DTYPE_F32, fits, 1);
    check_reduce(0, WF_DTYPE_F32, past, 1);
    wf_scope_end();
}

static int run_worker(const char *scenario)
{
    world = wf_group_init(true);
    if (!world) {
        fprintf(stderr, "worker: %s\n", wf_last_error_message());
        return 1;
    }
    rank_ = wf_group_rank(world);
    size_ = wf_group_size(world);
    /* The ranks' own leak check (under ASan, LeakSanitizer is off in the
     * ranks: it cannot tell Open MPI's memory kept until exit from a leak). */
    arrays0 = live_arrays();
    groups0 = wf__groups_live();
    if (strcmp(scenario, "early_exit") == 0)
        return scenario_early_exit();
    if (strcmp(scenario, "collectives") == 0) {
        RUN_TEST(test_every_collective_every_dtype);
        RUN_TEST(test_layouts);
        RUN_TEST(test_max_min_propagate_nan);
        RUN_TEST(test_all_sum_is_deterministic);
        RUN_TEST(test_send_recv);
        RUN_TEST(test_threads_on_one_group);
        RUN_TEST(test_threads_on_split_groups);
        RUN_TEST(test_split_failures);
        RUN_TEST(test_grad_and_compile);
        RUN_TEST(test_vmap_and_jvp);
        RUN_TEST(test_transforms_of_every_collective);
        RUN_TEST(test_mismatch_fails_on_every_rank);
        RUN_TEST(test_mismatch_past_the_frame);
    } else if (strcmp(scenario, "network") == 0) {
        RUN_TEST(test_network_payload);
    } else if (strcmp(scenario, "large") == 0) {
        RUN_TEST(test_large_all_sum);
    } else if (strcmp(scenario, "pieces") == 0) { /* under a small message limit */
        RUN_TEST(test_every_collective_every_dtype);
        RUN_TEST(test_all_sum_is_deterministic);
        RUN_TEST(test_send_recv);
    } else if (strcmp(scenario, "over_2_gib") == 0) {
        RUN_TEST(test_over_2_gib);
    } else {
        fprintf(stderr, "worker: unknown scenario %s\n", scenario);
        return 1;
    }
    RUN_TEST(test_nothing_left_alive);
    wf_group_release(world);
    return TEST_SUMMARY();
}

/* ------------------------------------------------------------ the driver */

static void test_group_of_one(void)
{
    wf_group *g = wf_group_init(false);
    if (!CHECK_NOT_NULL(g))
        return;
    CHECK_EQ_INT(wf_group_rank(g), 0);
    CHECK_EQ_INT(wf_group_size(g), 1);
    CHECK_NULL_WITH(wf_group_init(true), WF_ERR_UNSUPPORTED);
    wf_scope_begin();
    const int64_t shape[2] = {3, 2};
    for (int t = 0; t < NDTYPES; t++) {
        wf_array *x = input_array(all_dtypes[t], 0, shape, 2);
        wf_array *outs[5] = {wf_all_sum(x, g), wf_all_gather(x, NULL), wf_sum_scatter(x, g),
                             all_dtypes[t] == WF_DTYPE_C64 ? wf_all_sum(x, g) : wf_all_max(x, g),
                             all_dtypes[t] == WF_DTYPE_C64 ? wf_all_sum(x, g) : wf_all_min(x, g)};
        if (!CHECK_OK(wf_eval(outs, 5)))
            continue;
        int bad = 0;
        for (int k = 0; k < 5; k++)
            for (int i = 0; i < 6; i++)
                bad += element(outs[k], i) != input_value(all_dtypes[t], 0, i);
        CHECK_EQ_INT(bad, 0);
    }
    /* Past the 3952 bytes that ride with the headers: the piece path with no peers. */
    const int64_t big[2] = {1000, 3};
    wf_array *y = input_array(WF_DTYPE_F64, 0, big, 2);
    wf_array *big_outs[3] = {wf_all_sum(y, g), wf_all_gather(y, g), wf_sum_scatter(y, g)};
    if (CHECK_OK(wf_eval(big_outs, 3))) {
        int bad = 0;
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < 3000; i++)
                bad += element(big_outs[k], i) != input_value(WF_DTYPE_F64, 0, i);
        CHECK_EQ_INT(bad, 0);
    }
    wf_group *split = wf_group_split(g, 3, -1);
    CHECK(split && wf_group_size(split) == 1);
    wf_group_release(split);
    wf_array *x = input_array(WF_DTYPE_F32, 0, shape, 2);
    CHECK_NULL_WITH(wf_send(x, 0, g), WF_ERR_INVALID_ARGUMENT);
    CHECK_NULL_WITH(wf_recv(shape, 2, WF_DTYPE_F32, 1, g), WF_ERR_INVALID_ARGUMENT);
    CHECK_NULL_WITH(wf_all_max(wf_astype(x, WF_DTYPE_C64), g), WF_ERR_DTYPE);
    const int64_t odd[1] = {3};
    CHECK_NULL_WITH(wf_group_split(g, -1, 0), WF_ERR_INVALID_ARGUMENT);
    CHECK_NULL_WITH(wf_all_sum(NULL, g), WF_ERR_NULL_ARGUMENT);
    (void)odd;
    wf_scope_end();
    wf_group_release(g);
}

static char self_path[4096];

/* Runs `mpirun [options] -np N self --worker SCENARIO`; its exit status
 * (-1: not run) and its duration in seconds. */
static int mpirun_with(const char *options, int np, const char *scenario, double *seconds)
{
    char command[8192];
    snprintf(command, sizeof command,
             "mpirun --allow-run-as-root --oversubscribe --bind-to none "
             "--mca mpi_yield_when_idle 1 %s -np %d --mca btl self,vader,tcp %s --worker %s",
             options, np, self_path, scenario);
    printf("  $ %s\n", command);
    fflush(stdout);
    const double start = now_seconds();
    int status = system(command);
    *seconds = now_seconds() - start;
    printf("    -> exit %d after %.1f s\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
           *seconds);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int mpirun(int np, const char *scenario, double *seconds)
{
    return mpirun_with("", np, scenario, seconds);
}

static void test_collectives_on_2_3_4_ranks(void)
{
    for (int np = 2; np <= 4; np++) {
        double seconds;
        CHECK_EQ_INT(mpirun(np, "collectives", &seconds), 0);
    }
}

static void test_large_arrays_on_2_ranks(void)
{
    double seconds;
    CHECK_EQ_INT(mpirun(2, "large", &seconds), 0);
}

/* Messages of at most 1003 bytes (rounded down to whole elements): every
 * block, gather and payload travels in many pieces, as arrays over 2 GiB do. */
static void test_many_pieces_on_2_and_3_ranks(void)
{
    for (int np = 2; np <= 3; np++) {
        double seconds;
        CHECK_EQ_INT(mpirun_with("-x WEFT_DISTRIBUTED_MAX_MESSAGE=1003", np, "pieces", &seconds),
                     0);
    }
}

/* The bound: mpirun ends the job once it sees the dead rank. */
enum { DEAD_RANK_BOUND_SECONDS = 60 };

static void test_dead_rank_ends_the_job(void)
{
    double seconds;
    const int code = mpirun(3, "early_exit", &seconds);
    CHECK(code != 0);
    CHECK(seconds < DEAD_RANK_BOUND_SECONDS);
}

/* ---- two ranks in two network namespaces joined by a veth pair: rank 0
 * runs in namespace A (mpirun's), rank 1 in B, started through an
 * rsh agent that enters B (with its own host name), so the ranks are two
 * hosts to Open MPI and talk TCP over the veth (shared memory is off). */

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    char command[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(command, sizeof command, fmt, ap);
    va_end(ap);
    int status = system(command);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The counter `which` (tx_bytes / rx_bytes) of `dev` in `ns`. */
static long long veth_counter(const char *ns, const char *dev, const char *which)
{
    char command[512];
    snprintf(command, sizeof command,
             "ip netns exec %s cat /sys/class/net/%s/statistics/%s", ns, dev, which);
    FILE *f = popen(command, "r");
    long long v = -1;
    if (f) {
        if (fscanf(f, "%lld", &v) != 1)
            v = -1;
        pclose(f);
    }
    return v;
}

static void test_two_hosts_over_a_veth_pair(void)
{
    const int id = (int)getpid();
    char ns_a[32], ns_b[32], dev_a[16], dev_b[16], dir[64] = "/tmp/weft-netns-XXXXXX";
    snprintf(ns_a, sizeof ns_a, "weftA%d", id);
    snprintf(ns_b, sizeof ns_b, "weftB%d", id);
    snprintf(dev_a, sizeof dev_a, "wfa%d", id % 100000);
    snprintf(dev_b, sizeof dev_b, "wfb%d", id % 100000);
    if (sh("ip netns add %s 2>/dev/null", ns_a) != 0) {
        printf("  SKIP the network test: `ip netns add` failed (needs root and network "
               "namespaces)\n");
        return;
    }
    if (!CHECK(mkdtemp(dir) != NULL)) {
        sh("ip netns del %s", ns_a);
        return;
    }
    CHECK_EQ_INT(sh("ip netns add %s && ip link add %s type veth peer name %s && "
                    "ip link set %s netns %s && ip link set %s netns %s && "
                    "ip -n %s addr add 10.77.0.1/24 dev %s && ip -n %s addr add 10.77.0.2/24 dev %s && "
                    "ip -n %s link set %s up && ip -n %s link set %s up && "
                    "ip -n %s link set lo up && ip -n %s link set lo up",
                    ns_b, dev_a, dev_b, dev_a, ns_a, dev_b, ns_b, ns_a, dev_a, ns_b, dev_b, ns_a,
                    dev_a, ns_b, dev_b, ns_a, ns_b),
                 0);
    /* The rsh agent: `agent HOST COMMAND...` runs COMMAND in namespace B. */
    char path[128];
    snprintf(path, sizeof path, "%s/agent", dir);
    FILE *agent = fopen(path, "w");
    if (agent) {
        fprintf(agent, "#!/bin/sh\nshift\nexec ip netns exec %s unshare --uts sh -c "
                       "\"hostname weft-host-b; $*\"\n", ns_b);
        fclose(agent);
        chmod(path, 0700);
    }
    snprintf(path, sizeof path, "%s/hosts", dir);
    FILE *hosts = fopen(path, "w");
    if (hosts) {
        fprintf(hosts, "10.77.0.1 slots=1\n10.77.0.2 slots=1\n");
        fclose(hosts);
    }
    CHECK(agent && hosts);
    const long long tx0 = veth_counter(ns_a, dev_a, "tx_bytes");
    const long long rx0 = veth_counter(ns_a, dev_a, "rx_bytes");
    const double start = now_seconds();
    const int code =
        sh("ip netns exec %s mpirun --allow-run-as-root --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 -np 2 "
           "--hostfile %s/hosts --mca plm_rsh_agent %s/agent --mca btl tcp,self "
           "--mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 "
           "%s --worker network",
           ns_a, dir, dir, self_path);
    const long long tx = veth_counter(ns_a, dev_a, "tx_bytes") - tx0;
    const long long rx = veth_counter(ns_a, dev_a, "rx_bytes") - rx0;
    /* Rank 0 sends half of each 4 MB all_sum in the exchange and half in
     * the gather-back, and its 1 MB to the all_gather; it receives as much. */
    const long long payload = 2LL * NET_FLOATS * 4 + NET_GATHER_FLOATS * 4;
    printf("    -> exit %d after %.1f s; veth %s sent %lld bytes, received %lld (payload %lld)\n",
           code, now_seconds() - start, dev_a, tx, rx, payload);
    CHECK_EQ_INT(code, 0);
    CHECK(tx >= payload);
    CHECK(rx >= payload);
    sh("ip netns del %s; ip netns del %s; rm -rf %s", ns_a, ns_b, dir);
}

/* Under AddressSanitizer the ranks run with LeakSanitizer off: Open MPI
 * keeps memory until exit in plugins it unloads, which LeakSanitizer
 * reports as leaks of unknown modules. Memory errors are still caught, and
 * each rank checks that weft's arrays and groups all went away. */
static void ranks_without_leak_check(void)
{
    if (!SANITIZED)
        return;
    char options[1024];
    const char *user = getenv("ASAN_OPTIONS");
    snprintf(options, sizeof options, "%s%sdetect_leaks=0", user ? user : "",
             user && *user ? ":" : "");
    setenv("ASAN_OPTIONS", options, 1);
}

/* Two ranks, each about 5 GB at its peak (input, output and half an input
 * of scratch): run once by hand (make distributed-large), not in make test. */
static int run_over_2_gib(const char *argv0)
{
    ssize_t len = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (len <= 0)
        snprintf(self_path, sizeof self_path, "%s", argv0);
    unsetenv("OMPI_COMM_WORLD_SIZE");
    double seconds;
    const int code = mpirun(2, "over_2_gib", &seconds);
    return code != 0;
}

static bool have_mpirun(void)
{
    return system("command -v mpirun >/dev/null 2>&1") == 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--worker") == 0)
        return run_worker(argv[2]);
    if (argc == 2 && strcmp(argv[1], "--over-2-gib") == 0) /* make distributed-large */
        return run_over_2_gib(argv[0]);
    ssize_t len = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (len <= 0)
        snprintf(self_path, sizeof self_path, "%s", argv[0]);
    unsetenv("OMPI_COMM_WORLD_SIZE"); /* the driver is never a rank itself */
    RUN_TEST(test_group_of_one);
    if (THREAD_SANITIZED) {
        printf("  skip the mpirun tests: Open MPI is not built with ThreadSanitizer, so its\n"
               "  own threads would be reported (they run in the release and ASan builds)\n");
    } else if (!have_mpirun() || !wf_distributed_is_available()) {
        printf("  FAIL: mpirun or libmpi.so.40 missing: run scripts/install-deps.sh "
               "(openmpi-bin, libopenmpi-dev)\n");
        return 1;
    } else {
        ranks_without_leak_check();
        RUN_TEST(test_collectives_on_2_3_4_ranks);
        RUN_TEST(test_many_pieces_on_2_and_3_ranks);
        if (!SANITIZED)
            RUN_TEST(test_large_arrays_on_2_ranks);
        RUN_TEST(test_dead_rank_ends_the_job);
        RUN_TEST(test_two_hosts_over_a_veth_pair);
    }
    return TEST_SUMMARY();
}
