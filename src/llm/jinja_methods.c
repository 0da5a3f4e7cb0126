/* jinja_methods.c - Python str/dict/list methods the sandbox allows, loop.cycle,
 * the globals (range, namespace, dict, raise_exception, strftime_now) and
 * argument helpers. Case mapping is ASCII-only (other characters pass through). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llm/jinja_impl.h"

#define MAX_RANGE 100000 /* jinja2.sandbox.MAX_RANGE */

int wm_jarg(const jargs *a, size_t i, const char *kw, jv *out) {
    if (i < a->n) {
        *out = a->v[i];
        return 1;
    }
    for (size_t k = 0; kw && k < a->nk; k++)
        if (strcmp(a->kn[k], kw) == 0) {
            *out = a->kv[k];
            return 1;
        }
    return 0;
}

int wm_jargs_check(jctx *c, const jnode *at, const char *what, const jargs *a, size_t maxpos, const char *const *kws) {
    if (a->n > maxpos) return wm_jerr(c, at, WM_ERR_INPUT, "%s takes at most %zu positional argument(s), got %zu", what, maxpos, a->n);
    for (size_t k = 0; k < a->nk; k++) {
        size_t i = 0;
        for (; kws && kws[i]; i++)
            if (strcmp(kws[i], a->kn[k]) == 0) break;
        if (!kws || !kws[i]) return wm_jerr(c, at, WM_ERR_INPUT, "%s got an unexpected keyword argument '%s'", what, a->kn[k]);
    }
    return 0;
}

static const char *const str_methods[] = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "replace", "upper", "lower", "title",
    "capitalize", "swapcase", "find", "rfind", "index", "rindex", "count", "join", "isdigit", "isalpha", "isalnum",
    "isspace", "isupper", "islower", "isnumeric", "isdecimal", "splitlines", "removeprefix", "removesuffix",
    "center", "ljust", "rjust", "zfill", "format", "partition", "rpartition", "casefold", NULL};
static const char *const dict_methods[] = {"get", "items", "keys", "values", "copy", "update", "pop", "popitem",
                                           "setdefault", "clear", "fromkeys", NULL};
static const char *const list_methods[] = {"index", "count", "copy", "append", "extend", "insert", "pop", "remove",
                                           "reverse", "sort", "clear", NULL};
static const char *const mutating[] = {"update", "pop", "popitem", "setdefault", "clear", "append", "extend",
                                       "insert", "remove", "reverse", "sort", NULL};

static int in_list(const char *const *l, const char *name, size_t nn) {
    for (; *l; l++)
        if (strlen(*l) == nn && memcmp(*l, name, nn) == 0) return 1;
    return 0;
}

int wm_jmethod_exists(jv self, const char *name, size_t nn) {
    switch (self.t) {
    case JV_STR: return in_list(str_methods, name, nn);
    case JV_DICT:
        if (self.u.d->kind == JD_LOOP) return nn == 5 && memcmp(name, "cycle", 5) == 0;
        return self.u.d->kind == JD_DICT && in_list(dict_methods, name, nn);
    case JV_LIST: return in_list(list_methods, name, nn);
    default: return 0;
    }
}

/* ---- string helpers ---- */

static int in_chars(const char *set, size_t sn, const char *p, size_t n, size_t i, size_t *len) {
    uint32_t cp = wm_u8_decode(p, n, i, len);
    for (size_t k = 0; k < sn;) {
        size_t l;
        if (wm_u8_decode(set, sn, k, &l) == cp) return 1;
        k += l;
    }
    return 0;
}

/* strip: mode 1 left, 2 right, 3 both; chars NULL = whitespace */
int wm_jstrip(jctx *c, const jnode *at, jv s, const jv *chars, int mode, jv *out);
int wm_jstrip(jctx *c, const jnode *at, jv s, const jv *chars, int mode, jv *out) {
    const char *p = s.u.s.p;
    size_t b = 0, e = s.u.s.n, l;
    int ws = !chars || chars->t == JV_NONE;
    if (!ws && chars->t != JV_STR) return wm_jerr(c, at, WM_ERR_INPUT, "strip arg must be None or str");
    /* each character tested scans the set: charged per character when the set is long */
    uint64_t per = ws ? 0 : chars->u.s.n / 16;
    if (wm_jcharge(c, at, s.u.s.n / 64)) return -1;
    if (mode & 1)
        while (b < e && (ws ? (l = wm_py_space_at(p, e, b)) != 0 : in_chars(chars->u.s.p, chars->u.s.n, p, e, b, &l))) {
            if (per && wm_jcharge(c, at, per)) return -1;
            b += l;
        }
    if (mode & 2)
        while (e > b) {
            size_t j = e - 1;
            while (j > b && ((unsigned char)p[j] & 0xc0) == 0x80 && e - j < 4) j--;
            size_t cl;
            wm_u8_decode(p, e, j, &cl);
            if (j + cl != e) j = e - 1, cl = 1;
            int hit = ws ? wm_py_space_at(p, e, j) != 0 : in_chars(chars->u.s.p, chars->u.s.n, p, e, j, &l);
            if (!hit) break;
            if (per && wm_jcharge(c, at, per)) return -1;
            e = j;
        }
    *out = wm_jv_cstr(p + b, e - b);
    return 0;
}

