/*
 * spm_model.h - SentencePiece model files (spiece.model, source.spm,
 * sentencepiece.bpe.model, tokenizer.model): the ModelProto protobuf read
 * as untrusted input, and the tokenizer made of it.
 *
 * The fields read (sentencepiece_model.proto): ModelProto.pieces (1),
 * trainer_spec (2), normalizer_spec (3); SentencePiece.piece (1), score (2),
 * type (3); TrainerSpec.model_type (3), vocab_size (4),
 * split_by_whitespace (22), treat_whitespace_as_suffix (24), split_digits
 * (25), byte_fallback (35), unk_id (40), bos_id (41), eos_id (42), pad_id
 * (43), unk_surface (44), unk_piece (45), bos_piece (46), eos_piece (47), pad_piece (48);
 * NormalizerSpec.name (1), precompiled_charsmap (2), add_dummy_prefix (3),
 * remove_extra_whitespaces (4), escape_whitespaces (5). Every other field is
 * skipped by its wire type; groups (wire types 3, 4) and the reserved wire
 * types 6, 7 are refused.
 */
#ifndef WM_HF_SPM_MODEL_H
#define WM_HF_SPM_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "hf/tokenizer.h"

/* SentencePiece.Type */
enum { WM_SPM_NORMAL = 1, WM_SPM_UNKNOWN = 2, WM_SPM_CONTROL = 3, WM_SPM_USER = 4, WM_SPM_UNUSED = 5, WM_SPM_BYTE = 6 };
/* TrainerSpec.ModelType */
enum { WM_SPM_UNIGRAM = 1, WM_SPM_BPE = 2, WM_SPM_WORD = 3, WM_SPM_CHAR = 4 };

#define WM_SPM_MAX_PIECES (1u << 24) /* more pieces than any real model: a bound on hostile files */
#define WM_SPM_MAX_DEPTH 4           /* message nesting the reader follows (ModelProto > spec > field) */

typedef struct wm_spm_piece {
    const char *s; /* NUL-terminated, valid UTF-8, inside the model's pool */
    uint32_t len;
    float score;
    int type;
} wm_spm_piece;

typedef struct wm_spm_model {
    wm_spm_piece *pieces;
    size_t n;
    /* trainer_spec */
    int model_type;
    int32_t vocab_size;
    int32_t unk_id, bos_id, eos_id, pad_id;
    const char *unk_piece, *bos_piece, *eos_piece, *pad_piece;
    const char *unk_surface; /* how decoding writes the unknown piece (default " \u2047 ") */
    int byte_fallback, split_by_whitespace, treat_whitespace_as_suffix, split_digits;
    /* normalizer_spec */
    const char *norm_name; /* "" when absent */
    const uint8_t *charsmap; /* precompiled_charsmap (NULL, 0 when absent) */
    size_t charsmap_len;
    int add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces;
    char *pool; /* owns every string above */
} wm_spm_model;

/*
 * Parses a ModelProto image (data, n bytes); name (the file) is used in
 * messages. Lengths, counts, varints, wire types, UTF-8 of the pieces, ids
 * (unk_id must name a piece, bos/eos/pad -1 or a piece), piece types and
 * finite scores are checked; a bad file is WM_ERR_INPUT naming the file,
 * the field and the reason. model types other than UNIGRAM / BPE are
 * WM_ERR_UNSUPPORTED. On success *m owns its memory (wm_spm_free); on
 * failure *m is left empty.
 */
wm_status wm_spm_parse(const uint8_t *data, size_t n, const char *name, wm_spm_model *m, wm_error *err);
/* wm_spm_parse of a whole file (mapped with wm_map_file). */
wm_status wm_spm_load(const char *path, wm_spm_model *m, wm_error *err);
void wm_spm_free(wm_spm_model *m);
/* "Unigram" / "BPE" ... for messages. */
const char *wm_spm_model_type_name(int model_type);

/*
 * The tokenizer of a SentencePiece model, as transformers reads it for the
 * tokenizer class cls (tokenizer_config.json's tokenizer_class; NULL or an
 * unknown class: SentencePiece's own segmentation, see spm_tok.c). dir
 * (may be NULL) supplies tokenizer_config.json (extra_ids, add_bos_token,
 * add_eos_token) and the special tokens. *out is freed with
 * wm_tokenizer_free.
 */
wm_status wm_spm_tokenizer(const wm_spm_model *m, const char *path, const char *cls, const char *dir,
                           wm_tokenizer **out, wm_error *err);

/* The tokenizer of m in the layout of class cls with "$A </s>" numbered eos_id (-1: no post-processor), nothing
 * read from a folder, no roles set (spm_marian.c builds on it). */
wm_status wm_spm_tokenizer_layout(const wm_spm_model *m, const char *path, const char *cls, int64_t eos_id,
                                  wm_tokenizer **out, wm_error *err);

/*
 * A Marian tokenizer (MarianTokenizer): source.spm segments the text (its
 * own normalization and Unigram model), the pieces become ids through
 * vocab.json (a piece not there: <unk>), </s> is appended; decoding maps ids
 * back through vocab.json and joins the pieces as SentencePiece does. dir
 * holds source.spm, vocab.json (and tokenizer_config.json).
 */
wm_status wm_spm_marian_tokenizer(const char *dir, wm_tokenizer **out, wm_error *err);

/* The SentencePiece file a folder without tokenizer.json has (spiece.model, sentencepiece.bpe.model,
 * tokenizer.model, or source.spm for Marian): 1 with its name in *file, 0 when none. */
int wm_spm_find(const char *dir, const char **file);

#endif
