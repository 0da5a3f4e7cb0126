/* quant_recipe.h - the build recipe's `quant` section as a wm_quant_config (for the build pipeline). */
#ifndef WM_OPT_QUANT_RECIPE_H
#define WM_OPT_QUANT_RECIPE_H

#include <cjson/cJSON.h>

#include "opt/quant.h"

#define WM_QUANT_RECIPE_MAX 256

typedef struct wm_quant_recipe {
    wm_quant_config config;         /* ready for wm_quant_run (ranges still to be filled for static modes) */
    const char *calibration_method; /* "minmax" | "entropy" | "percentile" (static modes) */
    int samples;                    /* calibration samples (0: all; GPTQ: 0 means 4 sequences of 512 tokens) */
    int gptq;                       /* rtn_gptq: GPTQ, its statistics collected by the caller (quant_hessian.h) */
    const char *calibration_text;   /* GPTQ's calibration text file; NULL: seeded random tokens */
    /* storage the config's lists point into */
    const char *op_block[WM_QUANT_RECIPE_MAX], *op_types[WM_QUANT_RECIPE_MAX], *exclude[WM_QUANT_RECIPE_MAX];
    const char *w8[WM_QUANT_RECIPE_MAX], *w8_layers[WM_QUANT_RECIPE_MAX];
} wm_quant_recipe;

/*
 * Parses the quant object (fields as in the reference recipe: mode, weight_type, activation_type,
 * calibration_method, samples, per_channel, symmetric, rtn_bits, rtn_block_size, rtn_gptq, calibration_text,
 * rtn_8bit_weights, rtn_8bit_layer_weights, fp16_keep_io_types,
 * fp16_op_block_list, op_types_to_quantize, nodes_to_exclude). Strings point into q, which must
 * outlive r. WM_ERR_INPUT naming the field on a bad value.
 */
wm_status wm_quant_recipe_parse(const cJSON *q, wm_quant_recipe *r, wm_error *err);

#endif
