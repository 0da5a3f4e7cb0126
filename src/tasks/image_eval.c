/*
 * image_eval.c - `winml eval --mode task` for image-classification: top-1 and top-5 accuracy and macro F1 of a
 * build folder over a labelled image set (image_eval.h).
 */
#include "tasks/image_eval.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/table.h"
#include "eval/metrics.h"
#include "tasks/media_table.h"
#include "tasks/vision.h"

#define IMG_MAX_ITEMS 1000000 /* files of one image folder */
#define WM_RETRIEVAL_MAX_PAIRS 5000  /* the similarity matrix is images x captions floats */
#define WM_RETRIEVAL_BLOCK 32        /* images and captions of one run */

typedef struct item {
    char *path;  /* malloc'ed (an image held in a table cell: "TABLE:ROW", its name in messages) */
    uint8_t *data; /* malloc'ed: the encoded image of a table's bytes cell (image.bytes); NULL: path is a file */
    size_t n;
    char *label; /* malloc'ed: a class name or an id as written */
    size_t line; /* table line (0: a folder) */
} item;

typedef struct items {
    item *v;
    size_t n, cap;
} items;

static void items_free(items *it) {
    for (size_t i = 0; i < it->n; i++) free(it->v[i].path), free(it->v[i].label), free(it->v[i].data);
    free(it->v);
}

static int push(items *it, const char *path, const char *label, size_t line) {
    if (it->n == it->cap) {
        size_t cap = it->cap ? 2 * it->cap : 64;
        item *v = realloc(it->v, cap * sizeof *v);
        if (!v) return -1;
        it->v = v, it->cap = cap;
    }
    item *e = &it->v[it->n];
    e->data = NULL, e->n = 0;
    e->path = strdup(path), e->label = strdup(label), e->line = line;
    if (!e->path || !e->label) return free(e->path), free(e->label), -1;
    it->n++;
    return 0;
}

static int is_image_name(const char *n) {
    const char *dot = strrchr(n, '.');
    return n[0] != '.' && dot && (!strcasecmp(dot, ".png") || !strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"));
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The sorted names in dir that keep(name) accepts (malloc'ed array of malloc'ed names); -1 on error. */
static long sorted_names(const char *dir, int dirs, char ***out) {
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d) return -1;
    size_t n = 0, cap = 0;
    char **v = NULL;
    struct dirent *de;
    long rc = 0;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char p[4096];
        struct stat st;
        if (snprintf(p, sizeof p, "%s/%s", dir, de->d_name) >= (int)sizeof p || stat(p, &st)) continue;
        if (dirs ? !S_ISDIR(st.st_mode) : !(S_ISREG(st.st_mode) && is_image_name(de->d_name))) continue;
        if (n == cap) {
            char **nv = realloc(v, (cap = cap ? 2 * cap : 32) * sizeof *nv);
            if (!nv) { rc = -1; break; }
            v = nv;
        }
        if (n >= IMG_MAX_ITEMS || !(v[n] = strdup(de->d_name))) { rc = -1; break; }
        n++;
    }
    closedir(d);
    if (rc) {
        for (size_t i = 0; i < n; i++) free(v[i]);
        free(v);
        return -1;
    }
    if (n) qsort(v, n, sizeof *v, by_name);
    *out = v;
    return (long)n;
}

/*
 * An image folder: DIR/<class>/<image>.png|jpg|jpeg, classes and files in name order, taken round-robin over the
 * classes (one of each class, then the second of each ...) so that the first --samples items cover every class.
 */
