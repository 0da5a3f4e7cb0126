/*
 * tokenizer_added.c - the added vocabulary (tokenizers' AddedVocabulary):
 * ids of added tokens, their normalized forms, and splitting a text around
 * them with leftmost-longest matching plus the single_word / lstrip /
 * rstrip rules. Tokens with normalized = false are matched in the raw text,
 * the others in each normalized piece.
 */
#include <stdlib.h>
#include <string.h>

#include "hf/tokenizer_impl.h"

#define OOM(err) wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory (added tokens)")

static int32_t model_token_to_id(const wm_tokenizer *t, const char *s, size_t n) {
    return wm_tmap_get(&t->model.v.map, s, n);
}

static int same_props(const wm_tadded *a, const wm_tadded *b) {
    return a->len == b->len && !memcmp(a->content, b->content, a->len) && a->single_word == b->single_word &&
           a->lstrip == b->lstrip && a->rstrip == b->rstrip && a->normalized == b->normalized && a->special == b->special;
}

wm_status wm_tadded_add_batch(wm_tokenizer *t, const wm_tadded *toks, size_t n, wm_error *err) {
    size_t vs = t->model.vocab_size;
    int64_t next_id = (int64_t)vs;
    if (t->added_by_id.n) {
        int64_t mx = -1;
        for (size_t i = 0; i < t->n_added; i++)
            if (t->added[i].id > mx) mx = t->added[i].id;
        next_id = (mx >= (int64_t)vs || vs == 0) ? mx + 1 : (int64_t)vs;
    }
    for (size_t i = 0; i < n; i++) {
        const wm_tadded *tk = &toks[i];
        if (!tk->len) continue;
        int32_t have = wm_tmap_get(&t->added_map, tk->content, tk->len);
        uint64_t idx;
        if (have >= 0 && wm_u64map_get(&t->added_by_id, (uint64_t)have, &idx) && same_props(&t->added[idx], tk))
            continue;
        int32_t id = have >= 0 ? have : model_token_to_id(t, tk->content, tk->len);
        if (id < 0) {
            if (next_id > INT32_MAX)
                return wm_err(err, WM_ERR_INPUT, "%s: added_tokens: too many ids (past 2^31-1)", t->name);
            id = (int32_t)next_id++;
        }
        if (wm_tmap_put(&t->added_map, tk->content, tk->len, id) < 0) return OOM(err);
        if (tk->special && wm_tmap_put(&t->special_set, tk->content, tk->len, id) < 0) return OOM(err);
        if (!wm_tgrow(&t->added, &t->added_cap, t->n_added + 1, sizeof *t->added)) return OOM(err);
        t->added[t->n_added] = *tk;
        t->added[t->n_added].id = id;
        t->added[t->n_added].norm = NULL;
        if (!wm_u64map_put(&t->added_by_id, (uint64_t)id, t->n_added)) return OOM(err);
        t->n_added++;
    }
    return WM_OK;
}

wm_status wm_tadded_finish(wm_tokenizer *t, wm_error *err) {
    wm_ttrie_free(&t->trie_raw);
    wm_ttrie_free(&t->trie_norm);
    wm_tok_scratch *sc = NULL;
    wm_status st = WM_OK;
    for (size_t i = 0; i < t->n_added; i++) {
        wm_tadded *a = &t->added[i];
        uint64_t cur;
        if (!wm_u64map_get(&t->added_by_id, (uint64_t)a->id, &cur) || cur != i) continue; /* superseded */
        const char *pat = a->content;
        size_t plen = a->len;
        if (a->normalized && t->norm) {
            if (!sc && !(sc = wm_tscratch_new())) return OOM(err);
            wm_piece p;
            if ((st = wm_ts_begin(sc, a->content, a->len, 0, &p, err))) goto done;
            if ((st = wm_tnorm_apply(t->norm, sc, &p, err))) goto done;
            if (p.len != a->len || memcmp(sc->txt + p.off, a->content, a->len)) {
                char *s = wm_arena_strndup(&t->arena, sc->txt + p.off, p.len);
                if (!s) {
                    st = OOM(err);
                    goto done;
                }
                a->norm = s;
                a->norm_len = p.len;
                pat = s;
                plen = p.len;
            }
        }
        wm_ttrie *tr = a->normalized ? &t->trie_norm : &t->trie_raw;
        if (plen && !wm_ttrie_insert(tr, pat, plen, (int32_t)i)) {
            st = OOM(err);
            goto done;
        }
    }
done:
    wm_tscratch_free(sc);
    return st;
}

