/*
 * recipe.c - build recipes: defaults from an architecture, strict parsing,
 * JSON output and the consistency check against the model (see recipe.h).
 */
#include "builder/recipe.h"
#include "builder/export.h"
#include "builder/arch_impl.h"
#include "builder/recipe_impl.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"
#include "hf/config.h"
#include "onnx/dtype.h"
#include "opt/quant.h"

#define RECIPE_MAX_BYTES (16u << 20)

static const char *const prec_names[] = {"fp32", "fp16", "int8", "int4", "gguf", "w8a16", "int8-rtn", "int8-dynamic",
                                         "int16"};
#define N_PREC ((int)(sizeof prec_names / sizeof prec_names[0]))

const char *wm_precision_name(int p) { return p >= 0 && p < N_PREC ? prec_names[p] : "?"; }

int wm_precision_from_name(const char *s) {
    if (s && (!strcmp(s, "w8a8") || !strcmp(s, "int8-static"))) return WM_PREC_INT8;
    if (s && !strcmp(s, "w16a16")) return WM_PREC_INT16;
    for (int i = 0; s && i < N_PREC; i++)
        if (!strcmp(s, prec_names[i])) return i;
    return -1;
}

const char *wm_precision_list(void) { return "auto, fp32, fp16, int8 (w8a8), w8a16, int16 (w16a16), int4, int8-rtn, int8-dynamic, gguf"; }

wm_status wm_precision_parse(const char *s, int *out, wm_error *err) {
    *out = -1;
    if (!strcmp(s, "auto")) return WM_OK;
    if ((*out = wm_precision_from_name(s)) < 0)
        return wm_err(err, WM_ERR_USAGE, "-p: unknown precision '%s' (%s)", s, wm_precision_list());
    return WM_OK;
}

static int is_gguf(const char *format) { return format && !strcmp(format, "gguf"); }

wm_precision wm_precision_auto(const char *format, const char *device) {
    static const struct {
        const char *device;
        wm_precision p;
    } by_device[] = {{"npu", WM_PREC_W8A16}, {"gpu", WM_PREC_FP16}, {"cpu", WM_PREC_FP32}};
    wm_precision p = WM_PREC_FP32;
    for (size_t i = 0; device && i < sizeof by_device / sizeof by_device[0]; i++)
        if (!strcmp(device, by_device[i].device)) p = by_device[i].p;
    return is_gguf(format) && p != WM_PREC_W8A16 ? WM_PREC_GGUF : p;
}

wm_status wm_precision_check(int p, const char *format, wm_error *err) {
    if (p == WM_PREC_GGUF && !is_gguf(format))
        return wm_err(err, WM_ERR_USAGE, "precision gguf carries a GGUF file's quantized blocks: the source is not a "
                      "GGUF (use fp32, fp16, int8 or int4)");
    return WM_OK;
}

/*
 * Capability switches of the optimizer (the pass names of src/opt) that a
 * default recipe lists; a recipe may name any pass of src/opt or a
 * capability name of the reference (wm_recipe_optim_passes).
 */
static const char *const optim_flags[] = {
    "constant_nodes", "constant_folding", "shape_arithmetic", "identity_elimination", "initializer_dedup",
    "common_subexpression", "dead_nodes", "layernorm", "rmsnorm", "gelu", "fastgelu", "quickgelu", "rotary", "gqa",
    "attention", "skiplayernorm", "biasgelu", "gemm", NULL};

void wm_recipe_free(wm_recipe *r) {
    if (!r) return;
    free(r->inputs);
    free(r->outputs);
    free(r->optim);
    free(r->kept);
    char **lists[] = {r->fp16_op_block_list, r->op_types_to_quantize, r->nodes_to_exclude, r->rtn_8bit_weights,
                      r->rtn_8bit_layer_weights};
    for (int i = 0; i < 5; i++) {
        for (size_t k = 0; lists[i] && lists[i][k]; k++) free(lists[i][k]);
        free(lists[i]);
    }
    memset(r, 0, sizeof *r);
}

const wm_io_spec *wm_recipe_input(const wm_recipe *r, const char *name) {
    for (size_t i = 0; r && i < r->n_inputs; i++)
        if (!strcmp(r->inputs[i].name, name)) return &r->inputs[i];
    return NULL;
}

/* ------------------------------------------------------------ defaults */

static wm_io_dim sym(const char *name) {
    wm_io_dim d = {-1, ""};
    snprintf(d.name, sizeof d.name, "%s", name);
    return d;
}

static wm_io_dim fixed(int64_t v) {
    wm_io_dim d = {v, ""};
    return d;
}

static wm_io_spec *push_input(wm_recipe *r, const char *name, int32_t dt, size_t rank, const wm_io_dim *dims,
                              double lo, double hi) {
    wm_io_spec *s = &r->inputs[r->n_inputs++];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->dtype = dt;
    s->rank = rank;
    memcpy(s->dims, dims, rank * sizeof *dims);
    s->has_range = 1;
    s->range[0] = lo;
    s->range[1] = hi;
    return s;
}

static char **str_list(const char *const *v) {
    size_t n = 0;
    while (v && v[n]) n++;
    char **out = calloc(n + 1, sizeof *out);
    for (size_t i = 0; out && i < n; i++)
        if (!(out[i] = strdup(v[i]))) return out;
    return out;
}

static const struct {
    wm_task task;
    const char *path, *split;
} eval_sets[] = {
    {WM_TASK_TEXT_GENERATION, "wikitext-2-raw-v1", "test"},
    {WM_TASK_TEXT_CLASSIFICATION, "glue/mrpc", "validation"},
    {WM_TASK_FEATURE_EXTRACTION, "stsb", "test"},
    {WM_TASK_TOKEN_CLASSIFICATION, "conll2003", "validation"},
    {WM_TASK_QUESTION_ANSWERING, "squad", "validation"},
};

