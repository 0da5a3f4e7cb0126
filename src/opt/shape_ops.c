/*
 * shape_ops.c - per-op type/shape rules of the light inference, and the
 * symbolic value tracking of small integer tensors (shape arithmetic).
 * Ops without a rule keep unknown outputs (declared value_info, when there
 * is some, fills them in afterwards).
 */
#include <string.h>

#include "onnx/dtype.h"
#include "ops/int_math.h"
#include "opt/shape_impl.h"

const wm_tinfo wm_sh_unknown = {0, -1, {{0, 0}}, -1, {{0, 0}}};

/* Constant integer values of input i into v (at most max); count, or -1 when unknown. */
static int in_ints(const ctx *c, size_t i, int64_t *v, int max) {
    const wm_tinfo *t = IN(c, i);
    if (t->nval >= 0 && t->nval <= max) {
        for (int k = 0; k < t->nval; k++) {
            if (t->val[k].k != WM_SD_CONST) return -1;
            v[k] = t->val[k].v;
        }
        return t->nval;
    }
    wm_ct ct;
    if (!wm_opt_const(c->s->g, wm_opt_in(c->n, i), (uint64_t)max, &ct)) return -1;
    int n = (int)ct.n;
    for (int k = 0; k < n; k++) v[k] = wm_ct_geti(&ct, (uint64_t)k);
    wm_ct_free(&ct);
    return n;
}

/* Axes from attribute name (old opsets) or input slot (new); count or -1. */
static int axes_of(const ctx *c, int64_t input_from, size_t slot, const char *attr, int64_t *v, int max) {
    if (c->s->opset >= input_from) return HAS(c, slot) ? in_ints(c, slot, v, max) : 0;
    size_t na;
    const int64_t *a = wm_opt_attr_ints(c->n, attr, &na);
    if (!a) return 0;
    if ((int)na > max) return -1;
    memcpy(v, a, na * sizeof *v);
    return (int)na;
}

static int norm_axis(int64_t a, int rank) { return (int)(a < 0 ? a + rank : a); }

/* The STRING attribute name of the node as a C string compared with v (absent: v is ""). */
static int attr_str_is(const ctx *c, const char *name, const char *v) {
    const wm_onnx_attr *a = wm_graph_node_attr(c->n, name);
    size_t n = a && a->s.p ? a->s.n : 0;
    return strlen(v) == n && (!n || !memcmp(a->s.p, v, n));
}

/*
 * Conv / FusedConv / MaxPool / AveragePool / LpPool: [N, channels, spatial...]
 * with each spatial size from its static input size, kernel (kernel_shape, else
 * the weight's dims), strides, dilations, pads or auto_pad (and ceil_mode);
 * channels: the weight's first dim for convolutions, the input's for pools.
 * GlobalAveragePool / GlobalMaxPool: spatial sizes 1. Unknown what is not static.
 */
void sh_window(const ctx *c, int conv, int global) {
    wm_tinfo *o = OUT(c, 0);
    const wm_tinfo *x = IN(c, 0), *w = IN(c, 1);
    if (!o) return;
    o->dtype = x->dtype;
    if (x->rank < 3 || x->rank > WM_SH_MAXR) return;
    int nd = x->rank - 2;
    o->rank = x->rank;
    o->dim[0] = x->dim[0];
    o->dim[1] = conv ? (w->rank == x->rank ? w->dim[0] : sd_u()) : x->dim[1];
    size_t nk, ns, nd_, np;
    const int64_t *k = wm_opt_attr_ints(c->n, "kernel_shape", &nk), *st = wm_opt_attr_ints(c->n, "strides", &ns);
    const int64_t *dl = wm_opt_attr_ints(c->n, "dilations", &nd_), *pd = wm_opt_attr_ints(c->n, "pads", &np);
    int same_pad = attr_str_is(c, "auto_pad", "SAME_UPPER") || attr_str_is(c, "auto_pad", "SAME_LOWER");
    int valid = attr_str_is(c, "auto_pad", "VALID");
    int known_pad = same_pad || valid || attr_str_is(c, "auto_pad", "") || attr_str_is(c, "auto_pad", "NOTSET");
    int ceil_mode = !conv && wm_opt_attr_i(c->n, "ceil_mode", 0);
    for (int i = 0; i < nd; i++) {
        wm_sdim in = x->dim[2 + i];
        o->dim[2 + i] = sd_u();
        if (global) {
            o->dim[2 + i] = sd_c(1);
            continue;
        }
        int64_t kk = k && (int)nk == nd ? k[i] : conv && w->rank == x->rank && w->dim[2 + i].k == WM_SD_CONST ? w->dim[2 + i].v : -1;
        int64_t s = st && (int)ns == nd ? st[i] : 1, d = dl && (int)nd_ == nd ? dl[i] : 1;
        int64_t pb = pd && (int)np == 2 * nd ? pd[i] : 0, pe = pd && (int)np == 2 * nd ? pd[nd + i] : 0;
        if (in.k != WM_SD_CONST || kk < 1 || s < 1 || d < 1 || !known_pad || (pd && (int)np != 2 * nd)) continue;
        int64_t dk, span; /* checked: attributes may hold any int64 (then the size stays unknown) */
        if (!wm_mul_i64_ok(kk - 1, d, &dk) || !wm_add_i64_ok(dk, 1, &dk)) continue;
        if (valid || same_pad) {
            if (!wm_add_i64_ok(in.v, -(valid ? dk : 1), &span)) continue;
        } else if (!wm_add_i64_ok(in.v, pb, &span) || !wm_add_i64_ok(span, pe, &span) || !wm_add_i64_ok(span, -dk, &span))
            continue;
        if (span < 0) continue;
        o->dim[2 + i] = sd_c(ceil_mode ? (span ? (span - 1) / s + 2 : 1) : span / s + 1); /* ceil(span / s) + 1 */
    }
}

