/*
 * safetensors.c - reader (mmap, zero-copy, header-only validation) and
 * writer (temp file + rename) of safetensors files and sharded checkpoints.
 *
 * The header is parsed by a small dedicated JSON parser instead of cJSON:
 * the format's grammar is fixed (an object of objects, at most 3 levels),
 * offsets and dims need exact 64-bit integers (cJSON keeps doubles), cJSON
 * treats NUL and control bytes as whitespace, and a DOM of a 100 MB hostile
 * header would cost gigabytes. The parser streams straight into compact
 * tensor records; any value nested where the format has a scalar is
 * refused on sight, so the depth is bounded by construction. The index
 * file's free-form "metadata" is skipped with an explicit depth cap.
 */
#define _GNU_SOURCE
#include "hf/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/arena.h"
#include "core/error.h"
#include "core/output.h"
#include "core/file.h"

/* ---- dtypes ---- */

static const struct {
    const char *name;
    int bits;
    int32_t onnx;
    size_t align;
} st_dtypes[WM_ST_DTYPE_COUNT] = {
    [WM_ST_INVALID] = {"invalid", 0, WM_DT_UNDEFINED, 1},
#define X(e, n, b, o, al) [WM_ST_##e] = {n, b, o, al},
    WM_ST_DTYPE_LIST(X)
#undef X
};

static int dtype_ok(wm_st_dtype dt) { return dt > WM_ST_INVALID && dt < WM_ST_DTYPE_COUNT; }

const char *wm_st_dtype_name(wm_st_dtype dt) { return dtype_ok(dt) ? st_dtypes[dt].name : "invalid"; }
int wm_st_dtype_bits(wm_st_dtype dt) { return dtype_ok(dt) ? st_dtypes[dt].bits : 0; }
int32_t wm_st_dtype_onnx(wm_st_dtype dt) { return dtype_ok(dt) ? st_dtypes[dt].onnx : WM_DT_UNDEFINED; }
size_t wm_st_dtype_align(wm_st_dtype dt) { return dtype_ok(dt) ? st_dtypes[dt].align : 1; }

wm_st_dtype wm_st_dtype_from_name(const char *s, size_t n) {
    for (int i = 1; i < WM_ST_DTYPE_COUNT; i++)
        if (strlen(st_dtypes[i].name) == n && memcmp(st_dtypes[i].name, s, n) == 0) return (wm_st_dtype)i;
    return WM_ST_INVALID;
}

/* ---- the handle ---- */

struct wm_st_file {
    wm_arena arena;              /* every name, shape, string and array below */
    wm_map *maps;                /* one per mapped file (none for a buffer) */
    size_t n_maps;
    const char **shards;         /* label of each shard, as opened */
    size_t n_shards;
    wm_st_tensor *tensors;       /* sorted by name once open */
    size_t n_tensors;
    wm_st_kv *meta;
    size_t n_meta;
    void (*owner_free)(void *); /* wm_st_open_virtual: what provides the tensors */
    void *owner;
};

/* A new empty handle (calloc'ed, with its arena) owned by the caller (wm_st_close); NULL on OOM. */
static wm_st_file *file_new(void) {
    wm_st_file *f = calloc(1, sizeof *f);
    if (f) wm_arena_init(&f->arena);
    return f;
}

void wm_st_close(wm_st_file *f) {
    if (!f) return;
    for (size_t i = 0; i < f->n_maps; i++) wm_unmap(&f->maps[i]);
    wm_arena_free(&f->arena);
    if (f->owner_free) f->owner_free(f->owner);
    free(f);
}

size_t wm_st_count(const wm_st_file *f) { return f->n_tensors; }

const wm_st_tensor *wm_st_get(const wm_st_file *f, size_t i) {
    return i < f->n_tensors ? &f->tensors[i] : NULL;
}

const wm_st_tensor *wm_st_find(const wm_st_file *f, const char *name) {
    size_t lo = 0, hi = f->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->tensors[mid].name, name);
        if (c == 0) return &f->tensors[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

size_t wm_st_meta_count(const wm_st_file *f) { return f->n_meta; }

const wm_st_kv *wm_st_meta_at(const wm_st_file *f, size_t i) { return i < f->n_meta ? &f->meta[i] : NULL; }

const char *wm_st_meta_get(const wm_st_file *f, const char *key) {
    for (size_t i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta[i].key, key) == 0) return f->meta[i].value;
    return NULL;
}

size_t wm_st_shard_count(const wm_st_file *f) { return f->n_shards; }

const char *wm_st_shard_path(const wm_st_file *f, size_t i) { return i < f->n_shards ? f->shards[i] : NULL; }

int wm_st_is_aligned(const wm_st_tensor *t) {
    return ((uintptr_t)t->data % wm_st_dtype_align(t->dtype)) == 0;
}

/* ---- UTF-8 ---- */

/* 1 when s[0..n) is well-formed UTF-8 (no overlongs, surrogates or > U+10FFFF); else *bad = offset. */
static int utf8_valid(const uint8_t *s, size_t n, size_t *bad) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        uint32_t cp, min;
        if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F, min = 0x80;
        else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F, min = 0x800;
        else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07, min = 0x10000;
        else break;
        if (n - i < len) break;
        size_t k = 1;
        for (; k < len && (s[i + k] & 0xC0) == 0x80; k++) cp = (cp << 6) | (s[i + k] & 0x3F);
        if (k < len || cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) break;
        i += len;
    }
    if (i < n) *bad = i;
    return i == n;
}

/* ---- the JSON parser (header and index) ---- */

typedef struct st_parser {
    const uint8_t *start, *p, *end; /* the JSON text */
    size_t base;                    /* file offset of start (8 for a header): messages give file offsets */
    char *str;                      /* last string read (decoded, NUL-terminated); malloc'ed scratch */
    size_t str_len, str_cap;
    char ctx[256];                  /* "tensor 'x'" ...: prefixed to every message */
    wm_error *err;
} st_parser;

static wm_status perr(st_parser *ps, const char *fmt, ...) WM_PRINTF(2, 3);
static wm_status perr(st_parser *ps, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return wm_err(ps->err, WM_ERR_INPUT, "%s%s%s", ps->ctx, ps->ctx[0] ? ": " : "", msg);
}

static size_t at(const st_parser *ps) { return ps->base + (size_t)(ps->p - ps->start); }

static void skip_ws(st_parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) ps->p++;
}

static int peek(st_parser *ps) {
    skip_ws(ps);
    return ps->p < ps->end ? *ps->p : -1;
}

static int is_container(int c) { return c == '{' || c == '['; }

