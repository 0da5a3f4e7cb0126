/* vision.c - an image model's folder run on image files (see vision.h). */
#include "tasks/vision.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"
#include "hf/config.h"
#include "hf/tokenizer.h"
#include "image/image.h"
#include "ops/op.h"

struct wm_vision {
    wm_session *s;
    wm_img_prep prep;
    wm_hf_config cfg;
    int has_cfg;
    char task[64];
    int out_idx;          /* the output read */
    int i_pix, i_ids, i_mask; /* input indexes (-1: absent) */
    wm_tokenizer *tok;    /* zero-shot: the folder's tokenizer */
    void *text_buf[2];    /* zero-shot: input_ids, attention_mask */
    int32_t in_dtype;     /* pixel_values' type */
    int64_t fixed_h, fixed_w;
    size_t max_tokens;    /* zero-shot: the text tower's length (0: no bound known) */
    uint64_t max_pixels;
    void *in_buf;
    float *out;
    size_t out_cap;
    const uint8_t *mem;   /* wm_vision_run_bytes: the encoded image of this run (its "path" names it) */
    size_t mem_n;
};

static int index_of(const wm_session *s, int outputs, const char *name) {
    size_t n = outputs ? wm_session_n_outputs(s) : wm_session_n_inputs(s);
    for (size_t i = 0; i < n; i++)
        if (!strcmp((outputs ? wm_session_output(s, i) : wm_session_input(s, i))->name, name)) return (int)i;
    return -1;
}

/* winml_build_config.json's loader.task ("" when there is none); an unreadable one is an error. */
static wm_status read_task(const char *folder, char *task, size_t n, wm_error *err) {
    char p[4200];
    snprintf(p, sizeof p, "%s/winml_build_config.json", folder);
    task[0] = 0;
    int present = 0;
    wm_status st = wm_input_present(p, &present, err);
    if (st || !present) return st;
    cJSON *root = NULL;
    if ((st = wm_hf_json_load(p, 1 << 22, &root, err))) return st;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "loader"), "task");
    if (cJSON_IsString(t)) snprintf(task, n, "%s", t->valuestring);
    cJSON_Delete(root);
    return WM_OK;
}

/* A positive whole number member of o (0 when absent or not one). */
static size_t num_member(const cJSON *o, const char *name) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsNumber(x) && x->valuedouble >= 1 && x->valuedouble < 1e9 ? (size_t)x->valuedouble : 0;
}

/*
 * The most tokens a text may have: the least of tokenizer_config.json's model_max_length (CLIPProcessor's
 * truncation=True length), config.json's text_config.max_position_embeddings and a static input_ids length;
 * 0 when none is known. Unreadable files are errors; absent ones give no bound.
 */
static wm_status text_bound(const char *dir, const wm_io_info *ids, size_t *out, wm_error *err) {
    size_t best = ids->rank == 2 && ids->dims[1] > 0 ? (size_t)ids->dims[1] : 0;
    const char *files[2] = {"tokenizer_config.json", "config.json"};
    for (int f = 0; f < 2; f++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, files[f]);
        int present = 0;
        wm_status st = wm_input_present(p, &present, err);
        if (st) return st;
        if (!present) continue;
        cJSON *root = NULL;
        if ((st = wm_hf_json_load(p, 1 << 24, &root, err))) return st;
        size_t k = f ? num_member(cJSON_GetObjectItemCaseSensitive(root, "text_config"), "max_position_embeddings")
                     : num_member(root, "model_max_length");
        if (k && (!best || k < best)) best = k;
        cJSON_Delete(root);
    }
    *out = best;
    return WM_OK;
}

