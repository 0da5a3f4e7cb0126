/*
 * cmd_perf.c - `winml perf`: latency, throughput and memory of one forward
 * pass on the CPU engine, as the reference's perf JSON (schema_version 2).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_limits.h"
#include "core/error.h"
#include "core/file.h"
#include "eval/stats.h"
#include "llm/generate.h"
#include "onnx/dtype.h"
#include "ops/op.h"
#include "runtime/inputs.h"
#include "tasks/vision.h"
#include "winml/runtime.h"

static void help(void) {
    printf("usage: winml perf -m MODEL.onnx|BUILD_DIR [--warmup N] [--iterations N | --duration S]\n"
           "                  [--threads N] [--batch-size N] [--seq-len N] [--past-len N]\n"
           "                  [--dim NAME=VALUE ...] [--input-data FILE.safetensors] [--image FILE] [--seed N]\n"
           "                  [--ep cpu] [--device cpu] [--max-memory SIZE] [--max-loop-iterations N]\n"
           "                  [--timeout S] [-f table|json] [-o FILE]\n\n"
           "Measures one forward pass on the CPU engine: latency (mean, min, max, p50, p90, p95,\n"
           "p99 nearest-rank, std; warmup mean), throughput (samples/s, batches/s) and resident\n"
           "memory (baseline, after load, after inference, deltas). Inputs are generated from the\n"
           "model's input specs (token ids below the embedding table's size, masks of ones,\n"
           "pixels in [0,1)) with a seed, or read by name from a safetensors file. Symbolic dims\n"
           "take --dim values, else the batch size, sequence length (default 128) or past length\n"
           "(default 0) by their names. Defaults: --warmup 10 --iterations 100, all cores.\n"
           "--image FILE (PNG or JPEG): pixel_values is that image, decoded and preprocessed as the model folder's\n"
           "preprocessor_config.json says, repeated over the batch (--max-image-pixels N as in winml run).\n\n"
           "A causal LM (input_ids, past_key_values.N.key/value -> logits, present.N.*) also gets the LLM\n"
           "figures (section llm): model load time, time to first token and prefill tokens/s for a random\n"
           "prompt of --prompt-len tokens (default 128), steady-state decode tokens/s and ms per output token\n"
           "over --gen-len tokens (default 128), medians of --llm-runs runs (default 3), peak RSS; and with\n"
           "--decode-at N,N... the decode speed after a context of each N tokens, and each speed over the first\n"
           "one's (median of 5 rounds that time every context back to back). --no-llm skips it.\n\n"
           WM_CLI_LIMITS_HELP);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double mb(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

static void progress(const wm_cli *c, int tty, const char *what, long i, long n) {
    if (!tty || c->json || c->quiet) return;
    int w = 30, k = n > 0 ? (int)(w * i / n) : w;
    fprintf(stderr, "\r%-8s [%.*s%*s] %ld/%ld", what, k, "##############################", w - k, "", i, n);
    if (i == n) fputc('\n', stderr);
}

/* --image: pixel_values becomes the preprocessed image, repeated over the batch. */
static wm_status image_input(const wm_session *s, const char *dir, const char *image, uint64_t max_pixels,
                             wm_inputs *in, wm_error *err) {
    size_t i = 0;
    while (i < in->n && strcmp(wm_session_input(s, i)->name, "pixel_values")) i++;
    if (i == in->n) return wm_err(err, WM_ERR_USAGE, "--image: the model has no input pixel_values");
    wm_tensor *t = &in->t[i];
    if (t->rank != 4 || t->dims[1] != 3 || (t->dtype != WM_DT_FLOAT && t->dtype != WM_DT_FLOAT16))
        return wm_err(err, WM_ERR_UNSUPPORTED, "--image: pixel_values is not float or float16 [batch, 3, H, W]");
    float *x;
    int h, w;
    wm_status st = wm_vision_pixels(dir, image, max_pixels, &x, &h, &w, err);
    if (st) return st;
    size_t one = (size_t)3 * h * w, es = t->dtype == WM_DT_FLOAT ? 4 : 2;
    uint8_t *buf = aligned_alloc(64, ((one * es * (size_t)t->dims[0]) | 63) + 1);
    if (!buf) {
        free(x);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    for (int64_t b = 0; b < t->dims[0]; b++) wm_convert(WM_DT_FLOAT, x, t->dtype, buf + (size_t)b * one * es, one);
    free(x);
    free(in->bufs[i]);
    in->bufs[i] = buf;
    t->data = buf, t->dims[2] = h, t->dims[3] = w;
    return WM_OK;
}

static int parse_long(const wm_cli *c, const char *flag, const char *v, long lo, long *out) {
    char *end;
    long x = strtol(v, &end, 10);
    if (!*v || *end || x < lo) {
        wm_cli_usage_error(c, "%s: '%s' is not an integer >= %ld", flag, v, lo);
        return -1;
    }
    *out = x;
    return 0;
}

static void shape_json(wm_json *j, const wm_tensor *t) {
    wm_json_arr(j, NULL);
    for (int d = 0; d < t->rank; d++) wm_json_int(j, NULL, t->dims[d]);
    wm_json_arr_end(j);
}

typedef struct llm_opts {
    long prompt_len, gen_len, runs;
    int threads;
    uint64_t seed;
    const long *decode_at;
    int n_decode_at;
    const wm_session_opts *session; /* the bounds */
} llm_opts;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, long n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

enum { DA_STEPS = 9, DA_ROUNDS = 5 }; /* --decode-at: steps per context per round (the first one dropped) */

/* The median of steps one-token steps (after one dropped) from the cache as it is, in ms. */
static wm_status decode_steps(wm_clm *m, int32_t id, double *med, wm_error *err) {
    const float *lg;
    double ms[DA_STEPS];
    wm_status st = wm_clm_append(m, &id, 1, &lg, err);
    for (int k = 0; !st && k < DA_STEPS; k++) {
        double a = now_ms();
        st = wm_clm_append(m, &id, 1, &lg, err);
        ms[k] = now_ms() - a;
    }
    if (!st) *med = median(ms, DA_STEPS); /* one preempted step does not move it */
    return st;
}

/*
 * Decode-only speed after a context of each ctx[i] tokens (n of them, any order), as tokens/s in tps[i], and
 * ratio[i] = speed at ctx[i] / speed at ctx[0]. Rounds: the cache is filled to the longest context (prompt),
 * then cut back to each shorter one in turn, and DA_STEPS steps are timed at each; the next round fills it
 * back up. tps is the median over rounds of each round's median step, ratio the median of the per-round
 * ratios: the contexts of a round are timed within a second of each other, so a machine whose speed drifts
 * over seconds (seen here: +-25%) moves both sides of each ratio.
 */
static wm_status decode_at(wm_clm *m, const long *ctx, int n, const int32_t *prompt, double *tps, double *ratio,
                           wm_error *err) {
    double t[DA_ROUNDS][16], v[DA_ROUNDS];
    int ord[16];
    for (int i = 0; i < n; i++) { /* longest first: each next context is a cut of the cache */
        int k = i;
        while (k > 0 && ctx[ord[k - 1]] < ctx[i]) ord[k] = ord[k - 1], k--;
        ord[k] = i;
    }
    wm_clm_reset(m);
    wm_status st = WM_OK;
    for (int r = 0; r < DA_ROUNDS && !st; r++)
        for (int k = 0; k < n && !st; k++) {
            long c = ctx[ord[k]], len = (long)wm_clm_length(m);
            const float *lg;
            if (len > c) st = wm_clm_truncate(m, c, err);
            else if (len < c) st = wm_clm_append(m, prompt + len, (size_t)(c - len), &lg, err);
            if (!st) st = decode_steps(m, prompt[0], &t[r][ord[k]], err);
        }
    for (int i = 0; !st && i < n; i++) {
        for (int r = 0; r < DA_ROUNDS; r++) v[r] = t[r][i];
        tps[i] = 1e3 / median(v, DA_ROUNDS);
        for (int r = 0; r < DA_ROUNDS; r++) v[r] = t[r][0] / t[r][i];
        ratio[i] = median(v, DA_ROUNDS);
    }
    return st;
}

/*
 * The LLM figures of a causal LM. Returns WM_ERR_UNSUPPORTED (err set) when path is not one;
 * otherwise adds the "llm" section to j.
 */
static wm_status llm_bench(const wm_cli *c, const char *path, const llm_opts *o, int tty, wm_json *j, wm_error *err) {
    long max_ctx = o->prompt_len + o->gen_len;
    for (int i = 0; i < o->n_decode_at; i++)
        if (o->decode_at[i] + DA_STEPS + 1 > max_ctx) max_ctx = o->decode_at[i] + DA_STEPS + 1;
    wm_clm_opts co = {.threads = o->threads, .max_length = max_ctx, .session = o->session};
    wm_clm *m = NULL;
    double t0 = now_ms();
    wm_status st = wm_clm_open(path, &co, &m, err);
    if (st) return st;
    double load_ms = now_ms() - t0;
    int64_t vocab = wm_clm_vocab(m);
    if (vocab <= 0) vocab = 1000;
    long n_prompt = max_ctx;
    int32_t *prompt = malloc((size_t)n_prompt * sizeof *prompt), *gen = malloc((size_t)o->gen_len * sizeof *gen);
    double *ttft = malloc((size_t)o->runs * sizeof(double)), *pre = malloc((size_t)o->runs * sizeof(double));
    double *dec = malloc((size_t)o->runs * sizeof(double)), *tot = malloc((size_t)o->runs * sizeof(double));
    if (!prompt || !gen || !ttft || !pre || !dec || !tot) {
        st = wm_err(err, WM_ERR_NOMEM, "out of memory");
        goto done;
    }
    uint64_t x = o->seed * 0x9e3779b97f4a7c15ull + 12345;
    for (long i = 0; i < n_prompt; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        prompt[i] = (int32_t)(x % (uint64_t)vocab);
    }
    wm_gen_opts go = {.max_new_tokens = (size_t)o->gen_len};
    wm_sampling_default(&go.sampling);
    for (long r = 0; r < o->runs; r++) {
        size_t n_gen;
        wm_gen_stats gs;
        double a = now_ms();
        if ((st = wm_generate(m, prompt, (size_t)o->prompt_len, &go, gen, &n_gen, &gs, err))) goto done;
        tot[r] = now_ms() - a;
        ttft[r] = gs.ttft_ms;
        pre[r] = gs.prefill_ms;
        dec[r] = gs.decode_ms / (double)(n_gen - 1);
        progress(c, tty, "llm", r + 1, o->runs);
    }
    double tpot = median(dec, o->runs), prefill = median(pre, o->runs);
    wm_json_obj(j, "llm");
    wm_json_int(j, "prompt_tokens", o->prompt_len);
    wm_json_int(j, "generated_tokens", o->gen_len);
    wm_json_int(j, "runs", o->runs);
    wm_json_str(j, "decoding", "greedy");
    wm_json_num(j, "load_ms", load_ms);
    wm_json_num(j, "ttft_ms", median(ttft, o->runs));
    wm_json_num(j, "prefill_ms", prefill);
    wm_json_num(j, "prefill_tokens_per_sec", (double)o->prompt_len * 1e3 / prefill);
    wm_json_num(j, "decode_tokens_per_sec", 1e3 / tpot);
    wm_json_num(j, "tpot_ms", tpot);
    wm_json_num(j, "total_duration_ms", median(tot, o->runs));
    wm_json_int(j, "kv_layers", wm_clm_layers(m));
    wm_json_str(j, "kv_cache", wm_clm_inplace(m) ? "in_place" : "double_buffer");
    wm_json_str(j, "logits", wm_clm_narrowed(m) ? "last_position" : "every_position");
    wm_json_num(j, "peak_rss_mb", mb(wm_peak_rss_bytes()));
    if (o->n_decode_at) {
        double tps[16], ratio[16];
        if ((st = decode_at(m, o->decode_at, o->n_decode_at, prompt, tps, ratio, err))) goto done;
        wm_json_arr(j, "decode_at_context");
        for (int i = 0; i < o->n_decode_at; i++) {
            wm_json_obj(j, NULL);
            wm_json_int(j, "context", o->decode_at[i]);
            wm_json_num(j, "decode_tokens_per_sec", tps[i]);
            wm_json_num(j, "speed_vs_first", ratio[i]);
            wm_json_obj_end(j);
        }
        wm_json_arr_end(j);
        wm_json_int(j, "decode_at_rounds", DA_ROUNDS);
    }
    wm_json_obj_end(j);
done:
    free(prompt);
    free(gen);
    free(ttft);
    free(pre);
    free(dec);
    free(tot);
    wm_clm_free(m);
    return st;
}

int wm_cmd_perf(int argc, char **argv) {
    wm_cli c;
    wm_cli_init(&c, "winml perf");
    enum { O_WARMUP = 256, O_ITER, O_DUR, O_THREADS, O_DIM, O_DATA, O_BATCH, O_SEQ, O_PAST, O_SEED, O_EP, O_DEV,
           O_PLEN, O_GLEN, O_LRUNS, O_NOLLM, O_DECAT, O_IMAGE, O_MAXPIX };
    static const struct option longs[] = {
        WM_CLI_COMMON_LONG,
        {"warmup", required_argument, 0, O_WARMUP}, {"iterations", required_argument, 0, O_ITER},
        {"duration", required_argument, 0, O_DUR},  {"threads", required_argument, 0, O_THREADS},
        {"dim", required_argument, 0, O_DIM},       {"input-data", required_argument, 0, O_DATA},
        {"image", required_argument, 0, O_IMAGE}, {"max-image-pixels", required_argument, 0, O_MAXPIX},
        {"batch-size", required_argument, 0, O_BATCH}, {"seq-len", required_argument, 0, O_SEQ},
        {"past-len", required_argument, 0, O_PAST}, {"seed", required_argument, 0, O_SEED},
        {"ep", required_argument, 0, O_EP},         {"device", required_argument, 0, O_DEV},
        {"prompt-len", required_argument, 0, O_PLEN}, {"gen-len", required_argument, 0, O_GLEN},
        {"llm-runs", required_argument, 0, O_LRUNS}, {"no-llm", no_argument, 0, O_NOLLM},
        {"decode-at", required_argument, 0, O_DECAT}, WM_CLI_LIMITS_LONG,
        {0, 0, 0, 0}};
    long prompt_len = 128, gen_len = 128, llm_runs = 3;
    int no_llm = 0;
    long decode_at[16];
    int n_decode_at = 0;
    long warmup = 10, iters = 100, threads = 0, batch = 1, seq = 128, past = 0, seed = 0;
    double duration = 0;
    const char *data = NULL, *image = NULL;
    long max_pix = 0;
    wm_dim_bind dims[32];
    size_t n_dims = 0;
    wm_session_opts so = {0};
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":" WM_CLI_COMMON_SHORT, longs, NULL)) != -1) {
        switch (opt) {
        case 'h': help(); return WM_EXIT_OK;
        case O_WARMUP: if (parse_long(&c, "--warmup", optarg, 0, &warmup)) return WM_EXIT_ERROR; break;
        case O_ITER: if (parse_long(&c, "--iterations", optarg, 1, &iters)) return WM_EXIT_ERROR; break;
        case O_THREADS: if (parse_long(&c, "--threads", optarg, 1, &threads)) return WM_EXIT_ERROR; break;
        case O_BATCH: if (parse_long(&c, "--batch-size", optarg, 1, &batch)) return WM_EXIT_ERROR; break;
        case O_SEQ: if (parse_long(&c, "--seq-len", optarg, 1, &seq)) return WM_EXIT_ERROR; break;
        case O_PAST: if (parse_long(&c, "--past-len", optarg, 0, &past)) return WM_EXIT_ERROR; break;
        case O_SEED: if (parse_long(&c, "--seed", optarg, 0, &seed)) return WM_EXIT_ERROR; break;
        case O_DUR: {
            char *end;
            duration = strtod(optarg, &end);
            if (!*optarg || *end || !(duration > 0))
                return wm_cli_usage_error(&c, "--duration: '%s' is not a positive number of seconds", optarg);
            break;
        }
        case O_DIM: {
            const char *eq = strchr(optarg, '=');
            long v;
            if (!eq || eq == optarg || n_dims == 32) return wm_cli_usage_error(&c, "--dim: expected NAME=VALUE, got '%s'", optarg);
            if (parse_long(&c, "--dim", eq + 1, 0, &v)) return WM_EXIT_ERROR;
            char *name = strndup(optarg, (size_t)(eq - optarg));
            dims[n_dims].name = name;
            dims[n_dims++].value = v;
            break;
        }
        case O_DATA: data = optarg; break;
        case O_IMAGE: image = optarg; break;
        case O_MAXPIX: if (parse_long(&c, "--max-image-pixels", optarg, 1, &max_pix)) return WM_EXIT_ERROR; break;
        case O_PLEN: if (parse_long(&c, "--prompt-len", optarg, 1, &prompt_len)) return WM_EXIT_ERROR; break;
        case O_GLEN: if (parse_long(&c, "--gen-len", optarg, 2, &gen_len)) return WM_EXIT_ERROR; break;
        case O_LRUNS: if (parse_long(&c, "--llm-runs", optarg, 1, &llm_runs)) return WM_EXIT_ERROR; break;
        case O_NOLLM: no_llm = 1; break;
        case O_DECAT: {
            char *p = optarg;
            while (*p) {
                char *end;
                long v = strtol(p, &end, 10);
                if (end == p || v < 1 || n_decode_at == 16 || (*end && *end != ','))
                    return wm_cli_usage_error(&c, "--decode-at: expected N,N,... context lengths, got '%s'", optarg);
                decode_at[n_decode_at++] = v;
                p = *end ? end + 1 : end;
            }
            break;
        }
        case O_EP: case O_DEV:
            if (strcmp(optarg, "cpu"))
                return wm_cli_usage_error(&c, "%s '%s' is not available: this build runs on cpu only (available: cpu)",
                                          opt == O_EP ? "--ep" : "--device", optarg);
            break;
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
    if (!c.model) return wm_cli_usage_error(&c, "-m MODEL is required");
    if (image && data) return wm_cli_usage_error(&c, "--image and --input-data: give one of them");
    if (max_pix && !image) return wm_cli_usage_error(&c, "--max-image-pixels applies to --image");

    char path[4096], dir[4096];
    wm_error err = {0};
    if (wm_model_path(c.model, "an .onnx file or a build folder with model.onnx", path, sizeof path, dir, sizeof dir,
                      &err))
        return wm_cli_fail(&c, &err);

    int tty = isatty(STDERR_FILENO);
    uint64_t rss0 = wm_current_rss_bytes();
    double t0 = now_ms();
    so.threads = (int)threads;
    wm_session *s = NULL;
    if (wm_session_new(path, &so, &s, &err)) return wm_cli_fail(&c, &err);
    double load_ms = now_ms() - t0;
    uint64_t rss_load = wm_current_rss_bytes();
    wm_inputs in = {0};
    wm_input_opts io = {dims, n_dims, batch, seq, past, (uint64_t)seed};
    wm_status st = data ? wm_inputs_read(s, data, &in, &err) : wm_inputs_make(s, &io, &in, &err);
    if (!st && image) st = image_input(s, dir, image, (uint64_t)max_pix, &in, &err);
    if (st) {
        wm_inputs_free(&in); /* made, then --image refused */
        wm_session_free(s);
        return wm_cli_fail(&c, &err);
    }
    size_t no = wm_session_n_outputs(s);
    wm_tensor *out = calloc(no + 1, sizeof *out);
    long cap = duration > 0 ? 1 << 20 : iters;
    double *samples = malloc((size_t)cap * sizeof *samples), *warm = malloc((size_t)(warmup + 1) * sizeof *warm);
    int rc = WM_EXIT_OK;
    if (!out || !samples || !warm) {
        err.status = WM_ERR_NOMEM;
        snprintf(err.msg, sizeof err.msg, "out of memory");
        rc = wm_cli_fail(&c, &err);
        goto done;
    }
    double warm_sum = 0;
    for (long i = 0; i < warmup; i++) {
        double a = now_ms();
        if (wm_session_run(s, in.t, in.n, out, no, &err)) {
            rc = wm_cli_fail(&c, &err);
            goto done;
        }
        warm[i] = now_ms() - a;
        warm_sum += warm[i];
        progress(&c, tty, "warmup", i + 1, warmup);
    }
    long n = 0;
    double start = now_ms();
    for (;;) {
        if (duration > 0 ? (now_ms() - start >= duration * 1e3 || n >= cap) : n >= iters) break;
        double a = now_ms();
        if (wm_session_run(s, in.t, in.n, out, no, &err)) {
            rc = wm_cli_fail(&c, &err);
            goto done;
        }
        samples[n++] = now_ms() - a;
        if (duration <= 0) progress(&c, tty, "measure", n, iters);
    }
    if (duration > 0) progress(&c, tty, "measure", n, n);
    double total_ms = now_ms() - start;
    uint64_t rss_inf = wm_current_rss_bytes();
    wm_lat_stats ls;
    wm_lat_stats_compute(samples, (size_t)n, NULL, &ls);
    wm_session_stats ss;
    wm_session_get_stats(s, &ss);
    int64_t bsz = in.n && in.t[0].rank ? in.t[0].dims[0] : 1;

    wm_json j;
    wm_json_init(&j);
    wm_json_obj(&j, NULL);
    wm_json_int(&j, "schema_version", 2);
    wm_json_obj(&j, "benchmark_info");
    char rt[64], ts[64];
    snprintf(rt, sizeof rt, "winml-cpu-engine %s", wm_version());
    time_t tnow = time(NULL);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", gmtime(&tnow));
    wm_json_str(&j, "runtime", rt);
    wm_json_str(&j, "model_id", c.model);
    wm_json_null(&j, "task");
    wm_json_str(&j, "device", "cpu");
    wm_json_str(&j, "ep", "cpu");
    wm_json_str(&j, "precision", wm_session_precision(s));
    wm_json_int(&j, "iterations", n);
    wm_json_int(&j, "warmup", warmup);
    wm_json_int(&j, "batch_size", bsz);
    wm_json_int(&j, "threads", wm_session_threads(s));
    wm_json_str(&j, "timestamp", ts);
    wm_json_obj_end(&j);
    wm_json_obj(&j, "model_info");
    wm_json_arr(&j, "input_names");
    for (size_t i = 0; i < in.n; i++) wm_json_str(&j, NULL, wm_session_input(s, i)->name);
    wm_json_arr_end(&j);
    wm_json_arr(&j, "input_shapes");
    for (size_t i = 0; i < in.n; i++) shape_json(&j, &in.t[i]);
    wm_json_arr_end(&j);
    wm_json_arr(&j, "input_types");
    for (size_t i = 0; i < in.n; i++) wm_json_str(&j, NULL, wm_dtype_name(in.t[i].dtype));
    wm_json_arr_end(&j);
    wm_json_arr(&j, "output_names");
    for (size_t i = 0; i < no; i++) wm_json_str(&j, NULL, wm_session_output(s, i)->name);
    wm_json_arr_end(&j);
    wm_json_arr(&j, "output_shapes");
    for (size_t i = 0; i < no; i++) shape_json(&j, &out[i]);
    wm_json_arr_end(&j);
    wm_json_obj_end(&j);
    wm_json_obj(&j, "latency_ms");
    wm_json_num(&j, "mean", ls.mean);
    wm_json_num(&j, "min", ls.min);
    wm_json_num(&j, "max", ls.max);
    wm_json_num(&j, "p50", ls.p50);
    wm_json_num(&j, "p90", ls.p90);
    wm_json_num(&j, "p95", ls.p95);
    wm_json_num(&j, "p99", ls.p99);
    wm_json_num(&j, "std", ls.std);
    wm_json_num(&j, "warmup_mean", warmup ? warm_sum / (double)warmup : 0.0);
    wm_json_obj_end(&j);
    wm_json_obj(&j, "throughput");
    wm_json_num(&j, "samples_per_sec", total_ms > 0 ? (double)(n * bsz) * 1e3 / total_ms : 0.0);
    wm_json_num(&j, "batches_per_sec", total_ms > 0 ? (double)n * 1e3 / total_ms : 0.0);
    wm_json_obj_end(&j);
    wm_json_arr(&j, "raw_samples_ms");
    for (long i = 0; i < n; i++) wm_json_num(&j, NULL, samples[i]);
    wm_json_arr_end(&j);
    wm_json_obj(&j, "memory");
    wm_json_num(&j, "rss_baseline_mb", mb(rss0));
    wm_json_num(&j, "rss_after_compile_mb", mb(rss_load));
    wm_json_num(&j, "rss_after_inference_mb", mb(rss_inf));
    wm_json_num(&j, "rss_model_load_delta_mb", mb(rss_load) - mb(rss0));
    wm_json_num(&j, "rss_inference_delta_mb", mb(rss_inf) - mb(rss_load));
    wm_json_num(&j, "rss_total_delta_mb", mb(rss_inf) - mb(rss0));
    wm_json_num(&j, "peak_rss_mb", mb(wm_peak_rss_bytes()));
    wm_json_obj_end(&j);
    wm_json_obj(&j, "engine");
    wm_json_num(&j, "load_ms", load_ms);
    wm_json_uint(&j, "nodes", ss.n_nodes);
    wm_json_uint(&j, "folded_nodes", ss.n_folded);
    wm_json_uint(&j, "run_nodes", ss.n_run_nodes);
    wm_json_num(&j, "activation_arena_mb", mb(ss.arena_bytes));
    wm_json_num(&j, "activations_without_reuse_mb", mb(ss.naive_bytes));
    wm_json_bool(&j, "data_dependent_shapes", ss.eager);
    wm_json_obj_end(&j);
    if (!no_llm) {
        llm_opts lo = {prompt_len, gen_len, llm_runs, (int)threads, (uint64_t)seed, decode_at, n_decode_at, &so};
        wm_session_free(s); /* the LLM runner loads its own session: its load time is measured */
        s = NULL;
        if (llm_bench(&c, path, &lo, tty, &j, &err) == WM_ERR_UNSUPPORTED) {
            wm_err_clear(&err); /* not a causal LM: the single forward pass is the whole report */
        } else if (err.status) {
            rc = wm_cli_fail(&c, &err);
            wm_json_free(&j);
            goto done;
        }
    }
    wm_json_obj_end(&j);
    rc = wm_cli_emit(&c, c.model, &j);
    wm_json_free(&j);
done:
    free(samples);
    free(warm);
    free(out);
    wm_inputs_free(&in);
    wm_session_free(s);
    for (size_t i = 0; i < n_dims; i++) free((char *)dims[i].name);
    return rc;
}
