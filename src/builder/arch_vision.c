/*
 * arch_vision.c - resolving image models (ViT, DeiT, DINOv2, CLIP's towers
 * and both, ResNet) into a wm_arch from the rows of arch_vtables.c: the
 * config's vision keys (image_size, patch_size, num_channels, mlp_ratio,
 * use_swiglu_ffn, num_register_tokens, projection_dim, hidden_sizes ...)
 * typed and range-checked, modules looked up (weights) or decided
 * (random), every checkpoint tensor accounted for. Speech encoders
 * (wav2vec2, HuBERT: graph WM_GRAPH_AUDIO) take the same path for their
 * transformer modules and heads, their feature encoder from arch_audio.c.
 */
#include "builder/arch_impl.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

const wm_vis_family *wm_vis_find(const char *mt) {
    for (size_t i = 0; mt && i < wm_n_vis_families; i++)
        if (!strcmp(wm_vis_families[i].model_type, mt)) return &wm_vis_families[i];
    return NULL;
}

static const wm_scheme *vis_scheme(const char *name) {
    for (size_t i = 0; name && i < wm_n_vis_schemes; i++)
        if (!strcmp(wm_vis_schemes[i].name, name)) return &wm_vis_schemes[i];
    return NULL;
}

static const wm_modpat *pat_of(const wm_scheme *s, int m) {
    for (size_t i = 0; i < s->n_mods; i++)
        if (s->mods[i].mod == m) return &s->mods[i];
    return NULL;
}

/* ------------------------------------------------------------- config keys */

/* An integer key in [lo, hi]; def when absent or null. */
wm_status arch_key_int(const wm_hf_config *c, const char *key, int64_t def, int64_t lo, int64_t hi, int64_t *out,
                       wm_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->root, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return WM_OK;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < (double)lo ||
        v->valuedouble > (double)hi)
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected a whole number in [%lld, %lld]", c->file, key,
                      (long long)lo, (long long)hi);
    *out = (int64_t)v->valuedouble;
    return WM_OK;
}

wm_status arch_key_num(const wm_hf_config *c, const char *key, double def, double lo, double hi, double *out,
                       wm_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->root, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return WM_OK;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected a number in [%g, %g]", c->file, key, lo, hi);
    *out = v->valuedouble;
    return WM_OK;
}

wm_status arch_key_bool(const wm_hf_config *c, const char *key, int def, int *out, wm_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->root, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return WM_OK;
    }
    if (!cJSON_IsBool(v)) return wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected true or false", c->file, key);
    *out = cJSON_IsTrue(v);
    return WM_OK;
}

/* A list of 1..max whole numbers in [1, hi] (see arch_impl.h). */
wm_status arch_key_list(const wm_hf_config *c, const char *key, int64_t hi, int max, int64_t *out, int64_t *n,
                        wm_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->root, key), *e;
    int k = 0;
    if (!cJSON_IsArray(v) || !cJSON_GetArraySize(v) || cJSON_GetArraySize(v) > max)
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected a list of 1 to %d whole numbers", c->file, key, max);
    cJSON_ArrayForEach(e, v) {
        if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < 1 ||
            e->valuedouble > (double)hi)
            return wm_err(err, WM_ERR_INPUT, "%s: field '%s': entry %d: expected a whole number in [1, %lld]",
                          c->file, key, k, (long long)hi);
        out[k++] = (int64_t)e->valuedouble;
    }
    *n = k;
    return WM_OK;
}

/* An image or patch size: a whole number (square) or a list [height, width]; def when absent or null. */
static wm_status key_hw(const wm_hf_config *c, const char *key, int64_t def, int64_t *h, int64_t *w, wm_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->root, key);
    if (!cJSON_IsArray(v)) {
        wm_status s = arch_key_int(c, key, def, 1, 8192, h, err);
        *w = *h;
        return s;
    }
    int64_t hw[2], n = 0;
    wm_status s = arch_key_list(c, key, 8192, 2, hw, &n, err);
    if (s) return s;
    *h = hw[0];
    *w = n == 2 ? hw[1] : hw[0];
    return WM_OK;
}

static wm_status need(const wm_hf_config *c, int64_t v, const char *key, wm_error *err) {
    if (v > 0) return WM_OK;
    return wm_err(err, WM_ERR_INPUT, "%s: field '%s': missing (needed to build the graph)", c->file, key);
}

/* --------------------------------------------------------------- helpers */

wm_status arch_check_shape_nd(const wm_arch *a, const wm_module *m, wm_error *err) {
    const wm_st_tensor *t = m->wt;
    uint64_t numel = (uint64_t)m->out * (uint64_t)m->in;
    int ok = t->numel == numel;
    if (ok && m->kind == WM_MK_CONV) ok = t->rank == 4 && t->shape[0] == m->out && t->shape[2] == t->shape[3] &&
                                          t->shape[1] * t->shape[2] * t->shape[3] == m->in;
    if (ok && m->kind == WM_MK_PARAM && t->rank) ok = t->shape[t->rank - 1] == m->in || m->in == 1;
    if (ok && m->has_bias && m->bt) ok = m->bt->numel == (uint64_t)m->out && m->bt->rank == 1;
    if (!ok)
        return wm_err(err, WM_ERR_INPUT, "tensor '%s': %llu values, expected %lld x %lld%s from %s", t->name,
                      (unsigned long long)t->numel, (long long)m->out, (long long)m->in,
                      m->kind == WM_MK_CONV ? " as [out, channels, patch, patch]" : "", a->cfg->file);
    int32_t dt = wm_st_dtype_onnx(t->dtype);
    if (dt != 1 && dt != 10 && dt != 16 && dt != 11)
        return wm_err(err, WM_ERR_UNSUPPORTED, "tensor '%s': dtype %s is not supported (F32, F16, BF16, F64)", t->name,
                      wm_st_dtype_name(t->dtype));
    return WM_OK;
}

