/*
 * output.h - writing outputs without ever losing a user's files.
 *
 * Every file or folder the tool writes is first created in the destination's own folder under a temporary
 * name, "<final>.winml-tmp.<pid>", and renamed into place when complete, so a reader sees the old output or
 * the new one, never a part. Around that:
 *   - a registry of the temporaries this process holds, which the signal handlers of wm_cleanup_install
 *     remove on SIGINT/SIGTERM/SIGHUP/SIGPIPE before the process dies of the signal;
 *   - wm_sweep_stale: what a killed process (SIGKILL, a power loss) left beside an output - temporaries and
 *     locks whose pid is no longer alive, owned by this user - is removed by the next run writing there, and a
 *     folder moved aside by an interrupted replace ("<final>.winml-old.<pid>") is put back when <final> is gone;
 *   - wm_lock_output: one writer per output at a time ("<final>.winml-lock", flock'ed and unlinked by its holder);
 *   - wm_space_check: a write that cannot fit on the disk is refused before it starts.
 * Names that follow these patterns are the tool's own; nothing else is ever removed.
 */
#ifndef WM_CORE_OUTPUT_H
#define WM_CORE_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

#include "winml/winml.h"

#define WM_TMP_TAG ".winml-tmp."
#define WM_OLD_TAG ".winml-old."
#define WM_LOCK_TAG ".winml-lock"

/* Writes all n bytes to fd (EINTR retried, chunks of at most 1 GiB). 0, or -1 with errno. */
int wm_write_full(int fd, const void *p, size_t n);

/* "<final>.winml-tmp.<pid>" into out (size n); WM_ERR_USAGE when it does not fit. */
wm_status wm_tmp_name(const char *final, char *out, size_t n, wm_error *err);

/*
 * Registers path (a temporary file or folder of this process) for removal on a fatal signal; returns a slot
 * for wm_tmp_untrack, or -1 when the registry is full (the path is then left to wm_sweep_stale).
 */
int wm_tmp_track(const char *path, int is_dir);
void wm_tmp_untrack(int slot);

/*
 * Creates the temporary file of final (exclusive, no links followed, mode 0644) and registers it: *fd is
 * open for reading and writing, tmp (size n) receives its name, *slot its registry slot. A leftover of a dead process
 * that had this pid is replaced.
 */
wm_status wm_tmp_create(const char *final, char *tmp, size_t n, int *fd, int *slot, wm_error *err);

/* The same for a folder (mode 0755). */
wm_status wm_tmp_mkdir(const char *final, char *tmp, size_t n, int *slot, wm_error *err);

/* Renames tmp over final and unregisters it (tmp[0] = 0 on success). */
wm_status wm_tmp_commit(char *tmp, int *slot, const char *final, wm_error *err);

/*
 * Renames the temporary folder tmp to final in one step. replace = 0: final must not exist (refused if it
 * appeared: RENAME_NOREPLACE); replace = 1: final is swapped with tmp atomically (RENAME_EXCHANGE; readers
 * never see final missing) and the old folder, now under tmp's name, is removed. Where the file system cannot
 * swap, final is moved aside to "<final>.winml-old.<pid>" first (wm_sweep_stale puts it back after a crash).
 */
wm_status wm_tmp_commit_dir(char *tmp, int *slot, const char *final, int replace, wm_error *err);

/* Removes tmp (a file or a folder tree) if tmp[0] and unregisters it; tmp[0] = 0. */
void wm_tmp_discard(char *tmp, int *slot);

/* Writes n bytes to path through a temporary file renamed into place (fsync'ed with wm_set_durable). */
wm_status wm_write_file_atomic(const char *path, const void *data, size_t n, wm_error *err);

/* The same for a JSON result: an existing path is replaced only when it is a regular file holding JSON (its
 * first non-blank byte '{' or '['), so a mistyped -o never overwrites a model, a data file or a folder. */
wm_status wm_write_json_atomic(const char *path, const char *text, wm_error *err);

/* The checks of wm_write_json_atomic alone, for a command to make before any work: path is absent or a regular
 * file holding JSON, and is not a file of protect (the model the command reads, -m: that file itself or, when
 * protect is a folder, an existing file directly in it: `-o CKPT/config.json` replaced the checkpoint's config
 * with the result). WM_OK, or WM_ERR_USAGE naming path and the reason. */
wm_status wm_json_out_check(const char *path, const char *protect, wm_error *err);

/* Installs the SIGINT/SIGTERM/SIGHUP/SIGPIPE handlers that remove the registered temporaries, then let the
 * signal end the process as it would have; SIGXFSZ is ignored so an over-large write fails with EFBIG. */
void wm_cleanup_install(void);

/* Removes this user's stale temporaries and locks of dead processes in folder dir (see above); returns the
 * number of entries removed or restored. Never follows links; best effort. */
int wm_sweep_stale(const char *dir);

/* pid is a process that is still running (or cannot be probed: counted as alive). */
int wm_pid_alive(long pid);

typedef struct wm_lockfile {
    int fd;        /* -1 when not held */
    int slot;
    char path[4200];
} wm_lockfile;

/*
 * Takes the lock of output final ("<final>.winml-lock", beside it): WM_ERR_USAGE naming the holder's pid when
 * another process holds it. Release with wm_unlock_output (safe on a lock never taken: set l->fd = -1 first or
 * use WM_LOCKFILE_INIT).
 */
#define WM_LOCKFILE_INIT {-1, -1, {0}}
wm_status wm_lock_output(const char *final, wm_lockfile *l, wm_error *err);
void wm_unlock_output(wm_lockfile *l);

/* Free bytes for an unprivileged writer in the file system holding dir, or UINT64_MAX when unknown. */
uint64_t wm_free_space(const char *dir);

/* WM_OK when need bytes (plus a 1% / 64 MiB margin) fit in dir's free space; else WM_ERR_INPUT naming
 * what (e.g. "the build"), the need and the free space. */
wm_status wm_space_check(const char *dir, uint64_t need, const char *what, wm_error *err);

/* The parts of a path: clean (no trailing slashes) into out; WM_ERR_USAGE for "" or a too-long path. */
wm_status wm_out_path_clean(const char *path, const char *flag, char *out, size_t n, wm_error *err);

#endif
