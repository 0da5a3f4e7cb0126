/* perf_report.c - the computed sections of the perf JSON (see perf_report.h, docs/json/perf.md). */
#include "eval/perf_report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "eval/stats.h"

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

void wm_perf_latency_json(wm_json *j, const double *samples, size_t n, const double *warm, size_t n_warm,
                          int64_t effective_batch) {
    wm_lat_stats ls;
    wm_lat_stats_compute(samples, n, NULL, &ls);
    double wsum = 0;
    for (size_t i = 0; i < n_warm; i++) wsum += warm[i];
    wm_json_obj(j, "latency_ms");
    wm_json_num(j, "mean", ls.mean);
    wm_json_num(j, "min", ls.min);
    wm_json_num(j, "max", ls.max);
    wm_json_num(j, "p50", ls.p50);
    wm_json_num(j, "p90", ls.p90);
    wm_json_num(j, "p95", ls.p95);
    wm_json_num(j, "p99", ls.p99);
    wm_json_num(j, "std", ls.std);
    wm_json_num(j, "warmup_mean", n_warm ? wsum / (double)n_warm : 0.0);
    wm_json_obj_end(j);
    wm_json_obj(j, "throughput");
    int ok = n && ls.mean > 0;
    wm_json_num(j, "samples_per_sec", ok ? (double)effective_batch * 1e3 / ls.mean : 0.0);
    wm_json_num(j, "batches_per_sec", ok ? 1e3 / ls.mean : 0.0);
    wm_json_obj_end(j);
    wm_json_arr(j, "raw_samples_ms");
    for (size_t i = 0; i < n; i++) wm_json_num(j, NULL, samples[i]);
    wm_json_arr_end(j);
}

void wm_perf_memory_json(wm_json *j, uint64_t rss0, uint64_t rss_load, uint64_t rss_inf, uint64_t peak) {
    uint64_t top = rss0 > rss_load ? rss0 : rss_load;
    if (rss_inf > top) top = rss_inf;
    wm_json_obj(j, "memory");
    wm_json_num(j, "rss_baseline_mb", mib(rss0));
    wm_json_num(j, "rss_after_compile_mb", mib(rss_load));
    wm_json_num(j, "rss_after_inference_mb", mib(rss_inf));
    wm_json_num(j, "rss_checkpoint_peak_mb", mib(top));
    wm_json_num(j, "rss_model_load_delta_mb", mib(rss_load) - mib(rss0));
    wm_json_num(j, "rss_inference_delta_mb", mib(rss_inf) - mib(rss_load));
    wm_json_num(j, "rss_total_delta_mb", mib(rss_inf) - mib(rss0));
    static const char *const kind[] = {"local", "shared"};
    static const char *const point[] = {"baseline", "after_compile", "after_inference", "checkpoint_peak",
                                        "model_load_delta", "inference_delta", "total_delta"};
    char key[64];
    for (int k = 0; k < 2; k++) /* no device memory: the CPU engine holds none */
        for (int p = 0; p < 7; p++) {
            snprintf(key, sizeof key, "vram_%s_%s_mb", kind[k], point[p]);
            wm_json_num(j, key, 0.0);
        }
    wm_json_num(j, "peak_rss_mb", mib(peak));
    wm_json_obj_end(j);
}

static double sum(const double *v, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += v[i];
    return s;
}

/* x / (ms / 1000), NaN when ms is not positive */
static double per_sec(double x, double ms) { return ms > 0 ? x * 1e3 / ms : NAN; }

void wm_perf_request_derive(const wm_perf_request *r, wm_perf_derived *d) {
    double dec = sum(r->decode_ms, r->n_decode);
    d->model_ttft_ms = r->prefill_ms + r->first_token_ms;
    d->request_ttft_ms = r->template_ms + r->tokenization_ms + r->generator_create_ms + d->model_ttft_ms;
    d->response_eval_ms = r->first_token_ms + dec;
    d->model_compute_ms = r->prefill_ms + d->response_eval_ms;
    d->request_ms = r->template_ms + r->tokenization_ms + r->generator_create_ms + d->model_compute_ms +
                    r->sequence_fetch_ms + r->detokenization_ms;
    d->prefill_tps = per_sec((double)r->prompt_tokens, r->prefill_ms);
    d->decode_tps = r->n_decode ? per_sec((double)r->n_decode, dec) : NAN;
    d->response_eval_tps = per_sec((double)r->generated_tokens, d->response_eval_ms);
    d->tpot_ms = r->n_decode ? dec / (double)r->n_decode : NAN;
}

/* The aggregate's figures, in the reference's order, read from a derived request. */
enum { F_REQ, F_COMPUTE, F_MTTFT, F_RTTFT, F_PREFILL, F_REVAL, F_TPOT, F_PTPS, F_DTPS, F_RTPS, F_COUNT };
static const char *const fig_name[F_COUNT] = {
    "request_duration_ms", "model_compute_duration_ms", "model_ttft_duration_ms", "request_ttft_duration_ms",
    "prefill_duration_ms", "response_eval_duration_ms", "steady_state_tpot_ms", "prefill_tokens_per_second",
    "steady_state_decode_tokens_per_second", "response_eval_tokens_per_second"};

