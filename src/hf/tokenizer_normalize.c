/*
 * tokenizer_normalize.c - normalizers (NFC/NFD/NFKC/NFKD, Lowercase,
 * StripAccents, Strip, BertNormalizer, Prepend, Replace, Nmt, ByteLevel,
 * Sequence). Each builds the (codepoint, change) ops the Rust code builds and
 * applies them with wm_ts_transform, or leaves the piece alone when nothing
 * would change (same text, same alignments).
 */
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "hf/tokenizer_impl.h"

#define OOM(err) wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory (normalize)")

typedef struct nf_item {
    uint32_t cp;
    int32_t ch;
    uint8_t ccc;
} nf_item;

/* Decomposition + canonical ordering + (optional) recomposition, as the
 * unicode-normalization-alignments iterators, into sc->ops. */
static wm_status nf_ops(wm_tok_scratch *sc, const wm_piece *p, int compat, int compose, wm_error *err) {
    size_t n = 0;
    nf_item *d = sc->nf1;
    const char *t = sc->txt + p->off;
    for (size_t i = 0; i < p->len;) {
        size_t adv;
        uint32_t cp = wm_u8_get(t + i, &adv), dec[32];
        i += adv;
        size_t k = wm_uc_decompose(cp, compat, dec);
        if (!wm_tgrow(&sc->nf1, &sc->nf1_cap, n + k, sizeof *d)) goto oom;
        d = sc->nf1;
        for (size_t j = 0; j < k; j++) d[n++] = (nf_item){dec[j], j ? 1 : 0, (uint8_t)wm_uc_ccc(dec[j])};
    }
    /* stable sort of every run of non-starters by combining class */
    for (size_t i = 0; i < n;) {
        if (!d[i].ccc) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < n && d[j].ccc) j++;
        for (size_t a = i + 1; a < j; a++) {
            nf_item x = d[a];
            size_t b = a;
            while (b > i && d[b - 1].ccc > x.ccc) {
                d[b] = d[b - 1];
                b--;
            }
            d[b] = x;
        }
        i = j;
    }
    sc->on = 0;
    if (!compose) {
        for (size_t i = 0; i < n; i++)
            if (!wm_ts_op(sc, d[i].cp, d[i].ch)) goto oom;
        return WM_OK;
    }
    /* recomposition state machine; the blocked marks wait in d[buf0..buf1) (reusing consumed slots) */
    int have = 0, last_ccc = -1;
    nf_item comp = {0, 0, 0};
    size_t nb = 0;
    if (!wm_tgrow(&sc->nf2, &sc->nf2_cap, n + 1, sizeof(nf_item))) goto oom;
    nf_item *buf = sc->nf2;
    for (size_t i = 0; i < n; i++) {
        nf_item c = d[i];
        uint32_t r;
        if (!have) {
            if (c.ccc) {
                if (!wm_ts_op(sc, c.cp, c.ch)) goto oom;
                continue;
            }
            comp = c;
            have = 1;
            continue;
        }
        if (last_ccc < 0) {
            if (wm_uc_compose(comp.cp, c.cp, &r)) {
                comp.cp = r;
                comp.ch = comp.ch + c.ch - 1;
                continue;
            }
            if (!c.ccc) {
                if (!wm_ts_op(sc, comp.cp, comp.ch)) goto oom;
                comp = c;
                continue;
            }
            buf[nb++] = c;
            last_ccc = c.ccc;
            continue;
        }
        if (last_ccc >= c.ccc) {
            if (!c.ccc) {
                if (!wm_ts_op(sc, comp.cp, comp.ch)) goto oom;
                for (size_t b = 0; b < nb; b++)
                    if (!wm_ts_op(sc, buf[b].cp, buf[b].ch)) goto oom;
                nb = 0;
                comp = c;
                last_ccc = -1;
                continue;
            }
            buf[nb++] = c;
            last_ccc = c.ccc;
            continue;
        }
        if (wm_uc_compose(comp.cp, c.cp, &r)) {
            comp.cp = r;
            comp.ch = comp.ch + c.ch - 1;
            continue;
        }
        buf[nb++] = c;
        last_ccc = c.ccc;
    }
    if (have && !wm_ts_op(sc, comp.cp, comp.ch)) goto oom;
    for (size_t b = 0; b < nb; b++)
        if (!wm_ts_op(sc, buf[b].cp, buf[b].ch)) goto oom;
    return WM_OK;
oom:
    return OOM(err);
}

