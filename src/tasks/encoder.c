#include "tasks/encoder.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder/recipe.h"
#include "core/error.h"
#include "core/file.h"
#include "hf/config.h"
#include "hf/sbert.h"
#include "hf/tokenizer_unicode.h"
#include "ops/op.h"

struct wm_encoder {
    wm_session *s;
    wm_tokenizer *tok;
    wm_hf_config cfg;
    int has_cfg;
    char task[64];
    int i_ids, i_mask, i_type;
    int64_t fixed_seq; /* 0: symbolic */
    wm_sbert sb;       /* the folder's sentence-transformers files (has_modules 0: none) */
    wm_error sb_unsupported; /* a module pipeline winml does not run: refused when an embedding is pooled */
    char folder[4200];
    void *bufs[3];
    size_t cap;
    float *out;
    size_t out_cap;
};

wm_status wm_folder_task(const char *folder, char *task, size_t n, wm_error *err) {
    char p[4200];
    snprintf(p, sizeof p, "%s/winml_build_config.json", folder);
    cJSON *root = NULL;
    task[0] = 0;
    int present;
    wm_status s = wm_input_present(p, &present, err);
    if (s || !present) return s;
    if ((s = wm_hf_json_load(p, 1 << 22, &root, err))) return s;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "loader"), "task");
    if (cJSON_IsString(t)) snprintf(task, n, "%s", t->valuestring);
    cJSON_Delete(root);
    return WM_OK;
}

wm_status wm_encoder_open(const char *model, const wm_session_opts *so, wm_encoder **out, wm_error *err) {
    *out = NULL;
    char file[4200], dir[4200];
    wm_status st = wm_model_path(model, WM_ENCODER_NEEDS, file, sizeof file, dir, sizeof dir, err);
    if (st) return st;
    const char *folder = dir;
    wm_encoder *e = calloc(1, sizeof *e);
    if (!e) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    char p[4200];
    st = wm_session_new(file, so, &e->s, err);
    if (!st) st = wm_tokenizer_load_dir(folder, &e->tok, err);
    if (st) goto fail;
    /* config.json (labels, positions) and winml_build_config.json (task) may be absent; one that is there but
       malformed is refused naming it, not read as absent (labels LABEL_n, no length bound) */
    snprintf(p, sizeof p, "%s/config.json", folder);
    int present;
    if ((st = wm_input_present(p, &present, err))) goto fail;
    if (present) {
        if ((st = wm_hf_config_load(p, &e->cfg, err))) goto fail;
        e->has_cfg = 1;
    }
    if ((st = wm_folder_task(folder, e->task, sizeof e->task, err))) goto fail;
    snprintf(e->folder, sizeof e->folder, "%s", folder);
    if ((st = wm_sbert_load(folder, &e->sb, &e->sb_unsupported))) {
        if (st != WM_ERR_UNSUPPORTED) {
            wm_err(err, st, "%s", e->sb_unsupported.msg);
            goto fail;
        }
        st = WM_OK; /* a classifier's folder may carry one: it matters only to a pooled embedding */
    }
    if ((st = wm_sbert_check_length(&e->sb, folder, e->has_cfg ? e->cfg.max_positions : 0, err))) goto fail;
    e->i_ids = wm_session_input_index(e->s, "input_ids");
    e->i_mask = wm_session_input_index(e->s, "attention_mask");
    e->i_type = wm_session_input_index(e->s, "token_type_ids");
    if (e->i_ids < 0 || wm_session_n_outputs(e->s) < 1) {
        st = wm_err(err, WM_ERR_UNSUPPORTED, "%s: an encoder needs an input 'input_ids'", file);
        goto fail;
    }
    size_t known = 1 + (e->i_mask >= 0) + (e->i_type >= 0);
    if (wm_session_n_inputs(e->s) != known) {
        st = wm_err(err, WM_ERR_UNSUPPORTED, "%s: inputs other than input_ids, attention_mask and "
                    "token_type_ids (a decoder? use winml generate)", file);
        goto fail;
    }
    const wm_io_info *ii = wm_session_input(e->s, (size_t)e->i_ids);
    if (ii->rank != 2 || (ii->dims[0] >= 0 && ii->dims[0] != 1)) {
        st = wm_err(err, WM_ERR_UNSUPPORTED, "%s: input_ids must be [batch, sequence]", file);
        goto fail;
    }
    e->fixed_seq = ii->dims[1] > 0 ? ii->dims[1] : 0;
    *out = e;
    return WM_OK;
fail:
    wm_encoder_free(e);
    return st;
}

