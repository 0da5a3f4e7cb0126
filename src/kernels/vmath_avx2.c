/*
 * vmath_avx2.c - AVX2/FMA vector math: exp, log, tanh, erf, sigmoid, GELU
 * (erf and tanh forms), SiLU, the row kernels (softmax, log-softmax,
 * layernorm, rmsnorm), conversions (F16C) and BLAS-1 helpers.
 *
 * Accuracy: max error against double-precision libm over dense sweeps of the float range,
 * asserted by tests/unit/test_kernels_vmath.c (measured: exp 0.9 ulp, log 0.7, tanh 1.5,
 * erf 2.4, sigmoid 2.2, silu 2.7, gelu_erf 2.9, gelu_tanh 2.1 for x >= 0; bounds 2 / 2 / 2 / 3
 * / 2.5 / 3 / 4 / 3). gelu_erf keeps relative accuracy in its x < 0 tail (x Phi(x) with Phi(x) =
 * Q(|x|) e^(-x^2/2), x^2 carried in two floats, no cancellation); gelu_tanh for x < 0 has relative error
 * up to 3 + 2.5 |2u| ulp (the rounding of 2u = x (c1 + c2 x^2) is amplified by exp; absolute
 * error < 5e-8). Results underflowing to subnormals may differ by one subnormal ulp.
 * Every element goes through the same vector code (tails through a bounce buffer), so
 * a value's result does not depend on its position or on n.
 * Polynomial coefficients: bench/fit_vmath.py.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "kernels/transpose_avx2.h"

/* ------------------------------------------------------------ scalar-vector building blocks */

#include "kernels/vmath_avx2.h"

/* log x: x = 2^e m, m in [sqrt(1/2), sqrt 2); log m = f - (f^2/2 - s (f^2/2 + R(s^2))),
 * f = m - 1 (exact), s = f / (2 + f), R the atanh series. x < 0 or NaN: NaN; 0: -inf; inf: inf. */
VINLINE __m256 v_log(__m256 x) {
    __m256 den = _mm256_cmp_ps(x, V(1.17549435e-38f), _CMP_LT_OQ);
    __m256 xs = _mm256_blendv_ps(x, _mm256_mul_ps(x, V(8388608.0f)), den);
    __m256i bits = _mm256_castps_si256(xs);
    __m256i e = _mm256_sub_epi32(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(127));
    __m256 m = _mm256_castsi256_ps(
        _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(0x7fffff)), _mm256_set1_epi32(0x3f800000)));
    __m256 big = _mm256_cmp_ps(m, V(1.41421356f), _CMP_GT_OQ);
    m = _mm256_blendv_ps(m, _mm256_mul_ps(m, V(0.5f)), big);
    e = _mm256_sub_epi32(e, _mm256_castps_si256(big)); /* big is all ones = -1 */
    __m256 ef = _mm256_sub_ps(_mm256_cvtepi32_ps(e), _mm256_and_ps(den, V(23.0f)));
    __m256 f = _mm256_sub_ps(m, V(1.0f));
    __m256 s = _mm256_div_ps(f, _mm256_add_ps(f, V(2.0f)));
    __m256 z = _mm256_mul_ps(s, s);
    __m256 R = V(2.0f / 11.0f);
    R = _mm256_fmadd_ps(R, z, V(2.0f / 9.0f));
    R = _mm256_fmadd_ps(R, z, V(2.0f / 7.0f));
    R = _mm256_fmadd_ps(R, z, V(2.0f / 5.0f));
    R = _mm256_fmadd_ps(R, z, V(2.0f / 3.0f));
    R = _mm256_mul_ps(R, z);
    __m256 hfsq = _mm256_mul_ps(V(0.5f), _mm256_mul_ps(f, f));
    __m256 lm = _mm256_sub_ps(f, _mm256_fnmadd_ps(s, _mm256_add_ps(hfsq, R), hfsq));
    __m256 y = _mm256_fmadd_ps(ef, V(0.693145751953125f), _mm256_fmadd_ps(ef, V(1.42860682030941723e-6f), lm));
    y = _mm256_blendv_ps(y, V(-INFINITY), _mm256_cmp_ps(x, V(0.0f), _CMP_EQ_OQ));
    y = _mm256_blendv_ps(y, V(INFINITY), _mm256_cmp_ps(x, V(INFINITY), _CMP_EQ_OQ));
    return _mm256_blendv_ps(y, V(NAN), _mm256_cmp_ps(x, V(0.0f), _CMP_NGE_UQ)); /* x < 0 or NaN */
}

