/*
 * exp_nonpos_check.c - vmath_simd.h's v_exp_nonpos (the softmax exp of attn_exp_rows) against the near-copy it
 * replaced (attn_rows_avx2.c's exp_nonpos before h-watt): error in ulps of the result against double exp over
 * every float in [-86, 0], how many results differ, and the CPU time of 1.024e8 of each from L1. Not built by
 * CMake; the old function is taken from the history:
 *
 *   git show 9bc09b4:src/kernels/attn_rows_avx2.c | sed -n '/^static inline __m256 exp_nonpos/,/^}/p' > /tmp/old_exp.h
 *   gcc -O2 -mavx2 -mfma -Isrc -include immintrin.h -include /tmp/old_exp.h bench/exp_nonpos_check.c -o /tmp/enc -lm && /tmp/enc
 */
#include <math.h>
#include <stdio.h>
#include <time.h>
#include "kernels/vmath_avx2.h"
static double now(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec * 1e3 + t.tv_nsec * 1e-6; }
int main(void) {
    double worst[2] = {0, 0}; long diff = 0, n = 0;
    float xs[8], y0[8], y1[8];
    for (float x = -86.0f; x <= 0.0f; x = nextafterf(x, 1.0f)) {
        static int i = 0;
        xs[i++] = x;
        if (i < 8) continue;
        i = 0;
        _mm256_storeu_ps(y0, exp_nonpos(_mm256_loadu_ps(xs)));
        _mm256_storeu_ps(y1, v_exp_nonpos(_mm256_loadu_ps(xs)));
        for (int k = 0; k < 8; k++) {
            double w = exp((double)xs[k]), u = ldexp(1.0, ilogb((float)w) - 23);
            double e0 = fabs(y0[k] - w) / u, e1 = fabs(y1[k] - w) / u;
            worst[0] = e0 > worst[0] ? e0 : worst[0], worst[1] = e1 > worst[1] ? e1 : worst[1];
            diff += y0[k] != y1[k], n++;
        }
    }
    printf("floats in [-86, 0]: %ld; max error old %.3f ulp, new %.3f ulp; results differing: %ld\n", n, worst[0], worst[1], diff);
    /* speed: 1e8 exps each, from a 4 KiB buffer in L1 */
    static float buf[1024];
    for (int i = 0; i < 1024; i++) buf[i] = -(float)i * 0.03f;
    for (int r = 0; r < 3; r++) {
        __m256 acc = _mm256_setzero_ps();
        double t0 = now();
        for (int it = 0; it < 100000; it++) for (int j = 0; j < 1024; j += 8) acc = _mm256_add_ps(acc, exp_nonpos(_mm256_loadu_ps(buf + j)));
        double t1 = now();
        for (int it = 0; it < 100000; it++) for (int j = 0; j < 1024; j += 8) acc = _mm256_add_ps(acc, v_exp_nonpos(_mm256_loadu_ps(buf + j)));
        double t2 = now();
        float s[8]; _mm256_storeu_ps(s, acc);
        printf("round %d: old %.1f ms, new %.1f ms CPU per 1.024e8 exps (%g)\n", r, t1 - t0, t2 - t1, s[0]);
    }
    return 0;
}
