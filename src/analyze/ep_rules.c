/* ep_rules.c - loading and validating EP rule files (schema: data/ep_rules/SCHEMA.md). */
#include "analyze/ep_rules.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"
#include "onnx/dtype.h"

#define MAX_RULE_FILE (16u << 20)

static const char *const level_names[] = {"supported", "partial", "unknown", "unsupported"};

const char *wm_level_name(wm_level l) { return (unsigned)l < 4 ? level_names[l] : "?"; }

unsigned wm_device_bit(const char *name) {
    if (!name) return 0;
    if (!strcmp(name, "cpu")) return WM_DEV_CPU;
    if (!strcmp(name, "gpu")) return WM_DEV_GPU;
    if (!strcmp(name, "npu")) return WM_DEV_NPU;
    return 0;
}

const char *wm_device_name(unsigned bit) {
    return bit == WM_DEV_CPU ? "cpu" : bit == WM_DEV_GPU ? "gpu" : bit == WM_DEV_NPU ? "npu" : "?";
}

static int dev_index(unsigned bit) { return bit == WM_DEV_CPU ? 0 : bit == WM_DEV_GPU ? 1 : 2; }

/* The wm_dtype named name ("float32" ...), or -1. */
static int32_t dtype_by_name(const char *name) {
    if (!strcmp(name, "unknown")) return -1;
    for (int32_t d = 1; d < WM_DT_COUNT; d++) {
        const char *n = wm_dtype_name(d);
        if (n && !strcmp(n, name)) return d;
    }
    return -1;
}

typedef struct parser {
    wm_ep_rules *r;
    const char *file;
    wm_error *err;
} parser;

#define FAIL(...) return wm_err(p->err, WM_ERR_INPUT, __VA_ARGS__)

/* 1 when a member of obj before f has f's key (a repeated field would be ambiguous). */
static int dup_key(const cJSON *obj, const cJSON *f) {
    for (const cJSON *e = obj->child; e && e != f; e = e->next)
        if (e->string && f->string && !strcmp(e->string, f->string)) return 1;
    return 0;
}

static wm_status get_int(parser *p, const cJSON *v, const char *where, int64_t *out) {
    /* range first: converting a double outside int64 (or inf/nan) to an integer is undefined */
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= -9.0e18 && v->valuedouble <= 9.0e18) ||
        v->valuedouble != (double)(int64_t)v->valuedouble)
        FAIL("%s: %s: expected an integer", p->file, where);
    *out = (int64_t)v->valuedouble;
    return WM_OK;
}

static wm_status parse_policy(parser *p, const cJSON *v, const char *where, wm_dtype_policy *out) {
    if (!v) return WM_OK;
    if (!cJSON_IsString(v)) FAIL("%s: %s: expected \"native\", \"cast\" or \"unsupported\"", p->file, where);
    if (!strcmp(v->valuestring, "native")) *out = WM_POLICY_NATIVE;
    else if (!strcmp(v->valuestring, "cast")) *out = WM_POLICY_CAST;
    else if (!strcmp(v->valuestring, "unsupported")) *out = WM_POLICY_UNSUPPORTED;
    else FAIL("%s: %s: unknown value '%s' (native, cast or unsupported)", p->file, where, v->valuestring);
    return WM_OK;
}

/* Applies the fields present in object o over c. */
static wm_status parse_checks(parser *p, const cJSON *o, const char *where, wm_ep_checks *c) {
    if (!cJSON_IsObject(o)) FAIL("%s: %s: expected an object", p->file, where);
    char w[96];
    for (const cJSON *f = o->child; f; f = f->next) {
        snprintf(w, sizeof w, "%s.%s", where, f->string);
        if (dup_key(o, f)) FAIL("%s: %s: repeated field", p->file, w);
        if (!strcmp(f->string, "static_shapes") || !strcmp(f->string, "control_flow")) {
            if (!cJSON_IsBool(f)) FAIL("%s: %s: expected true or false", p->file, w);
            if (f->string[0] == 's') c->static_shapes = cJSON_IsTrue(f);
            else c->control_flow = cJSON_IsTrue(f);
        } else if (!strcmp(f->string, "int64")) {
            if (parse_policy(p, f, w, &c->int64)) return WM_ERR_INPUT;
        } else if (!strcmp(f->string, "float16")) {
            if (parse_policy(p, f, w, &c->float16)) return WM_ERR_INPUT;
        } else if (!strcmp(f->string, "max_opset")) {
            if (cJSON_IsNull(f)) c->max_opset = -1;
            else if (get_int(p, f, w, &c->max_opset)) return WM_ERR_INPUT;
        } else {
            FAIL("%s: %s: unknown check", p->file, w);
        }
    }
    return WM_OK;
}

