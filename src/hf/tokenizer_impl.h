/*
 * tokenizer_impl.h - internals shared by the tokenizer_*.c files.
 *
 * Semantics follow the Rust `tokenizers` crate (v0.23): a "piece" is a
 * NormalizedString: normalized bytes plus, for every normalized byte, the
 * byte range in the original text it came from (absolute offsets into the
 * encoded text). Pieces are views into one append-only work buffer per
 * encode (text + alignments), so splitting is free and transforms append.
 */
#ifndef WM_HF_TOKENIZER_IMPL_H
#define WM_HF_TOKENIZER_IMPL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdint.h>
#include <string.h>

#include "core/arena.h"
#include "core/error.h"
#include "hf/tokenizer.h"
#include "hf/tokenizer_unicode.h"

/* ------------------------------------------------------------ containers */

/* Grows *p (elem bytes each, capacity *cap) to hold at least need; 0 on OOM. */
int wm_tgrow(void *p, size_t *cap, size_t need, size_t elem);

/* Hash of bytes (FNV-1a, 32-bit); incremental with wm_thash_step. */
#define WM_THASH_INIT 2166136261u
static inline uint32_t wm_thash_step(uint32_t h, uint8_t b) { return (h ^ b) * 16777619u; }
static inline uint32_t wm_thash(const void *s, size_t n) {
    uint32_t h = WM_THASH_INIT;
    for (size_t i = 0; i < n; i++) h = wm_thash_step(h, ((const uint8_t *)s)[i]);
    return h;
}

/* String -> int32 map; keys are copied into a pool owned by the map. */
typedef struct wm_tmap_ent {
    uint32_t off, len, hash;
    int32_t val;
} wm_tmap_ent;
typedef struct wm_tmap {
    uint32_t *slot; /* 0 = empty, else entry index + 1 */
    uint32_t mask;
    wm_tmap_ent *ent;
    size_t n, cap;
    char *pool;
    size_t pool_n, pool_cap;
} wm_tmap;

void wm_tmap_free(wm_tmap *m);
/* Inserts or overwrites (last wins); returns the entry index or -1 on OOM. */
long wm_tmap_put(wm_tmap *m, const char *s, size_t n, int32_t val);
/* Looks up with a precomputed hash; -1 when absent. */
long wm_tmap_find_h(const wm_tmap *m, const char *s, size_t n, uint32_t h);
static inline long wm_tmap_find(const wm_tmap *m, const char *s, size_t n) {
    return wm_tmap_find_h(m, s, n, wm_thash(s, n));
}
static inline int32_t wm_tmap_get(const wm_tmap *m, const char *s, size_t n) {
    long i = wm_tmap_find(m, s, n);
    return i < 0 ? -1 : m->ent[i].val;
}
static inline const char *wm_tmap_key(const wm_tmap *m, size_t i) { return m->pool + m->ent[i].off; }

/* uint64 -> uint64 map (keys != UINT64_MAX); key and value side by side (one cache line per probe). */
typedef struct wm_u64ent {
    uint64_t k, v;
} wm_u64ent;
typedef struct wm_u64map {
    wm_u64ent *e;
    size_t mask, n;
} wm_u64map;
void wm_u64map_free(wm_u64map *m);
int wm_u64map_put(wm_u64map *m, uint64_t k, uint64_t v); /* 0 on OOM */
int wm_u64map_get(const wm_u64map *m, uint64_t k, uint64_t *v);

/* ------------------------------------------------------------- vocabulary */

/*
 * Token <-> id. map: token -> id (last duplicate wins, like a HashMap).
 * Reverse: id -> token, dense when ids are compact, else sorted pairs.
 */
typedef struct wm_tstr {
    uint32_t off, len; /* len UINT32_MAX: none */
} wm_tstr;
typedef struct wm_tvocab {
    wm_tmap map;
    int32_t max_id;
    wm_tstr *r;    /* dense reverse over [0, max_id] */
    int32_t *s_id;           /* sparse reverse: sorted ids, with s_off/s_len */
    uint32_t *s_off, *s_len;
    size_t s_n;
    const char *rpool; /* pool the reverse offsets point into (map.pool or a model pool) */
} wm_tvocab;

void wm_tvocab_free(wm_tvocab *v);
/* Builds the reverse index from the map entries (token of each surviving id). */
wm_status wm_tvocab_build_reverse(wm_tvocab *v, const char *name, wm_error *err);
const char *wm_tvocab_token(const wm_tvocab *v, int32_t id, size_t *len);

