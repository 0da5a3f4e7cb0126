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

const char *wm_file_kind_name(unsigned mode) {
    mode_t m = (mode_t)mode;
    if (S_ISDIR(m)) return "a folder";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISLNK(m)) return "a symbolic link";
    return "not a regular file";
}

wm_status wm_err_not_regular(const char *path, unsigned mode, wm_error *err) {
    const char *k = wm_file_kind_name(mode);
    if (k[0] != 'a') return wm_err(err, WM_ERR_INPUT, "%s: not a regular file", path);
    return wm_err(err, WM_ERR_INPUT, "%s: is %s (a regular file is needed)", path, k);
}

static wm_status open_failed(const char *path, int e, wm_error *err) {
    if (e == ELOOP) return wm_err(err, WM_ERR_INPUT, "%s: is a symbolic link, refused", path);
    if (e == ENOTDIR)
        return wm_err(err, WM_ERR_INPUT, "%s: cannot open: a part of the path before the file name is not a folder",
                      path);
    return wm_err(err, e == ENOENT || e == ENAMETOOLONG ? WM_ERR_INPUT : WM_ERR_IO, "%s: cannot open: %s", path,
                  strerror(e));
}

wm_status wm_open_input(const char *path, int nofollow, int *fd, uint64_t *size, wm_error *err) {
    *fd = -1;
    if (size) *size = 0;
    int f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (nofollow ? O_NOFOLLOW : 0));
    if (f < 0) {
        /* a folder opens read-only on Linux; EISDIR and friends come from other kinds */
        int e = errno;
        struct stat st;
        if (e != ENOENT && e != ELOOP && e != ENOTDIR && stat(path, &st) == 0 && !S_ISREG(st.st_mode))
            return wm_err_not_regular(path, st.st_mode, err);
        return open_failed(path, e, err);
    }
    struct stat st;
    if (fstat(f, &st) != 0) {
        int e = errno;
        close(f);
        return wm_err(err, WM_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(f);
        return wm_err_not_regular(path, st.st_mode, err);
    }
    int fl = fcntl(f, F_GETFL);
    if (fl >= 0) (void)fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
    *fd = f;
    if (size) *size = (uint64_t)st.st_size;
    return WM_OK;
}

wm_status wm_input_present(const char *path, int *present, wm_error *err) {
    struct stat st;
    *present = 0;
    if (stat(path, &st) != 0) return errno == ENOENT || errno == ENOTDIR ? WM_OK : open_failed(path, errno, err);
    if (!S_ISREG(st.st_mode)) return wm_err_not_regular(path, st.st_mode, err);
    *present = 1;
    return WM_OK;
}

wm_status wm_model_path(const char *spec, const char *what, char *file, size_t file_n, char *dir, size_t dir_n,
                        wm_error *err) {
    struct stat st;
    if (!spec || !*spec) return wm_err(err, WM_ERR_USAGE, "no model given (-m)");
    if (!what) what = "a model file or a build folder with model.onnx";
    if (stat(spec, &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return wm_err(err, WM_ERR_INPUT, "%s: no such file or folder (%s is needed)", spec, what);
        return open_failed(spec, errno, err);
    }
    int k;
    if (S_ISDIR(st.st_mode)) {
        k = snprintf(file, file_n, "%s/model.onnx", spec);
        if (k < 0 || (size_t)k >= file_n) return wm_err(err, WM_ERR_INPUT, "%.200s: path too long", spec);
        int present;
        wm_status s = wm_input_present(file, &present, err);
        if (s) return s;
        if (!present) return wm_err(err, WM_ERR_INPUT, "%s: a folder without model.onnx (%s is needed)", spec, what);
        k = snprintf(dir, dir_n, "%s", spec);
    } else {
        if (!S_ISREG(st.st_mode)) return wm_err_not_regular(spec, st.st_mode, err);
        k = snprintf(file, file_n, "%s", spec);
        if (k < 0 || (size_t)k >= file_n) return wm_err(err, WM_ERR_INPUT, "%.200s: path too long", spec);
        wm_path_dirname(spec, dir, dir_n);
        k = (int)strlen(dir);
    }
    if (k < 0 || (size_t)k >= dir_n) return wm_err(err, WM_ERR_INPUT, "%.200s: path too long", spec);
    return WM_OK;
}

wm_status wm_map_file(const char *path, int nofollow, wm_map *m, wm_error *err) {
    m->data = NULL;
    m->size = 0;
    int fd;
    uint64_t size;
    wm_status s = wm_open_input(path, nofollow, &fd, &size, err);
    if (s) return s;
    if (size > (uint64_t)SIZE_MAX) {
        close(fd);
        return wm_err(err, WM_ERR_INPUT, "%s: too large to map", path);
    }
    if (size > 0) {
        void *p = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return wm_err(err, WM_ERR_IO, "%s: cannot mmap: %s", path, strerror(e));
        }
        m->data = p;
        m->size = (size_t)size;
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
