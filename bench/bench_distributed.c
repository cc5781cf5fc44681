/*
 * wf_all_sum beside a plain MPI_Allreduce of the same float32 buffers,
 * 4 KB .. 256 MB (issue 29).
 *
 *   bench_distributed            launches itself: mpirun -np 2, then -np 4
 *   bench_distributed --rank     one rank of such a run (under mpirun)
 *   WEFT_BENCH_MAX_MB=64         stops at 64 MB
 *   WEFT_BENCH_MIN_KB=1024       starts at 1 MB
 *   WEFT_BENCH_RANKS=2           only 2 ranks (default 2 then 4; a list: 2,3,4)
 *   WEFT_BENCH_ROUNDS=7          rounds per size (weft and MPI interleaved)
 *   WEFT_BENCH_MPIRUN_ARGS=...   mpirun options (default: --mca mpi_yield_when_idle 1,
 *                                as the tests and make targets: waiting ranks yield
 *                                their core, which matters on a shared machine)
 *
 * Each size runs `rounds` rounds, each timing weft then MPI (or MPI then
 * weft, alternating) over the same number of calls; the table gives the
 * median time of each and the median, least and greatest of the rounds'
 * ratios, and the median CPU time per call of rank 0 (all its threads: on a
 * loaded machine, the work done rather than the wait for a core). The
 * first line per rank count is the fixed cost of a call. Sizes: 4, 16, 64,
 * 256, 512 KB, 1, 2, 4, 16, 64, 256 MB. "extra us" is the median of the
 * rounds' weft time minus MPI time: weft's overhead per call beside
 * MPI_Allreduce (the figure that matters below 1 MB).
 *
 * weft's all_sum exchanges headers (small arrays, or small blocks of
 * them, ride along), moves larger blocks in pipelined pieces with
 * nonblocking point-to-point messages, adds them in rank order itself and
 * sends the sums back (the same bits on every rank); MPI_Allreduce lets
 * Open MPI pick its algorithm and order. Both include the ranks' waiting
 * for each other; weft's also building the node and allocating the output
 * (what a user pays). MPI's
 * entry points are looked up in the libmpi.so.40 weft loaded (dlopen).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "weft.h"

typedef void *mpi_handle;
static struct {
    int (*Allreduce)(const void *, void *, int, mpi_handle, mpi_handle, mpi_handle);
    int (*Barrier)(mpi_handle);
    int (*Isend)(const void *, int, mpi_handle, int, int, mpi_handle, mpi_handle *);
    int (*Irecv)(void *, int, mpi_handle, int, int, mpi_handle, mpi_handle *);
    int (*Waitall)(int, mpi_handle *, void *);
    mpi_handle world, float32, sum, byte;
} mpi;

static int load_mpi(void)
{
    void *lib = dlopen("libmpi.so.40", RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
    if (!lib)
        return 0;
    *(void **)&mpi.Allreduce = dlsym(lib, "MPI_Allreduce");
    *(void **)&mpi.Barrier = dlsym(lib, "MPI_Barrier");
    *(void **)&mpi.Isend = dlsym(lib, "MPI_Isend");
    *(void **)&mpi.Irecv = dlsym(lib, "MPI_Irecv");
    *(void **)&mpi.Waitall = dlsym(lib, "MPI_Waitall");
    mpi.byte = dlsym(lib, "ompi_mpi_byte");
    mpi.world = dlsym(lib, "ompi_mpi_comm_world");
    mpi.float32 = dlsym(lib, "ompi_mpi_float");
    mpi.sum = dlsym(lib, "ompi_mpi_op_sum");
    return mpi.Allreduce && mpi.Barrier && mpi.Isend && mpi.Irecv && mpi.Waitall && mpi.world &&
           mpi.float32 && mpi.sum && mpi.byte;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The CPU time (all of this rank's threads) per call of the last round timed. */
static double last_cpu;

/* 4 KB .. 256 KB by 4, then by 2 up to 4 MB, then by 4. */
static size_t next_size(size_t bytes)
{
    return bytes >= ((size_t)256 << 10) && bytes < ((size_t)4 << 20) ? 2 * bytes : 4 * bytes;
}