static wm_status resolve_act(wm_arch *a, const wm_vis_family *f, wm_error *err) {
    const char *name = a->cfg->activation ? a->cfg->activation : f->act;
    for (const wm_act_name_row *r = wm_act_names; r->name; r++)
        if (!strcmp(r->name, name)) {
            a->act = r->act;
            return WM_OK;
        }
    return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'hidden_act': activation '%s' is not supported (gelu, gelu_new, "
                  "gelu_pytorch_tanh, quick_gelu, silu, relu)", a->cfg->file, name);
}

/* The task: the checkpoint's own from architectures[0], or the one asked for when the family has it. */
/* top: the config holding architectures (a backbone family's outer config; a->cfg otherwise). */
static wm_status resolve_task(wm_arch *a, const wm_vis_family *f, int task, const wm_hf_config *top, wm_error *err) {
    const wm_hf_config *c = a->cfg;
    const char *arch0 = top->n_architectures ? top->architectures[0] : NULL;
    int own = f->pose                          ? WM_TASK_KEYPOINT_DETECTION
              : f->graph == WM_GRAPH_DUAL      ? WM_TASK_ZERO_SHOT_IMAGE_CLASSIFICATION
              : f->graph == WM_GRAPH_CLIP_TEXT ? WM_TASK_FEATURE_EXTRACTION
                                               : WM_TASK_IMAGE_FEATURE_EXTRACTION;
    if (arch0 && f->classify && strstr(arch0, "ForImageClassification")) own = WM_TASK_IMAGE_CLASSIFICATION;
    if (f->graph == WM_GRAPH_AUDIO) /* no audio feature-extraction output here: a base model builds CTC */
        own = arch0 && strstr(arch0, "ForSequenceClassification") ? WM_TASK_AUDIO_CLASSIFICATION : WM_TASK_ASR;
    if (task < 0) task = own;
    int tasks[WM_TASK_COUNT];
    a->graph = f->graph;
    a->fam = f;
    size_t nt = wm_vis_tasks(a, tasks), k = 0;
    while (k < nt && tasks[k] != task) k++;
    if (k == nt) {
        char list[160] = "";
        for (size_t i = 0, u = 0; i < nt && u < sizeof list; i++)
            u += (size_t)snprintf(list + u, sizeof list - u, "%s%s", i ? ", " : "", wm_task_name(tasks[i]));
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: task '%s' is not supported for model_type '%s' (%s)", c->file,
                      wm_task_name(task), a->model_type, list);
    }
    a->task = (wm_task)task;
    if (arch0 && task == own) snprintf(a->inference_class, sizeof a->inference_class, "%s", arch0);
    else if (f->graph == WM_GRAPH_AUDIO)
        snprintf(a->inference_class, sizeof a->inference_class, "%s%s", f->class_stem,
                 task == WM_TASK_ASR ? "ForCTC" : "ForSequenceClassification");
    else if (f->pose)
        snprintf(a->inference_class, sizeof a->inference_class, "%sForPoseEstimation", f->class_stem);
    else
        snprintf(a->inference_class, sizeof a->inference_class, "%s%s", f->class_stem,
                 task == WM_TASK_IMAGE_CLASSIFICATION ? "ForImageClassification" : "Model");
    return WM_OK;
}

/* The prefix under which the scheme's first global tensor exists (the family's own first, then none). */
static int find_prefix(wm_arch *a, const wm_vis_family *f, const wm_scheme *s, const wm_st_file *st, const char *probe) {
    const char *cands[2] = {a->sub_prefix ? a->sub_prefix : f->prefix, a->sub_prefix ? a->sub_prefix : ""};
    for (int i = 0; i < 2; i++) {
        char name[256];
        if (probe) snprintf(name, sizeof name, "%s%s", cands[i], probe);
        else if (!arch_expand(s->mods[0].pat, cands[i], 0, s->mods[0].kind == WM_MK_PARAM ? "" : ".weight", name,
                              sizeof name))
            continue;
        if (arch_st_find(st, name)) {
            snprintf(a->prefix, sizeof a->prefix, "%s", cands[i]);
            return 1;
        }
    }
    return 0;
}

/* 1 when the checkpoint (or, without weights, the architecture's name) has module m of scheme s. */
static int has_mod(const wm_arch *a, const wm_scheme *s, const wm_st_file *st, int m, const char *arch_hint) {
    const wm_modpat *p = pat_of(s, m);
    if (!p) return 0;
    if (!st) {
        const char *arch0 = a->cfg->n_architectures ? a->cfg->architectures[0] : "";
        return arch_hint && strstr(arch0, arch_hint) != NULL;
    }
    char name[256];
    return arch_expand(p->pat, a->prefix, 0, p->kind == WM_MK_PARAM ? "" : ".weight", name, sizeof name) &&
           arch_st_find(st, name) != NULL;
}

/* ------------------------------------------------------------- resolving */

