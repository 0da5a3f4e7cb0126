/* Unit tests of src/hf/config.c: typed config.json / generation / tokenizer config, hostile JSON. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "hf/config.h"
#include "unit_tmpdir.h"

static wm_status parse(const char *text, wm_hf_config *c, wm_error *e) {
    memset(e, 0, sizeof *e);
    return wm_hf_config_parse(text, strlen(text), "config.json", c, e);
}

static void expect_error(const char *text, wm_status want, const char *needle) {
    wm_hf_config c;
    wm_error e;
    wm_status s = parse(text, &c, &e);
    if (s != want || !strstr(e.msg, needle)) {
        print_error("status %d (want %d), message '%s' (want '%s')\n", s, want, e.msg, needle);
        fail();
    }
    assert_null(c.root); /* nothing kept after an error */
}

static void test_aliases_and_types(void **state) {
    (void)state;
    wm_hf_config c;
    wm_error e;
    assert_int_equal(parse("{\"model_type\": \"gpt2\", \"architectures\": [\"GPT2LMHeadModel\"], \"n_embd\": 768,"
                           " \"n_layer\": 12, \"n_head\": 12, \"n_positions\": 1024, \"vocab_size\": 50257,"
                           " \"n_inner\": null, \"layer_norm_epsilon\": 1e-5, \"activation_function\": \"gelu_new\","
                           " \"eos_token_id\": 50256, \"tie_word_embeddings\": true, \"unknown_key\": {\"a\": [1]}}",
                           &c, &e),
                     WM_OK);
    assert_string_equal(c.model_type, "gpt2");
    assert_int_equal(c.n_architectures, 1);
    assert_int_equal(c.hidden_size, 768);
    assert_string_equal(c.key_hidden, "n_embd");
    assert_int_equal(c.num_layers, 12);
    assert_int_equal(c.num_heads, 12);
    assert_int_equal(c.intermediate_size, -1); /* null = absent */
    assert_int_equal(c.max_positions, 1024);
    assert_true(fabs(c.norm_eps - 1e-5) < 1e-12);
    assert_string_equal(c.activation, "gelu_new");
    assert_int_equal(c.eos.n, 1);
    assert_int_equal(c.eos.v[0], 50256);
    assert_int_equal(c.tie_word_embeddings, 1);
    assert_int_equal(c.attention_bias, -1);
    assert_false(c.has_rope);
    wm_hf_config_free(&c);
}

static void test_rope_forms(void **state) {
    (void)state;
    wm_hf_config c;
    wm_error e;
    /* transformers 4: top-level theta + rope_scaling */
    assert_int_equal(parse("{\"model_type\": \"llama\", \"rope_theta\": 500000.0, \"rope_scaling\": {\"rope_type\": "
                           "\"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1, \"high_freq_factor\": 4, "
                           "\"original_max_position_embeddings\": 8192}}", &c, &e), WM_OK);
    assert_true(c.has_rope);
    assert_string_equal(c.rope.type, "llama3");
    assert_string_equal(c.rope.source, "rope_scaling");
    assert_true(c.rope.theta == 500000.0 && c.rope.factor == 8.0 && c.rope.high_freq_factor == 4.0);
    assert_int_equal(c.rope.original_max_pos, 8192);
    wm_hf_config_free(&c);
    /* transformers 5: rope_parameters */
    assert_int_equal(parse("{\"model_type\": \"phi3\", \"rope_parameters\": {\"rope_type\": \"longrope\", "
                           "\"rope_theta\": 10000, \"partial_rotary_factor\": 0.5, \"short_factor\": [1, 1.5],"
                           " \"long_factor\": [2, 3]}, \"original_max_position_embeddings\": 4096}", &c, &e), WM_OK);
    assert_string_equal(c.rope.type, "longrope");
    assert_true(c.rope.partial_rotary_factor == 0.5);
    assert_int_equal(c.rope.n_short, 2);
    assert_true(c.rope.long_factor[1] == 3.0);
    assert_int_equal(c.rope.original_max_pos, 4096);
    wm_hf_config_free(&c);
    expect_error("{\"rope_scaling\": {\"type\": \"linear\", \"rope_type\": \"yarn\"}}", WM_ERR_INPUT, "disagree");
    expect_error("{\"rope_scaling\": {\"type\": \"linear\", \"factor\": \"2\"}}", WM_ERR_INPUT,
                 "'rope_scaling.factor': expected a number");
    expect_error("{\"rope_scaling\": [1]}", WM_ERR_INPUT, "'rope_scaling': expected an object");
}

