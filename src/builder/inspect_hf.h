/* inspect_hf.h - `winml inspect` for checkpoint folders (format "hf"). */
#ifndef WM_BUILDER_INSPECT_HF_H
#define WM_BUILDER_INSPECT_HF_H

#include "core/json.h"
#include "winml/winml.h"

/*
 * Describes the checkpoint at spec for task (-1: its own) into j (an
 * object): model type, task and inference class, family, naming scheme and
 * feature list, IO with dtypes and shapes, parameters, size per precision,
 * external data. list_tasks: only the supported tasks. Reads config.json
 * and safetensors headers, never weights.
 */
wm_status wm_hf_inspect(const char *spec, int task, int list_tasks, wm_json *j, wm_error *err);

#endif