static wm_status resolve_sizes(wm_arch *a, const wm_vis_family *f, wm_error *err) {
    const wm_hf_config *c = a->cfg;
    wm_status s;
    a->H = c->hidden_size;
    a->L = c->num_layers;
    a->nh = c->num_heads;
    if ((s = need(c, a->H, "hidden_size", err)) || (s = need(c, a->L, "num_hidden_layers", err)) ||
        (s = need(c, a->nh, "num_attention_heads", err)))
        return s;
    if (a->H > (1 << 16) || a->L > 4096 || a->nh > a->H || a->H % a->nh)
        return wm_err(err, WM_ERR_INPUT, "%s: field 'num_attention_heads': %lld heads for hidden_size %lld (must divide "
                      "it; hidden_size <= 65536, layers <= 4096)", c->file, (long long)a->nh, (long long)a->H);
    a->kvh = a->nh;
    a->hd = a->H / a->nh;
    a->E = a->H;
    a->eps = !isnan(c->norm_eps) ? c->norm_eps : f->eps;
    a->norm = WM_NORM_LAYER;
    a->scale_attn = 1;
    a->labels = c->num_labels > 0 ? c->num_labels : 2;
    if (f->mlp_ratio) {
        double ratio = 4.0;
        if ((s = arch_key_num(c, "mlp_ratio", 4.0, 0.01, 64.0, &ratio, err))) return s;
        a->I = (int64_t)((double)a->H * ratio);
    } else {
        a->I = c->intermediate_size;
        if ((s = need(c, a->I, "intermediate_size", err))) return s;
    }
    if (a->I > (1 << 20)) return wm_err(err, WM_ERR_INPUT, "%s: the MLP width %lld is over 2^20", c->file, (long long)a->I);
    if (f->graph == WM_GRAPH_CLIP_TEXT) {
        a->V = c->vocab_size;
        a->P = c->max_positions;
        if ((s = need(c, a->V, "vocab_size", err)) || (s = need(c, a->P, "max_position_embeddings", err))) return s;
        if (a->V > (1 << 24) || a->P > (1 << 20))
            return wm_err(err, WM_ERR_INPUT, "%s: vocab_size or max_position_embeddings too large", c->file);
        /* transformers' rule: eos_token_id 2 (configs from before the fix) pools at the highest id */
        int64_t eos = c->eos.n ? c->eos.v[0] : 49407;
        a->eos_id = eos == 2 ? -1 : eos;
        a->causal = f->causal;
        return WM_OK;
    }
    int64_t pw;
    if ((s = key_hw(c, "image_size", 224, &a->image, &a->image_w, err)) ||
        (s = key_hw(c, "patch_size", 16, &a->patch, &pw, err)) ||
        (s = arch_key_int(c, "num_channels", 3, 1, 64, &a->C, err)))
        return s;
    if (pw != a->patch)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'patch_size': %lld x %lld patches are not modeled (square "
                      "patches only)", c->file, (long long)a->patch, (long long)pw);
    if (a->image % a->patch || a->image_w % a->patch)
        return wm_err(err, WM_ERR_INPUT, "%s: field 'patch_size': %lld does not divide image_size %lld x %lld", c->file,
                      (long long)a->patch, (long long)a->image, (long long)a->image_w);
    a->patch_pad = f->patch_pad;
    if (2 * a->patch_pad >= a->patch)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'patch_size': %lld is too small for the patch padding %lld",
                      c->file, (long long)a->patch, (long long)a->patch_pad);
    a->n_patch = (a->image / a->patch) * (a->image_w / a->patch);
    if (a->n_patch > (1 << 20)) return wm_err(err, WM_ERR_INPUT, "%s: over 2^20 patches", c->file);
    a->n_pos = a->n_patch + (f->no_cls ? 0 : 1) + (f->dist ? 1 : 0);
    if (f->registers && (s = arch_key_int(c, "num_register_tokens", 0, 0, 4096, &a->n_reg, err))) return s;
    a->P = a->n_pos;
    return WM_OK;
}

/* The wanted modules of one layer (or the globals for layer -1) of a transformer tower. */
static size_t tower_wants(const wm_arch *a, const wm_vis_family *f, const wm_scheme *s, const wm_st_file *st, int layer,
                          int qkv_bias, arch_want *list) {
    size_t n = 0;
    for (size_t i = 0; i < s->n_mods; i++) {
        const wm_modpat *p = &s->mods[i];
        if ((p->mod >= WM_M_FIRST_LAYER) != (layer >= 0)) continue;
        arch_want w = {p->mod, layer, p->pat, p->kind, p->d_out, p->d_in, 1, p->kind != WM_MK_PARAM};
        switch (p->mod) {
        case WM_M_G_DIST: w.required = f->dist; break;
        case WM_M_G_REG: w.required = a->n_reg > 0; break;
        case WM_M_L_LS1: case WM_M_L_LS2: w.required = a->layer_scale; break;
        case WM_M_L_Q: case WM_M_L_K: case WM_M_L_V: w.bias = qkv_bias; break;
        case WM_M_G_PATCH: w.bias = st ? 1 : f->graph != WM_GRAPH_VIT || strcmp(f->scheme, "clip_vision"); break;
        case WM_M_G_POOL: w.required = a->vpool == WM_VPOOL_DENSE_TANH || a->vpool == WM_VPOOL_LAST_HEAD; break;
        case WM_M_G_PROBE: case WM_M_G_MAP_QKV: case WM_M_G_MAP_QKV_B: case WM_M_G_MAP_O: case WM_M_G_MAP_NORM:
        case WM_M_G_MAP_UP: case WM_M_G_MAP_DOWN: w.required = a->vpool == WM_VPOOL_MAP; break;
        case WM_M_G_PROJ: w.required = a->proj > 0; w.bias = 0; break;
        case WM_M_G_EMBED: case WM_M_G_POS: w.bias = 0; break;
        case WM_M_G_EMB_NORM: w.required = f->graph != WM_GRAPH_AUDIO || a->feat_proj_norm; break;
        case WM_M_L_DOWN_PART: w.required = a->part > 0; break;
        default: break;
        }
        list[n++] = w;
    }
    return n;
}

