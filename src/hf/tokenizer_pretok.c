/*
 * tokenizer_pretok.c - pre-tokenizers: ByteLevel, Split, Metaspace,
 * Whitespace, WhitespaceSplit, BertPreTokenizer, Digits, Punctuation,
 * CharDelimiterSplit, FixedLength and Sequence. Each takes the pieces of
 * list *k and writes the new pieces to the other list; pieces that are
 * added tokens pass through untouched (PreTokenizedString::split).
 */
#include <string.h>

#include "hf/tokenizer_impl.h"

#define OOM(err) wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory (pre-tokenize)")

static int pred_white(uint32_t cp, const void *ctx) {
    (void)ctx;
    return wm_uc_is_white(cp);
}
static int pred_punct(uint32_t cp, const void *ctx) {
    (void)ctx;
    return wm_uc_is_punct(cp);
}
static int pred_numeric(uint32_t cp, const void *ctx) {
    (void)ctx;
    return wm_uc_is_numeric(cp);
}
static int pred_eq(uint32_t cp, const void *ctx) { return cp == *(const uint32_t *)ctx; }

/* Whitespace: the matches of \w+|[^\w\s]+ (Rust regex), everything else dropped. */
static wm_status whitespace_split(wm_tok_scratch *sc, const wm_piece *p, int dst, wm_error *err) {
    const char *t = sc->txt + p->off;
    uint32_t run_s = 0;
    int run = 0; /* 0 none, 1 word, 2 other */
    for (uint32_t i = 0; i <= p->len;) {
        int cls = 0;
        size_t adv = 1;
        if (i < p->len) {
            uint32_t cp = wm_u8_get(t + i, &adv);
            cls = wm_uc_is_regex_word(cp) ? 1 : wm_uc_is_white(cp) ? 0 : 2;
        }
        if (cls != run) {
            if (run && !wm_ts_push_piece(sc, dst, wm_ts_slice(sc, p, run_s, i))) return OOM(err);
            run = cls;
            run_s = i;
        }
        i += (uint32_t)adv;
    }
    return WM_OK;
}

static wm_status fixed_length(wm_tok_scratch *sc, const wm_piece *p, size_t len, int dst, wm_error *err) {
    const char *t = sc->txt + p->off;
    uint32_t s = 0;
    size_t k = 0;
    for (uint32_t i = 0; i < p->len;) {
        i += (uint32_t)wm_u8_len((uint8_t)t[i]);
        if (++k == len || i == p->len) {
            if (!wm_ts_push_piece(sc, dst, wm_ts_slice(sc, p, s, i))) return OOM(err);
            s = i;
            k = 0;
        }
    }
    return WM_OK;
}

static wm_status metaspace(const wm_tpre *pt, wm_tok_scratch *sc, wm_piece q, int dst, wm_error *err) {
    uint32_t space = ' ';
    wm_status st = wm_ts_find_chars(sc, &q, pred_eq, &space, err);
    if (!st) st = wm_ts_replace(sc, &q, pt->rep, pt->rep_len, err);
    if (st) return st;
    int starts = q.len >= pt->rep_len && !memcmp(sc->txt + q.off, pt->rep, pt->rep_len);
    if ((pt->prepend_scheme == WM_PREPEND_ALWAYS && !starts) ||
        (pt->prepend_scheme == WM_PREPEND_FIRST && !starts && q.shift == 0))
        if ((st = wm_ts_prepend(sc, &q, pt->rep, pt->rep_len, err))) return st;
    if (!pt->split) return q.len && !wm_ts_push_piece(sc, dst, q) ? OOM(err) : WM_OK;
    if ((st = wm_ts_find_chars(sc, &q, pred_eq, &pt->cp, err))) return st;
    return wm_ts_split(sc, &q, WM_SPLIT_MERGED_NEXT, dst, err);
}

