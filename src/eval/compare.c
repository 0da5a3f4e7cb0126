#include "eval/compare.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "onnx/dtype.h"
#include "ops/op.h"

const char *const wm_cmp_names[WM_CMP_COUNT] = {"sqnr_db", "psnr_db", "cosine_similarity", "mse", "max_abs_diff"};

int wm_cmp_higher_is_better(int metric) { return metric <= WM_CMP_COSINE; }

double wm_cmp_get(const wm_cmp *c, int metric) {
    switch (metric) {
    case WM_CMP_SQNR: return c->sqnr_db;
    case WM_CMP_PSNR: return c->psnr_db;
    case WM_CMP_COSINE: return c->cosine;
    case WM_CMP_MSE: return c->mse;
    default: return c->max_abs;
    }
}

wm_status wm_compare(const wm_tensor *cand, const wm_tensor *ref, const char *label, wm_cmp *out, wm_error *err) {
    if (cand->rank != ref->rank)
        return wm_err(err, WM_ERR_CHECK, "%s: rank %d differs from the reference's %d", label, cand->rank, ref->rank);
    for (int d = 0; d < ref->rank; d++)
        if (cand->dims[d] != ref->dims[d])
            return wm_err(err, WM_ERR_CHECK, "%s: dim %d is %lld, the reference has %lld", label, d,
                          (long long)cand->dims[d], (long long)ref->dims[d]);
    if (!wm_dtype_size(cand->dtype) || !wm_dtype_size(ref->dtype))
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: element type cannot be compared", label);
    uint64_t n = wm_tensor_numel(ref);
    double se = 0, sr = 0, sc = 0, dot = 0, maxabs = 0, peak = 0;
    int nan = 0;
    for (uint64_t i = 0; i < n; i++) {
        double c = wm_tensor_get_f64(cand, i), r = wm_tensor_get_f64(ref, i);
        if (isnan(c) || isnan(r)) {
            nan = 1;
            break;
        }
        double d = c == r ? 0 : c - r; /* equal infinities (a -inf mask) agree */
        se += d * d;
        sr += r * r;
        sc += c * c;
        dot += c * r;
        if (fabs(d) > maxabs) maxabs = fabs(d);
        if (r * r > peak) peak = r * r;
    }
    if (nan) {
        out->sqnr_db = out->psnr_db = out->cosine = out->mse = out->max_abs = NAN;
        return WM_OK;
    }
    out->mse = n ? se / (double)n : 0; /* an empty tensor agrees with an empty one */
    out->max_abs = maxabs;
    out->sqnr_db = se == 0 ? INFINITY : 10 * log10(sr / se);
    out->psnr_db = se == 0 ? INFINITY : 10 * log10(peak / out->mse);
    out->cosine = (sr == 0 && sc == 0) ? 1.0 : (sr == 0 || sc == 0) ? 0.0 : dot / (sqrt(sr) * sqrt(sc));
    return WM_OK;
}

void wm_agg_add(wm_agg *a, double v) {
    if (isnan(v)) a->nnan++;
    if (a->nnan) a->min = a->max = NAN; /* a NaN sample is never the best nor hidden by it */
    else {
        if (a->n == 0 || v < a->min) a->min = v;
        if (a->n == 0 || v > a->max) a->max = v;
    }
    a->n++;
    if (isinf(v)) { /* an infinite SQNR (identical outputs): the mean is infinite too */
        a->ninf++;
        return;
    }
    a->sum += v;
    a->sumsq += v * v;
}

double wm_agg_mean(const wm_agg *a) {
    if (!a->n) return NAN;
    return a->ninf ? INFINITY : a->sum / (double)a->n;
}

double wm_agg_std(const wm_agg *a) {
    if (!a->n) return NAN;
    if (a->ninf) return a->ninf == a->n ? 0 : NAN;
    double m = a->sum / (double)a->n, v = a->sumsq / (double)a->n - m * m;
    return v > 0 ? sqrt(v) : 0;
}

double wm_agg_ref_mean(const wm_agg *a) {
    if (!a->n || a->nnan || (a->ninf && a->ninf < a->n)) return NAN;
    if (a->ninf) return a->min == a->max ? a->max : NAN; /* all the same infinity, or both signs */
    return a->sum / (double)a->n;
}

double wm_agg_ref_std(const wm_agg *a) {
    double m = wm_agg_ref_mean(a);
    if (isnan(m)) return NAN;
    if (isinf(m)) return 0;
    double v = a->sumsq / (double)a->n - m * m;
    return v > 0 ? sqrt(v) : 0;
}

void wm_cmp_metrics_json(wm_json *j, const char *const *names, const wm_agg (*agg)[WM_CMP_COUNT], size_t n) {
    static const char *const stat[] = {"mean", "std", "min", "max"};
    char key[64];
    wm_json_obj(j, "metrics");
    for (int m = 0; m < WM_CMP_COUNT; m++)
        for (int s = 0; s < 4; s++) {
            snprintf(key, sizeof key, "%s_%s", wm_cmp_names[m], stat[s]);
            wm_json_obj(j, key);
            for (size_t i = 0; i < n; i++) {
                const wm_agg *a = &agg[i][m];
                double v = s == 0 ? wm_agg_ref_mean(a) : s == 1 ? wm_agg_ref_std(a) : s == 2 ? a->min : a->max;
                wm_json_num_py(j, names[i], a->n ? v : NAN);
            }
            wm_json_obj_end(j);
        }
    wm_json_obj_end(j);
}
