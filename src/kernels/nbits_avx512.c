/*
 * nbits_avx512.c - MatMulNBits with AVX-512 VNNI: 4-bit codes with the default
 * zero point (symmetric RTN, no zero_points input), block size >= 32, int8
 * activations (accuracy_level 4), for every M (decode and prefill). Anything
 * else goes to the AVX2 kernel.
 *
 * Activations: each share quantizes all rows of A per block (amax / 127, RNE,
 * as wm_ref_nbits_q8) and keeps per row and block the scale and the
 * correction -zp * sum(q). The dot is vpdpbusd (u8 codes x s8 activations,
 * exact int32); the accumulator starts from the corrections, so a block's
 * lanes add up to sum (code - zp) * q, scaled by sa * sw of the block in fp32.
 *
 * Block 32 ("super-groups"): 16 blocks (256 code bytes per column) at a time,
 * lane L = block L. The four 64-byte loads of a column are transposed with
 * eight two-source dword permutes so that vector t holds dword t (elements
 * 8t..8t+7) of every block; its low nibbles meet the activations' even
 * elements and its high nibbles the odd ones. A lane sums a whole block, so the
 * float fold (convert, scale, add) comes once per 512 elements instead of once
 * per 128. Activation layout per super-group: 8 vectors (t, low/high), lane L
 * byte u = element 8t + 2u (+1 for high) of block L.
 * Larger blocks ("groups"): 128 elements at a time in the codes' own order
 * (per 128 elements the 64 even ones, then the 64 odd ones), lane L = elements
 * 8L..8L+7, so a block covers bs/8 lanes; the fold comes once per 128.
 * Tiles of up to 4 rows x 4 columns: the codes of 4 columns meet every row
 * quad of A (in L2) before the next column quad.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "kernels/nbits_impl.h"
#include "kernels/reduce_avx512.h"

/*
 * Row m of A quantized into q (see the file comment): per block amax / 127 and RNE (wm_ref_nbits_q8), q->sum
 * holding -zp * sum(q). The values of each 16-element chunk go to the kernel's layout: sg32 (block 32) the
 * super-group dwords (dword 2t + h of a block: elements 8t + 2u + h, u = 0..3, at 64 * (2t + h) + 4 * lane),
 * else per 128 elements the 64 even ones, then the 64 odd ones.
 */
static void quant_row(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t m, int sg32) {
    const int64_t bs = a->block_size;
    const float *x = a->A + m * a->lda;
    int8_t *d = q->q + m * q->kp;
    float *sc = q->scale + m * q->kbs;
    int32_t *cr = q->sum + m * q->kbs;
    memset(d, 0, (size_t)q->kp);
    memset(sc, 0, (size_t)q->kbs * sizeof *sc);
    memset(cr, 0, (size_t)q->kbs * sizeof *cr);
    /* evens then odds of each 16 (groups), or of each 8 (super-group dwords) */
    const __m128i evod = sg32 ? _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15)
                              : _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    const __m512i lim = _mm512_set1_epi32(127), nlim = _mm512_set1_epi32(-127);
    for (int64_t b = 0; b < q->kb; b++) {
        int64_t k0 = b * bs, len = a->K - k0 < bs ? a->K - k0 : bs;
        __m512 vmax = _mm512_setzero_ps();
        for (int64_t i = 0; i < len; i += 16) {
            __mmask16 mk = len - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (len - i)) - 1);
            vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_maskz_loadu_ps(mk, x + k0 + i)));
        }
        float amax = _mm512_reduce_max_ps(vmax);
        __m512 inv = _mm512_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
        __m512i vsum = _mm512_setzero_si512();
        for (int64_t i = 0; i < len; i += 16) {
            __mmask16 mk = len - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (len - i)) - 1);
            __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(mk, x + k0 + i), inv)); /* RNE */
            v = _mm512_max_epi32(_mm512_min_epi32(v, lim), nlim);
            vsum = _mm512_add_epi32(vsum, v);
            __m128i by = _mm_shuffle_epi8(_mm512_cvtepi32_epi8(v), evod);
            if (sg32) { /* chunk i / 16 of the block: dwords 4 (i / 16) .. + 3 */
                int32_t dw[4];
                _mm_storeu_si128((__m128i *)dw, by);
                int8_t *base = d + (b >> 4) * 512 + 4 * (b & 15) + 64 * 4 * (i >> 4);
                for (int v4 = 0; v4 < 4; v4++) memcpy(base + 64 * v4, &dw[v4], 4);
            } else {
                int64_t e = k0 + i, g = e & ~(int64_t)127, off = (e & 127) >> 1;
                _mm_storel_epi64((__m128i *)(d + g + off), by);
                _mm_storel_epi64((__m128i *)(d + g + 64 + off), _mm_srli_si128(by, 8));
            }
        }
        sc[b] = amax / 127.0f;
        cr[b] = -(1 << (a->bits - 1)) * _mm512_reduce_add_epi32(vsum);
    }
}

