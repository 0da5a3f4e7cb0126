/* parquet.c - Parquet files into a table of cells (see parquet.h). Little-endian hosts (as the format). */
#include "core/parquet.h"

#include <cjson/cJSON.h>
#include <snappy-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "core/error.h"
#include "core/file.h"
#include "core/thrift.h"

#define MAX_SCHEMA 4096        /* schema elements */
#define MAX_DEPTH 16           /* of the schema tree */
#define MAX_PAGE_VALUES (1u << 24)
#define MAX_ROW_GROUPS 1000000
#define MAX_NAME 1024

enum { T_BOOLEAN, T_INT32, T_INT64, T_INT96, T_FLOAT, T_DOUBLE, T_BYTE_ARRAY, T_FLBA };
static const char *const type_names[] = {"BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE", "BYTE_ARRAY",
                                         "FIXED_LEN_BYTE_ARRAY"};
static const char *const codec_names[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"};
static const char *const enc_names[] = {"PLAIN", "GROUP_VAR_INT", "PLAIN_DICTIONARY", "RLE", "BIT_PACKED",
                                        "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY",
                                        "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"};
#define NAME_OF(tab, i) ((i) >= 0 && (size_t)(i) < sizeof tab / sizeof *tab ? tab[i] : "unknown")

/* ---------------------------------------------------------------- metadata */

typedef struct selem {
    int type, type_len, rep, nchild, conv;
    const uint8_t *name;
    size_t name_len;
} selem;

typedef struct cmeta {
    int type, codec;
    int64_t num_values, total_comp, data_off, dict_off;
} cmeta;

typedef struct rgroup {
    int64_t num_rows;
    size_t ncols;
    cmeta *cols;
} rgroup;

typedef struct leaf {
    char *name;
    int type, type_len, conv, max_def, max_rep, list_def; /* list_def: the level at which the list is there */
} leaf;

typedef struct pq {
    const uint8_t *mem; /* the file's bytes (mapped by *_read) */
    uint64_t size, data_end; /* data_end: where the footer starts */
    const char *label;
    uint64_t bytes_left;     /* of max_bytes */
    uint8_t *footer;
    selem *schema;
    size_t nschema;
    int64_t num_rows;
    rgroup *rgs;
    size_t nrg;
    leaf *leaves;
    size_t nleaves;
} pq;

static wm_status bad_meta(pq *q, const char *what, wm_error *err) {
    return wm_err(err, WM_ERR_INPUT, "%s: malformed parquet footer (%s)", q->label, what);
}

static wm_status read_at(pq *q, uint64_t off, size_t n, uint8_t *out, wm_error *err) {
    if (off > q->size || n > q->size - off)
        return wm_err(err, WM_ERR_INPUT, "%s: %zu bytes at offset %llu lie past the end of the file (%llu bytes)",
                      q->label, n, (unsigned long long)off, (unsigned long long)q->size);
    memcpy(out, q->mem + off, n);
    return WM_OK;
}

static void parse_selem(wm_tc *c, selem *e) {
    int id = 0, ty;
    memset(e, 0, sizeof *e);
    e->type = -1, e->conv = -1;
    while (wm_tc_field(c, &id, &ty)) {
        if (id == 1) e->type = (int)wm_tc_ival(c, ty);
        else if (id == 2) e->type_len = (int)wm_tc_ival(c, ty);
        else if (id == 3) e->rep = (int)wm_tc_ival(c, ty);
        else if (id == 4 && ty == 8) wm_tc_bin(c, &e->name, &e->name_len);
        else if (id == 5) e->nchild = (int)wm_tc_ival(c, ty);
        else if (id == 6) e->conv = (int)wm_tc_ival(c, ty);
        else wm_tc_skip(c, ty, 1);
    }
}

static void parse_cmeta(wm_tc *c, cmeta *m) {
    int id = 0, ty;
    while (wm_tc_field(c, &id, &ty)) {
        if (id == 1) m->type = (int)wm_tc_ival(c, ty);
        else if (id == 4) m->codec = (int)wm_tc_ival(c, ty);
        else if (id == 5) m->num_values = wm_tc_ival(c, ty);
        else if (id == 7) m->total_comp = wm_tc_ival(c, ty);
        else if (id == 9) m->data_off = wm_tc_ival(c, ty);
        else if (id == 11) m->dict_off = wm_tc_ival(c, ty);
        else wm_tc_skip(c, ty, 3);
    }
}

static wm_status parse_rowgroup(pq *q, wm_tc *c, rgroup *g, wm_error *err) {
    int id = 0, ty;
    while (wm_tc_field(c, &id, &ty)) {
        if (id == 1 && ty == 9 && !g->cols) {
            int et;
            uint64_t n = wm_tc_list(c, &et);
            if (c->bad || et != 12 || n > MAX_SCHEMA) return bad_meta(q, "a row group's column list", err);
            if (n && !(g->cols = calloc(n, sizeof *g->cols))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
            g->ncols = n;
            for (uint64_t i = 0; i < n && !c->bad; i++) {
                cmeta *m = &g->cols[i];
                m->type = -1, m->data_off = -1;
                int cid = 0, cty;
                while (wm_tc_field(c, &cid, &cty)) {
                    if (cid == 1 && cty == 8) {
                        const uint8_t *s;
                        size_t sn;
                        wm_tc_bin(c, &s, &sn);
                        if (sn) return wm_err(err, WM_ERR_INPUT, "%s: a column chunk lies in another file ('%.*s'): "
                                              "not supported", q->label, (int)(sn > 200 ? 200 : sn), (const char *)s);
                    } else if (cid == 3 && cty == 12) parse_cmeta(c, m);
                    else wm_tc_skip(c, cty, 2);
                }
            }
        } else if (id == 3) g->num_rows = wm_tc_ival(c, ty);
        else wm_tc_skip(c, ty, 1);
    }
    return c->bad ? bad_meta(q, "a row group", err) : WM_OK;
}

static wm_status parse_footer(pq *q, const uint8_t *p, size_t n, wm_error *err) {
    wm_tc c = {p, p + n, 0};
    int id = 0, ty, seen_schema = 0, seen_rows = 0;
    wm_status st;
    while (wm_tc_field(&c, &id, &ty)) {
        if (id == 2 && ty == 9 && !seen_schema) {
            int et;
            uint64_t k = wm_tc_list(&c, &et);
            if (c.bad || et != 12 || !k || k > MAX_SCHEMA) return bad_meta(q, "the schema list", err);
            if (!(q->schema = calloc(k, sizeof *q->schema))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
            q->nschema = k, seen_schema = 1;
            for (uint64_t i = 0; i < k && !c.bad; i++) parse_selem(&c, &q->schema[i]);
        } else if (id == 3) q->num_rows = wm_tc_ival(&c, ty), seen_rows = 1;
        else if (id == 4 && ty == 9 && !q->rgs) {
            int et;
            uint64_t k = wm_tc_list(&c, &et);
            if (c.bad || et != 12 || k > MAX_ROW_GROUPS) return bad_meta(q, "the row group list", err);
            if (k && !(q->rgs = calloc(k, sizeof *q->rgs))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
            q->nrg = k;
            for (uint64_t i = 0; i < k; i++)
                if ((st = parse_rowgroup(q, &c, &q->rgs[i], err))) return st;
        } else wm_tc_skip(&c, ty, 1);
    }
    if (c.bad) return bad_meta(q, "truncated or invalid Thrift data", err);
    if (!seen_schema) return bad_meta(q, "no schema", err);
    if (!seen_rows || q->num_rows < 0) return bad_meta(q, "no row count", err);
    return WM_OK;
}

/* The leaves of the schema subtree at *i (advanced past it), under prefix with the levels so far. */
static wm_status walk(pq *q, size_t *i, int depth, const char *prefix, int def, int rep, int list_def,
                      wm_error *err) {
    if (*i >= q->nschema) return bad_meta(q, "the schema has fewer elements than its groups' children", err);
    if (depth > MAX_DEPTH) return bad_meta(q, "the schema nests too deep", err);
    const selem *e = &q->schema[(*i)++];
    if (e->rep < 0 || e->rep > 2) return bad_meta(q, "a repetition type out of range", err);
    if (e->nchild < 0 || (size_t)e->nchild > q->nschema) return bad_meta(q, "a child count out of range", err);
    def += e->rep != 0;
    if (e->rep == 2) rep++, list_def = def;
    char name[MAX_NAME];
    int nl = (int)(e->name_len > 200 ? 200 : e->name_len);
    if (*prefix) snprintf(name, sizeof name, "%s.%.*s", prefix, nl, (const char *)e->name);
    else snprintf(name, sizeof name, "%.*s", nl, (const char *)e->name);
    if (e->nchild > 0) {
        for (int k = 0; k < e->nchild; k++) {
            wm_status st = walk(q, i, depth + 1, name, def, rep, list_def, err);
            if (st) return st;
        }
        return WM_OK;
    }
    if (e->type < T_BOOLEAN || e->type > T_FLBA) return bad_meta(q, "a leaf without a physical type", err);
    /* the list wrappers of the LIST layout are not part of the name: "answers.text.list.element" is "answers.text" */
    size_t L = strlen(name);
    static const char *const wrap[] = {".list.element", ".list.item", ".bag.array_element", ".array"};
    for (size_t w = 0; rep && w < sizeof wrap / sizeof *wrap; w++) {
        size_t k = strlen(wrap[w]);
        if (L > k && !strcmp(name + L - k, wrap[w])) {
            name[L - k] = 0;
            break;
        }
    }
    if (q->nleaves >= MAX_SCHEMA) return bad_meta(q, "too many columns", err);
    leaf *lf = &q->leaves[q->nleaves];
    if (!(lf->name = strdup(name))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    q->nleaves++;
    lf->type = e->type, lf->type_len = e->type_len, lf->conv = e->conv;
    lf->max_def = def, lf->max_rep = rep, lf->list_def = list_def;
    if (rep > 1)
        return wm_err(err, WM_ERR_INPUT, "%s: column %s: nested lists (%d levels of repetition) are not supported",
                      q->label, name, rep);
    if (e->type == T_INT96)
        return wm_err(err, WM_ERR_INPUT, "%s: column %s: INT96 (legacy timestamps) is not supported", q->label, name);
    if (e->type == T_FLBA && (e->type_len < 1 || e->type_len > (1 << 20)))
        return wm_err(err, WM_ERR_INPUT, "%s: column %s: FIXED_LEN_BYTE_ARRAY of length %d", q->label, name,
                      e->type_len);
    return WM_OK;
}

static wm_status read_meta(pq *q, wm_error *err) {
    uint8_t tail[8], head[4];
    wm_status st;
    if (q->size < 12) return wm_err(err, WM_ERR_INPUT, "%s: not a parquet file (%llu bytes)", q->label,
                                    (unsigned long long)q->size);
    if ((st = read_at(q, 0, 4, head, err)) || (st = read_at(q, q->size - 8, 8, tail, err))) return st;
    if (!memcmp(tail + 4, "PARE", 4)) return wm_err(err, WM_ERR_INPUT, "%s: an encrypted parquet file: not supported",
                                                    q->label);
    if (memcmp(head, "PAR1", 4) || memcmp(tail + 4, "PAR1", 4))
        return wm_err(err, WM_ERR_INPUT, "%s: not a parquet file (no PAR1 magic at its start and end)", q->label);
    uint32_t flen;
    memcpy(&flen, tail, 4);
    if (flen == 0 || flen > q->size - 12)
        return wm_err(err, WM_ERR_INPUT, "%s: the footer length %u does not fit the file (%llu bytes)", q->label, flen,
                      (unsigned long long)q->size);
    q->data_end = q->size - 8 - flen;
    if (!(q->footer = malloc(flen))) return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", q->label);
    if ((st = read_at(q, q->data_end, flen, q->footer, err))) return st;
    if ((st = parse_footer(q, q->footer, flen, err))) return st;
    const selem *root = &q->schema[0];
    if (root->nchild <= 0) return bad_meta(q, "the schema root has no columns", err);
    if (!(q->leaves = calloc(q->nschema, sizeof *q->leaves))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    size_t i = 1;
    for (int k = 0; k < root->nchild; k++)
        if ((st = walk(q, &i, 1, "", 0, 0, 0, err))) return st;
    if (!q->nleaves) return bad_meta(q, "no columns", err);
    int64_t sum = 0;
    for (size_t g = 0; g < q->nrg; g++) {
        const rgroup *r = &q->rgs[g];
        if (r->num_rows < 0 || r->num_rows > INT64_MAX - sum) return bad_meta(q, "a row group's row count", err);
        sum += r->num_rows;
        if (r->ncols != q->nleaves)
            return wm_err(err, WM_ERR_INPUT, "%s: row group %zu has %zu column chunks, the schema %zu columns",
                          q->label, g, r->ncols, q->nleaves);
        for (size_t c = 0; c < r->ncols; c++)
            if (r->cols[c].type != q->leaves[c].type)
                return wm_err(err, WM_ERR_INPUT, "%s: column %s: row group %zu stores %s, the schema says %s",
                              q->label, q->leaves[c].name, g, NAME_OF(type_names, r->cols[c].type),
                              NAME_OF(type_names, q->leaves[c].type));
    }
    if (sum != q->num_rows)
        return wm_err(err, WM_ERR_INPUT, "%s: the row groups hold %lld rows, the footer says %lld", q->label,
                      (long long)sum, (long long)q->num_rows);
    return WM_OK;
}

/* ---------------------------------------------------------------- pages */

/* The RLE / bit-packed hybrid (levels, dictionary indices, RLE booleans) over [p, end) of bit width bw. */
typedef struct hyb {
    const uint8_t *p, *end, *bp;
    int bw, packed;
    uint32_t val;
    uint64_t left, idx;
} hyb;

/* The next value in *v: 0, or -1 when the data ends or is malformed. */
static int hyb_next(hyb *h, uint32_t *v) {
    if (!h->left) {
        wm_tc c = {h->p, h->end, 0};
        uint64_t hdr = wm_tc_varint(&c);
        if (c.bad) return -1;
        h->p = c.p;
        if (hdr & 1) {
            uint64_t groups = hdr >> 1, nbytes = groups * (uint64_t)h->bw, avail = (uint64_t)(h->end - h->p);
            if (!groups || groups > MAX_PAGE_VALUES) return -1;
            h->left = groups * 8;
            if (nbytes > avail) { /* a last group cut short: the values its bytes hold */
                nbytes = avail;
                h->left = nbytes * 8 / (uint64_t)h->bw;
                if (!h->left) return -1;
            }
            h->packed = 1, h->bp = h->p, h->idx = 0;
            h->p += nbytes;
        } else {
            h->left = hdr >> 1;
            if (!h->left || h->left > MAX_PAGE_VALUES) return -1;
            int nb = (h->bw + 7) / 8;
            if (h->end - h->p < nb) return -1;
            h->val = 0;
            for (int k = 0; k < nb; k++) h->val |= (uint32_t)h->p[k] << (8 * k);
            h->p += nb;
            h->packed = 0;
        }
    }
    h->left--;
    if (!h->packed) {
        *v = h->val;
        return 0;
    }
    uint64_t bit = h->idx++ * (uint64_t)h->bw;
    uint32_t x = 0;
    for (int k = 0; k < h->bw; k++, bit++) x |= (uint32_t)((h->bp[bit >> 3] >> (bit & 7)) & 1) << k;
    *v = x;
    return 0;
}

static int bit_width(uint32_t max) {
    int w = 0;
    while (max) w++, max >>= 1;
    return w;
}

typedef struct cellv { /* one rendered value */
    char *s;
    size_t n;
} cellv;

/* The text of a value of leaf l's type at p (n bytes: the bytes of a byte array), a new string. */
static char *render(const leaf *l, const uint8_t *p, size_t n, size_t *out_n) {
    char b[64];
    if (l->type == T_BYTE_ARRAY || l->type == T_FLBA) {
        char *s = malloc(n + 1);
        if (!s) return NULL;
        if (n) memcpy(s, p, n);
        s[n] = 0;
        *out_n = n;
        return s;
    }
    switch (l->type) {
    case T_BOOLEAN: snprintf(b, sizeof b, "%s", *p ? "true" : "false"); break;
    case T_INT32: {
        int32_t v;
        memcpy(&v, p, 4);
        if (l->conv == 14) snprintf(b, sizeof b, "%u", (unsigned)v); /* UINT_32 */
        else snprintf(b, sizeof b, "%d", (int)v);
        break;
    }
    case T_INT64: {
        int64_t v;
        memcpy(&v, p, 8);
        if (l->conv == 16) snprintf(b, sizeof b, "%llu", (unsigned long long)v); /* UINT_64 */
        else snprintf(b, sizeof b, "%lld", (long long)v);
        break;
    }
    case T_FLOAT: {
        float v;
        memcpy(&v, p, 4);
        wm_table_fmt_float(b, sizeof b, v);
        break;
    }
    default: {
        double v;
        memcpy(&v, p, 8);
        wm_table_fmt_double(b, sizeof b, v);
    }
    }
    *out_n = strlen(b);
    return strdup(b);
}

/* PLAIN values of leaf l over [p, end) (booleans: bit-packed, or an RLE run when rle). */
typedef struct plain {
    const uint8_t *p, *end;
    uint64_t bit;
    int rle;
    hyb h;
} plain;

/* The next value, rendered: 0, -1 at the end of the data, -2 out of memory. */
static int plain_next(plain *v, const leaf *l, cellv *out) {
    uint8_t tmp;
    const uint8_t *at = v->p;
    size_t n = 0, avail = (size_t)(v->end - v->p);
    switch (l->type) {
    case T_BOOLEAN:
        if (v->rle) {
            uint32_t x;
            if (hyb_next(&v->h, &x)) return -1;
            tmp = x != 0;
        } else {
            if ((v->bit >> 3) >= avail) return -1;
            tmp = (v->p[v->bit >> 3] >> (v->bit & 7)) & 1;
            v->bit++;
        }
        at = &tmp;
        break;
    case T_INT32: case T_FLOAT: n = 4; goto fixed;
    case T_INT64: case T_DOUBLE: n = 8; goto fixed;
    case T_FLBA:
        n = (size_t)l->type_len;
    fixed:
        if (avail < n) return -1;
        v->p += n;
        break;
    default: {
        uint32_t len;
        if (avail < 4) return -1;
        memcpy(&len, v->p, 4);
        if (len > avail - 4) return -1;
        at = v->p + 4, n = len;
        v->p += 4 + (size_t)len;
    }
    }
    if (!(out->s = render(l, at, n, &out->n))) return -2;
    return 0;
}

/* A column chunk being read into the table's column col. */
typedef struct chunk {
    pq *q;
    const leaf *l;
    const cmeta *m;
    wm_table *t;
    size_t col, row, row_end; /* the next row to fill, the end of this row group's rows to keep */
    cellv *dict;
    size_t ndict;
    cJSON *list;              /* the list of the row being put together (list columns) */
    size_t list_n;            /* its elements so far (at most WM_TABLE_MAX_LIST) */
    int list_null, in_row;
    size_t g;                 /* row group, for messages */
} chunk;

static wm_status col_err(chunk *k, wm_error *err, const char *fmt, const char *what) {
    return wm_err(err, WM_ERR_INPUT, "%s: column %s, row group %zu: %s%s", k->q->label, k->l->name, k->g, fmt,
                  what ? what : "");
}

static wm_status nomem(chunk *k, wm_error *err) {
    return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", k->q->label);
}

static void put_cell(chunk *k, char *s, size_t n) {
    size_t at = k->row * k->t->n_cols + k->col;
    k->t->cells[at] = s;
    k->t->sizes[at] = n;
    k->row++;
}

/* The list of the row put together so far into its cell. */
static wm_status end_list(chunk *k, wm_error *err) {
    if (!k->in_row) return WM_OK;
    k->in_row = 0;
    if (k->row >= k->row_end) return WM_OK;
    if (k->list_null) {
        put_cell(k, NULL, 0);
        return WM_OK;
    }
    char *s = cJSON_PrintUnformatted(k->list);
    cJSON_Delete(k->list);
    k->list = NULL;
    if (!s) return nomem(k, err);
    put_cell(k, s, strlen(s));
    return WM_OK;
}

static wm_status decompress(chunk *k, const uint8_t *src, size_t n, uint8_t *dst, size_t un, wm_error *err) {
    char why[160];
    if (!un && !n) return WM_OK; /* a page of nulls only: no values */
    switch (k->m->codec) {
    case 0:
        if (n != un) break;
        if (n) memcpy(dst, src, n);
        return WM_OK;
    case 1: {
        size_t ul;
        if (snappy_uncompressed_length((const char *)src, n, &ul) != SNAPPY_OK || ul != un) break;
        if (snappy_uncompress((const char *)src, n, (char *)dst, &ul) != SNAPPY_OK || ul != un) break;
        return WM_OK;
    }
    case 2: {
        z_stream z = {0};
        if (inflateInit2(&z, 15 + 32) != Z_OK) return nomem(k, err);
        z.next_in = (Bytef *)src, z.avail_in = (uInt)n;
        z.next_out = dst, z.avail_out = (uInt)un + 1; /* dst has a byte more: more output than un is caught */
        int zr = inflate(&z, Z_FINISH);
        uLong got = z.total_out;
        inflateEnd(&z);
        if (zr != Z_STREAM_END || got != un) break;
        return WM_OK;
    }
    case 6: {
        size_t r = ZSTD_decompress(dst, un, src, n);
        if (ZSTD_isError(r) || r != un) break;
        return WM_OK;
    }
    default:
        snprintf(why, sizeof why, "%s (UNCOMPRESSED, SNAPPY, GZIP and ZSTD are)", NAME_OF(codec_names, k->m->codec));
        return col_err(k, err, "unsupported codec ", why);
    }
    snprintf(why, sizeof why, "%s data that does not decompress to the page's %zu bytes",
             NAME_OF(codec_names, k->m->codec), un);
    return col_err(k, err, "", why);
}

/*
 * Whether n bytes of data (the first pre of them levels, stored as they are) can decompress to un bytes with codec
 * (0 when the page is not compressed): checked before the page's buffer is allocated, so a header that claims gigabytes
 * of a few bytes allocates nothing. SNAPPY: its stream's own length, validated; GZIP: deflate's 1032:1 at most;
 * ZSTD: the frame's content size when it has one, and 65536:1 at most (RLE blocks).
 */
static int plausible(int codec, const uint8_t *data, uint64_t n, uint64_t un, uint64_t pre) {
    if (pre > n || pre > un) return 0;
    n -= pre, un -= pre, data += pre;
    if (!n && !un) return 1;
    switch (codec) {
    case 0: return n == un;
    case 1: {
        size_t ul;
        return snappy_uncompressed_length((const char *)data, (size_t)n, &ul) == SNAPPY_OK && ul == un &&
               snappy_validate_compressed_buffer((const char *)data, (size_t)n) == SNAPPY_OK;
    }
    case 2: return un <= n * 1032 + 1024;
    case 6: {
        unsigned long long cs = ZSTD_getFrameContentSize(data, (size_t)n);
        if (cs != ZSTD_CONTENTSIZE_UNKNOWN && cs != ZSTD_CONTENTSIZE_ERROR && cs != un) return 0;
        return un <= n * 65536 + 65536;
    }
    default: return 1; /* refused by decompress with the codec's name */
    }
}

/* The values of a dictionary page (PLAIN, n of them) over [p, end). */
static wm_status read_dict(chunk *k, const uint8_t *p, size_t len, int64_t n, int enc, wm_error *err) {
    if (k->dict) return col_err(k, err, "a second dictionary page", NULL);
    if (enc != 0 && enc != 2) return col_err(k, err, "a dictionary page of encoding ", NAME_OF(enc_names, enc));
    if (n < 0 || n > MAX_PAGE_VALUES || (uint64_t)n > (uint64_t)len * 8 + 1)
        return col_err(k, err, "a dictionary page's value count out of range", NULL);
    if (!(k->dict = calloc((size_t)n + 1, sizeof *k->dict))) return nomem(k, err);
    plain v = {p, p + len, 0, 0, {0}};
    for (int64_t i = 0; i < n; i++) {
        int r = plain_next(&v, k->l, &k->dict[i]);
        if (r == -2) return nomem(k, err);
        if (r) return col_err(k, err, "the dictionary page ends before its values", NULL);
        k->ndict++;
    }
    return WM_OK;
}

/*
 * A data page's values: nv of them, with rep / def levels in [rl, rl+rn) / [dl, dl+dn) (RLE hybrid, no length
 * prefix), values of encoding enc over [vp, vp+vn).
 */
static wm_status read_values(chunk *k, int64_t nv, const uint8_t *rl, size_t rn, const uint8_t *dl, size_t dn,
                             int enc, const uint8_t *vp, size_t vn, wm_error *err) {
    const leaf *l = k->l;
    hyb rh = {rl, rl ? rl + rn : NULL, NULL, bit_width((uint32_t)l->max_rep), 0, 0, 0, 0}; /* NULL: no levels */
    hyb dh = {dl, dl ? dl + dn : NULL, NULL, bit_width((uint32_t)l->max_def), 0, 0, 0, 0};
    plain pv = {vp, vp + vn, 0, 0, {0}};
    hyb ih = {0};
    int dict = enc == 2 || enc == 8;
    if (dict) {
        if (!k->dict) return col_err(k, err, "dictionary-encoded values without a dictionary page", NULL);
        if (!vn || vp[0] > 32) return col_err(k, err, "a dictionary index bit width out of range", NULL);
        ih = (hyb){vp + 1, vp + vn, NULL, vp[0], 0, 0, 0, 0};
    } else if (enc == 3 && l->type == T_BOOLEAN) {
        uint32_t blen;
        if (vn < 4 || (memcpy(&blen, vp, 4), blen > vn - 4)) return col_err(k, err, "RLE booleans cut short", NULL);
        pv.rle = 1;
        pv.h = (hyb){vp + 4, vp + 4 + blen, NULL, 1, 0, 0, 0, 0};
    } else if (enc != 0)
        return col_err(k, err, "unsupported value encoding ", NAME_OF(enc_names, enc));
    if (nv < 0 || nv > MAX_PAGE_VALUES) return col_err(k, err, "a page's value count out of range", NULL);
    for (int64_t i = 0; i < nv; i++) {
        uint32_t r = 0, d = (uint32_t)l->max_def;
        if (l->max_rep && hyb_next(&rh, &r)) return col_err(k, err, "the repetition levels end early", NULL);
        if (l->max_def && hyb_next(&dh, &d)) return col_err(k, err, "the definition levels end early", NULL);
        if (r > (uint32_t)l->max_rep || d > (uint32_t)l->max_def)
            return col_err(k, err, "a level above the column's maximum", NULL);
        if (l->max_rep) {
            if (r == 0) {
                wm_status st = end_list(k, err);
                if (st) return st;
                if (k->row >= k->row_end) return WM_OK; /* the rows wanted are all there */
                k->in_row = 1;
                k->list_null = (int)d < l->list_def - 1;
                k->list_n = 0;
                if (!k->list_null && !(k->list = cJSON_CreateArray())) return nomem(k, err);
            } else if (!k->in_row) return col_err(k, err, "a page starts inside a row", NULL);
        } else if (k->row >= k->row_end) return WM_OK;
        cellv c = {NULL, 0};
        if ((int)d == l->max_def) {
            if (dict) {
                uint32_t ix;
                if (hyb_next(&ih, &ix)) return col_err(k, err, "the dictionary indices end early", NULL);
                if (ix >= k->ndict) return col_err(k, err, "a dictionary index past the dictionary", NULL);
                if (!(c.s = malloc(k->dict[ix].n + 1))) return nomem(k, err);
                memcpy(c.s, k->dict[ix].s, k->dict[ix].n + 1);
                c.n = k->dict[ix].n;
            } else {
                int rc = plain_next(&pv, l, &c);
                if (rc == -2) return nomem(k, err);
                if (rc) return col_err(k, err, "the page ends before its values", NULL);
            }
        }
        if (!l->max_rep) {
            put_cell(k, c.s, c.n);
            continue;
        }
        if ((int)d < l->list_def) { /* an empty or null list: no element */
            free(c.s);
            continue;
        }
        /* RLE levels claim millions of null elements in a few bytes: each element is charged a byte of the cap on
           bytes read (its text takes at least that), and one list holds at most WM_TABLE_MAX_LIST */
        if (++k->list_n > WM_TABLE_MAX_LIST || !k->q->bytes_left) {
            free(c.s);
            return col_err(k, err, k->list_n > WM_TABLE_MAX_LIST ? "a list of more than 4194304 elements (the cap)"
                                                              : "the lists' elements are over the cap on bytes read",
                           NULL);
        }
        k->q->bytes_left--;
        cJSON *e = !c.s ? cJSON_CreateNull()
                   : l->type == T_BYTE_ARRAY || l->type == T_FLBA ? cJSON_CreateString(c.s) : cJSON_CreateRaw(c.s);
        free(c.s);
        if (!e) return nomem(k, err);
        if (!k->list) { /* the row's list was null */
            cJSON_Delete(e);
            return col_err(k, err, "an element in a null list", NULL);
        }
        cJSON_AddItemToArray(k->list, e);
    }
    return WM_OK;
}

/* Reads the column chunk's pages until this row group's rows to keep are filled. */
static wm_status read_chunk(chunk *k, wm_error *err) {
    pq *q = k->q;
    const cmeta *m = k->m;
    int64_t start = m->dict_off > 0 && m->dict_off < m->data_off ? m->dict_off : m->data_off;
    if (start < 4 || m->total_comp <= 0 || (uint64_t)start > q->data_end ||
        (uint64_t)m->total_comp > q->data_end - (uint64_t)start)
        return col_err(k, err, "the column chunk's offset or size lies outside the file's data", NULL);
    if ((uint64_t)m->total_comp > q->bytes_left)
        return col_err(k, err, "the column chunk is over the cap on bytes read", NULL);
    size_t len = (size_t)m->total_comp;
    uint8_t *buf = malloc(len), *page = NULL;
    if (!buf) return nomem(k, err);
    wm_status st = read_at(q, (uint64_t)start, len, buf, err);
    size_t pos = 0;
    while (!st && pos < len && (k->row < k->row_end || k->in_row)) {
        wm_tc c = {buf + pos, buf + len, 0};
        int id = 0, ty, ptype = -1, enc = -1, v2_comp = 1;
        int64_t usz = -1, csz = -1, nv = -1, dlen = 0, rlen = 0;
        while (wm_tc_field(&c, &id, &ty)) {
            if (id == 1) ptype = (int)wm_tc_ival(&c, ty);
            else if (id == 2) usz = wm_tc_ival(&c, ty);
            else if (id == 3) csz = wm_tc_ival(&c, ty);
            else if ((id == 5 || id == 7 || id == 8) && ty == 12) {
                int sid = 0, sty;
                while (wm_tc_field(&c, &sid, &sty)) {
                    if (sid == 1) nv = wm_tc_ival(&c, sty);
                    else if (sid == 2 && id != 8) enc = (int)wm_tc_ival(&c, sty);
                    else if (id == 8 && sid == 4) enc = (int)wm_tc_ival(&c, sty);
                    else if (id == 8 && sid == 5) dlen = wm_tc_ival(&c, sty);
                    else if (id == 8 && sid == 6) rlen = wm_tc_ival(&c, sty);
                    else if (id == 8 && sid == 7 && (sty == 1 || sty == 2)) v2_comp = sty == 1;
                    else wm_tc_skip(&c, sty, 2);
                }
            } else wm_tc_skip(&c, ty, 1);
        }
        if (c.bad || ptype < 0 || usz < 0 || csz < 0) {
            st = col_err(k, err, "a malformed page header", NULL);
            break;
        }
        size_t hlen = (size_t)(c.p - (buf + pos));
        if ((uint64_t)csz > len - pos - hlen) {
            st = col_err(k, err, "a page runs past the end of its column chunk", NULL);
            break;
        }
        const uint8_t *data = buf + pos + hlen;
        pos += hlen + (size_t)csz;
        if (ptype != 0 && ptype != 2 && ptype != 3) continue; /* an index page */
        int pcodec = ptype == 3 && !v2_comp ? 0 : k->m->codec;
        if (!plausible(pcodec, data, (uint64_t)csz, (uint64_t)usz, ptype == 3 ? (uint64_t)dlen + (uint64_t)rlen : 0)) {
            char why[96];
            snprintf(why, sizeof why, "%lld bytes of %s data cannot hold the %lld bytes its page header says",
                     (long long)csz, NAME_OF(codec_names, pcodec), (long long)usz);
            st = col_err(k, err, "", why);
            break;
        }
        if ((uint64_t)usz > q->bytes_left) {
            st = col_err(k, err, "the pages decompress to more than the cap on bytes read", NULL);
            break;
        }
        q->bytes_left -= (uint64_t)usz;
        if (nv < 0) {
            st = col_err(k, err, "a page header without its data / dictionary header", NULL);
            break;
        }
        size_t pre = 0; /* v2: the levels before the values, never compressed */
        if (ptype == 3) {
            if (dlen < 0 || rlen < 0 || (uint64_t)dlen + (uint64_t)rlen > (uint64_t)csz ||
                (uint64_t)dlen + (uint64_t)rlen > (uint64_t)usz) {
                st = col_err(k, err, "page v2 level lengths out of range", NULL);
                break;
            }
            pre = (size_t)(dlen + rlen);
        }
        free(page);
        if (!(page = malloc((size_t)usz + 1))) {
            st = nomem(k, err);
            break;
        }
        memcpy(page, data, pre);
        if (ptype == 3 && !v2_comp) {
            if (csz != usz) {
                st = col_err(k, err, "an uncompressed v2 page whose sizes differ", NULL);
                break;
            }
            memcpy(page + pre, data + pre, (size_t)usz - pre);
        } else if ((st = decompress(k, data + pre, (size_t)csz - pre, page + pre, (size_t)usz - pre, err)))
            break;
        size_t un = (size_t)usz;
        if (ptype == 2) {
            st = read_dict(k, page, un, nv, enc, err);
            continue;
        }
        if (ptype == 3) {
            st = read_values(k, nv, page, (size_t)rlen, page + rlen, (size_t)dlen, enc, page + pre, un - pre, err);
            continue;
        }
        /* v1: each level run prefixed by its 4-byte length */
        const uint8_t *lv[2] = {NULL, NULL};
        size_t ln[2] = {0, 0}, at = 0;
        for (int w = 0; w < 2; w++) {
            if (!(w == 0 ? k->l->max_rep : k->l->max_def)) continue;
            uint32_t n32;
            if (un - at < 4 || (memcpy(&n32, page + at, 4), n32 > un - at - 4)) {
                st = col_err(k, err, "the page's levels run past its end", NULL);
                break;
            }
            lv[w] = page + at + 4, ln[w] = n32;
            at += 4 + n32;
        }
        if (!st) st = read_values(k, nv, lv[0], ln[0], lv[1], ln[1], enc, page + at, un - at, err);
    }
    if (!st) st = end_list(k, err);
    if (!st && k->row < k->row_end)
        st = wm_err(err, WM_ERR_INPUT, "%s: column %s, row group %zu: the pages end before the row group's %lld rows",
                    q->label, k->l->name, k->g, (long long)q->rgs[k->g].num_rows);
    free(page);
    free(buf);
    return st;
}

/* ---------------------------------------------------------------- entry points */

static void pq_free(pq *q) {
    free(q->footer);
    free(q->schema);
    for (size_t g = 0; g < q->nrg; g++) free(q->rgs[g].cols);
    free(q->rgs);
    for (size_t i = 0; i < q->nleaves; i++) free(q->leaves[i].name);
    free(q->leaves);
}

static wm_status parse(pq *q, const wm_parquet_opts *o, wm_table *t, wm_error *err) {
    memset(t, 0, sizeof *t);
    q->bytes_left = o && o->max_bytes ? o->max_bytes : WM_PARQUET_MAX_BYTES;
    size_t max_cells = o && o->max_cells ? o->max_cells : WM_PARQUET_MAX_CELLS;
    wm_status st = read_meta(q, err);
    if (st) goto done;
    uint64_t rows = (uint64_t)q->num_rows;
    if (o && o->max_rows && rows > o->max_rows) rows = o->max_rows;
    if (rows > max_cells / q->nleaves) {
        st = wm_err(err, WM_ERR_INPUT, "%s: %llu rows of %zu columns are over the cap of %zu cells", q->label,
                    (unsigned long long)rows, q->nleaves, max_cells);
        goto done;
    }
    t->n_cols = q->nleaves;
    if (!(t->names = calloc(t->n_cols, sizeof *t->names)) ||
        !(t->cells = calloc(rows * t->n_cols + 1, sizeof *t->cells)) ||
        !(t->sizes = calloc(rows * t->n_cols + 1, sizeof *t->sizes)) ||
        !(t->lines = calloc(rows + 1, sizeof *t->lines))) {
        t->n_cols = t->names ? t->n_cols : 0;
        st = wm_err(err, WM_ERR_NOMEM, "%s: out of memory", q->label);
        goto done;
    }
    for (size_t c = 0; c < t->n_cols; c++) t->names[c] = q->leaves[c].name, q->leaves[c].name = NULL;
    t->n_rows = (size_t)rows;
    for (size_t r = 0; r < t->n_rows; r++) t->lines[r] = r + 1;
    size_t row = 0;
    for (size_t g = 0; g < q->nrg && row < t->n_rows && !st; g++) {
        size_t take = (size_t)q->rgs[g].num_rows;
        if (take > t->n_rows - row) take = t->n_rows - row;
        for (size_t c = 0; c < t->n_cols && !st && take; c++) {
            chunk k = {.q = q, .l = &q->leaves[c], .m = &q->rgs[g].cols[c], .t = t, .col = c, .row = row,
                       .row_end = row + take, .g = g};
            k.l = &q->leaves[c];
            q->leaves[c].name = t->names[c]; /* borrowed for messages */
            st = read_chunk(&k, err);
            q->leaves[c].name = NULL;
            for (size_t i = 0; i < k.ndict; i++) free(k.dict[i].s);
            free(k.dict);
            cJSON_Delete(k.list);
        }
        row += take;
    }
done:
    pq_free(q);
    if (st) wm_table_free(t);
    return st;
}

wm_status wm_parquet_parse(const uint8_t *buf, size_t len, const char *label, const wm_parquet_opts *o, wm_table *t,
                           wm_error *err) {
    pq q = {.mem = buf ? buf : (const uint8_t *)"", .size = buf ? len : 0, .label = label};
    return parse(&q, o, t, err);
}

wm_status wm_parquet_read(const char *path, const wm_parquet_opts *o, wm_table *t, wm_error *err) {
    memset(t, 0, sizeof *t);
    wm_map m;
    wm_status st = wm_map_file(path, 0, &m, err);
    if (st) return st;
    st = wm_parquet_parse(m.data, m.size, path, o, t, err);
    wm_unmap(&m);
    return st;
}
