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
    return wm_tgrow(&sc->txt, &sc->tcap, need, 1) && wm_tgrow(&sc->al, &sc->acap, need, sizeof *sc->al);
}

int wm_ts_push_piece(wm_tok_scratch *sc, int k, wm_piece p) {
    if (!wm_tgrow(&sc->pc[k], &sc->pcap[k], sc->pn[k] + 1, sizeof(wm_piece))) return 0;
    sc->pc[k][sc->pn[k]++] = p;
    return 1;
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
    memmove(sc->al + sc->tn, sc->al + a, n * sizeof *sc->al);
    sc->tn += n;
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
    wm_tspan at_start = {p->shift, p->shift};
    for (size_t i = 0; i < sc->on; i++) {
        int32_t ch = sc->ops_ch[i];
        wm_tspan al;
        if (ch > 0) al = rc - base < 1 ? at_start : sc->al[rc - 1];
        else if (rc < base + p->len) al = sc->al[rc];
        else al = (wm_tspan){p->shift + p->olen, p->shift + p->olen};
        if (ch <= 0 && rc < rend) rc += wm_u8_len((uint8_t)sc->txt[rc]);
        for (int32_t k = 0; ch < 0 && k < -ch && rc < rend; k++) rc += wm_u8_len((uint8_t)sc->txt[rc]);
        size_t w = wm_u8_put(sc->ops_cp[i], sc->txt + sc->tn);
        for (size_t b = 0; b < w; b++) sc->al[sc->tn + b] = al;
        sc->tn += w;
    }
    copy_tail(sc, base + ne, base + p->len);
    p->off = (uint32_t)start;
    p->len = (uint32_t)(sc->tn - start);
    return WM_OK;
}

wm_status wm_ts_transform(wm_tok_scratch *sc, wm_piece *p, size_t initial_offset, wm_error *err) {
    /* n_range = convert_offsets(Original(0..len_original)) */
    size_t ns = 0, ne = 0;
    if (p->olen) {
        long s = -1, e = -1;
        for (size_t i = 0; i < p->len; i++) {
            wm_tspan a = sc->al[p->off + i];
            if ((int64_t)a.e - (int64_t)p->shift > (int64_t)p->olen) break;
            if (s < 0 && a.s >= p->shift && a.s != a.e) s = (long)i;
            e = (long)i + 1;
        }
        if (s >= 0 && e >= 0) ns = (size_t)s, ne = (size_t)e;
        else if (s >= 0) ns = ne = (size_t)s;
        else if (e >= 0) ns = ne = (size_t)e;
        else {
            sc->on = 0;
            return WM_OK;
        }
    }
    wm_status st = transform_range(sc, p, ns, ne, initial_offset, err);
    sc->on = 0;
    return st;
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
        wm_tspan al = e < 1 ? at_start : sc->al[base + e - 1];
        memcpy(sc->txt + sc->tn, content, n);
        for (size_t b = 0; b < n; b++) sc->al[sc->tn + b] = al;
        sc->tn += n;
        last = e;
    }
    copy_tail(sc, base + last, base + p->len);
    p->off = (uint32_t)start;
    p->len = (uint32_t)(sc->tn - start);
    return WM_OK;
}

