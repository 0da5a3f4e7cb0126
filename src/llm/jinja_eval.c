/* jinja_eval.c - evaluation of expressions and statements: scopes (a for-loop
 * iteration and a macro call get their own frame, if/set do not), Python
 * arithmetic, attribute/item lookup with jinja2's fallbacks, loop objects. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/jinja_impl.h"

/* ---- frames ---- */

int wm_jframe_set(jctx *c, jframe *f, const char *name, jv v) {
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->vars[i].name, name) == 0) {
            wm_jaccrue(c, i / 16);
            f->vars[i].v = v;
            return 0;
        }
    wm_jaccrue(c, f->n / 16);
    return wm_jframe_append(c, f, name, v);
}

int wm_jframe_append(jctx *c, jframe *f, const char *name, jv v) {
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 8;
        jvar *nv = wm_jalloc(c, cap * sizeof(jvar));
        if (!nv) return -1;
        if (f->n) memcpy(nv, f->vars, f->n * sizeof(jvar));
        f->vars = nv;
        f->cap = cap;
    }
    f->vars[f->n].name = name;
    f->vars[f->n].v = v;
    f->n++;
    return 0;
}

int wm_jlookup(jctx *c, jframe *f, const char *name, jv *out) {
    size_t scanned = 0;
    for (; f; f = f->parent)
        for (size_t i = 0; i < f->n; i++, scanned++)
            if (strcmp(f->vars[i].name, name) == 0) {
                wm_jaccrue(c, scanned / 16);
                *out = f->vars[i].v;
                return 1;
            }
    wm_jaccrue(c, scanned / 16);
    const jfunc *g = wm_jglobal_find(name);
    if (g) {
        memset(out, 0, sizeof *out);
        out->t = JV_FUNC;
        out->u.fn = g;
        return 1;
    }
    return 0;
}

static int undefined_err(jctx *c, const jnode *at, jv v, const char *doing) {
    if (v.uname) return wm_jerr(c, at, WM_ERR_INPUT, "'%s' is undefined (%s)", v.uname, doing);
    return wm_jerr(c, at, WM_ERR_INPUT, "undefined value (%s)", doing);
}

/* ---- lookups ---- */

int wm_jgetattr(jctx *c, const jnode *at, jv obj, const char *name, size_t nn, jv *out) {
    if (obj.t == JV_UNDEF) return undefined_err(c, at, obj, "attribute access");
    if (wm_jmethod_exists(obj, name, nn)) {
        jmethod *m = wm_jalloc(c, sizeof *m);
        if (!m) return -1;
        m->self = obj;
        m->name = name;
        memset(out, 0, sizeof *out);
        out->t = JV_METHOD;
        out->u.m = m;
        return 0;
    }
    if (obj.t == JV_DICT && wm_jdict_get(c, obj.u.d, name, nn, out)) return 0;
    *out = wm_jv_undef(name);
    return 0;
}

static int to_index(jv k, int64_t *i) {
    if (k.t == JV_INT) *i = k.u.i;
    else if (k.t == JV_BOOL) *i = k.u.b;
    else return 0;
    return 1;
}

/* byte offset of code point k (0 <= k < its count) of p[0, n) */
static size_t cp_at(const char *p, size_t n, size_t k) {
    size_t i = 0;
    for (; k > 0 && i < n; k--) i = wm_u8_next(p, n, i);
    return i;
}

int wm_jgetitem(jctx *c, const jnode *at, jv obj, jv key, jv *out) {
    int64_t i;
    if (obj.t == JV_UNDEF) return undefined_err(c, at, obj, "item access");
    if (obj.t == JV_DICT) {
        int found = wm_jdict_getv(c, obj.u.d, key, out);
        if (found < 0) return -1;
        if (found) return 0;
    } else if (obj.t == JV_LIST && to_index(key, &i)) {
        int64_t n = (int64_t)obj.u.l->n;
        if (i < 0) i += n;
        if (i >= 0 && i < n) {
            *out = obj.u.l->v[i];
            return 0;
        }
    } else if (obj.t == JV_STR && to_index(key, &i)) {
        if (wm_jcharge(c, at, obj.u.s.n / 32)) return -1;
        const char *p = obj.u.s.p;
        size_t n = obj.u.s.n, k = wm_u8_len(p, n);
        if (i < 0) i += (int64_t)k;
        if (i >= 0 && i < (int64_t)k) {
            size_t b0 = cp_at(p, n, (size_t)i);
            return wm_jstr(c, p + b0, wm_u8_next(p, n, b0) - b0, out);
        }
    }
    if (key.t == JV_STR && obj.t != JV_DICT) return wm_jgetattr(c, at, obj, key.u.s.p, key.u.s.n, out);
    if (key.t == JV_STR && wm_jmethod_exists(obj, key.u.s.p, key.u.s.n))
        return wm_jgetattr(c, at, obj, key.u.s.p, key.u.s.n, out);
    *out = wm_jv_undef(key.t == JV_STR ? key.u.s.p : NULL);
    return 0;
}

