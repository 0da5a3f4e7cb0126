/*
 * encoder.h - running an encoder artifact on text: tokenize (a text or a
 * pair), feed input_ids / attention_mask / token_type_ids in the model's
 * integer types, and read the first output: class logits [1, L], or hidden
 * states [1, S, H] pooled into one embedding, or an already pooled [1, H]
 * embedding.
 *
 * A folder with sentence-transformers' files (hf/sbert.h: modules.json,
 * sentence_bert_config.json, the Pooling module's config.json; winml build
 * carries them) is run as sentence-transformers runs it: the text lowercased
 * when do_lower_case, truncated to max_seq_length tokens (longest_first, no
 * padding), the hidden states pooled by the Pooling config's modes
 * (concatenated in its order) and L2-normalized only when a Normalize module
 * follows. Without them: tokenizer.json's own truncation and padding, the
 * mean over the attention mask, L2-normalized. A model built with a static
 * sequence length is truncated and padded to it.
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

/*
 * The task of build folder `folder`: its winml_build_config.json loader.task into task[n] ("" when the file or the
 * field is absent). A file that is there but not a regular file or not valid JSON: WM_ERR_INPUT naming it.
 */
wm_status wm_folder_task(const char *folder, char *task, size_t n, wm_error *err);

/* The task recorded in the folder's winml_build_config.json ("" when none). */
const char *wm_encoder_task(const wm_encoder *e);
/* id2label of the folder's config.json: label i, or NULL. */
const char *wm_encoder_label(const wm_encoder *e, size_t i);
const wm_tokenizer *wm_encoder_tokenizer(const wm_encoder *e);

/*
 * Runs one text (and pair, may be NULL). *out receives n floats owned by e
 * (valid until the next call): the logits, or the pooled embedding.
 * pooled: the output was [1, S, H] and was pooled (see above). normalize 0
 * turns the L2 normalization off (--no-normalize); 1 normalizes where the
 * folder's modules say so (or always, without modules.json).
 */
wm_status wm_encoder_run(wm_encoder *e, const char *text, const char *pair, int normalize, const float **out, size_t *n,
                         int *pooled, wm_error *err);

#endif
