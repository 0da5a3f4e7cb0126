#!/usr/bin/env python3
"""Vision benchmark: our CPU engine vs onnxruntime, same ONNX files, same thread count, same run.

Model rows (real architectures with random weights from transformers configs, exported once with
torch.onnx into --work): resnet-50 and vit-b16 at 224x224, batch 1 (and --batch).
Op rows (single-node ONNX models, written with the onnx helper into --work): the Conv shapes that
dominate ResNet-50 and ViT-B/16 (stem 7x7/2, 3x3, 1x1, strided 3x3, patch 16x16/16), depthwise
3x3 and 7x7 (MobileNet / ConvNeXt style), MaxPool 3x3/2 and GlobalAveragePool, BatchNormalization,
Resize linear x2.
For each: median and minimum latency of `winml perf` (our engine) and of onnxruntime
(ORT_ENABLE_ALL, intra-op threads = --threads), and the ratios ours / onnxruntime (< 1.0: we are
faster; the ratio of minima is the steadier one on a shared machine); op rows also give our GFLOP/s
(from the minimum) for convolutions. Not a test: timings are noisy; the ratio measured side by
side is the figure.

--cpu-time: single-threaded process CPU time per run instead (tests/tools/wm_cputime for ours,
time.process_time around onnxruntime with one intra-op thread): the steady figure on a machine shared
with other jobs, where wall time mostly measures the neighbours.

usage: bench/bench_vision.py [--threads N] [--iterations N] [--rows models,ops] [--batch N] [--cpu-time]
                             [--work DIR] [--winml PATH]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def export_models(work, batch):
    import torch
    import transformers as T
    torch.manual_seed(0)
    out = {}

    def exp(name, model, hw):
        path = os.path.join(work, name + ".onnx")
        if not os.path.exists(path):
            print(f"exporting {name} ...", file=sys.stderr)
            torch.onnx.export(model.eval(), (torch.rand(1, 3, *hw),), path, input_names=["pixel_values"],
                              output_names=["logits"], opset_version=17, dynamo=False,
                              dynamic_axes={"pixel_values": {0: "batch"}, "logits": {0: "batch"}})
        return path

    rn = exp("resnet50", T.ResNetForImageClassification(T.ResNetConfig()), (224, 224))
    vit = exp("vit_b16", T.ViTForImageClassification(T.ViTConfig()), (224, 224))
    for b in sorted({1, batch}):
        out[f"resnet-50 224 b{b}"] = (rn, b, None)
        out[f"vit-b16 224 b{b}"] = (vit, b, None)
    return out


def op_model(path, op, x_shape, attrs, weights=(), extra_inputs=()):
    """One-node model: input X (dynamic batch), constant weights as initializers."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    if os.path.exists(path):
        return
    rng = np.random.default_rng(0)
    inits, names = [], ["X"]
    for i, shp in enumerate(weights):
        nm = f"W{i}"
        arr = (rng.standard_normal(shp) * 0.1).astype(np.float32)
        if op == "BatchNormalization" and i == 3:
            arr = np.abs(arr) + 0.5
        inits.append(numpy_helper.from_array(arr, nm))
        names.append(nm)
    for nm, arr in extra_inputs:
        inits.append(numpy_helper.from_array(arr, nm))
        names.append(nm)
    node = helper.make_node(op, names, ["Y"], **attrs)
    xin = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch"] + list(x_shape[1:]))
    g = helper.make_graph([node], op, [xin], [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    onnx.save(m, path)


def export_ops(work):
    """name -> (path, batch, GFLOP per run or None)."""
    rows = {}

    def conv(name, c, h, w, m, k, s, p, g=1):
        path = os.path.join(work, "op_conv_" + "".join(ch if ch.isalnum() else "_" for ch in name) + ".onnx")
        op_model(path, "Conv", (1, c, h, w), dict(kernel_shape=[k, k], strides=[s, s], pads=[p] * 4, group=g),
                 weights=[(m, c // g, k, k), (m,)])
        oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        rows[f"conv {name}"] = (path, 1, 2.0 * m * oh * ow * (c // g) * k * k / 1e9)

    conv("7x7/2 3-64 @224", 3, 224, 224, 64, 7, 2, 3)
    conv("3x3 64-64 @56", 64, 56, 56, 64, 3, 1, 1)
    conv("1x1 256-64 @56", 256, 56, 56, 64, 1, 1, 0)
    conv("1x1 64-256 @56", 64, 56, 56, 256, 1, 1, 0)
    conv("3x3/2 128 @56", 128, 56, 56, 128, 3, 2, 1)
    conv("3x3 256-256 @14", 256, 14, 14, 256, 3, 1, 1)
    conv("1x1 2048-512 @7", 2048, 7, 7, 512, 1, 1, 0)
    conv("16x16/16 3-768 @224", 3, 224, 224, 768, 16, 16, 0)
    conv("dw3x3 32 @112", 32, 112, 112, 32, 3, 1, 1, g=32)
    conv("dw7x7 96 @56", 96, 56, 56, 96, 7, 1, 3, g=96)
    p = os.path.join(work, "op_maxpool.onnx")
    op_model(p, "MaxPool", (1, 64, 112, 112), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    rows["maxpool 3x3/2 64 @112"] = (p, 1, None)
    p = os.path.join(work, "op_gap.onnx")
    op_model(p, "GlobalAveragePool", (1, 2048, 7, 7), {})
    rows["globalavgpool 2048 @7"] = (p, 1, None)
    p = os.path.join(work, "op_bn.onnx")
    op_model(p, "BatchNormalization", (1, 256, 56, 56), dict(epsilon=1e-5), weights=[(256,)] * 4)
    rows["batchnorm 256 @56"] = (p, 1, None)
    p = os.path.join(work, "op_resize.onnx")
    op_model(p, "Resize", (1, 64, 56, 56), dict(mode="linear"),
             extra_inputs=[("roi", np.zeros(0, np.float32)), ("scales", np.array([1, 1, 2, 2], np.float32))])
    rows["resize linear x2 64 @56"] = (p, 1, None)
    return rows


def ours(winml, path, batch, threads, iters):
    argv = [winml, "perf", "-m", path, "-f", "json", "--iterations", str(iters), "--warmup", "3", "--threads",
            str(threads), "--batch-size", str(batch)]
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
    d = json.loads(r.stdout)
    return (d["latency_ms"]["p50"], d["latency_ms"]["min"]), d["model_info"]["input_shapes"]


def ort(path, shapes, threads, iters):
    import onnxruntime as rt
    so = rt.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = rt.GraphOptimizationLevel.ORT_ENABLE_ALL
    s = rt.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {i.name: rng.random(shp, dtype=np.float32) for i, shp in zip(s.get_inputs(), shapes)}
    for _ in range(3):
        s.run(None, feeds)
    t = []
    for _ in range(iters):
        a = time.perf_counter()
        s.run(None, feeds)
        t.append((time.perf_counter() - a) * 1e3)
    return statistics.median(t), min(t)


def cpu_rows(a, rows):
    """Single-thread CPU time: ours (wm_cputime) and onnxruntime (process_time), min and median per run."""
    import tempfile

    import onnxruntime as rt
    from safetensors.numpy import save_file
    tool = os.path.join(os.path.dirname(a.winml), "wm_cputime")
    print(f"single-thread process CPU time per run, iterations={a.iterations}")
    print(f"{'row':30s} {'ours min':>9s} {'ort min':>9s} {'ratio':>6s} {'ours med':>9s} {'ort med':>9s} {'ratio':>6s}"
          f" {'GFLOP/s':>8s}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (path, batch, gflop) in rows.items():
            so = rt.SessionOptions()
            so.intra_op_num_threads = 1
            so.inter_op_num_threads = 1
            so.graph_optimization_level = rt.GraphOptimizationLevel.ORT_ENABLE_ALL
            s = rt.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            i0 = s.get_inputs()[0]
            shape = [batch if not isinstance(d, int) else d for d in i0.shape]
            feeds = {i0.name: np.random.default_rng(0).random(shape, dtype=np.float32)}
            fin = os.path.join(tmp, "in.safetensors")
            save_file(feeds, fin)
            r = subprocess.run([tool, path, fin, "--iterations", str(a.iterations)], capture_output=True, text=True)
            if r.returncode != 0:
                print(f"{name:30s} error: {r.stderr.strip()}")
                continue
            d = json.loads(r.stdout)
            s.run(None, feeds)
            t = []
            for _ in range(a.iterations):
                c = time.process_time()
                s.run(None, feeds)
                t.append((time.process_time() - c) * 1e3)
            om, oq = min(t), statistics.median(t)
            gf = f"{gflop * batch / (d['min_ms'] / 1e3):8.1f}" if gflop else ""
            print(f"{name:30s} {d['min_ms']:9.2f} {om:9.2f} {d['min_ms'] / om:6.2f} {d['median_ms']:9.2f} {oq:9.2f}"
                  f" {d['median_ms'] / oq:6.2f} {gf}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--rows", default="models,ops")
    ap.add_argument("--batch", type=int, default=1, help="also run the models at this batch size")
    ap.add_argument("--cpu-time", action="store_true", help="single-thread CPU time instead of wall time")
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench-vision"))
    ap.add_argument("--winml", default=os.path.join(ROOT, "build", "winml"))
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    rows = {}
    kinds = a.rows.split(",")
    if "ops" in kinds:
        rows.update(export_ops(a.work))
    if "models" in kinds:
        rows.update(export_models(a.work, a.batch))
    if a.cpu_time:
        cpu_rows(a, rows)
        return
    print(f"threads={a.threads} iterations={a.iterations}")
    print("median and minimum latency of each side; the ratio of minima is the steadier figure on a busy machine")
    print(f"{'row':30s} {'ours ms':>9s} {'ort ms':>9s} {'ours/ort':>9s} {'min ours':>9s} {'min ort':>9s} {'ratio':>6s}"
          f" {'GFLOP/s':>8s}")
    for name, (path, batch, gflop) in rows.items():
        mine, shapes = ours(a.winml, path, batch, a.threads, a.iterations)
        if mine is None:
            print(f"{name:30s} {'error':>9s}  {shapes}")
            continue
        theirs = ort(path, shapes, a.threads, a.iterations)
        gf = f"{gflop * batch / (mine[1] / 1e3):8.1f}" if gflop else ""
        print(f"{name:30s} {mine[0]:9.2f} {theirs[0]:9.2f} {mine[0] / theirs[0]:9.2f} {mine[1]:9.2f} {theirs[1]:9.2f}"
              f" {mine[1] / theirs[1]:6.2f} {gf}", flush=True)


if __name__ == "__main__":
    main()