/* Multi-directional broadcast of a and b into o (shape only). */
static void bcast(wm_shapes *s, wm_tinfo *o, const wm_tinfo *a, const wm_tinfo *b) {
    (void)s;
    if (!o) return;
    if (a->rank < 0 || b->rank < 0) {
        o->rank = -1;
        return;
    }
    int r = a->rank > b->rank ? a->rank : b->rank;
    o->rank = r;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        wm_sdim x = ia >= 0 ? a->dim[ia] : sd_c(1), y = ib >= 0 ? b->dim[ib] : sd_c(1);
        if (x.k == WM_SD_CONST && x.v == 1) o->dim[i] = y;
        else if (y.k == WM_SD_CONST && y.v == 1) o->dim[i] = x;
        else if (wm_sdim_eq(x, y) || y.k == WM_SD_UNK) o->dim[i] = x;
        else if (x.k == WM_SD_UNK) o->dim[i] = y;
        else if (x.k == WM_SD_CONST) o->dim[i] = x; /* static wins over a symbol (they must agree) */
        else o->dim[i] = y;
    }
}

/* Elementwise values of small tracked tensors (+ - * / and comparisons on constants). */
static void bin_values(wm_shapes *s, wm_tinfo *o, const wm_tinfo *a, const wm_tinfo *b, char op) {
    if (!o || a->nval < 0 || b->nval < 0 || o->rank > 1) return;
    int n = a->nval > b->nval ? a->nval : b->nval;
    if ((a->nval != n && a->nval != 1) || (b->nval != n && b->nval != 1)) return;
    for (int i = 0; i < n; i++) {
        wm_sdim x = a->val[a->nval == 1 ? 0 : i], y = b->val[b->nval == 1 ? 0 : i];
        o->val[i] = sh_arith(s, op, x, y);
        if (o->dtype == WM_DT_INT32 && o->val[i].k == WM_SD_CONST) /* an int32 value wraps at each op, as in the engine */
            o->val[i].v = (int32_t)(uint32_t)(uint64_t)o->val[i].v;
    }
    o->nval = n;
}

static void set_rank1(wm_tinfo *o, int32_t dt, wm_sdim d) {
    o->dtype = dt;
    o->rank = 1;
    o->dim[0] = d;
}

/* ---------------------------------------------------------------- rules */

static void r_shape(const ctx *c) {
    const wm_tinfo *a = IN(c, 0);
    wm_tinfo *o = OUT(c, 0);
    if (!o) return;
    o->dtype = WM_DT_INT64;
    o->rank = 1;
    if (a->rank < 0) {
        o->dim[0] = sh_fresh(c->s);
        return;
    }
    int64_t st = wm_opt_attr_i(c->n, "start", 0), en = wm_opt_attr_i(c->n, "end", a->rank);
    if (st < 0) st += a->rank;
    if (en < 0) en += a->rank;
    if (st < 0) st = 0;
    if (en > a->rank) en = a->rank;
    int n = en > st ? (int)(en - st) : 0;
    o->dim[0] = sd_c(n);
    if (n <= WM_SH_MAXV) {
        o->nval = n;
        for (int i = 0; i < n; i++) o->val[i] = a->dim[st + i];
    }
}

static void r_size(const ctx *c) {
    const wm_tinfo *a = IN(c, 0);
    wm_tinfo *o = OUT(c, 0);
    if (!o) return;
    o->dtype = WM_DT_INT64;
    o->rank = 0;
    if (a->rank < 0) return;
    wm_sdim p = sd_c(1);
    for (int i = 0; i < a->rank; i++) p = sh_arith(c->s, '*', p, a->dim[i]);
    o->nval = 1;
    o->val[0] = p;
}

static void r_cast(const ctx *c, int32_t to) {
    const wm_tinfo *a = IN(c, 0);
    wm_tinfo *o = OUT(c, 0);
    if (!o) return;
    same(o, a);
    o->dtype = to;
    int to_int = to == WM_DT_INT64 || to == WM_DT_INT32;
    int from_int = a->dtype == WM_DT_INT64 || a->dtype == WM_DT_INT32;
    if (to_int && from_int && a->nval >= 0) {
        o->nval = a->nval;
        memcpy(o->val, a->val, sizeof o->val);
    }
}

