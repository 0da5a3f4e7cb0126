/* hub_dataset.c - data set names resolved to local table files, offline (dataset.h). */
#include "hf/dataset.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/error.h"
#include "hf/hub.h"

#define MAX_WALK 4096 /* entries looked at in one cache folder */

static const char *const EXTS[] = {".parquet", ".jsonl", ".json", ".csv", ".tsv", ".jsonl.gz",
                                   ".json.gz", ".csv.gz",  ".tsv.gz", ".arrow"};
#define N_EXTS (sizeof EXTS / sizeof *EXTS)

static int is_file(const char *p) {
    struct stat st;
    return !stat(p, &st) && S_ISREG(st.st_mode);
}

static int is_dir(const char *p) {
    struct stat st;
    return !stat(p, &st) && S_ISDIR(st.st_mode);
}

/* The index of name's table extension in EXTS, -1 when none; *stem_len the length before it. */
static int ext_of(const char *name, size_t *stem_len) {
    size_t n = strlen(name);
    int best = -1;
    size_t best_len = 0;
    for (size_t i = 0; i < N_EXTS; i++) {
        size_t k = strlen(EXTS[i]);
        if (n > k && !strcasecmp(name + n - k, EXTS[i]) && k > best_len) best = (int)i, best_len = k;
    }
    if (best >= 0) *stem_len = n - best_len;
    return best;
}

/* Whether a file stem names split: "test", "test-00000-of-00002", or (the datasets cache) "NAME-test[-...]". */
static int stem_is_split(const char *stem, size_t n, const char *split, int arrow) {
    size_t k = strlen(split);
    if (n >= k && !strncmp(stem, split, k) && (n == k || stem[k] == '-')) return 1;
    if (!arrow) return 0;
    for (size_t i = 0; i + k < n; i++)
        if (stem[i] == '-' && !strncmp(stem + i + 1, split, k) && (i + 1 + k == n || stem[i + 1 + k] == '-'))
            return 1;
    return 0;
}

typedef struct found {
    char (*rel)[1024]; /* paths relative to the root */
    size_t n, cap;
} found;

static int push(found *fd, const char *rel) {
    if (fd->n == fd->cap) {
        size_t nc = fd->cap ? 2 * fd->cap : 16;
        void *p = realloc(fd->rel, nc * sizeof *fd->rel);
        if (!p) return -1;
        fd->rel = p, fd->cap = nc;
    }
    snprintf(fd->rel[fd->n++], sizeof *fd->rel, "%s", rel);
    return 0;
}

/* Every table file of split under root/rel (depth levels of folders), into fd. */
static int walk(const char *root, const char *rel, int depth, const char *split, found *fd, int *seen) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s%s%s", root, *rel ? "/" : "", rel);
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(d)) && ++*seen < MAX_WALK) {
        if (e->d_name[0] == '.') continue;
        char r[1024], full[PATH_MAX];
        snprintf(r, sizeof r, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
        snprintf(full, sizeof full, "%s/%s", root, r);
        if (is_dir(full)) {
            if (depth > 0) rc = walk(root, r, depth - 1, split, fd, seen);
            continue;
        }
        size_t sl;
        int x = ext_of(e->d_name, &sl);
        if (x >= 0 && stem_is_split(e->d_name, sl, split, !strcmp(EXTS[x], ".arrow")) && is_file(full))
            rc = push(fd, r);
    }
    closedir(d);
    return rc;
}

static int cmp_rel(const void *a, const void *b) {
    return strcmp((const char *)a, (const char *)b);
}

/* Whether rel's folder is named config (a path component), or, with none wanted, is the top, data/ or default/. */
static int in_config(const char *rel, const char *config) {
    const char *slash = strrchr(rel, '/');
    size_t dl = slash ? (size_t)(slash - rel) : 0;
    if (!config) return !dl || (dl == 4 && !strncmp(rel, "data", 4)) || (dl == 7 && !strncmp(rel, "default", 7));
    size_t k = strlen(config);
    for (const char *p = rel; p < rel + dl;) {
        const char *q = memchr(p, '/', (size_t)(rel + dl - p));
        size_t cl = q ? (size_t)(q - p) : (size_t)(rel + dl - p);
        if (cl == k && !strncmp(p, config, k)) return 1;
        p += cl + 1;
    }
    return 0;
}

/*
 * The files of split for config under root: those in a folder of the config's name, else (config "default" or
 * none, or a repository without config folders) those at the top, under data/ or default/. Of these, the folder and
 * extension of the first in name order: its shards. 1 when found (f filled).
 */
