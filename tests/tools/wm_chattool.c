/*
 * wm_chattool - renders chat templates with libwinml's Jinja subset, for the
 * oracle tests (tests/oracle/test_chat_template.py) and by hand.
 *
 *   wm_chattool cases SRC CASES.json
 *       SRC: a checkpoint folder, a tokenizer_config.json or a .jinja file
 *       (read with wm_chat_template_load). CASES.json: an array of objects
 *       {"messages": "<JSON text>", "add_generation_prompt": bool,
 *        "tools": "<JSON text>" (optional), "kwargs": "<JSON text>" (optional),
 *        "template": "<template text>" (optional: used instead of SRC's)}.
 *       The JSON values are passed as text so numbers keep their int/float
 *       form. Prints a JSON array: {"ok": rendering} or {"error": message}.
 *   wm_chattool render SRC MESSAGES.json [--gen] [--tools FILE] [--kwargs JSON]
 *       Prints the rendering of one conversation; errors go to stderr.
 *   wm_chattool text TEMPLATE.jinja VARS.json
 *       Renders a bare template with the variables of a JSON object (no chat
 *       normalization): for the Jinja construct tests.
 *   wm_chattool textcases CASES.json
 *       Many bare templates: [{"template": text, "vars": {name: "<JSON text>"}}]
 *       -> a JSON array of {"ok": rendering} or {"error": message}.
 * Exit codes: 0 ok, 2 error.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file.h"
#include "core/json.h"
#include "llm/chat.h"
#include "llm/jinja.h"

static int fail(const char *what, const wm_error *e) {
    fprintf(stderr, "wm_chattool: %s: %s\n", what, e->msg);
    return 2;
}

static char *slurp(const char *path, size_t *n) {
    wm_map m;
    wm_error e = {0};
    if (wm_map_file(path, 0, &m, &e)) {
        fprintf(stderr, "wm_chattool: %s\n", e.msg);
        return NULL;
    }
    char *s = malloc(m.size + 1);
    if (s) {
        if (m.size) memcpy(s, m.data, m.size);
        s[m.size] = 0;
        *n = m.size;
    }
    wm_unmap(&m);
    return s;
}

static const char *str_field(const cJSON *o, const char *k) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(x) ? x->valuestring : NULL;
}

static int run_cases(const char *src, const char *cases_path) {
    wm_error e = {0};
    wm_chat_template t, tt; /* the template without tools, and with tools ("tool_use" when there is one) */
    size_t n;
    char *text = slurp(cases_path, &n);
    if (!text) return 2;
    cJSON *cases = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsArray(cases)) {
        fprintf(stderr, "wm_chattool: %s: not a JSON array\n", cases_path);
        cJSON_Delete(cases);
        return 2;
    }
    if (wm_chat_template_load(src, NULL, 0, &t, &e)) {
        cJSON_Delete(cases);
        return fail(src, &e);
    }
    if (wm_chat_template_load(src, NULL, 1, &tt, &e)) {
        wm_chat_template_free(&t);
        cJSON_Delete(cases);
        return fail(src, &e);
    }
    wm_json j;
    wm_json_init(&j);
    wm_json_arr(&j, NULL);
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        wm_chat_vars v;
        wm_chat_vars_init(&v);
        wm_chat_vars_from_template(&v, &t);
        v.tools_json = str_field(c, "tools");
        v.extra_json = str_field(c, "kwargs");
        const char *msgs = str_field(c, "messages");
        const char *tmpl = str_field(c, "template");
        int gen = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "add_generation_prompt"));
        char *out = NULL;
        size_t out_len = 0;
        wm_error ce = {0};
        wm_json_obj(&j, NULL);
        if (!msgs) {
            wm_json_str(&j, "error", "case without \"messages\"");
        } else if (wm_chat_apply_json(tmpl ? tmpl : v.tools_json ? tt.source : t.source, msgs, strlen(msgs), gen, &v, &out, &out_len, &ce)) {
            wm_json_str(&j, "error", ce.msg);
            wm_json_str(&j, "status", wm_status_name(ce.status));
        } else {
            wm_json_strn(&j, "ok", out, out_len);
        }
        wm_json_obj_end(&j);
        free(out);
    }
    wm_json_arr_end(&j);
    cJSON_Delete(cases);
    wm_chat_template_free(&t);
    wm_chat_template_free(&tt);
    if (j.oom) {
        wm_json_free(&j);
        fprintf(stderr, "wm_chattool: out of memory\n");
        return 2;
    }
    fputs(wm_json_text(&j), stdout);
    fputc('\n', stdout);
    wm_json_free(&j);
    return 0;
}

