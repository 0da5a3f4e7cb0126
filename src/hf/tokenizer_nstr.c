/*
 * tokenizer_nstr.c - pieces of normalized text with alignments (the Rust
 * NormalizedString): transform, prepend, replace, pattern matches and the
 * five split behaviours. Alignments are absolute original byte ranges, one
 * per normalized byte; a piece's shift is its original_shift.
 */
#include <stdlib.h>
#include <string.h>

#include "hf/tokenizer_impl.h"

int wm_ts_reserve(wm_tok_scratch *sc, size_t n) {
    if (n > UINT32_MAX - sc->tn) return 0;
    size_t need = sc->tn + n;
    return wm_tgrow(&sc->txt, &sc->tcap, need, 1) &&
           wm_tgrow(&sc->al, &sc->acap, need - sc->base_n + 1, sizeof *sc->al);
}


int wm_ts_op(wm_tok_scratch *sc, uint32_t cp, int32_t change) {
    if (sc->on >= sc->ocap || sc->on >= sc->ocap2) {
        size_t c1 = sc->ocap, c2 = sc->ocap2;
        if (!wm_tgrow(&sc->ops_cp, &c1, sc->on + 1, sizeof *sc->ops_cp) ||
            !wm_tgrow(&sc->ops_ch, &c2, sc->on + 1, sizeof *sc->ops_ch))
            return 0;
        sc->ocap = c1;
        sc->ocap2 = c2;
    }
    sc->ops_cp[sc->on] = cp;
    sc->ops_ch[sc->on] = change;
    sc->on++;
    return 1;
}

/* Copies bytes [a, b) of the work buffer (text + alignments) to its end (capacity reserved). */
static void copy_tail(wm_tok_scratch *sc, size_t a, size_t b) {
    size_t n = b - a;
    memmove(sc->txt + sc->tn, sc->txt + a, n);
    for (; a < b && a < sc->base_n; a++) WM_TS_ALW(sc, sc->tn++) = wm_ts_al(sc, a);
    if (a < b) memmove(&WM_TS_ALW(sc, sc->tn), &WM_TS_ALW(sc, a), (b - a) * sizeof *sc->al);
    sc->tn += b - a;
}

static size_t char_end(const char *t, size_t i, size_t len);

/* Writes the ops sc->ops at the end of the work buffer (capacity reserved: 4 bytes an op), consuming the
 * characters of the piece from *rc (an absolute work-buffer offset) up to rend (transform_range's op loop). */
static void apply_ops(wm_tok_scratch *sc, const wm_piece *p, size_t *rcp, size_t rend) {
    size_t base = p->off, rc = *rcp;
    wm_tspan at_start = {p->shift, p->shift};
    for (size_t i = 0; i < sc->on; i++) {
        int32_t ch = sc->ops_ch[i];
        wm_tspan al;
        if (ch > 0) al = rc - base < 1 ? at_start : wm_ts_al(sc, rc - 1);
        else if (rc < sc->base_n) /* a character of the text at rc: its own span */
            al = (wm_tspan){(uint32_t)rc, (uint32_t)(rc + wm_u8_len((uint8_t)sc->txt[rc]))};
        else if (rc < base + p->len) al = wm_ts_al(sc, rc);
        else al = (wm_tspan){p->shift + p->olen, p->shift + p->olen};
        if (ch <= 0 && rc < rend) rc += wm_u8_len((uint8_t)sc->txt[rc]);
        for (int32_t k = 0; ch < 0 && k < -ch && rc < rend; k++) rc += wm_u8_len((uint8_t)sc->txt[rc]);
        size_t w = wm_u8_put(sc->ops_cp[i], sc->txt + sc->tn);
        for (size_t b = 0; b < w; b++) WM_TS_ALW(sc, sc->tn + b) = al;
        sc->tn += w;
    }
    *rcp = rc;
}

