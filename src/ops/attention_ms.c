/*
 * attention_ms.c - onnxruntime contrib attention: com.microsoft Attention
 * (packed QKV projection weights; float32, and float16 computed in float32)
 * and MultiHeadAttention (float32, and float16 computed in float32), on the attention core (attn_core.h).
 *
 * Attention: input (B, S, in) x weights (in, Dq + Dk + Dv) + bias, heads
 *   num_heads (qkv_hidden_sizes when V differs); past (2, B, N, P, H) ->
 *   present (2, B, N, P + S, H); unidirectional = causal after the past;
 *   mask_index int32: (B) key end, (2B) ends then starts, (B, T) or (B, S, T)
 *   raw 0/1; attention_bias (B|1, N|1, S, T). do_rotary and
 *   past_present_share_buffer are refused.
 * MultiHeadAttention: query (B, S, D) with key/value (B, L, D) (BSNH) or
 *   (B, N, L, H) (BNSH, used as given), or packed QKV query (B, S, N, 3, H),
 *   or packed KV key (B, L, N, 2, H); bias (Dq + Dk + Dv) added to Q and to
 *   3-D K/V; key_padding_mask like mask_index; attention_bias; past_key /
 *   past_value (B, N, P, H) -> present_key / present_value (B, N, P + L, H);
 *   unidirectional.
 * Masked scores get mask_filter_value (default -10000) added, like
 * onnxruntime; causal keys are excluded.
 */
#include <math.h>
#include <string.h>

#include "ops/attn_core.h"
#include "ops/gemm.h"


/* dst (B, N, T, H) rows [t_off, t_off + L) from src element (b, h, l) at b*sb + h*sh + l*ss, plus bias[h*H + i] */
static void copy_heads(float *dst, int64_t T, int64_t t_off, const float *src, int64_t sb, int64_t sh, int64_t ss,
                       int64_t B, int64_t N, int64_t L, int64_t H, const float *bias) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < N; h++)
            for (int64_t l = 0; l < L; l++) {
                float *d = dst + ((b * N + h) * T + t_off + l) * H;
                const float *s = src + b * sb + h * sh + l * ss;
                if (bias)
                    for (int64_t i = 0; i < H; i++) d[i] = s[i] + bias[h * H + i];
                else
                    memcpy(d, s, (size_t)H * sizeof *d);
            }
}

/* mask_index / key_padding_mask (int32) into the core; kv holds 2B int64 (ends, starts) */
static wm_status mask_check(const wm_node *n, const wm_tensor *m, int64_t B, int64_t S, int64_t T, wm_error *err) {
    if (!m) return WM_OK;
    if (m->rank == 1 && (m->dims[0] == B || m->dims[0] == 2 * B)) return WM_OK;
    if (m->rank == 2 && m->dims[0] == B && m->dims[1] == T) return WM_OK;
    if (m->rank == 3 && m->dims[0] == B && m->dims[1] == S && m->dims[2] == T) return WM_OK;
    return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "mask of rank %d is not one of (B), (2B), (B, T), (B, S, T) for B=%lld S=%lld T=%lld",
                       m->rank, (long long)B, (long long)S, (long long)T);
}

static void mask_setup(wm_attn *a, const wm_tensor *m, int64_t *kv) {
    if (!m) return;
    const int32_t *d = m->data;
    if (m->rank == 1) {
        for (int64_t b = 0; b < a->B; b++) {
            kv[b] = d[b];
            kv[a->B + b] = m->dims[0] == 2 * a->B ? (d[a->B + b] < a->T ? d[a->B + b] : a->T) : 0;
        }
        a->kv_hi = kv;
        if (m->dims[0] == 2 * a->B) a->kv_lo = kv + a->B;
        return;
    }
    a->mask = d, a->mask_i32 = 1, a->m_n = a->T;
    a->m_sb = m->rank == 2 ? a->T : a->S * a->T, a->m_sh = 0, a->m_ss = m->rank == 2 ? 0 : a->T;
}

