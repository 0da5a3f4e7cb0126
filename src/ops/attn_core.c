/* attn_core.c - the fused attention core (see attn_core.h). */
#include "ops/attn_core.h"

#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "ops/gemm.h"

typedef struct actx {
    const wm_attn *a;
    float *ws;      /* per thread: rows * T floats */
    int64_t nblk;   /* query blocks per (b, h) */
    int64_t qb;     /* query rows per block (q_block) */
    int group;      /* one query: units are (b, kv head) with the grouped heads as rows */
    wm_exec *x;     /* GEMM scratch: one slice per thread */
    int64_t nck;    /* key chunks per unit (split decode, > 1), else 1 */
    float *part;    /* split: per (unit, chunk) its rows' outputs over the chunk (rows x dv), then their lse */
} actx;

/*
 * Split decode (one query): a unit's keys in chunks of WM_ATTN_KCHUNK, each its own unit of work with a
 * softmax over the chunk and the chunk's log-sum-exp, combined after: o = sum_c exp(lse_c - lse) o_c. Then a
 * long context spreads over more threads than (batch x kv heads). The chunking follows the keys alone, so
 * results do not depend on the thread count. Not for sinks, smooth softmax or qk outputs.
 */
#define WM_ATTN_KCHUNK 128
#define WM_ATTN_KSPLIT 256 /* split from this many keys on */

static int splittable(const wm_attn *a) { return a->S == 1 && !a->qk && !a->sink && !a->smooth; }

/* rows of one query's unit: the grouped heads, or the one head */
static int64_t split_rows(const wm_attn *a) { return a->Hq > a->Hkv ? a->Hq / a->Hkv : 1; }
static int64_t split_base(const wm_attn *a) { return a->B * (a->Hq > a->Hkv ? a->Hkv : a->Hq); }
static size_t split_floats(const wm_attn *a, int64_t nck) {
    return (size_t)(split_base(a) * nck * split_rows(a) * (a->dv + 1));
}
static int64_t split_chunks(const wm_attn *a, int64_t keys) {
    return splittable(a) && keys >= WM_ATTN_KSPLIT ? (keys + WM_ATTN_KCHUNK - 1) / WM_ATTN_KCHUNK : 1;
}

static int blocked(const wm_attn *a);

/* query rows per block: the fewest blocks of at most WM_ATTN_QBLOCK rows, or twice that while a block's scores
   stay within 256 KiB (short keys: fewer, longer GEMMs, and each head's keys packed once) or the keys come in
   blocks (blocked(): a unit's rows and outputs, 128 KiB at head size 64, stay in L2 beside a key block, and each
   key block is packed once per 256 rows, not 128: Whisper's 1500, 6 heads of 64, 1 thread, 60-65 -> 58-63 ms CPU,
   noisy), evened out in multiples of 12 (a GEMM tile's height) so that the last is not a sliver. ViT's 197
   queries: one block, not 128 + 69 (12 layers of MultiHeadAttention alone: 8.0-8.4 -> 7.5-7.8 ms). */
static int64_t q_block(const wm_attn *a) {
    int64_t cap = 2 * WM_ATTN_QBLOCK * (a->T > 0 ? a->T : 1) * (int64_t)sizeof(float) <= 256 * 1024 || blocked(a)
                      ? 2 * WM_ATTN_QBLOCK
                      : WM_ATTN_QBLOCK;
    int64_t nb = (a->S + cap - 1) / cap, r = (a->S + nb - 1) / nb;
    r = (r + 11) / 12 * 12;
    return r < cap ? r : cap;
}

/* rows of scores a unit holds */
static int64_t unit_rows(const wm_attn *a) {
    if (a->S == 1 && a->Hq > a->Hkv) return a->Hq / a->Hkv;
    int64_t qb = q_block(a);
    return a->S < qb ? a->S : qb;
}

/* Units of more rows than WM_ATTN_FEW_ROWS take the tiled path: the keys packed (wm_attn_pack_k), then per tile of
   WM_ATTN_TILE queries their scores (WM_ATTN_TILE x keys, in L1), softmax and P V. Without masks, bias, softcap,
   sinks, smooth softmax, score output or split decode (blocked()) for any number of keys, in blocks of at most
   WM_ATTN_KBLOCK keys with an online softmax: per block its keys packed once, then every tile of the unit meets
   them (the block's keys and values stay in L2; a tile's running max and sum rescale its earlier P V); the rest
   (masks ...) with keys and values of at most WM_ATTN_TILED_FLOATS floats (T x (dk + dv), 192 KiB: an encoder's
   197 / 257 tokens of 64 or 80) as one block, row_softmax applying the masks; more: the GEMM path (scores of the
   unit's rows, then P V as a GEMM) */
