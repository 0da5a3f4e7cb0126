/*
 * session.c - session creation: values, constants, op resolution, type
 * inference, folding of constant subgraphs, graph IO descriptions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "onnx/onnx_model.h"
#include "ops/gemm.h"
#include "ops/int_math.h"
#include "opt/opt.h"
#include "opt/opt_util.h"
#include "runtime/session_impl.h"
#include "runtime/subgraph.h"

/* ---------------------------------------------------------------- name map */

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    while (*s) h = (h ^ (uint8_t)*s++) * 1099511628211ull;
    return h;
}

static wm_status map_init(wm_session *s, size_t n, wm_error *err) {
    size_t cap = 16;
    while (cap < 2 * n + 2) cap *= 2;
    s->map.keys = calloc(cap, sizeof *s->map.keys);
    s->map.ids = calloc(cap, sizeof *s->map.ids);
    s->map.cap = cap;
    if (!s->map.keys || !s->map.ids) return wm_err(err, WM_ERR_NOMEM, "session: out of memory");
    return WM_OK;
}

static void map_put(wm_session *s, const char *name, int id) {
    size_t m = s->map.cap - 1, i = hash_str(name) & m;
    while (s->map.keys[i] && strcmp(s->map.keys[i], name)) i = (i + 1) & m;
    s->map.keys[i] = name;
    s->map.ids[i] = id;
}

int wm_session_value(const wm_session *s, const char *name) {
    if (!name || !*name) return -1;
    size_t m = s->map.cap - 1, i = hash_str(name) & m;
    while (s->map.keys[i]) {
        if (!strcmp(s->map.keys[i], name)) return s->map.ids[i];
        i = (i + 1) & m;
    }
    return -1;
}

/* ---------------------------------------------------------------- constants */

/* Makes c describe initializer t; data points into the mapping when aligned, else into a copy in the session arena. */
static wm_status const_from_proto(wm_session *s, const wm_onnx_tensor *t, wm_tensor *c, wm_error *err) {
    const char *nm = t->name ? t->name : "?";
    size_t esz = wm_dtype_size(t->data_type);
    int packed = !esz && wm_dtype_bits(t->data_type) > 0; /* sub-byte types: raw packed bytes only */
    if ((!esz && !packed) || !wm_dtype_valid(t->data_type))
        return wm_err(err, WM_ERR_UNSUPPORTED, "initializer '%s': element type %s is not supported by the engine", nm,
                      wm_dtype_name(t->data_type));
    if (t->n_dims > WM_MAX_RANK)
        return wm_err(err, WM_ERR_UNSUPPORTED, "initializer '%s': rank %zu is over %d", nm, t->n_dims, WM_MAX_RANK);
    uint64_t numel;
    wm_status st = wm_onnx_tensor_numel(t, &numel, err);
    if (st) return st;
    c->dtype = t->data_type;
    c->rank = (int32_t)t->n_dims;
    for (size_t i = 0; i < t->n_dims; i++) c->dims[i] = t->dims[i];
    if (wm_dims_fit(c->dims, c->rank, 1ull << 46) <= 0) /* an empty one's other dims too: ops stride over them */
        return wm_err(err, WM_ERR_INPUT, "initializer '%s': dims out of range", nm);
    uint64_t nbytes = numel * esz;
    if (packed) wm_dtype_nbytes(t->data_type, numel, &nbytes);
    wm_bytes b = wm_onnx_tensor_bytes(t);
    if (b.p && b.n == nbytes) {
        if (packed || ((uintptr_t)b.p % (esz < 8 ? esz : 8)) == 0) {
            c->data = (void *)b.p;
            return WM_OK;
        }
        void *d = wm_arena_alloc(&s->arena, nbytes ? nbytes : 1);
        if (!d) return wm_err(err, WM_ERR_NOMEM, "initializer '%s': out of memory", nm);
        memcpy(d, b.p, nbytes);
        c->data = d;
        return WM_OK;
    }
    void *d = wm_arena_alloc(&s->arena, nbytes ? nbytes : 1);
    if (!d) return wm_err(err, WM_ERR_NOMEM, "initializer '%s': out of memory", nm);
    c->data = d;
    if (numel == 0) return WM_OK;
    if (packed)
        return wm_err(err, WM_ERR_UNSUPPORTED, "initializer '%s': %s data outside raw_data is not supported", nm,
                      wm_dtype_name(t->data_type));
    /* typed fields: one int32 per element for the small types, int64/uint64/double for the wide ones */
    switch (t->data_type) {
    case WM_DT_INT8: case WM_DT_UINT8: case WM_DT_BOOL: case WM_DT_INT16: case WM_DT_UINT16:
    case WM_DT_FLOAT16: case WM_DT_BFLOAT16: case WM_DT_FLOAT8E4M3FN: case WM_DT_FLOAT8E4M3FNUZ:
    case WM_DT_FLOAT8E5M2: case WM_DT_FLOAT8E5M2FNUZ: case WM_DT_INT32:
        if (t->n_int32_data != numel) break;
        for (uint64_t i = 0; i < numel; i++) {
            int32_t v = t->int32_data[i];
            if (esz == 1) ((uint8_t *)d)[i] = (uint8_t)v;
            else if (esz == 2) ((uint16_t *)d)[i] = (uint16_t)v;
            else ((int32_t *)d)[i] = v;
        }
        return WM_OK;
    case WM_DT_UINT32:
        if (t->n_uint64_data != numel) break;
        for (uint64_t i = 0; i < numel; i++) ((uint32_t *)d)[i] = (uint32_t)t->uint64_data[i];
        return WM_OK;
    default: break;
    }
    return wm_err(err, WM_ERR_INPUT, "initializer '%s': its data does not match its shape (%llu elements of %s)", nm,
                  (unsigned long long)numel, wm_dtype_name(t->data_type));
}

