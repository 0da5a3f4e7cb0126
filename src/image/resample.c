/*
 * resample.c - PIL's Image.resize on RGB8, re-implemented from its documented semantics (see image.h).
 *
 * Convolution filters: for output pixel i of a pass from n_in to n_out samples, scale = n_in / n_out, the
 * filter is stretched by fs = max(scale, 1) (so a downscale averages over all the input it covers), its support
 * becomes support * fs, the centre is (i + 0.5) * scale and the taps are the input samples j in
 * [(int)(centre - support + 0.5), (int)(centre + support + 0.5)) clipped to the image, weighted
 * filter((j - centre + 0.5) / fs) and normalized to sum 1. The weights are rounded to fixed point with 22
 * fractional bits (half away from zero); each output sample is the weighted sum plus one half, shifted back and
 * clamped to 0..255. The horizontal pass runs first (when the width changes), then the vertical pass (when the
 * height changes), each producing uint8.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "image/image.h"

#define PREC 22
/* The most filter taps one pass keeps (4 bytes each): a reduction of an image millions of pixels wide to a few
 * hundred needs window * outputs ~ 2 * support * input taps; past this the resize is refused. */
#define WM_RESAMPLE_MAX_TAPS (1u << 26)

static double f_box(double x) { return x > -0.5 && x <= 0.5 ? 1.0 : 0.0; }
static double f_bilinear(double x) {
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}
static double f_hamming(double x) {
    x = fabs(x);
    if (x == 0.0) return 1.0;
    if (x >= 1.0) return 0.0;
    x *= M_PI;
    return sin(x) / x * (0.54f + 0.46f * cos(x)); /* PIL weights with the float constants 0.54f, 0.46f */
}
static double f_bicubic(double x) {
    const double a = -0.5; /* PIL's choice (Keys' cubic) */
    x = fabs(x);
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}
static double sinc(double x) {
    if (x == 0.0) return 1.0;
    x *= M_PI;
    return sin(x) / x;
}
static double f_lanczos(double x) { return x > -3.0 && x < 3.0 ? sinc(x) * sinc(x / 3.0) : 0.0; }

typedef struct filt {
    double (*f)(double);
    double support;
    const char *name;
} filt;

static const filt *filter_of(int code) {
    static const filt tab[6] = {{NULL, 0, "nearest"},           {f_lanczos, 3.0, "lanczos"},
                                {f_bilinear, 1.0, "bilinear"},  {f_bicubic, 2.0, "bicubic"},
                                {f_box, 0.5, "box"},            {f_hamming, 1.0, "hamming"}};
    return code >= 0 && code < 6 ? &tab[code] : NULL;
}

const char *wm_resample_name(int filter) {
    const filt *f = filter_of(filter);
    return f ? f->name : NULL;
}

/* The taps of one pass: first[i], count[i] and ksize fixed-point weights per output sample. */
typedef struct taps {
    int ksize;
    int *first, *count;
    int32_t *w;
} taps;

static void taps_free(taps *t) {
    free(t->first), free(t->count), free(t->w);
    memset(t, 0, sizeof *t);
}

static int taps_make(const filt *fl, int n_in, int n_out, taps *t) {
    memset(t, 0, sizeof *t);
    double scale = (double)n_in / n_out, fs = scale < 1.0 ? 1.0 : scale, support = fl->support * fs;
    int ksize = (int)ceil(support) * 2 + 1;
    double *k = malloc(sizeof *k * (size_t)ksize);
    t->ksize = ksize;
    t->first = malloc(sizeof *t->first * (size_t)n_out);
    t->count = malloc(sizeof *t->count * (size_t)n_out);
    t->w = calloc((size_t)n_out * (size_t)ksize, sizeof *t->w);
    if (!k || !t->first || !t->count || !t->w) {
        free(k);
        taps_free(t);
        return -1;
    }
    for (int i = 0; i < n_out; i++) {
        double centre = (i + 0.5) * scale, sum = 0.0;
        int lo = (int)(centre - support + 0.5), hi = (int)(centre + support + 0.5);
        if (lo < 0) lo = 0;
        if (hi > n_in) hi = n_in;
        int cnt = hi - lo;
        if (cnt > ksize) cnt = ksize; /* cannot happen: the window spans at most 2 * support + 1 samples */
        for (int j = 0; j < cnt; j++) sum += k[j] = fl->f((j + lo - centre + 0.5) / fs);
        for (int j = 0; j < cnt; j++) {
            double v = sum != 0.0 ? k[j] / sum : k[j];
            t->w[(size_t)i * ksize + j] = (int32_t)(v < 0 ? v * (1 << PREC) - 0.5 : v * (1 << PREC) + 0.5);
        }
        t->first[i] = lo, t->count[i] = cnt;
    }
    free(k);
    return 0;
}

