/*
 * opt.c - the optimizer driver: the pass table, level and switch selection,
 * rounds to a fixed point, the per-pass report (node counts, rewrites, op
 * histogram deltas) and its JSON form.
 */
#include "opt/opt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "opt/passes.h"

typedef struct pass_entry {
    wm_opt_pass_info info;
    wm_pass_fn fn;
} pass_entry;

static const pass_entry PASSES[] = {
    {{"constant_nodes", WM_OPT_BASIC, "Constant nodes become initializers"}, wm_pass_const_nodes},
    {{"constant_folding", WM_OPT_BASIC, "nodes whose inputs are all constant are evaluated (size-capped)"},
     wm_pass_fold},
    {{"shape_arithmetic", WM_OPT_BASIC,
      "Shape/Gather/Unsqueeze/Concat/Reshape chains whose values are static become constants"},
     wm_pass_shape_values},
    {{"identity_elimination", WM_OPT_BASIC,
      "Identity, Dropout, no-op Cast/Reshape/Transpose/Expand, Cast and Reshape/Transpose chains"},
     wm_pass_identity},
    {{"initializer_dedup", WM_OPT_BASIC, "initializers with equal type, shape and bytes merged"}, wm_pass_dedup},
    {{"common_subexpression", WM_OPT_BASIC, "identical nodes on identical inputs computed once"}, wm_pass_cse},
    {{"dead_nodes", WM_OPT_BASIC, "nodes and initializers nothing uses removed"}, wm_pass_dce},
    {{"layernorm", WM_OPT_EXTENDED, "ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add -> LayerNormalization"},
     wm_pass_layernorm},
    {{"rmsnorm", WM_OPT_EXTENDED, "Pow/ReduceMean/Add/Sqrt/(Div|Reciprocal)/Mul -> SimplifiedLayerNormalization"},
     wm_pass_rmsnorm},
    {{"gelu", WM_OPT_EXTENDED, "x*0.5*(1+Erf(x/sqrt2)) -> Gelu"}, wm_pass_gelu},
    {{"fastgelu", WM_OPT_EXTENDED, "tanh approximation of GELU -> FastGelu"}, wm_pass_fastgelu},
    {{"quickgelu", WM_OPT_EXTENDED, "x*Sigmoid(a*x) (SiLU a=1) -> QuickGelu"}, wm_pass_quickgelu},
    {{"rotary", WM_OPT_EXTENDED, "rotate-half RoPE (Slice/Neg/Concat/Mul/Add) -> RotaryEmbedding"}, wm_pass_rotary},
    {{"gqa", WM_OPT_ALL,
      "decoder attention with past/present KV and rotary -> GroupQueryAttention (unpadded or right-padded batches)"},
     wm_pass_gqa},
    {{"attention", WM_OPT_EXTENDED, "Q/K/V projections + scaled dot-product attention -> MultiHeadAttention"},
     wm_pass_mha},
    {{"gemm_reshape", WM_OPT_EXTENDED,
      "Reshape to 2-D + Gemm + Reshape back -> MatMul + Add on the original rank (its bias then fuses on)"},
     wm_pass_gemm3d},
    {{"attention_split", WM_OPT_EXTENDED,
      "MultiHeadAttention on the three equal parts of one MatMul (+ bias) -> Attention (no Split copy)"},
     wm_pass_attn_split},
    {{"skiplayernorm", WM_OPT_EXTENDED,
      "Add + (Simplified)LayerNormalization -> Skip(Simplified)LayerNormalization, bias folded in"},
     wm_pass_skipnorm},
    {{"biasgelu", WM_OPT_EXTENDED, "Add(bias) + Gelu/FastGelu -> BiasGelu / FastGelu with bias"}, wm_pass_biasgelu},
    {{"gemm", WM_OPT_EXTENDED, "2-D MatMul + Add(bias) -> Gemm"}, wm_pass_gemm},
    {{"dynamic_quant_matmul", WM_OPT_EXTENDED,
      "DynamicQuantizeLinear + MatMulInteger + Cast + Mul(scales) [+ Add(bias)] -> com.microsoft DynamicQuantizeMatMul"},
     wm_pass_dyn_quant_matmul},
    {{"matmul_epilogue", WM_OPT_ENGINE,
      "float32 / float16 MatMul by a constant + bias Add / BiasGelu / activation -> MatMulBias (winml engine op)"},
     wm_pass_matmul_epilogue},
    {{"conv_activation", WM_OPT_ENGINE,
      "float32 Conv + residual Add / Relu / Sigmoid / Tanh / LeakyRelu -> com.microsoft FusedConv"},
     wm_pass_conv_activation},
    {{"matmul_transpose", WM_OPT_ENGINE,
      "float32 / float16 MatMul of a computed B through a Transpose of its last two axes -> com.microsoft FusedMatMul "
      "(transB)"},
     wm_pass_matmul_transpose},
    {{"matmul_group", WM_OPT_ENGINE,
      "MatMulNBits / float16 MatMul nodes on the same input (q/k/v, gate/up) -> one MatMulNBitsGroup / MatMulGroup "
      "(winml engine ops)"},
     wm_pass_matmul_group},
    {{"nhwc_layout", WM_OPT_ENGINE,
      "chains of float32 2-D Conv / FusedConv / MaxPool -> channels-last NhwcConv / NhwcMaxPool (winml engine ops)"},
     wm_pass_nhwc_layout},
};
#define N_PASSES (sizeof PASSES / sizeof PASSES[0])

