/*
 * gguf_tok.c - tokenizer.json + tokenizer_config.json from a GGUF's
 * tokenizer metadata, encoding as transformers' GGUF tokenizer does.
 *
 * The facts of the format (llama.cpp's keys), as transformers reads them:
 *  - tokenizer.ggml.model "gpt2": byte-level BPE. Tokens are spelled in the
 *    GPT-2 byte alphabet (a token with a character outside it is
 *    re-spelled byte by byte); merges "a b" from tokenizer.ggml.merges; the
 *    pre-tokenizer is ByteLevel with GPT-2's split, or the split regex that
 *    tokenizer.ggml.pre names (one table below) before a ByteLevel without
 *    its own split.
 *  - "llama": SentencePiece-style BPE with byte fallback (<0xNN> tokens),
 *    Metaspace ("▁", prepended to the first word). Merges come from the file
 *    or are rebuilt from the vocabulary: every split of a token into two
 *    tokens, best first by (score, left length, right length), file order
 *    breaking ties. Gemma files spell runs of spaces with real spaces (those
 *    tokens become runs of "▁"), rank merges by file position instead of
 *    score, and replace spaces in the normalizer; Phi-3 prepends "▁" in the
 *    normalizer and has no pre-tokenizer.
 *  - Tokens of type 3 (control) become special added tokens (in a
 *    byte-level vocabulary only those spelled in the byte alphabet), type 4
 *    (user-defined) plain added tokens when the vocabulary has them; the
 *    bos / eos / unk / pad tokens (and Gemma's <mask>) are special too.
 *  - add_bos_token (default true for "llama", false for "gpt2") and
 *    add_eos_token make the post-processor's template.
 * Every token must be valid UTF-8 without NUL bytes; duplicate tokens keep
 * their last id as a Python dict would.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/json.h"
#include "gguf/gguf_hf.h"
#include "hf/tok_json.h"

/* ------------------------------------------------------------------ tables */

enum { FL_BYTE, FL_SPM, FL_GEMMA, FL_PHI3 };

typedef struct flavour {
    const char *model, *arch; /* tokenizer.ggml.model, general.architecture (NULL: any) */
    int kind;
    const char *cls;          /* transformers' class, for tokenizer_config.json */
} flavour;

static const flavour flavours[] = {
    {"gpt2", NULL, FL_BYTE, "GPT2Tokenizer"},     {"llama", "gemma", FL_GEMMA, "GemmaTokenizer"},
    {"llama", "gemma2", FL_GEMMA, "GemmaTokenizer"}, {"llama", "gemma3", FL_GEMMA, "GemmaTokenizer"},
    {"llama", "phi3", FL_PHI3, "LlamaTokenizer"}, {"llama", NULL, FL_SPM, "LlamaTokenizer"},
};