/* The segmented transforms (wm_ts_transform_seg): a segment may start anywhere (any_cut), or before a
 * character that nothing before it composes or reorders with (nf_cut: ASCII and the other inert ones). */
static int any_cut(void *ctx, uint32_t cp) {
    (void)ctx, (void)cp;
    return 1;
}

typedef struct nf_mode {
    int compat, compose;
} nf_mode;

static int nf_cut(void *ctx, uint32_t cp) {
    const nf_mode *m = ctx;
    return cp < 0x80 || wm_uc_nf_inert(cp, m->compat, m->compose);
}

static wm_status nf_seg(void *ctx, wm_tok_scratch *sc, const wm_piece *p, size_t a, size_t b, int *same, size_t *init,
                        wm_error *err) {
    const nf_mode *m = ctx;
    (void)init;
    const char *t = sc->txt + p->off;
    int inert = 1;
    for (size_t i = a; i < b && inert;) {
        if ((uint8_t)t[i] < 0x80) {
            i++;
            continue;
        }
        size_t adv;
        inert = wm_uc_nf_inert(wm_u8_get(t + i, &adv), m->compat, m->compose);
        i += adv;
    }
    if ((*same = inert)) return WM_OK;
    wm_piece seg = {p->off + (uint32_t)a, (uint32_t)(b - a), 0, 0, -1};
    return nf_ops(sc, &seg, m->compat, m->compose, err);
}

static wm_status do_nf(wm_tok_scratch *sc, wm_piece *p, int compat, int compose, wm_error *err) {
    nf_mode m = {compat, compose};
    return wm_ts_transform_seg(sc, p, nf_cut, nf_seg, &m, err);
}

static wm_status lower_seg(void *ctx, wm_tok_scratch *sc, const wm_piece *p, size_t a, size_t b, int *same,
                           size_t *init, wm_error *err) {
    (void)ctx, (void)init;
    const char *t = sc->txt + p->off;
    size_t i = a;
    uint32_t lo[3];
    for (; i < b;) {
        size_t adv;
        uint32_t cp = wm_u8_get(t + i, &adv);
        if (wm_uc_lower(cp, lo) != 1 || lo[0] != cp) break;
        i += adv;
    }
    if ((*same = i == b)) return WM_OK;
    for (i = a; i < b;) {
        size_t adv;
        uint32_t cp = wm_u8_get(t + i, &adv);
        i += adv;
        size_t k = wm_uc_lower(cp, lo);
        for (size_t j = 0; j < k; j++)
            if (!wm_ts_op(sc, lo[j], j > 0)) return OOM(err);
    }
    return WM_OK;
}

static wm_status do_lowercase(wm_tok_scratch *sc, wm_piece *p, wm_error *err) {
    return wm_ts_transform_seg(sc, p, any_cut, lower_seg, NULL, err);
}

typedef int (*keep_fn)(uint32_t cp);
typedef uint32_t (*map_fn)(uint32_t cp);

/* NormalizedString::filter(keep) followed by map(f) (f may be NULL): each kept character's op carries the
 * removed characters after it; a segment starts at a kept character. */
typedef struct fm_mode {
    keep_fn keep;
    map_fn f;
} fm_mode;

static int fm_cut(void *ctx, uint32_t cp) { return ((const fm_mode *)ctx)->keep(cp); }

static wm_status fm_seg(void *ctx, wm_tok_scratch *sc, const wm_piece *p, size_t a, size_t b, int *same, size_t *init,
                        wm_error *err) {
    const fm_mode *m = ctx;
    const char *t = sc->txt + p->off;
    int any = 0;
    for (size_t i = a; i < b && !any;) {
        size_t adv;
        uint32_t cp = wm_u8_get(t + i, &adv);
        any = !m->keep(cp) || (m->f && m->f(cp) != cp);
        i += adv;
    }
    if ((*same = !any)) return WM_OK;
    int32_t removed = 0;
    size_t removed_start = 0;
    int have = 0;
    uint32_t last = 0;
    for (size_t i = a; i < b;) {
        size_t adv;
        uint32_t cp = wm_u8_get(t + i, &adv);
        i += adv;
        if (m->keep(cp)) {
            if (have) {
                if (!wm_ts_op(sc, m->f ? m->f(last) : last, -removed)) return OOM(err);
            } else
                removed_start = (size_t)removed;
            last = cp;
            have = 1;
            removed = 0;
        } else
            removed++;
    }
    if (have && !wm_ts_op(sc, m->f ? m->f(last) : last, -removed)) return OOM(err);
    *init = removed_start;
    if (!have) *init = (size_t)removed; /* nothing kept: the segment's characters all go */
    return WM_OK;
}