wm_status wm_vision_open(const char *model, const wm_session_opts *so, uint64_t max_pixels, wm_vision **out,
                         wm_error *err) {
    *out = NULL;
    char file[4200], dir[4200], p[4300];
    wm_status st = wm_model_path(model, WM_VISION_NEEDS, file, sizeof file, dir, sizeof dir, err);
    if (st) return st;
    if ((st = wm_image_budget(max_pixels, &max_pixels, err))) return st;
    wm_vision *v = calloc(1, sizeof *v);
    if (!v) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    v->max_pixels = max_pixels;
    snprintf(p, sizeof p, "%s/preprocessor_config.json", dir);
    int present = 0;
    if ((st = wm_input_present(p, &present, err))) goto fail;
    if (!present) {
        st = wm_err(err, WM_ERR_INPUT, "%s: missing: an image model's folder needs its image processor's "
                    "preprocessor_config.json", p);
        goto fail;
    }
    if ((st = wm_img_prep_load(p, &v->prep, err))) goto fail;
    v->prep.max_pixels = max_pixels;
    if ((st = read_task(dir, v->task, sizeof v->task, err))) goto fail;
    if ((st = wm_session_new(file, so, &v->s, err))) goto fail;
    int ip = index_of(v->s, 0, "pixel_values");
    if (ip < 0) {
        st = wm_err(err, WM_ERR_UNSUPPORTED, "%s: no input 'pixel_values' (not an image model; text models: "
                    "winml run --text)", file);
        goto fail;
    }
    v->i_pix = ip, v->i_ids = index_of(v->s, 0, "input_ids"), v->i_mask = index_of(v->s, 0, "attention_mask");
    if (wm_session_n_inputs(v->s) != (size_t)(1 + (v->i_ids >= 0) + (v->i_mask >= 0)) || (v->i_mask >= 0 && v->i_ids < 0)) {
        st = wm_err(err, WM_ERR_UNSUPPORTED, "%s: inputs other than pixel_values (and input_ids, attention_mask for "
                    "zero-shot image classification)", file);
        goto fail;
    }
    const wm_io_info *ii = wm_session_input(v->s, (size_t)ip);
    if (ii->rank != 4 || (ii->dims[0] > 1) || (ii->dims[1] >= 0 && ii->dims[1] != 3) ||
        (ii->dtype != WM_DT_FLOAT && ii->dtype != WM_DT_FLOAT16)) {
        st = wm_err(err, WM_ERR_UNSUPPORTED, "%s: pixel_values must be float or float16 [batch, 3, height, width]",
                    file);
        goto fail;
    }
    v->in_dtype = ii->dtype, v->fixed_h = ii->dims[2], v->fixed_w = ii->dims[3];
    int logits = index_of(v->s, 1, "logits"), heatmaps = index_of(v->s, 1, "heatmaps");
    if (!v->task[0]) snprintf(v->task, sizeof v->task, "%s", v->i_ids >= 0 ? "zero-shot-image-classification"
                                                             : logits >= 0 ? "image-classification"
                                                             : heatmaps >= 0 ? "keypoint-detection"
                                                                           : "image-feature-extraction");
    if ((v->i_ids >= 0) != !strcmp(v->task, "zero-shot-image-classification")) {
        st = wm_err(err, WM_ERR_UNSUPPORTED, "%s: task '%s' but the model %s input_ids", file, v->task,
                    v->i_ids >= 0 ? "takes" : "has no");
        goto fail;
    }
    if (v->i_ids >= 0) {
        const wm_io_info *ti = wm_session_input(v->s, (size_t)v->i_ids);
        v->out_idx = index_of(v->s, 1, "logits_per_image");
        if (v->out_idx < 0 || ti->rank != 2 || (ti->dtype != WM_DT_INT64 && ti->dtype != WM_DT_INT32)) {
            st = wm_err(err, WM_ERR_UNSUPPORTED, "%s: zero-shot image classification needs input_ids [labels, "
                        "sequence] (int64 or int32) and an output logits_per_image", file);
            goto fail;
        }
        if ((st = wm_tokenizer_load_dir(dir, &v->tok, err))) goto fail;
        if ((st = text_bound(dir, ti, &v->max_tokens, err))) goto fail;
        /* SigLIP scores each label with a sigmoid over texts padded to 64 tokens (transformers' pipeline): not
         * what is done here, so refused rather than given softmax scores */
        snprintf(p, sizeof p, "%s/config.json", dir);
        if ((st = wm_input_present(p, &present, err))) goto fail;
        if (present) {
            if ((st = wm_hf_config_load(p, &v->cfg, err))) goto fail;
            v->has_cfg = 1;
            if (v->cfg.model_type && strstr(v->cfg.model_type, "siglip")) {
                st = wm_err(err, WM_ERR_UNSUPPORTED, "%s: model_type '%s': zero-shot classification with SigLIP's "
                            "sigmoid scores is not supported yet", p, v->cfg.model_type);
                goto fail;
            }
        }
    } else if (!strcmp(v->task, "image-classification") || !strcmp(v->task, "keypoint-detection")) {
        int kp = !strcmp(v->task, "keypoint-detection");
        if (kp && (heatmaps < 0 || wm_session_output(v->s, (size_t)heatmaps)->rank != 4)) {
            st = wm_err(err, WM_ERR_UNSUPPORTED, "%s: keypoint-detection needs an output heatmaps [batch, keypoints, "
                        "height, width]", file);
            goto fail;
        }
        v->out_idx = kp ? heatmaps : logits >= 0 ? logits : 0;
        snprintf(p, sizeof p, "%s/config.json", dir);
        if ((st = wm_input_present(p, &present, err))) goto fail;
        if (present) {
            if ((st = wm_hf_config_load(p, &v->cfg, err))) goto fail;
            v->has_cfg = 1;
        }
    } else if (!strcmp(v->task, "image-feature-extraction")) {
        const char *pref[] = {"image_embeds", "pooler_output"};
        v->out_idx = 0;
        for (int k = 1; k >= 0; k--)
            if (index_of(v->s, 1, pref[k]) >= 0) v->out_idx = index_of(v->s, 1, pref[k]);
    } else {
        st = wm_err(err, WM_ERR_UNSUPPORTED, "%s/winml_build_config.json: task '%s' is not an image task "
                    "(image-classification, image-feature-extraction, keypoint-detection)", dir, v->task);
        goto fail;
    }
    *out = v;
    return WM_OK;
fail:
    wm_vision_free(v);
    return st;
}

