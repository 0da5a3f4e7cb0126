/*
 * tokenizer_post.c - after the model: truncation (truncate_encodings),
 * the post-processors (BertProcessing, RobertaProcessing, ByteLevel offset
 * trimming, TemplateProcessing, Sequence), merging into the result and
 * padding. The post-processor works on a list of segments, each a
 * sequence's tokens or a run of special tokens, as tokenizers' list of
 * Encodings.
 */
#include <stdlib.h>
#include <string.h>

#include "hf/tokenizer_impl.h"

/* The error of a failed append: a list at the segment bound, else out of memory. */
static wm_status seg_fail(size_t n, wm_error *err) {
    if (n >= WM_TOK_MAX_TEMPLATE_TOKENS)
        return wm_err(err, WM_ERR_INPUT,
                      "tokenizer: the post-processor makes more than %u pieces of one encoding (the limit "
                      "WM_TOK_MAX_TEMPLATE_TOKENS in src/hf/tokenizer_impl.h)",
                      (unsigned)WM_TOK_MAX_TEMPLATE_TOKENS);
    return wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory (post-process)");
}

#define OOM(err) wm_err(err, WM_ERR_NOMEM, "tokenizer: out of memory (post-process)")

/* Appends a string to a pool as [uint32 length][bytes]: its ref, or UINT32_MAX on OOM / past 4 GiB. */
static uint32_t pool_put(char **pool, size_t *n, size_t *cap, const char *s, size_t len) {
    uint32_t l32 = (uint32_t)len;
    if (len > UINT32_MAX - 8 || *n > UINT32_MAX - 8 - len || !wm_tgrow(pool, cap, *n + 4 + len, 1)) return UINT32_MAX;
    uint32_t ref = (uint32_t)*n;
    memcpy(*pool + *n, &l32, 4);
    if (len) memcpy(*pool + *n + 4, s, len);
    *n += 4 + len;
    return ref;
}

static int own_push(wm_tok_own **own, size_t *n, size_t *cap, uint32_t i, uint32_t ref) {
    if (!wm_tgrow(own, cap, *n + 1, sizeof **own)) return 0;
    (*own)[(*n)++] = (wm_tok_own){i, ref};
    return 1;
}

int wm_tseq_push(wm_tseq *q, int32_t id, const char *s, size_t n, int vocab, wm_tok_offset off, int32_t word) {
    if (q->n >= q->cap) {
        size_t c = q->cap, c2 = q->cap, c3 = q->cap;
        if (q->n >= UINT32_MAX || !wm_tgrow(&q->ids, &c, q->n + 1, sizeof *q->ids) ||
            !wm_tgrow(&q->words, &c2, q->n + 1, sizeof *q->words) || !wm_tgrow(&q->offs, &c3, q->n + 1, sizeof *q->offs))
            return 0;
        q->cap = c < c2 ? (c < c3 ? c : c3) : (c2 < c3 ? c2 : c3);
    }
    if (!vocab) {
        uint32_t ref = pool_put(&q->str, &q->str_n, &q->str_cap, s, n);
        if (ref == UINT32_MAX || !own_push(&q->own, &q->n_own, &q->own_cap, (uint32_t)q->n, ref)) return 0;
    }
    size_t i = q->n++;
    q->ids[i] = id;
    q->words[i] = word;
    q->offs[i] = off;
    return 1;
}

void wm_tseq_reset(wm_tseq *q) { q->n = q->str_n = q->n_own = 0; }

void wm_tseq_free(wm_tseq *q) {
    free(q->ids);
    free(q->words);
    free(q->offs);
    free(q->own);
    free(q->str);
    memset(q, 0, sizeof *q);
}

/* Keeps max_len tokens (the first ones, or the last ones when left). */
static void seq_truncate(wm_tseq *q, size_t max_len, int left) {
    if (max_len >= q->n) return;
    size_t d = left ? q->n - max_len : 0, w = 0;
    if (left) {
        memmove(q->ids, q->ids + d, max_len * sizeof *q->ids);
        memmove(q->words, q->words + d, max_len * sizeof *q->words);
        memmove(q->offs, q->offs + d, max_len * sizeof *q->offs);
    }
    for (size_t k = 0; k < q->n_own; k++) /* the strings of dropped tokens stay in the pool, unused */
        if (q->own[k].i >= d && q->own[k].i < d + max_len) q->own[w++] = (wm_tok_own){q->own[k].i - (uint32_t)d, q->own[k].ref};
    q->n_own = w;
    q->n = max_len;
}

