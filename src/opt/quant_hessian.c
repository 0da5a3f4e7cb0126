/*
 * quant_hessian.c - GPTQ's calibration statistics from winml's own engine: the float model runs on calibration
 * token sequences (a session with keep_values, so every MatMul input can be read by name after a run), and each
 * input value x [..., K] of a MatMul (or bias-free Gemm) the block quantizer would take adds x x^T of its rows
 * into H [K, K] (float32 per run, double across runs).
 */
#include "opt/quant_hessian.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/kernels.h"
#include "onnx/dtype.h"
#include "opt/quant_impl.h"
#include "runtime/inputs.h"
#include "winml/runtime.h"

void wm_quant_hessians_free(wm_quant_hessians *h) {
    if (!h) return;
    for (size_t i = 0; i < h->n; i++) {
        free((char *)h->v[i].value);
        free((double *)h->v[i].h);
    }
    free(h->v);
    h->v = NULL;
    h->n = 0;
}

/* Adds value name (last dim K; diag: its [K] diagonal only) unless listed; WM_ERR_NOMEM. */
static wm_status add_value(wm_quant_hessians *h, const char *name, int64_t K, int diag, wm_error *err) {
    for (size_t i = 0; i < h->n; i++)
        if (!strcmp(h->v[i].value, name)) return WM_OK;
    wm_quant_hessian *v = realloc(h->v, (h->n + 1) * sizeof *v);
    if (!v) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    h->v = v;
    char *nm = strdup(name);
    double *m = calloc((size_t)K * (size_t)(diag ? 2 : K), sizeof *m);
    if (!nm || !m) {
        free(nm), free(m);
        return wm_err(err, WM_ERR_NOMEM, "out of memory for GPTQ statistics (K %lld)", (long long)K);
    }
    h->v[h->n++] = (wm_quant_hessian){nm, K, m, 0};
    return WM_OK;
}

/* The inputs of the MatMuls / bias-free Gemms c selects whose weight is a constant 2-D float matrix. */
static wm_status list_inputs(wm_graph *g, const wm_quant_config *c, wm_quant_hessians *h, int diag, wm_error *err) {
    static const char *const ops[] = {"MatMul", "Gemm"};
    size_t n;
    wm_onnx_node **v = wm_opt_snapshot(g, &n, err);
    if (!v) return WM_ERR_NOMEM;
    wm_status s = WM_OK;
    for (size_t i = 0; i < n && !s; i++) {
        const wm_onnx_node *nd = v[i];
        if (!wm_quant_selected(c, nd, ops, 2) || wm_opt_is(nd, "Gather")) continue;
        const char *a = wm_opt_in(nd, 0), *w = wm_opt_in(nd, 1);
        const wm_onnx_tensor *t = w ? wm_graph_constant(g, w) : NULL;
        if (!a || !t || t->n_dims != 2 || t->dims[0] <= 0 || t->dims[1] <= 0) continue;
        int tb = wm_opt_is(nd, "Gemm") && wm_opt_attr_i(nd, "transB", 0);
        if (wm_opt_is(nd, "Gemm") && (wm_opt_in(nd, 2) || wm_opt_attr_i(nd, "transA", 0))) continue;
        int64_t K = tb ? t->dims[1] : t->dims[0];
        if (K > 65536 && !diag) continue; /* H would be over 32 GiB */
        s = add_value(h, a, K, diag, err);
    }
    free(v);
    return s;
}

/* H += x^T x over the rows of x [rows, K] (hf: K * K float scratch), the product by the engine's sgemm. */
static wm_status accumulate(wm_quant_hessian *q, const float *x, uint64_t rows, float *hf, wm_error *err) {
    int64_t K = q->K;
    const wm_kernels *kn = wm_kernels_get();
    wm_sgemm_args a;
    memset(&a, 0, sizeof a);
    a.M = K, a.N = K, a.K = (int64_t)rows, a.alpha = 1.0f, a.beta = 0.0f;
    a.A = x, a.lda = K, a.trans_a = 1; /* x^T: x stored [rows, K] */
    a.B = x, a.ldb = K;
    a.C = hf, a.ldc = K;
    size_t ws = wm_sgemm_workspace_size(&a, 1);
    void *work = ws ? malloc(ws) : NULL;
    if (ws && !work) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    a.work = work;
    kn->sgemm(&a, 0, 1);
    free(work);
    double *h = (double *)q->h;
    for (int64_t i = 0; i < K * K; i++) h[i] += (double)hf[i];
    q->rows += rows;
    return WM_OK;
}

