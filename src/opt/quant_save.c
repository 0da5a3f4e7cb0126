/*
 * quant_save.c - writing a (quantized) model with its weights streamed:
 * every tensor of at least 1 KiB goes to "<file>.data" at 4 KiB-aligned
 * offsets, deferred tensors are computed one job at a time and freed after
 * their write, and bytes read from the input's mappings are released
 * (madvise) as they are copied, so the resident set stays near the largest
 * single job. Data file first, model last, both under temporary names.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/file.h"
#include "core/error.h"
#include "onnx/dtype.h"
#include "opt/quant_impl.h"

#define MIN_EXTERNAL 1024
#define ALIGN 4096

typedef struct tref {
    wm_onnx_tensor *t;
    int job;   /* index of the producing job, or -1 */
    int slot;  /* output slot of that job */
} tref;

typedef struct saver {
    wm_onnx_model *m;
    wm_quant_plan *plan;
    tref *v;
    size_t n, cap;
    int fd;
    uint64_t pos;
    const char *tmp, *loc;
    wm_error *err;
} saver;

static int job_of(const wm_quant_plan *p, const wm_onnx_tensor *t, int *slot) {
    for (size_t i = 0; p && i < p->n; i++)
        for (size_t k = 0; k < p->jobs[i].n_dst; k++)
            if (p->jobs[i].dst[k] == t) {
                *slot = (int)k;
                return (int)i;
            }
    return -1;
}

static wm_status collect(void *ctx, wm_onnx_tensor *t, const char *where) {
    (void)where;
    saver *s = ctx;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        tref *p = realloc(s->v, cap * sizeof *p);
        if (!p) return wm_err(s->err, WM_ERR_NOMEM, "out of memory");
        s->v = p;
        s->cap = cap;
    }
    tref *r = &s->v[s->n++];
    r->t = t;
    r->slot = 0;
    r->job = job_of(s->plan, t, &r->slot);
    return WM_OK;
}

static wm_status write_all(saver *s, const uint8_t *p, size_t n, int release) {
    const size_t chunk = 64u << 20;
    while (n) {
        size_t k = n < chunk ? n : chunk, done = 0;
        while (done < k) {
            ssize_t w = write(s->fd, p + done, k - done);
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) return wm_err(s->err, WM_ERR_IO, "%s: write failed: %s", s->tmp, strerror(errno));
            done += (size_t)w;
        }
        if (release) wm_opt_release(s->m, p, k);
        p += k;
        n -= k;
        s->pos += k;
    }
    return WM_OK;
}

static wm_status pad_to(saver *s, uint64_t off) {
    static const uint8_t zeros[ALIGN];
    while (s->pos < off) {
        size_t k = off - s->pos > sizeof zeros ? sizeof zeros : (size_t)(off - s->pos);
        wm_status st = write_all(s, zeros, k, 0);
        if (st) return st;
    }
    return WM_OK;
}

/* Turns t into an external reference (location, offset, length) with no inline data. */
static wm_status make_external(saver *s, wm_onnx_tensor *t, uint64_t off, uint64_t len) {
    wm_arena *a = &s->m->arena;
    t->raw_data = (wm_bytes){NULL, 0};
    t->n_float_data = t->n_int32_data = t->n_int64_data = t->n_double_data = t->n_uint64_data = 0;
    t->data_location = WM_ONNX_DATA_EXTERNAL;
    wm_pb_set_has(&wm_onnx_tensor_desc, t, 14);
    t->ext = (wm_bytes){NULL, 0};
    char num[2][32];
    snprintf(num[0], sizeof num[0], "%llu", (unsigned long long)off);
    snprintf(num[1], sizeof num[1], "%llu", (unsigned long long)len);
    const char *kv[3][2] = {{"location", s->loc}, {"offset", num[0]}, {"length", num[1]}};
    t->external_data = wm_arena_alloc(a, 3 * sizeof *t->external_data);
    if (!t->external_data) return wm_err(s->err, WM_ERR_NOMEM, "out of memory");
    for (int i = 0; i < 3; i++) {
        wm_onnx_sse *e = wm_pb_new(a, &wm_onnx_sse_desc);
        if (!e || !(e->key = wm_arena_strdup(a, kv[i][0])) || !(e->value = wm_arena_strdup(a, kv[i][1])))
            return wm_err(s->err, WM_ERR_NOMEM, "out of memory");
        t->external_data[i] = e;
    }
    t->n_external_data = 3;
    return WM_OK;
}

static wm_status put(saver *s, wm_onnx_tensor *t, const uint8_t *p, uint64_t n, int release) {
    uint64_t off = (s->pos + ALIGN - 1) / ALIGN * ALIGN;
    wm_status st = pad_to(s, off);
    if (!st) st = write_all(s, p, (size_t)n, release);
    if (!st) st = make_external(s, t, off, n);
    return st;
}