/* ---------------------------------------------------------------- values */

static int add_value(wm_session *s, const char *name, int kind) {
    int id = (int)s->n_vals++;
    wm_val *v = &s->vals[id];
    memset(v, 0, sizeof *v);
    v->name = name;
    v->kind = kind;
    v->producer = -1;
    v->input_index = -1;
    v->output_index = -1;
    map_put(s, name, id);
    return id;
}

static wm_status io_info(const wm_onnx_value_info *vi, wm_io_info *io, wm_error *err) {
    memset(io, 0, sizeof *io);
    io->name = vi->name;
    io->rank = -1;
    const wm_onnx_type *ty = vi->type;
    if (!ty || !ty->tensor_type)
        return wm_err(err, WM_ERR_UNSUPPORTED, "graph input/output '%s': only tensor types are supported", vi->name);
    io->dtype = ty->tensor_type->elem_type;
    const wm_onnx_shape *sh = ty->tensor_type->shape;
    if (sh) {
        if (sh->n_dim > WM_MAX_RANK)
            return wm_err(err, WM_ERR_UNSUPPORTED, "graph input/output '%s': rank %zu is over %d", vi->name, sh->n_dim,
                          WM_MAX_RANK);
        io->rank = (int32_t)sh->n_dim;
        for (size_t i = 0; i < sh->n_dim; i++) {
            const wm_onnx_dim *d = sh->dim[i];
            int has_value = d && (d->pb.has & 1u);
            io->dims[i] = has_value && d->dim_value >= 0 ? d->dim_value : -1;
            io->dim_names[i] = d && d->dim_param && *d->dim_param ? d->dim_param : NULL;
        }
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- folding */

static void *session_alloc(wm_session *s, uint64_t n) {
    uint8_t *p = wm_arena_alloc(&s->arena, (size_t)n + 64);
    return p ? (void *)(((uintptr_t)p + 63) & ~(uintptr_t)63) : NULL;
}

/* Evaluates node i whose inputs are all constants; its outputs become constants. */
static wm_status fold_node(wm_session *s, int i, wm_error *err) {
    wm_node *n = &s->nodes[i];
    wm_tensor tin[WM_MAX_IO], tout[WM_MAX_IO];
    wm_tensor *in[WM_MAX_IO], *out[WM_MAX_IO];
    const wm_onnx_node *p = n->proto;
    for (int k = 0; k < n->n_in; k++) {
        int v = wm_session_value(s, p->input[k]);
        in[k] = v >= 0 ? (tin[k] = s->vals[v].c, &tin[k]) : NULL;
    }
    for (int k = 0; k < n->n_out; k++) {
        memset(&tout[k], 0, sizeof tout[k]);
        tout[k].dtype = n->out_dtype[k];
        out[k] = p->output[k] && *p->output[k] ? &tout[k] : NULL;
    }
    wm_status st = n->op->infer(n, in, out, err);
    if (st == WM_NEED_DATA) return wm_node_err(n, err, WM_ERR_INTERNAL, "shape unknown with every input constant");
    if (st) return st;
    for (int k = 0; k < n->n_out; k++) { /* as the plan checks what infer gives (runtime/plan.c) */
        if (!out[k]) continue;
        if (out[k]->rank < 0 || out[k]->rank > WM_MAX_RANK)
            return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "output %d has rank %d (at most %d)", k, out[k]->rank, WM_MAX_RANK);
        int fit = wm_dims_fit(out[k]->dims, out[k]->rank, 1ull << 46);
        if (fit <= 0) return wm_node_err(n, err, WM_ERR_INPUT, "output %d %s", k, fit ? "has a negative dim" : "is too large");
    }
    if ((n->op->flags & WM_OP_ALIAS) && n->n_out == 1 && out[0] && in[0] && in[0]->data &&
        wm_tensor_nbytes(out[0]) == wm_tensor_nbytes(in[0])) {
        /* a view (Reshape, Squeeze, Identity, ...) of a constant: the same bytes, new dims, no copy (a reshaped
         * table shared with a MatMulNBits stays one mapping) */
        out[0]->data = in[0]->data;
        wm_val *v = &s->vals[wm_session_value(s, p->output[0])];
        v->kind = WM_VAL_CONST;
        v->c = *out[0];
        return WM_OK;
    }
    for (int k = 0; k < n->n_out; k++) {
        if (!out[k]) continue;
        if (out[k]->rank < 0 || out[k]->rank > WM_MAX_RANK)
            return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "output rank %d (at most %d)", out[k]->rank, WM_MAX_RANK);
        uint64_t nb;
        if ((st = wm_budget_value(s, n, k, out[k], 0, &nb, err))) return st;
        if ((st = wm_budget_take(s, n, 0, nb, "a folded constant", err))) return st;
        out[k]->data = session_alloc(s, nb ? nb : 1);
        if (!out[k]->data) return wm_err(err, WM_ERR_NOMEM, "folding constants: out of memory");
    }
    size_t ws = wm_node_workspace(s, i, in, out);
    void *wsp = NULL;
    if (ws && (st = wm_budget_take(s, n, 0, ws, "a workspace", err))) return st;
    if (ws && !(wsp = aligned_alloc(64, (ws + 63) & ~(size_t)63))) st = wm_err(err, WM_ERR_NOMEM, "out of memory");
    if (!st) st = wm_node_exec(s, i, in, out, wsp, ws, err);
    free(wsp);
    wm_budget_give(s, ws);
    if (st) return st;
    for (int k = 0; k < n->n_out; k++) {
        if (!out[k]) continue;
        wm_val *v = &s->vals[wm_session_value(s, p->output[k])];
        v->kind = WM_VAL_CONST;
        v->c = *out[k];
    }
    return WM_OK;
}