/* h[k] += sum of x_k^2 over the rows of x [rows, K] (the diagonal of accumulate's x^T x). */
static void accumulate_diag(wm_quant_hessian *q, const float *x, uint64_t rows) {
    double *h = (double *)q->h;
    for (uint64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < q->K; k++) {
            double v = x[r * (uint64_t)q->K + (uint64_t)k];
            h[k] += v * v;
            h[q->K + k] += v;
        }
    q->rows += rows;
}

wm_status wm_quant_hessians_collect(const char *model_path, wm_graph *g, const wm_quant_config *c,
                                    const int32_t *ids, size_t n_seq, size_t seq_len, uint64_t seed, int diag,
                                    wm_quant_hessians *out, wm_error *err) {
    memset(out, 0, sizeof *out);
    if (!seq_len || !n_seq) return wm_err(err, WM_ERR_USAGE, "GPTQ calibration: no sequences");
    wm_status s = list_inputs(g, c, out, diag, err);
    if (s || !out->n) return s;
    wm_session_opts so = {0};
    so.keep_values = 1;
    wm_session *ss = NULL;
    if ((s = wm_session_new(model_path, &so, &ss, err))) {
        wm_err_prefix(err, "GPTQ calibration");
        wm_quant_hessians_free(out);
        return s;
    }
    int64_t kmax = 0;
    for (size_t i = 0; i < out->n; i++) kmax = out->v[i].K > kmax ? out->v[i].K : kmax;
    float *hf = malloc((size_t)(diag ? 1 : kmax * kmax) * sizeof *hf);
    size_t n_out = wm_session_n_outputs(ss);
    wm_tensor *outs = calloc(n_out ? n_out : 1, sizeof *outs);
    if (!hf || !outs) s = wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (size_t q = 0; q < n_seq && !s; q++) {
        wm_input_opts io = {NULL, 0, 1, (int64_t)seq_len, 0, seed + q};
        wm_inputs in = {0};
        if ((s = wm_inputs_make(ss, &io, &in, err))) break;
        for (size_t i = 0; ids && i < in.n && !s; i++) { /* the text's tokens into input_ids */
            const wm_io_info *ii = wm_session_input(ss, i);
            if (strcmp(ii->name, "input_ids") || wm_tensor_numel(&in.t[i]) != seq_len) continue;
            int64_t vocab = wm_inputs_index_range(ss, i);
            for (size_t k = 0; k < seq_len && !s; k++) {
                int32_t id = ids[q * seq_len + k];
                if (id < 0 || (vocab > 0 && id >= vocab)) {
                    s = wm_err(err, WM_ERR_INPUT, "GPTQ calibration: token id %d is outside the model's embedding "
                               "table (%lld rows): the tokenizer does not belong to this model", (int)id,
                               (long long)vocab);
                    break;
                }
                if (in.t[i].dtype == WM_DT_INT64) ((int64_t *)in.t[i].data)[k] = id;
                else if (in.t[i].dtype == WM_DT_INT32) ((int32_t *)in.t[i].data)[k] = id;
            }
        }
        if (!s) s = wm_session_run(ss, in.t, in.n, outs, n_out, err);
        wm_inputs_free(&in);
        for (size_t i = 0; i < out->n && !s; i++) {
            wm_tensor t;
            if ((s = wm_session_value_of(ss, out->v[i].value, &t, err))) break;
            uint64_t n = wm_tensor_numel(&t);
            if (t.dtype != WM_DT_FLOAT || t.rank < 1 || t.dims[t.rank - 1] != out->v[i].K) {
                s = wm_err(err, WM_ERR_UNSUPPORTED, "GPTQ calibration: value '%s' is not float32 [..., %lld]",
                           out->v[i].value, (long long)out->v[i].K);
                break;
            }
            uint64_t rows = n / (uint64_t)out->v[i].K;
            if (diag) {
                accumulate_diag(&out->v[i], (const float *)t.data, rows);
                continue;
            }
            for (uint64_t r0 = 0; r0 < rows && !s; r0 += 512) /* float sums over at most 512 rows */
                s = accumulate(&out->v[i], (const float *)t.data + r0 * (uint64_t)out->v[i].K,
                               rows - r0 < 512 ? rows - r0 : 512, hf, err);
        }
    }
    if (s && !strstr(err->msg, "GPTQ")) wm_err_prefix(err, "GPTQ calibration");
    free(hf);
    free(outs);
    wm_session_free(ss);
    if (s) wm_quant_hessians_free(out);
    return s;
}