/* truncate_encodings */
static wm_status truncate(const wm_tok_truncation *tr, size_t max_length, wm_tseq *a, wm_tseq *b, wm_error *err) {
    if (max_length == 0) {
        seq_truncate(a, 0, tr->left);
        if (b) seq_truncate(b, 0, tr->left);
        return WM_OK;
    }
    size_t total = a->n + (b ? b->n : 0);
    if (total <= max_length) return WM_OK;
    size_t to_remove = total - max_length;
    if (tr->strategy == WM_TOK_TRUNC_LONGEST_FIRST) {
        if (!b) {
            if (tr->stride >= total - to_remove)
                return wm_err(err, WM_ERR_USAGE, "tokenizer: truncation stride %zu must be < max_length %zu", tr->stride,
                              total - to_remove);
            seq_truncate(a, total - to_remove, tr->left);
            return WM_OK;
        }
        size_t n1 = a->n, n2 = b->n;
        int swap = n1 > n2;
        if (swap) {
            size_t x = n1;
            n1 = n2;
            n2 = x;
        }
        if (n1 > max_length) n2 = n1;
        else n2 = n1 > max_length - n1 ? n1 : max_length - n1;
        if (n1 + n2 > max_length) {
            n1 = max_length / 2;
            n2 = n1 + max_length % 2;
        }
        if (swap) {
            size_t x = n1;
            n1 = n2;
            n2 = x;
        }
        if ((n1 < a->n && tr->stride >= n1) || (n2 < b->n && tr->stride >= n2))
            return wm_err(err, WM_ERR_USAGE, "tokenizer: truncation stride %zu is too large for max_length %zu",
                          tr->stride, max_length);
        seq_truncate(a, n1, tr->left);
        seq_truncate(b, n2, tr->left);
        return WM_OK;
    }
    wm_tseq *target = tr->strategy == WM_TOK_TRUNC_ONLY_FIRST ? a : b;
    if (!target) return wm_err(err, WM_ERR_USAGE, "tokenizer: truncation only_second needs a pair");
    if (target->n <= to_remove)
        return wm_err(err, WM_ERR_INPUT,
                      "tokenizer: sequence to truncate is too short to respect max_length %zu", max_length);
    if (tr->stride >= target->n - to_remove)
        return wm_err(err, WM_ERR_USAGE, "tokenizer: truncation stride %zu is too large", tr->stride);
    seq_truncate(target, target->n - to_remove, tr->left);
    return WM_OK;
}

size_t wm_tpost_added_count(const wm_tpost *pp, int is_pair) {
    if (!pp) return 0;
    size_t n = 0;
    switch (pp->kind) {
    case WM_TPP_BERT: return is_pair ? 3 : 2;
    case WM_TPP_ROBERTA: return is_pair ? 4 : 2;
    case WM_TPP_BYTELEVEL: return 0;
    case WM_TPP_TEMPLATE: {
        const wm_ttpl_piece *ps = is_pair ? pp->pair : pp->single;
        size_t np = is_pair ? pp->n_pair : pp->n_single;
        for (size_t i = 0; i < np; i++)
            if (ps[i].seq < 0) n += pp->specials[ps[i].special].n;
        return n;
    }
    case WM_TPP_SEQUENCE:
        for (size_t i = 0; i < pp->n_kids; i++) n += wm_tpost_added_count(pp->kids[i], is_pair);
        return n;
    }
    return 0;
}

/* The string of token i of q (its own string, own[*k] when that is token i: k walks own in order, or the
 * vocabulary's). */
static const char *seq_tok(const wm_tokenizer *t, const wm_tseq *q, size_t i, size_t *k, size_t *len) {
    while (*k < q->n_own && q->own[*k].i < i) (*k)++;
    if (*k < q->n_own && q->own[*k].i == i) return wm_tstr_at(q->str, q->own[*k].ref, len);
    const char *s = wm_tvocab_token(&t->model.v, q->ids[i], len);
    if (!s) *len = 0;
    return s ? s : "";
}

/*
 * byte_level::process_offsets over one sequence. tokenizers (Python) trims
 * character offsets: "start + leading" and "end - trailing" count
 * characters, which here step over characters of the sequence's text.
 */