static int push_item(jctx *c, jv **arr, size_t *n, size_t *cap, jv v) {
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        jv *na = wm_jalloc(c, nc * sizeof(jv));
        if (!na) return -1;
        if (*n) memcpy(na, *arr, *n * sizeof(jv));
        *arr = na;
        *cap = nc;
    }
    (*arr)[(*n)++] = v;
    return 0;
}

static int make_list(jctx *c, jv *items, size_t n, jv *out) {
    if (wm_jlist_new(c, n, 0, out)) return -1;
    if (n) memcpy(out->u.l->v, items, n * sizeof(jv));
    return 0;
}

static int split(jctx *c, const jnode *at, jv s, const jargs *a, int right, jv *out) {
    jv sep = wm_jv_none(), ms = wm_jv_int(-1);
    wm_jarg(a, 0, "sep", &sep);
    wm_jarg(a, 1, "maxsplit", &ms);
    if (ms.t != JV_INT) return wm_jerr(c, at, WM_ERR_INPUT, "split: maxsplit must be an integer");
    int64_t max = ms.u.i;
    const char *p = s.u.s.p;
    size_t n = s.u.s.n, cap = 0, cnt = 0;
    jv *items = NULL;
    if (wm_jcharge(c, at, n / 16)) return -1;
    if (sep.t == JV_NONE) { /* runs of whitespace, no empty strings */
        if (!right) {
            size_t i = 0, l;
            for (;;) {
                while (i < n && (l = wm_py_space_at(p, n, i))) i += l;
                if (i >= n) break;
                if (max >= 0 && (int64_t)cnt == max) {
                    size_t e = n;
                    while (e > i && (l = wm_py_space_before(p, e))) e -= l;
                    if (push_item(c, &items, &cnt, &cap, wm_jv_cstr(p + i, e - i))) return -1;
                    break;
                }
                size_t st = i;
                while (i < n && !wm_py_space_at(p, n, i)) i = wm_u8_next(p, n, i);
                if (push_item(c, &items, &cnt, &cap, wm_jv_cstr(p + st, i - st))) return -1;
            }
        } else {
            size_t e = n, l;
            for (;;) {
                while (e > 0 && (l = wm_py_space_before(p, e))) e -= l;
                if (e == 0) break;
                if (max >= 0 && (int64_t)cnt == max) {
                    size_t b = 0;
                    while (b < e && (l = wm_py_space_at(p, e, b))) b += l;
                    if (push_item(c, &items, &cnt, &cap, wm_jv_cstr(p + b, e - b))) return -1;
                    break;
                }
                size_t en = e;
                while (e > 0 && !wm_py_space_before(p, e)) {
                    e--;
                    while (e > 0 && ((unsigned char)p[e] & 0xc0) == 0x80) e--;
                }
                if (push_item(c, &items, &cnt, &cap, wm_jv_cstr(p + e, en - e))) return -1;
            }
        }
    } else {
        if (sep.t != JV_STR) return wm_jerr(c, at, WM_ERR_INPUT, "split: separator must be str or None");
        if (sep.u.s.n == 0) return wm_jerr(c, at, WM_ERR_INPUT, "split: empty separator");
        size_t sn = sep.u.s.n;
        if (!right) {
            size_t i = 0;
            for (;;) {
                int64_t k = (max >= 0 && (int64_t)cnt == max) ? -1 : wm_jfind(c, at, p, n, sep.u.s.p, sn, i);
                if (k == -2) return -1;
                if (k < 0) {
                    if (push_item(c, &items, &cnt, &cap, wm_jv_cstr(p + i, n - i))) return -1;
                    break;
                }
                if (push_item(c, &items, &cnt, &cap, wm_jv_cstr(p + i, (size_t)k - i))) return -1;
                i = (size_t)k + sn;
            }
        } else {
            size_t e = n;
            for (;;) {
                int64_t k = (max >= 0 && (int64_t)cnt == max) ? -1 : wm_jrfind(c, at, p, e, sep.u.s.p, sn);
                if (k == -2) return -1;
                if (k < 0) {
                    if (push_item(c, &items, &cnt, &cap, wm_jv_cstr(p, e))) return -1;
                    break;
                }
                if (push_item(c, &items, &cnt, &cap, wm_jv_cstr(p + k + sn, e - (size_t)k - sn))) return -1;
                e = (size_t)k;
            }
        }
    }
    if (right)
        for (size_t i = 0; i < cnt / 2; i++) {
            jv t = items[i];
            items[i] = items[cnt - 1 - i];
            items[cnt - 1 - i] = t;
        }
    return make_list(c, items, cnt, out);
}

