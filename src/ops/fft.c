/* fft.c - mixed-radix complex FFT (see fft.h). */
#include "ops/fft.h"

#include <math.h>

void wm_fft_twiddles(int64_t n, int sign, double *tw) {
    for (int64_t t = 0; t < n; t++) {
        double a = 2.0 * M_PI * (double)t / (double)n;
        tw[2 * t] = cos(a);
        tw[2 * t + 1] = sign * sin(a);
    }
}

void wm_fft_plan_init(wm_fft_plan *p, int64_t n, const double *tw) {
    p->n = n;
    p->tw = tw;
    p->max_radix = 1;
    int k = 0;
    int64_t m = n;
    static const int64_t first[] = {4, 2, 3, 5};
    for (int i = 0; i < 4; i++)
        while (m % first[i] == 0 && m > 1) p->fac[k++] = first[i], m /= first[i];
    for (int64_t f = 7; m > 1 && k < WM_FFT_MAX_FACTORS - 2; f += 2) {
        if (f * f > m) f = m;
        while (m % f == 0) p->fac[k++] = f, m /= f;
    }
    p->fac[k] = 0;
    for (int i = 0; i < k; i++)
        if (p->fac[i] > p->max_radix) p->max_radix = p->fac[i];
}

int64_t wm_fft_scratch(const wm_fft_plan *p) { return 2 * p->max_radix; }

/* Level of size n (radices fac), twiddle step ts = N / n into the top-level table. */
static void fft_rec(const wm_fft_plan *pl, double *out, const double *in, int64_t stride, int64_t n, const int64_t *fac,
                    int64_t ts, double *tmp) {
    int64_t p = fac[0], m = n / p, N = pl->n;
    if (m == 1)
        for (int64_t j = 0; j < p; j++) out[2 * j] = in[2 * j * stride], out[2 * j + 1] = in[2 * j * stride + 1];
    else
        for (int64_t j = 0; j < p; j++) fft_rec(pl, out + 2 * j * m, in + 2 * j * stride, stride * p, m, fac + 1, ts * p, tmp);
    const double *tw = pl->tw;
    for (int64_t k = 0; k < m; k++) {
        for (int64_t j = 0; j < p; j++) tmp[2 * j] = out[2 * (j * m + k)], tmp[2 * j + 1] = out[2 * (j * m + k) + 1];
        if (p == 2) { /* the common radices without the generic inner loop */
            const double *w = tw + 2 * ((k * ts) % N);
            double br = tmp[2] * w[0] - tmp[3] * w[1], bi = tmp[2] * w[1] + tmp[3] * w[0];
            out[2 * k] = tmp[0] + br, out[2 * k + 1] = tmp[1] + bi;
            out[2 * (k + m)] = tmp[0] - br, out[2 * (k + m) + 1] = tmp[1] - bi;
            continue;
        }
        for (int64_t q = 0; q < p; q++) {
            int64_t e = k + q * m; /* exponent step of input j: j * e (mod n) */
            double re = 0, im = 0;
            int64_t t = 0;
            for (int64_t j = 0; j < p; j++) {
                const double *w = tw + 2 * (t * ts);
                re += tmp[2 * j] * w[0] - tmp[2 * j + 1] * w[1];
                im += tmp[2 * j] * w[1] + tmp[2 * j + 1] * w[0];
                t += e;
                if (t >= n) t %= n;
            }
            out[2 * e] = re, out[2 * e + 1] = im;
        }
    }
}

void wm_fft(const wm_fft_plan *p, const double *in, int64_t stride, double *out, double *scratch) {
    if (p->n == 1) {
        out[0] = in[0], out[1] = in[1];
        return;
    }
    fft_rec(p, out, in, stride, p->n, p->fac, 1, scratch);
}
