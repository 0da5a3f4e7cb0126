/*
 * attn_core.h - the one scaled-dot-product attention core every attention op
 * uses (ONNX Attention, com.microsoft Attention / MultiHeadAttention /
 * GroupQueryAttention), float32, fused per (batch, head, query block):
 *
 *   scores = scale * Q K^T                 (wm_sgemm_st, keys [t0, t1) only)
 *   scores = softcap * tanh(scores / softcap)          (softcap > 0)
 *   scores += bias + (masked ? mask_value : 0)         (masks below)
 *   P = softmax(scores) over the keys of the row        (excluded keys: 0)
 *   O = P V                                 (wm_sgemm_st, into the output)
 *
 * Layout: every operand is addressed by strides in elements with the head
 * dim contiguous; K and V may be float16 (kv_h16: the few-row kernels
 * convert on load, the GEMM path converts the unit's key/value rows into
 * its scratch first), so BSNH (3-D, heads packed in the hidden dim), BNSH and
 * packed QKV inputs are read in place. Query head h reads key/value head
 * h / (Hq / Hkv) (grouped-query attention without copies).
 *
 * Masks of a row (b, h, s) over key j:
 *   excluded (probability 0, not computed): j >= kv_n[b]; causal
 *     j > s + causal_off[b]; local window j < s + causal_off[b] - window.
 *   masked (mask_value added once): j < kv_lo[b] or j >= kv_hi[b]; a zero
 *     in the boolean/int mask; a mask column >= its length (m_n / bias_n).
 *   bias: added (float, broadcast by zero strides). A bias shared by every
 *     batch and head that is itself a causal mask (0 up to key s + T - S,
 *     -inf or below -1e30 after; sdpa's is_causal as exported) runs as
 *     causal: those keys are excluded, not computed.
 * ONNX gives masked scores -inf (a row with every key masked is NaN, like the
 * reference); onnxruntime contrib ops add mask_filter_value (-10000).
 *
 * A unit of more than WM_ATTN_FEW_ROWS queries is tiled instead of the two
 * GEMMs when it has no masks, bias, softcap, sinks or score output (any
 * number of keys: Whisper's 1500) or its keys and values fit in 192 KiB (an
 * encoder's whole sequence, masks applied by the row softmax): its keys packed
 * (wm_attn_pack_k), then per 12 queries their scores (attn_qk_packed, in L1),
 * softmax and P V (attn_pv); no (queries x keys) block beyond a tile's. Without
 * masks the keys come in blocks of at most 256, each packed once and met by
 * every tile of the unit while in L2, with an online softmax (attn_exp_rows:
 * a running max and sum per row, the earlier blocks' P V rescaled when the
 * max grows, normalized after the last block: flash attention's recurrence).
 *
 * Threads take (b, h, query block) units, or with one query and grouped
 * heads (decode) (b, kv head) units whose rows are the heads of the group
 * (each key/value row read once per group). One query over 256 keys or more
 * (no sinks, smooth softmax or qk output) splits each unit's keys in chunks
 * of 128, each a unit of work with its own softmax and log-sum-exp, combined
 * after (flash-decoding): a long context keeps every thread busy when batch
 * x kv heads is small, and a chunk's scores stay in L1. Each unit is
 * computed by one thread with a fixed order and the chunks follow the keys,
 * so results do not depend on the thread count.
 * Scratch comes from the caller (wm_attn_workspace bytes); nothing allocates.
 */
#ifndef WM_OPS_ATTN_CORE_H
#define WM_OPS_ATTN_CORE_H

#include "ops/op.h"

/* what qk receives (the scores of every query x key, (B, Hq, S, T) contiguous) */
enum { WM_QK_NONE, WM_QK_RAW, WM_QK_SOFTCAP, WM_QK_MASKED, WM_QK_PROBS };

typedef struct wm_attn {
    int64_t B, Hq, Hkv, S, T; /* T: key columns of the key/value operands */
    int64_t dk, dv;           /* head sizes of Q/K and of V */
    /* element (b, h, s, 0) of Q at q + b*q_sb + h*q_sh + s*q_ss; likewise K, V (with kv head), O */
    const float *q; int64_t q_sb, q_sh, q_ss;
    const void *k; int64_t k_sb, k_sh, k_ss; /* float32, or float16 when kv_h16 */
    const void *v; int64_t v_sb, v_sh, v_ss;
    int kv_h16;               /* K and V are float16 (a float16 KV cache read in place) */
    float *o; int64_t o_sb, o_sh, o_ss;
    float scale, softcap;     /* softcap 0: none */
    float mask_value;         /* -INFINITY or mask_filter_value */
    const int64_t *kv_n;      /* [B] keys that exist, or NULL (T) */
    const int64_t *kv_lo, *kv_hi; /* [B] unmasked key range, or NULL */
    int causal;
    const int64_t *causal_off; /* [B] or NULL: causal_off0 for all */
    int64_t causal_off0;
    int64_t window;           /* < 0: none (needs causal) */
    const float *bias;        /* additive, element (b,h,s,j) at b*bias_sb + h*bias_sh + s*bias_ss + j */
    int64_t bias_sb, bias_sh, bias_ss, bias_n; /* bias_n columns present; later ones are masked */
    const void *mask;         /* boolean (uint8) or int32 (mask_i32) mask, 0 = masked, or NULL */
    int mask_i32;
    int64_t m_sb, m_sh, m_ss, m_n;
    const float *sink;        /* [Hq] extra softmax logit per head (head_sink), or NULL */
    int smooth;               /* smooth softmax: an extra logit 0 */
    float *qk;                /* (B, Hq, S, T) scores at stage qk_mode, or NULL */
    int qk_mode;
} wm_attn;

/* Bump allocation from a workspace; with p NULL it only counts (workspace() sizing). */
typedef struct wm_wsbump {
    uint8_t *p;
    size_t off;
} wm_wsbump;

static inline void *wm_ws_take(wm_wsbump *w, size_t bytes) {
    size_t o = (w->off + 63) & ~(size_t)63;
    w->off = o + bytes;
    return w->p ? w->p + o : NULL;
}

/* Query rows per unit of work. */
#define WM_ATTN_QBLOCK 128
/* units of at most this many query rows (decode) use the kernel table's attn_qk / attn_pv instead of GEMM */
#define WM_ATTN_FEW_ROWS 8

/* Scratch bytes for nth threads: a function of the shapes (B, Hq, Hkv, S, T, dk, dv, kv_h16; qk, sink and
 * smooth may only lower it), so a descriptor with just those set (as the ops size it, before the masks, causal
 * flags, bias ...) covers any run of the same shapes. */
size_t wm_attn_workspace(const wm_attn *a, int nth);

/* Runs the attention on x's pool; ws has wm_attn_workspace(a, x->nth) bytes. */
void wm_attn_run(const wm_attn *a, wm_exec *x, void *ws);

#endif
