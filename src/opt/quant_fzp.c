/*
 * quant_fzp.c - asymmetric block quantization with a float offset per block (MatMulNBits with zero points of the
 * scales' float type): each block of values v_i is stored as codes q_i in [0, kmax] with a scale s and a float
 * zero point z, dequantized as s * (q_i - z) = s * q_i + m (m = -s * z, the block's "min", as in Q4_1 / Q4_K).
 *
 * The fit (wm_nbits_fit_fzp) minimizes the weighted error E = sum_i w_i (v_i - s * (q_i - z))^2 over a grid of
 * candidate scales around the block's range: for each, codes by rounding from the block's minimum, then (s, m)
 * solved by weighted least squares for those codes (a 2x2 system), the scale rounded as stored, z = -m / s as
 * stored, and the codes redone at (s, z); the best then goes through a few more refit / recode rounds. The plain
 * min/max choice (s = (max - min) / kmax, z = -min / s) is a candidate too, so E never exceeds it.
 *
 * Integer zero points (wm_nbits_fit_izp, uint8 zero points: onnxruntime's fast MatMulNBits path) take the same
 * candidate ranges, each with the zero point -min / s rounded down and up, the scale refitted by least squares for
 * those codes (one parameter: z is fixed) and the codes redone; the best then goes through the refit / recode
 * rounds. On gaussian blocks it reaches the error of quant_nbits.c's former asymmetric search (21 scales x 3 zero
 * points) at about a sixth of its time, about twice the float fit's (tests/unit/test_quant.c).
 *
 * With an importance (wm_quant_config.importance) the integer fit's error is the output's: for inputs x of
 * per-column variance v_k and mean mu_k, E[(sum_k d_k x_k)^2] = sum_k v_k d_k^2 + (sum_k mu_k d_k)^2 for the block's
 * errors d_k (columns taken as uncorrelated apart from their means), so w = v and the mean term mu (codes_at_int,
 * refit_scale). The mean term matters: a block's zero point shifts all its weights alike, which a column mean turns
 * into an output shift.
 */
#include <math.h>
#include <string.h>

#include "onnx/dtype.h"
#include "opt/quant_impl.h"

#define FZP_STEPS 4   /* candidate scales: range / (kmax + t / FZP_DIV), t in [-FZP_STEPS, FZP_STEPS] */
#define FZP_DIV 2.0f
#define FZP_ROUNDS 3  /* then alternating refit / recode rounds on the best, while E falls */

float wm_nbits_round_zp(float z, int32_t zp_dtype) {
    if (zp_dtype == WM_DT_FLOAT16) return wm_f16_to_f32(wm_f32_to_f16(z));
    if (zp_dtype == WM_DT_BFLOAT16) return wm_bf16_to_f32(wm_f32_to_bf16(z));
    return z;
}

/* clamp(round(c), 0, kmax), round half away from zero as roundf, without its library call (c - (int)c is exact
 * for the c < 2^23 that reach it). */
static inline int code_clamped(float c, int kmax) {
    if (!(c >= 0.0f)) return 0;
    if (c >= (float)kmax) return kmax;
    int k = (int)c;
    return k + (c - (float)k >= 0.5f);
}

/* Codes of x at (s, z) into q; returns E (NaN when s is unusable). */
static double codes_at(const float *x, const float *w, int64_t n, float s, float z, int kmax, uint8_t *q) {
    if (!(s != 0.0f) || !isfinite(s) || !isfinite(z) || !isfinite(1.0f / s)) return NAN;
    float r = 1.0f / s;
    double e = 0;
    for (int64_t i = 0; i < n; i++) {
        int k = code_clamped(x[i] * r + z, kmax);
        q[i] = (uint8_t)k;
        double d = (double)x[i] - (double)s * ((double)k - (double)z);
        e += (double)w[i] * d * d;
    }
    return e;
}

/* Weighted least-squares (s, m) for codes q: *s and *z (= -m/s) as stored; 0 when the system is singular. */
static int refit(const float *x, const float *w, const uint8_t *q, int64_t n, int32_t sdt, int32_t zdt, float *s,
                 float *z) {
    double sw = 0, sq = 0, sqq = 0, sx = 0, sqx = 0;
    for (int64_t i = 0; i < n; i++) {
        double wi = w[i], qi = q[i];
        sw += wi, sq += wi * qi, sqq += wi * qi * qi, sx += wi * x[i], sqx += wi * qi * x[i];
    }
    double det = sw * sqq - sq * sq;
    if (!(det > 1e-30 * sw * sqq)) return 0;
    double ss = (sw * sqx - sq * sx) / det, mm = (sqq * sx - sq * sqx) / det;
    float sr = wm_nbits_round_scale((float)ss, sdt);
    if (!(sr != 0.0f) || !isfinite(sr)) return 0;
    *s = sr;
    *z = wm_nbits_round_zp((float)(-mm / (double)sr), zdt);
    return isfinite(*z);
}

