/*
 * output.c - temporaries, their removal on signals and after a crash, output locks, disk space (output.h).
 */
#define _GNU_SOURCE
#include "core/output.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file.h"
#include "core/sysmem.h"

int wm_write_full(int fd, const void *p, size_t n) {
    const unsigned char *b = p;
    while (n) {
        ssize_t w = write(fd, b, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (w == 0) { /* a regular file never takes 0 of n > 0 bytes without an error; do not spin */
            errno = EIO;
            return -1;
        }
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

wm_status wm_tmp_name(const char *final, char *out, size_t n, wm_error *err) {
    if ((size_t)snprintf(out, n, "%s" WM_TMP_TAG "%ld", final, (long)getpid()) >= n)
        return wm_err(err, WM_ERR_USAGE, "%.200s: path too long", final);
    return WM_OK;
}

/* ------------------------------------------------------------ the registry and the signal handlers */

enum { SLOT_FREE, SLOT_FILLING, SLOT_LIVE };
#define N_SLOTS 32

typedef struct tmp_slot {
    atomic_int state;
    int is_dir;
    char path[PATH_MAX + 64];
} tmp_slot;

static tmp_slot g_slots[N_SLOTS];

int wm_tmp_track(const char *path, int is_dir) {
    size_t L = strlen(path);
    if (L >= sizeof g_slots[0].path) return -1;
    for (int i = 0; i < N_SLOTS; i++) {
        int expect = SLOT_FREE;
        if (!atomic_compare_exchange_strong(&g_slots[i].state, &expect, SLOT_FILLING)) continue;
        memcpy(g_slots[i].path, path, L + 1);
        g_slots[i].is_dir = is_dir;
        atomic_store(&g_slots[i].state, SLOT_LIVE);
        return i;
    }
    return -1;
}

void wm_tmp_untrack(int slot) {
    if (slot >= 0 && slot < N_SLOTS) atomic_store(&g_slots[slot].state, SLOT_FREE);
}

/* Async-signal-safe removal of name (relative to dirfd) and, for a folder, all below it: open, getdents64,
 * unlinkat and close only, a 4 KiB stack buffer per level, at most 8 levels. */
static void rm_at(int dirfd, const char *name, int depth) {
    if (unlinkat(dirfd, name, 0) == 0 || (errno != EISDIR && errno != EPERM) || depth >= 8) return;
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return;
    char buf[4096];
    for (;;) {
        long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (n <= 0) break;
        for (long off = 0; off < n;) {
            struct {
                uint64_t ino;
                int64_t off;
                unsigned short reclen;
                unsigned char type;
                char name[];
            } *d = (void *)(buf + off);
            off += d->reclen;
            if (!strcmp(d->name, ".") || !strcmp(d->name, "..")) continue;
            rm_at(fd, d->name, depth + 1);
        }
    }
    close(fd);
    unlinkat(dirfd, name, AT_REMOVEDIR);
}

static void remove_tracked(void) {
    for (int i = 0; i < N_SLOTS; i++) {
        if (atomic_load(&g_slots[i].state) != SLOT_LIVE) continue;
        if (g_slots[i].is_dir) rm_at(AT_FDCWD, g_slots[i].path, 0);
        else unlink(g_slots[i].path);
        atomic_store(&g_slots[i].state, SLOT_FREE);
    }
}

static void on_fatal_signal(int sig) {
    int e = errno;
    remove_tracked();
    /* SA_RESETHAND restored the default action: unblocked and raised again, the signal ends the process now,
       as it would have without us (other threads get no time to start new temporaries; what one might still
       make in that instant is a dead process's, which the next run sweeps) */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
    errno = e;
}

void wm_cleanup_install(void) {
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old, sa;
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue; /* nohup: keep ignoring */
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_fatal_signal;
        sa.sa_flags = SA_RESETHAND;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
    signal(SIGXFSZ, SIG_IGN); /* a write past RLIMIT_FSIZE fails with EFBIG and is cleaned up like any other */
}

/* ------------------------------------------------------------ temporaries */

/* The temporary is registered before it is created, so a signal in between finds its name (and removes
 * nothing, or the new file): no moment exists where it is on disk and unknown to the handler. */
wm_status wm_tmp_create(const char *final, char *tmp, size_t n, int *fd, int *slot, wm_error *err) {
    *fd = -1;
    *slot = -1;
    wm_status s = wm_tmp_name(final, tmp, n, err);
    if (s) {
        tmp[0] = 0;
        return s;
    }
    *slot = wm_tmp_track(tmp, 0);
    for (int attempt = 0; attempt < 2; attempt++) {
        *fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (*fd >= 0) break;
        if (errno != EEXIST || attempt) break;
        struct stat st; /* our own name: a dead process that had this pid left it */
        if (lstat(tmp, &st) == 0 && S_ISDIR(st.st_mode)) wm_rm_tree(tmp);
        else unlink(tmp);
    }
    if (*fd < 0) {
        int e = errno;
        wm_tmp_untrack(*slot);
        *slot = -1;
        tmp[0] = 0;
        return wm_err(err, WM_ERR_IO, "%s: cannot create: %s", final, strerror(e));
    }
    return WM_OK;
}

wm_status wm_tmp_mkdir(const char *final, char *tmp, size_t n, int *slot, wm_error *err) {
    *slot = -1;
    wm_status s = wm_tmp_name(final, tmp, n, err);
    if (s) {
        tmp[0] = 0;
        return s;
    }
    *slot = wm_tmp_track(tmp, 1);
    int rc = mkdir(tmp, 0755);
    if (rc != 0 && errno == EEXIST) { /* a dead process with this pid left it */
        wm_rm_tree(tmp);
        rc = mkdir(tmp, 0755);
    }
    if (rc != 0) {
        int e = errno;
        wm_tmp_untrack(*slot);
        *slot = -1;
        tmp[0] = 0;
        return wm_err(err, WM_ERR_IO, "%s: cannot create: %s", final, strerror(e));
    }
    return WM_OK;
}

wm_status wm_tmp_commit(char *tmp, int *slot, const char *final, wm_error *err) {
    if (rename(tmp, final) != 0) return wm_err(err, WM_ERR_IO, "%s: cannot rename into place: %s", final, strerror(errno));
    wm_tmp_untrack(*slot);
    *slot = -1;
    tmp[0] = 0;
    return WM_OK;
}

wm_status wm_tmp_commit_dir(char *tmp, int *slot, const char *final, int replace, wm_error *err) {
    if (!replace) {
        if (renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_NOREPLACE) != 0) {
            if (errno != EINVAL && errno != ENOSYS)
                return wm_err(err, errno == EEXIST ? WM_ERR_USAGE : WM_ERR_IO, "%s: cannot rename into place: %s", final,
                              errno == EEXIST ? "it appeared meanwhile (made by another program)" : strerror(errno));
            struct stat st; /* no RENAME_NOREPLACE here: check, then rename */
            if (lstat(final, &st) == 0)
                return wm_err(err, WM_ERR_USAGE, "%s: appeared meanwhile (made by another program); not replaced", final);
            if (rename(tmp, final) != 0)
                return wm_err(err, WM_ERR_IO, "%s: cannot rename into place: %s", final, strerror(errno));
        }
        wm_tmp_untrack(*slot);
        *slot = -1;
        tmp[0] = 0;
        return WM_OK;
    }
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_EXCHANGE) == 0) {
        wm_tmp_discard(tmp, slot); /* tmp now names the old folder: still registered, so a signal removes it too */
        return WM_OK;
    }
    if (errno != EINVAL && errno != ENOSYS)
        return wm_err(err, WM_ERR_IO, "%s: cannot swap into place: %s", final, strerror(errno));
    char old[PATH_MAX + 64];
    if ((size_t)snprintf(old, sizeof old, "%s" WM_OLD_TAG "%ld", final, (long)getpid()) >= sizeof old)
        return wm_err(err, WM_ERR_USAGE, "%.200s: path too long", final);
    if (rename(final, old) != 0) return wm_err(err, WM_ERR_IO, "%s: cannot move aside: %s", final, strerror(errno));
    if (rename(tmp, final) != 0) {
        int e = errno;
        rename(old, final);
        return wm_err(err, WM_ERR_IO, "%s: cannot rename into place: %s", final, strerror(e));
    }
    wm_tmp_untrack(*slot);
    *slot = wm_tmp_track(old, 1);
    wm_rm_tree(old);
    wm_tmp_untrack(*slot);
    *slot = -1;
    tmp[0] = 0;
    return WM_OK;
}

