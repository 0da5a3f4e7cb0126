/*
 * whisper_gen.c - Whisper's side of encoder-decoder generation (whisper_gen.h): the decoder prompt from
 * generation_config.json (language / task / <|notimestamps|> tokens), max_length as transformers' Whisper sets it,
 * the timestamp logits rules, and the sequential transcription in 30 s windows (long-form) over seq2seq.c's search.
 */
#include "llm/whisper_gen.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "core/file.h"
#include "hf/config.h"

/* ---------------------------------------------------------------- speech prompt */

/* The id of key in map (an object of token -> id), -1 when absent; WM_ERR_INPUT when the value is no id. */
static wm_status map_id(const cJSON *map, const char *file, const char *field, const char *key, int64_t *id,
                        wm_error *err) {
    const cJSON *v = map ? cJSON_GetObjectItemCaseSensitive(map, key) : NULL;
    *id = -1;
    if (!v) return WM_OK;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0 || v->valuedouble > 1e9)
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s': '%s' is not a token id", file, field, key);
    *id = (int64_t)v->valuedouble;
    return WM_OK;
}

/* forced_decoder_ids [[1, id], [2, id], ...] (ids may be null) into ids[0..*n) by position 1.. (-1 for null). */
static wm_status forced_ids(const cJSON *f, const char *file, int64_t *ids, size_t *n, wm_error *err) {
    *n = 0;
    if (!f || cJSON_IsNull(f)) return WM_OK;
    const cJSON *it;
    if (!cJSON_IsArray(f)) return wm_err(err, WM_ERR_INPUT, "%s: field 'forced_decoder_ids': expected a list", file);
    cJSON_ArrayForEach(it, f) {
        const cJSON *pos = cJSON_GetArrayItem(it, 0), *id = cJSON_GetArrayItem(it, 1);
        if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2 || !cJSON_IsNumber(pos) ||
            pos->valuedouble != (double)(*n + 1) || *n + 2 > WM_S2S_MAX_INIT ||
            !(cJSON_IsNull(id) || (cJSON_IsNumber(id) && id->valuedouble == floor(id->valuedouble) &&
                                   id->valuedouble >= 0 && id->valuedouble <= 1e9)))
            return wm_err(err, WM_ERR_INPUT, "%s: field 'forced_decoder_ids': expected [[1, id], [2, id], ...] "
                          "(positions 1, 2, ... in order, at most %d)", file, WM_S2S_MAX_INIT - 2);
        ids[(*n)++] = cJSON_IsNull(id) ? -1 : (int64_t)id->valuedouble;
    }
    return WM_OK;
}

