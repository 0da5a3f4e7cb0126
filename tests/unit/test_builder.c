/*
 * Unit tests of src/builder: architecture resolution from the tables (config
 * alone and with safetensors), RoPE frequencies, SHA-256 (FIPS 180-4 test
 * vectors), half-precision conversion and transposition in the weight sink,
 * recipes (defaults, round trip, strictness) and an export with random
 * weights reloaded by our ONNX reader (inline and external data).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/half.h"
#include "builder/arch.h"
#include "builder/export.h"
#include "builder/recipe.h"
#include "core/sha256.h"
#include "builder/weights.h"
#include "core/json.h"
#include "hf/config.h"
#include "onnx/dtype.h"
#include "onnx/graph.h"
#include "unit_tmpdir.h"

static wm_hf_checkpoint ck;

static wm_status resolve(const char *cfg, const wm_st_file *st, int task, wm_arch *a, wm_error *e) {
    memset(&ck, 0, sizeof ck);
    memset(a, 0, sizeof *a);
    memset(e, 0, sizeof *e);
    wm_status s = wm_hf_config_parse(cfg, strlen(cfg), "config.json", &ck.config, e);
    if (s) return s;
    return wm_arch_resolve(&ck, st, task, a, e);
}

static void done(wm_arch *a) {
    wm_arch_free(a);
    wm_hf_config_free(&ck.config);
}

static int has_feature(const wm_arch *a, const char *needle) {
    wm_json j;
    wm_json_init(&j);
    wm_arch_features_json(a, &j, NULL);
    int found = strstr(wm_json_text(&j), needle) != NULL;
    wm_json_free(&j);
    return found;
}

/* Gemma 3 text as google/gemma-3-270m's config (transformers 4 spelling: no layer_types, bases at the top) */
#define GEMMA3 "{\"model_type\": \"gemma3_text\", \"hidden_size\": 64, \"intermediate_size\": 128,"         \
               " \"num_hidden_layers\": 8, \"num_attention_heads\": 4, \"num_key_value_heads\": 1, \"head_dim\": 32,"  \
               " \"vocab_size\": 100, \"max_position_embeddings\": 256, \"hidden_activation\": \"gelu_pytorch_tanh\","   \
               " \"rope_theta\": 1000000.0, \"sliding_window\": 16"

#define QWEN2 "{\"model_type\": \"qwen2\", \"architectures\": [\"Qwen2ForCausalLM\"], \"hidden_size\": 64," \
              " \"intermediate_size\": 128, \"num_hidden_layers\": 3, \"num_attention_heads\": 4,"          \
              " \"num_key_value_heads\": 2, \"vocab_size\": 100, \"max_position_embeddings\": 256,"       \
              " \"rope_theta\": 1000000.0, \"tie_word_embeddings\": true, \"use_sliding_window\": false,"  \
              " \"sliding_window\": 32768"

static void test_families_from_config(void **state) {
    (void)state;
    wm_arch a;
    wm_error e;
    assert_int_equal(resolve(QWEN2 "}", NULL, -1, &a, &e), WM_OK);
    assert_int_equal(a.kind, WM_DECODER);
    assert_int_equal(a.task, WM_TASK_TEXT_GENERATION);
    assert_string_equal(a.scheme, "llama");
    assert_string_equal(a.inference_class, "Qwen2ForCausalLM");
    assert_true(a.qkv_bias && !a.o_bias && !a.mlp_bias && a.tied && a.gated && !a.qk_norm);
    assert_int_equal(a.norm, WM_NORM_RMS);
    assert_int_equal(a.window, 0);
    assert_string_equal(wm_arch_mod(&a, 2, WM_M_L_Q)->w, "model.layers.2.self_attn.q_proj.weight");
    assert_false(wm_arch_mod(&a, -1, WM_M_G_LM_HEAD)->present); /* tied */
    /* params: embed + 3 x (norms, q/k/v/o with q/k/v bias, gate/up/down) + final norm */
    uint64_t layer = 64 + 64 + (64 * 64 + 64) + 2 * (64 * 32 + 32) + 64 * 64 + 3 * 64 * 128;
    assert_int_equal(a.n_params, 100 * 64 + 3 * layer + 64);
    assert_true(has_feature(&a, "grouped KV heads (4 query heads, 2 kv heads)"));
    done(&a);

    /* qwen3: per-head q/k norm, no bias, head_dim from the config */
    assert_int_equal(resolve("{\"model_type\": \"qwen3\", \"hidden_size\": 64, \"intermediate_size\": 96,"
                             " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"num_key_value_heads\": 4,"
                             " \"head_dim\": 32, \"vocab_size\": 50}", NULL, -1, &a, &e), WM_OK);
    assert_true(a.qk_norm && !a.qkv_bias && !a.tied);
    assert_int_equal(a.hd, 32);
    assert_int_equal(wm_arch_mod(&a, 0, WM_M_L_Q)->out, 128);
    assert_int_equal(wm_arch_mod(&a, 0, WM_M_L_Q_NORM)->in, 32);
    assert_true(wm_arch_mod(&a, -1, WM_M_G_LM_HEAD)->present);
    done(&a);

    /* gpt2: Conv1D, fused qkv, learned positions, intermediate 4 x hidden */
    assert_int_equal(resolve("{\"model_type\": \"gpt2\", \"n_embd\": 32, \"n_layer\": 2, \"n_head\": 4,"
                             " \"vocab_size\": 50, \"n_positions\": 64}", NULL, -1, &a, &e), WM_OK);
    assert_true(a.conv1d && a.fused_qkv && a.tied && !a.gated);
    assert_int_equal(a.pos, WM_POS_LEARNED);
    assert_int_equal(a.I, 128);
    assert_int_equal(a.act, WM_ACT_GELU_TANH);
    assert_string_equal(wm_arch_mod(&a, 1, WM_M_L_QKV)->w, "transformer.h.1.attn.c_attn.weight");
    assert_string_equal(a.inference_class, "GPT2LMHeadModel");
    done(&a);

    /* xlm-roberta classification: padding-aware positions, dense+tanh head, one label */
    assert_int_equal(resolve("{\"model_type\": \"xlm-roberta\", \"architectures\": [\"XLMRobertaForSequenceClassification\"],"
                             " \"hidden_size\": 32, \"intermediate_size\": 64, \"num_hidden_layers\": 2,"
                             " \"num_attention_heads\": 4, \"vocab_size\": 50, \"max_position_embeddings\": 66,"
                             " \"type_vocab_size\": 1, \"pad_token_id\": 1, \"id2label\": {\"0\": \"score\"}}",
                             NULL, -1, &a, &e), WM_OK);
    assert_int_equal(a.kind, WM_ENCODER);
    assert_int_equal(a.posid, WM_POSID_PADDING);
    assert_true(a.post_norm);
    assert_int_equal(a.labels, 1);
    assert_int_equal(a.n_head_mods, 2);
    assert_int_equal(a.head_act, WM_ACT_TANH);
    assert_string_equal(wm_arch_mod(&a, -1, WM_M_H_1)->w, "classifier.out_proj.weight");
    done(&a);
    assert_int_equal(resolve("{\"model_type\": \"xlm-roberta\", \"architectures\": [\"XLMRobertaForSequenceClassification\"],"
                             " \"hidden_size\": 32, \"num_hidden_layers\": 2, \"intermediate_size\": 64,"
                             " \"num_attention_heads\": 4, \"vocab_size\": 50, \"max_position_embeddings\": 66}",
                             NULL, WM_TASK_FEATURE_EXTRACTION, &a, &e), WM_OK);
    assert_string_equal(a.inference_class, "XLMRobertaModel");
    assert_int_equal(a.n_head_mods, 0);
    done(&a);
}

