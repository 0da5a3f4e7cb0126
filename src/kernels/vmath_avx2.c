/*
 * vmath_avx2.c - AVX2/FMA vector math: exp, log, tanh, erf, sigmoid, GELU
 * (erf and tanh forms), SiLU, the row kernels (softmax, log-softmax,
 * layernorm, rmsnorm), conversions (F16C) and BLAS-1 helpers.
 *
 * Accuracy: max error against double-precision libm over dense sweeps of the float range,
 * asserted by tests/unit/test_kernels_vmath.c (measured: exp 0.9 ulp, log 0.7, tanh 1.5,
 * erf 2.4, sigmoid 2.2, silu 2.7, gelu_erf 5.3, gelu_tanh 2.1 for x >= 0; bounds 2 / 2 / 2 / 3
 * / 2.5 / 3 / 6 / 3). gelu_erf keeps relative accuracy in its x < 0 tail (z = x/sqrt2 and z^2
 * carried in two floats, erfc without cancellation); gelu_tanh for x < 0 has relative error
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

#define V(x) _mm256_set1_ps(x)
#define VINLINE static inline __attribute__((always_inline))

/* ------------------------------------------------------------ scalar-vector building blocks */

VINLINE __m256 v_abs(__m256 x) { return _mm256_andnot_ps(V(-0.0f), x); }
VINLINE __m256 v_isnan(__m256 x) { return _mm256_cmp_ps(x, x, _CMP_UNORD_Q); }

/* e^x: x = n ln2 + r (|r| <= ln2/2, two-constant ln2), degree-7 Taylor in r, times 2^n as two
 * factors (so 2^n may be subnormal). x > 89 gives inf, x < -104 gives 0, NaN stays NaN. */
