#include "eval/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double wm_percentile(const double *sorted, size_t n, double p) {
    if (n == 0) return NAN;
    double r = floor((double)n * p / 100.0);
    size_t k = r < 0 ? 0 : r >= (double)n ? n - 1 : (size_t)r;
    return sorted[k];
}

void wm_lat_stats_compute(const double *samples, size_t n, double *scratch, wm_lat_stats *st) {
    memset(st, 0, sizeof *st);
    st->n = n;
    if (n == 0) {
        st->mean = st->min = st->max = st->std = st->p50 = st->p90 = st->p95 = st->p99 = NAN;
        return;
    }
    double *s = scratch ? scratch : malloc(n * sizeof *s);
    if (!s) return;
    memcpy(s, samples, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_d);
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += s[i];
    st->mean = sum / (double)n;
    double var = 0;
    for (size_t i = 0; i < n; i++) var += (s[i] - st->mean) * (s[i] - st->mean);
    st->std = n > 1 ? sqrt(var / (double)n) : 0;
    st->min = s[0];
    st->max = s[n - 1];
    st->p50 = wm_percentile(s, n, 50);
    st->p90 = wm_percentile(s, n, 90);
    st->p95 = wm_percentile(s, n, 95);
    st->p99 = wm_percentile(s, n, 99);
    if (!scratch) free(s);
}
