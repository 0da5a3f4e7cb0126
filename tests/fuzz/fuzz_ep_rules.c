/*
 * libFuzzer target for the EP rule-file parser (data/ep_rules/<ep>.json): arbitrary
 * bytes as a rule file. Parsing must fail cleanly (WM_ERR_INPUT naming the file) or
 * give a rule set whose invariants hold; an accepted set is then matched against a
 * small fixed graph (dtype, rank, static-shape, constant-input, attribute, opset,
 * contrib and unknown ops) on each of its devices, with JSON output and components.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "core/error.h"
#include "onnx/dtype.h"
#include "onnx/graph.h"
#include "onnx/onnx_model.h"

static wm_onnx_model *model;
static wm_graph *graph;

static void opset(wm_onnx_model *m, const char *domain, int64_t v) {
    wm_onnx_opset *o = wm_pb_new(&m->arena, &wm_onnx_opset_desc);
    if (!o) abort();
    o->domain = domain ? wm_arena_strdup(&m->arena, domain) : NULL;
    o->version = v;
    *(wm_onnx_opset **)wm_vec_push(&m->arena, &m->proto->opset_import, &m->proto->n_opset_import, sizeof o) = o;
}

static void node(const char *op, const char *dom, const char *name, const char *const *in, size_t ni,
                 const char *const *out, size_t no) {
    wm_error e = {0};
    if (!wm_graph_add_node(graph, op, dom, name, in, ni, out, no, &e)) abort();
}

/* x[batch, 6] float32 -> MatMul(w) -> Reshape(shape init) -> Softmax(axis 1) -> GQA(contrib) -> Frob (unknown). */
static void build_graph(void) {
    model = wm_onnx_model_new();
    if (!model) abort();
    model->proto->graph = wm_pb_new(&model->arena, &wm_onnx_graph_desc);
    opset(model, "", 17);
    opset(model, "com.microsoft", 1);
    wm_error e = {0};
    if (wm_graph_open(model, model->proto->graph, &graph, &e)) abort();
    static const int64_t xd[2] = {-1, 6}, wd[2] = {6, 6}, sd[1] = {2}, shape[2] = {3, 4};
    if (wm_graph_add_input(graph, "x", WM_DT_FLOAT, xd, 2, &e)) abort();
    static const float w[36];
    if (wm_graph_add_initializer(graph, "w", WM_DT_FLOAT, wd, 2, (wm_bytes){(const uint8_t *)w, sizeof w}, NULL, &e) ||
        wm_graph_add_initializer(graph, "shape", WM_DT_INT64, sd, 1, (wm_bytes){(const uint8_t *)shape, sizeof shape},
                                 NULL, &e))
        abort();
    node("MatMul", "", "/model/layers.0/attn/q_proj/MatMul", (const char *const[]){"x", "w"}, 2,
         (const char *const[]){"q"}, 1);
    node("Reshape", "", "/model/layers.0/attn/Reshape", (const char *const[]){"q", "shape"}, 2,
         (const char *const[]){"r"}, 1);
    node("Reshape", "", "/model/layers.0/attn/Reshape_1", (const char *const[]){"r", "q"}, 2,
         (const char *const[]){"r2"}, 1);
    node("Softmax", "", "/model/layers.1/mlp/Softmax", (const char *const[]){"r2"}, 1, (const char *const[]){"s"}, 1);
    node("GroupQueryAttention", "com.microsoft", "Gqa_1", (const char *const[]){"s", "s", "s"}, 3,
         (const char *const[]){"g"}, 1);
    node("Frob", "", "/lm_head/Frob", (const char *const[]){"g"}, 1, (const char *const[]){"y"}, 1);
    wm_onnx_node *sm = wm_graph_producer(graph, "s");
    if (!sm || wm_graph_set_attr_int(graph, sm, "axis", 1, &e)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!graph) build_graph();
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    wm_error err = {0};
    wm_ep_rules *r = NULL;
    wm_status s = wm_ep_rules_parse(text, "fuzz.json", &r, &err);
    free(text);
    if (s) {
        if (r || (s != WM_ERR_INPUT && s != WM_ERR_NOMEM) || !strstr(err.msg, "fuzz.json")) abort();
        return 0;
    }
    if (!r || !r->ep || !r->source || !(r->devices & WM_DEV_ALL) || (r->devices & ~WM_DEV_ALL)) abort();
    for (size_t i = 0; i < r->n_rules; i++) {
        const wm_rule *ru = &r->rules[i];
        if (!ru->op_type || !ru->domain || !ru->reason || ru->since < 1 || (ru->until >= 0 && ru->until < ru->since) ||
            ru->level == WM_LEVEL_UNKNOWN || ru->level > WM_LEVEL_UNSUPPORTED || (ru->devices & ~r->devices))
            abort();
    }
    for (unsigned dev = WM_DEV_CPU; dev <= WM_DEV_NPU; dev <<= 1) {
        if (!(r->devices & dev)) continue;
        wm_analysis a;
        if (wm_analyze_graph(graph, r, dev, &a, &err) == WM_OK) {
            size_t sum = 0;
            for (int l = 0; l < 4; l++) sum += a.counts[l];
            if (sum != a.n_nodes || a.ep_nodes + a.cpu_nodes != a.n_nodes) abort();
            wm_json j;
            wm_json_init(&j);
            wm_analysis_json(graph, &a, &j, NULL);
            wm_json_free(&j);
        }
        wm_analysis_free(&a);
    }
    wm_ep_rules_free(r);
    return 0;
}
