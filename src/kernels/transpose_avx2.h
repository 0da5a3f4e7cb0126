/*
 * transpose_avx2.h - the 8 x 8 float transpose in registers that the AVX2
 * stores and packers share (the conv stores of src/ops/cnn_avx2.c, the
 * SGEMM A packer of gemm_avx2.c). Include only from files built with AVX2.
 */
#ifndef WM_KERNELS_TRANSPOSE_AVX2_H
#define WM_KERNELS_TRANSPOSE_AVX2_H

#include <immintrin.h>
#include <stdint.h>

/* Row i of the 8 x 8 block at r[i] (8 floats each); o[j] gets column j (element i from row i). */
static inline void wm_tr8x8_avx2(const float *const r[8], __m256 o[8]) {
    __m256 r0 = _mm256_loadu_ps(r[0]), r1 = _mm256_loadu_ps(r[1]), r2 = _mm256_loadu_ps(r[2]);
    __m256 r3 = _mm256_loadu_ps(r[3]), r4 = _mm256_loadu_ps(r[4]), r5 = _mm256_loadu_ps(r[5]);
    __m256 r6 = _mm256_loadu_ps(r[6]), r7 = _mm256_loadu_ps(r[7]);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3);
    __m256 t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE), u2 = _mm256_shuffle_ps(t1, t3, 0x44);
    __m256 u3 = _mm256_shuffle_ps(t1, t3, 0xEE), u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    o[0] = _mm256_permute2f128_ps(u0, u4, 0x20), o[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    o[2] = _mm256_permute2f128_ps(u2, u6, 0x20), o[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    o[4] = _mm256_permute2f128_ps(u0, u4, 0x31), o[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    o[6] = _mm256_permute2f128_ps(u2, u6, 0x31), o[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* The rows of an 8 x 8 block of a matrix: s, s + ld, ... */
static inline void wm_tr8x8_rows(const float *s, int64_t ld, const float *r[8]) {
    for (int i = 0; i < 8; i++) r[i] = s + i * ld;
}

#endif