/* NormalizedString::transform_range over normalized bytes [ns, ne) of the piece. */
static wm_status transform_range(wm_tok_scratch *sc, wm_piece *p, size_t ns, size_t ne, size_t initial_offset,
                                 wm_error *err) {
    size_t out_max = (size_t)p->len + 4 * sc->on;
    if (!wm_ts_reserve(sc, out_max)) return wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory (normalize)");
    size_t base = p->off, start = sc->tn;
    copy_tail(sc, base, base + ns);
    size_t rc = base + ns, rend = base + ne;
    for (size_t k = 0; k < initial_offset && rc < rend; k++) rc += wm_u8_len((uint8_t)sc->txt[rc]);
    apply_ops(sc, p, &rc, rend);
    copy_tail(sc, base + ne, base + p->len);
    p->off = (uint32_t)start;
    p->len = (uint32_t)(sc->tn - start);
    return WM_OK;
}

/* n_range = convert_offsets(Original(0..len_original)): the normalized bytes a transform replaces. 0 when none. */
static int whole_range(const wm_tok_scratch *sc, const wm_piece *p, size_t *ns, size_t *ne) {
    *ns = *ne = 0;
    if (!p->olen) return 1;
    if ((size_t)p->off + p->len <= sc->base_n && p->off == p->shift && p->len == p->olen) { /* the text itself */
        *ne = p->len;
        return 1;
    }
    long s = -1, e = -1;
    for (size_t i = 0; i < p->len; i++) {
        wm_tspan a = wm_ts_al(sc, p->off + i);
        if ((int64_t)a.e - (int64_t)p->shift > (int64_t)p->olen) break;
        if (s < 0 && a.s >= p->shift && a.s != a.e) s = (long)i;
        e = (long)i + 1;
    }
    if (s >= 0 && e >= 0) *ns = (size_t)s, *ne = (size_t)e;
    else if (s >= 0) *ns = *ne = (size_t)s;
    else if (e >= 0) *ns = *ne = (size_t)e;
    else return 0;
    return 1;
}

wm_status wm_ts_transform(wm_tok_scratch *sc, wm_piece *p, size_t initial_offset, wm_error *err) {
    size_t ns, ne;
    if (!whole_range(sc, p, &ns, &ne)) {
        sc->on = 0;
        return WM_OK;
    }
    wm_status st = transform_range(sc, p, ns, ne, initial_offset, err);
    sc->on = 0;
    return st;
}

/* 1 when sc->ops reproduce the characters of piece bytes [a, b) one for one (no change). */
static int ops_identity(const wm_tok_scratch *sc, const wm_piece *p, size_t a, size_t b) {
    const char *t = sc->txt + p->off;
    size_t i = a;
    for (size_t k = 0; k < sc->on; k++) {
        if (i >= b || sc->ops_ch[k] != 0) return 0;
        size_t adv;
        if (wm_u8_get(t + i, &adv) != sc->ops_cp[k]) return 0;
        i += adv;
    }
    return i == b;
}

/* The transform of the whole piece in one go (a piece whose range is not all of it: transform_range's rules). */
static wm_status transform_whole(wm_tok_scratch *sc, wm_piece *p, wm_tseg_ops fn, void *ctx, wm_error *err) {
    size_t init = 0;
    int same = 0;
    sc->on = 0;
    wm_status st = fn(ctx, sc, p, 0, p->len, &same, &init, err);
    if (st) return st;
    if (same || (!init && ops_identity(sc, p, 0, p->len))) {
        sc->on = 0;
        return WM_OK;
    }
    return wm_ts_transform(sc, p, init, err);
}