/* Keeps (s, z, codes) when E is below *best. */
static void consider(const float *x, const float *w, int64_t n, float s, float z, int kmax, uint8_t *tq,
                     double *best, float *bs, float *bz, uint8_t *bq) {
    double e = codes_at(x, w, n, s, z, kmax, tq);
    if (e < *best) {
        *best = e, *bs = s, *bz = z;
        memcpy(bq, tq, (size_t)n);
    }
}

void wm_nbits_fit_fzp(const float *x, const float *w, int64_t n, int kmax, int32_t scale_dtype, int32_t zp_dtype,
                      uint8_t *q, uint8_t *tq, float *scale, float *zp) {
    float lo = x[0], hi = x[0];
    for (int64_t i = 1; i < n; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    double best = INFINITY;
    float bs = 0.0f, bz = 0.0f;
    memset(q, 0, (size_t)n);
    if (hi == lo) { /* one value: code 0 at offset lo (any nonzero scale), or all zero */
        float s = wm_nbits_round_scale(lo != 0.0f ? fabsf(lo) : 1.0f, scale_dtype);
        float z = wm_nbits_round_zp(-lo / s, zp_dtype);
        consider(x, w, n, s, z, kmax, tq, &best, &bs, &bz, q);
    } else {
        float s0 = wm_nbits_round_scale((hi - lo) / (float)kmax, scale_dtype); /* the plain min/max choice */
        consider(x, w, n, s0, wm_nbits_round_zp(-lo / s0, zp_dtype), kmax, tq, &best, &bs, &bz, q);
        for (int t = -FZP_STEPS; t <= FZP_STEPS; t++) { /* each candidate: codes from the minimum, one refit */
            float sc = (hi - lo) / ((float)kmax + (float)t / FZP_DIV), s, z;
            if (!(sc > 0.0f) || !isfinite(sc)) continue;
            float r = 1.0f / sc;
            for (int64_t i = 0; i < n; i++) tq[i] = (uint8_t)code_clamped((x[i] - lo) * r, kmax);
            if (refit(x, w, tq, n, scale_dtype, zp_dtype, &s, &z))
                consider(x, w, n, s, z, kmax, tq, &best, &bs, &bz, q);
        }
        for (int round = 0; round < FZP_ROUNDS; round++) { /* the best: refit for its codes, recode, while better */
            float s, z;
            double before = best;
            if (!(best < INFINITY) || !refit(x, w, q, n, scale_dtype, zp_dtype, &s, &z)) break;
            consider(x, w, n, s, z, kmax, tq, &best, &bs, &bz, q);
            if (!(best < before)) break;
        }
    }
    if (!(best < INFINITY)) { /* nothing usable (overflowing range): scale 0, every value dequantizes to 0 */
        bs = 0.0f, bz = 0.0f;
        memset(q, 0, (size_t)n);
    }
    *scale = bs, *zp = bz;
}

/* Codes of x at scale s and integer zero point z into q; returns E (NaN when s is unusable), plus (sum mu_i d_i)^2
 * when mu is given (d_i = x_i - s (q_i - z)). */
static double codes_at_int(const float *x, const float *w, const float *mu, int64_t n, float s, int z, int kmax,
                           uint8_t *q) {
    double e = codes_at(x, w, n, s, (float)z, kmax, q);
    if (!mu || !isfinite(e)) return e;
    double m = 0;
    for (int64_t i = 0; i < n; i++) m += (double)mu[i] * ((double)x[i] - (double)s * ((double)q[i] - z));
    return e + m * m;
}

/* The least-squares scale of that E for codes q at integer zero point z, as stored; 0 when there is none. */
static float refit_scale(const float *x, const float *w, const float *mu, const uint8_t *q, int64_t n, int z,
                         int32_t sdt) {
    double num = 0, den = 0, mc = 0, mx = 0;
    for (int64_t i = 0; i < n; i++) {
        double c = (double)q[i] - z;
        num += (double)w[i] * x[i] * c, den += (double)w[i] * c * c;
        if (mu) mc += (double)mu[i] * c, mx += (double)mu[i] * x[i];
    }
    num += mc * mx, den += mc * mc;
    float s = den > 0 ? wm_nbits_round_scale((float)(num / den), sdt) : 0.0f;
    return s != 0.0f && isfinite(s) && isfinite(1.0f / s) ? s : 0.0f;
}

/* Candidate (s, z): its codes, the scale refitted for them and the codes redone (try_scale's step); kept in the
 * best when E is lower. */
static void consider_int(const float *x, const float *w, const float *mu, int64_t n, float s, int z, int kmax,
                         int32_t sdt, uint8_t *tq, double *best, float *bs, int *bz, uint8_t *bq) {
    if (z < 0 || z > kmax || !isfinite(codes_at_int(x, w, mu, n, s, z, kmax, tq))) return;
    float s2 = refit_scale(x, w, mu, tq, n, z, sdt);
    if (s2 == 0.0f) return;
    double e = codes_at_int(x, w, mu, n, s2, z, kmax, tq);
    if (e < *best) {
        *best = e, *bs = s2, *bz = z;
        memcpy(bq, tq, (size_t)n);
    }
}

/* The candidates at scale s: the zero point -lo / s rounded down and up. */
static void consider_range(const float *x, const float *w, const float *mu, int64_t n, float s, float lo, int kmax,
                           int32_t sdt, uint8_t *tq, double *best, float *bs, int *bz, uint8_t *bq) {
    if (!(s > 0.0f) || !isfinite(s)) return;
    float f = floorf(-lo / s);
    int z0 = !(f >= 0.0f) ? 0 : f >= (float)kmax ? kmax : (int)f;
    consider_int(x, w, mu, n, s, z0, kmax, sdt, tq, best, bs, bz, bq);
    if (z0 < kmax) consider_int(x, w, mu, n, s, z0 + 1, kmax, sdt, tq, best, bs, bz, bq);
}

void wm_nbits_fit_izp(const float *x, const float *w, const float *mu, int64_t n, int kmax, int32_t scale_dtype,
                      uint8_t *q, uint8_t *tq, float *scale, int *zp) {
    float lo = x[0], hi = x[0];
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) return; /* NaN / inf in the block: the caller's choice and codes stay */
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    float bs = *scale;
    int bz = *zp;
    /* the caller's (RTN's) choice and its codes: E never exceeds it (scale 0: an all-zero block) */
    double best = *scale != 0.0f ? codes_at_int(x, w, mu, n, *scale, *zp, kmax, q) : INFINITY;
    if (!(best < INFINITY)) best = INFINITY;
    for (int t = -FZP_STEPS; t <= FZP_STEPS && hi > lo; t++) /* candidate ranges [lo, hi] over the levels */
        consider_range(x, w, mu, n, wm_nbits_round_scale((hi - lo) / ((float)kmax + (float)t / FZP_DIV), scale_dtype),
                       lo, kmax, scale_dtype, tq, &best, &bs, &bz, q);
    for (int round = 0; round < FZP_ROUNDS && best < INFINITY; round++) { /* the best: refit, recode, while better */
        float s2 = refit_scale(x, w, mu, q, n, bz, scale_dtype);
        if (s2 == 0.0f || s2 == bs) break;
        double e = codes_at_int(x, w, mu, n, s2, bz, kmax, tq);
        if (!(e < best)) break;
        best = e, bs = s2;
        memcpy(q, tq, (size_t)n);
    }
    if (!(best < INFINITY)) { /* nothing usable: scale 0 (every value dequantizes to 0) */
        bs = 0.0f, bz = 0;
        memset(q, 0, (size_t)n);
    }
    *scale = bs, *zp = bz;
}