void wm_vision_free(wm_vision *v) {
    if (!v) return;
    free(v->in_buf);
    free(v->out);
    free(v->text_buf[0]), free(v->text_buf[1]);
    wm_tokenizer_free(v->tok);
    if (v->has_cfg) wm_hf_config_free(&v->cfg);
    wm_session_free(v->s);
    free(v);
}

const char *wm_vision_task(const wm_vision *v) { return v->task; }
const wm_img_prep *wm_vision_prep(const wm_vision *v) { return &v->prep; }
const char *wm_vision_label(const wm_vision *v, size_t i) {
    return v->has_cfg && i < v->cfg.n_labels ? v->cfg.labels[i] : NULL;
}

/* The preprocessed pixels of the image file at path, or of the n encoded bytes at mem (path names them). */
static wm_status pixels(const wm_img_prep *prep, const char *path, const uint8_t *mem, size_t n, uint64_t max_pixels,
                        float **x, int *h, int *w, wm_error *err) {
    wm_image im;
    wm_status st = mem ? wm_image_decode(mem, n, path, max_pixels, &im, err)
                       : wm_image_load(path, max_pixels, &im, err);
    if (st) return st;
    st = wm_img_prep_run(prep, &im, path, x, h, w, err);
    wm_image_free(&im);
    return st;
}

/* wm_vision_pixels of the file at path, or (mem set) of the n encoded bytes at mem that path names. */
static wm_status folder_pixels(const char *folder, const char *path, const uint8_t *mem, size_t n, uint64_t max_pixels,
                               float **out, int *h, int *w, wm_error *err) {
    *out = NULL;
    char p[4200];
    snprintf(p, sizeof p, "%s/preprocessor_config.json", folder);
    wm_img_prep prep;
    wm_status st = wm_image_budget(max_pixels, &max_pixels, err);
    if (st || (st = wm_img_prep_load(p, &prep, err))) return st;
    prep.max_pixels = max_pixels;
    return pixels(&prep, path, mem, n, max_pixels, out, h, w, err);
}

wm_status wm_vision_pixels(const char *folder, const char *path, uint64_t max_pixels, float **out, int *h, int *w,
                           wm_error *err) {
    return folder_pixels(folder, path, NULL, 0, max_pixels, out, h, w, err);
}

