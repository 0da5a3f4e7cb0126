/*
 * igemm.c - MatMulInteger (8-bit A and B, int32 accumulation, exact), generic
 * C, and the packed-B layout shared with the AVX2 version:
 *   16-column panels of K2 = ceil(K/2) k-pairs of B's own bytes (zero padded):
 *   panel p, pair i, column j at ((p*K2 + i)*16 + j)*2 + {0,1}, widened to
 *   int16 (sign- or zero-extended) by the kernel for AVX2 vpmaddwd (int16 x
 *   int16 pairs summed into int32, exact for 8-bit inputs); then, 64-byte
 *   aligned, B's zero point per column as int32 (16 per panel). The zero points
 *   stay out of the bytes, so B keeps its size (one byte per weight: the read
 *   a decode step is bound by); the kernel subtracts zb[n] * sum_k (a - za).
 *   After the zero points, for the AVX2 decode rows (igemm_ubs_avx2.c): each
 *   column's sum over K of its bytes read as int8 (int32, 16 per panel), then
 *   one byte per panel, 1 when every k-pair of its columns (as int8) is safe
 *   for vpmaddubsw against unsigned A (wm_igemm_pair_safe).
 */
#include <string.h>

#include "kernels/igemm_impl.h"

static size_t panel_bytes(int64_t K, int64_t N) {
    int64_t panels = (N + WM_NR - 1) / WM_NR, k2 = (K + 1) / 2;
    return WM_ALIGN_UP((size_t)panels * (size_t)(k2 > 0 ? k2 : 0) * WM_NR * 2, 64);
}

static int64_t n_panels(int64_t N) { return N > 0 ? (N + WM_NR - 1) / WM_NR : 0; }

size_t wm_igemm_pack_b_size(int64_t K, int64_t N) {
    size_t cols = (size_t)n_panels(N) * WM_NR * sizeof(int32_t);
    return panel_bytes(K, N) + 2 * cols + WM_ALIGN_UP((size_t)n_panels(N), 64); /* zero points, sums, flags */
}

const int32_t *wm_igemm_packed_zp(const void *packed, int64_t K, int64_t N) {
    return (const int32_t *)((const uint8_t *)packed + panel_bytes(K, N));
}

const int32_t *wm_igemm_packed_colsum(const void *packed, int64_t K, int64_t N) {
    return wm_igemm_packed_zp(packed, K, N) + n_panels(N) * WM_NR;
}

const uint8_t *wm_igemm_packed_safe(const void *packed, int64_t K, int64_t N) {
    return (const uint8_t *)(wm_igemm_packed_colsum(packed, K, N) + n_panels(N) * WM_NR);
}

/* vpmaddubsw's int16 sum a0 b0 + a1 b1 of unsigned bytes a0, a1 stays in range for every a iff the positive parts
   of b0, b1 sum to at most 128 and the negative parts too (255 * 128 = 32640; 255 * 129 does not fit) */
int wm_igemm_pair_safe(int8_t b0, int8_t b1) {
    int pos = (b0 > 0 ? b0 : 0) + (b1 > 0 ? b1 : 0), neg = (b0 < 0 ? -b0 : 0) + (b1 < 0 ? -b1 : 0);
    return pos <= 128 && neg <= 128;
}

int32_t wm_igemm_b_at(const void *B, int b_signed, int64_t ldb, int64_t k, int64_t n) {
    return b_signed ? ((const int8_t *)B)[k * ldb + n] : ((const uint8_t *)B)[k * ldb + n];
}

int32_t wm_igemm_a_at(const void *A, int a_signed, int64_t lda, int64_t m, int64_t k) {
    return a_signed ? ((const int8_t *)A)[m * lda + k] : ((const uint8_t *)A)[m * lda + k];
}

/* Packs rows [k0, k0+kc) (kc even unless it reaches K) and columns [n0, n0+nc) into pair panels of bytes. */
void wm_igemm_pack_b_block(const void *B, int64_t ldb, int64_t K, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                           uint8_t *dst, int64_t pstride) {
    int64_t k2 = (kc + 1) / 2;
    const uint8_t *b = B;
    for (int64_t p = 0; p * WM_NR < nc; p++) {
        uint8_t *d = dst + p * pstride;
        for (int64_t i = 0; i < k2; i++)
            for (int64_t j = 0; j < WM_NR; j++)
                for (int h = 0; h < 2; h++) {
                    int64_t k = k0 + 2 * i + h, n = n0 + p * WM_NR + j;
                    d[(i * WM_NR + j) * 2 + h] = k < K && k < k0 + kc && n < n0 + nc ? b[k * ldb + n] : 0;
                }
    }
}

