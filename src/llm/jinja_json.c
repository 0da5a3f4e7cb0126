/* jinja_json.c - JSON into values (Python json.loads rules) and values into
 * JSON text (Python json.dumps rules, the tojson filter transformers sets). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "llm/jinja_impl.h"

#define JSON_MAX_DEPTH 128

typedef struct jp {
    jctx *c;
    const char *p;
    size_t n, i;
} jp;

static int jp_fail(jp *s, const char *why) {
    if (!s->c->failed) {
        s->c->failed = 1;
        wm_err(s->c->err, WM_ERR_INPUT, "JSON offset %zu: %s", s->i, why);
    }
    return -1;
}

static void jp_ws(jp *s) {
    while (s->i < s->n && (s->p[s->i] == ' ' || s->p[s->i] == '\t' || s->p[s->i] == '\n' || s->p[s->i] == '\r'))
        s->i++;
}

static int hex4(const char *p, uint32_t *out) {
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        char ch = p[k];
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
              : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + (uint32_t)d;
    }
    *out = v;
    return 0;
}

static int put_u8(jctx *c, jbuf *b, uint32_t cp) {
    char t[4];
    size_t n;
    if (cp < 0x80) {
        t[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        t[0] = (char)(0xc0 | (cp >> 6));
        t[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        t[0] = (char)(0xe0 | (cp >> 12));
        t[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        t[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        t[0] = (char)(0xf0 | (cp >> 18));
        t[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        t[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        t[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    return wm_jbuf_put(c, b, t, n);
}

static int jp_string(jp *s, jv *out) {
    jbuf b = {0};
    s->i++; /* opening quote */
    for (;;) {
        if (s->i >= s->n) {
            wm_jbuf_free(&b);
            return jp_fail(s, "unterminated string");
        }
        unsigned char ch = (unsigned char)s->p[s->i];
        if (ch == '"') break;
        if (ch < 0x20) {
            wm_jbuf_free(&b);
            return jp_fail(s, "control character in string");
        }
        if (ch == '\\') {
            if (s->i + 1 >= s->n) {
                wm_jbuf_free(&b);
                return jp_fail(s, "unterminated escape");
            }
            char e = s->p[s->i + 1];
            const char *m = strchr("\"\\/bfnrt", e);
            if (e && m) {
                static const char rep[] = "\"\\/\b\f\n\r\t";
                if (wm_jbuf_putc(s->c, &b, rep[m - "\"\\/bfnrt"])) goto oom;
                s->i += 2;
                continue;
            }
            uint32_t cp, lo;
            if (e != 'u' || s->i + 6 > s->n || hex4(s->p + s->i + 2, &cp)) {
                wm_jbuf_free(&b);
                return jp_fail(s, "invalid escape in string");
            }
            s->i += 6;
            if (cp >= 0xd800 && cp < 0xdc00 && s->i + 6 <= s->n && s->p[s->i] == '\\' && s->p[s->i + 1] == 'u' &&
                !hex4(s->p + s->i + 2, &lo) && lo >= 0xdc00 && lo < 0xe000) {
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                s->i += 6;
            }
            if (put_u8(s->c, &b, cp)) goto oom;
            continue;
        }
        size_t l;
        uint32_t cp = wm_u8_decode(s->p, s->n, s->i, &l);
        if (ch >= 0x80 && (l == 1 || (l == 2 && cp < 0x80) || (l == 3 && cp < 0x800) || (l == 4 && cp < 0x10000) ||
                           cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000))) {
            wm_jbuf_free(&b);
            return jp_fail(s, "invalid UTF-8 in string");
        }
        if (wm_jbuf_put(s->c, &b, s->p + s->i, l)) goto oom;
        s->i += l;
    }
    s->i++;
    return wm_jbuf_to_str(s->c, &b, out);
oom:
    wm_jbuf_free(&b);
    return -1;
}

