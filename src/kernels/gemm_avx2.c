/*
 * gemm_avx2.c - AVX2/FMA SGEMM: the 6x16 micro-kernel (12 ymm accumulators,
 * 2 B loads + 6 broadcasts per k) for the shared driver in gemm.c (row tiles
 * outermost: a_outer, with the far prefetch of wm_tile_epi.pf), and GEMV
 * paths for M <= 2 that stream B (plain, transposed or prepacked) once.
 * Compiled with -mavx2 -mfma -mf16c; reached only through the AVX2 table.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "kernels/transpose_avx2.h"
#include "kernels/vmath_avx2.h"

/* ------------------------------------------------------------ micro-kernel */

/* v + b + r, then max(., lo) keeping NaN: wm_vepi_avx2's operations, in its order (b or r NULL: none) */
static inline __m256 epi8(__m256 v, const float *b, const float *r, __m256 lo) {
    if (b) v = _mm256_add_ps(v, _mm256_loadu_ps(b));
    if (r) v = _mm256_add_ps(v, _mm256_loadu_ps(r));
    return _mm256_blendv_ps(_mm256_max_ps(v, lo), v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}

/* One output row of 16: the arithmetic of every case, shared by full and partial tiles; then, when epi, the
   fused epilogue (wm_tile_epi) with this row's bias b and residual r (16 values each, or NULL). */
static inline void row_out_epi(__m256 a0, __m256 a1, float *c, __m256 alpha, __m256 beta, int mode, int epi,
                               const float *b, const float *r, __m256 lo) {
    __m256 r0, r1;
    if (mode == 0) { /* first, beta == 0 */
        r0 = _mm256_mul_ps(alpha, a0);
        r1 = _mm256_mul_ps(alpha, a1);
    } else if (mode == 1) { /* first: alpha acc + beta c */
        r0 = _mm256_fmadd_ps(alpha, a0, _mm256_mul_ps(beta, _mm256_loadu_ps(c)));
        r1 = _mm256_fmadd_ps(alpha, a1, _mm256_mul_ps(beta, _mm256_loadu_ps(c + 8)));
    } else { /* later k-blocks: alpha acc + c */
        r0 = _mm256_fmadd_ps(alpha, a0, _mm256_loadu_ps(c));
        r1 = _mm256_fmadd_ps(alpha, a1, _mm256_loadu_ps(c + 8));
    }
    if (epi) {
        r0 = epi8(r0, b, r, lo);
        r1 = epi8(r1, b ? b + 8 : NULL, r ? r + 8 : NULL, lo);
    }
    _mm256_storeu_ps(c, r0);
    _mm256_storeu_ps(c + 8, r1);
}

static inline void row_out(__m256 a0, __m256 a1, float *c, __m256 alpha, __m256 beta, int mode) {
    row_out_epi(a0, a1, c, alpha, beta, mode, 0, NULL, NULL, alpha);
}

/* e's activation (fused_act) on the mv x nv tile just stored at c, still in L1: the table's vact on each row, so
   the values are those of the separate pass (wm_epilogue_apply), which read the row block back from L2 or beyond */
static __attribute__((noinline)) void tile_act(float *c, int64_t ldc, int mv, int nv, const wm_tile_epi *e) {
    if (nv == WM_NR && (e->act == WM_ACT_GELU_ERF || e->act == WM_ACT_QUICK_GELU)) {
        /* the vector functions vact maps (vmath_simd.h) inline over the whole tile: 12 independent vectors, where a
           vact call per row of 16 had 2 */
        if (e->act == WM_ACT_GELU_ERF) {
#pragma GCC unroll 2
            for (int i = 0; i < mv; i++) {
                float *r = c + i * ldc;
                _mm256_storeu_ps(r, v_gelu_erf(_mm256_loadu_ps(r)));
                _mm256_storeu_ps(r + 8, v_gelu_erf(_mm256_loadu_ps(r + 8)));
            }
        } else {
            const __m256 a = _mm256_set1_ps(e->act_a);
#pragma GCC unroll 2
            for (int i = 0; i < mv; i++) {
                float *r = c + i * ldc;
                _mm256_storeu_ps(r, v_quick_gelu(_mm256_loadu_ps(r), a));
                _mm256_storeu_ps(r + 8, v_quick_gelu(_mm256_loadu_ps(r + 8), a));
            }
        }
        return;
    }
    const wm_kernels *k = wm_kernels_avx2();
    for (int i = 0; i < mv; i++) k->vact(nv, c + i * ldc, c + i * ldc, e->act, e->act_a, e->act_b);
}

/* The finished tile to c (full, or the mv x nv corner through 16-float bounce rows), with the fused epilogue e
   when not NULL (its activation last, tile_act): one arithmetic for both. */
static inline __attribute__((always_inline)) void tile_store(__m256 acc[WM_MR][2], float *c, int64_t ldc, int mv,
                                                             int nv, float alpha, float beta, int first,
                                                             const wm_tile_epi *e) {
    __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta), lo = _mm256_set1_ps(e ? e->lo : 0.0f);
    int mode = first ? (beta == 0.0f ? 0 : 1) : 2;
    const float *bias = e ? e->bias : NULL, *res = e ? e->res : NULL;
    if (mv == WM_MR && nv == WM_NR) {
#pragma GCC unroll 6
        for (int i = 0; i < WM_MR; i++)
            row_out_epi(acc[i][0], acc[i][1], c + i * ldc, va, vb, mode, e != NULL, bias,
                        res ? res + i * e->ld_res : NULL, lo);
        if (e && e->act != WM_ACT_NONE) tile_act(c, ldc, mv, nv, e);
        return;
    }
    float tmp[WM_NR], tb[WM_NR] = {0}, tr[WM_NR];
    if (bias) memcpy(tb, bias, (size_t)nv * sizeof(float));
    for (int i = 0; i < mv; i++) {
        float *ci = c + i * ldc;
        memset(tmp, 0, sizeof tmp);
        if (mode != 0) memcpy(tmp, ci, (size_t)nv * sizeof(float));
        if (res) {
            memset(tr, 0, sizeof tr);
            memcpy(tr, res + i * e->ld_res, (size_t)nv * sizeof(float));
        }
        row_out_epi(acc[i][0], acc[i][1], tmp, va, vb, mode, e != NULL, bias ? tb : NULL, res ? tr : NULL, lo);
        memcpy(ci, tmp, (size_t)nv * sizeof(float));
    }
    if (e && e->act != WM_ACT_NONE) tile_act(c, ldc, mv, nv, e);
}