/* The quant section of the defaults for precision on a (nothing for fp32); r's quant fields must be empty. */
void wm_recipe_default_quant(const wm_arch *a, wm_precision precision, wm_recipe *r) {
    (void)a; /* the same defaults for every model kind today */
    r->precision = precision;
    r->has_quant = 0;
    if (precision != WM_PREC_FP32) {
        static const char *const empty[] = {NULL}, *const mmg[] = {"MatMul", "Gemm", "Gather", NULL};
        r->has_quant = 1;
        r->samples = -1;
        r->rtn_bits = r->rtn_block_size = r->rtn_accuracy_level = -1;
        r->rtn_8bit_block_size = r->rtn_table_block_size = r->rtn_8bit_percent = -1;
        r->per_channel = r->symmetric = r->fp16_keep_io_types = r->rtn_half_scales = r->rtn_scale_search = -1;
        r->act_symmetric = r->rtn_float_zero_points = -1;
        r->rtn_gptq = r->rtn_importance = r->rtn_gptq_act_order = r->rtn_gptq_tied_head = -1;
        r->rtn_gptq_damp = -1;
        r->qmode = precision == WM_PREC_FP16 ? WM_QUANT_FP16 : WM_QUANT_INT4;
        if (precision == WM_PREC_INT8 || precision == WM_PREC_W8A16 || precision == WM_PREC_INT16) {
            /* static QDQ with the reference's w8a8 / w8a16 recipe values (all of its static recipes agree):
               10 calibration samples, minmax, uint8 asymmetric weights per tensor, uint8 / uint16 activations;
               int16 (w16a16) the same with uint16 weights */
            int wide = precision != WM_PREC_INT8, w16 = precision == WM_PREC_INT16;
            snprintf(r->quant_mode, sizeof r->quant_mode, wide ? "qdq" : "static");
            r->qmode = w16 ? WM_QUANT_W16A16 : wide ? WM_QUANT_W8A16 : WM_QUANT_INT8_STATIC;
            r->samples = 10;
            snprintf(r->calibration_method, sizeof r->calibration_method, "minmax");
            snprintf(r->weight_type, sizeof r->weight_type, w16 ? "uint16" : "uint8");
            snprintf(r->activation_type, sizeof r->activation_type, wide ? "uint16" : "uint8");
            r->per_channel = 0;
            r->symmetric = 0;
        } else if (precision == WM_PREC_INT8_DYNAMIC) {
            /* ours: DynamicQuantizeLinear + MatMulInteger, int8 symmetric weights (the quantizer's defaults) */
            snprintf(r->quant_mode, sizeof r->quant_mode, "dynamic");
            r->qmode = WM_QUANT_INT8_DYNAMIC;
        } else if (precision == WM_PREC_FP16) {
            snprintf(r->quant_mode, sizeof r->quant_mode, "fp16");
            r->fp16_keep_io_types = 1;
            r->fp16_op_block_list = str_list(empty);
        } else if (precision == WM_PREC_INT8_RTN) {
            /* int8 weights in blocks of 32 along K (MatMulNBits bits 8), for every model kind, with int8
               activations allowed (accuracy_level 4, as the int4 default: onnxruntime quantizes them per block of 32
               at every row count, our engine below 32 rows, the same arithmetic to 2e-6 (test_kernels_ort)) and the
               scales as exact halves (streamed as 2 bytes: 8.5 bits a weight, Q8_0's); a decode matmul from memory
               (2560 x 10240, 1 thread) took 2.0-2.1 ms of CPU against 2.4-2.7 with float activations and float32
               scales (stop 49). Dynamic int8 (DynamicQuantizeLinear + MatMulInteger, one uint8 range per
               activation tensor) is wrong twice: it loses too much (all-MiniLM-L6-v2's embeddings reach cosine
               0.985 with it, 0.9997 with these; SmolLM2-135M perplexity 1.65x fp32 in our engine), and
               onnxruntime's u8s8 kernels saturate their int16 pair sums on x86 without VNNI, so the same file gave
               SmolLM2 perplexity 2.3e7 there (tests/oracle/test_int8_real.py). */
            snprintf(r->quant_mode, sizeof r->quant_mode, "rtn");
            r->rtn_bits = 8;
            r->rtn_block_size = 32;
            r->rtn_accuracy_level = 4;
            r->rtn_half_scales = 1;
            r->symmetric = 1;
            r->op_types_to_quantize = str_list(mmg); /* the embedding tables too, as GatherBlockQuantized */
            r->nodes_to_exclude = str_list(empty);
        } else if (precision == WM_PREC_GGUF) {
            /* the GGUF's blocks as they are (bits, block and zero points per tensor from its types) */
            snprintf(r->quant_mode, sizeof r->quant_mode, "gguf");
            r->qmode = WM_QUANT_CARRY;
            /* the GGUF's weights as they are, with activations no coarser than fp16 compute (accuracy_level 2):
               onnxruntime's x86 CPU kernels run that in float32, our engine below 8 rows (decode) in 15-bit
               integers per block (2.8e-5 .. 1e-4 relative RMS against double, a 100th of int8's), 1.2-1.7x the
               float32 decode step; prompts and windows of 8+ rows stay float32. SmolLM2 greedy 64 tokens stayed
               10 of 10 equal to transformers' on the dequantized weights. accuracy_level 4 (int8 activations)
               moved SmolLM2's logits up to 1.3 from transformers' and matched 4 of 10 greedy runs */
            r->rtn_accuracy_level = 2;
            r->op_types_to_quantize = str_list(mmg); /* Gather: a table whose blocks GatherBlockQuantized takes */
            r->nodes_to_exclude = str_list(empty);
        } else {
            /* Asymmetric blocks of 32, and llama.cpp Q4_K_M's mixed precision as a table over our exporter's
               canonical weight names: the token table (and the tied head sharing its codes) and an untied
               lm_head at 8 bits everywhere, attn v_proj and mlp down_proj at 8 bits in Q4_K_M's "more bits"
               layers. SmolLM2-135M perplexity (bench/int4_quality.py, ~1000 fortunes tokens): 1.050x fp32, where
               the old default (blocks of 128, symmetric, all 4-bit) gave 1.439x and asymmetric blocks of 32 alone
               1.199x; a name no model has simply matches nothing. */
            static const char *const w8[] = {"embed_tokens.", "lm_head.", "shared.", "embed_positions.", NULL},
                                     *const w8_layers[] = {"attn.v_proj.", "mlp.down_proj.", NULL};
            snprintf(r->quant_mode, sizeof r->quant_mode, "rtn");
            r->rtn_bits = 4;
            r->rtn_block_size = 32;
            r->rtn_accuracy_level = 4; /* int8 activations in MatMulNBits: the CPU EPs' fast path */
            r->rtn_half_scales = 1;    /* scales winml's engine streams as 2 bytes (exact float32 still) */
            r->symmetric = 0;
            /* uint8 zero points: onnxruntime's fast MatMulNBits path. Float zero points (quant_fzp.c's fitted
               offset, opt-in) gave SmolLM2 0.999x fp32 against 1.042x (its weights are Q4_1's grid, which a float
               offset represents exactly) and Gemma 3 270M 1.068x against 1.058x, but onnxruntime has no fast
               kernel for them: one SmolLM2 decode step (128 cached positions, 2 threads) took ~11-15x the time of
               this recipe's (bench/bench_int4_decode.py). The scale search (quant.rtn_scale_search) stays
               opt-in: on 12000 bytes of fortunes SmolLM2 1.073x against RTN's 1.078x (Gemma 3, 3000 bytes, with
               8-bit blocks of 256: 1.048x against 1.060x), still behind llama.cpp Q4_K_M's 1.064x, for about
               14x the build's CPU (README, "int4 and int8 on real weights") */
            r->rtn_float_zero_points = 0;
            r->op_types_to_quantize = str_list(mmg); /* Gather: embedding tables as GatherBlockQuantized */
            r->nodes_to_exclude = str_list(empty);
            r->rtn_8bit_weights = str_list(w8);
            r->rtn_8bit_layer_weights = str_list(w8_layers);
        }
    }
}

wm_status wm_recipe_default(const wm_arch *a, wm_precision precision, const char *ep, const char *device,
                            wm_recipe *r, wm_error *err) {
    memset(r, 0, sizeof *r);
    r->calib_seed = -1;
    snprintf(r->task, sizeof r->task, "%s", wm_task_name(a->task));
    snprintf(r->model_class, sizeof r->model_class, "%s", a->inference_class);
    snprintf(r->model_type, sizeof r->model_type, "%s", a->model_type);
    r->served_task = (int)a->task;
    r->has_export = 1;
    r->opset = 17;
    r->batch_size = 1;
    size_t cap = 4 + 2 * (size_t)a->L;
    r->inputs = calloc(cap, sizeof *r->inputs);
    if (!r->inputs) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    if (a->graph == WM_GRAPH_AUDIO) {
        /* any number of samples (run --audio feeds a whole file); attention_mask where the feature extractor gives
           one (feat_extract_norm "layer") */
        wm_io_dim d[2] = {sym("batch_size"), sym("sequence_length")};
        push_input(r, "input_values", WM_DT_FLOAT, 2, d, -1, 1);
        if (a->feat_layer_norm) push_input(r, "attention_mask", WM_DT_INT64, 2, d, 1, 2);
    } else if (a->graph == WM_GRAPH_S2S && a->vis_enc) { /* an image encoder-decoder: its encoder's pixel_values */
        const wm_arch *t = a->tower[1];
        wm_io_dim px[4] = {sym("batch_size"), fixed(t->C), fixed(t->image), fixed(t->image)};
        push_input(r, "pixel_values", WM_DT_FLOAT, 4, px, -1, 1);
    } else if (a->graph != WM_GRAPH_TEXT && a->graph != WM_GRAPH_S2S) { /* encoder-decoders: the encoder's text inputs */
        /* Optimum's names; batches symbolic, the image at the config's size (positions are not interpolated), the
           text at max_position_embeddings as the other encoders (CLIP pads to it; a recipe may make it symbolic) */
        int dual = a->graph == WM_GRAPH_DUAL;
        wm_io_dim ids[2] = {sym(dual ? "text_batch_size" : "batch_size"), fixed(a->P > 512 ? 512 : a->P)};
        wm_io_dim px[4] = {sym(dual ? "image_batch_size" : "batch_size"), fixed(a->C), fixed(a->image),
                           fixed(a->image_w)};
        if (a->graph == WM_GRAPH_CLIP_TEXT || dual) {
            push_input(r, "input_ids", WM_DT_INT64, 2, ids, 0, (double)a->V);
            push_input(r, "attention_mask", WM_DT_INT64, 2, ids, 0, 2);
        }
        if (a->graph != WM_GRAPH_CLIP_TEXT) push_input(r, "pixel_values", WM_DT_FLOAT, 4, px, -1, 1);
    } else if (a->kind == WM_DECODER) {
        wm_io_dim bs[2] = {sym("batch_size"), sym("sequence_length")}, bt[2] = {sym("batch_size"),
                                                                             sym("total_sequence_length")};
        wm_io_dim kv[4] = {sym("batch_size"), fixed(a->kvh), sym("past_sequence_length"), fixed(a->hd)};
        /* value_range [low, high): the upper bound excluded, as the reference writes it */
        push_input(r, "input_ids", WM_DT_INT64, 2, bs, 0, (double)a->V);
        push_input(r, "attention_mask", WM_DT_INT64, 2, bt, 0, 2);
        push_input(r, "position_ids", WM_DT_INT64, 2, bs, 0, (double)(a->P > 0 ? a->P : 1));
        for (int64_t i = 0; i < a->L; i++) {
            char n[96];
            snprintf(n, sizeof n, "past_key_values.%lld.key", (long long)i);
            push_input(r, n, WM_DT_FLOAT, 4, kv, -1, 1)->has_range = 0;
            snprintf(n, sizeof n, "past_key_values.%lld.value", (long long)i);
            push_input(r, n, WM_DT_FLOAT, 4, kv, -1, 1)->has_range = 0;
        }
    } else {
        int64_t offset = a->posid == WM_POSID_PADDING ? a->pad_id + 1 : 0;
        int64_t seq = a->P - offset < 512 ? a->P - offset : 512;
        if (seq < 1) return wm_err(err, WM_ERR_INPUT, "max_position_embeddings %lld leaves no room for a sequence",
                                   (long long)a->P);
        wm_io_dim d[2] = {fixed(1), fixed(seq)};
        push_input(r, "input_ids", WM_DT_INT32, 2, d, 0, (double)a->V);
        push_input(r, "attention_mask", WM_DT_INT32, 2, d, 0, 2);
        if (a->T > 1 && wm_arch_mod(a, -1, WM_M_G_TYPE)->present)
            push_input(r, "token_type_ids", WM_DT_INT32, 2, d, 0, (double)a->T);
    }
    size_t no = 8 + 2 * (size_t)a->L; /* CLIP: logits both ways, embeddings, tower outputs */
    r->outputs = calloc(no, sizeof *r->outputs);
    if (!r->outputs) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    r->n_outputs = wm_export_output_names(a, r, r->outputs, no);
    r->has_optim = 1;
    for (size_t i = 0; optim_flags[i]; i++) r->n_optim++;
    r->optim = calloc(r->n_optim, sizeof *r->optim);
    if (!r->optim) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < r->n_optim; i++) {
        snprintf(r->optim[i].name, sizeof r->optim[i].name, "%s", optim_flags[i]);
        r->optim[i].value = 1;
    }
    wm_recipe_default_quant(a, precision, r);
    if (ep) {
        r->has_compile = 1;
        snprintf(r->provider, sizeof r->provider, "%s", ep);
        snprintf(r->device, sizeof r->device, "%s", device ? device : "cpu");
    }
    r->has_eval = 1;
    snprintf(r->eval_task, sizeof r->eval_task, "%s", r->task);
    for (size_t i = 0; i < sizeof eval_sets / sizeof eval_sets[0]; i++)
        if (eval_sets[i].task == a->task) {
            snprintf(r->dataset_path, sizeof r->dataset_path, "%s", eval_sets[i].path);
            snprintf(r->dataset_split, sizeof r->dataset_split, "%s", eval_sets[i].split);
        }
    r->dataset_samples = 100;
    return WM_OK;
}