static void trim_offsets(const wm_tokenizer *t, wm_tseq *q, const char *text, size_t tlen, int add_prefix_space) {
    size_t k = 0;
    for (size_t i = 0; i < q->n; i++) {
        size_t n, lead = 0, run = 0;
        const char *s = seq_tok(t, q, i, &k, &n);
        int in_lead = 1;
        for (size_t b = 0; b < n;) {
            size_t adv;
            uint32_t cp = wm_u8_get(s + b, &adv);
            b += adv;
            int sp = cp == 0x120 || wm_uc_is_white(cp);
            if (in_lead && sp) lead++;
            else in_lead = 0;
            run = sp ? run + 1 : 0;
        }
        size_t trail = run;
        if (!lead && !trail) continue;
        wm_tok_offset *o = &q->offs[i];
        if (lead) {
            int first = i == 0 || o->start == 0;
            if (first && add_prefix_space && lead == 1) lead = 0;
            size_t p = o->start;
            for (size_t c = 0; c < lead && p < o->end && p < tlen; c++) p += wm_u8_len((uint8_t)text[p]);
            o->start = (uint32_t)(p < o->end ? p : o->end);
        }
        if (trail) {
            size_t p = o->end, c = 0;
            for (; c < trail && p > 0 && p <= tlen; c++) {
                p--;
                while (p > 0 && ((uint8_t)text[p] & 0xC0) == 0x80) p--;
            }
            if (c == trail) o->end = (uint32_t)(p > o->start ? p : o->start);
        }
    }
}

/* Appends a segment to list (l = 0 / 1); 0 on OOM or past WM_TOK_MAX_TEMPLATE_TOKENS segments (a Sequence of
 * Bert / Roberta processors multiplies them: the caller reports which). */
static int seg_push(wm_tok_scratch *sc, size_t *n, int l, wm_tseg g) {
    size_t half = sc->segcap / 2;
    if (*n >= WM_TOK_MAX_TEMPLATE_TOKENS) return 0;
    if (*n >= half) {
        size_t nh = half ? half * 2 : 16;
        wm_tseg *ns = malloc(2 * nh * sizeof *ns);
        if (!ns) return 0;
        if (sc->segs) {
            memcpy(ns, sc->segs, half * sizeof *ns);
            memcpy(ns + nh, sc->segs + half, half * sizeof *ns);
        }
        free(sc->segs);
        sc->segs = ns;
        sc->segcap = 2 * nh;
        half = nh;
    }
    sc->segs[l * half + (*n)++] = g;
    return 1;
}

static wm_status apply(const wm_tokenizer *t, const wm_tpost *pp, wm_tok_scratch *sc, int *l, size_t *n, int add_special,
                       wm_error *err) {
#define SEG(i) (sc->segs[(size_t)*l * (sc->segcap / 2) + (i)])
    size_t m = 0;
    int o = 1 - *l;
    switch (pp->kind) {
    case WM_TPP_SEQUENCE:
        for (size_t i = 0; i < pp->n_kids; i++) {
            wm_status st = apply(t, pp->kids[i], sc, l, n, add_special, err);
            if (st) return st;
        }
        return WM_OK;
    case WM_TPP_BYTELEVEL:
        if (pp->trim_offsets)
            for (size_t i = 0; i < *n; i++)
                if (SEG(i).seq >= 0)
                    trim_offsets(t, &sc->seq[SEG(i).seq], sc->text[SEG(i).seq], sc->text_len[SEG(i).seq],
                                 pp->add_prefix_space);
        return WM_OK;
    case WM_TPP_ROBERTA:
        if (pp->trim_offsets)
            for (size_t i = 0; i < *n; i++)
                if (SEG(i).seq >= 0)
                    trim_offsets(t, &sc->seq[SEG(i).seq], sc->text[SEG(i).seq], sc->text_len[SEG(i).seq],
                                 pp->add_prefix_space);
        for (size_t i = 0; i < *n; i++) SEG(i).type = 0;
        if (!add_special) return WM_OK;
        for (size_t i = 0; i < *n; i++) {
            wm_tseg g = SEG(i);
            if (!seg_push(sc, &m, o, (wm_tseg){-1, i ? &pp->sep : &pp->cls, 0}) || !seg_push(sc, &m, o, g) ||
                !seg_push(sc, &m, o, (wm_tseg){-1, &pp->sep, 0}))
                return seg_fail(m, err);
        }
        break;
    case WM_TPP_BERT:
        if (!add_special) return WM_OK;
        for (size_t i = 0; i < *n; i++) {
            wm_tseg g = SEG(i);
            if (!i && !seg_push(sc, &m, o, (wm_tseg){-1, &pp->cls, 0})) return seg_fail(m, err);
            if (!seg_push(sc, &m, o, g) || !seg_push(sc, &m, o, (wm_tseg){-1, &pp->sep, i ? 1 : 0})) return seg_fail(m, err);
        }
        break;
    case WM_TPP_TEMPLATE: {
        if (*n != 1 && *n != 2)
            return wm_err(err, WM_ERR_UNSUPPORTED, "tokenizer: TemplateProcessing applied to %zu encodings", *n);
        const wm_ttpl_piece *ps = *n == 2 ? pp->pair : pp->single;
        size_t np = *n == 2 ? pp->n_pair : pp->n_single;
        for (size_t i = 0; i < np; i++) {
            if (ps[i].seq >= 0) {
                if ((size_t)ps[i].seq >= *n)
                    return wm_err(err, WM_ERR_INPUT, "tokenizer: TemplateProcessing uses $B for a single sequence");
                wm_tseg g = SEG((size_t)ps[i].seq);
                g.type = ps[i].type_id;
                if (!seg_push(sc, &m, o, g)) return seg_fail(m, err);
            } else if (add_special && !seg_push(sc, &m, o, (wm_tseg){-1, &pp->specials[ps[i].special], ps[i].type_id}))
                return seg_fail(m, err);
        }
        break;
    }
    }
    *l = o;
    *n = m;
    return WM_OK;
#undef SEG
}

