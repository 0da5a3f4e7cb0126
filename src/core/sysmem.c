/* sysmem.c - memory available to this process (see sysmem.h). */
#include "core/sysmem.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define NONE UINT64_MAX

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* The first unsigned number in file path (the word "max" or no number: NONE). */
static uint64_t read_u64(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NONE;
    char buf[64];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    if (!isdigit((unsigned char)buf[0])) return NONE;
    return strtoull(buf, NULL, 10);
}

/* MemAvailable of /proc/meminfo in bytes, NONE when absent. */
static uint64_t meminfo_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return NONE;
    char line[256];
    uint64_t v = NONE;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "MemAvailable:", 13)) {
            v = strtoull(line + 13, NULL, 10) * 1024;
            break;
        }
    fclose(f);
    return v;
}

/* limit - usage of the cgroup folder dir, NONE without a limit (v1 reports "no limit" as about 2^63). */
static uint64_t cgroup_left(const char *dir, const char *limit_file, const char *usage_file) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, limit_file);
    uint64_t lim = read_u64(p);
    if (lim == NONE || lim >= (1ull << 62)) return NONE;
    snprintf(p, sizeof p, "%s/%s", dir, usage_file);
    uint64_t use = read_u64(p);
    if (use == NONE) return NONE;
    return use < lim ? lim - use : 0;
}

/* The smallest room left over cgroup path rel (under mount) and each of its parents. */
static uint64_t cgroup_walk(const char *mount, const char *rel, const char *limit_file, const char *usage_file) {
    char path[4096], dir[4200];
    snprintf(path, sizeof path, "%s", rel);
    uint64_t left = NONE;
    for (;;) {
        size_t n = strlen(path);
        while (n > 1 && path[n - 1] == '/') path[--n] = 0;
        int root = !strcmp(path, "/") || !*path;
        snprintf(dir, sizeof dir, "%s%s", mount, root ? "" : path);
        left = min_u64(left, cgroup_left(dir, limit_file, usage_file));
        char *slash = strrchr(path, '/');
        if (root || !slash) break;
        if (slash == path) path[1] = 0; /* the root last */
        else *slash = 0;
    }
    return left;
}

static uint64_t cgroup_available(void) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return NONE;
    char line[4096];
    uint64_t left = NONE;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = 0;
        const char *ctrl = c1 + 1, *rel = c2 + 1;
        if (!*ctrl) { /* v2: unified hierarchy, alone or beside v1 ("hybrid") */
            left = min_u64(left, cgroup_walk("/sys/fs/cgroup", rel, "memory.max", "memory.current"));
            left = min_u64(left, cgroup_walk("/sys/fs/cgroup/unified", rel, "memory.max", "memory.current"));
        } else {
            char list[256];
            snprintf(list, sizeof list, ",%s,", ctrl);
            if (strstr(list, ",memory,"))
                left = min_u64(left, cgroup_walk("/sys/fs/cgroup/memory", rel, "memory.limit_in_bytes",
                                                 "memory.usage_in_bytes"));
        }
    }
    fclose(f);
    return left;
}

/* RLIMIT_AS less the address space mapped now (statm's first field), NONE without a limit. */
static uint64_t rlimit_available(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) || rl.rlim_cur == RLIM_INFINITY) return NONE;
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long pages = 0;
    if (f) {
        if (fscanf(f, "%llu", &pages) != 1) pages = 0;
        fclose(f);
    }
    uint64_t used = (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE);
    return used < rl.rlim_cur ? (uint64_t)rl.rlim_cur - used : 0;
}

uint64_t wm_mem_available(void) {
    uint64_t v = min_u64(min_u64(meminfo_available(), cgroup_available()), rlimit_available());
    return v == NONE ? 0 : v;
}

int wm_parse_size(const char *s, uint64_t *out) {
    if (!s || !isdigit((unsigned char)*s) || strpbrk(s, "xX")) return -1; /* strtod reads "0x10" as 16 */
    char *end;
    double v = strtod(s, &end);
    int shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    case 'T': shift = 40; break;
    default: break;
    }
    if (shift) {
        end++;
        if (toupper((unsigned char)end[0]) == 'I' && toupper((unsigned char)end[1]) == 'B') end += 2;
        else if (toupper((unsigned char)end[0]) == 'B') end++;
    } else if (toupper((unsigned char)*end) == 'B')
        end++;
    if (*end || !(v > 0)) return -1;
    double bytes = ldexp(v, shift);
    if (!(bytes >= 1) || bytes >= 18446744073709551616.0) return -1;
    *out = (uint64_t)bytes;
    return 0;
}

char *wm_fmt_size(uint64_t bytes, char *buf, size_t n) {
    static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, n, "%llu B", (unsigned long long)bytes);
        return buf;
    }
    double v = (double)bytes / 1024;
    int u = 0;
    while (v >= 1024 && u < 5) v /= 1024, u++;
    snprintf(buf, n, "%.1f %s", v, unit[u]);
    return buf;
}
