/*
 * fft.h - complex FFT of any length in double precision (DFT, STFT):
 * mixed-radix decimation in time over the factors 4, 2, 3, 5 and then any
 * odd factor (a prime factor p costs O(p) per output, so a prime length is
 * a plain DFT). Complex numbers are interleaved (re, im). No allocation.
 */
#ifndef WM_OPS_FFT_H
#define WM_OPS_FFT_H

#include <stdint.h>

#define WM_FFT_MAX_FACTORS 64

typedef struct wm_fft_plan {
    int64_t n;
    int64_t fac[WM_FFT_MAX_FACTORS]; /* radices, 0-terminated */
    const double *tw;                /* n twiddles exp(sign * 2 pi i t / n), interleaved */
    int64_t max_radix;
} wm_fft_plan;

/* Fills tw (2n doubles) for length n: sign -1 forward, +1 inverse. */
void wm_fft_twiddles(int64_t n, int sign, double *tw);

/* Factorizes n (>= 1) into p and points it at tw. */
void wm_fft_plan_init(wm_fft_plan *p, int64_t n, const double *tw);

/* Doubles of scratch wm_fft needs besides in and out. */
int64_t wm_fft_scratch(const wm_fft_plan *p);

/* out[k] = sum_j in[j * stride] * tw^(j k), k < n. in and out must not overlap. */
void wm_fft(const wm_fft_plan *p, const double *in, int64_t stride, double *out, double *scratch);

#endif
