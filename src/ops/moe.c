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
 *
 * com.microsoft QMoE: the same block with quantized experts. Inputs: input,
 * router_probs, then per fc1 / fc2 / fc3 its weights (uint8 [E, N, K bits /
 * 8]: K codes of expert_weight_bits (4 or 8) bits per row, the lower index
 * in the low nibble), its scales (T, [E, N] with block_size 0, else [E, N,
 * K / block_size]) and its bias (T, optional). Weight (n, k) = (code -
 * 2^(bits-1)) * scale, the MatMulNBits layout of each expert with its
 * default zero point, so an expert's GEMM is a MatMulNBits one: with
 * block_size > 0 at the node's accuracy_level (4: int8 activations, as
 * onnxruntime's QNBit path), with a scale per row in float (as onnxruntime,
 * which then dequantizes whatever the level); a row scale of a K that is no
 * power of two >= 16 dequantizes the expert into scratch. Constant experts the kernel table has a layout for
 * (4 bits, blocks of 32, accuracy_level 4) are packed into it per expert at session creation, as MatMulNBits packs
 * its weights, so prefill's per-expert GEMMs run the dense MatMulNBits kernel over their rows. Inputs past 10
 * (zero points, router weights, global and activation scales), per-fc bit
 * widths other than expert_weight_bits, quant_type, prepacked weights and
 * swiglu_limit_after_activation are refused by name.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/gemm.h"
#include "ops/nbits.h"
#include "ops/op.h"

typedef enum { MOE_RELU, MOE_GELU, MOE_SILU, MOE_IDENTITY, MOE_SWIGLU } moe_act;

typedef struct moe {
    int64_t k;
    moe_act act;
    int normalize;
    float alpha, beta, limit; /* limit: INFINITY when absent */
    int q;                    /* QMoE: experts of `bits` bits, scales per row (block 0) or per block */
    int bits, accuracy;       /* accuracy: MatMulNBits' accuracy_level of the blocked experts' GEMMs */
    int64_t block;
    int w[3], sc[3], b[3];    /* input slots of fc1 / fc2 / fc3: weights, scales (-1: none), biases */
    const uint8_t **packed[3]; /* QMoE, per fc and expert: its constant codes and scales in the MatMulNBits
                                  kernels' own layout (wm_nbits_prepack), or NULL where the kernels have none */
} moe;

/* the sizes of one run, from the inputs' dims (checked at infer) */
typedef struct moe_dims {
    int64_t rows, H, E, I, F1;
} moe_dims;

static const int32_t float_types[] = {WM_DT_FLOAT, WM_DT_FLOAT16, 0};

static const int32_t u8_types[] = {WM_DT_UINT8, 0};

static wm_status qmoe_pack(wm_node *n, moe *s, wm_error *err);

