#!/usr/bin/env python3
"""Decoder precision bench: a Qwen2.5-0.5B-config model (24 layers, hidden 896, 4864 intermediate, 14 heads,
2 KV heads, vocab 151936, tied embeddings) with random weights, exported with torch.onnx (TorchScript exporter,
KV cache in and out), optimized by `winml optimize`, then quantized by `winml quantize` to int4 (RTN blocks)
and int8 (dynamic); each compared with the float32 export in onnxruntime: SQNR of the logits and top-1
agreement over a prompt and decode steps. --small uses a 4-layer, 256-wide variant for a quick run.

usage: bench/bench_opt_decoder.py [--build build] [--small] [--out DIR] [--json F]
"""
import argparse
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


def build_model(small):
    import torch
    import transformers as tf
    if small:
        cfg = tf.Qwen2Config(vocab_size=151936, hidden_size=256, intermediate_size=1024, num_hidden_layers=4,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                             rope_theta=1e6, rms_norm_eps=1e-6, tie_word_embeddings=True)
    else:
        cfg = tf.Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                             num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
                             rope_theta=1e6, rms_norm_eps=1e-6, tie_word_embeddings=True)
    torch.manual_seed(0)
    m = tf.Qwen2ForCausalLM(cfg).eval()
    m.config._attn_implementation = "eager"
    return m


def run(cmd):
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{cmd}: {r.stderr}")
    return r.stdout, time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    import onnxruntime as ort
    import torch
    winml = os.path.join(a.build, "winml")
    d = a.out or tempfile.mkdtemp(prefix="wm_bench_dec_")
    tag = "small" if a.small else "0.5b"
    src = os.path.join(d, f"qwen2_{tag}.onnx")
    if not os.path.exists(src):
        model = build_model(a.small)
        warnings.filterwarnings("ignore")
        t0 = time.time()
        with torch.no_grad():
            M._export_decoder(model, src, False, 17, False)
        print(f"exported in {time.time() - t0:.0f}s", file=sys.stderr)
    opt = os.path.join(d, f"qwen2_{tag}_opt.onnx")
    out, t = run([winml, "optimize", "-m", src, "-o", opt, "-f", "json"])
    rep = json.loads(out)["report"]
    res = {"model": f"Qwen2 ({tag} config), random weights", "optimize": {
        "nodes": [rep["nodes_before"], rep["nodes_after"]], "seconds": round(t, 1),
        "fused": {k: v for k, v in rep["ops_after"].items() if k in ("GroupQueryAttention", "RotaryEmbedding",
                                                                      "SkipSimplifiedLayerNormalization", "QuickGelu")}}}

    def sess(p):
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.intra_op_num_threads = 2
        so.log_severity_level = 3
        return ort.InferenceSession(p, so, providers=["CPUExecutionProvider"])

    # prompt (batch 1, 32 tokens, no past) then 8 one-token decode steps fed with the float32 model's cache
    rng = np.random.default_rng(0)
    s_ref = sess(src)
    names = [i.name for i in s_ref.get_inputs()]
    kv = [i for i in s_ref.get_inputs() if i.name.startswith("past_key_values.")]
    steps = []
    feeds = {"input_ids": rng.integers(0, 150000, (1, 32)).astype(np.int64), "attention_mask": np.ones((1, 32), np.int64)}
    for i in kv:
        feeds[i.name] = np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32)
    for step in range(9):
        steps.append({k: v for k, v in feeds.items() if k in names})
        outs = s_ref.run(None, steps[-1])
        nxt = rng.integers(0, 150000, (1, 1)).astype(np.int64)
        past = {i.name: o for i, o in zip(kv, outs[1:])}
        feeds = {"input_ids": nxt, "attention_mask": np.ones((1, feeds["attention_mask"].shape[1] + 1), np.int64),
                 **past}
    ref = [s_ref.run(None, f)[0] for f in steps]
    del s_ref
    for prec, args in (("fp16", ["--keep-io-types"]), ("int8-dynamic", []), ("int4", ["--block-size", "32"]),
                       ("int4", ["--block-size", "128"]), ("int4", ["--block-size", "32", "--symmetric"])):
        q = os.path.join(d, f"qwen2_{tag}_{prec}_{'_'.join(args).replace('-', '')}.onnx")
        out, t = run([winml, "quantize", "-m", opt, "-o", q, "-p", prec, "-f", "json", *args])
        qr = json.loads(out)["report"]
        s = sess(q)
        got = [s.run(None, f)[0] for f in steps]
        del s
        sq = M.sqnr_db(np.concatenate([r.ravel() for r in ref]), np.concatenate([g.ravel() for g in got]))
        top1 = float(np.mean(np.concatenate([(r.argmax(-1) == g.argmax(-1)).ravel() for r, g in zip(ref, got)])))
        size = os.path.getsize(q) + (os.path.getsize(q + ".data") if os.path.exists(q + ".data") else 0)
        key = prec + ("" if not args else " " + " ".join(args))
        res[key] = {"logits_sqnr_db": round(sq, 2), "top1_agreement": round(top1, 4), "quantized_nodes": qr["quantized"],
                    "skipped": qr["skipped"], "file_mb": round(size / 2 ** 20, 1), "seconds": round(t, 1),
                    "peak_rss_mb": round(qr["peak_rss_bytes"] / 2 ** 20, 1)}
        print(json.dumps({key: res[key]}), file=sys.stderr)
    text = json.dumps(res, indent=1)
    print(text)
    if a.json:
        open(a.json, "w").write(text)


if __name__ == "__main__":
    main()
