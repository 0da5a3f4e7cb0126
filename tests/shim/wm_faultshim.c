/*
 * wm_faultshim.c - an LD_PRELOAD library for the fault-injection tests (tests/oracle/test_output_faults.py).
 *
 * It counts the calls through which a process changes files - write, pwrite, fsync and ftruncate on regular
 * files, rename/renameat/renameat2, unlink/unlinkat/rmdir, mkdir, link, symlink - and at the Nth one does what
 * WM_FAULT_MODE says:
 *   kill    SIGKILL itself just before the call (a crash between any two steps of a write);
 *   enospc  make the Nth write/pwrite to a regular file fail with ENOSPC (no other call is counted);
 *   eio     the same with EIO;
 *   count   nothing; at exit, write to WM_FAULT_COUNT_FILE the kind of every counted call in order, one letter
 *           each: w write or pwrite, s fsync, t ftruncate, r rename(at)(2), u unlink(at) or rmdir, m mkdir,
 *           l link or symlink.
 * WM_FAULT_AT is N (1-based). Nothing here is part of winml; only the tests load it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

enum { M_NONE, M_KILL, M_ENOSPC, M_EIO, M_COUNT };

static int g_mode = -1;
static long g_at;
static atomic_long g_calls, g_writes;
static char g_log[1 << 20];

static void init(void) {
    if (g_mode >= 0) return;
    const char *m = getenv("WM_FAULT_MODE"), *at = getenv("WM_FAULT_AT");
    g_at = at ? atol(at) : 0;
    g_mode = !m ? M_NONE : !strcmp(m, "kill") ? M_KILL : !strcmp(m, "enospc") ? M_ENOSPC : !strcmp(m, "eio") ? M_EIO
           : !strcmp(m, "count") ? M_COUNT : M_NONE;
}

__attribute__((destructor)) static void report(void) {
    const char *f = getenv("WM_FAULT_COUNT_FILE");
    if (g_mode != M_COUNT || !f) return;
    FILE *o = fopen(f, "w");
    if (!o) return;
    long n = atomic_load(&g_calls);
    fwrite(g_log, 1, (size_t)(n < (long)sizeof g_log ? n : (long)sizeof g_log), o);
    fclose(o);
}

/* A call that changes files: kill mode dies at the Nth. */
static void step(char kind) {
    init();
    long n = atomic_fetch_add(&g_calls, 1) + 1;
    if (n <= (long)sizeof g_log) g_log[n - 1] = kind;
    if (g_mode == M_KILL && n == g_at) raise(SIGKILL);
}

static int regular(int fd) {
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

/* A write to a regular file: step, and the fault modes fail the Nth one. */
static int write_fault(int fd) {
    if (!regular(fd)) return 0;
    step('w');
    long n = atomic_fetch_add(&g_writes, 1) + 1;
    if ((g_mode == M_ENOSPC || g_mode == M_EIO) && n == g_at) {
        errno = g_mode == M_ENOSPC ? ENOSPC : EIO;
        return 1;
    }
    return 0;
}

#define REAL(name)                                                                                            \
    static __typeof__(name) *real_##name;                                                                     \
    if (!real_##name) *(void **)&real_##name = dlsym(RTLD_NEXT, #name)

ssize_t write(int fd, const void *p, size_t n) {
    REAL(write);
    if (write_fault(fd)) return -1;
    return real_write(fd, p, n);
}

ssize_t pwrite(int fd, const void *p, size_t n, off_t off) {
    REAL(pwrite);
    if (write_fault(fd)) return -1;
    return real_pwrite(fd, p, n, off);
}

ssize_t pwrite64(int fd, const void *p, size_t n, off_t off) {
    REAL(pwrite64);
    if (write_fault(fd)) return -1;
    return real_pwrite64(fd, p, n, off);
}

int fsync(int fd) {
    REAL(fsync);
    if (regular(fd)) step('s');
    return real_fsync(fd);
}

int ftruncate(int fd, off_t len) {
    REAL(ftruncate);
    if (regular(fd)) step('t');
    return real_ftruncate(fd, len);
}

int rename(const char *a, const char *b) {
    REAL(rename);
    step('r');
    return real_rename(a, b);
}

int renameat(int da, const char *a, int db, const char *b) {
    REAL(renameat);
    step('r');
    return real_renameat(da, a, db, b);
}

int renameat2(int da, const char *a, int db, const char *b, unsigned flags) {
    REAL(renameat2);
    step('r');
    return real_renameat2(da, a, db, b, flags);
}

int unlink(const char *p) {
    REAL(unlink);
    step('u');
    return real_unlink(p);
}

int unlinkat(int d, const char *p, int flags) {
    REAL(unlinkat);
    step('u');
    return real_unlinkat(d, p, flags);
}

int rmdir(const char *p) {
    REAL(rmdir);
    step('u');
    return real_rmdir(p);
}

int mkdir(const char *p, mode_t m) {
    REAL(mkdir);
    step('m');
    return real_mkdir(p, m);
}

int link(const char *a, const char *b) {
    REAL(link);
    step('l');
    return real_link(a, b);
}

int symlink(const char *a, const char *b) {
    REAL(symlink);
    step('l');
    return real_symlink(a, b);
}
