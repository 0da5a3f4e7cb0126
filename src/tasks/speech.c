/* speech.c - a speech encoder's folder run on audio files (see speech.h). */
#include "tasks/speech.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"
#include "audio/features.h"
#include "core/error.h"
#include "core/file.h"
#include "hf/config.h"
#include "ops/op.h"

struct wm_speech {
    wm_session *s;
    wm_hf_config cfg;
    int has_cfg;
    char task[64];
    int i_vals, i_mask, out_idx;
    int32_t mask_dtype;
    int64_t fixed_n;       /* input_values' static length (0: any) */
    int rate, normalize;
    int64_t min_samples;   /* the feature encoder's receptive field (config.json's conv lists; 1 when unknown) */
    /* ASR: the vocabulary (id -> token) and the tokenizer's decoding settings */
    char **tokens;
    size_t n_tokens;
    char pad[64], delim[64];
    int lower, cleanup;
    float *out;
    size_t out_cap;
    char *text;
};

static int index_of(const wm_session *s, int outputs, const char *name) {
    size_t n = outputs ? wm_session_n_outputs(s) : wm_session_n_inputs(s);
    for (size_t i = 0; i < n; i++)
        if (!strcmp((outputs ? wm_session_output(s, i) : wm_session_input(s, i))->name, name)) return (int)i;
    return -1;
}

/* dir/name parsed into *root, NULL when the file is absent. */
static wm_status load_opt(const char *dir, const char *name, size_t cap, cJSON **root, wm_error *err) {
    char p[4300];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    *root = NULL;
    int present = 0;
    wm_status st = wm_input_present(p, &present, err);
    if (st || !present) return st;
    return wm_hf_json_load(p, cap, root, err);
}

/* A string member (or an AddedToken object's "content") of o copied into out; def when absent. */
static wm_status token_member(const cJSON *o, const char *name, const char *def, const char *file, char *out,
                              size_t n, wm_error *err) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, name);
    if (cJSON_IsObject(x)) x = cJSON_GetObjectItemCaseSensitive(x, "content");
    if (x && !cJSON_IsNull(x) && (!cJSON_IsString(x) || strlen(x->valuestring) >= n))
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected a token (a string under %zu bytes)", file, name, n);
    snprintf(out, n, "%s", cJSON_IsString(x) ? x->valuestring : def);
    return WM_OK;
}

/* sampling_rate and do_normalize of the feature extractor's settings fe (file names it in messages). */
static wm_status fe_settings(wm_speech *sp, const cJSON *fe, const char *file, wm_error *err) {
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(fe, "sampling_rate");
    const cJSON *nz = cJSON_GetObjectItemCaseSensitive(fe, "do_normalize");
    if (r && (!cJSON_IsNumber(r) || r->valuedouble < 1000 || r->valuedouble > 384000 ||
              r->valuedouble != (int)r->valuedouble))
        return wm_err(err, WM_ERR_INPUT, "%s: field 'sampling_rate': expected a whole number of Hz in [1000, 384000]",
                      file);
    if (r) sp->rate = (int)r->valuedouble;
    if (nz && !cJSON_IsBool(nz))
        return wm_err(err, WM_ERR_INPUT, "%s: field 'do_normalize': expected true or false", file);
    if (nz) sp->normalize = cJSON_IsTrue(nz);
    return WM_OK;
}

/* The feature extractor's settings: preprocessor_config.json, else processor_config.json's "feature_extractor"
   (transformers 5 saves a processor's parts in one file); 16000 Hz normalized when neither has them. The task of
   winml_build_config.json. */
