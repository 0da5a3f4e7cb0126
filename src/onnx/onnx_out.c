/*
 * onnx_out.c - a model file and its external data file, replaced in one step (onnx_out.h).
 */
#define _GNU_SOURCE
#include "onnx/onnx_out.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/sha256.h"
#include "winml/onnx.h"

static const char *base_of(const char *path) {
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

/* loc is "<base>.data" or "<base>.<digits>.data": a name wm_onnx_pair gives the data file of model base. */
static int our_data_name(const char *base, const char *loc) {
    size_t nb = strlen(base), nl = strlen(loc);
    if (strncmp(loc, base, nb)) return 0;
    if (nl == nb + 5) return !strcmp(loc + nb, ".data");
    if (nl < nb + 7 || loc[nb] != '.' || strcmp(loc + nl - 5, ".data")) return 0;
    for (size_t i = nb + 1; i < nl - 5; i++)
        if (loc[i] < '0' || loc[i] > '9') return 0;
    return 1;
}

/* The name of candidate k: "<base>.data", "<base>.1.data", ... */
static void cand_name(const char *base, int k, char *name, size_t n) {
    if (k) snprintf(name, n, "%s.%d.data", base, k);
    else snprintf(name, n, "%s.data", base);
}

wm_status wm_onnx_pair_begin(wm_onnx_pair *p, const char *path, const char *data_name, const wm_onnx_model *in,
                             wm_error *err) {
    memset(p, 0, sizeof *p);
    p->path = path;
    p->data_fd = p->model_fd = p->data_slot = p->model_slot = -1;
    const char *base = base_of(path);
    if (!*base) return wm_err(err, WM_ERR_USAGE, "%s: output path names a folder, not a file", path);
    if (strlen(base) + 12 > sizeof p->data_name) return wm_err(err, WM_ERR_USAGE, "%s: file name too long", path);
    char dir[PATH_MAX], q[PATH_MAX * 2];
    wm_path_dirname(path, dir, sizeof dir);
    p->in_is_out = in && in->path && wm_same_file(in->path, path);
    /* what the model being replaced reads */
    char refs[8][NAME_MAX + 1];
    size_t n_refs = 0;
    wm_onnx_model *old = NULL;
    wm_error quiet = {0};
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && wm_onnx_load(path, &old, &quiet) == WM_OK) {
        for (size_t i = 0; i < old->n_ext && n_refs < 8; i++)
            snprintf(refs[n_refs++], sizeof refs[0], "%s", old->ext[i].location);
        wm_onnx_free(old);
    }
    if (data_name) snprintf(p->data_name, sizeof p->data_name, "%s", data_name);
    for (int k = 0; !data_name && k < 100 && !p->data_name[0]; k++) {
        /* the first of our names that neither the replaced model nor the input reads: a file there is the
           orphan of an interrupted write of this output, replaced; so two names alternate and none piles up */
        char cand[NAME_MAX + 1];
        cand_name(base, k, cand, sizeof cand);
        int used = 0;
        for (size_t i = 0; i < n_refs; i++) used |= !strcmp(refs[i], cand);
        snprintf(q, sizeof q, "%s/%s", dir, cand);
        for (size_t i = 0; in && i < in->n_ext; i++) used |= wm_same_file(q, in->ext[i].path);
        if (!used) snprintf(p->data_name, sizeof p->data_name, "%s", cand);
    }
    if (!p->data_name[0]) return wm_err(err, WM_ERR_USAGE, "%s: no free name for its data file", path);
    wm_status s = wm_path_resolve_inside(dir, p->data_name, 0, p->data_path, sizeof p->data_path, err);
    if (s) return s;
    /* the replaced model's data files by our names, retired after the commit unless the input still reads one
       (while the input is another file than the one replaced) */
    for (size_t i = 0; i < n_refs && p->n_prev < 4; i++) {
        if (!our_data_name(base, refs[i]) || !strcmp(refs[i], p->data_name)) continue;
        int read = 0;
        snprintf(q, sizeof q, "%s/%s", dir, refs[i]);
        for (size_t k = 0; in && !p->in_is_out && k < in->n_ext; k++) read |= wm_same_file(q, in->ext[k].path);
        if (!read) snprintf(p->prev[p->n_prev++], sizeof p->prev[0], "%s", refs[i]);
    }
    return WM_OK;
}

wm_status wm_onnx_pair_open_data(wm_onnx_pair *p, wm_error *err) {
    return wm_tmp_create(p->data_path, p->tmp_data, sizeof p->tmp_data, &p->data_fd, &p->data_slot, err);
}

wm_status wm_onnx_pair_open_model(wm_onnx_pair *p, wm_error *err) {
    return wm_tmp_create(p->path, p->tmp_model, sizeof p->tmp_model, &p->model_fd, &p->model_slot, err);
}

