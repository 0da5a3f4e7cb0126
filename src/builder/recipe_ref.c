/*
 * recipe_ref.c - what the reference system's recipe fields mean here (see
 * recipe.h): its task names, its optim capability names, its bookkeeping
 * fields (read, kept, reported, not acted on), and the recipe's quant
 * section as the quantizer's config.
 *
 * The tables were made from a survey of the reference's 299 recipes
 * (every distinct key path and value kind; tests/oracle/recipe_survey.py).
 */
#include "builder/recipe.h"
#include "builder/recipe_impl.h"
#include "builder/arch_impl.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "onnx/dtype.h"
#include "opt/opt.h"
#include "opt/quant.h"

/* ------------------------------------------------------------ tasks */

static const struct {
    const char *name;
    int served;          /* wm_task, or -1: a reference task the builder does not serve */
    wm_pooling pooling;  /* what the name implies for the export (sentence-similarity: mean pooling) */
} ref_tasks[] = {
    {"text-generation", WM_TASK_TEXT_GENERATION, WM_POOL_NONE},
    {"text-classification", WM_TASK_TEXT_CLASSIFICATION, WM_POOL_NONE},
    {"feature-extraction", WM_TASK_FEATURE_EXTRACTION, WM_POOL_NONE},
    {"token-classification", WM_TASK_TOKEN_CLASSIFICATION, WM_POOL_NONE},
    {"question-answering", WM_TASK_QUESTION_ANSWERING, WM_POOL_NONE},
    /* served by one of ours: embeddings pooled; NLI / relevance scores are a sequence-classification head */
    {"sentence-similarity", WM_TASK_FEATURE_EXTRACTION, WM_POOL_MEAN},
    {"zero-shot-classification", WM_TASK_TEXT_CLASSIFICATION, WM_POOL_NONE},
    {"text-ranking", WM_TASK_TEXT_CLASSIFICATION, WM_POOL_NONE},
    /* the reference's other tasks: recipes parse, the builder refuses them by name */
    {"fill-mask", WM_TASK_FILL_MASK, WM_POOL_NONE},
    {"image-classification", WM_TASK_IMAGE_CLASSIFICATION, WM_POOL_NONE},
    {"image-feature-extraction", WM_TASK_IMAGE_FEATURE_EXTRACTION, WM_POOL_NONE},
    {"zero-shot-image-classification", WM_TASK_ZERO_SHOT_IMAGE_CLASSIFICATION, WM_POOL_NONE},
    {"text2text-generation", WM_TASK_TEXT2TEXT_GENERATION, WM_POOL_NONE},
    {"image-segmentation", -1, WM_POOL_NONE},
    {"image-to-text", WM_TASK_IMAGE_TO_TEXT, WM_POOL_NONE},
    {"object-detection", -1, WM_POOL_NONE},
    {"zero-shot-object-detection", -1, WM_POOL_NONE},
    {"keypoint-detection", WM_TASK_KEYPOINT_DETECTION, WM_POOL_NONE},
    {"depth-estimation", -1, WM_POOL_NONE},
    {"mask-generation", -1, WM_POOL_NONE},
    {"audio-classification", WM_TASK_AUDIO_CLASSIFICATION, WM_POOL_NONE},
    {"automatic-speech-recognition", WM_TASK_ASR, WM_POOL_NONE},
};
#define N_TASKS (sizeof ref_tasks / sizeof ref_tasks[0])

int wm_recipe_task_served(const char *name, wm_pooling *pooling) {
    for (size_t i = 0; name && i < N_TASKS; i++)
        if (!strcmp(name, ref_tasks[i].name)) {
            if (pooling) *pooling = ref_tasks[i].pooling;
            return ref_tasks[i].served;
        }
    return -2;
}

size_t wm_recipe_task_names_for(int task, const char **out, size_t cap) {
    size_t n = 0;
    if (n < cap && task >= 0) out[n++] = wm_task_name(task);
    for (size_t i = 0; i < N_TASKS && n < cap; i++)
        if (ref_tasks[i].served == task && strcmp(ref_tasks[i].name, wm_task_name(task))) out[n++] = ref_tasks[i].name;
    return n;
}