/* ------------------------------------------------------------ JSON out */

static const char *dtype_str(int32_t dt) { return wm_dtype_name(dt); }

static void str_list_json(wm_json *j, const char *key, char **v) {
    wm_json_arr(j, key);
    for (size_t i = 0; v && v[i]; i++) wm_json_str(j, NULL, v[i]);
    wm_json_arr_end(j);
}

void wm_recipe_json(const wm_recipe *r, wm_json *j) {
    wm_json_obj(j, NULL);
    wm_json_obj(j, "loader");
    wm_json_str(j, "task", r->task);
    wm_json_str(j, "model_class", r->model_class);
    wm_json_str(j, "model_type", r->model_type);
    wm_json_bool(j, "trust_remote_code", r->trust_remote_code);
    wm_json_obj_end(j);
    if (!r->has_export) wm_json_null(j, "export");
    else {
        wm_json_obj(j, "export");
        wm_json_int(j, "opset_version", r->opset);
        wm_json_int(j, "batch_size", r->batch_size);
        wm_json_arr(j, "input_tensors");
        for (size_t i = 0; i < r->n_inputs; i++) {
            const wm_io_spec *s = &r->inputs[i];
            wm_json_obj(j, NULL);
            wm_json_str(j, "name", s->name);
            wm_json_str(j, "dtype", dtype_str(s->dtype));
            wm_json_arr(j, "shape");
            for (size_t k = 0; k < s->rank; k++) {
                if (s->dims[k].v >= 0) wm_json_int(j, NULL, s->dims[k].v);
                else wm_json_str(j, NULL, s->dims[k].name);
            }
            wm_json_arr_end(j);
            if (s->has_range) {
                wm_json_arr(j, "value_range");
                wm_json_num(j, NULL, s->range[0]);
                wm_json_num(j, NULL, s->range[1]);
                wm_json_arr_end(j);
            } else wm_json_null(j, "value_range");
            wm_json_obj_end(j);
        }
        wm_json_arr_end(j);
        wm_json_arr(j, "output_tensors");
        for (size_t i = 0; i < r->n_outputs; i++) {
            wm_json_obj(j, NULL);
            wm_json_str(j, "name", r->outputs[i]);
            wm_json_obj_end(j);
        }
        wm_json_arr_end(j);
        wm_json_null(j, "dynamic_axes");
        if (r->pooling == WM_POOL_NONE) wm_json_null(j, "pooling");
        else wm_json_str(j, "pooling", r->pooling == WM_POOL_MEAN ? "mean" : "cls");
        wm_json_bool(j, "normalize", r->normalize);
        wm_json_obj_end(j);
    }
    if (!r->has_optim) wm_json_null(j, "optim");
    else {
        wm_json_obj(j, "optim");
        for (size_t i = 0; i < r->n_optim; i++) wm_json_bool(j, r->optim[i].name, r->optim[i].value);
        wm_json_obj_end(j);
    }
    if (!r->has_quant) wm_json_null(j, "quant");
    else {
        wm_json_obj(j, "quant");
        wm_json_str(j, "mode", r->quant_mode);
        if (r->weight_type[0]) wm_json_str(j, "weight_type", r->weight_type);
        if (r->activation_type[0]) wm_json_str(j, "activation_type", r->activation_type);
        if (r->calibration_method[0]) wm_json_str(j, "calibration_method", r->calibration_method);
        if (r->samples >= 0) wm_json_int(j, "samples", r->samples);
        if (r->calib_seed >= 0) wm_json_int(j, "seed", r->calib_seed);
        if (r->per_channel >= 0) wm_json_bool(j, "per_channel", r->per_channel);
        if (r->symmetric >= 0) wm_json_bool(j, "symmetric", r->symmetric);
        if (r->act_symmetric >= 0) wm_json_bool(j, "activation_symmetric", r->act_symmetric);
        if (r->rtn_bits >= 0) wm_json_int(j, "rtn_bits", r->rtn_bits);
        if (r->rtn_block_size >= 0) wm_json_int(j, "rtn_block_size", r->rtn_block_size);
        if (r->rtn_8bit_block_size >= 0) wm_json_int(j, "rtn_8bit_block_size", r->rtn_8bit_block_size);
        if (r->rtn_table_block_size >= 0) wm_json_int(j, "rtn_table_block_size", r->rtn_table_block_size);
        if (r->rtn_8bit_percent >= 0) wm_json_int(j, "rtn_8bit_percent", r->rtn_8bit_percent);
        if (r->rtn_accuracy_level >= 0) wm_json_int(j, "rtn_accuracy_level", r->rtn_accuracy_level);
        if (r->rtn_half_scales >= 0) wm_json_bool(j, "rtn_half_scales", r->rtn_half_scales);
        if (r->rtn_scale_search >= 0) wm_json_bool(j, "rtn_scale_search", r->rtn_scale_search);
        if (r->rtn_float_zero_points >= 0) wm_json_bool(j, "rtn_float_zero_points", r->rtn_float_zero_points);
        if (r->rtn_gptq >= 0) wm_json_bool(j, "rtn_gptq", r->rtn_gptq);
        if (r->rtn_gptq_damp >= 0) wm_json_num(j, "rtn_gptq_damp", r->rtn_gptq_damp);
        if (r->rtn_gptq_act_order >= 0) wm_json_bool(j, "rtn_gptq_act_order", r->rtn_gptq_act_order);
        if (r->rtn_gptq_tied_head >= 0) wm_json_bool(j, "rtn_gptq_tied_head", r->rtn_gptq_tied_head);
        if (r->rtn_importance >= 0) wm_json_bool(j, "rtn_importance", r->rtn_importance);
        if (r->calibration_text[0]) wm_json_str(j, "calibration_text", r->calibration_text);
        if (r->rtn_8bit_weights) str_list_json(j, "rtn_8bit_weights", r->rtn_8bit_weights);
        if (r->rtn_8bit_layer_weights) str_list_json(j, "rtn_8bit_layer_weights", r->rtn_8bit_layer_weights);
        if (r->fp16_keep_io_types >= 0) wm_json_bool(j, "fp16_keep_io_types", r->fp16_keep_io_types);
        if (r->fp16_op_block_list) str_list_json(j, "fp16_op_block_list", r->fp16_op_block_list);
        if (r->op_types_to_quantize) str_list_json(j, "op_types_to_quantize", r->op_types_to_quantize);
        if (r->nodes_to_exclude) str_list_json(j, "nodes_to_exclude", r->nodes_to_exclude);
        wm_json_obj_end(j);
    }
    if (!r->has_compile) wm_json_null(j, "compile");
    else {
        wm_json_obj(j, "compile");
        wm_json_obj(j, "ep_config");
        wm_json_str(j, "provider", r->provider);
        wm_json_str(j, "device", r->device);
        wm_json_obj_end(j);
        wm_json_obj_end(j);
    }
    if (!r->has_eval) wm_json_null(j, "eval");
    else {
        wm_json_obj(j, "eval");
        wm_json_str(j, "task", r->eval_task);
        wm_json_obj(j, "dataset");
        wm_json_str(j, "path", r->dataset_path[0] ? r->dataset_path : NULL);
        if (r->dataset_config[0]) wm_json_str(j, "name", r->dataset_config); /* the hub data set's config */
        wm_json_str(j, "split", r->dataset_split[0] ? r->dataset_split : NULL);
        wm_json_int(j, "samples", r->dataset_samples);
        if (r->dataset_text_column[0]) {
            wm_json_obj(j, "columns_mapping");
            wm_json_str(j, "input_column", r->dataset_text_column);
            wm_json_obj_end(j);
        }
        wm_json_obj_end(j);
        wm_json_obj_end(j);
    }
    wm_json_obj_end(j);
}