wm_status wm_ts_transform_seg(wm_tok_scratch *sc, wm_piece *p, wm_tcut cut, wm_tseg_ops fn, void *ctx, wm_error *err) {
    size_t ns, ne, init = 0;
    int same = 0;
    wm_status st;
    size_t base = p->off, start = 0, len = p->len;
    int started = 0, checked = 0;
    for (size_t a = 0, b; a < len; a = b) {
        b = a + WM_TSEG_BYTES < len ? char_end(sc->txt + base, a + WM_TSEG_BYTES, len) : len;
        while (b < len) { /* the segment ends before the first character that may start one */
            size_t adv;
            uint32_t cp = wm_u8_get(sc->txt + base + b, &adv);
            if (cut(ctx, cp)) break;
            b += adv;
        }
        sc->on = 0;
        same = 0;
        init = 0;
        if ((st = fn(ctx, sc, p, a, b, &same, &init, err))) return st;
        if (!same) same = !init && ops_identity(sc, p, a, b);
        if (same && !started) continue;
        if (!checked) { /* something changes: the transform replaces the piece's whole range (or the rules differ) */
            checked = 1;
            if (!whole_range(sc, p, &ns, &ne) || ns != 0 || ne != p->len) return transform_whole(sc, p, fn, ctx, err);
        }
        if (!started) {
            if (!wm_ts_reserve(sc, a)) goto oom;
            start = sc->tn;
            copy_tail(sc, base, base + a);
            started = 1;
        }
        if (same) {
            if (!wm_ts_reserve(sc, b - a)) goto oom;
            copy_tail(sc, base + a, base + b);
            continue;
        }
        if (!wm_ts_reserve(sc, 4 * sc->on)) goto oom;
        size_t rc = base + a;
        for (size_t k = 0; k < init && rc < base + b; k++) rc += wm_u8_len((uint8_t)sc->txt[rc]);
        apply_ops(sc, p, &rc, base + b);
    }
    sc->on = 0;
    if (started) {
        p->off = (uint32_t)start;
        p->len = (uint32_t)(sc->tn - start);
    }
    return WM_OK;
oom:
    sc->on = 0;
    return wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory (normalize)");
}

wm_status wm_ts_prepend(wm_tok_scratch *sc, wm_piece *p, const char *s, size_t n, wm_error *err) {
    if (!p->len) return WM_OK;
    size_t adv;
    uint32_t first = wm_u8_get(sc->txt + p->off, &adv);
    sc->on = 0;
    for (size_t i = 0, k = 0; i < n; k++) {
        size_t a;
        uint32_t cp = wm_u8_get(s + i, &a);
        if (!wm_ts_op(sc, cp, k != 0)) return wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory");
        i += a;
    }
    if (!wm_ts_op(sc, first, 1)) return wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory");
    wm_status st = transform_range(sc, p, 0, adv, 0, err);
    sc->on = 0;
    return st;
}

wm_status wm_ts_replace(wm_tok_scratch *sc, wm_piece *p, const char *content, size_t n, wm_error *err) {
    size_t nm = 0;
    for (size_t i = 0; i < sc->mn; i++) nm += sc->mt[i].m;
    if (!nm) return WM_OK;
    if (!wm_ts_reserve(sc, (size_t)p->len + nm * n)) return wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory");
    size_t base = p->off, start = sc->tn, last = 0;
    wm_tspan at_start = {p->shift, p->shift};
    for (size_t i = 0; i < sc->mn; i++) {
        if (!sc->mt[i].m) continue;
        uint32_t s = sc->mt[i].s, e = sc->mt[i].e;
        copy_tail(sc, base + last, base + s);
        wm_tspan al = e < 1 ? at_start : wm_ts_al(sc, base + e - 1);
        memcpy(sc->txt + sc->tn, content, n);
        for (size_t b = 0; b < n; b++) WM_TS_ALW(sc, sc->tn + b) = al;
        sc->tn += n;
        last = e;
    }
    copy_tail(sc, base + last, base + p->len);
    p->off = (uint32_t)start;
    p->len = (uint32_t)(sc->tn - start);
    return WM_OK;
}


/* The first character boundary at or after i (the text is valid UTF-8). */
static size_t char_end(const char *t, size_t i, size_t len) {
    while (i < len && ((uint8_t)t[i] & 0xC0) == 0x80) i++;
    return i;
}

/*
 * One match from start (pcre2_match semantics over the whole piece), with the work bounded: the attempt sees
 * the piece up to a window end that grows x4 while PCRE2's hard partial matching says the match needs text
 * past it (or finds none within it), and its backtracking limit grows x16 from a small start while it runs
 * out; each window and limit tried is charged to *wbudget / *lbudget. A complete match found in a window
 * never looked past it, so it is the match over the whole piece. rc: a pcre2 result (>= 0 a match).
 */
