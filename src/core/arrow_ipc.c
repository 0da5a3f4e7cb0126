/* arrow_ipc.c - Arrow IPC stream / file into a table of cells (see arrow_ipc.h). Little-endian hosts. */
#include "core/arrow_ipc.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"

#define MAX_FIELDS 4096
#define MAX_DEPTH 16

/* ---------------------------------------------------------------- flatbuffers, checked */

typedef struct fb {
    const uint8_t *p;
    size_t n;
    int bad;
} fb;

static uint64_t fb_le(fb *b, size_t at, int size) {
    if (at > b->n || b->n - at < (size_t)size) return b->bad = 1, 0;
    uint64_t v = 0;
    memcpy(&v, b->p + at, (size_t)size);
    return v;
}

/* The position of field id of the table at t, 0 when it is absent. */
static size_t fb_field(fb *b, size_t t, int id) {
    int32_t so = (int32_t)fb_le(b, t, 4);
    int64_t vt = (int64_t)t - so;
    if (b->bad || vt < 0 || (uint64_t)vt + 4 > b->n) return b->bad = 1, 0;
    size_t vsize = (size_t)fb_le(b, (size_t)vt, 2), tsize = (size_t)fb_le(b, (size_t)vt + 2, 2);
    if (vsize < 4 || (size_t)vt + vsize > b->n || t + tsize > b->n) return b->bad = 1, 0;
    if (4 + 2 * (size_t)id + 2 > vsize) return 0;
    size_t off = (size_t)fb_le(b, (size_t)vt + 4 + 2 * (size_t)id, 2);
    if (!off) return 0;
    if (off >= tsize) return b->bad = 1, 0;
    return t + off;
}

static int64_t fb_int(fb *b, size_t t, int id, int size, int64_t dflt) {
    size_t at = fb_field(b, t, id);
    if (!at) return dflt;
    uint64_t v = fb_le(b, at, size);
    switch (size) {
    case 1: return (int8_t)v;
    case 2: return (int16_t)v;
    case 4: return (int32_t)v;
    default: return (int64_t)v;
    }
}

/* The target of the offset field id (a table, vector or string), 0 when absent. */
static size_t fb_ref(fb *b, size_t t, int id) {
    size_t at = fb_field(b, t, id);
    if (!at) return 0;
    uint64_t to = at + fb_le(b, at, 4);
    if (b->bad || to + 4 > b->n) return b->bad = 1, 0;
    return (size_t)to;
}

/* A vector at v of n elements of esize bytes: their count, checked against the buffer. */
static size_t fb_vec(fb *b, size_t v, size_t esize) {
    if (!v) return 0;
    uint64_t n = fb_le(b, v, 4);
    if (b->bad || n > (b->n - v - 4) / esize) return b->bad = 1, 0;
    return (size_t)n;
}

/* The i-th table of the vector of tables at v. */
static size_t fb_vec_table(fb *b, size_t v, size_t i) {
    size_t e = v + 4 + 4 * i;
    uint64_t to = e + fb_le(b, e, 4);
    if (b->bad || to + 4 > b->n) return b->bad = 1, 0;
    return (size_t)to;
}

/* ---------------------------------------------------------------- schema */

enum { A_NULL = 1, A_INT, A_FLOAT, A_BINARY, A_UTF8, A_BOOL, A_STRUCT = 13, A_FSB = 15, A_LIST = 12,
       A_LBINARY = 19, A_LUTF8 = 20, A_LLIST = 21 };

typedef struct anode {
    int type, bits, is_signed, width; /* width: FloatingPoint precision, FixedSizeBinary bytes */
    int parent, nchild, depth_list;   /* depth_list: 1 for the element of a list */
    int col;                          /* the table column of a leaf (or a list), -1 for structs and list elements */
    char *name;
} anode;

typedef struct ar {
    const uint8_t *mem; /* the file's bytes (mapped by *_read) */
    uint64_t size, bytes_left;
    const char *label;
    anode *nodes;
    size_t nn;
    wm_table *t;
    size_t rows_cap, cells_max, max_rows;
} ar;