const char *wm_recipe_served_tasks(void) {
    return "text-generation, text-classification, feature-extraction, token-classification, question-answering, "
           "fill-mask, sentence-similarity, zero-shot-classification, text-ranking, image-classification, "
           "image-feature-extraction, zero-shot-image-classification";
}

/* loader.trust_remote_code is transformers' permission to run a checkpoint's own Python classes; it changes nothing
   for a checkpoint that has none (no auto_map in config.json), and one that has some is refused by the config reader
   (field 'auto_map': custom code is never executed). So the field is kept as bookkeeping and never refuses a recipe
   by itself: the reference's wav2vec2 recipes set it for standard Wav2Vec2 checkpoints. */
wm_status wm_recipe_supported(const wm_recipe *r, const char *label, wm_error *err) {
    if (!label) label = "recipe";
    int kind = r->model_type[0] ? wm_arch_family_kind(r->model_type) : -1;
    if (r->model_type[0] && wm_s2s_find(r->model_type)) {
        /* the reference's part recipes (an encoder; a static-cache decoder) build one graph each (recipe_s2s.c) */
        if (wm_recipe_s2s_part_kind(r)) return WM_OK;
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'loader.model_type': model_type '%s' is not supported in a "
                      "recipe (loader.model_class '%s', task '%s'): an encoder-decoder builds from a part recipe (an "
                      "encoder: feature-extraction or image-feature-extraction; a static-cache decoder: "
                      "text2text-generation with decoder_input_ids; a sequence classifier: text-classification) or "
                      "from the checkpoint alone (no recipe) into Optimum's encoder_model.onnx, decoder_model.onnx and "
                      "decoder_with_past_model.onnx (`winml build -m CHECKPOINT -o DIR`)", label,
                      r->model_type, r->model_class, r->task);
    }
    if (r->model_type[0] && kind < 0) {
        char known[1024];
        wm_arch_family_names(known, sizeof known);
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'loader.model_type': model_type '%s' is not supported by "
                      "the builder (it builds %s)", label, r->model_type, known);
    }
    if (r->served_task < 0)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'loader.task': task '%s' is not served by the builder (it "
                      "builds %s)", label, r->task, wm_recipe_served_tasks());
    if (kind >= 0 && !wm_arch_family_serves(r->model_type, r->served_task))
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'loader.model_type': model_type '%s' does not serve task "
                      "'%s' (%s)", label, r->model_type, r->task,
                      kind == WM_DECODER ? "a decoder: text-generation"
                      : wm_arch_family_serves(r->model_type, WM_TASK_IMAGE_FEATURE_EXTRACTION) ||
                              wm_arch_family_serves(r->model_type, WM_TASK_ZERO_SHOT_IMAGE_CLASSIFICATION) ||
                              wm_arch_family_serves(r->model_type, WM_TASK_KEYPOINT_DETECTION)
                          ? "an image model: its image tasks"
                          : "a text encoder: every text task but text-generation");
    return WM_OK;
}

const char *wm_recipe_name_precision(const char *path) {
    static const char *const precs[] = {"fp32", "fp16", "w8a8", "w8a16", "int8", "int4"};
    const char *base = path ? strrchr(path, '/') : NULL;
    base = base ? base + 1 : path;
    const char *cfg = base ? strstr(base, "_config") : NULL;
    for (size_t i = 0; cfg && i < sizeof precs / sizeof precs[0]; i++) {
        size_t n = strlen(precs[i]);
        if ((size_t)(cfg - base) > n && cfg[-(long)n - 1] == '_' && !strncmp(cfg - n, precs[i], n)) return precs[i];
    }
    return NULL;
}

/* ------------------------------------------------------------ optim */

static const struct {
    const char *flag;
    const char *passes[4];
    const char *why; /* no pass: what this build does instead */
} ref_optim[] = {
    {"gelu_fusion", {"gelu", "fastgelu", "biasgelu"}, NULL},
    {"layer_norm_fusion", {"layernorm", "skiplayernorm"}, NULL},
    {"matmul_add_fusion", {"gemm"}, NULL},
    {"clamp_constant_values", {NULL}, "always on here: fp16 conversion saturates constants at +-65504"},
    {"remove_isnan_in_attention_mask", {NULL}, "not needed here: the export emits no IsNaN on the attention mask"},
    {"bias_softmax_fusion", {NULL}, "no BiasSoftmax fusion here: the attention fusion takes the mask add"},
    {"matmul_transpose_fusion", {NULL}, "no such pass here: the export writes weights pre-transposed"},
    {"reshape_mergedreshape", {NULL}, "no such pass here: shape_arithmetic folds static Reshape chains"},
};

