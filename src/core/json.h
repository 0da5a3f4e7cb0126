/*
 * json.h - a JSON writer into a growable buffer (pretty-printed, UTF-8
 * passed through, control characters and quotes escaped). Inside an object
 * every call takes a key; inside an array pass key = NULL.
 */
#ifndef WM_CORE_JSON_H
#define WM_CORE_JSON_H

#include <stddef.h>
#include <stdint.h>

#define WM_JSON_MAX_DEPTH 64

typedef struct wm_json {
    char *buf; /* malloc'ed, NUL-terminated; owned, released by wm_json_free */
    size_t n, cap;
    int depth;
    int count[WM_JSON_MAX_DEPTH];
    int oom;
} wm_json;

void wm_json_init(wm_json *j);
void wm_json_free(wm_json *j);
void wm_json_obj(wm_json *j, const char *key);
void wm_json_obj_end(wm_json *j);
void wm_json_arr(wm_json *j, const char *key);
void wm_json_arr_end(wm_json *j);
void wm_json_str(wm_json *j, const char *key, const char *v); /* NULL -> null */
void wm_json_strn(wm_json *j, const char *key, const char *v, size_t n);
void wm_json_int(wm_json *j, const char *key, int64_t v);
void wm_json_uint(wm_json *j, const char *key, uint64_t v);
void wm_json_num(wm_json *j, const char *key, double v); /* NaN/inf -> null */
void wm_json_bool(wm_json *j, const char *key, int v);
void wm_json_null(wm_json *j, const char *key);
/* The number as Python's json writes it: NaN, Infinity and -Infinity as those words (not strict JSON: for the
 * reference's layouts that carry them), else as wm_json_num. */
void wm_json_num_py(wm_json *j, const char *key, double v);
/* A value rendered by another wm_json (its wm_json_text), re-indented to this depth. */
void wm_json_raw(wm_json *j, const char *key, const char *text);
/* The finished text ("" after OOM: check j->oom). */
const char *wm_json_text(const wm_json *j);

#endif
