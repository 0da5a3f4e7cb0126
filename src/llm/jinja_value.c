/* jinja_value.c - values: allocation under the memory cap, Python str()/repr(),
 * equality and ordering, truthiness, UTF-8 and Python's whitespace set. */
#define _GNU_SOURCE /* memmem */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "llm/jinja_impl.h"

int wm_jerr(jctx *c, const jnode *at, wm_status s, const char *fmt, ...) {
    if (c->failed) return -1;
    c->failed = 1;
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (at)
        wm_err(c->err, s, "chat template line %d col %d: %s", at->line, at->col, msg);
    else
        wm_err(c->err, s, "chat template: %s", msg);
    return -1;
}

int wm_jcharge(jctx *c, const jnode *at, uint64_t steps) {
    c->steps += steps;
    if (c->steps > c->max_steps)
        return wm_jerr(c, at, WM_ERR_INPUT,
                       "evaluation step limit (%llu) exceeded: the template does too much work (nodes, loop "
                       "iterations, bytes made, compared or searched); raise wm_jinja_limits.max_steps to allow it",
                       (unsigned long long)c->max_steps);
    return 0;
}

int wm_jcharge_bytes(jctx *c, const jnode *at, uint64_t bytes) {
    c->bytes_uncharged += bytes;
    uint64_t steps = c->bytes_uncharged / 64;
    c->bytes_uncharged %= 64;
    return wm_jcharge(c, at, steps);
}

size_t wm_jlen(jctx *c, const char *p, size_t n) {
    wm_jaccrue(c, n / 64);
    return wm_u8_len(p, n);
}

void *wm_jalloc(jctx *c, size_t n) {
    if (n > c->mem_limit || c->arena->used_bytes > c->mem_limit - n) {
        wm_jerr(c, NULL, WM_ERR_INPUT, "memory limit (%zu bytes) exceeded", c->mem_limit);
        return NULL;
    }
    void *p = wm_arena_alloc(c->arena, n ? n : 1);
    if (!p) wm_jerr(c, NULL, WM_ERR_NOMEM, "out of memory");
    return p;
}

jv wm_jv_undef(const char *name) {
    jv v = {0};
    v.t = JV_UNDEF;
    v.uname = name;
    return v;
}
jv wm_jv_none(void) {
    jv v = {0};
    v.t = JV_NONE;
    return v;
}
jv wm_jv_bool(int b) {
    jv v = {0};
    v.t = JV_BOOL;
    v.u.b = b != 0;
    return v;
}
jv wm_jv_int(int64_t i) {
    jv v = {0};
    v.t = JV_INT;
    v.u.i = i;
    return v;
}
jv wm_jv_float(double f) {
    jv v = {0};
    v.t = JV_FLOAT;
    v.u.f = f;
    return v;
}
jv wm_jv_cstr(const char *p, size_t n) {
    jv v = {0};
    v.t = JV_STR;
    v.u.s.p = p;
    v.u.s.n = n;
    return v;
}

int wm_jstr(jctx *c, const char *p, size_t n, jv *out) {
    char *d = wm_jalloc(c, n + 1);
    if (!d) return -1;
    if (n) memcpy(d, p, n);
    d[n] = 0;
    *out = wm_jv_cstr(d, n);
    return 0;
}

int wm_jlist_new(jctx *c, size_t n, int tuple, jv *out) {
    jlist *l = wm_jalloc(c, sizeof *l);
    if (!l) return -1;
    if (n > ((size_t)-1) / sizeof(jv)) return wm_jerr(c, NULL, WM_ERR_INPUT, "list too long");
    if (n && !(l->v = wm_jalloc(c, n * sizeof(jv)))) return -1;
    l->n = n;
    l->tuple = tuple;
    memset(out, 0, sizeof *out);
    out->t = JV_LIST;
    out->u.l = l;
    return 0;
}

int wm_jdict_new(jctx *c, int kind, jv *out) {
    jdict *d = wm_jalloc(c, sizeof *d);
    if (!d) return -1;
    d->kind = kind;
    memset(out, 0, sizeof *out);
    out->t = JV_DICT;
    out->u.d = d;
    return 0;
}

