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
    int group;      /* one query: units are (b, kv head) with the grouped heads as rows */
    wm_exec *x;     /* GEMM scratch: one slice per thread */
} actx;

/* rows of scores a unit holds */
static int64_t unit_rows(const wm_attn *a) {
    if (a->S == 1 && a->Hq > a->Hkv) return a->Hq / a->Hkv;
    return a->S < WM_ATTN_QBLOCK ? a->S : WM_ATTN_QBLOCK;
}

/* floats of one thread's scratch: scores, and with float16 K/V on the GEMM path their float32 copies */
static size_t unit_floats(const wm_attn *a) {
    size_t T = (size_t)(a->T ? a->T : 1), f = (size_t)unit_rows(a) * T;
    if (a->kv_h16 && unit_rows(a) > WM_ATTN_FEW_ROWS) f += T * (size_t)(a->dk + a->dv);
    return (f + 15) & ~(size_t)15;
}

size_t wm_attn_workspace(const wm_attn *a, int nth) {
    return (size_t)(nth > 0 ? nth : 1) * unit_floats(a) * sizeof(float) + 64;
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

/* One row of scores over keys [t0, t0 + n): masks, softmax (in place); [lo, hi) are the keys not excluded. */
static void row_softmax(const wm_attn *a, int64_t b, int64_t h, int64_t s, int64_t t0, float *row, int64_t n) {
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
        if (hi > lo) wm_kernels_get()->softmax_row(hi - lo, row + (lo - t0), row + (lo - t0), 1.0f, NULL);
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
 * One unit of work: m rows of queries against the keys of one kv head g.
 *   query-block mode: head h, queries s0 .. s0 + m - 1 (rows step q_ss / o_ss);
 *   group mode (one query, grouped heads): query 0 of the grp heads sharing kv head g
 *   (rows step q_sh / o_sh), so each key and value row is read once for all of them.
 */
static void unit(const actx *c, int64_t u, float *sc, int ith) {
    const wm_attn *a = c->a;
    int64_t grp = a->Hq / a->Hkv, b, g, h0, s0, m, qstep, ostep;
    if (c->group) {
        b = u / a->Hkv, g = u % a->Hkv, h0 = g * grp, s0 = 0, m = grp, qstep = a->q_sh, ostep = a->o_sh;
    } else {
        int64_t blk = u % c->nblk, bh = u / c->nblk;
        b = bh / a->Hq, h0 = bh % a->Hq, g = h0 / grp, s0 = blk * WM_ATTN_QBLOCK;
        m = s0 + WM_ATTN_QBLOCK < a->S ? WM_ATTN_QBLOCK : a->S - s0, qstep = a->q_ss, ostep = a->o_ss;
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
    int64_t n = t1 - t0;
    float *o = a->o + b * a->o_sb + h0 * a->o_sh + s0 * a->o_ss;
    const float *qp = a->q + b * a->q_sb + h0 * a->q_sh + s0 * a->q_ss;
    size_t es = a->kv_h16 ? 2 : 4;
    const void *kp = (const uint8_t *)a->k + (size_t)(b * a->k_sb + g * a->k_sh + t0 * a->k_ss) * es;
    const void *vp = (const uint8_t *)a->v + (size_t)(b * a->v_sb + g * a->v_sh + t0 * a->v_ss) * es;
    int few = m <= WM_ATTN_FEW_ROWS; /* decode: row kernels read each key/value row once, no packing */
    const wm_kernels *K = wm_kernels_get();
    int64_t kld = a->k_ss, vld = a->v_ss;
    if (n > 0 && !few && a->kv_h16) { /* float32 copies of the unit's keys and values, after its scores */
        float *kw = sc + (size_t)m * (size_t)n;
        kp = widen_rows(kp, kld, n, a->dk, kw), kld = a->dk;
        vp = widen_rows(vp, vld, n, a->dv, kw + n * a->dk), vld = a->dv;
    }
    if (n > 0 && few && a->kv_h16) K->attn_qk_h(m, n, a->dk, qp, qstep, kp, kld, a->scale, sc, n);
    else if (n > 0 && few) K->attn_qk(m, n, a->dk, qp, qstep, kp, kld, a->scale, sc, n);
    else if (n > 0) {
        wm_gemm_args g1 = {m, n, a->dk, qp, qstep, 0, kp, kld, 1, sc, n, a->scale, 0};
        wm_sgemm_st(c->x, ith, &g1);
    }
    for (int64_t r = 0; r < m; r++)
        row_softmax(a, b, c->group ? h0 + r : h0, c->group ? 0 : s0 + r, t0, sc + r * n, n);
    if (n > 0 && few && a->kv_h16) K->attn_pv_h(m, n, a->dv, sc, n, vp, vld, o, ostep);
    else if (n > 0 && few) K->attn_pv(m, n, a->dv, sc, n, vp, vld, o, ostep);
    else if (n > 0) {
        wm_gemm_args g2 = {m, a->dv, n, sc, n, 0, vp, vld, 0, o, ostep, 1.0f, 0};
        wm_sgemm_st(c->x, ith, &g2);
    } else {
        for (int64_t r = 0; r < m; r++) memset(o + r * ostep, 0, (size_t)a->dv * sizeof *o);
    }
}

static void part(void *arg, int ith, int nth) {
    const actx *c = arg;
    const wm_attn *a = c->a;
    long lo, hi;
    wm_split((long)(c->group ? a->B * a->Hkv : a->B * a->Hq * c->nblk), ith, nth, &lo, &hi);
    float *sc = c->ws + (size_t)ith * unit_floats(a);
    for (long u = lo; u < hi; u++) unit(c, u, sc, ith);
}

void wm_attn_run(const wm_attn *a, wm_exec *x, void *ws) {
    if (!a->B || !a->Hq || !a->S || !a->dv) return;
    actx c = {a, (float *)(((uintptr_t)ws + 63) & ~(uintptr_t)63), (a->S + WM_ATTN_QBLOCK - 1) / WM_ATTN_QBLOCK,
              a->S == 1 && a->Hq > a->Hkv, x};
    int64_t units = c.group ? a->B * a->Hkv : a->B * a->Hq * c.nblk;
    double flops = 2.0 * (double)a->B * (double)a->Hq * (double)a->S * (double)a->T * (double)(a->dk + a->dv);
    int nth = x && x->pool && flops >= 1e5 ? x->nth : 1;
    if (nth > units) nth = (int)units;
    wm_pool_run(x ? x->pool : NULL, part, &c, nth);
}
