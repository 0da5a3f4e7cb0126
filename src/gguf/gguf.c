/*
 * gguf.c - the GGUF reader (see gguf.h): header walk with every length,
 * count and offset checked against the bytes that remain, split sets, and
 * typed metadata access.
 */
#define _GNU_SOURCE
#include "gguf/gguf.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/arena.h"
#include "core/error.h"
#include "core/file.h"

/* ------------------------------------------------------------------ type tables */

static const struct {
    const char *name;
    uint32_t bytes;
} vtypes[WM_GGUF_VTYPE_COUNT] = {
#define X(e, n, s, b) [n] = {s, b},
    WM_GGUF_VTYPE_LIST(X)
#undef X
};

const char *wm_gguf_vtype_name(uint32_t t) { return t < WM_GGUF_VTYPE_COUNT ? vtypes[t].name : NULL; }

typedef struct ggml_row {
    const char *name;
    uint32_t blck, bytes, ok;
} ggml_row;

#define WM_GGML_NUM 64 /* above every number in the list */
static const ggml_row ggml_types[WM_GGML_NUM] = {
#define X(e, n, s, bl, by, ok) [n] = {s, bl, by, ok},
    WM_GGML_TYPE_LIST(X)
#undef X
};

static const ggml_row *ggml(uint32_t t) { return t < WM_GGML_NUM && ggml_types[t].name ? &ggml_types[t] : NULL; }
const char *wm_ggml_type_name(uint32_t t) { return ggml(t) ? ggml(t)->name : NULL; }
uint32_t wm_ggml_block_elems(uint32_t t) { return ggml(t) ? ggml(t)->blck : 0; }
uint32_t wm_ggml_block_bytes(uint32_t t) { return ggml(t) ? ggml(t)->bytes : 0; }
int wm_ggml_type_supported(uint32_t t) { return ggml(t) ? (int)ggml(t)->ok : 0; }

const char *wm_ggml_supported_list(void) {
    static char list[256];
    if (!list[0]) {
        size_t n = 0;
        for (uint32_t t = 0; t < WM_GGML_NUM; t++)
            if (ggml(t) && ggml(t)->ok && n < sizeof list)
                n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", n ? ", " : "", ggml(t)->name);
    }
    return list;
}

/* ------------------------------------------------------------------ the handle */

struct wm_gguf_file {
    wm_arena arena;
    wm_map *maps;                   /* one per mapped file (none for a buffer) */
    size_t n_maps;
    const char **paths;             /* label of each file */
    size_t n_paths;
    char dir[PATH_MAX];
    uint32_t version;
    uint64_t align;                 /* of the first file */
    uint64_t bytes;
    wm_gguf_kv *kv;
    size_t n_kv;
    const wm_gguf_kv **kv_sorted;   /* by key */
    wm_gguf_tensor *t;
    size_t n_t;
    const wm_gguf_tensor **t_sorted; /* by name */
};

static wm_gguf_file *file_new(void) {
    wm_gguf_file *f = calloc(1, sizeof *f);
    if (f) wm_arena_init(&f->arena);
    return f;
}

void wm_gguf_close(wm_gguf_file *f) {
    if (!f) return;
    for (size_t i = 0; i < f->n_maps; i++) wm_unmap(&f->maps[i]);
    free(f->maps);
    wm_arena_free(&f->arena);
    free(f);
}

uint32_t wm_gguf_version(const wm_gguf_file *f) { return f->version; }
uint64_t wm_gguf_alignment(const wm_gguf_file *f) { return f->align; }
const char *wm_gguf_path(const wm_gguf_file *f) { return f->n_paths ? f->paths[0] : "<buffer>"; }
const char *wm_gguf_dir(const wm_gguf_file *f) { return f->dir; }
size_t wm_gguf_shard_count(const wm_gguf_file *f) { return f->n_paths; }
const char *wm_gguf_shard_path(const wm_gguf_file *f, size_t i) { return i < f->n_paths ? f->paths[i] : NULL; }
uint64_t wm_gguf_file_bytes(const wm_gguf_file *f) { return f->bytes; }
size_t wm_gguf_kv_count(const wm_gguf_file *f) { return f->n_kv; }
const wm_gguf_kv *wm_gguf_kv_at(const wm_gguf_file *f, size_t i) { return i < f->n_kv ? &f->kv[i] : NULL; }
size_t wm_gguf_tensor_count(const wm_gguf_file *f) { return f->n_t; }
const wm_gguf_tensor *wm_gguf_tensor_at(const wm_gguf_file *f, size_t i) { return i < f->n_t ? &f->t[i] : NULL; }

