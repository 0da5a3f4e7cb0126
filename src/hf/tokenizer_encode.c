/*
 * tokenizer_encode.c - the encode pipeline (Tokenizer::encode): added
 * tokens out of the raw text, normalization and normalized added tokens per
 * piece, pre-tokenization, the model per piece, offsets back to the
 * original text; then truncation, post-processing and padding.
 */
#include <stdlib.h>
#include <string.h>

#include "hf/tokenizer_impl.h"

#define OOM(err) wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory (encode)")
#define WM_TOK_MAX_TEXT (256u << 20)

wm_tok_scratch *wm_tscratch_new(void) {
    wm_tok_scratch *sc = calloc(1, sizeof *sc);
    if (!sc) return NULL;
    sc->md = pcre2_match_data_create(1, NULL);
    sc->mctx = pcre2_match_context_create(NULL);
    sc->jstack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
    if (!sc->md || !sc->mctx || !sc->jstack) {
        wm_tscratch_free(sc);
        return NULL;
    }
    pcre2_set_match_limit(sc->mctx, WM_TREGEX_MATCH_LIMIT);
    pcre2_jit_stack_assign(sc->mctx, NULL, sc->jstack);
    return sc;
}

void wm_tscratch_free(wm_tok_scratch *sc) {
    if (!sc) return;
    free(sc->txt);
    free(sc->al);
    free(sc->ops_cp);
    free(sc->ops_ch);
    free(sc->mt);
    wm_tscratch_free_levels(sc);
    if (sc->md) pcre2_match_data_free(sc->md);
    if (sc->mctx) pcre2_match_context_free(sc->mctx);
    if (sc->jstack) pcre2_jit_stack_free(sc->jstack);
    wm_tseq_free(&sc->seq[0]);
    wm_tseq_free(&sc->seq[1]);
    free(sc->nf1);
    free(sc->nf2);
    free(sc->sym);
    free(sc->tids);
    free(sc->ts);
    free(sc->te);
    free(sc->tsrc);
    free(sc->ubest);
    free(sc->uid);
    free(sc->ufrom);
    free(sc->kbuf);
    free(sc->cslot);
    free(sc->cent);
    free(sc->ckeys);
    free(sc->cids);
    free(sc->clens);
    free(sc->segs);
    free(sc);
}

wm_status wm_ts_begin(wm_tok_scratch *sc, const char *text, size_t len, int utf8, wm_piece *p, wm_error *err) {
    sc->tn = 0;
    sc->on = 0;
    /* valid UTF-8 (what encode is given): the text's alignments are derived from it (wm_ts_al) */
    int valid = utf8 || wm_u8_valid(text, len);
    sc->base_n = valid ? len : 0;
    if (!wm_ts_reserve(sc, len)) return OOM(err);
    if (len) memcpy(sc->txt, text, len);
    if (!valid)
        for (size_t i = 0; i < len;) {
            size_t n = wm_u8_len((uint8_t)text[i]);
            for (size_t k = 0; k < n && i + k < len; k++) sc->al[i + k] = (wm_tspan){(uint32_t)i, (uint32_t)(i + n)};
            i += n;
        }
    sc->tn = len;
    *p = (wm_piece){0, (uint32_t)len, 0, (uint32_t)len, -1};
    return WM_OK;
}

/* Offsets of a token spanning normalized bytes [s, e) of piece p (convert_offsets + shift). */
static wm_tok_offset conv(const wm_tok_scratch *sc, const wm_piece *p, uint32_t s, uint32_t e) {
    if (s == e) return (wm_tok_offset){p->shift + s, p->shift + e};
    if (e > p->len || s > e) return (wm_tok_offset){s, e};
    return (wm_tok_offset){wm_ts_al(sc, p->off + s).s, wm_ts_al(sc, p->off + e - 1).e};
}


