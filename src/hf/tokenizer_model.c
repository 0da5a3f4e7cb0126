/*
 * tokenizer_model.c - the "model" object of tokenizer.json: BPE (vocab +
 * merges, either "a b" strings or [a, b] pairs), Unigram ([token, score]
 * list, unk_id), WordPiece and WordLevel (vocab maps). Ids must be integers
 * in [0, 2^31); every merge's parts and result must be in the vocabulary.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf/tokenizer_impl.h"

#define NOMEM(t, err) wm_err(err, WM_ERR_NOMEM, "%s: out of memory (model)", (t)->name)

void wm_tmodel_free(wm_tmodel *m) {
    wm_tvocab_free(&m->v);
    wm_u64map_free(&m->merges);
    wm_ttrie_free(&m->trie);
    free(m->scores);
    free(m->small_ids);
    m->scores = NULL;
    m->small_ids = NULL;
}

static wm_status load_vocab_map(wm_tokenizer *t, const cJSON *v, const char *path, wm_error *err) {
    if (!cJSON_IsObject(v)) return wm_err(err, WM_ERR_INPUT, "%s: %s.vocab: expected an object", t->name, path);
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
        const char *k = e->string ? e->string : "";
        size_t n = strlen(k);
        char what[200];
        snprintf(what, sizeof what, "%s.vocab[\"%.60s\"]", path, k);
        if (!wm_u8_valid(k, n)) return wm_err(err, WM_ERR_INPUT, "%s: %s.vocab: a token is not valid UTF-8", t->name, path);
        int32_t id;
        wm_status st = wm_tjson_id(t, e, what, &id, err);
        if (st) return st;
        if (wm_tmap_put(&t->model.v.map, k, n, id) < 0) return NOMEM(t, err);
    }
    return WM_OK;
}

static int32_t vget(const wm_tmodel *m, const char *s, size_t n) { return wm_tmap_get(&m->v.map, s, n); }

wm_status wm_tmodel_finish_common(wm_tokenizer *t, wm_error *err) {
    wm_tmodel *m = &t->model;
    if (m->kind != WM_TM_UNIGRAM) {
        wm_status st = wm_tvocab_build_reverse(&m->v, t->name, err);
        if (st) return st;
        m->vocab_size = m->v.map.n;
    }
    for (int b = 0; b < 256; b++) {
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        m->byte_ids[b] = vget(m, hex, 6);
    }
    for (int c = 0; c < 128; c++) {
        char ch = (char)c;
        m->ascii_ids[c] = vget(m, &ch, 1);
    }
    if (!m->small_ids && !(m->small_ids = malloc(0x800 * sizeof *m->small_ids))) return NOMEM(t, err);
    for (uint32_t c = 0; c < 0x800; c++) {
        char u[4];
        size_t k = wm_u8_put(c, u);
        m->small_ids[c] = vget(m, u, k);
    }
    if (m->unk && m->kind != WM_TM_UNIGRAM) m->unk_id = vget(m, m->unk, m->unk_len);
    return WM_OK;
}

wm_status wm_tbpe_finish(wm_tokenizer *t, const char *const *ma, const size_t *mal, const char *const *mb,
                         const size_t *mbl, size_t n_merges, wm_error *err) {
    wm_tmodel *m = &t->model;
    char *buf = NULL;
    size_t cap = 0;
    wm_status st = WM_OK;
    for (size_t i = 0; i < n_merges; i++) {
        int32_t a = vget(m, ma[i], mal[i]), b = vget(m, mb[i], mbl[i]);
        if (a < 0 || b < 0) {
            size_t bl = a < 0 ? mal[i] : mbl[i];
            st = wm_err(err, WM_ERR_INPUT, "%s: model.merges[%zu]: '%.*s' is not in the vocabulary", t->name, i,
                        (int)(bl > 60 ? 60 : bl), a < 0 ? ma[i] : mb[i]);
            break;
        }
        size_t pl = m->prefix ? m->prefix_len : 0;
        if (mbl[i] < pl) {
            st = wm_err(err, WM_ERR_INPUT, "%s: model.merges[%zu]: '%.*s' is shorter than the subword prefix", t->name,
                        i, (int)mbl[i], mb[i]);
            break;
        }
        size_t k = mal[i] + mbl[i] - pl;
        if (!wm_tgrow(&buf, &cap, k + 1, 1)) {
            st = NOMEM(t, err);
            break;
        }
        memcpy(buf, ma[i], mal[i]);
        memcpy(buf + mal[i], mb[i] + pl, mbl[i] - pl);
        buf[k] = 0;
        int32_t nid = vget(m, buf, k);
        if (nid < 0) {
            st = wm_err(err, WM_ERR_INPUT, "%s: model.merges[%zu]: the merged token '%.*s' is not in the vocabulary",
                        t->name, i, (int)(k > 60 ? 60 : k), wm_u8_valid(buf, k) ? buf : "(invalid UTF-8)");
            break;
        }
        if (i > UINT32_MAX) {
            st = wm_err(err, WM_ERR_INPUT, "%s: model.merges: too many merges", t->name);
            break;
        }
        uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
        if (!wm_u64map_put(&m->merges, key, ((uint64_t)i << 32) | (uint32_t)nid)) {
            st = NOMEM(t, err);
            break;
        }
    }
    free(buf);
    return st;
}

static wm_status opt_str(wm_tokenizer *t, const cJSON *j, const char *key, const char **s, size_t *n, wm_error *err) {
    return wm_tjson_str(t, j, key, "model", 0, s, n, err);
}

static wm_status load_bpe(wm_tokenizer *t, const cJSON *j, wm_error *err) {
    wm_tmodel *m = &t->model;
    wm_status st;
    const cJSON *dr = cJSON_GetObjectItemCaseSensitive(j, "dropout");
    if (dr && !cJSON_IsNull(dr) && (!cJSON_IsNumber(dr) || !(dr->valuedouble >= 0.0 && dr->valuedouble <= 1.0)))
        return wm_err(err, WM_ERR_INPUT, "%s: model.dropout: expected null or a number in [0, 1]", t->name);
    if ((st = opt_str(t, j, "unk_token", &m->unk, &m->unk_len, err)) ||
        (st = opt_str(t, j, "continuing_subword_prefix", &m->prefix, &m->prefix_len, err)) ||
        (st = opt_str(t, j, "end_of_word_suffix", &m->suffix, &m->suffix_len, err)) ||
        (st = wm_tjson_bool(t, j, "fuse_unk", "model", 0, &m->fuse_unk, err)) ||
        (st = wm_tjson_bool(t, j, "byte_fallback", "model", 0, &m->byte_fallback, err)) ||
        (st = wm_tjson_bool(t, j, "ignore_merges", "model", 0, &m->ignore_merges, err)))
        return st;
    if ((st = load_vocab_map(t, cJSON_GetObjectItemCaseSensitive(j, "vocab"), "model", err))) return st;
    if ((st = wm_tmodel_finish_common(t, err))) return st;
    const cJSON *mg = cJSON_GetObjectItemCaseSensitive(j, "merges");
    if (!cJSON_IsArray(mg)) return wm_err(err, WM_ERR_INPUT, "%s: model.merges: expected an array", t->name);
    size_t n = (size_t)cJSON_GetArraySize(mg), i = 0;
    const char **ma = calloc(n + 1, sizeof *ma), **mb = calloc(n + 1, sizeof *mb);
    size_t *mal = calloc(n + 1, sizeof *mal), *mbl = calloc(n + 1, sizeof *mbl);
    if (!ma || !mb || !mal || !mbl) {
        st = NOMEM(t, err);
        goto done;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, mg) {
        if (cJSON_IsString(e)) {
            const char *s = e->valuestring, *sp = strchr(s, ' ');
            if (!sp || strchr(sp + 1, ' ')) {
                st = wm_err(err, WM_ERR_INPUT, "%s: model.merges[%zu]: expected \"a b\" (two parts)", t->name, i);
                goto done;
            }
            ma[i] = s;
            mal[i] = (size_t)(sp - s);
            mb[i] = sp + 1;
            mbl[i] = strlen(sp + 1);
        } else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsString(cJSON_GetArrayItem(e, 0)) &&
                   cJSON_IsString(cJSON_GetArrayItem(e, 1))) {
            ma[i] = cJSON_GetArrayItem(e, 0)->valuestring;
            mb[i] = cJSON_GetArrayItem(e, 1)->valuestring;
            mal[i] = strlen(ma[i]);
            mbl[i] = strlen(mb[i]);
        } else {
            st = wm_err(err, WM_ERR_INPUT, "%s: model.merges[%zu]: expected \"a b\" or [\"a\", \"b\"]", t->name, i);
            goto done;
        }
        i++;
    }
    st = wm_tbpe_finish(t, ma, mal, mb, mbl, i, err);
done:
    free(ma);
    free(mb);
    free(mal);
    free(mbl);
    return st;
}

static wm_status load_unigram(wm_tokenizer *t, const cJSON *j, wm_error *err) {
    wm_tmodel *m = &t->model;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "vocab");
    if (!cJSON_IsArray(v)) return wm_err(err, WM_ERR_INPUT, "%s: model.vocab: expected a list of [token, score]", t->name);
    size_t n = (size_t)cJSON_GetArraySize(v);
    if (n > INT32_MAX) return wm_err(err, WM_ERR_INPUT, "%s: model.vocab: too many entries", t->name);
    int64_t unk;
    wm_status st;
    if ((st = wm_tjson_int(t, j, "unk_id", "model", -1, 0, INT32_MAX, &unk, err)) ||
        (st = wm_tjson_bool(t, j, "byte_fallback", "model", 0, &m->byte_fallback, err)))
        return st;
    if (unk >= 0 && !n) return wm_err(err, WM_ERR_INPUT, "%s: model.vocab: empty but unk_id is set", t->name);
    if (unk >= (int64_t)n) return wm_err(err, WM_ERR_INPUT, "%s: model.unk_id: %lld is past the vocabulary", t->name, (long long)unk);
    m->unk_id = (int32_t)unk;
    m->scores = malloc((n ? n : 1) * sizeof *m->scores);
    m->v.r = malloc((n ? n : 1) * sizeof *m->v.r);
    if (!m->scores || !m->v.r) return NOMEM(t, err);
    m->min_score = INFINITY;
    size_t i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
        const cJSON *s = cJSON_GetArrayItem(e, 0), *sc = cJSON_GetArrayItem(e, 1);
        if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) != 2 || !cJSON_IsString(s) || !cJSON_IsNumber(sc) ||
            !isfinite(sc->valuedouble))
            return wm_err(err, WM_ERR_INPUT, "%s: model.vocab[%zu]: expected [token, finite score]", t->name, i);
        size_t len = strlen(s->valuestring);
        if (!wm_u8_valid(s->valuestring, len))
            return wm_err(err, WM_ERR_INPUT, "%s: model.vocab[%zu]: not valid UTF-8", t->name, i);
        long k = wm_tmap_put(&m->v.map, s->valuestring, len, (int32_t)i);
        if (k < 0 || !wm_ttrie_insert(&m->trie, s->valuestring, len, (int32_t)i)) return NOMEM(t, err);
        m->v.r[i] = (wm_tstr){m->v.map.ent[k].off, (uint32_t)len};
        m->scores[i] = sc->valuedouble;
        if (sc->valuedouble < m->min_score) m->min_score = sc->valuedouble;
        i++;
    }
    /* the exact doubles tokenizers computes from the same text (see wm_tjson_serde_scores) */
    if (n && wm_tjson_serde_scores(t, cJSON_GetArrayItem(cJSON_GetArrayItem(v, 0), 1), n, m->scores)) {
        m->min_score = INFINITY;
        for (size_t k = 0; k < n; k++)
            if (m->scores[k] < m->min_score) m->min_score = m->scores[k];
    }
    m->n_entries = n;
    m->vocab_size = n;
    m->v.max_id = (int32_t)n - 1;
    m->v.rpool = m->v.map.pool;
    return wm_tmodel_finish_common(t, err);
}