/* attention_bias (B|1, N|1, S, T) */
static wm_status bias_check(const wm_node *n, const wm_tensor *t, int64_t B, int64_t N, int64_t S, int64_t T, wm_error *err) {
    if (!t) return WM_OK;
    if (t->rank != 4 || (t->dims[0] != 1 && t->dims[0] != B) || (t->dims[1] != 1 && t->dims[1] != N) || t->dims[2] != S ||
        t->dims[3] != T)
        return wm_node_err(n, err, WM_ERR_INPUT, "attention_bias must be (B or 1, heads or 1, S, T)");
    return WM_OK;
}

static void bias_setup(wm_attn *a, const wm_tensor *t) {
    if (!t) return;
    a->bias = t->data, a->bias_n = a->T, a->bias_ss = a->T;
    a->bias_sh = t->dims[1] == 1 ? 0 : a->S * a->T;
    a->bias_sb = t->dims[0] == 1 ? 0 : t->dims[1] * a->S * a->T;
}

static void common_attrs(const wm_node *n, wm_attn *a, int64_t H) {
    float sc = wm_attr_float(n, "scale", 0.0f);
    a->scale = sc != 0.0f ? sc : 1.0f / sqrtf((float)H);
    a->mask_value = wm_attr_float(n, "mask_filter_value", -10000.0f);
    a->causal = wm_attr_int(n, "unidirectional", 0) != 0;
    a->window = -1;
}

/* ================================================================ com.microsoft Attention */

typedef struct mshape {
    int64_t B, S, L, P, T, N, H, Hv, Dq, Dk, Dv, in;
    int fmt; /* MHA: 0 BSNH K/V, 1 BNSH K/V, 2 packed QKV, 3 packed KV */
} mshape;

static const int32_t at_types[] = {WM_DT_FLOAT, WM_DT_FLOAT16, 0};

static int at_half(int32_t dt) { return dt == WM_DT_FLOAT16; }

/*
 * Attention's projection weights are packed for the GEMM once, here (float16
 * ones widened first: float16 Attention computes in float32, as onnxruntime's
 * CPU provider does after inserting casts), and a constant bias is kept in
 * float32 for the GEMM epilogue; both in node memory the session frees with
 * the node.
 */
typedef struct at_state {
    float *packed; /* the (in, Dq + Dk + Dv) weights packed */
    float *bias;   /* a constant bias in float32, or NULL */
} at_state;

static wm_status at_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, at_types, err);
    for (int i = 1; i < 6 && !st; i++)
        if (i != 3 && wm_has_in(n, i)) st = wm_check_same_type(n, 0, i, err);
    if (st) return st;
    if (wm_has_in(n, 3) && n->in_dtype[3] != WM_DT_INT32) return wm_node_err(n, err, WM_ERR_INPUT, "mask_index must be int32");
    if (wm_attr_int(n, "num_heads", 0) <= 0) return wm_node_err(n, err, WM_ERR_INPUT, "num_heads must be positive");
    if (wm_attr_int(n, "do_rotary", 0)) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "do_rotary=1");
    if (wm_attr_int(n, "past_present_share_buffer", 0) || wm_has_in(n, 6))
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "past_present_share_buffer / past_sequence_length");
    const wm_tensor *w = n->in_const[1], *bias = wm_has_in(n, 2) ? n->in_const[2] : NULL;
    if (!w) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "weights must be a constant");
    int32_t dt = n->in_dtype[0];
    n->out_dtype[0] = dt;
    if (n->n_out > 1) n->out_dtype[1] = dt;
    if (w->rank != 2) return wm_node_err(n, err, WM_ERR_INPUT, "weights must be (in, Dq + Dk + Dv)");
    int64_t K = w->dims[0], N = w->dims[1];
    at_state *as = wm_node_alloc(n, sizeof *as);
    size_t sz = wm_gemm_pack_size(K, N);
    float *packed = as ? wm_node_alloc(n, sz) : NULL;
    if (!packed) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    if (at_half(dt)) wm_sgemm_pack_b_f16(0, K, N, w->data, N, packed);
    else wm_gemm_pack(0, K, N, w->data, N, packed);
    as->packed = packed;
    n->packed_bytes += sz;
    if (bias && bias->rank == 1 && bias->dims[0] == N) {
        if (!(as->bias = wm_node_alloc(n, (size_t)N * sizeof(float)))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        wm_convert(dt, bias->data, WM_DT_FLOAT, as->bias, (uint64_t)N);
    }
    n->state = as;
    return WM_OK;
}