/* str.replace(old, new, count) */
int wm_jreplace(jctx *c, const jnode *at, jv s, jv old, jv nw, int64_t count, jv *out);
int wm_jreplace(jctx *c, const jnode *at, jv s, jv old, jv nw, int64_t count, jv *out) {
    if (old.t != JV_STR || nw.t != JV_STR) return wm_jerr(c, at, WM_ERR_INPUT, "replace() arguments must be str");
    jbuf b = {0};
    const char *p = s.u.s.p;
    size_t n = s.u.s.n, i = 0;
    int64_t done = 0;
    if (wm_jcharge(c, at, n / 16)) return -1;
    if (old.u.s.n == 0) { /* insert before every char and at the end */
        while (1) {
            if (count >= 0 && done >= count) break;
            if (wm_jbuf_put(c, &b, nw.u.s.p, nw.u.s.n)) goto fail;
            done++;
            if (i >= n) break;
            size_t e = wm_u8_next(p, n, i);
            if (wm_jbuf_put(c, &b, p + i, e - i)) goto fail;
            i = e;
        }
        if (wm_jbuf_put(c, &b, p + i, n - i)) goto fail;
        return wm_jbuf_to_str(c, &b, out);
    }
    for (;;) {
        int64_t k = (count >= 0 && done >= count) ? -1 : wm_jfind(c, at, p, n, old.u.s.p, old.u.s.n, i);
        if (k == -2) goto fail;
        if (k < 0) break;
        if (wm_jbuf_put(c, &b, p + i, (size_t)k - i) || wm_jbuf_put(c, &b, nw.u.s.p, nw.u.s.n)) goto fail;
        i = (size_t)k + old.u.s.n;
        done++;
    }
    if (wm_jbuf_put(c, &b, p + i, n - i)) goto fail;
    return wm_jbuf_to_str(c, &b, out);
fail:
    wm_jbuf_free(&b);
    return -1;
}

static int is_alpha(char ch) { return (ch | 32) >= 'a' && (ch | 32) <= 'z'; }

