/*
 * igemm_avx2.c - MatMulInteger with AVX2: (a - za) and (b - zb) as int16, pairs of
 * k multiplied and summed into int32 by vpmaddwd (exact for 8-bit inputs, no
 * saturation unlike vpmaddubsw), in a 6x16 register tile like the SGEMM.
 * Blocking per share region: n-block (INC) / m-block (MC) / k-block (IKC), the
 * int32 block accumulators in the workspace, stored (int32 and/or scaled float
 * with the epilogue) when the K reduction of the block is done.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/igemm_impl.h"

/* A block rows [m0, m0+mc) x k [k0, k0+kc) minus zero points, as MR-row panels of k-pairs:
 * panel i, pair t, row r at ((i*kc2 + t)*MR + r)*2 + {0,1} (kc2 = ceil(kc/2)). */
static void pack_a(const wm_igemm_args *a, int64_t m0, int64_t mc, int64_t k0, int64_t kc, int16_t *dst) {
    int64_t kc2 = (kc + 1) / 2;
    for (int64_t i = 0; i < mc; i += WM_MR) {
        int16_t *d = dst + i * kc2 * 2;
        for (int r = 0; r < WM_MR; r++) {
            int64_t m = m0 + i + r;
            if (i + r >= mc) {
                for (int64_t t = 0; t < kc2; t++) d[(t * WM_MR + r) * 2] = d[(t * WM_MR + r) * 2 + 1] = 0;
                continue;
            }
            int32_t za = a->a_zero_points ? a->a_zero_points[m] : a->a_zero_point;
            if (a->a_signed) {
                const int8_t *s = (const int8_t *)a->A + m * a->lda + k0;
                for (int64_t k = 0; k < kc; k++) d[((k >> 1) * WM_MR + r) * 2 + (k & 1)] = (int16_t)(s[k] - za);
            } else {
                const uint8_t *s = (const uint8_t *)a->A + m * a->lda + k0;
                for (int64_t k = 0; k < kc; k++) d[((k >> 1) * WM_MR + r) * 2 + (k & 1)] = (int16_t)(s[k] - za);
            }
            if (kc & 1) d[((kc >> 1) * WM_MR + r) * 2 + 1] = 0;
        }
    }
}

#define MADD_ROW(r)                                                                                                    \
    do {                                                                                                               \
        int32_t pr_;                                                                                                   \
        memcpy(&pr_, ap + (r)*2, 4);                                                                                   \
        __m256i a_ = _mm256_set1_epi32(pr_);                                                                           \
        c##r##0 = _mm256_add_epi32(c##r##0, _mm256_madd_epi16(a_, b0));                                               \
        c##r##1 = _mm256_add_epi32(c##r##1, _mm256_madd_epi16(a_, b1));                                               \
    } while (0)

/* acc tile (ld) [+]= sum over kc2 pairs; b panel pairs [t][16][2], a panel pairs [t][6][2] */
static void ukr_i6x16(int64_t kc2, const int16_t *ap, const int16_t *bp, int32_t *acc, int64_t ld, int first) {
    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256i c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int64_t t = 0; t < kc2; t++) {
        /* columns 0-7 and 8-15, each lane an int16 pair (k, k+1) */
        __m256i b0 = _mm256_loadu_si256((const __m256i *)bp), b1 = _mm256_loadu_si256((const __m256i *)(bp + 16));
        MADD_ROW(0);
        MADD_ROW(1);
        MADD_ROW(2);
        MADD_ROW(3);
        MADD_ROW(4);
        MADD_ROW(5);
        ap += WM_MR * 2;
        bp += WM_NR * 2;
    }
    __m256i rows[WM_MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    for (int r = 0; r < WM_MR; r++) {
        __m256i *o0 = (__m256i *)(acc + r * ld), *o1 = (__m256i *)(acc + r * ld + 8);
        if (first) {
            _mm256_storeu_si256(o0, rows[r][0]);
            _mm256_storeu_si256(o1, rows[r][1]);
        } else {
            _mm256_storeu_si256(o0, _mm256_add_epi32(_mm256_loadu_si256(o0), rows[r][0]));
            _mm256_storeu_si256(o1, _mm256_add_epi32(_mm256_loadu_si256(o1), rows[r][1]));
        }
    }
}

void wm_igemm_avx2(const wm_igemm_args *a, int ith, int nth) {
    if (a->M <= 0 || a->N <= 0) return;
    /* split: whole 16-column units over shares when there are enough, else 6-row units */
    int64_t m0 = 0, m1 = a->M, n0 = 0, n1 = a->N;
    if ((a->N + WM_NR - 1) / WM_NR >= nth) wm_split_units(a->N, WM_NR, ith, nth, &n0, &n1);
    else wm_split_units(a->M, WM_MR, ith, nth, &m0, &m1);
    if (m0 >= m1 || n0 >= n1) return;
    int64_t K = a->K, K2 = (K + 1) / 2;
    int64_t kcmax = K < WM_IKC ? WM_ALIGN_UP(K > 0 ? K : 1, 2) : WM_IKC;
    int64_t mcmax = a->M < WM_MC ? WM_ALIGN_UP(a->M, WM_MR) : WM_MC;
    int64_t ncmax = a->N < WM_INC ? WM_ALIGN_UP(a->N, WM_NR) : WM_INC;
    char *w = wm_work_slice(a->work, wm_igemm_workspace_size(a, nth) / (size_t)nth, ith);
    int16_t *apack = (int16_t *)w;
    w += WM_ALIGN_UP((size_t)(mcmax * kcmax) * sizeof(int16_t), 64);
    int16_t *bpack = NULL;
    if (!a->packed_b) {
        bpack = (int16_t *)w;
        w += WM_ALIGN_UP((size_t)(kcmax * ncmax) * sizeof(int16_t), 64);
    }
    int32_t *acc = (int32_t *)w; /* [mc][ncmax] */
    const int64_t ld = ncmax;
    for (int64_t nb = n0; nb < n1; nb += WM_INC) {
        int64_t nc = n1 - nb < WM_INC ? n1 - nb : WM_INC;
        for (int64_t mb = m0; mb < m1; mb += WM_MC) {
            int64_t mc = m1 - mb < WM_MC ? m1 - mb : WM_MC;
            if (K == 0) memset(acc, 0, (size_t)(mc * ld) * sizeof(int32_t));
            for (int64_t kb = 0; kb < K; kb += WM_IKC) {
                int64_t kc = K - kb < WM_IKC ? K - kb : WM_IKC, kc2 = (kc + 1) / 2;
                pack_a(a, mb, mc, kb, kc, apack);
                const int16_t *bp;
                int64_t pstride;
                if (a->packed_b) {
                    bp = (const int16_t *)a->packed_b + ((nb / WM_NR) * K2 + kb / 2) * WM_NR * 2;
                    pstride = K2 * WM_NR * 2;
                } else {
                    wm_igemm_pack_b_block(a->b_signed, a->B, a->ldb, K, a->b_zero_point, a->b_zero_points, kb, kc, nb,
                                          nc, bpack, kc2 * WM_NR * 2);
                    bp = bpack;
                    pstride = kc2 * WM_NR * 2;
                }
                for (int64_t j = 0; j < nc; j += WM_NR)
                    for (int64_t i = 0; i < mc; i += WM_MR)
                        ukr_i6x16(kc2, apack + i * kc2 * 2, bp + (j / WM_NR) * pstride, acc + i * ld + j, ld, kb == 0);
            }
            wm_igemm_store(a, &wm_gemm_ukr_avx2, acc, ld, mb, mb + mc, nb, nb + nc);
        }
    }
}