wm_status wm_vision_pixels_bytes(const char *folder, const char *name, const uint8_t *data, size_t n,
                                 uint64_t max_pixels, float **out, int *h, int *w, wm_error *err) {
    static const uint8_t none = 0;
    return folder_pixels(folder, name, data ? data : &none, data ? n : 0, max_pixels, out, h, w, err);
}

wm_status wm_vision_pixel_batch(const char *folder, const char *const *paths, size_t n, uint64_t max_pixels,
                                float **out, int *h, int *w, wm_error *err) {
    *out = NULL;
    float *all = NULL;
    wm_status st = WM_OK;
    for (size_t i = 0; !st && i < n; i++) {
        float *one = NULL;
        int hi, wi;
        if ((st = wm_vision_pixels(folder, paths[i], max_pixels, &one, &hi, &wi, err))) break;
        size_t k = (size_t)3 * (size_t)hi * (size_t)wi;
        if (i && (hi != *h || wi != *w))
            st = wm_err(err, WM_ERR_INPUT, "%s: preprocessed to %dx%d (height x width), the first image to %dx%d",
                        paths[i], hi, wi, *h, *w);
        if (!st && !i && !(all = malloc(n * k * sizeof *all))) st = wm_err(err, WM_ERR_NOMEM, "out of memory");
        if (!st) memcpy(all + i * k, one, k * sizeof *one), *h = hi, *w = wi;
        free(one);
    }
    if (st) free(all);
    else *out = all;
    return st;
}

/*
 * in[i_ids], in[i_mask]: each text (with prompt: "This is a photo of {text}.") tokenized, cut to max_tokens when
 * that is not 0 (the special tokens kept, as `tokenizers` truncates), padded with the pad token to the longest, or
 * to the model's static input_ids length when it has one (the attention mask hides the padding either way).
 */
static wm_status text_inputs(wm_vision *v, const char *const *labels, size_t n, int prompt, size_t max_tokens,
                             wm_tensor *in, wm_error *err) {
    wm_encode_opts eo = wm_encode_opts_default();
    eo.use_defaults = 0; /* as transformers calls it: padding=True (done here), truncation as asked */
    eo.truncation.enabled = max_tokens > 0, eo.padding.enabled = 0;
    eo.truncation.max_length = max_tokens;
    wm_encoding *enc = calloc(n, sizeof *enc);
    char *text = NULL;
    if (!enc) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    wm_status st = WM_OK;
    size_t S = 0;
    for (size_t i = 0; i < n; i++) wm_encoding_init(&enc[i]);
    for (size_t i = 0; i < n; i++) {
        const char *s = labels[i];
        if (prompt) {
            size_t l = strlen(labels[i]) + 32;
            char *t = realloc(text, l);
            if (!t) {
                st = wm_err(err, WM_ERR_NOMEM, "out of memory");
                goto done;
            }
            text = t;
            snprintf(text, l, "This is a photo of %s.", labels[i]);
            s = text;
        }
        if ((st = wm_tokenizer_encode(v->tok, s, strlen(s), NULL, 0, &eo, &enc[i], err))) goto done;
        S = enc[i].n > S ? enc[i].n : S;
    }
    int64_t fixed = wm_session_input(v->s, (size_t)v->i_ids)->dims[1];
    if (fixed > 0 && S > (size_t)fixed) {
        st = wm_err(err, WM_ERR_INPUT, "a text of %zu tokens: the model's input_ids take %lld", S, (long long)fixed);
        goto done;
    }
    if (fixed > 0) S = (size_t)fixed; /* a static text length (winml build's CLIP): padded to it */
    int32_t dt = wm_session_input(v->s, (size_t)v->i_ids)->dtype;
    int32_t pad = wm_tokenizer_special_id(v->tok, WM_TOK_PAD);
    if (pad < 0) pad = 0;
    for (int k = 0; k < 2; k++) {
        free(v->text_buf[k]);
        if (!(v->text_buf[k] = calloc(n * S + 1, 8))) {
            st = wm_err(err, WM_ERR_NOMEM, "out of memory");
            goto done;
        }
    }
    int32_t mdt = v->i_mask >= 0 ? wm_session_input(v->s, (size_t)v->i_mask)->dtype : WM_DT_INT64;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < S; j++) {
            int64_t id = j < enc[i].n ? enc[i].ids[j] : pad, m = j < enc[i].n ? enc[i].attention_mask[j] : 0;
            if (dt == WM_DT_INT32) ((int32_t *)v->text_buf[0])[i * S + j] = (int32_t)id;
            else ((int64_t *)v->text_buf[0])[i * S + j] = id;
            if (mdt == WM_DT_INT32) ((int32_t *)v->text_buf[1])[i * S + j] = (int32_t)m;
            else ((int64_t *)v->text_buf[1])[i * S + j] = m;
        }
    in[v->i_ids] = (wm_tensor){.dtype = dt, .rank = 2, .dims = {(int64_t)n, (int64_t)S}, .data = v->text_buf[0]};
    if (v->i_mask >= 0)
        in[v->i_mask] = (wm_tensor){.dtype = mdt, .rank = 2, .dims = {(int64_t)n, (int64_t)S}, .data = v->text_buf[1]};
