/*
 * quant_calib_run.h - calibration of static QDQ by winml's own engine: the float model runs on sample batches
 * (a session with keep_values), and every activation the static quantizer would quantize (input 0 of each
 * MatMul / Gemm the config selects whose weight is a constant) is fed to a calibrator (quant_calib.h).
 * One path for `winml build` (static / qdq recipes, -p int8 / w8a8 / w8a16) and `winml quantize` (-p int8 /
 * w8a16 without --ranges or --calib-data).
 *
 * Samples: seeded inputs as runtime/inputs.h makes them (token ids uniform below the embedding table's rows,
 * masks of ones, positions counting, pixels uniform in [0, 1); an input given a value range
 * [lo, hi) (the recipe's export value_range), uniform in that range (integers: within the embedding table too),
 * except masks (names holding "mask"), which stay ones; or, given text rows (wm_calib_run_opts.rows), ids, masks
 * and token types from them.
 */
#ifndef WM_OPT_QUANT_CALIB_RUN_H
#define WM_OPT_QUANT_CALIB_RUN_H

#include <stdint.h>

#include "opt/quant_calib.h"
#include "runtime/inputs.h"

typedef struct wm_calib_run_opts {
    wm_calib_opts calib;   /* method and its parameters (wm_calib_opts_default) */
    int64_t samples;       /* batches run (>= 1) */
    uint64_t seed;         /* batch i uses seed + i */
    int64_t seq;           /* a symbolic sequence length's value (0: 128) */
    const wm_input_range *ranges; size_t n_ranges; /* value ranges of graph inputs (runtime/inputs.h) */
    /* text samples (a dataset's rows, tokenized) instead of seeded ids: when n_rows > 0, batch q (of n_rows; samples
       is ignored) is seeded as above, then its 2-D integer inputs are set from row q: input_ids its tokens (cut to
       the input's sequence, padded with pad_id), attention_mask 1 over the tokens and 0 after, token_type_ids 0 */
    const int32_t *const *rows; const size_t *row_lens; size_t n_rows;
    int32_t pad_id;
} wm_calib_run_opts;

/*
 * Runs the float model at model_path (the same model as g, from which c selects the quantized nodes) on
 * o->samples batches and returns the range of every activation the static quantizer reads (caller frees with
 * wm_calib_ranges_free; freed on error). *n_values (may be NULL) gets how many values were calibrated.
 * WM_ERR_USAGE when o->samples < 1; errors say "calibration: ...".
 */
wm_status wm_calib_collect(const char *model_path, wm_graph *g, const wm_quant_config *c, const wm_calib_run_opts *o,
                           wm_calib_ranges *out, wm_error *err);

#endif
