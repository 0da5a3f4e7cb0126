/*
 * s2s_text.h - the text an encoder-decoder build folder (Optimum's seq2seq layout: encoder_model.onnx,
 * decoder_model.onnx, decoder_with_past_model.onnx) generates for ONE input, as `winml run --audio` / `--image`
 * does for a single file on such a folder:
 *   - speech (Whisper: the encoder reads input_features): the audio decoded and turned into log-mel features
 *     (tasks/speech_s2s.h), the decoder prompt of the folder's generation_config.json (the language given, else
 *     forced_decoder_ids' or detected; task transcribe unless forced), greedy or the folder's num_beams up to
 *     max_length as transformers' Whisper sets it; audio over a 30 s window is transcribed window by window with
 *     timestamps (llm/whisper_gen.h), their tokens left out of the text;
 *   - images (TrOCR: the encoder reads pixel_values): the image decoded and preprocessed as the folder's
 *     preprocessor_config.json says (tasks/vision.h), the decoder started from decoder_start_token_id.
 * The generated ids are decoded by the folder's tokenizer.json with the special tokens skipped (transformers'
 * batch_decode(skip_special_tokens=True)). An input is a file, or its encoded bytes held in memory (a table cell).
 */
#ifndef WM_TASKS_S2S_TEXT_H
#define WM_TASKS_S2S_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "hf/tokenizer.h"

typedef struct wm_s2s_text wm_s2s_text;

/* 1 when folder dir holds encoder_model.onnx (an encoder-decoder build). */
int wm_s2s_text_folder(const char *dir);

/*
 * Opens the build folder dir (threads 0: all cores); language (NULL: the folder's) is Whisper's --language.
 * A folder without tokenizer.json, or whose encoder reads input_ids (a text-to-text build), is WM_ERR_USAGE.
 * *out: wm_s2s_text_free.
 */
wm_status wm_s2s_text_open(const char *dir, int threads, const char *language, wm_s2s_text **out, wm_error *err);
void wm_s2s_text_free(wm_s2s_text *t);

/* 1 for a speech build (input_features), 0 for an image build (pixel_values). */
int wm_s2s_text_speech(const wm_s2s_text *t);

/*
 * The generated text of the file at name, or (data set) of the n encoded bytes at data that name names in errors.
 * *text is owned by t, valid until the next run. Errors name the input.
 */
wm_status wm_s2s_text_run(wm_s2s_text *t, const char *name, const uint8_t *data, size_t n, const char **text,
                          wm_error *err);

/*
 * ids[0..n) decoded by tok into *out (the caller's: wm_tok_buf_free) with the special tokens skipped and Whisper's
 * timestamp tokens (ids from ts_begin up; ts_begin < 0: none) left out.
 */
wm_status wm_s2s_text_decode(const wm_tokenizer *tok, const int64_t *ids, int64_t n, int64_t ts_begin, wm_tok_buf *out,
                             wm_error *err);

#endif
