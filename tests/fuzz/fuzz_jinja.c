/*
 * libFuzzer target for the chat-template Jinja subset (llm/jinja.h, llm/chat.h).
 * The input is a template: it is compiled and, when that succeeds, rendered over a fixed
 * conversation (system, user, assistant with a <think> block and a tool call, tool result)
 * with tools, under small limits so each run stays fast. The same bytes are also given to
 * the JSON reader as a messages array. Any input must end in WM_OK or a one-line error:
 * never a crash, a leak, a hang or an output past the limit.
 * An input starting with byte 0x01 is instead a tokenizer_config.json (the rest of it),
 * read by wm_chat_template_load from a scratch folder, with and without tools, and the
 * template it yields rendered as above.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "llm/chat.h"
#include "llm/jinja.h"

static char dir[64];

static void cleanup(void) {
    char p[128];
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    unlink(p);
    rmdir(dir);
}

/* config mode: returns the template source it loaded (malloc'ed) or NULL */
static char *load_config(const uint8_t *data, size_t size) {
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/wm_fuzz_jinja_XXXXXX");
        if (!mkdtemp(dir)) abort();
        atexit(cleanup);
    }
    char p[128];
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    FILE *f = fopen(p, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    char *src = NULL;
    for (int tools = 0; tools < 2; tools++) {
        wm_chat_template t;
        wm_error err = {0};
        if (wm_chat_template_load(dir, NULL, tools, &t, &err) == WM_OK) {
            if (!t.source) abort();
            if (!src) src = strdup(t.source);
            wm_chat_template_free(&t);
        } else if (!err.msg[0] || t.source) {
            abort();
        }
    }
    return src;
}

static const char MSGS[] =
    "[{\"role\": \"system\", \"content\": \"You are helpful.\"},"
    " {\"role\": \"user\", \"content\": \"Hi \\u00e9 \\ud83d\\ude42\\nthere\"},"
    " {\"role\": \"assistant\", \"content\": \"<think>\\nhmm\\n</think>\\n\\nHello\","
    "  \"tool_calls\": [{\"id\": \"abcdefghi\", \"type\": \"function\","
    "  \"function\": {\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2.5}}}]},"
    " {\"role\": \"tool\", \"content\": \"3.5\", \"tool_call_id\": \"abcdefghi\"},"
    " {\"role\": \"user\", \"content\": \"  thanks  \"}]";
static const char TOOLS[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"add\", \"description\": \"Add\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"number\"}}}}}]";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    wm_jinja_limits lim;
    wm_jinja_limits_default(&lim);
    lim.max_output = 1u << 20;
    lim.max_memory = 32u << 20;
    lim.max_steps = 200000;
    lim.max_iterations = 20000;
    lim.max_depth = 64;
    char *src;
    if (size && data[0] == 1) {
        if (!(src = load_config(data + 1, size - 1))) return 0;
        size = strlen(src);
    } else {
        if (!(src = malloc(size + 1))) return 0;
        memcpy(src, data, size);
        src[size] = 0;
    }
    wm_chat_vars v;
    wm_chat_vars_init(&v);
    v.bos_token = "<s>";
    v.eos_token = "</s>";
    v.tools_json = TOOLS;
    v.date_string = "26 Jul 2024";
    v.enable_thinking = (int)(size & 1);
    v.now = 1700000000;
    v.limits = &lim;
    char *out = NULL;
    size_t n = 0;
    wm_error err = {0};
    /* strlen: a NUL in the input ends the template, as it would for a C string caller */
    wm_status st = wm_chat_apply_json(src, MSGS, sizeof MSGS - 1, (int)(size & 2), &v, &out, &n, &err);
    if (st == WM_OK) {
        if (!out || n > lim.max_output || strlen(out) > n) abort();
    } else if (out || !err.msg[0]) {
        abort();
    }
    free(out);
    /* the same bytes as a messages array */
    out = NULL;
    memset(&err, 0, sizeof err);
    st = wm_chat_apply_json("{% for m in messages %}{{ m.role }}:{{ m.content }}|{{ m|tojson }}{% endfor %}", src, size,
                            1, &v, &out, &n, &err);
    if ((st == WM_OK) != (out != NULL)) abort();
    free(out);
    free(src);
    return 0;
}