static int match_bounded(wm_tok_scratch *sc, const wm_tregex *re, PCRE2_SPTR subj, size_t len, size_t start,
                         uint64_t *wbudget, uint64_t *lbudget) {
    size_t win = WM_TREGEX_WINDOW0;
    uint32_t lim = WM_TREGEX_LIMIT0;
    for (;;) {
        size_t end = len - start > win ? char_end((const char *)subj, start + win, len) : len;
        uint32_t opts = end < len ? PCRE2_PARTIAL_HARD : 0;
        if (*wbudget < end - start || *lbudget < lim) return WM_TREGEX_OVER_BUDGET;
        *wbudget -= end - start;
        *lbudget -= lim;
        pcre2_set_match_limit(sc->mctx, lim);
        int rc = re->jit ? pcre2_jit_match(re->code, subj, end, start, opts, sc->md, sc->mctx)
                         : pcre2_match(re->code, subj, end, start, opts | PCRE2_NO_UTF_CHECK, sc->md, sc->mctx);
        if (rc == PCRE2_ERROR_MATCHLIMIT && lim < WM_TREGEX_MATCH_LIMIT) {
            lim = lim > WM_TREGEX_MATCH_LIMIT / 16 ? WM_TREGEX_MATCH_LIMIT : lim * 16;
            continue;
        }
        if (end < len && (rc == PCRE2_ERROR_PARTIAL || rc == PCRE2_ERROR_NOMATCH)) {
            win = win > len / 4 ? len : win * 4;
            continue;
        }
        return rc;
    }
}

void wm_tgen_start(wm_tgen *g, const wm_piece *p) {
    g->pos = g->prev = 0;
    g->last_match_end = -1;
    g->wbudget = WM_TREGEX_BUDGET_BASE + (uint64_t)WM_TREGEX_BUDGET_PER_BYTE * p->len;
    g->lbudget = WM_TREGEX_MATCH_LIMIT + (uint64_t)WM_TREGEX_BUDGET_PER_BYTE * p->len;
    g->run = 0;
    g->done = 0;
}

/* Regex matches (Split, ByteLevel, Replace): the gaps between matches are entries too. */
static wm_status fill_regex(wm_tok_scratch *sc, const wm_piece *p, wm_tgen *g, wm_tents *E, size_t want,
                            wm_error *err) {
    size_t len = p->len;
    int hit = !g->invert, miss = g->invert;
    if (!len) { /* (an empty token's work buffer may not exist yet) */
        g->done = 1;
        return wm_tents_push(E, 0, 0, miss) ? WM_OK : wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory");
    }
    const PCRE2_SPTR subj = (PCRE2_SPTR)(sc->txt + p->off);
    while (g->pos <= len && E->n < want) {
        int rc = match_bounded(sc, g->re, subj, len, g->pos, &g->wbudget, &g->lbudget);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc == WM_TREGEX_OVER_BUDGET)
            return wm_err(err, WM_ERR_INPUT,
                          "tokenizer: regex work passed its budget of %u steps per byte over a text of %zu bytes "
                          "(stopped at byte %zu): the pattern rescans or backtracks too much for this text "
                          "(WM_TREGEX_BUDGET_PER_BYTE in src/hf/tokenizer_impl.h)",
                          (unsigned)WM_TREGEX_BUDGET_PER_BYTE, len, g->pos);
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return wm_err(err, WM_ERR_INPUT, "tokenizer: regex match failed at byte %zu: %s%s", g->pos,
                          (const char *)msg,
                          rc == PCRE2_ERROR_MATCHLIMIT ? " (WM_TREGEX_MATCH_LIMIT steps for one match)" : "");
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(sc->md);
        size_t s = ov[0], e = ov[1];
        if (e < s) e = s; /* \K can report end < start */
        if (e == s && g->last_match_end == (long)e) {
            g->pos += g->pos < len ? wm_u8_len((uint8_t)sc->txt[p->off + g->pos]) : 1;
            continue;
        }
        g->pos = e;
        g->last_match_end = (long)e;
        if (g->prev != s && !wm_tents_push(E, (uint32_t)g->prev, (uint32_t)s, miss)) goto oom;
        if (!wm_tents_push(E, (uint32_t)s, (uint32_t)e, hit)) goto oom;
        g->prev = e;
    }
    if (g->pos <= len && E->n >= want) return WM_OK;
    g->done = 1;
    if (g->prev != len && !wm_tents_push(E, (uint32_t)g->prev, (uint32_t)len, miss)) goto oom;
    return WM_OK;
oom:
    return wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory");
}