static wm_status read_folder(const char *dir, size_t max, items *it, wm_error *err) {
    char **cls = NULL;
    long nc = sorted_names(dir, 1, &cls);
    if (nc < 0) return wm_err(err, WM_ERR_INPUT, "%s: cannot list the class folders", dir);
    if (!nc) return wm_err(err, WM_ERR_INPUT, "%s: no class folders (DIR/<class>/<image>.png|jpg)", dir);
    char ***files = calloc((size_t)nc, sizeof *files);
    long *nf = calloc((size_t)nc, sizeof *nf);
    wm_status st = files && nf ? WM_OK : wm_err(err, WM_ERR_NOMEM, "out of memory");
    long most = 0;
    for (long c = 0; !st && c < nc; c++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, cls[c]);
        if ((nf[c] = sorted_names(p, 0, &files[c])) < 0) st = wm_err(err, WM_ERR_INPUT, "%s: cannot list it", p);
        else if (nf[c] > most) most = nf[c];
    }
    for (long k = 0; !st && k < most && (!max || it->n < max); k++)
        for (long c = 0; !st && c < nc && (!max || it->n < max); c++) {
            if (k >= nf[c]) continue;
            char p[8192];
            snprintf(p, sizeof p, "%s/%s/%s", dir, cls[c], files[c][k]);
            if (push(it, p, cls[c], 0)) st = wm_err(err, WM_ERR_NOMEM, "out of memory");
        }
    if (!st && !it->n) st = wm_err(err, WM_ERR_INPUT, "%s: no .png / .jpg images in its class folders", dir);
    for (long c = 0; c < nc; c++) {
        for (long k = 0; files && k < nf[c]; k++) free(files[c][k]);
        if (files) free(files[c]);
        free(cls[c]);
    }
    free(files), free(nf), free(cls);
    return st;
}

/*
 * A table of images (paths relative to the table's folder, or the `datasets` Image feature's bytes: media_table.h)
 * and labels (captions: the captions of a retrieval set; else class labels); the files read go into j.
 */
static wm_status read_table(const wm_task_opts *o, int captions, items *it, wm_json *j, wm_error *err) {
    static const char *const dimg[] = {"image", "img", "image_path", "path", "file", "filename", NULL};
    static const char *const dlab[] = {"label", "labels", "class", NULL};
    static const char *const dcap[] = {"caption", "text", "sentence", "captions", NULL};
    wm_media_cols c = {.kind = "image", .want_media = o->col_image ? o->col_image : o->col_text, .media_defaults = dimg,
                       .what = captions ? "caption" : "label", .want_target = captions ? o->col_caption : o->col_label,
                       .target_flag = captions ? "caption" : "label", .target_defaults = captions ? dcap : dlab};
    wm_media_rows r;
    wm_status st = wm_media_rows_read(o, &c, &r, j, err);
    for (size_t i = 0; !st && i < r.n; i++) {
        const wm_media_row *e = &r.v[i];
        if (e->data && captions) {
            st = wm_err(err, WM_ERR_INPUT, "%s: images held in the table are read for image-classification; "
                        "image-text retrieval reads image files", e->name);
            break;
        }
        if (push(it, e->name, e->target, e->line) || (e->data && !(it->v[it->n - 1].data = malloc(e->n ? e->n : 1)))) {
            st = wm_err(err, WM_ERR_NOMEM, "out of memory");
            break;
        }
        if (e->data) memcpy(it->v[it->n - 1].data, e->data, e->n), it->v[it->n - 1].n = e->n;
    }
    wm_media_rows_free(&r);
    return st;
}

/* The class id of label: an id2label name (exact, then ignoring case), else a whole number below n; -1: none. */
static long class_of(const wm_vision *v, size_t n, const char *label) {
    for (size_t i = 0; i < n; i++)
        if (wm_vision_label(v, i) && !strcmp(wm_vision_label(v, i), label)) return (long)i;
    for (size_t i = 0; i < n; i++)
        if (wm_vision_label(v, i) && !strcasecmp(wm_vision_label(v, i), label)) return (long)i;
    char *end;
    long k = strtol(label, &end, 10);
    return *label && !*end && k >= 0 && (size_t)k < n ? k : -1;
}

/* 1-based rank of the first of n scores y (stride ys) for which own(k) holds, ordered by score descending and
 * index ascending on ties (a stable sort of -y). */
static size_t first_rank(const float *y, size_t n, size_t ys, const unsigned char *own) {
    size_t best = SIZE_MAX;
    for (size_t k = 0; k < n; k++)
        if (own[k] && (best == SIZE_MAX || y[k * ys] > y[best * ys])) best = k;
    size_t r = 1;
    for (size_t k = 0; k < n; k++) r += y[k * ys] > y[best * ys] || (y[k * ys] == y[best * ys] && k < best);
    return r;
}

