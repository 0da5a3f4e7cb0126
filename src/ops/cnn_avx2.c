/* cnn_avx2.c - AVX2/FMA versions of the small vector kernels of the vision ops (compiled with -mavx2 -mfma). */
#include <immintrin.h>

#include "kernels/transpose_avx2.h"
#include "ops/cnn_kern.h"

void wm_cnn_axpy_avx2(float *y, const float *x, float a, int64_t n) {
    __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 y0 = _mm256_loadu_ps(y + i), y1 = _mm256_loadu_ps(y + i + 8);
        y0 = _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), y0);
        y1 = _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i + 8), y1);
        _mm256_storeu_ps(y + i, y0);
        _mm256_storeu_ps(y + i + 8, y1);
    }
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] = fmaf(a, x[i], y[i]);
}

void wm_cnn_dwrow_avx2(float *y, const float *x, const float *w, int64_t taps, int64_t d, int64_t n) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 a0 = _mm256_loadu_ps(y + i), a1 = _mm256_loadu_ps(y + i + 8);
        __m256 a2 = _mm256_loadu_ps(y + i + 16), a3 = _mm256_loadu_ps(y + i + 24);
        for (int64_t t = 0; t < taps; t++) {
            const float *s = x + i + t * d;
            __m256 wv = _mm256_broadcast_ss(w + t);
            a0 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(s), a0);
            a1 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(s + 8), a1);
            a2 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(s + 16), a2);
            a3 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(s + 24), a3);
        }
        _mm256_storeu_ps(y + i, a0);
        _mm256_storeu_ps(y + i + 8, a1);
        _mm256_storeu_ps(y + i + 16, a2);
        _mm256_storeu_ps(y + i + 24, a3);
    }
    for (; i + 8 <= n; i += 8) {
        __m256 a0 = _mm256_loadu_ps(y + i);
        for (int64_t t = 0; t < taps; t++) a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(w + t), _mm256_loadu_ps(x + i + t * d), a0);
        _mm256_storeu_ps(y + i, a0);
    }
    for (; i < n; i++) {
        float a = y[i];
        for (int64_t t = 0; t < taps; t++) a = fmaf(w[t], x[i + t * d], a);
        y[i] = a;
    }
}

void wm_cnn_vmax_avx2(float *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_max_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] = x[i] > y[i] ? x[i] : y[i];
}

void wm_cnn_vmaxn_avx2(float *y, const float *const *x, int nx, int64_t n) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 m0 = _mm256_loadu_ps(x[0] + i), m1 = _mm256_loadu_ps(x[0] + i + 8);
        __m256 m2 = _mm256_loadu_ps(x[0] + i + 16), m3 = _mm256_loadu_ps(x[0] + i + 24);
        for (int s = 1; s < nx; s++) {
            const float *v = x[s] + i;
            m0 = _mm256_max_ps(_mm256_loadu_ps(v), m0);
            m1 = _mm256_max_ps(_mm256_loadu_ps(v + 8), m1);
            m2 = _mm256_max_ps(_mm256_loadu_ps(v + 16), m2);
            m3 = _mm256_max_ps(_mm256_loadu_ps(v + 24), m3);
        }
        _mm256_storeu_ps(y + i, m0);
        _mm256_storeu_ps(y + i + 8, m1);
        _mm256_storeu_ps(y + i + 16, m2);
        _mm256_storeu_ps(y + i + 24, m3);
    }
    for (; i + 8 <= n; i += 8) {
        __m256 m = _mm256_loadu_ps(x[0] + i);
        for (int s = 1; s < nx; s++) m = _mm256_max_ps(_mm256_loadu_ps(x[s] + i), m);
        _mm256_storeu_ps(y + i, m);
    }
    for (; i < n; i++) {
        float m = x[0][i];
        for (int s = 1; s < nx; s++) m = x[s][i] > m ? x[s][i] : m;
        y[i] = m;
    }
}

void wm_cnn_vadd_avx2(float *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
    for (; i < n; i++) y[i] += x[i];
}