void wm_tmp_discard(char *tmp, int *slot) {
    if (tmp[0]) {
        struct stat st;
        if (lstat(tmp, &st) == 0 && S_ISDIR(st.st_mode)) wm_rm_tree(tmp);
        else unlink(tmp);
    }
    wm_tmp_untrack(*slot);
    *slot = -1;
    tmp[0] = 0;
}

wm_status wm_write_file_atomic(const char *path, const void *data, size_t n, wm_error *err) {
    char tmp[PATH_MAX + 64];
    int fd, slot;
    wm_status s = wm_tmp_create(path, tmp, sizeof tmp, &fd, &slot, err);
    if (s) return s;
    if (wm_write_full(fd, data, n) != 0 || wm_durable_sync(fd) != 0)
        s = wm_err(err, WM_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    if (close(fd) != 0 && !s) s = wm_err(err, WM_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    if (!s) s = wm_tmp_commit(tmp, &slot, path, err);
    if (s) wm_tmp_discard(tmp, &slot);
    return s;
}

/* 1 when path exists and is protect (the same file) or, protect being a folder, a file directly in it. */
static int is_models_file(const char *path, const struct stat *st, const char *protect) {
    struct stat ps;
    if (!protect || !*protect || stat(protect, &ps)) return 0;
    if (st->st_dev == ps.st_dev && st->st_ino == ps.st_ino) return 1;
    if (!S_ISDIR(ps.st_mode)) return 0;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    struct stat ds;
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    return stat(dir, &ds) == 0 && ds.st_dev == ps.st_dev && ds.st_ino == ps.st_ino;
}

wm_status wm_json_out_check(const char *path, const char *protect, wm_error *err) {
    if (!path || !*path) return wm_err(err, WM_ERR_USAGE, "-o: the output path is empty");
    struct stat st;
    if (lstat(path, &st) != 0) return WM_OK;
    if (!S_ISREG(st.st_mode))
        return wm_err(err, WM_ERR_USAGE, "%s: exists and is not a regular file; refusing to replace it", path);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    char head[256];
    ssize_t r = fd >= 0 ? read(fd, head, sizeof head) : -1;
    if (fd >= 0) close(fd);
    ssize_t k = 0;
    while (k < r && (head[k] == ' ' || head[k] == '\t' || head[k] == '\n' || head[k] == '\r')) k++;
    if (r > 0 && (k == r || (head[k] != '{' && head[k] != '[')))
        return wm_err(err, WM_ERR_USAGE, "%s: exists and is not a JSON file; refusing to replace it with the JSON "
                      "result (choose another -o)", path);
    if (is_models_file(path, &st, protect))
        return wm_err(err, WM_ERR_USAGE, "%s: a file of the model (-m %s); refusing to replace it with the JSON result "
                      "(choose another -o)", path, protect);
    return WM_OK;
}

wm_status wm_write_json_atomic(const char *path, const char *text, wm_error *err) {
    wm_status s = wm_json_out_check(path, NULL, err);
    return s ? s : wm_write_file_atomic(path, text, strlen(text), err);
}

/* ------------------------------------------------------------ stale leftovers */

int wm_pid_alive(long pid) {
    if (pid <= 0 || pid > INT_MAX) return 0;
    return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

/* The pid of "<base><tag><digits>" ending name, with *base_len the length of <base>; 0 when not of that form. */
static long tagged_pid(const char *name, const char *tag, size_t *base_len) {
    const char *t = NULL;
    for (const char *p = strstr(name, tag); p; p = strstr(p + 1, tag)) t = p;
    if (!t || t == name) return 0;
    const char *d = t + strlen(tag);
    if (!*d) return 0;
    long pid = 0;
    for (; *d; d++) {
        if (*d < '0' || *d > '9' || pid > (long)INT_MAX) return 0;
        pid = pid * 10 + (*d - '0');
    }
    *base_len = (size_t)(t - name);
    return pid;
}

static void remove_entry(int dfd, const char *dir, const char *name, const struct stat *st) {
    if (S_ISDIR(st->st_mode)) {
        char p[PATH_MAX * 2];
        snprintf(p, sizeof p, "%s/%s", dir, name);
        wm_rm_tree(p);
    } else {
        unlinkat(dfd, name, 0);
    }
}

/* A lock file nobody holds: removed under its own lock, as a holder removes it. */
static int sweep_lock(int dfd, const char *name) {
    int fd = openat(dfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return 0;
    int done = 0;
    struct stat a, b;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &a) == 0 && fstatat(dfd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
        a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        done = unlinkat(dfd, name, 0) == 0;
    close(fd);
    return done;
}

int wm_sweep_stale(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int dfd = dirfd(d), n = 0;
    uid_t me = geteuid();
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *nm = e->d_name;
        size_t bl = 0;
        long tmp_pid = tagged_pid(nm, WM_TMP_TAG, &bl), old_pid = tmp_pid ? 0 : tagged_pid(nm, WM_OLD_TAG, &bl);
        size_t L = strlen(nm), LT = strlen(WM_LOCK_TAG);
        int lock = !tmp_pid && !old_pid && L > LT && !strcmp(nm + L - LT, WM_LOCK_TAG);
        if (!tmp_pid && !old_pid && !lock) continue;
        struct stat st;
        if (fstatat(dfd, nm, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != me) continue;
        if (lock) {
            n += S_ISREG(st.st_mode) && sweep_lock(dfd, nm);
        } else if (tmp_pid && !wm_pid_alive(tmp_pid)) {
            remove_entry(dfd, dir, nm, &st);
            n++;
        } else if (old_pid && !wm_pid_alive(old_pid)) {
            /* a replace killed between its two renames: the old output comes back if nothing took its place */
            char base[NAME_MAX + 1];
            snprintf(base, sizeof base, "%.*s", (int)bl, nm);
            struct stat bs;
            if (fstatat(dfd, base, &bs, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT) renameat(dfd, nm, dfd, base);
            else remove_entry(dfd, dir, nm, &st);
            n++;
        }
    }
    closedir(d);
    return n;
}

/* ------------------------------------------------------------ locks */

wm_status wm_lock_output(const char *final, wm_lockfile *l, wm_error *err) {
    l->fd = -1;
    l->slot = -1;
    if ((size_t)snprintf(l->path, sizeof l->path, "%s" WM_LOCK_TAG, final) >= sizeof l->path)
        return wm_err(err, WM_ERR_USAGE, "%.200s: path too long", final);
    for (int attempt = 0; attempt < 16; attempt++) {
        int fd = open(l->path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
        if (fd < 0) return wm_err(err, WM_ERR_IO, "%s: cannot create the lock: %s", l->path, strerror(errno));
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            char pid[24] = {0};
            ssize_t r = pread(fd, pid, sizeof pid - 1, 0);
            close(fd);
            if (e != EWOULDBLOCK) return wm_err(err, WM_ERR_IO, "%s: cannot lock: %s", l->path, strerror(e));
            long p = r > 0 ? strtol(pid, NULL, 10) : 0;
            if (p > 0)
                return wm_err(err, WM_ERR_USAGE, "%s: another winml process (pid %ld) is writing it; wait for it to end",
                              final, p);
            return wm_err(err, WM_ERR_USAGE, "%s: another winml process is writing it; wait for it to end", final);
        }
        struct stat a, b;
        if (fstat(fd, &a) == 0 && lstat(l->path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
            char pid[24];
            int k = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
            if (ftruncate(fd, 0) == 0) (void)!pwrite(fd, pid, (size_t)k, 0);
            l->fd = fd;
            l->slot = wm_tmp_track(l->path, 0);
            return WM_OK;
        }
        close(fd); /* its holder removed it between our open and our flock: take the new one */
    }
    return wm_err(err, WM_ERR_IO, "%s: cannot take the lock", l->path);
}

void wm_unlock_output(wm_lockfile *l) {
    if (l->fd < 0) return;
    unlink(l->path); /* while still held: whoever opens it next sees it gone and takes a fresh one */
    close(l->fd);
    wm_tmp_untrack(l->slot);
    l->fd = l->slot = -1;
}

/* ------------------------------------------------------------ space and paths */

uint64_t wm_free_space(const char *dir) {
    struct statvfs v;
    if (statvfs(dir, &v) != 0) return UINT64_MAX;
    return (uint64_t)v.f_bavail * (uint64_t)v.f_frsize;
}

wm_status wm_space_check(const char *dir, uint64_t need, const char *what, wm_error *err) {
    uint64_t free_b = wm_free_space(dir);
    if (free_b == UINT64_MAX) return WM_OK;
    uint64_t margin = need / 100 > (64ull << 20) ? need / 100 : (64ull << 20);
    if (need <= free_b && free_b - need >= margin) return WM_OK;
    char a[32], b[32];
    wm_fmt_size(need, a, sizeof a);
    wm_fmt_size(free_b, b, sizeof b);
    return wm_err(err, WM_ERR_INPUT, "%s: %s needs about %s but only %s are free there; free some space or write elsewhere",
                  dir, what, a, b);
}

wm_status wm_out_path_clean(const char *path, const char *flag, char *out, size_t n, wm_error *err) {
    if (!path || !*path) return wm_err(err, WM_ERR_USAGE, "%s: the output path is empty", flag);
    size_t L = strlen(path);
    if (L >= n) return wm_err(err, WM_ERR_USAGE, "%s: path too long", flag);
    memcpy(out, path, L + 1);
    while (L > 1 && out[L - 1] == '/') out[--L] = 0;
    return WM_OK;
}