static int put_cp(jctx *c, jbuf *b, uint32_t cp, int upper) {
    char t[4];
    size_t n;
    if (upper && cp == 0xdf) return wm_jbuf_put(c, b, "SS", 2); /* Python's full upper-casing of sharp s */
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

/* mode: 'u' upper, 'l' lower, 't' Python title, 'c' capitalize, 's' swapcase, 'j' jinja title filter.
 * Simple case mapping (wm_jinja_uc_upper / wm_jinja_uc_lower) plus sharp s -> SS. */
int wm_jcase(jctx *c, const jnode *at, jv s, char mode, jv *out);
int wm_jcase(jctx *c, const jnode *at, jv s, char mode, jv *out) {
    if (wm_jcharge(c, at, s.u.s.n / 64)) return -1;
    jbuf b = {0};
    int prev_cased = 0, word_start = 1, first = 1;
    for (size_t i = 0; i < s.u.s.n;) {
        size_t l;
        uint32_t cp = wm_u8_decode(s.u.s.p, s.u.s.n, i, &l), o = cp;
        int upper = 0;
        if (l == 1 && cp >= 0x80) { /* an invalid byte: copy it */
            if (wm_jbuf_put(c, &b, s.u.s.p + i, 1)) goto fail;
            i++;
            continue;
        }
        switch (mode) {
        case 'u': o = wm_jinja_uc_upper(cp); upper = 1; break;
        case 'l':
            o = wm_jinja_uc_lower(cp);
            if (cp == 0x3a3) { /* Python's final sigma: after a cased letter and not before one */
                size_t nl;
                int next_cased = i + l < s.u.s.n && wm_uc_is_cased(wm_u8_decode(s.u.s.p, s.u.s.n, i + l, &nl));
                if (prev_cased && !next_cased) o = 0x3c2;
            }
            prev_cased = wm_uc_is_cased(cp);
            break;
        case 's': o = wm_jinja_uc_upper(cp) != cp ? wm_jinja_uc_upper(cp) : wm_jinja_uc_lower(cp); upper = o != cp && wm_jinja_uc_upper(cp) != cp; break;
        case 'c': o = first ? wm_jinja_uc_upper(cp) : wm_jinja_uc_lower(cp); upper = first; break;
        case 't':
            o = prev_cased ? wm_jinja_uc_lower(cp) : wm_jinja_uc_upper(cp);
            upper = !prev_cased;
            prev_cased = wm_uc_is_cased(cp);
            break;
        case 'j': { /* words split at runs of [-\s({[<]: first char upper, rest lower */
            int delim = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || wm_py_isspace(cp);
            o = word_start ? wm_jinja_uc_upper(cp) : wm_jinja_uc_lower(cp);
            upper = word_start;
            word_start = delim;
            break;
        }
        }
        if (upper && cp == 0xdf && mode != 'u' && mode != 's') upper = 0; /* titlecase of sharp s is "Ss": keep it */
        if (put_cp(c, &b, o, upper && cp == 0xdf && (mode == 'u' || mode == 's'))) goto fail;
        first = 0;
        i += l;
    }
    return wm_jbuf_to_str(c, &b, out);
fail:
    wm_jbuf_free(&b);
    return -1;
}

/* code points in [0, byte offset) */
static int64_t cp_index(jctx *c, const char *p, size_t off) { return (int64_t)wm_jlen(c, p, off); }

static int affix(jctx *c, const jnode *at, jv s, const jargs *a, int end, jv *out) {
    jv x;
    if (!wm_jarg(a, 0, NULL, &x)) return wm_jerr(c, at, WM_ERR_INPUT, "%s() takes a prefix", end ? "endswith" : "startswith");
    jv *cands = &x;
    size_t nc = 1;
    if (x.t == JV_LIST && x.u.l->tuple) {
        cands = x.u.l->v;
        nc = x.u.l->n;
    }
    if (a->n > 1) return wm_jerr(c, at, WM_ERR_UNSUPPORTED, "start/end arguments of %s() are not supported", end ? "endswith" : "startswith");
    for (size_t i = 0; i < nc; i++) {
        jv p = cands[i];
        if (p.t != JV_STR) return wm_jerr(c, at, WM_ERR_INPUT, "%s() argument must be str or a tuple of str", end ? "endswith" : "startswith");
        if (wm_jcharge(c, at, 1 + p.u.s.n / 64)) return -1;
        if (p.u.s.n <= s.u.s.n &&
            memcmp(s.u.s.p + (end ? s.u.s.n - p.u.s.n : 0), p.u.s.p, p.u.s.n) == 0) {
            *out = wm_jv_bool(1);
            return 0;
        }
    }
    *out = wm_jv_bool(0);
    return 0;
}

int wm_jsplitlines(jctx *c, const jnode *at, jv s, int keepends, jv *out);
int wm_jsplitlines(jctx *c, const jnode *at, jv s, int keepends, jv *out) {
    const char *p = s.u.s.p;
    size_t n = s.u.s.n, i = 0, st = 0, cnt = 0, cap = 0;
    jv *items = NULL;
    if (wm_jcharge(c, at, n / 16)) return -1;
    while (i < n) {
        size_t l;
        uint32_t cp = wm_u8_decode(p, n, i, &l);
        int br = cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || (cp >= 0x1c && cp <= 0x1e) || cp == 0x85 ||
                 cp == 0x2028 || cp == 0x2029;
        if (!br) {
            i += l;
            continue;
        }
        size_t e = i + l;
        if (cp == '\r' && e < n && p[e] == '\n') e++;
        if (push_item(c, &items, &cnt, &cap, wm_jv_cstr(p + st, (keepends ? e : i) - st))) return -1;
        st = i = e;
    }
    if (st < n && push_item(c, &items, &cnt, &cap, wm_jv_cstr(p + st, n - st))) return -1;
    return make_list(c, items, cnt, out);
}

static int str_method(jctx *c, const jnode *at, jv s, const char *m, const jargs *a, jv *out) {
    jv x, y;
    if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
        int mode = m[0] == 'l' ? 1 : m[0] == 'r' ? 2 : 3;
        return wm_jstrip(c, at, s, wm_jarg(a, 0, NULL, &x) ? &x : NULL, mode, out);
    }
    if (!strcmp(m, "split") || !strcmp(m, "rsplit")) return split(c, at, s, a, m[0] == 'r', out);
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) return affix(c, at, s, a, m[0] == 'e', out);
    if (!strcmp(m, "replace")) {
        jv cnt = wm_jv_int(-1);
        if (!wm_jarg(a, 0, NULL, &x) || !wm_jarg(a, 1, NULL, &y)) return wm_jerr(c, at, WM_ERR_INPUT, "replace() takes 2 or 3 arguments");
        wm_jarg(a, 2, "count", &cnt);
        if (cnt.t != JV_INT) return wm_jerr(c, at, WM_ERR_INPUT, "replace() count must be an integer");
        return wm_jreplace(c, at, s, x, y, cnt.u.i, out);
    }
    if (!strcmp(m, "upper")) return wm_jcase(c, at, s, 'u', out);
    if (!strcmp(m, "lower") || !strcmp(m, "casefold")) return wm_jcase(c, at, s, 'l', out);
    if (!strcmp(m, "title")) return wm_jcase(c, at, s, 't', out);
    if (!strcmp(m, "capitalize")) return wm_jcase(c, at, s, 'c', out);
    if (!strcmp(m, "swapcase")) return wm_jcase(c, at, s, 's', out);
    if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "index") || !strcmp(m, "rindex") || !strcmp(m, "count")) {
        if (!wm_jarg(a, 0, NULL, &x) || x.t != JV_STR) return wm_jerr(c, at, WM_ERR_INPUT, "%s() takes a string", m);
        if (a->n > 1) return wm_jerr(c, at, WM_ERR_UNSUPPORTED, "start/end arguments of %s() are not supported", m);
        if (!strcmp(m, "count")) {
            int64_t k = 0;
            if (x.u.s.n == 0) k = (int64_t)wm_jlen(c, s.u.s.p, s.u.s.n) + 1;
            else
                for (int64_t pos = 0; (pos = wm_jfind(c, at, s.u.s.p, s.u.s.n, x.u.s.p, x.u.s.n, (size_t)pos)) >= 0;
                     pos += (int64_t)x.u.s.n)
                    k++;
            if (c->failed) return -1;
            *out = wm_jv_int(k);
            return 0;
        }
        int64_t pos = m[0] == 'r' ? wm_jrfind(c, at, s.u.s.p, s.u.s.n, x.u.s.p, x.u.s.n)
                                  : wm_jfind(c, at, s.u.s.p, s.u.s.n, x.u.s.p, x.u.s.n, 0);
        if (pos == -2) return -1;
        if (pos < 0 && strstr(m, "index")) return wm_jerr(c, at, WM_ERR_INPUT, "substring not found");
        *out = wm_jv_int(pos < 0 ? -1 : cp_index(c, s.u.s.p, (size_t)pos));
        return 0;
    }
    if (!strcmp(m, "join")) {
        jlist *items;
        if (!wm_jarg(a, 0, NULL, &x) || wm_jiter(c, at, x, &items)) return wm_jerr(c, at, WM_ERR_INPUT, "join() takes an iterable");
        jbuf b = {0};
        for (size_t i = 0; i < items->n; i++) {
            if (items->v[i].t != JV_STR) {
                wm_jbuf_free(&b);
                return wm_jerr(c, at, WM_ERR_INPUT, "join(): sequence item %zu: expected str, got %s", i, wm_jv_typename(items->v[i]));
            }
            if ((i && wm_jbuf_put(c, &b, s.u.s.p, s.u.s.n)) || wm_jbuf_put(c, &b, items->v[i].u.s.p, items->v[i].u.s.n)) {
                wm_jbuf_free(&b);
                return -1;
            }
        }
        return wm_jbuf_to_str(c, &b, out);
    }
    if (!strncmp(m, "is", 2)) {
        int all = s.u.s.n > 0, any_cased = 0;
        if (wm_jcharge(c, at, s.u.s.n / 64)) return -1;
        for (size_t i = 0; i < s.u.s.n && all;) {
            size_t l;
            uint32_t cp = wm_u8_decode(s.u.s.p, s.u.s.n, i, &l);
            int ok;
            if (!strcmp(m, "isspace")) ok = wm_py_isspace(cp);
            else if (!strcmp(m, "isdigit") || !strcmp(m, "isnumeric") || !strcmp(m, "isdecimal")) ok = cp >= '0' && cp <= '9';
            else if (!strcmp(m, "isalpha")) ok = cp < 0x80 && is_alpha((char)cp);
            else if (!strcmp(m, "isalnum")) ok = cp < 0x80 && (is_alpha((char)cp) || (cp >= '0' && cp <= '9'));
            else if (!strcmp(m, "isupper")) {
                ok = !(cp >= 'a' && cp <= 'z');
                any_cased |= cp >= 'A' && cp <= 'Z';
            } else {
                ok = !(cp >= 'A' && cp <= 'Z');
                any_cased |= cp >= 'a' && cp <= 'z';
            }
            all = ok;
            i += l;
        }
        if (!strcmp(m, "isupper") || !strcmp(m, "islower")) all = all && any_cased;
        *out = wm_jv_bool(all);
        return 0;
    }
    if (!strcmp(m, "splitlines")) {
        jv k = wm_jv_bool(0);
        wm_jarg(a, 0, "keepends", &k);
        return wm_jsplitlines(c, at, s, wm_jv_truthy(k), out);
    }
    if (!strcmp(m, "removeprefix") || !strcmp(m, "removesuffix")) {
        if (!wm_jarg(a, 0, NULL, &x) || x.t != JV_STR) return wm_jerr(c, at, WM_ERR_INPUT, "%s() takes a string", m);
        if (wm_jcharge(c, at, x.u.s.n / 64)) return -1;
        *out = s;
        if (x.u.s.n <= s.u.s.n) {
            if (m[6] == 'p' && memcmp(s.u.s.p, x.u.s.p, x.u.s.n) == 0) *out = wm_jv_cstr(s.u.s.p + x.u.s.n, s.u.s.n - x.u.s.n);
            if (m[6] == 's' && memcmp(s.u.s.p + s.u.s.n - x.u.s.n, x.u.s.p, x.u.s.n) == 0)
                *out = wm_jv_cstr(s.u.s.p, s.u.s.n - x.u.s.n);
        }
        return 0;
    }
    if (!strcmp(m, "center") || !strcmp(m, "ljust") || !strcmp(m, "rjust") || !strcmp(m, "zfill")) {
        jv w, fill = wm_jv_cstr(m[0] == 'z' ? "0" : " ", 1);
        if (!wm_jarg(a, 0, NULL, &w) || w.t != JV_INT) return wm_jerr(c, at, WM_ERR_INPUT, "%s() takes an integer width", m);
        if (m[0] != 'z') wm_jarg(a, 1, NULL, &fill);
        if (fill.t != JV_STR || wm_jlen(c, fill.u.s.p, fill.u.s.n) != 1)
            return wm_jerr(c, at, WM_ERR_INPUT, "%s(): the fill character must be exactly one character long", m);
        int64_t len = (int64_t)wm_jlen(c, s.u.s.p, s.u.s.n), pad = w.u.i - len;
        if (pad <= 0) {
            *out = s;
            return 0;
        }
        if (pad > (int64_t)c->max_output) return wm_jerr(c, at, WM_ERR_INPUT, "%s(): width too large", m);
        int64_t left = m[0] == 'l' ? 0 : m[0] == 'r' || m[0] == 'z' ? pad : pad / 2 + (pad & w.u.i & 1);
        jbuf b = {0};
        int rc = 0;
        size_t sign = m[0] == 'z' && s.u.s.n && (s.u.s.p[0] == '-' || s.u.s.p[0] == '+');
        if (sign) rc = wm_jbuf_put(c, &b, s.u.s.p, 1);
        for (int64_t i = 0; i < left && !rc; i++) rc = wm_jbuf_put(c, &b, fill.u.s.p, fill.u.s.n);
        if (!rc) rc = wm_jbuf_put(c, &b, s.u.s.p + sign, s.u.s.n - sign);
        for (int64_t i = left; i < pad && !rc; i++) rc = wm_jbuf_put(c, &b, fill.u.s.p, fill.u.s.n);
        if (rc) {
            wm_jbuf_free(&b);
            return -1;
        }
        return wm_jbuf_to_str(c, &b, out);
    }
    if (!strcmp(m, "partition") || !strcmp(m, "rpartition")) {
        if (!wm_jarg(a, 0, NULL, &x) || x.t != JV_STR || !x.u.s.n) return wm_jerr(c, at, WM_ERR_INPUT, "%s() takes a non-empty string", m);
        int64_t pos = m[0] == 'r' ? wm_jrfind(c, at, s.u.s.p, s.u.s.n, x.u.s.p, x.u.s.n)
                                  : wm_jfind(c, at, s.u.s.p, s.u.s.n, x.u.s.p, x.u.s.n, 0);
        if (pos == -2 || wm_jlist_new(c, 3, 1, out)) return -1;
        jv *v = out->u.l->v;
        if (pos < 0) {
            v[0] = m[0] == 'r' ? wm_jv_cstr("", 0) : s;
            v[1] = wm_jv_cstr("", 0);
            v[2] = m[0] == 'r' ? s : wm_jv_cstr("", 0);
        } else {
            v[0] = wm_jv_cstr(s.u.s.p, (size_t)pos);
            v[1] = x;
            v[2] = wm_jv_cstr(s.u.s.p + pos + x.u.s.n, s.u.s.n - (size_t)pos - x.u.s.n);
        }
        return 0;
    }
    return wm_jerr(c, at, WM_ERR_UNSUPPORTED, "string method '%s' is not supported", m);
}