/* 8x8 block: d[j * ldd + i] = s[i * lds + j] + b[j] (b: 8 biases, zeros when none) */
static inline void tr8x8(const float *s, int64_t lds, float *d, int64_t ldd, const float *b) {
    const float *r[8];
    __m256 o[8];
    wm_tr8x8_rows(s, lds, r);
    wm_tr8x8_avx2(r, o);
    for (int k = 0; k < 8; k++) _mm256_storeu_ps(d + k * ldd, _mm256_add_ps(o[k], _mm256_broadcast_ss(b + k)));
}

void wm_cnn_transpose_avx2(const float *s, int64_t lds, float *d, int64_t ldd, int64_t rows, int64_t cols,
                           const float *bias) {
    static const float zeros[8] = {0};
    int64_t r8 = rows & ~(int64_t)7, c8 = cols & ~(int64_t)7;
    for (int64_t i = 0; i < r8; i += 8) {
        for (int64_t j = 0; j < c8; j += 8) tr8x8(s + i * lds + j, lds, d + j * ldd + i, ldd, bias ? bias + j : zeros);
        for (int64_t j = c8; j < cols; j++)
            for (int64_t k = 0; k < 8; k++) d[j * ldd + i + k] = s[(i + k) * lds + j] + (bias ? bias[j] : 0.0f);
    }
    for (int64_t i = r8; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) d[j * ldd + i] = s[i * lds + j] + (bias ? bias[j] : 0.0f);
}

/* 8x8 block with the epilogue: d[j * ldd + i] = clamp(s[i * lds + j] + b[j] + z[j * ldd + i]) (z: NULL, none) */
static inline __attribute__((always_inline)) void tr8x8_epi(const float *s, int64_t lds, float *d, int64_t ldd,
                                                            const float *b, const float *z, __m256 lo, __m256 hi) {
    const float *r[8];
    __m256 o[8];
    wm_tr8x8_rows(s, lds, r);
    wm_tr8x8_avx2(r, o);
    for (int k = 0; k < 8; k++) {
        __m256 v = _mm256_add_ps(o[k], _mm256_broadcast_ss(b + k));
        if (z) v = _mm256_add_ps(v, _mm256_loadu_ps(z + k * ldd));
        _mm256_storeu_ps(d + k * ldd, _mm256_min_ps(hi, _mm256_max_ps(lo, v))); /* NaN passes through */
    }
}

static inline float epi1(float v, const wm_cnn_epi *e) {
    v = v < e->lo ? e->lo : v;
    return v > e->hi ? e->hi : v;
}

void wm_cnn_transpose_epi_avx2(const float *s, int64_t lds, float *d, int64_t ldd, int64_t rows, int64_t cols,
                               const wm_cnn_epi *e) {
    static const float zeros[8] = {0};
    int64_t r8 = rows & ~(int64_t)7, c8 = cols & ~(int64_t)7;
    __m256 lo = _mm256_set1_ps(e->lo), hi = _mm256_set1_ps(e->hi);
    const float *z = e->z;
    for (int64_t i = 0; i < r8; i += 8)
        for (int64_t j = 0; j < c8; j += 8) {
            const float *b = e->bias ? e->bias + j : zeros;
            if (z) tr8x8_epi(s + i * lds + j, lds, d + j * ldd + i, ldd, b, z + j * ldd + i, lo, hi);
            else tr8x8_epi(s + i * lds + j, lds, d + j * ldd + i, ldd, b, NULL, lo, hi);
        }
    for (int64_t i = 0; i < rows; i++) /* the edges: columns past c8 of every row, rows past r8 */
        for (int64_t j = i < r8 ? c8 : 0; j < cols; j++)
            d[j * ldd + i] = epi1(s[i * lds + j] + (e->bias ? e->bias[j] : 0.0f) + (z ? z[j * ldd + i] : 0.0f), e);
}

void wm_cnn_affine_avx2(float *y, const float *x, float a, float b, int64_t n) {
    __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), va, vb));
        _mm256_storeu_ps(y + i + 8, _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), va, vb));
    }
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), va, vb));
    for (; i < n; i++) y[i] = fmaf(x[i], a, b);
}

static inline __m256 dw8(const float *const *rows, int nr, const float *w, int64_t k, int64_t d, __m256 vb, int64_t i) {
    __m256 a0 = vb;
    for (int r = 0; r < nr; r++) {
        if (!rows[r]) continue;
        for (int64_t t = 0; t < k; t++)
            a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(w + r * k + t), _mm256_loadu_ps(rows[r] + i + t * d), a0);
    }
    return a0;
}

