/*
 * quant_normimp.c - data-free importance for the importance-weighted block fit (wm_quant_config.importance): the
 * input columns of a MatMul that reads a norm's output are weighted by the norm's scale squared.
 *
 * A normalized row h / rms(h) (or (h - mean) / std) times the norm's scale gamma has E[x_k^2] = gamma_k^2 E[h'_k^2]:
 * the scale is the one per-column factor of the inputs that the weights alone tell. Taking E[h'_k^2] alike for every
 * k (no calibration data), the importance of column k is gamma_k^2 (and, a LayerNormalization's bias beta given, its
 * mean beta_k: the zero point's term). q / k / v and gate / up read their layer's norms this way; o_proj and
 * down_proj do not (no entry: the plain scale search, when the recipe asks for it).
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "opt/opt_util.h"
#include "opt/quant_hessian.h"

/* The norm scale (and bias, NULL: none) that value a is the scaled output of: a [Skip][Simplified]LayerNormalization
 * or RMSNormalization's output 0, or a Mul of a by a constant; NULL when a is no such output. */
static const char *norm_scale(const wm_graph *g, const char *a, const char **bias) {
    const wm_onnx_node *p = wm_graph_producer(g, a);
    *bias = NULL;
    if (!p || !p->op_type || !wm_opt_out(p, 0) || strcmp(wm_opt_out(p, 0), a)) return NULL;
    const char *op = p->op_type;
    if (!strcmp(op, "SimplifiedLayerNormalization") || !strcmp(op, "RMSNormalization")) return wm_opt_in(p, 1);
    if (!strcmp(op, "LayerNormalization")) return *bias = wm_opt_in(p, 2), wm_opt_in(p, 1);
    if (!strcmp(op, "SkipSimplifiedLayerNormalization")) return wm_opt_in(p, 2);
    if (!strcmp(op, "SkipLayerNormalization")) return *bias = wm_opt_in(p, 3), wm_opt_in(p, 2);
    if (wm_opt_is(p, "Mul")) /* an unfused norm's last step: normalized * gamma */
        return wm_graph_constant(g, wm_opt_in(p, 1)) ? wm_opt_in(p, 1) : wm_opt_in(p, 0);
    return NULL;
}

/* Appends an entry for value a (K columns) from scale / bias constants of K elements; 0 when they are not such. */
static wm_status add_entry(const wm_graph *g, const char *a, int64_t K, const char *scale, const char *bias,
                           wm_quant_hessians *out, int *added, wm_error *err) {
    wm_ct sc = {0}, bi = {0};
    *added = 0;
    if (!scale || !wm_opt_const(g, scale, (uint64_t)K, &sc)) return WM_OK;
    int ok = sc.n == (uint64_t)K && (!bias || (wm_opt_const(g, bias, (uint64_t)K, &bi) && bi.n == (uint64_t)K));
    wm_quant_hessian *v = ok ? realloc(out->v, (out->n + 1) * sizeof *v) : NULL;
    double *h = ok && v ? malloc((size_t)(2 * K) * sizeof *h) : NULL;
    char *name = h ? strdup(a) : NULL;
    if (v) out->v = v;
    if (ok && !name) {
        free(h);
        wm_ct_free(&sc), wm_ct_free(&bi);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    if (ok) {
        for (int64_t k = 0; k < K; k++) {
            double gk = wm_ct_getf(&sc, (uint64_t)k);
            h[k] = gk * gk;
            h[K + k] = bias ? wm_ct_getf(&bi, (uint64_t)k) : 0.0;
        }
        out->v[out->n++] = (wm_quant_hessian){name, K, h, 1};
        *added = 1;
    }
    wm_ct_free(&sc), wm_ct_free(&bi);
    return WM_OK;
}

wm_status wm_quant_norm_importance(const wm_graph *g, wm_quant_hessians *out, wm_error *err) {
    const wm_onnx_graph *p = wm_graph_proto(g);
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < p->n_node; i++) {
        const wm_onnx_node *n = p->node[i];
        const char *a = wm_opt_in(n, 0), *w = wm_opt_in(n, 1), *bias;
        const wm_onnx_tensor *t = w && wm_opt_is(n, "MatMul") ? wm_graph_constant(g, w) : NULL;
        if (!a || !t || t->n_dims != 2) continue;
        int64_t K = t->dims[0];
        int seen = 0;
        for (size_t j = 0; j < out->n && !seen; j++) seen = !strcmp(out->v[j].value, a) && out->v[j].K == K;
        const char *scale = seen ? NULL : norm_scale(g, a, &bias);
        int added;
        wm_status s = scale ? add_entry(g, a, K, scale, bias, out, &added, err) : WM_OK;
        if (s) {
            wm_quant_hessians_free(out);
            return s;
        }
    }
    return WM_OK;
}