/* wm_nbits_prep_fn: rows [m0, m1), in the super-group order for block 32 */
static void quant_rows(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; m++) quant_row(a, q, m, a->block_size == 32);
}

/* The super-group transpose: v = a column's 256 code bytes of 16 blocks (4 x 64), o[t] lane L = dword t of
 * block L (see the file comment). */
static inline __attribute__((always_inline)) void sg_transpose(const __m512i v[4], __m512i o[4]) {
    const __m512i IA = _mm512_setr_epi32(0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29);
    const __m512i IB = _mm512_setr_epi32(2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31);
    const __m512i J0 = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i J1 = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    __m512i pa = _mm512_permutex2var_epi32(v[0], IA, v[1]), pb = _mm512_permutex2var_epi32(v[0], IB, v[1]);
    __m512i qa = _mm512_permutex2var_epi32(v[2], IA, v[3]), qb = _mm512_permutex2var_epi32(v[2], IB, v[3]);
    o[0] = _mm512_permutex2var_epi32(pa, J0, qa);
    o[1] = _mm512_permutex2var_epi32(pa, J1, qa);
    o[2] = _mm512_permutex2var_epi32(pb, J0, qb);
    o[3] = _mm512_permutex2var_epi32(pb, J1, qb);
}

/* low and high nibbles of each code byte */
static inline __attribute__((always_inline)) void nibbles(__m512i c, __m512i *lo, __m512i *hi) {
    const __m512i nib = _mm512_set1_epi8(0x0f);
    *lo = _mm512_and_si512(c, nib);
    *hi = _mm512_and_si512(_mm512_srli_epi16(c, 4), nib);
}

/* One super-group of one row and column: acc + float(cr + sum_t lo[t] . x_even[t] + hi[t] . x_odd[t]) * sa * sw,
 * x the row's 512 activations of the super-group (lane L = block L). */
static inline __attribute__((always_inline)) __m512 sg_dot(__m512 acc, __m512i cr, const __m512i lo[4],
                                                           const __m512i hi[4], const int8_t *x, __m512 sa, __m512 sw) {
    __m512i s = cr;
    #pragma GCC unroll 4
    for (int t = 0; t < 4; t++) {
        s = _mm512_dpbusd_epi32(s, lo[t], _mm512_loadu_si512(x + 128 * t));
        s = _mm512_dpbusd_epi32(s, hi[t], _mm512_loadu_si512(x + 128 * t + 64));
    }
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(sa, sw), acc);
}