/* ------------------------------------------------------------ parsing */

typedef struct pctx {
    const char *label;
    wm_error *err;
    wm_recipe *r; /* receives the kept reference fields */
} pctx;

static const char *kind(const cJSON *v) {
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsArray(v)) return "an array";
    return "an object";
}

/* Records field path (at most 95 characters) as a kept reference field. */
static wm_status push_kept(const pctx *p, const char *path, const char *why) {
    wm_recipe *r = p->r;
    if (r->n_kept % 16 == 0) {
        wm_recipe_kept *k = realloc(r->kept, (r->n_kept + 16) * sizeof *k);
        if (!k) return wm_err(p->err, WM_ERR_NOMEM, "out of memory");
        r->kept = k;
    }
    snprintf(r->kept[r->n_kept].field, sizeof r->kept[0].field, "%s", path);
    r->kept[r->n_kept++].why = why;
    return WM_OK;
}

static unsigned kind_bit(const cJSON *v) {
    return cJSON_IsBool(v) ? RK_BOOL : cJSON_IsString(v) ? RK_STR : cJSON_IsNumber(v) ? RK_NUM : cJSON_IsNull(v) ? RK_NULL
           : cJSON_IsObject(v) ? RK_OBJ : 0;
}

/*
 * Member c of o (at where) is not one this build uses: a bookkeeping field of the reference (kept: recorded in
 * r->kept, checked for its kind; an object holds scalars only), or an error naming it.
 */
static wm_status keep_field(const pctx *p, const char *where, const cJSON *c) {
    char path[96];
    if ((size_t)snprintf(path, sizeof path, "%s%s", where, c->string) >= sizeof path)
        return wm_err(p->err, WM_ERR_INPUT, "%s: field '%s%.40s...': unknown field", p->label, where, c->string);
    const recipe_kept_def *d = recipe_kept_find(path);
    if (!d) return wm_err(p->err, WM_ERR_INPUT, "%s: field '%s': unknown field", p->label, path);
    int ok = (kind_bit(c) & d->kinds) != 0;
    const cJSON *m;
    if (ok && cJSON_IsObject(c)) cJSON_ArrayForEach(m, c) ok &= (kind_bit(m) & (RK_BOOL | RK_STR | RK_NUM | RK_NULL)) != 0;
    if (!ok)
        return wm_err(p->err, WM_ERR_INPUT, "%s: field '%s': expected %s, got %s", p->label, path,
                      d->kinds & RK_OBJ ? "an object of strings, numbers or booleans" : d->kinds & RK_BOOL ? "true or false"
                      : d->kinds & RK_STR ? "a string" : "a number", kind(c));
    return push_kept(p, path, d->why);
}

/* Every member of o must be in allowed (NULL-terminated) or a kept reference field, and appear once. */
static wm_status only_keys(const pctx *p, const cJSON *o, const char *where, const char *const *allowed) {
    const cJSON *c;
    cJSON_ArrayForEach(c, o) {
        int ok = 0;
        for (size_t i = 0; allowed[i] && !ok; i++) ok = !strcmp(c->string, allowed[i]);
        wm_status st;
        if (!ok && (st = keep_field(p, where, c))) return st;
        for (const cJSON *d = c->next; d; d = d->next)
            if (!strcmp(d->string, c->string))
                return wm_err(p->err, WM_ERR_INPUT, "%s: field '%s%s': listed twice", p->label, where, c->string);
    }
    return WM_OK;
}

static wm_status bad(const pctx *p, const char *where, const char *key, const char *want, const cJSON *v) {
    return wm_err(p->err, WM_ERR_INPUT, "%s: field '%s%s': expected %s, got %s", p->label, where, key, want, kind(v));
}

static wm_status get_str(const pctx *p, const cJSON *o, const char *where, const char *key, char *out, size_t n,
                         int required) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) {
        if (required) return wm_err(p->err, WM_ERR_INPUT, "%s: field '%s%s': missing", p->label, where, key);
        return WM_OK;
    }
    if (!cJSON_IsString(v)) return bad(p, where, key, "a string", v);
    if (strlen(v->valuestring) >= n)
        return wm_err(p->err, WM_ERR_INPUT, "%s: field '%s%s': longer than %zu characters", p->label, where, key, n - 1);
    snprintf(out, n, "%s", v->valuestring);
    return WM_OK;
}

static wm_status get_int(const pctx *p, const cJSON *o, const char *where, const char *key, int64_t lo, int64_t hi,
                         int64_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return WM_OK;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < (double)lo ||
        v->valuedouble > (double)hi) {
        if (!cJSON_IsNumber(v)) return bad(p, where, key, "an integer", v);
        return wm_err(p->err, WM_ERR_INPUT, "%s: field '%s%s': expected an integer in [%lld, %lld], got %g", p->label,
                      where, key, (long long)lo, (long long)hi, v->valuedouble);
    }
    *out = (int64_t)v->valuedouble;
    return WM_OK;
}

static wm_status get_num(const pctx *p, const cJSON *o, const char *where, const char *key, double lo, double hi,
                         double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return WM_OK;
    if (!cJSON_IsNumber(v)) return bad(p, where, key, "a number", v);
    if (!(v->valuedouble >= lo && v->valuedouble <= hi))
        return wm_err(p->err, WM_ERR_INPUT, "%s: field '%s%s': expected a number in [%g, %g], got %g", p->label, where,
                      key, lo, hi, v->valuedouble);
    *out = v->valuedouble;
    return WM_OK;
}

static wm_status get_bool(const pctx *p, const cJSON *o, const char *where, const char *key, int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return WM_OK;
    if (!cJSON_IsBool(v)) return bad(p, where, key, "true or false", v);
    *out = cJSON_IsTrue(v);
    return WM_OK;
}

static wm_status get_list(const pctx *p, const cJSON *o, const char *where, const char *key, char ***out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return WM_OK;
    if (!cJSON_IsArray(v)) return bad(p, where, key, "a list of strings", v);
    int n = cJSON_GetArraySize(v);
    if (n > 100000) return wm_err(p->err, WM_ERR_INPUT, "%s: field '%s%s': too many entries", p->label, where, key);
    *out = calloc((size_t)n + 1, sizeof **out);
    if (!*out) return wm_err(p->err, WM_ERR_NOMEM, "out of memory");
    const cJSON *e;
    size_t i = 0;
    cJSON_ArrayForEach(e, v) {
        if (!cJSON_IsString(e)) return bad(p, where, key, "a list of strings", e);
        if (!((*out)[i++] = strdup(e->valuestring))) return wm_err(p->err, WM_ERR_NOMEM, "out of memory");
    }
    return WM_OK;
}

/* The value of key in o that must be an object or null (*out NULL then); absent: *present = 0. */
static wm_status section(const pctx *p, const cJSON *o, const char *key, const cJSON **out, int *present) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = NULL;
    *present = 0;
    if (!v || cJSON_IsNull(v)) return WM_OK;
    if (!cJSON_IsObject(v)) return bad(p, "", key, "an object or null", v);
    *out = v;
    *present = 1;
    return WM_OK;
}

static int32_t io_dtype(const char *s) {
    static const struct {
        const char *n;
        int32_t dt;
    } t[] = {{"int32", WM_DT_INT32}, {"int64", WM_DT_INT64}, {"float32", WM_DT_FLOAT}, {"float16", WM_DT_FLOAT16},
             {"float", WM_DT_FLOAT}, {"bool", WM_DT_BOOL}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(s, t[i].n)) return t[i].dt;
    return -1;
}

static wm_status parse_tensor(const pctx *p, const cJSON *e, size_t idx, wm_io_spec *s) {
    char where[64];
    snprintf(where, sizeof where, "export.input_tensors[%zu].", idx);
    static const char *const keys[] = {"name", "dtype", "shape", "value_range", NULL};
    if (!cJSON_IsObject(e)) return bad(p, "export.", "input_tensors[]", "an object", e);
    wm_status st = only_keys(p, e, where, keys);
    char dt[16] = "";
    if (st || (st = get_str(p, e, where, "name", s->name, sizeof s->name, 1)) ||
        (st = get_str(p, e, where, "dtype", dt, sizeof dt, 1)))
        return st;
    if ((s->dtype = io_dtype(dt)) < 0)
        return wm_err(p->err, WM_ERR_INPUT, "%s: field '%sdtype': unknown dtype '%s' (int32, int64, float32, float16)",
                      p->label, where, dt);
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    if (!sh || !cJSON_IsArray(sh)) return bad(p, where, "shape", "a list of dims", sh ? sh : e);
    int rank = cJSON_GetArraySize(sh);
    if (rank < 1 || rank > WM_IO_MAX_RANK)
        return wm_err(p->err, WM_ERR_INPUT, "%s: field '%sshape': rank %d, expected 1 to %d", p->label, where, rank,
                      WM_IO_MAX_RANK);
    s->rank = (size_t)rank;
    const cJSON *d;
    size_t k = 0;
    cJSON_ArrayForEach(d, sh) {
        if (cJSON_IsString(d) && *d->valuestring && strlen(d->valuestring) < sizeof s->dims[k].name) {
            s->dims[k].v = -1;
            snprintf(s->dims[k].name, sizeof s->dims[k].name, "%s", d->valuestring);
        } else if (cJSON_IsNumber(d) && d->valuedouble == floor(d->valuedouble) && d->valuedouble >= 0 &&
                   d->valuedouble <= 1e9) {
            s->dims[k].v = (int64_t)d->valuedouble;
        } else
            return wm_err(p->err, WM_ERR_INPUT, "%s: field '%sshape[%zu]': expected a size >= 0 or a dim name, got %s",
                          p->label, where, k, kind(d));
        k++;
    }
    const cJSON *vr = cJSON_GetObjectItemCaseSensitive(e, "value_range");
    if (vr && !cJSON_IsNull(vr)) {
        if (!cJSON_IsArray(vr) || cJSON_GetArraySize(vr) != 2 || !cJSON_IsNumber(vr->child) ||
            !cJSON_IsNumber(vr->child->next) || !(vr->child->valuedouble < vr->child->next->valuedouble))
            return bad(p, where, "value_range", "[low, high) with low < high (high excluded)", vr);
        s->has_range = 1;
        s->range[0] = vr->child->valuedouble;
        s->range[1] = vr->child->next->valuedouble;
    }
    return WM_OK;
}

