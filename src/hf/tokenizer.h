/*
 * tokenizer.h - Hugging Face tokenizers in C, matching the `tokenizers`
 * library (ids, tokens, byte offsets, type ids, masks, decoding).
 *
 * A wm_tokenizer is loaded from a tokenizer.json (or, in a folder without
 * one, from vocab.json + merges.txt or vocab.txt) and is immutable after
 * load: any number of threads may encode with it at once, each with its own
 * wm_encoding. A wm_encoding owns its result arrays and a scratch area
 * (buffers, a word cache, regex match data) that is reused from call to
 * call, so encoding in a loop allocates nothing once it has warmed up.
 *
 * Offsets are byte offsets into the text given to wm_tokenizer_encode
 * (the pair's offsets are into the pair text); `tokenizers` in Python
 * reports the same spans in characters. Special tokens added by the
 * post-processor and padding have offsets (0, 0).
 *
 * Pipeline (as in `tokenizers`): added tokens are split out of the text,
 * the rest is normalized, pre-tokenized and run through the model (BPE,
 * Unigram, WordPiece, WordLevel); then truncation, the post-processor
 * (special tokens, type ids) and padding.
 */
#ifndef WM_HF_TOKENIZER_H
#define WM_HF_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "winml/winml.h"

typedef struct wm_tokenizer wm_tokenizer;
typedef struct wm_tok_scratch wm_tok_scratch;

/* ------------------------------------------------------------------ load */

/*
 * Loads a tokenizer.json file. Text is hostile input: nesting deeper than
 * WM_TOK_MAX_JSON_DEPTH, ids outside [0, 2^31), merges whose parts or result
 * are not in the vocabulary, unknown component types and special tokens a
 * post-processor names but does not define are refused with a message naming
 * the file and field. A tokenizer_config.json next to the file (when there)
 * supplies the bos/eos/pad/unk token names. *out is freed with
 * wm_tokenizer_free.
 */
wm_status wm_tokenizer_load_file(const char *path, wm_tokenizer **out, wm_error *err);

/*
 * Loads from a folder: tokenizer.json if present, else a SentencePiece model
 * (spiece.model, sentencepiece.bpe.model, tokenizer.model, or Marian's
 * source.spm + vocab.json: spm_model.h), else vocab.json +
 * merges.txt (byte-level BPE as GPT-2), else vocab.txt (WordPiece as BERT;
 * do_lower_case from tokenizer_config.json, default true). Special tokens
 * come from tokenizer_config.json / special_tokens_map.json when present.
 */
wm_status wm_tokenizer_load_dir(const char *dir, wm_tokenizer **out, wm_error *err);

/* 1 when dir holds files wm_tokenizer_load_dir would read (tokenizer.json, a SentencePiece model, vocab.json with
 * merges.txt, or vocab.txt; one it cannot even stat counts, so the load names it), 0 when it holds none. */
int wm_tokenizer_dir_has(const char *dir);

/* A folder or a tokenizer.json path: dispatches to one of the two above. */
wm_status wm_tokenizer_load(const char *path, wm_tokenizer **out, wm_error *err);

/* Parses tokenizer.json text from memory; name is used in messages. */
wm_status wm_tokenizer_load_json(const char *text, size_t len, const char *name, wm_tokenizer **out,
                                 wm_error *err);

void wm_tokenizer_free(wm_tokenizer *t);

#define WM_TOK_MAX_JSON_DEPTH 128

/* -------------------------------------------------------------- encoding */

typedef struct wm_tok_offset {
    uint32_t start, end; /* byte offsets [start, end) */
} wm_tok_offset;

/*
 * The result of an encode. Arrays have n entries. Token strings are
 * wm_encoding_token(e, i, &len) (not NUL-terminated; vocabulary tokens point
 * into the tokenizer, so they are valid while it lives). word_ids: index of
 * the pre-tokenized word a token came from, -1 for special tokens and
 * padding. Initialize with wm_encoding_init, release with wm_encoding_free.
 */
typedef struct wm_tok_own { /* a token whose string is not the vocabulary's: token index, offset in strbuf */
    uint32_t i, ref;
} wm_tok_own;

typedef struct wm_encoding {
    size_t n;
    int32_t *ids;
    int32_t *type_ids;
    int32_t *word_ids;
    uint8_t *attention_mask;
    uint8_t *special_mask; /* 1 for tokens the post-processor added, and padding */
    wm_tok_offset *offsets;
    /* token strings (read them with wm_encoding_token): the model's vocabulary string of the id, except for the
     * tokens listed in own (by index; added tokens, unknown pieces, special tokens spelled otherwise, padding),
     * whose strings are in strbuf as a uint32 length and the bytes */
    const struct wm_tokenizer *tok;
    wm_tok_own *own;
    size_t n_own, own_cap;
    char *strbuf;
    size_t strbuf_n, strbuf_cap;
    size_t cap;  /* capacity of type_ids, attention_mask, special_mask */
    size_t cap2; /* capacity of ids, word_ids, offsets (the encoder's own arrays, handed over) */
    wm_tok_scratch *scratch; /* owned; reused between calls */
} wm_encoding;

