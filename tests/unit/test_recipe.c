/*
 * test_recipe.c - the recipe model's reference paths: the reference system's bookkeeping fields kept and
 * listed, its optim capability names, task names, Auto* model classes, exclusive value ranges, qdq; the quant
 * section validated once and handed to the quantizer as its config (no second parser); what build refuses.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "builder/arch.h"
#include "builder/arch_impl.h"
#include "builder/recipe.h"
#include "hf/config.h"
#include "onnx/dtype.h"
#include "opt/quant.h"

/* A reference recipe (sentence-transformers/all-MiniLM-L6-v2, sentence-similarity w8a16), abridged. */
static const char *const REF =
    "{\"export\": {\"opset_version\": 17, \"batch_size\": 1, \"export_params\": true, \"do_constant_folding\": true,"
    " \"verbose\": false, \"dynamo\": false, \"enable_hierarchy_tags\": true, \"clean_onnx\": false,"
    " \"hierarchy_tag_format\": \"full\", \"compatibility\": {\"transformers_attention\": \"eager\"},"
    " \"input_tensors\": [{\"name\": \"input_ids\", \"dtype\": \"int32\", \"shape\": [1, 128], \"value_range\": [0, 30522]},"
    " {\"name\": \"attention_mask\", \"dtype\": \"int32\", \"shape\": [1, 128], \"value_range\": [0, 2]},"
    " {\"name\": \"token_type_ids\", \"dtype\": \"int32\", \"shape\": [1, 128], \"value_range\": [0, 2]}],"
    " \"output_tensors\": [{\"name\": \"last_hidden_state\"}]},"
    " \"optim\": {\"clamp_constant_values\": true, \"gelu_fusion\": false},"
    " \"quant\": {\"mode\": \"qdq\", \"samples\": 10, \"calibration_method\": \"minmax\", \"weight_type\": \"uint8\","
    " \"activation_type\": \"uint16\", \"per_channel\": false, \"symmetric\": false, \"save_calibration\": false,"
    " \"distribution\": \"uniform\", \"seed\": null, \"calibration_load_path\": null, \"calibration_save_path\": null,"
    " \"op_types_to_quantize\": null, \"nodes_to_exclude\": null, \"weight_symmetric\": null,"
    " \"activation_symmetric\": null, \"task\": \"sentence-similarity\", \"model_id\": \"x/y\"},"
    " \"loader\": {\"task\": \"sentence-similarity\", \"model_class\": \"AutoModel\", \"model_type\": \"bert\"},"
    " \"eval\": {\"task\": \"sentence-similarity\", \"dataset\": {\"path\": \"mteb/stsbenchmark-sts\", \"split\": \"test\","
    " \"samples\": 1000, \"shuffle\": true, \"seed\": 42, \"columns_mapping\": {\"input_column_1\": \"sentence1\"}}}}";

static int kept(const wm_recipe *r, const char *field) {
    for (size_t i = 0; i < r->n_kept; i++)
        if (!strcmp(r->kept[i].field, field)) return r->kept[i].why && r->kept[i].why[0];
    return 0;
}

static void test_reference_recipe_fields_kept_and_used(void **st) {
    (void)st;
    wm_recipe r;
    wm_error e = {0};
    assert_int_equal(wm_recipe_parse(REF, strlen(REF), "ref.json", &r, &e), WM_OK);
    assert_string_equal(r.task, "sentence-similarity");
    assert_int_equal(r.served_task, WM_TASK_FEATURE_EXTRACTION);
    assert_int_equal(r.pooling, WM_POOL_NONE); /* its outputs are the token states alone: pooled downstream */
    static const char *const k[] = {"export.export_params", "export.dynamo", "export.compatibility",
                                    "export.hierarchy_tag_format", "optim.clamp_constant_values",
                                    "quant.save_calibration", "quant.distribution", "quant.model_id",
                                    "quant.task", "eval.dataset.columns_mapping", "eval.dataset.shuffle",
                                    "eval.dataset.seed"};
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) {
        if (!kept(&r, k[i])) print_error("not kept: %s\n", k[i]);
        assert_true(kept(&r, k[i]));
    }
    assert_false(kept(&r, "optim.gelu_fusion")); /* mapped onto passes: used, not kept */
    assert_false(kept(&r, "quant.mode"));
    assert_int_equal(r.n_kept, 18); /* 8 export, 1 optim, 6 quant, 3 eval (quant.seed is used) */
    assert_int_equal(r.calib_seed, -1); /* "seed": null: the calibration's own seed (1) */
    /* qdq = static; 16-bit activations: w8a16 */
    assert_int_equal(r.qmode, WM_QUANT_W8A16);
    assert_int_equal(r.precision, WM_PREC_W8A16);
    assert_true(r.inputs[1].has_range && r.inputs[1].range[0] == 0 && r.inputs[1].range[1] == 2);
    wm_quant_config c;
    assert_int_equal(wm_recipe_quant_config(&r, &c, &e), WM_OK);
    assert_int_equal(c.mode, WM_QUANT_W8A16);
    assert_int_equal(c.weight_type, WM_DT_UINT8);
    assert_int_equal(c.activation_type, WM_DT_UINT16);
    assert_true(!c.per_channel && !c.symmetric);
    /* build serves static quantization (bert, sentence-similarity: nothing refused) */
    assert_int_equal(wm_recipe_supported(&r, "ref.json", &e), WM_OK);
    wm_recipe_free(&r);
}