static int iterations_for(size_t bytes)
{
    const size_t budget = (size_t)16 << 20; /* about 16 MB moved per round */
    size_t n = budget / bytes;
    return n < 2 ? 2 : n > 100 ? 100 : (int)n;
}

static void eval_all_sum(wf_group *g, wf_array *x)
{
    wf_array *y = wf_all_sum(x, g);
    if (wf_eval(&y, 1) != WF_OK) {
        fprintf(stderr, "all_sum: %s\n", wf_last_error_message());
        exit(1);
    }
    wf_release(y);
}

/* Seconds per call of one round of each contender; the ranks start it together. */
static double time_weft(wf_group *g, wf_array *x, int iterations)
{
    mpi.Barrier(mpi.world);
    const double start = now(), cpu = cpu_now();
    for (int i = 0; i < iterations; i++)
        eval_all_sum(g, x);
    last_cpu = (cpu_now() - cpu) / iterations;
    return (now() - start) / iterations;
}

static double time_mpi(const float *in, float *out, int count, int iterations)
{
    mpi.Barrier(mpi.world);
    const double start = now(), cpu = cpu_now();
    for (int i = 0; i < iterations; i++)
        mpi.Allreduce(in, out, count, mpi.float32, mpi.sum, mpi.world);
    last_cpu = (cpu_now() - cpu) / iterations;
    return (now() - start) / iterations;
}

/* weft's header (src/distributed/collective.c), which goes alone to every
 * other rank when the array does not ride with it. */
enum { HEADER_BYTES = 48, MAX_RANKS = 64 };

/* What weft's header exchange costs alone: one HEADER_BYTES message from
 * each rank to each other, receives posted first. */
static double time_header(unsigned char *frames, int rank, int size, int iterations)
{
    mpi_handle requests[2 * MAX_RANKS];
    mpi.Barrier(mpi.world);
    const double start = now();
    for (int i = 0; i < iterations; i++) {
        int used = 0;
        for (int j = 0; j < size; j++)
            if (j != rank)
                mpi.Irecv(frames + (size_t)j * HEADER_BYTES, HEADER_BYTES, mpi.byte, j, 7,
                          mpi.world, &requests[used++]);
        for (int j = 0; j < size; j++)
            if (j != rank)
                mpi.Isend(frames + (size_t)rank * HEADER_BYTES, HEADER_BYTES, mpi.byte, j, 7,
                          mpi.world, &requests[used++]);
        mpi.Waitall(used, requests, NULL);
    }
    return (now() - start) / iterations;
}

