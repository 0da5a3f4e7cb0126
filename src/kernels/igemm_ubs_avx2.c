/*
 * igemm_ubs_avx2.c - MatMulInteger blocks of more than 6 rows (prefill) with AVX2 vpmaddubsw, exact.
 *
 * vpmaddubsw multiplies 32 unsigned bytes of A by 32 signed bytes of B and sums pairs into int16 (32 products
 * per instruction, against 16 for vpmaddwd on int16); vpmaddwd by ones then sums pairs of those into int32.
 * The int16 pair sum a0*b0 + a1*b1 saturates when it leaves [-32768, 32767], which bytes a0, a1 in [0, 255]
 * can make happen iff 255 (b0+ + b1+) > 32767 or 255 (b0- + b1-) > 32768 (x+ = max(x, 0), x- = max(-x, 0)),
 * i.e. iff b0+ + b1+ > 128 or b0- + b1- > 128 (255 * 128 = 32640 fits; 255 * 129 = 32895 does not). Such a
 * pair of B is multiplied as (b0, 0) in the main pass and (0, b1) in a residual pass over only the 4-k groups
 * that have one; either has one nonzero weight, |b| <= 128, so |sum| <= 255 * 128: no saturation anywhere, and
 * the int32 results equal vpmaddwd's (the naive reference's). Real weights have few such pairs (both weights
 * of a pair near the column's maximum, same sign); hostile ones (every pair unsafe) cost a second pass.
 *
 * Every signedness: signed A is read with its top bit flipped (a + 128, zero point za + 128), unsigned B
 * likewise (b - 128; the driver takes B's zero point as zb - 128: all_signs). The products are then
 * sum_k a' b'; A's zero point comes off through B's column sums (za' * sum_k b'), B's in the driver.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/igemm_impl.h"

#define IK_INLINE static inline __attribute__((always_inline))
#define MAX_GROUPS ((WM_IKC + 3) / 4) /* 4-k groups of a block (a wide block has kc <= WM_IKC) */
/* register tile: 4 rows x 16 columns (8 accumulators, 2 of B, ones, A's broadcast, a product: 13 of 16 ymm; 6 rows
   need 17, and gcc's spills made that slower); A is packed in panels of as many rows, one tile each (6-row panels
   run as rows 0-3 and 4-5 took whisper-tiny's 1500 x 384 x 1536 product 11.75 ms of CPU, against 11.00: a 2-row
   tile loads and interleaves B for 2 rows) */
#define TILE_R 4
#define AG (TILE_R * 4) /* bytes per 4-k group of an A panel */

/* A rows [m0, m0+mc) x k [k0, k0+kc) as unsigned bytes a' (signed A with its top bit flipped: a + 128) in TILE_R-row
   panels of 4-k groups: panel i, group t, row r at (i * kc4 + t) * AG + r * 4 (kc4 = ceil(kc/4), zero padded);
   asum[r] += the row's sum of (a - za) = sum a' - kc * (za + flip). */
static void pack_a(const wm_igemm_args *a, int64_t m0, int64_t mc, int64_t k0, int64_t kc, uint8_t *dst,
                   int32_t *asum) {
    const int64_t kc4 = (kc + 3) / 4, k32 = kc / 32 * 32;
    const uint8_t flip = a->a_signed ? 0x80 : 0;
    const __m256i fl = _mm256_set1_epi8((char)flip), zero = _mm256_setzero_si256();
    for (int64_t i = 0; i < mc; i += TILE_R) {
        uint8_t *d = dst + i * kc4 * 4;
        int rows = (int)(mc - i < TILE_R ? mc - i : TILE_R);
        if (rows < TILE_R || kc & 3) memset(d, 0, (size_t)(kc4 * AG));
        for (int r = 0; r < rows; r++) {
            int64_t m = m0 + i + r;
            const uint8_t *s = (const uint8_t *)a->A + m * a->lda + k0;
            __m256i sv = zero;
            int64_t k = 0;
            for (; k < k32; k += 32) {
                __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(s + k)), fl);
                sv = _mm256_add_epi64(sv, _mm256_sad_epu8(v, zero));
                __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
                uint8_t *o = d + (k >> 2) * AG + r * 4;
                _mm_storeu_si32(o, lo);
                _mm_storeu_si32(o + AG, _mm_srli_si128(lo, 4));
                _mm_storeu_si32(o + 2 * AG, _mm_srli_si128(lo, 8));
                _mm_storeu_si32(o + 3 * AG, _mm_srli_si128(lo, 12));
                _mm_storeu_si32(o + 4 * AG, hi);
                _mm_storeu_si32(o + 5 * AG, _mm_srli_si128(hi, 4));
                _mm_storeu_si32(o + 6 * AG, _mm_srli_si128(hi, 8));
                _mm_storeu_si32(o + 7 * AG, _mm_srli_si128(hi, 12));
            }
            __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(sv), _mm256_extracti128_si256(sv, 1));
            int64_t sum = _mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1);
            for (; k < kc; k++) {
                uint8_t v = (uint8_t)(s[k] ^ flip);
                d[(k >> 2) * AG + r * 4 + (k & 3)] = v;
                sum += v;
            }
            int32_t za = (a->a_zero_points ? a->a_zero_points[m] : a->a_zero_point) + flip;
            asum[i + r] += (int32_t)(sum - kc * za);
        }
    }
}

