/*
 * sweep.c - what `winml sweep` runs over: the recipe list (a folder walked or
 * a list file), the reference's key of each recipe, shards, the failure
 * classes and the tiny config of a --random-weights build. The runs
 * themselves are in sweep_run.c.
 */
#define _GNU_SOURCE
#include "tasks/sweep.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "builder/arch.h"
#include "builder/export.h"
#include "builder/recipe.h"
#include "core/error.h"
#include "core/file.h"
#include "onnx/dtype.h"

#define MAX_DEPTH 8
#define MAX_LIST_BYTES (64u << 20)

/* ------------------------------------------------------------ names */

static const char *const EP_DIRS[] = {"cpu", "dml", "qnn", "openvino", "vitisai", "trtrtx", "migraphx", "cuda",
                                      "tensorrt", NULL};
static const char *const DEVICE_DIRS[] = {"cpu", "gpu", "npu", NULL};
static const char *const PRECISIONS[] = {"fp32", "fp16", "bf16", "w8a8", "w8a16", "int8", "int4", "int16", NULL};

static int in_list(const char *s, size_t n, const char *const *list) {
    for (; *list; list++)
        if (strlen(*list) == n && !strncmp(*list, s, n)) return 1;
    return 0;
}

/* A name part usable in a folder name: letters, digits, '-', '.', '_' (no "..", not empty). */
static int safe_part(const char *s, size_t n) {
    if (!n || (n == 1 && s[0] == '.') || (n == 2 && !strncmp(s, "..", 2))) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
              c == '_'))
            return 0;
    }
    return 1;
}

static int copy_part(char *dst, size_t cap, const char *s, size_t n) {
    if (n >= cap || !safe_part(s, n)) return -1;
    memcpy(dst, s, n);
    dst[n] = 0;
    return 0;
}