size_t wm_recipe_optim_passes(const char *flag, const char **out, size_t cap, const char **why) {
    *why = NULL;
    if (!flag) return 0;
    if (wm_opt_pass_find(flag)) {
        if (cap) out[0] = wm_opt_pass_find(flag)->name;
        return cap ? 1 : 0;
    }
    for (size_t i = 0; i < sizeof ref_optim / sizeof ref_optim[0]; i++)
        if (!strcmp(flag, ref_optim[i].flag)) {
            size_t n = 0;
            while (n < 4 && n < cap && ref_optim[i].passes[n]) {
                out[n] = ref_optim[i].passes[n];
                n++;
            }
            *why = ref_optim[i].why;
            return n;
        }
    return 0;
}

/* ------------------------------------------------------------ bookkeeping fields */

/* Fields of the reference's recipes with no effect here: kinds allowed and why they are kept, not used. */
static const recipe_kept_def kept_defs[] = {
    {"export.export_params", RK_BOOL, "torch.onnx.export switch: weights are always written here"},
    {"export.do_constant_folding", RK_BOOL, "torch.onnx.export switch: the optim stage folds constants"},
    {"export.verbose", RK_BOOL, "torch.onnx.export logging"},
    {"export.clean_onnx", RK_BOOL, "the reference's post-export cleanup: the export here writes no debris"},
    {"export.dynamo", RK_BOOL, "the reference's torch exporter choice: the export here is native"},
    {"export.enable_hierarchy_tags", RK_BOOL, "the reference's node hierarchy tags (metadata only)"},
    {"export.hierarchy_tag_format", RK_STR, "the reference's node hierarchy tags (metadata only)"},
    {"export.compatibility", RK_OBJ, "transformers runtime switches (attention implementation): no torch here"},
    {"quant.model_id", RK_STR | RK_NULL, "the reference's record of the model: -m names it here"},
    {"quant.model_type", RK_STR | RK_NULL, "the reference's record of the model: loader.model_type is used"},
    {"quant.task", RK_STR | RK_NULL, "the reference's record of the task: loader.task is used"},
    {"quant.distribution", RK_STR | RK_NULL, "calibration input distribution: winml calibrates on seeded uniform samples in each input's value_range"},
    {"quant.save_calibration", RK_BOOL | RK_NULL, "calibration cache switch: winml keeps no calibration cache"},
    {"quant.calibration_load_path", RK_STR | RK_NULL, "calibration cache: winml keeps no calibration cache"},
    {"quant.calibration_save_path", RK_STR | RK_NULL, "calibration cache: winml keeps no calibration cache"},
    {"eval.dataset.name", RK_STR | RK_NULL, "dataset config name (winml eval reads local data)"},
    {"eval.dataset.revision", RK_STR | RK_NULL, "dataset revision on the Hub (winml eval reads local data)"},
    {"eval.dataset.seed", RK_NUM | RK_NULL, "dataset shuffle seed (winml eval reads local data)"},
    {"eval.dataset.shuffle", RK_BOOL | RK_NULL, "dataset shuffle (winml eval reads local data)"},
    {"eval.dataset.streaming", RK_BOOL | RK_NULL, "Hub streaming (winml eval reads local data)"},
    {"eval.dataset.build_script", RK_STR | RK_NULL, "the reference's dataset build script (Python, never run here)"},
    {"eval.dataset.columns_mapping", RK_OBJ | RK_NULL, "dataset column names (winml eval reads local data; "
     "input_column is static calibration's text column)"},
    {"eval.dataset.label_mapping", RK_OBJ | RK_NULL, "dataset label ids (winml eval reads local data)"},
    {"eval.dataset.label_mapping_file", RK_STR | RK_NULL, "dataset label file (winml eval reads local data)"},
    {NULL, 0, NULL},
};

const recipe_kept_def *recipe_kept_find(const char *path) {
    for (const recipe_kept_def *d = kept_defs; d->path; d++)
        if (!strcmp(d->path, path)) return d;
    return NULL;
}

