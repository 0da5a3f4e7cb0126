/*
 * igemm_avx2.c - MatMulInteger with AVX2: (a - za) as int16 and B's bytes widened
 * to int16, pairs of k multiplied and summed into int32 by vpmaddwd (exact for
 * 8-bit inputs, no saturation unlike vpmaddubsw), in register tiles of up to
 * 6 rows x 16 columns like the SGEMM (a tile of as many rows as are left, so a
 * decode step's one row costs one row of work). B's zero points come off at the
 * end of each block: acc[m][n] -= zb[n] * sum_k (a[m][k] - za[m]).
 * Blocking per share region: n-block (INC) / m-block (MC) / k-block (IKC), the
 * int32 block accumulators in the workspace, stored (int32 and/or scaled float
 * with the epilogue) when the K reduction of the block is done. Blocks of more
 * than 6 rows (prefill) go to igemm_ubs_avx2.c's vpmaddubsw panels (twice the
 * products per instruction, exact by construction), and so do decode steps (up
 * to 6 rows) of uint8 A on packed signed B panels whose pairs are all safe
 * (wm_igemm_ubs_rows_avx2: the panel read as it is, no regrouping); this file
 * keeps the rest (other signedness, plain B, panels with unsafe pairs) and the
 * driver.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/igemm_impl.h"

#define IK_INLINE static inline __attribute__((always_inline))
#define IGEMM_PF 1024 /* bytes ahead: Qwen2.5-0.5B int8 decode 38.5 -> 42.5 tok/s (512: 40.5, 2048: 42.7) */

/* A block rows [m0, m0+mc) x k [k0, k0+kc) minus zero points, as MR-row panels of k-pairs:
 * panel i, pair t, row r at ((i*kc2 + t)*MR + r)*2 + {0,1} (kc2 = ceil(kc/2)); asum[r] += the row's sum. */
static void pack_a(const wm_igemm_args *a, int64_t m0, int64_t mc, int64_t k0, int64_t kc, int16_t *dst,
                   int32_t *asum) {
    int64_t kc2 = (kc + 1) / 2;
    for (int64_t i = 0; i < mc; i += WM_MR) {
        int16_t *d = dst + i * kc2 * 2;
        for (int r = 0; r < WM_MR; r++) {
            int64_t m = m0 + i + r;
            if (i + r >= mc) {
                for (int64_t t = 0; t < kc2; t++) d[(t * WM_MR + r) * 2] = d[(t * WM_MR + r) * 2 + 1] = 0;
                continue;
            }
            int32_t za = a->a_zero_points ? a->a_zero_points[m] : a->a_zero_point, sum = 0;
            if (a->a_signed) {
                const int8_t *s = (const int8_t *)a->A + m * a->lda + k0;
                for (int64_t k = 0; k < kc; k++) sum += d[((k >> 1) * WM_MR + r) * 2 + (k & 1)] = (int16_t)(s[k] - za);
            } else {
                const uint8_t *s = (const uint8_t *)a->A + m * a->lda + k0;
                for (int64_t k = 0; k < kc; k++) sum += d[((k >> 1) * WM_MR + r) * 2 + (k & 1)] = (int16_t)(s[k] - za);
            }
            if (kc & 1) d[((kc >> 1) * WM_MR + r) * 2 + 1] = 0;
            asum[i + r] += sum;
        }
    }
}

enum { B_U8, B_S8, B_I16 }; /* a B panel of unsigned or signed bytes, or one already widened to int16 */

/* 8 columns x a k-pair of B, from byte j of a panel pair (16 bytes, or 16 int16 when widened), as int16 */
IK_INLINE __m256i b_load(const uint8_t *p, int j, int mode) {
    if (mode == B_I16) return _mm256_loadu_si256((const __m256i *)(p + 2 * j));
    __m128i v = _mm_loadu_si128((const __m128i *)(p + j));
    return mode == B_S8 ? _mm256_cvtepi8_epi16(v) : _mm256_cvtepu8_epi16(v);
}

/* A panel of kc2 pairs of bytes widened to int16 once, when several row tiles will read it (the widening
   in the loop cost prefill 16% at 64 rows); one tile of rows (a decode step) widens as it reads. */