static wm_status read_settings(wm_speech *sp, const char *dir, wm_error *err) {
    cJSON *pp = NULL, *bc = NULL;
    char file[4300];
    sp->rate = 16000;
    sp->normalize = 1;
    snprintf(file, sizeof file, "%s/preprocessor_config.json", dir);
    wm_status st = load_opt(dir, "preprocessor_config.json", 1 << 20, &pp, err);
    if (!st && pp) st = fe_settings(sp, pp, file, err);
    else if (!st) {
        snprintf(file, sizeof file, "%s/processor_config.json: feature_extractor", dir);
        st = load_opt(dir, "processor_config.json", 1 << 20, &pp, err);
        if (!st && pp) st = fe_settings(sp, cJSON_GetObjectItemCaseSensitive(pp, "feature_extractor"), file, err);
    }
    if (!st) st = load_opt(dir, "winml_build_config.json", 1 << 22, &bc, err);
    if (!st && bc) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(bc, "loader"), "task");
        if (cJSON_IsString(t)) snprintf(sp->task, sizeof sp->task, "%s", t->valuestring);
    }
    cJSON_Delete(pp);
    cJSON_Delete(bc);
    return st;
}

/* vocab.json (token -> id, flat) and tokenizer_config.json's pad / word delimiter tokens, for vocab ids. */
static wm_status read_vocab(wm_speech *sp, const char *dir, size_t vocab, wm_error *err) {
    char file[4300];
    snprintf(file, sizeof file, "%s/vocab.json", dir);
    cJSON *v = NULL, *tc = NULL;
    wm_status st = load_opt(dir, "vocab.json", 1 << 26, &v, err);
    if (!st && !v)
        st = wm_err(err, WM_ERR_INPUT, "%s: missing: CTC decoding needs the Wav2Vec2CTCTokenizer's vocab.json", file);
    if (!st && !(sp->tokens = calloc(vocab ? vocab : 1, sizeof *sp->tokens))) st = wm_err(err, WM_ERR_NOMEM, "out of memory");
    sp->n_tokens = vocab;
    const cJSON *e, *none = NULL;
    cJSON_ArrayForEach(e, (st ? none : v)) {
        if (cJSON_IsObject(e)) {
            st = wm_err(err, WM_ERR_UNSUPPORTED, "%s: a vocabulary per language ('%s': ...): choosing a target_lang "
                        "is not supported", file, e->string);
            break;
        }
        if (!cJSON_IsNumber(e) || e->valuedouble != (double)(int64_t)e->valuedouble || e->valuedouble < 0) {
            st = wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected a token id (a whole number >= 0)", file, e->string);
            break;
        }
        size_t id = (size_t)e->valuedouble;
        if (id >= vocab) continue; /* a token the head never emits */
        free(sp->tokens[id]);
        if (!(sp->tokens[id] = strdup(e->string))) {
            st = wm_err(err, WM_ERR_NOMEM, "out of memory");
            break;
        }
    }
    if (!st) st = load_opt(dir, "tokenizer_config.json", 1 << 22, &tc, err);
    if (!st) {
        char tf[4300];
        snprintf(tf, sizeof tf, "%s/tokenizer_config.json", dir);
        st = token_member(tc, "pad_token", "<pad>", tf, sp->pad, sizeof sp->pad, err);
        if (!st) st = token_member(tc, "word_delimiter_token", "|", tf, sp->delim, sizeof sp->delim, err);
        const cJSON *lc = cJSON_GetObjectItemCaseSensitive(tc, "do_lower_case");
        const cJSON *cu = cJSON_GetObjectItemCaseSensitive(tc, "clean_up_tokenization_spaces");
        sp->lower = cJSON_IsTrue(lc);
        sp->cleanup = cJSON_IsTrue(cu);
    }
    cJSON_Delete(v);
    cJSON_Delete(tc);
    return st;
}

