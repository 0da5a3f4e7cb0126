/*
 * spm_marian.c - Marian checkpoints' tokenizer (Helsinki-NLP/opus-mt-*:
 * source.spm, target.spm, vocab.json, tokenizer_config.json; transformers'
 * MarianTokenizer, which has no tokenizers-library form), and the search
 * for the SentencePiece file of a folder without tokenizer.json.
 *
 * As MarianTokenizer: the special tokens (eos_token "</s>", unk_token
 * "<unk>", pad_token "<pad>", or what tokenizer_config.json names) are split
 * out of the text first (and vocab.json's ">>lang<<" codes); source.spm segments the rest with its own
 * normalization (spm_tok.c's SentencePiece layout); each piece's id is its
 * vocab.json id, <unk>'s when it is not there; </s> is appended. Decoding
 * maps ids through vocab.json and joins the pieces as SentencePiece does
 * ("▁" -> space, <0xNN> pieces as bytes). target.spm is read and checked
 * (its pieces are what the model writes); separate target vocabularies
 * (separate_vocabs) are refused.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file.h"
#include "hf/config.h"
#include "hf/spm_model.h"
#include "hf/tokenizer_impl.h"

static const char *const spm_files[] = {"spiece.model", "sentencepiece.bpe.model", "tokenizer.model", "source.spm",
                                        NULL};

int wm_spm_find(const char *dir, const char **file) {
    for (int i = 0; spm_files[i]; i++) {
        char p[4200];
        int present = 0;
        wm_error e = {0};
        snprintf(p, sizeof p, "%s/%s", dir, spm_files[i]);
        if (!wm_input_present(p, &present, &e) && present) {
            *file = spm_files[i];
            return 1;
        }
    }
    return 0;
}

/* tokenizer_config.json's string value of key, or def. */
static const char *cfg_str(const cJSON *c, const char *key, const char *def) {
    const cJSON *v = cJSON_IsObject(c) ? cJSON_GetObjectItemCaseSensitive(c, key) : NULL;
    if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
    return cJSON_IsString(v) && v->valuestring[0] ? v->valuestring : def;
}

static cJSON *read_json_file(const char *path, int required, wm_status *st, wm_error *err) {
    int present = 0;
    *st = wm_input_present(path, &present, err);
    if (*st) return NULL;
    if (!present) {
        if (required) *st = wm_err(err, WM_ERR_INPUT, "%s: missing (a Marian checkpoint needs it)", path);
        return NULL;
    }
    cJSON *j = NULL;
    *st = wm_hf_json_load(path, WM_TOK_CONFIG_MAX, &j, err); /* names what is wrong, where */
    return j;
}

/* vocab.json -> the model's vocabulary (token -> id), replacing the segmenting model's. */
static wm_status take_vocab(wm_tokenizer *t, const cJSON *v, const char *path, wm_error *err) {
    if (!cJSON_IsObject(v)) return wm_err(err, WM_ERR_INPUT, "%s: expected an object {token: id}", path);
    wm_tmodel *md = &t->model;
    wm_tvocab_free(&md->v);
    memset(&md->v, 0, sizeof md->v);
    md->v.max_id = -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
        const char *k = e->string ? e->string : "";
        size_t n = strlen(k);
        if (!wm_u8_valid(k, n)) return wm_err(err, WM_ERR_INPUT, "%s: a token is not valid UTF-8", path);
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > 2147483647.0 ||
            e->valuedouble != (double)(int32_t)e->valuedouble)
            return wm_err(err, WM_ERR_INPUT, "%s: [\"%.60s\"]: the id is not an integer in [0, 2^31)", path, k);
        if (wm_tmap_put(&md->v.map, k, n, (int32_t)e->valuedouble) < 0)
            return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", path);
    }
    wm_status st = wm_tvocab_build_reverse(&md->v, path, err);
    if (st) return st;
    md->vocab_size = md->v.map.n;
    return wm_tmodel_finish_common(t, err);
}