/*
 * B's pair panel (kc rows as ceil(kc/2) pairs x 16 columns x 2 bytes; unsigned when flip = 0x80) as 4-k groups of signed bytes for
 * vpmaddubsw: group t at q + t*64, two vectors of 8 columns x 4 k (columns 0-3, 8-11, then 4-7, 12-15: the
 * in-lane interleave of pairs 2t and 2t+1), every pair made safe (see above); the residual groups go to res
 * (64 bytes each, same layout) with their group index in ridx. Returns the residual count; *colsum gets B's
 * column sums over the block in the same column order.
 */
static int64_t quad_panel(const uint8_t *bp, int64_t kc, int flip, uint8_t *q, uint8_t *res, int32_t *ridx,
                          __m256i colsum[2]) {
    const __m256i fl = _mm256_set1_epi8((char)flip), zero = _mm256_setzero_si256(), ones8 = _mm256_set1_epi8(1);
    const __m256i ones16 = _mm256_set1_epi16(1), lim = _mm256_set1_epi16(128), hi = _mm256_set1_epi16((short)0xFF00);
    __m256i cs[2] = {zero, zero};
    /* odd kc: the last pair's second byte is padding (0, which the flip would make -128): masked off */
    const int64_t kc2 = (kc + 1) / 2, odd = kc & 1 ? kc2 - 1 : -1;
    const __m256i lo = _mm256_set1_epi16(0x00FF);
    int64_t nres = 0;
    for (int64_t t = 0; 2 * t < kc2; t++) {
        __m256i x = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(bp + 2 * t * 32)), fl);
        __m256i y = 2 * t + 1 < kc2 ? _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(bp + (2 * t + 1) * 32)), fl)
                                    : zero;
        if (2 * t == odd) x = _mm256_and_si256(x, lo);
        if (2 * t + 1 == odd) y = _mm256_and_si256(y, lo);
        __m256i v[2] = {_mm256_unpacklo_epi16(x, y), _mm256_unpackhi_epi16(x, y)}, r[2];
        int any = 0;
        for (int h = 0; h < 2; h++) {
            __m256i pos = _mm256_max_epi8(v[h], zero), neg = _mm256_sub_epi8(zero, _mm256_min_epi8(v[h], zero));
            /* pair sums of the positive / negative parts (as unsigned bytes: -(-128) reads 128) */
            __m256i ps = _mm256_maddubs_epi16(pos, ones8), ns = _mm256_maddubs_epi16(neg, ones8);
            __m256i bad = _mm256_or_si256(_mm256_cmpgt_epi16(ps, lim), _mm256_cmpgt_epi16(ns, lim));
            __m256i second = _mm256_and_si256(bad, hi); /* the pair's second byte */
            r[h] = _mm256_and_si256(v[h], second);
            any |= !_mm256_testz_si256(r[h], r[h]);
            cs[h] = _mm256_add_epi32(cs[h], _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, v[h]), ones16));
            _mm256_storeu_si256((__m256i *)(q + t * 64 + h * 32), _mm256_andnot_si256(second, v[h]));
        }
        if (any) {
            _mm256_storeu_si256((__m256i *)(res + nres * 64), r[0]);
            _mm256_storeu_si256((__m256i *)(res + nres * 64 + 32), r[1]);
            ridx[nres++] = (int32_t)t;
        }
    }
    colsum[0] = cs[0];
    colsum[1] = cs[1];
    return nres;
}

/* 16 int32 sums of one row, as the madd lanes leave them (lo: columns 0-3 and 8-11, hi: 4-7 and 12-15), into
   d[0..15] in column order: stored (first) or added to what d holds */
