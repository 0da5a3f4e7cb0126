/*
 * signal.c - HannWindow, HammingWindow, BlackmanWindow, MelWeightMatrix
 * (17), DFT (17, 20: axis as an input), STFT (17).
 *
 * Windows and filter banks are computed in double and stored in the
 * requested type. DFT and STFT run a double-precision FFT of any length
 * (ops/fft.h) per 1-D line; threads take whole lines. The inverse DFT with
 * onesided = 1 is the real inverse of a Hermitian spectrum: the bins up to
 * n/2 are cropped or zero-padded, the rest mirrored as conjugates, and the
 * imaginary parts of the DC and (even n) Nyquist bins ignored, as numpy's
 * irfft does.
 */
#include <math.h>
#include <string.h>

#include "ops/fft.h"
#include "ops/scalar.h"

static int in_list(int32_t dt, const int32_t *l) {
    for (; *l; l++)
        if (*l == dt) return 1;
    return 0;
}

/* output_datatype of windows and MelWeightMatrix: a numeric type */
static wm_status out_type(wm_node *n, wm_error *err) {
    int32_t to = (int32_t)wm_attr_int(n, "output_datatype", WM_DT_FLOAT);
    if (!in_list(to, wm_types_numeric))
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "output_datatype %s is not supported", wm_dtype_name(to));
    n->out_dtype[0] = to;
    return WM_OK;
}

/* ---------------------------------------------------------------- windows */

static wm_status window_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, wm_types_index, err);
    return st ? st : out_type(n, err);
}

static wm_status window_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    if (wm_tensor_numel(in[0]) != 1) return wm_node_err(n, err, WM_ERR_INPUT, "size must hold one value");
    if (!in[0]->data) return WM_NEED_DATA;
    int64_t size = wm_tensor_get_int(in[0], 0);
    if (size < 0) return wm_node_err(n, err, WM_ERR_INPUT, "negative size %lld", (long long)size);
    out[0]->rank = 1;
    out[0]->dims[0] = size;
    return WM_OK;
}

static wm_status window_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)in, (void)x;
    const char *op = n->proto->op_type;
    int64_t size = out[0]->dims[0];
    double N = (double)(wm_attr_int(n, "periodic", 1) ? size : size - 1);
    for (int64_t i = 0; i < size; i++) {
        double t = (double)i, v;
        if (!strcmp(op, "HannWindow")) {
            double s = sin(M_PI * t / N);
            v = s * s;
        } else if (!strcmp(op, "HammingWindow")) {
            v = 25.0 / 46.0 - (1 - 25.0 / 46.0) * cos(2 * M_PI * t / N);
        } else {
            v = 0.42 - 0.5 * cos(2 * M_PI * t / N) + 0.08 * cos(4 * M_PI * t / N);
        }
        if (N == 0) v = 1; /* a symmetric window of one sample */
        wm_store_f64(out[0]->dtype, out[0]->data, (uint64_t)i, v);
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- MelWeightMatrix */

static wm_status mel_init(wm_node *n, wm_error *err) {
    wm_status st = WM_OK;
    for (int i = 0; i < 3 && !st; i++) st = wm_check_type(n, i, wm_types_index, err);
    for (int i = 3; i < 5 && !st; i++) st = wm_check_type(n, i, wm_types_float, err);
    return st ? st : out_type(n, err);
}

static wm_status mel_args(const wm_node *n, wm_tensor *const *in, int64_t *a, double *lo, double *hi, wm_error *err) {
    for (int i = 0; i < 5; i++) {
        if (wm_tensor_numel(in[i]) != 1) return wm_node_err(n, err, WM_ERR_INPUT, "input %d must hold one value", i);
        if (!in[i]->data) return WM_NEED_DATA;
    }
    for (int i = 0; i < 3; i++) a[i] = wm_tensor_get_int(in[i], 0);
    *lo = wm_tensor_get_f64(in[3], 0);
    *hi = wm_tensor_get_f64(in[4], 0);
    if (a[0] < 1 || a[1] < 1 || a[2] < 1 || a[0] > (1 << 20) || a[1] > (1 << 30))
        return wm_node_err(n, err, WM_ERR_INPUT, "num_mel_bins, dft_length and sample_rate must be positive");
    if (!(*lo >= 0 && *hi >= *lo)) return wm_node_err(n, err, WM_ERR_INPUT, "need 0 <= lower_edge_hertz <= upper_edge_hertz");
    return WM_OK;
}

static wm_status mel_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    int64_t a[3];
    double lo, hi;
    wm_status st = mel_args(n, in, a, &lo, &hi, err);
    if (st) return st;
    out[0]->rank = 2;
    out[0]->dims[0] = a[1] / 2 + 1;
    out[0]->dims[1] = a[0];
    return WM_OK;
}

