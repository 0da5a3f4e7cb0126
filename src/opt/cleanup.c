/*
 * cleanup.c - the basic passes: Constant nodes to initializers, constant
 * folding, static shape arithmetic, identity/no-op/chain elimination,
 * initializer deduplication, common subexpressions, dead nodes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "onnx/dtype.h"
#include "onnx/onnx_model.h"
#include "opt/fold.h"
#include "opt/passes.h"

/* A snapshot of the node list (malloc'ed) so passes can edit while walking. */
static wm_onnx_node **snapshot(wm_graph *g, size_t *n, wm_error *err) {
    wm_onnx_graph *p = wm_graph_proto(g);
    *n = p->n_node;
    wm_onnx_node **v = malloc((p->n_node ? p->n_node : 1) * sizeof *v);
    if (!v) wm_err(err, WM_ERR_NOMEM, "out of memory");
    else if (p->n_node) memcpy(v, p->node, p->n_node * sizeof *v);
    return v;
}

/* 1 when any output of n is a graph output. */
static int feeds_graph_output(const wm_graph *g, const wm_onnx_node *n) {
    for (size_t i = 0; i < n->n_output; i++)
        if (wm_opt_out(n, i) && wm_opt_is_graph_output(g, n->output[i])) return 1;
    return 0;
}

/* Replaces node n (one output) by an initializer named like its output holding c. */
static wm_status node_to_const(wm_pass_ctx *c, wm_onnx_node *n, const wm_ct *val) {
    const char *out = wm_opt_out(n, 0);
    wm_status s = wm_graph_remove_node(c->g, n, c->err);
    if (!s) s = wm_opt_add_ct(c->g, out, val, c->err);
    if (!s) c->fired++;
    return s;
}

/* ---------------------------------------------------------------- Constant nodes */

/* The value of a Constant node as a wm_ct; 0 when its attribute form is not supported. */
static int constant_value(const wm_onnx_node *n, wm_ct *out) {
    const wm_onnx_attr *a = n->n_attribute == 1 ? n->attribute[0] : NULL;
    memset(out, 0, sizeof *out);
    if (!a || !a->name) return 0;
    if (a->t) return wm_ct_from_tensor(a->t, 0, out, NULL) == WM_OK;
    int64_t one = 0;
    if (!strcmp(a->name, "value_float") || !strcmp(a->name, "value_int")) {
        int f = a->name[6] == 'f';
        if (wm_ct_alloc(out, f ? WM_DT_FLOAT : WM_DT_INT64, &one, 0, NULL)) return 0;
        if (f) ((float *)out->data)[0] = a->f;
        else ((int64_t *)out->data)[0] = a->i;
        return 1;
    }
    if (!strcmp(a->name, "value_floats") || !strcmp(a->name, "value_ints")) {
        int f = a->name[6] == 'f';
        int64_t len = (int64_t)(f ? a->n_floats : a->n_ints);
        if (wm_ct_alloc(out, f ? WM_DT_FLOAT : WM_DT_INT64, &len, 1, NULL)) return 0;
        if (len) memcpy(out->data, f ? (const void *)a->floats : (const void *)a->ints, (size_t)len * (f ? 4 : 8));
        return 1;
    }
    return 0;
}

wm_status wm_pass_const_nodes(wm_pass_ctx *c) {
    size_t n;
    wm_onnx_node **v = snapshot(c->g, &n, c->err);
    if (!v) return WM_ERR_NOMEM;
    wm_status s = WM_OK;
    for (size_t i = 0; i < n && !s; i++) {
        wm_onnx_node *nd = v[i];
        if (!wm_opt_is(nd, "Constant") || nd->n_output != 1 || !wm_opt_out(nd, 0) || feeds_graph_output(c->g, nd))
            continue;
        wm_ct val;
        if (!constant_value(nd, &val)) continue;
        s = node_to_const(c, nd, &val);
        wm_ct_free(&val);
    }
    free(v);
    return s;
}

/* ---------------------------------------------------------------- folding */

/* Ops never folded: random, shape-producing ops fold through shape_arithmetic instead. */
static int foldable(const wm_onnx_node *n) {
    return n->op_type && wm_opt_default_domain(n) && wm_fold_supported(n->op_type);
}