static void rank_metrics(wm_json *j, const char *name, const size_t *rank, size_t n) {
    static const size_t ks[] = {1, 5, 10};
    wm_json_obj(j, name);
    for (size_t a = 0; a < 3; a++) {
        size_t hit = 0;
        for (size_t i = 0; i < n; i++) hit += rank[i] <= ks[a];
        char key[32];
        snprintf(key, sizeof key, "recall@%zu", ks[a]);
        wm_json_num(j, key, (double)hit / (double)n);
    }
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += (double)rank[i];
    wm_json_num(j, "mean_rank", sum / (double)n);
    wm_json_obj_end(j);
}

/*
 * Image-text retrieval (image_eval.h): the similarity matrix of the set's distinct images (in order of first
 * appearance) and all its captions, in blocks of WM_RETRIEVAL_BLOCK images x captions; the ranks of the right
 * caption(s) per image and of the right image per caption.
 */
static wm_status retrieval(wm_vision *v, const wm_task_opts *o, wm_json *j, wm_error *err) {
    items it = {0};
    struct stat sb;
    wm_status st = WM_OK;
    if (stat(o->dataset, &sb)) st = wm_err(err, WM_ERR_INPUT, "%s: no such file", o->dataset);
    else if (S_ISDIR(sb.st_mode))
        st = wm_err(err, WM_ERR_INPUT, "%s: image-text retrieval reads a table (CSV, TSV, JSONL) of image and "
                    "caption columns, not a folder", o->dataset);
    else {
        wm_json_str(j, "task", "image-text-retrieval");
        wm_json_str(j, "dataset", o->dataset);
        st = read_table(o, 1, &it, j, err);
    }
    if (!st && it.n > WM_RETRIEVAL_MAX_PAIRS)
        st = wm_err(err, WM_ERR_INPUT, "%s: %zu pairs: at most %d for image-text retrieval (--samples N)",
                    o->dataset, it.n, WM_RETRIEVAL_MAX_PAIRS);
    size_t nc = it.n, ni = 0;
    size_t *img_of = NULL, *rank_i = NULL, *rank_t = NULL; /* caption -> image; ranks per image / caption */
    const char **ipaths = NULL, **caps = NULL;
    float *sim = NULL;
    unsigned char *own = NULL;
    if (!st && (!(img_of = malloc(nc * sizeof *img_of)) || !(ipaths = malloc(nc * sizeof *ipaths)) ||
                !(caps = malloc(nc * sizeof *caps)) || !(rank_t = malloc(nc * sizeof *rank_t)) ||
                !(own = malloc(nc))))
        st = wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (size_t r = 0; !st && r < nc; r++) {
        size_t k = 0;
        while (k < ni && strcmp(ipaths[k], it.v[r].path)) k++;
        if (k == ni) ipaths[ni++] = it.v[r].path;
        img_of[r] = k, caps[r] = it.v[r].label;
    }
    if (!st && (!(sim = malloc(ni * nc * sizeof *sim)) || !(rank_i = malloc(ni * sizeof *rank_i))))
        st = wm_err(err, WM_ERR_NOMEM, "out of memory");
    size_t bi = wm_vision_max_images(v) ? wm_vision_max_images(v) : WM_RETRIEVAL_BLOCK;
    for (size_t i0 = 0; !st && i0 < ni; i0 += bi)
        for (size_t c0 = 0; !st && c0 < nc; c0 += WM_RETRIEVAL_BLOCK) {
            size_t mi = ni - i0 < bi ? ni - i0 : bi, mc = nc - c0 < WM_RETRIEVAL_BLOCK ? nc - c0 : WM_RETRIEVAL_BLOCK;
            wm_vision_out out;
            if ((st = wm_vision_similarity(v, ipaths + i0, mi, caps + c0, mc, &out, err))) break;
            for (size_t a = 0; a < mi; a++) memcpy(sim + (i0 + a) * nc + c0, out.y + a * mc, mc * sizeof *sim);
        }
    for (size_t i = 0; !st && i < ni; i++) { /* image -> text: the best-placed of its captions */
        for (size_t c = 0; c < nc; c++) own[c] = img_of[c] == i;
        rank_i[i] = first_rank(sim + i * nc, nc, 1, own);
    }
    for (size_t c = 0; !st && c < nc; c++) { /* text -> image */
        memset(own, 0, ni);
        own[img_of[c]] = 1;
        rank_t[c] = first_rank(sim + c, ni, nc, own);
    }
    if (!st) {
        wm_json_str(j, "dataset_layout", "table");
        wm_json_obj(j, "metrics");
        wm_json_uint(j, "samples", nc);
        wm_json_uint(j, "images", ni);
        wm_json_uint(j, "captions", nc);
        wm_json_uint(j, "max_caption_tokens", wm_vision_max_tokens(v));
        rank_metrics(j, "image_to_text", rank_i, ni);
        rank_metrics(j, "text_to_image", rank_t, nc);
        wm_json_obj_end(j);
    }
    free(img_of), free(rank_i), free(rank_t), free(ipaths), free(caps), free(sim), free(own);
    items_free(&it);
    return st;
}