/* MoE (q 0) or QMoE (q 1): the slots, the attributes, the input types */
static wm_status init_common(wm_node *n, int q, wm_error *err) {
    wm_status st = wm_need_inputs(n, 3, err);
    if (!st) st = wm_check_type(n, 0, float_types, err);
    if (st) return st;
    moe *s = wm_node_alloc(n, sizeof *s);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    static const int slots[2][3][3] = {{{2, 4, 6}, {-1, -1, -1}, {3, 5, 7}}, {{2, 5, 8}, {3, 6, 9}, {4, 7, 10}}};
    memcpy(s->w, slots[q][0], sizeof s->w);
    memcpy(s->sc, slots[q][1], sizeof s->sc);
    memcpy(s->b, slots[q][2], sizeof s->b);
    s->q = q;
    const char *op = q ? "QMoE" : "MoE";
    if (!wm_has_in(n, s->w[1]))
        return wm_node_err(n, err, WM_ERR_INPUT, "input %d (fc2_experts_weights) is required", s->w[1]);
    if (q) {
        static const char *const extra[] = {"fc1_zero_points", "fc2_zero_points", "fc3_zero_points", "router_weights",
                                            "fc1_global_scale", "fc2_global_scale", "fc1_act_scale", "fc2_act_scale",
                                            "fc1_act_block_scale", "fc2_act_block_scale"};
        for (int i = 11; i < n->n_in; i++)
            if (wm_has_in(n, i))
                return i < 21 ? wm_node_err(n, err, WM_ERR_UNSUPPORTED, "input %d (%s) is not supported", i,
                                            extra[i - 11])
                              : wm_node_err(n, err, WM_ERR_INPUT, "%d inputs: QMoE takes at most 21", n->n_in);
        static const char *const refused[] = {"quant_type", "weights_prepacked", "swiglu_limit_after_activation"};
        for (int i = 0; i < 3; i++)
            if (wm_attr(n, refused[i]) && wm_attr_int(n, refused[i], 0))
                return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "attribute %s is not supported", refused[i]);
        if (!wm_has_in(n, s->sc[0]) || !wm_has_in(n, s->sc[1]))
            return wm_node_err(n, err, WM_ERR_INPUT, "inputs 3 and 6 (fc1_scales, fc2_scales) are required");
        if (wm_has_in(n, s->w[2]) != wm_has_in(n, s->sc[2]))
            return wm_node_err(n, err, WM_ERR_INPUT, "fc3_experts_weights and fc3_scales come together");
        for (int t = 0; t < 3; t++) {
            if (wm_has_in(n, s->w[t]) && (st = wm_check_type(n, s->w[t], u8_types, err))) return st;
            if (wm_has_in(n, s->sc[t]) && (st = wm_check_same_type(n, 0, s->sc[t], err))) return st;
            if (wm_has_in(n, s->b[t]) && (st = wm_check_same_type(n, 0, s->b[t], err))) return st;
        }
        if (wm_has_in(n, 1) && (st = wm_check_same_type(n, 0, 1, err))) return st;
        s->bits = (int)wm_attr_int(n, "expert_weight_bits", 4);
        if (s->bits != 4 && s->bits != 8)
            return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "expert_weight_bits %d (4 or 8)", s->bits);
        for (int t = 1; t <= 3; t++) {
            char key[32];
            snprintf(key, sizeof key, "fc%d_expert_weight_bits", t);
            if (wm_attr(n, key) && wm_attr_int(n, key, s->bits) != s->bits)
                return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "%s %lld differs from expert_weight_bits %d: one width "
                                   "for every fc is supported", key, (long long)wm_attr_int(n, key, 0), s->bits);
        }
        s->accuracy = (int)wm_attr_int(n, "accuracy_level", 0);
        s->block = wm_attr_int(n, "block_size", 0);
        if (s->block && (s->block < 16 || (s->block & (s->block - 1))))
            return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "block_size %lld: 0 (a scale per row) or a power of two "
                               ">= 16", (long long)s->block);
    } else {
        for (int i = 1; i < 8 && i < n->n_in; i++)
            if (wm_has_in(n, i) && (st = wm_check_same_type(n, 0, i, err))) return st;
        if (n->n_in > 8)
            return wm_node_err(n, err, WM_ERR_INPUT, "%d inputs: MoE takes at most 8 (quantized experts are QMoE)",
                               n->n_in);
    }
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
    if (s->act == MOE_SWIGLU && wm_has_in(n, s->w[2]))
        return wm_node_err(n, err, WM_ERR_INPUT, "activation_type swiglu fuses the gate into fc1: fc3 must be absent");
    if (wm_attr_int(n, "use_sparse_mixer", 0))
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "use_sparse_mixer 1 is not supported (%s)", op);
    s->normalize = wm_attr_int(n, "normalize_routing_weights", 0) != 0;
    s->alpha = wm_attr_float(n, "activation_alpha", 1.0f);
    s->beta = wm_attr_float(n, "activation_beta", 0.0f);
    s->limit = wm_attr(n, "swiglu_limit") ? wm_attr_float(n, "swiglu_limit", INFINITY) : INFINITY;
    n->state = s;
    n->out_dtype[0] = n->in_dtype[0];
    return q ? qmoe_pack(n, s, err) : WM_OK;
}

static wm_status moe_init(wm_node *n, wm_error *err) { return init_common(n, 0, err); }
static wm_status qmoe_init(wm_node *n, wm_error *err) { return init_common(n, 1, err); }

/* the sizes and layout from the dims; an error naming the input that disagrees */
/* blocks per row of a quantized weight whose rows hold K values */
static int64_t qblocks(const moe *s, int64_t K) { return s->block ? K / s->block : 1; }