size_t wm_node_workspace(wm_session *s, int i, wm_tensor *const *in, wm_tensor *const *out) {
    wm_node *n = &s->nodes[i];
    return n->op->workspace ? n->op->workspace(n, in, out, wm_pool_size(s->pool)) : 0;
}

wm_status wm_node_exec(wm_session *s, int i, wm_tensor *const *in, wm_tensor *const *out, void *ws, size_t ws_size,
                       wm_error *err) {
    wm_node *n = &s->nodes[i];
    wm_exec x = {.pool = s->pool, .nth = wm_pool_size(s->pool), .ws = ws, .ws_size = ws_size, .err = err,
                 .gemm_ws = s->gemm_ws, .gemm_ws_per = s->gemm_ws_per};
    return n->op->run(n, in, out, &x);
}

/* ---------------------------------------------------------------- nodes */

static int domain_opset(const wm_onnx_modelproto *mp, const char *domain) {
    if (!domain || !strcmp(domain, "ai.onnx")) domain = "";
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const char *d = mp->opset_import[i]->domain;
        if (!d || !strcmp(d, "ai.onnx")) d = "";
        if (!strcmp(d, domain)) return (int)mp->opset_import[i]->version;
    }
    return -1;
}

static wm_status init_node(wm_session *s, int i, const wm_onnx_node *p, wm_error *err) {
    wm_node *n = &s->nodes[i];
    n->proto = p;
    n->arena = &s->arena;
    const char *dom = p->domain && *p->domain ? p->domain : "";
    int opset = domain_opset(s->model->proto, dom);
    if (!strcmp(dom, "com.microsoft") && opset < 0) opset = 1; /* contrib ops are version 1 */
    if (opset < 0)
        return wm_node_err(n, err, WM_ERR_INPUT, "the model imports no opset for domain '%s'", *dom ? dom : "ai.onnx");
    n->opset = opset;
    n->scope = s;
    n->n_in_proto = (int)p->n_input;
    wm_status st = wm_subgraph_outer_inputs(&s->arena, p, &p, err); /* If/Loop/Scan: + the outer values their bodies use */
    if (st) {
        wm_err_prefix(err, "node '%s' (%s)", wm_node_label(n), p->op_type ? p->op_type : "?");
        return st;
    }
    n->proto = p;
    if (p->n_input > WM_MAX_IO || p->n_output > WM_MAX_IO)
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "more than %d inputs or outputs", WM_MAX_IO);
    n->n_in = (int)p->n_input;
    n->n_out = (int)p->n_output;
    const wm_op *near = NULL;
    n->op = wm_op_find(dom, p->op_type ? p->op_type : "", opset, &near);
    if (!n->op) {
        if (near)
            return wm_node_err(n, err, WM_ERR_UNSUPPORTED,
                               "op %s is supported for opsets %d..%d of domain '%s', not opset %d", p->op_type,
                               near->since, near->until ? near->until : 99, *dom ? dom : "ai.onnx", opset);
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "op %s of domain '%s' (opset %d) is not supported by the engine",
                           p->op_type, *dom ? dom : "ai.onnx", opset);
    }
    /* ops read input 0 and write output 0 unchecked: a node without them is refused here (further inputs an op
     * requires, it checks in init: wm_need_inputs) */
    if (!(n->op->flags & WM_OP_NO_INPUT0) && (n->n_in_proto < 1 || !p->input[0] || !*p->input[0]))
        return wm_node_err(n, err, WM_ERR_INPUT, "input 0 is missing");
    if (n->n_out < 1 || !p->output[0] || !*p->output[0]) return wm_node_err(n, err, WM_ERR_INPUT, "output 0 is missing");
    for (int k = 0; k < n->n_in; k++) {
        const char *nm = p->input[k];
        if (!nm || !*nm) continue;
        int v = wm_session_value(s, nm);
        if (v < 0) return wm_node_err(n, err, WM_ERR_INPUT, "input '%s' is not defined", nm);
        n->in_dtype[k] = s->vals[v].dtype;
        if (s->vals[v].kind == WM_VAL_CONST) n->in_const[k] = &s->vals[v].c;
    }
    st = n->op->init(n, err);
    if (st) return st;
    for (int k = 0; k < n->n_out; k++) {
        const char *nm = p->output[k];
        if (!nm || !*nm) {
            n->out_dtype[k] = 0;
            continue;
        }
        if (!n->out_dtype[k]) return wm_node_err(n, err, WM_ERR_INTERNAL, "output %d has no element type", k);
        if (wm_session_value(s, nm) >= 0) return wm_node_err(n, err, WM_ERR_INPUT, "output '%s' is defined twice", nm);
        int v = add_value(s, nm, WM_VAL_NODE);
        s->vals[v].dtype = n->out_dtype[k];
        s->vals[v].producer = i;
    }
    s->packed_bytes += n->packed_bytes;
    return WM_OK;
}

