/* stats.h - latency statistics: mean, min, max, std and percentiles as the reference system takes them. */
#ifndef WM_EVAL_STATS_H
#define WM_EVAL_STATS_H

#include <stddef.h>

typedef struct wm_lat_stats {
    double mean, min, max, std;
    double p50, p90, p95, p99;
    size_t n;
} wm_lat_stats;

/* Fills st from n samples; scratch (n doubles, may be NULL to allocate) receives them sorted. */
void wm_lat_stats_compute(const double *samples, size_t n, double *scratch, wm_lat_stats *st);

/* Percentile p in [0, 100] of sorted[0..n) as the reference's perf: sorted[min(floor(n p / 100), n - 1)], no
 * interpolation. NaN when n is 0. */
double wm_percentile(const double *sorted, size_t n, double p);

#endif