static int run_one(int argc, char **argv) {
    const char *src = argv[2], *msgs_path = argv[3], *tools_path = NULL, *kwargs = NULL;
    int gen = 0;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--gen")) gen = 1;
        else if (!strcmp(argv[i], "--tools") && i + 1 < argc) tools_path = argv[++i];
        else if (!strcmp(argv[i], "--kwargs") && i + 1 < argc) kwargs = argv[++i];
        else {
            fprintf(stderr, "wm_chattool: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    wm_error e = {0};
    wm_chat_template t;
    if (wm_chat_template_load(src, NULL, tools_path != NULL, &t, &e)) return fail(src, &e);
    size_t n, tn;
    char *msgs = slurp(msgs_path, &n), *tools = tools_path ? slurp(tools_path, &tn) : NULL;
    int rc = 2;
    if (msgs && (!tools_path || tools)) {
        wm_chat_vars v;
        wm_chat_vars_init(&v);
        wm_chat_vars_from_template(&v, &t);
        v.tools_json = tools;
        v.extra_json = kwargs;
        char *out = NULL;
        size_t out_len;
        if (wm_chat_apply_json(t.source, msgs, n, gen, &v, &out, &out_len, &e)) {
            rc = fail(t.origin, &e);
        } else {
            fwrite(out, 1, out_len, stdout);
            rc = 0;
        }
        free(out);
    }
    free(msgs);
    free(tools);
    wm_chat_template_free(&t);
    return rc;
}

static int run_text(const char *tpath, const char *vpath) {
    size_t tn, vn;
    char *src = slurp(tpath, &tn), *vars = slurp(vpath, &vn);
    int rc = 2;
    wm_error e = {0};
    wm_jinja *t = NULL;
    wm_jinja_ctx *cx = NULL;
    if (!src || !vars) goto done;
    if (wm_jinja_compile(src, tn, NULL, &t, &e) || wm_jinja_ctx_new(NULL, 0, &cx, &e)) {
        rc = fail(tpath, &e);
        goto done;
    }
    cJSON *root = cJSON_Parse(vars);
    const cJSON *it;
    /* each top-level key's value is JSON text (so ints and floats keep their form) */
    cJSON_ArrayForEach(it, root) {
        if (!cJSON_IsString(it) || wm_jinja_ctx_set_json(cx, it->string, it->valuestring, strlen(it->valuestring), &e)) {
            if (!e.msg[0]) snprintf(e.msg, sizeof e.msg, "variable %s: value must be JSON text", it->string);
            cJSON_Delete(root);
            rc = fail(vpath, &e);
            goto done;
        }
    }
    cJSON_Delete(root);
    char *out;
    size_t on;
    if (wm_jinja_render(t, cx, &out, &on, &e)) {
        rc = fail(tpath, &e);
        goto done;
    }
    fwrite(out, 1, on, stdout);
    free(out);
    rc = 0;
done:
    free(src);
    free(vars);
    wm_jinja_ctx_free(cx);
    wm_jinja_free(t);
    return rc;
}

static int text_case(const cJSON *c, char **out, size_t *on, wm_error *e) {
    const char *src = str_field(c, "template");
    wm_jinja *t = NULL;
    wm_jinja_ctx *cx = NULL;
    int rc = -1;
    if (!src) {
        snprintf(e->msg, sizeof e->msg, "case without \"template\"");
        return -1;
    }
    if (wm_jinja_compile(src, strlen(src), NULL, &t, e) || wm_jinja_ctx_new(NULL, 1700000000, &cx, e)) goto done;
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(c, "vars")) {
        if (!cJSON_IsString(it)) {
            snprintf(e->msg, sizeof e->msg, "variable %s: value must be JSON text", it->string);
            goto done;
        }
        if (wm_jinja_ctx_set_json(cx, it->string, it->valuestring, strlen(it->valuestring), e)) goto done;
    }
    if (wm_jinja_render(t, cx, out, on, e)) goto done;
    rc = 0;
done:
    wm_jinja_ctx_free(cx);
    wm_jinja_free(t);
    return rc;
}

static int run_textcases(const char *path) {
    size_t n;
    char *text = slurp(path, &n);
    if (!text) return 2;
    cJSON *cases = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsArray(cases)) {
        fprintf(stderr, "wm_chattool: %s: not a JSON array\n", path);
        cJSON_Delete(cases);
        return 2;
    }
    wm_json j;
    wm_json_init(&j);
    wm_json_arr(&j, NULL);
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        char *out = NULL;
        size_t on = 0;
        wm_error e = {0};
        wm_json_obj(&j, NULL);
        if (text_case(c, &out, &on, &e)) wm_json_str(&j, "error", e.msg);
        else wm_json_strn(&j, "ok", out, on);
        wm_json_obj_end(&j);
        free(out);
    }
    wm_json_arr_end(&j);
    cJSON_Delete(cases);
    fputs(wm_json_text(&j), stdout);
    fputc('\n', stdout);
    wm_json_free(&j);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "textcases")) return run_textcases(argv[2]);
    if (argc == 4 && !strcmp(argv[1], "cases")) return run_cases(argv[2], argv[3]);
    if (argc >= 4 && !strcmp(argv[1], "render")) return run_one(argc, argv);
    if (argc == 4 && !strcmp(argv[1], "text")) return run_text(argv[2], argv[3]);
    fprintf(stderr, "usage: wm_chattool cases SRC CASES.json | render SRC MESSAGES.json [--gen] [--tools F] [--kwargs JSON]"
                    " | text TEMPLATE VARS.json\n");
    return 2;
}
