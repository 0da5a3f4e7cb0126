/*
 * attn_rows.c - attention for a few query rows (decode), generic C:
 * scores q . k_j and the probability-weighted sum of value rows
 * (kernels.h: attn_qk, attn_pv), with float32 or float16 (_h) keys and
 * values; the key panels of whole-sequence attention (wm_attn_pack_k, one
 * layout for every table), the naive scores against them
 * (attn_qk_packed) and their unnormalized online softmax (attn_exp_rows). The AVX2 versions are attn_rows_avx2.c.
 */
#include <math.h>
#include <string.h>

#include "core/half.h"
#include "kernels/kernels_impl.h"

/* element i of a key/value row: float32, or float16 when h */
static inline float kv_at(const void *p, int64_t i, int h) {
    return h ? wm_f16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static inline void qk_rows(int64_t m, int64_t n, int64_t d, const float *q, int64_t ldq, const void *k, int64_t ldk,
                           float scale, float *s, int64_t lds, int h) {
    size_t es = h ? 2 : 4;
    for (int64_t r = 0; r < m; r++)
        for (int64_t j = 0; j < n; j++) {
            const float *a = q + r * ldq;
            const void *b = (const uint8_t *)k + (size_t)(j * ldk) * es;
            float acc = 0.0f;
            for (int64_t c = 0; c < d; c++) acc += a[c] * kv_at(b, c, h);
            s[r * lds + j] = scale * acc;
        }
}

static inline void pv_rows(int64_t m, int64_t n, int64_t d, const float *p, int64_t ldp, const void *v, int64_t ldv,
                           float *o, int64_t ldo, int h) {
    size_t es = h ? 2 : 4;
    for (int64_t r = 0; r < m; r++) {
        float *y = o + r * ldo;
        for (int64_t c = 0; c < d; c++) y[c] = 0.0f;
        for (int64_t j = 0; j < n; j++) {
            float w = p[r * ldp + j];
            const void *x = (const uint8_t *)v + (size_t)(j * ldv) * es;
            for (int64_t c = 0; c < d; c++) y[c] += w * kv_at(x, c, h);
        }
    }
}

static void g_attn_qk(int64_t m, int64_t n, int64_t d, const float *q, int64_t ldq, const float *k, int64_t ldk,
                      float scale, float *s, int64_t lds, const void *pf, int64_t pf_ld, int64_t pf_d) {
    (void)pf, (void)pf_ld, (void)pf_d; /* no prefetch in the reference */
    qk_rows(m, n, d, q, ldq, k, ldk, scale, s, lds, 0);
}

static void g_attn_qk_h(int64_t m, int64_t n, int64_t d, const float *q, int64_t ldq, const uint16_t *k, int64_t ldk,
                        float scale, float *s, int64_t lds, const void *pf, int64_t pf_ld, int64_t pf_d) {
    (void)pf, (void)pf_ld, (void)pf_d;
    qk_rows(m, n, d, q, ldq, k, ldk, scale, s, lds, 1);
}

static void g_attn_pv(int64_t m, int64_t n, int64_t d, const float *p, int64_t ldp, const float *v, int64_t ldv,
                      float *o, int64_t ldo) {
    pv_rows(m, n, d, p, ldp, v, ldv, o, ldo, 0);
}

static void g_attn_pv_h(int64_t m, int64_t n, int64_t d, const float *p, int64_t ldp, const uint16_t *v, int64_t ldv,
                        float *o, int64_t ldo) {
    pv_rows(m, n, d, p, ldp, v, ldv, o, ldo, 1);
}

size_t wm_attn_pack_k_floats(int64_t n, int64_t d) {
    return (size_t)((n + WM_ATTN_KPANEL - 1) / WM_ATTN_KPANEL) * (size_t)(d * WM_ATTN_KPANEL);
}

void wm_attn_pack_k(int64_t n, int64_t d, const float *k, int64_t ldk, float *dst) {
    wm_kernels_get()->attn_pack_k(n, d, k, ldk, dst);
}

static void g_attn_pack_k(int64_t n, int64_t d, const float *k, int64_t ldk, float *dst) {
    for (int64_t j0 = 0; j0 < n; j0 += WM_ATTN_KPANEL, dst += d * WM_ATTN_KPANEL) {
        int64_t w = n - j0 < WM_ATTN_KPANEL ? n - j0 : WM_ATTN_KPANEL;
        if (w < WM_ATTN_KPANEL) memset(dst, 0, (size_t)(d * WM_ATTN_KPANEL) * sizeof *dst);
        for (int64_t i = 0; i < w; i++) {
            const float *kr = k + (j0 + i) * ldk;
            for (int64_t c = 0; c < d; c++) dst[c * WM_ATTN_KPANEL + i] = kr[c];
        }
    }
}

static void g_attn_qk_packed(int64_t m, int64_t n, int64_t d, const float *q, int64_t ldq, const float *kp,
                             float scale, float *s, int64_t lds) {
    for (int64_t r = 0; r < m; r++)
        for (int64_t j = 0; j < n; j++) {
            const float *pj = kp + (j / WM_ATTN_KPANEL) * d * WM_ATTN_KPANEL + j % WM_ATTN_KPANEL;
            float acc = 0.0f;
            for (int64_t c = 0; c < d; c++) acc += q[r * ldq + c] * pj[c * WM_ATTN_KPANEL];
            s[r * lds + j] = scale * acc;
        }
}

static void g_attn_exp_rows(int64_t m, int64_t n, float *s, int64_t lds, float *mx, float *sum, float *alpha) {
    for (int64_t r = 0; r < m; r++) {
        float *x = s + r * lds, m1 = mx[r], acc = 0.0f;
        for (int64_t j = 0; j < n; j++) m1 = x[j] > m1 ? x[j] : m1;
        float ref = m1 == -INFINITY ? 0.0f : m1; /* all -inf so far: terms 0, sum 0 */
        for (int64_t j = 0; j < n; j++) acc += x[j] = expf(x[j] - ref);
        alpha[r] = mx[r] == -INFINITY ? 0.0f : expf(mx[r] - m1);
        sum[r] = sum[r] * alpha[r] + acc;
        mx[r] = m1;
    }
}

void wm_attn_rows_fill_generic(wm_kernels *k) {
    k->attn_qk_packed = g_attn_qk_packed;
    k->attn_pack_k = g_attn_pack_k;
    k->attn_exp_rows = g_attn_exp_rows;
    k->attn_qk = g_attn_qk;
    k->attn_pv = g_attn_pv;
    k->attn_qk_h = g_attn_qk_h;
    k->attn_pv_h = g_attn_pv_h;
}