static wm_status mel_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    int64_t a[3];
    double lo, hi;
    wm_status st = mel_args(n, in, a, &lo, &hi, x->err);
    if (st) return st;
    int64_t nmel = a[0], dft = a[1], rate = a[2], nspec = dft / 2 + 1;
    /* the mel edges in float32 (the edge frequencies' type), the bin positions in double */
    float lm = 2595.0f * (float)log10(1.0 + (double)((float)lo / 700.0f));
    float hm = 2595.0f * (float)log10(1.0 + (double)((float)hi / 700.0f));
    float step = (hm - lm) / (float)(nmel + 2);
    int32_t dt = out[0]->dtype;
    memset(out[0]->data, 0, wm_tensor_nbytes(out[0]));
    int64_t bins[3];
    for (int64_t i = 0; i < nmel; i++) {
        for (int k = 0; k < 3; k++) {
            double mel = (double)(i + k) * (double)step + (double)lm;
            double hz = 700.0 * (pow(10.0, mel / 2595.0) - 1.0);
            bins[k] = (int64_t)floor((double)(dft + 1) * hz / (double)rate);
            if (bins[k] < 0) bins[k] = 0;
            if (bins[k] >= nspec) bins[k] = nspec - 1;
        }
        int64_t l = bins[0], c = bins[1], r = bins[2];
        if (c == l) wm_store_f64(dt, out[0]->data, (uint64_t)(c * nmel + i), 1.0);
        else
            for (int64_t j = l; j <= c; j++) wm_store_f64(dt, out[0]->data, (uint64_t)(j * nmel + i), (double)(j - l) / (double)(c - l));
        for (int64_t j = c; j < r; j++) wm_store_f64(dt, out[0]->data, (uint64_t)(j * nmel + i), (double)(r - j) / (double)(r - c));
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- DFT */

typedef struct dft_args {
    int axis;       /* signal axis */
    int64_t len;    /* input length along it */
    int64_t N;      /* transform length */
    int64_t nout;   /* output length along it */
    int inverse, onesided, cin, cout;
    uint64_t outer, inner; /* lines: outer x inner, elements of a line `inner` channels-rows apart */
} dft_args;

static wm_status dft_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, wm_types_float, err);
    if (!st && wm_has_in(n, 1)) st = wm_check_type(n, 1, wm_types_index, err);
    if (!st && wm_has_in(n, 2)) st = wm_check_type(n, 2, (const int32_t[]){WM_DT_INT64, 0}, err);
    n->out_dtype[0] = n->in_dtype[0];
    return st;
}