static void r_reshape(const ctx *c) {
    const wm_tinfo *a = IN(c, 0), *sh = IN(c, 1);
    wm_tinfo *o = OUT(c, 0);
    if (!o) return;
    o->dtype = a->dtype;
    if (sh->rank != 1 || sh->dim[0].k != WM_SD_CONST || sh->dim[0].v > WM_SH_MAXR) return;
    int r = (int)sh->dim[0].v;
    o->rank = r;
    int allowzero = (int)wm_opt_attr_i(c->n, "allowzero", 0), minus = -1;
    for (int i = 0; i < r; i++) {
        wm_sdim d = sh->nval == r ? sh->val[i] : sd_u();
        if (d.k == WM_SD_CONST && d.v == 0 && !allowzero) d = i < a->rank ? a->dim[i] : sd_u();
        else if (d.k == WM_SD_CONST && d.v == -1) {
            minus = i;
            d = sd_u();
        }
        o->dim[i] = d.k ? d : sh_fresh(c->s);
    }
    if (minus >= 0 && a->rank >= 0) { /* -1: cancel common factors of in and out */
        wm_sdim in[WM_SH_MAXR], out[WM_SH_MAXR];
        int ni = 0, no = 0;
        int64_t pin = 1, pout = 1;
        for (int i = 0; i < a->rank; i++) {
            if (a->dim[i].k == WM_SD_CONST) pin *= a->dim[i].v;
            else if (a->dim[i].k == WM_SD_SYM) in[ni++] = a->dim[i];
            else return;
        }
        for (int i = 0; i < r; i++) {
            if (i == minus) continue;
            if (o->dim[i].k == WM_SD_CONST) pout *= o->dim[i].v;
            else out[no++] = o->dim[i];
        }
        for (int i = 0; i < no; i++) {
            int hit = -1;
            for (int k = 0; k < ni && hit < 0; k++)
                if (wm_sdim_eq(in[k], out[i])) hit = k;
            if (hit < 0) return; /* an output symbol not in the input */
            in[hit] = in[--ni];
        }
        if (!pout || pin % pout) return;
        wm_sdim d = sd_c(pin / pout);
        for (int k = 0; k < ni; k++) d = sh_arith(c->s, '*', d, in[k]);
        o->dim[minus] = d;
    }
    if (a->nval >= 0 && o->rank <= 1) {
        o->nval = a->nval;
        memcpy(o->val, a->val, sizeof o->val);
    }
}

static void r_unsqueeze(const ctx *c) {
    const wm_tinfo *a = IN(c, 0);
    wm_tinfo *o = OUT(c, 0);
    int64_t ax[WM_SH_MAXR];
    int na = axes_of(c, 13, 1, "axes", ax, WM_SH_MAXR);
    if (!o) return;
    o->dtype = a->dtype;
    if (a->nval >= 0 && a->rank == 0 && na == 1) {
        o->nval = a->nval;
        memcpy(o->val, a->val, sizeof o->val);
    }
    if (a->rank < 0 || na < 0 || a->rank + na > WM_SH_MAXR) return;
    int r = a->rank + na;
    uint8_t is_new[WM_SH_MAXR] = {0};
    for (int i = 0; i < na; i++) {
        int k = norm_axis(ax[i], r);
        if (k < 0 || k >= r) return;
        is_new[k] = 1;
    }
    o->rank = r;
    for (int i = 0, j = 0; i < r; i++) o->dim[i] = is_new[i] ? sd_c(1) : a->dim[j++];
    if (a->nval >= 0 && r <= 1) {
        o->nval = a->nval;
        memcpy(o->val, a->val, sizeof o->val);
    }
}

static void r_squeeze(const ctx *c) {
    const wm_tinfo *a = IN(c, 0);
    wm_tinfo *o = OUT(c, 0);
    int64_t ax[WM_SH_MAXR];
    int na = axes_of(c, 13, 1, "axes", ax, WM_SH_MAXR);
    if (!o) return;
    o->dtype = a->dtype;
    if (a->rank < 0 || na < 0) return;
    uint8_t drop[WM_SH_MAXR] = {0};
    if (na == 0) {
        for (int i = 0; i < a->rank; i++) {
            if (a->dim[i].k != WM_SD_CONST) return;
            drop[i] = a->dim[i].v == 1;
        }
    }
    for (int i = 0; i < na; i++) {
        int k = norm_axis(ax[i], a->rank);
        if (k < 0 || k >= a->rank) return;
        drop[k] = 1;
    }
    int r = 0;
    for (int i = 0; i < a->rank; i++)
        if (!drop[i]) o->dim[r++] = a->dim[i];
    o->rank = r;
    if (a->nval == 1 && r == 0) {
        o->nval = 1;
        o->val[0] = a->val[0];
    }
}

static void r_concat(const ctx *c) {
    wm_tinfo *o = OUT(c, 0);
    if (!o || !c->n->n_input) return;
    const wm_tinfo *a = IN(c, 0);
    o->dtype = a->dtype;
    if (a->rank < 0) return;
    int r = a->rank, ax = norm_axis(wm_opt_attr_i(c->n, "axis", 0), r);
    if (ax < 0 || ax >= r) return;
    wm_sdim sum = sd_c(0);
    int nv = 0, track = r == 1;
    for (size_t i = 0; i < c->n->n_input; i++) {
        const wm_tinfo *t = IN(c, i);
        if (t->rank != r) return;
        sum = sh_arith(c->s, '+', sum, t->dim[ax]);
        if (track && t->nval >= 0 && nv + t->nval <= WM_SH_MAXV) {
            memcpy(o->val + nv, t->val, (size_t)t->nval * sizeof *o->val);
            nv += t->nval;
        } else track = 0;
    }
    o->rank = r;
    memcpy(o->dim, a->dim, sizeof o->dim);
    o->dim[ax] = sum.k ? sum : sh_fresh(c->s);
    if (track) o->nval = nv;
}

int sh_gather_dims(const ctx *c, wm_tinfo *o, const char *axis_attr) {
    const wm_tinfo *a = IN(c, 0), *ix = IN(c, 1);
    if (!o || a->rank < 0 || ix->rank < 0 || a->rank - 1 + ix->rank > WM_SH_MAXR) return 0;
    int ax = norm_axis(wm_opt_attr_i(c->n, axis_attr, 0), a->rank);
    if (ax < 0 || ax >= a->rank) return 0;
    int r = 0;
    for (int i = 0; i < ax; i++) o->dim[r++] = a->dim[i];
    for (int i = 0; i < ix->rank; i++) o->dim[r++] = ix->dim[i];
    for (int i = ax + 1; i < a->rank; i++) o->dim[r++] = a->dim[i];
    o->rank = r;
    return 1;
}

