/*
 * nbits_avx2.c - MatMulNBits with AVX2 for 4- and 8-bit codes (2-bit codes
 * go to the generic code).
 *
 * Small M (decode): each share takes whole columns (rows of B, K/2 contiguous
 * bytes for 4 bit) and streams them once.
 *   fp32 path: codes -> float, per block d = sum code x, acc += s d, and the zero point once per column as
 *     -sum_b zp s sum(x of block b) (blocks of 16 at 4 bits: w = code * s - zp * s, acc += w x).
 *   int8 path (accuracy_level 4): A quantized per block (amax/127, RNE), then
 *     vpmaddubsw (u4 codes x s8, no saturation: 15 * 127 * 2 < 2^15) + vpmaddwd,
 *     acc += float(dot) * (sa * sw); the zero point (packed uint8 or float, the same fold) enters as
 *     - zp * sum(q) * sa * sw: the block's integer dot plus a per-block bias times its activation sum.
 *   15-bit path (accuracy_level 2 / 3, wm_nbits_use_i15): A quantized per block to v in [-16383, 16383]
 *     (amax/16383, RNE), the same folds. 4-bit: v = 128 hi + lo, hi int8 and lo 0..127, two rows of bytes, each
 *     through the int8 path's vpmaddubsw (|int16 sums| <= 2 * 2 * 15 * 128), then 128 * hi + lo in int32
 *     (vpmaddwd); 8-bit: v as int16 against the codes widened, vpmaddwd. Block dots exact.
 * 4-bit B stores element 2j in the low and 2j+1 in the high nibble of byte j; rather
 * than interleaving nibbles on every load, each share copies its activations once in
 * the matching order: per 32 elements the even ones, then the odd ones.
 * Large M (prefill): the SGEMM micro-kernel on B panels dequantized while packing, except for the weights of
 * the packed block-32 layout (4 bit, default zero point, accuracy_level 4), which take int8 activations at every M:
 * from the layout (wm_nbits_packed_avx2 in nbits_pk_avx2.c, the table's usual case: constant weights are packed
 * at session creation), else with the column kernels, which give the same bits.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "kernels/nbits_impl.h"

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* position of element i (0..31) of a 32-group in the 4-bit order (evens, then odds) */
static inline int pos4(int i) { return (i & 1) ? 16 + (i >> 1) : (i >> 1); }

/* zero point of (n, blk): packed 4/8-bit, float or default zero points (the packer's) */
static inline float zp_of(const wm_nbits_args *a, int64_t n, int64_t blk, int64_t kb) {
    if (!a->zero_points && a->zero_points_f) return a->zero_points_f[n * kb + blk];
    if (a->zero_points) {
        if (a->bits == 4) {
            uint8_t z = a->zero_points[n * ((kb + 1) / 2) + blk / 2];
            return (float)((blk & 1) ? z >> 4 : z & 15);
        }
        return (float)a->zero_points[n * kb + blk];
    }
    return (float)(1 << (a->bits - 1));
}

/* ------------------------------------------------------------ activation prep (per share) */

/* fp32 path: xf[m][kp] = A row m, zero padded, 4-bit order when bits == 4; xs[m][b] = the sum of block b of row m */
static void prep_f32(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; m++) {
        const float *x = a->A + m * a->lda;
        float *d = q->xf + m * q->kp;
        for (int64_t b = 0; b < q->kb; b++) {
            int64_t k0 = b * a->block_size, len = a->K - k0 < a->block_size ? a->K - k0 : a->block_size, i = 0;
            __m256 v = _mm256_setzero_ps();
            for (; i + 8 <= len; i += 8) v = _mm256_add_ps(v, _mm256_loadu_ps(x + k0 + i));
            float t = hsum(v);
            for (; i < len; i++) t += x[k0 + i];
            q->xs[m * q->kbs + b] = t;
        }
        if (a->bits != 4) {
            memcpy(d, x, (size_t)a->K * sizeof(float));
            memset(d + a->K, 0, (size_t)(q->kp - a->K) * sizeof(float));
            continue;
        }
        for (int64_t g = 0; g < q->kp; g += 32)
            for (int i = 0; i < 32; i++) d[g + pos4(i)] = g + i < a->K ? x[g + i] : 0.0f;
    }
}

/* int8 path: per block amax/127 scale, q = RNE(x * 127/amax) (same as wm_ref_nbits_q8), sums */
static void prep_q8(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t m0, int64_t m1) {
    int bs = a->block_size;
    int32_t tmp[32];
    for (int64_t m = m0; m < m1; m++) {
        const float *x = a->A + m * a->lda;
        int8_t *d = q->q + m * q->kp;
        memset(d, 0, (size_t)q->kp);
        memset(q->scale + m * q->kbs, 0, (size_t)q->kbs * sizeof(float));
        memset(q->sum + m * q->kbs, 0, (size_t)q->kbs * sizeof(int32_t));
        for (int64_t b = 0; b < q->kb; b++) {
            int64_t k0 = b * bs, len = a->K - k0 < bs ? a->K - k0 : bs;
            __m256 vmax = _mm256_setzero_ps();
            int64_t i = 0;
            for (; i + 8 <= len; i += 8) vmax = _mm256_max_ps(vmax, _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_loadu_ps(x + k0 + i)));
            float t8[8];
            _mm256_storeu_ps(t8, vmax);
            float amax = 0;
            for (int j = 0; j < 8; j++) amax = t8[j] > amax ? t8[j] : amax;
            for (; i < len; i++) amax = fabsf(x[k0 + i]) > amax ? fabsf(x[k0 + i]) : amax;
            float inv = amax > 0 ? 127.0f / amax : 0.0f;
            __m256 vinv = _mm256_set1_ps(inv);
            int32_t sum = 0;
            for (int64_t c = 0; c < len; c += 32) { /* 32 values at a time into tmp, then placed */
                int64_t cl = len - c < 32 ? len - c : 32;
                for (int j = 0; j < 32; j += 8) {
                    if (j + 8 <= cl) {
                        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + k0 + c + j), vinv);
                        _mm256_storeu_si256((__m256i *)(tmp + j), _mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
                    } else {
                        for (int u = j; u < j + 8; u++) tmp[u] = u < cl ? (int32_t)nearbyintf(x[k0 + c + u] * inv) : 0;
                    }
                }
                for (int j = 0; j < cl; j++) {
                    int32_t v = tmp[j] > 127 ? 127 : tmp[j] < -127 ? -127 : tmp[j];
                    int64_t e = k0 + c + j; /* element index in the row */
                    int64_t g = e & ~(int64_t)63; /* 4 bit: per 64 elements, the evens then the odds */
                    d[a->bits == 4 ? g + ((e & 1) ? 32 : 0) + ((e & 63) >> 1) : e] = (int8_t)v;
                    sum += v;
                }
            }
            q->scale[m * q->kbs + b] = amax / 127.0f;
            q->sum[m * q->kbs + b] = sum;
        }
    }
}