/* Classification heads (image and audio) and the CTC head (absolute names). */
static size_t head_wants(const wm_arch *a, arch_want *list) {
    if (a->task == WM_TASK_ASR) {
        list[0] = (arch_want){WM_M_H_0, -1, "lm_head", WM_MK_LINEAR, D_V, D_H, 1, 1};
        return 1;
    }
    if (a->task == WM_TASK_AUDIO_CLASSIFICATION) {
        list[0] = (arch_want){WM_M_H_0, -1, "projector", WM_MK_LINEAR, D_PROJ, D_H, 1, 1};
        list[1] = (arch_want){WM_M_H_1, -1, "classifier", WM_MK_LINEAR, D_L, D_PROJ, 1, 1};
        return 2;
    }
    if (a->task != WM_TASK_IMAGE_CLASSIFICATION) return 0;
    if (a->vhead == WM_VHEAD_CLS_DIST_AVG) {
        list[0] = (arch_want){WM_M_H_0, -1, "cls_classifier", WM_MK_LINEAR, D_L, D_H, 1, 1};
        list[1] = (arch_want){WM_M_H_1, -1, "distillation_classifier", WM_MK_LINEAR, D_L, D_H, 1, 1};
        return 2;
    }
    list[0] = (arch_want){WM_M_H_0, -1, a->graph == WM_GRAPH_RESNET ? "classifier.1" : "classifier", WM_MK_LINEAR, D_L,
                     a->vhead == WM_VHEAD_CLS_MEAN ? D_2H : D_H, 1, 1};
    return 1;
}

static wm_status fill_all(wm_arch *a, const wm_vis_family *f, const wm_scheme *s, const wm_st_file *st, int qkv_bias,
                          wm_error *err) {
    a->mods = calloc((size_t)(a->L + 1) * WM_M_COUNT, sizeof *a->mods);
    if (!a->mods) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    arch_want list[64];
    wm_status r = WM_OK;
    for (int64_t layer = -1; layer < a->L && !r; layer++) {
        size_t n = f->graph == WM_GRAPH_RESNET ? 0 : tower_wants(a, f, s, st, (int)layer, qkv_bias, list);
        if (layer < 0) n += head_wants(a, list + n);
        for (size_t i = 0; i < n && !r; i++)
            if (!(r = arch_fill_module(a, st, &list[i], err)))
                r = arch_check_shape(a, arch_mod_mut(a, (int)layer, list[i].mod), err);
    }
    return r;
}

static wm_status resolve_resnet(wm_arch *a, const wm_vis_family *f, const wm_st_file *st, wm_error *err) {
    const wm_hf_config *c = a->cfg;
    wm_status s;
    int64_t nd = 0;
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(c->root, "layer_type");
    if (lt && !cJSON_IsNull(lt) && (!cJSON_IsString(lt) || (strcmp(lt->valuestring, "basic") &&
                                                          strcmp(lt->valuestring, "bottleneck"))))
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'layer_type': expected \"basic\" or \"bottleneck\"", c->file);
    a->bottleneck = !lt || cJSON_IsNull(lt) || !strcmp(lt->valuestring, "bottleneck");
    if ((s = arch_key_int(c, "embedding_size", 64, 1, 1 << 16, &a->E, err)) ||
        (s = arch_key_int(c, "num_channels", 3, 1, 64, &a->C, err)) ||
        (s = arch_key_list(c, "hidden_sizes", 1 << 16, WM_RESNET_MAX_STAGES, a->hidden_sizes, &a->n_stages, err)) ||
        (s = arch_key_list(c, "depths", 1024, WM_RESNET_MAX_STAGES, a->depths, &nd, err)) ||
        (s = arch_key_bool(c, "downsample_in_first_stage", 0, &a->down_first, err)) ||
        (s = arch_key_bool(c, "downsample_in_bottleneck", 0, &a->down_in_bottleneck, err)) ||
        (s = arch_key_int(c, "image_size", 224, 1, 8192, &a->image, err)))
        return s;
    a->image_w = a->image;
    if (nd != a->n_stages)
        return wm_err(err, WM_ERR_INPUT, "%s: field 'depths': %lld stages, hidden_sizes has %lld", c->file,
                      (long long)nd, (long long)a->n_stages);
    if (a->act != WM_ACT_RELU)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'hidden_act': ResNet is built with relu only", c->file);
    a->H = a->hidden_sizes[a->n_stages - 1];
    a->labels = c->num_labels > 0 ? c->num_labels : 2;
    a->L = 0;
    a->eps = 1e-5; /* nn.BatchNorm2d's */
    if (st && !find_prefix(a, f, NULL, st, "embedder.embedder.convolution.weight"))
        return wm_err(err, WM_ERR_INPUT, "missing tensor '%sembedder.embedder.convolution.weight' (ResNet's stem)",
                      f->prefix);
    if (!st) snprintf(a->prefix, sizeof a->prefix, "%s", f->prefix);
    if (st && (s = wm_resnet_check(a, st, err))) return s;
    return fill_all(a, f, NULL, st, 0, err);
}

/* ViTPose++'s MLP parts (num_experts > 1: fc2 gives the first H - part_features outputs, the dataset's expert the
   rest); the backbone's output stage (out_indices / out_features) must be its last layer. */