static int jp_number(jp *s, jv *out) {
    size_t st = s->i;
    int is_float = 0;
    if (s->p[s->i] == '-') s->i++;
    if (s->i + 8 <= s->n && memcmp(s->p + s->i, "Infinity", 8) == 0) {
        s->i += 8;
        *out = wm_jv_float(s->p[st] == '-' ? -INFINITY : INFINITY);
        return 0;
    }
    if (s->i >= s->n || s->p[s->i] < '0' || s->p[s->i] > '9') return jp_fail(s, "invalid number");
    if (s->p[s->i] == '0')
        s->i++;
    else
        while (s->i < s->n && s->p[s->i] >= '0' && s->p[s->i] <= '9') s->i++;
    if (s->i + 1 < s->n && s->p[s->i] == '.' && s->p[s->i + 1] >= '0' && s->p[s->i + 1] <= '9') {
        is_float = 1;
        s->i++;
        while (s->i < s->n && s->p[s->i] >= '0' && s->p[s->i] <= '9') s->i++;
    }
    if (s->i < s->n && (s->p[s->i] == 'e' || s->p[s->i] == 'E')) {
        size_t k = s->i + 1;
        if (k < s->n && (s->p[k] == '+' || s->p[k] == '-')) k++;
        if (k < s->n && s->p[k] >= '0' && s->p[k] <= '9') {
            is_float = 1;
            s->i = k;
            while (s->i < s->n && s->p[s->i] >= '0' && s->p[s->i] <= '9') s->i++;
        }
    }
    char tmp[64];
    size_t len = s->i - st;
    if (len >= sizeof tmp) {
        /* long number text (an integer past 64 bits becomes the nearest float: Python keeps a big int) */
        char *big = malloc(len + 1);
        if (!big) return jp_fail(s, "out of memory");
        memcpy(big, s->p + st, len);
        big[len] = 0;
        *out = wm_jv_float(strtod(big, NULL));
        free(big);
        return 0;
    }
    memcpy(tmp, s->p + st, len);
    tmp[len] = 0;
    if (is_float) {
        *out = wm_jv_float(strtod(tmp, NULL));
        return 0;
    }
    /* digits accumulated as a negative number so INT64_MIN fits */
    int neg = tmp[0] == '-';
    int64_t v = 0;
    for (const char *q = tmp + neg; *q; q++) {
        int d = *q - '0';
        if (v < (INT64_MIN + d) / 10) {
            *out = wm_jv_float(strtod(tmp, NULL));
            return 0;
        }
        v = v * 10 - d;
    }
    if (!neg) {
        if (v == INT64_MIN) {
            *out = wm_jv_float(strtod(tmp, NULL));
            return 0;
        }
        v = -v;
    }
    *out = wm_jv_int(v);
    return 0;
}

/* key hash table used to apply "first position, last value" to big objects */
static uint64_t hash_str(const char *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return h;
}

static int jp_value(jp *s, jv *out, int depth);

