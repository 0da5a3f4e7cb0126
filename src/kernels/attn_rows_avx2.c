/*
 * attn_rows_avx2.c - attention for a few query rows (decode) with AVX2/FMA,
 * float32 or float16 (F16C, converted on load) keys and values:
 * attn_qk takes two query rows against four key rows at a time (8
 * accumulators) streaming the keys once, in order, each block meeting every
 * query row while it is in L1; attn_pv four query rows x 16 columns per
 * pass over the value rows. Each body is written once, for element size
 * h (0: float32, 1: float16), and inlined into both entry points.
 * attn_qk_packed (whole-sequence attention) is the 6 x 16 tile of a GEMM
 * with K = the head size over wm_attn_pack_k's panels: six query rows
 * broadcast against a panel's two vectors of 16 keys per element, the 12
 * sums in registers, no horizontal adds; attn_exp_rows their unmasked
 * online softmax in two passes (max; exp with the sum: vmath_simd.h's
 * v_exp_nonpos), normalized by the caller.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "core/half.h"
#include "kernels/kernels_impl.h"
#include "kernels/vmath_avx2.h"

#define KV_INLINE static inline __attribute__((always_inline))
#define QK_PF 16 /* key rows ahead prefetched by attn_qk */

static inline float hsum8(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

/* the four sums of a0..a3 as one vector */
static inline __m128 hsum4x8(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

/* row j of a key/value matrix with leading dimension ld (elements) */
KV_INLINE const void *kv_row(const void *p, int64_t j, int64_t ld, int h) {
    return (const uint8_t *)p + (size_t)(j * ld) * (h ? 2u : 4u);
}

/* eight elements from c on, as float32 */
KV_INLINE __m256 kv_load8(const void *p, int64_t c, int h) {
    if (h) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + c)));
    return _mm256_loadu_ps((const float *)p + c);
}

KV_INLINE float kv_at(const void *p, int64_t c, int h) {
    return h ? wm_f16_to_f32(((const uint16_t *)p)[c]) : ((const float *)p)[c];
}

static inline float dot_tail(const float *a, const void *b, int64_t c0, int64_t d, int h) {
    float acc = 0.0f;
    for (int64_t c = c0; c < d; c++) acc += a[c] * kv_at(b, c, h);
    return acc;
}

/* keys of one block: two query rows (qa, qb) against four key rows; d8 = d rounded down to 8 */
KV_INLINE void qk_block4(const float *qa, const float *qb, const void *k0, int64_t ldk, int64_t d, int64_t d8,
                         __m128 vs, float *sa, float *sb, int two, int h) {
    const void *k1 = kv_row(k0, 1, ldk, h), *k2 = kv_row(k0, 2, ldk, h), *k3 = kv_row(k0, 3, ldk, h);
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (int64_t c = 0; c < d8; c += 8) {
        __m256 x = _mm256_loadu_ps(qa + c), y = _mm256_loadu_ps(qb + c);
        __m256 w0 = kv_load8(k0, c, h), w1 = kv_load8(k1, c, h);
        __m256 w2 = kv_load8(k2, c, h), w3 = kv_load8(k3, c, h);
        a0 = _mm256_fmadd_ps(x, w0, a0), b0 = _mm256_fmadd_ps(y, w0, b0);
        a1 = _mm256_fmadd_ps(x, w1, a1), b1 = _mm256_fmadd_ps(y, w1, b1);
        a2 = _mm256_fmadd_ps(x, w2, a2), b2 = _mm256_fmadd_ps(y, w2, b2);
        a3 = _mm256_fmadd_ps(x, w3, a3), b3 = _mm256_fmadd_ps(y, w3, b3);
    }
    __m128 ra = hsum4x8(a0, a1, a2, a3), rb = hsum4x8(b0, b1, b2, b3);
    if (d8 < d) {
        ra = _mm_add_ps(ra, _mm_setr_ps(dot_tail(qa, k0, d8, d, h), dot_tail(qa, k1, d8, d, h),
                                        dot_tail(qa, k2, d8, d, h), dot_tail(qa, k3, d8, d, h)));
        rb = _mm_add_ps(rb, _mm_setr_ps(dot_tail(qb, k0, d8, d, h), dot_tail(qb, k1, d8, d, h),
                                        dot_tail(qb, k2, d8, d, h), dot_tail(qb, k3, d8, d, h)));
    }
    _mm_storeu_ps(sa, _mm_mul_ps(ra, vs));
    if (two) _mm_storeu_ps(sb, _mm_mul_ps(rb, vs));
}