static wm_status build_prompt(const cJSON *gc, const cJSON *cfg, const char *file, const char *cfile,
                              const char *language, const char *task, wm_s2s_gen *g, wm_error *err) {
    const cJSON *l2i = cJSON_GetObjectItemCaseSensitive(gc, "lang_to_id");
    const cJSON *t2i = cJSON_GetObjectItemCaseSensitive(gc, "task_to_id");
    if (l2i && !cJSON_IsObject(l2i)) return wm_err(err, WM_ERR_INPUT, "%s: field 'lang_to_id': expected an object", file);
    if (t2i && !cJSON_IsObject(t2i)) return wm_err(err, WM_ERR_INPUT, "%s: field 'task_to_id': expected an object", file);
    const cJSON *gl = cJSON_GetObjectItemCaseSensitive(gc, "language"), *gt = cJSON_GetObjectItemCaseSensitive(gc, "task");
    if (!language && cJSON_IsString(gl)) language = gl->valuestring; /* a generation config may set them itself */
    if (!task && cJSON_IsString(gt)) task = gt->valuestring;
    int64_t nts = -1, forced[WM_S2S_MAX_INIT];
    size_t nf = 0;
    int has_nts = 0;
    wm_status s = wm_s2s_json_int(gc, file, "no_timestamps_token_id", 0, &nts, &has_nts, err);
    if (s) return s;
    if (g->decoder_start_token_id < 0)
        return wm_err(err, WM_ERR_INPUT, "%s: field 'decoder_start_token_id': missing (the prompt starts with it)", file);
    size_t n = 0;
    g->prompt[n++] = g->decoder_start_token_id;
    g->lang_slot = -1;
    if (!language && !task) { /* forced_decoder_ids only when neither is given (transformers' rule) */
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(gc, "forced_decoder_ids");
        const char *ff = file;
        if ((!f || cJSON_IsNull(f)) && cfg) { /* config.json's, as transformers falls back to */
            f = cJSON_GetObjectItemCaseSensitive(cfg, "forced_decoder_ids");
            ff = cfile;
        }
        if ((s = forced_ids(f, ff, forced, &nf, err))) return s;
        for (size_t i = 0; i < nf; i++) g->prompt[n++] = forced[i];
    }
    int64_t lang = -1;
    if (language) {
        char tok[80];
        snprintf(tok, sizeof tok, language[0] == '<' ? "%s" : "<|%s|>", language);
        for (char *c = tok; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
        if ((s = map_id(l2i, file, "lang_to_id", tok, &lang, err))) return s;
        if (lang < 0)
            return wm_err(err, WM_ERR_USAGE, "--language %s: %s has no '%s' in lang_to_id", language, file, tok);
    }
    g->n_langs = 0;
    int undefined = n <= 1 || g->prompt[1] < 0;
    if (lang >= 0 || (l2i && undefined)) {
        if (n > 1) g->prompt[1] = lang;
        else g->prompt[n++] = lang;
        if (lang < 0) { /* detected per row from these */
            g->lang_slot = 1;
            const cJSON *e;
            cJSON_ArrayForEach(e, l2i) {
                if (g->n_langs == WM_S2S_MAX_LANGS)
                    return wm_err(err, WM_ERR_INPUT, "%s: field 'lang_to_id': more than %d languages", file,
                                  WM_S2S_MAX_LANGS);
                if ((s = map_id(l2i, file, "lang_to_id", e->string, &g->langs[g->n_langs], err))) return s;
                g->n_langs++;
            }
            if (!g->n_langs) return wm_err(err, WM_ERR_INPUT, "%s: field 'lang_to_id': empty", file);
        }
    }
    int64_t tid = -1;
    if (task) {
        if (strcmp(task, "transcribe") && strcmp(task, "translate"))
            return wm_err(err, WM_ERR_USAGE, "--task %s: expected transcribe or translate", task);
        if ((s = map_id(t2i, file, "task_to_id", task, &tid, err))) return s;
        if (tid < 0) return wm_err(err, WM_ERR_USAGE, "--task %s: %s has no '%s' in task_to_id", task, file, task);
    } else if (language && t2i) {
        if ((s = map_id(t2i, file, "task_to_id", "transcribe", &tid, err))) return s;
        const cJSON *e; /* only when no task token is there yet */
        cJSON_ArrayForEach(e, t2i) for (size_t i = 1; i < n; i++) if (cJSON_IsNumber(e) && g->prompt[i] == (int64_t)e->valuedouble) tid = -1;
    }
    if (tid >= 0) { /* replace a task token already there, else append */
        int found = 0;
        const cJSON *e;
        for (size_t i = 1; i < n; i++)
            cJSON_ArrayForEach(e, t2i) if (cJSON_IsNumber(e) && g->prompt[i] == (int64_t)e->valuedouble) {
                g->prompt[i] = tid;
                found = 1;
            }
        if (!found) g->prompt[n++] = tid;
    }
    g->no_timestamps = has_nts ? nts : -1;
    g->ts_begin = has_nts ? nts + 1 : -1;
    if (g->timestamps) { /* return_timestamps: no <|notimestamps|> (one forced_decoder_ids gave is taken out) */
        if (!has_nts)
            return wm_err(err, WM_ERR_INPUT, "%s: field 'no_timestamps_token_id': missing (timestamps are the token "
                          "ids after it)", file);
        if (n > 1 && g->prompt[n - 1] == nts) n--;
    } else if (has_nts && g->prompt[n - 1] != nts) g->prompt[n++] = nts;
    int set = 0;
    g->max_initial_ts = -1;
    if ((s = wm_s2s_json_int(gc, file, "max_initial_timestamp_index", 0, &g->max_initial_ts, &set, err))) return s;
    if (!set) g->max_initial_ts = -1;
    /* drop null forced ids (not the slot language detection fills) */
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (g->prompt[i] >= 0 || (int)i == g->lang_slot) g->prompt[k++] = g->prompt[i];
    g->n_prompt = k;
    g->max_positions = 0;
    int64_t src_pos = 1500; /* Whisper's max_source_positions: 30 s windows */
    if (cfg && ((s = wm_s2s_json_int(cfg, cfile, "max_target_positions", 1, &g->max_positions, &set, err)) ||
                (s = wm_s2s_json_int(cfg, cfile, "max_source_positions", 1, &src_pos, &set, err))))
        return s;
    g->window_frames = 2 * src_pos; /* the encoder's two convolutions have strides 1 and 2 */
    return WM_OK;
}

wm_status wm_s2s_prompt_max_length(wm_s2s_gen *g, int64_t max_new, wm_error *err) {
    int64_t P = g->n_prompt ? (int64_t)g->n_prompt : 1, cap = g->max_positions > 0 ? g->max_positions : INT64_MAX;
    if (max_new > 0) {
        if (P + max_new > cap)
            return wm_err(err, WM_ERR_USAGE, "--max-new-tokens %lld: with the %lld prompt tokens it passes "
                          "max_target_positions %lld", (long long)max_new, (long long)P, (long long)cap);
        g->max_length = P + max_new;
        return WM_OK;
    }
    int64_t init = g->max_positions > 0 && g->max_positions / 2 - 1 < P ? g->max_positions / 2 - 1 : P;
    g->max_length = g->max_length + init < cap ? g->max_length + init : cap;
    return WM_OK;
}

wm_status wm_s2s_prompt_from_folder(const char *dir, const char *language, const char *task, wm_s2s_gen *g,
                                    wm_error *err) {
    char p[4200], pc[4200];
    int present = 0, pcfg = 0;
    snprintf(p, sizeof p, "%s/generation_config.json", dir);
    snprintf(pc, sizeof pc, "%s/config.json", dir);
    cJSON *gc = NULL, *cfg = NULL;
    wm_status s = wm_input_present(p, &present, err);
    if (!s) s = wm_input_present(pc, &pcfg, err);
    if (!s && present) s = wm_hf_json_load(p, WM_HF_CONFIG_MAX_BYTES, &gc, err);
    if (!s && pcfg) s = wm_hf_json_load(pc, WM_HF_CONFIG_MAX_BYTES, &cfg, err);
    if (!s) {
        cJSON *empty = gc ? NULL : cJSON_CreateObject();
        s = build_prompt(gc ? gc : empty, cfg, present ? p : pc, pc, language, task, g, err);
        cJSON_Delete(empty);
    }
    cJSON_Delete(gc);
    cJSON_Delete(cfg);
    return s;
}


/* ---------------------------------------------------------------- timestamp rules */

wm_status wm_whisper_timestamps_on(const char *dir, wm_s2s_gen *g, wm_error *err) {
    if (g->timestamps) return WM_OK;
    if (g->no_timestamps < 0)
        return wm_err(err, WM_ERR_INPUT, "%s/generation_config.json: field 'no_timestamps_token_id': missing "
                      "(timestamps are the token ids after it; audio over 30 s needs them)", dir);
    g->timestamps = 1;
    if (g->n_prompt > 1 && g->prompt[g->n_prompt - 1] == g->no_timestamps) g->n_prompt--;
    return WM_OK;
}

void wm_whisper_timestamp_rules(const wm_s2s_gen *g, const int64_t *seq, int64_t len, int64_t begin, float *sc,
                                int64_t V) {
    int64_t tb = g->ts_begin < V ? g->ts_begin : V, eos = g->n_eos ? g->eos[0] : 0;
    if (g->ts_begin < 0) return;
    if (g->no_timestamps >= 0 && g->no_timestamps < V) sc[g->no_timestamps] = -INFINITY;
    const int64_t *s = seq + begin;
    int64_t n = len - begin;
    int last = n >= 1 && s[n - 1] >= g->ts_begin, pen = n < 2 || s[n - 2] >= g->ts_begin;
    if (last) { /* a pair is closed: text next; a lone timestamp: another one (or the end id and up) */
        for (int64_t t = pen ? tb : 0; t < (pen ? V : (eos < V ? eos : V)); t++) sc[t] = -INFINITY;
    }
    int64_t floor_ts = g->ts_begin; /* no timestamp below the last one (nor equal, unless it closes a pair) */
    for (int64_t i = n - 1; i >= 0; i--)
        if (s[i] >= g->ts_begin) {
            floor_ts = last && !pen ? s[i] : s[i] + 1;
            break;
        }
    for (int64_t t = tb; t < floor_ts && t < V; t++) sc[t] = -INFINITY;
    if (len == begin) { /* the first generated token: a timestamp, at most max_initial_ts */
        for (int64_t t = 0; t < tb; t++) sc[t] = -INFINITY;
        if (g->max_initial_ts >= 0)
            for (int64_t t = g->ts_begin + g->max_initial_ts + 1; t < V; t++) sc[t] = -INFINITY;
    }
    /* log sum exp over the timestamps against the likeliest text token (the normalizer of log_softmax cancels) */
    float mt = -INFINITY, mx = -INFINITY;
    for (int64_t t = 0; t < tb; t++) mx = sc[t] > mx ? sc[t] : mx;
    for (int64_t t = tb; t < V; t++) mt = sc[t] > mt ? sc[t] : mt;
    if (mt == -INFINITY) return;
    double sum = 0;
    for (int64_t t = tb; t < V; t++) sum += exp((double)sc[t] - (double)mt);
    if ((double)mt + log(sum) > (double)mx)
        for (int64_t t = 0; t < tb; t++) sc[t] = -INFINITY;
}

/* ---------------------------------------------------------------- sequential long-form transcription */

void wm_whisper_out_free(wm_whisper_out *o) {
    if (!o) return;
    free(o->ids);
    free(o->prompt);
    free(o->seg);
    free(o->seg_at);
    free(o->tries);
    memset(o, 0, sizeof *o);
}

/* A row's growing token list and segments. */
typedef struct row_acc {
    int64_t *tok;
    size_t n, cap;
    wm_whisper_segment *seg;
    size_t n_seg, cap_seg;
} row_acc;

static int acc_tokens(row_acc *r, const int64_t *t, int64_t n) {
    if (r->n + (size_t)n > r->cap) {
        size_t c = (r->n + (size_t)n) * 2 + 16;
        int64_t *p = realloc(r->tok, c * sizeof *p);
        if (!p) return -1;
        r->tok = p, r->cap = c;
    }
    memcpy(r->tok + r->n, t, (size_t)n * sizeof *t);
    r->n += (size_t)n;
    return 0;
}

static int acc_segment(row_acc *r, double start, double end, const int64_t *t, int64_t n) {
    if (r->n_seg == r->cap_seg) {
        size_t c = r->cap_seg * 2 + 8;
        wm_whisper_segment *p = realloc(r->seg, c * sizeof *p);
        if (!p) return -1;
        r->seg = p, r->cap_seg = c;
    }
    r->seg[r->n_seg++] = (wm_whisper_segment){start, end, (int64_t)r->n, n};
    return acc_tokens(r, t, n);
}

/* transformers' _retrieve_segment on one window's tokens s[0..n) of a row at seek with nf frames: the segments
   into r, the frames to advance into *adv. */
static int split_segments(const wm_s2s_gen *g, const int64_t *s, int64_t n, int64_t seek, int64_t nf, row_acc *r,
                          int64_t *adv) {
    const int64_t tb = g->ts_begin;
    const double prec = 0.02, offset = (double)seek * prec / 2.0; /* time_precision over the input stride */
    int single_end = n >= 2 && s[n - 2] < tb && s[n - 1] >= tb;
    int64_t n_pairs = 0;
    for (int64_t i = 0; i + 1 < n; i++) n_pairs += s[i] >= tb && s[i + 1] >= tb;
    if (n_pairs) {
        int64_t last = 0, k = 0;
        for (int64_t i = 0; i + 1 < n; i++) {
            if (!(s[i] >= tb && s[i + 1] >= tb)) continue;
            int64_t cut = i + 1;
            int is_last = ++k == n_pairs && !single_end;
            if (is_last) cut++; /* the last pair's second timestamp stays with its segment */
            int64_t end_at = is_last ? cut - 2 : cut - 1;
            if (acc_segment(r, offset + (double)(s[last] - tb) * prec, offset + (double)(s[end_at] - tb) * prec,
                            s + last, cut - last))
                return -1;
            last = cut;
        }
        if (single_end) {
            if (acc_segment(r, offset + (double)(s[last] - tb) * prec, offset + (double)(s[n - 1] - tb) * prec,
                            s + last, n - last))
                return -1;
            *adv = nf; /* a lone timestamp at the end: no speech after it */
        } else {
            *adv = (s[last - 2] - tb) * 2; /* to the last pair's timestamp, in frames */
        }
        return 0;
    }
    /* no pair: the whole window is one segment, ending at its last timestamp or the window's end */
    volatile float fr = (float)nf * 0.01f; /* torch: a long tensor times a float scalar is float32 */
    volatile float q = fr / 0.02f;
    double end_pos = (double)(int64_t)q;
    for (int64_t i = n - 1; i >= 0; i--)
        if (s[i] >= tb) {
            if (s[i] != tb) end_pos = (double)(s[i] - tb);
            break;
        }
    if (acc_segment(r, offset, offset + end_pos * prec, s, n)) return -1;
    *adv = nf;
    return 0;
}

/* A seed per (window, group, try) from the caller's: the draws are reproducible run to run. */
static uint64_t mix_seed(uint64_t seed, int64_t window, int64_t group, size_t k) {
    uint64_t z = seed ^ ((uint64_t)window * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)group << 40) ^ ((uint64_t)k << 56);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int add_try(wm_whisper_out *o, size_t *cap, const wm_whisper_try *t) {
    if (o->n_tries == *cap) {
        size_t c = *cap * 2 + 16;
        wm_whisper_try *p = realloc(o->tries, c * sizeof *p);
        if (!p) return -1;
        o->tries = p, *cap = c;
    }
    o->tries[o->n_tries++] = *t;
    return 0;
}

/* transformers' _need_fallback on one row's tokens s[0..n) (end id kept) and its figures. */
static void decide(const wm_whisper_fallback *fb, const int64_t *s, int64_t n, int64_t vocab,
                   const wm_s2s_row_scores *rs, wm_whisper_try *t) {
    t->avg_logprob = rs->avg_logprob, t->no_speech_prob = rs->no_speech_prob;
    t->compression_ratio = wm_whisper_compression_ratio(s, n, vocab);
    t->fallback = t->skip = 0;
    if (!fb) return;
    if (!isnan(fb->compression_ratio_threshold) && t->compression_ratio > fb->compression_ratio_threshold)
        t->fallback = 1;
    if (!isnan(fb->logprob_threshold) && rs->avg_logprob < fb->logprob_threshold) t->fallback = 1;
    if (!isnan(fb->no_speech_threshold) && rs->avg_logprob < fb->logprob_threshold &&
        rs->no_speech_prob > fb->no_speech_threshold)
        t->fallback = 0, t->skip = 1;
}

wm_status wm_whisper_generate(wm_s2s *m, const float *feats, int64_t B, int64_t n_mels, int64_t frames,
                              const int64_t *valid, const wm_s2s_gen *g, int64_t max_new,
                              const wm_whisper_fallback *fb, wm_whisper_out *out, wm_error *err) {
    memset(out, 0, sizeof *out);
    const int64_t W = g->window_frames, P = g->n_prompt ? (int64_t)g->n_prompt : 1;
    if (W < 1) return wm_err(err, WM_ERR_USAGE, "no window size (wm_s2s_prompt_from_folder)");
    if (g->timestamps && g->ts_begin < 0)
        return wm_err(err, WM_ERR_USAGE, "timestamps: no timestamp tokens (wm_s2s_prompt_from_folder)");
    if (B < 1 || frames < 1 || n_mels < 1) return wm_err(err, WM_ERR_USAGE, "no audio features");
    for (int64_t b = 0; valid && b < B; b++)
        if (valid[b] < 1 || valid[b] > frames)
            return wm_err(err, WM_ERR_USAGE, "row %lld: %lld valid frames of %lld", (long long)b,
                          (long long)valid[b], (long long)frames);
    if (fb && fb->all_segments && !fb->condition)
        return wm_err(err, WM_ERR_USAGE, "prompt_condition_type all-segments needs condition_on_prev_tokens (the "
                      "prompt is put before each window's previous text)");
    if (fb && fb->all_segments && !fb->n_prompt_ids)
        return wm_err(err, WM_ERR_USAGE, "prompt_condition_type all-segments: no prompt given");
    if (fb && fb->n_prompt_ids > WM_S2S_MAX_PROMPT / 2)
        return wm_err(err, WM_ERR_USAGE, "the prompt's %zu tokens: at most %d", fb->n_prompt_ids,
                      WM_S2S_MAX_PROMPT / 2);
    if (fb && !isnan(fb->no_speech_threshold) && isnan(fb->logprob_threshold))
        return wm_err(err, WM_ERR_USAGE, "no_speech_threshold needs logprob_threshold (a window is skipped when its "
                      "average log-probability is under it too)");
    if (fb && !isnan(fb->no_speech_threshold) && g->no_timestamps < 1)
        return wm_err(err, WM_ERR_USAGE, "no_speech_threshold: no no_timestamps_token_id (the no-speech token is the "
                      "one before it)");
    const int64_t cap = g->max_positions > 0 ? g->max_positions : INT64_MAX;
    if (max_new > 0 && P + max_new > cap)
        return wm_err(err, WM_ERR_USAGE, "--max-new-tokens %lld: with the %lld prompt tokens it passes "
                      "max_target_positions %lld", (long long)max_new, (long long)P, (long long)cap);
    const int64_t pad = g->pad_token_id >= 0 ? g->pad_token_id : g->n_eos ? g->eos[0] : 0;
    const int64_t no_speech = fb && !isnan(fb->no_speech_threshold) ? g->no_timestamps - 1 : -1;
    const size_t n_temps = fb && fb->n_temps ? fb->n_temps : 1;
    wm_s2s_gen gg = *g;
    if (gg.ts_begin < 0) gg.ts_begin = INT64_MAX; /* no timestamp tokens: every window is one segment */
    int beams = g->num_beams; /* 1 for good once a try samples (transformers sets generation_config.num_beams) */
    const size_t per = (size_t)(n_mels * W);
    int64_t *prompt = malloc((size_t)(B * P) * sizeof *prompt), *seek = calloc((size_t)B, sizeof *seek);
    int64_t *rows = malloc((size_t)B * sizeof *rows), *mem = malloc((size_t)B * sizeof *mem), *gen = NULL, width = 0;
    int64_t **last = calloc((size_t)B, sizeof *last), *last_n = calloc((size_t)B, sizeof *last_n);
    uint8_t *taken = malloc((size_t)B), *skip = calloc((size_t)B, 1), *docond = malloc((size_t)B);
    int64_t *inp = malloc((size_t)B * WM_S2S_MAX_PROMPT * sizeof *inp), *inp_n = calloc((size_t)B, sizeof *inp_n);
    int64_t *pos = calloc((size_t)B, sizeof *pos), *hist = NULL;
    size_t hist_cap = 0;
    row_acc *acc = calloc((size_t)B, sizeof *acc);
    wm_s2s_row_scores *rs = calloc((size_t)B, sizeof *rs);
    float *win = malloc((size_t)B * per * sizeof *win);
    size_t tries_cap = 0;
    wm_status st = WM_OK;
    if (!prompt || !seek || !rows || !mem || !last || !last_n || !taken || !skip || !acc || !rs || !win || !docond ||
        !inp || !inp_n || !pos) {
        st = wm_err(err, WM_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* the window of row b from frame s: nf frames of feats, zeros after */
#define FILL(dst, b, s, nf)                                                                                   \
    for (int64_t c = 0; c < n_mels; c++) {                                                                   \
        float *d_ = (dst) + c * W;                                                                            \
        memcpy(d_, feats + ((b) * n_mels + c) * frames + (s), (size_t)(nf) * sizeof *d_);                     \
        memset(d_ + (nf), 0, (size_t)(W - (nf)) * sizeof *d_);                                                \
    }
#define FRAMES_LEFT(b) ((valid ? valid[b] : frames) - seek[b] < W ? (valid ? valid[b] : frames) - seek[b] : W)
    for (int64_t b = 0; b < B; b++)
        for (int64_t k = 0; k < P; k++) prompt[b * P + k] = g->n_prompt ? g->prompt[k] : g->decoder_start_token_id;
    if (g->lang_slot >= 0) { /* detected once, on the first window_frames of the features (transformers' rule) */
        wm_s2s_gen d = *g;
        d.timestamps = 0;
        d.max_length = P + 1;
        int64_t nf = frames < W ? frames : W;
        for (int64_t b = 0; b < B; b++) FILL(win + b * per, b, 0, nf);
        if ((st = wm_s2s_generate_features(m, win, B, n_mels, W, &d, &gen, &width, err))) goto done;
        for (int64_t b = 0; b < B; b++) prompt[b * P + g->lang_slot] = gen[b * width + g->lang_slot];
        free(gen);
        gen = NULL;
    }
    /* the previous-text prompt (transformers' _prepare_segments / _prepare_decoder_input_ids) */
    const int64_t psot = !fb ? -1 : fb->prev_sot >= 0 ? fb->prev_sot : g->n_suppress >= 2 ? g->suppress[g->n_suppress - 2] : -1;
    const int pre = fb && fb->n_prompt_ids && !fb->all_segments; /* the prompt as row's first (pseudo) segment */
    const size_t pre_off = pre && fb->prompt_ids[0] == fb->prev_sot ? 1 : 0;
    const int64_t *bos = fb && fb->all_segments ? fb->prompt_ids : &psot;
    const size_t bos_n = fb && fb->all_segments ? fb->n_prompt_ids : psot >= 0 ? 1 : 0;
    const size_t cut = (size_t)((g->max_positions > 0 ? g->max_positions : 448) / 2 - 1);
    for (int64_t b = 0; b < B; b++) docond[b] = (uint8_t)(fb && fb->condition);
    int64_t maxlen = g->max_length;
    for (out->windows = 0; !st; out->windows++) { /* a failed window ends the loop: its seek did not move */
        int64_t n_act = 0;
        for (int64_t b = 0; b < B; b++)
            if (seek[b] < (valid ? valid[b] : frames)) pos[b] = n_act, rows[n_act++] = b;
        if (!n_act) break;
        int any = 0;
        for (int64_t b = 0; b < B; b++) any |= docond[b];
        const int cond_now = any && (acc[0].n_seg || pre); /* transformers looks at row 0's segments */
        int64_t Pmax = 0;
        for (int64_t i = 0; i < n_act; i++) { /* each row's decoder input: previous text, then its prompt */
            int64_t b = rows[i], *d = inp + b * WM_S2S_MAX_PROMPT;
            size_t n = 0, h = 0;
            if (cond_now || (fb && fb->n_prompt_ids)) {
                const int64_t *first = cond_now ? bos : fb->prompt_ids;
                size_t first_n = cond_now ? bos_n : fb->n_prompt_ids;
                if (cond_now && docond[b] && (acc[b].n_seg || pre)) { /* the segments so far, the last cut tokens */
                    size_t need = acc[b].n + fb->n_prompt_ids;
                    if (need > hist_cap) {
                        int64_t *q = realloc(hist, need * sizeof *q);
                        if (!q) {
                            st = wm_err(err, WM_ERR_NOMEM, "out of memory");
                            goto done;
                        }
                        hist = q, hist_cap = need;
                    }
                    if (pre)
                        for (size_t k = pre_off; k < fb->n_prompt_ids; k++) hist[h++] = fb->prompt_ids[k];
                    for (size_t k = 0; k < acc[b].n_seg; k++) {
                        const wm_whisper_segment *sg = &acc[b].seg[k];
                        int64_t n_sg = sg->n; /* a segment ending on two timestamps: without its last */
                        if (n_sg > 2 && acc[b].tok[sg->off + n_sg - 2] >= g->ts_begin && g->ts_begin >= 0) n_sg--;
                        memcpy(hist + h, acc[b].tok + sg->off, (size_t)n_sg * sizeof *hist);
                        h += (size_t)n_sg;
                    }
                }
                size_t from = h > cut ? h - cut : 0;
                if (first_n + (h - from) + (size_t)P > WM_S2S_MAX_PROMPT) {
                    st = wm_err(err, WM_ERR_USAGE, "the decoder input (%zu prompt + %zu previous tokens): over %d",
                                first_n, h - from, WM_S2S_MAX_PROMPT);
                    goto done;
                }
                memcpy(d, first, first_n * sizeof *d);
                if (h > from) memcpy(d + first_n, hist + from, (h - from) * sizeof *d);
                n = first_n + (h - from);
            }
            memcpy(d + n, prompt + b * P, (size_t)P * sizeof *d);
            inp_n[b] = (int64_t)n + P;
            Pmax = inp_n[b] > Pmax ? inp_n[b] : Pmax;
        }
        if (max_new > 0 && Pmax + max_new > cap) {
            st = wm_err(err, WM_ERR_USAGE, "--max-new-tokens %lld: with the %lld tokens of the decoder input (prompt "
                        "and previous text) it passes max_target_positions %lld", (long long)max_new,
                        (long long)Pmax, (long long)cap);
            goto done;
        }
        int64_t init = g->max_positions > 0 && g->max_positions / 2 - 1 < Pmax ? g->max_positions / 2 - 1 : Pmax;
        maxlen = max_new > 0 ? Pmax + max_new : (maxlen + init < cap ? maxlen + init : cap);
        if (Pmax >= maxlen) { /* only a long prompt gets here: the previous text is cut to half the positions */
            st = wm_err(err, WM_ERR_USAGE, "--prompt: the decoder input of %lld tokens (%zu of the prompt, the start "
                        "tokens and previous text) leaves no room for new tokens under max_length %lld "
                        "(generation_config.json max_length plus the start tokens, at most max_target_positions %lld): "
                        "shorten the prompt", (long long)Pmax, fb ? fb->n_prompt_ids : (size_t)0, (long long)maxlen,
                        (long long)(g->max_positions > 0 ? g->max_positions : 0));
            break;
        }
        /* the rows of one decoder input together: a batch as transformers', split by language and previous text */
        memset(taken, 0, (size_t)n_act);
        for (int64_t i = 0, group = 0; i < n_act && !st; i++, group++) {
            if (taken[i]) continue;
            const int64_t *p0 = inp + rows[i] * WM_S2S_MAX_PROMPT, Pg = inp_n[rows[i]];
            int64_t ng = 0;
            for (int64_t j = i; j < n_act; j++)
                if (!taken[j] && inp_n[rows[j]] == Pg &&
                    !memcmp(inp + rows[j] * WM_S2S_MAX_PROMPT, p0, (size_t)Pg * sizeof *inp)) {
                    mem[ng++] = rows[j];
                    taken[j] = 1;
                }
            wm_s2s_gen d = gg;
            d.lang_slot = -1;
            d.n_langs = 0;
            d.max_length = max_new > 0 ? Pg + max_new : maxlen - (Pmax - Pg); /* the padded length counts */
            d.top_k = fb ? fb->top_k : 0;
            d.top_p = fb ? fb->top_p : 1.0;
            memcpy(d.prompt, p0, (size_t)Pg * sizeof *inp);
            d.n_prompt = (size_t)Pg;
            d.no_speech_at = Pg - P; /* the start token */
            /* the temperatures in turn on the rows that still need it (transformers' generate_with_fallback) */
            for (size_t k = 0; k < n_temps && ng && !st; k++) {
                d.temperature = fb && fb->n_temps ? fb->temps[k] : 0.0;
                if (d.temperature > 0) beams = 1;
                d.num_beams = beams;
                d.seed = mix_seed(fb ? fb->seed : 0, out->windows, group, k);
                for (int64_t q = 0; q < ng; q++) FILL(win + q * per, mem[q], seek[mem[q]], FRAMES_LEFT(mem[q]));
                if ((st = wm_s2s_generate_features_scored(m, win, ng, n_mels, W, &d, no_speech, rs, &gen, &width,
                                                          err)))
                    break;
                int64_t again = 0;
                for (int64_t q = 0; q < ng; q++) {
                    int64_t b = mem[q], n = width - Pg;
                    const int64_t *s = gen + q * width + Pg;
                    if (n > 0 && s[n - 1] == pad) { /* the padding off: all of it but an end id equal to it */
                        int64_t np = 0;
                        for (int64_t t = 0; t < n; t++) np += s[t] == pad;
                        if (g->n_eos && pad == g->eos[0]) np--;
                        n -= np;
                    }
                    wm_whisper_try t = {b, out->windows, Pg, (double)seek[b] * 0.01, d.temperature, 0, 0, 0, 0, 0};
                    decide(fb, s, n, wm_s2s_vocab(m), &rs[q], &t);
                    if (add_try(out, &tries_cap, &t)) {
                        st = wm_err(err, WM_ERR_NOMEM, "out of memory");
                        break;
                    }
                    for (size_t e = 0; n > 0 && e < g->n_eos; e++) /* then the end id */
                        if (s[n - 1] == g->eos[e]) {
                            n--;
                            break;
                        }
                    int64_t *keep = realloc(last[b], (size_t)(n ? n : 1) * sizeof *keep);
                    if (!keep) {
                        st = wm_err(err, WM_ERR_NOMEM, "out of memory");
                        break;
                    }
                    memcpy(keep, s, (size_t)n * sizeof *keep);
                    last[b] = keep, last_n[b] = n, skip[b] = (uint8_t)t.skip;
                    /* written at the row's place in the reduced batch, as transformers' fallback_index_map does */
                    docond[pos[b]] = (uint8_t)(fb && fb->condition && d.temperature < 0.5);
                    if (t.fallback) mem[again++] = b; /* in order: the rows of the next try */
                }
                free(gen);
                gen = NULL;
                ng = again;
            }
        }
        for (int64_t i = 0; i < n_act && !st; i++) { /* each row's kept try: its segments, or skipped */
            int64_t b = rows[i], nf = FRAMES_LEFT(b), adv = 0;
            if (skip[b]) {
                seek[b] += nf;
                continue;
            }
            if (split_segments(&gg, last[b], last_n[b], seek[b], nf, &acc[b], &adv)) {
                st = wm_err(err, WM_ERR_NOMEM, "out of memory");
                break;
            }
            seek[b] += adv > 0 ? adv : nf; /* adv >= 2 under the rules: a pair closes above the first */
        }
    }
#undef FRAMES_LEFT
#undef FILL
    if (st) goto done;
    size_t w = 0, ns = 0;
    for (int64_t b = 0; b < B; b++) {
        w = acc[b].n > w ? acc[b].n : w;
        ns += acc[b].n_seg;
    }
    out->width = (int64_t)w;
    out->ids = malloc((size_t)B * (w ? w : 1) * sizeof *out->ids);
    out->seg = malloc((ns ? ns : 1) * sizeof *out->seg);
    out->seg_at = malloc((size_t)(B + 1) * sizeof *out->seg_at);
    if (!out->ids || !out->seg || !out->seg_at) {
        st = wm_err(err, WM_ERR_NOMEM, "out of memory");
        goto done;
    }
    out->seg_at[0] = 0;
    for (int64_t b = 0; b < B; b++) {
        for (size_t t = 0; t < w; t++) out->ids[(size_t)b * w + t] = t < acc[b].n ? acc[b].tok[t] : pad;
        if (acc[b].n_seg) memcpy(out->seg + out->seg_at[b], acc[b].seg, acc[b].n_seg * sizeof *out->seg);
        out->seg_at[b + 1] = out->seg_at[b] + acc[b].n_seg;
    }
    out->prompt = prompt, out->n_prompt = P;
    prompt = NULL;
done:
    if (st) wm_whisper_out_free(out);
    for (int64_t b = 0; acc && b < B; b++) free(acc[b].tok), free(acc[b].seg);
    for (int64_t b = 0; last && b < B; b++) free(last[b]);
    free(acc), free(prompt), free(seek), free(rows), free(mem), free(taken), free(win), free(gen);
    free(last), free(last_n), free(skip), free(rs), free(docond), free(inp), free(inp_n), free(pos), free(hist);
    return st;
}
