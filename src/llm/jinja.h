/*
 * jinja.h - a Jinja2 subset for chat templates, in C.
 *
 * What it renders: the chat templates of Hugging Face checkpoints, with the
 * environment transformers uses (trim_blocks, lstrip_blocks, loopcontrols,
 * {% generation %} blocks rendered as their body, tojson = json.dumps with
 * ensure_ascii=False, raise_exception, strftime_now, namespace, dict, and the
 * ImmutableSandboxedEnvironment rule that lists/dicts cannot be mutated).
 * Values follow Python: none/bool/int/float/str/list/tuple/dict/namespace,
 * Jinja's Undefined (prints as "", false, iterates as empty, fails on
 * arithmetic or attribute access), str() / repr() / json.dumps formatting.
 *
 * Strict errors: anything outside the subset (an unknown filter, test, tag,
 * method, an include/extends/import) is an error naming the template line
 * and column and the construct, never a crash. Limits (template size, output
 * size, memory, evaluation steps, nesting/recursion depth) bound what a
 * hostile template can do; exceeding one is an error naming the limit.
 *
 * Use:
 *   wm_jinja *t;           wm_jinja_compile(src, n, NULL, &t, &err);
 *   wm_jinja_ctx *c;       wm_jinja_ctx_new(NULL, &c, &err);
 *   wm_jinja_ctx_set_json(c, "messages", json, len, &err); ...
 *   char *out; size_t n;   wm_jinja_render(t, c, &out, &n, &err); free(out);
 *   wm_jinja_ctx_free(c);  wm_jinja_free(t);
 */
#ifndef WM_LLM_JINJA_H
#define WM_LLM_JINJA_H

#include <stddef.h>
#include <stdint.h>

#include "winml/winml.h"

typedef struct wm_jinja_limits {
    size_t max_template;  /* template source bytes (default 1 MiB) */
    size_t max_output;    /* rendered bytes (default 16 MiB) */
    size_t max_memory;    /* bytes of values made while rendering (default 256 MiB) */
    uint64_t max_steps;   /* evaluation steps (default 50M): nodes, loop iterations, values compared, and work in
                             proportion to operand sizes (64 bytes made or compared, 16 bytes searched, 16 dict
                             keys or names scanned per step): a cap on the total work of a render */
    int max_depth;        /* nesting of template blocks/expressions and macro recursion (default 100) */
    uint64_t max_iterations; /* for-loop iterations in one render, all loops together (default 1M) */
} wm_jinja_limits;

/* Fills *l with the defaults above. */
void wm_jinja_limits_default(wm_jinja_limits *l);

typedef struct wm_jinja wm_jinja;         /* a compiled template */
typedef struct wm_jinja_ctx wm_jinja_ctx; /* variables + the memory of one or more renders */

/*
 * Compiles n bytes of template source (UTF-8). lim NULL = defaults (copied).
 * On success *out is a template owned by the caller (wm_jinja_free); on
 * failure *out is NULL and err says "line L col C: reason".
 */
wm_status wm_jinja_compile(const char *src, size_t n, const wm_jinja_limits *lim, wm_jinja **out,
                           wm_error *err);
void wm_jinja_free(wm_jinja *t);

/*
 * A context: the global variables a render sees. lim NULL = defaults.
 * *out is owned by the caller (wm_jinja_ctx_free), which frees every value
 * made in it. now_unix is the time strftime_now formats (0 = the clock).
 */
wm_status wm_jinja_ctx_new(const wm_jinja_limits *lim, int64_t now_unix, wm_jinja_ctx **out,
                           wm_error *err);
void wm_jinja_ctx_free(wm_jinja_ctx *c);

/* Sets a variable from JSON text (any JSON value; Python json.loads rules:
 * 1 is an int, 1.0 a float, a repeated key keeps its first position and last
 * value). The text is copied; name is copied. */
wm_status wm_jinja_ctx_set_json(wm_jinja_ctx *c, const char *name, const char *json, size_t n,
                                wm_error *err);
/* Sets a string / bool / none variable (copied). */
wm_status wm_jinja_ctx_set_str(wm_jinja_ctx *c, const char *name, const char *s, wm_error *err);
wm_status wm_jinja_ctx_set_bool(wm_jinja_ctx *c, const char *name, int b, wm_error *err);
wm_status wm_jinja_ctx_set_none(wm_jinja_ctx *c, const char *name, wm_error *err);

/*
 * Renders t with the variables of c. On success *out is a malloc'ed,
 * NUL-terminated string owned by the caller (free()) and *out_len its length
 * (it may hold NUL bytes if the inputs did); on failure *out is NULL and err
 * names the template line/column and the reason. A context may be rendered
 * more than once; each render starts from its variables.
 */
wm_status wm_jinja_render(const wm_jinja *t, wm_jinja_ctx *c, char **out, size_t *out_len,
                          wm_error *err);

#endif
