/*
 * quant_gptq.c - GPTQ (Frantar, Ashkboos, Hoefler, Alistarh 2022): block quantization in MatMulNBits' layout
 * that feeds each row's rounding error forward into the rows not yet quantized, so that the product with the
 * calibration inputs X moves least: it minimizes || X W - X Q ||^2 row by row through H = X^T X.
 *
 * The algorithm, for W [K, N] (row k: input k of every output; MatMulNBits quantizes along K):
 *   dead inputs (H[k][k] == 0: never nonzero in calibration): H[k][k] = 1 (their weights are kept; the reference
 *   zeroes them, which would be wrong for inputs a short calibration text happens not to reach);
 *   H += damp * mean(diag H) * I;
 *   U = the upper Cholesky factor of H^-1 (H^-1 = U^T U), computed without forming H^-1: with P the reversal
 *   permutation, P H P = M M^T (Cholesky), then U = P M^-1 P;
 *   for each block of bs rows, in order: the block's scale and zero point from the current (updated) rows,
 *   RTN's arithmetic (wm_nbits_params); then for each row k of the block: codes q_k = RTN(W[k]), the error
 *   e = (W[k] - dequant(q_k)) / U[k][k], and every later row j: W[j] -= U[k][j] * e (GPTQ's lazy batches: rows
 *   within a batch of LAZY rows at once, the rows past it by one sgemm per batch, W[k1:] -= U[k0:k1, k1:]^T E).
 * Without calibration (H = I) this is RTN exactly: U is diagonal and no error moves.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/kernels.h"
#include "onnx/dtype.h"
#include "opt/quant_impl.h"

#define LAZY 128 /* rows per lazy batch */

/* Dot product of a[0..n) and b[0..n) in four partial sums (so the compiler may vectorize without reassociating). */
static double dot(const double *a, const double *b, int64_t n) {
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++) s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

/* In-place Cholesky of a symmetric a [n, n] (row-major; the lower triangle read): a = L L^T, L in the lower
   triangle (the upper is left as it was). 0 on success, else 1 + the row where a pivot was not positive. */
static int64_t cholesky(double *a, int64_t n) {
    for (int64_t j = 0; j < n; j++) {
        double *rj = a + j * n;
        double d = rj[j] - dot(rj, rj, j);
        if (!(d > 0.0) || !isfinite(d)) return j + 1;
        d = sqrt(d);
        rj[j] = d;
        for (int64_t i = j + 1; i < n; i++) {
            double *ri = a + i * n;
            ri[j] = (ri[j] - dot(ri, rj, j)) / d;
        }
    }
    return 0;
}

/*
 * The upper Cholesky factor U of h^-1 (h [n, n] symmetric positive definite), into u [n, n] (row-major, lower
 * triangle zero). work: n * n doubles. 0 on success, else 1 + the failing pivot (of the reversed matrix).
 */
static int64_t inv_chol_upper(const double *h, int64_t n, double *u, double *work) {
    double *m = work; /* P h P, then its Cholesky factor M (lower) */
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) m[i * n + j] = h[(n - 1 - i) * n + (n - 1 - j)];
    int64_t bad = cholesky(m, n);
    if (bad) return bad;
    /* M^T into u's storage (row j: column j of M), so that back substitution reads rows */
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) u[j * n + i] = j <= i ? m[i * n + j] : 0.0;
    /* Row r of M^-1 (x with x M = e_r: x[j] = 0 for j > r), into row r of m; M^T is upper, rows in u. */
    for (int64_t r = 0; r < n; r++) {
        double *x = m + r * n;
        for (int64_t j = r + 1; j < n; j++) x[j] = 0.0;
        x[r] = 1.0 / u[r * n + r];
        for (int64_t j = r - 1; j >= 0; j--) {
            const double *mt = u + j * n; /* mt[k] = M[k][j] */
            x[j] = -dot(mt + j + 1, x + j + 1, r - j) / mt[j];
        }
    }
    /* U = P M^-1 P: U[i][j] = M^-1[n-1-i][n-1-j], upper */
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) u[i * n + j] = m[(n - 1 - i) * n + (n - 1 - j)];
    return 0;
}

/* act-order: rows by H's diagonal, largest first (ties: the lower row first). */
typedef struct {
    double d;
    int64_t k;
} diag_row;
static int by_diag(const void *a, const void *b) {
    const diag_row *x = a, *y = b;
    return x->d > y->d ? -1 : x->d < y->d ? 1 : (x->k > y->k) - (x->k < y->k);
}

/* The block's scale and zero point (RTN's arithmetic) of column n over rows k0..k0+nr of w [K, N] into sc / zs. */
static void block_params(const float *w, int64_t N, int64_t k0, int64_t nr, int bits, int symmetric,
                         int32_t scale_dtype, float *mn, float *mx, float *sc, int *zs) {
    for (int64_t n = 0; n < N; n++) mn[n] = FLT_MAX, mx[n] = -FLT_MAX;
    for (int64_t k = k0; k < k0 + nr; k++)
        for (int64_t n = 0; n < N; n++) {
            float v = w[k * N + n];
            mn[n] = v < mn[n] ? v : mn[n];
            mx[n] = v > mx[n] ? v : mx[n];
        }
    for (int64_t n = 0; n < N; n++) wm_nbits_params(mn[n], mx[n], bits, symmetric, scale_dtype, &sc[n], &zs[n]);
}