/* block 32: an mr x nr tile (see the file comment) */
static inline __attribute__((always_inline)) void tile_sg32(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t m0,
                                                            const int mr, int64_t n0, const int nr, int pf) {
    const int64_t kb = q->kb, colbytes = kb * 16, ns = (kb + 15) / 16;
    __m512 acc[4][4];
    #pragma GCC unroll 4
    for (int i = 0; i < mr; i++)
        #pragma GCC unroll 4
        for (int j = 0; j < nr; j++) acc[i][j] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ns; g++) {
        int64_t b0 = g * 16, off = g * 256;
        __mmask16 smk = kb - b0 >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (kb - b0)) - 1);
        __m512 sa[4];
        __m512i cr[4];
        #pragma GCC unroll 4
        for (int i = 0; i < mr; i++) {
            sa[i] = _mm512_loadu_ps(q->scale + (m0 + i) * q->kbs + b0);
            cr[i] = _mm512_loadu_si512(q->sum + (m0 + i) * q->kbs + b0);
        }
        #pragma GCC unroll 4
        for (int j = 0; j < nr; j++) {
            const uint8_t *p = a->B + (n0 + j) * colbytes + off;
            if (pf) {
                _mm_prefetch((const char *)(p + 4 * colbytes), _MM_HINT_T0);
                _mm_prefetch((const char *)(p + 4 * colbytes + 64), _MM_HINT_T0);
                _mm_prefetch((const char *)(p + 4 * colbytes + 128), _MM_HINT_T0);
                _mm_prefetch((const char *)(p + 4 * colbytes + 192), _MM_HINT_T0);
            }
            __m512i v[4];
            #pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                int64_t o = off + 64 * k, left = colbytes - o;
                v[k] = left >= 64 ? _mm512_loadu_si512(p + 64 * k)
                       : left > 0 ? _mm512_maskz_loadu_epi8(((__mmask64)1 << left) - 1, p + 64 * k)
                                  : _mm512_setzero_si512();
            }
            __m512i o4[4], lo[4], hi[4];
            sg_transpose(v, o4);
            #pragma GCC unroll 4
            for (int t = 0; t < 4; t++) nibbles(o4[t], &lo[t], &hi[t]);
            __m512 sw = a->scales_h ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(smk, a->scales_h + (n0 + j) * kb + b0))
                                    : _mm512_maskz_loadu_ps(smk, a->scales + (n0 + j) * kb + b0);
            #pragma GCC unroll 4
            for (int i = 0; i < mr; i++)
                acc[i][j] = sg_dot(acc[i][j], cr[i], lo, hi, q->q + (m0 + i) * q->kp + g * 512, sa[i], sw);
        }
    }
    #pragma GCC unroll 4
    for (int i = 0; i < mr; i++)
        #pragma GCC unroll 4
        for (int j = 0; j < nr; j++) a->C[(m0 + i) * a->ldc + n0 + j] = _mm512_reduce_add_ps(acc[i][j]);
}

/* wm_nbits_pack_sg32's loop, the full super-groups transposed as tile_sg32 does (eight permutes per column) */
static void sg_transpose_store(const uint8_t *col, uint8_t *out) {
    __m512i v[4], o[4];
    for (int k = 0; k < 4; k++) v[k] = _mm512_loadu_si512(col + 64 * k);
    sg_transpose(v, o);
    for (int t = 0; t < 4; t++) _mm512_storeu_si512(out + 64 * t, o[t]);
}

void wm_nbits_pack_avx512(const wm_nbits_args *a, uint8_t *dst, int ith, int nth) {
    wm_nbits_pack_sg32_tr(a, dst, ith, nth, sg_transpose_store);
}

#define WM_PK_PF 1024 /* decode: prefetch distance in a quad's stream (bytes; 512-2048 measured alike, none 15% slower) */

/* Pieces of one super-group of a packed quad (nb blocks; full: 16, else the lanes of mask mk): the prefetch of
 * the stream WM_PK_PF bytes ahead (pf), vector t of column j's codes as low and high nibbles, and column j's
 * weight scales as floats (es: 2 halves, 4 floats). */
static inline __attribute__((always_inline)) void pk_prefetch(const uint8_t *p, const int es, int pf) {
    if (pf)
        for (int l = 0; l < 16 * (64 + 4 * es) / 64; l++) _mm_prefetch((const char *)(p + WM_PK_PF + 64 * l), _MM_HINT_T0);
}

static inline __attribute__((always_inline)) void pk_codes(const uint8_t *p, int64_t nb, const int full,
                                                           __mmask16 mk, int j, int t, __m512i *lo, __m512i *hi) {
    const uint8_t *v = p + (4 * j + t) * 4 * nb;
    nibbles(full ? _mm512_loadu_si512(v) : _mm512_maskz_loadu_epi32(mk, v), lo, hi);
}

