/*
 * whisper_fallback.c - the settings of Whisper's temperature fallback (whisper_gen.h): the thresholds from
 * generation_config.json, the --temperature list, and the compression ratio transformers computes with zlib.
 */
#include "llm/whisper_gen.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <zlib.h>

#include "core/error.h"
#include "core/file.h"
#include "hf/config.h"
#include "hf/tokenizer.h"

void wm_whisper_fallback_default(wm_whisper_fallback *f) {
    memset(f, 0, sizeof *f);
    f->compression_ratio_threshold = f->logprob_threshold = f->no_speech_threshold = NAN;
    f->top_k = 50; /* transformers' GenerationConfig defaults */
    f->top_p = 1.0;
    f->prev_sot = -1;
}

/* A number field key of gc (absent or null: untouched) into *out; WM_ERR_INPUT naming file and key otherwise. */
static wm_status num_field(const cJSON *gc, const char *file, const char *key, double *out, wm_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(gc, key);
    if (!v || cJSON_IsNull(v)) return WM_OK;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || fabs(v->valuedouble) > 1e6)
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected a number (or null)", file, key);
    *out = v->valuedouble;
    return WM_OK;
}

wm_status wm_whisper_fallback_from_folder(const char *dir, wm_whisper_fallback *f, wm_error *err) {
    char p[4200];
    int present = 0;
    snprintf(p, sizeof p, "%s/generation_config.json", dir);
    wm_status s = wm_input_present(p, &present, err);
    if (s || !present) return s;
    cJSON *gc = NULL;
    if ((s = wm_hf_json_load(p, WM_HF_CONFIG_MAX_BYTES, &gc, err))) return s;
    int set = 0;
    s = num_field(gc, p, "compression_ratio_threshold", &f->compression_ratio_threshold, err);
    if (!s) s = num_field(gc, p, "logprob_threshold", &f->logprob_threshold, err);
    if (!s) s = num_field(gc, p, "no_speech_threshold", &f->no_speech_threshold, err);
    if (!s) s = num_field(gc, p, "top_p", &f->top_p, err);
    if (!s) s = wm_s2s_json_int(gc, p, "top_k", 0, &f->top_k, &set, err);
    if (!s && !(f->top_p > 0 && f->top_p <= 1))
        s = wm_err(err, WM_ERR_INPUT, "%s: field 'top_p': %g is not in (0, 1]", p, f->top_p);
    if (!s) s = wm_s2s_json_int(gc, p, "prev_sot_token_id", 0, &f->prev_sot, &set, err);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(gc, "condition_on_prev_tokens");
    if (!s && c && !cJSON_IsNull(c) && !cJSON_IsBool(c))
        s = wm_err(err, WM_ERR_INPUT, "%s: field 'condition_on_prev_tokens': expected true or false", p);
    if (!s && c && cJSON_IsBool(c)) f->condition = cJSON_IsTrue(c);
    cJSON_Delete(gc);
    return s;
}

wm_status wm_whisper_prompt_ids(const wm_tokenizer *tok, const char *flag, const char *text, int64_t **ids, size_t *n,
                                wm_error *err) {
    *ids = NULL, *n = 0;
    static const char sop[] = "<|startofprev|>";
    int32_t first = wm_tokenizer_token_to_id(tok, sop, sizeof sop - 1);
    if (first < 0) return wm_err(err, WM_ERR_INPUT, "%s: the tokenizer has no '%s' token (the prompt starts with it)",
                                 flag, sop);
    const char *a = text, *b = text + strlen(text); /* Python's strip() of ASCII whitespace */
    while (a < b && (*a == ' ' || (*a >= '\t' && *a <= '\r'))) a++;
    while (b > a && (b[-1] == ' ' || (b[-1] >= '\t' && b[-1] <= '\r'))) b--;
    if (a == b) return wm_err(err, WM_ERR_USAGE, "%s: an empty prompt", flag);
    size_t len = (size_t)(b - a) + 1;
    char *spaced = malloc(len + 1);
    if (!spaced) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    spaced[0] = ' ';
    memcpy(spaced + 1, a, len - 1);
    spaced[len] = 0;
    wm_encoding e;
    wm_encoding_init(&e);
    wm_encode_opts o = wm_encode_opts_default();
    o.add_special_tokens = 0;
    o.use_defaults = 0;
    wm_status s = wm_tokenizer_encode(tok, spaced, len, NULL, 0, &o, &e, err);
    for (size_t i = 0; !s && i < e.n; i++)
        if (wm_tokenizer_is_special(tok, e.ids[i])) {
            size_t tl = 0;
            const char *t = wm_tokenizer_id_to_token(tok, e.ids[i], &tl);
            s = wm_err(err, WM_ERR_USAGE, "%s: the text holds the special token '%.*s' (not allowed in a prompt)", flag,
                       (int)(t ? tl : 0), t ? t : "");
        }
    if (!s && !(*ids = malloc((e.n + 1) * sizeof **ids))) s = wm_err(err, WM_ERR_NOMEM, "out of memory");
    if (!s) {
        (*ids)[0] = first;
        for (size_t i = 0; i < e.n; i++) (*ids)[i + 1] = e.ids[i];
        *n = e.n + 1;
    }
    wm_encoding_free(&e);
    free(spaced);
    return s;
}

wm_status wm_whisper_parse_temperatures(const char *flag, const char *s, wm_whisper_fallback *f, wm_error *err) {
    size_t n = 0;
    const char *q = s;
    while (*q) {
        char *end;
        double t = strtod(q, &end);
        if (end == q || !(t >= 0 && t <= 100) || (*end && *end != ',') || n == WM_WHISPER_MAX_TEMPS)
            return wm_err(err, WM_ERR_USAGE, "%s %s: expected temperatures from 0 to 100 separated by commas (at most "
                          "%d), e.g. 0,0.2,0.4,0.6,0.8,1", flag, s, WM_WHISPER_MAX_TEMPS);
        f->temps[n++] = t;
        q = *end ? end + 1 : end;
        if (*end && !*q) return wm_err(err, WM_ERR_USAGE, "%s %s: a trailing comma", flag, s);
    }
    if (!n) return wm_err(err, WM_ERR_USAGE, "%s: no temperature given", flag);
    f->n_temps = n;
    return WM_OK;
}

double wm_whisper_compression_ratio(const int64_t *tok, int64_t n, int64_t vocab) {
    int w = (int)(log2((double)(vocab > 1 ? vocab : 2)) / 8) + 1;
    if (n <= 0) return 0;
    size_t len = (size_t)n * (size_t)w;
    uLongf cap = compressBound((uLong)len);
    unsigned char *raw = malloc(len), *z = malloc(cap);
    double r = NAN;
    if (raw && z) {
        for (int64_t i = 0; i < n; i++)
            for (int b = 0; b < w; b++) raw[(size_t)i * (size_t)w + (size_t)b] = (unsigned char)((uint64_t)tok[i] >> (8 * b));
        if (compress2(z, &cap, raw, (uLong)len, Z_DEFAULT_COMPRESSION) == Z_OK) r = (double)len / (double)cap;
    }
    free(raw);
    free(z);
    return r;
}