/* 15-bit path (wm_nbits_use_i15): per block amax/16383 scale, v = RNE(x * 16383/amax) clamped (the generic
 * wm_nbits_quant_rows_i15_generic's values), sums; 8-bit codes: int16 in K order; 4-bit codes: v = 128 hi + lo as
 * the hi row (int8) and the lo row (0..127) of the 4-bit order (per 64 elements the evens, then the odds) */
static void prep_i15(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t m0, int64_t m1) {
    const int bs = a->block_size, b4 = a->bits == 4;
    const __m256i lim = _mm256_set1_epi32(WM_NBITS_I15_MAX), nlim = _mm256_set1_epi32(-WM_NBITS_I15_MAX);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    int32_t tmp[256];
    for (int64_t m = m0; m < m1; m++) {
        const float *x = a->A + m * a->lda;
        int8_t *hi = q->q + 2 * m * q->kp, *lo = hi + q->kp;
        int16_t *d16 = (int16_t *)q->q + m * q->kp;
        memset(hi, 0, 2 * (size_t)q->kp); /* either layout: 2 kp bytes */
        memset(q->scale + m * q->kbs, 0, (size_t)q->kbs * sizeof(float));
        memset(q->sum + m * q->kbs, 0, (size_t)q->kbs * sizeof(int32_t));
        for (int64_t b = 0; b < q->kb; b++) {
            int64_t k0 = b * bs, len = a->K - k0 < bs ? a->K - k0 : bs, i = 0;
            __m256 vmax = _mm256_setzero_ps();
            for (; i + 8 <= len; i += 8) vmax = _mm256_max_ps(vmax, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + k0 + i)));
            __m128 h = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
            h = _mm_max_ps(h, _mm_movehl_ps(h, h));
            float amax = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
            for (; i < len; i++) amax = fabsf(x[k0 + i]) > amax ? fabsf(x[k0 + i]) : amax;
            float inv = amax > 0 ? (float)WM_NBITS_I15_MAX / amax : 0.0f;
            __m256 vinv = _mm256_set1_ps(inv);
            __m256i vs = _mm256_setzero_si256();
            for (i = 0; i + 8 <= len; i += 8) {
                __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + k0 + i), vinv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                __m256i v = _mm256_max_epi32(_mm256_min_epi32(_mm256_cvtps_epi32(r), lim), nlim);
                vs = _mm256_add_epi32(vs, v);
                _mm256_storeu_si256((__m256i *)(tmp + i), v);
            }
            int32_t sum = 0;
            for (; i < len; i++) {
                float r = nearbyintf(x[k0 + i] * inv);
                tmp[i] = (int32_t)(r > WM_NBITS_I15_MAX ? WM_NBITS_I15_MAX : r < -WM_NBITS_I15_MAX ? -WM_NBITS_I15_MAX : r);
                sum += tmp[i];
            }
            __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(vs), _mm256_extracti128_si256(vs, 1));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
            sum += _mm_cvtsi128_si32(s4);
            if (!b4) {
                for (i = 0; i + 8 <= len; i += 8) {
                    __m256i v = _mm256_loadu_si256((const __m256i *)(tmp + i));
                    _mm_storeu_si128((__m128i *)(d16 + k0 + i), _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
                }
                for (; i < len; i++) d16[k0 + i] = (int16_t)tmp[i];
            } else {
                for (i = 0; i < len; i++) {
                    int64_t e = k0 + i, p = (e & ~(int64_t)63) + ((e & 1) ? 32 : 0) + ((e & 63) >> 1);
                    hi[p] = (int8_t)(tmp[i] >> 7); /* arithmetic: floor(v / 128), -128..127 */
                    lo[p] = (int8_t)(tmp[i] & 127);
                }
            }
            q->scale[m * q->kbs + b] = amax / (float)WM_NBITS_I15_MAX;
            q->sum[m * q->kbs + b] = sum;
        }
    }
}

/* ------------------------------------------------------------ 4-bit column kernels */

/* the 16 bytes at p as codes: low nibbles in the low lane, high nibbles in the high lane */
static inline __m256i codes4(const uint8_t *p) {
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    __m128i m = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

/* bytes [nbytes] of the column tail copied to a zero-padded 16-byte buffer (no read past B) */
static inline const uint8_t *tail16(const uint8_t *p, int64_t nbytes, uint8_t *buf) {
    memset(buf, 0, 16);
    memcpy(buf, p, (size_t)nbytes);
    return buf;
}

/* zero point of block b of a column: packed row zr (4-bit nibbles / 8-bit bytes) or the default */
static inline float zp_at(const uint8_t *zr, int bits, int64_t b) {
    if (!zr) return (float)(1 << (bits - 1));
    return bits == 4 ? (float)((b & 1) ? zr[b >> 1] >> 4 : zr[b >> 1] & 15) : (float)zr[b];
}

static inline const uint8_t *zp_row(const wm_nbits_args *a, int64_t n, int64_t kb) {
    if (!a->zero_points) return NULL;
    return a->zero_points + n * (a->bits == 4 ? (kb + 1) / 2 : kb);
}

/* -zp * scale of block b of column n for the fp32 paths: packed row zr, or float zero points (zf: the column's,
 * used when there is no packed row), or the default */
static inline float zs_at(const uint8_t *zr, const float *zf, int bits, int64_t b, float sc) {
    return -(zf && !zr ? zf[b] : zp_at(zr, bits, b)) * sc;
}

static inline const float *zpf_row(const wm_nbits_args *a, int64_t n, int64_t kb) {
    return a->zero_points_f && !a->zero_points ? a->zero_points_f + n * kb : NULL;
}

/* w = code * s - zp * s for 8 codes (bytes) */
static inline __m256 deq8(__m128i codes, __m256 vs, __m256 vz) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(codes)), vs, vz);
}

/* codes of 8 bytes as floats */
static inline __m256 cvt8(__m128i codes) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(codes)); }

/* sum_b -zp_b * s_b * xs_b of one column: its zero points (packed row zr, float zf, or the default) against the
 * block sums xs of an activation row; 8 blocks at a time where the zero points are float or the default */
static float zp_term(const uint8_t *zr, const float *zf, int bits, const float *sc, const float *xs, int64_t kb) {
    float t = 0.0f;
    int64_t b = 0;
    if (!zr) {
        __m256 v = _mm256_setzero_ps();
        if (zf)
            for (; b + 8 <= kb; b += 8)
                v = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_loadu_ps(zf + b), _mm256_loadu_ps(sc + b)), _mm256_loadu_ps(xs + b), v);
        else
            for (; b + 8 <= kb; b += 8) v = _mm256_fmadd_ps(_mm256_loadu_ps(sc + b), _mm256_loadu_ps(xs + b), v);
        t = zf ? -hsum(v) : -(float)(1 << (bits - 1)) * hsum(v);
    }
    for (; b < kb; b++) t += zs_at(zr, zf, bits, b, sc[b]) * xs[b];
    return t;
}

/* fp32 path, 4-bit, blocks a multiple of 32, column n, row m (x in 4-bit order): per block d = sum code*x, acc +=
 * s*d; the zero point enters once per column as zp_term over the row's block sums, not in every weight (two
 * vector ops per 8 weights instead of three). Each block's chain starts from zero, so blocks overlap. One column at
 * a time: the codes stream sequentially (interleaving 2 or 4 columns' streams was up to 2x slower from DRAM). */
