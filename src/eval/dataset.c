#include "eval/dataset.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"

#define MAX_COLS 256
#define MAX_JSON_DEPTH 32

void wm_table_free(wm_table *t) {
    if (!t) return;
    for (size_t i = 0; i < t->n_cols; i++) free(t->names[i]);
    for (size_t i = 0; t->cells && i < t->n_rows * t->n_cols; i++) free(t->cells[i]);
    free(t->names);
    free(t->cells);
    memset(t, 0, sizeof *t);
}

int wm_table_col(const wm_table *t, const char *spec) {
    for (size_t i = 0; i < t->n_cols; i++) /* names first: GLUE headers start with '#' too ("#1 String") */
        if (!strcmp(t->names[i], spec)) return (int)i;
    if (spec[0] == '#' && spec[1]) {
        char *end;
        long i = strtol(spec + 1, &end, 10);
        return !*end && i >= 0 && (size_t)i < t->n_cols ? (int)i : -1;
    }
    return -1;
}

static int add_row(wm_table *t, char **row, size_t *cap) {
    if (t->n_rows == *cap) {
        size_t nc = *cap ? 2 * *cap : 256;
        char **cells = realloc(t->cells, nc * t->n_cols * sizeof *cells);
        if (!cells) return -1;
        t->cells = cells;
        *cap = nc;
    }
    memcpy(t->cells + t->n_rows * t->n_cols, row, t->n_cols * sizeof *row);
    t->n_rows++;
    return 0;
}

/* ---------------------------------------------------------------- TSV / CSV */

/* Frees the n cells read so far and returns rc (a failed record leaves nothing behind). */
static int drop_cells(char **cells, int n, char *buf, int rc) {
    free(buf);
    for (int i = 0; i < n; i++) free(cells[i]);
    return rc;
}

/* Reads one record starting at *p; cells are new strings, owned by the caller on success. Returns the cell count,
   or, having freed every cell of the record: -1 on OOM, -2 on a bad quote, -3 past max cells. */
static int read_record(const char **p, const char *end, char sep, int quoting, char **cells, int max, size_t *line) {
    int n = 0;
    const char *s = *p;
    for (;;) {
        char *buf = NULL;
        size_t len = 0, cap = 0;
        int quoted = quoting && s < end && *s == '"';
        if (quoted) s++;
        for (;;) {
            if (s >= end) {
                if (quoted) return drop_cells(cells, n, buf, -2);
                break;
            }
            char ch = *s;
            if (quoted) {
                if (ch == '"') {
                    if (s + 1 < end && s[1] == '"') s++;
                    else { s++; quoted = 0; continue; }
                } else if (ch == '\n') (*line)++;
            } else if (ch == sep || ch == '\n' || ch == '\r')
                break;
            if (len + 2 > cap) {
                char *nb = realloc(buf, cap = cap ? 2 * cap : 32);
                if (!nb) return drop_cells(cells, n, buf, -1);
                buf = nb;
            }
            buf[len++] = ch;
            s++;
        }
        if (!buf && !(buf = malloc(1))) return drop_cells(cells, n, NULL, -1);
        buf[len] = 0;
        if (n == max) return drop_cells(cells, n, buf, -3);
        cells[n++] = buf;
        if (s < end && *s == sep) { s++; continue; }
        if (s < end && *s == '\r') s++;
        if (s < end && *s == '\n') s++;
        break;
    }
    *p = s;
    return n;
}

static wm_status parse_sv(const char *text, size_t len, char sep, const char *label, wm_table *t, wm_error *err) {
    const char *p = text, *end = text + len;
    char *cells[MAX_COLS];
    size_t line = 1, cap = 0;
    int quoting = sep == ',';
    int n = read_record(&p, end, sep, quoting, cells, MAX_COLS, &line);
    if (n <= 0) {
        if (n == -1) return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", label);
        return wm_err(err, WM_ERR_INPUT, "%s: line 1: %s", label, n == -3 ? "more than 256 columns" : "no header row");
    }
    t->n_cols = (size_t)n;
    if (!(t->names = malloc((size_t)n * sizeof *t->names))) {
        drop_cells(cells, n, NULL, 0);
        return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", label);
    }
    memcpy(t->names, cells, (size_t)n * sizeof *cells);
    while (p < end) {
        line++;
        size_t at = line;
        if (*p == '\n' || (*p == '\r' && p + 1 < end && p[1] == '\n')) { /* blank line */
            p += *p == '\r' ? 2 : 1;
            continue;
        }
        int k = read_record(&p, end, sep, quoting, cells, MAX_COLS, &line);
        if (k == -1) return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", label);
        if (k < 0 || (size_t)k != t->n_cols) { /* a failed record (k < 0) has freed its own cells */
            for (int i = 0; i < k; i++) free(cells[i]);
            return wm_err(err, WM_ERR_INPUT, "%s: line %zu: %s", label, at,
                          k == -2 ? "unterminated quoted cell" : "the row does not have the header's number of cells");
        }
        if (add_row(t, cells, &cap)) {
            for (int i = 0; i < k; i++) free(cells[i]);
            return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", label);
        }
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- JSONL */

static int json_depth_ok(const char *s, size_t n) {
    int d = 0, in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
        } else if (c == '"') in_str = 1;
        else if (c == '{' || c == '[') {
            if (++d > MAX_JSON_DEPTH) return 0;
        } else if (c == '}' || c == ']') d--;
    }
    return 1;
}

