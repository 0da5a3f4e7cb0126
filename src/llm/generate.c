#include "llm/generate.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

wm_status wm_generate(wm_clm *m, const int32_t *prompt, size_t n_prompt, const wm_gen_opts *o, int32_t *out,
                      size_t *n_out, wm_gen_stats *stats, wm_error *err) {
    *n_out = 0;
    memset(stats, 0, sizeof *stats);
    if (n_prompt == 0) return wm_err(err, WM_ERR_USAGE, "the prompt has no tokens");
    if (o->context && n_prompt > o->context)
        return wm_err(err, WM_ERR_INPUT, "the prompt has %zu tokens, more than the model's context of %zu tokens",
                      n_prompt, o->context);
    size_t max_new = o->max_new_tokens;
    if (o->context && max_new > o->context - n_prompt) {
        max_new = o->context - n_prompt;
        stats->stopped_by_context = 1; /* cleared below when eos or a callback stops first */
    }
    if (max_new == 0) {
        stats->prompt_tokens = n_prompt;
        return WM_OK;
    }
    wm_clm_reset(m);
    size_t n_hist = n_prompt + max_new;
    int32_t *hist = malloc(n_hist * sizeof *hist);
    void *scratch = NULL;
    wm_status st = WM_OK;
    if (!hist) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    memcpy(hist, prompt, n_prompt * sizeof *hist);
    wm_rng rng;
    wm_rng_seed(&rng, o->sampling.seed);
    const float *logits;
    double t0 = now_ms();
    if ((st = wm_clm_append(m, prompt, n_prompt, &logits, err))) goto done;
    stats->prompt_tokens = n_prompt;
    stats->prefill_ms = now_ms() - t0;
    int64_t v = wm_clm_vocab(m);
    float *work = malloc((size_t)v * sizeof *work);
    scratch = malloc(wm_sample_scratch_size(v));
    if (!work || !scratch) {
        free(work);
        st = wm_err(err, WM_ERR_NOMEM, "out of memory");
        goto done;
    }
    double t1 = 0, tprev = 0;
    for (size_t k = 0; k < max_new; k++) {
        memcpy(work, logits, (size_t)v * sizeof *work);
        int32_t id = wm_sample(work, v, &o->sampling, hist, n_prompt + k, &rng, scratch);
        out[(*n_out)++] = id;
        hist[n_prompt + k] = id;
        double tk = now_ms();
        if (k == 0) {
            stats->ttft_ms = tk - t0;
            t1 = tk;
        } else if (o->step_ms)
            o->step_ms[k - 1] = tk - tprev;
        tprev = tk;
        int stop = 0;
        for (size_t e = 0; e < o->n_eos; e++) stop |= id == o->eos[e];
        stats->stopped_by_eos = stop;
        if (o->on_token && o->on_token(o->ctx, id)) stop = 1;
        if (stop) stats->stopped_by_context = 0;
        if (stop || k + 1 == max_new) break;
        if ((st = wm_clm_append(m, &id, 1, &logits, err))) break;
    }
    stats->new_tokens = *n_out;
    if (*n_out > 1) stats->decode_ms = now_ms() - t1;
    free(work);
done:
    free(scratch);
    free(hist);
    return st;
}