static wm_status dft_resolve(const wm_node *n, wm_tensor *const *in, dft_args *d, wm_error *err) {
    const wm_tensor *x = in[0];
    int r = x->rank;
    if (r < 3 || (x->dims[r - 1] != 1 && x->dims[r - 1] != 2))
        return wm_node_err(n, err, WM_ERR_INPUT, "input must be [batch, ..., 1 or 2] (real or complex)");
    int64_t axis;
    if (n->opset >= 20) {
        axis = -2;
        if (wm_has_in(n, 2) && in[2]) {
            if (!in[2]->data) return WM_NEED_DATA;
            if (wm_tensor_numel(in[2]) != 1) return wm_node_err(n, err, WM_ERR_INPUT, "axis must hold one value");
            axis = wm_tensor_get_int(in[2], 0);
        }
    } else {
        axis = wm_attr_int(n, "axis", 1);
    }
    int a = wm_axis(axis, r);
    if (a < 1 || a == r - 1) return wm_node_err(n, err, WM_ERR_INPUT, "axis %lld is not a signal axis of rank %d", (long long)axis, r);
    d->axis = a;
    d->inverse = (int)wm_attr_int(n, "inverse", 0);
    d->onesided = (int)wm_attr_int(n, "onesided", 0);
    d->cin = (int)x->dims[r - 1];
    d->len = x->dims[a];
    if (wm_has_in(n, 1) && in[1]) {
        if (!in[1]->data) return WM_NEED_DATA;
        if (wm_tensor_numel(in[1]) != 1) return wm_node_err(n, err, WM_ERR_INPUT, "dft_length must hold one value");
        d->N = wm_tensor_get_int(in[1], 0);
    } else {
        d->N = d->inverse && d->onesided ? 2 * (d->len - 1) : d->len;
    }
    if (d->N < 1 || d->N > (1ll << 32)) return wm_node_err(n, err, WM_ERR_INPUT, "dft_length %lld is not positive", (long long)d->N);
    d->nout = d->onesided && !d->inverse ? d->N / 2 + 1 : d->N;
    d->cout = d->inverse && d->onesided ? 1 : 2;
    d->outer = d->inner = 1;
    for (int k = 0; k < a; k++) d->outer *= (uint64_t)x->dims[k];
    for (int k = a + 1; k < r - 1; k++) d->inner *= (uint64_t)x->dims[k];
    return WM_OK;
}

static wm_status dft_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    dft_args d = {0};
    wm_status st = dft_resolve(n, in, &d, err);
    if (st) return st;
    wm_set_shape(out[0], in[0]->rank, in[0]->dims);
    out[0]->dims[d.axis] = d.nout;
    out[0]->dims[in[0]->rank - 1] = d.cout;
    return WM_OK;
}

/* Per thread: line in (2N), line out (2N), FFT scratch; shared: twiddles (2N). */
static size_t dft_per_thread(int64_t N) { return (size_t)(4 * N + 2 * N + 8) * sizeof(double); }

static size_t dft_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    (void)out;
    dft_args d = {0};
    if (dft_resolve(n, in, &d, NULL)) return 0;
    return (size_t)(2 * d.N) * sizeof(double) + (size_t)nth * dft_per_thread(d.N);
}

typedef struct dft_ctx {
    const dft_args *d;
    const wm_tensor *x;
    wm_tensor *y;
    wm_fft_plan plan;
    double *ws;
    size_t per; /* doubles per thread */
} dft_ctx;

static void dft_part(void *arg, int ith, int nth) {
    const dft_ctx *c = arg;
    const dft_args *d = c->d;
    long lo, hi;
    wm_split((long)(d->outer * d->inner), ith, nth, &lo, &hi);
    double *a = c->ws + (size_t)ith * c->per, *b = a + 2 * d->N, *scr = b + 2 * d->N;
    int64_t N = d->N;
    for (long q = lo; q < hi; q++) {
        uint64_t o = (uint64_t)q / d->inner, i = (uint64_t)q % d->inner;
        /* element t of the line, channel ch: ((o * len + t) * inner + i) * cin + ch */
        uint64_t base = o * (uint64_t)d->len * d->inner + i;
        memset(a, 0, (size_t)(2 * N) * sizeof *a);
        if (d->inverse && d->onesided) { /* Hermitian extension of bins 0..N/2 */
            int64_t nb = N / 2 + 1 < d->len ? N / 2 + 1 : d->len;
            for (int64_t t = 0; t < nb; t++) {
                uint64_t e = (base + (uint64_t)t * d->inner) * (uint64_t)d->cin;
                double re = wm_tensor_get_f64(c->x, e), im = d->cin == 2 ? wm_tensor_get_f64(c->x, e + 1) : 0;
                if (t == 0 || 2 * t == N) im = 0;
                a[2 * t] = re, a[2 * t + 1] = im;
                if (t > 0 && 2 * t != N) a[2 * (N - t)] = re, a[2 * (N - t) + 1] = -im;
            }
        } else {
            int64_t m = d->len < N ? d->len : N;
            for (int64_t t = 0; t < m; t++) {
                uint64_t e = (base + (uint64_t)t * d->inner) * (uint64_t)d->cin;
                a[2 * t] = wm_tensor_get_f64(c->x, e);
                a[2 * t + 1] = d->cin == 2 ? wm_tensor_get_f64(c->x, e + 1) : 0;
            }
        }
        wm_fft(&c->plan, a, 1, b, scr);
        double scale = d->inverse ? 1.0 / (double)N : 1.0;
        uint64_t obase = o * (uint64_t)d->nout * d->inner + i;
        for (int64_t k = 0; k < d->nout; k++) {
            uint64_t e = (obase + (uint64_t)k * d->inner) * (uint64_t)d->cout;
            wm_store_f64(c->y->dtype, c->y->data, e, b[2 * k] * scale);
            if (d->cout == 2) wm_store_f64(c->y->dtype, c->y->data, e + 1, b[2 * k + 1] * scale);
        }
    }
}

