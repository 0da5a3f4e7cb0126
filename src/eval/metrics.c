#include "eval/metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double wm_metric_accuracy(const int64_t *pred, const int64_t *gold, size_t n) {
    if (!n) return NAN;
    size_t ok = 0;
    for (size_t i = 0; i < n; i++) ok += pred[i] == gold[i];
    return (double)ok / (double)n;
}

static double f1_of(const int64_t *pred, const int64_t *gold, size_t n, int64_t label) {
    size_t tp = 0, fp = 0, fn = 0;
    for (size_t i = 0; i < n; i++) {
        int p = pred[i] == label, g = gold[i] == label;
        tp += p && g;
        fp += p && !g;
        fn += !p && g;
    }
    return tp ? 2.0 * (double)tp / (double)(2 * tp + fp + fn) : 0.0; /* sklearn: 0 when undefined */
}

double wm_metric_f1(const int64_t *pred, const int64_t *gold, size_t n, int n_classes) {
    if (!n) return NAN;
    if (n_classes <= 2) return f1_of(pred, gold, n, 1);
    double s = 0;
    for (int c = 0; c < n_classes; c++) s += f1_of(pred, gold, n, c);
    return s / n_classes;
}

/* order[0..n): indices by score, best first; equal scores keep input order */
static void rank_order(const double *scores, size_t n, size_t *order) {
    for (size_t i = 0; i < n; i++) order[i] = i;
    for (size_t i = 1; i < n; i++) { /* insertion sort: stable, n is a query's passages */
        size_t x = order[i], j = i;
        while (j > 0 && scores[order[j - 1]] < scores[x]) order[j] = order[j - 1], j--;
        order[j] = x;
    }
}

double wm_metric_mrr_at(const double *scores, const double *relevance, size_t n, size_t k) {
    size_t *o = malloc((n ? n : 1) * sizeof *o);
    if (!o) return NAN;
    rank_order(scores, n, o);
    double r = 0;
    for (size_t i = 0; i < n && i < k; i++)
        if (relevance[o[i]] > 0) {
            r = 1.0 / (double)(i + 1);
            break;
        }
    free(o);
    return r;
}

double wm_metric_ndcg_at(const double *scores, const double *relevance, size_t n, size_t k) {
    size_t *o = malloc((n ? n : 1) * sizeof *o);
    double *ideal = malloc((n ? n : 1) * sizeof *ideal);
    if (!o || !ideal) {
        free(o);
        free(ideal);
        return NAN;
    }
    rank_order(scores, n, o);
    double dcg = 0, idcg = 0;
    for (size_t i = 0; i < n && i < k; i++) dcg += relevance[o[i]] / log2((double)i + 2);
    rank_order(relevance, n, o); /* the ideal ranking: by relevance */
    for (size_t i = 0; i < n && i < k; i++) idcg += relevance[o[i]] / log2((double)i + 2);
    free(o);
    free(ideal);
    return idcg > 0 ? dcg / idcg : 0.0;
}

/* stable merge sort of idx[0..n) by v (ascending); tmp holds n entries */
static void sort_by(const double *v, size_t *idx, size_t *tmp, size_t n) {
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, a = lo, b = mid, k = lo;
            while (a < mid && b < hi) tmp[k++] = v[idx[b]] < v[idx[a]] ? idx[b++] : idx[a++];
            while (a < mid) tmp[k++] = idx[a++];
            while (b < hi) tmp[k++] = idx[b++];
        }
        memcpy(idx, tmp, n * sizeof *idx);
    }
}

/* average ranks (1-based) of v into r; idx and tmp: n entries each */
static void avg_ranks(const double *v, size_t n, double *r, size_t *idx, size_t *tmp) {
    for (size_t i = 0; i < n; i++) idx[i] = i;
    sort_by(v, idx, tmp, n);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && v[idx[j + 1]] == v[idx[i]]) j++;
        double rank = ((double)i + (double)j) / 2 + 1;
        for (size_t k = i; k <= j; k++) r[idx[k]] = rank;
        i = j + 1;
    }
}

double wm_metric_spearman(const double *x, const double *y, size_t n, double *scratch) {
    if (n < 2) return NAN;
    double *rx = scratch, *ry = scratch + n;
    size_t *idx = (size_t *)(scratch + 2 * n), *tmp = idx + n;
    avg_ranks(x, n, rx, idx, tmp);
    avg_ranks(y, n, ry, idx, tmp);
    double mx = 0, my = 0;
    for (size_t i = 0; i < n; i++) mx += rx[i], my += ry[i];
    mx /= (double)n, my /= (double)n;
    double sxy = 0, sxx = 0, syy = 0;
    for (size_t i = 0; i < n; i++) {
        sxy += (rx[i] - mx) * (ry[i] - my);
        sxx += (rx[i] - mx) * (rx[i] - mx);
        syy += (ry[i] - my) * (ry[i] - my);
    }
    return sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : NAN;
}

double wm_metric_perplexity(double nll_sum, uint64_t count) { return count ? exp(nll_sum / (double)count) : NAN; }