wm_pool *wm_node_pool(const wm_node *n) {
    const wm_session *s = n->scope;
    return s ? s->pool : NULL;
}

void wm_node_release_const(const wm_node *n, int k) {
    const wm_session *s = n->scope;
    const wm_tensor *t = k >= 0 && k < n->n_in ? n->in_const[k] : NULL;
    if (s && t && t->data) wm_opt_release(s->model, t->data, (size_t)wm_tensor_nbytes(t));
}

int wm_node_f16_float(const wm_node *n, uint64_t bytes) {
    wm_session *s = n->scope;
    if (!s || !s->f16_float || !wm_budget_fits(s, 0, bytes)) return 0;
    return wm_budget_take(s, n, 0, bytes, "float32 weights", NULL) == WM_OK;
}

/* 1 when graph g is autoregressive by the decoder convention: an input named with "past" (a KV cache fed back) or
   an output named with "present" (one produced for the next step). */
static int kv_graph(const wm_onnx_graph *g) {
    for (size_t i = 0; i < g->n_input; i++)
        if (g->input[i]->name && strstr(g->input[i]->name, "past")) return 1;
    for (size_t i = 0; i < g->n_output; i++)
        if (g->output[i]->name && strstr(g->output[i]->name, "present")) return 1;
    return 0;
}

/* Resolves the float16 weight policy (runtime.h, WM_F16_*) of a root session over graph g into s->f16_float. */
static wm_status f16_policy(wm_session *s, const wm_onnx_graph *g, wm_error *err) {
    int p = s->opts.f16_weights;
    const char *v = getenv("WM_F16_WEIGHTS");
    if (p == WM_F16_AUTO && v && *v) {
        if (!strcmp(v, "half")) p = WM_F16_HALF;
        else if (!strcmp(v, "float")) p = WM_F16_FLOAT;
        else if (strcmp(v, "auto"))
            return wm_err(err, WM_ERR_USAGE, "WM_F16_WEIGHTS: '%s' is not auto, half or float", v);
    }
    if (p < WM_F16_AUTO || p > WM_F16_FLOAT) return wm_err(err, WM_ERR_USAGE, "f16_weights: %d is not a policy", p);
    s->f16_float = p == WM_F16_FLOAT || (p == WM_F16_AUTO && !kv_graph(g));
    return WM_OK;
}

static int foldable(const wm_session *s, const wm_node *n) {
    if (n->op->flags & WM_OP_NOFOLD) return 0;
    int any_input = 0;
    for (int k = 0; k < n->n_in; k++) {
        if (!wm_has_in(n, k)) continue;
        any_input = 1;
        if (!n->in_const[k]) return 0;
    }
    if (!any_input) return 1; /* Constant, and ops that make something from attributes alone */
    return !s->opts.no_fold;
}

