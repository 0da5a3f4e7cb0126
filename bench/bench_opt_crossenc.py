#!/usr/bin/env python3
"""Cross-encoder (mMiniLMv2 architecture: XLMRobertaForSequenceClassification, 12 layers, hidden 384, 1536
intermediate, 12 heads, vocab 250002, 514 positions, type_vocab 1, num_labels 1) with random weights from the
config, exported by torch.onnx: node counts before -> after `winml optimize` (and onnxruntime's transformers
optimizer for comparison), the optimized graph's agreement with the export, fp16 SQNR over 20 samples, and
onnxruntime latency of our fused graph vs onnxruntime's own optimizer output (both executed by onnxruntime),
and our engine's latency on the export vs our optimized graphs (fused vs unfused).

usage: bench/bench_opt_crossenc.py [--build build] [--seq 512] [--samples 20] [--iters 30] [--out DIR] [--json F]
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))
import opt_models as M  # noqa: E402


def hist(path):
    import onnx
    m = onnx.load(path, load_external_data=False)
    return len(m.graph.node), collections.Counter(n.op_type for n in m.graph.node)


def export(path, exporter):
    import torch
    import transformers as tf
    cfg = tf.XLMRobertaConfig(vocab_size=250002, hidden_size=384, num_hidden_layers=12, num_attention_heads=12,
                              intermediate_size=1536, max_position_embeddings=514, type_vocab_size=1, num_labels=1,
                              pad_token_id=1, layer_norm_eps=1e-5, hidden_act="gelu")
    torch.manual_seed(0)
    model = tf.XLMRobertaForSequenceClassification(cfg).eval()
    model.config._attn_implementation = "eager" if exporter == "ts" else "sdpa"
    warnings.filterwarnings("ignore")
    M._export_encoder(model, path, exporter == "dyn", 17 if exporter == "ts" else 18)


def session(path, level):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    so.intra_op_num_threads = 2
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def latencies(sessions, feeds, iters):
    """Median ms per run of each session, measured round-robin (one run of each per round) so that a
    machine shared with other jobs slows all of them alike and the ratios stay meaningful."""
    for s in sessions.values():
        for _ in range(2):
            s.run(None, feeds)
    t = {k: [] for k in sessions}
    for _ in range(iters):
        for k, s in sessions.items():
            t0 = time.perf_counter()
            s.run(None, feeds)
            t[k].append(time.perf_counter() - t0)
    return {k: float(np.median(v) * 1e3) for k, v in t.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--lat-seq", type=int, default=128, help="sequence length of the latency runs")
    ap.add_argument("--out", default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    import onnxruntime as ort
    winml = os.path.join(a.build, "winml")
    d = a.out or tempfile.mkdtemp(prefix="wm_bench_crossenc_")
    res = {"model": "XLMRobertaForSequenceClassification(12 x 384, vocab 250002), random weights"}
    rng = np.random.default_rng(0)
    samples = []
    for i in range(a.samples):
        n = a.seq
        ids = rng.integers(5, 250000, (1, n)).astype(np.int64)
        ids[0, 0], ids[0, -1] = 0, 2
        samples.append({"input_ids": ids, "attention_mask": np.ones((1, n), np.int64)})
    for exporter in ("ts", "dyn"):
        src = os.path.join(d, f"crossenc_{exporter}.onnx")
        if not os.path.exists(src):
            t0 = time.time()
            export(src, exporter)
            print(f"exported {exporter} in {time.time() - t0:.0f}s", file=sys.stderr)
        opt = os.path.join(d, f"crossenc_{exporter}_opt.onnx")
        r = subprocess.run([winml, "optimize", "-m", src, "-o", opt, "-f", "json"], capture_output=True, text=True)
        if r.returncode:
            sys.exit(r.stderr)
        rep = json.loads(r.stdout)["report"]
        n0, _ = hist(src)
        n1, h1 = hist(opt)
        e = {"nodes_export": n0, "nodes_winml": n1, "ops_winml": dict(h1.most_common()),
             "fired": {p["name"]: p["fired"] for p in rep["passes"] if p["fired"]}}
        # agreement with the export (fp32)
        s0, s1 = session(src, ort.GraphOptimizationLevel.ORT_DISABLE_ALL), session(opt, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
        diffs = [M.compare(s0.run(None, f), s1.run(None, f)) for f in samples[:5]]
        e["fp32_max_abs_diff"] = max(x[0] for x in diffs)
        e["fp32_min_cosine"] = min(x[1] for x in diffs)
        # onnxruntime's transformers optimizer on the same export
        from onnxruntime.transformers.optimizer import optimize_model
        ortopt = os.path.join(d, f"crossenc_{exporter}_ortopt.onnx")
        om = optimize_model(src, model_type="bert", num_heads=12, hidden_size=384, opt_level=0)
        om.save_model_to_file(ortopt, use_external_data_format=False)
        e["nodes_ort_transformers_optimizer"], h2 = hist(ortopt)
        e["ops_ort_transformers_optimizer"] = dict(h2.most_common(8))
        # onnxruntime's own session optimizer (ORT_ENABLE_ALL) output
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        so.optimized_model_filepath = os.path.join(d, f"crossenc_{exporter}_ortsession.onnx")
        so.log_severity_level = 3
        ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
        e["nodes_ort_session_extended"], _ = hist(so.optimized_model_filepath)
        res[exporter] = e
        print(json.dumps({exporter: {k: v for k, v in e.items() if not k.startswith("ops")}}), file=sys.stderr)
    # fp16 of our optimized graph vs the fp32 export, 20 samples
    src, opt = os.path.join(d, "crossenc_ts.onnx"), os.path.join(d, "crossenc_ts_opt.onnx")
    h16 = os.path.join(d, "crossenc_ts_fp16.onnx")
    r = subprocess.run([winml, "quantize", "-m", opt, "-o", h16, "-p", "fp16", "--keep-io-types", "-f", "json"],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(r.stderr)
    s0 = session(src, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    s16 = session(h16, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    ref = np.concatenate([s0.run(None, f)[0].ravel() for f in samples])
    got = np.concatenate([s16.run(None, f)[0].ravel() for f in samples])
    res["fp16"] = {"samples": len(samples), "sqnr_db": M.sqnr_db(ref, got), "max_abs_diff": float(np.abs(ref - got).max()),
                   "cosine": M.compare([ref], [got])[1],
                   "bytes": os.path.getsize(h16) + (os.path.getsize(h16 + ".data") if os.path.exists(h16 + ".data") else 0)}
    # latency, all executed by onnxruntime (2 threads), side by side on the same inputs
    f = {k: v[:, :a.lat_seq] for k, v in samples[0].items()}
    lat = latencies({
        "export_ort_enable_all": session(src, ort.GraphOptimizationLevel.ORT_ENABLE_ALL),
        "ort_transformers_optimizer_enable_all": session(os.path.join(d, "crossenc_ts_ortopt.onnx"),
                                                         ort.GraphOptimizationLevel.ORT_ENABLE_ALL),
        "winml_optimized_ort_disable_all": session(opt, ort.GraphOptimizationLevel.ORT_DISABLE_ALL),
        "winml_optimized_ort_enable_all": session(opt, ort.GraphOptimizationLevel.ORT_ENABLE_ALL),
    }, f, a.iters)
    lat["ratio_winml_vs_ort_optimizer"] = lat["winml_optimized_ort_enable_all"] / lat["ort_transformers_optimizer_enable_all"]
    lat["ratio_winml_vs_export_enable_all"] = lat["winml_optimized_ort_enable_all"] / lat["export_ort_enable_all"]
    lat["note"] = ("median ms per run of one [1, %d] sample, round-robin over the four sessions, 2 threads, all "
                   "executed by onnxruntime" % a.lat_seq)
    res["latency_ms"] = lat
    # winml's engine: the export vs our fully optimized graph (Attention, SkipLayerNorm, BiasGelu), and vs the
    # graph optimized without the attention fusion, round-robin so a shared machine slows all alike
    noattn = os.path.join(d, "crossenc_ts_noattn.onnx")
    r = subprocess.run([winml, "optimize", "-m", src, "-o", noattn, "--disable-attention", "--disable-gqa", "-q"],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(r.stderr)
    runs = (("export", src), ("winml_optimized", opt), ("winml_optimized_no_attention", noattn))
    eng = {k: [] for k, _ in runs}
    for _ in range(5):
        for key, path in runs:
            r = subprocess.run([winml, "perf", "-m", path, "--seq-len", str(a.lat_seq), "--threads", "2", "--warmup",
                                "3", "--iterations", str(max(5, a.iters // 3)), "-f", "json"], capture_output=True,
                               text=True)
            if r.returncode:
                sys.exit(f"engine perf failed on {path}: {r.stderr.strip()}")
            eng[key].append(json.loads(r.stdout)["latency_ms"]["p50"])
    e = {k: float(np.median(v)) for k, v in eng.items()}
    e["ratio_optimized_vs_export"] = e["winml_optimized"] / e["export"]
    e["ratio_no_attention_vs_export"] = e["winml_optimized_no_attention"] / e["export"]
    e["note"] = "median over 5 rounds of winml perf p50 ms, [1, %d], 2 threads, all executed by winml's engine" % a.lat_seq
    res["engine_latency_ms"] = e
    text = json.dumps(res, indent=1)
    print(text)
    if a.json:
        open(a.json, "w").write(text)


if __name__ == "__main__":
    main()
