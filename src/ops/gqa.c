/*
 * gqa.c - com.microsoft GroupQueryAttention (onnxruntime contrib), float32
 * or float16 (every T input one type, as onnxruntime's CPU kernels take
 * them), on the attention core (attn_core.h). float16: the KV cache stays
 * float16 and the core reads it in place; query, new keys/values, rotary
 * tables, bias and sinks are widened to float32, keys rotated in float32
 * and rounded once into the cache, the output rounded once.
 *
 * query (B, S, Nq*H) with key/value (B, S, Nkv*H), or packed QKV query
 * (B, S, (Nq + 2 Nkv) H); past_key/past_value (B, Nkv, Pbuf, H);
 * seqlens_k (B) int32 = tokens of each batch entry so far - 1;
 * total_sequence_length int32 scalar (the batch maximum).
 * present_key/present_value are (B, Nkv, max(total, Pbuf), H): the rows of
 * the past that are valid are copied, the new keys/values written after
 * them, every other row zero, so with a max-length past buffer the present
 * is that buffer updated in place (past_present_share_buffer layout): when
 * present and past are the same memory, only the new rows are written.
 * First prompt (S == total, or S > 1 with batch 1 continuing a past): the
 * past length of entry b is 0 for a first prompt, else seqlens_k[b] + 1 - S.
 * Causal attention over keys [0, past_b + s] (local_window_size w > 0: only
 * the last w of them, as onnxruntime 1.32 does), softcap, attention_bias (B|1, Nq|1, S, total),
 * head_sink / smooth_softmax, do_rotary with cos_cache/sin_cache (P, rot/2)
 * at positions past_b + s (or position_ids), rotary_interleaved.
 * Quantized KV caches, output_qk, sliding_window_cache, causal=0 and the
 * q/k norm weights are refused at session creation.
 */
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "ops/attn_core.h"
#include "ops/rope.h"

static const int32_t f32_f16[] = {WM_DT_FLOAT, WM_DT_FLOAT16, 0};

enum { I_Q, I_K, I_V, I_PK, I_PV, I_SEQ, I_TOTAL, I_COS, I_SIN, I_POS, I_BIAS, I_SINK };

static wm_status gqa_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, I_Q, f32_f16, err);
    if (st) return st;
    for (int i = 1; i <= I_SINK && i < n->n_in; i++)
        if (wm_has_in(n, i) && i != I_SEQ && i != I_TOTAL && i != I_POS && n->in_dtype[i] != n->in_dtype[I_Q])
            return wm_node_err(n, err, WM_ERR_INPUT, "input %d is %s but query is %s (one type T)", i,
                               wm_dtype_name(n->in_dtype[i]), wm_dtype_name(n->in_dtype[I_Q]));
    if (!wm_has_in(n, I_SEQ) || !wm_has_in(n, I_TOTAL) || n->in_dtype[I_SEQ] != WM_DT_INT32 || n->in_dtype[I_TOTAL] != WM_DT_INT32)
        return wm_node_err(n, err, WM_ERR_INPUT, "seqlens_k and total_sequence_length must be int32");
    if (wm_has_in(n, I_POS) && n->in_dtype[I_POS] != WM_DT_INT64) return wm_node_err(n, err, WM_ERR_INPUT, "position_ids must be int64");
    for (int i = I_SINK + 1; i < n->n_in; i++)
        if (wm_has_in(n, i)) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "input %d (quantized KV cache scales / q-k norm weights)", i);
    int64_t nq = wm_attr_int(n, "num_heads", 0), nkv = wm_attr_int(n, "kv_num_heads", 0);
    if (nq <= 0 || nkv <= 0 || nq % nkv) return wm_node_err(n, err, WM_ERR_INPUT, "num_heads must be a positive multiple of kv_num_heads");
    if (wm_has_in(n, I_K) != wm_has_in(n, I_V)) return wm_node_err(n, err, WM_ERR_INPUT, "key and value go together");
    if (wm_has_in(n, I_PK) != wm_has_in(n, I_PV)) return wm_node_err(n, err, WM_ERR_INPUT, "past_key and past_value go together");
    if (wm_attr_int(n, "do_rotary", 0) && (!wm_has_in(n, I_COS) || !wm_has_in(n, I_SIN)))
        return wm_node_err(n, err, WM_ERR_INPUT, "do_rotary needs cos_cache and sin_cache");
    if (!wm_attr_int(n, "causal", 1)) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "causal=0");
    if (wm_attr_int(n, "sliding_window_cache", 0)) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "sliding_window_cache=1");
    if (wm_attr_int(n, "qk_output", 0) || wm_has_out(n, 3)) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "output_qk");
    char buf[32];
    const char *kq = wm_attr_string(n, "k_quant_type", "NONE", buf, sizeof buf);
    if (strcmp(kq, "NONE")) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "k_quant_type %s", kq);
    const char *vq = wm_attr_string(n, "v_quant_type", "NONE", buf, sizeof buf);
    if (strcmp(vq, "NONE")) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "v_quant_type %s", vq);
    for (int k = 0; k < n->n_out; k++) n->out_dtype[k] = n->in_dtype[I_Q];
    return WM_OK;
}

