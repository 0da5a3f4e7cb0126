/*
 * shape.c - the inference table (a string map to wm_tinfo records), the
 * symbol table, seeding from graph inputs, initializers and value_info, and
 * the walk over the nodes. The per-op rules live in shape_ops.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "onnx/dtype.h"
#include "ops/int_math.h"
#include "opt/shape_impl.h"

static uint64_t str_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static sh_slot *find(const wm_shapes *s, const char *key) {
    size_t mask = s->cap - 1, i = (size_t)str_hash(key) & mask;
    while (s->slot[i].key && strcmp(s->slot[i].key, key) != 0) i = (i + 1) & mask;
    return &s->slot[i];
}

static int grow(wm_shapes *s) {
    size_t cap = s->cap ? s->cap * 2 : 256, old = s->cap;
    sh_slot *prev = s->slot, *fresh = calloc(cap, sizeof *fresh);
    if (!fresh) return -1;
    s->slot = fresh;
    s->cap = cap;
    for (size_t i = 0; i < old; i++)
        if (prev[i].key) *find(s, prev[i].key) = prev[i];
    free(prev);
    return 0;
}

void ti_unknown(wm_tinfo *t) {
    memset(t, 0, sizeof *t);
    t->rank = -1;
    t->nval = -1;
}

/* Returns the record of name (created unknown when missing); NULL on OOM (s->oom set). */
wm_tinfo *sh_put(wm_shapes *s, const char *name) {
    if (s->cap && find(s, name)->key) return &s->info[find(s, name)->idx];
    if ((s->n + 1) * 4 > s->cap * 3 && grow(s)) {
        s->oom = 1;
        return NULL;
    }
    if (s->n_info == s->cap_info) {
        size_t cap = s->cap_info ? s->cap_info * 2 : 256;
        wm_tinfo *p = realloc(s->info, cap * sizeof *p);
        if (!p) {
            s->oom = 1;
            return NULL;
        }
        s->info = p;
        s->cap_info = cap;
    }
    sh_slot *sl = find(s, name);
    sl->key = name;
    sl->idx = s->n_info++;
    s->n++;
    wm_tinfo *t = &s->info[sl->idx];
    ti_unknown(t);
    return t;
}

const wm_tinfo *wm_shapes_get(const wm_shapes *s, const char *name) {
    if (!s || !name || !s->cap) return NULL;
    const sh_slot *sl = find(s, name);
    return sl->key ? &s->info[sl->idx] : NULL;
}

int64_t sh_symbol(wm_shapes *s, const char *name) {
    for (size_t i = 0; i < s->n_sym; i++)
        if (strcmp(s->sym[i], name) == 0) return (int64_t)i;
    if (s->n_sym == s->cap_sym) {
        size_t cap = s->cap_sym ? s->cap_sym * 2 : 32;
        char **p = realloc(s->sym, cap * sizeof *p);
        if (!p) {
            s->oom = 1;
            return -1;
        }
        s->sym = p;
        s->cap_sym = cap;
    }
    char *c = strdup(name);
    if (!c) {
        s->oom = 1;
        return -1;
    }
    s->sym[s->n_sym] = c;
    return (int64_t)s->n_sym++;
}

wm_sdim sh_fresh(wm_shapes *s) {
    char buf[32];
    snprintf(buf, sizeof buf, "?%zu", s->n_sym);
    int64_t id = sh_symbol(s, buf);
    return id < 0 ? sd_u() : (wm_sdim){id, WM_SD_SYM};
}

const char *wm_shapes_symbol_name(const wm_shapes *s, int64_t id) {
    return id >= 0 && (size_t)id < s->n_sym ? s->sym[id] : NULL;
}

static void sdim_text(const wm_shapes *s, wm_sdim d, char *buf, size_t n) {
    if (d.k == WM_SD_CONST) snprintf(buf, n, "%lld", (long long)d.v);
    else snprintf(buf, n, "%s", wm_shapes_symbol_name(s, d.v));
}

