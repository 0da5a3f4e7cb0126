/*
 * quant_calib.c - calibrators (min/max, percentile, entropy) over observed
 * activations. Histograms follow numpy's np.histogram conventions (bin i
 * holds edges[i] <= x < edges[i+1], the last bin includes its right edge,
 * float32 edges from a float64 linspace), so ranges agree with
 * onnxruntime's calibrators fed the same data.
 */
#include "opt/quant_calib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

typedef struct cvalue {
    char *name;
    float mn, mx;      /* observed (NaNs skipped) */
    int seen;
    int64_t *hist;     /* histogram methods */
    float *edges;      /* nb + 1 */
    int nb;
    float thr;         /* value mode: the +-range the histogram covers */
} cvalue;

struct wm_calib {
    wm_calib_opts o;
    cvalue *v;
    size_t n, cap;
};

void wm_calib_opts_default(wm_calib_opts *o, wm_calib_method m) {
    memset(o, 0, sizeof *o);
    o->method = m;
    o->symmetric = m == WM_CALIB_PERCENTILE;
    o->num_bins = m == WM_CALIB_PERCENTILE ? 2048 : 128;
    o->num_quantized_bins = 128;
    o->percentile = 99.999;
}

int wm_calib_method_parse(const char *s) {
    if (!s) return -1;
    if (!strcmp(s, "minmax")) return WM_CALIB_MINMAX;
    if (!strcmp(s, "percentile")) return WM_CALIB_PERCENTILE;
    if (!strcmp(s, "entropy")) return WM_CALIB_ENTROPY;
    return -1;
}

wm_status wm_calib_new(const wm_calib_opts *o, wm_calib **out, wm_error *err) {
    *out = NULL;
    if (o->method == WM_CALIB_ENTROPY && (o->num_quantized_bins < 2 || o->num_bins < o->num_quantized_bins))
        return wm_err(err, WM_ERR_USAGE, "entropy calibration: need num_bins >= num_quantized_bins >= 2");
    if (o->method != WM_CALIB_MINMAX && o->num_bins < 1) return wm_err(err, WM_ERR_USAGE, "calibration: num_bins < 1");
    if (o->method == WM_CALIB_PERCENTILE && (o->percentile < 0 || o->percentile > 100))
        return wm_err(err, WM_ERR_USAGE, "calibration: percentile must be within [0, 100]");
    wm_calib *c = calloc(1, sizeof *c);
    if (!c) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    c->o = *o;
    *out = c;
    return WM_OK;
}

void wm_calib_free(wm_calib *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) {
        free(c->v[i].name);
        free(c->v[i].hist);
        free(c->v[i].edges);
    }
    free(c->v);
    free(c);
}

/* ---------------------------------------------------------------- numpy-style histograms */

/*
 * Uniform edges over [lo, hi] as numpy's linspace makes them for float32
 * bounds: step = (hi - lo) / nb and edge i = i * step + lo, all in float32,
 * the last edge exactly hi (numpy widens an empty range by 0.5 each side).
 */
static float *uniform_edges(float lo, float hi, int nb) {
    if (lo == hi) {
        lo = lo - 0.5f;
        hi = hi + 0.5f;
    }
    float *e = malloc(((size_t)nb + 1) * sizeof *e);
    if (!e) return NULL;
    volatile float delta = hi - lo, step = delta / (float)nb; /* volatile: no wider intermediate precision */
    for (int i = 0; i < nb; i++) {
        volatile float y = (float)i * step;
        e[i] = y + lo;
    }
    e[nb] = hi;
    return e;
}

/* Bin of x within edges[0..nb] (x inside [edges[0], edges[nb]]). */
static int bin_of(const float *e, int nb, float x) {
    double span = (double)e[nb] - (double)e[0];
    int i = span > 0 ? (int)(((double)x - (double)e[0]) / span * nb) : 0;
    if (i < 0) i = 0;
    if (i > nb - 1) i = nb - 1;
    while (i > 0 && x < e[i]) i--;
    while (i < nb - 1 && x >= e[i + 1]) i++;
    return i;
}