static wm_status parse_devices(parser *p, const cJSON *a, const char *where, unsigned *out) {
    if (!cJSON_IsArray(a) || !a->child) FAIL("%s: %s: expected a non-empty array of \"cpu\", \"gpu\", \"npu\"", p->file, where);
    unsigned bits = 0;
    for (const cJSON *e = a->child; e; e = e->next) {
        unsigned b = cJSON_IsString(e) ? wm_device_bit(e->valuestring) : 0;
        if (!b) FAIL("%s: %s: unknown device (use cpu, gpu or npu)", p->file, where);
        bits |= b;
    }
    *out = bits;
    return WM_OK;
}

/* An array of non-negative integers into an arena array. */
static wm_status parse_indices(parser *p, const cJSON *a, const char *where, int32_t **out, size_t *n) {
    if (!cJSON_IsArray(a)) FAIL("%s: %s: expected an array of input indices", p->file, where);
    size_t cnt = (size_t)cJSON_GetArraySize(a);
    int32_t *v = wm_arena_alloc(&p->r->arena, (cnt ? cnt : 1) * sizeof *v);
    if (!v) return wm_err(p->err, WM_ERR_NOMEM, "out of memory");
    size_t i = 0;
    for (const cJSON *e = a->child; e; e = e->next, i++) {
        int64_t x = 0;
        if (get_int(p, e, where, &x)) return WM_ERR_INPUT;
        if (x < 0 || x > 1024) FAIL("%s: %s: input index %lld out of range", p->file, where, (long long)x);
        v[i] = (int32_t)x;
    }
    *out = v;
    *n = cnt;
    return WM_OK;
}

static wm_status parse_dtypes(parser *p, const cJSON *o, const char *where, wm_rule *ru) {
    if (!cJSON_IsObject(o)) FAIL("%s: %s: expected an object {\"<input index>\": [dtype names]}", p->file, where);
    size_t cnt = (size_t)cJSON_GetArraySize(o);
    ru->dtypes = wm_arena_alloc(&p->r->arena, (cnt ? cnt : 1) * sizeof *ru->dtypes);
    if (!ru->dtypes) return wm_err(p->err, WM_ERR_NOMEM, "out of memory");
    for (const cJSON *f = o->child; f; f = f->next) {
        if (dup_key(o, f)) FAIL("%s: %s.%s: repeated input index", p->file, where, f->string);
        char *end;
        errno = 0;
        long idx = strtol(f->string, &end, 10);
        if (!f->string[0] || *end || idx < 0 || idx > 1024 || errno)
            FAIL("%s: %s: key '%s' is not an input index", p->file, where, f->string);
        if (!cJSON_IsArray(f) || !f->child) FAIL("%s: %s.%s: expected a non-empty array of dtype names", p->file, where, f->string);
        wm_rule_dtypes *d = &ru->dtypes[ru->n_dtypes++];
        d->input = (int32_t)idx;
        d->dtypes = wm_arena_alloc(&p->r->arena, (size_t)cJSON_GetArraySize(f) * sizeof *d->dtypes);
        if (!d->dtypes) return wm_err(p->err, WM_ERR_NOMEM, "out of memory");
        for (const cJSON *e = f->child; e; e = e->next) {
            int32_t dt = cJSON_IsString(e) ? dtype_by_name(e->valuestring) : -1;
            if (dt < 0)
                FAIL("%s: %s.%s: unknown dtype %s%s%s", p->file, where, f->string, cJSON_IsString(e) ? "'" : "",
                     cJSON_IsString(e) ? e->valuestring : "(not a string)", cJSON_IsString(e) ? "'" : "");
            d->dtypes[d->n++] = dt;
        }
    }
    return WM_OK;
}

