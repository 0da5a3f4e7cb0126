/* cnn_kern.c - the small vector kernels of the vision ops (see cnn_kern.h). */
#include "ops/cnn_kern.h"

#include <stdatomic.h>

#include "kernels/kernels.h"

static int use_avx2(void) {
    static atomic_int v = -1; /* every thread computes the same value */
    int c = atomic_load_explicit(&v, memory_order_relaxed);
    if (c < 0) {
        c = wm_kernels_get()->isa >= 1; /* the AVX2 table or one built on it */
        atomic_store_explicit(&v, c, memory_order_relaxed);
    }
    return c;
}

void wm_cnn_axpy(float *y, const float *x, float a, int64_t n) {
    if (use_avx2()) {
        wm_cnn_axpy_avx2(y, x, a, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

void wm_cnn_dwrow(float *y, const float *x, const float *w, int64_t taps, int64_t d, int64_t n) {
    if (use_avx2()) {
        wm_cnn_dwrow_avx2(y, x, w, taps, d, n);
        return;
    }
    for (int64_t t = 0; t < taps; t++) {
        const float *s = x + t * d;
        float a = w[t];
        for (int64_t i = 0; i < n; i++) y[i] += a * s[i];
    }
}

void wm_cnn_vmax(float *y, const float *x, int64_t n) {
    if (use_avx2()) {
        wm_cnn_vmax_avx2(y, x, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) y[i] = x[i] > y[i] ? x[i] : y[i];
}

void wm_cnn_vmaxn(float *y, const float *const *x, int nx, int64_t n) {
    if (use_avx2()) {
        wm_cnn_vmaxn_avx2(y, x, nx, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        float m = x[0][i];
        for (int s = 1; s < nx; s++) m = x[s][i] > m ? x[s][i] : m;
        y[i] = m;
    }
}

void wm_cnn_vadd(float *y, const float *x, int64_t n) {
    if (use_avx2()) {
        wm_cnn_vadd_avx2(y, x, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

void wm_cnn_transpose(const float *s, int64_t lds, float *d, int64_t ldd, int64_t rows, int64_t cols, const float *bias) {
    if (use_avx2()) {
        wm_cnn_transpose_avx2(s, lds, d, ldd, rows, cols, bias);
        return;
    }
    for (int64_t i0 = 0; i0 < rows; i0 += 16) /* 16x16 blocks keep both sides in cache */
        for (int64_t j0 = 0; j0 < cols; j0 += 16)
            for (int64_t i = i0; i < rows && i < i0 + 16; i++)
                for (int64_t j = j0; j < cols && j < j0 + 16; j++) d[j * ldd + i] = s[i * lds + j] + (bias ? bias[j] : 0.0f);
}

/* one element of the epilogue transpose */
static inline float epi_at(const float *s, int64_t lds, const float *d_z, int64_t ldd, int64_t i, int64_t j,
                           const wm_cnn_epi *e) {
    float v = s[i * lds + j] + (e->bias ? e->bias[j] : 0.0f) + (d_z ? d_z[j * ldd + i] : 0.0f);
    v = v < e->lo ? e->lo : v;
    return v > e->hi ? e->hi : v;
}

void wm_cnn_transpose_epi(const float *s, int64_t lds, float *d, int64_t ldd, int64_t rows, int64_t cols,
                          const wm_cnn_epi *e) {
    if (use_avx2()) {
        wm_cnn_transpose_epi_avx2(s, lds, d, ldd, rows, cols, e);
        return;
    }
    for (int64_t i0 = 0; i0 < rows; i0 += 16)
        for (int64_t j0 = 0; j0 < cols; j0 += 16)
            for (int64_t i = i0; i < rows && i < i0 + 16; i++)
                for (int64_t j = j0; j < cols && j < j0 + 16; j++) d[j * ldd + i] = epi_at(s, lds, e->z, ldd, i, j, e);
}

void wm_cnn_affine(float *y, const float *x, float a, float b, int64_t n) {
    if (use_avx2()) {
        wm_cnn_affine_avx2(y, x, a, b, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * a + b;
}

void wm_cnn_dwconv_row(float *y, const float *const *rows, int nr, const float *w, int64_t k, int64_t d, float b,
                       int64_t n) {
    if (use_avx2()) {
        wm_cnn_dwconv_row_avx2(y, rows, nr, w, k, d, b, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) y[i] = b;
    for (int r = 0; r < nr; r++)
        if (rows[r])
            for (int64_t t = 0; t < k; t++) {
                const float *s = rows[r] + t * d;
                float a = w[r * k + t];
                for (int64_t i = 0; i < n; i++) y[i] += a * s[i];
            }
}

void wm_cnn_hpool(float *y, const float *buf, int64_t n, int64_t s, int64_t k, int is_max, float scale) {
    if (use_avx2()) {
        wm_cnn_hpool_avx2(y, buf, n, s, k, is_max, scale);
        return;
    }
    for (int64_t o = 0; o < n; o++) {
        const float *b = buf + o * s;
        float a = b[0];
        for (int64_t t = 1; t < k; t++) a = is_max ? (b[t] > a ? b[t] : a) : a + b[t];
        y[o] = is_max ? a : a * scale;
    }
}
