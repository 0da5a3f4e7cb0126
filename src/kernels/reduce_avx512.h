/*
 * reduce_avx512.h - horizontal sums and lane masks shared by the AVX-512
 * kernels (include only from files compiled for AVX-512).
 */
#ifndef WM_KERNELS_REDUCE_AVX512_H
#define WM_KERNELS_REDUCE_AVX512_H

#include <immintrin.h>
#include <stdint.h>

/* the first n lanes (all 16 from n >= 16) */
static inline __attribute__((always_inline)) __mmask16 wm_tail16(int64_t n) {
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u);
}

/*
 * The 16 horizontal sums of v[0..15] at once: lane 4k + j = the sum of v[4j + k], each added up in exactly the
 * pairs and order of _mm512_reduce_add_ps (halves, quarters, then 2 + 2 and 1 + 1 within a quarter), so the
 * bits are those of 16 reduce_add_ps calls, for 45 instructions instead of about 130.
 */
#define WM_R16_HALF(a, b) _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee))
#define WM_R16_QUART(a, b) _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xdd))
#define WM_R16_PAIR(a, b) _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x44), _mm512_shuffle_ps(a, b, 0xee))
/* The same on sixteen values: GCC 12 keeps these in registers where an array of them goes to the stack. */
static inline __attribute__((always_inline)) __m512 wm_reduce16v_ps(__m512 v0, __m512 v1, __m512 v2, __m512 v3,
                                                                   __m512 v4, __m512 v5, __m512 v6, __m512 v7,
                                                                   __m512 v8, __m512 v9, __m512 v10, __m512 v11,
                                                                   __m512 v12, __m512 v13, __m512 v14, __m512 v15) {
    /* lanes 0-7: v[2p]'s i + i+8; lanes 8-15: v[2p+1]'s */
    __m512 c0 = WM_R16_HALF(v0, v1), c1 = WM_R16_HALF(v2, v3), c2 = WM_R16_HALF(v4, v5), c3 = WM_R16_HALF(v6, v7);
    __m512 c4 = WM_R16_HALF(v8, v9), c5 = WM_R16_HALF(v10, v11), c6 = WM_R16_HALF(v12, v13);
    __m512 c7 = WM_R16_HALF(v14, v15);
    /* quarter q: v[4p + q]'s i + i+4 */
    __m512 e0 = WM_R16_QUART(c0, c1), e1 = WM_R16_QUART(c2, c3), e2 = WM_R16_QUART(c4, c5), e3 = WM_R16_QUART(c6, c7);
    /* per quarter: e[2p]'s 0+2, 1+3, then e[2p+1]'s */
    __m512 g0 = WM_R16_PAIR(e0, e1), g1 = WM_R16_PAIR(e2, e3);
    return _mm512_add_ps(_mm512_shuffle_ps(g0, g1, 0x88), _mm512_shuffle_ps(g0, g1, 0xdd));
}
#undef WM_R16_HALF
#undef WM_R16_QUART
#undef WM_R16_PAIR

static inline __attribute__((always_inline)) __m512 wm_reduce16_ps(const __m512 v[16]) {
    return wm_reduce16v_ps(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13],
                           v[14], v[15]);
}

#endif