/* Keys stream once, in order (the hardware prefetcher's case): each block of four key rows meets
   every query row, two at a time, while it is in L1. */
KV_INLINE void qk_rows(int64_t m, int64_t n, int64_t d, const float *q, int64_t ldq, const void *k, int64_t ldk,
                       float scale, float *s, int64_t lds, const void *pf, int64_t pf_ld, int64_t pf_d, int h) {
    int64_t d8 = d & ~(int64_t)7, j = 0, es = h ? 2 : 4;
    __m128 vs = _mm_set1_ps(scale);
    /* prefetches: keys QK_PF rows ahead, pf alongside; addresses as integers, as the rows ahead may lie
       past the cache (a prefetch may touch them, pointer arithmetic may not reach them) */
    uintptr_t pk = (uintptr_t)k + (uintptr_t)(QK_PF * es * ldk), pv = (uintptr_t)pf;
    for (; j + 4 <= n; j += 4) {
        for (int u = 0; u < 4; u++, pk += (uintptr_t)(es * ldk), pv += pf ? (uintptr_t)(es * pf_ld) : 0) {
            for (int64_t t = 0; t < es * d; t += 64) _mm_prefetch((const char *)(pk + (uintptr_t)t), _MM_HINT_T0);
            for (int64_t t = 0; pf && t < es * pf_d; t += 64) _mm_prefetch((const char *)(pv + (uintptr_t)t), _MM_HINT_T0);
        }
        for (int64_t r = 0; r < m; r += 2) {
            int two = r + 1 < m;
            const float *qa = q + r * ldq;
            qk_block4(qa, two ? qa + ldq : qa, kv_row(k, j, ldk, h), ldk, d, d8, vs, s + r * lds + j,
                      s + (r + two) * lds + j, two, h);
        }
    }
    for (; j < n; j++) {
        const void *kj = kv_row(k, j, ldk, h);
        for (int64_t r = 0; r < m; r++) {
            const float *qa = q + r * ldq;
            __m256 a0 = _mm256_setzero_ps();
            for (int64_t c = 0; c < d8; c += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(qa + c), kv_load8(kj, c, h), a0);
            s[r * lds + j] = scale * (hsum8(a0) + dot_tail(qa, kj, d8, d, h));
        }
    }
}

/* Six query rows x 16 output columns (12 accumulators) per pass over the value rows: the blocks of a
   whole-sequence tile (attn_core's 12 rows), where each pass costs two loads of the value row per 12 FMAs. */
