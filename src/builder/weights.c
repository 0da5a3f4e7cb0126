/* weights.c - streamed float32 initializers (see weights.h). */
#define _GNU_SOURCE
#include "builder/weights.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"
#include "core/output.h"
#include "core/file.h"
#include "core/half.h"
#include "kernels/kernels.h"
#include "onnx/dtype.h"


/* Converts n elements of dtype dt at src (any alignment) into dst; halves at even addresses by the kernel
 * table's vector conversion. */
static void convert(const uint8_t *src, wm_st_dtype dt, size_t n, float *dst) {
    if ((dt == WM_ST_F16 || dt == WM_ST_BF16) && !((uintptr_t)src & 1)) {
        const wm_kernels *k = wm_kernels_get();
        (dt == WM_ST_F16 ? k->f16_to_f32 : k->bf16_to_f32)((int64_t)n, dst, (const uint16_t *)(const void *)src);
        return;
    }
    switch (dt) {
    case WM_ST_F32: memcpy(dst, src, n * 4); break;
    case WM_ST_F16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = wm_f16_to_f32(h);
        }
        break;
    case WM_ST_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = wm_bf16_to_f32(h);
        }
        break;
    case WM_ST_F64:
        for (size_t i = 0; i < n; i++) {
            double d;
            memcpy(&d, src + 8 * i, 8);
            dst[i] = (float)d;
        }
        break;
    default: memset(dst, 0, n * 4); break; /* refused earlier (arch check_shape) */
    }
}

static int esize(wm_st_dtype dt) { return wm_st_dtype_bits(dt) / 8; }

/* Elements [first, first + n) of t (row-major) as float32: through its source when it has one (a GGUF tensor,
   dequantized), else converted from its dtype. */
static void read_at(const wm_st_tensor *t, uint64_t first, size_t n, float *dst) {
    if (t->src) t->src->read(t->src->ctx, first, n, dst);
    else convert(t->data + first * (uint64_t)esize(t->dtype), t->dtype, n, dst);
}

void wm_st_read_f32(const wm_st_tensor *t, float *dst) { read_at(t, 0, (size_t)t->numel, dst); }

static void release(const uint8_t *p, uint64_t n);

void wm_wsink_release(const wm_wsink *s, const wm_st_tensor *t) {
    if (s && s->release_source && t) release(t->data, t->nbytes);
}

/* Drops the pages of a source range from this process (they stay in the page cache). */
static void release(const uint8_t *p, uint64_t n) {
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0 || !p || !n) return;
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(pg - 1), e = ((uintptr_t)p + n + (uintptr_t)pg - 1) & ~(uintptr_t)(pg - 1);
    madvise((void *)a, e - a, MADV_DONTNEED);
}

/* ------------------------------------------------------------ generation */

static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t name_hash(const char *s, uint64_t seed) {
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

static void generate(float *dst, size_t n, uint64_t *state, float scale, float fill) {
    if (scale == 0) {
        for (size_t i = 0; i < n; i++) dst[i] = fill;
        return;
    }
    for (size_t i = 0; i < n; i += 2) {
        uint64_t r = splitmix(state);
        dst[i] = ((float)(uint32_t)r * (1.0f / 4294967296.0f) * 2 - 1) * scale;
        if (i + 1 < n) dst[i + 1] = ((float)(uint32_t)(r >> 32) * (1.0f / 4294967296.0f) * 2 - 1) * scale;
    }
}

/* ------------------------------------------------------------ writer thread */

/*
 * External mode is a pipeline: the producer converts into slot k while the
 * hasher and the writer thread each work through the slots before it, in
 * order (SHA-256 and the kernel's copy into the page cache are the two
 * largest costs of a build; apart they run on two cores). A slot is free
 * (the producer may fill it) when no stage bit is left in queued[k].
 */
static void *stage_main(void *arg) {
    wm_wsink_stage *a = arg;
    wm_wsink *s = a->s;
    const int st = a->stage, bit = 1 << a->stage;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!(s->queued[s->next[st]] & bit) && !s->stop) pthread_cond_wait(&s->cv, &s->mu);
        if (!(s->queued[s->next[st]] & bit)) break; /* stop, and nothing left */
        int k = s->next[st], skip = s->werr != 0;
        pthread_mutex_unlock(&s->mu);
        int e = 0;
        if (!skip && st == 0) {
            wm_sha256_update(&s->sha, s->slot[k], s->slot_n[k]);
        } else if (!skip) {
            if (wm_write_full(s->fd, s->slot[k], s->slot_n[k])) e = errno ? errno : EIO;
            /* start writeback now, so the final fsync does not wait for the whole file */
            else if (wm_durable()) sync_file_range(s->fd, (off64_t)s->w_off, (off64_t)s->slot_n[k], SYNC_FILE_RANGE_WRITE);
            s->w_off += s->slot_n[k];
        }
        pthread_mutex_lock(&s->mu);
        if (e && !s->werr) s->werr = e;
        s->queued[k] &= ~bit;
        s->next[st] = (k + 1) % WM_WSINK_SLOTS;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Queues the producer's slot (if it holds bytes) and waits until the next one is free. */
static wm_status submit(wm_wsink *s, wm_error *err) {
    if (!s->cur_n) return WM_OK;
    pthread_mutex_lock(&s->mu);
    s->slot_n[s->cur] = s->cur_n;
    s->queued[s->cur] = 3; /* hash and write */
    s->cur = (s->cur + 1) % WM_WSINK_SLOTS;
    s->cur_n = 0;
    pthread_cond_broadcast(&s->cv);
    while (s->queued[s->cur] && !s->werr) pthread_cond_wait(&s->cv, &s->mu);
    int e = s->werr;
    pthread_mutex_unlock(&s->mu);
    if (e) return wm_err(err, WM_ERR_IO, "%s: write failed: %s", s->path, strerror(e));
    return WM_OK;
}

/* Stops the stage threads after they drained the queue; returns the write error (0 when none). */
static int writer_stop(wm_wsink *s) {
    if (!s->thread_on) return s->werr;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->thread_on; i++) pthread_join(s->thread[i], NULL);
    s->thread_on = 0;
    return s->werr;
}

