/*
 * fuse_quant.c - dynamic_quant_matmul: the dynamically quantized product that
 * `winml quantize -p int8` (and onnxruntime's quantize_dynamic) writes,
 *   (q, s, z) = DynamicQuantizeLinear(A)
 *   Y = Mul(Cast<float>(MatMulInteger(q, W, z [, wz])), Mul(s, ws))  [+ Add(Y, bias [N])]
 * with W [K, N], ws, wz and bias constant, becomes one com.microsoft
 * DynamicQuantizeMatMul(A, W, ws, wz, bias) (onnxruntime's CPU provider runs
 * it too): one node instead of four or five, the int32 product never written
 * out, and the same values bit for bit (A quantized by the same rule; the
 * product times (s * ws[n]), plus bias). A DynamicQuantizeLinear shared by
 * several products is repeated in each (A's quantization is cheap next to
 * the product) and goes once none is left to read it.
 */
#include <string.h>

#include "core/error.h"
#include "onnx/dtype.h"
#include "opt/match.h"

/* a constant float32 of one value or of n (rank <= 1) */
static int scale_vec(const wm_graph *g, const char *v, int64_t n, int32_t dt) {
    const wm_onnx_tensor *t = v && *v ? wm_graph_constant(g, v) : NULL;
    if (!t || t->data_type != dt || t->n_dims > 1) return 0;
    return t->n_dims == 0 || t->dims[0] == 1 || t->dims[0] == n;
}

static wm_status one(wm_pass_ctx *c, wm_onnx_node *mi) {
    wm_graph *g = c->g;
    const char *q = wm_opt_in(mi, 0), *w = wm_opt_in(mi, 1), *z = wm_opt_in(mi, 2), *wz = wm_opt_in(mi, 3);
    wm_onnx_node *dq = q ? wm_m_prod(g, q, "DynamicQuantizeLinear") : NULL;
    const wm_onnx_tensor *wt = w ? wm_graph_constant(g, w) : NULL;
    if (!dq || dq->n_output < 3 || !wm_opt_in(dq, 0) || strcmp(wm_opt_out(dq, 0) ? wm_opt_out(dq, 0) : "", q) ||
        !z || strcmp(wm_opt_out(dq, 2) ? wm_opt_out(dq, 2) : "", z) || !wt || wt->n_dims != 2 ||
        (wt->data_type != WM_DT_INT8 && wt->data_type != WM_DT_UINT8))
        return WM_OK;
    int64_t n = wt->dims[1];
    if (wz && !scale_vec(g, wz, n, wt->data_type)) return WM_OK;
    wm_onnx_node *cast = wm_m_sole(g, wm_opt_out(mi, 0), "Cast");
    if (!cast || wm_opt_attr_i(cast, "to", 0) != WM_DT_FLOAT) return WM_OK;
    wm_onnx_node *mul = wm_m_sole(g, wm_opt_out(cast, 0), "Mul");
    const char *sm = mul ? wm_m_other(mul, wm_opt_out(cast, 0)) : NULL, *s = wm_opt_out(dq, 1);
    wm_onnx_node *smn = sm ? wm_m_prod(g, sm, "Mul") : NULL;
    const char *ws = smn && s ? wm_m_other(smn, s) : NULL;
    if (!ws || !scale_vec(g, ws, n, WM_DT_FLOAT)) return WM_OK;
    /* a bias */
    wm_onnx_node *last = mul, *add = wm_m_sole(g, wm_opt_out(mul, 0), "Add");
    const char *bias = add ? wm_m_other(add, wm_opt_out(mul, 0)) : NULL;
    const wm_onnx_tensor *bt = bias ? wm_graph_constant(g, bias) : NULL;
    if (bt && bt->data_type == WM_DT_FLOAT && bt->n_dims == 1 && bt->dims[0] == n) last = add;
    else bias = NULL;
    const char *in[5] = {wm_opt_in(dq, 0), w, ws, wz ? wz : "", bias ? bias : ""}, *out[1] = {wm_opt_out(last, 0)};
    if (!wm_opt_replace(g, last, "DynamicQuantizeMatMul", "com.microsoft", in, bias ? 5 : wz ? 4 : 3, out, 1, c->err))
        return c->err->status ? c->err->status : WM_ERR_NOMEM;
    c->fired++;
    return WM_OK; /* the MatMulInteger, Cast and (bias) Mul left without readers go with the dead nodes */
}

wm_status wm_pass_dyn_quant_matmul(wm_pass_ctx *c) { return wm_opt_each_op(c, "MatMulInteger", one); }
