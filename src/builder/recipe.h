/*
 * recipe.h - the build recipe (the reference's build config JSON): what to
 * load, how to export (opset, IO tensors with dtypes and static or
 * symbolic shapes), and the optim / quant / compile / eval sections. A
 * section set to null skips that stage.
 *
 * Recipes are untrusted input: unknown fields and ill-typed values are
 * errors naming the field ("recipe.json: field 'export.opset_version':
 * expected an integer in [17, 23], got \"x\""). wm_recipe_default derives
 * the reference's defaults from a resolved architecture (batch 1, int32
 * ids for encoders with a static sequence of min(positions - offset, 512),
 * symbolic everything for decoders, ONNX Runtime GenAI names for the KV
 * cache).
 */
#ifndef WM_BUILDER_RECIPE_H
#define WM_BUILDER_RECIPE_H

#include <stdint.h>

#include "builder/arch.h"
#include "core/json.h"

#define WM_IO_MAX_RANK 8
#define WM_RECIPE_MAX_IO 2048

typedef struct wm_io_dim {
    int64_t v;        /* >= 0 static; -1 symbolic */
    char name[48];    /* symbolic name when v < 0 */
} wm_io_dim;

typedef struct wm_io_spec {
    char name[96];
    int32_t dtype;    /* wm_dtype */
    size_t rank;
    wm_io_dim dims[WM_IO_MAX_RANK];
    int has_range;
    double range[2];  /* value_range */
} wm_io_spec;

typedef enum { WM_POOL_NONE, WM_POOL_MEAN, WM_POOL_CLS } wm_pooling;

/* Precisions of `-p`; only fp32 can be produced today. */
typedef enum { WM_PREC_FP32, WM_PREC_FP16, WM_PREC_INT8, WM_PREC_INT4 } wm_precision;
const char *wm_precision_name(int p);
int wm_precision_from_name(const char *s); /* -1 when unknown */

typedef struct wm_recipe_flag {
    char name[48];
    int value;
} wm_recipe_flag;

typedef struct wm_recipe {
    /* loader (always present) */
    char task[48], model_class[128], model_type[64];
    int trust_remote_code;
    /* export */
    int has_export;
    int opset;
    int64_t batch_size;
    wm_io_spec *inputs;       /* malloc'ed */
    size_t n_inputs;
    char (*outputs)[96];      /* malloc'ed names */
    size_t n_outputs;
    wm_pooling pooling;
    int normalize;
    /* optim: capability flags */
    int has_optim;
    wm_recipe_flag *optim;
    size_t n_optim;
    /* quant */
    int has_quant;
    char quant_mode[16], weight_type[16], activation_type[16], calibration_method[16];
    int64_t samples, rtn_bits, rtn_block_size, rtn_accuracy_level; /* accuracy: MatMulNBits's attribute */
    int per_channel, symmetric, fp16_keep_io_types;
    int rtn_half_scales; /* ours: float32 MatMulNBits scales rounded to exact halves (-1: absent) */
    int rtn_scale_search; /* ours: each block's scale searched for the least weighted error (-1: absent) */
    int rtn_gptq;         /* ours: GPTQ with calibration statistics from our engine (-1: absent) */
    char calibration_text[256]; /* ours: GPTQ's calibration text file ("": seeded random tokens) */
    char **fp16_op_block_list, **op_types_to_quantize, **nodes_to_exclude; /* NULL-terminated, malloc'ed */
    char **rtn_8bit_weights, **rtn_8bit_layer_weights; /* ours: weights kept at 8 bits (quant.h int8_weights) */
    /* compile */
    int has_compile;
    char provider[32], device[32];
    /* eval */
    int has_eval;
    char eval_task[48], dataset_path[256], dataset_split[32];
    int64_t dataset_samples;
    /* not a JSON field: the precision the recipe asks for (from quant) */
    wm_precision precision;
} wm_recipe;

/*
 * Fills r with the defaults for a (see the header comment); precision
 * selects the quant section (fp32: null). ep/device name the compile
 * target ("cpu"). r owns arrays: wm_recipe_free.
 */
wm_status wm_recipe_default(const wm_arch *a, wm_precision precision, const char *ep, const char *device,
                            wm_recipe *r, wm_error *err);
/* Parses recipe JSON text (label names it in messages); strict (see header comment). */
wm_status wm_recipe_parse(const char *text, size_t n, const char *label, wm_recipe *r, wm_error *err);
wm_status wm_recipe_load(const char *path, wm_recipe *r, wm_error *err);
/* Writes r as JSON (the same shape wm_recipe_parse reads). */
void wm_recipe_json(const wm_recipe *r, wm_json *j);
void wm_recipe_free(wm_recipe *r);

/*
 * Checks r against a resolved architecture: loader fields agree, every
 * input the graph needs is listed once with an allowed dtype and a shape
 * consistent with the model (kv heads, head size, positions), no unknown
 * inputs or outputs. Errors name the recipe field.
 */
wm_status wm_recipe_check(const wm_recipe *r, const wm_arch *a, const char *label, wm_error *err);

/* The spec of input name, or NULL. */
const wm_io_spec *wm_recipe_input(const wm_recipe *r, const char *name);

#endif
