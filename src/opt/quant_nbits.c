/*
 * quant_nbits.c - weight-only round-to-nearest block quantization into
 * MatMulNBits (com.microsoft): the block quantizer in onnxruntime's layout,
 * and the pass turning MatMul(A, W const [K, N]) into MatMulNBits.
 *
 * Per column n and block of bs rows (values v of that block):
 *   symmetric:  m = the one of (min, max) with the larger magnitude;
 *               scale = -m / 2^(bits-1); zero point 2^(bits-1) (implicit)
 *   asymmetric: lo = min(min, 0), hi = max(max, 0); scale = (hi-lo)/(2^bits-1);
 *               zp = clamp(round(-lo/scale)) (0 when scale is 0)
 *   q = clamp(round(v * (1/scale) + zp), 0, 2^bits-1)   (round half away from 0)
 * Packed two 4-bit values per byte, the lower index in the low nibble.
 * For float16 weights the scale is rounded to float16 before use.
 *
 * With the scale search (wm_quant_config.scale_search) each block then tries other scales (and, asymmetric,
 * zero points) and keeps the one of least weighted error E = sum_i w_i (v_i - scale * (q_i - zp))^2, RTN's own
 * choice among them, so E never exceeds RTN's (symmetric: search_block; asymmetric: wm_nbits_fit_izp, the
 * float-offset fit of quant_fzp.c with its zero point rounded to an integer and the scale refitted).
 */
#include <float.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/error.h"
#include "onnx/dtype.h"
#include "opt/quant_impl.h"

/* The stored scale. With half_scales, float32 scales are rounded to the nearest half when that is a normal
 * half (|s| in [2^-14, 65504]): the model stays exact float32 (codes are computed with the rounded scale), and
 * an engine may stream the scales as 2-byte halves (winml's AVX-512 kernel does: 1/9 fewer weight bytes per
 * token at 4 bits, block 32). */
float wm_nbits_round_scale(float s, int32_t scale_dtype) {
    if (scale_dtype == WM_DT_FLOAT16) return wm_f16_to_f32(wm_f32_to_f16(s));
    if (scale_dtype == WM_DT_BFLOAT16) return wm_bf16_to_f32(wm_f32_to_bf16(s));
    if (scale_dtype != WM_SCALE_HALF_EXACT) return s;
    float h = wm_f16_to_f32(wm_f32_to_f16(s));
    return fabsf(h) >= 6.103515625e-05f && fabsf(h) <= 65504.0f ? h : s;
}

/* ---------------------------------------------------------------- the scale search */

#define SEARCH_STEPS 10 /* candidate scales: RTN's range over (levels * (1 + t/80)), t in [-10, 10] */

#define code_of wm_nbits_code

/* E of codes q with scale s and zero point z (double sums). */
static double block_err(const float *x, const float *w, const uint8_t *q, int64_t n, float s, int z) {
    double e = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)x[i] - (double)s * (double)(q[i] - z);
        e += (double)w[i] * d * d;
    }
    return e;
}

/*
 * One candidate: codes at scale s0 and zero point z, then the scale refit by least squares for those codes
 * (sum w v (q-z) / sum w (q-z)^2), stored-rounded, the codes redone at it; kept in *best when E is lower.
 */
static void try_scale(const float *x, const float *w, int64_t n, float s0, int z, int kmax, int32_t scale_dtype,
                      uint8_t *q, double *best_e, float *best_s, int *best_z, uint8_t *best_q) {
    if (!(s0 != 0.0f) || !isfinite(s0)) return;
    float r = 1.0f / s0;
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        int c = code_of(x[i], r, z, kmax) - z;
        num += (double)w[i] * (double)x[i] * c;
        den += (double)w[i] * (double)c * c;
    }
    float s = den > 0 ? wm_nbits_round_scale((float)(num / den), scale_dtype) : 0.0f;
    if (!(s != 0.0f) || !isfinite(s) || !isfinite(1.0f / s)) return;
    r = 1.0f / s;
    double e = 0; /* block_err of the codes at s, computed as they are made */
    for (int64_t i = 0; i < n; i++) {
        q[i] = (uint8_t)code_of(x[i], r, z, kmax);
        double d = (double)x[i] - (double)s * (double)(q[i] - z);
        e += (double)w[i] * d * d;
    }
    if (e < *best_e) {
        *best_e = e, *best_s = s, *best_z = z;
        memcpy(best_q, q, (size_t)n);
    }
}

/*
 * The symmetric search over one block column x[0..n) (finite values; RTN chose *scale, *zp, codes q[0..n)):
 * candidate scales around RTN's (the extreme m mapped to -2^(bits-1) or to 2^(bits-1)-1), each refit
 * (try_scale). Weights wm_nbits_fit_weights: the larger weights matter more (their errors move outputs most when
 * inputs are alike in size) without leaving the small ones free; with an importance imp (NULL: none), the input
 * columns' variances instead. *scale, *zp and q receive the best; RTN's when
 * none beats it.
 * w and tq: room for n floats and n bytes.
 */
static void search_block(const float *x, const float *imp, int64_t n, int bits, float lo, float hi,
                         int32_t scale_dtype, float *scale, int *zp, uint8_t *q, float *w, uint8_t *tq) {
    const int kmax = (1 << bits) - 1, kmid = 1 << (bits - 1);
    wm_nbits_fit_weights(x, imp, n, w);
    double best = block_err(x, w, q, n, *scale, *zp);
    if (!isfinite(best)) return;
    float best_s = *scale;
    int best_z = *zp;
    for (int t = -SEARCH_STEPS; t <= SEARCH_STEPS; t++) {
        float f = 1.0f + (float)t / 80.0f;
        float m = fabsf(hi) > fabsf(lo) ? hi : lo;
        try_scale(x, w, n, -m / ((float)kmid * f), kmid, kmax, scale_dtype, tq, &best, &best_s, &best_z, q);
        try_scale(x, w, n, m / ((float)(kmid - 1) * f), kmid, kmax, scale_dtype, tq, &best, &best_s, &best_z, q);
    }
    *scale = best_s, *zp = best_z;
}

#define put_code wm_nbits_put_code

void wm_nbits_params(float lo, float hi, int bits, int sym, int32_t scale_dtype, float *scale, int *zp) {
    const int kmax = (1 << bits) - 1, kmid = 1 << (bits - 1);
    float sc;
    int z;
    if (sym) {
        float m = fabsf(hi) > fabsf(lo) ? hi : lo;
        sc = -m / (float)kmid;
        z = kmid;
    } else {
        lo = lo < 0.0f ? lo : 0.0f;
        hi = hi > 0.0f ? hi : 0.0f;
        sc = (hi - lo) / (float)kmax;
        float zf = sc != 0.0f ? 0.0f - lo / sc : lo;
        z = !(zf >= 0.0f) ? 0 : zf > (float)kmax ? kmax : (int)roundf(zf);
    }
    *scale = wm_nbits_round_scale(sc, scale_dtype);
    *zp = z;
}

