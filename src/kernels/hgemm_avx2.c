/*
 * hgemm_avx2.c - fp16-weight GEMM/GEMV with F16C: for small M a GEMV that
 * converts 8 halves per vcvtph2ps straight from the weight stream (memory
 * bound: weights are read once at full bandwidth); for large M the SGEMM
 * driver with B panels converted to fp32 while packing. Both read the
 * weights as stored or as wm_hgemm_pack_b panels (sessions pack constants).
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/kernels_impl.h"

static inline __m256 ld8h(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* y[0:nc] = sum_k x[k] B[k][0:nc], B half row-major (ld). Column chunks of 512 with y in L1 and
 * 4 rows of B per pass: long contiguous reads of every row (few TLB misses, prefetcher friendly).
 * Per column the arithmetic is one FMA chain over k in order, whatever the chunking. */
static void gemv_h_rows(int64_t K, const float *x, const uint16_t *B, int64_t ld, int64_t nc, float *y) {
    for (int64_t j0 = 0; j0 < nc; j0 += 4096) {
        int64_t w = nc - j0 < 4096 ? nc - j0 : 4096, w8 = w & ~(int64_t)7;
        float *yc = y + j0;
        memset(yc, 0, (size_t)w * sizeof(float));
        int64_t k = 0;
        for (; k + 4 <= K; k += 4) {
            const uint16_t *b0 = B + k * ld + j0, *b1 = b0 + ld, *b2 = b1 + ld, *b3 = b2 + ld;
            __m256 a0 = _mm256_broadcast_ss(x + k), a1 = _mm256_broadcast_ss(x + k + 1);
            __m256 a2 = _mm256_broadcast_ss(x + k + 2), a3 = _mm256_broadcast_ss(x + k + 3);
            for (int64_t j = 0; j < w8; j += 8) {
                __m256 acc = _mm256_loadu_ps(yc + j);
                acc = _mm256_fmadd_ps(a0, ld8h(b0 + j), acc);
                acc = _mm256_fmadd_ps(a1, ld8h(b1 + j), acc);
                acc = _mm256_fmadd_ps(a2, ld8h(b2 + j), acc);
                acc = _mm256_fmadd_ps(a3, ld8h(b3 + j), acc);
                _mm256_storeu_ps(yc + j, acc);
            }
            for (int64_t j = w8; j < w; j++) {
                float acc = yc[j];
                acc = __builtin_fmaf(x[k], _cvtsh_ss(b0[j]), acc);
                acc = __builtin_fmaf(x[k + 1], _cvtsh_ss(b1[j]), acc);
                acc = __builtin_fmaf(x[k + 2], _cvtsh_ss(b2[j]), acc);
                acc = __builtin_fmaf(x[k + 3], _cvtsh_ss(b3[j]), acc);
                yc[j] = acc;
            }
        }
        for (; k < K; k++) {
            const uint16_t *b0 = B + k * ld + j0;
            __m256 a0 = _mm256_broadcast_ss(x + k);
            for (int64_t j = 0; j < w8; j += 8)
                _mm256_storeu_ps(yc + j, _mm256_fmadd_ps(a0, ld8h(b0 + j), _mm256_loadu_ps(yc + j)));
            for (int64_t j = w8; j < w; j++) yc[j] = __builtin_fmaf(x[k], _cvtsh_ss(b0[j]), yc[j]);
        }
    }
}

/* one row's dot with a half row: 2 accumulators over 16-element steps, then a scalar FMA tail */
static inline float dot_h(int64_t K, const float *x, const uint16_t *b) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), ld8h(b + k), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 8), ld8h(b + k + 8), s1);
    }
    float t = 0;
    for (; k < K; k++) t = __builtin_fmaf(x[k], _cvtsh_ss(b[k]), t);
    return hsum(_mm256_add_ps(s0, s1)) + t;
}