wm_status wm_onnx_pair_commit(wm_onnx_pair *p, wm_error *err) {
    if (p->data_fd >= 0 && close(p->data_fd) != 0) {
        p->data_fd = -1;
        return wm_err(err, WM_ERR_IO, "%s: write failed: %s", p->data_path, strerror(errno));
    }
    p->data_fd = -1;
    if (p->model_fd >= 0 && close(p->model_fd) != 0) {
        p->model_fd = -1;
        return wm_err(err, WM_ERR_IO, "%s: write failed: %s", p->path, strerror(errno));
    }
    p->model_fd = -1;
    if (p->tmp_data[0]) {
        if (rename(p->tmp_data, p->data_path) != 0)
            return wm_err(err, WM_ERR_IO, "%s: cannot rename into place: %s", p->data_path, strerror(errno));
        wm_tmp_untrack(p->data_slot);
        p->data_slot = -1;
        p->tmp_data[0] = 0;
    }
    wm_status s = wm_tmp_commit(p->tmp_model, &p->model_slot, p->path, err); /* the commit point */
    if (s) return s;
    char dir[PATH_MAX];
    wm_path_dirname(p->path, dir, sizeof dir);
    for (size_t k = 0; k < p->n_prev; k++) {
        if (!p->prev[k][0]) continue;
        char q[PATH_MAX * 2];
        snprintf(q, sizeof q, "%s/%s", dir, p->prev[k]);
        unlink(q);
    }
    return WM_OK;
}

void wm_onnx_pair_end(wm_onnx_pair *p) {
    if (p->data_fd >= 0) close(p->data_fd);
    if (p->model_fd >= 0) close(p->model_fd);
    p->data_fd = p->model_fd = -1;
    wm_tmp_discard(p->tmp_data, &p->data_slot);
    wm_tmp_discard(p->tmp_model, &p->model_slot);
}

/* ------------------------------------------------------------ the record of the data file */

#define FP_SAMPLES 64
#define FP_CHUNK 4096

/* Hashes the size and 64 chunks of 4 KiB spread evenly over [0, bytes); read(at, n, buf) supplies them. */
typedef int (*fp_read)(const void *src, uint64_t at, size_t n, uint8_t *buf);

static int fp_compute(fp_read rd, const void *src, uint64_t bytes, char hex[65]) {
    wm_sha256 h;
    wm_sha256_init(&h);
    uint8_t le[8], buf[FP_CHUNK];
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)(bytes >> (8 * i));
    wm_sha256_update(&h, le, 8);
    size_t n = bytes < FP_CHUNK ? (size_t)bytes : FP_CHUNK;
    for (uint64_t i = 0; n && i < FP_SAMPLES; i++) {
        uint64_t at = (bytes - n) / (FP_SAMPLES - 1) * i;
        if (rd(src, at, n, buf)) return -1;
        wm_sha256_update(&h, buf, n);
    }
    wm_sha256_hex(&h, hex);
    return 0;
}

