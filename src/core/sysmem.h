/*
 * sysmem.h - the memory this process may still use, and byte sizes as
 * flags and messages write them.
 */
#ifndef WM_CORE_SYSMEM_H
#define WM_CORE_SYSMEM_H

#include <stddef.h>
#include <stdint.h>

/*
 * Bytes this process can still allocate without pushing the machine into
 * swap or its cgroup into the OOM killer: the smallest of MemAvailable
 * (/proc/meminfo), the cgroup's limit less its usage (v2 memory.max -
 * memory.current, v1 memory.limit_in_bytes - memory.usage_in_bytes, over
 * the process's cgroup and each parent) and RLIMIT_AS less the address
 * space in use. 0 when none of them can be read. A few small file reads:
 * call it when planning, not per operation.
 */
uint64_t wm_mem_available(void);

/*
 * Parses a byte size: digits with an optional fraction and unit, K/M/G/T
 * (powers of 1024, with or without "iB"/"B"; case-insensitive), e.g.
 * "1048576", "512M", "1.5GiB". 0 on success; -1 when s is not a size, is
 * 0 or does not fit 64 bits.
 */
int wm_parse_size(const char *s, uint64_t *out);

/* bytes as "512 B", "1.5 KiB", "16.0 GiB" in buf (n bytes); returns buf. */
char *wm_fmt_size(uint64_t bytes, char *buf, size_t n);

#endif