#define FMA_ROW(r, addr)                                                                                               \
    do {                                                                                                               \
        __m256 a_ = _mm256_broadcast_ss(addr);                                                                         \
        c##r##0 = _mm256_fmadd_ps(a_, b0, c##r##0);                                                                    \
        c##r##1 = _mm256_fmadd_ps(a_, b1, c##r##1);                                                                    \
    } while (0)

/* the far prefetch (wm_tile_epi.pf, this table being a_outer): its start and step from e; with none, B's first row
   (in cache), stepping 0 */
static inline __attribute__((always_inline)) const char *far_start(const wm_tile_epi *e, const float *b,
                                                                   int64_t *pfs) {
    *pfs = e && e->pf ? e->pf_step : 0;
    return e && e->pf ? e->pf : (const char *)b;
}

/* B streams from L2 in the a_outer order: its row B_AHEAD bytes on is brought into L1 at every k (without it, K = 384
   (k-blocks of 192) lost: 2056 x 384 x 1152 0.77x the B-slab-first order; with it 0.95-1.00x, and 257 x 384 x 1536
   0.96x -> 1.11x) */
#define B_AHEAD 512

/* into L2 once per 4 k, at pf and half a step on */
static inline __attribute__((always_inline)) void far4(const char **pf, int64_t pfs) {
    _mm_prefetch(*pf, _MM_HINT_T1);
    _mm_prefetch(*pf + pfs / 2, _MM_HINT_T1);
    *pf += pfs;
}

/* one k of the 6x16 tile: B row q (16 floats at bp + 16 q, its line B_AHEAD bytes on into L1), A's value of row r
   at a##r[q * as] */
#define K_STEP(q, as)                                                                                                  \
    do {                                                                                                               \
        _mm_prefetch((const char *)(bp + (q) * WM_NR) + B_AHEAD, _MM_HINT_T0);                                         \
        __m256 b0 = _mm256_loadu_ps(bp + (q) * WM_NR), b1 = _mm256_loadu_ps(bp + (q) * WM_NR + 8);                     \
        FMA_ROW(0, a0 + (q) * (as));                                                                                   \
        FMA_ROW(1, a1 + (q) * (as));                                                                                   \
        FMA_ROW(2, a2 + (q) * (as));                                                                                   \
        FMA_ROW(3, a3 + (q) * (as));                                                                                   \
        FMA_ROW(4, a4 + (q) * (as));                                                                                   \
        FMA_ROW(5, a5 + (q) * (as));                                                                                   \
    } while (0)