/*
 * A byte trie: edges in a hash map (node << 8 | byte) -> child, a value per
 * node (-1 for inner nodes). Used for added tokens (leftmost-longest) and
 * for the Unigram / WordPiece prefix searches.
 */
typedef struct wm_ttrie {
    wm_u64map edges;
    int32_t *val;
    size_t n_nodes, cap;
    uint8_t first[256]; /* bytes that start a key */
    int empty;          /* the empty key was inserted */
} wm_ttrie;
/* Inserts s -> val (overwrites); 0 on OOM. */
int wm_ttrie_insert(wm_ttrie *tr, const char *s, size_t n, int32_t val);
void wm_ttrie_free(wm_ttrie *tr);
/* The child of node by byte b, or -1. */
static inline int64_t wm_ttrie_next(const wm_ttrie *tr, uint64_t node, uint8_t b) {
    uint64_t c;
    return wm_u64map_get(&tr->edges, (node << 8) | b, &c) ? (int64_t)c : -1;
}

/* ------------------------------------------------------------------ regex */

/* A compiled Split/Replace pattern (Oniguruma syntax translated to PCRE2). */
typedef struct wm_tregex {
    pcre2_code *code;
    int jit;
} wm_tregex;

/*
 * Compiles an Oniguruma-syntax pattern (literal = 1: a plain string) into a
 * PCRE2 regex with UTF + UCP + JIT; onig's \s \S \w \W \d \D \h \H \uHHHH are
 * translated to their Unicode meanings in Oniguruma.
 */
wm_status wm_tregex_compile(wm_tregex *re, const char *pat, size_t len, int literal, const char *what, wm_error *err);
void wm_tregex_free(wm_tregex *re);
/*
 * Bounds on regex work (hostile patterns, long texts): one match may backtrack WM_TREGEX_MATCH_LIMIT steps;
 * each match attempt starts with a window of WM_TREGEX_WINDOW0 bytes and a backtracking limit of
 * WM_TREGEX_LIMIT0 and grows them only when the match needs more; the windows and limits tried over one piece
 * of text are charged to budgets of WM_TREGEX_BUDGET_PER_BYTE per byte of it (plus a base), so the total work
 * is linear in the text: a pattern that rescans the rest of the text at every position (a*b|a) or backtracks
 * heavily at every match ends with an error instead of running for hours. Ordinary tokenizer patterns charge
 * about 16 per byte.
 */
#define WM_TREGEX_MATCH_LIMIT 20000000u
#define WM_TREGEX_WINDOW0 16u
#define WM_TREGEX_LIMIT0 64u
#define WM_TREGEX_BUDGET_PER_BYTE 64u
#define WM_TREGEX_BUDGET_BASE (1u << 20)
#define WM_TREGEX_OVER_BUDGET (-1000000) /* match_bounded's result when a budget is spent */
/* Trie steps of the added-token matcher over one piece: a budget linear in the text (ordinary files take
 * about one per byte, a few more where an added token's first byte appears) */
#define WM_TADDED_BUDGET_PER_BYTE 64u
#define WM_TADDED_BUDGET_BASE (1u << 20)
/* The same for the Unigram and WordPiece prefix searches over one word */
#define WM_TMODEL_BUDGET_PER_BYTE 64u
#define WM_TMODEL_BUDGET_BASE (1u << 20)

/* ------------------------------------------------------------ components */

typedef enum {
    WM_SPLIT_REMOVED,
    WM_SPLIT_ISOLATED,
    WM_SPLIT_MERGED_PREV,
    WM_SPLIT_MERGED_NEXT,
    WM_SPLIT_CONTIGUOUS
} wm_split_behavior;

typedef enum {
    WM_TN_SEQUENCE,
    WM_TN_NFC,
    WM_TN_NFD,
    WM_TN_NFKC,
    WM_TN_NFKD,
    WM_TN_LOWERCASE,
    WM_TN_STRIP_ACCENTS,
    WM_TN_STRIP,
    WM_TN_BERT,
    WM_TN_PREPEND,
    WM_TN_REPLACE,
    WM_TN_NMT,
    WM_TN_BYTELEVEL,
    WM_TN_PRECOMPILED
} wm_tnorm_kind;

