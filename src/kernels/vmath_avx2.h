/*
 * vmath_avx2.h - vmath_simd.h at 8 lanes (AVX2/FMA): the macros it is written
 * over, then its functions (v_exp, v_exp_nonpos, v_tanh, ...), for every AVX2
 * kernel file that needs them (vmath_avx2.c, attn_rows_avx2.c): one exp.
 */
#ifndef WM_KERNELS_VMATH_AVX2_H
#define WM_KERNELS_VMATH_AVX2_H

#include <immintrin.h>

/* the vector of vmath_simd.h: 8 lanes, comparison masks as vectors */
#define VF __m256
#define VM __m256
#define V(x) _mm256_set1_ps(x)
#define VADD _mm256_add_ps
#define VSUB _mm256_sub_ps
#define VMUL _mm256_mul_ps
#define VDIV _mm256_div_ps
#define VMIN _mm256_min_ps
#define VMAX _mm256_max_ps
#define VFMA _mm256_fmadd_ps
#define VFNMA _mm256_fnmadd_ps
#define VFMS _mm256_fmsub_ps
#define VRND(x) _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define VCMP _mm256_cmp_ps
#define VSEL(a, b, m) _mm256_blendv_ps(a, b, m)
#define VZERO(m, x) _mm256_andnot_ps(m, x)
#define VABS(x) _mm256_andnot_ps(V(-0.0f), x)
#define VSIGN(y, x) _mm256_or_ps(y, _mm256_and_ps(x, V(-0.0f)))
#define VI __m256i
#define VBITS_SHR(x, k) _mm256_srli_epi32(_mm256_castps_si256(x), k)
#define VPERM(t, i) _mm256_permutevar8x32_ps(_mm256_loadu_ps(t), i)

/* p * 2^n (n integral, |n| <= 150) as p 2^(n/2) 2^(n - n/2): each factor a normal float */
static inline __attribute__((always_inline)) __m256 vscale2(__m256 p, __m256 n) {
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}
#define VSCALE2 vscale2
/* p * 2^n in one step, n added to p's exponent field (the result must be a normal float: v_exp_nonpos) */
#define VSCALE1(p, n)                                                                                                  \
    _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23)))

#include "kernels/vmath_simd.h"

#endif