/* ---------------------------------------------------------------- lifecycle */

static wm_status build(wm_session *s, wm_onnx_graph *g, const int32_t *formal_dtypes, size_t n_formal,
                       const char *const *outer_names, const int32_t *outer_dtypes, size_t n_outer, wm_error *err);

wm_status wm_session_new(const char *path, const wm_session_opts *opts, wm_session **out, wm_error *err) {
    *out = NULL;
    wm_onnx_model *m = NULL;
    wm_status st = wm_onnx_load(path, &m, err);
    if (st) return st;
    st = wm_session_new_model(m, opts, out, err);
    if (st) wm_err_prefix(err, "%s", path);
    return st;
}

/* 1 when environment variable name is "0" (a switch for benchmarks and bisecting) */
static int getenv_off(const char *name) {
    const char *v = getenv(name);
    return v && !strcmp(v, "0");
}

wm_status wm_session_new_model(wm_onnx_model *m, const wm_session_opts *opts, wm_session **out, wm_error *err) {
    *out = NULL;
    wm_status st;
    wm_session *s = calloc(1, sizeof *s);
    if (!s) {
        wm_onnx_free(m);
        return wm_err(err, WM_ERR_NOMEM, "session: out of memory");
    }
    s->model = m;
    wm_arena_init(&s->arena);
    if (opts) s->opts = *opts;
    if (s->opts.max_plans <= 0) s->opts.max_plans = 8;
    if ((st = wm_budget_init(&s->budget, &s->opts, err))) goto fail;
    /* the pool and the GEMM scratch come first: folding at creation runs kernels too */
    if ((st = wm_pool_new(s->opts.threads, &s->pool, err))) goto fail;
    s->gemm_ws_per = wm_gemm_scratch_per_thread();
    if (!(s->gemm_ws = aligned_alloc(64, s->gemm_ws_per * (size_t)wm_pool_size(s->pool)))) {
        st = wm_err(err, WM_ERR_NOMEM, "session: out of memory");
        goto fail;
    }
    wm_onnx_graph *g = m->proto ? m->proto->graph : NULL;
    if (!g) {
        st = wm_err(err, WM_ERR_INPUT, "the model has no graph");
        goto fail;
    }
    if ((st = wm_graph_open(m, g, &s->graph, err))) goto fail;
    if (!s->opts.no_optimize && !s->opts.keep_values && !getenv_off("WM_OPTIMIZE")) {
        wm_opt_config oc;
        wm_opt_config_engine(&oc);
        if ((st = wm_opt_run(s->graph, &oc, NULL, err))) {
            wm_err_prefix(err, "graph optimization");
            goto fail;
        }
    }
    if ((st = wm_graph_topo_sort(s->graph, err))) goto fail;
    if ((st = f16_policy(s, g, err))) goto fail;
    if ((st = build(s, g, NULL, 0, NULL, NULL, 0, err))) goto fail;
    *out = s;
    return WM_OK;
fail:
    wm_session_free(s);
    return st;
}

wm_status wm_session_new_sub(wm_session *parent, wm_onnx_graph *g, const int32_t *formal_dtypes, size_t n_formal,
                             const char *const *outer_names, const int32_t *outer_dtypes, size_t n_outer,
                             wm_session **out, wm_error *err) {
    *out = NULL;
    wm_session *s = calloc(1, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "session: out of memory");
    s->parent = parent;
    s->model = parent->model;
    s->pool = parent->pool;
    s->gemm_ws = parent->gemm_ws;
    s->gemm_ws_per = parent->gemm_ws_per;
    s->opts = parent->opts;
    s->f16_float = parent->f16_float;
    wm_arena_init(&s->arena);
    wm_status st = build(s, g, formal_dtypes, n_formal, outer_names, outer_dtypes, n_outer, err);
    if (st) {
        wm_err_prefix(err, "subgraph '%s'", g->name ? g->name : "");
        wm_session_free(s);
        return st;
    }
    *out = s;
    return WM_OK;
}