static wm_status parse_export(const pctx *p, const cJSON *e, wm_recipe *r) {
    /* the reference's exporter switches (export_params, dynamo, ...) are kept fields (recipe_ref.c) */
    static const char *const keys[] = {"opset_version", "batch_size", "input_tensors", "output_tensors",
                                       "dynamic_axes", "pooling", "normalize", NULL};
    wm_status st = only_keys(p, e, "export.", keys);
    int64_t opset = 17;
    if (st || (st = get_int(p, e, "export.", "opset_version", 17, 23, &opset)) ||
        (st = get_int(p, e, "export.", "batch_size", 1, 1 << 20, &r->batch_size)))
        return st;
    r->opset = (int)opset;
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(e, "input_tensors");
    if (!in || !cJSON_IsArray(in)) return bad(p, "export.", "input_tensors", "a list", in ? in : e);
    int n = cJSON_GetArraySize(in);
    if (n < 1 || n > WM_RECIPE_MAX_IO)
        return wm_err(p->err, WM_ERR_INPUT, "%s: field 'export.input_tensors': %d entries, expected 1 to %d", p->label,
                      n, WM_RECIPE_MAX_IO);
    r->inputs = calloc((size_t)n, sizeof *r->inputs);
    if (!r->inputs) return wm_err(p->err, WM_ERR_NOMEM, "out of memory");
    const cJSON *t;
    cJSON_ArrayForEach(t, in) {
        if ((st = parse_tensor(p, t, r->n_inputs, &r->inputs[r->n_inputs]))) return st;
        for (size_t k = 0; k < r->n_inputs; k++)
            if (!strcmp(r->inputs[k].name, r->inputs[r->n_inputs].name))
                return wm_err(p->err, WM_ERR_INPUT, "%s: field 'export.input_tensors': '%s' listed twice", p->label,
                              r->inputs[k].name);
        r->n_inputs++;
    }
    const cJSON *out = cJSON_GetObjectItemCaseSensitive(e, "output_tensors");
    if (out && !cJSON_IsNull(out)) {
        if (!cJSON_IsArray(out)) return bad(p, "export.", "output_tensors", "a list", out);
        int k = cJSON_GetArraySize(out);
        if (k > WM_RECIPE_MAX_IO) return wm_err(p->err, WM_ERR_INPUT, "%s: too many output_tensors", p->label);
        r->outputs = calloc((size_t)k + 1, sizeof *r->outputs);
        if (!r->outputs) return wm_err(p->err, WM_ERR_NOMEM, "out of memory");
        cJSON_ArrayForEach(t, out) {
            static const char *const okeys[] = {"name", NULL};
            char where[64];
            snprintf(where, sizeof where, "export.output_tensors[%zu].", r->n_outputs);
            if (!cJSON_IsObject(t)) return bad(p, "export.", "output_tensors[]", "an object", t);
            if ((st = only_keys(p, t, where, okeys)) ||
                (st = get_str(p, t, where, "name", r->outputs[r->n_outputs], sizeof r->outputs[0], 1)))
                return st;
            r->n_outputs++;
        }
    }
    const cJSON *dyn = cJSON_GetObjectItemCaseSensitive(e, "dynamic_axes");
    if (dyn && !cJSON_IsNull(dyn)) {
        if (!cJSON_IsObject(dyn)) return bad(p, "export.", "dynamic_axes", "an object or null", dyn);
        const cJSON *io;
        cJSON_ArrayForEach(io, dyn) {
            wm_io_spec *s = (wm_io_spec *)wm_recipe_input(r, io->string);
            int is_out = 0;
            for (size_t k = 0; k < r->n_outputs && !s; k++) is_out |= !strcmp(r->outputs[k], io->string);
            if (!s && !is_out)
                return wm_err(p->err, WM_ERR_INPUT, "%s: field 'export.dynamic_axes.%s': no such input or output",
                              p->label, io->string);
            if (!cJSON_IsObject(io)) return bad(p, "export.dynamic_axes.", io->string, "an object {axis: name}", io);
            const cJSON *ax;
            cJSON_ArrayForEach(ax, io) {
                char *end = NULL;
                long k = strtol(ax->string, &end, 10);
                if (*end || k < 0 || (s && (size_t)k >= s->rank) || !cJSON_IsString(ax) || !*ax->valuestring ||
                    strlen(ax->valuestring) >= sizeof s->dims[0].name)
                    return wm_err(p->err, WM_ERR_INPUT, "%s: field 'export.dynamic_axes.%s.%s': expected an axis index "
                                  "of the tensor mapped to a dim name", p->label, io->string, ax->string);
                if (s) {
                    s->dims[k].v = -1;
                    snprintf(s->dims[k].name, sizeof s->dims[k].name, "%s", ax->valuestring);
                }
            }
        }
    }
    char pool[16] = "";
    if ((st = get_str(p, e, "export.", "pooling", pool, sizeof pool, 0)) ||
        (st = get_bool(p, e, "export.", "normalize", &r->normalize)))
        return st;
    if (!pool[0]) {
        /* a task that implies pooling (sentence-similarity) pools unless its outputs are the token states alone,
           as the reference's are (its eval pools them) */
        wm_pooling implied = WM_POOL_NONE;
        wm_recipe_task_served(r->task, &implied);
        int listed_embedding = !r->n_outputs;
        for (size_t k = 0; k < r->n_outputs; k++) listed_embedding |= !strcmp(r->outputs[k], "sentence_embedding");
        r->pooling = listed_embedding ? implied : WM_POOL_NONE;
    }
    else if (!strcmp(pool, "mean")) r->pooling = WM_POOL_MEAN;
    else if (!strcmp(pool, "cls")) r->pooling = WM_POOL_CLS;
    else return wm_err(p->err, WM_ERR_INPUT, "%s: field 'export.pooling': '%s' (mean, cls or null)", p->label, pool);
    return WM_OK;
}

/* A quant type field: one of recipe_qtype's names (QInt8, int8, QUInt8, uint8, ...), stored as written. */
static wm_status get_qtype(const pctx *p, const cJSON *q, const char *key, char *out, size_t n) {
    wm_status st = get_str(p, q, "quant.", key, out, n, 0);
    if (st || !out[0]) return st;
    if (!recipe_qtype(out))
        return wm_err(p->err, WM_ERR_INPUT, "%s: field 'quant.%s': '%s' (int8, uint8, int16 or uint16: QInt8, QUInt8, "
                      "QInt16, QUInt16)", p->label, key, out);
    return WM_OK;
}

/*
 * The quant section, validated once here for every consumer (wm_recipe_quant_config gives the quantizer its
 * config from these fields): mode static|qdq|dynamic|rtn|fp16 (qdq = static; static with 16-bit weights is
 * w16a16, the reference's int16; else with 16-bit activations w8a16), rtn_bits 4 or 8, rtn_block_size a power of two in [16, 4096].
 */
