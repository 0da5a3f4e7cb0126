/*
 * tokenizer_files.c - tokenizers from a folder: tokenizer.json when there,
 * else vocab.json + merges.txt (byte-level BPE with the components
 * transformers' GPT-2 converter sets) or vocab.txt (WordPiece with the
 * components of its BERT converter). tokenizer_config.json and
 * special_tokens_map.json name the special tokens (bos/eos/pad/unk/...).
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/file.h"
#include "hf/config.h"
#include "hf/spm_model.h"
#include "hf/tokenizer_impl.h"

static const char *const role_keys[7] = {"bos_token", "eos_token", "pad_token", "unk_token",
                                         "cls_token", "sep_token", "mask_token"};

static int exists(const char *dir, const char *name, char *out, size_t n) {
    struct stat sb;
    snprintf(out, n, "%s/%s", dir, name);
    return stat(out, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* exists() for a file the tokenizer needs: 1 / 0, or -1 with *st set when something else is there (a FIFO ...) */
static int needed(const char *dir, const char *name, char *out, size_t n, wm_status *st, wm_error *err) {
    int present;
    snprintf(out, n, "%s/%s", dir, name);
    if ((*st = wm_input_present(out, &present, err))) return -1;
    return present;
}

cJSON *wm_tok_read_json(const char *path) {
    cJSON *j = NULL;
    wm_error e = {0};
    return wm_hf_json_load_value(path, WM_TOK_CONFIG_MAX, &j, &e) ? NULL : j;
}

/* A token field: "text" or {"content": "text", ...}. */
static const char *token_text(const cJSON *v) {
    if (cJSON_IsString(v)) return v->valuestring;
    if (cJSON_IsObject(v)) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "content");
        if (cJSON_IsString(c)) return c->valuestring;
    }
    return NULL;
}

wm_status wm_tok_check_configs(const char *dir, wm_error *err) {
    static const char *const files[2] = {"tokenizer_config.json", "special_tokens_map.json"};
    for (int f = 0; f < 2; f++) {
        char path[4200];
        int present;
        snprintf(path, sizeof path, "%s/%s", dir, files[f]);
        wm_status st = wm_input_present(path, &present, err);
        if (st) return st;
        if (!present) continue;
        cJSON *j = NULL;
        if ((st = wm_hf_json_load(path, WM_TOK_CONFIG_MAX, &j, err))) return st; /* names what is wrong, where */
        cJSON_Delete(j);
    }
    return WM_OK;
}

void wm_tokenizer_read_config(wm_tokenizer *t, const char *dir) {
    const char *files[2] = {"special_tokens_map.json", "tokenizer_config.json"};
    for (int f = 0; f < 2; f++) {
        char path[4200];
        if (!exists(dir, files[f], path, sizeof path)) continue;
        cJSON *j = wm_tok_read_json(path);
        if (!cJSON_IsObject(j)) {
            cJSON_Delete(j);
            continue;
        }
        for (int r = 0; r < 7; r++) {
            const char *s = token_text(cJSON_GetObjectItemCaseSensitive(j, role_keys[r]));
            if (!s) continue;
            int32_t id = wm_tokenizer_token_to_id(t, s, strlen(s));
            if (id >= 0) t->roles[r] = id;
        }
        cJSON_Delete(j);
    }
}

void wm_tokenizer_finish_roles(wm_tokenizer *t) {
    if (t->roles[WM_TOK_UNK] < 0) t->roles[WM_TOK_UNK] = t->model.unk_id;
    const wm_tpost *pp = t->post;
    if (pp && (pp->kind == WM_TPP_BERT || pp->kind == WM_TPP_ROBERTA)) {
        if (t->roles[WM_TOK_CLS] < 0) t->roles[WM_TOK_CLS] = pp->cls.ids[0];
        if (t->roles[WM_TOK_SEP] < 0) t->roles[WM_TOK_SEP] = pp->sep.ids[0];
    }
    if (t->roles[WM_TOK_PAD] < 0 && t->pad.enabled) t->roles[WM_TOK_PAD] = t->pad.pad_id;
    static const char *const mk[] = {"BPE", "Unigram", "WordPiece", "WordLevel"};
    snprintf(t->desc, sizeof t->desc, "%s, %zu tokens + %zu added%s%s%s%s", mk[t->model.kind], t->model.vocab_size,
             t->n_added, t->norm ? ", normalizer" : "", t->pre ? ", pre-tokenizer" : "",
             t->post ? ", post-processor" : "", t->dec ? ", decoder" : "");
}