static inline __attribute__((always_inline)) __m512 pk_wscales(const uint8_t *p, int64_t nb, const int full,
                                                               __mmask16 mk, int j, const int es) {
    const uint8_t *sp = p + 64 * nb + j * es * nb;
    return es == 2 ? _mm512_cvtph_ps(full ? _mm256_loadu_si256((const __m256i *)sp) : _mm256_maskz_loadu_epi16(mk, sp))
                   : (full ? _mm512_loadu_ps(sp) : _mm512_maskz_loadu_ps(mk, sp));
}

/* one super-group of a packed quad for rows m0 .. m0 + mr (full: nb = 16), a vector t at a time: vector t of
 * the 4 columns is unpacked once and meets every row before vector t + 1: the 4 x mr integer sums are independent
 * chains, and each activation vector is loaded once for the 4 columns. Per (row, column) the same integer sum and
 * float fold as sg_dot. Decode too: a column at a time instead (each activation vector loaded 4 times, one chain
 * of 8 vpdpbusd per column) was 3-9% slower with the weights in cache (one thread, 896 x 512 .. 4864 x 128; stop 24). */
static inline __attribute__((always_inline)) void pk_step_rows(const wm_nbits_q8 *q, int64_t m0, const int mr,
                                                          const uint8_t *p, int64_t b0, int64_t nb, const int full,
                                                          const int es, int pf, __m512 acc[4][4]) {
    const __mmask16 mk = full ? (__mmask16)0xffff : (__mmask16)((1u << nb) - 1);
    if (full) nb = 16;
    pk_prefetch(p, es, pf);
    __m512i s[4][4];
    #pragma GCC unroll 4
    for (int i = 0; i < mr; i++) {
        __m512i cr = _mm512_loadu_si512(q->sum + (m0 + i) * q->kbs + b0);
        #pragma GCC unroll 4
        for (int j = 0; j < 4; j++) s[i][j] = cr;
    }
    #pragma GCC unroll 4
    for (int t = 0; t < 4; t++) {
        __m512i lo[4], hi[4];
        #pragma GCC unroll 4
        for (int j = 0; j < 4; j++) pk_codes(p, nb, full, mk, j, t, &lo[j], &hi[j]);
        #pragma GCC unroll 4
        for (int i = 0; i < mr; i++) {
            const int8_t *x = q->q + (m0 + i) * q->kp + b0 * 32 + 128 * t;
            __m512i xe = _mm512_loadu_si512(x), xo = _mm512_loadu_si512(x + 64);
            #pragma GCC unroll 4
            for (int j = 0; j < 4; j++) s[i][j] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(s[i][j], lo[j], xe), hi[j], xo);
        }
    }
    #pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m512 sw = pk_wscales(p, nb, full, mk, j, es);
        #pragma GCC unroll 4
        for (int i = 0; i < mr; i++) {
            __m512 sa = _mm512_loadu_ps(q->scale + (m0 + i) * q->kbs + b0);
            acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[i][j]), _mm512_mul_ps(sa, sw), acc[i][j]);
        }
    }
}

/* The sums of v[0..3] (one row: mr = 1): quarter q, lane 0 = the sum of v[q], in the pairs and order of reduce16 */
static inline __attribute__((always_inline)) __m512 reduce4(const __m512 v[4]) {
    __m512 c0 = _mm512_add_ps(_mm512_shuffle_f32x4(v[0], v[1], 0x44), _mm512_shuffle_f32x4(v[0], v[1], 0xee));
    __m512 c1 = _mm512_add_ps(_mm512_shuffle_f32x4(v[2], v[3], 0x44), _mm512_shuffle_f32x4(v[2], v[3], 0xee));
    __m512 e = _mm512_add_ps(_mm512_shuffle_f32x4(c0, c1, 0x88), _mm512_shuffle_f32x4(c0, c1, 0xdd));
    __m512 g = _mm512_add_ps(e, _mm512_permute_ps(e, 0x4e)); /* lane 0: 0 + 2, lane 1: 1 + 3 */
    return _mm512_add_ps(g, _mm512_permute_ps(g, 0xb1));    /* lane 0: (0 + 2) + (1 + 3) */
}

