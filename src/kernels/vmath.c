/*
 * vmath.c - generic (portable C) vector math, row kernels, conversions and
 * BLAS-1 helpers. Transcendentals come from libm (correctly rounded or within
 * 1 ulp on glibc); reductions use 8 partial sums in a fixed order (the
 * generic table's results repeat run to run).
 */
#include <math.h>
#include <string.h>

#include "kernels/kernels_impl.h"

/* ------------------------------------------------------------ scalar conversions */

float wm_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
    if (e == 0) {
        if (m == 0) {
            x = sign;
        } else { /* subnormal: m * 2^-24, normalized */
            uint32_t s = 0;
            while (!(m & 0x400)) {
                m <<= 1;
                s++;
            }
            x = sign | ((113 - s) << 23) | ((m & 0x3ff) << 13);
        }
    } else if (e == 31) {
        x = sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0); /* NaN comes back quiet */
    } else {
        x = sign | ((e + 112) << 23) | (m << 13);
    }
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

uint16_t wm_float_to_half(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf, NaN (quiet, top payload bits kept) */
        return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 | ((ax >> 13) & 0x3ff) : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* >= 65520 rounds to inf */
    if (ax >= 0x38800000u) {                                  /* normal half */
        uint32_t r = ax + 0xfff + ((ax >> 13) & 1);
        return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
    }
    if (ax < 0x33000000u) return (uint16_t)sign; /* <= 2^-25: rounds to zero */
    uint32_t e = ax >> 23, m = (ax & 0x7fffff) | 0x800000, shift = 126 - e;
    uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

static float bf16_to_float(uint16_t b) {
    uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

static uint16_t float_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

/* ------------------------------------------------------------ elementwise */

static void g_exp(int64_t n, float *y, const float *x) {
    for (int64_t i = 0; i < n; i++) y[i] = expf(x[i]);
}
static void g_log(int64_t n, float *y, const float *x) {
    for (int64_t i = 0; i < n; i++) y[i] = logf(x[i]);
}
static void g_tanh(int64_t n, float *y, const float *x) {
    for (int64_t i = 0; i < n; i++) y[i] = tanhf(x[i]);
}
static void g_erf(int64_t n, float *y, const float *x) {
    for (int64_t i = 0; i < n; i++) y[i] = erff(x[i]);
}
/* The activations are evaluated in double (the portable table favours accuracy): no cancellation
 * in 1 + erf(x) or 1 + tanh(u) for x < 0, correctly rounded in practice. */
static float sigmoid1(float v) { return (float)(1.0 / (1.0 + exp(-(double)v))); }
static void g_sigmoid(int64_t n, float *y, const float *x) {
    for (int64_t i = 0; i < n; i++) y[i] = sigmoid1(x[i]);
}
static float gelu_erf1(float v) { return (float)(0.5 * v * erfc(-(double)v * 0.70710678118654752)); }
static void g_gelu_erf(int64_t n, float *y, const float *x) {
    for (int64_t i = 0; i < n; i++) y[i] = gelu_erf1(x[i]);
}
static float gelu_tanh1(float v) {
    double x = v, u = 0.79788456080286536 * (x + 0.044715 * x * x * x);
    return (float)(x / (1.0 + exp(-2.0 * u))); /* x/2 (1 + tanh u) = x sigmoid(2u) */
}
static void g_gelu_tanh(int64_t n, float *y, const float *x) {
    for (int64_t i = 0; i < n; i++) y[i] = gelu_tanh1(x[i]);
}
static void g_silu(int64_t n, float *y, const float *x) {
    for (int64_t i = 0; i < n; i++) y[i] = (float)((double)x[i] / (1.0 + exp(-(double)x[i])));
}

static void g_act(int64_t n, float *y, const float *x, wm_act act, float p, float q) {
    switch (act) {
    case WM_ACT_NONE:
        if (y != x) memmove(y, x, (size_t)n * sizeof *y);
        break;
    case WM_ACT_RELU:
        for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
        break;
    case WM_ACT_GELU_ERF: g_gelu_erf(n, y, x); break;
    case WM_ACT_GELU_TANH: g_gelu_tanh(n, y, x); break;
    case WM_ACT_SILU: g_silu(n, y, x); break;
    case WM_ACT_SIGMOID: g_sigmoid(n, y, x); break;
    case WM_ACT_TANH: g_tanh(n, y, x); break;
    case WM_ACT_CLIP:
        for (int64_t i = 0; i < n; i++) {
            float v = x[i] < p ? p : x[i];
            y[i] = v > q ? q : v;
        }
        break;
    case WM_ACT_LEAKY_RELU:
        for (int64_t i = 0; i < n; i++) y[i] = x[i] >= 0.0f ? x[i] : p * x[i];
        break;
    case WM_ACT_QUICK_GELU:
        for (int64_t i = 0; i < n; i++) y[i] = (float)((double)x[i] / (1.0 + exp(-(double)p * x[i])));
        break;
    default: break;
    }
}

/* ------------------------------------------------------------ reductions */

/* 8 partial sums, lane i takes elements i, i+8, ...; combined pairwise. */
static float sum8(int64_t n, const float *x, const float *y) {
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += y ? x[i + j] * y[i + j] : x[i + j];
    for (int j = 0; i < n; i++, j++) s[j] += y ? x[i] * y[i] : x[i];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

static float g_dot(int64_t n, const float *x, const float *y) { return sum8(n, x, y); }
static float g_sum(int64_t n, const float *x) { return sum8(n, x, NULL); }
static float g_max(int64_t n, const float *x) {
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

static void g_softmax(int64_t n, float *y, const float *x, float scale, const float *mask) {
    if (n <= 0) return;
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        float t = x[i] * scale + (mask ? mask[i] : 0.0f);
        y[i] = t;
        mx = t > mx ? t : mx;
    }
    if (mx == -INFINITY) mx = 0.0f; /* all -inf: exp(-inf)=0, 0/0 = NaN below, like the math */
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
        y[i] = expf(y[i] - mx);
        s += y[i];
    }
    float inv = (float)(1.0 / s);
    for (int64_t i = 0; i < n; i++) y[i] = s > 0 ? y[i] * inv : NAN;
}

static void g_log_softmax(int64_t n, float *y, const float *x) {
    if (n <= 0) return;
    float mx = g_max(n, x);
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += exp((double)x[i] - mx);
    float l = (float)log(s);
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] - mx) - l;
}