typedef struct wm_tnorm {
    wm_tnorm_kind kind;
    int clean_text, handle_chinese, strip_accents, lowercase; /* Bert */
    int left, right;                                          /* Strip */
    const char *str;                                          /* Prepend text / Replace content */
    size_t str_len;
    wm_tregex re; /* Replace pattern */
    const uint32_t *trie; /* Precompiled: SentencePiece double-array trie */
    size_t trie_n;
    const char *norm_blob; /* Precompiled: NUL-separated replacement strings */
    size_t norm_len;
    int spm_longest; /* Precompiled as SentencePiece applies it (the longest match, no graphemes; spm_tok.c) */
    struct wm_tnorm **kids;
    size_t n_kids;
} wm_tnorm;

typedef enum {
    WM_TP_SEQUENCE,
    WM_TP_BYTELEVEL,
    WM_TP_SPLIT,
    WM_TP_METASPACE,
    WM_TP_WHITESPACE,
    WM_TP_WHITESPACE_SPLIT,
    WM_TP_BERT,
    WM_TP_DIGITS,
    WM_TP_PUNCTUATION,
    WM_TP_DELIMITER,
    WM_TP_FIXED_LENGTH
} wm_tpre_kind;

enum { WM_PREPEND_ALWAYS, WM_PREPEND_FIRST, WM_PREPEND_NEVER };

typedef struct wm_tpre {
    wm_tpre_kind kind;
    int add_prefix_space, use_regex, trim_offsets; /* ByteLevel */
    wm_tregex re;                                  /* Split; ByteLevel's built-in regex */
    wm_split_behavior behavior;                    /* Split, Punctuation */
    int invert;                                    /* Split */
    uint32_t cp;                                   /* Metaspace replacement, Delimiter */
    char rep[8];                                   /* Metaspace replacement as UTF-8 */
    size_t rep_len;
    int prepend_scheme, split; /* Metaspace */
    int individual;            /* Digits */
    size_t length;             /* FixedLength */
    struct wm_tpre **kids;
    size_t n_kids;
} wm_tpre;

typedef enum { WM_TPP_BERT, WM_TPP_ROBERTA, WM_TPP_BYTELEVEL, WM_TPP_TEMPLATE, WM_TPP_SEQUENCE } wm_tpost_kind;

/* Special tokens a TemplateProcessing may add to one encoding (single or pair, all pieces together),
 * and ids one special token may hold: a bound on hostile files (real templates add a few). */
#define WM_TOK_MAX_TEMPLATE_TOKENS (1u << 20)

typedef struct wm_ttpl_special { /* a TemplateProcessing special token */
    const char *name;
    int32_t *ids;
    const char **toks;
    size_t *tok_lens;
    size_t n;
} wm_ttpl_special;

typedef struct wm_ttpl_piece {
    int seq;        /* 0 = $A, 1 = $B, -1 = special token */
    int special;    /* index into specials when seq < 0 */
    int32_t type_id;
} wm_ttpl_piece;

typedef struct wm_tpost {
    wm_tpost_kind kind;
    wm_ttpl_special cls, sep; /* Bert / Roberta: one token each */
    int trim_offsets, add_prefix_space;
    wm_ttpl_piece *single, *pair;
    size_t n_single, n_pair;
    wm_ttpl_special *specials;
    size_t n_specials;
    struct wm_tpost **kids;
    size_t n_kids;
} wm_tpost;

typedef enum {
    WM_TD_SEQUENCE,
    WM_TD_BYTELEVEL,
    WM_TD_METASPACE,
    WM_TD_WORDPIECE,
    WM_TD_BPE,
    WM_TD_BYTEFALLBACK,
    WM_TD_FUSE,
    WM_TD_STRIP,
    WM_TD_REPLACE,
    WM_TD_CTC
} wm_tdec_kind;

typedef struct wm_tdec {
    wm_tdec_kind kind;
    uint32_t cp; /* Metaspace replacement, Strip content */
    int prepend_scheme;
    const char *s1, *s2; /* WordPiece prefix, BPE suffix, Replace content, CTC pad/delimiter */
    size_t s1_len, s2_len;
    int cleanup;
    int spm_bytes;      /* ByteFallback as SentencePiece decodes: whole characters of an invalid run kept (spm_tok.c) */
    size_t start, stop; /* Strip */
    wm_tregex re;       /* Replace */
    struct wm_tdec **kids;
    size_t n_kids;
} wm_tdec;

/* ----------------------------------------------------------------- model */

typedef enum { WM_TM_BPE, WM_TM_UNIGRAM, WM_TM_WORDPIECE, WM_TM_WORDLEVEL } wm_tmodel_kind;

