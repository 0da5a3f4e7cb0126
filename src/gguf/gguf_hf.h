/*
 * gguf_hf.h - a GGUF read as a Hugging Face checkpoint, so that the
 * builder's one path (arch resolution, recipes, export) builds it.
 *
 * The metadata becomes the config.json a Hugging Face checkpoint of the
 * model would have (general.architecture -> model_type; <arch>.block_count,
 * embedding_length, attention.head_count ... -> their config keys, through
 * one key table), parsed by the same parser as any config.json; the
 * tokenizer metadata becomes tokenizer.json + tokenizer_config.json
 * (gguf_tok.c) and the special ids generation_config.json. These made files
 * travel in the checkpoint (wm_hf_checkpoint.made) and are written into
 * build folders.
 *
 * The tensors appear under their Hugging Face names (token_embd.weight ->
 * model.embed_tokens.weight, blk.N.attn_q.weight ->
 * model.layers.N.self_attn.q_proj.weight ...: a table per architecture)
 * with the Hugging Face shapes (GGUF dims reversed), through a
 * wm_st_file whose tensors read as float32: dequantized block by block,
 * with llama.cpp's conversions undone on the way (the Q/K row permutation
 * of llama-architecture files - whole rows move, so blocks stay intact;
 * the +1 llama.cpp adds to Gemma norm weights). Tensors no table names,
 * types the dequantizer does not handle and architectures without a table
 * are refused by name.
 */
#ifndef WM_GGUF_GGUF_HF_H
#define WM_GGUF_GGUF_HF_H

#include "gguf/gguf.h"
#include "hf/config.h"
#include "hf/safetensors.h"

/*
 * Opens spec (a .gguf file, one file of a split set, or a folder holding
 * one) as a checkpoint. ck receives the config, generation and tokenizer
 * configs made from the metadata, the made files and format "gguf"
 * (wm_hf_checkpoint_free). With st non-NULL, *st receives the tensors
 * (wm_st_close, which also releases the GGUF mapping). Errors name the file
 * and the key or tensor: WM_ERR_INPUT (malformed), WM_ERR_UNSUPPORTED
 * (architecture, tensor type, tokenizer model).
 */
wm_status wm_gguf_open_checkpoint(const char *spec, wm_hf_checkpoint *ck, wm_st_file **st, wm_error *err);

/* The same for an open file, which it takes over: released with *st, or before returning when st is NULL or on error. */
wm_status wm_gguf_checkpoint_of(wm_gguf_file *f, wm_hf_checkpoint *ck, wm_st_file **st, wm_error *err);

/* The GGUF tensor a tensor of such a wm_st_file reads from; NULL for any other tensor. */
const wm_gguf_tensor *wm_gguf_st_origin(const wm_st_tensor *t);
/* What is done to it on the way ("" / "Q/K rows un-permuted" / "norm weight - 1"). */
const char *wm_gguf_st_conversion(const wm_st_tensor *t);

/*
 * 1 and *form when t (a tensor of such a wm_st_file) is a 2-D GGUF tensor whose blocks carry (wm_ggml_carry_form)
 * and whose values are its rows as stored, or moved whole (the Q/K un-permutation); 0 otherwise (float types,
 * vectors, values changed on the way).
 */
int wm_gguf_st_carry(const wm_st_tensor *t, wm_ggml_carry *form);
/*
 * Row r of such a t (its Hugging Face row, r < rows) as carried blocks: codes[0..K), scales and zero points
 * [0..K / form.block), K = the row's length (wm_ggml_carry_row on the GGUF row it reads).
 */
void wm_gguf_st_carry_row(const wm_st_tensor *t, uint64_t r, uint8_t *codes, float *scales, float *zp);

/* The model_type a general.architecture maps to; NULL when there is no table for it. */
const char *wm_gguf_model_type(const char *arch);
/* The architectures with a table, for messages ("llama, qwen2, ..."). */
const char *wm_gguf_arch_list(void);

/*
 * tokenizer.json and tokenizer_config.json texts for f's tokenizer metadata
 * (gguf_tok.c), encoding as transformers' GGUF tokenizer does: *tok and
 * *cfg are malloc'ed NUL-terminated texts owned by the caller, both NULL
 * when the file has no tokenizer.ggml.model. context: the model's
 * context length for model_max_length (0: none).
 */
wm_status wm_gguf_tokenizer_files(const wm_gguf_file *f, int64_t context, char **tok, size_t *tok_len, char **cfg,
                                  size_t *cfg_len, wm_error *err);

#endif