static void r_gather(const ctx *c) {
    const wm_tinfo *a = IN(c, 0);
    wm_tinfo *o = OUT(c, 0);
    if (!o) return;
    o->dtype = a->dtype;
    if (!sh_gather_dims(c, o, "axis")) return;
    int64_t iv[WM_SH_MAXV];
    int ni = a->nval >= 0 && a->rank == 1 ? in_ints(c, 1, iv, WM_SH_MAXV) : -1;
    if (ni < 0) return;
    for (int i = 0; i < ni; i++) {
        int64_t k = iv[i] < 0 ? iv[i] + a->nval : iv[i];
        if (k < 0 || k >= a->nval) return;
        o->val[i] = a->val[k];
    }
    o->nval = ni;
}

/* Tracked values of input i (constants or symbols) into v; count or -1. */
static int in_sdims(const ctx *c, size_t i, wm_sdim *v, int max) {
    const wm_tinfo *t = IN(c, i);
    if (t->nval >= 0 && t->nval <= max) {
        memcpy(v, t->val, (size_t)t->nval * sizeof *v);
        return t->nval;
    }
    int64_t k[WM_SH_MAXR];
    int n = in_ints(c, i, k, max < WM_SH_MAXR ? max : WM_SH_MAXR);
    for (int j = 0; j < n; j++) v[j] = sd_c(k[j]);
    return n;
}

static void r_slice(const ctx *c) {
    const wm_tinfo *a = IN(c, 0);
    wm_tinfo *o = OUT(c, 0);
    if (!o) return;
    same(o, a);
    if (a->rank < 0) return;
    wm_sdim st[WM_SH_MAXR], en[WM_SH_MAXR];
    int64_t ax[WM_SH_MAXR], sp[WM_SH_MAXR];
    int n;
    if (c->s->opset >= 10) {
        n = in_sdims(c, 1, st, WM_SH_MAXR);
        if (n < 0 || in_sdims(c, 2, en, WM_SH_MAXR) != n) goto unknown;
        if (HAS(c, 3) ? in_ints(c, 3, ax, WM_SH_MAXR) != n : 0) goto unknown;
        if (!HAS(c, 3))
            for (int i = 0; i < n; i++) ax[i] = i;
        if (HAS(c, 4) ? in_ints(c, 4, sp, WM_SH_MAXR) != n : 0) goto unknown;
        if (!HAS(c, 4))
            for (int i = 0; i < n; i++) sp[i] = 1;
    } else {
        size_t k1, k2, k3;
        const int64_t *s1 = wm_opt_attr_ints(c->n, "starts", &k1), *e1 = wm_opt_attr_ints(c->n, "ends", &k2),
                      *a1 = wm_opt_attr_ints(c->n, "axes", &k3);
        if (!s1 || !e1 || k1 != k2 || k1 > WM_SH_MAXR || (a1 && k3 != k1)) goto unknown;
        n = (int)k1;
        for (int i = 0; i < n; i++) {
            st[i] = sd_c(s1[i]);
            en[i] = sd_c(e1[i]);
            ax[i] = a1 ? a1[i] : i;
            sp[i] = 1;
        }
    }
    for (int i = 0; i < n; i++) {
        int k = norm_axis(ax[i], a->rank);
        if (k < 0 || k >= a->rank || !sp[i]) goto unknown;
        wm_sdim d = a->dim[k];
        int64_t step = sp[i];
        int values = a->nval >= 0 && a->rank == 1;
        if (st[i].k != WM_SD_CONST || en[i].k != WM_SD_CONST || d.k != WM_SD_CONST) {
            /* symbolic: x[0:e] has e elements (e a size), x[0:big] keeps the dim */
            int from0 = st[i].k == WM_SD_CONST && st[i].v == 0 && step == 1;
            if (from0 && en[i].k == WM_SD_SYM) o->dim[k] = en[i];
            else if (from0 && en[i].k == WM_SD_CONST && en[i].v >= (int64_t)1 << 62) o->dim[k] = d;
            else o->dim[k] = sh_fresh(c->s);
            if (values) goto novalues;
            continue;
        }
        int64_t D = d.v, s0;
        if (D < 0) goto unknown;
        int64_t len = wm_slice_axis(D, st[i].v, en[i].v, step, &s0); /* as the engine's Slice */
        o->dim[k] = sd_c(len);
        if (values && a->nval == D) {
            for (int64_t j = 0; j < len; j++) o->val[j] = a->val[s0 + j * step];
            o->nval = (int32_t)len;
        }
    }
    return;
unknown:
    for (int i = 0; i < a->rank; i++) o->dim[i] = sh_fresh(c->s);
novalues:
    o->nval = -1;
}

static void r_transpose(const ctx *c) {
    const wm_tinfo *a = IN(c, 0);
    wm_tinfo *o = OUT(c, 0);
    if (!o) return;
    o->dtype = a->dtype;
    if (a->rank < 0) return;
    size_t np;
    const int64_t *p = wm_opt_attr_ints(c->n, "perm", &np);
    if (p && (int)np != a->rank) return;
    o->rank = a->rank;
    for (int i = 0; i < a->rank; i++) {
        int k = p ? norm_axis(p[i], a->rank) : a->rank - 1 - i;
        if (k < 0 || k >= a->rank) {
            o->rank = -1;
            return;
        }
        o->dim[i] = a->dim[k];
    }
}