#define RE_LLAMA3                                                                                  \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" \
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                                 \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" \
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN35                                                                                            \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*" \
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_UPPER "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
#define RE_LOWER "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
#define RE_TEKKEN                                                                                            \
    "[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER "*" RE_LOWER "+|[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER "+" RE_LOWER "*|\\p{N}" \
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_CONTR "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
#define RE_GPT4O                                                                                                  \
    "[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER "*" RE_LOWER "+" RE_CONTR "|[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER "+" RE_LOWER "*" \
    RE_CONTR "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* tokenizer.ggml.pre -> the split its merges were learned with (llama.cpp's pre-tokenizers, as transformers
   rebuilds them); a name not listed keeps the tokenizer's own pre-tokenizer */
static const struct {
    const char *pre, *re;
} presplits[] = {
    {"llama3", RE_LLAMA3},     {"llama-v3", RE_LLAMA3},   {"llama-bpe", RE_LLAMA3}, {"falcon3", RE_LLAMA3},
    {"falcon-h1", RE_LLAMA3},  {"pixtral", RE_LLAMA3},    {"midm-2.0", RE_LLAMA3},  {"lfm2", RE_LLAMA3},
    {"jina-v5-nano", RE_LLAMA3}, {"dbrx", RE_LLAMA3},     {"smaug-bpe", RE_LLAMA3}, {"tekken", RE_TEKKEN},
    {"qwen2", RE_QWEN2},       {"deepseek-r1-qwen", RE_QWEN2}, {"kormo", RE_QWEN2}, {"f2llmv2", RE_QWEN2},
    {"megrez", RE_QWEN2},      {"qwen35", RE_QWEN35},     {"gpt-4o", RE_GPT4O},     {"llama4", RE_GPT4O},
    {"kanana2", RE_GPT4O},     {"talkie", RE_GPT4O},      {"minimax-m2", RE_GPT4O},
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* token types of llama.cpp */
enum { TT_CONTROL = 3, TT_USER = 4 };

/* ------------------------------------------------------------------ the vocabulary */

static const uint64_t M61 = (1ull << 61) - 1, BASE = 1000003;

static uint64_t mulmod(uint64_t a, uint64_t b) {
    __extension__ unsigned __int128 p = (unsigned __int128)a * b;
    uint64_t r = ((uint64_t)p & M61) + (uint64_t)(p >> 61);
    return r >= M61 ? r - M61 : r;
}

static uint64_t push_byte(uint64_t h, uint8_t b) {
    h = mulmod(h, BASE) + b + 1u;
    return h >= M61 ? h - M61 : h;
}

typedef struct vocab {
    size_t n;
    char **s;          /* token i as the BPE model spells it (NUL-terminated, inside buf) */
    uint32_t *len;
    wm_gguf_str *orig; /* as the file spells it */
    int32_t *type;     /* NULL when the file has no token types */
    double *score;     /* NULL when the file has no scores */
    uint64_t *h;       /* hash of s[i] */
    uint32_t *first, *last; /* first / last index holding the same string */
    uint32_t *slot;    /* hash table: index + 1, 0 empty */
    size_t cap;
    char *buf;
    uint64_t budget;   /* bytes compared while rebuilding merges */
} vocab;

static void vocab_free(vocab *v) {
    free(v->s);
    free(v->len);
    free(v->orig);
    free(v->type);
    free(v->score);
    free(v->h);
    free(v->first);
    free(v->last);
    free(v->slot);
    free(v->buf);
    memset(v, 0, sizeof *v);
}

static size_t slot_of(const vocab *v, uint64_t h, uint32_t len) {
    uint64_t x = (h ^ ((uint64_t)len << 40)) * 0x9e3779b97f4a7c15ull;
    return (size_t)(x >> 20) & (v->cap - 1);
}

/* First index of the string p (len bytes, hash h); -1 when absent (or the compare budget is spent: *over set). */
static int64_t lookup(vocab *v, const char *p, uint32_t len, uint64_t h, int *over) {
    for (size_t k = slot_of(v, h, len);; k = (k + 1) & (v->cap - 1)) {
        uint32_t e = v->slot[k];
        if (!e) return -1;
        uint32_t i = e - 1;
        if (v->h[i] != h || v->len[i] != len) continue;
        if (v->budget < len) {
            *over = 1;
            return -1;
        }
        v->budget -= len;
        if (!memcmp(v->s[i], p, len)) return i;
    }
}

static uint64_t hash_str(const char *p, size_t n) {
    uint64_t h = 0;
    for (size_t i = 0; i < n; i++) h = push_byte(h, (uint8_t)p[i]);
    return h;
}

/* Id a string has: the last index of the token with that spelling; -1 when none. */
static int64_t id_of(vocab *v, const char *p, size_t n) {
    int over = 0;
    int64_t i = n > UINT32_MAX ? -1 : lookup(v, p, (uint32_t)n, hash_str(p, n), &over);
    return i < 0 ? -1 : (int64_t)v->last[i];
}

/* The GPT-2 byte alphabet: byte b is written as code point byte_cp[b]. */
static void byte_alphabet(uint32_t cp[256]) {
    uint32_t extra = 256;
    for (int b = 0; b < 256; b++)
        cp[b] = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255) ? (uint32_t)b : extra++;
}

static size_t put_cp(char *o, uint32_t c) {
    if (c < 0x80) return o[0] = (char)c, 1;
    if (c < 0x800) return o[0] = (char)(0xc0 | c >> 6), o[1] = (char)(0x80 | (c & 0x3f)), 2;
    if (c < 0x10000)
        return o[0] = (char)(0xe0 | c >> 12), o[1] = (char)(0x80 | ((c >> 6) & 0x3f)), o[2] = (char)(0x80 | (c & 0x3f)), 3;
    o[0] = (char)(0xf0 | c >> 18), o[1] = (char)(0x80 | ((c >> 12) & 0x3f)), o[2] = (char)(0x80 | ((c >> 6) & 0x3f));
    o[3] = (char)(0x80 | (c & 0x3f));
    return 4;
}

/* Next code point of valid UTF-8 at p (advances *i). */
static uint32_t next_cp(const char *p, size_t *i) {
    const uint8_t *s = (const uint8_t *)p + *i;
    if (s[0] < 0x80) return (*i)++, s[0];
    int k = s[0] >= 0xf0 ? 3 : s[0] >= 0xe0 ? 2 : 1;
    uint32_t c = s[0] & (0x3f >> k);
    for (int j = 1; j <= k; j++) c = c << 6 | (s[j] & 0x3f);
    *i += (size_t)k + 1;
    return c;
}

/* Python's str.isspace(). */
static int py_space(uint32_t c) {
    return (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

static int in_alphabet(uint32_t c) { return (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 323); }

/* Token s in the byte alphabet already (every code point in it). */
static int spelled(const char *p, size_t n) {
    for (size_t i = 0; i < n;)
        if (!in_alphabet(next_cp(p, &i))) return 0;
    return 1;
}

/* Writes token (n bytes of valid UTF-8) as the model spells it into o; returns the bytes written. */
static size_t respell(int kind, const uint32_t *alpha, const char *p, size_t n, char *o) {
    if (kind == FL_BYTE && !spelled(p, n)) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) k += put_cp(o + k, alpha[(uint8_t)p[i]]);
        return k;
    }
    if (kind == FL_GEMMA) { /* a run of whitespace holding a space: one "▁" per character */
        int space = 0, all = n > 0;
        size_t cps = 0;
        for (size_t i = 0; i < n && all; cps++) {
            uint32_t c = next_cp(p, &i);
            space |= c == ' ';
            all = py_space(c);
        }
        if (space && all) {
            for (size_t i = 0; i < cps; i++) memcpy(o + 3 * i, "\xe2\x96\x81", 3);
            return 3 * cps;
        }
    }
    memcpy(o, p, n);
    return n;
}

static wm_status load_vocab(const wm_gguf_file *f, int kind, vocab *v, wm_error *err) {
    const char *path = wm_gguf_path(f);
    const wm_gguf_kv *tk = wm_gguf_find(f, "tokenizer.ggml.tokens");
    if (!tk) return wm_err(err, WM_ERR_INPUT, "%s: key 'tokenizer.ggml.tokens': missing", path);
    wm_status s = wm_gguf_check_array(f, tk, 1, err);
    if (s) return s;
    if (!tk->n || tk->n > INT32_MAX - 4096)
        return wm_err(err, WM_ERR_INPUT, "%s: key 'tokenizer.ggml.tokens': %llu tokens (1 to 2^31 - 4096)", path,
                      (unsigned long long)tk->n);
    size_t n = v->n = (size_t)tk->n;
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        wm_gguf_str t = wm_gguf_arr_str(tk, i);
        if (!t.n || t.n > UINT32_MAX / 4 || !wm_gguf_utf8_ok(t.p, t.n))
            return wm_err(err, WM_ERR_INPUT, "%s: key 'tokenizer.ggml.tokens': token %zu is %s", path, i,
                          t.n ? "not valid UTF-8 (or holds a NUL)" : "empty");
        bytes += t.n; /* bounded by the file's size */
    }
    static const char *const opt[] = {"tokenizer.ggml.token_type", "tokenizer.ggml.scores"};
    const wm_gguf_kv *kv[2];
    for (int k = 0; k < 2; k++) {
        kv[k] = wm_gguf_find(f, opt[k]);
        if (!kv[k]) continue;
        if ((s = wm_gguf_check_array(f, kv[k], 0, err))) return s;
        if (kv[k]->n != tk->n)
            return wm_err(err, WM_ERR_INPUT, "%s: key '%s': %llu entries for %zu tokens", path, opt[k],
                          (unsigned long long)kv[k]->n, n);
    }
    v->budget = UINT64_MAX; /* limited while rebuilding merges only */
    v->cap = 1;
    while (v->cap < 2 * n) v->cap <<= 1;
    v->s = malloc(n * sizeof *v->s);
    v->len = malloc(n * sizeof *v->len);
    v->orig = malloc(n * sizeof *v->orig);
    v->h = malloc(n * sizeof *v->h);
    v->first = malloc(n * sizeof *v->first);
    v->last = malloc(n * sizeof *v->last);
    v->slot = calloc(v->cap, sizeof *v->slot);
    v->buf = malloc(3 * bytes + n);
    if (kv[0]) v->type = malloc(n * sizeof *v->type);
    if (kv[1]) v->score = malloc(n * sizeof *v->score);
    if (!v->s || !v->len || !v->orig || !v->h || !v->first || !v->last || !v->slot || !v->buf ||
        (kv[0] && !v->type) || (kv[1] && !v->score))
        return wm_err(err, WM_ERR_NOMEM, "out of memory for a vocabulary of %zu tokens", n);
    uint32_t alpha[256];
    byte_alphabet(alpha);
    char *o = v->buf;
    for (size_t i = 0; i < n; i++) {
        wm_gguf_str t = wm_gguf_arr_str(tk, i);
        v->orig[i] = t;
        v->s[i] = o;
        size_t k = respell(kind, alpha, t.p, (size_t)t.n, o);
        o[k] = 0;
        v->len[i] = (uint32_t)k;
        o += k + 1;
        v->h[i] = hash_str(v->s[i], k);
        if (v->type) v->type[i] = (int32_t)wm_gguf_arr_int(kv[0], i);
        if (v->score) {
            v->score[i] = wm_gguf_arr_num(kv[1], i);
            if (!isfinite(v->score[i]))
                return wm_err(err, WM_ERR_INPUT, "%s: key 'tokenizer.ggml.scores': score %zu is not finite", path, i);
        }
        /* insert, or find the earlier token of the same spelling */
        size_t sl = slot_of(v, v->h[i], v->len[i]);
        for (;; sl = (sl + 1) & (v->cap - 1)) {
            uint32_t e = v->slot[sl];
            if (!e) {
                v->slot[sl] = (uint32_t)i + 1;
                v->first[i] = v->last[i] = (uint32_t)i;
                break;
            }
            uint32_t j = e - 1;
            if (v->h[j] == v->h[i] && v->len[j] == v->len[i] && !memcmp(v->s[j], v->s[i], v->len[i])) {
                v->first[i] = j;
                v->last[j] = (uint32_t)i;
                break;
            }
        }
    }
    return WM_OK;
}