/* Adds data (or |data|) within [edges[0], edges[nb]] to hist. */
static void accumulate(int64_t *hist, const float *e, int nb, const float *d, size_t n, int absval) {
    for (size_t k = 0; k < n; k++) {
        float x = absval ? fabsf(d[k]) : d[k];
        if (!(x >= e[0] && x <= e[nb])) continue; /* NaN and outside */
        hist[bin_of(e, nb, x)]++;
    }
}

static void minmax_of(const float *d, size_t n, float *mn, float *mx, int *any) {
    *any = 0;
    for (size_t k = 0; k < n; k++) {
        float x = d[k];
        if (x != x) continue;
        if (!*any || x < *mn) *mn = x;
        if (!*any || x > *mx) *mx = x;
        *any = 1;
    }
}

/* |x| histogram (percentile, symmetric): the first batch sets the range to [min|x|, max|x|]; later
 * batches extend the edges by whole bins (numpy arange in float32). */
static wm_status observe_abs(cvalue *v, int nb, const float *d, size_t n, wm_error *err) {
    float amin = 0, amax = 0;
    int any = 0;
    for (size_t k = 0; k < n; k++) {
        float x = fabsf(d[k]);
        if (x != x) continue;
        if (!any || x < amin) amin = x;
        if (!any || x > amax) amax = x;
        any = 1;
    }
    if (!v->hist) {
        v->nb = nb;
        v->edges = uniform_edges(amin, amax, nb);
        v->hist = calloc((size_t)nb, sizeof *v->hist);
        if (!v->edges || !v->hist) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        accumulate(v->hist, v->edges, nb, d, n, 1);
        return WM_OK;
    }
    if (any && amax > v->edges[v->nb]) {
        float width = v->edges[1] - v->edges[0], start = v->edges[v->nb] + width, stop = amax + width;
        float second = start + width, delta = second - start;
        long extra = (long)ceilf((stop - start) / width);
        if (extra < 0) extra = 0;
        if (extra > 1 << 24) return wm_err(err, WM_ERR_INPUT, "calibration: value range grew too far");
        float *e = realloc(v->edges, ((size_t)v->nb + 1 + (size_t)extra) * sizeof *e);
        int64_t *h = e ? realloc(v->hist, ((size_t)v->nb + (size_t)extra) * sizeof *h) : NULL;
        if (e) v->edges = e;
        if (!h) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        v->hist = h;
        for (long i = 0; i < extra; i++) {
            v->edges[v->nb + 1 + i] = i == 0 ? start : i == 1 ? second : start + (float)i * delta;
            v->hist[v->nb + i] = 0;
        }
        v->nb += (int)extra;
    }
    accumulate(v->hist, v->edges, v->nb, d, n, 1);
    return WM_OK;
}

