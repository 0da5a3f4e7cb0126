#include "tasks/task_eval.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder/recipe.h"
#include "core/error.h"
#include "core/file.h"
#include "core/table.h"
#include "eval/metrics.h"
#include "hf/dataset.h"
#include "hf/tokenizer.h"
#include "llm/causal_lm.h"
#include "tasks/encoder.h"
#include "tasks/image_eval.h"
#include "tasks/s2s_text.h"
#include "tasks/speech_eval.h"

/* The column named by spec, else the first of the default names present. */
static int column(const wm_table *t, const char *spec, const char *const *defaults, const char *what, const char *path,
                  wm_error *err, int *out) {
    if (spec) {
        *out = wm_table_col(t, spec);
        if (*out < 0) return wm_err(err, WM_ERR_INPUT, "%s: no column '%s' (%s)", path, spec, what), -1;
        return 0;
    }
    for (size_t i = 0; defaults[i]; i++)
        if ((*out = wm_table_col(t, defaults[i])) >= 0) return 0;
    wm_err(err, WM_ERR_INPUT, "%s: no %s column (name it with a column flag)", path, what);
    return -1;
}

/* A finite number (true / false are 1 / 0); -1 when s is none (NaN and infinities are none). */
static int parse_num(const char *s, double *v) {
    if (!s) return -1;
    if (!strcmp(s, "true")) return *v = 1, 0;
    if (!strcmp(s, "false")) return *v = 0, 0;
    char *end;
    *v = strtod(s, &end);
    return *s && !*end && isfinite(*v) ? 0 : -1;
}

/* The rows to evaluate: all that were read (wm_table_read stopped at --samples); none is an error. */
static wm_status rows_to_use(const wm_table *t, const wm_task_opts *o, size_t *n, wm_error *err) {
    *n = t->n_rows;
    if (o->samples > 0 && (size_t)o->samples < *n) *n = (size_t)o->samples;
    if (!*n)
        return wm_err(err, WM_ERR_INPUT, "%s: no data rows to evaluate (only a header, or blank lines)", o->dataset);
    return WM_OK;
}

