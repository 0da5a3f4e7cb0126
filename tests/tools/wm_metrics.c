/*
 * wm_metrics - computes one task metric of src/eval/metrics.c on numbers
 * read from stdin, for the oracle tests (compared with scikit-learn/scipy).
 *   wm_metrics accuracy|f1 N [CLASSES]   stdin: N predictions, N gold labels
 *   wm_metrics mrr|ndcg N K              stdin: N scores, N relevances
 *   wm_metrics spearman N                stdin: N x, N y
 * Prints the value with 17 significant digits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/metrics.h"

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    size_t n = (size_t)atol(argv[2]);
    double *a = calloc(n + 1, sizeof *a), *b = calloc(n + 1, sizeof *b), *s = calloc(4 * n + 4, sizeof *s);
    int64_t *pa = calloc(n + 1, sizeof *pa), *pb = calloc(n + 1, sizeof *pb);
    for (size_t i = 0; i < n; i++)
        if (scanf("%lf", &a[i]) != 1) return 2;
    for (size_t i = 0; i < n; i++)
        if (scanf("%lf", &b[i]) != 1) return 2;
    for (size_t i = 0; i < n; i++) pa[i] = (int64_t)a[i], pb[i] = (int64_t)b[i];
    double r;
    if (!strcmp(argv[1], "accuracy")) r = wm_metric_accuracy(pa, pb, n);
    else if (!strcmp(argv[1], "f1")) r = wm_metric_f1(pa, pb, n, argc > 3 ? atoi(argv[3]) : 2);
    else if (!strcmp(argv[1], "mrr")) r = wm_metric_mrr_at(a, b, n, (size_t)atol(argv[3]));
    else if (!strcmp(argv[1], "ndcg")) r = wm_metric_ndcg_at(a, b, n, (size_t)atol(argv[3]));
    else if (!strcmp(argv[1], "spearman")) r = wm_metric_spearman(a, b, n, s);
    else return 2;
    printf("%.17g\n", r);
    free(a), free(b), free(s), free(pa), free(pb);
    return 0;
}
