/*
 * hub_cache.c - the Hugging Face cache on disk: where it is, repo ids and
 * revisions, refs, snapshot files that must resolve inside their model
 * folder, index shard names, what a folder holds, and the small atomic
 * writes the downloader makes (folders, refs, links).
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/output.h"
#include "core/file.h"
#include "hf/hub_internal.h"

/* ---- where the cache is ---- */

static wm_status put_path(char *out, size_t n, const char *a, const char *b, wm_error *err) {
    int k = snprintf(out, n, "%s%s", a, b ? b : "");
    if (k < 0 || (size_t)k >= n) return wm_err(err, WM_ERR_INPUT, "cache folder path too long: '%.200s'", a);
    return WM_OK;
}

static wm_status expand_home(const char *v, const char *suffix, char *out, size_t n, wm_error *err) {
    char buf[PATH_MAX];
    if (v[0] == '~' && (v[1] == '/' || v[1] == 0)) {
        const char *home = getenv("HOME");
        if (!home || !*home) {
            struct passwd *pw = getpwuid(getuid());
            home = pw ? pw->pw_dir : NULL;
        }
        if (!home) return wm_err(err, WM_ERR_INPUT, "cannot expand '~' in '%.200s': no HOME", v);
        int k = snprintf(buf, sizeof buf, "%s%s", home, v + 1);
        if (k < 0 || (size_t)k >= sizeof buf) return wm_err(err, WM_ERR_INPUT, "cache folder path too long");
        v = buf;
    }
    return put_path(out, n, v, suffix, err);
}

wm_status wm_hf_cache_dir(char *out, size_t n, wm_error *err) {
    const char *v;
    if ((v = getenv("HF_HUB_CACHE")) && *v) return expand_home(v, NULL, out, n, err);
    if ((v = getenv("HUGGINGFACE_HUB_CACHE")) && *v) return expand_home(v, NULL, out, n, err);
    if ((v = getenv("HF_HOME")) && *v) return expand_home(v, "/hub", out, n, err);
    if ((v = getenv("XDG_CACHE_HOME")) && *v) return expand_home(v, "/huggingface/hub", out, n, err);
    return expand_home("~", "/.cache/huggingface/hub", out, n, err);
}

wm_status wm_hf_datasets_cache_dir(char *out, size_t n, wm_error *err) {
    const char *v;
    if ((v = getenv("HF_DATASETS_CACHE")) && *v) return expand_home(v, NULL, out, n, err);
    if ((v = getenv("HF_HOME")) && *v) return expand_home(v, "/datasets", out, n, err);
    if ((v = getenv("XDG_CACHE_HOME")) && *v) return expand_home(v, "/huggingface/datasets", out, n, err);
    return expand_home("~", "/.cache/huggingface/datasets", out, n, err);
}

/* ---- names ---- */