/* len k of the tile, 4 at a time with the far prefetch once per 4 (its test and branch at every k were 4 of the ~31
   instructions per k, the front end's limit on Zen 3: one thread, best of 4 by thread CPU time alternating with
   the one-k loop, 197 x 768 x 3072 83 -> 88 GFLOP/s, 197 x 3072 x 768 +3.5%, 257 x 384 x 1536 +4%, 50 x 768 x
   3072 +6%, 1576 x 768 x 3072 +4.5%, 2056 x 384 x 1152 -1% (noise)), then the rest one by one; a0..a5 advance by as floats per k (1: rows in
   place, 0 with 6 apart: the packed panel), bp by a B row. The same FMAs in the same order as one k at a time. */
#define K_LOOP(len, as)                                                                                                \
    do {                                                                                                               \
        int64_t q_ = 0;                                                                                                \
        for (; q_ + 4 <= (len); q_ += 4) {                                                                             \
            far4(&f, pfs);                                                                                             \
            K_STEP(0, as);                                                                                             \
            K_STEP(1, as);                                                                                             \
            K_STEP(2, as);                                                                                             \
            K_STEP(3, as);                                                                                             \
            a0 += 4 * (as), a1 += 4 * (as), a2 += 4 * (as), a3 += 4 * (as), a4 += 4 * (as), a5 += 4 * (as);            \
            bp += 4 * WM_NR;                                                                                           \
        }                                                                                                              \
        for (; q_ < (len); q_++) {                                                                                     \
            K_STEP(0, as);                                                                                             \
            a0 += (as), a1 += (as), a2 += (as), a3 += (as), a4 += (as), a5 += (as);                                    \
            bp += WM_NR;                                                                                               \
        }                                                                                                              \
    } while (0)

/* acc[r] += rows[r][off + q] * B row q (16 floats at bp + 16 q), q < len: the 6x16 tile over rows read in place;
   the far prefetch *pf advanced as it goes */
static inline __attribute__((always_inline)) void rows_fma(__m256 acc[WM_MR][2], const float *const rows[WM_MR],
                                                           int64_t off, int64_t len, const float *bp,
                                                           const char **pf, int64_t pfs) {
    const float *a0 = rows[0] + off, *a1 = rows[1] + off, *a2 = rows[2] + off, *a3 = rows[3] + off;
    const float *a4 = rows[4] + off, *a5 = rows[5] + off;
    __m256 c00 = acc[0][0], c01 = acc[0][1], c10 = acc[1][0], c11 = acc[1][1], c20 = acc[2][0], c21 = acc[2][1];
    __m256 c30 = acc[3][0], c31 = acc[3][1], c40 = acc[4][0], c41 = acc[4][1], c50 = acc[5][0], c51 = acc[5][1];
    const char *f = *pf;
    K_LOOP(len, 1);
    *pf = f;
    acc[0][0] = c00, acc[0][1] = c01, acc[1][0] = c10, acc[1][1] = c11, acc[2][0] = c20, acc[2][1] = c21;
    acc[3][0] = c30, acc[3][1] = c31, acc[4][0] = c40, acc[4][1] = c41, acc[5][0] = c50, acc[5][1] = c51;
}

