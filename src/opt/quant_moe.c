/*
 * quant_moe.c - weight-only int4 / int8 of mixtures of experts: a com.microsoft MoE whose fc1 and fc2 experts are
 * float32 constants (no fc3) becomes a com.microsoft QMoE with expert_weight_bits = the config's bits, which
 * onnxruntime's CPU kernel and ours both run.
 *
 * QMoE reads expert e's weight t as MatMulNBits reads a weight: N rows of K codes, the lower index in the low
 * nibble, w = (code - 2^(bits-1)) * scale, one scale per row (block_size 0) or per block of block_size values. It
 * has no zero points here, so each expert's rows are quantized symmetric: RTN (wm_quant_blocks, onnxruntime's values),
 * or with quant.rtn_scale_search RTN's scale and the candidates around it, the least squared error kept
 * (wm_quant_blocks_search). The block is the config's block_size halved until it
 * divides both the hidden size and the experts' width (at least 16), else one scale per row; blocked experts take the
 * config's accuracy_level as MatMulNBits does (4: int8 activations in both runtimes).
 *
 * Each expert is read, quantized and its float pages released one at a time, so a pass holds one layer's codes
 * besides one expert's floats.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "onnx/dtype.h"
#include "opt/quant_impl.h"

/* the block of QMoE's rows of K for both widths (0: a scale per row; -1: none fits: K odd at 4 bits) */
static int64_t moe_block(int64_t want, int bits, int64_t H, int64_t I) {
    for (int64_t b = want; b >= 16; b /= 2)
        if (!(H % b) && !(I % b)) return b;
    return bits == 4 && (H % 2 || I % 2) ? -1 : 0;
}

/* The float32 constant [E, N, K] of input name into its QMoE codes [E, N, kb * blob] and scales ([E, N, kb] or
   [E, N]) as new initializers; *q and *s receive their names. WM_ERR_UNSUPPORTED (nothing added) when the input is
   no float32 constant of those dims. */
wm_status wm_quant_moe_consts(wm_graph *g, const char *name, int bits, int64_t E, int64_t N, int64_t row_bytes,
                              int64_t n_scales, int rank_s, const uint8_t *codes, size_t nq, const float *scales,
                              size_t ns, const char **q, const char **s, uint64_t *bytes, wm_error *err) {
    int64_t qd[3] = {E, N, row_bytes}, sd[3] = {E, N, n_scales};
    char pre[192];
    snprintf(pre, sizeof pre, "%s_q%d", name, bits);
    *q = wm_opt_const_raw(g, pre, WM_DT_UINT8, qd, 3, codes, nq, err);
    snprintf(pre, sizeof pre, "%s_scales", name);
    *s = *q ? wm_opt_const_raw(g, pre, WM_DT_FLOAT, sd, rank_s, scales, ns * sizeof *scales, err) : NULL;
    if (!*q || !*s) return err->status ? err->status : wm_err(err, WM_ERR_NOMEM, "out of memory");
    *bytes += nq + ns * sizeof *scales;
    return WM_OK;
}

static wm_status quant_experts(wm_graph *g, const char *name, int64_t E, int64_t N, int64_t K, int bits,
                               int64_t block, int search, const char **q, const char **s, uint64_t *bytes,
                               wm_error *err) {
    const wm_onnx_tensor *t = wm_graph_constant(g, name);
    if (!t || t->data_type != WM_DT_FLOAT || t->n_dims != 3 || t->dims[0] != E || t->dims[1] != N ||
        t->dims[2] != K)
        return WM_ERR_UNSUPPORTED;
    wm_bytes b = wm_onnx_tensor_bytes(t);
    size_t per = (size_t)(N * K);
    if (!b.p || b.n != (size_t)E * per * sizeof(float)) return WM_ERR_UNSUPPORTED;
    int64_t bs = block ? block : K, kb = K / bs, blob = bs * bits / 8;
    size_t nq = (size_t)E * (size_t)N * (size_t)(kb * blob), ns = (size_t)E * (size_t)N * (size_t)kb;
    uint8_t *codes = malloc(nq);
    float *scales = malloc(ns * sizeof *scales), *w = malloc(per * sizeof *w), *wt = malloc(per * sizeof *wt);
    wm_status st = WM_OK;
    if (!codes || !scales || !w || !wt) {
        st = wm_err(err, WM_ERR_NOMEM, "out of memory quantizing the experts of '%s'", name);
        goto done;
    }
    for (int64_t e = 0; e < E; e++) {
        const uint8_t *src = b.p + (size_t)e * per * sizeof(float);
        memcpy(w, src, per * sizeof *w);
        wm_opt_release(wm_graph_model(g), src, per * sizeof *w);
        for (int64_t n = 0; n < N; n++) /* [N, K] rows -> the [K, N] a MatMul weight is */
            for (int64_t k = 0; k < K; k++) wt[k * N + n] = w[n * K + k];
        uint8_t *qe = codes + (size_t)e * (size_t)N * (size_t)(kb * blob);
        float *se = scales + (size_t)e * (size_t)N * (size_t)kb;
        if (search) wm_quant_blocks_search(wt, K, N, bs, bits, 1, qe, se, NULL);
        else wm_quant_blocks(wt, K, N, bs, bits, 1, qe, se, NULL);
    }
    st = wm_quant_moe_consts(g, name, bits, E, N, kb * blob, kb, block ? 3 : 2, codes, nq, scales, ns, q, s, bytes, err);
done:
    free(codes);
    free(scales);
    free(w);
    free(wt);
    return st;
}

