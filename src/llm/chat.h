/*
 * chat.h - chat templates: a checkpoint's chat_template rendered over a
 * conversation exactly as transformers' tokenizer.apply_chat_template(
 * messages, tokenize=False, add_generation_prompt=...) renders it.
 *
 * What transformers does before rendering, and so do we: keys whose value
 * is null are dropped from each message; a message's reasoning (the first
 * non-null of reasoning_content, thinking, reasoning) is also given as
 * "thinking" (first key) and "reasoning_content"; the template sees
 * messages, tools (None when not given), documents (None),
 * add_generation_prompt, the special tokens the tokenizer config sets
 * (bos_token, eos_token, unk_token, sep_token, pad_token, cls_token, mask_token: transformers'
 * special_tokens_map) and any extra variables
 * (enable_thinking, date_string, ...), which override the special tokens.
 * The template language is the Jinja subset of llm/jinja.h.
 *
 * Ownership: every char ** output is malloc'ed and freed by the caller with
 * free(); wm_chat_template fields are released by wm_chat_template_free.
 * Inputs are only read during the call.
 */
#ifndef WM_LLM_CHAT_H
#define WM_LLM_CHAT_H

#include <stddef.h>
#include <stdint.h>

#include "llm/jinja.h"
#include "winml/winml.h"

typedef struct wm_chat_message {
    const char *role;              /* required: "system", "user", "assistant", "tool" ... */
    const char *content;           /* NULL: the message has no "content" key */
    const char *reasoning_content; /* NULL: no reasoning (Qwen3-style <think> text otherwise) */
} wm_chat_message;

typedef struct wm_chat_vars {
    /* NULL: not defined in the template */
    const char *bos_token, *eos_token, *unk_token, *sep_token, *pad_token, *cls_token, *mask_token;
    const char *tools_json;     /* NULL: tools = None; else a JSON array of tool schemas */
    const char *documents_json; /* NULL: documents = None; else a JSON array */
    int enable_thinking;        /* -1: not passed; 0 / 1: passed as false / true */
    const char *date_string;    /* NULL: not passed (Llama 3.x templates then call strftime_now) */
    const char *extra_json;     /* NULL, or a JSON object of further template variables */
    int64_t now;                /* the time strftime_now formats (local time); 0: the clock */
    const wm_jinja_limits *limits; /* NULL: wm_jinja_limits_default */
} wm_chat_vars;

/* Zeroes *v and sets enable_thinking = -1 (nothing passed). */
void wm_chat_vars_init(wm_chat_vars *v);

/*
 * Renders template over n messages. vars may be NULL (nothing beyond the
 * messages). On success *out is a malloc'ed NUL-terminated string the
 * caller frees; on failure *out is NULL and err holds one line (a template
 * error names its line and column; raise_exception's message is quoted).
 */
wm_status wm_chat_apply(const char *tmpl, const wm_chat_message *msgs, size_t n, int add_generation_prompt,
                        const wm_chat_vars *vars, char **out, wm_error *err);

/*
 * The same with the messages as JSON text: an array of objects (any keys:
 * tool_calls, tool_call_id, name, content as a list of parts ...).
 * *out_len (may be NULL) receives the length of *out.
 */
wm_status wm_chat_apply_json(const char *tmpl, const char *messages_json, size_t json_len,
                             int add_generation_prompt, const wm_chat_vars *vars, char **out,
                             size_t *out_len, wm_error *err);

typedef struct wm_chat_template {
    char *source;                                 /* the template text */
    /* NULL when the config does not set them */
    char *bos_token, *eos_token, *unk_token, *sep_token, *pad_token, *cls_token, *mask_token;
    char origin[96];                              /* where the template came from, for messages */
} wm_chat_template;

/*
 * Reads a checkpoint's chat template. path: a folder (tokenizer_config.json,
 * chat_template.jinja, additional_chat_templates/NAME.jinja, as transformers
 * reads them: the .jinja file wins over the config's chat_template), or a
 * tokenizer_config.json, or a .jinja file. The config's chat_template may
 * be a string or a list of {name, template}. name NULL picks "tool_use"
 * when has_tools and one exists, else "default". Special tokens come from
 * tokenizer_config.json (a string or an AddedToken {"content": ...}).
 * On success the caller releases *t with wm_chat_template_free.
 */
wm_status wm_chat_template_load(const char *path, const char *name, int has_tools, wm_chat_template *t,
                                wm_error *err);
void wm_chat_template_free(wm_chat_template *t);

/* vars->bos_token ... set from t (pointers into t: keep t alive). */
void wm_chat_vars_from_template(wm_chat_vars *v, const wm_chat_template *t);

#endif
