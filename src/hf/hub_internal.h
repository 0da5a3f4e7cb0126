/*
 * hub_internal.h - what hub.c, hub_cache.c and hub_download.c share. Not
 * part of the library's interface (wm_hfi_ prefix).
 */
#ifndef WM_HF_HUB_INTERNAL_H
#define WM_HF_HUB_INTERNAL_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "hf/hub.h"

/* The state of one resolution against the cache and the hub. */
typedef struct wm_hfi_ctx {
    const wm_hf_resolve_opts *o;
    wm_hf_result *r;
    char model_dir[PATH_MAX];  /* cache/models--ORG--NAME (as joined, links not followed) */
    char model_real[PATH_MAX]; /* realpath(model_dir) once it exists, "" before */
    char repo_folder[WM_HF_MAX_REPO_ID + 16]; /* models--ORG--NAME */
    char endpoint[1024];
    char token[2048];
    int has_token;
    int offline;
    int retries;
    int progress;
    void *curl; /* CURL *, opened on the first request */
    const char *kind; /* "" for a model repo, "datasets/" for a dataset repo (its URLs and API paths) */
} wm_hfi_ctx;

/* ---- hub_cache.c ---- */

/*
 * Present state of one file of a snapshot folder: 1 present (a regular file
 * resolving inside root_real; *size set), 0 absent, or an error status
 * (negative is never returned: errors come back as WM_ERR_* through *st).
 */
int wm_hfi_file_state(const char *root_real, const char *folder, const char *name, uint64_t *size, wm_status *st,
                      wm_error *err);

/* 1 when MODEL/.no_exist/COMMIT/NAME is a regular file. */
int wm_hfi_no_exist(const char *model_dir, const char *commit, const char *name);

/*
 * Reads MODEL/refs/REVISION (not following a link as the last component):
 * WM_OK with commit set, WM_OK with commit "" when there is no such ref,
 * WM_ERR_INPUT when it is not exactly 40 lowercase hex digits.
 */
wm_status wm_hfi_read_ref(const char *model_dir, const char *revision, char *commit, wm_error *err);

/*
 * Creates base/rel folder by folder (mode 0755). An existing component must
 * be a real folder, not a symbolic link. base itself must exist.
 */
wm_status wm_hfi_mkdirs(const char *base, const char *rel, wm_error *err);

/* mkdir -p for a folder chosen by the user (links allowed). */
wm_status wm_hfi_mkdir_p(const char *path, wm_error *err);

/* Writes n bytes to path through a unique temporary name in its folder + rename. */
wm_status wm_hfi_write_atomic(const char *path, const void *data, size_t n, wm_error *err);

/* Makes path a symlink to target through a temporary name + rename. */
wm_status wm_hfi_symlink_atomic(const char *target, const char *path, wm_error *err);

/*
 * Reads a small regular file that must resolve inside root_real (at most
 * max bytes) into a malloc'ed buffer *out (caller frees) of *n bytes.
 */
wm_status wm_hfi_read_inside(const char *root_real, const char *path, size_t max, char **out, size_t *n,
                             wm_error *err);

/* 1 when name looks like pickle weights (.bin .pt .pth .ckpt, any case, or *.bin.index.json). */
int wm_hfi_is_pickle_name(const char *name);

/* ---- hub_download.c ---- */

/*
 * Fetches one repo file into the cache for revision rev (a branch, tag or
 * commit; the caller pins it to the commit after the first answer). On
 * WM_OK: f->state is DOWNLOADED or PRESENT (already cached) or ABSENT (the
 * hub answered 404 for the file; recorded in .no_exist), f->etag/size set,
 * and commit (41 bytes) holds the hub's X-Repo-Commit. Errors: WM_ERR_IO
 * (network, disk, interrupted transfer: the partial file is kept for a
 * resume), WM_ERR_INPUT (bad answers, corrupted transfer: removed, missing
 * repo or revision, access refused).
 */
wm_status wm_hfi_fetch(wm_hfi_ctx *c, const char *rev, const char *name, wm_hf_file *f, char *commit,
                       wm_error *err);

/*
 * HEAD only: 1 when the hub has the file at rev (used to name pickle files
 * without downloading them), 0 when not, error status otherwise.
 */
int wm_hfi_exists(wm_hfi_ctx *c, const char *rev, const char *name, wm_status *st, wm_error *err);

/*
 * One page of the repo's file listing at rev (GET /api/{models|datasets}/ORG/NAME/tree/REV?recursive=true, or
 * page: the URL of a later page, which must be on the endpoint's origin; at most WM_HF_MAX_TREE_BYTES) into *out
 * (malloc'ed, the caller frees), *n bytes; next[next_n] receives the Link header's rel="next" URL ("" on the last
 * page). Errors as wm_hfi_fetch's.
 */
wm_status wm_hfi_tree(wm_hfi_ctx *c, const char *rev, const char *page, char **out, size_t *n, char *next,
                      size_t next_n, wm_error *err);

void wm_hfi_net_close(wm_hfi_ctx *c);

#endif