/* ------------------------------------------------------------ array maps */

/* y[i] = F(x[i]): whole vectors, then the tail through an 8-float buffer (same arithmetic). */
#define MAP_FN(name, F)                                                                                                \
    static void name(int64_t n, float *y, const float *x) {                                                            \
        int64_t i = 0;                                                                                                 \
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, F(_mm256_loadu_ps(x + i)));                                \
        if (i < n) {                                                                                                   \
            float t[8] = {0};                                                                                          \
            memcpy(t, x + i, (size_t)(n - i) * sizeof(float));                                                         \
            _mm256_storeu_ps(t, F(_mm256_loadu_ps(t)));                                                                \
            memcpy(y + i, t, (size_t)(n - i) * sizeof(float));                                                         \
        }                                                                                                              \
    }
#define MAP_FN1(name, F)                                                                                               \
    static void name(int64_t n, float *y, const float *x, float p) {                                                   \
        const __m256 vp = V(p);                                                                                        \
        int64_t i = 0;                                                                                                 \
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, F(_mm256_loadu_ps(x + i), vp));                            \
        if (i < n) {                                                                                                   \
            float t[8] = {0};                                                                                          \
            memcpy(t, x + i, (size_t)(n - i) * sizeof(float));                                                         \
            _mm256_storeu_ps(t, F(_mm256_loadu_ps(t), vp));                                                            \
            memcpy(y + i, t, (size_t)(n - i) * sizeof(float));                                                         \
        }                                                                                                              \
    }

#define GENERIC_ACT(n, y, x, act, p, q) wm_kernels_generic()->vact(n, y, x, act, p, q)
VMATH_MAPS(a_, GENERIC_ACT)
MAP_FN(a_log, v_log)

/* ------------------------------------------------------------ reductions */

VINLINE float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

VINLINE float hmax8(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* the tail of a row as one vector, padded with `fill` */
VINLINE __m256 load_tail(const float *x, int64_t m, float fill) {
    float t[8] = {fill, fill, fill, fill, fill, fill, fill, fill};
    memcpy(t, x, (size_t)m * sizeof(float));
    return _mm256_loadu_ps(t);
}

static float a_dot(int64_t n, const float *x, const float *y) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), s0);
    if (i < n) s1 = _mm256_fmadd_ps(load_tail(x + i, n - i, 0), load_tail(y + i, n - i, 0), s1);
    return hsum8(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
}

static float a_sum(int64_t n, const float *x) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_add_ps(s0, _mm256_loadu_ps(x + i));
        s1 = _mm256_add_ps(s1, _mm256_loadu_ps(x + i + 8));
        s2 = _mm256_add_ps(s2, _mm256_loadu_ps(x + i + 16));
        s3 = _mm256_add_ps(s3, _mm256_loadu_ps(x + i + 24));
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_add_ps(s0, _mm256_loadu_ps(x + i));
    if (i < n) s1 = _mm256_add_ps(s1, load_tail(x + i, n - i, 0));
    return hsum8(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
}

static float a_max(int64_t n, const float *x) {
    __m256 m = V(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) m = _mm256_max_ps(_mm256_loadu_ps(x + i), m); /* NaN in x is skipped */
    if (i < n) m = _mm256_max_ps(load_tail(x + i, n - i, -INFINITY), m);
    return hmax8(m);
}

/* ------------------------------------------------------------ rows */