void sh_matmul(const ctx *c, int32_t dt) {
    const wm_tinfo *a = IN(c, 0), *b = IN(c, 1);
    wm_tinfo *o = OUT(c, 0);
    if (!o) return;
    o->dtype = dt ? dt : a->dtype;
    if (a->rank < 1 || b->rank < 1) return;
    wm_tinfo ba = *a, bb = *b;
    /* batch dims broadcast; 1-D operands are promoted then squeezed */
    ba.rank = a->rank >= 2 ? a->rank - 2 : 0;
    bb.rank = b->rank >= 2 ? b->rank - 2 : 0;
    wm_tinfo bt;
    ti_unknown(&bt);
    bcast(c->s, &bt, &ba, &bb);
    if (bt.rank < 0 || bt.rank + 2 > WM_SH_MAXR) return;
    int r = bt.rank;
    memcpy(o->dim, bt.dim, sizeof bt.dim);
    if (a->rank >= 2) o->dim[r++] = a->dim[a->rank - 2];
    if (b->rank >= 2) o->dim[r++] = b->dim[b->rank - 1];
    o->rank = r;
}

static void r_gemm(const ctx *c) {
    const wm_tinfo *a = IN(c, 0), *b = IN(c, 1);
    wm_tinfo *o = OUT(c, 0);
    if (!o) return;
    o->dtype = a->dtype;
    if (a->rank != 2 || b->rank != 2) return;
    int ta = (int)wm_opt_attr_i(c->n, "transA", 0), tb = (int)wm_opt_attr_i(c->n, "transB", 0);
    o->rank = 2;
    o->dim[0] = a->dim[ta ? 1 : 0];
    o->dim[1] = b->dim[tb ? 0 : 1];
}

static void r_expand(const ctx *c) {
    const wm_tinfo *a = IN(c, 0), *sh = IN(c, 1);
    wm_tinfo *o = OUT(c, 0);
    if (!o) return;
    o->dtype = a->dtype;
    if (sh->rank != 1 || sh->nval < 0) return;
    wm_tinfo t;
    ti_unknown(&t);
    t.rank = sh->nval;
    memcpy(t.dim, sh->val, sizeof t.dim);
    bcast(c->s, o, a, &t);
}

/* The `value` attribute of a ConstantOfShape decoded (one element); 0 when absent. */
static int v_of(const ctx *c, wm_ct *v) {
    const wm_onnx_attr *a = wm_graph_node_attr(c->n, "value");
    return a && a->t && wm_ct_from_tensor(a->t, 64, v, NULL) == WM_OK && v->n >= 1;
}

static void r_constant_of_shape(const ctx *c) {
    const wm_tinfo *sh = IN(c, 0);
    wm_tinfo *o = OUT(c, 0);
    if (!o) return;
    const wm_onnx_attr *va = wm_graph_node_attr(c->n, "value");
    o->dtype = va && va->t ? va->t->data_type : WM_DT_FLOAT;
    if (sh->rank != 1 || sh->dim[0].k != WM_SD_CONST || sh->dim[0].v > WM_SH_MAXR) return;
    o->rank = (int32_t)sh->dim[0].v;
    for (int i = 0; i < o->rank; i++) o->dim[i] = sh->nval == o->rank && sh->val[i].k ? sh->val[i] : sh_fresh(c->s);
    wm_ct v;
    if (o->rank == 1 && o->dim[0].k == WM_SD_CONST && o->dim[0].v <= WM_SH_MAXV &&
        (o->dtype == WM_DT_INT64 || o->dtype == WM_DT_INT32)) {
        int64_t fill = 0;
        if (v_of(c, &v)) {
            fill = wm_ct_geti(&v, 0);
            wm_ct_free(&v);
        }
        o->nval = (int32_t)o->dim[0].v;
        for (int i = 0; i < o->nval; i++) o->val[i] = sd_c(fill);
    }
}

static void r_range(const ctx *c) {
    wm_tinfo *o = OUT(c, 0);
    if (!o) return;
    set_rank1(o, IN(c, 0)->dtype, sh_fresh(c->s));
    const wm_tinfo *lim = IN(c, 1);
    int64_t a, b, d;
    if (lim->nval == 1 && lim->val[0].k == WM_SD_SYM && in_ints(c, 0, &a, 1) == 1 && a == 0 &&
        in_ints(c, 2, &d, 1) == 1 && d == 1) {
        o->dim[0] = lim->val[0]; /* arange(n) has n elements */
        return;
    }
    if (in_ints(c, 0, &a, 1) != 1 || in_ints(c, 1, &b, 1) != 1 || in_ints(c, 2, &d, 1) != 1 || !d) return;
    uint64_t n; /* counted as the engine's Range counts */
    if (wm_range_count_int(a, b, d, IN(c, 0)->dtype == WM_DT_UINT64, 1ull << 40, &n)) o->dim[0] = sd_c((int64_t)n);
}