int wm_hf_is_commit(const char *s, size_t n) {
    if (n != WM_HF_COMMIT_LEN) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

static int word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static wm_status check_repo_part(const char *p, size_t n, const char *what, const char *spec, wm_error *err) {
    if (n < 1 || n > 96)
        return wm_err(err, WM_ERR_INPUT, "model '%.300s': the %s must have 1 to 96 characters", spec, what);
    for (size_t i = 0; i < n; i++)
        if (!word_char(p[i]) && p[i] != '-' && p[i] != '.')
            return wm_err(err, WM_ERR_INPUT, "model '%.300s': the %s may only hold letters, digits, '_', '-', '.'",
                          spec, what);
    if (!word_char(p[0]) || !word_char(p[n - 1]))
        return wm_err(err, WM_ERR_INPUT, "model '%.300s': the %s must start and end with a letter or digit", spec,
                      what);
    for (size_t i = 0; i + 1 < n; i++)
        if ((p[i] == '-' && p[i + 1] == '-') || (p[i] == '.' && p[i + 1] == '.'))
            return wm_err(err, WM_ERR_INPUT, "model '%.300s': '--' and '..' are not allowed in a repo id", spec);
    return WM_OK;
}

wm_status wm_hf_parse_repo_spec(const char *spec, char *repo_id, size_t repo_n, char *revision, size_t rev_n,
                                wm_error *err) {
    const char *at = strchr(spec, '@');
    size_t idn = at ? (size_t)(at - spec) : strlen(spec);
    const char *slash = memchr(spec, '/', idn);
    if (!slash)
        return wm_err(err, WM_ERR_INPUT,
                      "model '%.300s': no such file or folder, and not a Hugging Face repo id (write ORG/NAME)", spec);
    wm_status s = check_repo_part(spec, (size_t)(slash - spec), "organisation", spec, err);
    if (!s) s = check_repo_part(slash + 1, idn - (size_t)(slash - spec) - 1, "name", spec, err);
    if (s) return s;
    if (idn >= repo_n || idn > WM_HF_MAX_REPO_ID) return wm_err(err, WM_ERR_INPUT, "model '%.300s': repo id too long", spec);
    if (idn >= 4 && !strncmp(spec + idn - 4, ".git", 4))
        return wm_err(err, WM_ERR_INPUT, "model '%.300s': a repo id does not end with '.git'", spec);
    memcpy(repo_id, spec, idn);
    repo_id[idn] = 0;
    const char *rev = at ? at + 1 : "main";
    size_t rn = strlen(rev);
    if (rn < 1 || rn > WM_HF_MAX_REVISION || rn >= rev_n)
        return wm_err(err, WM_ERR_INPUT, "model '%.300s': the revision after '@' must have 1 to %d characters", spec,
                      WM_HF_MAX_REVISION);
    for (size_t i = 0; i < rn; i++)
        if (!word_char(rev[i]) && rev[i] != '-' && rev[i] != '.' && rev[i] != '/')
            return wm_err(err, WM_ERR_INPUT,
                          "model '%.300s': the revision may only hold letters, digits, '_', '-', '.', '/'", spec);
    wm_error e2 = {0};
    if (wm_path_check_relative(rev, &e2))
        return wm_err(err, WM_ERR_INPUT, "model '%.300s': revision: %s", spec, e2.msg);
    if (rev[rn - 1] == '/') return wm_err(err, WM_ERR_INPUT, "model '%.300s': the revision ends with '/'", spec);
    memcpy(revision, rev, rn + 1);
    return WM_OK;
}

wm_status wm_hf_check_ref(const void *data, size_t n, const char *label, char *commit, wm_error *err) {
    const char *p = data;
    if (!wm_hf_is_commit(p, n)) {
        char shown[64];
        size_t k = n < 48 ? n : 48;
        for (size_t i = 0; i < k; i++) shown[i] = (p[i] >= 0x20 && p[i] < 0x7f) ? p[i] : '?';
        shown[k] = 0;
        return wm_err(err, WM_ERR_INPUT,
                      "%s: holds '%s%s' (%zu bytes), not a commit id of exactly 40 lowercase hex digits: refused "
                      "(the cache entry is damaged or hostile; delete it)",
                      label, shown, n > k ? "..." : "", n);
    }
    memcpy(commit, p, WM_HF_COMMIT_LEN);
    commit[WM_HF_COMMIT_LEN] = 0;
    return WM_OK;
}

/* ---- files inside a folder ---- */

static int inside(const char *base, const char *path) {
    size_t n = strlen(base);
    if (n == 1 && base[0] == '/') return path[0] == '/';
    return strncmp(base, path, n) == 0 && (path[n] == 0 || path[n] == '/');
}

int wm_hfi_file_state(const char *root_real, const char *folder, const char *name, uint64_t *size, wm_status *st,
                      wm_error *err) {
    char p[PATH_MAX], real[PATH_MAX];
    struct stat sb;
    *st = WM_OK;
    int k = snprintf(p, sizeof p, "%s/%s", folder, name);
    if (k < 0 || (size_t)k >= sizeof p) {
        *st = wm_err(err, WM_ERR_INPUT, "%s/%.200s: path too long", folder, name);
        return -1;
    }
    if (lstat(p, &sb) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) return 0;
        *st = wm_err(err, WM_ERR_IO, "%s: %s", p, strerror(errno));
        return -1;
    }
    if (!realpath(p, real)) {
        if (errno == ENOENT && S_ISLNK(sb.st_mode)) return 0; /* dangling link: the blob is gone */
        *st = wm_err(err, WM_ERR_INPUT, "%s: %s", p, strerror(errno));
        return -1;
    }
    if (!inside(root_real, real)) {
        *st = wm_err(err, WM_ERR_INPUT, "%s resolves to '%s', outside the model folder '%s': refused", p, real,
                     root_real);
        return -1;
    }
    if (stat(real, &sb) != 0) {
        *st = wm_err(err, WM_ERR_IO, "%s: %s", p, strerror(errno));
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        *st = wm_err_not_regular(p, sb.st_mode, err);
        return -1;
    }
    *size = (uint64_t)sb.st_size;
    return 1;
}