/* x histogram over [-t, t] (entropy, asymmetric percentile); a wider batch grows it by whole strides. */
static wm_status observe_value(cvalue *v, int nb, const float *d, size_t n, float bmin, float bmax, wm_error *err) {
    float t = fabsf(bmin) > fabsf(bmax) ? fabsf(bmin) : fabsf(bmax);
    if (!v->hist) {
        v->nb = nb;
        v->thr = t;
        v->edges = uniform_edges(-t, t, nb);
        v->hist = calloc((size_t)nb, sizeof *v->hist);
        if (!v->edges || !v->hist) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        accumulate(v->hist, v->edges, nb, d, n, 0);
        return WM_OK;
    }
    if (t <= v->thr) {
        float *e = uniform_edges(-v->thr, v->thr, v->nb);
        if (!e) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        accumulate(v->hist, e, v->nb, d, n, 0);
        free(e);
        return WM_OK;
    }
    int old_nb = v->nb, half = 0, new_nb = old_nb;
    float new_t = t;
    if (v->thr != 0.0f) {
        float stride = 2.0f * v->thr / (float)old_nb;
        half = (int)(floorf((t - v->thr) / stride) + 1.0f);
        new_nb = old_nb + 2 * half;
        new_t = (float)half * stride + v->thr;
    }
    int64_t *h = calloc((size_t)new_nb, sizeof *h);
    float *e = uniform_edges(-new_t, new_t, new_nb);
    if (!h || !e) {
        free(h);
        free(e);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    accumulate(h, e, new_nb, d, n, 0);
    for (int i = 0; i < old_nb; i++) h[half + i] += v->hist[i]; /* old_t == 0: half is 0 */
    free(v->hist);
    free(v->edges);
    v->hist = h;
    v->edges = e;
    v->nb = new_nb;
    v->thr = new_t;
    return WM_OK;
}

wm_status wm_calib_observe(wm_calib *c, const char *value, const float *data, size_t n, wm_error *err) {
    if (!value || (n && !data)) return wm_err(err, WM_ERR_INPUT, "calibration: missing value name or data");
    cvalue *v = NULL;
    for (size_t i = 0; i < c->n && !v; i++)
        if (!strcmp(c->v[i].name, value)) v = &c->v[i];
    if (!v) {
        if (c->n == c->cap) {
            size_t cap = c->cap ? c->cap * 2 : 32;
            cvalue *p = realloc(c->v, cap * sizeof *p);
            if (!p) return wm_err(err, WM_ERR_NOMEM, "out of memory");
            c->v = p;
            c->cap = cap;
        }
        v = &c->v[c->n];
        memset(v, 0, sizeof *v);
        if (!(v->name = strdup(value))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        c->n++;
    }
    float bmin = 0, bmax = 0;
    int any;
    minmax_of(data, n, &bmin, &bmax, &any);
    if (!any) bmin = bmax = 0; /* numpy: an empty batch counts as 0 */
    if (!v->seen || bmin < v->mn) v->mn = bmin;
    if (!v->seen || bmax > v->mx) v->mx = bmax;
    v->seen = 1;
    switch (c->o.method) {
    case WM_CALIB_MINMAX: return WM_OK;
    case WM_CALIB_PERCENTILE:
        return c->o.symmetric ? observe_abs(v, c->o.num_bins, data, n, err)
                              : observe_value(v, c->o.num_bins, data, n, bmin, bmax, err);
    case WM_CALIB_ENTROPY: return observe_value(v, c->o.num_bins, data, n, bmin, bmax, err);
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- thresholds */

/* First index i with cdf[i] >= p (numpy searchsorted left on the cumulative fractions). */
static int cdf_index(const int64_t *h, int nb, double p) {
    double total = 0, cdf = 0;
    for (int i = 0; i < nb; i++) total += (double)h[i];
    if (total <= 0) return 0;
    for (int i = 0; i < nb; i++) {
        cdf += (double)h[i] / total;
        if (cdf >= p) return i;
    }
    return nb;
}

static void percentile_range(const wm_calib *c, const cvalue *v, float *lo, float *hi) {
    double p = c->o.percentile;
    if (c->o.symmetric) {
        int i = cdf_index(v->hist, v->nb, p / 100.0);
        *lo = -v->edges[i];
        *hi = v->edges[i];
    } else {
        double cut = (100.0 - p) / 200.0;
        *hi = v->edges[cdf_index(v->hist, v->nb, 1.0 - cut)];
        *lo = v->edges[cdf_index(v->hist, v->nb, cut)];
    }
}

/* Smooths a distribution as onnxruntime does (zeros become eps, taken from the non-zeros); 0 if all zero. */
static int smooth(const double *in, float *out, int n) {
    int zeros = 0;
    for (int i = 0; i < n; i++) zeros += in[i] == 0;
    int nonzeros = n - zeros;
    if (!nonzeros) return 0;
    const double eps = 0.0001;
    double eps1 = eps * (double)zeros / (double)nonzeros;
    for (int i = 0; i < n; i++) out[i] = (float)in[i] + (in[i] == 0 ? (float)eps : (float)-eps1);
    return 1;
}

/* KL(p || q) of two smoothed histograms (normalized here). */
static double kl(const float *p, const float *q, int n) {
    double sp = 0, sq = 0, s = 0;
    for (int i = 0; i < n; i++) {
        sp += p[i];
        sq += q[i];
    }
    for (int i = 0; i < n; i++) {
        double a = p[i] / sp, b = q[i] / sq;
        if (a > 0 && b > 0) s += a * log(a / b);
        else if (!(a == 0 && b >= 0)) return INFINITY;
    }
    return s;
}

static wm_status entropy_range(const wm_calib *c, const cvalue *v, float *lo, float *hi, wm_error *err) {
    int nb = v->nb, zero = nb / 2, nq = c->o.num_quantized_bins, hq = nq / 2;
    double *p = malloc((size_t)nb * sizeof *p), *qd = malloc((size_t)nb * sizeof *qd);
    float *ps = malloc((size_t)nb * sizeof *ps), *qs = malloc((size_t)nb * sizeof *qs);
    int64_t *qb = malloc((size_t)(nq > 0 ? nq : 1) * sizeof *qb);
    if (!p || !qd || !ps || !qs || !qb) {
        free(p), free(qd), free(ps), free(qs), free(qb);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    double best = INFINITY;
    int have = 0;
    *lo = *hi = 0;
    for (int i = hq; i <= zero; i++) {
        int start = zero - i, end = zero + i + 1 < nb ? zero + i + 1 : nb, len = end - start;
        int64_t left = 0, right = 0;
        for (int k = 0; k < start; k++) left += v->hist[k];
        for (int k = end; k < nb; k++) right += v->hist[k];
        for (int k = 0; k < len; k++) p[k] = (double)v->hist[start + k];
        p[0] += (double)left;
        p[len - 1] += (double)right;
        int merged = len / nq;
        for (int k = 0; k < nq; k++) {
            qb[k] = 0;
            for (int m = k * merged; m < (k + 1) * merged; m++) qb[k] += v->hist[start + m];
        }
        for (int m = nq * merged; m < len; m++) qb[nq - 1] += v->hist[start + m];
        for (int k = 0; k < len; k++) qd[k] = 0;
        for (int k = 0; k < nq; k++) {
            int norm = 0;
            for (int m = k * merged; m < (k + 1) * merged; m++) norm += p[m] != 0;
            if (!norm) continue;
            for (int m = k * merged; m < (k + 1) * merged; m++) qd[m] = trunc((double)qb[k] / norm); /* int64 store */
        }
        double d = smooth(p, ps, len) && smooth(qd, qs, len) ? kl(ps, qs, len) : INFINITY;
        if (!have || d < best) { /* argmin: the first minimum wins */
            best = d;
            have = 1;
            *lo = v->edges[start];
            *hi = v->edges[end];
        }
    }
    free(p), free(qd), free(ps), free(qs), free(qb);
    return WM_OK;
}

wm_status wm_calib_result(const wm_calib *c, wm_calib_ranges *out, wm_error *err) {
    out->v = calloc(c->n ? c->n : 1, sizeof *out->v);
    out->n = 0;
    if (!out->v) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < c->n; i++) {
        const cvalue *v = &c->v[i];
        float lo = v->mn, hi = v->mx;
        if (c->o.method == WM_CALIB_MINMAX && c->o.symmetric) {
            float a = fabsf(lo) > fabsf(hi) ? fabsf(lo) : fabsf(hi);
            lo = -a;
            hi = a;
        } else if (c->o.method == WM_CALIB_PERCENTILE) percentile_range(c, v, &lo, &hi);
        else if (c->o.method == WM_CALIB_ENTROPY) {
            wm_status s = entropy_range(c, v, &lo, &hi, err);
            if (s) {
                wm_calib_ranges_free(out);
                return s;
            }
        }
        if (c->o.method != WM_CALIB_MINMAX) { /* never beyond what was seen */
            if (lo < v->mn) lo = v->mn;
            if (hi > v->mx) hi = v->mx;
        }
        char *nm = strdup(v->name);
        if (!nm) {
            wm_calib_ranges_free(out);
            return wm_err(err, WM_ERR_NOMEM, "out of memory");
        }
        out->v[out->n++] = (wm_quant_range){nm, lo, hi};
    }
    return WM_OK;
}

void wm_calib_ranges_free(wm_calib_ranges *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n; i++) free((char *)r->v[i].name);
    free(r->v);
    r->v = NULL;
    r->n = 0;
}
