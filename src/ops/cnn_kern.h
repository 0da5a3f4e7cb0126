/*
 * cnn_kern.h - small vector kernels of the vision ops. Each has a portable
 * loop (cnn_kern.c) and an AVX2/FMA version (cnn_avx2.c) chosen at run
 * time when the kernel table is the AVX2 one (WM_KERNELS=generic forces
 * the portable loops here too). Results may differ in the last bit between
 * the two (fused multiply-add), never between runs or thread counts.
 */
#ifndef WM_OPS_CNN_KERN_H
#define WM_OPS_CNN_KERN_H

#include <math.h>
#include <stdint.h>

/* y[i] += a * x[i] */
void wm_cnn_axpy(float *y, const float *x, float a, int64_t n);
/* y[i] += sum_{t < taps} w[t] * x[i + t * d]  (one kernel row of a stride-1 depthwise conv) */
void wm_cnn_dwrow(float *y, const float *x, const float *w, int64_t taps, int64_t d, int64_t n);
/*
 * y[i] = b + sum_{r < nr} sum_{t < k} w[r * k + t] * rows[r][i + t * d], i < n
 * (one output row of a 2-D depthwise conv, stride 1; a NULL row is all zeros)
 */
void wm_cnn_dwconv_row(float *y, const float *const *rows, int nr, const float *w, int64_t k, int64_t d, float b,
                       int64_t n);
/* y[i] = max(y[i], x[i]) (NaN in x is not propagated) */
void wm_cnn_vmax(float *y, const float *x, int64_t n);
/* y[i] = x[0][i], then y[i] = max(y[i], x[s][i]) for s = 1 .. nx - 1, as wm_cnn_vmax in turn (nx >= 1) but with
   the running maximum kept in registers (a pool window's taps) */
void wm_cnn_vmaxn(float *y, const float *const *x, int nx, int64_t n);
/* y[i] += x[i] */
void wm_cnn_vadd(float *y, const float *x, int64_t n);
/*
 * y[o] = max (is_max) or scale * sum of buf[o * s + t], t < k, o < n (the
 * columns of a pool window). buf must be readable 16 floats past the last
 * window.
 */
void wm_cnn_hpool(float *y, const float *buf, int64_t n, int64_t s, int64_t k, int is_max, float scale);
/* y[i] = x[i] * a + b (y may equal x) */
void wm_cnn_affine(float *y, const float *x, float a, float b, int64_t n);
/* d[j * ldd + i] = s[i * lds + j] (+ bias[j] when bias is not NULL) for i < rows, j < cols */
void wm_cnn_transpose(const float *s, int64_t lds, float *d, int64_t ldd, int64_t rows, int64_t cols, const float *bias);

/* what a transpose adds on the way out: bias[j] (or none), z[j * ldd + i] (a residual laid out like d, or
   none), then clamps to [lo, hi] (ReLU: 0, inf; none: -inf, inf) */
typedef struct wm_cnn_epi {
    const float *bias, *z;
    float lo, hi;
} wm_cnn_epi;

/* d[j * ldd + i] = min(max(s[i * lds + j] + bias[j] + z[j * ldd + i], lo), hi) for i < rows, j < cols */
void wm_cnn_transpose_epi(const float *s, int64_t lds, float *d, int64_t ldd, int64_t rows, int64_t cols,
                          const wm_cnn_epi *e);

void wm_cnn_axpy_avx2(float *y, const float *x, float a, int64_t n);
void wm_cnn_dwrow_avx2(float *y, const float *x, const float *w, int64_t taps, int64_t d, int64_t n);
void wm_cnn_dwconv_row_avx2(float *y, const float *const *rows, int nr, const float *w, int64_t k, int64_t d, float b,
                            int64_t n);
void wm_cnn_vmax_avx2(float *y, const float *x, int64_t n);
void wm_cnn_vmaxn_avx2(float *y, const float *const *x, int nx, int64_t n);
void wm_cnn_vadd_avx2(float *y, const float *x, int64_t n);
void wm_cnn_hpool_avx2(float *y, const float *buf, int64_t n, int64_t s, int64_t k, int is_max, float scale);
void wm_cnn_affine_avx2(float *y, const float *x, float a, float b, int64_t n);
void wm_cnn_transpose_avx2(const float *s, int64_t lds, float *d, int64_t ldd, int64_t rows, int64_t cols,
                           const float *bias);
void wm_cnn_transpose_epi_avx2(const float *s, int64_t lds, float *d, int64_t ldd, int64_t rows, int64_t cols,
                               const wm_cnn_epi *e);

#endif
