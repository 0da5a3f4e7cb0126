/*
 * quant_calib_run.c - static QDQ calibration by winml's engine (quant_calib_run.h): list the activations the
 * static quantizer reads, run the float model on seeded sample batches (or text rows) with keep_values, and
 * observe each.
 */
#include "opt/quant_calib_run.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "onnx/dtype.h"
#include "opt/quant_impl.h"
#include "runtime/inputs.h"
#include "winml/runtime.h"

/* The value names (pointers into g) the static quantizer reads: input 0 of each MatMul / Gemm c selects whose
   input 1 is a constant 2-D tensor; each once. *out malloc'ed. */
static wm_status list_values(wm_graph *g, const wm_quant_config *c, const char ***out, size_t *n_out,
                             wm_error *err) {
    static const char *const ops[] = {"MatMul", "Gemm"};
    *out = NULL;
    *n_out = 0;
    size_t n;
    wm_onnx_node **v = wm_opt_snapshot(g, &n, err);
    if (!v) return WM_ERR_NOMEM;
    const char **names = malloc((n ? n : 1) * sizeof *names);
    if (!names) {
        free(v);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const wm_onnx_node *nd = v[i];
        if (!wm_quant_selected(c, nd, ops, 2)) continue;
        const char *a = wm_opt_in(nd, 0), *w = wm_opt_in(nd, 1);
        const wm_onnx_tensor *t = w ? wm_graph_constant(g, w) : NULL;
        if (!a || !*a || !t || t->n_dims != 2) continue;
        int seen = 0;
        for (size_t j = 0; j < k && !seen; j++) seen = !strcmp(names[j], a);
        if (!seen) names[k++] = a;
    }
    free(v);
    *out = names;
    *n_out = k;
    return WM_OK;
}

/* Sets batch in's text inputs from token row r (wm_calib_run_opts.rows): ids cut or padded, mask, token types 0. */
static void set_row(const wm_session *ss, wm_inputs *in, const int32_t *r, size_t len, int32_t pad) {
    for (size_t i = 0; i < in->n; i++) {
        wm_tensor *t = &in->t[i];
        const char *name = wm_session_input(ss, i)->name;
        int ids = !strcmp(name, "input_ids"), mask = !strcmp(name, "attention_mask"), tt = !strcmp(name, "token_type_ids");
        if ((!ids && !mask && !tt) || t->rank != 2 || (t->dtype != WM_DT_INT32 && t->dtype != WM_DT_INT64)) continue;
        int64_t S = t->dims[1];
        for (int64_t b = 0; b < t->dims[0]; b++)
            for (int64_t k = 0; k < S; k++) {
                int in_row = (size_t)k < len;
                int64_t v = ids ? (in_row ? r[k] : pad) : mask ? in_row : 0;
                if (t->dtype == WM_DT_INT32) ((int32_t *)t->data)[b * S + k] = (int32_t)v;
                else ((int64_t *)t->data)[b * S + k] = v;
            }
    }
}

static wm_status observe(wm_calib *cb, const char *name, const wm_tensor *t, wm_error *err) {
    if (t->dtype != WM_DT_FLOAT) return WM_OK; /* not a float activation: nothing to quantize */
    return wm_calib_observe(cb, name, t->data, (size_t)wm_tensor_numel(t), err);
}

wm_status wm_calib_collect(const char *model_path, wm_graph *g, const wm_quant_config *c, const wm_calib_run_opts *o,
                           wm_calib_ranges *out, wm_error *err) {
    memset(out, 0, sizeof *out);
    if (o->samples < 1 && !o->n_rows)
        return wm_err(err, WM_ERR_USAGE, "calibration: samples %lld (at least 1)", (long long)o->samples);
    const char **names = NULL;
    size_t n_names = 0;
    wm_status s = list_values(g, c, &names, &n_names, err);
    if (s || !n_names) {
        free(names);
        return s;
    }
    wm_session_opts so = {0};
    so.keep_values = 1;
    wm_session *ss = NULL;
    wm_calib *cb = NULL;
    wm_tensor *outs = NULL;
    if ((s = wm_session_new(model_path, &so, &ss, err)) || (s = wm_calib_new(&o->calib, &cb, err))) goto done;
    size_t n_out = wm_session_n_outputs(ss), n_in = wm_session_n_inputs(ss);
    if (!(outs = calloc(n_out ? n_out : 1, sizeof *outs))) {
        s = wm_err(err, WM_ERR_NOMEM, "out of memory");
        goto done;
    }
    int64_t n_batches = o->n_rows ? (int64_t)o->n_rows : o->samples;
    for (int64_t q = 0; q < n_batches && !s; q++) {
        wm_input_opts io = {NULL, 0, 1, o->seq > 0 ? o->seq : 128, 0, o->seed + (uint64_t)q, o->ranges, o->n_ranges};
        wm_inputs in = {0};
        if ((s = wm_inputs_make(ss, &io, &in, err))) break;
        if (o->n_rows) set_row(ss, &in, o->rows[q], o->row_lens[q], o->pad_id);
        s = wm_session_run(ss, in.t, in.n, outs, n_out, err);
        for (size_t v = 0; v < n_names && !s; v++) {
            size_t gi = 0;
            while (gi < n_in && strcmp(wm_session_input(ss, gi)->name, names[v])) gi++;
            if (gi < n_in) { /* a graph input: the batch itself */
                s = observe(cb, names[v], &in.t[gi], err);
                continue;
            }
            wm_tensor t;
            if (!(s = wm_session_value_of(ss, names[v], &t, err))) s = observe(cb, names[v], &t, err);
        }
        wm_inputs_free(&in);
    }
    if (!s) s = wm_calib_result(cb, out, err);
done:
    if (s && !strstr(err->msg, "calibration")) wm_err_prefix(err, "calibration");
    free(outs);
    free(names);
    wm_calib_free(cb);
    wm_session_free(ss);
    if (s) wm_calib_ranges_free(out);
    return s;
}