static void test_labels_ids_layers(void **state) {
    (void)state;
    wm_hf_config c;
    wm_error e;
    assert_int_equal(parse("{\"id2label\": {\"1\": \"pos\", \"0\": \"neg\"}, \"eos_token_id\": [2, 7],"
                           " \"layer_types\": [\"full_attention\", \"sliding_attention\"]}", &c, &e), WM_OK);
    assert_int_equal(c.num_labels, 2);
    assert_string_equal(c.labels[0], "neg");
    assert_string_equal(c.labels[1], "pos");
    assert_int_equal(c.eos.n, 2);
    assert_int_equal(c.eos.v[1], 7);
    assert_int_equal(c.n_layer_types, 2);
    assert_int_equal(c.layer_sliding[1], 1);
    wm_hf_config_free(&c);
    expect_error("{\"id2label\": {\"0\": \"a\", \"2\": \"b\"}}", WM_ERR_INPUT, "id2label");
    expect_error("{\"num_labels\": 3, \"id2label\": {\"0\": \"a\"}}", WM_ERR_INPUT, "disagree");
    expect_error("{\"eos_token_id\": [1, -2]}", WM_ERR_INPUT, "eos_token_id");
    expect_error("{\"eos_token_id\": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}", WM_ERR_INPUT, "more than");
    expect_error("{\"layer_types\": [\"chunked_attention\"]}", WM_ERR_UNSUPPORTED, "chunked_attention");
}