/* y = Reshape(Reshape(yn, [-1, H]) * ReduceSum(TopK(Softmax(router), k).values, -1), Shape(x)): the normalized
   mixture yn scaled back by the sum of its k routing weights */
static wm_status topk_sum_scale(wm_graph *g, const char *x, const char *router, const char *yn, const char *y,
                                int64_t k, int64_t H, wm_error *err) {
    int64_t minus1 = -1, flat[2] = {-1, H};
    const char *kc = wm_opt_const_i64(g, "qmoe_k", &k, 1, 0, err), *ax = wm_opt_const_i64(g, "qmoe_axis", &minus1, 1, 0, err);
    const char *fc = wm_opt_const_i64(g, "qmoe_rows", flat, 2, 0, err);
    if (!kc || !ax || !fc) return err->status;
    const char *smo;
    wm_onnx_node *sm = wm_opt_emit_node(g, "Softmax", NULL, &router, 1, &smo, err);
    if (!sm || wm_graph_set_attr_int(g, sm, "axis", -1, err)) return err->status;
    const char *tk_in[2] = {smo, kc}, *tk_out[2] = {wm_opt_name(g, "qmoe_topk"), wm_opt_name(g, "qmoe_topk_i")};
    if (!tk_out[0] || !tk_out[1]) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    if (!wm_opt_add(g, "TopK", NULL, "qmoe_topk", tk_in, 2, tk_out, 2, err)) return err->status;
    const char *rs_in[2] = {tk_out[0], ax}, *sum = wm_opt_emit(g, "ReduceSum", NULL, rs_in, 2, err);
    const char *r2_in[2] = {yn, fc}, *y2 = sum ? wm_opt_emit(g, "Reshape", NULL, r2_in, 2, err) : NULL;
    const char *mul_in[2] = {y2, sum}, *m = y2 ? wm_opt_emit(g, "Mul", NULL, mul_in, 2, err) : NULL;
    const char *shp = m ? wm_opt_emit(g, "Shape", NULL, &x, 1, err) : NULL;
    const char *fin[2] = {m, shp}, *out[1] = {y};
    if (!shp || !wm_opt_add(g, "Reshape", NULL, "qmoe_unflat", fin, 2, out, 1, err)) return err->status;
    return WM_OK;
}