typedef struct gshape {
    int64_t B, S, Nq, Nkv, H, Pbuf, total, T, rot;
    int packed;
} gshape;

static wm_status gqa_shape(const wm_node *n, wm_tensor *const *in, gshape *g, int need_total, wm_error *err) {
    memset(g, 0, sizeof *g);
    const wm_tensor *q = in[I_Q];
    g->Nq = wm_attr_int(n, "num_heads", 1), g->Nkv = wm_attr_int(n, "kv_num_heads", 1);
    if (q->rank != 3) return wm_node_err(n, err, WM_ERR_INPUT, "query must be 3-D");
    g->B = q->dims[0], g->S = q->dims[1];
    g->packed = !wm_has_in(n, I_K);
    int64_t div = g->packed ? g->Nq + 2 * g->Nkv : g->Nq;
    if (q->dims[2] % div) return wm_node_err(n, err, WM_ERR_INPUT, "query hidden size %lld is not a multiple of %lld heads", (long long)q->dims[2], (long long)div);
    g->H = q->dims[2] / div;
    if (!g->packed) {
        const wm_tensor *k = in[I_K], *v = in[I_V];
        if (k->rank != 3 || v->rank != 3 || k->dims[0] != g->B || v->dims[0] != g->B || k->dims[1] != g->S ||
            v->dims[1] != g->S || k->dims[2] != g->Nkv * g->H || v->dims[2] != g->Nkv * g->H)
            return wm_node_err(n, err, WM_ERR_INPUT, "key/value must be (B, S, kv_num_heads * head)");
    }
    if (wm_has_in(n, I_PK)) {
        const wm_tensor *pk = in[I_PK], *pv = in[I_PV];
        if (pk->rank != 4 || pv->rank != 4 || pk->dims[0] != g->B || pk->dims[1] != g->Nkv || pk->dims[3] != g->H)
            return wm_node_err(n, err, WM_ERR_INPUT, "past_key must be (B, kv_num_heads, P, head)");
        for (int d = 0; d < 4; d++)
            if (pv->dims[d] != pk->dims[d]) return wm_node_err(n, err, WM_ERR_INPUT, "past_key and past_value shapes differ");
        g->Pbuf = pk->dims[2];
    }
    if (in[I_SEQ]->rank != 1 || in[I_SEQ]->dims[0] != g->B) return wm_node_err(n, err, WM_ERR_INPUT, "seqlens_k must be (batch)");
    if (wm_tensor_numel(in[I_TOTAL]) != 1) return wm_node_err(n, err, WM_ERR_INPUT, "total_sequence_length must be one value");
    if (wm_has_in(n, I_COS)) {
        const wm_tensor *c = in[I_COS], *s = in[I_SIN];
        if (c->rank != 2 || s->rank != 2 || c->dims[0] != s->dims[0] || c->dims[1] != s->dims[1] || 2 * c->dims[1] > g->H)
            return wm_node_err(n, err, WM_ERR_INPUT, "cos_cache/sin_cache must be (P, rot/2) with rot <= head");
        g->rot = 2 * c->dims[1];
    }
    if (!need_total) return WM_OK;
    if (!in[I_TOTAL]->data) return WM_NEED_DATA;
    g->total = ((const int32_t *)in[I_TOTAL]->data)[0];
    if (g->total < 0) return wm_node_err(n, err, WM_ERR_INPUT, "total_sequence_length is negative");
    g->T = g->total > g->Pbuf ? g->total : g->Pbuf;
    if (wm_has_in(n, I_BIAS)) {
        const wm_tensor *t = in[I_BIAS];
        if (t->rank != 4 || (t->dims[0] != 1 && t->dims[0] != g->B) || (t->dims[1] != 1 && t->dims[1] != g->Nq) ||
            t->dims[2] != g->S || t->dims[3] > g->T)
            return wm_node_err(n, err, WM_ERR_INPUT, "attention_bias must be (B or 1, heads or 1, S, total)");
    }
    if (wm_has_in(n, I_SINK) && wm_tensor_numel(in[I_SINK]) != (uint64_t)g->Nq)
        return wm_node_err(n, err, WM_ERR_INPUT, "head_sink must have num_heads values");
    if (wm_has_in(n, I_POS) && (in[I_POS]->rank != 2 || in[I_POS]->dims[0] != g->B || in[I_POS]->dims[1] != g->S))
        return wm_node_err(n, err, WM_ERR_INPUT, "position_ids must be (batch, sequence)");
    return WM_OK;
}