done:
    for (size_t i = 0; i < n; i++) wm_encoding_free(&enc[i]);
    free(enc);
    free(text);
    return st;
}

/* Decodes and preprocesses the n_img files at paths into one malloc'ed batch *x [n_img, 3, *h, *w]. */
static wm_status pixel_batch(wm_vision *v, const char *const *paths, size_t n_img, float **x, int *h, int *w,
                             wm_error *err) {
    *x = NULL;
    float *all = NULL;
    wm_status st = WM_OK;
    for (size_t i = 0; !st && i < n_img; i++) {
        float *one = NULL;
        int hi, wi;
        if ((st = pixels(&v->prep, paths[i], v->mem, v->mem_n, v->max_pixels, &one, &hi, &wi, err))) break;
        if ((v->fixed_h > 0 && v->fixed_h != hi) || (v->fixed_w > 0 && v->fixed_w != wi) ||
            (i && (hi != *h || wi != *w)))
            st = wm_err(err, WM_ERR_INPUT, "%s: preprocessed to %dx%d (height x width) but the model takes %lldx%lld: "
                        "preprocessor_config.json and the model disagree", paths[i], hi, wi,
                        (long long)(v->fixed_h > 0 ? v->fixed_h : *h), (long long)(v->fixed_w > 0 ? v->fixed_w : *w));
        size_t n = (size_t)3 * hi * wi;
        if (!st && !i && !(all = malloc(n_img * n * sizeof *all))) st = wm_err(err, WM_ERR_NOMEM, "out of memory");
        if (!st) memcpy(all + i * n, one, n * sizeof *one), *h = hi, *w = wi;
        free(one);
    }
    if (st) free(all);
    else *x = all;
    return st;
}

