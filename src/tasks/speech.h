/*
 * speech.h - running a speech encoder's build folder (wav2vec2 / HuBERT: input_values, optional attention_mask)
 * on audio files: each file is decoded, mixed to mono and resampled to the feature extractor's sampling_rate
 * (audio/audio.h), normalized to zero mean and unit variance when preprocessor_config.json's do_normalize says
 * so (audio/features.h), and run as one batch row (attention_mask all ones).
 *
 * automatic-speech-recognition (CTC): the logits [1, frames, vocab] decoded greedily as Wav2Vec2CTCTokenizer's
 * batch_decode of the argmax ids: repeats collapsed, the pad token (the CTC blank) dropped, the word delimiter
 * token ("|") made a space, the rest joined and stripped. The vocabulary is the folder's vocab.json (a flat
 * token -> id map), the pad and delimiter tokens tokenizer_config.json's (defaults "<pad>", "|").
 * audio-classification: the logits [1, labels], labels from config.json's id2label.
 *
 * The task is the folder's winml_build_config.json loader.task when there is one, else automatic-speech-
 * recognition for 3-D logits and audio-classification for 2-D ones. Used by `winml run --audio`.
 */
#ifndef WM_TASKS_SPEECH_H
#define WM_TASKS_SPEECH_H

#include <stddef.h>
#include <stdint.h>

#include "winml/runtime.h"

typedef struct wm_speech wm_speech;

#define WM_SPEECH_NEEDS "a speech build folder with model.onnx (input_values), or an .onnx file in one"

/* Opens FOLDER (or FOLDER/MODEL.onnx) with session options so (NULL: defaults). *out: wm_speech_free. */
wm_status wm_speech_open(const char *model, const wm_session_opts *so, wm_speech **out, wm_error *err);
void wm_speech_free(wm_speech *s);

/* "automatic-speech-recognition" or "audio-classification". */
const char *wm_speech_task(const wm_speech *s);
/* id2label of config.json: label i, or NULL. */
const char *wm_speech_label(const wm_speech *s, size_t i);

/* The result of one file, owned by s (valid until the next run): the logits (classification: n = labels;
   ASR: frames x vocab) and, for ASR, the transcript. */
typedef struct wm_speech_out {
    const float *y;
    size_t n, frames;
    const char *text; /* ASR only; NULL otherwise */
    size_t samples;   /* the samples fed, at rate */
    int rate;
} wm_speech_out;

/* Decodes, resamples, normalizes and runs the audio file at path. */
wm_status wm_speech_run(wm_speech *s, const char *path, wm_speech_out *out, wm_error *err);
/* The same on an encoded audio file held in memory, n bytes at data (a table's audio.bytes cell); name names it in
   errors. */
wm_status wm_speech_run_bytes(wm_speech *s, const char *name, const uint8_t *data, size_t n, wm_speech_out *out,
                              wm_error *err);

/*
 * CTC greedy decoding of logits [frames, vocab] with tokens[vocab] (NULL entries: ids without a token, an error
 * when the argmax lands there): argmax per frame, repeats collapsed, pad dropped, delim -> ' ', joined, spaces
 * trimmed at both ends. *out: malloc'ed, the caller's to free.
 */
wm_status wm_ctc_greedy(const float *logits, size_t frames, size_t vocab, const char *const *tokens, const char *pad,
                        const char *delim, char **out, wm_error *err);

#endif
