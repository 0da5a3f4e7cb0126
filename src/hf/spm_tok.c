/*
 * spm_tok.c - the tokenizer of a SentencePiece model: a tokenizer.json made
 * of the ModelProto (spm_model.c) and loaded by the tokenizer.json reader,
 * then tuned where SentencePiece's own encoding differs.
 *
 * Layouts, by tokenizer_config.json's tokenizer_class (one table below):
 *  - T5Tokenizer / MT5Tokenizer: transformers 5's T5Tokenizer pipeline:
 *    Precompiled charsmap normalizer, WhitespaceSplit + Metaspace("▁",
 *    always, split) pre-tokenizer, Unigram over every piece (then
 *    <extra_id_{extra_ids-1}> ... <extra_id_0> after them), "$A </s>" post-
 *    processor; UNKNOWN / CONTROL pieces and the sentinels are special added
 *    tokens, USER_DEFINED ones plain added tokens.
 *  - anything else (MarianTokenizer's source.spm, XLM-R / mBART / Llama
 *    style files read on their own): SentencePiece's own encoding (what the
 *    slow tokenizers call): the charsmap, then (remove_extra_whitespaces)
 *    leading / trailing spaces dropped and runs of spaces made one, "▁"
 *    prepended (add_dummy_prefix) and spaces escaped as "▁"; Unigram
 *    (Viterbi, unknown characters fused into one <unk>) or BPE (the
 *    highest-scoring merge first, merges rebuilt from the pieces: every
 *    split of a piece into two pieces, ranked by the merged piece's score)
 *    over NORMAL and USER_DEFINED pieces only; CONTROL / UNKNOWN / UNUSED /
 *    BYTE pieces are never matched in the text. USER_DEFINED pieces are
 *    added tokens. add_bos_token / add_eos_token in tokenizer_config.json
 *    (default off) make the post-processor.
 * Decoding: Metaspace (and ByteFallback for <0xNN> pieces).
 * Unsupported settings (treat_whitespace_as_suffix, escape_whitespaces
 * off) are refused naming the field.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/file.h"
#include "core/json.h"
#include "hf/spm_model.h"
#include "hf/tok_json.h"
#include "hf/tokenizer_impl.h"

#define META "\xe2\x96\x81" /* "▁" */

typedef struct flavour {
    const char *cls; /* tokenizer_config.json tokenizer_class; NULL: any other */
    int t5;          /* transformers' T5Tokenizer pipeline (else SentencePiece's own segmentation) */
    int sentinels;   /* <extra_id_N> tokens after the pieces (tokenizer_config extra_ids, default 100) */
    int eos;         /* "$A </s>" post-processor */
    int own_ids;     /* the pieces keep their ids (else another vocabulary numbers them: no pieces as added tokens) */
} flavour;

static const flavour flavours[] = {
    {"T5Tokenizer", 1, 1, 1, 1}, {"T5TokenizerFast", 1, 1, 1, 1}, {"MT5Tokenizer", 1, 1, 1, 1},
    {"MT5TokenizerFast", 1, 1, 1, 1}, {"MarianTokenizer", 0, 0, 1, 0}, {NULL, 0, 0, 0, 1},
};

static const flavour *flavour_of(const char *cls) {
    size_t i = 0;
    while (flavours[i].cls && !(cls && !strcmp(cls, flavours[i].cls))) i++;
    return &flavours[i];
}

/* ------------------------------------------------------------------ tokenizer_config.json */

static cJSON *read_config(const char *dir) {
    if (!dir) return NULL;
    char p[4200];
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    int present = 0;
    wm_error e = {0};
    return wm_input_present(p, &present, &e) || !present ? NULL : wm_tok_read_json(p);
}

static int cfg_bool(const cJSON *c, const char *key, int def) {
    const cJSON *v = cJSON_IsObject(c) ? cJSON_GetObjectItemCaseSensitive(c, key) : NULL;
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : def;
}

/* ------------------------------------------------------------------ BPE merges */

typedef struct cand {
    float score;
    int32_t merged, a, b;
} cand;