wm_status wm_sweep_parse_path(const char *path, wm_sweep_recipe *r, wm_error *err) {
    memset(r, 0, sizeof *r);
    if (strlen(path) >= sizeof r->path) return wm_err(err, WM_ERR_USAGE, "%.200s...: path too long", path);
    strcpy(r->path, path);
    /* the last four components: [model dir] [ep] [device] file */
    const char *comp[4] = {0};
    size_t len[4] = {0};
    const char *end = path + strlen(path);
    int k = 0;
    while (k < 4 && end > path) {
        const char *s = end;
        while (s > path && s[-1] != '/') s--;
        if (s == end) { /* a doubled or trailing slash */
            end--;
            continue;
        }
        comp[3 - k] = s;
        len[3 - k] = (size_t)(end - s);
        k++;
        end = s;
    }
    const char *file = comp[3];
    size_t fn = len[3];
    int nested = comp[0] && in_list(comp[1], len[1], EP_DIRS) && in_list(comp[2], len[2], DEVICE_DIRS);
    const char *mdir = nested ? comp[0] : comp[2];
    size_t mn = nested ? len[0] : len[2];
    static const char layout[] = "<org>_<name>/[<ep>/<device>/]<task>_<precision>_config[_<part>].json";
    if (!file || fn < 6 || strncmp(file + fn - 5, ".json", 5))
        return wm_err(err, WM_ERR_INPUT, "%s: not a recipe file (%s)", path, layout);
    /* file: <task>_<precision>_[<part>_]config[_<part>].json */
    const char *prec = NULL;
    size_t pn = 0;
    for (const char *p = file; p < file + fn && !prec; p++) {
        if (*p != '_') continue;
        const char *q = p + 1, *e = q;
        while (e < file + fn && *e != '_' && *e != '.') e++;
        if (e < file + fn && *e == '_' && in_list(q, (size_t)(e - q), PRECISIONS)) prec = q, pn = (size_t)(e - q);
    }
    if (!prec) return wm_err(err, WM_ERR_INPUT, "%s: the file name names no precision (%s)", path, layout);
    const char *rest = prec + pn + 1, *stop = file + fn - 5; /* after "<precision>_", before ".json" */
    const char *part = NULL;
    size_t partn = 0;
    if ((size_t)(stop - rest) >= 6 && !strncmp(rest, "config", 6)) {
        if (stop - rest > 6) {
            if (rest[6] != '_') return wm_err(err, WM_ERR_INPUT, "%s: the file name is not %s", path, layout);
            part = rest + 7, partn = (size_t)(stop - part);
        }
    } else if ((size_t)(stop - rest) > 7 && !strncmp(stop - 7, "_config", 7)) {
        part = rest, partn = (size_t)(stop - 7 - rest);
    } else
        return wm_err(err, WM_ERR_INPUT, "%s: the file name is not %s", path, layout);
    if (copy_part(r->task, sizeof r->task, file, (size_t)(prec - 1 - file)) ||
        copy_part(r->precision, sizeof r->precision, prec, pn) ||
        (part && copy_part(r->part, sizeof r->part, part, partn)))
        return wm_err(err, WM_ERR_INPUT, "%s: the file name is not %s (letters, digits, '-', '.', '_')", path, layout);
    const char *us = mdir ? memchr(mdir, '_', mn) : NULL;
    if (!mdir || !us || us == mdir || us + 1 == mdir + mn || !safe_part(mdir, mn))
        return wm_err(err, WM_ERR_INPUT, "%s: the recipe's folder is not named <org>_<name> (%s)", path, layout);
    size_t on = (size_t)(us - mdir);
    if (mn >= sizeof r->model_id) return wm_err(err, WM_ERR_INPUT, "%s: model folder name too long", path);
    snprintf(r->model_id, sizeof r->model_id, "%.*s/%.*s", (int)on, mdir, (int)(mn - on - 1), us + 1);
    if (nested) {
        copy_part(r->ep, sizeof r->ep, comp[1], len[1]);
        copy_part(r->device, sizeof r->device, comp[2], len[2]);
    }
    int n = snprintf(r->key, sizeof r->key, "%.*s__%.*s__%s__%s", (int)on, mdir, (int)(mn - on - 1), us + 1, r->task,
                     r->precision);
    if (r->part[0]) n += snprintf(r->key + n, sizeof r->key - (size_t)n, "__%s", r->part);
    if (nested && !(!strcmp(r->ep, "cpu") && !strcmp(r->device, "cpu")))
        n += snprintf(r->key + n, sizeof r->key - (size_t)n, "__%s-%s", r->ep, r->device);
    if ((size_t)n >= sizeof r->key) return wm_err(err, WM_ERR_INPUT, "%s: the result key is too long", path);
    return WM_OK;
}

/* ------------------------------------------------------------ listing */

typedef struct plist {
    char **v;
    size_t n, cap;
} plist;

static wm_status plist_add(plist *l, const char *p, wm_error *err) {
    if (l->n >= WM_SWEEP_MAX_RECIPES)
        return wm_err(err, WM_ERR_INPUT, "more than %d recipes", WM_SWEEP_MAX_RECIPES);
    if (l->n == l->cap) {
        size_t c = l->cap ? l->cap * 2 : 64;
        char **v = realloc(l->v, c * sizeof *v);
        if (!v) return wm_err(err, WM_ERR_NOMEM, "out of memory listing recipes");
        l->v = v, l->cap = c;
    }
    if (!(l->v[l->n] = strdup(p))) return wm_err(err, WM_ERR_NOMEM, "out of memory listing recipes");
    l->n++;
    return WM_OK;
}

static void plist_free(plist *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
}

