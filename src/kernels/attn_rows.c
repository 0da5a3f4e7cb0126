/*
 * attn_rows.c - attention for a few query rows (decode), generic C:
 * scores q . k_j and the probability-weighted sum of value rows
 * (kernels.h: attn_qk, attn_pv). The AVX2 versions are attn_rows_avx2.c.
 */
#include "kernels/kernels_impl.h"

static void g_attn_qk(int64_t m, int64_t n, int64_t d, const float *q, int64_t ldq, const float *k, int64_t ldk,
                      float scale, float *s, int64_t lds) {
    for (int64_t r = 0; r < m; r++)
        for (int64_t j = 0; j < n; j++) {
            const float *a = q + r * ldq, *b = k + j * ldk;
            float acc = 0.0f;
            for (int64_t c = 0; c < d; c++) acc += a[c] * b[c];
            s[r * lds + j] = scale * acc;
        }
}

static void g_attn_pv(int64_t m, int64_t n, int64_t d, const float *p, int64_t ldp, const float *v, int64_t ldv,
                      float *o, int64_t ldo) {
    for (int64_t r = 0; r < m; r++) {
        float *y = o + r * ldo;
        for (int64_t c = 0; c < d; c++) y[c] = 0.0f;
        for (int64_t j = 0; j < n; j++) {
            float w = p[r * ldp + j];
            const float *x = v + j * ldv;
            for (int64_t c = 0; c < d; c++) y[c] += w * x[c];
        }
    }
}

void wm_attn_rows_fill_generic(wm_kernels *k) {
    k->attn_qk = g_attn_qk;
    k->attn_pv = g_attn_pv;
}