static wm_status resolve_parts(wm_arch *a, wm_error *err) {
    const wm_hf_config *c = a->cfg;
    int64_t ne, pf;
    wm_status s;
    if ((s = arch_key_int(c, "num_experts", 1, 1, 1024, &ne, err)) ||
        (s = arch_key_int(c, "part_features", 256, 1, 1 << 16, &pf, err)))
        return s;
    if (ne > 1 && pf >= a->H)
        return wm_err(err, WM_ERR_INPUT, "%s: field 'part_features': %lld, expected fewer than hidden_size %lld",
                      c->file, (long long)pf, (long long)a->H);
    a->part = ne > 1 ? pf : 0;
    a->n_part_experts = ne > 1 ? ne : 0;
    const cJSON *oi = cJSON_GetObjectItemCaseSensitive(c->root, "out_indices"),
                *of = cJSON_GetObjectItemCaseSensitive(c->root, "out_features");
    int ok = 1;
    if (oi && !cJSON_IsNull(oi)) {
        const cJSON *e = cJSON_IsArray(oi) && cJSON_GetArraySize(oi) == 1 ? cJSON_GetArrayItem(oi, 0) : NULL;
        ok = cJSON_IsNumber(e) && (e->valuedouble == (double)a->L || e->valuedouble == -1.0);
    }
    char last[32];
    snprintf(last, sizeof last, "stage%lld", (long long)a->L);
    if (ok && of && !cJSON_IsNull(of)) {
        const cJSON *e = cJSON_IsArray(of) && cJSON_GetArraySize(of) == 1 ? cJSON_GetArrayItem(of, 0) : NULL;
        ok = cJSON_IsString(e) && !strcmp(e->valuestring, last);
    }
    if (!ok)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'out_indices': only the last layer's features ([%lld], "
                      "out_features [\"%s\"]) are modeled", c->file, (long long)a->L, last);
    return WM_OK;
}

/* One transformer tower (or a single-tower model) from config c. */
/* parent: the two-tower config whose tower this is (its projection_dim sizes the projection, as CLIPModel's
   text_projection / visual_projection), NULL for a tower on its own (its own projection_dim, when it has one). */
static wm_status resolve_tower(wm_arch *a, const wm_vis_family *f, const wm_hf_config *c, const wm_st_file *st,
                               int task, const wm_hf_config *parent, wm_error *err) {
    wm_status s;
    a->cfg = c;
    a->random = st == NULL;
    a->model_type = f->model_type;
    a->kind = WM_ENCODER;
    a->pos = WM_POS_LEARNED;
    a->posid = WM_POSID_ARANGE;
    const wm_hf_config *top = f->backbone_key && parent ? parent : c;
    if ((s = resolve_task(a, f, task, top, err)) || (s = resolve_act(a, f, err))) return s;
    if (f->graph == WM_GRAPH_RESNET) {
        a->scheme = f->scheme;
        return resolve_resnet(a, f, st, err);
    }
    if (f->graph == WM_GRAPH_AUDIO) { /* the feature encoder's keys and tensors, then the scheme's modules */
        a->sch = vis_scheme(f->scheme);
        a->scheme = f->scheme;
        if ((s = wm_audio_resolve(a, f, st, err)) || (s = fill_all(a, f, a->sch, st, 1, err))) return s;
        a->qkv_bias = a->o_bias = a->mlp_bias = 1;
        a->n_head_mods = wm_arch_mod(a, -1, WM_M_H_1)->present ? 2 : 1;
        return WM_OK;
    }
    if ((s = resolve_sizes(a, f, err))) return s;
    int swiglu = 0, qkv_bias = 1;
    if (f->swiglu && (s = arch_key_bool(c, "use_swiglu_ffn", 0, &swiglu, err))) return s;
    if ((s = arch_key_bool(c, "qkv_bias", 1, &qkv_bias, err))) return s;
    const wm_scheme *sch = vis_scheme(swiglu ? f->scheme_alt : f->scheme);
    if (st && !find_prefix(a, f, sch, st, NULL)) {
        char name[256];
        arch_expand(sch->mods[0].pat, a->sub_prefix ? a->sub_prefix : f->prefix, 0,
                    sch->mods[0].kind == WM_MK_PARAM ? "" : ".weight", name, sizeof name);
        return wm_err(err, WM_ERR_INPUT, "missing tensor '%s' (naming scheme '%s')", name, sch->name);
    }
    if (!st) snprintf(a->prefix, sizeof a->prefix, "%s", a->sub_prefix ? a->sub_prefix : f->prefix);
    a->sch = sch;
    a->scheme = sch->name;
    if (swiglu) {
        a->gated = 1;
        a->fused_gate_up = pat_of(sch, WM_M_L_GATE_UP) != NULL;
        a->act = WM_ACT_SILU;
        a->I = ((int64_t)((double)a->I * 2.0 / 3.0) + 7) / 8 * 8;
    }
    a->layer_scale = f->layer_scale;
    a->pos_antialias = f->pos_antialias;
    a->pos_fold = f->pos_fold;
    if (f->part_experts && (s = resolve_parts(a, err))) return s;
    if (f->pose && (s = wm_pose_resolve(a, top, err))) return s;
    a->vpool = f->pool;
    a->vhead = f->head;
    if (a->vpool == WM_VPOOL_DENSE_TANH) {
        const cJSON *pa = cJSON_GetObjectItemCaseSensitive(c->root, "pooler_act");
        if (pa && !cJSON_IsNull(pa) && (!cJSON_IsString(pa) || strcmp(pa->valuestring, "tanh")))
            return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'pooler_act': only tanh is modeled", c->file);
        int64_t ps;
        if ((s = arch_key_int(c, "pooler_output_size", a->H, 1, 1 << 16, &ps, err))) return s;
        if (ps != a->H)
            return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'pooler_output_size': %lld != hidden_size is not modeled",
                          c->file, (long long)ps);
        if (!has_mod(a, sch, st, WM_M_G_POOL, "Model") || a->task == WM_TASK_IMAGE_CLASSIFICATION)
            a->vpool = WM_VPOOL_NONE;
    }
    if (a->vpool == WM_VPOOL_MAP) {
        int use_head;
        if ((s = arch_key_bool(c, "vision_use_head", 1, &use_head, err))) return s;
        if (!use_head) a->vpool = WM_VPOOL_NONE;
    }
    if (a->sub_prefix) a->vpool = WM_VPOOL_NONE; /* a composite's encoder: last_hidden_state only */
    if (a->vpool == WM_VPOOL_LAST_HEAD && (s = arch_key_int(c, "projection_size", a->H, 1, 1 << 16, &a->proj, err)))
        return s;
    if (a->task == WM_TASK_IMAGE_CLASSIFICATION && f->dist) {
        int teacher = st ? arch_st_find(st, "cls_classifier.weight") != NULL
                         : c->n_architectures && strstr(c->architectures[0], "WithTeacher") != NULL;
        if (teacher) a->vhead = WM_VHEAD_CLS_DIST_AVG;
    }
    if (pat_of(sch, WM_M_G_PROJ)) {
        int64_t pd;
        if ((s = arch_key_int(parent ? parent : c, "projection_dim", 512, 1, 1 << 16, &pd, err))) return s;
        if (parent || has_mod(a, sch, st, WM_M_G_PROJ, "WithProjection")) a->proj = pd;
    }
    if ((s = fill_all(a, f, sch, st, qkv_bias, err))) return s;
    a->qkv_bias = wm_arch_mod(a, 0, WM_M_L_Q)->has_bias || wm_arch_mod(a, 0, WM_M_L_QKV)->has_bias;
    a->o_bias = wm_arch_mod(a, 0, WM_M_L_O)->has_bias;
    a->mlp_bias = wm_arch_mod(a, 0, WM_M_L_DOWN)->has_bias;
    a->n_head_mods = wm_arch_mod(a, -1, WM_M_H_1)->present ? 2 : wm_arch_mod(a, -1, WM_M_H_0)->present ? 1 : 0;
    return WM_OK;
}

