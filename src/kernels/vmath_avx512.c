/*
 * vmath_avx512.c - the AVX-512 table's vector math: vmath_simd.h at 16 lanes
 * (exp, tanh, erf, sigmoid, GELU, SiLU, ReLU and the activations built on
 * them) and the row softmax. The values are the AVX2 table's, lane for lane;
 * the softmax's sum runs over 16 lanes, so its rounding may differ in the last
 * place. The rest of the vector math stays the AVX2 table's. Compiled with
 * -mavx512f; reached only through the AVX-512 table.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "kernels/reduce_avx512.h"

#define VF __m512
#define VM __mmask16
#define V(x) _mm512_set1_ps(x)
#define VADD _mm512_add_ps
#define VSUB _mm512_sub_ps
#define VMUL _mm512_mul_ps
#define VDIV _mm512_div_ps
#define VMIN _mm512_min_ps
#define VMAX _mm512_max_ps
#define VFMA _mm512_fmadd_ps
#define VFNMA _mm512_fnmadd_ps
#define VFMS _mm512_fmsub_ps
#define VRND(x) _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define VCMP _mm512_cmp_ps_mask
#define VSEL(a, b, m) _mm512_mask_blend_ps(m, a, b)
#define VZERO(m, x) _mm512_maskz_mov_ps((__mmask16)~(m), x)
#define VABS(x) _mm512_abs_ps(x)
#define VSIGN(y, x)                                                                                                    \
    _mm512_castsi512_ps(_mm512_or_si512(                                                                               \
        _mm512_castps_si512(y), _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u))))
/* p * 2^n, rounded once: the AVX2 form's two exact factors round the same way (only the second product can be
   inexact) */
#define VSCALE2(p, n) _mm512_scalef_ps(p, n)
#define VI __m512i
#define VBITS_SHR(x, k) _mm512_srli_epi32(_mm512_castps_si512(x), k)
#define VPERM(t, i) _mm512_permutexvar_ps(i, _mm512_loadu_ps(t))
#define VSCALE1(p, n) _mm512_scalef_ps(p, n)

#include "kernels/vmath_simd.h"

/* y[i] = F(x[i]): whole vectors, the tail under a mask (the same arithmetic; masked-off lanes compute F(0)) */
#define MAP_FN(name, F)                                                                                                \
    static void name(int64_t n, float *y, const float *x) {                                                            \
        int64_t i = 0;                                                                                                 \
        for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, F(_mm512_loadu_ps(x + i)));                              \
        if (i < n) {                                                                                                   \
            __mmask16 m = wm_tail16(n - i);                                                                            \
            _mm512_mask_storeu_ps(y + i, m, F(_mm512_maskz_loadu_ps(m, x + i)));                                       \
        }                                                                                                              \
    }
#define MAP_FN1(name, F)                                                                                               \
    static void name(int64_t n, float *y, const float *x, float p) {                                                   \
        const __m512 vp = V(p);                                                                                        \
        int64_t i = 0;                                                                                                 \
        for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, F(_mm512_loadu_ps(x + i), vp));                          \
        if (i < n) {                                                                                                   \
            __mmask16 m = wm_tail16(n - i);                                                                            \
            _mm512_mask_storeu_ps(y + i, m, F(_mm512_maskz_loadu_ps(m, x + i), vp));                                   \
        }                                                                                                              \
    }

#define AVX2_ACT(n, y, x, act, p, q) wm_kernels_avx2()->vact(n, y, x, act, p, q)
VMATH_MAPS(z_, AVX2_ACT)

void wm_vact_avx512(int64_t n, float *y, const float *x, wm_act act, float p, float q) { z_act(n, y, x, act, p, q); }

/* y = softmax(x * scale + mask) over n; the tail lanes are -inf (exp gives 0 there) */
static void z_softmax(int64_t n, float *y, const float *x, float scale, const float *mask) {
    if (n <= 0) return;
    const __m512 vs = V(scale), ninf = V(-INFINITY);
    __m512 vm = ninf;
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = wm_tail16(n - i);
        __m512 t = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vs);
        if (mask) t = _mm512_add_ps(t, _mm512_maskz_loadu_ps(m, mask + i));
        _mm512_mask_storeu_ps(y + i, m, t);
        vm = _mm512_mask_max_ps(vm, m, t, vm);
    }
    float mx = _mm512_reduce_max_ps(vm);
    if (mx == -INFINITY) mx = 0.0f; /* a row of -inf: 0/0 = NaN below, like the math */
    const __m512 vmx = V(mx);
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) { /* two sums: the adds' latency is not the exp's limit */
        __m512 e0 = v_exp(_mm512_sub_ps(_mm512_loadu_ps(y + i), vmx));
        __m512 e1 = v_exp(_mm512_sub_ps(_mm512_loadu_ps(y + i + 16), vmx));
        _mm512_storeu_ps(y + i, e0);
        _mm512_storeu_ps(y + i + 16, e1);
        s0 = _mm512_add_ps(s0, e0);
        s1 = _mm512_add_ps(s1, e1);
    }
    for (; i < n; i += 16) {
        __mmask16 m = wm_tail16(n - i);
        __m512 e = v_exp(_mm512_sub_ps(_mm512_mask_loadu_ps(ninf, m, y + i), vmx));
        _mm512_mask_storeu_ps(y + i, m, e);
        s0 = _mm512_add_ps(s0, e);
    }
    const __m512 inv = V(1.0f / _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)));
    for (i = 0; i < n; i += 16) {
        __mmask16 m = wm_tail16(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + i), inv));
    }
}

void wm_vmath_fill_avx512(wm_kernels *k) {
    k->vexp = z_exp;
    k->vtanh = z_tanh;
    k->verf = z_erf;
    k->vsigmoid = z_sigmoid;
    k->vgelu_erf = z_gelu_erf;
    k->vgelu_tanh = z_gelu_tanh;
    k->vsilu = z_silu;
    k->vact = z_act;
    k->softmax_row = z_softmax;
}