/* Dicts grow by doubling inside the arena (old arrays are left behind). */
int wm_jdict_append(jctx *c, jdict *d, jv k, jv v) {
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        jv *nk = wm_jalloc(c, cap * sizeof(jv)), *nv = nk ? wm_jalloc(c, cap * sizeof(jv)) : NULL;
        if (!nv) return -1;
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof(jv));
            memcpy(nv, d->v, d->n * sizeof(jv));
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n] = v;
    d->n++;
    return 0;
}

int wm_jdict_set(jctx *c, jdict *d, jv k, jv v) {
    for (size_t i = 0; i < d->n; i++) {
        int eq = wm_jv_eq(c, d->k[i], k);
        if (eq < 0) return -1;
        if (eq) {
            d->v[i] = v;
            return 0;
        }
    }
    return wm_jdict_append(c, d, k, v);
}

int wm_jdict_copy(jctx *c, const jdict *src, int kind, jv *out) {
    if (wm_jdict_new(c, kind, out)) return -1;
    jdict *d = out->u.d;
    if (!src->n) return 0;
    if (wm_jcharge(c, NULL, src->n / 16) || !(d->k = wm_jalloc(c, src->n * sizeof(jv))) ||
        !(d->v = wm_jalloc(c, src->n * sizeof(jv))))
        return -1;
    memcpy(d->k, src->k, src->n * sizeof(jv));
    memcpy(d->v, src->v, src->n * sizeof(jv));
    d->n = d->cap = src->n;
    return 0;
}

int wm_jdict_get(jctx *c, const jdict *d, const char *k, size_t kn, jv *out) {
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JV_STR && d->k[i].u.s.n == kn && memcmp(d->k[i].u.s.p, k, kn) == 0) {
            wm_jaccrue(c, (i + kn) / 16);
            *out = d->v[i];
            return 1;
        }
    wm_jaccrue(c, d->n / 16);
    return 0;
}

int wm_jdict_getv(jctx *c, const jdict *d, jv k, jv *out) {
    for (size_t i = 0; i < d->n; i++) {
        int eq = wm_jv_eq(c, d->k[i], k);
        if (eq < 0) return -1;
        if (eq) {
            *out = d->v[i];
            return 1;
        }
    }
    return 0;
}

int wm_jv_truthy(jv v) {
    switch (v.t) {
    case JV_UNDEF:
    case JV_NONE: return 0;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0.0;
    case JV_STR: return v.u.s.n != 0;
    case JV_LIST: return v.u.l->n != 0;
    case JV_DICT: return v.u.d->kind != JD_DICT || v.u.d->n != 0;
    default: return 1;
    }
}

static int is_num(jv v) { return v.t == JV_BOOL || v.t == JV_INT || v.t == JV_FLOAT; }
static double num_f(jv v) {
    return v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : (double)v.u.b;
}
static int64_t num_i(jv v) { return v.t == JV_INT ? v.u.i : v.u.b; }

static int deep_err(jctx *c, const char *what) {
    return wm_jerr(c, NULL, WM_ERR_INPUT, "%s of values nested deeper than %d", what, c->max_edepth);
}

static int eq_at(jctx *c, jv a, jv b, int depth) {
    if (depth > c->max_edepth) return deep_err(c, "comparison");
    if (wm_jcharge(c, NULL, 1)) return -1;
    if (is_num(a) && is_num(b)) {
        if (a.t == JV_FLOAT || b.t == JV_FLOAT) return num_f(a) == num_f(b);
        return num_i(a) == num_i(b);
    }
    if (a.t != b.t) return 0;
    switch (a.t) {
    case JV_UNDEF:
    case JV_NONE: return 1;
    case JV_STR:
        if (a.u.s.n != b.u.s.n) return 0;
        if (wm_jcharge_bytes(c, NULL, a.u.s.n)) return -1;
        return memcmp(a.u.s.p, b.u.s.p, a.u.s.n) == 0;
    case JV_LIST:
        if (a.u.l->tuple != b.u.l->tuple || a.u.l->n != b.u.l->n) return 0;
        for (size_t i = 0; i < a.u.l->n; i++) {
            int r = eq_at(c, a.u.l->v[i], b.u.l->v[i], depth + 1);
            if (r <= 0) return r;
        }
        return 1;
    case JV_DICT:
        if (a.u.d->kind != JD_DICT || b.u.d->kind != JD_DICT) return a.u.d == b.u.d;
        if (a.u.d->n != b.u.d->n) return 0;
        for (size_t i = 0; i < a.u.d->n; i++) {
            size_t j = 0;
            int r = 0;
            for (; j < b.u.d->n && !r; j++)
                if ((r = eq_at(c, b.u.d->k[j], a.u.d->k[i], depth + 1)) < 0) return -1;
            if (!r) return 0;
            if ((r = eq_at(c, a.u.d->v[i], b.u.d->v[j - 1], depth + 1)) <= 0) return r;
        }
        return 1;
    case JV_FUNC: return a.u.fn == b.u.fn;
    case JV_MACRO: return a.u.mac == b.u.mac;
    default: return 0;
    }
}

