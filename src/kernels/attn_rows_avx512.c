/*
 * attn_rows_avx512.c - attention for a few query rows (decode) with
 * AVX-512, float32 keys and values (the float16 forms stay on AVX2):
 * attn_qk takes up to four query rows against four key rows at a time
 * over 16-float chunks of the head (masked tail) and folds the 16 sums
 * together, prefetching the keys ahead and the caller's value rows
 * alongside (the cache is read from memory once per step); attn_pv keeps eight query
 * rows x 32 output columns in registers per pass over the value rows, so
 * the heads of a KV group (up to 8) read each value row once per 32
 * columns instead of once per 4 rows x 16 columns.
 */
#include <immintrin.h>

#include "kernels/kernels_impl.h"
#include "kernels/reduce_avx512.h"

#define QK_PF 16 /* key rows ahead prefetched by attn_qk */
#define PV_PF 24 /* value rows ahead prefetched by attn_pv's first pass */

/* rows q .. q + R - 1 (ldq apart; R <= 4) against key rows k .. k + 3: the 4 x R sums fold at once
   (wm_reduce16_ps: quarter i = row i's four scores), 2.8 shuffles and adds per score instead of the 4.5 of a
   horizontal add per pair of rows */
#define QK_ROW(i)                                                                                          \
    if (R > i) {                                                                                           \
        __m512 x = _mm512_maskz_loadu_ps(mk, q + i * ldq + c);                                             \
        a##i = _mm512_fmadd_ps(x, w0, a##i), b##i = _mm512_fmadd_ps(x, w1, b##i);                           \
        c##i = _mm512_fmadd_ps(x, w2, c##i), e##i = _mm512_fmadd_ps(x, w3, e##i);                           \
    }
static inline __attribute__((always_inline)) void qk_tile(const int R, const float *q, int64_t ldq, const float *k,
                                                          int64_t ldk, int64_t d, __m512 vs, float *s, int64_t lds) {
    /* named accumulators (row i: a, b, c, e for keys 0..3): as an array GCC 12 kept them on the stack */
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    __m512 c0 = a0, c1 = a0, c2 = a0, c3 = a0, e0 = a0, e1 = a0, e2 = a0, e3 = a0;
    for (int64_t c = 0; c < d; c += 16) {
        __mmask16 mk = wm_tail16(d - c);
        __m512 w0 = _mm512_maskz_loadu_ps(mk, k + c), w1 = _mm512_maskz_loadu_ps(mk, k + ldk + c);
        __m512 w2 = _mm512_maskz_loadu_ps(mk, k + 2 * ldk + c), w3 = _mm512_maskz_loadu_ps(mk, k + 3 * ldk + c);
        QK_ROW(0) QK_ROW(1) QK_ROW(2) QK_ROW(3)
    }
    __m512 r = _mm512_mul_ps(wm_reduce16v_ps(a0, a1, a2, a3, b0, b1, b2, b3, c0, c1, c2, c3, e0, e1, e2, e3), vs);
    _mm_storeu_ps(s, _mm512_castps512_ps128(r));
    if (R > 1) _mm_storeu_ps(s + lds, _mm512_extractf32x4_ps(r, 1));
    if (R > 2) _mm_storeu_ps(s + 2 * lds, _mm512_extractf32x4_ps(r, 2));
    if (R > 3) _mm_storeu_ps(s + 3 * lds, _mm512_extractf32x4_ps(r, 3));
}
#undef QK_ROW

/* Key rows four at a time, each block meeting every query row (four at a time) while in L1. The key rows
   QK_PF ahead and the pf rows of the same keys (the values the caller reads next) are prefetched: over a
   cache too large for L3 the value pass then ran 30% faster (Qwen2.5-0.5B's 24 layers at 1024 tokens). */
