/*
 * seq2seq.c - encoder-decoder generation (seq2seq.h): three sessions, the
 * caches held here between steps (the self-attention cache grows by one
 * position a step and is reordered by beam; the cross-attention cache is
 * computed once and reordered never: every beam of a row shares it), greedy
 * and beam search as transformers' generate. The self cache lives in two
 * buffers per layer that take turns: a step reads its past from one as it is
 * and the graph writes the present straight into the other (an output bound
 * to caller memory), so no step copies a cache outside the graph.
 */
#include "llm/seq2seq.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "core/file.h"
#include "hf/config.h"
#include "llm/sampling.h"
#include "llm/whisper_gen.h"
#include "onnx/dtype.h"

#define MAX_LAYERS 256
#define NEG_BIG (-1.0e9f) /* transformers' beam-search penalty */

struct wm_s2s {
    wm_session *enc, *dec, *past;
    int layers, speech; /* speech: the encoder reads input_features [B, n_mels, frames] */
    int image;          /* the encoder reads pixel_values [B, C, H, W] (an image encoder-decoder) */
    int64_t n_mels;
    int64_t heads, head_dim, vocab, hidden;
    double enc_ms, search_ms; /* the last generation's encoder run and search (wm_s2s_timing) */
    double enc_cpu_ms, search_cpu_ms; /* the same, process CPU time (wm_s2s_cpu_timing) */
    char dir[4096];
};

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

static double cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

void wm_s2s_timing(const wm_s2s *m, double *enc_ms, double *search_ms) {
    *enc_ms = m->enc_ms;
    *search_ms = m->search_ms;
}

void wm_s2s_cpu_timing(const wm_s2s *m, double *enc_ms, double *search_ms) {
    *enc_ms = m->enc_cpu_ms;
    *search_ms = m->search_cpu_ms;
}

/* ---------------------------------------------------------------- sessions */

wm_status wm_s2s_open(const char *dir, int threads, wm_s2s **out, wm_error *err) {
    *out = NULL;
    wm_s2s *m = calloc(1, sizeof *m);
    if (!m) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    snprintf(m->dir, sizeof m->dir, "%s", dir);
    wm_session_opts so = {0};
    so.threads = threads;
    static const char *const files[3] = {"encoder_model.onnx", "decoder_model.onnx", "decoder_with_past_model.onnx"};
    wm_session **ss[3] = {&m->enc, &m->dec, &m->past};
    wm_status s = WM_OK;
    for (int i = 0; i < 3 && !s; i++) {
        char p[4200];
        int present;
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        if (!(s = wm_input_present(p, &present, err)) && !present)
            s = wm_err(err, WM_ERR_INPUT, "%s: missing: an encoder-decoder build holds encoder_model.onnx, "
                       "decoder_model.onnx and decoder_with_past_model.onnx", p);
        if (!s) s = wm_session_new(p, &so, ss[i], err);
    }
    int fi = s ? -1 : wm_session_input_index(m->enc, "input_features");
    if (fi >= 0) { /* a speech encoder: input_features [batch, n_mels, frames] */
        const wm_io_info *in = wm_session_input(m->enc, (size_t)fi);
        m->speech = 1;
        m->n_mels = in->rank == 3 ? in->dims[1] : -1;
        if (m->n_mels <= 0)
            s = wm_err(err, WM_ERR_UNSUPPORTED, "%s/encoder_model.onnx: input_features must be [batch, n_mels (fixed), "
                       "frames]", dir);
    }
    m->image = !s && wm_session_input_index(m->enc, "pixel_values") >= 0;
    if (!s && ((!m->speech && !m->image && (wm_session_input_index(m->enc, "input_ids") < 0 ||
                               wm_session_input_index(m->enc, "attention_mask") < 0)) ||
               wm_session_output_index(m->enc, "last_hidden_state") < 0 || wm_session_input_index(m->dec, "encoder_hidden_states") < 0 ||
               wm_session_output_index(m->dec, "logits") < 0 || wm_session_output_index(m->past, "logits") < 0))
        s = wm_err(err, WM_ERR_UNSUPPORTED, "%s: the graphs do not follow Optimum's seq2seq layout (input_ids, "
                   "attention_mask or input_features -> last_hidden_state; encoder_hidden_states -> logits, "
                   "present.N.*)", dir);
    for (; !s && m->layers < MAX_LAYERS; m->layers++) {
        char n[96];
        snprintf(n, sizeof n, "present.%d.encoder.key", m->layers);
        if (wm_session_output_index(m->dec, n) < 0) break;
    }
    if (!s && m->layers == 0)
        s = wm_err(err, WM_ERR_UNSUPPORTED, "%s/decoder_model.onnx: no output present.0.encoder.key", dir);
    if (!s) {
        const wm_io_info *k = wm_session_output(m->dec, (size_t)wm_session_output_index(m->dec, "present.0.encoder.key"));
        const wm_io_info *h = wm_session_input(m->dec, (size_t)wm_session_input_index(m->dec, "encoder_hidden_states"));
        const wm_io_info *l = wm_session_output(m->dec, (size_t)wm_session_output_index(m->dec, "logits"));
        if (k->rank != 4 || k->dims[1] <= 0 || k->dims[3] <= 0 || h->rank != 3 || h->dims[2] <= 0 || l->rank != 3 ||
            l->dims[2] <= 0)
            s = wm_err(err, WM_ERR_UNSUPPORTED, "%s/decoder_model.onnx: the cache heads, head size, hidden size and "
                       "vocabulary must be fixed dims", dir);
        else m->heads = k->dims[1], m->head_dim = k->dims[3], m->hidden = h->dims[2], m->vocab = l->dims[2];
    }
    if (s) {
        wm_s2s_free(m);
        return s;
    }
    *out = m;
    return WM_OK;
}

void wm_s2s_free(wm_s2s *m) {
    if (!m) return;
    wm_session_free(m->enc);
    wm_session_free(m->dec);
    wm_session_free(m->past);
    free(m);
}

size_t wm_s2s_kept_nodes(const wm_s2s *m) {
    wm_session_stats st;
    wm_session_get_stats(m->past, &st);
    return st.n_steady_skipped;
}