/* Capacity for n tokens in every output array (ids, word_ids, offsets: cap2; the others: cap). */
static int out_reserve(wm_encoding *e, size_t n) {
    if (n > UINT32_MAX) return 0;
    if (n > e->cap2) {
        size_t c = e->cap2, c2 = e->cap2, c3 = e->cap2;
        if (!wm_tgrow(&e->ids, &c, n, sizeof *e->ids) || !wm_tgrow(&e->word_ids, &c2, n, sizeof *e->word_ids) ||
            !wm_tgrow(&e->offsets, &c3, n, sizeof *e->offsets))
            return 0;
        e->cap2 = c < c2 ? (c < c3 ? c : c3) : (c2 < c3 ? c2 : c3);
    }
    if (n > e->cap) {
        size_t c = e->cap, c2 = e->cap, c3 = e->cap;
        if (!wm_tgrow(&e->type_ids, &c, n, sizeof *e->type_ids) ||
            !wm_tgrow(&e->attention_mask, &c2, n, sizeof *e->attention_mask) ||
            !wm_tgrow(&e->special_mask, &c3, n, sizeof *e->special_mask))
            return 0;
        e->cap = c < c2 ? (c < c3 ? c : c3) : (c2 < c3 ? c2 : c3);
    }
    return 1;
}

/* The string ref of a token whose string is s[0, n): UINT32_MAX - 1 when it is the vocabulary's string of id
 * (nothing stored), else its place in strbuf (UINT32_MAX on OOM). */
#define VOCAB_REF (UINT32_MAX - 1)
static uint32_t out_string(const wm_tokenizer *t, wm_encoding *e, int32_t id, const char *s, size_t n) {
    size_t vn;
    const char *v = wm_tvocab_token(&t->model.v, id, &vn);
    if (v && vn == n && !memcmp(v, s, n)) return VOCAB_REF;
    return pool_put(&e->strbuf, &e->strbuf_n, &e->strbuf_cap, s, n);
}

/* Token i of the output (capacity reserved); ref: out_string's. */
static int out_set(wm_encoding *e, size_t i, int32_t id, int32_t type, int32_t word, uint8_t special, wm_tok_offset off,
                   uint32_t ref) {
    e->ids[i] = id;
    e->type_ids[i] = type;
    e->word_ids[i] = word;
    e->attention_mask[i] = 1;
    e->special_mask[i] = special;
    e->offsets[i] = off;
    return ref == VOCAB_REF || (ref != UINT32_MAX && own_push(&e->own, &e->n_own, &e->own_cap, (uint32_t)i, ref));
}

/* The special tokens of segment g at i, i + 1, ... of the output. */
static int out_specials(const wm_tokenizer *t, wm_encoding *e, size_t i, const wm_tseg *g) {
    for (size_t k = 0; k < g->sp->n; k++)
        if (!out_set(e, i + k, g->sp->ids[k], g->type >= 0 ? g->type : 0, -1, 1, (wm_tok_offset){0, 0},
                     out_string(t, e, g->sp->ids[k], g->sp->toks[k], g->sp->tok_lens[k])))
            return 0;
    return 1;
}

