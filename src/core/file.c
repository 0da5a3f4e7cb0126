#define _GNU_SOURCE
#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

wm_status wm_map_file(const char *path, int nofollow, wm_map *m, wm_error *err) {
    m->data = NULL;
    m->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | (nofollow ? O_NOFOLLOW : 0));
    if (fd < 0) {
        if (errno == ELOOP)
            return wm_err(err, WM_ERR_INPUT, "%s: is a symbolic link, refused", path);
        return wm_err(err, errno == ENOENT ? WM_ERR_INPUT : WM_ERR_IO, "%s: cannot open: %s", path,
                      strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return wm_err(err, WM_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return wm_err(err, WM_ERR_INPUT, "%s: not a regular file", path);
    }
    if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return wm_err(err, WM_ERR_IO, "%s: cannot mmap: %s", path, strerror(e));
        }
        m->data = p;
        m->size = (size_t)st.st_size;
    }
    close(fd);
    return WM_OK;
}

void wm_unmap(wm_map *m) {
    if (m->data) munmap((void *)m->data, m->size);
    m->data = NULL;
    m->size = 0;
}

int64_t wm_file_size(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    return (int64_t)st.st_size;
}

void wm_path_dirname(const char *path, char *out, size_t n) {
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(out, n, ".");
    } else if (slash == path) {
        snprintf(out, n, "/");
    } else {
        snprintf(out, n, "%.*s", (int)(slash - path), path);
    }
}

wm_status wm_path_check_relative(const char *loc, wm_error *err) {
    if (!loc || !*loc) return wm_err(err, WM_ERR_INPUT, "empty location");
    if (loc[0] == '/' || loc[0] == '\\')
        return wm_err(err, WM_ERR_INPUT, "location '%s' is an absolute path", loc);
    if (((loc[0] | 0x20) >= 'a' && (loc[0] | 0x20) <= 'z') && loc[1] == ':')
        return wm_err(err, WM_ERR_INPUT, "location '%s' is an absolute (drive) path", loc);
    const char *p = loc;
    while (*p) {
        const char *q = p;
        while (*q && *q != '/' && *q != '\\') q++;
        size_t len = (size_t)(q - p);
        if (len == 2 && p[0] == '.' && p[1] == '.')
            return wm_err(err, WM_ERR_INPUT, "location '%s' has a '..' component", loc);
        if (len == 1 && p[0] == '.')
            return wm_err(err, WM_ERR_INPUT, "location '%s' has a '.' component", loc);
        if (len == 0 && *q)
            return wm_err(err, WM_ERR_INPUT, "location '%s' has an empty component", loc);
        p = *q ? q + 1 : q;
    }
    return WM_OK;
}

/* 1 when path equals base or lies below it, compared by component. */
static int path_is_inside(const char *base, const char *path) {
    size_t n = strlen(base);
    if (n == 1 && base[0] == '/') return path[0] == '/';
    if (strncmp(base, path, n) != 0) return 0;
    return path[n] == 0 || path[n] == '/';
}

int wm_same_file(const char *a, const char *b) {
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

int wm_path_within(const char *inner, const char *outer) {
    char a[PATH_MAX], b[PATH_MAX];
    return realpath(inner, a) && realpath(outer, b) && path_is_inside(b, a);
}

wm_status wm_path_resolve_inside(const char *dir, const char *loc, int must_exist, char *out,
                                 size_t n, wm_error *err) {
    wm_status s = wm_path_check_relative(loc, err);
    if (s) return s;
    char base[PATH_MAX], joined[PATH_MAX * 2], real[PATH_MAX];
    if (!realpath(dir, base))
        return wm_err(err, WM_ERR_INPUT, "model folder '%s': %s", dir, strerror(errno));
    if (strlen(base) + strlen(loc) + 2 > PATH_MAX)
        return wm_err(err, WM_ERR_INPUT, "location '%.200s': path too long", loc);
    snprintf(joined, sizeof joined, "%s/%s", base, loc);
    if (realpath(joined, real)) {
        if (!path_is_inside(base, real))
            return wm_err(err, WM_ERR_INPUT, "location '%s' resolves to '%s', outside the model folder '%s'",
                          loc, real, base);
    } else {
        if (must_exist || errno != ENOENT)
            return wm_err(err, WM_ERR_INPUT, "location '%s': %s", loc, strerror(errno));
        /* writing a new file: its folder must resolve inside */
        char parent[PATH_MAX * 2], rparent[PATH_MAX];
        wm_path_dirname(joined, parent, sizeof parent);
        if (!realpath(parent, rparent))
            return wm_err(err, WM_ERR_INPUT, "location '%s': folder: %s", loc, strerror(errno));
        if (!path_is_inside(base, rparent))
            return wm_err(err, WM_ERR_INPUT, "location '%s' resolves outside the model folder '%s'", loc, base);
        const char *leaf = strrchr(joined, '/');
        snprintf(real, sizeof real, "%s/%s", rparent, leaf ? leaf + 1 : joined);
    }
    if (strlen(real) + 1 > n) return wm_err(err, WM_ERR_INPUT, "location '%s': path too long", loc);
    memcpy(out, real, strlen(real) + 1);
    return WM_OK;
}

uint64_t wm_peak_rss_bytes(void) {
    /* VmHWM belongs to this address space; getrusage's ru_maxrss also keeps
       the peak of the parent image a fork+exec came from (a big Python). */
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        unsigned long long kb = 0;
        int found = 0;
        while (!found && fgets(line, sizeof line, f)) found = sscanf(line, "VmHWM: %llu kB", &kb) == 1;
        fclose(f);
        if (found) return kb * 1024u;
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (uint64_t)ru.ru_maxrss * 1024u;
}

uint64_t wm_current_rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    unsigned long long size = 0, res = 0;
    int ok = fscanf(f, "%llu %llu", &size, &res) == 2;
    fclose(f);
    return ok ? res * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)st;
    (void)f;
    return flag == FTW_DP ? rmdir(p) : unlink(p);
}

void wm_rm_tree(const char *dir) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

static int g_durable;

void wm_set_durable(int on) { g_durable = on != 0; }
int wm_durable(void) { return g_durable; }
int wm_durable_sync(int fd) { return g_durable ? fsync(fd) : 0; }
