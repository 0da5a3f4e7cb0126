/*
 * speech_eval.h - `winml eval --mode task` of a speech build folder (wav2vec2 / HuBERT, tasks/speech.h) over a
 * table (CSV, TSV, JSONL) of audio paths (column audio, audio_path, path, file or filename; or --audio-column),
 * relative to the table's folder:
 *   automatic-speech-recognition: against the transcript column (transcript, text, sentence, transcription; or
 *     --label-column): WER and CER at corpus level as jiwer computes them (eval/metrics.h), no normalization of
 *     case or punctuation (the transcripts are compared as written);
 *   audio-classification: against the label column (label, labels, class; or --label-column), an id2label name
 *     or a class id: accuracy and F1 (binary for two classes, macro otherwise).
 * Each file is decoded, resampled, normalized and run as `winml run --audio` does.
 */
#ifndef WM_TASKS_SPEECH_EVAL_H
#define WM_TASKS_SPEECH_EVAL_H

#include "core/json.h"
#include "tasks/task_eval.h"

/* Writes "task", "dataset" and "metrics" {samples, wer, cer, reference_words, reference_chars} (ASR) or {samples,
   accuracy, f1, f1_average} (audio-classification) into the open object j. */
wm_status wm_speech_task_eval(const char *build_dir, const wm_task_opts *o, wm_json *j, wm_error *err);

#endif
