#include "llm/sampling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void wm_sampling_default(wm_sampling *s) {
    memset(s, 0, sizeof *s);
    s->greedy = 1;
    s->temperature = 1.0f;
    s->top_p = 1.0f;
    s->repetition_penalty = 1.0f;
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void wm_rng_seed(wm_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix(&seed);
}

static uint64_t next(wm_rng *r) {
    uint64_t *s = r->s, res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3], s[2] ^= t, s[3] = rotl(s[3], 45);
    return res;
}

double wm_rng_uniform(wm_rng *r) { return (double)(next(r) >> 11) * (1.0 / 9007199254740992.0); }

typedef struct cand {
    float l; /* logit, then probability */
    int32_t id;
} cand;

size_t wm_sample_scratch_size(int64_t n) { return (size_t)n * (sizeof(cand) + sizeof(float)) + 64; }

static int by_logit_desc(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->l != y->l) return x->l > y->l ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id); /* lower id first, like a stable sort */
}

/* transformers' warpers in its order on logits[n] (repetition penalty already applied): temperature (a float32
   division, as torch's), top-k (every score >= the k-th highest: ties kept as torch's filter keeps them), top-p (the
   lowest tokens whose cumulative mass, summed from the bottom, stays <= 1 - top_p are removed; at least one kept),
   min-p. The kept candidates, best first, with their probabilities (softmax over the kept ones) into c[0..return);
   scratch after c[n]: n floats. Scores more than 104 nats under the best after temperature are not listed: float32's
   softmax (torch's) makes them 0. *floor: the scaled score at and above which transformers keeps a token (its
   warped score stays finite): the k-th highest (-inf without top-k) when only top-k filters, else the lowest listed
   one (top-p and min-p remove the tokens of probability 0). */
static int64_t warp(const float *logits, int64_t n, const wm_sampling *s, cand *c, float *floor) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (logits[i] > logits[best] || (isnan(logits[best]) && !isnan(logits[i]))) best = i;
    const float T = s->temperature > 0 ? s->temperature : 1.0f;
    const float mx = logits[best] / T;
    *floor = -INFINITY;
    if (!isfinite(mx)) { /* all -inf or NaN, or an infinite score: the arg max alone */
        c[0].l = 1.0f, c[0].id = (int32_t)best;
        *floor = mx;
        return 1;
    }
    float kth = -INFINITY;
    if (s->top_k > 0 && s->top_k < n) {
        float *tmp = (float *)(c + n);
        for (int64_t i = 0; i < n; i++) tmp[i] = isnan(logits[i]) ? -INFINITY : logits[i] / T;
        kth = wm_kth_highest(tmp, n, s->top_k, tmp);
    }
    const int mass = s->top_p < 1.0f || s->min_p > 0;
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        float l = logits[i] / T;
        if (l >= kth && (double)l >= (double)mx - 104.0) c[m].l = l, c[m].id = (int32_t)i, m++;
    }
    qsort(c, (size_t)m, sizeof *c, by_logit_desc);
    int64_t keep = m;
    double sum = 0, top = c[0].l;
    for (int64_t i = 0; i < keep; i++) sum += exp((double)c[i].l - top);
    if (s->top_p < 1.0f) {
        double lim = 1.0 - (double)s->top_p, acc = 0;
        int64_t k = keep;
        while (k > 1) { /* from the bottom: removed while the mass up to and including it is <= 1 - top_p */
            acc += exp((double)c[k - 1].l - top) / sum;
            if (acc > lim) break;
            k--;
        }
        keep = k;
        sum = 0;
        for (int64_t i = 0; i < keep; i++) sum += exp((double)c[i].l - top);
    }
    if (s->min_p > 0) { /* drop tokens below min_p times the top probability (a ratio: renormalizing keeps it) */
        double lim = log((double)s->min_p);
        int64_t k = 1;
        while (k < keep && (double)c[k].l - top >= lim) k++;
        keep = k;
        sum = 0;
        for (int64_t i = 0; i < keep; i++) sum += exp((double)c[i].l - top);
    }
    *floor = mass ? c[keep - 1].l : kth;
    for (int64_t i = 0; i < keep; i++) c[i].l = (float)(exp((double)c[i].l - top) / sum);
    return keep;
}

int64_t wm_sample_probs(const float *logits, int64_t n, const wm_sampling *s, float *probs, float *kept_floor,
                        void *scratch) {
    if (n <= 0) return 0;
    cand *c = scratch;
    float fl;
    int64_t keep = warp(logits, n, s, c, &fl);
    memset(probs, 0, (size_t)n * sizeof *probs);
    for (int64_t i = 0; i < keep; i++) probs[c[i].id] = c[i].l;
    if (kept_floor) *kept_floor = fl;
    return keep;
}

int64_t wm_sample_from_probs(const float *probs, int64_t n, wm_rng *rng) {
    double sum = 0, acc = 0;
    int64_t last = 0;
    for (int64_t i = 0; i < n; i++)
        if (probs[i] > 0) sum += probs[i], last = i;
    double u = wm_rng_uniform(rng) * sum;
    for (int64_t i = 0; i < n; i++)
        if (probs[i] > 0 && u < (acc += probs[i])) return i;
    return last;
}

int32_t wm_sample(float *logits, int64_t n, const wm_sampling *s, const int32_t *history, size_t n_hist, wm_rng *rng,
                  void *scratch) {
    if (n <= 0) return -1;
    if (s->repetition_penalty != 1.0f && s->repetition_penalty > 0)
        for (size_t i = 0; i < n_hist; i++) { /* each seen id once: penalizing twice is wrong */
            int32_t id = history[i];
            if (id < 0 || id >= n) continue;
            int seen = 0;
            for (size_t k = 0; k < i && !seen; k++) seen = history[k] == id;
            if (seen) continue;
            float *l = &logits[id];
            *l = *l > 0 ? *l / s->repetition_penalty : *l * s->repetition_penalty;
        }
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (logits[i] > logits[best] || (isnan(logits[best]) && !isnan(logits[i]))) best = i;
    if (s->greedy || s->temperature <= 0) return (int32_t)best;
    cand *c = scratch;
    float fl;
    int64_t keep = warp(logits, n, s, c, &fl);
    double sum = 0;
    for (int64_t i = 0; i < keep; i++) sum += c[i].l;
    double u = wm_rng_uniform(rng) * sum, acc = 0;
    for (int64_t i = 0; i < keep; i++) {
        acc += c[i].l;
        if (u < acc) return c[i].id;
    }
    return c[keep - 1].id;
}

float wm_kth_highest(const float *sc, int64_t V, int64_t k, float *scratch) {
    int64_t n = 0;
    for (int64_t t = 0; t < V; t++) scratch[n++] = sc[t];
    /* quickselect on descending order */
    int64_t lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        float piv = scratch[(lo + hi) / 2];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (scratch[i] > piv) i++;
            while (scratch[j] < piv) j--;
            if (i <= j) {
                float t = scratch[i];
                scratch[i++] = scratch[j];
                scratch[j--] = t;
            }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else break;
    }
    return scratch[want];
}