int wm_jv_eq(jctx *c, jv a, jv b) { return eq_at(c, a, b, 0); }

const char *wm_jv_typename(jv v) {
    switch (v.t) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST: return v.u.l->tuple ? "tuple" : "list";
    case JV_DICT: return v.u.d->kind == JD_NS ? "Namespace" : v.u.d->kind == JD_LOOP ? "LoopContext" : "dict";
    case JV_METHOD: return "method";
    case JV_MACRO: return "Macro";
    default: return "function";
    }
}

static int compare_at(jctx *c, const jnode *at, jv a, jv b, int *r, int depth) {
    if (depth > c->max_edepth) return deep_err(c, "ordering");
    if (wm_jcharge(c, at, 1)) return -1;
    if (is_num(a) && is_num(b)) {
        if (a.t == JV_FLOAT || b.t == JV_FLOAT) {
            double x = num_f(a), y = num_f(b);
            *r = x < y ? -1 : x > y ? 1 : 0;
        } else {
            int64_t x = num_i(a), y = num_i(b);
            *r = x < y ? -1 : x > y ? 1 : 0;
        }
        return 0;
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        if (wm_jcharge_bytes(c, at, n)) return -1;
        int m = n ? memcmp(a.u.s.p, b.u.s.p, n) : 0;
        *r = m ? (m < 0 ? -1 : 1) : a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n ? 1 : 0;
        return 0;
    }
    if (a.t == JV_LIST && b.t == JV_LIST && a.u.l->tuple == b.u.l->tuple) {
        size_t n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (size_t i = 0; i < n; i++) {
            int eq = eq_at(c, a.u.l->v[i], b.u.l->v[i], depth + 1);
            if (eq < 0) return -1;
            if (eq) continue;
            return compare_at(c, at, a.u.l->v[i], b.u.l->v[i], r, depth + 1);
        }
        *r = a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n ? 1 : 0;
        return 0;
    }
    if (a.t == JV_UNDEF || b.t == JV_UNDEF)
        return wm_jerr(c, at, WM_ERR_INPUT, "'%s' is undefined (in a comparison)",
                    (a.t == JV_UNDEF ? a.uname : b.uname) ? (a.t == JV_UNDEF ? a.uname : b.uname) : "value");
    return wm_jerr(c, at, WM_ERR_INPUT, "ordering not supported between '%s' and '%s'", wm_jv_typename(a),
                wm_jv_typename(b));
}

int wm_jv_compare(jctx *c, const jnode *at, jv a, jv b, int *r) { return compare_at(c, at, a, b, r, 0); }

/* ---- buffers ---- */

int wm_jbuf_put(jctx *c, jbuf *b, const char *p, size_t n) {
    size_t lim = b == c->out ? c->max_output : c->mem_limit;
    if (n > lim || b->n > lim - n) {
        if (b == c->out) return wm_jerr(c, NULL, WM_ERR_INPUT, "output limit (%zu bytes) exceeded", lim);
        return wm_jerr(c, NULL, WM_ERR_INPUT, "string size limit (%zu bytes) exceeded", lim);
    }
    if (wm_jcharge_bytes(c, NULL, n)) return -1;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) return wm_jerr(c, NULL, WM_ERR_NOMEM, "out of memory");
        b->p = q;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