static double fig(const wm_perf_request *r, const wm_perf_derived *d, int f) {
    switch (f) {
    case F_REQ: return d->request_ms;
    case F_COMPUTE: return d->model_compute_ms;
    case F_MTTFT: return d->model_ttft_ms;
    case F_RTTFT: return d->request_ttft_ms;
    case F_PREFILL: return r->prefill_ms;
    case F_REVAL: return d->response_eval_ms;
    case F_TPOT: return d->tpot_ms;
    case F_PTPS: return d->prefill_tps;
    case F_DTPS: return d->decode_tps;
    default: return d->response_eval_tps;
    }
}

static void request_json(wm_json *j, const wm_perf_request *r, size_t index) {
    wm_perf_derived d;
    wm_perf_request_derive(r, &d);
    wm_json_obj(j, NULL);
    wm_json_str(j, "kind", r->warmup ? "warmup" : "timed");
    wm_json_uint(j, "index", index);
    wm_json_uint(j, "prompt_tokens", r->prompt_tokens);
    wm_json_uint(j, "generated_tokens", r->generated_tokens);
    wm_json_num(j, "template_duration_ms", r->template_ms);
    wm_json_num(j, "tokenization_duration_ms", r->tokenization_ms);
    wm_json_num(j, "generator_create_duration_ms", r->generator_create_ms);
    wm_json_num(j, "prefill_duration_ms", r->prefill_ms);
    wm_json_num(j, "first_token_duration_ms", r->first_token_ms);
    wm_json_num(j, "sequence_fetch_duration_ms", r->sequence_fetch_ms);
    wm_json_num(j, "detokenization_duration_ms", r->detokenization_ms);
    wm_json_arr(j, "decode_token_durations_ms");
    for (size_t i = 0; i < r->n_decode; i++) wm_json_num(j, NULL, r->decode_ms[i]);
    wm_json_arr_end(j);
    wm_json_num(j, "model_ttft_duration_ms", d.model_ttft_ms);
    wm_json_num(j, "request_ttft_duration_ms", d.request_ttft_ms);
    wm_json_num(j, "response_eval_duration_ms", d.response_eval_ms);
    wm_json_num(j, "model_compute_duration_ms", d.model_compute_ms);
    wm_json_num(j, "request_duration_ms", d.request_ms);
    wm_json_num(j, "prefill_tokens_per_second", d.prefill_tps);
    wm_json_num(j, "steady_state_decode_tokens_per_second", d.decode_tps);
    wm_json_num(j, "response_eval_tokens_per_second", d.response_eval_tps);
    wm_json_num(j, "steady_state_tpot_ms", d.tpot_ms);
    wm_json_obj_end(j);
}

void wm_perf_genai_json(wm_json *j, double load_ms, const wm_perf_request *reqs, size_t n) {
    wm_json_obj(j, "load");
    wm_json_num(j, "session_load_duration_ms", load_ms);
    wm_json_num(j, "ep_registration_duration_ms", 0.0);
    wm_json_num(j, "bundle_prepare_duration_ms", 0.0);
    wm_json_num(j, "native_load_duration_ms", load_ms);
    wm_json_num(j, "config_create_duration_ms", 0.0);
    wm_json_num(j, "model_create_duration_ms", load_ms);
    wm_json_num(j, "tokenizer_create_duration_ms", 0.0);
    wm_json_null(j, "weight_upload_duration_ms");
    wm_json_num(j, "weight_upload_estimate_duration_ms", load_ms);
    wm_json_str(j, "weight_upload_estimate_source", "model_create_duration_ms");
    wm_json_obj_end(j);
    wm_json_arr(j, "requests");
    for (size_t i = 0; i < n; i++) request_json(j, &reqs[i], i);
    wm_json_arr_end(j);

    size_t n_warm = 0, n_timed = 0;
    for (size_t i = 0; i < n; i++) n_warm += reqs[i].warmup != 0;
    int all = n_warm == n; /* no timed request: the aggregate is over all of them, as the reference */
    double *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) {
        j->oom = 1;
        return;
    }
    wm_json_obj(j, "aggregate");
    wm_json_bool(j, "warmup_excluded", 1);
    wm_json_uint(j, "warmup_request_count", n_warm);
    for (size_t i = 0; i < n; i++) n_timed += all || !reqs[i].warmup;
    wm_json_uint(j, "timed_request_count", n_timed);
    wm_perf_derived d0 = {0};
    if (n) wm_perf_request_derive(&reqs[0], &d0);
    wm_json_num(j, "cold_start_ttft_duration_ms", n ? load_ms + d0.request_ttft_ms : 0.0);
    wm_json_num(j, "cold_start_total_duration_ms", n ? load_ms + d0.request_ms : 0.0);
    for (int f = 0; f < F_COUNT; f++) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (!all && reqs[i].warmup) continue;
            wm_perf_derived d;
            wm_perf_request_derive(&reqs[i], &d);
            double x = fig(&reqs[i], &d, f);
            if (!isnan(x)) v[k++] = x; /* an undefined figure (no decode step) is left out */
        }
        wm_lat_stats s;
        wm_lat_stats_compute(v, k, NULL, &s);
        wm_json_obj(j, fig_name[f]);
        wm_json_num(j, "mean", s.mean);
        wm_json_num(j, "std", s.std);
        wm_json_num(j, "min", s.min);
        wm_json_num(j, "max", s.max);
        wm_json_num(j, "p50", s.p50);
        wm_json_num(j, "p90", s.p90);
        wm_json_num(j, "p95", s.p95);
        wm_json_num(j, "p99", s.p99);
        wm_json_obj_end(j);
    }
    wm_json_obj_end(j);
    free(v);
}