static void ukr_6x16(int64_t kc, const float *ap, int64_t lda, const float *bp, int64_t pstride, float *c, int64_t ldc,
                     int mv, int nv, float alpha, float beta, int first, const wm_tile_epi *e) {
    (void)pstride; /* one panel per tile */
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    int64_t pfs;
    const char *pf = far_start(e, bp, &pfs);
    if (lda == 0) { /* packed A panel: [k][6] (none when kc is 0: K = 0 or alpha = 0, ap NULL) */
        if (kc > 0) {
            const float *a0 = ap, *a1 = ap + 1, *a2 = ap + 2, *a3 = ap + 3, *a4 = ap + 4, *a5 = ap + 5;
            const char *f = pf;
            K_LOOP(kc, WM_MR);
        }
    } else { /* rows of A in place; rows past mv alias row 0 (read, never stored) */
        const float *rows[WM_MR];
        for (int r = 0; r < WM_MR; r++) rows[r] = r < mv ? ap + r * lda : ap;
        __m256 acc[WM_MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
        rows_fma(acc, rows, 0, kc, bp, &pf, pfs);
        tile_store(acc, c, ldc, mv, nv, alpha, beta, first, e);
        return;
    }
    __m256 acc[WM_MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    tile_store(acc, c, ldc, mv, nv, alpha, beta, first, e);
}

/* ukr_6x16 with indirect A (wm_ukr_ind_fn): the six row pointers are reloaded at each segment of the k-block */
static void ukr_ind_6x16(int64_t kc, const float *const *ind, int64_t ldi, int64_t k0, int64_t seg, const float *bp,
                         int64_t pstride, float *c, int64_t ldc, int mv, int nv, float alpha, float beta, int first,
                         const wm_tile_epi *e) {
    (void)pstride; /* one panel per tile */
    __m256 acc[WM_MR][2];
    for (int r = 0; r < WM_MR; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    int64_t pfs;
    const char *pf = far_start(e, bp, &pfs);
    for (int64_t k = 0; k < kc;) {
        int64_t t = (k0 + k) / seg, c0 = (k0 + k) % seg, len = seg - c0 < kc - k ? seg - c0 : kc - k;
        const float *const *row = ind + t * ldi;
        const float *rows[WM_MR];
        for (int r = 0; r < WM_MR; r++) rows[r] = r < mv ? row[r] : row[0];
        rows_fma(acc, rows, c0, len, bp + k * WM_NR, &pf, pfs);
        k += len;
    }
    tile_store(acc, c, ldc, mv, nv, alpha, beta, first, e);
}

/* ------------------------------------------------------------ GEMV (M <= 2) */

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* y[0:nc] = sum_k x[k] * B[k][0:nc] (B row-major, ld), nc <= 64, one FMA chain over k per column:
 * up to 64 columns in registers over all k; wider rows are handled by the caller in 64-column
 * strips only when N <= 64 per share, else by gemv_rows_wide (long contiguous row reads). */
static void gemv_rows_64(int64_t K, const float *x, const float *B, int64_t ld, int64_t nc, float *y) {
    if (nc == 64) {
        __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
        for (int64_t k = 0; k < K; k++) {
            const float *b = B + k * ld;
            __m256 a = _mm256_broadcast_ss(x + k);
            s0 = _mm256_fmadd_ps(a, _mm256_loadu_ps(b), s0);
            s1 = _mm256_fmadd_ps(a, _mm256_loadu_ps(b + 8), s1);
            s2 = _mm256_fmadd_ps(a, _mm256_loadu_ps(b + 16), s2);
            s3 = _mm256_fmadd_ps(a, _mm256_loadu_ps(b + 24), s3);
            s4 = _mm256_fmadd_ps(a, _mm256_loadu_ps(b + 32), s4);
            s5 = _mm256_fmadd_ps(a, _mm256_loadu_ps(b + 40), s5);
            s6 = _mm256_fmadd_ps(a, _mm256_loadu_ps(b + 48), s6);
            s7 = _mm256_fmadd_ps(a, _mm256_loadu_ps(b + 56), s7);
        }
        _mm256_storeu_ps(y, s0);
        _mm256_storeu_ps(y + 8, s1);
        _mm256_storeu_ps(y + 16, s2);
        _mm256_storeu_ps(y + 24, s3);
        _mm256_storeu_ps(y + 32, s4);
        _mm256_storeu_ps(y + 40, s5);
        _mm256_storeu_ps(y + 48, s6);
        _mm256_storeu_ps(y + 56, s7);
        return;
    }
    int64_t j = 0;
    for (; j + 8 <= nc; j += 8) {
        __m256 s = _mm256_setzero_ps();
        for (int64_t k = 0; k < K; k++) s = _mm256_fmadd_ps(_mm256_broadcast_ss(x + k), _mm256_loadu_ps(B + k * ld + j), s);
        _mm256_storeu_ps(y + j, s);
    }
    for (; j < nc; j++) {
        __m128 s = _mm_setzero_ps();
        for (int64_t k = 0; k < K; k++) s = _mm_fmadd_ss(_mm_load_ss(x + k), _mm_load_ss(B + k * ld + j), s);
        y[j] = _mm_cvtss_f32(s);
    }
}

/* The same sums for wide rows: 512-column chunks of y in L1, 4 rows of B per pass, so each row
 * is read in long contiguous runs (the same FMA chain over k per column as gemv_rows_64). */
static void gemv_rows_wide(int64_t K, const float *x, const float *B, int64_t ld, int64_t nc, float *y) {
    for (int64_t j0 = 0; j0 < nc; j0 += 512) {
        int64_t w = nc - j0 < 512 ? nc - j0 : 512, w8 = w & ~(int64_t)7;
        float *yc = y + j0;
        memset(yc, 0, (size_t)w * sizeof(float));
        int64_t k = 0;
        for (; k + 4 <= K; k += 4) {
            const float *b0 = B + k * ld + j0, *b1 = b0 + ld, *b2 = b1 + ld, *b3 = b2 + ld;
            __m256 a0 = _mm256_broadcast_ss(x + k), a1 = _mm256_broadcast_ss(x + k + 1);
            __m256 a2 = _mm256_broadcast_ss(x + k + 2), a3 = _mm256_broadcast_ss(x + k + 3);
            for (int64_t j = 0; j < w8; j += 8) {
                __m256 acc = _mm256_loadu_ps(yc + j);
                acc = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b0 + j), acc);
                acc = _mm256_fmadd_ps(a1, _mm256_loadu_ps(b1 + j), acc);
                acc = _mm256_fmadd_ps(a2, _mm256_loadu_ps(b2 + j), acc);
                acc = _mm256_fmadd_ps(a3, _mm256_loadu_ps(b3 + j), acc);
                _mm256_storeu_ps(yc + j, acc);
            }
            for (int64_t j = w8; j < w; j++) {
                float acc = yc[j];
                acc = __builtin_fmaf(x[k], b0[j], acc);
                acc = __builtin_fmaf(x[k + 1], b1[j], acc);
                acc = __builtin_fmaf(x[k + 2], b2[j], acc);
                acc = __builtin_fmaf(x[k + 3], b3[j], acc);
                yc[j] = acc;
            }
        }
        for (; k < K; k++) {
            const float *b0 = B + k * ld + j0;
            __m256 a0 = _mm256_broadcast_ss(x + k);
            for (int64_t j = 0; j < w8; j += 8)
                _mm256_storeu_ps(yc + j, _mm256_fmadd_ps(a0, _mm256_loadu_ps(b0 + j), _mm256_loadu_ps(yc + j)));
            for (int64_t j = w8; j < w; j++) yc[j] = __builtin_fmaf(x[k], b0[j], yc[j]);
        }
    }
}

/* one row's dot: 2 accumulators over 16-float steps, scalar FMA tail (the 4-row loop does the same per row) */
static inline __m256 dot_row_acc(int64_t K, const float *x, const float *b, float *tail) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), _mm256_loadu_ps(b + k), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 8), _mm256_loadu_ps(b + k + 8), s1);
    }
    float t = 0;
    for (; k < K; k++) t = __builtin_fmaf(x[k], b[k], t);
    *tail = t;
    return _mm256_add_ps(s0, s1);
}