static int dict_method(jctx *c, const jnode *at, jv d, const char *m, const jargs *a, jv *out) {
    jv x;
    if (!strcmp(m, "get")) {
        if (!wm_jarg(a, 0, NULL, &x)) return wm_jerr(c, at, WM_ERR_INPUT, "get() takes a key");
        int found = wm_jdict_getv(c, d.u.d, x, out);
        if (found < 0) return -1;
        if (found) return 0;
        if (!wm_jarg(a, 1, NULL, out)) *out = wm_jv_none();
        return 0;
    }
    if (!strcmp(m, "keys") || !strcmp(m, "values") || !strcmp(m, "items") || !strcmp(m, "copy")) {
        const jdict *s = d.u.d;
        if (!strcmp(m, "copy")) return wm_jdict_copy(c, s, JD_DICT, out);
        if (wm_jcharge(c, at, s->n / 16) || wm_jlist_new(c, s->n, 0, out)) return -1;
        out->u.l->view = m[0] == 'i' ? 1 : m[0] == 'k' ? 2 : 3;
        for (size_t i = 0; i < s->n; i++) {
            if (m[0] == 'k') out->u.l->v[i] = s->k[i];
            else if (m[0] == 'v') out->u.l->v[i] = s->v[i];
            else {
                if (wm_jlist_new(c, 2, 1, &x)) return -1;
                x.u.l->v[0] = s->k[i];
                x.u.l->v[1] = s->v[i];
                out->u.l->v[i] = x;
            }
        }
        return 0;
    }
    return wm_jerr(c, at, WM_ERR_UNSUPPORTED, "dict method '%s' is not supported", m);
}

