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

/* ---------------------------------------------------------------- Winograd F(m x m, 3 x 3) transforms */

/* B^T of one line of a = m + 2 points, x at stride xs */
static void wino_bt(int m, const float *x, int64_t xs, float *r, int64_t rs) {
    float x0 = x[0], x1 = x[xs], x2 = x[2 * xs], x3 = x[3 * xs];
    if (m == 2) {
        r[0] = x0 - x2, r[rs] = x1 + x2, r[2 * rs] = x2 - x1, r[3 * rs] = x1 - x3;
        return;
    }
    float x4 = x[4 * xs], x5 = x[5 * xs];
    float a = x4 - 4.0f * x2, b = x3 - 4.0f * x1, c = x4 - x2, e = 2.0f * (x3 - x1);
    r[0] = 4.0f * x0 - 5.0f * x2 + x4, r[rs] = a + b, r[2 * rs] = a - b, r[3 * rs] = c + e, r[4 * rs] = c - e;
    r[5 * rs] = 4.0f * x1 - 5.0f * x3 + x5;
}

/* A^T of one line of a points into m outputs */
static void wino_at(int m, const float *s, int64_t ss, float *o, int64_t os) {
    float s0 = s[0], s1 = s[ss], s2 = s[2 * ss], s3 = s[3 * ss];
    if (m == 2) {
        o[0] = s0 + s1 + s2, o[os] = s1 - s2 - s3;
        return;
    }
    float s4 = s[4 * ss], s5 = s[5 * ss], p = s1 + s2, q = s1 - s2, u = s3 + s4, w = s3 - s4;
    o[0] = s0 + p + u, o[os] = q + 2.0f * w, o[2 * os] = p + 4.0f * u, o[3 * os] = q + 8.0f * w + s5;
}

void wm_cnn_wino_in_c(int m, const float *const *d, int64_t c0, int64_t c1, float *v, int64_t ldv) {
    int a = m + 2;
    for (int64_t c = c0; c < c1; c++) {
        float D[36], T[36], V[36];
        for (int t = 0; t < a * a; t++) D[t] = d[t][c];
        for (int j = 0; j < a; j++) wino_bt(m, D + j, a, T + j, a); /* columns: B^T D */
        for (int i = 0; i < a; i++) wino_bt(m, T + i * a, 1, V + i * a, 1); /* rows: (B^T D) B */
        for (int t = 0; t < a * a; t++) v[t * ldv + c] = V[t];
    }
}

void wm_cnn_wino_out_c(int m, const float *s, int64_t lds, int64_t c0, int64_t c1, float *const *y,
                       const float *const *z, const float *bias, float lo, float hi) {
    int a = m + 2;
    for (int64_t c = c0; c < c1; c++) {
        float S[36], T[24], O[16];
        for (int t = 0; t < a * a; t++) S[t] = s[t * lds + c];
        for (int j = 0; j < a; j++) wino_at(m, S + j, a, T + j, a); /* columns: A^T S, m x a */
        for (int i = 0; i < m; i++) wino_at(m, T + i * a, 1, O + i * m, 1);
        float b = bias ? bias[c] : 0.0f;
        for (int k = 0; k < m * m; k++) {
            if (!y[k]) continue;
            float r = O[k] + b + (z ? z[k][c] : 0.0f);
            r = r < lo ? lo : r;
            y[k][c] = r > hi ? hi : r;
        }
    }
}

void wm_cnn_wino_in(int m, const float *const *d, int64_t c0, int64_t c1, float *v, int64_t ldv) {
    if (use_avx2()) wm_cnn_wino_in_avx2(m, d, c0, c1, v, ldv);
    else wm_cnn_wino_in_c(m, d, c0, c1, v, ldv);
}

void wm_cnn_wino_out(int m, const float *s, int64_t lds, int64_t c0, int64_t c1, float *const *y,
                     const float *const *z, const float *bias, float lo, float hi) {
    if (use_avx2()) wm_cnn_wino_out_avx2(m, s, lds, c0, c1, y, z, bias, lo, hi);
    else wm_cnn_wino_out_c(m, s, lds, c0, c1, y, z, bias, lo, hi);
}