static float col_f32_b4z(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t n, int64_t m) {
    const int64_t kb = q->kb, bs = a->block_size;
    const uint8_t *p = a->B + n * kb * bs / 2;
    const float *sc = a->scales + n * kb, *x = q->xf + m * q->kp;
    const __m128i mask = _mm_set1_epi8(0x0f);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < kb; b++) {
        __m256 d = _mm256_setzero_ps();
        for (int64_t g = 0; g < bs; g += 32, p += 16, x += 32) {
            __m128i v = _mm_loadu_si128((const __m128i *)p);
            __m128i lo = _mm_and_si128(v, mask), hi = _mm_and_si128(_mm_srli_epi16(v, 4), mask);
            d = _mm256_fmadd_ps(cvt8(lo), _mm256_loadu_ps(x), d);
            d = _mm256_fmadd_ps(cvt8(_mm_srli_si128(lo, 8)), _mm256_loadu_ps(x + 8), d);
            d = _mm256_fmadd_ps(cvt8(hi), _mm256_loadu_ps(x + 16), d);
            d = _mm256_fmadd_ps(cvt8(_mm_srli_si128(hi, 8)), _mm256_loadu_ps(x + 24), d);
        }
        acc = _mm256_fmadd_ps(d, _mm256_set1_ps(sc[b]), acc);
    }
    return hsum(acc) + zp_term(zp_row(a, n, kb), zpf_row(a, n, kb), 4, sc, q->xs + m * q->kbs, kb);
}

/* col_f32_b4z for 8-bit codes, blocks a multiple of 16 */
static float col_f32_b8z(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t n, int64_t m) {
    const int64_t kb = q->kb, bs = a->block_size;
    const uint8_t *p = a->B + n * kb * bs;
    const float *sc = a->scales + n * kb, *x = q->xf + m * q->kp;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < kb; b++) {
        __m256 d = _mm256_setzero_ps();
        for (int64_t g = 0; g < bs; g += 16, p += 16, x += 16) { /* codes widened from memory: no shuffle for the
            upper 8 (2048 x 8192 one row, 1 thread: 1.59 -> 1.33 ms CPU; the same sums in the same order) */
            d = _mm256_fmadd_ps(cvt8(_mm_loadl_epi64((const __m128i *)p)), _mm256_loadu_ps(x), d);
            d = _mm256_fmadd_ps(cvt8(_mm_loadl_epi64((const __m128i *)(p + 8))), _mm256_loadu_ps(x + 8), d);
        }
        acc = _mm256_fmadd_ps(d, _mm256_set1_ps(sc[b]), acc);
    }
    return hsum(acc) + zp_term(zp_row(a, n, kb), zpf_row(a, n, kb), 8, sc, q->xs + m * q->kbs, kb);
}

/* fp32 path, 4-bit, column n, row m: sum_k w[k] x[k] with x in 4-bit order (blocks of 16: col_f32_b4z takes the rest) */
static float col_f32_b4(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t n, int64_t m) {
    const int64_t kb = q->kb, bs = a->block_size;
    const uint8_t *p = a->B + n * kb * bs / 2, *zr = zp_row(a, n, kb);
    const float *sc = a->scales + n * kb, *x = q->xf + m * q->kp, *zf = zpf_row(a, n, kb);
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    if (bs >= 32) {
        for (int64_t b = 0; b < kb; b++) {
            __m256 vs = _mm256_set1_ps(sc[b]), vz = _mm256_set1_ps(zs_at(zr, zf, 4, b, sc[b]));
            for (int64_t g = 0; g < bs; g += 32, p += 16, x += 32) {
                __m256i c = codes4(p);
                __m128i lo = _mm256_castsi256_si128(c), hi = _mm256_extracti128_si256(c, 1);
                a0 = _mm256_fmadd_ps(deq8(lo, vs, vz), _mm256_loadu_ps(x), a0);
                a1 = _mm256_fmadd_ps(deq8(_mm_srli_si128(lo, 8), vs, vz), _mm256_loadu_ps(x + 8), a1);
                a2 = _mm256_fmadd_ps(deq8(hi, vs, vz), _mm256_loadu_ps(x + 16), a2);
                a3 = _mm256_fmadd_ps(deq8(_mm_srli_si128(hi, 8), vs, vz), _mm256_loadu_ps(x + 24), a3);
            }
        }
    } else { /* 16: a 32-group holds blocks b (chunks 0, 2) and b + 1 (chunks 1, 3) */
        uint8_t buf[16];
        for (int64_t b = 0; b < kb; b += 2, p += 16, x += 32) {
            int64_t b1 = b + 1 < kb ? b + 1 : b;
            const uint8_t *src = b + 1 < kb ? p : tail16(p, 8, buf);
            __m256 sA = _mm256_set1_ps(sc[b]), zA = _mm256_set1_ps(zs_at(zr, zf, 4, b, sc[b]));
            __m256 sB = _mm256_set1_ps(sc[b1]), zB = _mm256_set1_ps(zs_at(zr, zf, 4, b1, sc[b1]));
            __m256i c = codes4(src);
            __m128i lo = _mm256_castsi256_si128(c), hi = _mm256_extracti128_si256(c, 1);
            a0 = _mm256_fmadd_ps(deq8(lo, sA, zA), _mm256_loadu_ps(x), a0);
            a1 = _mm256_fmadd_ps(deq8(_mm_srli_si128(lo, 8), sB, zB), _mm256_loadu_ps(x + 8), a1);
            a2 = _mm256_fmadd_ps(deq8(hi, sA, zA), _mm256_loadu_ps(x + 16), a2);
            a3 = _mm256_fmadd_ps(deq8(_mm_srli_si128(hi, 8), sB, zB), _mm256_loadu_ps(x + 24), a3);
        }
    }
    return hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

/* the 8 lane-sums of v0..v7, in order (int32) */
static inline __m256i hsum8x8(__m256i v0, __m256i v1, __m256i v2, __m256i v3, __m256i v4, __m256i v5, __m256i v6,
                              __m256i v7) {
    __m256i s0123 = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
    __m256i s4567 = _mm256_hadd_epi32(_mm256_hadd_epi32(v4, v5), _mm256_hadd_epi32(v6, v7));
    return _mm256_add_epi32(_mm256_permute2x128_si256(s0123, s4567, 0x20), _mm256_permute2x128_si256(s0123, s4567, 0x31));
}

/* zero points of blocks b..b+7 as floats (r of them real, the rest 0): the column's float row zf (zpf_row), else
 * its packed row zr, else the default */
static inline __m256 zp8_at(const uint8_t *zr, const float *zf, int bits, int64_t b, int64_t r) {
    if (zf)
        return r == 8 ? _mm256_loadu_ps(zf + b)
                      : _mm256_maskload_ps(zf + b, _mm256_cmpgt_epi32(_mm256_set1_epi32((int)r), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
    if (!zr) return _mm256_set1_ps((float)(1 << (bits - 1)));
    if (r == 8 && bits == 4 && !(b & 1)) {
        uint32_t w;
        memcpy(&w, zr + b / 2, 4);
        __m128i v = _mm_cvtsi32_si128((int)w), m = _mm_set1_epi8(0x0f);
        __m128i z = _mm_unpacklo_epi8(_mm_and_si128(v, m), _mm_and_si128(_mm_srli_epi16(v, 4), m));
        return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(z));
    }
    if (r == 8 && bits == 8)
        return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(zr + b))));
    float t[8] = {0};
    for (int64_t j = 0; j < r; j++) t[j] = zp_at(zr, bits, b + j);
    return _mm256_loadu_ps(t);
}