static void test_optim_capability_names(void **st) {
    (void)st;
    const char *p[4], *why;
    assert_int_equal(wm_recipe_optim_passes("gelu_fusion", p, 4, &why), 3);
    assert_string_equal(p[0], "gelu");
    assert_string_equal(p[2], "biasgelu");
    assert_int_equal(wm_recipe_optim_passes("layer_norm_fusion", p, 4, &why), 2);
    assert_string_equal(p[1], "skiplayernorm");
    assert_int_equal(wm_recipe_optim_passes("matmul_add_fusion", p, 4, &why), 1);
    assert_string_equal(p[0], "gemm");
    assert_int_equal(wm_recipe_optim_passes("layernorm", p, 4, &why), 1); /* ours: itself */
    assert_int_equal(wm_recipe_optim_passes("remove_isnan_in_attention_mask", p, 4, &why), 0);
    assert_non_null(why);
    assert_int_equal(wm_recipe_optim_passes("warp_fusion", p, 4, &why), 0);
    assert_null(why);
}

static void test_reference_task_names(void **st) {
    (void)st;
    wm_pooling pool = WM_POOL_NONE;
    assert_int_equal(wm_recipe_task_served("sentence-similarity", &pool), WM_TASK_FEATURE_EXTRACTION);
    assert_int_equal(pool, WM_POOL_MEAN);
    assert_int_equal(wm_recipe_task_served("zero-shot-classification", NULL), WM_TASK_TEXT_CLASSIFICATION);
    assert_int_equal(wm_recipe_task_served("text-ranking", NULL), WM_TASK_TEXT_CLASSIFICATION);
    assert_int_equal(wm_recipe_task_served("image-classification", NULL), WM_TASK_IMAGE_CLASSIFICATION);
    assert_int_equal(wm_recipe_task_served("object-detection", NULL), -1);
    assert_int_equal(wm_recipe_task_served("fill-mask", NULL), WM_TASK_FILL_MASK);
    assert_int_equal(wm_recipe_task_served("text-to-vibes", NULL), -2);
    /* sentence-similarity with no output list pools (its implied mean pooling) */
    const char *t = "{\"loader\": {\"task\": \"sentence-similarity\"}, \"export\": {\"input_tensors\": [{\"name\":"
                    " \"input_ids\", \"dtype\": \"int32\", \"shape\": [1, 8]}]}}";
    wm_recipe r;
    wm_error e = {0};
    assert_int_equal(wm_recipe_parse(t, strlen(t), "r.json", &r, &e), WM_OK);
    assert_int_equal(r.pooling, WM_POOL_MEAN);
    wm_recipe_free(&r);
    /* a served model_type with a task the builder does not serve: named */
    t = "{\"loader\": {\"task\": \"image-classification\", \"model_type\": \"bert\"}}";
    assert_int_equal(wm_recipe_parse(t, strlen(t), "r.json", &r, &e), WM_OK);
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_recipe_supported(&r, "r.json", &e), WM_ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "field 'loader.model_type': model_type 'bert' does not serve task "
                                  "'image-classification' (a text encoder"));
    wm_recipe_free(&r);
    /* a task the builder does not serve at all: named, with the list */
    t = "{\"loader\": {\"task\": \"object-detection\", \"model_type\": \"bert\"}}";
    assert_int_equal(wm_recipe_parse(t, strlen(t), "r.json", &r, &e), WM_OK);
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_recipe_supported(&r, "r.json", &e), WM_ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "field 'loader.task': task 'object-detection' is not served by the builder"));
    assert_non_null(strstr(e.msg, "fill-mask, sentence-similarity"));
    wm_recipe_free(&r);
    /* a decoder asked for an encoder task */
    t = "{\"loader\": {\"task\": \"fill-mask\", \"model_type\": \"llama\"}}";
    assert_int_equal(wm_recipe_parse(t, strlen(t), "r.json", &r, &e), WM_OK);
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_recipe_supported(&r, "r.json", &e), WM_ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "field 'loader.model_type': model_type 'llama' does not serve task 'fill-mask'"));
    wm_recipe_free(&r);
    /* a model_type outside the family table comes first, whatever the task */
    t = "{\"loader\": {\"task\": \"image-classification\", \"model_type\": \"swin\"}}";
    assert_int_equal(wm_recipe_parse(t, strlen(t), "r.json", &r, &e), WM_OK);
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_recipe_supported(&r, "r.json", &e), WM_ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "field 'loader.model_type': model_type 'swin' is not supported"));
    wm_recipe_free(&r);
    /* image families serve their image tasks, and only those */
    t = "{\"loader\": {\"task\": \"image-classification\", \"model_type\": \"vit\"}}";
    assert_int_equal(wm_recipe_parse(t, strlen(t), "r.json", &r, &e), WM_OK);
    assert_int_equal(wm_recipe_supported(&r, "r.json", &e), WM_OK);
    wm_recipe_free(&r);
    t = "{\"loader\": {\"task\": \"text-classification\", \"model_type\": \"vit\"}}";
    assert_int_equal(wm_recipe_parse(t, strlen(t), "r.json", &r, &e), WM_OK);
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_recipe_supported(&r, "r.json", &e), WM_ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "model_type 'vit' does not serve task 'text-classification' (an image model"));
    wm_recipe_free(&r);
    /* trust_remote_code is only a permission: a standard model_type builds (a checkpoint whose config.json has an
       auto_map is refused by the config reader); an unsupported model_type is still named */
    t = "{\"loader\": {\"task\": \"audio-classification\", \"model_type\": \"wav2vec2\", \"trust_remote_code\": "
        "true}}";
    assert_int_equal(wm_recipe_parse(t, strlen(t), "r.json", &r, &e), WM_OK);
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_recipe_supported(&r, "r.json", &e), WM_OK);
    wm_recipe_free(&r);
    t = "{\"loader\": {\"task\": \"feature-extraction\", \"model_type\": \"unlimited-ocr\", \"trust_remote_code\": "
        "true}}";
    assert_int_equal(wm_recipe_parse(t, strlen(t), "r.json", &r, &e), WM_OK);
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_recipe_supported(&r, "r.json", &e), WM_ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "field 'loader.model_type': model_type 'unlimited-ocr' is not supported"));
    wm_recipe_free(&r);
}