void wm_recipe_kept_json(const wm_recipe *r, wm_json *j, const char *key) {
    wm_json_arr(j, key);
    for (size_t i = 0; i < r->n_kept; i++) {
        wm_json_obj(j, NULL);
        wm_json_str(j, "field", r->kept[i].field);
        wm_json_str(j, "why", r->kept[i].why);
        wm_json_obj_end(j);
    }
    wm_json_arr_end(j);
}

/* ------------------------------------------------------------ quant */

int32_t recipe_qtype(const char *s) {
    static const struct {
        const char *name;
        int32_t dt;
    } T[] = {{"QInt8", WM_DT_INT8},     {"int8", WM_DT_INT8},     {"QUInt8", WM_DT_UINT8}, {"uint8", WM_DT_UINT8},
             {"QUInt16", WM_DT_UINT16}, {"uint16", WM_DT_UINT16}, {"QInt16", WM_DT_INT16}, {"int16", WM_DT_INT16}};
    for (size_t i = 0; s && i < sizeof T / sizeof *T; i++)
        if (!strcmp(s, T[i].name)) return T[i].dt;
    return 0;
}

wm_status wm_recipe_quant_config(const wm_recipe *r, wm_quant_config *c, wm_error *err) {
    if (!r->has_quant || !r->qmode) return wm_err(err, WM_ERR_UNSUPPORTED, "the recipe has no quant section");
    wm_quant_config_default(c, (wm_quant_mode)r->qmode);
    if (r->weight_type[0]) c->weight_type = recipe_qtype(r->weight_type);
    if (r->activation_type[0]) c->activation_type = recipe_qtype(r->activation_type);
    if (r->per_channel >= 0) c->per_channel = r->per_channel;
    if (r->symmetric >= 0) c->symmetric = r->symmetric;
    if (r->act_symmetric >= 0) c->act_symmetric = r->act_symmetric;
    if (r->fp16_keep_io_types >= 0) c->keep_io_types = r->fp16_keep_io_types;
    if (r->rtn_bits >= 0) c->bits = (int)r->rtn_bits;
    if (r->rtn_block_size >= 0) c->block_size = r->rtn_block_size;
    if (r->rtn_8bit_block_size >= 0) c->int8_block_size = r->rtn_8bit_block_size;
    if (r->rtn_table_block_size >= 0) c->table_block_size = r->rtn_table_block_size;
    if (r->rtn_8bit_percent > 0) c->int8_percent = (int)r->rtn_8bit_percent;
    if (r->rtn_accuracy_level >= 0) c->accuracy_level = r->rtn_accuracy_level;
    if (r->rtn_half_scales >= 0) c->half_scales = r->rtn_half_scales;
    if (r->rtn_scale_search >= 0) c->scale_search = r->rtn_scale_search;
    if (r->rtn_float_zero_points >= 0) c->float_zp = r->rtn_float_zero_points;
    if (r->rtn_gptq_damp > 0) c->gptq_damp = r->rtn_gptq_damp;
    if (r->rtn_gptq_act_order >= 0) c->gptq_act_order = r->rtn_gptq_act_order;
    if (r->rtn_gptq_tied_head >= 0) c->gptq_tied = r->rtn_gptq_tied_head;
    size_t n = 0;
    if (r->fp16_op_block_list) {
        while (r->fp16_op_block_list[n]) n++;
        c->op_block = (const char *const *)r->fp16_op_block_list;
        c->n_op_block = n;
        c->op_block_given = 1;
    }
    for (n = 0; r->op_types_to_quantize && r->op_types_to_quantize[n]; n++) {}
    c->op_types = (const char *const *)r->op_types_to_quantize;
    c->n_op_types = n;
    for (n = 0; r->nodes_to_exclude && r->nodes_to_exclude[n]; n++) {}
    c->exclude = (const char *const *)r->nodes_to_exclude;
    c->n_exclude = n;
    for (n = 0; r->rtn_8bit_weights && r->rtn_8bit_weights[n]; n++) {}
    c->int8_weights = (const char *const *)r->rtn_8bit_weights;
    c->n_int8_weights = n;
    for (n = 0; r->rtn_8bit_layer_weights && r->rtn_8bit_layer_weights[n]; n++) {}
    c->int8_layer_weights = (const char *const *)r->rtn_8bit_layer_weights;
    c->n_int8_layer_weights = n;
    return WM_OK;
}