/* Python slice index adjustment */
static int slice_bound(jctx *c, const jnode *at, jv v, int64_t len, int64_t step, int is_start, int64_t *out) {
    int64_t x;
    if (v.t == JV_NONE || v.t == JV_UNDEF) {
        *out = step > 0 ? (is_start ? 0 : len) : (is_start ? len - 1 : -1);
        return 0;
    }
    if (!to_index(v, &x)) return wm_jerr(c, at, WM_ERR_INPUT, "slice indices must be integers or None");
    if (x < 0) {
        x = x < -len ? -1 : x + len; /* no overflow for x near INT64_MIN */
        if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= len) {
        x = step < 0 ? len - 1 : len;
    }
    *out = x;
    return 0;
}

/* Items of a slice: st, st + step, ... while before en (step > 0) or after it (step < 0). Computed without
 * overflow for any step, INT64_MIN included (as Python, whose integers do not overflow). */
static int64_t slice_count(int64_t st, int64_t en, int64_t step) {
    if (step > 0) return en > st ? (int64_t)(((uint64_t)en - (uint64_t)st - 1) / (uint64_t)step) + 1 : 0;
    return st > en ? (int64_t)(((uint64_t)st - (uint64_t)en - 1) / (0 - (uint64_t)step)) + 1 : 0;
}

static int do_slice(jctx *c, jframe *f, const jnode *at, jv obj, const jnode *sl, jv *out) {
    jv a = wm_jv_none(), b = wm_jv_none(), s = wm_jv_none();
    if ((sl->a && wm_jeval(c, f, sl->a, &a)) || (sl->b && wm_jeval(c, f, sl->b, &b)) || (sl->c && wm_jeval(c, f, sl->c, &s)))
        return -1;
    int64_t step = 1;
    if (s.t != JV_NONE && s.t != JV_UNDEF && !to_index(s, &step))
        return wm_jerr(c, at, WM_ERR_INPUT, "slice step must be an integer or None");
    if (step == 0) return wm_jerr(c, at, WM_ERR_INPUT, "slice step cannot be zero");
    if (obj.t == JV_UNDEF) return undefined_err(c, at, obj, "slicing");
    size_t len;
    if (obj.t == JV_STR) {
        if (wm_jcharge(c, at, obj.u.s.n / 32)) return -1;
        len = wm_u8_len(obj.u.s.p, obj.u.s.n);
    } else if (obj.t == JV_LIST) {
        len = obj.u.l->n;
    } else {
        return wm_jerr(c, at, WM_ERR_INPUT, "'%s' object is not subscriptable with a slice", wm_jv_typename(obj));
    }
    int64_t st = 0, en = 0; /* set by slice_bound (initialized for -O3's maybe-uninitialized) */
    if (slice_bound(c, at, a, (int64_t)len, step, 1, &st) || slice_bound(c, at, b, (int64_t)len, step, 0, &en))
        return -1;
    int64_t cnt = slice_count(st, en, step);
    if (obj.t == JV_LIST) {
        if (wm_jcharge(c, at, (uint64_t)cnt / 16) || wm_jlist_new(c, (size_t)cnt, obj.u.l->tuple, out)) return -1;
        for (int64_t k = 0, idx = st; k < cnt; k++, idx += k < cnt ? step : 0) out->u.l->v[k] = obj.u.l->v[idx];
        return 0;
    }
    /* a string: one pass over its code points, keeping those the slice selects (in text order), then emitted
     * in slice order; for a negative step their offsets wait in the arena (counted against max_memory) */
    const char *p = obj.u.s.p;
    size_t n = obj.u.s.n;
    uint64_t stride = step > 0 ? (uint64_t)step : 0 - (uint64_t)step;
    /* the first selected index in text order ((cnt - 1) * stride < len: no overflow) */
    int64_t lo = step > 0 || !cnt ? st : st - (int64_t)((uint64_t)(cnt - 1) * stride);
    size_t *offs = NULL;
    if (step < 0 && cnt && !(offs = wm_jalloc(c, (size_t)cnt * sizeof *offs))) return -1;
    jbuf bb = {0};
    int64_t got = 0;
    size_t i = cp_at(p, n, cnt ? (size_t)lo : 0);
    for (int64_t idx = lo; got < cnt && i < n; idx++) {
        size_t e = wm_u8_next(p, n, i);
        if ((uint64_t)(idx - lo) % stride == 0) {
            if (offs) offs[got] = i;
            else if (wm_jbuf_put(c, &bb, p + i, e - i)) {
                wm_jbuf_free(&bb);
                return -1;
            }
            got++;
        }
        i = e;
    }
    for (int64_t k = got; offs && k-- > 0;)
        if (wm_jbuf_put(c, &bb, p + offs[k], wm_u8_next(p, n, offs[k]) - offs[k])) {
            wm_jbuf_free(&bb);
            return -1;
        }
    return wm_jbuf_to_str(c, &bb, out);
}

