/*
 * tokenizer_unigram.c - Unigram (Viterbi over token scores, as
 * Unigram::encode_optimized, with unknown characters fused into one piece),
 * WordPiece (greedy longest match first with the continuing-subword prefix)
 * and WordLevel. Prefix searches walk the model's byte trie.
 */
#include <stdio.h>
#include <string.h>

#include "hf/tokenizer_impl.h"

#define OOM(err) wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory (model)")


static int put_tok(wm_tok_scratch *sc, size_t *k, int32_t id, uint32_t s, uint32_t e, uint8_t src) {
    if (!wm_ttok_reserve(sc, *k + 1)) return 0;
    sc->tids[*k] = id;
    sc->ts[*k] = s;
    sc->te[*k] = e;
    sc->tsrc[*k] = src;
    (*k)++;
    return 1;
}

/* The prefix searches from every position of a word walk the vocabulary trie as far as the text follows a
 * token: a vocabulary entry whose prefix repeats through a long word made that quadratic. */
static wm_status over_budget(const char *model, size_t n, wm_error *err) {
    return wm_err(err, WM_ERR_INPUT,
                  "tokenizer: %s's vocabulary searches passed their budget of %u steps per byte over a word of %zu "
                  "bytes (a vocabulary entry's prefix repeats through the word; WM_TMODEL_BUDGET_PER_BYTE in "
                  "src/hf/tokenizer_impl.h)",
                  model, (unsigned)WM_TMODEL_BUDGET_PER_BYTE, n);
}

/* Emits the token for piece w[s..e) (Unigram::tokenize: lookup, byte fallback, unk). */
static wm_status unigram_emit(const wm_tmodel *m, wm_tok_scratch *sc, const char *w, uint32_t s, uint32_t e,
                              size_t *k, wm_error *err) {
    int32_t id = wm_tmap_get(&m->v.map, w + s, e - s); /* found: its vocabulary string is these bytes */
    if (id >= 0) return put_tok(sc, k, id, s, e, 0) ? WM_OK : OOM(err);
    if (m->byte_fallback) {
        int all = 1;
        for (uint32_t b = s; b < e && all; b++) all = m->byte_ids[(uint8_t)w[b]] >= 0;
        if (all) {
            for (uint32_t b = s; b < e; b++)
                if (!put_tok(sc, k, m->byte_ids[(uint8_t)w[b]], s, e, 0)) return OOM(err);
            return WM_OK;
        }
    }
    if (m->unk_id < 0) return wm_err(err, WM_ERR_INPUT, "tokenizer: Unigram met an unknown token but has no unk_id");
    return put_tok(sc, k, m->unk_id, s, e, 1) ? WM_OK : OOM(err);
}

/* The same with seg_ids (Marian): a piece of the segmenting model is its vocabulary id or unk; an unknown span
 * is its bytes' <0xNN> pieces (byte_fallback; each its id or unk), else its text's id or unk. */
static wm_status seg_emit(const wm_tmodel *m, wm_tok_scratch *sc, const char *w, uint32_t s, uint32_t e, int unknown,
                          size_t *k, wm_error *err) {
    if (m->unk_id < 0) return wm_err(err, WM_ERR_INPUT, "tokenizer: the vocabulary has no unk token");
    if (!unknown) {
        int32_t id = wm_tmap_get(&m->v.map, w + s, e - s);
        return put_tok(sc, k, id >= 0 ? id : m->unk_id, s, e, id < 0) ? WM_OK : OOM(err);
    }
    if (m->byte_fallback) {
        for (uint32_t b = s; b < e; b++) {
            int32_t id = m->byte_ids[(uint8_t)w[b]];
            if (!put_tok(sc, k, id >= 0 ? id : m->unk_id, s, e, 0)) return OOM(err);
        }
        return WM_OK;
    }
    int32_t id = wm_tmap_get(&m->v.map, w + s, e - s); /* SentencePiece names an unknown span by its text */
    return put_tok(sc, k, id >= 0 ? id : m->unk_id, s, e, id < 0) ? WM_OK : OOM(err);
}

