/*
 * seq2seq.h - generation with an encoder-decoder build in Optimum's seq2seq
 * layout (encoder_model.onnx, decoder_model.onnx, decoder_with_past_model.onnx;
 * see src/builder/model_s2s.c): the encoder runs once, the first decoder step
 * computes the cross-attention K/V from its output (kept for every later
 * step), and each later step appends one position to the self-attention
 * cache. Greedy search and beam search follow transformers' generate token
 * for token: the logits processors no_repeat_ngram_size, forced BOS and
 * forced EOS (in that order), stopping at an end id or max_length, finished
 * rows padded with pad_token_id; beam search keeps (1 + end ids, at least 2)
 * x num_beams candidates, scores finished hypotheses by
 * sum log p / length^length_penalty and stops by early_stopping (false, true
 * or "never") as transformers' vectorized beam search does.
 */
#ifndef WM_LLM_SEQ2SEQ_H
#define WM_LLM_SEQ2SEQ_H

#include <stddef.h>
#include <stdint.h>

#include "winml/runtime.h"

#define WM_S2S_MAX_EOS 16
#define WM_S2S_MAX_INIT 16        /* forced / special prompt tokens (start, language, task, notimestamps, ...) */
#define WM_S2S_MAX_PROMPT 512     /* decoder prompt tokens: Whisper's previous-text prompt (<|startofprev|> ...) first */
#define WM_S2S_MAX_LANGS 256      /* language tokens a prompt may choose from (language detection) */
#define WM_S2S_MAX_SUPPRESS 1024  /* suppress_tokens entries */
#define WM_S2S_MAX_CACHE_BYTES (16ull << 30) /* a search whose caches would pass this is refused (WM_ERR_USAGE) */

typedef struct wm_s2s wm_s2s;

typedef struct wm_s2s_gen {
    int64_t max_length;           /* decoder sequence length including the start token (transformers' max_length) */
    int num_beams;                /* 1: greedy */
    double length_penalty;        /* beam search: scores / generated_length^length_penalty */
    int early_stopping;           /* 0 false, 1 true, 2 "never" */
    int64_t no_repeat_ngram_size; /* 0: off */
    int64_t decoder_start_token_id;
    int64_t forced_bos_token_id;  /* -1: none */
    int64_t forced_eos_token_id;  /* -1: none */
    int64_t pad_token_id;         /* -1: the first end id */
    int64_t eos[WM_S2S_MAX_EOS];
    size_t n_eos;
    /* suppress_tokens: never generated; begin_suppress_tokens: not as the first generated token (transformers'
       SuppressTokens / SuppressTokensAtBegin processors; ids outside the vocabulary are ignored as torch.isin does) */
    int64_t suppress[WM_S2S_MAX_SUPPRESS], begin_suppress[WM_S2S_MAX_SUPPRESS];
    size_t n_suppress, n_begin_suppress;
    /* The decoder prompt: prompt[0..n_prompt) starts every hypothesis (0 tokens: decoder_start_token_id alone).
       lang_slot >= 0: that prompt position is filled per source row by language detection - one decoder step on
       the start token, the argmax of its logits over langs[0..n_langs) (Whisper's detect_language). */
    int64_t prompt[WM_S2S_MAX_PROMPT];
    size_t n_prompt;
    int lang_slot;
    int64_t langs[WM_S2S_MAX_LANGS];
    size_t n_langs;
    int64_t max_positions;        /* config.json's max_target_positions (wm_s2s_prompt_from_folder; 0: unknown) */
    /* Whisper's timestamp rules (whisper_gen.h; timestamps 0: off): timestamp tokens are ts_begin and up
       (no_timestamps_token_id + 1), max_initial_ts bounds the first one (-1: no bound) */
    int timestamps;
    int64_t no_timestamps, ts_begin, max_initial_ts;
    int64_t window_frames;        /* Whisper: feature frames of one encoder window (2 x max_source_positions) */
    /* Sampling (greedy search only): temperature > 0 draws each token, after the processors, from transformers'
       warpers in its order (sampling.h: temperature, top_k highest scores with ties (0: all), top_p mass (1: all))
       with a generator seeded by seed; 0: the arg max. */
    double temperature;
    int64_t top_k;
    double top_p;
    uint64_t seed;
    /* Whisper's no-speech probability is read at this prompt position (its start token: after a previous-text
       prompt, the prompt's length before it; 0 otherwise) */
    int64_t no_speech_at;
} wm_s2s_gen;

/*
 * Per-row figures of a search, as transformers' Whisper fallback reads them: avg_logprob, the mean over the row's
 * generated tokens (its end id included, padding not) of the log-probability of each under the processed scores
 * (log_softmax; under sampling the top_k / top_p-filtered scores times the temperature; for beam search the best
 * finished hypothesis' tokens, each under the processed scores of the beam it came from);
 * no_speech_prob, the probability (softmax of the raw logits at the prompt's position g->no_speech_at) of
 * the token no_speech (< 0: not computed, 0 reported); n_tokens, the tokens averaged.
 */
typedef struct wm_s2s_row_scores {
    double avg_logprob, no_speech_prob;
    int64_t n_tokens;
} wm_s2s_row_scores;