int wm_jmethod_call(jctx *c, const jnode *at, jv self, const char *name, const jargs *a, jv *out) {
    if (wm_jcharge(c, at, 1)) return -1;
    if (in_list(mutating, name, strlen(name)) && self.t != JV_STR)
        return wm_jerr(c, at, WM_ERR_INPUT, "'%s' would modify a %s: not allowed in a chat template (immutable sandbox)", name,
                    wm_jv_typename(self));
    if (self.t == JV_STR) return str_method(c, at, self, name, a, out);
    if (self.t == JV_DICT && self.u.d->kind == JD_LOOP) { /* loop.cycle */
        if (!a->n) return wm_jerr(c, at, WM_ERR_INPUT, "loop.cycle() takes at least one argument");
        *out = a->v[self.u.d->index0 % (int64_t)a->n];
        return 0;
    }
    if (self.t == JV_DICT) return dict_method(c, at, self, name, a, out);
    if (self.t == JV_LIST) {
        jv x;
        if (!strcmp(name, "copy")) {
            if (wm_jlist_new(c, self.u.l->n, self.u.l->tuple, out)) return -1;
            if (self.u.l->n) memcpy(out->u.l->v, self.u.l->v, self.u.l->n * sizeof(jv));
            return 0;
        }
        if (!wm_jarg(a, 0, NULL, &x)) return wm_jerr(c, at, WM_ERR_INPUT, "%s() takes one argument", name);
        int64_t k = 0, pos = -1;
        for (size_t i = 0; i < self.u.l->n; i++) {
            int eq = wm_jv_eq(c, self.u.l->v[i], x);
            if (eq < 0) return -1;
            if (eq) {
                k++;
                if (pos < 0) pos = (int64_t)i;
            }
        }
        if (!strcmp(name, "count")) {
            *out = wm_jv_int(k);
            return 0;
        }
        if (pos < 0) return wm_jerr(c, at, WM_ERR_INPUT, "index(): value is not in the list");
        *out = wm_jv_int(pos);
        return 0;
    }
    return wm_jerr(c, at, WM_ERR_UNSUPPORTED, "method '%s' of '%s' is not supported", name, wm_jv_typename(self));
}

