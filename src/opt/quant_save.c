/*
 * quant_save.c - writing a (quantized) model with its weights streamed:
 * every tensor of at least 1 KiB goes to "<file>.data" at 4 KiB-aligned
 * offsets, deferred tensors are computed one job at a time and freed after
 * their write, and bytes read from the input's mappings are released
 * (madvise) as they are copied, so the resident set stays near the largest
 * single job. Data file first, model last, both under temporary names, the pair replaced in one step
 * (onnx/onnx_out.h).
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
#include "onnx/onnx_out.h"
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
        size_t k = n < chunk ? n : chunk;
        if (wm_write_full(s->fd, p, k) != 0)
            return wm_err(s->err, WM_ERR_IO, "%s: write failed: %s", s->tmp, strerror(errno));
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

static int fd_sink(void *ctx, const void *p, size_t n) { return wm_write_full(*(int *)ctx, p, n); }

wm_status wm_quant_save(wm_graph *g, wm_quant_plan *plan, const char *path, const char *data_name, wm_error *err) {
    saver s;
    memset(&s, 0, sizeof s);
    s.m = wm_graph_model(g);
    s.plan = plan;
    s.err = err;
    s.fd = -1;
    wm_onnx_pair p;
    wm_onnx_sse **props;
    size_t n_props;
    wm_status st = wm_onnx_pair_begin(&p, path, data_name, s.m, err);
    if (!st) st = wm_onnx_visit_tensors(s.m->proto, collect, &s);
    if (!st) st = wm_onnx_pair_open_data(&p, err);
    if (st) goto done;
    s.fd = p.data_fd;
    s.tmp = p.data_path; /* messages name the file the user will see */
    s.loc = p.data_name;
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
    if (!st && wm_durable_sync(s.fd) != 0) st = wm_err(err, WM_ERR_IO, "%s: fsync failed: %s", p.data_path, strerror(errno));
    char hex[65];
    if (!st) st = wm_onnx_data_fingerprint(s.fd, s.pos, hex, err);
    /* the record stays in the model: its tensors now point into this data file for good */
    if (!st) st = wm_onnx_record_set(s.m->proto, &s.m->arena, p.data_name, s.pos, hex, &props, &n_props, err);
    if (st) goto done;
    uint64_t size = wm_pb_size(&wm_onnx_model_desc, s.m->proto);
    if (size > WM_PB_MAX_MESSAGE) {
        st = wm_err(err, WM_ERR_INPUT, "%s: the model would be %llu bytes, over the protobuf limit", path,
                    (unsigned long long)size);
        goto done;
    }
    if ((st = wm_onnx_pair_open_model(&p, err))) goto done;
    wm_pb_sink sink = {fd_sink, &p.model_fd};
    if (wm_pb_encode(&sink, &wm_onnx_model_desc, s.m->proto) || wm_durable_sync(p.model_fd) != 0) {
        st = wm_err(err, WM_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        goto done;
    }
    st = wm_onnx_pair_commit(&p, err);
done:
    wm_onnx_pair_end(&p);
    free(s.v);
    return st;
}
