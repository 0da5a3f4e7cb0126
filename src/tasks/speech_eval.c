/*
 * speech_eval.c - `winml eval --mode task` of a build that turns media into text or labels (speech_eval.h): each
 * row's audio (or image) run as `winml run --audio` (`--image`) does - a wav2vec2 / HuBERT build through
 * tasks/speech.h, an encoder-decoder (Whisper, TrOCR) through tasks/s2s_text.h - then WER / CER against the
 * transcripts or accuracy and F1 against the labels.
 */
#include "tasks/speech_eval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "eval/metrics.h"
#include "tasks/media_table.h"
#include "tasks/s2s_text.h"
#include "tasks/speech.h"

/* What a row runs on: a speech encoder (sp) or an encoder-decoder (s2s). */
typedef struct runner {
    wm_speech *sp;
    wm_s2s_text *s2s;
} runner;

/* The class id of label: an id2label name (exact, then ignoring case), else a whole number below n; -1: none. */
static long class_of(const wm_speech *sp, size_t n, const char *label) {
    for (int nocase = 0; nocase < 2; nocase++)
        for (size_t i = 0; i < n; i++) {
            const char *l = wm_speech_label(sp, i);
            if (l && !(nocase ? strcasecmp(l, label) : strcmp(l, label))) return (long)i;
        }
    char *end;
    long k = strtol(label, &end, 10);
    return *label && !*end && k >= 0 && (size_t)k < n ? k : -1;
}

/* Runs every row of the data set: text tasks (ASR, image-to-text) score WER / CER, audio-classification accuracy
   and F1. Writes "task", "dataset", "dataset_files" and "metrics" into j. */
static wm_status evaluate(runner *rn, const char *task, const wm_task_opts *o, wm_json *j, wm_error *err) {
    static const char *const daudio[] = {"audio", "audio_path", "path", "file", "filename", NULL};
    static const char *const dimage[] = {"image", "img", "image_path", "path", "file", "filename", NULL};
    static const char *const dtext[] = {"transcript", "text", "sentence", "transcription", NULL};
    static const char *const dlabel[] = {"label", "labels", "class", NULL};
    int image = !strcmp(task, "image-to-text"), classify = !strcmp(task, "audio-classification");
    wm_media_cols cols = {.kind = image ? "image" : "audio", .media_defaults = image ? dimage : daudio,
                          .what = classify ? "label" : image ? "text" : "transcript", .want_target = o->col_label,
                          .target_flag = "label", .target_defaults = classify ? dlabel : dtext};
    cols.want_media = image ? o->col_image : o->col_audio ? o->col_audio : o->col_text;
    wm_json_str(j, "task", task);
    wm_json_str(j, "dataset", o->dataset);
    wm_media_rows rows;
    wm_status st = wm_media_rows_read(o, &cols, &rows, j, err);
    size_t n = rows.n;
    int64_t *pred = NULL, *gold = NULL;
    size_t n_classes = 0, werr = 0, words = 0, cerr = 0, chars = 0;
    if (!st && classify && (!(pred = malloc(n * sizeof *pred)) || !(gold = malloc(n * sizeof *gold))))
        st = wm_err(err, WM_ERR_NOMEM, "out of memory");
    if (!st && !classify) wm_json_arr(j, "predictions");
    for (size_t r = 0; !st && r < n; r++) {
        const wm_media_row *e = &rows.v[r];
        const char *text = NULL;
        wm_speech_out out = {0};
        if (rn->s2s) st = wm_s2s_text_run(rn->s2s, e->name, e->data, e->n, &text, err);
        else if (!(st = e->data ? wm_speech_run_bytes(rn->sp, e->name, e->data, e->n, &out, err)
                                : wm_speech_run(rn->sp, e->name, &out, err)))
            text = out.text;
        if (st) break;
        if (!classify) {
            size_t e1, n1, e2, n2;
            if (wm_metric_edit_errors(text, e->target, 0, (uint64_t)1 << 28, &e1, &n1) ||
                wm_metric_edit_errors(text, e->target, 1, (uint64_t)1 << 28, &e2, &n2)) {
                st = wm_err(err, WM_ERR_INPUT, "%s:%zu: the %s is not UTF-8, or it and the model's output are too "
                            "long to compare (over 2^28 edit-distance cells)", o->dataset, e->line, cols.what);
                break;
            }
            werr += e1, words += n1, cerr += e2, chars += n2;
            wm_json_str(j, NULL, text);
            continue;
        }
        long c = class_of(rn->sp, out.n, e->target);
        if (c < 0) {
            st = wm_err(err, WM_ERR_INPUT, "%s:%zu: label '%.60s' is neither a name of config.json's id2label nor a "
                        "class id below %zu", o->dataset, e->line, e->target, out.n);
            break;
        }
        size_t best = 0;
        for (size_t k = 1; k < out.n; k++) best = out.y[k] > out.y[best] ? k : best;
        pred[r] = (int64_t)best, gold[r] = c, n_classes = out.n;
    }
    if (!st && !classify) {
        wm_json_arr_end(j);
        if (!words || !chars)
            st = wm_err(err, WM_ERR_INPUT, "%s: the %ss are all empty (WER and CER are undefined)", o->dataset,
                        cols.what);
    }
    if (!st) {
        wm_json_obj(j, "metrics");
        wm_json_uint(j, "samples", n);
        if (!classify) {
            wm_json_num(j, "wer", (double)werr / (double)words);
            wm_json_num(j, "cer", (double)cerr / (double)chars);
            wm_json_uint(j, "reference_words", words);
            wm_json_uint(j, "reference_chars", chars);
        } else {
            wm_json_num(j, "accuracy", wm_metric_accuracy(pred, gold, n));
            wm_json_num(j, "f1", wm_metric_f1(pred, gold, n, (int)n_classes));
            wm_json_str(j, "f1_average", n_classes <= 2 ? "binary" : "macro");
        }
        wm_json_obj_end(j);
    }
    free(pred);
    free(gold);
    wm_media_rows_free(&rows);
    return st;
}

wm_status wm_speech_task_eval(const char *dir, const wm_task_opts *o, wm_json *j, wm_error *err) {
    runner rn = {0};
    wm_status st;
    const char *task;
    if (wm_s2s_text_folder(dir)) { /* an encoder-decoder: Whisper (speech) or TrOCR (images) */
        if ((st = wm_s2s_text_open(dir, o->threads, o->language, &rn.s2s, err))) return st;
        task = wm_s2s_text_speech(rn.s2s) ? "automatic-speech-recognition" : "image-to-text";
    } else {
        wm_session_opts so = {0};
        if (o->session) so = *o->session;
        so.threads = o->threads;
        if ((st = wm_speech_open(dir, &so, &rn.sp, err))) return st;
        task = wm_speech_task(rn.sp);
        if (o->language) st = wm_err(err, WM_ERR_USAGE, "%s: --language applies to a speech encoder-decoder build "
                                     "(Whisper)", dir);
    }
    if (!st && o->task && strcmp(o->task, task))
        st = wm_err(err, WM_ERR_USAGE, "%s: --task %s: this build does %s", dir, o->task, task);
    if (!st) st = evaluate(&rn, task, o, j, err);
    wm_speech_free(rn.sp);
    wm_s2s_text_free(rn.s2s);
    return st;
}