void wm_igemm_pack_b(int64_t K, int64_t N, const void *B, int64_t ldb, int32_t b_zero_point,
                     const int32_t *b_zero_points, void *packed) {
    if (K <= 0 || N <= 0) return;
    wm_igemm_pack_b_block(B, ldb, K, 0, K, 0, N, packed, ((K + 1) / 2) * WM_NR * 2);
    int32_t *zp = (int32_t *)((uint8_t *)packed + panel_bytes(K, N));
    int64_t np = (N + WM_NR - 1) / WM_NR * WM_NR;
    for (int64_t n = 0; n < np; n++) zp[n] = n >= N ? 0 : b_zero_points ? b_zero_points[n] : b_zero_point;
    int32_t *cs = zp + np;
    uint8_t *safe = (uint8_t *)(cs + np);
    const int8_t *b = B;
    memset(cs, 0, (size_t)np * sizeof(int32_t));
    memset(safe, 1, (size_t)(np / WM_NR));
    for (int64_t k = 0; k < K; k++)
        for (int64_t n = 0; n < N; n++) {
            cs[n] += b[k * ldb + n];
            if (!(k & 1) && !wm_igemm_pair_safe(b[k * ldb + n], k + 1 < K ? b[(k + 1) * ldb + n] : 0)) safe[n / WM_NR] = 0;
        }
}

size_t wm_igemm_workspace_size(const wm_igemm_args *a, int nth) {
    if (nth < 1) nth = 1;
    int64_t kc = wm_igemm_kc(a);
    int64_t mc = a->M < WM_MC ? WM_ALIGN_UP(a->M > 0 ? a->M : 1, WM_MR) : WM_MC;
    int64_t nc = a->N < WM_INC ? WM_ALIGN_UP(a->N > 0 ? a->N : 1, WM_NR) : WM_INC;
    size_t per = WM_ALIGN_UP(WM_IGEMM_APACK(mc, kc), 64);                /* A panels */
    if (!a->packed_b) per += WM_ALIGN_UP((size_t)(kc * nc), 64);          /* B block (bytes) */
    per += WM_ALIGN_UP((size_t)(mc * nc) * sizeof(int32_t), 64);          /* int32 block accumulators */
    per += WM_ALIGN_UP((size_t)mc * sizeof(int32_t), 64);                 /* per row: sum over k of (a - za) */
    per += WM_ALIGN_UP((size_t)(kc + 4) * WM_NR * sizeof(int16_t), 64);   /* a B panel widened or regrouped */
    return (per + 128) * (size_t)nth;
}

/* Converts a finished int32 block (rows m0.., columns n0.., ld) to C and/or Cf with the epilogue. */
void wm_igemm_store(const wm_igemm_args *a, const wm_gemm_ukr *u, const int32_t *acc, int64_t ld, int64_t m0,
                    int64_t m1, int64_t n0, int64_t n1) {
    for (int64_t m = m0; m < m1; m++) {
        const int32_t *s = acc + (m - m0) * ld;
        if (a->C) memcpy(a->C + m * a->ldc + n0, s, (size_t)(n1 - n0) * sizeof(int32_t));
        if (a->Cf) {
            float *c = a->Cf + m * a->ldcf + n0;
            for (int64_t n = n0; n < n1; n++)
                c[n - n0] = a->a_scale * a->b_scale[a->b_scale_count == 1 ? 0 : n] * (float)s[n - n0];
        }
    }
    if (a->Cf) wm_epilogue_apply(&a->ep, u, a->Cf, a->ldcf, m0, m1, n0, n1);
}

void wm_igemm_generic(const wm_igemm_args *a, int ith, int nth) {
    if (a->M <= 0 || a->N <= 0) return;
    int64_t n0, n1;
    wm_split_units(a->N, WM_NR, ith, nth, &n0, &n1);
    int64_t k2 = (a->K + 1) / 2;
    const uint8_t *pb = a->packed_b;
    const int32_t *pzp = pb ? wm_igemm_packed_zp(pb, a->K, a->N) : NULL;
    for (int64_t nb = n0; nb < n1; nb += WM_NR) {
        int64_t nc = n1 - nb < WM_NR ? n1 - nb : WM_NR;
        for (int64_t m = 0; m < a->M; m++) {
            int32_t za = a->a_zero_points ? a->a_zero_points[m] : a->a_zero_point;
            int32_t acc[WM_NR] = {0};
            for (int64_t k = 0; k < a->K; k++) {
                int32_t x = wm_igemm_a_at(a->A, a->a_signed, a->lda, m, k) - za;
                for (int64_t j = 0; j < nc; j++) {
                    int64_t n = nb + j;
                    int32_t y;
                    if (pb) {
                        uint8_t v = pb[(((n / WM_NR) * k2 + k / 2) * WM_NR + n % WM_NR) * 2 + (k & 1)];
                        y = (a->b_signed ? (int32_t)(int8_t)v : (int32_t)v) - pzp[n];
                    } else
                        y = wm_igemm_b_at(a->B, a->b_signed, a->ldb, k, n) -
                            (a->b_zero_points ? a->b_zero_points[n] : a->b_zero_point);
                    acc[j] += x * y;
                }
            }
            wm_igemm_store(a, &wm_gemm_ukr_generic, acc, WM_NR, m, m + 1, nb, nb + nc);
        }
    }
}
