/*
 * fuse_attn_split.c - MultiHeadAttention whose Q, K and V are the three equal
 * parts of one projection, Split(MatMul(x, W[D_in, 3D]) [+ b[3D]], last axis)
 * (GPT-2's c_attn, and any model with a fused QKV Linear), becomes the
 * com.microsoft Attention op on x, W and b: the projection and the attention in
 * one node, so the engine never copies Q, K and V out of the projection's output
 * (GPT-2 at 128 tokens: 12 Splits, 2.8% of the forward pass). Runs after
 * gemm_reshape, which turns the exporters' Reshape/Gemm/Reshape into MatMul + Add.
 */
#include "core/error.h"
#include "onnx/dtype.h"
#include "opt/match.h"
#include "opt/passes.h"

/* 1 when split has three outputs, each d wide along the last axis of a rank-3 input */
static int equal_thirds(const wm_pass_ctx *c, const wm_onnx_node *split, int64_t d) {
    const char *x = wm_opt_in(split, 0);
    int64_t axis = wm_opt_attr_i(split, "axis", 0);
    if (split->n_output != 3 || !x || wm_shapes_rank(c->sh, x) != 3 || (axis != 2 && axis != -1)) return 0;
    size_t k;
    const int64_t *a = wm_opt_attr_ints(split, "split", &k);
    if (a) return k == 3 && a[0] == d && a[1] == d && a[2] == d;
    const char *s = wm_opt_in(split, 1);
    if (!s) return wm_shapes_dim(c->sh, x, -1) == 3 * d;
    wm_ct t;
    if (!wm_opt_const(c->g, s, 3, &t)) return 0;
    int ok = t.n == 3 && (t.dtype == WM_DT_INT64 || t.dtype == WM_DT_INT32);
    for (int i = 0; ok && i < 3; i++)
        ok = (t.dtype == WM_DT_INT64 ? ((const int64_t *)t.data)[i] : ((const int32_t *)t.data)[i]) == d;
    wm_ct_free(&t);
    return ok;
}

static wm_status one(wm_pass_ctx *c, wm_onnx_node *n) {
    if (!wm_opt_is_ms(n, "MultiHeadAttention") || n->n_output > 1 || wm_opt_in(n, 4) || wm_opt_in(n, 6) ||
        wm_opt_in(n, 7) || wm_opt_in(n, 8) || wm_opt_in(n, 9))
        return WM_OK;
    const char *q = wm_opt_in(n, 0), *k = wm_opt_in(n, 1), *v = wm_opt_in(n, 2);
    wm_onnx_node *split = q ? wm_m_prod(c->g, q, "Split") : NULL;
    if (!split || !k || !v || split->n_output != 3 || strcmp(split->output[0], q) || strcmp(split->output[1], k) ||
        strcmp(split->output[2], v))
        return WM_OK;
    for (int i = 0; i < 3; i++)
        if (wm_opt_sole_consumer(c->g, split->output[i]) != n) return WM_OK;
    /* the projection: MatMul(x, W const [D_in, 3D]), maybe behind Add(., b const [3D]) */
    const char *p = wm_opt_in(split, 0), *b = wm_opt_in(n, 3), *x = NULL, *w = NULL;
    wm_onnx_node *add = wm_m_prod(c->g, p, "Add"), *mm = NULL;
    if (add && wm_opt_sole_consumer(c->g, p) == split) {
        for (int s = 0; s < 2 && !mm; s++) {
            const wm_onnx_tensor *t = wm_graph_constant(c->g, wm_opt_in(add, (size_t)s));
            wm_onnx_node *m = wm_m_prod(c->g, wm_opt_in(add, (size_t)(1 - s)), "MatMul");
            if (t && t->n_dims == 1 && m && wm_opt_sole_consumer(c->g, m->output[0]) == add)
                mm = m, b = b ? NULL : add->input[s]; /* two biases: not this form */
        }
        if (!mm || !b) return WM_OK;
    } else if ((mm = wm_m_prod(c->g, p, "MatMul")) == NULL || wm_opt_sole_consumer(c->g, p) != split) {
        return WM_OK;
    }
    x = wm_opt_in(mm, 0), w = wm_opt_in(mm, 1);
    const wm_onnx_tensor *wt = w ? wm_graph_constant(c->g, w) : NULL;
    if (!x || !wt || wt->n_dims != 2 || wt->dims[1] % 3 || wm_shapes_rank(c->sh, x) != 3) return WM_OK;
    int64_t d = wt->dims[1] / 3, heads = wm_opt_attr_i(n, "num_heads", 0);
    const wm_onnx_tensor *bt = b ? wm_graph_constant(c->g, b) : NULL;
    if (heads <= 0 || d % heads || !equal_thirds(c, split, d) || (b && (!bt || bt->n_dims != 1 || bt->dims[0] != 3 * d)))
        return WM_OK;
    if (!b) { /* the op's bias input: zeros */
        wm_ct z;
        int64_t len = 3 * d;
        if (wm_ct_alloc(&z, wt->data_type, &len, 1, c->err)) return c->err->status;
        b = wm_opt_name(c->g, "qkv_bias");
        wm_status st = b ? wm_opt_add_ct(c->g, b, &z, c->err) : WM_ERR_NOMEM;
        wm_ct_free(&z);
        if (st) return st;
    }
    const char *mask = wm_opt_in(n, 5), *in[6] = {x, w, b, "", "", mask ? mask : ""}, *out[1] = {n->output[0]};
    float scale = wm_opt_attr_f(n, "scale", 0.0f), filt = wm_opt_attr_f(n, "mask_filter_value", -10000.0f);
    int64_t uni = wm_opt_attr_i(n, "unidirectional", 0);
    wm_onnx_node *f = wm_opt_replace(c->g, n, "Attention", "com.microsoft", in, mask ? 6 : 3, out, 1, c->err);
    if (!f || wm_graph_set_attr_int(c->g, f, "num_heads", heads, c->err) ||
        (scale != 0.0f && wm_graph_set_attr_float(c->g, f, "scale", scale, c->err)) ||
        (filt != -10000.0f && wm_graph_set_attr_float(c->g, f, "mask_filter_value", filt, c->err)) ||
        (uni && wm_graph_set_attr_int(c->g, f, "unidirectional", uni, c->err)))
        return c->err->status ? c->err->status : WM_ERR_NOMEM;
    c->fired++;
    return WM_OK;
}

wm_status wm_pass_attn_split(wm_pass_ctx *c) {
    size_t nn;
    wm_onnx_node **v = wm_opt_snapshot(c->g, &nn, c->err);
    if (!v) return WM_ERR_NOMEM;
    wm_status s = WM_OK;
    for (size_t i = 0; i < nn && !s; i++)
        if (wm_opt_is_ms(v[i], "MultiHeadAttention")) s = one(c, v[i]);
    free(v);
    return s;
}