static wm_status gqa_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    gshape g;
    wm_status st = gqa_shape(n, in, &g, 1, err);
    if (st) return st;
    int64_t y[3] = {g.B, g.S, g.Nq * g.H}, p[4] = {g.B, g.Nkv, g.T, g.H};
    wm_set_shape(out[0], 3, y);
    if (n->n_out > 1 && out[1]) wm_set_shape(out[1], 4, p);
    if (n->n_out > 2 && out[2]) wm_set_shape(out[2], 4, p);
    return WM_OK;
}

/* workspace: float32 query (rotated), the KV buffers when present is not an output; float16: the
   float32 output, bias and sinks, one widened row (largest of a head and a rotary half-table pair) */
typedef struct gqa_ws {
    float *qr, *o32, *bias, *sink, *row;
    void *pk, *pv;
    int64_t *ints;
} gqa_ws;

static void gqa_layout(const wm_node *n, wm_tensor *const *in, const gshape *g, wm_tensor *const *out, wm_wsbump *w,
                       gqa_ws *l) {
    int h16 = n->in_dtype[I_Q] == WM_DT_FLOAT16;
    size_t es = h16 ? 2 : 4, qn = (size_t)(g->B * g->S * g->Nq * g->H);
    memset(l, 0, sizeof *l);
    l->qr = wm_attr_int(n, "do_rotary", 0) || h16 ? wm_ws_take(w, qn * sizeof(float)) : NULL;
    size_t kvb = (size_t)(g->B * g->Nkv * g->T * g->H) * es;
    l->pk = n->n_out > 1 && out[1] ? out[1]->data : wm_ws_take(w, kvb);
    l->pv = n->n_out > 2 && out[2] ? out[2]->data : wm_ws_take(w, kvb);
    l->ints = wm_ws_take(w, (size_t)(3 * g->B + 1) * sizeof(int64_t));
    if (!h16) return;
    l->o32 = wm_ws_take(w, qn * sizeof(float));
    if (wm_has_in(n, I_BIAS)) l->bias = wm_ws_take(w, (size_t)wm_tensor_numel(in[I_BIAS]) * sizeof(float));
    if (wm_has_in(n, I_SINK)) l->sink = wm_ws_take(w, (size_t)g->Nq * sizeof(float));
    l->row = wm_ws_take(w, (size_t)(g->H + g->rot + 2) * sizeof(float));
}

static void gqa_core(const gshape *g, wm_attn *a) {
    memset(a, 0, sizeof *a);
    a->B = g->B, a->Hq = g->Nq, a->Hkv = g->Nkv, a->S = g->S, a->T = g->T, a->dk = g->H, a->dv = g->H;
}

static size_t gqa_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    gshape g;
    wm_error e = {0};
    if (gqa_shape(n, in, &g, 1, &e)) return 0;
    wm_wsbump w = {NULL, 0};
    gqa_ws l;
    gqa_layout(n, in, &g, out, &w, &l);
    wm_attn a;
    gqa_core(&g, &a);
    a.kv_h16 = n->in_dtype[I_Q] == WM_DT_FLOAT16;
    return w.off + 64 + wm_attn_workspace(&a, nth);
}

/* rotates row x (head vector) at position pos; float16 tables are widened into tmp (rot floats) */
static void rot_at(const wm_node *n, wm_tensor *const *in, const gshape *g, float *x, int64_t pos, float *tmp) {
    int64_t half = g->rot / 2;
    const float *c, *s;
    if (in[I_COS]->dtype == WM_DT_FLOAT16) {
        const wm_kernels *K = wm_kernels_get();
        K->f16_to_f32(half, tmp, (const uint16_t *)in[I_COS]->data + pos * half);
        K->f16_to_f32(half, tmp + half, (const uint16_t *)in[I_SIN]->data + pos * half);
        c = tmp, s = tmp + half;
    } else {
        c = (const float *)in[I_COS]->data + pos * half, s = (const float *)in[I_SIN]->data + pos * half;
    }
    wm_rope_rotate(x, g->rot, c, s, wm_attr_int(n, "rotary_interleaved", 0) != 0);
}

