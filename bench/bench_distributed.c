/*
 * wf_all_sum beside a plain MPI_Allreduce of the same float32 buffers,
 * 4 KB .. 256 MB (issue 29).
 *
 *   bench_distributed            launches itself: mpirun -np 2, then -np 4
 *   bench_distributed --rank     one rank of such a run (under mpirun)
 *   WEFT_BENCH_MAX_MB=64         stops at 64 MB
 *
 * weft's all_sum exchanges a header, moves blocks with MPI_Alltoallv, adds
 * them in rank order itself and gathers them back with MPI_Allgatherv (the
 * same bits on every rank); MPI_Allreduce lets Open MPI pick its algorithm
 * and order. Both include the ranks' waiting for each other; weft's also
 * building the node and allocating the output (what a user pays). MPI's
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
    mpi_handle world, float32, sum;
} mpi;

static int load_mpi(void)
{
    void *lib = dlopen("libmpi.so.40", RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
    if (!lib)
        return 0;
    *(void **)&mpi.Allreduce = dlsym(lib, "MPI_Allreduce");
    *(void **)&mpi.Barrier = dlsym(lib, "MPI_Barrier");
    mpi.world = dlsym(lib, "ompi_mpi_comm_world");
    mpi.float32 = dlsym(lib, "ompi_mpi_float");
    mpi.sum = dlsym(lib, "ompi_mpi_op_sum");
    return mpi.Allreduce && mpi.Barrier && mpi.world && mpi.float32 && mpi.sum;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int iterations_for(size_t bytes)
{
    const size_t budget = (size_t)64 << 20; /* about 64 MB moved per measurement */
    size_t n = budget / bytes;
    return n < 3 ? 3 : n > 200 ? 200 : (int)n;
}

static double time_weft(wf_group *g, wf_array *x, int iterations)
{
    mpi.Barrier(mpi.world);
    const double start = now();
    for (int i = 0; i < iterations; i++) {
        wf_array *y = wf_all_sum(x, g);
        if (wf_eval(&y, 1) != WF_OK) {
            fprintf(stderr, "all_sum: %s\n", wf_last_error_message());
            exit(1);
        }
        wf_release(y);
    }
    return (now() - start) / iterations;
}

static double time_mpi(const float *in, float *out, int count, int iterations)
{
    mpi.Barrier(mpi.world);
    const double start = now();
    for (int i = 0; i < iterations; i++)
        mpi.Allreduce(in, out, count, mpi.float32, mpi.sum, mpi.world);
    return (now() - start) / iterations;
}

static int run_rank(void)
{
    wf_group *g = wf_group_init(true);
    if (!g || !load_mpi()) {
        fprintf(stderr, "bench_distributed: %s\n", g ? "MPI symbols missing" : wf_last_error_message());
        return 1;
    }
    const int rank = wf_group_rank(g), size = wf_group_size(g);
    const char *max_env = getenv("WEFT_BENCH_MAX_MB");
    const size_t max_bytes = (size_t)(max_env ? atoi(max_env) : 256) << 20;
    if (rank == 0)
        printf("%d ranks   %10s %12s %12s %10s %10s %8s\n", size, "bytes", "weft us",
               "MPI us", "weft GB/s", "MPI GB/s", "ratio");
    for (size_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
        const int count = (int)(bytes / sizeof(float));
        float *in = malloc(bytes), *out = malloc(bytes);
        for (int i = 0; i < count; i++)
            in[i] = (float)((i + rank) % 97);
        const int64_t shape[1] = {count};
        wf_array *x = wf_array_from_data(in, shape, 1, WF_DTYPE_F32);
        const int iterations = iterations_for(bytes);
        time_weft(g, x, 1); /* warm up both */
        time_mpi(in, out, count, 1);
        double weft = 1e30, plain = 1e30;
        for (int round = 0; round < 3; round++) { /* best of 3: the machine is shared */
            const double w = time_weft(g, x, iterations), m = time_mpi(in, out, count, iterations);
            weft = w < weft ? w : weft;
            plain = m < plain ? m : plain;
        }
        if (rank == 0) /* bus bandwidth as nccl-tests count it: 2 (n-1)/n bytes */
            printf("%d ranks   %10zu %12.1f %12.1f %10.2f %10.2f %8.2f\n", size, bytes,
                   weft * 1e6, plain * 1e6, 2.0 * (size - 1) / size * bytes / weft / 1e9,
                   2.0 * (size - 1) / size * bytes / plain / 1e9, plain / weft);
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
    printf("wf_all_sum vs MPI_Allreduce (float32), local ranks, best of 3; ratio = weft "
           "throughput / MPI's\n");
    fflush(stdout);
    int status = 0;
    for (int np = 2; np <= 4; np += 2) {
        char command[8192];
        snprintf(command, sizeof command,
                 "mpirun --allow-run-as-root --oversubscribe --bind-to none -np %d %s --rank",
                 np, self);
        status |= system(command);
    }
    return status != 0;
}
