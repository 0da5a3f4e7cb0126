/*
 * speech_s2s.h - the audio front end of a speech encoder-decoder build folder (Whisper): each file decoded, mixed
 * to mono and resampled to the folder's preprocessor_config.json sampling_rate (audio/audio.h), then its log-mel
 * features as WhisperFeatureExtractor computes them (audio/features.h) with that file's feature_size, n_fft,
 * hop_length and chunk_length (n_samples = chunk_length x sampling_rate, as transformers recomputes it); Whisper's
 * defaults (16000 Hz, 400, 160, 30 s) for what the file leaves out, and feature_size must equal the encoder's mel
 * bins. A file's features are bounded (WM_SPEECH_S2S_MAX_FEATURES values: 128 mel bins x 131072 frames, 21 min).
 */
#ifndef WM_TASKS_SPEECH_S2S_H
#define WM_TASKS_SPEECH_S2S_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define WM_SPEECH_S2S_MAX_FEATURES (1 << 24)

/*
 * The features of files[0..n) for folder dir whose encoder reads n_mels bins: *feats (malloc'ed, caller frees)
 * [n, n_mels, *frames]; seconds[i] (optional, n entries) each file's duration. Every file padded (or cut) to one
 * chunk (truncation, padding to max_length) unless one is longer: then all are padded with zeros to the longest
 * (truncation=False, padding="longest", as transformers' ASR pipeline does for audio over a chunk) and valid[i]
 * (optional, n entries) is file i's frames, its attention mask's sum (every frame when not long). Errors name the
 * file and field.
 */
wm_status wm_speech_s2s_features(const char *dir, int64_t n_mels, const char *const *files, size_t n, float **feats,
                                 int64_t *frames, int64_t *valid, double *seconds, wm_error *err);
/* The same for one encoded audio file held in memory, size bytes at data (a table's audio.bytes cell); name names it
   in errors. */
wm_status wm_speech_s2s_features_bytes(const char *dir, int64_t n_mels, const char *name, const uint8_t *data,
                                       size_t size, float **feats, int64_t *frames, int64_t *valid, double *seconds,
                                       wm_error *err);

#endif