/* What the next token looks like, for messages. */
static const char *describe(st_parser *ps, char *buf, size_t n) {
    int c = peek(ps);
    if (c < 0) return "the end of the text";
    switch (c) {
    case '{': return "an object";
    case '[': return "an array";
    case '"': return "a string";
    case 't':
    case 'f': return "a boolean";
    case 'n': return "null";
    default: break;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return "a number";
    if (c > 0x20 && c < 0x7f) snprintf(buf, n, "'%c'", c);
    else snprintf(buf, n, "byte 0x%02x", (unsigned)c);
    return buf;
}

/* "expected X at byte N, found Y"; a container where a scalar belongs is a nesting error. */
static wm_status unexpected(st_parser *ps, const char *expected, int scalar) {
    char b[16];
    int c = peek(ps);
    const char *found = describe(ps, b, sizeof b);
    return perr(ps, "expected %s at byte %zu, found %s%s", expected, at(ps), found,
                scalar && is_container(c) ? " (nested deeper than the format allows)" : "");
}

static wm_status expect_char(st_parser *ps, char ch, const char *expected) {
    if (peek(ps) != ch) return unexpected(ps, expected, 0);
    ps->p++;
    return WM_OK;
}

static int hex4(const uint8_t *p, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int c = p[i], d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') d = (c | 0x20) - 'a' + 10;
        else return 0;
        v = v * 16 + (uint32_t)d;
    }
    *out = v;
    return 1;
}

/*
 * Reads one JSON string into ps->str (valid until the next call). The text
 * was checked as UTF-8 already; escapes are decoded, lone surrogates and
 * \u0000 refused (names are C strings), raw control bytes refused.
 */
static wm_status read_string(st_parser *ps, const char *expected) {
    if (peek(ps) != '"') return unexpected(ps, expected, 1);
    const uint8_t *s = ++ps->p, *q = s;
    while (q < ps->end && *q != '"') {
        if (*q < 0x20)
            return perr(ps, "control byte 0x%02x inside a string at byte %zu", *q, ps->base + (size_t)(q - ps->start));
        if (*q == '\\' && ps->end - q < 2) {
            q = ps->end;
            break;
        }
        q += (*q == '\\') ? 2 : 1;
    }
    if (q >= ps->end)
        return perr(ps, "unterminated string starting at byte %zu", ps->base + (size_t)(s - 1 - ps->start));
    size_t raw = (size_t)(q - s);
    if (raw + 1 > ps->str_cap) {
        size_t cap = ps->str_cap ? ps->str_cap : 64;
        while (cap < raw + 1) cap *= 2;
        char *n = realloc(ps->str, cap);
        if (!n) return wm_err(ps->err, WM_ERR_NOMEM, "out of memory reading a %zu-byte string", raw);
        ps->str = n;
        ps->str_cap = cap;
    }
    char *o = ps->str;
    for (const uint8_t *i = s; i < q;) {
        if (*i != '\\') {
            *o++ = (char)*i++;
            continue;
        }
        size_t off = ps->base + (size_t)(i - ps->start);
        uint8_t e = i[1];
        i += 2;
        switch (e) {
        case '"': *o++ = '"'; continue;
        case '\\': *o++ = '\\'; continue;
        case '/': *o++ = '/'; continue;
        case 'b': *o++ = '\b'; continue;
        case 'f': *o++ = '\f'; continue;
        case 'n': *o++ = '\n'; continue;
        case 'r': *o++ = '\r'; continue;
        case 't': *o++ = '\t'; continue;
        case 'u': break;
        default: return perr(ps, "invalid escape in a string at byte %zu", off);
        }
        uint32_t cp, lo;
        if (q - i < 4 || !hex4(i, &cp)) return perr(ps, "invalid \\u escape at byte %zu", off);
        i += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (q - i < 6 || i[0] != '\\' || i[1] != 'u' || !hex4(i + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                return perr(ps, "unpaired \\u surrogate at byte %zu", off);
            i += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return perr(ps, "unpaired \\u surrogate at byte %zu", off);
        } else if (cp == 0) {
            return perr(ps, "\\u0000 (NUL) inside a string at byte %zu", off);
        }
        if (cp < 0x80) {
            *o++ = (char)cp;
        } else if (cp < 0x800) {
            *o++ = (char)(0xC0 | (cp >> 6));
            *o++ = (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            *o++ = (char)(0xE0 | (cp >> 12));
            *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
            *o++ = (char)(0x80 | (cp & 0x3F));
        } else {
            *o++ = (char)(0xF0 | (cp >> 18));
            *o++ = (char)(0x80 | ((cp >> 12) & 0x3F));
            *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
            *o++ = (char)(0x80 | (cp & 0x3F));
        }
    }
    *o = 0;
    ps->str_len = (size_t)(o - ps->str);
    ps->p = q + 1;
    return WM_OK;
}

static int str_is(const st_parser *ps, const char *lit) {
    return ps->str_len == strlen(lit) && memcmp(ps->str, lit, ps->str_len) == 0;
}

/* Reads a non-negative JSON integer (exact, 64-bit). what/idx name it in messages. */
static wm_status read_uint(st_parser *ps, uint64_t *v, const char *what, size_t idx) {
    int c = peek(ps);
    if (c == '-') return perr(ps, "%s[%zu] is negative", what, idx);
    if (c < '0' || c > '9') {
        char e[80];
        snprintf(e, sizeof e, "an integer in %s", what);
        return unexpected(ps, e, 1);
    }
    if (c == '0' && ps->p + 1 < ps->end && ps->p[1] >= '0' && ps->p[1] <= '9')
        return perr(ps, "%s[%zu] has a leading zero", what, idx);
    uint64_t x = 0;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        uint64_t d = (uint64_t)(*ps->p - '0');
        if (x > (UINT64_MAX - d) / 10) return perr(ps, "%s[%zu] is too large for 64 bits", what, idx);
        x = x * 10 + d;
        ps->p++;
    }
    if (ps->p < ps->end && (*ps->p == '.' || *ps->p == 'e' || *ps->p == 'E'))
        return perr(ps, "%s[%zu] is not an integer (fraction or exponent)", what, idx);
    *v = x;
    return WM_OK;
}

/* Reads [u, u, ...] of at most cap integers into v. */
static wm_status read_uint_array(st_parser *ps, uint64_t *v, size_t cap, size_t *n, const char *what) {
    char e[80];
    snprintf(e, sizeof e, "an array for %s", what);
    if (peek(ps) != '[') return unexpected(ps, e, 1);
    ps->p++;
    *n = 0;
    if (peek(ps) == ']') {
        ps->p++;
        return WM_OK;
    }
    for (;;) {
        if (*n == cap) return perr(ps, "%s has more than %zu elements", what, cap);
        wm_status s = read_uint(ps, &v[*n], what, *n);
        if (s) return s;
        (*n)++;
        int c = peek(ps);
        if (c == ']') break;
        if (c != ',') return unexpected(ps, "',' or ']'", 0);
        ps->p++;
    }
    ps->p++;
    return WM_OK;
}

/* Skips any JSON value (index metadata), nesting at most WM_ST_MAX_DEPTH levels. */
static wm_status skip_value(st_parser *ps, int depth) {
    int c = peek(ps);
    if (c == '"') return read_string(ps, "a string");
    if (c == '{' || c == '[') {
        if (depth >= WM_ST_MAX_DEPTH)
            return perr(ps, "JSON nests deeper than %d levels at byte %zu", WM_ST_MAX_DEPTH, at(ps));
        int close = c == '{' ? '}' : ']';
        ps->p++;
        if (peek(ps) == close) {
            ps->p++;
            return WM_OK;
        }
        for (;;) {
            wm_status s;
            if (c == '{') {
                if ((s = read_string(ps, "a key string"))) return s;
                if ((s = expect_char(ps, ':', "':'"))) return s;
            }
            if ((s = skip_value(ps, depth + 1))) return s;
            int d = peek(ps);
            if (d == close) break;
            if (d != ',') return unexpected(ps, c == '{' ? "',' or '}'" : "',' or ']'", 0);
            ps->p++;
        }
        ps->p++;
        return WM_OK;
    }
    static const char *const lits[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(lits[i]);
        if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, lits[i], n) == 0) {
            ps->p += n;
            return WM_OK;
        }
    }
    if (c == '-' || (c >= '0' && c <= '9')) { /* JSON number grammar */
        if (*ps->p == '-') ps->p++;
        const uint8_t *d = ps->p;
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
        if (ps->p == d || (*d == '0' && ps->p - d > 1)) return perr(ps, "malformed number at byte %zu", at(ps));
        if (ps->p < ps->end && *ps->p == '.') {
            d = ++ps->p;
            while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
            if (ps->p == d) return perr(ps, "malformed number at byte %zu", at(ps));
        }
        if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
            ps->p++;
            if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-')) ps->p++;
            d = ps->p;
            while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
            if (ps->p == d) return perr(ps, "malformed number at byte %zu", at(ps));
        }
        return WM_OK;
    }
    return unexpected(ps, "a JSON value", 0);
}

