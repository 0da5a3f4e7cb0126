/*
 * onnx_save.c - writing a model, with external data decided by size.
 *
 * Tensors are switched temporarily into the form they take in the output
 * (inline raw bytes, or an external reference into the new data file),
 * the model is measured and written, and every tensor is restored, so the
 * in-memory model is unchanged. The data file is written first, the model
 * last (the commit point); both go to temporary names and are renamed only
 * when complete, so a failure leaves no partial output behind.
 * keep_data (a model loaded from the same folder, saved over itself): the
 * tensors already in the data file keep their places and only the others
 * are appended to it; the old model.onnx references none of the appended
 * bytes, so it stays valid until the new one is renamed over it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/file.h"
#include "core/error.h"
#include "onnx/dtype.h"
#include "onnx/onnx_model.h"
#include "onnx/onnx_out.h"

void wm_onnx_save_opts_default(wm_onnx_save_opts *o) {
    o->external = WM_EXTDATA_AUTO;
    o->threshold_bytes = 100ull << 20;
    o->min_tensor_bytes = 1024;
    o->align = 4096;
    o->data_name = NULL;
    o->keep_data = 0;
}

/* What a tensor looked like before the save touched it. */
typedef struct saved {
    wm_onnx_tensor *t;
    wm_onnx_tensor orig;
    wm_bytes data; /* the bytes to write when it goes external */
    uint64_t offset;
    int kept;      /* keep_data: already in the data file at offset, left as it was */
} saved;

typedef struct save_ctx {
    wm_arena *a;
    saved *v;
    size_t n;
    wm_error *err;
} save_ctx;

static wm_status collect(void *ctx, wm_onnx_tensor *t, const char *where) {
    (void)where;
    save_ctx *c = ctx;
    wm_bytes b = wm_onnx_tensor_bytes(t);
    if (t->data_location == WM_ONNX_DATA_EXTERNAL && !b.p)
        return wm_err(c->err, WM_ERR_INPUT, "tensor '%s': external data was never resolved", t->name ? t->name : "");
    if (!b.p || t->segment || t->data_type == WM_DT_STRING) return WM_OK;
    saved *s = wm_vec_push(c->a, &c->v, &c->n, sizeof *s);
    if (!s) return wm_err(c->err, WM_ERR_NOMEM, "out of memory");
    s->t = t;
    s->orig = *t;
    s->data = b;
    return WM_OK;
}

static void clear_data_fields(wm_onnx_tensor *t) {
    t->raw_data = (wm_bytes){NULL, 0};
    t->n_float_data = t->n_int32_data = t->n_int64_data = t->n_double_data = t->n_uint64_data = 0;
    t->n_external_data = 0;
    t->data_location = 0;
    wm_pb_clear_has(&wm_onnx_tensor_desc, t, 14); /* data_location */
}

static void make_inline(saved *s) {
    wm_onnx_tensor *t = s->t;
    *t = s->orig;
    if (t->data_location != WM_ONNX_DATA_EXTERNAL) return; /* already inline: leave as written */
    clear_data_fields(t);
    t->raw_data = s->data;
}

static wm_status make_external(wm_arena *a, saved *s, const char *location, wm_error *err) {
    wm_onnx_tensor *t = s->t;
    *t = s->orig;
    clear_data_fields(t);
    t->data_location = WM_ONNX_DATA_EXTERNAL;
    char num[2][32];
    snprintf(num[0], sizeof num[0], "%llu", (unsigned long long)s->offset);
    snprintf(num[1], sizeof num[1], "%zu", s->data.n);
    const char *kv[3][2] = {{"location", location}, {"offset", num[0]}, {"length", num[1]}};
    t->external_data = wm_arena_alloc(a, 3 * sizeof *t->external_data);
    if (!t->external_data) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (int i = 0; i < 3; i++) {
        wm_onnx_sse *e = wm_pb_new(a, &wm_onnx_sse_desc);
        if (!e) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        e->key = wm_arena_strdup(a, kv[i][0]);
        e->value = wm_arena_strdup(a, kv[i][1]);
        if (!e->key || !e->value) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        t->external_data[i] = e;
    }
    t->n_external_data = 3;
    return WM_OK;
}