void wm_encoder_free(wm_encoder *e) {
    if (!e) return;
    for (int i = 0; i < 3; i++) free(e->bufs[i]);
    free(e->out);
    if (e->has_cfg) wm_hf_config_free(&e->cfg);
    wm_tokenizer_free(e->tok);
    wm_session_free(e->s);
    free(e);
}

const char *wm_encoder_task(const wm_encoder *e) { return e->task; }
const wm_tokenizer *wm_encoder_tokenizer(const wm_encoder *e) { return e->tok; }
const char *wm_encoder_label(const wm_encoder *e, size_t i) {
    return e->has_cfg && i < e->cfg.n_labels ? e->cfg.labels[i] : NULL;
}

static void put_int(void *b, int32_t dt, size_t i, int64_t v) {
    if (dt == WM_DT_INT32) ((int32_t *)b)[i] = (int32_t)v;
    else ((int64_t *)b)[i] = v;
}

/*
 * text lowercased as Python's str.lower does per character (sentence-transformers' do_lower_case), into a new
 * malloc'ed string (*out, caller frees). Invalid UTF-8 is left to the tokenizer, which names it: copied as it is.
 * Python lowercases a final capital sigma to 'ς' in context; this maps it to 'σ' as Rust's char::to_lowercase does.
 */
static wm_status lowered(const char *text, char **out, wm_error *err) {
    size_t n = strlen(text), need = 0;
    int valid = wm_u8_valid(text, n);
    uint32_t cps[3];
    for (size_t i = 0, adv; valid && i < n; i += adv) {
        size_t k = wm_uc_lower(wm_u8_get(text + i, &adv), cps);
        for (size_t j = 0; j < k; j++) need += wm_u8_cplen(cps[j]);
    }
    char *o = malloc((valid ? need : n) + 1);
    if (!o) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    size_t w = 0;
    if (!valid) memcpy(o, text, w = n);
    for (size_t i = 0, adv; valid && i < n; i += adv) {
        size_t k = wm_uc_lower(wm_u8_get(text + i, &adv), cps);
        for (size_t j = 0; j < k; j++) w += wm_u8_put(cps[j], o + w);
    }
    o[w] = 0;
    *out = o;
    return WM_OK;
}

/* The tokenizer options: the artifact's static length, else sentence-transformers' max_seq_length, else
 * tokenizer.json's own truncation and padding. */
static wm_encode_opts encode_opts(const wm_encoder *e) {
    wm_encode_opts eo = wm_encode_opts_default();
    size_t keep = e->sb.max_seq_length > 0 ? (size_t)e->sb.max_seq_length : 0;
    if (e->fixed_seq) keep = keep && keep < (size_t)e->fixed_seq ? keep : (size_t)e->fixed_seq;
    if (!keep) return eo;
    eo.use_defaults = 0; /* as sentence-transformers calls the tokenizer: truncation to max_seq_length, longest_first */
    eo.truncation.enabled = 1;
    eo.truncation.max_length = keep;
    eo.truncation.strategy = WM_TOK_TRUNC_LONGEST_FIRST;
    if (e->fixed_seq) { /* the static shape the artifact was built with */
        eo.padding.enabled = 1;
        eo.padding.length = (size_t)e->fixed_seq;
        int32_t pad = wm_tokenizer_special_id(e->tok, WM_TOK_PAD);
        eo.padding.pad_id = pad >= 0 ? pad : 0;
    }
    return eo;
}