/* One pre-tokenizer over every piece of list src into list dst. */
static wm_status apply_one(const wm_tpre *pt, wm_tok_scratch *sc, int src, int dst, wm_error *err) {
    sc->pn[dst] = 0;
    wm_status st = WM_OK;
    for (size_t i = 0; i < sc->pn[src] && !st; i++) {
        wm_piece q = sc->pc[src][i];
        if (q.added >= 0) {
            if (!wm_ts_push_piece(sc, dst, q)) return OOM(err);
            continue;
        }
        switch (pt->kind) {
        case WM_TP_BYTELEVEL:
            if (pt->add_prefix_space && q.len && sc->txt[q.off] != ' ' &&
                (st = wm_ts_prepend(sc, &q, " ", 1, err)))
                return st;
            if (pt->use_regex) {
                if (!(st = wm_ts_find_regex(sc, &q, &pt->re, err))) st = wm_ts_split(sc, &q, WM_SPLIT_ISOLATED, dst, err);
            } else if (q.len && !wm_ts_push_piece(sc, dst, q))
                return OOM(err);
            break;
        case WM_TP_SPLIT:
            if (!(st = wm_ts_find_regex(sc, &q, &pt->re, err))) {
                if (pt->invert) wm_ts_invert(sc);
                st = wm_ts_split(sc, &q, pt->behavior, dst, err);
            }
            break;
        case WM_TP_METASPACE: st = metaspace(pt, sc, q, dst, err); break;
        case WM_TP_WHITESPACE: st = whitespace_split(sc, &q, dst, err); break;
        case WM_TP_WHITESPACE_SPLIT:
            if (!(st = wm_ts_find_chars(sc, &q, pred_white, NULL, err))) st = wm_ts_split(sc, &q, WM_SPLIT_REMOVED, dst, err);
            break;
        case WM_TP_DIGITS:
            if (!(st = wm_ts_find_chars(sc, &q, pred_numeric, NULL, err)))
                st = wm_ts_split(sc, &q, pt->individual ? WM_SPLIT_ISOLATED : WM_SPLIT_CONTIGUOUS, dst, err);
            break;
        case WM_TP_PUNCTUATION:
            if (!(st = wm_ts_find_chars(sc, &q, pred_punct, NULL, err))) st = wm_ts_split(sc, &q, pt->behavior, dst, err);
            break;
        case WM_TP_DELIMITER:
            if (!(st = wm_ts_find_chars(sc, &q, pred_eq, &pt->cp, err))) st = wm_ts_split(sc, &q, WM_SPLIT_REMOVED, dst, err);
            break;
        case WM_TP_FIXED_LENGTH: st = fixed_length(sc, &q, pt->length, dst, err); break;
        case WM_TP_BERT: /* whitespace (removed), then punctuation (isolated) over the results */
        case WM_TP_SEQUENCE: break;
        }
    }
    return st;
}

wm_status wm_tpre_apply(const wm_tpre *pt, wm_tok_scratch *sc, int *k, wm_error *err) {
    wm_status st;
    switch (pt->kind) {
    case WM_TP_SEQUENCE:
        for (size_t i = 0; i < pt->n_kids; i++)
            if ((st = wm_tpre_apply(pt->kids[i], sc, k, err))) return st;
        return WM_OK;
    case WM_TP_BERT: {
        wm_tpre ws = {.kind = WM_TP_WHITESPACE_SPLIT}, pu = {.kind = WM_TP_PUNCTUATION, .behavior = WM_SPLIT_ISOLATED};
        if ((st = apply_one(&ws, sc, *k, 1 - *k, err))) return st;
        *k = 1 - *k;
        if ((st = apply_one(&pu, sc, *k, 1 - *k, err))) return st;
        *k = 1 - *k;
        return WM_OK;
    }
    default:
        if ((st = apply_one(pt, sc, *k, 1 - *k, err))) return st;
        *k = 1 - *k;
        if (pt->kind == WM_TP_BYTELEVEL) /* then every piece becomes byte-level characters */
            for (size_t i = 0; i < sc->pn[*k]; i++)
                if (sc->pc[*k][i].added < 0 && (st = wm_ts_bytelevel(sc, &sc->pc[*k][i], err))) return st;
        return WM_OK;
    }
}