/* text_config / vision_config of a two-tower config (an encoder-decoder's encoder / decoder), parsed as configs of
   their own (owned by a: tower_cfg[t]); model_type NULL: any. */
wm_status arch_sub_config(wm_arch *a, const wm_hf_config *c, const char *key, const char *model_type, int t,
                          wm_error *err) {
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(c->root, key);
    if (!cJSON_IsObject(o)) return wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected an object", c->file, key);
    char *text = cJSON_PrintUnformatted(o);
    a->tower_cfg[t] = calloc(1, sizeof *a->tower_cfg[t]);
    if (!text || !a->tower_cfg[t]) {
        free(text);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    char label[PATH_MAX + 32];
    snprintf(label, sizeof label, "%s: %s", c->file, key);
    wm_status s = wm_hf_config_parse(text, strlen(text), label, a->tower_cfg[t], err);
    free(text);
    if (s) {
        free(a->tower_cfg[t]);
        a->tower_cfg[t] = NULL;
        return s;
    }
    const char *mt = a->tower_cfg[t]->model_type;
    if (mt && model_type && strcmp(mt, model_type))
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'model_type': '%s', expected '%s'", label, mt, model_type);
    return WM_OK;
}

wm_status wm_vis_resolve(const wm_hf_config *c, const wm_st_file *st, int task, wm_arch *a, wm_error *err) {
    const wm_vis_family *f = wm_vis_find(c->model_type);
    wm_status s;
    if (f->backbone_key) { /* the transformer's keys in a sub-config, the head's in c (VitPose) */
        if ((s = arch_sub_config(a, c, f->backbone_key, f->backbone_type, 0, err)) ||
            (s = resolve_tower(a, f, a->tower_cfg[0], st, task, c, err)))
            return s;
        if (st && (s = wm_pose_check(a, st, err))) return s;
    } else if (f->graph != WM_GRAPH_DUAL) {
        if ((s = resolve_tower(a, f, c, st, task, NULL, err))) return s;
    } else {
        a->cfg = c;
        a->random = st == NULL;
        a->model_type = f->model_type;
        a->kind = WM_ENCODER;
        a->scheme = f->scheme;
        a->sch = vis_scheme(f->scheme);
        if ((s = resolve_task(a, f, task, c, err))) return s;
        static const char *const keys[2] = {"text_config", "vision_config"};
        for (int t = 0; t < 2; t++) {
            if ((s = arch_sub_config(a, c, keys[t], f->towers[t], t, err))) return s;
            if (!(a->tower[t] = calloc(1, sizeof *a->tower[t]))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
            const wm_vis_family *tf = wm_vis_find(f->towers[t]);
            int tt = t ? WM_TASK_IMAGE_FEATURE_EXTRACTION : WM_TASK_FEATURE_EXTRACTION;
            if ((s = resolve_tower(a->tower[t], tf, a->tower_cfg[t], st, tt, c, err))) return s;
            arch_count_params(a->tower[t]); /* the two-tower total (and its external-data decision) adds them */
        }
        int64_t pd = wm_vis_embed_dim(a->tower[0]), vd = wm_vis_embed_dim(a->tower[1]);
        if (pd != vd)
            return wm_err(err, WM_ERR_INPUT, "%s: the text tower's embeddings have %lld values, the image tower's %lld "
                          "(projection_dim / projection_size / hidden_size)", c->file, (long long)pd, (long long)vd);
        a->proj = pd;
        a->V = a->tower[0]->V;
        a->P = a->tower[0]->P;
        a->image = a->tower[1]->image;
        a->image_w = a->tower[1]->image_w;
        a->C = a->tower[1]->C;
        a->eos_id = a->tower[0]->eos_id;
        a->L = 0;
        a->mods = calloc(WM_M_COUNT, sizeof *a->mods);
        if (!a->mods) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        arch_want w[2] = {{WM_M_G_SCALE, -1, "logit_scale", WM_MK_PARAM, D_1, D_1, 1, 0},
                     {WM_M_G_BIAS, -1, "logit_bias", WM_MK_PARAM, D_1, D_1, f->logit_bias, 0}};
        for (int k = 0; k < 2; k++)
            if ((s = arch_fill_module(a, st, &w[k], err)) ||
                (s = arch_check_shape(a, arch_mod_mut(a, -1, w[k].mod), err)))
                return s;
    }
    if (st && (s = arch_check_unused(a, st, err))) return s;
    arch_count_params(a);
    return WM_OK;
}

wm_status wm_vis_resolve_tower_of(const wm_hf_config *c, const wm_st_file *st, int task, int t, wm_arch *a,
                                  wm_error *err) {
    const wm_vis_family *f = wm_vis_find(c->model_type);
    static const char *const keys[2] = {"text_config", "vision_config"};
    wm_status s = arch_sub_config(a, c, keys[t], f->towers[t], t, err);
    if (s) return s;
    const wm_vis_family *tf = wm_vis_find(f->towers[t]);
    if ((s = resolve_tower(a, tf, a->tower_cfg[t], st, task, c, err))) return s;
    snprintf(a->inference_class, sizeof a->inference_class, "%sModelWithProjection", tf->class_stem);
    a->tower_of = t + 1;
    if (st && (s = arch_check_unused(a, st, err))) return s;
    arch_count_params(a);
    return WM_OK;
}

/* A family that can be a composite's image encoder: an image transformer whose last_hidden_state is its final-normed
   sequence (CLIP's towers take it before the final norm: not modeled). */
static int encoder_family(const wm_vis_family *f) {
    return f && f->graph == WM_GRAPH_VIT && f->pool != WM_VPOOL_NORM_CLS;
}

wm_status wm_vis_resolve_encoder(const wm_hf_config *c, const wm_st_file *st, const char *prefix, wm_arch *a,
                                 wm_error *err) {
    const wm_vis_family *f = wm_vis_find(c->model_type);
    if (!encoder_family(f)) {
        char known[512] = "";
        for (size_t i = 0, u = 0; i < wm_n_vis_families && u < sizeof known; i++)
            if (encoder_family(&wm_vis_families[i]))
                u += (size_t)snprintf(known + u, sizeof known - u, "%s%s", u ? ", " : "",
                                      wm_vis_families[i].model_type);
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'model_type': '%s' is not supported as the image encoder "
                      "(%s)", c->file, c->model_type ? c->model_type : "(missing)", known);
    }
    a->sub_prefix = prefix;
    wm_status s = resolve_tower(a, f, c, st, WM_TASK_IMAGE_FEATURE_EXTRACTION, NULL, err);
    if (!s) arch_count_params(a);
    return s;
}

int64_t wm_vis_embed_dim(const wm_arch *a) {
    if (wm_arch_mod(a, -1, WM_M_G_PROJ)->present || a->vpool == WM_VPOOL_LAST_HEAD) return a->proj;
    return a->H;
}

wm_status wm_arch_set_image(wm_arch *a, int64_t image, const char *label, wm_error *err) {
    if (a->graph == WM_GRAPH_DUAL) {
        wm_status s = wm_arch_set_image(a->tower[1], image, label, err);
        if (!s) a->image = image;
        return s;
    }
    if (a->graph != WM_GRAPH_VIT || a->image != a->image_w || a->pos_fold) {
        char cfg[48];
        if (a->image != a->image_w) snprintf(cfg, sizeof cfg, "%lld x %lld", (long long)a->image, (long long)a->image_w);
        else snprintf(cfg, sizeof cfg, "%lld", (long long)a->image);
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'export.input_tensors[pixel_values].shape': image size %lld, "
                      "but %s builds at its config's image_size %s only", label, (long long)image, a->model_type, cfg);
    }
    if (image < 1 || image > 8192 || image % a->patch)
        return wm_err(err, WM_ERR_INPUT, "%s: field 'export.input_tensors[pixel_values].shape': image size %lld is "
                      "not a multiple of patch_size %lld (at most 8192)", label, (long long)image, (long long)a->patch);
    int64_t side = image / a->patch, extra = a->n_pos - a->n_patch;
    if (!a->pos_side) a->pos_side = a->image / a->patch;
    if (side == a->pos_side) a->pos_side = 0;
    a->image = a->image_w = image;
    a->n_patch = side * side;
    a->n_pos = a->n_patch + extra;
    a->P = a->n_pos;
    return WM_OK;
}