/*
 * Pools hidden states y [1, T, H] over the tokens the mask keeps into out (n_modes * H floats), the poolings of
 * modes concatenated in sentence-transformers' order (Pooling.forward), then L2-normalized when normalize is set
 * (x / max(|x|, 1e-12), as its Normalize module). Sums in double.
 */
static wm_status pool(const wm_tensor *y, const wm_encoding *enc, unsigned modes, int normalize, float *out,
                      wm_error *err) {
    int64_t T = y->dims[1] < (int64_t)enc->n ? y->dims[1] : (int64_t)enc->n, H = y->dims[2];
    float *row = malloc((size_t)H * sizeof *row);
    double *acc = calloc((size_t)(4 * H), sizeof *acc), *mx = acc + H, *wacc = acc + 2 * H, *first = acc + 3 * H;
    if (!row || !acc) {
        free(row), free(acc);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    double cnt = 0, wsum = 0;
    int64_t last = 0;
    size_t es = wm_dtype_size(y->dtype);
    for (int64_t h = 0; h < H; h++) mx[h] = -1e9; /* sentence-transformers' fill for masked tokens */
    for (int64_t t = 0; t < T; t++) {
        wm_convert(y->dtype, (const uint8_t *)y->data + (size_t)(t * H) * es, WM_DT_FLOAT, row, (uint64_t)H);
        if (t == 0)
            for (int64_t h = 0; h < H; h++) first[h] = row[h];
        if (!enc->attention_mask[t]) continue;
        double w = (double)(t + 1); /* weighted mean: position weights 1..S */
        for (int64_t h = 0; h < H; h++) {
            acc[h] += row[h];
            wacc[h] += w * row[h];
            mx[h] = row[h] > mx[h] ? row[h] : mx[h];
        }
        cnt++, wsum += w, last = t;
    }
    size_t o = 0;
    for (int i = 0; i < WM_SBERT_N_MODES; i++) {
        if (!(modes & (1u << i))) continue;
        for (int64_t h = 0; h < H; h++) {
            double v = 0;
            switch (1u << i) {
            case WM_SBERT_CLS: v = first[h]; break;
            case WM_SBERT_MAX: v = mx[h]; break;
            case WM_SBERT_MEAN: v = acc[h] / (cnt > 1e-9 ? cnt : 1e-9); break;
            case WM_SBERT_MEAN_SQRT: v = acc[h] / sqrt(cnt > 1e-9 ? cnt : 1e-9); break;
            case WM_SBERT_WEIGHTED: v = wacc[h] / (wsum > 1e-9 ? wsum : 1e-9); break;
            default: v = 0; break;
            }
            out[o + (size_t)h] = (float)v;
        }
        if ((1u << i) == WM_SBERT_LAST) /* the last unmasked token */
            wm_convert(y->dtype, (const uint8_t *)y->data + (size_t)(last * H) * es, WM_DT_FLOAT, out + o, (uint64_t)H);
        o += (size_t)H;
    }
    if (normalize) {
        double s2 = 0;
        for (size_t i = 0; i < o; i++) s2 += (double)out[i] * out[i];
        double nrm = sqrt(s2) > 1e-12 ? sqrt(s2) : 1e-12;
        for (size_t i = 0; i < o; i++) out[i] = (float)(out[i] / nrm);
    }
    free(row), free(acc);
    return WM_OK;
}

static size_t n_modes(unsigned modes) {
    size_t k = 0;
    for (int i = 0; i < WM_SBERT_N_MODES; i++) k += (modes >> i) & 1u;
    return k;
}

wm_status wm_encoder_run(wm_encoder *e, const char *text, const char *pair, int normalize, const float **out, size_t *n,
                         int *pooled, wm_error *err) {
    wm_encode_opts eo = encode_opts(e);
    wm_encoding enc;
    wm_encoding_init(&enc);
    char *lt = NULL, *lp = NULL;
    wm_status st = WM_OK;
    if (e->sb.do_lower_case) { /* sentence-transformers lowercases the texts before its tokenizer */
        if ((st = lowered(text, &lt, err)) || (pair && (st = lowered(pair, &lp, err)))) goto done;
        text = lt, pair = pair ? lp : NULL;
    }
    st = wm_tokenizer_encode(e->tok, text, strlen(text), pair, pair ? strlen(pair) : 0, &eo, &enc, err);
    if (st) goto done;
    size_t S = enc.n;
    if (!S) {
        st = wm_err(err, WM_ERR_INPUT, "the text encodes to no tokens");
        goto done;
    }
    if (S > e->cap) {
        for (int i = 0; i < 3; i++) {
            void *nb = realloc(e->bufs[i], S * 8);
            if (!nb) {
                st = wm_err(err, WM_ERR_NOMEM, "out of memory");
                goto done;
            }
            e->bufs[i] = nb;
        }
        e->cap = S;
    }
    wm_tensor in[3];
    int idx[3] = {e->i_ids, e->i_mask, e->i_type};
    for (int k = 0; k < 3; k++) {
        if (idx[k] < 0) continue;
        int32_t dt = wm_session_input(e->s, (size_t)idx[k])->dtype;
        for (size_t i = 0; i < S; i++)
            put_int(e->bufs[k], dt, i, k == 0 ? enc.ids[i] : k == 1 ? enc.attention_mask[i] : enc.type_ids[i]);
        wm_tensor *t = &in[idx[k]];
        t->dtype = dt, t->rank = 2, t->dims[0] = 1, t->dims[1] = (int64_t)S, t->data = e->bufs[k];
    }
    wm_tensor o[16];
    size_t no = wm_session_n_outputs(e->s);
    if ((st = wm_session_run(e->s, in, wm_session_n_inputs(e->s), o, no < 16 ? no : 16, err))) goto done;
    const wm_tensor *y = &o[0];
    /* a folder with sentence-transformers' modules pools as they say; else the mean, normalized */
    unsigned modes = e->sb.has_modules ? e->sb.modes : WM_SBERT_MEAN;
    int norm = normalize && (e->sb.has_modules ? e->sb.normalize : 1);
    if (y->rank == 3 && e->sb_unsupported.status) {
        st = wm_err(err, e->sb_unsupported.status, "%s", e->sb_unsupported.msg);
        goto done;
    }
    if (y->rank == 3 && e->sb.dim && e->sb.dim != y->dims[2]) {
        st = wm_err(err, WM_ERR_INPUT, "%s/%s/config.json: field 'word_embedding_dimension': %lld, but the model's "
                    "hidden states have %lld", e->folder, e->sb.pooling_dir, (long long)e->sb.dim,
                    (long long)y->dims[2]);
        goto done;
    }
    size_t need = y->rank == 3 ? n_modes(modes) * (size_t)y->dims[2] : (size_t)wm_tensor_numel(y);
    if (need > e->out_cap) {
        float *nb = realloc(e->out, need * sizeof *nb);
        if (!nb) {
            st = wm_err(err, WM_ERR_NOMEM, "out of memory");
            goto done;
        }
        e->out = nb, e->out_cap = need;
    }
    *pooled = y->rank == 3;
    if (y->rank == 3) {
        if ((st = pool(y, &enc, modes, norm, e->out, err))) goto done;
    } else {
        wm_convert(y->dtype, y->data, WM_DT_FLOAT, e->out, wm_tensor_numel(y));
        /* the build's task as its recipe names it: sentence-similarity is feature-extraction too */
        if (normalize && wm_recipe_task_served(e->task, NULL) == WM_TASK_FEATURE_EXTRACTION) {
            double s2 = 0;
            for (size_t i = 0; i < need; i++) s2 += (double)e->out[i] * e->out[i];
            for (size_t i = 0; s2 > 0 && i < need; i++) e->out[i] = (float)(e->out[i] / sqrt(s2));
        }
    }
    *out = e->out;
    *n = need;
done:
    free(lt), free(lp);
    wm_encoding_free(&enc);
    return st;
}