/* ---- globals ---- */

static int g_range(jctx *c, const jnode *at, const jargs *a, jv *out) {
    int64_t v[3] = {0, 0, 1};
    if (a->nk || a->n < 1 || a->n > 3) return wm_jerr(c, at, WM_ERR_INPUT, "range() takes 1 to 3 positional arguments");
    for (size_t i = 0; i < a->n; i++) {
        jv x = a->v[i];
        if (x.t != JV_INT && x.t != JV_BOOL) return wm_jerr(c, at, WM_ERR_INPUT, "range() arguments must be integers, not %s", wm_jv_typename(x));
        v[a->n == 1 ? 1 : i] = x.t == JV_INT ? x.u.i : x.u.b;
    }
    if (v[2] == 0) return wm_jerr(c, at, WM_ERR_INPUT, "range() step must not be zero");
    double cnt = v[2] > 0 ? ((double)v[1] - (double)v[0]) / (double)v[2] : ((double)v[0] - (double)v[1]) / (double)-v[2];
    int64_t n = 0;
    if (cnt > 0) n = (int64_t)cnt + ((double)(int64_t)cnt < cnt ? 1 : 0);
    if (cnt > MAX_RANGE || n > MAX_RANGE)
        return wm_jerr(c, at, WM_ERR_INPUT, "range() of more than %d items is not allowed (sandbox limit)", MAX_RANGE);
    if (wm_jlist_new(c, (size_t)n, 0, out)) return -1;
    for (int64_t i = 0; i < n; i++) out->u.l->v[i] = wm_jv_int(v[0] + i * v[2]);
    return 0;
}