void wm_cnn_dwconv_row_avx2(float *y, const float *const *rows, int nr, const float *w, int64_t k, int64_t d, float b,
                            int64_t n) {
    int64_t i = 0;
    __m256 vb = _mm256_set1_ps(b);
    for (; i + 16 <= n; i += 16) {
        __m256 a0 = vb, a1 = vb;
        for (int r = 0; r < nr; r++) {
            if (!rows[r]) continue;
            const float *s = rows[r] + i;
            const float *wr = w + r * k;
            for (int64_t t = 0; t < k; t++) {
                __m256 wv = _mm256_broadcast_ss(wr + t);
                a0 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(s + t * d), a0);
                a1 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(s + t * d + 8), a1);
            }
        }
        _mm256_storeu_ps(y + i, a0);
        _mm256_storeu_ps(y + i + 8, a1);
    }
    if (i + 8 <= n) {
        _mm256_storeu_ps(y + i, dw8(rows, nr, w, k, d, vb, i));
        i += 8;
    }
    if (i < n && n >= 8) { /* the last 8 again, overlapping: outputs are written, not accumulated */
        _mm256_storeu_ps(y + n - 8, dw8(rows, nr, w, k, d, vb, n - 8));
        return;
    }
    for (; i < n; i++) {
        float a = b;
        for (int r = 0; r < nr; r++)
            if (rows[r])
                for (int64_t t = 0; t < k; t++) a = fmaf(w[r * k + t], rows[r][i + t * d], a);
        y[i] = a;
    }
}

/* even lanes of the 16 floats at p: p[0], p[2], ..., p[14] */
static inline __m256 evens(const float *p) {
    __m256 t = _mm256_shuffle_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8), 0x88);
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), 0xD8));
}

void wm_cnn_hpool_avx2(float *y, const float *buf, int64_t n, int64_t s, int64_t k, int is_max, float scale) {
    int64_t ox = 0;
    __m256 vs = _mm256_set1_ps(scale);
    if (s == 1)
        for (; ox + 8 <= n; ox += 8) {
            __m256 a = _mm256_loadu_ps(buf + ox);
            for (int64_t kx = 1; kx < k; kx++)
                a = is_max ? _mm256_max_ps(a, _mm256_loadu_ps(buf + ox + kx)) : _mm256_add_ps(a, _mm256_loadu_ps(buf + ox + kx));
            _mm256_storeu_ps(y + ox, is_max ? a : _mm256_mul_ps(a, vs));
        }
    else if (s == 2)
        for (; ox + 8 < n; ox += 8) { /* reads one float past the last window: callers leave room */
            __m256 a = evens(buf + 2 * ox);
            for (int64_t kx = 1; kx < k; kx++)
                a = is_max ? _mm256_max_ps(a, evens(buf + 2 * ox + kx)) : _mm256_add_ps(a, evens(buf + 2 * ox + kx));
            _mm256_storeu_ps(y + ox, is_max ? a : _mm256_mul_ps(a, vs));
        }
    for (; ox < n; ox++) {
        const float *b = buf + ox * s;
        float a = b[0];
        for (int64_t kx = 1; kx < k; kx++) a = is_max ? (b[kx] > a ? b[kx] : a) : a + b[kx];
        y[ox] = is_max ? a : a * scale;
    }
}

/* ---------------------------------------------------------------- Winograd F(m x m, 3 x 3) transforms */

