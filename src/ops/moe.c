/*
 * moe.c - com.microsoft MoE: a mixture-of-experts feed-forward block whose
 * tokens each run through only the k experts the router picks.
 *
 * Inputs: input [rows, H] or [B, S, H]; router_probs [rows, E] (logits: a
 * softmax over E is taken here); fc1_experts_weights [E, F1, H];
 * fc1_experts_bias [E, F1] (optional); fc2_experts_weights [E, H, I];
 * fc2_experts_bias [E, H] (optional); fc3_experts_weights [E, I, H]
 * (optional, gated: act(fc1) * fc3); fc3_experts_bias [E, I] (optional).
 * The legacy dims [E, H, F1] / [E, I, H] / [E, H, I] are accepted as
 * onnxruntime accepts them (H != I and fc2's dim 1 == I, or H == I with fused
 * SwiGLU and fc1's dim 1 == H): only the dims differ, the bytes are read in
 * the same order (each expert's rows of output features), as there. F1 = I, or 2 I for activation_type swiglu, whose
 * fc1 rows interleave (gate, linear) pairs (swiglu_fusion 1, the layout
 * onnxruntime's CPU kernel takes).
 * Attributes: k (1), activation_type relu|gelu|silu|identity|swiglu (relu),
 * normalize_routing_weights (0: the k softmax probabilities as they are; 1:
 * divided by their sum), activation_alpha (1) / activation_beta (0) /
 * swiglu_limit (none): swiglu = g sigmoid(alpha g) (l + beta) with g clamped
 * to <= limit and l to [-limit, limit] when a limit is given;
 * use_sparse_mixer 1 is refused by name.
 * T: float32 or float16 (computed in float32; float16 weights read as half
 * by the half GEMM). Output: input's shape.
 * Per run: the top-k experts of every row, then per expert the rows routed
 * to it gathered into one block, its GEMMs over only those rows (an expert
 * no row picked is never read), and each row's result added with its weight.
 */
#include <math.h>
#include <string.h>

#include "ops/gemm.h"
#include "ops/op.h"

typedef enum { MOE_RELU, MOE_GELU, MOE_SILU, MOE_IDENTITY, MOE_SWIGLU } moe_act;

typedef struct moe {
    int64_t k;
    moe_act act;
    int normalize;
    float alpha, beta, limit; /* limit: INFINITY when absent */
} moe;

/* the sizes of one run, from the inputs' dims (checked at infer) */
typedef struct moe_dims {
    int64_t rows, H, E, I, F1;
} moe_dims;

static const int32_t float_types[] = {WM_DT_FLOAT, WM_DT_FLOAT16, 0};

static wm_status moe_init(wm_node *n, wm_error *err) {
    wm_status st = wm_need_inputs(n, 3, err);
    if (!st) st = wm_check_type(n, 0, float_types, err);
    if (st) return st;
    if (!wm_has_in(n, 4))
        return wm_node_err(n, err, WM_ERR_INPUT, "input 4 (fc2_experts_weights) is required");
    for (int i = 1; i < 8 && i < n->n_in; i++)
        if (wm_has_in(n, i) && (st = wm_check_same_type(n, 0, i, err))) return st;
    if (n->n_in > 8)
        return wm_node_err(n, err, WM_ERR_INPUT, "%d inputs: MoE takes at most 8 (quantized experts are QMoE)",
                           n->n_in);
    moe *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    s->k = wm_attr_int(n, "k", 1);
    char act[32];
    wm_attr_string(n, "activation_type", "relu", act, sizeof act);
    static const char *const names[] = {"relu", "gelu", "silu", "identity", "swiglu"};
    s->act = (moe_act)-1;
    for (int i = 0; i < 5; i++)
        if (!strcmp(act, names[i])) s->act = (moe_act)i;
    if ((int)s->act < 0)
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "activation_type '%s' (relu, gelu, silu, identity, swiglu)", act);
    if (s->act == MOE_SWIGLU && wm_attr_int(n, "swiglu_fusion", 1) != 1)
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED,
                           "swiglu_fusion %lld: only 1 (fc1 rows interleave gate and linear) is supported",
                           (long long)wm_attr_int(n, "swiglu_fusion", 1));
    if (s->act == MOE_SWIGLU && wm_has_in(n, 6))
        return wm_node_err(n, err, WM_ERR_INPUT, "activation_type swiglu fuses the gate into fc1: fc3 must be absent");
    if (wm_attr_int(n, "use_sparse_mixer", 0))
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "use_sparse_mixer 1 is not supported");
    s->normalize = wm_attr_int(n, "normalize_routing_weights", 0) != 0;
    s->alpha = wm_attr_float(n, "activation_alpha", 1.0f);
    s->beta = wm_attr_float(n, "activation_beta", 0.0f);
    s->limit = wm_attr(n, "swiglu_limit") ? wm_attr_float(n, "swiglu_limit", INFINITY) : INFINITY;
    n->state = s;
    n->out_dtype[0] = n->in_dtype[0];
    return WM_OK;
}