/* Characters that match a predicate (WhitespaceSplit, Digits, Punctuation, CharDelimiterSplit, Metaspace). */
static wm_status fill_chars(wm_tok_scratch *sc, const wm_piece *p, wm_tgen *g, wm_tents *E, size_t want,
                            wm_error *err) {
    const char *t = sc->txt + p->off;
    if (!p->len) {
        g->done = 1;
        return wm_tents_push(E, 0, 0, 0) ? WM_OK : wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory");
    }
    size_t pos = g->pos, prev = g->prev, len = p->len;
    wm_tcharpred pred = g->pred;
    const void *pctx = g->pctx;
    while (pos < len && E->n < want) {
        size_t adv;
        uint32_t cp = (uint8_t)t[pos] < 0x80 ? (adv = 1, (uint8_t)t[pos]) : wm_u8_get(t + pos, &adv);
        if (pred(cp, pctx)) {
            if (prev < pos && !wm_tents_push(E, (uint32_t)prev, (uint32_t)pos, 0)) goto oom;
            if (!wm_tents_push(E, (uint32_t)pos, (uint32_t)(pos + adv), 1)) goto oom;
            prev = pos + adv;
        }
        pos += adv;
    }
    g->pos = pos;
    g->prev = prev;
    if (pos < len) return WM_OK;
    g->done = 1;
    if (len > prev && !wm_tents_push(E, (uint32_t)prev, (uint32_t)len, 0)) goto oom;
    return WM_OK;
oom:
    return wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory");
}

/* The Whitespace pre-tokenizer: runs of \w+ or [^\w\s]+ (Rust regex) kept, whitespace entries to remove. */
static wm_status fill_words(wm_tok_scratch *sc, const wm_piece *p, wm_tgen *g, wm_tents *E, size_t want,
                            wm_error *err) {
    const char *t = sc->txt + p->off;
    while (g->pos <= p->len && E->n < want) {
        int cls = 0;
        size_t adv = 1;
        if (g->pos < p->len) {
            uint32_t cp = wm_u8_get(t + g->pos, &adv);
            cls = wm_uc_is_regex_word(cp) ? 1 : wm_uc_is_white(cp) ? 0 : 2;
        }
        if (cls != g->run || g->pos == p->len) {
            if (g->prev < g->pos && !wm_tents_push(E, (uint32_t)g->prev, (uint32_t)g->pos, g->run == 0)) goto oom;
            g->run = cls;
            g->prev = g->pos;
        }
        g->pos += adv;
    }
    g->done = g->pos > p->len;
    return WM_OK;
oom:
    return wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory");
}

/* FixedLength: chunks of g->length characters (the last one shorter). */
static wm_status fill_fixed(wm_tok_scratch *sc, const wm_piece *p, wm_tgen *g, wm_tents *E, size_t want,
                            wm_error *err) {
    const char *t = sc->txt + p->off;
    while (g->pos < p->len && E->n < want) {
        g->pos += wm_u8_len((uint8_t)t[g->pos]);
        if ((size_t)++g->run == g->length || g->pos == p->len) {
            if (!wm_tents_push(E, (uint32_t)g->prev, (uint32_t)g->pos, 0))
                return wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory");
            g->prev = g->pos;
            g->run = 0;
        }
    }
    g->done = g->pos >= p->len;
    return WM_OK;
}

wm_status wm_tgen_fill(wm_tok_scratch *sc, const wm_piece *p, wm_tgen *g, wm_tents *E, size_t want, wm_error *err) {
    if (g->done) return WM_OK;
    switch (g->kind) {
    case WM_TGEN_REGEX: return fill_regex(sc, p, g, E, want, err);
    case WM_TGEN_CHARS: return fill_chars(sc, p, g, E, want, err);
    case WM_TGEN_WORDS: return fill_words(sc, p, g, E, want, err);
    default: return fill_fixed(sc, p, g, E, want, err);
    }
}

wm_status wm_ts_find_regex(wm_tok_scratch *sc, const wm_piece *p, const wm_tregex *re, wm_error *err) {
    wm_tgen g = {.kind = WM_TGEN_REGEX, .re = re};
    wm_tgen_start(&g, p);
    wm_tents E = {sc->mt, 0, sc->mcap};
    wm_status st = fill_regex(sc, p, &g, &E, SIZE_MAX, err);
    sc->mt = E.m;
    sc->mn = E.n;
    sc->mcap = E.cap;
    return st;
}