static wm_status tokenize_piece(const wm_tokenizer *t, wm_tok_scratch *sc, const wm_piece *p, int32_t word,
                                wm_tseq *q, wm_error *err) {
    const char *w = sc->txt + p->off;
    if (p->added >= 0) {
        const wm_tadded *a = &t->added[p->added];
        return wm_tseq_push(q, a->id, w, p->len, 0, conv(sc, p, 0, p->len), word) ? WM_OK : OOM(err);
    }
    size_t n = 0;
    wm_status st;
    switch (t->model.kind) {
    case WM_TM_BPE: st = wm_tbpe_tokenize(&t->model, sc, w, p->len, &n, err); break;
    case WM_TM_UNIGRAM: st = wm_tunigram_tokenize(&t->model, sc, w, p->len, &n, err); break;
    case WM_TM_WORDPIECE: st = wm_twordpiece_tokenize(&t->model, sc, w, p->len, &n, err); break;
    default: st = wm_twordlevel_tokenize(&t->model, sc, w, p->len, &n, err); break;
    }
    if (st) return st;
    for (size_t i = 0; i < n; i++) { /* the string is the vocabulary's unless the model took the word's bytes */
        int vocab = !sc->tsrc[i];
        if (!wm_tseq_push(q, sc->tids[i], vocab ? NULL : sc->txt + p->off + sc->ts[i], vocab ? 0 : sc->te[i] - sc->ts[i],
                          vocab, conv(sc, p, sc->ts[i], sc->te[i]), word))
            return OOM(err);
    }
    return WM_OK;
}

/* One sequence being encoded: the final pieces go to the model in order (their index is the word id). */
typedef struct seq_ctx {
    const wm_tokenizer *t;
    wm_tseq *q;
    int32_t type, word;
} seq_ctx;

static wm_status to_model(void *ctx, wm_tok_scratch *sc, const wm_piece *p, wm_error *err) {
    seq_ctx *x = ctx;
    return tokenize_piece(x->t, sc, p, x->word++, x->q, err);
}

/* A piece after the normalized added-token split: an added token, or text to pre-tokenize. */
static wm_status normalized_piece(void *ctx, wm_tok_scratch *sc, const wm_piece *p, wm_error *err) {
    seq_ctx *x = ctx;
    if (p->added >= 0 || !x->t->n_pre_steps) return to_model(ctx, sc, p, err);
    return wm_tpre_stream(x->t, sc, p, to_model, ctx, err);
}

/* A piece of the raw text after the raw added-token split: normalized, split again, pre-tokenized; what it
 * appended to the work buffer is dropped once its tokens are made. */
static wm_status raw_piece(void *ctx, wm_tok_scratch *sc, const wm_piece *p, wm_error *err) {
    seq_ctx *x = ctx;
    if (p->added >= 0) return to_model(ctx, sc, p, err);
    size_t mark = sc->tn;
    wm_piece q = *p;
    wm_status st = x->t->norm ? wm_tnorm_apply(x->t->norm, sc, &q, err) : WM_OK;
    if (!st) st = wm_tadded_split(x->t, sc, &q, 1, normalized_piece, ctx, err);
    sc->tn = mark;
    return st;
}

static wm_status encode_seq(const wm_tokenizer *t, wm_tok_scratch *sc, const char *text, size_t len, wm_tseq *q,
                            int32_t type, wm_error *err) {
    wm_tseq_reset(q);
    q->type = type;
    sc->text[type] = text;
    sc->text_len[type] = len;
    wm_piece p0;
    wm_status st = wm_ts_begin(sc, text, len, 1, &p0, err); /* check_text made sure of UTF-8 */
    if (st) return st;
    seq_ctx x = {t, q, type, 0};
    return wm_tadded_split(t, sc, &p0, 0, raw_piece, &x, err);
}

wm_encode_opts wm_encode_opts_default(void) {
    wm_encode_opts o;
    memset(&o, 0, sizeof o);
    o.add_special_tokens = 1;
    o.use_defaults = 1;
    return o;
}