static int jp_object(jp *s, jv *out, int depth) {
    jctx *c = s->c;
    s->i++;
    jv *ks = NULL, *vs = NULL;
    size_t n = 0, cap = 0;
    jp_ws(s);
    if (s->i < s->n && s->p[s->i] == '}') {
        s->i++;
        return wm_jdict_new(c, JD_DICT, out);
    }
    for (;;) {
        jp_ws(s);
        if (s->i >= s->n || s->p[s->i] != '"') {
            jp_fail(s, "expected a string key");
            goto fail;
        }
        jv k, v;
        if (jp_string(s, &k)) goto fail;
        jp_ws(s);
        if (s->i >= s->n || s->p[s->i] != ':') {
            jp_fail(s, "expected ':'");
            goto fail;
        }
        s->i++;
        if (jp_value(s, &v, depth + 1)) goto fail;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            jv *nk = realloc(ks, cap * sizeof(jv));
            if (!nk) goto oom;
            ks = nk;
            jv *nv = realloc(vs, cap * sizeof(jv));
            if (!nv) goto oom;
            vs = nv;
        }
        ks[n] = k;
        vs[n] = v;
        n++;
        jp_ws(s);
        if (s->i < s->n && s->p[s->i] == ',') {
            s->i++;
            continue;
        }
        if (s->i < s->n && s->p[s->i] == '}') {
            s->i++;
            break;
        }
        jp_fail(s, "expected ',' or '}'");
        goto fail;
    }
    /* dedupe: slot[h] = index of the first occurrence */
    size_t hcap = 16;
    while (hcap < n * 2) hcap *= 2;
    size_t *slot = malloc(hcap * sizeof(size_t));
    if (!slot) goto oom;
    for (size_t i = 0; i < hcap; i++) slot[i] = (size_t)-1;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        size_t h = (size_t)hash_str(ks[i].u.s.p, ks[i].u.s.n) & (hcap - 1);
        for (;;) {
            size_t j = slot[h];
            if (j == (size_t)-1) {
                slot[h] = m;
                ks[m] = ks[i];
                vs[m] = vs[i];
                m++;
                break;
            }
            if (ks[j].u.s.n == ks[i].u.s.n && !memcmp(ks[j].u.s.p, ks[i].u.s.p, ks[i].u.s.n)) {
                vs[j] = vs[i];
                break;
            }
            h = (h + 1) & (hcap - 1);
        }
    }
    free(slot);
    if (wm_jdict_new(c, JD_DICT, out)) goto fail;
    jdict *d = out->u.d;
    d->k = wm_jalloc(c, m * sizeof(jv));
    d->v = d->k ? wm_jalloc(c, m * sizeof(jv)) : NULL;
    if (!d->v) goto fail;
    memcpy(d->k, ks, m * sizeof(jv));
    memcpy(d->v, vs, m * sizeof(jv));
    d->n = d->cap = m;
    free(ks);
    free(vs);
    return 0;
oom:
    jp_fail(s, "out of memory");
fail:
    free(ks);
    free(vs);
    return -1;
}

static int jp_array(jp *s, jv *out, int depth) {
    s->i++;
    jv *vs = NULL;
    size_t n = 0, cap = 0;
    jp_ws(s);
    if (s->i < s->n && s->p[s->i] == ']') {
        s->i++;
        return wm_jlist_new(s->c, 0, 0, out);
    }
    for (;;) {
        jv v;
        if (jp_value(s, &v, depth + 1)) goto fail;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            jv *nv = realloc(vs, cap * sizeof(jv));
            if (!nv) {
                jp_fail(s, "out of memory");
                goto fail;
            }
            vs = nv;
        }
        vs[n++] = v;
        jp_ws(s);
        if (s->i < s->n && s->p[s->i] == ',') {
            s->i++;
            continue;
        }
        if (s->i < s->n && s->p[s->i] == ']') {
            s->i++;
            break;
        }
        jp_fail(s, "expected ',' or ']'");
        goto fail;
    }
    if (wm_jlist_new(s->c, n, 0, out)) goto fail;
    memcpy(out->u.l->v, vs, n * sizeof(jv));
    free(vs);
    return 0;
fail:
    free(vs);
    return -1;
}

static int jp_value(jp *s, jv *out, int depth) {
    if (depth > JSON_MAX_DEPTH) return jp_fail(s, "nesting deeper than 128");
    jp_ws(s);
    if (s->i >= s->n) return jp_fail(s, "unexpected end of input");
    char ch = s->p[s->i];
    size_t left = s->n - s->i;
    if (ch == '{') return jp_object(s, out, depth);
    if (ch == '[') return jp_array(s, out, depth);
    if (ch == '"') return jp_string(s, out);
    if (ch == '-' || (ch >= '0' && ch <= '9')) return jp_number(s, out);
    if (left >= 4 && memcmp(s->p + s->i, "true", 4) == 0) {
        s->i += 4;
        *out = wm_jv_bool(1);
        return 0;
    }
    if (left >= 5 && memcmp(s->p + s->i, "false", 5) == 0) {
        s->i += 5;
        *out = wm_jv_bool(0);
        return 0;
    }
    if (left >= 4 && memcmp(s->p + s->i, "null", 4) == 0) {
        s->i += 4;
        *out = wm_jv_none();
        return 0;
    }
    if (left >= 3 && memcmp(s->p + s->i, "NaN", 3) == 0) {
        s->i += 3;
        *out = wm_jv_float(NAN);
        return 0;
    }
    if (left >= 8 && memcmp(s->p + s->i, "Infinity", 8) == 0) {
        s->i += 8;
        *out = wm_jv_float(INFINITY);
        return 0;
    }
    return jp_fail(s, "unexpected character");
}

