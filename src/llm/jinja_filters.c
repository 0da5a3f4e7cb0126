/* jinja_filters.c - jinja2's filters and tests (the subset chat templates use,
 * with jinja2's argument names and defaults), tojson as transformers defines it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/jinja_impl.h"

int wm_jstrip(jctx *c, const jnode *at, jv s, const jv *chars, int mode, jv *out);
int wm_jreplace(jctx *c, const jnode *at, jv s, jv old, jv nw, int64_t count, jv *out);
int wm_jcase(jctx *c, const jnode *at, jv s, char mode, jv *out);
int wm_jsplitlines(jctx *c, const jnode *at, jv s, int keepends, jv *out);

static const char *const filters_ok[] = {
    "abs", "attr", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape", "first", "float", "format",
    "indent", "int", "items", "join", "last", "length", "list", "lower", "map", "max", "min", "reject", "rejectattr",
    "replace", "reverse", "round", "safe", "select", "selectattr", "sort", "string", "sum", "title", "tojson", "trim",
    "unique", "upper", "wordcount", NULL};
static const char *const filters_jinja[] = { /* jinja2 filters outside the subset: "not supported" */
    "batch", "filesizeformat", "forceescape", "groupby", "pprint", "random", "slice", "striptags",
    "truncate", "urlencode", "urlize", "wordwrap", "xmlattr", NULL};
static const char *const tests_ok[] = {
    "defined", "undefined", "none", "boolean", "false", "true", "integer", "float", "number", "string", "mapping",
    "iterable", "sequence", "callable", "sameas", "escaped", "in", "eq", "equalto", "==", "ne", "!=", "lt",
    "lessthan", "<", "le", "<=", "gt", "greaterthan", ">", "ge", ">=", "odd", "even", "divisibleby", "lower",
    "upper", "filter", "test", NULL};

static int listed(const char *const *l, const char *name) {
    for (; *l; l++)
        if (!strcmp(*l, name)) return 1;
    return 0;
}

int wm_jfilter_known(const char *name) { return listed(filters_ok, name) ? 1 : listed(filters_jinja, name) ? 2 : 0; }
int wm_jtest_known(const char *name) { return listed(tests_ok, name); }

/* str(v), with Undefined as "" */
static int soft_str(jctx *c, jv v, jv *out) {
    if (v.t == JV_UNDEF) {
        *out = wm_jv_cstr("", 0);
        return 0;
    }
    return wm_jv_tostr(c, v, out);
}

static int kw_opt(const jargs *a, size_t i, const char *kw, jv *out, jv dflt) {
    if (!wm_jarg(a, i, kw, out)) *out = dflt;
    return 0;
}

/* attribute path "a.b.0" looked up item-first, as jinja2's make_attrgetter */
static int attr_path(jctx *c, const jnode *at, jv item, jv path, jv *out) {
    if (path.t == JV_INT) return wm_jgetitem(c, at, item, path, out);
    if (path.t != JV_STR) return wm_jerr(c, at, WM_ERR_INPUT, "attribute must be a string or an integer");
    const char *p = path.u.s.p, *e = p + path.u.s.n;
    jv cur = item;
    while (p <= e) {
        const char *dot = memchr(p, '.', (size_t)(e - p));
        size_t n = dot ? (size_t)(dot - p) : (size_t)(e - p);
        jv key = wm_jv_cstr(p, n);
        int isnum = n > 0;
        int64_t num = 0;
        for (size_t k = 0; k < n && isnum; k++) {
            isnum = p[k] >= '0' && p[k] <= '9';
            num = num * 10 + (p[k] - '0');
            if (num > 1000000000) isnum = 0;
        }
        if (isnum) key = wm_jv_int(num);
        if (wm_jgetitem(c, at, cur, key, &cur)) return -1;
        if (!dot) break;
        p = dot + 1;
    }
    *out = cur;
    return 0;
}

/* select/reject/selectattr/rejectattr */
static int select_items(jctx *c, jframe *f, const jnode *at, jv v, const jargs *a, int by_attr, int keep, jv *out) {
    jlist *items;
    jv attr = wm_jv_none(), test = wm_jv_none();
    size_t first = 0;
    if (by_attr) {
        if (!wm_jarg(a, 0, NULL, &attr)) return wm_jerr(c, at, WM_ERR_INPUT, "selectattr/rejectattr need an attribute");
        first = 1;
    }
    int has_test = wm_jarg(a, first, NULL, &test);
    if (has_test && test.t != JV_STR) return wm_jerr(c, at, WM_ERR_INPUT, "test name must be a string");
    if (has_test && !wm_jtest_known(test.u.s.p)) return wm_jerr(c, at, WM_ERR_INPUT, "no test named '%s'", test.u.s.p);
    jargs ta = {0};
    if (a->n > first + 1) {
        ta.n = a->n - first - 1;
        ta.v = a->v + first + 1;
    }
    if (wm_jiter(c, at, v, &items) || wm_jlist_new(c, items->n, 0, out)) return -1;
    size_t m = 0;
    for (size_t i = 0; i < items->n; i++) {
        jv x = items->v[i];
        int r;
        if (wm_jcharge(c, at, 1)) return -1;
        if (by_attr && attr_path(c, at, items->v[i], attr, &x)) return -1;
        if (has_test) {
            if (wm_jtest(c, f, at, test.u.s.p, x, &ta, &r)) return -1;
        } else {
            r = wm_jv_truthy(x);
        }
        if (r == keep) out->u.l->v[m++] = items->v[i];
    }
    out->u.l->n = m;
    return 0;
}

