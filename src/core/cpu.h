/* cpu.h - what this CPU can do, detected once (CPUID on x86-64). */
#ifndef WM_CORE_CPU_H
#define WM_CORE_CPU_H

#include <stdint.h>

typedef struct wm_cpu_info {
    char model[128];
    int logical_cores;
    int physical_cores; /* 0 when unknown */
    uint64_t mem_total_bytes, mem_available_bytes;
    /* ISA features */
    int sse42, avx, avx2, fma, f16c, bmi2, avx512f, avx512bw, avx512vl, avx512vnni, avx512bf16, avxvnni,
        amx;
    int neon;     /* aarch64 */
    int l1d_ways; /* associativity of the level-1 data cache (CPUID leaf 4, or 0x8000001D on AMD); 0: unknown */
    int64_t l2_bytes; /* size of one core's level-2 cache (the same leaves); 0: unknown */
} wm_cpu_info;

/* Fills *ci from CPUID, /proc/cpuinfo and /proc/meminfo; never fails. */
void wm_cpu_detect(wm_cpu_info *ci);

#endif