wm_status wm_tunigram_tokenize(const wm_tmodel *m, wm_tok_scratch *sc, const char *w, size_t n, size_t *ntok,
                               wm_error *err) {
    *ntok = 0;
    if (!n) return WM_OK;
    size_t c1 = sc->u_cap, c2 = sc->u_cap, c3 = sc->u_cap;
    if (!wm_tgrow(&sc->ubest, &c1, n + 1, sizeof *sc->ubest) || !wm_tgrow(&sc->uid, &c2, n + 1, sizeof *sc->uid) ||
        !wm_tgrow(&sc->ufrom, &c3, n + 1, sizeof *sc->ufrom))
        return OOM(err);
    sc->u_cap = c1 < c2 ? (c1 < c3 ? c1 : c3) : (c2 < c3 ? c2 : c3);
    double *best = sc->ubest;
    int32_t *id = sc->uid, *from = sc->ufrom;
    for (size_t i = 0; i <= n; i++) {
        best[i] = 0.0;
        from[i] = -1;
        id[i] = 0;
    }
    double unk_score = m->f32_lattice ? (double)((float)m->min_score - 10.0f) : m->min_score - 10.0;
    int32_t seg_unk = m->seg_ids ? m->seg_unk : m->unk_id; /* the unknown piece among the trie's entries */
    uint64_t budget = WM_TMODEL_BUDGET_BASE + (uint64_t)WM_TMODEL_BUDGET_PER_BYTE * n;
    for (size_t st = 0; st < n;) {
        double here = best[st];
        size_t mblen = wm_u8_len((uint8_t)w[st]);
        int single = 0;
        uint64_t node = 0;
        for (size_t j = st; j < n; j++) {
            int64_t c = wm_ttrie_next(&m->trie, node, (uint8_t)w[j]);
            if (c < 0) break;
            if (!budget--) return over_budget("Unigram", n, err);
            node = (uint64_t)c;
            int32_t tid = m->trie.val[node];
            if (tid < 0) continue;
            size_t key = j + 1;
            double cand = m->scores[tid] + here; /* SentencePiece: a double sum compared with, then kept as, float */
            if (from[key] < 0 || cand > best[key]) {
                best[key] = m->f32_lattice ? (double)(float)cand : cand;
                from[key] = (int32_t)st;
                id[key] = tid;
            }
            if (key - st == mblen) single = 1;
        }
        if (!single) {
            size_t key = st + mblen;
            double cand = m->f32_lattice ? (double)((float)unk_score + (float)here) : unk_score + here;
            if (from[key] < 0 || cand > best[key]) {
                if (m->unk_id < 0)
                    return wm_err(err, WM_ERR_INPUT, "tokenizer: Unigram met an unknown token but has no unk_id");
                best[key] = cand;
                from[key] = (int32_t)st;
                id[key] = seg_unk;
            }
        }
        st += mblen;
    }
    /* backtrack into piece boundaries (stored in ufrom reused as a list of ends, reversed) */
    size_t k = 0;
    uint32_t unk_end = 0;
    int in_unk = 0;
    /* walk from the end; collect (start, end) pairs, fusing consecutive unk pieces */
    size_t np = 0;
    for (size_t end = n; end > 0;) {
        size_t st = (size_t)from[end];
        int is_unk = m->unk_id >= 0 && id[end] == seg_unk;
        if (is_unk) {
            if (!in_unk) unk_end = (uint32_t)end;
            in_unk = 1;
        } else {
            if (in_unk) {
                if (!put_tok(sc, &np, -2, (uint32_t)end, unk_end, 1)) return OOM(err);
                in_unk = 0;
            }
            if (!put_tok(sc, &np, -1, (uint32_t)st, (uint32_t)end, 1)) return OOM(err);
        }
        end = st;
    }
    if (in_unk && !put_tok(sc, &np, -2, 0, unk_end, 1)) return OOM(err);
    /* the pieces are in reverse order at [0, np): move them behind, then emit in order */
    if (!wm_ttok_reserve(sc, 2 * np + 1)) return OOM(err);
    for (size_t i = 0; i < np; i++) {
        sc->ts[np + i] = sc->ts[np - 1 - i];
        sc->te[np + i] = sc->te[np - 1 - i];
        sc->tids[np + i] = sc->tids[np - 1 - i]; /* -2: an unknown span, -1: a piece of the model */
    }
    /* emit may write at most (bytes of piece) tokens per piece, so emit into a fresh area after 2*np */
    size_t out = 2 * np;
    for (size_t i = 0; i < np; i++) {
        uint32_t s = sc->ts[np + i], e = sc->te[np + i];
        wm_status st = m->seg_ids ? seg_emit(m, sc, w, s, e, sc->tids[np + i] == -2, &out, err)
                                  : unigram_emit(m, sc, w, s, e, &out, err);
        if (st) return st;
    }
    k = out - 2 * np;
    memmove(sc->tids, sc->tids + 2 * np, k * sizeof *sc->tids);
    memmove(sc->ts, sc->ts + 2 * np, k * sizeof *sc->ts);
    memmove(sc->te, sc->te + 2 * np, k * sizeof *sc->te);
    memmove(sc->tsrc, sc->tsrc + 2 * np, k * sizeof *sc->tsrc);
    *ntok = k;
    return WM_OK;
}

