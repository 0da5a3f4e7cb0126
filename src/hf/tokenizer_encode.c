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
    free(sc->pc[0]);
    free(sc->pc[1]);
    free(sc->ops_cp);
    free(sc->ops_ch);
    free(sc->mt);
    free(sc->mt2);
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
    free(sc->tptr);
    free(sc->tplen);
    free(sc->cstr);
    free(sc->cslen);
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

wm_status wm_ts_begin(wm_tok_scratch *sc, const char *text, size_t len, wm_piece *p, wm_error *err) {
    sc->tn = 0;
    sc->pn[0] = sc->pn[1] = 0;
    sc->on = 0;
    if (!wm_ts_reserve(sc, len)) return OOM(err);
    if (len) memcpy(sc->txt, text, len);
    for (size_t i = 0; i < len;) {
        size_t n = wm_u8_len((uint8_t)text[i]);
        for (size_t k = 0; k < n; k++) sc->al[i + k] = (wm_tspan){(uint32_t)i, (uint32_t)(i + n)};
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
    return (wm_tok_offset){sc->al[p->off + s].s, sc->al[p->off + e - 1].e};
}

static const char *model_token(const wm_tmodel *m, int32_t id, size_t *len) { return wm_tvocab_token(&m->v, id, len); }

static wm_status tokenize_piece(const wm_tokenizer *t, wm_tok_scratch *sc, const wm_piece *p, int32_t word,
                                int32_t type, wm_tseq *q, wm_error *err) {
    const char *w = sc->txt + p->off;
    if (p->added >= 0) {
        const wm_tadded *a = &t->added[p->added];
        return wm_tseq_push(q, a->id, w, p->len, 0, conv(sc, p, 0, p->len), word, type, 0) ? WM_OK : OOM(err);
    }
    size_t n = 0;
    wm_status st;
    sc->tstr_filled = 0;
    switch (t->model.kind) {
    case WM_TM_BPE: st = wm_tbpe_tokenize(&t->model, sc, w, p->len, &n, err); break;
    case WM_TM_UNIGRAM: st = wm_tunigram_tokenize(&t->model, sc, w, p->len, &n, err); break;
    case WM_TM_WORDPIECE: st = wm_twordpiece_tokenize(&t->model, sc, w, p->len, &n, err); break;
    default: st = wm_twordlevel_tokenize(&t->model, sc, w, p->len, &n, err); break;
    }
    if (st) return st;
    for (size_t i = 0; i < n; i++) {
        const char *s;
        size_t sl = 0;
        int ref = !sc->tsrc[i];
        if (!ref) {
            s = sc->txt + p->off + sc->ts[i];
            sl = sc->te[i] - sc->ts[i];
        } else if (sc->tstr_filled) {
            s = sc->tptr[i];
            sl = sc->tplen[i];
        } else if (!(s = model_token(&t->model, sc->tids[i], &sl)))
            s = "", sl = 0;
        if (!wm_tseq_push(q, sc->tids[i], s, sl, ref, conv(sc, p, sc->ts[i], sc->te[i]), word, type, 0))
            return OOM(err);
    }
    return WM_OK;
}

static wm_status encode_seq(const wm_tokenizer *t, wm_tok_scratch *sc, const char *text, size_t len, wm_tseq *q,
                            int32_t type, wm_error *err) {
    wm_tseq_reset(q);
    sc->text[type] = text;
    sc->text_len[type] = len;
    wm_piece p0;
    wm_status st = wm_ts_begin(sc, text, len, &p0, err);
    if (st) return st;
    if ((st = wm_tadded_split(t, sc, &p0, 0, 1, err))) return st;
    sc->pn[0] = 0;
    for (size_t i = 0; i < sc->pn[1]; i++) {
        wm_piece p = sc->pc[1][i];
        if (p.added >= 0) {
            if (!wm_ts_push_piece(sc, 0, p)) return OOM(err);
            continue;
        }
        if (t->norm && (st = wm_tnorm_apply(t->norm, sc, &p, err))) return st;
        if ((st = wm_tadded_split(t, sc, &p, 1, 0, err))) return st;
    }
    int k = 0;
    if (t->pre && (st = wm_tpre_apply(t->pre, sc, &k, err))) return st;
    for (size_t i = 0; i < sc->pn[k]; i++) {
        wm_piece p = sc->pc[k][i];
        if ((st = tokenize_piece(t, sc, &p, (int32_t)i, type, q, err))) return st;
    }
    return WM_OK;
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
    free(e->tok_ptr);
    free(e->tok_off);
    free(e->tok_len);
    free(e->strbuf);
    wm_tscratch_free(e->scratch);
    memset(e, 0, sizeof *e);
}

const char *wm_encoding_token(const wm_encoding *e, size_t i, size_t *len) {
    if (i >= e->n) return NULL;
    *len = e->tok_len[i];
    return e->tok_ptr[i] ? e->tok_ptr[i] : e->strbuf + e->tok_off[i];
}