static wm_status walk(const char *dir, int depth, plist *l, wm_error *err) {
    if (depth > MAX_DEPTH) return WM_OK;
    DIR *d = opendir(dir);
    if (!d) return wm_err(err, WM_ERR_IO, "%s: cannot read the folder: %s", dir, strerror(errno));
    wm_status st = WM_OK;
    struct dirent *e;
    while (!st && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue; /* ., .., hidden files and our temporaries */
        char p[4096];
        if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= sizeof p) {
            st = wm_err(err, WM_ERR_INPUT, "%s/%s: path too long", dir, e->d_name);
            break;
        }
        struct stat sb;
        if (lstat(p, &sb)) continue;
        if (S_ISDIR(sb.st_mode)) st = walk(p, depth + 1, l, err);
        else if (S_ISREG(sb.st_mode)) {
            size_t n = strlen(e->d_name);
            if (n > 5 && !strcmp(e->d_name + n - 5, ".json")) st = plist_add(l, p, err);
        }
    }
    closedir(d);
    return st;
}

static wm_status read_list(const char *file, plist *l, wm_error *err) {
    wm_map m;
    wm_status st = wm_map_file(file, 0, &m, err);
    if (st) return st;
    if (m.size > MAX_LIST_BYTES) {
        wm_unmap(&m);
        return wm_err(err, WM_ERR_INPUT, "%s: a recipe list over %u MiB", file, MAX_LIST_BYTES >> 20);
    }
    char base[4096];
    wm_path_dirname(file, base, sizeof base);
    const char *s = m.data ? (const char *)m.data : "", *end = s + m.size;
    size_t line = 0;
    while (!st && s < end) {
        const char *e = memchr(s, '\n', (size_t)(end - s));
        if (!e) e = end;
        line++;
        const char *a = s, *b = e;
        while (a < b && (*a == ' ' || *a == '\t')) a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t' || b[-1] == '\r')) b--;
        if (a < b && *a != '#') {
            char p[4096];
            size_t n = (size_t)(b - a);
            if (memchr(a, 0, n)) st = wm_err(err, WM_ERR_INPUT, "%s: line %zu: a NUL byte", file, line);
            else if (n + strlen(base) + 2 >= sizeof p) st = wm_err(err, WM_ERR_INPUT, "%s: line %zu: path too long", file, line);
            else {
                if (*a == '/') snprintf(p, sizeof p, "%.*s", (int)n, a);
                else snprintf(p, sizeof p, "%s/%.*s", base, (int)n, a);
                st = plist_add(l, p, err);
            }
        }
        s = e + 1;
    }
    wm_unmap(&m);
    if (!st && !l->n) st = wm_err(err, WM_ERR_INPUT, "%s: the list names no recipe", file);
    return st;
}

static int by_key(const void *a, const void *b) {
    return strcmp(((const wm_sweep_recipe *)a)->key, ((const wm_sweep_recipe *)b)->key);
}

wm_status wm_sweep_list(const char *spec, wm_sweep_recipe **out, size_t *n, wm_error *err) {
    *out = NULL;
    *n = 0;
    struct stat sb;
    if (stat(spec, &sb)) return wm_err(err, WM_ERR_USAGE, "-c %s: %s", spec, strerror(errno));
    plist l = {0};
    wm_status st;
    if (S_ISDIR(sb.st_mode)) {
        char root[4096];
        snprintf(root, sizeof root, "%s", spec);
        for (size_t k = strlen(root); k > 1 && root[k - 1] == '/'; k--) root[k - 1] = 0;
        st = walk(root, 0, &l, err);
        if (!st && !l.n) st = wm_err(err, WM_ERR_INPUT, "%s: no recipe (*.json) in the folder", spec);
    } else if (S_ISREG(sb.st_mode)) {
        st = read_list(spec, &l, err);
    } else
        st = wm_err(err, WM_ERR_USAGE, "-c %s: neither a folder of recipes nor a list file", spec);
    wm_sweep_recipe *v = NULL;
    if (!st && !(v = calloc(l.n, sizeof *v))) st = wm_err(err, WM_ERR_NOMEM, "out of memory listing recipes");
    for (size_t i = 0; !st && i < l.n; i++) {
        if ((st = wm_sweep_parse_path(l.v[i], &v[i], err))) break;
        wm_recipe r;
        if ((st = wm_recipe_load(l.v[i], &r, err))) break; /* the message names the file and field */
        snprintf(v[i].model_type, sizeof v[i].model_type, "%s", r.model_type);
        wm_recipe_free(&r);
    }
    if (!st) {
        qsort(v, l.n, sizeof *v, by_key);
        for (size_t i = 1; i < l.n && !st; i++)
            if (!strcmp(v[i - 1].key, v[i].key))
                st = wm_err(err, WM_ERR_INPUT, "%s and %s: both give the result key %s", v[i - 1].path, v[i].path,
                            v[i].key);
    }
    if (st) free(v);
    else *out = v, *n = l.n;
    plist_free(&l);
    return st;
}