void wm_nbits_put_zp(uint8_t *zp, int64_t n, int64_t kb, int64_t nblk, int bits, int z) {
    uint8_t *b = &zp[n * ((nblk * bits + 7) / 8) + kb * bits / 8];
    if (bits == 8) *b = (uint8_t)z;
    else if (kb % 2 == 0) *b = (uint8_t)((*b & 0xf0) | z);
    else *b = (uint8_t)((*b & 0x0f) | (z << 4));
}

/* Floats of scratch block_row needs: per-column state (3*N floats + N ints), and for the search a column's block
 * (bs floats), its weights (bs floats) and two code buffers (2*bs bytes). */
static size_t row_scratch(int64_t N, int64_t bs) { return (size_t)(4 * N + 3 * bs); }

/*
 * One block row (rows [kb*bs, kb*bs + nrows) of all N columns, row-major) with a given scale
 * rounding. Walks the rows in memory order (per-column state in scratch, row_scratch floats),
 * so a wide weight streams through the cache; each value sees the same arithmetic as the
 * per-column definition above. search: each column's block then goes through search_block (symmetric) or
 * wm_nbits_fit_izp (asymmetric). imp: the importance of these nrows rows (NULL: all alike), weighting the fits.
 */
static void block_row(const float *rows, const float *imp, const float *mu, int64_t kb, int64_t nrows, int64_t K, int64_t N,
                      int64_t bs, int bits, int sym, int search, int32_t scale_dtype, uint8_t *q, float *scales,
                      uint8_t *zp, float *zpf, int32_t zp_dtype, float *scratch) {
    int64_t nblk = (K + bs - 1) / bs, blob = bs * bits / 8;
    const int kmax = (1 << bits) - 1;
    float *mn = scratch, *mx = scratch + N, *rs = scratch + 2 * N;
    int *zs = (int *)(scratch + 3 * N);
    float *col = scratch + 4 * N, *wts = col + bs;
    uint8_t *cq = (uint8_t *)(wts + bs), *tq = cq + bs;
    for (int64_t n = 0; n < N; n++) {
        mn[n] = FLT_MAX;
        mx[n] = -FLT_MAX;
    }
    for (int64_t r = 0; r < nrows; r++) {
        const float *row = rows + r * N;
        for (int64_t n = 0; n < N; n++) {
            float v = row[n];
            if (v < mn[n]) mn[n] = v;
            if (v > mx[n]) mx[n] = v;
        }
    }
    for (int64_t n = 0; n < N; n++) {
        float scale;
        int z;
        wm_nbits_params(mn[n], mx[n], bits, sym, scale_dtype, &scale, &z);
        uint8_t *dst = &q[(n * nblk + kb) * blob]; /* padding rows past K hold the zero point */
        if (zpf) { /* float zero points: every column's block fitted (NaN/inf blocks: RTN's, as floats) */
            float zf = (float)z;
            if (isfinite(mn[n]) && isfinite(mx[n])) {
                for (int64_t k = 0; k < nrows; k++) col[k] = rows[k * N + n];
                wm_nbits_fit_weights(col, imp, nrows, wts);
                wm_nbits_fit_fzp(col, wts, nrows, kmax, scale_dtype, zp_dtype, cq, tq, &scale, &zf);
                z = (int)roundf(zf);
                z = z < 0 ? 0 : z > kmax ? kmax : z;
            } else {
                float r = scale != 0.0f ? 1.0f / scale : 0.0f;
                for (int64_t k = 0; k < nrows; k++) cq[k] = (uint8_t)code_of(rows[k * N + n], r, z, kmax);
            }
            for (int64_t k = 0; k < nrows; k++) put_code(dst, k, bits, cq[k]);
            rs[n] = 0.0f, zs[n] = -1;
            zpf[n * nblk + kb] = zf;
        } else if (search && isfinite(mn[n]) && isfinite(mx[n])) { /* NaN/inf blocks keep RTN (their min/max say so) */
            float r = scale != 0.0f ? 1.0f / scale : 0.0f;
            for (int64_t k = 0; k < nrows; k++) {
                col[k] = rows[k * N + n];
                cq[k] = (uint8_t)code_of(col[k], r, z, kmax);
            }
            if (sym) search_block(col, imp, nrows, bits, mn[n], mx[n], scale_dtype, &scale, &z, cq, wts, tq);
            else {
                wm_nbits_fit_weights(col, imp, nrows, wts);
                wm_nbits_fit_izp(col, wts, mu, nrows, kmax, scale_dtype, cq, tq, &scale, &z);
            }
            for (int64_t k = 0; k < nrows; k++) put_code(dst, k, bits, cq[k]);
            rs[n] = 0.0f, zs[n] = -1; /* codes written: the pass below skips this column */
        } else {
            rs[n] = scale != 0.0f ? 1.0f / scale : 0.0f;
            zs[n] = z;
        }
        scales[n * nblk + kb] = scale;
        if (zp) wm_nbits_put_zp(zp, n, kb, nblk, bits, z);
        for (int64_t r = nrows; r < bs; r++) put_code(dst, r, bits, z);
    }
    const int64_t tile = 64; /* columns per pass: their output blocks stay in cache across the rows */
    for (int64_t n0 = 0; n0 < N; n0 += tile) {
        int64_t n1 = n0 + tile < N ? n0 + tile : N;
        for (int64_t r = 0; r < nrows; r++) {
            const float *row = rows + r * N;
            for (int64_t n = n0; n < n1; n++)
                if (zs[n] >= 0) put_code(&q[(n * nblk + kb) * blob], r, bits, code_of(row[n], rs[n], zs[n], kmax));
        }
    }
}

static void quant_blocks(const float *w, const float *imp, const float *mu, int64_t K, int64_t N, int64_t bs, int bits, int symmetric,
                         int search, uint8_t *q, float *scales, uint8_t *zp) {
    int64_t nblk = (K + bs - 1) / bs;
    float *scratch = malloc(row_scratch(N, bs) * sizeof *scratch);
    if (!scratch) return; /* callers size N small; the streamed path checks its own allocation */
    if (zp) memset(zp, 0, (size_t)(N * ((nblk * bits + 7) / 8)));
    for (int64_t kb = 0; kb < nblk; kb++) {
        int64_t r0 = kb * bs, nr = K - r0 < bs ? K - r0 : bs;
        block_row(w + r0 * N, imp ? imp + r0 : NULL, mu ? mu + r0 : NULL, kb, nr, K, N, bs, bits, symmetric, search, WM_DT_FLOAT, q,
                  scales, zp, NULL, 0, scratch);
    }
    free(scratch);
}

