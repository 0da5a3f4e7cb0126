/*
 * nbits_pk_avx2.c - MatMulNBits with AVX2 on the packed block-32 layout (nbits_impl.h): 4-bit codes with the
 * default zero point and int8 activations (accuracy_level 4) at every M, the weights packed once per session.
 * The column kernels on the stored layout are nbits_avx2.c's, which gives the same bits.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "kernels/nbits_impl.h"

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* ------------------------------------------------------------ packed block-32 layout (nbits_impl.h) */

/*
 * The packed layout's super-groups read as two halves of 8 blocks (lane l = block 8h + l): per half, column j's
 * vector t is 32 bytes at (4 j + t) * 4 nb + 32 h. The products of one half, 8 vpmaddubsw results (4 vectors t,
 * low and high nibbles), add up in int16 without overflow (8 * 2 * 15 * 127 < 2^15) and reach int32 in one
 * vpmaddwd: a lane holds its block's whole dot product, so the fold (dot - 8 sum(q), times sw * sa) needs no
 * horizontal adds, and every column takes the values, in the order, of col2_q8_b4 on the plain layout (lane l of the
 * accumulator: blocks l, l + 8, ...), so packed and plain give the same bits. Tiles: one row x the quad's 4
 * columns (decode), or up to 4 rows x 2 columns, the int16 sums and the unpacked codes in registers.
 */
#define WM_PK2_PF 1024 /* decode: prefetch distance in a quad's stream, bytes (as the AVX-512 kernel) */

/* half h of super-group (p, nb) for rows m0 .. m0 + mr and columns j0 .. j0 + nc of the quad; r blocks (8: full) */
static inline __attribute__((always_inline)) void pk2_half(const wm_nbits_q8 *q, int64_t m0, const int mr,
                                                           const uint8_t *p, int64_t nb, int64_t g, int h, int r,
                                                           const int j0, const int nc, const int es, __m256 acc[4][4]) {
    const __m256i nib = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    const __m256i lanes = _mm256_cmpgt_epi32(_mm256_set1_epi32(r), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256i s16[4][4];
    #pragma GCC unroll 4
    for (int i = 0; i < mr; i++)
        #pragma GCC unroll 4
        for (int j = 0; j < nc; j++) s16[i][j] = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int t = 0; t < 4; t++)
        #pragma GCC unroll 4
        for (int j = 0; j < nc; j++) {
            const uint8_t *v = p + (4 * (j0 + j) + t) * 4 * nb + 32 * h;
            __m256i c = r == 8 ? _mm256_loadu_si256((const __m256i *)v) : _mm256_maskload_epi32((const int *)v, lanes);
            __m256i lo = _mm256_and_si256(c, nib), hi = _mm256_and_si256(_mm256_srli_epi16(c, 4), nib);
            #pragma GCC unroll 4
            for (int i = 0; i < mr; i++) {
                const int8_t *x = q->q + (m0 + i) * q->kp + g * 512 + 128 * t + 32 * h;
                __m256i d = _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)x)),
                                             _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(x + 64))));
                s16[i][j] = _mm256_add_epi16(s16[i][j], d);
            }
        }
    const int64_t b0 = 16 * g + 8 * h;
    __m256 sw[4];
    #pragma GCC unroll 4
    for (int j = 0; j < nc; j++) {
        const uint8_t *sp = p + 64 * nb + (j0 + j) * es * nb + es * 8 * h;
        if (es == 2) {
            uint16_t hb[8] = {0};
            if (r == 8) memcpy(hb, sp, 16);
            else memcpy(hb, sp, (size_t)r * 2);
            sw[j] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)hb));
        } else {
            sw[j] = r == 8 ? _mm256_loadu_ps((const float *)sp) : _mm256_maskload_ps((const float *)sp, lanes);
        }
    }
    #pragma GCC unroll 4
    for (int i = 0; i < mr; i++) { /* the activations' scales and sums are zero padded past the last block */
        __m256 sa = _mm256_loadu_ps(q->scale + (m0 + i) * q->kbs + b0);
        __m256i zs = _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(q->sum + (m0 + i) * q->kbs + b0)), 3);
        #pragma GCC unroll 4
        for (int j = 0; j < nc; j++) {
            __m256i dot = _mm256_sub_epi32(_mm256_madd_epi16(s16[i][j], ones), zs); /* exact: |dot| < 2^24 */
            acc[i][j] = _mm256_fmadd_ps(_mm256_mul_ps(sw[j], sa), _mm256_cvtepi32_ps(dot), acc[i][j]);
        }
    }
}

/* rows m0 .. m0 + mr times columns j0 .. j0 + nc of packed quad c (those below N stored) */
static inline __attribute__((always_inline)) void pk2_tile(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t m0,
                                                           const int mr, int64_t c, const int j0, const int nc,
                                                           const int es, int pf) {
    const int64_t kb = q->kb;
    const uint8_t *p = a->packed + WM_NBITS_PK_HEAD + c * wm_nbits_pk_qstride(kb, es);
    __m256 acc[4][4];
    #pragma GCC unroll 4
    for (int i = 0; i < mr; i++)
        #pragma GCC unroll 4
        for (int j = 0; j < nc; j++) acc[i][j] = _mm256_setzero_ps();
    for (int64_t g = 0; 16 * g < kb; g++) {
        int64_t nb = kb - 16 * g < 16 ? kb - 16 * g : 16;
        if (pf)
            for (int l = 0; l < 16 * (64 + 4 * es) / 64; l++) _mm_prefetch((const char *)(p + WM_PK2_PF + 64 * l), _MM_HINT_T0);
        pk2_half(q, m0, mr, p, nb, g, 0, nb < 8 ? (int)nb : 8, j0, nc, es, acc);
        if (nb > 8) pk2_half(q, m0, mr, p, nb, g, 1, nb < 16 ? (int)nb - 8 : 8, j0, nc, es, acc);
        p += nb * (64 + 4 * es);
    }
    #pragma GCC unroll 4
    for (int i = 0; i < mr; i++)
        #pragma GCC unroll 4
        for (int j = 0; j < nc; j++)
            if (4 * c + j0 + j < a->N) a->C[(m0 + i) * a->ldc + 4 * c + j0 + j] = hsum(acc[i][j]);
}