static void z_attn_qk(int64_t m, int64_t n, int64_t d, const float *q, int64_t ldq, const float *k, int64_t ldk,
                      float scale, float *s, int64_t lds, const void *pf, int64_t pf_ld, int64_t pf_d) {
    int64_t j = 0;
    __m512 vs = _mm512_set1_ps(scale);
    /* addresses as integers: the key rows ahead may lie past the cache, which a prefetch may touch but
       pointer arithmetic may not reach */
    uintptr_t pk = (uintptr_t)k + (uintptr_t)(QK_PF * ldk * 4), pv = (uintptr_t)pf;
    for (; j + 4 <= n; j += 4) {
        for (int u = 0; u < 4; u++, pk += (uintptr_t)(4 * ldk), pv += pf ? (uintptr_t)(4 * pf_ld) : 0) {
            for (int64_t t = 0; t < 4 * d; t += 64) _mm_prefetch((const char *)(pk + (uintptr_t)t), _MM_HINT_T0);
            for (int64_t t = 0; pf && t < 4 * pf_d; t += 64) _mm_prefetch((const char *)(pv + (uintptr_t)t), _MM_HINT_T0);
        }
        const float *kj = k + j * ldk;
        int64_t r = 0;
        for (; r + 4 <= m; r += 4) qk_tile(4, q + r * ldq, ldq, kj, ldk, d, vs, s + r * lds + j, lds);
        switch (m - r) {
        case 3: qk_tile(3, q + r * ldq, ldq, kj, ldk, d, vs, s + r * lds + j, lds); break;
        case 2: qk_tile(2, q + r * ldq, ldq, kj, ldk, d, vs, s + r * lds + j, lds); break;
        case 1: qk_tile(1, q + r * ldq, ldq, kj, ldk, d, vs, s + r * lds + j, lds); break;
        default: break;
        }
    }
    for (; j < n; j++) {
        const float *kj = k + j * ldk;
        for (int64_t r = 0; r < m; r++) {
            const float *qa = q + r * ldq;
            __m512 a0 = _mm512_setzero_ps();
            for (int64_t c = 0; c < d; c += 16) {
                __mmask16 mk = wm_tail16(d - c);
                a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, qa + c), _mm512_maskz_loadu_ps(mk, kj + c), a0);
            }
            s[r * lds + j] = scale * _mm512_reduce_add_ps(a0);
        }
    }
}

/* one query row's two accumulators: weight p[j] times the value row's two halves */
#define PV_ACC(i) w = _mm512_set1_ps(pr##i[j]), a##i = _mm512_fmadd_ps(w, v0, a##i), b##i = _mm512_fmadd_ps(w, v1, b##i)
#define PV_STORE(i)                                                     \
    if (i < mr) {                                                       \
        _mm512_mask_storeu_ps(o + (r + i) * ldo + c, m0, a##i);         \
        _mm512_mask_storeu_ps(o + (r + i) * ldo + c + 16, m1, b##i);    \
    }

/* Eight query rows x 32 output columns per pass over the value rows (rows past m repeat the last one, their
   sums dropped; columns past d masked). The sixteen accumulators are named variables: as an array GCC 12
   stored them to the stack on every value row. */
static void z_attn_pv(int64_t m, int64_t n, int64_t d, const float *p, int64_t ldp, const float *v, int64_t ldv,
                      float *o, int64_t ldo) {
    for (int64_t r = 0; r < m; r += 8) {
        int64_t mr = m - r < 8 ? m - r : 8;
        const float *pr0 = p + r * ldp, *pr1 = p + (r + (1 < mr ? 1 : mr - 1)) * ldp;
        const float *pr2 = p + (r + (2 < mr ? 2 : mr - 1)) * ldp, *pr3 = p + (r + (3 < mr ? 3 : mr - 1)) * ldp;
        const float *pr4 = p + (r + (4 < mr ? 4 : mr - 1)) * ldp, *pr5 = p + (r + (5 < mr ? 5 : mr - 1)) * ldp;
        const float *pr6 = p + (r + (6 < mr ? 6 : mr - 1)) * ldp, *pr7 = p + (r + (7 < mr ? 7 : mr - 1)) * ldp;
        for (int64_t c = 0; c < d; c += 32) {
            __mmask16 m0 = wm_tail16(d - c), m1 = d - c > 16 ? wm_tail16(d - c - 16) : 0;
            __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
            __m512 b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0, b6 = a0, b7 = a0, w;
            const float *x = v + c;
            for (int64_t j = 0; j < n; j++, x += ldv) {
                if (c == 0) /* rows ahead, maybe past the cache: the address as an integer */
                    for (int64_t t = 0; t < d; t += 16)
                        _mm_prefetch((const char *)((uintptr_t)x + (uintptr_t)((PV_PF * ldv + t) * 4)), _MM_HINT_T0);
                __m512 v0 = _mm512_maskz_loadu_ps(m0, x), v1 = _mm512_maskz_loadu_ps(m1, x + 16);
                PV_ACC(0); PV_ACC(1); PV_ACC(2); PV_ACC(3); PV_ACC(4); PV_ACC(5); PV_ACC(6); PV_ACC(7);
            }
            PV_STORE(0) PV_STORE(1) PV_STORE(2) PV_STORE(3) PV_STORE(4) PV_STORE(5) PV_STORE(6) PV_STORE(7)
        }
    }
}

void wm_attn_rows_fill_avx512(wm_kernels *k) {
    k->attn_qk = z_attn_qk;
    k->attn_pv = z_attn_pv;
}