/* ------------------------------------------------------------ output side */

/* Where a tensor's bytes go: the model arena (inline) or the data-file stream. */
typedef struct out {
    wm_wsink *s;
    uint8_t *mem; /* inline destination, or NULL: the stream */
    uint64_t off;
    wm_error *err;
} out;

/*
 * Space for at least `need` bytes (need <= slot size) at the end of the
 * output; *avail receives how many bytes may be written there. Finish with
 * commit. NULL with err set when a queued write failed.
 */
static uint8_t *reserve(out *o, size_t need, size_t *avail) {
    if (o->mem) {
        *avail = SIZE_MAX / 2;
        return o->mem + o->off;
    }
    wm_wsink *s = o->s;
    if (WM_WSINK_SLOT - s->cur_n < need && submit(s, o->err)) return NULL;
    *avail = WM_WSINK_SLOT - s->cur_n;
    return s->slot[s->cur] + s->cur_n;
}

static void commit(out *o, size_t n) {
    if (o->mem) o->off += n;
    else {
        o->s->cur_n += n;
        o->s->pos += n;
    }
}

static wm_status put_zeros(out *o, uint64_t n) {
    while (n) {
        size_t avail;
        uint8_t *d = reserve(o, 1, &avail);
        if (!d) return o->err->status;
        size_t k = n < avail ? (size_t)n : avail;
        memset(d, 0, k);
        commit(o, k);
        n -= k;
    }
    return WM_OK;
}

/* ------------------------------------------------------------ emission */

#define ELEMS(bytes) ((bytes) / sizeof(float))

