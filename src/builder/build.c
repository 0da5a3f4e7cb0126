/*
 * build.c - the build pipeline (see build.h).
 */
#define _GNU_SOURCE
#include "builder/build.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "builder/arch.h"
#include "builder/calib_data.h"
#include "builder/export.h"
#include "builder/recipe.h"
#include "core/sha256.h"
#include "core/error.h"
#include "core/file.h"
#include "core/output.h"
#include "gguf/gguf_hf.h"
#include "hf/config.h"
#include "hf/safetensors.h"
#include "hf/sbert.h"
#include "onnx/graph.h"
#include "opt/opt.h"
#include "opt/quant.h"
#include "opt/quant_calib_run.h"
#include "opt/quant_hessian.h"
#include "hf/tokenizer.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ------------------------------------------------------------ files */

static int exists(const char *p) {
    struct stat st;
    return lstat(p, &st) == 0;
}

/* The stage folder's files: plain writes (the folder itself is the unit that is renamed into place). */
static wm_status write_text(const char *path, const char *text, wm_error *err) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return wm_err(err, WM_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    wm_status s = WM_OK;
    if (wm_write_full(fd, text, strlen(text)) != 0 || wm_durable_sync(fd) != 0)
        s = wm_err(err, WM_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    if (close(fd) != 0 && !s) s = wm_err(err, WM_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return s;
}

/* Copies a regular file (links followed: cache snapshots link to blobs) of at most 2 GiB. */
static wm_status copy_file(const char *src, const char *dst, wm_error *err) {
    wm_map m;
    wm_status s = wm_map_file(src, 0, &m, err);
    if (s) return s;
    if (m.size > (2ull << 30)) {
        wm_unmap(&m);
        return wm_err(err, WM_ERR_INPUT, "%s: over 2 GiB, not a tokenizer file", src);
    }
    int fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        wm_unmap(&m);
        return wm_err(err, WM_ERR_IO, "%s: cannot create: %s", dst, strerror(errno));
    }
    if (wm_write_full(fd, m.data, m.size) != 0 || wm_durable_sync(fd) != 0)
        s = wm_err(err, WM_ERR_IO, "%s: write failed: %s", dst, strerror(errno));
    if (close(fd) != 0 && !s) s = wm_err(err, WM_ERR_IO, "%s: write failed: %s", dst, strerror(errno));
    wm_unmap(&m);
    return s;
}

/* Tokenizer, generation, image / audio processor and sentence-transformers files travel with the model (and the
 * Pooling module's <folder>/config.json that modules.json names: build_ctx.sb). */
static const char *const carried[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                      "vocab.json", "merges.txt", "vocab.txt", "added_tokens.json",
                                      "sentencepiece.bpe.model", "tokenizer.model", "spiece.model",
                                      "source.spm", "target.spm",
                                      "chat_template.jinja", "chat_template.json", "generation_config.json", "config.json",
                                      "sentence_bert_config.json", "modules.json", "preprocessor_config.json",
                                      "processor_config.json", NULL};

/* ------------------------------------------------------------ genai_config */

static void ids_json(wm_json *j, const char *key, const wm_hf_ids *ids) {
    if (!ids->n) return;
    if (ids->n == 1) {
        wm_json_int(j, key, ids->v[0]);
        return;
    }
    wm_json_arr(j, key);
    for (size_t i = 0; i < ids->n; i++) wm_json_int(j, NULL, ids->v[i]);
    wm_json_arr_end(j);
}

/* onnxruntime-genai's runtime config for a decoder export. */
static void genai_config(const wm_hf_checkpoint *ck, const wm_arch *a, int shared_kv, wm_json *j) {
    const wm_hf_config *c = &ck->config;
    const wm_hf_ids *eos = ck->has_gen && ck->gen.eos.n ? &ck->gen.eos : &c->eos;
    const wm_hf_ids *bos = ck->has_gen && ck->gen.bos.n ? &ck->gen.bos : &c->bos;
    const wm_hf_ids *pad = ck->has_gen && ck->gen.pad.n ? &ck->gen.pad : c->pad.n ? &c->pad : eos;
    int64_t ctx = a->P > 0 ? a->P : 4096;
    wm_json_obj(j, NULL);
    wm_json_obj(j, "model");
    ids_json(j, "bos_token_id", bos);
    wm_json_int(j, "context_length", ctx);
    wm_json_obj(j, "decoder");
    wm_json_obj(j, "session_options");
    wm_json_str(j, "log_id", "onnxruntime-genai");
    wm_json_arr(j, "provider_options");
    wm_json_arr_end(j);
    wm_json_obj_end(j);
    wm_json_str(j, "filename", "model.onnx");
    wm_json_int(j, "head_size", a->hd);
    wm_json_int(j, "hidden_size", a->H);
    wm_json_obj(j, "inputs");
    wm_json_str(j, "input_ids", "input_ids");
    wm_json_str(j, "attention_mask", "attention_mask");
    wm_json_str(j, "position_ids", "position_ids");
    wm_json_str(j, "past_key_names", "past_key_values.%d.key");
    wm_json_str(j, "past_value_names", "past_key_values.%d.value");
    wm_json_obj_end(j);
    wm_json_obj(j, "outputs");
    wm_json_str(j, "logits", "logits");
    wm_json_str(j, "present_key_names", "present.%d.key");
    wm_json_str(j, "present_value_names", "present.%d.value");
    wm_json_obj_end(j);
    wm_json_int(j, "num_attention_heads", a->nh);
    wm_json_int(j, "num_hidden_layers", a->L);
    wm_json_int(j, "num_key_value_heads", a->kvh);
    wm_json_obj_end(j);
    ids_json(j, "eos_token_id", eos);
    ids_json(j, "pad_token_id", pad);
    wm_json_str(j, "type", a->model_type);
    wm_json_int(j, "vocab_size", a->V);
    wm_json_obj_end(j);
    wm_json_obj(j, "search");
    int sample = ck->has_gen && ck->gen.do_sample == 1;
    wm_json_num(j, "diversity_penalty", 0.0);
    wm_json_bool(j, "do_sample", sample);
    wm_json_bool(j, "early_stopping", 1);
    wm_json_num(j, "length_penalty", 1.0);
    wm_json_int(j, "max_length", ctx);
    wm_json_int(j, "min_length", 0);
    wm_json_int(j, "no_repeat_ngram_size", 0);
    wm_json_int(j, "num_beams", 1);
    wm_json_int(j, "num_return_sequences", 1);
    wm_json_bool(j, "past_present_share_buffer", shared_kv);
    wm_json_num(j, "repetition_penalty",
                ck->has_gen && !isnan(ck->gen.repetition_penalty) ? ck->gen.repetition_penalty : 1.0);
    wm_json_num(j, "temperature", ck->has_gen && !isnan(ck->gen.temperature) ? ck->gen.temperature : 1.0);
    wm_json_int(j, "top_k", ck->has_gen && ck->gen.top_k >= 0 ? ck->gen.top_k : 50);
    wm_json_num(j, "top_p", ck->has_gen && !isnan(ck->gen.top_p) ? ck->gen.top_p : 1.0);
    wm_json_obj_end(j);
    wm_json_obj_end(j);
}

/* ------------------------------------------------------------ stages */

typedef enum { ST_DONE, ST_SKIPPED, ST_NOT_RUN } stage_status;

typedef struct stage_rec {
    const char *name;
    stage_status status;
    const char *graph; /* an encoder-decoder's graph file the stage ran on; NULL: the one model */
    int part;          /* its WM_S2S_* index (the quant report's slot); 0 for the one model */
    char reason[768];
    double seconds;
    size_t nodes;      /* optim / quant: nodes after the stage */
    wm_opt_hist ops;   /* and their op histogram */
} stage_rec;

#define WM_BUILD_MAX_PARENTS 16

typedef struct build_ctx {
    const wm_build_opts *o;
    wm_hf_checkpoint ck;
    wm_st_file *st;
    wm_arch arch;
    wm_recipe recipe;
    char out[PATH_MAX];       /* -o without trailing slashes */
    char stage_dir[PATH_MAX]; /* the staging folder beside it, "" once committed or removed */
    int stage_slot;           /* its slot in the signal-cleanup registry */
    int replace;              /* -o existed (a build of ours, checked) when the build started */
    int to_file;              /* export -o NAME.onnx: the model file (+ NAME.onnx.data) instead of a folder */
    int reused;               /* -o is a build of ours with this build's cache_key: kept as it is */
    char model_name[256];     /* the model's file name in the stage folder: "model.onnx", or NAME.onnx */
    wm_lockfile lock;
    char made[WM_BUILD_MAX_PARENTS][PATH_MAX]; /* folders above -o this build created */
    size_t n_made;
    wm_export_result ex;
    stage_rec stages[1 + 3 * WM_S2S_PARTS]; /* export, then optim / quant / compile per graph */
    size_t n_stages;
    int shared_kv; /* the optimized decoder uses GroupQueryAttention (genai_config past_present_share_buffer) */
    /* the quant stage's report per graph (one model: slot 0): its embedding tables' blocks go into the manifest */
    wm_quant_report qrep[WM_S2S_PARTS];
    int part;          /* the graph the optim / quant stages work on: WM_S2S_* of an encoder-decoder, else 0 */
    const char *graph; /* its file in the stage folder; NULL: model.onnx */
    int64_t q_block;      /* the recipe's block (int4/int8 RTN) */
    /* static QDQ: what calibrated the activations (the manifest's "calibration"); calibrated 0 otherwise */
    int calibrated;
    char calib_method[16], calib_data[768];
    int calib_from_dataset;    /* 1: the recipe's dataset's text rows calibrated; 0: seeded samples */
    char calib_file[512], calib_column[64];
    int64_t calib_samples;
    uint64_t calib_seed;
    size_t calib_values;
    double calib_seconds;
    wm_sbert sb;   /* the checkpoint's sentence-transformers files; sb.pooling_dir "" when none is carried */
    int entail;    /* zero-shot-classification: the id2label index whose name starts "entail"; -1 none */
    char an_rules[PATH_MAX + 64]; /* --analyze: the rule file of the target EP, "" without */
    unsigned an_device;
    int analyzed;                 /* analyze_result.json written; an_details holds the manifest's analyze_details */
    size_t an_unsupported;
    wm_json an_details;
    wm_error *err;
} build_ctx;

typedef wm_status (*wm_stage_fn)(build_ctx *b, stage_rec *rec);

static void note(const build_ctx *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(const build_ctx *b, const char *fmt, ...) {
    if (b->o->quiet) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

/* An encoder-decoder built as Optimum's three graphs (not from a part recipe). */
static int three_graphs(const build_ctx *b) { return b->arch.graph == WM_GRAPH_S2S && !b->arch.s2s_part; }

static wm_status stage_export(build_ctx *b, stage_rec *rec) {
    wm_export_opts eo = {b->o->random, b->o->seed, b->o->external_threshold, b->o->progress, 1};
    wm_status s = three_graphs(b)
                      ? wm_export_s2s(&b->arch, &b->recipe, b->st, &eo, b->stage_dir, &b->ex, b->err)
                      : wm_export_model(&b->arch, &b->recipe, b->st, &eo, b->stage_dir, &b->ex, b->err);
    if (!s) {
        rec->status = ST_DONE;
        snprintf(rec->reason, sizeof rec->reason, "%llu nodes, %llu parameters%s",
                 (unsigned long long)b->ex.n_nodes, (unsigned long long)b->ex.n_params,
                 b->ex.external ? ", external data" : "");
    }
    return s;
}

/* The stage folder's file the optim / quant stages work on: model.onnx, or the current graph of an
 * encoder-decoder (b->graph); into p[n]. */
static void stage_model_path(const build_ctx *b, char *p, size_t n) {
    snprintf(p, n, "%s/%s", b->stage_dir, b->graph ? b->graph : "model.onnx");
}

/* Loads the stage folder's model (stage_model_path) and indexes its graph. */
static wm_status open_stage_model(build_ctx *b, wm_onnx_model **m, wm_graph **g) {
    char p[PATH_MAX + 64];
    stage_model_path(b, p, sizeof p);
    *m = NULL, *g = NULL;
    wm_status s = wm_onnx_load(p, m, b->err);
    if (!s) s = wm_graph_open(*m, (*m)->proto->graph, g, b->err);
    return s;
}

/* Node count and op histogram of the stage's model for the manifest. */
static void record_graph(stage_rec *rec, const wm_graph *g) {
    const wm_onnx_graph *pg = wm_graph_proto(g);
    rec->nodes = pg->n_node;
    wm_opt_hist_free(&rec->ops);
    wm_error e = {0};
    wm_opt_hist_of(pg, &rec->ops, &e);
}

/*
 * The recipe's optim flags name passes of src/opt: a flag set to false
 * disables its pass. Decoders not converted to fp16 are optimized at level
 * all: GroupQueryAttention, which appends to a max-length KV cache in
 * place (ONNX Runtime GenAI's past_present_share_buffer, winml's causal LM
 * runner) but serves unpadded and right-padded batches only, as ONNX
 * Runtime GenAI's own decoders do; recipe "gqa": false keeps the graph's
 * own mask (any padding). Sliding-window layers become GroupQueryAttention
 * with local_window_size, soft-capped scores (Gemma 2) with its softcap;
 * attention the fusion cannot reproduce stays as the graph has it. Other
 * models stop at level "extended"; fp16 decoders get
 * GroupQueryAttention too (see stage_quant for its precision). Below opset 23 the
 * SimplifiedLayerNormalization nodes no residual Add absorbed are
 * expanded back to standard ops: that op lives in the default domain,
 * which onnxruntime accepts but onnx.checker refuses, and a build must
 * stay valid ONNX. The optimized model replaces model.onnx (written
 * through temporary names, so the mapped source stays valid until the
 * rename); its weights stay in the export's data file, and the initializers
 * the passes made are appended to it (wm_onnx_save_opts.keep_data), so the
 * unchanged weights are neither copied nor read.
 */
static wm_status stage_optim(build_ctx *b, stage_rec *rec) {
    if (!b->recipe.has_optim) {
        rec->status = ST_SKIPPED;
        snprintf(rec->reason, sizeof rec->reason, "recipe optim is null");
        return WM_OK;
    }
    wm_opt_config c;
    wm_opt_config_default(&c);
    /* GroupQueryAttention takes sliding windows (local_window_size) and soft-caps; it refuses masks it cannot read */
    int all = b->arch.kind == WM_DECODER;
    c.level = all ? WM_OPT_ALL : WM_OPT_EXTENDED;
    /* a flag set to false disables its passes (the reference's capability names map onto ours) */
    for (size_t i = 0; i < b->recipe.n_optim; i++) {
        const char *passes[4], *why;
        size_t np = b->recipe.optim[i].value ? 0 : wm_recipe_optim_passes(b->recipe.optim[i].name, passes, 4, &why);
        for (size_t k = 0; k < np && c.n_disable < WM_OPT_MAX_SWITCHES; k++) c.disable[c.n_disable++] = passes[k];
    }
    wm_onnx_model *m;
    wm_graph *g;
    wm_opt_report r = {0};
    wm_status s = open_stage_model(b, &m, &g);
    size_t before = s ? 0 : wm_graph_proto(g)->n_node;
    if (!s) s = wm_opt_run(g, &c, &r, b->err);
    if (!s && b->recipe.opset < 23) s = wm_opt_expand_rmsnorm(g, b->err);
    char dp[PATH_MAX + 64];
    struct stat d0, d1;
    stage_model_path(b, dp, sizeof dp - 5);
    strcat(dp, ".data");
    int had_data = b->ex.data_sha[0] && stat(dp, &d0) == 0 && (uint64_t)d0.st_size == b->ex.data_bytes;
    if (!s) {
        char p[PATH_MAX + 64];
        wm_onnx_save_opts so;
        wm_onnx_save_opts_default(&so);
        so.threshold_bytes = b->o->external_threshold ? b->o->external_threshold : so.threshold_bytes;
        so.keep_data = 1; /* the export's weights stay where they are; what the passes made is appended */
        stage_model_path(b, p, sizeof p);
        s = wm_onnx_save(m, p, &so, b->err);
    }
    if (!s) {
        record_graph(rec, g);
        for (size_t i = 0; i < rec->ops.n; i++)
            if (!strcmp(rec->ops.items[i].op, "GroupQueryAttention")) b->shared_kv = 1;
        rec->status = ST_DONE;
        snprintf(rec->reason, sizeof rec->reason, "%zu -> %zu nodes (level %s, %zu passes disabled%s)", before,
                 rec->nodes, all ? "all" : "extended", c.n_disable,
                 b->shared_kv ? "; GroupQueryAttention: KV cache appended in place" : "");
        b->ex.model_sha[0] = 0; /* the artifacts changed: hash them again */
        /* the data file only grew (same file, kept data): hash just what was appended */
        if (!(had_data && stat(dp, &d1) == 0 && d1.st_ino == d0.st_ino && d1.st_dev == d0.st_dev &&
              wm_sha256_file_tail(dp, b->ex.data_bytes, &b->ex.data_state, b->ex.data_sha, NULL) == WM_OK))
            b->ex.data_sha[0] = 0;
    }
    wm_opt_report_free(&r);
    wm_graph_free(g);
    wm_onnx_free(m);
    return s;
}

#define GPTQ_SEQ 512 /* tokens per calibration sequence */

/*
 * GPTQ's calibration tokens: the recipe's calibration_text tokenized by the checkpoint's tokenizer, cut into
 * sequences of GPTQ_SEQ tokens (a shorter text: one sequence of all of it), at most max_seq of them. *ids
 * malloc'ed [*n_seq * *seq_len].
 */
static wm_status calib_tokens(build_ctx *b, const char *path, size_t max_seq, int32_t **ids, size_t *n_seq,
                              size_t *seq_len) {
    *ids = NULL;
    wm_map mp;
    wm_status s = wm_map_file(path, 0, &mp, b->err);
    if (s) {
        wm_err_prefix(b->err, "recipe quant.calibration_text");
        return s;
    }
    wm_tokenizer *t = NULL;
    wm_encoding e;
    wm_encoding_init(&e);
    wm_encode_opts eo = wm_encode_opts_default();
    eo.add_special_tokens = 0;
    eo.use_defaults = 0;
    if ((s = wm_tokenizer_load_dir(b->ck.dir, &t, b->err)))
        wm_err_prefix(b->err, "recipe quant.calibration_text needs the checkpoint's tokenizer");
    else if ((s = wm_tokenizer_encode(t, (const char *)mp.data, mp.size, NULL, 0, &eo, &e, b->err)))
        wm_err_prefix(b->err, "recipe quant.calibration_text %s", path);
    else if (e.n < 16)
        s = wm_err(b->err, WM_ERR_INPUT, "recipe quant.calibration_text %s: %zu tokens, at least 16 needed", path, e.n);
    if (!s) {
        *seq_len = e.n < GPTQ_SEQ ? e.n : GPTQ_SEQ;
        *n_seq = e.n / *seq_len < max_seq ? e.n / *seq_len : max_seq;
        if (!(*ids = malloc(*n_seq * *seq_len * sizeof **ids))) s = wm_err(b->err, WM_ERR_NOMEM, "out of memory");
        else memcpy(*ids, e.ids, *n_seq * *seq_len * sizeof **ids);
    }
    wm_encoding_free(&e);
    wm_tokenizer_free(t);
    wm_unmap(&mp);
    return s;
}

/* GPTQ's statistics (diag: the importance's, H's diagonal only): the stage's float model run by our engine on the
 * calibration tokens (quant_hessian.h). */
static wm_status gptq_stats(build_ctx *b, const wm_quant_config *qc, wm_graph *g, int diag, wm_quant_hessians *hs) {
    const wm_recipe *rc = &b->recipe;
    size_t max_seq = rc->samples > 0 ? (size_t)rc->samples : 4, n_seq = max_seq, seq_len = GPTQ_SEQ;
    int32_t *ids = NULL;
    wm_status s = rc->calibration_text[0] ? calib_tokens(b, rc->calibration_text, max_seq, &ids, &n_seq, &seq_len) : WM_OK;
    char p[PATH_MAX + 64];
    stage_model_path(b, p, sizeof p);
    if (!s) s = wm_quant_hessians_collect(p, g, qc, ids, n_seq, seq_len, 1, diag, hs, b->err);
    free(ids);
    return s;
}

#define CALIB_SAMPLES 10 /* the reference's quant.samples in every one of its static recipes */

/*
 * Static QDQ's activation ranges: the stage's float model run by our engine (quant_calib_run.h) with the recipe's
 * calibration_method (default minmax) on quant.samples (default CALIB_SAMPLES) text rows of the recipe's dataset
 * (eval.dataset, when it is reachable here: calib_data.h), else on as many seeded batches, each input uniform in
 * its export value_range where the recipe gives one. The manifest's calibration says which, and why not the
 * dataset; a dataset named but not reachable is also said on stderr.
 */
static wm_status calibrate(build_ctx *b, const wm_quant_config *qc, wm_graph *g, wm_calib_ranges *rg) {
    const wm_recipe *rc = &b->recipe;
    const char *method = rc->calibration_method[0] ? rc->calibration_method : "minmax";
    int md = wm_calib_method_parse(method);
    if (md < 0) /* the recipe parser refuses other names; kept as a check for recipes made in code */
        return wm_err(b->err, WM_ERR_INPUT, "recipe field 'quant.calibration_method': '%s' (minmax, entropy, "
                      "percentile)", method);
    wm_input_range ranges[64];
    size_t nr = 0;
    for (size_t i = 0; i < rc->n_inputs && nr < sizeof ranges / sizeof ranges[0]; i++)
        if (rc->inputs[i].has_range)
            ranges[nr++] = (wm_input_range){rc->inputs[i].name, rc->inputs[i].range[0], rc->inputs[i].range[1]};
    wm_calib_run_opts co;
    memset(&co, 0, sizeof co);
    wm_calib_opts_default(&co.calib, (wm_calib_method)md);
    co.samples = rc->samples > 0 ? rc->samples : CALIB_SAMPLES;
    co.seed = rc->calib_seed >= 0 ? (uint64_t)rc->calib_seed : 1; /* the recipe's quant.seed, else 1 */
    co.ranges = ranges;
    co.n_ranges = nr;
    const char *ds = rc->has_eval && rc->dataset_path[0] ? rc->dataset_path : NULL;
    const wm_io_spec *ids = wm_recipe_input(rc, "input_ids");
    int64_t fixed = ids && ids->rank == 2 ? ids->dims[1].v : -1; /* a fixed sequence: rows cut to it */
    int64_t most = wm_arch_max_tokens(&b->arch), cut = fixed > 0 ? fixed : most > 0 && most < 512 ? most : 512;
    co.seq = most > 0 && most < 128 ? most : 0; /* a symbolic sequence: 128 tokens, or all the positions there are */
    wm_calib_texts tx;
    char why[600];
    double t0 = now();
    wm_status s = wm_calib_texts_load(b->ck.dir, ds, rc->dataset_config, rc->dataset_split, rc->dataset_text_column,
                                      (size_t)co.samples, (size_t)cut, &tx, why, sizeof why,
                                      b->err);
    if (s) return s;
    if (tx.n) {
        co.rows = (const int32_t *const *)tx.rows;
        co.row_lens = tx.lens;
        co.n_rows = tx.n;
        co.seq = 0;
        for (size_t i = 0; i < tx.n; i++) co.seq = (int64_t)tx.lens[i] > co.seq ? (int64_t)tx.lens[i] : co.seq;
    }
    char p[PATH_MAX + 64];
    stage_model_path(b, p, sizeof p);
    s = wm_calib_collect(p, g, qc, &co, rg, b->err);
    b->calib_from_dataset = tx.n > 0;
    snprintf(b->calib_file, sizeof b->calib_file, "%s", tx.file);
    snprintf(b->calib_column, sizeof b->calib_column, "%s", tx.column);
    if (tx.n) co.samples = (int64_t)tx.n;
    wm_calib_texts_free(&tx);
    if (s) return s;
    b->calibrated = 1;
    snprintf(b->calib_method, sizeof b->calib_method, "%s", method);
    b->calib_samples = co.samples;
    b->calib_seed = co.seed;
    b->calib_values = rg->n;
    b->calib_seconds = now() - t0;
    if (b->calib_from_dataset)
        snprintf(b->calib_data, sizeof b->calib_data, "%lld text rows of the recipe's dataset: column '%s' of %s, "
                 "tokenized by the checkpoint's tokenizer", (long long)co.samples, b->calib_column, b->calib_file);
    else
        snprintf(b->calib_data, sizeof b->calib_data, "seeded samples in the export inputs' value ranges (%s)", why);
    if (ds) note(b, "note: quant: calibrated on %s\n", b->calib_data);
    if (!rg->n) note(b, "note: quant: no MatMul / Gemm with a constant weight to quantize statically\n");
    return WM_OK;
}

/* com.microsoft MoE nodes of g whose expert weights (fc1, fc2, fc3) are float32 initializers after quantization
   (int4 / int8 turn the others into QMoE: quant_moe.c); *bytes receives their size (said in the quant stage's
   reason). */
static size_t moe_float_experts(const wm_graph *g, uint64_t *bytes) {
    const wm_onnx_graph *p = wm_graph_proto(g);
    size_t n = 0;
    *bytes = 0;
    for (size_t i = 0; i < p->n_node; i++) {
        const wm_onnx_node *nd = p->node[i];
        if (strcmp(nd->op_type, "MoE") || !nd->domain || strcmp(nd->domain, "com.microsoft")) continue;
        int any = 0;
        for (size_t k = 2; k < nd->n_input && k <= 6; k += 2) {
            const wm_onnx_tensor *t = nd->input[k][0] ? wm_graph_constant(g, nd->input[k]) : NULL;
            uint64_t numel = 1, nb;
            if (!t || t->data_type != WM_DT_FLOAT) continue;
            for (size_t d = 0; d < t->n_dims; d++) numel *= (uint64_t)t->dims[d];
            if (wm_dtype_nbytes(t->data_type, numel, &nb)) *bytes += nb;
            any = 1;
        }
        n += (size_t)any;
    }
    return n;
}

/* The recipe's quant section (reference field names) through src/opt's quantizer, weights streamed. */
static wm_status stage_quant(build_ctx *b, stage_rec *rec) {
    if (!b->recipe.has_quant) {
        rec->status = ST_SKIPPED;
        snprintf(rec->reason, sizeof rec->reason, "recipe quant is null: float32 weights");
        return WM_OK;
    }
    wm_quant_config qc;
    const char *block[256];
    wm_status s = wm_recipe_quant_config(&b->recipe, &qc, b->err);
    /* fp16 with float32 graph IO: the KV cache inputs/outputs stay float32, so GroupQueryAttention stays
       float32 too and appends to that cache in place (onnxruntime's float16 GQA takes a float16 cache only;
       a float32 cache between casts would be copied twice per token). Its query/key/value get Casts. */
    if (!s && qc.mode == WM_QUANT_FP16 && qc.keep_io_types && b->shared_kv) {
        size_t nb = qc.op_block_given ? qc.n_op_block : 0;
        int listed = 0;
        for (size_t i = 0; i < nb; i++) listed |= !strcmp(qc.op_block[i], "GroupQueryAttention");
        if (nb < sizeof block / sizeof block[0] && !listed) {
            for (size_t i = 0; i < nb; i++) block[i] = qc.op_block[i];
            block[nb++] = "GroupQueryAttention";
            qc.op_block = block, qc.n_op_block = nb;
        }
    }
    wm_onnx_model *m = NULL;
    wm_graph *g = NULL;
    wm_quant_plan *plan = NULL;
    wm_quant_report *r = &b->qrep[b->part];
    wm_quant_carry *carry = NULL;
    void *carry_ctx = NULL;
    wm_quant_hessians hs = {0}, hi = {0}; /* GPTQ's H, the importance's diagonals (both: GPTQ with a sensitivity budget) */
    if (!s && qc.mode == WM_QUANT_CARRY &&
        !(s = wm_export_carry_table(&b->ex, &b->arch, b->st, &carry, &qc.n_carry, &carry_ctx, b->err)))
        qc.carry = carry;
    if (!s) s = open_stage_model(b, &m, &g);
    size_t unpacked = 0; /* before calibration: the unpacked projections' inputs are then calibrated */
    if (!s) s = wm_quant_unpack_attention(g, &qc, &unpacked, b->err);
    if (!s && b->recipe.rtn_gptq == 1 && qc.mode == WM_QUANT_INT4 && !(s = gptq_stats(b, &qc, g, 0, &hs))) {
        qc.hessians = hs.v;
        qc.n_hessians = hs.n;
    }
    if (!s && b->recipe.rtn_importance == 1 && qc.mode == WM_QUANT_INT4 && !(s = gptq_stats(b, &qc, g, 1, &hi))) {
        qc.importance = hi.v;
        qc.n_importance = hi.n;
    }
    wm_calib_ranges rg = {0};
    if (!s && wm_quant_mode_static(qc.mode) && !(s = calibrate(b, &qc, g, &rg))) {
        qc.ranges = rg.v;
        qc.n_ranges = rg.n;
    }
    if (!s) s = wm_quant_run(g, &qc, r, &plan, b->err);
    r->attention_unpacked += unpacked;
    b->q_block = qc.block_size;
    for (size_t i = 0; !s && i < r->n_tables; i++) { /* a block other than the recipe's, or none: said here */
        const wm_quant_table_note *t = &r->tables[i];
        if (!t->block)
            note(b, "note: quant: '%s' (%s, width %lld) stays float32: no block of 16 to %lld divides its width\n",
                 t->tensor, t->op, (long long)t->width, (long long)qc.block_size);
        else if (t->block != t->want)
            note(b, "note: quant: '%s' (%s, width %lld) uses block %lld: the recipe's %lld does not divide its width\n",
                 t->tensor, t->op, (long long)t->width, (long long)t->block, (long long)t->want);
    }
    if (!s) {
        char p[PATH_MAX + 64], dn[PATH_MAX];
        stage_model_path(b, p, sizeof p);
        snprintf(dn, sizeof dn, "%s.data", b->graph ? b->graph : "model.onnx");
        s = wm_quant_save(g, plan, p, dn, b->err);
    }
    if (!s) {
        record_graph(rec, g);
        rec->status = ST_DONE;
        size_t nc[3] = {0, 0, 0}; /* carried, requantized, float */
        for (size_t i = 0; i < r->n_carried; i++)
            nc[!strcmp(r->carried[i].result, "carried") ? 0 : !strcmp(r->carried[i].result, "requantized") ? 1 : 2]++;
        char cs[160] = "";
        if (qc.mode == WM_QUANT_CARRY)
            snprintf(cs, sizeof cs, " (GGUF blocks: %zu carried as they are, %zu requantized, %zu float)", nc[0],
                     nc[1], nc[2]);
        if (b->calibrated)
            snprintf(cs, sizeof cs, " (%zu activations calibrated by %s over %lld %s)", b->calib_values,
                     b->calib_method, (long long)b->calib_samples,
                     b->calib_from_dataset ? "dataset text rows" : "seeded samples");
        snprintf(rec->reason, sizeof rec->reason, "%s%s%s: %zu nodes quantized%s, weights %llu -> %llu bytes",
                 wm_quant_mode_name(qc.mode), qc.n_importance ? " (importance-weighted search)" : qc.scale_search ? " (scale search)" : "",
                 qc.n_hessians ? " (GPTQ)" : "", r->quantized,
                 cs, (unsigned long long)r->weight_bytes_before, (unsigned long long)r->weight_bytes_after);
        uint64_t moe_bytes = 0;
        size_t n_moe = qc.mode == WM_QUANT_FP16 ? 0 : moe_float_experts(g, &moe_bytes);
        size_t used = strlen(rec->reason);
        if (r->n_qmoe && used < sizeof rec->reason && qc.mode == WM_QUANT_CARRY)
            used += (size_t)snprintf(rec->reason + used, sizeof rec->reason - used, "; the experts of %zu MoE node%s "
                                     "carried as QMoE (their GGUF blocks, %llu bytes)", r->n_qmoe,
                                     r->n_qmoe > 1 ? "s" : "", (unsigned long long)r->qmoe_bytes);
        else if (r->n_qmoe && used < sizeof rec->reason)
            used += (size_t)snprintf(rec->reason + used, sizeof rec->reason - used, "; the experts of %zu MoE node%s "
                                     "quantized as QMoE (%d-bit, %llu bytes)", r->n_qmoe, r->n_qmoe > 1 ? "s" : "",
                                     qc.bits ? qc.bits : 4, (unsigned long long)r->qmoe_bytes);
        if (r->attention_unpacked && used < sizeof rec->reason)
            used += (size_t)snprintf(rec->reason + used, sizeof rec->reason - used, "; %zu Attention node%s' packed QKV "
                                     "projection given back as 3 MatMuls + MultiHeadAttention to quantize it",
                                     r->attention_unpacked, r->attention_unpacked > 1 ? "s" : "");
        if (n_moe && used < sizeof rec->reason)
            snprintf(rec->reason + used, sizeof rec->reason - used, "; the experts of %zu MoE node%s stay float32 "
                     "(%llu bytes: %s)", n_moe, n_moe > 1 ? "s" : "", (unsigned long long)moe_bytes,
                     qc.mode == WM_QUANT_CARRY ? "their GGUF blocks do not fit QMoE, see carried"
                                               : "not float32 fc1 / fc2 constants of whole blocks");
        for (size_t i = 0; i < r->n_carried; i++)
            if (!strcmp(r->carried[i].result, "requantized"))
                note(b, "note: quant: '%s' (%s) requantized: %s\n", r->carried[i].tensor, r->carried[i].source,
                     r->carried[i].reason);
        b->ex.model_sha[0] = b->ex.data_sha[0] = 0;
    }
    wm_quant_plan_free(plan);
    wm_calib_ranges_free(&rg);
    wm_quant_hessians_free(&hs);
    wm_quant_hessians_free(&hi);
    wm_graph_free(g);
    wm_onnx_free(m);
    free(carry);
    free(carry_ctx);
    return s;
}

static wm_status stage_compile(build_ctx *b, stage_rec *rec) {
    rec->status = b->o->no_compile || !b->recipe.has_compile ? ST_SKIPPED : ST_NOT_RUN;
    if (b->o->no_compile) snprintf(rec->reason, sizeof rec->reason, "--no-compile");
    else if (!b->recipe.has_compile) snprintf(rec->reason, sizeof rec->reason, "recipe compile is null");
    else
        snprintf(rec->reason, sizeof rec->reason, "EP compilation (EPContext) is not available in this build yet; "
                 "the %s EP runs %s as it is", b->recipe.provider, b->graph ? b->graph : "model.onnx");
    return WM_OK;
}

static const char *status_name(stage_status s) {
    return s == ST_DONE ? "done" : s == ST_SKIPPED ? "skipped" : "not run";
}

/* ------------------------------------------------------------ manifest */

static wm_status artifact(wm_json *j, const char *dir, const char *name, const char *known_sha, wm_error *err) {
    char p[PATH_MAX + 256], hex[65];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (!exists(p)) return WM_OK;
    if (known_sha && known_sha[0]) snprintf(hex, sizeof hex, "%s", known_sha);
    else {
        wm_status s = wm_sha256_file(p, hex, err);
        if (s) return s;
    }
    wm_json_obj(j, NULL);
    wm_json_str(j, "file", name);
    wm_json_int(j, "bytes", wm_file_size(p));
    wm_json_str(j, "sha256", hex);
    wm_json_obj_end(j);
    return WM_OK;
}

/*
 * The quant stage's "carried" (-p gguf): a summary by GGUF type and outcome, and each tensor - its GGUF type, the
 * op it feeds, what it became (carried / requantized / float), bits, block, zero points, and whether the model
 * computes the GGUF's values ("exact": carried blocks checked value by value, or float dequantized values).
 */
static void carried_json(const wm_quant_report *q, wm_json *j) {
    wm_json_obj(j, "carried");
    wm_json_arr(j, "summary");
    for (size_t i = 0; i < q->n_carried; i++) {
        const wm_quant_carry_note *t = &q->carried[i];
        size_t k = 0, count = 0;
        for (; k < i; k++) /* first of its (type, op, result) kind */
            if (!strcmp(q->carried[k].source, t->source) && !strcmp(q->carried[k].op, t->op) &&
                !strcmp(q->carried[k].result, t->result))
                break;
        if (k < i) continue;
        for (k = i; k < q->n_carried; k++)
            count += !strcmp(q->carried[k].source, t->source) && !strcmp(q->carried[k].op, t->op) &&
                     !strcmp(q->carried[k].result, t->result);
        wm_json_obj(j, NULL);
        wm_json_str(j, "gguf_type", t->source);
        wm_json_str(j, "onnx", t->op);
        wm_json_str(j, "result", t->result);
        wm_json_uint(j, "tensors", count);
        wm_json_obj_end(j);
    }
    wm_json_arr_end(j);
    wm_json_arr(j, "tensors");
    for (size_t i = 0; i < q->n_carried; i++) {
        const wm_quant_carry_note *t = &q->carried[i];
        wm_json_obj(j, NULL);
        wm_json_str(j, "tensor", t->tensor);
        wm_json_str(j, "gguf_type", t->source);
        wm_json_str(j, "onnx", t->op);
        wm_json_str(j, "result", t->result);
        if (t->bits) {
            wm_json_int(j, "bits", t->bits);
            wm_json_int(j, "block", t->block);
            wm_json_str(j, "zero_points", t->zero_points);
        }
        wm_json_bool(j, "exact", strcmp(t->result, "requantized") != 0);
        if (t->reason) wm_json_str(j, "reason", t->reason);
        wm_json_obj_end(j);
    }
    wm_json_arr_end(j);
    wm_json_obj_end(j);
}

/* qsort of names */
static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/*
 * The checkpoint's files as they are now, into h: name, size and modification time of each regular file
 * (links followed, as a hub cache's are) at the top of the folder -m names (of the folder holding -m when it
 * names a file: a GGUF and its split parts), in name order. A checkpoint changed in place changes the key.
 */
static void hash_checkpoint_files(const build_ctx *b, wm_sha256 *h) {
    char dir[PATH_MAX];
    struct stat st;
    if (stat(b->o->model, &st) == 0 && S_ISREG(st.st_mode)) wm_path_dirname(b->o->model, dir, sizeof dir);
    else snprintf(dir, sizeof dir, "%s", stat(b->o->model, &st) == 0 ? b->o->model : b->ck.dir);
    DIR *d = opendir(dir);
    if (!d) return;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 100000) {
        if (de->d_name[0] == '.') continue;
        if (n == cap) {
            char **nn = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *nn);
            if (!nn) break;
            names = nn;
        }
        if (!(names[n] = strdup(de->d_name))) break;
        n++;
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; i < n; i++) {
        char p[PATH_MAX + 300], line[600];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
            int k = snprintf(line, sizeof line, "%s|%lld|%lld.%09ld\n", names[i], (long long)st.st_size,
                             (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec);
            wm_sha256_update(h, line, (size_t)k < sizeof line ? (size_t)k : sizeof line - 1);
        }
        free(names[i]);
    }
    free(names);
}

/*
 * The build's identity as the reference's manifest has it: config_hash = the first 16 hex digits of the
 * sha256 of the resolved recipe (winml_build_config.json as written), cache_key = "<task>_<inputs>_<config_hash>"
 * where inputs hashes what else decides the artifacts (the model spec and its files' names, sizes and times,
 * random weights and their seed, export or build, the external-data threshold, --analyze, this winml's
 * version), so that the text after the last '_' is config_hash, as there. An existing -o with the same key is
 * reused (wm_build).
 */
static void build_keys(const build_ctx *b, char cache_key[160], char config_hash[17]) {
    wm_json rj;
    wm_json_init(&rj);
    wm_recipe_json(&b->recipe, &rj);
    wm_sha256 h;
    char hex[65], in[65];
    wm_sha256_init(&h);
    wm_sha256_update(&h, wm_json_text(&rj), strlen(wm_json_text(&rj)));
    wm_sha256_hex(&h, hex);
    wm_json_free(&rj);
    snprintf(config_hash, 17, "%.16s", hex);
    char opts[PATH_MAX + 200];
    snprintf(opts, sizeof opts, "|%d|%llu|%d|%d|%llu|%s|%s|", b->o->random, (unsigned long long)b->o->seed,
             b->o->export_only, b->to_file, (unsigned long long)b->o->external_threshold,
             b->o->analyze_rules ? b->o->analyze_rules : "", WM_VERSION_STRING);
    wm_sha256_init(&h);
    wm_sha256_update(&h, b->o->model, strlen(b->o->model));
    wm_sha256_update(&h, opts, strlen(opts));
    hash_checkpoint_files(b, &h);
    wm_sha256_hex(&h, in);
    snprintf(cache_key, 160, "%s_%.8s_%s", wm_task_name(b->arch.task), in, config_hash);
}

/* The reference's per-stage keys: status completed|skipped (ours, with "not run", in winml_status), filename
 * (the stage's ONNX: each stage rewrites model.onnx), elapsed_seconds, and for quant its node counts. */
static void stage_ref_keys(const build_ctx *b, const stage_rec *r, wm_json *j) {
    wm_json_str(j, "status", r->status == ST_DONE ? "completed" : "skipped");
    wm_json_str(j, "winml_status", status_name(r->status));
    wm_json_str(j, "filename", r->graph ? r->graph : b->model_name);
    wm_json_num(j, "elapsed_seconds", r->seconds);
    if (!strcmp(r->name, "quant") && r->status == ST_DONE) {
        wm_json_uint(j, "nodes_quantized", b->qrep[r->part].quantized);
        wm_json_uint(j, "nodes_skipped", b->qrep[r->part].skipped);
        wm_json_num(j, "calibration_time_seconds", b->calibrated ? b->calib_seconds : 0.0); /* weight-only: none */
        wm_json_num(j, "qdq_insertion_time_seconds", 0.0);
    }
}

static wm_status manifest(build_ctx *b, wm_json *j, double t0) {
    const wm_arch *a = &b->arch;
    char cache_key[160], config_hash[17];
    build_keys(b, cache_key, config_hash);
    wm_json_obj(j, NULL);
    /* the reference's keys (docs/json/build_manifest.md) */
    wm_json_int(j, "schema_version", 1);
    wm_json_str(j, "source", b->ck.format ? b->ck.format : "hf");
    wm_json_str(j, "model_id", b->o->model);
    wm_json_str(j, "cache_key", cache_key);
    wm_json_str(j, "config_hash", config_hash);
    wm_json_str(j, "final_artifact", b->model_name);
    /* ours */
    wm_json_str(j, "tool", "winml");
    wm_json_str(j, "version", WM_VERSION_STRING);
    wm_json_str(j, "model", b->o->model);
    if (b->ck.format) wm_json_str(j, "source_format", b->ck.format);
    wm_json_str(j, "model_type", a->model_type);
    wm_json_str(j, "task", wm_task_name(a->task));
    wm_json_str(j, "inference_class", a->inference_class);
    wm_json_str(j, "precision", b->recipe.has_quant ? wm_precision_name(b->recipe.precision) : "fp32");
    if (strcmp(b->recipe.task, wm_task_name(a->task))) wm_json_str(j, "recipe_task", b->recipe.task);
    if (!strcmp(b->recipe.task, "zero-shot-classification")) {
        if (b->entail >= 0) wm_json_int(j, "entailment_label", b->entail);
        else wm_json_null(j, "entailment_label");
    }
    /* the reference's bookkeeping fields the recipe held: read, not acted on */
    wm_recipe_kept_json(&b->recipe, j, "reference_fields_kept");
    wm_json_bool(j, "random_weights", b->o->random);
    if (b->o->random) wm_json_uint(j, "seed", b->o->seed);
    time_t tt = time(NULL);
    struct tm tm;
    char ts[32];
    gmtime_r(&tt, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    wm_json_str(j, "created", ts);
    wm_json_str(j, "timestamp", ts);
    wm_json_arr(j, "stages");
    for (size_t i = 0; i < b->n_stages; i++) {
        const stage_rec *r = &b->stages[i];
        wm_json_obj(j, NULL);
        wm_json_str(j, "name", r->name);
        if (r->graph) wm_json_str(j, "graph", r->graph);
        stage_ref_keys(b, r, j);
        wm_json_str(j, "reason", r->reason);
        wm_json_num(j, "seconds", r->seconds);
        if (!strcmp(r->name, "export") && r->status == ST_DONE) {
            wm_json_uint(j, "nodes", b->ex.n_nodes);
            wm_json_obj(j, "ops");
            for (size_t k = 0; k < b->ex.n_ops; k++) wm_json_uint(j, b->ex.ops[k].op, b->ex.ops[k].n);
            wm_json_obj_end(j);
            wm_json_uint(j, "initializers", b->ex.n_initializers);
            wm_json_uint(j, "parameters", b->ex.n_params);
            wm_json_uint(j, "parameter_bytes", b->ex.param_bytes);
            wm_json_bool(j, "external_data", b->ex.external);
            wm_json_int(j, "opset", b->recipe.opset);
        }
        if (strcmp(r->name, "export") && r->status == ST_DONE && r->nodes) {
            wm_json_uint(j, "nodes", r->nodes);
            wm_json_obj(j, "ops");
            for (size_t k = 0; k < r->ops.n; k++) wm_json_int(j, r->ops.items[k].op, r->ops.items[k].n);
            wm_json_obj_end(j);
        }
        if (!strcmp(r->name, "quant") && r->status == ST_DONE && b->calibrated) { /* what calibrated, honestly */
            wm_json_obj(j, "calibration");
            wm_json_str(j, "method", b->calib_method);
            wm_json_int(j, "samples", b->calib_samples);
            wm_json_uint(j, "seed", b->calib_seed);
            wm_json_str(j, "source", b->calib_from_dataset ? "dataset" : "seeded");
            wm_json_str(j, "data", b->calib_from_dataset ? "dataset" : "seeded"); /* the same, its earlier name */
            if (b->calib_from_dataset) {
                wm_json_str(j, "dataset_file", b->calib_file);
                wm_json_str(j, "column", b->calib_column);
            }
            wm_json_str(j, "data_detail", b->calib_data);
            wm_json_uint(j, "values", b->calib_values);
            wm_json_num(j, "seconds", b->calib_seconds);
            wm_json_obj_end(j);
        }
        const wm_quant_report *qr = &b->qrep[r->part];
        if (!strcmp(r->name, "quant") && r->status == ST_DONE && qr->n_tables) {
            wm_json_arr(j, "tables"); /* each embedding table's block: the recipe's, a smaller one, or none */
            for (size_t k = 0; k < qr->n_tables; k++) {
                const wm_quant_table_note *t = &qr->tables[k];
                wm_json_obj(j, NULL);
                wm_json_str(j, "tensor", t->tensor);
                wm_json_str(j, "op", t->op);
                wm_json_int(j, "width", t->width);
                wm_json_int(j, "recipe_block", t->want);
                if (t->block) wm_json_int(j, "block", t->block);
                else wm_json_null(j, "block");
                wm_json_str(j, "result", !t->block ? "float32: no block of 16 to recipe_block divides width"
                                        : t->block == t->want ? "quantized with the recipe's block"
                                                                 : "quantized with a smaller block that divides width");
                wm_json_obj_end(j);
            }
            wm_json_arr_end(j);
        }
        if (!strcmp(r->name, "quant") && r->status == ST_DONE && qr->n_sensitive8) {
            wm_json_arr(j, "sensitive_8bit"); /* quant.rtn_8bit_percent's choice, most sensitive first */
            for (size_t k = 0; k < qr->n_sensitive8; k++) wm_json_str(j, NULL, qr->sensitive8[k]);
            wm_json_arr_end(j);
        }
        if (!strcmp(r->name, "quant") && r->status == ST_DONE && qr->n_carried) carried_json(qr, j);
        wm_json_obj_end(j);
    }
    wm_json_arr_end(j);
    wm_json_arr(j, "artifacts");
    char data_name[sizeof b->model_name + 8];
    snprintf(data_name, sizeof data_name, "%s.data", b->model_name);
    wm_status s = WM_OK;
    if (three_graphs(b))
        for (int p = 0; p < WM_S2S_PARTS && !s; p++) {
            char dn[64];
            snprintf(dn, sizeof dn, "%s.data", wm_s2s_part_file(p));
            if (!(s = artifact(j, b->stage_dir, wm_s2s_part_file(p), NULL, b->err)))
                s = artifact(j, b->stage_dir, dn, NULL, b->err);
        }
    else s = artifact(j, b->stage_dir, b->model_name, b->ex.model_sha, b->err);
    if (!s && !three_graphs(b)) s = artifact(j, b->stage_dir, data_name, b->ex.data_sha, b->err);
    if (!s) s = artifact(j, b->stage_dir, "winml_build_config.json", NULL, b->err);
    if (!s && a->kind == WM_DECODER) s = artifact(j, b->stage_dir, "genai_config.json", NULL, b->err);
    for (size_t i = 0; carried[i] && !s; i++) s = artifact(j, b->stage_dir, carried[i], NULL, b->err);
    if (!s && b->sb.pooling_dir[0]) {
        char rel[WM_SBERT_PATH_MAX + 16];
        snprintf(rel, sizeof rel, "%s/config.json", b->sb.pooling_dir);
        s = artifact(j, b->stage_dir, rel, NULL, b->err);
    }
    if (!s && b->analyzed) s = artifact(j, b->stage_dir, "analyze_result.json", NULL, b->err);
    wm_json_arr_end(j);
    if (b->analyzed) { /* the reference's analysis keys: one pass (no autoconf iterations here) */
        wm_json_int(j, "analyze_iterations", 1);
        wm_json_uint(j, "analyze_unsupported_node_count", b->an_unsupported);
        wm_json_raw(j, "analyze_details", wm_json_text(&b->an_details));
    }
    wm_json_uint(j, "peak_rss_bytes", wm_peak_rss_bytes());
    double elapsed = now() - t0;
    wm_json_num(j, "total_seconds", elapsed);
    wm_json_num(j, "elapsed_seconds", elapsed);
    wm_json_obj_end(j);
    return s;
}

/* ------------------------------------------------------------ analysis (--analyze) */

/* The EP and device --analyze checks (--ep/--device, else the recipe's compile target, else cpu) and its rule
 * file: refused before any work when there is none. */
static wm_status analysis_target(build_ctx *b) {
    const char *ep = b->o->ep ? b->o->ep : b->recipe.provider[0] ? b->recipe.provider : "cpu";
    const char *dev = b->o->device ? b->o->device : b->recipe.device[0] ? b->recipe.device : "cpu";
    b->an_device = wm_device_bit(dev);
    if (!b->an_device || b->an_device == WM_DEV_ALL)
        return wm_err(b->err, WM_ERR_USAGE, "--analyze: device '%s' is not npu, gpu or cpu", dev);
    snprintf(b->an_rules, sizeof b->an_rules, "%s/%s.json", b->o->analyze_rules, wm_ep_alias(ep));
    if (!exists(b->an_rules))
        return wm_err(b->err, WM_ERR_USAGE, "--analyze: no rules for EP '%s' (%s does not exist)", ep, b->an_rules);
    return WM_OK;
}

/* Analyzes the built model.onnx and writes analyze_result.json beside it, as the reference's build does. */
static wm_status analysis(build_ctx *b) {
    char p[PATH_MAX + 64];
    wm_json res;
    wm_json_init(&res);
    snprintf(p, sizeof p, "%s/model.onnx", b->stage_dir);
    wm_status s = wm_analyze_build(p, b->an_rules, b->an_device, &res, &b->an_details, &b->an_unsupported, b->err);
    snprintf(p, sizeof p, "%s/analyze_result.json", b->stage_dir);
    if (!s) s = write_text(p, wm_json_text(&res), b->err);
    wm_json_free(&res);
    b->analyzed = !s;
    if (!s) note(b, "analyze: %zu node(s) the %s EP would not run (analyze_result.json)\n", b->an_unsupported,
                 wm_ep_alias(b->o->ep ? b->o->ep : b->recipe.provider[0] ? b->recipe.provider : "cpu"));
    return s;
}

/* ------------------------------------------------------------ pipeline */

/* An encoder-decoder from a part recipe (recipe_s2s.c): its inputs and outputs checked against the checkpoint, one
   graph (model.onnx) through the usual stages, float32 or fp16 (fp16_keep_io_types: the cache stays float32). */
static wm_status s2s_part_prepare(build_ctx *b, int prec) {
    const wm_build_opts *o = b->o;
    if (prec != WM_PREC_FP32 && prec != WM_PREC_FP16)
        return wm_err(b->err, WM_ERR_UNSUPPORTED, "%s: precision %s: an encoder-decoder part builds in fp32 or fp16",
                      o->recipe, wm_precision_name(prec));
    if (o->analyze_rules)
        return wm_err(b->err, WM_ERR_UNSUPPORTED, "--analyze: model_type '%s' (encoder-decoder) is not analyzed yet",
                      b->arch.model_type);
    return wm_recipe_s2s_part(&b->recipe, &b->arch, o->recipe, b->err);
}

/*
 * The precision of an encoder-decoder build without a recipe (*prec: -p, or fp32 by default): each of its three
 * graphs goes through the optim and quant stages with -p's default quant section, as a text model's one graph
 * (s2s_stages). int8 is the dynamic int8 (DynamicQuantizeLinear + MatMulInteger, CTranslate2's int8 too): the
 * static QDQ forms calibrate one graph's inputs from a recipe's input specs, which the three graphs do not have;
 * those and gguf are refused, naming the ones served.
 */
static wm_status s2s_precision(build_ctx *b, int *prec) {
    int p = b->o->precision >= 0 ? b->o->precision : WM_PREC_FP32;
    if (p == WM_PREC_INT8) {
        note(b, "note: -p int8 of an encoder-decoder: dynamic int8 (int8-dynamic: DynamicQuantizeLinear + "
             "MatMulInteger; static QDQ calibration is not done on its three graphs)\n");
        p = WM_PREC_INT8_DYNAMIC;
    }
    if (p != WM_PREC_FP32 && p != WM_PREC_FP16 && p != WM_PREC_INT4 && p != WM_PREC_INT8_DYNAMIC && p != WM_PREC_INT8_RTN)
        return wm_err(b->err, WM_ERR_UNSUPPORTED, "-p %s: model_type '%s' (encoder-decoder) builds in fp32, fp16, "
                      "int8 (dynamic), int8-dynamic, int8-rtn or int4", wm_precision_name(p), b->arch.model_type);
    *prec = p;
    return WM_OK;
}

static wm_status prepare(build_ctx *b) {
    const wm_build_opts *o = b->o;
    wm_error *err = b->err;
    wm_status s;
    int task = o->task;
    if (o->recipe) {
        if ((s = wm_recipe_load(o->recipe, &b->recipe, err))) return s;
        int rt = b->recipe.served_task;
        if (task >= 0 && task != rt)
            return wm_err(err, WM_ERR_USAGE, "-t %s disagrees with the recipe's loader.task '%s'", wm_task_name(task),
                          b->recipe.task);
        task = rt;
    }
    int prec = o->precision >= 0 ? o->precision : o->recipe ? (int)b->recipe.precision : -1; /* -1: by source */
    if (prec == WM_PREC_FP32 && b->recipe.has_quant) {
        note(b, "note: -p fp32 overrides the recipe's quant section (%s)\n", b->recipe.quant_mode);
        b->recipe.has_quant = 0; /* the resolved recipe written to the folder says what was built */
    }
    /* the recipe's own loader and quant mode: a model_type, task or mode the builder does not serve is named
       before the checkpoint is read */
    if (o->recipe && (s = wm_recipe_supported(&b->recipe, o->recipe, err))) return s;
    const char *named = o->recipe ? wm_recipe_name_precision(o->recipe) : NULL;
    if (named && o->precision < 0 && !b->recipe.has_quant && strcmp(named, "fp32"))
        note(b, "note: %s: the file name says %s, but its quant section is null: float32 weights (-p %s)\n", o->recipe,
             named, named);
    /* a GGUF arrives as a checkpoint too: config made from its metadata, tensors dequantized under HF names */
    s = wm_gguf_is_path(o->model) ? wm_gguf_open_checkpoint(o->model, &b->ck, o->random ? NULL : &b->st, err)
                                            : wm_hf_open_checkpoint(o->model, &b->ck, err);
    if (s) return s;
    if (!o->export_only) { /* the sentence-transformers files the folder will carry: checked before any work */
        wm_error se = {0};
        s = wm_sbert_load(b->ck.dir, &b->sb, &se);
        if (s == WM_ERR_UNSUPPORTED) {
            note(b, "note: %s; the files are carried as they are and winml run will refuse its embeddings\n", se.msg);
            b->sb.pooling_dir[0] = 0;
        } else if (s)
            return wm_err(err, s, "%s", se.msg);
        if ((s = wm_sbert_check_length(&b->sb, b->ck.dir, b->ck.config.max_positions, err))) return s;
        /* the tokenizer files the folder will carry: a malformed one is refused before any work (winml run and
           generate would refuse it later); one the loader does not support is carried as it is, with a note */
        if (!b->ck.format && wm_tokenizer_dir_has(b->ck.dir)) { /* a GGUF writes its own from the metadata */
            wm_tokenizer *t = NULL;
            wm_error te = {0};
            s = wm_tokenizer_load_dir(b->ck.dir, &t, &te);
            wm_tokenizer_free(t);
            if (s == WM_ERR_UNSUPPORTED)
                note(b, "note: %s; the tokenizer files are carried as they are and winml run / generate will refuse "
                     "them\n", te.msg);
            else if (s)
                return wm_err(err, s, "%s", te.msg);
        }
    }
    /* auto: the target device's precision, a GGUF at gguf (its blocks carried) but on an npu; random weights have
       no blocks to carry, and an export (no quant stage) is float32 */
    if (prec < 0)
        prec = o->export_only ? WM_PREC_FP32 : (int)wm_precision_auto(o->random ? NULL : b->ck.format, o->device);
    if ((s = wm_precision_check(prec, b->ck.format, err))) return s;
    if (o->precision < 0 && !o->recipe && o->ep && strcmp(wm_ep_alias(o->ep), "cpu"))
        note(b, "note: built for %s on %s: -p auto is %s there; this build runs the model on its CPU engine and does "
             "not compile it for the EP\n", wm_ep_alias(o->ep), o->device ? o->device : "?", wm_precision_name(prec));
    if (prec == WM_PREC_GGUF && o->random)
        return wm_err(err, WM_ERR_USAGE, "precision gguf carries the GGUF's blocks: not with --random-weights");
    if (b->ck.format && !strcmp(b->ck.format, "gguf") && prec != WM_PREC_FP32 && prec != WM_PREC_FP16 && prec != WM_PREC_GGUF)
        note(b, "note: -p %s from a GGUF: requantized from its dequantized values (the default, -p gguf, carries its "
             "blocks as they are)\n", wm_precision_name(prec));
    if (!o->random && !b->st) {
        if (!b->ck.weights[0]) {
            /* a config the builder cannot use is the more fundamental problem: say that first */
            if ((s = wm_arch_resolve(&b->ck, NULL, task, &b->arch, err))) return s;
            wm_arch_free(&b->arch);
            if (b->ck.pickle[0])
                return wm_err(err, WM_ERR_UNSUPPORTED, "%s/%s: pickle weights are refused (they can run code); "
                              "convert the checkpoint to safetensors", b->ck.dir, b->ck.pickle);
            return wm_err(err, WM_ERR_INPUT, "%s: no model.safetensors (or index) in the checkpoint; use "
                          "--random-weights to build the architecture from config.json alone", b->ck.dir);
        }
        if ((s = wm_st_open(b->ck.dir, &(wm_st_open_opts){.root = b->ck.root[0] ? b->ck.root : NULL}, &b->st, err))) return s;
    }
    /* a part recipe's task names the part (feature-extraction: the encoder), not the model's; a sequence classifier's
       is the model's (it picks the head) */
    int part = o->recipe ? wm_recipe_s2s_part_kind(&b->recipe) : 0;
    if ((s = wm_arch_resolve_as(&b->ck, b->st, part && part != WM_S2S_PART_CLS ? -1 : task, o->recipe ? b->recipe.model_type : NULL, &b->arch,
                                err)))
        return s;
    if (b->arch.graph == WM_GRAPH_S2S && o->recipe) { /* the reference's part recipe: one graph */
        if ((s = s2s_part_prepare(b, prec))) return s;
    } else if (b->arch.graph == WM_GRAPH_S2S && b->arch.s2s_part) { /* a sequence classifier: one graph */
        if (o->analyze_rules)
            return wm_err(err, WM_ERR_UNSUPPORTED, "--analyze: model_type '%s' (encoder-decoder) is not analyzed yet",
                          b->arch.model_type);
    } else if (b->arch.graph == WM_GRAPH_S2S) { /* three graphs in Optimum's layout */
        if ((s = s2s_precision(b, &prec))) return s;
        if (b->to_file)
            return wm_err(err, WM_ERR_USAGE, "-o %s: model_type '%s' (encoder-decoder) exports three files: give a "
                          "folder", b->out, b->arch.model_type);
        if (o->analyze_rules)
            return wm_err(err, WM_ERR_UNSUPPORTED, "--analyze: model_type '%s' (encoder-decoder) is not analyzed yet",
                          b->arch.model_type);
        snprintf(b->model_name, sizeof b->model_name, "%s", wm_s2s_part_file(WM_S2S_ENCODER));
    }
    b->entail = -1;
    if (!strcmp(b->recipe.task, "zero-shot-classification")) {
        /* an NLI classifier: a hypothesis is scored by its entailment logit (as the reference's pipeline finds it) */
        for (size_t i = 0; i < b->ck.config.n_labels && b->entail < 0; i++)
            if (b->ck.config.labels[i] && !strncasecmp(b->ck.config.labels[i], "entail", 6)) b->entail = (int)i;
        if (b->entail < 0)
            note(b, "note: zero-shot-classification scores hypotheses by the entailment logit, but %s's id2label "
                 "has no label starting with 'entail': built as text-classification\n", b->ck.config.file);
    }
    if (o->recipe && prec != WM_PREC_FP32 && !b->recipe.has_quant) {
        /* a recipe without a quant section (the reference's fp16 recipes mostly have none: the precision is in
           the file name) takes -p's defaults, said on stderr and written to the resolved recipe */
        note(b, "note: the recipe's quant section is null: -p %s adds the default %s quant section\n",
             wm_precision_name(prec), wm_precision_name(prec));
        wm_recipe_default_quant(&b->arch, (wm_precision)prec, &b->recipe);
    }
    if (o->recipe && prec != WM_PREC_FP32 && (int)b->recipe.precision != prec)
        return wm_err(err, WM_ERR_USAGE, "-p %s disagrees with the recipe's quant section (%s): drop -p or edit the recipe",
                      wm_precision_name(prec), b->recipe.has_quant ? b->recipe.quant_mode : "null");
    if (!o->recipe && (s = wm_recipe_default(&b->arch, (wm_precision)prec, o->ep ? o->ep : "cpu",
                                             o->device ? o->device : "cpu", &b->recipe, err)))
        return s;
    if (o->recipe && o->ep && b->recipe.has_compile && strcmp(wm_ep_alias(o->ep), wm_ep_alias(b->recipe.provider)))
        return wm_err(err, WM_ERR_USAGE, "--ep %s disagrees with the recipe's compile.ep_config.provider '%s'", o->ep,
                      b->recipe.provider);
    if (b->arch.detected)
        note(b, "note: model_type '%s' is not in the family table: built as naming scheme '%s'\n", b->arch.model_type,
             b->arch.scheme);
    int64_t was = b->arch.image;
    if (o->recipe && b->arch.graph != WM_GRAPH_S2S && (s = wm_recipe_fit_image(&b->recipe, &b->arch, o->recipe, err))) return s;
    if (b->arch.image != was) /* transformers' interpolate_pos_encoding */
        note(b, "note: %s: image size %lld, the config's is %lld: position embeddings interpolated (bicubic)\n",
             o->recipe, (long long)b->arch.image, (long long)was);
    if (b->arch.graph == WM_GRAPH_S2S) return WM_OK; /* fixed IO (export.h), or the part's, checked by then */
    return wm_recipe_check(&b->recipe, &b->arch, o->recipe ? o->recipe : "recipe", err);
}

/* ------------------------------------------------------------ the output folder */

/* The manifest's artifact entry for file rel ("model.onnx", "1_Pooling/config.json"), NULL when not listed. */
static const cJSON *listed(const cJSON *arts, const char *rel) {
    const cJSON *a, *hit = NULL;
    cJSON_ArrayForEach(a, arts) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(a, "file");
        if (cJSON_IsString(f) && !strcmp(f->valuestring, rel)) hit = a;
    }
    return hit;
}

/* 1 when the manifest lists a file inside folder rel ("rel/..."). */
static int lists_folder(const cJSON *arts, const char *rel) {
    const cJSON *a;
    size_t n = strlen(rel);
    cJSON_ArrayForEach(a, arts) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(a, "file");
        if (cJSON_IsString(f) && !strncmp(f->valuestring, rel, n) && f->valuestring[n] == '/') return 1;
    }
    return 0;
}

