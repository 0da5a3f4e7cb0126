/*
 * quant_recipe.c - the recipe's `quant` section (reference field names) to a
 * wm_quant_config, for the build pipeline's quant stage:
 *   mode static|dynamic|rtn|fp16 (also fp16, int8, int4, w8a16, qdq), weight_type,
 *   activation_type (QInt8/QUInt8/QUInt16/QInt16 or int8/uint8/uint16/int16),
 *   calibration_method, samples, per_channel, symmetric, rtn_bits, rtn_block_size,
 *   rtn_accuracy_level (ours: MatMulNBits accuracy_level, 4 = int8 activations),
 *   rtn_half_scales (ours: float32 scales rounded to exact halves, wm_quant_config.half_scales),
 *   rtn_scale_search (ours: each block's scale searched for the least weighted error, .scale_search),
 *   rtn_gptq, calibration_text (ours: GPTQ, wm_quant_recipe.gptq), rtn_8bit_weights, rtn_8bit_layer_weights
 *   (ours: weights kept at 8 bits, wm_quant_config.int8_weights / int8_layer_weights),
 *   fp16_keep_io_types, fp16_op_block_list, op_types_to_quantize, nodes_to_exclude.
 * Strings point into the cJSON tree, which must outlive the recipe.
 */
#include "opt/quant_recipe.h"

#include <string.h>

#include "core/error.h"
#include "onnx/dtype.h"

static int32_t qtype_of(const char *s) {
    static const struct {
        const char *name;
        int32_t dt;
    } T[] = {{"QInt8", WM_DT_INT8},   {"int8", WM_DT_INT8},     {"QUInt8", WM_DT_UINT8}, {"uint8", WM_DT_UINT8},
             {"QUInt16", WM_DT_UINT16}, {"uint16", WM_DT_UINT16}, {"QInt16", WM_DT_INT16}, {"int16", WM_DT_INT16}};
    for (size_t i = 0; s && i < sizeof T / sizeof *T; i++)
        if (!strcmp(s, T[i].name)) return T[i].dt;
    return 0;
}

/* A string array field into out[0..max); -1 when not an array of strings or too long. */
static int strings(const cJSON *arr, const char **out, size_t max, size_t *n) {
    *n = 0;
    if (!arr || cJSON_IsNull(arr)) return 0;
    if (!cJSON_IsArray(arr)) return -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        if (!cJSON_IsString(e) || *n == max) return -1;
        out[(*n)++] = e->valuestring;
    }
    return 0;
}

static int boolean(const cJSON *v, int *out) {
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) return -1;
    *out = cJSON_IsTrue(v);
    return 0;
}

static int integer(const cJSON *v, int64_t lo, int64_t hi, int64_t *out) {
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble != (double)(int64_t)v->valuedouble || v->valuedouble < (double)lo ||
        v->valuedouble > (double)hi)
        return -1;
    *out = (int64_t)v->valuedouble;
    return 0;
}

