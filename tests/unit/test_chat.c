/* Unit tests of llm/chat.h: the variables and message normalization apply_chat_template gives a
 * template, and reading a checkpoint's template (tokenizer_config.json string and list forms,
 * chat_template.jinja, AddedToken special tokens, bad configs). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "llm/chat.h"
#include "unit_tmpdir.h"

static void write_file(const char *dir, const char *name, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_apply_struct_messages(void **state) {
    (void)state;
    const char *tmpl =
        "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% if m.reasoning_content %}[{{ m.thinking }}]"
        "{% endif %}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}"
        "|{{ tools is none }}|{{ enable_thinking is defined }}|{{ date_string }}|{{ eos_token is defined }}";
    wm_chat_message msgs[] = {{"system", "sys", NULL}, {"user", "hi \"there\"\n", NULL}, {"assistant", "ok", "why"}};
    wm_chat_vars v;
    wm_chat_vars_init(&v);
    v.bos_token = "<s>";
    v.date_string = "26 Jul 2024";
    char *out = NULL;
    wm_error err = {0};
    assert_int_equal(wm_chat_apply(tmpl, msgs, 3, 1, &v, &out, &err), WM_OK);
    assert_string_equal(out, "<s><system>sys<user>hi \"there\"\n<assistant>ok[why]<assistant>|True|False|26 Jul 2024|False");
    free(out);
    assert_int_equal(wm_chat_apply(tmpl, msgs, 2, 0, NULL, &out, &err), WM_OK);
    assert_string_equal(out, "<system>sys<user>hi \"there\"\n|True|False||False");
    free(out);
}

static void test_normalization(void **state) {
    (void)state;
    /* null keys dropped; reasoning given as "thinking" (first) and "reasoning_content" (last) */
    const char *msgs = "[{\"role\": \"assistant\", \"content\": null, \"reasoning\": \"r1\", \"x\": 1.0},"
                       " {\"role\": \"user\", \"content\": \"u\", \"thinking\": \"t\", \"reasoning_content\": null}]";
    char *out = NULL;
    size_t n;
    wm_error err = {0};
    wm_chat_vars v;
    wm_chat_vars_init(&v);
    v.extra_json = "{\"flag\": true, \"bos_token\": \"override\"}";
    v.bos_token = "<s>";
    assert_int_equal(wm_chat_apply_json("{{ messages|tojson }} {{ flag }} {{ bos_token }}", msgs, strlen(msgs), 0, &v, &out, &n, &err), WM_OK);
    assert_string_equal(out, "[{\"thinking\": \"r1\", \"role\": \"assistant\", \"reasoning\": \"r1\", \"x\": 1.0, \"reasoning_content\": \"r1\"},"
                             " {\"thinking\": \"t\", \"role\": \"user\", \"content\": \"u\", \"reasoning_content\": \"t\"}] True override");
    free(out);
    /* errors: empty conversation, not a list, a reserved variable, bad JSON */
    const char *bad[][2] = {{"[]", NULL}, {"{}", NULL}, {"[1]", NULL}, {"[{\"role\": \"user\"}]", "{\"messages\": 1}"}, {"[{", NULL}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        wm_chat_vars_init(&v);
        v.extra_json = bad[i][1];
        memset(&err, 0, sizeof err);
        assert_int_not_equal(wm_chat_apply_json("x", bad[i][0], strlen(bad[i][0]), 0, &v, &out, &n, &err), WM_OK);
        assert_null(out);
        assert_true(strlen(err.msg) > 0);
    }
    /* a template error comes through with its position */
    memset(&err, 0, sizeof err);
    assert_int_not_equal(wm_chat_apply_json("{{ raise_exception('no system') }}", "[{\"role\": \"user\"}]", 18, 0, NULL, &out, &n, &err), WM_OK);
    assert_non_null(strstr(err.msg, "line 1 col 19: raise_exception: no system"));
}

