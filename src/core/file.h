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
 * Every named input file (a model, a checkpoint's JSON, a recipe, a data
 * set, a rules file, a token file) is opened through wm_open_input (or
 * wm_map_file, which uses it), and an optional one is probed first with
 * wm_input_present: one place decides what is accepted, and the messages
 * say what is there - "PATH: is a FIFO (a regular file is needed)" - never
 * "missing" for something that exists. Opening never blocks (a FIFO with no
 * writer, a device): O_NONBLOCK, then fstat, then the flag is cleared.
 */

/* What a non-regular file is, for messages: "a folder", "a FIFO", "a socket", "a character device",
   "a block device", "a symbolic link"; "not a regular file" for anything else. mode: st_mode. */
const char *wm_file_kind_name(unsigned mode);
/* The one message for a non-regular input: "PATH: is a FIFO (a regular file is needed)"; WM_ERR_INPUT. */
wm_status wm_err_not_regular(const char *path, unsigned mode, wm_error *err);

/*
 * Opens an existing regular file read-only. nofollow: refuse a symbolic link
 * as the final component. *fd (blocking mode, close-on-exec) is the
 * caller's to close; *size (may be NULL) receives its size. Errors:
 * WM_ERR_INPUT "PATH: cannot open: No such file or directory", "PATH: is a
 * folder (a regular file is needed)", "PATH: is a symbolic link, refused";
 * WM_ERR_IO for other refusals of the OS.
 */
wm_status wm_open_input(const char *path, int nofollow, int *fd, uint64_t *size, wm_error *err);

/*
 * Whether an optional input file is there, without opening it (links
 * followed): WM_OK with *present 1 for a regular file, 0 for nothing there
 * (no such name, or a path component that is not a folder); an error when
 * something other than a regular file is there or stat fails.
 */
wm_status wm_input_present(const char *path, int *present, wm_error *err);

/*
 * The model file and its folder for a -m MODEL argument: a folder gives
 * FOLDER/model.onnx, a file gives itself and the folder it is in. what
 * says what the command needs, for messages ("a build folder with
 * model.onnx and tokenizer files"). Errors (WM_ERR_INPUT) name spec: no
 * such file or folder, a folder without model.onnx, not a regular file.
 */
wm_status wm_model_path(const char *spec, const char *what, char *file, size_t file_n, char *dir, size_t dir_n,
                        wm_error *err);

/*
 * Maps a whole regular file read-only (opened with wm_open_input: the same
 * checks and messages). The mapping is owned by *m; release with wm_unmap.
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
