/*
 * norm.c - LayerNormalization (17), RMSNormalization (23), and the ONNX
 * Runtime forms SimplifiedLayerNormalization, SkipLayerNormalization and
 * SkipSimplifiedLayerNormalization (com.microsoft). Each row (the dims from
 * `axis` on) is normalized in float32 with a two-pass mean/variance (the
 * kernel table's row kernels); threads take whole rows.
 */
#include <math.h>
#include <string.h>

#include "ops/rows.h"

typedef struct nstate {
    int rms;      /* no mean, no beta */
    int skip;     /* Skip*: input + skip (+ bias) first */
    float eps;
} nstate;

static wm_status norm_init(wm_node *n, wm_error *err) {
    nstate *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    const char *name = n->proto->op_type;
    s->rms = strstr(name, "Simplified") != NULL || !strcmp(name, "RMSNormalization");
    s->skip = !strncmp(name, "Skip", 4);
    s->eps = wm_attr_float(n, "epsilon", s->skip ? 1e-12f : 1e-5f);
    n->state = s;
    wm_status st = wm_need_inputs(n, s->skip ? 3 : 2, err); /* input, [skip,] gamma: read unchecked */
    if (!st) st = wm_check_type(n, 0, wm_types_float, err);
    for (int i = 1; i < n->n_in && !st; i++)
        if (wm_has_in(n, i)) st = wm_check_type(n, i, wm_types_float, err);
    n->out_dtype[0] = n->in_dtype[0];
    /* LayerNormalization: Mean, InvStdDev in the stash type (float32); Skip*: mean, inv_std, sum */
    for (int k = 1; k < n->n_out; k++) n->out_dtype[k] = (s->skip && k == 3) ? n->in_dtype[0] : WM_DT_FLOAT;
    if (s->skip && n->n_out > 3) n->out_dtype[3] = n->in_dtype[0];
    return st;
}

static int norm_axis(const wm_node *n, int rank) {
    const nstate *s = n->state;
    if (s->skip) return rank - 1;
    int64_t a = wm_attr_int(n, "axis", -1);
    return wm_axis(a, rank);
}

static wm_status norm_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    const nstate *s = n->state;
    int r = in[0]->rank, a = norm_axis(n, r);
    if (a < 0) return wm_node_err(n, err, WM_ERR_INPUT, "axis out of range");
    uint64_t len = 1;
    for (int d = a; d < r; d++) len *= (uint64_t)in[0]->dims[d];
    /* gamma, beta and the Skip ops' bias are read as whole rows, skip as whole rows repeated over the input */
    int gi = s->skip ? 2 : 1, bi = s->rms ? -1 : gi + 1, bias_i = s->skip ? (s->rms ? 3 : 4) : -1;
    const char *const what[3] = {"scale", "bias (beta)", "bias"};
    const int idx[3] = {gi, bi, bias_i};
    for (int k = 0; k < 3; k++)
        if (idx[k] >= 0 && wm_has_in(n, idx[k]) && wm_tensor_numel(in[idx[k]]) != len)
            return wm_node_err(n, err, WM_ERR_INPUT, "%s has %llu elements for rows of %llu", what[k],
                               (unsigned long long)wm_tensor_numel(in[idx[k]]), (unsigned long long)len);
    uint64_t ns = s->skip ? wm_tensor_numel(in[1]) : 0;
    if (s->skip && len && (ns == 0 || ns % len || wm_tensor_numel(in[0]) % ns))
        return wm_node_err(n, err, WM_ERR_INPUT, "skip does not broadcast to the input");
    wm_set_shape(out[0], r, in[0]->dims);
    for (int k = 1; k < n->n_out; k++) {
        if (!out[k]) continue;
        if (s->skip && k == 3) {
            wm_set_shape(out[k], r, in[0]->dims);
            continue;
        }
        wm_set_shape(out[k], r, in[0]->dims); /* mean / inv std: the normalized dims become 1 */
        for (int d = a; d < r; d++) out[k]->dims[d] = 1;
    }
    return WM_OK;
}

typedef struct nctx {
    const nstate *s;
    wm_tensor *const *in;
    wm_tensor *const *out;
    int n_in, n_out;
    uint64_t rows, len;
    float *ws; /* per thread: 5 rows of len floats */
    const wm_kernels *k;
    int rms_stats; /* an RMS form whose statistics outputs (mean / inv_std_var) are wanted */
} nctx;