#define WM_ATTN_TILED_FLOATS (48 * 1024)
#define WM_ATTN_TILE 12 /* two 6-row blocks of attn_qk_packed and of attn_pv */
#ifndef WM_ATTN_KBLOCK
#define WM_ATTN_KBLOCK 256
#endif

/* attention whose rows the online softmax computes on its own: no mask, bias, softcap, sink, smooth softmax,
   score output, or split decode (the key chunks' log-sum-exp) */
static int blocked(const wm_attn *a) {
    return !a->causal && !a->mask && !a->bias && !a->kv_lo && !a->kv_hi && a->softcap <= 0 && !a->sink &&
           !a->smooth && !a->qk && split_chunks(a, a->T) == 1;
}

static int tiled(const wm_attn *a) {
    return unit_rows(a) > WM_ATTN_FEW_ROWS && (blocked(a) || a->T * (a->dk + a->dv) <= WM_ATTN_TILED_FLOATS);
}

/* keys per block of the tiled path: blocked, the fewest blocks of at most WM_ATTN_KBLOCK keys evened out in
   panels (1500: 6 of 256 but the last 220); else all of them */
static int64_t key_block(const wm_attn *a) {
    int64_t T = a->T > 0 ? a->T : 1;
    if (!blocked(a) || T <= WM_ATTN_KBLOCK) return T;
    int64_t nb = (T + WM_ATTN_KBLOCK - 1) / WM_ATTN_KBLOCK, kb = (T + nb - 1) / nb;
    kb = (kb + WM_ATTN_KPANEL - 1) / WM_ATTN_KPANEL * WM_ATTN_KPANEL;
    return kb < T ? kb : T;
}

/* floats of a tile's scores (rounded to 64 bytes), then of the packed keys of a block, a tile's P V of a block,
   and the running max and sum of the unit's rows and a tile's rescaling factors */
static size_t tile_score_floats(const wm_attn *a) { return (WM_ATTN_TILE * (size_t)key_block(a) + 15) & ~(size_t)15; }
static size_t tile_pv_floats(const wm_attn *a) { return (WM_ATTN_TILE * (size_t)a->dv + 15) & ~(size_t)15; }
/* blocked units with whole panels of WM_ATTN_VPANEL value columns: a key block's values packed (vpack_block) */
#define WM_ATTN_VPANEL 16
static int vpacked(const wm_attn *a) { return blocked(a) && a->dv % WM_ATTN_VPANEL == 0; }
static size_t tile_vpack_floats(const wm_attn *a) { return vpacked(a) ? (size_t)key_block(a) * (size_t)a->dv : 0; }
static size_t tile_floats(const wm_attn *a) {
    size_t stats = ((size_t)(2 * unit_rows(a) + WM_ATTN_TILE) + 15) & ~(size_t)15;
    return tile_score_floats(a) + wm_attn_pack_k_floats(key_block(a), a->dk) + tile_vpack_floats(a) +
           tile_pv_floats(a) + stats;
}

/* n value rows of dv floats (ld apart) as dv / WM_ATTN_VPANEL panels of n rows of WM_ATTN_VPANEL: panel p holds
   columns [16 p, 16 p + 16) of row j at p n 16 + 16 j. P V over a panel (attn_pv with d 16, rows 16 apart) then
   streams one contiguous block, where the rows in place (a fused projection's, a q, k, v row apart) cost each
   16-column pass a cache line per row from L2; the sums are the same, in the same order. */
static void vpack_block(int64_t n, int64_t dv, const float *v, int64_t ld, float *dst) {
    for (int64_t j = 0; j < n; j++)
        for (int64_t p = 0; p < dv / WM_ATTN_VPANEL; p++)
            memcpy(dst + (p * n + j) * WM_ATTN_VPANEL, v + j * ld + p * WM_ATTN_VPANEL, WM_ATTN_VPANEL * sizeof *dst);
}