static wm_status dft_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    dft_args d = {0};
    wm_status st = dft_resolve(n, in, &d, x->err);
    if (st) return st;
    dft_ctx c = {.d = &d, .x = in[0], .y = out[0], .ws = (double *)x->ws + 2 * d.N, .per = dft_per_thread(d.N) / sizeof(double)};
    wm_fft_twiddles(d.N, d.inverse ? 1 : -1, x->ws);
    wm_fft_plan_init(&c.plan, d.N, x->ws);
    uint64_t lines = d.outer * d.inner;
    if (!lines) return WM_OK;
    int nth = lines * (uint64_t)d.N >= 8192 ? x->nth : 1;
    if ((uint64_t)nth > lines) nth = (int)lines;
    wm_pool_run(x->pool, dft_part, &c, nth);
    return WM_OK;
}

/* ---------------------------------------------------------------- STFT */

typedef struct stft_args {
    int64_t batch, len, step, flen, frames, bins;
    int cin;
    const wm_tensor *window;
} stft_args;

static wm_status stft_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, wm_types_float, err);
    if (!st) st = wm_check_type(n, 1, wm_types_index, err);
    if (!st && wm_has_in(n, 2)) st = wm_check_same_type(n, 0, 2, err);
    if (!st && wm_has_in(n, 3)) st = wm_check_type(n, 3, wm_types_index, err);
    n->out_dtype[0] = n->in_dtype[0];
    return st;
}

static wm_status stft_resolve(const wm_node *n, wm_tensor *const *in, stft_args *s, wm_error *err) {
    const wm_tensor *x = in[0];
    if (x->rank != 3 || (x->dims[2] != 1 && x->dims[2] != 2))
        return wm_node_err(n, err, WM_ERR_INPUT, "signal must be [batch, length, 1 or 2]");
    s->batch = x->dims[0];
    s->len = x->dims[1];
    s->cin = (int)x->dims[2];
    s->window = wm_has_in(n, 2) ? in[2] : NULL;
    if (wm_tensor_numel(in[1]) != 1) return wm_node_err(n, err, WM_ERR_INPUT, "frame_step must hold one value");
    if (!in[1]->data) return WM_NEED_DATA;
    s->step = wm_tensor_get_int(in[1], 0);
    s->flen = -1;
    if (wm_has_in(n, 3) && in[3]) {
        if (wm_tensor_numel(in[3]) != 1) return wm_node_err(n, err, WM_ERR_INPUT, "frame_length must hold one value");
        if (!in[3]->data) return WM_NEED_DATA;
        s->flen = wm_tensor_get_int(in[3], 0);
    }
    if (s->window) {
        if (s->window->rank != 1) return wm_node_err(n, err, WM_ERR_INPUT, "window must be 1-D");
        if (s->flen >= 0 && s->flen != s->window->dims[0])
            return wm_node_err(n, err, WM_ERR_INPUT, "frame_length %lld differs from the window's %lld", (long long)s->flen,
                               (long long)s->window->dims[0]);
        s->flen = s->window->dims[0];
    }
    if (s->flen < 0) return wm_node_err(n, err, WM_ERR_INPUT, "either window or frame_length is required");
    if (s->step < 1 || s->flen < 1 || s->flen > s->len || s->flen > (1ll << 30))
        return wm_node_err(n, err, WM_ERR_INPUT, "frame_step %lld / frame_length %lld do not fit a signal of %lld",
                           (long long)s->step, (long long)s->flen, (long long)s->len);
    int onesided = (int)wm_attr_int(n, "onesided", 1);
    if (onesided && s->cin == 2) return wm_node_err(n, err, WM_ERR_INPUT, "onesided needs a real signal");
    s->frames = 1 + (s->len - s->flen) / s->step;
    s->bins = onesided ? s->flen / 2 + 1 : s->flen;
    return WM_OK;
}

