/* gb.c - the graph emitter (see gb.h). */
#include "builder/gb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "onnx/dtype.h"
#include "opt/opt_util.h"

/* ------------------------------------------------------------ name sets */

static uint64_t hash_str(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

/* 1 if s is in the set, else inserts it (s must outlive the set) and returns 0; -1 on OOM. */
static int set_put(gb_nameset *ns, const char *s) {
    if ((ns->n + 1) * 2 > ns->cap) {
        size_t cap = ns->cap ? ns->cap * 2 : 1024;
        const char **slot = calloc(cap, sizeof *slot);
        if (!slot) return -1;
        for (size_t i = 0; i < ns->cap; i++) {
            if (!ns->slot[i]) continue;
            size_t k = hash_str(ns->slot[i]) & (cap - 1);
            while (slot[k]) k = (k + 1) & (cap - 1);
            slot[k] = ns->slot[i];
        }
        free(ns->slot);
        ns->slot = slot;
        ns->cap = cap;
    }
    size_t k = hash_str(s) & (ns->cap - 1);
    while (ns->slot[k]) {
        if (!strcmp(ns->slot[k], s)) return 1;
        k = (k + 1) & (ns->cap - 1);
    }
    ns->slot[k] = s;
    ns->n++;
    return 0;
}

static int set_has(const gb_nameset *ns, const char *s) {
    if (!ns->cap) return 0;
    size_t k = hash_str(s) & (ns->cap - 1);
    while (ns->slot[k]) {
        if (!strcmp(ns->slot[k], s)) return 1;
        k = (k + 1) & (ns->cap - 1);
    }
    return 0;
}

/* ------------------------------------------------------------ lifecycle */

void gb_init(wm_gb *b, wm_onnx_model *m, wm_graph *g, wm_wsink *sink, int opset, wm_error *err) {
    memset(b, 0, sizeof *b);
    b->m = m;
    b->g = g;
    b->sink = sink;
    b->opset = opset;
    b->err = err;
}

void gb_free(wm_gb *b) {
    free(b->names.slot);
    free(b->consts.slot);
    memset(&b->names, 0, sizeof b->names);
    memset(&b->consts, 0, sizeof b->consts);
}

static const char *fail(wm_gb *b, wm_status s) {
    if (!b->st) b->st = s ? s : WM_ERR_INTERNAL;
    return "<error>";
}

static const char *nomem(wm_gb *b) { return fail(b, wm_err(b->err, WM_ERR_NOMEM, "out of memory building the graph")); }

void gb_scope(wm_gb *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->scope, sizeof b->scope, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------ nodes */

/* A fresh node name "<scope>/<op>" or "<scope>/<op>_<k>", in the model arena. */
static const char *node_name(wm_gb *b, const char *op) {
    char buf[400];
    for (int k = 0;; k++) {
        if (k) snprintf(buf, sizeof buf, "%s/%s_%d", b->scope, op, k);
        else snprintf(buf, sizeof buf, "%s/%s", b->scope, op);
        if (!set_has(&b->names, buf)) break;
    }
    char *s = wm_arena_strdup(&b->m->arena, buf);
    if (!s || set_put(&b->names, s) < 0) return NULL;
    return s;
}

static int add(wm_gb *b, const char *op, const char *domain, int n_in, const char *const *in, int n_out,
               const char **outs, const char *out0) {
    if (b->st) {
        for (int i = 0; i < n_out; i++) outs[i] = "<error>";
        return -1;
    }
    const char *name = node_name(b, op);
    if (!name) {
        nomem(b);
        return -1;
    }
    char buf[512];
    for (int i = 0; i < n_out; i++) {
        if (i == 0 && out0) snprintf(buf, sizeof buf, "%s", out0);
        else snprintf(buf, sizeof buf, "%s_output_%d", name, i);
        if (!(outs[i] = wm_arena_strdup(&b->m->arena, buf))) {
            nomem(b);
            return -1;
        }
    }
    wm_status s = WM_OK;
    b->last = wm_graph_add_node(b->g, op, domain, name, in, (size_t)n_in, outs, (size_t)n_out, b->err);
    if (!b->last) {
        s = b->err->status ? b->err->status : WM_ERR_NOMEM;
        fail(b, s);
        return -1;
    }
    return 0;
}

const char *gb_opv(wm_gb *b, const char *op, const char *out_name, int n_in, const char *const *in) {
    const char *o;
    add(b, op, NULL, n_in, in, 1, &o, out_name);
    return o;
}

const char *gb_op_ms(wm_gb *b, const char *op, int n_in, const char *const *in) {
    const char *o;
    if (add(b, op, "com.microsoft", n_in, in, 1, &o, NULL) == 0) {
        wm_status s = wm_opt_need_opset(b->g, "com.microsoft", 1, b->err);
        if (s) fail(b, s);
    }
    return o;
}

static const char *opva(wm_gb *b, const char *op, const char *out_name, int n_in, va_list ap) {
    const char *in[16];
    for (int i = 0; i < n_in && i < 16; i++) in[i] = va_arg(ap, const char *);
    return gb_opv(b, op, out_name, n_in, in);
}

const char *gb_op(wm_gb *b, const char *op, int n_in, ...) {
    va_list ap;
    va_start(ap, n_in);
    const char *o = opva(b, op, NULL, n_in, ap);
    va_end(ap);
    return o;
}

const char *gb_op_named(wm_gb *b, const char *op, const char *out_name, int n_in, ...) {
    va_list ap;
    va_start(ap, n_in);
    const char *o = opva(b, op, out_name, n_in, ap);
    va_end(ap);
    return o;
}

void gb_op_multi(wm_gb *b, const char *op, int n_in, const char *const *in, int n_out, const char **outs) {
    add(b, op, NULL, n_in, in, n_out, outs, NULL);
}

void gb_attr_i(wm_gb *b, const char *name, int64_t v) {
    if (b->st) return;
    wm_status s = wm_graph_set_attr_int(b->g, b->last, name, v, b->err);
    if (s) fail(b, s);
}

void gb_attr_f(wm_gb *b, const char *name, float v) {
    if (b->st) return;
    wm_status s = wm_graph_set_attr_float(b->g, b->last, name, v, b->err);
    if (s) fail(b, s);
}

void gb_attr_s(wm_gb *b, const char *name, const char *v) {
    if (b->st) return;
    wm_status s = wm_graph_set_attr_string(b->g, b->last, name, v, b->err);
    if (s) fail(b, s);
}

void gb_attr_ints(wm_gb *b, const char *name, const int64_t *v, size_t n) {
    if (b->st) return;
    wm_status s = wm_graph_set_attr_ints(b->g, b->last, name, v, n, b->err);
    if (s) fail(b, s);
}

/* ------------------------------------------------------------ constants */

static const char *constant(wm_gb *b, const char *name, int32_t dt, const int64_t *dims, size_t nd, const void *data,
                            size_t nbytes) {
    if (b->st) return "<error>";
    if (set_has(&b->consts, name)) return wm_graph_find_value(b->g, name)->name;
    void *p = wm_arena_alloc(&b->m->arena, nbytes ? nbytes : 1);
    if (!p) return nomem(b);
    memcpy(p, data, nbytes);
    wm_onnx_tensor *t;
    wm_status s = wm_graph_add_initializer(b->g, name, dt, dims, nd, (wm_bytes){p, nbytes}, &t, b->err);
    if (s) return fail(b, s);
    if (set_put(&b->consts, t->name) < 0) return nomem(b);
    return t->name;
}

const char *gb_i64(wm_gb *b, const int64_t *v, size_t n) {
    char name[256];
    size_t used = (size_t)snprintf(name, sizeof name, "const_i64_");
    for (size_t i = 0; i < n && used < sizeof name; i++)
        used += (size_t)snprintf(name + used, sizeof name - used, "%s%lld", i ? "_" : "", (long long)v[i]);
    if (used >= sizeof name - 1) return fail(b, wm_err(b->err, WM_ERR_INTERNAL, "constant too long"));
    int64_t d = (int64_t)n;
    return constant(b, name, WM_DT_INT64, &d, 1, v, n * sizeof *v);
}

const char *gb_i64_named(wm_gb *b, const int64_t *v, size_t n, const char *name) {
    int64_t d = (int64_t)n;
    return constant(b, name, WM_DT_INT64, &d, 1, v, n * sizeof *v);
}

const char *gb_i64s(wm_gb *b, int64_t v) {
    char name[64];
    snprintf(name, sizeof name, "const_i64s_%lld", (long long)v);
    return constant(b, name, WM_DT_INT64, NULL, 0, &v, sizeof v);
}

const char *gb_i64_1(wm_gb *b, int64_t v) { return gb_i64(b, &v, 1); }

const char *gb_int_as(wm_gb *b, int64_t v, int32_t dtype) {
    if (dtype != WM_DT_INT32) return gb_i64s(b, v);
    char name[64];
    int32_t w = (int32_t)v;
    snprintf(name, sizeof name, "const_i32s_%d", w);
    return constant(b, name, WM_DT_INT32, NULL, 0, &w, sizeof w);
}

const char *gb_f32s(wm_gb *b, float v) {
    char name[64];
    snprintf(name, sizeof name, "const_f32s_%.9g", (double)v);
    return constant(b, name, WM_DT_FLOAT, NULL, 0, &v, sizeof v);
}

const char *gb_f32(wm_gb *b, const float *v, size_t n, const char *name) {
    int64_t d = (int64_t)n;
    return constant(b, name, WM_DT_FLOAT, &d, 1, v, n * sizeof *v);
}

/* ------------------------------------------------------------ shape ops */

const char *gb_reduce(wm_gb *b, const char *op, const char *x, const int64_t *axes, size_t n_axes, int keepdims) {
    int axes_input = !strcmp(op, "ReduceSum") ? b->opset >= 13 : b->opset >= 18;
    const char *o;
    if (axes_input) o = gb_op(b, op, n_axes ? 2 : 1, x, n_axes ? gb_i64(b, axes, n_axes) : NULL);
    else {
        o = gb_op(b, op, 1, x);
        if (n_axes) gb_attr_ints(b, "axes", axes, n_axes);
    }
    gb_attr_i(b, "keepdims", keepdims);
    return o;
}

const char *gb_unsqueeze(wm_gb *b, const char *x, const int64_t *axes, size_t n) {
    return gb_op(b, "Unsqueeze", 2, x, gb_i64(b, axes, n));
}

const char *gb_squeeze(wm_gb *b, const char *x, const int64_t *axes, size_t n) {
    return n ? gb_op(b, "Squeeze", 2, x, gb_i64(b, axes, n)) : gb_op(b, "Squeeze", 1, x);
}

const char *gb_slice(wm_gb *b, const char *x, int64_t start, int64_t end, int64_t axis) {
    return gb_op(b, "Slice", 4, x, gb_i64_1(b, start), gb_i64_1(b, end), gb_i64_1(b, axis));
}

const char *gb_reshape(wm_gb *b, const char *x, const int64_t *shape, size_t n) {
    return gb_op(b, "Reshape", 2, x, gb_i64(b, shape, n));
}

const char *gb_transpose(wm_gb *b, const char *x, const int64_t *perm, size_t n) {
    const char *o = gb_op(b, "Transpose", 1, x);
    gb_attr_ints(b, "perm", perm, n);
    return o;
}

const char *gb_cast(wm_gb *b, const char *x, int32_t to) {
    const char *o = gb_op(b, "Cast", 1, x);
    gb_attr_i(b, "to", to);
    return o;
}

/* ------------------------------------------------------------ weights */

static const char *weight(wm_gb *b, const char *suffix, const wm_st_tensor *t, const int64_t *dims, size_t nd,
                          int transpose, int kind, float add);

const char *gb_weight(wm_gb *b, const char *suffix, const wm_st_tensor *t, const int64_t *dims, size_t nd,
                      int transpose, int kind) {
    return weight(b, suffix, t, dims, nd, transpose, kind, 0.0f);
}

const char *gb_weight_add(wm_gb *b, const char *suffix, const wm_st_tensor *t, const int64_t *dims, size_t nd,
                          int kind, float add) {
    return weight(b, suffix, t, dims, nd, 0, kind, add);
}

/* A weight's initializer name: the scope with '/' as '.', then suffix ("/model/layers.0/attn" + ".weight"). */
static void weight_name(const wm_gb *b, const char *suffix, char name[400]) {
    const char *sc = b->scope[0] == '/' ? b->scope + 1 : b->scope;
    size_t k = 0;
    for (; sc[k] && k < 399; k++) name[k] = sc[k] == '/' ? '.' : sc[k];
    snprintf(name + k, 400 - k, "%s", suffix);
}

static const char *weight(wm_gb *b, const char *suffix, const wm_st_tensor *t, const int64_t *dims, size_t nd,
                          int transpose, int kind, float add) {
    if (b->st) return "<error>";
    char name[400];
    weight_name(b, suffix, name);
    wm_wsrc src = {t, transpose, b->seed, 0, 0, t ? add : 0.0f};
    if (!t) {
        if (kind == GB_W_MATRIX) src.scale = 0.0346f; /* uniform with std 0.02 */
        else src.fill = kind == GB_W_ONES ? 1.0f : 0.0f;
    }
    wm_status s = wm_wsink_add(b->sink, b->g, name, dims, nd, &src, b->err);
    if (s) return fail(b, s);
    return wm_graph_find_value(b->g, name)->name;
}

const char *gb_weight_existing(wm_gb *b, const char *suffix) {
    if (b->st) return "<error>";
    char name[400];
    weight_name(b, suffix, name);
    const wm_value *v = wm_graph_find_value(b->g, name);
    if (!v) return fail(b, wm_err(b->err, WM_ERR_INTERNAL, "weight '%s' reused before it was added", name));
    return v->name;
}

const char *gb_weight_vals(wm_gb *b, const char *suffix, const float *vals, const int64_t *dims, size_t nd) {
    return gb_weight_experts(b, suffix, vals, dims, nd, 0, 0);
}

const char *gb_weight_experts(wm_gb *b, const char *suffix, const float *vals, const int64_t *dims, size_t nd, int fc,
                              int layer) {
    if (b->st) return "<error>";
    char name[400];
    weight_name(b, suffix, name);
    wm_wsrc src = {NULL, 0, 0, 0, 0, 0, vals, fc, layer};
    wm_status s = wm_wsink_add(b->sink, b->g, name, dims, nd, &src, b->err);
    if (s) return fail(b, s);
    return wm_graph_find_value(b->g, name)->name;
}

const char *gb_rename(wm_gb *b, const char *from, const char *to) {
    if (b->st) return "<error>";
    wm_status s = wm_graph_rename_value(b->g, from, to, b->err);
    if (s) return fail(b, s);
    return wm_graph_find_value(b->g, to)->name;
}