/* Runs n_img images (one batch) with n_text texts (zero-shot models; see text_inputs) and reads output out_idx. */
static wm_status run_block(wm_vision *v, const char *const *paths, size_t n_img, const char *const *texts,
                           size_t n_text, int prompt, size_t max_tokens, wm_vision_out *res, wm_error *err) {
    memset(res, 0, sizeof *res);
    float *x = NULL;
    int h = 0, w = 0;
    wm_status st = pixel_batch(v, paths, n_img, &x, &h, &w, err);
    if (st) return st;
    wm_tensor ins[3];
    size_t n = n_img * 3 * (size_t)h * w;
    wm_tensor *in = &ins[v->i_pix];
    *in = (wm_tensor){.dtype = v->in_dtype, .rank = 4, .dims = {(int64_t)n_img, 3, h, w}, .data = x};
    if (n_text && (st = text_inputs(v, texts, n_text, prompt, max_tokens, ins, err))) goto done;
    if (v->in_dtype != WM_DT_FLOAT) {
        free(v->in_buf);
        if (!(v->in_buf = malloc(n * 2))) {
            st = wm_err(err, WM_ERR_NOMEM, "out of memory");
            goto done;
        }
        wm_convert(WM_DT_FLOAT, x, v->in_dtype, v->in_buf, n);
        in->data = v->in_buf;
    }
    wm_tensor o[16];
    size_t no = wm_session_n_outputs(v->s);
    if ((st = wm_session_run(v->s, ins, wm_session_n_inputs(v->s), o, no < 16 ? no : 16, err))) goto done;
    if (v->out_idx >= 16) {
        st = wm_err(err, WM_ERR_UNSUPPORTED, "the model has more than 16 outputs");
        goto done;
    }
    const wm_tensor *y = &o[v->out_idx];
    size_t ny = (size_t)wm_tensor_numel(y);
    if (ny > v->out_cap) {
        float *nb = realloc(v->out, (ny ? ny : 1) * sizeof *nb);
        if (!nb) {
            st = wm_err(err, WM_ERR_NOMEM, "out of memory");
            goto done;
        }
        v->out = nb, v->out_cap = ny;
    }
    wm_convert(y->dtype, y->data, WM_DT_FLOAT, v->out, ny);
    res->y = v->out, res->n = ny, res->output = wm_session_output(v->s, (size_t)v->out_idx)->name;
    res->rank = y->rank < 8 ? y->rank : 8;
    for (int i = 0; i < res->rank; i++) res->dims[i] = y->dims[i];
done:
    free(x);
    return st;
}

wm_status wm_vision_run(wm_vision *v, const char *path, const char *const *labels, size_t n_labels,
                        wm_vision_out *res, wm_error *err) {
    memset(res, 0, sizeof *res);
    if ((v->i_ids >= 0) != (n_labels > 0))
        return wm_err(err, WM_ERR_USAGE, v->i_ids >= 0 ? "a zero-shot image classifier needs candidate labels "
                                                         "(--labels \"a cat,a dog\")"
                                                       : "candidate labels (--labels) need a zero-shot image "
                                                         "classifier (a model taking input_ids and pixel_values)");
    return run_block(v, &path, 1, labels, n_labels, 1, 0, res, err);
}

wm_status wm_vision_run_bytes(wm_vision *v, const char *name, const uint8_t *data, size_t n, wm_vision_out *res,
                              wm_error *err) {
    memset(res, 0, sizeof *res);
    if (v->i_ids >= 0)
        return wm_err(err, WM_ERR_USAGE, "a zero-shot image classifier needs candidate labels (--labels \"a cat,"
                      "a dog\")");
    static const uint8_t none[1] = {0};
    v->mem = data ? data : none, v->mem_n = data ? n : 0;
    wm_status st = run_block(v, &name, 1, NULL, 0, 1, 0, res, err);
    v->mem = NULL, v->mem_n = 0;
    return st;
}

size_t wm_vision_max_images(const wm_vision *v) {
    int64_t b = wm_session_input(v->s, (size_t)v->i_pix)->dims[0];
    return b == 1 ? 1 : 0;
}

size_t wm_vision_max_tokens(const wm_vision *v) { return v->max_tokens; }

wm_status wm_vision_similarity(wm_vision *v, const char *const *paths, size_t n_img, const char *const *texts,
                               size_t n_text, wm_vision_out *res, wm_error *err) {
    memset(res, 0, sizeof *res);
    if (v->i_ids < 0 || !n_img || !n_text)
        return wm_err(err, WM_ERR_USAGE, "image-text similarity needs a CLIP-style model taking input_ids and "
                      "pixel_values, and at least one image and one text");
    if (wm_vision_max_images(v) && n_img > wm_vision_max_images(v))
        return wm_err(err, WM_ERR_USAGE, "the model takes one image per run (pixel_values batch fixed at 1)");
    wm_status st = run_block(v, paths, n_img, texts, n_text, 0, v->max_tokens, res, err);
    if (!st && (res->rank != 2 || res->dims[0] != (int64_t)n_img || res->dims[1] != (int64_t)n_text))
        st = wm_err(err, WM_ERR_UNSUPPORTED, "%s: logits_per_image is not [images, texts] (%zu x %zu)",
                    res->output, n_img, n_text);
    return st;
}
