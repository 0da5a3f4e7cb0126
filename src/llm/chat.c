/* chat.c - apply_chat_template: transformers' message normalization, the
 * template variables, and the reader of a checkpoint's template. */
#include "llm/chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/file.h"
#include "core/json.h"
#include "llm/jinja_impl.h"

#define MAX_CONFIG_BYTES (64u << 20)

void wm_chat_vars_init(wm_chat_vars *v) {
    memset(v, 0, sizeof *v);
    v->enable_thinking = -1;
}

void wm_chat_vars_from_template(wm_chat_vars *v, const wm_chat_template *t) {
    v->bos_token = t->bos_token;
    v->eos_token = t->eos_token;
    v->unk_token = t->unk_token;
    v->sep_token = t->sep_token;
    v->pad_token = t->pad_token;
    v->cls_token = t->cls_token;
    v->mask_token = t->mask_token;
}

static wm_status jfail(jctx *c) { return c->err && c->err->status ? c->err->status : WM_ERR_INPUT; }

/* transformers: drop None-valued keys, then alias the reasoning fields */
static wm_status normalize(jctx *c, jv msgs, jv *out) {
    if (msgs.t != JV_LIST) return wm_err(c->err, WM_ERR_INPUT, "messages: expected a JSON array of message objects");
    if (msgs.u.l->n == 0) return wm_err(c->err, WM_ERR_INPUT, "messages: the conversation is empty");
    if (wm_jlist_new(c, msgs.u.l->n, 0, out)) return jfail(c);
    static const char *const rkeys[] = {"reasoning_content", "thinking", "reasoning"};
    for (size_t i = 0; i < msgs.u.l->n; i++) {
        jv m = msgs.u.l->v[i], nm, r = wm_jv_none();
        if (m.t != JV_DICT || m.u.d->kind != JD_DICT)
            return wm_err(c->err, WM_ERR_INPUT, "messages[%zu]: expected an object, got %s", i, wm_jv_typename(m));
        for (int k = 0; k < 3 && r.t == JV_NONE; k++) {
            jv x;
            if (wm_jdict_get(c, m.u.d, rkeys[k], strlen(rkeys[k]), &x) && x.t != JV_NONE) r = x;
        }
        /* m's keys are distinct (JSON objects are deduplicated): appended without comparisons, so a message
         * with many keys costs linear time; only "thinking" (first when r is set) and "reasoning_content" are
         * looked up */
        if (wm_jdict_new(c, JD_DICT, &nm)) return jfail(c);
        if (r.t != JV_NONE && wm_jdict_append(c, nm.u.d, wm_jv_cstr("thinking", 8), r)) return jfail(c);
        for (size_t k = 0; k < m.u.d->n; k++) {
            jv key = m.u.d->k[k], val = m.u.d->v[k];
            if (val.t == JV_NONE) continue;
            if (r.t != JV_NONE && key.t == JV_STR && key.u.s.n == 8 && !memcmp(key.u.s.p, "thinking", 8))
                nm.u.d->v[0] = val;
            else if (wm_jdict_append(c, nm.u.d, key, val))
                return jfail(c);
        }
        if (r.t != JV_NONE) {
            size_t k = 0;
            for (; k < nm.u.d->n; k++)
                if (nm.u.d->k[k].t == JV_STR && nm.u.d->k[k].u.s.n == 17 && !memcmp(nm.u.d->k[k].u.s.p, "reasoning_content", 17))
                    break;
            if (k < nm.u.d->n) nm.u.d->v[k] = r;
            else if (wm_jdict_append(c, nm.u.d, wm_jv_cstr("reasoning_content", 17), r))
                return jfail(c);
        }
        out->u.l->v[i] = nm;
    }
    return WM_OK;
}

static wm_status set_json_var(wm_jinja_ctx *cx, const char *name, const char *json, wm_error *err) {
    if (!json) return wm_jinja_ctx_set_none(cx, name, err);
    wm_status st = wm_jinja_ctx_set_json(cx, name, json, strlen(json), err);
    return st;
}

