#include "onnx/pb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "winml assumes a little-endian host (protobuf and ONNX raw data are little-endian)"
#endif

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_SGROUP = 3, WT_EGROUP = 4, WT_I32 = 5 };

/* ---------------------------------------------------------------- decoding */

typedef struct dctx {
    wm_arena *a;
    wm_error *err;
    const uint8_t *base;
    int depth;
    const char *msg[WM_PB_MAX_DEPTH + 2];
    const char *field[WM_PB_MAX_DEPTH + 2];
    long index[WM_PB_MAX_DEPTH + 2];
} dctx;

static wm_status dfail(dctx *c, const uint8_t *at, const char *fmt, const char *arg) {
    char path[600];
    size_t used = 0;
    path[0] = 0;
    for (int i = 0; i <= c->depth && used + 64 < sizeof path; i++) {
        if (i == 0) used += (size_t)snprintf(path + used, sizeof path - used, "%s", c->msg[0]);
        else if (c->index[i] >= 0)
            used += (size_t)snprintf(path + used, sizeof path - used, ".%s[%ld]", c->field[i], c->index[i]);
        else used += (size_t)snprintf(path + used, sizeof path - used, ".%s", c->field[i]);
    }
    char what[256];
    snprintf(what, sizeof what, fmt, arg ? arg : "");
    return wm_err(c->err, WM_ERR_INPUT, "%s (byte %zu): %s", path, (size_t)(at - c->base), what);
}

/* 0 ok, -1 truncated, -2 longer than 10 bytes */
static int rd_varint(const uint8_t **pp, const uint8_t *end, uint64_t *v) {
    const uint8_t *p = *pp;
    uint64_t r = 0;
    for (int i = 0; i < 10; i++) {
        if (p >= end) return -1;
        uint8_t b = *p++;
        r |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *pp = p;
            *v = r;
            return 0;
        }
    }
    return -2;
}

static const wm_pb_field *find_field(const wm_pb_msg *d, uint32_t num, size_t *idx) {
    for (size_t i = 0; i < d->nfields; i++)
        if (d->fields[i].num == num) {
            *idx = i;
            return &d->fields[i];
        }
    return NULL;
}

static size_t kind_size(int kind) {
    switch (kind) {
    case WM_PB_INT64: return sizeof(int64_t);
    case WM_PB_INT32: return sizeof(int32_t);
    case WM_PB_UINT64: return sizeof(uint64_t);
    case WM_PB_FLOAT: return sizeof(float);
    case WM_PB_DOUBLE: return sizeof(double);
    case WM_PB_STRING: return sizeof(char *);
    case WM_PB_BYTES: return sizeof(wm_bytes);
    default: return sizeof(void *);
    }
}

static int wire_of(int kind) {
    switch (kind) {
    case WM_PB_INT64:
    case WM_PB_INT32:
    case WM_PB_UINT64: return WT_VARINT;
    case WM_PB_FLOAT: return WT_I32;
    case WM_PB_DOUBLE: return WT_I64;
    default: return WT_LEN;
    }
}

static size_t pow2ceil(size_t n) {
    size_t c = 1;
    while (c < n) c <<= 1;
    return c;
}

/* Makes room for k more elements keeping the wm_vec capacity invariant. */
static int vec_reserve(wm_arena *a, void *arr, size_t count, size_t elem, size_t k) {
    unsigned char **pa = arr;
    size_t have = count ? pow2ceil(count) : 0, need = pow2ceil(count + k);
    if (count + k < count) return -1;
    if (need <= have) return 0;
    if (need > SIZE_MAX / elem) return -1;
    unsigned char *na = wm_arena_alloc(a, need * elem);
    if (!na) return -1;
    if (count) memcpy(na, *pa, count * elem);
    *pa = na;
    return 0;
}

static void store_scalar(void *dst, int kind, uint64_t raw) {
    switch (kind) {
    case WM_PB_INT64: {
        int64_t v = (int64_t)raw;
        memcpy(dst, &v, 8);
    } break;
    case WM_PB_UINT64: memcpy(dst, &raw, 8); break;
    case WM_PB_INT32: {
        int32_t v = (int32_t)(uint32_t)raw;
        memcpy(dst, &v, 4);
    } break;
    case WM_PB_FLOAT: {
        uint32_t u = (uint32_t)raw;
        memcpy(dst, &u, 4);
    } break;
    case WM_PB_DOUBLE: memcpy(dst, &raw, 8); break;
    }
}

