/*
 * causal_lm.h - the CausalLM inference class: any decoder ONNX graph that
 * follows the ONNX Runtime GenAI / Optimum IO convention
 *   inputs  input_ids [B, S], attention_mask [B, P+S] (optional),
 *           position_ids [B, S] (optional), past_key_values.N.key/.value [B, KV, P, D]
 *   outputs logits [B, S, V] (or [B, V]), present.N.key/.value [B, KV, P+S, D]
 * run as prefill and decode steps over a KV cache (batch 1), preallocated at
 * the maximum length. When every past is read only by an op that appends in
 * place (GroupQueryAttention, wm_session_kv_inplace), there is one buffer
 * set: the past input spans the whole capacity, the present is bound to the
 * same memory and each step writes only its new rows. Otherwise (a Concat
 * graph) there are two sets: each step reads the past from one and the
 * engine writes the present straight into the other (bound outputs), so the
 * runner itself never copies the cache, though the graph's Concat does.
 * The steps of wm_clm_append need only the last position's logits: the
 * session runs the graph with its head narrowed to that position
 * (clm_head.h; WM_LOGITS_ALL=1 keeps every position), so a prompt's prefill
 * skips the vocabulary product of all but one row. wm_clm_append_all opens
 * the graph as it is on first use.
 */
#ifndef WM_LLM_CAUSAL_LM_H
#define WM_LLM_CAUSAL_LM_H

#include "winml/runtime.h"

typedef struct wm_clm wm_clm;

typedef struct wm_clm_opts {
    int threads;        /* 0: all cores */
    int64_t max_length; /* cache capacity in tokens (prompt + generated); 0: 2048 */
    const wm_session_opts *session; /* options of its sessions (the bounds: max_memory, ...); NULL: defaults.
                                       threads above wins over session->threads */
} wm_clm_opts;

/*
 * Opens the decoder at path (an .onnx file, or a build folder holding
 * model.onnx). WM_ERR_UNSUPPORTED naming what is missing when the graph
 * does not follow the convention. *out owns the session; wm_clm_free.
 */
wm_status wm_clm_open(const char *path, const wm_clm_opts *o, wm_clm **out, wm_error *err);
void wm_clm_free(wm_clm *m);

int64_t wm_clm_vocab(const wm_clm *m);     /* known after the first step; from the embedding table before */
int64_t wm_clm_length(const wm_clm *m);    /* tokens in the cache */
int wm_clm_layers(const wm_clm *m);
int wm_clm_inplace(const wm_clm *m);        /* 1: one cache appended in place (see above) */
int wm_clm_narrowed(const wm_clm *m);       /* 1: steps compute the last position's logits only (clm_head.h) */
const wm_session *wm_clm_session(const wm_clm *m);

/* Forgets the cache (a new sequence). */
void wm_clm_reset(wm_clm *m);

/*
 * Keeps the first len tokens of the cache and forgets the rest: the next
 * append continues at position len. WM_ERR_USAGE when len is past the
 * tokens held.
 */
wm_status wm_clm_truncate(wm_clm *m, int64_t len, wm_error *err);

/*
 * Appends n tokens (prefill when the cache is empty, a decode step when n
 * is 1) and runs the model. *logits points to the last position's
 * vocabulary logits (float32, owned by m, valid until the next call).
 * WM_ERR_USAGE when the cache would pass max_length.
 */
wm_status wm_clm_append(wm_clm *m, const int32_t *ids, size_t n, const float **logits, wm_error *err);

/*
 * As wm_clm_append, but *all receives the logits of every appended
 * position: n rows of wm_clm_vocab floats (owned by m, valid until the next
 * call). For perplexity.
 */
wm_status wm_clm_append_all(wm_clm *m, const int32_t *ids, size_t n, const float **all, wm_error *err);

#endif
