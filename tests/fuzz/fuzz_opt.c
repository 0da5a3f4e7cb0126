/*
 * libFuzzer target for the optimizer and quantizer: decode arbitrary bytes
 * as a model; when its graph is valid (SSA, sortable), run every optimizer
 * pass, then fp16 and int4 quantization. Invariants: no crash, no leak, and
 * a graph that was valid before stays valid (checked, and re-encoded and
 * decoded again).
 */
#include <stdint.h>
#include <stdlib.h>

#include "onnx/graph.h"
#include "onnx/onnx_model.h"
#include "opt/opt.h"
#include "opt/quant.h"

static void roundtrip(wm_onnx_model *m) {
    size_t n = 0;
    uint8_t *buf = wm_pb_encode_alloc(&wm_onnx_model_desc, m->proto, &n);
    if (!buf) return;
    wm_onnx_model *m2 = NULL;
    wm_error e = {0};
    if (wm_onnx_load_buffer(buf, n, &m2, &e) != WM_OK) abort(); /* what we produce must decode */
    wm_onnx_free(m2);
    free(buf);
}

static void quantize(const uint8_t *data, size_t size, wm_quant_mode mode) {
    wm_error e = {0};
    wm_onnx_model *m = NULL;
    wm_graph *g = NULL;
    if (wm_onnx_load_buffer(data, size, &m, &e) || !m->proto->graph ||
        wm_graph_open(m, m->proto->graph, &g, &e) || wm_graph_check(g, &e) || wm_graph_topo_sort(g, &e))
        goto done;
    wm_quant_config c;
    wm_quant_config_default(&c, mode);
    c.block_size = 16;
    if (wm_quant_run(g, &c, NULL, NULL, &e) == WM_OK) {
        if (wm_graph_check(g, &e) != WM_OK) abort();
        roundtrip(m);
    }
done:
    wm_graph_free(g);
    wm_onnx_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    wm_error e = {0};
    wm_onnx_model *m = NULL;
    wm_graph *g = NULL;
    if (wm_onnx_load_buffer(data, size, &m, &e) || !m->proto->graph) goto done;
    if (wm_graph_open(m, m->proto->graph, &g, &e) || wm_graph_check(g, &e) || wm_graph_topo_sort(g, &e)) goto done;
    wm_opt_config c;
    wm_opt_config_default(&c);
    c.fold_max_bytes = 1 << 16;
    c.max_rounds = 2;
    if (wm_opt_run(g, &c, NULL, &e) == WM_OK) {
        if (wm_graph_check(g, &e) != WM_OK) abort(); /* a valid graph stays valid */
        roundtrip(m);
    }
    quantize(data, size, WM_QUANT_FP16);
    quantize(data, size, WM_QUANT_INT4);
done:
    wm_graph_free(g);
    wm_onnx_free(m);
    return 0;
}