int wm_jiter(jctx *c, const jnode *at, jv v, jlist **out) {
    static jlist empty = {0, NULL, 0};
    jv l;
    switch (v.t) {
    case JV_UNDEF: *out = &empty; return 0;
    case JV_LIST: *out = v.u.l; return 0;
    case JV_DICT:
        if (v.u.d->kind != JD_DICT) break;
        if (wm_jlist_new(c, v.u.d->n, 0, &l)) return -1;
        memcpy(l.u.l->v, v.u.d->k, v.u.d->n * sizeof(jv));
        *out = l.u.l;
        return 0;
    case JV_STR: {
        size_t k = wm_u8_len(v.u.s.p, v.u.s.n), j = 0;
        if (wm_jcharge(c, at, v.u.s.n / 64) || wm_jlist_new(c, k, 0, &l)) return -1;
        for (size_t i = 0; i < v.u.s.n; j++) {
            size_t e = wm_u8_next(v.u.s.p, v.u.s.n, i);
            l.u.l->v[j] = wm_jv_cstr(v.u.s.p + i, e - i); /* points into the string: values are immutable */
            i = e;
        }
        *out = l.u.l;
        return 0;
    }
    default: break;
    }
    return wm_jerr(c, at, WM_ERR_INPUT, "'%s' object is not iterable", wm_jv_typename(v));
}

/* ---- arithmetic ---- */

static int is_num(jv v) { return v.t == JV_BOOL || v.t == JV_INT || v.t == JV_FLOAT; }
static double fnum(jv v) { return v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : (double)v.u.b; }
static int64_t inum(jv v) { return v.t == JV_INT ? v.u.i : v.u.b; }

static int repeat(jctx *c, const jnode *at, jv seq, int64_t k, jv *out) {
    if (k < 0) k = 0;
    if (seq.t == JV_STR) {
        uint64_t total;
        if (!wm_mul_u64(seq.u.s.n, (uint64_t)k, &total) || total >= c->mem_limit)
            return wm_jerr(c, at, WM_ERR_INPUT, "string size limit (%zu bytes) exceeded", c->mem_limit);
        char *d = wm_jalloc(c, (size_t)total + 1);
        if (!d || wm_jcharge(c, at, 1 + total / 64)) return -1;
        for (int64_t i = 0; i < k; i++) memcpy(d + (size_t)i * seq.u.s.n, seq.u.s.p, seq.u.s.n);
        d[total] = 0;
        *out = wm_jv_cstr(d, (size_t)total);
        return 0;
    }
    size_t n = seq.u.l->n;
    if (n && (uint64_t)k > (c->mem_limit / sizeof(jv)) / n) return wm_jerr(c, at, WM_ERR_INPUT, "memory limit exceeded (list repetition)");
    if (wm_jcharge(c, at, (uint64_t)k * n) || wm_jlist_new(c, (size_t)k * n, seq.u.l->tuple, out)) return -1;
    for (int64_t i = 0; i < k; i++) memcpy(out->u.l->v + i * n, seq.u.l->v, n * sizeof(jv));
    return 0;
}

