/*
 * tokenizer_pretok.c - pre-tokenizers: ByteLevel, Split, Metaspace,
 * Whitespace, WhitespaceSplit, BertPreTokenizer, Digits, Punctuation,
 * CharDelimiterSplit, FixedLength and Sequence, flattened into a list of
 * steps at load and run streamed: each step splits its piece a batch of
 * entries at a time and passes every part through the following steps to
 * the sink (the model) before the next batch, as PreTokenizedString::split
 * applied step by step would order them; pieces that are added tokens pass
 * through untouched.
 */
#include <stdlib.h>
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

/* The Bert pre-tokenizer's two steps: whitespace removed, then punctuation isolated. */
static const wm_tpre BERT_WS = {.kind = WM_TP_WHITESPACE_SPLIT};
static const wm_tpre BERT_PU = {.kind = WM_TP_PUNCTUATION, .behavior = WM_SPLIT_ISOLATED};

static wm_status add_steps(wm_tokenizer *t, const wm_tpre *pt, const wm_tpre **out, size_t *n, wm_error *err) {
    if (pt->kind == WM_TP_SEQUENCE) {
        for (size_t i = 0; i < pt->n_kids; i++) {
            wm_status st = add_steps(t, pt->kids[i], out, n, err);
            if (st) return st;
        }
        return WM_OK;
    }
    size_t k = pt->kind == WM_TP_BERT ? 2 : 1;
    if (*n + k > WM_TPRE_MAX_STEPS)
        return wm_err(err, WM_ERR_INPUT,
                      "%s: pre_tokenizer: more than %u steps (Sequence kids at all levels; WM_TPRE_MAX_STEPS in "
                      "src/hf/tokenizer_impl.h)",
                      t->name, (unsigned)WM_TPRE_MAX_STEPS);
    if (out && pt->kind == WM_TP_BERT) out[*n] = &BERT_WS, out[*n + 1] = &BERT_PU;
    else if (out) out[*n] = pt;
    *n += k;
    return WM_OK;
}

wm_status wm_tpre_flatten(wm_tokenizer *t, wm_error *err) {
    t->n_pre_steps = 0;
    t->pre_steps = NULL;
    if (!t->pre) return WM_OK;
    size_t n = 0;
    wm_status st = add_steps(t, t->pre, NULL, &n, err);
    if (st || !n) return st;
    const wm_tpre **steps = wm_arena_alloc(&t->arena, n * sizeof *steps);
    if (!steps) return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", t->name);
    n = 0;
    add_steps(t, t->pre, steps, &n, err);
    t->pre_steps = steps;
    t->n_pre_steps = n;
    return WM_OK;
}

/* The state of one step of the streamed pre-tokenizer: its entries waiting to be split, its parts. */
typedef struct wm_tlevel {
    wm_tents e;
    wm_tpieces out;
} wm_tlevel;

static int levels(wm_tok_scratch *sc, size_t n) {
    if (n <= sc->nlv) return 1;
    wm_tlevel *lv = realloc(sc->lv, n * sizeof *lv);
    if (!lv) return 0;
    memset(lv + sc->nlv, 0, (n - sc->nlv) * sizeof *lv);
    sc->lv = lv;
    sc->nlv = n;
    return 1;
}

void wm_tscratch_free_levels(wm_tok_scratch *sc) {
    for (size_t i = 0; i < sc->nlv; i++) {
        free(sc->lv[i].e.m);
        free(sc->lv[i].out.p);
    }
    free(sc->lv);
    sc->lv = NULL;
    sc->nlv = 0;
}

typedef struct stream_ctx {
    const wm_tokenizer *t;
    wm_tsink sink;
    void *ctx;
} stream_ctx;