typedef struct wm_tmodel {
    wm_tmodel_kind kind;
    wm_tvocab v;
    size_t vocab_size;  /* get_vocab_size(): distinct tokens (Unigram: entries) */
    const char *unk;    /* unk_token (BPE, WordPiece, WordLevel) or NULL */
    size_t unk_len;
    int32_t unk_id;     /* id of unk (Unigram unk_id; else lookup of unk), -1 */
    int byte_fallback, fuse_unk, ignore_merges;
    int32_t byte_ids[256]; /* id of "<0xAB>", -1 */
    /* BPE */
    const char *prefix, *suffix; /* continuing_subword_prefix, end_of_word_suffix (NULL = none) */
    size_t prefix_len, suffix_len;
    wm_u64map merges; /* (a << 32 | b) -> (rank << 32 | new id) */
    int32_t ascii_ids[128]; /* id of each 1-byte char token, -1 */
    int32_t *small_ids;     /* id of each one-character token below U+0800, -1 (0x800 entries) */
    /* Unigram */
    int seg_ids;     /* the trie and scores index another model's entries than the vocabulary's ids (Marian:
                        source.spm segments, vocab.json numbers): pieces become ids by their string */
    int32_t seg_unk; /* with seg_ids: the unknown piece's entry in that model */
    int f32_lattice; /* path scores summed in float as SentencePiece does (else double, as tokenizers) */
    double *scores; /* per entry index == id */
    size_t n_entries;
    double min_score;
    char *upool; /* Unigram token strings (entries may repeat) */
    /* Unigram / WordPiece */
    wm_ttrie trie;
    size_t max_tok_len;
    size_t max_chars; /* WordPiece max_input_chars_per_word */
} wm_tmodel;

/* ---------------------------------------------------------- added tokens */

typedef struct wm_tadded {
    const char *content;
    size_t len;
    const char *norm; /* normalized content when it differs (normalized tokens), else NULL */
    size_t norm_len;
    int32_t id;
    uint8_t single_word, lstrip, rstrip, normalized, special;
} wm_tadded;


/* --------------------------------------------------------------- tokenizer */

struct wm_tokenizer {
    wm_arena arena;
    char name[512];
    wm_tmodel model;
    wm_tnorm *norm;
    wm_tpre *pre;
    const wm_tpre **pre_steps; /* pre flattened (wm_tpre_flatten) */
    size_t n_pre_steps;
    wm_tpost *post;
    wm_tdec *dec;
    wm_tadded *added; /* by insertion; the last definition of an id wins */
    size_t n_added, added_cap;
    wm_tmap added_map;    /* content -> id */
    wm_u64map added_by_id;  /* id -> index into added */
    wm_tmap special_set;  /* contents of special tokens */
    wm_ttrie trie_raw, trie_norm;
    wm_tok_truncation trunc;
    wm_tok_padding pad;
    int32_t roles[7];
    int dec_py_strip; /* decoding strips whitespace off both ends of the text (MarianTokenizer's str.strip()) */
    char desc[384];
    const char *src; /* while loading: the JSON text (numbers are re-read from it) and its tree */
    size_t src_len;
    const struct cJSON *src_root;
};

/* --------------------------------------------------------- encode scratch */

typedef struct wm_tspan {
    uint32_t s, e; /* original byte range (absolute) */
} wm_tspan;

typedef struct wm_piece {
    uint32_t off, len;   /* normalized bytes in the work buffer */
    uint32_t shift, olen; /* original_shift and length of the original */
    int32_t added;       /* added token index, or -1 */
} wm_piece;

typedef struct wm_tseq { /* tokens of one sequence (before post-processing) */
    size_t n, cap;         /* ids, words, offs hold cap */
    int32_t *ids, *words;
    wm_tok_offset *offs;
    int32_t type;          /* the sequence's type id (0, or 1 for the pair) */
    wm_tok_own *own;       /* tokens whose string is not the vocabulary's, by index, strings in str */
    size_t n_own, own_cap;
    char *str;
    size_t str_n, str_cap;
} wm_tseq;

typedef struct wm_tmatch {
    uint32_t s, e;
    int m;
} wm_tmatch;

typedef struct wm_tseg { /* one encoding in the post-processor's list */
    int seq;                     /* 0 / 1: a sequence; -1: special tokens sp */
    const wm_ttpl_special *sp;
    int32_t type;                /* type id for every token, -1: keep the sequence's */
} wm_tseg;

typedef struct wm_bpe_cache_ent {
    uint32_t key_off, key_len, hash, tok_off, n_tok;
} wm_bpe_cache_ent;