/* ------------------------------------------------------------ shards */

wm_status wm_sweep_parse_shard(const char *s, int *i, int *n, wm_error *err) {
    /* digits '/' digits, nothing else (strtol alone would take blanks, signs and an empty I) */
    const char *slash = strchr(s, '/');
    int ok = slash && slash > s && slash[1];
    for (const char *p = s; ok && *p; p++) ok = p == slash || (*p >= '0' && *p <= '9');
    char *e1 = NULL, *e2 = NULL;
    errno = 0;
    long a = ok ? strtol(s, &e1, 10) : 0, b = ok ? strtol(slash + 1, &e2, 10) : 0;
    if (!ok || errno || e1 != slash || *e2 || b < 1 || b > 100000 || a < 0 || a >= b)
        return wm_err(err, WM_ERR_USAGE, "--shard: '%s' is not I/N with 0 <= I < N <= 100000", s);
    *i = (int)a;
    *n = (int)b;
    return WM_OK;
}

int wm_sweep_in_shard(size_t idx, int i, int n) { return n <= 1 || idx % (size_t)n == (size_t)i; }

/* ------------------------------------------------------------ classes */

const char *wm_sweep_stage_name(int stage) {
    static const char *const names[] = {"build", "analyze", "perf", "export_reference", "compare"};
    return stage >= 0 && stage < WM_SW_NSTAGES ? names[stage] : "?";
}

const char *wm_sweep_classify(int stage, const wm_sweep_proc *p, const char *stderr_text, const char *verdict) {
    if (!p->timed_out && !p->signal && p->exit_code == 0) return NULL;
    if (p->timed_out) return "TIMEOUT";
    if (p->exit_code == 127 && !p->signal) return "ENVIRONMENT"; /* the stage could not be started */
    const char *t = stderr_text ? stderr_text : "";
    switch (stage) {
    case WM_SW_BUILD:
    case WM_SW_EXPORT_REF:
        if (strstr(t, "field 'quant") || strstr(t, "field 'optim")) return "OPT_FAIL";
        if (strstr(t, "field 'compile")) return "COMPILE_FAIL";
        return "EXPORT_FAIL";
    case WM_SW_ANALYZE:
        if (p->exit_code != 1 || p->signal) return "UNKNOWN";
        return verdict && strcmp(verdict, "unsupported") ? NULL : "ANALYZER_BLOCK";
    case WM_SW_PERF:
    case WM_SW_COMPARE: return "RUNTIME_FAIL";
    default: return "UNKNOWN";
    }
}

/* ------------------------------------------------------------ tiny config */

/* A small list key of n values. */
static void tiny_list(wm_json *j, const char *key, const int64_t *v, size_t n) {
    wm_json_arr(j, key);
    for (size_t i = 0; i < n; i++) wm_json_int(j, NULL, v[i]);
    wm_json_arr_end(j);
}

/* The small sizes of a tiny config into the open object j (hidden_size hidden): text keys (positions for seq tokens), image keys when
   img > 0 (a patch of 16 or 14 that divides it), a CNN's stages (ResNet: hidden_sizes, depths); a speech
   encoder's feature encoder and positional convolution when audio. img_h: the image's height when it is not img
   (image_size [img_h, img]), 0 when square. */