static wm_status emit(wm_wsink *s, const char *name, uint64_t numel, const int64_t *dims, const wm_wsrc *src,
                      out *o) {
    size_t avail;
    float *d;
    if (!src->t && src->vals) {
        for (uint64_t i = 0; i < numel;) {
            if (!(d = (float *)reserve(o, sizeof(float), &avail))) return o->err->status;
            size_t k = numel - i < ELEMS(avail) ? (size_t)(numel - i) : ELEMS(avail);
            memcpy(d, src->vals + i, k * sizeof(float));
            commit(o, k * sizeof(float));
            i += k;
        }
        return WM_OK;
    }
    if (!src->t) {
        uint64_t state = name_hash(name, src->seed);
        for (uint64_t i = 0; i < numel;) {
            if (!(d = (float *)reserve(o, sizeof(float), &avail))) return o->err->status;
            size_t k = numel - i < ELEMS(avail) ? (size_t)(numel - i) : ELEMS(avail);
            generate(d, k, &state, src->scale, src->fill);
            commit(o, k * sizeof(float));
            i += k;
        }
        return WM_OK;
    }
    const wm_st_tensor *t = src->t;
    uint64_t es = (uint64_t)esize(t->dtype);
    if (!src->transpose) {
        for (uint64_t i = 0; i < numel;) {
            if (!(d = (float *)reserve(o, sizeof(float), &avail))) return o->err->status;
            size_t k = numel - i < ELEMS(avail) ? (size_t)(numel - i) : ELEMS(avail);
            if (k > (1u << 22)) k = 1u << 22; /* release the source as we go */
            read_at(t, i, k, d);
            if (src->add != 0)
                for (size_t e = 0; e < k; e++) d[e] += src->add; /* float32 sum, as transformers' 1.0 + w.float() */
            commit(o, k * sizeof(float));
            if (s->release_source && !t->src) release(t->data + i * es, (uint64_t)k * es);
            i += k;
        }
        if (s->release_source && t->src) release(t->data, t->nbytes);
        return WM_OK;
    }
    if (src->add != 0) return wm_err(o->err, WM_ERR_INTERNAL, "%s: an offset applies to untransposed tensors only", name);
    /* source [R, C] -> output [C, R]: blocks of whole output rows, gathered from tiles of TR source rows x
     * 256 source columns (converted into tmp, then written out as runs of TR consecutive floats per output row,
     * so neither side strides through more cache lines than the tile holds) */
    enum { TR = 32 };
    uint64_t R = (uint64_t)dims[1], C = (uint64_t)dims[0];
    static _Thread_local float tmp[TR][256];
    if (R * sizeof(float) <= WM_WSINK_SLOT) {
        for (uint64_t c0 = 0; c0 < C;) {
            if (!(d = (float *)reserve(o, (size_t)R * sizeof(float), &avail))) return o->err->status;
            uint64_t bc = ELEMS(avail) / R;
            if (bc > C - c0) bc = C - c0;
            if (bc > 256) bc = 256;
            for (uint64_t r0 = 0; r0 < R; r0 += TR) {
                uint64_t nr = R - r0 < TR ? R - r0 : TR;
                for (uint64_t r = 0; r < nr; r++) read_at(t, (r0 + r) * C + c0, (size_t)bc, tmp[r]);
                for (uint64_t j = 0; j < bc; j++) {
                    float *row = d + j * R + r0;
                    for (uint64_t r = 0; r < nr; r++) row[r] = tmp[r][j];
                }
            }
            commit(o, (size_t)(bc * R * sizeof(float)));
            c0 += bc;
        }
    } else { /* an output row longer than a slot: each row in pieces */
        for (uint64_t c = 0; c < C; c++)
            for (uint64_t r0 = 0; r0 < R;) {
                if (!(d = (float *)reserve(o, sizeof(float), &avail))) return o->err->status;
                uint64_t k = R - r0 < ELEMS(avail) ? R - r0 : ELEMS(avail);
                for (uint64_t r = 0; r < k; r++) read_at(t, (r0 + r) * C + c, 1, d + r);
                commit(o, (size_t)(k * sizeof(float)));
                r0 += k;
            }
    }
    if (s->release_source) release(t->data, t->nbytes);
    return WM_OK;
}

