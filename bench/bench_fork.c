/*
 * bench_fork: what weft's fork() handlers cost. The child handler scans the
 * node pool for in-flight nodes, so a fork costs more the larger the pool
 * (the parent's peak of live nodes). Prints, for pools holding 0, 100,000
 * and 1,000,000 live nodes: the pool's size, the time from just before
 * fork() to the child running its first line (prepare handlers, the kernel's
 * fork, the child handlers) and the whole round trip (until waitpid returns
 * for a child that _exits at once), median of the runs, and each as a ratio
 * to the empty pool.
 *
 *   build/release/bench_fork [runs = 21]
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_args.h"
#include "weft.h"

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return v[n / 2];
}

/* Forks `runs` times; medians of fork -> child running and of the round trip. */
static void measure(int runs, volatile double *child_start, double *to_child, double *round_trip)
{
    double a[runs], b[runs];
    for (int r = 0; r < runs; r++) {
        double t0 = now_seconds();
        pid_t pid = fork();
        if (pid == 0) {
            *child_start = now_seconds();
            _exit(0);
        }
        int status;
        waitpid(pid, &status, 0);
        b[r] = now_seconds() - t0;
        a[r] = *child_start - t0;
    }
    *to_child = median(a, runs);
    *round_trip = median(b, runs);
}

/* A chain of `n` lazy nodes kept alive by its last one. */
static wf_array *chain(long n)
{
    wf_array *one = wf_scalar(1, WF_DTYPE_F32), *x = wf_retain(one);
    for (long i = 0; i < n; i++) {
        wf_array *next = wf_add(x, one);
        wf_release(x);
        x = next;
    }
    wf_release(one);
    return x;
}

int main(int argc, char **argv)
{
    int runs = (int)bench_int_arg(argc, argv, 1, 21, 1, 1000000, "runs");
    if (runs < 1)
        runs = 1;
    volatile double *child_start = mmap(NULL, sizeof(double), PROT_READ | PROT_WRITE,
                                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (child_start == MAP_FAILED)
        return 1;
    wf_array *warm = wf_scalar(1, WF_DTYPE_F32); /* the runtime and default stream start */
    wf_eval(&warm, 1);
    wf_release(warm);

    const long sizes[] = {0, 100000, 1000000};
    double base_child = 0, base_trip = 0;
    printf("%12s %12s %18s %10s %16s %10s\n", "live nodes", "pool MiB", "fork->child ms",
           "ratio", "round trip ms", "ratio");
    for (int i = 0; i < 3; i++) {
        wf_array *kept = sizes[i] ? chain(sizes[i]) : NULL;
        wf_memory_stats stats = wf_memory_stats_default();
        wf_memory_stats_get(&stats);
        double to_child, trip;
        measure(runs, child_start, &to_child, &trip);
        if (i == 0) {
            base_child = to_child;
            base_trip = trip;
        }
        printf("%12ld %12.1f %18.3f %10.2f %16.3f %10.2f\n", sizes[i],
               (double)stats.node_pool_bytes / (1 << 20), to_child * 1e3, to_child / base_child,
               trip * 1e3, trip / base_trip);
        wf_release(kept);
    }
    munmap((void *)child_start, sizeof(double));
    return 0;
}