static wm_status parse_quant(const pctx *p, const cJSON *q, wm_recipe *r) {
    static const char *const keys[] = {"mode", "weight_type", "activation_type", "calibration_method", "samples",
                                       "per_channel", "symmetric", "weight_symmetric", "activation_symmetric",
                                       "rtn_bits", "rtn_block_size", "rtn_8bit_block_size", "rtn_table_block_size", "rtn_8bit_percent",
                                       "rtn_accuracy_level", "rtn_half_scales",
                                       "rtn_scale_search", "rtn_float_zero_points", "rtn_gptq", "rtn_gptq_damp", "rtn_gptq_act_order",
                                       "rtn_gptq_tied_head",
                                       "rtn_importance",
                                       "calibration_text",
                                       "rtn_8bit_weights", "rtn_8bit_layer_weights", "fp16_keep_io_types", "fp16_op_block_list",
                                       "op_types_to_quantize", "nodes_to_exclude", "seed", NULL};
    r->calib_seed = -1;
    r->samples = r->rtn_bits = r->rtn_block_size = r->rtn_accuracy_level = -1;
    r->rtn_8bit_block_size = r->rtn_table_block_size = r->rtn_8bit_percent = -1;
    r->per_channel = r->symmetric = r->fp16_keep_io_types = r->rtn_half_scales = r->rtn_scale_search = -1;
    r->act_symmetric = r->rtn_float_zero_points = -1;
    r->rtn_gptq = r->rtn_importance = r->rtn_gptq_act_order = r->rtn_gptq_tied_head = -1;
    r->rtn_gptq_damp = -1;
    int wsym = -1;
    wm_status st = only_keys(p, q, "quant.", keys);
    if (st || (st = get_str(p, q, "quant.", "mode", r->quant_mode, sizeof r->quant_mode, 1)) ||
        (st = get_qtype(p, q, "weight_type", r->weight_type, sizeof r->weight_type)) ||
        (st = get_qtype(p, q, "activation_type", r->activation_type, sizeof r->activation_type)) ||
        (st = get_str(p, q, "quant.", "calibration_method", r->calibration_method, sizeof r->calibration_method, 0)) ||
        (st = get_int(p, q, "quant.", "samples", 1, 10000, &r->samples)) ||
        (st = get_int(p, q, "quant.", "seed", 0, (int64_t)1 << 53, &r->calib_seed)) ||
        (st = get_bool(p, q, "quant.", "per_channel", &r->per_channel)) ||
        (st = get_bool(p, q, "quant.", "symmetric", &r->symmetric)) ||
        (st = get_bool(p, q, "quant.", "weight_symmetric", &wsym)) ||
        (st = get_bool(p, q, "quant.", "activation_symmetric", &r->act_symmetric)) ||
        (st = get_int(p, q, "quant.", "rtn_bits", 4, 8, &r->rtn_bits)) ||
        (st = get_int(p, q, "quant.", "rtn_block_size", 16, 4096, &r->rtn_block_size)) ||
        (st = get_int(p, q, "quant.", "rtn_8bit_block_size", 16, 4096, &r->rtn_8bit_block_size)) ||
        (st = get_int(p, q, "quant.", "rtn_table_block_size", 16, 4096, &r->rtn_table_block_size)) ||
        (st = get_int(p, q, "quant.", "rtn_8bit_percent", 0, 100, &r->rtn_8bit_percent)) ||
        (st = get_int(p, q, "quant.", "rtn_accuracy_level", 0, 4, &r->rtn_accuracy_level)) ||
        (st = get_bool(p, q, "quant.", "rtn_half_scales", &r->rtn_half_scales)) ||
        (st = get_bool(p, q, "quant.", "rtn_scale_search", &r->rtn_scale_search)) ||
        (st = get_bool(p, q, "quant.", "rtn_float_zero_points", &r->rtn_float_zero_points)) ||
        (st = get_bool(p, q, "quant.", "rtn_gptq", &r->rtn_gptq)) ||
        (st = get_num(p, q, "quant.", "rtn_gptq_damp", 1e-6, 10.0, &r->rtn_gptq_damp)) ||
        (st = get_bool(p, q, "quant.", "rtn_gptq_act_order", &r->rtn_gptq_act_order)) ||
        (st = get_bool(p, q, "quant.", "rtn_gptq_tied_head", &r->rtn_gptq_tied_head)) ||
        (st = get_bool(p, q, "quant.", "rtn_importance", &r->rtn_importance)) ||
        (st = get_str(p, q, "quant.", "calibration_text", r->calibration_text, sizeof r->calibration_text, 0)) ||
        (st = get_list(p, q, "quant.", "rtn_8bit_weights", &r->rtn_8bit_weights)) ||
        (st = get_list(p, q, "quant.", "rtn_8bit_layer_weights", &r->rtn_8bit_layer_weights)) ||
        (st = get_bool(p, q, "quant.", "fp16_keep_io_types", &r->fp16_keep_io_types)) ||
        (st = get_list(p, q, "quant.", "fp16_op_block_list", &r->fp16_op_block_list)) ||
        (st = get_list(p, q, "quant.", "op_types_to_quantize", &r->op_types_to_quantize)) ||
        (st = get_list(p, q, "quant.", "nodes_to_exclude", &r->nodes_to_exclude)))
        return st;
    if (r->rtn_bits >= 0 && r->rtn_bits != 4 && r->rtn_bits != 8)
        return wm_err(p->err, WM_ERR_INPUT, "%s: field 'quant.rtn_bits': %lld (4 or 8)", p->label, (long long)r->rtn_bits);
    const struct { const char *name; int64_t v; } blocks[] = {{"rtn_block_size", r->rtn_block_size},
                                                              {"rtn_8bit_block_size", r->rtn_8bit_block_size},
                                                              {"rtn_table_block_size", r->rtn_table_block_size}};
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++)
        if (blocks[i].v >= 0 && (blocks[i].v & (blocks[i].v - 1)))
            return wm_err(p->err, WM_ERR_INPUT, "%s: field 'quant.%s': %lld (a power of two in [16, 4096])",
                          p->label, blocks[i].name, (long long)blocks[i].v);
    if (wsym >= 0) {
        if (r->symmetric >= 0 && r->symmetric != wsym)
            return wm_err(p->err, WM_ERR_INPUT, "%s: field 'quant.weight_symmetric': %s, but quant.symmetric is %s",
                          p->label, wsym ? "true" : "false", r->symmetric ? "true" : "false");
        r->symmetric = wsym;
    }
    if (r->rtn_float_zero_points == 1 && (r->symmetric == 1 || r->rtn_gptq == 1 || r->rtn_bits == 8))
        return wm_err(p->err, WM_ERR_INPUT, "%s: field 'quant.rtn_float_zero_points': true applies to asymmetric 4-bit "
                      "rounding only, and quant.%s: set it false (or drop the other field)", p->label,
                      r->symmetric == 1 ? "symmetric is true" : r->rtn_gptq == 1 ? "rtn_gptq is true" : "rtn_bits is 8");
    if (r->rtn_8bit_percent > 0 && r->rtn_importance != 1)
        return wm_err(p->err, WM_ERR_INPUT, "%s: field 'quant.rtn_8bit_percent': %lld, but quant.rtn_importance is not "
                      "true (the sensitivity is measured on its calibration statistics)", p->label,
                      (long long)r->rtn_8bit_percent);
    if ((r->rtn_gptq_damp >= 0 || r->rtn_gptq_act_order == 1 || r->rtn_gptq_tied_head == 1) && r->rtn_gptq != 1)
        return wm_err(p->err, WM_ERR_INPUT, "%s: field 'quant.%s' applies to GPTQ, but quant.rtn_gptq is not true",
                      p->label, r->rtn_gptq_damp >= 0 ? "rtn_gptq_damp" : r->rtn_gptq_act_order == 1 ?
                      "rtn_gptq_act_order" : "rtn_gptq_tied_head");
    if (r->calibration_method[0] && strcmp(r->calibration_method, "minmax") &&
        strcmp(r->calibration_method, "entropy") && strcmp(r->calibration_method, "percentile"))
        return wm_err(p->err, WM_ERR_INPUT, "%s: field 'quant.calibration_method': '%s' (minmax, entropy, percentile)",
                      p->label, r->calibration_method);
    int32_t act = r->activation_type[0] ? recipe_qtype(r->activation_type) : 0;
    int32_t wt = r->weight_type[0] ? recipe_qtype(r->weight_type) : 0;
    int w16 = wt == WM_DT_UINT16 || wt == WM_DT_INT16;
    static const struct {
        const char *mode;
        wm_quant_mode q;
        wm_precision prec;
    } modes[] = {{"fp16", WM_QUANT_FP16, WM_PREC_FP16},
                 {"static", WM_QUANT_INT8_STATIC, WM_PREC_INT8},
                 {"qdq", WM_QUANT_INT8_STATIC, WM_PREC_INT8},
                 {"dynamic", WM_QUANT_INT8_DYNAMIC, WM_PREC_INT8_DYNAMIC},
                 {"rtn", WM_QUANT_INT4, WM_PREC_INT4},
                 {"gguf", WM_QUANT_CARRY, WM_PREC_GGUF}};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (!strcmp(r->quant_mode, modes[i].mode)) {
            r->qmode = modes[i].q;
            r->precision = modes[i].prec;
            if (r->qmode == WM_QUANT_INT8_STATIC && w16) { /* 16-bit weights: w16a16, the reference's int16 */
                r->qmode = WM_QUANT_W16A16;
                r->precision = WM_PREC_INT16;
            } else if (r->qmode == WM_QUANT_INT8_STATIC && (act == WM_DT_UINT16 || act == WM_DT_INT16)) {
                r->qmode = WM_QUANT_W8A16;
                r->precision = WM_PREC_W8A16;
            }
            if (w16 && r->qmode != WM_QUANT_W16A16)
                return wm_err(p->err, WM_ERR_INPUT, "%s: field 'quant.weight_type': '%s' (16-bit weights are for static "
                              "QDQ, mode static or qdq; mode %s takes int8 or uint8)", p->label, r->weight_type,
                              r->quant_mode);
            if (r->qmode == WM_QUANT_INT4 && r->rtn_bits == 8) r->precision = WM_PREC_INT8_RTN;
            size_t n_ops = 0; /* a name the mode never quantizes is refused here, not built into a no-op */
            while (r->op_types_to_quantize && r->op_types_to_quantize[n_ops]) n_ops++;
            char where[1100];
            snprintf(where, sizeof where, "%s: field 'quant.op_types_to_quantize'", p->label);
            return wm_quant_check_op_types(r->qmode, (const char *const *)r->op_types_to_quantize, n_ops, where,
                                           p->err);
        }
    return wm_err(p->err, WM_ERR_INPUT, "%s: field 'quant.mode': '%s' (static, qdq, dynamic, rtn, fp16, gguf)", p->label,
                  r->quant_mode);
}

