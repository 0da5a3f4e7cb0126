/* weights.c - streamed float32 initializers (see weights.h). */
#define _GNU_SOURCE
#include "builder/weights.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"
#include "onnx/dtype.h"

#define BUF_ELEMS (8u << 20) /* 32 MiB of floats */
#define WBUF (8u << 20)

float wm_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0) {
        if (!man) u = sign;
        else { /* subnormal: normalize */
            int e = -1;
            do {
                man <<= 1;
                e++;
            } while (!(man & 0x400));
            u = sign | (uint32_t)(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
        }
    } else if (exp == 31) u = sign | 0x7f800000u | man << 13;
    else u = sign | (exp + 112) << 23 | man << 13;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float wm_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Converts n elements of dtype dt at src (any alignment) into dst. */
static void convert(const uint8_t *src, wm_st_dtype dt, size_t n, float *dst) {
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

/* Drops the pages of a source range from this process (they stay in the page cache). */
static void release(const uint8_t *p, uint64_t n) {
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0 || !p || !n) return;
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(pg - 1), e = ((uintptr_t)p + n + (uintptr_t)pg - 1) & ~(uintptr_t)(pg - 1);
    madvise((void *)a, e - a, MADV_DONTNEED);
}

/* ------------------------------------------------------------ output side */

typedef struct out {
    wm_wsink *s;
    uint8_t *mem; /* inline destination, or NULL: the data file */
    uint64_t off;
    wm_error *err;
} out;

static int fd_write_all(int fd, const uint8_t *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static wm_status flush(wm_wsink *s, wm_error *err) {
    if (s->wn && fd_write_all(s->fd, s->wbuf, s->wn))
        return wm_err(err, WM_ERR_IO, "%s: write failed: %s", s->path, strerror(errno));
    s->wn = 0;
    return WM_OK;
}

static wm_status put(out *o, const void *p, size_t n) {
    if (o->mem) {
        memcpy(o->mem + o->off, p, n);
        o->off += n;
        return WM_OK;
    }
    wm_wsink *s = o->s;
    wm_sha256_update(&s->sha, p, n);
    s->pos += n;
    const uint8_t *b = p;
    if (n >= s->wcap) { /* a whole conversion buffer: straight to the file, no copy */
        wm_status st = flush(s, o->err);
        if (st) return st;
        if (fd_write_all(s->fd, b, n)) return wm_err(o->err, WM_ERR_IO, "%s: write failed: %s", s->path, strerror(errno));
        return WM_OK;
    }
    while (n) {
        size_t k = s->wcap - s->wn < n ? s->wcap - s->wn : n;
        memcpy(s->wbuf + s->wn, b, k);
        s->wn += k;
        b += k;
        n -= k;
        if (s->wn == s->wcap) {
            wm_status st = flush(s, o->err);
            if (st) return st;
        }
    }
    return WM_OK;
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

/* ------------------------------------------------------------ emission */

static wm_status emit(wm_wsink *s, const char *name, uint64_t numel, const int64_t *dims, size_t nd,
                      const wm_wsrc *src, out *o) {
    wm_status st = WM_OK;
    if (!src->t) {
        uint64_t state = name_hash(name, src->seed);
        for (uint64_t i = 0; i < numel && !st; i += s->buf_elems) {
            size_t k = numel - i < s->buf_elems ? (size_t)(numel - i) : s->buf_elems;
            generate(s->buf, k, &state, src->scale, src->fill);
            st = put(o, s->buf, k * 4);
        }
        return st;
    }
    const wm_st_tensor *t = src->t;
    int es = esize(t->dtype);
    if (!src->transpose) {
        for (uint64_t i = 0; i < numel && !st; i += s->buf_elems) {
            size_t k = numel - i < s->buf_elems ? (size_t)(numel - i) : s->buf_elems;
            convert(t->data + i * (uint64_t)es, t->dtype, k, s->buf);
            st = put(o, s->buf, k * 4);
            if (s->release_source) release(t->data + i * (uint64_t)es, (uint64_t)k * (uint64_t)es);
        }
    } else {
        /* source [R, C] -> output [C, R], a block of output rows at a time */
        (void)nd;
        uint64_t R = (uint64_t)dims[1], C = (uint64_t)dims[0];
        uint64_t bc = s->buf_elems / (R ? R : 1);
        if (bc < 1) bc = 1;
        if (bc > C) bc = C;
        float tmp[256];
        if (bc > 256) bc = 256;
        if (bc * R > s->buf_elems) { /* a row longer than the buffer: grow it once */
            float *nb = realloc(s->buf, bc * R * sizeof(float));
            if (!nb) return wm_err(o->err, WM_ERR_NOMEM, "out of memory transposing '%s'", name);
            s->buf = nb;
            s->buf_elems = (size_t)(bc * R);
        }
        for (uint64_t c0 = 0; c0 < C && !st; c0 += bc) {
            uint64_t k = C - c0 < bc ? C - c0 : bc;
            for (uint64_t r = 0; r < R; r++) {
                convert(t->data + (r * C + c0) * (uint64_t)es, t->dtype, (size_t)k, tmp);
                for (uint64_t j = 0; j < k; j++) s->buf[j * R + r] = tmp[j];
            }
            st = put(o, s->buf, (size_t)(k * R * 4));
        }
    }
    if (s->release_source) release(t->data, t->nbytes);
    return st;
}

wm_status wm_wsink_init(wm_wsink *s, wm_onnx_model *m, const char *data_path, const char *location, wm_error *err) {
    memset(s, 0, sizeof *s);
    s->m = m;
    s->fd = -1;
    s->min_bytes = 1024;
    s->align = 4096;
    s->buf_elems = BUF_ELEMS;
    s->buf = malloc(s->buf_elems * sizeof(float));
    if (!s->buf) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    wm_sha256_init(&s->sha);
    if (!data_path) return WM_OK;
    snprintf(s->path, sizeof s->path, "%s", data_path);
    snprintf(s->location, sizeof s->location, "%s", location);
    s->wcap = WBUF;
    s->wbuf = malloc(s->wcap);
    if (!s->wbuf) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    s->fd = open(data_path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (s->fd < 0) return wm_err(err, WM_ERR_IO, "%s: cannot create: %s", data_path, strerror(errno));
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
    s->n_tensors++;
    s->param_bytes += nbytes;
    out o = {s, NULL, 0, err};
    if (s->fd < 0 || nbytes < s->min_bytes) {
        if (nbytes > SIZE_MAX / 2) return wm_err(err, WM_ERR_NOMEM, "initializer '%s': too large to hold", name);
        o.mem = wm_arena_alloc(&s->m->arena, nbytes ? (size_t)nbytes : 1);
        if (!o.mem) return wm_err(err, WM_ERR_NOMEM, "out of memory for initializer '%s'", name);
        wm_status st = emit(s, name, numel, dims, nd, src, &o);
        if (st) return st;
        return wm_graph_add_initializer(g, name, WM_DT_FLOAT, dims, nd, (wm_bytes){o.mem, (size_t)nbytes}, NULL, err);
    }
    /* external: pad to the alignment, stream, reference */
    static const uint8_t zeros[4096];
    uint64_t al = (s->pos + s->align - 1) / s->align * s->align;
    while (s->pos < al) {
        size_t k = al - s->pos < sizeof zeros ? (size_t)(al - s->pos) : sizeof zeros;
        wm_status st = put(&o, zeros, k);
        if (st) return st;
    }
    wm_status st = emit(s, name, numel, dims, nd, src, &o);
    if (st) return st;
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
    wm_status st = flush(s, err);
    if (st) return st;
    if (fsync(s->fd) != 0) return wm_err(err, WM_ERR_IO, "%s: fsync failed: %s", s->path, strerror(errno));
    wm_sha256_hex(&s->sha, sha_hex);
    return WM_OK;
}

void wm_wsink_close(wm_wsink *s) {
    if (s->fd >= 0) close(s->fd);
    s->fd = -1;
    free(s->buf);
    free(s->wbuf);
    s->buf = NULL;
    s->wbuf = NULL;
}