/* P V of a tile (mr rows, nb keys) into o (rows ostep apart): over the packed panels vpk, or v in place */
static void tile_pv(const wm_attn *a, int64_t mr, int64_t nb, const float *p, const float *vpk, const float *v,
                    int64_t vld, float *o, int64_t ostep) {
    const wm_kernels *K = wm_kernels_get();
    if (!vpk) {
        K->attn_pv(mr, nb, a->dv, p, nb, v, vld, o, ostep);
        return;
    }
    for (int64_t c = 0; c < a->dv; c += WM_ATTN_VPANEL)
        K->attn_pv(mr, nb, WM_ATTN_VPANEL, p, nb, vpk + c * nb, WM_ATTN_VPANEL, o + c, ostep);
}

/* floats of one thread's scratch: scores (a tile's, or the unit's on the GEMM path), with float16 K/V off the
   few-row path their float32 copies, on the tiled path the packed keys */
static size_t unit_floats(const wm_attn *a) {
    size_t T = (size_t)(a->T ? a->T : 1), f = tiled(a) ? tile_floats(a) : (size_t)unit_rows(a) * T;
    if (a->kv_h16 && unit_rows(a) > WM_ATTN_FEW_ROWS) f += T * (size_t)(a->dk + a->dv);
    return (f + 15) & ~(size_t)15;
}

/* floats of one thread's slice of the scratch: enough for any run of a's shapes (B, Hq, Hkv, S, T, dk, dv,
   kv_h16), whatever masks, causal rows, bias ... it carries. The ops size the scratch from the shapes alone
   (attention_ms.c, gqa.c) and set the masks after, and the masks choose the path (blocked() or not) and with it
   the query block, the key block and the tiled / GEMM choice: the larger of the blocked layout's (no masks) and
   the unblocked one's (causal standing for any mask). A function of the shapes alone, so that sizing and run
   agree on every slice's offset. */
static size_t thread_floats(const wm_attn *a) {
    wm_attn u = *a;
    u.causal = 0, u.mask = NULL, u.bias = NULL, u.kv_lo = u.kv_hi = NULL, u.softcap = 0.0f, u.sink = NULL;
    u.smooth = 0, u.qk = NULL;
    size_t f0 = unit_floats(&u);
    u.causal = 1;
    size_t f1 = unit_floats(&u);
    return f0 > f1 ? f0 : f1;
}

size_t wm_attn_workspace(const wm_attn *a, int nth) {
    return ((size_t)(nth > 0 ? nth : 1) * thread_floats(a) + split_floats(a, split_chunks(a, a->T))) * sizeof(float) +
           128;
}

/* rows [0, n) of a float16 matrix (leading dimension ld) as float32 rows of d */
static const float *widen_rows(const void *src, int64_t ld, int64_t n, int64_t d, float *dst) {
    const wm_kernels *K = wm_kernels_get();
    for (int64_t j = 0; j < n; j++) K->f16_to_f32(d, dst + j * d, (const uint16_t *)src + j * ld);
    return dst;
}

static void store_qk(const wm_attn *a, int64_t b, int64_t h, int64_t s, int64_t t0, const float *row, int64_t n) {
    float *d = a->qk + ((b * a->Hq + h) * a->S + s) * a->T;
    for (int64_t j = 0; j < t0; j++) d[j] = a->qk_mode == WM_QK_PROBS ? 0.0f : -INFINITY;
    memcpy(d + t0, row, (size_t)n * sizeof *row);
    for (int64_t j = t0 + n; j < a->T; j++) d[j] = a->qk_mode == WM_QK_PROBS ? 0.0f : -INFINITY;
}

/* One row of scores over keys [t0, t0 + n): masks, softmax (in place); [lo, hi) are the keys not excluded.
 * lse (split decode, no sink / smooth): receives log(sum exp) of the row's kept scores (-inf when none). */
