/*
 * test_sweep.c - what `winml sweep` runs over: the key of a recipe path in the reference's layout (flat, under
 * an EP/device folder, with a part before or after "config"), refused names, --shard parsing and slices, the
 * failure classes, and the tiny config of a --random-weights build.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "core/json.h"
#include "tasks/sweep.h"
#include "unit_tmpdir.h"

static void test_keys_of_reference_paths(void **state) {
    (void)state;
    static const struct {
        const char *path, *key, *model, *task, *prec, *part, *ep;
    } cases[] = {
        {"r/BAAI_bge-small-en-v1.5/feature-extraction_fp16_config.json", "BAAI__bge-small-en-v1.5__feature-extraction__fp16",
         "BAAI/bge-small-en-v1.5", "feature-extraction", "fp16", "", ""},
        /* cpu/cpu keeps the reference's key; another EP folder is appended (the same recipe exists for both) */
        {"/x/cross-encoder_ms-marco-MiniLM-L2-v2/cpu/cpu/text-classification_fp32_config.json",
         "cross-encoder__ms-marco-MiniLM-L2-v2__text-classification__fp32", "cross-encoder/ms-marco-MiniLM-L2-v2",
         "text-classification", "fp32", "", "cpu"},
        {"/x/cross-encoder_ms-marco-MiniLM-L2-v2/dml/gpu/text-classification_fp32_config.json",
         "cross-encoder__ms-marco-MiniLM-L2-v2__text-classification__fp32__dml-gpu",
         "cross-encoder/ms-marco-MiniLM-L2-v2", "text-classification", "fp32", "", "dml"},
        /* a part after "config" and before it; the org ends at the first '_' (names keep theirs) */
        {"openai_clip-vit-base-patch16/zero-shot-image-classification_fp16_config_text-encoder.json",
         "openai__clip-vit-base-patch16__zero-shot-image-classification__fp16__text-encoder",
         "openai/clip-vit-base-patch16", "zero-shot-image-classification", "fp16", "text-encoder", ""},
        {"Helsinki-NLP_opus-mt-fr-en/cpu/cpu/translation_fp16_decoder_config.json",
         "Helsinki-NLP__opus-mt-fr-en__translation__fp16__decoder", "Helsinki-NLP/opus-mt-fr-en", "translation", "fp16",
         "decoder", "cpu"},
        {"PekingU_rtdetr_r18vd_coco_o365/cpu/cpu/object-detection_w8a16_config.json",
         "PekingU__rtdetr_r18vd_coco_o365__object-detection__w8a16", "PekingU/rtdetr_r18vd_coco_o365",
         "object-detection", "w8a16", "", "cpu"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wm_sweep_recipe r;
        wm_error err = {0};
        assert_int_equal(wm_sweep_parse_path(cases[i].path, &r, &err), WM_OK);
        assert_string_equal(r.key, cases[i].key);
        assert_string_equal(r.model_id, cases[i].model);
        assert_string_equal(r.task, cases[i].task);
        assert_string_equal(r.precision, cases[i].prec);
        assert_string_equal(r.part, cases[i].part);
        assert_string_equal(r.ep, cases[i].ep);
    }
}

static void test_names_outside_the_layout_are_refused(void **state) {
    (void)state;
    static const char *const bad[] = {
        "acme_tiny/recipe.json",                      /* no precision */
        "acme_tiny/fill-mask_fp32_settings.json",     /* no config */
        "acme_tiny/fill-mask_fp32_configx.json",      /* config then not _part */
        "acmetiny/fill-mask_fp32_config.json",        /* folder without <org>_ */
        "_tiny/fill-mask_fp32_config.json",           /* empty org */
        "acme_/fill-mask_fp32_config.json",           /* empty name */
        "acme_tiny/fill mask_fp32_config.json",       /* a blank in a folder name to be */
        "acme_tiny/fill-mask_fp32_config_a$b.json",   /* a part that is not a safe name */
        "fill-mask_fp32_config.json",                 /* no model folder */
        "acme_tiny/fill-mask_fp32_config.txt",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        wm_sweep_recipe r;
        wm_error err = {0};
        assert_int_equal(wm_sweep_parse_path(bad[i], &r, &err), WM_ERR_INPUT);
        assert_non_null(strstr(err.msg, bad[i]));
    }
}