static int arith(jctx *c, const jnode *at, int op, jv a, jv b, jv *out) {
    static const char *names[] = {"", "+", "-", "*", "/", "//", "%", "**"};
    if (a.t == JV_UNDEF) return undefined_err(c, at, a, "arithmetic");
    if (b.t == JV_UNDEF) return undefined_err(c, at, b, "arithmetic");
    if (is_num(a) && is_num(b)) {
        int flt = a.t == JV_FLOAT || b.t == JV_FLOAT;
        if (!flt && op != OP_DIV) {
            int64_t x = inum(a), y = inum(b), r = 0;
            switch (op) {
            case OP_ADD: if (__builtin_add_overflow(x, y, &r)) goto ovf; break;
            case OP_SUB: if (__builtin_sub_overflow(x, y, &r)) goto ovf; break;
            case OP_MUL: if (__builtin_mul_overflow(x, y, &r)) goto ovf; break;
            case OP_FLOORDIV:
            case OP_MOD:
                if (y == 0) return wm_jerr(c, at, WM_ERR_INPUT, "integer division or modulo by zero");
                if (x == INT64_MIN && y == -1) goto ovf;
                r = op == OP_FLOORDIV ? x / y : x % y;
                if (op == OP_FLOORDIV && (x % y != 0) && ((x < 0) != (y < 0))) r--;
                if (op == OP_MOD && r != 0 && ((r < 0) != (y < 0))) r += y;
                break;
            case OP_POW:
                if (y < 0) {
                    if (x == 0) return wm_jerr(c, at, WM_ERR_INPUT, "0 cannot be raised to a negative power");
                    *out = wm_jv_float(pow((double)x, (double)y));
                    return 0;
                }
                r = 1;
                for (int64_t k = 0; k < y; k++) {
                    if (__builtin_mul_overflow(r, x, &r)) goto ovf;
                    if (r == 0 || r == 1 || (r == -1 && k > 64)) {
                        if (r == -1) r = (y % 2) ? -1 : 1;
                        break;
                    }
                }
                break;
            }
            *out = wm_jv_int(r);
            return 0;
        }
        double x = fnum(a), y = fnum(b), r = 0;
        switch (op) {
        case OP_ADD: r = x + y; break;
        case OP_SUB: r = x - y; break;
        case OP_MUL: r = x * y; break;
        case OP_DIV:
            if (y == 0) return wm_jerr(c, at, WM_ERR_INPUT, "division by zero");
            r = x / y;
            break;
        case OP_FLOORDIV:
        case OP_MOD: { /* Python's float divmod */
            if (y == 0) return wm_jerr(c, at, WM_ERR_INPUT, "float division or modulo by zero");
            double mod = fmod(x, y), div = (x - mod) / y, fl;
            if (mod != 0) {
                if ((y < 0) != (mod < 0)) {
                    mod += y;
                    div -= 1.0;
                }
            } else {
                mod = copysign(0.0, y);
            }
            if (div != 0) {
                fl = floor(div);
                if (div - fl > 0.5) fl += 1.0;
            } else {
                fl = copysign(0.0, x / y);
            }
            r = op == OP_MOD ? mod : fl;
            break;
        }
        case OP_POW:
            if (x == 0 && y < 0) return wm_jerr(c, at, WM_ERR_INPUT, "0.0 cannot be raised to a negative power");
            r = pow(x, y);
            break;
        }
        *out = wm_jv_float(r);
        return 0;
    }
    if (op == OP_ADD && a.t == JV_STR && b.t == JV_STR) {
        jbuf s = {0};
        if (wm_jbuf_put(c, &s, a.u.s.p, a.u.s.n) ||
            wm_jbuf_put(c, &s, b.u.s.p, b.u.s.n)) {
            wm_jbuf_free(&s);
            return -1;
        }
        return wm_jbuf_to_str(c, &s, out);
    }
    if (op == OP_ADD && a.t == JV_LIST && b.t == JV_LIST && a.u.l->tuple == b.u.l->tuple) {
        if (wm_jcharge(c, at, (a.u.l->n + b.u.l->n) / 16) || wm_jlist_new(c, a.u.l->n + b.u.l->n, a.u.l->tuple, out))
            return -1;
        if (a.u.l->n) memcpy(out->u.l->v, a.u.l->v, a.u.l->n * sizeof(jv));
        if (b.u.l->n) memcpy(out->u.l->v + a.u.l->n, b.u.l->v, b.u.l->n * sizeof(jv));
        return 0;
    }
    if (op == OP_MUL && (a.t == JV_STR || a.t == JV_LIST) && (b.t == JV_INT || b.t == JV_BOOL))
        return repeat(c, at, a, inum(b), out);
    if (op == OP_MUL && (b.t == JV_STR || b.t == JV_LIST) && (a.t == JV_INT || a.t == JV_BOOL))
        return repeat(c, at, b, inum(a), out);
    if (op == OP_MOD && a.t == JV_STR) return wm_jformat(c, at, a, b, out);
    return wm_jerr(c, at, WM_ERR_INPUT, "unsupported operand types for %s: '%s' and '%s'", names[op], wm_jv_typename(a),
                wm_jv_typename(b));
ovf:
    return wm_jerr(c, at, WM_ERR_INPUT, "integer overflow in '%s'", names[op]);
}

static int contains(jctx *c, const jnode *at, jv item, jv seq, int *r) {
    int64_t pos;
    jv tmp;
    switch (seq.t) {
    case JV_UNDEF: *r = 0; return 0;
    case JV_STR:
        if (item.t != JV_STR)
            return wm_jerr(c, at, WM_ERR_INPUT, "'in <string>' requires a string as left operand, not %s", wm_jv_typename(item));
        if ((pos = wm_jfind(c, at, seq.u.s.p, seq.u.s.n, item.u.s.p, item.u.s.n, 0)) == -2) return -1;
        *r = pos >= 0;
        return 0;
    case JV_LIST:
        *r = 0;
        for (size_t i = 0; i < seq.u.l->n && !*r; i++)
            if ((*r = wm_jv_eq(c, seq.u.l->v[i], item)) < 0) return -1;
        return 0;
    case JV_DICT:
        if (seq.u.d->kind == JD_DICT) {
            if ((*r = wm_jdict_getv(c, seq.u.d, item, &tmp)) < 0) return -1;
            return 0;
        }
        break;
    default: break;
    }
    return wm_jerr(c, at, WM_ERR_INPUT, "argument of type '%s' is not iterable", wm_jv_typename(seq));
}