static void norm_part(void *arg, int ith, int nth) {
    const nctx *c = arg;
    const nstate *s = c->s;
    long lo, hi;
    wm_split((long)c->rows, ith, nth, &lo, &hi);
    uint64_t len = c->len;
    float *x = c->ws + (size_t)ith * 5 * len, *g = x + len, *b = g + len, *t = b + len, *bb = t + len;
    wm_tensor *const *in = c->in;
    int gi = s->skip ? 2 : 1, bi = s->rms ? -1 : gi + 1;
    const wm_tensor *gamma = in[gi], *beta = bi >= 0 && bi < c->n_in ? in[bi] : NULL;
    const wm_tensor *skip = s->skip ? in[1] : NULL;
    int bias_i = s->rms ? 3 : 4; /* Skip(Simplified)LayerNormalization: input, skip, gamma, [beta,] bias */
    const wm_tensor *bias = s->skip && bias_i < c->n_in ? in[bias_i] : NULL;
    wm_row_load(gamma->dtype, gamma->data, 0, g, (int64_t)len);
    if (beta) wm_row_load(beta->dtype, beta->data, 0, b, (int64_t)len);
    if (bias) wm_row_load(bias->dtype, bias->data, 0, bb, (int64_t)len);
    uint64_t skip_rows = skip ? wm_tensor_numel(skip) / len : 1;
    for (long r = lo; r < hi; r++) {
        uint64_t off = (uint64_t)r * len;
        if (skip) { /* x = (input + skip) + bias, the table's vector add (float32 rows read where they lie) */
            uint64_t so = ((uint64_t)r % skip_rows) * len;
            const float *sr = t, *xr = x;
            if (skip->dtype == WM_DT_FLOAT) sr = (const float *)skip->data + so;
            else wm_row_load(skip->dtype, skip->data, so, t, (int64_t)len);
            if (in[0]->dtype == WM_DT_FLOAT) xr = (const float *)in[0]->data + off;
            else wm_row_load(in[0]->dtype, in[0]->data, off, x, (int64_t)len);
            c->k->add((int64_t)len, x, xr, sr);
            if (bias) c->k->add((int64_t)len, x, x, bb);
            if (c->n_out > 3 && c->out[3]) wm_row_store(c->out[3]->dtype, c->out[3]->data, off, x, (int64_t)len);
        } else {
            wm_row_load(in[0]->dtype, in[0]->data, off, x, (int64_t)len);
        }
        /* a float32 output takes the normalized row directly (x is this thread's copy, so an output in the
           input's place is safe); other types go through t */
        float *y = c->out[0]->dtype == WM_DT_FLOAT ? (float *)c->out[0]->data + off : t;
        float m = 0, inv;
        if (!s->rms) { /* the table's row kernel (vector, two-pass) */
            c->k->layernorm_row((int64_t)len, y, x, g, beta ? b : NULL, s->eps, &m, &inv);
        } else if (!c->rms_stats) {
            c->k->rmsnorm_row((int64_t)len, y, x, g, s->eps);
            inv = 0; /* not an output of this node */
        } else { /* RMS with its statistics as outputs */
            double var = 0;
            for (uint64_t i = 0; i < len; i++) var += (double)x[i] * x[i];
            var /= (double)len;
            inv = (float)(1.0 / sqrt(var + s->eps));
            for (uint64_t i = 0; i < len; i++) y[i] = x[i] * inv * g[i];
        }
        if (y == t) wm_row_store(c->out[0]->dtype, c->out[0]->data, off, t, (int64_t)len);
        if (s->skip) { /* outputs: 1 mean, 2 inv_std_var */
            if (c->n_out > 1 && c->out[1]) ((float *)c->out[1]->data)[r] = m;
            if (c->n_out > 2 && c->out[2]) ((float *)c->out[2]->data)[r] = inv;
        } else if (s->rms) {
            if (c->n_out > 1 && c->out[1]) ((float *)c->out[1]->data)[r] = inv;
        } else {
            if (c->n_out > 1 && c->out[1]) ((float *)c->out[1]->data)[r] = m;
            if (c->n_out > 2 && c->out[2]) ((float *)c->out[2]->data)[r] = inv;
        }
    }
}

static void rows_len(const wm_node *n, const wm_tensor *t, uint64_t *rows, uint64_t *len) {
    int r = t->rank, a = norm_axis(n, r);
    *rows = *len = 1;
    for (int d = 0; d < r; d++) *(d < a ? rows : len) *= (uint64_t)t->dims[d];
}

static size_t norm_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    (void)out;
    uint64_t rows, len;
    rows_len(n, in[0], &rows, &len);
    return (size_t)nth * 5 * (size_t)len * sizeof(float);
}

static wm_status norm_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const nstate *s = n->state;
    nctx c = {s, in, out, n->n_in, n->n_out, 0, 0, x->ws, wm_kernels_get(), 0};
    for (int i = 1; i < n->n_out && i < 3; i++) c.rms_stats |= s->rms && out[i] != NULL;
    rows_len(n, in[0], &c.rows, &c.len);
    if (!c.rows || !c.len) return WM_OK;
    int nth = c.rows * c.len >= 16384 ? x->nth : 1;
    if ((uint64_t)nth > c.rows) nth = (int)c.rows;
    wm_pool_run(x->pool, norm_part, &c, nth);
    return WM_OK;
}

#define NORM(dom, name, since) {dom, name, since, 0, norm_init, norm_infer, norm_run, norm_workspace, WM_OP_INPLACE, 0}

static const wm_op ops[] = {
    NORM("", "LayerNormalization", 17),
    NORM("", "RMSNormalization", 23),
    NORM("", "SimplifiedLayerNormalization", 1),
    NORM("com.microsoft", "SimplifiedLayerNormalization", 1),
    NORM("com.microsoft", "SkipLayerNormalization", 1),
    NORM("com.microsoft", "SkipSimplifiedLayerNormalization", 1),
};

const wm_op_table wm_ops_norm = {ops, sizeof ops / sizeof ops[0]};