static void test_unsupported(void **state) {
    (void)state;
    struct {
        const char *cfg;
        int task;
        wm_status want;
        const char *needle;
    } cases[] = {
        {"{\"model_type\": \"mamba\", \"hidden_size\": 8}", -1, WM_ERR_UNSUPPORTED, "'mamba' is not supported"},
        {"{\"hidden_size\": 8}", -1, WM_ERR_INPUT, "'model_type': missing"},
        {"{\"model_type\": \"gemma3\"}", -1, WM_ERR_UNSUPPORTED, "gemma3_text"},
        {GEMMA3 "}", -1, WM_OK, ""},
        {GEMMA3 ", \"use_bidirectional_attention\": true}", -1, WM_ERR_UNSUPPORTED, "use_bidirectional_attention"},
        {GEMMA3 ", \"final_logit_softcapping\": 0}", -1, WM_ERR_INPUT, "'final_logit_softcapping': 0 is out of range"},
        {GEMMA3 ", \"query_pre_attn_scalar\": -4}", -1, WM_ERR_INPUT, "'query_pre_attn_scalar'"},
        {GEMMA3 ", \"sliding_window_pattern\": 0}", -1, WM_ERR_INPUT, "'sliding_window_pattern'"},
        {GEMMA3 ", \"rope_local_base_freq\": 0.5}", -1, WM_ERR_INPUT, "'rope_local_base_freq': 0.5 must be > 1"},
        {GEMMA3 ", \"rope_parameters\": {\"sliding_attention\": {\"rope_type\": \"dynamic\", \"factor\": 2}}}", -1,
         WM_ERR_UNSUPPORTED, "'rope_parameters.sliding_attention.rope_type': 'dynamic'"},
        {GEMMA3 ", \"rope_parameters\": {\"full_attention\": {}, \"rope_theta\": 5}}", -1, WM_ERR_INPUT,
         "'rope_parameters.rope_theta': unexpected"},
        {GEMMA3 ", \"rope_parameters\": {\"full_attention\": 7}}", -1, WM_ERR_INPUT, "expected an object"},
        {QWEN2 ", \"rope_parameters\": {\"full_attention\": {\"rope_theta\": 5.0}}}", -1, WM_ERR_UNSUPPORTED,
         "RoPE per layer type"},
        {"{\"model_type\": \"gemma\", \"hidden_size\": 32, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
         " \"intermediate_size\": 8, \"vocab_size\": 9, \"attn_logit_softcapping\": 30}", -1, WM_ERR_UNSUPPORTED,
         "attn_logit_softcapping"},
        {QWEN2 "}", WM_TASK_TEXT_CLASSIFICATION, WM_ERR_UNSUPPORTED, "text-classification"},
        {QWEN2 ", \"hidden_act\": \"mish\"}", -1, WM_ERR_UNSUPPORTED, "'hidden_act': activation 'mish'"},
        {QWEN2 ", \"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 2}}", -1, WM_ERR_UNSUPPORTED, "dynamic"},
        {QWEN2 ", \"rope_scaling\": {\"type\": \"linear\"}}", -1, WM_ERR_INPUT, "factor"},
        {QWEN2 ", \"attn_logit_softcapping\": 50.0}", -1, WM_ERR_UNSUPPORTED, "attn_logit_softcapping"},
        {"{\"model_type\": \"llama\", \"hidden_size\": 32, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
         " \"num_key_value_heads\": 3, \"intermediate_size\": 8, \"vocab_size\": 9}", -1, WM_ERR_INPUT,
         "does not divide"},
        {"{\"model_type\": \"bert\", \"hidden_size\": 32, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
         " \"intermediate_size\": 8, \"vocab_size\": 9, \"max_position_embeddings\": 8,"
         " \"position_embedding_type\": \"relative_key\"}", -1, WM_ERR_UNSUPPORTED, "position_embedding_type"},
        {"{\"model_type\": \"bert\", \"hidden_size\": 32, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
         " \"intermediate_size\": 8, \"vocab_size\": 9}", -1, WM_ERR_INPUT, "max_position_embeddings"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wm_arch a;
        wm_error e;
        wm_status s = resolve(cases[i].cfg, NULL, cases[i].task, &a, &e);
        if (s != cases[i].want || !strstr(e.msg, cases[i].needle)) {
            print_error("case %zu: status %d, message '%s' (want %d, '%s')\n", i, s, e.msg, cases[i].want,
                        cases[i].needle);
            fail();
        }
        done(&a);
    }
}

static void test_rope_frequencies(void **state) {
    (void)state;
    wm_arch a;
    wm_error e;
    assert_int_equal(resolve(QWEN2 "}", NULL, -1, &a, &e), WM_OK);
    assert_int_equal(a.rope.rot_dim, 16);
    for (int i = 0; i < 8; i++) {
        double want = 1.0 / pow(1e6, 2.0 * i / 16.0);
        assert_true(fabs(a.rope.inv_freq[i] - want) <= 1e-6 * want);
    }
    done(&a);
    /* linear scaling divides, partial rotary halves the rotated dims */
    assert_int_equal(resolve(QWEN2 ", \"rope_scaling\": {\"type\": \"linear\", \"factor\": 4.0},"
                                    " \"partial_rotary_factor\": 0.5}", NULL, -1, &a, &e), WM_OK);
    assert_int_equal(a.rope.rot_dim, 8);
    assert_true(fabs(a.rope.inv_freq[1] - 0.25 / pow(1e6, 2.0 / 8.0)) < 1e-9);
    done(&a);
    /* longrope keeps both sets and the switch point */
    assert_int_equal(resolve(QWEN2 ", \"rope_scaling\": {\"type\": \"longrope\", \"short_factor\": [1,1,1,1,1,1,1,1],"
                                    " \"long_factor\": [2,2,2,2,2,2,2,2]}, \"original_max_position_embeddings\": 64}",
                             NULL, -1, &a, &e), WM_OK);
    assert_non_null(a.rope.inv_freq_long);
    assert_true(fabs(a.rope.inv_freq_long[3] * 2 - a.rope.inv_freq[3]) < 1e-9);
    assert_int_equal(a.rope.orig_max, 64);
    assert_true(fabs(a.rope.scale - sqrt(1 + log(4.0) / log(64.0))) < 1e-9);
    done(&a);
    assert_int_equal(resolve(QWEN2 ", \"rope_scaling\": {\"type\": \"longrope\", \"short_factor\": [1],"
                                    " \"long_factor\": [2]}, \"original_max_position_embeddings\": 64}",
                             NULL, -1, &a, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "short_factor"));
    done(&a);
}

/* Relative position buckets as transformers' MPNetEncoder.relative_position_bucket and DeBERTa's
   make_log_bucket_position give them (values printed by transformers 5 for these offsets), and an MPNet config's
   table size. */
static void test_relative_position_buckets(void **state) {
    (void)state;
    static const int64_t rel[] = {0, 1, -1, 7, -7, 8, -8, 11, -11, 15, -15, 16, -16, 17, -17, 31,
                                  -31, 32, -32, 63, -63, 64, -64, 127, -127, 128, -128, 129, -129, 1000, -1000};
    static const int64_t b32[] = {0, 17, 1, 23, 7, 24, 8, 24, 8, 25, 9, 26, 10, 26, 10, 27,
                                  11, 28, 12, 29, 13, 30, 14, 31, 15, 31, 15, 31, 15, 31, 15};
    static const int64_t b64[] = {0, 33, 1, 39, 7, 40, 8, 43, 11, 47, 15, 48, 16, 48, 16, 51,
                                  19, 52, 20, 55, 23, 56, 24, 59, 27, 60, 28, 60, 28, 63, 31};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        assert_int_equal(wm_rel_bucket(rel[i], 32, 128), b32[i]);
        assert_int_equal(wm_rel_bucket(rel[i], 64, 256), b64[i]);
    }
    /* T5's decoder (bidirectional=False; values printed by transformers 5's T5Attention._relative_position_bucket):
       keys after the query share bucket 0, exact below buckets / 2, log-spaced, the last bucket past max_distance */
    static const int64_t crel[] = {5, 1, 0, -1, -3, -4, -7, -8, -9, -11, -12, -19, -20, -40, -127, -128, -1000};
    static const int64_t c32[] = {0, 0, 0, 1, 3, 4, 7, 8, 9, 11, 12, 17, 17, 23, 31, 31, 31};
    static const int64_t c8[] = {0, 0, 0, 1, 3, 4, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7};
    static const int64_t c16[] = {0, 0, 0, 1, 3, 4, 7, 8, 9, 10, 11, 15, 15, 15, 15, 15, 15};
    for (size_t i = 0; i < sizeof crel / sizeof crel[0]; i++) {
        assert_int_equal(wm_rel_bucket_causal(crel[i], 32, 128), c32[i]);
        assert_int_equal(wm_rel_bucket_causal(crel[i], 8, 12), c8[i]);
        assert_int_equal(wm_rel_bucket_causal(crel[i], 16, 20), c16[i]);
    }
    /* DeBERTa's log buckets (transformers' make_log_bucket_position: 256 up to 512 as v3-base, 8 up to 64) */
    static const int64_t lrel[] = {0, 1, -1, 127, -127, 128, -128, 129, -129, 200, -200, 300, -300, 511, -511, 512,
                                   -512, 1000, -1000};
    static const int64_t l256[] = {0, 1, -1, 127, -127, 128, -128, 129, -129, 169, -169, 207, -207, 255, -255, 256,
                                   -256, 317, -317};
    static const int64_t l8[] = {0, 1, -1, 8, -8, 8, -8, 8, -8, 9, -9, 9, -9, 10, -10, 10, -10, 11, -11};
    for (size_t i = 0; i < sizeof lrel / sizeof lrel[0]; i++) {
        assert_int_equal(wm_log_bucket(lrel[i], 256, 512), l256[i]);
        assert_int_equal(wm_log_bucket(lrel[i], 8, 64), l8[i]);
        assert_int_equal(wm_log_bucket(lrel[i], 0, 64), lrel[i]); /* no buckets: the distance itself */
    }
    wm_arch a;
    wm_error e;
#define MPNET "{\"model_type\": \"mpnet\", \"hidden_size\": 32, \"intermediate_size\": 64, \"num_hidden_layers\": 2," \
              " \"num_attention_heads\": 4, \"vocab_size\": 96, \"max_position_embeddings\": 40, \"pad_token_id\": 0"
    assert_int_equal(resolve(MPNET "}", NULL, -1, &a, &e), WM_OK);
    assert_int_equal(a.rel_buckets, 32);
    assert_int_equal(a.rel_rows, 32);
    assert_int_equal(a.pad_id, 1); /* MPNet's code pads positions with 1 whatever pad_token_id says */
    assert_int_equal(wm_arch_mod(&a, -1, WM_M_G_REL_BIAS)->out, 32);
    assert_int_equal(wm_arch_mod(&a, -1, WM_M_G_REL_BIAS)->in, 4);
    assert_true(has_feature(&a, "relative position bias (32 buckets, max distance 128"));
    done(&a);
    assert_int_equal(resolve(MPNET ", \"relative_attention_num_buckets\": 48}", NULL, -1, &a, &e), WM_OK);
    assert_int_equal(a.rel_rows, 48);
    done(&a);
    assert_int_equal(resolve(MPNET ", \"relative_attention_num_buckets\": 31}", NULL, -1, &a, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "field 'relative_attention_num_buckets': 31 rows, fewer than the 32 buckets"));
    done(&a);
    assert_int_equal(resolve(MPNET ", \"relative_attention_num_buckets\": -3}", NULL, -1, &a, &e), WM_ERR_INPUT);
    done(&a);
#undef MPNET
    /* other encoders have no bias */
    assert_int_equal(resolve("{\"model_type\": \"bert\", \"hidden_size\": 32, \"intermediate_size\": 64,"
                             " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"vocab_size\": 96,"
                             " \"max_position_embeddings\": 40}", NULL, -1, &a, &e), WM_OK);
    assert_int_equal(a.rel_buckets, 0);
    assert_false(wm_arch_mod(&a, -1, WM_M_G_REL_BIAS)->present);
    int tasks[WM_TASK_COUNT];
    assert_int_equal(wm_arch_tasks(&a, tasks), 5); /* the text tasks only (not the image ones) */
    for (int i = 0; i < 5; i++) assert_true(tasks[i] < WM_TASK_IMAGE_CLASSIFICATION);
    done(&a);
}