struct wm_tok_scratch {
    char *txt;
    wm_tspan *al; /* alignments of txt[base_n, tn): al[i - base_n] (wm_ts_al) */
    size_t tn, tcap, acap;
    size_t base_n; /* txt[0, base_n) is the text being encoded, valid UTF-8: its alignments are derived */
    uint32_t *ops_cp;
    int32_t *ops_ch;
    size_t on, ocap, ocap2;
    wm_tmatch *mt;
    size_t mn, mcap;
    struct wm_tlevel *lv; /* the streamed pre-tokenizer's state, one per step */
    size_t nlv;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jstack;
    wm_tseq seq[2];
    const char *text[2]; /* the texts being encoded (offsets index them) */
    size_t text_len[2];
    void *nf1, *nf2; /* normalization work areas */
    size_t nf1_cap, nf2_cap;
    /* model work areas */
    struct wm_bpe_sym *sym;
    size_t sym_cap;
    int32_t *tids;   /* model output: ids, byte ranges in the word, */
    uint32_t *ts, *te;
    uint8_t *tsrc;   /* string source: 0 vocabulary token of the id, 1 the word's bytes */
    size_t t_cap;
    double *ubest;
    int32_t *uid, *ufrom;
    size_t u_cap;
    char *kbuf;
    size_t k_cap;
    /* BPE word cache: piece text -> ids + byte lengths */
    uint32_t *cslot;
    size_t cmask;
    wm_bpe_cache_ent *cent;
    size_t cn, ccap;
    char *ckeys;
    size_t ckn, ckcap;
    int32_t *cids;
    uint32_t *clens;
    size_t ctn, ctcap;
    wm_tseg *segs; /* post-processing: two lists of segcap/2 each */
    size_t segcap;
};

/* ----------------------------------------------------- cross-file hooks */

/* Scratch lifecycle (tokenizer_encode.c; the pre-tokenizer's steps: tokenizer_pretok.c). */
wm_tok_scratch *wm_tscratch_new(void);
void wm_tscratch_free(wm_tok_scratch *sc);
void wm_tscratch_free_levels(wm_tok_scratch *sc);
/* Resets the work buffer and makes the whole text one piece (alignments per character). utf8: the caller
 * knows the text is valid UTF-8 (else it is checked). */
wm_status wm_ts_begin(wm_tok_scratch *sc, const char *text, size_t len, int utf8, wm_piece *p, wm_error *err);

/* Work buffer: reserves n more bytes (text + alignments); 0 on OOM. */
int wm_ts_reserve(wm_tok_scratch *sc, size_t n);
/* The alignment of work-buffer byte i: stored past base_n; in the text itself the original span of the
 * character holding it (what copying the text with its alignments would have stored: 8 bytes a byte). */
static inline wm_tspan wm_ts_al(const wm_tok_scratch *sc, size_t i) {
    if (i >= sc->base_n) return sc->al[i - sc->base_n];
    size_t s = i;
    while (s > 0 && ((uint8_t)sc->txt[s] & 0xC0) == 0x80) s--;
    return (wm_tspan){(uint32_t)s, (uint32_t)(s + wm_u8_len((uint8_t)sc->txt[s]))};
}
/* The stored alignment of byte i >= base_n, for writing. */
#define WM_TS_ALW(sc, i) ((sc)->al[(i) - (sc)->base_n])

/*
 * Transform (NormalizedString::transform): replaces the piece's text with
 * the ops (codepoint, change) in sc->ops_*, skipping initial_offset chars.
 * The new text is appended to the work buffer and *p updated.
 */
wm_status wm_ts_transform(wm_tok_scratch *sc, wm_piece *p, size_t initial_offset, wm_error *err);
/*
 * The same transform made a segment at a time, for character-local normalizers: the piece is cut into
 * segments of about WM_TSEG_BYTES that end before a character for which cut says a segment may start there
 * (nothing before it changes how it or what follows is normalized); fn fills sc->ops for the characters of
 * piece bytes [a, b) (*same = 1 when it knows they do not change, *init the characters its ops skip at the
 * start, as initial_offset: the first segment only). Segments that do not change are copied, and when none
 * changes the piece is left as it is: the memory is a segment's ops, not the whole piece's.
 */
typedef int (*wm_tcut)(void *ctx, uint32_t cp);
typedef wm_status (*wm_tseg_ops)(void *ctx, wm_tok_scratch *sc, const wm_piece *p, size_t a, size_t b, int *same,
                                 size_t *init, wm_error *err);
