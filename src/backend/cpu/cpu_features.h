/* CPU feature checks the compilers do not all provide. */
#ifndef WEFT_BACKEND_CPU_CPU_FEATURES_H
#define WEFT_BACKEND_CPU_CPU_FEATURES_H

#include <stdbool.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
/* Whether the CPU converts halves (F16C). __builtin_cpu_supports("f16c")
 * is GCC's; clang before 16 has no such feature name (the fuzz build uses
 * clang 14), so CPUID leaf 1, ECX bit 29, is read directly. */
static inline bool wf__cpu_has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#endif

#endif
