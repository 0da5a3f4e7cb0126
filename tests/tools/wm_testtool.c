/*
 * wm_testtool - drives libwinml's ONNX I/O for the oracle tests.
 *
 *   wm_testtool roundtrip IN.onnx OUT.onnx [--external auto|always|never] [--threshold BYTES]
 *       load IN, save OUT (external data decided as asked)
 *   wm_testtool mkbig OUT.onnx BYTES [--external auto|always|never]
 *       write a model whose float32 initializers W0..Wk total BYTES (random,
 *       seeded) with Y_i = Gather(W_i, idx) outputs so a runtime must read them
 *   wm_testtool touch IN.onnx
 *       load IN, read every weight byte, print JSON {file_bytes, data_bytes,
 *       peak_rss_bytes, checksum}
 *   wm_testtool clm-cut MODEL N K M
 *       the causal-LM runner's cache cut (wm_clm_truncate): the last logits of
 *       tokens 0..K-1 then M new tokens, computed fresh, after N tokens cut back
 *       to K ("cut"), and after the N tokens without the cut ("nocut", a
 *       control that must differ); prints JSON {inplace, diff_cut, diff_nocut,
 *       scale (max |fresh|), over_error (1: cutting past the held tokens
 *       failed with a usage error)}
 *   wm_testtool sample IN.f32 OUT.f32 TEMPERATURE TOP_K TOP_P MIN_P SEED DRAWS
 *       the sampling warpers (wm_sample_probs) on each row of IN (raw float32 rows of V = the last of its
 *       header's two int64s: rows, V): the kept distribution of each row into OUT (the same layout, no header),
 *       and DRAWS draws of wm_sample per row with a generator seeded by SEED as JSON {"draws": [[id, ...], ...]}
 * Exit codes: 0 ok, 2 error (message on stderr).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/file.h"
#include "llm/causal_lm.h"
#include "llm/sampling.h"
#include "onnx/dtype.h"
#include "onnx/onnx_model.h"

static int fail(const wm_error *e) {
    fprintf(stderr, "wm_testtool: error: %s\n", e->msg);
    return 2;
}

static void parse_save_opts(int argc, char **argv, int from, wm_onnx_save_opts *o) {
    wm_onnx_save_opts_default(o);
    for (int i = from; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--external")) {
            o->external = !strcmp(argv[i + 1], "always") ? WM_EXTDATA_ALWAYS
                          : !strcmp(argv[i + 1], "never") ? WM_EXTDATA_NEVER
                                                          : WM_EXTDATA_AUTO;
        } else if (!strcmp(argv[i], "--threshold")) {
            o->threshold_bytes = strtoull(argv[i + 1], NULL, 10);
        }
    }
}

static char *sdup(wm_arena *a, const char *s) { return wm_arena_strdup(a, s); }

static wm_onnx_value_info *vi(wm_arena *a, const char *name, int32_t dt, int rank, const int64_t *dims) {
    wm_onnx_value_info *v = wm_pb_new(a, &wm_onnx_value_info_desc);
    v->name = sdup(a, name);
    v->type = wm_pb_new(a, &wm_onnx_type_desc);
    v->type->tensor_type = wm_pb_new(a, &wm_onnx_type_tensor_desc);
    v->type->tensor_type->elem_type = dt;
    v->type->tensor_type->shape = wm_pb_new(a, &wm_onnx_shape_desc);
    for (int i = 0; i < rank; i++) {
        wm_onnx_dim **d = wm_vec_push(a, &v->type->tensor_type->shape->dim, &v->type->tensor_type->shape->n_dim,
                                      sizeof *d);
        *d = wm_pb_new(a, &wm_onnx_dim_desc);
        (*d)->dim_value = dims[i];
        wm_pb_set_has(&wm_onnx_dim_desc, *d, 1);
    }
    return v;
}

static int mkbig(const char *out, uint64_t bytes, const wm_onnx_save_opts *o) {
    wm_onnx_model *m = wm_onnx_model_new();
    wm_arena *a = &m->arena;
    wm_onnx_modelproto *mp = m->proto;
    mp->ir_version = 8;
    mp->producer_name = sdup(a, "wm_testtool");
    wm_onnx_opset **op = wm_vec_push(a, &mp->opset_import, &mp->n_opset_import, sizeof *op);
    *op = wm_pb_new(a, &wm_onnx_opset_desc);
    (*op)->domain = sdup(a, "");
    (*op)->version = 13;
    wm_onnx_graph *g = mp->graph = wm_pb_new(a, &wm_onnx_graph_desc);
    g->name = sdup(a, "big");
    int64_t one = 1;
    *(wm_onnx_value_info **)wm_vec_push(a, &g->input, &g->n_input, sizeof(void *)) = vi(a, "idx", WM_DT_INT64, 1, &one);
    const uint64_t chunk = 256ull << 20; /* 256 MiB per initializer */
    uint64_t left = bytes / 4 * 4, seed = 0x9e3779b97f4a7c15ull;
    for (int k = 0; left; k++) {
        uint64_t nb = left < chunk ? left : chunk;
        left -= nb;
        float *data = malloc(nb); /* owned by this process until exit: the model points into it */
        if (!data) {
            fprintf(stderr, "wm_testtool: out of memory\n");
            return 2;
        }
        for (uint64_t i = 0; i < nb / 4; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            data[i] = (float)((seed >> 40) & 0xffff) / 65536.0f - 0.5f;
        }
        char name[32], yname[32];
        snprintf(name, sizeof name, "W%d", k);
        snprintf(yname, sizeof yname, "Y%d", k);
        wm_onnx_tensor *t = wm_pb_new(a, &wm_onnx_tensor_desc);
        t->name = sdup(a, name);
        t->data_type = WM_DT_FLOAT;
        int64_t *d = wm_vec_push(a, &t->dims, &t->n_dims, sizeof *d);
        *d = (int64_t)(nb / 4);
        t->raw_data = (wm_bytes){(const uint8_t *)data, nb};
        *(wm_onnx_tensor **)wm_vec_push(a, &g->initializer, &g->n_initializer, sizeof(void *)) = t;
        wm_onnx_node *n = wm_pb_new(a, &wm_onnx_node_desc);
        n->op_type = sdup(a, "Gather");
        n->name = sdup(a, yname);
        *(char **)wm_vec_push(a, &n->input, &n->n_input, sizeof(char *)) = sdup(a, name);
        *(char **)wm_vec_push(a, &n->input, &n->n_input, sizeof(char *)) = sdup(a, "idx");
        *(char **)wm_vec_push(a, &n->output, &n->n_output, sizeof(char *)) = sdup(a, yname);
        *(wm_onnx_node **)wm_vec_push(a, &g->node, &g->n_node, sizeof(void *)) = n;
        *(wm_onnx_value_info **)wm_vec_push(a, &g->output, &g->n_output, sizeof(void *)) =
            vi(a, yname, WM_DT_FLOAT, 1, &one);
    }
    wm_error e = {0};
    int rc = wm_onnx_save(m, out, o, &e) ? fail(&e) : 0;
    wm_onnx_free(m);
    return rc;
}