static int cmp_ci(jctx *c, const jnode *at, jv a, jv b, int case_sensitive, int *r) {
    if (!case_sensitive && a.t == JV_STR && b.t == JV_STR) {
        jv la, lb;
        if (wm_jcase(c, at, a, 'l', &la) || wm_jcase(c, at, b, 'l', &lb)) return -1;
        return wm_jv_compare(c, at, la, lb, r);
    }
    return wm_jv_compare(c, at, a, b, r);
}

/* stable insertion-merge sort on keys (n is bounded by the step limit) */
static int sort_items(jctx *c, const jnode *at, jv *vals, jv *keys, size_t n, int cs, int reverse) {
    jv *tv = malloc(n * sizeof(jv) + 1), *tk = malloc(n * sizeof(jv) + 1);
    int rc = 0;
    if (!tv || !tk) {
        free(tv);
        free(tk);
        return wm_jerr(c, at, WM_ERR_NOMEM, "out of memory");
    }
    for (size_t w = 1; w < n && !rc; w *= 2) {
        for (size_t lo = 0; lo < n && !rc; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid, o = lo;
            while (i < mid && j < hi) {
                int r;
                if (wm_jcharge(c, at, 1) || cmp_ci(c, at, keys[j], keys[i], cs, &r)) {
                    rc = -1;
                    break;
                }
                int take_right = reverse ? r > 0 : r < 0;
                if (take_right) {
                    tv[o] = vals[j];
                    tk[o++] = keys[j++];
                } else {
                    tv[o] = vals[i];
                    tk[o++] = keys[i++];
                }
            }
            if (rc) break;
            while (i < mid) {
                tv[o] = vals[i];
                tk[o++] = keys[i++];
            }
            while (j < hi) {
                tv[o] = vals[j];
                tk[o++] = keys[j++];
            }
            memcpy(vals + lo, tv + lo, (hi - lo) * sizeof(jv));
            memcpy(keys + lo, tk + lo, (hi - lo) * sizeof(jv));
        }
    }
    free(tv);
    free(tk);
    return rc;
}

static int f_tojson(jctx *c, const jnode *at, jv v, const jargs *a, jv *out) {
    static const char *const kws[] = {"indent", "ensure_ascii", "separators", "sort_keys", NULL};
    jv ind, ea, seps, sk;
    if (wm_jargs_check(c, at, "tojson", a, 4, kws)) return -1;
    kw_opt(a, 0, "indent", &ind, wm_jv_none());
    kw_opt(a, 1, "ensure_ascii", &ea, wm_jv_bool(0));
    kw_opt(a, 2, "separators", &seps, wm_jv_none());
    kw_opt(a, 3, "sort_keys", &sk, wm_jv_bool(0));
    jdump_opts o = {-1, NULL, 0, ", ", ": ", wm_jv_truthy(sk), wm_jv_truthy(ea)};
    if (ind.t == JV_INT || ind.t == JV_BOOL) {
        int64_t k = ind.t == JV_INT ? ind.u.i : ind.u.b;
        if (k > 64) return wm_jerr(c, at, WM_ERR_INPUT, "tojson: indent larger than 64");
        o.indent = k < 0 ? 0 : (int)k;
        o.item_sep = ",";
    } else if (ind.t == JV_STR) {
        o.indent_str = ind.u.s.p;
        o.indent_n = ind.u.s.n;
        o.item_sep = ",";
    } else if (ind.t != JV_NONE) {
        return wm_jerr(c, at, WM_ERR_INPUT, "tojson: indent must be an integer, a string or None");
    }
    if (seps.t == JV_LIST && seps.u.l->n == 2 && seps.u.l->v[0].t == JV_STR && seps.u.l->v[1].t == JV_STR) {
        o.item_sep = seps.u.l->v[0].u.s.p;
        o.key_sep = seps.u.l->v[1].u.s.p;
    } else if (seps.t != JV_NONE) {
        return wm_jerr(c, at, WM_ERR_INPUT, "tojson: separators must be a pair of strings");
    }
    jbuf b = {0};
    if (wm_jjson_dump(c, at, &b, v, &o, 0)) {
        wm_jbuf_free(&b);
        return -1;
    }
    return wm_jbuf_to_str(c, &b, out);
}