static wm_status do_filter_map(wm_tok_scratch *sc, wm_piece *p, keep_fn keep, map_fn f, wm_error *err) {
    fm_mode m = {keep, f};
    return wm_ts_transform_seg(sc, p, fm_cut, fm_seg, &m, err);
}

static int keep_not_mark(uint32_t cp) { return !wm_uc_is_mark(cp); }
static int keep_not_mn(uint32_t cp) { return !wm_uc_is_mn(cp); }
static int keep_bert_clean(uint32_t cp) {
    if (cp == 0 || cp == 0xFFFD) return 0;
    if (cp == '\t' || cp == '\n' || cp == '\r') return 1;
    return !wm_uc_is_other(cp);
}
static uint32_t map_bert_space(uint32_t cp) {
    return (cp == '\t' || cp == '\n' || cp == '\r' || wm_uc_is_white(cp)) ? ' ' : cp;
}
static int keep_nmt(uint32_t c) {
    return !((c >= 1 && c <= 8) || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F || c == 0x8F || c == 0x9F);
}
static uint32_t map_nmt(uint32_t c) {
    if (c == 0x09 || c == 0x0A || c == 0x0C || c == 0x0D || c == 0x1680 || (c >= 0x200B && c <= 0x200F) ||
        c == 0x2028 || c == 0x2029 || c == 0x2581 || c == 0xFEFF || c == 0xFFFD)
        return ' ';
    return c;
}

static wm_status chinese_seg(void *ctx, wm_tok_scratch *sc, const wm_piece *p, size_t a, size_t b, int *same,
                             size_t *init, wm_error *err) {
    (void)ctx, (void)init;
    const char *t = sc->txt + p->off;
    int any = 0;
    for (size_t i = a; i < b && !any;) {
        size_t adv;
        any = wm_uc_is_cjk(wm_u8_get(t + i, &adv));
        i += adv;
    }
    if ((*same = !any)) return WM_OK;
    for (size_t i = a; i < b;) {
        size_t adv;
        uint32_t cp = wm_u8_get(t + i, &adv);
        i += adv;
        if (wm_uc_is_cjk(cp)) {
            if (!wm_ts_op(sc, ' ', 0) || !wm_ts_op(sc, cp, 1) || !wm_ts_op(sc, ' ', 1)) return OOM(err);
        } else if (!wm_ts_op(sc, cp, 0))
            return OOM(err);
    }
    return WM_OK;
}

static wm_status do_chinese(wm_tok_scratch *sc, wm_piece *p, wm_error *err) {
    return wm_ts_transform_seg(sc, p, any_cut, chinese_seg, NULL, err);
}

static wm_status do_strip(wm_tok_scratch *sc, wm_piece *p, int left, int right, wm_error *err) {
    const char *t = sc->txt + p->off;
    size_t count = 0, lead = 0, trail = 0;
    int in_lead = 1;
    for (size_t i = 0; i < p->len;) {
        size_t adv;
        uint32_t cp = wm_u8_get(t + i, &adv);
        i += adv;
        count++;
        if (in_lead && wm_uc_is_white(cp)) lead++;
        else in_lead = 0;
        trail = wm_uc_is_white(cp) ? trail + 1 : 0;
    }
    if (!left) lead = 0;
    if (!right) trail = 0;
    if (lead == count) trail = 0; /* all whitespace: the leading count covers it */
    if (!lead && !trail) return WM_OK;
    sc->on = 0;
    size_t k = 0;
    for (size_t i = 0; i < p->len; k++) {
        size_t adv;
        uint32_t cp = wm_u8_get(t + i, &adv);
        i += adv;
        if (k < lead || k >= count - trail) continue;
        if (!wm_ts_op(sc, cp, 0)) return OOM(err);
    }
    return wm_ts_transform(sc, p, lead, err);
}

/* The ByteLevel transform: every byte becomes its printable byte-level character. */
static wm_status bytelevel_seg(void *ctx, wm_tok_scratch *sc, const wm_piece *p, size_t a, size_t b, int *same,
                               size_t *init, wm_error *err) {
    (void)ctx, (void)init, (void)same;
    const char *t = sc->txt + p->off;
    for (size_t i = a; i < b;) {
        size_t n = wm_u8_len((uint8_t)t[i]);
        for (size_t j = 0; j < n; j++)
            if (!wm_ts_op(sc, wm_bytelevel_cp[(uint8_t)t[i + j]], j > 0)) return OOM(err);
        i += n;
    }
    return WM_OK;
}