static int cmp_cand(const void *x, const void *y) {
    const cand *p = x, *q = y;
    if (p->score != q->score) return p->score > q->score ? -1 : 1;
    if (p->merged != q->merged) return p->merged < q->merged ? -1 : 1;
    return p->a < q->a ? -1 : p->a > q->a;
}

static int mergeable(int type) { return type == WM_SPM_NORMAL || type == WM_SPM_USER; }

/* Every split of a NORMAL piece into two mergeable pieces, best merged score first. */
static wm_status merges_of(const wm_spm_model *m, const char *path, cand **out, size_t *n_out, wm_error *err) {
    wm_tmap map = {0};
    cand *c = NULL;
    size_t n = 0, cap = 0;
    wm_status st = WM_OK;
    for (size_t i = 0; i < m->n && !st; i++)
        if (mergeable(m->pieces[i].type) && wm_tmap_put(&map, m->pieces[i].s, m->pieces[i].len, (int32_t)i) < 0)
            st = wm_err(err, WM_ERR_NOMEM, "%s: out of memory (merges)", path);
    for (size_t i = 0; i < m->n && !st; i++) {
        const wm_spm_piece *p = &m->pieces[i];
        if (p->type != WM_SPM_NORMAL) continue;
        for (uint32_t k = 1; k < p->len && !st; k++) {
            if (((uint8_t)p->s[k] & 0xC0) == 0x80) continue; /* inside a character */
            int32_t a = wm_tmap_get(&map, p->s, k), b = wm_tmap_get(&map, p->s + k, p->len - k);
            if (a < 0 || b < 0) continue;
            if (n >= cap && !wm_tgrow(&c, &cap, n + 1, sizeof *c)) {
                st = wm_err(err, WM_ERR_NOMEM, "%s: out of memory (merges)", path);
                break;
            }
            c[n++] = (cand){p->score, (int32_t)i, a, b};
        }
    }
    wm_tmap_free(&map);
    if (st) {
        free(c);
        return st;
    }
    if (n) qsort(c, n, sizeof *c, cmp_cand);
    *out = c;
    *n_out = n;
    return WM_OK;
}

/* ------------------------------------------------------------------ the JSON */

static void j_added(wm_json *j, int64_t id, const char *content, int special) {
    wm_json_obj(j, NULL);
    wm_json_int(j, "id", id);
    wm_json_str(j, "content", content);
    wm_json_bool(j, "single_word", 0);
    wm_json_bool(j, "lstrip", 0);
    wm_json_bool(j, "rstrip", 0);
    wm_json_bool(j, "normalized", 0);
    wm_json_bool(j, "special", special);
    wm_json_obj_end(j);
}

static void j_metaspace(wm_json *j, const char *key, const char *scheme, int split) {
    wm_json_obj(j, key);
    wm_json_str(j, "type", "Metaspace");
    wm_json_str(j, "replacement", META);
    wm_json_str(j, "prepend_scheme", scheme);
    wm_json_bool(j, "split", split);
    wm_json_obj_end(j);
}

static void j_precompiled(wm_json *j, const wm_spm_model *m, char *b64) {
    static const char tb[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < m->charsmap_len; i += 3) {
        uint32_t v = (uint32_t)m->charsmap[i] << 16;
        size_t k = m->charsmap_len - i;
        if (k > 1) v |= (uint32_t)m->charsmap[i + 1] << 8;
        if (k > 2) v |= m->charsmap[i + 2];
        b64[o++] = tb[v >> 18 & 63];
        b64[o++] = tb[v >> 12 & 63];
        b64[o++] = k > 1 ? tb[v >> 6 & 63] : '=';
        b64[o++] = k > 2 ? tb[v & 63] : '=';
    }
    b64[o] = 0;
    wm_json_obj(j, NULL);
    wm_json_str(j, "type", "Precompiled");
    wm_json_str(j, "precompiled_charsmap", b64);
    wm_json_obj_end(j);
}

typedef struct layout {
    const flavour *fl;
    int64_t extra_ids;
    const char *bos, *eos; /* post-processor tokens (NULL: none) */
    int64_t bos_id, eos_id;
} layout;

