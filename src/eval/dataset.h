/*
 * dataset.h - local data sets for `winml eval --mode task`: a table of
 * string cells read from JSONL (one object per line; cells by key),
 * TSV (tab separated, first row the header, no quoting, as GLUE ships it)
 * or CSV (RFC 4180: quoted cells with "" escapes and embedded newlines).
 * Columns are found by header name, or by 0-based index ("#2").
 * Untrusted input: every row must have the header's cell count (TSV/CSV),
 * JSONL lines must be objects (depth capped); errors name the file, line
 * and reason.
 */
#ifndef WM_EVAL_DATASET_H
#define WM_EVAL_DATASET_H

#include <stddef.h>

#include "winml/winml.h"

typedef enum wm_table_format { WM_TABLE_AUTO = 0, WM_TABLE_JSONL, WM_TABLE_TSV, WM_TABLE_CSV } wm_table_format;

typedef struct wm_table {
    size_t n_rows, n_cols;
    char **names;  /* n_cols column names */
    char **cells;  /* n_rows * n_cols, row-major; a missing JSONL key is NULL */
} wm_table;

/* Reads path (format from the extension when AUTO: .jsonl/.json, .tsv, .csv). t owns everything: wm_table_free. */
wm_status wm_table_read(const char *path, wm_table_format fmt, wm_table *t, wm_error *err);
/* Parses text held in memory (len bytes; label names it in errors). */
wm_status wm_table_parse(const char *text, size_t len, wm_table_format fmt, const char *label, wm_table *t, wm_error *err);
void wm_table_free(wm_table *t);

/* The column named spec, else "#N" is index N; -1 when there is none. */
int wm_table_col(const wm_table *t, const char *spec);

static inline const char *wm_table_cell(const wm_table *t, size_t row, int col) {
    return t->cells[row * t->n_cols + (size_t)col];
}

#endif