KV_INLINE void pv_six(int64_t n, int64_t d16, const float *p, int64_t ldp, const void *v, int64_t ldv, float *o,
                      int64_t ldo, int h) {
    const float *p0 = p, *p1 = p + ldp, *p2 = p + 2 * ldp, *p3 = p + 3 * ldp, *p4 = p + 4 * ldp, *p5 = p + 5 * ldp;
    for (int64_t c = 0; c < d16; c += 16) {
        __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00,
               c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
        for (int64_t j = 0; j < n; j++) {
            const void *x = kv_row(v, j, ldv, h);
            __m256 v0 = kv_load8(x, c, h), v1 = kv_load8(x, c + 8, h), w;
            w = _mm256_broadcast_ss(p0 + j), c00 = _mm256_fmadd_ps(w, v0, c00), c01 = _mm256_fmadd_ps(w, v1, c01);
            w = _mm256_broadcast_ss(p1 + j), c10 = _mm256_fmadd_ps(w, v0, c10), c11 = _mm256_fmadd_ps(w, v1, c11);
            w = _mm256_broadcast_ss(p2 + j), c20 = _mm256_fmadd_ps(w, v0, c20), c21 = _mm256_fmadd_ps(w, v1, c21);
            w = _mm256_broadcast_ss(p3 + j), c30 = _mm256_fmadd_ps(w, v0, c30), c31 = _mm256_fmadd_ps(w, v1, c31);
            w = _mm256_broadcast_ss(p4 + j), c40 = _mm256_fmadd_ps(w, v0, c40), c41 = _mm256_fmadd_ps(w, v1, c41);
            w = _mm256_broadcast_ss(p5 + j), c50 = _mm256_fmadd_ps(w, v0, c50), c51 = _mm256_fmadd_ps(w, v1, c51);
        }
        __m256 acc[12] = {c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51};
        for (int64_t i = 0; i < 6; i++) {
            _mm256_storeu_ps(o + i * ldo + c, acc[2 * i]);
            _mm256_storeu_ps(o + i * ldo + c + 8, acc[2 * i + 1]);
        }
    }
}

/* Four query rows x 16 output columns in registers per pass over the value rows (rows past m
   repeat the last one, results dropped); the passes for later columns find the rows in L2. Blocks of
   six rows (pv_six) where six rows remain and at least twelve or exactly six: a decode group of up to
   8 rows keeps its one or two four-row blocks. */
KV_INLINE void pv_rows(int64_t m, int64_t n, int64_t d, const float *p, int64_t ldp, const void *v, int64_t ldv,
                       float *o, int64_t ldo, int h) {
    int64_t d16 = d & ~(int64_t)15;
    for (int64_t r = 0; r < m;) {
        if (m - r >= 12 || m - r == 6) {
            pv_six(n, d16, p + r * ldp, ldp, v, ldv, o + r * ldo, ldo, h);
            for (int64_t i = 0; i < 6 && d16 < d; i++) { /* columns past the last 16 */
                float *y = o + (r + i) * ldo;
                const float *pr = p + (r + i) * ldp;
                for (int64_t c = d16; c < d; c++) {
                    float acc = 0.0f;
                    for (int64_t j = 0; j < n; j++) acc += pr[j] * kv_at(kv_row(v, j, ldv, h), c, h);
                    y[c] = acc;
                }
            }
            r += 6;
            continue;
        }
        int64_t mr = m - r < 4 ? m - r : 4;
        const float *pr[4];
        for (int i = 0; i < 4; i++) pr[i] = p + (r + (i < mr ? i : mr - 1)) * ldp;
        for (int64_t c = 0; c < d16; c += 16) {
            __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00,
                   c31 = c00;
            for (int64_t j = 0; j < n; j++) {
                const void *x = kv_row(v, j, ldv, h);
                __m256 v0 = kv_load8(x, c, h), v1 = kv_load8(x, c + 8, h), w;
                w = _mm256_broadcast_ss(pr[0] + j), c00 = _mm256_fmadd_ps(w, v0, c00), c01 = _mm256_fmadd_ps(w, v1, c01);
                w = _mm256_broadcast_ss(pr[1] + j), c10 = _mm256_fmadd_ps(w, v0, c10), c11 = _mm256_fmadd_ps(w, v1, c11);
                w = _mm256_broadcast_ss(pr[2] + j), c20 = _mm256_fmadd_ps(w, v0, c20), c21 = _mm256_fmadd_ps(w, v1, c21);
                w = _mm256_broadcast_ss(pr[3] + j), c30 = _mm256_fmadd_ps(w, v0, c30), c31 = _mm256_fmadd_ps(w, v1, c31);
            }
            __m256 acc[8] = {c00, c01, c10, c11, c20, c21, c30, c31};
            for (int64_t i = 0; i < mr; i++) {
                _mm256_storeu_ps(o + (r + i) * ldo + c, acc[2 * i]);
                _mm256_storeu_ps(o + (r + i) * ldo + c + 8, acc[2 * i + 1]);
            }
        }
        for (int64_t i = 0; i < mr && d16 < d; i++) { /* columns past the last 16 */
            float *y = o + (r + i) * ldo;
            for (int64_t c = d16; c < d; c++) {
                float acc = 0.0f;
                for (int64_t j = 0; j < n; j++) acc += pr[i][j] * kv_at(kv_row(v, j, ldv, h), c, h);
                y[c] = acc;
            }
        }
        r += mr;
    }
}

