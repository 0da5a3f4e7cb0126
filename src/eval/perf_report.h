/*
 * perf_report.h - the sections of `winml perf -f json` that are computed from
 * measurements (documented in docs/json/perf.md): the reference's classic
 * latency/throughput/memory sections, and its GenAI layout of an LLM run
 * (load, requests[], aggregate). The CLI measures; this module derives and
 * writes, so that every figure has one definition.
 */
#ifndef WM_EVAL_PERF_REPORT_H
#define WM_EVAL_PERF_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "core/json.h"

/*
 * Writes "latency_ms" (mean, min, max, p50, p90, p95, p99 as the reference (wm_percentile), population std, warmup_mean),
 * "throughput" (samples_per_sec = effective_batch * 1000 / mean ms, batches_per_sec = 1000 / mean ms, as the
 * reference) and "raw_samples_ms" (timed samples in run order) into the open object j.
 */
void wm_perf_latency_json(wm_json *j, const double *samples, size_t n, const double *warm, size_t n_warm,
                          int64_t effective_batch);

/*
 * Writes "memory": the reference's 21 keys (rss_* in MiB: baseline before the model is loaded, after load
 * ("compile"), after inference, checkpoint peak = the largest of the three, and the load/inference/total deltas;
 * vram_* 0.0: this engine holds no device memory) and ours: peak_rss_mb (the process's high-water mark).
 */
void wm_perf_memory_json(wm_json *j, uint64_t rss_baseline, uint64_t rss_after_load, uint64_t rss_after_inference,
                         uint64_t peak_rss);

/* One generation request of an LLM run, as the reference's GenAI layout counts it. All durations in ms. */
typedef struct wm_perf_request {
    int warmup;                 /* 1: a warmup request (excluded from the aggregate) */
    size_t prompt_tokens, generated_tokens;
    double template_ms, tokenization_ms, generator_create_ms; /* 0 where the run has no such step */
    double prefill_ms;          /* the prompt's forward pass */
    double first_token_ms;      /* sampling the first token after prefill */
    double sequence_fetch_ms, detokenization_ms;
    const double *decode_ms;    /* each decode step after the first token (borrowed) */
    size_t n_decode;
} wm_perf_request;

/* The derived figures of a request (see docs/json/perf.md, "requests[]"). */
typedef struct wm_perf_derived {
    double model_ttft_ms, request_ttft_ms, response_eval_ms, model_compute_ms, request_ms;
    double prefill_tps, decode_tps, response_eval_tps, tpot_ms; /* NaN (written null) when undefined */
} wm_perf_derived;

void wm_perf_request_derive(const wm_perf_request *r, wm_perf_derived *d);

/*
 * The GenAI layout: writes "load" (load_ms is the model's whole load: session, config and weights in one step
 * here; the reference's other load steps are 0), "requests" (every request, warmup first, with its derived
 * figures) and "aggregate" (over the timed requests: mean, std, min, max, p50, p90, p95, p99 of each figure;
 * cold start = load + the first request's TTFT / duration) into the open object j.
 */
void wm_perf_genai_json(wm_json *j, double load_ms, const wm_perf_request *reqs, size_t n);

#endif
