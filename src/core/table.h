/*
 * table.h - local tables of text (eval data sets, calibration text): a table of
 * string cells read from JSONL (one object per line; cells by key),
 * TSV (tab separated, first row the header, no quoting, as GLUE ships it),
 * CSV (RFC 4180: quoted cells with "" escapes and embedded newlines), any of
 * these gzip-compressed (.jsonl.gz, .json.gz, .tsv.gz, .csv.gz: read through
 * zlib as a stream), Parquet (.parquet: core/parquet.h, the hub's format) or
 * Arrow IPC (.arrow: core/arrow_ipc.h, the `datasets` library's cache).
 * Columns are found by header name, or by 0-based index ("#2").
 * Untrusted input, read as a stream: a line at a time (a CSV record may
 * span lines), reading stops after max_rows data rows, so memory follows
 * the rows kept, not the file. A UTF-8 byte order mark is skipped. Refused
 * with "FILE:LINE: reason": a line (or CSV record) over max_line bytes
 * (its length and the limit named, nothing of it buffered past the
 * limit), invalid UTF-8 or a NUL byte ("at byte N" of the line), a row
 * without the header's cell count (TSV/CSV), a JSONL line that is not an
 * object (depth capped).
 */
#ifndef WM_CORE_TABLE_H
#define WM_CORE_TABLE_H

#include <stddef.h>

#include "winml/winml.h"

#define WM_TABLE_MAX_LINE ((size_t)8 << 20) /* default bytes of one line: far above any text a model reads */

typedef enum wm_table_format { WM_TABLE_AUTO = 0, WM_TABLE_JSONL, WM_TABLE_TSV, WM_TABLE_CSV, WM_TABLE_PARQUET,
                                 WM_TABLE_ARROW } wm_table_format;

typedef struct wm_table {
    size_t n_rows, n_cols;
    char **names;  /* n_cols column names */
    char **cells;  /* n_rows * n_cols, row-major; a missing JSONL key is NULL */
    size_t *lines; /* n_rows: the 1-based line each row starts on (parquet: the row number; for messages) */
    size_t *sizes; /* n_rows * n_cols bytes of each cell (binary cells may hold NUL bytes); NULL: text only */
} wm_table;

typedef struct wm_table_opts {
    size_t max_rows; /* data rows to read, the rest of the file is not read (0: all) */
    size_t max_line; /* bytes of one line, or of a CSV record spanning lines (0: WM_TABLE_MAX_LINE) */
} wm_table_opts;

/*
 * Reads path (format from the extension when AUTO: .jsonl/.json, .tsv, .csv, each optionally .gz, .parquet or .arrow)
 * through a small read buffer. o may be NULL (defaults). t owns everything: wm_table_free; after an error t is
 * empty.
 */
wm_status wm_table_read(const char *path, wm_table_format fmt, const wm_table_opts *o, wm_table *t, wm_error *err);
/* Parses text held in memory (len bytes; label names it in errors), as wm_table_read. */
wm_status wm_table_parse(const char *text, size_t len, wm_table_format fmt, const char *label, const wm_table_opts *o,
                         wm_table *t, wm_error *err);
void wm_table_free(wm_table *t);

/* The one text of a number in a cell (parquet, arrow): the shortest of %.15g / %.17g (float: %.6g .. %.9g) that
   reads back the same value; NaN, Infinity, -Infinity. */
void wm_table_fmt_double(char *b, size_t n, double d);
void wm_table_fmt_float(char *b, size_t n, float f);

/* The column named spec, else "#N" is index N; -1 when there is none. */
int wm_table_col(const wm_table *t, const char *spec);

static inline const char *wm_table_cell(const wm_table *t, size_t row, int col) {
    return t->cells[row * t->n_cols + (size_t)col];
}

#endif