static void a_attn_qk(int64_t m, int64_t n, int64_t d, const float *q, int64_t ldq, const float *k, int64_t ldk,
                      float scale, float *s, int64_t lds, const void *pf, int64_t pf_ld, int64_t pf_d) {
    qk_rows(m, n, d, q, ldq, k, ldk, scale, s, lds, pf, pf_ld, pf_d, 0);
}

static void a_attn_qk_h(int64_t m, int64_t n, int64_t d, const float *q, int64_t ldq, const uint16_t *k, int64_t ldk,
                        float scale, float *s, int64_t lds, const void *pf, int64_t pf_ld, int64_t pf_d) {
    qk_rows(m, n, d, q, ldq, k, ldk, scale, s, lds, pf, pf_ld, pf_d, 1);
}

static void a_attn_pv(int64_t m, int64_t n, int64_t d, const float *p, int64_t ldp, const float *v, int64_t ldv,
                      float *o, int64_t ldo) {
    pv_rows(m, n, d, p, ldp, v, ldv, o, ldo, 0);
}

static void a_attn_pv_h(int64_t m, int64_t n, int64_t d, const float *p, int64_t ldp, const uint16_t *v, int64_t ldv,
                        float *o, int64_t ldo) {
    pv_rows(m, n, d, p, ldp, v, ldv, o, ldo, 1);
}

/* Up to six query rows (R) x one panel of 16 keys: 12 accumulators, per head element one broadcast per row and the
   panel's two vectors; scaled sums to s (w < 16: the panel's first w keys only). */
