/*
 * quant_sens.c - mixed precision by measured sensitivity (wm_quant_config.int8_percent): which 4-bit matrices to
 * keep at 8 bits, chosen by their measured output error on the calibration activations instead of by name.
 *
 * For a weight W [K, N] whose input columns have mean squares m_k (the importance statistics: sum over calibration
 * rows of x_k^2 / rows), the expected squared output error of a 4-bit RTN copy (asymmetric blocks of the config's
 * size along K, the default fit) is E = sum_k m_k sum_n d_kn^2 (d: the dequantized copy's error; columns taken as
 * uncorrelated), and the output's own energy is S = sum_k m_k sum_n w_kn^2. Its relative output error E / S is the
 * tensor's sensitivity; 8 bits cut it about 256-fold, so moving tensor t to 8 bits gains about E_t / S_t at a cost
 * proportional to its weights. The tensors are taken greedily by (E / S) per weight, largest first, while the
 * weights at 8 bits stay within int8_percent of all the candidates' weights (a tensor that would pass the budget is
 * skipped, a smaller one after it may still fit) -- a knapsack over the additive sum of relative errors, the way
 * llama.cpp's Q4_K_M gives attn_v / ffn_down more bits, but measured.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/dtype.h"
#include "opt/quant_impl.h"

/* Relative output error of w's 4-bit asymmetric RTN copy in blocks of bs along K (see the header). */
static double rel_error(const float *w, int trans, int64_t K, int64_t N, int64_t bs, const double *m) {
    double e = 0, sig = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t k0 = 0; k0 < K; k0 += bs) {
            int64_t k1 = k0 + bs < K ? k0 + bs : K;
            float lo = 0, hi = 0, s;
            int z;
            for (int64_t k = k0; k < k1; k++) {
                float v = trans ? w[n * K + k] : w[k * N + n];
                lo = v < lo ? v : lo, hi = v > hi ? v : hi;
            }
            wm_nbits_params(lo, hi, 4, 0, WM_DT_FLOAT, &s, &z); /* the RTN quantizer's scale and zero point */
            float r = s != 0.0f ? 1.0f / s : 0.0f;
            for (int64_t k = k0; k < k1; k++) {
                float v = trans ? w[n * K + k] : w[k * N + n];
                int q = wm_nbits_code(v, r, z, 15); /* the RTN quantizer's code */
                double d = (double)v - (double)s * (double)(q - z);
                e += m[k] * d * d;
                sig += m[k] * (double)v * (double)v;
            }
        }
    return sig > 0 ? e / sig : 0;
}

static int by_score(const void *a, const void *b) {
    const wm_sens_cand *x = a, *y = b;
    return x->score < y->score ? 1 : x->score > y->score ? -1 : 0;
}

wm_status wm_quant_sensitive(const wm_onnx_model *m, wm_sens_cand *v, size_t n, int64_t bs, int percent,
                             wm_error *err) {
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const wm_sens_cand *c = &v[i];
        float *w = wm_quant_weight_f32(m, c->t, 0, err);
        double *ms = malloc((size_t)c->K * sizeof *ms);
        if (!w || !ms) {
            free(w);
            free(ms);
            return err->status ? err->status : wm_err(err, WM_ERR_NOMEM, "out of memory");
        }
        double R = c->imp->rows ? (double)c->imp->rows : 1.0;
        for (int64_t k = 0; k < c->K; k++) ms[k] = isfinite(c->imp->h[k]) && c->imp->h[k] > 0 ? c->imp->h[k] / R : 0;
        v[i].rel = rel_error(w, c->trans, c->K, c->N, bs, ms);
        v[i].score = v[i].rel / ((double)c->K * (double)c->N);
        v[i].eight = 0;
        total += (uint64_t)c->K * (uint64_t)c->N;
        free(w);
        free(ms);
    }
    qsort(v, n, sizeof *v, by_score);
    uint64_t budget = (uint64_t)((double)total * percent / 100.0), used = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t sz = (uint64_t)v[i].K * (uint64_t)v[i].N;
        if (used + sz <= budget) v[i].eight = 1, used += sz;
    }
    return WM_OK;
}