static wm_status parse_root(const pctx *p, const cJSON *root, wm_recipe *r) {
    static const char *const keys[] = {"loader", "export", "optim", "quant", "compile", "eval", NULL};
    wm_status st = only_keys(p, root, "", keys);
    const cJSON *sec;
    int present;
    if (st || (st = section(p, root, "loader", &sec, &present))) return st;
    if (!present) return wm_err(p->err, WM_ERR_INPUT, "%s: field 'loader': missing", p->label);
    static const char *const lkeys[] = {"task", "model_class", "model_type", "trust_remote_code", NULL};
    if ((st = only_keys(p, sec, "loader.", lkeys)) ||
        (st = get_str(p, sec, "loader.", "task", r->task, sizeof r->task, 1)) ||
        (st = get_str(p, sec, "loader.", "model_class", r->model_class, sizeof r->model_class, 0)) ||
        (st = get_str(p, sec, "loader.", "model_type", r->model_type, sizeof r->model_type, 0)) ||
        (st = get_bool(p, sec, "loader.", "trust_remote_code", &r->trust_remote_code)))
        return st;
    if ((r->served_task = wm_recipe_task_served(r->task, NULL)) == -2)
        return wm_err(p->err, WM_ERR_INPUT, "%s: field 'loader.task': unknown task '%s' (the builder serves %s)",
                      p->label, r->task, wm_recipe_served_tasks());
    if ((st = section(p, root, "export", &sec, &r->has_export))) return st;
    if (r->has_export && (st = parse_export(p, sec, r))) return st;
    if ((st = section(p, root, "optim", &sec, &r->has_optim))) return st;
    if (r->has_optim) {
        /* our pass names and the reference's capability names; a capability with no pass here is kept, with why */
        const cJSON *f;
        r->optim = calloc((size_t)cJSON_GetArraySize(sec) + 1, sizeof *r->optim);
        if (!r->optim) return wm_err(p->err, WM_ERR_NOMEM, "out of memory");
        cJSON_ArrayForEach(f, sec) {
            const char *passes[4], *why = NULL;
            if (strlen(f->string) >= sizeof r->optim[0].name ||
                (!wm_recipe_optim_passes(f->string, passes, 4, &why) && !why))
                return wm_err(p->err, WM_ERR_INPUT, "%s: field 'optim.%s': unknown field (a pass of winml "
                              "optimize --list-passes, or the reference's gelu_fusion, layer_norm_fusion, "
                              "matmul_add_fusion, clamp_constant_values, ...)", p->label, f->string);
            for (const cJSON *d = f->next; d; d = d->next)
                if (!strcmp(d->string, f->string))
                    return wm_err(p->err, WM_ERR_INPUT, "%s: field 'optim.%s': listed twice", p->label, f->string);
            if (!cJSON_IsBool(f)) return bad(p, "optim.", f->string, "true or false", f);
            char path[64];
            snprintf(path, sizeof path, "optim.%s", f->string);
            if (why && (st = push_kept(p, path, why))) return st;
            snprintf(r->optim[r->n_optim].name, sizeof r->optim[0].name, "%s", f->string);
            r->optim[r->n_optim++].value = cJSON_IsTrue(f);
        }
    }
    if ((st = section(p, root, "quant", &sec, &r->has_quant))) return st;
    r->precision = WM_PREC_FP32;
    if (r->has_quant && (st = parse_quant(p, sec, r))) return st;
    if ((st = section(p, root, "compile", &sec, &present))) return st;
    if (present) {
        static const char *const ckeys[] = {"ep_config", NULL}, *const ekeys[] = {"provider", "device", NULL};
        const cJSON *ep;
        int has_ep;
        if ((st = only_keys(p, sec, "compile.", ckeys)) || (st = section(p, sec, "ep_config", &ep, &has_ep))) return st;
        if (has_ep) {
            r->has_compile = 1;
            if ((st = only_keys(p, ep, "compile.ep_config.", ekeys)) ||
                (st = get_str(p, ep, "compile.ep_config.", "provider", r->provider, sizeof r->provider, 1)) ||
                (st = get_str(p, ep, "compile.ep_config.", "device", r->device, sizeof r->device, 0)))
                return st;
        }
    }
    if ((st = section(p, root, "eval", &sec, &r->has_eval))) return st;
    if (r->has_eval) {
        static const char *const ekeys[] = {"task", "dataset", NULL}, *const dkeys[] = {"path", "split", "samples", NULL};
        const cJSON *ds;
        int has_ds;
        r->dataset_samples = -1;
        if ((st = only_keys(p, sec, "eval.", ekeys)) ||
            (st = get_str(p, sec, "eval.", "task", r->eval_task, sizeof r->eval_task, 0)) ||
            (st = section(p, sec, "dataset", &ds, &has_ds)))
            return st;
        if (has_ds && ((st = only_keys(p, ds, "eval.dataset.", dkeys)) ||
                       (st = get_str(p, ds, "eval.dataset.", "path", r->dataset_path, sizeof r->dataset_path, 0)) ||
                       (st = get_str(p, ds, "eval.dataset.", "split", r->dataset_split, sizeof r->dataset_split, 0)) ||
                       (st = get_int(p, ds, "eval.dataset.", "samples", 1, 1 << 30, &r->dataset_samples))))
            return st;
        /* columns_mapping stays kept bookkeeping (its kind checked there); its input_column is also static
           calibration's text column */
        const cJSON *dn = has_ds ? cJSON_GetObjectItemCaseSensitive(ds, "name") : NULL; /* kind checked as kept */
        if (cJSON_IsString(dn) && strlen(dn->valuestring) < sizeof r->dataset_config)
            snprintf(r->dataset_config, sizeof r->dataset_config, "%s", dn->valuestring);
        const cJSON *cm = has_ds ? cJSON_GetObjectItemCaseSensitive(ds, "columns_mapping") : NULL;
        const cJSON *ic = cJSON_IsObject(cm) ? cJSON_GetObjectItemCaseSensitive(cm, "input_column") : NULL;
        if (cJSON_IsString(ic)) {
            if (!ic->valuestring[0] || strlen(ic->valuestring) >= sizeof r->dataset_text_column)
                return wm_err(p->err, WM_ERR_INPUT, "%s: field 'eval.dataset.columns_mapping.input_column': empty or "
                              "longer than %zu bytes", p->label, sizeof r->dataset_text_column - 1);
            snprintf(r->dataset_text_column, sizeof r->dataset_text_column, "%s", ic->valuestring);
        }
        if (r->eval_task[0] && wm_recipe_task_served(r->eval_task, NULL) == -2)
            return wm_err(p->err, WM_ERR_INPUT, "%s: field 'eval.task': unknown task '%s'", p->label, r->eval_task);
    }
    return WM_OK;
}

wm_status wm_recipe_parse(const char *text, size_t n, const char *label, wm_recipe *r, wm_error *err) {
    memset(r, 0, sizeof *r);
    r->calib_seed = -1;
    r->opset = 17;
    r->batch_size = 1;
    if (!label) label = "recipe";
    cJSON *root = NULL;
    wm_status st = wm_hf_json_parse(text, n, RECIPE_MAX_BYTES, label, &root, err);
    if (st) return st;
    pctx p = {label, err, r};
    st = parse_root(&p, root, r);
    cJSON_Delete(root);
    if (st) wm_recipe_free(r);
    return st;
}

wm_status wm_recipe_load(const char *path, wm_recipe *r, wm_error *err) {
    memset(r, 0, sizeof *r);
    wm_map m;
    wm_status st = wm_map_file(path, 0, &m, err);
    if (st) return st;
    st = wm_recipe_parse(m.data ? (const char *)m.data : "", m.size, path, r, err);
    wm_unmap(&m);
    return st;
}

/* ------------------------------------------------------------ check */

static wm_status check_ids(const pctx *p, const wm_io_spec *s, int rank) {
    if (s->dtype != WM_DT_INT32 && s->dtype != WM_DT_INT64)
        return wm_err(p->err, WM_ERR_INPUT, "%s: field 'export.input_tensors[%s].dtype': %s, expected int32 or int64",
                      p->label, s->name, wm_dtype_name(s->dtype));
    if ((int)s->rank != rank)
        return wm_err(p->err, WM_ERR_INPUT, "%s: field 'export.input_tensors[%s].shape': rank %zu, expected %d",
                      p->label, s->name, s->rank, rank);
    return WM_OK;
}

/* pixel_values: float32 [batch, channels, image_size, image_size] (no position interpolation to other sizes). */
static wm_status check_pixels(const pctx *p, const wm_io_spec *s, const wm_arch *a) {
    if (s->dtype != WM_DT_FLOAT || s->rank != 4)
        return wm_err(p->err, WM_ERR_INPUT, "%s: field 'export.input_tensors[pixel_values]': expected float32 of rank 4 "
                      "[batch, %lld, %lld, %lld]", p->label, (long long)a->C, (long long)a->image, (long long)a->image_w);
    int64_t want[3] = {a->C, a->image, a->image_w};
    for (int k = 0; k < 3; k++)
        if (s->dims[k + 1].v != want[k])
            return wm_err(p->err, WM_ERR_UNSUPPORTED, "%s: field 'export.input_tensors[pixel_values].shape': dim %d must "
                          "be %lld (the config's %s; another square size interpolates the position embeddings)",
                          p->label, k + 1, (long long)want[k], k ? "image_size" : "num_channels");
    return WM_OK;
}