/* The sums of v[0..7] (two rows: mr = 2): quarter q, lane 0 = the sum of v[q], lane 2 = that of v[4 + q] */
static inline __attribute__((always_inline)) __m512 reduce8(const __m512 v[8]) {
    __m512 c[4];
    for (int p = 0; p < 4; p++)
        c[p] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0x44), _mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0xee));
    __m512 e0 = _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], 0x88), _mm512_shuffle_f32x4(c[0], c[1], 0xdd));
    __m512 e1 = _mm512_add_ps(_mm512_shuffle_f32x4(c[2], c[3], 0x88), _mm512_shuffle_f32x4(c[2], c[3], 0xdd));
    __m512 g = _mm512_add_ps(_mm512_shuffle_ps(e0, e1, 0x44), _mm512_shuffle_ps(e0, e1, 0xee));
    return _mm512_add_ps(g, _mm512_permute_ps(g, 0xb1));
}

/* rows m0 .. m0 + mr times packed column quad c (columns 4c .. 4c + 3 below N) */
static inline __attribute__((always_inline)) void tile_pk(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t m0,
                                                          const int mr, int64_t c, const int es, int pf) {
    const int64_t kb = q->kb, gbytes = 16 * (64 + 4 * es), full = kb / 16;
    const uint8_t *p = a->packed + WM_NBITS_PK_HEAD + c * wm_nbits_pk_qstride(kb, es);
    __m512 acc[4][4];
    #pragma GCC unroll 4
    for (int i = 0; i < mr; i++)
        #pragma GCC unroll 4
        for (int j = 0; j < 4; j++) acc[i][j] = _mm512_setzero_ps();
    for (int64_t g = 0; g < full; g++, p += gbytes) pk_step_rows(q, m0, mr, p, 16 * g, 16, 1, es, pf, acc);
    if (kb > 16 * full) pk_step_rows(q, m0, mr, p, 16 * full, kb - 16 * full, 0, es, pf, acc);
    int nc = a->N - 4 * c < 4 ? (int)(a->N - 4 * c) : 4;
    if (mr >= 3) { /* all sums at once: lane 4i + j = row i, column j */
        __m512 v[16];
        #pragma GCC unroll 4
        for (int i = 0; i < 4; i++)
            #pragma GCC unroll 4
            for (int j = 0; j < 4; j++) v[4 * j + i] = i < mr ? acc[i][j] : _mm512_setzero_ps();
        __m512 r = wm_reduce16_ps(v);
        const __mmask8 cm = (__mmask8)((1u << nc) - 1);
        _mm_mask_storeu_ps(a->C + m0 * a->ldc + 4 * c, cm, _mm512_castps512_ps128(r));
        _mm_mask_storeu_ps(a->C + (m0 + 1) * a->ldc + 4 * c, cm, _mm512_extractf32x4_ps(r, 1));
        _mm_mask_storeu_ps(a->C + (m0 + 2) * a->ldc + 4 * c, cm, _mm512_extractf32x4_ps(r, 2));
        if (mr == 4) _mm_mask_storeu_ps(a->C + (m0 + 3) * a->ldc + 4 * c, cm, _mm512_extractf32x4_ps(r, 3));
        return;
    }
    const __mmask8 cm = (__mmask8)((1u << nc) - 1);
    const __m512i l0 = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    if (mr == 2) {
        __m512 v[8] = {acc[0][0], acc[0][1], acc[0][2], acc[0][3], acc[1][0], acc[1][1], acc[1][2], acc[1][3]};
        __m512 r = reduce8(v);
        const __m512i l2 = _mm512_setr_epi32(2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
        _mm_mask_storeu_ps(a->C + m0 * a->ldc + 4 * c, cm, _mm512_castps512_ps128(_mm512_permutexvar_ps(l0, r)));
        _mm_mask_storeu_ps(a->C + (m0 + 1) * a->ldc + 4 * c, cm, _mm512_castps512_ps128(_mm512_permutexvar_ps(l2, r)));
    } else {
        __m512 v[4] = {acc[0][0], acc[0][1], acc[0][2], acc[0][3]};
        _mm_mask_storeu_ps(a->C + m0 * a->ldc + 4 * c, cm, _mm512_castps512_ps128(_mm512_permutexvar_ps(l0, reduce4(v))));
    }
}

#define WM_PK_CASE(MR)                                                                                                 \
    case MR:                                                                                                           \
        if (es == 2) tile_pk(a, q, m0, MR, c, 2, pf);                                                                  \
        else tile_pk(a, q, m0, MR, c, 4, pf);                                                                          \
        break
static void tile_pk_any(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t m0, int mr, int64_t c, int es, int pf) {
    switch (mr) {
        WM_PK_CASE(4); WM_PK_CASE(3); WM_PK_CASE(2); WM_PK_CASE(1);
    default: break;
    }
}
#undef WM_PK_CASE

/* per-call constants of the group kernel: lane -> block of the lane's 8 elements within a 128-group */
typedef struct vctx {
    int64_t kb, colbytes, ng, bpg; /* blocks, bytes per column, 128-groups, blocks per group (0: bs > 128) */
    __m512i idx;                   /* lane L -> 8L / bs (0 when bs >= 128) */
    __mmask16 first;               /* lanes that start a block (bs <= 128) */
} vctx;

static inline __attribute__((always_inline)) void tile(const wm_nbits_args *a, const wm_nbits_q8 *q, const vctx *t,
                                                       int64_t m0, const int mr, int64_t n0, const int nr, int pf) {
    __m512 acc[4][4];
    #pragma GCC unroll 4
    for (int i = 0; i < mr; i++)
        #pragma GCC unroll 4
        for (int j = 0; j < nr; j++) acc[i][j] = _mm512_setzero_ps();
    const uint8_t *col = a->B + n0 * t->colbytes;
    const float *scw = a->scales + n0 * t->kb;
    for (int64_t g = 0; g < t->ng; g++) {
        int64_t b0 = t->bpg ? g * t->bpg : g * 128 / a->block_size, off = g * 64;
        __mmask16 first = t->bpg ? t->first : (__mmask16)((g * 128) % a->block_size == 0);
        __mmask16 smk = t->kb - b0 >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (t->kb - b0)) - 1);
        __mmask64 cmk = t->colbytes - off >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (t->colbytes - off)) - 1);
        __m512i lo[4], hi[4];
        __m512 sw[4];
        #pragma GCC unroll 4
        for (int j = 0; j < nr; j++) {
            const uint8_t *p = col + j * t->colbytes + off;
            if (pf) _mm_prefetch((const char *)(p + 4 * t->colbytes), _MM_HINT_T0);
            nibbles(_mm512_maskz_loadu_epi8(cmk, p), &lo[j], &hi[j]);
            __m512 s16 = a->scales_h ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(smk, a->scales_h + (n0 + j) * t->kb + b0))
                                     : _mm512_maskz_loadu_ps(smk, scw + j * t->kb + b0);
            sw[j] = _mm512_permutexvar_ps(t->idx, s16);
        }
        #pragma GCC unroll 4
        for (int i = 0; i < mr; i++) {
            const int8_t *x = q->q + (m0 + i) * q->kp + g * 128;
            __m512 sa = _mm512_permutexvar_ps(t->idx, _mm512_loadu_ps(q->scale + (m0 + i) * q->kbs + b0));
            __m512i cr = _mm512_maskz_permutexvar_epi32(first, t->idx, _mm512_loadu_si512(q->sum + (m0 + i) * q->kbs + b0));
            __m512i xe = _mm512_loadu_si512(x), xo = _mm512_loadu_si512(x + 64);
            #pragma GCC unroll 4
            for (int j = 0; j < nr; j++) {
                __m512i d = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(cr, lo[j], xe), hi[j], xo);
                acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(sa, sw[j]), acc[i][j]);
            }
        }
    }
    #pragma GCC unroll 4
    for (int i = 0; i < mr; i++)
        #pragma GCC unroll 4
        for (int j = 0; j < nr; j++) a->C[(m0 + i) * a->ldc + n0 + j] = _mm512_reduce_add_ps(acc[i][j]);
}