static int compare_op(jctx *c, const jnode *at, int op, jv a, jv b, int *r) {
    int k;
    switch (op) {
    case OP_EQ:
    case OP_NE:
        if ((k = wm_jv_eq(c, a, b)) < 0) return -1;
        *r = op == OP_EQ ? k : !k;
        return 0;
    case OP_IN: return contains(c, at, a, b, r);
    case OP_NOTIN:
        if (contains(c, at, a, b, r)) return -1;
        *r = !*r;
        return 0;
    default:
        if (wm_jv_compare(c, at, a, b, &k)) return -1;
        *r = op == OP_LT ? k < 0 : op == OP_LE ? k <= 0 : op == OP_GT ? k > 0 : k >= 0;
        return 0;
    }
}

/* ---- calls ---- */

static int eval_args(jctx *c, jframe *f, const jnode *e, jargs *a) {
    memset(a, 0, sizeof *a);
    if (e->n && !(a->v = wm_jalloc(c, e->n * sizeof(jv)))) return -1;
    for (size_t i = 0; i < e->n; i++)
        if (wm_jeval(c, f, e->items[i], &a->v[i])) return -1;
    a->n = e->n;
    if (e->n2) {
        if (!(a->kn = wm_jalloc(c, e->n2 * sizeof(char *))) || !(a->kv = wm_jalloc(c, e->n2 * sizeof(jv)))) return -1;
        for (size_t i = 0; i < e->n2; i++) {
            a->kn[i] = e->items2[i]->name;
            if (wm_jeval(c, f, e->items2[i]->a, &a->kv[i])) return -1;
        }
        a->nk = e->n2;
    }
    return 0;
}

static int call_macro(jctx *c, const jnode *at, const jmacro *m, const jargs *a, jv *out) {
    const jnode *def = m->def;
    if (a->n > def->n)
        return wm_jerr(c, at, WM_ERR_INPUT, "macro '%s' takes not more than %zu argument(s)", def->name, def->n);
    if (++c->depth > c->max_depth) return wm_jerr(c, at, WM_ERR_INPUT, "nesting or recursion deeper than %d", c->max_depth);
    jframe *fr = wm_jalloc(c, sizeof *fr);
    if (!fr) return -1;
    fr->parent = m->closure;
    for (size_t k = 0; k < a->nk; k++) {
        size_t i;
        for (i = 0; i < def->n; i++)
            if (strcmp(def->items[i]->name, a->kn[k]) == 0) break;
        if (i == def->n) return wm_jerr(c, at, WM_ERR_INPUT, "macro '%s' has no parameter '%s'", def->name, a->kn[k]);
        if (i < a->n) return wm_jerr(c, at, WM_ERR_INPUT, "macro '%s' got parameter '%s' twice", def->name, a->kn[k]);
    }
    for (size_t i = 0; i < def->n; i++) {
        const jnode *prm = def->items[i];
        jv v = wm_jv_undef(prm->name);
        int have = 0;
        if (i < a->n) {
            v = a->v[i];
            have = 1;
        }
        for (size_t k = 0; k < a->nk && !have; k++)
            if (strcmp(prm->name, a->kn[k]) == 0) {
                v = a->kv[k];
                have = 1;
            }
        if (!have && prm->a && wm_jeval(c, fr, prm->a, &v)) return -1;
        if (wm_jframe_set(c, fr, prm->name, v)) return -1;
    }
    jbuf *saved = c->out, buf = {0};
    c->out = &buf;
    int rc = wm_jexec_body(c, fr, def->items2, def->n2);
    c->out = saved;
    c->depth--;
    if (rc) {
        wm_jbuf_free(&buf);
        return -1;
    }
    return wm_jbuf_to_str(c, &buf, out);
}

int wm_jcall(jctx *c, const jnode *at, jv fn, const jargs *a, jv *out) {
    switch (fn.t) {
    case JV_FUNC: return fn.u.fn->fn(c, at, a, out);
    case JV_METHOD: return wm_jmethod_call(c, at, fn.u.m->self, fn.u.m->name, a, out);
    case JV_MACRO: return call_macro(c, at, fn.u.mac, a, out);
    case JV_UNDEF: return undefined_err(c, at, fn, "call");
    default: return wm_jerr(c, at, WM_ERR_INPUT, "'%s' object is not callable", wm_jv_typename(fn));
    }
}

/* ---- expressions ---- */

