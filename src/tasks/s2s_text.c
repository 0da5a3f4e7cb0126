/* s2s_text.c - one input's generated text on an encoder-decoder build folder (see s2s_text.h). */
#include "tasks/s2s_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file.h"
#include "hf/tokenizer.h"
#include "llm/seq2seq.h"
#include "llm/whisper_gen.h"
#include "tasks/speech_s2s.h"
#include "tasks/vision.h"

struct wm_s2s_text {
    char dir[4096];
    wm_s2s *m;
    wm_tokenizer *tok;
    wm_s2s_gen g; /* the folder's settings and prompt; each run works on a copy */
    int speech;
    wm_tok_buf text;
};

int wm_s2s_text_folder(const char *dir) {
    char p[4200];
    snprintf(p, sizeof p, "%s/encoder_model.onnx", dir);
    FILE *f = fopen(p, "rb");
    if (f) fclose(f);
    return f != NULL;
}

wm_status wm_s2s_text_open(const char *dir, int threads, const char *language, wm_s2s_text **out, wm_error *err) {
    *out = NULL;
    wm_s2s_text *t = calloc(1, sizeof *t);
    if (!t) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    snprintf(t->dir, sizeof t->dir, "%s", dir);
    wm_s2s_gen_default(&t->g);
    char p[4200];
    int present = 0;
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    wm_status st = wm_s2s_gen_from_folder(dir, &t->g, err);
    if (!st) st = wm_s2s_open(dir, threads, &t->m, err);
    if (!st && !wm_s2s_speech(t->m) && !wm_s2s_image(t->m))
        st = wm_err(err, WM_ERR_USAGE, "%s: a text-to-text encoder-decoder (its encoder reads input_ids) has no "
                    "task evaluation here; speech (input_features) and image (pixel_values) builds do", dir);
    t->speech = t->m && wm_s2s_speech(t->m);
    if (!st && t->speech) st = wm_s2s_prompt_from_folder(dir, language, NULL, &t->g, err);
    if (!st && !t->speech && language)
        st = wm_err(err, WM_ERR_USAGE, "%s: --language applies to a speech encoder-decoder (Whisper)", dir);
    if (!st) st = wm_input_present(p, &present, err);
    if (!st && !present) st = wm_err(err, WM_ERR_USAGE, "%s: no tokenizer.json to decode the generated ids", dir);
    if (!st) st = wm_tokenizer_load_dir(dir, &t->tok, err);
    if (st) {
        wm_s2s_text_free(t);
        return st;
    }
    *out = t;
    return WM_OK;
}

void wm_s2s_text_free(wm_s2s_text *t) {
    if (!t) return;
    wm_s2s_free(t->m);
    wm_tokenizer_free(t->tok);
    wm_tok_buf_free(&t->text);
    free(t);
}

int wm_s2s_text_speech(const wm_s2s_text *t) { return t->speech; }

wm_status wm_s2s_text_decode(const wm_tokenizer *tok, const int64_t *ids, int64_t n, int64_t ts_begin, wm_tok_buf *out,
                             wm_error *err) {
    int32_t *t32 = malloc((size_t)(n > 0 ? n : 1) * sizeof *t32);
    if (!t32) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    size_t k = 0;
    for (int64_t i = 0; i < n; i++)
        if (ts_begin < 0 || ids[i] < ts_begin) t32[k++] = (int32_t)ids[i];
    wm_status st = wm_tokenizer_decode(tok, t32, k, 1, out, err);
    free(t32);
    return st;
}

wm_status wm_s2s_text_run(wm_s2s_text *t, const char *name, const uint8_t *data, size_t n, const char **text,
                          wm_error *err) {
    *text = NULL;
    wm_s2s_gen *g = malloc(sizeof *g);
    if (!g) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    *g = t->g;
    float *x = NULL;
    int64_t *out = NULL, width = 0, frames = 0, valid = 0, P = 1, ts = -1;
    const int64_t *ids = NULL;
    wm_whisper_out w;
    memset(&w, 0, sizeof w);
    wm_status st = WM_OK;
    if (t->speech) {
        int64_t mels = wm_s2s_n_mels(t->m);
        st = data ? wm_speech_s2s_features_bytes(t->dir, mels, name, data, n, &x, &frames, &valid, NULL, err)
                  : wm_speech_s2s_features(t->dir, mels, &name, 1, &x, &frames, &valid, NULL, err);
        int long_form = !st && frames > g->window_frames;
        if (long_form && !g->timestamps) st = wm_whisper_timestamps_on(t->dir, g, err); /* implied over a window */
        wm_whisper_fallback fb; /* generation_config.json's thresholds; greedy (no temperature: transformers') */
        wm_whisper_fallback_default(&fb);
        if (!st) st = wm_whisper_fallback_from_folder(t->dir, &fb, err);
        /* Whisper's sequential loop, short-form audio too (transformers' generate) */
        if (!st && !(st = wm_whisper_generate(t->m, x, 1, mels, frames, long_form ? &valid : NULL, g, 0, &fb, &w, err)))
            ids = w.ids, width = w.width, P = 0, ts = g->ts_begin;
    } else {
        int h = 0, wi = 0;
        st = data ? wm_vision_pixels_bytes(t->dir, name, data, n, 0, &x, &h, &wi, err)
                  : wm_vision_pixels(t->dir, name, 0, &x, &h, &wi, err);
        if (!st && !(st = wm_s2s_generate_pixels(t->m, x, 1, 3, h, wi, g, &out, &width, err))) ids = out;
    }
    if (!st) {
        wm_tok_buf_free(&t->text);
        st = wm_s2s_text_decode(t->tok, ids + P, width - P, ts, &t->text, err);
    }
    if (!st) *text = t->text.n ? t->text.p : "";
    free(x);
    free(out);
    free(g);
    wm_whisper_out_free(&w);
    return st;
}