static int by_value(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

enum { MAX_ROUNDS = 31 };

static int run_rank(void)
{
    wf_group *g = wf_group_init(true);
    if (!g || !load_mpi()) {
        fprintf(stderr, "bench_distributed: %s\n", g ? "MPI symbols missing" : wf_last_error_message());
        return 1;
    }
    const int rank = wf_group_rank(g), size = wf_group_size(g);
    const char *max_env = getenv("WEFT_BENCH_MAX_MB"), *rounds_env = getenv("WEFT_BENCH_ROUNDS");
    const char *min_env = getenv("WEFT_BENCH_MIN_KB");
    const size_t max_bytes = (size_t)(max_env ? atoi(max_env) : 256) << 20;
    const size_t min_bytes = (size_t)(min_env ? atoi(min_env) : 0) << 10;
    int rounds = rounds_env ? atoi(rounds_env) : 7;
    rounds = rounds < 1 ? 1 : rounds > MAX_ROUNDS ? MAX_ROUNDS : rounds;
    if (size > MAX_RANKS) {
        fprintf(stderr, "bench_distributed: at most %d ranks\n", MAX_RANKS);
        return 1;
    }
    unsigned char *frames = calloc((size_t)size, HEADER_BYTES);
    /* The fixed cost of one weft all_sum: a 1-element array (header exchange included). */
    const int64_t one_shape[1] = {1};
    const float one_value = 1.0f;
    wf_array *one = wf_array_from_data(&one_value, one_shape, 1, WF_DTYPE_F32);
    double fixed[MAX_ROUNDS], header[MAX_ROUNDS];
    for (int round = 0; round < rounds; round++) {
        fixed[round] = time_weft(g, one, 200);
        header[round] = time_header(frames, rank, size, 200);
    }
    if (rank == 0)
        printf("%d ranks: fixed cost per call, median of %d rounds: weft all_sum of 1 float "
               "%.1f us, its header exchange alone (a %d-byte message to and from each rank) %.1f us\n"
               "%d ranks %10s %10s %10s %9s %9s %7s %13s %9s %9s %9s\n",
               size, rounds, median(fixed, rounds) * 1e6, (int)HEADER_BYTES,
               median(header, rounds) * 1e6, size,
               "bytes", "weft us", "MPI us", "weft GB/s", "MPI GB/s", "ratio", "ratio min-max",
               "extra us", "weft cpu", "MPI cpu");
    wf_release(one);
    free(frames);
    for (size_t bytes = 4096; bytes <= max_bytes; bytes = next_size(bytes)) {
        if (bytes < min_bytes)
            continue;
        const int count = (int)(bytes / sizeof(float));
        float *in = malloc(bytes), *out = malloc(bytes);
        for (int i = 0; i < count; i++)
            in[i] = (float)((i + rank) % 97);
        const int64_t shape[1] = {count};
        wf_array *x = wf_array_from_data(in, shape, 1, WF_DTYPE_F32);
        const int iterations = iterations_for(bytes);
        time_weft(g, x, 1); /* warm up both */
        time_mpi(in, out, count, 1);
        double weft[MAX_ROUNDS], plain[MAX_ROUNDS], ratio[MAX_ROUNDS], extra[MAX_ROUNDS];
        double weft_cpu[MAX_ROUNDS], plain_cpu[MAX_ROUNDS];
        for (int round = 0; round < rounds; round++) { /* interleaved, order alternating */
            if (round % 2) {
                plain[round] = time_mpi(in, out, count, iterations);
                plain_cpu[round] = last_cpu;
                weft[round] = time_weft(g, x, iterations);
                weft_cpu[round] = last_cpu;
            } else {
                weft[round] = time_weft(g, x, iterations);
                weft_cpu[round] = last_cpu;
                plain[round] = time_mpi(in, out, count, iterations);
                plain_cpu[round] = last_cpu;
            }
            ratio[round] = plain[round] / weft[round];
            extra[round] = weft[round] - plain[round];
        }
        const double w = median(weft, rounds), m = median(plain, rounds);
        const double wc = median(weft_cpu, rounds), mc = median(plain_cpu, rounds);
        const double r = median(ratio, rounds); /* sorts ratio: [0] min, [rounds-1] max */
        if (rank == 0) /* bus bandwidth as nccl-tests count it: 2 (n-1)/n bytes */
            printf("%d ranks %10zu %10.1f %10.1f %9.2f %9.2f %7.2f %6.2f-%-6.2f %9.1f %9.1f "
                   "%9.1f\n",
                   size, bytes, w * 1e6, m * 1e6, 2.0 * (size - 1) / size * bytes / w / 1e9,
                   2.0 * (size - 1) / size * bytes / m / 1e9, r, ratio[0], ratio[rounds - 1],
                   median(extra, rounds) * 1e6, wc * 1e6, mc * 1e6);
        fflush(stdout);
        wf_release(x);
        free(in);
        free(out);
    }
    wf_group_release(g);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--rank") == 0)
        return run_rank();
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return 1;
    self[len] = '\0';
    printf("wf_all_sum vs MPI_Allreduce (float32), local ranks; ratio = weft throughput / "
           "MPI's\n");
    fflush(stdout);
    const char *extra = getenv("WEFT_BENCH_MPIRUN_ARGS");
    if (!extra)
        extra = "--mca mpi_yield_when_idle 1";
    const char *ranks = getenv("WEFT_BENCH_RANKS");
    if (!ranks)
        ranks = "2,4";
    int status = 0;
    for (const char *at = ranks; *at; at += *at == ',') {
        char *end;
        const long np = strtol(at, &end, 10);
        if (end == at || np < 1 || np > 64) {
            fprintf(stderr, "WEFT_BENCH_RANKS: a list of rank counts, as 2,4\n");
            return 1;
        }
        at = end;
        char command[8192];
        snprintf(command, sizeof command,
                 "mpirun --allow-run-as-root --oversubscribe --bind-to none %s -np %ld %s --rank",
                 extra, np, self);
        status |= system(command);
    }
    return status != 0;
}
