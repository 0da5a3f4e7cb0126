/*
 * cmd_eval.c - `winml eval --mode compare`: a candidate model against a
 * reference model (or outputs a framework saved) on the same seeded inputs,
 * per output: sqnr_db, psnr_db, cosine_similarity, mse, max_abs_diff as
 * mean/std/min/max over samples; --threshold gates (exit 1); --per-layer
 * finds the first intermediate value where the candidate departs.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "builder/build.h"
#include "cli/cli.h"
#include "cli/cli_limits.h"
#include "core/file.h"
#include "core/output.h"
#include "core/sysmem.h"
#include "eval/compare.h"
#include "hf/safetensors.h"
#include "onnx/dtype.h"
#include "ops/op.h"
#include "runtime/inputs.h"
#include "tasks/task_eval.h"
#include "winml/runtime.h"

/* --samples: each is a forward pass (of both models in compare mode); sweep's --samples has the same bound */
#define EVAL_MAX_SAMPLES 100000L

static void help(void) {
    printf("usage: winml eval --mode compare -m CANDIDATE.onnx (--reference REF.onnx | --reference-outputs FILE.safetensors|.npz |\n"
           "                  --model-id CHECKPOINT)\n"
           "                  [--samples N] [--seed S] [--threshold METRIC=VALUE]... [--per-layer [--layer-threshold DB]]\n"
           "                  [--batch-size N] [--seq-len N] [--dim NAME=VALUE]... [--threads N] [-f table|json] [-o FILE]\n"
           "                  [--ep auto|cpu] [-d auto|cpu]\n\n"
           "Runs the candidate and the reference on the same inputs (seeded, made from the reference's input\n"
           "specs; or the inputs stored in --reference-outputs as inputs.<i>.<name> next to outputs.<i>.<name>)\n"
           "--model-id (a checkpoint folder or ORG/NAME[@REV]): the reference is the checkpoint's plain float32\n"
           "export (no fusions, no quantization) in a temporary folder, fed the candidate's inputs.\n"
           "and reports, per output, sqnr_db, psnr_db, cosine_similarity, mse and max_abs_diff as mean/std/min/max\n"
           "over --samples (default 100, as the reference). --threshold sqnr_db=50 (or psnr_db, cosine_similarity: the worst sample\n"
           "must reach it; mse, max_abs_diff: the worst sample must stay under it) makes it a gate: exit 1 when\n"
           "missed. --per-layer compares every intermediate value the two graphs share by name (first sample)\n"
           "and names the first one whose SQNR falls below --layer-threshold (default 30 dB).\n"
           "\n"
           "winml eval --mode task|onnx -m BUILD_DIR --dataset FILE|DIR|ORG/NAME [--dataset-config C] [--split S]\n"
           "                  [--task TASK] [--samples N] [--max-line-bytes SIZE] [--language L] [column flags]\n"
           "  (a table: .jsonl/.json/.csv/.tsv, each optionally .gz, or .parquet; a folder of <split>.<ext>; or a\n"
           "  hub data set read offline from the Hugging Face caches: its config's split, every shard; the JSON\n"
           "  names the files read as dataset_files)\n"
           "  (onnx is the reference's name of this mode; without --mode, --dataset selects it and a reference\n"
           "  flag selects compare; --mode onnx|task without --dataset reads the build recipe's eval.dataset:\n"
           "  path, name as the config, split, columns_mapping.input_column)\n"
           "  text-classification (accuracy, F1; GLUE TSV, JSONL or CSV with text [+ pair] and label columns),\n"
           "  text-ranking (MRR@10, nDCG@10 from query / passage / label rows, grouped by query),\n"
           "  feature-extraction (Spearman of the embeddings' cosine against sentence1 / sentence2 / score),\n"
           "  text-generation (perplexity of a text file, sliding window --max-length 512 --stride 256),\n"
           "  image-classification (accuracy, top-5 accuracy, F1 of a folder DIR/<class>/<image>.png|jpg taken\n"
           "  round-robin over the classes, or of a table with image paths and labels: --text-column names the\n"
           "  image column, as does --image-column; labels are id2label names or ids),\n"
           "  image-text retrieval of a CLIP-style (zero-shot-image-classification) build: recall@1/5/10 and mean\n"
           "  rank, image -> text and text -> image, over a table of image paths and captions (--image-column,\n"
           "  --caption-column; default image / caption, text); an image on several rows has all their captions;\n"
           "  captions are cut to the text tower's length as CLIPProcessor's truncation=True does.\n"
           "  automatic-speech-recognition (WER and CER as jiwer, corpus level, transcripts as written) and\n"
           "  audio-classification (accuracy, F1) of a speech build (wav2vec2 / HuBERT, or Whisper: generated as\n"
           "  winml run --audio does, --language L as there) over a table of audio (--audio-column; default audio,\n"
           "  path, file: paths, or the datasets Audio feature's audio.bytes decoded in memory) and transcripts\n"
           "  (--label-column; default transcript, text, sentence) or labels (id2label names or ids);\n"
           "  image-to-text of an image encoder-decoder (TrOCR: CER, WER of the text generated as winml run --image\n"
           "  does) over images (--image-column: paths, or image.bytes) and texts (--label-column; default text).\n"
           "  The JSON lists the generated texts as predictions.\n"
           "  Columns default to common names (sentence1, #1 String, label, Quality, query, passage, score ...);\n"
           "  name them with --text-column, --pair-column, --label-column, --query-column, --passage-column,\n"
           "  --sentence1-column, --sentence2-column, --score-column.\n"
           "  The table is read a line at a time and only its first --samples rows (default 100, as the reference)\n"
           "  are read; a line (a CSV record)\n"
           "  over --max-line-bytes (default 8M) is refused, as are invalid UTF-8, rows without a usable label and a\n"
           "  table without data rows (exit 2, naming the file and line).\n\n" WM_CLI_TARGET_HELP WM_CLI_LIMITS_HELP);
}