#define WM_TILE_CASE(MR, NR)                                                                                           \
    case (MR) * 8 + (NR):                                                                                              \
        if (t) tile(a, q, t, m0, MR, n0, NR, pf);                                                                      \
        else tile_sg32(a, q, m0, MR, n0, NR, pf);                                                                      \
        break
/* one tile: the group kernel with t, the block-32 super-group kernel without */
static void tile_any(const wm_nbits_args *a, const wm_nbits_q8 *q, const vctx *t, int64_t m0, int mr, int64_t n0, int nr,
                     int pf) {
    switch (mr * 8 + nr) {
        WM_TILE_CASE(4, 4); WM_TILE_CASE(4, 3); WM_TILE_CASE(4, 2); WM_TILE_CASE(4, 1);
        WM_TILE_CASE(3, 4); WM_TILE_CASE(3, 3); WM_TILE_CASE(3, 2); WM_TILE_CASE(3, 1);
        WM_TILE_CASE(2, 4); WM_TILE_CASE(2, 3); WM_TILE_CASE(2, 2); WM_TILE_CASE(2, 1);
        WM_TILE_CASE(1, 4); WM_TILE_CASE(1, 3); WM_TILE_CASE(1, 2); WM_TILE_CASE(1, 1);
    default: break;
    }
}
#undef WM_TILE_CASE