int wm_hfi_no_exist(const char *model_dir, const char *commit, const char *name) {
    char p[PATH_MAX];
    struct stat sb;
    int k = snprintf(p, sizeof p, "%s/.no_exist/%s/%s", model_dir, commit, name);
    if (k < 0 || (size_t)k >= sizeof p) return 0;
    return lstat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

wm_status wm_hfi_read_ref(const char *model_dir, const char *revision, char *commit, wm_error *err) {
    char p[PATH_MAX], label[PATH_MAX + 16], buf[64];
    commit[0] = 0;
    int k = snprintf(p, sizeof p, "%s/refs/%s", model_dir, revision);
    if (k < 0 || (size_t)k >= sizeof p) return wm_err(err, WM_ERR_INPUT, "refs/%.200s: path too long", revision);
    snprintf(label, sizeof label, "%s", p);
    int fd = open(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR) return WM_OK;
        if (errno == ELOOP) return wm_err(err, WM_ERR_INPUT, "%s: is a symbolic link, refused", label);
        return wm_err(err, WM_ERR_IO, "%s: cannot open: %s", label, strerror(errno));
    }
    struct stat sb = {0};
    ssize_t n = -1;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) {
        do n = read(fd, buf, sizeof buf);
        while (n < 0 && errno == EINTR);
    } else {
        close(fd);
        return wm_err_not_regular(label, sb.st_mode, err);
    }
    close(fd);
    if (n < 0) return wm_err(err, WM_ERR_IO, "%s: cannot read: %s", label, strerror(errno));
    return wm_hf_check_ref(buf, (size_t)n, label, commit, err);
}

/* ---- writing ---- */

wm_status wm_hfi_mkdir_p(const char *path, wm_error *err) {
    char p[PATH_MAX];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof p) return wm_err(err, WM_ERR_INPUT, "folder '%.200s': bad path", path);
    memcpy(p, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != 0) continue;
        char keep = p[i];
        p[i] = 0;
        struct stat sb;
        if (mkdir(p, 0755) != 0 && (errno != EEXIST || stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode)))
            return wm_err(err, WM_ERR_IO, "cannot create folder '%s': %s", p, errno == EEXIST ? "not a folder" : strerror(errno));
        p[i] = keep;
    }
    return WM_OK;
}