static void widen_panel(const uint8_t *bp, int64_t kc2, int sgn, int16_t *dst) {
    for (int64_t t = 0; t < kc2 * WM_NR * 2; t += 32) {
        __m256i lo = b_load(bp + t, 0, sgn ? B_S8 : B_U8), hi = b_load(bp + t, 16, sgn ? B_S8 : B_U8);
        _mm256_storeu_si256((__m256i *)(dst + t), lo);
        _mm256_storeu_si256((__m256i *)(dst + t + 16), hi);
    }
}

/* acc tile (ld) [+]= sum over kc2 pairs, for rows 0..R-1; b panel pairs [t][16][2] (bytes, or int16 for
   B_I16), a panel pairs [t][6][2] */
IK_INLINE void ukr(int R, int mode, int64_t kc2, const int16_t *ap, const uint8_t *bp, int32_t *acc, int64_t ld,
                   int first) {
    __m256i c[WM_MR][2];
    _Pragma("GCC unroll 6") for (int r = 0; r < R; r++) c[r][0] = c[r][1] = _mm256_setzero_si256();
    const int64_t bstep = WM_NR * 2 * (mode == B_I16 ? 2 : 1);
    for (int64_t t = 0; t < kc2; t++) {
        if (mode != B_I16 && !(t & 1)) /* B streams from memory once: a line IGEMM_PF bytes ahead (address as integer) */
            _mm_prefetch((const char *)((uintptr_t)bp + IGEMM_PF), _MM_HINT_T0);
        __m256i b0 = b_load(bp, 0, mode), b1 = b_load(bp, 16, mode); /* columns 0-7 and 8-15, int16 pairs (k, k+1) */
        _Pragma("GCC unroll 6") for (int r = 0; r < R; r++) { /* unrolled: c stays in registers */
            int32_t pr;
            memcpy(&pr, ap + r * 2, 4);
            __m256i x = _mm256_set1_epi32(pr);
            c[r][0] = _mm256_add_epi32(c[r][0], _mm256_madd_epi16(x, b0));
            c[r][1] = _mm256_add_epi32(c[r][1], _mm256_madd_epi16(x, b1));
        }
        ap += WM_MR * 2;
        bp += bstep;
    }
    _Pragma("GCC unroll 6") for (int r = 0; r < R; r++) {
        __m256i *o0 = (__m256i *)(acc + r * ld), *o1 = (__m256i *)(acc + r * ld + 8);
        if (!first) {
            c[r][0] = _mm256_add_epi32(_mm256_loadu_si256(o0), c[r][0]);
            c[r][1] = _mm256_add_epi32(_mm256_loadu_si256(o1), c[r][1]);
        }
        _mm256_storeu_si256(o0, c[r][0]);
        _mm256_storeu_si256(o1, c[r][1]);
    }
}

#define UKR(R, S)                                                                                                      \
    static void ukr_##R##_##S(int64_t kc2, const int16_t *ap, const uint8_t *bp, int32_t *acc, int64_t ld,           \
                              int first) {                                                                             \
        ukr(R, S, kc2, ap, bp, acc, ld, first);                                                                        \
    }
UKR(1, 0) UKR(2, 0) UKR(3, 0) UKR(4, 0) UKR(5, 0) UKR(6, 0)
UKR(1, 1) UKR(2, 1) UKR(3, 1) UKR(4, 1) UKR(5, 1) UKR(6, 1)
UKR(1, 2) UKR(2, 2) UKR(3, 2) UKR(4, 2) UKR(5, 2) UKR(6, 2)

typedef void (*ukr_fn)(int64_t, const int16_t *, const uint8_t *, int32_t *, int64_t, int);
static const ukr_fn ukrs[3][WM_MR] = {{ukr_1_0, ukr_2_0, ukr_3_0, ukr_4_0, ukr_5_0, ukr_6_0},
                                      {ukr_1_1, ukr_2_1, ukr_3_1, ukr_4_1, ukr_5_1, ukr_6_1},
                                      {ukr_1_2, ukr_2_2, ukr_3_2, ukr_4_2, ukr_5_2, ukr_6_2}};

/* wm_igemm_store (the naive form, igemm.c) with the int32 -> float conversion 8 columns at a time, where gcc leaves
   that loop scalar (the scale it reloads might alias C): 4% of whisper-tiny's int8 encoder. The same values bit
   for bit: (a_scale * b_scale[n]) * (float)acc, rounded as the scalar code rounds each product. nc <= WM_INC. */