typedef struct gate {
    int metric;
    double value;
} gate;

static int parse_metric(const char *s, size_t n) {
    for (int m = 0; m < WM_CMP_COUNT; m++)
        if (strlen(wm_cmp_names[m]) == n && !strncmp(wm_cmp_names[m], s, n)) return m;
    return -1;
}

/* Converts t into dtype (new buffer appended to bufs) when they differ. */
static wm_status as_type(wm_tensor *t, int32_t dtype, void ***bufs, size_t *nb, wm_error *err) {
    if (t->dtype == dtype) return WM_OK;
    uint64_t n = wm_tensor_numel(t);
    void *b = aligned_alloc(64, ((n * (wm_dtype_size(dtype) ? wm_dtype_size(dtype) : 1)) | 63) + 1);
    void **nbp = realloc(*bufs, (*nb + 1) * sizeof *nbp);
    if (!b || !nbp) {
        free(b);
        if (nbp) *bufs = nbp;
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    *bufs = nbp;
    (*bufs)[(*nb)++] = b;
    wm_convert(t->dtype, t->data, dtype, b, n);
    t->dtype = dtype;
    t->data = b;
    return WM_OK;
}

static void agg_json(wm_json *j, const char *key, const wm_agg *a) {
    wm_json_obj(j, key);
    wm_json_num(j, "mean", wm_agg_mean(a));
    wm_json_num(j, "std", wm_agg_std(a));
    wm_json_num(j, "min", a->min);
    wm_json_num(j, "max", a->max);
    if (a->ninf) wm_json_uint(j, "identical_samples", a->ninf);
    wm_json_obj_end(j);
}

/* Exports checkpoint model_id (plain float32, no fusions) into a new temporary folder: tmpdir receives the
 * folder ("$TMPDIR/winml-eval-ref.winml-tmp.PID", removed on a fatal signal too; the caller removes it with
 * wm_tmp_discard(tmpdir, slot)), path its model.onnx. */
static wm_status export_reference(const char *model_id, char *tmpdir, int *slot, char *path, wm_error *err) {
    const char *base = getenv("TMPDIR");
    char final[PATH_MAX];
    snprintf(final, sizeof final, "%s/winml-eval-ref", base && *base ? base : "/tmp");
    wm_sweep_stale(base && *base ? base : "/tmp");
    wm_status s = wm_tmp_mkdir(final, tmpdir, PATH_MAX, slot, err);
    if (s) {
        wm_err_prefix(err, "--model-id: a temporary folder");
        return s;
    }
    snprintf(path, PATH_MAX + 32, "%s/ref", tmpdir);
    wm_build_opts bo = {.model = model_id, .out_dir = path, .task = -1, .precision = -1, .export_only = 1, .quiet = 1};
    wm_json summary;
    wm_json_init(&summary);
    s = wm_build(&bo, &summary, err);
    wm_json_free(&summary);
    snprintf(path, PATH_MAX + 32, "%s/ref/model.onnx", tmpdir);
    return s;
}

int wm_cmd_eval(int argc, char **argv) {
    wm_cli c;
    wm_cli_init(&c, "winml eval");
    enum { O_MODE = 256, O_REF, O_REFOUT, O_SAMPLES, O_SEED, O_THR, O_PL, O_PLT, O_BATCH, O_SEQ, O_DIM, O_THREADS, O_MODELID,
           O_DATASET, O_TASK, O_CTEXT, O_CPAIR, O_CLABEL, O_CQUERY, O_CPASS, O_CS1, O_CS2, O_CSCORE, O_MAXLEN, O_STRIDE,
           O_MAXLINE, O_CIMAGE, O_CCAPTION, O_CAUDIO, O_DSCONFIG, O_SPLIT, O_LANG };
    static const struct option longs[] = {
        WM_CLI_COMMON_LONG,
        {"mode", required_argument, 0, O_MODE},        {"reference", required_argument, 0, O_REF},
        {"reference-outputs", required_argument, 0, O_REFOUT}, {"samples", required_argument, 0, O_SAMPLES},
        {"seed", required_argument, 0, O_SEED},        {"threshold", required_argument, 0, O_THR},
        {"per-layer", no_argument, 0, O_PL},           {"layer-threshold", required_argument, 0, O_PLT},
        {"batch-size", required_argument, 0, O_BATCH}, {"seq-len", required_argument, 0, O_SEQ},
        {"dim", required_argument, 0, O_DIM},          {"threads", required_argument, 0, O_THREADS},
        {"model-id", required_argument, 0, O_MODELID}, {"dataset", required_argument, 0, O_DATASET},
        {"task", required_argument, 0, O_TASK},        {"text-column", required_argument, 0, O_CTEXT},
        {"pair-column", required_argument, 0, O_CPAIR}, {"label-column", required_argument, 0, O_CLABEL},
        {"query-column", required_argument, 0, O_CQUERY}, {"passage-column", required_argument, 0, O_CPASS},
        {"sentence1-column", required_argument, 0, O_CS1}, {"sentence2-column", required_argument, 0, O_CS2},
        {"score-column", required_argument, 0, O_CSCORE}, {"max-length", required_argument, 0, O_MAXLEN},
        {"stride", required_argument, 0, O_STRIDE}, {"max-line-bytes", required_argument, 0, O_MAXLINE},
        {"image-column", required_argument, 0, O_CIMAGE}, {"caption-column", required_argument, 0, O_CCAPTION},
        {"audio-column", required_argument, 0, O_CAUDIO}, {"dataset-config", required_argument, 0, O_DSCONFIG},
        {"split", required_argument, 0, O_SPLIT},      {"language", required_argument, 0, O_LANG},
        WM_CLI_LIMITS_LONG, WM_CLI_TARGET_LONG, {0, 0, 0, 0}};
    wm_task_opts to = {0};
    wm_session_opts so = {0};
    const char *mode = NULL, *ref = NULL, *refout = NULL, *model_id = NULL;
    long samples = 100, seed = 0, batch = 1, seq = 32, threads = 0;
    int per_layer = 0;
    double layer_thr = 30;
    gate gates[16];
    size_t n_gates = 0;
    wm_dim_bind dims[16];
    size_t n_dims = 0;
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":" WM_CLI_COMMON_SHORT WM_CLI_TARGET_SHORT, longs, NULL)) != -1) {
        switch (opt) {
        case 'h': help(); return WM_EXIT_OK;
        case O_MODE: mode = optarg; break;
        case O_REF: ref = optarg; break;
        case O_REFOUT: refout = optarg; break;
        case O_MODELID: model_id = optarg; break;
        case O_SAMPLES: case O_SEED: case O_BATCH: case O_SEQ: case O_THREADS: case O_MAXLEN: case O_STRIDE: {
            /* each sample is a forward pass of both models: bounded as sweep's --samples; sizes as int32 dims */
            long v, hi = opt == O_SAMPLES ? EVAL_MAX_SAMPLES : opt == O_SEED ? LONG_MAX : opt == O_THREADS ? 256
                                                                                                        : INT32_MAX;
            char flag[40];
            snprintf(flag, sizeof flag, "--%s", wm_cli_long_name(longs, opt));
            if (wm_cli_int_arg(&c, flag, optarg, opt == O_SEED ? 0 : 1, hi, &v)) return WM_EXIT_ERROR;
            if (opt == O_MAXLEN) to.max_length = v;
            else if (opt == O_STRIDE) to.stride = v;
            else *(opt == O_SAMPLES ? &samples : opt == O_SEED ? &seed : opt == O_BATCH ? &batch : opt == O_SEQ ? &seq : &threads) = v;
            break;
        }
        case O_DATASET: to.dataset = optarg; break;
        case O_DSCONFIG: to.dataset_config = optarg; break;
        case O_SPLIT: to.split = optarg; break;
        case O_MAXLINE: {
            uint64_t v;
            if (wm_parse_size(optarg, &v) || v > SIZE_MAX / 2)
                return wm_cli_usage_error(&c, "--max-line-bytes: '%s' is not a size (bytes, or with K, M, G)", optarg);
            to.max_line = (size_t)v;
            break;
        }
        case O_TASK: to.task = optarg; break;
        case O_CTEXT: to.col_text = optarg; break;
        case O_CIMAGE: to.col_image = optarg; break;
        case O_CAUDIO: to.col_audio = optarg; break;
        case O_LANG: to.language = optarg; break;
        case O_CCAPTION: to.col_caption = optarg; break;
        case O_CPAIR: to.col_pair = optarg; break;
        case O_CLABEL: to.col_label = optarg; break;
        case O_CQUERY: to.col_query = optarg; break;
        case O_CPASS: to.col_passage = optarg; break;
        case O_CS1: to.col_s1 = optarg; break;
        case O_CS2: to.col_s2 = optarg; break;
        case O_CSCORE: to.col_score = optarg; break;
        case O_THR: {
            const char *eq = strchr(optarg, '=');
            int m = eq ? parse_metric(optarg, (size_t)(eq - optarg)) : -1;
            if (m < 0 || n_gates == 16)
                return wm_cli_usage_error(&c, "--threshold: expected METRIC=VALUE with METRIC one of sqnr_db, psnr_db, "
                                              "cosine_similarity, mse, max_abs_diff; got '%s'", optarg);
            double v;
            if (wm_cli_num_arg(&c, "--threshold", eq + 1, -1e30, 0, 1e30, &v)) return WM_EXIT_ERROR;
            gates[n_gates].metric = m;
            gates[n_gates++].value = v;
            break;
        }
        case O_PL: per_layer = 1; break;
        case O_PLT:
            if (wm_cli_num_arg(&c, "--layer-threshold", optarg, -1e30, 0, 1e30, &layer_thr)) return WM_EXIT_ERROR;
            break;
        case O_DIM: {
            const char *eq = strchr(optarg, '=');
            long v;
            if (!eq || eq == optarg || n_dims == 16)
                return wm_cli_usage_error(&c, "--dim: expected NAME=VALUE (at most 16), got '%s'", optarg);
            if (wm_cli_int_arg(&c, "--dim", eq + 1, 0, INT32_MAX, &v)) return WM_EXIT_ERROR;
            dims[n_dims].name = strndup(optarg, (size_t)(eq - optarg));
            dims[n_dims++].value = v;
            break;
        }
        default: {
            int lr = wm_cli_limits_opt(&c, opt, optarg, &so);
            if (lr < 0) return WM_EXIT_ERROR;
            if (lr) break;
            int rc = wm_cli_other_opt(&c, opt, optarg, argv);
            if (rc) return rc;
        }
        }
    }
    if (optind < argc) return wm_cli_usage_error(&c, "unexpected argument '%s'", argv[optind]);
    /* --mode onnx is the reference's name of dataset evaluation; without --mode, --dataset asks for it */
    if (!mode) mode = to.dataset ? "task" : "compare";
    if (!strcmp(mode, "onnx")) mode = "task";
    if (!strcmp(mode, "task")) {
        /* without --dataset, the build's recipe's eval.dataset (as the reference's eval) */
        if (!c.model) return wm_cli_usage_error(&c, "--mode task needs -m BUILD_DIR (and --dataset FILE|DIR|ORG/NAME "
                                                "unless the build's recipe has eval.dataset)");
        to.samples = samples; /* the reference's default: 100 */
        to.threads = (int)threads;
        so.threads = (int)threads;
        to.session = &so;
        wm_error terr = {0};
        wm_json tj;
        wm_json_init(&tj);
        wm_json_obj(&tj, NULL);
        wm_json_str(&tj, "mode", "task");
        wm_json_str(&tj, "model", c.model);
        int trc;
        if (wm_task_eval(c.model, &to, &tj, &terr)) trc = wm_cli_fail(&c, &terr);
        else {
            wm_json_obj_end(&tj);
            trc = wm_cli_emit(&c, c.model, &tj);
        }
        wm_json_free(&tj);
        for (size_t i = 0; i < n_dims; i++) free((char *)dims[i].name);
        return trc;
    }
    if (strcmp(mode, "compare")) return wm_cli_usage_error(&c, "--mode: '%s' is not compare, task or onnx", mode);
    if (!c.model) return wm_cli_usage_error(&c, "-m CANDIDATE.onnx is required");
    if (!!ref + !!refout + !!model_id != 1)
        return wm_cli_usage_error(&c, "give exactly one of --reference REF.onnx, --reference-outputs FILE or --model-id CHECKPOINT");

    wm_error err = {0};
    int rc = WM_EXIT_ERROR;
    so.threads = (int)threads;
    so.keep_values = per_layer;
    wm_session *cand = NULL, *rs = NULL;
    wm_st_file *rf = NULL;
    void **bufs = NULL;
    size_t nbufs = 0;
    wm_tensor *co = NULL, *ro = NULL, *cin = NULL;
    wm_agg (*agg)[WM_CMP_COUNT] = NULL;
    int *match = NULL;
    wm_json j;
    wm_json_init(&j);
    char tmpdir[PATH_MAX] = "", refpath[PATH_MAX + 32];
    int tmpslot = -1;
    if (wm_session_new(c.model, &so, &cand, &err)) goto fail;
    if (model_id && export_reference(model_id, tmpdir, &tmpslot, refpath, &err)) goto fail;
    if (model_id) ref = refpath;
    if (ref && wm_session_new(ref, &so, &rs, &err)) goto fail;
    if (refout) {
        size_t rl = strlen(refout);
        int npz = rl > 4 && (!strcasecmp(refout + rl - 4, ".npz") || !strcasecmp(refout + rl - 4, ".npy"));
        if (npz ? wm_st_open_npz(refout, &rf, &err) : wm_st_open(refout, NULL, &rf, &err)) goto fail;
        char key[512];
        long k = 0;
        for (;; k++) { /* samples present in the file */
            snprintf(key, sizeof key, "outputs.%ld.%s", k, wm_session_output(cand, 0)->name);
            if (!wm_st_find(rf, key)) break;
        }
        if (k == 0) {
            wm_err(&err, WM_ERR_INPUT, "%s: no tensor 'outputs.0.%s' (expected inputs.<i>.<name> and outputs.<i>.<name>)",
                   refout, wm_session_output(cand, 0)->name);
            goto fail;
        }
        if (samples > k) samples = k;
    }
    size_t nco = wm_session_n_outputs(cand), nro = rs ? wm_session_n_outputs(rs) : nco;
    co = calloc(nco + 1, sizeof *co);
    ro = calloc(nro + 1, sizeof *ro);
    agg = calloc(nco + 1, sizeof *agg);
    match = calloc(nco + 1, sizeof *match);
    size_t nci = wm_session_n_inputs(cand);
    cin = calloc(nci + 1, sizeof *cin);
    if (!co || !ro || !agg || !match || !cin) {
        wm_err(&err, WM_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < nco; i++) { /* outputs are matched by name */
        match[i] = -1;
        for (size_t k = 0; rs && k < nro; k++)
            if (!strcmp(wm_session_output(cand, i)->name, wm_session_output(rs, k)->name)) match[i] = (int)k;
        if (rs && match[i] < 0) {
            wm_err(&err, WM_ERR_INPUT, "candidate output '%s' is not an output of %s", wm_session_output(cand, i)->name, ref);
            goto fail;
        }
    }
    for (long smp = 0; smp < samples; smp++) {
        wm_inputs gen = {0};
        const wm_session *spec = rs && !model_id ? rs : cand; /* an export's dims are symbolic: the candidate's */
        wm_input_opts io = {dims, n_dims, batch, seq, 0, (uint64_t)(seed + smp)};
        if (!rf && wm_inputs_make(spec, &io, &gen, &err)) goto fail;
        for (size_t i = 0; i < nci; i++) { /* candidate inputs by name, converted to its element types */
            const wm_io_info *ci = wm_session_input(cand, i);
            int found = 0;
            if (rf) {
                char key[512];
                snprintf(key, sizeof key, "inputs.%ld.%s", smp, ci->name);
                const wm_st_tensor *t = wm_st_find(rf, key);
                if (t && t->rank <= WM_MAX_RANK) {
                    cin[i].dtype = wm_st_dtype_onnx(t->dtype);
                    cin[i].rank = (int32_t)t->rank;
                    for (size_t d = 0; d < t->rank; d++) cin[i].dims[d] = t->shape[d];
                    void *b = aligned_alloc(64, (t->nbytes | 63) + 1);
                    void **nbp = realloc(bufs, (nbufs + 1) * sizeof *nbp);
                    if (!b || !nbp) {
                        free(b);
                        if (nbp) bufs = nbp;
                        wm_err(&err, WM_ERR_NOMEM, "out of memory");
                        goto fail;
                    }
                    bufs = nbp;
                    bufs[nbufs++] = b;
                    memcpy(b, t->data, t->nbytes);
                    cin[i].data = b;
                    found = 1;
                }
            } else
                for (size_t k = 0; k < gen.n; k++)
                    if (!strcmp(wm_session_input(spec, k)->name, ci->name)) cin[i] = gen.t[k], found = 1;
            if (!found) {
                wm_err(&err, WM_ERR_INPUT, "candidate input '%s' has no matching reference input", ci->name);
                wm_inputs_free(&gen);
                goto fail;
            }
            if (as_type(&cin[i], ci->dtype, &bufs, &nbufs, &err)) {
                wm_inputs_free(&gen);
                goto fail;
            }
        }
        if (wm_session_run(cand, cin, nci, co, nco, &err)) {
            wm_inputs_free(&gen);
            goto fail;
        }
        if (rs) {
            size_t nri = wm_session_n_inputs(rs);
            wm_tensor *rin = calloc(nri + 1, sizeof *rin);
            for (size_t i = 0; i < nri && rin; i++) {
                if (spec == rs) rin[i] = gen.t[i];
                if (spec != rs) { /* the candidate's inputs (from the file or generated), by name */
                    for (size_t k = 0; k < nci; k++)
                        if (!strcmp(wm_session_input(cand, k)->name, wm_session_input(rs, i)->name)) rin[i] = cin[k];
                    if (!rin[i].data) {
                        wm_err(&err, WM_ERR_INPUT, "reference input '%s' is not an input of the candidate %s",
                               wm_session_input(rs, i)->name, c.model);
                        free(rin);
                        wm_inputs_free(&gen);
                        goto fail;
                    }
                    as_type(&rin[i], wm_session_input(rs, i)->dtype, &bufs, &nbufs, &err);
                }
            }
            wm_status st = rin ? wm_session_run(rs, rin, nri, ro, nro, &err) : WM_ERR_NOMEM;
            free(rin);
            if (st) {
                wm_inputs_free(&gen);
                goto fail;
            }
        }
        for (size_t i = 0; i < nco; i++) {
            wm_tensor r;
            const char *oname = wm_session_output(cand, i)->name;
            if (rs) r = ro[match[i]];
            else {
                char key[512];
                snprintf(key, sizeof key, "outputs.%ld.%s", smp, oname);
                const wm_st_tensor *t = wm_st_find(rf, key);
                if (!t || t->rank > WM_MAX_RANK) {
                    wm_err(&err, WM_ERR_INPUT, "%s: no tensor '%s'", refout, key);
                    wm_inputs_free(&gen);
                    goto fail;
                }
                r.dtype = wm_st_dtype_onnx(t->dtype);
                r.rank = (int32_t)t->rank;
                for (size_t d = 0; d < t->rank; d++) r.dims[d] = t->shape[d];
                void *b = aligned_alloc(64, (t->nbytes | 63) + 1);
                void **nbp = b ? realloc(bufs, (nbufs + 1) * sizeof *nbp) : NULL;
                if (!nbp) {
                    free(b);
                    wm_inputs_free(&gen);
                    wm_err(&err, WM_ERR_NOMEM, "out of memory");
                    goto fail;
                }
                bufs = nbp;
                bufs[nbufs++] = b;
                memcpy(b, t->data, t->nbytes);
                r.data = b;
            }
            wm_cmp m;
            if (wm_compare(&co[i], &r, oname, &m, &err)) {
                wm_inputs_free(&gen);
                goto fail;
            }
            for (int k = 0; k < WM_CMP_COUNT; k++) wm_agg_add(&agg[i][k], wm_cmp_get(&m, k));
        }
        wm_inputs_free(&gen);
    }
    /* ---- result */
    wm_json_free(&j);
    wm_json_init(&j);
    wm_json_obj(&j, NULL);
    /* the reference's keys (docs/json/eval.md) */
    wm_json_str(&j, "runtime", "winml-cpu-engine");
    if (model_id) wm_json_str(&j, "model_id", model_id);
    wm_json_str(&j, "model_path", c.model);
    if (ref) {
        if (!model_id) wm_json_str(&j, "reference_path", ref);
        wm_json_str(&j, "reference_device", "cpu");
        wm_json_str(&j, "reference_ep", "CPUExecutionProvider");
    }
    wm_json_str(&j, "device", "cpu");
    wm_json_str(&j, "ep", "CPUExecutionProvider");
    wm_json_str(&j, "precision", wm_session_precision(cand));
    wm_json_obj(&j, "dataset");
    wm_json_null(&j, "split"); /* no dataset: generated inputs (or --reference-outputs' recorded ones) */
    wm_json_int(&j, "samples", samples);
    wm_json_bool(&j, "shuffle", 0);
    wm_json_int(&j, "seed", seed);
    if (refout) wm_json_str(&j, "path", refout);
    wm_json_obj_end(&j);
    if (c.out) wm_json_str(&j, "output_path", c.out);
    wm_json_str(&j, "mode", "compare");
    wm_json_bool(&j, "skip_build", 1);
    wm_json_bool(&j, "use_cache", 0);
    wm_json_bool(&j, "rebuild", 0);
    {
        const char **names = calloc(nco + 1, sizeof *names);
        if (!names) j.oom = 1;
        for (size_t i = 0; names && i < nco; i++) names[i] = wm_session_output(cand, i)->name;
        if (names) wm_cmp_metrics_json(&j, names, (const wm_agg(*)[WM_CMP_COUNT])agg, nco);
        free(names);
    }
    /* ours */
    wm_json_str(&j, "candidate", c.model);
    wm_json_str(&j, "reference", model_id ? model_id : ref ? ref : refout);
    if (model_id) wm_json_str(&j, "reference_kind", "float32 export of the checkpoint");
    wm_json_int(&j, "samples", samples);
    wm_json_int(&j, "seed", seed);
    wm_json_obj(&j, "outputs");
    int passed = 1;
    for (size_t i = 0; i < nco; i++) {
        wm_json_obj(&j, wm_session_output(cand, i)->name);
        for (int k = 0; k < WM_CMP_COUNT; k++) agg_json(&j, wm_cmp_names[k], &agg[i][k]);
        wm_json_obj_end(&j);
    }
    wm_json_obj_end(&j);
    if (n_gates) {
        wm_json_arr(&j, "thresholds");
        for (size_t g = 0; g < n_gates; g++)
            for (size_t i = 0; i < nco; i++) {
                int hi = wm_cmp_higher_is_better(gates[g].metric);
                const wm_agg *a = &agg[i][gates[g].metric];
                double worst = hi ? a->min : a->max;
                int ok = hi ? worst >= gates[g].value : worst <= gates[g].value; /* NaN fails */
                passed &= ok;
                wm_json_obj(&j, NULL);
                wm_json_str(&j, "output", wm_session_output(cand, i)->name);
                wm_json_str(&j, "metric", wm_cmp_names[gates[g].metric]);
                wm_json_num(&j, "threshold", gates[g].value);
                wm_json_num(&j, "worst", worst);
                wm_json_bool(&j, "passed", ok);
                wm_json_obj_end(&j);
            }
        wm_json_arr_end(&j);
    }
    if (per_layer && rs) { /* intermediate values of the last sample, in the candidate's (topological) order */
        wm_json_obj(&j, "per_layer");
        wm_json_num(&j, "layer_threshold_db", layer_thr);
        wm_json_arr(&j, "values");
        const char *first = NULL, *first_op = NULL, *first_node = NULL;
        double first_db = 0;
        size_t compared = 0;
        for (size_t v = 0; v < wm_session_n_values(cand); v++) {
            const char *name = wm_session_value_name(cand, v), *op = NULL;
            const char *node = wm_session_value_producer(cand, name, &op);
            wm_tensor a, b;
            wm_error e2 = {0};
            if (!node || wm_session_value_of(cand, name, &a, &e2) || wm_session_value_of(rs, name, &b, &e2)) continue;
            wm_cmp m;
            if (wm_compare(&a, &b, name, &m, &e2)) continue;
            compared++;
            wm_json_obj(&j, NULL);
            wm_json_str(&j, "value", name);
            wm_json_str(&j, "node", node);
            wm_json_str(&j, "op", op);
            wm_json_num(&j, "sqnr_db", m.sqnr_db);
            wm_json_num(&j, "max_abs_diff", m.max_abs);
            wm_json_obj_end(&j);
            if (!first && !(m.sqnr_db >= layer_thr)) first = name, first_op = op, first_node = node, first_db = m.sqnr_db;
        }
        wm_json_arr_end(&j);
        wm_json_uint(&j, "values_compared", compared);
        if (first) {
            wm_json_obj(&j, "first_divergence");
            wm_json_str(&j, "value", first);
            wm_json_str(&j, "node", first_node);
            wm_json_str(&j, "op", first_op);
            wm_json_num(&j, "sqnr_db", first_db);
            wm_json_obj_end(&j);
        } else
            wm_json_null(&j, "first_divergence");
        wm_json_obj_end(&j);
    }
    wm_json_bool(&j, "passed", passed);
    wm_json_obj_end(&j);
    rc = wm_cli_emit(&c, c.model, &j);
    if (rc == WM_EXIT_OK && !passed) rc = WM_EXIT_CHECK;
    goto done;
fail:
    rc = wm_cli_fail(&c, &err);
done:
    wm_json_free(&j);
    free(co);
    free(ro);
    free(cin);
    free(agg);
    free(match);
    for (size_t i = 0; i < nbufs; i++) free(bufs[i]);
    free(bufs);
    wm_st_close(rf);
    wm_session_free(cand);
    wm_session_free(rs);
    wm_tmp_discard(tmpdir, &tmpslot);
    for (size_t i = 0; i < n_dims; i++) free((char *)dims[i].name);
    return rc;
}
