/*
 * speech_eval.h - `winml eval --mode task` of a build folder that turns audio (or images) into text or labels,
 * over a data set of media and targets (tasks/media_table.h: a table file, a folder or a hub name from the local
 * caches; the media a column of paths relative to the table's folder - audio, audio_path, path, file or filename;
 * or --audio-column - or the `datasets` Audio / Image feature's struct, its NAME.bytes decoded in memory):
 *   automatic-speech-recognition of a speech encoder (wav2vec2 / HuBERT, tasks/speech.h: CTC) or a speech
 *     encoder-decoder (Whisper, tasks/s2s_text.h: generation as `winml run --audio` does, --language as there):
 *     against the transcript column (transcript, text, sentence, transcription; or --label-column): WER and CER
 *     at corpus level as jiwer computes them (eval/metrics.h), no normalization of case or punctuation (the
 *     transcripts are compared as written);
 *   image-to-text of an image encoder-decoder (TrOCR, tasks/s2s_text.h: as `winml run --image` does), the images
 *     in column image, img, image_path, path, file or filename (or --image-column), against the text column
 *     (as for ASR): CER and WER the same way;
 *   audio-classification: against the label column (label, labels, class; or --label-column), an id2label name
 *     or a class id: accuracy and F1 (binary for two classes, macro otherwise).
 * Each input is decoded, resampled / preprocessed and run as `winml run` does; the kind of build (a folder with
 * encoder_model.onnx is an encoder-decoder) picks the runner, the rest is one path.
 */
#ifndef WM_TASKS_SPEECH_EVAL_H
#define WM_TASKS_SPEECH_EVAL_H

#include "core/json.h"
#include "tasks/task_eval.h"

/* Writes "task", "dataset", "dataset_files", "predictions" (the generated texts in row order; not for
   audio-classification) and "metrics" {samples, wer, cer, reference_words, reference_chars} (ASR, image-to-text)
   or {samples, accuracy, f1, f1_average} (audio-classification) into the open object j. o->task, when given,
   must be the build's. */
wm_status wm_speech_task_eval(const char *build_dir, const wm_task_opts *o, wm_json *j, wm_error *err);

#endif