typedef struct touch_ctx {
    uint64_t bytes, sum;
} touch_ctx;

static wm_status touch_tensor(void *ctx, wm_onnx_tensor *t, const char *where) {
    (void)where;
    touch_ctx *c = ctx;
    wm_bytes b = wm_onnx_tensor_bytes(t);
    for (size_t i = 0; i < b.n; i += 61) c->sum = c->sum * 31 + b.p[i]; /* odd stride: every byte lane */
    c->bytes += b.n;
    return WM_OK;
}

/* max |a - b| over n floats */
static double max_diff(const float *a, const float *b, int64_t n) {
    double d = 0;
    for (int64_t i = 0; i < n; i++) d = fabs((double)a[i] - b[i]) > d ? fabs((double)a[i] - b[i]) : d;
    return d;
}

static int clm_cut(const char *path, long n, long k, long m) {
    wm_error e = {0};
    wm_clm_opts co = {.threads = 2, .max_length = n + m + 8};
    wm_clm *c = NULL;
    if (k < 1 || k > n || m < 1 || wm_clm_open(path, &co, &c, &e)) {
        if (c == NULL && e.msg[0]) return fail(&e);
        fprintf(stderr, "wm_testtool: clm-cut: need 1 <= K <= N, M >= 1\n");
        wm_clm_free(c);
        return 2;
    }
    int64_t v = wm_clm_vocab(c) > 0 ? wm_clm_vocab(c) : 100;
    int32_t *ids = malloc((size_t)(n + m) * sizeof *ids), *tail = malloc((size_t)m * sizeof *tail);
    float *fresh = NULL, *cut = NULL, *nocut = NULL;
    const float *lg;
    int rc = 2, over = 0;
    if (!ids || !tail) goto done;
    for (long i = 0; i < n; i++) ids[i] = (int32_t)((i * 7 + 3) % v);
    for (long i = 0; i < m; i++) tail[i] = (int32_t)((i * 11 + 5) % v);
    memcpy(ids + k, tail, (size_t)m * sizeof *tail);
    /* fresh: tokens 0..K-1 then the tail, one prefill */
    wm_clm_reset(c);
    if (wm_clm_append(c, ids, (size_t)(k + m), &lg, &e)) goto err;
    v = wm_clm_vocab(c);
    if (!(fresh = malloc((size_t)v * sizeof *fresh)) || !(cut = malloc((size_t)v * sizeof *cut)) ||
        !(nocut = malloc((size_t)v * sizeof *nocut)))
        goto done;
    memcpy(fresh, lg, (size_t)v * sizeof *fresh);
    for (long i = 0; i < n; i++) ids[i] = (int32_t)((i * 7 + 3) % v);
    /* cut: N tokens, back to K, the tail one token at a time */
    wm_clm_reset(c);
    if (wm_clm_append(c, ids, (size_t)n, &lg, &e)) goto err;
    over = wm_clm_truncate(c, n + 1, &e) == WM_ERR_USAGE && wm_clm_length(c) == n;
    if (wm_clm_truncate(c, k, &e)) goto err;
    for (long i = 0; i < m; i++)
        if (wm_clm_append(c, tail + i, 1, &lg, &e)) goto err;
    memcpy(cut, lg, (size_t)v * sizeof *cut);
    /* nocut: N tokens, then the tail */
    wm_clm_reset(c);
    if (wm_clm_append(c, ids, (size_t)n, &lg, &e) || wm_clm_append(c, tail, (size_t)m, &lg, &e)) goto err;
    memcpy(nocut, lg, (size_t)v * sizeof *nocut);
    double scale = 0;
    for (int64_t i = 0; i < v; i++) scale = fabs(fresh[i]) > scale ? fabs(fresh[i]) : scale;
    printf("{\"inplace\": %d, \"diff_cut\": %.9g, \"diff_nocut\": %.9g, \"scale\": %.9g, \"over_error\": %d}\n",
           wm_clm_inplace(c), max_diff(fresh, cut, v), max_diff(fresh, nocut, v), scale, over);
    rc = 0;
    goto done;
err:
    rc = fail(&e);
done:
    free(ids), free(tail), free(fresh), free(cut), free(nocut);
    wm_clm_free(c);
    return rc;
}

