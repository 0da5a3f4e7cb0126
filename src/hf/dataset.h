/*
 * dataset.h - a data set named as the reference's recipes name it (eval.dataset.path / name / split) resolved to
 * table files, offline, in one place:
 *   - a local table file (.jsonl / .json / .csv / .tsv, each optionally .gz, .parquet or .arrow): itself;
 *   - a local folder: its <split>.<ext> (the split given, else test, validation, train);
 *   - ORG/NAME (or NAME): the hub cache (hub.h's wm_hf_cache_dir) datasets--ORG--NAME/snapshots/<refs/main>/, the
 *     files of the split under a folder named by the config (GLUE's "sst2/validation-00000-of-00001.parquet"),
 *     else at the top or under data/ ("data/test-00000-of-00002.parquet", "test.jsonl.gz"), every shard in name
 *     order; then the `datasets` library's cache (wm_hf_datasets_cache_dir) ORG___NAME/<config>/<version>/<hash>/
 *     <name>-<split>[-NNNNN-of-NNNNN].arrow (Arrow IPC streams, core/arrow_ipc.h).
 * Nothing is downloaded. When nothing is found, why says exactly which folders were looked in. Bounds: 4096 entries
 * of a cache folder are looked at, the first WM_DATASET_MAX_FILES shards in name order are read (an eval reads
 * --samples rows, 100 by default, from the first ones).
 */
#ifndef WM_HF_DATASET_H
#define WM_HF_DATASET_H

#include <stddef.h>

#include "core/table.h"

#define WM_DATASET_MAX_FILES 64

typedef struct wm_dataset_files {
    size_t n;
    char paths[WM_DATASET_MAX_FILES][1024]; /* in the order their rows are read */
    int from_cache;                         /* 1: found in a Hugging Face cache */
} wm_dataset_files;

/*
 * Resolves spec (config and split may be NULL or ""). WM_OK with f->n > 0: found; WM_OK with f->n == 0: nothing
 * readable there, why[nwhy] says what was tried. An error only for a damaged
 * cache entry (a refs/main that is not a commit).
 */
wm_status wm_dataset_resolve(const char *spec, const char *config, const char *split, wm_dataset_files *f, char *why,
                             size_t nwhy, wm_error *err);

/* Reads f's files in order into one table (every shard with the first one's columns), o->max_rows in all. */
wm_status wm_dataset_read(const wm_dataset_files *f, const wm_table_opts *o, wm_table *t, wm_error *err);

#endif