wm_status wm_ts_transform_seg(wm_tok_scratch *sc, wm_piece *p, wm_tcut cut, wm_tseg_ops fn, void *ctx, wm_error *err);
#define WM_TSEG_BYTES 4096
/* The ByteLevel byte -> printable character transform. */
wm_status wm_ts_bytelevel(wm_tok_scratch *sc, wm_piece *p, wm_error *err);
/* NormalizedString::prepend. */
wm_status wm_ts_prepend(wm_tok_scratch *sc, wm_piece *p, const char *s, size_t n, wm_error *err);
/* NormalizedString::replace with the matches in sc->mt (is_match entries replaced by content). */
wm_status wm_ts_replace(wm_tok_scratch *sc, wm_piece *p, const char *content, size_t n, wm_error *err);
/* Matches of a regex over the whole piece into sc->mt ((s, e, is_match), covering the piece). */
wm_status wm_ts_find_regex(wm_tok_scratch *sc, const wm_piece *p, const wm_tregex *re, wm_error *err);
/* NormalizedString::replace of every character cp by content (Metaspace): no match list. */
wm_status wm_ts_replace_char(wm_tok_scratch *sc, wm_piece *p, uint32_t cp, const char *content, size_t n,
                             wm_error *err);

/*
 * Entries of a split, made a batch at a time (the streamed pre-tokenizer): a generator walks one piece and
 * appends (s, e, is_match) entries that cover it in order; wm_tents_cut says how many of the front entries
 * no later entry can merge with (the split behaviour's rule), so they can be split while the rest waits.
 */
typedef struct wm_tents {
    wm_tmatch *m;
    size_t n, cap;
} wm_tents;
/* Appends an entry; 0 on OOM. */
static inline int wm_tents_push(wm_tents *E, uint32_t s, uint32_t e, int m) {
    if (E->n >= E->cap && !wm_tgrow(&E->m, &E->cap, E->n + 1, sizeof *E->m)) return 0;
    E->m[E->n++] = (wm_tmatch){s, e, m};
    return 1;
}
size_t wm_tents_cut(const wm_tents *E, wm_split_behavior b);

typedef int (*wm_tcharpred)(uint32_t cp, const void *ctx);
typedef enum { WM_TGEN_REGEX, WM_TGEN_CHARS, WM_TGEN_WORDS, WM_TGEN_FIXED } wm_tgen_kind;
typedef struct wm_tgen {
    wm_tgen_kind kind;
    const wm_tregex *re;  /* REGEX: matches (invert: flags flipped) */
    wm_tcharpred pred;    /* CHARS: each character with pred(cp, pctx) */
    const void *pctx;
    size_t length;        /* FIXED: characters a chunk */
    int invert;
    /* progress (wm_tgen_start) */
    size_t pos, prev;
    long last_match_end;
    uint64_t wbudget, lbudget; /* REGEX: work budgets (WM_TREGEX_BUDGET_PER_BYTE) */
    int run, done;
} wm_tgen;
void wm_tgen_start(wm_tgen *g, const wm_piece *p);
/* Appends entries of p to E until E->n >= want or the piece is done (g->done). */
wm_status wm_tgen_fill(wm_tok_scratch *sc, const wm_piece *p, wm_tgen *g, wm_tents *E, size_t want, wm_error *err);

/* A list of pieces. */
typedef struct wm_tpieces {
    wm_piece *p;
    size_t n, cap;
} wm_tpieces;
static inline int wm_tpieces_push(wm_tpieces *L, wm_piece p) { /* 0 on OOM */
    if (L->n >= L->cap && !wm_tgrow(&L->p, &L->cap, L->n + 1, sizeof *L->p)) return 0;
    L->p[L->n++] = p;
    return 1;
}
/* Splits p by entries m[0, n) (rewritten in place) with behavior, appending the non-empty parts to dst. */
wm_status wm_ts_split_ents(wm_tok_scratch *sc, const wm_piece *p, wm_tmatch *m, size_t n, wm_split_behavior b,
                           wm_tpieces *dst, wm_error *err);
/* A sub-range [s, e) of a piece (NormalizedString::slice). */
static inline wm_piece wm_ts_slice(const wm_tok_scratch *sc, const wm_piece *p, uint32_t s, uint32_t e) {
    wm_piece q = {p->off + s, e - s, p->shift, 0, -1};
    if (e > s && (size_t)p->off + e <= sc->base_n) { /* characters of the text itself: their own bytes */
        q.shift = p->off + s;
        q.olen = e - s;
    } else if (e > s) {
        uint32_t a = wm_ts_al(sc, p->off + s).s, b = wm_ts_al(sc, p->off + e - 1).e;
        q.shift = a;
        q.olen = b > a ? b - a : 0;
    }
    return q;
}
/* Pushes an op. 0 on OOM. */
int wm_ts_op(wm_tok_scratch *sc, uint32_t cp, int32_t change);