static void gemv_trans(int64_t K, const float *x, const float *B, int64_t ld, int64_t n0, int64_t n1, float *y) {
    int64_t n = n0;
    for (; n + 4 <= n1; n += 4) { /* 4 independent streams; 2 accumulators each */
        const float *b0 = B + n * ld, *b1 = b0 + ld, *b2 = b1 + ld, *b3 = b2 + ld;
        __m256 p0 = _mm256_setzero_ps(), q0 = p0, p1 = p0, q1 = p0, p2 = p0, q2 = p0, p3 = p0, q3 = p0;
        int64_t k = 0;
        for (; k + 16 <= K; k += 16) {
            __m256 x0 = _mm256_loadu_ps(x + k), x1 = _mm256_loadu_ps(x + k + 8);
            p0 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(b0 + k), p0);
            q0 = _mm256_fmadd_ps(x1, _mm256_loadu_ps(b0 + k + 8), q0);
            p1 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(b1 + k), p1);
            q1 = _mm256_fmadd_ps(x1, _mm256_loadu_ps(b1 + k + 8), q1);
            p2 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(b2 + k), p2);
            q2 = _mm256_fmadd_ps(x1, _mm256_loadu_ps(b2 + k + 8), q2);
            p3 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(b3 + k), p3);
            q3 = _mm256_fmadd_ps(x1, _mm256_loadu_ps(b3 + k + 8), q3);
        }
        float t0 = 0, t1 = 0, t2 = 0, t3 = 0;
        for (; k < K; k++) {
            t0 = __builtin_fmaf(x[k], b0[k], t0);
            t1 = __builtin_fmaf(x[k], b1[k], t1);
            t2 = __builtin_fmaf(x[k], b2[k], t2);
            t3 = __builtin_fmaf(x[k], b3[k], t3);
        }
        y[n - n0] = hsum(_mm256_add_ps(p0, q0)) + t0;
        y[n - n0 + 1] = hsum(_mm256_add_ps(p1, q1)) + t1;
        y[n - n0 + 2] = hsum(_mm256_add_ps(p2, q2)) + t2;
        y[n - n0 + 3] = hsum(_mm256_add_ps(p3, q3)) + t3;
    }
    for (; n < n1; n++) {
        float t;
        __m256 s = dot_row_acc(K, x, B + n * ld, &t);
        y[n - n0] = hsum(s) + t;
    }
}