static wm_status decode_into(dctx *c, const wm_pb_msg *d, void *m, const uint8_t *p, const uint8_t *end);

static wm_status push_unknown(dctx *c, wm_pb_base *b, const uint8_t *from, const uint8_t *to) {
    wm_bytes *u = wm_vec_push(c->a, &b->unknown, &b->n_unknown, sizeof *u);
    if (!u) return wm_err(c->err, WM_ERR_NOMEM, "out of memory decoding %s", c->msg[0]);
    u->p = from;
    u->n = (size_t)(to - from);
    return WM_OK;
}

static wm_status decode_packed(dctx *c, const wm_pb_field *f, unsigned char *m, const uint8_t *p,
                               const uint8_t *end) {
    void *arr = m + f->off;
    size_t *count = (size_t *)(m + f->count_off);
    size_t es = kind_size(f->kind);
    size_t len = (size_t)(end - p);
    if (f->kind == WM_PB_FLOAT || f->kind == WM_PB_DOUBLE) {
        size_t w = f->kind == WM_PB_FLOAT ? 4 : 8;
        if (len % w) return dfail(c, p, "packed %s length is not a multiple of the element size", f->name);
        size_t k = len / w;
        if (vec_reserve(c->a, arr, *count, es, k))
            return wm_err(c->err, WM_ERR_NOMEM, "out of memory decoding %s", f->name);
        if (k) memcpy(*(unsigned char **)arr + *count * es, p, len);
        *count += k;
        return WM_OK;
    }
    /* varints: count first so the array is sized once */
    size_t k = 0;
    for (const uint8_t *q = p; q < end; q++)
        if (!(*q & 0x80)) k++;
    if (vec_reserve(c->a, arr, *count, es, k))
        return wm_err(c->err, WM_ERR_NOMEM, "out of memory decoding %s", f->name);
    while (p < end) {
        uint64_t v;
        int r = rd_varint(&p, end, &v);
        if (r) return dfail(c, p, r == -1 ? "truncated varint in packed %s" : "varint over 10 bytes in packed %s",
                            f->name);
        store_scalar(*(unsigned char **)arr + *count * es, f->kind, v);
        (*count)++;
    }
    return WM_OK;
}

static wm_status decode_field(dctx *c, const wm_pb_field *f, size_t fidx, unsigned char *m, int wt,
                              uint64_t v, const uint8_t *pl, size_t plen) {
    wm_pb_base *b = (wm_pb_base *)m;
    if (f->kind <= WM_PB_DOUBLE) {
        if (f->repeated && wt == WT_LEN) return decode_packed(c, f, m, pl, pl + plen);
        if (f->repeated) {
            void *slot = wm_vec_push(c->a, m + f->off, (size_t *)(m + f->count_off), kind_size(f->kind));
            if (!slot) return wm_err(c->err, WM_ERR_NOMEM, "out of memory decoding %s", f->name);
            store_scalar(slot, f->kind, v);
        } else {
            store_scalar(m + f->off, f->kind, v);
            b->has |= 1ull << fidx;
        }
        return WM_OK;
    }
    if (f->kind == WM_PB_STRING) {
        if (memchr(pl, 0, plen)) return dfail(c, pl, "string field %s contains a NUL byte", f->name);
        char *s = wm_arena_strndup(c->a, (const char *)pl, plen);
        if (!s) return wm_err(c->err, WM_ERR_NOMEM, "out of memory decoding %s", f->name);
        if (f->repeated) {
            char **slot = wm_vec_push(c->a, m + f->off, (size_t *)(m + f->count_off), sizeof(char *));
            if (!slot) return wm_err(c->err, WM_ERR_NOMEM, "out of memory decoding %s", f->name);
            *slot = s;
        } else {
            *(char **)(m + f->off) = s;
        }
        return WM_OK;
    }
    if (f->kind == WM_PB_BYTES) {
        wm_bytes bv = {pl, plen};
        if (f->repeated) {
            wm_bytes *slot = wm_vec_push(c->a, m + f->off, (size_t *)(m + f->count_off), sizeof(wm_bytes));
            if (!slot) return wm_err(c->err, WM_ERR_NOMEM, "out of memory decoding %s", f->name);
            *slot = bv;
        } else {
            *(wm_bytes *)(m + f->off) = bv;
        }
        return WM_OK;
    }
    /* sub-message */
    if (c->depth + 1 > WM_PB_MAX_DEPTH)
        return dfail(c, pl, "messages nested deeper than %s levels", "64");
    void *sub;
    long index = -1;
    if (f->repeated) {
        size_t *count = (size_t *)(m + f->count_off);
        index = (long)*count;
        void **slot = wm_vec_push(c->a, m + f->off, count, sizeof(void *));
        sub = wm_pb_new(c->a, f->sub);
        if (!slot || !sub) return wm_err(c->err, WM_ERR_NOMEM, "out of memory decoding %s", f->name);
        *slot = sub;
    } else {
        void **slot = (void **)(m + f->off);
        if (!*slot) *slot = wm_pb_new(c->a, f->sub); /* a repeated singular message merges */
        if (!*slot) return wm_err(c->err, WM_ERR_NOMEM, "out of memory decoding %s", f->name);
        sub = *slot;
    }
    c->depth++;
    c->msg[c->depth] = f->sub->name;
    c->field[c->depth] = f->name;
    c->index[c->depth] = index;
    wm_status s = decode_into(c, f->sub, sub, pl, pl + plen);
    c->depth--;
    return s;
}