#define WM_PK2_CASE(MR)                                                                                                \
    case MR:                                                                                                           \
        if (es == 2) {                                                                                                 \
            pk2_tile(a, q, m0, MR, c, 0, 2, 2, pf);                                                                    \
            pk2_tile(a, q, m0, MR, c, 2, 2, 2, pf);                                                                    \
        } else {                                                                                                       \
            pk2_tile(a, q, m0, MR, c, 0, 2, 4, pf);                                                                    \
            pk2_tile(a, q, m0, MR, c, 2, 2, 4, pf);                                                                    \
        }                                                                                                              \
        break
/* quad c for rows m0 .. m0 + mr: one row with the 4 columns at once, more rows 2 columns at a time */
static void pk2_quad(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t m0, int mr, int64_t c, int es, int pf) {
    switch (mr) {
    case 1:
        if (es == 2) pk2_tile(a, q, m0, 1, c, 0, 4, 2, pf);
        else pk2_tile(a, q, m0, 1, c, 0, 4, 4, pf);
        break;
        WM_PK2_CASE(2); WM_PK2_CASE(3); WM_PK2_CASE(4);
    default: break;
    }
}
#undef WM_PK2_CASE

/* prep_q8 for block 32 in the packed layout's order (nbits_impl.h), a block at a time in vectors: the same
 * values (amax / 127, RNE, clamp, sums), each block's 32 bytes placed as 8 dwords */
static void prep_sg32(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t m0, int64_t m1) {
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256i evod = _mm256_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15, 0, 2, 4, 6, 1, 3, 5, 7, 8,
                                          10, 12, 14, 9, 11, 13, 15);
    const __m256i lim = _mm256_set1_epi32(127), nlim = _mm256_set1_epi32(-127);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t m = m0; m < m1; m++) {
        const float *x = a->A + m * a->lda;
        int8_t *d = q->q + m * q->kp;
        memset(d + q->kb * 32, 0, (size_t)(q->kp - q->kb * 32)); /* the blocks past the last one */
        memset(q->scale + m * q->kbs + q->kb, 0, (size_t)(q->kbs - q->kb) * sizeof(float));
        memset(q->sum + m * q->kbs + q->kb, 0, (size_t)(q->kbs - q->kb) * sizeof(int32_t));
        for (int64_t b = 0; b < q->kb; b++) {
            int64_t len = a->K - 32 * b < 32 ? a->K - 32 * b : 32;
            float buf[32];
            const float *xb = x + 32 * b;
            if (len < 32) { /* the last block, zero padded */
                memset(buf, 0, sizeof buf);
                memcpy(buf, xb, (size_t)len * sizeof(float));
                xb = buf;
            }
            __m256 v[4];
            for (int i = 0; i < 4; i++) v[i] = _mm256_loadu_ps(xb + 8 * i);
            __m256 mx = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                                      _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
            __m128 h = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
            h = _mm_max_ps(h, _mm_movehl_ps(h, h));
            float amax = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
            float inv = amax > 0 ? 127.0f / amax : 0.0f;
            __m256 vinv = _mm256_set1_ps(inv);
            __m256i qv[4], sum = _mm256_setzero_si256();
            for (int i = 0; i < 4; i++) {
                __m256 r = _mm256_round_ps(_mm256_mul_ps(v[i], vinv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                qv[i] = _mm256_max_epi32(_mm256_min_epi32(_mm256_cvtps_epi32(r), lim), nlim);
                sum = _mm256_add_epi32(sum, qv[i]);
            }
            __m256i by = _mm256_packs_epi16(_mm256_packs_epi32(qv[0], qv[1]), _mm256_packs_epi32(qv[2], qv[3]));
            by = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(by, perm), evod); /* dword 2t + odd: (t, odd) */
            int32_t dw[8];
            _mm256_storeu_si256((__m256i *)dw, by);
            int8_t *base = d + (b >> 4) * 512 + 4 * (b & 15);
            for (int k = 0; k < 8; k++) memcpy(base + 128 * (k >> 1) + 64 * (k & 1), &dw[k], 4);
            __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
            q->scale[m * q->kbs + b] = amax / 127.0f;
            q->sum[m * q->kbs + b] = _mm_cvtsi128_si32(s4);
        }
    }
}

/* the packed path: int8 activations in the layout's order, at every M */
void wm_nbits_packed_avx2(const wm_nbits_args *a, int ith, int nth) {
    int64_t n0, n1;
    wm_nbits_q8 q;
    if (!wm_nbits_begin(a, ith, nth, prep_sg32, &q, &n0, &n1)) return;
    const int es = a->packed[0], pf = a->M <= 4; /* decode: the codes stream from memory; fetch ahead */
    for (int64_t c = n0 / 4; c < (n1 + 3) / 4; c++)
        for (int64_t m0 = 0; m0 < a->M; m0 += 4) pk2_quad(a, &q, m0, a->M - m0 < 4 ? (int)(a->M - m0) : 4, c, es, pf);
    wm_epilogue_apply(&a->ep, &wm_gemm_ukr_avx2, a->C, a->ldc, 0, a->M, n0, n1);
}