static void row_softmax(const wm_attn *a, int64_t b, int64_t h, int64_t s, int64_t t0, float *row, int64_t n,
                        float *lse) {
    int64_t off = a->causal_off ? a->causal_off[b] : a->causal_off0;
    int64_t lo = t0, hi = t0 + n;
    if (a->causal) {
        if (s + off + 1 < hi) hi = s + off + 1;
        if (a->window >= 0 && s + off - a->window > lo) lo = s + off - a->window;
    }
    if (a->softcap > 0) {
        float c = a->softcap, ic = 1.0f / a->softcap;
        for (int64_t j = 0; j < n; j++) row[j] = c * tanhf(row[j] * ic);
    }
    if (a->qk && a->qk_mode <= WM_QK_SOFTCAP) store_qk(a, b, h, s, t0, row, n);
    const float *brow = a->bias ? a->bias + b * a->bias_sb + h * a->bias_sh + s * a->bias_ss : NULL;
    const void *mrow = NULL;
    if (a->mask) {
        size_t es = a->mask_i32 ? 4 : 1;
        mrow = (const uint8_t *)a->mask + (size_t)(b * a->m_sb + h * a->m_sh + s * a->m_ss) * es;
    }
    int plain = !brow && !a->mask && !a->kv_lo && !a->kv_hi;
    for (int64_t t = t0; t < lo; t++) row[t - t0] = -INFINITY;
    for (int64_t t = hi > t0 ? hi : t0; t < t0 + n; t++) row[t - t0] = -INFINITY;
    if (!plain) { /* the masks as ranges: keys [ulo, uhi) pass every bound, the rest of [lo, hi) take mv once */
        int64_t ulo = a->kv_lo && a->kv_lo[b] > lo ? a->kv_lo[b] : lo, uhi = hi;
        if (a->kv_hi && a->kv_hi[b] < uhi) uhi = a->kv_hi[b];
        if (a->bias && a->bias_n < uhi) uhi = a->bias_n;
        if (a->mask && a->m_n < uhi) uhi = a->m_n;
        if (uhi < ulo) uhi = ulo;
        const float mv = a->mask_value;
        if (brow) {
            int64_t e = hi < a->bias_n ? hi : a->bias_n;
            for (int64_t t = lo; t < e; t++) row[t - t0] += brow[t];
        }
        for (int64_t t = lo; t < ulo && t < hi; t++) row[t - t0] += mv;
        for (int64_t t = uhi > lo ? uhi : lo; t < hi; t++) row[t - t0] += mv;
        float *r = row - t0;
        if (a->mask && a->mask_i32) {
            const int32_t *m = mrow;
            for (int64_t t = ulo; t < uhi; t++) r[t] += m[t] == 0 ? mv : 0.0f;
        } else if (a->mask) {
            const uint8_t *m = mrow;
            for (int64_t t = ulo; t < uhi; t++) r[t] += m[t] == 0 ? mv : 0.0f;
        }
    }
    if (a->qk && a->qk_mode == WM_QK_MASKED) store_qk(a, b, h, s, t0, row, n);
    /* softmax over [lo, hi); excluded keys get 0 */
    float m = -INFINITY, extra = a->sink ? a->sink[h] : 0.0f;
    int has_extra = a->sink || a->smooth;
    if (!has_extra) { /* the kernel table's row softmax (vector exp) over the keys not excluded */
        int64_t k0 = lo - t0 < n ? lo - t0 : n, k1 = hi - t0 < n ? hi - t0 : n; /* kept: [k0, k1) of the row */
        if (k0 < 0) k0 = 0;
        if (k1 < k0) k1 = k0;
        for (int64_t j = 0; j < k0; j++) row[j] = 0.0f; /* the excluded keys only: none in an encoder's rows */
        for (int64_t j = k1; j < n; j++) row[j] = 0.0f;
        int64_t at = k0; /* lse: the largest score's probability is exp(0) / sum, so lse = max - log(p[at]) */
        for (int64_t j = k0 + 1; lse && j < k1; j++) at = row[j] > row[at] ? j : at;
        float mx = k1 > k0 ? row[at] : -INFINITY;
        if (hi > lo) wm_kernels_get()->softmax_row(hi - lo, row + (lo - t0), row + (lo - t0), 1.0f, NULL);
        if (lse) /* no kept key: -inf (weight 0); kept keys all -inf: NaN, as the whole row's softmax gives */
            *lse = k1 <= k0 ? -INFINITY : mx > -INFINITY ? mx - logf(row[at]) : NAN;
        if (a->qk && a->qk_mode == WM_QK_PROBS) store_qk(a, b, h, s, t0, row, n);
        return;
    }
    for (int64_t t = lo; t < hi; t++) m = row[t - t0] > m ? row[t - t0] : m;
    if (has_extra && extra > m) m = extra;
    double sum = has_extra ? exp((double)(extra - m)) : 0.0;
    for (int64_t j = 0; j < n; j++) {
        int64_t t = t0 + j;
        if (t < lo || t >= hi) {
            row[j] = 0.0f;
            continue;
        }
        row[j] = expf(row[j] - m);
        sum += row[j];
    }
    float inv = (float)(1.0 / sum);
    for (int64_t t = lo; t < hi; t++) row[t - t0] *= inv;
    if (a->qk && a->qk_mode == WM_QK_PROBS) store_qk(a, b, h, s, t0, row, n);
}

