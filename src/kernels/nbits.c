/*
 * nbits.c - MatMulNBits (block-quantized 2/4/8-bit weights), generic C, and
 * the pieces the AVX2 version shares: workspace layout, zero points, the
 * dequantizing B packer for the large-M path (SGEMM micro-kernel) and the
 * int8 quantization of activations (accuracy_level 4).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "kernels/nbits_impl.h"

int64_t wm_nbits_kblocks(const wm_nbits_args *a) { return (a->K + a->block_size - 1) / a->block_size; }

float wm_nbits_zp(const wm_nbits_args *a, int64_t n, int64_t blk, int64_t kb) {
    if (a->zero_points) {
        int64_t row = (kb * a->bits + 7) / 8, bit = blk * a->bits;
        return (float)((a->zero_points[n * row + bit / 8] >> (bit % 8)) & ((1 << a->bits) - 1));
    }
    if (a->zero_points_f) return a->zero_points_f[n * kb + blk];
    return (float)(1 << (a->bits - 1));
}

/* Codes [i0, i0+len) of block blk of column n as floats minus zp, times scale. */
void wm_nbits_dequant_run(const wm_nbits_args *a, int64_t n, int64_t blk, int64_t i0, int64_t len, float *w) {
    int64_t kb = wm_nbits_kblocks(a), blob = (int64_t)a->block_size * a->bits / 8;
    const uint8_t *p = a->B + (n * kb + blk) * blob;
    float zp = wm_nbits_zp(a, n, blk, kb), sc = a->scales[n * kb + blk];
    int bits = a->bits, mask = (1 << bits) - 1;
    for (int64_t i = 0; i < len; i++) {
        int64_t bit = (i0 + i) * bits;
        w[i] = ((float)((p[bit >> 3] >> (bit & 7)) & mask) - zp) * sc;
    }
}

/* accuracy_level 4 (int8 activations) below WM_NBITS_Q8_MAX_M rows; from there on the float32 panels + SGEMM
 * are faster (accuracy_level is a minimum: float32 activations meet it). Float zero points too: a block's
 * sum_k s (q_k - zp) x_k is s sa (dot - zp sum(xq)), the integer dot plus a per-block bias times the block's
 * activation sum (llama.cpp's Q4_1 x Q8_1 arithmetic); onnxruntime keeps float32 activations for them (its int8
 * path takes uint8 zero points only), so the two differ there by the activations' rounding. */
int wm_nbits_use_q8(const wm_nbits_args *a) { return a->accuracy_level == 4 && a->M < WM_NBITS_Q8_MAX_M; }

/* the tables' nbits_q8: the generic and AVX2 kernels; the AVX-512 one (int8 at every M where it applies) */
int wm_nbits_q8_default(const wm_nbits_args *a) { return wm_nbits_use_q8(a); }
int wm_nbits_q8_avx512(const wm_nbits_args *a) { return wm_nbits_vnni_ok(a) || wm_nbits_use_q8(a); }
/* the AVX2 table: int8 at every M for the packed block-32 layout's weights (their packed and plain kernels must agree) */
int wm_nbits_q8_avx2(const wm_nbits_args *a) { return (wm_nbits_vnni_ok(a) && a->block_size == 32) || wm_nbits_use_q8(a); }

/* 15-bit activations (kernels.h) below WM_NBITS_BIG_M rows at accuracy_level 2 or 3 (onnxruntime's: float16 /
 * bfloat16 compute allowed; 15 bits per block are finer than either's 11 / 8-bit significands, and level 0 / 1 stay
 * float32): 4-bit codes in blocks of 32..256 (the AVX2 kernel's split of each value into a signed high and an
 * unsigned low byte for vpmaddubsw needs whole 32-groups), 8-bit codes in blocks of 16..256 (int16 values,
 * vpmaddwd); exact int32 block dots up to 256 x 255 x 16383. WM_NBITS_I15=0 keeps float32 activations there too. */