/* y[0:n1-n0] from prepacked B (n0 a multiple of 16; layout in gemm.c): 4 panels (64 columns) at a
 * time, the k-blocks in order; per column one FMA chain over k whatever the grouping. */
static void gemv_packed(int64_t K, const float *x, const float *P, int64_t Np, int64_t kcb, int64_t n0, int64_t n1,
                        float *y) {
    int64_t n = n0;
    for (; n + 64 <= n1; n += 64) {
        __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
        for (int64_t k0 = 0; k0 < K; k0 += kcb) {
            int64_t kc = K - k0 < kcb ? K - k0 : kcb, ps = kc * WM_NR;
            const float *b = P + k0 * Np + (n / WM_NR) * ps;
            for (int64_t k = 0; k < kc; k++) {
                __m256 a = _mm256_broadcast_ss(x + k0 + k);
                const float *bk = b + k * WM_NR;
                s0 = _mm256_fmadd_ps(a, _mm256_loadu_ps(bk), s0);
                s1 = _mm256_fmadd_ps(a, _mm256_loadu_ps(bk + 8), s1);
                s2 = _mm256_fmadd_ps(a, _mm256_loadu_ps(bk + ps), s2);
                s3 = _mm256_fmadd_ps(a, _mm256_loadu_ps(bk + ps + 8), s3);
                s4 = _mm256_fmadd_ps(a, _mm256_loadu_ps(bk + 2 * ps), s4);
                s5 = _mm256_fmadd_ps(a, _mm256_loadu_ps(bk + 2 * ps + 8), s5);
                s6 = _mm256_fmadd_ps(a, _mm256_loadu_ps(bk + 3 * ps), s6);
                s7 = _mm256_fmadd_ps(a, _mm256_loadu_ps(bk + 3 * ps + 8), s7);
            }
        }
        float *o = y + (n - n0);
        _mm256_storeu_ps(o, s0);
        _mm256_storeu_ps(o + 8, s1);
        _mm256_storeu_ps(o + 16, s2);
        _mm256_storeu_ps(o + 24, s3);
        _mm256_storeu_ps(o + 32, s4);
        _mm256_storeu_ps(o + 40, s5);
        _mm256_storeu_ps(o + 48, s6);
        _mm256_storeu_ps(o + 56, s7);
    }
    for (; n < n1; n += WM_NR) { /* remaining panels one by one */
        __m256 s0 = _mm256_setzero_ps(), s1 = s0;
        for (int64_t k0 = 0; k0 < K; k0 += kcb) {
            int64_t kc = K - k0 < kcb ? K - k0 : kcb;
            const float *b = P + k0 * Np + (n / WM_NR) * kc * WM_NR;
            for (int64_t k = 0; k < kc; k++) {
                __m256 a = _mm256_broadcast_ss(x + k0 + k);
                s0 = _mm256_fmadd_ps(a, _mm256_loadu_ps(b + k * WM_NR), s0);
                s1 = _mm256_fmadd_ps(a, _mm256_loadu_ps(b + k * WM_NR + 8), s1);
            }
        }
        float t[WM_NR];
        _mm256_storeu_ps(t, s0);
        _mm256_storeu_ps(t + 8, s1);
        int64_t nv = n1 - n < WM_NR ? n1 - n : WM_NR;
        memcpy(y + (n - n0), t, (size_t)nv * sizeof(float));
    }
}