static int fd_write(void *ctx, const void *p, size_t n) { return wm_write_full(*(int *)ctx, p, n); }

/* Writes the external tensors that are not kept, in offset order, from file position pos (zeros between). */
/* keep_data: the tensor's place in data file `name` (its original external reference), or 0 */
static int kept_place(const saved *s, const char *name, uint64_t *offset) {
    const wm_onnx_tensor *t = &s->orig;
    if (t->data_location != WM_ONNX_DATA_EXTERNAL) return 0;
    const char *loc = NULL, *off = "0";
    for (size_t i = 0; i < t->n_external_data; i++) {
        const wm_onnx_sse *kv = t->external_data[i];
        if (kv->key && kv->value && !strcmp(kv->key, "location")) loc = kv->value;
        if (kv->key && kv->value && !strcmp(kv->key, "offset")) off = kv->value;
    }
    if (!loc || strcmp(loc, name)) return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(off, &end, 10);
    if (errno || *end || end == off) return 0;
    *offset = v;
    return 1;
}

/* keep_data applies: m's folder is path's and data_path exists (its size in *size) */
static int can_keep(const wm_onnx_model *m, const char *dir, const char *data_path, uint64_t *size) {
    char a[PATH_MAX], b[PATH_MAX];
    struct stat st;
    if (!m->dir || !realpath(m->dir, a) || !realpath(dir, b) || strcmp(a, b)) return 0;
    if (stat(data_path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    *size = (uint64_t)st.st_size;
    return 1;
}

static wm_status write_data_file(saved *v, size_t n, int fd, uint64_t pos, const char *tmp, wm_error *err) {
    static const unsigned char zeros[4096];
    for (size_t i = 0; i < n; i++) {
        if (!v[i].t->n_external_data || v[i].kept) continue; /* stayed inline, or already there */
        while (pos < v[i].offset) {
            size_t k = v[i].offset - pos > sizeof zeros ? sizeof zeros : (size_t)(v[i].offset - pos);
            if (fd_write(&fd, zeros, k)) return wm_err(err, WM_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
            pos += k;
        }
        if (fd_write(&fd, v[i].data.p, v[i].data.n))
            return wm_err(err, WM_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
        pos += v[i].data.n;
    }
    if (wm_durable_sync(fd) != 0) return wm_err(err, WM_ERR_IO, "%s: fsync failed: %s", tmp, strerror(errno));
    return WM_OK;
}

wm_status wm_onnx_save(wm_onnx_model *m, const char *path, const wm_onnx_save_opts *opts, wm_error *err) {
    wm_onnx_save_opts o;
    if (opts) o = *opts;
    else wm_onnx_save_opts_default(&o);
    if (!o.align) o.align = 1;

    char dir[PATH_MAX];
    wm_path_dirname(path, dir, sizeof dir);
    /* keep_data appends to the data file the model was loaded with; otherwise a given name, or a free one */
    const char *want = o.data_name ? o.data_name : o.keep_data && m->n_ext == 1 ? m->ext[0].location : NULL;
    wm_onnx_pair p;
    wm_arena scratch;
    wm_arena_init(&scratch);
    save_ctx c = {&scratch, NULL, 0, err};
    wm_onnx_sse **props = m->proto->metadata_props;
    size_t n_props = m->proto->n_metadata_props;
    int keep_fd = -1, external = 0, keep = 0;
    wm_status s = wm_onnx_pair_begin(&p, path, want, m, err);
    if (!s) s = wm_onnx_visit_tensors(m->proto, collect, &c);
    if (s) goto done;
    const char *data_name = p.data_name, *data_path = p.data_path;

    for (size_t i = 0; i < c.n; i++) make_inline(&c.v[i]);
    uint64_t inline_size = wm_pb_size(&wm_onnx_model_desc, m->proto);
    external = o.external == WM_EXTDATA_ALWAYS ||
               (o.external == WM_EXTDATA_AUTO &&
                (inline_size >= o.threshold_bytes || inline_size > WM_PB_MAX_MESSAGE - (64u << 20)));
    uint64_t pos = 0;
    if (o.keep_data && o.external != WM_EXTDATA_NEVER) {
        uint64_t old = 0, live = 0;
        if (can_keep(m, dir, data_path, &old)) {
            for (size_t i = 0; i < c.n; i++)
                if ((c.v[i].kept = kept_place(&c.v[i], data_name, &c.v[i].offset) &&
                                   c.v[i].offset <= old && c.v[i].data.n <= old - c.v[i].offset))
                    live += c.v[i].data.n;
            keep = live > 0 && old - live <= old / 8; /* else the dead bytes are worth a rewrite */
        }
        if (keep) {
            external = 1;
            pos = old;
        } else {
            for (size_t i = 0; i < c.n; i++) c.v[i].kept = 0;
        }
    }
    if (external) {
        uint64_t first = pos;
        int moved = keep;
        for (size_t i = 0; i < c.n; i++) {
            if (c.v[i].kept) {
                *c.v[i].t = c.v[i].orig; /* its reference as loaded */
                continue;
            }
            if (c.v[i].data.n < o.min_tensor_bytes) continue;
            moved = 1;
            uint64_t al = (pos + o.align - 1) / o.align * o.align;
            c.v[i].offset = al;
            pos = al + c.v[i].data.n;
            if ((s = make_external(&scratch, &c.v[i], data_name, err))) goto done;
        }
        external = moved; /* no tensor large enough: no data file */
        pos = first;
    }
    int data_fd = -1;
    if (keep) { /* appended in place: the old model references nothing past the old end */
        keep_fd = data_fd = open(data_path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (data_fd < 0 || lseek(data_fd, (off_t)pos, SEEK_SET) < 0) {
            s = wm_err(err, WM_ERR_IO, "%s: cannot append: %s", data_path, strerror(errno));
            goto done;
        }
        if ((s = write_data_file(c.v, c.n, data_fd, pos, data_path, err))) goto done;
    } else if (external) {
        if ((s = wm_onnx_pair_open_data(&p, err))) goto done;
        data_fd = p.data_fd;
        if ((s = write_data_file(c.v, c.n, data_fd, 0, data_path, err))) goto done;
    }
    /* the model records which data file it was written with (or none) */
    char hex[65] = {0};
    off_t end = external ? lseek(data_fd, 0, SEEK_END) : 0;
    if (end < 0) s = wm_err(err, WM_ERR_IO, "%s: %s", data_path, strerror(errno));
    if (!s && external) s = wm_onnx_data_fingerprint(data_fd, (uint64_t)end, hex, err);
    if (!s) s = wm_onnx_record_set(m->proto, &scratch, external ? data_name : NULL, (uint64_t)end, hex, &props,
                                   &n_props, err);
    if (s) goto done;
    uint64_t size = wm_pb_size(&wm_onnx_model_desc, m->proto);
    if (size > WM_PB_MAX_MESSAGE) {
        s = wm_err(err, WM_ERR_INPUT, "%s: the model would be %llu bytes, over the protobuf limit of 2^31-1%s", path,
                   (unsigned long long)size, external ? " even with external data" : "; save it with external data");
        goto done;
    }
    if ((s = wm_onnx_pair_open_model(&p, err))) goto done;
    wm_pb_sink sink = {fd_write, &p.model_fd};
    if (wm_pb_encode(&sink, &wm_onnx_model_desc, m->proto) || wm_durable_sync(p.model_fd) != 0) {
        s = wm_err(err, WM_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        goto done;
    }
    s = wm_onnx_pair_commit(&p, err);
done:
    for (size_t i = 0; i < c.n; i++) *c.v[i].t = c.v[i].orig;
    wm_onnx_record_restore(m->proto, props, n_props);
    if (keep_fd >= 0) close(keep_fd);
    wm_onnx_pair_end(&p);
    wm_arena_free(&scratch);
    return s;
}