/* a block set / filter block's chain (innermost filter has a == NULL), applied innermost first */
static int apply_filters(jctx *c, jframe *f, const jnode *chain, jv base, jv *out) {
    size_t n = 0;
    for (const jnode *k = chain; k; k = k->a) n++;
    const jnode **order = n ? malloc(n * sizeof *order) : NULL;
    if (n && !order) return wm_jerr(c, chain, WM_ERR_NOMEM, "out of memory");
    size_t i = n;
    for (const jnode *k = chain; k; k = k->a) order[--i] = k;
    jv cur = base;
    int rc = 0;
    for (i = 0; i < n && !rc; i++) {
        jargs a;
        rc = eval_args(c, f, order[i], &a) || wm_jfilter(c, f, order[i], order[i]->name, cur, &a, &cur) ? -1 : 0;
    }
    free(order);
    *out = cur;
    return rc;
}

static int jeval_node(jctx *c, jframe *f, const jnode *e, jv *out);

/* expression depth is bounded here: chains like a+b+...+z or x|f|f|... nest one level per term */
int wm_jeval(jctx *c, jframe *f, const jnode *e, jv *out) {
    if (++c->edepth > c->max_edepth)
        return wm_jerr(c, e, WM_ERR_INPUT, "expression nested deeper than %d", c->max_edepth);
    int rc = jeval_node(c, f, e, out);
    c->edepth--;
    return rc;
}

static int jeval_node(jctx *c, jframe *f, const jnode *e, jv *out) {
    jv a, b;
    jargs args;
    if (wm_jcharge(c, e, 1)) return -1;
    switch (e->kind) {
    case N_CONST: *out = e->val; return 0;
    case N_NAME:
        if (!wm_jlookup(c, f, e->name, out)) *out = wm_jv_undef(e->name);
        return 0;
    case N_GETATTR:
        if (wm_jeval(c, f, e->a, &a)) return -1;
        return wm_jgetattr(c, e, a, e->name, strlen(e->name), out);
    case N_GETITEM:
        if (wm_jeval(c, f, e->a, &a)) return -1;
        if (e->b->kind == N_SLICE) return do_slice(c, f, e, a, e->b, out);
        if (wm_jeval(c, f, e->b, &b)) return -1;
        return wm_jgetitem(c, e, a, b, out);
    case N_CALL:
        if (e->a->kind == N_GETATTR) {
            if (wm_jeval(c, f, e->a->a, &a)) return -1;
            if (a.t != JV_UNDEF && wm_jmethod_exists(a, e->a->name, strlen(e->a->name))) {
                if (eval_args(c, f, e, &args)) return -1;
                return wm_jmethod_call(c, e, a, e->a->name, &args, out);
            }
            if (wm_jgetattr(c, e->a, a, e->a->name, strlen(e->a->name), &b)) return -1;
        } else if (wm_jeval(c, f, e->a, &b)) {
            return -1;
        }
        if (b.t == JV_UNDEF) return undefined_err(c, e, b, "call");
        if (eval_args(c, f, e, &args)) return -1;
        return wm_jcall(c, e, b, &args, out);
    case N_FILTER:
        if (wm_jeval(c, f, e->a, &a) || eval_args(c, f, e, &args)) return -1;
        return wm_jfilter(c, f, e, e->name, a, &args, out);
    case N_TEST: {
        int r;
        if (wm_jeval(c, f, e->a, &a) || eval_args(c, f, e, &args) || wm_jtest(c, f, e, e->name, a, &args, &r)) return -1;
        *out = wm_jv_bool(r);
        return 0;
    }
    case N_UNARY:
        if (wm_jeval(c, f, e->a, &a)) return -1;
        if (e->op == OP_NOT) {
            *out = wm_jv_bool(!wm_jv_truthy(a));
            return 0;
        }
        if (a.t == JV_UNDEF) return undefined_err(c, e, a, "unary operator");
        if (!is_num(a)) return wm_jerr(c, e, WM_ERR_INPUT, "bad operand type for unary %s: '%s'", e->op == OP_NEG ? "-" : "+", wm_jv_typename(a));
        if (e->op == OP_POS) *out = a.t == JV_BOOL ? wm_jv_int(a.u.b) : a;
        else if (a.t == JV_FLOAT) *out = wm_jv_float(-a.u.f);
        else if (inum(a) == INT64_MIN) return wm_jerr(c, e, WM_ERR_INPUT, "integer overflow in unary '-'");
        else *out = wm_jv_int(-inum(a));
        return 0;
    case N_BINARY:
        if (wm_jeval(c, f, e->a, &a)) return -1;
        if (e->op == OP_AND) {
            if (!wm_jv_truthy(a)) {
                *out = a;
                return 0;
            }
            return wm_jeval(c, f, e->b, out);
        }
        if (e->op == OP_OR) {
            if (wm_jv_truthy(a)) {
                *out = a;
                return 0;
            }
            return wm_jeval(c, f, e->b, out);
        }
        if (wm_jeval(c, f, e->b, &b)) return -1;
        return arith(c, e, e->op, a, b, out);
    case N_COMPARE: {
        if (wm_jeval(c, f, e->a, &a)) return -1;
        for (size_t i = 0; i < e->n; i++) {
            int r;
            if (wm_jeval(c, f, e->items[i]->a, &b) || compare_op(c, e->items[i], e->items[i]->op, a, b, &r)) return -1;
            if (!r) {
                *out = wm_jv_bool(0);
                return 0;
            }
            a = b;
        }
        *out = wm_jv_bool(1);
        return 0;
    }
    case N_CONCAT: {
        jbuf s = {0};
        for (size_t i = 0; i < e->n; i++)
            if (wm_jeval(c, f, e->items[i], &a) || wm_jv_str(c, &s, a)) {
                wm_jbuf_free(&s);
                return -1;
            }
        return wm_jbuf_to_str(c, &s, out);
    }
    case N_COND:
        if (wm_jeval(c, f, e->a, &a)) return -1;
        if (wm_jv_truthy(a)) return wm_jeval(c, f, e->b, out);
        if (e->c) return wm_jeval(c, f, e->c, out);
        *out = wm_jv_undef(NULL);
        return 0;
    case N_LIST:
    case N_TUPLE:
        if (wm_jlist_new(c, e->n, e->kind == N_TUPLE, out)) return -1;
        for (size_t i = 0; i < e->n; i++)
            if (wm_jeval(c, f, e->items[i], &out->u.l->v[i])) return -1;
        return 0;
    case N_DICT:
        if (wm_jdict_new(c, JD_DICT, out)) return -1;
        for (size_t i = 0; i < e->n; i++)
            if (wm_jeval(c, f, e->items[i], &a) || wm_jeval(c, f, e->items2[i], &b) || wm_jdict_set(c, out->u.d, a, b)) return -1;
        return 0;
    default: return wm_jerr(c, e, WM_ERR_INTERNAL, "expression node %d cannot be evaluated", e->kind);
    }
}

