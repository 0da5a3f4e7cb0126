/*
 * recipe_s2s.c - the reference's encoder-decoder part recipes (Helsinki-NLP opus-mt, TrOCR): each part of an
 * encoder-decoder is its own recipe and its own graph (a->s2s_part, model_s2s.c):
 *
 *  - an encoder part (loader.task feature-extraction, or image-feature-extraction for an image encoder): input_ids +
 *    attention_mask [batch, seq] (or pixel_values [batch, C, image, image]) -> its one output (the reference names
 *    it encoder_hidden_states) [batch, seq, width];
 *  - a decoder part (decoder_input_ids among its inputs): decoder_input_ids [batch, 1], encoder_hidden_states
 *    [batch, enc_seq, width], the encoder's attention_mask [batch, enc_seq] (text encoders), decoder_attention_mask
 *    [batch, T], cache_position [1], past_N_key / past_N_value [batch, heads, T, head_dim] for every decoder layer
 *    -> logits, present_N_key / present_N_value: a static self-attention cache of T slots;
 *  - a sequence classifier (loader.task text-classification, BART-MNLI's recipes): input_ids + attention_mask
 *    [batch, seq] -> logits [batch, labels], the whole model in one graph (whether the family has the head is the
 *    arch's to say: arch_s2s.c's head table).
 *
 * The checks name the field and what the checkpoint wants; the shapes the reference fixes (heads, head size,
 * width, layers) must be the checkpoint's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder/arch_impl.h"
#include "builder/model_impl.h"
#include "builder/recipe.h"
#include "core/error.h"
#include "onnx/dtype.h"

int wm_recipe_s2s_part_kind(const wm_recipe *r) {
    if (!r->model_type[0] || !wm_s2s_find(r->model_type)) return 0;
    if (wm_recipe_input(r, "decoder_input_ids"))
        return r->served_task == WM_TASK_TEXT2TEXT_GENERATION || r->served_task == WM_TASK_IMAGE_TO_TEXT
                   ? WM_S2S_PART_DECODER
                   : 0;
    if (r->served_task == WM_TASK_FEATURE_EXTRACTION || r->served_task == WM_TASK_IMAGE_FEATURE_EXTRACTION)
        return WM_S2S_PART_ENCODER;
    if (r->served_task == WM_TASK_TEXT_CLASSIFICATION) return WM_S2S_PART_CLS;
    return 0;
}

static void dims_str(const wm_io_spec *s, char *buf, size_t n) {
    size_t u = (size_t)snprintf(buf, n, "[");
    for (size_t i = 0; i < s->rank && u < n; i++)
        u += s->dims[i].v >= 0 ? (size_t)snprintf(buf + u, n - u, "%s%lld", i ? ", " : "", (long long)s->dims[i].v)
                               : (size_t)snprintf(buf + u, n - u, "%s%s", i ? ", " : "", s->dims[i].name);
    if (u < n) snprintf(buf + u, n - u, "]");
}

/* Input name of r: dtype among dts (float32 only when float), rank, and the static dims want (-1: any; a symbolic
   dim only where want is -1). NULL want: no dims checked. */
static wm_status check_in(const wm_recipe *r, const char *label, const char *name, int is_float, size_t rank,
                          const int64_t *want, const char *why, wm_error *err) {
    const wm_io_spec *s = wm_recipe_input(r, name);
    if (!s)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'export.input_tensors': no '%s' (the encoder-decoder part "
                      "needs it)", label, name);
    int ok = is_float ? s->dtype == WM_DT_FLOAT : s->dtype == WM_DT_INT32 || s->dtype == WM_DT_INT64;
    if (!ok)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'export.input_tensors[%s].dtype': %s, expected %s", label,
                      name, wm_dtype_name(s->dtype), is_float ? "float32" : "int32 or int64");
    char got[160], exp[160] = "[";
    for (size_t i = 0, u = 1; want && i < rank && u < sizeof exp; i++)
        u += want[i] < 0 ? (size_t)snprintf(exp + u, sizeof exp - u, "%s*", i ? ", " : "")
                         : (size_t)snprintf(exp + u, sizeof exp - u, "%s%lld", i ? ", " : "", (long long)want[i]);
    if (want) strncat(exp, "]", sizeof exp - strlen(exp) - 1);
    dims_str(s, got, sizeof got);
    if (s->rank != rank)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'export.input_tensors[%s].shape': %s has rank %zu, expected "
                      "%zu", label, name, got, s->rank, rank);
    for (size_t i = 0; want && i < rank; i++)
        if (want[i] >= 0 && s->dims[i].v != want[i])
            return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'export.input_tensors[%s].shape': %s, expected %s (%s)",
                          label, name, got, exp, why);
    return WM_OK;
}

