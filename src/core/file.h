/*
 * file.h - read-only file mappings and safe path handling.
 */
#ifndef WM_CORE_FILE_H
#define WM_CORE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "winml/winml.h"

typedef struct wm_map {
    const uint8_t *data; /* NULL for an empty file */
    size_t size;
} wm_map;

/*
 * Maps a whole regular file read-only. nofollow: refuse a symlink as the
 * final component (O_NOFOLLOW) - the descriptor is fstat'ed either way and
 * must be a regular file. The mapping is owned by *m; release with wm_unmap.
 */
wm_status wm_map_file(const char *path, int nofollow, wm_map *m, wm_error *err);
void wm_unmap(wm_map *m);

/* Size of a regular file, or -1 (errno set). */
int64_t wm_file_size(const char *path);

/* Folder part of path ("." when none); writes into out (size n). */
void wm_path_dirname(const char *path, char *out, size_t n);

/*
 * Checks a relative data-file location from an untrusted model: not empty,
 * not absolute (/x, \x, C:x), no "." / ".." component (split on / and \),
 * no NUL. Returns WM_OK or WM_ERR_INPUT with the reason.
 */
wm_status wm_path_check_relative(const char *loc, wm_error *err);

/*
 * Joins dir and a checked relative location, resolves links (realpath) and
 * verifies, by path component, that the result stays inside realpath(dir).
 * out receives the resolved path. must_exist=0 allows a missing final file
 * (for writing), in which case its parent folder is resolved instead.
 */
wm_status wm_path_resolve_inside(const char *dir, const char *loc, int must_exist,
                                 char *out, size_t n, wm_error *err);

/* a and b name the same existing file or folder (st_dev and st_ino, links followed). */
int wm_same_file(const char *a, const char *b);

/* inner is outer or lies below it, both resolved (realpath: links followed) and compared by component;
 * 0 when either does not exist. */
int wm_path_within(const char *inner, const char *outer);

/* Peak resident set size of this process in bytes (from getrusage). */
uint64_t wm_peak_rss_bytes(void);
/* Current resident set size in bytes (from /proc/self/statm), 0 if unknown. */
uint64_t wm_current_rss_bytes(void);

/* Removes dir and everything under it (symlinks themselves, never their targets); best effort. */
void wm_rm_tree(const char *dir);

/*
 * Durability of written artifacts. Writers go to temporary names and rename
 * when complete, which makes every output atomic for readers and against a
 * failed or killed process. Surviving a power loss also needs the bytes on
 * disk before the rename: with wm_set_durable(1) (winml build --sync)
 * wm_durable_sync fsyncs fd; by default it returns 0 at once and the kernel
 * writes the page cache back in its own time, as the Python exporters do.
 */
void wm_set_durable(int on);
int wm_durable(void);
int wm_durable_sync(int fd); /* 0, or -1 with errno from fsync */

#endif