int64_t wm_s2s_vocab(const wm_s2s *m) { return m->vocab; }
int wm_s2s_speech(const wm_s2s *m) { return m->speech; }
int64_t wm_s2s_n_mels(const wm_s2s *m) { return m->speech ? m->n_mels : 0; }

/* Runs s with the named feeds (every graph input must be among them); outs in the session's output order. */
typedef struct feed {
    const char *name;
    wm_tensor t;
} feed;

/* Runs s on the feeds its inputs name; bind: NULL, or one wm_out_bind per output (wm_session_run_bound). */
static wm_status run_named(wm_session *s, const feed *f, size_t n, wm_tensor *outs, const wm_out_bind *bind,
                           wm_error *err) {
    size_t ni = wm_session_n_inputs(s);
    wm_tensor in[4 * MAX_LAYERS + 8];
    if (ni > sizeof in / sizeof in[0]) return wm_err(err, WM_ERR_UNSUPPORTED, "too many graph inputs (%zu)", ni);
    for (size_t i = 0; i < ni; i++) {
        const char *name = wm_session_input(s, i)->name;
        size_t k = 0;
        while (k < n && strcmp(f[k].name, name)) k++;
        if (k == n) return wm_err(err, WM_ERR_UNSUPPORTED, "graph input '%s' is not one the seq2seq runner feeds", name);
        in[i] = f[k].t;
    }
    return bind ? wm_session_run_bound(s, in, ni, outs, wm_session_n_outputs(s), bind, err)
                : wm_session_run(s, in, ni, outs, wm_session_n_outputs(s), err);
}

static wm_tensor tens(int32_t dt, int rank, const int64_t *dims, void *data) {
    wm_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = rank;
    for (int i = 0; i < rank; i++) t.dims[i] = dims[i];
    t.data = data;
    return t;
}

/* ---------------------------------------------------------------- search state */

typedef struct run_state {
    wm_s2s *m;
    const wm_s2s_gen *g;
    int64_t B, nb, N, S, V, Lmax; /* N = B * nb rows */
    int64_t *mask;                /* [N, S] */
    float *enc;                   /* [N, S, H] */
    float **self_k, **self_v;     /* per layer two buffers of N h Lmax hd floats each ([2 l + c], c = 0, 1): buffer
                                     cur holds [N, h, len, hd] (contiguous at that len), the other is scratch */
    int cur;
    float **cross_k, **cross_v;   /* per layer [N, h, S, hd] */
    int64_t len;                  /* positions in the self cache */
    int64_t P;                    /* prompt tokens per hypothesis (1: the start token) */
    int64_t *prompt;              /* [N, P] */
    float *logits;                /* [N, V] of the last step */
    wm_s2s_row_scores *rs;        /* [B] figures to fill (NULL: none) */
    int64_t no_speech;            /* the token whose first-position probability rs gets (-1: none) */
} run_state;

static void state_free(run_state *r) {
    for (int l = 0; l < r->m->layers; l++) {
        for (int c = 0; c < 2; c++) {
            if (r->self_k) free(r->self_k[2 * l + c]);
            if (r->self_v) free(r->self_v[2 * l + c]);
        }
        if (r->cross_k) free(r->cross_k[l]);
        if (r->cross_v) free(r->cross_v[l]);
    }
    free(r->self_k);
    free(r->self_v);
    free(r->cross_k);
    free(r->cross_v);
    free(r->mask);
    free(r->enc);
    free(r->logits);
    free(r->prompt);
}

/* The last position's logits of output o (rank 3) into r->logits. */
static void take_logits(run_state *r, const wm_tensor *o) {
    int64_t S = o->dims[1];
    const float *p = o->data;
    for (int64_t i = 0; i < r->N; i++) memcpy(r->logits + i * r->V, p + (i * S + S - 1) * r->V, (size_t)r->V * 4);
}

/* Layer l's self key (kv 0) or value (kv 1) buffer c. */
static float *self_buf(const run_state *r, int l, int kv, int c) {
    return kv ? r->self_v[2 * l + c] : r->self_k[2 * l + c];
}

/* One decoder step on tokens tok [N, n_tok] (the first through decoder_model.onnx, n_tok the prompt's length;
   later steps 1). */
