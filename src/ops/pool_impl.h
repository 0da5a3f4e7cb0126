/* pool_impl.h - the pooling plane kernels of pool.c, shared with the unit tests (internal). */
#ifndef WM_OPS_POOL_IMPL_H
#define WM_OPS_POOL_IMPL_H

#include "ops/cnn.h"

enum { WM_POOL_MAX = 0, WM_POOL_AVG, WM_POOL_LP };

/*
 * Pools one plane x (dims w->in) into y (dims w->out). kind: WM_POOL_*;
 * include_pad: AveragePool count_include_pad; p: LpPool's p. ind (may be
 * NULL) gets MaxPool indices: ind_base + the flat index of the maximum in
 * the plane (row-major, or column-major over the spatial dims when
 * col_major), -1 for a window with no tap inside the input.
 */
void wm_pool_plane_f32(const float *x, float *y, int64_t *ind, int64_t ind_base, const wm_win *w, int kind,
                       int include_pad, double p, int col_major);
void wm_pool_plane_f64(const double *x, double *y, int64_t *ind, int64_t ind_base, const wm_win *w, int kind,
                       int include_pad, double p, int col_major);

#endif
