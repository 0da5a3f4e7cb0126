/*
 * compare.h - numerics of a candidate tensor against a reference.
 *
 * Computed in float64 over all elements (float types of any width, and
 * integer types as their values):
 *   mse           mean((c - r)^2)
 *   max_abs_diff  max |c - r|
 *   sqnr_db       10 log10(sum r^2 / sum (c - r)^2)     (+inf when equal)
 *   psnr_db       10 log10(max r^2 / mse)               (+inf when equal)
 *   cosine        sum(c r) / (|c| |r|)                  (1 when both are zero)
 * NaN in either tensor makes every metric NaN; equal infinities count as equal.
 */
#ifndef WM_EVAL_COMPARE_H
#define WM_EVAL_COMPARE_H

#include "core/json.h"
#include "winml/runtime.h"

typedef struct wm_cmp {
    double sqnr_db, psnr_db, cosine, mse, max_abs;
} wm_cmp;

enum { WM_CMP_SQNR, WM_CMP_PSNR, WM_CMP_COSINE, WM_CMP_MSE, WM_CMP_MAXABS, WM_CMP_COUNT };

/* Names as in the reference's JSON: "sqnr_db", "psnr_db", "cosine_similarity", "mse", "max_abs_diff". */
extern const char *const wm_cmp_names[WM_CMP_COUNT];
/* 1 when larger is better (sqnr, psnr, cosine), 0 for errors (mse, max_abs_diff). */
int wm_cmp_higher_is_better(int metric);
double wm_cmp_get(const wm_cmp *c, int metric);

/* Compares cand with ref (same shape required; element types may differ). */
wm_status wm_compare(const wm_tensor *cand, const wm_tensor *ref, const char *label, wm_cmp *out, wm_error *err);

/* Running mean/std/min/max of one metric over samples. */
typedef struct wm_agg {
    double sum, sumsq, min, max; /* min and max are NaN once a NaN was added */
    size_t n, ninf, nnan;
} wm_agg;

void wm_agg_add(wm_agg *a, double v);
double wm_agg_mean(const wm_agg *a); /* infinite once an infinite value was added */
double wm_agg_std(const wm_agg *a); /* population std */

/*
 * The reference's mean and std of a metric: of the values when all are finite; +inf (-inf) and std 0 when all
 * are that infinity (identical outputs give an infinite SQNR); NaN when any is NaN or finite and infinite values
 * are mixed.
 */
double wm_agg_ref_mean(const wm_agg *a);
double wm_agg_ref_std(const wm_agg *a);

/*
 * The reference's compare metrics into the open object j: "metrics": {"<metric>_<stat>": {output: value}} for
 * every metric of wm_cmp_names and stat mean, std, min, max, over outputs names[0..n) whose aggregates are
 * agg[i][metric]. Infinite and NaN values are written as Infinity / NaN, as the reference's Python json does.
 */
void wm_cmp_metrics_json(wm_json *j, const char *const *names, const wm_agg (*agg)[WM_CMP_COUNT], size_t n);

#endif