/* Normalizer / pre-tokenizer application (tokenizer_normalize.c, tokenizer_pretok.c). */
wm_status wm_tnorm_apply(const wm_tnorm *n, wm_tok_scratch *sc, wm_piece *p, wm_error *err);

/* What is done with each final piece (the model, or a tool printing the pieces). */
typedef wm_status (*wm_tsink)(void *ctx, wm_tok_scratch *sc, const wm_piece *p, wm_error *err);
/*
 * Pre-tokenizes p and hands every final piece to sink, in order (a piece that is an added token goes to it
 * as it is). Streamed: each step of the pre-tokenizer splits a batch of WM_TPRE_BATCH entries at a time and
 * passes each part down before the next batch; the text a step makes (ByteLevel, Metaspace) is dropped from
 * the work buffer once its parts are done, so the memory is a few batches per step, not the whole text.
 */
wm_status wm_tpre_stream(const wm_tokenizer *t, wm_tok_scratch *sc, const wm_piece *p, wm_tsink sink, void *ctx,
                         wm_error *err);
/* The pre-tokenizer as a list of steps (Sequence flattened, Bert as its two steps); at load. */
wm_status wm_tpre_flatten(wm_tokenizer *t, wm_error *err);
#define WM_TPRE_BATCH 256
#define WM_TPRE_MAX_STEPS 256 /* pre-tokenizer steps (Sequence kids, all levels) a tokenizer may have */

/* Model (tokenizer_bpe.c etc.): tokenizes one piece, appending to seq. */
wm_status wm_tmodel_tokenize(const wm_tokenizer *t, wm_tok_scratch *sc, const wm_piece *p, int32_t word,
                             wm_tseq *seq, wm_error *err);
wm_status wm_tbpe_tokenize(const wm_tmodel *m, wm_tok_scratch *sc, const char *s, size_t n, size_t *ntok,
                           wm_error *err);
wm_status wm_tunigram_tokenize(const wm_tmodel *m, wm_tok_scratch *sc, const char *s, size_t n, size_t *ntok,
                               wm_error *err);
wm_status wm_twordlevel_tokenize(const wm_tmodel *m, wm_tok_scratch *sc, const char *s, size_t n, size_t *ntok,
                                 wm_error *err);
int wm_ttok_reserve(wm_tok_scratch *sc, size_t need);
wm_status wm_twordpiece_tokenize(const wm_tmodel *m, wm_tok_scratch *sc, const char *s, size_t n, size_t *ntok,
                                 wm_error *err);
void wm_tmodel_free(wm_tmodel *m);
void wm_tscratch_free_model(wm_tok_scratch *sc);

/* Sequence building (tokenizer_post.c). */
/* Appends a token; vocab: its string is the model's vocabulary string of id, else s[0, n) is copied. */
int wm_tseq_push(wm_tseq *q, int32_t id, const char *s, size_t n, int vocab, wm_tok_offset off, int32_t word);
/* A string stored as [uint32 length][bytes] at ref in pool. */
static inline const char *wm_tstr_at(const char *pool, uint32_t ref, size_t *len) {
    uint32_t n;
    memcpy(&n, pool + ref, sizeof n);
    *len = n;
    return pool + ref + sizeof n;
}
void wm_tseq_reset(wm_tseq *q);
void wm_tseq_free(wm_tseq *q);
/* Truncation, post-processing and padding of seq[0] (+ seq[1]) into out. */
wm_status wm_tpost_finish(const wm_tokenizer *t, wm_tok_scratch *sc, int has_pair, const wm_encode_opts *o,
                          wm_encoding *out, wm_error *err);
wm_status wm_tpost_pad(wm_encoding *e, const wm_tok_padding *pad, size_t len, wm_error *err);
size_t wm_tpost_added_count(const wm_tpost *pp, int is_pair);

/* Added vocabulary (tokenizer_added.c). */
/* AddedVocabulary::add_tokens over n tokens (ids: the model's when the content is in it, else the next free). */
wm_status wm_tadded_add_batch(wm_tokenizer *t, const wm_tadded *toks, size_t n, wm_error *err);
/* Builds tries and normalized forms once every added token is known. */
wm_status wm_tadded_finish(wm_tokenizer *t, wm_error *err);
/* Splits piece p by the raw or normalized trie and hands each non-empty part to fn in order (added set on the
 * parts that are added tokens). fn may append to the work buffer. */
