/*
 * generate.h - the decode loop: prefill the prompt, then sample one token
 * per step until max_new_tokens, an end-of-sequence id, or a callback stop.
 */
#ifndef WM_LLM_GENERATE_H
#define WM_LLM_GENERATE_H

#include "llm/causal_lm.h"
#include "llm/sampling.h"

typedef struct wm_gen_opts {
    size_t max_new_tokens;
    const int32_t *eos;   /* stop ids */
    size_t n_eos;
    wm_sampling sampling;
    /* called with each new token; return nonzero to stop (a stop string was seen). May be NULL. */
    int (*on_token)(void *ctx, int32_t id);
    void *ctx;
} wm_gen_opts;

typedef struct wm_gen_stats {
    size_t prompt_tokens, new_tokens;
    double prefill_ms;   /* the prompt's forward pass */
    double ttft_ms;      /* prefill and the first sampled token */
    double decode_ms;    /* every decode step after the first token */
    int stopped_by_eos;
} wm_gen_stats;

/*
 * Generates after prompt[0..n_prompt) on a reset cache. out (capacity
 * max_new_tokens) receives the new ids, *n_out their count (the eos id is
 * included when it stopped the loop).
 */
wm_status wm_generate(wm_clm *m, const int32_t *prompt, size_t n_prompt, const wm_gen_opts *o, int32_t *out,
                      size_t *n_out, wm_gen_stats *stats, wm_error *err);

#endif