void wm_opt_config_default(wm_opt_config *c) {
    memset(c, 0, sizeof *c);
    c->level = WM_OPT_ALL;
}

void wm_opt_config_engine(wm_opt_config *c) {
    memset(c, 0, sizeof *c);
    c->level = WM_OPT_EXTENDED;
    c->disable[c->n_disable++] = "initializer_dedup";
    c->enable[c->n_enable++] = "matmul_epilogue";
    c->enable[c->n_enable++] = "conv_activation";
    c->enable[c->n_enable++] = "matmul_transpose";
    c->enable[c->n_enable++] = "matmul_group";
    c->enable[c->n_enable++] = "nhwc_layout";
}

wm_status wm_opt_each_op(wm_pass_ctx *c, const char *op, wm_status (*fn)(wm_pass_ctx *, wm_onnx_node *)) {
    size_t n;
    wm_onnx_node **v = wm_opt_snapshot(c->g, &n, c->err);
    if (!v) return WM_ERR_NOMEM;
    wm_status s = WM_OK;
    for (size_t i = 0; i < n && !s; i++)
        if (wm_opt_is(v[i], op)) s = fn(c, v[i]);
    free(v);
    return s;
}

size_t wm_opt_pass_count(void) { return N_PASSES; }

const wm_opt_pass_info *wm_opt_pass_get(size_t i) { return i < N_PASSES ? &PASSES[i].info : NULL; }

static const pass_entry *find_entry(const char *name) {
    for (size_t i = 0; i < N_PASSES; i++)
        if (!strcmp(PASSES[i].info.name, name)) return &PASSES[i];
    return NULL;
}

const wm_opt_pass_info *wm_opt_pass_find(const char *name) {
    const pass_entry *e = name ? find_entry(name) : NULL;
    return e ? &e->info : NULL;
}

static int listed(const char *const *names, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(names[i], name)) return 1;
    return 0;
}

