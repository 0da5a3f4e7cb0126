/*
 * speech_eval.c - `winml eval --mode task` of a speech build (speech_eval.h): each row's audio file run as
 * `winml run --audio` does (tasks/speech.h), then WER / CER against the transcripts (ASR) or accuracy and F1
 * against the labels (audio-classification).
 */
#include "tasks/speech_eval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "core/table.h"
#include "eval/metrics.h"
#include "tasks/speech.h"

/* The first column of t named by want, else by one of the defaults; -1 when none. */
static int column(const wm_table *t, const char *want, const char *const *defaults) {
    if (want) return wm_table_col(t, want);
    int c = -1;
    for (size_t i = 0; defaults[i] && c < 0; i++) c = wm_table_col(t, defaults[i]);
    return c;
}

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

wm_status wm_speech_task_eval(const char *dir, const wm_task_opts *o, wm_json *j, wm_error *err) {
    static const char *const daudio[] = {"audio", "audio_path", "path", "file", "filename", NULL};
    static const char *const dtext[] = {"transcript", "text", "sentence", "transcription", NULL};
    static const char *const dlabel[] = {"label", "labels", "class", NULL};
    wm_session_opts so = {0};
    if (o->session) so = *o->session;
    so.threads = o->threads;
    wm_speech *sp = NULL;
    wm_status st = wm_speech_open(dir, &so, &sp, err);
    if (st) return st;
    int asr = !strcmp(wm_speech_task(sp), "automatic-speech-recognition");
    wm_table t = {0};
    wm_table_opts tabo = {.max_rows = o->samples > 0 ? (size_t)o->samples : 0, .max_line = o->max_line};
    int64_t *pred = NULL, *gold = NULL;
    size_t n_classes = 0;
    if ((st = wm_table_read(o->dataset, WM_TABLE_AUTO, &tabo, &t, err))) goto done;
    const char *want_a = o->col_audio ? o->col_audio : o->col_text;
    int ca = column(&t, want_a, daudio), cg = column(&t, o->col_label, asr ? dtext : dlabel);
    if (ca < 0 || cg < 0) {
        const char *want = ca < 0 ? want_a : o->col_label;
        if (want) st = wm_err(err, WM_ERR_INPUT, "%s: no column '%s'", o->dataset, want);
        else st = wm_err(err, WM_ERR_INPUT, "%s: no %s column (%s; or name it with --%s-column)", o->dataset,
                         ca < 0 ? "audio" : asr ? "transcript" : "label",
                         ca < 0 ? "audio, audio_path, path, file or filename"
                         : asr ? "transcript, text, sentence or transcription" : "label, labels or class",
                         ca < 0 ? "audio" : "label");
        goto done;
    }
    if (!t.n_rows) {
        st = wm_err(err, WM_ERR_INPUT, "%s: no data rows to evaluate", o->dataset);
        goto done;
    }
    if (!asr && (!(pred = malloc(t.n_rows * sizeof *pred)) || !(gold = malloc(t.n_rows * sizeof *gold)))) {
        st = wm_err(err, WM_ERR_NOMEM, "out of memory");
        goto done;
    }
    char base[4096];
    snprintf(base, sizeof base, "%s", o->dataset);
    char *slash = strrchr(base, '/');
    if (slash) *slash = 0;
    else snprintf(base, sizeof base, ".");
    size_t werr = 0, words = 0, cerr = 0, chars = 0;
    for (size_t r = 0; !st && r < t.n_rows; r++) {
        const char *p = wm_table_cell(&t, r, ca), *g = wm_table_cell(&t, r, cg);
        if (!p || !p[0] || !g || !g[0]) {
            st = wm_err(err, WM_ERR_INPUT, "%s:%zu: the %s cell is missing", o->dataset, t.lines[r],
                        !p || !p[0] ? "audio" : asr ? "transcript" : "label");
            break;
        }
        char full[8192];
        if (p[0] == '/') snprintf(full, sizeof full, "%s", p);
        else snprintf(full, sizeof full, "%s/%s", base, p);
        wm_speech_out out;
        if ((st = wm_speech_run(sp, full, &out, err))) break;
        if (asr) {
            size_t e1, n1, e2, n2;
            if (wm_metric_edit_errors(out.text, g, 0, (uint64_t)1 << 28, &e1, &n1) ||
                wm_metric_edit_errors(out.text, g, 1, (uint64_t)1 << 28, &e2, &n2)) {
                st = wm_err(err, WM_ERR_INPUT, "%s:%zu: the transcript is not UTF-8, or it and the model's output are "
                            "too long to compare (over 2^28 edit-distance cells)", o->dataset, t.lines[r]);
                break;
            }
            werr += e1, words += n1, cerr += e2, chars += n2;
        } else {
            long c = class_of(sp, out.n, g);
            if (c < 0) {
                st = wm_err(err, WM_ERR_INPUT, "%s:%zu: label '%s' is neither a name of config.json's id2label nor a "
                            "class id below %zu", o->dataset, t.lines[r], g, out.n);
                break;
            }
            size_t best = 0;
            for (size_t k = 1; k < out.n; k++) best = out.y[k] > out.y[best] ? k : best;
            pred[r] = (int64_t)best, gold[r] = c, n_classes = out.n;
        }
    }
    if (st) goto done;
    if (asr && (!words || !chars)) {
        st = wm_err(err, WM_ERR_INPUT, "%s: the transcripts are all empty (WER and CER are undefined)", o->dataset);
        goto done;
    }
    wm_json_str(j, "task", wm_speech_task(sp));
    wm_json_str(j, "dataset", o->dataset);
    wm_json_obj(j, "metrics");
    wm_json_uint(j, "samples", t.n_rows);
    if (asr) {
        wm_json_num(j, "wer", (double)werr / (double)words);
        wm_json_num(j, "cer", (double)cerr / (double)chars);
        wm_json_uint(j, "reference_words", words);
        wm_json_uint(j, "reference_chars", chars);
    } else {
        wm_json_num(j, "accuracy", wm_metric_accuracy(pred, gold, t.n_rows));
        wm_json_num(j, "f1", wm_metric_f1(pred, gold, t.n_rows, (int)n_classes));
        wm_json_str(j, "f1_average", n_classes <= 2 ? "binary" : "macro");
    }
    wm_json_obj_end(j);
done:
    free(pred);
    free(gold);
    wm_table_free(&t);
    wm_speech_free(sp);
    return st;
}