static void g_layernorm(int64_t n, float *y, const float *x, const float *gamma, const float *beta, float eps,
                        float *mean_out, float *inv_std_out) {
    float mean = n > 0 ? g_sum(n, x) / (float)n : 0.0f;
    float v[8] = {0};
    for (int64_t i = 0; i < n; i++) {
        float d = x[i] - mean;
        v[i & 7] += d * d;
    }
    float var = n > 0 ? (((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]))) / (float)n : 0.0f;
    float inv = 1.0f / sqrtf(var + eps);
    for (int64_t i = 0; i < n; i++) {
        float t = (x[i] - mean) * inv;
        if (gamma) t *= gamma[i];
        if (beta) t += beta[i];
        y[i] = t;
    }
    if (mean_out) *mean_out = mean;
    if (inv_std_out) *inv_std_out = inv;
}

static void g_rmsnorm(int64_t n, float *y, const float *x, const float *gamma, float eps) {
    float ss = sum8(n, x, x);
    float inv = 1.0f / sqrtf((n > 0 ? ss / (float)n : 0.0f) + eps);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * inv * (gamma ? gamma[i] : 1.0f);
}

/* ------------------------------------------------------------ arrays */

static void g_h2f(int64_t n, float *y, const uint16_t *x) {
    for (int64_t i = 0; i < n; i++) y[i] = wm_half_to_float(x[i]);
}
static void g_f2h(int64_t n, uint16_t *y, const float *x) {
    for (int64_t i = 0; i < n; i++) y[i] = wm_float_to_half(x[i]);
}
static void g_b2f(int64_t n, float *y, const uint16_t *x) {
    for (int64_t i = 0; i < n; i++) y[i] = bf16_to_float(x[i]);
}
static void g_f2b(int64_t n, uint16_t *y, const float *x) {
    for (int64_t i = 0; i < n; i++) y[i] = float_to_bf16(x[i]);
}
static void g_axpy(int64_t n, float a, const float *x, float *y) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}
static void g_scale(int64_t n, float *y, const float *x, float a) {
    for (int64_t i = 0; i < n; i++) y[i] = a * x[i];
}
static void g_add(int64_t n, float *z, const float *x, const float *y) {
    for (int64_t i = 0; i < n; i++) z[i] = x[i] + y[i];
}
static void g_sub(int64_t n, float *z, const float *x, const float *y) {
    for (int64_t i = 0; i < n; i++) z[i] = x[i] - y[i];
}
static void g_mul(int64_t n, float *z, const float *x, const float *y) {
    for (int64_t i = 0; i < n; i++) z[i] = x[i] * y[i];
}
static void g_div(int64_t n, float *z, const float *x, const float *y) {
    for (int64_t i = 0; i < n; i++) z[i] = x[i] / y[i];
}


/* 8 x 8 blocks, so that both the reads and the writes stay within a few cache lines at a time */
static void g_transpose32(int64_t rows, int64_t cols, const uint32_t *src, int64_t lds, uint32_t *dst, int64_t ldd) {
    for (int64_t i0 = 0; i0 < rows; i0 += 8)
        for (int64_t j0 = 0; j0 < cols; j0 += 8) {
            int64_t i1 = i0 + 8 < rows ? i0 + 8 : rows, j1 = j0 + 8 < cols ? j0 + 8 : cols;
            for (int64_t j = j0; j < j1; j++)
                for (int64_t i = i0; i < i1; i++) dst[j * ldd + i] = src[i * lds + j];
        }
}

void wm_vmath_fill_generic(wm_kernels *k) {
    k->vexp = g_exp;
    k->vlog = g_log;
    k->vtanh = g_tanh;
    k->verf = g_erf;
    k->vsigmoid = g_sigmoid;
    k->vgelu_erf = g_gelu_erf;
    k->vgelu_tanh = g_gelu_tanh;
    k->vsilu = g_silu;
    k->vact = g_act;
    k->softmax_row = g_softmax;
    k->log_softmax_row = g_log_softmax;
    k->layernorm_row = g_layernorm;
    k->rmsnorm_row = g_rmsnorm;
    k->f16_to_f32 = g_h2f;
    k->f32_to_f16 = g_f2h;
    k->bf16_to_f32 = g_b2f;
    k->f32_to_bf16 = g_f2b;
    k->transpose32 = g_transpose32;
    k->dot = g_dot;
    k->axpy = g_axpy;
    k->scale = g_scale;
    k->add = g_add;
    k->sub = g_sub;
    k->mul = g_mul;
    k->div = g_div;
    k->reduce_sum = g_sum;
    k->reduce_max = g_max;
}