static int parse_int_text(jv s, int64_t base, int64_t *out) {
    const char *p = s.u.s.p, *e = p + s.u.s.n;
    size_t l;
    while (p < e && (l = wm_py_space_at(p, (size_t)(e - p), 0))) p += l;
    while (e > p && (l = wm_py_space_before(p, (size_t)(e - p)))) e -= l;
    int neg = 0;
    if (p < e && (*p == '+' || *p == '-')) neg = *p++ == '-';
    if (base == 16 && e - p > 2 && p[0] == '0' && (p[1] | 32) == 'x') p += 2;
    if (p >= e) return 0;
    int64_t v = 0;
    int prev_us = 1;
    for (; p < e; p++) {
        if (*p == '_') {
            if (prev_us) return 0;
            prev_us = 1;
            continue;
        }
        int d = *p >= '0' && *p <= '9' ? *p - '0' : (*p | 32) >= 'a' && (*p | 32) <= 'z' ? (*p | 32) - 'a' + 10 : 99;
        if (d >= base) return 0;
        if (__builtin_mul_overflow(v, base, &v) || __builtin_add_overflow(v, d, &v)) return 0;
        prev_us = 0;
    }
    if (prev_us) return 0;
    *out = neg ? -v : v;
    return 1;
}

static int parse_float_text(jv s, double *out) {
    char buf[128];
    size_t n = s.u.s.n;
    if (n == 0 || n >= sizeof buf) return 0;
    memcpy(buf, s.u.s.p, n);
    buf[n] = 0;
    char *end;
    const char *st = buf;
    while (*st == ' ' || *st == '\t' || *st == '\n' || *st == '\r') st++;
    if ((st[0] == '0' && (st[1] | 32) == 'x') || strchr(st, 'x') || strchr(st, 'X')) return 0;
    double d = strtod(st, &end);
    if (end == st) return 0;
    while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r') end++;
    if (*end) return 0;
    *out = d;
    return 1;
}

static int f_indent(jctx *c, const jnode *at, jv v, const jargs *a, jv *out) {
    jv w, first, blank, s, lines;
    kw_opt(a, 0, "width", &w, wm_jv_int(4));
    kw_opt(a, 1, "first", &first, wm_jv_bool(0));
    kw_opt(a, 2, "blank", &blank, wm_jv_bool(0));
    jbuf ind = {0}, b = {0};
    if (soft_str(c, v, &s)) return -1;
    if (w.t == JV_STR) {
        if (wm_jbuf_put(c, &ind, w.u.s.p, w.u.s.n)) goto fail;
    } else if (w.t == JV_INT) {
        if (w.u.i > 1024) {
            wm_jerr(c, at, WM_ERR_INPUT, "indent: width larger than 1024");
            goto fail;
        }
        for (int64_t i = 0; i < w.u.i; i++)
            if (wm_jbuf_putc(c, &ind, ' ')) goto fail;
    } else {
        wm_jerr(c, at, WM_ERR_INPUT, "indent: width must be an integer or a string");
        goto fail;
    }
    jbuf tmp = {0};
    if (wm_jbuf_put(c, &tmp, s.u.s.p, s.u.s.n) || wm_jbuf_putc(c, &tmp, '\n') || wm_jbuf_to_str(c, &tmp, &s)) {
        wm_jbuf_free(&tmp);
        goto fail;
    }
    if (wm_jsplitlines(c, at, s, 0, &lines)) goto fail;
    const char *is = ind.p ? ind.p : "";
    for (size_t i = 0; i < lines.u.l->n; i++) {
        jv ln = lines.u.l->v[i];
        if (i && wm_jbuf_putc(c, &b, '\n')) goto fail;
        int indent_it = i > 0 ? (wm_jv_truthy(blank) || ln.u.s.n) : wm_jv_truthy(first);
        if (indent_it && wm_jbuf_put(c, &b, is, ind.n)) goto fail;
        if (wm_jbuf_put(c, &b, ln.u.s.p, ln.u.s.n)) goto fail;
    }
    wm_jbuf_free(&ind);
    return wm_jbuf_to_str(c, &b, out);
fail:
    wm_jbuf_free(&ind);
    wm_jbuf_free(&b);
    return -1;
}