static int selected(const wm_opt_config *c, const pass_entry *p) {
    if (listed(c->disable, c->n_disable, p->info.name)) return 0;
    if (listed(c->enable, c->n_enable, p->info.name)) return 1;
    return p->info.level <= c->level;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static wm_status validate(const wm_opt_config *c, wm_error *err) {
    for (size_t i = 0; i < c->n_enable; i++)
        if (!find_entry(c->enable[i]))
            return wm_err(err, WM_ERR_USAGE, "--enable-%s: no such pass (see --list-passes)", c->enable[i]);
    for (size_t i = 0; i < c->n_disable; i++)
        if (!find_entry(c->disable[i]))
            return wm_err(err, WM_ERR_USAGE, "--disable-%s: no such pass (see --list-passes)", c->disable[i]);
    return WM_OK;
}

/* Runs one pass with fresh shapes, then sweeps dead nodes and restores a topological order. */
static wm_status run_one(wm_graph *g, const pass_entry *p, const wm_opt_config *c, size_t *fired, wm_error *err) {
    wm_pass_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.g = g;
    ctx.cfg = c;
    ctx.err = err;
    ctx.fold_cap = c->fold_max_bytes ? c->fold_max_bytes : 16ull << 20;
    wm_status s = wm_graph_topo_sort(g, err);
    if (!s) s = wm_shapes_infer(g, &ctx.sh, err);
    if (!s) s = p->fn(&ctx);
    wm_shapes_free(ctx.sh);
    if (s) return s;
    *fired = ctx.fired;
    if (!ctx.fired) return WM_OK;
    if (p->fn != wm_pass_dce) {
        wm_pass_ctx d = ctx;
        d.sh = NULL;
        d.fired = 0;
        if ((s = wm_pass_dce(&d))) return s;
    }
    return wm_graph_topo_sort(g, err);
}

wm_status wm_opt_run_pass(wm_graph *g, const char *name, const wm_opt_config *c, size_t *fired, wm_error *err) {
    wm_opt_config dflt;
    if (!c) {
        wm_opt_config_default(&dflt);
        c = &dflt;
    }
    const pass_entry *p = name ? find_entry(name) : NULL;
    if (!p) return wm_err(err, WM_ERR_USAGE, "no optimizer pass named '%s'", name ? name : "");
    size_t f = 0;
    wm_status s = run_one(g, p, c, &f, err);
    if (fired) *fired = f;
    if (!s && f) s = wm_opt_prune_value_info(g, err);
    return s;
}

/* ---------------------------------------------------------------- histograms */

static int cmp_item(const void *a, const void *b) {
    const wm_opt_hist_item *x = a, *y = b;
    int64_t ax = x->n < 0 ? -x->n : x->n, ay = y->n < 0 ? -y->n : y->n;
    if (ax != ay) return ax < ay ? 1 : -1;
    return strcmp(x->op, y->op);
}

void wm_opt_hist_free(wm_opt_hist *h) {
    if (!h) return;
    free(h->items);
    h->items = NULL;
    h->n = 0;
}

/* Adds d to the count of op in h (h->items sized for every op of the graph plus room). */
static int hist_add(wm_opt_hist *h, size_t cap, const char *op, int64_t d) {
    for (size_t i = 0; i < h->n; i++)
        if (!strcmp(h->items[i].op, op)) {
            h->items[i].n += d;
            return 0;
        }
    if (h->n == cap) return -1;
    snprintf(h->items[h->n].op, sizeof h->items[h->n].op, "%s", op);
    h->items[h->n++].n = d;
    return 0;
}

/* Fills *h (malloc'ed items) with the op counts of g. */
wm_status wm_opt_hist_of(const wm_onnx_graph *g, wm_opt_hist *h, wm_error *err) {
    h->n = 0;
    h->items = calloc(g->n_node + 1, sizeof *h->items);
    if (!h->items) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < g->n_node; i++) hist_add(h, g->n_node + 1, g->node[i]->op_type ? g->node[i]->op_type : "?", 1);
    qsort(h->items, h->n, sizeof *h->items, cmp_item);
    return WM_OK;
}

/* acc += after - before, dropping zero entries; acc grows by realloc. */
static wm_status hist_delta(wm_opt_hist *acc, const wm_opt_hist *before, const wm_opt_hist *after, wm_error *err) {
    size_t cap = acc->n + before->n + after->n;
    wm_opt_hist_item *p = realloc(acc->items, (cap ? cap : 1) * sizeof *p);
    if (!p) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    acc->items = p;
    for (size_t i = 0; i < before->n; i++) hist_add(acc, cap, before->items[i].op, -before->items[i].n);
    for (size_t i = 0; i < after->n; i++) hist_add(acc, cap, after->items[i].op, after->items[i].n);
    size_t k = 0;
    for (size_t i = 0; i < acc->n; i++)
        if (acc->items[i].n) acc->items[k++] = acc->items[i];
    acc->n = k;
    qsort(acc->items, acc->n, sizeof *acc->items, cmp_item);
    return WM_OK;
}

