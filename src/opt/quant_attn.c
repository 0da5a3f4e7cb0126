/*
 * quant_attn.c - the packed QKV projection of com.microsoft Attention made quantizable.
 *
 * The optimizer packs an encoder's Q, K and V projections into Attention's weight [D_in, 3D] (one GEMM, no
 * copies). No quantized form of that op runs everywhere (QAttention is dynamic-int8 only and takes no
 * attention_bias), so a quantizer that only rewrites MatMuls would leave a quarter of each layer's weights in
 * float32. wm_quant_unpack_attention gives such a node back as three MatMuls of its input (the weight's column
 * thirds) feeding MultiHeadAttention with the same bias (Q|K|V, the layout both ops take), attention_bias, heads
 * and scale: the same function, now with MatMuls the quantizer reaches.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/dtype.h"
#include "opt/quant_impl.h"

/* 1 when Attention node n has the form MultiHeadAttention can take: x, a constant float [D_in, 3D] weight split in
 * equal thirds, an optional constant bias, attention_bias only (no mask_index, past or rotary), not causal. */
static int unpackable(const wm_graph *g, const wm_onnx_node *n) {
    const wm_onnx_tensor *w = wm_graph_constant(g, wm_opt_in(n, 1));
    const char *b = wm_opt_in(n, 2);
    if (!wm_opt_in(n, 0) || !w || w->n_dims != 2 || w->data_type != WM_DT_FLOAT || w->dims[1] % 3) return 0;
    if (b && !wm_graph_constant(g, b)) return 0;
    if (wm_opt_in(n, 3) || wm_opt_in(n, 4) || wm_opt_in(n, 6) || n->n_output > 1) return 0;
    if (wm_opt_attr_i(n, "unidirectional", 0) || wm_opt_attr_i(n, "do_rotary", 0) || wm_opt_attr_i(n, "num_heads", 0) < 1)
        return 0;
    size_t k;
    const int64_t *h = wm_opt_attr_ints(n, "qkv_hidden_sizes", &k);
    return !h || (k == 3 && h[0] == w->dims[1] / 3 && h[1] == h[0] && h[2] == h[0]);
}

/* The column thirds of constant w [K, 3D] as new initializers names[0..2] (w decoded once); WM_OK or err set. */
static wm_status thirds(wm_graph *g, const char *w, const char *names[3], wm_error *err) {
    wm_ct all, part;
    wm_status s = wm_ct_from_tensor(wm_graph_constant(g, w), 0, &all, err);
    if (s) return s;
    int64_t K = all.dims[0], D = all.dims[1] / 3, dims[2] = {K, D};
    for (int i = 0; i < 3 && !s; i++) {
        if ((s = wm_ct_alloc(&part, WM_DT_FLOAT, dims, 2, err))) break;
        for (int64_t r = 0; r < K; r++)
            memcpy((float *)part.data + r * D, (const float *)all.data + r * 3 * D + (int64_t)i * D, (size_t)D * 4);
        char want[160];
        snprintf(want, sizeof want, "%.140s_%c", w, "qkv"[i]);
        if (!(names[i] = wm_opt_name(g, want))) s = wm_err(err, WM_ERR_NOMEM, "out of memory");
        else s = wm_opt_add_ct(g, names[i], &part, err);
        wm_ct_free(&part);
    }
    wm_ct_free(&all);
    return s;
}

static wm_status unpack(wm_graph *g, wm_onnx_node *n, wm_error *err) {
    const char *x = wm_opt_in(n, 0), *w = wm_opt_in(n, 1), *b = wm_opt_in(n, 2), *ab = wm_opt_in(n, 5);
    const char *proj[3], *ws[3];
    wm_status st = thirds(g, w, ws, err);
    if (st) return st;
    for (int i = 0; i < 3; i++) {
        const char *in[2] = {x, ws[i]};
        char pre[160];
        snprintf(pre, sizeof pre, "%.140s/%c_proj", n->name ? n->name : "Attention", "qkv"[i]);
        const char *o = wm_opt_name(g, pre);
        wm_onnx_node *m = o ? wm_opt_add(g, "MatMul", NULL, pre, in, 2, &o, 1, err) : NULL;
        if (!m) return err->status ? err->status : wm_err(err, WM_ERR_NOMEM, "out of memory");
        proj[i] = m->output[0];
    }
    int64_t heads = wm_opt_attr_i(n, "num_heads", 0);
    float scale = wm_opt_attr_f(n, "scale", 0.0f);
    const char *in[6] = {proj[0], proj[1], proj[2], b ? b : "", "", ab ? ab : ""};
    size_t n_in = ab ? 6 : b ? 4 : 3;
    const char *out[1] = {n->output[0]};
    wm_onnx_node *mha = wm_opt_replace(g, n, "MultiHeadAttention", "com.microsoft", in, n_in, out, 1, err);
    if (!mha || wm_graph_set_attr_int(g, mha, "num_heads", heads, err) ||
        (scale != 0.0f && wm_graph_set_attr_float(g, mha, "scale", scale, err)))
        return err->status ? err->status : wm_err(err, WM_ERR_NOMEM, "out of memory");
    return WM_OK;
}

wm_status wm_quant_unpack_attention(wm_graph *g, const wm_quant_config *c, size_t *n_unpacked, wm_error *err) {
    if (n_unpacked) *n_unpacked = 0;
    if (c->mode == WM_QUANT_FP16 || c->mode == WM_QUANT_CARRY) return WM_OK;
    /* asked for by name, as onnxruntime's quantizer takes op_types_to_quantize "Attention"; the default op types
       leave it packed (int8 of the attention input costs seq2seq encoders accuracy: marian's tiny int8 encoder
       went from under 0.15 to 0.28 relative error against float) */
    if (!wm_quant_listed(c->op_types, c->n_op_types, "Attention")) return WM_OK;
    size_t n, done = 0;
    wm_onnx_node **v = wm_opt_snapshot(g, &n, err);
    if (!v) return WM_ERR_NOMEM;
    wm_status s = WM_OK;
    for (size_t i = 0; i < n && !s; i++) {
        if (!wm_opt_is_ms(v[i], "Attention") || !unpackable(g, v[i])) continue;
        if (v[i]->name && wm_quant_listed(c->exclude, c->n_exclude, v[i]->name)) continue;
        if (!(s = unpack(g, v[i], err))) done++;
    }
    free(v);
    if (n_unpacked) *n_unpacked = done;
    if (!s && done) s = wm_graph_topo_sort(g, err); /* the new nodes were appended after their readers */
    return s;
}