static void test_template_load(void **state) {
    (void)state;
    char dir[128], sub[256];
    assert_int_equal(wm_test_tmpdir_make(dir, sizeof dir, "chat"), 0);
    wm_chat_template t;
    wm_error err = {0};
    /* string form + AddedToken objects */
    write_file(dir, "tokenizer_config.json",
               "{\"chat_template\": \"T1\", \"bos_token\": {\"__type\": \"AddedToken\", \"content\": \"<s>\"},"
               " \"eos_token\": \"</s>\", \"pad_token\": null, \"model_max_length\": 1000000000000000019884624838656}");
    assert_int_equal(wm_chat_template_load(dir, NULL, 0, &t, &err), WM_OK);
    assert_string_equal(t.source, "T1");
    assert_string_equal(t.bos_token, "<s>");
    assert_string_equal(t.eos_token, "</s>");
    assert_null(t.pad_token);
    wm_chat_template_free(&t);
    /* chat_template.jinja wins over the config's */
    write_file(dir, "chat_template.jinja", "FROM FILE");
    assert_int_equal(wm_chat_template_load(dir, NULL, 0, &t, &err), WM_OK);
    assert_string_equal(t.source, "FROM FILE");
    assert_string_equal(t.bos_token, "<s>");
    wm_chat_template_free(&t);
    snprintf(sub, sizeof sub, "%s/chat_template.jinja", dir);
    remove(sub);
    /* list form: default, tool_use when tools are given, a named one, a missing name */
    write_file(dir, "tokenizer_config.json",
               "{\"chat_template\": [{\"name\": \"default\", \"template\": \"D\"}, {\"name\": \"tool_use\", \"template\": \"TU\"},"
               " {\"name\": \"rag\", \"template\": \"R\"}]}");
    assert_int_equal(wm_chat_template_load(dir, NULL, 0, &t, &err), WM_OK);
    assert_string_equal(t.source, "D");
    wm_chat_template_free(&t);
    assert_int_equal(wm_chat_template_load(dir, NULL, 1, &t, &err), WM_OK);
    assert_string_equal(t.source, "TU");
    wm_chat_template_free(&t);
    assert_int_equal(wm_chat_template_load(dir, "rag", 0, &t, &err), WM_OK);
    assert_string_equal(t.source, "R");
    wm_chat_template_free(&t);
    memset(&err, 0, sizeof err);
    assert_int_not_equal(wm_chat_template_load(dir, "nope", 0, &t, &err), WM_OK);
    assert_non_null(strstr(err.msg, "no chat template named 'nope' (templates: default, tool_use, rag)"));
    memset(&err, 0, sizeof err);
    assert_int_not_equal(wm_chat_template_load(dir, "../x", 0, &t, &err), WM_OK);
    assert_null(t.source);
    /* additional_chat_templates/NAME.jinja */
    snprintf(sub, sizeof sub, "%s/additional_chat_templates", dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    write_file(sub, "extra.jinja", "EXTRA");
    assert_int_equal(wm_chat_template_load(dir, "extra", 0, &t, &err), WM_OK);
    assert_string_equal(t.source, "EXTRA");
    wm_chat_template_free(&t);
    /* a .jinja path, and a tokenizer_config.json path */
    snprintf(sub, sizeof sub, "%s/additional_chat_templates/extra.jinja", dir);
    assert_int_equal(wm_chat_template_load(sub, NULL, 0, &t, &err), WM_OK);
    assert_string_equal(t.source, "EXTRA");
    wm_chat_template_free(&t);
    snprintf(sub, sizeof sub, "%s/tokenizer_config.json", dir);
    assert_int_equal(wm_chat_template_load(sub, NULL, 0, &t, &err), WM_OK);
    assert_string_equal(t.source, "D");
    wm_chat_template_free(&t);
    /* a config without chat_template next to chat_template.jinja (the .jinja gives the only template) */
    write_file(dir, "tokenizer_config.json", "{\"eos_token\": \"E\"}");
    write_file(dir, "chat_template.jinja", "ONLY FILE");
    for (int k = 0; k < 2; k++) { /* twice: nothing may leak from one call's stack into the next */
        assert_int_equal(wm_chat_template_load(dir, NULL, 0, &t, &err), WM_OK);
        assert_string_equal(t.source, "ONLY FILE");
        assert_string_equal(t.eos_token, "E");
        assert_string_equal(t.origin, "chat_template.jinja");
        wm_chat_template_free(&t);
    }
    snprintf(sub, sizeof sub, "%s/chat_template.jinja", dir);
    remove(sub);
    /* bad configs */
    const char *bad[] = {"{\"chat_template\": 5}", "{\"chat_template\": [{\"name\": \"default\"}]}", "[1]", "{",
                         "{\"bos_token\": {\"x\": 1}, \"chat_template\": \"t\"}", "{\"bos_token\": 3, \"chat_template\": \"t\"}",
                         "{\"eos_token\": \"\\u0000\", \"chat_template\": \"t\"}", "{\"no_template\": true}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(dir, "tokenizer_config.json", bad[i]);
        memset(&err, 0, sizeof err);
        assert_int_not_equal(wm_chat_template_load(dir, NULL, 0, &t, &err), WM_OK);
        assert_null(t.source);
        assert_true(strlen(err.msg) > 0);
    }
    assert_int_equal(wm_test_tmpdir_remove(dir), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_apply_struct_messages),
        cmocka_unit_test(test_normalization),
        cmocka_unit_test(test_template_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
