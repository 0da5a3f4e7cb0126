/*
 * features.c - wav2vec2 normalization and Whisper's log-mel spectrogram (see features.h).
 */
#define _GNU_SOURCE
#include "audio/features.h"

#include <fftw3.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void wm_audio_normalize(float *x, size_t n) {
    if (!n) return;
    double mean = 0, var = 0;
    for (size_t i = 0; i < n; i++) mean += x[i];
    mean /= (double)n;
    for (size_t i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
    var /= (double)n;
    double inv = 1.0 / sqrt(var + 1e-7);
    for (size_t i = 0; i < n; i++) x[i] = (float)((x[i] - mean) * inv);
}

void wm_logmel_opts_default(wm_logmel_opts *o) {
    *o = (wm_logmel_opts){.rate = 16000, .n_fft = 400, .hop = 160, .n_mels = 80, .n_samples = 480000};
}

/* The Slaney mel scale: linear below 1 kHz, logarithmic above. */
static double hz_to_mel(double f) { return f < 1000.0 ? 3.0 * f / 200.0 : 15.0 + log(f / 1000.0) * 27.0 / log(6.4); }
static double mel_to_hz(double m) { return m < 15.0 ? 200.0 * m / 3.0 : 1000.0 * exp((m - 15.0) * log(6.4) / 27.0); }

double *wm_mel_filters(int n_mels, int n_fft, int rate, double fmin, double fmax) {
    int n_bins = n_fft / 2 + 1;
    double *fb = calloc((size_t)n_mels * (size_t)n_bins, sizeof *fb), *hz = malloc(((size_t)n_mels + 2) * sizeof *hz);
    if (!fb || !hz) {
        free(fb);
        free(hz);
        return NULL;
    }
    double m0 = hz_to_mel(fmin), m1 = hz_to_mel(fmax);
    for (int i = 0; i < n_mels + 2; i++) hz[i] = mel_to_hz(m0 + (m1 - m0) * i / (n_mels + 1));
    double top = (double)(rate / 2); /* the bins' frequencies: 0 .. rate // 2, evenly spaced */
    for (int m = 0; m < n_mels; m++) {
        double enorm = 2.0 / (hz[m + 2] - hz[m]); /* Slaney: each filter's area is the same */
        for (int k = 0; k < n_bins; k++) {
            double f = n_bins > 1 ? top * k / (n_bins - 1) : 0.0;
            double down = (f - hz[m]) / (hz[m + 1] - hz[m]), up = (hz[m + 2] - f) / (hz[m + 2] - hz[m + 1]);
            double w = down < up ? down : up;
            fb[(size_t)m * n_bins + k] = w > 0 ? w * enorm : 0.0;
        }
    }
    free(hz);
    return fb;
}

void wm_dft_power_naive(const double *x, int n, double *power) {
    for (int k = 0; k <= n / 2; k++) {
        double re = 0, im = 0;
        for (int t = 0; t < n; t++) {
            double a = -2.0 * M_PI * (double)k * (double)t / n;
            re += x[t] * cos(a);
            im += x[t] * sin(a);
        }
        power[k] = re * re + im * im;
    }
}

wm_status wm_logmel(const float *x, size_t n, const wm_logmel_opts *o, float **out, size_t *frames, wm_error *err) {
    *out = NULL, *frames = 0;
    if (o->n_fft < 2 || o->n_fft > 65536 || o->hop < 1 || o->n_mels < 1 || o->n_mels > 1024 || o->rate < 1)
        return wm_err(err, WM_ERR_USAGE, "log-mel: n_fft %d, hop %d, n_mels %d, rate %d out of range", o->n_fft, o->hop,
                      o->n_mels, o->rate);
    size_t len = o->n_samples ? o->n_samples : n, pad = (size_t)o->n_fft / 2;
    if (len > (size_t)1 << 34) return wm_err(err, WM_ERR_USAGE, "log-mel: %zu samples is too long", len);
    if (len <= pad) return wm_err(err, WM_ERR_USAGE, "log-mel: %zu samples is shorter than n_fft / 2 + 1", len);
    /* the waveform padded / cut to len, then reflect-padded by n_fft / 2 on both sides (centred frames) */
    size_t total = len + 2 * pad;
    double *w = malloc(total * sizeof *w);
    if (!w) return wm_err(err, WM_ERR_NOMEM, "log-mel: out of memory");
    for (size_t i = 0; i < len; i++) w[pad + i] = i < n ? x[i] : 0.0;
    for (size_t i = 0; i < pad; i++) {
        w[pad - 1 - i] = w[pad + 1 + i];             /* reflect: x[1], x[2], ... mirrored before x[0] */
        w[pad + len + i] = w[pad + len - 2 - i];     /* and x[len-2], x[len-3], ... after x[len-1] */
    }
    size_t nf = 1 + (total - (size_t)o->n_fft) / (size_t)o->hop; /* the STFT's frames; the last is dropped */
    size_t keep = nf - 1;
    int nb = o->n_fft / 2 + 1;
    double *fb = wm_mel_filters(o->n_mels, o->n_fft, o->rate, 0.0, o->rate / 2.0);
    double *win = malloc((size_t)o->n_fft * sizeof *win), *frame = fftw_malloc((size_t)o->n_fft * sizeof *frame),
           *power = malloc((size_t)nb * sizeof *power);
    fftw_complex *spec = fftw_malloc((size_t)nb * sizeof *spec);
    float *mel = malloc((size_t)o->n_mels * (keep ? keep : 1) * sizeof *mel);
    fftw_plan plan = frame && spec ? fftw_plan_dft_r2c_1d(o->n_fft, frame, spec, FFTW_ESTIMATE) : NULL;
    wm_status s = WM_OK;
    if (!fb || !win || !frame || !power || !spec || !mel || !plan) s = wm_err(err, WM_ERR_NOMEM, "log-mel: out of memory");
    double mx = -INFINITY;
    for (int i = 0; !s && i < o->n_fft; i++) win[i] = 0.5 - 0.5 * cos(2.0 * M_PI * i / o->n_fft); /* periodic Hann */
    for (size_t f = 0; !s && f < keep; f++) {
        const double *src = w + f * (size_t)o->hop;
        for (int i = 0; i < o->n_fft; i++) frame[i] = src[i] * win[i];
        fftw_execute(plan);
        for (int k = 0; k < nb; k++) power[k] = spec[k][0] * spec[k][0] + spec[k][1] * spec[k][1];
        for (int m = 0; m < o->n_mels; m++) {
            const double *row = fb + (size_t)m * nb;
            double acc = 0;
            for (int k = 0; k < nb; k++) acc += row[k] * power[k];
            double v = log10(acc > 1e-10 ? acc : 1e-10);
            if (v > mx) mx = v;
            mel[(size_t)m * keep + f] = (float)v;
        }
    }
    for (size_t i = 0; !s && i < (size_t)o->n_mels * keep; i++) {
        double v = mel[i] > mx - 8.0 ? mel[i] : mx - 8.0;
        mel[i] = (float)((v + 4.0) / 4.0);
    }
    if (plan) fftw_destroy_plan(plan);
    fftw_free(frame);
    fftw_free(spec);
    free(power);
    free(win);
    free(fb);
    free(w);
    if (s) {
        free(mel);
        return s;
    }
    *out = mel, *frames = keep;
    return WM_OK;
}