int wm_nbits_use_i15(const wm_nbits_args *a) {
    static int off = -1;
    if (off < 0) {
        const char *env = getenv("WM_NBITS_I15");
        off = env && !strcmp(env, "0");
    }
    return !off && (a->accuracy_level == 2 || a->accuracy_level == 3) && a->M < WM_NBITS_BIG_M && a->block_size <= 256 &&
           ((a->bits == 4 && a->block_size % 32 == 0) || (a->bits == 8 && a->block_size % 16 == 0));
}

/* AVX-512 VNNI kernel (nbits_avx512.c): 4 bits, default zero point, int8 activations, block >= 32 */
int wm_nbits_vnni_ok(const wm_nbits_args *a) {
    return a->bits == 4 && a->accuracy_level == 4 && !a->zero_points && !a->zero_points_f && !a->has_zero_points &&
           a->block_size >= 32 &&
           !(a->block_size & (a->block_size - 1));
}

/* per-share q8 layout sizes: q rows padded to 512 (the VNNI kernels' 128-groups and 16-block super-groups of
 * 32-element blocks), scale/sum rows padded so that 16 values can be read from any multiple of 16 blocks */
static void q8_dims(const wm_nbits_args *a, int64_t *kb, int64_t *kp, int64_t *kbs) {
    *kb = wm_nbits_kblocks(a);
    *kp = WM_ALIGN_UP(*kb * a->block_size, 512);
    *kbs = WM_ALIGN_UP(*kb, 16) + 16;
}

size_t wm_nbits_workspace_size(const wm_nbits_args *a, int nth) {
    if (nth < 1) nth = 1;
    size_t big = 0;
    if (a->M >= WM_NBITS_BIG_M && !wm_nbits_use_q8(a)) {
        wm_sgemm_args s = {0};
        s.M = a->M;
        s.N = a->N;
        s.K = a->K;
        big = wm_sgemm_workspace_size(&s, nth);
        if (!wm_nbits_vnni_ok(a)) return big; /* only the VNNI kernel quantizes A at this size */
    }
    /* per share: int8 path: codes [M][kp] + scales + sums; fp32 path: a copy of A [M][kp] + its block sums [M][kbs] */
    int64_t kb, kp, kbs;
    q8_dims(a, &kb, &kp, &kbs);
    size_t m = (size_t)(a->M > 0 ? a->M : 0);
    size_t per = m * ((size_t)kp + (size_t)kbs) * sizeof(float);
    size_t i15 = m * (2 * (size_t)kp + (size_t)kbs * (sizeof(float) + sizeof(int32_t))); /* wm_nbits_use_i15's */
    per = i15 > per ? i15 : per;
    if (a->accuracy_level == 4) { /* wm_nbits_use_q8's */
        size_t q8 = m * ((size_t)kp + (size_t)kbs * (sizeof(float) + sizeof(int32_t)));
        per = q8 > per ? q8 : per;
    }
    size_t small = (WM_ALIGN_UP(per, 64) + 128) * (size_t)nth;
    return small > big ? small : big;
}

/* ------------------------------------------------------------ packed block-32 layout (nbits_impl.h) */

size_t wm_nbits_pack_size_sg32(const wm_nbits_args *a) {
    if (!wm_nbits_vnni_ok(a) || a->block_size != 32 || a->N <= 0 || a->K <= 0) return 0;
    return (size_t)(WM_NBITS_PK_HEAD + ((a->N + 3) / 4) * wm_nbits_pk_qstride(wm_nbits_kblocks(a), a->scales_h ? 2 : 4));
}

/* a whole super-group of one column: dword t of block l to out + 64 t + 4 l */
static void sg_transpose_c(const uint8_t *col, uint8_t *out) {
    for (int t = 0; t < 4; t++)
        for (int l = 0; l < 16; l++) memcpy(out + 64 * t + 4 * l, col + 16 * l + 4 * t, 4);
}

void wm_nbits_pack_sg32(const wm_nbits_args *a, uint8_t *dst, int ith, int nth) {
    wm_nbits_pack_sg32_tr(a, dst, ith, nth, sg_transpose_c);
}