int wm_jfilter(jctx *c, jframe *f, const jnode *at, const char *name, jv v, const jargs *a, jv *out) {
    jv x, y, s;
    if (wm_jcharge(c, at, 1)) return -1;
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        kw_opt(a, 0, "default_value", &x, wm_jv_cstr("", 0));
        kw_opt(a, 1, "boolean", &y, wm_jv_bool(0));
        *out = (v.t == JV_UNDEF || (wm_jv_truthy(y) && !wm_jv_truthy(v))) ? x : v;
        return 0;
    }
    if (!strcmp(name, "length") || !strcmp(name, "count")) {
        switch (v.t) {
        case JV_UNDEF: *out = wm_jv_int(0); return 0;
        case JV_STR: *out = wm_jv_int((int64_t)wm_jlen(c, v.u.s.p, v.u.s.n)); return 0;
        case JV_LIST: *out = wm_jv_int((int64_t)v.u.l->n); return 0;
        case JV_DICT:
            if (v.u.d->kind == JD_DICT) {
                *out = wm_jv_int((int64_t)v.u.d->n);
                return 0;
            }
            break;
        default: break;
        }
        return wm_jerr(c, at, WM_ERR_INPUT, "object of type '%s' has no len()", wm_jv_typename(v));
    }
    if (!strcmp(name, "tojson")) return f_tojson(c, at, v, a, out);
    if (!strcmp(name, "string")) return soft_str(c, v, out);
    if (!strcmp(name, "safe")) {
        *out = v;
        return 0;
    }
    if (!strcmp(name, "trim")) {
        if (soft_str(c, v, &s)) return -1;
        return wm_jstrip(c, at, s, wm_jarg(a, 0, "chars", &x) ? &x : NULL, 3, out);
    }
    if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "capitalize") || !strcmp(name, "title")) {
        if (soft_str(c, v, &s)) return -1;
        return wm_jcase(c, at, s, name[0] == 'u' ? 'u' : name[0] == 'l' ? 'l' : name[0] == 'c' ? 'c' : 'j', out);
    }
    if (!strcmp(name, "replace")) {
        jv cnt = wm_jv_none();
        if (soft_str(c, v, &s)) return -1;
        if (!wm_jarg(a, 0, "old", &x) || !wm_jarg(a, 1, "new", &y)) return wm_jerr(c, at, WM_ERR_INPUT, "replace needs old and new");
        wm_jarg(a, 2, "count", &cnt);
        if (cnt.t != JV_NONE && cnt.t != JV_INT) return wm_jerr(c, at, WM_ERR_INPUT, "replace: count must be an integer");
        jv xs, ys;
        if (soft_str(c, x, &xs) || soft_str(c, y, &ys)) return -1;
        return wm_jreplace(c, at, s, xs, ys, cnt.t == JV_INT ? cnt.u.i : -1, out);
    }
    if (!strcmp(name, "first") || !strcmp(name, "last")) {
        jlist *items;
        if (wm_jiter(c, at, v, &items)) return -1;
        *out = items->n ? items->v[name[0] == 'f' ? 0 : items->n - 1] : wm_jv_undef(NULL);
        return 0;
    }
    if (!strcmp(name, "list")) {
        jlist *items;
        if (wm_jiter(c, at, v, &items) || wm_jlist_new(c, items->n, 0, out)) return -1;
        if (items->n) memcpy(out->u.l->v, items->v, items->n * sizeof(jv));
        return 0;
    }
    if (!strcmp(name, "join")) {
        jlist *items;
        jv sep, attr;
        kw_opt(a, 0, "d", &sep, wm_jv_cstr("", 0));
        int has_attr = wm_jarg(a, 1, "attribute", &attr);
        if (soft_str(c, sep, &sep) || wm_jiter(c, at, v, &items)) return -1;
        jbuf b = {0};
        for (size_t i = 0; i < items->n; i++) {
            jv it = items->v[i];
            if ((has_attr && attr.t != JV_NONE && attr_path(c, at, it, attr, &it)) || (i && wm_jbuf_put(c, &b, sep.u.s.p, sep.u.s.n)) ||
                wm_jv_str(c, &b, it)) {
                wm_jbuf_free(&b);
                return -1;
            }
        }
        return wm_jbuf_to_str(c, &b, out);
    }
    if (!strcmp(name, "items")) {
        if (v.t == JV_UNDEF) return wm_jlist_new(c, 0, 0, out);
        if (v.t != JV_DICT || v.u.d->kind != JD_DICT) return wm_jerr(c, at, WM_ERR_INPUT, "items: can only get item pairs from a mapping");
        if (wm_jlist_new(c, v.u.d->n, 0, out)) return -1;
        for (size_t i = 0; i < v.u.d->n; i++) {
            if (wm_jlist_new(c, 2, 1, &x)) return -1;
            x.u.l->v[0] = v.u.d->k[i];
            x.u.l->v[1] = v.u.d->v[i];
            out->u.l->v[i] = x;
        }
        return 0;
    }
    if (!strcmp(name, "selectattr") || !strcmp(name, "rejectattr")) return select_items(c, f, at, v, a, 1, name[0] == 's', out);
    if (!strcmp(name, "select") || !strcmp(name, "reject")) return select_items(c, f, at, v, a, 0, name[0] == 's', out);
    if (!strcmp(name, "map")) {
        jlist *items;
        jv attr, dflt;
        int by_attr = 0;
        for (size_t k = 0; k < a->nk; k++)
            if (!strcmp(a->kn[k], "attribute")) by_attr = 1;
        if (wm_jiter(c, at, v, &items) || wm_jlist_new(c, items->n, 0, out)) return -1;
        if (by_attr) {
            wm_jarg(a, 99, "attribute", &attr);
            int has_default = wm_jarg(a, 99, "default", &dflt);
            for (size_t i = 0; i < items->n; i++) {
                if (attr_path(c, at, items->v[i], attr, &out->u.l->v[i])) return -1;
                if (has_default && out->u.l->v[i].t == JV_UNDEF) out->u.l->v[i] = dflt;
            }
            return 0;
        }
        if (!a->n || a->v[0].t != JV_STR) return wm_jerr(c, at, WM_ERR_INPUT, "map needs a filter name or attribute=");
        const char *fname = a->v[0].u.s.p;
        int known = wm_jfilter_known(fname);
        if (known != 1) return wm_jerr(c, at, known ? WM_ERR_UNSUPPORTED : WM_ERR_INPUT, "map: %s filter '%s'", known ? "unsupported" : "no", fname);
        jargs fa = *a;
        fa.n--;
        fa.v++;
        for (size_t i = 0; i < items->n; i++)
            if (wm_jfilter(c, f, at, fname, items->v[i], &fa, &out->u.l->v[i])) return -1;
        return 0;
    }
    if (!strcmp(name, "int")) {
        jv base;
        kw_opt(a, 0, "default", &x, wm_jv_int(0));
        kw_opt(a, 1, "base", &base, wm_jv_int(10));
        int64_t r;
        double d;
        if (base.t != JV_INT || base.u.i < 2 || base.u.i > 36) return wm_jerr(c, at, WM_ERR_INPUT, "int: base must be 2..36");
        if (v.t == JV_INT) *out = v;
        else if (v.t == JV_BOOL) *out = wm_jv_int(v.u.b);
        else if (v.t == JV_FLOAT && isfinite(v.u.f) && fabs(v.u.f) < 9.2e18) *out = wm_jv_int((int64_t)v.u.f);
        else if (v.t == JV_STR && (wm_jcharge(c, at, v.u.s.n / 64) || 0)) return -1;
        else if (v.t == JV_STR && parse_int_text(v, base.u.i, &r)) *out = wm_jv_int(r);
        else if (v.t == JV_STR && parse_float_text(v, &d) && isfinite(d) && fabs(d) < 9.2e18) *out = wm_jv_int((int64_t)d);
        else *out = x;
        return 0;
    }
    if (!strcmp(name, "float")) {
        double d;
        kw_opt(a, 0, "default", &x, wm_jv_float(0.0));
        if (v.t == JV_FLOAT) *out = v;
        else if (v.t == JV_INT) *out = wm_jv_float((double)v.u.i);
        else if (v.t == JV_BOOL) *out = wm_jv_float(v.u.b);
        else if (v.t == JV_STR && parse_float_text(v, &d)) *out = wm_jv_float(d);
        else *out = x;
        return 0;
    }
    if (!strcmp(name, "abs")) {
        if (v.t == JV_INT && v.u.i != INT64_MIN) *out = wm_jv_int(v.u.i < 0 ? -v.u.i : v.u.i);
        else if (v.t == JV_BOOL) *out = wm_jv_int(v.u.b);
        else if (v.t == JV_FLOAT) *out = wm_jv_float(fabs(v.u.f));
        else return wm_jerr(c, at, WM_ERR_INPUT, "bad operand type for abs(): '%s'", wm_jv_typename(v));
        return 0;
    }
    if (!strcmp(name, "round")) {
        jv prec, method;
        kw_opt(a, 0, "precision", &prec, wm_jv_int(0));
        kw_opt(a, 1, "method", &method, wm_jv_cstr("common", 6));
        if (prec.t != JV_INT || prec.u.i < 0 || prec.u.i > 30 || method.t != JV_STR)
            return wm_jerr(c, at, WM_ERR_INPUT, "round: bad precision or method");
        if (v.t != JV_INT && v.t != JV_FLOAT && v.t != JV_BOOL) return wm_jerr(c, at, WM_ERR_INPUT, "round: not a number");
        double d = v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : v.u.b, m = pow(10.0, (double)prec.u.i);
        if (!strcmp(method.u.s.p, "common")) {
            if (v.t != JV_FLOAT) {
                *out = v.t == JV_BOOL ? wm_jv_int(v.u.b) : v;
                return 0;
            }
            char buf[512];
            snprintf(buf, sizeof buf, "%.*f", (int)prec.u.i, d);
            *out = wm_jv_float(isfinite(d) ? strtod(buf, NULL) : d);
        } else if (!strcmp(method.u.s.p, "floor")) {
            *out = wm_jv_float(floor(d * m) / m);
        } else if (!strcmp(method.u.s.p, "ceil")) {
            *out = wm_jv_float(ceil(d * m) / m);
        } else {
            return wm_jerr(c, at, WM_ERR_INPUT, "round: method must be common, ceil or floor");
        }
        return 0;
    }
    if (!strcmp(name, "reverse")) {
        if (v.t == JV_STR) {
            jlist *chars;
            if (wm_jiter(c, at, v, &chars)) return -1;
            jbuf b = {0};
            for (size_t i = chars->n; i-- > 0;)
                if (wm_jbuf_put(c, &b, chars->v[i].u.s.p, chars->v[i].u.s.n)) {
                    wm_jbuf_free(&b);
                    return -1;
                }
            return wm_jbuf_to_str(c, &b, out);
        }
        jlist *items;
        if (wm_jiter(c, at, v, &items) || wm_jlist_new(c, items->n, 0, out)) return -1;
        for (size_t i = 0; i < items->n; i++) out->u.l->v[i] = items->v[items->n - 1 - i];
        return 0;
    }
    if (!strcmp(name, "sort") || !strcmp(name, "dictsort") || !strcmp(name, "unique") || !strcmp(name, "min") ||
        !strcmp(name, "max")) {
        jlist *items;
        jv rev = wm_jv_bool(0), cs = wm_jv_bool(0), attr = wm_jv_none(), by = wm_jv_cstr("key", 3);
        int dsort = !strcmp(name, "dictsort"), srt = !strcmp(name, "sort");
        if (srt) {
            kw_opt(a, 0, "reverse", &rev, wm_jv_bool(0));
            kw_opt(a, 1, "case_sensitive", &cs, wm_jv_bool(0));
            kw_opt(a, 2, "attribute", &attr, wm_jv_none());
        } else if (dsort) {
            kw_opt(a, 0, "case_sensitive", &cs, wm_jv_bool(0));
            kw_opt(a, 1, "by", &by, wm_jv_cstr("key", 3));
            kw_opt(a, 2, "reverse", &rev, wm_jv_bool(0));
        } else {
            kw_opt(a, 0, "case_sensitive", &cs, wm_jv_bool(0));
            kw_opt(a, 1, "attribute", &attr, wm_jv_none());
        }
        if (dsort) {
            if (wm_jfilter(c, f, at, "items", v, &(jargs){0}, &x)) return -1;
            items = x.u.l;
        } else if (wm_jiter(c, at, v, &items)) {
            return -1;
        }
        size_t n = items->n;
        jv *vals = wm_jalloc(c, (n + 1) * sizeof(jv)), *keys = wm_jalloc(c, (n + 1) * sizeof(jv));
        if (!vals || !keys) return -1;
        for (size_t i = 0; i < n; i++) {
            vals[i] = keys[i] = items->v[i];
            if (dsort) keys[i] = items->v[i].u.l->v[by.t == JV_STR && !strcmp(by.u.s.p, "value") ? 1 : 0];
            else if (attr.t != JV_NONE && attr_path(c, at, items->v[i], attr, &keys[i])) return -1;
        }
        if (!strcmp(name, "unique")) {
            if (wm_jlist_new(c, n, 0, out)) return -1;
            size_t m = 0;
            for (size_t i = 0; i < n; i++) {
                int dup = 0;
                for (size_t j = 0; j < i && !dup; j++) {
                    jv ka = keys[i], kb = keys[j];
                    if (!wm_jv_truthy(cs) && ka.t == JV_STR && kb.t == JV_STR && (wm_jcase(c, at, ka, 'l', &ka) || wm_jcase(c, at, kb, 'l', &kb))) return -1;
                    if ((dup = wm_jv_eq(c, ka, kb)) < 0) return -1;
                }
                if (!dup) out->u.l->v[m++] = vals[i];
            }
            out->u.l->n = m;
            return 0;
        }
        if (sort_items(c, at, vals, keys, n, wm_jv_truthy(cs), wm_jv_truthy(rev))) return -1;
        if (!strcmp(name, "min") || !strcmp(name, "max")) {
            *out = n ? vals[name[1] == 'i' ? 0 : n - 1] : wm_jv_undef(NULL);
            if (n && name[1] == 'a') { /* max: the first of equal maxima, as Python's max() */
                size_t k = n - 1;
                while (k > 0) {
                    int r;
                    if (cmp_ci(c, at, keys[k - 1], keys[n - 1], wm_jv_truthy(cs), &r)) return -1;
                    if (r != 0) break;
                    k--;
                }
                *out = vals[k];
            }
            return 0;
        }
        if (wm_jlist_new(c, n, 0, out)) return -1;
        if (n) memcpy(out->u.l->v, vals, n * sizeof(jv));
        return 0;
    }
    if (!strcmp(name, "sum")) {
        jlist *items;
        jv attr, acc;
        kw_opt(a, 0, "attribute", &attr, wm_jv_none());
        kw_opt(a, 1, "start", &acc, wm_jv_int(0));
        if (wm_jiter(c, at, v, &items)) return -1;
        for (size_t i = 0; i < items->n; i++) {
            jv it = items->v[i];
            if (attr.t != JV_NONE && attr_path(c, at, it, attr, &it)) return -1;
            jnode fake = *at;
            jnode l = fake, r = fake, add = fake;
            l.kind = r.kind = N_CONST;
            l.val = acc;
            r.val = it;
            add.kind = N_BINARY;
            add.op = OP_ADD;
            add.a = &l;
            add.b = &r;
            if (wm_jeval(c, f, &add, &acc)) return -1;
        }
        *out = acc;
        return 0;
    }
    if (!strcmp(name, "center")) {
        jv w;
        kw_opt(a, 0, "width", &w, wm_jv_int(80));
        if (soft_str(c, v, &s)) return -1;
        jargs ca = {1, &w, 0, NULL, NULL};
        return wm_jmethod_call(c, at, s, "center", &ca, out);
    }
    if (!strcmp(name, "wordcount")) {
        if (soft_str(c, v, &s) || wm_jcharge(c, at, s.u.s.n / 64)) return -1;
        int64_t k = 0;
        int in = 0;
        for (size_t i = 0; i < s.u.s.n; i++) {
            unsigned char ch = (unsigned char)s.u.s.p[i];
            int w = ch == '_' || (ch >= '0' && ch <= '9') || ((ch | 32) >= 'a' && (ch | 32) <= 'z') || ch >= 0x80;
            if (w && !in) k++;
            in = w;
        }
        *out = wm_jv_int(k);
        return 0;
    }
    if (!strcmp(name, "indent")) return f_indent(c, at, v, a, out);
    if (!strcmp(name, "format")) { /* jinja2: value % args, or value % kwargs */
        if (wm_jv_tostr(c, v, &s)) return -1;
        if (a->n && a->nk) return wm_jerr(c, at, WM_ERR_INPUT, "format: can't handle positional and keyword arguments at the same time");
        if (a->nk) {
            if (wm_jdict_new(c, JD_DICT, &x)) return -1;
            for (size_t k = 0; k < a->nk; k++)
                if (wm_jdict_set(c, x.u.d, wm_jv_cstr(a->kn[k], strlen(a->kn[k])), a->kv[k])) return -1;
        } else {
            if (wm_jlist_new(c, a->n, 1, &x)) return -1;
            if (a->n) memcpy(x.u.l->v, a->v, a->n * sizeof(jv));
        }
        return wm_jformat(c, at, s, x, out);
    }
    if (!strcmp(name, "attr")) {
        if (!wm_jarg(a, 0, "name", &x) || x.t != JV_STR) return wm_jerr(c, at, WM_ERR_INPUT, "attr needs a name");
        if (v.t != JV_UNDEF && wm_jmethod_exists(v, x.u.s.p, x.u.s.n)) return wm_jgetattr(c, at, v, x.u.s.p, x.u.s.n, out);
        if (v.t == JV_DICT && v.u.d->kind != JD_DICT && wm_jdict_get(c, v.u.d, x.u.s.p, x.u.s.n, out)) return 0;
        *out = wm_jv_undef(x.u.s.p);
        return 0;
    }
    if (!strcmp(name, "escape") || !strcmp(name, "e")) {
        if (soft_str(c, v, &s)) return -1;
        jbuf b = {0};
        for (size_t i = 0; i < s.u.s.n; i++) {
            char ch = s.u.s.p[i];
            const char *r = ch == '&' ? "&amp;" : ch == '<' ? "&lt;" : ch == '>' ? "&gt;" : ch == '"' ? "&#34;" : ch == '\'' ? "&#39;" : NULL;
            if (r ? wm_jbuf_put(c, &b, r, strlen(r)) : wm_jbuf_putc(c, &b, ch)) {
                wm_jbuf_free(&b);
                return -1;
            }
        }
        return wm_jbuf_to_str(c, &b, out);
    }
    int k = wm_jfilter_known(name);
    return wm_jerr(c, at, k ? WM_ERR_UNSUPPORTED : WM_ERR_INPUT, k ? "filter '%s' is not supported" : "no filter named '%s'", name);
}