/*
 * The online path of a blocked unit (m query rows, keys [0, n)): per block of key_block keys, its keys packed, then
 * per tile of WM_ATTN_TILE rows their scores, attn_exp_rows (running max and sum), and P V: the first block's into
 * the output rows, a later one's into the scratch, added to the output rows scaled by the tile's alpha; at last each
 * output row times 1 / its sum. A block's keys and values are read by every tile while in L2, a tile's scores stay
 * in L1.
 */
static void tile_blocks(const actx *c, int64_t m, int64_t n, const float *qp, int64_t qstep, const float *kp,
                        int64_t kld, const float *vp, int64_t vld, float *o, int64_t ostep, float *sc) {
    const wm_attn *a = c->a;
    const wm_kernels *K = wm_kernels_get();
    const int64_t kb = key_block(a), dv = a->dv;
    float *kpk = sc + tile_score_floats(a), *vpk = kpk + wm_attn_pack_k_floats(kb, a->dk);
    float *pv = vpk + tile_vpack_floats(a);
    float *mx = pv + tile_pv_floats(a), *sum = mx + m, *alpha = sum + m;
    if (!vpacked(a)) vpk = NULL;
    for (int64_t r = 0; r < m; r++) mx[r] = -INFINITY, sum[r] = 0.0f;
    for (int64_t j0 = 0; j0 < n; j0 += kb) {
        int64_t nb = n - j0 < kb ? n - j0 : kb;
        wm_attn_pack_k(nb, a->dk, kp + j0 * kld, kld, kpk);
        if (vpk) vpack_block(nb, dv, vp + j0 * vld, vld, vpk);
        for (int64_t r0 = 0; r0 < m; r0 += WM_ATTN_TILE) {
            int64_t mr = m - r0 < WM_ATTN_TILE ? m - r0 : WM_ATTN_TILE;
            K->attn_qk_packed(mr, nb, a->dk, qp + r0 * qstep, qstep, kpk, a->scale, sc, nb);
            K->attn_exp_rows(mr, nb, sc, nb, mx + r0, sum + r0, alpha);
            if (j0 == 0) {
                tile_pv(a, mr, nb, sc, vpk, vp, vld, o + r0 * ostep, ostep);
                continue;
            }
            tile_pv(a, mr, nb, sc, vpk, vp + j0 * vld, vld, pv, dv);
            for (int64_t r = 0; r < mr; r++) { /* y = y alpha + this block's P V, two roundings as before */
                float *y = o + (r0 + r) * ostep;
                K->scale(dv, y, y, alpha[r]);
                K->add(dv, y, y, pv + r * dv);
            }
        }
    }
    for (int64_t r = 0; r < m; r++) K->scale(dv, o + r * ostep, o + r * ostep, 1.0f / sum[r]);
}

/*
 * The tiled path of a unit (query-block mode, or group mode's rows; lse: split decode's, per row). Blocked units
 * (no masks ...): tile_blocks. Else keys [t0, t0 + n) (at most key_block) packed after the tile's scores, then per
 * tile of WM_ATTN_TILE rows their scores against the keys a row of the tile may see (causal: up to the tile's last
 * query), softmax with the masks (row_softmax), and P V into the output rows: no (rows x keys) matrix beyond the
 * tile's, the packed keys shared by its tiles.
 */