int wm_jjson_parse(jctx *c, const char *p, size_t n, jv *out) {
    jp s = {c, p, n, 0};
    if (jp_value(&s, out, 0)) return -1;
    jp_ws(&s);
    if (s.i != n) return jp_fail(&s, "extra data after the value");
    return 0;
}

/* ---- dump ---- */

static int dump_str(jctx *c, jbuf *b, const char *p, size_t n, int ensure_ascii) {
    if (wm_jbuf_putc(c, b, '"')) return -1;
    size_t run = 0; /* bytes copied as they are, flushed in one go */
    for (size_t i = 0; i < n;) {
        unsigned char ch = (unsigned char)p[i];
        const char *esc = NULL;
        char tmp[16];
        size_t l = 1;
        if (ch == '"') esc = "\\\"";
        else if (ch == '\\') esc = "\\\\";
        else if (ch == '\n') esc = "\\n";
        else if (ch == '\r') esc = "\\r";
        else if (ch == '\t') esc = "\\t";
        else if (ch == '\b') esc = "\\b";
        else if (ch == '\f') esc = "\\f";
        else if (ch < 0x20) {
            snprintf(tmp, sizeof tmp, "\\u%04x", ch);
            esc = tmp;
        } else if (ch >= 0x80 && ensure_ascii) {
            uint32_t cp = wm_u8_decode(p, n, i, &l);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
            } else {
                snprintf(tmp, sizeof tmp, "\\u%04x", cp);
            }
            esc = tmp;
        }
        if (!esc) {
            run++;
            i++;
            continue;
        }
        if (run && wm_jbuf_put(c, b, p + i - run, run)) return -1;
        run = 0;
        if (wm_jbuf_put(c, b, esc, strlen(esc))) return -1;
        i += l;
    }
    if (run && wm_jbuf_put(c, b, p + n - run, run)) return -1;
    return wm_jbuf_putc(c, b, '"');
}

static int newline_indent(jctx *c, jbuf *b, const jdump_opts *o, int level) {
    if (wm_jbuf_putc(c, b, '\n')) return -1;
    for (int k = 0; k < level; k++) {
        if (o->indent_str) {
            if (wm_jbuf_put(c, b, o->indent_str, o->indent_n)) return -1;
        } else {
            for (int s = 0; s < o->indent; s++)
                if (wm_jbuf_putc(c, b, ' ')) return -1;
        }
    }
    return 0;
}

static int key_text(jctx *c, const jnode *at, jv k, jv *out) {
    char num[64];
    switch (k.t) {
    case JV_STR: *out = k; return 0;
    case JV_INT: snprintf(num, sizeof num, "%lld", (long long)k.u.i); break;
    case JV_FLOAT: wm_py_float_repr(k.u.f, num, sizeof num); break;
    case JV_BOOL: snprintf(num, sizeof num, "%s", k.u.b ? "true" : "false"); break;
    case JV_NONE: snprintf(num, sizeof num, "null"); break;
    default:
        return wm_jerr(c, at, WM_ERR_INPUT, "tojson: keys must be str, int, float, bool or None, not %s",
                    wm_jv_typename(k));
    }
    return wm_jstr(c, num, strlen(num), out);
}

static int cmp_keys(const void *a, const void *b) {
    const jv *x = a, *y = b; /* [key text, key, value] triples: compare the text */
    size_t n = x->u.s.n < y->u.s.n ? x->u.s.n : y->u.s.n;
    int m = n ? memcmp(x->u.s.p, y->u.s.p, n) : 0;
    return m ? m : (x->u.s.n > y->u.s.n) - (x->u.s.n < y->u.s.n);
}

