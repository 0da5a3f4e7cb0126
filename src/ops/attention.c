/*
 * attention.c - ONNX Attention (opset 23, 24) and TensorScatter (24).
 *
 * Attention: Q, K, V 4-D (B, heads, seq, head) or 3-D (B, seq, heads*head
 * with q_num_heads / kv_num_heads); grouped-query attention when
 * q_num_heads is a multiple of kv_num_heads; attn_mask boolean (true =
 * attend) or float (added), broadcast to (B, Hq, S, T), its last dim may be
 * shorter than T (the rest masked); is_causal (upper-left aligned after the
 * past); scale (default 1/sqrt(head)); softcap before the mask;
 * past_key/past_value concatenated with K/V into present_key/present_value;
 * qk_matmul_output at stage qk_matmul_output_mode (0 the QK product as the
 * reference computes it (softcap applied), 1 after softcap, 2 after the
 * mask, 3 after softmax); nonpad_kv_seqlen (24) masks keys past each
 * batch's length. Float16/bfloat16/float64 compute in float32 through
 * converted copies in the workspace; the core is attn_core.
 */
#include <math.h>
#include <string.h>

#include "ops/attn_core.h"

/* ---------------------------------------------------------------- Attention */

typedef struct ashape {
    int rank3;
    int64_t B, Hq, Hkv, S, L, P, T, dk, dv;
} ashape;

static wm_status att_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, wm_types_float, err);
    if (!st) st = wm_check_same_type(n, 0, 1, err);
    if (!st) st = wm_check_type(n, 2, wm_types_float, err);
    if (st) return st;
    if (wm_has_in(n, 3) && n->in_dtype[3] != WM_DT_BOOL && n->in_dtype[3] != n->in_dtype[0])
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "attn_mask must be bool or the type of Q, not %s",
                           wm_dtype_name(n->in_dtype[3]));
    if (wm_has_in(n, 4) != wm_has_in(n, 5)) return wm_node_err(n, err, WM_ERR_INPUT, "past_key and past_value go together");
    if (wm_has_in(n, 4) && (n->in_dtype[4] != n->in_dtype[0] || n->in_dtype[5] != n->in_dtype[2]))
        return wm_node_err(n, err, WM_ERR_INPUT, "past_key/past_value types differ from K/V");
    if (wm_has_in(n, 6) && n->in_dtype[6] != WM_DT_INT64)
        return wm_node_err(n, err, WM_ERR_INPUT, "nonpad_kv_seqlen must be int64");
    int64_t mode = wm_attr_int(n, "qk_matmul_output_mode", 0);
    if (mode < 0 || mode > 3) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "qk_matmul_output_mode %lld", (long long)mode);
    n->out_dtype[0] = n->in_dtype[0];
    if (n->n_out > 1) n->out_dtype[1] = n->in_dtype[0];
    if (n->n_out > 2) n->out_dtype[2] = n->in_dtype[2];
    if (n->n_out > 3) n->out_dtype[3] = n->in_dtype[0];
    return WM_OK;
}

