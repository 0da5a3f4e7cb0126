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

/* Splits s, stripped of surrounding whitespace, into units: words as jiwer's default transform splits them (a run
   of two or more whitespace characters, or one space, separates; a lone tab stays inside a word) or code points.
   Returns the count, or -1 for invalid UTF-8 / no memory. *starts / *lens: each unit's offset and bytes in s. */
static long units(const char *s, int chars, size_t **starts, size_t **lens) {
    size_t n = strlen(s), cap = n + 1, k = 0;
    *starts = malloc(cap * sizeof **starts);
    *lens = malloc(cap * sizeof **lens);
    if (!*starts || !*lens) return -1;
    size_t a = 0, b = n;
    static const char ws[] = " \t\n\r\v\f";
    while (a < b && strchr(ws, s[a])) a++;
    while (b > a && strchr(ws, s[b - 1])) b--;
    for (size_t i = a; i < b;) {
        if (!chars && strchr(ws, s[i]) && (s[i] == ' ' || (i + 1 < b && strchr(ws, s[i + 1])))) {
            while (i < b && strchr(ws, s[i])) i++; /* a separator */
            continue;
        }
        size_t j = i;
        if (chars) {
            unsigned char c = (unsigned char)s[i];
            size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
            if (!len || i + len > b) return -1;
            for (size_t t = 1; t < len; t++)
                if (((unsigned char)s[i + t] >> 6) != 2) return -1;
            j = i + len;
        } else {
            while (j < b && !(s[j] == ' ' || (strchr(ws, s[j]) && j + 1 < b && strchr(ws, s[j + 1])))) j++;
        }
        (*starts)[k] = i, (*lens)[k] = j - i, k++;
        i = j;
    }
    return (long)k;
}

int wm_metric_edit_errors(const char *hyp, const char *ref, int chars, uint64_t max_cells, size_t *errors,
                          size_t *ref_len) {
    size_t *hs = NULL, *hl = NULL, *rs = NULL, *rl = NULL, *row = NULL;
    long nh = units(hyp, chars, &hs, &hl), nr = nh < 0 ? -1 : units(ref, chars, &rs, &rl);
    int rc = -1;
    if (!max_cells) max_cells = (uint64_t)1 << 32;
    if (nh < 0 || nr < 0 || (uint64_t)(nh + 1) * (uint64_t)(nr + 1) > max_cells) goto done;
    if (!(row = malloc((size_t)(nr + 1) * sizeof *row))) goto done;
    for (long j = 0; j <= nr; j++) row[j] = (size_t)j; /* an empty hypothesis misses j reference units */
    for (long i = 1; i <= nh; i++) {
        size_t diag = row[0];
        row[0] = (size_t)i;
        for (long j = 1; j <= nr; j++) {
            size_t up = row[j];
            int same = hl[i - 1] == rl[j - 1] && !memcmp(hyp + hs[i - 1], ref + rs[j - 1], hl[i - 1]);
            size_t best = diag + !same;
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    *errors = row[nr];
    *ref_len = (size_t)nr;
    rc = 0;
done:
    free(hs), free(hl), free(rs), free(rl), free(row);
    return rc;
}