static wm_status classification(wm_encoder *e, const wm_table *t, const wm_task_opts *o, wm_json *j, wm_error *err) {
    static const char *const dtext[] = {"text", "sentence", "sentence1", "#1 String", "question", NULL};
    static const char *const dpair[] = {"pair", "sentence2", "#2 String", NULL};
    static const char *const dlab[] = {"label", "Quality", NULL};
    int ct, cp = -1, cl;
    if (column(t, o->col_text, dtext, "text", o->dataset, err, &ct) || column(t, o->col_label, dlab, "label", o->dataset, err, &cl))
        return err->status;
    if (o->col_pair) {
        if (column(t, o->col_pair, dpair, "pair", o->dataset, err, &cp)) return err->status;
    } else
        for (size_t i = 0; dpair[i] && cp < 0; i++) cp = wm_table_col(t, dpair[i]);
    size_t n;
    if (rows_to_use(t, o, &n, err)) return err->status;
    int64_t *pred = malloc((n + 1) * sizeof *pred), *gold = malloc((n + 1) * sizeof *gold);
    if (!pred || !gold) {
        free(pred), free(gold);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    int n_classes = 2;
    wm_status st = WM_OK;
    for (size_t r = 0; r < n && !st; r++) {
        const char *text = wm_table_cell(t, r, ct), *lab = wm_table_cell(t, r, cl);
        if (!text || !lab) {
            st = wm_err(err, WM_ERR_INPUT, "%s:%zu: the %s cell is missing", o->dataset, t->lines[r],
                        !text ? "text" : "label");
            break;
        }
        const float *y;
        size_t k;
        int pooled;
        if ((st = wm_encoder_run(e, text, cp >= 0 ? wm_table_cell(t, r, cp) : NULL, 0, &y, &k, &pooled, err))) break;
        size_t best = 0;
        for (size_t i = 1; i < k; i++) best = y[i] > y[best] ? i : best;
        size_t labels = k == 1 ? 2 : k; /* one logit: a binary head */
        double g;
        if (parse_num(lab, &g) || g != floor(g) || g < 0 || g >= (double)labels) {
            st = wm_err(err, WM_ERR_INPUT, "%s:%zu: label '%.40s' is not a class of the model, which has %zu labels "
                        "(0 to %zu)", o->dataset, t->lines[r], lab, labels, labels - 1);
            break;
        }
        pred[r] = k == 1 ? y[0] > 0 : (int64_t)best;
        gold[r] = (int64_t)g;
        if ((int)k > n_classes) n_classes = (int)k;
    }
    if (!st) {
        wm_json_uint(j, "samples", n);
        wm_json_num(j, "accuracy", wm_metric_accuracy(pred, gold, n));
        wm_json_num(j, "f1", wm_metric_f1(pred, gold, n, n_classes));
        wm_json_str(j, "f1_average", n_classes > 2 ? "macro" : "binary");
    }
    free(pred), free(gold);
    return st;
}

static wm_status ranking(wm_encoder *e, const wm_table *t, const wm_task_opts *o, wm_json *j, wm_error *err) {
    static const char *const dq[] = {"query", "question", NULL}, *const dp[] = {"passage", "document", "text", NULL};
    static const char *const dl[] = {"label", "relevance", "score", NULL};
    int cq, cp, cl;
    if (column(t, o->col_query, dq, "query", o->dataset, err, &cq) || column(t, o->col_passage, dp, "passage", o->dataset, err, &cp) ||
        column(t, o->col_label, dl, "label", o->dataset, err, &cl))
        return err->status;
    size_t n;
    if (rows_to_use(t, o, &n, err)) return err->status;
    double *sc = malloc((n + 1) * sizeof *sc), *rel = malloc((n + 1) * sizeof *rel);
    uint8_t *done = calloc(n + 1, 1);
    wm_status st = (!sc || !rel || !done) ? wm_err(err, WM_ERR_NOMEM, "out of memory") : WM_OK;
    for (size_t r = 0; r < n && !st; r++) {
        const float *y;
        size_t k;
        int pooled;
        const char *q = wm_table_cell(t, r, cq), *p = wm_table_cell(t, r, cp);
        if (!q || !p || parse_num(wm_table_cell(t, r, cl), &rel[r]) || rel[r] < 0) {
            st = wm_err(err, WM_ERR_INPUT, "%s:%zu: %s", o->dataset, t->lines[r],
                        !q || !p ? "the query or passage cell is missing"
                                 : "the label is not a relevance (a finite number >= 0)");
            break;
        }
        if ((st = wm_encoder_run(e, q, p, 0, &y, &k, &pooled, err))) break;
        sc[r] = k == 1 ? y[0] : y[k - 1] - y[0]; /* one logit: the score; two: relevant minus not */
    }
    double mrr = 0, ndcg = 0;
    size_t queries = 0;
    double *gs = st ? NULL : malloc((n + 1) * sizeof *gs), *gr = st ? NULL : malloc((n + 1) * sizeof *gr);
    if (!st && (!gs || !gr)) st = wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (size_t r = 0; r < n && !st; r++) { /* rows of one query, in file order */
        if (done[r]) continue;
        size_t m = 0;
        for (size_t k = r; k < n; k++)
            if (!done[k] && !strcmp(wm_table_cell(t, k, cq), wm_table_cell(t, r, cq))) gs[m] = sc[k], gr[m++] = rel[k], done[k] = 1;
        mrr += wm_metric_mrr_at(gs, gr, m, 10);
        ndcg += wm_metric_ndcg_at(gs, gr, m, 10);
        queries++;
    }
    if (!st) {
        wm_json_uint(j, "samples", n);
        wm_json_uint(j, "queries", queries);
        wm_json_num(j, "mrr_at_10", queries ? mrr / (double)queries : NAN);
        wm_json_num(j, "ndcg_at_10", queries ? ndcg / (double)queries : NAN);
    }
    free(sc), free(rel), free(done), free(gs), free(gr);
    return st;
}

static wm_status similarity(wm_encoder *e, const wm_table *t, const wm_task_opts *o, wm_json *j, wm_error *err) {
    static const char *const d1[] = {"sentence1", "text1", NULL}, *const d2[] = {"sentence2", "text2", NULL};
    static const char *const ds[] = {"score", "label", "similarity", NULL};
    int c1, c2, cs;
    if (column(t, o->col_s1, d1, "sentence1", o->dataset, err, &c1) || column(t, o->col_s2, d2, "sentence2", o->dataset, err, &c2) ||
        column(t, o->col_score, ds, "score", o->dataset, err, &cs))
        return err->status;
    size_t n;
    if (rows_to_use(t, o, &n, err)) return err->status;
    double *cos = malloc((n + 1) * sizeof *cos), *gold = malloc((n + 1) * sizeof *gold), *scratch = malloc((4 * n + 4) * sizeof *scratch);
    float *a = NULL;
    size_t na = 0;
    wm_status st = (!cos || !gold || !scratch) ? wm_err(err, WM_ERR_NOMEM, "out of memory") : WM_OK;
    for (size_t r = 0; r < n && !st; r++) {
        const float *y;
        size_t k;
        int pooled;
        const char *s1 = wm_table_cell(t, r, c1), *s2 = wm_table_cell(t, r, c2);
        if (!s1 || !s2 || parse_num(wm_table_cell(t, r, cs), &gold[r])) {
            st = wm_err(err, WM_ERR_INPUT, "%s:%zu: %s", o->dataset, t->lines[r],
                        !s1 || !s2 ? "a sentence cell is missing" : "the score is not a finite number");
            break;
        }
        if ((st = wm_encoder_run(e, s1, NULL, 1, &y, &k, &pooled, err))) break;
        if (k > na) {
            float *nb = realloc(a, k * sizeof *nb);
            if (!nb) {
                st = wm_err(err, WM_ERR_NOMEM, "out of memory");
                break;
            }
            a = nb, na = k;
        }
        memcpy(a, y, k * sizeof *a);
        if ((st = wm_encoder_run(e, s2, NULL, 1, &y, &k, &pooled, err))) break;
        double dot = 0, x2 = 0, y2 = 0;
        for (size_t i = 0; i < k; i++) dot += (double)a[i] * y[i], x2 += (double)a[i] * a[i], y2 += (double)y[i] * y[i];
        cos[r] = x2 > 0 && y2 > 0 ? dot / sqrt(x2 * y2) : 0;
    }
    if (!st) {
        wm_json_uint(j, "samples", n);
        wm_json_num(j, "spearman_cosine", wm_metric_spearman(cos, gold, n, scratch));
    }
    free(cos), free(gold), free(scratch), free(a);
    return st;
}

/* Perplexity with a sliding window: each window re-reads up to max_length tokens and scores only the new ones. */
static wm_status perplexity(const char *dir, const wm_task_opts *o, wm_json *j, wm_error *err) {
    wm_tokenizer *tok = NULL;
    wm_clm *m = NULL;
    wm_map text = {0};
    wm_encoding enc;
    wm_encoding_init(&enc);
    long L = o->max_length > 0 ? o->max_length : 512, stride = o->stride > 0 ? o->stride : (L / 2 > 0 ? L / 2 : 1);
    char file[PATH_MAX], folder[PATH_MAX];
    wm_status st = wm_model_path(dir, WM_ENCODER_NEEDS, file, sizeof file, folder, sizeof folder, err);
    if (!st) st = wm_tokenizer_load_dir(folder, &tok, err);
    wm_clm_opts co = {.threads = o->threads, .max_length = L, .session = o->session};
    if (!st) st = wm_clm_open(file, &co, &m, err);
    if (!st) st = wm_map_file(o->dataset, 0, &text, err);
    wm_encode_opts eo = wm_encode_opts_default();
    eo.use_defaults = 0; /* no truncation: the whole text */
    if (!st) st = wm_tokenizer_encode(tok, text.data ? (const char *)text.data : "", text.size, NULL, 0, &eo, &enc, err);
    size_t N = enc.n;
    if (!st && N < 2) st = wm_err(err, WM_ERR_INPUT, "%s: fewer than 2 tokens", o->dataset);
    double nll = 0;
    uint64_t count = 0;
    size_t prev_end = 0, windows = 0;
    for (size_t begin = 0; !st && begin < N; begin += (size_t)stride) {
        size_t end = begin + (size_t)L < N ? begin + (size_t)L : N, trg = end - prev_end;
        const float *all;
        wm_clm_reset(m);
        if ((st = wm_clm_append_all(m, enc.ids + begin, end - begin, &all, err))) break;
        int64_t V = wm_clm_vocab(m);
        size_t first = end - trg > begin + 1 ? end - trg : begin + 1; /* token begin has no prediction */
        for (size_t t = first; t < end; t++) {
            const float *row = all + (size_t)(t - 1 - begin) * (size_t)V;
            double mx = row[0], sum = 0;
            for (int64_t v = 1; v < V; v++) mx = row[v] > mx ? row[v] : mx;
            for (int64_t v = 0; v < V; v++) sum += exp((double)row[v] - mx);
            int32_t id = enc.ids[t];
            if (id < 0 || id >= V) {
                st = wm_err(err, WM_ERR_INPUT, "token id %d is outside the model's vocabulary (%lld)", id, (long long)V);
                break;
            }
            nll += log(sum) + mx - row[id];
            count++;
        }
        windows++;
        prev_end = end;
        if (end == N) break;
    }
    if (!st) {
        wm_json_uint(j, "tokens", N);
        wm_json_uint(j, "scored_tokens", count);
        wm_json_uint(j, "windows", windows);
        wm_json_int(j, "max_length", L);
        wm_json_int(j, "stride", stride);
        wm_json_num(j, "perplexity", wm_metric_perplexity(nll, count));
    }
    wm_encoding_free(&enc);
    wm_unmap(&text);
    wm_clm_free(m);
    wm_tokenizer_free(tok);
    return st;
}

/* The rows of o->dataset: a table file as it is, else what hf/dataset.h resolves (a folder, a hub name in the
   caches); "dataset_files" in j names the files read. */
static wm_status read_dataset(const wm_task_opts *o, const wm_table_opts *tabo, wm_table *t, wm_json *j,
                              wm_error *err) {
    wm_dataset_files *f = malloc(sizeof *f);
    if (!f) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    char why[1400];
    wm_status st = WM_OK;
    if (wm_file_size(o->dataset) >= 0) snprintf(f->paths[0], sizeof f->paths[0], "%s", o->dataset), f->n = 1;
    else if (!(st = wm_dataset_resolve(o->dataset, o->dataset_config, o->split, f, why, sizeof why, err)) && !f->n)
        st = wm_err(err, WM_ERR_INPUT, "--dataset: %s", why);
    if (!st) {
        wm_json_arr(j, "dataset_files");
        for (size_t i = 0; i < f->n; i++) wm_json_str(j, NULL, f->paths[i]);
        wm_json_arr_end(j);
        st = f->n == 1 ? wm_table_read(f->paths[0], WM_TABLE_AUTO, tabo, t, err) : wm_dataset_read(f, tabo, t, err);
    }
    free(f);
    return st;
}

/* Without --dataset, the build's recipe names the data set as the reference's eval does: eval.dataset.path, its
   config (eval.dataset.name), split and text column fill what the caller left NULL. r owns the strings o points at
   (wm_recipe_free after use). */
static wm_status dataset_from_recipe(const char *dir, wm_task_opts *o, wm_recipe *r, wm_error *err) {
    char p[4200];
    snprintf(p, sizeof p, "%s/winml_build_config.json", dir);
    if (wm_file_size(p) < 0)
        return wm_err(err, WM_ERR_USAGE, "%s: no --dataset FILE|DIR|ORG/NAME, and no winml_build_config.json "
                      "there whose eval.dataset names one", dir);
    wm_status st = wm_recipe_load(p, r, err);
    if (st) return st;
    if (!r->has_eval || !r->dataset_path[0])
        return wm_err(err, WM_ERR_USAGE, "%s: field 'eval.dataset.path': none, so --dataset FILE|DIR|ORG/NAME is needed",
                      p);
    o->dataset = r->dataset_path;
    if (!o->dataset_config && r->dataset_config[0]) o->dataset_config = r->dataset_config;
    if (!o->split && r->dataset_split[0]) o->split = r->dataset_split;
    if (!o->col_text && r->dataset_text_column[0]) o->col_text = r->dataset_text_column;
    return WM_OK;
}

static wm_status task_eval(const char *dir, const wm_task_opts *o, wm_json *j, wm_error *err);

wm_status wm_task_eval(const char *dir, const wm_task_opts *o, wm_json *j, wm_error *err) {
    if (o->dataset) return task_eval(dir, o, j, err);
    wm_task_opts ro = *o;
    wm_recipe r;
    wm_status st = dataset_from_recipe(dir, &ro, &r, err);
    if (!st) {
        wm_json_str(j, "dataset_from", "recipe"); /* eval.dataset of the build's winml_build_config.json */
        st = task_eval(dir, &ro, j, err);
    }
    wm_recipe_free(&r);
    return st;
}

static wm_status task_eval(const char *dir, const wm_task_opts *o, wm_json *j, wm_error *err) {
    char task[64] = "";
    wm_status fs;
    if (o->task) snprintf(task, sizeof task, "%s", o->task);
    else if ((fs = wm_folder_task(dir, task, sizeof task, err))) /* a build folder's own; "" for a bare model */
        return fs;
    char pp[4200];
    snprintf(pp, sizeof pp, "%s/preprocessor_config.json", dir);
    if (wm_s2s_text_folder(dir)) return wm_speech_task_eval(dir, o, j, err); /* Whisper, TrOCR: generated text */
    int image = !strncmp(task, "image-", 6) || !strcmp(task, "zero-shot-image-classification") ||
                (!task[0] && wm_file_size(pp) >= 0); /* a folder with an image processor and no recipe */
    if (!image && (!strcmp(task, "automatic-speech-recognition") || !strcmp(task, "audio-classification")))
        return wm_speech_task_eval(dir, o, j, err);
    if (o->language)
        return wm_err(err, WM_ERR_USAGE, "--language applies to a speech encoder-decoder build (Whisper); %s is a "
                      "%s build", dir, task[0] ? task : "text");
    if (image) return wm_image_task_eval(dir, o, j, err);
    wm_encoder *e = NULL;
    wm_status st = WM_OK;
    wm_session_opts so = {0};
    if (o->session) so = *o->session;
    so.threads = o->threads;
    if (strcmp(task, "text-generation")) {
        st = wm_encoder_open(dir, &so, &e, err);
        if (st) return st;
        if (!task[0]) snprintf(task, sizeof task, "%s", wm_encoder_task(e));
    }
    wm_json_str(j, "task", task);
    wm_json_str(j, "dataset", o->dataset);
    if (!strcmp(task, "text-generation")) {
        wm_json_obj(j, "metrics");
        st = perplexity(dir, o, j, err);
        wm_json_obj_end(j);
        return st;
    }
    wm_table t = {0};
    wm_table_opts tabo = {.max_rows = o->samples > 0 ? (size_t)o->samples : 0, .max_line = o->max_line};
    if ((st = read_dataset(o, &tabo, &t, j, err))) goto done;
    wm_json_obj(j, "metrics");
    /* a build's task as its recipe names it: the reference's sentence-similarity is feature-extraction, its
       zero-shot-classification text-classification; text-ranking has its own evaluation */
    int served = wm_recipe_task_served(task, NULL);
    if (!strcmp(task, "text-ranking")) st = ranking(e, &t, o, j, err);
    else if (served == WM_TASK_TEXT_CLASSIFICATION) st = classification(e, &t, o, j, err);
    else if (served == WM_TASK_FEATURE_EXTRACTION) st = similarity(e, &t, o, j, err);
    else st = wm_err(err, WM_ERR_USAGE, "task '%s' has no task evaluation (text-classification, text-ranking, "
                     "feature-extraction, text-generation, image-classification, image-text retrieval, automatic-speech-recognition, "
                     "audio-classification)", task);
    wm_json_obj_end(j);
done:
    wm_table_free(&t);
    wm_encoder_free(e);
    return st;
}