static wm_status parse_attrs(parser *p, const cJSON *o, const char *where, wm_rule *ru) {
    if (!cJSON_IsObject(o)) FAIL("%s: %s: expected an object {\"<attribute>\": [allowed values]}", p->file, where);
    size_t cnt = (size_t)cJSON_GetArraySize(o);
    ru->attrs = wm_arena_alloc(&p->r->arena, (cnt ? cnt : 1) * sizeof *ru->attrs);
    if (!ru->attrs) return wm_err(p->err, WM_ERR_NOMEM, "out of memory");
    for (const cJSON *f = o->child; f; f = f->next) {
        if (dup_key(o, f)) FAIL("%s: %s.%s: repeated attribute", p->file, where, f->string);
        if (!cJSON_IsArray(f) || !f->child) FAIL("%s: %s.%s: expected a non-empty array of allowed values", p->file, where, f->string);
        wm_rule_attr *a = &ru->attrs[ru->n_attrs++];
        memset(a, 0, sizeof *a);
        a->name = wm_arena_strdup(&p->r->arena, f->string);
        size_t nv = (size_t)cJSON_GetArraySize(f);
        a->ints = wm_arena_alloc(&p->r->arena, nv * sizeof *a->ints);
        a->strs = wm_arena_alloc(&p->r->arena, nv * sizeof *a->strs);
        if (!a->name || !a->ints || !a->strs) return wm_err(p->err, WM_ERR_NOMEM, "out of memory");
        for (const cJSON *e = f->child; e; e = e->next) {
            if (cJSON_IsString(e)) {
                if (!(a->strs[a->n_strs++] = wm_arena_strdup(&p->r->arena, e->valuestring)))
                    return wm_err(p->err, WM_ERR_NOMEM, "out of memory");
            } else {
                char w[128];
                snprintf(w, sizeof w, "%s.%s", where, f->string);
                if (get_int(p, e, w, &a->ints[a->n_ints++])) FAIL("%s: %s: values must be integers or strings", p->file, w);
            }
        }
    }
    return WM_OK;
}

static wm_status parse_rule(parser *p, const cJSON *o, size_t i, wm_rule *ru) {
    char where[160];
    memset(ru, 0, sizeof *ru);
    ru->until = -1;
    ru->max_rank = -1;
    ru->devices = p->r->devices;
    ru->reason = "";
    if (!cJSON_IsObject(o)) FAIL("%s: rules[%zu]: expected an object", p->file, i);
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(o, "op_type");
    if (!cJSON_IsString(op) || !op->valuestring[0]) FAIL("%s: rules[%zu].op_type: missing or not a string", p->file, i);
    snprintf(where, sizeof where, "rules[%zu] (%s)", i, op->valuestring);
    int has_level = 0, has_since = 0;
    for (const cJSON *f = o->child; f; f = f->next) {
        char w[200];
        snprintf(w, sizeof w, "%s.%s", where, f->string);
        if (dup_key(o, f)) FAIL("%s: %s: repeated field", p->file, w);
        const char *k = f->string;
        if (!strcmp(k, "op_type")) {
            ru->op_type = wm_arena_strdup(&p->r->arena, f->valuestring);
        } else if (!strcmp(k, "domain")) {
            if (!cJSON_IsString(f)) FAIL("%s: %s: expected a string", p->file, w);
            ru->domain = wm_arena_strdup(&p->r->arena, !strcmp(f->valuestring, "ai.onnx") ? "" : f->valuestring);
        } else if (!strcmp(k, "since")) {
            if (get_int(p, f, w, &ru->since)) return WM_ERR_INPUT;
            if (ru->since < 1) FAIL("%s: %s: must be >= 1", p->file, w);
            has_since = 1;
        } else if (!strcmp(k, "until")) {
            if (!cJSON_IsNull(f) && get_int(p, f, w, &ru->until)) return WM_ERR_INPUT;
        } else if (!strcmp(k, "devices")) {
            if (parse_devices(p, f, w, &ru->devices)) return WM_ERR_INPUT;
            if (ru->devices & ~p->r->devices) FAIL("%s: %s: a device the EP does not list", p->file, w);
        } else if (!strcmp(k, "level")) {
            int l = -1;
            if (cJSON_IsString(f))
                for (int j = 0; j < 4; j++)
                    if (j != WM_LEVEL_UNKNOWN && !strcmp(f->valuestring, level_names[j])) l = j;
            if (l < 0) FAIL("%s: %s: expected \"supported\", \"partial\" or \"unsupported\"", p->file, w);
            ru->level = (wm_level)l;
            has_level = 1;
        } else if (!strcmp(k, "dtypes")) {
            if (parse_dtypes(p, f, w, ru)) return WM_ERR_INPUT;
        } else if (!strcmp(k, "max_rank")) {
            int64_t x = 0;
            if (get_int(p, f, w, &x)) return WM_ERR_INPUT;
            if (x < 0 || x > 64) FAIL("%s: %s: must be in 0..64", p->file, w);
            ru->max_rank = (int32_t)x;
        } else if (!strcmp(k, "static_shapes")) {
            if (!cJSON_IsBool(f)) FAIL("%s: %s: expected true or false", p->file, w);
            ru->static_shapes = cJSON_IsTrue(f);
        } else if (!strcmp(k, "const_inputs")) {
            if (parse_indices(p, f, w, &ru->const_inputs, &ru->n_const_inputs)) return WM_ERR_INPUT;
        } else if (!strcmp(k, "attrs")) {
            if (parse_attrs(p, f, w, ru)) return WM_ERR_INPUT;
        } else if (!strcmp(k, "reason")) {
            if (!cJSON_IsString(f)) FAIL("%s: %s: expected a string", p->file, w);
            ru->reason = wm_arena_strdup(&p->r->arena, f->valuestring);
        } else {
            FAIL("%s: %s: unknown field", p->file, w);
        }
    }
    if (!has_level) FAIL("%s: %s.level: missing", p->file, where);
    if (!has_since) FAIL("%s: %s.since: missing", p->file, where);
    if (ru->until >= 0 && ru->until < ru->since) FAIL("%s: %s.until: %lld is before since %lld", p->file, where,
                                                     (long long)ru->until, (long long)ru->since);
    if (!ru->domain) ru->domain = "";
    if (!ru->op_type || !ru->reason) return wm_err(p->err, WM_ERR_NOMEM, "out of memory");
    return WM_OK;
}