/* every task has a name, an HF class suffix and a reference task name that maps back onto it (a task added to
   the enum without its table rows crashed recipe checks: a NULL suffix) */
static void test_every_task_has_its_table_rows(void **st) {
    (void)st;
    for (int t = 0; t < WM_TASK_COUNT; t++) {
        assert_string_not_equal(wm_task_name(t), "unknown");
        assert_non_null(wm_task_class_suffix[t]);
        assert_int_equal(wm_recipe_task_served(wm_task_name(t), NULL), t);
    }
}

static void test_bad_reference_fields(void **st) {
    (void)st;
    const char *bad[][2] = {
        /* a truly unknown field: named with its path */
        {"{\"loader\": {\"task\": \"text-classification\"}, \"export\": {\"input_tensors\": [{\"name\": \"a\","
         " \"dtype\": \"int32\", \"shape\": [1]}], \"export_paramz\": true}}", "r.json: field 'export.export_paramz': unknown field"},
        /* a kept field of the wrong kind */
        {"{\"loader\": {\"task\": \"text-classification\"}, \"export\": {\"input_tensors\": [{\"name\": \"a\","
         " \"dtype\": \"int32\", \"shape\": [1]}], \"dynamo\": \"yes\"}}", "field 'export.dynamo': expected true or false"},
        {"{\"loader\": {\"task\": \"text-classification\"}, \"eval\": {\"dataset\": {\"columns_mapping\":"
         " {\"a\": {\"b\": 1}}}}}", "field 'eval.dataset.columns_mapping': expected an object of"},
        {"{\"loader\": {\"task\": \"text-classification\"}, \"eval\": {\"dataset\": {\"colums_mapping\": {}}}}",
         "field 'eval.dataset.colums_mapping': unknown field"},
        {"{\"loader\": {\"task\": \"text-classification\"}, \"optim\": {\"warp_fusion\": true}}",
         "field 'optim.warp_fusion': unknown field (a pass of winml optimize"},
        {"{\"loader\": {\"task\": \"text-classification\"}, \"optim\": {\"gelu_fusion\": 1}}",
         "field 'optim.gelu_fusion': expected true or false"},
        {"{\"loader\": {\"task\": \"text-to-vibes\"}}", "unknown task 'text-to-vibes' (the builder serves"},
        {"{\"loader\": {\"task\": \"text-classification\"}, \"eval\": {\"task\": \"x\"}}", "field 'eval.task': unknown task 'x'"},
        /* value_range: the upper bound is exclusive, so [1, 1] holds nothing */
        {"{\"loader\": {\"task\": \"text-classification\"}, \"export\": {\"input_tensors\": [{\"name\": \"a\","
         " \"dtype\": \"int32\", \"shape\": [1], \"value_range\": [1, 1]}]}}", "value_range': expected [low, high)"},
        /* one set of limits for the quant section (the second parser took rtn_bits 2..8, the quantizer 4|8) */
        {"{\"loader\": {\"task\": \"text-generation\"}, \"quant\": {\"mode\": \"rtn\", \"rtn_bits\": 3}}",
         "field 'quant.rtn_bits': expected an integer in [4, 8], got 3"},
        {"{\"loader\": {\"task\": \"text-generation\"}, \"quant\": {\"mode\": \"rtn\", \"rtn_bits\": 6}}",
         "field 'quant.rtn_bits': 6 (4 or 8)"},
        {"{\"loader\": {\"task\": \"text-generation\"}, \"quant\": {\"mode\": \"rtn\", \"rtn_block_size\": 48}}",
         "field 'quant.rtn_block_size': 48 (a power of two"},
        {"{\"loader\": {\"task\": \"text-generation\"}, \"quant\": {\"mode\": \"rtn\", \"rtn_8bit_block_size\": 96}}",
         "field 'quant.rtn_8bit_block_size': 96 (a power of two"},
        {"{\"loader\": {\"task\": \"text-generation\"}, \"quant\": {\"mode\": \"rtn\", \"rtn_table_block_size\": 8}}",
         "field 'quant.rtn_table_block_size': expected an integer in [16, 4096], got 8"},
        {"{\"loader\": {\"task\": \"text-generation\"}, \"quant\": {\"mode\": \"rtn\", \"rtn_gptq_damp\": 0.1}}",
         "field 'quant.rtn_gptq_damp' applies to GPTQ, but quant.rtn_gptq is not true"},
        {"{\"loader\": {\"task\": \"text-generation\"}, \"quant\": {\"mode\": \"rtn\", \"rtn_gptq\": true,"
         " \"rtn_gptq_damp\": 0}}", "field 'quant.rtn_gptq_damp': expected a number in [1e-06, 10], got 0"},
        {"{\"loader\": {\"task\": \"text-generation\"}, \"quant\": {\"mode\": \"rtn\", \"rtn_gptq\": true,"
         " \"rtn_gptq_act_order\": 1}}", "field 'quant.rtn_gptq_act_order': expected true or false"},
        {"{\"loader\": {\"task\": \"text-generation\"}, \"quant\": {\"mode\": \"rtn\", \"rtn_importance\": 1}}",
         "field 'quant.rtn_importance': expected true or false"},
        {"{\"loader\": {\"task\": \"text-generation\"}, \"quant\": {\"mode\": \"static\", \"activation_type\": \"QInt4\"}}",
         "field 'quant.activation_type': 'QInt4'"},
        {"{\"loader\": {\"task\": \"text-generation\"}, \"quant\": {\"mode\": \"dynamic\", \"weight_type\": \"uint16\"}}",
         "field 'quant.weight_type': 'uint16'"},
        {"{\"loader\": {\"task\": \"text-generation\"}, \"quant\": {\"mode\": \"static\", \"calibration_method\": \"mse\"}}",
         "field 'quant.calibration_method': 'mse'"},
        {"{\"loader\": {\"task\": \"text-generation\"}, \"quant\": {\"mode\": \"static\", \"symmetric\": true,"
         " \"weight_symmetric\": false}}", "field 'quant.weight_symmetric': false, but quant.symmetric is true"},
        {"{\"loader\": {\"task\": \"text-generation\"}, \"quant\": {\"mode\": \"qdq\", \"seed\": \"x\"}}",
         "field 'quant.seed': expected an integer, got a string"},
        {"{\"loader\": {\"task\": \"text-generation\"}, \"quant\": {\"mode\": \"qdq\", \"seed\": -1}}",
         "field 'quant.seed': expected an integer in [0, 9007199254740992], got -1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        wm_recipe r;
        wm_error e = {0};
        wm_status s = wm_recipe_parse(bad[i][0], strlen(bad[i][0]), "r.json", &r, &e);
        if (s != WM_ERR_INPUT || !strstr(e.msg, bad[i][1])) {
            print_error("case %zu: status %d '%s' (want '%s')\n", i, s, e.msg, bad[i][1]);
            fail();
        }
    }
}

static void test_quant_section_is_the_quantizers_config(void **st) {
    (void)st;
    const char *t = "{\"loader\": {\"task\": \"text-generation\"}, \"quant\": {\"mode\": \"rtn\", \"rtn_bits\": 8,"
                    " \"rtn_block_size\": 128, \"rtn_accuracy_level\": 4, \"rtn_scale_search\": true,"
                    " \"rtn_8bit_block_size\": 256, \"rtn_table_block_size\": 16, \"rtn_importance\": true,"
                    " \"rtn_gptq\": true, \"rtn_gptq_damp\": 0.1, \"rtn_gptq_act_order\": true, \"rtn_gptq_tied_head\": true,"
                    " \"symmetric\": true, \"op_types_to_quantize\": [\"MatMul\", \"Gather\"],"
                    " \"nodes_to_exclude\": [\"lm_head\"]}}";
    wm_recipe r;
    wm_error e = {0};
    assert_int_equal(wm_recipe_parse(t, strlen(t), "r.json", &r, &e), WM_OK);
    assert_int_equal(r.precision, WM_PREC_INT8_RTN); /* rtn 8 bits: ours, not the reference's static int8 */
    wm_quant_config c;
    assert_int_equal(wm_recipe_quant_config(&r, &c, &e), WM_OK);
    assert_int_equal(c.mode, WM_QUANT_INT4);
    assert_int_equal(c.bits, 8);
    assert_int_equal(c.block_size, 128);
    assert_int_equal(c.int8_block_size, 256), assert_int_equal(c.table_block_size, 16);
    assert_int_equal(r.rtn_importance, 1);
    assert_int_equal(r.rtn_gptq, 1); /* with rtn_importance: GPTQ, the importance for the sensitivity budget */
    assert_true(c.gptq_damp == 0.1 && c.gptq_act_order == 1 && c.gptq_tied == 1);
    assert_int_equal(c.accuracy_level, 4);
    assert_true(c.scale_search && c.symmetric && !c.half_scales);
    assert_int_equal(c.n_op_types, 2);
    assert_string_equal(c.op_types[1], "Gather");
    assert_int_equal(c.n_exclude, 1);
    assert_string_equal(c.exclude[0], "lm_head");
    assert_int_equal(c.op_block_given, 0);
    wm_recipe_free(&r);
    t = "{\"loader\": {\"task\": \"text-generation\"}, \"quant\": {\"mode\": \"fp16\", \"fp16_keep_io_types\": true,"
        " \"fp16_op_block_list\": []}}";
    assert_int_equal(wm_recipe_parse(t, strlen(t), "r.json", &r, &e), WM_OK);
    assert_int_equal(wm_recipe_quant_config(&r, &c, &e), WM_OK);
    assert_int_equal(c.mode, WM_QUANT_FP16);
    assert_true(c.keep_io_types && c.op_block_given && c.n_op_block == 0);
    wm_recipe_free(&r);
    t = "{\"loader\": {\"task\": \"text-generation\"}, \"quant\": null}";
    assert_int_equal(wm_recipe_parse(t, strlen(t), "r.json", &r, &e), WM_OK);
    assert_int_equal(wm_recipe_quant_config(&r, &c, &e), WM_ERR_UNSUPPORTED);
    wm_recipe_free(&r);
}

#define BERT "{\"model_type\": \"bert\", \"hidden_size\": 32, \"intermediate_size\": 64, \"num_hidden_layers\": 1," \
             " \"num_attention_heads\": 4, \"vocab_size\": 96, \"max_position_embeddings\": 64}"

static void test_auto_model_class_is_the_tasks_class(void **st) {
    (void)st;
    wm_hf_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    wm_error e = {0};
    assert_int_equal(wm_hf_config_parse(BERT, strlen(BERT), "config.json", &ck.config, &e), WM_OK);
    wm_arch a;
    assert_int_equal(wm_arch_resolve(&ck, NULL, WM_TASK_TEXT_CLASSIFICATION, &a, &e), WM_OK);
    const char *base = "{\"loader\": {\"task\": \"%s\", \"model_class\": \"%s\", \"model_type\": \"bert\"}, \"export\": "
                       "{\"input_tensors\": [{\"name\": \"input_ids\", \"dtype\": \"int32\", \"shape\": [1, 8]},"
                       " {\"name\": \"attention_mask\", \"dtype\": \"int32\", \"shape\": [1, 8]}],"
                       " \"output_tensors\": [{\"name\": \"logits\"}]}}";
    static const struct {
        const char *task, *cls;
        wm_status want;
    } cases[] = {
        {"text-classification", "AutoModelForSequenceClassification", WM_OK},
        {"zero-shot-classification", "AutoModelForSequenceClassification", WM_OK},
        {"text-classification", "BertForSequenceClassification", WM_OK},
        {"text-classification", "SomeEncoderWrapper", WM_OK},
        {"text-classification", "AutoModelForTokenClassification", WM_ERR_INPUT},
        {"text-classification", "AutoModel", WM_ERR_INPUT},
        {"feature-extraction", "AutoModelForSequenceClassification", WM_ERR_INPUT}, /* resolved for another task */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char t[1024];
        memset(&e, 0, sizeof e);
        snprintf(t, sizeof t, base, cases[i].task, cases[i].cls);
        wm_recipe r;
        assert_int_equal(wm_recipe_parse(t, strlen(t), "r.json", &r, &e), WM_OK);
        wm_status s = wm_recipe_check(&r, &a, "r.json", &e);
        if (s != cases[i].want) {
            print_error("case %zu: %d '%s'\n", i, s, e.msg);
            fail();
        }
        wm_recipe_free(&r);
    }
    wm_arch_free(&a);
    wm_hf_config_free(&ck.config);
}

/* fill-mask: the masked-LM head's modules (dense, norm, output bias) and class; a family without one refused */
static void test_fill_mask_arch(void **st) {
    (void)st;
    wm_hf_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    wm_error e = {0};
    assert_int_equal(wm_hf_config_parse(BERT, strlen(BERT), "config.json", &ck.config, &e), WM_OK);
    wm_arch a;
    assert_int_equal(wm_arch_resolve(&ck, NULL, WM_TASK_FILL_MASK, &a, &e), WM_OK);
    assert_string_equal(a.inference_class, "BertForMaskedLM");
    assert_true(wm_arch_mod(&a, -1, WM_M_H_0)->present && wm_arch_mod(&a, -1, WM_M_H_NORM)->present);
    const wm_module *hb = wm_arch_mod(&a, -1, WM_M_H_BIAS);
    assert_true(hb->present && hb->out == 96 && !hb->has_bias);
    assert_string_equal(hb->w, "cls.predictions.bias");
    assert_int_equal(a.head_act, a.act);
    int tasks[WM_TASK_COUNT];
    size_t n = wm_arch_tasks(&a, tasks), found = 0;
    for (size_t i = 0; i < n; i++) found |= tasks[i] == WM_TASK_FILL_MASK;
    assert_true(found);
    wm_arch_free(&a);
    wm_hf_config_free(&ck.config);
    static const char *const electra = "{\"model_type\": \"electra\", \"hidden_size\": 32, \"embedding_size\": 16,"
                                       " \"intermediate_size\": 64, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
                                       " \"vocab_size\": 96, \"max_position_embeddings\": 64}";
    memset(&ck, 0, sizeof ck);
    assert_int_equal(wm_hf_config_parse(electra, strlen(electra), "config.json", &ck.config, &e), WM_OK);
    assert_int_equal(wm_arch_resolve(&ck, NULL, WM_TASK_FILL_MASK, &a, &e), WM_ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "model_type 'electra': task 'fill-mask' is not supported (no masked-LM head"));
    wm_hf_config_free(&ck.config);
}