static wm_status at_shape(const wm_node *n, wm_tensor *const *in, mshape *s, wm_error *err) {
    memset(s, 0, sizeof *s);
    const wm_tensor *x = in[0], *w = in[1];
    if (x->rank != 3 || w->rank != 2 || w->dims[0] != x->dims[2])
        return wm_node_err(n, err, WM_ERR_INPUT, "input must be (B, S, in) and weights (in, Dq + Dk + Dv)");
    s->B = x->dims[0], s->S = x->dims[1], s->in = x->dims[2], s->N = wm_attr_int(n, "num_heads", 1);
    size_t cnt;
    const int64_t *hs = wm_attr_ints(n, "qkv_hidden_sizes", &cnt);
    if (cnt) {
        if (cnt != 3) return wm_node_err(n, err, WM_ERR_INPUT, "qkv_hidden_sizes must have 3 values");
        s->Dq = hs[0], s->Dk = hs[1], s->Dv = hs[2];
    } else {
        s->Dq = s->Dk = s->Dv = w->dims[1] / 3;
    }
    if (s->Dq <= 0 || s->Dq != s->Dk || s->Dq + s->Dk + s->Dv != w->dims[1] || s->Dq % s->N || s->Dv % s->N)
        return wm_node_err(n, err, WM_ERR_INPUT, "hidden sizes %lld/%lld/%lld do not fit weights of %lld columns and %lld heads",
                           (long long)s->Dq, (long long)s->Dk, (long long)s->Dv, (long long)w->dims[1], (long long)s->N);
    s->H = s->Dq / s->N, s->Hv = s->Dv / s->N, s->L = s->S;
    if (wm_has_in(n, 2) && wm_tensor_numel(in[2]) != (uint64_t)w->dims[1]) return wm_node_err(n, err, WM_ERR_INPUT, "bias size");
    if (wm_has_in(n, 4)) {
        const wm_tensor *p = in[4];
        if (p->rank != 5 || p->dims[0] != 2 || p->dims[1] != s->B || p->dims[2] != s->N || p->dims[4] != s->H || s->H != s->Hv)
            return wm_node_err(n, err, WM_ERR_INPUT, "past must be (2, B, heads, P, head) with equal Q/K/V head sizes");
        s->P = p->dims[3];
    }
    s->T = s->P + s->L;
    wm_status st = mask_check(n, wm_has_in(n, 3) ? in[3] : NULL, s->B, s->S, s->T, err);
    if (!st) st = bias_check(n, wm_has_in(n, 5) ? in[5] : NULL, s->B, s->N, s->S, s->T, err);
    return st;
}

static wm_status at_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    mshape s;
    wm_status st = at_shape(n, in, &s, err);
    if (st) return st;
    int64_t y[3] = {s.B, s.S, s.Dv}, p[5] = {2, s.B, s.N, s.T, s.H};
    wm_set_shape(out[0], 3, y);
    if (n->n_out > 1 && out[1]) wm_set_shape(out[1], 5, p);
    return WM_OK;
}

/* float32 views of the operands; for float16 the workspace holds widened copies */
typedef struct at_bufs {
    float *qkv, *pres, *x, *past, *ab, *y;
    int64_t *kv;
} at_bufs;

/* workspace: qkv (B*S, Dq+Dk+Dv), present when not a float32 output, mask ints; float16 adds
 * float32 input, past, attention_bias and output */