/* The encoder-decoder tables: T5's row (d_kv * heads != d_model, relative buckets per stack, RMS norms without
   bias, unscaled scores, gated-gelu = gelu_new, the tied head's d_model^-1/2) and the inference class a column of
   the row (MarianMTModel without a model-type branch). */
static void test_seq2seq_families(void **state) {
    (void)state;
    wm_arch a;
    wm_error e;
#define T5 "{\"model_type\": \"t5\", \"d_model\": 48, \"d_kv\": 10, \"d_ff\": 40, \"num_layers\": 2," \
           " \"num_heads\": 3, \"vocab_size\": 96, \"relative_attention_num_buckets\": 16"
    assert_int_equal(resolve(T5 ", \"feed_forward_proj\": \"gated-gelu\"}", NULL, -1, &a, &e), WM_OK);
    assert_string_equal(a.inference_class, "T5ForConditionalGeneration");
    assert_int_equal(a.dec_L, 2); /* num_decoder_layers defaults to num_layers */
    assert_int_equal(a.hd, 10);
    assert_int_equal(a.dec_hd, 10);
    assert_int_equal(wm_arch_mod(&a, 0, WM_M_L_Q)->out, 30);
    assert_int_equal(wm_arch_mod(&a, 2, WM_M_L_XO)->in, 30);
    assert_int_equal(wm_arch_mod(&a, -1, WM_M_G_DEC_REL_BIAS)->out, 16);
    assert_int_equal(wm_arch_mod(&a, -1, WM_M_G_DEC_REL_BIAS)->in, 3);
    assert_int_equal(a.rel_max_dist, 128);
    assert_true(a.gated && a.act == WM_ACT_GELU_TANH && a.norm == WM_NORM_RMS && !a.post_norm && !a.scale_attn);
    assert_false(wm_arch_mod(&a, 0, WM_M_L_Q)->has_bias || wm_arch_mod(&a, 0, WM_M_L_ATTN_NORM)->has_bias);
    assert_true(wm_arch_mod(&a, 3, WM_M_L_GATE)->present && a.tied && fabs(a.logits_mul - 1 / sqrt(48.0)) < 1e-12);
    assert_true(has_feature(&a, "relative position buckets (16, max distance 128)"));
    done(&a);
    assert_int_equal(resolve(T5 ", \"tie_word_embeddings\": false, \"num_decoder_layers\": 1}", NULL, -1, &a, &e),
                     WM_OK);
    assert_true(!a.gated && a.act == WM_ACT_RELU && !a.tied && a.logits_mul == 1.0 && a.dec_L == 1);
    done(&a);
    assert_int_equal(resolve(T5 ", \"scale_decoder_outputs\": false}", NULL, -1, &a, &e), WM_OK);
    assert_true(a.tied && a.logits_mul == 1.0); /* transformers 5's v1.1: tied, unscaled */
    done(&a);
    assert_int_equal(resolve(T5 ", \"relative_attention_max_distance\": 8}", NULL, -1, &a, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "field 'relative_attention_max_distance': 8 is not past the 8 exact"));
    done(&a);
#undef T5
    assert_int_equal(resolve("{\"model_type\": \"marian\", \"d_model\": 32, \"vocab_size\": 64, \"encoder_layers\": 1,"
                             " \"decoder_layers\": 1, \"encoder_attention_heads\": 4, \"decoder_attention_heads\": 2,"
                             " \"encoder_ffn_dim\": 64, \"decoder_ffn_dim\": 48, \"max_position_embeddings\": 64}",
                             NULL, -1, &a, &e), WM_OK);
    assert_string_equal(a.inference_class, "MarianMTModel");
    assert_int_equal(a.hd, 8);
    assert_int_equal(a.dec_hd, 16);
    assert_true(a.scale_attn && a.post_norm && a.abs_pos && a.pos_sinusoidal && a.mlp_bias);
    done(&a);
}

