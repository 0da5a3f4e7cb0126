/*
 * catalog.h - `winml catalog`: the models this build has verified. The rows
 * are GENERATED at build time (tools/gen_catalog.c, a CMake custom command)
 * from the `winml sweep` summaries checked in under data/catalog/<name>.json: one
 * row per recipe that passed (build, analyze, perf and compare), the latest
 * run of a key winning. Nothing here is written by hand.
 */
#ifndef WM_TASKS_CATALOG_H
#define WM_TASKS_CATALOG_H

#include <stddef.h>

#include "core/json.h"
#include "winml/winml.h"

typedef struct wm_catalog_row {
    const char *key, *model, *task, *model_type;
    const char *precision, *built_precision; /* the recipe's file name says; the build made (NULL: unknown) */
    const char *recipe_ep, *recipe_device; /* the recipe's EP folder (NULL when flat) */
    const char *part;                      /* a part recipe's part (encoder, decoder ...; NULL: the whole model) */
    const char *ep, *device;               /* where the sweep ran it */
    const char *run_timestamp, *source;    /* source: the summary file it came from */
    double latency_ms_mean, cosine_similarity_min, onnx_size_bytes; /* < 0 when unknown */
    int random_weights;
} wm_catalog_row;

/* The generated table (catalog_table.c in the build folder). */
extern const wm_catalog_row wm_catalog_rows[];
extern const size_t wm_catalog_n_rows;

/*
 * The catalog as the reference's list (model_id, task, model_type, supported_eps{alias: [DEVICE]}, size_mb) with
 * ours beside (precisions as built, recipe_precisions as the recipes' file names say, parts: the parts of a
 * model exported as part recipes that passed, recipe_targets, last_result), one entry per model and task, filtered by ep (an alias such as "cpu" or a full name such as
 * "CPUExecutionProvider", case-insensitive; NULL: all), device (cpu, gpu, npu; NULL: all) and task (NULL: all).
 * j receives a JSON array. WM_ERR_USAGE for an unknown EP or device name.
 */
wm_status wm_catalog_json(const char *ep, const char *device, const char *task, wm_json *j, wm_error *err);

#endif