/* Step k and the ones after it over piece q (in the work buffer), then the sink. */
static wm_status run_step(const stream_ctx *x, wm_tok_scratch *sc, size_t k, wm_piece q, wm_error *err) {
    if (k == x->t->n_pre_steps || q.added >= 0) return x->sink(x->ctx, sc, &q, err);
    const wm_tpre *pt = x->t->pre_steps[k];
    size_t mark0 = sc->tn; /* what this step appends is dropped when it is done */
    wm_status st = WM_OK;
    wm_tgen g = {.kind = WM_TGEN_CHARS};
    wm_split_behavior b = WM_SPLIT_REMOVED;
    int bytelevel_parts = 0;
    static const uint32_t space = ' ';
    switch (pt->kind) {
    case WM_TP_BYTELEVEL:
        if (pt->add_prefix_space && q.len && sc->txt[q.off] != ' ' && (st = wm_ts_prepend(sc, &q, " ", 1, err))) goto done;
        if (!pt->use_regex) { /* then every piece becomes byte-level characters */
            if (q.len && !(st = wm_ts_bytelevel(sc, &q, err))) st = run_step(x, sc, k + 1, q, err);
            goto done;
        }
        g = (wm_tgen){.kind = WM_TGEN_REGEX, .re = &pt->re};
        b = WM_SPLIT_ISOLATED;
        bytelevel_parts = 1;
        break;
    case WM_TP_SPLIT:
        g = (wm_tgen){.kind = WM_TGEN_REGEX, .re = &pt->re, .invert = pt->invert};
        b = pt->behavior;
        break;
    case WM_TP_METASPACE: {
        if ((st = wm_ts_replace_char(sc, &q, space, pt->rep, pt->rep_len, err))) goto done;
        int starts = q.len >= pt->rep_len && !memcmp(sc->txt + q.off, pt->rep, pt->rep_len);
        if ((pt->prepend_scheme == WM_PREPEND_ALWAYS && !starts) ||
            (pt->prepend_scheme == WM_PREPEND_FIRST && !starts && q.shift == 0))
            if ((st = wm_ts_prepend(sc, &q, pt->rep, pt->rep_len, err))) goto done;
        if (!pt->split) {
            if (q.len) st = run_step(x, sc, k + 1, q, err);
            goto done;
        }
        g = (wm_tgen){.kind = WM_TGEN_CHARS, .pred = pred_eq, .pctx = &pt->cp};
        b = WM_SPLIT_MERGED_NEXT;
        break;
    }
    case WM_TP_WHITESPACE: g = (wm_tgen){.kind = WM_TGEN_WORDS}; break;
    case WM_TP_WHITESPACE_SPLIT: g = (wm_tgen){.kind = WM_TGEN_CHARS, .pred = pred_white}; break;
    case WM_TP_DIGITS:
        g = (wm_tgen){.kind = WM_TGEN_CHARS, .pred = pred_numeric};
        b = pt->individual ? WM_SPLIT_ISOLATED : WM_SPLIT_CONTIGUOUS;
        break;
    case WM_TP_PUNCTUATION:
        g = (wm_tgen){.kind = WM_TGEN_CHARS, .pred = pred_punct};
        b = pt->behavior;
        break;
    case WM_TP_DELIMITER: g = (wm_tgen){.kind = WM_TGEN_CHARS, .pred = pred_eq, .pctx = &pt->cp}; break;
    case WM_TP_FIXED_LENGTH: g = (wm_tgen){.kind = WM_TGEN_FIXED, .length = pt->length}; break;
    case WM_TP_BERT:
    case WM_TP_SEQUENCE: st = wm_err(err, WM_ERR_INTERNAL, "tokenizer: pre-tokenizer steps are not flat"); goto done;
    }
    size_t mark1 = sc->tn, want = WM_TPRE_BATCH;
    wm_tgen_start(&g, &q);
    sc->lv[k].e.n = 0;
    for (;;) {
        if ((st = wm_tgen_fill(sc, &q, &g, &sc->lv[k].e, want, err))) goto done;
        wm_tlevel *L = &sc->lv[k];
        size_t c = g.done ? L->e.n : wm_tents_cut(&L->e, b);
        if (!c && !g.done) { /* no entry can be split yet (one growing run): take more */
            want = L->e.n + WM_TPRE_BATCH;
            continue;
        }
        want = WM_TPRE_BATCH;
        L->out.n = 0;
        if ((st = wm_ts_split_ents(sc, &q, L->e.m, c, b, &L->out, err))) goto done;
        memmove(L->e.m, L->e.m + c, (L->e.n - c) * sizeof *L->e.m);
        L->e.n -= c;
        int last = k + 1 == x->t->n_pre_steps;
        for (size_t i = 0; i < sc->lv[k].out.n; i++) { /* re-read: deeper steps do not move this list */
            wm_piece r = sc->lv[k].out.p[i];
            if (bytelevel_parts && (st = wm_ts_bytelevel(sc, &r, err))) goto done;
            if ((st = last ? x->sink(x->ctx, sc, &r, err) : run_step(x, sc, k + 1, r, err))) goto done;
            sc->tn = mark1;
        }
        if (g.done && !sc->lv[k].e.n) break;
    }
done:
    sc->tn = mark0;
    return st;
}

wm_status wm_tpre_stream(const wm_tokenizer *t, wm_tok_scratch *sc, const wm_piece *p, wm_tsink sink, void *ctx,
                         wm_error *err) {
    if (!levels(sc, t->n_pre_steps)) return OOM(err);
    stream_ctx x = {t, sink, ctx};
    return run_step(&x, sc, 0, *p, err);
}