/* The composite vision-encoder-decoder: an image tower of the vision table as the encoder, the trocr row as the
   decoder (its encoder keys absent), enc_to_dec_proj when the widths differ, cross_attention_hidden_size instead. */
static void test_vision_encoder_decoder(void **state) {
    (void)state;
    wm_arch a;
    wm_error e;
#define VED "{\"model_type\": \"vision-encoder-decoder\", \"encoder\": {\"model_type\": \"vit\", \"hidden_size\": 32," \
            " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"intermediate_size\": 48, \"image_size\": 32," \
            " \"patch_size\": 8}, \"decoder\": {\"model_type\": \"trocr\", \"decoder_layers\": 2," \
            " \"decoder_attention_heads\": 2, \"decoder_ffn_dim\": 40, \"vocab_size\": 50, \"max_position_embeddings\": 64"
    assert_int_equal(resolve(VED ", \"d_model\": 24}}", NULL, -1, &a, &e), WM_OK);
    assert_string_equal(a.inference_class, "VisionEncoderDecoderModel");
    assert_int_equal(a.task, WM_TASK_IMAGE_TO_TEXT);
    assert_true(a.vis_enc && a.enc_L == 0 && a.dec_L == 2 && a.L == 2 && a.emb_norm && a.post_norm);
    assert_int_equal(a.pos_offset, 2);
    assert_int_equal(a.tower[1]->n_pos, 17); /* CLS + 16 patches */
    assert_int_equal(a.tower[1]->vpool, WM_VPOOL_NONE);
    const wm_module *p = wm_arch_mod(&a, -1, WM_M_G_PROJ);
    assert_true(p->present && p->in == 32 && p->out == 24);
    assert_int_equal(wm_arch_mod(&a, 0, WM_M_L_XK)->in, 24);
    done(&a);
    assert_int_equal(resolve(VED ", \"d_model\": 24, \"layernorm_embedding\": false, \"cross_attention_hidden_size\": 32}}",
                             NULL, -1, &a, &e), WM_OK);
    assert_false(wm_arch_mod(&a, -1, WM_M_G_PROJ)->present || a.emb_norm);
    assert_int_equal(wm_arch_mod(&a, 1, WM_M_L_XV)->in, 32); /* the encoder's width */
    done(&a);
    assert_int_equal(resolve(VED ", \"d_model\": 24, \"cross_attention_hidden_size\": 16}}", NULL, -1, &a, &e),
                     WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "config.json: decoder: field 'cross_attention_hidden_size'"));
    done(&a);
