/* CPU feature checks the compilers do not all provide. */
#ifndef WEFT_BACKEND_CPU_CPU_FEATURES_H
#define WEFT_BACKEND_CPU_CPU_FEATURES_H

#include <stdbool.h>
#include <stdint.h>

/* Bytes of the last-level cache (cpu_features.c): the kernel's figure
 * for cpu0's L3 (or L2 where there is none), read once; 32 MiB where
 * neither can be read. CPUID (sysconf) is not asked: under a hypervisor
 * it can report the host's cache (320 MiB for a 32 MiB L3 seen here).
 * Any thread. */
int64_t wf__cpu_last_level_cache_bytes(void);

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