/* the weight scales of blocks b..b+7 (r of them real; past r not read): the halves sh where given (the same
 * floats, 2 bytes a block streamed instead of 4), else the floats sc */
static inline __m256 scales8(const float *sc, const uint16_t *sh, int64_t r) {
    if (sh) {
        if (r == 8) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)sh));
        uint16_t t[8] = {0};
        memcpy(t, sh, (size_t)r * sizeof *t);
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)t));
    }
    return r == 8 ? _mm256_loadu_ps(sc)
                  : _mm256_maskload_ps(sc, _mm256_cmpgt_epi32(_mm256_set1_epi32((int)r), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
}

/* acc += (sw * sa)[b..b+7] * (dots - zp * qsum)[b..b+7]; r of the 8 blocks real (xs, qs are
 * zero padded to 8 in the workspace; the weight scales past r are not read); sh: the scales as halves, or NULL */
static inline __m256 fold8h(__m256 acc, __m256i dots, const float *sc, const uint16_t *sh, const float *xs,
                            const int32_t *qs, __m256 zp, int64_t r) {
    __m256 s = scales8(sc, sh, r);
    __m256 qf = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)qs));
    __m256 t = _mm256_fnmadd_ps(zp, qf, _mm256_cvtepi32_ps(dots));
    return _mm256_fmadd_ps(_mm256_mul_ps(s, _mm256_loadu_ps(xs)), t, acc);
}

static inline __m256 fold8(__m256 acc, __m256i dots, const float *sc, const float *xs, const int32_t *qs, __m256 zp,
                           int64_t r) {
    return fold8h(acc, dots, sc, NULL, xs, qs, zp, r);
}

/* 64 codes from the 32 bytes at p times the activations at x (their 32 evens, then 32 odds):
 * int32 lane L = the sum over elements 8L..8L+7 (no saturation: 2 * 2 * 15 * 127 < 2^15).
 * lo > 0: 15-bit activations v = 128 hi + lo, the hi bytes (int8) at x, the lo bytes (0..127) at x + lo, the same
 * order: two int16 sums (|.| <= 2 * 2 * 15 * 128), then 128 * hi sum + lo sum in int32 (vpmaddwd). */
static inline __attribute__((always_inline)) __m256i q4dot64(const uint8_t *p, const int8_t *x, int64_t lo_off) {
    const __m256i m = _mm256_set1_epi8(0x0f);
    __m256i v = _mm256_loadu_si256((const __m256i *)p);
    __m256i lo = _mm256_and_si256(v, m), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
    __m256i s = _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)x)),
                                 _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(x + 32))));
    if (!lo_off) return _mm256_madd_epi16(s, _mm256_set1_epi16(1));
    __m256i t = _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(x + lo_off))),
                                 _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(x + lo_off + 32))));
    return _mm256_add_epi32(_mm256_madd_epi16(s, _mm256_set1_epi16(128)), _mm256_madd_epi16(t, _mm256_set1_epi16(1)));
}

/* The integer dots of blocks b..b+7 of a column (codes from p, activations from x, r blocks real; lo: q4dot64's). */
static inline __attribute__((always_inline)) __m256i dots8_b4(const uint8_t *p, const int8_t *x, int64_t bs, int64_t r,
                                                             int64_t avail, int64_t lo) {
    uint8_t buf[32];
    if (bs == 32 && r == 8) { /* the common case, branch free */
        __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(q4dot64(p, x, lo), q4dot64(p + 32, x + 64, lo)),
                                      _mm256_hadd_epi32(q4dot64(p + 64, x + 128, lo), q4dot64(p + 96, x + 192, lo)));
        return _mm256_permutevar8x32_epi32(h, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    }
    if (bs == 16 && r == 8) {
        __m256i h = _mm256_hadd_epi32(q4dot64(p, x, lo), q4dot64(p + 32, x + 64, lo));
        return _mm256_permutevar8x32_epi32(h, _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7));
    }
    if (bs <= 32) { /* 16: 4 blocks per 64-group (lane pairs); 32: 2 blocks per group (lane quads) */
        int64_t groups = (r * bs + 63) / 64;
        __m256i v[4];
        for (int g = 0; g < 4; g++) {
            if (g >= groups) {
                v[g] = _mm256_setzero_si256();
                continue;
            }
            const uint8_t *src = p + 32 * g;
            if (32 * g + 32 > avail) { /* the column ends inside this group: zero-padded copy */
                memset(buf, 0, sizeof buf);
                memcpy(buf, src, (size_t)(avail - 32 * g));
                src = buf;
            }
            v[g] = q4dot64(src, x + 64 * g, lo);
        }
        if (bs == 16) { /* v0 = [b0 b0 b1 b1 b2 b2 b3 b3], v1 = [b4 .. b7]; hadd -> [b0 b1 b4 b5 | b2 b3 b6 b7] */
            __m256i h = _mm256_hadd_epi32(v[0], v[1]);
            return _mm256_permutevar8x32_epi32(h, _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7));
        }
        /* v_j = [b2j x4 | b2j+1 x4]; two hadd levels -> [b0 b2 b4 b6 | b1 b3 b5 b7] */
        __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
        return _mm256_permutevar8x32_epi32(h, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    }
    __m256i v[8]; /* 64 and up: whole groups per block */
    for (int j = 0; j < 8; j++) {
        __m256i s = _mm256_setzero_si256();
        if (j < r)
            for (int64_t g = 0; g < bs; g += 64) s = _mm256_add_epi32(s, q4dot64(p + j * bs / 2 + g / 2, x + j * bs + g, lo));
        v[j] = s;
    }
    return hsum8x8(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
}

/* int8 path, 4-bit, column n, row m: sum_b sw*sa*(sum q*code - zp*sum q), 8 blocks at a time. i15: the 15-bit
 * activations' two byte rows (their block dots < 2^24: exact as floats, so the same fold) */
static inline __attribute__((always_inline)) float col_b4_any(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t n,
                                                              int64_t m, const int i15) {
    const int64_t kb = q->kb, bs = a->block_size, colbytes = kb * bs / 2, lo = i15 ? q->kp : 0;
    const uint8_t *col = a->B + n * colbytes, *zr = zp_row(a, n, kb);
    const float *sc = a->scales + n * kb, *xs = q->scale + m * q->kbs, *zf = zpf_row(a, n, kb);
    const int32_t *qs = q->sum + m * q->kbs;
    const int8_t *x = q->q + (i15 ? 2 : 1) * m * q->kp;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < kb; b += 8) {
        int64_t r = kb - b < 8 ? kb - b : 8;
        __m256i d = dots8_b4(col + b * bs / 2, x + b * bs, bs, r, colbytes - b * bs / 2, lo);
        acc = fold8(acc, d, sc + b, xs + b, qs + b, zp8_at(zr, zf, 4, b, r), r);
    }
    return hsum(acc);
}