/*
 * Every entry of dir/sub (sub "" at the top) is a regular file the manifest lists with the size it records, or,
 * at the top only, a real folder (not a link) the manifest lists files in, itself holding only such files.
 */
static wm_status check_entries(const char *dir, const char *sub, const cJSON *arts, wm_error *err) {
    char p[PATH_MAX + 64], rel[PATH_MAX];
    snprintf(p, sizeof p, "%s%s%s", dir, sub[0] ? "/" : "", sub);
    DIR *d = opendir(p);
    if (!d) return wm_err(err, WM_ERR_IO, "%s: cannot list: %s", p, strerror(errno));
    wm_status s = WM_OK;
    struct dirent *de;
    while (!s && (de = readdir(d))) {
        const char *nm = de->d_name;
        if (!strcmp(nm, ".") || !strcmp(nm, "..") || (!sub[0] && !strcmp(nm, "build_manifest.json"))) continue;
        snprintf(rel, sizeof rel, "%s%s%s", sub, sub[0] ? "/" : "", nm);
        snprintf(p, sizeof p, "%s/%s", dir, rel);
        struct stat st;
        const cJSON *hit = listed(arts, rel);
        const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(hit, "bytes");
        int st_ok = lstat(p, &st) == 0;
        if (st_ok && S_ISDIR(st.st_mode) && !sub[0] && lists_folder(arts, rel)) {
            s = check_entries(dir, rel, arts, err);
            continue;
        }
        if (!hit || !st_ok || !S_ISREG(st.st_mode))
            s = wm_err(err, WM_ERR_USAGE, "%s: holds '%s', which no winml build wrote (not in its build_manifest.json); "
                       "refusing to replace the folder: move that file away or choose another -o", dir, rel);
        else if (!cJSON_IsNumber(bytes) || (double)st.st_size != bytes->valuedouble)
            s = wm_err(err, WM_ERR_USAGE, "%s: '%s' changed since winml wrote it (%lld bytes, the manifest says %.0f); "
                       "refusing to replace the folder", dir, rel, (long long)st.st_size,
                       cJSON_IsNumber(bytes) ? bytes->valuedouble : -1.0);
    }
    closedir(d);
    return s;
}

