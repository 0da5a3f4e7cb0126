/* stats.h - latency statistics: mean, min, max, std and nearest-rank percentiles. */
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

/* Nearest-rank percentile p in (0, 100] of sorted[0..n): sorted[ceil(p/100 n) - 1]. */
double wm_percentile_nearest(const double *sorted, size_t n, double p);

#endif