static int pick(const char *root, const char *config, const char *split, int depth, wm_dataset_files *f) {
    found fd = {0};
    int seen = 0;
    if (walk(root, "", depth, split, &fd, &seen) || !fd.n) {
        free(fd.rel);
        return 0;
    }
    qsort(fd.rel, fd.n, sizeof *fd.rel, cmp_rel);
    int got = 0;
    for (int pass = 0; pass < 2 && !got; pass++) {
        const char *want = pass == 0 ? (config && *config && strcasecmp(config, "default") ? config : NULL) : NULL;
        if (pass == 1 && !(config && *config && strcasecmp(config, "default"))) break;
        const char *first = NULL;
        for (size_t i = 0; i < fd.n && !first; i++)
            if (in_config(fd.rel[i], want)) first = fd.rel[i];
        if (!first) continue;
        const char *fs = strrchr(first, '/');
        size_t fdl = fs ? (size_t)(fs - first) : 0, fsl;
        int fx = ext_of(fs ? fs + 1 : first, &fsl);
        for (size_t i = 0; i < fd.n && f->n < WM_DATASET_MAX_FILES; i++) {
            const char *s = strrchr(fd.rel[i], '/');
            size_t dl = s ? (size_t)(s - fd.rel[i]) : 0, sl;
            if (dl != fdl || strncmp(fd.rel[i], first, dl) || ext_of(s ? s + 1 : fd.rel[i], &sl) != fx) continue;
            snprintf(f->paths[f->n++], sizeof f->paths[0], "%s/%s", root, fd.rel[i]);
        }
        got = 1;
    }
    free(fd.rel);
    return got;
}

/* A repository name fit for a cache folder name: ORG/NAME or NAME of [A-Za-z0-9._-], no "..". */
static int repo_name_ok(const char *s) {
    int slashes = 0;
    if (!*s || strstr(s, "..") || strlen(s) > 200 || s[0] == '/' || s[0] == '.') return 0;
    for (const char *p = s; *p; p++) {
        if (*p == '/') {
            if (++slashes > 1 || !p[1]) return 0;
        } else if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
                     *p == '_' || *p == '-'))
            return 0;
    }
    return 1;
}

/* The table file of a local folder: <dir>/<split>.<ext>. */
static int local_folder(const char *dir, const char *const *splits, size_t ns, wm_dataset_files *f) {
    for (size_t s = 0; s < ns; s++)
        for (size_t i = 0; i < N_EXTS; i++) {
            snprintf(f->paths[0], sizeof f->paths[0], "%s/%s%s", dir, splits[s], EXTS[i]);
            if (is_file(f->paths[0])) return f->n = 1, 1;
        }
    return 0;
}

wm_status wm_dataset_resolve(const char *spec, const char *config, const char *split, wm_dataset_files *f, char *why,
                             size_t nwhy, wm_error *err) {
    memset(f, 0, sizeof *f);
    why[0] = 0;
    static const char *const dsplits[] = {"test", "validation", "train"};
    const char *const *splits = dsplits;
    size_t ns = 3;
    if (split && *split) splits = &split, ns = 1;
    const char *split_names = split && *split ? split : "test, validation or train";
    if (is_file(spec)) {
        size_t sl;
        int x = ext_of(spec, &sl);
        if (x < 0) {
            snprintf(why, nwhy, "'%.200s' is not a .jsonl, .json, .csv or .tsv (optionally .gz), .parquet or .arrow "
                     "file", spec);
            return WM_OK;
        }
        snprintf(f->paths[0], sizeof f->paths[0], "%s", spec);
        f->n = 1;
        return WM_OK;
    }
    if (is_dir(spec)) {
        if (local_folder(spec, splits, ns, f)) return WM_OK;
        snprintf(why, nwhy, "folder '%.200s' holds no %s.jsonl, .json, .csv, .tsv (optionally .gz), .parquet or .arrow",
                 spec, split_names);
        return WM_OK;
    }
    if (!repo_name_ok(spec)) {
        snprintf(why, nwhy, "'%.200s' is not a local file or folder, nor a hub data set name ORG/NAME", spec);
        return WM_OK;
    }
    char hub[PATH_MAX], dsc[PATH_MAX], repo[PATH_MAX], snap[PATH_MAX + 64];
    wm_status st;
    if ((st = wm_hf_cache_dir(hub, sizeof hub, err)) || (st = wm_hf_datasets_cache_dir(dsc, sizeof dsc, err)))
        return st;
    /* the hub cache: datasets--ORG--NAME/snapshots/<refs/main> */
    char flat[256];
    snprintf(flat, sizeof flat, "%s", spec);
    char *sl = strchr(flat, '/');
    if (sl) *sl = 0;
    snprintf(repo, sizeof repo, "%s/datasets--%s%s%s", hub, flat, sl ? "--" : "", sl ? sl + 1 : "");
    char ref[PATH_MAX + 16];
    snprintf(ref, sizeof ref, "%s/refs/main", repo);
    snap[0] = 0;
    FILE *rf = fopen(ref, "rb");
    if (rf) {
        char buf[64], commit[48];
        size_t n = fread(buf, 1, sizeof buf, rf);
        fclose(rf);
        while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) n--;
        if ((st = wm_hf_check_ref(buf, n, ref, commit, err))) return st;
        snprintf(snap, sizeof snap, "%s/snapshots/%s", repo, commit);
    } else { /* no refs/main (a snapshot of another revision): the one snapshot there */
        char sd[PATH_MAX + 16];
        snprintf(sd, sizeof sd, "%s/snapshots", repo);
        DIR *d = opendir(sd);
        struct dirent *e;
        while (d && (e = readdir(d)))
            if (wm_hf_is_commit(e->d_name, strlen(e->d_name))) {
                snprintf(snap, sizeof snap, "%s/%s", sd, e->d_name);
                break;
            }
        if (d) closedir(d);
    }
    for (size_t s = 0; s < ns && snap[0] && !f->n; s++)
        if (pick(snap, config, splits[s], 3, f)) f->from_cache = 1;
    if (f->n) { /* an untrusted cache entry: each snapshot file must resolve inside its own repository folder */
        char rr[PATH_MAX], fr[PATH_MAX];
        if (!realpath(repo, rr)) return wm_err(err, WM_ERR_IO, "%s: cannot resolve the cache folder", repo);
        size_t rl = strlen(rr);
        for (size_t i = 0; i < f->n; i++)
            if (!realpath(f->paths[i], fr) || strncmp(fr, rr, rl) || fr[rl] != '/') {
                st = wm_err(err, WM_ERR_INPUT, "%s: resolves outside its cache folder %s: refused (the cache entry is "
                            "damaged or hostile; delete it)", f->paths[i], rr);
                memset(f, 0, sizeof *f);
                return st;
            }
        return WM_OK;
    }
    /* the datasets library's cache: ORG___NAME/<config>/<version>/<hash>/<name>-<split>.arrow */
    char dsrepo[PATH_MAX + 256];
    snprintf(dsrepo, sizeof dsrepo, "%s/%s%s%s", dsc, flat, sl ? "___" : "", sl ? sl + 1 : "");
    for (size_t s = 0; s < ns && !f->n; s++)
        if (pick(dsrepo, config, splits[s], 4, f)) f->from_cache = 1;
    if (f->n) return WM_OK;
    snprintf(why, nwhy, "data set '%.120s'%s%.60s%s split %.60s is not in the Hugging Face caches (looked in %.300s "
             "and %.300s; nothing is downloaded)", spec, config && *config ? " (config " : "", config ? config : "",
             config && *config ? ")" : "", split_names, snap[0] ? snap : repo, dsrepo);
    return WM_OK;
}