static wm_status bad(ar *a, const char *what, wm_error *err) {
    return wm_err(err, WM_ERR_INPUT, "%s: malformed Arrow IPC data (%s)", a->label, what);
}

static wm_status read_at(ar *a, uint64_t off, size_t n, uint8_t *out, wm_error *err) {
    if (off > a->size || n > a->size - off)
        return wm_err(err, WM_ERR_INPUT, "%s: %zu bytes at offset %llu lie past the end of the file (%llu bytes)",
                      a->label, n, (unsigned long long)off, (unsigned long long)a->size);
    memcpy(out, a->mem + off, n);
    return WM_OK;
}

static const char *type_name(int ty) {
    static const char *const names[] = {"NONE", "Null", "Int", "FloatingPoint", "Binary", "Utf8", "Bool", "Decimal",
                                        "Date", "Time", "Timestamp", "Interval", "List", "Struct", "Union",
                                        "FixedSizeBinary", "FixedSizeList", "Map", "Duration", "LargeBinary",
                                        "LargeUtf8", "LargeList", "RunEndEncoded", "BinaryView", "Utf8View",
                                        "ListView", "LargeListView"};
    return ty >= 0 && (size_t)ty < sizeof names / sizeof *names ? names[ty] : "unknown";
}

/* The field table at f (and its children) as nodes, under parent, named under prefix. */
static wm_status add_field(ar *a, fb *b, size_t f, int parent, int depth, int in_list, const char *prefix,
                           wm_error *err) {
    if (depth > MAX_DEPTH) return bad(a, "fields nest too deep", err);
    if (a->nn >= MAX_FIELDS) return bad(a, "too many fields", err);
    size_t ns = fb_ref(b, f, 0);
    size_t nl = fb_vec(b, ns, 1);
    char name[1024];
    int k = (int)(nl > 200 ? 200 : nl);
    if (in_list) snprintf(name, sizeof name, "%s", prefix);
    else if (*prefix) snprintf(name, sizeof name, "%s.%.*s", prefix, k, ns ? (const char *)b->p + ns + 4 : "");
    else snprintf(name, sizeof name, "%.*s", k, ns ? (const char *)b->p + ns + 4 : "");
    int ty = (int)fb_int(b, f, 2, 1, 0);
    size_t tt = fb_ref(b, f, 3);
    if (b->bad) return bad(a, "a field", err);
    anode *n = &a->nodes[a->nn];
    int self = (int)a->nn++;
    memset(n, 0, sizeof *n);
    n->type = ty, n->parent = parent, n->depth_list = in_list, n->col = -1;
    if (!(n->name = strdup(name))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    if (fb_field(b, f, 4)) return wm_err(err, WM_ERR_INPUT, "%s: column %s: dictionary-encoded: not supported",
                                         a->label, name);
    switch (ty) {
    case A_INT:
        n->bits = tt ? (int)fb_int(b, tt, 0, 4, 0) : 0;
        n->is_signed = tt ? (int)fb_int(b, tt, 1, 1, 0) : 0;
        if (n->bits != 8 && n->bits != 16 && n->bits != 32 && n->bits != 64)
            return wm_err(err, WM_ERR_INPUT, "%s: column %s: an Int of %d bits", a->label, name, n->bits);
        break;
    case A_FLOAT:
        n->width = tt ? (int)fb_int(b, tt, 0, 2, 0) : 0;
        if (n->width != 1 && n->width != 2)
            return wm_err(err, WM_ERR_INPUT, "%s: column %s: only single and double floats are read", a->label,
                          name);
        break;
    case A_FSB:
        n->width = tt ? (int)fb_int(b, tt, 0, 4, 0) : 0;
        if (n->width < 1 || n->width > (1 << 20))
            return wm_err(err, WM_ERR_INPUT, "%s: column %s: FixedSizeBinary of %d bytes", a->label, name, n->width);
        break;
    case A_NULL: case A_BINARY: case A_UTF8: case A_BOOL: case A_LBINARY: case A_LUTF8: case A_STRUCT:
    case A_LIST: case A_LLIST: break;
    default:
        return wm_err(err, WM_ERR_INPUT, "%s: column %s: Arrow type %s is not supported", a->label, name,
                      type_name(ty));
    }
    if (b->bad) return bad(a, "a field's type", err);
    size_t cv = fb_ref(b, f, 5);
    size_t nc = fb_vec(b, cv, 4);
    if (b->bad) return bad(a, "a field's children", err);
    int is_list = ty == A_LIST || ty == A_LLIST;
    if (is_list && in_list)
        return wm_err(err, WM_ERR_INPUT, "%s: column %s: nested lists are not supported", a->label, name);
    if (is_list && nc != 1) return bad(a, "a list without exactly one child", err);
    if (ty == A_STRUCT && in_list)
        return wm_err(err, WM_ERR_INPUT, "%s: column %s: a list of structs is not supported", a->label, name);
    if (ty != A_STRUCT && !is_list && nc) return bad(a, "children of a leaf type", err);
    a->nodes[self].nchild = (int)nc;
    if (ty != A_STRUCT && !in_list) a->nodes[self].col = (int)a->t->n_cols++;
    for (size_t i = 0; i < nc; i++) {
        wm_status st = add_field(a, b, fb_vec_table(b, cv, i), self, depth + 1, is_list, name, err);
        if (st) return st;
    }
    return WM_OK;
}

static wm_status read_schema(ar *a, fb *b, size_t sch, wm_error *err) {
    size_t fv = fb_ref(b, sch, 1);
    size_t nf = fb_vec(b, fv, 4);
    if (b->bad || !nf || nf > MAX_FIELDS) return bad(a, "the schema's fields", err);
    if (!(a->nodes = calloc(MAX_FIELDS, sizeof *a->nodes))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < nf; i++) {
        wm_status st = add_field(a, b, fb_vec_table(b, fv, i), -1, 0, 0, "", err);
        if (st) return st;
    }
    if (!a->t->n_cols) return bad(a, "no columns", err);
    if (!(a->t->names = calloc(a->t->n_cols, sizeof *a->t->names))) {
        a->t->n_cols = 0;
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < a->nn; i++)
        if (a->nodes[i].col >= 0 && !(a->t->names[a->nodes[i].col] = strdup(a->nodes[i].name)))
            return wm_err(err, WM_ERR_NOMEM, "out of memory");
    return WM_OK;
}

/* ---------------------------------------------------------------- record batches */

typedef struct arr { /* one array of a batch: its node and buffers, checked against the body */
    int64_t len, nulls;
    const uint8_t *buf[3];
    size_t blen[3];
} arr;

typedef struct batch {
    fb *m;
    size_t nodes_v, bufs_v, n_nodes, n_bufs, ni, bi;
    const uint8_t *body;
    size_t body_len;
    arr *arrs; /* per schema node */
} batch;

static int valid_at(const arr *x, int64_t i) {
    if (!x->buf[0] || !x->blen[0]) return 1;
    return (x->buf[0][i >> 3] >> (i & 7)) & 1;
}

static int n_buffers(int ty) {
    switch (ty) {
    case A_NULL: return 0;
    case A_STRUCT: return 1;
    case A_BINARY: case A_UTF8: case A_LBINARY: case A_LUTF8: return 3;
    default: return 2;
    }
}

/* Takes node i's FieldNode and buffers (pre-order), checking their sizes for its length. */
static wm_status take_arrays(ar *a, batch *bt, size_t i, wm_error *err) {
    const anode *n = &a->nodes[i];
    arr *x = &bt->arrs[i];
    if (bt->ni >= bt->n_nodes) return bad(a, "fewer field nodes than fields", err);
    size_t fn = bt->nodes_v + 4 + 16 * bt->ni++;
    x->len = (int64_t)fb_le(bt->m, fn, 8), x->nulls = (int64_t)fb_le(bt->m, fn + 8, 8);
    if (x->len < 0 || x->nulls < 0 || x->nulls > x->len) return bad(a, "a field node's length", err);
    int nb = n_buffers(n->type);
    for (int k = 0; k < nb; k++) {
        if (bt->bi >= bt->n_bufs) return bad(a, "fewer buffers than fields need", err);
        size_t be = bt->bufs_v + 4 + 16 * bt->bi++;
        int64_t off = (int64_t)fb_le(bt->m, be, 8), bl = (int64_t)fb_le(bt->m, be + 8, 8);
        if (off < 0 || bl < 0 || (uint64_t)off > bt->body_len || (uint64_t)bl > bt->body_len - (uint64_t)off)
            return wm_err(err, WM_ERR_INPUT, "%s: column %s: a buffer lies outside the record batch's body",
                          a->label, n->name);
        x->buf[k] = bt->body + off, x->blen[k] = (size_t)bl;
    }
    uint64_t len = (uint64_t)x->len;
    const char *why = NULL;
    if (nb && x->blen[0] && x->blen[0] < (len + 7) / 8) why = "its validity bitmap is short";
    if (nb && !x->blen[0] && x->nulls) why = "nulls without a validity bitmap";
    int ty = n->type;
    if ((ty == A_INT && x->blen[1] / ((size_t)n->bits / 8) < len) ||
        (ty == A_FLOAT && x->blen[1] / (n->width == 1 ? 4 : 8) < len) || (ty == A_BOOL && x->blen[1] < (len + 7) / 8) ||
        (ty == A_FSB && x->blen[1] / (size_t)n->width < len))
        why = "its values buffer is short";
    int wide = ty == A_LBINARY || ty == A_LUTF8 || ty == A_LLIST;
    if ((ty == A_BINARY || ty == A_UTF8 || ty == A_LBINARY || ty == A_LUTF8 || ty == A_LIST || ty == A_LLIST) &&
        len && (len + 1) > x->blen[1] / (wide ? 8 : 4))
        why = "its offsets buffer is short";
    if (why) return wm_err(err, WM_ERR_INPUT, "%s: column %s: %s", a->label, n->name, why);
    return WM_OK;
}

static int64_t offset_at(const arr *x, int wide, int64_t i) {
    if (wide) {
        int64_t v;
        memcpy(&v, x->buf[1] + 8 * i, 8);
        return v;
    }
    int32_t v;
    memcpy(&v, x->buf[1] + 4 * i, 4);
    return v;
}

/* The text of element i of leaf node n (array x) in a new string (*len its bytes); NULL with *len (size_t)-1 on a
   malformed offset, NULL with 0 out of memory. */
static char *render(const anode *n, const arr *x, int64_t i, size_t *len) {
    char b[64];
    *len = 0;
    switch (n->type) {
    case A_BINARY: case A_UTF8: case A_LBINARY: case A_LUTF8: {
        int wide = n->type == A_LBINARY || n->type == A_LUTF8;
        int64_t s = offset_at(x, wide, i), e = offset_at(x, wide, i + 1);
        if (s < 0 || e < s || (uint64_t)e > x->blen[2]) return *len = (size_t)-1, NULL;
        char *p = malloc((size_t)(e - s) + 1);
        if (!p) return NULL;
        if (e > s) memcpy(p, x->buf[2] + s, (size_t)(e - s));
        p[e - s] = 0;
        *len = (size_t)(e - s);
        return p;
    }
    case A_FSB: {
        char *p = malloc((size_t)n->width + 1);
        if (!p) return NULL;
        memcpy(p, x->buf[1] + (size_t)i * (size_t)n->width, (size_t)n->width);
        p[n->width] = 0;
        *len = (size_t)n->width;
        return p;
    }
    case A_BOOL: snprintf(b, sizeof b, "%s", (x->buf[1][i >> 3] >> (i & 7)) & 1 ? "true" : "false"); break;
    case A_FLOAT:
        if (n->width == 1) {
            float v;
            memcpy(&v, x->buf[1] + 4 * i, 4);
            wm_table_fmt_float(b, sizeof b, v);
        } else {
            double v;
            memcpy(&v, x->buf[1] + 8 * i, 8);
            wm_table_fmt_double(b, sizeof b, v);
        }
        break;
    default: { /* A_INT */
        size_t w = (size_t)n->bits / 8;
        uint64_t u = 0;
        memcpy(&u, x->buf[1] + w * (size_t)i, w);
        if (n->is_signed && w < 8 && (u >> (8 * w - 1)) & 1) u |= ~(uint64_t)0 << (8 * w);
        if (n->is_signed) snprintf(b, sizeof b, "%lld", (long long)(int64_t)u);
        else snprintf(b, sizeof b, "%llu", (unsigned long long)u);
    }
    }
    *len = strlen(b);
    return strdup(b);
}

/* Whether row r of node i and of every struct above it is valid. */
static int row_valid(ar *a, batch *bt, int i, int64_t r) {
    for (; i >= 0; i = a->nodes[i].parent)
        if (!valid_at(&bt->arrs[i], r)) return 0;
    return 1;
}

static wm_status read_batch(ar *a, fb *m, size_t rb, const uint8_t *body, size_t body_len, wm_error *err) {
    if (fb_field(m, rb, 3)) return wm_err(err, WM_ERR_INPUT, "%s: compressed record batches are not supported",
                                          a->label);
    int64_t rows = fb_int(m, rb, 0, 8, 0);
    batch bt = {m, fb_ref(m, rb, 1), fb_ref(m, rb, 2), 0, 0, 0, 0, body, body_len, NULL};
    bt.n_nodes = fb_vec(m, bt.nodes_v, 16), bt.n_bufs = fb_vec(m, bt.bufs_v, 16);
    if (m->bad || rows < 0) return bad(a, "a record batch", err);
    wm_table *t = a->t;
    size_t take = (size_t)rows;
    if (a->max_rows && take > a->max_rows - t->n_rows) take = a->max_rows - t->n_rows;
    if (take > (a->cells_max / t->n_cols) - t->n_rows)
        return wm_err(err, WM_ERR_INPUT, "%s: over the cap of %zu cells", a->label, a->cells_max);
    if (!(bt.arrs = calloc(a->nn, sizeof *bt.arrs))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    wm_status st = WM_OK;
    for (size_t i = 0; i < a->nn && !st; i++) {
        st = take_arrays(a, &bt, i, err);
        if (!st && a->nodes[i].parent < 0 && bt.arrs[i].len < rows)
            st = wm_err(err, WM_ERR_INPUT, "%s: column %s: %lld values in a batch of %lld rows", a->label,
                        a->nodes[i].name, (long long)bt.arrs[i].len, (long long)rows);
        if (!st && a->nodes[i].parent >= 0 && !a->nodes[i].depth_list &&
            bt.arrs[i].len < bt.arrs[a->nodes[i].parent].len)
            st = wm_err(err, WM_ERR_INPUT, "%s: column %s: fewer values than its struct", a->label, a->nodes[i].name);
    }
    size_t n0 = t->n_rows, nc = t->n_cols, need = n0 + take;
    if (!st && need > a->rows_cap) {
        size_t cap = a->rows_cap ? a->rows_cap : 256;
        while (cap < need) cap *= 2;
        char **cells = realloc(t->cells, cap * nc * sizeof *cells);
        if (cells) t->cells = cells;
        size_t *sizes = cells ? realloc(t->sizes, cap * nc * sizeof *sizes) : NULL;
        if (sizes) t->sizes = sizes;
        size_t *lines = sizes ? realloc(t->lines, cap * sizeof *lines) : NULL;
        if (lines) t->lines = lines, a->rows_cap = cap;
        else st = wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    if (!st && take) { /* (a batch of no rows to keep leaves the table as it is, its arrays still checked) */
        memset(t->cells + n0 * nc, 0, take * nc * sizeof *t->cells);
        memset(t->sizes + n0 * nc, 0, take * nc * sizeof *t->sizes);
        for (size_t r = 0; r < take; r++) t->lines[n0 + r] = n0 + r + 1;
        t->n_rows = need; /* filled below; NULL cells until then, freed on an error */
    }
    for (size_t i = 0; i < a->nn && !st; i++) {
        const anode *n = &a->nodes[i];
        if (n->col < 0) continue;
        int is_list = n->type == A_LIST || n->type == A_LLIST;
        const anode *el = is_list ? &a->nodes[i + 1] : n;
        const arr *ex = is_list ? &bt.arrs[i + 1] : &bt.arrs[i];
        for (size_t r = 0; r < take && !st; r++) {
            size_t at = (n0 + r) * nc + (size_t)n->col, len;
            if (!row_valid(a, &bt, (int)i, (int64_t)r) || n->type == A_NULL) continue;
            if (!is_list) {
                char *s = render(n, ex, (int64_t)r, &len);
                if (!s) st = len ? wm_err(err, WM_ERR_INPUT, "%s: column %s: an offset outside its data", a->label,
                                          n->name)
                                 : wm_err(err, WM_ERR_NOMEM, "out of memory");
                t->cells[at] = s, t->sizes[at] = s ? len : 0;
                continue;
            }
            int64_t s0 = offset_at(&bt.arrs[i], n->type == A_LLIST, (int64_t)r);
            int64_t s1 = offset_at(&bt.arrs[i], n->type == A_LLIST, (int64_t)r + 1);
            if (s0 < 0 || s1 < s0 || s1 > ex->len) {
                st = wm_err(err, WM_ERR_INPUT, "%s: column %s: a list offset outside its elements", a->label, n->name);
                break;
            }
            /* A list's elements render to at least a byte each, and a Null (or all-null) child claims any length
               with no buffer behind it: the elements are charged to the bytes cap before a node is made (the
               printed text after), and one list holds at most WM_TABLE_MAX_LIST of them. */
            if ((uint64_t)(s1 - s0) > a->bytes_left || (uint64_t)(s1 - s0) > WM_TABLE_MAX_LIST) {
                st = wm_err(err, WM_ERR_INPUT, "%s: column %s: a list of %lld elements is over the cap (%llu bytes "
                            "left to read, at most %lld elements a list)", a->label, n->name, (long long)(s1 - s0),
                            (unsigned long long)a->bytes_left, (long long)WM_TABLE_MAX_LIST);
                break;
            }
            cJSON *list = cJSON_CreateArray();
            for (int64_t e = s0; list && e < s1 && !st; e++) {
                cJSON *v = NULL;
                if (!valid_at(ex, e) || el->type == A_NULL) v = cJSON_CreateNull();
                else {
                    char *s = render(el, ex, e, &len);
                    if (!s && len) st = wm_err(err, WM_ERR_INPUT, "%s: column %s: an offset outside its data",
                                               a->label, n->name);
                    else if (s) {
                        int str = el->type == A_BINARY || el->type == A_UTF8 || el->type == A_LBINARY ||
                                  el->type == A_LUTF8 || el->type == A_FSB;
                        v = str ? cJSON_CreateString(s) : cJSON_CreateRaw(s);
                        free(s);
                    }
                }
                if (!v) { /* a node not made is out of memory, not a shorter list */
                    if (!st) st = wm_err(err, WM_ERR_NOMEM, "out of memory");
                    break;
                }
                cJSON_AddItemToArray(list, v);
            }
            char *txt = list && !st ? cJSON_PrintUnformatted(list) : NULL;
            cJSON_Delete(list);
            if (!st && !txt) st = wm_err(err, WM_ERR_NOMEM, "out of memory");
            size_t tl = txt ? strlen(txt) : 0;
            if (!st && tl > a->bytes_left)
                st = wm_err(err, WM_ERR_INPUT, "%s: column %s: the lists' text is over the cap on bytes read", a->label,
                            n->name);
            if (!st) a->bytes_left -= tl;
            t->cells[at] = txt, t->sizes[at] = tl;
        }
    }
    free(bt.arrs);
    return st;
}

/* ---------------------------------------------------------------- messages */

static wm_status parse(ar *a, const wm_parquet_opts *o, wm_table *t, wm_error *err) {
    memset(t, 0, sizeof *t);
    a->t = t;
    a->bytes_left = o && o->max_bytes ? o->max_bytes : WM_PARQUET_MAX_BYTES;
    a->cells_max = o && o->max_cells ? o->max_cells : WM_PARQUET_MAX_CELLS;
    a->max_rows = o ? o->max_rows : 0;
    wm_status st = WM_OK;
    uint64_t pos = 0;
    uint8_t head[8];
    if (a->size >= 8 && !(st = read_at(a, 0, 8, head, err)) && !memcmp(head, "ARROW1\0\0", 8)) pos = 8;
    int have_schema = 0;
    uint8_t *meta = NULL, *body = NULL;
    while (!st && pos + 4 <= a->size && !(a->max_rows && t->n_rows >= a->max_rows)) {
        uint32_t len = 0;
        if ((st = read_at(a, pos, 4, (uint8_t *)&len, err))) break;
        pos += 4;
        if (len == 0xFFFFFFFFu) { /* the continuation marker, then the length */
            if (pos + 4 > a->size) break;
            if ((st = read_at(a, pos, 4, (uint8_t *)&len, err))) break;
            pos += 4;
        }
        if (!len) break; /* end of stream */
        if (len > a->size - pos) {
            st = bad(a, "a message's metadata runs past the end of the file", err);
            break;
        }
        free(meta);
        if (!(meta = malloc(len))) {
            st = wm_err(err, WM_ERR_NOMEM, "out of memory");
            break;
        }
        if ((st = read_at(a, pos, len, meta, err))) break;
        pos += len;
        fb m = {meta, len, 0};
        size_t root = (size_t)fb_le(&m, 0, 4);
        int htype = (int)fb_int(&m, root, 1, 1, 0);
        size_t hdr = fb_ref(&m, root, 2);
        int64_t blen = fb_int(&m, root, 3, 8, 0);
        if (m.bad || !hdr || blen < 0 || (uint64_t)blen > a->size - pos) {
            st = bad(a, "a message header", err);
            break;
        }
        if ((uint64_t)blen > a->bytes_left) {
            st = wm_err(err, WM_ERR_INPUT, "%s: the record batches are over the cap on bytes read", a->label);
            break;
        }
        a->bytes_left -= (uint64_t)blen;
        if (htype == 1) {
            if (have_schema) st = bad(a, "a second schema", err);
            else st = read_schema(a, &m, hdr, err);
            have_schema = 1;
            pos += (uint64_t)blen;
            continue;
        }
        if (htype == 2) {
            st = wm_err(err, WM_ERR_INPUT, "%s: dictionary batches are not supported", a->label);
            break;
        }
        if (htype != 3) {
            st = wm_err(err, WM_ERR_INPUT, "%s: an IPC message of type %d (a schema and record batches are read)",
                        a->label, htype);
            break;
        }
        if (!have_schema) {
            st = bad(a, "a record batch before the schema", err);
            break;
        }
        free(body);
        if (!(body = malloc((size_t)blen + 1))) {
            st = wm_err(err, WM_ERR_NOMEM, "out of memory");
            break;
        }
        if ((st = read_at(a, pos, (size_t)blen, body, err))) break;
        pos += (uint64_t)blen;
        st = read_batch(a, &m, hdr, body, (size_t)blen, err);
    }
    if (!st && !have_schema) st = bad(a, "no schema message", err);
    free(meta);
    free(body);
    for (size_t i = 0; i < a->nn; i++) free(a->nodes[i].name);
    free(a->nodes);
    if (st) wm_table_free(t);
    return st;
}

wm_status wm_arrow_parse(const uint8_t *buf, size_t len, const char *label, const wm_parquet_opts *o, wm_table *t,
                         wm_error *err) {
    ar a = {.mem = buf ? buf : (const uint8_t *)"", .size = buf ? len : 0, .label = label};
    return parse(&a, o, t, err);
}

wm_status wm_arrow_read(const char *path, const wm_parquet_opts *o, wm_table *t, wm_error *err) {
    memset(t, 0, sizeof *t);
    wm_map m;
    wm_status st = wm_map_file(path, 0, &m, err);
    if (st) return st;
    st = wm_arrow_parse(m.data, m.size, path, o, t, err);
    wm_unmap(&m);
    return st;
}