static float col_q8_b4(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t n, int64_t m) { return col_b4_any(a, q, n, m, 0); }
static float col_i15_b4(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t n, int64_t m) { return col_b4_any(a, q, n, m, 1); }

/* q4dot64 of two columns against the same activations (loaded once) */
static inline __attribute__((always_inline)) void q4dot64x2(const uint8_t *p0, const uint8_t *p1, const int8_t *x,
                                                            int64_t lo_off, __m256i *d0, __m256i *d1) {
    const __m256i m = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    __m256i xe = _mm256_loadu_si256((const __m256i *)x), xo = _mm256_loadu_si256((const __m256i *)(x + 32));
    __m256i v0 = _mm256_loadu_si256((const __m256i *)p0), v1 = _mm256_loadu_si256((const __m256i *)p1);
    __m256i l0 = _mm256_and_si256(v0, m), h0 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), m);
    __m256i l1 = _mm256_and_si256(v1, m), h1 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), m);
    __m256i s0 = _mm256_add_epi16(_mm256_maddubs_epi16(l0, xe), _mm256_maddubs_epi16(h0, xo));
    __m256i s1 = _mm256_add_epi16(_mm256_maddubs_epi16(l1, xe), _mm256_maddubs_epi16(h1, xo));
    if (!lo_off) {
        *d0 = _mm256_madd_epi16(s0, ones);
        *d1 = _mm256_madd_epi16(s1, ones);
        return;
    }
    const __m256i k128 = _mm256_set1_epi16(128);
    __m256i ye = _mm256_loadu_si256((const __m256i *)(x + lo_off)), yo = _mm256_loadu_si256((const __m256i *)(x + lo_off + 32));
    __m256i t0 = _mm256_add_epi16(_mm256_maddubs_epi16(l0, ye), _mm256_maddubs_epi16(h0, yo));
    __m256i t1 = _mm256_add_epi16(_mm256_maddubs_epi16(l1, ye), _mm256_maddubs_epi16(h1, yo));
    *d0 = _mm256_add_epi32(_mm256_madd_epi16(s0, k128), _mm256_madd_epi16(t0, ones));
    *d1 = _mm256_add_epi32(_mm256_madd_epi16(s1, k128), _mm256_madd_epi16(t1, ones));
}

/* col_b4_any for columns n and n + 1 at once (shared activation loads); each column's arithmetic is
 * exactly col_b4_any's, so a column's value does not depend on whether it was paired. */
static inline __attribute__((always_inline)) void col2_b4_any(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t n,
                                                              int64_t m, float *out, const int i15) {
    const int64_t kb = q->kb, bs = a->block_size, colbytes = kb * bs / 2, lo = i15 ? q->kp : 0;
    const uint8_t *c0 = a->B + n * colbytes, *c1 = c0 + colbytes;
    const uint8_t *z0 = zp_row(a, n, kb), *z1 = zp_row(a, n + 1, kb);
    const float *s0 = a->scales + n * kb, *s1 = s0 + kb, *xs = q->scale + m * q->kbs;
    const float *f0 = zpf_row(a, n, kb), *f1 = zpf_row(a, n + 1, kb);
    const int32_t *qs = q->sum + m * q->kbs;
    const int8_t *x = q->q + (i15 ? 2 : 1) * m * q->kp;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t b = 0; b < kb; b += 8) {
        int64_t r = kb - b < 8 ? kb - b : 8;
        __m256i d0, d1;
        if (bs == 32 && !(r & 1)) { /* whole 2-block groups (a tail of 2, 4 or 6 blocks: the rest zero) */
            const uint8_t *p0 = c0 + b * 16, *p1 = c1 + b * 16;
            const int8_t *xx = x + b * 32;
            __m256i v0[4], v1[4];
            for (int g = 0; g < 4; g++) {
                if (2 * g < r) q4dot64x2(p0 + 32 * g, p1 + 32 * g, xx + 64 * g, lo, &v0[g], &v1[g]);
                else v0[g] = v1[g] = _mm256_setzero_si256();
            }
            d0 = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(_mm256_hadd_epi32(v0[0], v0[1]), _mm256_hadd_epi32(v0[2], v0[3])), perm);
            d1 = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(_mm256_hadd_epi32(v1[0], v1[1]), _mm256_hadd_epi32(v1[2], v1[3])), perm);
        } else {
            d0 = dots8_b4(c0 + b * bs / 2, x + b * bs, bs, r, colbytes - b * bs / 2, lo);
            d1 = dots8_b4(c1 + b * bs / 2, x + b * bs, bs, r, colbytes - b * bs / 2, lo);
        }
        acc0 = fold8(acc0, d0, s0 + b, xs + b, qs + b, zp8_at(z0, f0, 4, b, r), r);
        acc1 = fold8(acc1, d1, s1 + b, xs + b, qs + b, zp8_at(z1, f1, 4, b, r), r);
    }
    out[0] = hsum(acc0);
    out[1] = hsum(acc1);
}

static void col2_q8_b4(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t n, int64_t m, float *out) {
    col2_b4_any(a, q, n, m, out, 0);
}
static void col2_i15_b4(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t n, int64_t m, float *out) {
    col2_b4_any(a, q, n, m, out, 1);
}

/* fp32 path, 8-bit, column n, row m */
static float col_f32_b8(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t n, int64_t m) {
    const int64_t kb = q->kb, bs = a->block_size;
    const uint8_t *p = a->B + n * kb * bs, *zr = zp_row(a, n, kb);
    const float *sc = a->scales + n * kb, *x = q->xf + m * q->kp, *zf = zpf_row(a, n, kb);
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    for (int64_t b = 0; b < kb; b++) {
        __m256 vs = _mm256_set1_ps(sc[b]), vz = _mm256_set1_ps(zs_at(zr, zf, 8, b, sc[b]));
        for (int64_t i = 0; i < bs; i += 16, p += 16, x += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)p);
            a0 = _mm256_fmadd_ps(deq8(v, vs, vz), _mm256_loadu_ps(x), a0);
            a1 = _mm256_fmadd_ps(deq8(_mm_srli_si128(v, 8), vs, vz), _mm256_loadu_ps(x + 8), a1);
        }
    }
    return hsum(_mm256_add_ps(a0, a1));
}

/* 16 activations from x as int16: int8 widened, or 15-bit values as they are */
static inline __attribute__((always_inline)) __m256i x16_at(const void *x, int64_t i, const int i16) {
    if (i16) return _mm256_loadu_si256((const __m256i *)((const int16_t *)x + i));
    return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)((const int8_t *)x + i)));
}

/* 15-bit path: acc += (sw * sa)[b..b+7] * (dots - zp * qsum)[b..b+7], r of the 8 blocks real; integer zero points
 * (packed or the default) in int32, exact (|.| < 256 x 255 x 16383 < 2^31), float ones as fold8 */