static wm_status step(run_state *r, const int64_t *tok, int64_t n_tok, wm_error *err) {
    wm_s2s *m = r->m;
    int64_t h = m->heads, hd = m->head_dim, N = r->N, S = r->S;
    int first = r->len == 0;
    wm_session *s = first ? m->dec : m->past;
    size_t nf = 0, cap = 3 + 4 * (size_t)m->layers;
    feed *f = calloc(cap, sizeof *f);
    char(*names)[96] = calloc(4 * (size_t)m->layers, 96);
    size_t n_out = wm_session_n_outputs(s);
    wm_tensor *outs = calloc(n_out, sizeof *outs);
    wm_out_bind *bind = calloc(n_out, sizeof *bind);
    wm_status st = WM_OK;
    if (!f || !names || !outs || !bind) {
        st = wm_err(err, WM_ERR_NOMEM, "out of memory");
        goto done;
    }
    int64_t d2[2] = {N, n_tok}, dm[2] = {N, S}, dh[3] = {N, S, m->hidden};
    f[nf++] = (feed){"input_ids", tens(WM_DT_INT64, 2, d2, (void *)tok)};
    f[nf++] = (feed){"encoder_attention_mask", tens(WM_DT_INT64, 2, dm, r->mask)};
    if (first) f[nf++] = (feed){"encoder_hidden_states", tens(WM_DT_FLOAT, 3, dh, r->enc)};
    else {
        int64_t ds[4] = {N, h, r->len, hd}, dc[4] = {N, h, S, hd};
        for (int l = 0; l < m->layers; l++) {
            for (int kv = 0; kv < 2; kv++) { /* the self cache as it lies in buffer cur: [N, h, len, hd] */
                snprintf(names[4 * l + kv], 96, "past_key_values.%d.decoder.%s", l, kv ? "value" : "key");
                f[nf++] = (feed){names[4 * l + kv], tens(WM_DT_FLOAT, 4, ds, self_buf(r, l, kv, r->cur))};
                snprintf(names[4 * l + 2 + kv], 96, "past_key_values.%d.encoder.%s", l, kv ? "value" : "key");
                f[nf++] = (feed){names[4 * l + 2 + kv], tens(WM_DT_FLOAT, 4, dc, kv ? r->cross_v[l] : r->cross_k[l])};
            }
        }
    }
    /* the present self cache straight into the other buffer, the first step's cross cache into its own */
    uint64_t self_cap = (uint64_t)(N * h * r->Lmax * hd) * 4, cross_cap = (uint64_t)(N * h * S * hd) * 4;
    for (int l = 0; l < m->layers; l++)
        for (int kv = 0; kv < 2; kv++) {
            char n[96];
            snprintf(n, sizeof n, "present.%d.decoder.%s", l, kv ? "value" : "key");
            int o = wm_session_output_index(s, n);
            if (o >= 0) bind[o] = (wm_out_bind){self_buf(r, l, kv, !r->cur), self_cap};
            snprintf(n, sizeof n, "present.%d.encoder.%s", l, kv ? "value" : "key");
            o = wm_session_output_index(s, n);
            if (first && o >= 0) bind[o] = (wm_out_bind){kv ? r->cross_v[l] : r->cross_k[l], cross_cap};
        }
    if ((st = run_named(s, f, nf, outs, bind, err))) goto done;
    take_logits(r, &outs[wm_session_output_index(s, "logits")]);
    if (first && r->rs && r->no_speech >= 0 && r->no_speech < r->V) { /* softmax at the start token's position */
        const wm_tensor *lo = &outs[wm_session_output_index(s, "logits")];
        int64_t at = r->g->no_speech_at >= 0 && r->g->no_speech_at < lo->dims[1] ? r->g->no_speech_at : 0;
        for (int64_t i = 0; i < N; i += r->nb) {
            const float *x = (const float *)lo->data + (i * lo->dims[1] + at) * r->V;
            float mx = -INFINITY;
            for (int64_t t = 0; t < r->V; t++) mx = x[t] > mx ? x[t] : mx;
            double sum = 0;
            for (int64_t t = 0; t < r->V; t++) sum += exp((double)x[t] - mx);
            r->rs[i / r->nb].no_speech_prob = exp((double)x[r->no_speech] - mx) / sum;
        }
    }
    for (int l = 0; l < m->layers; l++)
        for (int kv = 0; kv < 2; kv++) {
            char n[96];
            snprintf(n, sizeof n, "present.%d.decoder.%s", l, kv ? "value" : "key");
            int o = wm_session_output_index(s, n);
            if (o < 0 || outs[o].rank != 4 || outs[o].dims[2] != r->len + n_tok) {
                st = wm_err(err, WM_ERR_UNSUPPORTED, "%s: output '%s' missing or not [batch, heads, %lld, head_dim]",
                            m->dir, n, (long long)(r->len + n_tok));
                goto done;
            }
            if (!first) continue;
            snprintf(n, sizeof n, "present.%d.encoder.%s", l, kv ? "value" : "key");
            o = wm_session_output_index(s, n);
            if (o < 0 || wm_tensor_numel(&outs[o]) != (uint64_t)(N * h * S * hd)) {
                st = wm_err(err, WM_ERR_UNSUPPORTED, "%s: output '%s' missing or not [batch, heads, %lld, head_dim]",
                            m->dir, n, (long long)S);
                goto done;
            }
        }
    if (first) { /* the cross cache the later steps feed unchanged: what they compute from it alone is kept */
        const char *xn[2 * MAX_LAYERS];
        size_t nx = 0;
        for (int l = 0; l < m->layers; l++)
            for (int kv = 0; kv < 2; kv++) {
                snprintf(names[4 * l + 2 + kv], 96, "past_key_values.%d.encoder.%s", l, kv ? "value" : "key");
                if (wm_session_input_index(m->past, names[4 * l + 2 + kv]) >= 0) xn[nx++] = names[4 * l + 2 + kv];
            }
        if ((st = wm_session_steady_inputs(m->past, xn, nx, err))) goto done;
    }
    r->len += n_tok;
    r->cur = !r->cur;
done:
    free(bind);
    free(names);
    free(f);
    free(outs);
    return st;
}

/* Reorders the self caches: row i takes row src[i] (into the other buffers, which then take the turn). */
static void reorder(run_state *r, const int64_t *src) {
    int64_t row = r->m->heads * r->len * r->m->head_dim;
    for (int l = 0; l < r->m->layers; l++)
        for (int kv = 0; kv < 2; kv++) {
            const float *c = self_buf(r, l, kv, r->cur);
            float *d = self_buf(r, l, kv, !r->cur);
            for (int64_t i = 0; i < r->N; i++) memcpy(d + i * row, c + src[i] * row, (size_t)row * 4);
        }
    r->cur = !r->cur;
}

/* ---------------------------------------------------------------- logits processors */

static int is_eos(const wm_s2s_gen *g, int64_t t) {
    for (size_t i = 0; i < g->n_eos; i++)
        if (g->eos[i] == t) return 1;
    return 0;
}

/* begin_suppress_tokens at the first generated position (begin = the prompt's length), suppress_tokens,
   no_repeat_ngram_size, Whisper's timestamp rules, forced BOS, forced EOS on scores [V] of the hypothesis seq[0..len). */
static void process(const wm_s2s_gen *g, const int64_t *seq, int64_t len, int64_t begin, float *sc, int64_t V) {
    for (size_t i = 0; len == begin && i < g->n_begin_suppress; i++)
        if (g->begin_suppress[i] < V) sc[g->begin_suppress[i]] = -INFINITY;
    for (size_t i = 0; i < g->n_suppress; i++)
        if (g->suppress[i] < V) sc[g->suppress[i]] = -INFINITY;
    int64_t n = g->no_repeat_ngram_size;
    if (n > 0 && len + 1 >= n) {
        /* tokens that would complete an n-gram already in seq: those after each earlier occurrence of the last
           n - 1 tokens */
        const int64_t *tail = seq + len - (n - 1);
        for (int64_t i = 0; i + n <= len; i++)
            if (!memcmp(seq + i, tail, (size_t)(n - 1) * sizeof *seq)) {
                int64_t t = seq[i + n - 1];
                if (t >= 0 && t < V) sc[t] = -INFINITY;
            }
    }
    if (g->timestamps) wm_whisper_timestamp_rules(g, seq, len, begin, sc, V);
    if (g->forced_bos_token_id >= 0 && len == 1 && g->forced_bos_token_id < V) {
        for (int64_t t = 0; t < V; t++) sc[t] = -INFINITY;
        sc[g->forced_bos_token_id] = 0.0f;
    }
    if (g->forced_eos_token_id >= 0 && len == g->max_length - 1 && g->forced_eos_token_id < V) {
        for (int64_t t = 0; t < V; t++) sc[t] = -INFINITY;
        sc[g->forced_eos_token_id] = 0.0f;
    }
}