wm_status wm_ts_bytelevel(wm_tok_scratch *sc, wm_piece *p, wm_error *err) {
    if (!p->len) return WM_OK;
    return wm_ts_transform_seg(sc, p, any_cut, bytelevel_seg, NULL, err);
}

/* ------------------------------------------------------------ Precompiled */

/*
 * The SentencePiece character map: a double-array trie over UTF-8 bytes
 * whose leaves index NUL-terminated replacements. transform() is the
 * replacement of the shortest prefix of chunk that has one (spm_precompiled
 * takes the first hit), or NULL. Out-of-range units count as no match.
 */
static const char *pc_search(const wm_tnorm *n, const char *chunk, size_t len, size_t *out_len, size_t *used) {
    const uint32_t *a = n->trie;
    size_t N = n->trie_n, pos = 0;
    const char *best = NULL;
    if (!N) return NULL;
#define PC_OFFSET(u) ((size_t)((u) >> 10) << (((u) & (1u << 9)) >> 6))
#define PC_LABEL(u) ((u) & ((1u << 31) | 0xFFu))
    pos ^= PC_OFFSET(a[0]);
    for (size_t i = 0; i < len; i++) {
        uint8_t c = (uint8_t)chunk[i];
        if (!c) break;
        pos ^= c;
        if (pos >= N) return best;
        uint32_t u = a[pos];
        if (PC_LABEL(u) != c) return best;
        pos ^= PC_OFFSET(u);
        if ((u >> 8) & 1) {
            if (pos >= N) return best;
            size_t idx = a[pos] & ((1u << 31) - 1), end = idx;
            if (idx > n->norm_len) return best;
            while (end < n->norm_len && n->norm_blob[end]) end++;
            if (idx < n->norm_len && ((uint8_t)n->norm_blob[idx] & 0xC0) == 0x80) return best;
            *out_len = end - idx;
            best = n->norm_blob + idx;
            if (!used) return best;
            *used = i + 1;
        }
    }
    return best;
#undef PC_OFFSET
#undef PC_LABEL
}

static const char *pc_transform(const wm_tnorm *n, const char *chunk, size_t len, size_t *out_len) {
    return pc_search(n, chunk, len, out_len, NULL);
}

/* precompiled.rs replace(): ops for new replacing old (char counts oc -> new chars). */
static int pc_replace(wm_tok_scratch *sc, size_t oc, const char *nw, size_t nl) {
    size_t nc = 0;
    for (size_t i = 0; i < nl;) {
        size_t adv;
        uint32_t cp = wm_u8_get(nw + i, &adv);
        if (!wm_ts_op(sc, cp, 0)) return 0;
        i += adv;
        nc++;
    }
    if (nc > oc) {
        for (size_t k = 0; k < nc - oc; k++) sc->ops_ch[sc->on - 1 - k] = 1;
    } else if (nc < oc && sc->on) {
        sc->ops_ch[sc->on - 1] -= (int32_t)(oc - nc);
    }
    return 1;
}

/* SentencePiece's own rule (spm_longest): the longest prefix with a replacement is replaced, one character kept
 * where none has one; no grapheme clusters. */
static wm_status do_precompiled_spm(const wm_tnorm *n, wm_tok_scratch *sc, wm_piece *p, wm_error *err) {
    const char *t = sc->txt + p->off;
    sc->on = 0;
    int modified = 0;
    for (size_t i = 0; i < p->len;) {
        size_t nl = 0, used = 0, adv;
        const char *nw = pc_search(n, t + i, p->len - i, &nl, &used);
        if (nw && used && (i + used == p->len || ((uint8_t)t[i + used] & 0xC0) != 0x80)) {
            modified = 1;
            if (!pc_replace(sc, wm_u8_count(t + i, used), nw, nl)) return OOM(err);
            i += used;
            continue;
        }
        uint32_t cp = wm_u8_get(t + i, &adv);
        if (!wm_ts_op(sc, cp, 0)) return OOM(err);
        i += adv;
    }
    if (!modified) {
        sc->on = 0;
        return WM_OK;
    }
    return wm_ts_transform(sc, p, 0, err);
}

