/*
 * arch_rope.c - RoPE inverse frequencies per rope type, computed the way
 * transformers computes them (float32 arithmetic), so that the cos/sin the
 * graph derives at run time match the reference bit for bit or nearly.
 * Supported: default, linear, llama3, yarn, longrope (short/long switch at
 * run time). Others (dynamic NTK, proportional, mrope ...) are refused.
 * Also the relative position buckets of a position bias (wm_rel_bucket), in float32 the same way.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder/arch_impl.h"
#include "core/error.h"

static wm_status need_num(const wm_arch *a, const wm_hf_rope *r, double v, const char *key, wm_error *err) {
    if (!isnan(v)) return WM_OK;
    return wm_err(err, WM_ERR_INPUT, "%s: field '%s.%s': missing for rope type '%s'", a->cfg->file,
                  r->source ? r->source : "rope_scaling", key, r->type);
}

static void base_freq(float *inv, int64_t half, int64_t dim, double theta) {
    for (int64_t i = 0; i < half; i++) {
        float e = (float)(2 * i) / (float)dim;
        inv[i] = 1.0f / powf((float)theta, e);
    }
}

static void llama3(float *inv, int64_t half, double factor, double lo, double hi, double old) {
    float lo_w = (float)(old / lo), hi_w = (float)(old / hi);
    for (int64_t i = 0; i < half; i++) {
        float wl = (float)(2 * M_PI) / inv[i];
        float f = wl > lo_w ? inv[i] / (float)factor : inv[i];
        float smooth = ((float)old / wl - (float)lo) / (float)(hi - lo);
        float sm = (1 - smooth) * f / (float)factor + smooth * f;
        int medium = !(wl < hi_w) && !(wl > lo_w);
        inv[i] = medium ? sm : f;
    }
}

static double yarn_mscale(double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * log(scale) + 1.0; }

static void yarn(const wm_hf_rope *r, float *inv, int64_t half, int64_t dim, double theta, double *scale) {
    double factor = r->factor, orig = (double)r->original_max_pos;
    double bf = !isnan(r->beta_fast) && r->beta_fast != 0 ? r->beta_fast : 32;
    double bs = !isnan(r->beta_slow) && r->beta_slow != 0 ? r->beta_slow : 1;
    if (!isnan(r->attention_factor)) *scale = r->attention_factor;
    else if (!isnan(r->mscale) && !isnan(r->mscale_all_dim) && r->mscale != 0 && r->mscale_all_dim != 0)
        *scale = yarn_mscale(factor, r->mscale) / yarn_mscale(factor, r->mscale_all_dim);
    else *scale = yarn_mscale(factor, 1);
    double lo = (dim * log(orig / (bf * 2 * M_PI))) / (2 * log(theta));
    double hi = (dim * log(orig / (bs * 2 * M_PI))) / (2 * log(theta));
    if (r->truncate != 0) {
        lo = floor(lo);
        hi = ceil(hi);
    }
    if (lo < 0) lo = 0;
    if (hi > dim - 1) hi = (double)(dim - 1);
    if (lo == hi) hi += 0.001;
    for (int64_t i = 0; i < half; i++) {
        float pos = powf((float)theta, (float)(2 * i) / (float)dim);
        float extra = 1.0f / pos, inter = 1.0f / ((float)factor * pos);
        float ramp = (float)(((double)i - lo) / (hi - lo));
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        float ef = 1 - ramp;
        inv[i] = inter * (1 - ef) + extra * ef;
    }
}

static wm_status longrope(const wm_arch *a, const wm_hf_rope *r, wm_rope *out, int64_t half, int64_t dim,
                          double theta, wm_error *err) {
    if (r->n_short != (size_t)half || r->n_long != (size_t)half)
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s.short_factor'/'long_factor': %zu/%zu values, expected %lld",
                      a->cfg->file, r->source, r->n_short, r->n_long, (long long)half);
    if (r->original_max_pos <= 0)
        return wm_err(err, WM_ERR_INPUT, "%s: field 'original_max_position_embeddings': missing for rope type "
                      "'longrope'", a->cfg->file);
    out->inv_freq_long = malloc((size_t)half * sizeof(float));
    if (!out->inv_freq_long) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    double orig = (double)r->original_max_pos;
    double factor = !isnan(r->factor) ? r->factor : (a->P > 0 ? (double)a->P / orig : 1.0);
    if (!isnan(r->attention_factor)) out->scale = r->attention_factor;
    else out->scale = factor <= 1 ? 1.0 : sqrt(1 + log(factor) / log(orig));
    for (int64_t i = 0; i < half; i++) {
        float p = powf((float)theta, (float)(2 * i) / (float)dim);
        out->inv_freq[i] = 1.0f / ((float)r->short_factor[i] * p);
        out->inv_freq_long[i] = 1.0f / ((float)r->long_factor[i] * p);
    }
    out->orig_max = r->original_max_pos;
    return WM_OK;
}

wm_status wm_arch_rope_init(const wm_arch *a, const wm_hf_rope *r, double theta_default, double partial_default,
                            wm_rope *out, wm_error *err) {
    double theta = !isnan(r->theta) ? r->theta : theta_default;
    double prf = !isnan(r->partial_rotary_factor) ? r->partial_rotary_factor : partial_default;
    const char *theta_key = "rope_theta";
    int plain = r->source && (!strcmp(r->source, "rope_local_base_freq") || strstr(r->source, "_rope_theta"));
    if (plain) theta_key = r->source; /* a top-level key of its own (rope_local_base_freq, global_/local_rope_theta) */
    else if (r == &a->cfg->rope_local) theta_key = "rope_parameters.sliding_attention.rope_theta";
    if (!(theta > 1))
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s': %g must be > 1", a->cfg->file, theta_key, theta);
    if (!(prf > 0 && prf <= 1))
        return wm_err(err, WM_ERR_INPUT, "%s: field 'partial_rotary_factor': %g is not in (0, 1]", a->cfg->file, prf);
    int64_t dim = (int64_t)((double)a->hd * prf);
    if (dim < 2 || dim % 2)
        return wm_err(err, WM_ERR_INPUT, "%s: rotary dims %lld (head_dim x partial_rotary_factor) must be even and >= 2",
                      a->cfg->file, (long long)dim);
    int64_t half = dim / 2;
    const char *type = r->type ? r->type : "default";
    out->rot_dim = dim;
    out->theta = theta;
    out->type = type;
    out->scale = 1.0;
    out->inv_freq = malloc((size_t)half * sizeof(float));
    if (!out->inv_freq) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    base_freq(out->inv_freq, half, dim, theta);
    wm_status s;
    if (!strcmp(type, "default")) return WM_OK;
    if (!strcmp(type, "linear")) {
        if ((s = need_num(a, r, r->factor, "factor", err))) return s;
        for (int64_t i = 0; i < half; i++) out->inv_freq[i] /= (float)r->factor;
        return WM_OK;
    }
    if (!strcmp(type, "llama3")) {
        if ((s = need_num(a, r, r->factor, "factor", err)) ||
            (s = need_num(a, r, r->low_freq_factor, "low_freq_factor", err)) ||
            (s = need_num(a, r, r->high_freq_factor, "high_freq_factor", err)))
            return s;
        if (r->original_max_pos <= 0)
            return wm_err(err, WM_ERR_INPUT, "%s: field '%s.original_max_position_embeddings': missing for rope type "
                          "'llama3'", a->cfg->file, r->source);
        if (r->high_freq_factor == r->low_freq_factor)
            return wm_err(err, WM_ERR_INPUT, "%s: field '%s.high_freq_factor' equals low_freq_factor", a->cfg->file,
                          r->source);
        llama3(out->inv_freq, half, r->factor, r->low_freq_factor, r->high_freq_factor, (double)r->original_max_pos);
        return WM_OK;
    }
    if (!strcmp(type, "yarn")) {
        if ((s = need_num(a, r, r->factor, "factor", err))) return s;
        if (r->original_max_pos <= 0)
            return wm_err(err, WM_ERR_INPUT, "%s: field '%s.original_max_position_embeddings': missing for rope type "
                          "'yarn'", a->cfg->file, r->source);
        yarn(r, out->inv_freq, half, dim, theta, &out->scale);
        return WM_OK;
    }
    if (!strcmp(type, "longrope")) return longrope(a, r, out, half, dim, theta, err);
    return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field '%s.rope_type': '%s' is not supported (default, linear, llama3, "
                  "yarn, longrope)", a->cfg->file, r->source ? r->source : "rope_scaling", type);
}