IK_INLINE void store16(int32_t *d, __m256i lo, __m256i hi, int first) {
    __m256i o0 = _mm256_permute2x128_si256(lo, hi, 0x20), o1 = _mm256_permute2x128_si256(lo, hi, 0x31);
    __m256i *d0 = (__m256i *)d, *d1 = (__m256i *)(d + 8);
    if (!first) {
        o0 = _mm256_add_epi32(_mm256_loadu_si256(d0), o0);
        o1 = _mm256_add_epi32(_mm256_loadu_si256(d1), o1);
    }
    _mm256_storeu_si256(d0, o0);
    _mm256_storeu_si256(d1, o1);
}

/* rows 0..R-1 of A (4 bytes of row r at a + r * as) times one 4-k group of B (b0, b1: 16 columns) added into c */
IK_INLINE void madd_rows(int R, const uint8_t *a, int64_t as, __m256i b0, __m256i b1, __m256i c[TILE_R][2]) {
    const __m256i ones16 = _mm256_set1_epi16(1);
    _Pragma("GCC unroll 6") for (int r = 0; r < R; r++) { /* unrolled: c stays in registers */
        int32_t x;
        memcpy(&x, a + r * as, 4);
        __m256i xv = _mm256_set1_epi32(x);
        c[r][0] = _mm256_add_epi32(c[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(xv, b0), ones16));
        c[r][1] = _mm256_add_epi32(c[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(xv, b1), ones16));
    }
}

/* one 4-k group of rows 0..R-1 (A panel group ag: TILE_R rows x 4 bytes) times B group bq (2 vectors) into c */
IK_INLINE void step(int R, const uint8_t *ag, const uint8_t *bq, __m256i c[TILE_R][2]) {
    madd_rows(R, ag, 4, _mm256_loadu_si256((const __m256i *)bq), _mm256_loadu_si256((const __m256i *)(bq + 32)), c);
}

/* rows 0..R-1 of an A panel times n groups of B (q; the A group of the i-th: idx[i], or i without idx): acc
   rows (ld) [+]= sum_k a' b' - za'[r] * colsum (colsum, za: NULL for none). The residual groups run as a call of
   their own, after the main one (one loop per call keeps gcc's accumulators in registers). */
IK_INLINE void ukr(int R, int64_t n, const uint8_t *ap, const uint8_t *q, const int32_t *idx, const __m256i *colsum,
                   const int32_t *za, int32_t *acc, int64_t ld, int first) {
    __m256i c[TILE_R][2];
    _Pragma("GCC unroll 6") for (int r = 0; r < R; r++) c[r][0] = c[r][1] = _mm256_setzero_si256();
    for (int64_t t = 0; t < n; t++) step(R, ap + (idx ? idx[t] : t) * AG, q + t * 64, c);
    _Pragma("GCC unroll 6") for (int r = 0; r < R; r++) {
        __m256i lo = c[r][0], hi = c[r][1]; /* columns 0-3, 8-11 and 4-7, 12-15 */
        if (za) {
            __m256i z = _mm256_set1_epi32(za[r]);
            lo = _mm256_sub_epi32(lo, _mm256_mullo_epi32(z, colsum[0]));
            hi = _mm256_sub_epi32(hi, _mm256_mullo_epi32(z, colsum[1]));
        }
        store16(acc + r * ld, lo, hi, first);
    }
}

#define UKR(R)                                                                                                         \
    static void ukr_##R(int64_t n, const uint8_t *ap, const uint8_t *q, const __m256i *colsum, const int32_t *za,    \
                        int32_t *acc, int64_t ld, int first) {                                                         \
        ukr(R, n, ap, q, NULL, colsum, za, acc, ld, first);                                                            \
    }                                                                                                                  \
    static void res_##R(int64_t n, const uint8_t *ap, const uint8_t *q, const int32_t *idx, int32_t *acc,            \
                        int64_t ld) {                                                                                  \
        ukr(R, n, ap, q, idx, NULL, NULL, acc, ld, 0);                                                                 \
    }
UKR(1) UKR(2) UKR(3) UKR(4)
typedef void (*ukr_fn)(int64_t, const uint8_t *, const uint8_t *, const __m256i *, const int32_t *, int32_t *,
                       int64_t, int);