static void tiny_keys(wm_json *j, int64_t seq, int64_t img, int64_t img_h, int64_t ch, int audio, int64_t hidden) {
    wm_json_int(j, "hidden_size", hidden);
    wm_json_int(j, "intermediate_size", 64);
    wm_json_int(j, "num_hidden_layers", 1);
    wm_json_int(j, "num_attention_heads", 4);
    wm_json_int(j, "num_key_value_heads", 4);
    wm_json_int(j, "vocab_size", 96);
    wm_json_int(j, "max_position_embeddings", (seq ? seq : 512) + 2); /* + fairseq's padding offset */
    if (img > 0) {
        if (img_h > 0 && img_h != img) {
            int64_t hw[2] = {img_h, img};
            tiny_list(j, "image_size", hw, 2);
        } else {
            wm_json_int(j, "image_size", img);
        }
        wm_json_int(j, "patch_size", img % 16 == 0 ? 16 : img % 14 == 0 ? 14 : img);
        wm_json_int(j, "num_channels", ch);
        wm_json_int(j, "embedding_size", 8);
        wm_json_arr(j, "hidden_sizes");
        wm_json_int(j, NULL, 8);
        wm_json_int(j, NULL, 16);
        wm_json_arr_end(j);
        wm_json_arr(j, "depths");
        wm_json_int(j, NULL, 1);
        wm_json_int(j, NULL, 1);
        wm_json_arr_end(j);
    }
    if (audio) {
        static const int64_t dim[3] = {16, 16, 16}, kernel[3] = {10, 3, 3}, stride[3] = {5, 2, 2};
        tiny_list(j, "conv_dim", dim, 3);
        tiny_list(j, "conv_kernel", kernel, 3);
        tiny_list(j, "conv_stride", stride, 3);
        wm_json_int(j, "num_conv_pos_embeddings", 16);
        wm_json_int(j, "num_conv_pos_embedding_groups", 4);
        wm_json_int(j, "classifier_proj_size", 16);
    }
}

/* An encoder-decoder part recipe's sizes (recipe_s2s.c): the decoder's heads, head size, layers and cache slots
   from past_0_key and the past count, the encoder's width and length from encoder_hidden_states (an encoder part:
   small ones); the rest tiny; a sequence classifier's 3 labels and BART's special ids (eos 2). A composite
   (vision-encoder-decoder) gets its encoder and decoder sub-configs. */
static void tiny_s2s(wm_json *j, const wm_recipe *r, int64_t seq, int64_t img, int64_t ch) {
    int64_t heads = 4, hd = 8, layers = 1, slots = 8, width = 32, n = 0;
    const wm_io_spec *kv = wm_recipe_input(r, "past_0_key"), *eh = wm_recipe_input(r, "encoder_hidden_states");
    if (kv && kv->rank == 4 && kv->dims[1].v > 0 && kv->dims[2].v > 0 && kv->dims[3].v > 0)
        heads = kv->dims[1].v, slots = kv->dims[2].v, hd = kv->dims[3].v;
    for (size_t i = 0; i < r->n_inputs; i++) n += !strncmp(r->inputs[i].name, "past_", 5);
    if (n >= 2) layers = n / 2;
    if (eh && eh->rank == 3 && eh->dims[2].v > 0) width = eh->dims[2].v;
    if (eh && eh->rank == 3 && eh->dims[1].v > seq) seq = eh->dims[1].v;
    int64_t pos = slots > seq ? slots : seq;
    const char *ek, *dk, *et, *dt;
    int comp = wm_s2s_composite_keys(r->model_type, &ek, &dk, &et, &dt);
    wm_json_str(j, "model_type", r->model_type);
    if (comp) {
        wm_json_obj(j, ek);
        wm_json_str(j, "model_type", et);
        tiny_keys(j, 0, img ? img : 384, 0, ch, 0, width);
        wm_json_obj_end(j);
        wm_json_obj(j, dk);
        wm_json_str(j, "model_type", dt);
    }
    wm_json_int(j, "d_model", heads * hd);
    wm_json_int(j, "encoder_layers", 1);
    wm_json_int(j, "decoder_layers", layers);
    wm_json_int(j, "encoder_attention_heads", heads);
    wm_json_int(j, "decoder_attention_heads", heads);
    wm_json_int(j, "encoder_ffn_dim", 16);
    wm_json_int(j, "decoder_ffn_dim", 16);
    wm_json_int(j, "vocab_size", 96);
    wm_json_int(j, "max_position_embeddings", pos);
    if (wm_recipe_s2s_part_kind(r) == WM_S2S_PART_CLS) { /* the head's labels and the ids the classifier reads */
        wm_json_int(j, "num_labels", 3);
        wm_json_int(j, "bos_token_id", 0);
        wm_json_int(j, "pad_token_id", 1);
        wm_json_int(j, "eos_token_id", 2);
        wm_json_int(j, "decoder_start_token_id", 2);
    }
    if (comp) wm_json_obj_end(j);
}