static int fill_dict(jctx *c, const jnode *at, const jargs *a, int kind, jv *out) {
    if (wm_jdict_new(c, kind, out)) return -1;
    if (a->n > 1) return wm_jerr(c, at, WM_ERR_INPUT, "%s() takes at most one positional argument", kind == JD_NS ? "namespace" : "dict");
    if (a->n == 1) {
        jv m = a->v[0];
        if (m.t != JV_DICT || m.u.d->kind != JD_DICT)
            return wm_jerr(c, at, WM_ERR_UNSUPPORTED, "%s() with a positional %s is not supported", kind == JD_NS ? "namespace" : "dict",
                        wm_jv_typename(m));
        for (size_t i = 0; i < m.u.d->n; i++)
            if (kind == JD_NS && m.u.d->k[i].t == JV_STR && m.u.d->k[i].u.s.n && m.u.d->k[i].u.s.p[0] == '_')
                return wm_jerr(c, at, WM_ERR_INPUT, "namespace attributes starting with '_' are not allowed");
        if (wm_jdict_copy(c, m.u.d, kind, out)) return -1; /* distinct keys: no comparisons */
    }
    for (size_t k = 0; k < a->nk; k++) {
        if (kind == JD_NS && a->kn[k][0] == '_')
            return wm_jerr(c, at, WM_ERR_INPUT, "namespace attributes starting with '_' are not allowed");
        if (wm_jdict_set(c, out->u.d, wm_jv_cstr(a->kn[k], strlen(a->kn[k])), a->kv[k])) return -1;
    }
    return 0;
}

static int g_namespace(jctx *c, const jnode *at, const jargs *a, jv *out) { return fill_dict(c, at, a, JD_NS, out); }
static int g_dict(jctx *c, const jnode *at, const jargs *a, jv *out) { return fill_dict(c, at, a, JD_DICT, out); }

static int g_raise(jctx *c, const jnode *at, const jargs *a, jv *out) {
    (void)out;
    jv m = wm_jv_cstr("", 0);
    wm_jarg(a, 0, "message", &m);
    jbuf b = {0};
    if (wm_jv_str(c, &b, m)) {
        wm_jbuf_free(&b);
        return -1;
    }
    wm_jerr(c, at, WM_ERR_INPUT, "raise_exception: %s", b.p ? b.p : "");
    wm_jbuf_free(&b);
    return -1;
}

static int g_strftime(jctx *c, const jnode *at, const jargs *a, jv *out) {
    jv f;
    if (!wm_jarg(a, 0, "format", &f) || f.t != JV_STR) return wm_jerr(c, at, WM_ERR_INPUT, "strftime_now() takes a format string");
    if (f.u.s.n > 256 || memchr(f.u.s.p, 0, f.u.s.n)) return wm_jerr(c, at, WM_ERR_INPUT, "strftime_now(): format too long");
    time_t t = c->now ? (time_t)c->now : time(NULL);
    struct tm tmv;
    if (!localtime_r(&t, &tmv)) return wm_jerr(c, at, WM_ERR_INPUT, "strftime_now(): time out of range");
    char buf[1024];
    size_t n = strftime(buf, sizeof buf, f.u.s.p, &tmv);
    return wm_jstr(c, buf, n, out);
}

static const jfunc globals[] = {{"range", g_range},
                                {"namespace", g_namespace},
                                {"dict", g_dict},
                                {"raise_exception", g_raise},
                                {"strftime_now", g_strftime}};

const jfunc *wm_jglobal_find(const char *name) {
    for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++)
        if (!strcmp(globals[i].name, name)) return &globals[i];
    return NULL;
}