void wm_nbits_avx512(const wm_nbits_args *a, int ith, int nth) {
    if (!wm_nbits_vnni_ok(a)) {
        wm_nbits_avx2(a, ith, nth);
        return;
    }
    if (a->M <= 0 || a->N <= 0) return;
    int64_t n0, n1;
    wm_nbits_q8 q;
    int sg32 = a->block_size == 32;
    if (!wm_nbits_begin(a, ith, nth, quant_rows, &q, &n0, &n1)) return;
    vctx t;
    t.kb = q.kb;
    t.colbytes = q.kb * a->block_size / 2;
    t.ng = (q.kb * a->block_size + 127) / 128;
    t.bpg = a->block_size <= 128 ? 128 / a->block_size : 0;
    int32_t ix[16];
    __mmask16 first = 0;
    for (int l = 0; l < 16; l++) {
        ix[l] = a->block_size <= 128 ? 8 * l / a->block_size : 0;
        if ((8 * l) % a->block_size == 0) first |= (__mmask16)(1u << l);
    }
    t.idx = _mm512_loadu_si512(ix);
    t.first = first;
    int pf = a->M <= 4; /* decode: the codes stream from memory; fetch the next column quad's */
    if (a->packed && sg32) {
        int es = a->packed[0];
        for (int64_t c = n0 / 4; c < (n1 + 3) / 4; c++)
            for (int64_t m0 = 0; m0 < a->M; m0 += 4) tile_pk_any(a, &q, m0, a->M - m0 < 4 ? (int)(a->M - m0) : 4, c, es, pf);
        wm_epilogue_apply(&a->ep, &wm_gemm_ukr_avx2, a->C, a->ldc, 0, a->M, n0, n1);
        return;
    }
    for (int64_t n = n0; n < n1; n += 4) {
        int nr = n1 - n < 4 ? (int)(n1 - n) : 4;
        for (int64_t m0 = 0; m0 < a->M; m0 += 4) tile_any(a, &q, sg32 ? NULL : &t, m0, a->M - m0 < 4 ? (int)(a->M - m0) : 4, n, nr, pf);
    }
    wm_epilogue_apply(&a->ep, &wm_gemm_ukr_avx2, a->C, a->ldc, 0, a->M, n0, n1);
}