static void tile_rows(const actx *c, int64_t b, int64_t h0, int64_t s0, int64_t m, int64_t t0, int64_t n,
                      const float *qp, int64_t qstep, const float *kp, int64_t kld, const float *vp, int64_t vld,
                      float *o, int64_t ostep, float *sc, float *lse) {
    const wm_attn *a = c->a;
    if (blocked(a)) {
        tile_blocks(c, m, n, qp, qstep, kp, kld, vp, vld, o, ostep, sc);
        return;
    }
    const wm_kernels *K = wm_kernels_get();
    float *kpk = sc + tile_score_floats(a);
    wm_attn_pack_k(n, a->dk, kp, kld, kpk);
    int64_t off = a->causal_off ? a->causal_off[b] : a->causal_off0;
    for (int64_t r0 = 0; r0 < m; r0 += WM_ATTN_TILE) {
        int64_t mr = m - r0 < WM_ATTN_TILE ? m - r0 : WM_ATTN_TILE, nt = n;
        if (!a->qk && a->causal && !c->group) { /* keys past the tile's last query: excluded for all of its rows */
            int64_t e = s0 + r0 + mr + off - t0;
            nt = e < nt ? (e > 0 ? e : 0) : nt;
        }
        if (nt > 0) K->attn_qk_packed(mr, nt, a->dk, qp + r0 * qstep, qstep, kpk, a->scale, sc, nt);
        for (int64_t r = 0; r < mr; r++)
            row_softmax(a, b, c->group ? h0 + r0 + r : h0, c->group ? 0 : s0 + r0 + r, t0, sc + r * nt, nt,
                        lse ? lse + r0 + r : NULL);
        if (nt > 0) K->attn_pv(mr, nt, a->dv, sc, nt, vp, vld, o + r0 * ostep, ostep);
        else
            for (int64_t r = 0; r < mr; r++) memset(o + (r0 + r) * ostep, 0, (size_t)a->dv * sizeof *o);
    }
}

/*
 * One unit of work: m rows of queries against the keys of one kv head g.
 *   query-block mode: head h, queries s0 .. s0 + m - 1 (rows step q_ss / o_ss);
 *   group mode (one query, grouped heads): query 0 of the grp heads sharing kv head g
 *   (rows step q_sh / o_sh), so each key and value row is read once for all of them.
 */