static int fd_read(const void *src, uint64_t at, size_t n, uint8_t *buf) {
    int fd = *(const int *)src;
    for (size_t got = 0; got < n;) {
        ssize_t r = pread(fd, buf + got, n - got, (off_t)(at + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

static int map_read(const void *src, uint64_t at, size_t n, uint8_t *buf) {
    const wm_map *m = src;
    if (at > m->size || n > m->size - at) return -1;
    memcpy(buf, m->data + at, n);
    return 0;
}

wm_status wm_onnx_data_fingerprint(int fd, uint64_t bytes, char hex[65], wm_error *err) {
    if (fp_compute(fd_read, &fd, bytes, hex)) return wm_err(err, WM_ERR_IO, "cannot read back the data file: %s",
                                                             strerror(errno ? errno : EIO));
    return WM_OK;
}

wm_status wm_onnx_record_set(wm_onnx_modelproto *mp, wm_arena *a, const char *loc, uint64_t bytes, const char *hex,
                             wm_onnx_sse ***saved_props, size_t *saved_n, wm_error *err) {
    *saved_props = mp->metadata_props;
    *saved_n = mp->n_metadata_props;
    wm_onnx_sse **v = wm_arena_alloc(a, (mp->n_metadata_props + 1) * sizeof *v);
    if (!v) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < mp->n_metadata_props; i++) {
        const wm_onnx_sse *e = mp->metadata_props[i];
        if (!(e->key && !strcmp(e->key, WM_DATA_RECORD_KEY))) v[n++] = mp->metadata_props[i];
    }
    if (loc) {
        char val[NAME_MAX + 160];
        snprintf(val, sizeof val, "bytes=%llu;sample_sha256=%s;location=%s", (unsigned long long)bytes, hex, loc);
        wm_onnx_sse *e = wm_pb_new(a, &wm_onnx_sse_desc);
        if (!e || !(e->key = wm_arena_strdup(a, WM_DATA_RECORD_KEY)) || !(e->value = wm_arena_strdup(a, val)))
            return wm_err(err, WM_ERR_NOMEM, "out of memory");
        v[n++] = e;
    }
    mp->metadata_props = v;
    mp->n_metadata_props = n;
    return WM_OK;
}

void wm_onnx_record_restore(wm_onnx_modelproto *mp, wm_onnx_sse **saved_props, size_t saved_n) {
    mp->metadata_props = saved_props;
    mp->n_metadata_props = saved_n;
}

wm_status wm_onnx_record_check(const wm_onnx_model *m, wm_error *err) {
    const char *val = NULL;
    for (size_t i = 0; i < m->proto->n_metadata_props; i++) {
        const wm_onnx_sse *e = m->proto->metadata_props[i];
        if (e->key && e->value && !strcmp(e->key, WM_DATA_RECORD_KEY)) val = e->value;
    }
    unsigned long long bytes;
    char hex[65], loc[NAME_MAX + 1];
    int used = 0;
    if (!val || sscanf(val, "bytes=%llu;sample_sha256=%64[0-9a-f];location=%n", &bytes, hex, &used) != 2 || !used ||
        strlen(hex) != 64 || strlen(val + used) > NAME_MAX)
        return WM_OK; /* none, or not one we can read: nothing to check */
    snprintf(loc, sizeof loc, "%s", val + used);
    for (size_t i = 0; i < m->n_ext; i++) {
        const wm_onnx_extfile *x = &m->ext[i];
        if (strcmp(x->location, loc)) continue;
        char got[65];
        if (x->map.size < bytes)
            return wm_err(err, WM_ERR_INPUT, "external data file '%s' has %llu bytes but the model was written with %llu: "
                          "the pair does not belong together (an interrupted copy or write?); write the model again",
                          loc, (unsigned long long)x->map.size, bytes);
        if (fp_compute(map_read, &x->map, bytes, got) || strcmp(got, hex))
            return wm_err(err, WM_ERR_INPUT, "external data file '%s' is not the one the model was written with (its "
                          "contents differ): the pair does not belong together; write the model again", loc);
    }
    return WM_OK;
}

/* ------------------------------------------------------------ before a command writes a model */

wm_status wm_onnx_out_begin(const char *path, const wm_onnx_model *in, int overwrite, uint64_t need,
                            wm_lockfile *lock, wm_error *err) {
    if (!path || !*path) return wm_err(err, WM_ERR_USAGE, "-o: the output path is empty");
    const char *base = base_of(path);
    if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
        return wm_err(err, WM_ERR_USAGE, "-o %s: names a folder; give the model's file name", path);
    char dir[PATH_MAX];
    wm_path_dirname(path, dir, sizeof dir);
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return wm_err(err, WM_ERR_USAGE, "-o %s: folder '%s' %s", path, dir,
                      errno == ENOENT ? "does not exist" : "is not a folder");
    wm_status s = wm_lock_output(path, lock, err);
    if (s) return s;
    wm_sweep_stale(dir);
    if (lstat(path, &st) == 0) {
        for (size_t i = 0; in && i < in->n_ext; i++)
            if (wm_same_file(path, in->ext[i].path))
                s = wm_err(err, WM_ERR_USAGE, "-o %s: is the external data file of the input model; it would be "
                           "overwritten: choose another name", path);
        if (!s && !S_ISREG(st.st_mode))
            s = wm_err(err, WM_ERR_USAGE, "-o %s: exists and is not a regular file (%s); refusing to replace it", path,
                       S_ISDIR(st.st_mode) ? "a folder" : S_ISLNK(st.st_mode) ? "a symbolic link" : "a special file");
        if (!s && !overwrite) {
            wm_onnx_model *old = NULL;
            wm_error quiet = {0};
            int ours = wm_onnx_load(path, &old, &quiet) == WM_OK && old->proto->producer_name &&
                       !strcmp(old->proto->producer_name, "winml");
            wm_onnx_free(old);
            if (!ours)
                s = wm_err(err, WM_ERR_USAGE, "-o %s: exists and was not written by winml; pass --overwrite to replace "
                           "it", path);
        }
    }
    if (!s) s = wm_space_check(dir, need, "the output", err);
    if (s) wm_unlock_output(lock);
    return s;
}

wm_status wm_onnx_set_producer(wm_onnx_model *m, wm_error *err) {
    char *name = wm_arena_strdup(&m->arena, "winml"), *ver = wm_arena_strdup(&m->arena, WM_VERSION_STRING);
    if (!name || !ver) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    m->proto->producer_name = name;
    m->proto->producer_version = ver;
    return WM_OK;
}