static void r_reduce(const ctx *c, int64_t input_from) {
    const wm_tinfo *a = IN(c, 0);
    wm_tinfo *o = OUT(c, 0);
    if (!o) return;
    o->dtype = a->dtype;
    int64_t ax[WM_SH_MAXR];
    int na = axes_of(c, input_from, 1, "axes", ax, WM_SH_MAXR);
    int keep = (int)wm_opt_attr_i(c->n, "keepdims", 1);
    if (a->rank < 0 || na < 0) return;
    uint8_t red[WM_SH_MAXR] = {0};
    if (na == 0 && !wm_opt_attr_i(c->n, "noop_with_empty_axes", 0)) memset(red, 1, sizeof red);
    for (int i = 0; i < na; i++) {
        int k = norm_axis(ax[i], a->rank);
        if (k < 0 || k >= a->rank) return;
        red[k] = 1;
    }
    int r = 0;
    for (int i = 0; i < a->rank; i++) {
        if (!red[i]) o->dim[r++] = a->dim[i];
        else if (keep) o->dim[r++] = sd_c(1);
    }
    o->rank = r;
}

static void r_split(const ctx *c) {
    const wm_tinfo *a = IN(c, 0);
    size_t no = c->n->n_output;
    int ax = a->rank >= 0 ? norm_axis(wm_opt_attr_i(c->n, "axis", 0), a->rank) : -1;
    int64_t sp[16];
    int ns = -1;
    if (c->s->opset >= 13) ns = HAS(c, 1) ? in_ints(c, 1, sp, 16) : 0;
    else {
        size_t k;
        const int64_t *v = wm_opt_attr_ints(c->n, "split", &k);
        ns = v && k <= 16 ? (int)k : 0;
        if (v && k <= 16) memcpy(sp, v, k * sizeof *v);
    }
    for (size_t i = 0; i < no; i++) {
        wm_tinfo *o = OUT(c, i);
        if (!o) continue;
        same(o, a);
        if (ax < 0 || ax >= a->rank) continue;
        if (ns == (int)no) o->dim[ax] = sd_c(sp[i]);
        else if (ns == 0 && a->dim[ax].k == WM_SD_CONST && a->dim[ax].v % (int64_t)no == 0)
            o->dim[ax] = sd_c(a->dim[ax].v / (int64_t)no);
        else o->dim[ax] = sh_fresh(c->s);
    }
}

static void r_flatten(const ctx *c) {
    const wm_tinfo *a = IN(c, 0);
    wm_tinfo *o = OUT(c, 0);
    if (!o) return;
    o->dtype = a->dtype;
    if (a->rank < 0) return;
    int ax = norm_axis(wm_opt_attr_i(c->n, "axis", 1), a->rank);
    wm_sdim p = sd_c(1), q = sd_c(1);
    for (int i = 0; i < a->rank; i++) {
        if (i < ax) p = sh_arith(c->s, '*', p, a->dim[i]);
        else q = sh_arith(c->s, '*', q, a->dim[i]);
    }
    o->rank = 2;
    o->dim[0] = p.k ? p : sh_fresh(c->s);
    o->dim[1] = q.k ? q : sh_fresh(c->s);
}

static void r_constant(const ctx *c) {
    wm_tinfo *o = OUT(c, 0);
    if (!o) return;
    const wm_onnx_attr *a = c->n->n_attribute ? c->n->attribute[0] : NULL;
    if (!a || !a->name) return;
    if (a->t) {
        wm_onnx_tensor *t = a->t;
        o->dtype = t->data_type;
        if (t->n_dims > WM_SH_MAXR) return;
        o->rank = (int32_t)t->n_dims;
        uint64_t n = 1;
        for (size_t i = 0; i < t->n_dims; i++) {
            o->dim[i] = sd_c(t->dims[i]);
            n *= (uint64_t)(t->dims[i] > 0 ? t->dims[i] : 0);
        }
        wm_ct ct;
        int is_int = t->data_type == WM_DT_INT64 || t->data_type == WM_DT_INT32;
        if (is_int && t->n_dims <= 1 && n <= WM_SH_MAXV && !wm_ct_from_tensor(t, 0, &ct, NULL)) {
            o->nval = (int32_t)n;
            for (uint64_t i = 0; i < n; i++) o->val[i] = sd_c(wm_ct_geti(&ct, i));
            wm_ct_free(&ct);
        }
    } else if (!strcmp(a->name, "value_float") || !strcmp(a->name, "value_int")) {
        o->dtype = a->name[6] == 'f' ? WM_DT_FLOAT : WM_DT_INT64;
        o->rank = 0;
        if (o->dtype == WM_DT_INT64) {
            o->nval = 1;
            o->val[0] = sd_c(a->i);
        }
    } else if (!strcmp(a->name, "value_floats") || !strcmp(a->name, "value_ints")) {
        int isf = a->name[6] == 'f';
        size_t n = isf ? a->n_floats : a->n_ints;
        set_rank1(o, isf ? WM_DT_FLOAT : WM_DT_INT64, sd_c((int64_t)n));
        if (!isf && n <= WM_SH_MAXV) {
            o->nval = (int32_t)n;
            for (size_t i = 0; i < n; i++) o->val[i] = sd_c(a->ints[i]);
        }
    }
}

static int32_t attr_dtype(const ctx *c, const char *name, int32_t dflt) {
    return (int32_t)wm_opt_attr_i(c->n, name, dflt);
}

static int is_cmp(const char *op) {
    static const char *ops[] = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (!strcmp(op, ops[i])) return 1;
    return 0;
}

