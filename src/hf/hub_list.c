/*
 * hub_list.c - what the Hugging Face cache holds, for `winml cache list`:
 * one row per cached revision (repo, refs, commit, files, size, path), the
 * size on disk counting each blob once, and warnings for entries that
 * break the layout rules (never followed).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/json.h"
#include "hf/hub_internal.h"

typedef struct blob_id {
    dev_t dev;
    ino_t ino;
    uint64_t size;
} blob_id;

typedef struct scan {
    wm_arena a;
    blob_id *all; /* every blob seen, all repos */
    size_t n_all;
    const char **warn;
    size_t n_warn;
    uint64_t incomplete;
} scan;

static void warn(scan *sc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(scan *sc, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    for (char *p = buf; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    const char **w = wm_vec_push(&sc->a, &sc->warn, &sc->n_warn, sizeof *w);
    if (w) *w = wm_arena_strdup(&sc->a, buf);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static int cmp_blob(const void *a, const void *b) {
    const blob_id *x = a, *y = b;
    if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
    return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* Sorted names of the entries of dir (no . or ..), in sc's arena. */
static size_t list_dir(scan *sc, const char *dir, const char ***out) {
    *out = NULL;
    size_t n = 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        const char **s = wm_vec_push(&sc->a, out, &n, sizeof *s);
        if (s) *s = wm_arena_strdup(&sc->a, e->d_name);
    }
    closedir(d);
    if (n) qsort(*out, n, sizeof **out, cmp_str);
    return n;
}

typedef struct ref {
    const char *name, *commit;
} ref;

/* refs/ (recursive, depth-capped): each valid ref into *refs. */
static void scan_refs(scan *sc, const char *dir, const char *prefix, int depth, ref **refs, size_t *n) {
    const char **names;
    size_t k = list_dir(sc, dir, &names);
    for (size_t i = 0; i < k; i++) {
        char p[PATH_MAX], rel[PATH_MAX];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        snprintf(rel, sizeof rel, "%s%s%s", prefix, prefix[0] ? "/" : "", names[i]);
        if (lstat(p, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode)) {
            if (depth < 8) scan_refs(sc, p, rel, depth + 1, refs, n);
            continue;
        }
        char commit[WM_HF_COMMIT_LEN + 1];
        wm_error e = {0};
        char model[PATH_MAX];
        snprintf(model, sizeof model, "%s", dir);
        for (int up = 0; up <= depth; up++) *strrchr(model, '/') = 0; /* back to models--X--Y */
        if (wm_hfi_read_ref(model, rel, commit, &e) || !commit[0]) {
            warn(sc, "%s", e.msg[0] ? e.msg : p);
            continue;
        }
        ref *r = wm_vec_push(&sc->a, refs, n, sizeof *r);
        if (r) {
            r->name = wm_arena_strdup(&sc->a, rel);
            r->commit = wm_arena_strdup(&sc->a, commit);
        }
    }
}

/* Files of one snapshot (recursive): count, and the blobs they use into *blobs. */
static void scan_snapshot(scan *sc, const char *model_real, const char *dir, int depth, size_t *files, blob_id **blobs,
                          size_t *nb) {
    const char **names;
    size_t k = list_dir(sc, dir, &names);
    for (size_t i = 0; i < k; i++) {
        char p[PATH_MAX], real[PATH_MAX];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        if (lstat(p, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode)) {
            if (depth < 16) scan_snapshot(sc, model_real, p, depth + 1, files, blobs, nb);
            continue;
        }
        if (!realpath(p, real)) {
            warn(sc, "%s: broken link (blob missing)", p);
            continue;
        }
        size_t mn = strlen(model_real);
        if (strncmp(real, model_real, mn) || real[mn] != '/') {
            warn(sc, "%s resolves to '%s', outside its model folder: not counted", p, real);
            continue;
        }
        if (stat(real, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        (*files)++;
        blob_id *b = wm_vec_push(&sc->a, blobs, nb, sizeof *b);
        if (b) *b = (blob_id){sb.st_dev, sb.st_ino, (uint64_t)sb.st_size};
    }
}

static uint64_t unique_size(blob_id *b, size_t n) {
    if (!n) return 0;
    qsort(b, n, sizeof *b, cmp_blob);
    uint64_t total = b[0].size;
    for (size_t i = 1; i < n; i++)
        if (cmp_blob(&b[i - 1], &b[i])) total += b[i].size;
    return total;
}

static void scan_repo(scan *sc, const char *cache, const char *name, wm_json *j) {
    char model[PATH_MAX], model_real[PATH_MAX], repo[WM_HF_MAX_REPO_ID + 8], p[PATH_MAX];
    snprintf(model, sizeof model, "%s/%s", cache, name);
    snprintf(repo, sizeof repo, "%s", name + 8);
    for (char *q = repo; (q = strstr(q, "--"));) {
        *q = '/';
        memmove(q + 1, q + 2, strlen(q + 2) + 1);
    }
    if (!realpath(model, model_real)) return;
    ref *refs = NULL;
    size_t n_refs = 0;
    snprintf(p, sizeof p, "%s/refs", model);
    scan_refs(sc, p, "", 0, &refs, &n_refs);
    snprintf(p, sizeof p, "%s/snapshots", model);
    const char **snaps;
    size_t ns = list_dir(sc, p, &snaps);
    for (size_t i = 0; i < ns; i++) {
        char sp[PATH_MAX];
        struct stat sb;
        snprintf(sp, sizeof sp, "%s/%s", p, snaps[i]);
        if (!wm_hf_is_commit(snaps[i], strlen(snaps[i])) || lstat(sp, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            warn(sc, "%s: not a snapshot folder named by a 40-hex commit: skipped", sp);
            continue;
        }
        blob_id *blobs = NULL;
        size_t nb = 0, files = 0;
        scan_snapshot(sc, model_real, sp, 0, &files, &blobs, &nb);
        for (size_t k = 0; k < nb; k++) {
            blob_id *b = wm_vec_push(&sc->a, &sc->all, &sc->n_all, sizeof *b);
            if (b) *b = blobs[k];
        }
        char names[1024] = "";
        size_t used = 0;
        for (size_t k = 0; k < n_refs; k++)
            if (!strcmp(refs[k].commit, snaps[i]) && used < sizeof names)
                used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", used ? "," : "", refs[k].name);
        wm_json_obj(j, NULL);
        wm_json_str(j, "repo", repo);
        wm_json_str(j, "revision", names);
        wm_json_str(j, "commit", snaps[i]);
        wm_json_uint(j, "files", files);
        wm_json_uint(j, "size", unique_size(blobs, nb));
        wm_json_str(j, "path", sp);
        wm_json_obj_end(j);
    }
    for (size_t k = 0; k < n_refs; k++) {
        char sp[PATH_MAX];
        struct stat sb;
        snprintf(sp, sizeof sp, "%s/%s", p, refs[k].commit);
        if (lstat(sp, &sb) != 0) warn(sc, "%s: refs/%s names commit %s, which has no snapshot", repo, refs[k].name, refs[k].commit);
    }
    snprintf(p, sizeof p, "%s/blobs", model);
    const char **bl;
    size_t nbl = list_dir(sc, p, &bl);
    for (size_t k = 0; k < nbl; k++) {
        size_t L = strlen(bl[k]);
        if (L > 11 && !strcmp(bl[k] + L - 11, ".incomplete")) sc->incomplete++;
    }
}

wm_status wm_hf_cache_list_json(const char *cache_dir, wm_json *j, wm_error *err) {
    char dir[PATH_MAX];
    wm_status s = WM_OK;
    if (cache_dir) snprintf(dir, sizeof dir, "%s", cache_dir);
    else if ((s = wm_hf_cache_dir(dir, sizeof dir, err))) return s;
    scan sc = {0};
    wm_arena_init(&sc.a);
    struct stat sb;
    int exists = stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode);
    wm_json_obj(j, NULL);
    wm_json_str(j, "cache_dir", dir);
    wm_json_arr(j, "models");
    const char **names = NULL;
    size_t n = exists ? list_dir(&sc, dir, &names) : 0;
    for (size_t i = 0; i < n; i++) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        if (strncmp(names[i], "models--", 8) || lstat(p, &sb) != 0 || !S_ISDIR(sb.st_mode)) continue;
        scan_repo(&sc, dir, names[i], j);
    }
    wm_json_arr_end(j);
    wm_json_uint(j, "size_on_disk", unique_size(sc.all, sc.n_all));
    wm_json_uint(j, "incomplete_files", sc.incomplete);
    wm_json_arr(j, "warnings");
    for (size_t i = 0; i < sc.n_warn; i++) wm_json_str(j, NULL, sc.warn[i]);
    wm_json_arr_end(j);
    wm_json_obj_end(j);
    wm_arena_free(&sc.a);
    if (j->oom) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    return WM_OK;
}
