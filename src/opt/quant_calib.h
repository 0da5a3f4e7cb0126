/*
 * quant_calib.h - activation calibration for static quantization.
 *
 * Whatever runs the model (winml's engine, or a tool that dumped tensors)
 * feeds the values it saw through wm_calib_observe, batch by batch; the
 * calibrator keeps per value what its method needs and returns one range
 * per value. Methods follow onnxruntime's calibrators:
 *   minmax      min of minima, max of maxima (symmetric: +-max|.|)
 *   percentile  histogram of |x| (symmetric, default) or x; the bin edge where
 *               the CDF reaches the percentile (99.999 by default, 2048 bins)
 *   entropy     histogram of x over +-max|x|; the threshold minimising the KL
 *               divergence between the clipped and the quantized distribution
 *               (128 bins, 128 quantized bins by default)
 * Ranges never exceed the observed min/max.
 */
#ifndef WM_OPT_QUANT_CALIB_H
#define WM_OPT_QUANT_CALIB_H

#include <stddef.h>

#include "opt/quant.h"

typedef enum wm_calib_method { WM_CALIB_MINMAX = 0, WM_CALIB_PERCENTILE, WM_CALIB_ENTROPY } wm_calib_method;

typedef struct wm_calib_opts {
    wm_calib_method method;
    int symmetric;          /* minmax/percentile: symmetric ranges (percentile default 1) */
    int num_bins;           /* 0: method default (percentile 2048, entropy 128) */
    int num_quantized_bins; /* entropy (default 128) */
    double percentile;      /* percentile (default 99.999) */
} wm_calib_opts;

typedef struct wm_calib wm_calib;

/* Ranges by value name; names and array malloc'ed, freed by wm_calib_ranges_free. */
typedef struct wm_calib_ranges {
    wm_quant_range *v;
    size_t n;
} wm_calib_ranges;

/* Defaults of method (as above). */
void wm_calib_opts_default(wm_calib_opts *o, wm_calib_method method);
/* "minmax" | "percentile" | "entropy" -> method; -1 when unknown. */
int wm_calib_method_parse(const char *s);

wm_status wm_calib_new(const wm_calib_opts *o, wm_calib **out, wm_error *err);
void wm_calib_free(wm_calib *c);

/* One batch of value's data (n float32s; NaNs ignored by min/max). */
wm_status wm_calib_observe(wm_calib *c, const char *value, const float *data, size_t n, wm_error *err);

/* The ranges of every value observed, in first-seen order (caller frees with wm_calib_ranges_free). */
wm_status wm_calib_result(const wm_calib *c, wm_calib_ranges *out, wm_error *err);

void wm_calib_ranges_free(wm_calib_ranges *r);

/* Reads {"value": [min, max], ...} (or {"ranges": {...}}) from a JSON file. */
wm_status wm_calib_ranges_load(const char *path, wm_calib_ranges *out, wm_error *err);

/*
 * Calibrates from collected tensors: dir/manifest.json maps value names to
 * lists of raw little-endian float32 files inside dir (at most samples per
 * value when samples > 0).
 */
wm_status wm_calib_from_dir(const char *dir, const char *method, double percentile, int samples,
                            wm_calib_ranges *out, wm_error *err);

#endif