static void test_hostile(void **state) {
    (void)state;
    expect_error("{\"auto_map\": {\"AutoModel\": \"x.Y\"}}", WM_ERR_UNSUPPORTED, "auto_map");
    expect_error("{\"hidden_size\": \"768\"}", WM_ERR_INPUT, "'hidden_size': expected an integer, got a string");
    expect_error("{\"hidden_size\": 768.5}", WM_ERR_INPUT, "hidden_size");
    expect_error("{\"hidden_size\": 0}", WM_ERR_INPUT, "hidden_size");
    expect_error("{\"hidden_size\": 1e300}", WM_ERR_INPUT, "hidden_size");
    expect_error("{\"hidden_size\": 64, \"n_embd\": 32}", WM_ERR_INPUT, "disagree");
    expect_error("{\"hidden_size\": 64, \"hidden_size\": 64}", WM_ERR_INPUT, "twice");
    expect_error("{\"layer_norm_eps\": 2}", WM_ERR_INPUT, "layer_norm_eps");
    expect_error("[1, 2]", WM_ERR_INPUT, "not a JSON object");
    expect_error("{\"a\": 1} x", WM_ERR_INPUT, "trailing");
    expect_error("{\"a\": tru}", WM_ERR_INPUT, "not valid JSON");
    /* 65 levels: refused by the depth scan; brackets inside strings do not count */
    char deep[256] = "{\"a\":";
    for (int i = 0; i < 64; i++) strcat(deep, "[");
    for (int i = 0; i < 64; i++) strcat(deep, "]");
    strcat(deep, "}");
    expect_error(deep, WM_ERR_INPUT, "nested deeper than 64");
    wm_hf_config c;
    wm_error e;
    assert_int_equal(parse("{\"s\": \"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\\"[[[\"}",
                           &c, &e), WM_OK);
    wm_hf_config_free(&c);
    /* a NUL byte inside the text */
    const char nul[] = "{\"a\": \"x\0y\"}";
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_hf_config_parse(nul, sizeof nul - 1, "config.json", &c, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "NUL"));
    /* 100,000 levels: the scan stops at the cap without recursing */
    size_t n = 200002;
    char *big = malloc(n + 16);
    assert_non_null(big);
    big[0] = '{';
    memcpy(big + 1, "\"x\":", 4);
    memset(big + 5, '[', 100000);
    memset(big + 100005, ']', 100000);
    memcpy(big + 200005, "}", 2);
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_hf_config_parse(big, strlen(big), "config.json", &c, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "nested deeper"));
    free(big);
}

/* Numbers beyond the double range (cJSON would make them inf) and values out of their meaning's range. */
static void test_numbers_finite_and_in_range(void **state) {
    (void)state;
    /* the scan names the field (dotted path, list index) and the literal as written */
    expect_error("{\"rope_theta\": 1e999}", WM_ERR_INPUT, "config.json: field 'rope_theta': 1e999 is not a finite number");
    expect_error("{\"rope_scaling\": {\"type\": \"linear\", \"factor\": -1E+400}}", WM_ERR_INPUT,
                 "field 'rope_scaling.factor': -1E+400 is not a finite number");
    expect_error("{\"rope_scaling\": {\"long_factor\": [1, 2, 1e999]}}", WM_ERR_INPUT,
                 "field 'rope_scaling.long_factor[2]': 1e999");
    expect_error("{\"hidden_size\": 1e999}", WM_ERR_INPUT, "field 'hidden_size': 1e999 is not a finite number");
    expect_error("{\"unmodelled\": {\"x\": [0, {\"y\": 2e308}]}}", WM_ERR_INPUT, "field 'unmodelled.x[1].y': 2e308");
    /* 400 digits with no exponent overflow too; a tiny exponent underflows to 0, which is finite */
    char big[512] = "{\"max_position_embeddings\": ";
    for (int i = 0; i < 400; i++) strcat(big, "9");
    strcat(big, "}");
    expect_error(big, WM_ERR_INPUT, "is not a finite number");
    /* positive-only fields: refused at <= 0 naming the field and the value */
    expect_error("{\"rope_theta\": 0}", WM_ERR_INPUT, "field 'rope_theta': 0 is out of range (it must be > 0)");
    expect_error("{\"rope_theta\": -10000}", WM_ERR_INPUT, "field 'rope_theta': -10000 is out of range");
    expect_error("{\"rope_scaling\": {\"type\": \"linear\", \"factor\": 0}}", WM_ERR_INPUT,
                 "field 'rope_scaling.factor': 0 is out of range (it must be > 0)");
    expect_error("{\"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": -4}}", WM_ERR_INPUT,
                 "field 'rope_parameters.factor': -4 is out of range");
    expect_error("{\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 0}}",
                 WM_ERR_INPUT, "field 'rope_scaling.low_freq_factor': 0");
    expect_error("{\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4, \"beta_fast\": -32}}", WM_ERR_INPUT,
                 "field 'rope_scaling.beta_fast': -32");
    expect_error("{\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4, \"attention_factor\": 0}}",
                 WM_ERR_INPUT, "field 'rope_scaling.attention_factor': 0");
    expect_error("{\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4, \"mscale\": -1}}", WM_ERR_INPUT,
                 "field 'rope_scaling.mscale': -1 is out of range (it must be >= 0)");
    expect_error("{\"partial_rotary_factor\": 0}", WM_ERR_INPUT, "field 'partial_rotary_factor': 0 is out of range");
    expect_error("{\"partial_rotary_factor\": 1.25}", WM_ERR_INPUT, "(0, 1]");
    expect_error("{\"rope_scaling\": {\"rope_type\": \"longrope\", \"short_factor\": [1, -0.5]}}", WM_ERR_INPUT,
                 "field 'rope_scaling.short_factor[1]': -0.5 is out of range");
    expect_error("{\"rms_norm_eps\": 0}", WM_ERR_INPUT, "field 'rms_norm_eps': 0 is out of range");
    expect_error("{\"num_attention_heads\": -1}", WM_ERR_INPUT, "'num_attention_heads'");
    /* the edges that are meaningful stay accepted */
    wm_hf_config c;
    wm_error e;
    assert_int_equal(parse("{\"rope_theta\": 1e-300, \"partial_rotary_factor\": 1, \"rope_scaling\": {\"rope_type\": "
                           "\"yarn\", \"factor\": 0.5, \"mscale\": 0, \"mscale_all_dim\": 0}, \"x\": 1e-999}", &c, &e),
                     WM_OK);
    assert_true(c.rope.factor == 0.5 && c.rope.mscale == 0 && c.rope.partial_rotary_factor == 1);
    wm_hf_config_free(&c);
    /* generation_config.json and tokenizer_config.json: the same scan and ranges */
    static const struct {
        const char *text, *needle;
    } gen[] = {
        {"{\"temperature\": 1e999}", "generation_config.json: field 'temperature': 1e999 is not a finite number"},
        {"{\"temperature\": -0.5}", "field 'temperature': -0.5 is out of range (it must be >= 0)"},
        {"{\"top_p\": 1.5}", "field 'top_p': 1.5 is out of range (it must be in [0, 1])"},
        {"{\"repetition_penalty\": 0}", "field 'repetition_penalty': 0 is out of range (it must be > 0)"},
        {"{\"top_k\": -1}", "field 'top_k'"},
    };
    for (size_t i = 0; i < sizeof gen / sizeof gen[0]; i++) {
        wm_hf_gen_config g;
        memset(&e, 0, sizeof e);
        assert_int_equal(wm_hf_gen_config_parse(gen[i].text, strlen(gen[i].text), NULL, &g, &e), WM_ERR_INPUT);
        if (!strstr(e.msg, gen[i].needle)) {
            print_error("'%s': message '%s' lacks '%s'\n", gen[i].text, e.msg, gen[i].needle);
            fail();
        }
    }
    wm_hf_tok_config t;
    const char *tt[] = {"{\"model_max_length\": 0}", "{\"model_max_length\": 1e999}"};
    for (int i = 0; i < 2; i++) {
        memset(&e, 0, sizeof e);
        assert_int_equal(wm_hf_tok_config_parse(tt[i], strlen(tt[i]), NULL, &t, &e), WM_ERR_INPUT);
        assert_non_null(strstr(e.msg, "tokenizer_config.json: field 'model_max_length'"));
    }
}