int wm_jbuf_putc(jctx *c, jbuf *b, char ch) { return wm_jbuf_put(c, b, &ch, 1); }

int wm_jbuf_to_str(jctx *c, jbuf *b, jv *out) {
    int rc = wm_jstr(c, b->p ? b->p : "", b->n, out);
    wm_jbuf_free(b);
    return rc;
}

void wm_jbuf_free(jbuf *b) {
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

int64_t wm_jfind(jctx *c, const jnode *at, const char *h, size_t hn, const char *nd, size_t nn, size_t from) {
    if (from > hn || nn > hn - from) return -1;
    if (nn == 0) return (int64_t)from;
    const char *q = memmem(h + from, hn - from, nd, nn);
    size_t scanned = (q ? (size_t)(q - h) + nn : hn) - from;
    if (wm_jcharge(c, at, scanned / 16 + nn / 16)) return -2;
    return q ? (int64_t)(q - h) : -1;
}

int64_t wm_jrfind(jctx *c, const jnode *at, const char *h, size_t end, const char *nd, size_t nn) {
    if (nn > end) return -1;
    if (nn == 0) return (int64_t)end;
    uint64_t work = 0;
    int64_t found = -1;
    for (size_t j = end - nn + 1; j-- > 0;) {
        const char *q = memrchr(h, nd[0], j + 1); /* the last candidate start at or before j */
        if (!q) break;
        j = (size_t)(q - h);
        work += nn; /* at most nn bytes compared here */
        if (work >= 1u << 16) {
            if (wm_jcharge(c, at, work / 16)) return -2;
            work = 0;
        }
        if (memcmp(q, nd, nn) == 0) {
            found = (int64_t)j;
            break;
        }
    }
    size_t scanned = end - (found >= 0 ? (size_t)found : 0);
    if (wm_jcharge(c, at, (work + scanned) / 16)) return -2;
    return found;
}

/* ---- UTF-8 ---- */

uint32_t wm_u8_decode(const char *p, size_t n, size_t i, size_t *len) {
    const unsigned char *s = (const unsigned char *)p;
    unsigned char c0 = s[i];
    size_t need = c0 < 0x80 ? 1 : (c0 >> 5) == 6 ? 2 : (c0 >> 4) == 14 ? 3 : (c0 >> 3) == 30 ? 4 : 1;
    if (i + need > n) need = 1;
    uint32_t cp = need == 1 ? c0 : need == 2 ? (c0 & 0x1f) : need == 3 ? (c0 & 0x0f) : (c0 & 0x07);
    for (size_t k = 1; k < need; k++) {
        if ((s[i + k] & 0xc0) != 0x80) {
            *len = 1;
            return c0; /* invalid: one byte as itself */
        }
        cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    *len = need;
    return cp;
}

size_t wm_u8_next(const char *p, size_t n, size_t i) {
    size_t l;
    wm_u8_decode(p, n, i, &l);
    return i + l;
}

size_t wm_u8_len(const char *p, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i = wm_u8_next(p, n, i)) k++;
    return k;
}

/* str.isspace(): the Unicode White_Space / bidi whitespace set Python uses */
int wm_py_isspace(uint32_t cp) {
    if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x1f);
    return cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

size_t wm_py_space_at(const char *p, size_t n, size_t i) {
    size_t l;
    uint32_t cp = wm_u8_decode(p, n, i, &l);
    return wm_py_isspace(cp) ? l : 0;
}

size_t wm_py_space_before(const char *p, size_t i) {
    if (i == 0) return 0;
    size_t j = i - 1, back = 0;
    while (j > 0 && back < 3 && ((unsigned char)p[j] & 0xc0) == 0x80) {
        j--;
        back++;
    }
    size_t l;
    uint32_t cp = wm_u8_decode(p, i, j, &l);
    if (j + l != i) { /* not a whole char: try the last byte alone */
        cp = (unsigned char)p[i - 1];
        return wm_py_isspace(cp) && cp < 0x80 ? 1 : 0;
    }
    return wm_py_isspace(cp) ? l : 0;
}

/* ---- case mapping ---- */

/* ranges where upper and lower case alternate (even = upper) */
static int alt_range(uint32_t cp) {
    return (cp >= 0x100 && cp <= 0x12f) || (cp >= 0x132 && cp <= 0x137) || (cp >= 0x14a && cp <= 0x177) ||
           (cp >= 0x1e00 && cp <= 0x1e95) || (cp >= 0x1ea0 && cp <= 0x1eff) || (cp >= 0x460 && cp <= 0x481) ||
           (cp >= 0x48a && cp <= 0x4bf) || (cp >= 0x4d0 && cp <= 0x52f) || (cp >= 0x3d8 && cp <= 0x3ef);
}
/* odd = upper */
static int alt_range_odd(uint32_t cp) {
    return (cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17e) || (cp >= 0x4c1 && cp <= 0x4ce);
}

uint32_t wm_jinja_uc_upper(uint32_t cp) {
    if (cp < 0x80) return cp >= 'a' && cp <= 'z' ? cp - 32 : cp;
    if ((cp >= 0x1c4 && cp <= 0x1cc) || (cp >= 0x1f1 && cp <= 0x1f3)) /* DŽ Dž dž, LJ Lj lj, NJ Nj nj, DZ Dz dz */
        return cp - (cp - (cp >= 0x1f1 ? 0x1f1 : 0x1c4)) % 3;
    if ((cp >= 0xe0 && cp <= 0xfe && cp != 0xf7)) return cp - 32;
    if (cp == 0xff) return 0x178;
    if (cp == 0xb5) return 0x39c;
    if (alt_range(cp)) return cp & ~1u;
    if (alt_range_odd(cp)) return (cp & 1) ? cp : cp - 1;
    if (cp == 0x131) return 'I';
    if (cp == 0x17f) return 'S';
    if (cp >= 0x3b1 && cp <= 0x3cb && cp != 0x3c2) return cp - 32;
    if (cp == 0x3c2) return 0x3a3;
    if (cp == 0x3ac) return 0x386;
    if (cp >= 0x3ad && cp <= 0x3af) return cp - 37;
    if (cp == 0x3cc) return 0x38c;
    if (cp == 0x3cd || cp == 0x3ce) return cp - 63;
    if (cp >= 0x430 && cp <= 0x44f) return cp - 32;
    if (cp >= 0x450 && cp <= 0x45f) return cp - 80;
    if (cp >= 0x561 && cp <= 0x586) return cp - 48;
    if (cp >= 0xff41 && cp <= 0xff5a) return cp - 32;
    return cp;
}

uint32_t wm_jinja_uc_lower(uint32_t cp) {
    if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
    if ((cp >= 0x1c4 && cp <= 0x1cc) || (cp >= 0x1f1 && cp <= 0x1f3))
        return cp - (cp - (cp >= 0x1f1 ? 0x1f1 : 0x1c4)) % 3 + 2;
    if ((cp >= 0xc0 && cp <= 0xde && cp != 0xd7)) return cp + 32;
    if (cp == 0x178) return 0xff;
    if (alt_range(cp)) return cp | 1u;
    if (alt_range_odd(cp)) return (cp & 1) ? cp + 1 : cp;
    if (cp >= 0x391 && cp <= 0x3ab && cp != 0x3a2) return cp + 32;
    if (cp == 0x386) return 0x3ac;
    if (cp >= 0x388 && cp <= 0x38a) return cp + 37;
    if (cp == 0x38c) return 0x3cc;
    if (cp == 0x38e || cp == 0x38f) return cp + 63;
    if (cp >= 0x410 && cp <= 0x42f) return cp + 32;
    if (cp >= 0x400 && cp <= 0x40f) return cp + 80;
    if (cp >= 0x531 && cp <= 0x556) return cp + 48;
    if (cp >= 0xff21 && cp <= 0xff3a) return cp + 32;
    return cp;
}

int wm_uc_is_cased(uint32_t cp) {
    return wm_jinja_uc_upper(cp) != cp || wm_jinja_uc_lower(cp) != cp || cp == 0xdf || cp == 0x138 || cp == 0x149 || cp == 0x390 ||
           cp == 0x3b0;
}

/* ---- str() / repr() ---- */

/* Python's repr(float): the shortest digits that round-trip, fixed notation
 * for exponents -4 <= e < 16, else d.ddde+XX. */
void wm_py_float_repr(double f, char *buf, size_t n) {
    if (isnan(f)) {
        snprintf(buf, n, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(buf, n, f < 0 ? "-inf" : "inf");
        return;
    }
    char e[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, f);
        if (strtod(e, NULL) == f) break;
    }
    /* e = [-]d[.ddd]e[+-]XX */
    const char *s = e;
    int neg = 0;
    if (*s == '-') {
        neg = 1;
        s++;
    }
    char digits[24];
    int nd = 0;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9' && nd < 23) digits[nd++] = *s;
    digits[nd] = 0;
    int exp10 = atoi(s + 1);
    while (nd > 1 && digits[nd - 1] == '0') digits[--nd] = 0;
    int decpt = exp10 + 1;
    char out[64];
    size_t o = 0;
    if (neg) out[o++] = '-';
    if (decpt <= -4 || decpt > 16) {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            for (int i = 1; i < nd; i++) out[o++] = digits[i];
        }
        snprintf(out + o, sizeof out - o, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    } else if (decpt <= 0) {
        out[o++] = '0';
        out[o++] = '.';
        for (int i = 0; i < -decpt; i++) out[o++] = '0';
        for (int i = 0; i < nd; i++) out[o++] = digits[i];
        out[o] = 0;
    } else if (decpt >= nd) {
        for (int i = 0; i < nd; i++) out[o++] = digits[i];
        for (int i = nd; i < decpt; i++) out[o++] = '0';
        out[o++] = '.';
        out[o++] = '0';
        out[o] = 0;
    } else {
        for (int i = 0; i < decpt; i++) out[o++] = digits[i];
        out[o++] = '.';
        for (int i = decpt; i < nd; i++) out[o++] = digits[i];
        out[o] = 0;
    }
    snprintf(buf, n, "%s", out);
}

static int py_isprintable(uint32_t cp) {
    if (cp < 0x20 || (cp >= 0x7f && cp <= 0xa0) || cp == 0xad) return 0;
    if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202f) ||
        (cp >= 0x205f && cp <= 0x2064) || cp == 0x3000 || cp == 0xfeff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return 1;
}