/* Block kb's scales sc [N] and zero points zs [N] into MatMulNBits' scales and zp, and its padding rows (past K)
   as the zero point's code in q. */
static void put_block(uint8_t *q, float *scales, uint8_t *zp, int64_t K, int64_t N, int64_t bs, int bits, int64_t kb,
                      const float *sc, const int *zs) {
    int64_t nblk = (K + bs - 1) / bs, blob = bs * bits / 8, nr = K - kb * bs < bs ? K - kb * bs : bs;
    for (int64_t n = 0; n < N; n++) {
        scales[n * nblk + kb] = sc[n];
        if (zp) wm_nbits_put_zp(zp, n, kb, nblk, bits, zs[n]);
        uint8_t *dst = &q[(n * nblk + kb) * blob];
        for (int64_t r = nr; r < bs; r++) wm_nbits_put_code(dst, r, bits, zs[n]); /* padding: the zero point */
    }
}

/* wm_quant_gptq, and with given 1 wm_quant_gptq_given (scales / zp read on entry as every block's parameters). */
static wm_status gptq(const float *w, int64_t K, int64_t N, const double *H, double damp, int act_order, int given,
                      int64_t bs, int bits, int symmetric, int32_t scale_dtype, uint8_t *q, float *scales, uint8_t *zp,
                      wm_error *err) {
    if (K <= 0 || N <= 0 || bs <= 0 || (bits != 4 && bits != 8) || (bs * bits) % 8)
        return wm_err(err, WM_ERR_USAGE, "GPTQ: K %lld, N %lld, block %lld, bits %d: not a valid shape",
                      (long long)K, (long long)N, (long long)bs, bits);
    if (!(damp >= 0.0) || !isfinite(damp)) return wm_err(err, WM_ERR_USAGE, "GPTQ: damping %g: must be >= 0", damp);
    for (int64_t i = 0; i < K * N; i++)
        if (!isfinite(w[i]))
            return wm_err(err, WM_ERR_INPUT, "GPTQ: weight [%lld, %lld] is %s: finite weights only",
                          (long long)(i / N), (long long)(i % N), isnan(w[i]) ? "NaN" : "infinite");
    for (int64_t i = 0; i < K * K; i++)
        if (!isfinite(H[i]))
            return wm_err(err, WM_ERR_INPUT, "GPTQ: calibration statistics X^T X [%lld, %lld] are not finite (the "
                          "calibration run produced NaN or infinity)", (long long)(i / K), (long long)(i % K));
    size_t kk = (size_t)K * (size_t)K;
    const int kmax = (1 << bits) - 1;
    int64_t nblk = (K + bs - 1) / bs, blob = bs * bits / 8;
    double *h = malloc(kk * sizeof *h), *u = malloc(kk * sizeof *u), *work = malloc(kk * sizeof *work);
    float *wk = malloc((size_t)(K * N) * sizeof *wk), *e = malloc((size_t)(LAZY * N) * sizeof *e);
    float *uf = malloc(kk * sizeof *uf);
    float *mn = malloc((size_t)N * sizeof *mn), *mx = malloc((size_t)N * sizeof *mx);
    /* the blocks' scales and zero points: all of them up front when given, or with act-order (static groups, from
       w as given: the rows of a block are not consecutive in that order), else one block's at a time, from the
       updated rows */
    int stat = act_order || given;
    int64_t np = stat ? nblk * N : N;
    float *sc = malloc((size_t)np * sizeof *sc);
    int *zs = malloc((size_t)np * sizeof *zs);
    diag_row *perm = malloc((size_t)K * sizeof *perm);
    wm_status s = WM_OK;
    if (!h || !u || !work || !wk || !e || !uf || !mn || !mx || !sc || !zs || !perm) {
        s = wm_err(err, WM_ERR_NOMEM, "GPTQ: out of memory (K %lld)", (long long)K);
        goto out;
    }
    for (int64_t k = 0; k < K; k++) perm[k] = (diag_row){H[k * K + k], k};
    if (act_order) qsort(perm, (size_t)K, sizeof *perm, by_diag);
    /* h and the working rows in the processing order: row i is the weight's row perm[i].k */
    for (int64_t i = 0; i < K; i++) {
        for (int64_t j = 0; j < K; j++) h[i * K + j] = H[perm[i].k * K + perm[j].k];
        memcpy(wk + i * N, w + perm[i].k * N, (size_t)N * sizeof *wk);
    }
    double mean = 0;
    for (int64_t k = 0; k < K; k++) {
        if (h[k * K + k] == 0.0) h[k * K + k] = 1.0; /* a dead input: RTN for its row, nothing learned from it */
        mean += h[k * K + k];
    }
    mean /= (double)K;
    for (int64_t k = 0; k < K; k++) h[k * K + k] += damp * mean;
    int64_t bad = inv_chol_upper(h, K, u, work);
    if (bad) {
        s = wm_err(err, WM_ERR_INPUT, "GPTQ: X^T X (+ %g of its mean diagonal) is not positive definite (pivot %lld "
                   "of %lld): raise the damping", damp, (long long)(K - bad + 1), (long long)K);
        goto out;
    }
    for (size_t i = 0; i < kk; i++) uf[i] = (float)u[i];
    for (int64_t kb = 0; kb < nblk && given; kb++) /* the given parameters, block-major as below */
        for (int64_t n = 0; n < N; n++) {
            int64_t zb = n * ((nblk * bits + 7) / 8) + kb * bits / 8;
            sc[kb * N + n] = scales[n * nblk + kb];
            zs[kb * N + n] = !zp ? 1 << (bits - 1) : bits == 8 ? zp[zb] : kb % 2 ? zp[zb] >> 4 : zp[zb] & 15;
        }
    if (zp && !given) memset(zp, 0, (size_t)(N * ((nblk * bits + 7) / 8)));
    for (int64_t kb = 0; kb < nblk && stat; kb++) { /* static groups: every block's parameters now */
        int64_t k0 = kb * bs, nr = K - k0 < bs ? K - k0 : bs;
        if (!given) block_params(w, N, k0, nr, bits, symmetric, scale_dtype, mn, mx, sc + kb * N, zs + kb * N);
        put_block(q, scales, zp, K, N, bs, bits, kb, sc + kb * N, zs + kb * N);
    }
    for (int64_t i = 0; i < K; i++) {
        int64_t k = perm[i].k, kb = k / bs, k0 = kb * bs, nr = K - k0 < bs ? K - k0 : bs;
        float *bsc = stat ? sc + kb * N : sc;
        int *bzs = stat ? zs + kb * N : zs;
        if (!stat && k == k0) { /* in order: the block's parameters from its rows as updated so far */
            block_params(wk, N, k0, nr, bits, symmetric, scale_dtype, mn, mx, sc, zs);
            put_block(q, scales, zp, K, N, bs, bits, kb, sc, zs);
        }
        int64_t b0 = i - i % LAZY, b1 = b0 + LAZY < K ? b0 + LAZY : K; /* the lazy batch of row i */
        float *row = wk + i * N, *ei = e + (i - b0) * N, d = uf[i * K + i];
        for (int64_t n = 0; n < N; n++) {
            float r = bsc[n] != 0.0f ? 1.0f / bsc[n] : 0.0f;
            int c = wm_nbits_code(row[n], r, bzs[n], kmax);
            wm_nbits_put_code(&q[(n * nblk + kb) * blob], k - k0, bits, c);
            ei[n] = (row[n] - bsc[n] * (float)(c - bzs[n])) / d;
        }
        for (int64_t j = i + 1; j < b1; j++) { /* the rest of the batch now */
            float f = uf[i * K + j];
            if (f == 0.0f) continue;
            float *rj = wk + j * N;
            for (int64_t n = 0; n < N; n++) rj[n] -= f * ei[n];
        }
        if (i + 1 == b1 && b1 < K) { /* the batch is done: the rows past it at once */
            wm_sgemm_args a;
            memset(&a, 0, sizeof a);
            a.M = K - b1, a.N = N, a.K = b1 - b0, a.alpha = -1.0f, a.beta = 1.0f;
            a.A = uf + b0 * K + b1, a.lda = K, a.trans_a = 1; /* U[b0:b1, b1:]^T */
            a.B = e, a.ldb = N;
            a.C = wk + b1 * N, a.ldc = N;
            size_t ws = wm_sgemm_workspace_size(&a, 1);
            void *gw = ws ? malloc(ws) : NULL;
            if (ws && !gw) {
                s = wm_err(err, WM_ERR_NOMEM, "GPTQ: out of memory");
                goto out;
            }
            a.work = gw;
            wm_kernels_get()->sgemm(&a, 0, 1);
            free(gw);
        }
    }
out:
    free(h), free(u), free(work), free(wk), free(e), free(uf), free(mn), free(mx), free(sc), free(zs), free(perm);
    return s;
}

wm_status wm_quant_gptq(const float *w, int64_t K, int64_t N, const double *H, double damp, int act_order,
                        int64_t bs, int bits, int symmetric, int32_t scale_dtype, uint8_t *q, float *scales,
                        uint8_t *zp, wm_error *err) {
    return gptq(w, K, N, H, damp, act_order, 0, bs, bits, symmetric, scale_dtype, q, scales, zp, err);
}

wm_status wm_quant_gptq_given(const float *w, int64_t K, int64_t N, const double *H, double damp, int act_order,
                              int64_t bs, int bits, uint8_t *q, const float *scales, const uint8_t *zp,
                              wm_error *err) {
    /* gptq writes the given values back unchanged (put_block), so the casts only share its code */
    return gptq(w, K, N, H, damp, act_order, 1, bs, bits, !zp, WM_DT_FLOAT, q, (float *)scales, (uint8_t *)zp, err);
}