void wm_quant_blocks_fzp(const float *w, int64_t K, int64_t N, int64_t bs, int bits, uint8_t *q, float *scales,
                         float *zp) {
    int64_t nblk = (K + bs - 1) / bs, blob = bs * bits / 8;
    const int kmax = (1 << bits) - 1;
    float col[256], wt[256];
    uint8_t cq[256], tq[256];
    if (bs > 256) return; /* a test helper: the pass itself streams any block size (quant_nbits.c) */
    for (int64_t n = 0; n < N; n++)
        for (int64_t kb = 0; kb < nblk; kb++) {
            int64_t r0 = kb * bs, nr = K - r0 < bs ? K - r0 : bs;
            for (int64_t k = 0; k < nr; k++) col[k] = w[(r0 + k) * N + n];
            wm_nbits_fzp_weights(col, nr, wt);
            float s, z;
            wm_nbits_fit_fzp(col, wt, nr, kmax, WM_DT_FLOAT, WM_DT_FLOAT, cq, tq, &s, &z);
            uint8_t *dst = &q[(n * nblk + kb) * blob];
            int zc = (int)roundf(z); /* padding rows: the code nearest the zero point (dequantized near 0) */
            zc = zc < 0 ? 0 : zc > kmax ? kmax : zc;
            for (int64_t k = 0; k < bs; k++) wm_nbits_put_code(dst, k, bits, k < nr ? cq[k] : zc);
            scales[n * nblk + kb] = s;
            zp[n * nblk + kb] = z;
        }
}

void wm_nbits_fzp_weights(const float *x, int64_t n, float *w) {
    double ms = 0;
    for (int64_t i = 0; i < n; i++) ms += (double)x[i] * x[i];
    ms /= (double)(n > 0 ? n : 1);
    for (int64_t i = 0; i < n; i++) w[i] = (float)((double)x[i] * x[i] + ms / 8);
}

void wm_nbits_fit_weights(const float *x, const float *imp, int64_t n, float *w) {
    if (imp) memcpy(w, imp, (size_t)n * sizeof *w);
    else wm_nbits_fzp_weights(x, n, w);
}