wm_status wm_opt_run(wm_graph *g, const wm_opt_config *c, wm_opt_report *r, wm_error *err) {
    wm_opt_config dflt;
    if (!c) {
        wm_opt_config_default(&dflt);
        c = &dflt;
    }
    wm_status s = validate(c, err);
    if (s) return s;
    wm_onnx_graph *p = wm_graph_proto(g);
    wm_opt_report local;
    if (!r) r = &local;
    memset(r, 0, sizeof *r);
    r->nodes_before = p->n_node;
    r->inits_before = p->n_initializer;
    if ((s = wm_opt_hist_of(p, &r->before, err))) goto done;
    r->passes = calloc(N_PASSES, sizeof *r->passes);
    if (!r->passes) {
        s = wm_err(err, WM_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < N_PASSES; i++) {
        if (!selected(c, &PASSES[i])) continue;
        wm_opt_pass_report *pr = &r->passes[r->n_passes++];
        pr->name = PASSES[i].info.name;
        pr->nodes_before = pr->nodes_after = p->n_node;
    }
    int rounds = c->max_rounds > 0 ? c->max_rounds : 3;
    for (int round = 0; round < rounds; round++) {
        size_t total = 0;
        for (size_t k = 0; k < r->n_passes; k++) {
            wm_opt_pass_report *pr = &r->passes[k];
            size_t before = p->n_node, f = 0;
            wm_opt_hist hb = {0}, ha = {0};
            double t0 = now_ms();
            if ((s = wm_opt_hist_of(p, &hb, err))) goto done;
            s = run_one(g, find_entry(pr->name), c, &f, err);
            pr->ms += now_ms() - t0;
            if (!s && f && !(s = wm_opt_hist_of(p, &ha, err))) s = hist_delta(&pr->delta, &hb, &ha, err);
            wm_opt_hist_free(&hb);
            wm_opt_hist_free(&ha);
            if (s) goto done;
            if (round == 0) pr->nodes_before = before;
            pr->nodes_after = p->n_node;
            pr->fired += f;
            total += f;
        }
        if (!total) break;
    }
    s = wm_opt_prune_value_info(g, err);
done:
    r->nodes_after = p->n_node;
    r->inits_after = p->n_initializer;
    wm_opt_hist_free(&r->after);
    if (wm_opt_hist_of(p, &r->after, NULL) && !s) s = wm_err(err, WM_ERR_NOMEM, "out of memory");
    if (r == &local) wm_opt_report_free(r);
    return s;
}

void wm_opt_report_free(wm_opt_report *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n_passes; i++) wm_opt_hist_free(&r->passes[i].delta);
    free(r->passes);
    wm_opt_hist_free(&r->before);
    wm_opt_hist_free(&r->after);
    memset(r, 0, sizeof *r);
}

static void hist_json(wm_json *j, const char *key, const wm_opt_hist *h) {
    wm_json_obj(j, key);
    for (size_t i = 0; i < h->n; i++) wm_json_int(j, h->items[i].op, h->items[i].n);
    wm_json_obj_end(j);
}

void wm_opt_report_json(const wm_opt_report *r, wm_json *j, const char *key) {
    wm_json_obj(j, key);
    wm_json_uint(j, "nodes_before", r->nodes_before);
    wm_json_uint(j, "nodes_after", r->nodes_after);
    wm_json_uint(j, "initializers_before", r->inits_before);
    wm_json_uint(j, "initializers_after", r->inits_after);
    wm_json_arr(j, "passes");
    for (size_t i = 0; i < r->n_passes; i++) {
        const wm_opt_pass_report *p = &r->passes[i];
        wm_json_obj(j, NULL);
        wm_json_str(j, "name", p->name);
        wm_json_uint(j, "fired", p->fired);
        wm_json_uint(j, "nodes_before", p->nodes_before);
        wm_json_uint(j, "nodes_after", p->nodes_after);
        wm_json_num(j, "ms", p->ms);
        hist_json(j, "ops_delta", &p->delta);
        wm_json_obj_end(j);
    }
    wm_json_arr_end(j);
    hist_json(j, "ops_before", &r->before);
    hist_json(j, "ops_after", &r->after);
    wm_json_obj_end(j);
}