/* Share ith of nth of the layout: whole column quads, the header by share 0; tr transposes full super-groups. */
void wm_nbits_pack_sg32_tr(const wm_nbits_args *a, uint8_t *dst, int ith, int nth, wm_nbits_sg_tr tr) {
    const int64_t kb = wm_nbits_kblocks(a), es = a->scales_h ? 2 : 4, qs = wm_nbits_pk_qstride(kb, es);
    if (ith == 0) {
        memset(dst, 0, WM_NBITS_PK_HEAD);
        dst[0] = (uint8_t)es;
    }
    dst += WM_NBITS_PK_HEAD;
    int64_t c0, c1;
    wm_split_units((a->N + 3) / 4, 1, ith, nth, &c0, &c1);
    for (int64_t c = c0; c < c1; c++) {
        memset(dst + c * qs, 0, (size_t)qs); /* padding columns and the tail past the last super-group */
        for (int64_t b0 = 0; b0 < kb; b0 += 16) {
            int64_t nb = kb - b0 < 16 ? kb - b0 : 16;
            uint8_t *p = dst + c * qs + b0 * (64 + 4 * es);
            for (int64_t j = 0; j < 4 && 4 * c + j < a->N; j++) {
                int64_t n = 4 * c + j;
                const uint8_t *col = a->B + (n * kb + b0) * 16;
                if (nb == 16) {
                    tr(col, p + 4 * j * 64);
                } else {
                    for (int64_t t = 0; t < 4; t++)
                        for (int64_t l = 0; l < nb; l++) memcpy(p + (4 * j + t) * 4 * nb + 4 * l, col + 16 * l + 4 * t, 4);
                }
                uint8_t *sp = p + 64 * nb + j * es * nb;
                if (es == 2) memcpy(sp, a->scales_h + n * kb + b0, (size_t)nb * 2);
                else memcpy(sp, a->scales + n * kb + b0, (size_t)nb * 4);
            }
        }
    }
}

/* Slices of one share's small-M workspace (see wm_nbits_workspace_size); row m at q[m*kp], xf[m*kp]. */
void wm_nbits_q8_layout(const wm_nbits_args *a, void *work, int ith, int nth, wm_nbits_q8 *q) {
    int64_t kb, kp, kbs;
    q8_dims(a, &kb, &kp, &kbs);
    char *w = wm_work_slice(work, wm_nbits_workspace_size(a, nth) / (size_t)nth, ith);
    q->kb = kb;
    q->kbs = kbs;
    q->kp = kp;
    q->scale = (float *)w;
    q->sum = (int32_t *)(w + (size_t)a->M * kbs * sizeof(float));
    q->q = (int8_t *)(w + (size_t)a->M * kbs * (sizeof(float) + sizeof(int32_t)));
    q->xf = (float *)w;
    q->xs = (float *)(w + (size_t)a->M * kp * sizeof(float));
}

int wm_nbits_share_cols(const wm_nbits_args *a, int ith, int nth, int64_t *n0, int64_t *n1) {
    *n0 = *n1 = 0;
    if (ith < 0) return 1;
    wm_split_units(a->N, WM_NR, ith, nth, n0, n1);
    return *n0 < *n1;
}

int wm_nbits_q8_view(const wm_nbits_args *a, int ith, int nth, wm_nbits_q8 *q) {
    int one = a->shared_prep || ith < 0; /* the one shared slice: share 0's of a single-share workspace */
    wm_nbits_q8_layout(a, a->work, one ? 0 : ith, one ? 1 : nth, q);
    return ith < 0 || !a->shared_prep;
}

int wm_nbits_begin(const wm_nbits_args *a, int ith, int nth, wm_nbits_prep_fn prep, wm_nbits_q8 *q, int64_t *n0,
                   int64_t *n1) {
    if (!wm_nbits_share_cols(a, ith, nth, n0, n1)) return 0;
    if (wm_nbits_q8_view(a, ith, nth, q)) {
        int64_t m0, m1;
        wm_nbits_prep_rows(a, ith, &m0, &m1);
        prep(a, q, m0, m1);
    }
    return ith >= 0;
}