static wm_status moe_shape(const wm_node *n, wm_tensor *const *in, moe_dims *d, wm_error *err) {
    const moe *s = n->state;
    const wm_tensor *x = in[0], *r = in[1], *w1 = in[s->w[0]], *w2 = in[s->w[1]];
    if (x->rank != 2 && x->rank != 3) return wm_node_err(n, err, WM_ERR_INPUT, "input has rank %d (2 or 3)", x->rank);
    if (r->rank != 2 || w1->rank != 3 || w2->rank != 3)
        return wm_node_err(n, err, WM_ERR_INPUT, "router_probs must be 2-D and the expert weights 3-D");
    d->H = x->dims[x->rank - 1];
    d->rows = x->rank == 2 ? x->dims[0] : x->dims[0] * x->dims[1];
    d->E = r->dims[1];
    int sw = s->act == MOE_SWIGLU;
    if (!d->H || !d->E) return wm_node_err(n, err, WM_ERR_INPUT, "hidden size and expert count must be positive");
    /* a quantized weight's last dim holds K * bits / 8 bytes */
    int64_t per = s->q ? 8 / s->bits : 1;
    d->I = s->q ? w2->dims[2] * per : w2->dims[1] * w2->dims[2] / d->H;
    if (d->I < 1) return wm_node_err(n, err, WM_ERR_INPUT, "fc2_experts_weights is empty (no inner features)");
    int legacy = !s->q && ((d->H != d->I && w2->dims[1] == d->I) || (d->H == d->I && sw && w1->dims[1] == d->H));
    d->F1 = sw ? 2 * d->I : d->I;
    int64_t e1[3] = {d->E, d->F1, d->H}, e2[3] = {d->E, d->H, d->I}, e3[3] = {d->E, d->I, d->H};
    if (legacy) {
        e1[1] = d->H, e1[2] = d->F1;
        e2[1] = d->I, e2[2] = d->H;
        e3[1] = d->H, e3[2] = d->I;
    }
    int64_t *want[3] = {e1, e2, e3};
    for (int t = 0; t < 3; t++) {
        if (!wm_has_in(n, s->w[t])) continue;
        const wm_tensor *w = in[s->w[t]];
        int64_t K = want[t][2];
        if (s->q && (K % per || (s->block && K % s->block)))
            return wm_node_err(n, err, WM_ERR_INPUT, "fc%d: %lld input features do not fill whole bytes or blocks of "
                               "%lld", t + 1, (long long)K, (long long)s->block);
        if (s->q) want[t][2] = K / per;
        if (w->rank != 3 || w->dims[0] != want[t][0] || w->dims[1] != want[t][1] || w->dims[2] != want[t][2])
            return wm_node_err(n, err, WM_ERR_INPUT, "fc%d_experts_weights is [%lld, %lld, %lld], expected [%lld, %lld, %lld]",
                               t + 1, (long long)w->dims[0], (long long)(w->rank > 1 ? w->dims[1] : 0),
                               (long long)(w->rank > 2 ? w->dims[2] : 0), (long long)want[t][0],
                               (long long)want[t][1], (long long)want[t][2]);
        if (s->q) {
            const wm_tensor *sc = in[s->sc[t]];
            int64_t kb = qblocks(s, K);
            int ok = sc->dims[0] == d->E && sc->dims[1] == want[t][1] &&
                     (s->block ? sc->rank == 3 && sc->dims[2] == kb : sc->rank == 2);
            if (!ok)
                return s->block ? wm_node_err(n, err, WM_ERR_INPUT, "fc%d_scales must be [%lld, %lld, %lld]", t + 1,
                                              (long long)d->E, (long long)want[t][1], (long long)kb)
                                : wm_node_err(n, err, WM_ERR_INPUT, "fc%d_scales must be [%lld, %lld]", t + 1,
                                              (long long)d->E, (long long)want[t][1]);
        }
    }
    const int64_t blen[3] = {d->F1, d->H, d->I};
    for (int t = 0; t < 3; t++) {
        if (!wm_has_in(n, s->b[t])) continue;
        const wm_tensor *b = in[s->b[t]];
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
   then the routes: per row k (expert, weight), per expert its rows; QMoE: one expert's scales (widened), its
   dequantized weight (only where its block is no power of two >= 16) and the MatMulNBits workspace. Sizes in
   floats / int64 / bytes. */
typedef struct moe_ws {
    float *x, *a, *h1, *h3, *h2, *y, *b1, *b2, *b3, *wt, *lg, *sc, *dq;
    int64_t *ex, *order, *start, *pos;
    char *nb;
} moe_ws;

/* expert weight t (N rows of K values) of a QMoE as MatMulNBits sees it; b and scales are bound per expert */
static void qweight(const moe *s, int64_t N, int64_t K, wm_nbits_w *w) {
    memset(w, 0, sizeof *w);
    w->N = N, w->K = K, w->bits = s->bits;
    w->block = s->block ? s->block : K;
    w->k_blocks = qblocks(s, K);
    w->blob = w->block * s->bits / 8;
    w->accuracy = s->block ? s->accuracy : 0; /* a scale per row: float, as onnxruntime */
}

/* 1 when the MatMulNBits kernels take w's block (else the expert is dequantized into scratch) */
static int qfast(const wm_nbits_w *w) { return w->block >= 16 && !(w->block & (w->block - 1)); }

static void widen(const wm_tensor *t, int f16, size_t off, size_t cnt, float *dst) {
    if (f16)
        for (size_t i = 0; i < cnt; i++) dst[i] = wm_f16_to_f32(((const uint16_t *)t->data)[off + i]);
    else memcpy(dst, (const float *)t->data + off, cnt * sizeof *dst);
}

/* Constant experts of a QMoE in the MatMulNBits kernels' own layout, each expert packed apart (as MatMulNBits packs
 * its constant weights at session creation), so that an expert's GEMM over its rows runs the same kernel as a dense
 * MatMulNBits of that shape; the stored codes and scales are then released (the packed layout holds both). Nothing is
 * packed where the kernel table has no layout for these weights or where the dims disagree (infer names them). */
static wm_status qmoe_pack(wm_node *n, moe *s, wm_error *err) {
    for (int t = 0; t < 3; t++) {
        const wm_tensor *cw = wm_has_in(n, s->w[t]) ? n->in_const[s->w[t]] : NULL;
        const wm_tensor *cs = cw ? n->in_const[s->sc[t]] : NULL;
        if (!cs || cw->rank != 3 || cw->dims[0] < 1 || cw->dims[1] < 1) continue;
        int64_t E = cw->dims[0], N = cw->dims[1], K = cw->dims[2] * (8 / s->bits);
        if (K < 1 || (s->block && K % s->block)) continue;
        wm_nbits_w q;
        qweight(s, N, K, &q);
        size_t ns = (size_t)(N * q.k_blocks);
        if (wm_tensor_nbytes(cw) != (uint64_t)E * ns * (uint64_t)q.blob || wm_tensor_numel(cs) != (uint64_t)E * ns ||
            !qfast(&q) || !wm_nbits_packed_size(&q))
            continue;
        const uint8_t **pk = wm_node_alloc(n, (size_t)E * sizeof *pk);
        float *sc = cs->dtype == WM_DT_FLOAT16 ? malloc(ns * sizeof *sc) : NULL;
        if (!pk || (cs->dtype == WM_DT_FLOAT16 && !sc)) {
            free(sc);
            return wm_err(err, WM_ERR_NOMEM, "out of memory");
        }
        wm_status st = WM_OK;
        for (int64_t e = 0; e < E && !st; e++) {
            q.b = (const uint8_t *)cw->data + (size_t)e * ns * (size_t)q.blob;
            if (sc) widen(cs, 1, (size_t)e * ns, ns, sc), q.scales = sc;
            else q.scales = (const float *)cs->data + (size_t)e * ns;
            st = wm_nbits_prepack(n, &q, &pk[e], err);
        }
        free(sc);
        if (st) return st;
        if (!pk[0]) continue;
        s->packed[t] = pk;
        wm_node_release_const(n, s->w[t]);
        wm_node_release_const(n, s->sc[t]);
    }
    return WM_OK;
}

/* rows N and input features K of fc1 / fc2 / fc3 */
static void fc_dims(const moe_dims *d, int t, int64_t *N, int64_t *K) {
    *N = t == 0 ? d->F1 : t == 1 ? d->H : d->I;
    *K = t == 1 ? d->I : d->H;
}

static size_t moe_ws_layout(const moe *s, const moe_dims *d, int nth, char *base, moe_ws *w) {
    size_t off = 0, nsc = 0, ndq = 0, nnb = 0;
    for (int t = 0; s->q && t < 3; t++) {
        int64_t N, K;
        fc_dims(d, t, &N, &K);
        wm_nbits_w q;
        qweight(s, N, K, &q);
        nsc = nsc > (size_t)(N * q.k_blocks) ? nsc : (size_t)(N * q.k_blocks);
        if (!qfast(&q)) ndq = ndq > (size_t)(N * K) ? ndq : (size_t)(N * K);
        else {
            size_t b = wm_nbits_workspace(&q, d->rows, nth);
            nnb = nnb > b ? nnb : b;
        }
    }
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
    TAKE(wt, float, d->rows * s->k);
    TAKE(ex, int64_t, d->rows * s->k);
    TAKE(order, int64_t, d->rows * s->k);
    TAKE(lg, float, d->E);
    TAKE(start, int64_t, d->E + 1);
    TAKE(pos, int64_t, d->E + 1);
    TAKE(sc, float, nsc);
    TAKE(dq, float, ndq);
    TAKE(nb, char, nnb);
#undef TAKE
    return off + 64;
}

static size_t moe_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    (void)out;
    moe_dims d;
    wm_error e = {0};
    if (moe_shape(n, in, &d, &e)) return 0;
    return moe_ws_layout(n->state, &d, nth, NULL, NULL);
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

/* C [m, N] = A [m, K] @ W^T + bias for expert e's fc(t + 1): float weights, or QMoE's codes and scales */
static void fc(wm_exec *x, const moe *s, wm_tensor *const *in, int t, int f16, int64_t e, int64_t m, int64_t N,
               int64_t K, const float *A, float *C, const float *bias, const moe_ws *w) {
    const wm_tensor *wt = in[s->w[t]];
    if (!s->q) {
        expert_gemm(x, wt, f16, e, m, N, K, A, C, bias);
        return;
    }
    wm_nbits_w q;
    qweight(s, N, K, &q);
    size_t ns = (size_t)(N * q.k_blocks);
    if (s->packed[t]) { /* the layout holds the codes and scales */
        q.packed = s->packed[t][e];
        wm_nbits_matmul(&q, m, A, K, C, N, bias, x, w->nb);
        return;
    }
    q.b = (const uint8_t *)wt->data + (size_t)e * ns * (size_t)q.blob;
    if (f16) widen(in[s->sc[t]], 1, (size_t)e * ns, ns, w->sc), q.scales = w->sc;
    else q.scales = (const float *)in[s->sc[t]]->data + (size_t)e * ns;
    if (qfast(&q)) {
        wm_nbits_matmul(&q, m, A, K, C, N, bias, x, w->nb);
        return;
    }
    wm_nbits_dequant(&q, 0, N, w->dq);
    wm_gemm_args g = {m, N, K, A, K, 0, w->dq, K, 1, C, N, 1.0f, 0.0f, NULL, bias, WM_ACT_NONE};
    wm_sgemm(x, &g);
}

static wm_status moe_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const moe *s = n->state;
    moe_dims d;
    wm_status st = moe_shape(n, in, &d, x->err);
    if (st) return st;
    if (!d.rows) return WM_OK;
    moe_ws w;
    int nth = x->pool ? x->nth : 1;
    if (moe_ws_layout(s, &d, nth, NULL, NULL) > x->ws_size)
        return wm_node_err(n, x->err, WM_ERR_INTERNAL, "workspace too small");
    moe_ws_layout(s, &d, nth, x->ws, &w);
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
        if (wm_has_in(n, s->b[0])) widen(in[s->b[0]], f16, (size_t)(e * F1), (size_t)F1, w.b1), b1 = w.b1;
        if (wm_has_in(n, s->b[1])) widen(in[s->b[1]], f16, (size_t)(e * H), (size_t)H, w.b2), b2 = w.b2;
        if (wm_has_in(n, s->b[2])) widen(in[s->b[2]], f16, (size_t)(e * I), (size_t)I, w.b3), b3 = w.b3;
        fc(x, s, in, 0, f16, e, m, F1, H, w.a, w.h1, b1, &w);
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
        } else if (wm_has_in(n, s->w[2])) {
            fc(x, s, in, 2, f16, e, m, I, H, w.a, w.h3, b3, &w);
            for (int64_t j = 0; j < m * I; j++) w.h3[j] *= act1(s, w.h1[j]);
        } else {
            for (int64_t j = 0; j < m * I; j++) w.h3[j] = act1(s, w.h1[j]);
        }
        fc(x, s, in, 1, f16, e, m, H, I, w.h3, w.h2, b2, &w);
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
    {"com.microsoft", "QMoE", 1, 0, qmoe_init, moe_infer, moe_run, moe_workspace, 0, 0},
};

const wm_op_table wm_ops_moe = {ops, sizeof ops / sizeof ops[0]};