/* Moves own[n1, n1 + n2) in front of own[0, n1) (three reversals: linear, no memory). */
static void own_rotate(wm_tok_own *o, size_t n1, size_t n2) {
    size_t spans[3][2] = {{0, n1}, {n1, n1 + n2}, {0, n1 + n2}};
    for (int r = 0; r < 3; r++)
        for (size_t x = spans[r][0], y = spans[r][1]; x + 1 < y; x++, y--) {
            wm_tok_own tmp = o[x];
            o[x] = o[y - 1];
            o[y - 1] = tmp;
        }
}

wm_status wm_tpost_pad(wm_encoding *e, const wm_tok_padding *pad, size_t len, wm_error *err) {
    if (pad->multiple && len % pad->multiple) len += pad->multiple - len % pad->multiple;
    if (e->n >= len) return WM_OK;
    size_t add = len - e->n, old = e->n;
    if (!out_reserve(e, len)) return OOM(err);
    uint32_t ref = out_string(e->tok, e, pad->pad_id, pad->pad_token, strlen(pad->pad_token));
    if (ref == UINT32_MAX) return OOM(err);
    size_t own0 = e->n_own;
    if (ref != VOCAB_REF) /* one own entry per pad token, all on the one string */
        for (size_t k = 0; k < add; k++)
            if (!own_push(&e->own, &e->n_own, &e->own_cap, (uint32_t)(old + k), ref)) return OOM(err);
    if (pad->left) {
        memmove(e->ids + add, e->ids, old * sizeof *e->ids);
        memmove(e->type_ids + add, e->type_ids, old * sizeof *e->type_ids);
        memmove(e->word_ids + add, e->word_ids, old * sizeof *e->word_ids);
        memmove(e->attention_mask + add, e->attention_mask, old);
        memmove(e->special_mask + add, e->special_mask, old);
        memmove(e->offsets + add, e->offsets, old * sizeof *e->offsets);
        /* own entries: the tokens moved up by add, the pads (appended as old + k) come first as k */
        size_t npad = e->n_own - own0;
        wm_tok_own *o = e->own;
        for (size_t k = 0; k < own0; k++) o[k].i += (uint32_t)add;
        for (size_t k = 0; k < npad; k++) o[own0 + k].i = (uint32_t)k;
        own_rotate(o, own0, npad);
    }
    size_t at = pad->left ? 0 : old;
    for (size_t i = at; i < at + add; i++) {
        e->ids[i] = pad->pad_id;
        e->type_ids[i] = pad->pad_type_id;
        e->word_ids[i] = -1;
        e->attention_mask[i] = 0;
        e->special_mask[i] = 1;
        e->offsets[i] = (wm_tok_offset){0, 0};
    }
    e->n = len;
    return WM_OK;
}

/* The tokens of sequence q at i, i + 1, ... of the output (type: the segment's, or the sequence's). */
static int out_copy_seq(wm_encoding *e, size_t i, const wm_tseq *q, int32_t type) {
    size_t k = 0;
    for (size_t j = 0; j < q->n; j++) {
        uint32_t ref = VOCAB_REF;
        while (k < q->n_own && q->own[k].i < j) k++;
        if (k < q->n_own && q->own[k].i == j) {
            size_t len;
            const char *s = wm_tstr_at(q->str, q->own[k].ref, &len);
            ref = pool_put(&e->strbuf, &e->strbuf_n, &e->strbuf_cap, s, len);
        }
        if (!out_set(e, i + j, q->ids[j], type >= 0 ? type : q->type, q->words[j], 0, q->offs[j], ref)) return 0;
    }
    return 1;
}

/*
 * The one sequence of a single encoding handed over to the output: its ids, words, offsets and strings become
 * the output's (moved up past the special tokens before it), and the output's former arrays go to the
 * sequence for the next encode, so the tokens are never held twice.
 */