static int push_match(wm_tok_scratch *sc, uint32_t s, uint32_t e, int m) {
    if (!wm_tgrow(&sc->mt, &sc->mcap, sc->mn + 1, sizeof *sc->mt)) return 0;
    sc->mt[sc->mn++] = (wm_tmatch){s, e, m};
    return 1;
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

wm_status wm_ts_find_regex(wm_tok_scratch *sc, const wm_piece *p, const wm_tregex *re, wm_error *err) {
    sc->mn = 0;
    if (!p->len) return push_match(sc, 0, 0, 0) ? WM_OK : wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory");
    const PCRE2_SPTR subj = (PCRE2_SPTR)(sc->txt + p->off);
    size_t len = p->len, prev = 0, last_end = 0;
    uint64_t wbudget = WM_TREGEX_BUDGET_BASE + (uint64_t)WM_TREGEX_BUDGET_PER_BYTE * len;
    uint64_t lbudget = WM_TREGEX_MATCH_LIMIT + (uint64_t)WM_TREGEX_BUDGET_PER_BYTE * len;
    long last_match_end = -1;
    while (last_end <= len) {
        int rc = match_bounded(sc, re, subj, len, last_end, &wbudget, &lbudget);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc == WM_TREGEX_OVER_BUDGET)
            return wm_err(err, WM_ERR_INPUT,
                          "tokenizer: regex work passed its budget of %u steps per byte over a text of %zu bytes "
                          "(stopped at byte %zu): the pattern rescans or backtracks too much for this text "
                          "(WM_TREGEX_BUDGET_PER_BYTE in src/hf/tokenizer_impl.h)",
                          (unsigned)WM_TREGEX_BUDGET_PER_BYTE, len, last_end);
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return wm_err(err, WM_ERR_INPUT, "tokenizer: regex match failed at byte %zu: %s%s", last_end,
                          (const char *)msg,
                          rc == PCRE2_ERROR_MATCHLIMIT ? " (WM_TREGEX_MATCH_LIMIT steps for one match)" : "");
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(sc->md);
        size_t s = ov[0], e = ov[1];
        if (e < s) e = s; /* \K can report end < start */
        if (e == s && last_match_end == (long)e) {
            last_end += last_end < len ? wm_u8_len((uint8_t)sc->txt[p->off + last_end]) : 1;
            continue;
        }
        last_end = e;
        last_match_end = (long)e;
        if (prev != s && !push_match(sc, (uint32_t)prev, (uint32_t)s, 0)) goto oom;
        if (!push_match(sc, (uint32_t)s, (uint32_t)e, 1)) goto oom;
        prev = e;
    }
    if (prev != len && !push_match(sc, (uint32_t)prev, (uint32_t)len, 0)) goto oom;
    return WM_OK;
oom:
    return wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory");
}

wm_status wm_ts_find_chars(wm_tok_scratch *sc, const wm_piece *p, wm_tcharpred pred, const void *ctx, wm_error *err) {
    sc->mn = 0;
    if (!p->len) return push_match(sc, 0, 0, 0) ? WM_OK : wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory");
    const char *t = sc->txt + p->off;
    uint32_t last_offset = 0, last_seen = 0;
    for (uint32_t b = 0; b < p->len;) {
        size_t adv;
        uint32_t cp = wm_u8_get(t + b, &adv);
        last_seen = b + (uint32_t)adv;
        if (pred(cp, ctx)) {
            if (last_offset < b && !push_match(sc, last_offset, b, 0)) goto oom;
            if (!push_match(sc, b, b + (uint32_t)adv, 1)) goto oom;
            last_offset = b + (uint32_t)adv;
        }
        b += (uint32_t)adv;
    }
    if (last_seen > last_offset && !push_match(sc, last_offset, last_seen, 0)) goto oom;
    return WM_OK;
oom:
    return wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory");
}

void wm_ts_invert(wm_tok_scratch *sc) {
    for (size_t i = 0; i < sc->mn; i++) sc->mt[i].m = !sc->mt[i].m;
}

wm_piece wm_ts_slice(const wm_tok_scratch *sc, const wm_piece *p, uint32_t s, uint32_t e) {
    wm_piece q = {p->off + s, e - s, p->shift, 0, -1};
    if (e > s) {
        uint32_t a = sc->al[p->off + s].s, b = sc->al[p->off + e - 1].e;
        q.shift = a;
        q.olen = b > a ? b - a : 0;
    }
    return q;
}

wm_status wm_ts_split(wm_tok_scratch *sc, const wm_piece *p, wm_split_behavior b, int k, wm_error *err) {
    /* rewrite sc->mt into (range, remove) entries per behaviour, in place */
    size_t n = sc->mn, w = 0;
    wm_tmatch *m = sc->mt;
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
        if (!wm_ts_push_piece(sc, k, wm_ts_slice(sc, p, m[i].s, m[i].e)))
            return wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory");
    }
    return WM_OK;
}