#define QKP_ROW(i)                                                                                          \
    if (R > i) {                                                                                           \
        __m256 x = _mm256_broadcast_ss(q##i + c);                                                          \
        a##i = _mm256_fmadd_ps(x, k0, a##i), b##i = _mm256_fmadd_ps(x, k1, b##i);                           \
    }
#define QKP_STORE(i)                                                                                        \
    if (R > i) {                                                                                           \
        if (w == WM_ATTN_KPANEL) {                                                                         \
            _mm256_storeu_ps(s + i * lds, _mm256_mul_ps(a##i, vs));                                        \
            _mm256_storeu_ps(s + i * lds + 8, _mm256_mul_ps(b##i, vs));                                    \
        } else {                                                                                           \
            float t[WM_ATTN_KPANEL];                                                                       \
            _mm256_storeu_ps(t, _mm256_mul_ps(a##i, vs));                                                  \
            _mm256_storeu_ps(t + 8, _mm256_mul_ps(b##i, vs));                                              \
            for (int64_t j = 0; j < w; j++) s[i * lds + j] = t[j];                                         \
        }                                                                                                  \
    }
KV_INLINE void qkp_tile(const int R, const float *q, int64_t ldq, const float *kp, int64_t d, __m256 vs, float *s,
                        int64_t lds, int64_t w) {
    const float *q0 = q, *q1 = q + (R > 1 ? ldq : 0), *q2 = q + (R > 2 ? 2 * ldq : 0);
    const float *q3 = q + (R > 3 ? 3 * ldq : 0), *q4 = q + (R > 4 ? 4 * ldq : 0), *q5 = q + (R > 5 ? 5 * ldq : 0);
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0;
    __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0;
    for (int64_t c = 0; c < d; c++, kp += WM_ATTN_KPANEL) {
        __m256 k0 = _mm256_loadu_ps(kp), k1 = _mm256_loadu_ps(kp + 8);
        QKP_ROW(0) QKP_ROW(1) QKP_ROW(2) QKP_ROW(3) QKP_ROW(4) QKP_ROW(5)
    }
    QKP_STORE(0) QKP_STORE(1) QKP_STORE(2) QKP_STORE(3) QKP_STORE(4) QKP_STORE(5)
}

/* Panels outer, blocks of six rows inner: a panel (d x 16 floats) meets every row of the call while in L1. */
static void a_attn_qk_packed(int64_t m, int64_t n, int64_t d, const float *q, int64_t ldq, const float *kp,
                             float scale, float *s, int64_t lds) {
    __m256 vs = _mm256_set1_ps(scale);
    for (int64_t j = 0; j < n; j += WM_ATTN_KPANEL, kp += d * WM_ATTN_KPANEL) {
        int64_t w = n - j < WM_ATTN_KPANEL ? n - j : WM_ATTN_KPANEL;
        for (int64_t r = 0; r < m; r += 6) {
            const float *qr = q + r * ldq;
            float *sr = s + r * lds + j;
            switch (m - r < 6 ? m - r : 6) {
            case 6: qkp_tile(6, qr, ldq, kp, d, vs, sr, lds, w); break;
            case 5: qkp_tile(5, qr, ldq, kp, d, vs, sr, lds, w); break;
            case 4: qkp_tile(4, qr, ldq, kp, d, vs, sr, lds, w); break;
            case 3: qkp_tile(3, qr, ldq, kp, d, vs, sr, lds, w); break;
            case 2: qkp_tile(2, qr, ldq, kp, d, vs, sr, lds, w); break;
            default: qkp_tile(1, qr, ldq, kp, d, vs, sr, lds, w); break;
            }
        }
    }
}

/* wm_attn_pack_k's panels: per panel of 16 full keys and per 8 head elements two 8 x 8 transposes in registers (one
   per 8 keys), each output row of 8 keys one store; the key rows PK_PF ahead prefetched (a fused projection's keys
   lie a row of q, k and v apart, past the hardware prefetcher's page: each unit's first read of them missed the
   cache, the scalar copy stalling on every row). A short last panel or d not a multiple of 8: the plain copy. */
#define PK_PF 32
static void a_attn_pack_k(int64_t n, int64_t d, const float *k, int64_t ldk, float *dst) {
    int64_t d8 = d & ~(int64_t)7;
    uintptr_t pf = (uintptr_t)k + (uintptr_t)(PK_PF * ldk) * sizeof(float);
    for (int64_t j0 = 0; j0 < n; j0 += WM_ATTN_KPANEL, dst += d * WM_ATTN_KPANEL) {
        int64_t w = n - j0 < WM_ATTN_KPANEL ? n - j0 : WM_ATTN_KPANEL;
        for (int64_t i = 0; i < WM_ATTN_KPANEL; i++, pf += (uintptr_t)ldk * sizeof(float))
            for (int64_t t = 0; j0 + PK_PF + i < n && t < d * (int64_t)sizeof(float); t += 64)
                _mm_prefetch((const char *)(pf + (uintptr_t)t), _MM_HINT_T0);
        if (w < WM_ATTN_KPANEL || d8 < d) {
            memset(dst, 0, (size_t)(d * WM_ATTN_KPANEL) * sizeof *dst);
            for (int64_t i = 0; i < w; i++) {
                const float *kr = k + (j0 + i) * ldk;
                for (int64_t c = 0; c < d; c++) dst[c * WM_ATTN_KPANEL + i] = kr[c];
            }
            continue;
        }
        for (int64_t i0 = 0; i0 < WM_ATTN_KPANEL; i0 += 8) {
            const float *r = k + (j0 + i0) * ldk;
            for (int64_t c = 0; c < d8; c += 8) {
                __m256 r0 = _mm256_loadu_ps(r + c), r1 = _mm256_loadu_ps(r + ldk + c);
                __m256 r2 = _mm256_loadu_ps(r + 2 * ldk + c), r3 = _mm256_loadu_ps(r + 3 * ldk + c);
                __m256 r4 = _mm256_loadu_ps(r + 4 * ldk + c), r5 = _mm256_loadu_ps(r + 5 * ldk + c);
                __m256 r6 = _mm256_loadu_ps(r + 6 * ldk + c), r7 = _mm256_loadu_ps(r + 7 * ldk + c);
                __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
                __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
                __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
                __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
                __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
                __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
                __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
                __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
                float *o = dst + c * WM_ATTN_KPANEL + i0;
                _mm256_storeu_ps(o, _mm256_permute2f128_ps(u0, u4, 0x20));
                _mm256_storeu_ps(o + WM_ATTN_KPANEL, _mm256_permute2f128_ps(u1, u5, 0x20));
                _mm256_storeu_ps(o + 2 * WM_ATTN_KPANEL, _mm256_permute2f128_ps(u2, u6, 0x20));
                _mm256_storeu_ps(o + 3 * WM_ATTN_KPANEL, _mm256_permute2f128_ps(u3, u7, 0x20));
                _mm256_storeu_ps(o + 4 * WM_ATTN_KPANEL, _mm256_permute2f128_ps(u0, u4, 0x31));
                _mm256_storeu_ps(o + 5 * WM_ATTN_KPANEL, _mm256_permute2f128_ps(u1, u5, 0x31));
                _mm256_storeu_ps(o + 6 * WM_ATTN_KPANEL, _mm256_permute2f128_ps(u2, u6, 0x31));
                _mm256_storeu_ps(o + 7 * WM_ATTN_KPANEL, _mm256_permute2f128_ps(u3, u7, 0x31));
            }
        }
    }
}

/* Per row two passes over the block: the max, then exp in place (vmath_simd.h's v_exp_nonpos) with the sum (the
   tail through a bounce buffer of -inf); the running max and sum as attn_exp_rows says. */
static void a_attn_exp_rows(int64_t m, int64_t n, float *s, int64_t lds, float *mx, float *sum, float *alpha) {
    for (int64_t r = 0; r < m; r++) {
        float *x = s + r * lds, t[8];
        int64_t j = 0, n8 = n & ~(int64_t)7;
        __m256 vm = _mm256_set1_ps(mx[r]);
        for (; j < n8; j += 8) vm = _mm256_max_ps(_mm256_loadu_ps(x + j), vm);
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(vm), _mm256_extractf128_ps(vm, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        float m1 = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
        for (; j < n; j++) m1 = x[j] > m1 ? x[j] : m1;
        __m256 vmx = _mm256_set1_ps(m1 == -INFINITY ? 0.0f : m1), acc = _mm256_setzero_ps();
        for (j = 0; j < n8; j += 8) {
            __m256 e = v_exp_nonpos(_mm256_sub_ps(_mm256_loadu_ps(x + j), vmx));
            _mm256_storeu_ps(x + j, e);
            acc = _mm256_add_ps(acc, e);
        }
        if (j < n) {
            for (int i = 0; i < 8; i++) t[i] = j + i < n ? x[j + i] : -INFINITY;
            __m256 e = v_exp_nonpos(_mm256_sub_ps(_mm256_loadu_ps(t), vmx));
            _mm256_storeu_ps(t, e);
            for (int64_t i = 0; j + i < n; i++) x[j + i] = t[i];
            acc = _mm256_add_ps(acc, e);
        }
        alpha[r] = mx[r] == -INFINITY ? 0.0f : expf(mx[r] - m1);
        sum[r] = sum[r] * alpha[r] + hsum8(acc);
        mx[r] = m1;
    }
}

void wm_attn_rows_fill_avx2(wm_kernels *k) {
    k->attn_qk_packed = a_attn_qk_packed;
    k->attn_pack_k = a_attn_pack_k;
    k->attn_exp_rows = a_attn_exp_rows;
    k->attn_qk = a_attn_qk;
    k->attn_pv = a_attn_pv;
    k->attn_qk_h = a_attn_qk_h;
    k->attn_pv_h = a_attn_pv_h;
}