static wm_status load_wordpiece(wm_tokenizer *t, const cJSON *j, int wordlevel, wm_error *err) {
    wm_tmodel *m = &t->model;
    wm_status st;
    int64_t mx;
    if ((st = opt_str(t, j, "unk_token", &m->unk, &m->unk_len, err))) return st;
    if (!m->unk) m->unk = wordlevel ? "<unk>" : "[UNK]", m->unk_len = strlen(m->unk);
    if (!wordlevel) {
        if ((st = opt_str(t, j, "continuing_subword_prefix", &m->prefix, &m->prefix_len, err)) ||
            (st = wm_tjson_int(t, j, "max_input_chars_per_word", "model", 100, 0, INT64_MAX / 2, &mx, err)))
            return st;
        if (!m->prefix) m->prefix = "##", m->prefix_len = 2;
        m->max_chars = (size_t)mx;
    }
    if ((st = load_vocab_map(t, cJSON_GetObjectItemCaseSensitive(j, "vocab"), "model", err))) return st;
    if (!wordlevel)
        for (size_t i = 0; i < m->v.map.n; i++)
            if (!wm_ttrie_insert(&m->trie, wm_tmap_key(&m->v.map, i), m->v.map.ent[i].len, m->v.map.ent[i].val))
                return NOMEM(t, err);
    return wm_tmodel_finish_common(t, err);
}