wm_status wm_speech_open(const char *model, const wm_session_opts *so, wm_speech **out, wm_error *err) {
    *out = NULL;
    char file[4200], dir[4200], p[4300];
    wm_status st = wm_model_path(model, WM_SPEECH_NEEDS, file, sizeof file, dir, sizeof dir, err);
    if (st) return st;
    wm_speech *sp = calloc(1, sizeof *sp);
    if (!sp) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    if ((st = read_settings(sp, dir, err)) || (st = wm_session_new(file, so, &sp->s, err))) goto fail;
    sp->i_vals = index_of(sp->s, 0, "input_values");
    sp->i_mask = index_of(sp->s, 0, "attention_mask");
    if (sp->i_vals < 0 || wm_session_n_inputs(sp->s) != (size_t)(1 + (sp->i_mask >= 0))) {
        st = wm_err(err, WM_ERR_UNSUPPORTED, "%s: a speech model takes input_values (and attention_mask) only", file);
        goto fail;
    }
    const wm_io_info *vi = wm_session_input(sp->s, (size_t)sp->i_vals);
    if (vi->rank != 2 || vi->dtype != WM_DT_FLOAT || vi->dims[0] > 1) {
        st = wm_err(err, WM_ERR_UNSUPPORTED, "%s: input_values must be float32 [batch, samples]", file);
        goto fail;
    }
    sp->fixed_n = vi->dims[1] > 0 ? vi->dims[1] : 0;
    if (sp->i_mask >= 0) {
        const wm_io_info *mi = wm_session_input(sp->s, (size_t)sp->i_mask);
        sp->mask_dtype = mi->dtype;
        if (mi->rank != 2 || (mi->dtype != WM_DT_INT64 && mi->dtype != WM_DT_INT32)) {
            st = wm_err(err, WM_ERR_UNSUPPORTED, "%s: attention_mask must be int64 or int32 [batch, samples]", file);
            goto fail;
        }
    }
    sp->out_idx = index_of(sp->s, 1, "logits");
    const wm_io_info *lo = sp->out_idx >= 0 ? wm_session_output(sp->s, (size_t)sp->out_idx) : NULL;
    if (!lo || (lo->rank != 2 && lo->rank != 3)) {
        st = wm_err(err, WM_ERR_UNSUPPORTED, "%s: no output 'logits' of rank 2 (audio-classification) or 3 (CTC)", file);
        goto fail;
    }
    if (!sp->task[0])
        snprintf(sp->task, sizeof sp->task, "%s", lo->rank == 3 ? "automatic-speech-recognition" : "audio-classification");
    int asr = !strcmp(sp->task, "automatic-speech-recognition");
    if ((!asr && strcmp(sp->task, "audio-classification")) || (asr ? lo->rank != 3 : lo->rank != 2)) {
        st = wm_err(err, WM_ERR_UNSUPPORTED, "%s/winml_build_config.json: task '%s' with logits of rank %d (expected "
                    "automatic-speech-recognition [batch, frames, vocab] or audio-classification [batch, labels])", dir,
                    sp->task, (int)lo->rank);
        goto fail;
    }
    if (asr) {
        if (lo->dims[2] <= 0 || lo->dims[2] > (1 << 20)) {
            st = wm_err(err, WM_ERR_UNSUPPORTED, "%s: the logits' vocabulary dim must be static", file);
            goto fail;
        }
        if ((st = read_vocab(sp, dir, (size_t)lo->dims[2], err))) goto fail;
    }
    snprintf(p, sizeof p, "%s/config.json", dir);
    int present = 0;
    if ((st = wm_input_present(p, &present, err))) goto fail;
    if (present) {
        if ((st = wm_hf_config_load(p, &sp->cfg, err))) goto fail;
        sp->has_cfg = 1;
    }
    sp->min_samples = 1; /* samples for one frame: m = (m - 1) * stride + kernel, convs last first */
    const cJSON *ck = sp->has_cfg ? cJSON_GetObjectItemCaseSensitive(sp->cfg.root, "conv_kernel") : NULL;
    const cJSON *cs = sp->has_cfg ? cJSON_GetObjectItemCaseSensitive(sp->cfg.root, "conv_stride") : NULL;
    int nk = cJSON_IsArray(ck) ? cJSON_GetArraySize(ck) : 0;
    if (nk > 0 && nk <= 64 && cJSON_IsArray(cs) && cJSON_GetArraySize(cs) == nk)
        for (int i = nk - 1; i >= 0; i--) {
            const cJSON *k = cJSON_GetArrayItem(ck, i), *s = cJSON_GetArrayItem(cs, i);
            if (!cJSON_IsNumber(k) || !cJSON_IsNumber(s) || k->valuedouble < 1 || s->valuedouble < 1 ||
                k->valuedouble > 4096 || s->valuedouble > 4096) {
                sp->min_samples = 1;
                break;
            }
            sp->min_samples = (sp->min_samples - 1) * (int64_t)s->valuedouble + (int64_t)k->valuedouble;
        }
    *out = sp;
    return WM_OK;
fail:
    wm_speech_free(sp);
    return st;
}