void wm_encoding_init(wm_encoding *e);
void wm_encoding_free(wm_encoding *e);
const char *wm_encoding_token(const wm_encoding *e, size_t i, size_t *len);

typedef enum { WM_TOK_TRUNC_LONGEST_FIRST = 0, WM_TOK_TRUNC_ONLY_FIRST, WM_TOK_TRUNC_ONLY_SECOND } wm_tok_trunc_strategy;

typedef struct wm_tok_truncation {
    int enabled;
    size_t max_length;
    size_t stride; /* overflowing pieces are not kept; stride must be < max_length */
    wm_tok_trunc_strategy strategy;
    int left; /* truncate from the left */
} wm_tok_truncation;

typedef struct wm_tok_padding {
    int enabled;
    size_t length;   /* fixed length; 0 = longest in the batch */
    size_t multiple; /* pad_to_multiple_of, 0 = none */
    int left;
    int32_t pad_id, pad_type_id;
    char pad_token[64];
} wm_tok_padding;

/*
 * Encode options. use_defaults = 1 takes truncation and padding from the
 * tokenizer.json (as `tokenizers` does); otherwise the two given here apply.
 */
typedef struct wm_encode_opts {
    int add_special_tokens; /* post-processor adds [CLS]/[SEP]/<s> ... */
    int use_defaults;
    wm_tok_truncation truncation;
    wm_tok_padding padding;
} wm_encode_opts;

/* add_special_tokens = 1, use_defaults = 1. */
wm_encode_opts wm_encode_opts_default(void);

/*
 * Encodes text (UTF-8, len bytes) and, when pair != NULL, the pair text,
 * into *out (reusing its arrays). Invalid UTF-8 is an input error.
 * opts may be NULL (defaults).
 */
wm_status wm_tokenizer_encode(const wm_tokenizer *t, const char *text, size_t len, const char *pair, size_t pair_len,
                              const wm_encode_opts *opts, wm_encoding *out, wm_error *err);

/*
 * Encodes n inputs (pairs[i] may be NULL / pairs may be NULL) and pads them
 * to a common length when padding applies with length 0 (longest).
 */
wm_status wm_tokenizer_encode_batch(const wm_tokenizer *t, const char *const *texts, const size_t *lens,
                                    const char *const *pairs, const size_t *pair_lens, size_t n,
                                    const wm_encode_opts *opts, wm_encoding *outs, wm_error *err);

/* -------------------------------------------------------------- decoding */

typedef struct wm_tok_buf {
    char *p; /* malloc'ed, NUL-terminated when n > 0 */
    size_t n, cap;
} wm_tok_buf;

void wm_tok_buf_free(wm_tok_buf *b);

/*
 * Decodes ids into out (replacing its contents): ids with no token are
 * skipped, special added tokens are skipped when skip_special, then the
 * decoder chain runs (as tokenizers' Tokenizer.decode).
 */
wm_status wm_tokenizer_decode(const wm_tokenizer *t, const int32_t *ids, size_t n, int skip_special, wm_tok_buf *out,
                              wm_error *err);

/*
 * Streaming decode for generation (tokenizers' DecodeStream): feed one id
 * at a time; each step appends to *chunk the new text it can emit (possibly
 * nothing while a multi-byte character is incomplete). Free with
 * wm_tok_stream_free.
 */
typedef struct wm_tok_stream {
    const wm_tokenizer *t;
    int skip_special;
    int32_t *ids;
    size_t n, cap, prefix_index;
    wm_tok_buf prefix, tmp;
} wm_tok_stream;

void wm_tok_stream_init(wm_tok_stream *s, const wm_tokenizer *t, int skip_special);
/* Sets *emitted to 1 when text was appended to chunk. */
wm_status wm_tok_stream_step(wm_tok_stream *s, int32_t id, wm_tok_buf *chunk, int *emitted, wm_error *err);
void wm_tok_stream_free(wm_tok_stream *s);

/* ---------------------------------------------------------------- lookup */

/* Id of a token (added tokens first, then the model), or -1. */
int32_t wm_tokenizer_token_to_id(const wm_tokenizer *t, const char *tok, size_t len);
/* Token of an id (added tokens first), or NULL; *len receives its length. */
const char *wm_tokenizer_id_to_token(const wm_tokenizer *t, int32_t id, size_t *len);
/* Number of ids (model vocabulary plus added tokens). */
size_t wm_tokenizer_vocab_size(const wm_tokenizer *t);
/* 1 when id is a special added token. */
int wm_tokenizer_is_special(const wm_tokenizer *t, int32_t id);

typedef enum { WM_TOK_BOS, WM_TOK_EOS, WM_TOK_PAD, WM_TOK_UNK, WM_TOK_CLS, WM_TOK_SEP, WM_TOK_MASK } wm_tok_role;
/* The id of a role's token (from tokenizer_config.json, the model, the post-processor), or -1. */
int32_t wm_tokenizer_special_id(const wm_tokenizer *t, wm_tok_role role);

/* Short description of the pipeline ("BPE; normalizer NFC; pre-tokenizer Sequence[Split, ByteLevel] ..."). */
const char *wm_tokenizer_describe(const wm_tokenizer *t);

#endif
