/*
 * kernels_ref.c - the naive references of kernels_ref.h: straight loops,
 * double accumulators, nothing clever. They define the semantics.
 */
#include "kernels/kernels_ref.h"

#include <math.h>
#include <string.h>

#include "kernels/kernels_impl.h"

double wm_ref_act(double v, wm_act act, float act_a, float act_b) {
    switch (act) {
    case WM_ACT_RELU: return v > 0 ? v : 0;
    case WM_ACT_GELU_ERF: return 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
    case WM_ACT_GELU_TANH: return 0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    case WM_ACT_SILU: return v / (1.0 + exp(-v));
    case WM_ACT_SIGMOID: return 1.0 / (1.0 + exp(-v));
    case WM_ACT_TANH: return tanh(v);
    case WM_ACT_CLIP: return v < act_a ? act_a : v > act_b ? act_b : v;
    case WM_ACT_LEAKY_RELU: return v >= 0 ? v : act_a * v;
    case WM_ACT_QUICK_GELU: return v / (1.0 + exp(-(double)act_a * v));
    default: return v;
    }
}

void wm_ref_epilogue(const wm_epilogue *ep, int64_t M, int64_t N, float *C, int64_t ldc) {
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double v = C[m * ldc + n];
            if (ep->bias) v += ep->bias[n];
            if (ep->bias_m) v += ep->bias_m[m];
            if (ep->residual && ep->residual_first) v += ep->residual[m * ep->ld_residual + n];
            v = wm_ref_act(v, ep->act, ep->act_a, ep->act_b);
            if (ep->residual && !ep->residual_first) v += ep->residual[m * ep->ld_residual + n];
            C[m * ldc + n] = (float)v;
        }
}

void wm_ref_sgemm(const wm_sgemm_args *a) {
    for (int64_t m = 0; m < a->M; m++)
        for (int64_t n = 0; n < a->N; n++) {
            double s = 0;
            for (int64_t k = 0; k < a->K; k++) {
                double x = a->ind       ? a->ind[(k / a->seg) * a->ldi + m][k % a->seg]
                           : a->trans_a ? a->A[k * a->lda + m]
                                        : a->A[m * a->lda + k];
                double y = a->trans_b ? a->B[n * a->ldb + k] : a->B[k * a->ldb + n];
                s += x * y;
            }
            float *c = &a->C[m * a->ldc + n];
            *c = (float)(a->alpha * s + (a->beta != 0.0f ? (double)a->beta * *c : 0.0));
        }
    wm_ref_epilogue(&a->ep, a->M, a->N, a->C, a->ldc);
}

void wm_ref_hgemm(const wm_hgemm_args *a) {
    for (int64_t m = 0; m < a->M; m++)
        for (int64_t n = 0; n < a->N; n++) {
            double s = 0;
            for (int64_t k = 0; k < a->K; k++)
                s += (double)a->A[m * a->lda + k] *
                     wm_half_to_float(a->trans_b ? a->B[n * a->ldb + k] : a->B[k * a->ldb + n]);
            a->C[m * a->ldc + n] = (float)s;
        }
    wm_ref_epilogue(&a->ep, a->M, a->N, a->C, a->ldc);
}

static int64_t nbits_blocks(const wm_nbits_args *a) { return (a->K + a->block_size - 1) / a->block_size; }

int wm_ref_nbits_code(const wm_nbits_args *a, int64_t n, int64_t k) {
    int64_t kb = nbits_blocks(a), blob = (int64_t)a->block_size * a->bits / 8;
    int64_t blk = k / a->block_size, i = k % a->block_size;
    const uint8_t *p = a->B + (n * kb + blk) * blob;
    int64_t bit = i * a->bits; /* low bits first; 2/4/8-bit codes never straddle a byte */
    return (p[bit / 8] >> (bit % 8)) & ((1 << a->bits) - 1);
}

float wm_ref_nbits_zero_point(const wm_nbits_args *a, int64_t n, int64_t blk) {
    int64_t kb = nbits_blocks(a);
    if (a->zero_points) {
        int64_t row = (kb * a->bits + 7) / 8, bit = blk * a->bits;
        return (float)((a->zero_points[n * row + bit / 8] >> (bit % 8)) & ((1 << a->bits) - 1));
    }
    if (a->zero_points_f) return a->zero_points_f[n * kb + blk];
    return (float)(1 << (a->bits - 1));
}

void wm_ref_nbits_dequant(const wm_nbits_args *a, float *W) {
    int64_t kb = nbits_blocks(a);
    for (int64_t n = 0; n < a->N; n++)
        for (int64_t k = 0; k < a->K; k++) {
            int64_t blk = k / a->block_size;
            W[k * a->N + n] =
                ((float)wm_ref_nbits_code(a, n, k) - wm_ref_nbits_zero_point(a, n, blk)) * a->scales[n * kb + blk];
        }
}