wm_status wm_chat_apply_json(const char *tmpl, const char *messages_json, size_t json_len, int add_generation_prompt,
                             const wm_chat_vars *vars, char **out, size_t *out_len, wm_error *err) {
    wm_chat_vars none;
    wm_jinja *t = NULL;
    wm_jinja_ctx *cx = NULL;
    wm_status st;
    *out = NULL;
    if (out_len) *out_len = 0;
    if (!vars) {
        wm_chat_vars_init(&none);
        vars = &none;
    }
    if (!tmpl) return wm_err(err, WM_ERR_USAGE, "no chat template");
    if (!messages_json) return wm_err(err, WM_ERR_USAGE, "no messages");
    if ((st = wm_jinja_compile(tmpl, strlen(tmpl), vars->limits, &t, err))) return st;
    if ((st = wm_jinja_ctx_new(vars->limits, vars->now, &cx, err))) goto done;
    {
        jctx c;
        memset(&c, 0, sizeof c);
        c.arena = &cx->arena;
        c.mem_limit = cx->lim.max_memory;
        c.max_steps = cx->lim.max_steps;
        c.max_depth = cx->lim.max_depth;
        c.max_edepth = cx->lim.max_depth * 8;
        c.max_output = cx->lim.max_output;
        c.err = err;
        jv raw, msgs;
        if (wm_jjson_parse(&c, messages_json, json_len, &raw)) {
            wm_err_prefix(err, "messages");
            st = jfail(&c);
            goto done;
        }
        if ((st = normalize(&c, raw, &msgs))) goto done;
        if (wm_jframe_set(&c, &cx->globals, "messages", msgs)) {
            st = jfail(&c);
            goto done;
        }
    }
    if ((st = set_json_var(cx, "tools", vars->tools_json, err)) ||
        (st = set_json_var(cx, "documents", vars->documents_json, err)) ||
        (st = wm_jinja_ctx_set_bool(cx, "add_generation_prompt", add_generation_prompt, err)))
        goto done;
    const char *tok_names[] = {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"};
    const char *tok_vals[] = {vars->bos_token, vars->eos_token, vars->unk_token, vars->sep_token,
                              vars->pad_token, vars->cls_token, vars->mask_token};
    for (int i = 0; i < 7; i++)
        if (tok_vals[i] && (st = wm_jinja_ctx_set_str(cx, tok_names[i], tok_vals[i], err))) goto done;
    if (vars->enable_thinking >= 0 && (st = wm_jinja_ctx_set_bool(cx, "enable_thinking", vars->enable_thinking, err)))
        goto done;
    if (vars->date_string && (st = wm_jinja_ctx_set_str(cx, "date_string", vars->date_string, err))) goto done;
    if (vars->extra_json) {
        jctx c;
        memset(&c, 0, sizeof c);
        c.arena = &cx->arena;
        c.mem_limit = cx->lim.max_memory;
        c.max_steps = cx->lim.max_steps;
        c.max_depth = cx->lim.max_depth;
        c.max_edepth = cx->lim.max_depth * 8;
        c.err = err;
        jv extra;
        if (wm_jjson_parse(&c, vars->extra_json, strlen(vars->extra_json), &extra)) {
            wm_err_prefix(err, "template variables");
            st = jfail(&c);
            goto done;
        }
        if (extra.t != JV_DICT) {
            st = wm_err(err, WM_ERR_INPUT, "template variables: expected a JSON object");
            goto done;
        }
        /* the extra names are distinct: each is compared with the variables set before them only */
        size_t n0 = cx->globals.n;
        for (size_t i = 0; i < extra.u.d->n; i++) {
            jv k = extra.u.d->k[i];
            const char *reserved[] = {"messages", "tools", "documents", "add_generation_prompt"};
            for (int r = 0; r < 4; r++)
                if (k.u.s.n == strlen(reserved[r]) && !memcmp(k.u.s.p, reserved[r], k.u.s.n)) {
                    st = wm_err(err, WM_ERR_INPUT, "template variables: '%s' is set by the chat itself", reserved[r]);
                    goto done;
                }
            size_t g = 0;
            while (g < n0 && strcmp(cx->globals.vars[g].name, k.u.s.p)) g++;
            if (g < n0) {
                cx->globals.vars[g].v = extra.u.d->v[i];
            } else if (wm_jframe_append(&c, &cx->globals, k.u.s.p, extra.u.d->v[i])) {
                st = jfail(&c);
                goto done;
            }
        }
    }
    st = wm_jinja_render(t, cx, out, out_len, err);
done:
    wm_jinja_ctx_free(cx);
    wm_jinja_free(t);
    return st;
}

wm_status wm_chat_apply(const char *tmpl, const wm_chat_message *msgs, size_t n, int add_generation_prompt,
                        const wm_chat_vars *vars, char **out, wm_error *err) {
    *out = NULL;
    wm_json j;
    wm_json_init(&j);
    wm_json_arr(&j, NULL);
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].role) {
            wm_json_free(&j);
            return wm_err(err, WM_ERR_USAGE, "messages[%zu]: no role", i);
        }
        wm_json_obj(&j, NULL);
        wm_json_str(&j, "role", msgs[i].role);
        if (msgs[i].content) wm_json_str(&j, "content", msgs[i].content);
        if (msgs[i].reasoning_content) wm_json_str(&j, "reasoning_content", msgs[i].reasoning_content);
        wm_json_obj_end(&j);
    }
    wm_json_arr_end(&j);
    if (j.oom) {
        wm_json_free(&j);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    const char *text = wm_json_text(&j);
    wm_status st = wm_chat_apply_json(tmpl, text, strlen(text), add_generation_prompt, vars, out, NULL, err);
    wm_json_free(&j);
    return st;
}