wm_status wm_dataset_read(const wm_dataset_files *f, const wm_table_opts *o, wm_table *t, wm_error *err) {
    memset(t, 0, sizeof *t);
    if (!f->n) return wm_err(err, WM_ERR_USAGE, "no data set files to read");
    wm_table_opts so = o ? *o : (wm_table_opts){0};
    wm_status st = wm_table_read(f->paths[0], WM_TABLE_AUTO, &so, t, err);
    for (size_t i = 1; !st && i < f->n && (!so.max_rows || t->n_rows < so.max_rows); i++) {
        wm_table u;
        wm_table_opts uo = so;
        if (so.max_rows) uo.max_rows = so.max_rows - t->n_rows;
        if ((st = wm_table_read(f->paths[i], WM_TABLE_AUTO, &uo, &u, err))) break;
        int same = u.n_cols == t->n_cols;
        for (size_t c = 0; same && c < u.n_cols; c++) same = !strcmp(u.names[c], t->names[c]);
        if (!same) {
            st = wm_err(err, WM_ERR_INPUT, "%s: its columns differ from those of %s (the first shard)", f->paths[i],
                        f->paths[0]);
            wm_table_free(&u);
            break;
        }
        size_t n = t->n_rows + u.n_rows, nc = t->n_cols;
        char **cells = realloc(t->cells, (n * nc + 1) * sizeof *cells);
        if (cells) t->cells = cells;
        size_t *lines = cells ? realloc(t->lines, (n + 1) * sizeof *lines) : NULL;
        if (lines) t->lines = lines;
        size_t *sizes = lines && (t->sizes || u.sizes) ? realloc(t->sizes, (n * nc + 1) * sizeof *sizes) : NULL;
        if (!cells || !lines || ((t->sizes || u.sizes) && !sizes)) {
            wm_table_free(&u);
            st = wm_err(err, WM_ERR_NOMEM, "out of memory");
            break;
        }
        if (sizes) {
            if (!t->sizes) /* a text shard first: its cells' sizes are their lengths */
                for (size_t k = 0; k < t->n_rows * nc; k++) sizes[k] = t->cells[k] ? strlen(t->cells[k]) : 0;
            for (size_t k = 0; k < u.n_rows * nc; k++)
                sizes[t->n_rows * nc + k] = u.sizes ? u.sizes[k] : u.cells[k] ? strlen(u.cells[k]) : 0;
            t->sizes = sizes;
        }
        memcpy(t->cells + t->n_rows * nc, u.cells, u.n_rows * nc * sizeof *u.cells);
        memcpy(t->lines + t->n_rows, u.lines, u.n_rows * sizeof *u.lines);
        t->n_rows = n;
        free(u.cells), u.cells = NULL, u.n_rows = 0;
        wm_table_free(&u);
    }
    if (st) wm_table_free(t);
    return st;
}