/* -p names: the reference's int8 is static QDQ (w8a8 too), int16 (w16a16) static with 16-bit weights and
   activations, ours under names of their own, auto = the default; the default quant section of int8 / w8a16 / int16
   is the reference's static recipe (int16: uint16 weights). */
static void test_precision_names(void **st) {
    (void)st;
    static const struct {
        const char *name;
        int want;
    } ok[] = {{"int8", WM_PREC_INT8}, {"w8a8", WM_PREC_INT8}, {"int8-static", WM_PREC_INT8}, {"w8a16", WM_PREC_W8A16},
              {"int8-rtn", WM_PREC_INT8_RTN}, {"int8-dynamic", WM_PREC_INT8_DYNAMIC}, {"fp32", WM_PREC_FP32},
              {"int4", WM_PREC_INT4}, {"int16", WM_PREC_INT16}, {"w16a16", WM_PREC_INT16}, {"auto", -1}};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        int p = -7;
        wm_error e = {0};
        assert_int_equal(wm_precision_parse(ok[i].name, &p, &e), WM_OK);
        assert_int_equal(p, ok[i].want);
        if (p >= 0 && strcmp(ok[i].name, "w8a8") && strcmp(ok[i].name, "int8-static") && strcmp(ok[i].name, "w16a16"))
            assert_string_equal(wm_precision_name(p), ok[i].name);
    }
    static const char *const bad[][2] = {{"int9", "unknown precision 'int9'"}, {"INT16", "unknown precision 'INT16'"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int p = 0;
        wm_error e = {0};
        assert_int_equal(wm_precision_parse(bad[i][0], &p, &e), WM_ERR_USAGE);
        assert_non_null(strstr(e.msg, bad[i][1]));
    }
    static const wm_precision statics[] = {WM_PREC_INT8, WM_PREC_W8A16, WM_PREC_INT16};
    for (size_t k = 0; k < 3; k++) {
        int prec = (int)statics[k];
        wm_recipe r;
        memset(&r, 0, sizeof r);
        wm_recipe_default_quant(NULL, (wm_precision)prec, &r);
        wm_quant_config c;
        wm_error e = {0};
        assert_int_equal(wm_recipe_quant_config(&r, &c, &e), WM_OK);
        assert_int_equal(c.mode, prec == WM_PREC_INT8 ? WM_QUANT_INT8_STATIC
                                 : prec == WM_PREC_W8A16 ? WM_QUANT_W8A16 : WM_QUANT_W16A16);
        assert_int_equal(c.weight_type, prec == WM_PREC_INT16 ? WM_DT_UINT16 : WM_DT_UINT8);
        assert_int_equal(c.activation_type, prec == WM_PREC_INT8 ? WM_DT_UINT8 : WM_DT_UINT16);
        assert_true(!c.per_channel && !c.symmetric);
        assert_int_equal(r.samples, 10);
        assert_string_equal(r.calibration_method, "minmax");
        wm_recipe_free(&r);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_recipe_fields_kept_and_used),
        cmocka_unit_test(test_optim_capability_names),
        cmocka_unit_test(test_reference_task_names),
        cmocka_unit_test(test_every_task_has_its_table_rows),
        cmocka_unit_test(test_bad_reference_fields),
        cmocka_unit_test(test_quant_section_is_the_quantizers_config),
        cmocka_unit_test(test_auto_model_class_is_the_tasks_class),
        cmocka_unit_test(test_fill_mask_arch),
        cmocka_unit_test(test_precision_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
