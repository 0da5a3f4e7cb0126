/*
 * recipe.h - the build recipe (the reference's build config JSON): what to
 * load, how to export (opset, IO tensors with dtypes and static or
 * symbolic shapes), and the optim / quant / compile / eval sections. A
 * section set to null skips that stage. This typed recipe is the one model
 * of a recipe: the builder, the optimizer (wm_recipe_optim_passes) and the
 * quantizer (wm_recipe_quant_config) take it; nothing parses a section again.
 *
 * Recipes are untrusted input: unknown fields and ill-typed values are
 * errors naming the field ("recipe.json: field 'export.opset_version':
 * expected an integer in [17, 23], got \"x\""). The reference system's own
 * recipes parse as they are (its 299 were surveyed, tests/oracle/
 * recipe_survey.py): its bookkeeping fields (export.dynamo, quant.seed,
 * eval.dataset.columns_mapping, ...) are checked for their kind and kept in
 * r->kept with why they have no effect here; its optim capability names
 * map onto our passes; quant.mode qdq is static; its task names are served
 * where one of ours can (sentence-similarity, zero-shot-classification,
 * text-ranking, fill-mask) and named when refused; loader.model_class may be
 * the task's Auto class or a ...Wrapper; value_range is [low, high) with the
 * upper bound excluded, as the reference writes it. wm_recipe_default derives
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
    double range[2];  /* value_range [low, high): high exclusive, as the reference writes it */
} wm_io_spec;

typedef enum { WM_POOL_NONE, WM_POOL_MEAN, WM_POOL_CLS } wm_pooling;

/*
 * Precisions of `-p`, with the reference's meanings: int8 (also w8a8) is static QDQ with 8-bit activations
 * calibrated by our engine, w8a16 the same with 16-bit activations (the reference's NPU recipes), int16 (also
 * w16a16) with 16-bit activations and 16-bit weights; ours under
 * names of their own: int8-rtn (8-bit weights in blocks, MatMulNBits, float activations) and int8-dynamic
 * (DynamicQuantizeLinear + MatMulInteger). gguf: a GGUF's quantized blocks carried into MatMulNBits /
 * GatherBlockQuantized as they are (quant mode "gguf"), the default of a GGUF source; the others dequantize a
 * GGUF first.
 */
typedef enum {
    WM_PREC_FP32, WM_PREC_FP16, WM_PREC_INT8, WM_PREC_INT4, WM_PREC_GGUF, WM_PREC_W8A16, WM_PREC_INT8_RTN,
    WM_PREC_INT8_DYNAMIC, WM_PREC_INT16
} wm_precision;
const char *wm_precision_name(int p);
int wm_precision_from_name(const char *s); /* a name of wm_precision_list or an alias (w8a8); -1 when unknown */
/* "fp32, fp16, int8 (w8a8), w8a16, int16 (w16a16), int4, int8-rtn, int8-dynamic, gguf" for messages. */
const char *wm_precision_list(void);
/*
 * Parses -p s: *out a wm_precision, or -1 for "auto" (the recipe's quant section, else wm_precision_auto).
 * WM_ERR_USAGE naming s when unknown.
 */
wm_status wm_precision_parse(const char *s, int *out, wm_error *err);
/*
 * The precision of a build without -p or recipe, for the target device (cpu|gpu|npu; NULL = cpu) as the
 * reference's per-device recipes have it: npu w8a16 (static QDQ, uint16 activations: NPUs run quantized graphs),
 * gpu fp16, cpu fp32; a GGUF source (checkpoint format "gguf") keeps its blocks (gguf) except on an npu.
 */
wm_precision wm_precision_auto(const char *format, const char *device);
/* WM_ERR_USAGE when precision p cannot be built from a source of this format (gguf from a non-GGUF one). */
wm_status wm_precision_check(int p, const char *format, wm_error *err);

typedef struct wm_recipe_flag {
    char name[48];
    int value;
} wm_recipe_flag;

/* A field of the reference's recipes that this build reads but does not act on (bookkeeping), with why. */
typedef struct wm_recipe_kept {
    char field[96];   /* JSON path: "export.dynamo", "eval.dataset.columns_mapping" */
    const char *why;  /* static text */
} wm_recipe_kept;