static wm_status att_shape(const wm_node *n, wm_tensor *const *in, ashape *a, wm_error *err) {
    memset(a, 0, sizeof *a);
    const wm_tensor *q = in[0], *k = in[1], *v = in[2];
    if (q->rank != k->rank || q->rank != v->rank || (q->rank != 3 && q->rank != 4))
        return wm_node_err(n, err, WM_ERR_INPUT, "Q, K and V must all be 3-D or all 4-D");
    a->rank3 = q->rank == 3;
    a->B = q->dims[0];
    if (k->dims[0] != a->B || v->dims[0] != a->B) return wm_node_err(n, err, WM_ERR_INPUT, "batch sizes differ");
    if (a->rank3) {
        a->Hq = wm_attr_int(n, "q_num_heads", 0), a->Hkv = wm_attr_int(n, "kv_num_heads", 0);
        if (a->Hq <= 0 || a->Hkv <= 0) return wm_node_err(n, err, WM_ERR_INPUT, "3-D inputs need q_num_heads and kv_num_heads");
        if (q->dims[2] % a->Hq || k->dims[2] % a->Hkv || v->dims[2] % a->Hkv)
            return wm_node_err(n, err, WM_ERR_INPUT, "hidden sizes are not multiples of the head counts");
        a->S = q->dims[1], a->L = k->dims[1], a->dk = q->dims[2] / a->Hq, a->dv = v->dims[2] / a->Hkv;
        if (k->dims[2] / a->Hkv != a->dk) return wm_node_err(n, err, WM_ERR_INPUT, "Q and K head sizes differ");
        if (v->dims[1] != a->L) return wm_node_err(n, err, WM_ERR_INPUT, "K and V sequence lengths differ");
    } else {
        a->Hq = q->dims[1], a->Hkv = k->dims[1], a->S = q->dims[2], a->L = k->dims[2], a->dk = q->dims[3], a->dv = v->dims[3];
        if (k->dims[3] != a->dk) return wm_node_err(n, err, WM_ERR_INPUT, "Q and K head sizes differ");
        if (v->dims[1] != a->Hkv || v->dims[2] != a->L) return wm_node_err(n, err, WM_ERR_INPUT, "K and V shapes differ");
    }
    if (a->Hkv <= 0 || a->Hq % a->Hkv) return wm_node_err(n, err, WM_ERR_INPUT, "q heads (%lld) not a multiple of kv heads (%lld)", (long long)a->Hq, (long long)a->Hkv);
    if (wm_has_in(n, 4)) {
        const wm_tensor *pk = in[4], *pv = in[5];
        if (pk->rank != 4 || pv->rank != 4 || pk->dims[0] != a->B || pk->dims[1] != a->Hkv || pk->dims[3] != a->dk ||
            pv->dims[0] != a->B || pv->dims[1] != a->Hkv || pv->dims[2] != pk->dims[2] || pv->dims[3] != a->dv)
            return wm_node_err(n, err, WM_ERR_INPUT, "past_key/past_value must be (B, kv_heads, past, head)");
        a->P = pk->dims[2];
    }
    a->T = a->P + a->L;
    if (wm_has_in(n, 3)) {
        const wm_tensor *m = in[3];
        if (m->rank < 1 || m->rank > 4) return wm_node_err(n, err, WM_ERR_INPUT, "attn_mask has rank %d", m->rank);
        int64_t want[4] = {a->B, a->Hq, a->S, 0};
        for (int d = 0; d < m->rank - 1; d++) {
            int64_t md = m->dims[m->rank - 2 - d], w = want[2 - d];
            if (md != 1 && md != w) return wm_node_err(n, err, WM_ERR_INPUT, "attn_mask does not broadcast to (B, q_heads, S, T)");
        }
        if (m->dims[m->rank - 1] > a->T) return wm_node_err(n, err, WM_ERR_INPUT, "attn_mask is longer than the keys");
    }
    if (wm_has_in(n, 6) && (in[6]->rank != 1 || in[6]->dims[0] != a->B))
        return wm_node_err(n, err, WM_ERR_INPUT, "nonpad_kv_seqlen must be (batch)");
    return WM_OK;
}

static wm_status att_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    ashape a;
    wm_status st = att_shape(n, in, &a, err);
    if (st) return st;
    if (a.rank3) {
        int64_t d[3] = {a.B, a.S, a.Hq * a.dv};
        wm_set_shape(out[0], 3, d);
    } else {
        int64_t d[4] = {a.B, a.Hq, a.S, a.dv};
        wm_set_shape(out[0], 4, d);
    }
    int64_t pk[4] = {a.B, a.Hkv, a.T, a.dk}, pv[4] = {a.B, a.Hkv, a.T, a.dv}, qk[4] = {a.B, a.Hq, a.S, a.T};
    if (n->n_out > 1 && out[1]) wm_set_shape(out[1], 4, pk);
    if (n->n_out > 2 && out[2]) wm_set_shape(out[2], 4, pv);
    if (n->n_out > 3 && out[3]) wm_set_shape(out[3], 4, qk);
    return WM_OK;
}

