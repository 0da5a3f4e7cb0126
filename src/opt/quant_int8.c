/*
 * quant_int8.c - 8-bit quantization of MatMul / Gemm weights and activations.
 *
 * Weights (constant [K, N], or [N, K] for Gemm transB) become int8 (or uint8)
 * with one scale per tensor or per output channel:
 *   symmetric:  scale = max(|min|, |max|) / 127, zero point 0, q in [-127, 127]
 *   asymmetric: lo = min(min, 0), hi = max(max, 0), scale = (hi - lo) / 255,
 *               zp = round(-lo / scale), q in [0, 255]
 *   q = round_half_even(w / scale) + zp, clamped.
 * Int8 weights meeting 8-bit activations get 7 bits by default (reduce_range, quant.h: onnxruntime's u8s8
 * kernels would overflow int16 with full-range weights).
 * Dynamic mode: DynamicQuantizeLinear(A) -> MatMulInteger -> Cast -> Mul(a_scale * w_scale).
 * Static mode (QDQ): QuantizeLinear/DequantizeLinear on the activation with a
 * calibrated range (uint8 asymmetric, int8 symmetric, or uint16 for w8a16 and
 * w16a16) and DequantizeLinear on the quantized weight (8-bit, or 16-bit for
 * w16a16: the same formulas over [0, 65535] / [-32768, 32767]); the float op
 * stays. 16-bit Q/DQ before opset 21 are com.microsoft's.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "onnx/dtype.h"
#include "opt/quant_impl.h"

/* ---------------------------------------------------------------- scale / zero point */

typedef struct qparams {
    float scale;
    int32_t zp;
    int32_t qmin, qmax;
} qparams;

static void qrange_of(int32_t qtype, int sym, int reduce, int32_t *qmin, int32_t *qmax) {
    if (reduce && qtype == WM_DT_INT8) {
        *qmin = -64, *qmax = sym ? 64 : 63;
        return;
    }
    if (reduce && qtype == WM_DT_UINT8) {
        *qmin = 0, *qmax = 127;
        return;
    }
    switch (qtype) {
    case WM_DT_INT8: *qmin = sym ? -127 : -128, *qmax = 127; break;
    case WM_DT_UINT16: *qmin = 0, *qmax = 65535; break;
    case WM_DT_INT16: *qmin = sym ? -32767 : -32768, *qmax = 32767; break;
    default: *qmin = 0, *qmax = 255; break;
    }
}

/* Scale and zero point for values in [lo, hi] (the range always includes 0). */
static qparams params_for(float lo, float hi, int32_t qtype, int sym, int reduce) {
    qparams p;
    qrange_of(qtype, sym, reduce, &p.qmin, &p.qmax);
    lo = lo < 0.0f ? lo : 0.0f;
    hi = hi > 0.0f ? hi : 0.0f;
    if (sym) {
        float a = fabsf(lo) > fabsf(hi) ? fabsf(lo) : fabsf(hi);
        p.scale = 2.0f * a / (float)(p.qmax - p.qmin);
        p.zp = (qtype == WM_DT_UINT8 || qtype == WM_DT_UINT16) ? (p.qmax + p.qmin + 1) / 2 : 0;
    } else {
        p.scale = (hi - lo) / (float)(p.qmax - p.qmin);
        float z = p.scale != 0.0f ? (float)p.qmin - lo / p.scale : 0.0f;
        z = nearbyintf(z);
        p.zp = !(z >= (float)p.qmin) ? p.qmin : z > (float)p.qmax ? p.qmax : (int32_t)z;
    }
    if (p.scale == 0.0f || !isfinite(p.scale)) p.scale = 1.0f; /* all zero (or not finite): any scale will do */
    return p;
}

static int32_t quantize_one(float v, const qparams *p) {
    float x = nearbyintf(v / p->scale) + (float)p->zp;
    if (x != x) return p->zp; /* NaN */
    return x < (float)p->qmin ? p->qmin : x > (float)p->qmax ? p->qmax : (int32_t)x;
}

static void store_q(uint8_t *dst, int32_t qtype, uint64_t i, int32_t v) {
    if (qtype == WM_DT_UINT16 || qtype == WM_DT_INT16) {
        uint16_t h = (uint16_t)v;
        memcpy(dst + i * 2, &h, 2);
    } else dst[i] = (uint8_t)v;
}

