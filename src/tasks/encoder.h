/*
 * encoder.h - running an encoder artifact on text: tokenize (a text or a
 * pair, truncated and padded to the model's fixed sequence length when it
 * has one), feed input_ids / attention_mask / token_type_ids in the model's
 * integer types, and read the first output: class logits [1, L], or hidden
 * states [1, S, H] mean-pooled over the attention mask (optionally L2
 * normalized), or an already pooled [1, H] embedding.
 * Used by `winml run` and `winml eval --mode task`.
 */
#ifndef WM_TASKS_ENCODER_H
#define WM_TASKS_ENCODER_H

#include "hf/tokenizer.h"
#include "winml/runtime.h"

typedef struct wm_encoder wm_encoder;

/* What an encoder needs, for messages. */
#define WM_ENCODER_NEEDS "a build folder with model.onnx and tokenizer files, or an .onnx file in one"

/*
 * Opens an encoder from a build folder (FOLDER/model.onnx) or an .onnx file
 * inside one (wm_model_path), with the tokenizer, config.json labels and
 * winml_build_config.json task of that folder; session options so (NULL:
 * defaults). *out: wm_encoder_free.
 */
wm_status wm_encoder_open(const char *model, const wm_session_opts *so, wm_encoder **out, wm_error *err);
void wm_encoder_free(wm_encoder *e);

/* The task recorded in the folder's winml_build_config.json ("" when none). */
const char *wm_encoder_task(const wm_encoder *e);
/* id2label of the folder's config.json: label i, or NULL. */
const char *wm_encoder_label(const wm_encoder *e, size_t i);
const wm_tokenizer *wm_encoder_tokenizer(const wm_encoder *e);

/*
 * Runs one text (and pair, may be NULL). *out receives n floats owned by e
 * (valid until the next call): the logits, or the pooled embedding.
 * pooled: the output was [1, S, H] and was mean-pooled (then normalized
 * when normalize is set).
 */
wm_status wm_encoder_run(wm_encoder *e, const char *text, const char *pair, int normalize, const float **out, size_t *n,
                         int *pooled, wm_error *err);

#endif