int wm_jjson_dump(jctx *c, const jnode *at, jbuf *b, jv v, const jdump_opts *o, int depth) {
    char num[64];
    int pretty = o->indent >= 0 || o->indent_str;
    if (depth > JSON_MAX_DEPTH) return wm_jerr(c, at, WM_ERR_INPUT, "tojson: value nested deeper than 128");
    if (wm_jcharge(c, at, 1)) return -1;
    switch (v.t) {
    case JV_NONE: return wm_jbuf_put(c, b, "null", 4);
    case JV_BOOL: return v.u.b ? wm_jbuf_put(c, b, "true", 4) : wm_jbuf_put(c, b, "false", 5);
    case JV_INT: snprintf(num, sizeof num, "%lld", (long long)v.u.i); return wm_jbuf_put(c, b, num, strlen(num));
    case JV_FLOAT:
        if (isnan(v.u.f)) snprintf(num, sizeof num, "NaN");
        else if (isinf(v.u.f)) snprintf(num, sizeof num, v.u.f < 0 ? "-Infinity" : "Infinity");
        else wm_py_float_repr(v.u.f, num, sizeof num);
        return wm_jbuf_put(c, b, num, strlen(num));
    case JV_STR: return dump_str(c, b, v.u.s.p, v.u.s.n, o->ensure_ascii);
    case JV_LIST: {
        const jlist *l = v.u.l;
        if (l->n == 0) return wm_jbuf_put(c, b, "[]", 2);
        if (wm_jbuf_putc(c, b, '[')) return -1;
        for (size_t i = 0; i < l->n; i++) {
            if (i && wm_jbuf_put(c, b, o->item_sep, strlen(o->item_sep))) return -1;
            if (pretty && newline_indent(c, b, o, depth + 1)) return -1;
            if (wm_jjson_dump(c, at, b, l->v[i], o, depth + 1)) return -1;
        }
        if (pretty && newline_indent(c, b, o, depth)) return -1;
        return wm_jbuf_putc(c, b, ']');
    }
    case JV_DICT: {
        const jdict *d = v.u.d;
        if (d->kind != JD_DICT) break;
        if (d->n == 0) return wm_jbuf_put(c, b, "{}", 2);
        jv *tr = wm_jalloc(c, d->n * 3 * sizeof(jv));
        if (!tr) return -1;
        for (size_t i = 0; i < d->n; i++) {
            if (key_text(c, at, d->k[i], &tr[3 * i])) return -1;
            tr[3 * i + 1] = d->k[i];
            tr[3 * i + 2] = d->v[i];
        }
        if (o->sort_keys) { /* n log n comparisons of keys: charged as keys x depth of the sort */
            size_t lg = 1;
            while (((size_t)1 << lg) < d->n) lg++;
            if (wm_jcharge(c, at, d->n * lg / 4)) return -1;
            qsort(tr, d->n, 3 * sizeof(jv), cmp_keys);
        }
        if (wm_jbuf_putc(c, b, '{')) return -1;
        for (size_t i = 0; i < d->n; i++) {
            if (i && wm_jbuf_put(c, b, o->item_sep, strlen(o->item_sep))) return -1;
            if (pretty && newline_indent(c, b, o, depth + 1)) return -1;
            if (dump_str(c, b, tr[3 * i].u.s.p, tr[3 * i].u.s.n, o->ensure_ascii) ||
                wm_jbuf_put(c, b, o->key_sep, strlen(o->key_sep)) || wm_jjson_dump(c, at, b, tr[3 * i + 2], o, depth + 1))
                return -1;
        }
        if (pretty && newline_indent(c, b, o, depth)) return -1;
        return wm_jbuf_putc(c, b, '}');
    }
    default: break;
    }
    return wm_jerr(c, at, WM_ERR_INPUT, "tojson: object of type %s is not JSON serializable", wm_jv_typename(v));
}