static inline __m256 fold8_i15(__m256 acc, __m256i dots, const float *sc, const float *xs, const int32_t *qs,
                               const uint8_t *zr, const float *zf, int bits, int64_t b, int64_t r) {
    if (zf) return fold8(acc, dots, sc, xs, qs, zp8_at(zr, zf, bits, b, r), r);
    __m256i zi = _mm256_cvttps_epi32(zp8_at(zr, zf, bits, b, r));
    __m256i t = _mm256_sub_epi32(dots, _mm256_mullo_epi32(zi, _mm256_loadu_si256((const __m256i *)qs)));
    __m256 s = r == 8 ? _mm256_loadu_ps(sc)
                      : _mm256_maskload_ps(sc, _mm256_cmpgt_epi32(_mm256_set1_epi32((int)r), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
    return _mm256_fmadd_ps(_mm256_mul_ps(s, _mm256_loadu_ps(xs)), _mm256_cvtepi32_ps(t), acc);
}

/* int8 path, 8-bit: codes and activations widened to int16, vpmaddwd (exact); blocks 8 at a time
 * reduced by hsum8x8 and folded like the 4-bit path, the weight scales read as halves where given (scales_h).
 * nc columns (1 or 2) n, n+1 share the activation loads; each column's arithmetic is the same either way.
 * i16: the 15-bit activations, int16 in K order (|dot| < 256 x 255 x 16383: exact), folded by fold8_i15.
 * Measured against vpmaddubsw with the sign trick on this CPU (stop 49; w = code - 128, |w| unsigned against the
 * activation with w's sign, then vpmaddwd by ones: the same integers): one row x 2 columns took 15-18% more CPU
 * with the weights in L2 (2048 x 128, 1 and 16 rows), the same from memory (2048 x 8192); 2 rows x 2 columns
 * (|w| and the flip shared by the rows, the activations by the columns) and 4 x 2 tiles with blocks in lanes (no
 * horizontal adds) the same as this at 16 and 31 rows, and 1.2-1.4x the float SGEMM path's CPU at 64. The widening
 * costs no multiply; the sign trick's second multiply (vpmaddwd on the pair sums) and its three byte ops (flip,
 * abs, sign) take what the 32-wide vpmaddubsw saves. */
static inline __attribute__((always_inline)) void cols_b8_any(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t n,
                                                              int nc, int64_t m, float *out, const int i16) {
    const int64_t kb = q->kb, bs = a->block_size;
    const uint8_t *c0 = a->B + n * kb * bs, *c1 = nc > 1 ? c0 + kb * bs : c0;
    const uint8_t *z0 = zp_row(a, n, kb), *z1 = nc > 1 ? zp_row(a, n + 1, kb) : z0;
    const float *s0 = a->scales + n * kb, *s1 = nc > 1 ? s0 + kb : s0, *xs = q->scale + m * q->kbs;
    const float *f0 = zpf_row(a, n, kb), *f1 = nc > 1 ? zpf_row(a, n + 1, kb) : f0;
    /* int8 activations: the scales as halves where the session keeps them (wm_nbits_half_kernel) */
    const uint16_t *h0 = !i16 && a->scales_h ? a->scales_h + n * kb : NULL, *h1 = h0 && nc > 1 ? h0 + kb : h0;
    const int32_t *qs = q->sum + m * q->kbs;
    const void *x = i16 ? (const void *)((const int16_t *)q->q + m * q->kp) : (const void *)(q->q + m * q->kp);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
    for (int64_t b = 0; b < kb; b += 8) {
        int64_t r = kb - b < 8 ? kb - b : 8;
        __m256i v0[8], v1[8];
        if (bs == 32 && r == 8) { /* the common case, unrolled: 2 x 16 per block */
#define B8DOT(j)                                                                                                       \
    do {                                                                                                               \
        const int64_t i_ = (b + (j)) * 32;                                                                             \
        __m256i xa = x16_at(x, i_, i16), xb = x16_at(x, i_ + 16, i16);                                                 \
        v0[j] = _mm256_add_epi32(_mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(c0 + i_))), xa), \
                                 _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(c0 + i_ + 16))), xb)); \
        v1[j] = _mm256_add_epi32(_mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(c1 + i_))), xa), \
                                 _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(c1 + i_ + 16))), xb)); \
    } while (0)
            B8DOT(0);
            B8DOT(1);
            B8DOT(2);
            B8DOT(3);
            B8DOT(4);
            B8DOT(5);
            B8DOT(6);
            B8DOT(7);
#undef B8DOT
        } else
        for (int j = 0; j < 8; j++) {
            __m256i i0 = _mm256_setzero_si256(), i1 = i0;
            if (j < r)
                for (int64_t i = (b + j) * bs; i < (b + j + 1) * bs; i += 16) {
                    __m256i xq = x16_at(x, i, i16);
                    i0 = _mm256_add_epi32(i0, _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(c0 + i))), xq));
                    if (nc > 1)
                        i1 = _mm256_add_epi32(i1, _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(c1 + i))), xq));
                }
            v0[j] = i0;
            v1[j] = i1;
        }
        __m256i d0 = hsum8x8(v0[0], v0[1], v0[2], v0[3], v0[4], v0[5], v0[6], v0[7]);
        acc0 = i16 ? fold8_i15(acc0, d0, s0 + b, xs + b, qs + b, z0, f0, 8, b, r)
                   : fold8h(acc0, d0, s0 + b, h0 ? h0 + b : NULL, xs + b, qs + b, zp8_at(z0, f0, 8, b, r), r);
        if (nc > 1) {
            __m256i d1 = hsum8x8(v1[0], v1[1], v1[2], v1[3], v1[4], v1[5], v1[6], v1[7]);
            acc1 = i16 ? fold8_i15(acc1, d1, s1 + b, xs + b, qs + b, z1, f1, 8, b, r)
                       : fold8h(acc1, d1, s1 + b, h1 ? h1 + b : NULL, xs + b, qs + b, zp8_at(z1, f1, 8, b, r), r);
        }
    }
    out[0] = hsum(acc0);
    if (nc > 1) out[1] = hsum(acc1);
}

static void cols_q8_b8(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t n, int nc, int64_t m, float *out) {
    cols_b8_any(a, q, n, nc, m, out, 0);
}
static void cols_i15_b8(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t n, int nc, int64_t m, float *out) {
    cols_b8_any(a, q, n, nc, m, out, 1);
}

static float col_q8_b8(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t n, int64_t m) {
    float o;
    cols_q8_b8(a, q, n, 1, m, &o);
    return o;
}
static float col_i15_b8(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t n, int64_t m) {
    float o;
    cols_i15_b8(a, q, n, 1, m, &o);
    return o;
}

/* ------------------------------------------------------------ large M: dequantizing packer */