/* ---- reading a checkpoint's template ---- */

void wm_chat_template_free(wm_chat_template *t) {
    if (!t) return;
    free(t->source);
    free(t->bos_token);
    free(t->eos_token);
    free(t->unk_token);
    free(t->sep_token);
    free(t->pad_token);
    free(t->cls_token);
    free(t->mask_token);
    memset(t, 0, sizeof *t);
}

static int ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* 1 when p is a regular file, 0 when absent; -1 with *st set when something else is there (a FIFO, a folder) */
static int exists(const char *p, wm_status *st, wm_error *err) {
    int present;
    if ((*st = wm_input_present(p, &present, err))) return -1;
    return present;
}

/* a whole text file (UTF-8, no NUL) as a malloc'ed string */
static wm_status read_text(const char *path, size_t max, char **out, size_t *len, wm_error *err) {
    wm_map m;
    wm_status st = wm_map_file(path, 0, &m, err);
    if (st) return st;
    if (m.size > max) {
        wm_unmap(&m);
        return wm_err(err, WM_ERR_INPUT, "%s: %zu bytes, more than the limit of %zu", path, m.size, max);
    }
    if (m.size && memchr(m.data, 0, m.size)) {
        wm_unmap(&m);
        return wm_err(err, WM_ERR_INPUT, "%s: holds a NUL byte (not a text file)", path);
    }
    char *s = malloc(m.size + 1);
    if (!s) {
        wm_unmap(&m);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    if (m.size) memcpy(s, m.data, m.size);
    s[m.size] = 0;
    *len = m.size;
    wm_unmap(&m);
    *out = s;
    return WM_OK;
}

static char *dup_n(const char *p, size_t n) {
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, p, n);
        s[n] = 0;
    }
    return s;
}