/* The recipe's outputs (when it lists them) are exactly the graph's. */
static wm_status check_outputs(const wm_recipe *r, const wm_arch *a, const char *label, wm_error *err) {
    if (!r->n_outputs) return WM_OK;
    if (a->s2s_part == WM_S2S_PART_CLS && (r->n_outputs != 1 || strcmp(r->outputs[0], "logits")))
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'export.output_tensors': the sequence classifier has one "
                      "output, logits", label);
    if (a->s2s_part == WM_S2S_PART_ENCODER && r->n_outputs != 1)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'export.output_tensors': %zu names, the encoder part has "
                      "one output (its last hidden state)", label, r->n_outputs);
    size_t cap = 2 + 2 * (size_t)a->dec_L;
    wm_io_spec *want = calloc(cap, sizeof *want);
    if (!want) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    size_t n = wm_s2s_part_outputs(a, r, want, cap);
    for (size_t i = 0; i < n && i < cap; i++) {
        size_t k = 0;
        while (k < r->n_outputs && strcmp(r->outputs[k], want[i].name)) k++;
        if (k == r->n_outputs) {
            wm_status s = wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'export.output_tensors': no '%s' (the decoder "
                                 "part returns logits and present_N_key / present_N_value for its %lld layers)", label,
                                 want[i].name, (long long)a->dec_L);
            free(want);
            return s;
        }
    }
    free(want);
    if (r->n_outputs != n)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'export.output_tensors': %zu names, the decoder part "
                      "returns %zu (logits and present_N_key / present_N_value for its %lld layers)", label,
                      r->n_outputs, n, (long long)a->dec_L);
    return WM_OK;
}

/* The text inputs of an encoder (part or classifier): input_ids and attention_mask of one shape, no others, at most
   max_position_embeddings tokens. */
static wm_status check_text_in(const wm_recipe *r, const wm_arch *a, const char *label, const char *what,
                               wm_error *err) {
    wm_status s;
    const wm_io_spec *ids = wm_recipe_input(r, "input_ids");
    int64_t d2[2] = {-1, -1};
    if ((s = check_in(r, label, "input_ids", 0, 2, d2, "", err))) return s;
    d2[0] = ids->dims[0].v, d2[1] = ids->dims[1].v;
    if ((s = check_in(r, label, "attention_mask", 0, 2, d2, "input_ids' shape", err))) return s;
    if (r->n_inputs != 2)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'export.input_tensors': %zu inputs, %s reads input_ids and "
                      "attention_mask", label, r->n_inputs, what);
    if (a->abs_pos && ids->dims[1].v > a->P)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'export.input_tensors[input_ids].shape': %lld tokens, "
                      "more than the config's max_position_embeddings %lld", label, (long long)ids->dims[1].v,
                      (long long)a->P);
    return WM_OK;
}

static wm_status check_encoder(const wm_recipe *r, const wm_arch *a, const char *label, wm_error *err) {
    wm_status s;
    if (a->mel_stem)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'loader.task': '%s': an encoder part of a speech "
                      "encoder-decoder is not modeled (build without -c)", label, r->task);
    if (a->vis_enc) {
        const wm_arch *t = a->tower[1];
        if (r->served_task != WM_TASK_IMAGE_FEATURE_EXTRACTION)
            return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'loader.task': '%s': the encoder of model_type '%s' "
                          "reads images (image-feature-extraction)", label, r->task, a->model_type);
        int64_t px[4] = {-1, t->C, t->image, t->image};
        if ((s = check_in(r, label, "pixel_values", 1, 4, px, "the config's num_channels and image_size", err)))
            return s;
        if (r->n_inputs != 1)
            return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'export.input_tensors': %zu inputs, the image encoder "
                          "part reads pixel_values alone", label, r->n_inputs);
    } else {
        if (r->served_task != WM_TASK_FEATURE_EXTRACTION)
            return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'loader.task': '%s': the encoder of model_type '%s' "
                          "reads text (feature-extraction)", label, r->task, a->model_type);
        if ((s = check_text_in(r, a, label, "the encoder part", err))) return s;
    }
    return check_outputs(r, a, label, err);
}

/* A sequence-classifier recipe: the arch resolved the head (task text-classification), the encoder's text inputs,
   logits out; loader.model_class the auto class or the checkpoint's inference class. */
static wm_status check_cls(const wm_recipe *r, const wm_arch *a, const char *label, wm_error *err) {
    if (a->task != WM_TASK_TEXT_CLASSIFICATION || a->mel_stem || a->vis_enc)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'loader.task': '%s': model_type '%s' has no "
                      "sequence-classification head here", label, r->task, a->model_type);
    if (r->model_class[0] && strcmp(r->model_class, "AutoModelForSequenceClassification") &&
        strcmp(r->model_class, a->inference_class))
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'loader.model_class': '%s', expected "
                      "AutoModelForSequenceClassification or %s", label, r->model_class, a->inference_class);
    wm_status s = check_text_in(r, a, label, "the sequence classifier", err);
    return s ? s : check_outputs(r, a, label, err);
}

