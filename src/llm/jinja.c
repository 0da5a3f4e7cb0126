/* jinja.c - the public entry points: limits, compile, contexts, render. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "llm/jinja_impl.h"

void wm_jinja_limits_default(wm_jinja_limits *l) {
    l->max_template = 1u << 20;
    l->max_output = 16u << 20;
    l->max_memory = 256u << 20;
    l->max_steps = 50000000;
    l->max_depth = 100;
    l->max_iterations = 1000000;
}

static void limits_or_default(const wm_jinja_limits *in, wm_jinja_limits *out) {
    if (in) *out = *in;
    else wm_jinja_limits_default(out);
}

wm_status wm_jinja_compile(const char *src, size_t n, const wm_jinja_limits *lim, wm_jinja **out, wm_error *err) {
    *out = NULL;
    wm_jinja *t = calloc(1, sizeof *t);
    if (!t) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    wm_arena_init(&t->arena);
    limits_or_default(lim, &t->lim);
    if (n > t->lim.max_template) {
        size_t max = t->lim.max_template;
        wm_jinja_free(t);
        return wm_err(err, WM_ERR_INPUT, "chat template: %zu bytes, more than the limit of %zu", n, max);
    }
    wm_status st = wm_jparse(t, src ? src : "", src ? n : 0, err);
    if (st) {
        wm_jinja_free(t);
        return st;
    }
    *out = t;
    return WM_OK;
}

void wm_jinja_free(wm_jinja *t) {
    if (!t) return;
    wm_arena_free(&t->arena);
    free(t);
}

wm_status wm_jinja_ctx_new(const wm_jinja_limits *lim, int64_t now_unix, wm_jinja_ctx **out, wm_error *err) {
    *out = NULL;
    wm_jinja_ctx *c = calloc(1, sizeof *c);
    if (!c) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    wm_arena_init(&c->arena);
    limits_or_default(lim, &c->lim);
    c->now = now_unix;
    *out = c;
    return WM_OK;
}

void wm_jinja_ctx_free(wm_jinja_ctx *c) {
    if (!c) return;
    wm_arena_free(&c->arena);
    free(c);
}

/* a jctx that makes values in the context's own arena */
static void ctx_jctx(wm_jinja_ctx *cx, jctx *c, wm_error *err) {
    memset(c, 0, sizeof *c);
    c->arena = &cx->arena;
    c->mem_limit = cx->lim.max_memory;
    c->max_steps = cx->lim.max_steps;
    c->max_depth = cx->lim.max_depth;
    c->max_edepth = cx->lim.max_depth * 8;
    c->max_output = cx->lim.max_output;
    c->max_iterations = cx->lim.max_iterations;
    c->err = err;
}

static wm_status ctx_set(wm_jinja_ctx *cx, const char *name, jv v, jctx *c) {
    char *nm = wm_arena_strdup(&cx->arena, name);
    if (!nm) return wm_err(c->err, WM_ERR_NOMEM, "out of memory");
    if (wm_jframe_set(c, &cx->globals, nm, v)) return c->err && c->err->status ? c->err->status : WM_ERR_NOMEM;
    return WM_OK;
}

wm_status wm_jinja_ctx_set_json(wm_jinja_ctx *cx, const char *name, const char *json, size_t n, wm_error *err) {
    jctx c;
    jv v;
    ctx_jctx(cx, &c, err);
    if (wm_jjson_parse(&c, json, n, &v)) {
        wm_err_prefix(err, "variable '%s'", name);
        return err && err->status ? err->status : WM_ERR_INPUT;
    }
    return ctx_set(cx, name, v, &c);
}

wm_status wm_jinja_ctx_set_str(wm_jinja_ctx *cx, const char *name, const char *s, wm_error *err) {
    jctx c;
    jv v;
    ctx_jctx(cx, &c, err);
    if (wm_jstr(&c, s, strlen(s), &v)) return err && err->status ? err->status : WM_ERR_NOMEM;
    return ctx_set(cx, name, v, &c);
}

wm_status wm_jinja_ctx_set_bool(wm_jinja_ctx *cx, const char *name, int b, wm_error *err) {
    jctx c;
    ctx_jctx(cx, &c, err);
    return ctx_set(cx, name, wm_jv_bool(b), &c);
}

wm_status wm_jinja_ctx_set_none(wm_jinja_ctx *cx, const char *name, wm_error *err) {
    jctx c;
    ctx_jctx(cx, &c, err);
    return ctx_set(cx, name, wm_jv_none(), &c);
}

wm_status wm_jinja_render(const wm_jinja *t, wm_jinja_ctx *cx, char **out, size_t *out_len, wm_error *err) {
    *out = NULL;
    if (out_len) *out_len = 0;
    wm_arena arena;
    wm_arena_init(&arena);
    jctx c;
    ctx_jctx(cx, &c, err);
    c.arena = &arena;
    c.now = cx->now;
    jbuf buf = {0};
    c.out = &buf;
    jframe top = {&cx->globals, NULL, 0, 0};
    int rc = wm_jexec_body(&c, &top, t->root->items, t->root->n);
    if (!rc && c.loopctl) rc = wm_jerr(&c, NULL, WM_ERR_INPUT, "'break' or 'continue' outside of a loop");
    wm_arena_free(&arena);
    if (rc) {
        wm_jbuf_free(&buf);
        return err && err->status ? err->status : WM_ERR_INPUT;
    }
    if (!buf.p) {
        buf.p = malloc(1);
        if (!buf.p) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        buf.p[0] = 0;
    }
    *out = buf.p;
    if (out_len) *out_len = buf.n;
    return WM_OK;
}