static void vact_avx2_fwd(int64_t n, float *y, const float *x, wm_act act, float p, float q);

/* GEMV for M <= 2 with plain A: each share takes 16-column units; returns 1 (handled) or 0. */
static int small_m(const wm_sgemm_args *a, int ith, int nth) {
    if (a->M > 2 || a->trans_a) return 0;
    int64_t n0, n1;
    wm_split_units(a->N, WM_NR, ith, nth, &n0, &n1);
    if (n0 >= n1) return 1;
    float buf[64];
    for (int64_t m = 0; m < a->M; m++) {
        const float *x = a->A + m * a->lda;
        float *c = a->C + m * a->ldc;
        if (!a->packed_b && !a->trans_b && a->beta == 0.0f && a->K > 0 && n1 - n0 > 64) {
            /* wide plain B, write-only C: sums straight into C (long row reads), then alpha as in row_out */
            gemv_rows_wide(a->K, x, a->B + n0, a->ldb, n1 - n0, c + n0);
            if (a->alpha != 1.0f) {
                __m256 va = _mm256_set1_ps(a->alpha);
                int64_t j = n0;
                for (; j + 8 <= n1; j += 8) _mm256_storeu_ps(c + j, _mm256_mul_ps(va, _mm256_loadu_ps(c + j)));
                for (; j < n1; j++) c[j] = _mm_cvtss_f32(_mm_mul_ss(_mm_set_ss(a->alpha), _mm_set_ss(c[j])));
            }
            continue;
        }
        for (int64_t nb = n0; nb < n1; nb += 64) {
            int64_t nc = n1 - nb < 64 ? n1 - nb : 64;
            if (a->K == 0 || a->alpha == 0.0f) {
                memset(buf, 0, sizeof buf);
            } else if (a->packed_b) {
                gemv_packed(a->K, x, a->packed_b, wm_packed_np(a->N), wm_sgemm_args_kc(a), nb, nb + nc, buf);
            } else if (a->trans_b) {
                gemv_trans(a->K, x, a->B, a->ldb, nb, nb + nc, buf);
            } else {
                gemv_rows_64(a->K, x, a->B + nb, a->ldb, nc, buf);
            }
            /* same combine as the micro-kernel */
            __m256 va = _mm256_set1_ps(a->alpha), vb = _mm256_set1_ps(a->beta);
            int mode = a->beta == 0.0f ? 0 : 1;
            for (int64_t j = 0; j < nc; j += WM_NR) {
                float tmp[WM_NR] = {0};
                int64_t nv = nc - j < WM_NR ? nc - j : WM_NR;
                if (mode) memcpy(tmp, c + nb + j, (size_t)nv * sizeof(float));
                float acc[WM_NR] = {0};
                memcpy(acc, buf + j, (size_t)nv * sizeof(float));
                row_out(_mm256_loadu_ps(acc), _mm256_loadu_ps(acc + 8), tmp, va, vb, mode);
                memcpy(c + nb + j, tmp, (size_t)nv * sizeof(float));
            }
        }
    }
    wm_epilogue_apply(&a->ep, &wm_gemm_ukr_avx2, a->C, a->ldc, 0, a->M, n0, n1);
    return 1;
}

static void vact_avx2_fwd(int64_t n, float *y, const float *x, wm_act act, float p, float q) {
    wm_kernels_avx2()->vact(n, y, x, act, p, q);
}

void wm_vadd_avx2_fwd(int64_t n, float *y, const float *x) { wm_kernels_avx2()->add(n, y, y, x); }

