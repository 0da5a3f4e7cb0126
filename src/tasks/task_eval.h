/*
 * task_eval.h - `winml eval --mode task`: task metrics of a build on local
 * data (src/core/table.h tables, src/eval/metrics.h metrics).
 *   text-classification  columns text [+ pair] + label -> accuracy, F1
 *                        (a single-logit head predicts label 1 when its score > 0)
 *   text-ranking         columns query, passage, label -> MRR@10, nDCG@10 over queries
 *   feature-extraction   columns sentence1, sentence2, score -> Spearman of cosine vs score
 *   text-generation      a text file -> perplexity with a sliding window (max_length, stride),
 *                        as the transformers perplexity guide computes it
 *   image-classification / image-text retrieval (CLIP-style builds): tasks/image_eval.h
 *   automatic-speech-recognition (WER, CER) / audio-classification, and image-to-text (CER, WER) of an image
 *                        encoder-decoder (TrOCR): tasks/speech_eval.h
 * Results go into j as an object of metrics plus counts.
 */
#ifndef WM_TASKS_TASK_EVAL_H
#define WM_TASKS_TASK_EVAL_H

#include "core/json.h"
#include "winml/runtime.h"

typedef struct wm_task_opts {
    const char *task;     /* NULL: the build's own task */
    const char *dataset;  /* path: a table file, or (text tasks) a folder or hub name resolved by hf/dataset.h;
                             NULL: the build's recipe's eval.dataset (path, name as config, split, input_column) */
    const char *dataset_config, *split; /* the hub data set's config and split (NULL: none; test, validation, train) */
    const char *col_image, *col_caption; /* image tables: the image column; retrieval: the caption column */
    const char *col_audio;               /* speech tables: the audio column */
    const char *language;                /* a speech encoder-decoder's (Whisper) language; NULL: the folder's */
    const char *col_text, *col_pair, *col_label, *col_query, *col_passage, *col_s1, *col_s2, *col_score; /* NULL: defaults */
    long samples;         /* 0: all rows */
    long max_length, stride; /* perplexity window (0: 512, max_length / 2) */
    int threads;
    size_t max_line;      /* bytes of one line (a CSV record) of the table; 0: WM_TABLE_MAX_LINE */
    const wm_session_opts *session; /* the engine's bounds (max_memory, ...); NULL: defaults; threads above wins */
} wm_task_opts;

wm_status wm_task_eval(const char *build_dir, const wm_task_opts *o, wm_json *j, wm_error *err);

#endif