static wm_status stft_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    stft_args s = {0};
    wm_status st = stft_resolve(n, in, &s, err);
    if (st) return st;
    int64_t d[4] = {s.batch, s.frames, s.bins, 2};
    wm_set_shape(out[0], 4, d);
    return WM_OK;
}

static size_t stft_workspace(const wm_node *n, wm_tensor *const *in, wm_tensor *const *out, int nth) {
    (void)out;
    stft_args s = {0};
    if (stft_resolve(n, in, &s, NULL)) return 0;
    return (size_t)(2 * s.flen) * sizeof(double) + (size_t)nth * dft_per_thread(s.flen);
}

typedef struct stft_ctx {
    const stft_args *s;
    const wm_tensor *x;
    wm_tensor *y;
    wm_fft_plan plan;
    double *ws;
    size_t per;
} stft_ctx;

static void stft_part(void *arg, int ith, int nth) {
    const stft_ctx *c = arg;
    const stft_args *s = c->s;
    long lo, hi;
    wm_split((long)(s->batch * s->frames), ith, nth, &lo, &hi);
    double *a = c->ws + (size_t)ith * c->per, *b = a + 2 * s->flen, *scr = b + 2 * s->flen;
    for (long q = lo; q < hi; q++) {
        int64_t bt = q / s->frames, f = q % s->frames;
        for (int64_t t = 0; t < s->flen; t++) {
            uint64_t e = (uint64_t)((bt * s->len + f * s->step + t) * s->cin);
            double w = s->window ? wm_tensor_get_f64(s->window, (uint64_t)t) : 1.0;
            a[2 * t] = wm_tensor_get_f64(c->x, e) * w;
            a[2 * t + 1] = s->cin == 2 ? wm_tensor_get_f64(c->x, e + 1) * w : 0;
        }
        wm_fft(&c->plan, a, 1, b, scr);
        for (int64_t k = 0; k < s->bins; k++) {
            uint64_t e = (uint64_t)(((bt * s->frames + f) * s->bins + k) * 2);
            wm_store_f64(c->y->dtype, c->y->data, e, b[2 * k]);
            wm_store_f64(c->y->dtype, c->y->data, e + 1, b[2 * k + 1]);
        }
    }
}

static wm_status stft_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    stft_args s = {0};
    wm_status st = stft_resolve(n, in, &s, x->err);
    if (st) return st;
    stft_ctx c = {.s = &s, .x = in[0], .y = out[0], .ws = (double *)x->ws + 2 * s.flen, .per = dft_per_thread(s.flen) / sizeof(double)};
    wm_fft_twiddles(s.flen, -1, x->ws);
    wm_fft_plan_init(&c.plan, s.flen, x->ws);
    int64_t lines = s.batch * s.frames;
    if (!lines) return WM_OK;
    int nth = lines * s.flen >= 8192 ? x->nth : 1;
    if (nth > lines) nth = (int)lines;
    wm_pool_run(x->pool, stft_part, &c, nth);
    return WM_OK;
}

static const wm_op ops[] = {
    {"", "HannWindow", 17, 0, window_init, window_infer, window_run, NULL, 0, 1u << 0},
    {"", "HammingWindow", 17, 0, window_init, window_infer, window_run, NULL, 0, 1u << 0},
    {"", "BlackmanWindow", 17, 0, window_init, window_infer, window_run, NULL, 0, 1u << 0},
    {"", "MelWeightMatrix", 17, 0, mel_init, mel_infer, mel_run, NULL, 0, 0x1fu},
    {"", "DFT", 17, 0, dft_init, dft_infer, dft_run, dft_workspace, 0, 0x6u},
    {"", "STFT", 17, 0, stft_init, stft_infer, stft_run, stft_workspace, 0, 0xau},
};

const wm_op_table wm_ops_signal = {ops, sizeof ops / sizeof ops[0]};
