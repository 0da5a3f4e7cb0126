/*
 * hub.c - wm_hf_resolve: a local folder, a complete snapshot in the
 * Hugging Face cache, or a download into that cache (see hub.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file.h"
#include "hf/hub_internal.h"

/* What a model folder may hold that we fetch, config first; weights are handled apart. */
static const char *const base_files[] = {
    "config.json",           "generation_config.json", "tokenizer.json", "tokenizer_config.json",
    "special_tokens_map.json", "vocab.json",           "merges.txt",     "vocab.txt",
};
#define N_BASE (sizeof base_files / sizeof base_files[0])
static const char ST_SINGLE[] = "model.safetensors", ST_INDEX[] = "model.safetensors.index.json";

static int is_glob(const char *p) { return strpbrk(p, "*?[") != NULL; }

/* 1 when name is selected by the include patterns (all names when there are none). */
static int wanted(const wm_hf_resolve_opts *o, const char *name) {
    if (!o->n_include) return 1;
    for (size_t i = 0; i < o->n_include; i++)
        if (is_glob(o->include[i]) && fnmatch(o->include[i], name, 0) == 0) return 1;
    return 0;
}

static int env_true(const char *name) {
    const char *v = getenv(name);
    return v && (!strcasecmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on"));
}

static wm_hf_file *add_file(wm_hf_result *r, const char *name, wm_error *err) {
    wm_hf_file *f = wm_vec_push(&r->arena, &r->files, &r->n_files, sizeof *f);
    if (!f || !(f->name = wm_arena_strdup(&r->arena, name))) {
        wm_err(err, WM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return f;
}

/* ---- options: endpoint, token, offline ---- */

static wm_status check_token(const char *t, const char *from, wm_error *err) {
    size_t n = strlen(t);
    if (n > 1024) return wm_err(err, WM_ERR_INPUT, "the token from %s is longer than 1024 characters", from);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] >= 0x7f)
            return wm_err(err, WM_ERR_INPUT, "the token from %s holds a character a token cannot have (space, control "
                                             "or non-ASCII); it is not sent", from);
    return WM_OK;
}

static wm_status token_from_file(wm_hfi_ctx *c, wm_error *err) {
    char p[PATH_MAX];
    const char *v = getenv("HF_TOKEN_PATH"), *home = getenv("HF_HOME");
    if (v && *v) snprintf(p, sizeof p, "%s", v);
    else if (home && *home) snprintf(p, sizeof p, "%s/token", home);
    else {
        const char *h = getenv("HOME");
        if (!h) return WM_OK;
        snprintf(p, sizeof p, "%s/.cache/huggingface/token", h);
    }
    int present, fd;
    wm_status s = wm_input_present(p, &present, err); /* absent: no token; a FIFO or a folder: said so */
    if (s || !present || (s = wm_open_input(p, 0, &fd, NULL, err))) return s;
    size_t n = 0;
    while (n < sizeof c->token - 1) {
        ssize_t r = read(fd, c->token + n, sizeof c->token - 1 - n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
    }
    close(fd);
    c->token[n] = 0;
    while (n && (c->token[n - 1] == '\n' || c->token[n - 1] == '\r' || c->token[n - 1] == ' ')) c->token[--n] = 0;
    if (!n) return WM_OK;
    c->has_token = 1;
    return check_token(c->token, p, err);
}

static wm_status setup_net(wm_hfi_ctx *c, wm_error *err) {
    const wm_hf_resolve_opts *o = c->o;
    const char *ep = o->endpoint ? o->endpoint : getenv("HF_ENDPOINT");
    if (!ep || !*ep) ep = WM_HF_DEFAULT_ENDPOINT;
    size_t n = strlen(ep);
    while (n && ep[n - 1] == '/') n--;
    if (n == 0 || n >= sizeof c->endpoint) return wm_err(err, WM_ERR_INPUT, "HF_ENDPOINT: empty or too long");
    if (strncmp(ep, "http://", 7) && strncmp(ep, "https://", 8))
        return wm_err(err, WM_ERR_INPUT, "HF_ENDPOINT '%.200s': must start with http:// or https://", ep);
    memcpy(c->endpoint, ep, n);
    c->endpoint[n] = 0;
    const char *t = o->token ? o->token : getenv("HF_TOKEN");
    if (!o->token && (!t || !*t)) t = getenv("HUGGING_FACE_HUB_TOKEN");
    if (t && *t) {
        snprintf(c->token, sizeof c->token, "%s", t);
        c->has_token = 1;
        return check_token(t, o->token ? "the options" : "HF_TOKEN", err);
    }
    return o->token ? WM_OK : token_from_file(c, err);
}

/* ---- the cache ---- */

static void blob_of(const char *snap, const char *name, wm_hf_file *f, wm_arena *a) {
    char p[PATH_MAX], target[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", snap, name);
    ssize_t k = readlink(p, target, sizeof target - 1);
    if (k <= 0) return;
    target[k] = 0;
    const char *b = strrchr(target, '/');
    f->etag = wm_arena_strdup(a, b ? b + 1 : target);
}

/*
 * Looks at the snapshot: 1 when it holds everything asked for (the files
 * are listed in r->files), 0 when something is missing (*missing names the
 * first), -1 on an error (status in *st).
 */
static int cache_complete(wm_hfi_ctx *c, const char *snap, unsigned need, const char **missing, wm_status *st,
                          wm_error *err) {
    wm_hf_result *r = c->r;
    const wm_hf_resolve_opts *o = c->o;
    uint64_t size;
    int rv;
    *missing = NULL;
    r->n_files = 0;
#define LOOK(nm, required)                                                                                       \
    do {                                                                                                         \
        rv = wm_hfi_file_state(c->model_real, snap, (nm), &size, st, err);                                       \
        if (rv < 0) return -1;                                                                                   \
        if (rv == 0 && wm_hfi_no_exist(c->model_dir, r->commit, (nm))) {                                         \
            if (required) {                                                                                      \
                *st = wm_err(err, WM_ERR_INPUT, "%s at commit %s has no file '%s'", r->repo_id, r->commit, (nm)); \
                return -1;                                                                                       \
            }                                                                                                    \
        } else if (rv == 0) { /* not cached: only a required file makes the snapshot incomplete */             \
            if ((required) && !*missing) *missing = (nm);                                                        \
            break;                                                                                               \
        }                                                                                                        \
        wm_hf_file *f_ = add_file(r, (nm), err);                                                                 \
        if (!f_) return *st = WM_ERR_NOMEM, -1;                                                                  \
        f_->state = rv ? WM_HF_FILE_PRESENT : WM_HF_FILE_ABSENT;                                                 \
        f_->size = rv ? size : 0;                                                                                \
        if (rv) blob_of(snap, (nm), f_, &r->arena);                                                              \
    } while (0)
    for (size_t i = 0; i < N_BASE; i++)
        if (wanted(o, base_files[i])) LOOK(base_files[i], i == 0 && (need & WM_HF_NEED_CONFIG));
    if ((need & WM_HF_NEED_TOKENIZER) && !*missing) { /* some tokenizer file, or every one known absent */
        int any = 0, all_absent = 1;
        for (size_t i = 0; i < r->n_files; i++)
            if (r->files[i].state == WM_HF_FILE_PRESENT && strcmp(r->files[i].name, base_files[0]) &&
                strcmp(r->files[i].name, base_files[1]))
                any = 1;
        for (size_t i = 2; i < N_BASE; i++) all_absent &= wm_hfi_no_exist(c->model_dir, r->commit, base_files[i]);
        if (!any && !all_absent) *missing = base_files[2];
    }
    int want_w = (need & WM_HF_NEED_WEIGHTS) || wanted(o, ST_SINGLE) || wanted(o, ST_INDEX);
    if (want_w && !*missing) {
        int single = wm_hfi_file_state(c->model_real, snap, ST_SINGLE, &size, st, err);
        if (single < 0) return -1;
        int index = single ? 0 : wm_hfi_file_state(c->model_real, snap, ST_INDEX, &size, st, err);
        if (index < 0) return -1;
        if (single) LOOK(ST_SINGLE, 1);
        else if (index) {
            LOOK(ST_INDEX, 1);
            char p[PATH_MAX], *text = NULL;
            size_t n = 0, count = 0;
            const char **names = NULL;
            snprintf(p, sizeof p, "%s/%s", snap, ST_INDEX);
            if ((*st = wm_hfi_read_inside(c->model_real, p, WM_HF_MAX_INDEX, &text, &n, err))) return -1;
            *st = wm_hf_index_shards(&r->arena, text, n, p, &names, &count, err);
            free(text);
            if (*st) return -1;
            for (size_t i = 0; i < count && !*missing; i++)
                if ((need & WM_HF_NEED_WEIGHTS) || wanted(o, names[i])) LOOK(names[i], 1);
        } else if (wm_hfi_no_exist(c->model_dir, r->commit, ST_SINGLE) && wm_hfi_no_exist(c->model_dir, r->commit, ST_INDEX)) {
            if (need & WM_HF_NEED_WEIGHTS) {
                wm_hf_folder_info info;
                if ((*st = wm_hf_folder_scan(snap, c->model_dir, &info, err))) return -1;
                *st = info.pickle[0]
                          ? wm_err(err, WM_ERR_UNSUPPORTED,
                                   "%s: only pickle weights (%s): winml never loads pickle files (loading them can run "
                                   "code); use a safetensors checkpoint",
                                   r->repo_id, info.pickle)
                          : wm_err(err, WM_ERR_INPUT, "%s at commit %s has no model.safetensors or %s", r->repo_id,
                                   r->commit, ST_INDEX);
                return -1;
            }
        } else if (!*missing) {
            *missing = ST_SINGLE;
            if (c->offline && (need & WM_HF_NEED_WEIGHTS)) { /* nothing can be fetched: say why it cannot load */
                wm_hf_folder_info info;
                if ((*st = wm_hf_folder_scan(snap, c->model_dir, &info, err))) return -1;
                if (info.pickle[0]) {
                    *st = wm_err(err, WM_ERR_UNSUPPORTED,
                                 "%s: only pickle weights (%s): winml never loads pickle files (loading them can run "
                                 "code); use a safetensors checkpoint",
                                 r->repo_id, info.pickle);
                    return -1;
                }
            }
        }
    }
    for (size_t i = 0; i < o->n_include && !*missing; i++)
        if (!is_glob(o->include[i])) LOOK(o->include[i], 1);
#undef LOOK
    return *missing ? 0 : 1;
}

/* ---- the hub ---- */

typedef struct dl {
    wm_hfi_ctx *c;
    char rev[WM_HF_MAX_REVISION + 1]; /* as sent: the commit once known */
} dl;

/* Fetches name; *present says whether the repo has it. A required absent file is an error. */
static wm_status dl_one(dl *d, const char *name, int required, int *present, wm_error *err) {
    wm_hfi_ctx *c = d->c;
    wm_hf_result *r = c->r;
    char commit[WM_HF_COMMIT_LEN + 1];
    wm_hf_file *f = add_file(r, name, err);
    if (!f) return WM_ERR_NOMEM;
    wm_status s = wm_hfi_fetch(c, d->rev, name, f, commit, err);
    if (s) return s;
    if (commit[0]) {
        if (!r->commit[0]) memcpy(r->commit, commit, sizeof r->commit);
        else if (strcmp(r->commit, commit))
            return wm_err(err, WM_ERR_INPUT, "%s: the hub answered commit %s for %s after %s", r->repo_id, commit, name,
                          r->commit);
        snprintf(d->rev, sizeof d->rev, "%s", r->commit); /* pin: every later file from this commit */
    }
    if (present) *present = f->state != WM_HF_FILE_ABSENT;
    if (f->state == WM_HF_FILE_ABSENT && required)
        return wm_err(err, WM_ERR_INPUT, "%s@%s has no file '%s' (HTTP 404)", r->repo_id, r->revision, name);
    return WM_OK;
}

static wm_status check_literal(const char *name, wm_error *err) {
    wm_error e2 = {0};
    size_t n = strlen(name);
    if (n == 0 || n > WM_HF_MAX_FILENAME) return wm_err(err, WM_ERR_USAGE, "--include '%.200s': 1 to 255 bytes", name);
    if (wm_path_check_relative(name, &e2)) return wm_err(err, WM_ERR_USAGE, "--include '%.200s': %s", name, e2.msg);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f || name[i] == '\\')
            return wm_err(err, WM_ERR_USAGE, "--include '%.200s': holds a control character or '\\'", name);
    if (wm_hfi_is_pickle_name(name))
        return wm_err(err, WM_ERR_UNSUPPORTED, "--include '%s': pickle weights are never downloaded; use safetensors", name);
    return WM_OK;
}

static wm_status download_all(wm_hfi_ctx *c, unsigned need, wm_error *err) {
    wm_hf_result *r = c->r;
    const wm_hf_resolve_opts *o = c->o;
    dl d = {.c = c};
    snprintf(d.rev, sizeof d.rev, "%s", r->revision);
    r->n_files = 0;
    r->commit[0] = 0;
    wm_status s;
    if (wanted(o, base_files[0]) && (s = dl_one(&d, base_files[0], need & WM_HF_NEED_CONFIG, NULL, err))) return s;
    int have = 0;
    if ((need & WM_HF_NEED_WEIGHTS) || wanted(o, ST_SINGLE))
        if ((s = dl_one(&d, ST_SINGLE, 0, &have, err))) return s;
    if (!have && ((need & WM_HF_NEED_WEIGHTS) || wanted(o, ST_INDEX))) {
        if ((s = dl_one(&d, ST_INDEX, 0, &have, err))) return s;
        if (have) {
            char p[PATH_MAX], *text = NULL;
            size_t n = 0, count = 0;
            const char **names = NULL;
            snprintf(p, sizeof p, "%s/snapshots/%s/%s", c->model_dir, r->commit, ST_INDEX);
            if ((s = wm_hfi_read_inside(c->model_real, p, WM_HF_MAX_INDEX, &text, &n, err))) return s;
            s = wm_hf_index_shards(&r->arena, text, n, p, &names, &count, err);
            free(text);
            for (size_t i = 0; !s && i < count; i++)
                if ((need & WM_HF_NEED_WEIGHTS) || wanted(o, names[i])) s = dl_one(&d, names[i], 1, NULL, err);
            if (s) return s;
        }
    }
    if (!have && (need & WM_HF_NEED_WEIGHTS)) {
        static const char *const pickles[] = {"pytorch_model.bin", "pytorch_model.bin.index.json", "model.ckpt"};
        for (size_t i = 0; i < sizeof pickles / sizeof pickles[0]; i++) {
            int e = wm_hfi_exists(c, d.rev, pickles[i], &s, err);
            if (e < 0) return s;
            if (e)
                return wm_err(err, WM_ERR_UNSUPPORTED,
                              "%s@%s: only pickle weights (%s): winml never downloads or loads pickle files (loading "
                              "them can run code); use a safetensors checkpoint",
                              r->repo_id, r->revision, pickles[i]);
        }
        return wm_err(err, WM_ERR_INPUT, "%s@%s has neither model.safetensors nor %s (HTTP 404)", r->repo_id,
                      r->revision, ST_INDEX);
    }
    for (size_t i = 1; i < N_BASE; i++)
        if (wanted(o, base_files[i]) && (s = dl_one(&d, base_files[i], 0, NULL, err))) return s;
    for (size_t i = 0; i < o->n_include; i++)
        if (!is_glob(o->include[i]) && (s = dl_one(&d, o->include[i], 1, NULL, err))) return s;
    if (!r->commit[0])
        return wm_err(err, WM_ERR_INPUT, "%s@%s: nothing selected to download (see --include)", r->repo_id, r->revision);
    return WM_OK;
}

/* 1 when name ends in ext, optionally followed by ".gz". */
static int ends_with(const char *name, const char *ext) {
    size_t n = strlen(name), e = strlen(ext);
    if (n > 3 && !strcmp(name + n - 3, ".gz")) n -= 3;
    return n > e && !strncmp(name + n - e, ext, e);
}

/* A dataset file the options select: a table file of the split (any when none) in one of hf/dataset.h's layouts,
   under the config's folder when one is given. */
static int dataset_wanted(const wm_hf_resolve_opts *o, const char *name) {
    static const char *const exts[] = {".parquet", ".arrow", ".jsonl", ".json", ".csv", ".tsv"};
    int table = 0;
    for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++) table |= ends_with(name, exts[i]);
    if (!table) return 0;
    const char *cfg = o->dataset_config && o->dataset_config[0] ? o->dataset_config : NULL;
    const char *split = o->dataset_split && o->dataset_split[0] ? o->dataset_split : NULL;
    const char *rest = name;
    if (cfg) {
        size_t k = strlen(cfg);
        if (strncmp(name, cfg, k) || name[k] != '/') return 0;
        rest = name + k + 1;
    } else if (!strncmp(name, "data/", 5)) rest = name + 5;
    if (!split) return 1;
    size_t k = strlen(split);
    /* SPLIT-00000-of-00001.parquet, SPLIT.jsonl, SPLIT/0000.parquet (the parquet conversion's layout) */
    return !strncmp(rest, split, k) && (rest[k] == '-' || rest[k] == '.' || (rest[k] == '/' && !strchr(rest + k + 1, '/')));
}

/* A dataset repo: its listing at the revision, then every file dataset_wanted selects. */
static wm_status download_dataset(wm_hfi_ctx *c, wm_error *err) {
    wm_hf_result *r = c->r;
    dl d = {.c = c};
    snprintf(d.rev, sizeof d.rev, "%s", r->revision);
    r->n_files = 0;
    r->commit[0] = 0;
    char label[WM_HF_MAX_REPO_ID + 64], page[4096] = "", next[4096];
    size_t count = 0;
    wm_status s = WM_OK;
    for (int p = 0; !s && (p == 0 || page[0]); p++) { /* the listing's pages (the hub's Link: rel="next") */
        char *text = NULL;
        size_t n = 0, k = 0;
        const char **names = NULL;
        snprintf(label, sizeof label, "%s: the hub's file listing (page %d)", r->repo_id, p + 1);
        if (p == WM_HF_MAX_TREE_PAGES)
            s = wm_err(err, WM_ERR_INPUT, "%s: more than %d pages", label, WM_HF_MAX_TREE_PAGES);
        if (!s) s = wm_hfi_tree(c, d.rev, p ? page : NULL, &text, &n, next, sizeof next, err);
        if (!s) s = wm_hf_tree_files(&r->arena, text, n, label, &names, &k, err);
        free(text);
        if (!s && (count += k) > WM_HF_MAX_TREE_FILES)
            s = wm_err(err, WM_ERR_INPUT, "%s: more than %d files", label, WM_HF_MAX_TREE_FILES);
        for (size_t i = 0; !s && i < k; i++)
            if (dataset_wanted(c->o, names[i])) s = dl_one(&d, names[i], 1, NULL, err);
        snprintf(page, sizeof page, "%s", next);
    }
    if (!s && !r->commit[0])
        s = wm_err(err, WM_ERR_INPUT, "%s@%s: no table file (.parquet, .arrow, .jsonl, .csv, .tsv) of %s%s%s%s among "
                   "its %zu files", r->repo_id, r->revision, c->o->dataset_split ? "split " : "every split",
                   c->o->dataset_split ? c->o->dataset_split : "", c->o->dataset_config ? " in config " : "",
                   c->o->dataset_config ? c->o->dataset_config : "", count);
    return s;
}

static wm_status offline_miss(wm_hfi_ctx *c, const char *missing, wm_error *err) {
    wm_hf_result *r = c->r;
    char what[PATH_MAX + 256];
    if (missing) snprintf(what, sizeof what, "the cached snapshot %s lacks '%s'", r->commit, missing);
    else snprintf(what, sizeof what, "it is not in the Hugging Face cache (%s)", r->cache_dir);
    return wm_err(err, WM_ERR_INPUT,
                  "%s@%s: %s and HF_HUB_OFFLINE=1 forbids downloading: run `winml download -m %s@%s` where the network "
                  "is reachable (HF_HUB_OFFLINE unset), or pass a local folder with -m",
                  r->repo_id, r->revision, what, r->repo_id, r->revision);
}

static wm_status resolve_repo(wm_hfi_ctx *c, const char *spec, unsigned need, wm_error *err) {
    wm_hf_result *r = c->r;
    const wm_hf_resolve_opts *o = c->o;
    wm_status s = wm_hf_parse_repo_spec(spec, r->repo_id, sizeof r->repo_id, r->revision, sizeof r->revision, err);
    if (s) return s;
    for (size_t i = 0; i < o->n_include; i++)
        if (!is_glob(o->include[i]) && (s = check_literal(o->include[i], err))) return s;
    if (o->cache_dir) snprintf(r->cache_dir, sizeof r->cache_dir, "%s", o->cache_dir);
    else if ((s = wm_hf_cache_dir(r->cache_dir, sizeof r->cache_dir, err))) return s;
    c->kind = o->dataset ? "datasets/" : "";
    snprintf(c->repo_folder, sizeof c->repo_folder, "%s--%s", o->dataset ? "datasets" : "models", r->repo_id);
    for (char *p = c->repo_folder; *p; p++)
        if (*p == '/') {
            memmove(p + 2, p + 1, strlen(p + 1) + 1);
            p[0] = p[1] = '-';
        }
    int k = snprintf(c->model_dir, sizeof c->model_dir, "%s/%s", r->cache_dir, c->repo_folder);
    if (k < 0 || (size_t)k >= sizeof c->model_dir - 128) return wm_err(err, WM_ERR_INPUT, "cache folder path too long");
    snprintf(r->root, sizeof r->root, "%s", c->model_dir);
    c->offline = o->offline ? o->offline > 0 : (env_true("HF_HUB_OFFLINE") || env_true("TRANSFORMERS_OFFLINE"));
    c->retries = o->retries > 0 ? o->retries : o->retries < 0 ? 0 : 3;
    c->progress = o->progress;

    /* the cache first */
    const char *missing = NULL;
    struct stat sb;
    if (wm_hf_is_commit(r->revision, strlen(r->revision))) memcpy(r->commit, r->revision, sizeof r->commit);
    else if ((s = wm_hfi_read_ref(c->model_dir, r->revision, r->commit, err))) return s;
    if (r->commit[0]) {
        snprintf(r->folder, sizeof r->folder, "%s/snapshots/%s", c->model_dir, r->commit);
        if (lstat(r->folder, &sb) == 0) {
            if (!realpath(c->model_dir, c->model_real)) return wm_err(err, WM_ERR_IO, "%s: %s", c->model_dir, strerror(errno));
            if (S_ISLNK(sb.st_mode) || !S_ISDIR(sb.st_mode))
                return wm_err(err, WM_ERR_INPUT, "%s: a symbolic link or not a folder: refused", r->folder);
            int done = cache_complete(c, r->folder, need, &missing, &s, err);
            if (done < 0) return s;
            if (done && (!o->refresh || c->offline)) {
                r->source = WM_HF_SRC_CACHE;
                return WM_OK;
            }
        } else {
            missing = NULL;
        }
    }
    if (c->offline) return offline_miss(c, missing, err);

    /* then the hub */
    if ((s = setup_net(c, err))) return s;
    c->model_real[0] = 0; /* the folders are made once the hub has answered (hub_download.c) */
    s = o->dataset ? download_dataset(c, err) : download_all(c, need, err);
    wm_hfi_net_close(c);
    if (s) return s;
    snprintf(r->folder, sizeof r->folder, "%s/snapshots/%s", c->model_dir, r->commit);
    r->source = WM_HF_SRC_DOWNLOAD;
    return WM_OK;
}

/* ---- local folders ---- */

static wm_status resolve_local(wm_hfi_ctx *c, const char *spec, const struct stat *sb, wm_error *err) {
    wm_hf_result *r = c->r;
    char folder[PATH_MAX];
    if (S_ISDIR(sb->st_mode)) snprintf(folder, sizeof folder, "%s", spec);
    else wm_path_dirname(spec, folder, sizeof folder);
    if (!realpath(folder, r->folder)) return wm_err(err, WM_ERR_INPUT, "%s: %s", folder, strerror(errno));
    snprintf(r->root, sizeof r->root, "%s", r->folder);
    /* a snapshot folder of a cache given by path: its files link to ../../blobs */
    char *snap = strrchr(r->root, '/');
    if (snap && wm_hf_is_commit(snap + 1, strlen(snap + 1)) && snap - r->root > 10 && !strncmp(snap - 10, "/snapshots", 10)) {
        *(snap - 10) = 0;
        const char *model = strrchr(r->root, '/');
        if (!model || strncmp(model + 1, "models--", 8)) snprintf(r->root, sizeof r->root, "%s", r->folder);
        else snprintf(r->commit, sizeof r->commit, "%s", snap + 1);
    }
    if (!realpath(r->root, c->model_real)) return wm_err(err, WM_ERR_INPUT, "%s: %s", r->root, strerror(errno));
    r->source = WM_HF_SRC_LOCAL;
    /* list what is there */
    uint64_t size;
    wm_status st;
    const char *names[N_BASE + 2];
    size_t n = 0;
    for (size_t i = 0; i < N_BASE; i++) names[n++] = base_files[i];
    names[n++] = ST_SINGLE;
    names[n++] = ST_INDEX;
    for (size_t i = 0; i < n; i++) {
        int rv = wm_hfi_file_state(c->model_real, r->folder, names[i], &size, &st, err);
        if (rv < 0) return st;
        if (!rv) continue;
        wm_hf_file *f = add_file(r, names[i], err);
        if (!f) return WM_ERR_NOMEM;
        f->size = size;
    }
    return WM_OK;
}

/* ---- entry points ---- */

static int looks_like_path(const char *spec) {
    const char *at = strchr(spec, '@'), *end = at ? at : spec + strlen(spec);
    int slashes = 0;
    for (const char *p = spec; p < end; p++) slashes += *p == '/';
    return spec[0] == '/' || spec[0] == '.' || spec[0] == '~' || slashes != 1;
}

wm_status wm_hf_resolve_ex(const char *spec, const wm_hf_resolve_opts *opts, wm_hf_result **out, wm_error *err) {
    static const wm_hf_resolve_opts defaults = {0};
    *out = NULL;
    if (!opts) opts = &defaults;
    if (!spec || !*spec) return wm_err(err, WM_ERR_USAGE, "no model given (-m FOLDER or ORG/NAME[@REVISION])");
    wm_hf_result *r = calloc(1, sizeof *r);
    if (!r) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    wm_arena_init(&r->arena);
    wm_hfi_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        free(r);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    c->o = opts;
    c->r = r;
    unsigned need = opts->dataset ? 0 : opts->need_set ? opts->need : (WM_HF_NEED_CONFIG | WM_HF_NEED_WEIGHTS);
    wm_status s;
    struct stat sb;
    const char *label = spec;
    if (stat(spec, &sb) == 0) {
        s = resolve_local(c, spec, &sb, err);
    } else if (looks_like_path(spec)) {
        s = wm_err(err, WM_ERR_INPUT, "model '%.300s': no such file or folder (a Hugging Face model is written ORG/NAME)", spec);
    } else {
        s = resolve_repo(c, spec, need, err);
        label = r->repo_id;
    }
    if (!s) s = wm_hf_folder_scan(r->folder, r->root, &r->info, err);
    if (!s && need) s = wm_hf_folder_check(r->folder, r->root, need, label, err);
    wm_hfi_net_close(c);
    memset(c->token, 0, sizeof c->token);
    free(c);
    if (s) {
        wm_hf_result_free(r);
        return s;
    }
    *out = r;
    return WM_OK;
}

void wm_hf_result_free(wm_hf_result *r) {
    if (!r) return;
    wm_arena_free(&r->arena);
    free(r);
}

wm_status wm_hf_resolve(const char *spec, const wm_hf_resolve_opts *opts, char *folder_out, size_t n,
                        char *root_out, size_t root_n, wm_error *err) {
    wm_hf_result *r = NULL;
    wm_status s = wm_hf_resolve_ex(spec, opts, &r, err);
    if (s) return s;
    if (strlen(r->folder) >= n || (root_out && strlen(r->root) >= root_n))
        s = wm_err(err, WM_ERR_INPUT, "%s: path too long for the caller's buffer", r->folder);
    else {
        memcpy(folder_out, r->folder, strlen(r->folder) + 1);
        if (root_out) memcpy(root_out, r->root, strlen(r->root) + 1);
    }
    wm_hf_result_free(r);
    return s;
}