typedef struct wm_recipe {
    /* loader (always present); task is the recipe's name (a reference task name), served_task what builds it:
       a wm_task, or -1 when the builder serves no such task (build refuses, naming it) */
    char task[48], model_class[128], model_type[64];
    int served_task;
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
    int qmode;                /* wm_quant_mode: fp16, dynamic, static (static/qdq), w8a16 (static, 16-bit acts), rtn */
    char quant_mode[16], weight_type[16], activation_type[16], calibration_method[16];
    int64_t samples, rtn_bits, rtn_block_size, rtn_accuracy_level; /* accuracy: MatMulNBits's attribute */
    int64_t rtn_8bit_block_size, rtn_table_block_size; /* ours: blocks of the 8-bit weights and of the token table
                                                          (wm_quant_config int8_block_size, table_block_size; -1: absent) */
    int64_t rtn_8bit_percent; /* ours: mixed precision by measured sensitivity (wm_quant_config.int8_percent; needs
                                 rtn_importance; -1: absent) */
    int64_t calib_seed;       /* quant.seed: seeds the calibration samples (-1: absent, seed 1) */
    int per_channel, symmetric, fp16_keep_io_types;
    int act_symmetric;   /* quant.activation_symmetric (-1: absent); quant.weight_symmetric sets symmetric */
    int rtn_half_scales; /* ours: float32 MatMulNBits scales rounded to exact halves (-1: absent) */
    int rtn_scale_search; /* ours: each block's scale searched for the least weighted error (-1: absent) */
    int rtn_float_zero_points; /* ours: asymmetric int4 with float zero points, each block's scale and offset fitted
                                  (wm_quant_config.float_zp; -1: absent) */
    int rtn_gptq;         /* ours: GPTQ with calibration statistics from our engine (-1: absent) */
    int rtn_gptq_tied_head; /* ours: GPTQ for a tied lm_head too (wm_quant_config.gptq_tied; -1: absent) */
    int rtn_gptq_act_order; /* ours: GPTQ's rows by decreasing H diagonal, static groups (-1: absent) */
    double rtn_gptq_damp;   /* ours: GPTQ's damping, a fraction of H's mean diagonal (-1: absent, 0.01) */
    int rtn_importance;   /* ours: importance-weighted block fit, mean x^2 per MatMul input column from our engine's
                             run of calibration_text or seeded random tokens (wm_quant_config.importance; -1: absent) */
    char calibration_text[256]; /* ours: GPTQ's calibration text file ("": seeded random tokens) */
    char **fp16_op_block_list, **op_types_to_quantize, **nodes_to_exclude; /* NULL-terminated, malloc'ed */
    char **rtn_8bit_weights, **rtn_8bit_layer_weights; /* ours: weights kept at 8 bits (quant.h int8_weights) */
    /* compile */
    int has_compile;
    char provider[32], device[32];
    /* eval */
    int has_eval;
    char eval_task[48], dataset_path[256], dataset_split[32];
    char dataset_text_column[64]; /* eval.dataset.columns_mapping.input_column: the text static calibration reads */
    char dataset_config[64];      /* eval.dataset.name (kept field): the hub data set's config, hf/dataset.h */
    int64_t dataset_samples;
    /* not a JSON field: the precision the recipe asks for (from quant) */
    wm_precision precision;
    /* the reference's bookkeeping fields this recipe holds (malloc'ed), reported by config / build */
    wm_recipe_kept *kept;
    size_t n_kept;
} wm_recipe;

/*
 * Fills r with the defaults for a (see the header comment); precision
 * selects the quant section (fp32: null). ep/device name the compile
 * target ("cpu"). r owns arrays: wm_recipe_free.
 */
wm_status wm_recipe_default(const wm_arch *a, wm_precision precision, const char *ep, const char *device,
                            wm_recipe *r, wm_error *err);
/*
 * Sets r's quant section to the defaults for precision on a (fp16; int8: weight-only 8-bit RTN for encoders,
 * dynamic for decoders; int4 RTN), or none for fp32. r must have no quant lists yet (a recipe whose quant
 * section is null).
 */
void wm_recipe_default_quant(const wm_arch *a, wm_precision precision, wm_recipe *r);
/* Parses recipe JSON text (label names it in messages); strict (see header comment). */
wm_status wm_recipe_parse(const char *text, size_t n, const char *label, wm_recipe *r, wm_error *err);
wm_status wm_recipe_load(const char *path, wm_recipe *r, wm_error *err);
/* Writes r as JSON (the same shape wm_recipe_parse reads). */
void wm_recipe_json(const wm_recipe *r, wm_json *j);
void wm_recipe_free(wm_recipe *r);

