/*
 * calib_data.c - a recipe's dataset as static calibration's text samples (calib_data.h).
 */
#include "builder/calib_data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "core/error.h"
#include "core/table.h"
#include "hf/dataset.h"
#include "hf/tokenizer.h"

/* The table file(s) of path (hf/dataset.h: a local file or folder, or a hub name in the caches): 1 found, 0 not
   reachable (why[] set). */
static int find_table(const char *path, const char *config, const char *split, wm_dataset_files *f, char *why,
                      size_t nwhy, wm_error *err, wm_status *st) {
    *st = wm_dataset_resolve(path, config, split, f, why, nwhy, err);
    return !*st && f->n > 0;
}

void wm_calib_texts_free(wm_calib_texts *t) {
    for (size_t i = 0; t->rows && i < t->n; i++) free(t->rows[i]);
    free(t->rows);
    free(t->lens);
    memset(t, 0, sizeof *t);
}

wm_status wm_calib_texts_load(const char *ckpt_dir, const char *path, const char *config, const char *split,
                              const char *column, size_t max_rows, size_t max_len, wm_calib_texts *t, char *why, size_t nwhy,
                              wm_error *err) {
    memset(t, 0, sizeof *t);
    why[0] = 0;
    if (!path || !*path) {
        snprintf(why, nwhy, "the recipe names no dataset");
        return WM_OK;
    }
    wm_dataset_files *files = malloc(sizeof *files);
    if (!files) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    wm_status fst;
    if (!find_table(path, config, split, files, why, nwhy, err, &fst)) {
        free(files);
        return fst;
    }
    snprintf(t->file, sizeof t->file, "%s%s", files->paths[0], files->n > 1 ? " (and the next shards)" : "");
    wm_tokenizer *tok = NULL;
    wm_error te = {0};
    if (wm_tokenizer_load_dir(ckpt_dir, &tok, &te)) {
        snprintf(why, nwhy, "'%.200s' exists, but the checkpoint has no tokenizer to read its text (%.200s)", t->file,
                 te.msg);
        t->file[0] = 0;
        free(files);
        return WM_OK;
    }
    /* rows are read until max_rows non-empty texts are found; empty lines (wikitext has many) are skipped, so read
       a bounded surplus */
    size_t cap_rows = max_rows < ((size_t)1 << 20) / 8 ? max_rows * 8 + 64 : (size_t)1 << 20;
    wm_table tab = {0};
    wm_table_opts to = {cap_rows, 0};
    wm_status s = wm_dataset_read(files, &to, &tab, err);
    free(files);
    int col = -1;
    if (!s) {
        if (column && *column) col = wm_table_col(&tab, column);
        else if ((col = wm_table_col(&tab, "text")) < 0) col = wm_table_col(&tab, "sentence");
        if (col < 0) {
            char names[256] = "";
            for (size_t i = 0; i < tab.n_cols && strlen(names) < 200; i++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", tab.names[i]);
            s = wm_err(err, WM_ERR_INPUT, "calibration dataset %s: no column '%s' (columns: %s; recipe "
                       "eval.dataset.columns_mapping.input_column names it)", t->file,
                       column && *column ? column : "text' or 'sentence", names);
        }
    }
    if (!s && (!(t->rows = calloc(max_rows ? max_rows : 1, sizeof *t->rows)) ||
               !(t->lens = calloc(max_rows ? max_rows : 1, sizeof *t->lens))))
        s = wm_err(err, WM_ERR_NOMEM, "out of memory");
    wm_encoding e;
    wm_encoding_init(&e);
    wm_encode_opts eo = wm_encode_opts_default();
    eo.use_defaults = 0;
    eo.truncation.enabled = 1;
    eo.truncation.max_length = max_len;
    for (size_t r = 0; !s && r < tab.n_rows && t->n < max_rows; r++) {
        const char *cell = wm_table_cell(&tab, r, col);
        size_t len = cell ? strlen(cell) : 0;
        size_t k = 0;
        while (k < len && (cell[k] == ' ' || cell[k] == '\t' || cell[k] == '\n' || cell[k] == '\r')) k++;
        if (k == len) continue; /* an empty text calibrates nothing */
        if ((s = wm_tokenizer_encode(tok, cell, len, NULL, 0, &eo, &e, err))) {
            wm_err_prefix(err, "calibration dataset %s line %zu", t->file, tab.lines[r]);
            break;
        }
        if (!e.n) continue;
        if (!(t->rows[t->n] = malloc(e.n * sizeof **t->rows))) {
            s = wm_err(err, WM_ERR_NOMEM, "out of memory");
            break;
        }
        memcpy(t->rows[t->n], e.ids, e.n * sizeof **t->rows);
        t->lens[t->n++] = e.n;
    }
    if (!s && !t->n)
        s = wm_err(err, WM_ERR_INPUT, "calibration dataset %s: no non-empty text in column '%s' (of %zu rows read)",
                   t->file, tab.names[col], tab.n_rows);
    if (!s) snprintf(t->column, sizeof t->column, "%s", tab.names[col]);
    wm_encoding_free(&e);
    wm_table_free(&tab);
    wm_tokenizer_free(tok);
    if (s) wm_calib_texts_free(t);
    return s;
}