/*
 * An existing folder is replaced only when it is a previous build of ours as it was written: a
 * build_manifest.json of winml listing every other entry as a regular file of the size it records (files in a
 * subfolder, such as the Pooling module's 1_Pooling/config.json, listed by their path in it). Anything else in
 * it - a user's file, a folder or file the manifest does not list, a link, an artifact changed since - makes the
 * build refuse, naming it. man_out (may be NULL) receives the parsed manifest on success (caller frees).
 */
static wm_status check_ours(const char *dir, cJSON **man_out, wm_error *err) {
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/build_manifest.json", dir);
    wm_map mp;
    wm_error e2 = {0};
    if (wm_map_file(p, 1, &mp, &e2))
        return wm_err(err, WM_ERR_USAGE, "%s: exists and is not a winml build folder (no build_manifest.json); refusing "
                      "to replace it", dir);
    cJSON *man = mp.size < (64u << 20) ? cJSON_ParseWithLength((const char *)mp.data, mp.size) : NULL;
    wm_unmap(&mp);
    const cJSON *tool = cJSON_GetObjectItemCaseSensitive(man, "tool");
    const cJSON *arts = cJSON_GetObjectItemCaseSensitive(man, "artifacts");
    wm_status s = WM_OK;
    if (!cJSON_IsString(tool) || strcmp(tool->valuestring, "winml") || !cJSON_IsArray(arts))
        s = wm_err(err, WM_ERR_USAGE, "%s: exists and is not a winml build folder (its build_manifest.json is not "
                   "winml's); refusing to replace it", dir);
    if (!s) s = check_entries(dir, "", arts, err);
    if (!s && man_out) *man_out = man; /* the caller's to free */
    else cJSON_Delete(man);
    return s;
}

