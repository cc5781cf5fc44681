/*
 * bench_args.h - command-line numbers for the bench programs: a whole
 * number in range, or the program says what it wanted and exits 2 (never
 * a benchmark of 0 repeats or of a garbled size).
 */
#ifndef WEFT_BENCH_ARGS_H
#define WEFT_BENCH_ARGS_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* argv[i] as an integer in [min, max], `fallback` when argc <= i. */
static inline long long bench_int_arg(int argc, char **argv, int i, long long fallback,
                                      long long min, long long max, const char *name)
{
    if (argc <= i)
        return fallback;
    char *end = NULL;
    errno = 0;
    const long long v = strtoll(argv[i], &end, 10);
    if (errno != 0 || end == argv[i] || *end != '\0' || v < min || v > max) {
        fprintf(stderr, "%s: %s must be an integer from %lld to %lld, not '%s'\n", argv[0], name,
                min, max, argv[i]);
        exit(2);
    }
    return v;
}

/* argv[i] as a number in [min, max], `fallback` when argc <= i. */
static inline double bench_double_arg(int argc, char **argv, int i, double fallback, double min,
                                      double max, const char *name)
{
    if (argc <= i)
        return fallback;
    char *end = NULL;
    errno = 0;
    const double v = strtod(argv[i], &end);
    if (errno != 0 || end == argv[i] || *end != '\0' || !(v >= min && v <= max)) {
        fprintf(stderr, "%s: %s must be a number from %g to %g, not '%s'\n", argv[0], name, min,
                max, argv[i]);
        exit(2);
    }
    return v;
}

#endif /* WEFT_BENCH_ARGS_H */
