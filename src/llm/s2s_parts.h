/*
 * s2s_parts.h - generation over an encoder-decoder built as the reference's two part recipes
 * (src/builder/recipe_s2s.c: an encoder part folder and a decoder part folder, model.onnx each, static shapes,
 * batch 1): greedy search with the processors of seq2seq.h, token for token what wm_s2s_generate gives on the
 * merged build of the same checkpoint while the decoder's T cache slots last.
 */
#ifndef WM_LLM_S2S_PARTS_H
#define WM_LLM_S2S_PARTS_H

#include "llm/seq2seq.h"

typedef struct wm_s2s_parts wm_s2s_parts;

/* Opens enc_dir/model.onnx (input_ids + attention_mask [1, seq] -> encoder_hidden_states) and dec_dir/model.onnx
   (decoder_input_ids [1, 1], encoder_hidden_states, attention_mask, decoder_attention_mask [1, T], cache_position,
   past_N_key / value -> logits, present_N_key / value). Other layouts: WM_ERR_UNSUPPORTED naming the file.
   *out: wm_s2s_parts_free. */
wm_status wm_s2s_parts_open(const char *enc_dir, const char *dec_dir, int threads, wm_s2s_parts **out,
                            wm_error *err);
void wm_s2s_parts_free(wm_s2s_parts *p);

/* Greedy search on one source ids[0..n) (n up to the encoder's static length; padded with pad_token_id, mask 0):
   *out (malloc'ed, caller frees) the start token then the generated ids, *width of them; stops at an end id,
   g->max_length or the decoder's T slots. num_beams > 1: WM_ERR_UNSUPPORTED. */
wm_status wm_s2s_parts_generate(wm_s2s_parts *p, const int64_t *ids, int64_t n, const wm_s2s_gen *g, int64_t **out,
                                int64_t *width, wm_error *err);

#endif
