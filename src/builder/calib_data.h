/*
 * calib_data.h - static calibration's text samples from a recipe's dataset (eval.dataset.path, name, split) as
 * hf/dataset.h resolves it: a local table file (.jsonl / .json / .csv / .tsv, optionally .gz, .parquet or .arrow,
 * read by core/table.h's reader), a local folder holding <split>.<ext> (the recipe's split, else test, validation,
 * train) or a hub name found in the Hugging Face caches (every shard); its text column
 * (eval.dataset.columns_mapping.input_column, else "text", else "sentence"), each non-empty cell tokenized by the
 * checkpoint's tokenizer (special tokens added, cut to max_len). A name in no cache or a checkpoint without
 * tokenizer is "not reachable": the caller calibrates on seeded samples and says why.
 */
#ifndef WM_BUILDER_CALIB_DATA_H
#define WM_BUILDER_CALIB_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "winml/winml.h"

typedef struct wm_calib_texts {
    int32_t **rows;   /* n token rows (owned) */
    size_t *lens;     /* their lengths */
    size_t n;
    char file[512];   /* the file read */
    char column[64];  /* the column read */
} wm_calib_texts;

/*
 * Loads up to max_rows text rows of dataset path (config, split and column may be NULL or ""). WM_OK with
 * t->n > 0: rows read; WM_OK with t->n == 0: the dataset is not reachable here, why[nwhy] says what was tried. An
 * error when it is reachable but unusable: a malformed file (core/table.h's messages, naming file and line), no such column
 * (naming the file and its columns), no non-empty text row, a text the tokenizer refuses. t is freed on error.
 */
wm_status wm_calib_texts_load(const char *ckpt_dir, const char *path, const char *config, const char *split,
                              const char *column, size_t max_rows, size_t max_len, wm_calib_texts *t, char *why,
                              size_t nwhy, wm_error *err);
void wm_calib_texts_free(wm_calib_texts *t);

#endif
