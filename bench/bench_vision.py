#!/usr/bin/env python3
"""Vision benchmark: our CPU engine vs onnxruntime and OpenVINO, same ONNX files, same thread count, same run.

Model rows (real architectures with random weights from transformers configs, exported once with
torch.onnx into --work, opset 17, dynamic batch): ViT-B/16 224 (ViTConfig()), DINOv2-small and -base 224
(Dinov2Config, hidden 384 / 6 heads and the default 768 / 12), CLIP ViT-B/32 image tower and text tower
(CLIPVisionConfig(patch_size=32), CLIPTextConfig(), projection 512; the text tower at 77 tokens), ResNet-50
224 (ResNetConfig()), CLIP ViT-H/14 image tower (laion/CLIP-ViT-H-14's vision config,
../shared/facts/architectures.md); batch 1 and --batch (ViT-H/14: batch 1 only, about 170 GFLOP a run).
Op rows (single-node ONNX models, written with the onnx helper into --work): the Conv shapes that
dominate ResNet-50 and ViT-B/16 (stem 7x7/2, 3x3, 1x1, strided 3x3, patch 16x16/16), depthwise
3x3 and 7x7 (MobileNet / ConvNeXt style), MaxPool 3x3/2 and GlobalAveragePool, BatchNormalization,
Resize linear x2.
For each: median and minimum latency of `winml perf` (our engine), of onnxruntime (ORT_ENABLE_ALL,
intra-op threads = --threads) and of OpenVINO's CPU plugin (PyPI openvino, which reads the ONNX file;
PERFORMANCE_HINT LATENCY, INFERENCE_NUM_THREADS = --threads, f32), run by --openvino-python (a separate
venv: bench/requirements-peers.txt; without it the OpenVINO column is nan); ratio = ours / the best peer
(< 1.0: we are faster; the ratio of minima is the steadier one on a shared machine); op rows also give our
GFLOP/s (from the minimum) for convolutions. Not a test: timings are noisy; the ratio measured side by
side is the figure.

--cpu-time: single-threaded process CPU time per run instead (tests/tools/wm_cputime for ours,
time.process_time around onnxruntime with one intra-op thread and around OpenVINO with one inference
thread): the steady figure on a machine shared with other jobs, where wall time mostly measures the
neighbours. --winml-base OLD/winml adds a baseline build's figure on each row, timed in the same run.
--profile: per-op-type milliseconds of each row instead: ours (WM_PROFILE=1), onnxruntime's profiler,
OpenVINO's performance counters, all single-threaded.

usage: bench/bench_vision.py [--threads N] [--iterations N] [--rows models,ops] [--models NAME,...] [--batch N]
                             [--cpu-time | --profile] [--openvino-python PATH] [--work DIR] [--winml PATH]
                             [--winml-base OLD/winml]
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


class _Pooled:
    """torch module wrapper returning the named outputs of a transformers model as a tuple."""

    def __new__(cls, model, names, inp):
        import torch

        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, x):
                o = self.model(**{inp: x})
                return tuple(getattr(o, n) for n in names)
        return M()


# name -> (builder, output names, input kind, batches); architectures from transformers' defaults and
# ../shared/facts/architectures.md (CLIP-ViT-H-14: vision 32 layers, width 1280, 16 heads, MLP 5120, patch 14)
def _model_specs():
    import transformers as T
    return {
        "vit-b16 224": (lambda: T.ViTForImageClassification(T.ViTConfig()), ["logits"], "image"),
        "dinov2-s 224": (lambda: T.Dinov2Model(T.Dinov2Config(hidden_size=384, num_attention_heads=6,
                                                              image_size=224)),
                         ["last_hidden_state", "pooler_output"], "image"),
        "dinov2-b 224": (lambda: T.Dinov2Model(T.Dinov2Config(image_size=224)), ["last_hidden_state",
                                                                                 "pooler_output"], "image"),
        "clip-b32 image": (lambda: T.CLIPVisionModelWithProjection(T.CLIPVisionConfig(patch_size=32,
                                                                                       projection_dim=512)),
                           ["image_embeds"], "image"),
        "clip-b32 text": (lambda: T.CLIPTextModelWithProjection(T.CLIPTextConfig(projection_dim=512)),
                          ["text_embeds"], "text"),
        "resnet-50 224": (lambda: T.ResNetForImageClassification(T.ResNetConfig()), ["logits"], "image"),
        "clip-h14 image": (lambda: T.CLIPVisionModelWithProjection(T.CLIPVisionConfig(
            hidden_size=1280, intermediate_size=5120, num_hidden_layers=32, num_attention_heads=16, image_size=224,
            patch_size=14, hidden_act="gelu", projection_dim=1024)), ["image_embeds"], "image"),
    }


def export_models(work, batch, only=None):
    """name -> (path, batch, None): each model exported once (torch.onnx, opset 17, dynamic batch) into work.
    ViT-H/14's image tower runs at batch 1 only: about 170 GFLOP a run, single-threaded seconds per image."""
    import torch
    out = {}
    for name, (make, names, kind) in _model_specs().items():
        if only and name not in only:
            continue
        path = os.path.join(work, "".join(ch if ch.isalnum() else "_" for ch in name) + ".onnx")
        if not os.path.exists(path):
            print(f"exporting {name} ...", file=sys.stderr, flush=True)
            torch.manual_seed(0)
            inp = "input_ids" if kind == "text" else "pixel_values"
            x = torch.randint(3, 49408, (1, 77)) if kind == "text" else torch.rand(1, 3, 224, 224)
            with torch.no_grad():
                torch.onnx.export(_Pooled(make().eval(), names, inp), (x,), path, input_names=[inp],
                                  output_names=names, opset_version=17, dynamo=False,
                                  dynamic_axes={inp: {0: "batch"}, **{n: {0: "batch"} for n in names}})
        for b in sorted({1, batch}):
            if b > 1 and name == "clip-h14 image":
                continue
            out[f"{name} b{b}"] = (path, b, None)
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
    feeds = make_feeds(s, shapes[0][0])
    for _ in range(3):
        s.run(None, feeds)
    t = []
    for _ in range(iters):
        a = time.perf_counter()
        s.run(None, feeds)
        t.append((time.perf_counter() - a) * 1e3)
    return statistics.median(t), min(t), feeds