void wm_s2s_process_scores(const wm_s2s_gen *g, const int64_t *seq, int64_t len, int64_t begin, float *sc, int64_t V) {
    process(g, seq, len, begin, sc, V);
}

static void log_softmax(float *x, int64_t V) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < V; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = 0;
    for (int64_t i = 0; i < V; i++) sum += exp((double)(x[i] - mx));
    float lse = (float)log(sum);
    for (int64_t i = 0; i < V; i++) x[i] = x[i] - mx - lse;
}

/* ---------------------------------------------------------------- searches */

/* The next token of a greedy / sampled row from its processed scores sc[V] (argmax, or a draw through the warpers
   at g->temperature, top_k, top_p); *lp its log-probability as transformers' Whisper fallback computes it (the
   log_softmax of the warped scores times the temperature: over the kept tokens). probs: V floats. */
static int64_t pick(const wm_s2s_gen *g, float *sc, int64_t V, wm_rng *rng, void *scratch, float *probs, double *lp) {
    int64_t best = 0;
    for (int64_t t = 1; t < V; t++)
        if (sc[t] > sc[best]) best = t;
    if (g->temperature > 0) {
        wm_sampling sp;
        wm_sampling_default(&sp);
        sp.greedy = 0;
        sp.temperature = (float)g->temperature;
        sp.top_k = g->top_k > 0 && g->top_k < V ? (int)g->top_k : 0;
        sp.top_p = (float)g->top_p;
        float floor_sc;
        wm_sample_probs(sc, V, &sp, probs, &floor_sc, scratch);
        best = wm_sample_from_probs(probs, V, rng);
        for (int64_t t = 0; t < V; t++) /* the warpers' -inf */
            if (!(sc[t] / sp.temperature >= floor_sc)) sc[t] = -INFINITY;
    }
    if (lp) {
        double mx = sc[best], sum = 0;
        for (int64_t t = 0; t < V; t++) mx = sc[t] > mx ? sc[t] : mx;
        for (int64_t t = 0; t < V; t++) sum += exp((double)sc[t] - mx);
        *lp = (double)sc[best] - mx - log(sum);
    }
    return best;
}

