/* The CPU facts of cpu_features.h, each read once. */
#include "backend/cpu/cpu_features.h"

#include <stdatomic.h>
#include <stdio.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

/* The size in bytes of sysfs cache `index` of cpu0 ("32768K"), or 0. */
static int64_t sysfs_cache_bytes(int index)
{
    char path[80];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    long long size = 0;
    char unit = 'K';
    const int got = fscanf(f, "%lld%c", &size, &unit);
    fclose(f);
    if (got < 1 || size <= 0 || size > ((long long)1 << 40))
        return 0;
    return unit == 'M' ? size << 20 : unit == 'K' ? size << 10 : size;
}

/* The first of sysfs caches first_index, then second_index (-1: none)
 * that can be read, else `fallback`; read once into *cached (0: not read
 * yet; every reader finds the same). */
static int64_t cache_bytes_once(_Atomic int64_t *cached, int first_index, int second_index,
                                int64_t fallback)
{
    int64_t bytes = atomic_load_explicit(cached, memory_order_relaxed);
    if (bytes > 0)
        return bytes;
    bytes = sysfs_cache_bytes(first_index);
    if (bytes <= 0 && second_index >= 0)
        bytes = sysfs_cache_bytes(second_index);
    if (bytes <= 0)
        bytes = fallback;
    atomic_store_explicit(cached, bytes, memory_order_relaxed);
    return bytes;
}

int64_t wf__cpu_last_level_cache_bytes(void)
{
    static _Atomic int64_t cached;
    return cache_bytes_once(&cached, 3, 2, (int64_t)32 << 20);
}

int64_t wf__cpu_l2_cache_bytes(void)
{
    static _Atomic int64_t cached;
    return cache_bytes_once(&cached, 2, -1, (int64_t)1 << 20);
}

int64_t wf__cpu_l1d_cache_bytes(void)
{
    static _Atomic int64_t cached;
    return cache_bytes_once(&cached, 0, -1, (int64_t)32 << 10);
}

#if defined(__x86_64__) || defined(__i386__)
/* A CPUID bit, read once into *cached (0: not read yet, 1: no, 2: yes;
 * every reader finds the same). */
static bool cpuid_bit(_Atomic int *cached, unsigned leaf, unsigned ecx_bit)
{
    int known = atomic_load_explicit(cached, memory_order_relaxed);
    if (known == 0) {
        unsigned a, b, c, d;
        const bool has = __get_cpuid_count(leaf, 0, &a, &b, &c, &d) && (c >> ecx_bit & 1u);
        known = has ? 2 : 1;
        atomic_store_explicit(cached, known, memory_order_relaxed);
    }
    return known == 2;
}

bool wf__cpu_has_f16c(void)
{
    static _Atomic int cached;
    return cpuid_bit(&cached, 1, 29);
}

bool wf__cpu_has_avx512_vnni(void)
{
    static _Atomic int cached;
    return cpuid_bit(&cached, 7, 11);
}
#endif