const char *wm_tokenizer_describe(const wm_tokenizer *t) { return t->desc; }

int32_t wm_tokenizer_special_id(const wm_tokenizer *t, wm_tok_role role) {
    return (int)role >= 0 && (int)role < 7 ? t->roles[role] : -1;
}

size_t wm_tokenizer_vocab_size(const wm_tokenizer *t) {
    size_t n = t->model.vocab_size;
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].id >= 0 && (size_t)t->added[i].id >= n) n = (size_t)t->added[i].id + 1;
    if (t->model.v.max_id >= 0 && (size_t)t->model.v.max_id + 1 > n) n = (size_t)t->model.v.max_id + 1;
    return n;
}

/* Special tokens named in the config files (and additional_special_tokens) become added tokens. */
static wm_status add_config_specials(wm_tokenizer *t, const char *dir, const char *const *defaults, wm_error *err) {
    const char *names[64];
    int role_of[64];
    size_t n = 0;
    cJSON *docs[2] = {NULL, NULL};
    const char *files[2] = {"special_tokens_map.json", "tokenizer_config.json"};
    for (int f = 0; f < 2; f++) {
        char path[4200];
        if (exists(dir, files[f], path, sizeof path)) docs[f] = wm_tok_read_json(path);
    }
    for (int r = 0; r < 7; r++) {
        const char *s = NULL;
        for (int f = 0; f < 2 && !s; f++)
            if (cJSON_IsObject(docs[f])) s = token_text(cJSON_GetObjectItemCaseSensitive(docs[f], role_keys[r]));
        if (!s && defaults) s = defaults[r];
        if (s && n < 64) role_of[n] = r, names[n++] = s;
    }
    for (int f = 0; f < 2; f++) {
        const cJSON *a = cJSON_IsObject(docs[f]) ? cJSON_GetObjectItemCaseSensitive(docs[f], "additional_special_tokens") : NULL;
        const cJSON *e;
        cJSON_ArrayForEach(e, a) {
            const char *s = token_text(e);
            if (s && n < 64) role_of[n] = -1, names[n++] = s;
        }
    }
    wm_tadded toks[64];
    size_t k = 0;
    int roles[64];
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(names[i]);
        if (!len || !wm_u8_valid(names[i], len)) continue;
        roles[k] = role_of[i];
        char *c = wm_arena_strndup(&t->arena, names[i], len);
        if (!c) {
            cJSON_Delete(docs[0]);
            cJSON_Delete(docs[1]);
            return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", t->name);
        }
        toks[k++] = (wm_tadded){.content = c, .len = len, .special = 1, .normalized = 0};
    }
    cJSON_Delete(docs[0]);
    cJSON_Delete(docs[1]);
    wm_status st = wm_tadded_add_batch(t, toks, k, err);
    for (size_t i = 0; i < k && !st; i++)
        if (roles[i] >= 0) t->roles[roles[i]] = wm_tokenizer_token_to_id(t, toks[i].content, toks[i].len);
    return st ? st : wm_tadded_finish(t, err);
}

static int config_bool(const char *dir, const char *key, int def) {
    char path[4200];
    if (!exists(dir, "tokenizer_config.json", path, sizeof path)) return def;
    cJSON *j = wm_tok_read_json(path);
    const cJSON *v = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, key) : NULL;
    int r = cJSON_IsBool(v) ? cJSON_IsTrue(v) : cJSON_IsNull(v) ? -1 : def;
    cJSON_Delete(j);
    return r;
}