/* Generic: quantize row m of A (see wm_ref_quant_block_q8); the tail of the last block is zero. */
void wm_nbits_quant_rows_generic(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; m++)
        for (int64_t b = 0; b < q->kb; b++) {
            int64_t k0 = b * a->block_size, len = a->K - k0 < a->block_size ? a->K - k0 : a->block_size;
            const float *x = a->A + m * a->lda + k0;
            int8_t *d = q->q + m * q->kp + k0;
            float amax = 0;
            for (int64_t i = 0; i < len; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
            float inv = amax > 0 ? 127.0f / amax : 0.0f;
            int32_t s = 0;
            for (int64_t i = 0; i < len; i++) {
                float r = nearbyintf(x[i] * inv);
                d[i] = (int8_t)(r > 127 ? 127 : r < -127 ? -127 : r);
                s += d[i];
            }
            for (int64_t i = len; i < a->block_size; i++) d[i] = 0;
            q->scale[m * q->kbs + b] = amax / 127.0f;
            q->sum[m * q->kbs + b] = s;
        }
}

/* Generic 15-bit activations (wm_ref_quant_block_i15): row m at ((int16_t *)q->q)[m*kp], K order, zero tail. */
void wm_nbits_quant_rows_i15_generic(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; m++) {
        int16_t *d = (int16_t *)q->q + m * q->kp;
        for (int64_t b = 0; b < q->kb; b++) {
            int64_t k0 = b * a->block_size, len = a->K - k0 < a->block_size ? a->K - k0 : a->block_size;
            const float *x = a->A + m * a->lda + k0;
            float amax = 0;
            for (int64_t i = 0; i < len; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
            float inv = amax > 0 ? (float)WM_NBITS_I15_MAX / amax : 0.0f;
            int32_t s = 0;
            for (int64_t i = 0; i < len; i++) {
                float r = nearbyintf(x[i] * inv);
                d[k0 + i] = (int16_t)(r > WM_NBITS_I15_MAX ? WM_NBITS_I15_MAX : r < -WM_NBITS_I15_MAX ? -WM_NBITS_I15_MAX : r);
                s += d[k0 + i];
            }
            for (int64_t i = len; i < a->block_size; i++) d[k0 + i] = 0;
            q->scale[m * q->kbs + b] = amax / (float)WM_NBITS_I15_MAX;
            q->sum[m * q->kbs + b] = s;
        }
    }
}

/* wm_bsrc packer: dequantizes op(B)[k0:k0+kc, n0:n0+nc] (B is stored [N][K]) into panels. */
void wm_nbits_bsrc_pack(const wm_bsrc *s, int64_t k0, int64_t kc, int64_t n0, int64_t nc, float *dst, int64_t pstride) {
    const wm_nbits_args *a = s->ctx;
    float w[256];
    for (int64_t p = 0; p * WM_NR < nc; p++) {
        float *d = dst + p * pstride;
        int64_t nv = nc - p * WM_NR < WM_NR ? nc - p * WM_NR : WM_NR;
        if (nv < WM_NR) memset(d, 0, (size_t)kc * WM_NR * sizeof(float));
        for (int64_t j = 0; j < nv; j++) {
            int64_t n = n0 + p * WM_NR + j;
            for (int64_t k = k0; k < k0 + kc;) {
                int64_t blk = k / a->block_size, i0 = k % a->block_size;
                int64_t len = a->block_size - i0;
                if (len > k0 + kc - k) len = k0 + kc - k;
                if (len > 256) len = 256;
                wm_nbits_dequant_run(a, n, blk, i0, len, w);
                for (int64_t i = 0; i < len; i++) d[(k - k0 + i) * WM_NR + j] = w[i];
                k += len;
            }
        }
    }
}