/* ---- statements ---- */

static int assign(jctx *c, jframe *f, const jnode *target, jv v) {
    if (target->kind == N_NAME) return wm_jframe_set(c, f, target->name, v);
    if (target->kind == N_NSREF) {
        jv ns;
        if (!wm_jlookup(c, f, target->name, &ns) || ns.t != JV_DICT || ns.u.d->kind != JD_NS)
            return wm_jerr(c, target, WM_ERR_INPUT, "can't assign attribute '%s' on '%s': not a namespace", target->name2,
                        target->name);
        if (target->name2[0] == '_')
            return wm_jerr(c, target, WM_ERR_INPUT, "namespace attributes starting with '_' are not allowed");
        return wm_jdict_set(c, ns.u.d, wm_jv_cstr(target->name2, strlen(target->name2)), v);
    }
    /* tuple unpacking */
    jlist *items;
    if (wm_jiter(c, target, v, &items)) return -1;
    if (items->n != target->n)
        return wm_jerr(c, target, WM_ERR_INPUT, "cannot unpack %zu values into %zu names", items->n, target->n);
    for (size_t i = 0; i < target->n; i++)
        if (assign(c, f, target->items[i], items->v[i])) return -1;
    return 0;
}

static int loop_object(jctx *c, const jlist *items, size_t i, jv *out) {
    static const char *const keys[] = {"index0", "index", "revindex0", "revindex", "first", "last", "length",
                                       "depth", "depth0", "previtem", "nextitem"};
    int64_t n = (int64_t)items->n, k = (int64_t)i;
    jv vals[11] = {wm_jv_int(k), wm_jv_int(k + 1), wm_jv_int(n - k - 1), wm_jv_int(n - k), wm_jv_bool(k == 0), wm_jv_bool(k == n - 1),
                   wm_jv_int(n), wm_jv_int(1), wm_jv_int(0)};
    size_t nk = 9;
    if (i > 0) vals[nk++] = items->v[i - 1];
    if (i + 1 < items->n) vals[nk++] = items->v[i + 1];
    if (wm_jdict_new(c, JD_LOOP, out)) return -1;
    jdict *d = out->u.d;
    d->index0 = k;
    d->cap = 11;
    if (!(d->k = wm_jalloc(c, 11 * sizeof(jv))) || !(d->v = wm_jalloc(c, 11 * sizeof(jv)))) return -1;
    for (size_t j = 0, key = 0; j < nk; j++, key++) { /* distinct keys: no comparisons */
        if (key == 9 && i == 0) key++; /* no previtem */
        d->k[j] = wm_jv_cstr(keys[key], strlen(keys[key]));
        d->v[j] = vals[j];
    }
    d->n = nk;
    return 0;
}