wm_status wm_pass_fold(wm_pass_ctx *c) {
    size_t n;
    wm_onnx_node **v = snapshot(c->g, &n, c->err);
    if (!v) return WM_ERR_NOMEM;
    wm_status s = WM_OK;
    int64_t opset = wm_graph_opset(c->g, "");
    for (size_t i = 0; i < n && !s; i++) {
        wm_onnx_node *nd = v[i];
        if (!foldable(nd) || nd->n_output != 1 || !wm_opt_out(nd, 0) || nd->n_input > 8 || feeds_graph_output(c->g, nd))
            continue;
        wm_ct in[8], out;
        size_t k = 0;
        int ok = nd->n_input > 0;
        memset(in, 0, sizeof in);
        for (; ok && k < nd->n_input; k++) {
            const char *nm = wm_opt_in(nd, k);
            if (!nm) continue; /* absent optional input: dtype 0 */
            const wm_onnx_tensor *t = wm_graph_constant(c->g, nm);
            ok = t && wm_ct_from_tensor(t, c->fold_cap, &in[k], NULL) == WM_OK;
        }
        wm_error e = {0};
        if (ok && wm_fold_eval(nd, opset, in, nd->n_input, &out, 1, c->fold_cap, &e) == WM_OK) {
            s = node_to_const(c, nd, &out);
            wm_ct_free(&out);
        }
        for (size_t j = 0; j < 8; j++) wm_ct_free(&in[j]);
    }
    free(v);
    return s;
}

/* The symbolic value key of a small int tensor whose values are all known (constants or symbols). */
static int value_key(const wm_tinfo *t, char *buf, size_t n) {
    if (!t || (t->dtype != WM_DT_INT64 && t->dtype != WM_DT_INT32) || t->nval < 0 || t->rank > 1) return 0;
    if (t->rank == 1 && (t->dim[0].k != WM_SD_CONST || t->dim[0].v != t->nval)) return 0;
    size_t k = (size_t)snprintf(buf, n, "%d|%d|", (int)t->dtype, (int)t->rank);
    for (int i = 0; i < t->nval; i++) {
        if (!t->val[i].k) return 0;
        if (k < n) k += (size_t)snprintf(buf + k, n - k, "%c%lld,", t->val[i].k == WM_SD_CONST ? 'c' : 's',
                                         (long long)t->val[i].v);
    }
    return k < n;
}

typedef struct vslot {
    char *key;
    const char *name;
} vslot;

wm_status wm_pass_shape_values(wm_pass_ctx *c) {
    size_t n;
    wm_onnx_node **v = snapshot(c->g, &n, c->err);
    size_t cap = 64;
    while (cap < 2 * n + 2) cap *= 2;
    vslot *tab = v ? calloc(cap, sizeof *tab) : NULL;
    if (!tab) {
        free(v);
        return wm_err(c->err, WM_ERR_NOMEM, "out of memory");
    }
    wm_status s = WM_OK;
    for (size_t i = 0; i < n && !s; i++) {
        wm_onnx_node *nd = v[i];
        const char *out = wm_opt_out(nd, 0);
        if (!out || nd->n_output != 1 || wm_opt_is(nd, "Constant") || feeds_graph_output(c->g, nd)) continue;
        const wm_tinfo *t = wm_shapes_get(c->sh, out);
        uint64_t numel;
        if (t && (t->dtype == WM_DT_INT64 || t->dtype == WM_DT_INT32) && wm_shapes_values_known(c->sh, out) &&
            wm_shapes_static(c->sh, out, &numel) && numel == (uint64_t)t->nval && t->rank <= 1) {
            wm_ct val; /* all values static: a constant */
            int64_t d = t->nval;
            if ((s = wm_ct_alloc(&val, t->dtype, &d, t->rank, c->err))) break;
            for (int k = 0; k < t->nval; k++) wm_ct_seti(&val, (uint64_t)k, t->val[k].v);
            s = node_to_const(c, nd, &val);
            wm_ct_free(&val);
            continue;
        }
        /* symbolic values equal to an earlier value: computed once (value numbering over shapes) */
        char key[512];
        if (!value_key(t, key, sizeof key)) continue;
        uint64_t h = 1469598103934665603ull;
        for (const char *q = key; *q; q++) h = (h ^ (unsigned char)*q) * 1099511628211ull;
        size_t slot = (size_t)h & (cap - 1);
        while (tab[slot].key && strcmp(tab[slot].key, key)) slot = (slot + 1) & (cap - 1);
        if (!tab[slot].key) {
            if (!(tab[slot].key = strdup(key))) s = wm_err(c->err, WM_ERR_NOMEM, "out of memory");
            tab[slot].name = out;
            continue;
        }
        if (!wm_opt_nuses(c->g, out)) continue;
        s = wm_graph_replace_uses(c->g, out, tab[slot].name, c->err);
        c->fired++;
    }
    for (size_t i = 0; i < cap; i++) free(tab[i].key);
    free(tab);
    free(v);
    return s;
}