/* the clamp as ReLU's vact does it: max(v, lo) (so -0 gives +0), NaN kept */
void wm_vepi_avx2(int64_t n, float *y, const float *b, const float *r, float lo) {
    __m256 vl = _mm256_set1_ps(lo);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(y + i);
        if (b) v = _mm256_add_ps(v, _mm256_loadu_ps(b + i));
        if (r) v = _mm256_add_ps(v, _mm256_loadu_ps(r + i));
        _mm256_storeu_ps(y + i, _mm256_blendv_ps(_mm256_max_ps(v, vl), v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
    }
    for (; i < n; i++) {
        float v = y[i] + (b ? b[i] : 0.0f) + (r ? r[i] : 0.0f);
        y[i] = v > lo || v != v ? v : lo;
    }
}

/* ------------------------------------------------------------ B packing (on the fly) */

static inline __m256i lane_mask(int64_t n) { /* lanes < n */
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* 8x8 transpose of r[0..7] in place */
static inline void tr8x8(__m256 r[8]) {
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* op(B)[k0:k0+kc, n0:n0+nc] into kc x 16 panels (layout of gemm.c), zero padded */
static void pack_b_avx2(const wm_bsrc *s, int64_t k0, int64_t kc, int64_t n0, int64_t nc, float *dst, int64_t pstride) {
    const float *B = s->p;
    const int64_t ld = s->ld;
    for (int64_t p = 0; p * WM_NR < nc; p++) {
        float *d = dst + p * pstride;
        int64_t j0 = n0 + p * WM_NR, nv = nc - p * WM_NR < WM_NR ? nc - p * WM_NR : WM_NR;
        if (!s->trans) {
            __m256i m0 = lane_mask(nv), m1 = lane_mask(nv - 8);
            for (int64_t k = 0; k < kc; k++) {
                const float *r = B + (k0 + k) * ld + j0;
                if (nv == WM_NR) {
                    _mm256_storeu_ps(d + k * WM_NR, _mm256_loadu_ps(r));
                    _mm256_storeu_ps(d + k * WM_NR + 8, _mm256_loadu_ps(r + 8));
                } else {
                    _mm256_storeu_ps(d + k * WM_NR, _mm256_maskload_ps(r, m0));
                    _mm256_storeu_ps(d + k * WM_NR + 8, _mm256_maskload_ps(r + 8, m1));
                }
            }
            continue;
        }
        /* B stored [N][K]: 8 columns x 8 k at a time through an 8x8 transpose */
        for (int64_t h = 0; h < WM_NR; h += 8) {
            int64_t cv = nv - h; /* valid columns in this half */
            int64_t k = 0;
            if (cv >= 8) {
                for (; k + 8 <= kc; k += 8) {
                    __m256 r[8];
                    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(B + (j0 + h + i) * ld + k0 + k);
                    tr8x8(r);
                    for (int i = 0; i < 8; i++) _mm256_storeu_ps(d + (k + i) * WM_NR + h, r[i]);
                }
            }
            for (; k < kc; k++) /* tails: scalar, zero past N */
                for (int64_t i = 0; i < 8; i++) d[k * WM_NR + h + i] = i < cv ? B[(j0 + h + i) * ld + k0 + k] : 0.0f;
        }
    }
}

/* a_outer: row tiles outermost, each tile's 6 A rows in L1 while the block's B panels stream from L2 (a block of at
   most half the L2, gemm.c). Against B slabs outermost, one thread, packed B from DRAM, best of 8 by thread CPU
   time in the same run on a Zen 2 core (512 KiB L2): 197 x 768 x 3072 79 -> 84 GFLOP/s, 197 x 768 x 2304 82 -> 87,
   197 x 3072 x 768 and 3136 x 64 x 256 unchanged within 1-2%, 784 x 1152 x 128 80 -> 86; B packed on the fly,
   197 x 768 x 3072 77 -> 83. With the far prefetch, base build against this one alternating, 8 rounds: 197 x 768
   x {3072, 2304, 768} +5%, +7.5%, +6%, 197 x 3072 x 768 +3%, 1576 x 768 x 3072 +2%, 50 x 768 x 3072 +12%. */
const wm_gemm_ukr wm_gemm_ukr_avx2 = {ukr_6x16, WM_MR, 1, 0, vact_avx2_fwd, small_m, pack_b_avx2, wm_vadd_avx2_fwd,
                                     wm_vepi_avx2, ukr_ind_6x16, 1, 1, 1};

void wm_sgemm_avx2(const wm_sgemm_args *a, int ith, int nth) { wm_sgemm_drive(&wm_gemm_ukr_avx2, a, ith, nth); }

void wm_sgemm_batch_avx2(const wm_sgemm_args *a, const wm_gemm_batch *b, int ith, int nth) {
    wm_sgemm_batch_drive(&wm_gemm_ukr_avx2, a, b, ith, nth);
}