void wm_nbits_big(const wm_gemm_ukr *u, const wm_nbits_args *a, wm_bsrc_fn pack, int ith, int nth) {
    wm_sgemm_args s = {0};
    s.M = a->M;
    s.N = a->N;
    s.K = a->K;
    s.alpha = 1.0f;
    s.A = a->A;
    s.lda = a->lda;
    s.C = a->C;
    s.ldc = a->ldc;
    s.ep = a->ep;
    s.work = a->work;
    wm_bsrc src = {pack, a->B, 0, 1, a};
    wm_gemm_drive(u, &s, &src, ith, nth);
}

void wm_nbits_generic(const wm_nbits_args *a, int ith, int nth) {
    if (a->M <= 0 || a->N <= 0) return;
    if (a->M >= WM_NBITS_BIG_M && !wm_nbits_use_q8(a)) {
        wm_nbits_big(&wm_gemm_ukr_generic, a, wm_nbits_bsrc_pack, ith, nth);
        return;
    }
    int64_t n0, n1;
    int64_t kb = wm_nbits_kblocks(a);
    int i15 = wm_nbits_use_i15(a);
    if (wm_nbits_use_q8(a) || i15) { /* integer activations (int8, or 15-bit as int16): integer block dots */
        wm_nbits_q8 q;
        if (!wm_nbits_begin(a, ith, nth, i15 ? wm_nbits_quant_rows_i15_generic : wm_nbits_quant_rows_generic, &q, &n0, &n1))
            return;
        int64_t blob = (int64_t)a->block_size * a->bits / 8;
        int bits = a->bits, mask = (1 << bits) - 1;
        for (int64_t n = n0; n < n1; n++)
            for (int64_t m = 0; m < a->M; m++) {
                float acc = 0;
                for (int64_t b = 0; b < kb; b++) {
                    const uint8_t *p = a->B + (n * kb + b) * blob;
                    float zp = wm_nbits_zp(a, n, b, kb), sw = a->scales[n * kb + b];
                    const int8_t *x = q.q + m * q.kp + b * a->block_size;
                    const int16_t *x16 = (const int16_t *)q.q + m * q.kp + b * a->block_size;
                    int32_t dot = 0, qs = q.sum[m * q.kbs + b];
                    for (int64_t i = 0; i < a->block_size; i++) {
                        int64_t bit = i * bits;
                        dot += (i15 ? x16[i] : x[i]) * ((p[bit >> 3] >> (bit & 7)) & mask);
                    }
                    /* 15 bits, integer zero points: dot - zp sum(q) exact in int32 (|.| < 256 x 255 x 16383) */
                    float t = !i15 || (a->zero_points_f && !a->zero_points) ? (float)dot - zp * (float)qs
                                                                           : (float)(dot - (int32_t)zp * qs);
                    acc += q.scale[m * q.kbs + b] * sw * t;
                }
                a->C[m * a->ldc + n] = acc;
            }
    } else {
        float w[256];
        if (!wm_nbits_share_cols(a, ith, nth, &n0, &n1) || ith < 0) return; /* A read in place: no preparation */
        for (int64_t n = n0; n < n1; n++) {
            float acc[WM_NBITS_BIG_M] = {0};
            for (int64_t k = 0; k < a->K;) {
                int64_t blk = k / a->block_size, i0 = k % a->block_size;
                int64_t len = a->block_size - i0;
                if (len > a->K - k) len = a->K - k;
                if (len > 256) len = 256;
                wm_nbits_dequant_run(a, n, blk, i0, len, w);
                for (int64_t m = 0; m < a->M; m++) {
                    const float *x = a->A + m * a->lda + k;
                    float s = 0;
                    for (int64_t i = 0; i < len; i++) s += x[i] * w[i];
                    acc[m] += s;
                }
                k += len;
            }
            for (int64_t m = 0; m < a->M; m++) a->C[m * a->ldc + n] = acc[m];
        }
    }
    wm_epilogue_apply(&a->ep, &wm_gemm_ukr_generic, a->C, a->ldc, 0, a->M, n0, n1);
}