static void unit(const actx *c, int64_t u, float *sc, int ith) {
    const wm_attn *a = c->a;
    int64_t grp = a->Hq / a->Hkv, b, g, h0, s0, m, qstep, ostep, kc = 0;
    if (c->nck > 1) kc = u % c->nck, u /= c->nck; /* split decode (one query, nblk 1): u = unit * nck + chunk */
    if (c->group) {
        b = u / a->Hkv, g = u % a->Hkv, h0 = g * grp, s0 = 0, m = grp, qstep = a->q_sh, ostep = a->o_sh;
    } else {
        int64_t blk = u % c->nblk, bh = u / c->nblk;
        b = bh / a->Hq, h0 = bh % a->Hq, g = h0 / grp, s0 = blk * c->qb;
        m = s0 + c->qb < a->S ? c->qb : a->S - s0, qstep = a->q_ss, ostep = a->o_ss;
    }
    int64_t s1 = c->group ? 1 : s0 + m; /* queries [s0, s1) */
    int64_t off = a->causal_off ? a->causal_off[b] : a->causal_off0;
    int64_t t0 = 0, t1 = a->kv_n ? (a->kv_n[b] < a->T ? a->kv_n[b] : a->T) : a->T;
    if (t1 < 0) t1 = 0;
    if (!a->qk && a->causal) { /* keys no row of the unit sees */
        if (s1 + off < t1) t1 = s1 + off > 0 ? s1 + off : 0;
        if (a->window >= 0 && s0 + off - a->window > 0) t0 = s0 + off - a->window;
        if (t0 > t1) t0 = t1;
    }
    float *o = a->o + b * a->o_sb + h0 * a->o_sh + s0 * a->o_ss, *lse = NULL;
    if (c->nck > 1) { /* this chunk's keys; its rows' outputs and lse go to the unit's slot of c->part */
        float *slot = c->part + (size_t)(u * c->nck + kc) * (size_t)(m * (a->dv + 1));
        o = slot, ostep = a->dv, lse = slot + m * a->dv;
        int64_t k0 = t0 + kc * WM_ATTN_KCHUNK;
        t0 = k0 < t1 ? k0 : t1;
        if (t0 + WM_ATTN_KCHUNK < t1) t1 = t0 + WM_ATTN_KCHUNK;
    }
    int64_t n = t1 - t0;
    const float *qp = a->q + b * a->q_sb + h0 * a->q_sh + s0 * a->q_ss;
    size_t es = a->kv_h16 ? 2 : 4;
    const void *kp = (const uint8_t *)a->k + (size_t)(b * a->k_sb + g * a->k_sh + t0 * a->k_ss) * es;
    const void *vp = (const uint8_t *)a->v + (size_t)(b * a->v_sb + g * a->v_sh + t0 * a->v_ss) * es;
    int few = m <= WM_ATTN_FEW_ROWS; /* decode: row kernels read each key/value row once, no packing */
    const wm_kernels *K = wm_kernels_get();
    int64_t kld = a->k_ss, vld = a->v_ss;
    if (n > 0 && !few && a->kv_h16) { /* float32 copies of the unit's keys and values, after its scores */
        float *kw = sc + (tiled(a) ? tile_floats(a) : (size_t)m * (size_t)n);
        kp = widen_rows(kp, kld, n, a->dk, kw), kld = a->dk;
        vp = widen_rows(vp, vld, n, a->dv, kw + n * a->dk), vld = a->dv;
    }
    if (n > 0 && !few && tiled(a)) {
        tile_rows(c, b, h0, s0, m, t0, n, qp, qstep, kp, kld, vp, vld, o, ostep, sc, lse);
        return;
    }
    /* the value rows are prefetched as the keys are read: the cache comes from memory once per decode step */
    if (n > 0 && few && a->kv_h16) K->attn_qk_h(m, n, a->dk, qp, qstep, kp, kld, a->scale, sc, n, vp, vld, a->dv);
    else if (n > 0 && few) K->attn_qk(m, n, a->dk, qp, qstep, kp, kld, a->scale, sc, n, vp, vld, a->dv);
    else if (n > 0) {
        wm_gemm_args g1 = {m, n, a->dk, qp, qstep, 0, kp, kld, 1, sc, n, a->scale, 0};
        wm_sgemm_st(c->x, ith, &g1);
    }
    for (int64_t r = 0; r < m; r++)
        row_softmax(a, b, c->group ? h0 + r : h0, c->group ? 0 : s0 + r, t0, sc + r * n, n, lse ? lse + r : NULL);
    if (n > 0 && few && a->kv_h16) K->attn_pv_h(m, n, a->dv, sc, n, vp, vld, o, ostep);
    else if (n > 0 && few) K->attn_pv(m, n, a->dv, sc, n, vp, vld, o, ostep);
    else if (n > 0) {
        wm_gemm_args g2 = {m, a->dv, n, sc, n, 0, vp, vld, 0, o, ostep, 1.0f, 0};
        wm_sgemm_st(c->x, ith, &g2);
    } else {
        for (int64_t r = 0; r < m; r++) memset(o + r * ostep, 0, (size_t)a->dv * sizeof *o);
        for (int64_t r = 0; lse && r < m; r++) lse[r] = -INFINITY;
    }
}

/* Split decode, base unit u: its rows' outputs from the chunks' (weights exp(lse_c - max lse), normalized). */
static void combine(const actx *c, int64_t u) {
    const wm_attn *a = c->a;
    int64_t m = split_rows(a), b, h0, dv = a->dv;
    if (c->group) b = u / a->Hkv, h0 = (u % a->Hkv) * m;
    else b = u / a->Hq, h0 = u % a->Hq;
    size_t slot = (size_t)(m * (dv + 1));
    float *p0 = c->part + (size_t)(u * c->nck) * slot;
    for (int64_t r = 0; r < m; r++) {
        float *o = a->o + b * a->o_sb + (h0 + r) * a->o_sh, mx = -INFINITY;
        int nan = 0;
        for (int64_t k = 0; k < c->nck; k++) {
            float l = p0[k * slot + m * dv + r];
            nan |= l != l;
            mx = l > mx ? l : mx;
        }
        if (mx == -INFINITY) { /* every kept key masked to -inf: NaN, as the whole row's softmax; no key: 0 */
            for (int64_t j = 0; j < dv; j++) o[j] = nan ? NAN : 0.0f;
            continue;
        }
        memset(o, 0, (size_t)dv * sizeof *o);
        float sum = 0.0f;
        for (int64_t k = 0; k < c->nck; k++) { /* each lse becomes its weight; NaN chunks (all -inf) weigh 0 */
            float *l = &p0[k * slot + m * dv + r];
            *l = *l == *l ? expf(*l - mx) : 0.0f;
            sum += *l;
        }
        float inv = 1.0f / sum;
        for (int64_t k = 0; k < c->nck; k++) {
            float wk = p0[k * slot + m * dv + r] * inv;
            const float *ok = p0 + k * slot + r * dv;
            if (wk != 0.0f)
                for (int64_t j = 0; j < dv; j++) o[j] += wk * ok[j];
        }
    }
}