static wm_status parse_doc(parser *p, const cJSON *doc) {
    wm_ep_rules *r = p->r;
    if (!cJSON_IsObject(doc)) FAIL("%s: the top level must be an object", p->file);
    const cJSON *ep = cJSON_GetObjectItemCaseSensitive(doc, "ep");
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(doc, "source");
    const cJSON *devs = cJSON_GetObjectItemCaseSensitive(doc, "devices");
    const cJSON *mc = cJSON_GetObjectItemCaseSensitive(doc, "model_checks");
    const cJSON *dc = cJSON_GetObjectItemCaseSensitive(doc, "device_checks");
    const cJSON *rules = cJSON_GetObjectItemCaseSensitive(doc, "rules");
    if (!cJSON_IsString(ep) || !ep->valuestring[0]) FAIL("%s: ep: missing or not a string", p->file);
    if (!cJSON_IsString(src) || !src->valuestring[0]) FAIL("%s: source: missing (name the public document and version)", p->file);
    for (const cJSON *f = doc->child; f; f = f->next)
        if (dup_key(doc, f)) FAIL("%s: %s: repeated top-level field", p->file, f->string);
    for (const cJSON *f = doc->child; f; f = f->next)
        if (strcmp(f->string, "ep") && strcmp(f->string, "source") && strcmp(f->string, "devices") &&
            strcmp(f->string, "model_checks") && strcmp(f->string, "device_checks") && strcmp(f->string, "rules") &&
            strcmp(f->string, "version"))
            FAIL("%s: %s: unknown top-level field", p->file, f->string);
    r->ep = wm_arena_strdup(&r->arena, ep->valuestring);
    r->source = wm_arena_strdup(&r->arena, src->valuestring);
    if (parse_devices(p, devs, "devices", &r->devices)) return WM_ERR_INPUT;
    r->checks.max_opset = -1;
    if (mc && parse_checks(p, mc, "model_checks", &r->checks)) return WM_ERR_INPUT;
    for (int d = 0; d < 3; d++) r->device_checks[d] = r->checks;
    if (dc) {
        if (!cJSON_IsObject(dc)) FAIL("%s: device_checks: expected an object keyed by device", p->file);
        for (const cJSON *f = dc->child; f; f = f->next) {
            unsigned b = wm_device_bit(f->string);
            char w[64];
            snprintf(w, sizeof w, "device_checks.%s", f->string);
            if (!b || !(b & r->devices)) FAIL("%s: %s: not a device of this EP", p->file, w);
            if (dup_key(dc, f)) FAIL("%s: %s: repeated device", p->file, w);
            if (parse_checks(p, f, w, &r->device_checks[dev_index(b)])) return WM_ERR_INPUT;
        }
    }
    if (!cJSON_IsArray(rules)) FAIL("%s: rules: missing or not an array", p->file);
    size_t n = (size_t)cJSON_GetArraySize(rules);
    r->rules = wm_arena_alloc(&r->arena, (n ? n : 1) * sizeof *r->rules);
    if (!r->rules || !r->ep || !r->source) return wm_err(p->err, WM_ERR_NOMEM, "out of memory");
    size_t i = 0;
    for (const cJSON *e = rules->child; e; e = e->next, i++)
        if (parse_rule(p, e, i, &r->rules[i])) return WM_ERR_INPUT;
    r->n_rules = n;
    return WM_OK;
}