void wm_speech_free(wm_speech *sp) {
    if (!sp) return;
    for (size_t i = 0; sp->tokens && i < sp->n_tokens; i++) free(sp->tokens[i]);
    free(sp->tokens);
    free(sp->out);
    free(sp->text);
    if (sp->has_cfg) wm_hf_config_free(&sp->cfg);
    wm_session_free(sp->s);
    free(sp);
}

const char *wm_speech_task(const wm_speech *sp) { return sp->task; }
const char *wm_speech_label(const wm_speech *sp, size_t i) {
    return sp->has_cfg && i < sp->cfg.n_labels ? sp->cfg.labels[i] : NULL;
}

/* transformers' clean_up_tokenization: " ." -> "." and the like, in place. */
static void clean_up(char *s) {
    static const char *const from[] = {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " 's", " 've", " 're"};
    static const char *const to[] = {".", "?", "!", ",", "'", "n't", "'m", "'s", "'ve", "'re"};
    for (size_t k = 0; k < sizeof from / sizeof from[0]; k++) {
        size_t fl = strlen(from[k]), tl = strlen(to[k]);
        char *w = s;
        for (const char *r = s; *r;) {
            if (!strncmp(r, from[k], fl)) {
                memcpy(w, to[k], tl);
                w += tl, r += fl;
            } else {
                *w++ = *r++;
            }
        }
        *w = 0;
    }
}

wm_status wm_ctc_greedy(const float *logits, size_t frames, size_t vocab, const char *const *tokens, const char *pad,
                        const char *delim, char **out, wm_error *err) {
    *out = NULL;
    size_t cap = 1, prev = (size_t)-1;
    for (size_t t = 0; t < frames; t++) { /* the length first: every kept token's bytes */
        const float *row = logits + t * vocab;
        size_t best = 0;
        for (size_t v = 1; v < vocab; v++) best = row[v] > row[best] ? v : best;
        if (!tokens[best]) return wm_err(err, WM_ERR_INPUT, "CTC decoding: id %zu has no token in vocab.json", best);
        if (best != prev) cap += strlen(tokens[best]);
        prev = best;
    }
    char *s = malloc(cap);
    if (!s) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    size_t n = 0;
    prev = (size_t)-1;
    for (size_t t = 0; t < frames; t++) {
        const float *row = logits + t * vocab;
        size_t best = 0;
        for (size_t v = 1; v < vocab; v++) best = row[v] > row[best] ? v : best;
        if (best != prev && strcmp(tokens[best], pad)) {
            const char *tok = strcmp(tokens[best], delim) ? tokens[best] : " ";
            size_t l = strlen(tok);
            memcpy(s + n, tok, l);
            n += l;
        }
        prev = best;
    }
    s[n] = 0;
    size_t a = 0;
    while (a < n && isspace((unsigned char)s[a])) a++;
    while (n > a && isspace((unsigned char)s[n - 1])) n--;
    memmove(s, s + a, n - a);
    s[n - a] = 0;
    *out = s;
    return WM_OK;
}