/* ---------------------------------------------------------------- the weight job */

void wm_qjob_int8_sizes(const wm_qjob *j, uint64_t *sz);
void wm_qjob_int8_sizes(const wm_qjob *j, uint64_t *sz) {
    uint64_t ch = j->per_channel ? (uint64_t)(j->trans ? j->K : j->N) : 1;
    sz[0] = (uint64_t)j->K * (uint64_t)j->N * wm_ct_elem_size(j->qtype);
    sz[1] = ch * 4;
    sz[2] = j->sym ? 0 : ch * wm_ct_elem_size(j->qtype);
}

/* Quantizes W [K, N] (channels along axis 1, or axis 0 when trans) into out[0..2]; the codes as [N, K] when t_out. */
wm_status wm_qjob_int8_run(const wm_qjob *j, uint8_t **out, int release, wm_error *err);
wm_status wm_qjob_int8_run(const wm_qjob *j, uint8_t **out, int release, wm_error *err) {
    float *w = wm_quant_weight_f32(j->m, j->src, release, err);
    if (!w) return err->status;
    int64_t K = j->K, N = j->N, nch = j->per_channel ? (j->trans ? K : N) : 1;
    float *lo = malloc((size_t)nch * sizeof *lo), *hi = malloc((size_t)nch * sizeof *hi);
    qparams *p = malloc((size_t)nch * sizeof *p);
    if (!lo || !hi || !p) {
        free(w), free(lo), free(hi), free(p);
        return wm_err(err, WM_ERR_NOMEM, "out of memory quantizing '%s'", j->src->name ? j->src->name : "");
    }
    for (int64_t c = 0; c < nch; c++) lo[c] = FLT_MAX, hi[c] = -FLT_MAX;
    /* one pass for the ranges, one for the codes: element (k, n) belongs to channel n, or k when trans */
    for (int64_t k = 0; k < K; k++)
        for (int64_t n = 0; n < N; n++) {
            int64_t c = !j->per_channel ? 0 : j->trans ? k : n;
            float v = w[k * N + n];
            lo[c] = v < lo[c] ? v : lo[c];
            hi[c] = v > hi[c] ? v : hi[c];
        }
    for (int64_t c = 0; c < nch; c++) {
        p[c] = params_for(lo[c], hi[c], j->qtype, j->sym, j->reduce);
        memcpy(out[1] + c * 4, &p[c].scale, 4);
        if (!j->sym) store_q(out[2], j->qtype, (uint64_t)c, p[c].zp);
    }
    for (int64_t k = 0; k < K; k++)
        for (int64_t n = 0; n < N; n++)
            store_q(out[0], j->qtype, (uint64_t)(j->t_out ? n * K + k : k * N + n),
                    quantize_one(w[k * N + n], &p[!j->per_channel ? 0 : j->trans ? k : n]));
    free(w), free(lo), free(hi), free(p);
    return WM_OK;
}

/* ---------------------------------------------------------------- shared */

typedef struct i8 {
    wm_graph *g;
    const wm_quant_config *c;
    wm_quant_report *r;
    wm_quant_plan *plan;
    wm_shapes *sh;
    wm_error *err;
    const char **qdq_from, **qdq_to; /* activation Q/DQ made so far */
    size_t n_qdq, cap_qdq;
    int ms_qdq;                       /* Q/DQ in com.microsoft (16-bit before opset 21, or opset < 13) */
} i8;

static const char *const INT8_DEFAULT_OPS[] = {"MatMul", "Gemm"};

/* The weight of n when quantizable: constant float32 2-D; *trans for Gemm transB; else NULL. */
static const wm_onnx_tensor *weight_of(const i8 *q, const wm_onnx_node *n, int *trans) {
    const char *w = wm_opt_in(n, 1);
    const wm_onnx_tensor *t = w ? wm_graph_constant(q->g, w) : NULL;
    *trans = 0;
    if (!t || t->n_dims != 2 || t->data_type != WM_DT_FLOAT || t->dims[0] <= 0 || t->dims[1] <= 0) return NULL;
    if (wm_opt_is(n, "Gemm")) {
        if (wm_opt_attr_i(n, "transA", 0) || wm_opt_attr_f(n, "alpha", 1.0f) != 1.0f ||
            wm_opt_attr_f(n, "beta", 1.0f) != 1.0f)
            return NULL;
        *trans = (int)wm_opt_attr_i(n, "transB", 0);
    }
    return wm_shapes_dtype(q->sh, wm_opt_in(n, 0)) == WM_DT_FLOAT ? t : NULL;
}