wm_status wm_sweep_tiny_config(const char *recipe_path, wm_json *j, wm_error *err) {
    wm_recipe r;
    wm_status st = wm_recipe_load(recipe_path, &r, err);
    if (st) return st;
    int64_t seq = 0;
    for (size_t i = 0; i < r.n_inputs; i++) {
        const wm_io_spec *s = &r.inputs[i];
        if ((s->dtype != WM_DT_INT32 && s->dtype != WM_DT_INT64) || s->rank < 1) continue;
        int64_t d = s->dims[s->rank - 1].v;
        if (d > seq && d <= (1 << 20)) seq = d;
    }
    int64_t img = 0, img_h = 0, ch = 3;
    const wm_io_spec *px = wm_recipe_input(&r, "pixel_values");
    if (px && px->rank == 4 && px->dims[3].v > 0 && px->dims[3].v <= 4096) img = px->dims[3].v;
    if (img && px->dims[2].v > 0 && px->dims[2].v <= 4096) img_h = px->dims[2].v;
    if (px && px->rank == 4 && px->dims[1].v > 0 && px->dims[1].v <= 16) ch = px->dims[1].v;
    /* the same small sizes for every model_type; the config parser reads the canonical key names of all. A tower
       (clip_text_model) comes from its two-tower checkpoint (clip), as the real ones do. */
    const char *parent = wm_arch_tower_parent(r.model_type), *bb_type = NULL,
               *bb_key = wm_arch_backbone_key(r.model_type, &bb_type);
    wm_json_obj(j, NULL);
    if (wm_recipe_s2s_part_kind(&r)) tiny_s2s(j, &r, seq, img, ch);
    else if (bb_key) { /* a backbone family (VitPose): the transformer in its sub-config, its last layer's features */
        wm_json_str(j, "model_type", r.model_type);
        wm_json_obj(j, bb_key);
        wm_json_str(j, "model_type", bb_type);
        tiny_keys(j, 0, img ? img : 224, img_h, ch, 0, 32);
        static const int64_t last[1] = {1}; /* tiny_keys' one layer */
        tiny_list(j, "out_indices", last, 1);
        wm_json_obj_end(j);
    } else if (parent) {
        wm_json_str(j, "model_type", parent);
        wm_json_int(j, "projection_dim", 16);
        wm_json_obj(j, "text_config");
        tiny_keys(j, seq, 0, 0, ch, 0, 32);
        wm_json_obj_end(j);
        wm_json_obj(j, "vision_config");
        tiny_keys(j, 0, img ? img : 224, 0, ch, 0, 32);
        wm_json_obj_end(j);
    } else {
        if (r.model_type[0]) wm_json_str(j, "model_type", r.model_type);
        tiny_keys(j, seq, img, 0, ch, wm_recipe_input(&r, "input_values") != NULL, 32);
    }
    wm_json_obj_end(j);
    wm_recipe_free(&r);
    return j->oom ? wm_err(err, WM_ERR_NOMEM, "out of memory") : WM_OK;
}