static void at_layout(const wm_node *n, const mshape *s, wm_tensor *const *in, wm_tensor *const *out, wm_wsbump *w,
                      at_bufs *b) {
    int half = at_half(in[0]->dtype), pres_out = n->n_out > 1 && out[1];
    memset(b, 0, sizeof *b);
    b->qkv = wm_ws_take(w, (size_t)(s->B * s->S * (s->Dq + s->Dk + s->Dv)) * sizeof(float));
    if (s->P || pres_out)
        b->pres = pres_out && !half ? out[1]->data : wm_ws_take(w, (size_t)(2 * s->B * s->N * s->T * s->H) * sizeof(float));
    b->kv = wm_ws_take(w, (size_t)(2 * s->B + 1) * sizeof(int64_t));
    if (!half) {
        b->x = in[0]->data, b->y = out[0]->data;
        b->past = s->P ? in[4]->data : NULL;
        b->ab = wm_has_in(n, 5) ? in[5]->data : NULL;
        return;
    }
    b->x = wm_ws_take(w, (size_t)(s->B * s->S * s->in) * sizeof(float));
    b->y = wm_ws_take(w, (size_t)(s->B * s->S * s->Dv) * sizeof(float));
    if (s->P) b->past = wm_ws_take(w, (size_t)wm_tensor_numel(in[4]) * sizeof(float));
    if (wm_has_in(n, 5)) b->ab = wm_ws_take(w, (size_t)wm_tensor_numel(in[5]) * sizeof(float));
}

static void at_core(const mshape *s, wm_attn *a) {
    memset(a, 0, sizeof *a);
    a->B = s->B, a->Hq = s->N, a->Hkv = s->N, a->S = s->S, a->T = s->T, a->dk = s->H, a->dv = s->Hv;
}

static size_t at_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    mshape s;
    wm_error e = {0};
    if (at_shape(n, in, &s, &e)) return 0;
    wm_wsbump w = {NULL, 0};
    at_bufs b;
    at_layout(n, &s, in, out, &w, &b);
    wm_attn a;
    at_core(&s, &a);
    return w.off + 64 + wm_attn_workspace(&a, nth);
}

static wm_status at_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    mshape s;
    wm_status st = at_shape(n, in, &s, x->err);
    if (st) return st;
    wm_wsbump w = {x->ws, 0};
    at_bufs b;
    at_layout(n, &s, in, out, &w, &b);
    int32_t dt = in[0]->dtype;
    int half = at_half(dt);
    if (half) {
        wm_convert(dt, in[0]->data, WM_DT_FLOAT, b.x, wm_tensor_numel(in[0]));
        if (b.past) wm_convert(dt, in[4]->data, WM_DT_FLOAT, b.past, wm_tensor_numel(in[4]));
        if (b.ab) wm_convert(dt, in[5]->data, WM_DT_FLOAT, b.ab, wm_tensor_numel(in[5]));
    }
    int64_t D = s.Dq + s.Dk + s.Dv, BS = s.B * s.S;
    float *qkv = b.qkv, *pres = b.pres;
    const at_state *as = n->state;
    int bias_rows = wm_has_in(n, 2) && !as->bias;
    if (bias_rows) { /* a bias that is not constant: its rows first, then accumulate the projection */
        for (int64_t r = 0; r < BS; r++) {
            if (half) wm_convert(dt, in[2]->data, WM_DT_FLOAT, qkv + r * D, (uint64_t)D);
            else memcpy(qkv + r * D, in[2]->data, (size_t)D * sizeof(float));
        }
    }
    wm_gemm_args g = {BS, D, s.in, b.x, s.in, 0, NULL, D, 0, qkv, D, 1.0f, bias_rows ? 1.0f : 0.0f,
                      as->packed, as->bias, WM_ACT_NONE};
    wm_sgemm(x, &g);
    wm_attn a;
    at_core(&s, &a);
    a.q = qkv, a.q_sb = s.S * D, a.q_sh = s.H, a.q_ss = D;
    const float *k = qkv + s.Dq, *v = qkv + s.Dq + s.Dk;
    if (pres) {
        float *pk = pres, *pv = pres + s.B * s.N * s.T * s.H;
        if (s.P) {
            const float *past = b.past, *pastv = past + s.B * s.N * s.P * s.H;
            copy_heads(pk, s.T, 0, past, s.N * s.P * s.H, s.P * s.H, s.H, s.B, s.N, s.P, s.H, NULL);
            copy_heads(pv, s.T, 0, pastv, s.N * s.P * s.H, s.P * s.H, s.H, s.B, s.N, s.P, s.H, NULL);
        }
        copy_heads(pk, s.T, s.P, k, s.S * D, s.H, D, s.B, s.N, s.L, s.H, NULL);
        copy_heads(pv, s.T, s.P, v, s.S * D, s.Hv, D, s.B, s.N, s.L, s.Hv, NULL);
        a.k = pk, a.k_sb = s.N * s.T * s.H, a.k_sh = s.T * s.H, a.k_ss = s.H;
        a.v = pv, a.v_sb = s.N * s.T * s.Hv, a.v_sh = s.T * s.Hv, a.v_ss = s.Hv;
    } else {
        a.k = k, a.k_sb = s.S * D, a.k_sh = s.H, a.k_ss = D;
        a.v = v, a.v_sb = s.S * D, a.v_sh = s.Hv, a.v_ss = D;
    }
    a.o = b.y, a.o_sb = s.S * s.Dv, a.o_sh = s.Hv, a.o_ss = s.Dv;
    common_attrs(n, &a, s.H);
    a.causal_off0 = s.P;
    mask_setup(&a, wm_has_in(n, 3) ? in[3] : NULL, b.kv);
    if (wm_has_in(n, 5)) { /* attention_bias as float32 (converted above for float16) */
        wm_tensor ab = *in[5];
        ab.data = b.ab;
        bias_setup(&a, &ab);
    }
    wm_attn_run(&a, x, w.p + ((w.off + 63) & ~(size_t)63));
    if (half) {
        wm_convert(WM_DT_FLOAT, b.y, dt, out[0]->data, (uint64_t)(BS * s.Dv));
        if (n->n_out > 1 && out[1]) wm_convert(WM_DT_FLOAT, pres, dt, out[1]->data, (uint64_t)(2 * s.B * s.N * s.T * s.H));
    }
    return WM_OK;
}