/* B^T of one line of a = m + 2 vectors (see wino_bt in cnn_kern.c) */
static inline void wino_bt8(int m, const __m256 *x, __m256 *r) {
    if (m == 2) {
        r[0] = _mm256_sub_ps(x[0], x[2]), r[1] = _mm256_add_ps(x[1], x[2]);
        r[2] = _mm256_sub_ps(x[2], x[1]), r[3] = _mm256_sub_ps(x[1], x[3]);
        return;
    }
    const __m256 f2 = _mm256_set1_ps(2.0f), f4 = _mm256_set1_ps(4.0f), f5 = _mm256_set1_ps(5.0f);
    __m256 a = _mm256_fnmadd_ps(f4, x[2], x[4]), b = _mm256_fnmadd_ps(f4, x[1], x[3]);
    __m256 c = _mm256_sub_ps(x[4], x[2]), e = _mm256_sub_ps(x[3], x[1]);
    r[0] = _mm256_fmadd_ps(f4, x[0], _mm256_fnmadd_ps(f5, x[2], x[4]));
    r[1] = _mm256_add_ps(a, b), r[2] = _mm256_sub_ps(a, b);
    r[3] = _mm256_fmadd_ps(f2, e, c), r[4] = _mm256_fnmadd_ps(f2, e, c);
    r[5] = _mm256_fmadd_ps(f4, x[1], _mm256_fnmadd_ps(f5, x[3], x[5]));
}

/* A^T of one line of a vectors into m */
static inline void wino_at8(int m, const __m256 *s, __m256 *o) {
    if (m == 2) {
        o[0] = _mm256_add_ps(_mm256_add_ps(s[0], s[1]), s[2]);
        o[1] = _mm256_sub_ps(_mm256_sub_ps(s[1], s[2]), s[3]);
        return;
    }
    __m256 p = _mm256_add_ps(s[1], s[2]), q = _mm256_sub_ps(s[1], s[2]);
    __m256 u = _mm256_add_ps(s[3], s[4]), w = _mm256_sub_ps(s[3], s[4]);
    o[0] = _mm256_add_ps(_mm256_add_ps(s[0], p), u);
    o[1] = _mm256_fmadd_ps(_mm256_set1_ps(2.0f), w, q);
    o[2] = _mm256_fmadd_ps(_mm256_set1_ps(4.0f), u, p);
    o[3] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8.0f), w, q), s[5]);
}

void wm_cnn_wino_in_avx2(int m, const float *const *d, int64_t c0, int64_t c1, float *v, int64_t ldv) {
    const int a = m + 2;
    int64_t c = c0;
    for (; c + 8 <= c1; c += 8) {
        __m256 t[36], x[6], r[6];
        for (int j = 0; j < a; j++) { /* columns: B^T D */
            for (int i = 0; i < a; i++) x[i] = _mm256_loadu_ps(d[i * a + j] + c);
            wino_bt8(m, x, r);
            for (int i = 0; i < a; i++) t[i * a + j] = r[i];
        }
        for (int i = 0; i < a; i++) { /* rows: (B^T D) B */
            wino_bt8(m, t + i * a, r);
            for (int j = 0; j < a; j++) _mm256_storeu_ps(v + (i * a + j) * ldv + c, r[j]);
        }
    }
    if (c < c1) wm_cnn_wino_in_c(m, d, c, c1, v, ldv);
}

void wm_cnn_wino_out_avx2(int m, const float *s, int64_t lds, int64_t c0, int64_t c1, float *const *y,
                          const float *const *z, const float *bias, float lo, float hi) {
    const int a = m + 2;
    const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
    int64_t c = c0;
    for (; c + 8 <= c1; c += 8) {
        __m256 t[24], x[6], o[4];
        for (int j = 0; j < a; j++) { /* columns: A^T S */
            for (int i = 0; i < a; i++) x[i] = _mm256_loadu_ps(s + (i * a + j) * lds + c);
            wino_at8(m, x, o);
            for (int i = 0; i < m; i++) t[i * a + j] = o[i];
        }
        __m256 b = bias ? _mm256_loadu_ps(bias + c) : _mm256_setzero_ps();
        for (int i = 0; i < m; i++) {
            wino_at8(m, t + i * a, o);
            for (int q = 0; q < m; q++) {
                float *yk = y[i * m + q];
                if (!yk) continue;
                __m256 r = _mm256_add_ps(o[q], b);
                if (z) r = _mm256_add_ps(r, _mm256_loadu_ps(z[i * m + q] + c));
                _mm256_storeu_ps(yk + c, _mm256_min_ps(vhi, _mm256_max_ps(vlo, r))); /* NaN passes */
            }
        }
    }
    if (c < c1) wm_cnn_wino_out_c(m, s, lds, c, c1, y, z, bias, lo, hi);
}