/* Values, constants, inputs (then the outer values of a subgraph), nodes, outputs of graph g. */
static wm_status build(wm_session *s, wm_onnx_graph *g, const int32_t *formal_dtypes, size_t n_formal,
                       const char *const *outer_names, const int32_t *outer_dtypes, size_t n_outer, wm_error *err) {
    wm_status st;
    size_t cap = g->n_initializer + g->n_input + n_outer;
    for (size_t i = 0; i < g->n_node; i++) cap += g->node[i]->n_output;
    s->vals = calloc(cap ? cap : 1, sizeof *s->vals);
    s->nodes = calloc(g->n_node ? g->n_node : 1, sizeof *s->nodes);
    s->folded = calloc(g->n_node ? g->n_node : 1, 1);
    s->in_val = calloc(g->n_input + n_outer + 1, sizeof *s->in_val);
    s->out_val = calloc(g->n_output + 1, sizeof *s->out_val);
    s->inputs = calloc(g->n_input + n_outer + 1, sizeof *s->inputs);
    s->outputs = calloc(g->n_output + 1, sizeof *s->outputs);
    if (!s->vals || !s->nodes || !s->folded || !s->in_val || !s->out_val || !s->inputs || !s->outputs) {
        st = wm_err(err, WM_ERR_NOMEM, "session: out of memory");
        return st;
    }
    if ((st = map_init(s, cap, err))) return st;
    if (g->n_sparse_initializer) {
        st = wm_err(err, WM_ERR_UNSUPPORTED, "sparse initializers are not supported by the engine");
        return st;
    }
    for (size_t i = 0; i < g->n_initializer; i++) {
        const wm_onnx_tensor *t = g->initializer[i];
        if (!t->name || !*t->name || wm_session_value(s, t->name) >= 0) {
            st = wm_err(err, WM_ERR_INPUT, "initializer %zu: missing or duplicate name", i);
            return st;
        }
        int v = add_value(s, t->name, WM_VAL_CONST);
        if ((st = const_from_proto(s, t, &s->vals[v].c, err))) return st;
        s->vals[v].dtype = s->vals[v].c.dtype;
    }
    for (size_t i = 0; i < g->n_input; i++) {
        const wm_onnx_value_info *vi = g->input[i];
        if (!vi->name || !*vi->name) {
            st = wm_err(err, WM_ERR_INPUT, "graph input %zu has no name", i);
            return st;
        }
        if (wm_session_value(s, vi->name) >= 0) continue; /* an initializer listed as input: a constant here */
        wm_io_info *io = &s->inputs[s->n_inputs];
        int32_t formal = i < n_formal && formal_dtypes ? formal_dtypes[i] : 0;
        if (formal && !vi->type) { /* a subgraph input its node types */
            memset(io, 0, sizeof *io);
            io->name = vi->name;
            io->dtype = formal;
            io->rank = -1;
        } else if ((st = io_info(vi, io, err))) {
            return st;
        }
        if (formal && !io->dtype) io->dtype = formal; /* declared without an element type */
        if (formal && io->dtype != formal)
            return wm_err(err, WM_ERR_INPUT, "input '%s' is declared %s, the node passes %s", vi->name,
                          wm_dtype_name(io->dtype), wm_dtype_name(formal));
        if (!wm_dtype_bits(io->dtype)) {
            st = wm_err(err, WM_ERR_UNSUPPORTED, "graph input '%s': element type %s is not supported", vi->name,
                        wm_dtype_name(io->dtype));
            return st;
        }
        int v = add_value(s, vi->name, WM_VAL_INPUT);
        s->vals[v].dtype = io->dtype;
        s->vals[v].input_index = (int)s->n_inputs;
        s->in_val[s->n_inputs++] = v;
    }
    for (size_t i = 0; i < n_outer; i++) { /* outer-scope values a subgraph uses: inputs of any shape */
        if (wm_session_value(s, outer_names[i]) >= 0) continue;
        wm_io_info *io = &s->inputs[s->n_inputs];
        memset(io, 0, sizeof *io);
        io->name = outer_names[i];
        io->dtype = outer_dtypes[i];
        io->rank = -1;
        int v = add_value(s, outer_names[i], WM_VAL_INPUT);
        s->vals[v].dtype = io->dtype;
        s->vals[v].input_index = (int)s->n_inputs;
        s->in_val[s->n_inputs++] = v;
    }
    s->n_nodes = g->n_node;
    for (size_t i = 0; i < g->n_node; i++) {
        if ((st = init_node(s, (int)i, g->node[i], err))) return st;
        if (foldable(s, &s->nodes[i])) {
            if ((st = fold_node(s, (int)i, err))) return st;
            s->folded[i] = 1;
            s->n_folded++;
            /* later nodes see the new constants through in_const when they init */
        }
    }
    for (size_t i = 0; i < g->n_output; i++) {
        const wm_onnx_value_info *vi = g->output[i];
        int v = wm_session_value(s, vi->name);
        if (v < 0) {
            st = wm_err(err, WM_ERR_INPUT, "graph output '%s' is not produced by any node", vi->name ? vi->name : "");
            return st;
        }
        if (s->parent && !vi->type) { /* an untyped subgraph output: the value's type */
            s->outputs[i].name = vi->name;
            s->outputs[i].rank = -1;
        } else if ((st = io_info(vi, &s->outputs[i], err))) {
            return st;
        }
        s->outputs[i].dtype = s->vals[v].dtype;
        s->out_val[i] = v;
        if (s->vals[v].output_index < 0) s->vals[v].output_index = (int)i;
    }
    s->n_outputs = g->n_output;
    const char *prof = getenv("WM_PROFILE");
    if (prof && *prof && strcmp(prof, "0")) s->prof_ms = calloc(s->n_nodes + 1, sizeof *s->prof_ms);
    s->plans = calloc((size_t)s->opts.max_plans, sizeof *s->plans);
    if (!s->plans) return wm_err(err, WM_ERR_NOMEM, "session: out of memory");
    return WM_OK;
}

