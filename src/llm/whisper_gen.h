/*
 * whisper_gen.h - Whisper's prompt and generation rules over the encoder-decoder search (seq2seq.h), as
 * transformers' WhisperGenerationMixin applies them.
 */
#ifndef WM_LLM_WHISPER_GEN_H
#define WM_LLM_WHISPER_GEN_H

#include "llm/seq2seq.h"

/*
 * max_length for a prompted (speech) search as transformers' Whisper sets it: n_prompt + max_new when max_new > 0
 * (WM_ERR_USAGE when that passes max_positions), else g->max_length + min(max_positions / 2 - 1, n_prompt),
 * capped at max_positions.
 */
wm_status wm_s2s_prompt_max_length(wm_s2s_gen *g, int64_t max_new, wm_error *err);

/*
 * The decoder prompt of a speech encoder-decoder (Whisper) from dir's generation_config.json (config.json's
 * forced_decoder_ids as a fallback), as transformers' _retrieve_init_tokens builds it: decoder_start_token_id;
 * the language token (language: "en", "<|en|>" or a name in lang_to_id's spelling; NULL: forced_decoder_ids'
 * one, else detected when lang_to_id is there); the task token (task "transcribe" / "translate" through
 * task_to_id; NULL: forced_decoder_ids' one, "transcribe" when a language was given); then no_timestamps_token_id
 * unless g->timestamps (return_timestamps: then one already there is taken out). Also sets g->no_timestamps /
 * ts_begin (no_timestamps_token_id + 1: the first timestamp token), max_initial_ts (generation_config.json's
 * max_initial_timestamp_index, -1 when absent), max_positions and window_frames (config.json's
 * max_target_positions; 2 x max_source_positions, 3000 when absent).
 * Sets g->prompt / n_prompt / lang_slot / langs. A language or task the files do not list is WM_ERR_USAGE naming
 * the file; malformed fields WM_ERR_INPUT naming file and field.
 */
wm_status wm_s2s_prompt_from_folder(const char *dir, const char *language, const char *task, wm_s2s_gen *g,
                                    wm_error *err);

/*
 * Turns timestamps on in a prompt wm_s2s_prompt_from_folder built without them (transformers' long-form rule:
 * audio over a window implies return_timestamps): the same prompt as built with g->timestamps set.
 * WM_ERR_INPUT naming dir's generation_config.json when it gave no no_timestamps_token_id.
 */
wm_status wm_whisper_timestamps_on(const char *dir, wm_s2s_gen *g, wm_error *err);

/*
 * WhisperTimeStampLogitsProcessor on the scores sc[V] of the hypothesis seq[0..len) whose first generated token is
 * at begin: <|notimestamps|> never; timestamps come in pairs (after a pair text, after a lone timestamp another
 * timestamp or an id from the end id up); timestamps never decrease (nor repeat the last, unless closing a pair);
 * the first generated token is a timestamp, at most max_initial_ts; and when the probability of all timestamps
 * together passes that of the likeliest text token, text is masked.
 */
void wm_whisper_timestamp_rules(const wm_s2s_gen *g, const int64_t *seq, int64_t len, int64_t begin, float *sc,
                                int64_t V);

#define WM_WHISPER_MAX_TEMPS 32

/*
 * Whisper's temperature fallback and thresholds, as transformers' WhisperGenerationMixin.generate applies them to
 * every window (short-form audio included): the window is decoded at temps[0]; a row whose tokens (end id
 * included) have a zlib compression ratio over compression_ratio_threshold, or an average log-probability under
 * logprob_threshold, is decoded again at the next temperature (sampling, one beam, from then on for the rest of
 * the call, as transformers leaves num_beams at 1), the last try kept; a row whose average log-probability is
 * under logprob_threshold while the no-speech token's probability (the token before <|notimestamps|>, after the
 * start token) is over no_speech_threshold is skipped instead (seek moves a whole window, no segment).
 */
typedef struct wm_whisper_fallback {
    double temps[WM_WHISPER_MAX_TEMPS]; /* n_temps 0: one pass at temperature 0 (greedy, or num_beams) */
    size_t n_temps;
    double compression_ratio_threshold, logprob_threshold, no_speech_threshold; /* NAN: off */
    int64_t top_k;                      /* sampling's top-k (generation_config.json's top_k, else 50) */
    double top_p;                       /* sampling's top-p after top-k (generation_config.json's top_p, else 1) */
    uint64_t seed;                      /* the generator of every draw (each window and try seeded from it) */
    /* The previous-text prompt (transformers' condition_on_prev_tokens, prompt_ids, prompt_condition_type):
       condition: each window's decoder input starts with <|startofprev|> (prev_sot) and the last
       max_target_positions / 2 - 1 tokens of the row's segments so far (a segment ending on two timestamps
       without its last), while the row's kept try was at a temperature under 0.5; prompt_ids[0..n_prompt_ids)
       (<|startofprev|> and the text's tokens, wm_whisper_prompt_ids; not owned) the initial prompt: before the
       first window's tokens when conditioning ("first-segment"), before every window's otherwise, and in place of
       <|startofprev|> at every window with all_segments ("all-segments", needs condition). */
    int condition;
    int all_segments;
    int64_t prev_sot;                   /* generation_config.json's prev_sot_token_id (-1: suppress_tokens[-2]) */
    const int64_t *prompt_ids;
    size_t n_prompt_ids;
} wm_whisper_fallback;

