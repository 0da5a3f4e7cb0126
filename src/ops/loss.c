/*
 * loss.c - NegativeLogLikelihoodLoss (12..) and SoftmaxCrossEntropyLoss
 * (12..): input [N, C, d1..dk], target [N, d1..dk], optional weight [C],
 * ignore_index, reduction none | sum | mean (mean divides by the summed
 * weights of the entries not ignored, or their count without weights).
 * SoftmaxCrossEntropyLoss takes the log-softmax over C first and may
 * output it. Everything is computed in double (one pass over C per
 * position, sums in a fixed order) and stored in the input's type.
 */
#include <string.h>

#include "ops/scalar.h"

enum { LR_NONE, LR_SUM, LR_MEAN };

typedef struct loss_state {
    int red;
    int softmax;
    int has_ignore;
    int64_t ignore;
} loss_state;

static wm_status loss_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, wm_types_float, err);
    if (!st) st = wm_check_type(n, 1, wm_types_index, err);
    if (!st && wm_has_in(n, 2)) st = wm_check_same_type(n, 0, 2, err);
    if (st) return st;
    loss_state *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = s;
    char buf[16];
    const char *r = wm_attr_string(n, "reduction", "mean", buf, sizeof buf);
    if (!strcmp(r, "none")) s->red = LR_NONE;
    else if (!strcmp(r, "sum")) s->red = LR_SUM;
    else if (!strcmp(r, "mean")) s->red = LR_MEAN;
    else return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "reduction '%s' is not none, sum or mean", r);
    s->softmax = !strcmp(n->proto->op_type, "SoftmaxCrossEntropyLoss");
    s->has_ignore = wm_attr(n, "ignore_index") != NULL;
    s->ignore = wm_attr_int(n, "ignore_index", 0);
    for (int k = 0; k < n->n_out; k++) n->out_dtype[k] = n->in_dtype[0];
    return WM_OK;
}

static wm_status loss_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    const loss_state *s = n->state;
    const wm_tensor *x = in[0], *t = in[1];
    int r = x->rank;
    if (r < 2) return wm_node_err(n, err, WM_ERR_INPUT, "input must be [N, C, ...] (rank %d given)", r);
    int ok = t->rank == r - 1 && t->dims[0] == x->dims[0];
    for (int d = 1; ok && d < r - 1; d++) ok = t->dims[d] == x->dims[d + 1];
    if (!ok) return wm_node_err(n, err, WM_ERR_INPUT, "target must be [N, d1, ..., dk] for input [N, C, d1, ..., dk]");
    if (wm_has_in(n, 2) && (in[2]->rank != 1 || in[2]->dims[0] != x->dims[1]))
        return wm_node_err(n, err, WM_ERR_INPUT, "weight must be [C] = [%lld]", (long long)x->dims[1]);
    if (s->red == LR_NONE) wm_set_shape(out[0], t->rank, t->dims);
    else out[0]->rank = 0;
    if (n->n_out > 1 && out[1]) wm_set_shape(out[1], r, x->dims);
    return WM_OK;
}

static wm_status loss_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const loss_state *s = n->state;
    const wm_tensor *X = in[0], *T = in[1], *W = wm_has_in(n, 2) ? in[2] : NULL;
    wm_tensor *lp = n->n_out > 1 ? out[1] : NULL;
    int64_t N = X->dims[0], C = X->dims[1], D = 1;
    for (int d = 2; d < X->rank; d++) D *= X->dims[d];
    int32_t dt = X->dtype;
    double sum = 0, wsum = 0;
    for (int64_t i = 0; i < N; i++)
        for (int64_t d = 0; d < D; d++) {
            uint64_t base = (uint64_t)(i * C * D + d); /* element c at base + c * D */
            int64_t t = wm_tensor_get_int(T, (uint64_t)(i * D + d));
            double m = 0, lse = 0;
            if (s->softmax) {
                m = -INFINITY;
                for (int64_t c = 0; c < C; c++) {
                    double v = wm_tensor_get_f64(X, base + (uint64_t)(c * D));
                    if (v > m) m = v;
                }
                for (int64_t c = 0; c < C; c++) lse += exp(wm_tensor_get_f64(X, base + (uint64_t)(c * D)) - m);
                lse = log(lse);
                if (lp)
                    for (int64_t c = 0; c < C; c++)
                        wm_store_f64(dt, lp->data, base + (uint64_t)(c * D), wm_tensor_get_f64(X, base + (uint64_t)(c * D)) - m - lse);
            }
            double l = 0, w = 0;
            if (!(s->has_ignore && t == s->ignore)) {
                if (t < 0 || t >= C)
                    return wm_node_err(n, x->err, WM_ERR_INPUT, "target %lld at [%lld, %lld] is outside [0, %lld)", (long long)t,
                                       (long long)i, (long long)d, (long long)C);
                w = W ? wm_tensor_get_f64(W, (uint64_t)t) : 1.0;
                double v = wm_tensor_get_f64(X, base + (uint64_t)(t * D));
                l = -(s->softmax ? v - m - lse : v) * w;
            }
            if (s->red == LR_NONE) wm_store_f64(dt, out[0]->data, (uint64_t)(i * D + d), l);
            sum += l;
            wsum += w;
        }
    if (s->red == LR_SUM) wm_store_f64(dt, out[0]->data, 0, sum);
    else if (s->red == LR_MEAN) wm_store_f64(dt, out[0]->data, 0, sum / wsum);
    return WM_OK;
}

static const wm_op ops[] = {
    {"", "NegativeLogLikelihoodLoss", 12, 0, loss_init, loss_infer, loss_run, NULL, 0, 0},
    {"", "SoftmaxCrossEntropyLoss", 12, 0, loss_init, loss_infer, loss_run, NULL, 0, 0},
};

const wm_op_table wm_ops_loss = {ops, sizeof ops / sizeof ops[0]};