/* Submits the weight job: *wq, *ws, *wz (NULL when symmetric) receive the initializer names. t_out: the
   codes of a transposed weight ([N, K], trans) come out as [K, N]. */
/* Whether weights of qtype get 7 bits (wm_quant_config.reduce_range; -1: int8 weights meeting 8-bit activations). */
static int reduce_of(const wm_quant_config *c, int32_t qtype) {
    if (c->reduce_range >= 0) return c->reduce_range != 0;
    int act8 = c->mode == WM_QUANT_INT8_DYNAMIC || c->activation_type == WM_DT_UINT8 || c->activation_type == WM_DT_INT8;
    return qtype == WM_DT_INT8 && act8;
}

static wm_status quant_weight(i8 *q, const wm_onnx_tensor *t, int trans, int t_out, int32_t qtype, const char **wq,
                              const char **ws, const char **wz) {
    wm_qjob j = {WM_QJOB_INT8W, wm_graph_model(q->g), t, {NULL}, 0, t->dims[0], t->dims[1], 0, 8,
                 q->c->symmetric, q->c->per_channel, trans, reduce_of(q->c, qtype), WM_DT_FLOAT, qtype, 0, t_out};
    int64_t ch = j.per_channel ? (trans ? j.K : j.N) : 1;
    char nm[3][300];
    snprintf(nm[0], sizeof nm[0], "%s_quantized", t->name);
    snprintf(nm[1], sizeof nm[1], "%s_scale", t->name);
    snprintf(nm[2], sizeof nm[2], "%s_zero_point", t->name);
    wm_qout o[3] = {{wm_opt_name_exact(q->g, nm[0]), qtype, {t_out ? j.N : j.K, t_out ? j.K : j.N}, 2},
                    {wm_opt_name_exact(q->g, nm[1]), WM_DT_FLOAT, {ch}, j.per_channel ? 1u : 0u},
                    {wm_opt_name_exact(q->g, nm[2]), qtype, {ch}, j.per_channel ? 1u : 0u}};
    if (!o[0].name || !o[1].name || !o[2].name) return wm_err(q->err, WM_ERR_NOMEM, "out of memory");
    j.n_dst = j.sym ? 2 : 3;
    wm_status s = wm_qjob_submit(q->g, q->plan, &j, o, q->err);
    *wq = o[0].name;
    *ws = o[1].name;
    *wz = j.sym ? NULL : o[2].name;
    return s;
}

/* ---------------------------------------------------------------- dynamic */

/* The quantized form made of activation v so far (static: its DequantizeLinear output; dynamic: its
 * DynamicQuantizeLinear's first output), NULL when none: one per value, whatever number of MatMuls read it. */
static const char *made_of(const i8 *q, const char *v) {
    for (size_t i = 0; i < q->n_qdq; i++)
        if (!strcmp(q->qdq_from[i], v)) return q->qdq_to[i];
    return NULL;
}

static wm_status remember(i8 *q, const char *v, const char *made) {
    if (q->n_qdq == q->cap_qdq) {
        size_t cap = q->cap_qdq ? q->cap_qdq * 2 : 32;
        const char **a = realloc(q->qdq_from, cap * sizeof *a), **b = a ? realloc(q->qdq_to, cap * sizeof *b) : NULL;
        if (a) q->qdq_from = a;
        if (!b) return wm_err(q->err, WM_ERR_NOMEM, "out of memory");
        q->qdq_to = b;
        q->cap_qdq = cap;
    }
    q->qdq_from[q->n_qdq] = v;
    q->qdq_to[q->n_qdq++] = made;
    return WM_OK;
}