wm_status wm_tjson_model(wm_tokenizer *t, const cJSON *j, wm_error *err) {
    const char *ty = wm_tjson_type(j);
    if (!ty) { /* untagged: guess as serde does, by the fields */
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "vocab");
        if (cJSON_GetObjectItemCaseSensitive(j, "merges")) ty = "BPE";
        else if (cJSON_IsArray(v)) ty = "Unigram";
        else if (cJSON_GetObjectItemCaseSensitive(j, "continuing_subword_prefix") ||
                 cJSON_GetObjectItemCaseSensitive(j, "max_input_chars_per_word"))
            ty = "WordPiece";
        else ty = "WordLevel";
    }
    if (!strcmp(ty, "BPE")) {
        t->model.kind = WM_TM_BPE;
        return load_bpe(t, j, err);
    }
    if (!strcmp(ty, "Unigram")) {
        t->model.kind = WM_TM_UNIGRAM;
        return load_unigram(t, j, err);
    }
    if (!strcmp(ty, "WordPiece")) {
        t->model.kind = WM_TM_WORDPIECE;
        return load_wordpiece(t, j, 0, err);
    }
    if (!strcmp(ty, "WordLevel")) {
        t->model.kind = WM_TM_WORDLEVEL;
        return load_wordpiece(t, j, 1, err);
    }
    return wm_err(err, WM_ERR_UNSUPPORTED, "%s: model.type: unsupported model '%s'", t->name, ty);
}