static int repr_str(jctx *c, jbuf *b, const char *p, size_t n) {
    int has_sq = memchr(p, '\'', n) != NULL, has_dq = memchr(p, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    if (wm_jbuf_putc(c, b, q)) return -1;
    for (size_t i = 0; i < n;) {
        size_t l;
        uint32_t cp = wm_u8_decode(p, n, i, &l);
        char tmp[16];
        const char *w = tmp;
        size_t wn;
        if (cp == '\\' || cp == (uint32_t)q) {
            tmp[0] = '\\';
            tmp[1] = (char)cp;
            wn = 2;
        } else if (cp == '\n') {
            w = "\\n";
            wn = 2;
        } else if (cp == '\r') {
            w = "\\r";
            wn = 2;
        } else if (cp == '\t') {
            w = "\\t";
            wn = 2;
        } else if (l == 1 && cp >= 0x80) { /* an invalid byte */
            wn = (size_t)snprintf(tmp, sizeof tmp, "\\x%02x", cp);
        } else if (!py_isprintable(cp)) {
            if (cp < 0x100)
                wn = (size_t)snprintf(tmp, sizeof tmp, "\\x%02x", cp);
            else if (cp < 0x10000)
                wn = (size_t)snprintf(tmp, sizeof tmp, "\\u%04x", cp);
            else
                wn = (size_t)snprintf(tmp, sizeof tmp, "\\U%08x", cp);
        } else {
            w = p + i;
            wn = l;
        }
        if (wm_jbuf_put(c, b, w, wn)) return -1;
        i += l;
    }
    return wm_jbuf_putc(c, b, q);
}

static int str_or_repr(jctx *c, jbuf *b, jv v, int repr, int depth) {
    char num[64];
    if (depth > c->max_depth) return wm_jerr(c, NULL, WM_ERR_INPUT, "value nested too deeply to print");
    switch (v.t) {
    case JV_UNDEF: return repr ? wm_jbuf_put(c, b, "Undefined", 9) : 0;
    case JV_NONE: return wm_jbuf_put(c, b, "None", 4);
    case JV_BOOL: return v.u.b ? wm_jbuf_put(c, b, "True", 4) : wm_jbuf_put(c, b, "False", 5);
    case JV_INT: snprintf(num, sizeof num, "%lld", (long long)v.u.i); return wm_jbuf_put(c, b, num, strlen(num));
    case JV_FLOAT: wm_py_float_repr(v.u.f, num, sizeof num); return wm_jbuf_put(c, b, num, strlen(num));
    case JV_STR: return repr ? repr_str(c, b, v.u.s.p, v.u.s.n) : wm_jbuf_put(c, b, v.u.s.p, v.u.s.n);
    case JV_LIST: {
        const jlist *l = v.u.l;
        static const char *const views[] = {"", "dict_items(", "dict_keys(", "dict_values("};
        if (l->view > 0 && l->view < 4 && wm_jbuf_put(c, b, views[l->view], strlen(views[l->view]))) return -1;
        if (wm_jbuf_putc(c, b, l->tuple ? '(' : '[')) return -1;
        for (size_t i = 0; i < l->n; i++) {
            if (i && wm_jbuf_put(c, b, ", ", 2)) return -1;
            if (wm_jcharge(c, NULL, 1) || str_or_repr(c, b, l->v[i], 1, depth + 1)) return -1;
        }
        if (l->tuple && l->n == 1 && wm_jbuf_putc(c, b, ',')) return -1;
        if (wm_jbuf_putc(c, b, l->tuple ? ')' : ']')) return -1;
        return l->view > 0 && l->view < 4 ? wm_jbuf_putc(c, b, ')') : 0;
    }
    case JV_DICT: {
        const jdict *d = v.u.d;
        if (d->kind == JD_NS && wm_jbuf_put(c, b, "<Namespace ", 11)) return -1;
        if (d->kind == JD_LOOP) {
            int64_t len = 0;
            jv lv;
            if (wm_jdict_get(c, d, "length", 6, &lv) && lv.t == JV_INT) len = lv.u.i;
            snprintf(num, sizeof num, "<LoopContext %lld/%lld>", (long long)d->index0 + 1, (long long)len);
            return wm_jbuf_put(c, b, num, strlen(num));
        }
        if (wm_jbuf_putc(c, b, '{')) return -1;
        for (size_t i = 0; i < d->n; i++) {
            if (i && wm_jbuf_put(c, b, ", ", 2)) return -1;
            if (wm_jcharge(c, NULL, 1) || str_or_repr(c, b, d->k[i], 1, depth + 1) || wm_jbuf_put(c, b, ": ", 2) ||
                str_or_repr(c, b, d->v[i], 1, depth + 1))
                return -1;
        }
        if (wm_jbuf_putc(c, b, '}')) return -1;
        return d->kind == JD_NS ? wm_jbuf_putc(c, b, '>') : 0;
    }
    case JV_FUNC:
        snprintf(num, sizeof num, "<function %.40s>", v.u.fn->name);
        return wm_jbuf_put(c, b, num, strlen(num));
    case JV_METHOD:
        snprintf(num, sizeof num, "<built-in method %.40s>", v.u.m->name);
        return wm_jbuf_put(c, b, num, strlen(num));
    case JV_MACRO: return wm_jbuf_put(c, b, "<Macro>", 7);
    }
    return 0;
}

int wm_jv_str(jctx *c, jbuf *b, jv v) { return str_or_repr(c, b, v, 0, 0); }
int wm_jv_repr(jctx *c, jbuf *b, jv v) { return str_or_repr(c, b, v, 1, 0); }

int wm_jv_tostr(jctx *c, jv v, jv *out) {
    if (v.t == JV_STR) {
        *out = v;
        return 0;
    }
    jbuf b = {0};
    if (wm_jv_str(c, &b, v)) {
        wm_jbuf_free(&b);
        return -1;
    }
    return wm_jbuf_to_str(c, &b, out);
}