/* the sizes and layout from the dims; an error naming the input that disagrees */
static wm_status moe_shape(const wm_node *n, wm_tensor *const *in, moe_dims *d, wm_error *err) {
    const moe *s = n->state;
    const wm_tensor *x = in[0], *r = in[1], *w1 = in[2], *w2 = in[4];
    if (x->rank != 2 && x->rank != 3) return wm_node_err(n, err, WM_ERR_INPUT, "input has rank %d (2 or 3)", x->rank);
    if (r->rank != 2 || w1->rank != 3 || w2->rank != 3)
        return wm_node_err(n, err, WM_ERR_INPUT, "router_probs must be 2-D and the expert weights 3-D");
    d->H = x->dims[x->rank - 1];
    d->rows = x->rank == 2 ? x->dims[0] : x->dims[0] * x->dims[1];
    d->E = r->dims[1];
    int sw = s->act == MOE_SWIGLU;
    if (!d->H || !d->E) return wm_node_err(n, err, WM_ERR_INPUT, "hidden size and expert count must be positive");
    d->I = w2->dims[1] * w2->dims[2] / d->H;
    if (d->I < 1) return wm_node_err(n, err, WM_ERR_INPUT, "fc2_experts_weights is empty (no inner features)");
    int legacy = (d->H != d->I && w2->dims[1] == d->I) || (d->H == d->I && sw && w1->dims[1] == d->H);
    d->F1 = sw ? 2 * d->I : d->I;
    int64_t e1[3] = {d->E, d->F1, d->H}, e2[3] = {d->E, d->H, d->I}, e3[3] = {d->E, d->I, d->H};
    if (legacy) {
        e1[1] = d->H, e1[2] = d->F1;
        e2[1] = d->I, e2[2] = d->H;
        e3[1] = d->H, e3[2] = d->I;
    }
    const int64_t *want[3] = {e1, e2, e3};
    const int idx[3] = {2, 4, 6};
    for (int t = 0; t < 3; t++) {
        if (!wm_has_in(n, idx[t])) continue;
        const wm_tensor *w = in[idx[t]];
        if (w->rank != 3 || w->dims[0] != want[t][0] || w->dims[1] != want[t][1] || w->dims[2] != want[t][2])
            return wm_node_err(n, err, WM_ERR_INPUT, "fc%d_experts_weights is [%lld, %lld, %lld], expected [%lld, %lld, %lld]",
                               t + 1, (long long)w->dims[0], (long long)(w->rank > 1 ? w->dims[1] : 0),
                               (long long)(w->rank > 2 ? w->dims[2] : 0), (long long)want[t][0],
                               (long long)want[t][1], (long long)want[t][2]);
    }
    const int64_t blen[3] = {d->F1, d->H, d->I};
    for (int t = 0; t < 3; t++) {
        if (!wm_has_in(n, idx[t] + 1)) continue;
        const wm_tensor *b = in[idx[t] + 1];
        if (b->rank != 2 || b->dims[0] != d->E || b->dims[1] != blen[t])
            return wm_node_err(n, err, WM_ERR_INPUT, "fc%d_experts_bias must be [%lld, %lld]", t + 1,
                               (long long)d->E, (long long)blen[t]);
    }
    if (r->dims[0] != d->rows)
        return wm_node_err(n, err, WM_ERR_INPUT, "router_probs has %lld rows, input %lld", (long long)r->dims[0],
                           (long long)d->rows);
    if (s->k < 1 || s->k > d->E)
        return wm_node_err(n, err, WM_ERR_INPUT, "k %lld: must be in [1, %lld] (the experts)", (long long)s->k,
                           (long long)d->E);
    return WM_OK;
}

static wm_status moe_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    moe_dims d;
    wm_status st = moe_shape(n, in, &d, err);
    if (st) return st;
    wm_set_shape(out[0], in[0]->rank, in[0]->dims);
    return WM_OK;
}

