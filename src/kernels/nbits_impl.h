/* nbits_impl.h - MatMulNBits pieces shared by nbits.c and nbits_avx2.c. */
#ifndef WM_KERNELS_NBITS_IMPL_H
#define WM_KERNELS_NBITS_IMPL_H

#include "kernels/kernels_impl.h"

#define WM_NBITS_BIG_M 8     /* from this many rows on: dequantize panels + SGEMM micro-kernel */
#define WM_NBITS_Q8_MAX_M 32 /* accuracy_level 4 keeps int8 activations below this many rows */

typedef void (*wm_bsrc_fn)(const wm_bsrc *s, int64_t k0, int64_t kc, int64_t n0, int64_t nc, float *dst,
                           int64_t pstride);

/* One share's small-M workspace. accuracy_level 4: quantized activations, row m block b at
 * q[m*kp + b*block_size] (AVX2: 4-bit codes' order, see nbits_avx2.c), scale / sum [m*kbs + b].
 * Otherwise: xf, a zero-padded copy of A (AVX2: same order), kp = k_blocks*block_size rounded to 64, and xs, the
 * sums of each block of A's rows [m*kbs + b] (filled by the AVX2 prep only: its fp32 column kernels' zero-point term).
 * 15-bit activations (wm_nbits_use_i15): scale / sum as for int8; generic: int16 values at ((int16_t *)q)[m*kp + k];
 * AVX2: 8-bit codes the same, 4-bit codes each value v = 128 hi + lo as two byte rows in the 4-bit order, hi (int8)
 * at q[2*m*kp], lo (0..127) at q[2*m*kp + kp] (see nbits_avx2.c). */
typedef struct wm_nbits_q8 {
    int64_t kb, kbs, kp; /* blocks, row stride of scale/sum/xs (kb rounded to 8, zero padded), of q/xf */
    int8_t *q;
    float *scale;
    int32_t *sum;
    float *xf;
    float *xs;
} wm_nbits_q8;

int64_t wm_nbits_kblocks(const wm_nbits_args *a);
float wm_nbits_zp(const wm_nbits_args *a, int64_t n, int64_t blk, int64_t kb);
void wm_nbits_dequant_run(const wm_nbits_args *a, int64_t n, int64_t blk, int64_t i0, int64_t len, float *w);
int wm_nbits_use_q8(const wm_nbits_args *a);
int wm_nbits_use_i15(const wm_nbits_args *a);
int wm_nbits_vnni_ok(const wm_nbits_args *a);
void wm_nbits_q8_layout(const wm_nbits_args *a, void *work, int ith, int nth, wm_nbits_q8 *q);
/* Share ith's columns [*n0, *n1) (whole units of WM_NR); 0: none, nothing to do. The preparation call of
 * shared_prep (ith < 0) has no columns and returns 1. */
int wm_nbits_share_cols(const wm_nbits_args *a, int ith, int nth, int64_t *n0, int64_t *n1);
/* Share ith's view of prepared A (slice 0 for every share with a->shared_prep); 1 when this call prepares it
 * (ith < 0, or a share without shared_prep), then a call with ith < 0 returns right after preparing. */
int wm_nbits_q8_view(const wm_nbits_args *a, int ith, int nth, wm_nbits_q8 *q);
/* The rows of A that this call prepares: [prep_m0, prep_m1) for a shared_prep call with a range, else all. */
static inline void wm_nbits_prep_rows(const wm_nbits_args *a, int ith, int64_t *m0, int64_t *m1) {
    int ranged = ith < 0 && a->prep_m1 > 0;
    *m0 = ranged ? a->prep_m0 : 0;
    *m1 = ranged ? (a->prep_m1 < a->M ? a->prep_m1 : a->M) : a->M;
}
/*
 * Packed block-32 layout (made once per weight at session creation by the table's nbits_pack: wm_nbits_pack_sg32,
 * portable C, for AVX2; the same loop with AVX-512 permutes for the full super-groups on AVX-512, the same bytes in
 * 6.3-6.5 instead of 8.6-8.9 ms for an 18944 x 3584 matrix on one thread, stop 24), for 4-bit codes with the default
 * zero point and int8 activations (wm_nbits_vnni_ok, block_size 32). A 64-byte header holds the scale size es (2:
 * halves, when scales_h is given; 4: floats). Columns go in quads (N padded to 4 with zero codes and scales); quad c
 * starts at WM_NBITS_PK_HEAD + c * wm_nbits_pk_qstride(kb, es). In it super-group g (nb = min(16, kb - 16 g) blocks)
 * starts at g * 16 * (64 + 4 es): column j's vector t (dword t, i.e. elements 8t .. 8t + 7, of each of the nb
 * blocks, block l at + 4 l) at (4 j + t) * 4 nb, then the nb scales of column j at 64 nb + j * es * nb. A kernel
 * reads lane l = block l of a super-group with no shuffles (the AVX-512 kernel 16 lanes, the AVX2 one two halves of
 * 8), against activations quantized in the matching order (per super-group of 512: vector t's even elements, then
 * its odd ones, each 16 blocks x 4 bytes).
 */
#define WM_NBITS_PK_HEAD 64
static inline int64_t wm_nbits_pk_qstride(int64_t kb, int64_t es) { return WM_ALIGN_UP(kb * (64 + 4 * es), 64); }
size_t wm_nbits_pack_size_sg32(const wm_nbits_args *a);
void wm_nbits_pack_sg32(const wm_nbits_args *a, uint8_t *dst, int ith, int nth);
/* one column's full super-group: the 16 blocks' 256 code bytes at col to the 4 vectors t (64 bytes each) at out */
typedef void (*wm_nbits_sg_tr)(const uint8_t *col, uint8_t *out);
void wm_nbits_pack_sg32_tr(const wm_nbits_args *a, uint8_t *dst, int ith, int nth, wm_nbits_sg_tr tr);
void wm_nbits_quant_rows_generic(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t m0, int64_t m1);
void wm_nbits_quant_rows_i15_generic(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t m0, int64_t m1);
/* prepares rows [m0, m1) of A into q (quantized, or copied) */
typedef void (*wm_nbits_prep_fn)(const wm_nbits_args *a, const wm_nbits_q8 *q, int64_t m0, int64_t m1);
/* The start of every small-M kernel: share ith's columns [*n0, *n1) and its view *q of A, which prep fills where
 * this call prepares it (wm_nbits_q8_view, the rows of wm_nbits_prep_rows). 1: go on and compute the columns; 0:
 * nothing left (a share without columns, or the preparation call ith < 0). */
int wm_nbits_begin(const wm_nbits_args *a, int ith, int nth, wm_nbits_prep_fn prep, wm_nbits_q8 *q, int64_t *n0,
                   int64_t *n1);
/* AVX2 on the packed block-32 layout (nbits_pk_avx2.c): a->packed set, int8 activations at every M */
void wm_nbits_packed_avx2(const wm_nbits_args *a, int ith, int nth);
void wm_nbits_bsrc_pack(const wm_bsrc *s, int64_t k0, int64_t kc, int64_t n0, int64_t nc, float *dst,
                        int64_t pstride);
void wm_nbits_big(const wm_gemm_ukr *u, const wm_nbits_args *a, wm_bsrc_fn pack, int ith, int nth);

#endif