static void a_softmax(int64_t n, float *y, const float *x, float scale, const float *mask) {
    if (n <= 0) return;
    __m256 vs = V(scale), vm = V(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 t = _mm256_mul_ps(_mm256_loadu_ps(x + i), vs);
        if (mask) t = _mm256_add_ps(t, _mm256_loadu_ps(mask + i));
        _mm256_storeu_ps(y + i, t);
        vm = _mm256_max_ps(t, vm);
    }
    float mx = hmax8(vm);
    for (; i < n; i++) {
        y[i] = x[i] * scale + (mask ? mask[i] : 0.0f);
        mx = y[i] > mx ? y[i] : mx;
    }
    if (mx == -INFINITY) mx = 0.0f; /* a row of -inf: 0/0 = NaN below, like the math */
    __m256 vmx = V(mx), s = _mm256_setzero_ps();
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 e = v_exp(_mm256_sub_ps(_mm256_loadu_ps(y + i), vmx));
        _mm256_storeu_ps(y + i, e);
        s = _mm256_add_ps(s, e);
    }
    if (i < n) { /* padding lanes are -inf: exp gives 0 there */
        float t[8];
        __m256 e = v_exp(_mm256_sub_ps(load_tail(y + i, n - i, -INFINITY), vmx));
        _mm256_storeu_ps(t, e);
        memcpy(y + i, t, (size_t)(n - i) * sizeof(float));
        s = _mm256_add_ps(s, e);
    }
    float sum = hsum8(s);
    __m256 inv = V(1.0f / sum);
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), inv));
    for (; i < n; i++) y[i] = y[i] * (1.0f / sum);
}

static void a_log_softmax(int64_t n, float *y, const float *x) {
    if (n <= 0) return;
    float mx = a_max(n, x);
    __m256 vmx = V(mx), s = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) s = _mm256_add_ps(s, v_exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmx)));
    if (i < n) s = _mm256_add_ps(s, v_exp(_mm256_sub_ps(load_tail(x + i, n - i, -INFINITY), vmx)));
    float sum = hsum8(s);
    float l = mx + logf(sum);
    __m256 vl = V(l);
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_sub_ps(_mm256_loadu_ps(x + i), vl));
    for (; i < n; i++) y[i] = x[i] - l;
}

static void a_layernorm(int64_t n, float *y, const float *x, const float *gamma, const float *beta, float eps,
                        float *mean_out, float *inv_std_out) {
    float mean = n > 0 ? a_sum(n, x) / (float)n : 0.0f;
    __m256 vmean = V(mean), v0 = _mm256_setzero_ps(), v1 = v0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), vmean), d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vmean);
        v0 = _mm256_fmadd_ps(d0, d0, v0);
        v1 = _mm256_fmadd_ps(d1, d1, v1);
    }
    for (; i + 8 <= n; i += 8) {
        __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vmean);
        v0 = _mm256_fmadd_ps(d, d, v0);
    }
    if (i < n) {
        __m256 d = _mm256_sub_ps(load_tail(x + i, n - i, mean), vmean);
        v1 = _mm256_fmadd_ps(d, d, v1);
    }
    float var = n > 0 ? hsum8(_mm256_add_ps(v0, v1)) / (float)n : 0.0f;
    float inv = 1.0f / sqrtf(var + eps);
    __m256 vinv = V(inv);
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 t = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmean), vinv);
        if (gamma) t = _mm256_mul_ps(t, _mm256_loadu_ps(gamma + i));
        if (beta) t = _mm256_add_ps(t, _mm256_loadu_ps(beta + i));
        _mm256_storeu_ps(y + i, t);
    }
    for (; i < n; i++) {
        float t = (x[i] - mean) * inv;
        if (gamma) t *= gamma[i];
        if (beta) t += beta[i];
        y[i] = t;
    }
    if (mean_out) *mean_out = mean;
    if (inv_std_out) *inv_std_out = inv;
}

static void a_rmsnorm(int64_t n, float *y, const float *x, const float *gamma, float eps) {
    float ss = a_dot(n, x, x);
    float inv = 1.0f / sqrtf((n > 0 ? ss / (float)n : 0.0f) + eps);
    __m256 vinv = V(inv);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 t = _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv);
        if (gamma) t = _mm256_mul_ps(t, _mm256_loadu_ps(gamma + i));
        _mm256_storeu_ps(y + i, t);
    }
    for (; i < n; i++) y[i] = x[i] * inv * (gamma ? gamma[i] : 1.0f);
}

/* ------------------------------------------------------------ conversions */

static void a_h2f(int64_t n, float *y, const uint16_t *x) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    for (; i < n; i++) y[i] = _cvtsh_ss(x[i]);
}

static void a_f2h(int64_t n, uint16_t *y, const float *x) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}