void wm_quant_blocks(const float *w, int64_t K, int64_t N, int64_t bs, int bits, int symmetric, uint8_t *q,
                     float *scales, uint8_t *zp) {
    quant_blocks(w, NULL, NULL, K, N, bs, bits, symmetric, 0, q, scales, zp);
}

void wm_quant_blocks_search(const float *w, int64_t K, int64_t N, int64_t bs, int bits, int symmetric, uint8_t *q,
                            float *scales, uint8_t *zp) {
    quant_blocks(w, NULL, NULL, K, N, bs, bits, symmetric, 1, q, scales, zp);
}

void wm_quant_blocks_imp(const float *w, const float *imp, const float *mu, int64_t K, int64_t N, int64_t bs, int bits,
                         int symmetric, uint8_t *q, float *scales, uint8_t *zp) {
    quant_blocks(w, imp, mu, K, N, bs, bits, symmetric, 1, q, scales, zp);
}

float *wm_nbits_importance(const double *h, int64_t K, uint64_t rows) {
    float *v = malloc((size_t)(K > 0 ? 2 * K : 1) * sizeof *v);
    if (!v) return NULL;
    double mean = 0, R = rows ? (double)rows : 1.0;
    for (int64_t k = 0; k < K; k++) mean += isfinite(h[k]) && h[k] > 0 ? h[k] / R : 0;
    mean /= (double)(K > 0 ? K : 1);
    for (int64_t k = 0; k < K; k++) {
        double m2 = isfinite(h[k]) && h[k] > 0 ? h[k] / R : 0, mu = isfinite(h[K + k]) ? h[K + k] / R : 0;
        double var = m2 - mu * mu > 0 ? m2 - mu * mu : 0;
        double r = mean > 0 ? var / mean : 1;
        v[k] = (float)(r > 1e-3 ? r : 1e-3);
        v[K + k] = mean > 0 ? (float)(mu / sqrt(mean)) : 0.0f;
    }
    return v;
}

/* ---------------------------------------------------------------- reading weights */


/* Element i of a raw float tensor of dtype dt (unaligned-safe). */
static float load_elem(const uint8_t *p, int32_t dt, uint64_t i) {
    switch (dt) {
    case WM_DT_FLOAT: {
        float f;
        memcpy(&f, p + i * 4, 4);
        return f;
    }
    case WM_DT_FLOAT16: {
        uint16_t h;
        memcpy(&h, p + i * 2, 2);
        return wm_f16_to_f32(h);
    }
    case WM_DT_BFLOAT16: {
        uint16_t h;
        memcpy(&h, p + i * 2, 2);
        return wm_bf16_to_f32(h);
    }
    case WM_DT_DOUBLE: {
        double d;
        memcpy(&d, p + i * 8, 8);
        return (float)d;
    }
    default: return 0;
    }
}

/* Rows [r0, r0+nr) of a 2-D float tensor of N columns into dst (floats); releases the source range. */
static wm_status read_rows(const wm_onnx_model *m, const wm_onnx_tensor *t, int64_t r0, int64_t nr, int64_t N,
                           float *dst, int release, wm_error *err) {
    wm_bytes b = wm_onnx_tensor_bytes(t);
    size_t es = wm_ct_elem_size(t->data_type);
    uint64_t first = (uint64_t)(r0 * N), count = (uint64_t)(nr * N);
    if (!b.p || (first + count) * es > b.n)
        return wm_err(err, WM_ERR_INPUT, "tensor '%s': its data is missing or short", t->name ? t->name : "");
    const uint8_t *p = b.p + first * es;
    if (t->data_type == WM_DT_FLOAT) memcpy(dst, p, (size_t)count * 4);
    else
        for (uint64_t i = 0; i < count; i++) dst[i] = load_elem(p, t->data_type, i);
    if (release) wm_opt_release(m, p, (size_t)(count * es));
    return WM_OK;
}

/* Columns [k0, k0+nk) of a [N, K] tensor, transposed into dst as nk rows of N floats. */
static wm_status read_cols_t(const wm_onnx_tensor *t, int64_t k0, int64_t nk, int64_t K, int64_t N, float *dst,
                             wm_error *err) {
    wm_bytes b = wm_onnx_tensor_bytes(t);
    size_t es = wm_ct_elem_size(t->data_type);
    if (!b.p || (uint64_t)(N * K) * es > b.n)
        return wm_err(err, WM_ERR_INPUT, "tensor '%s': its data is missing or short", t->name ? t->name : "");
    for (int64_t n = 0; n < N; n++) {
        const uint8_t *row = b.p + (size_t)(n * K + k0) * es;
        for (int64_t k = 0; k < nk; k++) dst[k * N + n] = load_elem(row, t->data_type, (uint64_t)k);
    }
    return WM_OK;
}

float *wm_quant_weight_f32(const wm_onnx_model *m, const wm_onnx_tensor *t, int release, wm_error *err) {
    uint64_t n = 1;
    for (size_t i = 0; i < t->n_dims; i++) n *= (uint64_t)t->dims[i];
    float *w = malloc((size_t)(n ? n : 1) * sizeof *w);
    if (!w) {
        wm_err(err, WM_ERR_NOMEM, "out of memory reading '%s'", t->name ? t->name : "");
        return NULL;
    }
    if (read_rows(m, t, 0, 1, (int64_t)n, w, release, err)) {
        free(w);
        return NULL;
    }
    return w;
}

/* ---------------------------------------------------------------- the NBITS job */

/* v[0..n) into dst as dtype's bytes (float32, float16 or bfloat16); nothing when s (a failed run) is set. */
static void put_floats(uint8_t *dst, const float *v, int64_t n, int32_t dtype, wm_status s) {
    for (int64_t i = 0; !s && i < n; i++) {
        if (dtype == WM_DT_FLOAT) memcpy(dst + i * 4, &v[i], 4);
        else {
            uint16_t h = dtype == WM_DT_FLOAT16 ? wm_f32_to_f16(v[i]) : wm_f32_to_bf16(v[i]);
            memcpy(dst + i * 2, &h, 2);
        }
    }
}

void wm_qjob_nbits_sizes(const wm_qjob *j, uint64_t *sz);
void wm_qjob_nbits_sizes(const wm_qjob *j, uint64_t *sz) {
    uint64_t nblk = (uint64_t)((j->K + j->bs - 1) / j->bs);
    sz[0] = (uint64_t)j->N * nblk * (uint64_t)(j->bs * j->bits / 8);
    sz[1] = (uint64_t)j->N * nblk * wm_ct_elem_size(j->scale_dtype);
    sz[2] = j->sym ? 0
            : j->float_zp ? (uint64_t)j->N * nblk * wm_ct_elem_size(j->scale_dtype)
                          : (uint64_t)j->N * ((nblk * (uint64_t)j->bits + 7) / 8);
}