/* ================================================================ MultiHeadAttention */

static wm_status mha_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, at_types, err);
    int32_t dt = n->in_dtype[0]; /* every float input and output has the query's type (float16: computed in float32) */
    for (int i = 1; i < n->n_in && i < 8 && !st; i++)
        if (i != 4 && wm_has_in(n, i)) st = wm_check_same_type(n, 0, i, err);
    if (st) return st;
    if (wm_has_in(n, 4) && n->in_dtype[4] != WM_DT_INT32) return wm_node_err(n, err, WM_ERR_INPUT, "key_padding_mask must be int32");
    if (wm_attr_int(n, "num_heads", 0) <= 0) return wm_node_err(n, err, WM_ERR_INPUT, "num_heads must be positive");
    for (int i = 8; i < n->n_in; i++)
        if (wm_has_in(n, i)) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "input %d (past_sequence_length / cache_indirection)", i);
    if (wm_has_in(n, 6) != wm_has_in(n, 7)) return wm_node_err(n, err, WM_ERR_INPUT, "past_key and past_value go together");
    for (int k = 0; k < n->n_out && k < 3; k++) n->out_dtype[k] = dt;
    if (n->n_out > 3 && wm_has_out(n, 3)) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "output_qk");
    for (int k = 3; k < n->n_out; k++) n->out_dtype[k] = dt;
    return WM_OK;
}

