/*
 * media_table.h - the rows of a task-eval data set whose inputs are media (audio, images) and whose targets are
 * text (a transcript, a label): the data set (--dataset) is a table file (CSV, TSV, JSONL, Parquet, Arrow;
 * core/table.h), or a folder / hub name ORG/NAME resolved from the local caches (hf/dataset.h, --dataset-config,
 * --split). The media column is named by the caller's flag, else the first of its defaults present; each may be
 * a column of paths (relative to the (first) table file's folder) or a struct of the `datasets` Audio / Image
 * feature flattened by the table readers into NAME.bytes and NAME.path: a row's encoded file is then its bytes
 * cell, held in memory (no temporary file), else its path. The target column likewise (no struct).
 *
 * A row whose media or target cell is missing is an error naming the table and line; an input held in the table
 * is named "TABLE: row R, column NAME.bytes" (R 1-based over the rows read), so that a decoder's error on it names
 * the table, row and column.
 */
#ifndef WM_TASKS_MEDIA_TABLE_H
#define WM_TASKS_MEDIA_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "core/json.h"
#include "core/table.h"
#include "tasks/task_eval.h"

typedef struct wm_media_row {
    const char *name;    /* the file's path, or the bytes cell's name (see above) */
    const uint8_t *data; /* the encoded file held in the table (NULL: name is a file) */
    size_t n;            /* bytes at data */
    const char *target;  /* the target cell, never NULL or empty */
    size_t line;         /* the table line (Parquet / Arrow: the row number) */
} wm_media_row;

typedef struct wm_media_rows {
    wm_table t;       /* owns the cells data and target point into */
    wm_media_row *v;  /* n rows, in table order */
    size_t n;
    char **names;     /* n: each row's malloc'ed name */
} wm_media_rows;

/* Which columns to read: kind "audio" / "image" (messages, flag --KIND-column), target what ("transcript", ...). */
typedef struct wm_media_cols {
    const char *kind, *want_media;         /* want_media: the flag's column, NULL: the first default present */
    const char *const *media_defaults;     /* NULL-terminated */
    const char *what, *want_target, *target_flag;
    const char *const *target_defaults;
} wm_media_cols;

/*
 * Reads o->dataset (o->samples rows at most; none is an error) into *r; the files read go into j's
 * "dataset_files" (an array) when j is not NULL. *r: wm_media_rows_free (also after an error).
 */
wm_status wm_media_rows_read(const wm_task_opts *o, const wm_media_cols *c, wm_media_rows *r, wm_json *j,
                             wm_error *err);
void wm_media_rows_free(wm_media_rows *r);

#endif
