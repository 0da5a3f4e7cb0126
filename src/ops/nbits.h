/*
 * nbits.h - block-quantized weights of com.microsoft MatMulNBits: unpacking,
 * dequantization and the product with float activations (qmatmul.c).
 *
 * B is uint8 (N, k_blocks, blob) with k_blocks = ceil(K / block) and blob =
 * block * bits / 8; codes are packed along K low bits first (4 bits: element
 * 2i in the low nibble of byte i). Weight (n, k) = (code - zero point) *
 * scale[n, k / block], the zero point from zp (packed like B, (N,
 * ceil(k_blocks * bits / 8)) bytes), or zp_f (float (N, k_blocks)), or
 * 2^(bits - 1).
 *
 * wm_nbits_matmul is the one entry point the op calls: it runs the
 * MatMulNBits kernels of src/kernels; wm_nbits_dequant is the plain
 * reference the unit tests compare with.
 */
#ifndef WM_OPS_NBITS_H
#define WM_OPS_NBITS_H

#include "kernels/kernels.h"
#include "ops/op.h"

typedef struct wm_nbits_w {
    int64_t N, K;
    int bits;            /* 2, 4 or 8 */
    int64_t block;       /* power of two >= 16 */
    int64_t k_blocks, blob;
    const uint8_t *b;
    const float *scales; /* (N, k_blocks) */
    const uint16_t *scales_h; /* the same as exact halves, or NULL (wm_nbits_args.scales_h) */
    const uint8_t *zp;   /* packed zero points, or NULL */
    const float *zp_f;   /* float zero points (N, k_blocks), or NULL */
    int has_zp;          /* the node has zero points (input 3), bound or not yet: sizing sees the run's path;
                            1: uint8 ones, 2: float ones */
    int accuracy;        /* accuracy_level: 4 lets decode quantize activations to int8 */
    const uint8_t *packed; /* b and the scales in the kernel table's nbits_pack layout, or NULL */
} wm_nbits_w;

/* Code of weight (n, k) (0 .. 2^bits - 1). */
static inline int wm_nbits_code(const wm_nbits_w *w, int64_t n, int64_t k) {
    int64_t kb = k / w->block, i = k % w->block, bit = i * w->bits;
    uint8_t byte = w->b[(n * w->k_blocks + kb) * w->blob + bit / 8];
    return (byte >> (bit % 8)) & ((1 << w->bits) - 1);
}

/* Zero point of block kb of row n. */
static inline float wm_nbits_zero(const wm_nbits_w *w, int64_t n, int64_t kb) {
    if (w->zp_f) return w->zp_f[n * w->k_blocks + kb];
    if (!w->zp) return (float)(1 << (w->bits - 1));
    int64_t row = (w->k_blocks * w->bits + 7) / 8, bit = kb * w->bits;
    return (float)((w->zp[n * row + bit / 8] >> (bit % 8)) & ((1 << w->bits) - 1));
}

/* Dequantizes rows [n0, n1) of B: dst[(n - n0) * K + k]. */
void wm_nbits_dequant(const wm_nbits_w *w, int64_t n0, int64_t n1, float *dst);

/* Scratch bytes of wm_nbits_matmul for M rows and nth threads. */
size_t wm_nbits_workspace(const wm_nbits_w *w, int64_t M, int nth);

/* 1 when the kernel table's MatMulNBits kernel for w reads its scales as halves (wm_nbits_args.scales_h): AVX2 /
 * AVX-512, int8 activations (accuracy_level 4), 4 bits in blocks >= 32 or 8 bits in blocks of a multiple of 32,
 * default zero point (the caller's to check). */
int wm_nbits_half_kernel(const wm_nbits_w *w);
/* h[i] = sc[i] as a half for i < n; 1 when every one is exactly equal (then the kernel may read h). */
int wm_nbits_exact_halves(const float *sc, uint64_t n, uint16_t *h);
/* Bytes of w (constant b, scales, scales_h) in the kernel table's nbits_pack layout; 0 when the table has none for
 * w, or WM_NBITS_PACK=0 keeps the stored layout. */
size_t wm_nbits_packed_size(const wm_nbits_w *w);
/* That layout of w in n's memory (the columns split over n's pool), in *out; NULL when wm_nbits_packed_size is 0. */
wm_status wm_nbits_prepack(wm_node *n, const wm_nbits_w *w, const uint8_t **out, wm_error *err);

/* C (M, N; ldc) = A (M, K; lda) dequant(B)^T (+ bias (N) when non-NULL), on x's pool; ws from wm_nbits_workspace. */
void wm_nbits_matmul(const wm_nbits_w *w, int64_t M, const float *A, int64_t lda, float *C, int64_t ldc,
                     const float *bias, wm_exec *x, void *ws);

#endif
