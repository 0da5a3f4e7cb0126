/*
 * wm_audiotool - drives libwinml's audio decoding for the oracle tests.
 *
 *   wm_audiotool load FILE RATE OUT [MAX_SECONDS]   mono float32 samples at RATE (0: the file's own)
 *   wm_audiotool logmel FILE OUT [N_MELS [N_SAMPLES]] Whisper's log-mel features of FILE at 16 kHz: int32 n_mels,
 *                                                  int32 frames, then n_mels * frames float32
 *   wm_audiotool norm FILE OUT                      wav2vec2's normalized waveform at 16 kHz (float32)
 *   wm_audiotool dft N SEED                         the naive DFT power spectrum of seeded x[N]: "N max", then the
 *                                                  n / 2 + 1 values, one per line (x: an LCG the test repeats)
 * OUT: int32 rate, int32 source rate, int32 source channels, then the float32 samples (little-endian).
 * Exit codes: 0 ok, 2 error (message on stderr).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"
#include "audio/features.h"
#include "core/file.h"

static int put(const char *path, const void *hdr, size_t hn, const float *p, size_t n) {
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(hdr, 1, hn, f) == hn && (!n || fwrite(p, sizeof *p, n, f) == n);
    if (f && fclose(f)) ok = 0;
    if (!ok) fprintf(stderr, "wm_audiotool: error: cannot write %s\n", path);
    return ok ? 0 : 2;
}

static int features(int argc, char **argv) {
    wm_error e = {0};
    wm_audio a;
    if (wm_audio_load(argv[2], 16000, 0, &a, &e)) {
        fprintf(stderr, "wm_audiotool: error: %s\n", e.msg);
        return 2;
    }
    int rc;
    if (!strcmp(argv[1], "norm")) {
        wm_audio_normalize(a.samples, a.n);
        rc = put(argv[3], "", 0, a.samples, a.n);
    } else {
        wm_logmel_opts o;
        wm_logmel_opts_default(&o);
        if (argc > 4) o.n_mels = atoi(argv[4]);
        if (argc > 5) o.n_samples = (size_t)atol(argv[5]);
        float *mel = NULL;
        size_t frames = 0;
        if (wm_logmel(a.samples, a.n, &o, &mel, &frames, &e)) {
            fprintf(stderr, "wm_audiotool: error: %s\n", e.msg);
            rc = 2;
        } else {
            int32_t hdr[2] = {o.n_mels, (int32_t)frames};
            rc = put(argv[3], hdr, sizeof hdr, mel, (size_t)o.n_mels * frames);
        }
        free(mel);
    }
    wm_audio_free(&a);
    return rc;
}

/* The naive DFT's power spectrum of seeded values (checked against numpy's rfft). */
static int dft_check(int n, unsigned seed) {
    if (n < 1 || n > 1 << 16) return 2;
    double *x = malloc((size_t)n * sizeof *x), *p = malloc(((size_t)n / 2 + 1) * sizeof *p);
    if (!x || !p) return 2;
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = (double)(seed >> 8) / (1u << 24) - 0.5;
    }
    wm_dft_power_naive(x, n, p);
    double mx = 0;
    for (int k = 0; k <= n / 2; k++) mx = p[k] > mx ? p[k] : mx;
    printf("%d %.17g\n", n, mx);
    for (int k = 0; k <= n / 2; k++) printf("%.17g\n", p[k]);
    free(x), free(p);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 4 && !strcmp(argv[1], "dft")) return dft_check(atoi(argv[2]), (unsigned)atoi(argv[3]));
    if (argc >= 4 && (!strcmp(argv[1], "logmel") || !strcmp(argv[1], "norm"))) return features(argc, argv);
    if (argc < 5 || strcmp(argv[1], "load")) {
        fprintf(stderr, "usage: wm_audiotool load FILE RATE OUT [MAX_SECONDS]\n");
        return 2;
    }
    wm_error e = {0};
    wm_audio a;
    if (wm_audio_load(argv[2], atoi(argv[3]), argc > 5 ? atof(argv[5]) : 0, &a, &e)) {
        fprintf(stderr, "wm_audiotool: error: %s\n", e.msg);
        return 2;
    }
    int32_t hdr[3] = {a.rate, a.src_rate, a.src_channels};
    FILE *f = fopen(argv[4], "wb");
    int ok = f && fwrite(hdr, sizeof hdr, 1, f) == 1 && (!a.n || fwrite(a.samples, sizeof *a.samples, a.n, f) == a.n);
    if (f && fclose(f)) ok = 0;
    if (ok) printf("%s\n", a.format);
    wm_audio_free(&a);
    if (!ok) {
        fprintf(stderr, "wm_audiotool: error: cannot write %s\n", argv[4]);
        return 2;
    }
    return 0;
}