void wm_ref_nbits(const wm_nbits_args *a) {
    int64_t kb = nbits_blocks(a);
    for (int64_t m = 0; m < a->M; m++)
        for (int64_t n = 0; n < a->N; n++) {
            double s = 0;
            for (int64_t k = 0; k < a->K; k++) {
                int64_t blk = k / a->block_size;
                float w = ((float)wm_ref_nbits_code(a, n, k) - wm_ref_nbits_zero_point(a, n, blk)) *
                          a->scales[n * kb + blk];
                s += (double)a->A[m * a->lda + k] * w;
            }
            a->C[m * a->ldc + n] = (float)s;
        }
    wm_ref_epilogue(&a->ep, a->M, a->N, a->C, a->ldc);
}

float wm_ref_quant_block_q8(int64_t n, const float *x, int8_t *q) {
    float amax = 0;
    for (int64_t i = 0; i < n; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    float inv = amax > 0 ? 127.0f / amax : 0.0f;
    for (int64_t i = 0; i < n; i++) {
        float r = nearbyintf(x[i] * inv);
        q[i] = (int8_t)(r > 127 ? 127 : r < -127 ? -127 : r);
    }
    return amax / 127.0f;
}

void wm_ref_nbits_q8(const wm_nbits_args *a) {
    int64_t kb = nbits_blocks(a);
    for (int64_t m = 0; m < a->M; m++)
        for (int64_t n = 0; n < a->N; n++) {
            double s = 0;
            for (int64_t b = 0; b < kb; b++) {
                int64_t k0 = b * a->block_size, len = a->K - k0 < a->block_size ? a->K - k0 : a->block_size;
                const float *x = a->A + m * a->lda + k0;
                float amax = 0;
                for (int64_t i = 0; i < len; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
                float inv = amax > 0 ? 127.0f / amax : 0.0f;
                int64_t dot = 0, qsum = 0;
                for (int64_t i = 0; i < len; i++) {
                    float r = nearbyintf(x[i] * inv);
                    int64_t q = r > 127 ? 127 : r < -127 ? -127 : (int64_t)r;
                    dot += q * wm_ref_nbits_code(a, n, k0 + i);
                    qsum += q;
                }
                double zp = wm_ref_nbits_zero_point(a, n, b);
                s += (double)(amax / 127.0f) * a->scales[n * kb + b] * ((double)dot - zp * (double)qsum);
            }
            a->C[m * a->ldc + n] = (float)s;
        }
    wm_ref_epilogue(&a->ep, a->M, a->N, a->C, a->ldc);
}

float wm_ref_quant_block_i15(int64_t n, const float *x, int16_t *q) {
    float amax = 0;
    for (int64_t i = 0; i < n; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    float inv = amax > 0 ? (float)WM_NBITS_I15_MAX / amax : 0.0f;
    for (int64_t i = 0; i < n; i++) {
        float r = nearbyintf(x[i] * inv);
        q[i] = (int16_t)(r > WM_NBITS_I15_MAX ? WM_NBITS_I15_MAX : r < -WM_NBITS_I15_MAX ? -WM_NBITS_I15_MAX : r);
    }
    return amax / (float)WM_NBITS_I15_MAX;
}

void wm_ref_nbits_i15(const wm_nbits_args *a) {
    int64_t kb = nbits_blocks(a);
    int16_t q[1024];
    for (int64_t m = 0; m < a->M; m++)
        for (int64_t n = 0; n < a->N; n++) {
            double s = 0;
            for (int64_t b = 0; b < kb; b++) {
                int64_t k0 = b * a->block_size, len = a->K - k0 < a->block_size ? a->K - k0 : a->block_size;
                float sa = wm_ref_quant_block_i15(len, a->A + m * a->lda + k0, q);
                int64_t dot = 0, qsum = 0;
                for (int64_t i = 0; i < len; i++) {
                    dot += q[i] * wm_ref_nbits_code(a, n, k0 + i);
                    qsum += q[i];
                }
                double zp = wm_ref_nbits_zero_point(a, n, b);
                s += (double)sa * a->scales[n * kb + b] * ((double)dot - zp * (double)qsum);
            }
            a->C[m * a->ldc + n] = (float)s;
        }
    wm_ref_epilogue(&a->ep, a->M, a->N, a->C, a->ldc);
}

void wm_ref_igemm(const wm_igemm_args *a) {
    const uint8_t *au = a->A, *bu = a->B;
    const int8_t *as = a->A, *bs = a->B;
    for (int64_t m = 0; m < a->M; m++)
        for (int64_t n = 0; n < a->N; n++) {
            int64_t za = a->a_zero_points ? a->a_zero_points[m] : a->a_zero_point;
            int64_t zb = a->b_zero_points ? a->b_zero_points[n] : a->b_zero_point;
            int64_t s = 0;
            for (int64_t k = 0; k < a->K; k++) {
                int64_t x = a->a_signed ? as[m * a->lda + k] : au[m * a->lda + k];
                int64_t y = a->b_signed ? bs[k * a->ldb + n] : bu[k * a->ldb + n];
                s += (x - za) * (y - zb);
            }
            if (a->C) a->C[m * a->ldc + n] = (int32_t)s;
            if (a->Cf)
                a->Cf[m * a->ldcf + n] =
                    (float)((double)a->a_scale * a->b_scale[a->b_scale_count == 1 ? 0 : n] * (double)s);
        }
    if (a->Cf) wm_ref_epilogue(&a->ep, a->M, a->N, a->Cf, a->ldcf);
}