/* a JSON string as a C string: embedded NULs are refused */
static wm_status take_str(jv v, const char *path, const char *field, char **out, wm_error *err) {
    if (memchr(v.u.s.p, 0, v.u.s.n)) return wm_err(err, WM_ERR_INPUT, "%s: %s holds a NUL character", path, field);
    if (!(*out = dup_n(v.u.s.p, v.u.s.n))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    return WM_OK;
}

typedef struct named {
    const char *name; /* in the config arena or static */
    jv text;
    char *file_text;  /* malloc'ed when read from a .jinja file */
} named;

static wm_status load_config(const char *cfg, wm_chat_template *t, named *tpl, size_t *ntpl, size_t cap, jctx *c,
                             wm_error *err) {
    char *text = NULL;
    size_t len;
    wm_status st = read_text(cfg, MAX_CONFIG_BYTES, &text, &len, err);
    if (st) return st;
    jv root;
    if (wm_jjson_parse(c, text, len, &root)) {
        free(text);
        wm_err_prefix(err, "%s", cfg);
        return jfail(c);
    }
    free(text);
    if (root.t != JV_DICT) return wm_err(err, WM_ERR_INPUT, "%s: expected a JSON object", cfg);
    static const char *const toks[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                       "pad_token", "cls_token", "mask_token"};
    char **dst[] = {&t->bos_token, &t->eos_token, &t->unk_token, &t->sep_token, &t->pad_token, &t->cls_token, &t->mask_token};
    for (int i = 0; i < 7; i++) {
        jv v;
        if (!wm_jdict_get(c, root.u.d, toks[i], strlen(toks[i]), &v) || v.t == JV_NONE) continue;
        if (v.t == JV_DICT && !wm_jdict_get(c, v.u.d, "content", 7, &v))
            return wm_err(err, WM_ERR_INPUT, "%s: %s is an object without \"content\"", cfg, toks[i]);
        if (v.t != JV_STR) return wm_err(err, WM_ERR_INPUT, "%s: %s must be a string or an AddedToken object", cfg, toks[i]);
        if ((st = take_str(v, cfg, toks[i], dst[i], err))) return st;
    }
    jv ct;
    if (!wm_jdict_get(c, root.u.d, "chat_template", 13, &ct) || ct.t == JV_NONE) return WM_OK;
    if (ct.t == JV_STR) {
        tpl[(*ntpl)++] = (named){"default", ct, NULL};
        return WM_OK;
    }
    if (ct.t != JV_LIST) return wm_err(err, WM_ERR_INPUT, "%s: chat_template must be a string or a list of {name, template}", cfg);
    for (size_t i = 0; i < ct.u.l->n; i++) {
        jv e = ct.u.l->v[i], nm, tx;
        if (e.t != JV_DICT || !wm_jdict_get(c, e.u.d, "name", 4, &nm) || !wm_jdict_get(c, e.u.d, "template", 8, &tx) ||
            nm.t != JV_STR || tx.t != JV_STR)
            return wm_err(err, WM_ERR_INPUT, "%s: chat_template[%zu] must be {\"name\": str, \"template\": str}", cfg, i);
        if (*ntpl == cap) return wm_err(err, WM_ERR_INPUT, "%s: more than %zu chat templates", cfg, cap);
        if (memchr(nm.u.s.p, 0, nm.u.s.n)) return wm_err(err, WM_ERR_INPUT, "%s: chat_template[%zu] name holds a NUL", cfg, i);
        tpl[(*ntpl)++] = (named){nm.u.s.p, tx, NULL};
    }
    return WM_OK;
}

/* name.jinja inside dir/additional_chat_templates: plain names only */
static int safe_name(const char *n) {
    if (!*n || strlen(n) > 100 || n[0] == '.') return 0;
    for (const char *p = n; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' || *p == '.'))
            return 0;
    return 1;
}

wm_status wm_chat_template_load(const char *path, const char *name, int has_tools, wm_chat_template *t, wm_error *err) {
    enum { CAP = 64 };
    named tpl[CAP];
    size_t ntpl = 0;
    wm_arena arena;
    wm_status st = WM_OK;
    char buf[4096];
    memset(t, 0, sizeof *t);
    memset(tpl, 0, sizeof tpl);
    wm_arena_init(&arena);
    jctx c;
    memset(&c, 0, sizeof c);
    c.arena = &arena;
    c.mem_limit = (size_t)MAX_CONFIG_BYTES * 8;
    c.max_steps = UINT64_MAX; /* only JSON is read here: linear in a file of at most MAX_CONFIG_BYTES */
    c.max_edepth = 8 * 100;
    c.err = err;
    const char *src_name = "tokenizer_config.json";
    if (is_dir(path)) {
        snprintf(buf, sizeof buf, "%s/tokenizer_config.json", path);
        int r = exists(buf, &st, err);
        if (r < 0 || (r && (st = load_config(buf, t, tpl, &ntpl, CAP, &c, err)))) goto done;
        snprintf(buf, sizeof buf, "%s/chat_template.jinja", path);
        if ((r = exists(buf, &st, err)) < 0) goto done;
        if (r) {
            char *s;
            size_t len;
            if ((st = read_text(buf, 1u << 24, &s, &len, err))) goto done;
            size_t k = 0;
            while (k < ntpl && strcmp(tpl[k].name, "default") != 0) k++;
            if (k == ntpl) ntpl++;
            free(tpl[k].file_text);
            tpl[k] = (named){"default", wm_jv_cstr(s, len), s};
            src_name = "chat_template.jinja";
        }
        if (name && strcmp(name, "default") != 0) {
            if (!safe_name(name)) {
                st = wm_err(err, WM_ERR_USAGE, "chat template name '%s': only letters, digits, '_', '-' and '.'", name);
                goto done;
            }
            snprintf(buf, sizeof buf, "%s/additional_chat_templates/%s.jinja", path, name);
            if ((r = exists(buf, &st, err)) < 0) goto done;
            if (r && ntpl < CAP) {
                char *s;
                size_t len;
                if ((st = read_text(buf, 1u << 24, &s, &len, err))) goto done;
                tpl[ntpl++] = (named){name, wm_jv_cstr(s, len), s};
                src_name = "additional_chat_templates";
            }
        }
    } else if (ends_with(path, ".jinja")) {
        char *s;
        size_t len;
        if ((st = read_text(path, 1u << 24, &s, &len, err))) goto done;
        tpl[ntpl++] = (named){"default", wm_jv_cstr(s, len), s};
        src_name = "template file";
    } else {
        if ((st = load_config(path, t, tpl, &ntpl, CAP, &c, err))) goto done;
    }
    const char *want = name;
    if (!want) {
        want = "default";
        if (has_tools)
            for (size_t i = 0; i < ntpl; i++)
                if (!strcmp(tpl[i].name, "tool_use")) want = "tool_use";
    }
    size_t k = 0;
    while (k < ntpl && strcmp(tpl[k].name, want) != 0) k++;
    if (k == ntpl) {
        if (ntpl == 0) {
            st = wm_err(err, WM_ERR_INPUT, "%s: no chat_template (tokenizer_config.json has none and there is no chat_template.jinja)", path);
        } else {
            char names[512] = "";
            for (size_t i = 0; i < ntpl; i++) {
                size_t l = strlen(names);
                snprintf(names + l, sizeof names - l, "%s%s", i ? ", " : "", tpl[i].name);
            }
            st = wm_err(err, WM_ERR_INPUT, "%s: no chat template named '%s' (templates: %s)", path, want, names);
        }
        goto done;
    }
    if ((st = take_str(tpl[k].text, path, "chat_template", &t->source, err))) goto done;
    snprintf(t->origin, sizeof t->origin, "%s%s%s", src_name, strcmp(want, "default") ? ":" : "", strcmp(want, "default") ? want : "");
done:
    for (size_t i = 0; i < ntpl; i++) free(tpl[i].file_text);
    wm_arena_free(&arena);
    if (st) wm_chat_template_free(t);
    return st;
}