static void a_b2f(int64_t n, float *y, const uint16_t *x) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + i)));
        _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
    }
    for (; i < n; i++) {
        uint32_t b = (uint32_t)x[i] << 16;
        memcpy(y + i, &b, 4);
    }
}

/* f32 -> bf16 round to nearest even; NaN stays NaN (quiet) */
static void a_f2b(int64_t n, uint16_t *y, const float *x) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i b = _mm256_castps_si256(_mm256_loadu_ps(x + i));
        __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
        __m256i r = _mm256_srli_epi32(_mm256_add_epi32(b, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
        __m256i q = _mm256_or_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(0x40));
        __m256 nan = v_isnan(_mm256_castsi256_ps(b));
        r = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_castsi256_ps(q), nan));
        __m128i p = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
        _mm_storeu_si128((__m128i *)(y + i), p);
    }
    if (i < n) wm_kernels_generic()->f32_to_bf16(n - i, y + i, x + i); /* same rounding, scalar */
}

/* ------------------------------------------------------------ BLAS-1 */

static void a_axpy(int64_t n, float a, const float *x, float *y) {
    __m256 va = V(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] = fmaf(a, x[i], y[i]);
}

static void a_scale(int64_t n, float *y, const float *x, float a) {
    __m256 va = V(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(va, _mm256_loadu_ps(x + i)));
    for (; i < n; i++) y[i] = a * x[i];
}

#define BIN_FN(name, OP, op)                                                                                           \
    static void name(int64_t n, float *z, const float *x, const float *y) {                                           \
        int64_t i = 0;                                                                                                 \
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(z + i, OP(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));       \
        for (; i < n; i++) z[i] = x[i] op y[i];                                                                        \
    }
BIN_FN(a_add, _mm256_add_ps, +)
BIN_FN(a_sub, _mm256_sub_ps, -)
BIN_FN(a_mul, _mm256_mul_ps, *)
BIN_FN(a_div, _mm256_div_ps, /)


/* 8 x 8 blocks transposed in registers (bit moves only: any 4-byte type); the edges one element at a time */
static void a_transpose32(int64_t rows, int64_t cols, const uint32_t *src, int64_t lds, uint32_t *dst, int64_t ldd) {
    int64_t r8 = rows & ~(int64_t)7, c8 = cols & ~(int64_t)7;
    for (int64_t i0 = 0; i0 < r8; i0 += 8) {
        for (int64_t j0 = 0; j0 < c8; j0 += 8) {
            const float *r[8];
            __m256 o[8];
            wm_tr8x8_rows((const float *)(src + i0 * lds + j0), lds, r);
            wm_tr8x8_avx2(r, o);
            for (int j = 0; j < 8; j++) _mm256_storeu_ps((float *)(dst + (j0 + j) * ldd + i0), o[j]);
        }
        for (int64_t j = c8; j < cols; j++)
            for (int64_t i = i0; i < i0 + 8; i++) dst[j * ldd + i] = src[i * lds + j];
    }
    for (int64_t i = r8; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) dst[j * ldd + i] = src[i * lds + j];
}

void wm_vmath_fill_avx2(wm_kernels *k) {
    k->vexp = a_exp;
    k->vlog = a_log;
    k->vtanh = a_tanh;
    k->verf = a_erf;
    k->vsigmoid = a_sigmoid;
    k->vgelu_erf = a_gelu_erf;
    k->vgelu_tanh = a_gelu_tanh;
    k->vsilu = a_silu;
    k->vact = a_act;
    k->softmax_row = a_softmax;
    k->log_softmax_row = a_log_softmax;
    k->layernorm_row = a_layernorm;
    k->rmsnorm_row = a_rmsnorm;
    k->f16_to_f32 = a_h2f;
    k->f32_to_f16 = a_f2h;
    k->bf16_to_f32 = a_b2f;
    k->f32_to_bf16 = a_f2b;
    k->transpose32 = a_transpose32;
    k->dot = a_dot;
    k->axpy = a_axpy;
    k->scale = a_scale;
    k->add = a_add;
    k->sub = a_sub;
    k->mul = a_mul;
    k->div = a_div;
    k->reduce_sum = a_sum;
    k->reduce_max = a_max;
}