/* 32 dequantized weights of column n from k = g (a 32-aligned group), in K order, into w */
static inline void deq32_b4(const wm_nbits_args *a, int64_t n, int64_t g, int64_t kb, int64_t colbytes, float *w) {
    const int64_t bs = a->block_size;
    const uint8_t *col = a->B + n * colbytes;
    uint8_t buf[16];
    const uint8_t *src = g / 2 + 16 <= colbytes ? col + g / 2 : tail16(col + g / 2, colbytes - g / 2, buf);
    __m128i v = _mm_loadu_si128((const __m128i *)src), m = _mm_set1_epi8(0x0f);
    __m128i lo = _mm_and_si128(v, m), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m);
    __m128i e0 = _mm_unpacklo_epi8(lo, hi), e1 = _mm_unpackhi_epi8(lo, hi); /* K order */
    int64_t bA = g / bs, bB = (g + 16) / bs < kb ? (g + 16) / bs : bA;
    __m256 sA = _mm256_set1_ps(a->scales[n * kb + bA]), sB = _mm256_set1_ps(a->scales[n * kb + bB]);
    __m256 zA = _mm256_set1_ps(-zp_of(a, n, bA, kb) * a->scales[n * kb + bA]);
    __m256 zB = _mm256_set1_ps(-zp_of(a, n, bB, kb) * a->scales[n * kb + bB]);
    _mm256_storeu_ps(w, _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(e0)), sA, zA));
    _mm256_storeu_ps(w + 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(e0, 8))), sA, zA));
    _mm256_storeu_ps(w + 16, _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(e1)), sB, zB));
    _mm256_storeu_ps(w + 24, _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(e1, 8))), sB, zB));
}

/* rows r[0..7] (8 floats each) transposed: out[i] = (r[0][i], ..., r[7][i]) */
static inline void tr8x8(__m256 *r) {
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

static inline void tr8x8_b(const uint8_t *c, int64_t cs, __m128i *v) {
    __m128i t0 = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)c), _mm_loadl_epi64((const __m128i *)(c + cs)));
    __m128i t1 = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(c + 2 * cs)), _mm_loadl_epi64((const __m128i *)(c + 3 * cs)));
    __m128i t2 = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(c + 4 * cs)), _mm_loadl_epi64((const __m128i *)(c + 5 * cs)));
    __m128i t3 = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(c + 6 * cs)), _mm_loadl_epi64((const __m128i *)(c + 7 * cs)));
    __m128i u0 = _mm_unpacklo_epi16(t0, t1), u1 = _mm_unpackhi_epi16(t0, t1); /* k 0-3 / 4-7 of columns 0-3 */
    __m128i u2 = _mm_unpacklo_epi16(t2, t3), u3 = _mm_unpackhi_epi16(t2, t3); /* of columns 4-7 */
    v[0] = _mm_unpacklo_epi32(u0, u2);
    v[1] = _mm_unpackhi_epi32(u0, u2);
    v[2] = _mm_unpacklo_epi32(u1, u3);
    v[3] = _mm_unpackhi_epi32(u1, u3);
}

/* wm_bsrc packer for 8-bit codes (blocks a multiple of 8), w = (code - zp) * s as wm_nbits_dequant_run computes it
 * (the same two roundings: the same floats as the generic packer) into the [k][WM_NR] panel. Whole groups of 8
 * columns: 8 K values at a time, the codes transposed as bytes (tr8x8_b), then per k one vector of the 8 columns'
 * weights against their zero points and scales held as two vectors (a block's, reloaded at each new block); the
 * group's edges (a k range not a multiple of 8) element by element with the same arithmetic. Narrower groups (the
 * last panel's): 8 K values of each column, transposed as floats. Before the byte transpose the packer held a
 * zero point and a scale vector per column (16 registers, spilled) and transposed floats: 16% of a 64 x 2048 x
 * 8192 call's CPU time (perf), the micro-kernel 67%. Before it the generic packer's element loop was most of an
 * 8-bit prefill (pythia-1b int8: an int4 build's 8-bit v / down / lm_head made its prefill 0.6x the all-4-bit
 * build's). */
static void pack_b8_avx2(const wm_nbits_args *a, int64_t k0, int64_t kc, int64_t n0, int64_t nc, float *dst,
                         int64_t pstride) {
    const int64_t kb = wm_nbits_kblocks(a), bs = a->block_size, cs = kb * bs; /* column n's code k at n cs + k */
    for (int64_t p = 0; p * WM_NR < nc; p++) {
        float *d = dst + p * pstride;
        int64_t nv = nc - p * WM_NR < WM_NR ? nc - p * WM_NR : WM_NR;
        if (nv < WM_NR) memset(d, 0, (size_t)kc * WM_NR * sizeof(float));
        for (int64_t j0 = 0; j0 < nv; j0 += 8) {
            int64_t nj = nv - j0 < 8 ? nv - j0 : 8, blk = -1, nf = n0 + p * WM_NR + j0;
            if (nj == 8) {
                const uint8_t *c = a->B + nf * cs;
                float zt[8], st[8];
                __m256 zv = _mm256_setzero_ps(), sv = zv;
                for (int64_t g = k0 & ~(int64_t)7; g < k0 + kc; g += 8) {
                    if (g / bs != blk) {
                        blk = g / bs;
                        for (int64_t j = 0; j < 8; j++) {
                            zt[j] = zp_of(a, nf + j, blk, kb);
                            st[j] = a->scales[(nf + j) * kb + blk];
                        }
                        zv = _mm256_loadu_ps(zt);
                        sv = _mm256_loadu_ps(st);
                    }
                    if (g >= k0 && g + 8 <= k0 + kc) {
                        __m128i v[4];
                        if (!(g & 63) && g + kc < cs) /* the next k-block's codes of these columns into L2 while */
                            for (int64_t j = 0; j < 8; j++) /* the micro-kernel runs on this one */
                                _mm_prefetch((const char *)c + j * cs + g + kc, _MM_HINT_T1);
                        tr8x8_b(c + g, cs, v);
                        float *o = d + (g - k0) * WM_NR + j0;
                        for (int i = 0; i < 4; i++) {
                            __m256 w0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v[i]));
                            __m256 w1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(v[i], v[i])));
                            _mm256_storeu_ps(o + 2 * i * WM_NR, _mm256_mul_ps(_mm256_sub_ps(w0, zv), sv));
                            _mm256_storeu_ps(o + (2 * i + 1) * WM_NR, _mm256_mul_ps(_mm256_sub_ps(w1, zv), sv));
                        }
                        continue;
                    }
                    int64_t lo_k = g < k0 ? k0 : g, hi_k = g + 8 < k0 + kc ? g + 8 : k0 + kc;
                    for (int64_t j = 0; j < 8; j++)
                        for (int64_t k = lo_k; k < hi_k; k++)
                            d[(k - k0) * WM_NR + j0 + j] = ((float)c[j * cs + k] - zt[j]) * st[j];
                }
                continue;
            }
            const uint8_t *col[8];
            __m256 zs[8], ss[8];
            for (int64_t g = k0 & ~(int64_t)7; g < k0 + kc; g += 8) {
                if (g / bs != blk) { /* a new block: its zero points and scales, its codes */
                    blk = g / bs;
                    for (int64_t j = 0; j < nj; j++) {
                        int64_t n = nf + j;
                        col[j] = a->B + (n * kb + blk) * bs;
                        zs[j] = _mm256_set1_ps(zp_of(a, n, blk, kb));
                        ss[j] = _mm256_set1_ps(a->scales[n * kb + blk]);
                    }
                }
                __m256 r[8];
                for (int64_t j = 0; j < nj; j++) {
                    __m128i c = _mm_loadl_epi64((const __m128i *)(col[j] + g - blk * bs));
                    r[j] = _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(c)), zs[j]), ss[j]);
                }
                float w[8][8];
                for (int64_t j = 0; j < nj; j++) _mm256_storeu_ps(w[j], r[j]);
                int64_t lo_k = g < k0 ? k0 : g, hi_k = g + 8 < k0 + kc ? g + 8 : k0 + kc;
                for (int64_t j = 0; j < nj; j++)
                    for (int64_t k = lo_k; k < hi_k; k++) d[(k - k0) * WM_NR + j0 + j] = w[j][k - g];
            }
        }
    }
}