wm_status wm_qjob_nbits_run(const wm_qjob *j, uint8_t **out, int release, wm_error *err);
wm_status wm_qjob_nbits_run(const wm_qjob *j, uint8_t **out, int release, wm_error *err) {
    int64_t K = j->K, N = j->N, bs = j->bs, nblk = (K + bs - 1) / bs;
    float *rows = malloc((size_t)(bs * N) * sizeof *rows), *sc = malloc((size_t)(nblk * N) * sizeof *sc);
    float *scratch = malloc(row_scratch(N, bs) * sizeof *scratch);
    if (!rows || !sc || !scratch) {
        free(rows);
        free(sc);
        free(scratch);
        return wm_err(err, WM_ERR_NOMEM, "out of memory quantizing '%s'", j->src->name ? j->src->name : "");
    }
    float *fz = j->float_zp && !j->hess ? malloc((size_t)(nblk * N) * sizeof *fz) : NULL;
    if (j->float_zp && !j->hess && !fz) {
        free(rows);
        free(sc);
        free(scratch);
        return wm_err(err, WM_ERR_NOMEM, "out of memory quantizing '%s'", j->src->name ? j->src->name : "");
    }
    /* the importance's search for 4-bit weights only: an 8-bit block's RTN error is ~1/289 of a 4-bit one's, and
       searching 8-bit tables (Gemma 3's 168M values) was most of the build's time */
    int want_imp = j->imp && j->bits < 8;
    float *imp = want_imp ? wm_nbits_importance(j->imp->h, K, j->imp->rows) : NULL;
    if (want_imp && !imp) {
        free(rows);
        free(sc);
        free(scratch);
        free(fz);
        return wm_err(err, WM_ERR_NOMEM, "out of memory quantizing '%s'", j->src->name ? j->src->name : "");
    }
    if (out[2] && !fz) memset(out[2], 0, (size_t)(N * ((nblk * j->bits + 7) / 8)));
    wm_status s = WM_OK;
    int32_t sdt = j->half_scales && j->scale_dtype == WM_DT_FLOAT ? WM_SCALE_HALF_EXACT : j->scale_dtype;
    if (j->hess) { /* GPTQ reads the whole weight: rows interact */
        free(rows);
        rows = malloc((size_t)(K * N) * sizeof *rows);
        if (!rows) s = wm_err(err, WM_ERR_NOMEM, "out of memory quantizing '%s'", j->src->name ? j->src->name : "");
        else if (j->trans) s = read_cols_t(j->src, 0, K, K, N, rows, err);
        else s = read_rows(j->m, j->src, 0, K, N, rows, release, err);
        if (!s && imp) { /* with the importance: each block's scale and zero point by its search, then GPTQ's codes */
            for (int64_t kb = 0; kb < nblk; kb++) {
                int64_t r0 = kb * bs, nr = K - r0 < bs ? K - r0 : bs;
                block_row(rows + r0 * N, imp + r0, imp + K + r0, kb, nr, K, N, bs, j->bits, j->sym, 1, sdt, out[0], sc,
                          out[2], NULL, j->scale_dtype, scratch);
            }
            s = wm_quant_gptq_given(rows, K, N, j->hess->h, j->damp, j->act_order, bs, j->bits, out[0], sc, out[2], err);
        } else if (!s)
            s = wm_quant_gptq(rows, K, N, j->hess->h, j->damp, j->act_order, bs, j->bits, j->sym, sdt, out[0], sc, out[2],
                              err);
        if (s) wm_err_prefix(err, "'%s'", j->src->name ? j->src->name : "");
        nblk = s ? 0 : nblk;
    }
    for (int64_t kb = 0; kb < nblk && !s && !j->hess; kb++) {
        int64_t r0 = kb * bs, nr = K - r0 < bs ? K - r0 : bs;
        if (j->trans) s = read_cols_t(j->src, r0, nr, K, N, rows, err); /* B stored [N, K] (Gemm transB) */
        else s = read_rows(j->m, j->src, r0, nr, N, rows, release, err);
        if (s) break;
        block_row(rows, imp ? imp + r0 : NULL, imp ? imp + K + r0 : NULL, kb, nr, K, N, bs, j->bits, j->sym, j->search || imp, sdt, out[0], sc,
                  fz ? NULL : out[2], fz, j->scale_dtype, scratch);
    }
    put_floats(out[1], sc, nblk * N, j->scale_dtype, s);
    if (fz) put_floats(out[2], fz, nblk * N, j->scale_dtype, s);
    free(rows);
    free(sc);
    free(fz);
    free(imp);
    free(scratch);
    return s;
}

/* ---------------------------------------------------------------- the pass */

/* MatMul, and Gemm (a decoder's lm_head: Gemm(transB) over the [vocab, hidden] table; a bias C becomes an Add after
 * the MatMulNBits, phi's lm_head); Gather (embedding tables -> GatherBlockQuantized) only when op_types lists it */
static const char *const NBITS_DEFAULT_OPS[] = {"MatMul", "Gemm"};

/* A Gemm MatMulNBits (then an Add of C) can replace: alpha 1 and beta 1, no transA; *trans_b receives transB, *bias
   C (NULL: none). */
static int plain_gemm(const wm_onnx_node *n, int *trans_b, const char **bias) {
    *trans_b = 0;
    *bias = NULL;
    if (!n->op_type || strcmp(n->op_type, "Gemm")) return 1;
    *bias = wm_opt_in(n, 2);
    for (size_t i = 0; i < n->n_attribute; i++) {
        const wm_onnx_attr *a = n->attribute[i];
        if (!strcmp(a->name, "transA") && a->i) return 0;
        if (!strcmp(a->name, "alpha") && a->f != 1.0f) return 0;
        if (!strcmp(a->name, "beta") && a->f != 1.0f && *bias) return 0;
        if (!strcmp(a->name, "transB")) *trans_b = a->i != 0;
    }
    return 1;
}

/* The layer index in a weight name: its first all-digit dot-separated part ("model.layers.7.mlp" -> 7); -1: none. */
static int64_t layer_of(const char *name) {
    for (const char *p = name; p && *p;) {
        const char *e = strchr(p, '.');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        size_t d = 0;
        while (d < n && p[d] >= '0' && p[d] <= '9') d++;
        if (n && d == n && n < 10) return strtoll(p, NULL, 10);
        p = e ? e + 1 : NULL;
    }
    return -1;
}

/* One more than the largest layer index among g's initializers (wm_quant_config.int8_layer_weights' n). */
static int64_t layer_count(const wm_graph *g) {
    const wm_onnx_graph *p = wm_graph_proto(g);
    int64_t n = 0;
    for (size_t i = 0; i < p->n_initializer; i++) {
        int64_t l = p->initializer[i]->name ? layer_of(p->initializer[i]->name) : -1;
        n = l + 1 > n ? l + 1 : n;
    }
    return n;
}

/* llama.cpp's choice of layers that get more bits in Q4_K_M (use_more_bits): the first and last eighth, and every
   third layer between. */