/* The audio file at path, or (mem set) the n encoded bytes at mem that path names: decoded and run. */
static wm_status run_audio(wm_speech *sp, const char *path, const uint8_t *mem, size_t mem_n, wm_speech_out *res,
                           wm_error *err) {
    memset(res, 0, sizeof *res);
    wm_audio au;
    wm_status st = mem ? wm_audio_decode(mem, mem_n, path, sp->rate, 0, &au, err)
                       : wm_audio_load(path, sp->rate, 0, &au, err);
    if (st) return st;
    size_t n = au.n, fed = sp->fixed_n ? (size_t)sp->fixed_n : n;
    float *x = NULL;
    void *mask = NULL;
    if (sp->fixed_n && n > fed) {
        st = wm_err(err, WM_ERR_INPUT, "%s: %zu samples at %d Hz, but the model's input_values take %lld (build with a "
                    "symbolic sequence_length to run any length)", path, n, sp->rate, (long long)sp->fixed_n);
        goto done;
    }
    if ((int64_t)n < sp->min_samples) {
        st = wm_err(err, WM_ERR_INPUT, "%s: %zu samples at %d Hz: the feature encoder needs at least %lld for one frame",
                    path, n, sp->rate, (long long)sp->min_samples);
        goto done;
    }
    if (sp->normalize) wm_audio_normalize(au.samples, n);
    /* a static length: zero-padded after normalizing, as the feature extractor pads (the mask hides it) */
    if (!(x = calloc(fed ? fed : 1, sizeof *x)) || !(mask = calloc(fed ? fed : 1, 8))) {
        st = wm_err(err, WM_ERR_NOMEM, "out of memory");
        goto done;
    }
    memcpy(x, au.samples, n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        if (sp->mask_dtype == WM_DT_INT32) ((int32_t *)mask)[i] = 1;
        else ((int64_t *)mask)[i] = 1;
    }
    wm_tensor in[2], o[8];
    in[sp->i_vals] = (wm_tensor){.dtype = WM_DT_FLOAT, .rank = 2, .dims = {1, (int64_t)fed}, .data = x};
    if (sp->i_mask >= 0)
        in[sp->i_mask] = (wm_tensor){.dtype = sp->mask_dtype, .rank = 2, .dims = {1, (int64_t)fed}, .data = mask};
    size_t no = wm_session_n_outputs(sp->s);
    if ((st = wm_session_run(sp->s, in, wm_session_n_inputs(sp->s), o, no < 8 ? no : 8, err))) goto done;
    if (sp->out_idx >= 8) {
        st = wm_err(err, WM_ERR_UNSUPPORTED, "the model has more than 8 outputs");
        goto done;
    }
    const wm_tensor *y = &o[sp->out_idx];
    size_t ny = (size_t)wm_tensor_numel(y);
    if (ny > sp->out_cap) {
        float *nb = realloc(sp->out, ny * sizeof *nb);
        if (!nb) {
            st = wm_err(err, WM_ERR_NOMEM, "out of memory");
            goto done;
        }
        sp->out = nb, sp->out_cap = ny;
    }
    wm_convert(y->dtype, y->data, WM_DT_FLOAT, sp->out, ny);
    res->y = sp->out;
    res->n = ny;
    res->samples = n;
    res->rate = sp->rate;
    if (sp->tokens) {
        size_t V = sp->n_tokens, frames = y->rank == 3 ? (size_t)y->dims[1] : 0;
        if (!frames || ny != frames * V) {
            st = wm_err(err, WM_ERR_INTERNAL, "logits of %zu values, expected frames x %zu", ny, V);
            goto done;
        }
        free(sp->text);
        sp->text = NULL;
        if ((st = wm_ctc_greedy(sp->out, frames, V, (const char *const *)sp->tokens, sp->pad, sp->delim, &sp->text,
                                err)))
            goto done;
        if (sp->lower)
            for (char *c = sp->text; *c; c++) *c = (char)tolower((unsigned char)*c);
        if (sp->cleanup) clean_up(sp->text);
        res->text = sp->text;
        res->frames = frames;
    }
done:
    free(x);
    free(mask);
    wm_audio_free(&au);
    return st;
}

wm_status wm_speech_run(wm_speech *sp, const char *path, wm_speech_out *res, wm_error *err) {
    return run_audio(sp, path, NULL, 0, res, err);
}

wm_status wm_speech_run_bytes(wm_speech *sp, const char *name, const uint8_t *data, size_t n, wm_speech_out *res,
                              wm_error *err) {
    static const uint8_t none = 0;
    return run_audio(sp, name, data ? data : &none, data ? n : 0, res, err);
}