#undef VED
    assert_int_equal(resolve("{\"model_type\": \"trocr\", \"d_model\": 24, \"decoder_layers\": 2, \"vocab_size\": 50,"
                             " \"decoder_attention_heads\": 2, \"decoder_ffn_dim\": 40}", NULL, -1, &a, &e),
                     WM_ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "is a decoder built inside a composite checkpoint only"));
    done(&a);
}

static void test_sliding_windows(void **state) {
    (void)state;
    wm_arch a;
    wm_error e;
    assert_int_equal(resolve(QWEN2 ", \"use_sliding_window\": true, \"max_window_layers\": 1, \"sliding_window\": 8}",
                             NULL, -1, &a, &e), WM_ERR_INPUT); /* the key listed twice (QWEN2 has it) */
    done(&a);
    assert_int_equal(resolve("{\"model_type\": \"mistral\", \"hidden_size\": 32, \"intermediate_size\": 64,"
                             " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 50,"
                             " \"sliding_window\": 16}", NULL, -1, &a, &e), WM_OK);
    assert_int_equal(a.window, 16);
    assert_true(a.sliding[0] && a.sliding[1]);
    done(&a);
    assert_int_equal(resolve("{\"model_type\": \"llama\", \"hidden_size\": 32, \"intermediate_size\": 64,"
                             " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 50,"
                             " \"sliding_window\": 16}", NULL, -1, &a, &e), WM_OK);
    assert_int_equal(a.window, 0); /* llama ignores the key, as transformers does */
    done(&a);
    assert_int_equal(resolve("{\"model_type\": \"qwen2\", \"hidden_size\": 32, \"intermediate_size\": 64,"
                             " \"num_hidden_layers\": 3, \"num_attention_heads\": 4, \"vocab_size\": 50,"
                             " \"sliding_window\": 4, \"layer_types\": [\"full_attention\", \"sliding_attention\","
                             " \"full_attention\"]}", NULL, -1, &a, &e), WM_OK);
    assert_true(!a.sliding[0] && a.sliding[1] && !a.sliding[2] && a.window == 4);
    done(&a);
}