static wm_status check_text(const char *s, size_t n, const char *what, wm_error *err) {
    if (n && !s) return wm_err(err, WM_ERR_USAGE, "tokenizer: %s is NULL", what);
    if (n > WM_TOK_MAX_TEXT) return wm_err(err, WM_ERR_INPUT, "tokenizer: %s is longer than 256 MiB", what);
    size_t bad, ok = wm_u8_valid_prefix(s, n, &bad);
    if (ok != n) return wm_err(err, WM_ERR_INPUT, "tokenizer: %s is not valid UTF-8 (byte %zu)", what, ok);
    return WM_OK;
}

wm_status wm_tokenizer_encode(const wm_tokenizer *t, const char *text, size_t len, const char *pair, size_t pair_len,
                              const wm_encode_opts *opts, wm_encoding *out, wm_error *err) {
    wm_encode_opts def = wm_encode_opts_default();
    const wm_encode_opts *o = opts ? opts : &def;
    wm_status st = check_text(text, len, "text", err);
    if (!st && pair) st = check_text(pair, pair_len, "pair text", err);
    if (st) return st;
    if (!out->scratch && !(out->scratch = wm_tscratch_new())) return OOM(err);
    wm_tok_scratch *sc = out->scratch;
    if ((st = encode_seq(t, sc, text ? text : "", len, &sc->seq[0], 0, err))) return st;
    if (pair && (st = encode_seq(t, sc, pair, pair_len, &sc->seq[1], 1, err))) return st;
    return wm_tpost_finish(t, sc, pair != NULL, o, out, err);
}

wm_status wm_tokenizer_encode_batch(const wm_tokenizer *t, const char *const *texts, const size_t *lens,
                                    const char *const *pairs, const size_t *pair_lens, size_t n,
                                    const wm_encode_opts *opts, wm_encoding *outs, wm_error *err) {
    wm_encode_opts o = opts ? *opts : wm_encode_opts_default();
    wm_tok_padding pad = o.use_defaults ? t->pad : o.padding;
    if (o.use_defaults) {
        o.use_defaults = 0;
        o.truncation = t->trunc;
    }
    int longest = pad.enabled && pad.length == 0;
    o.padding = pad;
    if (longest) o.padding.enabled = 0;
    size_t mx = 0;
    for (size_t i = 0; i < n; i++) {
        const char *pr = pairs ? pairs[i] : NULL;
        wm_status st = wm_tokenizer_encode(t, texts[i], lens[i], pr, pr ? pair_lens[i] : 0, &o, &outs[i], err);
        if (st) return st;
        if (outs[i].n > mx) mx = outs[i].n;
    }
    if (longest)
        for (size_t i = 0; i < n; i++) {
            wm_status st = wm_tpost_pad(&outs[i], &pad, mx, err);
            if (st) return st;
        }
    return WM_OK;
}

void wm_encoding_init(wm_encoding *e) { memset(e, 0, sizeof *e); }

void wm_encoding_free(wm_encoding *e) {
    if (!e) return;
    free(e->ids);
    free(e->type_ids);
    free(e->word_ids);
    free(e->attention_mask);
    free(e->special_mask);
    free(e->offsets);
    free(e->own);
    free(e->strbuf);
    wm_tscratch_free(e->scratch);
    memset(e, 0, sizeof *e);
}

const char *wm_encoding_token(const wm_encoding *e, size_t i, size_t *len) {
    if (i >= e->n || !e->tok) return NULL;
    size_t lo = 0, hi = e->n_own; /* own is sorted by token index */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (e->own[mid].i < i) lo = mid + 1;
        else hi = mid;
    }
    if (lo < e->n_own && e->own[lo].i == i) return wm_tstr_at(e->strbuf, e->own[lo].ref, len);
    const char *s = wm_tvocab_token(&e->tok->model.v, e->ids[i], len);
    if (!s) *len = 0;
    return s ? s : "";
}