int64_t wm_rel_bucket(int64_t rel, int64_t buckets, int64_t max_dist) {
    int64_t half = buckets / 2, exact = half / 2, ret = 0, n = -rel;
    if (n < 0) {
        ret = half;
        n = -n;
    }
    if (n < exact) return ret + n;
    /* float32 like torch: log(n / exact) / log(max_dist / exact) * (half - exact), truncated */
    float v = logf((float)n / (float)exact) / (float)log((double)max_dist / (double)exact) * (float)(half - exact);
    int64_t large = exact + (int64_t)v;
    return ret + (large < half - 1 ? large : half - 1);
}

int64_t wm_rel_bucket_causal(int64_t rel, int64_t buckets, int64_t max_dist) {
    int64_t exact = buckets / 2, n = rel < 0 ? -rel : 0;
    if (n < exact) return n;
    float v = logf((float)n / (float)exact) / (float)log((double)max_dist / (double)exact) * (float)(buckets - exact);
    int64_t large = exact + (int64_t)v;
    return large < buckets - 1 ? large : buckets - 1;
}

int64_t wm_log_bucket(int64_t rel, int64_t buckets, int64_t max_pos) {
    int64_t mid = buckets / 2, a = rel < 0 ? -rel : rel;
    if (buckets <= 0 || max_pos <= 0 || a <= mid) return rel;
    /* float32 like torch: ceil(log(a / mid) / log((max_pos - 1) / mid) * (mid - 1)) + mid */
    float lp = ceilf(logf((float)a / (float)mid) / logf((float)((double)(max_pos - 1) / (double)mid)) *
                     (float)(mid - 1)) + (float)mid;
    return rel < 0 ? -(int64_t)lp : (int64_t)lp;
}