static int out_move_seq(const wm_tokenizer *t, wm_encoding *e, wm_tseq *q, const wm_tseg *segs, size_t ns, size_t j) {
    size_t before = 0, after = 0, n = q->n;
    for (size_t g = 0; g < ns; g++)
        if (g != j) *(g < j ? &before : &after) += segs[g].sp->n;
#define SWAP(a, b)                                                                                                     \
    do {                                                                                                               \
        __typeof__(a) tmp_ = a;                                                                                        \
        a = b;                                                                                                         \
        b = tmp_;                                                                                                      \
    } while (0)
    SWAP(e->ids, q->ids);
    SWAP(e->word_ids, q->words);
    SWAP(e->offsets, q->offs);
    SWAP(e->cap2, q->cap);
    SWAP(e->own, q->own);
    SWAP(e->n_own, q->n_own);
    SWAP(e->own_cap, q->own_cap);
    SWAP(e->strbuf, q->str);
    SWAP(e->strbuf_n, q->str_n);
    SWAP(e->strbuf_cap, q->str_cap);
#undef SWAP
    q->n = q->n_own = q->str_n = 0;
    if (!out_reserve(e, before + n + after)) return 0;
    if (before) {
        memmove(e->ids + before, e->ids, n * sizeof *e->ids);
        memmove(e->word_ids + before, e->word_ids, n * sizeof *e->word_ids);
        memmove(e->offsets + before, e->offsets, n * sizeof *e->offsets);
    }
    int32_t type = segs[j].type >= 0 ? segs[j].type : q->type;
    for (size_t i = before; i < before + n; i++) {
        e->type_ids[i] = type;
        e->attention_mask[i] = 1;
        e->special_mask[i] = 0;
    }
    /* the sequence's own entries move up by before; the specials' go around them in order */
    size_t seq_own = e->n_own;
    for (size_t k = 0; k < seq_own; k++) e->own[k].i += (uint32_t)before;
    size_t at = 0;
    for (size_t g = 0; g < j; g++) {
        if (!out_specials(t, e, at, &segs[g])) return 0;
        at += segs[g].sp->n;
    }
    own_rotate(e->own, seq_own, e->n_own - seq_own); /* the specials' were appended after the sequence's */
    at = before + n;
    for (size_t g = j + 1; g < ns; g++) {
        if (!out_specials(t, e, at, &segs[g])) return 0;
        at += segs[g].sp->n;
    }
    e->n = before + n + after;
    return 1;
}

wm_status wm_tpost_finish(const wm_tokenizer *t, wm_tok_scratch *sc, int has_pair, const wm_encode_opts *o,
                          wm_encoding *out, wm_error *err) {
    const wm_tok_truncation *tr = o->use_defaults ? &t->trunc : &o->truncation;
    const wm_tok_padding *pad = o->use_defaults ? &t->pad : &o->padding;
    wm_tseq *a = &sc->seq[0], *b = has_pair ? &sc->seq[1] : NULL;
    wm_status st;
    if (tr->enabled) {
        size_t max_length = tr->max_length, added = o->add_special_tokens ? wm_tpost_added_count(t->post, has_pair) : 0;
        /* tokenizers subtracts in usize: a max_length below the added count wraps (no truncation) */
        if (added <= max_length && (st = truncate(tr, max_length - added, a, b, err))) return st;
    }
    size_t n = 0;
    int l = 0;
    if (!seg_push(sc, &n, 0, (wm_tseg){0, NULL, -1})) return OOM(err);
    if (b && !seg_push(sc, &n, 0, (wm_tseg){1, NULL, -1})) return OOM(err);
    if (t->post && (st = apply(t, t->post, sc, &l, &n, o->add_special_tokens, err))) return st;
    out->tok = t;
    out->n = out->n_own = out->strbuf_n = 0;
    const wm_tseg *segs = sc->segs + (size_t)l * (sc->segcap / 2);
    size_t total = 0, nseq = 0, j = 0;
    for (size_t i = 0; i < n; i++) {
        if (segs[i].seq >= 0) nseq++, j = i;
        total += segs[i].seq >= 0 ? sc->seq[segs[i].seq].n : segs[i].sp->n;
    }
    if (total > UINT32_MAX) return wm_err(err, WM_ERR_INPUT, "tokenizer: an encoding of more than 2^32 tokens");
    if (nseq == 1) {
        if (!out_move_seq(t, out, &sc->seq[segs[j].seq], segs, n, j)) return OOM(err);
    } else {
        if (!out_reserve(out, total)) return OOM(err);
        size_t at = 0;
        for (size_t i = 0; i < n; i++) {
            const wm_tseg *g = &segs[i];
            if (g->seq >= 0 ? !out_copy_seq(out, at, &sc->seq[g->seq], g->type) : !out_specials(t, out, at, g))
                return OOM(err);
            at += g->seq >= 0 ? sc->seq[g->seq].n : g->sp->n;
        }
        out->n = at;
    }
    if (pad->enabled) return wm_tpost_pad(out, pad, pad->length ? pad->length : out->n, err);
    return WM_OK;
}