wm_status wm_recipe_fit_image(const wm_recipe *r, wm_arch *a, const char *label, wm_error *err) {
    const wm_io_spec *px = a->graph != WM_GRAPH_TEXT && a->graph != WM_GRAPH_CLIP_TEXT ?
                           wm_recipe_input(r, "pixel_values") : NULL;
    if (!px || px->rank != 4 || px->dims[2].v <= 0 || px->dims[2].v != px->dims[3].v || px->dims[2].v == a->image)
        return WM_OK; /* check_pixels names what is wrong */
    return wm_arch_set_image(a, px->dims[2].v, label ? label : "recipe", err);
}

wm_status wm_recipe_check(const wm_recipe *r, const wm_arch *a, const char *label, wm_error *err) {
    pctx p = {label ? label : "recipe", err, NULL};
    if (r->model_type[0] && strcmp(r->model_type, a->model_type))
        return wm_err(err, WM_ERR_INPUT, "%s: field 'loader.model_type': '%s', but the checkpoint is '%s'", p.label,
                      r->model_type, a->model_type);
    if (r->served_task != (int)a->task)
        return wm_err(err, WM_ERR_INPUT, "%s: field 'loader.task': '%s', but the model was resolved for '%s'", p.label,
                      r->task, wm_task_name(a->task));
    /* the checkpoint's class, the task's Auto class (AutoModel, AutoModelForSequenceClassification ...), or one of
       the reference's export wrappers (…Wrapper) around it */
    char auto_class[64];
    snprintf(auto_class, sizeof auto_class, "AutoModel%s", strcmp(wm_task_class_suffix[a->task], "Model") ?
             wm_task_class_suffix[a->task] : "");
    size_t mcl = strlen(r->model_class);
    int wrapper = mcl > 7 && !strcmp(r->model_class + mcl - 7, "Wrapper");
    if (r->model_class[0] && strcmp(r->model_class, a->inference_class) && strcmp(r->model_class, auto_class) &&
        !wrapper)
        return wm_err(err, WM_ERR_INPUT, "%s: field 'loader.model_class': '%s', but task %s of this checkpoint uses %s "
                      "(or %s)", p.label, r->model_class, r->task, a->inference_class, auto_class);
    if (!r->has_export) return WM_OK;
    /* every input known, needed ones present */
    int64_t offset = a->posid == WM_POSID_PADDING ? a->pad_id + 1 : 0;
    int audio = a->graph == WM_GRAPH_AUDIO;
    /* encoder-decoders: the encoder's text inputs (wm_recipe_default's), an image encoder's pixel_values */
    int s2s = a->graph == WM_GRAPH_S2S;
    int texts = a->graph == WM_GRAPH_TEXT || a->graph == WM_GRAPH_CLIP_TEXT || a->graph == WM_GRAPH_DUAL ||
                (s2s && !a->vis_enc);
    int images = (!audio && !s2s && a->graph != WM_GRAPH_TEXT && a->graph != WM_GRAPH_CLIP_TEXT) || a->vis_enc;
    for (size_t i = 0; i < r->n_inputs; i++) {
        const wm_io_spec *s = &r->inputs[i];
        wm_status st = WM_OK;
        int known = 0;
        if (audio && !strcmp(s->name, "input_values")) {
            known = 1;
            if (s->dtype != WM_DT_FLOAT || s->rank != 2)
                st = wm_err(err, WM_ERR_INPUT, "%s: field 'export.input_tensors[input_values]': expected float32 of "
                            "rank 2 [batch, samples]", p.label);
        } else if (audio && !strcmp(s->name, "attention_mask")) {
            known = 1;
            st = check_ids(&p, s, 2);
            if (!st && !a->feat_layer_norm)
                st = wm_err(err, WM_ERR_INPUT, "%s: field 'export.input_tensors[attention_mask]': a feat_extract_norm "
                            "\"group\" model takes no attention_mask (its feature extractor gives none)", p.label);
        } else if (images && !strcmp(s->name, "pixel_values")) {
            known = 1;
            st = check_pixels(&p, s, a->vis_enc ? a->tower[1] : a);
        } else if (texts && (!strcmp(s->name, "input_ids") || !strcmp(s->name, "attention_mask"))) {
            known = 1;
            st = check_ids(&p, s, 2);
            if (!st && a->kind == WM_ENCODER && !strcmp(s->name, "input_ids") && s->dims[1].v > a->P - offset)
                st = wm_err(err, WM_ERR_INPUT, "%s: field 'export.input_tensors[input_ids].shape': sequence %lld is "
                            "over the %lld positions the model has", p.label, (long long)s->dims[1].v,
                            (long long)(a->P - offset));
        } else if (!strcmp(s->name, "position_ids") && a->kind == WM_DECODER) {
            known = 1;
            st = check_ids(&p, s, 2);
        } else if (!strcmp(s->name, "token_type_ids") && a->kind == WM_ENCODER &&
                   wm_arch_mod(a, -1, WM_M_G_TYPE)->present) {
            known = 1;
            st = check_ids(&p, s, 2);
        } else if (a->kind == WM_DECODER && !strncmp(s->name, "past_key_values.", 16)) {
            char *end = NULL;
            long layer = strtol(s->name + 16, &end, 10);
            known = end != s->name + 16 && layer >= 0 && layer < a->L && (!strcmp(end, ".key") || !strcmp(end, ".value"));
            if (known && (s->dtype != WM_DT_FLOAT || s->rank != 4 || (s->dims[1].v >= 0 && s->dims[1].v != a->kvh) ||
                          (s->dims[3].v >= 0 && s->dims[3].v != a->hd)))
                st = wm_err(err, WM_ERR_INPUT, "%s: field 'export.input_tensors[%s]': expected float32 [batch, %lld, "
                            "past, %lld]", p.label, s->name, (long long)a->kvh, (long long)a->hd);
        }
        if (st) return st;
        if (!known)
            return wm_err(err, WM_ERR_INPUT, "%s: field 'export.input_tensors': '%s' is not an input of this %s model",
                          p.label, s->name, wm_task_name(a->task));
    }
    const char *need[] = {texts ? "input_ids" : audio ? "input_values" : "pixel_values", texts ? "attention_mask" : NULL,
                          a->graph == WM_GRAPH_TEXT && a->kind == WM_DECODER ? "position_ids"
                          : a->graph == WM_GRAPH_DUAL                       ? "pixel_values"
                                                                            : NULL};
    for (size_t i = 0; i < 3; i++)
        if (need[i] && !wm_recipe_input(r, need[i]))
            return wm_err(err, WM_ERR_INPUT, "%s: field 'export.input_tensors': '%s' is missing", p.label, need[i]);
    for (int64_t l = 0; a->kind == WM_DECODER && l < a->L; l++)
        for (int k = 0; k < 2; k++) {
            char n[96];
            snprintf(n, sizeof n, "past_key_values.%lld.%s", (long long)l, k ? "value" : "key");
            if (!wm_recipe_input(r, n))
                return wm_err(err, WM_ERR_INPUT, "%s: field 'export.input_tensors': '%s' is missing", p.label, n);
        }
    const wm_io_spec *ids = wm_recipe_input(r, texts ? "input_ids" : audio ? "input_values" : "pixel_values");
    if (ids->dims[0].v >= 0 && ids->dims[0].v != r->batch_size)
        return wm_err(err, WM_ERR_INPUT, "%s: field 'export.batch_size': %lld, but input_ids has batch %lld", p.label,
                      (long long)r->batch_size, (long long)ids->dims[0].v);
    if (r->pooling != WM_POOL_NONE && a->task != WM_TASK_FEATURE_EXTRACTION)
        return wm_err(err, WM_ERR_INPUT, "%s: field 'export.pooling': only for feature-extraction", p.label);
    if (r->n_outputs) {
        char names[16][96];
        size_t cap = 8 + 2 * (size_t)a->L;
        char(*want)[96] = cap > 16 ? calloc(cap, sizeof *want) : names;
        if (!want) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        size_t n = wm_export_output_names(a, r, want, cap);
        wm_status st = WM_OK;
        for (size_t i = 0; i < r->n_outputs && !st; i++) {
            size_t k = 0;
            while (k < n && strcmp(want[k], r->outputs[i])) k++;
            if (k == n)
                st = wm_err(err, WM_ERR_INPUT, "%s: field 'export.output_tensors': '%s' is not an output of this model",
                            p.label, r->outputs[i]);
        }
        /* an image model's recipe may list a subset (the reference's list last_hidden_state alone) */
        if (!st && r->n_outputs != n && a->graph == WM_GRAPH_TEXT)
            st = wm_err(err, WM_ERR_INPUT, "%s: field 'export.output_tensors': %zu listed, the model has %zu (%s ...)",
                        p.label, r->n_outputs, n, want[0]);
        if (want != names) free(want);
        if (st) return st;
    }
    return WM_OK;
}
