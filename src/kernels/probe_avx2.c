/* probe_avx2.c - FMA throughput loop and streaming read for the benchmarks (see probe.h). */
#include <immintrin.h>

#include "kernels/probe.h"

float wm_probe_fma_avx2(int64_t iters) {
    __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    /* ten different chains: with equal starting values GCC proves them equal and keeps one (latency-bound at a
       quarter of the throughput, which the 10-chain FLOP count then overstated by 1.3x on Zen 4) */
    __m256 s0 = _mm256_set1_ps(1.0f), s1 = _mm256_set1_ps(1.1f), s2 = _mm256_set1_ps(1.2f), s3 = _mm256_set1_ps(1.3f),
           s4 = _mm256_set1_ps(1.4f), s5 = _mm256_set1_ps(1.5f), s6 = _mm256_set1_ps(1.6f), s7 = _mm256_set1_ps(1.7f),
           s8 = _mm256_set1_ps(1.8f), s9 = _mm256_set1_ps(1.9f);
    for (int64_t i = 0; i < iters; i++) {
        s0 = _mm256_fmadd_ps(s0, a, b);
        s1 = _mm256_fmadd_ps(s1, a, b);
        s2 = _mm256_fmadd_ps(s2, a, b);
        s3 = _mm256_fmadd_ps(s3, a, b);
        s4 = _mm256_fmadd_ps(s4, a, b);
        s5 = _mm256_fmadd_ps(s5, a, b);
        s6 = _mm256_fmadd_ps(s6, a, b);
        s7 = _mm256_fmadd_ps(s7, a, b);
        s8 = _mm256_fmadd_ps(s8, a, b);
        s9 = _mm256_fmadd_ps(s9, a, b);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)),
                             _mm256_add_ps(_mm256_add_ps(s4, s5), _mm256_add_ps(_mm256_add_ps(s6, s7), _mm256_add_ps(s8, s9))));
    float t[8];
    _mm256_storeu_ps(t, s);
    return t[0] + t[7];
}

float wm_probe_sum_avx2(const float *x, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_add_ps(s0, _mm256_loadu_ps(x + i));
        s1 = _mm256_add_ps(s1, _mm256_loadu_ps(x + i + 8));
        s2 = _mm256_add_ps(s2, _mm256_loadu_ps(x + i + 16));
        s3 = _mm256_add_ps(s3, _mm256_loadu_ps(x + i + 24));
    }
    float t[8];
    _mm256_storeu_ps(t, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    float r = t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
    for (; i < n; i++) r += x[i];
    return r;
}