wm_status wm_ep_rules_parse(const char *text, const char *name, wm_ep_rules **out, wm_error *err) {
    *out = NULL;
    wm_ep_rules *r = calloc(1, sizeof *r);
    if (!r) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    wm_arena_init(&r->arena);
    r->path = wm_arena_strdup(&r->arena, name ? name : "(rules)");
    parser p = {r, r->path ? r->path : "(rules)", err};
    const char *end = NULL;
    cJSON *doc = cJSON_ParseWithOpts(text, &end, 1);
    wm_status s;
    if (!doc) {
        s = wm_err(err, WM_ERR_INPUT, "%s: not valid JSON near byte %zu", p.file, end ? (size_t)(end - text) : 0);
    } else {
        s = parse_doc(&p, doc);
        cJSON_Delete(doc);
    }
    if (s) {
        wm_ep_rules_free(r);
        return s;
    }
    *out = r;
    return WM_OK;
}

wm_status wm_ep_rules_load(const char *path, wm_ep_rules **out, wm_error *err) {
    *out = NULL;
    wm_map m;
    wm_status s = wm_map_file(path, 0, &m, err); /* a regular file only: never blocks on a FIFO */
    if (s) return s;
    const char *nul = m.size ? memchr(m.data, 0, m.size) : NULL;
    char *buf = NULL;
    if (m.size > MAX_RULE_FILE) s = wm_err(err, WM_ERR_INPUT, "%s: larger than %u bytes", path, MAX_RULE_FILE);
    else if (nul) s = wm_err(err, WM_ERR_INPUT, "%s: contains a NUL byte at %zu (not a JSON text)", path,
                             (size_t)(nul - (const char *)m.data));
    else if (!(buf = malloc(m.size + 1))) s = wm_err(err, WM_ERR_NOMEM, "out of memory");
    else {
        if (m.size) memcpy(buf, m.data, m.size);
        buf[m.size] = 0;
        s = wm_ep_rules_parse(buf, path, out, err);
    }
    free(buf);
    wm_unmap(&m);
    return s;
}

void wm_ep_rules_free(wm_ep_rules *r) {
    if (!r) return;
    wm_arena_free(&r->arena);
    free(r);
}

const wm_ep_checks *wm_ep_rules_checks(const wm_ep_rules *r, unsigned device) {
    return &r->device_checks[dev_index(device)];
}

static const char *norm_domain(const char *d) { return (!d || !strcmp(d, "ai.onnx")) ? "" : d; }

const wm_rule *wm_ep_rules_find(const wm_ep_rules *r, const char *domain, const char *op_type, int64_t version,
                                unsigned device, int *op_known) {
    domain = norm_domain(domain);
    if (op_known) *op_known = 0;
    for (size_t i = 0; i < r->n_rules; i++) {
        const wm_rule *ru = &r->rules[i];
        if (!(ru->devices & device) || strcmp(ru->op_type, op_type) || strcmp(ru->domain, domain)) continue;
        if (op_known) *op_known = 1;
        if (version < 0 || (version >= ru->since && (ru->until < 0 || version <= ru->until))) return ru;
    }
    return NULL;
}
