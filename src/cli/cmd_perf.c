/*
 * cmd_perf.c - `winml perf`: latency, throughput and memory of one forward
 * pass on the CPU engine, as the reference's perf JSON (schema_version 2).
 */
#include <getopt.h>
#include <limits.h>
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
#include "eval/perf_report.h"
#include "llm/generate.h"
#include "onnx/dtype.h"
#include "ops/op.h"
#include "runtime/inputs.h"
#include "tasks/encoder.h"
#include "tasks/vision.h"
#include "winml/runtime.h"

static void help(void) {
    printf("usage: winml perf -m MODEL.onnx|BUILD_DIR [--warmup N] [--iterations N | --duration S]\n"
           "                  [--threads N] [--batch-size N] [--seq-len N] [--past-len N]\n"
           "                  [--dim NAME=VALUE ...] [--input-data FILE.safetensors|.npz|.npy] [--image FILE] [--seed N]\n"
           "                  [--ep auto|cpu] [-d auto|cpu] [--max-memory SIZE] [--max-loop-iterations N]\n"
           "                  [--prompt-len N] [--gen-len N] [--llm-runs N] [--llm-warmup N] [--decode-at N,N...]\n"
           "                  [--no-llm] [--timeout S] [-f table|json] [-o FILE]\n\n"
           WM_CLI_TARGET_HELP
           "-f json: the reference's perf JSON (schema_version 2) with ours beside it; see docs/json/perf.md.\n"
           "Measures one forward pass on the CPU engine: latency (mean, min, max, p50, p90, p95,\n"
           "p99 as the reference: sorted[min(n p/100, n-1)], std; warmup mean), throughput (samples/s, batches/s) and resident\n"
           "memory (baseline, after load, after inference, deltas). Inputs are generated from the\n"
           "model's input specs (token ids below the embedding table's size, masks of ones,\n"
           "pixels in [0,1)) with a seed, or read by name from a safetensors file or a numpy .npz (.npy: a one-input model). Symbolic dims\n"
           "take --dim values, else the batch size, sequence length (default 128) or past length\n"
           "(default 0) by their names. Defaults: --warmup 10 --iterations 100, all cores. Bounds: --warmup and\n"
           "--iterations up to 1048576 (--duration stops there too), --duration up to 604800 s (a week), --llm-runs\n"
           "and --llm-warmup up to 10000, --threads 256, sizes and --dim values 2^31-1.\n"
           "--image FILE (PNG or JPEG): pixel_values is that image, decoded and preprocessed as the model folder's\n"
           "preprocessor_config.json says, repeated over the batch (--max-image-pixels N as in winml run).\n\n"
           "A causal LM (input_ids, past_key_values.N.key/value -> logits, present.N.*) also gets the LLM\n"
           "figures (section llm): model load time, time to first token and prefill tokens/s for a random\n"
           "prompt of --prompt-len tokens (default 128), steady-state decode tokens/s and ms per output token\n"
           "over --gen-len tokens (default 128), medians of --llm-runs runs (default 3) after --llm-warmup runs\n"
           "(default 1), peak RSS; the same runs in the reference's GenAI layout (load, requests[], aggregate);\n"
           "and with\n"
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

static void shape_json(wm_json *j, const wm_tensor *t) {
    wm_json_arr(j, NULL);
    for (int d = 0; d < t->rank; d++) wm_json_int(j, NULL, t->dims[d]);
    wm_json_arr_end(j);
}

typedef struct llm_opts {
    long prompt_len, gen_len, runs, warmup;
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

/* Bounds of the counts, so a mistyped value is a usage error naming its flag before anything is allocated or run:
   each measured or warmup iteration keeps its time (8 bytes) and --duration stops at PERF_MAX_RUNS samples too; an
   LLM run keeps its requests' timings; --duration at most a week (sweep's --timeout bound). */
#define PERF_MAX_RUNS (1L << 20)
#define PERF_MAX_LLM_RUNS 10000L
#define PERF_MAX_SECONDS (86400.0 * 7)

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

/* The LLM run's measurements: every request (warmup first), and the figures of the "llm" section. */
typedef struct llm_result {
    double load_ms, peak_rss_mb;
    long n_req, n_warm, max_ctx;
    wm_perf_request *req;   /* [n_req]; decode_ms points into steps */
    double *steps;          /* [n_req * gen_len] */
    double total_ms_median;
    int64_t layers;
    int inplace, narrowed;
    double tps[16], ratio[16]; /* --decode-at */
} llm_result;

static void llm_result_free(llm_result *r) {
    free(r->req);
    free(r->steps);
}

/*
 * The LLM figures of a causal LM into *res (llm_result_free after any return). Returns WM_ERR_UNSUPPORTED
 * (err set) when path is not one. o->warmup requests run first and are excluded from the figures.
 */
static wm_status llm_bench(const wm_cli *c, const char *path, const llm_opts *o, int tty, llm_result *res,
                           wm_error *err) {
    long max_ctx = o->prompt_len + o->gen_len;
    for (int i = 0; i < o->n_decode_at; i++)
        if (o->decode_at[i] + DA_STEPS + 1 > max_ctx) max_ctx = o->decode_at[i] + DA_STEPS + 1;
    wm_clm_opts co = {.threads = o->threads, .max_length = max_ctx, .session = o->session};
    wm_clm *m = NULL;
    double t0 = now_ms();
    wm_status st = wm_clm_open(path, &co, &m, err);
    if (st) return st;
    res->load_ms = now_ms() - t0;
    res->max_ctx = max_ctx;
    int64_t vocab = wm_clm_vocab(m);
    if (vocab <= 0) vocab = 1000;
    long n_prompt = max_ctx, n_req = o->warmup + o->runs;
    int32_t *prompt = malloc((size_t)n_prompt * sizeof *prompt), *gen = malloc((size_t)o->gen_len * sizeof *gen);
    double *tot = malloc((size_t)n_req * sizeof(double)), *v = malloc((size_t)n_req * sizeof(double));
    res->req = calloc((size_t)n_req, sizeof *res->req);
    res->steps = malloc((size_t)n_req * (size_t)o->gen_len * sizeof *res->steps);
    if (!prompt || !gen || !tot || !v || !res->req || !res->steps) {
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
    for (long r = 0; r < n_req; r++) {
        size_t n_gen;
        wm_gen_stats gs;
        wm_perf_request *q = &res->req[r];
        go.step_ms = res->steps + (size_t)r * (size_t)o->gen_len;
        double a = now_ms();
        if ((st = wm_generate(m, prompt, (size_t)o->prompt_len, &go, gen, &n_gen, &gs, err))) goto done;
        tot[r] = now_ms() - a;
        q->warmup = r < o->warmup;
        q->prompt_tokens = gs.prompt_tokens;
        q->generated_tokens = n_gen;
        q->prefill_ms = gs.prefill_ms;
        q->first_token_ms = gs.ttft_ms - gs.prefill_ms;
        q->decode_ms = go.step_ms;
        q->n_decode = n_gen ? n_gen - 1 : 0;
        res->n_req = r + 1;
        res->n_warm += q->warmup;
        progress(c, tty, "llm", r + 1, n_req);
    }
    for (long r = 0; r < o->runs; r++) v[r] = tot[o->warmup + r];
    res->total_ms_median = median(v, o->runs);
    res->layers = wm_clm_layers(m);
    res->inplace = wm_clm_inplace(m);
    res->narrowed = wm_clm_narrowed(m);
    res->peak_rss_mb = mb(wm_peak_rss_bytes());
    if (o->n_decode_at) st = decode_at(m, o->decode_at, o->n_decode_at, prompt, res->tps, res->ratio, err);
done:
    free(prompt);
    free(gen);
    free(tot);
    free(v);
    wm_clm_free(m);
    return st;
}

/* Our "llm" section: medians over the timed requests. */
static void llm_json(const llm_opts *o, const llm_result *res, wm_json *j) {
    double *buf = malloc(3 * (size_t)(res->n_req + 1) * sizeof *buf);
    if (!buf) {
        j->oom = 1;
        return;
    }
    double *ttft = buf, *pre = buf + res->n_req + 1, *dec = buf + 2 * (res->n_req + 1);
    long n = 0;
    for (long r = res->n_warm; r < res->n_req; r++, n++) {
        const wm_perf_request *q = &res->req[r];
        double d = 0;
        for (size_t k = 0; k < q->n_decode; k++) d += q->decode_ms[k];
        ttft[n] = q->prefill_ms + q->first_token_ms;
        pre[n] = q->prefill_ms;
        dec[n] = q->n_decode ? d / (double)q->n_decode : 0;
    }
    double tpot = median(dec, n), prefill = median(pre, n), ttft_med = median(ttft, n);
    free(buf);
    wm_json_obj(j, "llm");
    wm_json_int(j, "prompt_tokens", o->prompt_len);
    wm_json_int(j, "generated_tokens", o->gen_len);
    wm_json_int(j, "runs", o->runs);
    wm_json_int(j, "warmup_runs", o->warmup);
    wm_json_str(j, "decoding", "greedy");
    wm_json_num(j, "load_ms", res->load_ms);
    wm_json_num(j, "ttft_ms", ttft_med);
    wm_json_num(j, "prefill_ms", prefill);
    wm_json_num(j, "prefill_tokens_per_sec", (double)o->prompt_len * 1e3 / prefill);
    wm_json_num(j, "decode_tokens_per_sec", 1e3 / tpot);
    wm_json_num(j, "tpot_ms", tpot);
    wm_json_num(j, "total_duration_ms", res->total_ms_median);
    wm_json_int(j, "kv_layers", res->layers);
    wm_json_str(j, "kv_cache", res->inplace ? "in_place" : "double_buffer");
    wm_json_str(j, "logits", res->narrowed ? "last_position" : "every_position");
    wm_json_num(j, "peak_rss_mb", res->peak_rss_mb);
    if (o->n_decode_at) {
        wm_json_arr(j, "decode_at_context");
        for (int i = 0; i < o->n_decode_at; i++) {
            wm_json_obj(j, NULL);
            wm_json_int(j, "context", o->decode_at[i]);
            wm_json_num(j, "decode_tokens_per_sec", res->tps[i]);
            wm_json_num(j, "speed_vs_first", res->ratio[i]);
            wm_json_obj_end(j);
        }
        wm_json_arr_end(j);
        wm_json_int(j, "decode_at_rounds", DA_ROUNDS);
    }
    wm_json_obj_end(j);
}

int wm_cmd_perf(int argc, char **argv) {
    wm_cli c;
    wm_cli_init(&c, "winml perf");
    enum { O_WARMUP = 256, O_ITER, O_DUR, O_THREADS, O_DIM, O_DATA, O_BATCH, O_SEQ, O_PAST, O_SEED,
           O_PLEN, O_GLEN, O_LRUNS, O_LWARM, O_NOLLM, O_DECAT, O_IMAGE, O_MAXPIX };
    static const struct option longs[] = {
        WM_CLI_COMMON_LONG,
        {"warmup", required_argument, 0, O_WARMUP}, {"iterations", required_argument, 0, O_ITER},
        {"duration", required_argument, 0, O_DUR},  {"threads", required_argument, 0, O_THREADS},
        {"dim", required_argument, 0, O_DIM},       {"input-data", required_argument, 0, O_DATA},
        {"image", required_argument, 0, O_IMAGE}, {"max-image-pixels", required_argument, 0, O_MAXPIX},
        {"batch-size", required_argument, 0, O_BATCH}, {"seq-len", required_argument, 0, O_SEQ},
        {"past-len", required_argument, 0, O_PAST}, {"seed", required_argument, 0, O_SEED},
        WM_CLI_TARGET_LONG,
        {"prompt-len", required_argument, 0, O_PLEN}, {"gen-len", required_argument, 0, O_GLEN},
        {"llm-runs", required_argument, 0, O_LRUNS},
        {"llm-warmup", required_argument, 0, O_LWARM}, {"no-llm", no_argument, 0, O_NOLLM},
        {"decode-at", required_argument, 0, O_DECAT}, WM_CLI_LIMITS_LONG,
        {0, 0, 0, 0}};
    long prompt_len = 128, gen_len = 128, llm_runs = 3, llm_warmup = 1;
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
    while ((opt = getopt_long(argc, argv, ":" WM_CLI_COMMON_SHORT WM_CLI_TARGET_SHORT, longs, NULL)) != -1) {
        switch (opt) {
        case 'h': help(); return WM_EXIT_OK;
        case O_WARMUP: if (wm_cli_int_arg(&c, "--warmup", optarg, 0, PERF_MAX_RUNS, &warmup)) return WM_EXIT_ERROR; break;
        case O_ITER: if (wm_cli_int_arg(&c, "--iterations", optarg, 1, PERF_MAX_RUNS, &iters)) return WM_EXIT_ERROR; break;
        case O_THREADS: if (wm_cli_int_arg(&c, "--threads", optarg, 1, 256, &threads)) return WM_EXIT_ERROR; break;
        case O_BATCH: if (wm_cli_int_arg(&c, "--batch-size", optarg, 1, INT32_MAX, &batch)) return WM_EXIT_ERROR; break;
        case O_SEQ: if (wm_cli_int_arg(&c, "--seq-len", optarg, 1, INT32_MAX, &seq)) return WM_EXIT_ERROR; break;
        case O_PAST: if (wm_cli_int_arg(&c, "--past-len", optarg, 0, INT32_MAX, &past)) return WM_EXIT_ERROR; break;
        case O_SEED: if (wm_cli_int_arg(&c, "--seed", optarg, 0, LONG_MAX, &seed)) return WM_EXIT_ERROR; break;
        case O_DUR:
            if (wm_cli_num_arg(&c, "--duration", optarg, 0, 1, PERF_MAX_SECONDS, &duration)) return WM_EXIT_ERROR;
            break;
        case O_DIM: {
            const char *eq = strchr(optarg, '=');
            long v;
            if (!eq || eq == optarg || n_dims == 32) return wm_cli_usage_error(&c, "--dim: expected NAME=VALUE, got '%s'", optarg);
            if (wm_cli_int_arg(&c, "--dim", eq + 1, 0, INT32_MAX, &v)) return WM_EXIT_ERROR;
            char *name = strndup(optarg, (size_t)(eq - optarg));
            dims[n_dims].name = name;
            dims[n_dims++].value = v;
            break;
        }
        case O_DATA: data = optarg; break;
        case O_IMAGE: image = optarg; break;
        case O_MAXPIX: if (wm_cli_int_arg(&c, "--max-image-pixels", optarg, 1, 1L << 40, &max_pix)) return WM_EXIT_ERROR; break;
        case O_PLEN: if (wm_cli_int_arg(&c, "--prompt-len", optarg, 1, INT32_MAX, &prompt_len)) return WM_EXIT_ERROR; break;
        case O_GLEN: if (wm_cli_int_arg(&c, "--gen-len", optarg, 2, INT32_MAX, &gen_len)) return WM_EXIT_ERROR; break;
        case O_LRUNS: if (wm_cli_int_arg(&c, "--llm-runs", optarg, 1, PERF_MAX_LLM_RUNS, &llm_runs)) return WM_EXIT_ERROR; break;
        case O_LWARM: if (wm_cli_int_arg(&c, "--llm-warmup", optarg, 0, PERF_MAX_LLM_RUNS, &llm_warmup)) return WM_EXIT_ERROR; break;
        case O_NOLLM: no_llm = 1; break;
        case O_DECAT: {
            long *v;
            size_t k;
            if (wm_cli_list_arg(&c, "--decode-at", optarg, 1, INT32_MAX, 16, &v, &k)) return WM_EXIT_ERROR;
            memcpy(decode_at, v, k * sizeof *v);
            n_decode_at = (int)k;
            free(v);
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
    if (!c.model) return wm_cli_usage_error(&c, "-m MODEL is required");
    if (image && data) return wm_cli_usage_error(&c, "--image and --input-data: give one of them");
    if (max_pix && !image) return wm_cli_usage_error(&c, "--max-image-pixels applies to --image");

    char path[4096], dir[4096];
    wm_error err = {0};
    char task[256];
    if (wm_model_path(c.model, "an .onnx file or a build folder with model.onnx", path, sizeof path, dir, sizeof dir,
                      &err) ||
        wm_folder_task(dir, task, sizeof task, &err))
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
    long cap = duration > 0 ? PERF_MAX_RUNS : iters;
    double *samples = malloc((size_t)cap * sizeof *samples), *warm = malloc((size_t)(warmup + 1) * sizeof *warm);
    int rc = WM_EXIT_OK;
    if (!out || !samples || !warm) {
        err.status = WM_ERR_NOMEM;
        snprintf(err.msg, sizeof err.msg, "out of memory");
        rc = wm_cli_fail(&c, &err);
        goto done;
    }
    for (long i = 0; i < warmup; i++) {
        double a = now_ms();
        if (wm_session_run(s, in.t, in.n, out, no, &err)) {
            rc = wm_cli_fail(&c, &err);
            goto done;
        }
        warm[i] = now_ms() - a;
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
    wm_session_stats ss;
    wm_session_get_stats(s, &ss);
    int64_t bsz = in.n && in.t[0].rank ? in.t[0].dims[0] : 1;

    /* what the report needs of the session, kept: the LLM runner loads its own (its load is timed) */
    char prec[32];
    snprintf(prec, sizeof prec, "%s", wm_session_precision(s));
    int n_threads = wm_session_threads(s);
    wm_json mi;
    wm_json_init(&mi);
    wm_json_obj(&mi, NULL);
    wm_json_arr(&mi, "input_names");
    for (size_t i = 0; i < in.n; i++) wm_json_str(&mi, NULL, wm_session_input(s, i)->name);
    wm_json_arr_end(&mi);
    wm_json_arr(&mi, "input_shapes");
    for (size_t i = 0; i < in.n; i++) shape_json(&mi, &in.t[i]);
    wm_json_arr_end(&mi);
    wm_json_arr(&mi, "input_types");
    for (size_t i = 0; i < in.n; i++) wm_json_str(&mi, NULL, wm_dtype_name(in.t[i].dtype));
    wm_json_arr_end(&mi);
    wm_json_arr(&mi, "output_names");
    for (size_t i = 0; i < no; i++) wm_json_str(&mi, NULL, wm_session_output(s, i)->name);
    wm_json_arr_end(&mi);
    wm_json_arr(&mi, "output_shapes");
    for (size_t i = 0; i < no; i++) shape_json(&mi, &out[i]);
    wm_json_arr_end(&mi);
    wm_json_str(&mi, "precision", prec);
    wm_json_obj_end(&mi);

    llm_opts lo = {prompt_len, gen_len, llm_runs, llm_warmup, (int)threads, (uint64_t)seed, decode_at, n_decode_at, &so};
    llm_result lr = {0};
    int is_llm = 0;
    if (!no_llm) {
        wm_session_free(s);
        s = NULL;
        if (llm_bench(&c, path, &lo, tty, &lr, &err) == WM_ERR_UNSUPPORTED) {
            wm_err_clear(&err); /* not a causal LM: the single forward pass is the whole report */
        } else if (err.status) {
            rc = wm_cli_fail(&c, &err);
            wm_json_free(&mi);
            llm_result_free(&lr);
            goto done;
        } else
            is_llm = 1;
    }

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
    wm_json_str(&j, "running_model_path", path);
    if (task[0]) wm_json_str(&j, "task", task);
    else wm_json_null(&j, "task");
    wm_json_str(&j, "device", "cpu");
    wm_json_str(&j, "ep", "CPUExecutionProvider");
    wm_json_str(&j, "ep_source", "builtin");
    wm_json_obj(&j, "ep_options");
    wm_json_obj_end(&j);
    wm_json_str(&j, "precision", prec);
    wm_json_int(&j, "iterations", n);
    wm_json_int(&j, "warmup", warmup);
    wm_json_num(&j, "duration_sec", total_ms / 1e3);
    wm_json_int(&j, "batch_size", data || image ? bsz : batch);
    wm_json_int(&j, "effective_batch_size", bsz);
    wm_json_int(&j, "threads", n_threads);
    wm_json_str(&j, "timestamp", ts);
    if (is_llm) { /* the reference's GenAI benchmark_info keys */
        char prompt[96];
        snprintf(prompt, sizeof prompt, "(%ld random token ids, seed %ld)", prompt_len, seed);
        wm_json_str(&j, "bundle_dir", dir);
        wm_json_str(&j, "effective_device", "cpu");
        wm_json_bool(&j, "compile", 0);
        wm_json_null(&j, "compile_timeout");
        wm_json_bool(&j, "monitor", 0);
        wm_json_int(&j, "max_new_tokens", gen_len);
        wm_json_bool(&j, "apply_template", 0);
        wm_json_str(&j, "prompt", prompt);
        wm_json_int(&j, "prompt_tokens", prompt_len);
        wm_json_int(&j, "generated_tokens", gen_len);
        wm_json_int(&j, "context_length", lr.max_ctx);
        wm_json_int(&j, "llm_warmup", llm_warmup);
        wm_json_int(&j, "llm_iterations", llm_runs);
    }
    wm_json_obj_end(&j);
    wm_json_raw(&j, "model_info", wm_json_text(&mi));
    if (mi.oom) j.oom = 1;
    wm_json_free(&mi);
    wm_perf_latency_json(&j, samples, (size_t)n, warm, (size_t)warmup, bsz);
    wm_perf_memory_json(&j, rss0, rss_load, rss_inf, wm_peak_rss_bytes());
    wm_json_obj(&j, "engine");
    wm_json_num(&j, "load_ms", load_ms);
    wm_json_uint(&j, "nodes", ss.n_nodes);
    wm_json_uint(&j, "folded_nodes", ss.n_folded);
    wm_json_uint(&j, "run_nodes", ss.n_run_nodes);
    wm_json_num(&j, "activation_arena_mb", mb(ss.arena_bytes));
    wm_json_num(&j, "activations_without_reuse_mb", mb(ss.naive_bytes));
    wm_json_bool(&j, "data_dependent_shapes", ss.eager);
    wm_json_obj_end(&j);
    if (is_llm) {
        llm_json(&lo, &lr, &j);
        wm_perf_genai_json(&j, lr.load_ms, lr.req, (size_t)lr.n_req);
    }
    llm_result_free(&lr);
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