/* ---- one safetensors header ---- */

static void fmt_shape(char *buf, size_t n, const uint64_t *dims, size_t rank) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (size_t i = 0; i < rank && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%llu", i ? ", " : "", (unsigned long long)dims[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

enum { KEY_DTYPE, KEY_SHAPE, KEY_OFFSETS };

/*
 * Parses one tensor entry object into t (name already set) and checks its
 * size against data_size; t->shape is allocated in arena a.
 */
static wm_status parse_tensor(st_parser *ps, wm_arena *a, wm_st_tensor *t, uint64_t data_size) {
    static const char *const keys[] = {"dtype", "shape", "data_offsets"};
    int seen[3] = {0, 0, 0};
    uint64_t dims[WM_ST_MAX_RANK], off[2] = {0, 0};
    size_t rank = 0, n_off = 0;
    wm_status s;
    if (peek(ps) != '{') return unexpected(ps, "an object {dtype, shape, data_offsets}", 0);
    ps->p++;
    if (peek(ps) == '}') {
        ps->p++;
    } else {
        for (;;) {
            if ((s = read_string(ps, "a key string"))) return s;
            int k = -1;
            for (int i = 0; i < 3; i++)
                if (str_is(ps, keys[i])) k = i;
            if (k < 0)
                return perr(ps, "unknown key '%.80s' (only dtype, shape and data_offsets are allowed)", ps->str);
            if (seen[k]) return perr(ps, "duplicate key '%s'", keys[k]);
            seen[k] = 1;
            if ((s = expect_char(ps, ':', "':'"))) return s;
            if (k == KEY_DTYPE) {
                if ((s = read_string(ps, "a dtype string"))) return s;
                t->dtype = wm_st_dtype_from_name(ps->str, ps->str_len);
                if (!t->dtype) return perr(ps, "unknown dtype '%.40s'", ps->str);
            } else if (k == KEY_SHAPE) {
                if ((s = read_uint_array(ps, dims, WM_ST_MAX_RANK, &rank, "shape"))) return s;
            } else {
                if ((s = read_uint_array(ps, off, 2, &n_off, "data_offsets"))) return s;
                if (n_off != 2) return perr(ps, "data_offsets must be [begin, end], found %zu elements", n_off);
            }
            int c = peek(ps);
            if (c == '}') break;
            if (c != ',') return unexpected(ps, "',' or '}'", 0);
            ps->p++;
        }
        ps->p++;
    }
    for (int i = 0; i < 3; i++)
        if (!seen[i]) return perr(ps, "missing key '%s'", keys[i]);

    char shape[160];
    fmt_shape(shape, sizeof shape, dims, rank);
    uint64_t numel = 1, nbits;
    for (size_t i = 0; i < rank; i++) {
        if (dims[i] > (uint64_t)INT64_MAX)
            return perr(ps, "shape dimension %zu (%llu) is too large", i, (unsigned long long)dims[i]);
        if (!wm_mul_u64(numel, dims[i], &numel))
            return perr(ps, "shape %s: the element count overflows 64 bits", shape);
    }
    const char *dn = wm_st_dtype_name(t->dtype);
    if (!wm_mul_u64(numel, (uint64_t)wm_st_dtype_bits(t->dtype), &nbits))
        return perr(ps, "shape %s of %s: the size overflows 64 bits", shape, dn);
    if (nbits % 8)
        return perr(ps, "shape %s of %s holds %llu elements, not a whole number of bytes", shape, dn,
                    (unsigned long long)numel);
    uint64_t nbytes = nbits / 8;
    if (off[0] > off[1])
        return perr(ps, "data_offsets [%llu, %llu] end before they begin", (unsigned long long)off[0],
                    (unsigned long long)off[1]);
    if (off[1] > data_size)
        return perr(ps, "data_offsets [%llu, %llu] run past the end of the data section (%llu bytes)",
                    (unsigned long long)off[0], (unsigned long long)off[1], (unsigned long long)data_size);
    if (off[1] - off[0] != nbytes)
        return perr(ps, "data_offsets [%llu, %llu] hold %llu bytes but shape %s of %s needs %llu",
                    (unsigned long long)off[0], (unsigned long long)off[1],
                    (unsigned long long)(off[1] - off[0]), shape, dn, (unsigned long long)nbytes);
    t->rank = rank;
    if (rank) {
        int64_t *d = wm_arena_alloc(a, rank * sizeof *d);
        if (!d) return wm_err(ps->err, WM_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < rank; i++) d[i] = (int64_t)dims[i];
        t->shape = d;
    }
    t->numel = numel;
    t->nbytes = nbytes;
    t->offset = off[0];
    return WM_OK;
}

/* Parses "__metadata__": an object of string values (or null) appended to f->meta. */
static wm_status parse_metadata(st_parser *ps, wm_st_file *f) {
    char b[16];
    snprintf(ps->ctx, sizeof ps->ctx, "__metadata__");
    int c = peek(ps);
    if (c == 'n' && ps->end - ps->p >= 4 && memcmp(ps->p, "null", 4) == 0) {
        ps->p += 4;
        return WM_OK;
    }
    if (c != '{') return perr(ps, "must be an object of string to string, found %s", describe(ps, b, sizeof b));
    ps->p++;
    if (peek(ps) == '}') {
        ps->p++;
        return WM_OK;
    }
    for (;;) {
        wm_status s;
        if ((s = read_string(ps, "a key string"))) return s;
        char *key = wm_arena_strndup(&f->arena, ps->str, ps->str_len);
        if (!key) return wm_err(ps->err, WM_ERR_NOMEM, "out of memory");
        if ((s = expect_char(ps, ':', "':'"))) return s;
        if (peek(ps) != '"')
            return perr(ps, "the value of '%.100s' must be a string, found %s%s", key, describe(ps, b, sizeof b),
                        is_container(peek(ps)) ? " (nested deeper than the format allows)" : "");
        if ((s = read_string(ps, "a string"))) return s;
        wm_st_kv *kv = wm_vec_push(&f->arena, &f->meta, &f->n_meta, sizeof *kv);
        if (!kv || !(kv->value = wm_arena_strndup(&f->arena, ps->str, ps->str_len)))
            return wm_err(ps->err, WM_ERR_NOMEM, "out of memory");
        kv->key = key;
        c = peek(ps);
        if (c == '}') break;
        if (c != ',') return unexpected(ps, "',' or '}'", 0);
        ps->p++;
    }
    ps->p++;
    return WM_OK;
}

/* Parses the header object, appending tensors and metadata to f. */
static wm_status parse_header(st_parser *ps, wm_st_file *f, uint32_t shard, uint64_t data_size) {
    int seen_meta = 0;
    wm_status s;
    ps->p++; /* '{', checked by the caller */
    if (peek(ps) == '}') {
        ps->p++;
    } else {
        for (;;) {
            ps->ctx[0] = 0;
            if ((s = read_string(ps, "a tensor name string"))) return s;
            if (str_is(ps, "__metadata__")) {
                if (seen_meta) return perr(ps, "duplicate key '__metadata__'");
                seen_meta = 1;
                if ((s = expect_char(ps, ':', "':'"))) return s;
                if ((s = parse_metadata(ps, f))) return s;
            } else {
                wm_st_tensor *t = wm_vec_push(&f->arena, &f->tensors, &f->n_tensors, sizeof *t);
                if (!t || !(t->name = wm_arena_strndup(&f->arena, ps->str, ps->str_len)))
                    return wm_err(ps->err, WM_ERR_NOMEM, "out of memory");
                t->shard = shard;
                snprintf(ps->ctx, sizeof ps->ctx, "tensor '%.200s'", t->name);
                if ((s = expect_char(ps, ':', "':'"))) return s;
                if ((s = parse_tensor(ps, &f->arena, t, data_size))) return s;
            }
            ps->ctx[0] = 0;
            int c = peek(ps);
            if (c == '}') break;
            if (c != ',') return unexpected(ps, "',' or '}'", 0);
            ps->p++;
        }
        ps->p++;
    }
    ps->ctx[0] = 0;
    for (; ps->p < ps->end; ps->p++) /* padding: JSON whitespace only (the writer pads with spaces) */
        if (*ps->p != ' ' && *ps->p != '\t' && *ps->p != '\n' && *ps->p != '\r')
            return perr(ps, "unexpected byte 0x%02x at byte %zu after the header's closing '}'", *ps->p, at(ps));
    return WM_OK;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(((const wm_st_tensor *)a)->name, ((const wm_st_tensor *)b)->name);
}

static int cmp_offset(const void *a, const void *b) {
    const wm_st_tensor *x = *(const wm_st_tensor *const *)a, *y = *(const wm_st_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_kv_ptr(const void *a, const void *b) {
    return strcmp((*(const wm_st_kv *const *)a)->key, (*(const wm_st_kv *const *)b)->key);
}

/* Rejects repeated keys in meta[m0..n); drops keys already present in meta[0..m0) (earlier shards). */
static wm_status check_meta(wm_st_file *f, size_t m0, wm_error *err) {
    size_t n = f->n_meta;
    if (n == m0) return WM_OK;
    const wm_st_kv **v = malloc(n * sizeof *v);
    if (!v) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n - m0; i++) v[i] = &f->meta[m0 + i];
    qsort(v, n - m0, sizeof *v, cmp_kv_ptr);
    for (size_t i = 1; i < n - m0; i++)
        if (strcmp(v[i - 1]->key, v[i]->key) == 0) {
            wm_status s = wm_err(err, WM_ERR_INPUT, "__metadata__: duplicate key '%.200s'", v[i]->key);
            free(v);
            return s;
        }
    if (m0) { /* union with the earlier shards: first value wins */
        for (size_t i = 0; i < m0; i++) v[i] = &f->meta[i];
        qsort(v, m0, sizeof *v, cmp_kv_ptr);
        size_t w = m0;
        for (size_t i = m0; i < n; i++) {
            const wm_st_kv *k = &f->meta[i];
            if (!bsearch(&k, v, m0, sizeof *v, cmp_kv_ptr)) f->meta[w++] = *k;
        }
        f->n_meta = w;
    }
    free(v);
    return WM_OK;
}

/* Checks f->tensors[t0..n) of one file: unique names, offsets tile [0, data_size) exactly. */
static wm_status check_layout(wm_st_file *f, size_t t0, uint64_t data_size, const uint8_t *data, wm_error *err) {
    size_t n = f->n_tensors - t0;
    wm_st_tensor *t = n ? f->tensors + t0 : NULL;
    if (n > 1) qsort(t, n, sizeof *t, cmp_name);
    for (size_t i = 1; i < n; i++)
        if (strcmp(t[i - 1].name, t[i].name) == 0)
            return wm_err(err, WM_ERR_INPUT, "duplicate tensor name '%.200s'", t[i].name);
    const wm_st_tensor **v = n ? malloc(n * sizeof *v) : NULL;
    if (n && !v) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) v[i] = &t[i];
    if (n > 1) qsort(v, n, sizeof *v, cmp_offset);
    uint64_t pos = 0;
    wm_status s = WM_OK;
    for (size_t i = 0; i < n && !s; i++) {
        const wm_st_tensor *x = v[i];
        unsigned long long b = x->offset, e = x->offset + x->nbytes;
        if (b < pos)
            s = wm_err(err, WM_ERR_INPUT,
                       "tensor '%.200s': data_offsets [%llu, %llu] overlap tensor '%.200s', which ends at %llu",
                       x->name, b, e, v[i - 1]->name, (unsigned long long)pos);
        else if (b > pos)
            s = wm_err(err, WM_ERR_INPUT,
                       "tensor '%.200s': data_offsets [%llu, %llu] leave a gap of %llu bytes after %s%.200s%s (at %llu)",
                       x->name, b, e, b - pos, i ? "tensor '" : "the start of the data section",
                       i ? v[i - 1]->name : "", i ? "'" : "", (unsigned long long)pos);
        pos = e;
    }
    if (!s && pos != data_size)
        s = wm_err(err, WM_ERR_INPUT,
                   "%llu trailing bytes after the last tensor's data (tensors end at %llu, the data section holds %llu)",
                   (unsigned long long)(data_size - pos), (unsigned long long)pos, (unsigned long long)data_size);
    free(v);
    if (s) return s;
    for (size_t i = 0; i < n; i++) t[i].data = data + t[i].offset;
    return WM_OK;
}

/* Parses one safetensors image buf[0..size) as shard number `shard`, appending to f. */
static wm_status parse_one(wm_st_file *f, const uint8_t *buf, size_t size, uint32_t shard, const char *label,
                           wm_error *err) {
    wm_status s = WM_OK;
    st_parser ps = {0};
    ps.err = err;
    size_t t0 = f->n_tensors, m0 = f->n_meta, bad = 0;
    if (size < 8) {
        s = wm_err(err, WM_ERR_INPUT, "file too small: %zu bytes, less than the 8-byte header length", size);
        goto done;
    }
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | buf[i];
    if (n > WM_ST_MAX_HEADER) {
        s = wm_err(err, WM_ERR_INPUT, "header length %llu exceeds the limit of %u bytes", (unsigned long long)n,
                   WM_ST_MAX_HEADER);
        goto done;
    }
    if (n > size - 8) {
        s = wm_err(err, WM_ERR_INPUT, "header length %llu runs past the end of the file (%zu bytes)",
                   (unsigned long long)n, size);
        goto done;
    }
    const uint8_t *h = buf + 8;
    if (n == 0 || h[0] != '{') {
        s = n ? wm_err(err, WM_ERR_INPUT, "header does not start with '{' (first byte 0x%02x)", h[0])
              : wm_err(err, WM_ERR_INPUT, "header is empty; it must start with '{'");
        goto done;
    }
    const uint8_t *nul = memchr(h, 0, (size_t)n);
    if (nul) {
        s = wm_err(err, WM_ERR_INPUT, "header has a NUL byte at byte %zu (NUL padding is not allowed; pad with spaces)",
                   8 + (size_t)(nul - h));
        goto done;
    }
    if (!utf8_valid(h, (size_t)n, &bad)) {
        s = wm_err(err, WM_ERR_INPUT, "header is not valid UTF-8 (byte 0x%02x at byte %zu)", h[bad], 8 + bad);
        goto done;
    }
    ps.start = ps.p = h;
    ps.end = h + n;
    ps.base = 8;
    uint64_t data_size = size - 8 - n;
    if ((s = parse_header(&ps, f, shard, data_size))) goto done;
    if ((s = check_meta(f, m0, err))) goto done;
    s = check_layout(f, t0, data_size, h + n, err);
done:
    free(ps.str);
    if (s) wm_err_prefix(err, "%s", label);
    return s;
}

wm_status wm_st_open_buffer(const void *data, size_t size, const char *label, wm_st_file **out, wm_error *err) {
    *out = NULL;
    if (!label) label = "<buffer>";
    wm_st_file *f = file_new();
    if (!f) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    const char **sh = wm_vec_push(&f->arena, &f->shards, &f->n_shards, sizeof *sh);
    if (!sh || !(*sh = wm_arena_strdup(&f->arena, label))) {
        wm_st_close(f);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    static const uint8_t empty[1];
    wm_status s = parse_one(f, data ? data : empty, data ? size : 0, 0, label, err);
    if (s) {
        wm_st_close(f);
        return s;
    }
    *out = f;
    return WM_OK;
}

wm_status wm_st_open_virtual(const wm_st_tensor *t, size_t n, const char *label, void (*owner_free)(void *),
                             void *owner, wm_st_file **out, wm_error *err) {
    *out = NULL;
    wm_st_file *f = file_new();
    if (!f) {
        if (owner_free) owner_free(owner);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    f->owner_free = owner_free;
    f->owner = owner;
    if (!label) label = "<tensors>";
    const char **sh = wm_vec_push(&f->arena, &f->shards, &f->n_shards, sizeof *sh);
    f->tensors = wm_arena_alloc(&f->arena, (n ? n : 1) * sizeof *f->tensors);
    wm_status s = WM_OK;
    if (!sh || !(*sh = wm_arena_strdup(&f->arena, label)) || !f->tensors) s = wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n && !s; i++) {
        wm_st_tensor *d = &f->tensors[i];
        *d = t[i];
        d->shard = 0;
        int64_t *shape = t[i].rank ? wm_arena_alloc(&f->arena, t[i].rank * sizeof *shape) : NULL;
        if (!(d->name = wm_arena_strdup(&f->arena, t[i].name)) || (t[i].rank && !shape)) {
            s = wm_err(err, WM_ERR_NOMEM, "out of memory");
            break;
        }
        if (t[i].rank) memcpy(shape, t[i].shape, t[i].rank * sizeof *shape);
        d->shape = shape;
        f->n_tensors++;
    }
    if (!s) {
        qsort(f->tensors, f->n_tensors, sizeof *f->tensors, cmp_name);
        for (size_t i = 1; i < f->n_tensors && !s; i++)
            if (!strcmp(f->tensors[i].name, f->tensors[i - 1].name))
                s = wm_err(err, WM_ERR_INPUT, "%s: two tensors map to the name '%s'", label, f->tensors[i].name);
    }
    if (s) {
        wm_st_close(f);
        return s;
    }
    *out = f;
    return WM_OK;
}

/* ---- files, folders, shards ---- */

/* 1 when path equals base or lies below it, by component. */
static int inside(const char *base, const char *path) {
    size_t n = strlen(base);
    if (n == 1 && base[0] == '/') return path[0] == '/';
    return strncmp(base, path, n) == 0 && (path[n] == 0 || path[n] == '/');
}

/*
 * Maps path read-only into *m (caller unmaps). With root: the real path
 * (links followed) must lie inside realpath(root), and that resolved path
 * is what gets mapped, without following links.
 */
static wm_status map_checked(const char *path, const char *root, wm_map *m, wm_error *err) {
    char real[PATH_MAX], rroot[PATH_MAX];
    if (!root) return wm_map_file(path, 0, m, err);
    m->data = NULL;
    m->size = 0;
    if (!realpath(root, rroot)) return wm_err(err, WM_ERR_INPUT, "folder '%s': %s", root, strerror(errno));
    if (!realpath(path, real))
        return wm_err(err, errno == ENOENT ? WM_ERR_INPUT : WM_ERR_IO, "%s: %s", path, strerror(errno));
    if (!inside(rroot, real))
        return wm_err(err, WM_ERR_INPUT, "%s resolves to '%s', outside the folder '%s'", path, real, rroot);
    return wm_map_file(real, 1, m, err);
}

/* Maps path (see map_checked) and keeps the mapping in f for its lifetime. */
static wm_status map_shard(wm_st_file *f, const char *path, const char *root, wm_map *m, wm_error *err) {
    wm_status s = map_checked(path, root, m, err);
    if (s) return s;
    wm_map *slot = wm_vec_push(&f->arena, &f->maps, &f->n_maps, sizeof *slot);
    if (!slot) {
        wm_unmap(m);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    *slot = *m;
    return WM_OK;
}

static wm_status add_shard_label(wm_st_file *f, const char *label, wm_error *err) {
    const char **sh = wm_vec_push(&f->arena, &f->shards, &f->n_shards, sizeof *sh);
    if (!sh || !(*sh = wm_arena_strdup(&f->arena, label))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    return WM_OK;
}

static wm_status open_single(wm_st_file *f, const char *path, const char *root, wm_error *err) {
    wm_map m;
    wm_status s = add_shard_label(f, path, err);
    if (!s) s = map_shard(f, path, root, &m, err);
    if (!s) s = parse_one(f, m.data, m.size, 0, path, err);
    return s;
}

typedef struct st_entry {
    const char *name, *file;
    uint32_t shard;
} st_entry;

static int cmp_entry_name(const void *a, const void *b) {
    return strcmp(((const st_entry *)a)->name, ((const st_entry *)b)->name);
}

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Parses the index JSON: fills *ents / *n_ents (the weight_map; array and strings owned by f's arena). */
static wm_status parse_index(st_parser *ps, wm_st_file *f, st_entry **ents, size_t *n_ents) {
    wm_status s;
    int seen_map = 0;
    if ((s = expect_char(ps, '{', "'{'"))) return s;
    if (peek(ps) == '}') {
        ps->p++;
    } else {
        for (;;) {
            ps->ctx[0] = 0;
            if ((s = read_string(ps, "a key string"))) return s;
            int is_map = str_is(ps, "weight_map");
            if ((s = expect_char(ps, ':', "':'"))) return s;
            if (!is_map) {
                if ((s = skip_value(ps, 1))) return s;
            } else {
                if (seen_map) return perr(ps, "duplicate key 'weight_map'");
                seen_map = 1;
                snprintf(ps->ctx, sizeof ps->ctx, "weight_map");
                if (peek(ps) != '{') return unexpected(ps, "an object of tensor name to shard file name", 0);
                ps->p++;
                if (peek(ps) == '}') {
                    ps->p++;
                } else {
                    for (;;) {
                        if ((s = read_string(ps, "a tensor name string"))) return s;
                        st_entry *e = wm_vec_push(&f->arena, ents, n_ents, sizeof *e);
                        if (!e || !(e->name = wm_arena_strndup(&f->arena, ps->str, ps->str_len)))
                            return wm_err(ps->err, WM_ERR_NOMEM, "out of memory");
                        if ((s = expect_char(ps, ':', "':'"))) return s;
                        snprintf(ps->ctx, sizeof ps->ctx, "weight_map: tensor '%.200s'", e->name);
                        if ((s = read_string(ps, "a shard file name string"))) return s;
                        if (!(e->file = wm_arena_strndup(&f->arena, ps->str, ps->str_len)))
                            return wm_err(ps->err, WM_ERR_NOMEM, "out of memory");
                        snprintf(ps->ctx, sizeof ps->ctx, "weight_map");
                        int c = peek(ps);
                        if (c == '}') break;
                        if (c != ',') return unexpected(ps, "',' or '}'", 0);
                        ps->p++;
                    }
                    ps->p++;
                }
            }
            ps->ctx[0] = 0;
            int c = peek(ps);
            if (c == '}') break;
            if (c != ',') return unexpected(ps, "',' or '}'", 0);
            ps->p++;
        }
        ps->p++;
    }
    ps->ctx[0] = 0;
    if (peek(ps) >= 0) return perr(ps, "unexpected data at byte %zu after the closing '}'", at(ps));
    if (!seen_map) return perr(ps, "no \"weight_map\"");
    if (!*n_ents) return perr(ps, "\"weight_map\" is empty");
    return WM_OK;
}

/* A shard name must be a plain file name: no separator, not absolute, not "." or "..". */
static wm_status check_shard_name(const char *name, const char *tensor, wm_error *err) {
    wm_status s = wm_path_check_relative(name, err);
    if (!s && (strchr(name, '/') || strchr(name, '\\')))
        s = wm_err(err, WM_ERR_INPUT, "'%s' is not a plain file name in the index's folder", name);
    if (s) wm_err_prefix(err, "weight_map: tensor '%.200s': shard file name", tensor);
    return s;
}

/*
 * Opens the sharded checkpoint described by the index text (size bytes;
 * label names it in messages): shards are dir/<name>, resolved inside
 * root (NULL: dir). Tensors and metadata go into f.
 */
static wm_status open_index_text(wm_st_file *f, const uint8_t *text, size_t size, const char *label,
                                 const char *dir, const char *root, wm_error *err) {
    const char *shard_root = root ? root : dir;
    st_parser ps = {0};
    ps.err = err;
    st_entry *ents = NULL;
    size_t n_ents = 0, bad = 0;
    const char **files = NULL;
    const char *where = label; /* prefix of any error */
    wm_status s;
    if (size == 0 || size > WM_ST_MAX_HEADER) {
        s = wm_err(err, WM_ERR_INPUT, "index is %zu bytes (expected 1 to %u)", size, WM_ST_MAX_HEADER);
        goto done;
    }
    if (!utf8_valid(text, size, &bad)) {
        s = wm_err(err, WM_ERR_INPUT, "index is not valid UTF-8 (byte 0x%02x at byte %zu)", text[bad], bad);
        goto done;
    }
    ps.start = ps.p = text;
    ps.end = text + size;
    if ((s = parse_index(&ps, f, &ents, &n_ents))) goto done;

    qsort(ents, n_ents, sizeof *ents, cmp_entry_name);
    for (size_t i = 1; i < n_ents; i++)
        if (strcmp(ents[i - 1].name, ents[i].name) == 0) {
            s = wm_err(err, WM_ERR_INPUT, "weight_map: tensor '%.200s' is listed twice", ents[i].name);
            goto done;
        }
    /* the distinct shard names, sorted; each entry learns its shard number */
    files = malloc(n_ents * sizeof *files);
    if (!files) {
        s = wm_err(err, WM_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n_ents; i++) {
        if ((s = check_shard_name(ents[i].file, ents[i].name, err))) goto done;
        files[i] = ents[i].file;
    }
    qsort(files, n_ents, sizeof *files, cmp_str_ptr);
    size_t n_files = 0;
    for (size_t i = 0; i < n_ents; i++)
        if (!n_files || strcmp(files[n_files - 1], files[i]) != 0) files[n_files++] = files[i];
    if (n_files > UINT32_MAX) {
        s = wm_err(err, WM_ERR_INPUT, "too many shards");
        goto done;
    }
    for (size_t i = 0; i < n_ents; i++) {
        const char **hit = bsearch(&ents[i].file, files, n_files, sizeof *files, cmp_str_ptr);
        ents[i].shard = (uint32_t)(hit - files);
    }

    /* map and parse every shard */
    for (size_t k = 0; k < n_files; k++) {
        char path[PATH_MAX];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, files[k]) >= sizeof path) {
            s = wm_err(err, WM_ERR_INPUT, "shard '%.200s': path too long", files[k]);
            goto done;
        }
        wm_map m;
        if ((s = add_shard_label(f, path, err))) goto done;
        where = NULL; /* the shard's own messages name it */
        if ((s = map_shard(f, path, shard_root, &m, err))) goto done;
        if ((s = parse_one(f, m.data, m.size, (uint32_t)k, path, err))) goto done;
    }
    where = label;

    /* the weight map must match what the shards hold, exactly */
    if (f->n_tensors > 1) qsort(f->tensors, f->n_tensors, sizeof *f->tensors, cmp_name);
    for (size_t i = 1; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i - 1].name, f->tensors[i].name) == 0) {
            s = wm_err(err, WM_ERR_INPUT, "tensor '%.200s' is in two shards, '%s' and '%s'", f->tensors[i].name,
                       files[f->tensors[i - 1].shard], files[f->tensors[i].shard]);
            goto done;
        }
    for (size_t i = 0, j = 0; i < f->n_tensors || j < n_ents;) {
        const wm_st_tensor *t = i < f->n_tensors ? &f->tensors[i] : NULL;
        const st_entry *e = j < n_ents ? &ents[j] : NULL;
        int c = !t ? 1 : !e ? -1 : strcmp(t->name, e->name);
        if (c < 0) {
            s = wm_err(err, WM_ERR_INPUT, "shard '%s' holds tensor '%.200s', which the weight_map does not list",
                       files[t->shard], t->name);
            goto done;
        }
        if (c > 0 || t->shard != e->shard) {
            s = wm_err(err, WM_ERR_INPUT, "weight_map: tensor '%.200s' is missing from its shard '%s'%s%s%s", e->name,
                       e->file, c ? "" : " (it is in '", c ? "" : files[t->shard], c ? "" : "')");
            goto done;
        }
        i++, j++;
    }
done:
    if (s && where) wm_err_prefix(err, "%s", where);
    free(files);
    free(ps.str);
    return s;
}

static wm_status open_index(wm_st_file *f, const char *index_path, const char *root, wm_error *err) {
    char dir[PATH_MAX];
    wm_path_dirname(index_path, dir, sizeof dir);
    wm_map im;
    wm_status s = map_checked(index_path, root, &im, err);
    if (s) return s;
    s = open_index_text(f, im.data, im.size, index_path, dir, root, err);
    wm_unmap(&im);
    return s;
}

wm_status wm_st_open_index_buffer(const void *text, size_t size, const char *label, const char *dir,
                                  const wm_st_open_opts *opts, wm_st_file **out, wm_error *err) {
    *out = NULL;
    wm_st_file *f = file_new();
    if (!f) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    wm_status s = open_index_text(f, text, text ? size : 0, label ? label : "<index>", dir,
                                  opts ? opts->root : NULL, err);
    if (s) {
        wm_st_close(f);
        return s;
    }
    *out = f;
    return WM_OK;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

wm_status wm_st_open(const char *path, const wm_st_open_opts *opts, wm_st_file **out, wm_error *err) {
    *out = NULL;
    const char *root = opts ? opts->root : NULL;
    struct stat st;
    if (stat(path, &st) != 0)
        return wm_err(err, errno == ENOENT || errno == ENOTDIR ? WM_ERR_INPUT : WM_ERR_IO, "%s: cannot open: %s",
                      path, strerror(errno));
    wm_st_file *f = file_new();
    if (!f) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    wm_status s;
    if (S_ISDIR(st.st_mode)) {
        char p[PATH_MAX];
        struct stat st2;
        int index = 0;
        snprintf(p, sizeof p, "%s/model.safetensors.index.json", path);
        if (stat(p, &st2) == 0) {
            index = 1;
        } else {
            snprintf(p, sizeof p, "%s/model.safetensors", path);
            if (stat(p, &st2) != 0) {
                wm_st_close(f);
                return wm_err(err, WM_ERR_INPUT,
                              "%s: folder holds neither model.safetensors.index.json nor model.safetensors", path);
            }
        }
        s = index ? open_index(f, p, root, err) : open_single(f, p, root, err);
    } else if (ends_with(path, ".json")) {
        s = open_index(f, path, root, err);
    } else {
        s = open_single(f, path, root, err);
    }
    if (s) {
        wm_st_close(f);
        return s;
    }
    *out = f;
    return WM_OK;
}

/* ---- writer ---- */

typedef struct st_buf {
    char *p;
    size_t n, cap;
    int oom;
} st_buf;

static void buf_put(st_buf *b, const void *s, size_t n) {
    if (b->oom) return;
    if (n > SIZE_MAX - b->n - 1) {
        b->oom = 1;
        return;
    }
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void buf_str(st_buf *b, const char *s) { buf_put(b, s, strlen(s)); }

static void buf_u64(st_buf *b, uint64_t v) {
    char t[24];
    buf_put(b, t, (size_t)snprintf(t, sizeof t, "%llu", (unsigned long long)v));
}

/* A JSON string literal; s is valid UTF-8 (checked by the caller). */
static void buf_json_str(st_buf *b, const char *s) {
    buf_put(b, "\"", 1);
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            buf_put(b, e, 2);
        } else if (c < 0x20) {
            char e[8];
            buf_put(b, e, (size_t)snprintf(e, sizeof e, "\\u%04x", c));
        } else {
            buf_put(b, p, 1);
        }
    }
    buf_put(b, "\"", 1);
}

static int utf8_str(const char *s) {
    size_t bad;
    return utf8_valid((const uint8_t *)s, strlen(s), &bad);
}

/* Descending alignment, then name: every tensor stays aligned after an 8-aligned header. */
static int cmp_write_order(const void *a, const void *b) {
    const wm_st_tensor *x = *(const wm_st_tensor *const *)a, *y = *(const wm_st_tensor *const *)b;
    size_t ax = wm_st_dtype_align(x->dtype), ay = wm_st_dtype_align(y->dtype);
    if (ax != ay) return ax > ay ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_tensor_ptr_name(const void *a, const void *b) {
    return strcmp((*(const wm_st_tensor *const *)a)->name, (*(const wm_st_tensor *const *)b)->name);
}

/*
 * Validates the tensors and metadata and builds the padded header in *hdr
 * (hdr->p malloc'ed, caller frees, also on failure), the write order in
 * *order (malloc'ed array of n pointers into t) and each tensor's byte
 * count in *nbytes_out (malloc'ed, indexed like t); the caller frees both
 * on success (both NULL on failure). *data_bytes: total data size.
 */
static wm_status prepare(const wm_st_tensor *t, size_t n, const wm_st_kv *meta, size_t n_meta, st_buf *hdr,
                         const wm_st_tensor ***order, uint64_t **nbytes_out, uint64_t *data_bytes, wm_error *err) {
    wm_status s = WM_OK;
    const wm_st_tensor **v = malloc((n ? n : 1) * sizeof *v);
    uint64_t *nb = malloc((n ? n : 1) * sizeof *nb);
    const wm_st_kv **mv = malloc((n_meta ? n_meta : 1) * sizeof *mv);
    *order = NULL;
    *nbytes_out = NULL;
    if (!v || !nb || !mv) {
        s = wm_err(err, WM_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n_meta; i++) {
        if (!meta[i].key || !meta[i].value || !utf8_str(meta[i].key) || !utf8_str(meta[i].value)) {
            s = wm_err(err, WM_ERR_INPUT, "__metadata__ entry %zu: key and value must be UTF-8 strings", i);
            goto done;
        }
        mv[i] = &meta[i];
    }
    qsort(mv, n_meta, sizeof *mv, cmp_kv_ptr);
    for (size_t i = 1; i < n_meta; i++)
        if (strcmp(mv[i - 1]->key, mv[i]->key) == 0) {
            s = wm_err(err, WM_ERR_INPUT, "__metadata__: duplicate key '%.200s'", mv[i]->key);
            goto done;
        }
    for (size_t i = 0; i < n; i++) {
        const wm_st_tensor *x = &t[i];
        if (!x->name || !utf8_str(x->name)) {
            s = wm_err(err, WM_ERR_INPUT, "tensor %zu: the name must be a UTF-8 string", i);
            goto done;
        }
        if (strcmp(x->name, "__metadata__") == 0) {
            s = wm_err(err, WM_ERR_INPUT, "tensor '__metadata__': the name is reserved");
            goto done;
        }
        if (!dtype_ok(x->dtype)) {
            s = wm_err(err, WM_ERR_INPUT, "tensor '%.200s': invalid dtype %d", x->name, (int)x->dtype);
            goto done;
        }
        if (x->rank > WM_ST_MAX_RANK || (x->rank && !x->shape)) {
            s = wm_err(err, WM_ERR_INPUT, "tensor '%.200s': rank %zu without a shape or above %d", x->name, x->rank,
                       WM_ST_MAX_RANK);
            goto done;
        }
        uint64_t numel = 1, bits;
        for (size_t k = 0; k < x->rank; k++)
            if (x->shape[k] < 0 || !wm_mul_u64(numel, (uint64_t)x->shape[k], &numel)) {
                s = wm_err(err, WM_ERR_INPUT,
                           "tensor '%.200s': dimension %zu is negative or the element count overflows", x->name, k);
                goto done;
            }
        if (!wm_mul_u64(numel, (uint64_t)wm_st_dtype_bits(x->dtype), &bits) || bits % 8) {
            s = wm_err(err, WM_ERR_INPUT, "tensor '%.200s': %llu elements of %s are not a whole number of bytes",
                       x->name, (unsigned long long)numel, wm_st_dtype_name(x->dtype));
            goto done;
        }
        nb[i] = bits / 8;
        if (nb[i] && !x->data) {
            s = wm_err(err, WM_ERR_INPUT, "tensor '%.200s': no data", x->name);
            goto done;
        }
        v[i] = x;
    }
    qsort(v, n, sizeof *v, cmp_tensor_ptr_name);
    for (size_t i = 1; i < n; i++)
        if (strcmp(v[i - 1]->name, v[i]->name) == 0) {
            s = wm_err(err, WM_ERR_INPUT, "duplicate tensor name '%.200s'", v[i]->name);
            goto done;
        }
    qsort(v, n, sizeof *v, cmp_write_order);

    buf_put(hdr, "{", 1);
    if (n_meta) {
        buf_str(hdr, "\"__metadata__\":{");
        for (size_t i = 0; i < n_meta; i++) {
            if (i) buf_put(hdr, ",", 1);
            buf_json_str(hdr, meta[i].key);
            buf_put(hdr, ":", 1);
            buf_json_str(hdr, meta[i].value);
        }
        buf_put(hdr, "}", 1);
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const wm_st_tensor *x = v[i];
        uint64_t len = nb[x - t], end;
        if (!wm_add_u64(off, len, &end)) {
            s = wm_err(err, WM_ERR_INPUT, "the tensors' total size overflows 64 bits");
            goto done;
        }
        if (n_meta || i) buf_put(hdr, ",", 1);
        buf_json_str(hdr, x->name);
        buf_str(hdr, ":{\"dtype\":\"");
        buf_str(hdr, wm_st_dtype_name(x->dtype));
        buf_str(hdr, "\",\"shape\":[");
        for (size_t k = 0; k < x->rank; k++) {
            if (k) buf_put(hdr, ",", 1);
            buf_u64(hdr, (uint64_t)x->shape[k]);
        }
        buf_str(hdr, "],\"data_offsets\":[");
        buf_u64(hdr, off);
        buf_put(hdr, ",", 1);
        buf_u64(hdr, end);
        buf_str(hdr, "]}");
        off = end;
    }
    buf_put(hdr, "}", 1);
    while (!hdr->oom && hdr->n % 8) buf_put(hdr, " ", 1);
    if (hdr->oom) {
        s = wm_err(err, WM_ERR_NOMEM, "out of memory building the header");
        goto done;
    }
    if (hdr->n > WM_ST_MAX_HEADER) {
        s = wm_err(err, WM_ERR_INPUT, "header would be %zu bytes, above the limit of %u", hdr->n, WM_ST_MAX_HEADER);
        goto done;
    }
    *data_bytes = off;
    *order = v;
    *nbytes_out = nb;
    v = NULL;
    nb = NULL;
done:
    free(v);
    free(nb);
    free(mv);
    return s;
}

static void put_le64(uint8_t *o, uint64_t v) {
    for (int i = 0; i < 8; i++) o[i] = (uint8_t)(v >> (8 * i));
}

wm_status wm_st_write_buffer(const wm_st_tensor *t, size_t n, const wm_st_kv *meta, size_t n_meta, uint8_t **out,
                             size_t *out_size, wm_error *err) {
    *out = NULL;
    *out_size = 0;
    st_buf hdr = {0};
    const wm_st_tensor **order;
    uint64_t *nb, data_bytes;
    wm_status s = prepare(t, n, meta, n_meta, &hdr, &order, &nb, &data_bytes, err);
    if (s) {
        free(hdr.p);
        return s;
    }
    uint64_t total;
    if (!wm_add_u64(8 + hdr.n, data_bytes, &total) || total > SIZE_MAX) {
        s = wm_err(err, WM_ERR_NOMEM, "%llu data bytes do not fit in memory", (unsigned long long)data_bytes);
        goto done;
    }
    uint8_t *o = malloc((size_t)total);
    if (!o) {
        s = wm_err(err, WM_ERR_NOMEM, "out of memory (%llu bytes)", (unsigned long long)total);
        goto done;
    }
    put_le64(o, hdr.n);
    memcpy(o + 8, hdr.p, hdr.n);
    size_t pos = 8 + hdr.n;
    for (size_t i = 0; i < n; i++) {
        size_t len = (size_t)nb[order[i] - t];
        if (len) memcpy(o + pos, order[i]->data, len);
        pos += len;
    }
    *out = o;
    *out_size = (size_t)total;
done:
    free(hdr.p);
    free(order);
    free(nb);
    return s;
}

wm_status wm_st_write(const char *path, const wm_st_tensor *t, size_t n, const wm_st_kv *meta, size_t n_meta,
                      wm_error *err) {
    st_buf hdr = {0};
    const wm_st_tensor **order = NULL;
    uint64_t *nb = NULL, data_bytes = 0;
    char tmp[PATH_MAX + 64];
    int fd = -1, slot = -1;
    wm_status s = prepare(t, n, meta, n_meta, &hdr, &order, &nb, &data_bytes, err);
    if (s || (s = wm_tmp_create(path, tmp, sizeof tmp, &fd, &slot, err))) goto done;
    uint8_t len[8];
    put_le64(len, hdr.n);
    int bad = wm_write_full(fd, len, 8) != 0 || wm_write_full(fd, hdr.p, hdr.n) != 0;
    for (size_t i = 0; i < n && !bad; i++) bad = wm_write_full(fd, order[i]->data, (size_t)nb[order[i] - t]) != 0;
    if (!bad) bad = fsync(fd) != 0;
    int e = errno;
    if (close(fd) != 0 && !bad) bad = 1, e = errno;
    fd = -1;
    if (bad) {
        wm_tmp_discard(tmp, &slot);
        s = wm_err(err, WM_ERR_IO, "cannot write: %s", strerror(e));
        goto done;
    }
    if ((s = wm_tmp_commit(tmp, &slot, path, err))) {
        wm_tmp_discard(tmp, &slot);
        goto done;
    }
    char dir[PATH_MAX];
    wm_path_dirname(path, dir, sizeof dir);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) { /* make the rename durable; best effort */
        (void)fsync(dfd);
        close(dfd);
    }
done:
    if (s) wm_err_prefix(err, "%s", path);
    free(hdr.p);
    free(order);
    free(nb);
    return s;
}