static wm_status decode_into(dctx *c, const wm_pb_msg *d, void *mv, const uint8_t *p, const uint8_t *end) {
    unsigned char *m = mv;
    while (p < end) {
        const uint8_t *start = p;
        uint64_t tag, v = 0;
        int r = rd_varint(&p, end, &tag);
        if (r) return dfail(c, start, r == -1 ? "truncated field tag%s" : "field tag varint over 10 bytes%s", "");
        uint64_t num = tag >> 3;
        int wt = (int)(tag & 7);
        if (num == 0 || num > 536870911u) return dfail(c, start, "invalid field number%s", "");
        const uint8_t *pl = NULL;
        size_t plen = 0;
        switch (wt) {
        case WT_VARINT:
            r = rd_varint(&p, end, &v);
            if (r) return dfail(c, start, r == -1 ? "truncated varint%s" : "varint over 10 bytes%s", "");
            break;
        case WT_I64:
            if (end - p < 8) return dfail(c, start, "truncated 64-bit field%s", "");
            memcpy(&v, p, 8);
            p += 8;
            break;
        case WT_I32: {
            if (end - p < 4) return dfail(c, start, "truncated 32-bit field%s", "");
            uint32_t u;
            memcpy(&u, p, 4);
            v = u;
            p += 4;
        } break;
        case WT_LEN: {
            uint64_t len;
            r = rd_varint(&p, end, &len);
            if (r) return dfail(c, start, "truncated length prefix%s", "");
            if (len > (uint64_t)(end - p)) {
                char msg[160];
                snprintf(msg, sizeof msg, "length %llu exceeds the %zu bytes left in its parent",
                         (unsigned long long)len, (size_t)(end - p));
                return dfail(c, start, "%s", msg);
            }
            pl = p;
            plen = (size_t)len;
            p += len;
        } break;
        case WT_SGROUP:
        case WT_EGROUP: return dfail(c, start, "group wire type is not supported%s", "");
        default: return dfail(c, start, "invalid wire type%s", "");
        }
        size_t fidx = 0;
        const wm_pb_field *f = find_field(d, (uint32_t)num, &fidx);
        int ok = f && (wt == wire_of(f->kind) || (f->repeated && f->kind <= WM_PB_DOUBLE && wt == WT_LEN));
        wm_status s = ok ? decode_field(c, f, fidx, m, wt, v, pl, plen) : push_unknown(c, (wm_pb_base *)m, start, p);
        if (s) return s;
    }
    return WM_OK;
}

void *wm_pb_new(wm_arena *a, const wm_pb_msg *d) { return wm_arena_alloc(a, d->size); }

wm_status wm_pb_decode(wm_arena *a, const wm_pb_msg *d, const uint8_t *buf, size_t n, void **out,
                       wm_error *err) {
    *out = NULL;
    if (n > WM_PB_MAX_MESSAGE)
        return wm_err(err, WM_ERR_INPUT, "%s of %zu bytes exceeds the protobuf limit of 2^31-1 bytes", d->name, n);
    dctx c;
    memset(&c, 0, sizeof c);
    c.a = a;
    c.err = err;
    c.base = buf;
    c.msg[0] = d->name;
    c.index[0] = -1;
    void *m = wm_pb_new(a, d);
    if (!m) return wm_err(err, WM_ERR_NOMEM, "out of memory decoding %s", d->name);
    static const uint8_t empty[1];
    wm_status s = decode_into(&c, d, m, buf ? buf : empty, (buf ? buf : empty) + n);
    if (s) return s;
    *out = m;
    return WM_OK;
}

