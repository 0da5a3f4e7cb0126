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
#include "core/file.h"
#include "eval/stats.h"
#include "onnx/dtype.h"
#include "runtime/inputs.h"
#include "winml/runtime.h"

static void help(void) {
    printf("usage: winml perf -m MODEL.onnx|BUILD_DIR [--warmup N] [--iterations N | --duration S]\n"
           "                  [--threads N] [--batch-size N] [--seq-len N] [--past-len N]\n"
           "                  [--dim NAME=VALUE ...] [--input-data FILE.safetensors] [--seed N]\n"
           "                  [--ep cpu] [--device cpu] [-f table|json] [-o FILE]\n\n"
           "Measures one forward pass on the CPU engine: latency (mean, min, max, p50, p90, p95,\n"
           "p99 nearest-rank, std; warmup mean), throughput (samples/s, batches/s) and resident\n"
           "memory (baseline, after load, after inference, deltas). Inputs are generated from the\n"
           "model's input specs (token ids below the embedding table's size, masks of ones,\n"
           "pixels in [0,1)) with a seed, or read by name from a safetensors file. Symbolic dims\n"
           "take --dim values, else the batch size, sequence length (default 128) or past length\n"
           "(default 0) by their names. Defaults: --warmup 10 --iterations 100, all cores.\n");
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

int wm_cmd_perf(int argc, char **argv) {
    wm_cli c;
    wm_cli_init(&c, "winml perf");
    enum { O_WARMUP = 256, O_ITER, O_DUR, O_THREADS, O_DIM, O_DATA, O_BATCH, O_SEQ, O_PAST, O_SEED, O_EP, O_DEV };
    static const struct option longs[] = {
        WM_CLI_COMMON_LONG,
        {"warmup", required_argument, 0, O_WARMUP}, {"iterations", required_argument, 0, O_ITER},
        {"duration", required_argument, 0, O_DUR},  {"threads", required_argument, 0, O_THREADS},
        {"dim", required_argument, 0, O_DIM},       {"input-data", required_argument, 0, O_DATA},
        {"batch-size", required_argument, 0, O_BATCH}, {"seq-len", required_argument, 0, O_SEQ},
        {"past-len", required_argument, 0, O_PAST}, {"seed", required_argument, 0, O_SEED},
        {"ep", required_argument, 0, O_EP},         {"device", required_argument, 0, O_DEV},
        {0, 0, 0, 0}};
    long warmup = 10, iters = 100, threads = 0, batch = 1, seq = 128, past = 0, seed = 0;
    double duration = 0;
    const char *data = NULL;
    wm_dim_bind dims[32];
    size_t n_dims = 0;
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
        case O_EP: case O_DEV:
            if (strcmp(optarg, "cpu"))
                return wm_cli_usage_error(&c, "%s '%s' is not available: this build runs on cpu only (available: cpu)",
                                          opt == O_EP ? "--ep" : "--device", optarg);
            break;
        default: {
            int rc = wm_cli_other_opt(&c, opt, optarg, argv);
            if (rc) return rc;
        }
        }
    }
    if (optind < argc) return wm_cli_usage_error(&c, "unexpected argument '%s'", argv[optind]);
    if (!c.model) return wm_cli_usage_error(&c, "-m MODEL is required");

    char path[4096];
    struct stat stt;
    if (stat(c.model, &stt) == 0 && S_ISDIR(stt.st_mode)) snprintf(path, sizeof path, "%s/model.onnx", c.model);
    else snprintf(path, sizeof path, "%s", c.model);

    int tty = isatty(STDERR_FILENO);
    wm_error err = {0};
    uint64_t rss0 = wm_current_rss_bytes();
    double t0 = now_ms();
    wm_session_opts so = {.threads = (int)threads};
    wm_session *s = NULL;
    if (wm_session_new(path, &so, &s, &err)) return wm_cli_fail(&c, &err);
    double load_ms = now_ms() - t0;
    uint64_t rss_load = wm_current_rss_bytes();
    wm_inputs in = {0};
    wm_input_opts io = {dims, n_dims, batch, seq, past, (uint64_t)seed};
    wm_status st = data ? wm_inputs_read(s, data, &in, &err) : wm_inputs_make(s, &io, &in, &err);
    if (st) {
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