wm_status wm_tadded_split(const wm_tokenizer *t, wm_tok_scratch *sc, const wm_piece *p, int normalized, wm_tsink fn,
                          void *ctx, wm_error *err);

/* Component loaders (tokenizer_json.c, tokenizer_components.c); node is a cJSON*. */
struct cJSON;
wm_status wm_tjson_normalizer(wm_tokenizer *t, const struct cJSON *j, const char *path, wm_tnorm **out, int depth,
                              wm_error *err);
wm_status wm_tjson_pretok(wm_tokenizer *t, const struct cJSON *j, const char *path, wm_tpre **out, int depth,
                          wm_error *err);
wm_status wm_tjson_post(wm_tokenizer *t, const struct cJSON *j, const char *path, wm_tpost **out, int depth,
                        wm_error *err);
wm_status wm_tjson_decoder(wm_tokenizer *t, const struct cJSON *j, const char *path, wm_tdec **out, int depth,
                           wm_error *err);
wm_status wm_tjson_model(wm_tokenizer *t, const struct cJSON *j, wm_error *err);
/* Helpers over cJSON with typed errors (tokenizer_json.c). */
wm_status wm_tjson_str(wm_tokenizer *t, const struct cJSON *o, const char *key, const char *path, int required,
                       const char **out, size_t *len, wm_error *err);
wm_status wm_tjson_bool(wm_tokenizer *t, const struct cJSON *o, const char *key, const char *path, int def,
                        int *out, wm_error *err);
wm_status wm_tjson_int(wm_tokenizer *t, const struct cJSON *o, const char *key, const char *path, int64_t def,
                       int64_t lo, int64_t hi, int64_t *out, wm_error *err);
wm_status wm_tjson_id(const wm_tokenizer *t, const struct cJSON *v, const char *what, int32_t *out, wm_error *err);
const char *wm_tjson_type(const struct cJSON *o);
/*
 * Scores as the tokenizers crate reads them: serde_json without
 * float_roundtrip takes the significand as a u64 and does one multiplication
 * or division by a power of ten, which can differ from the correctly rounded
 * value (cJSON's) in the last bit. wm_tjson_serde_scores re-reads the n
 * numbers that follow number node first (pre-order) from t->src into out;
 * returns 0 (out untouched) when the text is not available.
 */
int wm_tjson_serde_scores(const wm_tokenizer *t, const struct cJSON *first, size_t n, double *out);
wm_status wm_tjson_tokenizer(wm_tokenizer *t, const struct cJSON *root, wm_error *err);

/* Models built from plain files (tokenizer_files.c) use these builders. */
wm_status wm_tbpe_finish(wm_tokenizer *t, const char *const *ma, const size_t *mal, const char *const *mb,
                         const size_t *mbl, size_t n_merges, wm_error *err);
wm_status wm_tmodel_finish_common(wm_tokenizer *t, wm_error *err);

/* Decoding of a token list (tokenizer_decode.c). */
void wm_tdec_free(wm_tdec *d);

/* Free helpers for components (tokenizer_json.c). */
void wm_tnorm_free(wm_tnorm *n);
void wm_tpre_free(wm_tpre *p);
void wm_tpost_free(wm_tpost *p);

/* A new, empty tokenizer named name (for messages). */
wm_tokenizer *wm_tokenizer_new(const char *name);
#define WM_TOK_CONFIG_MAX (64u << 20) /* bytes of a JSON file of the tokenizer's folder (a config, vocab.json) */
/* Parses a JSON file of the tokenizer's folder with the checkpoint's JSON parser (wm_hf_json_load_value: depth
 * capped, nothing after the value); NULL when absent, unreadable or not JSON. Free with cJSON_Delete. */
struct cJSON *wm_tok_read_json(const char *path);
/*
 * tokenizer_config.json and special_tokens_map.json of dir, each optional: one that is there must be a JSON object
 * (wm_hf_json_load), else WM_ERR_INPUT naming it and what is wrong. The readers below take an unreadable file as
 * absent, so every loader of a folder checks them first (a malformed config silently read as absent changed the
 * special tokens and do_lower_case).
 */
wm_status wm_tok_check_configs(const char *dir, wm_error *err);
/* Sets the roles found in tokenizer_config.json / special_tokens_map.json in dir. */
void wm_tokenizer_read_config(wm_tokenizer *t, const char *dir);
/* Fills roles not set from the model and the post-processor; builds desc. */
void wm_tokenizer_finish_roles(wm_tokenizer *t);

#endif
