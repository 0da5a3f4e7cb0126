/*
 * features.h - the speech models' feature extractors in C, as transformers computes them:
 *   Wav2Vec2FeatureExtractor: the raw waveform, zero-mean unit-variance per utterance (do_normalize);
 *   WhisperFeatureExtractor: a log-mel spectrogram - the waveform padded (or cut) to n_samples, a centred STFT
 *   (reflect padding of n_fft / 2, periodic Hann window, hop), the power spectrum through a Slaney-normalized
 *   Slaney-scale triangular mel filter bank (0 .. rate / 2), log10 with a 1e-10 floor, the last frame dropped,
 *   clamped to (max - 8), then (x + 4) / 4.
 * The DFT is FFTW's (Debian libfftw3-dev) in double precision; wm_dft_naive is the reference it is tested
 * against.
 */
#ifndef WM_AUDIO_FEATURES_H
#define WM_AUDIO_FEATURES_H

#include <stddef.h>

#include "core/error.h"

/* x[n] in place: (x - mean) / sqrt(var + 1e-7), as Wav2Vec2FeatureExtractor's zero_mean_unit_var_norm. */
void wm_audio_normalize(float *x, size_t n);

typedef struct wm_logmel_opts {
    int rate;          /* 16000 */
    int n_fft;         /* 400 */
    int hop;           /* 160 */
    int n_mels;        /* 80 (Whisper large-v3: 128) */
    size_t n_samples;  /* the waveform is padded / cut to this many samples (480000: 30 s); 0: as given */
} wm_logmel_opts;

/* Whisper's defaults (80 mels, 30 s). */
void wm_logmel_opts_default(wm_logmel_opts *o);

/*
 * The log-mel features of x[n]: *out (malloc'ed, caller frees) holds n_mels rows of *frames values each
 * ([n_mels, frames], row-major), frames = n_samples / hop. Errors: WM_ERR_USAGE for options out of range.
 */
wm_status wm_logmel(const float *x, size_t n, const wm_logmel_opts *o, float **out, size_t *frames, wm_error *err);

/* The naive real DFT: power[k] = |sum_t x[t] e^{-2 pi i k t / n}|^2 for k = 0 .. n / 2 (the FFT's reference). */
void wm_dft_power_naive(const double *x, int n, double *power);

/* The Slaney mel filter bank: fb[m * n_bins + k], n_bins = n_fft / 2 + 1 (caller frees). NULL: out of memory. */
double *wm_mel_filters(int n_mels, int n_fft, int rate, double fmin, double fmax);

#endif