static int is_unary(const char *op) {
    static const char *ops[] = {
        "Identity", "Neg", "Abs", "Sqrt", "Reciprocal", "Exp", "Log", "Erf", "Tanh", "Sigmoid", "Relu", "Cos", "Sin",
        "Floor", "Ceil", "Round", "Softmax", "LogSoftmax", "Gelu", "LeakyRelu", "Elu", "Selu", "HardSigmoid",
        "Softplus", "Softsign", "Clip", "Sign", "Mish", "HardSwish", "Trilu", "CumSum", "Dropout", "LayerNormalization",
        "SimplifiedLayerNormalization", "RMSNormalization", "Celu", "ThresholdedRelu", "Tan", "Asin", "Acos", "Atan",
        "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "InstanceNormalization", "BatchNormalization", "LpNormalization",
        "GroupNormalization", "ScatterND", "ScatterElements", "Scatter", "ReverseSequence", "Shrink",
        "MeanVarianceNormalization", "RotaryEmbedding"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (!strcmp(op, ops[i])) return 1;
    return 0;
}

static int is_binary(const char *op) {
    static const char *ops[] = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod", "PRelu", "BitShift", "Sum",
                                "Mean", "BitwiseAnd", "BitwiseOr", "BitwiseXor"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (!strcmp(op, ops[i])) return 1;
    return 0;
}

static void r_variadic(const ctx *c, int32_t dt) {
    wm_tinfo *o = OUT(c, 0);
    if (!o) return;
    wm_tinfo acc = *IN(c, 0);
    for (size_t i = 1; i < c->n->n_input; i++) {
        wm_tinfo t;
        ti_unknown(&t);
        bcast(c->s, &t, &acc, IN(c, i));
        t.dtype = acc.dtype;
        t.nval = acc.nval;
        memcpy(t.val, acc.val, sizeof t.val);
        acc = t;
    }
    same(o, &acc);
    o->dtype = dt ? dt : IN(c, 0)->dtype;
    if (c->n->n_input == 2 && !dt) {
        const char *op = c->n->op_type;
        char sym = !strcmp(op, "Add") ? '+' : !strcmp(op, "Sub") ? '-' : !strcmp(op, "Mul") ? '*'
                 : !strcmp(op, "Div") ? '/' : 0;
        if (sym) bin_values(c->s, o, IN(c, 0), IN(c, 1), sym);
    }
}

/* Equal on tracked values: symbols are sizes (>= 0), so a symbol never equals a negative constant. */
static void equal_values(const ctx *c) {
    const wm_tinfo *a = IN(c, 0), *b = IN(c, 1);
    wm_tinfo *o = wm_opt_out(c->n, 0) ? sh_put(c->s, c->n->output[0]) : NULL;
    if (!o || a->nval < 0 || b->nval < 0 || o->rank > 1) return;
    int n = a->nval > b->nval ? a->nval : b->nval;
    if ((a->nval != n && a->nval != 1) || (b->nval != n && b->nval != 1)) return;
    for (int i = 0; i < n; i++) {
        wm_sdim x = a->val[a->nval == 1 ? 0 : i], y = b->val[b->nval == 1 ? 0 : i];
        if (x.k == WM_SD_CONST && y.k == WM_SD_CONST) o->val[i] = sd_c(x.v == y.v);
        else if (wm_sdim_eq(x, y)) o->val[i] = sd_c(1);
        else if ((x.k == WM_SD_SYM && y.k == WM_SD_CONST && y.v < 0) || (y.k == WM_SD_SYM && x.k == WM_SD_CONST && x.v < 0))
            o->val[i] = sd_c(0);
        else return;
    }
    o->nval = n;
}

static void where_values(const ctx *c, wm_tinfo *o) {
    const wm_tinfo *k = IN(c, 0), *a = IN(c, 1), *b = IN(c, 2);
    if (k->nval < 0 || a->nval < 0 || b->nval < 0 || o->rank > 1) return;
    int n = k->nval;
    if (a->nval > n) n = a->nval;
    if (b->nval > n) n = b->nval;
    for (int i = 0; i < n; i++) {
        wm_sdim cnd = k->val[k->nval == 1 ? 0 : i];
        if (cnd.k != WM_SD_CONST || (k->nval != 1 && k->nval != n) || (a->nval != 1 && a->nval != n) ||
            (b->nval != 1 && b->nval != n))
            return;
        o->val[i] = cnd.v ? a->val[a->nval == 1 ? 0 : i] : b->val[b->nval == 1 ? 0 : i];
    }
    o->nval = n;
}

static void r_default_domain(const ctx *c) {
    const char *op = c->n->op_type;
    wm_tinfo *o;
    if (!strcmp(op, "Shape")) r_shape(c);
    else if (!strcmp(op, "Size")) r_size(c);
    else if (!strcmp(op, "Cast")) r_cast(c, attr_dtype(c, "to", 0));
    else if (!strcmp(op, "CastLike")) r_cast(c, IN(c, 1)->dtype);
    else if (!strcmp(op, "Reshape")) r_reshape(c);
    else if (!strcmp(op, "Unsqueeze")) r_unsqueeze(c);
    else if (!strcmp(op, "Squeeze")) r_squeeze(c);
    else if (!strcmp(op, "Concat")) r_concat(c);
    else if (!strcmp(op, "Gather")) r_gather(c);
    else if (!strcmp(op, "Slice")) r_slice(c);
    else if (!strcmp(op, "Transpose")) r_transpose(c);
    else if (!strcmp(op, "MatMul")) sh_matmul(c, 0);
    else if (!strcmp(op, "MatMulInteger")) sh_matmul(c, WM_DT_INT32);
    else if (!strcmp(op, "Gemm")) r_gemm(c);
    else if (!strcmp(op, "Expand")) r_expand(c);
    else if (!strcmp(op, "ConstantOfShape")) r_constant_of_shape(c);
    else if (!strcmp(op, "Range")) r_range(c);
    else if (!strcmp(op, "Split")) r_split(c);
    else if (!strcmp(op, "Flatten")) r_flatten(c);
    else if (!strcmp(op, "Constant")) r_constant(c);
    else if (!strncmp(op, "Reduce", 6)) r_reduce(c, !strcmp(op, "ReduceSum") ? 13 : 18);
    else if (!strcmp(op, "Where")) {
        if (!(o = OUT(c, 0))) return;
        wm_tinfo t;
        ti_unknown(&t);
        bcast(c->s, &t, IN(c, 1), IN(c, 2));
        bcast(c->s, o, IN(c, 0), &t);
        o->dtype = IN(c, 1)->dtype ? IN(c, 1)->dtype : IN(c, 2)->dtype;
        where_values(c, o);
    } else if (!strcmp(op, "Equal")) {
        r_variadic(c, WM_DT_BOOL);
        equal_values(c);
    } else if (is_cmp(op)) r_variadic(c, WM_DT_BOOL);
    else if (!strcmp(op, "Not") || !strcmp(op, "IsNaN") || !strcmp(op, "IsInf")) {
        if ((o = OUT(c, 0))) same(o, IN(c, 0)), o->dtype = WM_DT_BOOL;
    } else if (is_binary(op)) r_variadic(c, 0);
    else if (is_unary(op)) {
        if ((o = OUT(c, 0))) same(o, IN(c, 0));
        if (!strcmp(op, "Identity") && o) {
            o->nval = IN(c, 0)->nval;
            memcpy(o->val, IN(c, 0)->val, sizeof o->val);
        }
        if (!strcmp(op, "Dropout") && (o = OUT(c, 1))) same(o, IN(c, 0)), o->dtype = WM_DT_BOOL;
        if (!strcmp(op, "LayerNormalization"))
            for (size_t i = 1; i < 3; i++)
                if ((o = OUT(c, i))) o->dtype = WM_DT_FLOAT;
    } else if (!strcmp(op, "GatherElements")) {
        if ((o = OUT(c, 0))) same(o, IN(c, 1)), o->dtype = IN(c, 0)->dtype;
    } else if (!strcmp(op, "GatherND") || !strcmp(op, "Tile") || !strcmp(op, "Pad") || !strcmp(op, "Resize") ||
               !strcmp(op, "Einsum") || !strcmp(op, "ConvTranspose") ||
               !strcmp(op, "DepthToSpace") || !strcmp(op, "SpaceToDepth") || !strcmp(op, "Upsample")) {
        if ((o = OUT(c, 0))) o->dtype = IN(c, 0)->dtype;
    } else if (!strcmp(op, "Conv") || !strcmp(op, "MaxPool") || !strcmp(op, "AveragePool") ||
               !strcmp(op, "GlobalAveragePool") || !strcmp(op, "GlobalMaxPool")) {
        sh_window(c, !strcmp(op, "Conv"), !strncmp(op, "Global", 6));
    } else if (!strcmp(op, "ArgMax") || !strcmp(op, "ArgMin") || !strcmp(op, "NonZero")) {
        if ((o = OUT(c, 0))) o->dtype = WM_DT_INT64;
    } else if (!strcmp(op, "TopK")) {
        if ((o = OUT(c, 0))) o->dtype = IN(c, 0)->dtype;
        if ((o = OUT(c, 1))) o->dtype = WM_DT_INT64;
    } else if (!strcmp(op, "QuantizeLinear")) {
        if ((o = OUT(c, 0))) {
            same(o, IN(c, 0));
            o->dtype = HAS(c, 2) ? IN(c, 2)->dtype : attr_dtype(c, "output_dtype", WM_DT_UINT8);
        }
    } else if (!strcmp(op, "DequantizeLinear")) {
        if ((o = OUT(c, 0))) same(o, IN(c, 0)), o->dtype = IN(c, 1)->dtype;
    } else if (!strcmp(op, "DynamicQuantizeLinear")) {
        if ((o = OUT(c, 0))) same(o, IN(c, 0)), o->dtype = WM_DT_UINT8;
        if ((o = OUT(c, 1))) o->dtype = WM_DT_FLOAT, o->rank = 0;
        if ((o = OUT(c, 2))) o->dtype = WM_DT_UINT8, o->rank = 0;
    } else if (!strcmp(op, "OneHot")) {
        if ((o = OUT(c, 0))) o->dtype = IN(c, 2)->dtype;
    } else if (!strcmp(op, "RandomNormalLike") || !strcmp(op, "RandomUniformLike") || !strcmp(op, "EyeLike")) {
        if ((o = OUT(c, 0))) same(o, IN(c, 0)), o->dtype = attr_dtype(c, "dtype", IN(c, 0)->dtype);
    }
}

void sh_node(wm_shapes *s, const wm_onnx_node *n) {
    if (!n->op_type) return;
    ctx c = {s, n};
    /* create every output record first: the rules hold input pointers, which a later growth would move */
    for (size_t i = 0; i < n->n_output; i++)
        if (wm_opt_out(n, i) && !sh_put(s, n->output[i])) return;
    if (wm_opt_default_domain(n)) r_default_domain(&c);
    else if (n->domain && !strcmp(n->domain, "com.microsoft")) sh_microsoft(&c);
}
