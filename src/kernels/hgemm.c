/*
 * hgemm.c - fp16-weight GEMM/GEMV, generic C. Small M: a GEMV that converts
 * each half weight as it reads it; large M: the SGEMM driver with B panels
 * converted to fp32 as they are packed.
 */
#include <string.h>

#include "kernels/kernels_impl.h"

size_t wm_hgemm_workspace_size(const wm_hgemm_args *a, int nth) {
    wm_sgemm_args s = {0};
    s.M = a->M;
    s.N = a->N;
    s.K = a->K;
    return wm_sgemm_workspace_size(&s, nth);
}

size_t wm_hgemm_pack_b_size(int64_t K, int64_t N) {
    return K > 0 && N > 0 ? (size_t)((N + WM_HP - 1) / WM_HP) * (size_t)K * WM_HP * sizeof(uint16_t) : 0;
}

void wm_hgemm_pack_b(int trans_b, int64_t K, int64_t N, const uint16_t *B, int64_t ldb, uint16_t *packed) {
    wm_hgemm_pack_b_share(trans_b, K, N, B, ldb, packed, 0, 1);
}

void wm_hgemm_pack_b_share(int trans_b, int64_t K, int64_t N, const uint16_t *B, int64_t ldb, uint16_t *packed,
                           int ith, int nth) {
    int64_t p0, p1;
    wm_split_units((N + WM_HP - 1) / WM_HP, 1, ith, nth, &p0, &p1);
    for (int64_t p = p0; p < p1; p++) {
        uint16_t *d = packed + p * K * WM_HP;
        int64_t j0 = p * WM_HP, nv = N - j0 < WM_HP ? N - j0 : WM_HP;
        if (trans_b) {
            for (int64_t j = 0; j < WM_HP; j++)
                for (int64_t k = 0; k < K; k++) d[k * WM_HP + j] = j < nv ? B[(j0 + j) * ldb + k] : 0;
        } else {
            for (int64_t k = 0; k < K; k++) {
                memcpy(d + k * WM_HP, B + k * ldb + j0, (size_t)nv * sizeof(uint16_t));
                if (nv < WM_HP) memset(d + k * WM_HP + nv, 0, (size_t)(WM_HP - nv) * sizeof(uint16_t));
            }
        }
    }
}

void wm_bsrc_pack_hp(const wm_bsrc *s, int64_t k0, int64_t kc, int64_t n0, int64_t nc, float *dst, int64_t pstride) {
    const uint16_t *P = s->p;
    for (int64_t p = 0; p * WM_NR < nc; p++) {
        int64_t j = n0 + p * WM_NR; /* a multiple of 16: one quarter of a 64-column panel */
        const uint16_t *src = P + (j / WM_HP) * s->ld * WM_HP + k0 * WM_HP + j % WM_HP;
        float *d = dst + p * pstride;
        for (int64_t k = 0; k < kc; k++)
            for (int64_t i = 0; i < WM_NR; i++) d[k * WM_NR + i] = wm_half_to_float(src[k * WM_HP + i]);
    }
}

static void hgemm_big(const wm_gemm_ukr *u, const wm_hgemm_args *a, int ith, int nth) {
    wm_sgemm_args s = {0};
    s.M = a->M;
    s.N = a->N;
    s.K = a->K;
    s.alpha = 1.0f;
    s.A = a->A;
    s.lda = a->lda;
    s.C = a->C;
    s.ldc = a->ldc;
    s.ep = a->ep;
    s.work = a->work;
    wm_bsrc src = {wm_bsrc_pack_f16, a->B, a->ldb, a->trans_b, NULL};
    if (a->packed_b) src = (wm_bsrc){wm_bsrc_pack_hp, a->packed_b, a->K, 0, NULL};
    wm_gemm_drive(u, &s, &src, ith, nth);
}

void wm_hgemm_generic(const wm_hgemm_args *a, int ith, int nth) {
    if (a->M <= 0 || a->N <= 0) return;
    if (a->M >= WM_HGEMM_BIG_M) {
        hgemm_big(&wm_gemm_ukr_generic, a, ith, nth);
        return;
    }
    int64_t n0, n1;
    wm_split_units(a->N, WM_NR, ith, nth, &n0, &n1);
    if (n0 >= n1) return;
    for (int64_t m = 0; m < a->M; m++) {
        const float *x = a->A + m * a->lda;
        float *c = a->C + m * a->ldc;
        if (a->packed_b) {
            for (int64_t n = n0; n < n1; n++) {
                const uint16_t *col = a->packed_b + (n / WM_HP) * a->K * WM_HP + n % WM_HP;
                float s = 0;
                for (int64_t k = 0; k < a->K; k++) s += x[k] * wm_half_to_float(col[k * WM_HP]);
                c[n] = s;
            }
        } else if (!a->trans_b) {
            for (int64_t nb = n0; nb < n1; nb += 256) {
                int64_t nc = n1 - nb < 256 ? n1 - nb : 256;
                float acc[256] = {0};
                for (int64_t k = 0; k < a->K; k++) {
                    const uint16_t *row = a->B + k * a->ldb + nb;
                    for (int64_t j = 0; j < nc; j++) acc[j] += x[k] * wm_half_to_float(row[j]);
                }
                for (int64_t j = 0; j < nc; j++) c[nb + j] = acc[j];
            }
        } else {
            for (int64_t n = n0; n < n1; n++) {
                const uint16_t *row = a->B + n * a->ldb;
                float s = 0;
                for (int64_t k = 0; k < a->K; k++) s += x[k] * wm_half_to_float(row[k]);
                c[n] = s;
            }
        }
    }
    wm_epilogue_apply(&a->ep, &wm_gemm_ukr_generic, a->C, a->ldc, 0, a->M, n0, n1);
}