static wm_status greedy(run_state *r, int64_t *seq, int64_t *width, wm_error *err) {
    const wm_s2s_gen *g = r->g;
    int64_t N = r->N, V = r->V, L = r->Lmax, pad = g->pad_token_id >= 0 ? g->pad_token_id : g->eos[0];
    int64_t *tok = malloc((size_t)N * sizeof *tok);
    uint8_t *open = malloc((size_t)N);
    void *scratch = g->temperature > 0 ? malloc(wm_sample_scratch_size(V) + (size_t)V * sizeof(float)) : NULL;
    for (int64_t i = 0; tok && i < N; i++)
        memcpy(seq + i * L, r->prompt + i * r->P, (size_t)r->P * sizeof *seq);
    if (!tok || !open || (g->temperature > 0 && !scratch)) {
        free(tok);
        free(open);
        free(scratch);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    wm_rng rng;
    wm_rng_seed(&rng, g->seed);
    for (int64_t i = 0; i < N; i++) open[i] = 1;
    int64_t cur = r->P;
    wm_status st = WM_OK;
    while (cur < L) {
        if ((st = step(r, cur == r->P ? r->prompt : tok, cur == r->P ? r->P : 1, err))) break;
        int any = 0;
        for (int64_t i = 0; i < N; i++) {
            float *sc = r->logits + i * V;
            process(g, seq + i * L, cur, r->P, sc, V);
            double lp = 0;
            int64_t best = pick(g, sc, V, &rng, scratch,
                                scratch ? (float *)((char *)scratch + wm_sample_scratch_size(V)) : NULL,
                                r->rs && open[i] ? &lp : NULL);
            if (!open[i] && g->n_eos) best = pad;
            if (r->rs && open[i]) r->rs[i].avg_logprob += lp, r->rs[i].n_tokens++;
            seq[i * L + cur] = tok[i] = best;
            if (is_eos(g, best)) open[i] = 0;
            any |= open[i];
        }
        cur++;
        if (!any) break;
    }
    for (int64_t i = 0; r->rs && i < N; i++)
        r->rs[i].avg_logprob = r->rs[i].n_tokens ? r->rs[i].avg_logprob / (double)r->rs[i].n_tokens : 0;
    *width = cur;
    free(tok);
    free(open);
    free(scratch);
    return st;
}

typedef struct cand {
    float score;
    int64_t idx;
} cand;

/* Descending score, then ascending index (torch.topk's order on CPU for distinct values). */
static int cand_cmp(const void *x, const void *y) {
    const cand *a = x, *b = y;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static wm_status beam(run_state *r, int64_t *out, int64_t *width, wm_error *err) {
    const wm_s2s_gen *g = r->g;
    int64_t B = r->B, nb = r->nb, N = r->N, V = r->V, L = r->Lmax;
    int64_t K = (int64_t)(g->n_eos + 1 > 2 ? g->n_eos + 1 : 2) * nb; /* candidates kept per row */
    double lp = g->length_penalty;
    int64_t fill = g->pad_token_id > 0 ? g->pad_token_id : g->n_eos ? g->eos[0] : -1; /* transformers' `pad or eos` */
    size_t nseq = (size_t)(B * nb * L);
    int64_t *run = malloc(nseq * sizeof *run), *fin = malloc(nseq * sizeof *fin);
    int64_t *top_seq = malloc((size_t)(B * K * L) * sizeof *top_seq), *tok = malloc((size_t)N * sizeof *tok);
    int64_t *src = malloc((size_t)N * sizeof *src), *fin_len = calloc((size_t)N, sizeof *fin_len);
    int64_t *srcbeam = malloc((size_t)K * sizeof *srcbeam), *newrun = malloc((size_t)nb * sizeof *newrun);
    int64_t *old = malloc((size_t)(nb * L) * sizeof *old), *old_len = malloc((size_t)nb * sizeof *old_len);
    float *run_sc = malloc((size_t)N * 4), *fin_sc = malloc((size_t)N * 4), *top_lp = malloc((size_t)(B * K) * 4);
    uint8_t *fin_done = calloc((size_t)N, 1), *hits = malloc((size_t)(B * K)), *unsat = malloc((size_t)B);
    uint8_t *old_done = malloc((size_t)nb);
    cand *c = malloc((size_t)(nb * V) * sizeof *c), *rk = malloc((size_t)K * sizeof *rk);
    cand *mk = malloc((size_t)(nb + K) * sizeof *mk);
    /* Whisper's avg_logprob of a hypothesis (r->rs): the sum along its path of each token's log_softmax over the
       processed scores of its step (renormalized after the processors' -inf, as _retrieve_avg_logprobs does) */
    double *run_lps = calloc((size_t)N, sizeof *run_lps), *fin_lps = calloc((size_t)N, sizeof *fin_lps);
    double *top_lps = malloc((size_t)(B * K) * sizeof *top_lps), *old_lps = malloc((size_t)nb * sizeof *old_lps);
    double *lse = malloc((size_t)nb * sizeof *lse), *new_lps = malloc((size_t)nb * sizeof *new_lps);
    wm_status st = WM_OK;
    if (!run || !fin || !top_seq || !tok || !src || !fin_len || !srcbeam || !newrun || !old || !old_len || !run_sc ||
        !fin_sc || !top_lp || !fin_done || !hits || !unsat || !old_done || !c || !rk || !mk || !run_lps || !fin_lps ||
        !top_lps || !old_lps || !lse || !new_lps) {
        st = wm_err(err, WM_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < nseq; i++) run[i] = fill;
    int64_t P = r->P;
    for (int64_t i = 0; i < N; i++) {
        memcpy(run + i * L, r->prompt + i * P, (size_t)P * sizeof *run);
        run_sc[i] = i % nb ? NEG_BIG : 0.0f; /* only the first beam of a row is live at the start */
        fin_sc[i] = NEG_BIG;
    }
    memcpy(fin, run, nseq * sizeof *fin);
    memset(unsat, 1, (size_t)B);
    int64_t cur = P; /* tokens in each hypothesis */
    for (;;) {
        if ((st = step(r, cur == P ? r->prompt : tok, cur == P ? P : 1, err))) break;
        int all_fin = 1, all_hits = 1, any_unsat = 0;
        for (int64_t b = 0; b < B; b++) {
            /* the K best of log_softmax + processors + the beam's score over nb x V */
            for (int64_t j = 0; j < nb; j++) {
                int64_t row = b * nb + j;
                float *lg = r->logits + row * V;
                log_softmax(lg, V);
                process(g, run + row * L, cur, P, lg, V);
                if (r->rs) {
                    double mx = -INFINITY, sum = 0;
                    for (int64_t t = 0; t < V; t++) mx = lg[t] > mx ? lg[t] : mx;
                    for (int64_t t = 0; t < V && mx > -INFINITY; t++) sum += exp((double)lg[t] - mx);
                    lse[j] = mx + log(sum);
                }
                for (int64_t t = 0; t < V; t++) c[j * V + t] = (cand){lg[t] + run_sc[row], j * V + t};
            }
            qsort(c, (size_t)(nb * V), sizeof *c, cand_cmp);
            int64_t *ts = top_seq + b * K * L;
            for (int64_t k = 0; k < K; k++) {
                int64_t t = c[k].idx % V;
                srcbeam[k] = c[k].idx / V;
                memcpy(ts + k * L, run + (b * nb + srcbeam[k]) * L, (size_t)L * sizeof *ts);
                ts[k * L + cur] = t;
                top_lp[b * K + k] = c[k].score;
                if (r->rs) /* the token's processed log-probability (still in the slot's logits), renormalized */
                    top_lps[b * K + k] = run_lps[b * nb + srcbeam[k]] + (double)r->logits[(b * nb + srcbeam[k]) * V + t] -
                                         lse[srcbeam[k]];
                hits[b * K + k] = cur + 1 >= L || is_eos(g, t);
                all_hits &= hits[b * K + k];
            }
            /* the running beams of the next step: the best nb of the K that did not just finish */
            for (int64_t k = 0; k < K; k++) rk[k] = (cand){top_lp[b * K + k] + (hits[b * K + k] ? NEG_BIG : 0.0f), k};
            qsort(rk, (size_t)K, sizeof *rk, cand_cmp);
            for (int64_t j = 0; j < nb; j++) {
                int64_t row = b * nb + j;
                newrun[j] = rk[j].idx;
                run_sc[row] = rk[j].score;
                src[row] = b * nb + srcbeam[rk[j].idx];
                new_lps[j] = top_lps[b * K + rk[j].idx];
            }
            if (r->rs) memcpy(run_lps + b * nb, new_lps, (size_t)nb * sizeof *run_lps);
            for (int64_t j = 0; j < nb; j++) memcpy(run + (b * nb + j) * L, ts + newrun[j] * L, (size_t)L * sizeof *run);
            /* finished hypotheses: the best nb of those kept and those of the top nb candidates that just ended */
            int full = 1;
            for (int64_t j = 0; j < nb; j++) full &= fin_done[b * nb + j];
            for (int64_t j = 0; j < nb; j++) mk[j] = (cand){fin_sc[b * nb + j], j};
            float denom = (float)pow((double)(cur + 1 - P), lp); /* generated length: cur + 1 - the prompt */
            for (int64_t k = 0; k < K; k++) {
                float sc = top_lp[b * K + k] / denom;
                if (full && g->early_stopping == 1) sc += NEG_BIG;
                if (!unsat[b]) sc += NEG_BIG;
                if (!(hits[b * K + k] && k < nb)) sc += NEG_BIG;
                mk[nb + k] = (cand){sc, nb + k};
            }
            qsort(mk, (size_t)(nb + K), sizeof *mk, cand_cmp);
            memcpy(old, fin + b * nb * L, (size_t)(nb * L) * sizeof *old);
            memcpy(old_done, fin_done + b * nb, (size_t)nb);
            memcpy(old_len, fin_len + b * nb, (size_t)nb * sizeof *old_len);
            memcpy(old_lps, fin_lps + b * nb, (size_t)nb * sizeof *old_lps);
            for (int64_t j = 0; j < nb; j++) {
                int64_t k = mk[j].idx, row = b * nb + j;
                fin_sc[row] = mk[j].score;
                if (k < nb) {
                    memcpy(fin + row * L, old + k * L, (size_t)L * sizeof *fin);
                    fin_done[row] = old_done[k];
                    fin_len[row] = old_len[k];
                    fin_lps[row] = old_lps[k];
                } else {
                    k -= nb;
                    memcpy(fin + row * L, ts + k * L, (size_t)L * sizeof *fin);
                    fin_done[row] = hits[b * K + k] && k < nb;
                    fin_len[row] = cur; /* its last index */
                    fin_lps[row] = top_lps[b * K + k];
                }
            }
        }
        reorder(r, src);
        cur++;
        for (int64_t b = 0; b < B; b++) { /* can the best running beam still beat the worst finished one? */
            double best_len = g->early_stopping == 2 && lp > 0 ? (double)(L - P) : (double)(cur - P);
            float best = run_sc[b * nb] / (float)pow(best_len, lp), worst = INFINITY;
            for (int64_t j = 0; j < nb; j++) worst = fin_sc[b * nb + j] < worst ? fin_sc[b * nb + j] : worst;
            int any = 0;
            for (int64_t j = 0; j < nb; j++) any |= best > (fin_done[b * nb + j] ? worst : NEG_BIG);
            unsat[b] = unsat[b] && any;
            any_unsat |= unsat[b];
            for (int64_t j = 0; j < nb; j++) all_fin &= fin_done[b * nb + j];
        }
        if (!any_unsat || (all_fin && g->early_stopping == 1) || all_hits || cur >= L) break;
        for (int64_t i = 0; i < N; i++) tok[i] = run[i * L + cur - 1];
    }
    if (!st) { /* each row's best finished hypothesis, trimmed to the longest */
        int64_t w = 0;
        for (int64_t b = 0; b < B; b++) w = fin_len[b * nb] > w ? fin_len[b * nb] : w;
        *width = 1 + w;
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < L; t++) out[b * L + t] = t <= fin_len[b * nb] ? fin[b * nb * L + t] : fill;
        for (int64_t b = 0; r->rs && b < B; b++) {
            r->rs[b].n_tokens = fin_len[b * nb] + 1 - P;
            r->rs[b].avg_logprob = r->rs[b].n_tokens > 0 ? fin_lps[b * nb] / (double)r->rs[b].n_tokens : 0;
        }
    }
done:
    free(run), free(fin), free(top_seq), free(tok), free(src), free(fin_len), free(srcbeam), free(newrun);
    free(old), free(old_len), free(run_sc), free(fin_sc), free(top_lp), free(fin_done), free(hits), free(unsat);
    free(old_done), free(c), free(rk), free(mk), free(run_lps), free(fin_lps), free(top_lps), free(old_lps), free(lse);
    free(new_lps);
    return st;
}

/* Settings every search checks; S the encoder's output length. */
static wm_status check_gen(const wm_s2s *m, const wm_s2s_gen *g, int64_t B, int64_t S, wm_error *err) {
    if (B < 1 || S < 1) return wm_err(err, WM_ERR_USAGE, "no source tokens");
    if (g->num_beams < 1 || g->num_beams > 64) return wm_err(err, WM_ERR_USAGE, "num_beams %d: expected 1 to 64", g->num_beams);
    if (!(g->temperature >= 0 && g->temperature <= 100) || (g->temperature > 0 && g->num_beams > 1) || g->top_k < 0 ||
        g->top_k > 1000000000 || !(g->top_p > 0 && g->top_p <= 1))
        return wm_err(err, WM_ERR_USAGE, "temperature %g (top_k %lld, top_p %g): expected a temperature from 0 to 100, "
                      "sampling with one beam, top_p in (0, 1]", g->temperature, (long long)g->top_k, g->top_p);
    if (g->max_length < 2 || g->max_length > 1 << 16)
        return wm_err(err, WM_ERR_USAGE, "max_length %lld: expected 2 to 65536 (start token + new tokens)",
                      (long long)g->max_length);
    if (g->decoder_start_token_id < 0 || g->decoder_start_token_id >= m->vocab)
        return wm_err(err, WM_ERR_USAGE, "decoder_start_token_id %lld: not in the vocabulary of %lld",
                      (long long)g->decoder_start_token_id, (long long)m->vocab);
    if (g->n_prompt > WM_S2S_MAX_PROMPT || g->n_langs > WM_S2S_MAX_LANGS || g->n_suppress > WM_S2S_MAX_SUPPRESS ||
        g->n_begin_suppress > WM_S2S_MAX_SUPPRESS || g->n_eos > WM_S2S_MAX_EOS)
        return wm_err(err, WM_ERR_USAGE, "generation settings: a list over its bound");
    for (size_t i = 0; i < g->n_prompt; i++)
        if ((int)i != g->lang_slot && (g->prompt[i] < 0 || g->prompt[i] >= m->vocab))
            return wm_err(err, WM_ERR_USAGE, "decoder prompt token %lld: not in the vocabulary of %lld",
                          (long long)g->prompt[i], (long long)m->vocab);
    for (size_t i = 0; i < g->n_langs; i++)
        if (g->langs[i] < 0 || g->langs[i] >= m->vocab)
            return wm_err(err, WM_ERR_USAGE, "language token %lld: not in the vocabulary of %lld", (long long)g->langs[i],
                          (long long)m->vocab);
    if (g->lang_slot >= 0 && ((size_t)g->lang_slot >= g->n_prompt || !g->n_langs))
        return wm_err(err, WM_ERR_USAGE, "language detection: slot %d outside a prompt of %zu tokens, or no languages",
                      g->lang_slot, g->n_prompt);
    int64_t P = g->n_prompt ? (int64_t)g->n_prompt : 1;
    if (g->max_length <= P)
        return wm_err(err, WM_ERR_USAGE, "max_length %lld: no room after the %lld prompt tokens",
                      (long long)g->max_length, (long long)P);
    if (g->num_beams > 1 && (int64_t)(g->n_eos + 1) * g->num_beams > (int64_t)g->num_beams * m->vocab)
        return wm_err(err, WM_ERR_USAGE, "num_beams %d: too many for a vocabulary of %lld", g->num_beams,
                      (long long)m->vocab);
    /* the caches this search holds (two self buffers at max_length, cross), bounded before anything runs */
    double rows = (double)B * g->num_beams, per = (double)m->heads * (double)m->head_dim * 4.0;
    double bytes = rows * per * (double)m->layers * 2.0 * (2.0 * (double)g->max_length + (double)S);
    if (bytes > (double)WM_S2S_MAX_CACHE_BYTES)
        return wm_err(err, WM_ERR_USAGE, "%lld sources x %d beams x max_length %lld: the caches would take %.1f GiB, "
                      "over the %.0f GiB bound; lower the batch, num_beams or max_new_tokens", (long long)B,
                      g->num_beams, (long long)g->max_length, bytes / (1 << 30),
                      (double)WM_S2S_MAX_CACHE_BYTES / (1 << 30));
    return WM_OK;
}

/* Language detection: one decoder step on the start token of every row, the argmax over g->langs into the
   prompt's lang_slot (the caches it fills are overwritten by the first real step). */
static wm_status detect_language(run_state *r, wm_error *err) {
    const wm_s2s_gen *g = r->g;
    int64_t *tok = malloc((size_t)r->N * sizeof *tok);
    if (!tok) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < r->N; i++) tok[i] = r->prompt[i * r->P];
    wm_status st = step(r, tok, 1, err);
    free(tok);
    r->len = 0;
    for (int64_t i = 0; !st && i < r->N; i++) {
        const float *lg = r->logits + i * r->V;
        int64_t best = g->langs[0];
        for (size_t k = 1; k < g->n_langs; k++) /* the first of equal maxima, as torch's argmax over the vocabulary */
            if (lg[g->langs[k]] > lg[best] || (lg[g->langs[k]] == lg[best] && g->langs[k] < best)) best = g->langs[k];
        r->prompt[i * r->P + g->lang_slot] = best;
    }
    return st;
}

/* The search after the encoder: hs [B, S, hidden] and mask [B, S] (NULL: all ones) of B rows. */
static wm_status search(wm_s2s *m, const float *hs, const int64_t *mask, int64_t B, int64_t S, const wm_s2s_gen *g,
                        wm_s2s_row_scores *rs, int64_t no_speech, int64_t **out, int64_t *width, wm_error *err) {
    run_state r;
    memset(&r, 0, sizeof r);
    r.rs = rs, r.no_speech = no_speech;
    for (int64_t i = 0; rs && i < B; i++)
        rs[i] = (wm_s2s_row_scores){g->num_beams > 1 ? NAN : 0.0, 0.0, 0};
    r.m = m, r.g = g, r.B = B, r.nb = g->num_beams, r.N = B * g->num_beams, r.S = S, r.V = m->vocab;
    r.Lmax = g->max_length;
    r.P = g->n_prompt ? (int64_t)g->n_prompt : 1;
    int64_t h = m->heads, hd = m->head_dim, N = r.N;
    wm_status st = WM_OK;
    r.mask = malloc((size_t)(N * S) * sizeof *r.mask);
    r.enc = malloc((size_t)(N * S * m->hidden) * 4);
    r.logits = malloc((size_t)(N * r.V) * 4);
    r.prompt = malloc((size_t)(N * r.P) * sizeof *r.prompt);
    r.self_k = calloc(2 * (size_t)m->layers, sizeof *r.self_k), r.self_v = calloc(2 * (size_t)m->layers, sizeof *r.self_v);
    r.cross_k = calloc((size_t)m->layers, sizeof *r.cross_k), r.cross_v = calloc((size_t)m->layers, sizeof *r.cross_v);
    int64_t *seq = calloc((size_t)(B * r.Lmax), sizeof *seq);
    int ok = r.mask && r.enc && r.logits && r.prompt && r.self_k && r.self_v && r.cross_k && r.cross_v && seq;
    for (int l = 0; ok && l < m->layers; l++) {
        for (int c = 0; c < 2; c++) {
            ok &= (r.self_k[2 * l + c] = malloc((size_t)(N * h * r.Lmax * hd) * 4)) != NULL;
            ok &= (r.self_v[2 * l + c] = malloc((size_t)(N * h * r.Lmax * hd) * 4)) != NULL;
        }
        ok &= (r.cross_k[l] = malloc((size_t)(N * h * S * hd) * 4)) != NULL;
        ok &= (r.cross_v[l] = malloc((size_t)(N * h * S * hd) * 4)) != NULL;
    }
    if (!ok) {
        st = wm_err(err, WM_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* each beam of a row shares its encoder states */
    for (int64_t i = 0; i < N; i++) {
        int64_t b = i / r.nb;
        for (int64_t k = 0; k < S; k++) r.mask[i * S + k] = mask ? mask[b * S + k] : 1;
        memcpy(r.enc + i * S * m->hidden, hs + b * S * m->hidden, (size_t)(S * m->hidden) * 4);
        for (int64_t k = 0; k < r.P; k++) r.prompt[i * r.P + k] = g->n_prompt ? g->prompt[k] : g->decoder_start_token_id;
    }
    if (g->lang_slot >= 0 && (st = detect_language(&r, err))) goto done;
    st = r.nb == 1 ? greedy(&r, seq, width, err) : beam(&r, seq, width, err);
    if (!st) {
        /* compact to [B, width] */
        for (int64_t i = 0; i < B; i++) memmove(seq + i * *width, seq + i * r.Lmax, (size_t)*width * sizeof *seq);
        *out = seq;
        seq = NULL;
    }
done:
    free(seq);
    state_free(&r);
    return st;
}

/* Runs the encoder on feeds f[0..n) and the search on its output (mask: NULL for all ones). */
static wm_status encode_search(wm_s2s *m, const feed *f, size_t n, const int64_t *mask, int64_t B, int64_t S_in,
                               const wm_s2s_gen *g, wm_s2s_row_scores *rs, int64_t no_speech, int64_t **out,
                               int64_t *width, wm_error *err) {
    wm_tensor eo[4];
    if (wm_session_n_outputs(m->enc) > 4)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s/encoder_model.onnx: more outputs than last_hidden_state", m->dir);
    double t0 = now_ms(), c0 = cpu_ms();
    m->enc_ms = m->search_ms = m->enc_cpu_ms = m->search_cpu_ms = 0;
    wm_status st = run_named(m->enc, f, n, eo, NULL, err);
    if (st) return st;
    m->enc_ms = now_ms() - t0;
    m->enc_cpu_ms = cpu_ms() - c0;
    const wm_tensor *h = &eo[wm_session_output_index(m->enc, "last_hidden_state")];
    if (h->rank != 3 || h->dims[0] != B || h->dims[2] != m->hidden || (mask && h->dims[1] != S_in) || h->dims[1] < 1)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s/encoder_model.onnx: last_hidden_state is not [%lld, %s, %lld]",
                      m->dir, (long long)B, mask ? "source length" : "frames", (long long)m->hidden);
    int64_t S = h->dims[1];
    if ((st = check_gen(m, g, B, S, err))) return st;
    t0 = now_ms();
    c0 = cpu_ms();
    st = search(m, h->data, mask, B, S, g, rs, no_speech, out, width, err);
    m->search_ms = now_ms() - t0;
    m->search_cpu_ms = cpu_ms() - c0;
    return st;
}

wm_status wm_s2s_generate(wm_s2s *m, const int64_t *ids, const int64_t *mask, int64_t B, int64_t S,
                          const wm_s2s_gen *g, int64_t **out, int64_t *width, wm_error *err) {
    *out = NULL;
    *width = 0;
    if (m->speech || m->image)
        return wm_err(err, WM_ERR_USAGE, "%s: %s encoder-decoder (%s): give %s, not tokens", m->dir,
                      m->speech ? "a speech" : "an image", m->speech ? "input_features" : "pixel_values",
                      m->speech ? "audio" : "images");
    wm_status st = check_gen(m, g, B, S, err);
    if (st) return st;
    for (int64_t i = 0; i < B * S; i++)
        if (ids[i] < 0 || ids[i] >= m->vocab)
            return wm_err(err, WM_ERR_USAGE, "source token %lld is outside the vocabulary of %lld", (long long)ids[i],
                          (long long)m->vocab);
    int64_t d[2] = {B, S};
    feed f[2] = {{"input_ids", tens(WM_DT_INT64, 2, d, (void *)ids)}, {"attention_mask", tens(WM_DT_INT64, 2, d, (void *)mask)}};
    return encode_search(m, f, 2, mask, B, S, g, NULL, -1, out, width, err);
}

wm_status wm_s2s_generate_features(wm_s2s *m, const float *feats, int64_t B, int64_t n_mels, int64_t frames,
                                   const wm_s2s_gen *g, int64_t **out, int64_t *width, wm_error *err) {
    return wm_s2s_generate_features_scored(m, feats, B, n_mels, frames, g, -1, NULL, out, width, err);
}

wm_status wm_s2s_generate_features_scored(wm_s2s *m, const float *feats, int64_t B, int64_t n_mels, int64_t frames,
                                          const wm_s2s_gen *g, int64_t no_speech, wm_s2s_row_scores *rs,
                                          int64_t **out, int64_t *width, wm_error *err) {
    *out = NULL;
    *width = 0;
    if (!m->speech)
        return wm_err(err, WM_ERR_USAGE, "%s: the encoder reads input_ids, not audio features", m->dir);
    if (B < 1 || frames < 1) return wm_err(err, WM_ERR_USAGE, "no audio features");
    if (n_mels != m->n_mels)
        return wm_err(err, WM_ERR_USAGE, "%lld mel bins given; %s/encoder_model.onnx reads %lld", (long long)n_mels,
                      m->dir, (long long)m->n_mels);
    wm_status st = check_gen(m, g, B, frames, err); /* frames bound the encoder's output length */
    if (st) return st;
    int64_t d[3] = {B, n_mels, frames};
    feed f[1] = {{"input_features", tens(WM_DT_FLOAT, 3, d, (void *)feats)}};
    return encode_search(m, f, 1, NULL, B, frames, g, rs, no_speech, out, width, err);
}

int wm_s2s_image(const wm_s2s *m) { return m->image; }

wm_status wm_s2s_generate_pixels(wm_s2s *m, const float *pixels, int64_t B, int64_t C, int64_t H, int64_t W,
                                 const wm_s2s_gen *g, int64_t **out, int64_t *width, wm_error *err) {
    *out = NULL;
    *width = 0;
    if (!m->image)
        return wm_err(err, WM_ERR_USAGE, "%s: the encoder does not read pixel_values (no image model)", m->dir);
    if (B < 1 || C < 1 || H < 1 || W < 1) return wm_err(err, WM_ERR_USAGE, "no images");
    const wm_io_info *in = wm_session_input(m->enc, (size_t)wm_session_input_index(m->enc, "pixel_values"));
    const int64_t got[4] = {B, C, H, W};
    for (int k = 1; k < 4 && in->rank == 4; k++)
        if (in->dims[k] > 0 && in->dims[k] != got[k])
            return wm_err(err, WM_ERR_USAGE, "images of %lld x %lld x %lld (channels x height x width); "
                          "%s/encoder_model.onnx reads %lld x %lld x %lld", (long long)C, (long long)H, (long long)W,
                          m->dir, (long long)in->dims[1], (long long)in->dims[2], (long long)in->dims[3]);
    feed f[1] = {{"pixel_values", tens(WM_DT_FLOAT, 4, got, (void *)pixels)}};
    return encode_search(m, f, 1, NULL, B, 1, g, NULL, -1, out, width, err);
}