wm_status wm_spm_marian_tokenizer(const char *dir, wm_tokenizer **out, wm_error *err) {
    *out = NULL;
    char sp[4200], tp[4200], vp[4200], cp[4200];
    snprintf(sp, sizeof sp, "%s/source.spm", dir);
    snprintf(tp, sizeof tp, "%s/target.spm", dir);
    snprintf(vp, sizeof vp, "%s/vocab.json", dir);
    snprintf(cp, sizeof cp, "%s/tokenizer_config.json", dir);
    wm_spm_model src = {0}, tgt = {0};
    wm_status st;
    cJSON *cfg = read_json_file(cp, 0, &st, err), *voc = NULL;
    wm_tokenizer *t = NULL;
    if (st) goto done;
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "separate_vocabs"))) {
        st = wm_err(err, WM_ERR_UNSUPPORTED, "%s: separate_vocabs: a separate target vocabulary is not supported", cp);
        goto done;
    }
    if ((st = wm_spm_load(sp, &src, err)) || (st = wm_spm_load(tp, &tgt, err))) goto done;
    if (src.model_type != WM_SPM_UNIGRAM) {
        st = wm_err(err, WM_ERR_UNSUPPORTED, "%s: trainer_spec.model_type: %s; Marian source models are read when "
                    "UNIGRAM", sp, wm_spm_model_type_name(src.model_type));
        goto done;
    }
    if (!(voc = read_json_file(vp, 1, &st, err))) goto done;
    const char *unk = cfg_str(cfg, "unk_token", "<unk>"), *eos = cfg_str(cfg, "eos_token", "</s>"),
               *pad = cfg_str(cfg, "pad_token", "<pad>");
    const cJSON *ue = cJSON_GetObjectItemCaseSensitive(voc, unk), *ee = cJSON_GetObjectItemCaseSensitive(voc, eos);
    if (!cJSON_IsNumber(ue) || !cJSON_IsNumber(ee)) {
        st = wm_err(err, WM_ERR_INPUT, "%s: the %s token '%.40s' is not in the vocabulary", vp,
                    !cJSON_IsNumber(ue) ? "unk" : "eos", !cJSON_IsNumber(ue) ? unk : eos);
        goto done;
    }
    if ((st = wm_spm_tokenizer_layout(&src, sp, "MarianTokenizer", (int64_t)ee->valuedouble, &t, err))) goto done;
    if ((st = take_vocab(t, voc, vp, err))) goto done;
    wm_tmodel *md = &t->model;
    md->seg_ids = 1;
    md->seg_unk = src.unk_id;
    md->unk_id = wm_tmap_get(&md->v.map, unk, strlen(unk));
    t->dec_py_strip = 1;
    /* the special tokens MarianTokenizer splits out of the text, with their vocab.json ids */
    const char *names[3] = {eos, unk, pad};
    wm_tadded a[3];
    size_t n = 0;
    for (int i = 0; i < 3; i++)
        if (wm_tmap_get(&md->v.map, names[i], strlen(names[i])) >= 0)
            a[n++] = (wm_tadded){.content = names[i], .len = strlen(names[i]), .special = 1};
    for (size_t i = 0; i < n; i++)
        if (!(a[i].content = wm_arena_strndup(&t->arena, a[i].content, a[i].len))) {
            st = wm_err(err, WM_ERR_NOMEM, "%s: out of memory", dir);
            goto done;
        }
    if ((st = wm_tadded_add_batch(t, a, n, err))) goto done;
    /* the target-language codes of multilingual models (">>fra<<"): MarianTokenizer takes one off the start of a
     * text as one token; here they are (plain) added tokens */
    const cJSON *e;
    cJSON_ArrayForEach(e, voc) {
        const char *k = e->string ? e->string : "";
        size_t kl = strlen(k);
        if (kl < 5 || memcmp(k, ">>", 2) || memcmp(k + kl - 2, "<<", 2)) continue;
        wm_tadded c = {.content = wm_arena_strndup(&t->arena, k, kl), .len = kl};
        if (!c.content) {
            st = wm_err(err, WM_ERR_NOMEM, "%s: out of memory", dir);
            goto done;
        }
        if ((st = wm_tadded_add_batch(t, &c, 1, err))) goto done;
    }
    if ((st = wm_tadded_finish(t, err))) goto done;
    for (int r = 0; r < 7; r++) t->roles[r] = -1;
    t->roles[WM_TOK_UNK] = md->unk_id;
    t->roles[WM_TOK_EOS] = (int32_t)ee->valuedouble;
    t->roles[WM_TOK_PAD] = wm_tmap_get(&md->v.map, pad, strlen(pad));
    wm_tokenizer_finish_roles(t);
    char d[sizeof t->desc];
    snprintf(d, sizeof d, "%s", t->desc);
    snprintf(t->desc, sizeof t->desc,
             "Marian: SentencePiece source.spm (UNIGRAM, %zu pieces) segments, vocab.json (%zu ids) numbers, "
             "target.spm (%zu pieces) for the output: %s",
             src.n, md->v.map.n, tgt.n, d);
done:
    cJSON_Delete(cfg);
    cJSON_Delete(voc);
    wm_spm_free(&src);
    wm_spm_free(&tgt);
    if (st) wm_tokenizer_free(t);
    else *out = t;
    return st;
}
