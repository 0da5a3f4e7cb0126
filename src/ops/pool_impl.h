/* pool_impl.h - the pooling plane kernels of pool.c, shared with the unit tests (internal). */
#ifndef WM_OPS_POOL_IMPL_H
#define WM_OPS_POOL_IMPL_H

#include "ops/cnn.h"

enum { WM_POOL_MAX = 0, WM_POOL_AVG, WM_POOL_LP };

/* Per output position of each slot: the taps inside the input [lo, hi) and the count inside the padded input. */
typedef struct wm_pool_tab {
    int64_t *lo[WM_CNN_ND], *hi[WM_CNN_ND], *cnt[WM_CNN_ND];
} wm_pool_tab;

size_t wm_pool_tab_size(const wm_win *w);
/* Fills t with arrays carved from mem (wm_pool_tab_size(w) bytes). */
void wm_pool_tab_make(const wm_win *w, void *mem, wm_pool_tab *t);

/*
 * Pools one plane x (dims w->in) into y (dims w->out) with the tables t. kind: WM_POOL_*;
 * include_pad: AveragePool count_include_pad; p: LpPool's p. ind (may be
 * NULL) gets MaxPool indices: ind_base + the flat index of the maximum in
 * the plane (row-major, or column-major over the spatial dims when
 * col_major), -1 for a window with no tap inside the input.
 */
void wm_pool_plane_f32(const float *x, float *y, int64_t *ind, int64_t ind_base, const wm_win *w, const wm_pool_tab *t,
                       int kind, int include_pad, double p, int col_major);
void wm_pool_plane_f64(const double *x, double *y, int64_t *ind, int64_t ind_base, const wm_win *w, const wm_pool_tab *t,
                       int kind, int include_pad, double p, int col_major);

/*
 * The fast float32 plane for max / average pools of at most 2 spatial dims
 * without dilation (wm_pool_fast_ok): each output row reduces its window's
 * input rows into a padded row (vector max / add), then the columns.
 * buf: wm_pool_fast_ws(w) bytes. Same results as wm_pool_plane_f32 for max;
 * averages sum in float32 (rows first) instead of double.
 */
int wm_pool_fast_ok(const wm_win *w, int kind);
size_t wm_pool_fast_ws(const wm_win *w);
void wm_pool_plane_fast(const float *x, float *y, const wm_win *w, const wm_pool_tab *t, int kind, int include_pad,
                        float *buf);

#endif
