/*
 * metrics.h - task metrics of `winml eval --mode task`, each as its
 * reference library defines it (the tests compare with scikit-learn/scipy):
 *   accuracy, F1 (binary for label 1 when two classes, macro otherwise),
 *   MRR@k (reciprocal rank of the first relevant passage in the top k),
 *   nDCG@k (linear gains, log2 discount, ties in scores broken by input
 *   order, like sklearn's ndcg_score(ignore_ties=True)),
 *   Spearman correlation (average ranks for ties, then Pearson),
 *   perplexity from summed negative log-likelihoods.
 */
#ifndef WM_EVAL_METRICS_H
#define WM_EVAL_METRICS_H

#include <stddef.h>
#include <stdint.h>

double wm_metric_accuracy(const int64_t *pred, const int64_t *gold, size_t n);
/* n_classes: number of distinct labels (2: binary F1 of label 1; more: macro over labels 0..n_classes-1). */
double wm_metric_f1(const int64_t *pred, const int64_t *gold, size_t n, int n_classes);

/* One query's passages: scores[i] (higher ranks first) and relevance[i] (0 = not relevant). */
double wm_metric_mrr_at(const double *scores, const double *relevance, size_t n, size_t k);
double wm_metric_ndcg_at(const double *scores, const double *relevance, size_t n, size_t k);

/* Spearman rank correlation of x and y (NaN when either is constant or n < 2). scratch: 4 n doubles. */
double wm_metric_spearman(const double *x, const double *y, size_t n, double *scratch);

/* exp(nll_sum / count). */
double wm_metric_perplexity(double nll_sum, uint64_t count);

#endif