/* Gemma: every family feature from the table, every value from the config (or transformers' default). */
static void test_gemma_features(void **state) {
    (void)state;
    wm_arch a;
    wm_error e;
    /* gemma3_text, transformers 4 spelling: every 6th layer full attention, local base 10000 by default */
    assert_int_equal(resolve(GEMMA3 ", \"query_pre_attn_scalar\": 48, \"attn_logit_softcapping\": 30}", NULL, -1, &a,
                             &e), WM_OK);
    assert_true(a.norm_offset == 1.0f && a.sub_norms && a.qk_norm && a.act == WM_ACT_GELU_TANH);
    assert_true(a.embed_scale == (double)(float)sqrt(64.0));
    assert_true(a.query_scalar == 48 && a.attn_softcap == 0 && a.final_softcap == 0); /* attn cap: never read */
    for (int i = 0; i < 8; i++) assert_int_equal(a.sliding[i], i != 5);
    assert_int_equal(a.window, 16);
    assert_true(a.local_rope && a.rope.theta == 1e6 && a.rope_local.theta == 1e4);
    assert_true(fabs(a.rope_local.inv_freq[1] - 1.0 / pow(1e4, 2.0 / 32)) < 1e-6);
    assert_true(has_feature(&a, "RMSNorm (1 + weight)") && has_feature(&a, "sliding-window layers: rotary positions "
                                                                       "(theta 10000"));
    assert_true(has_feature(&a, "query_pre_attn_scalar^-1/2 (48)") && has_feature(&a, "sliding window 16 on 7 of 8"));
    assert_string_equal(wm_arch_mod(&a, 0, WM_M_L_ATTN_OUT_NORM)->w, "model.layers.0.post_attention_layernorm.weight");
    assert_string_equal(wm_arch_mod(&a, 0, WM_M_L_MLP_NORM)->w, "model.layers.0.pre_feedforward_layernorm.weight");
    done(&a);
    /* its own pattern, base and linear-scaled global RoPE (rope_scaling goes to the full-attention layers) */
    assert_int_equal(resolve(GEMMA3 ", \"sliding_window_pattern\": 2, \"rope_local_base_freq\": 500.0,"
                             " \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 4.0}}", NULL, -1, &a, &e), WM_OK);
    for (int i = 0; i < 8; i++) assert_int_equal(a.sliding[i], i % 2 == 0);
    assert_true(a.rope_local.theta == 500 && !strcmp(a.rope_local.type, "default") && !strcmp(a.rope.type, "linear"));
    assert_true(fabs(a.rope.inv_freq[1] - 0.25 / pow(1e6, 2.0 / 32)) < 1e-7);
    done(&a);
    /* transformers 5 spelling: layer_types and rope_parameters per layer type; no sliding layer: no local RoPE */
    assert_int_equal(resolve(GEMMA3 ", \"layer_types\": [\"full_attention\", \"full_attention\", \"full_attention\","
                             " \"full_attention\", \"full_attention\", \"full_attention\", \"full_attention\","
                             " \"full_attention\"], \"rope_parameters\": {\"full_attention\": {\"rope_theta\": 123.0},"
                             " \"sliding_attention\": {\"rope_theta\": 7.0}}}", NULL, -1, &a, &e), WM_OK);
    assert_true(a.window == 0 && !a.local_rope && a.rope.theta == 123);
    done(&a);
    /* gemma2: soft-capping on by default (50 / 30), an explicit null turns one off; every other layer sliding */
    assert_int_equal(resolve("{\"model_type\": \"gemma2\", \"hidden_size\": 32, \"num_hidden_layers\": 3,"
                             " \"num_attention_heads\": 4, \"intermediate_size\": 8, \"vocab_size\": 9,"
                             " \"final_logit_softcapping\": null, \"hidden_act\": \"relu\"}", NULL, -1, &a, &e), WM_OK);
    assert_true(a.attn_softcap == 50 && a.final_softcap == 0 && a.query_scalar == 256 && a.window == 4096);
    assert_true(a.sliding[0] && !a.sliding[1] && a.sliding[2] && !a.local_rope);
    assert_int_equal(a.act, WM_ACT_GELU_TANH); /* gemma2 reads hidden_activation only */
    assert_true(has_feature(&a, "attention scores soft-capped at 50"));
    done(&a);
    /* gemma: the legacy "gelu" is the tanh approximation; no sliding, no caps, head_dim scaling */
    assert_int_equal(resolve("{\"model_type\": \"gemma\", \"hidden_size\": 32, \"num_hidden_layers\": 1,"
                             " \"num_attention_heads\": 4, \"intermediate_size\": 8, \"vocab_size\": 9,"
                             " \"hidden_act\": \"gelu\", \"sliding_window\": 4}", NULL, -1, &a, &e), WM_OK);
    assert_true(a.act == WM_ACT_GELU_TANH && a.window == 0 && a.query_scalar == 0 && a.norm_offset == 1.0f);
    assert_true(!a.sub_norms && a.embed_scale == (double)(float)sqrt(32.0));
    done(&a);
}

/* ------------------------------------------------------------ with tensors */

static uint8_t *st_buf;

/* A safetensors image of a tiny llama (or, broken, with one change); returns the open handle. */
static wm_st_file *tiny_llama(const char *drop, const char *reshape, const char *extra) {
    static const char *names[] = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight",
                                  "model.layers.0.input_layernorm.weight", "model.layers.0.post_attention_layernorm.weight",
                                  "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
                                  "model.layers.0.self_attn.v_proj.weight", "model.layers.0.self_attn.o_proj.weight",
                                  "model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight",
                                  "model.layers.0.mlp.down_proj.weight", "model.layers.0.self_attn.q_proj.bias"};
    static const int64_t shapes[][2] = {{10, 8}, {8, 0}, {10, 8}, {8, 0}, {8, 0}, {8, 8}, {4, 8},
                                        {4, 8}, {8, 8}, {12, 8}, {12, 8}, {8, 12}, {8, 0}};
    static float zeros[256];
    wm_st_tensor t[16];
    size_t n = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (drop && !strcmp(drop, names[i])) continue;
        t[n] = (wm_st_tensor){.name = names[i], .dtype = WM_ST_F32, .rank = shapes[i][1] ? 2 : 1,
                              .shape = shapes[i], .data = (const uint8_t *)zeros};
        if (reshape && !strcmp(reshape, names[i])) {
            static const int64_t bad[2] = {9, 8};
            t[n].shape = bad;
        }
        n++;
    }
    if (extra) t[n++] = (wm_st_tensor){.name = extra, .dtype = WM_ST_F32, .rank = 1, .shape = shapes[1],
                                       .data = (const uint8_t *)zeros};
    size_t size;
    wm_error e = {0};
    free(st_buf);
    if (wm_st_write_buffer(t, n, NULL, 0, &st_buf, &size, &e)) return NULL;
    wm_st_file *f = NULL;
    wm_st_open_buffer(st_buf, size, "model.safetensors", &f, &e);
    return f;
}

#define TINY_LLAMA "{\"model_type\": \"llama\", \"hidden_size\": 8, \"intermediate_size\": 12, \"num_hidden_layers\": 1," \
                   " \"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"vocab_size\": 10}"