static void test_generation_and_tokenizer(void **state) {
    (void)state;
    wm_error e = {0};
    wm_hf_gen_config g;
    const char *gt = "{\"eos_token_id\": [151645, 151643], \"top_k\": 20, \"temperature\": 0.7, \"do_sample\": true}";
    assert_int_equal(wm_hf_gen_config_parse(gt, strlen(gt), NULL, &g, &e), WM_OK);
    assert_int_equal(g.eos.n, 2);
    assert_int_equal(g.top_k, 20);
    assert_int_equal(g.do_sample, 1);
    assert_true(isnan(g.top_p));
    wm_hf_gen_config_free(&g);
    const char *bad = "{\"top_k\": \"20\"}";
    assert_int_equal(wm_hf_gen_config_parse(bad, strlen(bad), NULL, &g, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "top_k"));
    wm_hf_tok_config t;
    const char *tt = "{\"eos_token\": {\"content\": \"</s>\", \"lstrip\": false}, \"bos_token\": \"<s>\","
                     " \"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"},"
                     " {\"name\": \"default\", \"template\": \"D\"}], \"model_max_length\": 1e30}";
    memset(&e, 0, sizeof e);
    assert_int_equal(wm_hf_tok_config_parse(tt, strlen(tt), NULL, &t, &e), WM_OK);
    assert_string_equal(t.eos_token, "</s>");
    assert_string_equal(t.bos_token, "<s>");
    assert_string_equal(t.chat_template, "D");
    assert_int_equal(t.n_chat_templates, 2);
    assert_true(t.model_max_length == 1e30);
    wm_hf_tok_config_free(&t);
    const char *t2 = "{\"chat_template\": \"{{ x }}\"}";
    assert_int_equal(wm_hf_tok_config_parse(t2, strlen(t2), NULL, &t, &e), WM_OK);
    assert_string_equal(t.chat_template, "{{ x }}");
    wm_hf_tok_config_free(&t);
    const char *t3 = "{\"chat_template\": [{\"name\": \"default\"}]}";
    assert_int_equal(wm_hf_tok_config_parse(t3, strlen(t3), NULL, &t, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "chat_template"));
}

