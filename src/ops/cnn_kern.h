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

/*
 * Winograd F(m x m, 3 x 3) transforms (m = 2 or 4, a = m + 2 points a side; Lavin and Gray's matrices: F(2, 3)
 * at 0, 1, -1, inf; F(4, 3) at 0, 1, -1, 2, -2, inf), vectorized over channels.
 *
 * wm_cnn_wino_in: v[t * ldv + c] = (B^T D B)[t / a][t % a] for t < a * a, c in [c0, c1), where D[i][j] is
 * d[i * a + j][c] (each d[] the channels of one input position of the tile, or a run of zeros for the padding).
 *
 * wm_cnn_wino_out: for c in [c0, c1), O = A^T S A (m x m) with S[i][j] = s[(i * a + j) * lds + c]; then
 * y[k][c] = min(max(O[k / m][k % m] + bias[c] + z[k][c], lo), hi) for every k < m * m whose y[k] is not NULL
 * (bias NULL: none; z NULL: none, else z[k] goes with y[k] and may equal it).
 */
void wm_cnn_wino_in(int m, const float *const *d, int64_t c0, int64_t c1, float *v, int64_t ldv);
void wm_cnn_wino_out(int m, const float *s, int64_t lds, int64_t c0, int64_t c1, float *const *y,
                     const float *const *z, const float *bias, float lo, float hi);
/* the portable loops, which the AVX2 versions call for the channels past the last full vector */
void wm_cnn_wino_in_c(int m, const float *const *d, int64_t c0, int64_t c1, float *v, int64_t ldv);
void wm_cnn_wino_out_c(int m, const float *s, int64_t lds, int64_t c0, int64_t c1, float *const *y,
                       const float *const *z, const float *bias, float lo, float hi);

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
void wm_cnn_wino_in_avx2(int m, const float *const *d, int64_t c0, int64_t c1, float *v, int64_t ldv);
void wm_cnn_wino_out_avx2(int m, const float *s, int64_t lds, int64_t c0, int64_t c1, float *const *y,
                          const float *const *z, const float *bias, float lo, float hi);

#endif