wm_sdim sh_arith(wm_shapes *s, char op, wm_sdim a, wm_sdim b) {
    if (a.k == WM_SD_CONST && b.k == WM_SD_CONST) {
        switch (op) {
        /* the engine's integer Add, Sub, Mul, Div (ops/int_math.h: wrapping, truncating, x / 0 = 0, MIN / -1 = MIN),
         * so a shape value folded here equals the one computed at run time */
        case '+': return sd_c(wm_i64_add(a.v, b.v));
        case '-': return sd_c(wm_i64_sub(a.v, b.v));
        case '*': return sd_c(wm_i64_mul(a.v, b.v));
        case '/': return sd_c(wm_i64_div(a.v, b.v));
        default: return sd_u();
        }
    }
    if (!a.k || !b.k) return sd_u();
    if ((op == '+' || op == '-') && b.k == WM_SD_CONST && b.v == 0) return a;
    if (op == '+' && a.k == WM_SD_CONST && a.v == 0) return b;
    if ((op == '*' || op == '/') && b.k == WM_SD_CONST && b.v == 1) return a;
    if (op == '*' && a.k == WM_SD_CONST && a.v == 1) return b;
    char x[128], y[128], e[300];
    sdim_text(s, a, x, sizeof x);
    sdim_text(s, b, y, sizeof y);
    if ((op == '+' || op == '*') && strcmp(x, y) > 0) snprintf(e, sizeof e, "(%s%c%s)", y, op, x);
    else snprintf(e, sizeof e, "(%s%c%s)", x, op, y);
    int64_t id = sh_symbol(s, e);
    return id < 0 ? sd_u() : (wm_sdim){id, WM_SD_SYM};
}

int wm_sdim_eq(wm_sdim a, wm_sdim b) { return a.k && a.k == b.k && a.v == b.v; }

int wm_shapes_same(const wm_shapes *s, const char *a, const char *b) {
    const wm_tinfo *x = wm_shapes_get(s, a), *y = wm_shapes_get(s, b);
    if (!x || !y || x->rank < 0 || x->rank != y->rank) return 0;
    for (int i = 0; i < x->rank; i++)
        if (!wm_sdim_eq(x->dim[i], y->dim[i])) return 0;
    return 1;
}

/* ---------------------------------------------------------------- seeding */

static void from_type(wm_shapes *s, wm_tinfo *t, const wm_onnx_type *ty) {
    if (!ty || !ty->tensor_type) return;
    const wm_onnx_type_tensor *tt = ty->tensor_type;
    if (tt->elem_type) t->dtype = tt->elem_type;
    if (!tt->shape || tt->shape->n_dim > WM_SH_MAXR) return;
    t->rank = (int32_t)tt->shape->n_dim;
    for (size_t i = 0; i < tt->shape->n_dim; i++) {
        const wm_onnx_dim *d = tt->shape->dim[i];
        if (d->pb.has & 1) t->dim[i] = sd_c(d->dim_value);
        else if (d->dim_param && d->dim_param[0]) {
            int64_t id = sh_symbol(s, d->dim_param);
            t->dim[i] = id < 0 ? sd_u() : (wm_sdim){id, WM_SD_SYM};
        } else t->dim[i] = sh_fresh(s);
    }
}

/* Shape, dtype and (small integer tensors) values of a constant tensor. */
static void from_tensor(wm_tinfo *t, const wm_onnx_tensor *c) {
    t->dtype = c->data_type;
    if (c->n_dims > WM_SH_MAXR) return;
    t->rank = (int32_t)c->n_dims;
    uint64_t n = 1;
    for (size_t i = 0; i < c->n_dims; i++) {
        t->dim[i] = sd_c(c->dims[i]);
        n *= (uint64_t)(c->dims[i] < 0 ? 0 : c->dims[i]);
    }
    int is_int = c->data_type == WM_DT_INT64 || c->data_type == WM_DT_INT32;
    if (!is_int || c->n_dims > 1 || n > WM_SH_MAXV) return;
    wm_ct ct;
    if (wm_ct_from_tensor(c, 0, &ct, NULL)) return;
    t->nval = (int32_t)n;
    for (uint64_t i = 0; i < n; i++) t->val[i] = sd_c(wm_ct_geti(&ct, i));
    wm_ct_free(&ct);
}

