/*
 * audio.h - audio files in C for the speech models (issue 34): decode, mix down to mono, resample.
 *
 * Decoding is libsndfile's (Debian libsndfile1-dev: WAV PCM 8/16/24/32-bit and float, FLAC, OGG Vorbis / Opus,
 * AIFF, ...), fed from our own mapping of the file (wm_map_file: the one place that opens named inputs) through
 * its virtual I/O, so a buffer decodes the same way (fuzzing). Resampling to the feature extractor's rate is
 * libsoxr's (Debian libsoxr-dev) at its "high quality" setting, the one python-soxr and librosa use by default,
 * so our samples equal what a Python pipeline built on them sees. Channels are averaged into mono, as ffmpeg's
 * `-ac 1` and librosa's to_mono do.
 *
 * Untrusted input: a file libsndfile cannot read, with no frames, with more than WM_AUDIO_MAX_CHANNELS channels,
 * a rate outside 1 Hz .. 768 kHz, or longer than the caller's max_seconds is refused with a message naming the
 * file and the reason; nothing past max_seconds is decoded.
 */
#ifndef WM_AUDIO_AUDIO_H
#define WM_AUDIO_AUDIO_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define WM_AUDIO_MAX_CHANNELS 64
#define WM_AUDIO_DEFAULT_MAX_SECONDS 7200.0

typedef struct wm_audio {
    float *samples;       /* n mono samples at rate, in [-1, 1] for integer sources (float sources as stored) */
    size_t n;
    int rate;
    int src_rate;         /* the file's rate and channel count */
    int src_channels;
    char format[64];      /* e.g. "WAV (Microsoft) / Signed 16 bit PCM" */
} wm_audio;

/*
 * Decodes path, mixes to mono and resamples to rate (0: the file's own). max_seconds <= 0: the default
 * (WM_AUDIO_DEFAULT_MAX_SECONDS). out owns samples: wm_audio_free. Errors: WM_ERR_INPUT naming path.
 */
wm_status wm_audio_load(const char *path, int rate, double max_seconds, wm_audio *out, wm_error *err);
/* The same over bytes (label names them in messages). */
wm_status wm_audio_decode(const uint8_t *data, size_t size, const char *label, int rate, double max_seconds,
                          wm_audio *out, wm_error *err);
void wm_audio_free(wm_audio *a);

#endif