/* Writes head vector src (H elements of the node's type) to dst in that type, rotated at pos when
   rotary is on: float32 in place, float16 through the float32 row buf (rounded once). */
static void put_row(const wm_node *n, wm_tensor *const *in, const gshape *g, void *dst, const void *src, int h16,
                    int rot, int64_t pos, float *buf) {
    if (!h16) {
        memcpy(dst, src, (size_t)g->H * sizeof(float));
        if (rot) rot_at(n, in, g, dst, pos, NULL);
        return;
    }
    if (!rot) {
        memcpy(dst, src, (size_t)g->H * 2);
        return;
    }
    const wm_kernels *K = wm_kernels_get();
    K->f16_to_f32(g->H, buf, src);
    rot_at(n, in, g, buf, pos, buf + g->H);
    K->f32_to_f16(g->H, dst, buf);
}

static wm_status gqa_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    gshape g;
    wm_status st = gqa_shape(n, in, &g, 1, x->err);
    if (st) return st;
    wm_wsbump w = {x->ws, 0};
    gqa_ws l;
    gqa_layout(n, in, &g, out, &w, &l);
    int h16 = n->in_dtype[I_Q] == WM_DT_FLOAT16;
    size_t es = h16 ? 2 : 4;
    int64_t B = g.B, S = g.S, Nq = g.Nq, Nkv = g.Nkv, H = g.H, T = g.T;
    int64_t *past = l.ints, *kvn = l.ints + B;
    const int32_t *seq = in[I_SEQ]->data;
    int subsequent = S > 1 && S != g.total, first = !subsequent && S == g.total;
    if (subsequent && B != 1) return wm_node_err(n, x->err, WM_ERR_INPUT, "a prompt continuing a past needs batch 1");
    if (!first && !subsequent && S != 1) return wm_node_err(n, x->err, WM_ERR_INPUT, "sequence length must be 1 after the prompt");
    int do_rot = wm_attr_int(n, "do_rotary", 0) != 0;
    const int64_t *pos_ids = wm_has_in(n, I_POS) ? in[I_POS]->data : NULL;
    for (int64_t b = 0; b < B; b++) {
        int64_t tot = (int64_t)seq[b] + 1;
        past[b] = first ? 0 : tot - S;
        kvn[b] = past[b] + S;
        if (tot < 1 || tot > g.total || past[b] < 0 || past[b] > g.Pbuf || kvn[b] > T)
            return wm_node_err(n, x->err, WM_ERR_INPUT, "seqlens_k[%lld] = %d does not fit %lld new tokens, a past of %lld and total %lld",
                               (long long)b, seq[b], (long long)S, (long long)g.Pbuf, (long long)g.total);
        for (int64_t s = 0; do_rot && s < S; s++) {
            int64_t p = pos_ids ? pos_ids[b * S + s] : past[b] + s;
            if (p < 0 || p >= in[I_COS]->dims[0])
                return wm_node_err(n, x->err, WM_ERR_INPUT, "position %lld is outside the cos/sin cache (%lld rows)",
                                   (long long)p, (long long)in[I_COS]->dims[0]);
        }
    }
    /* sources: element (b, s, head h) of Q/K/V, in elements of the node's type */
    int64_t qd = g.packed ? (Nq + 2 * Nkv) * H : Nq * H, kd = g.packed ? qd : Nkv * H;
    const uint8_t *q = in[I_Q]->data;
    const uint8_t *k = g.packed ? q + (size_t)(Nq * H) * es : (const uint8_t *)in[I_K]->data;
    const uint8_t *v = g.packed ? q + (size_t)((Nq + Nkv) * H) * es : (const uint8_t *)in[I_V]->data;
    uint8_t *pk = l.pk, *pv = l.pv;
    /* present = valid past rows ++ new rows, zero elsewhere; when present is the past's own buffer
       (shared max-length cache, T == Pbuf) only the new rows are written */
    int shared = wm_has_in(n, I_PK) && l.pk == in[I_PK]->data && l.pv == in[I_PV]->data;
    if (!shared && wm_has_in(n, I_PK) && (l.pk == in[I_PV]->data || l.pv == in[I_PK]->data))
        return wm_node_err(n, x->err, WM_ERR_INPUT, "present_key/present_value share memory with the other past tensor");
    size_t row = (size_t)H * es;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Nkv; h++) {
            uint8_t *dk = pk + (size_t)((b * Nkv + h) * T) * row, *dv = pv + (size_t)((b * Nkv + h) * T) * row;
            if (!shared) {
                size_t tail = (size_t)(T - kvn[b]) * row, head = (size_t)past[b] * row;
                memset(dk + (size_t)kvn[b] * row, 0, tail);
                memset(dv + (size_t)kvn[b] * row, 0, tail);
                if (head) {
                    memcpy(dk, (const uint8_t *)in[I_PK]->data + (size_t)((b * Nkv + h) * g.Pbuf) * row, head);
                    memcpy(dv, (const uint8_t *)in[I_PV]->data + (size_t)((b * Nkv + h) * g.Pbuf) * row, head);
                }
            }
            for (int64_t s = 0; s < S; s++) {
                size_t src = (size_t)((b * S + s) * kd + h * H) * es;
                int64_t pos = pos_ids ? pos_ids[b * S + s] : past[b] + s;
                put_row(n, in, &g, dk + (size_t)(past[b] + s) * row, k + src, h16, do_rot, pos, l.row);
                memcpy(dv + (size_t)(past[b] + s) * row, v + src, row);
            }
        }
    wm_attn a;
    gqa_core(&g, &a);
    const wm_kernels *K = wm_kernels_get();
    if (l.qr) { /* float32 (rotated) copy of Q as (B, S, Nq, H) */
        for (int64_t b = 0; b < B; b++)
            for (int64_t s = 0; s < S; s++)
                for (int64_t h = 0; h < Nq; h++) {
                    float *r = l.qr + ((b * S + s) * Nq + h) * H;
                    const uint8_t *src = q + (size_t)((b * S + s) * qd + h * H) * es;
                    if (h16) K->f16_to_f32(H, r, (const uint16_t *)src);
                    else memcpy(r, src, (size_t)H * sizeof(float));
                    if (do_rot) rot_at(n, in, &g, r, pos_ids ? pos_ids[b * S + s] : past[b] + s, l.row);
                }
        a.q = l.qr, a.q_sb = S * Nq * H, a.q_sh = H, a.q_ss = Nq * H;
    } else {
        a.q = (const float *)q, a.q_sb = S * qd, a.q_sh = H, a.q_ss = qd;
    }
    a.kv_h16 = h16;
    a.k = pk, a.k_sb = Nkv * T * H, a.k_sh = T * H, a.k_ss = H;
    a.v = pv, a.v_sb = Nkv * T * H, a.v_sh = T * H, a.v_ss = H;
    a.o = h16 ? l.o32 : out[0]->data, a.o_sb = S * Nq * H, a.o_sh = H, a.o_ss = Nq * H;
    float sc = wm_attr_float(n, "scale", 0.0f);
    a.scale = sc != 0.0f ? sc : 1.0f / sqrtf((float)H);
    a.softcap = wm_attr_float(n, "softcap", 0.0f);
    a.mask_value = -INFINITY;
    a.kv_n = kvn;
    a.causal = 1, a.causal_off = past;
    int64_t lw = wm_attr_int(n, "local_window_size", -1);
    a.window = lw > 0 ? lw - 1 : -1; /* keys of the last local_window_size positions (onnxruntime 1.32) */
    if (wm_has_in(n, I_BIAS)) {
        const wm_tensor *t = in[I_BIAS];
        if (h16) K->f16_to_f32((int64_t)wm_tensor_numel(t), l.bias, t->data);
        a.bias = h16 ? l.bias : t->data, a.bias_n = t->dims[3], a.bias_ss = t->dims[3];
        a.bias_sh = t->dims[1] == 1 ? 0 : S * t->dims[3];
        a.bias_sb = t->dims[0] == 1 ? 0 : t->dims[1] * S * t->dims[3];
    }
    if (wm_has_in(n, I_SINK)) {
        if (h16) K->f16_to_f32(Nq, l.sink, in[I_SINK]->data);
        a.sink = h16 ? l.sink : in[I_SINK]->data;
    }
    a.smooth = wm_attr_int(n, "smooth_softmax", 0) != 0;
    wm_attn_run(&a, x, w.p + ((w.off + 63) & ~(size_t)63));
    if (h16) K->f32_to_f16((int64_t)(B * S * Nq * H), out[0]->data, l.o32);
    return WM_OK;
}

static const wm_op ops[] = {
    {"com.microsoft", "GroupQueryAttention", 1, 0, gqa_init, gqa_infer, gqa_run, gqa_workspace, WM_OP_KV_INPLACE,
     1u << I_TOTAL},
};

const wm_op_table wm_ops_gqa = {ops, sizeof ops / sizeof ops[0]};
