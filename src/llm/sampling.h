/*
 * sampling.h - picking the next token from logits, as transformers'
 * generate does: repetition penalty, then temperature, top-k, top-p and
 * min-p (transformers' warpers, in its order), then a draw from the softmax
 * (or the arg max when greedy).
 *
 * The random draw uses our own seeded generator (xoshiro256**): the same
 * seed gives the same tokens run to run; it does not reproduce torch's.
 */
#ifndef WM_LLM_SAMPLING_H
#define WM_LLM_SAMPLING_H

#include <stddef.h>
#include <stdint.h>

typedef struct wm_sampling {
    int greedy;               /* 1: arg max (temperature and the filters are ignored) */
    float temperature;        /* > 0 */
    int top_k;                /* 0: off */
    float top_p;              /* 1: off */
    float min_p;              /* 0: off */
    float repetition_penalty; /* 1: off (CTRL-style: logit / p if > 0, logit * p otherwise) */
    uint64_t seed;
} wm_sampling;

typedef struct wm_rng {
    uint64_t s[4];
} wm_rng;

void wm_sampling_default(wm_sampling *s); /* greedy */
void wm_rng_seed(wm_rng *r, uint64_t seed);
double wm_rng_uniform(wm_rng *r); /* [0, 1) */

/* Bytes of scratch wm_sample needs for a vocabulary of n. */
size_t wm_sample_scratch_size(int64_t n);

/*
 * The next token. logits[n] are modified in place (penalty, temperature).
 * history: the ids so far (prompt and generated) for the repetition
 * penalty. scratch: wm_sample_scratch_size(n) bytes. Ties in the arg max go
 * to the lowest id, as torch.argmax does.
 */
int32_t wm_sample(float *logits, int64_t n, const wm_sampling *s, const int32_t *history, size_t n_hist, wm_rng *rng,
                  void *scratch);

/*
 * transformers' sampling warpers in its order (temperature, top-k with ties at the k-th score kept, top-p removing
 * the lowest tokens whose cumulative mass is <= 1 - top_p, min-p) on logits[n] (not modified; s->greedy ignored):
 * the distribution a draw of wm_sample uses into probs[n] (0 for removed tokens, and for those whose float32
 * softmax is 0). Returns the tokens with a probability. kept_floor (NULL: not wanted): the scaled score
 * (logit / temperature in float) at and above which transformers' warpers keep a token finite (top-k alone keeps
 * every score >= the k-th, probability 0 or not). scratch: wm_sample_scratch_size(n) bytes.
 */
int64_t wm_sample_probs(const float *logits, int64_t n, const wm_sampling *s, float *probs, float *kept_floor,
                        void *scratch);

/* A draw from probs[n] (weights >= 0, summing to about 1), in id order; the last positive one when rounding runs
   past them all. */
int64_t wm_sample_from_probs(const float *probs, int64_t n, wm_rng *rng);

/* The k-th highest (1 <= k <= n) of sc[n] (torch's top-k filter keeps the scores >= it); scratch holds n floats
   (wm_sample_scratch_size(n) bytes do). */
float wm_kth_highest(const float *sc, int64_t n, int64_t k, float *scratch);

#endif