/* Rust regex \w at the last character of s[0..n) / the first of s[0..n). */
static int ends_with_word(const char *s, size_t n) {
    if (!n) return 0;
    size_t i = n - 1;
    while (i > 0 && ((uint8_t)s[i] & 0xC0) == 0x80) i--;
    size_t adv;
    return wm_uc_is_regex_word(wm_u8_get(s + i, &adv));
}
static int starts_with_word(const char *s, size_t n) {
    size_t adv;
    return n && wm_uc_is_regex_word(wm_u8_get(s, &adv));
}

/* Start of the whitespace run that ends s[0..n) (\s*$, leftmost). */
static size_t space_leftmost_at_end(const char *s, size_t n) {
    size_t i = n;
    while (i > 0) {
        size_t j = i - 1;
        while (j > 0 && ((uint8_t)s[j] & 0xC0) == 0x80) j--;
        size_t adv;
        if (!wm_uc_is_white(wm_u8_get(s + j, &adv))) break;
        i = j;
    }
    return i;
}
/* Length of the whitespace that starts s[0..n) (^\s*). */
static size_t space_rightmost_at_start(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t adv;
        if (!wm_uc_is_white(wm_u8_get(s + i, &adv))) break;
        i += adv;
    }
    return i;
}

static wm_status push(wm_tok_scratch *sc, const wm_piece *p, uint32_t s, uint32_t e, int32_t added, wm_tsink fn,
                      void *ctx, wm_error *err) {
    if (e <= s) return WM_OK; /* empty splits are dropped */
    wm_piece q = wm_ts_slice(sc, p, s, e);
    q.added = added;
    return fn(ctx, sc, &q, err);
}

wm_status wm_tadded_split(const wm_tokenizer *t, wm_tok_scratch *sc, const wm_piece *p, int normalized, wm_tsink fn,
                          void *ctx, wm_error *err) {
    const wm_ttrie *tr = normalized ? &t->trie_norm : &t->trie_raw;
    size_t n = p->len;
    if (!tr->n_nodes || !tr->edges.n || !n) return push(sc, p, 0, (uint32_t)n, -1, fn, ctx, err);
    size_t start_offset = 0, pos = 0;
    /* the trie walks from every position are charged to a budget linear in the text: a long added token
     * whose prefix repeats through a long text made them quadratic */
    uint64_t budget = WM_TADDED_BUDGET_BASE + (uint64_t)WM_TADDED_BUDGET_PER_BYTE * n;
    wm_status st;
    while (pos < n) {
        const char *s = sc->txt + p->off; /* re-read: pushing pieces does not move the text */
        if (!tr->first[(uint8_t)s[pos]]) {
            pos++;
            continue;
        }
        /* longest match starting at pos */
        uint64_t node = 0;
        size_t end = 0;
        int32_t val = -1;
        for (size_t j = pos; j < n; j++) {
            int64_t c = wm_ttrie_next(tr, node, (uint8_t)s[j]);
            if (c < 0) break;
            if (!budget--)
                return wm_err(err, WM_ERR_INPUT,
                              "tokenizer: matching the added tokens passed its budget of %u steps per byte over a "
                              "text of %zu bytes (an added token's prefix repeats through the text; "
                              "WM_TADDED_BUDGET_PER_BYTE in src/hf/tokenizer_impl.h)",
                              (unsigned)WM_TADDED_BUDGET_PER_BYTE, n);
            node = (uint64_t)c;
            if (tr->val[node] >= 0) {
                end = j + 1;
                val = tr->val[node];
            }
        }
        if (val < 0) {
            pos++;
            continue;
        }
        size_t mstart = pos, mstop = end;
        pos = end; /* the matcher resumes after the match, whatever is done with it */
        const wm_tadded *a = &t->added[val];
        if (a->single_word) {
            int start_space = mstart == 0 || !ends_with_word(s, mstart);
            int stop_space = mstop == n || !starts_with_word(s + mstop, n - mstop);
            if (!start_space || !stop_space) continue;
        }
        if (a->lstrip) {
            size_t ns = space_leftmost_at_end(s, mstart);
            mstart = ns > start_offset ? ns : start_offset;
        }
        if (a->rstrip) mstop += space_rightmost_at_start(s + mstop, n - mstop);
        if (start_offset < mstart && (st = push(sc, p, (uint32_t)start_offset, (uint32_t)mstart, -1, fn, ctx, err)))
            return st;
        if ((st = push(sc, p, (uint32_t)mstart, (uint32_t)mstop, val, fn, ctx, err))) return st;
        start_offset = mstop;
    }
    if (start_offset != n) return push(sc, p, (uint32_t)start_offset, (uint32_t)n, -1, fn, ctx, err);
    return WM_OK;
}