wm_status wm_image_task_eval(const char *dir, const wm_task_opts *o, wm_json *j, wm_error *err) {
    wm_session_opts so = {0};
    if (o->session) so = *o->session;
    so.threads = o->threads;
    wm_vision *v = NULL;
    wm_status st = wm_vision_open(dir, &so, 0, &v, err);
    if (st) return st;
    if (!strcmp(wm_vision_task(v), "zero-shot-image-classification")) {
        st = retrieval(v, o, j, err);
        wm_vision_free(v);
        return st;
    }
    if (strcmp(wm_vision_task(v), "image-classification")) {
        st = wm_err(err, WM_ERR_USAGE, "%s: a %s build has no image task evaluation (image-classification; "
                    "image-text retrieval for a CLIP-style zero-shot-image-classification build)", dir,
                    wm_vision_task(v));
        wm_vision_free(v);
        return st;
    }
    items it = {0};
    struct stat sb;
    size_t max = o->samples > 0 ? (size_t)o->samples : 0;
    int folder = !stat(o->dataset, &sb) && S_ISDIR(sb.st_mode); /* else a table file or a hub data set */
    wm_json_str(j, "task", wm_vision_task(v));
    wm_json_str(j, "dataset", o->dataset);
    st = folder ? read_folder(o->dataset, max, &it, err) : read_table(o, 0, &it, j, err);
    int64_t *pred = NULL, *gold = NULL;
    size_t top5 = 0, n_classes = 0;
    if (!st && (!(pred = malloc(it.n * sizeof *pred)) || !(gold = malloc(it.n * sizeof *gold))))
        st = wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (size_t r = 0; !st && r < it.n; r++) {
        wm_vision_out out;
        if ((st = it.v[r].data ? wm_vision_run_bytes(v, it.v[r].path, it.v[r].data, it.v[r].n, &out, err)
                               : wm_vision_run(v, it.v[r].path, NULL, 0, &out, err)))
            break;
        n_classes = out.n;
        long g = class_of(v, out.n, it.v[r].label);
        if (g < 0) {
            if (it.v[r].line)
                st = wm_err(err, WM_ERR_INPUT, "%s:%zu: label '%.60s' is not a class of the model (config.json "
                            "id2label, or an id below %zu)", o->dataset, it.v[r].line, it.v[r].label, out.n);
            else
                st = wm_err(err, WM_ERR_INPUT, "%s/%s: class folder '%.60s' is not a label of the model (config.json "
                            "id2label, or an id below %zu)", o->dataset, it.v[r].label, it.v[r].label, out.n);
            break;
        }
        size_t best = 0, above = 0; /* above: classes scored higher than the gold one */
        for (size_t i = 1; i < out.n; i++) best = out.y[i] > out.y[best] ? i : best;
        for (size_t i = 0; i < out.n; i++) above += out.y[i] > out.y[g] || (out.y[i] == out.y[g] && i < (size_t)g);
        pred[r] = (int64_t)best, gold[r] = g;
        top5 += above < 5;
    }
    if (!st) {
        wm_json_str(j, "dataset_layout", folder ? "image folder (DIR/<class>/<image>)" : "table");
        wm_json_obj(j, "metrics");
        wm_json_uint(j, "samples", it.n);
        wm_json_num(j, "accuracy", wm_metric_accuracy(pred, gold, it.n));
        wm_json_num(j, "top5_accuracy", (double)top5 / (double)it.n);
        wm_json_num(j, "f1", wm_metric_f1(pred, gold, it.n, (int)(n_classes > 2 ? n_classes : 2)));
        wm_json_str(j, "f1_average", n_classes > 2 ? "macro" : "binary");
        wm_json_obj_end(j);
    }
    free(pred), free(gold);
    items_free(&it);
    wm_vision_free(v);
    return st;
}
