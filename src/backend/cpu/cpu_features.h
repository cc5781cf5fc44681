/* CPU facts the compilers do not all provide (cpu_features.c). Each is
 * read once and kept: under a hypervisor CPUID traps to it and costs
 * microseconds (7 us each on the KVM guests seen here), so no kernel may
 * ask for it per call. Any thread. */
#ifndef WEFT_BACKEND_CPU_CPU_FEATURES_H
#define WEFT_BACKEND_CPU_CPU_FEATURES_H

#include <stdbool.h>
#include <stdint.h>

/* Bytes of the last-level cache: the kernel's figure for cpu0's L3 (or L2
 * where there is none); 32 MiB where neither can be read. CPUID (sysconf)
 * is not asked: under a hypervisor it can report the host's cache (320
 * MiB for a 32 MiB L3 seen here). */
int64_t wf__cpu_last_level_cache_bytes(void);

/* Bytes of cpu0's L2 cache (sysfs index 2; a core's own on the x86 CPUs
 * seen here); 1 MiB where it cannot be read. */
int64_t wf__cpu_l2_cache_bytes(void);

/* Bytes of cpu0's L1 data cache (sysfs index 0); 32 KiB where it cannot
 * be read. */
int64_t wf__cpu_l1d_cache_bytes(void);

#if defined(__x86_64__) || defined(__i386__)
/* Whether the CPU converts halves (F16C: CPUID leaf 1, ECX bit 29).
 * __builtin_cpu_supports("f16c") is GCC's; clang before 16 has no such
 * feature name (the fuzz build uses clang 14). */
bool wf__cpu_has_f16c(void);
/* Whether the CPU has AVX512_VNNI (CPUID leaf 7, ECX bit 11), which
 * clang 14's __builtin_cpu_supports does not name either. */
bool wf__cpu_has_avx512_vnni(void);
#endif

#endif