/* vocab.json + merges.txt */
static wm_status load_gpt2_files(wm_tokenizer *t, const char *dir, const char *vpath, const char *mpath, wm_error *err) {
    wm_map vm, mm;
    wm_status st = wm_map_file(vpath, 0, &vm, err);
    if (st) return st;
    if ((st = wm_map_file(mpath, 0, &mm, err))) {
        wm_unmap(&vm);
        return st;
    }
    char *json = malloc(vm.size + 64);
    const char **ma = NULL, **mb = NULL;
    size_t *mal = NULL, *mbl = NULL, n = 0, cap = 0;
    wm_tokenizer *tmp = NULL;
    if (!json) {
        st = wm_err(err, WM_ERR_NOMEM, "%s: out of memory", vpath);
        goto done;
    }
    /* vocab.json alone first: one JSON object and nothing after it (spliced into the text below, a file that was
       not JSON could close the object early and add fields of its own) */
    cJSON *vj = NULL;
    if ((st = wm_hf_json_parse(vm.data ? (const char *)vm.data : "", vm.size, WM_TOK_CONFIG_MAX, vpath, &vj, err)))
        goto done;
    cJSON_Delete(vj);
    /* reuse the tokenizer.json model loader: {"type":"BPE","vocab":<vocab.json>,"merges":[]} */
    int hdr = snprintf(json, 64, "{\"model\":{\"type\":\"BPE\",\"merges\":[],\"vocab\":");
    memcpy(json + hdr, vm.data ? (const char *)vm.data : "", vm.size);
    memcpy(json + hdr + vm.size, "}}", 2);
    if ((st = wm_tokenizer_load_json(json, (size_t)hdr + vm.size + 2, vpath, &tmp, err))) goto done;
    t->model = tmp->model; /* take the vocabulary over */
    memset(&tmp->model, 0, sizeof tmp->model);
    /* merges.txt: lines "a b", the first may be "#version: ..." */
    const char *s = mm.data ? (const char *)mm.data : "", *end = s + mm.size;
    size_t line = 0;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s)), *le = nl ? nl : end;
        const char *e2 = le > s && le[-1] == '\r' ? le - 1 : le;
        line++;
        if (!((size_t)(e2 - s) >= 8 && !memcmp(s, "#version", 8))) {
            const char *sp = memchr(s, ' ', (size_t)(e2 - s));
            if (!sp || memchr(sp + 1, ' ', (size_t)(e2 - sp - 1))) {
                st = wm_err(err, WM_ERR_INPUT, "%s: line %zu: expected \"a b\"", mpath, line);
                goto done;
            }
            if (n >= cap) {
                size_t c1 = cap, c2 = cap, c3 = cap, c4 = cap;
                if (!wm_tgrow(&ma, &c1, n + 1, sizeof *ma) || !wm_tgrow(&mb, &c2, n + 1, sizeof *mb) ||
                    !wm_tgrow(&mal, &c3, n + 1, sizeof *mal) || !wm_tgrow(&mbl, &c4, n + 1, sizeof *mbl)) {
                    st = wm_err(err, WM_ERR_NOMEM, "%s: out of memory", mpath);
                    goto done;
                }
                cap = c1;
            }
            ma[n] = s;
            mal[n] = (size_t)(sp - s);
            mb[n] = sp + 1;
            mbl[n] = (size_t)(e2 - sp - 1);
            n++;
        }
        s = nl ? nl + 1 : end;
    }
    if ((st = wm_tbpe_finish(t, ma, mal, mb, mbl, n, err))) goto done;
    /* components as transformers' GPT-2 converter: ByteLevel pre-tokenizer (no prefix space), decoder, post */
    wm_tpre *p = wm_arena_alloc(&t->arena, sizeof *p);
    wm_tdec *d = wm_arena_alloc(&t->arena, sizeof *d);
    wm_tpost *pp = wm_arena_alloc(&t->arena, sizeof *pp);
    if (!p || !d || !pp) {
        st = wm_err(err, WM_ERR_NOMEM, "%s: out of memory", dir);
        goto done;
    }
    p->kind = WM_TP_BYTELEVEL;
    p->use_regex = 1;
    p->trim_offsets = 1;
    p->add_prefix_space = config_bool(dir, "add_prefix_space", 0) == 1;
    static const char re[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
    t->pre = p;
    if ((st = wm_tregex_compile(&p->re, re, sizeof re - 1, 0, dir, err))) goto done;
    d->kind = WM_TD_BYTELEVEL;
    t->dec = d;
    pp->kind = WM_TPP_BYTELEVEL;
    t->post = pp;
    st = add_config_specials(t, dir, NULL, err);
done:
    wm_tokenizer_free(tmp);
    free(json);
    free(ma);
    free(mb);
    free(mal);
    free(mbl);
    wm_unmap(&vm);
    wm_unmap(&mm);
    return st;
}

