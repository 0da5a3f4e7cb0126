/* inspect_hf.h - `winml inspect` for checkpoint folders (format "hf"). */
#ifndef WM_BUILDER_INSPECT_HF_H
#define WM_BUILDER_INSPECT_HF_H

#include "core/json.h"
#include "hf/config.h"
#include "hf/safetensors.h"
#include "winml/winml.h"

/*
 * Describes the checkpoint at spec for task (-1: its own) into j (an
 * object): model type, task and inference class, family, naming scheme and
 * feature list, IO with dtypes and shapes, parameters, size per precision,
 * external data. list_tasks: only the supported tasks. Reads config.json
 * and safetensors headers, never weights.
 */
wm_status wm_hf_inspect(const char *spec, int task, int list_tasks, wm_json *j, wm_error *err);

/* The description's keys for an opened checkpoint (st may be NULL), written into the open object j. */
wm_status wm_hf_describe(const wm_hf_checkpoint *ck, const wm_st_file *st, int task, wm_json *j, wm_error *err);
/* --list-tasks: {"format", "model_type", "default_task", "tasks"} as a new object. */
wm_status wm_hf_list_tasks(const wm_hf_checkpoint *ck, const wm_st_file *st, int task, const char *format, wm_json *j,
                           wm_error *err);

/*
 * `winml inspect` of a GGUF (file, split set, folder): header facts, the metadata (arrays and long strings
 * summarized), the tensor table (name, type, dims, bytes, the Hugging Face name it maps to and what is done to it),
 * parameters and bytes per type, and the checkpoint it maps to (as for a checkpoint folder) - or, when it maps to
 * nothing the builder supports, why ("checkpoint_error"). Reads the header only.
 */
wm_status wm_gguf_inspect(const char *spec, int task, int list_tasks, wm_json *j, wm_error *err);

#endif