const wm_gguf_kv *wm_gguf_find(const wm_gguf_file *f, const char *key) {
    size_t lo = 0, hi = f->n_kv;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->kv_sorted[mid]->key, key);
        if (!c) return f->kv_sorted[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const wm_gguf_tensor *wm_gguf_find_tensor(const wm_gguf_file *f, const char *name) {
    size_t lo = 0, hi = f->n_t;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->t_sorted[mid]->name, name);
        if (!c) return f->t_sorted[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* ------------------------------------------------------------------ parsing */

typedef struct cur {
    const uint8_t *base, *p, *end;
    const char *label;
    wm_error *err;
} cur;

static uint64_t left(const cur *c) { return (uint64_t)(c->end - c->p); }
static uint64_t at(const cur *c) { return (uint64_t)(c->p - c->base); }

static wm_status truncated(cur *c, const char *what) {
    return wm_err(c->err, WM_ERR_INPUT, "%s: truncated at offset %llu (%s; the file has %llu bytes)", c->label,
                  (unsigned long long)at(c), what, (unsigned long long)(c->end - c->base));
}

static int get_u32(cur *c, uint32_t *v) {
    if (left(c) < 4) return 0;
    memcpy(v, c->p, 4);
    c->p += 4;
    return 1;
}

static int get_u64(cur *c, uint64_t *v) {
    if (left(c) < 8) return 0;
    memcpy(v, c->p, 8);
    c->p += 8;
    return 1;
}

static int utf8_ok(const uint8_t *s, uint64_t n);
int wm_gguf_utf8_ok(const char *s, uint64_t n) { return utf8_ok((const uint8_t *)s, n); }

/* Valid UTF-8 without NUL bytes (overlongs, surrogates and values past U+10FFFF refused). */
static int utf8_ok(const uint8_t *s, uint64_t n) {
    for (uint64_t i = 0; i < n;) {
        uint8_t b = s[i];
        if (!b) return 0;
        if (b < 0x80) {
            i++;
            continue;
        }
        int k = b >= 0xf0 ? 3 : b >= 0xe0 ? 2 : b >= 0xc0 ? 1 : -1;
        if (k < 0 || b >= 0xf5 || b == 0xc0 || b == 0xc1 || n - i <= (uint64_t)k) return 0;
        uint32_t cp = b & (0x3f >> k);
        for (int j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80) return 0;
            cp = cp << 6 | (s[i + j] & 0x3f);
        }
        if ((k == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (k == 3 && (cp < 0x10000 || cp > 0x10ffff)))
            return 0;
        i += (uint64_t)k + 1;
    }
    return 1;
}

/* "what" of a message: "a metadata key", "key 'K': a string value", "key 'K' element 12" (formatted on error only). */
static void what_of(char *out, size_t n, const char *what, const char *key, uint64_t idx) {
    if (!key) snprintf(out, n, "%s", what);
    else if (idx == UINT64_MAX) snprintf(out, n, "key '%s': %s", key, what);
    else snprintf(out, n, "key '%s' element %llu", key, (unsigned long long)idx);
}

/* A string: u64 length, bytes; its length is checked against what remains (and cap, when nonzero). */
static wm_status get_str(cur *c, wm_gguf_str *s, uint64_t cap, const char *what, const char *key, uint64_t idx) {
    uint64_t n;
    char w[200];
    if (!get_u64(c, &n)) {
        what_of(w, sizeof w, what, key, idx);
        return truncated(c, w);
    }
    if (n > left(c) || (cap && n > cap)) {
        what_of(w, sizeof w, what, key, idx);
        if (n > left(c))
            return wm_err(c->err, WM_ERR_INPUT, "%s: %s at offset %llu: length %llu runs past the end of the file (%llu "
                          "bytes left)", c->label, w, (unsigned long long)(at(c) - 8), (unsigned long long)n,
                          (unsigned long long)left(c));
        return wm_err(c->err, WM_ERR_INPUT, "%s: %s at offset %llu: %llu bytes, over the limit of %llu", c->label, w,
                      (unsigned long long)(at(c) - 8), (unsigned long long)n, (unsigned long long)cap);
    }
    s->p = (const char *)c->p;
    s->n = n;
    c->p += n;
    return WM_OK;
}

/* One metadata value of type kv->type at the cursor (kv->key set, for messages). */
static wm_status parse_value(cur *c, wm_arena *a, wm_gguf_kv *kv) {
    kv->elem = kv->type;
    kv->n = 1;
    if (kv->type >= WM_GGUF_VTYPE_COUNT)
        return wm_err(c->err, WM_ERR_INPUT, "%s: key '%s': unknown value type %u (0 to %d)", c->label, kv->key, kv->type,
                      WM_GGUF_VTYPE_COUNT - 1);
    if (kv->type == WM_GGUF_STRING) {
        wm_gguf_str s;
        wm_status st = get_str(c, &s, 0, "a string value", kv->key, UINT64_MAX);
        if (st) return st;
        kv->data = (const uint8_t *)s.p;
        kv->size = s.n;
        return WM_OK;
    }
    if (kv->type != WM_GGUF_ARRAY) {
        uint32_t b = vtypes[kv->type].bytes;
        if (left(c) < b) {
            char w[200];
            what_of(w, sizeof w, "its value", kv->key, UINT64_MAX);
            return truncated(c, w);
        }
        kv->data = c->p;
        kv->size = b;
        if (kv->type == WM_GGUF_BOOL && *c->p > 1)
            return wm_err(c->err, WM_ERR_INPUT, "%s: key '%s': a BOOL holds %u (0 or 1)", c->label, kv->key, *c->p);
        c->p += b;
        return WM_OK;
    }
    uint32_t et;
    uint64_t n;
    if (!get_u32(c, &et) || !get_u64(c, &n)) {
        char w[200];
        what_of(w, sizeof w, "an array header", kv->key, UINT64_MAX);
        return truncated(c, w);
    }
    if (et == WM_GGUF_ARRAY)
        return wm_err(c->err, WM_ERR_INPUT, "%s: key '%s': an array of arrays (not supported)", c->label, kv->key);
    if (et >= WM_GGUF_VTYPE_COUNT)
        return wm_err(c->err, WM_ERR_INPUT, "%s: key '%s': array of unknown value type %u", c->label, kv->key, et);
    kv->elem = et;
    kv->n = n;
    kv->data = c->p;
    if (et != WM_GGUF_STRING) {
        uint64_t bytes;
        if (!wm_mul_u64(n, vtypes[et].bytes, &bytes) || bytes > left(c))
            return wm_err(c->err, WM_ERR_INPUT, "%s: key '%s': array of %llu %s runs past the end of the file (%llu "
                          "bytes left)", c->label, kv->key, (unsigned long long)n, vtypes[et].name,
                          (unsigned long long)left(c));
        if (et == WM_GGUF_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (c->p[i] > 1)
                    return wm_err(c->err, WM_ERR_INPUT, "%s: key '%s': element %llu: a BOOL holds %u (0 or 1)",
                                  c->label, kv->key, (unsigned long long)i, c->p[i]);
        kv->size = bytes;
        c->p += bytes;
        return WM_OK;
    }
    /* strings: each at least its 8-byte length, so n is bounded by what remains before anything is allocated */
    if (n > left(c) / 8)
        return wm_err(c->err, WM_ERR_INPUT, "%s: key '%s': array of %llu strings cannot fit in the %llu bytes left",
                      c->label, kv->key, (unsigned long long)n, (unsigned long long)left(c));
    uint64_t *offs = wm_arena_alloc(a, (size_t)(n ? n : 1) * sizeof *offs);
    if (!offs) return wm_err(c->err, WM_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < n; i++) {
        offs[i] = (uint64_t)(c->p - kv->data);
        wm_gguf_str s;
        wm_status st = get_str(c, &s, 0, NULL, kv->key, i);
        if (st) return st;
    }
    kv->str_at = offs;
    kv->size = (uint64_t)(c->p - kv->data);
    return WM_OK;
}

/* What one file holds, before the files of a set are merged. */
typedef struct part {
    wm_gguf_kv *kv;
    size_t n_kv;
    wm_gguf_tensor *t;
    size_t n_t;
    uint32_t version;
    uint64_t align;
    int64_t split_no, split_count, split_tensors; /* -1: absent */
} part;

static const wm_gguf_kv *part_find(const part *p, const char *key) {
    for (size_t i = 0; i < p->n_kv; i++)
        if (!strcmp(p->kv[i].key, key)) return &p->kv[i];
    return NULL;
}

static int cmp_kv_key(const void *x, const void *y) {
    return strcmp((*(const wm_gguf_kv *const *)x)->key, (*(const wm_gguf_kv *const *)y)->key);
}

static int cmp_t_name(const void *x, const void *y) {
    return strcmp((*(const wm_gguf_tensor *const *)x)->name, (*(const wm_gguf_tensor *const *)y)->name);
}

static int cmp_t_off(const void *x, const void *y) {
    const wm_gguf_tensor *a = *(const wm_gguf_tensor *const *)x, *b = *(const wm_gguf_tensor *const *)y;
    if (a->offset != b->offset) return a->offset < b->offset ? -1 : 1;
    return a->nbytes < b->nbytes ? -1 : a->nbytes > b->nbytes;
}

/* An integer scalar of a part's metadata into *v (any integer type); 0 when it is not one. */
static int scalar_int(const wm_gguf_kv *kv, int64_t *v) {
    if (!kv || kv->type == WM_GGUF_STRING || kv->type == WM_GGUF_ARRAY || kv->type == WM_GGUF_F32 ||
        kv->type == WM_GGUF_F64 || kv->type == WM_GGUF_BOOL)
        return 0;
    *v = wm_gguf_arr_int(kv, 0);
    return kv->type != WM_GGUF_U64 || *v >= 0;
}

static wm_status parse_split_keys(cur *c, part *p) {
    static const char *const keys[] = {"split.no", "split.count", "split.tensors.count"};
    int64_t *dst[] = {&p->split_no, &p->split_count, &p->split_tensors};
    for (int i = 0; i < 3; i++) {
        *dst[i] = -1;
        const wm_gguf_kv *kv = part_find(p, keys[i]);
        if (!kv) continue;
        int64_t v;
        if (!scalar_int(kv, &v) || v < 0 || v > INT32_MAX)
            return wm_err(c->err, WM_ERR_INPUT, "%s: key '%s': expected a non-negative integer", c->label, keys[i]);
        *dst[i] = v;
    }
    if (p->split_count == 0 || p->split_count > WM_GGUF_MAX_SHARDS)
        return wm_err(c->err, WM_ERR_INPUT, "%s: key 'split.count': %lld files (1 to %d)", c->label,
                      (long long)p->split_count, WM_GGUF_MAX_SHARDS);
    if (p->split_count > 0 && p->split_no >= p->split_count)
        return wm_err(c->err, WM_ERR_INPUT, "%s: key 'split.no': %lld is not below split.count %lld", c->label,
                      (long long)p->split_no, (long long)p->split_count);
    return WM_OK;
}

/*
 * Walks one whole file (size bytes at data) into p (arrays in the arena). shard: its index in the set, for the
 * tensors. Everything is checked here; what depends on the other files of a set is checked by the caller.
 */
static wm_status parse_file(wm_arena *a, const uint8_t *data, size_t size, const char *label, uint32_t shard, part *p,
                            wm_error *err) {
    memset(p, 0, sizeof *p);
    cur c = {data, data, data + size, label, err};
    if (size < 4) return truncated(&c, "the magic");
    if (memcmp(data, "GGUF", 4))
        return wm_err(err, WM_ERR_INPUT, "%s: not a GGUF file (the first 4 bytes are not \"GGUF\")", label);
    c.p += 4;
    uint32_t version;
    uint64_t n_t, n_kv;
    if (!get_u32(&c, &version)) return truncated(&c, "the version");
    if (version == 1)
        return wm_err(err, WM_ERR_INPUT, "%s: GGUF version 1 is not supported (versions 2 and 3; convert the file "
                      "again)", label);
    if ((version & 0xffff) == 0 && version != 0)
        return wm_err(err, WM_ERR_INPUT, "%s: GGUF version field 0x%08x: a big-endian file (not supported)", label,
                      version);
    if (version != 2 && version != 3)
        return wm_err(err, WM_ERR_INPUT, "%s: GGUF version %u is not supported (versions 2 and 3)", label, version);
    p->version = version;
    if (!get_u64(&c, &n_t)) return truncated(&c, "the tensor count");
    if (!get_u64(&c, &n_kv)) return truncated(&c, "the metadata count");
    /* smallest metadata pair: 8 (key length) + 1 + 4 (type) + 1; smallest tensor info: 8 + 1 + 4 + 8 + 4 + 8 */
    if (n_kv > left(&c) / 14)
        return wm_err(err, WM_ERR_INPUT, "%s: metadata count %llu cannot fit in the %llu bytes left", label,
                      (unsigned long long)n_kv, (unsigned long long)left(&c));
    if (n_t > left(&c) / 33)
        return wm_err(err, WM_ERR_INPUT, "%s: tensor count %llu cannot fit in the %llu bytes left", label,
                      (unsigned long long)n_t, (unsigned long long)left(&c));
    p->kv = wm_arena_alloc(a, (size_t)(n_kv ? n_kv : 1) * sizeof *p->kv);
    p->t = wm_arena_alloc(a, (size_t)(n_t ? n_t : 1) * sizeof *p->t);
    if (!p->kv || !p->t) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    wm_status s;
    for (uint64_t i = 0; i < n_kv; i++) {
        wm_gguf_kv *kv = &p->kv[i];
        wm_gguf_str k;
        if ((s = get_str(&c, &k, WM_GGUF_MAX_KEY, "a metadata key", NULL, 0))) return s;
        if (!k.n) return wm_err(err, WM_ERR_INPUT, "%s: metadata pair %llu has an empty key", label, (unsigned long long)i);
        if (!utf8_ok((const uint8_t *)k.p, k.n))
            return wm_err(err, WM_ERR_INPUT, "%s: metadata pair %llu: the key is not valid UTF-8 (or holds a NUL)",
                          label, (unsigned long long)i);
        if (!(kv->key = wm_arena_strndup(a, k.p, (size_t)k.n))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        if (!get_u32(&c, &kv->type)) {
            char w[200];
            what_of(w, sizeof w, "its value type", kv->key, UINT64_MAX);
            return truncated(&c, w);
        }
        kv->shard = shard;
        if ((s = parse_value(&c, a, kv))) return s;
        p->n_kv++;
    }
    /* duplicate keys */
    const wm_gguf_kv **sorted = malloc((n_kv ? n_kv : 1) * sizeof *sorted);
    if (!sorted) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < p->n_kv; i++) sorted[i] = &p->kv[i];
    qsort(sorted, p->n_kv, sizeof *sorted, cmp_kv_key);
    for (size_t i = 1; i < p->n_kv; i++)
        if (!strcmp(sorted[i]->key, sorted[i - 1]->key)) {
            s = wm_err(err, WM_ERR_INPUT, "%s: key '%s' is listed twice", label, sorted[i]->key);
            free(sorted);
            return s;
        }
    free(sorted);
    p->align = WM_GGUF_DEFAULT_ALIGN;
    const wm_gguf_kv *al = part_find(p, "general.alignment");
    if (al) {
        if (al->type != WM_GGUF_U32)
            return wm_err(err, WM_ERR_INPUT, "%s: key 'general.alignment': type %s (UINT32 expected)", label,
                          vtypes[al->type].name);
        uint32_t v;
        memcpy(&v, al->data, 4);
        if (!v || (v & (v - 1)) || v > (1u << 30))
            return wm_err(err, WM_ERR_INPUT, "%s: key 'general.alignment': %u is not a power of two up to 2^30", label, v);
        p->align = v;
    }
    if ((s = parse_split_keys(&c, p))) return s;
    for (uint64_t i = 0; i < n_t; i++) {
        wm_gguf_tensor *t = &p->t[i];
        wm_gguf_str nm;
        if ((s = get_str(&c, &nm, 0, "a tensor name", NULL, 0))) return s;
        if (!nm.n || nm.n > WM_GGUF_MAX_NAME)
            return wm_err(err, WM_ERR_INPUT, "%s: tensor %llu: name of %llu bytes (1 to %d)", label,
                          (unsigned long long)i, (unsigned long long)nm.n, WM_GGUF_MAX_NAME);
        if (!utf8_ok((const uint8_t *)nm.p, nm.n))
            return wm_err(err, WM_ERR_INPUT, "%s: tensor %llu: the name is not valid UTF-8 (or holds a NUL)", label,
                          (unsigned long long)i);
        if (!(t->name = wm_arena_strndup(a, nm.p, (size_t)nm.n))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        char tw[WM_GGUF_MAX_NAME + 64];
        snprintf(tw, sizeof tw, "tensor '%s': its header", t->name);
        if (!get_u32(&c, &t->n_dims)) return truncated(&c, tw);
        if (t->n_dims < 1 || t->n_dims > WM_GGUF_MAX_DIMS)
            return wm_err(err, WM_ERR_INPUT, "%s: tensor '%s': %u dimensions (1 to %d)", label, t->name, t->n_dims,
                          WM_GGUF_MAX_DIMS);
        uint64_t numel = 1;
        for (uint32_t d = 0; d < WM_GGUF_MAX_DIMS; d++) {
            t->ne[d] = 1;
            if (d < t->n_dims && !get_u64(&c, &t->ne[d])) return truncated(&c, tw);
            if (t->ne[d] > (uint64_t)INT64_MAX || !wm_mul_u64(numel, t->ne[d], &numel) || numel > (uint64_t)INT64_MAX)
                return wm_err(err, WM_ERR_INPUT, "%s: tensor '%s': the dimensions overflow (dim %u is %llu)", label,
                              t->name, d, (unsigned long long)t->ne[d]);
        }
        t->numel = numel;
        if (!get_u32(&c, &t->type)) return truncated(&c, tw);
        const ggml_row *g = ggml(t->type);
        if (!g) return wm_err(err, WM_ERR_INPUT, "%s: tensor '%s': unknown tensor type %u", label, t->name, t->type);
        if (t->ne[0] % g->blck)
            return wm_err(err, WM_ERR_INPUT, "%s: tensor '%s': a row of %llu elements is not a whole number of %s blocks "
                          "(%u elements each)", label, t->name, (unsigned long long)t->ne[0], g->name, g->blck);
        uint64_t rows; /* checked: with ne[0] == 0 the other dims were not bounded by numel */
        if (!wm_mul_u64(t->ne[1], t->ne[2], &rows) || !wm_mul_u64(rows, t->ne[3], &rows) ||
            !wm_mul_u64(t->ne[0] / g->blck, g->bytes, &t->row_bytes) || !wm_mul_u64(t->row_bytes, rows, &t->nbytes))
            return wm_err(err, WM_ERR_INPUT, "%s: tensor '%s': its byte size overflows", label, t->name);
        if (!get_u64(&c, &t->offset)) return truncated(&c, tw);
        if (t->offset % p->align)
            return wm_err(err, WM_ERR_INPUT, "%s: tensor '%s': offset %llu is not a multiple of the alignment %llu",
                          label, t->name, (unsigned long long)t->offset, (unsigned long long)p->align);
        t->shard = shard;
        p->n_t++;
    }
    uint64_t data_at = at(&c);
    data_at = (data_at + p->align - 1) / p->align * p->align; /* at <= size < 2^63, align <= 2^30: no overflow */
    if (n_t && data_at > size)
        return wm_err(err, WM_ERR_INPUT, "%s: truncated: the data section would start at %llu, past the end (%zu bytes)",
                      label, (unsigned long long)data_at, size);
    uint64_t data_size = n_t ? size - data_at : 0;
    const wm_gguf_tensor **by = malloc((n_t ? n_t : 1) * sizeof *by);
    if (!by) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    s = WM_OK;
    for (size_t i = 0; i < p->n_t && !s; i++) {
        wm_gguf_tensor *t = &p->t[i];
        uint64_t end;
        if (!wm_add_u64(t->offset, t->nbytes, &end) || end > data_size)
            s = wm_err(err, WM_ERR_INPUT, "%s: tensor '%s': bytes [%llu, %llu) of the data section run past its end "
                       "(%llu bytes)", label, t->name, (unsigned long long)t->offset,
                       (unsigned long long)t->offset + (unsigned long long)t->nbytes, (unsigned long long)data_size);
        else t->data = data + data_at + t->offset;
        by[i] = t;
    }
    if (!s) {
        qsort(by, p->n_t, sizeof *by, cmp_t_off);
        uint64_t end = 0;
        const wm_gguf_tensor *prev = NULL;
        for (size_t i = 0; i < p->n_t && !s; i++) {
            if (!by[i]->nbytes) continue;
            if (prev && by[i]->offset < end)
                s = wm_err(err, WM_ERR_INPUT, "%s: tensors '%s' and '%s' overlap (bytes %llu to %llu and %llu to %llu of "
                           "the data section)", label, prev->name, by[i]->name, (unsigned long long)prev->offset,
                           (unsigned long long)end, (unsigned long long)by[i]->offset,
                           (unsigned long long)(by[i]->offset + by[i]->nbytes));
            prev = by[i];
            end = by[i]->offset + by[i]->nbytes;
        }
    }
    free(by);
    return s;
}

/* ------------------------------------------------------------------ assembling the handle */

static wm_status add_label(wm_gguf_file *f, const char *label, wm_error *err) {
    const char **np = wm_vec_push(&f->arena, &f->paths, &f->n_paths, sizeof *np);
    if (!np || !(*np = wm_arena_strdup(&f->arena, label))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    return WM_OK;
}

/* Merges the parts of a set into f: metadata of the first, tensors of all, names unique across files. */
static wm_status finish(wm_gguf_file *f, part *parts, size_t n, wm_error *err) {
    f->version = parts[0].version;
    f->align = parts[0].align;
    f->kv = parts[0].kv;
    f->n_kv = parts[0].n_kv;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += parts[i].n_t; /* each bounded by its file's size */
    f->t = wm_arena_alloc(&f->arena, (total ? total : 1) * sizeof *f->t);
    f->kv_sorted = wm_arena_alloc(&f->arena, (f->n_kv ? f->n_kv : 1) * sizeof *f->kv_sorted);
    f->t_sorted = wm_arena_alloc(&f->arena, (total ? total : 1) * sizeof *f->t_sorted);
    if (!f->t || !f->kv_sorted || !f->t_sorted) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        memcpy(f->t + f->n_t, parts[i].t, parts[i].n_t * sizeof *f->t);
        f->n_t += parts[i].n_t;
    }
    for (size_t i = 0; i < f->n_kv; i++) f->kv_sorted[i] = &f->kv[i];
    qsort(f->kv_sorted, f->n_kv, sizeof *f->kv_sorted, cmp_kv_key);
    for (size_t i = 0; i < f->n_t; i++) f->t_sorted[i] = &f->t[i];
    qsort(f->t_sorted, f->n_t, sizeof *f->t_sorted, cmp_t_name);
    for (size_t i = 1; i < f->n_t; i++)
        if (!strcmp(f->t_sorted[i]->name, f->t_sorted[i - 1]->name)) {
            const wm_gguf_tensor *x = f->t_sorted[i - 1], *y = f->t_sorted[i];
            if (x->shard == y->shard)
                return wm_err(err, WM_ERR_INPUT, "%s: tensor '%s' is listed twice", f->paths[x->shard], x->name);
            return wm_err(err, WM_ERR_INPUT, "tensor '%s' is in both %s and %s", x->name, f->paths[x->shard],
                          f->paths[y->shard]);
        }
    if (n > 1 && parts[0].split_tensors >= 0 && (uint64_t)parts[0].split_tensors != f->n_t)
        return wm_err(err, WM_ERR_INPUT, "%s: key 'split.tensors.count' says %lld tensors, the %zu files hold %zu",
                      f->paths[0], (long long)parts[0].split_tensors, n, f->n_t);
    return WM_OK;
}

wm_status wm_gguf_open_buffer(const void *data, size_t size, const char *label, wm_gguf_file **out, wm_error *err) {
    *out = NULL;
    wm_gguf_file *f = file_new();
    if (!f) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    part p;
    wm_status s = add_label(f, label ? label : "<buffer>", err);
    if (!s) s = parse_file(&f->arena, data, size, f->paths[0], 0, &p, err);
    if (!s) s = finish(f, &p, 1, err);
    if (s) {
        wm_gguf_close(f);
        return s;
    }
    f->bytes = size;
    *out = f;
    return WM_OK;
}

/* ------------------------------------------------------------------ files, folders and split sets */

static int ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && !strcmp(s + n - k, suf);
}

/* "NAME-00002-of-00005.gguf": prefix length, index (1-based) and count; 0 when name is not a split file. */
static int split_name(const char *name, size_t *prefix, int *no, int *count) {
    size_t n = strlen(name);
    if (n < 20 || !ends_with(name, ".gguf")) return 0;
    const char *q = name + n - 5 - 15; /* "-00002-of-00005" */
    if (q[0] != '-' || strncmp(q + 6, "-of-", 4)) return 0;
    for (int i = 1; i < 15; i++)
        if ((i < 6 || i > 9) && (q[i] < '0' || q[i] > '9')) return 0;
    *no = atoi(q + 1);
    *count = atoi(q + 10);
    *prefix = (size_t)(q - name);
    return *no >= 1 && *count >= 1 && *no <= *count;
}

static int cmp_cstr(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

/* The .gguf file a folder stands for (its one file, or the first of its one split set) into out. */
static wm_status pick_in_folder(const char *dir, char *out, size_t n, wm_error *err) {
    DIR *d = opendir(dir);
    if (!d) return wm_err(err, WM_ERR_INPUT, "%s: cannot list: %s", dir, strerror(errno));
    char *names[64];
    size_t k = 0, more = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || !ends_with(e->d_name, ".gguf")) continue;
        if (k < 64) {
            if (!(names[k] = strdup(e->d_name))) break;
            k++;
        } else more++;
    }
    closedir(d);
    wm_status s = WM_OK;
    qsort(names, k, sizeof *names, cmp_cstr);
    size_t pre0 = 0, pre;
    int no, cnt, cnt0 = 0, one_set = k > 0 && !more;
    for (size_t i = 0; i < k && one_set; i++) {
        if (!split_name(names[i], &pre, &no, &cnt)) one_set = 0;
        else if (!i) pre0 = pre, cnt0 = cnt;
        else if (pre != pre0 || cnt != cnt0 || strncmp(names[i], names[0], pre)) one_set = 0;
    }
    if (!k) s = wm_err(err, WM_ERR_INPUT, "%s: no .gguf file in the folder", dir);
    else if (k == 1 || one_set) {
        if ((size_t)snprintf(out, n, "%s/%s", dir, names[0]) >= n) s = wm_err(err, WM_ERR_INPUT, "%s: path too long", dir);
    } else {
        char list[512];
        size_t u = 0;
        for (size_t i = 0; i < k && i < 4 && u < sizeof list; i++)
            u += (size_t)snprintf(list + u, sizeof list - u, "%s%s", i ? ", " : "", names[i]);
        s = wm_err(err, WM_ERR_INPUT, "%s: holds %zu .gguf files (%s%s) that are not one split set: name the file with -m",
                   dir, k + more, list, k + more > 4 ? ", ..." : "");
    }
    for (size_t i = 0; i < k; i++) free(names[i]);
    return s;
}

int wm_gguf_is_path(const char *path) {
    struct stat st;
    if (!path) return 0;
    if (ends_with(path, ".gguf")) return 1; /* whatever is there: opening it says what is wrong */
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return 0;
    char p[PATH_MAX];
    if ((size_t)snprintf(p, sizeof p, "%s/config.json", path) < sizeof p && lstat(p, &st) == 0) return 0;
    DIR *d = opendir(path);
    if (!d) return 0;
    struct dirent *e;
    int hit = 0;
    while (!hit && (e = readdir(d))) hit = e->d_name[0] != '.' && ends_with(e->d_name, ".gguf");
    closedir(d);
    return hit;
}

static wm_status map_one(wm_gguf_file *f, const char *path, wm_error *err) {
    wm_map *m = realloc(f->maps, (f->n_maps + 1) * sizeof *m);
    if (!m) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    f->maps = m;
    wm_status s = wm_map_file(path, 0, &f->maps[f->n_maps], err);
    if (s) return s;
    f->n_maps++;
    f->bytes += f->maps[f->n_maps - 1].size;
    return add_label(f, path, err);
}

wm_status wm_gguf_open(const char *path, wm_gguf_file **out, wm_error *err) {
    *out = NULL;
    if (!path || !*path) return wm_err(err, WM_ERR_USAGE, "no GGUF file given");
    char file[PATH_MAX];
    struct stat st;
    if (stat(path, &st) != 0) return wm_err(err, WM_ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
    wm_status s;
    if (S_ISDIR(st.st_mode)) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", path);
        size_t L = strlen(dir);
        while (L > 1 && dir[L - 1] == '/') dir[--L] = 0;
        if ((s = pick_in_folder(dir, file, sizeof file, err))) return s;
    } else if ((size_t)snprintf(file, sizeof file, "%s", path) >= sizeof file) {
        return wm_err(err, WM_ERR_INPUT, "%.200s...: path too long", path);
    }
    wm_gguf_file *f = file_new();
    if (!f) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    wm_path_dirname(file, f->dir, sizeof f->dir);
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    size_t pre;
    int no, count;
    int is_split = split_name(base, &pre, &no, &count);
    part *parts = NULL;
    size_t n_parts = 0;
    if (is_split && count > WM_GGUF_MAX_SHARDS) {
        s = wm_err(err, WM_ERR_INPUT, "%s: a split set of %d files (at most %d)", file, count, WM_GGUF_MAX_SHARDS);
        goto done;
    }
    if (!(parts = calloc(is_split ? (size_t)count : 1, sizeof *parts))) {
        s = wm_err(err, WM_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < (is_split ? count : 1); i++) {
        char p[PATH_MAX];
        if (is_split) {
            size_t dl = (size_t)(base - file);
            if ((size_t)snprintf(p, sizeof p, "%.*s%.*s-%05d-of-%05d.gguf", (int)dl, file, (int)pre, base, i + 1, count) >=
                sizeof p) {
                s = wm_err(err, WM_ERR_INPUT, "%s: path too long", file);
                goto done;
            }
        } else snprintf(p, sizeof p, "%s", file);
        if ((s = map_one(f, p, err))) {
            if (is_split) wm_err_prefix(err, "file %d of the split set %.*s-*-of-%05d.gguf", i + 1, (int)pre, base, count);
            goto done;
        }
        const wm_map *m = &f->maps[f->n_maps - 1];
        if ((s = parse_file(&f->arena, m->data ? m->data : (const uint8_t *)"", m->size, f->paths[i], (uint32_t)i,
                            &parts[i], err)))
            goto done;
        n_parts++;
        const part *q = &parts[i];
        int64_t want_count = is_split ? count : 1;
        if (is_split && (q->split_count != want_count || q->split_no != i)) {
            s = wm_err(err, WM_ERR_INPUT, "%s: keys 'split.no' / 'split.count' say file %lld of %lld; the name says %d of %d",
                       f->paths[i], (long long)q->split_no + 1, (long long)q->split_count, i + 1, count);
            goto done;
        }
        if (!is_split && q->split_count > 1) {
            s = wm_err(err, WM_ERR_INPUT, "%s: key 'split.count' says the model is split into %lld files, but the name "
                       "does not follow NAME-00001-of-%05lld.gguf", f->paths[i], (long long)q->split_count,
                       (long long)q->split_count);
            goto done;
        }
    }
    s = finish(f, parts, n_parts, err);
done:
    free(parts);
    if (s) {
        wm_gguf_close(f);
        return s;
    }
    *out = f;
    return WM_OK;
}

/* ------------------------------------------------------------------ typed access */

int64_t wm_gguf_arr_int(const wm_gguf_kv *kv, uint64_t i) {
    const uint8_t *p = kv->data + i * vtypes[kv->elem].bytes;
    switch (kv->elem) {
    case WM_GGUF_U8: case WM_GGUF_BOOL: return p[0];
    case WM_GGUF_I8: return (int8_t)p[0];
    case WM_GGUF_U16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case WM_GGUF_I16: { int16_t v; memcpy(&v, p, 2); return v; }
    case WM_GGUF_U32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case WM_GGUF_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case WM_GGUF_U64: { uint64_t v; memcpy(&v, p, 8); return v > (uint64_t)INT64_MAX ? -1 : (int64_t)v; }
    case WM_GGUF_I64: { int64_t v; memcpy(&v, p, 8); return v; }
    default: return 0;
    }
}

double wm_gguf_arr_num(const wm_gguf_kv *kv, uint64_t i) {
    const uint8_t *p = kv->data + i * vtypes[kv->elem].bytes;
    if (kv->elem == WM_GGUF_F32) {
        float v;
        memcpy(&v, p, 4);
        return v;
    }
    if (kv->elem == WM_GGUF_F64) {
        double v;
        memcpy(&v, p, 8);
        return v;
    }
    if (kv->elem == WM_GGUF_U64) {
        uint64_t v;
        memcpy(&v, p, 8);
        return (double)v;
    }
    return (double)wm_gguf_arr_int(kv, i);
}

double wm_gguf_kv_num(const wm_gguf_kv *kv) {
    return kv->type == WM_GGUF_STRING || kv->type == WM_GGUF_ARRAY ? 0 : wm_gguf_arr_num(kv, 0);
}

wm_gguf_str wm_gguf_arr_str(const wm_gguf_kv *kv, uint64_t i) {
    const uint8_t *p = kv->data + kv->str_at[i];
    wm_gguf_str s;
    memcpy(&s.n, p, 8);
    s.p = (const char *)p + 8;
    return s;
}

static int is_int_type(uint32_t t) {
    return t == WM_GGUF_U8 || t == WM_GGUF_I8 || t == WM_GGUF_U16 || t == WM_GGUF_I16 || t == WM_GGUF_U32 ||
           t == WM_GGUF_I32 || t == WM_GGUF_U64 || t == WM_GGUF_I64;
}

static const wm_gguf_kv *lookup(const wm_gguf_file *f, const char *key, int *present) {
    const wm_gguf_kv *kv = wm_gguf_find(f, key);
    if (present) *present = kv != NULL;
    return kv;
}

wm_status wm_gguf_get_int(const wm_gguf_file *f, const char *key, int64_t lo, int64_t hi, int64_t *out, int *present,
                          wm_error *err) {
    const wm_gguf_kv *kv = lookup(f, key, present);
    if (!kv) return WM_OK;
    if (!is_int_type(kv->type))
        return wm_err(err, WM_ERR_INPUT, "%s: key '%s': type %s (an integer expected)", wm_gguf_path(f), key,
                      vtypes[kv->type].name);
    uint64_t u = 0;
    if (kv->type == WM_GGUF_U64) memcpy(&u, kv->data, 8);
    int64_t v = wm_gguf_arr_int(kv, 0);
    if ((kv->type == WM_GGUF_U64 && u > (uint64_t)INT64_MAX) || v < lo || v > hi)
        return wm_err(err, WM_ERR_INPUT, "%s: key '%s': %llu is out of range [%lld, %lld]", wm_gguf_path(f), key,
                      kv->type == WM_GGUF_U64 ? (unsigned long long)u : (unsigned long long)v, (long long)lo,
                      (long long)hi);
    *out = v;
    return WM_OK;
}

wm_status wm_gguf_get_num(const wm_gguf_file *f, const char *key, double *out, int *present, wm_error *err) {
    const wm_gguf_kv *kv = lookup(f, key, present);
    if (!kv) return WM_OK;
    if (!is_int_type(kv->type) && kv->type != WM_GGUF_F32 && kv->type != WM_GGUF_F64)
        return wm_err(err, WM_ERR_INPUT, "%s: key '%s': type %s (a number expected)", wm_gguf_path(f), key,
                      vtypes[kv->type].name);
    double v = wm_gguf_kv_num(kv);
    if (v != v || v - v != 0) /* NaN or infinite */
        return wm_err(err, WM_ERR_INPUT, "%s: key '%s': %g is not a finite number", wm_gguf_path(f), key, v);
    *out = v;
    return WM_OK;
}

wm_status wm_gguf_get_bool(const wm_gguf_file *f, const char *key, int *out, int *present, wm_error *err) {
    const wm_gguf_kv *kv = lookup(f, key, present);
    if (!kv) return WM_OK;
    if (kv->type != WM_GGUF_BOOL)
        return wm_err(err, WM_ERR_INPUT, "%s: key '%s': type %s (BOOL expected)", wm_gguf_path(f), key,
                      vtypes[kv->type].name);
    *out = kv->data[0];
    return WM_OK;
}

wm_status wm_gguf_get_str(const wm_gguf_file *f, const char *key, wm_gguf_str *out, int *present, wm_error *err) {
    const wm_gguf_kv *kv = lookup(f, key, present);
    if (!kv) return WM_OK;
    if (kv->type != WM_GGUF_STRING)
        return wm_err(err, WM_ERR_INPUT, "%s: key '%s': type %s (STRING expected)", wm_gguf_path(f), key,
                      vtypes[kv->type].name);
    out->p = (const char *)kv->data;
    out->n = kv->size;
    return WM_OK;
}

wm_status wm_gguf_check_array(const wm_gguf_file *f, const wm_gguf_kv *kv, int want_string, wm_error *err) {
    if (kv->type != WM_GGUF_ARRAY)
        return wm_err(err, WM_ERR_INPUT, "%s: key '%s': type %s (an array expected)", wm_gguf_path(f), kv->key,
                      vtypes[kv->type].name);
    int ok = want_string ? kv->elem == WM_GGUF_STRING : kv->elem != WM_GGUF_STRING;
    if (!ok)
        return wm_err(err, WM_ERR_INPUT, "%s: key '%s': an array of %s (%s expected)", wm_gguf_path(f), kv->key,
                      vtypes[kv->elem].name, want_string ? "STRING" : "numbers");
    return WM_OK;
}