size_t wm_tents_cut(const wm_tents *E, wm_split_behavior b) {
    for (size_t c = E->n; c-- > 1;) {
        int x = E->m[c - 1].m, y = E->m[c].m; /* a cut between entries c - 1 and c */
        int ok = b == WM_SPLIT_REMOVED || b == WM_SPLIT_ISOLATED || (b == WM_SPLIT_MERGED_PREV && !(!x && y)) ||
                 (b == WM_SPLIT_MERGED_NEXT && !(x && !y)) || (b == WM_SPLIT_CONTIGUOUS && x != y);
        if (ok) return c;
    }
    return 0;
}


wm_status wm_ts_split_ents(wm_tok_scratch *sc, const wm_piece *p, wm_tmatch *m, size_t n, wm_split_behavior b,
                           wm_tpieces *dst, wm_error *err) {
    /* rewrite m into (range, remove) entries per behaviour, in place */
    size_t w = 0;
    switch (b) {
    case WM_SPLIT_ISOLATED:
        for (size_t i = 0; i < n; i++) m[i].m = 0;
        w = n;
        break;
    case WM_SPLIT_REMOVED: w = n; break;
    case WM_SPLIT_CONTIGUOUS: {
        int prev = 0;
        for (size_t i = 0; i < n; i++) {
            int cur = m[i].m;
            if (cur == prev && w) m[w - 1].e = m[i].e;
            else m[w++] = (wm_tmatch){m[i].s, m[i].e, 0};
            prev = cur;
        }
        break;
    }
    case WM_SPLIT_MERGED_PREV: {
        int prev = 0;
        for (size_t i = 0; i < n; i++) {
            int cur = m[i].m;
            if (cur && !prev && w) m[w - 1].e = m[i].e;
            else m[w++] = (wm_tmatch){m[i].s, m[i].e, 0};
            prev = cur;
        }
        break;
    }
    case WM_SPLIT_MERGED_NEXT: {
        /* fold from the right, then the result is in reverse order */
        int prev = 0;
        size_t r = n;
        for (size_t ii = n; ii-- > 0;) {
            int cur = m[ii].m;
            wm_tmatch x = m[ii];
            if (cur && !prev && r < n) m[r].s = x.s;
            else m[--r] = (wm_tmatch){x.s, x.e, 0};
            prev = cur;
        }
        memmove(m, m + r, (n - r) * sizeof *m);
        w = n - r;
        break;
    }
    }
    for (size_t i = 0; i < w; i++) {
        if (m[i].m || m[i].e <= m[i].s) continue;
        if (!wm_tpieces_push(dst, wm_ts_slice(sc, p, m[i].s, m[i].e)))
            return wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory");
    }
    return WM_OK;
}

wm_status wm_ts_replace_char(wm_tok_scratch *sc, wm_piece *p, uint32_t cp, const char *content, size_t n,
                             wm_error *err) {
    char enc[4];
    size_t k = wm_u8_put(cp, enc), hits = 0;
    const char *t = sc->txt + p->off;
    for (size_t i = 0; i + k <= p->len; i += wm_u8_len((uint8_t)t[i])) hits += !memcmp(t + i, enc, k);
    if (!hits) return WM_OK;
    if (n > k && !wm_ts_reserve(sc, (size_t)p->len + hits * (n - k))) return wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory");
    if (n <= k && !wm_ts_reserve(sc, p->len)) return wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory");
    size_t base = p->off, start = sc->tn, last = 0;
    for (size_t i = 0; i < p->len;) {
        size_t adv = wm_u8_len((uint8_t)sc->txt[base + i]);
        if (adv == k && !memcmp(sc->txt + base + i, enc, k)) {
            copy_tail(sc, base + last, base + i);
            wm_tspan al = wm_ts_al(sc, base + i + k - 1);
            memcpy(sc->txt + sc->tn, content, n);
            for (size_t b = 0; b < n; b++) WM_TS_ALW(sc, sc->tn + b) = al;
            sc->tn += n;
            last = i + k;
        }
        i += adv;
    }
    copy_tail(sc, base + last, base + p->len);
    p->off = (uint32_t)start;
    p->len = (uint32_t)(sc->tn - start);
    return WM_OK;
}