/* ---- tests ---- */

int wm_jtest(jctx *c, jframe *f, const jnode *at, const char *name, jv v, const jargs *a, int *r) {
    jv x;
    int have = wm_jarg(a, 0, NULL, &x);
    (void)f;
    if (wm_jcharge(c, at, 1)) return -1;
    if (!strcmp(name, "defined")) *r = v.t != JV_UNDEF;
    else if (!strcmp(name, "undefined")) *r = v.t == JV_UNDEF;
    else if (!strcmp(name, "none")) *r = v.t == JV_NONE;
    else if (!strcmp(name, "boolean")) *r = v.t == JV_BOOL;
    else if (!strcmp(name, "false")) *r = v.t == JV_BOOL && !v.u.b;
    else if (!strcmp(name, "true")) *r = v.t == JV_BOOL && v.u.b;
    else if (!strcmp(name, "integer")) *r = v.t == JV_INT;
    else if (!strcmp(name, "float")) *r = v.t == JV_FLOAT;
    else if (!strcmp(name, "number")) *r = v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL;
    else if (!strcmp(name, "string")) *r = v.t == JV_STR;
    else if (!strcmp(name, "mapping")) *r = v.t == JV_DICT && v.u.d->kind == JD_DICT;
    else if (!strcmp(name, "iterable"))
        *r = v.t == JV_UNDEF || v.t == JV_STR || v.t == JV_LIST || (v.t == JV_DICT && v.u.d->kind != JD_NS);
    else if (!strcmp(name, "sequence")) *r = v.t == JV_UNDEF || v.t == JV_STR || v.t == JV_LIST || (v.t == JV_DICT && v.u.d->kind == JD_DICT);
    else if (!strcmp(name, "callable")) *r = v.t == JV_FUNC || v.t == JV_METHOD || v.t == JV_MACRO;
    else if (!strcmp(name, "escaped")) *r = 0;
    else if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby")) {
        if (v.t != JV_INT && v.t != JV_BOOL) return wm_jerr(c, at, WM_ERR_INPUT, "test '%s' needs an integer", name);
        int64_t i = v.t == JV_INT ? v.u.i : v.u.b;
        if (name[0] == 'o') *r = (i % 2) != 0;
        else if (name[0] == 'e') *r = (i % 2) == 0;
        else {
            if (!have || x.t != JV_INT || x.u.i == 0) return wm_jerr(c, at, WM_ERR_INPUT, "divisibleby needs a non-zero integer");
            *r = x.u.i == -1 ? 1 : (i % x.u.i) == 0;
        }
    } else if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        jv s, t;
        if (soft_str(c, v, &s) || wm_jmethod_call(c, at, s, name[0] == 'l' ? "islower" : "isupper", &(jargs){0}, &t)) return -1;
        *r = t.u.b;
    } else if (!strcmp(name, "filter") || !strcmp(name, "test")) {
        *r = v.t == JV_STR && (name[0] == 'f' ? wm_jfilter_known(v.u.s.p) == 1 : wm_jtest_known(v.u.s.p));
    } else {
        if (!wm_jtest_known(name)) return wm_jerr(c, at, WM_ERR_INPUT, "no test named '%s'", name);
        if (!have) return wm_jerr(c, at, WM_ERR_INPUT, "test '%s' needs an argument", name);
        if (!strcmp(name, "sameas")) {
            *r = v.t == x.t && (v.t == JV_NONE || v.t == JV_UNDEF || (v.t == JV_BOOL && v.u.b == x.u.b) ||
                                ((v.t == JV_LIST || v.t == JV_DICT) && v.u.l == x.u.l) || (v.t == JV_INT && v.u.i == x.u.i));
        } else if (!strcmp(name, "in")) {
            jnode fake = *at, l = *at, rr = *at, op = *at;
            l.kind = rr.kind = N_CONST;
            l.val = v;
            rr.val = x;
            op.kind = N_CMPOP;
            op.op = OP_IN;
            op.a = &rr;
            jnode *ops[1] = {&op};
            fake.kind = N_COMPARE;
            fake.a = &l;
            fake.items = ops;
            fake.n = 1;
            jv res;
            if (wm_jeval(c, f, &fake, &res)) return -1;
            *r = res.u.b;
        } else {
            int eq = !strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==");
            int ne = !strcmp(name, "ne") || !strcmp(name, "!=");
            if (eq || ne) {
                int k = wm_jv_eq(c, v, x);
                if (k < 0) return -1;
                *r = k == eq;
            } else {
                int k;
                if (wm_jv_compare(c, at, v, x, &k)) return -1;
                if (!strcmp(name, "lt") || !strcmp(name, "lessthan") || !strcmp(name, "<")) *r = k < 0;
                else if (!strcmp(name, "le") || !strcmp(name, "<=")) *r = k <= 0;
                else if (!strcmp(name, "gt") || !strcmp(name, "greaterthan") || !strcmp(name, ">")) *r = k > 0;
                else *r = k >= 0;
            }
        }
    }
    return 0;
}