static wm_status mha_shape(const wm_node *n, wm_tensor *const *in, mshape *s, wm_error *err) {
    memset(s, 0, sizeof *s);
    const wm_tensor *q = in[0], *k = wm_has_in(n, 1) ? in[1] : NULL, *v = wm_has_in(n, 2) ? in[2] : NULL;
    s->N = wm_attr_int(n, "num_heads", 1);
    s->B = q->dims[0], s->S = q->rank >= 2 ? q->dims[1] : 0;
    if (q->rank == 5) {
        if (k || v || q->dims[2] != s->N || q->dims[3] != 3) return wm_node_err(n, err, WM_ERR_INPUT, "packed QKV query must be (B, S, heads, 3, head) without key/value");
        s->fmt = 2, s->H = s->Hv = q->dims[4], s->L = s->S;
    } else if (q->rank == 3 && k && k->rank == 5) {
        if (v || k->dims[0] != s->B || k->dims[2] != s->N || k->dims[3] != 2) return wm_node_err(n, err, WM_ERR_INPUT, "packed KV key must be (B, L, heads, 2, head) without value");
        s->fmt = 3, s->H = s->Hv = k->dims[4], s->L = k->dims[1];
    } else if (q->rank == 3 && k && v && k->rank == 3 && v->rank == 3) {
        if (k->dims[0] != s->B || v->dims[0] != s->B || k->dims[1] != v->dims[1] || k->dims[2] != q->dims[2] || v->dims[2] % s->N)
            return wm_node_err(n, err, WM_ERR_INPUT, "key/value must be (B, L, hidden)");
        s->fmt = 0, s->L = k->dims[1], s->Hv = v->dims[2] / s->N;
    } else if (q->rank == 3 && k && v && k->rank == 4 && v->rank == 4) {
        if (k->dims[0] != s->B || k->dims[1] != s->N || v->dims[1] != s->N || k->dims[2] != v->dims[2])
            return wm_node_err(n, err, WM_ERR_INPUT, "BNSH key/value must be (B, heads, L, head)");
        s->fmt = 1, s->L = k->dims[2], s->Hv = v->dims[3];
    } else {
        return wm_node_err(n, err, WM_ERR_INPUT, "unsupported query/key/value layout (ranks %d/%d/%d)", q->rank,
                           k ? k->rank : 0, v ? v->rank : 0);
    }
    if (s->fmt <= 1 || s->fmt == 3) {
        if (q->dims[2] % s->N) return wm_node_err(n, err, WM_ERR_INPUT, "query hidden size is not a multiple of heads");
        int64_t h = q->dims[2] / s->N;
        if (s->fmt == 1 && k->dims[3] != h) return wm_node_err(n, err, WM_ERR_INPUT, "key head size differs from the query's");
        if (s->fmt == 3 && s->H != h) return wm_node_err(n, err, WM_ERR_INPUT, "key head size differs from the query's");
        s->H = h;
    }
    s->Dq = s->Dk = s->N * s->H, s->Dv = s->N * s->Hv;
    if (wm_has_in(n, 3) && wm_tensor_numel(in[3]) != (uint64_t)(s->Dq + s->Dk + s->Dv))
        return wm_node_err(n, err, WM_ERR_INPUT, "bias must have Dq + Dk + Dv elements");
    if (wm_has_in(n, 6)) {
        const wm_tensor *pk = in[6], *pv = in[7];
        if (s->fmt == 1) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "past_key with BNSH key/value");
        if (pk->rank != 4 || pv->rank != 4 || pk->dims[0] != s->B || pk->dims[1] != s->N || pk->dims[3] != s->H ||
            pv->dims[0] != s->B || pv->dims[1] != s->N || pv->dims[2] != pk->dims[2] || pv->dims[3] != s->Hv)
            return wm_node_err(n, err, WM_ERR_INPUT, "past_key/past_value must be (B, heads, P, head)");
        s->P = pk->dims[2];
    }
    s->T = s->P + s->L;
    wm_status st = mask_check(n, wm_has_in(n, 4) ? in[4] : NULL, s->B, s->S, s->T, err);
    if (!st) st = bias_check(n, wm_has_in(n, 5) ? in[5] : NULL, s->B, s->N, s->S, s->T, err);
    return st;
}

static wm_status mha_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    mshape s;
    wm_status st = mha_shape(n, in, &s, err);
    if (st) return st;
    int64_t y[3] = {s.B, s.S, s.Dv}, pk[4] = {s.B, s.N, s.T, s.H}, pv[4] = {s.B, s.N, s.T, s.Hv};
    wm_set_shape(out[0], 3, y);
    if (n->n_out > 1 && out[1]) wm_set_shape(out[1], 4, pk);
    if (n->n_out > 2 && out[2]) wm_set_shape(out[2], 4, pv);
    return WM_OK;
}

/* source strides of Q, K, V (element (b, h, l) = base + b*sb + h*sh + l*ss) */
typedef struct src3 {
    const float *p;
    int64_t sb, sh, ss;
} src3;