wm_status wm_quant_recipe_parse(const cJSON *q, wm_quant_recipe *r, wm_error *err) {
    memset(r, 0, sizeof *r);
    if (!cJSON_IsObject(q)) return wm_err(err, WM_ERR_INPUT, "recipe quant: must be an object (or null to skip)");
    const cJSON *mode = cJSON_GetObjectItemCaseSensitive(q, "mode");
    const char *ms = cJSON_IsString(mode) ? mode->valuestring : NULL;
    const cJSON *at = cJSON_GetObjectItemCaseSensitive(q, "activation_type");
    int32_t act = cJSON_IsString(at) ? qtype_of(at->valuestring) : 0;
    wm_quant_mode m = wm_quant_mode_parse(ms);
    if (m == WM_QUANT_INT8_STATIC && (act == WM_DT_UINT16 || act == WM_DT_INT16)) m = WM_QUANT_W8A16;
    if (!m) return wm_err(err, WM_ERR_INPUT, "recipe quant.mode: '%s' is not static, dynamic, rtn or fp16", ms ? ms : "");
    wm_quant_config_default(&r->config, m);
    wm_quant_config *c = &r->config;
    if (at && !cJSON_IsNull(at)) {
        if (!act) return wm_err(err, WM_ERR_INPUT, "recipe quant.activation_type: unknown type");
        c->activation_type = act;
    }
    const cJSON *wt = cJSON_GetObjectItemCaseSensitive(q, "weight_type");
    if (wt && !cJSON_IsNull(wt)) {
        int32_t w = cJSON_IsString(wt) ? qtype_of(wt->valuestring) : 0;
        if (w != WM_DT_INT8 && w != WM_DT_UINT8)
            return wm_err(err, WM_ERR_INPUT, "recipe quant.weight_type: QInt8/int8 or QUInt8/uint8");
        c->weight_type = w;
    }
    int64_t bits = c->bits, bs = c->block_size, samples = 0;
    if (boolean(cJSON_GetObjectItemCaseSensitive(q, "per_channel"), &c->per_channel))
        return wm_err(err, WM_ERR_INPUT, "recipe quant.per_channel: must be true or false");
    if (boolean(cJSON_GetObjectItemCaseSensitive(q, "symmetric"), &c->symmetric))
        return wm_err(err, WM_ERR_INPUT, "recipe quant.symmetric: must be true or false");
    if (boolean(cJSON_GetObjectItemCaseSensitive(q, "rtn_half_scales"), &c->half_scales))
        return wm_err(err, WM_ERR_INPUT, "recipe quant.rtn_half_scales: must be true or false");
    if (boolean(cJSON_GetObjectItemCaseSensitive(q, "rtn_scale_search"), &c->scale_search))
        return wm_err(err, WM_ERR_INPUT, "recipe quant.rtn_scale_search: must be true or false");
    if (boolean(cJSON_GetObjectItemCaseSensitive(q, "rtn_gptq"), &r->gptq))
        return wm_err(err, WM_ERR_INPUT, "recipe quant.rtn_gptq: must be true or false");
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(q, "calibration_text");
    if (ct && !cJSON_IsNull(ct) && (!cJSON_IsString(ct) || !ct->valuestring[0]))
        return wm_err(err, WM_ERR_INPUT, "recipe quant.calibration_text: a file name");
    r->calibration_text = ct && cJSON_IsString(ct) ? ct->valuestring : NULL;
    if (boolean(cJSON_GetObjectItemCaseSensitive(q, "fp16_keep_io_types"), &c->keep_io_types))
        return wm_err(err, WM_ERR_INPUT, "recipe quant.fp16_keep_io_types: must be true or false");
    if (integer(cJSON_GetObjectItemCaseSensitive(q, "rtn_bits"), 4, 8, &bits) || (bits != 4 && bits != 8))
        return wm_err(err, WM_ERR_INPUT, "recipe quant.rtn_bits: 4 or 8");
    if (integer(cJSON_GetObjectItemCaseSensitive(q, "rtn_block_size"), 16, 1 << 20, &bs) || (bs & (bs - 1)))
        return wm_err(err, WM_ERR_INPUT, "recipe quant.rtn_block_size: a power of two >= 16");
    int64_t acc = 0;
    if (integer(cJSON_GetObjectItemCaseSensitive(q, "rtn_accuracy_level"), 0, 4, &acc))
        return wm_err(err, WM_ERR_INPUT, "recipe quant.rtn_accuracy_level: 0 (unset) to 4 (int8 activations)");
    c->accuracy_level = acc;
    if (integer(cJSON_GetObjectItemCaseSensitive(q, "samples"), 0, 1 << 30, &samples))
        return wm_err(err, WM_ERR_INPUT, "recipe quant.samples: a count");
    c->bits = (int)bits;
    c->block_size = bs;
    r->samples = (int)samples;
    const cJSON *cm = cJSON_GetObjectItemCaseSensitive(q, "calibration_method");
    r->calibration_method = "minmax";
    if (cm && !cJSON_IsNull(cm)) {
        static const char *const ok[] = {"minmax", "entropy", "percentile"};
        r->calibration_method = NULL;
        for (size_t i = 0; i < 3 && cJSON_IsString(cm); i++)
            if (!strcmp(cm->valuestring, ok[i])) r->calibration_method = ok[i];
        if (!r->calibration_method)
            return wm_err(err, WM_ERR_INPUT, "recipe quant.calibration_method: minmax, entropy or percentile");
    }
    size_t n;
    if (strings(cJSON_GetObjectItemCaseSensitive(q, "fp16_op_block_list"), r->op_block, WM_QUANT_RECIPE_MAX, &n))
        return wm_err(err, WM_ERR_INPUT, "recipe quant.fp16_op_block_list: an array of op types");
    if (cJSON_GetObjectItemCaseSensitive(q, "fp16_op_block_list") &&
        !cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(q, "fp16_op_block_list"))) {
        c->op_block = r->op_block;
        c->n_op_block = n;
        c->op_block_given = 1;
    }
    if (strings(cJSON_GetObjectItemCaseSensitive(q, "op_types_to_quantize"), r->op_types, WM_QUANT_RECIPE_MAX,
                &c->n_op_types))
        return wm_err(err, WM_ERR_INPUT, "recipe quant.op_types_to_quantize: an array of op types");
    c->op_types = r->op_types;
    if (strings(cJSON_GetObjectItemCaseSensitive(q, "nodes_to_exclude"), r->exclude, WM_QUANT_RECIPE_MAX,
                &c->n_exclude))
        return wm_err(err, WM_ERR_INPUT, "recipe quant.nodes_to_exclude: an array of node names");
    c->exclude = r->exclude;
    if (strings(cJSON_GetObjectItemCaseSensitive(q, "rtn_8bit_weights"), r->w8, WM_QUANT_RECIPE_MAX,
                &c->n_int8_weights))
        return wm_err(err, WM_ERR_INPUT, "recipe quant.rtn_8bit_weights: an array of weight name parts");
    c->int8_weights = r->w8;
    if (strings(cJSON_GetObjectItemCaseSensitive(q, "rtn_8bit_layer_weights"), r->w8_layers, WM_QUANT_RECIPE_MAX,
                &c->n_int8_layer_weights))
        return wm_err(err, WM_ERR_INPUT, "recipe quant.rtn_8bit_layer_weights: an array of weight name parts");
    c->int8_layer_weights = r->w8_layers;
    return WM_OK;
}