static uint8_t clamp8(int64_t acc) {
    int64_t v = acc >> PREC;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* The horizontal pass: src is sw wide, dst dw x dh; the three channels of a pixel share each weight. */
static void pass_h(const uint8_t *src, int sw, uint8_t *dst, int dw, int dh, const taps *t) {
    for (int y = 0; y < dh; y++) {
        const uint8_t *row = src + (size_t)y * sw * 3;
        uint8_t *o = dst + (size_t)y * dw * 3;
        for (int x = 0; x < dw; x++) {
            const int32_t *w = t->w + (size_t)x * t->ksize;
            const uint8_t *p = row + (size_t)t->first[x] * 3;
            int64_t a0 = (int64_t)1 << (PREC - 1), a1 = a0, a2 = a0;
            for (int j = 0; j < t->count[x]; j++, p += 3) {
                a0 += (int64_t)p[0] * w[j], a1 += (int64_t)p[1] * w[j], a2 += (int64_t)p[2] * w[j];
            }
            o[x * 3] = clamp8(a0), o[x * 3 + 1] = clamp8(a1), o[x * 3 + 2] = clamp8(a2);
        }
    }
}

/* The vertical pass: src and dst are w wide; each output row accumulates whole input rows (acc: w * 3). */
static void pass_v(const uint8_t *src, int w, uint8_t *dst, int dh, const taps *t, int64_t *acc) {
    size_t n = (size_t)w * 3;
    for (int y = 0; y < dh; y++) {
        const int32_t *wt = t->w + (size_t)y * t->ksize;
        for (size_t i = 0; i < n; i++) acc[i] = (int64_t)1 << (PREC - 1);
        for (int j = 0; j < t->count[y]; j++) {
            const uint8_t *row = src + (size_t)(t->first[y] + j) * n;
            int64_t wj = wt[j];
            for (size_t i = 0; i < n; i++) acc[i] += row[i] * wj;
        }
        uint8_t *o = dst + (size_t)y * n;
        for (size_t i = 0; i < n; i++) o[i] = clamp8(acc[i]);
    }
}

/* Nearest: the source index under each output centre, (i + 0.5) * scale, accumulated as PIL's affine scaler. */
static void nearest(const wm_image *in, wm_image *out, int *xs) {
    double sx = (double)in->w / out->w, sy = (double)in->h / out->h, p = sx * 0.5;
    for (int x = 0; x < out->w; x++, p += sx) xs[x] = (int)p < in->w ? (int)p : in->w - 1;
    p = sy * 0.5;
    for (int y = 0; y < out->h; y++, p += sy) {
        int r = (int)p < in->h ? (int)p : in->h - 1;
        for (int x = 0; x < out->w; x++)
            memcpy(out->rgb + ((size_t)y * out->w + x) * 3, in->rgb + ((size_t)r * in->w + xs[x]) * 3, 3);
    }
}

wm_status wm_image_resize(const wm_image *in, int out_w, int out_h, int filter, wm_image *out, wm_error *err) {
    memset(out, 0, sizeof *out);
    const filt *fl = filter_of(filter);
    if (!fl) return wm_err(err, WM_ERR_USAGE, "resample filter %d is not one of PIL's (0 to 5)", filter);
    if (out_w < 1 || out_h < 1 || in->w < 1 || in->h < 1)
        return wm_err(err, WM_ERR_USAGE, "resize from %dx%d to %dx%d: sizes must be >= 1", in->w, in->h, out_w, out_h);
    out->rgb = malloc((size_t)out_w * out_h * 3);
    if (!out->rgb) return wm_err(err, WM_ERR_NOMEM, "out of memory for a %dx%d image", out_w, out_h);
    out->w = out_w, out->h = out_h;
    if (out_w == in->w && out_h == in->h) {
        memcpy(out->rgb, in->rgb, (size_t)out_w * out_h * 3);
        return WM_OK;
    }
    if (!fl->f) {
        int *xs = malloc(sizeof *xs * (size_t)out_w);
        if (!xs) {
            wm_image_free(out);
            return wm_err(err, WM_ERR_NOMEM, "out of memory resizing to %dx%d", out_w, out_h);
        }
        nearest(in, out, xs);
        free(xs);
        return WM_OK;
    }
    taps th = {0}, tv = {0};
    uint8_t *mid = NULL;
    int64_t *acc = NULL;
    int hz = out_w != in->w, vt = out_h != in->h, fail = 0;
    for (int k = 0; k < 2; k++) {
        int n_in = k ? in->h : in->w, n_out = k ? out_h : out_w;
        if (n_in == n_out) continue;
        double sc = (double)n_in / n_out, n_taps = (ceil(fl->support * (sc > 1 ? sc : 1)) * 2 + 1) * (double)n_out;
        if (n_taps > WM_RESAMPLE_MAX_TAPS) {
            wm_image_free(out);
            return wm_err(err, WM_ERR_INPUT, "resize from %dx%d to %dx%d: the %s filter needs %.0f taps along the %s "
                          "(over %u): the image is too elongated", in->w, in->h, out_w, out_h, fl->name, n_taps,
                          k ? "height" : "width", WM_RESAMPLE_MAX_TAPS);
        }
    }
    if (hz) fail |= taps_make(fl, in->w, out_w, &th);
    if (vt && !fail) fail |= taps_make(fl, in->h, out_h, &tv);
    if (hz && vt && !fail) fail |= !(mid = malloc((size_t)out_w * in->h * 3));
    if (vt && !fail) fail |= !(acc = malloc(sizeof *acc * (size_t)out_w * 3));
    if (fail) {
        taps_free(&th), taps_free(&tv), free(mid), free(acc);
        wm_image_free(out);
        return wm_err(err, WM_ERR_NOMEM, "out of memory resizing to %dx%d", out_w, out_h);
    }
    if (hz && vt) {
        pass_h(in->rgb, in->w, mid, out_w, in->h, &th);
        pass_v(mid, out_w, out->rgb, out_h, &tv, acc);
    } else if (hz) pass_h(in->rgb, in->w, out->rgb, out_w, out_h, &th);
    else pass_v(in->rgb, in->w, out->rgb, out_h, &tv, acc);
    taps_free(&th), taps_free(&tv), free(mid), free(acc);
    return WM_OK;
}