static void store(const wm_igemm_args *a, const int32_t *acc, int64_t ld, int64_t m0, int64_t m1, int64_t n0,
                  int64_t n1) {
    const int64_t nc = n1 - n0;
    if (!a->Cf || nc > WM_INC) {
        wm_igemm_store(a, &wm_gemm_ukr_avx2, acc, ld, m0, m1, n0, n1);
        return;
    }
    float sc[WM_INC];
    for (int64_t j = 0; j < nc; j++) sc[j] = a->a_scale * a->b_scale[a->b_scale_count == 1 ? 0 : n0 + j];
    for (int64_t m = m0; m < m1; m++) {
        const int32_t *s = acc + (m - m0) * ld;
        if (a->C) memcpy(a->C + m * a->ldc + n0, s, (size_t)nc * sizeof(int32_t));
        float *c = a->Cf + m * a->ldcf + n0;
        int64_t j = 0;
        for (; j + 8 <= nc; j += 8)
            _mm256_storeu_ps(c + j, _mm256_mul_ps(_mm256_loadu_ps(sc + j),
                                                  _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(s + j)))));
        for (; j < nc; j++) c[j] = sc[j] * (float)s[j];
    }
    wm_epilogue_apply(&a->ep, &wm_gemm_ukr_avx2, a->Cf, a->ldcf, m0, m1, n0, n1);
}

void wm_igemm_avx2(const wm_igemm_args *a, int ith, int nth) { wm_igemm_drive(a, ith, nth, &wm_igemm_ubs_avx2); }