/* vocab.txt: one token per line, id = line number (later duplicates win). */
static wm_status load_bert_files(wm_tokenizer *t, const char *dir, const char *vpath, wm_error *err) {
    wm_map vm;
    wm_status st = wm_map_file(vpath, 0, &vm, err);
    if (st) return st;
    wm_tmodel *m = &t->model;
    m->kind = WM_TM_WORDPIECE;
    const char *s = vm.data ? (const char *)vm.data : "", *end = s + vm.size;
    int32_t id = 0;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s)), *le = nl ? nl : end;
        while (le > s && (le[-1] == ' ' || le[-1] == '\t' || le[-1] == '\r' || le[-1] == '\f' || le[-1] == '\v')) le--;
        if (!wm_u8_valid(s, (size_t)(le - s))) {
            st = wm_err(err, WM_ERR_INPUT, "%s: line %d: not valid UTF-8", vpath, id + 1);
            goto done;
        }
        if (id == INT32_MAX) {
            st = wm_err(err, WM_ERR_INPUT, "%s: too many lines", vpath);
            goto done;
        }
        if (wm_tmap_put(&m->v.map, s, (size_t)(le - s), id++) < 0) {
            st = wm_err(err, WM_ERR_NOMEM, "%s: out of memory", vpath);
            goto done;
        }
        s = nl ? nl + 1 : end;
    }
    for (size_t i = 0; i < m->v.map.n; i++)
        if (!wm_ttrie_insert(&m->trie, wm_tmap_key(&m->v.map, i), m->v.map.ent[i].len, m->v.map.ent[i].val)) {
            st = wm_err(err, WM_ERR_NOMEM, "%s: out of memory", vpath);
            goto done;
        }
    m->unk = "[UNK]", m->unk_len = 5;
    m->prefix = "##", m->prefix_len = 2;
    m->max_chars = 100;
    if ((st = wm_tmodel_finish_common(t, err))) goto done;
    wm_tnorm *nz = wm_arena_alloc(&t->arena, sizeof *nz);
    wm_tpre *p = wm_arena_alloc(&t->arena, sizeof *p);
    wm_tdec *d = wm_arena_alloc(&t->arena, sizeof *d);
    wm_tpost *pp = wm_arena_alloc(&t->arena, sizeof *pp);
    wm_ttpl_special *sp = wm_arena_alloc(&t->arena, 2 * sizeof *sp);
    wm_ttpl_piece *single = wm_arena_alloc(&t->arena, 3 * sizeof *single), *pair = wm_arena_alloc(&t->arena, 5 * sizeof *pair);
    int32_t *ids = wm_arena_alloc(&t->arena, 2 * sizeof *ids);
    const char **toks = wm_arena_alloc(&t->arena, 2 * sizeof *toks);
    size_t *lens = wm_arena_alloc(&t->arena, 2 * sizeof *lens);
    if (!nz || !p || !d || !pp || !sp || !single || !pair || !ids || !toks || !lens) {
        st = wm_err(err, WM_ERR_NOMEM, "%s: out of memory", dir);
        goto done;
    }
    int lower = config_bool(dir, "do_lower_case", 1), sa = config_bool(dir, "strip_accents", -1);
    nz->kind = WM_TN_BERT;
    nz->clean_text = 1;
    nz->handle_chinese = config_bool(dir, "tokenize_chinese_chars", 1) != 0;
    nz->lowercase = lower != 0;
    nz->strip_accents = sa < 0 ? nz->lowercase : sa;
    t->norm = nz;
    p->kind = WM_TP_BERT;
    t->pre = p;
    d->kind = WM_TD_WORDPIECE;
    d->s1 = "##", d->s1_len = 2, d->cleanup = 1;
    t->dec = d;
    static const char *const defaults[7] = {NULL, NULL, "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    if ((st = add_config_specials(t, dir, defaults, err))) goto done;
    wm_tokenizer_read_config(t, dir);
    const char *names[2] = {"[CLS]", "[SEP]"};
    for (int i = 0; i < 2; i++) {
        int32_t r = t->roles[i ? WM_TOK_SEP : WM_TOK_CLS];
        ids[i] = r >= 0 ? r : wm_tokenizer_token_to_id(t, names[i], 5);
        size_t tl = 5;
        const char *ts = r >= 0 ? wm_tokenizer_id_to_token(t, r, &tl) : names[i];
        toks[i] = ts;
        lens[i] = tl;
        if (ids[i] < 0) {
            st = wm_err(err, WM_ERR_INPUT, "%s: %s is not in the vocabulary", vpath, names[i]);
            goto done;
        }
        sp[i] = (wm_ttpl_special){toks[i], &ids[i], &toks[i], &lens[i], 1};
    }
    pp->kind = WM_TPP_TEMPLATE;
    pp->specials = sp;
    pp->n_specials = 2;
    single[0] = (wm_ttpl_piece){-1, 0, 0}, single[1] = (wm_ttpl_piece){0, 0, 0}, single[2] = (wm_ttpl_piece){-1, 1, 0};
    pair[0] = single[0], pair[1] = single[1], pair[2] = single[2];
    pair[3] = (wm_ttpl_piece){1, 0, 1}, pair[4] = (wm_ttpl_piece){-1, 1, 1};
    pp->single = single, pp->n_single = 3, pp->pair = pair, pp->n_pair = 5;
    t->post = pp;
done:
    wm_unmap(&vm);
    return st;
}