static void test_shards(void **state) {
    (void)state;
    int i = -1, n = -1;
    wm_error err = {0};
    assert_int_equal(wm_sweep_parse_shard("0/2", &i, &n, &err), WM_OK);
    assert_int_equal(i, 0);
    assert_int_equal(n, 2);
    assert_int_equal(wm_sweep_parse_shard("99999/100000", &i, &n, &err), WM_OK);
    static const char *const bad[] = {"3/2", "2/2", "-1/2", "1/0", "1", "/2", "1/", "a/2", "1/2x", "+1/2", "1/+2",
                                      "0/100001", "1/-2", "", "99999999999999999999/2"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        wm_error e = {0};
        assert_int_equal(wm_sweep_parse_shard(bad[k], &i, &n, &e), WM_ERR_USAGE);
        assert_non_null(strstr(e.msg, "--shard"));
    }
    /* every index in exactly one of n slices */
    for (int nn = 1; nn <= 5; nn++)
        for (size_t idx = 0; idx < 40; idx++) {
            int hits = 0;
            for (int s = 0; s < nn; s++) hits += wm_sweep_in_shard(idx, s, nn);
            assert_int_equal(hits, 1);
        }
}

static void test_failure_classes(void **state) {
    (void)state;
    wm_sweep_proc ok = {0}, fail = {2, 0, 0, 0}, timeout = {-1, 9, 1, 0}, noexec = {127, 0, 0, 0}, crash = {-1, 11, 0, 0};
    assert_null(wm_sweep_classify(WM_SW_BUILD, &ok, "", NULL));
    assert_string_equal(wm_sweep_classify(WM_SW_PERF, &timeout, "", NULL), "TIMEOUT");
    assert_string_equal(wm_sweep_classify(WM_SW_BUILD, &noexec, "", NULL), "ENVIRONMENT");
    assert_string_equal(wm_sweep_classify(WM_SW_BUILD, &fail,
                                          "winml build: error: r.json: field 'loader.model_type': model_type 'x' is not "
                                          "supported", NULL), "EXPORT_FAIL");
    assert_string_equal(wm_sweep_classify(WM_SW_BUILD, &fail, "winml build: error: r.json: field 'quant.mode': 'qdq'", NULL),
                        "OPT_FAIL");
    assert_string_equal(wm_sweep_classify(WM_SW_BUILD, &crash, "", NULL), "EXPORT_FAIL");
    assert_string_equal(wm_sweep_classify(WM_SW_PERF, &crash, "", NULL), "RUNTIME_FAIL");
    /* analyze: exit 1 for anything short of supported; only "unsupported" blocks */
    wm_sweep_proc one = {1, 0, 0, 0};
    assert_null(wm_sweep_classify(WM_SW_ANALYZE, &one, "", "partial"));
    assert_null(wm_sweep_classify(WM_SW_ANALYZE, &one, "", "unknown"));
    assert_string_equal(wm_sweep_classify(WM_SW_ANALYZE, &one, "", "unsupported"), "ANALYZER_BLOCK");
    assert_string_equal(wm_sweep_classify(WM_SW_ANALYZE, &fail, "", NULL), "UNKNOWN");
}

/* Writes the recipe text to path and returns the --random-weights tiny config of it, parsed (cJSON_Delete it). */
static cJSON *tiny_config(const char *path, const char *recipe) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(recipe, f);
    fclose(f);
    wm_json j;
    wm_json_init(&j);
    wm_error err = {0};
    assert_int_equal(wm_sweep_tiny_config(path, &j, &err), WM_OK);
    cJSON *d = cJSON_Parse(wm_json_text(&j));
    assert_non_null(d);
    wm_json_free(&j);
    return d;
}

static void test_tiny_config_covers_the_recipes_sequence(void **state) {
    (void)state;
    char dir[64], path[128];
    assert_int_equal(wm_test_tmpdir_make(dir, sizeof dir, "sweep"), 0);
    snprintf(path, sizeof path, "%s/r.json", dir);
    cJSON *d = tiny_config(path, "{\"loader\": {\"task\": \"fill-mask\", \"model_type\": \"roberta\"}, \"export\": "
                                 "{\"input_tensors\": ["
                                 "{\"name\": \"input_ids\", \"dtype\": \"int64\", \"shape\": [1, 384]},"
                                 "{\"name\": \"attention_mask\", \"dtype\": \"int64\", \"shape\": [1, 384]}]}}");
    assert_string_equal(cJSON_GetObjectItem(d, "model_type")->valuestring, "roberta");
    assert_int_equal(cJSON_GetObjectItem(d, "max_position_embeddings")->valueint, 386);
    assert_int_equal(cJSON_GetObjectItem(d, "num_hidden_layers")->valueint, 1);
    cJSON_Delete(d);
    /* an unreadable recipe is an error naming it */
    wm_json j;
    wm_json_init(&j);
    wm_error err = {0};
    snprintf(path, sizeof path, "%s/missing.json", dir);
    assert_int_not_equal(wm_sweep_tiny_config(path, &j, &err), WM_OK);
    assert_non_null(strstr(err.msg, "missing.json"));
    wm_json_free(&j);
    assert_int_equal(wm_test_tmpdir_remove(dir), 0);
}

/* A reference part recipe of an encoder-decoder: the tiny config has the sizes its static shapes fix (heads, head
   size and slots from past_0_key, layers from the past count, the encoder's width); a composite gets sub-configs. */