/* A FIFO or a folder where a checkpoint file belongs: named for what it is, without blocking, never "missing". */
static void test_checkpoint_files_of_other_kinds(void **state) {
    (void)state;
    char dir[64], p[256];
    assert_int_equal(wm_test_tmpdir_make(dir, sizeof dir, "cfgkind"), 0);
    static const char *const names[] = {"config.json", "generation_config.json", "tokenizer_config.json",
                                        "model.safetensors"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        for (int kind = 0; kind < 2; kind++) {
            snprintf(p, sizeof p, "%s/config.json", dir);
            FILE *f = fopen(p, "w");
            assert_non_null(f);
            fputs("{\"model_type\": \"llama\"}", f);
            fclose(f);
            snprintf(p, sizeof p, "%s/%s", dir, names[i]);
            unlink(p);
            assert_int_equal(kind ? mkdir(p, 0755) : mkfifo(p, 0644), 0);
            wm_hf_checkpoint ck;
            wm_error e = {0};
            assert_int_equal(wm_hf_open_checkpoint(dir, &ck, &e), WM_ERR_INPUT);
            char want[300];
            snprintf(want, sizeof want, "%s: is %s (a regular file is needed)", p, kind ? "a folder" : "a FIFO");
            if (strcmp(e.msg, want)) {
                print_error("message '%s', want '%s'\n", e.msg, want);
                fail();
            }
            if (kind) rmdir(p);
            else unlink(p);
        }
    wm_hf_checkpoint ck;
    wm_error e = {0};
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    assert_int_equal(wm_hf_open_checkpoint(dir, &ck, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "config.json: missing"));
    assert_int_equal(wm_test_tmpdir_remove(dir), 0);
}

/* Python's json output (eval compare's metrics): Infinity, -Infinity -> +-inf, NaN -> null, strings untouched;
   the strict loader refuses the same file */
static void test_python_json_tokens(void **state) {
    (void)state;
    char dir[64], p[128];
    assert_int_equal(wm_test_tmpdir_make(dir, sizeof dir, "pyjson"), 0);
    snprintf(p, sizeof p, "%s/m.json", dir);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("{\"a\": Infinity, \"b\": [-Infinity, NaN, 1.5], \"s\": \"NaN \\\" Infinity\"}", f);
    fclose(f);
    cJSON *root = NULL;
    wm_error e = {0};
    assert_int_not_equal(wm_hf_json_load_value(p, 1 << 20, &root, &e), WM_OK);
    assert_int_equal(wm_hf_json_load_py(p, 1 << 20, &root, &e), WM_OK);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "a"), *b = cJSON_GetObjectItemCaseSensitive(root, "b");
    assert_true(cJSON_IsNumber(a) && isinf(a->valuedouble) && a->valuedouble > 0);
    assert_true(isinf(cJSON_GetArrayItem(b, 0)->valuedouble) && cJSON_GetArrayItem(b, 0)->valuedouble < 0);
    assert_true(cJSON_IsNull(cJSON_GetArrayItem(b, 1)));
    assert_true(cJSON_GetArrayItem(b, 2)->valuedouble == 1.5);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(root, "s")->valuestring, "NaN \" Infinity");
    cJSON_Delete(root);
    assert_int_equal(wm_test_tmpdir_remove(dir), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aliases_and_types), cmocka_unit_test(test_rope_forms),
        cmocka_unit_test(test_labels_ids_layers), cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_generation_and_tokenizer), cmocka_unit_test(test_numbers_finite_and_in_range),
        cmocka_unit_test(test_checkpoint_files_of_other_kinds), cmocka_unit_test(test_python_json_tokens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