static wm_status make_json(const wm_spm_model *m, const char *path, const layout *L, wm_json *j, wm_error *err) {
    const flavour *fl = L->fl;
    char *b64 = malloc(m->charsmap_len / 3 * 4 + 8);
    if (!b64) return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", path);
    wm_json_obj(j, NULL);
    wm_json_str(j, "version", "1.0");
    wm_json_null(j, "truncation");
    wm_json_null(j, "padding");
    wm_json_arr(j, "added_tokens");
    for (size_t i = 0; i < m->n; i++) {
        int ty = m->pieces[i].type;
        if (fl->own_ids && (ty == WM_SPM_USER || (fl->t5 && (ty == WM_SPM_CONTROL || ty == WM_SPM_UNKNOWN))))
            j_added(j, (int64_t)i, m->pieces[i].s, ty != WM_SPM_USER);
    }
    for (int64_t k = 0; k < L->extra_ids; k++) {
        char s[40];
        snprintf(s, sizeof s, "<extra_id_%lld>", (long long)(L->extra_ids - 1 - k));
        j_added(j, (int64_t)m->n + k, s, 1);
    }
    wm_json_arr_end(j);
    /* normalizer */
    int pre = m->charsmap_len > 0, ws = !fl->t5 && m->remove_extra_whitespaces;
    if (!pre && !ws) wm_json_null(j, "normalizer");
    else {
        wm_json_obj(j, "normalizer");
        wm_json_str(j, "type", "Sequence");
        wm_json_arr(j, "normalizers");
        if (pre) j_precompiled(j, m, b64);
        if (ws) {
            wm_tokjson_replace(j, "Regex", "^ +| +$", "");
            wm_tokjson_replace(j, "Regex", " {2,}", " ");
        }
        wm_json_arr_end(j);
        wm_json_obj_end(j);
    }
    const char *scheme = fl->t5 || m->add_dummy_prefix ? "always" : "never";
    if (fl->t5) {
        wm_json_obj(j, "pre_tokenizer");
        wm_json_str(j, "type", "Sequence");
        wm_json_arr(j, "pretokenizers");
        wm_json_obj(j, NULL);
        wm_json_str(j, "type", "WhitespaceSplit");
        wm_json_obj_end(j);
        j_metaspace(j, NULL, "always", 1);
        wm_json_arr_end(j);
        wm_json_obj_end(j);
    } else /* Unigram: one Viterbi over the whole text as SentencePiece runs it (its float path scores round by
              the whole prefix); BPE: words apart where pieces never span a space */
        j_metaspace(j, "pre_tokenizer", scheme, m->model_type == WM_SPM_BPE && m->split_by_whitespace);
    if (L->bos || L->eos) {
        wm_tokjson_post(j, L->bos, L->bos_id, L->eos, L->eos_id, fl->t5 ? 0 : 1);
    } else wm_json_null(j, "post_processor");
    if (fl->t5) j_metaspace(j, "decoder", "always", 1);
    else {
        wm_json_obj(j, "decoder");
        wm_json_str(j, "type", "Sequence");
        wm_json_arr(j, "decoders");
        wm_json_obj(j, NULL);
        wm_json_str(j, "type", "ByteFallback");
        wm_json_obj_end(j);
        j_metaspace(j, NULL, scheme, 1);
        /* SentencePiece writes the unknown piece as unk_surface and control pieces as nothing */
        wm_tokjson_replace(j, "String", m->pieces[m->unk_id].s, m->unk_surface);
        for (size_t i = 0; i < m->n; i++)
            if (m->pieces[i].type == WM_SPM_CONTROL) wm_tokjson_replace(j, "String", m->pieces[i].s, "");
        wm_json_arr_end(j);
        wm_json_obj_end(j);
    }
    /* model */
    wm_json_obj(j, "model");
    wm_status st = WM_OK;
    if (m->model_type == WM_SPM_UNIGRAM) {
        wm_json_str(j, "type", "Unigram");
        wm_json_int(j, "unk_id", m->unk_id);
        wm_json_arr(j, "vocab");
        for (size_t i = 0; i < m->n; i++) {
            wm_json_arr(j, NULL);
            wm_json_str(j, NULL, m->pieces[i].s);
            wm_json_num(j, NULL, (double)m->pieces[i].score); /* the exact floats are set after loading */
            wm_json_arr_end(j);
        }
        for (int64_t k = 0; k < L->extra_ids; k++) {
            char s[40];
            snprintf(s, sizeof s, "<extra_id_%lld>", (long long)(L->extra_ids - 1 - k));
            wm_json_arr(j, NULL);
            wm_json_str(j, NULL, s);
            wm_json_num(j, NULL, 0.0);
            wm_json_arr_end(j);
        }
        wm_json_arr_end(j);
        wm_json_bool(j, "byte_fallback", m->byte_fallback);
    } else {
        cand *c = NULL;
        size_t nc = 0;
        if ((st = merges_of(m, path, &c, &nc, err))) goto out;
        wm_json_str(j, "type", "BPE");
        wm_json_null(j, "dropout");
        wm_json_str(j, "unk_token", m->pieces[m->unk_id].s);
        wm_json_null(j, "continuing_subword_prefix");
        wm_json_null(j, "end_of_word_suffix");
        wm_json_bool(j, "fuse_unk", 1);
        wm_json_bool(j, "byte_fallback", m->byte_fallback);
        wm_json_bool(j, "ignore_merges", 0);
        wm_json_obj(j, "vocab");
        for (size_t i = 0; i < m->n; i++) wm_json_int(j, m->pieces[i].s, (int64_t)i);
        for (int64_t k = 0; k < L->extra_ids; k++) {
            char s[40];
            snprintf(s, sizeof s, "<extra_id_%lld>", (long long)(L->extra_ids - 1 - k));
            wm_json_int(j, s, (int64_t)m->n + k);
        }
        wm_json_obj_end(j);
        wm_json_arr(j, "merges");
        for (size_t i = 0; i < nc; i++) {
            wm_json_arr(j, NULL);
            wm_json_str(j, NULL, m->pieces[c[i].a].s);
            wm_json_str(j, NULL, m->pieces[c[i].b].s);
            wm_json_arr_end(j);
        }
        wm_json_arr_end(j);
        free(c);
    }
    wm_json_obj_end(j);
    wm_json_obj_end(j);
    if (j->oom) st = wm_err(err, WM_ERR_NOMEM, "%s: out of memory (tokenizer.json)", path);
out:
    free(b64);
    return st;
}