static int exec_for(jctx *c, jframe *f, const jnode *s) {
    jv it;
    jlist *items;
    if (wm_jeval(c, f, s->b, &it) || wm_jiter(c, s, it, &items)) return -1;
    if (s->c) { /* "for x in xs if cond": filter first, loop.* counts what is left */
        jv kept;
        if (wm_jlist_new(c, items->n, 0, &kept)) return -1;
        size_t m = 0;
        for (size_t i = 0; i < items->n; i++) {
            jframe fr = {f, NULL, 0, 0};
            jv cond;
            if (wm_jcharge(c, s, 1) || assign(c, &fr, s->a, items->v[i]) || wm_jeval(c, &fr, s->c, &cond)) return -1;
            if (wm_jv_truthy(cond)) kept.u.l->v[m++] = items->v[i];
        }
        kept.u.l->n = m;
        items = kept.u.l;
    }
    /* one frame for all iterations, emptied each time, unless the body defines a macro (a closure
     * must keep its iteration's variables); the loop object only when the body names "loop" */
    jframe *fr = NULL;
    for (size_t i = 0; i < items->n; i++) {
        jv loop;
        if (++c->iterations > c->max_iterations)
            return wm_jerr(c, s, WM_ERR_INPUT, "loop iteration limit (%llu) exceeded", (unsigned long long)c->max_iterations);
        if (wm_jcharge(c, s, 1)) return -1;
        if (!fr || (s->op & FOR_HAS_MACRO)) {
            if (!(fr = wm_jalloc(c, sizeof *fr))) return -1;
            fr->parent = f;
        }
        fr->n = 0;
        if ((s->op & FOR_USES_LOOP) && (loop_object(c, items, i, &loop) || wm_jframe_set(c, fr, "loop", loop))) return -1;
        if (assign(c, fr, s->a, items->v[i]) || wm_jexec_body(c, fr, s->items, s->n)) return -1;
        if (c->loopctl == 1) {
            c->loopctl = 0;
            break;
        }
        c->loopctl = 0;
    }
    if (items->n == 0 && s->n2) return wm_jexec_body(c, f, s->items2, s->n2);
    return 0;
}

static int capture(jctx *c, jframe *f, const jnode *s, jv *out) {
    jbuf *saved = c->out, buf = {0};
    c->out = &buf;
    int rc = wm_jexec_body(c, f, s->items, s->n);
    c->out = saved;
    if (rc) {
        wm_jbuf_free(&buf);
        return -1;
    }
    jv text;
    if (wm_jbuf_to_str(c, &buf, &text)) return -1;
    return apply_filters(c, f, s->c, text, out);
}

static int exec_stmt(jctx *c, jframe *f, const jnode *s) {
    jv v;
    if (wm_jcharge(c, s, 1)) return -1;
    switch (s->kind) {
    case N_TEXT: return wm_jbuf_put(c, c->out, s->val.u.s.p, s->val.u.s.n);
    case N_OUTPUT: return wm_jeval(c, f, s->a, &v) || wm_jv_str(c, c->out, v) ? -1 : 0;
    case N_IF:
        if (wm_jeval(c, f, s->a, &v)) return -1;
        return wm_jv_truthy(v) ? wm_jexec_body(c, f, s->items, s->n) : wm_jexec_body(c, f, s->items2, s->n2);
    case N_FOR: return exec_for(c, f, s);
    case N_SET: return wm_jeval(c, f, s->b, &v) || assign(c, f, s->a, v) ? -1 : 0;
    case N_SETBLOCK: return capture(c, f, s, &v) || assign(c, f, s->a, v) ? -1 : 0;
    case N_FILTERBLOCK: return capture(c, f, s, &v) || wm_jv_str(c, c->out, v) ? -1 : 0;
    case N_MACRO: {
        jmacro *m = wm_jalloc(c, sizeof *m);
        if (!m) return -1;
        m->def = s;
        m->closure = f;
        memset(&v, 0, sizeof v);
        v.t = JV_MACRO;
        v.u.mac = m;
        return wm_jframe_set(c, f, s->name, v);
    }
    case N_BREAK: c->loopctl = 1; return 0;
    case N_CONTINUE: c->loopctl = 2; return 0;
    case N_BLOCK: return wm_jexec_body(c, f, s->items, s->n);
    default: return wm_jerr(c, s, WM_ERR_INTERNAL, "statement node %d cannot be executed", s->kind);
    }
}

int wm_jexec_body(jctx *c, jframe *f, jnode *const *body, size_t n) {
    if (++c->depth > c->max_depth)
        return wm_jerr(c, n ? body[0] : NULL, WM_ERR_INPUT, "nesting or recursion deeper than %d", c->max_depth);
    for (size_t i = 0; i < n && !c->loopctl; i++)
        if (exec_stmt(c, f, body[i])) return -1;
    c->depth--;
    return 0;
}