/* float32 scratch: x (widened), gathered rows, fc1 out, fc3 out, fc2 out, y (accumulated), biases (widened),
   then the routes: per row k (expert, weight), per expert its rows. Sizes in floats / int64. */
typedef struct moe_ws {
    float *x, *a, *h1, *h3, *h2, *y, *b1, *b2, *b3, *wt, *lg;
    int64_t *ex, *order, *start, *pos;
} moe_ws;

static size_t moe_ws_layout(const moe_dims *d, int64_t k, char *base, moe_ws *w) {
    size_t off = 0;
#define TAKE(p, T, cnt) do { off = (off + 63) & ~(size_t)63; if (base) w->p = (T *)(base + off); off += (size_t)(cnt) * sizeof(T); } while (0)
    TAKE(x, float, d->rows * d->H);
    TAKE(a, float, d->rows * d->H);
    TAKE(h1, float, d->rows * d->F1);
    TAKE(h3, float, d->rows * d->I);
    TAKE(h2, float, d->rows * d->H);
    TAKE(y, float, d->rows * d->H);
    TAKE(b1, float, d->F1);
    TAKE(b2, float, d->H);
    TAKE(b3, float, d->I);
    TAKE(wt, float, d->rows * k);
    TAKE(ex, int64_t, d->rows * k);
    TAKE(order, int64_t, d->rows * k);
    TAKE(lg, float, d->E);
    TAKE(start, int64_t, d->E + 1);
    TAKE(pos, int64_t, d->E + 1);
#undef TAKE
    return off + 64;
}

static size_t moe_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    (void)out, (void)nth;
    moe_dims d;
    wm_error e = {0};
    if (moe_shape(n, in, &d, &e)) return 0;
    return moe_ws_layout(&d, ((const moe *)n->state)->k, NULL, NULL);
}

static float act1(const moe *s, float v) {
    switch (s->act) {
    case MOE_RELU: return v > 0 ? v : 0;
    case MOE_GELU: return 0.5f * v * (1.0f + erff(v * 0.70710678f));
    case MOE_SILU: return v / (1.0f + expf(-v));
    default: return v;
    }
}

/* the k experts of one row: softmax over the router logits, the k largest (lower index first on ties) */
static void route(const moe *s, const float *logit, int64_t E, int64_t *ex, float *wt) {
    float mx = logit[0];
    for (int64_t e = 1; e < E; e++) mx = logit[e] > mx ? logit[e] : mx;
    double sum = 0;
    for (int64_t e = 0; e < E; e++) sum += exp((double)logit[e] - mx);
    for (int64_t j = 0; j < s->k; j++) {
        int64_t best = -1;
        for (int64_t e = 0; e < E; e++) {
            int taken = 0;
            for (int64_t i = 0; i < j; i++) taken |= ex[i] == e;
            if (!taken && (best < 0 || logit[e] > logit[best] || (isnan(logit[best]) && !isnan(logit[e])))) best = e;
        }
        ex[j] = best;
        wt[j] = (float)(exp((double)logit[best] - mx) / sum);
    }
    if (s->normalize) {
        float t = 0;
        for (int64_t j = 0; j < s->k; j++) t += wt[j];
        for (int64_t j = 0; j < s->k && t > 0; j++) wt[j] /= t;
    }
}

/* C [m, N] = A [m, K] @ W^T + bias, W expert e's [N, K] of the weight input */
static void expert_gemm(wm_exec *x, const wm_tensor *w, int f16, int64_t e, int64_t m, int64_t N, int64_t K,
                        const float *A, float *C, const float *bias) {
    size_t off = (size_t)e * (size_t)N * (size_t)K;
    if (f16) {
        wm_hgemm(x, m, N, K, A, (const uint16_t *)w->data + off, 1, NULL, C, bias);
        return;
    }
    wm_gemm_args g = {m, N, K, A, K, 0, (const float *)w->data + off, K, 1, C, N, 1.0f, 0.0f, NULL, bias, WM_ACT_NONE};
    wm_sgemm(x, &g);
}

static void widen(const wm_tensor *t, int f16, size_t off, size_t cnt, float *dst) {
    if (f16)
        for (size_t i = 0; i < cnt; i++) dst[i] = wm_f16_to_f32(((const uint16_t *)t->data)[off + i]);
    else memcpy(dst, (const float *)t->data + off, cnt * sizeof *dst);
}