/* A recipe's static square pixel_values of another size than a's image_size: a builds at that size, its
   positions interpolated (wm_arch_set_image; WM_ERR_UNSUPPORTED naming the field where a cannot). */
wm_status wm_recipe_fit_image(const wm_recipe *r, wm_arch *a, const char *label, wm_error *err);
/*
 * Checks r against a resolved architecture: loader fields agree, every
 * input the graph needs is listed once with an allowed dtype and a shape
 * consistent with the model (kv heads, head size, positions), no unknown
 * inputs or outputs. Errors name the recipe field.
 */
wm_status wm_recipe_check(const wm_recipe *r, const wm_arch *a, const char *label, wm_error *err);

/* An encoder-decoder part recipe (recipe_s2s.c), loader.model_type an encoder-decoder's: WM_S2S_PART_ENCODER (loader.task feature-extraction or
   image-feature-extraction), WM_S2S_PART_DECODER (decoder_input_ids among the inputs, text2text-generation or
   image-to-text), WM_S2S_PART_CLS (text-classification: the whole model as a sequence classifier, the head the
   arch's), 0 none. Read from the recipe alone. */
int wm_recipe_s2s_part_kind(const wm_recipe *r);
/* Checks part recipe r against the encoder-decoder a (inputs, dtypes, the static shapes the checkpoint fixes,
   outputs) and sets a->s2s_part (a classifier's the arch set); WM_ERR_UNSUPPORTED naming the field otherwise (a->s2s_part left 0). */
wm_status wm_recipe_s2s_part(const wm_recipe *r, wm_arch *a, const char *label, wm_error *err);

/*
 * The recipe's quant section as the quantizer's config (one source of truth: no second parser). c's lists
 * point into r, which must outlive c. WM_ERR_UNSUPPORTED when r has no quant section.
 */
struct wm_quant_config;
wm_status wm_recipe_quant_config(const wm_recipe *r, struct wm_quant_config *c, wm_error *err);

/*
 * The optimizer passes a recipe optim flag switches (our pass names, and the reference's capability names
 * such as gelu_fusion -> gelu, fastgelu, biasgelu). Returns how many were written to out (at most cap); 0 for a
 * flag with no pass here (*why then says what this build does instead) or an unknown name (*why NULL).
 */
size_t wm_recipe_optim_passes(const char *flag, const char **out, size_t cap, const char **why);

/*
 * The wm_task that serves a reference task name ("sentence-similarity" -> feature-extraction with mean pooling,
 * "zero-shot-classification" / "text-ranking" -> text-classification); -1 when the name is a reference task the
 * builder does not serve, -2 when no such task is known. *pooling (may be NULL) gets the pooling it implies.
 */
int wm_recipe_task_served(const char *name, wm_pooling *pooling);
/* The reference's task names that task serves (its own name first), in out[cap] (static strings); returns how
 * many. */
size_t wm_recipe_task_names_for(int task, const char **out, size_t cap);
/*
 * The precision a recipe's file name states in the reference's layout (<task>_<precision>_config[_<part>].json):
 * "fp32", "fp16", "w8a8", "w8a16", "int8", "int4", or NULL. Informational: the quant section decides.
 */
const char *wm_recipe_name_precision(const char *path);
/* The tasks the builder serves, comma-separated (for messages). */
const char *wm_recipe_served_tasks(void);

/*
 * Whether the builder can build r (model_type in the family table, task served, quant mode implemented): WM_OK,
 * or WM_ERR_UNSUPPORTED with one message naming the field: loader.model_type first, then loader.task.
 * loader.trust_remote_code never refuses by itself (custom code is refused where it is: config.json's auto_map).
 * Callers with a recipe file check this before wm_recipe_check.
 */
wm_status wm_recipe_supported(const wm_recipe *r, const char *label, wm_error *err);

/* Writes r's kept reference fields as a JSON array of {field, why} under key. */
void wm_recipe_kept_json(const wm_recipe *r, wm_json *j, const char *key);

/* The spec of input name, or NULL. */
const wm_io_spec *wm_recipe_input(const wm_recipe *r, const char *name);

#endif
