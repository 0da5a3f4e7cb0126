/*
 * tok_json.h - pieces of a tokenizer.json (the `tokenizers` library's format) written with core/json.h, shared
 * by the tokenizers this project makes from other formats' metadata: GGUF (gguf/gguf_tok.c) and SentencePiece
 * model files (hf/spm_tok.c).
 */
#ifndef WM_HF_TOK_JSON_H
#define WM_HF_TOK_JSON_H

#include <stdint.h>

#include "core/json.h"

/* A Replace normalizer / decoder step as an array element: pattern kind "String" or "Regex". */
void wm_tokjson_replace(wm_json *j, const char *kind, const char *pattern, const char *content);

/* "post_processor": TemplateProcessing that adds bos (NULL: none) before and eos (NULL: none) after each sequence;
   the pair's second sequence has type_id pair_type; special_tokens lists bos and eos (once when they are equal). */
void wm_tokjson_post(wm_json *j, const char *bos, int64_t bos_id, const char *eos, int64_t eos_id, int pair_type);

#endif