/* y[n - n0] = dot(x, B[n,:]) for n in [n0, n1): 4 rows per pass (4 streams), the same per-row arithmetic */
static void gemv_h_trans(int64_t K, const float *x, const uint16_t *B, int64_t ld, int64_t n0, int64_t n1, float *y) {
    int64_t n = n0;
    for (; n + 4 <= n1; n += 4) {
        const uint16_t *b0 = B + n * ld, *b1 = b0 + ld, *b2 = b1 + ld, *b3 = b2 + ld;
        __m256 p0 = _mm256_setzero_ps(), q0 = p0, p1 = p0, q1 = p0, p2 = p0, q2 = p0, p3 = p0, q3 = p0;
        int64_t k = 0;
        const uint16_t *pf = b0 + 4 * ld; /* the next 4 rows, prefetched as these are read */
        for (; k + 16 <= K; k += 16) {
            if (n + 8 <= n1 && !(k & 31)) {
                _mm_prefetch((const char *)(pf + k), _MM_HINT_T0);
                _mm_prefetch((const char *)(pf + ld + k), _MM_HINT_T0);
                _mm_prefetch((const char *)(pf + 2 * ld + k), _MM_HINT_T0);
                _mm_prefetch((const char *)(pf + 3 * ld + k), _MM_HINT_T0);
            }
            __m256 x0 = _mm256_loadu_ps(x + k), x1 = _mm256_loadu_ps(x + k + 8);
            p0 = _mm256_fmadd_ps(x0, ld8h(b0 + k), p0);
            q0 = _mm256_fmadd_ps(x1, ld8h(b0 + k + 8), q0);
            p1 = _mm256_fmadd_ps(x0, ld8h(b1 + k), p1);
            q1 = _mm256_fmadd_ps(x1, ld8h(b1 + k + 8), q1);
            p2 = _mm256_fmadd_ps(x0, ld8h(b2 + k), p2);
            q2 = _mm256_fmadd_ps(x1, ld8h(b2 + k + 8), q2);
            p3 = _mm256_fmadd_ps(x0, ld8h(b3 + k), p3);
            q3 = _mm256_fmadd_ps(x1, ld8h(b3 + k + 8), q3);
        }
        float t0 = 0, t1 = 0, t2 = 0, t3 = 0;
        for (; k < K; k++) {
            t0 = __builtin_fmaf(x[k], _cvtsh_ss(b0[k]), t0);
            t1 = __builtin_fmaf(x[k], _cvtsh_ss(b1[k]), t1);
            t2 = __builtin_fmaf(x[k], _cvtsh_ss(b2[k]), t2);
            t3 = __builtin_fmaf(x[k], _cvtsh_ss(b3[k]), t3);
        }
        y[n - n0] = hsum(_mm256_add_ps(p0, q0)) + t0;
        y[n - n0 + 1] = hsum(_mm256_add_ps(p1, q1)) + t1;
        y[n - n0 + 2] = hsum(_mm256_add_ps(p2, q2)) + t2;
        y[n - n0 + 3] = hsum(_mm256_add_ps(p3, q3)) + t3;
    }
    for (; n < n1; n++) y[n - n0] = dot_h(K, x, B + n * ld);
}

#define WM_HP_PF 16 /* rows of a panel (128 bytes each) fetched ahead */

/* y[n - n0] = dot(x, column n) over wm_hgemm_pack_b panels (n0 a multiple of 64: shares are whole panels): a
 * panel is one sequential stream with its 64 sums in registers; per column one FMA chain over k in order. */
static void gemv_h_panels(int64_t K, const float *x, const uint16_t *P, int64_t n0, int64_t n1, float *y) {
    for (int64_t n = n0; n < n1; n += WM_HP) {
        const uint16_t *p = P + (n / WM_HP) * K * WM_HP;
        int64_t w = n1 - n < WM_HP ? n1 - n : WM_HP;
        int q1 = (int)((w + 7) / 8); /* 8-column groups holding columns below n1 */
        __m256 c[8];
        for (int i = 0; i < 8; i++) c[i] = _mm256_setzero_ps();
        if (q1 == 8) {
            for (int64_t k = 0; k < K; k++) {
                const uint16_t *r = p + k * WM_HP;
                _mm_prefetch((const char *)(r + WM_HP_PF * WM_HP), _MM_HINT_T0);
                _mm_prefetch((const char *)(r + WM_HP_PF * WM_HP + 32), _MM_HINT_T0);
                __m256 a = _mm256_broadcast_ss(x + k);
                #pragma GCC unroll 8
                for (int q = 0; q < 8; q++) c[q] = _mm256_fmadd_ps(a, ld8h(r + 8 * q), c[q]);
            }
        } else { /* the last, partial panel */
            for (int64_t k = 0; k < K; k++) {
                __m256 a = _mm256_broadcast_ss(x + k);
                for (int q = 0; q < q1; q++) c[q] = _mm256_fmadd_ps(a, ld8h(p + k * WM_HP + 8 * q), c[q]);
            }
        }
        float t[WM_HP];
        for (int i = 0; i < 8; i++) _mm256_storeu_ps(t + 8 * i, c[i]);
        memcpy(y + (n - n0), t, (size_t)w * sizeof(float));
    }
}

