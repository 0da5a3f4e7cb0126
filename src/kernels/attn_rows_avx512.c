/*
 * attn_rows_avx512.c - attention for a few query rows (decode) with
 * AVX-512, float32 keys and values (the float16 forms stay on AVX2):
 * attn_qk takes two query rows against four key rows at a time over
 * 16-float chunks of the head (masked tail), then folds each 512-bit sum
 * to 256 bits for the AVX2 horizontal add; attn_pv keeps eight query
 * rows x 32 output columns in registers per pass over the value rows, so
 * the heads of a KV group (up to 8) read each value row once per 32
 * columns instead of once per 4 rows x 16 columns.
 */
#include <immintrin.h>

#include "kernels/kernels_impl.h"

static inline __mmask16 tail16(int64_t n) { return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1); }

static inline __m256 fold(__m512 v) {
    return _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

/* the four sums of a0..a3 as one vector */
static inline __m128 hsum4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(fold(a0), fold(a1)), _mm256_hadd_ps(fold(a2), fold(a3)));
    return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

/* two query rows (qa, qb) against key rows k0 .. k0 + 3 (ldk apart) */
static inline void qk_block4(const float *qa, const float *qb, const float *k0, int64_t ldk, int64_t d, __m128 vs,
                             float *sa, float *sb, int two) {
    const float *k1 = k0 + ldk, *k2 = k1 + ldk, *k3 = k2 + ldk;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (int64_t c = 0; c < d; c += 16) {
        __mmask16 mk = tail16(d - c);
        __m512 x = _mm512_maskz_loadu_ps(mk, qa + c), y = _mm512_maskz_loadu_ps(mk, qb + c);
        __m512 w0 = _mm512_maskz_loadu_ps(mk, k0 + c), w1 = _mm512_maskz_loadu_ps(mk, k1 + c);
        __m512 w2 = _mm512_maskz_loadu_ps(mk, k2 + c), w3 = _mm512_maskz_loadu_ps(mk, k3 + c);
        a0 = _mm512_fmadd_ps(x, w0, a0), b0 = _mm512_fmadd_ps(y, w0, b0);
        a1 = _mm512_fmadd_ps(x, w1, a1), b1 = _mm512_fmadd_ps(y, w1, b1);
        a2 = _mm512_fmadd_ps(x, w2, a2), b2 = _mm512_fmadd_ps(y, w2, b2);
        a3 = _mm512_fmadd_ps(x, w3, a3), b3 = _mm512_fmadd_ps(y, w3, b3);
    }
    _mm_storeu_ps(sa, _mm_mul_ps(hsum4(a0, a1, a2, a3), vs));
    if (two) _mm_storeu_ps(sb, _mm_mul_ps(hsum4(b0, b1, b2, b3), vs));
}

static void z_attn_qk(int64_t m, int64_t n, int64_t d, const float *q, int64_t ldq, const float *k, int64_t ldk,
                      float scale, float *s, int64_t lds) {
    int64_t j = 0;
    __m128 vs = _mm_set1_ps(scale);
    for (; j + 4 <= n; j += 4)
        for (int64_t r = 0; r < m; r += 2) {
            int two = r + 1 < m;
            const float *qa = q + r * ldq;
            qk_block4(qa, two ? qa + ldq : qa, k + j * ldk, ldk, d, vs, s + r * lds + j, s + (r + two) * lds + j, two);
        }
    for (; j < n; j++) {
        const float *kj = k + j * ldk;
        for (int64_t r = 0; r < m; r++) {
            const float *qa = q + r * ldq;
            __m512 a0 = _mm512_setzero_ps();
            for (int64_t c = 0; c < d; c += 16) {
                __mmask16 mk = tail16(d - c);
                a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, qa + c), _mm512_maskz_loadu_ps(mk, kj + c), a0);
            }
            s[r * lds + j] = scale * _mm512_reduce_add_ps(a0);
        }
    }
}

/* Eight query rows x 32 output columns per pass over the value rows (rows past m repeat the last one, their
   sums dropped; columns past d masked). */
static void z_attn_pv(int64_t m, int64_t n, int64_t d, const float *p, int64_t ldp, const float *v, int64_t ldv,
                      float *o, int64_t ldo) {
    for (int64_t r = 0; r < m; r += 8) {
        int64_t mr = m - r < 8 ? m - r : 8;
        const float *pr[8];
        for (int i = 0; i < 8; i++) pr[i] = p + (r + (i < mr ? i : mr - 1)) * ldp;
        for (int64_t c = 0; c < d; c += 32) {
            __mmask16 m0 = tail16(d - c), m1 = d - c > 16 ? tail16(d - c - 16) : 0;
            __m512 acc[8][2];
            for (int i = 0; i < 8; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
            const float *x = v + c;
            for (int64_t j = 0; j < n; j++, x += ldv) {
                __m512 v0 = _mm512_maskz_loadu_ps(m0, x), v1 = _mm512_maskz_loadu_ps(m1, x + 16);
                #pragma GCC unroll 8
                for (int i = 0; i < 8; i++) {
                    __m512 w = _mm512_set1_ps(pr[i][j]);
                    acc[i][0] = _mm512_fmadd_ps(w, v0, acc[i][0]);
                    acc[i][1] = _mm512_fmadd_ps(w, v1, acc[i][1]);
                }
            }
            for (int64_t i = 0; i < mr; i++) {
                _mm512_mask_storeu_ps(o + (r + i) * ldo + c, m0, acc[i][0]);
                if (m1) _mm512_mask_storeu_ps(o + (r + i) * ldo + c + 16, m1, acc[i][1]);
            }
        }
    }
}

void wm_attn_rows_fill_avx512(wm_kernels *k) {
    k->attn_qk = z_attn_qk;
    k->attn_pv = z_attn_pv;
}