static void mha_sources(const mshape *s, wm_tensor *const *in, src3 *q, src3 *k, src3 *v) {
    int64_t N = s->N, H = s->H, Hv = s->Hv, S = s->S, L = s->L;
    const float *qp = in[0]->data;
    switch (s->fmt) {
    case 2: /* (B, S, N, 3, H) */
        *q = (src3){qp, S * N * 3 * H, 3 * H, N * 3 * H};
        *k = (src3){qp + H, S * N * 3 * H, 3 * H, N * 3 * H};
        *v = (src3){qp + 2 * H, S * N * 3 * H, 3 * H, N * 3 * H};
        return;
    case 3: { /* key (B, L, N, 2, H) */
        const float *kp = in[1]->data;
        *q = (src3){qp, S * N * H, H, N * H};
        *k = (src3){kp, L * N * 2 * H, 2 * H, N * 2 * H};
        *v = (src3){kp + H, L * N * 2 * H, 2 * H, N * 2 * H};
        return;
    }
    case 1:
        *q = (src3){qp, S * N * H, H, N * H};
        *k = (src3){in[1]->data, N * L * H, L * H, H};
        *v = (src3){in[2]->data, N * L * Hv, L * Hv, Hv};
        return;
    default:
        *q = (src3){qp, S * N * H, H, N * H};
        *k = (src3){in[1]->data, L * N * H, H, N * H};
        *v = (src3){in[2]->data, L * N * Hv, Hv, N * Hv};
        return;
    }
}

/* workspace: Q with bias, present K/V (or K/V with bias), mask ints */
static void mha_layout(const wm_node *n, const mshape *s, wm_tensor *const *out, wm_wsbump *w, float **qb, float **pk,
                       float **pv, int64_t **kv) {
    int bias = wm_has_in(n, 3);
    *qb = bias ? wm_ws_take(w, (size_t)(s->B * s->S * s->Dq) * sizeof(float)) : NULL;
    int need = s->P || bias;
    *pk = n->n_out > 1 && out[1] ? out[1]->data : need ? wm_ws_take(w, (size_t)(s->B * s->N * s->T * s->H) * sizeof(float)) : NULL;
    *pv = n->n_out > 2 && out[2] ? out[2]->data : need ? wm_ws_take(w, (size_t)(s->B * s->N * s->T * s->Hv) * sizeof(float)) : NULL;
    *kv = wm_ws_take(w, (size_t)(2 * s->B + 1) * sizeof(int64_t));
}

/* The float inputs (all but key_padding_mask) and outputs of a float16 node: float32 copies in the workspace. */
static int mha_float_in(const wm_node *n, int i) { return i < 8 && i != 4 && wm_has_in(n, i); }

/* float16: float32 views of in / out (fin, fout) in w, the inputs converted; returns 0 for a float32 node. */
static int mha_half_views(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_wsbump *w, wm_tensor *fin,
                          wm_tensor *fout) {
    if (n->in_dtype[0] != WM_DT_FLOAT16) return 0;
    for (int i = 0; i < n->n_in && i < 8; i++) {
        if (!wm_has_in(n, i)) continue;
        fin[i] = *in[i];
        if (!mha_float_in(n, i)) continue;
        uint64_t k = wm_tensor_numel(in[i]);
        fin[i].dtype = WM_DT_FLOAT;
        fin[i].data = wm_ws_take(w, (size_t)k * sizeof(float));
        if (fin[i].data) wm_convert(WM_DT_FLOAT16, in[i]->data, WM_DT_FLOAT, fin[i].data, k);
    }
    for (int k = 0; k < n->n_out && k < 3; k++) {
        if (!out[k]) continue;
        fout[k] = *out[k];
        fout[k].dtype = WM_DT_FLOAT;
        fout[k].data = wm_ws_take(w, (size_t)wm_tensor_numel(out[k]) * sizeof(float));
    }
    return 1;
}

static size_t mha_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    mshape s;
    wm_error e = {0};
    if (mha_shape(n, in, &s, &e)) return 0;
    wm_wsbump w = {NULL, 0};
    wm_tensor fin[8], fout[3];
    mha_half_views(n, in, out, &w, fin, fout);
    float *qb, *pk, *pv;
    int64_t *kv;
    mha_layout(n, &s, out, &w, &qb, &pk, &pv, &kv);
    wm_attn a;
    at_core(&s, &a);
    return w.off + 64 + wm_attn_workspace(&a, nth);
}

static wm_status mha_run_f32(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x, wm_wsbump w);