/* A float32 view of t: its data, or a converted copy from the workspace (NULL while sizing). */
static const float *fview(const wm_tensor *t, wm_wsbump *w) {
    if (t->dtype == WM_DT_FLOAT) return t->data;
    float *d = wm_ws_take(w, wm_tensor_numel(t) * sizeof(float));
    if (d) wm_convert(t->dtype, t->data, WM_DT_FLOAT, d, wm_tensor_numel(t));
    return d;
}

/* A float32 destination for out: its data, or workspace converted back by fback. */
static float *fdest(const wm_tensor *t, wm_wsbump *w) {
    if (t->dtype == WM_DT_FLOAT) return t->data;
    return wm_ws_take(w, wm_tensor_numel(t) * sizeof(float));
}

static void fback(const wm_tensor *t, const float *src) {
    if (t->dtype != WM_DT_FLOAT) wm_convert(WM_DT_FLOAT, src, t->dtype, t->data, wm_tensor_numel(t));
}

/* dst (B, H, P + L, d) = past (B, H, P, d) ++ new rows; new element (b, h, l) at src + b*sb + h*sh + l*ss */
static void kv_concat(float *dst, const float *past, const float *src, int64_t sb, int64_t sh, int64_t ss, int64_t B,
                      int64_t H, int64_t P, int64_t L, int64_t d) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            float *o = dst + ((b * H + h) * (P + L)) * d;
            if (P) memcpy(o, past + ((b * H + h) * P) * d, (size_t)(P * d) * sizeof *o);
            for (int64_t l = 0; l < L; l++) memcpy(o + (P + l) * d, src + b * sb + h * sh + l * ss, (size_t)d * sizeof *o);
        }
}

