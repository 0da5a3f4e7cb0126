/*
 * metrics.h - task metrics of `winml eval --mode task`, each as its
 * reference library defines it (the tests compare with scikit-learn/scipy):
 *   accuracy, F1 (binary for label 1 when two classes, macro otherwise),
 *   MRR@k (reciprocal rank of the first relevant passage in the top k),
 *   nDCG@k (linear gains, log2 discount, ties in scores broken by input
 *   order, like sklearn's ndcg_score(ignore_ties=True)),
 *   Spearman correlation (average ranks for ties, then Pearson),
 *   perplexity from summed negative log-likelihoods,
 *   word / character error rates as jiwer computes them (corpus level: the
 *   summed edit distances over the summed reference lengths; words split at
 *   whitespace, characters as Unicode code points of the stripped text).
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

/*
 * Levenshtein distance between hyp and ref as words (chars 0: whitespace-separated) or characters (chars 1: code
 * points of the text stripped of surrounding whitespace, inner spaces included) into *errors, the reference's
 * length in those units into *ref_len. -1 when hyp or ref is not UTF-8, out of memory, or the product of the two
 * lengths is over max_cells (a bound on the work; 0: 2^32).
 */
int wm_metric_edit_errors(const char *hyp, const char *ref, int chars, uint64_t max_cells, size_t *errors,
                          size_t *ref_len);

/* exp(nll_sum / count). */
double wm_metric_perplexity(double nll_sum, uint64_t count);

#endif