size_t wm_vis_tasks(const wm_arch *a, int *out) {
    const wm_vis_family *f = a->fam;
    size_t n = 0;
    switch (f->graph) {
    case WM_GRAPH_DUAL: out[n++] = WM_TASK_ZERO_SHOT_IMAGE_CLASSIFICATION; break;
    case WM_GRAPH_CLIP_TEXT: out[n++] = WM_TASK_FEATURE_EXTRACTION; break;
    case WM_GRAPH_AUDIO:
        out[n++] = WM_TASK_AUDIO_CLASSIFICATION;
        out[n++] = WM_TASK_ASR;
        break;
    default:
        if (f->pose) {
            out[n++] = WM_TASK_KEYPOINT_DETECTION;
            break;
        }
        if (f->classify) out[n++] = WM_TASK_IMAGE_CLASSIFICATION;
        out[n++] = WM_TASK_IMAGE_FEATURE_EXTRACTION;
        break;
    }
    return n;
}

static void tower_features(const wm_arch *a, wm_json *j, const char *who) {
    char b[256];
    if (a->graph == WM_GRAPH_CLIP_TEXT) {
        snprintf(b, sizeof b, "%stoken and learned position embeddings (%lld), %s", who, (long long)a->P,
                 a->causal ? "causal mask" : "bidirectional attention");
        wm_json_str(j, NULL, b);
        if (a->eos_id < 0) snprintf(b, sizeof b, "%spooled at the highest input id (eos_token_id 2)", who);
        else snprintf(b, sizeof b, "%spooled at the first eos_token_id %lld", who, (long long)a->eos_id);
        if (a->vpool == WM_VPOOL_EOS) wm_json_str(j, NULL, b);
    } else {
        snprintf(b, sizeof b, "%spatch embedding: Conv %lldx%lld stride %lld pad %lld over %lld channels, %lldx%lld "
                 "image, %lld patches", who, (long long)a->patch, (long long)a->patch, (long long)a->patch,
                 (long long)a->patch_pad, (long long)a->C, (long long)a->image, (long long)a->image_w,
                 (long long)a->n_patch);
        wm_json_str(j, NULL, b);
        snprintf(b, sizeof b, "%s%s%s, learned positions (%lld)%s", who,
                 a->pos_fold ? "no CLS (its position row added to every patch)" :
                 a->n_pos > a->n_patch ? "CLS token" : "no CLS",
                 wm_arch_mod(a, -1, WM_M_G_DIST)->present ? " + distillation token" : "", (long long)a->n_pos,
                 "; other image sizes are refused (no position interpolation)");
        wm_json_str(j, NULL, b);
        if (a->n_reg) {
            snprintf(b, sizeof b, "%s%lld register tokens after CLS", who, (long long)a->n_reg);
            wm_json_str(j, NULL, b);
        }
        if (wm_arch_mod(a, -1, WM_M_G_PRE_NORM)->present) {
            snprintf(b, sizeof b, "%sLayerNorm before the layers (pre_layrnorm)", who);
            wm_json_str(j, NULL, b);
        }
    }
    snprintf(b, sizeof b, "%sLayerNorm eps %g, pre-norm layers, %s MLP (%s)%s", who, a->eps,
             a->gated ? "SwiGLU" : "plain", wm_act_name(a->act), a->layer_scale ? ", layer scale" : "");
    wm_json_str(j, NULL, b);
    static const char *const pools[] = {"none", "tanh(dense(CLS))", "CLS of the normed sequence",
                                        "final LayerNorm of CLS", "EOS token",
                                        "attention pooling by a learned probe (MAP head)", "last token through a linear"};
    snprintf(b, sizeof b, "%spooler_output: %s", who, pools[a->vpool]);
    if (a->vpool != WM_VPOOL_NONE) wm_json_str(j, NULL, b);
    if (a->proj) {
        snprintf(b, sizeof b, "%sprojection to %lld", who, (long long)a->proj);
        wm_json_str(j, NULL, b);
    }
    if (a->part) {
        snprintf(b, sizeof b, "%sViTPose++ MLP: fc2 to %lld, expert 0 of %lld (dataset_index 0) to the last %lld", who,
                 (long long)(a->H - a->part), (long long)a->n_part_experts, (long long)a->part);
        wm_json_str(j, NULL, b);
    }
}