/* WM_PROFILE=N: milliseconds per op type per run, largest first, on stderr; N > 1 adds the N slowest nodes, each with
   its place in the run order (#i) */
static void print_profile(const wm_session *s) {
    if (!s->prof_runs) return;
    const char *names[512];
    double ms[512];
    int cnt[512], n = 0;
    double total = 0;
    for (size_t i = 0; i < s->n_nodes; i++) {
        const char *op = s->nodes[i].proto->op_type;
        int k = 0;
        while (k < n && strcmp(names[k], op)) k++;
        if (k == n) {
            if (n == 512) continue;
            names[n] = op, ms[n] = 0, cnt[n] = 0, n++;
        }
        ms[k] += s->prof_ms[i] / (double)s->prof_runs;
        cnt[k] += s->prof_ms[i] > 0;
        total += s->prof_ms[i] / (double)s->prof_runs;
    }
    fprintf(stderr, "profile: %.3f ms per run over %llu runs\n", total, (unsigned long long)s->prof_runs);
    for (int done = 0; done < n; done++) {
        int best = -1;
        for (int k = 0; k < n; k++)
            if (ms[k] >= 0 && (best < 0 || ms[k] > ms[best])) best = k;
        if (ms[best] <= 0) break;
        fprintf(stderr, "  %-32s %9.3f ms %5.1f%%  (%d nodes)\n", names[best], ms[best], 100 * ms[best] / total, cnt[best]);
        ms[best] = -1;
    }
    long top = strtol(getenv("WM_PROFILE"), NULL, 10);
    if (top <= 1) return;
    char *seen = calloc(s->n_nodes + 1, 1);
    if (!seen) return;
    for (long t = 0; t < top && t < (long)s->n_nodes; t++) {
        size_t b = s->n_nodes;
        for (size_t i = 0; i < s->n_nodes; i++)
            if (!seen[i] && (b == s->n_nodes || s->prof_ms[i] > s->prof_ms[b])) b = i;
        if (b == s->n_nodes || s->prof_ms[b] <= 0) break;
        seen[b] = 1;
        const wm_onnx_node *np = s->nodes[b].proto;
        fprintf(stderr, "  node %-40s %-20s %9.3f ms  #%zu\n", np->name ? np->name : "?", np->op_type,
                s->prof_ms[b] / (double)s->prof_runs, b);
    }
    free(seen);
}

void wm_session_free(wm_session *s) {
    if (!s) return;
    if (s->prof_ms) print_profile(s);
    free(s->prof_ms);
    wm_steady_free(s);
    for (size_t i = 0; i < s->n_plans; i++) wm_plan_free(s->plans[i]);
    free(s->plans);
    for (size_t i = 0; i < s->n_eager_bufs; i++) free(s->eager_bufs[i]);
    free(s->eager_bufs);
    free(s->eager_size);
    free(s->mem);
    for (size_t i = s->n_subs; i-- > 0;) wm_subgraph_free(s->subs[i]); /* before the pool they run on */
    free(s->subs);
    if (!s->parent) { /* a subgraph's session borrows these from its parent */
        free(s->gemm_ws);
        wm_pool_free(s->pool);
    }
    wm_graph_free(s->graph);
    free(s->vals);
    free(s->nodes);
    free(s->folded);
    free(s->in_val);
    free(s->out_val);
    free(s->inputs);
    free(s->outputs);
    free(s->map.keys);
    free(s->map.ids);
    wm_arena_free(&s->arena);
    if (!s->parent) wm_onnx_free(s->model);
    free(s);
}

size_t wm_session_n_inputs(const wm_session *s) { return s->n_inputs; }
size_t wm_session_n_outputs(const wm_session *s) { return s->n_outputs; }
const wm_io_info *wm_session_input(const wm_session *s, size_t i) { return i < s->n_inputs ? &s->inputs[i] : NULL; }
const wm_io_info *wm_session_output(const wm_session *s, size_t i) { return i < s->n_outputs ? &s->outputs[i] : NULL; }
int wm_session_input_index(const wm_session *s, const char *name) {
    for (size_t i = 0; name && i < s->n_inputs; i++)
        if (!strcmp(s->inputs[i].name, name)) return (int)i;
    return -1;
}
int wm_session_output_index(const wm_session *s, const char *name) {
    for (size_t i = 0; name && i < s->n_outputs; i++)
        if (!strcmp(s->outputs[i].name, name)) return (int)i;
    return -1;
}
int wm_session_threads(const wm_session *s) { return wm_pool_size(s->pool); }