static wm_status dynamic_one(i8 *q, wm_onnx_node *n) {
    wm_graph *g = q->g;
    int trans;
    const wm_onnx_tensor *t = weight_of(q, n, &trans);
    if (!t) {
        q->r->skipped++;
        return WM_OK;
    }
    /* MatMulInteger takes B as [K, N]: a Gemm transB weight (a tied lm_head) is quantized into that layout, its
       channels (per_channel) still its rows */
    const char *bias = wm_opt_is(n, "Gemm") ? wm_opt_in(n, 2) : NULL, *wq, *ws, *wz;
    wm_status s = quant_weight(q, t, trans, trans, q->c->weight_type, &wq, &ws, &wz);
    if (s) return s;
    const char *a = wm_opt_in(n, 0), *y = n->output[0];
    char base[200];
    snprintf(base, sizeof base, "%s", n->name ? n->name : n->op_type);
    /* one DynamicQuantizeLinear per activation (Q, K and V projections of one input share it) */
    const char *aq = made_of(q, a), *as, *az;
    const wm_onnx_node *dql = aq ? wm_graph_producer(g, aq) : NULL;
    if (dql) {
        as = dql->output[1];
        az = dql->output[2];
    } else {
        aq = wm_opt_name(g, "a_quantized"), as = wm_opt_name(g, "a_scale"), az = wm_opt_name(g, "a_zero_point");
        const char *dq_in[1] = {a}, *dq_out[3] = {aq, as, az};
        if (!aq || !as || !az) return wm_err(q->err, WM_ERR_NOMEM, "out of memory");
        if (!wm_opt_add(g, "DynamicQuantizeLinear", NULL, base, dq_in, 1, dq_out, 3, q->err) || remember(q, a, aq))
            return q->err->status;
    }
    if (wm_graph_remove_node(g, n, q->err)) return q->err->status;
    const char *mi_in[4] = {aq, wq, az, wz ? wz : ""}, *mi, *yf, *sc, *pre;
    wm_onnx_node *cast;
    if (!(mi = wm_opt_emit(g, "MatMulInteger", NULL, mi_in, wz ? 4 : 3, q->err))) return q->err->status;
    const char *c_in[1] = {mi};
    if (!(cast = wm_opt_emit_node(g, "Cast", NULL, c_in, 1, &yf, q->err)) ||
        wm_graph_set_attr_int(g, cast, "to", WM_DT_FLOAT, q->err))
        return q->err->status;
    const char *s_in[2] = {as, ws};
    if (!(sc = wm_opt_emit(g, "Mul", NULL, s_in, 2, q->err))) return q->err->status;
    const char *m_in[2] = {yf, sc}, *m_out[1] = {y};
    if (bias) {
        if (!(pre = wm_opt_emit(g, "Mul", NULL, m_in, 2, q->err))) return q->err->status;
        const char *b_in[2] = {pre, bias};
        if (!wm_opt_add(g, "Add", NULL, base, b_in, 2, m_out, 1, q->err)) return q->err->status;
    } else if (!wm_opt_add(g, "Mul", NULL, base, m_in, 2, m_out, 1, q->err))
        return q->err->status;
    q->r->quantized++;
    return WM_OK;
}

/* ---------------------------------------------------------------- static QDQ */

static const wm_quant_range *range_of(const i8 *q, const char *v) {
    for (size_t i = 0; i < q->c->n_ranges; i++)
        if (q->c->ranges[i].name && !strcmp(q->c->ranges[i].name, v)) return &q->c->ranges[i];
    return NULL;
}

static const char *qdq_domain(const i8 *q) { return q->ms_qdq ? "com.microsoft" : NULL; }

/* The scalar initializer for a zero point of qtype. */
static const char *zp_const(i8 *q, const char *prefix, int32_t qtype, int32_t zp) {
    uint8_t b[2];
    store_q(b, qtype, 0, zp);
    return wm_opt_const_raw(q->g, prefix, qtype, NULL, 0, b, wm_ct_elem_size(qtype), q->err);
}

/* DequantizeLinear(QuantizeLinear(v)) with v's calibrated range; made once per value. NULL: no range (skip). */
static const char *qdq_activation(i8 *q, const char *v, int *skip) {
    *skip = 0;
    const char *done = made_of(q, v);
    if (done) return done;
    const wm_quant_range *rg = range_of(q, v);
    if (!rg) {
        *skip = 1;
        return NULL;
    }
    int32_t at = q->c->activation_type;
    int sym = q->c->act_symmetric || at == WM_DT_INT8 || at == WM_DT_INT16;
    qparams p = params_for(rg->lo, rg->hi, at, sym, 0);
    const char *sc = wm_opt_const_f32(q->g, "act_scale", &p.scale, 1, 1, q->err);
    const char *zp = sc ? zp_const(q, "act_zero_point", at, p.zp) : NULL;
    if (!zp) return NULL;
    const char *qin[3] = {v, sc, zp}, *qv, *dv;
    if (!wm_opt_emit_node(q->g, "QuantizeLinear", qdq_domain(q), qin, 3, &qv, q->err)) return NULL;
    const char *din[3] = {qv, sc, zp};
    if (!wm_opt_emit_node(q->g, "DequantizeLinear", qdq_domain(q), din, 3, &dv, q->err)) return NULL;
    return remember(q, v, dv) ? NULL : dv;
}