/* ---------------------------------------------------------------- identities */

/* Makes uses of n's output 0 read from src instead; the node dies. 0 when not possible. */
static int bypass(wm_pass_ctx *c, wm_onnx_node *n, const char *src, wm_status *s) {
    const char *out = wm_opt_out(n, 0);
    if (!out || !src) return 0;
    for (size_t i = 1; i < n->n_output; i++)
        if (wm_opt_out(n, i) && wm_opt_nuses(c->g, n->output[i])) return 0;
    if (wm_opt_is_graph_output(c->g, out)) { /* the producer of src takes the output's name instead */
        const wm_value *v = wm_graph_find_value(c->g, src);
        wm_onnx_node *p = v ? v->producer : NULL;
        if (!p || v->output || v->input || v->init || v->n_uses != 1 || v->n_producers != 1) return 0;
        for (size_t k = 0; k < p->n_output; k++)
            if (p->output[k] && !strcmp(p->output[k], src)) p->output[k] = n->output[0];
        n->output[0] = (char *)"";
        if ((*s = wm_graph_remove_node(c->g, n, c->err)) || (*s = wm_graph_reindex(c->g, c->err))) return 0;
        c->fired++;
        return 1;
    }
    if ((*s = wm_graph_replace_uses(c->g, out, src, c->err))) return 0;
    c->fired++;
    return 1;
}

/* Width rank for lossless casts: a Cast A->B->C equals A->C when B holds every value of A. */
static int holds_all(int32_t a, int32_t b) {
    if (a == b) return 1;
    switch (a) {
    case WM_DT_BOOL: return b != WM_DT_UNDEFINED;
    case WM_DT_INT8: return b == WM_DT_INT16 || b == WM_DT_INT32 || b == WM_DT_INT64 || b == WM_DT_FLOAT ||
                            b == WM_DT_DOUBLE || b == WM_DT_FLOAT16;
    case WM_DT_UINT8: return b == WM_DT_INT16 || b == WM_DT_UINT16 || b == WM_DT_INT32 || b == WM_DT_UINT32 ||
                             b == WM_DT_INT64 || b == WM_DT_UINT64 || b == WM_DT_FLOAT || b == WM_DT_DOUBLE ||
                             b == WM_DT_FLOAT16;
    case WM_DT_INT16: return b == WM_DT_INT32 || b == WM_DT_INT64 || b == WM_DT_FLOAT || b == WM_DT_DOUBLE;
    case WM_DT_INT32: return b == WM_DT_INT64 || b == WM_DT_DOUBLE;
    case WM_DT_FLOAT16: return b == WM_DT_FLOAT || b == WM_DT_DOUBLE;
    case WM_DT_BFLOAT16: return b == WM_DT_FLOAT || b == WM_DT_DOUBLE;
    case WM_DT_FLOAT: return b == WM_DT_DOUBLE;
    default: return 0;
    }
}

static int perm_of(const wm_onnx_node *n, int rank, int64_t *p) {
    size_t k;
    const int64_t *v = wm_opt_attr_ints(n, "perm", &k);
    if (rank <= 0 || rank > WM_SH_MAXR || (v && (int)k != rank)) return 0;
    for (int i = 0; i < rank; i++) p[i] = v ? v[i] : rank - 1 - i;
    return 1;
}