def make_feeds(s, batch):
    """Random inputs for an onnxruntime session: floats in [0, 1), token ids in [3, 49408)."""
    rng = np.random.default_rng(0)
    feeds = {}
    for i in s.get_inputs():
        shape = [batch if not isinstance(d, int) else d for d in i.shape]
        feeds[i.name] = (rng.integers(3, 49408, shape, dtype=np.int64) if "int64" in i.type
                         else rng.random(shape, dtype=np.float32))
    return feeds


OV_CHILD = r"""
import json, statistics, sys, time
import numpy as np
import openvino as ov
path, fin, iters, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
feeds = dict(np.load(fin))
core = ov.Core()
cfg = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32"}
cm = core.compile_model(core.read_model(path), "CPU", cfg)
req = cm.create_infer_request()
req.infer(feeds)
cpu, wall = [], []
for _ in range(iters):
    c, w = time.process_time(), time.perf_counter()
    req.infer(feeds)
    cpu.append((time.process_time() - c) * 1e3)
    wall.append((time.perf_counter() - w) * 1e3)
print(json.dumps({"cpu_min": min(cpu), "cpu_med": statistics.median(cpu), "wall_min": min(wall),
                  "wall_med": statistics.median(wall)}))
"""


def openvino(a, path, feeds, threads, tmp):
    """OpenVINO's CPU plugin (latency hint, f32) in a.openvino_python's venv; None when it has none."""
    if not a.openvino_python:
        return None
    fin = os.path.join(tmp, "in.npz")
    np.savez(fin, **feeds)
    r = subprocess.run([a.openvino_python, "-c", OV_CHILD, path, fin, str(a.iterations), str(threads)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"openvino failed on {path}: {r.stderr.strip()[-500:]}", file=sys.stderr)
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def cpu_rows(a, rows):
    """Single-thread CPU time: ours (wm_cputime), onnxruntime (process_time) and OpenVINO (process_time, one
    inference thread), min and median per run; ratio = ours / the best peer (minima, then medians)."""
    import tempfile

    import onnxruntime as rt
    from safetensors.numpy import save_file
    tool = os.path.join(os.path.dirname(a.winml), "wm_cputime")
    base_tool = os.path.join(os.path.dirname(a.winml_base), "wm_cputime") if a.winml_base else ""
    print(f"single-thread process CPU time per run (ms), iterations={a.iterations}; ratio = ours / best peer")
    if base_tool:
        print(f"base: {base_tool} timed just before ours on each row; base ratio = base / best peer, "
              "new/base = ours / base (minima)")
    print(f"{'row':24s} {'ours min':>9s} {'ort min':>9s} {'ov min':>9s} {'ratio':>6s} {'ours med':>9s} {'ort med':>9s}"
          f" {'ov med':>9s} {'ratio':>6s} {'GFLOP/s':>8s}" +
          (f" {'base min':>9s} {'base ratio':>10s} {'new/base':>8s}" if base_tool else ""))
    with tempfile.TemporaryDirectory() as tmp:
        for name, (path, batch, gflop) in rows.items():
            so = rt.SessionOptions()
            so.intra_op_num_threads = 1
            so.inter_op_num_threads = 1
            so.graph_optimization_level = rt.GraphOptimizationLevel.ORT_ENABLE_ALL
            s = rt.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            feeds = make_feeds(s, batch)
            fin = os.path.join(tmp, "in.safetensors")
            save_file(feeds, fin)
            base = None
            if base_tool:
                r = subprocess.run([base_tool, path, fin, "--iterations", str(a.iterations)], capture_output=True,
                                   text=True)
                base = json.loads(r.stdout) if r.returncode == 0 else None
            r = subprocess.run([tool, path, fin, "--iterations", str(a.iterations)], capture_output=True, text=True)
            if r.returncode != 0:
                print(f"{name:24s} error: {r.stderr.strip()}")
                continue
            d = json.loads(r.stdout)
            s.run(None, feeds)
            t = []
            for _ in range(a.iterations):
                c = time.process_time()
                s.run(None, feeds)
                t.append((time.process_time() - c) * 1e3)
            del s
            om, oq = min(t), statistics.median(t)
            ov = openvino(a, path, feeds, 1, tmp)
            vm, vq = (ov["cpu_min"], ov["cpu_med"]) if ov else (float("nan"), float("nan"))
            bm, bq = min(om, vm) if ov else om, min(oq, vq) if ov else oq
            gf = f"{gflop * batch / (d['min_ms'] / 1e3):8.1f}" if gflop else ""
            bc = ""
            if base_tool:
                bc = f" {base['min_ms']:9.2f} {base['min_ms'] / bm:10.2f} {d['min_ms'] / base['min_ms']:8.3f}" if base \
                    else f" {'error':>9s}"
            print(f"{name:24s} {d['min_ms']:9.2f} {om:9.2f} {vm:9.2f} {d['min_ms'] / bm:6.2f} {d['median_ms']:9.2f}"
                  f" {oq:9.2f} {vq:9.2f} {d['median_ms'] / bq:6.2f} {gf:>8s}{bc}", flush=True)


OV_PROF_CHILD = r"""
import collections, json, sys
import numpy as np
import openvino as ov
path, fin, iters = sys.argv[1], sys.argv[2], int(sys.argv[3])
feeds = dict(np.load(fin))
core = ov.Core()
cfg = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": 1, "INFERENCE_PRECISION_HINT": "f32",
       "PERF_COUNT": True}
req = core.compile_model(core.read_model(path), "CPU", cfg).create_infer_request()
req.infer(feeds)
tot = collections.Counter()
for _ in range(iters):
    req.infer(feeds)
    for p in req.get_profiling_info():
        tot[p.node_type + " (" + p.exec_type.split("_")[0] + ")"] += p.real_time.total_seconds() * 1e3 / iters
print(json.dumps(tot.most_common(12)))
"""


def profile_rows(a, rows):
    """Per-op-type milliseconds of one single-threaded run: ours (WM_PROFILE=1 through wm_cputime), onnxruntime's
    profiler (node events summed by op type) and OpenVINO's performance counters (by node type, exec type)."""
    import collections
    import glob
    import tempfile

    import onnxruntime as rt
    from safetensors.numpy import save_file
    tool = os.path.join(os.path.dirname(a.winml), "wm_cputime")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (path, batch, _) in rows.items():
            print(f"== {name}: per-op-type ms per run, single thread")
            so = rt.SessionOptions()
            so.intra_op_num_threads = 1
            so.inter_op_num_threads = 1
            so.graph_optimization_level = rt.GraphOptimizationLevel.ORT_ENABLE_ALL
            so.enable_profiling = True
            so.profile_file_prefix = os.path.join(tmp, "ort")
            s = rt.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            feeds = make_feeds(s, batch)
            fin = os.path.join(tmp, "in.safetensors")
            save_file(feeds, fin)
            env = dict(os.environ, WM_PROFILE="1")
            r = subprocess.run([tool, path, fin, "--iterations", str(a.iterations)], capture_output=True, text=True,
                               env=env)
            print("ours (WM_PROFILE, warm-up run included):")
            print("\n".join("  " + ln for ln in r.stderr.strip().splitlines()[:13]))
            for _ in range(a.iterations + 1):
                s.run(None, feeds)
            prof = s.end_profiling()
            ev = json.load(open(prof))
            tot = collections.Counter()
            for e in ev:
                if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
                    tot[e["args"]["op_name"]] += e["dur"] / 1e3 / (a.iterations + 1)
            print(f"onnxruntime ({sum(tot.values()):.3f} ms per run):")
            for op, ms in tot.most_common(12):
                print(f"  {op:32s} {ms:9.3f} ms")
            for f in glob.glob(os.path.join(tmp, "ort*.json")):
                os.remove(f)
            if a.openvino_python:
                fn = os.path.join(tmp, "in.npz")
                np.savez(fn, **feeds)
                r = subprocess.run([a.openvino_python, "-c", OV_PROF_CHILD, path, fn, str(a.iterations)],
                                   capture_output=True, text=True)
                if r.returncode == 0:
                    top = json.loads(r.stdout.strip().splitlines()[-1])
                    print(f"openvino ({sum(ms for _, ms in top):.3f} ms in its 12 largest node types):")
                    for op, ms in top:
                        print(f"  {op:32s} {ms:9.3f} ms")
            print(flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--rows", default="models,ops")
    ap.add_argument("--batch", type=int, default=1, help="also run the models at this batch size")
    ap.add_argument("--cpu-time", action="store_true", help="single-thread CPU time instead of wall time")
    ap.add_argument("--profile", action="store_true", help="per-op-type profiles of the rows (ours, onnxruntime, "
                    "OpenVINO) instead of timings")
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench-vision"))
    ap.add_argument("--winml", default=os.path.join(ROOT, "build", "winml"))
    ap.add_argument("--winml-base", default="", help="--cpu-time: a second winml (a baseline build) whose wm_cputime "
                    "is timed on each row just before ours: base columns and ours / base")
    ap.add_argument("--models", default="", help="comma-separated model names (default: all of _model_specs)")
    ap.add_argument("--openvino-python", default=os.environ.get("WM_OPENVINO_PYTHON", ""),
                    help="python of a venv with PyPI openvino (bench/requirements-peers.txt); empty: no OpenVINO")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    rows = {}
    kinds = a.rows.split(",")
    if "ops" in kinds:
        rows.update(export_ops(a.work))
    if "models" in kinds:
        rows.update(export_models(a.work, a.batch, [m for m in a.models.split(",") if m] or None))
    if a.profile:
        profile_rows(a, rows)
        return
    if a.cpu_time:
        cpu_rows(a, rows)
        return
    import tempfile
    print(f"threads={a.threads} iterations={a.iterations}; ratio = ours / best peer (onnxruntime, OpenVINO)")
    print("median and minimum latency of each side; the ratio of minima is the steadier figure on a busy machine")
    print(f"{'row':24s} {'ours ms':>9s} {'ort ms':>9s} {'ov ms':>9s} {'ratio':>6s} {'min ours':>9s} {'min ort':>9s}"
          f" {'min ov':>9s} {'ratio':>6s} {'GFLOP/s':>8s}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (path, batch, gflop) in rows.items():
            mine, shapes = ours(a.winml, path, batch, a.threads, a.iterations)
            if mine is None:
                print(f"{name:24s} {'error':>9s}  {shapes}")
                continue
            tq, tm, feeds = ort(path, shapes, a.threads, a.iterations)
            ov = openvino(a, path, feeds, a.threads, tmp)
            vq, vm = (ov["wall_med"], ov["wall_min"]) if ov else (float("nan"), float("nan"))
            bq, bm = (min(tq, vq), min(tm, vm)) if ov else (tq, tm)
            gf = f"{gflop * batch / (mine[1] / 1e3):8.1f}" if gflop else ""
            print(f"{name:24s} {mine[0]:9.2f} {tq:9.2f} {vq:9.2f} {mine[0] / bq:6.2f} {mine[1]:9.2f} {tm:9.2f}"
                  f" {vm:9.2f} {mine[1] / bm:6.2f} {gf}", flush=True)


if __name__ == "__main__":
    main()
