/*
 * folder_cfg.h - what a causal LM's folder says about generation: its end ids and its context length, read from
 * genai_config.json / generation_config.json / config.json beside the model. A file that is there but cannot be
 * read or parsed, or a field of the wrong kind, is an error naming the file and field, never skipped.
 */
#ifndef WM_LLM_FOLDER_CFG_H
#define WM_LLM_FOLDER_CFG_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* End ids from generation_config.json, else config.json, of folder into ids[0..cap): *n set (0 when neither names
 * one). */
wm_status wm_llm_folder_eos(const char *folder, int32_t *ids, size_t cap, size_t *n, wm_error *err);

/* The model's context in tokens: genai_config.json model.context_length, else config.json max_position_embeddings
 * (n_positions). *n = 0 when neither says; *src (static text) names the one used, NULL when none. */
wm_status wm_llm_folder_context(const char *folder, size_t *n, const char **src, wm_error *err);

#endif