static void test_tensors_decide(void **state) {
    (void)state;
    wm_arch a;
    wm_error e;
    wm_st_file *st = tiny_llama(NULL, NULL, NULL);
    assert_non_null(st);
    assert_int_equal(resolve(TINY_LLAMA, st, -1, &a, &e), WM_OK);
    assert_true(a.qkv_bias); /* present in the checkpoint, although llama's default says no */
    assert_false(wm_arch_mod(&a, 0, WM_M_L_K)->has_bias);
    assert_non_null(wm_arch_mod(&a, 0, WM_M_L_Q)->wt);
    done(&a);
    wm_st_close(st);
    struct {
        const char *drop, *reshape, *extra, *cfg_extra, *needle;
    } cases[] = {
        {"model.layers.0.mlp.down_proj.weight", NULL, NULL, "", "missing tensor 'model.layers.0.mlp.down_proj.weight'"},
        {NULL, "model.layers.0.mlp.up_proj.weight", NULL, "", "shape [9, 8], expected [12, 8]"},
        {NULL, NULL, "model.layers.0.mystery.weight", "", "'model.layers.0.mystery.weight' is not understood"},
        {NULL, NULL, "model.norm.bias", "", "'model.norm.bias' is not understood"}, /* RMSNorm has no bias */
        {"lm_head.weight", NULL, NULL, "", "missing tensor 'lm_head.weight'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        st = tiny_llama(cases[i].drop, cases[i].reshape, cases[i].extra);
        assert_non_null(st);
        wm_status s = resolve(TINY_LLAMA, st, -1, &a, &e);
        if (!s || !strstr(e.msg, cases[i].needle)) {
            print_error("case %zu: status %d '%s' (want '%s')\n", i, s, e.msg, cases[i].needle);
            fail();
        }
        done(&a);
        wm_st_close(st);
    }
    /* tied: lm_head present but unused is fine (a known head) */
    st = tiny_llama(NULL, NULL, NULL);
    char cfg[512];
    snprintf(cfg, sizeof cfg, "%.*s, \"tie_word_embeddings\": true}", (int)strlen(TINY_LLAMA) - 1, TINY_LLAMA);
    assert_int_equal(resolve(cfg, st, -1, &a, &e), WM_OK);
    assert_false(wm_arch_mod(&a, -1, WM_M_G_LM_HEAD)->present);
    assert_int_equal(a.n_unused, 1);
    done(&a);
    wm_st_close(st);
    free(st_buf);
    st_buf = NULL;
}

/* ------------------------------------------------------------ sha256, conversions */

static void test_sha256_vectors(void **state) {
    (void)state;
    char hex[65];
    wm_sha256 s;
    wm_sha256_init(&s);
    wm_sha256_update(&s, "abc", 3);
    wm_sha256_hex(&s, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    wm_sha256_init(&s);
    wm_sha256_hex(&s, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    wm_sha256_init(&s);
    for (const char *p = m; *p; p++) wm_sha256_update(&s, p, 1); /* byte by byte: buffering */
    wm_sha256_hex(&s, hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    char *a = malloc(1000000);
    memset(a, 'a', 1000000);
    wm_sha256_init(&s);
    wm_sha256_update(&s, a, 1000000);
    wm_sha256_hex(&s, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(a);
}

static void test_half_conversions(void **state) {
    (void)state;
    assert_true(wm_f16_to_f32(0x3c00) == 1.0f);
    assert_true(wm_f16_to_f32(0xc000) == -2.0f);
    assert_true(wm_f16_to_f32(0x7bff) == 65504.0f);
    assert_true(wm_f16_to_f32(0x0001) == ldexpf(1.0f, -24)); /* smallest subnormal */
    assert_true(wm_f16_to_f32(0x03ff) == ldexpf(1023.0f, -24));
    assert_true(isinf(wm_f16_to_f32(0x7c00)) && isnan(wm_f16_to_f32(0x7e00)));
    assert_true(signbit(wm_f16_to_f32(0x8000)) && wm_f16_to_f32(0x8000) == 0.0f);
    assert_true(wm_bf16_to_f32(0x3f80) == 1.0f);
    assert_true(wm_bf16_to_f32(0xc0a0) == -5.0f);
}

/* The sink transposes [out, in] -> [in, out] and widens bf16 exactly (inline mode). */
static void test_sink_transpose(void **state) {
    (void)state;
    uint16_t src[6]; /* bf16 [2, 3] = 1..6 */
    for (int i = 0; i < 6; i++) {
        float f = (float)(i + 1);
        uint32_t u;
        memcpy(&u, &f, 4);
        src[i] = (uint16_t)(u >> 16);
    }
    int64_t shape[2] = {2, 3};
    wm_st_tensor t = {.name = "w", .dtype = WM_ST_BF16, .rank = 2, .shape = shape, .numel = 6,
                      .data = (const uint8_t *)src, .nbytes = 12};
    wm_onnx_model *m = wm_onnx_model_new();
    m->proto->graph = wm_pb_new(&m->arena, &wm_onnx_graph_desc);
    wm_graph *g;
    wm_error e = {0};
    assert_int_equal(wm_graph_open(m, m->proto->graph, &g, &e), WM_OK);
    wm_wsink s;
    assert_int_equal(wm_wsink_init(&s, m, NULL, NULL, &e), WM_OK);
    int64_t dims[2] = {3, 2};
    wm_wsrc src_t = {&t, 1, 0, 0, 0};
    assert_int_equal(wm_wsink_add(&s, g, "wt", dims, 2, &src_t, &e), WM_OK);
    wm_onnx_tensor *it = wm_graph_initializer(g, "wt");
    assert_non_null(it);
    const float *v = (const float *)it->raw_data.p;
    const float want[6] = {1, 4, 2, 5, 3, 6};
    for (int i = 0; i < 6; i++) assert_true(v[i] == want[i]);
    int64_t n6 = 6;
    wm_wsrc off = {&t, 0, 0, 0, 0, 1.0f}; /* Gemma's (1 + w) norm weights, summed in float32 */
    assert_int_equal(wm_wsink_add(&s, g, "w1", &n6, 1, &off, &e), WM_OK);
    const float *v1 = (const float *)wm_graph_initializer(g, "w1")->raw_data.p;
    for (int i = 0; i < 6; i++) assert_true(v1[i] == (float)(i + 2));
    wm_wsrc gen = {NULL, 0, 7, 0.5f, 0};
    assert_int_equal(wm_wsink_add(&s, g, "r", dims, 2, &gen, &e), WM_OK);
    const float *r = (const float *)wm_graph_initializer(g, "r")->raw_data.p;
    for (int i = 0; i < 6; i++) assert_true(fabsf(r[i]) <= 0.5f);
    wm_wsink_close(&s);
    wm_graph_free(g);
    wm_onnx_free(m);
}

/* ------------------------------------------------------------ recipes */

static void test_recipe_round_trip_and_strictness(void **state) {
    (void)state;
    wm_arch a;
    wm_error e;
    assert_int_equal(resolve(QWEN2 "}", NULL, -1, &a, &e), WM_OK);
    wm_recipe r, r2;
    assert_int_equal(wm_recipe_default(&a, WM_PREC_INT4, "cpu", "cpu", &r, &e), WM_OK);
    assert_int_equal(r.n_inputs, 3 + 2 * 3);
    assert_int_equal(r.n_outputs, 1 + 2 * 3);
    assert_int_equal(wm_recipe_check(&r, &a, "r", &e), WM_OK);
    wm_json j;
    wm_json_init(&j);
    wm_recipe_json(&r, &j);
    const char *text = wm_json_text(&j);
    assert_int_equal(wm_recipe_parse(text, strlen(text), "r.json", &r2, &e), WM_OK);
    assert_int_equal(r2.precision, WM_PREC_INT4);
    assert_int_equal(r2.rtn_block_size, 32);
    assert_int_equal(r2.symmetric, 0);
    assert_string_equal(r2.rtn_8bit_weights[0], "embed_tokens.");
    assert_string_equal(r2.rtn_8bit_layer_weights[1], "mlp.down_proj.");
    assert_int_equal(r2.rtn_accuracy_level, 4);
    assert_int_equal(r2.n_inputs, r.n_inputs);
    assert_string_equal(r2.inputs[3].name, "past_key_values.0.key");
    assert_int_equal(r2.inputs[3].dims[1].v, 2);
    assert_string_equal(r2.inputs[3].dims[2].name, "past_sequence_length");
    wm_json j2;
    wm_json_init(&j2);
    wm_recipe_json(&r2, &j2);
    assert_string_equal(wm_json_text(&j2), text); /* parse(json(r)) writes the same JSON */
    wm_json_free(&j2);
    wm_json_free(&j);
    wm_recipe_free(&r2);
    /* dropping a past input fails the check, naming it */
    r.n_inputs--;
    assert_int_equal(wm_recipe_check(&r, &a, "r.json", &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "past_key_values.2.value"));
    wm_recipe_free(&r);
    done(&a);
    const char *bad[][2] = {
        {"{\"loader\": {\"task\": \"text-generation\"}, \"export\": null, \"x\": 1}", "'x': unknown field"},
        {"{\"export\": null}", "'loader': missing"},
        {"{\"loader\": {\"task\": \"text-to-vibes\"}}", "unknown task 'text-to-vibes' (the builder serves text-generation"},
        {"{\"loader\": {\"task\": \"text-generation\"}, \"quant\": {\"mode\": \"awq\"}}", "quant.mode"},
        {"{\"loader\": {\"task\": \"text-generation\"}, \"export\": {\"input_tensors\": [{\"name\": \"a\","
         " \"dtype\": \"int32\", \"shape\": [1, -2]}]}}", "shape[1]"},
        {"{\"loader\": {\"task\": \"text-generation\"}, \"export\": {\"input_tensors\": [{\"name\": \"a\","
         " \"dtype\": \"int32\", \"shape\": [1]}], \"dynamic_axes\": {\"b\": {\"0\": \"n\"}}}}", "dynamic_axes.b"},
        {"{\"loader\": {\"task\": \"text-generation\"}, \"compile\": {\"ep_config\": {\"provider\": 3}}}",
         "compile.ep_config.provider"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&e, 0, sizeof e);
        wm_status s = wm_recipe_parse(bad[i][0], strlen(bad[i][0]), "r.json", &r, &e);
        if (!s || !strstr(e.msg, bad[i][1])) {
            print_error("case %zu: status %d '%s' (want '%s')\n", i, s, e.msg, bad[i][1]);
            fail();
        }
    }
}

/* ------------------------------------------------------------ export */

static void export_and_reload(uint64_t threshold, int want_external) {
    char dir[64];
    assert_int_equal(wm_test_tmpdir_make(dir, sizeof dir, "builder"), 0);
    wm_arch a;
    wm_error e;
    assert_int_equal(resolve(QWEN2 "}", NULL, -1, &a, &e), WM_OK);
    wm_recipe r;
    assert_int_equal(wm_recipe_default(&a, WM_PREC_FP32, NULL, NULL, &r, &e), WM_OK);
    wm_export_opts o = {1, 42, threshold, 0, 0};
    wm_export_result res;
    assert_int_equal(wm_export_model(&a, &r, NULL, &o, dir, &res, &e), WM_OK);
    assert_int_equal(res.external, want_external);
    assert_int_equal(res.n_params, a.n_params); /* every weight went through the sink once */
    char path[128];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    wm_onnx_model *m = NULL;
    assert_int_equal(wm_onnx_load(path, &m, &e), WM_OK);
    wm_graph *g;
    assert_int_equal(wm_graph_open(m, m->proto->graph, &g, &e), WM_OK);
    assert_int_equal(wm_graph_check(g, &e), WM_OK);
    assert_int_equal(m->proto->graph->n_node, res.n_nodes);
    assert_int_equal(m->proto->graph->n_output, 1 + 2 * 3);
    assert_int_equal(wm_graph_opset(g, ""), 17);
    const wm_onnx_tensor *w = wm_graph_initializer(g, "model.layers.2.mlp.down_proj.weight");
    assert_non_null(w);
    assert_int_equal(w->n_dims, 2);
    assert_int_equal(w->dims[0], 128); /* stored [in, out] for MatMul */
    assert_int_equal(w->data_location == 1, want_external);
    assert_non_null(wm_graph_producer(g, "present.2.value"));
    wm_graph_free(g);
    wm_onnx_free(m);
    wm_recipe_free(&r);
    done(&a);
    assert_int_equal(wm_test_tmpdir_remove(dir), 0);
}

static void test_export_inline(void **state) {
    (void)state;
    export_and_reload(0, 0);
}

static void test_export_external(void **state) {
    (void)state;
    export_and_reload(1024, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_families_from_config), cmocka_unit_test(test_unsupported),
        cmocka_unit_test(test_rope_frequencies), cmocka_unit_test(test_relative_position_buckets),
        cmocka_unit_test(test_seq2seq_families),
        cmocka_unit_test(test_vision_encoder_decoder),
        cmocka_unit_test(test_sliding_windows),
        cmocka_unit_test(test_gemma_features),
        cmocka_unit_test(test_tensors_decide), cmocka_unit_test(test_sha256_vectors),
        cmocka_unit_test(test_half_conversions), cmocka_unit_test(test_sink_transpose),
        cmocka_unit_test(test_recipe_round_trip_and_strictness), cmocka_unit_test(test_export_inline),
        cmocka_unit_test(test_export_external),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