/* One identity rewrite of node n; 1 when it changed something. */
static int identity_one(wm_pass_ctx *c, wm_onnx_node *n, wm_status *s) {
    wm_graph *g = c->g;
    const char *x = wm_opt_in(n, 0), *y = wm_opt_out(n, 0);
    if (!x || !y) return 0;
    int32_t dx = wm_shapes_dtype(c->sh, x);
    if (wm_opt_is(n, "Identity")) return bypass(c, n, x, s);
    if (wm_opt_is(n, "Dropout")) {
        if (wm_opt_in(n, 2) && !wm_opt_const_is(g, n->input[2], 0, 0)) return 0;
        return bypass(c, n, x, s);
    }
    if (wm_opt_is(n, "Cast")) {
        int32_t to = (int32_t)wm_opt_attr_i(n, "to", 0);
        if (dx && dx == to) return bypass(c, n, x, s);
        wm_onnx_node *p = wm_opt_src(g, n, 0, "Cast");
        const char *px = p ? wm_opt_in(p, 0) : NULL;
        int32_t d0 = px ? wm_shapes_dtype(c->sh, px) : 0, mid = p ? (int32_t)wm_opt_attr_i(p, "to", 0) : 0;
        if (!p || !d0 || !holds_all(d0, mid)) return 0;
        if (d0 == to) return bypass(c, n, px, s);
        *s = wm_graph_set_input(g, n, 0, px, c->err); /* Cast(Cast(x)) -> Cast(x) */
        c->fired++;
        return 1;
    }
    if (wm_opt_is(n, "Reshape") || wm_opt_is(n, "Expand") || wm_opt_is(n, "Squeeze") || wm_opt_is(n, "Unsqueeze") ||
        wm_opt_is(n, "Flatten") || wm_opt_is(n, "Slice") || wm_opt_is(n, "Concat")) {
        if (wm_opt_is(n, "Concat") && n->n_input != 1) return 0;
        if (wm_opt_is(n, "Slice") || wm_opt_is(n, "Flatten") ? !wm_shapes_same(c->sh, x, y) || !wm_shapes_static(c->sh, x, NULL)
                                                             : !wm_shapes_same(c->sh, x, y))
            goto chains;
        return bypass(c, n, x, s);
    }
    if (wm_opt_is(n, "Transpose")) {
        int r = wm_shapes_rank(c->sh, x);
        int64_t p[WM_SH_MAXR], q[WM_SH_MAXR];
        if (!perm_of(n, r, p)) return 0;
        int ident = 1;
        for (int i = 0; i < r; i++) ident &= p[i] == i;
        if (ident) return bypass(c, n, x, s);
        wm_onnx_node *t = wm_opt_src(g, n, 0, "Transpose");
        if (!t || !perm_of(t, r, q)) return 0;
        int64_t comb[WM_SH_MAXR];
        ident = 1;
        for (int i = 0; i < r; i++) {
            comb[i] = q[p[i]];
            ident &= comb[i] == i;
        }
        if (ident) return bypass(c, n, wm_opt_in(t, 0), s);
        if ((*s = wm_graph_set_attr_ints(g, n, "perm", comb, (size_t)r, c->err))) return 0;
        *s = wm_graph_set_input(g, n, 0, t->input[0], c->err);
        c->fired++;
        return 1;
    }
    if ((wm_opt_is(n, "Mul") || wm_opt_is(n, "Div") || wm_opt_is(n, "Add") || wm_opt_is(n, "Sub")) &&
        wm_shapes_same(c->sh, x, y) && dx && dx == wm_shapes_dtype(c->sh, y)) {
        double unit = wm_opt_is(n, "Mul") || wm_opt_is(n, "Div") ? 1 : 0;
        if (wm_opt_in(n, 1) && wm_opt_const_is(g, n->input[1], unit, 0)) return bypass(c, n, x, s);
        if ((wm_opt_is(n, "Mul") || wm_opt_is(n, "Add")) && wm_opt_in(n, 1) && wm_opt_const_is(g, x, unit, 0) &&
            wm_shapes_same(c->sh, n->input[1], y))
            return bypass(c, n, n->input[1], s);
    }
    return 0;
chains:
    if (wm_opt_is(n, "Reshape")) { /* Reshape(Reshape(x)) -> Reshape(x) when the outer shape copies no dim */
        wm_onnx_node *r = wm_opt_src(g, n, 0, "Reshape");
        wm_ct shp;
        if (!r || !wm_opt_const(g, wm_opt_in(n, 1), 64, &shp)) return 0;
        int zero = 0;
        for (uint64_t i = 0; i < shp.n; i++) zero |= wm_ct_geti(&shp, i) == 0;
        wm_ct_free(&shp);
        if (zero && !wm_opt_attr_i(n, "allowzero", 0)) return 0;
        *s = wm_graph_set_input(g, n, 0, r->input[0], c->err);
        c->fired++;
        return 1;
    }
    return 0;
}

wm_status wm_pass_identity(wm_pass_ctx *c) {
    size_t n;
    wm_onnx_node **v = snapshot(c->g, &n, c->err);
    if (!v) return WM_ERR_NOMEM;
    wm_status s = WM_OK;
    for (size_t i = 0; i < n && !s; i++) identity_one(c, v[i], &s);
    free(v);
    return s;
}

/* ---------------------------------------------------------------- dedup */