wm_status wm_hfi_mkdirs(const char *base, const char *rel, wm_error *err) {
    char p[PATH_MAX];
    int k = snprintf(p, sizeof p, "%s/%s", base, rel);
    if (k < 0 || (size_t)k >= sizeof p) return wm_err(err, WM_ERR_INPUT, "%s/%.200s: path too long", base, rel);
    size_t start = strlen(base) + 1, n = (size_t)k;
    for (size_t i = start; i <= n; i++) {
        if (p[i] != '/' && p[i] != 0) continue;
        char keep = p[i];
        p[i] = 0;
        if (mkdir(p, 0755) != 0) {
            struct stat sb;
            if (errno != EEXIST) return wm_err(err, WM_ERR_IO, "cannot create folder '%s': %s", p, strerror(errno));
            if (lstat(p, &sb) != 0 || S_ISLNK(sb.st_mode) || !S_ISDIR(sb.st_mode))
                return wm_err(err, WM_ERR_INPUT, "%s: a symbolic link or not a folder: refused", p);
        }
        p[i] = keep;
    }
    return WM_OK;
}

static atomic_uint tmp_counter;

/* "<path>.<n>.winml-tmp.<pid>": the tool's temporary pattern (core/output.h), with a counter because the
 * download threads of one process may write beside the same file. */
static void tmp_name(char *out, size_t n, const char *path) {
    snprintf(out, n, "%s.%u" WM_TMP_TAG "%ld", path, atomic_fetch_add(&tmp_counter, 1), (long)getpid());
}