void wm_whisper_fallback_default(wm_whisper_fallback *f);

/*
 * The thresholds from dir's generation_config.json (compression_ratio_threshold, logprob_threshold,
 * no_speech_threshold, top_k; transformers' Whisper reads no temperature from it: only the argument counts) over
 * f (top_p, condition_on_prev_tokens and prev_sot_token_id too); malformed fields WM_ERR_INPUT naming them.
 */
wm_status wm_whisper_fallback_from_folder(const char *dir, wm_whisper_fallback *f, wm_error *err);

/*
 * transformers' WhisperTokenizer.get_prompt_ids: <|startofprev|> then text (stripped, after one space) encoded
 * without special tokens, into *ids (malloc'ed, caller frees) / *n. WM_ERR_USAGE naming flag when the text holds a
 * special token or is empty; WM_ERR_INPUT when the tokenizer has no <|startofprev|>.
 */
struct wm_tokenizer;
wm_status wm_whisper_prompt_ids(const struct wm_tokenizer *tok, const char *flag, const char *text, int64_t **ids,
                                size_t *n, wm_error *err);

/* "0.0,0.2,0.4" (numbers from 0 to 100, at most WM_WHISPER_MAX_TEMPS) into f->temps; WM_ERR_USAGE naming flag. */
wm_status wm_whisper_parse_temperatures(const char *flag, const char *s, wm_whisper_fallback *f, wm_error *err);

/* transformers' _retrieve_compression_ratio: the tokens as little-endian ints of floor(log2(vocab) / 8) + 1 bytes,
   their length over zlib's (level 6) compressed length. */
double wm_whisper_compression_ratio(const int64_t *tok, int64_t n, int64_t vocab);

/* One decoding of one row's window: the row, seek (seconds), the temperature, the figures and the decision. */
typedef struct wm_whisper_try {
    int64_t row, window, n_input; /* n_input: the decoder input (previous text + the prompt) */
    double seek_s, temperature, avg_logprob, compression_ratio, no_speech_prob;
    int fallback, skip;
} wm_whisper_try;

/* One segment of a row: tokens ids[row * width + off .. + n) (timestamp tokens included), times in seconds. */
typedef struct wm_whisper_segment {
    double start, end;
    int64_t off, n;
} wm_whisper_segment;

typedef struct wm_whisper_out {
    int64_t *ids;             /* [B, width]: each row's tokens of all windows (end ids dropped), pad_token_id after */
    int64_t width;
    int64_t *prompt;          /* [B, n_prompt]: each row's prompt (the detected language filled in) */
    int64_t n_prompt;
    wm_whisper_segment *seg;  /* all segments, row by row: row b's are seg[seg_at[b] .. seg_at[b + 1]) */
    size_t *seg_at;           /* [B + 1] */
    int64_t windows;          /* decoder calls made (30 s windows, all rows together) */
    wm_whisper_try *tries;    /* every decoding, in order (n_tries) */
    size_t n_tries;
} wm_whisper_out;

/*
 * Whisper's sequential transcription (transformers' WhisperGenerationMixin.generate):
 * feats [B, n_mels, frames] (log-mel features; frames may pass g->window_frames: long-form), valid[b] the frames
 * of row b (its attention mask's sum; NULL: all). Row by row a window of window_frames from seek (the frames left,
 * padded with zeros) is decoded with g's prompt (language detected once on the first window_frames of feats when
 * g->lang_slot >= 0), the timestamp rules when g->timestamps, and fb's fallback (NULL: none); the tokens split
 * into segments at each pair of timestamp tokens (ids from g->ts_begin; without timestamps too, as transformers'
 * loop does for short-form audio), and seek moves to the last pair's timestamp (to the window's end when the
 * output ends on a lone timestamp or has no pair) until every row's frames are done. max_length per window:
 * n_prompt + max_new when max_new > 0, else g->max_length plus min(max_positions / 2 - 1, n_prompt) again at
 * every window (capped at max_positions), as transformers raises it. *out: wm_whisper_out_free. Errors as
 * wm_s2s_generate_features' (with num_beams > 1 the average log-probability is the best hypothesis' along its
 * beams, as transformers gathers its scores by beam_indices). With fb's previous-text
 * prompt (condition, prompt_ids) each row decodes with its own decoder input, unpadded: transformers left-pads a
 * batch's inputs and takes positions from the mask, so a row's tokens are the same; the window's max_length counts
 * the batch's longest input as transformers' padded one does, and its quirks are kept (conditioning only once row
 * 0 has a segment; a row's flag written at its place in the reduced batch, read at its own index).
 */
wm_status wm_whisper_generate(wm_s2s *m, const float *feats, int64_t B, int64_t n_mels, int64_t frames,
                              const int64_t *valid, const wm_s2s_gen *g, int64_t max_new,
                              const wm_whisper_fallback *fb, wm_whisper_out *out, wm_error *err);
void wm_whisper_out_free(wm_whisper_out *o);

#endif