typedef struct init_key {
    wm_onnx_tensor *t;
    wm_bytes b;
    uint64_t h;
} init_key;

/* A candidate key, not a proof (equal keys are compared in full): the first 256 bytes and 32 bytes spread over
 * the rest, so a large mapped weight costs at most 33 pages of resident memory instead of all of them. */
static uint64_t sample_hash(wm_bytes b) {
    uint64_t h = 1469598103934665603ull ^ b.n;
    size_t head = b.n < 256 ? b.n : 256;
    for (size_t i = 0; i < head; i++) h = (h ^ b.p[i]) * 1099511628211ull;
    if (b.n > head)
        for (size_t k = 1; k <= 32; k++) h = (h ^ b.p[head + (b.n - head - 1) * k / 32]) * 1099511628211ull;
    return h;
}

static int cmp_key(const void *a, const void *b) {
    const init_key *x = a, *y = b;
    if (x->t->data_type != y->t->data_type) return x->t->data_type < y->t->data_type ? -1 : 1;
    if (x->b.n != y->b.n) return x->b.n < y->b.n ? -1 : 1;
    if (x->h != y->h) return x->h < y->h ? -1 : 1;
    return 0;
}

static int same_tensor(const init_key *a, const init_key *b) {
    if (cmp_key(a, b) || a->t->n_dims != b->t->n_dims) return 0;
    for (size_t i = 0; i < a->t->n_dims; i++)
        if (a->t->dims[i] != b->t->dims[i]) return 0;
    return memcmp(a->b.p, b->b.p, a->b.n) == 0;
}

wm_status wm_pass_dedup(wm_pass_ctx *c) {
    wm_onnx_graph *p = wm_graph_proto(c->g);
    init_key *k = malloc((p->n_initializer ? p->n_initializer : 1) * sizeof *k);
    if (!k) return wm_err(c->err, WM_ERR_NOMEM, "out of memory");
    size_t m = 0;
    for (size_t i = 0; i < p->n_initializer; i++) {
        wm_onnx_tensor *t = p->initializer[i];
        wm_value *v = t->name ? wm_graph_find_value(c->g, t->name) : NULL;
        wm_bytes b = wm_onnx_tensor_bytes(t);
        if (!v || v->input || v->output || !b.p || t->data_type == WM_DT_STRING) continue;
        k[m++] = (init_key){t, b, sample_hash(b)};
        wm_opt_release(wm_graph_model(c->g), b.p, b.n); /* mapped weights: no lasting resident pages */
    }
    qsort(k, m, sizeof *k, cmp_key);
    wm_status s = WM_OK;
    for (size_t i = 0; i < m && !s;) {
        size_t j = i + 1;
        while (j < m && !cmp_key(&k[i], &k[j])) j++;
        for (size_t a = i; a < j && !s; a++) {
            if (!k[a].t) continue;
            for (size_t b = a + 1; b < j && !s; b++) {
                if (!k[b].t || !same_tensor(&k[a], &k[b])) continue;
                if (wm_opt_nuses(c->g, k[b].t->name)) {
                    s = wm_graph_replace_uses(c->g, k[b].t->name, k[a].t->name, c->err);
                    c->fired++;
                }
                k[b].t = NULL;
            }
        }
        i = j;
    }
    free(k);
    return s;
}

/* ---------------------------------------------------------------- common subexpressions */

static int never_merge(const wm_onnx_node *n) {
    const char *op = n->op_type ? n->op_type : "";
    return !strncmp(op, "Random", 6) || !strcmp(op, "Multinomial") || !strcmp(op, "If") || !strcmp(op, "Loop") ||
           !strcmp(op, "Scan") || !strcmp(op, "Constant") || !n->n_output;
}

