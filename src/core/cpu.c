#include "core/cpu.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
/* from a deterministic cache-parameters leaf (4, or AMD's 0x8000001D: the same layout): the ways of the level-1
   data cache and the bytes of the level-2 data or unified cache (ways x partitions x line x sets), 0 for what the
   leaf lists none of */
static void cache_params(unsigned leaf, int *l1d_ways, int64_t *l2_bytes) {
    unsigned a, b, c, d;
    for (unsigned i = 0; i < 16; i++) {
        __cpuid_count(leaf, i, a, b, c, d);
        unsigned type = a & 31, level = (a >> 5) & 7;
        if (type == 0) break;
        if (type == 1 && level == 1) *l1d_ways = (int)(b >> 22) + 1;
        if ((type == 1 || type == 3) && level == 2)
            *l2_bytes = (int64_t)((b >> 22) + 1) * (((b >> 12) & 0x3ff) + 1) * ((b & 0xfff) + 1) * ((int64_t)c + 1);
    }
}

static void x86_features(wm_cpu_info *ci) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    ci->sse42 = !!(c & (1u << 20));
    ci->fma = !!(c & (1u << 12));
    ci->f16c = !!(c & (1u << 29));
    int osxsave = !!(c & (1u << 27)), avx_hw = !!(c & (1u << 28));
    unsigned long long xcr0 = 0;
    if (osxsave) {
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        xcr0 = ((unsigned long long)hi << 32) | lo;
    }
    int ymm_os = (xcr0 & 6) == 6, zmm_os = (xcr0 & 0xe6) == 0xe6;
    ci->avx = avx_hw && ymm_os;
    if (!ci->avx) ci->fma = ci->f16c = 0;
    if (__get_cpuid_max(0, NULL) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        ci->avx2 = ci->avx && (b & (1u << 5));
        ci->bmi2 = !!(b & (1u << 8));
        ci->avx512f = zmm_os && (b & (1u << 16));
        ci->avx512bw = ci->avx512f && (b & (1u << 30));
        ci->avx512vl = ci->avx512f && (b & (1u << 31));
        ci->avx512vnni = ci->avx512f && (c & (1u << 11));
        ci->amx = !!(d & (1u << 24));
        __cpuid_count(7, 1, a, b, c, d);
        ci->avxvnni = ci->avx && (a & (1u << 4));
        ci->avx512bf16 = ci->avx512f && (a & (1u << 5));
    }
    if (__get_cpuid_max(0, NULL) >= 4) cache_params(4, &ci->l1d_ways, &ci->l2_bytes);
    if (!ci->l1d_ways && (unsigned)__get_cpuid_max(0x80000000u, NULL) >= 0x8000001Du) {
        __cpuid(0x80000001u, a, b, c, d);
        if (c & (1u << 22)) cache_params(0x8000001Du, &ci->l1d_ways, &ci->l2_bytes); /* TOPOEXT */
    }
}
#endif

static void read_proc(wm_cpu_info *ci) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        int cores = 0;
        while (fgets(line, sizeof line, f)) {
            if (!ci->model[0] && strncmp(line, "model name", 10) == 0) {
                char *p = strchr(line, ':');
                if (p) {
                    p++;
                    while (*p == ' ') p++;
                    snprintf(ci->model, sizeof ci->model, "%s", p);
                    ci->model[strcspn(ci->model, "\n")] = 0;
                }
            }
            if (!cores && strncmp(line, "cpu cores", 9) == 0) {
                char *p = strchr(line, ':');
                if (p) sscanf(p + 1, "%d", &cores);
            }
        }
        fclose(f);
        ci->physical_cores = cores;
    }
    f = fopen("/proc/meminfo", "r");
    if (f) {
        char key[64];
        unsigned long long kb;
        while (fscanf(f, "%63s %llu kB\n", key, &kb) == 2) {
            if (strcmp(key, "MemTotal:") == 0) ci->mem_total_bytes = kb * 1024;
            if (strcmp(key, "MemAvailable:") == 0) ci->mem_available_bytes = kb * 1024;
        }
        fclose(f);
    }
}

void wm_cpu_detect(wm_cpu_info *ci) {
    memset(ci, 0, sizeof *ci);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    ci->logical_cores = n > 0 ? (int)n : 1;
#if defined(__x86_64__) || defined(__i386__)
    x86_features(ci);
#elif defined(__aarch64__)
    ci->neon = 1;
#endif
    read_proc(ci);
    if (!ci->model[0]) snprintf(ci->model, sizeof ci->model, "unknown");
}