static wm_status check_decoder(const wm_recipe *r, const wm_arch *a, const char *label, wm_error *err) {
    wm_status s;
    const wm_io_spec *dm = wm_recipe_input(r, "decoder_attention_mask"), *eh = wm_recipe_input(r, "encoder_hidden_states");
    int64_t ids[2] = {-1, 1}, any2[2] = {-1, -1}, one[1] = {1}, ehw[3] = {-1, -1, a->enc_H ? a->enc_H : a->H};
    if ((s = check_in(r, label, "decoder_input_ids", 0, 2, ids, "one token a step", err))) return s;
    if ((s = check_in(r, label, "decoder_attention_mask", 0, 2, any2, "", err))) return s;
    if ((s = check_in(r, label, "cache_position", 0, 1, one, "the step's position", err))) return s;
    if ((s = check_in(r, label, "encoder_hidden_states", 1, 3, ehw, "the encoder's width", err))) return s;
    int64_t T = dm->dims[1].v, B = wm_recipe_input(r, "decoder_input_ids")->dims[0].v;
    if (T <= 0)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'export.input_tensors[decoder_attention_mask].shape': the "
                      "cache length (dim 1) must be static", label);
    if (a->abs_pos && T > a->P)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'export.input_tensors[decoder_attention_mask].shape': %lld "
                      "cache slots, more than the config's max_position_embeddings %lld", label, (long long)T,
                      (long long)a->P);
    size_t n_want = 4 + 2 * (size_t)a->dec_L;
    if (wm_recipe_input(r, "attention_mask")) {
        int64_t am[2] = {-1, eh->dims[1].v};
        if (a->vis_enc || a->mel_stem)
            return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'export.input_tensors[attention_mask]': the encoder of "
                          "model_type '%s' has no padding mask", label, a->model_type);
        if ((s = check_in(r, label, "attention_mask", 0, 2, am, "encoder_hidden_states' length", err))) return s;
        n_want++;
    }
    for (int64_t i = 0; i < a->dec_L; i++)
        for (int k = 0; k < 2; k++) {
            char nm[96];
            snprintf(nm, sizeof nm, wm_s2s_part_kv(0, k), (long long)i);
            int64_t kv[4] = {B, a->dec_nh, T, a->dec_hd};
            if ((s = check_in(r, label, nm, 1, 4, kv, "batch, the decoder's heads, the cache slots, its head size",
                              err)))
                return s;
        }
    if (r->n_inputs != n_want)
        for (size_t i = 0; i < r->n_inputs; i++) {
            int known = !strcmp(r->inputs[i].name, "decoder_input_ids") || !strcmp(r->inputs[i].name, "cache_position") ||
                        !strcmp(r->inputs[i].name, "decoder_attention_mask") ||
                        !strcmp(r->inputs[i].name, "encoder_hidden_states") || !strcmp(r->inputs[i].name, "attention_mask");
            for (int64_t l = 0; l < a->dec_L && !known; l++)
                for (int k = 0; k < 2 && !known; k++) {
                    char nm[96];
                    snprintf(nm, sizeof nm, wm_s2s_part_kv(0, k), (long long)l);
                    known = !strcmp(r->inputs[i].name, nm);
                }
            if (!known)
                return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'export.input_tensors[%s]': not an input of the "
                              "decoder part (the checkpoint's decoder has %lld layers: past_0 .. past_%lld)", label,
                              r->inputs[i].name, (long long)a->dec_L, (long long)a->dec_L - 1);
        }
    return check_outputs(r, a, label, err);
}

wm_status wm_recipe_s2s_part(const wm_recipe *r, wm_arch *a, const char *label, wm_error *err) {
    int part = wm_recipe_s2s_part_kind(r);
    if (!part)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'loader.task': task '%s' is not an encoder-decoder part "
                      "(an encoder part is feature-extraction or image-feature-extraction; a decoder part, "
                      "text2text-generation with decoder_input_ids; a sequence classifier, text-classification)", label,
                      r->task);
    if (part == WM_S2S_PART_CLS) return check_cls(r, a, label, err); /* a->s2s_part: the arch's */
    a->s2s_part = part;
    wm_status s = part == WM_S2S_PART_ENCODER ? check_encoder(r, a, label, err) : check_decoder(r, a, label, err);
    if (s) a->s2s_part = 0;
    return s;
}