static wm_status moe_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const moe *s = n->state;
    moe_dims d;
    wm_status st = moe_shape(n, in, &d, x->err);
    if (st) return st;
    if (!d.rows) return WM_OK;
    moe_ws w;
    if (moe_ws_layout(&d, s->k, NULL, NULL) > x->ws_size)
        return wm_node_err(n, x->err, WM_ERR_INTERNAL, "workspace too small");
    moe_ws_layout(&d, s->k, x->ws, &w);
    int f16 = n->in_dtype[0] == WM_DT_FLOAT16;
    const int64_t H = d.H, I = d.I, F1 = d.F1, k = s->k, E = d.E;
    /* float32 reads the input and accumulates into the output in place; float16 goes through float32 scratch */
    const float *X = f16 ? w.x : (const float *)in[0]->data;
    float *Y = f16 ? w.y : (float *)out[0]->data;
    if (f16) widen(in[0], f16, 0, (size_t)(d.rows * H), w.x);
    /* routes, then the (row, slot) pairs grouped by expert: a counting sort keeps each expert's rows in order */
    for (int64_t r = 0; r < d.rows; r++) {
        widen(in[1], f16, (size_t)(r * E), (size_t)E, w.lg);
        route(s, w.lg, E, w.ex + r * k, w.wt + r * k);
    }
    memset(w.start, 0, (size_t)(E + 1) * sizeof *w.start);
    for (int64_t i = 0; i < d.rows * k; i++) w.start[w.ex[i] + 1]++;
    for (int64_t e = 0; e < E; e++) w.start[e + 1] += w.start[e];
    memcpy(w.pos, w.start, (size_t)(E + 1) * sizeof *w.pos);
    for (int64_t i = 0; i < d.rows * k; i++) w.order[w.pos[w.ex[i]]++] = i; /* i = row * k + slot */
    memset(Y, 0, (size_t)(d.rows * H) * sizeof *Y);
    for (int64_t e = 0; e < E; e++) {
        int64_t m = w.start[e + 1] - w.start[e];
        if (!m) continue; /* no row chose it: its weights are never read */
        const int64_t *rows = w.order + w.start[e];
        for (int64_t j = 0; j < m; j++) memcpy(w.a + j * H, X + rows[j] / k * H, (size_t)H * sizeof *w.a);
        const float *b1 = NULL, *b2 = NULL, *b3 = NULL;
        if (wm_has_in(n, 3)) widen(in[3], f16, (size_t)(e * F1), (size_t)F1, w.b1), b1 = w.b1;
        if (wm_has_in(n, 5)) widen(in[5], f16, (size_t)(e * H), (size_t)H, w.b2), b2 = w.b2;
        if (wm_has_in(n, 7)) widen(in[7], f16, (size_t)(e * I), (size_t)I, w.b3), b3 = w.b3;
        expert_gemm(x, in[2], f16, e, m, F1, H, w.a, w.h1, b1);
        if (s->act == MOE_SWIGLU) {
            for (int64_t j = 0; j < m; j++) {
                float *h = w.h1 + j * F1, *o = w.h3 + j * I;
                for (int64_t c = 0; c < I; c++) {
                    float g = h[2 * c], l = h[2 * c + 1];
                    if (g > s->limit) g = s->limit;
                    if (l > s->limit) l = s->limit;
                    if (l < -s->limit) l = -s->limit;
                    o[c] = g / (1.0f + expf(-s->alpha * g)) * (l + s->beta);
                }
            }
        } else if (wm_has_in(n, 6)) {
            expert_gemm(x, in[6], f16, e, m, I, H, w.a, w.h3, b3);
            for (int64_t j = 0; j < m * I; j++) w.h3[j] *= act1(s, w.h1[j]);
        } else {
            for (int64_t j = 0; j < m * I; j++) w.h3[j] = act1(s, w.h1[j]);
        }
        expert_gemm(x, in[4], f16, e, m, H, I, w.h3, w.h2, b2);
        for (int64_t j = 0; j < m; j++) {
            float wt = w.wt[rows[j]], *yr = Y + rows[j] / k * H;
            const float *hr = w.h2 + j * H;
            for (int64_t c = 0; c < H; c++) yr[c] += wt * hr[c];
        }
    }
    if (f16)
        for (int64_t i = 0; i < d.rows * H; i++) ((uint16_t *)out[0]->data)[i] = wm_f32_to_f16(w.y[i]);
    return WM_OK;
}

static const wm_op ops[] = {
    {"com.microsoft", "MoE", 1, 0, moe_init, moe_infer, moe_run, moe_workspace, 0, 0},
};

const wm_op_table wm_ops_moe = {ops, sizeof ops / sizeof ops[0]};
