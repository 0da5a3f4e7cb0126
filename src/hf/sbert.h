/*
 * sbert.h - the sentence-transformers files of a checkpoint (or of a build
 * folder, which carries them): modules.json (the module pipeline),
 * sentence_bert_config.json (max_seq_length, do_lower_case) and the Pooling
 * module's <path>/config.json (which token poolings, concatenated in
 * sentence-transformers' order).
 *
 * Every file is untrusted: sizes are capped, fields type-checked, a key
 * listed twice is refused, the Pooling module's path must be one plain
 * folder name inside the model's folder (no '/', no "..", no leading dot).
 * Modules other than Transformer (path ""), Pooling and Normalize (a Dense
 * projection, a LayerNorm, ...) would change the embedding in ways winml
 * does not run: they are refused by name rather than silently skipped.
 */
#ifndef WM_HF_SBERT_H
#define WM_HF_SBERT_H

#include <stddef.h>
#include <stdint.h>

#include "winml/winml.h"

/* Token poolings, in the order sentence-transformers concatenates them. */
enum {
    WM_SBERT_CLS = 1 << 0,          /* pooling_mode_cls_token: the first token */
    WM_SBERT_MAX = 1 << 1,          /* pooling_mode_max_tokens: the maximum over unmasked tokens */
    WM_SBERT_MEAN = 1 << 2,         /* pooling_mode_mean_tokens: the mean over unmasked tokens */
    WM_SBERT_MEAN_SQRT = 1 << 3,    /* pooling_mode_mean_sqrt_len_tokens: their sum / sqrt(count) */
    WM_SBERT_WEIGHTED = 1 << 4,     /* pooling_mode_weightedmean_tokens: weighted by position 1..S */
    WM_SBERT_LAST = 1 << 5,         /* pooling_mode_lasttoken: the last unmasked token */
    WM_SBERT_N_MODES = 6
};

#define WM_SBERT_MAX_BYTES (1u << 20) /* each of the three files */
#define WM_SBERT_PATH_MAX 64          /* the Pooling module's folder name */

typedef struct wm_sbert {
    int has_modules;           /* modules.json was found */
    int has_config;            /* sentence_bert_config.json was found */
    int64_t max_seq_length;    /* tokens kept (special tokens included); 0: not given */
    int do_lower_case;         /* the text is lowercased before tokenizing */
    unsigned modes;            /* WM_SBERT_* of the Pooling module; 0: no Pooling module */
    int64_t dim;               /* its word_embedding_dimension; 0: not given */
    int normalize;             /* a Normalize module follows: L2-normalized embeddings */
    char pooling_dir[WM_SBERT_PATH_MAX]; /* the Pooling module's folder ("1_Pooling"); "" when none */
} wm_sbert;

/*
 * Reads the sentence-transformers files of folder dir into *out (zeroed
 * first). Missing files are not an error (has_modules / has_config stay 0);
 * a malformed file, a field of the wrong type or range, an unsafe module
 * path or a module winml does not run is (WM_ERR_INPUT / WM_ERR_UNSUPPORTED,
 * naming the file and the field). A modules.json without a Pooling module is
 * refused (its output would be token embeddings, not one vector).
 */
wm_status wm_sbert_load(const char *dir, wm_sbert *out, wm_error *err);

/*
 * A max_seq_length the model cannot take: more tokens than its position table (config.json's
 * max_position_embeddings, max_positions; 0 or less: unknown, not checked) is refused (WM_ERR_INPUT, naming
 * dir/sentence_bert_config.json and the field) rather than cut silently to another length.
 */
wm_status wm_sbert_check_length(const wm_sbert *sb, const char *dir, int64_t max_positions, wm_error *err);

/* The pooling-mode key of bit i (0 .. WM_SBERT_N_MODES-1), e.g. "pooling_mode_mean_tokens". */
const char *wm_sbert_mode_key(int i);

#endif