wm_status wm_hfi_write_atomic(const char *path, const void *data, size_t n, wm_error *err) {
    char tmp[PATH_MAX + 64];
    tmp_name(tmp, sizeof tmp, path);
    int slot = wm_tmp_track(tmp, 0); /* before it exists: a signal never misses it */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666); /* less the umask, as Python writes */
    if (fd < 0) {
        wm_tmp_untrack(slot);
        return wm_err(err, WM_ERR_IO, "cannot create '%s': %s", tmp, strerror(errno));
    }
    wm_status s = WM_OK;
    if (wm_write_full(fd, data, n) != 0) s = wm_err(err, WM_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    if (close(fd) != 0 && !s) s = wm_err(err, WM_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    if (!s && rename(tmp, path) != 0) s = wm_err(err, WM_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    if (s) unlink(tmp);
    wm_tmp_untrack(slot);
    return s;
}

wm_status wm_hfi_symlink_atomic(const char *target, const char *path, wm_error *err) {
    char tmp[PATH_MAX + 64];
    tmp_name(tmp, sizeof tmp, path);
    if (symlink(target, tmp) != 0) return wm_err(err, WM_ERR_IO, "cannot create link '%s': %s", tmp, strerror(errno));
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return wm_err(err, WM_ERR_IO, "cannot create link '%s': %s", path, strerror(e));
    }
    return WM_OK;
}

wm_status wm_hfi_read_inside(const char *root_real, const char *path, size_t max, char **out, size_t *n,
                             wm_error *err) {
    char real[PATH_MAX];
    *out = NULL;
    *n = 0;
    if (!realpath(path, real)) return wm_err(err, WM_ERR_INPUT, "%s: %s", path, strerror(errno));
    if (!inside(root_real, real))
        return wm_err(err, WM_ERR_INPUT, "%s resolves to '%s', outside the model folder '%s': refused", path, real,
                      root_real);
    int fd = open(real, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return wm_err(err, WM_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb = {0};
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return wm_err_not_regular(path, sb.st_mode, err);
    }
    if ((uint64_t)sb.st_size > max) {
        close(fd);
        return wm_err(err, WM_ERR_INPUT, "%s: %lld bytes, more than the %zu accepted", path, (long long)sb.st_size, max);
    }
    size_t size = (size_t)sb.st_size;
    char *buf = malloc(size + 1);
    if (!buf) {
        close(fd);
        return wm_err(err, WM_ERR_NOMEM, "out of memory reading %s", path);
    }
    size_t off = 0;
    while (off < size) {
        ssize_t r = read(fd, buf + off, size - off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        off += (size_t)r;
    }
    close(fd);
    if (off != size) {
        free(buf);
        return wm_err(err, WM_ERR_IO, "%s: short read", path);
    }
    buf[size] = 0;
    *out = buf;
    *n = size;
    return WM_OK;
}

/* ---- what a folder holds ---- */

static int ends_with_ci(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n > k && strcasecmp(s + n - k, suf) == 0;
}

int wm_hfi_is_pickle_name(const char *name) {
    return ends_with_ci(name, ".bin") || ends_with_ci(name, ".pt") || ends_with_ci(name, ".pth") ||
           ends_with_ci(name, ".ckpt") || ends_with_ci(name, ".bin.index.json");
}

wm_status wm_hf_folder_scan(const char *folder, const char *root, wm_hf_folder_info *info, wm_error *err) {
    static const struct {
        const char *name;
        unsigned bit;
    } toks[] = {{"tokenizer.json", WM_HF_TOK_JSON},        {"tokenizer_config.json", WM_HF_TOK_CONFIG},
                {"special_tokens_map.json", WM_HF_TOK_SPECIAL}, {"vocab.json", WM_HF_TOK_VOCAB_JSON},
                {"merges.txt", WM_HF_TOK_MERGES},          {"vocab.txt", WM_HF_TOK_VOCAB_TXT},
                {"spiece.model", WM_HF_TOK_SPM},           {"sentencepiece.bpe.model", WM_HF_TOK_SPM},
                {"tokenizer.model", WM_HF_TOK_SPM},        {"source.spm", WM_HF_TOK_SPM}};
    char root_real[PATH_MAX];
    memset(info, 0, sizeof *info);
    if (!realpath(root ? root : folder, root_real))
        return wm_err(err, WM_ERR_INPUT, "%s: %s", root ? root : folder, strerror(errno));
    wm_status st;
    uint64_t sz;
    int r;
    if ((r = wm_hfi_file_state(root_real, folder, "config.json", &sz, &st, err)) < 0) return st;
    info->has_config = r;
    if ((r = wm_hfi_file_state(root_real, folder, "generation_config.json", &sz, &st, err)) < 0) return st;
    info->has_generation_config = r;
    if ((r = wm_hfi_file_state(root_real, folder, "model.safetensors.index.json", &sz, &st, err)) < 0) return st;
    if (r) info->weights = WM_HF_WEIGHTS_INDEX;
    else {
        if ((r = wm_hfi_file_state(root_real, folder, "model.safetensors", &sz, &st, err)) < 0) return st;
        if (r) info->weights = WM_HF_WEIGHTS_SINGLE;
    }
    for (size_t i = 0; i < sizeof toks / sizeof toks[0]; i++) {
        if ((r = wm_hfi_file_state(root_real, folder, toks[i].name, &sz, &st, err)) < 0) return st;
        if (r) info->tokenizer |= toks[i].bit;
    }
    DIR *d = opendir(folder);
    if (!d) return wm_err(err, WM_ERR_IO, "%s: cannot list: %s", folder, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!wm_hfi_is_pickle_name(e->d_name) || strlen(e->d_name) >= sizeof info->pickle) continue;
        if (!info->pickle[0] || strcmp(e->d_name, info->pickle) < 0) snprintf(info->pickle, sizeof info->pickle, "%s", e->d_name);
    }
    closedir(d);
    return WM_OK;
}

wm_status wm_hf_folder_check(const char *folder, const char *root, unsigned need, const char *label,
                             wm_error *err) {
    wm_hf_folder_info info;
    wm_status s = wm_hf_folder_scan(folder, root, &info, err);
    if (s) return s;
    if ((need & WM_HF_NEED_WEIGHTS) && info.weights == WM_HF_WEIGHTS_NONE) {
        if (info.pickle[0])
            return wm_err(err, WM_ERR_UNSUPPORTED,
                          "%s: only pickle weights (%s): winml never loads pickle files (loading them can run code); "
                          "use safetensors weights (model.safetensors)",
                          label, info.pickle);
        return wm_err(err, WM_ERR_INPUT, "%s: missing model.safetensors (or model.safetensors.index.json and its shards)",
                      label);
    }
    if ((need & WM_HF_NEED_WEIGHTS) && info.weights == WM_HF_WEIGHTS_INDEX) {
        char root_real[PATH_MAX], p[PATH_MAX];
        if (!realpath(root ? root : folder, root_real)) return wm_err(err, WM_ERR_INPUT, "%s: %s", folder, strerror(errno));
        snprintf(p, sizeof p, "%s/model.safetensors.index.json", folder);
        char *text = NULL;
        size_t n = 0;
        if ((s = wm_hfi_read_inside(root_real, p, WM_HF_MAX_INDEX, &text, &n, err))) return s;
        wm_arena a;
        wm_arena_init(&a);
        const char **names = NULL;
        size_t count = 0, missing = 0;
        const char *first = NULL;
        s = wm_hf_index_shards(&a, text, n, p, &names, &count, err);
        free(text);
        for (size_t i = 0; !s && i < count; i++) {
            uint64_t sz;
            wm_status st;
            int r = wm_hfi_file_state(root_real, folder, names[i], &sz, &st, err);
            if (r < 0) s = st;
            else if (!r && !missing++) first = names[i];
        }
        if (!s && missing)
            s = wm_err(err, WM_ERR_INPUT, "%s: missing shard '%s' named by model.safetensors.index.json (%zu of %zu shards missing)",
                       label, first, missing, count);
        wm_arena_free(&a);
        if (s) return s;
    }
    if ((need & WM_HF_NEED_CONFIG) && !info.has_config) return wm_err(err, WM_ERR_INPUT, "%s: missing config.json", label);
    if ((need & WM_HF_NEED_TOKENIZER) &&
        !(info.tokenizer & (WM_HF_TOK_JSON | WM_HF_TOK_VOCAB_JSON | WM_HF_TOK_VOCAB_TXT | WM_HF_TOK_SPM)))
        return wm_err(err, WM_ERR_INPUT,
                      "%s: missing tokenizer files (tokenizer.json, a SentencePiece model, vocab.json + merges.txt or "
                      "vocab.txt)", label);
    return WM_OK;
}

/* ---- index shard names ---- */

static wm_status check_shard_name(const char *s, const char *tensor, const char *label, wm_error *err) {
    size_t n = strlen(s);
    const char *why = NULL;
    wm_error e2 = {0};
    if (n == 0 || n > WM_HF_MAX_FILENAME) why = "must have 1 to 255 bytes";
    else if (wm_path_check_relative(s, &e2)) why = e2.msg;
    else if (strchr(s, '/') || strchr(s, '\\')) why = "must be a plain file name in the index's folder (no '/' or '\\')";
    else if (n <= 12 || strcmp(s + n - 12, ".safetensors") != 0) why = "must end with '.safetensors'";
    for (size_t i = 0; !why && i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) why = "holds a control character";
    if (why)
        return wm_err(err, WM_ERR_INPUT, "%s: weight_map: tensor '%.200s': shard file name '%.200s' %s: refused", label,
                      tensor, s, why);
    return WM_OK;
}

static int cmp_cstr(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

wm_status wm_hf_index_shards(wm_arena *a, const void *text, size_t n, const char *label, const char ***names,
                             size_t *count, wm_error *err) {
    *names = NULL;
    *count = 0;
    if (!label) label = "<index>";
    if (n > WM_HF_MAX_INDEX) return wm_err(err, WM_ERR_INPUT, "%s: %zu bytes, more than the %u accepted", label, n, WM_HF_MAX_INDEX);
    cJSON *doc = cJSON_ParseWithLength(text, n);
    if (!doc || !cJSON_IsObject(doc)) {
        cJSON_Delete(doc);
        return wm_err(err, WM_ERR_INPUT, "%s: not a JSON object", label);
    }
    wm_status s = WM_OK;
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(doc, "weight_map"), *e;
    const char **v = NULL;
    size_t k = 0;
    if (!cJSON_IsObject(wm)) s = wm_err(err, WM_ERR_INPUT, "%s: no \"weight_map\" object", label);
    else if (!wm->child) s = wm_err(err, WM_ERR_INPUT, "%s: \"weight_map\" is empty", label);
    const cJSON *map = s ? NULL : wm;
    cJSON_ArrayForEach(e, map) {
        if (!cJSON_IsString(e) || !e->valuestring) {
            s = wm_err(err, WM_ERR_INPUT, "%s: weight_map: tensor '%.200s': the shard is not a string", label,
                       e->string ? e->string : "?");
            break;
        }
        if ((s = check_shard_name(e->valuestring, e->string ? e->string : "?", label, err))) break;
        const char **slot = wm_vec_push(a, &v, &k, sizeof *v);
        if (!slot || !(*slot = wm_arena_strdup(a, e->valuestring))) {
            s = wm_err(err, WM_ERR_NOMEM, "out of memory");
            break;
        }
    }
    cJSON_Delete(doc);
    if (s) return s;
    qsort(v, k, sizeof *v, cmp_cstr);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (!u || strcmp(v[u - 1], v[i])) v[u++] = v[i];
    if (u > WM_HF_MAX_SHARDS) return wm_err(err, WM_ERR_INPUT, "%s: %zu shard files, more than %d", label, u, WM_HF_MAX_SHARDS);
    *names = v;
    *count = u;
    return WM_OK;
}

wm_status wm_hf_tree_files(wm_arena *a, const void *text, size_t n, const char *label, const char ***names,
                           size_t *count, wm_error *err) {
    *names = NULL;
    *count = 0;
    if (!label) label = "<tree>";
    if (n > WM_HF_MAX_TREE_BYTES)
        return wm_err(err, WM_ERR_INPUT, "%s: %zu bytes, more than the %u accepted", label, n, WM_HF_MAX_TREE_BYTES);
    cJSON *doc = cJSON_ParseWithLength(text, n);
    if (!doc || !cJSON_IsArray(doc)) {
        cJSON_Delete(doc);
        return wm_err(err, WM_ERR_INPUT, "%s: not a JSON array of entries", label);
    }
    wm_status s = WM_OK;
    const char **v = NULL;
    size_t k = 0, i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, doc) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(e, "type"), *path = cJSON_GetObjectItemCaseSensitive(e, "path");
        if (!cJSON_IsString(type) || !cJSON_IsString(path) || !path->valuestring) {
            s = wm_err(err, WM_ERR_INPUT, "%s: entry %zu: no string \"type\" and \"path\"", label, i);
            break;
        }
        i++;
        if (strcmp(type->valuestring, "file")) continue; /* folders are listed too (recursive) */
        const char *p = path->valuestring;
        size_t len = strlen(p);
        wm_error e2 = {0};
        int bad = len == 0 || len > WM_HF_MAX_FILENAME || wm_path_check_relative(p, &e2) != WM_OK;
        for (size_t c = 0; !bad && c < len; c++) bad = (unsigned char)p[c] < 0x20 || p[c] == 0x7f || p[c] == '\\';
        if (bad) {
            s = wm_err(err, WM_ERR_INPUT, "%s: entry %zu: path '%.200s' is not a plain relative file name (1-%d bytes, "
                       "no '..', no control characters)", label, i, p, WM_HF_MAX_FILENAME);
            break;
        }
        if (k == WM_HF_MAX_TREE_FILES) {
            s = wm_err(err, WM_ERR_INPUT, "%s: more than %d files", label, WM_HF_MAX_TREE_FILES);
            break;
        }
        const char **slot = wm_vec_push(a, &v, &k, sizeof *v);
        if (!slot || !(*slot = wm_arena_strdup(a, p))) {
            s = wm_err(err, WM_ERR_NOMEM, "out of memory");
            break;
        }
    }
    cJSON_Delete(doc);
    if (s) return s;
    if (k) qsort(v, k, sizeof *v, cmp_cstr);
    *names = v;
    *count = k;
    return WM_OK;
}