static wm_status do_precompiled(const wm_tnorm *n, wm_tok_scratch *sc, wm_piece *p, wm_error *err) {
    const char *t = sc->txt + p->off;
    sc->on = 0;
    int modified = 0;
    utf8proc_int32_t state = 0;
    size_t gs = 0; /* start of the current grapheme */
    while (gs < p->len) {
        /* the extended grapheme cluster starting at gs */
        size_t ge = gs, adv;
        uint32_t prev = wm_u8_get(t + ge, &adv);
        ge += adv;
        while (ge < p->len) {
            uint32_t cp = wm_u8_get(t + ge, &adv);
            if (utf8proc_grapheme_break_stateful((utf8proc_int32_t)prev, (utf8proc_int32_t)cp, &state)) break;
            prev = cp;
            ge += adv;
        }
        state = 0;
        size_t nl;
        const char *nw;
        if (ge - gs < 6 && (nw = pc_transform(n, t + gs, ge - gs, &nl))) {
            modified = 1;
            if (!pc_replace(sc, wm_u8_count(t + gs, ge - gs), nw, nl)) return OOM(err);
        } else
            for (size_t i = gs; i < ge; i += adv) {
                uint32_t cp = wm_u8_get(t + i, &adv);
                if ((nw = pc_transform(n, t + i, adv, &nl))) {
                    modified = 1;
                    if (!pc_replace(sc, 1, nw, nl)) return OOM(err);
                } else if (!wm_ts_op(sc, cp, 0))
                    return OOM(err);
            }
        gs = ge;
    }
    if (!modified) {
        sc->on = 0;
        return WM_OK;
    }
    return wm_ts_transform(sc, p, 0, err);
}

wm_status wm_tnorm_apply(const wm_tnorm *n, wm_tok_scratch *sc, wm_piece *p, wm_error *err) {
    wm_status st = WM_OK;
    switch (n->kind) {
    case WM_TN_SEQUENCE: {
        size_t mark = sc->tn; /* copies made from here on are this Sequence's own */
        for (size_t i = 0; i < n->n_kids && !st; i++) {
            wm_piece old = *p;
            st = wm_tnorm_apply(n->kids[i], sc, p, err);
            if (!st && old.off >= mark && p->off == old.off + old.len && sc->tn == (size_t)p->off + p->len) {
                /* the step copied the piece right after the previous copy, which is dead: move it down */
                memmove(sc->txt + old.off, sc->txt + p->off, p->len);
                memmove(&WM_TS_ALW(sc, old.off), &WM_TS_ALW(sc, p->off), (size_t)p->len * sizeof *sc->al);
                p->off = old.off;
                sc->tn = (size_t)p->off + p->len;
            }
        }
        return st;
    }
    case WM_TN_NFD: return do_nf(sc, p, 0, 0, err);
    case WM_TN_NFKD: return do_nf(sc, p, 1, 0, err);
    case WM_TN_NFC: return do_nf(sc, p, 0, 1, err);
    case WM_TN_NFKC: return do_nf(sc, p, 1, 1, err);
    case WM_TN_LOWERCASE: return do_lowercase(sc, p, err);
    case WM_TN_STRIP_ACCENTS: return do_filter_map(sc, p, keep_not_mark, NULL, err);
    case WM_TN_STRIP: return do_strip(sc, p, n->left, n->right, err);
    case WM_TN_NMT: return do_filter_map(sc, p, keep_nmt, map_nmt, err);
    case WM_TN_BYTELEVEL: return wm_ts_bytelevel(sc, p, err);
    case WM_TN_PRECOMPILED: return n->spm_longest ? do_precompiled_spm(n, sc, p, err) : do_precompiled(n, sc, p, err);
    case WM_TN_PREPEND: return p->len ? wm_ts_prepend(sc, p, n->str, n->str_len, err) : WM_OK;
    case WM_TN_REPLACE:
        st = wm_ts_find_regex(sc, p, &n->re, err);
        return st ? st : wm_ts_replace(sc, p, n->str, n->str_len, err);
    case WM_TN_BERT:
        if (n->clean_text && (st = do_filter_map(sc, p, keep_bert_clean, map_bert_space, err))) return st;
        if (n->handle_chinese && (st = do_chinese(sc, p, err))) return st;
        if (n->strip_accents) {
            if ((st = do_nf(sc, p, 0, 0, err))) return st;
            if ((st = do_filter_map(sc, p, keep_not_mn, NULL, err))) return st;
        }
        if (n->lowercase) return do_lowercase(sc, p, err);
        return WM_OK;
    }
    return WM_OK;
}