void wm_vis_features(const wm_arch *a, wm_json *j) {
    char b[256];
    if (a->graph == WM_GRAPH_AUDIO) {
        wm_audio_features(a, j);
        return;
    }
    if (a->graph == WM_GRAPH_RESNET) {
        snprintf(b, sizeof b, "stem: Conv 7x7 stride 2 to %lld channels + BatchNorm + ReLU + MaxPool 3x3 stride 2",
                 (long long)a->E);
        wm_json_str(j, NULL, b);
        size_t u = 0;
        u += (size_t)snprintf(b, sizeof b, "%s stages:", a->bottleneck ? "bottleneck" : "basic");
        for (int64_t i = 0; i < a->n_stages && u < sizeof b; i++)
            u += (size_t)snprintf(b + u, sizeof b - u, " %lldx%lld", (long long)a->depths[i], (long long)a->hidden_sizes[i]);
        wm_json_str(j, NULL, b);
        wm_json_str(j, NULL, "BatchNorm folded into the convolutions; 1x1 Conv shortcuts where shape changes");
        wm_json_str(j, NULL, "global average pool");
    } else if (a->graph == WM_GRAPH_DUAL) {
        tower_features(a->tower[0], j, "text: ");
        tower_features(a->tower[1], j, "image: ");
        wm_json_str(j, NULL, "logits = exp(logit_scale) * cosine(text_embeds, image_embeds)");
    } else {
        tower_features(a, j, "");
    }
    if (a->pose_head) wm_pose_features(a, j);
    if (a->task == WM_TASK_IMAGE_CLASSIFICATION) {
        static const char *const heads[] = {"linear on CLS", "mean of the CLS and distillation linears",
                                            "linear on [CLS, mean of patch tokens]"};
        snprintf(b, sizeof b, "image-classification head: %s (%lld labels)",
                 a->graph == WM_GRAPH_RESNET ? "linear on the pooled features" : heads[a->vhead], (long long)a->labels);
        wm_json_str(j, NULL, b);
    }
}
