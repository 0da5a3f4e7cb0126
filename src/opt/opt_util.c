/* opt_util.c - decoded constants, halves, node queries and edits shared by the passes. */
#include "opt/opt_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/error.h"
#include "core/json.h"
#include "onnx/dtype.h"
#include "onnx/onnx_model.h"

/* ---------------------------------------------------------------- wm_ct */

size_t wm_ct_elem_size(int32_t dt) {
    switch (dt) {
    case WM_DT_BOOL:
    case WM_DT_UINT8:
    case WM_DT_INT8: return 1;
    case WM_DT_UINT16:
    case WM_DT_INT16:
    case WM_DT_FLOAT16:
    case WM_DT_BFLOAT16: return 2;
    case WM_DT_FLOAT:
    case WM_DT_INT32:
    case WM_DT_UINT32: return 4;
    case WM_DT_DOUBLE:
    case WM_DT_INT64:
    case WM_DT_UINT64: return 8;
    default: return 0;
    }
}

void wm_ct_free(wm_ct *c) {
    if (!c) return;
    free(c->data);
    c->data = NULL;
    c->n = 0;
}

/* Allocates c's storage (zeroed); caller frees with wm_ct_free. */
wm_status wm_ct_alloc(wm_ct *c, int32_t dtype, const int64_t *dims, int32_t rank, wm_error *err) {
    memset(c, 0, sizeof *c);
    size_t es = wm_ct_elem_size(dtype);
    if (!es || rank < 0 || rank > WM_CT_MAX_RANK)
        return wm_err(err, WM_ERR_UNSUPPORTED, "constant of %s rank %d cannot be folded", wm_dtype_name(dtype),
                      (int)rank);
    uint64_t n = 1;
    for (int32_t i = 0; i < rank; i++) {
        if (dims[i] < 0 || !wm_mul_u64(n, (uint64_t)dims[i], &n))
            return wm_err(err, WM_ERR_UNSUPPORTED, "constant with bad dim %lld", (long long)dims[i]);
        c->dims[i] = dims[i];
    }
    if (n > (SIZE_MAX / 2) / es) return wm_err(err, WM_ERR_NOMEM, "constant too large");
    c->dtype = dtype;
    c->rank = rank;
    c->n = n;
    if (n && !(c->data = calloc((size_t)n, es))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    return WM_OK;
}

/* Copies t's elements into a fresh wm_ct (caller frees). */
wm_status wm_ct_from_tensor(const wm_onnx_tensor *t, uint64_t max_bytes, wm_ct *out, wm_error *err) {
    memset(out, 0, sizeof *out);
    const char *nm = t->name ? t->name : "";
    if (t->n_dims > WM_CT_MAX_RANK)
        return wm_err(err, WM_ERR_UNSUPPORTED, "tensor '%s': rank %zu", nm, t->n_dims);
    size_t es = wm_ct_elem_size(t->data_type);
    if (!es) return wm_err(err, WM_ERR_UNSUPPORTED, "tensor '%s': dtype %s", nm, wm_dtype_name(t->data_type));
    uint64_t n = 1;
    for (size_t i = 0; i < t->n_dims; i++)
        if (t->dims[i] < 0 || !wm_mul_u64(n, (uint64_t)t->dims[i], &n))
            return wm_err(err, WM_ERR_INPUT, "tensor '%s': bad dims", nm);
    if (max_bytes && n * es > max_bytes)
        return wm_err(err, WM_ERR_UNSUPPORTED, "tensor '%s': larger than the folding cap", nm);
    wm_status s = wm_ct_alloc(out, t->data_type, t->dims, (int32_t)t->n_dims, err);
    if (s) return s;
    if (!n) return WM_OK;
    wm_bytes b = wm_onnx_tensor_bytes(t);
    if (b.p && b.n == n * es) {
        memcpy(out->data, b.p, (size_t)(n * es));
        return WM_OK;
    }
    /* typed fields whose layout differs from raw: int32_data for small types, int64 for uint32 */
    if (t->n_int32_data == n && es <= 4) {
        for (uint64_t i = 0; i < n; i++) {
            int32_t v = t->int32_data[i];
            if (es == 1) ((uint8_t *)out->data)[i] = (uint8_t)v;
            else if (es == 2) ((uint16_t *)out->data)[i] = (uint16_t)v;
            else ((int32_t *)out->data)[i] = v;
        }
        return WM_OK;
    }
    if (t->n_uint64_data == n && t->data_type == WM_DT_UINT32) {
        for (uint64_t i = 0; i < n; i++) ((uint32_t *)out->data)[i] = (uint32_t)t->uint64_data[i];
        return WM_OK;
    }
    wm_ct_free(out);
    return wm_err(err, WM_ERR_UNSUPPORTED, "tensor '%s': no readable data", nm);
}

double wm_ct_getf(const wm_ct *c, uint64_t i) {
    const void *p = c->data;
    switch (c->dtype) {
    case WM_DT_FLOAT: return ((const float *)p)[i];
    case WM_DT_DOUBLE: return ((const double *)p)[i];
    case WM_DT_FLOAT16: return wm_f16_to_f32(((const uint16_t *)p)[i]);
    case WM_DT_BFLOAT16: return wm_bf16_to_f32(((const uint16_t *)p)[i]);
    case WM_DT_BOOL:
    case WM_DT_UINT8: return ((const uint8_t *)p)[i];
    case WM_DT_INT8: return ((const int8_t *)p)[i];
    case WM_DT_UINT16: return ((const uint16_t *)p)[i];
    case WM_DT_INT16: return ((const int16_t *)p)[i];
    case WM_DT_INT32: return ((const int32_t *)p)[i];
    case WM_DT_UINT32: return ((const uint32_t *)p)[i];
    case WM_DT_INT64: return (double)((const int64_t *)p)[i];
    case WM_DT_UINT64: return (double)((const uint64_t *)p)[i];
    default: return 0;
    }
}

int64_t wm_ct_geti(const wm_ct *c, uint64_t i) {
    const void *p = c->data;
    switch (c->dtype) {
    case WM_DT_INT64: return ((const int64_t *)p)[i];
    case WM_DT_UINT64: return (int64_t)((const uint64_t *)p)[i];
    case WM_DT_INT32: return ((const int32_t *)p)[i];
    case WM_DT_UINT32: return ((const uint32_t *)p)[i];
    case WM_DT_BOOL:
    case WM_DT_UINT8: return ((const uint8_t *)p)[i];
    case WM_DT_INT8: return ((const int8_t *)p)[i];
    case WM_DT_UINT16: return ((const uint16_t *)p)[i];
    case WM_DT_INT16: return ((const int16_t *)p)[i];
    default: {
        double d = wm_ct_getf(c, i);
        if (!(d == d)) return 0;
        if (d >= 9.2e18) return INT64_MAX;
        if (d <= -9.2e18) return INT64_MIN;
        return (int64_t)d;
    }
    }
}

void wm_ct_set(wm_ct *c, uint64_t i, double v) {
    void *p = c->data;
    switch (c->dtype) {
    case WM_DT_FLOAT: ((float *)p)[i] = (float)v; return;
    case WM_DT_DOUBLE: ((double *)p)[i] = v; return;
    case WM_DT_FLOAT16: ((uint16_t *)p)[i] = wm_f32_to_f16((float)v); return;
    case WM_DT_BFLOAT16: ((uint16_t *)p)[i] = wm_f32_to_bf16((float)v); return;
    case WM_DT_BOOL: ((uint8_t *)p)[i] = v != 0; return;
    default: {
        int64_t k;
        if (!(v == v)) k = 0;
        else if (v >= 9.2e18) k = INT64_MAX;
        else if (v <= -9.2e18) k = INT64_MIN;
        else k = (int64_t)v;
        wm_ct_seti(c, i, k);
    }
    }
}

void wm_ct_seti(wm_ct *c, uint64_t i, int64_t v) {
    void *p = c->data;
    switch (c->dtype) {
    case WM_DT_INT64: ((int64_t *)p)[i] = v; return;
    case WM_DT_UINT64: ((uint64_t *)p)[i] = (uint64_t)v; return;
    case WM_DT_INT32: ((int32_t *)p)[i] = (int32_t)v; return;
    case WM_DT_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; return;
    case WM_DT_BOOL: ((uint8_t *)p)[i] = v != 0; return;
    case WM_DT_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; return;
    case WM_DT_INT8: ((int8_t *)p)[i] = (int8_t)v; return;
    case WM_DT_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; return;
    case WM_DT_INT16: ((int16_t *)p)[i] = (int16_t)v; return;
    default: wm_ct_set(c, i, (double)v);
    }
}

/* ---------------------------------------------------------------- new initializers */

wm_status wm_opt_add_ct(wm_graph *g, const char *name, const wm_ct *c, wm_error *err) {
    size_t nb = (size_t)c->n * wm_ct_elem_size(c->dtype);
    void *copy = NULL;
    if (nb) {
        copy = wm_arena_alloc(&wm_graph_model(g)->arena, nb);
        if (!copy) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        memcpy(copy, c->data, nb);
    }
    wm_bytes raw = {copy ? copy : (const uint8_t *)"", nb};
    return wm_graph_add_initializer(g, name, c->dtype, c->dims, (size_t)c->rank, raw, NULL, err);
}

const char *wm_opt_name(wm_graph *g, const char *prefix) { return wm_graph_unique_name(g, prefix); }

const char *wm_opt_name_exact(wm_graph *g, const char *wanted) {
    if (wanted && *wanted && !wm_graph_find_value(g, wanted))
        return wm_arena_strdup(&wm_graph_model(g)->arena, wanted);
    return wm_graph_unique_name(g, wanted);
}

const char *wm_opt_const_raw(wm_graph *g, const char *prefix, int32_t dtype, const int64_t *dims, size_t rank,
                             const void *bytes, size_t nbytes, wm_error *err) {
    const char *name = wm_opt_name(g, prefix);
    void *copy = nbytes ? wm_arena_alloc(&wm_graph_model(g)->arena, nbytes) : NULL;
    if (!name || (nbytes && !copy)) {
        wm_err(err, WM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (nbytes) memcpy(copy, bytes, nbytes);
    wm_bytes raw = {copy ? copy : (const uint8_t *)"", nbytes};
    if (wm_graph_add_initializer(g, name, dtype, dims, rank, raw, NULL, err)) return NULL;
    return name;
}

const char *wm_opt_const_f32(wm_graph *g, const char *prefix, const float *v, size_t n, int scalar, wm_error *err) {
    int64_t d = (int64_t)n;
    return wm_opt_const_raw(g, prefix, WM_DT_FLOAT, &d, scalar ? 0 : 1, v, n * 4, err);
}

const char *wm_opt_const_i64(wm_graph *g, const char *prefix, const int64_t *v, size_t n, int scalar,
                             wm_error *err) {
    int64_t d = (int64_t)n;
    return wm_opt_const_raw(g, prefix, WM_DT_INT64, &d, scalar ? 0 : 1, v, n * 8, err);
}

/* ---------------------------------------------------------------- node queries */

static int dflt_domain(const char *d) { return !d || !*d || strcmp(d, "ai.onnx") == 0; }

int wm_opt_default_domain(const wm_onnx_node *n) { return dflt_domain(n->domain); }

int wm_opt_is(const wm_onnx_node *n, const char *op) {
    return n && n->op_type && strcmp(n->op_type, op) == 0 && dflt_domain(n->domain);
}

int wm_opt_is_ms(const wm_onnx_node *n, const char *op) {
    return n && n->op_type && strcmp(n->op_type, op) == 0 && n->domain && strcmp(n->domain, "com.microsoft") == 0;
}

const char *wm_opt_in(const wm_onnx_node *n, size_t i) {
    return n && i < n->n_input && n->input[i] && n->input[i][0] ? n->input[i] : NULL;
}

const char *wm_opt_out(const wm_onnx_node *n, size_t i) {
    return n && i < n->n_output && n->output[i] && n->output[i][0] ? n->output[i] : NULL;
}

wm_onnx_node *wm_opt_src(const wm_graph *g, const wm_onnx_node *n, size_t i, const char *op) {
    const char *nm = wm_opt_in(n, i);
    wm_onnx_node *p = nm ? wm_graph_producer(g, nm) : NULL;
    return p && wm_opt_is(p, op) ? p : NULL;
}

int wm_opt_is_graph_output(const wm_graph *g, const char *name) {
    const wm_value *v = wm_graph_find_value(g, name);
    return v && v->output;
}

size_t wm_opt_nuses(const wm_graph *g, const char *name) {
    const wm_value *v = wm_graph_find_value(g, name);
    return v ? v->n_uses + (v->output != NULL) : 0;
}

wm_onnx_node *wm_opt_sole_consumer(const wm_graph *g, const char *name) {
    const wm_value *v = wm_graph_find_value(g, name);
    if (!v || v->output || v->n_uses != 1 || v->uses[0].slot < 0) return NULL;
    return v->uses[0].node;
}

int64_t wm_opt_attr_i(const wm_onnx_node *n, const char *name, int64_t dflt) {
    const wm_onnx_attr *a = wm_graph_node_attr(n, name);
    return a && (a->type == WM_ATTR_INT || a->type == 0) ? a->i : dflt;
}

float wm_opt_attr_f(const wm_onnx_node *n, const char *name, float dflt) {
    const wm_onnx_attr *a = wm_graph_node_attr(n, name);
    return a && (a->type == WM_ATTR_FLOAT || a->type == 0) ? a->f : dflt;
}

const int64_t *wm_opt_attr_ints(const wm_onnx_node *n, const char *name, size_t *n_out) {
    const wm_onnx_attr *a = wm_graph_node_attr(n, name);
    if (!a || a->type != WM_ATTR_INTS) {
        *n_out = 0;
        return NULL;
    }
    *n_out = a->n_ints;
    return a->ints ? a->ints : (const int64_t *)"";
}

int wm_opt_const(const wm_graph *g, const char *name, uint64_t max_elems, wm_ct *out) {
    memset(out, 0, sizeof *out);
    const wm_onnx_tensor *t = name ? wm_graph_constant(g, name) : NULL;
    if (!t || t->n_dims > WM_CT_MAX_RANK) return 0;
    uint64_t n = 1;
    for (size_t i = 0; i < t->n_dims; i++)
        if (t->dims[i] < 0 || !wm_mul_u64(n, (uint64_t)t->dims[i], &n)) return 0;
    if (n > max_elems) return 0;
    return wm_ct_from_tensor(t, 0, out, NULL) == WM_OK;
}

int wm_opt_const_scalar(const wm_graph *g, const char *name, double *v) {
    wm_ct c;
    if (!wm_opt_const(g, name, 1 << 16, &c)) return 0;
    int ok = c.n >= 1;
    if (ok) *v = wm_ct_getf(&c, 0);
    for (uint64_t i = 1; ok && i < c.n; i++) ok = wm_ct_getf(&c, i) == *v;
    wm_ct_free(&c);
    return ok;
}

int wm_opt_const_is(const wm_graph *g, const char *name, double v, double tol) {
    double x;
    return wm_opt_const_scalar(g, name, &x) && fabs(x - v) <= tol;
}

/* ---------------------------------------------------------------- edits */

wm_onnx_node *wm_opt_add(wm_graph *g, const char *op, const char *dom, const char *prefix,
                         const char *const *in, size_t n_in, const char *const *out, size_t n_out, wm_error *err) {
    char buf[160];
    snprintf(buf, sizeof buf, "%s", prefix ? prefix : op);
    const char *name = wm_graph_unique_name(g, buf);
    if (!name) {
        wm_err(err, WM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return wm_graph_add_node(g, op, dom, name, in, n_in, out, n_out, err);
}

wm_onnx_node *wm_opt_replace(wm_graph *g, wm_onnx_node *old, const char *op, const char *dom,
                             const char *const *in, size_t n_in, const char *const *out, size_t n_out,
                             wm_error *err) {
    if (wm_graph_remove_node(g, old, err)) return NULL;
    return wm_opt_add(g, op, dom, op, in, n_in, out, n_out, err);
}

wm_onnx_node *wm_opt_emit_node(wm_graph *g, const char *op, const char *dom, const char *const *in, size_t n_in,
                               const char **out, wm_error *err) {
    const char *o = wm_opt_name(g, op);
    if (!o) {
        wm_err(err, WM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    wm_onnx_node *n = wm_opt_add(g, op, dom, op, in, n_in, &o, 1, err);
    if (n && out) *out = wm_opt_out(n, 0);
    return n;
}

const char *wm_opt_emit(wm_graph *g, const char *op, const char *dom, const char *const *in, size_t n_in,
                        wm_error *err) {
    const char *o = NULL;
    return wm_opt_emit_node(g, op, dom, in, n_in, &o, err) ? o : NULL;
}

wm_onnx_node **wm_opt_snapshot(wm_graph *g, size_t *n, wm_error *err) {
    wm_onnx_graph *p = wm_graph_proto(g);
    *n = p->n_node;
    wm_onnx_node **v = malloc((p->n_node ? p->n_node : 1) * sizeof *v);
    if (!v) wm_err(err, WM_ERR_NOMEM, "out of memory");
    else if (p->n_node) memcpy(v, p->node, p->n_node * sizeof *v);
    return v;
}

wm_status wm_opt_need_opset(wm_graph *g, const char *domain, int64_t v, wm_error *err) {
    wm_onnx_model *m = wm_graph_model(g);
    wm_onnx_modelproto *mp = m->proto;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        wm_onnx_opset *o = mp->opset_import[i];
        int same = dflt_domain(domain) ? dflt_domain(o->domain) : (o->domain && strcmp(o->domain, domain) == 0);
        if (!same) continue;
        if (o->version < v) o->version = v;
        return WM_OK;
    }
    wm_onnx_opset *o = wm_pb_new(&m->arena, &wm_onnx_opset_desc), **slot = NULL;
    if (o && (o->domain = wm_arena_strdup(&m->arena, domain ? domain : "")))
        slot = wm_vec_push(&m->arena, &mp->opset_import, &mp->n_opset_import, sizeof *slot);
    if (!slot) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    o->version = v;
    wm_pb_set_has(&wm_onnx_opset_desc, o, 2);
    *slot = o;
    return WM_OK;
}

/* ---------------------------------------------------------------- histogram */

typedef struct op_count {
    const char *op;
    size_t n;
} op_count;

static int cmp_count(const void *a, const void *b) {
    const op_count *x = a, *y = b;
    if (x->n != y->n) return x->n < y->n ? 1 : -1;
    return strcmp(x->op, y->op);
}

void wm_opt_histogram_json(const wm_onnx_graph *g, wm_json *j, const char *key) {
    op_count *c = calloc(g->n_node ? g->n_node : 1, sizeof *c);
    size_t k = 0;
    if (!c) {
        j->oom = 1;
        return;
    }
    for (size_t i = 0; i < g->n_node; i++) {
        const char *op = g->node[i]->op_type ? g->node[i]->op_type : "?";
        size_t f = 0;
        while (f < k && strcmp(c[f].op, op) != 0) f++;
        if (f == k) c[k++].op = op;
        c[f].n++;
    }
    qsort(c, k, sizeof *c, cmp_count);
    wm_json_obj(j, key);
    for (size_t i = 0; i < k; i++) wm_json_uint(j, c[i].op, c[i].n);
    wm_json_obj_end(j);
    free(c);
}

/* ---------------------------------------------------------------- pointer set */

static size_t ptr_hash(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x;
}

static size_t ptr_find(const wm_ptrset *s, const void *p) {
    size_t mask = s->cap - 1, i = ptr_hash(p) & mask;
    while (s->slot[i] && s->slot[i] != p) i = (i + 1) & mask;
    return i;
}

int wm_ptrset_has(const wm_ptrset *s, const void *p) { return s->cap && s->slot[ptr_find(s, p)] == p; }

int wm_ptrset_add(wm_ptrset *s, const void *p) {
    if (wm_ptrset_has(s, p)) return 0;
    if ((s->n + 1) * 2 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64, old = s->cap;
        const void **prev = s->slot, **fresh = calloc(cap, sizeof *fresh);
        if (!fresh) return -1;
        s->slot = fresh;
        s->cap = cap;
        for (size_t i = 0; i < old; i++)
            if (prev[i]) s->slot[ptr_find(s, prev[i])] = prev[i];
        free(prev);
    }
    s->slot[ptr_find(s, p)] = p;
    s->n++;
    return 1;
}

void wm_ptrset_free(wm_ptrset *s) {
    free(s->slot);
    memset(s, 0, sizeof *s);
}

/* ---------------------------------------------------------------- mapped weights */

void wm_opt_release(const wm_onnx_model *m, const void *p, size_t n) {
    if (!m || !p || !n) return;
    const uint8_t *a = p;
    const wm_map *maps[65];
    size_t k = 0;
    maps[k++] = &m->file;
    for (size_t i = 0; i < m->n_ext && k < 65; i++) maps[k++] = &m->ext[i].map;
    for (size_t i = 0; i < k; i++) {
        const wm_map *mp = maps[i];
        if (!mp->data || a < mp->data || a + n > mp->data + mp->size) continue;
        uintptr_t pg = 4096, lo = ((uintptr_t)a + pg - 1) / pg * pg, hi = ((uintptr_t)a + n) / pg * pg;
        if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
        return;
    }
}