/* Two nodes compute the same values: op, domain, inputs and attributes all equal. */
static int same_node(const wm_onnx_node *a, const wm_onnx_node *b) {
    if (strcmp(a->op_type, b->op_type) || a->n_input != b->n_input || a->n_output != b->n_output ||
        a->n_attribute != b->n_attribute)
        return 0;
    if (wm_opt_default_domain(a) != wm_opt_default_domain(b)) return 0;
    if (!wm_opt_default_domain(a) && strcmp(a->domain, b->domain)) return 0;
    for (size_t i = 0; i < a->n_input; i++)
        if (strcmp(a->input[i] ? a->input[i] : "", b->input[i] ? b->input[i] : "")) return 0;
    for (size_t i = 0; i < a->n_output; i++)
        if (!wm_opt_out(a, i) != !wm_opt_out(b, i)) return 0;
    for (size_t i = 0; i < a->n_attribute; i++) {
        const wm_onnx_attr *x = a->attribute[i], *y = wm_graph_node_attr(b, x->name ? x->name : "");
        if (!y || x->g || x->n_graphs) return 0;
        size_t nx, ny;
        uint8_t *ex = wm_pb_encode_alloc(&wm_onnx_attr_desc, x, &nx), *ey = wm_pb_encode_alloc(&wm_onnx_attr_desc, y, &ny);
        int eq = ex && ey && nx == ny && memcmp(ex, ey, nx) == 0;
        free(ex);
        free(ey);
        if (!eq) return 0;
    }
    return 1;
}

static uint64_t node_hash(const wm_onnx_node *n) {
    uint64_t h = 1469598103934665603ull;
    for (const char *s = n->op_type; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    for (size_t i = 0; i < n->n_input; i++) {
        h = (h ^ 0xff) * 1099511628211ull;
        for (const char *s = n->input[i] ? n->input[i] : ""; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    }
    return h;
}

wm_status wm_pass_cse(wm_pass_ctx *c) {
    size_t n;
    wm_onnx_node **v = snapshot(c->g, &n, c->err);
    size_t cap = 16;
    while (cap < 2 * n + 2) cap *= 2;
    wm_onnx_node **tab = v ? calloc(cap, sizeof *tab) : NULL;
    if (!tab) {
        free(v);
        return wm_err(c->err, WM_ERR_NOMEM, "out of memory");
    }
    wm_status s = WM_OK;
    for (size_t i = 0; i < n && !s; i++) {
        wm_onnx_node *nd = v[i];
        if (!nd->op_type || never_merge(nd)) continue;
        size_t slot = (size_t)node_hash(nd) & (cap - 1);
        wm_onnx_node *hit = NULL;
        for (; tab[slot]; slot = (slot + 1) & (cap - 1))
            if (same_node(tab[slot], nd)) {
                hit = tab[slot];
                break;
            }
        if (!hit) {
            tab[slot] = nd;
            continue;
        }
        if (feeds_graph_output(c->g, nd)) continue;
        for (size_t k = 0; k < nd->n_output && !s; k++)
            if (wm_opt_out(nd, k)) s = wm_graph_replace_uses(c->g, nd->output[k], hit->output[k], c->err);
        c->fired++;
    }
    free(tab);
    free(v);
    return s;
}

/* ---------------------------------------------------------------- dead nodes */

wm_status wm_pass_dce(wm_pass_ctx *c) {
    wm_graph *g = c->g;
    wm_status s = wm_graph_topo_sort(g, c->err);
    if (s) return s;
    size_t n;
    wm_onnx_node **v = snapshot(g, &n, c->err);
    if (!v) return WM_ERR_NOMEM;
    wm_ptrset live = {0};
    for (size_t i = n; i-- > 0 && !s;) {
        wm_onnx_node *nd = v[i];
        int keep = 0;
        for (size_t k = 0; k < nd->n_output && !keep; k++) {
            const wm_value *val = wm_opt_out(nd, k) ? wm_graph_find_value(g, nd->output[k]) : NULL;
            if (!val) continue;
            keep = val->output != NULL;
            for (size_t u = 0; u < val->n_uses && !keep; u++) keep = wm_ptrset_has(&live, val->uses[u].node);
        }
        if (keep) {
            if (wm_ptrset_add(&live, nd) < 0) s = wm_err(c->err, WM_ERR_NOMEM, "out of memory");
            continue;
        }
        if ((s = wm_graph_remove_node(g, nd, c->err))) break;
        c->fired++;
    }
    wm_ptrset_free(&live);
    free(v);
    if (!s) c->fired += wm_graph_remove_unused_initializers(g);
    return s;
}

wm_status wm_opt_prune_value_info(wm_graph *g, wm_error *err) {
    wm_onnx_graph *p = wm_graph_proto(g);
    size_t k = 0;
    for (size_t i = 0; i < p->n_value_info; i++) {
        const char *nm = p->value_info[i]->name;
        const wm_value *v = nm ? wm_graph_find_value(g, nm) : NULL;
        if (v && (v->producer || v->input || v->init)) p->value_info[k++] = p->value_info[i];
    }
    if (k == p->n_value_info) return WM_OK;
    p->n_value_info = k;
    return wm_graph_reindex(g, err);
}
