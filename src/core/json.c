#include "core/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void wm_json_init(wm_json *j) { memset(j, 0, sizeof *j); }

void wm_json_free(wm_json *j) {
    free(j->buf);
    memset(j, 0, sizeof *j);
}

static void put(wm_json *j, const char *s, size_t n) {
    if (j->oom) return;
    if (j->n + n + 1 > j->cap) {
        size_t cap = j->cap ? j->cap : 1024;
        while (cap < j->n + n + 1) cap *= 2;
        char *nb = realloc(j->buf, cap);
        if (!nb) {
            j->oom = 1;
            return;
        }
        j->buf = nb;
        j->cap = cap;
    }
    memcpy(j->buf + j->n, s, n);
    j->n += n;
    j->buf[j->n] = 0;
}

static void puts_(wm_json *j, const char *s) { put(j, s, strlen(s)); }

static void indent(wm_json *j) {
    put(j, "\n", 1);
    for (int i = 0; i < j->depth; i++) put(j, "  ", 2);
}

static void quoted(wm_json *j, const char *s, size_t n) {
    put(j, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"') put(j, "\\\"", 2);
        else if (c == '\\') put(j, "\\\\", 2);
        else if (c == '\n') put(j, "\\n", 2);
        else if (c == '\t') put(j, "\\t", 2);
        else if (c == '\r') put(j, "\\r", 2);
        else if (c < 0x20 || c == 0x7f) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            put(j, esc, 6);
        } else put(j, (const char *)&s[i], 1);
    }
    put(j, "\"", 1);
}

static void prefix(wm_json *j, const char *key) {
    if (j->depth > 0) {
        if (j->count[j->depth]++) put(j, ",", 1);
        indent(j);
    }
    if (key) {
        quoted(j, key, strlen(key));
        put(j, ": ", 2);
    }
}

static void open_(wm_json *j, const char *key, const char *br) {
    prefix(j, key);
    puts_(j, br);
    if (j->depth + 1 < WM_JSON_MAX_DEPTH) j->depth++;
    j->count[j->depth] = 0;
}

static void close_(wm_json *j, const char *br) {
    int had = j->count[j->depth];
    if (j->depth > 0) j->depth--;
    if (had) indent(j);
    puts_(j, br);
    if (j->depth == 0) put(j, "\n", 1);
}

void wm_json_obj(wm_json *j, const char *key) { open_(j, key, "{"); }
void wm_json_obj_end(wm_json *j) { close_(j, "}"); }
void wm_json_arr(wm_json *j, const char *key) { open_(j, key, "["); }
void wm_json_arr_end(wm_json *j) { close_(j, "]"); }

void wm_json_strn(wm_json *j, const char *key, const char *v, size_t n) {
    prefix(j, key);
    quoted(j, v, n);
}

void wm_json_str(wm_json *j, const char *key, const char *v) {
    if (!v) {
        wm_json_null(j, key);
        return;
    }
    wm_json_strn(j, key, v, strlen(v));
}

void wm_json_int(wm_json *j, const char *key, int64_t v) {
    char b[32];
    prefix(j, key);
    snprintf(b, sizeof b, "%lld", (long long)v);
    puts_(j, b);
}

void wm_json_uint(wm_json *j, const char *key, uint64_t v) {
    char b[32];
    prefix(j, key);
    snprintf(b, sizeof b, "%llu", (unsigned long long)v);
    puts_(j, b);
}

void wm_json_num(wm_json *j, const char *key, double v) {
    if (!isfinite(v)) {
        wm_json_null(j, key);
        return;
    }
    char b[40];
    prefix(j, key);
    snprintf(b, sizeof b, "%.17g", v);
    puts_(j, b);
}

void wm_json_bool(wm_json *j, const char *key, int v) {
    prefix(j, key);
    puts_(j, v ? "true" : "false");
}

void wm_json_null(wm_json *j, const char *key) {
    prefix(j, key);
    puts_(j, "null");
}

const char *wm_json_text(const wm_json *j) { return j->buf && !j->oom ? j->buf : ""; }

void wm_json_num_py(wm_json *j, const char *key, double v) {
    if (!isnan(v) && !isinf(v)) {
        wm_json_num(j, key, v);
        return;
    }
    prefix(j, key);
    puts_(j, isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity");
}

void wm_json_raw(wm_json *j, const char *key, const char *text) {
    prefix(j, key);
    for (const char *p = text; *p; p++) {
        put(j, p, 1);
        if (*p == '\n')
            for (int i = 0; i < j->depth; i++) put(j, "  ", 2);
    }
}
