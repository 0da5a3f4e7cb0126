/* quant_avx2.c - AVX2 pieces of DynamicQuantizeLinear (quant.c's wm_dyn_quantize_u8): the range of the values
   and their quantization, 8 lanes at a time with the scalar code's operations in its order (maxps / minps skip
   NaN as its comparisons do, a true division, round half to even, + zp, NaN -> zp, clamp), so the bytes are the
   same. */
#include <immintrin.h>

#include "ops/quant.h"

void wm_dyn_range_avx2(const float *v, uint64_t cnt, float *mn_out, float *mx_out) {
    __m256 mx = _mm256_setzero_ps(), mn = _mm256_setzero_ps(), mx2 = mx, mn2 = mn;
    uint64_t i = 0;
    for (; i + 16 <= cnt; i += 16) { /* (x, acc): a NaN x gives acc back */
        __m256 a = _mm256_loadu_ps(v + i), b = _mm256_loadu_ps(v + i + 8);
        mx = _mm256_max_ps(a, mx), mn = _mm256_min_ps(a, mn);
        mx2 = _mm256_max_ps(b, mx2), mn2 = _mm256_min_ps(b, mn2);
    }
    mx = _mm256_max_ps(mx, mx2), mn = _mm256_min_ps(mn, mn2);
    float hx[8], hn[8], x = 0, n = 0;
    _mm256_storeu_ps(hx, mx);
    _mm256_storeu_ps(hn, mn);
    for (int j = 0; j < 8; j++) {
        if (hx[j] > x) x = hx[j];
        if (hn[j] < n) n = hn[j];
    }
    for (; i < cnt; i++) {
        if (v[i] > x) x = v[i];
        if (v[i] < n) n = v[i];
    }
    *mn_out = n, *mx_out = x;
}

/* y[i] = clamp(nearbyint(v[i] / scale) + zp, 0, 255), NaN -> zp, for i < cnt rounded down to 32; returns that count */
uint64_t wm_dyn_quantize_avx2(const float *v, uint64_t cnt, uint8_t *y, float scale, float zp) {
    const __m256 s = _mm256_set1_ps(scale), z = _mm256_set1_ps(zp), lo = _mm256_setzero_ps(), hi = _mm256_set1_ps(255.0f);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    uint64_t i = 0;
    for (; i + 32 <= cnt; i += 32) {
        __m256i q[4];
        for (int j = 0; j < 4; j++) {
            __m256 x = _mm256_add_ps(_mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(v + i + 8 * j), s),
                                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), z);
            x = _mm256_blendv_ps(x, z, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
            x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
            q[j] = _mm256_cvtps_epi32(x); /* whole numbers in [0, 255]: exact */
        }
        /* packs work per 128-bit lane: 0-3 8-11 | 4-7 12-15, then bytes 0-3 8-11 16-19 24-27 | 4-7 ...; the
           permute of dwords puts them back in order */
        __m256i w0 = _mm256_packus_epi32(q[0], q[1]), w1 = _mm256_packus_epi32(q[2], q[3]);
        __m256i b = _mm256_packus_epi16(w0, w1);
        _mm256_storeu_si256((__m256i *)(y + i), _mm256_permutevar8x32_epi32(b, perm));
    }
    return i;
}