/* A SentencePiece model file (spm_model.h): Marian's source.spm + vocab.json, or a model read on its own with the
 * layout of tokenizer_config.json's tokenizer_class. */
static wm_status load_spm_files(const char *dir, const char *file, wm_tokenizer **out, wm_error *err) {
    if (!strcmp(file, "source.spm")) return wm_spm_marian_tokenizer(dir, out, err);
    char path[4200], cls[128] = "";
    snprintf(path, sizeof path, "%s/%s", dir, file);
    char cp[4200];
    if (exists(dir, "tokenizer_config.json", cp, sizeof cp)) {
        cJSON *j = wm_tok_read_json(cp);
        const cJSON *c = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, "tokenizer_class") : NULL;
        if (cJSON_IsString(c)) snprintf(cls, sizeof cls, "%s", c->valuestring);
        cJSON_Delete(j);
    }
    wm_spm_model m;
    wm_status st = wm_spm_load(path, &m, err);
    if (st) return st;
    st = wm_spm_tokenizer(&m, path, cls[0] ? cls : NULL, dir, out, err);
    wm_spm_free(&m);
    return st;
}

int wm_tokenizer_dir_has(const char *dir) {
    char a[4200];
    wm_status st;
    wm_error e = {0};
    const char *spm = NULL;
    if (needed(dir, "tokenizer.json", a, sizeof a, &st, &e) || wm_spm_find(dir, &spm)) return 1;
    int gpt2 = needed(dir, "vocab.json", a, sizeof a, &st, &e);
    if (gpt2 > 0) gpt2 = needed(dir, "merges.txt", a, sizeof a, &st, &e);
    return gpt2 || needed(dir, "vocab.txt", a, sizeof a, &st, &e);
}

wm_status wm_tokenizer_load_dir(const char *dir, wm_tokenizer **out, wm_error *err) {
    char a[4200], b[4200];
    *out = NULL;
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) return wm_err(err, WM_ERR_IO, "%s: not a folder", dir);
    wm_status st;
    int r = needed(dir, "tokenizer.json", a, sizeof a, &st, err);
    if (r) return r < 0 ? st : wm_tokenizer_load_file(a, out, err);
    if ((st = wm_tok_check_configs(dir, err))) return st;
    const char *spm = NULL;
    if (wm_spm_find(dir, &spm)) return load_spm_files(dir, spm, out, err);
    int gpt2 = needed(dir, "vocab.json", a, sizeof a, &st, err);
    if (gpt2 > 0) gpt2 = needed(dir, "merges.txt", b, sizeof b, &st, err);
    int bert = gpt2 ? 0 : needed(dir, "vocab.txt", a, sizeof a, &st, err);
    if (gpt2 < 0 || bert < 0) return st;
    wm_tokenizer *t = wm_tokenizer_new(dir);
    if (!t) return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", dir);
    if (gpt2)
        st = load_gpt2_files(t, dir, a, b, err);
    else if (bert)
        st = load_bert_files(t, dir, a, err);
    else
        st = wm_err(err, WM_ERR_INPUT,
                    "%s: no tokenizer.json, SentencePiece model (spiece.model, sentencepiece.bpe.model, "
                    "tokenizer.model, source.spm), vocab.json + merges.txt or vocab.txt", dir);
    if (!st) st = wm_tpre_flatten(t, err);
    if (!st) {
        wm_tokenizer_read_config(t, dir);
        wm_tokenizer_finish_roles(t);
    }
    if (st) {
        wm_tokenizer_free(t);
        return st;
    }
    *out = t;
    return WM_OK;
}
