/*
 * libFuzzer target for the Einsum equation parser and planner: the input
 * is "<n_in><rank, dims...>* equation": 1..3 float inputs of small fuzzed
 * shapes (dims 0..3) and the equation text. A one-node model is built, a
 * session made (refusals are fine) and run once on zero-filled inputs.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/graph.h"
#include "onnx/onnx_model.h"
#include "onnx/pb.h"
#include "winml/runtime.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2 || size > 512) return 0;
    size_t p = 0;
    int n_in = 1 + data[p++] % 3;
    int64_t dims[3][8];
    int rank[3];
    for (int t = 0; t < n_in; t++) {
        rank[t] = p < size ? data[p++] % 6 : 0;
        for (int d = 0; d < rank[t]; d++) dims[t][d] = p < size ? data[p++] % 4 : 1;
    }
    char eq[256];
    size_t ne = size - p < sizeof eq - 1 ? size - p : sizeof eq - 1;
    memcpy(eq, data + p, ne);
    eq[ne] = 0;
    wm_onnx_model *m = wm_onnx_model_new();
    if (!m) return 0;
    m->proto->graph = wm_pb_new(&m->arena, &wm_onnx_graph_desc);
    wm_onnx_opset *o = wm_pb_new(&m->arena, &wm_onnx_opset_desc);
    o->version = 12;
    *(wm_onnx_opset **)wm_vec_push(&m->arena, &m->proto->opset_import, &m->proto->n_opset_import, sizeof o) = o;
    wm_graph *g = NULL;
    wm_error err = {0};
    static const char *names[3] = {"a", "b", "c"};
    if (wm_graph_open(m, m->proto->graph, &g, &err)) goto done;
    for (int t = 0; t < n_in; t++)
        if (wm_graph_add_input(g, names[t], 1, dims[t], (size_t)rank[t], &err)) goto done;
    const char *out = "y";
    wm_onnx_node *nd = wm_graph_add_node(g, "Einsum", NULL, "e", names, (size_t)n_in, &out, 1, &err);
    if (!nd || wm_graph_set_attr_string(g, nd, "equation", eq, &err) || wm_graph_add_output(g, "y", 1, NULL, 0, &err)) goto done;
    wm_graph_free(g);
    g = NULL;
    wm_session *s = NULL;
    wm_session_opts opts = {.threads = 1};
    wm_onnx_model *mm = m;
    m = NULL; /* the session owns it, also on failure */
    if (wm_session_new_model(mm, &opts, &s, &err) == WM_OK) {
        static float zeros[4096];
        wm_tensor in[3], y;
        for (int t = 0; t < n_in; t++) {
            in[t] = (wm_tensor){.dtype = 1, .rank = rank[t], .data = zeros};
            for (int d = 0; d < rank[t]; d++) in[t].dims[d] = dims[t][d];
        }
        wm_error e2 = {0};
        wm_session_run(s, in, (size_t)n_in, &y, 1, &e2);
        wm_session_free(s);
    }
done:
    wm_graph_free(g);
    if (m) wm_onnx_free(m);
    return 0;
}