/* Sets up the core (and the float views) for these inputs; w->p NULL only sizes. */
static void att_setup(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, const ashape *s, wm_attn *a,
                      wm_wsbump *w, float **y, float **pk, float **pv, float **qk) {
    memset(a, 0, sizeof *a);
    a->B = s->B, a->Hq = s->Hq, a->Hkv = s->Hkv, a->S = s->S, a->T = s->T, a->dk = s->dk, a->dv = s->dv;
    a->q = fview(in[0], w);
    const float *k = fview(in[1], w), *v = fview(in[2], w);
    /* strides of Q, K, V and Y */
    if (s->rank3) {
        a->q_sb = s->S * s->Hq * s->dk, a->q_sh = s->dk, a->q_ss = s->Hq * s->dk;
        a->o_sb = s->S * s->Hq * s->dv, a->o_sh = s->dv, a->o_ss = s->Hq * s->dv;
    } else {
        a->q_sb = s->Hq * s->S * s->dk, a->q_sh = s->S * s->dk, a->q_ss = s->dk;
        a->o_sb = s->Hq * s->S * s->dv, a->o_sh = s->S * s->dv, a->o_ss = s->dv;
    }
    int64_t ksb = s->rank3 ? s->L * s->Hkv * s->dk : s->Hkv * s->L * s->dk, ksh = s->rank3 ? s->dk : s->L * s->dk,
            kss = s->rank3 ? s->Hkv * s->dk : s->dk;
    int64_t vsb = s->rank3 ? s->L * s->Hkv * s->dv : s->Hkv * s->L * s->dv, vsh = s->rank3 ? s->dv : s->L * s->dv,
            vss = s->rank3 ? s->Hkv * s->dv : s->dv;
    int has_past = wm_has_in(n, 4);
    wm_tensor *opk = n->n_out > 1 ? out[1] : NULL, *opv = n->n_out > 2 ? out[2] : NULL;
    *pk = *pv = NULL;
    if (has_past || opk) *pk = opk ? fdest(opk, w) : wm_ws_take(w, (size_t)(s->B * s->Hkv * s->T * s->dk) * sizeof(float));
    if (has_past || opv) *pv = opv ? fdest(opv, w) : wm_ws_take(w, (size_t)(s->B * s->Hkv * s->T * s->dv) * sizeof(float));
    const float *pastk = has_past ? fview(in[4], w) : NULL, *pastv = has_past ? fview(in[5], w) : NULL;
    if (w->p && *pk) kv_concat(*pk, pastk, k, ksb, ksh, kss, s->B, s->Hkv, s->P, s->L, s->dk);
    if (w->p && *pv) kv_concat(*pv, pastv, v, vsb, vsh, vss, s->B, s->Hkv, s->P, s->L, s->dv);
    if (*pk) {
        a->k = *pk, a->k_sb = s->Hkv * s->T * s->dk, a->k_sh = s->T * s->dk, a->k_ss = s->dk;
    } else {
        a->k = k, a->k_sb = ksb, a->k_sh = ksh, a->k_ss = kss;
    }
    if (*pv) {
        a->v = *pv, a->v_sb = s->Hkv * s->T * s->dv, a->v_sh = s->T * s->dv, a->v_ss = s->dv;
    } else {
        a->v = v, a->v_sb = vsb, a->v_sh = vsh, a->v_ss = vss;
    }
    *y = fdest(out[0], w);
    a->o = *y;
    float sc = wm_attr_float(n, "scale", 0.0f);
    a->scale = wm_attr(n, "scale") ? sc : 1.0f / sqrtf((float)s->dk);
    a->softcap = wm_attr_float(n, "softcap", 0.0f);
    a->mask_value = -INFINITY;
    a->causal = wm_attr_int(n, "is_causal", 0) != 0;
    a->causal_off0 = s->P;
    a->window = -1;
    if (wm_has_in(n, 3)) {
        const wm_tensor *m = in[3];
        int r = m->rank;
        int64_t st[3] = {0, 0, 0}, stride = m->dims[r - 1];
        for (int d = 0; d < 3; d++) { /* s, h, b: dims r-2, r-3, r-4 */
            int md = r - 2 - d;
            if (md < 0) break;
            st[d] = m->dims[md] == 1 ? 0 : stride;
            stride *= m->dims[md];
        }
        if (m->dtype == WM_DT_BOOL) {
            a->mask = m->data, a->m_sb = st[2], a->m_sh = st[1], a->m_ss = st[0], a->m_n = m->dims[r - 1];
        } else {
            a->bias = fview(m, w), a->bias_sb = st[2], a->bias_sh = st[1], a->bias_ss = st[0], a->bias_n = m->dims[r - 1];
        }
    }
    if (wm_has_in(n, 6)) a->kv_hi = in[6]->data;
    *qk = NULL;
    if (n->n_out > 3 && out[3]) {
        static const int modes[4] = {WM_QK_SOFTCAP, WM_QK_SOFTCAP, WM_QK_MASKED, WM_QK_PROBS};
        *qk = fdest(out[3], w);
        a->qk = *qk;
        a->qk_mode = modes[wm_attr_int(n, "qk_matmul_output_mode", 0)];
    }
}

static size_t att_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    ashape s;
    wm_error e = {0};
    if (att_shape(n, in, &s, &e)) return 0;
    wm_attn a;
    wm_wsbump w = {NULL, 0};
    float *y, *pk, *pv, *qk;
    att_setup(n, in, out, &s, &a, &w, &y, &pk, &pv, &qk);
    return w.off + 64 + wm_attn_workspace(&a, nth);
}

static wm_status att_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    ashape s;
    wm_status st = att_shape(n, in, &s, x->err);
    if (st) return st;
    wm_attn a;
    wm_wsbump w = {x->ws, 0};
    float *y, *pk, *pv, *qk;
    att_setup(n, in, out, &s, &a, &w, &y, &pk, &pv, &qk);
    if (a.kv_hi)
        for (int64_t b = 0; b < s.B; b++)
            if (a.kv_hi[b] < 0 || a.kv_hi[b] > s.T)
                return wm_node_err(n, x->err, WM_ERR_INPUT, "nonpad_kv_seqlen[%lld] = %lld is outside [0, %lld]",
                                   (long long)b, (long long)a.kv_hi[b], (long long)s.T);
    wm_attn_run(&a, x, w.p + ((w.off + 63) & ~(size_t)63));
    fback(out[0], y);
    if (n->n_out > 1 && out[1]) fback(out[1], pk);
    if (n->n_out > 2 && out[2]) fback(out[2], pv);
    if (qk) fback(out[3], qk);
    return WM_OK;
}

