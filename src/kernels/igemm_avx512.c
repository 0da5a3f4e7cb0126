/*
 * igemm_avx512.c - MatMulInteger blocks of more than 6 rows (prefill) with AVX-512 VNNI, for uint8 A (what
 * DynamicQuantizeLinear gives) and int8 B (an int8 build's weights): vpdpbusd multiplies 4 k of uint8 A by
 * int8 B and sums them into int32 for 16 columns at once (exact: no saturation), against 2 k x 8 columns per
 * vpmaddwd of the AVX2 path. A stays raw bytes, so the products are sum_k a * b; A's zero point comes off
 * through B's column sums (za * sum_k b, per block), B's through the driver (zb * sum_k (a - za)), and the
 * int32 results are those of the AVX2 path. The driver and every other case are igemm_avx2.c's.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/igemm_impl.h"

#define IK_INLINE static inline __attribute__((always_inline))

/* A rows [m0, m0+mc) x k [k0, k0+kc) as raw bytes in 6-row panels of 4-k groups: panel i, group t, row r at
   (i * kc4 + t) * 24 + r * 4 (kc4 = ceil(kc/4), zero padded); asum[r] += the row's sum of (a - za). */
static void pack_a_u8(const wm_igemm_args *a, int64_t m0, int64_t mc, int64_t k0, int64_t kc, uint8_t *dst,
                      int32_t *asum) {
    int64_t kc4 = (kc + 3) / 4;
    for (int64_t i = 0; i < mc; i += WM_MR) {
        uint8_t *d = dst + i * kc4 * 4;
        memset(d, 0, (size_t)(kc4 * WM_MR * 4));
        for (int r = 0; r < WM_MR && i + r < mc; r++) {
            int64_t m = m0 + i + r;
            int32_t za = a->a_zero_points ? a->a_zero_points[m] : a->a_zero_point, sum = 0;
            const uint8_t *s = (const uint8_t *)a->A + m * a->lda + k0;
            for (int64_t k = 0; k < kc; k++) {
                d[(k >> 2) * WM_MR * 4 + r * 4 + (k & 3)] = s[k];
                sum += s[k] - za;
            }
            asum[i + r] += sum;
        }
    }
}

/* B's pair panel (kc2 pairs x 16 columns x 2 bytes) as 4-k groups (kc4 x 16 x 4 bytes) in q; B's column sums */
static __m512i quad_panel(const uint8_t *bp, int64_t kc2, uint8_t *q) {
    __m512i sum = _mm512_setzero_si512(), ones = _mm512_set1_epi8(1);
    for (int64_t t = 0; 2 * t < kc2; t++) {
        __m512i x = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(bp + 2 * t * 32)));
        __m512i y = 2 * t + 1 < kc2 ? _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(bp + (2 * t + 1) * 32)))
                                    : _mm512_setzero_si512();
        __m512i v = _mm512_or_si512(x, _mm512_slli_epi32(y, 16));
        _mm512_storeu_si512(q + t * 64, v);
        sum = _mm512_dpbusd_epi32(sum, ones, v);
    }
    return sum;
}

/* rows 0..R-1 of a 6-row A panel times the quad panel: acc rows (ld) [+]= sum_k (a - za) b */
IK_INLINE void ukr(int R, int64_t kc4, const uint8_t *ap, const uint8_t *q, __m512i colsum, const int32_t *za,
                   int32_t *acc, int64_t ld, int first) {
    __m512i c[WM_MR];
    _Pragma("GCC unroll 6") for (int r = 0; r < R; r++) c[r] = _mm512_setzero_si512();
    for (int64_t t = 0; t < kc4; t++) {
        __m512i b = _mm512_loadu_si512(q + t * 64);
        _Pragma("GCC unroll 6") for (int r = 0; r < R; r++) { /* unrolled: c stays in registers */
            int32_t x;
            memcpy(&x, ap + t * WM_MR * 4 + r * 4, 4);
            c[r] = _mm512_dpbusd_epi32(c[r], _mm512_set1_epi32(x), b);
        }
    }
    _Pragma("GCC unroll 6") for (int r = 0; r < R; r++) {
        __m512i v = _mm512_sub_epi32(c[r], _mm512_mullo_epi32(_mm512_set1_epi32(za[r]), colsum));
        int32_t *o = acc + r * ld;
        if (!first) v = _mm512_add_epi32(_mm512_loadu_si512(o), v);
        _mm512_storeu_si512(o, v);
    }
}

#define UKR(R)                                                                                                         \
    static void ukr_##R(int64_t kc4, const uint8_t *ap, const uint8_t *q, __m512i colsum, const int32_t *za,         \
                        int32_t *acc, int64_t ld, int first) {                                                         \
        ukr(R, kc4, ap, q, colsum, za, acc, ld, first);                                                                \
    }
UKR(1) UKR(2) UKR(3) UKR(4) UKR(5) UKR(6)
typedef void (*ukr_fn)(int64_t, const uint8_t *, const uint8_t *, __m512i, const int32_t *, int32_t *, int64_t, int);
static const ukr_fn ukrs[WM_MR] = {ukr_1, ukr_2, ukr_3, ukr_4, ukr_5, ukr_6};

static void panel(const wm_igemm_args *a, int64_t m0, int64_t mc, int64_t kc, const uint8_t *apack,
                  const uint8_t *bpanel, uint8_t *scratch, int32_t *acc, int64_t ld, int first) {
    int64_t kc4 = (kc + 3) / 4;
    __m512i colsum = quad_panel(bpanel, (kc + 1) / 2, scratch);
    for (int64_t i = 0; i < mc; i += WM_MR) {
        int rows = (int)(mc - i < WM_MR ? mc - i : WM_MR);
        int32_t za[WM_MR];
        for (int r = 0; r < rows; r++) za[r] = a->a_zero_points ? a->a_zero_points[m0 + i + r] : a->a_zero_point;
        ukrs[rows - 1](kc4, apack + i * kc4 * 4, scratch, colsum, za, acc + i * ld, ld, first);
    }
}

static const wm_igemm_wide vnni = {pack_a_u8, panel, 0, NULL};

void wm_igemm_avx512(const wm_igemm_args *a, int ith, int nth) { wm_igemm_drive(a, ith, nth, &vnni); }