/* wm_bsrc packer for 4-bit codes: columns are dequantized 32 K values at a time, 8 columns together, and
 * written into the [k][WM_NR] panel with 8x8 transposes (whole groups) or element by element (edges). */
static void pack_nbits_avx2(const wm_bsrc *s, int64_t k0, int64_t kc, int64_t n0, int64_t nc, float *dst, int64_t pstride) {
    const wm_nbits_args *a = s->ctx;
    if (a->bits == 8 && a->block_size % 8 == 0) {
        pack_b8_avx2(a, k0, kc, n0, nc, dst, pstride);
        return;
    }
    if (a->bits != 4) {
        wm_nbits_bsrc_pack(s, k0, kc, n0, nc, dst, pstride);
        return;
    }
    int64_t kb = wm_nbits_kblocks(a), colbytes = kb * a->block_size / 2;
    float w[8][32];
    for (int64_t p = 0; p * WM_NR < nc; p++) {
        float *d = dst + p * pstride;
        int64_t nv = nc - p * WM_NR < WM_NR ? nc - p * WM_NR : WM_NR;
        if (nv < WM_NR) memset(d, 0, (size_t)kc * WM_NR * sizeof(float));
        for (int64_t j0 = 0; j0 < nv; j0 += 8) {
            int64_t nj = nv - j0 < 8 ? nv - j0 : 8;
            for (int64_t g = k0 & ~(int64_t)31; g < k0 + kc; g += 32) {
                for (int64_t j = 0; j < nj; j++) deq32_b4(a, n0 + p * WM_NR + j0 + j, g, kb, colbytes, w[j]);
                if (nj == 8 && g >= k0 && g + 32 <= k0 + kc) {
                    for (int q = 0; q < 4; q++) {
                        __m256 r[8];
                        for (int j = 0; j < 8; j++) r[j] = _mm256_loadu_ps(w[j] + 8 * q);
                        tr8x8(r);
                        for (int i = 0; i < 8; i++) _mm256_storeu_ps(d + (g - k0 + 8 * q + i) * WM_NR + j0, r[i]);
                    }
                    continue;
                }
                int64_t lo_k = g < k0 ? k0 : g, hi_k = g + 32 < k0 + kc ? g + 32 : k0 + kc;
                for (int64_t j = 0; j < nj; j++)
                    for (int64_t k = lo_k; k < hi_k; k++) d[(k - k0) * WM_NR + j0 + j] = w[j][k - g];
            }
        }
    }
}

/* ------------------------------------------------------------ entry */

#ifndef WM_NBITS_PF
#define WM_NBITS_PF 2048
#endif

void wm_nbits_avx2(const wm_nbits_args *a, int ith, int nth) {
    if (a->M <= 0 || a->N <= 0) return;
    /* float zero points: every path below but the packed one reads them (zs_at, zp8_at, zp_of) */
    if ((a->bits != 4 && a->bits != 8) || a->block_size < 16 || (a->zero_points_f && !a->zero_points && a->packed)) {
        wm_nbits_generic(a, ith, nth);
        return;
    }
    if (a->packed) { /* wm_nbits_pack_sg32's layout */
        wm_nbits_packed_avx2(a, ith, nth);
        return;
    }
    if (a->M >= WM_NBITS_BIG_M && !wm_nbits_q8_avx2(a)) {
        wm_nbits_big(&wm_gemm_ukr_avx2, a, pack_nbits_avx2, ith, nth);
        return;
    }
    int64_t n0, n1;
    wm_nbits_q8 q;
    int q8 = wm_nbits_q8_avx2(a), i15 = !q8 && wm_nbits_use_i15(a);
    if (!wm_nbits_begin(a, ith, nth, q8 ? prep_q8 : i15 ? prep_i15 : prep_f32, &q, &n0, &n1)) return;
    float (*col)(const wm_nbits_args *, const wm_nbits_q8 *, int64_t, int64_t) =
        q8    ? (a->bits == 4 ? col_q8_b4 : col_q8_b8)
        : i15 ? (a->bits == 4 ? col_i15_b4 : col_i15_b8)
        : a->bits == 4 ? (a->block_size % 32 ? col_f32_b4 : col_f32_b4z) : (a->block_size % 16 ? col_f32_b8 : col_f32_b8z);
    /* Tiles: NB columns (their codes stay in L2) x MB rows (their activations stay in L1); within a
     * tile, column pairs share activation loads. A column's value does not depend on the tiling. */
    enum { NB = 128, MB = 16 };
    const int64_t colbytes = wm_nbits_kblocks(a) * a->block_size * a->bits / 8;
    for (int64_t nb = n0; nb < n1; nb += NB) {
        int64_t ne = n1 - nb < NB ? n1 : nb + NB;
        for (int64_t m0 = 0; m0 < a->M; m0 += MB) {
            int64_t me = a->M - m0 < MB ? a->M : m0 + MB, n = nb;
            if (q8 || i15)
                for (; n + 2 <= ne; n += 2) {
                    if (m0 == 0) { /* software prefetch ~4 KiB ahead: the hardware's stops at page ends */
                        const char *pf = (const char *)a->B + n * colbytes + WM_NBITS_PF;
                        const char *pe = (const char *)a->B + (a->N * colbytes);
                        for (int64_t o = 0; o < 2 * colbytes && pf + o < pe; o += 64) _mm_prefetch(pf + o, _MM_HINT_T0);
                    }
                    for (int64_t m = m0; m < me; m++) {
                        float o[2];
                        if (a->bits == 4) (i15 ? col2_i15_b4 : col2_q8_b4)(a, &q, n, m, o);
                        else (i15 ? cols_i15_b8 : cols_q8_b8)(a, &q, n, 2, m, o);
                        a->C[m * a->ldc + n] = o[0];
                        a->C[m * a->ldc + n + 1] = o[1];
                    }
                }
            for (; n < ne; n++)
                for (int64_t m = m0; m < me; m++) a->C[m * a->ldc + n] = col(a, &q, n, m);
        }
    }
    wm_epilogue_apply(&a->ep, &wm_gemm_ukr_avx2, a->C, a->ldc, 0, a->M, n0, n1);
}
