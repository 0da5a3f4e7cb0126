/*
 * cnn.h - shared by the vision op families (conv.c, pool.c, norm_nn.c,
 * resize.c, space.c, sample.c): the window geometry of convolutions and
 * pools (kernel, strides, dilations, pads, auto_pad, ceil_mode -> output
 * dims) and element access of float tensors in double.
 *
 * Spatial dims: 1 to 3. A window is kept in three slots, right-aligned:
 * spatial dim i of an nd-dim node is slot 3 - nd + i; the slots in front
 * are unit (in = out = k = s = d = 1, no pads), so every kernel loops over
 * (z, y, x) once and serves 1-D, 2-D and 3-D alike.
 */
#ifndef WM_OPS_CNN_H
#define WM_OPS_CNN_H

#include "ops/op.h"

#define WM_CNN_ND 3 /* most spatial dims served */

enum { WM_AUTOPAD_NOTSET = 0, WM_AUTOPAD_SAME_UPPER, WM_AUTOPAD_SAME_LOWER, WM_AUTOPAD_VALID };

/* Window attributes as the node states them (counts 0 when absent). */
typedef struct wm_win_attr {
    int n_kernel, n_strides, n_dil, n_pads;
    int64_t kernel[WM_CNN_ND], strides[WM_CNN_ND], dil[WM_CNN_ND], pads[2 * WM_CNN_ND];
    int auto_pad;  /* WM_AUTOPAD_* */
    int ceil_mode; /* pools: round the output size up */
} wm_win_attr;

/* The geometry of one node for given input dims, in three right-aligned slots. */
typedef struct wm_win {
    int nd;
    int64_t in[WM_CNN_ND], out[WM_CNN_ND], k[WM_CNN_ND], s[WM_CNN_ND], d[WM_CNN_ND], pb[WM_CNN_ND], pe[WM_CNN_ND];
} wm_win;

/*
 * Reads kernel_shape, strides, dilations, pads, auto_pad (and ceil_mode when
 * `pool`) of n into *a, checking values (strides, dilations, kernel >= 1,
 * pads >= 0 unless allow_neg_pads, at most WM_CNN_ND dims, a known auto_pad).
 */
wm_status wm_win_attr_read(wm_node *n, wm_win_attr *a, int pool, int allow_neg_pads, wm_error *err);

/*
 * Makes the window of a node with nd spatial dims of sizes in_sp. kernel
 * gives the kernel dims when they come from a weight tensor (NULL: from the
 * attribute, which is then required); both must agree when both are given.
 * Output dims follow ONNX: explicit pads (with ceil_mode, a last window
 * must start inside the input or its head pad), SAME_UPPER/SAME_LOWER
 * (out = ceil(in / stride)), VALID.
 */
wm_status wm_win_make(const wm_node *n, const wm_win_attr *a, int nd, const int64_t *in_sp, const int64_t *kernel,
                      wm_win *w, wm_error *err);

/* Product of the three slots. */
static inline int64_t wm_win_prod(const int64_t *v) { return v[0] * v[1] * v[2]; }

/*
 * The range [*lo, *hi) of output positions o in [0, n_out) whose input
 * position o * s + off lies in [0, n_in) (empty when none).
 */
static inline void wm_win_range(int64_t n_out, int64_t n_in, int64_t s, int64_t off, int64_t *lo, int64_t *hi) {
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t b = n_in - off <= 0 ? 0 : (n_in - off - 1) / s + 1;
    if (b > n_out) b = n_out;
    if (a > b) a = b;
    *lo = a;
    *hi = b;
}

/* Element i of a float tensor's data (float32/float16/bfloat16/float64) as double. */
static inline double wm_ld(int32_t dt, const void *p, uint64_t i) {
    switch (dt) {
    case WM_DT_FLOAT: return ((const float *)p)[i];
    case WM_DT_DOUBLE: return ((const double *)p)[i];
    case WM_DT_FLOAT16: return wm_f16_to_f32(((const uint16_t *)p)[i]);
    default: return wm_bf16_to_f32(((const uint16_t *)p)[i]);
    }
}

/* Stores v as element i of a float tensor's data. */
static inline void wm_st(int32_t dt, void *p, uint64_t i, double v) {
    switch (dt) {
    case WM_DT_FLOAT: ((float *)p)[i] = (float)v; break;
    case WM_DT_DOUBLE: ((double *)p)[i] = v; break;
    case WM_DT_FLOAT16: ((uint16_t *)p)[i] = wm_f32_to_f16((float)v); break;
    default: ((uint16_t *)p)[i] = wm_f32_to_bf16((float)v); break;
    }
}

/* Reads a 1-D integer input (sizes, pads, axes) into v; WM_NEED_DATA when its data is not known ahead. */
wm_status wm_cnn_read_ints(const wm_node *n, const wm_tensor *t, int64_t *v, int max, int *count, wm_error *err);

#endif