static void test_tiny_config_of_a_part_recipe(void **state) {
    (void)state;
    char dir[64], path[128];
    assert_int_equal(wm_test_tmpdir_make(dir, sizeof dir, "sweep"), 0);
    snprintf(path, sizeof path, "%s/d.json", dir);
    static const char *const types[2] = {"marian", "vision-encoder-decoder"};
    for (int c = 0; c < 2; c++) {
        char recipe[1024];
        snprintf(recipe, sizeof recipe,
                 "{\"loader\": {\"task\": \"text2text-generation\", \"model_type\": \"%s\"}, \"export\": "
                "{\"input_tensors\": [{\"name\": \"decoder_input_ids\", \"dtype\": \"int32\", \"shape\": [1, 1]},"
                "{\"name\": \"encoder_hidden_states\", \"dtype\": \"float32\", \"shape\": [1, 577, 768]},"
                "{\"name\": \"decoder_attention_mask\", \"dtype\": \"int64\", \"shape\": [1, 1024]},"
                "{\"name\": \"cache_position\", \"dtype\": \"int64\", \"shape\": [1]},"
                "{\"name\": \"past_0_key\", \"dtype\": \"float32\", \"shape\": [1, 16, 1024, 64]},"
                "{\"name\": \"past_0_value\", \"dtype\": \"float32\", \"shape\": [1, 16, 1024, 64]},"
                "{\"name\": \"past_1_key\", \"dtype\": \"float32\", \"shape\": [1, 16, 1024, 64]},"
                "{\"name\": \"past_1_value\", \"dtype\": \"float32\", \"shape\": [1, 16, 1024, 64]}]}}",
                types[c]);
        cJSON *d = tiny_config(path, recipe);
        assert_string_equal(cJSON_GetObjectItem(d, "model_type")->valuestring, types[c]);
        cJSON *dec = c ? cJSON_GetObjectItem(d, "decoder") : d;
        assert_non_null(dec);
        assert_int_equal(cJSON_GetObjectItem(dec, "d_model")->valueint, 1024);
        assert_int_equal(cJSON_GetObjectItem(dec, "decoder_attention_heads")->valueint, 16);
        assert_int_equal(cJSON_GetObjectItem(dec, "decoder_layers")->valueint, 2);
        assert_int_equal(cJSON_GetObjectItem(dec, "max_position_embeddings")->valueint, 1024);
        if (c) {
            cJSON *enc = cJSON_GetObjectItem(d, "encoder");
            assert_string_equal(cJSON_GetObjectItem(dec, "model_type")->valuestring, "trocr");
            assert_string_equal(cJSON_GetObjectItem(enc, "model_type")->valuestring, "vit");
            assert_int_equal(cJSON_GetObjectItem(enc, "hidden_size")->valueint, 768);
        }
        cJSON_Delete(d);
    }
    assert_int_equal(wm_test_tmpdir_remove(dir), 0);
}

/* An encoder-decoder sequence-classifier recipe (bart-large-mnli's): the tiny config holds what the head needs
   (num_labels, eos_token_id, decoder_start_token_id) and positions for the recipe's 1024 tokens. */
static void test_tiny_config_of_a_sequence_classifier(void **state) {
    (void)state;
    char dir[64], path[128];
    assert_int_equal(wm_test_tmpdir_make(dir, sizeof dir, "sweep"), 0);
    snprintf(path, sizeof path, "%s/c.json", dir);
    cJSON *d = tiny_config(path, "{\"loader\": {\"task\": \"text-classification\", \"model_type\": \"bart\"}, "
                                 "\"export\": {\"input_tensors\": ["
                                 "{\"name\": \"input_ids\", \"dtype\": \"int32\", \"shape\": [1, 1024]},"
                                 "{\"name\": \"attention_mask\", \"dtype\": \"int32\", \"shape\": [1, 1024]}]}}");
    assert_string_equal(cJSON_GetObjectItem(d, "model_type")->valuestring, "bart");
    assert_int_equal(cJSON_GetObjectItem(d, "num_labels")->valueint, 3);
    assert_int_equal(cJSON_GetObjectItem(d, "eos_token_id")->valueint, 2);
    assert_int_equal(cJSON_GetObjectItem(d, "decoder_start_token_id")->valueint, 2);
    assert_int_equal(cJSON_GetObjectItem(d, "max_position_embeddings")->valueint, 1024);
    cJSON_Delete(d);
    assert_int_equal(wm_test_tmpdir_remove(dir), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys_of_reference_paths),
        cmocka_unit_test(test_names_outside_the_layout_are_refused),
        cmocka_unit_test(test_shards),
        cmocka_unit_test(test_failure_classes),
        cmocka_unit_test(test_tiny_config_covers_the_recipes_sequence),
        cmocka_unit_test(test_tiny_config_of_a_part_recipe),
        cmocka_unit_test(test_tiny_config_of_a_sequence_classifier),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