static int more_bits_layer(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static int contains_any(const char *const *v, size_t n, const char *name) {
    for (size_t i = 0; name && i < n; i++)
        if (v[i] && *v[i] && strstr(name, v[i])) return 1;
    return 0;
}

/* Is this MatMul (weight input 1) or Gather (table input 0) to keep at 8 bits: listed by node or weight name
   (int8_nodes), or its weight named in the mixed-precision table (int8_weights, int8_layer_weights; n_layers). */
static int wants_8bit(const wm_quant_config *c, const wm_onnx_node *n, int64_t n_layers) {
    const char *w = wm_opt_in(n, wm_opt_is(n, "Gather") ? 0 : 1);
    if ((n->name && wm_quant_listed(c->int8_nodes, c->n_int8_nodes, n->name)) ||
        (w && wm_quant_listed(c->int8_nodes, c->n_int8_nodes, w)) || contains_any(c->int8_weights, c->n_int8_weights, w))
        return 1;
    int64_t l = w && contains_any(c->int8_layer_weights, c->n_int8_layer_weights, w) ? layer_of(w) : -1;
    return l >= 0 && more_bits_layer(l, n_layers);
}

/* A [rows, K] table quantized along K (a Gemm transB weight): what a Gather over the same table may share. */
typedef struct nb_table {
    const wm_onnx_tensor *src;
    int bits;
    int64_t bs;
    const char *q, *scales, *zp; /* zp NULL when symmetric */
} nb_table;

typedef struct nb_tables {
    nb_table v[8];
    size_t n;
} nb_tables;

/*
 * Submits the block quantization of weight w (tensor t) as K x N (trans: t is stored [N, K]): codes "<w>_Q<bits>"
 * as [N, nblk, bs * bits / 8], or as [N, K * bits / 8] when flat (a GatherBlockQuantized table, K whole blocks),
 * scales "<w>_scales" [N, nblk], zero points "<w>_zero_points" (asymmetric). names[0..2] receive the initializer
 * names (names[2] NULL when symmetric).
 */
static wm_status submit_blocks(wm_graph *g, const wm_quant_config *c, wm_quant_plan *plan, const char *w,
                               const wm_onnx_tensor *t, int64_t K, int64_t N, int64_t bs, int trans, int bits, int flat,
                               const wm_quant_hessian *hess, const wm_quant_hessian *imp, const char **names,
                               wm_error *err) {
    wm_qjob j = {WM_QJOB_NBITS, wm_graph_model(g), t, {NULL}, 0, K, N, bs, bits, c->symmetric, 0, trans,
                 0, t->data_type, 0, c->half_scales, 0, c->scale_search, NULL, hess, c->gptq_damp > 0 ? c->gptq_damp : 0.01, imp};
    j.float_zp = c->float_zp && !c->symmetric && bits == 4 && !flat && !hess;
    j.act_order = c->gptq_act_order;
    int64_t nblk = (K + j.bs - 1) / j.bs;
    char nm[3][256];
    snprintf(nm[0], sizeof nm[0], "%s_Q%d", w, bits);
    snprintf(nm[1], sizeof nm[1], "%s_scales", w);
    snprintf(nm[2], sizeof nm[2], "%s_zero_points", w);
    wm_qout outs[3] = {{wm_opt_name_exact(g, nm[0]), WM_DT_UINT8, {N, nblk, j.bs * bits / 8}, 3},
                       {wm_opt_name_exact(g, nm[1]), t->data_type, {N, nblk}, 2},
                       {wm_opt_name_exact(g, nm[2]), WM_DT_UINT8, {N, (nblk * bits + 7) / 8}, 2}};
    if (flat) outs[0].dims[1] = K * bits / 8, outs[0].rank = 2;
    if (j.float_zp) outs[2].dtype = t->data_type, outs[2].dims[1] = nblk; /* [N, nblk] of the scales' type */
    if (!outs[0].name || !outs[1].name || !outs[2].name) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    j.n_dst = c->symmetric ? 2 : 3;
    wm_status s = wm_qjob_submit(g, plan, &j, outs, err);
    names[0] = outs[0].name, names[1] = outs[1].name, names[2] = c->symmetric ? NULL : outs[2].name;
    return s;
}

/* ---------------------------------------------------------------- carried blocks (WM_QUANT_CARRY) */

static const char *const ZP_NAMES[] = {"none", "uint8", "float"};

/* Records what was done to carry-entry weight w (see wm_quant_carry_note; quant_impl.h). */
wm_status wm_quant_carry_note_add(wm_quant_report *r, const char *w, const wm_quant_carry *cy, const char *op,
                                  const char *result, int bits, int64_t block, int zp, const char *reason,
                                  wm_error *err) {
    wm_quant_carry_note *v = realloc(r->carried, (r->n_carried + 1) * sizeof *v);
    if (!v) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    r->carried = v;
    char *name = strdup(w);
    if (!name) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    v[r->n_carried++] = (wm_quant_carry_note){name, cy->source, op, result, bits, block,
                                              bits ? ZP_NAMES[zp] : "none", reason};
    return WM_OK;
}

/* Submits cy's blocks for weight w (tensor t, K x N; trans: t stored [N, K]) in submit_blocks' layout and names. */
static wm_status submit_carry(wm_graph *g, wm_quant_plan *plan, const char *w, const wm_onnx_tensor *t,
                              const wm_quant_carry *cy, int trans, int flat, const char **names, wm_error *err) {
    int64_t K = cy->K, N = cy->N, bs = cy->block, nblk = K / bs;
    int bits = cy->bits;
    wm_qjob j = {WM_QJOB_CARRY, wm_graph_model(g), t, {NULL}, cy->zp ? 3 : 2, K, N, bs, bits, !cy->zp, 0, trans,
                 0, WM_DT_FLOAT, 0, 0, 0, 0, cy};
    char nm[3][256];
    snprintf(nm[0], sizeof nm[0], "%s_Q%d", w, bits);
    snprintf(nm[1], sizeof nm[1], "%s_scales", w);
    snprintf(nm[2], sizeof nm[2], "%s_zero_points", w);
    wm_qout outs[3] = {{wm_opt_name_exact(g, nm[0]), WM_DT_UINT8, {N, nblk, bs * bits / 8}, 3},
                       {wm_opt_name_exact(g, nm[1]), WM_DT_FLOAT, {N, nblk}, 2},
                       {wm_opt_name_exact(g, nm[2]), cy->zp == 2 ? WM_DT_FLOAT : WM_DT_UINT8,
                        {N, cy->zp == 2 ? nblk : (nblk * bits + 7) / 8}, 2}};
    if (flat) outs[0].dims[1] = K * bits / 8, outs[0].rank = 2;
    if (!outs[0].name || !outs[1].name || !outs[2].name) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    wm_status s = wm_qjob_submit(g, plan, &j, outs, err);
    names[0] = outs[0].name, names[1] = outs[1].name, names[2] = cy->zp ? outs[2].name : NULL;
    return s;
}

/*
 * WM_QUANT_CARRY for a MatMul / Gemm weight w (K x N): its entry's blocks as they are (*done 1, *bits, *bs and the
 * names q), requantized by RTN when the entry says so (*done 1), or left float (*done 0: no entry, a shape the
 * entry does not describe, or an entry neither carried nor requantized). Every entry's outcome is noted.
 */
static wm_status carry_matrix(wm_graph *g, const wm_quant_config *c, wm_quant_report *r, wm_quant_plan *plan,
                              const char *w, const wm_onnx_tensor *t, int64_t K, int64_t N, int trans, int *bits,
                              int64_t *bs, const char **q, int *done, wm_error *err) {
    const wm_quant_carry *cy = wm_quant_carry_find(c, w);
    const char *op = trans ? "Gemm" : "MatMul";
    *done = 0;
    if (!cy || t->data_type != WM_DT_FLOAT) {
        r->skipped++;
        return cy ? wm_quant_carry_note_add(r, w, cy, op, "float", 0, 0, 0, "its values are not float32", err) : WM_OK;
    }
    if (cy->N != N || cy->K != K || cy->stored_t == trans) {
        r->skipped++;
        return wm_quant_carry_note_add(r, w, cy, op, "float", 0, 0, 0,
                                       "the node reads it in a shape its source rows do not have",
                          err);
    }
    if (!cy->bits && !cy->requant_bits) {
        r->skipped++;
        return wm_quant_carry_note_add(r, w, cy, op, "float", 0, 0, 0, cy->reason, err);
    }
    wm_status s;
    if (!cy->bits) { /* RTN from the float values, asymmetric (the source had offsets), block 32 */
        wm_quant_config cc = *c;
        cc.symmetric = 0, cc.scale_search = 0, cc.half_scales = 0, cc.float_zp = 0;
        *bits = cy->requant_bits, *bs = 32;
        s = submit_blocks(g, &cc, plan, w, t, K, N, 32, trans, cy->requant_bits, 0, NULL, NULL, q, err);
        if (!s) s = wm_quant_carry_note_add(r, w, cy, "MatMulNBits", "requantized", *bits, 32, 1, cy->reason, err);
    } else {
        *bits = cy->bits, *bs = cy->block;
        s = submit_carry(g, plan, w, t, cy, trans, 0, q, err);
        if (!s) s = wm_quant_carry_note_add(r, w, cy, "MatMulNBits", "carried", cy->bits, cy->block, cy->zp, NULL, err);
    }
    *done = !s;
    return s;
}

int64_t wm_quant_block_of(const wm_quant_config *c, int bits, int table) {
    if (table && c->table_block_size > 0) return c->table_block_size;
    return bits == 8 && c->int8_block_size > 0 ? c->int8_block_size : c->block_size;
}

int64_t wm_quant_table_block(int64_t width, int64_t block) {
    for (int64_t bs = block; bs >= 16; bs /= 2)
        if (width > 0 && width % bs == 0) return bs;
    return 0;
}

/* Records what was done to table w (see wm_quant_table_note). */
static wm_status table_note(wm_quant_report *r, const char *w, const char *op, int64_t width, int64_t block,
                            int64_t want, wm_error *err) {
    wm_quant_table_note *v = realloc(r->tables, (r->n_tables + 1) * sizeof *v);
    if (!v) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    r->tables = v;
    char *name = strdup(w);
    if (!name) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    v[r->n_tables++] = (wm_quant_table_note){name, op, width, block, want};
    return WM_OK;
}

/* A selected Gather reads weight w as its table (input 0): the Gemm over it must use the table's block to share. */
static int gathered(const wm_quant_config *c, wm_onnx_node *const *v, size_t n, const char *w) {
    for (size_t i = 0; i < n; i++)
        if (wm_opt_is(v[i], "Gather") && wm_opt_in(v[i], 0) && !strcmp(wm_opt_in(v[i], 0), w) &&
            wm_quant_selected(c, v[i], NBITS_DEFAULT_OPS, 2))
            return 1;
    return 0;
}

/* The block of a K-row matrix weight at these bits: wm_quant_block_of's; for an 8-bit weight with its own block
   (int8_block_size) that K is no multiple of, the largest power of two >= 16 below it that divides K (a padded last
   block costs scales and codes for nothing: v_proj's K 576 in blocks of 256 took 768 rows' bytes, 64 take 576's),
   the configured one when none does. 4-bit weights keep the recipe's block as given. */
static int64_t matrix_block(const wm_quant_config *c, int bits, int64_t K) {
    int64_t bs = wm_quant_block_of(c, bits, 0);
    int64_t d = bits == 8 && c->int8_block_size > 0 && K % bs ? wm_quant_table_block(K, bs) : 0;
    return d ? d : bs;
}

static wm_status nbits_one(wm_graph *g, const wm_quant_config *c, wm_quant_report *r, wm_quant_plan *plan,
                           wm_onnx_node *n, wm_onnx_node *const *all, size_t n_all, nb_tables *tables,
                           int64_t n_layers, wm_error *err) {
    const char *a = wm_opt_in(n, 0), *w = wm_opt_in(n, 1);
    const wm_onnx_tensor *t = w ? wm_graph_constant(g, w) : NULL;
    int32_t dt = t ? t->data_type : 0;
    int tb;
    const char *bias;
    if (!a || !t || t->n_dims != 2 || (dt != WM_DT_FLOAT && dt != WM_DT_FLOAT16 && dt != WM_DT_BFLOAT16) ||
        t->dims[0] <= 0 || t->dims[1] <= 0 || !plain_gemm(n, &tb, &bias)) {
        r->skipped++;
        return WM_OK;
    }
    int bits = wants_8bit(c, n, n_layers) ? 8 : c->bits;
    int64_t K = tb ? t->dims[1] : t->dims[0], N = tb ? t->dims[0] : t->dims[1], bs = matrix_block(c, bits, K);
    wm_status s = WM_OK;
    const char *q[3];
    if (c->mode == WM_QUANT_CARRY) {
        int done;
        if ((s = carry_matrix(g, c, r, plan, w, t, K, N, tb, &bits, &bs, q, &done, err)) || !done) return s;
    } else {
        wm_quant_config tied = *c; /* a tied lm_head: uint8 zero points, the ones GatherBlockQuantized takes */
        tied.float_zp = 0;
        if (tb && gathered(c, all, n_all, w)) { /* a tied lm_head: the embedding's block, so both share one copy */
            int64_t want = wm_quant_block_of(c, bits, 1), tbs = wm_quant_table_block(K, want);
            if (tbs && tbs != bs && !(s = table_note(r, w, "MatMulNBits", K, tbs, want, err))) bs = tbs;
            if (s) return s;
        }
        const wm_quant_hessian *hess = NULL; /* GPTQ: statistics of this input, unless a Gather shares the codes
                                                (then only with gptq_tied) */
        for (size_t i = 0; i < c->n_hessians && !(tb && gathered(c, all, n_all, w) && !c->gptq_tied); i++)
            if (c->hessians[i].value && !strcmp(c->hessians[i].value, a) && c->hessians[i].K == K) hess = &c->hessians[i];
        const wm_quant_hessian *imp = NULL; /* importance of this input's columns (a tied table's too: its rows are
                                               the head's columns, the head's input weighs them) */
        for (size_t i = 0; i < c->n_importance; i++)
            if (c->importance[i].value && !strcmp(c->importance[i].value, a) && c->importance[i].K == K)
                imp = &c->importance[i];
        if ((s = submit_blocks(g, tb && gathered(c, all, n_all, w) ? &tied : c, plan, w, t, K, N, bs, tb, bits, 0,
                               hess, imp, q, err)))
            return s;
    }
    if (tb && tables->n < sizeof tables->v / sizeof tables->v[0])
        tables->v[tables->n++] = (nb_table){t, bits, bs, q[0], q[1], q[2]};
    const char *in[4] = {a, q[0], q[1], q[2]}, *out[1] = {n->output[0]};
    char name[256];
    snprintf(name, sizeof name, "%s_Q%d", n->name ? n->name : "MatMul", bits);
    const char *add_in[2] = {bias ? wm_graph_unique_name(g, name) : NULL, bias}, *add_out[1] = {n->output[0]};
    if (bias && !add_in[0]) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    if (bias) out[0] = add_in[0]; /* Gemm's C: MatMulNBits -> a new value, Add(it, C) -> the Gemm's output */
    if (wm_graph_remove_node(g, n, err)) return err->status;
    wm_onnx_node *f = wm_graph_add_node(g, "MatMulNBits", "com.microsoft", wm_graph_unique_name(g, name), in,
                                        q[2] ? 4 : 3, out, 1, err);
    if (!f || wm_graph_set_attr_int(g, f, "K", K, err) || wm_graph_set_attr_int(g, f, "N", N, err) ||
        wm_graph_set_attr_int(g, f, "bits", bits, err) ||
        wm_graph_set_attr_int(g, f, "block_size", bs, err) ||
        (c->accuracy_level && wm_graph_set_attr_int(g, f, "accuracy_level", c->accuracy_level, err)))
        return err->status ? err->status : WM_ERR_NOMEM;
    char add_name[272];
    snprintf(add_name, sizeof add_name, "%s_bias", name);
    if (bias && !wm_graph_add_node(g, "Add", NULL, wm_graph_unique_name(g, add_name), add_in, 2, add_out, 1, err))
        return err->status ? err->status : WM_ERR_NOMEM;
    r->quantized++;
    return WM_OK;
}

/*
 * Gather(table const [V, H], indices) on axis 0 -> GatherBlockQuantized over the table's blocks along H (uint8
 * codes [V, H*bits/8], the MatMulNBits layout without its padding, so the block must divide H: the largest
 * power of two <= the configured block that does, wm_quant_table_block; when none does the table stays float32,
 * and the report says so). A table a Gemm(transB) already quantized with the same bits and block (a tied
 * lm_head, given the table's block by nbits_one) is shared: its codes reshaped to 2-D and its scales, so the
 * model keeps one copy. bfloat16 tables stay (onnxruntime has no bfloat16 output).
 */
static wm_status gather_one(wm_graph *g, const wm_quant_config *c, wm_quant_report *r, wm_quant_plan *plan,
                            wm_onnx_node *n, const nb_tables *tables, int64_t n_layers, wm_error *err) {
    const char *w = wm_opt_in(n, 0), *ix = wm_opt_in(n, 1);
    const wm_onnx_tensor *t = w ? wm_graph_constant(g, w) : NULL;
    int32_t dt = t ? t->data_type : 0;
    int bits = wants_8bit(c, n, n_layers) ? 8 : c->bits;
    if (!ix || !t || t->n_dims != 2 || (dt != WM_DT_FLOAT && dt != WM_DT_FLOAT16) || t->dims[0] <= 0 ||
        t->dims[1] <= 0 || wm_opt_attr_i(n, "axis", 0) != 0) {
        r->skipped++;
        return WM_OK;
    }
    int64_t V = t->dims[0], H = t->dims[1], row = H * bits / 8, want = wm_quant_block_of(c, bits, 1),
            bs = wm_quant_table_block(H, want);
    const wm_quant_carry *cy = c->mode == WM_QUANT_CARRY ? wm_quant_carry_find(c, w) : NULL;
    wm_status s = WM_OK;
    if (c->mode == WM_QUANT_CARRY) { /* the entry's blocks as they are, or the table stays float */
        const char *why = !cy ? "" : dt != WM_DT_FLOAT ? "its values are not float32"
                          : cy->N != V || cy->K != H || cy->stored_t ? "the node reads it in a shape its source rows do not have"
                          : !cy->bits ? cy->reason
                          : cy->zp == 2 ? "GatherBlockQuantized takes uint8 zero points only (onnxruntime refuses "
                                          "float ones)" : NULL;
        if (why) {
            r->skipped++;
            return cy ? wm_quant_carry_note_add(r, w, cy, "Gather", "float", 0, 0, 0, why, err) : WM_OK;
        }
        bits = cy->bits, bs = cy->block, row = H * bits / 8;
        if ((s = wm_quant_carry_note_add(r, w, cy, "GatherBlockQuantized", "carried", bits, bs, cy->zp, NULL, err)))
            return s;
    } else if (!bs) { /* no block divides the width: float32, said in the report */
        r->skipped++;
        return table_note(r, w, "Gather", H, 0, want, err);
    }
    if (!cy && (s = table_note(r, w, "GatherBlockQuantized", H, bs, want, err))) return s;
    const char *data = NULL, *scales = NULL, *zp = NULL;
    for (size_t i = 0; i < tables->n && !data; i++)
        if (tables->v[i].src == t && tables->v[i].bits == bits && tables->v[i].bs == bs) {
            int64_t shape[2] = {V, row};
            const char *sh = wm_opt_const_i64(g, "gbq_shape", shape, 2, 0, err), *rin[2] = {tables->v[i].q, sh};
            if (!sh || !(data = wm_opt_emit(g, "Reshape", NULL, rin, 2, err))) return err->status;
            scales = tables->v[i].scales;
            zp = tables->v[i].zp;
        }
    if (!data) { /* its own codes, the table's rows as MatMulNBits' columns */
        const char *q[3];
        if ((s = cy ? submit_carry(g, plan, w, t, cy, 1, 1, q, err) : submit_blocks(g, c, plan, w, t, H, V, bs, 1,
                                                                                    bits, 1, NULL, NULL, q, err)))
            return s;
        data = q[0], scales = q[1], zp = q[2];
    }
    const char *in[4] = {data, ix, scales, zp}, *out[1] = {n->output[0]};
    char name[256];
    snprintf(name, sizeof name, "%s_Q%d", n->name ? n->name : "Gather", bits);
    if (wm_graph_remove_node(g, n, err)) return err->status;
    wm_onnx_node *f = wm_graph_add_node(g, "GatherBlockQuantized", "com.microsoft", wm_graph_unique_name(g, name), in,
                                        zp ? 4 : 3, out, 1, err);
    if (!f || wm_graph_set_attr_int(g, f, "bits", bits, err) ||
        wm_graph_set_attr_int(g, f, "block_size", bs, err) ||
        wm_graph_set_attr_int(g, f, "gather_axis", 0, err) || wm_graph_set_attr_int(g, f, "quantize_axis", 1, err))
        return err->status ? err->status : WM_ERR_NOMEM;
    r->quantized++;
    return WM_OK;
}

/*
 * int8_percent: the 4-bit matrices with importance statistics (as nbits_one would quantize them at 4 bits, not a
 * tied table) measured by wm_quant_sensitive; the chosen weights' names appended to c's int8_nodes in *cc (*names
 * malloc'ed, its new strings r's copies) and recorded in r, most sensitive first. cc = c's copy otherwise.
 */
static wm_status sensitive_8bit(wm_graph *g, const wm_quant_config *c, wm_quant_report *r, wm_onnx_node *const *v,
                                size_t n, int64_t n_layers, wm_quant_config *cc, const char ***names, wm_error *err) {
    *cc = *c;
    *names = NULL;
    if (c->int8_percent <= 0 || c->mode != WM_QUANT_INT4 || c->bits != 4 || !c->n_importance) return WM_OK;
    wm_sens_cand *cv = calloc(n ? n : 1, sizeof *cv);
    if (!cv) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    size_t nc = 0;
    for (size_t i = 0; i < n; i++) {
        wm_onnx_node *nd = v[i];
        const char *a = wm_opt_in(nd, 0), *w = wm_opt_in(nd, 1), *bias;
        const wm_onnx_tensor *t = w ? wm_graph_constant(g, w) : NULL;
        int tb, dt = t ? t->data_type : 0;
        if (wm_opt_is(nd, "Gather") || !wm_quant_selected(c, nd, NBITS_DEFAULT_OPS, 2) || !a || !t || t->n_dims != 2 ||
            (dt != WM_DT_FLOAT && dt != WM_DT_FLOAT16 && dt != WM_DT_BFLOAT16) || t->dims[0] <= 0 || t->dims[1] <= 0 ||
            !plain_gemm(nd, &tb, &bias) || wants_8bit(c, nd, n_layers) || (tb && gathered(c, v, n, w)))
            continue;
        int64_t K = tb ? t->dims[1] : t->dims[0], N = tb ? t->dims[0] : t->dims[1];
        for (size_t k = 0; k < c->n_importance; k++)
            if (c->importance[k].value && !strcmp(c->importance[k].value, a) && c->importance[k].K == K) {
                cv[nc++] = (wm_sens_cand){w, t, K, N, tb, &c->importance[k], 0, 0, 0};
                break;
            }
    }
    wm_status s = wm_quant_sensitive(wm_graph_model(g), cv, nc, wm_quant_block_of(c, 4, 0), c->int8_percent, err);
    size_t k8 = 0;
    for (size_t i = 0; i < nc; i++) k8 += (size_t)cv[i].eight;
    const char **nm = s ? NULL : malloc((c->n_int8_nodes + k8 + 1) * sizeof *nm);
    if (!s && (!nm || !(r->sensitive8 = calloc(k8 + 1, sizeof *r->sensitive8))))
        s = wm_err(err, WM_ERR_NOMEM, "out of memory");
    if (!s) {
        for (size_t i = 0; i < c->n_int8_nodes; i++) nm[i] = c->int8_nodes[i];
        size_t m = c->n_int8_nodes;
        for (size_t i = 0; i < nc && !s; i++)
            if (cv[i].eight) {
                if (!(r->sensitive8[r->n_sensitive8] = strdup(cv[i].weight))) /* a copy: nodes go as they are replaced */
                    s = wm_err(err, WM_ERR_NOMEM, "out of memory");
                else
                    nm[m++] = r->sensitive8[r->n_sensitive8++];
            }
        cc->int8_nodes = nm, cc->n_int8_nodes = m;
        *names = nm;
    } else
        free(nm);
    free(cv);
    return s;
}

wm_status wm_quant_nbits(wm_graph *g, const wm_quant_config *c0, wm_quant_report *r, wm_quant_plan *plan,
                         wm_error *err) {
    const wm_quant_config *c = c0;
    if (c->bits != 4 && c->bits != 8) return wm_err(err, WM_ERR_USAGE, "weight-only quantization: bits must be 4 or 8");
    const int64_t blocks[3] = {c->block_size, c->int8_block_size ? c->int8_block_size : 16,
                               c->table_block_size ? c->table_block_size : 16};
    for (int i = 0; i < 3; i++)
        if (blocks[i] < 16 || blocks[i] > WM_QUANT_MAX_BLOCK || (blocks[i] & (blocks[i] - 1)))
            return wm_err(err, WM_ERR_USAGE, "%s %lld: must be a power of two from 16 to %d",
                          i == 0 ? "block size" : i == 1 ? "8-bit block size" : "table block size", (long long)blocks[i],
                          WM_QUANT_MAX_BLOCK);
    size_t n;
    wm_onnx_node **v = wm_opt_snapshot(g, &n, err);
    if (!v) return WM_ERR_NOMEM;
    wm_status s = WM_OK;
    nb_tables tables = {0};
    int64_t n_layers = layer_count(g);
    wm_quant_config cc;
    const char **names8 = NULL;
    if ((s = sensitive_8bit(g, c0, r, v, n, n_layers, &cc, &names8, err))) {
        free(v);
        return s;
    }
    c = &cc;
    for (size_t i = 0; i < n && !s; i++) /* the matrices first: a Gather may share a tied lm_head's codes */
        if (!wm_opt_is(v[i], "Gather") && wm_quant_selected(c, v[i], NBITS_DEFAULT_OPS, 2))
            s = nbits_one(g, c, r, plan, v[i], v, n, &tables, n_layers, err);
    for (size_t i = 0; i < n && !s; i++) /* Gather only when listed in op_types */
        if (wm_opt_is(v[i], "Gather") && wm_quant_selected(c, v[i], NBITS_DEFAULT_OPS, 2))
            s = gather_one(g, c, r, plan, v[i], &tables, n_layers, err);
    free(v);
    free(names8);
    if (!s) s = wm_opt_need_opset(g, "com.microsoft", 1, err);
    return s;
}