/* wm_bsrc packer from wm_hgemm_pack_b panels: kc rows of 16 halves of a 64-column panel per 16-column panel */
static void pack_hp_avx2(const wm_bsrc *s, int64_t k0, int64_t kc, int64_t n0, int64_t nc, float *dst, int64_t pstride) {
    const uint16_t *P = s->p;
    for (int64_t p = 0; p * WM_NR < nc; p++) {
        int64_t j = n0 + p * WM_NR;
        const uint16_t *src = P + (j / WM_HP) * s->ld * WM_HP + k0 * WM_HP + j % WM_HP;
        float *d = dst + p * pstride;
        for (int64_t k = 0; k < kc; k++) {
            _mm256_storeu_ps(d + k * WM_NR, ld8h(src + k * WM_HP));
            _mm256_storeu_ps(d + k * WM_NR + 8, ld8h(src + k * WM_HP + 8));
        }
    }
}

/* wm_bsrc packer: half B block -> fp32 panels (8 conversions per instruction where B rows are contiguous) */
static void pack_f16_avx2(const wm_bsrc *s, int64_t k0, int64_t kc, int64_t n0, int64_t nc, float *dst, int64_t pstride) {
    const uint16_t *B = s->p;
    for (int64_t p = 0; p * WM_NR < nc; p++) {
        float *d = dst + p * pstride;
        int64_t j0 = n0 + p * WM_NR, nv = nc - p * WM_NR < WM_NR ? nc - p * WM_NR : WM_NR;
        if (!s->trans && nv == WM_NR) {
            for (int64_t k = 0; k < kc; k++) {
                const uint16_t *r = B + (k0 + k) * s->ld + j0;
                _mm256_storeu_ps(d + k * WM_NR, ld8h(r));
                _mm256_storeu_ps(d + k * WM_NR + 8, ld8h(r + 8));
            }
        } else if (s->trans) {
            if (nv < WM_NR) memset(d, 0, (size_t)kc * WM_NR * sizeof(float));
            for (int64_t j = 0; j < nv; j++) {
                const uint16_t *r = B + (j0 + j) * s->ld + k0;
                int64_t k = 0;
                float t[8];
                for (; k + 8 <= kc; k += 8) {
                    _mm256_storeu_ps(t, ld8h(r + k));
                    for (int i = 0; i < 8; i++) d[(k + i) * WM_NR + j] = t[i];
                }
                for (; k < kc; k++) d[k * WM_NR + j] = _cvtsh_ss(r[k]);
            }
        } else {
            wm_bsrc one = *s;
            wm_bsrc_pack_f16(&one, k0, kc, j0, nv, d, pstride);
        }
    }
}

/* big M through the driver with micro-kernel u (the AVX2 or the AVX-512 table's); small M: F16C GEMV */
static void hgemm_with(const wm_gemm_ukr *u, const wm_hgemm_args *a, int ith, int nth) {
    if (a->M <= 0 || a->N <= 0) return;
    if (a->M >= WM_HGEMM_BIG_M) {
        wm_sgemm_args s = {0};
        s.M = a->M;
        s.N = a->N;
        s.K = a->K;
        s.alpha = 1.0f;
        s.A = a->A;
        s.lda = a->lda;
        s.C = a->C;
        s.ldc = a->ldc;
        s.ep = a->ep;
        s.work = a->work;
        wm_bsrc src = {pack_f16_avx2, a->B, a->ldb, a->trans_b, NULL};
        if (a->packed_b) src = (wm_bsrc){pack_hp_avx2, a->packed_b, a->K, 0, NULL};
        wm_gemm_drive(u, &s, &src, ith, nth);
        return;
    }
    int64_t n0, n1;
    wm_split_units(a->N, a->packed_b ? WM_HP : WM_NR, ith, nth, &n0, &n1); /* whole panels per share */
    if (n0 >= n1) return;
    for (int64_t m = 0; m < a->M; m++) {
        const float *x = a->A + m * a->lda;
        float *c = a->C + m * a->ldc;
        if (a->K == 0) memset(c + n0, 0, (size_t)(n1 - n0) * sizeof(float));
        else if (a->packed_b) gemv_h_panels(a->K, x, a->packed_b, n0, n1, c + n0);
        else if (a->trans_b) gemv_h_trans(a->K, x, a->B, a->ldb, n0, n1, c + n0);
        else gemv_h_rows(a->K, x, a->B + n0, a->ldb, n1 - n0, c + n0);
    }
    wm_epilogue_apply(&a->ep, &wm_gemm_ukr_avx2, a->C, a->ldc, 0, a->M, n0, n1);
}

void wm_hgemm_avx2(const wm_hgemm_args *a, int ith, int nth) { hgemm_with(&wm_gemm_ukr_avx2, a, ith, nth); }

void wm_hgemm_avx512(const wm_hgemm_args *a, int ith, int nth) { hgemm_with(&wm_gemm_ukr_avx512, a, ith, nth); }