typedef void (*res_fn)(int64_t, const uint8_t *, const uint8_t *, const int32_t *, int32_t *, int64_t);
static const ukr_fn ukrs[TILE_R] = {ukr_1, ukr_2, ukr_3, ukr_4};
static const res_fn ress[TILE_R] = {res_1, res_2, res_3, res_4};

/* scratch: kc4 * 64 bytes of quad panel, then up to as many of residual groups ((kc + 4) * 32 bytes in all) */
static void panel(const wm_igemm_args *a, int64_t m0, int64_t mc, int64_t kc, const uint8_t *apack,
                  const uint8_t *bpanel, uint8_t *scratch, int32_t *acc, int64_t ld, int first) {
    int64_t kc4 = (kc + 3) / 4;
    int32_t ridx[MAX_GROUPS];
    __m256i colsum[2];
    uint8_t *q = scratch, *res = scratch + kc4 * 64;
    int64_t nres = quad_panel(bpanel, kc, a->b_signed ? 0 : 0x80, q, res, ridx, colsum);
    int32_t flip = a->a_signed ? 128 : 0;
    for (int64_t i = 0; i < mc; i += TILE_R) {
        int rows = (int)(mc - i < TILE_R ? mc - i : TILE_R);
        int32_t za[TILE_R];
        for (int r = 0; r < rows; r++)
            za[r] = (a->a_zero_points ? a->a_zero_points[m0 + i + r] : a->a_zero_point) + flip;
        const uint8_t *ap = apack + i * kc4 * 4;
        ukrs[rows - 1](kc4, ap, q, colsum, za, acc + i * ld, ld, first);
        if (nres) ress[rows - 1](nres, ap, res, ridx, acc + i * ld, ld);
    }
}

/* ------------------------------------------------------------ decode rows on the packed pair panels */

/*
 * At most WM_MR rows of uint8 A (a decode step) against a packed panel (igemm.c's pair layout, B's own bytes,
 * signed) whose pairs are all safe (flagged when packed): no regrouping copy, as the pairs 2u and 2u+1 of the
 * panel interleaved by vpunpck{l,h}wd are the 4-k groups of quad_panel (columns 0-3, 8-11 and 4-7, 12-15);
 * per 4 k and 16 columns one vpmaddubsw + vpmaddwd pair per 8 columns and row, where the int16 path widens every
 * byte and multiplies half as many per instruction. A enters as it is (a, not a - za): za * colsum comes off at
 * the end, colsum being B's column sums kept in the packed buffer.
 */
#define ROWS_CH 128   /* 4-k groups per chunk when rows 4-5 take a second pass over it: 8 KiB of panel, in L1 */
#define ROWS_PF 1024  /* bytes ahead: B streams from memory once */

/* rows 0..R-1 of A (row r, 4-k group u at aq + r * aqs + u * ags) times groups [u0, u1) of the pair panel bp */
IK_INLINE void rows_ukr(int R, int64_t u0, int64_t u1, int64_t K2, const uint8_t *aq, int64_t aqs, int64_t ags,
                        const uint8_t *bp, int32_t *acc, int64_t ld, int first, int pf) {
    const __m256i zero = _mm256_setzero_si256();
    __m256i c[TILE_R][2];
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) c[r][0] = c[r][1] = zero;
    int64_t full = K2 / 2 < u1 ? K2 / 2 : u1, u = u0; /* groups of two pairs; an odd K2's last has one */
    for (; u < full; u++) {
        const uint8_t *p = bp + u * 64;
        if (pf) _mm_prefetch((const char *)((uintptr_t)p + ROWS_PF), _MM_HINT_T0);
        __m256i x = _mm256_loadu_si256((const __m256i *)p), y = _mm256_loadu_si256((const __m256i *)(p + 32));
        madd_rows(R, aq + ags * u, aqs, _mm256_unpacklo_epi16(x, y), _mm256_unpackhi_epi16(x, y), c);
    }
    if (u < u1) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(bp + u * 64));
        madd_rows(R, aq + ags * u, aqs, _mm256_unpacklo_epi16(x, zero), _mm256_unpackhi_epi16(x, zero), c);
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) store16(acc + r * ld, c[r][0], c[r][1], first);
}

#define ROWS(R)                                                                                                        \
    static void rows_##R(int64_t u0, int64_t u1, int64_t K2, const uint8_t *aq, int64_t aqs, int64_t ags,            \
                         const uint8_t *bp, int32_t *acc, int64_t ld, int first, int pf) {                            \
        rows_ukr(R, u0, u1, K2, aq, aqs, ags, bp, acc, ld, first, pf);                                                 \
    }