/*
 * -o is a folder and --rebuild was not given: kept as it is when it is a build of ours as it was written
 * (check_ours) whose manifest has this build's cache_key - the reference's build cache: b->reused is set and
 * summary receives that manifest with "reused": true. Any other folder is refused, naming why.
 */
static wm_status try_reuse(build_ctx *b, wm_json *summary) {
    cJSON *man = NULL;
    wm_status s = check_ours(b->out, &man, b->err);
    if (s) return s;
    char key[160], hash[17];
    build_keys(b, key, hash);
    const cJSON *have = cJSON_GetObjectItemCaseSensitive(man, "cache_key");
    if (!cJSON_IsObject(man) || !cJSON_IsString(have) || strcmp(have->valuestring, key)) {
        s = wm_err(b->err, WM_ERR_USAGE, "%s: already exists, built from %s (its cache_key %s, this build's %s): use "
                   "--rebuild or --overwrite to replace it", b->out,
                   cJSON_IsString(have) ? "another recipe or other inputs" : "an older winml (no cache_key)",
                   cJSON_IsString(have) ? have->valuestring : "none", key);
        cJSON_Delete(man);
        return s;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(man, "reused");
    char *text = cJSON_AddTrueToObject(man, "reused") ? cJSON_PrintUnformatted(man) : NULL;
    cJSON_Delete(man);
    if (!text) return wm_err(b->err, WM_ERR_NOMEM, "out of memory");
    wm_json_raw(summary, NULL, text);
    free(text);
    b->reused = 1;
    return WM_OK;
}

/* Creates the missing folders above -o (as `mkdir -p`), remembering them so that a failed build removes them. */
static wm_status make_parents(build_ctx *b, const char *parent) {
    char p[PATH_MAX];
    size_t ends[WM_BUILD_MAX_PARENTS], n = 0; /* lengths of the missing prefixes of parent, deepest first */
    snprintf(p, sizeof p, "%s", parent);
    struct stat st;
    for (;;) {
        if (stat(p, &st) == 0) {
            if (!S_ISDIR(st.st_mode)) return wm_err(b->err, WM_ERR_USAGE, "-o %s: '%s' is not a folder", b->out, p);
            break;
        }
        if (errno != ENOENT && errno != ENOTDIR)
            return wm_err(b->err, WM_ERR_IO, "-o %s: '%s': %s", b->out, p, strerror(errno));
        if (n == WM_BUILD_MAX_PARENTS) return wm_err(b->err, WM_ERR_USAGE, "-o %s: too many missing folders", b->out);
        ends[n++] = strlen(p);
        char *slash = strrchr(p, '/');
        if (!slash || slash == p) break; /* the current folder or / exists */
        *slash = 0;
    }
    snprintf(p, sizeof p, "%s", parent);
    for (size_t i = n; i-- > 0;) {
        char c = p[ends[i]];
        p[ends[i]] = 0;
        if (mkdir(p, 0755) == 0) snprintf(b->made[b->n_made++], sizeof b->made[0], "%s", p);
        else if (errno != EEXIST) return wm_err(b->err, WM_ERR_IO, "-o %s: cannot create '%s': %s", b->out, p, strerror(errno));
        p[ends[i]] = c;
    }
    return WM_OK;
}

/* A failed build leaves nothing: the folders it made above -o go too (only while still empty). */
static void remove_parents(build_ctx *b) {
    while (b->n_made) rmdir(b->made[--b->n_made]);
}

/* Bytes the stage folder will hold at its fullest: the float32 export, and the quantized copy beside it. */
static uint64_t need_bytes(const build_ctx *b) {
    uint64_t n = b->arch.n_params, f32, q = 0;
    if (!wm_mul_u64(n, 4, &f32)) return UINT64_MAX;
    if (b->recipe.has_quant && !wm_mul_u64(n, 2, &q)) return UINT64_MAX;
    return wm_add_u64(f32, q, &n) ? n : UINT64_MAX;
}

/*
 * Before any work: the lock of -o, what a killed build left beside it, and the checks that keep a user's
 * files - -o is not the input nor holds it, an existing folder is replaced only with --rebuild and only when
 * it is a build of ours (check_ours), and the build fits on the disk. Then the staging folder beside -o.
 */
static wm_status make_stage(build_ctx *b) {
    const wm_build_opts *o = b->o;
    char parent[PATH_MAX];
    wm_path_dirname(b->out, parent, sizeof parent);
    wm_status s = make_parents(b, parent);
    if (!s) s = wm_lock_output(b->out, &b->lock, b->err);
    if (s) return s;
    wm_sweep_stale(parent);
    struct stat st;
    b->replace = lstat(b->out, &st) == 0;
    if (!b->replace && errno != ENOENT) return wm_err(b->err, WM_ERR_IO, "%s: %s", b->out, strerror(errno));
    if (b->replace && S_ISLNK(st.st_mode))
        return wm_err(b->err, WM_ERR_USAGE, "%s: is a symbolic link; refusing to replace it (give -o the folder itself)",
                      b->out);
    if (b->replace && wm_path_within(b->ck.dir, b->out))
        return wm_err(b->err, WM_ERR_USAGE, "-o %s: is or holds the input checkpoint %s; the build would replace its "
                      "own input: choose another folder", b->out, b->ck.dir);
    if (b->to_file) { /* a file (and its data file) the user named: replaced only when asked */
        char data[PATH_MAX + 8];
        snprintf(data, sizeof data, "%s.data", b->out);
        if (b->replace && !S_ISREG(st.st_mode))
            return wm_err(b->err, WM_ERR_USAGE, "%s: exists and is not a file; refusing to replace it", b->out);
        if (!o->rebuild && (b->replace || lstat(data, &st) == 0))
            return wm_err(b->err, WM_ERR_USAGE, "%s: already exists (use --overwrite to replace it)",
                          b->replace ? b->out : data);
        if (lstat(data, &st) == 0 && !S_ISREG(st.st_mode))
            return wm_err(b->err, WM_ERR_USAGE, "%s: exists and is not a file; refusing to replace it", data);
    } else {
        if (b->replace && !S_ISDIR(st.st_mode))
            return wm_err(b->err, WM_ERR_USAGE, "%s: exists and is not a folder; refusing to replace it", b->out);
        if (b->replace && !o->rebuild)
            return wm_err(b->err, WM_ERR_USAGE, "%s: already exists (use --rebuild or --overwrite to replace it)",
                          b->out);
        if (b->replace && (s = check_ours(b->out, NULL, b->err))) return s;
    }
    if ((s = wm_space_check(parent, need_bytes(b), "the build", b->err))) return s;
    return wm_tmp_mkdir(b->out, b->stage_dir, sizeof b->stage_dir, &b->stage_slot, b->err);
}

/*
 * The commit point: the staging folder takes -o's place in one rename. The state of -o is checked again
 * first (another program may have made or changed it meanwhile); a replaced build is swapped out atomically
 * (no moment without -o) and then removed.
 */
static wm_status commit_file(build_ctx *b);

static wm_status commit(build_ctx *b) {
    if (b->to_file) return commit_file(b);
    struct stat st;
    int there = lstat(b->out, &st) == 0;
    if (there && !b->replace)
        return wm_err(b->err, WM_ERR_USAGE, "%s: appeared while building (made by another program); not replaced",
                      b->out);
    if (!there && b->replace)
        return wm_err(b->err, WM_ERR_USAGE, "%s: was removed while building; not written (run the build again)",
                      b->out);
    wm_status s = there ? check_ours(b->out, NULL, b->err) : WM_OK;
    if (!s) s = wm_tmp_commit_dir(b->stage_dir, &b->stage_slot, b->out, there, b->err);
    return s;
}

/*
 * export -o NAME.onnx: the exported model is written again as stage/NAME.onnx (its data file NAME.onnx.data, the
 * name the model records), the export's model.onnx(.data) removed; then the manifest lists NAME.onnx.
 */
static wm_status rename_model(build_ctx *b) {
    char src[PATH_MAX + 64], dst[PATH_MAX + 300];
    snprintf(src, sizeof src, "%s/model.onnx", b->stage_dir);
    snprintf(dst, sizeof dst, "%s/%s", b->stage_dir, b->model_name);
    wm_onnx_model *m = NULL;
    wm_status s = wm_onnx_load(src, &m, b->err);
    if (!s) {
        wm_onnx_save_opts so;
        wm_onnx_save_opts_default(&so);
        so.threshold_bytes = b->o->external_threshold ? b->o->external_threshold : so.threshold_bytes;
        s = wm_onnx_save(m, dst, &so, b->err);
    }
    wm_onnx_free(m);
    if (s) return s;
    unlink(src);
    strcat(src, ".data");
    unlink(src);
    b->ex.model_sha[0] = b->ex.data_sha[0] = 0; /* new bytes: hashed again */
    return WM_OK;
}

/* The commit point of export -o NAME.onnx: NAME.onnx.data (when there is one) and then NAME.onnx take their
 * places, each in one rename; a data file of an earlier NAME.onnx that this one does not have is removed. */
static wm_status commit_file(build_ctx *b) {
    char src[PATH_MAX + 300], data[PATH_MAX + 8];
    snprintf(data, sizeof data, "%s.data", b->out);
    snprintf(src, sizeof src, "%s/%s.data", b->stage_dir, b->model_name);
    if (exists(src)) {
        if (rename(src, data) != 0)
            return wm_err(b->err, WM_ERR_IO, "%s: cannot rename into place: %s", data, strerror(errno));
    } else if (b->o->rebuild) unlink(data);
    snprintf(src, sizeof src, "%s/%s", b->stage_dir, b->model_name);
    if (rename(src, b->out) != 0)
        return wm_err(b->err, WM_ERR_IO, "%s: cannot rename into place: %s", b->out, strerror(errno));
    return WM_OK;
}

static wm_status run_stage(build_ctx *b, const char *name, wm_stage_fn fn, int idx, int total) {
    stage_rec *r = &b->stages[b->n_stages++];
    r->name = name;
    r->graph = b->graph;
    r->part = b->part;
    char label[96]; /* the stage, and the graph of an encoder-decoder it works on */
    snprintf(label, sizeof label, "%s%s%s%s", name, b->graph ? " (" : "", b->graph ? b->graph : "", b->graph ? ")" : "");
    if (b->o->progress) note(b, "[%d/%d] %s ...\n", idx, total, label);
    double t = now();
    wm_status s = fn(b, r);
    r->seconds = now() - t;
    if (s) return s;
    if (r->status == ST_DONE) {
        if (b->o->progress) note(b, "[%d/%d] %s: done in %.2f s (%s)\n", idx, total, label, r->seconds, r->reason);
    } else note(b, "%s: %s: %s\n", label, status_name(r->status), r->reason);
    return WM_OK;
}

/*
 * An encoder-decoder's optim, quant and compile stages: the same stage functions as for one model, run on each
 * of its three graphs in turn (encoder_model.onnx, decoder_model.onnx, decoder_with_past_model.onnx); the
 * manifest has one entry per stage and graph ("graph"). Graph IO stays float32 at fp16 (fp16_keep_io_types), so
 * the runtime's caches (seq2seq.c) are float32 at every precision.
 */
static wm_status s2s_stages(build_ctx *b) {
    static const struct {
        const char *name;
        wm_stage_fn fn;
    } later[3] = {{"optim", stage_optim}, {"quant", stage_quant}, {"compile", stage_compile}};
    int total = 1 + 3 * WM_S2S_PARTS, idx = 2;
    wm_status s = WM_OK;
    for (int p = 0; p < WM_S2S_PARTS && !s; p++) {
        b->part = p;
        b->graph = wm_s2s_part_file(p);
        for (int i = 0; i < 3 && !s; i++) s = run_stage(b, later[i].name, later[i].fn, idx++, total);
    }
    b->part = 0;
    b->graph = NULL;
    return s;
}

static wm_status finish_files(build_ctx *b) {
    wm_status s = WM_OK;
    char p[PATH_MAX + 64];
    wm_json j;
    wm_json_init(&j);
    wm_recipe_json(&b->recipe, &j);
    snprintf(p, sizeof p, "%s/winml_build_config.json", b->stage_dir);
    if (j.oom) s = wm_err(b->err, WM_ERR_NOMEM, "out of memory");
    else s = write_text(p, wm_json_text(&j), b->err);
    wm_json_free(&j);
    if (!s && b->arch.kind == WM_DECODER) {
        wm_json_init(&j);
        genai_config(&b->ck, &b->arch, b->shared_kv, &j);
        snprintf(p, sizeof p, "%s/genai_config.json", b->stage_dir);
        s = j.oom ? wm_err(b->err, WM_ERR_NOMEM, "out of memory") : write_text(p, wm_json_text(&j), b->err);
        wm_json_free(&j);
    }
    for (size_t i = 0; carried[i] && !s; i++) {
        char src[PATH_MAX + 64];
        const wm_hf_made_file *made = NULL;
        for (size_t k = 0; k < b->ck.n_made; k++)
            if (!strcmp(b->ck.made[k].name, carried[i])) made = &b->ck.made[k];
        if (made) { /* made from another format's metadata (GGUF) */
            snprintf(p, sizeof p, "%s/%s", b->stage_dir, carried[i]);
            s = write_text(p, made->text, b->err);
            continue;
        }
        if (b->ck.format) continue; /* the GGUF's folder may hold anything: nothing is copied from it */
        snprintf(src, sizeof src, "%s/%s", b->ck.dir, carried[i]);
        struct stat st;
        if (stat(src, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        snprintf(p, sizeof p, "%s/%s", b->stage_dir, carried[i]);
        s = copy_file(src, p, b->err);
    }
    if (!s && b->sb.pooling_dir[0]) { /* a plain folder name (wm_sbert_load checked it) */
        char src[PATH_MAX + 128];
        snprintf(p, sizeof p, "%s/%s", b->stage_dir, b->sb.pooling_dir);
        if (mkdir(p, 0755) != 0) return wm_err(b->err, WM_ERR_IO, "%s: cannot create: %s", p, strerror(errno));
        snprintf(src, sizeof src, "%s/%s/config.json", b->ck.dir, b->sb.pooling_dir);
        snprintf(p, sizeof p, "%s/%s/config.json", b->stage_dir, b->sb.pooling_dir);
        s = copy_file(src, p, b->err);
    }
    return s;
}

wm_status wm_build(const wm_build_opts *o, wm_json *summary, wm_error *err) {
    double t0 = now();
    wm_json_init(summary);
    build_ctx *b = calloc(1, sizeof *b);
    if (!b) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    b->o = o;
    b->err = err;
    b->stage_slot = -1;
    b->lock = (wm_lockfile)WM_LOCKFILE_INIT;
    wm_status s = wm_out_path_clean(o->out_dir, "-o", b->out, sizeof b->out, err);
    snprintf(b->model_name, sizeof b->model_name, "model.onnx");
    if (!s && o->export_only) { /* -o NAME.onnx: that file */
        size_t n = strlen(b->out);
        const char *base = strrchr(b->out, '/');
        base = base ? base + 1 : b->out;
        if (n > 5 && !strcasecmp(b->out + n - 5, ".onnx")) {
            if (strlen(base) >= sizeof b->model_name - 8 || !strcmp(base, ".onnx"))
                s = wm_err(err, WM_ERR_USAGE, "-o %s: the file name is empty or too long", b->out);
            else snprintf(b->model_name, sizeof b->model_name, "%s", base), b->to_file = 1;
        }
    }
    if (!s) s = prepare(b);
    if (!s && o->analyze_rules) s = analysis_target(b);
    if (!s && !o->rebuild && !b->to_file) { /* an existing folder: the same build is reused (try_reuse) */
        struct stat st;
        if (lstat(b->out, &st) == 0 && S_ISDIR(st.st_mode)) s = try_reuse(b, summary);
    }
    if (b->reused) goto done;
    if (!s) s = make_stage(b);
    int total = o->export_only ? 1 : 4;
    if (!s) s = run_stage(b, "export", stage_export, 1, total);
    if (!s && b->to_file) s = rename_model(b);
    if (!s && !o->export_only && three_graphs(b)) {
        if (!(s = s2s_stages(b))) s = finish_files(b);
    } else if (!s && !o->export_only) {
        if (!(s = run_stage(b, "optim", stage_optim, 2, total)) && !(s = run_stage(b, "quant", stage_quant, 3, total)))
            s = run_stage(b, "compile", stage_compile, 4, total);
        if (!s) s = finish_files(b);
        if (!s && o->analyze_rules) s = analysis(b);
    }
    if (!s) {
        s = manifest(b, summary, t0);
        if (!s && summary->oom) s = wm_err(err, WM_ERR_NOMEM, "out of memory");
        if (!s && !b->to_file) { /* export folders get one too: it is how a later --rebuild knows the folder is ours */
            char p[PATH_MAX + 64];
            snprintf(p, sizeof p, "%s/build_manifest.json", b->stage_dir);
            s = write_text(p, wm_json_text(summary), err);
        }
    }
    if (!s) s = commit(b);
done:
    wm_tmp_discard(b->stage_dir, &b->stage_slot);
    wm_unlock_output(&b->lock); /* before the parents: the lock file lies in the last of them */
    if (s) remove_parents(b);
    for (int p = 0; p < WM_S2S_PARTS; p++) wm_quant_report_free(&b->qrep[p]);
    wm_export_result_free(&b->ex);
    wm_json_free(&b->an_details);
    wm_recipe_free(&b->recipe);
    wm_arch_free(&b->arch);
    wm_st_close(b->st);
    wm_hf_checkpoint_free(&b->ck);
    for (size_t i = 0; i < b->n_stages; i++) wm_opt_hist_free(&b->stages[i].ops);
    free(b);
    return s;
}