wm_status wm_twordpiece_tokenize(const wm_tmodel *m, wm_tok_scratch *sc, const char *w, size_t n, size_t *ntok,
                                 wm_error *err) {
    *ntok = 0;
    size_t k = 0;
    int bad = wm_u8_count(w, n) > m->max_chars;
    uint64_t budget = WM_TMODEL_BUDGET_BASE + (uint64_t)WM_TMODEL_BUDGET_PER_BYTE * n;
    /* the trie node after the continuing-subword prefix */
    int64_t pnode = 0;
    for (size_t i = 0; i < m->prefix_len && pnode >= 0; i++)
        pnode = wm_ttrie_next(&m->trie, (uint64_t)pnode, (uint8_t)m->prefix[i]);
    for (size_t start = 0; start < n && !bad;) {
        int64_t node = start ? pnode : 0;
        size_t best_end = 0;
        int32_t best_id = -1;
        for (size_t j = start; j < n && node >= 0; j++) {
            if (!budget--) return over_budget("WordPiece", n, err);
            node = wm_ttrie_next(&m->trie, (uint64_t)node, (uint8_t)w[j]);
            if (node >= 0 && m->trie.val[node] >= 0) {
                best_end = j + 1;
                best_id = m->trie.val[node];
            }
        }
        if (best_id < 0) {
            bad = 1;
            break;
        }
        if (!put_tok(sc, &k, best_id, (uint32_t)start, (uint32_t)best_end, 0)) return OOM(err);
        start = best_end;
    }
    if (bad) {
        if (m->unk_id < 0)
            return wm_err(err, WM_ERR_INPUT, "tokenizer: WordPiece unk_token '%.*s' is not in the vocabulary",
                          (int)(m->unk_len > 64 ? 64 : m->unk_len), m->unk ? m->unk : "");
        k = 0;
        if (!put_tok(sc, &k, m->unk_id, 0, (uint32_t)n, 0)) return OOM(err);
    }
    *ntok = k;
    return WM_OK;
}

wm_status wm_twordlevel_tokenize(const wm_tmodel *m, wm_tok_scratch *sc, const char *w, size_t n, size_t *ntok,
                                 wm_error *err) {
    size_t k = 0;
    int32_t id = wm_tmap_get(&m->v.map, w, n);
    if (id < 0) id = m->unk_id;
    if (id < 0) return wm_err(err, WM_ERR_INPUT, "tokenizer: WordLevel has no unk_token in its vocabulary");
    if (!put_tok(sc, &k, id, 0, (uint32_t)n, 0)) return OOM(err);
    *ntok = 1;
    return WM_OK;
}