ROWS(1) ROWS(2) ROWS(3) ROWS(4)
typedef void (*rows_fn)(int64_t, int64_t, int64_t, const uint8_t *, int64_t, int64_t, const uint8_t *, int32_t *,
                        int64_t, int, int);
static const rows_fn rows_fns[TILE_R] = {rows_1, rows_2, rows_3, rows_4};

void wm_igemm_ubs_rows_avx2(int R, int64_t K2, const uint8_t *aq, int64_t aqs, const int32_t *za, const uint8_t *bp,
                            const int32_t *colsum, int32_t *acc, int64_t ld) {
    const int64_t ng = (K2 + 1) / 2;
    if (R <= TILE_R) {
        rows_fns[R - 1](0, ng, K2, aq, aqs, 4, bp, acc, ld, 1, 1);
    } else { /* rows 0-3 then 4.. over each chunk: 4 rows' accumulators fill the registers */
        for (int64_t u0 = 0; u0 < ng; u0 += ROWS_CH) {
            int64_t u1 = ng - u0 < ROWS_CH ? ng : u0 + ROWS_CH;
            rows_fns[TILE_R - 1](u0, u1, K2, aq, aqs, 4, bp, acc, ld, u0 == 0, 1);
            rows_fns[R - TILE_R - 1](u0, u1, K2, aq + TILE_R * aqs, aqs, 4, bp, acc + TILE_R * ld, ld, u0 == 0, 0);
        }
    }
    const __m256i cs0 = _mm256_loadu_si256((const __m256i *)colsum), cs1 = _mm256_loadu_si256((const __m256i *)(colsum + 8));
    for (int r = 0; r < R; r++) { /* sum_k a b - za sum_k b = sum_k (a - za) b */
        __m256i z = _mm256_set1_epi32(za[r]), *d0 = (__m256i *)(acc + r * ld), *d1 = (__m256i *)(acc + r * ld + 8);
        _mm256_storeu_si256(d0, _mm256_sub_epi32(_mm256_loadu_si256(d0), _mm256_mullo_epi32(z, cs0)));
        _mm256_storeu_si256(d1, _mm256_sub_epi32(_mm256_loadu_si256(d1), _mm256_mullo_epi32(z, cs1)));
    }
}

/*
 * The prefill panel on a prepacked signed B panel whose pairs are all safe (wm_igemm_wide.panel_safe): the pair
 * panel's 4-k groups interleaved as read (rows_ukr), against A's TILE_R-row panels (pack_a: row stride 4, group
 * stride AG), where panel() would first regroup (and check) the B panel into scratch on every call, 15% of a
 * 64 x 768 x 3072 product. Every row is stored (first) or added as sum_k a' b over the block; A's zero points
 * come off B's column sums over all of K once, in the first k-block.
 */
static void panel_safe(const wm_igemm_args *a, int64_t m0, int64_t mc, int64_t kc, const uint8_t *apack,
                       const uint8_t *bpanel, const int32_t *colsum, int32_t *acc, int64_t ld, int first) {
    const int64_t kc2 = (kc + 1) / 2, kc4 = (kc + 3) / 4;
    const int32_t flip = a->a_signed ? 128 : 0;
    for (int64_t i = 0; i < mc; i += TILE_R) {
        int rows = (int)(mc - i < TILE_R ? mc - i : TILE_R);
        rows_fns[rows - 1](0, kc4, kc2, apack + i * kc4 * 4, 4, AG, bpanel, acc + i * ld, ld, first, i == 0);
    }
    if (!first) return;
    const __m256i cs0 = _mm256_loadu_si256((const __m256i *)colsum), cs1 = _mm256_loadu_si256((const __m256i *)(colsum + 8));
    for (int64_t r = 0; r < mc; r++) {
        __m256i z = _mm256_set1_epi32((a->a_zero_points ? a->a_zero_points[m0 + r] : a->a_zero_point) + flip);
        __m256i *d0 = (__m256i *)(acc + r * ld), *d1 = (__m256i *)(acc + r * ld + 8);
        _mm256_storeu_si256(d0, _mm256_sub_epi32(_mm256_loadu_si256(d0), _mm256_mullo_epi32(z, cs0)));
        _mm256_storeu_si256(d1, _mm256_sub_epi32(_mm256_loadu_si256(d1), _mm256_mullo_epi32(z, cs1)));
    }
}

const wm_igemm_wide wm_igemm_ubs_avx2 = {pack_a, panel, 1, panel_safe};