wm_status wm_quant_moe_replace(wm_graph *g, wm_onnx_node *n, const char *q1, const char *s1, const char *q2,
                               const char *s2, int bits, int64_t block, int accuracy, wm_error *err) {
    wm_status st = WM_OK;
    const wm_onnx_tensor *w1 = wm_graph_constant(g, n->input[2]); /* the float fc1, until the node goes */
    int64_t H = w1 && w1->n_dims == 3 ? w1->dims[2] : 0;
    /* the attributes QMoE shares with MoE, read before the node goes */
    static const char *const ints[] = {"k", "swiglu_fusion", "normalize_routing_weights", "use_sparse_mixer"};
    static const char *const floats[] = {"activation_alpha", "activation_beta", "swiglu_limit"};
    int64_t iv[4];
    float fv[3];
    int has_i[4], has_f[3];
    for (int a = 0; a < 4; a++)
        has_i[a] = wm_graph_node_attr(n, ints[a]) != NULL, iv[a] = wm_opt_attr_i(n, ints[a], 0);
    for (int a = 0; a < 3; a++)
        has_f[a] = wm_graph_node_attr(n, floats[a]) != NULL, fv[a] = wm_opt_attr_f(n, floats[a], 0);
    char act[32] = "relu";
    const wm_onnx_attr *at = wm_graph_node_attr(n, "activation_type");
    if (at && at->s.p && at->s.n < sizeof act) memcpy(act, at->s.p, at->s.n), act[at->s.n] = 0;
    const char *b1 = n->n_input > 3 ? n->input[3] : "", *b2 = n->n_input > 5 ? n->input[5] : "";
    const char *x = n->input[0], *router = n->input[1], *y = n->output[0];
    const char *in[8] = {x, router, q1, s1, b1, q2, s2, b2}, *out[1] = {y};
    /* onnxruntime's CPU QMoE renormalizes the top-k weights whatever normalize_routing_weights says: unnormalized
       routing (Qwen2-MoE's norm_topk_prob false) is QMoE's output times the k weights' sum, in plain ops */
    int unnorm = has_i[2] && !iv[2];
    if (unnorm && !(out[0] = wm_opt_name(g, "qmoe_normalized"))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    wm_onnx_node *qn = wm_opt_replace(g, n, "QMoE", "com.microsoft", in, b2[0] ? 8 : 7, out, 1, err);
    if (!qn || (unnorm && (st = topk_sum_scale(g, x, router, out[0], y, iv[0], H, err)))) return err->status;
    if (unnorm) iv[2] = 1;
    for (int a = 0; a < 4 && !st; a++)
        if (has_i[a]) st = wm_graph_set_attr_int(g, qn, ints[a], iv[a], err);
    for (int a = 0; a < 3 && !st; a++)
        if (has_f[a]) st = wm_graph_set_attr_float(g, qn, floats[a], fv[a], err);
    if (!st) st = wm_graph_set_attr_string(g, qn, "activation_type", act, err);
    if (!st) st = wm_graph_set_attr_int(g, qn, "expert_weight_bits", bits, err);
    if (!st && block) st = wm_graph_set_attr_int(g, qn, "block_size", block, err);
    if (!st && block && accuracy)
        st = wm_graph_set_attr_int(g, qn, "accuracy_level", accuracy, err);
    return st;
}

wm_status wm_quant_moe(wm_graph *g, const wm_quant_config *c, wm_quant_report *r, wm_error *err) {
    size_t nn;
    wm_onnx_node **nodes = wm_opt_snapshot(g, &nn, err);
    if (!nodes) return err->status;
    int bits = c->bits ? c->bits : 4;
    wm_status st = WM_OK;
    for (size_t i = 0; i < nn && !st; i++) {
        wm_onnx_node *n = nodes[i];
        if (!wm_opt_is_ms(n, "MoE") || n->n_input < 5 || (n->n_input > 6 && n->input[6][0])) continue;
        const wm_onnx_tensor *w1 = wm_graph_constant(g, n->input[2]), *w2 = wm_graph_constant(g, n->input[4]);
        if (!w1 || !w2 || w1->n_dims != 3 || w2->n_dims != 3) continue;
        int64_t E = w1->dims[0], F1 = w1->dims[1], H = w1->dims[2], I = w2->dims[2];
        int64_t block = moe_block(c->block_size ? c->block_size : 32, bits, H, I);
        if (block < 0 || w2->dims[0] != E || w2->dims[1] != H) continue;
        const char *q1, *s1, *q2, *s2;
        uint64_t bytes = 0;
        st = quant_experts(g, n->input[2], E, F1, H, bits, block, c->scale_search, &q1, &s1, &bytes, err);
        if (!st) st = quant_experts(g, n->input[4], E, H, I, bits, block, c->scale_search, &q2, &s2, &bytes, err);
        if (st == WM_ERR_UNSUPPORTED && !err->status) {
            st = WM_OK; /* not float32 constants: left as it is */
            continue;
        }
        if (st) break;
        if ((st = wm_quant_moe_replace(g, n, q1, s1, q2, s2, bits, block, c->accuracy_level, err))) break;
        r->quantized++;
        r->n_qmoe++;
        r->qmoe_bytes += bytes;
    }
    free(nodes);
    return st;
}