/* ------------------------------------------------------------------ after loading */

/* Takes a piece out of the model's prefix searches (SentencePiece never matches it in the text). */
static void unreachable(wm_tmodel *md, const char *s, size_t n) {
    int64_t node = 0;
    for (size_t i = 0; i < n && node >= 0; i++) node = wm_ttrie_next(&md->trie, (uint64_t)node, (uint8_t)s[i]);
    if (node > 0) md->trie.val[node] = -1;
}

static void spm_charsmap(wm_tnorm *n) {
    if (!n) return;
    if (n->kind == WM_TN_PRECOMPILED) n->spm_longest = 1;
    for (size_t i = 0; i < n->n_kids; i++) spm_charsmap(n->kids[i]);
}

static void spm_bytes(wm_tdec *d) {
    if (!d) return;
    if (d->kind == WM_TD_BYTEFALLBACK) d->spm_bytes = 1;
    for (size_t i = 0; i < d->n_kids; i++) spm_bytes(d->kids[i]);
}

static wm_status tune(wm_tokenizer *t, const wm_spm_model *m, const flavour *fl) {
    wm_tmodel *md = &t->model;
    if (!fl->t5) {
        spm_charsmap(t->norm);
        spm_bytes(t->dec);
    }
    if (md->kind == WM_TM_UNIGRAM) { /* the file's floats exactly, as the Python readers have them */
        md->min_score = 0.0;
        for (size_t i = 0; i < m->n && i < md->n_entries; i++) {
            md->scores[i] = (double)m->pieces[i].score;
            if (!i || md->scores[i] < md->min_score) md->min_score = md->scores[i];
        }
        for (size_t i = m->n; i < md->n_entries; i++)
            if (md->scores[i] < md->min_score) md->min_score = md->scores[i];
        md->f32_lattice = !fl->t5;
        if (!fl->t5)
            for (size_t i = 0; i < m->n; i++)
                if (!mergeable(m->pieces[i].type)) unreachable(md, m->pieces[i].s, m->pieces[i].len);
    }
    return WM_OK;
}