void wm_pb_set_has(const wm_pb_msg *d, void *m, uint32_t num) {
    size_t idx;
    if (find_field(d, num, &idx)) ((wm_pb_base *)m)->has |= 1ull << idx;
}

void wm_pb_clear_has(const wm_pb_msg *d, void *m, uint32_t num) {
    size_t idx;
    if (find_field(d, num, &idx)) ((wm_pb_base *)m)->has &= ~(1ull << idx);
}

/* ---------------------------------------------------------------- encoding */

static uint64_t vsize(uint64_t v) {
    uint64_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static uint64_t raw_of(const void *src, int kind) {
    switch (kind) {
    case WM_PB_INT64: {
        int64_t v;
        memcpy(&v, src, 8);
        return (uint64_t)v;
    }
    case WM_PB_INT32: {
        int32_t v;
        memcpy(&v, src, 4);
        return (uint64_t)(int64_t)v; /* negative int32 is sign-extended: 10 bytes */
    }
    case WM_PB_FLOAT: {
        uint32_t u;
        memcpy(&u, src, 4);
        return u;
    }
    default: {
        uint64_t u;
        memcpy(&u, src, 8);
        return u;
    }
    }
}

static uint64_t scalar_payload(int kind, uint64_t raw) {
    if (kind == WM_PB_FLOAT) return 4;
    if (kind == WM_PB_DOUBLE) return 8;
    return vsize(raw);
}

static int singular_present(const wm_pb_field *f, size_t idx, const unsigned char *m) {
    const wm_pb_base *b = (const wm_pb_base *)m;
    const void *v = m + f->off;
    switch (f->kind) {
    case WM_PB_STRING: return *(char *const *)v != NULL;
    case WM_PB_BYTES: return ((const wm_bytes *)v)->p != NULL;
    case WM_PB_MSG: return *(void *const *)v != NULL;
    default: return (b->has >> idx & 1) || raw_of(v, f->kind) != 0;
    }
}

static uint64_t packed_len(const wm_pb_field *f, const unsigned char *arr, size_t n) {
    if (f->kind == WM_PB_FLOAT) return 4 * (uint64_t)n;
    if (f->kind == WM_PB_DOUBLE) return 8 * (uint64_t)n;
    uint64_t t = 0;
    size_t es = kind_size(f->kind);
    for (size_t i = 0; i < n; i++) t += vsize(raw_of(arr + i * es, f->kind));
    return t;
}

static uint64_t item_size(const wm_pb_field *f, const void *v) {
    switch (f->kind) {
    case WM_PB_STRING: {
        uint64_t n = strlen(*(char *const *)v);
        return vsize(n) + n;
    }
    case WM_PB_BYTES: {
        uint64_t n = ((const wm_bytes *)v)->n;
        return vsize(n) + n;
    }
    case WM_PB_MSG: {
        uint64_t n = wm_pb_size(f->sub, *(void *const *)v);
        return vsize(n) + n;
    }
    default: return scalar_payload(f->kind, raw_of(v, f->kind));
    }
}

uint64_t wm_pb_size(const wm_pb_msg *d, const void *mv) {
    const unsigned char *m = mv;
    uint64_t t = 0;
    for (size_t i = 0; i < d->nfields; i++) {
        const wm_pb_field *f = &d->fields[i];
        uint64_t tag = vsize((uint64_t)f->num << 3);
        if (!f->repeated) {
            if (singular_present(f, i, m)) t += tag + item_size(f, m + f->off);
            continue;
        }
        size_t n = *(const size_t *)(m + f->count_off);
        if (!n) continue;
        const unsigned char *arr = *(unsigned char *const *)(m + f->off);
        size_t es = kind_size(f->kind);
        if (f->packed && f->kind <= WM_PB_DOUBLE) {
            uint64_t len = packed_len(f, arr, n);
            t += tag + vsize(len) + len;
        } else {
            for (size_t k = 0; k < n; k++) t += tag + item_size(f, arr + k * es);
        }
    }
    const wm_pb_base *b = mv;
    for (size_t k = 0; k < b->n_unknown; k++) t += b->unknown[k].n;
    return t;
}

typedef struct wbuf {
    wm_pb_sink *s;
    int failed;
    size_t used;
    unsigned char buf[1 << 16];
} wbuf;

static void wflush(wbuf *w) {
    if (w->used && !w->failed && w->s->write(w->s->ctx, w->buf, w->used)) w->failed = 1;
    w->used = 0;
}

static void wput(wbuf *w, const void *p, size_t n) {
    if (w->failed) return;
    if (n > sizeof w->buf / 4) {
        wflush(w);
        if (!w->failed && w->s->write(w->s->ctx, p, n)) w->failed = 1;
        return;
    }
    if (w->used + n > sizeof w->buf) wflush(w);
    memcpy(w->buf + w->used, p, n);
    w->used += n;
}

static void wvarint(wbuf *w, uint64_t v) {
    unsigned char b[10];
    int n = 0;
    while (v >= 0x80) {
        b[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    b[n++] = (unsigned char)v;
    wput(w, b, (size_t)n);
}

static void encode_msg(wbuf *w, const wm_pb_msg *d, const void *mv);

static void wscalar(wbuf *w, int kind, const void *v) {
    if (kind == WM_PB_FLOAT) wput(w, v, 4);
    else if (kind == WM_PB_DOUBLE) wput(w, v, 8);
    else wvarint(w, raw_of(v, kind));
}

static void witem(wbuf *w, const wm_pb_field *f, const void *v) {
    wvarint(w, ((uint64_t)f->num << 3) | (uint64_t)wire_of(f->kind));
    switch (f->kind) {
    case WM_PB_STRING: {
        const char *s = *(char *const *)v;
        size_t n = strlen(s);
        wvarint(w, n);
        wput(w, s, n);
    } break;
    case WM_PB_BYTES: {
        const wm_bytes *b = v;
        wvarint(w, b->n);
        if (b->n) wput(w, b->p, b->n);
    } break;
    case WM_PB_MSG: {
        const void *sub = *(void *const *)v;
        wvarint(w, wm_pb_size(f->sub, sub));
        encode_msg(w, f->sub, sub);
    } break;
    default: wscalar(w, f->kind, v);
    }
}

static void encode_msg(wbuf *w, const wm_pb_msg *d, const void *mv) {
    const unsigned char *m = mv;
    for (size_t i = 0; i < d->nfields && !w->failed; i++) {
        const wm_pb_field *f = &d->fields[i];
        if (!f->repeated) {
            if (singular_present(f, i, m)) witem(w, f, m + f->off);
            continue;
        }
        size_t n = *(const size_t *)(m + f->count_off);
        if (!n) continue;
        const unsigned char *arr = *(unsigned char *const *)(m + f->off);
        size_t es = kind_size(f->kind);
        if (f->packed && f->kind <= WM_PB_DOUBLE) {
            wvarint(w, ((uint64_t)f->num << 3) | WT_LEN);
            wvarint(w, packed_len(f, arr, n));
            if (f->kind == WM_PB_FLOAT || f->kind == WM_PB_DOUBLE) wput(w, arr, n * es);
            else
                for (size_t k = 0; k < n; k++) wscalar(w, f->kind, arr + k * es);
        } else {
            for (size_t k = 0; k < n; k++) witem(w, f, arr + k * es);
        }
    }
    const wm_pb_base *b = mv;
    for (size_t k = 0; k < b->n_unknown; k++) wput(w, b->unknown[k].p, b->unknown[k].n);
}

int wm_pb_encode(wm_pb_sink *s, const wm_pb_msg *d, const void *m) {
    wbuf *w = malloc(sizeof *w);
    if (!w) return -1;
    w->s = s;
    w->failed = 0;
    w->used = 0;
    encode_msg(w, d, m);
    wflush(w);
    int failed = w->failed;
    free(w);
    return failed ? -1 : 0;
}

typedef struct membuf {
    uint8_t *p;
    size_t n, cap;
} membuf;

static int mem_write(void *ctx, const void *p, size_t n) {
    membuf *mb = ctx;
    if (mb->n + n > mb->cap) return -1;
    memcpy(mb->p + mb->n, p, n);
    mb->n += n;
    return 0;
}

uint8_t *wm_pb_encode_alloc(const wm_pb_msg *d, const void *m, size_t *n) {
    uint64_t size = wm_pb_size(d, m);
    if (size > SIZE_MAX - 1) return NULL;
    membuf mb = {malloc((size_t)size + 1), 0, (size_t)size};
    if (!mb.p) return NULL;
    wm_pb_sink s = {mem_write, &mb};
    if (wm_pb_encode(&s, d, m)) {
        free(mb.p);
        return NULL;
    }
    *n = mb.n;
    return mb.p;
}