/* ------------------------------------------------------------------ merges */

typedef struct cand {
    uint32_t l, r, lcp, rcp, seq;
    double score;
} cand;

static int cmp_cand(const void *x, const void *y) {
    const cand *a = x, *b = y;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    if (a->lcp != b->lcp) return a->lcp > b->lcp ? -1 : 1;
    if (a->rcp != b->rcp) return a->rcp > b->rcp ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/*
 * Merges implied by the vocabulary: for each distinct token (first occurrence order) every split at a character
 * boundary into two tokens, ranked by the token's score (scores, or -index with by_position) and the lengths.
 */
static wm_status derive_merges(vocab *v, int by_position, const char *path, cand **out, size_t *n_out,
                               wm_error *err) {
    size_t cap = 1024, n = 0;
    cand *c = malloc(cap * sizeof *c);
    uint64_t *pre = NULL, *pw = NULL;
    uint32_t maxlen = 0;
    for (size_t i = 0; i < v->n; i++) maxlen = v->len[i] > maxlen ? v->len[i] : maxlen;
    pre = malloc(((size_t)maxlen + 1) * sizeof *pre);
    pw = malloc(((size_t)maxlen + 1) * sizeof *pw);
    if (!c || !pre || !pw) {
        free(c), free(pre), free(pw);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    pw[0] = 1;
    for (uint32_t k = 1; k <= maxlen; k++) pw[k] = mulmod(pw[k - 1], BASE);
    v->budget = 1ull << 31;
    size_t max_merges = 32 * v->n + (1u << 20);
    wm_status s = WM_OK;
    for (size_t i = 0; i < v->n && !s; i++) {
        if (v->first[i] != i) continue;
        const char *t = v->s[i];
        uint32_t L = v->len[i];
        pre[0] = 0;
        for (uint32_t k = 0; k < L; k++) pre[k + 1] = push_byte(pre[k], (uint8_t)t[k]);
        double score = by_position ? -(double)v->last[i] : v->score[v->last[i]];
        size_t at = 0;
        uint32_t cps = 0, total = 0;
        for (size_t q = 0; q < L;) next_cp(t, &q), total++;
        next_cp(t, &at), cps = 1;
        for (; at < L; next_cp(t, &at), cps++) {
            int over = 0;
            uint64_t hr = (pre[L] + M61 - mulmod(pre[at], pw[L - at])) % M61;
            int64_t li = lookup(v, t, (uint32_t)at, pre[at], &over), ri = -1;
            if (li >= 0) ri = lookup(v, t + at, L - (uint32_t)at, hr, &over);
            if (over) {
                s = wm_err(err, WM_ERR_INPUT, "%s: rebuilding BPE merges from tokenizer.ggml.tokens takes too long (a "
                           "hostile vocabulary?)", path);
                break;
            }
            if (li < 0 || ri < 0) continue;
            if (n >= max_merges) { /* real vocabularies imply about 2 per token */
                s = wm_err(err, WM_ERR_INPUT, "%s: tokenizer.ggml.tokens implies more than %zu BPE merges (%zu tokens; a "
                           "hostile vocabulary?)", path, max_merges, v->n);
                break;
            }
            if (n == cap) {
                cand *nc = realloc(c, 2 * cap * sizeof *c);
                if (!nc) {
                    s = wm_err(err, WM_ERR_NOMEM, "out of memory");
                    break;
                }
                c = nc, cap *= 2;
            }
            c[n++] = (cand){(uint32_t)li, (uint32_t)ri, cps, total - cps, (uint32_t)i, score};
        }
    }
    v->budget = UINT64_MAX;
    free(pre);
    free(pw);
    if (s) {
        free(c);
        return s;
    }
    qsort(c, n, sizeof *c, cmp_cand);
    *out = c;
    *n_out = n;
    return WM_OK;
}

/* ------------------------------------------------------------------ added tokens */

typedef struct added {
    int64_t id;
    const char *content; /* NUL-terminated (valid UTF-8, no NUL) */
    size_t len;
    int special;
} added;

typedef struct adds {
    added *a;
    size_t n, cap;
    uint32_t *slot; /* hash set over the contents: index + 1, 0 empty */
    size_t slots;   /* a power of two above twice the most tokens that can be added */
    int64_t next_id; /* for a token the vocabulary lacks */
} adds;

static int64_t adds_find(const adds *x, const char *p, size_t n) {
    for (size_t k = (size_t)(hash_str(p, n) * 0x9e3779b97f4a7c15ull >> 20) & (x->slots - 1);; k = (k + 1) & (x->slots - 1)) {
        uint32_t e = x->slot[k];
        if (!e) return -1;
        if (x->a[e - 1].len == n && !memcmp(x->a[e - 1].content, p, n)) return (int64_t)e - 1;
    }
}

/* tokenizers' add_tokens: a content already added is skipped; its id is the vocabulary's, else a new one. */
static wm_status adds_put(adds *x, vocab *v, const char *p, size_t n, int special, wm_error *err) {
    if (adds_find(x, p, n) >= 0) return WM_OK;
    if (x->n == x->cap) {
        size_t cap = x->cap ? 2 * x->cap : 64;
        added *na = realloc(x->a, cap * sizeof *na);
        if (!na) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        x->a = na, x->cap = cap;
    }
    int64_t id = id_of(v, p, n);
    x->a[x->n++] = (added){id >= 0 ? id : x->next_id++, p, n, special};
    size_t k = (size_t)(hash_str(p, n) * 0x9e3779b97f4a7c15ull >> 20) & (x->slots - 1);
    while (x->slot[k]) k = (k + 1) & (x->slots - 1);
    x->slot[k] = (uint32_t)x->n;
    return WM_OK;
}

static int cmp_added(const void *x, const void *y) {
    const added *a = x, *b = y;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Id of content: an added token's, else the vocabulary's; -1 when neither has it. */
static int64_t token_id(const adds *x, vocab *v, const char *p, size_t n) {
    int64_t k = adds_find(x, p, n);
    return k >= 0 ? x->a[k].id : id_of(v, p, n);
}

/* ------------------------------------------------------------------ the JSON */

static void j_type(wm_json *j, const char *key, const char *type) {
    wm_json_obj(j, key);
    wm_json_str(j, "type", type);
}

static void j_bytelevel(wm_json *j, const char *key, int prefix, int regex) {
    j_type(j, key, "ByteLevel");
    wm_json_bool(j, "add_prefix_space", prefix);
    wm_json_bool(j, "trim_offsets", 1);
    wm_json_bool(j, "use_regex", regex);
    wm_json_obj_end(j);
}

/* The special tokens a template names: bos / eos when added. */
typedef struct tmpl {
    const char *bos, *eos; /* NULL: not added */
    int64_t bos_id, eos_id;
} tmpl;

static void j_pipeline(wm_json *j, int kind, const char *split_re) {
    if (kind == FL_BYTE) {
        wm_json_null(j, "normalizer");
        if (split_re) {
            j_type(j, "pre_tokenizer", "Sequence");
            wm_json_arr(j, "pretokenizers");
            j_type(j, NULL, "Split");
            wm_json_obj(j, "pattern");
            wm_json_str(j, "Regex", split_re);
            wm_json_obj_end(j);
            wm_json_str(j, "behavior", "Isolated");
            wm_json_bool(j, "invert", 0);
            wm_json_obj_end(j);
            j_bytelevel(j, NULL, 0, 0);
            wm_json_arr_end(j);
            wm_json_obj_end(j);
        } else j_bytelevel(j, "pre_tokenizer", 0, 1);
        return;
    }
    if (kind == FL_GEMMA) {
        wm_json_obj(j, "normalizer");
        wm_json_str(j, "type", "Replace");
        wm_json_obj(j, "pattern");
        wm_json_str(j, "String", " ");
        wm_json_obj_end(j);
        wm_json_str(j, "content", "\xe2\x96\x81");
        wm_json_obj_end(j);
        j_type(j, "pre_tokenizer", "Split");
        wm_json_obj(j, "pattern");
        wm_json_str(j, "String", " ");
        wm_json_obj_end(j);
        wm_json_str(j, "behavior", "MergedWithPrevious");
        wm_json_bool(j, "invert", 0);
        wm_json_obj_end(j);
        return;
    }
    if (kind == FL_PHI3) {
        j_type(j, "normalizer", "Sequence");
        wm_json_arr(j, "normalizers");
        j_type(j, NULL, "Prepend");
        wm_json_str(j, "prepend", "\xe2\x96\x81");
        wm_json_obj_end(j);
        wm_tokjson_replace(j, "String", " ", "\xe2\x96\x81");
        wm_json_arr_end(j);
        wm_json_obj_end(j);
        wm_json_null(j, "pre_tokenizer");
        return;
    }
    wm_json_null(j, "normalizer");
    j_type(j, "pre_tokenizer", "Metaspace");
    wm_json_str(j, "replacement", "\xe2\x96\x81");
    wm_json_str(j, "prepend_scheme", "first");
    wm_json_bool(j, "split", 0);
    wm_json_obj_end(j);
}

static void j_decoder(wm_json *j, int kind) {
    if (kind == FL_BYTE) {
        j_bytelevel(j, "decoder", 1, 1);
        return;
    }
    j_type(j, "decoder", "Sequence");
    wm_json_arr(j, "decoders");
    wm_tokjson_replace(j, "String", "\xe2\x96\x81", " ");
    j_type(j, NULL, "ByteFallback");
    wm_json_obj_end(j);
    j_type(j, NULL, "Fuse");
    wm_json_obj_end(j);
    if (kind != FL_GEMMA) { /* add_prefix_space: the first space is the prepended one */
        j_type(j, NULL, "Strip");
        wm_json_str(j, "content", " ");
        wm_json_int(j, "start", 1);
        wm_json_int(j, "stop", 0);
        wm_json_obj_end(j);
    }
    wm_json_arr_end(j);
    wm_json_obj_end(j);
}

/* ------------------------------------------------------------------ the files */

/* A NUL-terminated copy of a string value that must be valid UTF-8 (malloc'ed into *out; NULL when absent). */
static wm_status get_text(const wm_gguf_file *f, const char *key, char **out, wm_error *err) {
    *out = NULL;
    wm_gguf_str s;
    int there;
    wm_status st = wm_gguf_get_str(f, key, &s, &there, err);
    if (st || !there) return st;
    if (!wm_gguf_utf8_ok(s.p, s.n))
        return wm_err(err, WM_ERR_INPUT, "%s: key '%s': not valid UTF-8 (or holds a NUL)", wm_gguf_path(f), key);
    if (!(*out = strndup(s.p, (size_t)s.n))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    return WM_OK;
}

static char *take(wm_json *j, size_t *len) {
    if (j->oom) return NULL;
    char *t = j->buf;
    *len = j->n;
    j->buf = NULL;
    wm_json_free(j);
    return t;
}

wm_status wm_gguf_tokenizer_files(const wm_gguf_file *f, int64_t context, char **tok, size_t *tok_len, char **cfg,
                                  size_t *cfg_len, wm_error *err) {
    *tok = *cfg = NULL;
    *tok_len = *cfg_len = 0;
    const char *path = wm_gguf_path(f);
    char *model = NULL, *arch = NULL, *pre = NULL, *chat = NULL;
    vocab v;
    memset(&v, 0, sizeof v);
    adds ad = {0};
    cand *merges = NULL;
    size_t n_merges = 0;
    wm_json j, c;
    wm_json_init(&j);
    wm_json_init(&c);
    wm_status s = get_text(f, "tokenizer.ggml.model", &model, err);
    if (s || !model) goto done;
    if ((s = get_text(f, "general.architecture", &arch, err)) || (s = get_text(f, "tokenizer.ggml.pre", &pre, err)) ||
        (s = get_text(f, "tokenizer.chat_template", &chat, err)))
        goto done;
    const flavour *fl = NULL;
    for (size_t i = 0; i < N(flavours) && !fl; i++)
        if (!strcmp(flavours[i].model, model) && (!flavours[i].arch || (arch && !strcmp(flavours[i].arch, arch))))
            fl = &flavours[i];
    if (!fl) {
        s = wm_err(err, WM_ERR_UNSUPPORTED, "%s: key 'tokenizer.ggml.model': tokenizer '%.40s' is not supported (gpt2, "
                   "llama)", path, model);
        goto done;
    }
    int kind = fl->kind;
    if ((s = load_vocab(f, kind, &v, err))) goto done;
    /* special ids */
    static const char *const idk[] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                      "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id"};
    static const char *const names[] = {"bos_token", "eos_token", "unk_token", "pad_token"};
    const char *sp[5] = {NULL};
    int64_t ids[4] = {-1, -1, -1, -1};
    for (int i = 0; i < 4; i++) {
        int there;
        if ((s = wm_gguf_get_int(f, idk[i], 0, (int64_t)v.n - 1, &ids[i], &there, err))) goto done;
        if (there) sp[i] = v.orig[ids[i]].p; /* printed through orig lengths below */
    }
    int add_bos = kind != FL_BYTE, add_eos = 0, there;
    if ((s = wm_gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &add_bos, &there, err)) ||
        (s = wm_gguf_get_bool(f, "tokenizer.ggml.add_eos_token", &add_eos, &there, err)))
        goto done;
    /* merges: the file's, else rebuilt from the vocabulary */
    const wm_gguf_kv *mk = wm_gguf_find(f, "tokenizer.ggml.merges");
    if (mk && (s = wm_gguf_check_array(f, mk, 1, err))) goto done;
    if (!mk && kind == FL_BYTE) {
        s = wm_err(err, WM_ERR_INPUT, "%s: key 'tokenizer.ggml.merges': missing (a gpt2 tokenizer needs its merges)", path);
        goto done;
    }
    if (!mk && kind != FL_GEMMA && !v.score) {
        s = wm_err(err, WM_ERR_INPUT, "%s: key 'tokenizer.ggml.scores': missing (needed to rebuild the merges of a "
                   "vocabulary without tokenizer.ggml.merges)", path);
        goto done;
    }
    if (!mk && (s = derive_merges(&v, kind == FL_GEMMA, path, &merges, &n_merges, err))) goto done;
    /* added tokens: control, then user-defined the vocabulary has, then the named special tokens */
    ad.next_id = (int64_t)v.n;
    for (ad.slots = 1; ad.slots < 2 * (v.n + 8);) ad.slots <<= 1;
    if (!(ad.slot = calloc(ad.slots, sizeof *ad.slot))) {
        s = wm_err(err, WM_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < v.n && v.type && !s; i++)
        if (v.type[i] == TT_CONTROL && (kind != FL_BYTE || spelled(v.orig[i].p, (size_t)v.orig[i].n)))
            s = adds_put(&ad, &v, v.orig[i].p, (size_t)v.orig[i].n, 1, err);
    for (size_t i = 0; i < v.n && v.type && !s; i++)
        if (v.type[i] == TT_USER && token_id(&ad, &v, v.orig[i].p, (size_t)v.orig[i].n) >= 0)
            s = adds_put(&ad, &v, v.orig[i].p, (size_t)v.orig[i].n, 0, err);
    size_t sp_len[5] = {0};
    for (int i = 0; i < 4; i++)
        if (sp[i]) sp_len[i] = (size_t)v.orig[ids[i]].n;
    if (kind == FL_GEMMA) sp[4] = "<mask>", sp_len[4] = 6; /* GemmaTokenizer's default mask token */
    for (int i = 0; i < 5 && !s; i++)
        if (sp[i]) s = adds_put(&ad, &v, sp[i], sp_len[i], 1, err);
    if (s) goto done;
    /* NUL-terminated names of the specials (file strings are not) */
    char *spn[5] = {NULL};
    for (int i = 0; i < 5; i++)
        if (sp[i] && !(spn[i] = strndup(sp[i], sp_len[i]))) s = wm_err(err, WM_ERR_NOMEM, "out of memory");
    tmpl t = {add_bos ? spn[0] : NULL, add_eos ? spn[1] : NULL, -1, -1};
    if (t.bos) t.bos_id = token_id(&ad, &v, t.bos, strlen(t.bos));
    if (t.eos) t.eos_id = token_id(&ad, &v, t.eos, strlen(t.eos));
    const char *split_re = NULL;
    for (size_t i = 0; pre && kind == FL_BYTE && i < N(presplits) && !split_re; i++)
        if (!strcmp(presplits[i].pre, pre)) split_re = presplits[i].re;
    /* added token contents as C strings (the added list points into the mapping) */
    char **acont = s ? NULL : calloc(ad.n ? ad.n : 1, sizeof *acont);
    if (!s && !acont) s = wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !s && i < ad.n; i++) {
        if (!(acont[i] = strndup(ad.a[i].content, ad.a[i].len))) s = wm_err(err, WM_ERR_NOMEM, "out of memory");
        else ad.a[i].content = acont[i];
    }
    if (!s) {
        if (ad.n) qsort(ad.a, ad.n, sizeof *ad.a, cmp_added);
        wm_json_obj(&j, NULL);
        wm_json_str(&j, "version", "1.0");
        wm_json_null(&j, "truncation");
        wm_json_null(&j, "padding");
        wm_json_arr(&j, "added_tokens");
        for (size_t i = 0; i < ad.n; i++) {
            wm_json_obj(&j, NULL);
            wm_json_int(&j, "id", ad.a[i].id);
            wm_json_str(&j, "content", ad.a[i].content);
            wm_json_bool(&j, "single_word", 0);
            wm_json_bool(&j, "lstrip", 0);
            wm_json_bool(&j, "rstrip", 0);
            wm_json_bool(&j, "normalized", 0);
            wm_json_bool(&j, "special", ad.a[i].special);
            wm_json_obj_end(&j);
        }
        wm_json_arr_end(&j);
        j_pipeline(&j, kind, split_re);
        wm_tokjson_post(&j, t.bos, t.bos_id, t.eos, t.eos_id, 1);
        j_decoder(&j, kind);
        j_type(&j, "model", "BPE");
        wm_json_null(&j, "dropout");
        if (kind == FL_GEMMA && spn[2]) wm_json_str(&j, "unk_token", spn[2]);
        else wm_json_null(&j, "unk_token");
        if (kind == FL_BYTE) {
            wm_json_str(&j, "continuing_subword_prefix", "");
            wm_json_str(&j, "end_of_word_suffix", "");
        } else {
            wm_json_null(&j, "continuing_subword_prefix");
            wm_json_null(&j, "end_of_word_suffix");
        }
        wm_json_bool(&j, "fuse_unk", kind != FL_BYTE);
        wm_json_bool(&j, "byte_fallback", kind != FL_BYTE);
        wm_json_bool(&j, "ignore_merges", 0);
        wm_json_obj(&j, "vocab");
        for (size_t i = 0; i < v.n; i++)
            if (v.first[i] == i) wm_json_int(&j, v.s[i], v.last[i]);
        wm_json_obj_end(&j);
        wm_json_arr(&j, "merges");
        if (mk) {
            for (uint64_t i = 0; i < mk->n && !s; i++) {
                wm_gguf_str m = wm_gguf_arr_str(mk, i);
                const char *sp1 = m.n ? memchr(m.p, ' ', (size_t)m.n) : NULL;
                if (!sp1 || !wm_gguf_utf8_ok(m.p, m.n) || memchr(sp1 + 1, ' ', (size_t)(m.p + m.n - sp1 - 1))) {
                    s = wm_err(err, WM_ERR_INPUT, "%s: key 'tokenizer.ggml.merges': merge %llu is not \"a b\" (two "
                               "tokens of valid UTF-8 and one space)", path, (unsigned long long)i);
                    break;
                }
                wm_json_arr(&j, NULL);
                wm_json_strn(&j, NULL, m.p, (size_t)(sp1 - m.p));
                wm_json_strn(&j, NULL, sp1 + 1, (size_t)(m.p + m.n - sp1 - 1));
                wm_json_arr_end(&j);
            }
        } else {
            for (size_t i = 0; i < n_merges; i++) {
                wm_json_arr(&j, NULL);
                wm_json_str(&j, NULL, v.s[merges[i].l]);
                wm_json_str(&j, NULL, v.s[merges[i].r]);
                wm_json_arr_end(&j);
            }
        }
        wm_json_arr_end(&j);
        wm_json_obj_end(&j);
        wm_json_obj_end(&j);
    }
    if (!s) {
        wm_json_obj(&c, NULL);
        wm_json_bool(&c, "add_bos_token", t.bos != NULL);
        wm_json_bool(&c, "add_eos_token", t.eos != NULL);
        for (int i = 0; i < 4; i++) wm_json_str(&c, names[i], spn[i]);
        if (spn[4]) wm_json_str(&c, "mask_token", spn[4]);
        if (chat) wm_json_str(&c, "chat_template", chat);
        wm_json_bool(&c, "clean_up_tokenization_spaces", 0);
        if (context > 0) wm_json_int(&c, "model_max_length", context);
        wm_json_str(&c, "tokenizer_class", fl->cls);
        wm_json_obj_end(&c);
    }
    for (int i = 0; i < 5; i++) free(spn[i]);
    for (size_t i = 0; acont && i < ad.n; i++) free(acont[i]);
    free(acont);
    if (!s && (j.oom || c.oom)) s = wm_err(err, WM_ERR_NOMEM, "out of memory");
    if (!s) {
        *tok = take(&j, tok_len);
        *cfg = take(&c, cfg_len);
    }
done:
    wm_json_free(&j);
    wm_json_free(&c);
    free(model);
    free(arch);
    free(pre);
    free(chat);
    free(merges);
    free(ad.a);
    free(ad.slot);
    vocab_free(&v);
    return s;
}