/* Runs job i and writes its outputs (all external), freeing the buffers. */
static wm_status write_job(saver *s, size_t i) {
    const wm_qjob *j = &s->plan->jobs[i];
    uint8_t *out[3] = {NULL, NULL, NULL};
    uint64_t sz[3];
    wm_qjob_sizes(j, sz);
    wm_status st = wm_qjob_run(j, out, 1, s->err);
    for (size_t k = 0; !st && k < j->n_dst; k++) st = put(s, j->dst[k], out[k], sz[k], 0);
    for (size_t k = 0; k < 3; k++) free(out[k]);
    return st;
}

static int fd_sink(void *ctx, const void *p, size_t n) {
    int fd = *(int *)ctx;
    const uint8_t *b = p;
    while (n) {
        ssize_t w = write(fd, b, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

wm_status wm_quant_save(wm_graph *g, wm_quant_plan *plan, const char *path, wm_error *err) {
    saver s;
    memset(&s, 0, sizeof s);
    s.m = wm_graph_model(g);
    s.plan = plan;
    s.err = err;
    s.fd = -1;
    char dir[PATH_MAX], data_name[PATH_MAX], data_path[PATH_MAX], tmp_data[PATH_MAX + 32], tmp_model[PATH_MAX + 32];
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (!*base) return wm_err(err, WM_ERR_USAGE, "%s: output path names a folder, not a file", path);
    wm_path_dirname(path, dir, sizeof dir);
    snprintf(data_name, sizeof data_name, "%s.data", base);
    tmp_data[0] = tmp_model[0] = 0;
    int model_fd = -1;
    wm_status st = wm_path_resolve_inside(dir, data_name, 0, data_path, sizeof data_path, err);
    if (!st) st = wm_onnx_visit_tensors(s.m->proto, collect, &s);
    if (st) goto done;
    snprintf(tmp_data, sizeof tmp_data, "%s.tmp.%ld", data_path, (long)getpid());
    s.fd = open(tmp_data, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (s.fd < 0) {
        st = wm_err(err, WM_ERR_IO, "%s: cannot create: %s", tmp_data, strerror(errno));
        tmp_data[0] = 0;
        goto done;
    }
    s.tmp = tmp_data;
    s.loc = data_name;
    for (size_t i = 0; plan && i < plan->n && !st; i++) st = write_job(&s, i);
    for (size_t i = 0; i < s.n && !st; i++) {
        tref *r = &s.v[i];
        if (r->job >= 0 || r->t->segment || r->t->data_type == WM_DT_STRING) continue;
        wm_bytes b = wm_onnx_tensor_bytes(r->t);
        if (r->t->data_location == WM_ONNX_DATA_EXTERNAL && !b.p) {
            st = wm_err(err, WM_ERR_INPUT, "tensor '%s': its data was never resolved", r->t->name ? r->t->name : "");
            break;
        }
        if (!b.p || b.n < MIN_EXTERNAL) {
            if (b.p && r->t->data_location == WM_ONNX_DATA_EXTERNAL) { /* small external: inline it */
                r->t->data_location = 0;
                wm_pb_clear_has(&wm_onnx_tensor_desc, r->t, 14);
                r->t->n_external_data = 0;
                r->t->raw_data = b;
            }
            continue;
        }
        st = put(&s, r->t, b.p, b.n, 1);
    }
    if (!st && wm_durable_sync(s.fd) != 0) st = wm_err(err, WM_ERR_IO, "%s: fsync failed: %s", tmp_data, strerror(errno));
    if (st) goto done;
    uint64_t size = wm_pb_size(&wm_onnx_model_desc, s.m->proto);
    if (size > WM_PB_MAX_MESSAGE) {
        st = wm_err(err, WM_ERR_INPUT, "%s: the model would be %llu bytes, over the protobuf limit", path,
                    (unsigned long long)size);
        goto done;
    }
    snprintf(tmp_model, sizeof tmp_model, "%s.tmp.%ld", path, (long)getpid());
    model_fd = open(tmp_model, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (model_fd < 0) {
        st = wm_err(err, WM_ERR_IO, "%s: cannot create: %s", tmp_model, strerror(errno));
        tmp_model[0] = 0;
        goto done;
    }
    wm_pb_sink sink = {fd_sink, &model_fd};
    if (wm_pb_encode(&sink, &wm_onnx_model_desc, s.m->proto) || wm_durable_sync(model_fd) != 0) {
        st = wm_err(err, WM_ERR_IO, "%s: write failed: %s", tmp_model, strerror(errno));
        goto done;
    }
    if (rename(tmp_data, data_path) != 0) {
        st = wm_err(err, WM_ERR_IO, "%s: rename failed: %s", data_path, strerror(errno));
        goto done;
    }
    tmp_data[0] = 0;
    if (rename(tmp_model, path) != 0) st = wm_err(err, WM_ERR_IO, "%s: rename failed: %s", path, strerror(errno));
    else tmp_model[0] = 0;
done:
    if (s.fd >= 0) close(s.fd);
    if (model_fd >= 0) close(model_fd);
    if (tmp_data[0]) unlink(tmp_data);
    if (tmp_model[0]) unlink(tmp_model);
    free(s.v);
    return st;
}