/* ---------------------------------------------------------------- TensorScatter */

static wm_status ts_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, wm_types_all, err);
    if (!st) st = wm_check_same_type(n, 0, 1, err);
    if (!st && wm_has_in(n, 2) && n->in_dtype[2] != WM_DT_INT64)
        return wm_node_err(n, err, WM_ERR_INPUT, "write_indices must be int64");
    char buf[16];
    const char *mode = wm_attr_string(n, "mode", "linear", buf, sizeof buf);
    if (strcmp(mode, "linear") && strcmp(mode, "circular"))
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "mode '%s' (linear or circular)", mode);
    n->out_dtype[0] = n->in_dtype[0];
    return st;
}

static wm_status ts_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    const wm_tensor *c = in[0], *u = in[1];
    int r = c->rank, axis = wm_axis(wm_attr_int(n, "axis", -2), r);
    if (r < 2 || axis <= 0) return wm_node_err(n, err, WM_ERR_INPUT, "axis must name a dim after the batch dim");
    if (u->rank != r) return wm_node_err(n, err, WM_ERR_INPUT, "update rank %d differs from the cache rank %d", u->rank, r);
    for (int d = 0; d < r; d++)
        if (d == axis ? u->dims[d] > c->dims[d] : u->dims[d] != c->dims[d])
            return wm_node_err(n, err, WM_ERR_INPUT, "update does not fit the cache at dim %d", d);
    if (wm_has_in(n, 2) && (in[2]->rank != 1 || in[2]->dims[0] != c->dims[0]))
        return wm_node_err(n, err, WM_ERR_INPUT, "write_indices must be (batch)");
    wm_set_shape(out[0], r, c->dims);
    return WM_OK;
}

static wm_status ts_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    const wm_tensor *c = in[0], *u = in[1];
    int r = c->rank, axis = wm_axis(wm_attr_int(n, "axis", -2), r);
    char mode[16];
    int circ = !strcmp(wm_attr_string(n, "mode", "linear", mode, sizeof mode), "circular");
    size_t es = wm_dtype_size(c->dtype);
    if (out[0]->data != c->data) memcpy(out[0]->data, c->data, wm_tensor_nbytes(c));
    int64_t outer = 1, inner = 1, M = c->dims[axis], L = u->dims[axis];
    for (int d = 0; d < axis; d++) outer *= c->dims[d];
    for (int d = axis + 1; d < r; d++) inner *= c->dims[d];
    int64_t per_batch = outer / (c->dims[0] ? c->dims[0] : 1);
    const int64_t *wi = wm_has_in(n, 2) ? in[2]->data : NULL;
    for (int64_t o = 0; o < outer; o++) {
        int64_t b = per_batch ? o / per_batch : 0, start = wi ? wi[b] : 0;
        if (!circ && (start < 0 || start + L > M))
            return wm_node_err(n, x->err, WM_ERR_INPUT, "write_indices[%lld] = %lld: %lld rows do not fit in %lld",
                               (long long)b, (long long)start, (long long)L, (long long)M);
        for (int64_t l = 0; l < L; l++) {
            int64_t pos = start + l;
            if (circ) pos = ((pos % M) + M) % M;
            memcpy((uint8_t *)out[0]->data + ((o * M + pos) * inner) * es, (const uint8_t *)u->data + ((o * L + l) * inner) * es,
                   (size_t)inner * es);
        }
    }
    return WM_OK;
}

static const wm_op ops[] = {
    {"", "Attention", 23, 0, att_init, att_infer, att_run, att_workspace, 0, 0},
    {"", "TensorScatter", 24, 0, ts_init, ts_infer, ts_run, NULL, WM_OP_INPLACE, 0},
};

const wm_op_table wm_ops_attention = {ops, sizeof ops / sizeof ops[0]};
