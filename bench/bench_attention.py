#!/usr/bin/env python3
"""Speed of the engine's attention core vs onnxruntime on the same single-node graphs (not in CI).

Cases (float32):
  bert-128 / bert-512  com.microsoft MultiHeadAttention, batch 1, 12 heads, head 64, q/k/v (1, S, 768)
  gqa-decode-64/1024   com.microsoft GroupQueryAttention, 14 query heads, 2 kv heads, head 64,
                       one new token after a past of 64 / 1024 tokens
  enc-H-S              (--encoder) MultiHeadAttention, batch 1, H heads of 64, S = 197, 257, 577, 1500 tokens
                       (ViT's, CLIP's, DINOv2's, Whisper's whole-sequence attention), H = 6 / 8
Both run with the same number of threads (--threads, default 2). The engine is timed with
wm_run: the time of --repeat N+K runs minus --repeat K runs, divided by N (session creation
and file I/O cancel out); onnxruntime with InferenceSession.run in a loop after warm-up.
Outputs are checked to agree (max abs diff) before timing. Prints one line per case and the
ratio engine / onnxruntime (lower is better). WM_BUILD may name several builds, comma-separated (old and new
side by side: one line per build and case, the engines taking turns within the case).

  WM_BUILD=build .venv/bin/python bench/bench_attention.py [--threads 2] [--runs 50] [--encoder]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP
from onnx import helper
from safetensors.numpy import load_file, save_file

F = TP.FLOAT


def model(nodes, inputs, outputs, path):
    vi = lambda n, s: helper.make_tensor_value_info(n, F if n not in ("seqlens_k", "total") else TP.INT32, s)  # noqa
    g = helper.make_graph(nodes, "g", [vi(n, s) for n, s in inputs], [vi(n, None) for n in outputs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)],
                          ir_version=10)
    onnx.save(m, path)


def bert_case(tmp, S, heads=12):
    rng = np.random.default_rng(0)
    D = 64 * heads
    feeds = {n: rng.standard_normal((1, S, D)).astype(np.float32) for n in ("q", "k", "v")}
    path = os.path.join(tmp, f"mha{heads}_{S}.onnx")
    node = helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["y"], domain="com.microsoft", num_heads=heads)
    model([node], [(n, [1, S, D]) for n in ("q", "k", "v")], ["y"], path)
    return path, feeds


def gqa_case(tmp, P):
    rng = np.random.default_rng(1)
    Nq, Nkv, H = 14, 2, 64
    feeds = {"q": rng.standard_normal((1, 1, Nq * H)).astype(np.float32),
             "k": rng.standard_normal((1, 1, Nkv * H)).astype(np.float32),
             "v": rng.standard_normal((1, 1, Nkv * H)).astype(np.float32),
             "pk": rng.standard_normal((1, Nkv, P, H)).astype(np.float32),
             "pv": rng.standard_normal((1, Nkv, P, H)).astype(np.float32),
             "seqlens_k": np.array([P], np.int32), "total": np.array(P + 1, np.int32)}
    path = os.path.join(tmp, f"gqa{P}.onnx")
    node = helper.make_node("GroupQueryAttention", ["q", "k", "v", "pk", "pv", "seqlens_k", "total"],
                            ["y", "present_k", "present_v"], domain="com.microsoft", num_heads=Nq, kv_num_heads=Nkv)
    shapes = {"q": [1, 1, Nq * H], "k": [1, 1, Nkv * H], "v": [1, 1, Nkv * H], "pk": [1, Nkv, P, H],
              "pv": [1, Nkv, P, H], "seqlens_k": [1], "total": []}
    model([node], list(shapes.items()), ["y", "present_k", "present_v"], path)
    return path, feeds


def time_ort(path, feeds, threads, runs):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    for _ in range(5):
        out = s.run(None, feeds)
    best = float("inf")
    for _ in range(3):  # best of 3 batches of `runs`
        t = time.perf_counter()
        for _ in range(runs):
            s.run(None, feeds)
        best = min(best, (time.perf_counter() - t) / runs)
    return best, out[0]


def time_engine(wm_run, path, feeds, tmp, threads, runs):
    inp, out = os.path.join(tmp, "in.safetensors"), os.path.join(tmp, "out.safetensors")
    save_file({k: np.array(v, order="C", copy=True) for k, v in feeds.items()}, inp)

    def wall(repeat):
        t = time.perf_counter()
        subprocess.run([wm_run, path, inp, out, "--threads", str(threads), "--repeat", str(repeat)], check=True)
        return time.perf_counter() - t

    base = runs // 5 + 1
    best = float("inf")
    for _ in range(3):
        best = min(best, (wall(base + runs) - wall(base)) / runs)
    return best, load_file(out)["y"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--encoder", action="store_true", help="the encoder cases (enc-H-S) instead of the default ones")
    a = ap.parse_args()
    builds = os.environ.get("WM_BUILD", "build").split(",")
    for b in builds:
        if not os.access(os.path.join(b, "wm_run"), os.X_OK):
            sys.exit(f"bench_attention: {b}/wm_run not found (set WM_BUILD)")
    print(f"threads={a.threads} runs={a.runs} onnxruntime {ort.__version__}")
    print(f"{'case':<16} {'build':<12} {'engine ms':>10} {'ort ms':>10} {'ratio':>7} {'max diff':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        if a.encoder:
            cases = [(f"enc-{h}-{S}", *bert_case(tmp, S, h)) for h in (6, 8) for S in (197, 257, 577, 1500)]
        else:
            cases = [("bert-128", *bert_case(tmp, 128)), ("bert-512", *bert_case(tmp, 512)),
                     ("gqa-decode-64", *gqa_case(tmp, 64)), ("gqa-decode-1024", *gqa_case(tmp, 1024))]
        for name, path, feeds in cases:
            long = "512" in name or (a.encoder and int(name.rsplit("-", 1)[1]) >= 512)
            runs = max(3, a.runs // 10) if long else a.runs
            to, yo = time_ort(path, feeds, a.threads, runs)
            for b in builds:
                te, ye = time_engine(os.path.join(b, "wm_run"), path, feeds, tmp, a.threads, runs)
                d = float(np.max(np.abs(yo - ye)))
                print(f"{name:<16} {b:<12} {te * 1e3:>10.3f} {to * 1e3:>10.3f} {te / to:>7.2f} {d:>9.2g}", flush=True)


if __name__ == "__main__":
    main()