void wm_igemm_drive(const wm_igemm_args *a, int ith, int nth, const wm_igemm_wide *wd) {
    if (a->M <= 0 || a->N <= 0) return;
    /* split: whole 16-column units over shares when there are enough, else 6-row units */
    int64_t m0 = 0, m1 = a->M, n0 = 0, n1 = a->N;
    if ((a->N + WM_NR - 1) / WM_NR >= nth) wm_split_units(a->N, WM_NR, ith, nth, &n0, &n1);
    else wm_split_units(a->M, WM_MR, ith, nth, &m0, &m1);
    if (m0 >= m1 || n0 >= n1) return;
    int64_t K = a->K, K2 = (K + 1) / 2;
    int64_t kcmax = wm_igemm_kc(a);
    int64_t mcmax = a->M < WM_MC ? WM_ALIGN_UP(a->M, WM_MR) : WM_MC;
    int64_t ncmax = a->N < WM_INC ? WM_ALIGN_UP(a->N, WM_NR) : WM_INC;
    char *w = wm_work_slice(a->work, wm_igemm_workspace_size(a, nth) / (size_t)nth, ith);
    int16_t *apack = (int16_t *)w;
    w += WM_ALIGN_UP(WM_IGEMM_APACK(mcmax, kcmax), 64);
    uint8_t *bpack = NULL;
    if (!a->packed_b) {
        bpack = (uint8_t *)w;
        w += WM_ALIGN_UP((size_t)(kcmax * ncmax), 64);
    }
    int32_t *acc = (int32_t *)w; /* [mc][ncmax] */
    w += WM_ALIGN_UP((size_t)(mcmax * ncmax) * sizeof(int32_t), 64);
    int32_t *asum = (int32_t *)w; /* [mc] */
    w += WM_ALIGN_UP((size_t)mcmax * sizeof(int32_t), 64);
    int16_t *wide = (int16_t *)w; /* one panel widened: [kc2][16][2] */
    const int32_t *pzp = a->packed_b ? wm_igemm_packed_zp(a->packed_b, K, a->N) : NULL;
    const ukr_fn *fn = ukrs[a->b_signed != 0], *fn16 = ukrs[B_I16];
    const int64_t ld = ncmax;
    /* packed signed B: its per-panel safety flags and column sums, read by the decode rows on vpmaddubsw (uint8 A)
       and by the prefill panels read as packed (no regrouping; wd->panel_safe) */
    const uint8_t *bsafe = a->packed_b && a->b_signed ? wm_igemm_packed_safe(a->packed_b, K, a->N) : NULL;
    const int32_t *pcs = bsafe ? wm_igemm_packed_colsum(a->packed_b, K, a->N) : NULL;
    const uint8_t *safe = a->a_signed ? NULL : bsafe;
    const uint8_t *wsafe = wd && wd->panel_safe ? bsafe : NULL;
    const int64_t aqs = WM_ALIGN_UP(K, 4); /* a row of A's bytes, zero padded to whole 4-k groups (in wide) */
    int zb_any = a->b_zero_point != 0; /* any of B's zero points in [n0, n1) not 0 (a symmetric int8 build: none) */
    const int32_t *zcol = pzp ? pzp : a->b_zero_points;
    for (int64_t n = n0; zcol && !zb_any && n < n1; n++) zb_any = zcol[n] != 0;
    for (int64_t nb = n0; nb < n1; nb += WM_INC) {
        int64_t nc = n1 - nb < WM_INC ? n1 - nb : WM_INC;
        for (int64_t mb = m0; mb < m1; mb += WM_MC) {
            int64_t mc = m1 - mb < WM_MC ? m1 - mb : WM_MC;
            if (K == 0) memset(acc, 0, (size_t)(mc * ld) * sizeof(int32_t));
            memset(asum, 0, (size_t)mc * sizeof(int32_t));
            const int use_wide = wd && mc > WM_MR && kcmax <= WM_IKC && (wd->all_signs || (!a->a_signed && a->b_signed));
            const int32_t zshift = use_wide && !a->b_signed ? 128 : 0; /* all_signs: unsigned B read as b - 128 */
            const int dec = safe && mc <= WM_MR && kcmax >= K; /* one k-block: A's rows whole */
            int32_t za[WM_MR];
            if (dec) {
                uint8_t *aq = (uint8_t *)wide;
                for (int64_t i = 0; i < mc; i++) {
                    memcpy(aq + i * aqs, (const uint8_t *)a->A + (mb + i) * a->lda, (size_t)K);
                    memset(aq + i * aqs + K, 0, (size_t)(aqs - K));
                    za[i] = a->a_zero_points ? a->a_zero_points[mb + i] : a->a_zero_point;
                }
            }
            for (int64_t kb = 0; kb < K; kb += kcmax) {
                int64_t kc = K - kb < kcmax ? K - kb : kcmax, kc2 = (kc + 1) / 2;
                if (use_wide) wd->pack_a(a, mb, mc, kb, kc, (uint8_t *)apack, asum);
                else pack_a(a, mb, mc, kb, kc, apack, asum);
                const uint8_t *bp;
                int64_t pstride;
                if (a->packed_b) {
                    bp = (const uint8_t *)a->packed_b + ((nb / WM_NR) * K2 + kb / 2) * WM_NR * 2;
                    pstride = K2 * WM_NR * 2;
                } else {
                    wm_igemm_pack_b_block(a->B, a->ldb, K, kb, kc, nb, nc, bpack, kc2 * WM_NR * 2);
                    bp = bpack;
                    pstride = kc2 * WM_NR * 2;
                }
                for (int64_t j = 0; j < nc; j += WM_NR) {
                    const uint8_t *pj = bp + (j / WM_NR) * pstride;
                    if (use_wide && wsafe && wsafe[(nb + j) / WM_NR]) {
                        wd->panel_safe(a, mb, mc, kc, (const uint8_t *)apack, pj, pcs + nb + j, acc + j, ld, kb == 0);
                        continue;
                    }
                    if (use_wide) {
                        wd->panel(a, mb, mc, kc, (const uint8_t *)apack, pj, (uint8_t *)wide, acc + j, ld, kb == 0);
                        continue;
                    }
                    if (dec && safe[(nb + j) / WM_NR]) {
                        wm_igemm_ubs_rows_avx2((int)mc, K2, (const uint8_t *)wide, aqs, za, pj, pcs + nb + j, acc + j, ld);
                        continue;
                    }
                    if (mc > WM_MR) widen_panel(pj, kc2, a->b_signed, wide);
                    for (int64_t i = 0; i < mc; i += WM_MR)
                        (mc > WM_MR ? fn16 : fn)[(mc - i < WM_MR ? mc - i : WM_MR) - 1](
                            kc2, apack + i * kc2 * 2, mc > WM_MR ? (const uint8_t *)wide : pj, acc + i * ld + j, ld,
                            kb == 0);
                }
            }
            if (zb_any || zshift) { /* B's zero points */
                const int32_t *zv = pzp ? pzp + nb : a->b_zero_points ? a->b_zero_points + nb : NULL;
                for (int64_t i = 0; i < mc; i++)
                    for (int64_t j = 0; j < nc; j++)
                        acc[i * ld + j] -= ((zv ? zv[j] : a->b_zero_point) - zshift) * asum[i];
            }
            store(a, acc, ld, mb, mb + mc, nb, nb + nc);
        }
    }
}