static int sample_cmd(char **argv) {
    FILE *f = fopen(argv[2], "rb");
    int64_t hd[2] = {0, 0};
    if (!f || fread(hd, sizeof hd, 1, f) != 1 || hd[0] < 1 || hd[1] < 1 || hd[0] * hd[1] > (1 << 26)) {
        fprintf(stderr, "wm_testtool: %s: expected int64 rows, V then float32 rows x V\n", argv[2]);
        if (f) fclose(f);
        return 2;
    }
    int64_t R = hd[0], V = hd[1];
    float *x = malloc((size_t)(R * V) * sizeof *x), *p = malloc((size_t)(R * V) * sizeof *p), *w = malloc((size_t)V * 4);
    void *scr = malloc(wm_sample_scratch_size(V));
    int ok = x && p && w && scr && fread(x, sizeof *x, (size_t)(R * V), f) == (size_t)(R * V);
    fclose(f);
    wm_sampling s;
    wm_sampling_default(&s);
    s.greedy = 0;
    s.temperature = strtof(argv[4], NULL), s.top_k = (int)strtol(argv[5], NULL, 10);
    s.top_p = strtof(argv[6], NULL), s.min_p = strtof(argv[7], NULL);
    wm_rng rng;
    wm_rng_seed(&rng, strtoull(argv[8], NULL, 10));
    long draws = strtol(argv[9], NULL, 10);
    FILE *o = ok ? fopen(argv[3], "wb") : NULL;
    if (!o) {
        fprintf(stderr, "wm_testtool: sample: cannot read %s or write %s\n", argv[2], argv[3]);
        free(x), free(p), free(w), free(scr);
        return 2;
    }
    for (int64_t r = 0; r < R; r++) wm_sample_probs(x + r * V, V, &s, p + r * V, NULL, scr);
    ok = fwrite(p, sizeof *p, (size_t)(R * V), o) == (size_t)(R * V);
    ok &= fclose(o) == 0;
    printf("{\"draws\": [");
    for (int64_t r = 0; r < R; r++) {
        printf("%s[", r ? ", " : "");
        for (long k = 0; k < draws; k++) {
            memcpy(w, x + r * V, (size_t)V * 4);
            printf("%s%d", k ? ", " : "", (int)wm_sample(w, V, &s, NULL, 0, &rng, scr));
        }
        printf("]");
    }
    printf("]}\n");
    free(x), free(p), free(w), free(scr);
    return ok ? 0 : 2;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: wm_testtool roundtrip|mkbig|touch|clm-cut ...\n");
        return 2;
    }
    wm_error e = {0};
    wm_onnx_save_opts o;
    if (!strcmp(argv[1], "roundtrip") && argc >= 4) {
        parse_save_opts(argc, argv, 4, &o);
        wm_onnx_model *m;
        if (wm_onnx_load(argv[2], &m, &e)) return fail(&e);
        int rc = wm_onnx_save(m, argv[3], &o, &e) ? fail(&e) : 0;
        wm_onnx_free(m);
        return rc;
    }
    if (!strcmp(argv[1], "mkbig") && argc >= 4) {
        parse_save_opts(argc, argv, 4, &o);
        return mkbig(argv[2], strtoull(argv[3], NULL, 10), &o);
    }
    if (!strcmp(argv[1], "touch")) {
        wm_onnx_model *m;
        if (wm_onnx_load(argv[2], &m, &e)) return fail(&e);
        touch_ctx c = {0, 0};
        wm_onnx_visit_tensors(m->proto, touch_tensor, &c);
        printf("{\"file_bytes\": %llu, \"data_bytes\": %llu, \"peak_rss_bytes\": %llu, \"checksum\": %llu}\n",
               (unsigned long long)m->file.size, (unsigned long long)c.bytes,
               (unsigned long long)wm_peak_rss_bytes(), (unsigned long long)c.sum);
        wm_onnx_free(m);
        return 0;
    }
    if (!strcmp(argv[1], "clm-cut") && argc >= 6)
        return clm_cut(argv[2], strtol(argv[3], NULL, 10), strtol(argv[4], NULL, 10), strtol(argv[5], NULL, 10));
    if (!strcmp(argv[1], "sample") && argc >= 10) return sample_cmd(argv);
    fprintf(stderr, "wm_testtool: unknown or incomplete command '%s'\n", argv[1]);
    return 2;
}
