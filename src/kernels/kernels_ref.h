/*
 * kernels_ref.h - naive reference kernels: plain loops, double accumulation,
 * single-threaded, no workspace. They define what the fast kernels compute and
 * are what the unit tests compare the dispatch tables with. Slow on purpose.
 */
#ifndef WM_KERNELS_REF_H
#define WM_KERNELS_REF_H

#include "kernels/kernels.h"

/* Activation in double (the formulas listed at wm_act). */
double wm_ref_act(double v, wm_act act, float act_a, float act_b);
/* C = epilogue(C) on [M,N] in double then rounded (bias, bias_m, act, residual). */
void wm_ref_epilogue(const wm_epilogue *ep, int64_t M, int64_t N, float *C, int64_t ldc);

/* sgemm semantics from the plain A/B (packed_b and work are ignored). */
void wm_ref_sgemm(const wm_sgemm_args *a);
void wm_ref_hgemm(const wm_hgemm_args *a);

/* One MatMulNBits code / zero point (bits 2, 4, 8), and the whole dequantized
 * weight W[k][n] (K x N row-major, ld N) = (code - zp) * scale. */
int wm_ref_nbits_code(const wm_nbits_args *a, int64_t n, int64_t k);
float wm_ref_nbits_zero_point(const wm_nbits_args *a, int64_t n, int64_t blk);
void wm_ref_nbits_dequant(const wm_nbits_args *a, float *W);
/* fp32 semantics (any accuracy_level other than 4). */
void wm_ref_nbits(const wm_nbits_args *a);
/* accuracy_level 4 semantics: A quantized per block to int8 (amax/127, RNE), integer block dots. */
void wm_ref_nbits_q8(const wm_nbits_args *a);
/* The int8 quantization of one block of activations used by wm_ref_nbits_q8: returns the scale. */
float wm_ref_quant_block_q8(int64_t n, const float *x, int8_t *q);

/* the 15-bit activations of small-M MatMulNBits at accuracy_level 2 / 3 (wm_nbits_use_i15): A quantized per block
 * (block_size <= 1024) to integers in [-WM_NBITS_I15_MAX, WM_NBITS_I15_MAX] (amax / WM_NBITS_I15_MAX, RNE),
 * exact integer block dots. */
void wm_ref_nbits_i15(const wm_nbits_args *a);
float wm_ref_quant_block_i15(int64_t n, const float *x, int16_t *q);

/* MatMulInteger (exact int32 C) and the optional float output Cf. */
void wm_ref_igemm(const wm_igemm_args *a);

#endif