static void part(void *arg, int ith, int nth) {
    const actx *c = arg;
    const wm_attn *a = c->a;
    long lo, hi;
    wm_split((long)((c->group ? a->B * a->Hkv : a->B * a->Hq * c->nblk) * c->nck), ith, nth, &lo, &hi);
    float *sc = c->ws + (size_t)ith * thread_floats(a);
    for (long u = lo; u < hi; u++) unit(c, u, sc, ith);
}

static void part_combine(void *arg, int ith, int nth) {
    const actx *c = arg;
    long lo, hi;
    wm_split((long)split_base(c->a), ith, nth, &lo, &hi);
    for (long u = lo; u < hi; u++) combine(c, u);
}

/* A bias shared by every batch and head that is a causal mask as written (sdpa's is_causal, CLIP's text tower):
 * 0 on the keys j <= s + T - S of row s, -inf or below -1e30 past them (exp gives exactly 0 there beside the
 * row's finite scores). Such a bias runs as causal instead: the keys past each query are not computed. Only
 * with no other mask, key counts or score output, so that the rows see the same keys. */
static int bias_is_causal(const wm_attn *a) {
    if (!a->bias || a->causal || a->qk || a->mask || a->kv_n || a->kv_lo || a->kv_hi || a->bias_sb || a->bias_sh ||
        a->bias_n < a->T || a->T < a->S)
        return 0;
    const int64_t off = a->T - a->S;
    for (int64_t s = 0; s < a->S; s++) {
        const float *r = a->bias + s * a->bias_ss;
        for (int64_t j = 0; j <= s + off; j++)
            if (r[j] != 0.0f) return 0;
        for (int64_t j = s + off + 1; j < a->T; j++)
            if (!(r[j] <= -1e30f)) return 0;
    }
    return 1;
}

void wm_attn_run(const wm_attn *a, wm_exec *x, void *ws) {
    if (!a->B || !a->Hq || !a->S || !a->dv) return;
    wm_attn causal_form;
    if (bias_is_causal(a)) {
        causal_form = *a;
        causal_form.bias = NULL;
        causal_form.causal = 1;
        causal_form.causal_off = NULL;
        causal_form.causal_off0 = a->T - a->S;
        causal_form.window = -1;
        a = &causal_form;
    }
    int64_t keys = 0; /* the most keys a row may see: chunks follow them, not the buffer's T */
    for (int64_t b = 0; b < a->B; b++) {
        int64_t k = a->kv_n ? (a->kv_n[b] < a->T ? a->kv_n[b] : a->T) : a->T;
        keys = k > keys ? k : keys;
    }
    float *base = (float *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
    const int64_t qb = q_block(a);
    actx c = {a, base, (a->S + qb - 1) / qb, qb, a->S == 1 && a->Hq > a->Hkv, x, split_chunks(a, keys), NULL};
    int nth0 = x && x->pool ? x->nth : 1;
    if (c.nck > 1) c.part = base + (size_t)(nth0 > 0 ? nth0 : 1) * thread_floats(a);
    int64_t units = (c.group ? a->B * a->Hkv : a->B * a->Hq * c.nblk) * c.nck;
    double flops = 2.0 * (double)a->B * (double)a->Hq * (double)a->S * (double)a->T * (double)(a->dk + a->dv);
    int nth = x && x->pool && flops >= 1e5 ? x->nth : 1;
    if (nth > units) nth = (int)units;
    wm_pool_run(x ? x->pool : NULL, part, &c, nth);
    if (c.nck > 1) {
        int n2 = nth < split_base(a) ? nth : (int)split_base(a);
        wm_pool_run(x ? x->pool : NULL, part_combine, &c, n2);
    }
}