static wm_status static_one(i8 *q, wm_onnx_node *n) {
    int trans, skip;
    const wm_onnx_tensor *t = weight_of(q, n, &trans);
    if (!t || !range_of(q, wm_opt_in(n, 0))) {
        q->r->skipped++;
        return WM_OK;
    }
    const char *a = qdq_activation(q, n->input[0], &skip);
    if (!a) return skip ? WM_OK : q->err->status;
    const char *wq, *ws, *wz;
    wm_status s = quant_weight(q, t, trans, 0, q->c->weight_type, &wq, &ws, &wz);
    if (s) return s;
    const char *din[3] = {wq, ws, wz ? wz : ""}, *wd;
    wm_onnx_node *dq = wm_opt_emit_node(q->g, "DequantizeLinear", qdq_domain(q), din, wz ? 3 : 2, &wd, q->err);
    if (!dq || (q->c->per_channel && wm_graph_set_attr_int(q->g, dq, "axis", trans ? 0 : 1, q->err)) ||
        wm_graph_set_input(q->g, n, 0, a, q->err) || wm_graph_set_input(q->g, n, 1, wd, q->err))
        return q->err->status ? q->err->status : WM_ERR_NOMEM;
    q->r->quantized++;
    return WM_OK;
}

wm_status wm_quant_int8(wm_graph *g, const wm_quant_config *c, wm_quant_report *r, wm_quant_plan *plan,
                        wm_error *err) {
    i8 q;
    memset(&q, 0, sizeof q);
    q.g = g;
    q.c = c;
    q.r = r;
    q.plan = plan;
    q.err = err;
    int dyn = c->mode == WM_QUANT_INT8_DYNAMIC;
    int w16 = c->weight_type == WM_DT_INT16 || c->weight_type == WM_DT_UINT16;
    if (c->weight_type != WM_DT_INT8 && c->weight_type != WM_DT_UINT8 && (dyn || !w16))
        return wm_err(err, WM_ERR_USAGE, "weight type %s: int8 or uint8%s", wm_dtype_name(c->weight_type),
                      dyn ? " only (dynamic: MatMulInteger)" : ", or int16 / uint16 (static QDQ)");
    if (!dyn && c->activation_type != WM_DT_UINT8 && c->activation_type != WM_DT_INT8 &&
        c->activation_type != WM_DT_UINT16 && c->activation_type != WM_DT_INT16)
        return wm_err(err, WM_ERR_USAGE, "activation type %s: uint8, int8, uint16 or int16",
                      wm_dtype_name(c->activation_type));
    if (dyn && c->weight_type == WM_DT_UINT8 && c->symmetric)
        return wm_err(err, WM_ERR_USAGE, "symmetric uint8 weights are not supported: use int8");
    int64_t opset = wm_graph_opset(g, "");
    int wide = c->activation_type == WM_DT_UINT16 || c->activation_type == WM_DT_INT16 || w16;
    q.ms_qdq = !dyn && ((wide && opset < 21) || opset < 13);
    wm_status s = wm_shapes_infer(g, &q.sh, err);
    wm_onnx_graph *p = wm_graph_proto(g);
    size_t n = p->n_node;
    wm_onnx_node **v = s ? NULL : malloc((n ? n : 1) * sizeof *v);
    if (!s && !v) s = wm_err(err, WM_ERR_NOMEM, "out of memory");
    if (!s && n) memcpy(v, p->node, n * sizeof *v);
    for (size_t i = 0; i < n && !s; i++)
        if (wm_quant_selected(c, v[i], INT8_DEFAULT_OPS, 2)) s = dyn ? dynamic_one(&q, v[i]) : static_one(&q, v[i]);
    if (!s && q.ms_qdq) s = wm_opt_need_opset(g, "com.microsoft", 1, err);
    free(v);
    free(q.qdq_from);
    free(q.qdq_to);
    wm_shapes_free(q.sh);
    return s;
}