wm_status wm_wsink_init(wm_wsink *s, wm_onnx_model *m, const char *data_path, const char *location, wm_error *err) {
    memset(s, 0, sizeof *s);
    s->m = m;
    s->fd = -1;
    s->min_bytes = 1024;
    s->align = 4096;
    wm_sha256_init(&s->sha);
    if (!data_path) return WM_OK;
    snprintf(s->path, sizeof s->path, "%s", data_path);
    snprintf(s->location, sizeof s->location, "%s", location);
    for (int k = 0; k < WM_WSINK_SLOTS; k++)
        if (!(s->slot[k] = malloc(WM_WSINK_SLOT))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    s->fd = open(data_path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (s->fd < 0) return wm_err(err, WM_ERR_IO, "%s: cannot create: %s", data_path, strerror(errno));
    if (pthread_mutex_init(&s->mu, NULL) || pthread_cond_init(&s->cv, NULL))
        return wm_err(err, WM_ERR_NOMEM, "cannot set up the writer thread");
    s->sync_on = 1;
    for (int i = 0; i < 2; i++) {
        s->stage[i] = (wm_wsink_stage){s, i};
        if (pthread_create(&s->thread[i], NULL, stage_main, &s->stage[i]))
            return wm_err(err, WM_ERR_NOMEM, "cannot start the %s thread", i ? "writer" : "hasher");
        s->thread_on = i + 1;
    }
    return WM_OK;
}

static wm_status set_external(wm_wsink *s, wm_onnx_tensor *t, uint64_t off, uint64_t len, wm_error *err) {
    wm_arena *a = &s->m->arena;
    char num[2][32];
    snprintf(num[0], sizeof num[0], "%llu", (unsigned long long)off);
    snprintf(num[1], sizeof num[1], "%llu", (unsigned long long)len);
    const char *kv[3][2] = {{"location", s->location}, {"offset", num[0]}, {"length", num[1]}};
    t->external_data = wm_arena_alloc(a, 3 * sizeof *t->external_data);
    if (!t->external_data) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (int i = 0; i < 3; i++) {
        wm_onnx_sse *e = wm_pb_new(a, &wm_onnx_sse_desc);
        if (!e || !(e->key = wm_arena_strdup(a, kv[i][0])) || !(e->value = wm_arena_strdup(a, kv[i][1])))
            return wm_err(err, WM_ERR_NOMEM, "out of memory");
        t->external_data[i] = e;
    }
    t->n_external_data = 3;
    t->data_location = WM_ONNX_DATA_EXTERNAL;
    wm_pb_set_has(&wm_onnx_tensor_desc, t, 14);
    return WM_OK;
}

wm_status wm_wsink_add(wm_wsink *s, wm_graph *g, const char *name, const int64_t *dims, size_t nd, const wm_wsrc *src,
                       wm_error *err) {
    uint64_t numel = 1;
    for (size_t i = 0; i < nd; i++)
        if (dims[i] < 0 || !wm_mul_u64(numel, (uint64_t)dims[i], &numel))
            return wm_err(err, WM_ERR_INPUT, "initializer '%s': bad dims", name);
    uint64_t nbytes;
    if (!wm_mul_u64(numel, 4, &nbytes)) return wm_err(err, WM_ERR_INPUT, "initializer '%s': too large", name);
    if (src->t && src->t->numel != numel)
        return wm_err(err, WM_ERR_INTERNAL, "initializer '%s': %llu elements from '%s' of %llu", name,
                      (unsigned long long)numel, src->t->name, (unsigned long long)src->t->numel);
    if (src->t || src->moe_fc) { /* where this initializer came from (the quant stage may carry its source's blocks) */
        wm_wsrc_rec *v = realloc(s->recs, (s->n_recs + 1) * sizeof *v);
        char *nm = v ? strdup(name) : NULL;
        if (v) s->recs = v;
        if (!nm) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        v[s->n_recs++] = (wm_wsrc_rec){nm, src->t, src->transpose, src->moe_fc, src->moe_layer};
    }
    s->n_tensors++;
    s->param_bytes += nbytes;
    out o = {s, NULL, 0, err};
    if (s->fd < 0 || nbytes < s->min_bytes) {
        if (nbytes > SIZE_MAX / 2) return wm_err(err, WM_ERR_NOMEM, "initializer '%s': too large to hold", name);
        o.mem = wm_arena_alloc(&s->m->arena, nbytes ? (size_t)nbytes : 1);
        if (!o.mem) return wm_err(err, WM_ERR_NOMEM, "out of memory for initializer '%s'", name);
        wm_status st = emit(s, name, numel, dims, src, &o);
        if (st) return st;
        return wm_graph_add_initializer(g, name, WM_DT_FLOAT, dims, nd, (wm_bytes){o.mem, (size_t)nbytes}, NULL, err);
    }
    /* external: pad to the alignment, stream, reference */
    uint64_t al = (s->pos + s->align - 1) / s->align * s->align;
    wm_status st = put_zeros(&o, al - s->pos);
    if (st || (st = emit(s, name, numel, dims, src, &o))) return st;
    wm_onnx_tensor *t = wm_pb_new(&s->m->arena, &wm_onnx_tensor_desc);
    if (!t || !(t->name = wm_arena_strdup(&s->m->arena, name)) ||
        !(t->dims = wm_arena_alloc(&s->m->arena, (nd ? nd : 1) * sizeof *t->dims)))
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    memcpy(t->dims, dims, nd * sizeof *dims);
    t->n_dims = nd;
    t->data_type = WM_DT_FLOAT;
    wm_pb_set_has(&wm_onnx_tensor_desc, t, 2);
    if ((st = set_external(s, t, al, nbytes, err))) return st;
    s->n_external++;
    return wm_graph_add_initializer_tensor(g, t, err);
}

wm_status wm_wsink_finish(wm_wsink *s, char sha_hex[65], wm_error *err) {
    sha_hex[0] = 0;
    if (s->fd < 0) return WM_OK;
    wm_status st = submit(s, err);
    if (st) return st;
    int e = writer_stop(s);
    if (e) return wm_err(err, WM_ERR_IO, "%s: write failed: %s", s->path, strerror(e));
    if (wm_durable_sync(s->fd) != 0) return wm_err(err, WM_ERR_IO, "%s: fsync failed: %s", s->path, strerror(errno));
    wm_sha256 fin = s->sha; /* s->sha stays the running state (wm_sha256_file_tail can continue it) */
    wm_sha256_hex(&fin, sha_hex);
    return WM_OK;
}

void wm_wsrc_recs_free(wm_wsrc_rec *v, size_t n) {
    for (size_t i = 0; i < n; i++) free(v[i].name);
    free(v);
}

void wm_wsink_close(wm_wsink *s) {
    wm_wsrc_recs_free(s->recs, s->n_recs);
    s->recs = NULL;
    s->n_recs = 0;
    writer_stop(s); /* after an error: the writer drains what was queued, then ends */
    if (s->sync_on) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
        s->sync_on = 0;
    }
    if (s->fd >= 0) close(s->fd);
    s->fd = -1;
    for (int k = 0; k < WM_WSINK_SLOTS; k++) {
        free(s->slot[k]);
        s->slot[k] = NULL;
    }
}