static void seed(wm_shapes *s) {
    wm_onnx_graph *p = wm_graph_proto(s->g);
    for (size_t i = 0; i < p->n_value_info; i++) {
        wm_tinfo *t = p->value_info[i]->name ? sh_put(s, p->value_info[i]->name) : NULL;
        if (t) from_type(s, t, p->value_info[i]->type);
    }
    for (size_t i = 0; i < p->n_input; i++) {
        wm_tinfo *t = p->input[i]->name ? sh_put(s, p->input[i]->name) : NULL;
        if (t) from_type(s, t, p->input[i]->type);
    }
    for (size_t i = 0; i < p->n_initializer; i++) {
        const wm_onnx_tensor *c = p->initializer[i];
        wm_tinfo *t = c->name ? sh_put(s, c->name) : NULL;
        if (!t) continue;
        ti_unknown(t);
        from_tensor(t, c);
    }
}

/* Graph outputs declared with a type fill in what inference left unknown. */
static void merge_declared(wm_shapes *s, const char *name, const wm_onnx_type *ty) {
    wm_tinfo *t = sh_put(s, name);
    if (!t || !ty) return;
    wm_tinfo d;
    ti_unknown(&d);
    from_type(s, &d, ty);
    if (!t->dtype) t->dtype = d.dtype;
    if (t->rank < 0 && d.rank >= 0) {
        t->rank = d.rank;
        memcpy(t->dim, d.dim, sizeof d.dim);
    }
}

wm_status wm_shapes_infer(wm_graph *g, wm_shapes **out, wm_error *err) {
    *out = NULL;
    wm_shapes *s = calloc(1, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    s->g = g;
    s->opset = wm_graph_opset(g, "");
    if (s->opset < 0) s->opset = 17;
    seed(s);
    wm_onnx_graph *p = wm_graph_proto(g);
    for (size_t i = 0; i < p->n_node && !s->oom; i++) sh_node(s, p->node[i]);
    for (size_t i = 0; i < p->n_value_info && !s->oom; i++)
        if (p->value_info[i]->name) merge_declared(s, p->value_info[i]->name, p->value_info[i]->type);
    for (size_t i = 0; i < p->n_output && !s->oom; i++)
        if (p->output[i]->name) merge_declared(s, p->output[i]->name, p->output[i]->type);
    if (s->oom) {
        wm_shapes_free(s);
        return wm_err(err, WM_ERR_NOMEM, "out of memory inferring shapes");
    }
    *out = s;
    return WM_OK;
}

void wm_shapes_free(wm_shapes *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n_sym; i++) free(s->sym[i]);
    free(s->sym);
    free(s->slot);
    free(s->info);
    free(s);
}

int32_t wm_shapes_dtype(const wm_shapes *s, const char *name) {
    const wm_tinfo *t = wm_shapes_get(s, name);
    return t ? t->dtype : 0;
}

int wm_shapes_rank(const wm_shapes *s, const char *name) {
    const wm_tinfo *t = wm_shapes_get(s, name);
    return t ? t->rank : -1;
}

int64_t wm_shapes_dim(const wm_shapes *s, const char *name, int i) {
    const wm_tinfo *t = wm_shapes_get(s, name);
    if (!t || t->rank < 0) return -1;
    if (i < 0) i += t->rank;
    if (i < 0 || i >= t->rank) return -1;
    return t->dim[i].k == WM_SD_CONST ? t->dim[i].v : -1;
}

int wm_shapes_static(const wm_shapes *s, const char *name, uint64_t *numel) {
    const wm_tinfo *t = wm_shapes_get(s, name);
    if (!t || t->rank < 0) return 0;
    uint64_t n = 1;
    for (int i = 0; i < t->rank; i++) {
        if (t->dim[i].k != WM_SD_CONST || t->dim[i].v < 0) return 0;
        n *= (uint64_t)t->dim[i].v;
    }
    if (numel) *numel = n;
    return 1;
}

int wm_shapes_values_known(const wm_shapes *s, const char *name) {
    const wm_tinfo *t = wm_shapes_get(s, name);
    if (!t || t->nval < 0) return 0;
    for (int i = 0; i < t->nval; i++)
        if (t->val[i].k != WM_SD_CONST) return 0;
    return 1;
}