VINLINE __m256 v_exp(__m256 x) {
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, V(-104.0f)), V(89.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, V(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, V(0.693145751953125f), xc);
    r = _mm256_fnmadd_ps(n, V(1.42860682030941723e-6f), r);
    __m256 p = V(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, V(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, V(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, V(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, V(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, V(0.5f));
    p = _mm256_fmadd_ps(p, r, V(1.0f));
    p = _mm256_fmadd_ps(p, r, V(1.0f));
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    return _mm256_blendv_ps(y, x, v_isnan(x));
}

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

/* coefficients from bench/fit_vmath.py */
static const float k_tanh[7] = {1.000000000e+00f, -3.333333135e-01f, 1.333320141e-01f, -5.394650623e-02f,
                                2.169989794e-02f, -8.176164702e-03f, 2.142236102e-03f};
static const float k_erf[8] = {1.128379226e+00f, -3.761263788e-01f, 1.128378361e-01f, -2.686547488e-02f,
                               5.221138708e-03f, -8.485438884e-04f, 1.127473806e-04f, -9.689741091e-06f};
static const float k_erfc[13] = {-4.686607440e-07f, 2.821123898e-01f,  2.817983329e-01f, 2.497970760e-01f,
                                 1.567305326e-01f,  1.736470759e-01f,  -2.978590429e-01f, 6.250801682e-01f,
                                 -1.156625509e+00f, 1.166263819e+00f,  -6.476615667e-01f, 1.892380267e-01f,
                                 -2.251910791e-02f};

VINLINE __m256 v_poly(__m256 t, const float *c, int n) {
    __m256 p = V(c[n - 1]);
#pragma GCC unroll 16
    for (int i = n - 2; i >= 0; i--) p = _mm256_fmadd_ps(p, t, V(c[i]));
    return p;
}

/* tanh: |x| < 0.625 odd polynomial; else sign(x) (1 - e) / (1 + e), e = exp(-2|x|). */
VINLINE __m256 v_tanh(__m256 x) {
    __m256 ax = v_abs(x);
    __m256 small = _mm256_mul_ps(x, v_poly(_mm256_mul_ps(x, x), k_tanh, 7));
    __m256 e = v_exp(_mm256_mul_ps(ax, V(-2.0f)));
    __m256 big = _mm256_div_ps(_mm256_sub_ps(V(1.0f), e), _mm256_add_ps(V(1.0f), e));
    big = _mm256_or_ps(big, _mm256_and_ps(x, V(-0.0f)));
    return _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, V(0.625f), _CMP_LT_OQ));
}

/* sigmoid: e = exp(-|x|), 1/(1+e) for x >= 0, e/(1+e) otherwise (no overflow, no cancellation). */
VINLINE __m256 v_sigmoid(__m256 x) {
    __m256 e = v_exp(_mm256_sub_ps(V(0.0f), v_abs(x)));
    __m256 num = _mm256_blendv_ps(e, V(1.0f), _mm256_cmp_ps(x, V(0.0f), _CMP_GE_OQ));
    return _mm256_div_ps(num, _mm256_add_ps(V(1.0f), e));
}

/* For z = zh + zl >= 0: *erf_small = erf(zh), accurate for zh < 1; returns erfc(z), accurate for
 * z >= 0.5: exp(-z^2) with z^2 carried in two floats, times a fit of erfc(z) e^(z^2) in
 * t = 1/(1 + z/2); 0 from z >= 10. */
VINLINE __m256 v_erfc_tail(__m256 zh, __m256 zl, __m256 *erf_small) {
    __m256 z2 = _mm256_mul_ps(zh, zh);
    *erf_small = _mm256_mul_ps(zh, v_poly(z2, k_erf, 8));
    __m256 zc = _mm256_min_ps(_mm256_max_ps(zh, V(0.5f)), V(10.0f));
    __m256 t = _mm256_div_ps(V(1.0f), _mm256_fmadd_ps(zc, V(0.5f), V(1.0f)));
    __m256 R = v_poly(t, k_erfc, 13);
    /* z^2 = hi + lo: hi = zc^2, lo = (zc^2 - hi) + 2 zc zl */
    __m256 hi = _mm256_mul_ps(zc, zc);
    __m256 lo = _mm256_fmadd_ps(_mm256_add_ps(zc, zc), zl, _mm256_fmsub_ps(zc, zc, hi));
    __m256 ez = _mm256_mul_ps(v_exp(_mm256_sub_ps(V(0.0f), hi)), _mm256_sub_ps(V(1.0f), lo));
    __m256 erfc = _mm256_mul_ps(ez, R);
    return _mm256_andnot_ps(_mm256_cmp_ps(zh, V(10.0f), _CMP_GE_OQ), erfc);
}

VINLINE __m256 v_erf(__m256 x) {
    __m256 z = v_abs(x), es;
    __m256 erfc = v_erfc_tail(z, V(0.0f), &es);
    __m256 y = _mm256_blendv_ps(_mm256_sub_ps(V(1.0f), erfc), es, _mm256_cmp_ps(z, V(1.0f), _CMP_LT_OQ));
    y = _mm256_or_ps(y, _mm256_and_ps(x, V(-0.0f)));
    return _mm256_blendv_ps(y, x, v_isnan(x));
}

/* gelu(x) = x/2 (1 + erf(x/sqrt2)); for x < 0 that is x/2 erfc(|x|/sqrt2), kept relative-accurate. */
VINLINE __m256 v_gelu_erf(__m256 x) {
    const float c = 0.70710677f, c_lo = 1.21016175e-8f; /* 1/sqrt2 = c + c_lo */
    __m256 ax = v_abs(x);
    __m256 zh = _mm256_mul_ps(ax, V(c));
    __m256 zl = _mm256_fmadd_ps(ax, V(c_lo), _mm256_fmsub_ps(ax, V(c), zh));
    __m256 es;
    __m256 erfc = v_erfc_tail(zh, zl, &es);
    __m256 onep = _mm256_blendv_ps(_mm256_sub_ps(V(2.0f), erfc), _mm256_add_ps(V(1.0f), es),
                                   _mm256_cmp_ps(zh, V(1.0f), _CMP_LT_OQ)); /* 1 + erf(z) */
    __m256 onem = _mm256_blendv_ps(erfc, _mm256_sub_ps(V(1.0f), es),
                                   _mm256_cmp_ps(zh, V(0.5f), _CMP_LT_OQ)); /* 1 - erf(z), no cancellation */
    __m256 f = _mm256_blendv_ps(onem, onep, _mm256_cmp_ps(x, V(0.0f), _CMP_GE_OQ));
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(V(0.5f), x), f);
    return _mm256_blendv_ps(y, x, v_isnan(x));
}

/* gelu_tanh(x) = x/2 (1 + tanh(u)) = x sigmoid(2u), 2u = x (c1 + c2 x^2). */
VINLINE __m256 v_gelu_tanh(__m256 x) {
    const float c1 = 1.59576912160573071f, c2 = 0.0713548162726008f; /* 2 sqrt(2/pi), c1 * 0.044715 */
    __m256 u2 = _mm256_mul_ps(x, _mm256_fmadd_ps(V(c2), _mm256_mul_ps(x, x), V(c1)));
    return _mm256_mul_ps(x, v_sigmoid(u2));
}

VINLINE __m256 v_silu(__m256 x) { return _mm256_mul_ps(x, v_sigmoid(x)); }

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

MAP_FN(a_exp, v_exp)
MAP_FN(a_log, v_log)
MAP_FN(a_tanh, v_tanh)
MAP_FN(a_erf, v_erf)
MAP_FN(a_sigmoid, v_sigmoid)
MAP_FN(a_gelu_erf, v_gelu_erf)
MAP_FN(a_gelu_tanh, v_gelu_tanh)
MAP_FN(a_silu, v_silu)

VINLINE __m256 v_relu(__m256 x) { return _mm256_blendv_ps(_mm256_max_ps(x, V(0.0f)), x, v_isnan(x)); }
MAP_FN(a_relu, v_relu)

static void a_act(int64_t n, float *y, const float *x, wm_act act, float p, float q) {
    switch (act) {
    case WM_ACT_RELU: a_relu(n, y, x); return;
    case WM_ACT_GELU_ERF: a_gelu_erf(n, y, x); return;
    case WM_ACT_GELU_TANH: a_gelu_tanh(n, y, x); return;
    case WM_ACT_SILU: a_silu(n, y, x); return;
    case WM_ACT_SIGMOID: a_sigmoid(n, y, x); return;
    case WM_ACT_TANH: a_tanh(n, y, x); return;
    default: wm_kernels_generic()->vact(n, y, x, act, p, q); return; /* NONE, CLIP, LEAKY_RELU: trivial */
    }
}

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
