/*
 * export.h - the export stage: a resolved architecture + recipe -> a plain
 * float32 standard-ONNX graph built straight from the weights (no tracing),
 * written as DIR/model.onnx (+ DIR/model.onnx.data when the model is at or
 * above the external-data threshold, decided up front from the parameter
 * bytes, and then streamed tensor by tensor).
 *
 * Decoder IO follows ONNX Runtime GenAI / Optimum: input_ids,
 * attention_mask [batch, total_sequence_length], position_ids,
 * past_key_values.N.key / .value [batch, kv_heads, past_len, head_dim] ->
 * logits, present.N.key / .value; one graph serves prefill and decode.
 * Encoder outputs by task: logits, last_hidden_state (+ sentence_embedding
 * with pooling), start_logits / end_logits.
 */
#ifndef WM_BUILDER_EXPORT_H
#define WM_BUILDER_EXPORT_H

#include "builder/arch.h"
#include "core/sha256.h"
#include "builder/recipe.h"
#include "builder/weights.h"
#include "opt/quant.h"

#define WM_EXPORT_MAX_OPS 96

typedef struct wm_export_opts {
    int random;                  /* --random-weights: values from seed, shapes from the config */
    uint64_t seed;
    uint64_t external_threshold; /* bytes; 0: default 100 MiB */
    int progress;                /* per-layer progress on stderr */
    int release_source;          /* st maps files: drop each tensor's pages after use (see weights.h) */
} wm_export_opts;

typedef struct wm_op_count {
    char op[40];
    uint64_t n;
} wm_op_count;

typedef struct wm_export_result {
    uint64_t n_nodes, n_initializers, param_bytes, n_params;
    int external;
    char model_sha[65], data_sha[65];
    uint64_t model_bytes, data_bytes;
    wm_sha256 data_state; /* the data file's digest state after its data_bytes bytes (data_sha not yet final) */
    wm_op_count ops[WM_EXPORT_MAX_OPS];
    size_t n_ops;
    wm_wsrc_rec *srcs;   /* the initializers made from checkpoint tensors (owned: wm_export_result_free) */
    size_t n_srcs;
} wm_export_result;

/* Frees what a result owns (its records). */
void wm_export_result_free(wm_export_result *r);

/*
 * The quant stage's carry table (-p gguf) for ex's initializers from st (a GGUF checkpoint) built for a: one entry
 * per 2-D initializer made from a GGUF tensor - its blocks as they are where onnxruntime runs that form, requantized
 * to 8 bits where it does not (8-bit float zero points), float where the tensor is float - and one per MoE fc
 * stacked from GGUF expert tensors (QMoE takes their blocks where it can: opt/quant_moe_carry.c). *out and *ctx
 * (the rows' contexts) are malloc'ed, freed by the caller after the table's last use; the entries point into ex,
 * a and st, which must outlive them.
 */
wm_status wm_export_carry_table(const wm_export_result *ex, const wm_arch *a, const wm_st_file *st,
                                wm_quant_carry **out, size_t *n_out, void **ctx, wm_error *err);

/*
 * Builds and writes dir/model.onnx (dir must exist); an encoder-decoder only as a part (a->s2s_part). st: the checkpoint's
 * weights (NULL with o->random). On failure nothing named model.onnx or
 * model.onnx.data is left in dir.
 */
wm_status wm_export_model(const wm_arch *a, const wm_recipe *r, const wm_st_file *st, const wm_export_opts *o,
                          const char *dir, wm_export_result *res, wm_error *err);

/* The three files of an encoder-decoder build (Optimum's seq2seq layout). */
enum { WM_S2S_ENCODER, WM_S2S_DECODER, WM_S2S_DECODER_PAST, WM_S2S_PARTS };
/* The reference's part recipes (a->s2s_part): one graph, model.onnx, with the recipe's inputs. PART_ENCODER: the
   encoder alone (input_ids + attention_mask, or pixel_values -> the recipe's one output); PART_DECODER: one decoder
   step over a static self-attention cache (model_s2s.c). PART_CLS: a sequence classifier (task text-classification:
   input_ids + attention_mask -> logits [batch, labels]), the encoder and the whole-sequence decoder in one graph,
   the decoder's state at each row's last eos_token_id through the family's classification head. */
enum { WM_S2S_PART_ENCODER = WM_S2S_PARTS + 1, WM_S2S_PART_DECODER, WM_S2S_PART_CLS };
/* The file name of part ("encoder_model.onnx", ...); NULL out of range (model_s2s.c). */
const char *wm_s2s_part_file(int part);

/*
 * An encoder-decoder (a->graph WM_GRAPH_S2S): dir/encoder_model.onnx, decoder_model.onnx and
 * decoder_with_past_model.onnx (Optimum's seq2seq layout, model_s2s.c), each with its own .data when large.
 * res: the sums over the three (hashes left empty: the build hashes each file). On failure none of them is left.
 */
wm_status wm_export_s2s(const wm_arch *a, const wm_recipe *r, const wm_st_file *st, const wm_export_opts *o,
                        const char *dir, wm_export_result *res, wm_error *err);

/* Graph output specs of a for recipe r (dims follow the recipe's inputs); returns the count. */
size_t wm_export_output_specs(const wm_arch *a, const wm_recipe *r, wm_io_spec *out, size_t cap);

/* Graph output names of a (for recipes): fills names (cap entries) and returns the count. */
size_t wm_export_output_names(const wm_arch *a, const wm_recipe *r, char (*names)[96], size_t cap);

#endif
