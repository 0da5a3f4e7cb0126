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
    /* the model's context in tokens (max_position_embeddings / genai_config context_length), 0: unknown. A
     * prompt longer than it is refused; prompt + new tokens stop at it (stats->stopped_by_context) */
    size_t context;
    const int32_t *eos;   /* stop ids */
    size_t n_eos;
    wm_sampling sampling;
    /* called with each new token; return nonzero to stop (a stop string was seen). May be NULL. */
    int (*on_token)(void *ctx, int32_t id);
    void *ctx;
    /* May be NULL; else capacity max_new_tokens (caller-owned): step_ms[k - 1] receives the ms from token k-1
     * sampled to token k sampled (one decode step: forward pass and sampling), for the n_out - 1 steps */
    double *step_ms;
} wm_gen_opts;

typedef struct wm_gen_stats {
    size_t prompt_tokens, new_tokens;
    double prefill_ms;   /* the prompt's forward pass */
    double ttft_ms;      /* prefill and the first sampled token */
    double decode_ms;    /* every decode step after the first token */
    int stopped_by_eos;
    int stopped_by_context; /* the sequence reached o->context before max_new_tokens */
} wm_gen_stats;

/*
 * Generates after prompt[0..n_prompt) on a reset cache. out (capacity
 * max_new_tokens) receives the new ids, *n_out their count (the eos id is
 * included when it stopped the loop). With o->context set, a prompt longer
 * than the context is WM_ERR_INPUT (naming both lengths), and the loop stops
 * when prompt + new tokens reach the context (as transformers' max_length),
 * setting stats->stopped_by_context.
 */
wm_status wm_generate(wm_clm *m, const int32_t *prompt, size_t n_prompt, const wm_gen_opts *o, int32_t *out,
                      size_t *n_out, wm_gen_stats *stats, wm_error *err);

#endif