/* The defaults transformers uses: max_length 20, 1 beam, length_penalty 1, early_stopping false, no ids, top_p 1. */
void wm_s2s_gen_default(wm_s2s_gen *g);

/*
 * Reads the generation settings of the build folder dir: generation_config.json, else config.json (the keys
 * max_length, num_beams, length_penalty, early_stopping, no_repeat_ngram_size, decoder_start_token_id,
 * forced_bos_token_id, forced_eos_token_id, pad_token_id, eos_token_id), over g's values. A file that is there
 * but malformed, or a field of the wrong kind, is an error naming the file and field.
 */
wm_status wm_s2s_gen_from_folder(const char *dir, wm_s2s_gen *g, wm_error *err);

/* Opens the three graphs of the build folder dir (threads 0: all cores). *out: wm_s2s_free. */
wm_status wm_s2s_open(const char *dir, int threads, wm_s2s **out, wm_error *err);
void wm_s2s_free(wm_s2s *m);
int64_t wm_s2s_vocab(const wm_s2s *m);

/*
 * Generates for B source rows of S tokens (ids and mask [B, S], row-major; mask 0 marks padding). *out receives
 * a malloc'ed [B, *width] matrix as transformers returns it: the start token, the generated tokens, then
 * pad_token_id (caller frees). WM_ERR_USAGE for settings out of range (num_beams < 1, max_length < 2, ids outside
 * the vocabulary, caches over WM_S2S_MAX_CACHE_BYTES).
 */
wm_status wm_s2s_generate(wm_s2s *m, const int64_t *ids, const int64_t *mask, int64_t B, int64_t S,
                          const wm_s2s_gen *g, int64_t **out, int64_t *width, wm_error *err);

/* The last generation's wall times in ms (0 before any): its encoder run, and the search after it (every decoder
   step, the first included, with the search's own work). */
void wm_s2s_timing(const wm_s2s *m, double *enc_ms, double *search_ms);

/* The same two spans in process CPU ms (every thread of the process: a figure that preemption by other jobs on a
   loaded machine does not inflate, as it does the wall times). */
void wm_s2s_cpu_timing(const wm_s2s *m, double *enc_ms, double *search_ms);

/* Nodes of decoder_with_past_model.onnx the last step skipped (0 before any): values computed from the cross-attention
   cache alone (a float16 build's Cast of it), kept from the generation's first step after it (wm_session_steady_inputs). */
size_t wm_s2s_kept_nodes(const wm_s2s *m);

/* 1 when the build's encoder reads input_features (a speech encoder-decoder), 0 when it reads input_ids. */
int wm_s2s_speech(const wm_s2s *m);
/* input_features' mel bins (the encoder's fixed dim 1; 0 when not a speech build). */
int64_t wm_s2s_n_mels(const wm_s2s *m);

/*
 * The same for a speech build: feats [B, n_mels, frames] (row-major log-mel features, e.g. wm_logmel's).
 * The rows of *out start with the prompt (g->prompt, language filled in when detected).
 */
wm_status wm_s2s_generate_features(wm_s2s *m, const float *feats, int64_t B, int64_t n_mels, int64_t frames,
                                   const wm_s2s_gen *g, int64_t **out, int64_t *width, wm_error *err);

/* The same, with each row's figures into rs[B] (wm_s2s_row_scores; no_speech: that token's probability, -1: none). */
wm_status wm_s2s_generate_features_scored(wm_s2s *m, const float *feats, int64_t B, int64_t n_mels, int64_t frames,
                                          const wm_s2s_gen *g, int64_t no_speech, wm_s2s_row_scores *rs,
                                          int64_t **out, int64_t *width, wm_error *err);

/* 1 when the build's encoder reads pixel_values (an image encoder-decoder, e.g. TrOCR). */
int wm_s2s_image(const wm_s2s *m);

/*
 * The same for an image build: pixels [B, C, H, W] (row-major preprocessed pixel_values, e.g. wm_vision_pixels');
 * C, H, W must match the encoder's fixed dims (WM_ERR_USAGE naming both). The rows of *out start with
 * decoder_start_token_id.
 */
wm_status wm_s2s_generate_pixels(wm_s2s *m, const float *pixels, int64_t B, int64_t C, int64_t H, int64_t W,
                                 const wm_s2s_gen *g, int64_t **out, int64_t *width, wm_error *err);

/* The logits processors of the search (begin_suppress / suppress tokens, no_repeat_ngram_size, Whisper's timestamp
   rules, forced BOS / EOS) on the scores sc[V] of hypothesis seq[0..len) whose first generated token is at begin. */
void wm_s2s_process_scores(const wm_s2s_gen *g, const int64_t *seq, int64_t len, int64_t begin, float *sc, int64_t V);

/* An integer field key of root (absent or null: *set 0) in [lo, 1e9] into *out; WM_ERR_INPUT naming file and key
   otherwise (shared with whisper_gen.c). */
struct cJSON;
wm_status wm_s2s_json_int(const struct cJSON *root, const char *file, const char *key, int64_t lo, int64_t *out,
                          int *set, wm_error *err);

#endif