static char *cell_of(const cJSON *v) {
    if (cJSON_IsString(v)) return strdup(v->valuestring);
    if (cJSON_IsNumber(v) || cJSON_IsBool(v)) return cJSON_PrintUnformatted(v);
    return NULL;
}

static wm_status parse_jsonl(const char *text, size_t len, const char *label, wm_table *t, wm_error *err) {
    size_t cap = 0, line = 0;
    const char *p = text, *end = text + len;
    wm_status st = WM_OK;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        line++;
        size_t n = (size_t)(le - p);
        const char *q = p;
        p = nl ? nl + 1 : end;
        while (n && (*q == ' ' || *q == '\t' || *q == '\r')) q++, n--;
        if (!n) continue;
        if (!json_depth_ok(q, n)) return wm_err(err, WM_ERR_INPUT, "%s: line %zu: nested deeper than %d", label, line, MAX_JSON_DEPTH);
        cJSON *o = cJSON_ParseWithLength(q, n);
        if (!cJSON_IsObject(o)) {
            cJSON_Delete(o);
            return wm_err(err, WM_ERR_INPUT, "%s: line %zu: not a JSON object", label, line);
        }
        if (!t->names) { /* the first object's keys are the columns */
            size_t k = 0;
            for (const cJSON *e = o->child; e; e = e->next) k++;
            if (k == 0 || k > MAX_COLS) {
                cJSON_Delete(o);
                return wm_err(err, WM_ERR_INPUT, "%s: line %zu: an object with 1 to %d keys is expected", label, line, MAX_COLS);
            }
            if (!(t->names = calloc(k, sizeof *t->names))) {
                cJSON_Delete(o);
                return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", label);
            }
            t->n_cols = k;
            k = 0;
            for (const cJSON *e = o->child; e; e = e->next)
                if (!(t->names[k++] = strdup(e->string ? e->string : ""))) st = WM_ERR_NOMEM;
        }
        char *row[MAX_COLS] = {0};
        for (size_t c = 0; c < t->n_cols && !st; c++) row[c] = cell_of(cJSON_GetObjectItemCaseSensitive(o, t->names[c]));
        cJSON_Delete(o);
        if (st || add_row(t, row, &cap)) {
            for (size_t c = 0; c < t->n_cols; c++) free(row[c]);
            return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", label);
        }
    }
    if (!t->names) return wm_err(err, WM_ERR_INPUT, "%s: no rows", label);
    return WM_OK;
}

wm_status wm_table_parse(const char *text, size_t len, wm_table_format fmt, const char *label, wm_table *t, wm_error *err) {
    memset(t, 0, sizeof *t);
    wm_status st;
    switch (fmt) {
    case WM_TABLE_JSONL: st = parse_jsonl(text, len, label, t, err); break;
    case WM_TABLE_TSV: st = parse_sv(text, len, '\t', label, t, err); break;
    case WM_TABLE_CSV: st = parse_sv(text, len, ',', label, t, err); break;
    default: st = wm_err(err, WM_ERR_USAGE, "%s: unknown data set format", label);
    }
    if (st) wm_table_free(t);
    return st;
}

wm_status wm_table_read(const char *path, wm_table_format fmt, wm_table *t, wm_error *err) {
    if (fmt == WM_TABLE_AUTO) {
        const char *dot = strrchr(path, '.');
        if (dot && (!strcmp(dot, ".jsonl") || !strcmp(dot, ".json"))) fmt = WM_TABLE_JSONL;
        else if (dot && !strcmp(dot, ".tsv")) fmt = WM_TABLE_TSV;
        else if (dot && !strcmp(dot, ".csv")) fmt = WM_TABLE_CSV;
        else return wm_err(err, WM_ERR_USAGE, "%s: cannot tell the format from the extension (.jsonl, .tsv or .csv)", path);
    }
    wm_map m = {0};
    wm_status st = wm_map_file(path, 0, &m, err);
    if (st) return st;
    st = wm_table_parse((const char *)m.data, m.size, fmt, path, t, err);
    wm_unmap(&m);
    return st;
}