static wm_status check_supported(const wm_spm_model *m, const char *path, wm_error *err) {
    if (m->treat_whitespace_as_suffix)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: trainer_spec.treat_whitespace_as_suffix: true is not supported",
                      path);
    if (!m->escape_whitespaces)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: normalizer_spec.escape_whitespaces: false is not supported", path);
    return WM_OK;
}

static wm_status build(const wm_spm_model *m, const char *path, const layout *L, wm_tokenizer **out, wm_error *err) {
    *out = NULL;
    wm_status st = check_supported(m, path, err);
    if (st) return st;
    wm_json j;
    wm_json_init(&j);
    if (!(st = make_json(m, path, L, &j, err))) st = wm_tokenizer_load_json(j.buf, j.n, path, out, err);
    wm_json_free(&j);
    if (!st) st = tune(*out, m, L->fl);
    if (st) {
        wm_tokenizer_free(*out);
        *out = NULL;
    }
    return st;
}

static const char *base(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static void describe(wm_tokenizer *t, const wm_spm_model *m, const char *path, const char *how) {
    char d[sizeof t->desc];
    snprintf(d, sizeof d, "%s", t->desc);
    snprintf(t->desc, sizeof t->desc, "SentencePiece %s (%s, %zu pieces%s%s, %s): %s", base(path),
             wm_spm_model_type_name(m->model_type), m->n, m->byte_fallback ? ", byte fallback" : "",
             m->charsmap_len ? ", precompiled charsmap" : "", how, d);
}

wm_status wm_spm_tokenizer_layout(const wm_spm_model *m, const char *path, const char *cls, int64_t eos_id,
                                  wm_tokenizer **out, wm_error *err) {
    const flavour *fl = flavour_of(cls);
    layout L = {fl, 0, NULL, eos_id >= 0 ? m->eos_piece : NULL, -1, eos_id};
    return build(m, path, &L, out, err);
}

wm_status wm_spm_tokenizer(const wm_spm_model *m, const char *path, const char *cls, const char *dir,
                           wm_tokenizer **out, wm_error *err) {
    *out = NULL;
    cJSON *cfg = read_config(dir);
    const flavour *fl = flavour_of(cls);
    layout L = {fl, 0, NULL, NULL, -1, -1};
    if (fl->sentinels) {
        const cJSON *x = cJSON_IsObject(cfg) ? cJSON_GetObjectItemCaseSensitive(cfg, "extra_ids") : NULL;
        int ok = cJSON_IsNumber(x) && x->valuedouble >= 0 && x->valuedouble <= 100000;
        L.extra_ids = ok ? (int64_t)x->valuedouble : 100;
    }
    if (fl->eos || cfg_bool(cfg, "add_eos_token", 0)) {
        if (m->eos_id < 0) {
            cJSON_Delete(cfg);
            return wm_err(err, WM_ERR_INPUT, "%s: trainer_spec.eos_id: -1, but the %s layout appends </s>", path,
                          cls ? cls : "SentencePiece");
        }
        L.eos = m->pieces[m->eos_id].s, L.eos_id = m->eos_id;
    }
    if (!fl->t5 && cfg_bool(cfg, "add_bos_token", 0) && m->bos_id >= 0)
        L.bos = m->pieces[m->bos_id].s, L.bos_id = m->bos_id;
    cJSON_Delete(cfg);
    wm_status st = build(m, path, &L, out, err);
    if (st) return st;
    wm_tokenizer *t = *out;
    if (dir) wm_tokenizer_read_config(t, dir);
    const int32_t ids[4] = {m->unk_id, m->bos_id, m->eos_id, m->pad_id};
    const wm_tok_role roles[4] = {WM_TOK_UNK, WM_TOK_BOS, WM_TOK_EOS, WM_TOK_PAD};
    for (int i = 0; i < 4; i++)
        if (t->roles[roles[i]] < 0 && ids[i] >= 0 && !(fl->t5 && roles[i] == WM_TOK_BOS)) t->roles[roles[i]] = ids[i];
    wm_tokenizer_finish_roles(t);
    describe(t, m, path, fl->t5 ? "T5Tokenizer layout" : "SentencePiece segmentation");
    return WM_OK;
}