void wm_session_get_stats(const wm_session *s, wm_session_stats *st) {
    memset(st, 0, sizeof *st);
    st->n_nodes = s->n_nodes;
    st->n_folded = s->n_folded;
    st->n_plans = s->n_plans_made;
    st->packed_bytes = s->packed_bytes;
    st->run_allocs = s->run_allocs;
    if (s->last) {
        st->n_run_nodes = (size_t)s->last->n_run;
        st->arena_bytes = s->last->arena_bytes;
        st->naive_bytes = s->last->naive_bytes;
        st->eager = s->last->eager;
        st->n_steady_skipped = s->steady.skipped;
    }
}

const char *wm_session_precision(const wm_session *s) {
    const wm_onnx_graph *g = s->model->proto->graph;
    for (size_t i = 0; i < g->n_node; i++)
        if (g->node[i]->op_type && !strcmp(g->node[i]->op_type, "MatMulNBits")) {
            const wm_onnx_attr *a = NULL;
            for (size_t k = 0; k < g->node[i]->n_attribute; k++)
                if (!strcmp(g->node[i]->attribute[k]->name, "bits")) a = g->node[i]->attribute[k];
            return a && a->i == 8 ? "int8" : "int4";
        }
    uint64_t by[WM_DT_COUNT] = {0};
    for (size_t i = 0; i < g->n_initializer; i++) {
        const wm_onnx_tensor *t = g->initializer[i];
        uint64_t numel;
        if (t->data_type > 0 && t->data_type < WM_DT_COUNT && wm_onnx_tensor_numel(t, &numel, NULL) == WM_OK)
            by[t->data_type] += numel * wm_dtype_size(t->data_type);
    }
    int best = WM_DT_FLOAT;
    for (int d = 1; d < WM_DT_COUNT; d++)
        if (by[d] > by[best]) best = d;
    switch (best) {
    case WM_DT_FLOAT16: return "fp16";
    case WM_DT_BFLOAT16: return "bf16";
    case WM_DT_INT8: case WM_DT_UINT8: return "int8";
    case WM_DT_DOUBLE: return "fp64";
    default: return "fp32";
    }
}

wm_status wm_session_value_of(const wm_session *s, const char *name, wm_tensor *out, wm_error *err) {
    if (!s->opts.keep_values) return wm_err(err, WM_ERR_USAGE, "the session was not made with keep_values");
    if (!s->last) return wm_err(err, WM_ERR_USAGE, "no run yet");
    int v = wm_session_value(s, name);
    if (v < 0) return wm_err(err, WM_ERR_INPUT, "no value named '%s'", name);
    const wm_tensor *t = &s->last->t[v];
    if (!t->data && wm_tensor_numel(t)) return wm_err(err, WM_ERR_INPUT, "value '%s' was not computed", name);
    *out = *t;
    return WM_OK;
}

size_t wm_session_n_values(const wm_session *s) { return s->n_vals; }
const char *wm_session_value_name(const wm_session *s, size_t i) { return i < s->n_vals ? s->vals[i].name : NULL; }

const char *wm_session_value_producer(const wm_session *s, const char *name, const char **op_type) {
    int v = wm_session_value(s, name);
    if (op_type) *op_type = NULL;
    if (v < 0 || s->vals[v].producer < 0) return NULL;
    const wm_node *n = &s->nodes[s->vals[v].producer];
    if (op_type) *op_type = n->proto->op_type;
    return wm_node_label(n);
}

int wm_session_kv_inplace(const wm_session *s, size_t in, size_t out) {
    if (in >= s->n_inputs || out >= s->n_outputs) return 0;
    const char *iname = s->inputs[in].name, *oname = s->outputs[out].name;
    int prod = s->vals[s->out_val[out]].producer, slot = -1, users = 0;
    if (prod < 0 || !(s->nodes[prod].op->flags & WM_OP_KV_INPLACE)) return 0;
    const wm_onnx_node *pp = s->nodes[prod].proto;
    for (int k = 1; k <= 2; k++)
        if ((size_t)k < pp->n_output && pp->output[k] && !strcmp(pp->output[k], oname)) slot = k + 2;
    if (slot < 0 || (size_t)slot >= pp->n_input || !pp->input[slot] || strcmp(pp->input[slot], iname)) return 0;
    for (size_t i = 0; i < s->n_nodes; i++) {
        const wm_onnx_node *np = s->nodes[i].proto;
        for (size_t k = 0; k < np->n_input; k++)
            if (np->input[k] && !strcmp(np->input[k], iname)) {
                if ((int)i != prod || (int)k != slot) return 0;
                users++;
            }
    }
    for (size_t o = 0; o < s->n_outputs; o++)
        if (!strcmp(s->outputs[o].name, iname)) return 0;
    return users == 1;
}