/* float16 runs on float32 copies (inputs converted, outputs converted back): the attention core is float32. */
static wm_status mha_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    wm_wsbump w = {x->ws, 0};
    wm_tensor fin[8], fout[3], *pin[8] = {0}, *pout[3] = {0};
    if (!mha_half_views(n, in, out, &w, fin, fout)) return mha_run_f32(n, in, out, x, w);
    for (int i = 0; i < n->n_in && i < 8; i++) pin[i] = wm_has_in(n, i) ? &fin[i] : in[i];
    for (int k = 0; k < n->n_out && k < 3; k++) pout[k] = out[k] ? &fout[k] : NULL;
    wm_status st = mha_run_f32(n, pin, pout, x, w);
    for (int k = 0; k < n->n_out && k < 3 && !st; k++)
        if (out[k]) wm_convert(WM_DT_FLOAT, fout[k].data, WM_DT_FLOAT16, out[k]->data, wm_tensor_numel(out[k]));
    return st;
}

static wm_status mha_run_f32(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x, wm_wsbump w) {
    mshape s;
    wm_status st = mha_shape(n, in, &s, x->err);
    if (st) return st;
    float *qb, *pk, *pv;
    int64_t *kv;
    mha_layout(n, &s, out, &w, &qb, &pk, &pv, &kv);
    src3 q, k, v;
    mha_sources(&s, in, &q, &k, &v);
    const float *bias = wm_has_in(n, 3) ? in[3]->data : NULL;
    wm_attn a;
    at_core(&s, &a);
    if (qb) { /* Q + bias as (B, S, N, H) */
        copy_heads(qb, s.S, 0, q.p, q.sb, q.sh, q.ss, s.B, s.N, s.S, s.H, bias);
        a.q = qb, a.q_sb = s.N * s.S * s.H, a.q_sh = s.S * s.H, a.q_ss = s.H;
    } else {
        a.q = q.p, a.q_sb = q.sb, a.q_sh = q.sh, a.q_ss = q.ss;
    }
    const float *kbias = bias && s.fmt != 1 ? bias + s.Dq : NULL, *vbias = bias && s.fmt != 1 ? bias + s.Dq + s.Dk : NULL;
    if (pk) {
        if (s.P) copy_heads(pk, s.T, 0, in[6]->data, s.N * s.P * s.H, s.P * s.H, s.H, s.B, s.N, s.P, s.H, NULL);
        copy_heads(pk, s.T, s.P, k.p, k.sb, k.sh, k.ss, s.B, s.N, s.L, s.H, kbias);
        a.k = pk, a.k_sb = s.N * s.T * s.H, a.k_sh = s.T * s.H, a.k_ss = s.H;
    } else {
        a.k = k.p, a.k_sb = k.sb, a.k_sh = k.sh, a.k_ss = k.ss;
    }
    if (pv) {
        if (s.P) copy_heads(pv, s.T, 0, in[7]->data, s.N * s.P * s.Hv, s.P * s.Hv, s.Hv, s.B, s.N, s.P, s.Hv, NULL);
        copy_heads(pv, s.T, s.P, v.p, v.sb, v.sh, v.ss, s.B, s.N, s.L, s.Hv, vbias);
        a.v = pv, a.v_sb = s.N * s.T * s.Hv, a.v_sh = s.T * s.Hv, a.v_ss = s.Hv;
    } else {
        a.v = v.p, a.v_sb = v.sb, a.v_sh = v.sh, a.v_ss = v.ss;
    }
    a.o = out[0]->data, a.o_sb = s.S * s.Dv, a.o_sh = s.Hv, a.o_ss = s.Dv;
    common_attrs(n, &a, s.H);
    a.causal_off0 = s.P;
    mask_setup(&a, wm_has_in(n, 4) ? in[4] : NULL, kv);
    bias_setup(&a, wm_has_in(n, 5) ? in[5] : NULL);
    wm_attn_run(&a, x, w.p + ((w.off + 63) & ~(size_t)63));
    return WM_OK;
}

static const wm_op ops[] = {
    {"com.microsoft", "Attention", 1, 0, at_init, at_infer, at_run, at_workspace, 0, 0},
    {"com.microsoft", "MultiHeadAttention", 1, 0, mha_init, mha_infer, mha_run, mha_workspace, 0, 0},
};

const wm_op_table wm_ops_attention_ms = {ops, sizeof ops / sizeof ops[0]};
