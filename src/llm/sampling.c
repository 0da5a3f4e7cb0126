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

size_t wm_sample_scratch_size(int64_t n) { return (size_t)n * sizeof(cand) + 64; }

static int by_logit_desc(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->l != y->l) return x->l > y->l ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id); /* lower id first, like a stable sort */
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
    /* candidates within 30 nats of the best after temperature: the rest weigh under 1e-13 each */
    double mx = (double)logits[best] / s->temperature;
    cand *c = scratch;
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        double l = (double)logits[i] / s->temperature;
        if (l >= mx - 30) c[m].l = (float)l, c[m].id = (int32_t)i, m++;
    }
    qsort(c, (size_t)m, sizeof *c, by_logit_desc);
    int64_t keep = m;
    if (s->top_k > 0 && s->top_k < keep) keep = s->top_k;
    double sum = 0;
    for (int64_t i = 0; i < keep; i++) sum += (c[i].l = (float)exp((double)c[i].l - mx));
    for (int64_t i = 0; i < keep; i++) c[i].l = (float)(c[i].l / sum);
    if (s->top_p < 1.0f) { /* smallest prefix whose mass reaches top_p (at least one token) */
        double acc = 0;
        int64_t k = 0;
        while (k < keep) {
            acc += c[k++].l;
            if (acc >= s->top_p) break;
        }
        keep = k;
    }
    if (s->min_p > 0) { /* drop tokens below min_p times the top probability */
        float lim = s->min_p * c[0].l;
        int64_t k = 1;
        while (k < keep && c[k].l >= lim) k++;
        keep = k;
    }
    sum = 0;
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
